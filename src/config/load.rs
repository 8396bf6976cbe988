//! Reading a module tree from disk: every `*.tf` file of a directory is parsed with hcl-edit
//! and its blocks checked and sorted into a `Module`; child modules with local sources are
//! loaded recursively.
//!
//! Every file is checked even when another fails, and every block even when another in the
//! same file is wrong: a broken block is reported and left out, the rest still loads. A module
//! that sources one of its ancestors is reported with the whole chain instead of recursing.
//!
//! This file is the module tree: which files and directories make a module, child modules
//! (local, or installed by `cairn init`), cycles, and a call's arguments against the child.
//! The blocks of each file are decoded by `super::decode`; files are parsed by `super::parse`.

use super::early::{Frame, LazyValues, Vars};
use super::parse::{parse_file, SyntaxError};
pub(crate) use super::vars::relative_path;
use super::vars::EarlyInputs;
use crate::addr::ModulePath;
use crate::config::*;
use crate::diag::{Diagnostic, Diagnostics, FileId, SourceMap, Span};
use crate::eval::suggest;
use crate::value::ValueMap;
use cairn_state::quote;
use hcl_edit::expr::Expression;
use hcl_edit::structure::{Block, Body, Structure};
use hcl_edit::Span as _;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Loads the module tree rooted at `dir`. `None` only when `dir` itself cannot be read; the
/// configuration is returned even when it has errors, so callers can report them all.
pub fn load(dir: &Path) -> (Option<Config>, Diagnostics) {
    load_only(dir, None, false, &EarlyInputs::in_dir(dir))
}

/// `load`, with the inputs early evaluation reads (`-var`, the environment, the workspace):
/// what every command that has them calls, so that a module `source` or `version`, a
/// `backend` argument or a `required_providers` entry may use variables and locals
/// (`super::early`).
pub fn load_with(dir: &Path, inputs: &EarlyInputs) -> (Option<Config>, Diagnostics) {
    if let Some((config, diags)) = take_ahead(dir, inputs) {
        return (Some(config), diags);
    }
    load_only(dir, None, false, inputs)
}

/// A configuration loaded ahead of the command's own load — by `engine::encryption::prepare`,
/// which evaluates the `encryption` block before the command opens anything — kept for that
/// load, so that a large configuration is read and parsed once per command, not twice.
struct Ahead {
    /// The directory, the inputs and the root directory's file names it was loaded with.
    key: String,
    config: Config,
    diags: Diagnostics,
}

static AHEAD: std::sync::Mutex<Option<Ahead>> = std::sync::Mutex::new(None);

fn ahead_key(dir: &Path, inputs: &EarlyInputs) -> String {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    format!("{dir:?} {inputs:?} {names:?}")
}

/// Keeps `config` (loaded by [`load_with`] from `dir` with `inputs`, unchanged since) for the
/// next [`load_with`] of the same directory and inputs.
pub(crate) fn keep_ahead(dir: &Path, inputs: &EarlyInputs, config: Config, diags: Diagnostics) {
    let key = ahead_key(dir, inputs);
    *AHEAD.lock().expect("config ahead") = Some(Ahead { key, config, diags });
}

/// The configuration kept by [`keep_ahead`], if it was loaded from `dir` with `inputs` and
/// every file it read still holds what it read (taken: it serves one load).
fn take_ahead(dir: &Path, inputs: &EarlyInputs) -> Option<(Config, Diagnostics)> {
    let mut slot = AHEAD.lock().expect("config ahead");
    if slot.as_ref()?.key != ahead_key(dir, inputs) {
        // Another load (another directory or other inputs): kept for the one it is for.
        return None;
    }
    let a = slot.take()?;
    drop(slot);
    let unchanged = a
        .config
        .sources
        .files()
        .all(|(path, text)| std::fs::read_to_string(path).is_ok_and(|now| now == text));
    tracing::debug!(unchanged, "configuration loaded ahead");
    unchanged.then_some((a.config, a.diags))
}

/// `load`, with the root module made of the single file `file` of `dir` (`cairn inspect
/// FILE.tf`: policy tools load the files that changed). Modules it calls load as usual.
pub fn load_file(dir: &Path, file: &Path, inputs: &EarlyInputs) -> (Option<Config>, Diagnostics) {
    load_only(dir, Some(file), false, inputs)
}

/// `load` (or `load_file` with `only`) for `inspect`, which reads what it can: a module whose
/// installed source or version no longer matches its call is used as installed, with a
/// warning, instead of being an error and no child.
pub fn load_lenient(
    dir: &Path,
    only: Option<&Path>,
    inputs: &EarlyInputs,
) -> (Option<Config>, Diagnostics) {
    load_only(dir, only, true, inputs)
}

/// The summary of the error for a directory with no configuration files (`console` works
/// without any, as Terraform's does).
pub const NO_CONFIGURATION_FILES: &str = "No configuration files";

fn load_only(
    dir: &Path,
    only: Option<&Path>,
    lenient: bool,
    inputs: &EarlyInputs,
) -> (Option<Config>, Diagnostics) {
    let mut l = Loader {
        inputs: inputs.clone(),
        pending: Vec::new(),
        lenient,
        sources: SourceMap::new(),
        diags: Diagnostics::new(),
        root_dir: dir.to_path_buf(),
        file_count: 0,
        installed: None,
        parsed: std::collections::HashMap::new(),
        only: only.map(|f| dir.join(f.file_name().unwrap_or(f.as_os_str()))),
    };
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) => {
            l.diags.push(Diagnostic::error(
                "Failed to read module directory",
                format!(
                    "Module directory {} does not exist or cannot be read: {e}.",
                    dir.display()
                ),
            ));
            return (None, l.diags);
        }
    };
    drop(entries);
    let canonical = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    let root = l.load_module(
        ModulePath::root(),
        dir,
        &[(canonical, "the root module".into())],
        None,
    );
    if l.file_count == 0 {
        l.diags.push(Diagnostic::error(
            NO_CONFIGURATION_FILES,
            "There are no .tf or .tf.json files in the configuration directory. Cairn reads \
             the configuration from the *.tf and *.tf.json files of the working directory, or \
             of -chdir=DIR.",
        ));
    }
    let config = Config {
        root,
        sources: l.sources,
        root_dir: dir.to_path_buf(),
    };
    (Some(config), l.diags)
}

/// One `load` under way: the sources and diagnostics so far, and what was read ahead. Its
/// methods are the module tree (here) and the decoding of blocks (`super::decode`).
pub(super) struct Loader {
    pub(super) sources: SourceMap,
    pub(super) diags: Diagnostics,
    root_dir: PathBuf,
    /// How many `.tf` files were found in the whole tree.
    file_count: usize,
    /// The only file of the root module to read (`load_file`).
    only: Option<PathBuf>,
    /// `.terraform/modules/modules.json` (what `terraform init` downloaded), read on first use:
    /// module key (`vpc`, `vpc.subnets`) → (source as recorded, directory). `None` inside
    /// when the file is absent or unreadable.
    installed: Option<Option<BTreeMap<String, Installed>>>,
    /// `.tf` files of sibling modules read and parsed ahead on all cores (`prefetch`): path →
    /// text and parse, taken by `load_module` in place of reading and parsing the file.
    parsed: std::collections::HashMap<PathBuf, Parsed>,
    /// `inspect`: an installed module that no longer matches its call is used, with a warning.
    lenient: bool,
    /// What early evaluation reads: `-var`, the environment, the workspace.
    inputs: EarlyInputs,
    /// The expressions of the module being decoded that need early evaluation, evaluated
    /// once all its files are decoded (`resolve_pending`).
    pub(super) pending: Vec<Pending>,
}

/// An argument that must be known at load time but is not a constant: evaluated early
/// (`super::early`) once its module's variables and locals are all decoded.
pub(super) enum Pending {
    /// A module call's `source`.
    Source {
        call: String,
        expr: Expression,
        file: FileId,
    },
    /// A module call's `version`.
    Version {
        call: String,
        expr: Expression,
        file: FileId,
    },
    /// A `backend` argument (`list`: a list of strings, `object`: an object such as s3's
    /// `assume_role`, kept as JSON).
    Backend {
        arg: String,
        list: bool,
        object: bool,
        expr: Expression,
        file: FileId,
    },
    /// A `required_providers` entry whose `source` or `version` is not a constant.
    Provider {
        name: String,
        source: Early,
        version: Early,
        source_span: Span,
        version_span: Span,
        span: Span,
        file: FileId,
    },
}

/// A string argument: absent, a constant, or an expression to evaluate early.
pub(super) enum Early {
    Absent,
    Const(String),
    Expr(Expression),
}

/// A pending argument evaluated (`Loader::eval_pending`).
enum Resolved {
    Source {
        call: String,
        value: String,
    },
    Version {
        call: String,
        value: String,
    },
    Backend {
        arg: String,
        value: String,
    },
    Provider {
        name: String,
        source: Option<String>,
        version: Option<String>,
        source_span: Span,
        version_span: Span,
        span: Span,
    },
}

/// A file's text and its parse (`parse_file`).
type Parsed = (String, (Vec<Body>, Vec<SyntaxError>));

/// The `.tf` files of a module directory, sorted.
fn tf_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = match std::fs::read_dir(dir) {
        Ok(entries) => entries
            .filter_map(|e| e.ok())
            .map(|e| e.path())
            .filter(|p| is_config_file(p) && !p.is_dir())
            .collect(),
        Err(_) => Vec::new(),
    };
    files.sort();
    files
}

/// Reads and parses the `.tf` files of `dirs` on all cores. A file that cannot be read or is
/// not UTF-8 is left out: `load_module` reads it again and reports it.
fn prefetch(dirs: &[PathBuf]) -> Vec<(PathBuf, Parsed)> {
    // JSON files are rewritten to HCL first (`Loader::json_file`): only `.tf` is prefetched.
    let files: Vec<PathBuf> = dirs
        .iter()
        .flat_map(|d| tf_files(d))
        .filter(|p| p.extension().is_some_and(|x| x == "tf"))
        .collect();
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    if files.len() < 2 || threads < 2 {
        return Vec::new();
    }
    let size = files.len().div_ceil(threads);
    let parse_run = |run: &[PathBuf]| {
        run.iter()
            .filter_map(|f| {
                let text = String::from_utf8(std::fs::read(f).ok()?).ok()?;
                let parsed = parse_file(&text);
                Some((f.clone(), (text, parsed)))
            })
            .collect::<Vec<_>>()
    };
    std::thread::scope(|scope| {
        // The first run on this thread, the others beside it: one thread fewer to start,
        // and the allocator pages of what this thread parses stay with a live thread.
        let mut runs = files.chunks(size);
        let here = runs.next().unwrap_or_default();
        let handles: Vec<_> = runs
            .map(|run| scope.spawn(move || parse_run(run)))
            .collect();
        let mut out = parse_run(here);
        for h in handles {
            out.extend(h.join().unwrap_or_default());
        }
        out
    })
}

/// A downloaded module, as `.terraform/modules/modules.json` records it.
struct Installed {
    source: String,
    version: Option<String>,
    dir: PathBuf,
}

/// Reads `.terraform/modules/modules.json` under `root`: each module's key, source, version
/// and directory. Directories outside `root` are left out: the manifest is input like any
/// other and may not lead the loader out of the configuration's tree.
fn read_installed(root: &Path) -> Option<BTreeMap<String, Installed>> {
    let text = std::fs::read_to_string(root.join(".terraform/modules/modules.json")).ok()?;
    let doc: serde_json::Value = serde_json::from_str(&text).ok()?;
    let canonical_root = std::fs::canonicalize(root).ok()?;
    let mut out = BTreeMap::new();
    for m in doc.get("Modules")?.as_array()? {
        let (Some(key), Some(dir)) = (
            m.get("Key").and_then(|k| k.as_str()),
            m.get("Dir").and_then(|d| d.as_str()),
        ) else {
            continue;
        };
        let source = m.get("Source").and_then(|s| s.as_str()).unwrap_or_default();
        let version = m
            .get("Version")
            .and_then(|s| s.as_str())
            .map(str::to_string);
        let path = root.join(dir);
        let inside = std::fs::canonicalize(&path).is_ok_and(|p| p.starts_with(&canonical_root));
        if !key.is_empty() && inside {
            out.insert(
                key.to_string(),
                Installed {
                    source: source.to_string(),
                    version,
                    dir: path,
                },
            );
        }
    }
    Some(out)
}

/// Whether what the manifest recorded is still what `call` asks for: the same source and a
/// version its constraints allow. A source the installer cannot read (a manifest Terraform
/// wrote for a getter Cairn does not know) is trusted as it is.
fn installed_matches(i: &Installed, call: &ModuleCall) -> bool {
    let Ok(remote) = crate::addr::module_source::parse_source(&call.source) else {
        return true;
    };
    if remote.recorded() != i.source {
        return false;
    }
    match (&call.version, &i.version) {
        (Some(c), Some(v)) => {
            use crate::addr::version::{parse_version, Constraints};
            match (Constraints::parse(c), parse_version(v)) {
                (Ok(c), Ok(v)) => c.allows(&v),
                _ => true,
            }
        }
        (Some(_), None) => false,
        _ => true,
    }
}

impl Loader {
    pub(super) fn span(&self, file: FileId, node: &impl hcl_edit::Span) -> Span {
        span_in(file, node)
    }

    /// `main.tf:3,3-8`, as Terraform writes a range in a message.
    pub(super) fn range_str(&self, s: Span) -> String {
        let a = self.sources.pos(s.file, s.start);
        let b = self.sources.pos(s.file, s.end);
        let path = self.sources.path_at(s.file, s.start).display().to_string();
        if a.line == b.line {
            format!("{path}:{},{}-{}", a.line, a.column, b.column)
        } else {
            format!("{path}:{},{}-{},{}", a.line, a.column, b.line, b.column)
        }
    }

    pub(super) fn err(&mut self, span: Span, summary: &str, detail: impl Into<String>) {
        self.diags
            .push(Diagnostic::error(summary, detail).with_span(Some(span)));
    }

    pub(super) fn warn(&mut self, span: Span, summary: &str, detail: impl Into<String>) {
        self.diags
            .push(Diagnostic::warning(summary, detail).with_span(Some(span)));
    }

    /// The header of a block: its type and labels (`resource "a" "b"`).
    pub(super) fn header(&self, file: FileId, b: &Block) -> Span {
        let start = b.ident.span().map(|r| r.start).unwrap_or(0);
        let end = b
            .labels
            .last()
            .and_then(|l| l.span())
            .or(b.ident.span())
            .map(|r| r.end)
            .unwrap_or(start);
        Span { file, start, end }
    }

    fn load_module(
        &mut self,
        path: ModulePath,
        dir: &Path,
        ancestors: &[(PathBuf, String)],
        parent: Option<(&ModuleCall, &Frame<'_>)>,
    ) -> Module {
        let mut module = Module::empty(path, dir.to_path_buf());
        let only = match module.path.is_root() {
            true => self.only.clone(),
            false => None,
        };
        let files: Vec<PathBuf> = match only {
            Some(f) => vec![f],
            None => tf_files(dir),
        };
        self.file_count += files.len();
        // Override files merge into the others once all are read (`merge_overrides`).
        let mut primary: Vec<(FileId, Body)> = Vec::new();
        let mut overrides: Vec<(FileId, Body)> = Vec::new();
        for f in files {
            let shown = relative_path(&self.root_dir, &f);
            let (id, (bodies, errors)) = match self.parsed.remove(&f) {
                Some((text, parsed)) => (self.sources.add(&shown, text), parsed),
                None => {
                    let bytes = match std::fs::read(&f) {
                        Ok(b) => b,
                        Err(e) => {
                            let id = self.sources.add(&shown, "");
                            self.err(
                                Span {
                                    file: id,
                                    start: 0,
                                    end: 0,
                                },
                                "Failed to read file",
                                format!(
                                    "The configuration file {} could not be read: {e}.",
                                    shown.display()
                                ),
                            );
                            continue;
                        }
                    };
                    let text = match String::from_utf8(bytes) {
                        Ok(t) => t,
                        Err(e) => {
                            let at = e.utf8_error().valid_up_to();
                            let text = String::from_utf8_lossy(e.as_bytes()).into_owned();
                            let id = self.sources.add(&shown, text);
                            self.err(
                                Span {
                                    file: id,
                                    start: at,
                                    end: at + 1,
                                },
                                "Invalid character encoding",
                                "All input files must be UTF-8 encoded. Ensure that UTF-8 encoding is \
                                 selected in your editor.",
                            );
                            continue;
                        }
                    };
                    let json = f.to_string_lossy().ends_with(".json");
                    match json {
                        false => (self.sources.add(&shown, text.as_str()), parse_file(&text)),
                        true => match self.json_file(&shown, &text) {
                            Some((id, hcl)) => (id, parse_file(&hcl)),
                            None => continue,
                        },
                    }
                }
            };
            for (start, end, summary, detail) in errors {
                self.err(
                    Span {
                        file: id,
                        start,
                        end,
                    },
                    summary,
                    detail,
                );
            }
            let name = f.file_name().map(|n| n.to_string_lossy().into_owned());
            let into = match name.is_some_and(|n| super::overrides::is_override(&n)) {
                true => &mut overrides,
                false => &mut primary,
            };
            into.extend(bodies.into_iter().map(|b| (id, b)));
        }
        if overrides.is_empty() {
            for (id, body) in primary {
                self.file_body(id, body, &mut module);
            }
        } else {
            self.merge_overrides(primary, overrides, &mut module);
        }
        // Early evaluation: this module's variables (the root's from -var and the rest, a
        // child's from its call) and locals are all decoded now.
        let pending = std::mem::take(&mut self.pending);
        let lazy = match parent {
            None if !module.variables.is_empty() => Some(self.root_values(&module)),
            _ => None,
        };
        let (root_dir, cwd, workspace) = (
            self.root_dir.clone(),
            self.inputs.cwd.clone(),
            self.inputs.workspace.clone(),
        );
        let path_module = match relative_path(&root_dir, &module.dir) {
            r if r.as_os_str().is_empty() => ".".to_string(),
            r => r.display().to_string(),
        };
        let none = ValueMap::new();
        let vars = || match (parent, &lazy) {
            (Some((call, parent)), _) => Vars::Call { call, parent },
            (None, Some(lazy)) => Vars::Lazy(lazy),
            (None, None) => Vars::Known(&none),
        };
        macro_rules! frame_of {
            ($m:expr) => {
                Frame {
                    module: $m,
                    vars: vars(),
                    root_dir: &root_dir,
                    cwd: &cwd,
                    workspace: &workspace,
                    path_module: &path_module,
                }
            };
        }
        // Calls whose source could not be evaluated (reported): no child, and no second error.
        let mut unresolved: Vec<String> = Vec::new();
        if !pending.is_empty() {
            let resolved: Vec<Resolved> = {
                let frame = frame_of!(&module);
                let mut out = Vec::new();
                for p in pending {
                    let call = match &p {
                        Pending::Source { call, .. } => Some(call.clone()),
                        _ => None,
                    };
                    match self.eval_pending(&frame, p) {
                        Some(r) => out.push(r),
                        None => unresolved.extend(call),
                    }
                }
                out
            };
            for r in resolved {
                self.apply_resolved(&mut module, r);
            }
        }
        // Provider `for_each` (OpenTofu 1.9): its instances are known before anything else,
        // so it is evaluated early, as a module's source is.
        let each: Vec<(usize, ValueMap)> = {
            let frame = frame_of!(&module);
            module
                .providers
                .iter()
                .enumerate()
                .filter_map(|(i, b)| Some((i, self.provider_each(&frame, b)?)))
                .collect()
        };
        for (i, e) in each {
            module.providers[i].each = Some(e);
        }
        let children = {
            let frame = frame_of!(&module);
            self.load_children(&module, ancestors, &frame, &unresolved)
        };
        module.children.extend(children);
        module
    }

    /// The root module's variable values as early evaluation sees them, computed on first
    /// use: from `-var`, the files and the environment (or a saved plan's), a variable
    /// without one unknown. Their diagnostics are the later `input_values`' to report.
    fn root_values(&self, module: &Module) -> LazyValues {
        let given = self.inputs.given.clone();
        let mut sources = self.sources.clone();
        let mut decl = Module::empty(module.path.clone(), module.dir.clone());
        decl.variables = module.variables.clone();
        let (root_dir, inputs) = (self.root_dir.clone(), self.inputs.clone());
        LazyValues::new(move || match given {
            Some(values) => values,
            None => {
                super::vars::collect_values(
                    &mut sources,
                    &decl,
                    &root_dir,
                    &inputs.vars,
                    &inputs.env,
                    &inputs.cwd,
                    super::vars::Missing::Unknown,
                )
                .0
            }
        })
    }

    /// Evaluates one pending argument early, as a string; `None` after an error (reported).
    fn eval_pending(&mut self, frame: &Frame<'_>, p: Pending) -> Option<Resolved> {
        // `no_secret`: the argument's name, as OpenTofu names it, when a sensitive value may
        // not set it (a module's source and version).
        let mut value =
            |expr: &Expression, file: FileId, what: &str, list: bool, no_secret: Option<&str>| {
                let ty = match list {
                    true => Type::List(Box::new(Type::String)),
                    false => Type::String,
                };
                let v = match frame.eval(expr, file, what) {
                    Ok(v) => v,
                    Err(d) => {
                        self.diags.extend(d);
                        return None;
                    }
                };
                let (v, sensitive) = v.deep_unmark();
                if let (true, Some(arg)) = (sensitive, no_secret) {
                    let arg = match frame.module.path.is_root() {
                        true => arg.to_string(),
                        false => format!("{}:{arg}", frame.module.path),
                    };
                    self.err(
                        span_in(file, expr),
                        "Sensitive value not allowed",
                        format!(
                            "Sensitive values, or values derived from sensitive values, cannot be \
                         used as {arg}."
                        ),
                    );
                    return None;
                }
                match crate::eval::expr::convert(&v, &ty) {
                    Ok(v) if !v.is_null() => Some(match list {
                        true => {
                            let items: Vec<&str> = v
                                .elements()
                                .unwrap_or_default()
                                .iter()
                                .filter_map(|e| e.as_str())
                                .collect();
                            serde_json::to_string(&items).unwrap_or_default()
                        }
                        false => v.as_str().unwrap_or_default().to_string(),
                    }),
                    Ok(_) => {
                        let sp = span_in(file, expr);
                        self.err(sp, "Invalid value", format!("{what} must not be null."));
                        None
                    }
                    Err(m) => {
                        let sp = span_in(file, expr);
                        self.err(
                            sp,
                            "Incorrect value type",
                            format!("{what} must be a string: {m}."),
                        );
                        None
                    }
                }
            };
        match p {
            Pending::Source { call, expr, file } => {
                let what = format!("module.{call}'s source");
                let arg = format!("module.{call}.source");
                let value = value(&expr, file, &what, false, Some(&arg))?;
                Some(Resolved::Source { call, value })
            }
            Pending::Version { call, expr, file } => {
                let what = format!("module.{call}'s version");
                let arg = format!("module.{call}.version");
                let value = value(&expr, file, &what, false, Some(&arg))?;
                Some(Resolved::Version { call, value })
            }
            Pending::Backend {
                arg,
                object: true,
                expr,
                file,
                ..
            } => {
                let what = format!("the backend's {arg}");
                let v = match frame.eval(&expr, file, &what) {
                    Ok(v) => v,
                    Err(d) => {
                        self.diags.extend(d);
                        return None;
                    }
                };
                let v = v.unmarked();
                if !matches!(
                    v,
                    crate::value::Value::Object(_) | crate::value::Value::Map(_)
                ) {
                    let sp = span_in(file, &expr);
                    self.err(
                        sp,
                        "Incorrect value type",
                        format!("{what} must be an object, as {arg} = {{ … }}."),
                    );
                    return None;
                }
                let value = v.to_json().to_string();
                Some(Resolved::Backend { arg, value })
            }
            Pending::Backend {
                arg,
                list,
                expr,
                file,
                ..
            } => {
                let what = format!("the backend's {arg}");
                let value = value(&expr, file, &what, list, None)?;
                Some(Resolved::Backend { arg, value })
            }
            Pending::Provider {
                name,
                source,
                version,
                source_span,
                version_span,
                span,
                file,
            } => {
                let mut one = |e: Early, key: &str| match e {
                    Early::Absent => Some(None),
                    Early::Const(s) => Some(Some(s)),
                    Early::Expr(expr) => {
                        let what = format!("required_providers {name}'s {key}");
                        value(&expr, file, &what, false, None).map(Some)
                    }
                };
                let source = one(source, "source");
                let version = one(version, "version");
                Some(Resolved::Provider {
                    name,
                    source: source?,
                    version: version?,
                    source_span,
                    version_span,
                    span,
                })
            }
        }
    }

    /// A provider block's `for_each`, evaluated early: its instances (`None` without one, or
    /// after an error, reported).
    fn provider_each(&mut self, frame: &Frame<'_>, b: &super::ProviderBlock) -> Option<ValueMap> {
        let fe = b.for_each.as_ref()?;
        let name = match &b.alias {
            Some(a) => format!("{}.{a}", b.name),
            None => b.name.clone(),
        };
        let what = format!("the for_each of provider {name}");
        let v = match frame.eval(fe, b.file, &what) {
            Ok(v) => v,
            Err(d) => {
                self.diags.extend(d);
                return None;
            }
        };
        match crate::eval::expand::for_each_of(v, Some(span_in(b.file, fe))) {
            Ok(each) => each,
            Err(d) => {
                self.diags.extend(d);
                None
            }
        }
    }

    /// Puts an argument evaluated early where its module keeps it.
    fn apply_resolved(&mut self, m: &mut Module, r: Resolved) {
        match r {
            Resolved::Source { call, value } => {
                if let Some(c) = m.calls.get_mut(&call) {
                    c.source = value;
                    let c = c.clone();
                    self.check_local_version(&c);
                }
            }
            Resolved::Version { call, value } => {
                if let Some(c) = m.calls.get_mut(&call) {
                    c.version = Some(value);
                    let c = c.clone();
                    self.check_local_version(&c);
                }
            }
            Resolved::Backend { arg, value } => {
                if let Some(b) = &mut m.backend {
                    b.args.insert(arg, value);
                }
            }
            Resolved::Provider {
                name,
                source,
                version,
                source_span,
                version_span,
                span,
            } => self.insert_required_provider(
                m,
                name,
                (source, source_span),
                (version, version_span),
                span,
            ),
        }
    }

    /// Loads the primary files' bodies merged with the override files' (`super::overrides`).
    fn merge_overrides(
        &mut self,
        mut primary: Vec<(FileId, Body)>,
        overrides: Vec<(FileId, Body)>,
        module: &mut Module,
    ) {
        let merged = super::overrides::merge(&mut primary, overrides, &self.sources);
        for (span, summary, detail) in merged.errors {
            self.err(span, summary, detail);
        }
        for (id, body) in primary {
            self.file_body(id, body, module);
        }
        if let Some((text, origins, json)) = merged.text {
            let path = origins
                .first()
                .map(|o| self.sources.path(o.1).to_path_buf())
                .unwrap_or_default();
            let id = self
                .sources
                .add_rewritten(path, text.as_str(), origins, json);
            let (bodies, errors) = parse_file(&text);
            self.parsed_file(id, bodies, errors, module);
        }
        for (file, body) in merged.rest {
            let mut others = Body::new();
            for s in body {
                match s {
                    Structure::Block(b) if b.ident.as_str() == "locals" => {
                        let mut scratch = Module::empty(module.path.clone(), module.dir.clone());
                        self.locals_block(file, &b, &mut scratch);
                        for (name, local) in scratch.locals {
                            match module.locals.get_mut(&name) {
                                Some(base) => *base = local,
                                None => self.err(
                                    local.span,
                                    "Missing base local value definition to override",
                                    format!(
                                        "There is no local value named {}. An override file can \
                                         only override a local value that was already defined \
                                         in a primary configuration file.",
                                        quote(&name)
                                    ),
                                ),
                            }
                        }
                    }
                    Structure::Block(b) if b.ident.as_str() == "terraform" => {
                        let mut scratch = Module::empty(module.path.clone(), module.dir.clone());
                        self.terraform_block(file, &b, &mut scratch);
                        module.required_providers.extend(scratch.required_providers);
                        if scratch.backend.is_some() {
                            module.backend = scratch.backend;
                        }
                    }
                    other => others.push(other),
                }
            }
            self.file_body(file, others, module);
        }
    }

    /// Rewrites a `.tf.json` file as HCL (`super::json_syntax`) and adds it to the source map:
    /// its id and the HCL text, or `None` when it is not JSON (an error, reported).
    fn json_file(&mut self, shown: &Path, text: &str) -> Option<(FileId, String)> {
        let (t, errors) = super::json_syntax::translate(
            text,
            &shown.display().to_string(),
            super::json_syntax::Kind::Config,
        );
        // The JSON as written (what positions are shown in), and the HCL made from it.
        let plain = self.sources.add(shown, text);
        self.sources.set_json(plain);
        for e in errors {
            self.err(
                Span {
                    file: plain,
                    start: e.start,
                    end: e.end,
                },
                e.summary,
                e.detail,
            );
        }
        let t = t?;
        let origins = t.anchors.iter().map(|&(g, j)| (g, plain, j)).collect();
        let id = self
            .sources
            .add_rewritten(shown, t.hcl.as_str(), origins, true);
        Some((id, t.hcl))
    }

    /// A parsed file's syntax errors and structures, into the module.
    fn parsed_file(
        &mut self,
        id: FileId,
        bodies: Vec<Body>,
        errors: Vec<SyntaxError>,
        module: &mut Module,
    ) {
        for (start, end, summary, detail) in errors {
            self.err(
                Span {
                    file: id,
                    start,
                    end,
                },
                summary,
                detail,
            );
        }
        for body in bodies {
            self.file_body(id, body, module);
        }
    }

    /// The directory a module call's child would load from, if it is there (no diagnostics:
    /// `load_children` reports).
    fn child_dir(&mut self, m: &Module, call: &ModuleCall) -> Option<PathBuf> {
        let src = call.source.as_str();
        let local = src.starts_with("./") || src.starts_with("../") || src == "." || src == "..";
        let dir = if local {
            clean_path(&m.dir.join(src))
        } else {
            let key: Vec<&str> = m
                .path
                .0
                .iter()
                .map(|s| s.name.as_str())
                .chain([call.name.as_str()])
                .collect();
            let root = self.root_dir.clone();
            let installed = self.installed.get_or_insert_with(|| read_installed(&root));
            installed.as_ref()?.get(&key.join("."))?.dir.clone()
        };
        dir.is_dir().then_some(dir)
    }

    fn load_children(
        &mut self,
        m: &Module,
        ancestors: &[(PathBuf, String)],
        frame: &Frame<'_>,
        unresolved: &[String],
    ) -> Vec<(String, Module)> {
        let mut out = Vec::new();
        let calls: Vec<&ModuleCall> = m
            .calls
            .values()
            .filter(|c| !unresolved.contains(&c.name))
            .collect();
        // The children's files are read and parsed on all cores first (a root calling a
        // hundred modules is a hundred files parsed one after another otherwise).
        if calls.len() > 1 {
            let mut dirs: Vec<PathBuf> =
                calls.iter().filter_map(|c| self.child_dir(m, c)).collect();
            dirs.sort();
            dirs.dedup();
            self.parsed.extend(prefetch(&dirs));
        }
        for call in calls {
            let src = call.source.as_str();
            let local =
                src.starts_with("./") || src.starts_with("../") || src == "." || src == "..";
            let dir = if local {
                // Cleaned as Go's filepath.Join cleans it: `modules/inner`, never
                // `modules/outer/../inner` (that is what `path.module` shows).
                clean_path(&m.dir.join(src))
            } else {
                // A registry or git source: where `terraform init` put it, if it did.
                let key: Vec<&str> = m
                    .path
                    .0
                    .iter()
                    .map(|s| s.name.as_str())
                    .chain([call.name.as_str()])
                    .collect();
                let key = key.join(".");
                let root = self.root_dir.clone();
                let installed = self.installed.get_or_insert_with(|| read_installed(&root));
                match installed.as_ref().and_then(|i| i.get(&key)) {
                    Some(i) if !installed_matches(i, call) => {
                        let (summary, what) = match crate::addr::module_source::parse_source(src) {
                            Ok(r) if r.recorded() != i.source => (
                                "Module source has changed",
                                "The source address was changed since this module was installed.",
                            ),
                            _ => (
                                "Module version requirements have changed",
                                "The version requirements have changed since this module was installed and the installed version is no longer acceptable.",
                            ),
                        };
                        if self.lenient {
                            let (dir, was) = (i.dir.clone(), i.source.clone());
                            self.warn(
                                call.source_span,
                                summary,
                                format!("{what} Cairn inspected the module as it was installed, from {}; run `cairn init` to install the one this configuration asks for.", quote(&was)),
                            );
                            dir
                        } else {
                            self.err(
                                call.source_span,
                                summary,
                                format!("{what} Run `cairn init` to install all modules required by this configuration."),
                            );
                            continue;
                        }
                    }
                    Some(i) => i.dir.clone(),
                    None => {
                        self.err(
                            call.source_span,
                            "Module not installed",
                            format!(
                                "Module {} has the remote source {}, which has not been \
                                 downloaded. Run `cairn init` \
                                 (or `terraform init`) to download it into .terraform/modules, \
                                 where Cairn reads it from .terraform/modules/modules.json.",
                                quote(&call.name),
                                quote(src)
                            ),
                        );
                        continue;
                    }
                }
            };
            let shown = relative_path(&self.root_dir, &dir);
            if !dir.is_dir() {
                self.err(
                    call.source_span,
                    "Unreadable module directory",
                    format!(
                        "The module directory {} does not exist or cannot be read.",
                        shown.display()
                    ),
                );
                continue;
            }
            let canonical = std::fs::canonicalize(&dir).unwrap_or_else(|_| dir.clone());
            let label = format!("module.{} ({})", call.name, shown.display());
            if let Some(i) = ancestors.iter().position(|(p, _)| *p == canonical) {
                let mut chain: Vec<&str> = ancestors[i..].iter().map(|(_, l)| l.as_str()).collect();
                chain.push(&label);
                self.err(
                    call.source_span,
                    "Module cycle",
                    format!(
                        "Module {} sources one of its own ancestors, which would nest modules \
                         forever: {}.",
                        quote(&call.name),
                        chain.join(" → ")
                    ),
                );
                continue;
            }
            let mut chain = ancestors.to_vec();
            chain.push((canonical, label));
            let child = self.load_module(
                m.path.child(&call.name, None),
                &dir,
                &chain,
                Some((call, frame)),
            );
            self.check_inputs(call, &child);
            out.push((call.name.clone(), child));
        }
        out
    }

    /// A call's arguments against the child's variables, and the child's provider blocks
    /// against the call's meta-arguments.
    fn check_inputs(&mut self, call: &ModuleCall, child: &Module) {
        for (name, (_, span)) in &call.inputs {
            if !child.variables.contains_key(name) {
                let sp = Span {
                    end: span.start + name.len(),
                    ..*span
                };
                self.err(
                    sp,
                    "Unsupported argument",
                    format!(
                        "An argument named {} is not expected here.{}",
                        quote(name),
                        suggest::suffix(name, child.variables.keys().map(String::as_str))
                    ),
                );
            }
        }
        for (name, v) in &child.variables {
            if v.default.is_none() && !call.inputs.contains_key(name) {
                self.err(
                    call.span,
                    "Missing required argument",
                    format!(
                        "The argument {} is required, but no definition was found.",
                        quote(name)
                    ),
                );
            }
        }
        if (call.count.is_some() || call.for_each.is_some() || !call.depends_on.is_empty())
            && !child.providers.is_empty()
        {
            self.err(
                call.span,
                "Module is incompatible with count, for_each, and depends_on",
                format!(
                    "The module at {} is a legacy module which contains its own local provider \
                     configurations, and so calls to it may not use the count, for_each, or \
                     depends_on arguments.",
                    quote(&call.name)
                ),
            );
        }
    }
}

/// Whether a directory entry is a configuration file: `*.tf` or `*.tf.json`, not an editor's
/// backup or lock file (`.#x.tf`, `#x.tf#`, `x.tf~`), as Terraform reads them.
fn is_config_file(p: &Path) -> bool {
    let Some(name) = p.file_name().and_then(|n| n.to_str()) else {
        return false;
    };
    (name.ends_with(".tf") || name.ends_with(".tf.json"))
        && !name.starts_with('.')
        && !name.starts_with('#')
}

/// `path` with `.` steps removed and each `..` applied to the step before it, lexically (Go's
/// `filepath.Clean`); `.` when nothing is left.
fn clean_path(path: &Path) -> PathBuf {
    use std::path::Component;
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                let last_is_name =
                    matches!(out.components().next_back(), Some(Component::Normal(_)));
                if last_is_name {
                    out.pop();
                } else if !matches!(
                    out.components().next_back(),
                    Some(Component::RootDir | Component::Prefix(_))
                ) {
                    out.push("..");
                }
            }
            other => out.push(other.as_os_str()),
        }
    }
    if out.as_os_str().is_empty() {
        out.push(".");
    }
    out
}

/// Whether any root configuration file in `dir` (`*.tf`, `*.tf.json`) contains `word`: a
/// cheap look, before the configuration is loaded, for a block a command must evaluate early
/// (`backend`, `encryption`).
pub(crate) fn root_files_mention(dir: &Path, word: &str) -> bool {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return false;
    };
    rd.filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.ends_with(".tf") || n.ends_with(".tf.json"))
        })
        .any(|p| std::fs::read_to_string(&p).is_ok_and(|t| t.contains(word)))
}
