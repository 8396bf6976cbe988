//! What a test file's expressions are evaluated in: [`PlainScope`] for `variables` (test
//! variables and `run.NAME`), [`RunScope`] for `assert` blocks (the walk's root module scope,
//! plus `output.NAME`, `run.NAME` and the test's own variables); and which checkable object a
//! diagnostic is about, for `expect_failures`.

use super::super::values::{InstanceScope, Paths, Repetition, Values};
use crate::addr::{Mode, ModulePath};
use crate::config::test_file::Assert;
use crate::config::Config;
use crate::diag::{Diagnostic, Diagnostics, FileId, Span};
use crate::eval::{Scope, ScopeError, Subject};
use crate::value::Value;
use crate::value::ValueMap;
use std::path::{Path, PathBuf};

/// `run.NAME` as a subject: a traversal `run.x` reads as a resource of type `run`.
fn special(subject: &Subject) -> Option<(&str, &str)> {
    match subject {
        Subject::Resource {
            mode: Mode::Managed,
            type_,
            name,
        } if type_ == "run" || type_ == "output" => Some((type_.as_str(), name.as_str())),
        _ => None,
    }
}

fn run_value(runs: &ValueMap, name: &str) -> Result<Value, ScopeError> {
    runs.get(name).cloned().ok_or_else(|| {
        ScopeError::new(
            "Reference to unknown run block",
            format!(
                "The run block {name:?} does not exist within this test file, or has not run yet."
            ),
        )
    })
}

/// Test variables and earlier runs' outputs.
pub(super) struct PlainScope<'a> {
    vars: &'a ValueMap,
    runs: &'a ValueMap,
    file: FileId,
    dir: PathBuf,
}

impl<'a> PlainScope<'a> {
    pub(super) fn new(vars: &'a ValueMap, runs: &'a ValueMap, file: FileId, dir: &Path) -> Self {
        PlainScope {
            vars,
            runs,
            file,
            dir: dir.to_path_buf(),
        }
    }
}

impl Scope for PlainScope<'_> {
    fn resolve(&self, subject: &Subject) -> Result<Value, ScopeError> {
        if let Some(("run", name)) = special(subject) {
            return run_value(self.runs, name);
        }
        match subject {
            Subject::Var(n) => self.vars.get(n).cloned().ok_or_else(|| {
                ScopeError::new(
                    "Reference to unavailable variable",
                    format!("The input variable {n:?} is not available to the current context. Within the variables block of a run block you can only reference variables defined at the file or global levels."),
                )
            }),
            Subject::Path(p) if p == "root" || p == "module" => Ok(Value::string(".")),
            Subject::Path(p) if p == "cwd" => Ok(Value::string(self.dir.display().to_string())),
            _ => Err(ScopeError::new(
                "Invalid reference",
                "You can only reference run blocks and variables from within the variables block of a run block or a test file.",
            )),
        }
    }
    fn file(&self) -> FileId {
        self.file
    }
    fn module_dir(&self) -> &Path {
        &self.dir
    }
    fn root_dir(&self) -> &Path {
        &self.dir
    }
}

/// A run's assertion scope.
pub(super) struct RunScope<'a> {
    inner: InstanceScope<'a>,
    outputs: &'a ValueMap,
    runs: &'a ValueMap,
    test_vars: &'a ValueMap,
}

static ROOT: std::sync::LazyLock<ModulePath> = std::sync::LazyLock::new(ModulePath::root);

impl<'a> RunScope<'a> {
    pub(super) fn new(
        values: &'a Values,
        paths: &'a Paths,
        file: FileId,
        outputs: &'a ValueMap,
        runs: &'a ValueMap,
        test_vars: &'a ValueMap,
    ) -> Self {
        RunScope {
            inner: InstanceScope {
                values,
                module: &ROOT,
                repetition: &Repetition::None,
                file,
                paths,
            },
            outputs,
            runs,
            test_vars,
        }
    }
}

impl Scope for RunScope<'_> {
    fn resolve(&self, subject: &Subject) -> Result<Value, ScopeError> {
        match special(subject) {
            Some(("run", name)) => return run_value(self.runs, name),
            Some((_, name)) => {
                return self.outputs.get(name).cloned().ok_or_else(|| {
                    ScopeError::new(
                        "Reference to undeclared output value",
                        format!("An output value with the name {name:?} has not been declared."),
                    )
                })
            }
            None => {}
        }
        match (self.inner.resolve(subject), subject) {
            (Err(_), Subject::Var(n)) if self.test_vars.contains_key(n) => {
                Ok(self.test_vars[n].clone())
            }
            (r, _) => r,
        }
    }
    fn file(&self) -> FileId {
        self.inner.file()
    }
    fn module_dir(&self) -> &Path {
        self.inner.module_dir()
    }
    fn root_dir(&self) -> &Path {
        self.inner.root_dir()
    }
    fn is_open(&self, subject: &Subject) -> bool {
        special(subject).is_none() && self.inner.is_open(subject)
    }
    fn provider_functions(&self) -> Option<&dyn crate::eval::ProviderFunctions> {
        self.inner.provider_functions()
    }
}

fn span_of(e: &hcl_edit::expr::Expression, file: FileId) -> Span {
    crate::config::span_in(file, e)
}

/// Evaluates one `assert`: a false condition is "Test assertion failed" with the error
/// message; an unknown one (a plan's computed values) is an error saying so.
pub(super) fn check_assert(
    a: &Assert,
    scope: &dyn Scope,
    planned: bool,
) -> Result<(), Diagnostics> {
    let span = span_of(&a.condition, scope.file());
    let v = crate::eval::eval(&a.condition, scope)?;
    if !v.is_wholly_known() {
        let detail = if planned {
            "Condition expression could not be evaluated at this time. This means you have executed a `run` block with `command = plan` and one of the values your condition depended on is not known until after the plan has been applied. Either remove this value from your condition, or execute an `apply` command from this `run` block. Alternatively, if there is an override for this value, you can make it available during the plan phase by setting `override_during = plan` in the `override_` block."
        } else {
            "Condition expression could not be evaluated at this time."
        };
        return Err(Diagnostic::error("Unknown condition value", detail)
            .with_span(Some(span))
            .into());
    }
    let ok = match v.unmarked() {
        Value::Bool(b) => *b,
        Value::Null(_) => {
            return Err(Diagnostic::error(
                "Invalid condition result",
                "Condition expression must return either true or false, not null.",
            )
            .with_span(Some(span))
            .into())
        }
        other => match crate::eval::convert::convert(other.clone(), &crate::value::Type::Bool) {
            Ok(Value::Bool(b)) => b,
            _ => {
                return Err(Diagnostic::error(
                    "Invalid condition result",
                    "Condition expression must return either true or false.",
                )
                .with_span(Some(span))
                .into())
            }
        },
    };
    if ok {
        return Ok(());
    }
    let message = match crate::eval::eval(&a.error_message, scope) {
        Ok(m) => match m.unmarked() {
            Value::String(s) => s.to_string(),
            _ => "(the error message is not a known string)".to_string(),
        },
        Err(d) => return Err(d),
    };
    Err(Diagnostic::error("Test assertion failed", message)
        .with_span(Some(span))
        .into())
}

/// The checkable object a diagnostic is about (`var.x`, `sim_thing.a`, `output.o`,
/// `check.c`), in the root module.
pub(super) fn checkable_object(d: &Diagnostic, config: &Config) -> Option<String> {
    let root = config.module(&ModulePath::root())?;
    let inside = |s: Span| {
        d.span.is_some_and(|ds| {
            ds.file == s.file && ds.start >= s.start && ds.end <= s.end.max(s.start)
        })
    };
    if let Some(a) = &d.address {
        if let Ok(addr) = a.parse::<crate::addr::ResourceInstanceAddr>() {
            if addr.resource.module.is_root() {
                let r = &addr.resource;
                let prefix = if r.mode == Mode::Data { "data." } else { "" };
                return Some(format!("{prefix}{}.{}", r.type_, r.name));
            }
        }
    }
    d.span?;
    for (name, v) in &root.variables {
        // A root variable's failed validation is reported at its value, and names the rule.
        let by_rule = d.summary == "Invalid value for variable"
            && v.validations.iter().any(|val| {
                d.detail.contains(&format!(
                    "validation rule at {}.",
                    config.sources.location(val.span)
                ))
            });
        if by_rule || v.validations.iter().any(|val| inside(val.span)) {
            return Some(format!("var.{name}"));
        }
    }
    for (name, o) in &root.outputs {
        if o.preconditions.iter().any(|p| inside(p.span)) {
            return Some(format!("output.{name}"));
        }
    }
    for (name, c) in &root.checks {
        if c.asserts.iter().any(|p| inside(p.span)) {
            return Some(format!("check.{name}"));
        }
    }
    None
}

/// Whether the `expect_failures` entry `t` names `object` (an instance key in `t` is ignored,
/// as a failure is reported for the resource).
pub(super) fn names(t: &str, object: &str) -> bool {
    let base = t.split('[').next().unwrap_or(t);
    base == object
}

/// A body's text with each argument's expression replaced by its value (nested blocks kept as
/// blocks), for a test file's `provider` block.
pub(super) fn body_text(
    body: &hcl_edit::structure::Body,
    scope: &dyn Scope,
) -> Result<String, Diagnostics> {
    use hcl_edit::structure::Structure;
    let mut out = String::new();
    let mut diags = Diagnostics::new();
    for s in body.iter() {
        match s {
            Structure::Attribute(a) => match crate::eval::eval(&a.value, scope) {
                Ok(v) => {
                    let (v, _) = v.deep_unmark();
                    out.push_str(&format!(
                        "{} = {}\n",
                        a.key.as_str(),
                        crate::value::format_hcl(&v)
                    ));
                }
                Err(d) => diags.extend(d),
            },
            Structure::Block(b) => {
                let labels: Vec<String> = b
                    .labels
                    .iter()
                    .map(|l| format!("{:?}", l.as_str()))
                    .collect();
                match body_text(&b.body, scope) {
                    Ok(inner) => out.push_str(&format!(
                        "{} {}{{\n{inner}}}\n",
                        b.ident.as_str(),
                        labels.iter().map(|l| format!("{l} ")).collect::<String>()
                    )),
                    Err(d) => diags.extend(d),
                }
            }
        }
    }
    if diags.has_errors() {
        Err(diags)
    } else {
        Ok(out)
    }
}
