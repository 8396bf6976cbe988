//! Early evaluation (OpenTofu 1.8's "static" evaluation): the expressions that must be known
//! before any provider runs or any state is read — a module call's `source` and `version`,
//! `required_providers`' `source` and `version`, the `backend` block's arguments and the
//! `encryption` block — are evaluated here, in one way for all of them.
//!
//! What such an expression may use: input variables (the root module's from `-var`,
//! `-var-file`, `terraform.tfvars`, `*.auto.tfvars`, `TF_VAR_*` and defaults; a child
//! module's from its call's arguments, themselves evaluated early in the parent, else its
//! defaults), local values that use only those (each evaluated on demand, in its own file),
//! `path.module`, `path.root`, `path.cwd`, `terraform.workspace`, and the pure functions.
//! Anything else — a resource, a data source, a module output, `count`/`each`/`self`, an
//! impure function's value — is an error at the reference saying it cannot be evaluated
//! early and what needed it. A root variable without a value is an error naming it and how
//! to give it one.
//!
//! A [`Frame`] is one module as early evaluation sees it; a child's frame points at its
//! parent's, so a child's variable is its call's argument evaluated in the parent.

use super::{Module, ModuleCall};
use crate::diag::{Diagnostic, Diagnostics, FileId};
use crate::eval::{Scope, ScopeError, Subject};
use crate::value::Value;
use crate::value::ValueMap;
use cairn_state::quote;
use hcl_edit::expr::Expression;
use std::cell::{OnceCell, RefCell};
use std::path::Path;

/// The summary of the error for a reference early evaluation cannot follow (OpenTofu's).
pub(crate) const DYNAMIC: &str = "Dynamic value in static context";

/// The root module's variable values, computed on first use (most configurations never
/// need them early).
pub(crate) struct LazyValues {
    cell: OnceCell<ValueMap>,
    compute: RefCell<Option<ComputeValues>>,
}

type ComputeValues = Box<dyn FnOnce() -> ValueMap>;

impl LazyValues {
    pub(crate) fn new(compute: impl FnOnce() -> ValueMap + 'static) -> Self {
        LazyValues {
            cell: OnceCell::new(),
            compute: RefCell::new(Some(Box::new(compute))),
        }
    }

    fn get(&self) -> &ValueMap {
        self.cell.get_or_init(|| {
            let f = self.compute.borrow_mut().take();
            f.map(|f| f()).unwrap_or_default()
        })
    }
}

/// Where a module's variables come from.
pub(crate) enum Vars<'a> {
    /// The root module's values (a variable absent or unknown here has no value).
    Known(&'a ValueMap),
    /// The root module's values, computed on first use.
    Lazy(&'a LazyValues),
    /// A child module: its call's arguments, evaluated early in the parent's frame; else
    /// the variable's default.
    Call {
        call: &'a ModuleCall,
        parent: &'a Frame<'a>,
    },
}

/// One module, as early evaluation sees it.
pub(crate) struct Frame<'a> {
    pub(crate) module: &'a Module,
    pub(crate) vars: Vars<'a>,
    /// The configuration's root directory (`path.root`, and the limit of file functions).
    pub(crate) root_dir: &'a Path,
    /// The working directory (`path.cwd`).
    pub(crate) cwd: &'a Path,
    /// `terraform.workspace`.
    pub(crate) workspace: &'a str,
    /// `path.module`: the module's directory relative to the root (`.` for the root).
    pub(crate) path_module: &'a str,
}

impl Frame<'_> {
    /// Evaluates `expr` (written in `file` of this frame's module) early, for `what` (a
    /// phrase: `module.net's source`, `the backend configuration`). The value is wholly
    /// known, or the result is an error saying why not.
    pub(crate) fn eval(
        &self,
        expr: &Expression,
        file: FileId,
        what: &str,
    ) -> Result<Value, Diagnostics> {
        let inner = RefCell::new(Diagnostics::new());
        let scope = EarlyScope {
            frame: self,
            file,
            what,
            depth: 0,
            inner: &inner,
        };
        let r = crate::eval::eval(expr, &scope);
        let mut diags = inner.into_inner();
        match r {
            Ok(v) if v.is_wholly_known() => Ok(v),
            Ok(_) => {
                diags.push(
                    Diagnostic::error(
                        "Unable to compute static value",
                        format!(
                            "The value of this expression is known only during the run (an \
                             impure function such as timestamp() or uuid(), or an unknown \
                             value), and {what} must be known before it: it is evaluated \
                             early, from variables and local values only."
                        ),
                    )
                    .with_span(Some(crate::config::span_in(file, expr))),
                );
                Err(diags)
            }
            Err(d) => {
                // A failure inside a variable's or local's expression was recorded where it
                // happened (`inner`); the reference to it is not a second error.
                diags.extend(d.into_iter().filter(|d| d.summary != NESTED));
                Err(diags)
            }
        }
    }

    /// How messages name this frame's module: `the root module`, `module.a.module.b`.
    fn name(&self) -> String {
        match self.module.path.is_root() {
            true => "the root module".into(),
            false => self.module.path.to_string(),
        }
    }
}

/// The summary of a reference whose own evaluation failed (already reported inside).
const NESTED: &str = "\u{0}early evaluation failed inside";

struct EarlyScope<'a> {
    frame: &'a Frame<'a>,
    file: FileId,
    /// What needs the value, for messages.
    what: &'a str,
    depth: usize,
    /// Errors inside the variables and locals this evaluation follows, where they are.
    inner: &'a RefCell<Diagnostics>,
}

impl EarlyScope<'_> {
    /// Evaluates `expr` of `frame` (in `file`) for `what`, recording its errors in `inner`.
    fn nested(
        &self,
        frame: &Frame<'_>,
        expr: &Expression,
        file: FileId,
        what: &str,
    ) -> Result<Value, ScopeError> {
        if self.depth > 64 {
            return Err(ScopeError::new(
                "Cycle in static evaluation",
                format!("{what} refers back to itself."),
            ));
        }
        let scope = EarlyScope {
            frame,
            file,
            what,
            depth: self.depth + 1,
            inner: self.inner,
        };
        crate::eval::eval(expr, &scope).map_err(|d| {
            self.inner
                .borrow_mut()
                .extend(d.into_iter().filter(|d| d.summary != NESTED));
            ScopeError::new(NESTED, String::new())
        })
    }

    fn var(&self, name: &str) -> Result<Value, ScopeError> {
        let frame = self.frame;
        let Some(decl) = frame.module.variables.get(name) else {
            return Err(ScopeError::new(
                "Reference to undeclared input variable",
                format!(
                    "An input variable with the name {} has not been declared.{}",
                    quote(name),
                    crate::eval::suggest::suffix(
                        name,
                        frame.module.variables.keys().map(String::as_str)
                    )
                ),
            ));
        };
        // A sensitive variable's value is marked, so that what must not take one (a module's
        // source or version) can refuse it, as OpenTofu does.
        let mark = |v: Value| match decl.sensitive {
            true => v.sensitive(),
            false => v,
        };
        let known = |values: &ValueMap| match values.get(name) {
            Some(v) if v.is_wholly_known() => Ok(mark(v.clone())),
            _ => Err(ScopeError::new(
                "No value for required variable",
                format!(
                    "The root module input variable {} is not set, and has no default value, \
                     and {} must be known before anything else is evaluated (early \
                     evaluation). Give it a value with -var '{name}=…' (at `cairn init` too), \
                     a -var-file, a terraform.tfvars or *.auto.tfvars file, or the \
                     environment variable TF_VAR_{name}.",
                    quote(name),
                    self.what
                ),
            )),
        };
        match &frame.vars {
            Vars::Known(values) => known(values),
            Vars::Lazy(lazy) => known(lazy.get()),
            Vars::Call { call, parent } => match call.inputs.get(name) {
                Some((expr, _)) => {
                    let what = format!(
                        "the argument {name} of module.{} (var.{name} in {}), which {} uses",
                        call.name,
                        frame.name(),
                        self.what
                    );
                    let v = self.nested(parent, expr, call.file, &what)?;
                    crate::eval::expr::convert(&v, &decl.ty)
                        .map(mark)
                        .map_err(|m| {
                            ScopeError::new(
                                "Invalid value for input variable",
                                format!(
                                    "The value module.{} gives var.{name} is not suitable: {m}.",
                                    call.name
                                ),
                            )
                        })
                }
                None => decl.default.clone().map(mark).ok_or_else(|| {
                    ScopeError::new(
                        "No value for required variable",
                        format!(
                            "var.{name} of {} has no default, and module.{} does not set it; \
                             {} needs it.",
                            frame.name(),
                            call.name,
                            self.what
                        ),
                    )
                }),
            },
        }
    }

    fn local(&self, name: &str) -> Result<Value, ScopeError> {
        let frame = self.frame;
        let Some(l) = frame.module.locals.get(name) else {
            return Err(ScopeError::new(
                "Reference to undeclared local value",
                format!(
                    "A local value with the name {} has not been declared.{}",
                    quote(name),
                    crate::eval::suggest::suffix(
                        name,
                        frame.module.locals.keys().map(String::as_str)
                    )
                ),
            ));
        };
        let what = format!("local.{name}, which {} uses", self.what);
        self.nested(frame, &l.expr, l.file, &what)
    }
}

impl Scope for EarlyScope<'_> {
    fn resolve(&self, subject: &Subject) -> Result<Value, ScopeError> {
        match subject {
            Subject::Var(name) => self.var(name),
            Subject::Local(name) => self.local(name),
            Subject::Path(p) => match p.as_str() {
                "module" => Ok(Value::string(self.frame.path_module)),
                "root" => Ok(Value::string(".")),
                "cwd" => Ok(Value::string(self.frame.cwd.display().to_string())),
                other => Err(ScopeError::new(
                    "Invalid \"path\" attribute",
                    format!(
                        "The \"path\" object has no attribute named {other:?}. Use \
                         path.module, path.root or path.cwd."
                    ),
                )),
            },
            Subject::Terraform(t) if t == "workspace" => Ok(Value::string(self.frame.workspace)),
            Subject::ModuleCall { .. } => Err(ScopeError::new(
                "Module output not supported in static context",
                format!(
                    "Unable to use {} in static context, which is required by {}: a module's \
                     outputs are known only once the run evaluates it. Only variables, local \
                     values, path.* and terraform.workspace can be evaluated early.",
                    crate::eval::expr::describe(subject),
                    self.what
                ),
            )),
            other => {
                let why = match other {
                    Subject::Resource { .. } => {
                        "a resource's or data source's value needs its provider and the state"
                    }
                    Subject::CountIndex | Subject::EachKey | Subject::EachValue => {
                        "instance keys exist only once the run expands the block"
                    }
                    _ => "it is known only during the run",
                };
                Err(ScopeError::new(
                    DYNAMIC,
                    format!(
                        "Unable to use {} in static context, which is required by {}: it \
                         cannot be evaluated early ({why}). Only variables, local values, \
                         path.* and terraform.workspace can be evaluated early.",
                        crate::eval::expr::describe(other),
                        self.what
                    ),
                ))
            }
        }
    }
    fn file(&self) -> FileId {
        self.file
    }
    fn module_dir(&self) -> &Path {
        &self.frame.module.dir
    }
    fn root_dir(&self) -> &Path {
        self.frame.root_dir
    }
}
