//! Root module input variables: values from the environment, variable files and the command
//! line, merged in Terraform's precedence and converted to each variable's declared type.
//!
//! Precedence, lowest first: `TF_VAR_name` environment variables, `terraform.tfvars`,
//! `terraform.tfvars.json`, `*.auto.tfvars` / `*.auto.tfvars.json` in lexical order, then
//! `-var` and `-var-file` in command-line order (later wins).
//!
//! Decisions:
//! - `-var` and `TF_VAR_` values are literal strings for variables of primitive type or
//!   without a type, and HCL expressions for collection and structural types, as Terraform
//!   parses them.
//! - Variable files and command-line values are registered in the configuration's `SourceMap`
//!   (hence `&mut Config`), so their diagnostics point into them.
//! - Undeclared names: an error on the command line, a warning in a file, ignored in the
//!   environment (the environment is shared by many configurations).

use super::{Config, Variable};
use crate::diag::{Diagnostic, Diagnostics, FileId, SourceMap, Span};
use crate::eval::expr::{convert, Evaluator};
use crate::eval::type_constraints::const_value;
use crate::eval::{Scope, ScopeError, Subject};
use crate::value::ValueMap;
use crate::value::{Type, Value};
use hcl_edit::structure::Structure;
use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};

/// One `-var` or `-var-file` argument, in command-line order.
#[derive(Clone, Debug, PartialEq)]
pub enum VarArg {
    /// `-var 'name=value'` as given (split at the first `=` here).
    Var(String),
    /// `-var-file=FILE`, relative to the working directory.
    File(PathBuf),
    /// A value given by the caller, not parsed from text: a stack component's input
    /// (`engine::stack`), converted and validated as a `-var` value is, marks kept.
    Value(String, Value),
}

/// Where a value came from: decides how undeclared names are reported.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Origin {
    Env,
    File,
    Cli,
}

/// A value before conversion: a literal string to parse by the variable's type, or a value
/// already read from a file.
enum Raw {
    Text(String),
    Value(Value),
}

struct Given {
    raw: Raw,
    origin: Origin,
    /// Where the value is written (a file's attribute, or the registered `-var` text).
    span: Option<Span>,
    /// For messages: `the command line`, `terraform.tfvars`.
    place: String,
}

/// What a root variable without a value (and without a default) becomes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Missing {
    /// An error, "No value for required variable" (plan, apply, ...).
    Error,
    /// An unknown value of its type (`inspect`: a policy tool has no values to give).
    Unknown,
}

/// Collects, converts and validates the root module's input variable values. Every declared
/// variable gets a value in the result unless it had an error.
pub(crate) fn input_values(
    config: &mut Config,
    cli_vars: &[VarArg],
    env: &BTreeMap<String, String>,
    cwd: &Path,
) -> (ValueMap, Diagnostics) {
    input_values_with(config, cli_vars, env, cwd, Missing::Error)
}

/// `input_values`, with what a variable without a value becomes.
pub(crate) fn input_values_with(
    config: &mut Config,
    cli_vars: &[VarArg],
    env: &BTreeMap<String, String>,
    cwd: &Path,
    missing: Missing,
) -> (ValueMap, Diagnostics) {
    let dir = config.root_dir.clone();
    collect_values(
        &mut config.sources,
        &config.root,
        &dir,
        cli_vars,
        env,
        cwd,
        missing,
    )
}

/// `input_values_with` over the pieces of a configuration it reads: the root module's
/// variables, the source map that variable files are added to, the root directory (early
/// evaluation calls it while the configuration is still loading).
pub(crate) fn collect_values(
    sources: &mut SourceMap,
    root: &super::Module,
    dir: &Path,
    cli_vars: &[VarArg],
    env: &BTreeMap<String, String>,
    cwd: &Path,
    missing: Missing,
) -> (ValueMap, Diagnostics) {
    let mut diags = Diagnostics::new();
    let mut given: BTreeMap<String, Given> = BTreeMap::new();
    let declared: Vec<String> = root.variables.keys().cloned().collect();

    for (k, v) in env {
        if let Some(name) = k.strip_prefix("TF_VAR_") {
            if declared.iter().any(|d| d == name) {
                given.insert(
                    name.to_string(),
                    Given {
                        raw: Raw::Text(v.clone()),
                        origin: Origin::Env,
                        span: None,
                        place: format!("the environment variable {k}"),
                    },
                );
            }
        }
    }

    let dir = dir.to_path_buf();
    let mut files = vec![
        dir.join("terraform.tfvars"),
        dir.join("terraform.tfvars.json"),
    ];
    let mut auto: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| {
                    let n = p.file_name().map(|n| n.to_string_lossy().into_owned());
                    n.is_some_and(|n| {
                        n.ends_with(".auto.tfvars") || n.ends_with(".auto.tfvars.json")
                    })
                })
                .collect()
        })
        .unwrap_or_default();
    auto.sort();
    files.extend(auto);
    for f in files.into_iter().filter(|f| f.is_file()) {
        read_var_file(sources, &dir, &f, &mut given, &mut diags);
    }

    for arg in cli_vars {
        match arg {
            VarArg::Var(text) => {
                let Some((name, value)) = text.split_once('=') else {
                    diags.push(Diagnostic::error(
                        "Invalid -var option",
                        format!(
                            "The given -var option {} is not correctly specified. Must be a \
                             variable name and value separated by an equals sign, like \
                             -var=\"key=value\".",
                            cairn_state::quote(text)
                        ),
                    ));
                    continue;
                };
                let name = name.trim();
                if !declared.iter().any(|d| d == name) {
                    diags.push(Diagnostic::error(
                        "Value for undeclared variable",
                        format!(
                            "A variable named {} was assigned on the command line, but the root \
                             module does not declare a variable of that name. To use this value, \
                             add a \"variable\" block to the configuration.",
                            cairn_state::quote(name)
                        ),
                    ));
                    continue;
                }
                given.insert(
                    name.to_string(),
                    Given {
                        raw: Raw::Text(value.to_string()),
                        origin: Origin::Cli,
                        span: None,
                        place: "the command line".into(),
                    },
                );
            }
            VarArg::Value(name, value) => {
                if !declared.iter().any(|d| d == name) {
                    diags.push(Diagnostic::error(
                        "Unsupported argument",
                        format!(
                            "The component's inputs set {}, but its module declares no \
                             variable of that name.",
                            cairn_state::quote(name)
                        ),
                    ));
                    continue;
                }
                given.insert(
                    name.clone(),
                    Given {
                        raw: Raw::Value(value.clone()),
                        origin: Origin::Cli,
                        span: None,
                        place: "the component's inputs".into(),
                    },
                );
            }
            VarArg::File(p) => {
                let path = if p.is_absolute() {
                    p.clone()
                } else {
                    cwd.join(p)
                };
                if !path.is_file() {
                    diags.push(Diagnostic::error(
                        "Failed to read variables file",
                        format!("Given variables file {} does not exist.", p.display()),
                    ));
                    continue;
                }
                read_var_file(sources, &dir, &path, &mut given, &mut diags);
            }
        }
    }

    // Undeclared names from files: a warning each.
    for (name, g) in &given {
        if g.origin == Origin::File && !declared.iter().any(|d| d == name) {
            diags.push(
                Diagnostic::warning(
                    "Value for undeclared variable",
                    format!(
                        "The root module does not declare a variable named {} but a value was \
                         found in file {}. If you meant to use this value, add a \"variable\" \
                         block to the configuration.",
                        cairn_state::quote(name),
                        cairn_state::quote(&g.place)
                    ),
                )
                .with_span(g.span),
            );
        }
    }

    // Where each value came from, for a failed validation to point there (Terraform does).
    let provenance: BTreeMap<String, (Option<Span>, String)> = given
        .iter()
        .map(|(k, g)| (k.clone(), (g.span, g.place.clone())))
        .collect();
    let mut values = ValueMap::new();
    let variables: Vec<Variable> = root.variables.values().cloned().collect();
    for var in &variables {
        let g = given.remove(&var.name);
        if g.is_none() && var.default.is_none() && missing == Missing::Unknown {
            let v = Value::Unknown(var.ty.clone());
            values.insert(var.name.clone(), mark(v, var.sensitive));
            continue;
        }
        match resolve_one(sources, var, g) {
            Ok(v) => {
                values.insert(var.name.clone(), v);
            }
            Err(d) => diags.extend(d),
        }
    }
    // Validations see every variable that has a value.
    for var in &variables {
        if let Some(v) = values.get(&var.name) {
            let found = validate_variable(var, v, &values, &root.dir, &dir);
            let from = provenance.get(&var.name);
            diags.extend(
                found
                    .into_iter()
                    .map(|d| point_at_value(sources, d, from, var.span)),
            );
        }
    }
    (values, diags)
}

/// A failed validation of a value given in a file points at that value, and says which rule
/// checked it; one given on the command line or in the environment says so.
fn point_at_value(
    sources: &SourceMap,
    d: Diagnostic,
    from: Option<&(Option<Span>, String)>,
    declared: Span,
) -> Diagnostic {
    let Some((span, place)) = from.filter(|_| d.summary == "Invalid value for variable") else {
        return d;
    };
    let rule = d.span.map(|s| sources.location(s));
    let checked = match rule {
        Some(rule) => format!("\n\nThis was checked by the validation rule at {rule}."),
        None => String::new(),
    };
    match span {
        // In a file: the value itself.
        Some(value) => Diagnostic {
            span: Some(*value),
            detail: format!("{}{checked}", d.detail),
            ..d
        },
        // On the command line or in the environment: the variable's block, and where.
        None => Diagnostic {
            span: Some(declared),
            detail: format!("{}{checked}\n\nThe value comes from {place}.", d.detail),
            ..d
        },
    }
}

fn read_var_file(
    sources: &mut SourceMap,
    root: &Path,
    path: &Path,
    given: &mut BTreeMap<String, Given>,
    diags: &mut Diagnostics,
) {
    let shown = relative_path(root, path);
    let place = shown.display().to_string();
    let text = match std::fs::read(path).map(String::from_utf8) {
        Ok(Ok(t)) => t,
        // Not UTF-8: reported at the first byte that is not, as for configuration files.
        Ok(Err(e)) => {
            let at = e.utf8_error().valid_up_to();
            let file = sources.add(&shown, String::from_utf8_lossy(e.as_bytes()).into_owned());
            diags.push(
                Diagnostic::error(
                    "Invalid character encoding",
                    "All input files must be UTF-8 encoded. Ensure that UTF-8 encoding is \
                     selected in your editor.",
                )
                .with_span(Some(Span {
                    file,
                    start: at,
                    end: at + 1,
                })),
            );
            return;
        }
        Err(e) => {
            diags.push(Diagnostic::error(
                "Failed to read variables file",
                format!("Could not read {place}: {e}."),
            ));
            return;
        }
    };
    // A JSON variables file is rewritten as HCL (strings stay literal), so both syntaxes are
    // read by the code below, with positions into the JSON.
    let (file, text) = if path.extension().is_some_and(|e| e == "json") {
        let (t, errors) =
            super::json_syntax::translate(&text, &place, super::json_syntax::Kind::Vars);
        let plain = sources.add(&shown, text.as_str());
        sources.set_json(plain);
        for e in errors {
            diags.push(Diagnostic::error(e.summary, e.detail).with_span(Some(Span {
                file: plain,
                start: e.start,
                end: e.end,
            })));
        }
        let Some(t) = t else {
            return;
        };
        let origins = t.anchors.iter().map(|&(g, j)| (g, plain, j)).collect();
        let file = sources.add_rewritten(&shown, t.hcl.as_str(), origins, true);
        (file, t.hcl)
    } else {
        (sources.add(&shown, text.as_str()), text)
    };
    let body = match hcl_edit::parser::parse_body(&text) {
        Ok(b) => b,
        Err(e) => {
            let at = e.location().offset();
            diags.push(
                Diagnostic::error("Invalid syntax", e.message().to_string()).with_span(Some(
                    Span {
                        file,
                        start: at,
                        end: at + 1,
                    },
                )),
            );
            return;
        }
    };
    for s in body.iter() {
        match s {
            Structure::Attribute(a) => {
                let span = crate::config::span_in(file, &a.value);
                match const_value(&a.value, file) {
                    Ok(v) => {
                        given.insert(
                            a.key.as_str().to_string(),
                            Given {
                                raw: Raw::Value(v),
                                origin: Origin::File,
                                span: Some(span),
                                place: place.clone(),
                            },
                        );
                    }
                    Err(d) => diags.push(d),
                }
            }
            Structure::Block(b) => diags.push(
                Diagnostic::error(
                    "Unexpected block",
                    "Blocks are not allowed in variables files: only name = value arguments.",
                )
                .with_span(Some(crate::config::span_in(file, &b.ident))),
            ),
        }
    }
}

/// One variable's final value: the given one converted, or the default, or an error.
fn resolve_one(
    sources: &mut SourceMap,
    var: &Variable,
    g: Option<Given>,
) -> Result<Value, Diagnostics> {
    let declared_at = {
        let p = sources.pos(var.span.file, var.span.start);
        let q = sources.pos(var.span.file, var.span.end);
        format!(
            "{}:{},{}-{}",
            sources.path(var.span.file).display(),
            p.line,
            p.column,
            q.column
        )
    };
    let Some(g) = g else {
        return match &var.default {
            Some(d) => Ok(mark(d.clone(), var.sensitive)),
            None => Err(Diagnostic::error(
                "No value for required variable",
                format!(
                    "The root module input variable {} is not set, and has no default value. Use \
                     a -var or -var-file command line argument to provide a value for this \
                     variable.",
                    cairn_state::quote(&var.name)
                ),
            )
            .with_span(Some(var.span))
            .into()),
        };
    };
    let value = match g.raw {
        Raw::Value(v) => v,
        Raw::Text(t) => {
            let literal = matches!(
                var.ty,
                Type::String | Type::Number | Type::Bool | Type::Dynamic
            );
            if literal {
                Value::String(crate::value::nfc(t))
            } else {
                let file = sources.add(format!("<value for var.{}>", var.name), t.as_str());
                let expr = hcl_edit::parser::parse_expr(&t).map_err(|e| {
                    Diagnostics::from(
                        Diagnostic::error(
                            "Invalid expression for var",
                            format!(
                                "The value for var.{} from {} must be a valid HCL expression: {}.",
                                var.name,
                                g.place,
                                e.message()
                            ),
                        )
                        .with_span(Some(var.span)),
                    )
                })?;
                const_value(&expr, file).map_err(Diagnostics::from)?
            }
        }
    };
    let at = g.span.filter(|s| s.end > s.start).or(Some(var.span));
    if value.is_null() {
        if !var.nullable {
            return match &var.default {
                Some(d) if !d.is_null() => Ok(mark(d.clone(), var.sensitive)),
                _ => Err(Diagnostic::error(
                    "Required variable not set",
                    format!(
                        "Unsuitable value for var.{} set from {}: required variable may not be \
                         set to null.",
                        var.name, g.place
                    ),
                )
                .with_span(at)
                .into()),
            };
        }
        return Ok(Value::Null(var.ty.clone()));
    }
    match convert(&value, &var.ty) {
        Ok(v) => Ok(mark(v, var.sensitive)),
        Err(m) => Err(Diagnostic::error(
            "Invalid value for input variable",
            format!(
                "The given value is not suitable for var.{} declared at {declared_at}: {m}.",
                var.name
            ),
        )
        .with_span(at)
        .into()),
    }
}

fn mark(v: Value, sensitive: bool) -> Value {
    if sensitive {
        v.sensitive()
    } else {
        v
    }
}

/// Runs a variable's `validation` rules against its value. `vars` are the module's variable
/// values (a condition may refer to the variable itself and to the others); `module_dir` and
/// `root_dir` confine filesystem functions. An unknown condition is not an error: it is
/// checked again when the value is known.
pub(crate) fn validate_variable(
    var: &Variable,
    value: &Value,
    vars: &ValueMap,
    module_dir: &Path,
    root_dir: &Path,
) -> Diagnostics {
    let mut diags = Diagnostics::new();
    for rule in &var.validations {
        let mut all = vars.clone();
        all.insert(var.name.clone(), value.clone());
        let scope = VarScope {
            vars: &all,
            file: var.file,
            module_dir,
            root_dir,
        };
        let cond = match Evaluator::new(&scope).expr(&rule.condition) {
            Ok(c) => c,
            Err(d) => {
                diags.extend(d);
                continue;
            }
        };
        match cond.unmarked() {
            Value::Bool(true) | Value::Unknown(_) => continue,
            Value::Bool(false) => {}
            _ => {
                diags.push(
                    Diagnostic::error(
                        "Invalid variable validation result",
                        "The validation condition must be true or false.",
                    )
                    .with_span(Some(rule.span)),
                );
                continue;
            }
        }
        let message = match Evaluator::new(&scope).expr(&rule.error_message) {
            Ok(m) => match m.unmarked() {
                Value::String(s) => s.clone(),
                _ => "The error message is not a known string.".into(),
            },
            Err(d) => {
                diags.extend(d);
                continue;
            }
        };
        diags.push(
            Diagnostic::error("Invalid value for variable", message).with_span(Some(rule.span)),
        );
    }
    diags
}

struct VarScope<'a> {
    vars: &'a ValueMap,
    file: FileId,
    module_dir: &'a Path,
    root_dir: &'a Path,
}

impl Scope for VarScope<'_> {
    fn resolve(&self, s: &Subject) -> Result<Value, ScopeError> {
        match s {
            Subject::Var(n) => self.vars.get(n).cloned().ok_or_else(|| {
                ScopeError::new(
                    "Reference to undeclared input variable",
                    format!(
                        "An input variable with the name {} has not been declared.{}",
                        cairn_state::quote(n),
                        crate::eval::suggest::suffix(n, self.vars.keys().map(String::as_str))
                    ),
                )
            }),
            Subject::Path(p) if p == "module" => {
                Ok(Value::string(self.module_dir.display().to_string()))
            }
            Subject::Path(p) if p == "root" => {
                Ok(Value::string(self.root_dir.display().to_string()))
            }
            _ => Err(ScopeError::new(
                "Invalid reference in variable validation",
                "A validation condition may refer only to input variables.",
            )),
        }
    }
    fn file(&self) -> FileId {
        self.file
    }
    fn module_dir(&self) -> &Path {
        self.module_dir
    }
    fn root_dir(&self) -> &Path {
        self.root_dir
    }
}

/// What a sensitive variable's value is replaced with where a command line is recorded or
/// shown (the event log's run records, `history`, `cairn ui`).
pub(crate) const MASKED_VALUE: &str = "(sensitive value)";

impl Config {
    /// The names of the root module's variables declared `sensitive = true`.
    pub(crate) fn sensitive_variables(&self) -> std::collections::BTreeSet<String> {
        self.root
            .variables
            .values()
            .filter(|v| v.sensitive)
            .map(|v| v.name.clone())
            .collect()
    }
}

/// `args` with the value of every `-var NAME=VALUE` (`-var=NAME=VALUE`, `--var …`) whose
/// variable is in `sensitive` replaced by [`MASKED_VALUE`]: a command line is recorded in the
/// event log and shown by `history` and `cairn ui`, so a secret given on it must not be.
/// Applied again on what an older log recorded before the mask existed, it is idempotent.
pub(crate) fn mask_var_args(
    args: &[String],
    sensitive: &std::collections::BTreeSet<String>,
) -> Vec<String> {
    let mask = |assignment: &str| -> Option<String> {
        let (name, _) = assignment.split_once('=')?;
        sensitive
            .contains(name.trim())
            .then(|| format!("{name}={MASKED_VALUE}"))
    };
    let mut out = Vec::with_capacity(args.len());
    let mut next_is_var = false;
    for a in args {
        if next_is_var {
            next_is_var = false;
            out.push(mask(a).unwrap_or_else(|| a.clone()));
            continue;
        }
        let flag = a.strip_prefix("--").or_else(|| a.strip_prefix('-'));
        match flag {
            Some("var") => {
                next_is_var = true;
                out.push(a.clone());
            }
            Some(f) if f.starts_with("var=") => {
                let dashes = &a[..a.len() - f.len()];
                match mask(&f["var=".len()..]) {
                    Some(m) => out.push(format!("{dashes}var={m}")),
                    None => out.push(a.clone()),
                }
            }
            _ => out.push(a.clone()),
        }
    }
    out
}

#[cfg(test)]
mod mask_tests {
    use super::*;

    #[test]
    fn sensitive_var_values_are_masked_in_every_spelling() {
        let sensitive = ["pw".to_string()].into_iter().collect();
        let args: Vec<String> = [
            "apply",
            "-var",
            "pw=SuperSecret123",
            "-var=pw=Other=1",
            "--var",
            "pw=x",
            "-var",
            "region=eu",
            "-var=name=pw=1",
            "-var-file=pw.tfvars",
            "pw=literal",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let masked = mask_var_args(&args, &sensitive);
        assert_eq!(
            masked,
            [
                "apply",
                "-var",
                "pw=(sensitive value)",
                "-var=pw=(sensitive value)",
                "--var",
                "pw=(sensitive value)",
                "-var",
                "region=eu",
                "-var=name=pw=1",
                "-var-file=pw.tfvars",
                "pw=literal",
            ]
        );
        assert_eq!(mask_var_args(&masked, &sensitive), masked, "idempotent");
    }
}

/// What early evaluation reads besides the configuration: the root module's variable values
/// as the command was given them, the working directory and the selected workspace.
#[derive(Clone, Debug)]
pub struct EarlyInputs {
    /// `-var` and `-var-file`, in command-line order.
    pub(crate) vars: Vec<VarArg>,
    /// The environment (`TF_VAR_*`).
    pub(crate) env: BTreeMap<String, String>,
    /// Where relative `-var-file` paths start, and `path.cwd`.
    pub(crate) cwd: std::path::PathBuf,
    /// `terraform.workspace`.
    pub(crate) workspace: String,
    /// A saved plan's variable values: used instead of the above (the plan holds them).
    pub(crate) given: Option<ValueMap>,
}

impl EarlyInputs {
    /// No `-var` and an empty environment, the `default` workspace: what the configuration
    /// and its variable files say alone.
    pub(crate) fn in_dir(dir: &Path) -> EarlyInputs {
        EarlyInputs {
            vars: Vec::new(),
            env: BTreeMap::new(),
            cwd: dir.to_path_buf(),
            workspace: "default".into(),
            given: None,
        }
    }

    /// The inputs of a command: its `-var`/`-var-file`, environment, directory and
    /// workspace (`None`: `default`).
    pub(crate) fn new(
        vars: &[VarArg],
        env: &BTreeMap<String, String>,
        cwd: &Path,
        workspace: Option<&str>,
    ) -> EarlyInputs {
        EarlyInputs {
            vars: vars.to_vec(),
            env: env.clone(),
            cwd: cwd.to_path_buf(),
            workspace: workspace.unwrap_or("default").to_string(),
            given: None,
        }
    }
}

/// `p` relative to `base`, computed lexically (`..` where needed); `p` itself when there is
/// no common prefix.
pub(crate) fn relative_path(base: &Path, p: &Path) -> PathBuf {
    let norm = |p: &Path| -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for c in p.components() {
            match c {
                Component::CurDir => {}
                Component::ParentDir => {
                    if out.last().is_some_and(|l| l != "..") {
                        out.pop();
                    } else {
                        out.push("..".into());
                    }
                }
                other => out.push(other.as_os_str().to_string_lossy().into_owned()),
            }
        }
        out
    };
    let b = norm(base);
    let q = norm(p);
    let common = b.iter().zip(&q).take_while(|(x, y)| x == y).count();
    let mut out = PathBuf::new();
    for _ in common..b.len() {
        out.push("..");
    }
    for c in &q[common..] {
        out.push(c);
    }
    out
}
