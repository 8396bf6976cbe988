//! `cairn console`: reads expressions from standard input, one per line, and prints each value
//! in the configuration's scope, as `terraform console` does.
//!
//! The scope: input variables (from `-var`, `-var-file`, tfvars files and `TF_VAR_*`), the root
//! module's locals (evaluated on demand, each once), resources and data sources as the state
//! holds them (unknown when the state has no object yet), module outputs as unknown (they are
//! only known to a plan), `path.*` and `terraform.workspace`.
//!
//! Decisions:
//! - As Terraform's console does when standard input is not a terminal, the first error stops
//!   it with exit code 1; on a terminal an error is reported and the next line is read.
//! - Each input line is registered in the `SourceMap` as `<console-input>`, so errors point at
//!   the part of the line at fault.

use super::args::ConsoleArgs;
use super::lifecycle::prepare;
use super::output::Exit;
use super::state_cmds::open_store;
use super::Context;
use crate::config::{Config, ResourceKey};
use crate::diag::{Diagnostic, Diagnostics, FileId, Span};
use crate::eval::{Scope, ScopeError, Subject};
use crate::value::{format_hcl, Value};
use cairn_state::{InstanceKey, Mode, ModulePath, ResourceAddr, Snapshot};
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A local's evaluation state: running (to catch cycles) or done.
#[derive(Clone)]
enum LocalState {
    Running,
    Done(Result<Value, ()>),
}

struct ConsoleScope<'a> {
    config: &'a Config,
    values: &'a BTreeMap<String, Value>,
    snapshot: &'a Snapshot,
    locals: RefCell<BTreeMap<String, LocalState>>,
    /// Problems found while evaluating locals (reported with the line that needed them).
    local_diags: RefCell<Diagnostics>,
    root_dir: PathBuf,
    cwd: PathBuf,
}

/// The console scope seen from one file (the input line, or a local's file).
struct FileScope<'a, 'b> {
    inner: &'b ConsoleScope<'a>,
    file: FileId,
}

impl ConsoleScope<'_> {
    fn local(&self, name: &str) -> Result<Value, ScopeError> {
        let Some(local) = self.config.root.locals.get(name) else {
            let names: Vec<&str> = self.config.root.locals.keys().map(String::as_str).collect();
            return Err(ScopeError::new(
                "Reference to undeclared local value",
                format!(
                    "A local value with the name {} has not been declared.{}",
                    cairn_state::quote(name),
                    crate::eval::suggest::suffix(name, names)
                ),
            ));
        };
        let state = self.locals.borrow().get(name).cloned();
        match state {
            Some(LocalState::Done(Ok(v))) => return Ok(v),
            Some(LocalState::Done(Err(()))) => {
                return Err(ScopeError::new(
                    "Invalid local value",
                    format!("local.{name} has errors (shown above)."),
                ))
            }
            Some(LocalState::Running) => {
                return Err(ScopeError::new(
                    "Cycle in local values",
                    format!("local.{name} refers to itself, through other locals."),
                ))
            }
            None => {}
        }
        self.locals
            .borrow_mut()
            .insert(name.to_string(), LocalState::Running);
        let scope = FileScope {
            inner: self,
            file: local.file,
        };
        let result = crate::eval::expr::eval(&local.expr, &scope);
        let done = match result {
            Ok(v) => Ok(v),
            Err(d) => {
                self.local_diags.borrow_mut().extend(d);
                Err(())
            }
        };
        self.locals
            .borrow_mut()
            .insert(name.to_string(), LocalState::Done(done.clone()));
        done.map_err(|_| {
            ScopeError::new(
                "Invalid local value",
                format!("local.{name} has errors (shown above)."),
            )
        })
    }

    fn resource(&self, mode: Mode, type_: &str, name: &str) -> Result<Value, ScopeError> {
        let key = ResourceKey {
            mode,
            type_: type_.to_string(),
            name: name.to_string(),
        };
        let Some(r) = self.config.root.resources.get(&key) else {
            let what = if mode == Mode::Data {
                "data resource"
            } else {
                "managed resource"
            };
            return Err(ScopeError::new(
                format!("Reference to undeclared {what}"),
                format!(
                    "A {what} {}{type_}.{name} has not been declared in the root module.",
                    if mode == Mode::Data { "data." } else { "" }
                ),
            ));
        };
        let addr = ResourceAddr::new(ModulePath::root(), mode, type_, name);
        let mut instances: Vec<(Option<InstanceKey>, Value)> = Vec::new();
        match mode {
            Mode::Managed => {
                for (a, inst) in &self.snapshot.resources {
                    if a.resource == addr {
                        if let Some(o) = &inst.current {
                            instances.push((a.key.clone(), Value::from_stored(&o.attrs)));
                        }
                    }
                }
            }
            Mode::Data => {
                for (a, d) in &self.snapshot.data {
                    if a.resource == addr {
                        instances.push((a.key.clone(), Value::from_stored(&d.attrs)));
                    }
                }
            }
        }
        let expanded = r.count.is_some() || r.for_each.is_some();
        Ok(match instances.first() {
            None => Value::unknown(),
            Some((None, v)) if !expanded => v.clone(),
            Some((Some(InstanceKey::Int(_)), _)) => {
                Value::Tuple(instances.into_iter().map(|(_, v)| v).collect())
            }
            Some(_) => Value::Object(
                instances
                    .into_iter()
                    .filter_map(|(k, v)| match k {
                        Some(InstanceKey::Str(s)) => Some((s, v)),
                        _ => None,
                    })
                    .collect(),
            ),
        })
    }
}

impl Scope for FileScope<'_, '_> {
    fn resolve(&self, subject: &Subject) -> Result<Value, ScopeError> {
        let s = self.inner;
        match subject {
            Subject::Var(name) => s.values.get(name).cloned().ok_or_else(|| {
                let names: Vec<&str> = s.values.keys().map(String::as_str).collect();
                ScopeError::new(
                    "Reference to undeclared input variable",
                    format!(
                        "An input variable with the name {} has not been declared.{}",
                        cairn_state::quote(name),
                        crate::eval::suggest::suffix(name, names)
                    ),
                )
            }),
            Subject::Local(name) => s.local(name),
            Subject::Resource { mode, type_, name } => s.resource(*mode, type_, name),
            Subject::ModuleCall { name, .. } => {
                if s.config.root.calls.contains_key(name) {
                    Ok(Value::unknown())
                } else {
                    Err(ScopeError::new(
                        "Reference to undeclared module",
                        format!("No module call named {name} is declared in the root module."),
                    ))
                }
            }
            Subject::Path(p) => match p.as_str() {
                "module" | "root" => Ok(Value::string(".")),
                "cwd" => Ok(Value::string(s.cwd.display().to_string())),
                other => Err(ScopeError::new(
                    "Invalid \"path\" attribute",
                    format!("The \"path\" object has no attribute {other:?}: use path.module, path.root or path.cwd."),
                )),
            },
            Subject::Terraform(a) if a == "workspace" => Ok(Value::string("default")),
            other => Err(ScopeError::new(
                "Invalid reference",
                format!("{other:?} is not available in the console: it only has a value inside a resource or module block."),
            )),
        }
    }
    fn file(&self) -> FileId {
        self.file
    }
    fn module_dir(&self) -> &Path {
        &self.inner.root_dir
    }
    fn root_dir(&self) -> &Path {
        &self.inner.root_dir
    }
}

/// `a` carries only `-var`/`-var-file`, which arrive in command-line order as `vars`.
pub fn console(ctx: &Context, _a: &ConsoleArgs, vars: Vec<crate::config::VarArg>) -> Exit {
    let (mut config, values) = match prepare(ctx, &vars, None, false) {
        Ok(cv) => cv,
        Err(e) => return e,
    };
    let snapshot = match open_store(ctx, "console", false, Duration::ZERO) {
        Ok(Some(store)) => store.snapshot().clone(),
        Ok(None) => Snapshot::new(),
        Err(d) => return ctx.fail(d, false),
    };
    // The console's lines join the configuration's files in one map (file ids stay valid).
    let mut map = std::mem::take(&mut config.sources);
    let cwd = std::env::current_dir().unwrap_or_else(|_| ".".into());
    let scope = ConsoleScope {
        config: &config,
        values: &values,
        snapshot: &snapshot,
        locals: RefCell::new(BTreeMap::new()),
        local_diags: RefCell::new(Diagnostics::new()),
        root_dir: config.root_dir.clone(),
        cwd,
    };
    let stdin = std::io::stdin();
    let mut failed = false;
    for line in stdin.lock().lines() {
        let Ok(line) = line else { break };
        let text = line.trim_end();
        if text.trim().is_empty() {
            continue;
        }
        if text.trim() == "exit" {
            break;
        }
        let file = map.add("<console-input>", text.to_string());
        let result = match hcl_edit::parser::parse_expr(text) {
            Ok(expr) => crate::eval::expr::eval(
                &expr,
                &FileScope {
                    inner: &scope,
                    file,
                },
            ),
            Err(e) => {
                let col = e.location().column().saturating_sub(1);
                let start = text
                    .char_indices()
                    .nth(col)
                    .map(|(i, _)| i)
                    .unwrap_or(text.len());
                Err(
                    Diagnostic::error("Invalid expression", e.message().to_string())
                        .with_span(Some(Span {
                            file,
                            start,
                            end: (start + 1).min(text.len()),
                        }))
                        .into(),
                )
            }
        };
        let mut diags = std::mem::take(&mut *scope.local_diags.borrow_mut());
        match result {
            Ok(v) => {
                ctx.report(&map, &diags, false);
                ctx.out(&format!("{}\n", format_hcl(&v)));
            }
            Err(d) => {
                diags.extend(d);
                ctx.report(&map, &diags, false);
                failed = true;
                if !ctx.stdin_tty {
                    break;
                }
            }
        }
    }
    if failed {
        Exit::Error
    } else {
        Exit::Ok
    }
}
