//! `validate`: what can be known about a configuration without state or provider calls.
//! After `check_references`, every expression is evaluated with every variable, local,
//! resource and module value unknown (of its declared type where there is one), as
//! Terraform's validate walk does: constant mistakes (`"a" + 1`, unknown functions, wrong
//! argument counts, attributes a typed variable does not have) are found, and resource bodies
//! are checked against their schemas (unknown arguments, missing required ones, wrong types).

use super::{check_references, span_in, Config, Module};
use crate::addr::Mode;
use crate::diag::{Diagnostic, Diagnostics, FileId};
use crate::eval::expand::{count_value, for_each_value};
use crate::eval::expr::convert;
use crate::eval::{eval, eval_block_body, eval_config_body, Scope, ScopeError, Subject};
use crate::schema::Block;
use crate::value::{Type, Value};
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::path::Path;

/// Validates a loaded configuration. `schema` gives the schema of a resource (`Managed`) or
/// data source (`Data`) type, when a provider describes it; a type without one is evaluated
/// as written.
pub(crate) fn validate<'a>(
    config: &Config,
    schema: &dyn Fn(Mode, &str) -> Option<&'a Block>,
) -> Diagnostics {
    let mut diags = check_references(config);
    diags.extend(super::check_ephemeral(config, schema));
    for m in config.modules() {
        validate_module(config, m, schema, &mut diags);
    }
    // The same problem can be reached twice (a local used in two places is evaluated once,
    // but a bad expression inside a dynamic block is evaluated per element).
    let mut seen = Vec::new();
    diags.0.retain(|d| {
        if seen.contains(d) {
            false
        } else {
            seen.push(d.clone());
            true
        }
    });
    diags
}

fn validate_module<'a>(
    config: &Config,
    m: &Module,
    schema: &dyn Fn(Mode, &str) -> Option<&'a Block>,
    diags: &mut Diagnostics,
) {
    let locals = RefCell::new(BTreeMap::new());
    let scope = |file: FileId| Unknowns {
        module: m,
        file,
        root_dir: &config.root_dir,
        locals: &locals,
    };
    let mut run = |r: Result<Value, Diagnostics>| {
        if let Err(d) = r {
            diags.extend(d);
        }
    };
    for p in &m.providers {
        run(eval_block_body(&p.body, None, &scope(p.file), Some(p.span)));
    }
    for l in m.locals.values() {
        run(eval(&l.expr, &scope(l.file)));
    }
    for r in m.resources.values() {
        let s = scope(r.file);
        // Known meta-arguments get the checks plan makes (a number for count, a map or set
        // of strings for for_each); unknown ones wait for plan.
        if let Some(c) = &r.count {
            run(count_value(c, &s).map(|_| Value::unknown()));
        }
        if let Some(f) = &r.for_each {
            run(for_each_value(f, &s).map(|_| Value::unknown()));
        }
        run(eval_config_body(
            &r.body,
            schema(r.mode, &r.type_),
            &s,
            Some(r.span),
            r.json,
        ));
    }
    for o in m.outputs.values() {
        match eval(&o.value, &scope(o.file)) {
            Err(d) => diags.extend(d),
            Ok(v) if m.path.is_root() && !o.sensitive && v.contains_sensitive() => {
                diags.push(
                    Diagnostic::error(
                        "Output refers to sensitive values",
                        "To reduce the risk of accidentally exporting sensitive data that was \
                         intended to be only internal, Cairn requires that any root module \
                         output containing sensitive data be explicitly marked as sensitive, to \
                         confirm your intent.\n\nIf you do intend to export this data, annotate \
                         the output value as sensitive by adding the following argument:\n    \
                         sensitive = true",
                    )
                    .with_span(Some(span_in(o.file, &o.value))),
                );
            }
            Ok(_) => {}
        }
    }
    for c in m.calls.values() {
        let s = scope(c.file);
        if let Some(Err(d)) = c.count.as_ref().map(|e| count_value(e, &s)) {
            diags.extend(d);
        }
        if let Some(Err(d)) = c.for_each.as_ref().map(|e| for_each_value(e, &s)) {
            diags.extend(d);
        }
        let child = m.children.get(&c.name);
        for (name, (e, _)) in &c.inputs {
            let v = match eval(e, &s) {
                Ok(v) => v,
                Err(d) => {
                    diags.extend(d);
                    continue;
                }
            };
            let Some(var) = child.and_then(|ch| ch.variables.get(name)) else {
                continue;
            };
            if v.is_null() && !var.nullable {
                diags.push(
                    Diagnostic::error(
                        "Invalid value for input variable",
                        format!(
                            "The given value is not suitable for {}.var.{name}: required variable \
                             may not be set to null.",
                            m.path.child(&c.name, None)
                        ),
                    )
                    .with_span(Some(span_in(c.file, e))),
                );
            } else if let Err(msg) = convert(&v, &var.ty) {
                let at = config.sources.location(var.span);
                diags.push(
                    Diagnostic::error(
                        "Invalid value for input variable",
                        format!(
                            "The given value is not suitable for {}.var.{name} declared at {at}: \
                             {msg}.",
                            m.path.child(&c.name, None)
                        ),
                    )
                    .with_span(Some(span_in(c.file, e))),
                );
            }
        }
    }
}

/// Every term is unknown; variables are unknown of their declared type.
struct Unknowns<'a> {
    module: &'a Module,
    file: FileId,
    root_dir: &'a Path,
    /// Local values evaluated so far (shared by every scope of the module); `None` while one
    /// is being evaluated, so a cycle resolves to unknown instead of recursing.
    locals: &'a RefCell<BTreeMap<String, Option<Value>>>,
}

impl Unknowns<'_> {
    /// A local's value, evaluated on first use. Its own errors are reported where the local
    /// is checked; here a failing local is simply unknown.
    fn local(&self, name: &str) -> Value {
        if let Some(done) = self.locals.borrow().get(name) {
            return done.clone().unwrap_or_else(Value::unknown);
        }
        let Some(l) = self.module.locals.get(name) else {
            return Value::unknown();
        };
        self.locals.borrow_mut().insert(name.to_string(), None);
        let scope = Unknowns {
            file: l.file,
            ..*self
        };
        let v = eval(&l.expr, &scope).unwrap_or_else(|_| Value::unknown());
        self.locals
            .borrow_mut()
            .insert(name.to_string(), Some(v.clone()));
        v
    }
}

impl Scope for Unknowns<'_> {
    fn resolve(&self, s: &Subject) -> Result<Value, ScopeError> {
        Ok(match s {
            Subject::Var(n) => match self.module.variables.get(n) {
                Some(v) => {
                    let u = Value::Unknown(v.ty.clone());
                    if v.sensitive {
                        u.sensitive()
                    } else {
                        u
                    }
                }
                None => Value::unknown(),
            },
            Subject::CountIndex => Value::Unknown(Type::Number),
            Subject::EachKey => Value::Unknown(Type::String),
            Subject::Path(p) => Value::string(match p.as_str() {
                "module" => self.module.dir.display().to_string(),
                "root" => self.root_dir.display().to_string(),
                _ => ".".to_string(),
            }),
            Subject::Terraform(_) => Value::string("default"),
            Subject::Local(n) => self.local(n),
            _ => Value::unknown(),
        })
    }
    fn file(&self) -> FileId {
        self.file
    }
    fn module_dir(&self) -> &Path {
        &self.module.dir
    }
    fn root_dir(&self) -> &Path {
        self.root_dir
    }
}
