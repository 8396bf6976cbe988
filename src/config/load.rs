//! Reading a module tree from disk: every `*.tf` file of a directory is parsed with hcl-edit
//! and its blocks checked and sorted into a `Module`; child modules with local sources are
//! loaded recursively.
//!
//! Every file is checked even when another fails, and every block even when another in the
//! same file is wrong: a broken block is reported and left out, the rest still loads. A module
//! that sources one of its ancestors is reported with the whole chain instead of recursing.

use super::*;
use crate::diag::{Diagnostic, Diagnostics, FileId, SourceMap, Span};
use crate::eval::expr::convert;
use crate::eval::refs::traversal_subject;
use crate::eval::suggest;
use crate::eval::types::{const_value, parse_variable_type};
use cairn_state::{quote, Mode, ModulePath};
use hcl_edit::expr::{Expression, ObjectKey, TraversalOperator};
use hcl_edit::structure::{Attribute, Block, Body, Structure};
use hcl_edit::{Decorate as _, Span as _};
use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};

/// Loads the module tree rooted at `dir`. `None` only when `dir` itself cannot be read; the
/// configuration is returned even when it has errors, so callers can report them all.
pub fn load(dir: &Path) -> (Option<Config>, Diagnostics) {
    load_only(dir, None)
}

/// `load`, with the root module made of the single file `file` of `dir` (`cairn inspect
/// FILE.tf`: policy tools load the files that changed). Modules it calls load as usual.
pub fn load_file(dir: &Path, file: &Path) -> (Option<Config>, Diagnostics) {
    load_only(dir, Some(file))
}

/// The summary of the error for a directory with no configuration files (`console` works
/// without any, as Terraform's does).
pub const NO_CONFIGURATION_FILES: &str = "No configuration files";

fn load_only(dir: &Path, only: Option<&Path>) -> (Option<Config>, Diagnostics) {
    let mut l = Loader {
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

struct Loader {
    sources: SourceMap,
    diags: Diagnostics,
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
    let Ok(remote) = super::module_source::parse_source(&call.source) else {
        return true;
    };
    if remote.recorded() != i.source {
        return false;
    }
    match (&call.version, &i.version) {
        (Some(c), Some(v)) => {
            use crate::provider::install::version::{parse_version, Constraints};
            match (Constraints::parse(c), parse_version(v)) {
                (Ok(c), Ok(v)) => c.allows(&v),
                _ => true,
            }
        }
        (Some(_), None) => false,
        _ => true,
    }
}

const RESERVED_VARIABLE_NAMES: &[&str] = &[
    "source",
    "version",
    "providers",
    "count",
    "for_each",
    "lifecycle",
    "depends_on",
    "locals",
];

fn valid_name(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_alphabetic() || c == '_')
        && chars.all(|c| c.is_alphanumeric() || c == '_' || c == '-')
}

/// The static resource an import block's `to` names (`module.m["k"].t.n[each.key]`): its
/// module path without keys and its key; the index steps are evaluated later.
pub fn import_target_static(e: &Expression) -> Result<(ModulePath, ResourceKey), String> {
    let bad = || {
        "The import target must be a resource instance address, like echo5_item.x, \
         echo5_item.x[\"key\"] or module.m.echo5_item.x."
            .to_string()
    };
    let Expression::Traversal(t) = e else {
        return Err(bad());
    };
    let Expression::Variable(root) = &t.expr else {
        return Err(bad());
    };
    let mut names: Vec<(String, bool)> = vec![(root.as_str().to_string(), false)];
    for op in t.operators.iter() {
        match op.value() {
            TraversalOperator::GetAttr(a) => names.push((a.as_str().to_string(), false)),
            TraversalOperator::Index(_) | TraversalOperator::LegacyIndex(_) => {
                match names.last_mut() {
                    Some((_, keyed @ false)) => *keyed = true,
                    _ => return Err(bad()),
                }
            }
            _ => return Err(bad()),
        }
    }
    let mut module = ModulePath::root();
    let mut i = 0;
    while names.get(i).is_some_and(|(n, _)| n == "module") {
        if names[i].1 {
            return Err(bad());
        }
        let Some((name, _)) = names.get(i + 1) else {
            return Err(bad());
        };
        module = module.child(name, None);
        i += 2;
    }
    match &names[i..] {
        [(d, false), ..] if d == "data" => Err("Only managed resources can be imported.".into()),
        [(type_, false), (name, _)] => Ok((
            module,
            ResourceKey {
                mode: Mode::Managed,
                type_: type_.clone(),
                name: name.clone(),
            },
        )),
        _ => Err(bad()),
    }
}

/// The parts of a body, after checking it against the arguments and blocks it may hold.
struct Parts<'b> {
    attrs: BTreeMap<String, &'b Attribute>,
    blocks: Vec<&'b Block>,
}

impl Loader {
    fn span(&self, file: FileId, node: &impl hcl_edit::Span) -> Span {
        span_in(file, node)
    }

    /// `main.tf:3,3-8`, as Terraform writes a range in a message.
    fn range_str(&self, s: Span) -> String {
        let a = self.sources.pos(s.file, s.start);
        let b = self.sources.pos(s.file, s.end);
        let path = self.sources.path_at(s.file, s.start).display().to_string();
        if a.line == b.line {
            format!("{path}:{},{}-{}", a.line, a.column, b.column)
        } else {
            format!("{path}:{},{}-{},{}", a.line, a.column, b.line, b.column)
        }
    }

    fn err(&mut self, span: Span, summary: &str, detail: impl Into<String>) {
        self.diags
            .push(Diagnostic::error(summary, detail).with_span(Some(span)));
    }

    fn warn(&mut self, span: Span, summary: &str, detail: impl Into<String>) {
        self.diags
            .push(Diagnostic::warning(summary, detail).with_span(Some(span)));
    }

    /// The header of a block: its type and labels (`resource "a" "b"`).
    fn header(&self, file: FileId, b: &Block) -> Span {
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
        self.load_children(&mut module, ancestors);
        module
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

    /// Rewrites a `.tf.json` file as HCL (`super::json`) and adds it to the source map:
    /// its id and the HCL text, or `None` when it is not JSON (an error, reported).
    fn json_file(&mut self, shown: &Path, text: &str) -> Option<(FileId, String)> {
        let (t, errors) = super::json::translate(
            text,
            &shown.display().to_string(),
            super::json::Kind::Config,
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

    /// Takes the parsed body by value: resource and provider bodies move into the module
    /// instead of being copied.
    fn file_body(&mut self, file: FileId, body: Body, m: &mut Module) {
        const TOP: &[&str] = &[
            "terraform",
            "provider",
            "variable",
            "locals",
            "resource",
            "data",
            "output",
            "module",
        ];
        for s in body.into_iter() {
            match s {
                Structure::Attribute(a) => {
                    let sp = self.span(file, &a.key);
                    self.err(
                        sp,
                        "Unsupported argument",
                        format!(
                            "An argument named {} is not expected here.",
                            quote(a.key.as_str())
                        ),
                    );
                }
                Structure::Block(b) => match b.ident.as_str() {
                    "terraform" => self.terraform_block(file, &b, m),
                    "provider" => self.provider_block(file, b, m),
                    "variable" => self.variable_block(file, &b, m),
                    "locals" => self.locals_block(file, &b, m),
                    "resource" => self.resource_block(file, b, m, Mode::Managed),
                    "data" => self.resource_block(file, b, m, Mode::Data),
                    "output" => self.output_block(file, &b, m),
                    "module" => self.module_block(file, &b, m),
                    "moved" => self.moved_block(file, &b, m),
                    "removed" => self.removed_block(file, &b, m),
                    "import" => self.import_block(file, &b, m),
                    "check" => self.check_block(file, b, m),
                    other => {
                        let sp = self.span(file, &b.ident);
                        self.err(
                            sp,
                            "Unsupported block type",
                            format!(
                                "Blocks of type {} are not expected here.{}",
                                quote(other),
                                suggest::suffix(other, TOP.iter().copied())
                            ),
                        );
                    }
                },
            }
        }
    }

    /// Checks a block's labels; returns them when there are exactly as many as `names`.
    fn labels(&mut self, file: FileId, b: &Block, names: &[&str]) -> Option<Vec<String>> {
        let n = names.len();
        if b.labels.len() == n && b.labels.iter().all(|l| valid_name(l.as_str())) {
            return Some(b.labels.iter().map(|l| l.as_str().to_string()).collect());
        }
        let kind = b.ident.as_str().to_string();
        let list = names.join(", ");
        if b.labels.len() < n {
            let sp = self.header(file, b);
            self.err(
                sp,
                &format!("Missing name for {kind}"),
                format!("All {kind} blocks must have {n} labels ({list})."),
            );
            return None;
        }
        if b.labels.len() > n {
            let sp = self.span(file, &b.labels[n]);
            if n == 0 {
                self.err(
                    sp,
                    &format!("Extraneous label for {kind}"),
                    format!("No labels are expected for {kind} blocks."),
                );
            } else {
                self.err(
                    sp,
                    &format!("Extraneous label for {kind}"),
                    format!("Only {n} labels ({list}) are expected for {kind} blocks."),
                );
            }
            return None;
        }
        let mut ok = true;
        for (l, what) in b.labels.iter().zip(names) {
            if !valid_name(l.as_str()) {
                let sp = self.span(file, l);
                let what = if *what == "name" {
                    kind.clone()
                } else {
                    format!("{kind} {what}")
                };
                self.err(
                    sp,
                    &format!("Invalid {what} name"),
                    "A name must start with a letter or underscore and may contain only letters, \
                     digits, underscores, and dashes.",
                );
                ok = false;
            }
        }
        ok.then(|| b.labels.iter().map(|l| l.as_str().to_string()).collect())
    }

    /// Sorts a body into its arguments and blocks, reporting duplicates and anything not in
    /// `attrs`/`blocks` (`None` allows any).
    fn parts<'b>(
        &mut self,
        file: FileId,
        body: &'b Body,
        attrs: Option<&[&str]>,
        blocks: Option<&[&str]>,
    ) -> Parts<'b> {
        let mut out = Parts {
            attrs: BTreeMap::new(),
            blocks: Vec::new(),
        };
        for s in body.iter() {
            match s {
                Structure::Attribute(a) => {
                    let name = a.key.as_str();
                    if let Some(allowed) = attrs {
                        if !allowed.contains(&name) {
                            let sp = self.span(file, &a.key);
                            self.err(
                                sp,
                                "Unsupported argument",
                                format!(
                                    "An argument named {} is not expected here.{}",
                                    quote(name),
                                    suggest::suffix(name, allowed.iter().copied())
                                ),
                            );
                            continue;
                        }
                    }
                    if let Some(prev) = out.attrs.get(name) {
                        let was = self.range_str(self.span(file, &prev.key));
                        let sp = self.span(file, &a.key);
                        self.err(
                            sp,
                            "Attribute redefined",
                            format!(
                                "The argument {} was already set at {was}. Each argument may be \
                                 set only once.",
                                quote(name)
                            ),
                        );
                        continue;
                    }
                    out.attrs.insert(name.to_string(), a);
                }
                Structure::Block(b) => {
                    let name = b.ident.as_str();
                    if let Some(allowed) = blocks {
                        if !allowed.contains(&name) {
                            let sp = self.span(file, &b.ident);
                            self.err(
                                sp,
                                "Unsupported block type",
                                format!(
                                    "Blocks of type {} are not expected here.{}",
                                    quote(name),
                                    suggest::suffix(name, allowed.iter().copied())
                                ),
                            );
                            continue;
                        }
                    }
                    out.blocks.push(b);
                }
            }
        }
        out
    }

    fn required<'b>(
        &mut self,
        file: FileId,
        b: &Block,
        parts: &Parts<'b>,
        name: &str,
    ) -> Option<&'b Attribute> {
        let a = parts.attrs.get(name).copied();
        if a.is_none() {
            let sp = self.header(file, b);
            self.err(
                sp,
                "Missing required argument",
                format!(
                    "The argument {} is required, but no definition was found.",
                    quote(name)
                ),
            );
        }
        a
    }

    fn const_of(&mut self, file: FileId, a: &Attribute, ty: &Type) -> Option<Value> {
        let v = match const_value(&a.value, file) {
            Ok(v) => v,
            Err(d) => {
                self.diags.push(d);
                return None;
            }
        };
        match convert(&v, ty) {
            Ok(v) if v.is_null() => {
                let sp = self.span(file, &a.value);
                self.err(
                    sp,
                    "Invalid value",
                    format!("The argument {} must not be null.", quote(a.key.as_str())),
                );
                None
            }
            Ok(v) => Some(v),
            Err(m) => {
                let sp = self.span(file, &a.value);
                self.err(
                    sp,
                    "Incorrect attribute value type",
                    format!(
                        "Inappropriate value for attribute {}: {m}.",
                        quote(a.key.as_str())
                    ),
                );
                None
            }
        }
    }

    fn const_string(&mut self, file: FileId, a: &Attribute) -> Option<String> {
        self.const_of(file, a, &Type::String)
            .and_then(|v| v.as_str().map(str::to_string))
    }

    fn const_bool(&mut self, file: FileId, a: Option<&Attribute>, default: bool) -> bool {
        match a {
            None => default,
            Some(a) => self
                .const_of(file, a, &Type::Bool)
                .and_then(|v| v.as_bool())
                .unwrap_or(default),
        }
    }

    fn terraform_block(&mut self, file: FileId, b: &Block, m: &mut Module) {
        if self.labels(file, b, &[]).is_none() {
            return;
        }
        let parts = self.parts(
            file,
            &b.body,
            Some(&["required_version", "experiments"]),
            Some(&["required_providers", "backend", "cloud", "provider_meta"]),
        );
        for inner in parts.blocks {
            match inner.ident.as_str() {
                "required_providers" => self.required_providers(file, inner, m),
                "backend"
                    if inner
                        .labels
                        .first()
                        .is_some_and(|l| matches!(l.as_str(), "pg" | "local")) =>
                {
                    self.backend_block(file, inner, m)
                }
                kind @ ("backend" | "cloud") => {
                    let sp = self.header(file, inner);
                    self.warn(
                        sp,
                        &format!("Ignored {kind} configuration"),
                        "Cairn keeps state in its own store; this block has no effect.",
                    );
                }
                _ => {}
            }
        }
    }

    /// `backend "pg" { conn_str = "…" schema_name = "…" … }` (or `backend "local" {}`):
    /// constant arguments only, checked against the backend's argument list.
    fn backend_block(&mut self, file: FileId, b: &Block, m: &mut Module) {
        let Some(labels) = self.labels(file, b, &["type"]) else {
            return;
        };
        let kind = labels[0].clone();
        let allowed: Vec<&str> = if kind == "pg" {
            cairn_state::backend::PG_ARGUMENTS
                .iter()
                .map(|(k, _)| *k)
                .collect()
        } else {
            Vec::new()
        };
        let parts = self.parts(file, &b.body, Some(allowed.as_slice()), Some(&[]));
        let mut args = BTreeMap::new();
        for (name, a) in parts.attrs {
            if let Some(v) = self.const_string(file, a) {
                args.insert(name, v);
            }
        }
        let span = self.header(file, b);
        if let Some(prev) = &m.backend {
            let was = self.range_str(prev.span);
            self.err(
                span,
                "Duplicate backend configuration",
                format!("A backend was already configured at {was}. A module may have only one."),
            );
            return;
        }
        m.backend = Some(crate::config::BackendBlock { kind, args, span });
    }

    fn required_providers(&mut self, file: FileId, b: &Block, m: &mut Module) {
        if self.labels(file, b, &[]).is_none() {
            return;
        }
        let parts = self.parts(file, &b.body, None, Some(&[]));
        for (name, a) in parts.attrs {
            let span = self.span(file, a);
            if let Some(prev) = m.required_providers.get(&name) {
                let was = self.range_str(prev.span);
                self.err(
                    span,
                    "Duplicate required provider",
                    format!(
                        "Provider {name} was already required at {was}. Each provider may be \
                         required only once."
                    ),
                );
                continue;
            }
            let (mut source, mut version) = (None, None);
            let (mut source_span, mut version_span) = (span, span);
            match &a.value {
                Expression::Object(o) => {
                    for (k, v) in o.iter() {
                        let key = match k {
                            ObjectKey::Ident(i) => i.as_str().to_string(),
                            ObjectKey::Expression(Expression::String(s)) => s.value().clone(),
                            ObjectKey::Expression(e) => {
                                let sp = self.span(file, e);
                                self.err(
                                    sp,
                                    "Invalid required_providers object",
                                    "Keys must be attribute names.",
                                );
                                continue;
                            }
                        };
                        if key == "configuration_aliases" {
                            // References to provider configurations, not a string: what a
                            // module call's `providers` passes is checked there.
                            continue;
                        }
                        let text = match const_value(v.expr(), file)
                            .map(|v| v.as_str().map(str::to_string))
                        {
                            Ok(Some(t)) => Some(t),
                            Ok(None) => {
                                let sp = self.span(file, v.expr());
                                self.err(
                                    sp,
                                    "Invalid required_providers object",
                                    format!("The {key} must be a string."),
                                );
                                None
                            }
                            Err(d) => {
                                self.diags.push(d);
                                None
                            }
                        };
                        let value_span = self.span(file, v.expr());
                        match key.as_str() {
                            "source" => {
                                source = text;
                                source_span = value_span;
                            }
                            "version" => {
                                version = text;
                                version_span = value_span;
                            }
                            _ => {
                                let sp = self.span(file, v.expr());
                                self.err(
                                    sp,
                                    "Invalid required_providers object",
                                    "required_providers objects can only contain \"version\", \
                                     \"source\" and \"configuration_aliases\" attributes.",
                                );
                            }
                        }
                    }
                }
                other => match const_value(other, file) {
                    Ok(v) if v.as_str().is_some() => {
                        version = v.as_str().map(str::to_string);
                        version_span = self.span(file, other);
                    }
                    _ => {
                        let sp = self.span(file, other);
                        self.err(
                            sp,
                            "Invalid required_providers object",
                            "required_providers entries must be objects with \"source\" and \
                             \"version\" attributes.",
                        );
                        continue;
                    }
                },
            }
            let addr = match &source {
                None => crate::provider::install::SourceAddr::implied(&name),
                Some(s) => match crate::provider::install::SourceAddr::parse(s) {
                    Ok(a) => a,
                    Err(detail) => {
                        self.err(source_span, "Invalid provider source address", detail);
                        crate::provider::install::SourceAddr::implied(&name)
                    }
                },
            };
            let constraints = match version.as_deref() {
                None => Default::default(),
                Some(v) => {
                    crate::provider::install::Constraints::parse(v).unwrap_or_else(|detail| {
                        self.err(version_span, "Invalid version constraint", detail);
                        Default::default()
                    })
                }
            };
            m.required_providers.insert(
                name.clone(),
                RequiredProvider {
                    name,
                    source,
                    version,
                    addr,
                    constraints,
                    span,
                },
            );
        }
    }

    fn provider_block(&mut self, file: FileId, b: Block, m: &mut Module) {
        let (alias, span, name) = match self.provider_header(file, &b, m) {
            Some(x) => x,
            None => return,
        };
        // The body without `alias`, moved (it keeps the body's span: its braces).
        let mut body = b.body;
        body.remove_attribute("alias");
        m.providers.push(ProviderBlock {
            name,
            alias,
            body,
            file,
            json: self.sources.is_json(file),
            span,
        });
    }

    /// Checks a provider block; its alias, header span and name when it is fine.
    fn provider_header(
        &mut self,
        file: FileId,
        b: &Block,
        m: &Module,
    ) -> Option<(Option<String>, Span, String)> {
        let labels = self.labels(file, b, &["name"])?;
        let name = labels[0].clone();
        let span = self.header(file, b);
        let parts = self.parts(file, &b.body, None, None);
        let mut alias = None;
        if let Some(a) = parts.attrs.get("alias") {
            match self.const_string(file, a) {
                Some(s) if valid_name(&s) => alias = Some(s),
                Some(_) => {
                    let sp = self.span(file, &a.value);
                    self.err(
                        sp,
                        "Invalid provider configuration alias",
                        "An alias must be a valid name. A name must start with a letter or \
                         underscore and may contain only letters, digits, underscores, and dashes.",
                    );
                    return None;
                }
                None => return None,
            }
        }
        if let Some(prev) = m.provider(&name, alias.as_deref()) {
            let was = self.range_str(prev.span);
            let detail = match &alias {
                None => format!(
                    "A default (non-aliased) provider configuration for {} was already given at \
                     {was}. If multiple configurations are required, set the \"alias\" argument \
                     for alternative configurations.",
                    quote(&name)
                ),
                Some(a) => format!(
                    "A provider configuration for {} with alias {} was already given at {was}. \
                     Each configuration for the same provider must have a distinct alias.",
                    quote(&name),
                    quote(a)
                ),
            };
            self.err(span, "Duplicate provider configuration", detail);
            return None;
        }
        Some((alias, span, name))
    }

    fn variable_block(&mut self, file: FileId, b: &Block, m: &mut Module) {
        let Some(labels) = self.labels(file, b, &["name"]) else {
            return;
        };
        let name = labels[0].clone();
        let span = self.header(file, b);
        if RESERVED_VARIABLE_NAMES.contains(&name.as_str()) {
            let sp = self.span(file, &b.labels[0]);
            self.err(
                sp,
                "Invalid variable name",
                format!(
                    "The variable name {} is reserved due to its special meaning inside module \
                     blocks.",
                    quote(&name)
                ),
            );
            return;
        }
        let parts = self.parts(
            file,
            &b.body,
            Some(&[
                "type",
                "default",
                "description",
                "sensitive",
                "nullable",
                "ephemeral",
            ]),
            Some(&["validation"]),
        );
        let ty = match parts.attrs.get("type") {
            None => Type::Dynamic,
            Some(a) => match parse_variable_type(&a.value, file) {
                Ok(t) => t,
                Err(d) => {
                    self.diags.push(d);
                    Type::Dynamic
                }
            },
        };
        let nullable = self.const_bool(file, parts.attrs.get("nullable").copied(), true);
        let sensitive = self.const_bool(file, parts.attrs.get("sensitive").copied(), false);
        let description = match parts.attrs.get("description") {
            Some(a) => self.const_string(file, a),
            None => None,
        };
        let mut default = None;
        if let Some(a) = parts.attrs.get("default") {
            match const_value(&a.value, file) {
                Err(d) => self.diags.push(d),
                Ok(v) => match convert(&v, &ty) {
                    Ok(v) if v.is_null() && !nullable => {
                        let sp = self.span(file, &a.value);
                        self.err(
                            sp,
                            "Invalid default value for variable",
                            "A null default value is not valid when nullable=false.",
                        );
                    }
                    Ok(v) => default = Some(v),
                    Err(msg) => {
                        let sp = self.span(file, &a.value);
                        self.err(
                            sp,
                            "Invalid default value for variable",
                            format!(
                                "This default value is not compatible with the variable's type \
                                 constraint: {msg}."
                            ),
                        );
                    }
                },
            }
        }
        let validations = self.conditions(file, parts.blocks.iter().copied());
        if let Some(prev) = m.variables.get(&name) {
            let was = self.range_str(prev.span);
            self.err(
                span,
                "Duplicate variable declaration",
                format!(
                    "A variable named {} was already declared at {was}. Variable names must be \
                     unique within a module.",
                    quote(&name)
                ),
            );
            return;
        }
        m.variables.insert(
            name.clone(),
            Variable {
                name,
                ty,
                default,
                description,
                sensitive,
                nullable,
                validations,
                file,
                span,
            },
        );
    }

    fn locals_block(&mut self, file: FileId, b: &Block, m: &mut Module) {
        if self.labels(file, b, &[]).is_none() {
            return;
        }
        let parts = self.parts(file, &b.body, None, Some(&[]));
        for (name, a) in parts.attrs {
            let span = self.span(file, a);
            if let Some(prev) = m.locals.get(&name) {
                let was = self.range_str(prev.span);
                self.err(
                    span,
                    "Duplicate local value definition",
                    format!(
                        "A local value named {} was already defined at {was}. Local value names \
                         must be unique within a module.",
                        quote(&name)
                    ),
                );
                continue;
            }
            m.locals.insert(
                name.clone(),
                Local {
                    name,
                    expr: a.value.clone(),
                    file,
                    span,
                },
            );
        }
    }

    /// `provider = sim` or `provider = sim.east`.
    fn provider_ref(&mut self, file: FileId, e: &Expression) -> Option<ProviderRef> {
        let span = self.span(file, e);
        let r = match e {
            Expression::Variable(v) => Some((v.as_str().to_string(), None)),
            Expression::Traversal(t) => match (&t.expr, t.operators.as_slice()) {
                (Expression::Variable(v), [op]) => match op.value() {
                    TraversalOperator::GetAttr(a) => {
                        Some((v.as_str().to_string(), Some(a.as_str().to_string())))
                    }
                    _ => None,
                },
                _ => None,
            },
            _ => None,
        };
        match r {
            Some((name, alias)) => Some(ProviderRef { name, alias, span }),
            None => {
                self.err(
                    span,
                    "Invalid provider reference",
                    "A provider reference is a provider name followed by an optional alias, \
                     like \"sim.east\", without quotes.",
                );
                None
            }
        }
    }

    /// `import { to = … id = … }`: root module only; `to` a managed resource instance.
    fn import_block(&mut self, file: FileId, b: &Block, m: &mut Module) {
        let span = self.header(file, b);
        let parts = self.parts(
            file,
            &b.body,
            Some(&["to", "id", "for_each", "provider"]),
            Some(&[]),
        );
        if !m.path.is_root() {
            self.err(
                span,
                "Invalid import configuration",
                format!(
                    "An import block was detected in \"{}\". Import blocks are only allowed in \
                     the root module.",
                    m.path
                ),
            );
            return;
        }
        let mut missing = false;
        for arg in ["to", "id"] {
            if !parts.attrs.contains_key(arg) {
                self.err(
                    span,
                    "Missing required argument",
                    format!("The argument \"{arg}\" is required, but no definition was found."),
                );
                missing = true;
            }
        }
        if missing {
            return;
        }
        let to = &parts.attrs["to"].value;
        let id = &parts.attrs["id"].value;
        let to_span = self.span(file, to);
        let id_span = self.span(file, id);
        let (module, key) = match import_target_static(to) {
            Ok(t) => t,
            Err(detail) => {
                self.err(to_span, "Invalid import address", detail);
                return;
            }
        };
        let provider = match parts.attrs.get("provider") {
            Some(a) => match self.provider_ref(file, &a.value) {
                Some(p) => Some(p),
                None => return,
            },
            None => None,
        };
        m.imports.push(ImportBlock {
            module,
            key,
            to: to.clone(),
            id: id.clone(),
            for_each: parts.attrs.get("for_each").map(|a| a.value.clone()),
            provider,
            file,
            span,
            to_span,
            id_span,
        });
    }

    fn depends_on(&mut self, file: FileId, a: Option<&Attribute>) -> Vec<DependsOn> {
        let Some(a) = a else {
            return Vec::new();
        };
        let Expression::Array(items) = &a.value else {
            let sp = self.span(file, &a.value);
            self.err(
                sp,
                "Invalid depends_on",
                "The depends_on argument must be a list of references, like \
                 [sim_thing.a, module.b].",
            );
            return Vec::new();
        };
        let mut out = Vec::new();
        for e in items.iter() {
            let span = self.span(file, e);
            // As in Terraform, any whole object may be named (`var.x`, `local.y`, ...): it
            // orders like a reference, and is checked like one (`check_references`).
            match traversal_subject(e) {
                Ok((subject, false)) => out.push(DependsOn { subject, span }),
                Ok((_, true)) => self.err(
                    span,
                    "Invalid depends_on reference",
                    "References in depends_on must be to a whole object (resource, etc), not \
                     to an attribute of an object.",
                ),
                Err((s, d)) => self.err(span, &s, d),
            }
        }
        out
    }

    fn resource_block(&mut self, file: FileId, block: Block, m: &mut Module, mode: Mode) {
        let b = &block;
        let Some(Ok([type_, name])) = self
            .labels(file, b, &["type", "name"])
            .map(<[String; 2]>::try_from)
        else {
            return;
        };
        let span = self.header(file, b);
        const META: &[&str] = &["count", "for_each", "provider", "depends_on", "lifecycle"];
        let parts = self.parts(file, &b.body, None, None);
        let count = parts.attrs.get("count").map(|a| Box::new(a.value.clone()));
        let for_each = parts
            .attrs
            .get("for_each")
            .map(|a| Box::new(a.value.clone()));
        if let (Some(_), Some(fe)) = (&count, parts.attrs.get("for_each")) {
            let sp = self.span(file, &fe.key);
            self.err(
                sp,
                "Invalid combination of \"count\" and \"for_each\"",
                "The \"count\" and \"for_each\" meta-arguments are mutually-exclusive, only one \
                 should be used to be explicit about the number of resources to be created.",
            );
        }
        let provider = match parts.attrs.get("provider") {
            Some(a) => self.provider_ref(file, &a.value),
            None => None,
        };
        let depends_on = self.depends_on(file, parts.attrs.get("depends_on").copied());
        if let Some(a) = parts.attrs.get("lifecycle") {
            let sp = self.span(file, &a.key);
            self.err(
                sp,
                "Unsupported argument",
                "The lifecycle meta-argument is a block: lifecycle { ... }.",
            );
        }
        let mut lifecycle = Lifecycle::default();
        let mut seen_lifecycle: Option<Span> = None;
        for lb in parts
            .blocks
            .iter()
            .filter(|b| b.ident.as_str() == "lifecycle")
        {
            let sp = self.header(file, lb);
            if let Some(prev) = seen_lifecycle {
                let was = self.range_str(prev);
                self.err(
                    sp,
                    "Duplicate lifecycle block",
                    format!("This resource already has a lifecycle block at {was}."),
                );
                continue;
            }
            seen_lifecycle = Some(sp);
            lifecycle = self.lifecycle(file, lb, mode);
        }
        // Provisioners: `local-exec` runs; the others need a connection to the object
        // (SSH, WinRM), which Cairn does not make: plan and apply refuse them through
        // `unsupported_blocks`. A `connection` serves only those, so it is read past.
        let mut provisioners = Vec::new();
        for b in block.body.iter().filter_map(|s| s.as_block()) {
            if b.ident.as_str() == "provisioner" {
                if let Some(p) = self.provisioner(file, b, mode, m) {
                    provisioners.push(p);
                }
            }
        }
        // The body without the meta-arguments, moved; it keeps the body's span.
        let mut body = block.body;
        for meta in META {
            body.remove_attribute(meta);
        }
        body.remove_blocks("lifecycle");
        body.remove_blocks("provisioner");
        body.remove_blocks("connection");
        let key = ResourceKey {
            mode,
            type_: type_.clone(),
            name: name.clone(),
        };
        // One search of the map: insert, or find the earlier declaration.
        let prev_span = match m.resources.entry(key) {
            std::collections::btree_map::Entry::Vacant(v) => {
                v.insert(Box::new(Resource {
                    mode,
                    type_,
                    name,
                    count,
                    for_each,
                    provider,
                    depends_on,
                    lifecycle,
                    body,
                    file,
                    json: self.sources.is_json(file),
                    span,
                    generated: false,
                    check: None,
                    provisioners,
                }));
                return;
            }
            std::collections::btree_map::Entry::Occupied(e) => e.get().span,
        };
        {
            let was = self.range_str(prev_span);
            let (word, noun) = match mode {
                Mode::Managed => ("resource", "resource"),
                Mode::Data => ("data", "data resource"),
            };
            self.err(
                span,
                &format!("Duplicate {word} {} configuration", quote(&type_)),
                format!(
                    "A {type_} {noun} named {} was already declared at {was}. Resource names \
                     must be unique per type in each module.",
                    quote(&name)
                ),
            );
        }
    }

    /// Condition blocks (`validation`, `precondition`, `postcondition`): each with its
    /// required `condition` and `error_message`.
    fn conditions<'b>(
        &mut self,
        file: FileId,
        blocks: impl Iterator<Item = &'b Block>,
    ) -> Vec<Validation> {
        let mut out = Vec::new();
        for vb in blocks {
            if self.labels(file, vb, &[]).is_none() {
                continue;
            }
            let vp = self.parts(
                file,
                &vb.body,
                Some(&["condition", "error_message"]),
                Some(&[]),
            );
            let cond = self.required(file, vb, &vp, "condition");
            let msg = self.required(file, vb, &vp, "error_message");
            if let (Some(c), Some(msg)) = (cond, msg) {
                out.push(Validation {
                    condition: c.value.clone(),
                    error_message: msg.value.clone(),
                    span: self.span(file, &c.value),
                });
            }
        }
        out
    }

    /// A `lifecycle` block; a data source's may hold only its conditions.
    fn lifecycle(&mut self, file: FileId, b: &Block, mode: Mode) -> Lifecycle {
        let mut l = Lifecycle::default();
        if self.labels(file, b, &[]).is_none() {
            return l;
        }
        let managed: &[&str] = &[
            "create_before_destroy",
            "prevent_destroy",
            "ignore_changes",
            "replace_triggered_by",
        ];
        if mode == Mode::Data {
            // A data source's lifecycle holds only its conditions.
            for s in b.body.iter() {
                let Some(a) = s.as_attribute() else { continue };
                let name = a.key.as_str();
                let sp = self.span(file, &a.key);
                if managed.contains(&name) {
                    self.err(
                        sp,
                        "Invalid data resource lifecycle argument",
                        format!(
                            "The lifecycle argument {} is defined only for managed resources \
                             (\"resource\" blocks), and is not valid for data resources.",
                            quote(name)
                        ),
                    );
                } else {
                    self.err(
                        sp,
                        "Unsupported argument",
                        format!("An argument named {} is not expected here.", quote(name)),
                    );
                }
            }
        }
        let parts = self.parts(
            file,
            &b.body,
            (mode == Mode::Managed).then_some(managed),
            Some(&["precondition", "postcondition"]),
        );
        let of_kind = |kind: &'static str| {
            parts
                .blocks
                .iter()
                .copied()
                .filter(move |b| b.ident.as_str() == kind)
        };
        l.preconditions = self.conditions(file, of_kind("precondition"));
        l.postconditions = self.conditions(file, of_kind("postcondition"));
        if mode == Mode::Data {
            return l;
        }
        l.create_before_destroy = self.const_bool(
            file,
            parts.attrs.get("create_before_destroy").copied(),
            false,
        );
        l.prevent_destroy =
            self.const_bool(file, parts.attrs.get("prevent_destroy").copied(), false);
        if let Some(a) = parts.attrs.get("ignore_changes") {
            l.ignore_changes = self.ignore_changes(file, &a.value);
        }
        if let Some(a) = parts.attrs.get("replace_triggered_by") {
            match &a.value {
                Expression::Array(items) => {
                    for e in items.iter() {
                        match traversal_subject(e) {
                            Ok((
                                Subject::Resource {
                                    mode: Mode::Managed,
                                    ..
                                },
                                _,
                            )) => l.replace_triggered_by.push(e.clone()),
                            Ok(_) | Err(_) => {
                                let sp = self.span(file, e);
                                self.err(
                                    sp,
                                    "Invalid replace_triggered_by expression",
                                    "Only references to managed resources, their instances \
                                     and attributes are allowed in replace_triggered_by.",
                                );
                            }
                        }
                    }
                }
                other => {
                    let sp = self.span(file, other);
                    self.err(
                        sp,
                        "Invalid replace_triggered_by expression",
                        "The replace_triggered_by argument must be a list of references.",
                    );
                }
            }
        }
        l
    }

    fn ignore_changes(&mut self, file: FileId, e: &Expression) -> IgnoreChanges {
        if let Expression::Variable(v) = e {
            if v.as_str() == "all" {
                return IgnoreChanges::All;
            }
        }
        if e.as_str() == Some("all") {
            return IgnoreChanges::All;
        }
        let Expression::Array(items) = e else {
            let sp = self.span(file, e);
            self.err(
                sp,
                "Invalid ignore_changes",
                "The ignore_changes argument must be \"all\" or a list of attribute references.",
            );
            return IgnoreChanges::None;
        };
        let mut paths = Vec::new();
        for item in items.iter() {
            match static_path(item) {
                Some(p) => paths.push(p),
                None => {
                    let sp = self.span(file, item);
                    self.err(
                        sp,
                        "Invalid expression",
                        "A single static variable reference is required: only attribute access \
                         and indexing with constant keys. No calculations, function calls, \
                         template expressions, etc are allowed here.",
                    );
                }
            }
        }
        IgnoreChanges::Paths(paths)
    }

    /// A static address in a `moved` or `removed` block (`from`, `to`): a traversal with
    /// constant keys only, parsed as a state address.
    fn move_address(&mut self, file: FileId, a: &Attribute) -> Option<cairn_state::Target> {
        let sp = self.span(file, &a.value);
        let Some(text) = static_address_text(&a.value) else {
            self.err(
                sp,
                "Invalid expression",
                "A single static variable reference is required: only attribute access and \
                 indexing with constant keys. No calculations, function calls, template \
                 expressions, etc are allowed here.",
            );
            return None;
        };
        match text.parse::<cairn_state::Target>() {
            Ok(t) => Some(t),
            Err(e) => {
                self.err(
                    sp,
                    "Invalid address",
                    format!(
                        "{e}. An address here names a resource (sim_thing.a), a resource \
                         instance (sim_thing.a[0]) or a module (module.m)."
                    ),
                );
                None
            }
        }
    }

    fn moved_block(&mut self, file: FileId, b: &Block, m: &mut Module) {
        if self.labels(file, b, &[]).is_none() {
            return;
        }
        let parts = self.parts(file, &b.body, Some(&["from", "to"]), Some(&[]));
        let from = self.required(file, b, &parts, "from");
        let to = self.required(file, b, &parts, "to");
        let from = from.and_then(|a| self.move_address(file, a));
        let to = to.and_then(|a| self.move_address(file, a));
        let (Some(from), Some(to)) = (from, to) else {
            return;
        };
        let span = self.header(file, b);
        let is_module = |t: &cairn_state::Target| matches!(t, cairn_state::Target::Module(_));
        if is_module(&from) != is_module(&to) {
            self.err(
                span,
                "Invalid \"moved\" addresses",
                "The \"from\" and \"to\" addresses must either both refer to resources or both \
                 refer to modules.",
            );
            return;
        }
        m.moved.push(MovedBlock { from, to, span });
    }

    fn removed_block(&mut self, file: FileId, b: &Block, m: &mut Module) {
        if self.labels(file, b, &[]).is_none() {
            return;
        }
        let parts = self.parts(
            file,
            &b.body,
            Some(&["from"]),
            Some(&["lifecycle", "provisioner", "connection"]),
        );
        let from = self.required(file, b, &parts, "from");
        let from_span = from.map(|a| self.span(file, &a.value));
        let from = from.and_then(|a| self.move_address(file, a));
        let mut destroy = true;
        let mut seen_lifecycle: Option<Span> = None;
        for lb in &parts.blocks {
            let sp = self.header(file, lb);
            match lb.ident.as_str() {
                "lifecycle" => {
                    if let Some(prev) = seen_lifecycle {
                        let was = self.range_str(prev);
                        self.err(
                            sp,
                            "Duplicate lifecycle block",
                            format!("This removed block already has a lifecycle block at {was}."),
                        );
                        continue;
                    }
                    seen_lifecycle = Some(sp);
                    if self.labels(file, lb, &[]).is_none() {
                        continue;
                    }
                    let lp = self.parts(file, &lb.body, Some(&["destroy"]), Some(&[]));
                    destroy = self.const_bool(file, lp.attrs.get("destroy").copied(), true);
                }
                // Destroy-time provisioners of a removed resource: Cairn runs none
                // (`unsupported_blocks`); a `connection` block is read past, as in resources.
                "provisioner" => m.state_blocks.push(("provisioner".to_string(), sp)),
                _ => {}
            }
        }
        let (Some(from), Some(from_span)) = (from, from_span) else {
            return;
        };
        match &from {
            cairn_state::Target::Instance(_) => self.err(
                from_span,
                "Resource instance keys not allowed",
                "Resource address must be a resource (e.g. \"test_instance.foo\"), not a \
                 resource instance (e.g. \"test_instance.foo[1]\").",
            ),
            cairn_state::Target::Module(p) if p.0.iter().any(|s| s.key.is_some()) => self.err(
                from_span,
                "Module instance keys not allowed",
                "Module address must be a module (e.g. \"module.foo\"), not a module instance \
                 (e.g. \"module.foo[1]\").",
            ),
            cairn_state::Target::Resource(r) if r.mode == Mode::Data => self.err(
                from_span,
                "Data source address not allowed",
                "Data sources are never destroyed, so they are not valid targets of removed \
                 blocks. To remove the data source from state, remove the data source block \
                 from configuration.",
            ),
            cairn_state::Target::Resource(r) if r.module.0.iter().any(|s| s.key.is_some()) => self
                .err(
                    from_span,
                    "Module instance keys not allowed",
                    "Module address must be a module (e.g. \"module.foo\"), not a module \
                     instance (e.g. \"module.foo[1]\").",
                ),
            _ => m.removed.push(RemovedBlock {
                from,
                destroy,
                span: self.header(file, b),
            }),
        }
    }

    /// A `provisioner "TYPE"` block: `local-exec` with its `when` and `on_failure` keywords
    /// read; another type is kept in `state_blocks` (plan and apply refuse it).
    fn provisioner(
        &mut self,
        file: FileId,
        b: &Block,
        mode: Mode,
        m: &mut Module,
    ) -> Option<Provisioner> {
        let kind = self.labels(file, b, &["type"])?.remove(0);
        let span = self.header(file, b);
        if mode == Mode::Data {
            self.err(
                span,
                "Unsupported block type",
                "Blocks of type \"provisioner\" are not expected here: data sources have no \
                 provisioners.",
            );
            return None;
        }
        if kind != "local-exec" {
            m.state_blocks
                .push((format!("provisioner \"{kind}\""), span));
            return None;
        }
        let mut keyword = |name: &str, allowed: [&str; 2]| -> Option<bool> {
            let a = b.body.get_attribute(name)?;
            let word = match &a.value {
                Expression::Variable(v) => Some(v.as_str().to_string()),
                Expression::String(s) => Some(s.as_str().to_string()),
                _ => None,
            };
            match word {
                Some(w) if allowed.contains(&w.as_str()) => Some(w == allowed[1]),
                _ => {
                    let sp = self.span(file, &a.value);
                    self.err(
                        sp,
                        &format!("Invalid \"{name}\" keyword"),
                        format!(
                            "The \"{name}\" argument requires one of the following keywords: \
                             {}, {}.",
                            allowed[0], allowed[1]
                        ),
                    );
                    None
                }
            }
        };
        let when_destroy = keyword("when", ["create", "destroy"]).unwrap_or(false);
        let on_failure_continue = keyword("on_failure", ["fail", "continue"]).unwrap_or(false);
        let mut body = b.body.clone();
        body.remove_attribute("when");
        body.remove_attribute("on_failure");
        body.remove_blocks("connection");
        if when_destroy {
            // Only the object itself exists for sure when it is destroyed.
            for r in crate::eval::body_references(&body) {
                use crate::eval::Subject;
                if !matches!(
                    r.subject,
                    Subject::SelfRef | Subject::CountIndex | Subject::EachKey
                ) {
                    let sp = Span {
                        file,
                        start: r.start,
                        end: r.end,
                    };
                    self.err(
                        sp,
                        "Invalid reference from destroy provisioner",
                        "Destroy-time provisioners and their connection configurations may only \
                         reference attributes of the related resource, via 'self', \
                         'count.index', or 'each.key'.\n\nReferences to other resources during \
                         the destroy phase can cause dependency cycles and interact poorly with \
                         create_before_destroy.",
                    );
                }
            }
        }
        Some(Provisioner {
            kind,
            when_destroy,
            on_failure_continue,
            body,
            file,
            span,
        })
    }

    /// A `check` block: its scoped data sources join the module's resources (marked with the
    /// check's name), its `assert`s are kept as conditions.
    fn check_block(&mut self, file: FileId, block: Block, m: &mut Module) {
        let Some(labels) = self.labels(file, &block, &["name"]) else {
            return;
        };
        let name = labels[0].clone();
        let span = self.header(file, &block);
        let parts = self.parts(file, &block.body, Some(&[]), Some(&["data", "assert"]));
        let asserts = self.conditions(
            file,
            parts
                .blocks
                .iter()
                .copied()
                .filter(|b| b.ident.as_str() == "assert"),
        );
        let has_assert = parts.blocks.iter().any(|b| b.ident.as_str() == "assert");
        let data: Vec<Block> = parts
            .blocks
            .iter()
            .filter(|b| b.ident.as_str() == "data")
            .map(|b| (*b).clone())
            .collect();
        if !has_assert {
            self.err(
                span,
                "Missing required block",
                "A check block must contain at least one assert block.",
            );
        }
        if let Some(prev) = m.checks.get(&name) {
            let was = self.range_str(prev.span);
            self.err(
                span,
                "Duplicate check block",
                format!(
                    "A check block named {} was already defined at {was}. Check blocks must \
                     be unique within a module.",
                    quote(&name)
                ),
            );
            return;
        }
        for d in data {
            let header = self.header(file, &d);
            let key = d
                .labels
                .iter()
                .map(|l| l.as_str().to_string())
                .collect::<Vec<_>>();
            self.resource_block(file, d, m, Mode::Data);
            if let [type_, rname] = key.as_slice() {
                let key = ResourceKey {
                    mode: Mode::Data,
                    type_: type_.clone(),
                    name: rname.clone(),
                };
                if let Some(r) = m.resources.get_mut(&key).filter(|r| r.span == header) {
                    r.check = Some(name.clone());
                }
            }
        }
        m.checks.insert(
            name.clone(),
            Check {
                name,
                asserts,
                file,
                span,
            },
        );
    }

    fn output_block(&mut self, file: FileId, b: &Block, m: &mut Module) {
        let Some(labels) = self.labels(file, b, &["name"]) else {
            return;
        };
        let name = labels[0].clone();
        let span = self.header(file, b);
        let parts = self.parts(
            file,
            &b.body,
            Some(&[
                "value",
                "description",
                "sensitive",
                "depends_on",
                "ephemeral",
            ]),
            Some(&["precondition"]),
        );
        let preconditions = self.conditions(file, parts.blocks.iter().copied());
        let value = self
            .required(file, b, &parts, "value")
            .map(|a| a.value.clone());
        let sensitive = self.const_bool(file, parts.attrs.get("sensitive").copied(), false);
        let description = match parts.attrs.get("description") {
            Some(a) => self.const_string(file, a),
            None => None,
        };
        let depends_on = self.depends_on(file, parts.attrs.get("depends_on").copied());
        if let Some(prev) = m.outputs.get(&name) {
            let was = self.range_str(prev.span);
            self.err(
                span,
                "Duplicate output definition",
                format!(
                    "An output named {} was already defined at {was}. Output names must be \
                     unique within a module.",
                    quote(&name)
                ),
            );
            return;
        }
        let Some(value) = value else {
            return;
        };
        m.outputs.insert(
            name.clone(),
            Output {
                name,
                value,
                sensitive,
                description,
                depends_on,
                preconditions,
                file,
                span,
            },
        );
    }

    fn module_block(&mut self, file: FileId, b: &Block, m: &mut Module) {
        let Some(labels) = self.labels(file, b, &["name"]) else {
            return;
        };
        let name = labels[0].clone();
        let span = self.header(file, b);
        let parts = self.parts(file, &b.body, None, Some(&[]));
        let source_attr = self.required(file, b, &parts, "source");
        let source = source_attr.and_then(|a| self.const_string(file, a));
        let source_span = source_attr
            .map(|a| self.span(file, &a.value))
            .unwrap_or(span);
        let is_local =
            |s: &str| s.starts_with("./") || s.starts_with("../") || s == "." || s == "..";
        if let Some(v) = parts
            .attrs
            .get("version")
            .filter(|_| source.as_deref().is_some_and(is_local))
        {
            let sp = self.span(file, &v.key);
            self.err(
                sp,
                "Invalid registry module source address",
                format!(
                    "Cannot apply a version constraint to module {} because it has a local \
                     source: local modules have no versions.",
                    quote(&name)
                ),
            );
        }
        let count = parts.attrs.get("count").map(|a| a.value.clone());
        let for_each = parts.attrs.get("for_each").map(|a| a.value.clone());
        if let (Some(_), Some(fe)) = (&count, parts.attrs.get("for_each")) {
            let sp = self.span(file, &fe.key);
            self.err(
                sp,
                "Invalid combination of \"count\" and \"for_each\"",
                "The \"count\" and \"for_each\" meta-arguments are mutually-exclusive, only one \
                 should be used to be explicit about the number of resources to be created.",
            );
        }
        let depends_on = self.depends_on(file, parts.attrs.get("depends_on").copied());
        let mut providers = Vec::new();
        if let Some(a) = parts.attrs.get("providers") {
            match &a.value {
                Expression::Object(o) => {
                    for (k, v) in o.iter() {
                        let child = match k {
                            ObjectKey::Ident(i) => Some(ProviderRef {
                                name: i.as_str().to_string(),
                                alias: None,
                                span: self.span(file, i),
                            }),
                            ObjectKey::Expression(e) => self.provider_ref(file, e),
                        };
                        let parent = self.provider_ref(file, v.expr());
                        if let (Some(child), Some(parent)) = (child, parent) {
                            providers.push(ProviderPass { child, parent });
                        }
                    }
                }
                other => {
                    let sp = self.span(file, other);
                    self.err(
                        sp,
                        "Invalid providers argument",
                        "The providers argument must be a map from provider names in the child \
                         module to provider configurations here, like { sim = sim.east }.",
                    );
                }
            }
        }
        const META: &[&str] = &[
            "source",
            "version",
            "count",
            "for_each",
            "depends_on",
            "providers",
        ];
        let inputs = parts
            .attrs
            .iter()
            .filter(|(k, _)| !META.contains(&k.as_str()))
            .map(|(k, a)| (k.clone(), (a.value.clone(), span_in(file, *a))))
            .collect();
        if let Some(prev) = m.calls.get(&name) {
            let was = self.range_str(prev.span);
            self.err(
                span,
                "Duplicate module call",
                format!(
                    "A module call named {} was already defined at {was}. Module calls must have \
                     unique names within a module.",
                    quote(&name)
                ),
            );
            return;
        }
        let Some(source) = source else {
            return;
        };
        let version = parts
            .attrs
            .get("version")
            .and_then(|a| self.const_string(file, a));
        m.calls.insert(
            name.clone(),
            ModuleCall {
                name,
                source,
                source_span,
                version,
                count,
                for_each,
                providers,
                depends_on,
                inputs,
                file,
                span,
            },
        );
    }

    fn load_children(&mut self, m: &mut Module, ancestors: &[(PathBuf, String)]) {
        let calls: Vec<ModuleCall> = m.calls.values().cloned().collect();
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
                    Some(i) if !installed_matches(i, &call) => {
                        let (summary, what) = match super::module_source::parse_source(src) {
                            Ok(r) if r.recorded() != i.source => (
                                "Module source has changed",
                                "The source address was changed since this module was installed.",
                            ),
                            _ => (
                                "Module version requirements have changed",
                                "The version requirements have changed since this module was installed and the installed version is no longer acceptable.",
                            ),
                        };
                        self.err(
                            call.source_span,
                            summary,
                            format!("{what} Run `cairn init` to install all modules required by this configuration."),
                        );
                        continue;
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
            let child = self.load_module(m.path.child(&call.name, None), &dir, &chain);
            self.check_inputs(&call, &child);
            m.children.insert(call.name.clone(), child);
        }
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

/// Parses a file body; a syntax error is its byte offset and message.
fn parse_body(text: &str) -> Result<Body, (usize, String)> {
    // hcl-edit is not expected to panic, but a parser bug must not take the whole run down:
    // a panic becomes a syntax error at the start of the file.
    let r = std::panic::catch_unwind(|| hcl_edit::parser::parse_body(text));
    match r {
        Ok(Ok(body)) => Ok(body),
        Ok(Err(e)) => {
            // hcl-edit's offset can fall inside a multi-byte character: snap to its start.
            let mut at = e.location().offset().min(text.len());
            while !text.is_char_boundary(at) {
                at -= 1;
            }
            Err((at, e.message().to_string()))
        }
        Err(_) => Err((0, "The file could not be parsed.".into())),
    }
}

/// Files at least this large are parsed in pieces on several threads (see `parse_file`).
const PARALLEL_PARSE_MIN: usize = 128 * 1024;

/// Parses a file into its top-level structures, as one body or as consecutive pieces.
///
/// A large file is cut into one piece per available core, each cut right after a `}` that
/// stands alone at the start of a line (where a top-level block ends in formatted HCL), and
/// the pieces are parsed at once on scoped threads. A piece other than the first is parsed
/// behind as many spaces as the bytes before it, so every span is the span in the whole
/// file. The pieces are kept only when every piece parses and none has a top-level argument:
/// a piece then ends exactly where one top-level structure ends and the next begins (a cut
/// inside a block, string, heredoc or comment leaves the piece before it unterminated, a
/// syntax error), so the pieces' structures are those of the whole file. Otherwise — a cut
/// in the wrong place, or any syntax error at all — the whole file is parsed again as one,
/// so diagnostics are exactly those of a sequential parse.
fn parse_file(text: &str) -> (Vec<Body>, Vec<SyntaxError>) {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    if let Some(bodies) = parse_in_pieces(text, threads) {
        return (bodies, Vec::new());
    }
    let (body, errors) = parse_recovering(text);
    if body.is_some() {
        return (body.into_iter().collect(), errors);
    }
    // A syntax error hcl-edit cannot go past: parse each top-level block on its own, so the
    // errors of every block are reported and the blocks that parse are still checked.
    let starts = block_starts(text);
    if starts.len() <= 2 {
        return (Vec::new(), errors);
    }
    let mut bodies = Vec::new();
    let mut all = Vec::new();
    let mid = (starts.len() - 1) / 2;
    parse_halves(text, &starts[..=mid], &mut bodies, &mut all);
    parse_halves(text, &starts[mid..], &mut bodies, &mut all);
    (bodies, all)
}

/// Parses the blocks between the first and last of `starts` (behind padding, so spans are
/// the file's): all at once when they parse, else each half again, down to single blocks
/// whose errors are reported. A few parses per broken block, not one per block.
fn parse_halves(
    text: &str,
    starts: &[usize],
    bodies: &mut Vec<Body>,
    errors: &mut Vec<SyntaxError>,
) {
    let (start, end) = (starts[0], starts[starts.len() - 1]);
    let mut padded = String::with_capacity(end);
    padded.extend(std::iter::repeat_n(' ', start));
    padded.push_str(&text[start..end]);
    let (body, errs) = parse_recovering(&padded);
    if body.is_some() || starts.len() <= 2 {
        errors.extend(errs);
        bodies.extend(body);
        return;
    }
    let mid = (starts.len() - 1) / 2;
    parse_halves(text, &starts[..=mid], bodies, errors);
    parse_halves(text, &starts[mid..], bodies, errors);
}

/// `0`, the start of every line that begins a top-level block (a block type at the start of
/// the line, then a space, a quote or a brace), and the length of `text`.
fn block_starts(text: &str) -> Vec<usize> {
    const TOP: &[&str] = &[
        "resource",
        "data",
        "module",
        "variable",
        "output",
        "locals",
        "provider",
        "terraform",
        "moved",
        "import",
        "removed",
        "check",
    ];
    let mut out = vec![0];
    let mut at = 0;
    for line in text.split_inclusive('\n') {
        let starts_block = TOP.iter().any(|t| {
            line.strip_prefix(t)
                .is_some_and(|rest| rest.starts_with([' ', '"', '{']))
        });
        if starts_block && at > 0 {
            out.push(at);
        }
        at += line.len();
    }
    out.push(text.len());
    out.dedup();
    out
}

/// The parallel half of `parse_file`: `None` when the file is not cut (too small, no cut
/// point) or when a piece does not parse cleanly.
fn parse_in_pieces(text: &str, pieces: usize) -> Option<Vec<Body>> {
    let cuts = piece_cuts(text, pieces);
    if cuts.len() <= 2 {
        return None;
    }
    std::thread::scope(|scope| {
        let handles: Vec<_> = cuts
            .windows(2)
            .map(|w| {
                let (start, end) = (w[0], w[1]);
                scope.spawn(move || parse_piece(text, start, end))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().ok().flatten())
            .collect()
    })
}

/// Where `parse_file` cuts a file into `pieces` parts: `0`, the cut points, and the length.
/// Only `0` and the length for a small file or when no cut point is found.
fn piece_cuts(text: &str, pieces: usize) -> Vec<usize> {
    let mut cuts = vec![0];
    if text.len() >= PARALLEL_PARSE_MIN {
        for i in 1..pieces {
            let from = (text.len() * i / pieces).max(*cuts.last().unwrap_or(&0));
            let Some(cut) = next_block_end(text, from) else {
                break;
            };
            cuts.push(cut);
        }
    }
    cuts.push(text.len());
    cuts.dedup();
    cuts
}

/// The first position at or after `from` that looks like the start of a top-level block in
/// formatted HCL: just after a line that is only `}`, followed by blank or comment lines and
/// then a line that starts with a top-level block type and a space. A guess: `parse_file`
/// checks it by parsing.
fn next_block_end(text: &str, from: usize) -> Option<usize> {
    const TOP: &[&str] = &[
        "resource ",
        "data ",
        "module ",
        "variable ",
        "output ",
        "locals ",
        "provider ",
        "terraform ",
    ];
    let mut at = from;
    while let Some(i) = text[at..].find("\n}") {
        let brace = at + i + 1;
        at = brace + 1;
        let rest = &text[at..];
        let eol = if rest.starts_with('\n') {
            1
        } else if rest.starts_with("\r\n") {
            2
        } else {
            continue;
        };
        let cut = at + eol;
        let mut line_start = cut;
        loop {
            let line = &text[line_start..];
            let trimmed = line.trim_start_matches([' ', '\t']);
            if trimmed.starts_with('\n') || trimmed.starts_with("\r\n") {
                line_start += line.find('\n').map_or(line.len(), |n| n + 1);
            } else if trimmed.starts_with('#') || trimmed.starts_with("//") {
                match line.find('\n') {
                    Some(n) => line_start += n + 1,
                    None => break,
                }
            } else {
                if TOP.iter().any(|t| line.starts_with(t)) {
                    return Some(cut);
                }
                break;
            }
        }
    }
    None
}

/// Parses `text[start..end]` as a body whose spans are those in `text`; `None` on any syntax
/// error or top-level argument (see `parse_file`).
fn parse_piece(text: &str, start: usize, end: usize) -> Option<Body> {
    let mut body = if start == 0 {
        parse_body(&text[..end]).ok()?
    } else {
        let mut padded = String::with_capacity(end);
        padded.extend(std::iter::repeat_n(' ', start));
        padded.push_str(&text[start..end]);
        parse_body(&padded).ok()?
    };
    if body.iter().any(Structure::is_attribute) {
        return None;
    }
    if start > 0 {
        // The first structure's leading whitespace would include the padding: give it what
        // the whole file has there.
        if let Some(mut first) = body.iter_mut().next() {
            let begin = first.span().map_or(start, |r| r.start).clamp(start, end);
            first.decor_mut().set_prefix(&text[start..begin]);
        }
    }
    Some(body)
}

/// A syntax problem: byte range, summary and detail.
type SyntaxError = (usize, usize, &'static str, String);

/// Parses a file body. hcl-edit stops at the first error; one kind is recovered from: an
/// argument set twice is reported, blanked out (to the end of its line) and the file parsed
/// again, so the rest of the file is still checked.
fn parse_recovering(text: &str) -> (Option<Body>, Vec<SyntaxError>) {
    let mut work = text.to_string();
    let mut errors: Vec<SyntaxError> = Vec::new();
    for _ in 0..32 {
        let (offset, message) = match parse_body(&work) {
            Ok(body) => return (Some(body), errors),
            Err(e) => e,
        };
        let offset = offset.min(work.len());
        if !message.contains("redefined attribute") {
            if errors.is_empty() {
                errors.push(describe_syntax_error(&work, offset, &message));
            } else if let Some(last) = errors.last_mut() {
                // A blanked-out argument may have spanned lines; what follows is not checked.
                last.3
                    .push_str(" The rest of this file could not be checked.");
            }
            return (None, errors);
        }
        let key: String = work[offset..]
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == '-')
            .collect();
        errors.push((
            offset,
            offset + key.len().max(1),
            "Attribute redefined",
            format!(
                "The argument {} was already set in this block. Each argument may be set only \
                 once.",
                quote(&key)
            ),
        ));
        let line_end = work[offset..]
            .find('\n')
            .map(|i| offset + i)
            .unwrap_or(work.len());
        // Keep byte offsets stable: as many spaces as bytes.
        let spaces = " ".repeat(line_end - offset);
        work.replace_range(offset..line_end, &spaces);
    }
    (None, errors)
}

/// Words a parse error as Terraform would, where hcl-edit's message is terse: unclosed blocks,
/// unterminated strings, quoted argument names, junk where an argument belongs.
fn describe_syntax_error(text: &str, offset: usize, message: &str) -> SyntaxError {
    let one = |at: usize| -> usize {
        text[at.min(text.len())..]
            .chars()
            .next()
            .map(|c| at + c.len_utf8())
            .unwrap_or(at)
    };
    let rest_is_blank = text[offset..].trim().is_empty();
    let line_end = text[offset..]
        .find('\n')
        .map(|i| offset + i)
        .unwrap_or(text.len());
    let line = &text[offset..line_end];
    let m = message.to_ascii_lowercase();
    if m.contains("block body") && rest_is_blank {
        // Point at the opening brace that is never closed, as Terraform does.
        let at = unclosed_brace(text).unwrap_or(offset);
        return (
            at,
            one(at),
            "Unclosed configuration block",
            "There is no closing brace for this block before the end of the file. This may be \
             caused by incorrect brace nesting elsewhere in this file."
                .into(),
        );
    }
    if m.contains("heredoc end delimiter") {
        return (
            offset,
            one(offset),
            "Unterminated template string",
            "No closing marker was found for the heredoc: its delimiter must stand on a line of \
             its own."
                .into(),
        );
    }
    if m.starts_with("expected newline") {
        return (
            offset,
            one(offset),
            "Missing newline after argument",
            "An argument definition must end with a newline.".into(),
        );
    }
    if m.starts_with("invalid expression") {
        return (
            offset,
            one(offset),
            "Invalid expression",
            "Expected the start of an expression, but found an invalid expression token.".into(),
        );
    }
    if m.starts_with("unexpected token") || m.contains("block body") {
        if let Some(after) = line.strip_prefix('"') {
            let close = after.find('"').map(|i| offset + i + 2).unwrap_or(line_end);
            return (
                offset,
                close,
                "Invalid argument name",
                "Argument names must not be quoted.".into(),
            );
        }
        // An odd number of quotes on the line: a string that never ends.
        if line.matches('"').count() % 2 == 1 {
            let q = line.find('"').map(|i| offset + i).unwrap_or(offset);
            return (
                q,
                one(q),
                "Unterminated template string",
                "No closing marker was found for the string.".into(),
            );
        }
        // `name = ...` whose value does not parse (an unclosed bracket, a dangling `.`).
        let trimmed = line.trim_start();
        let name_len = trimmed
            .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == '-'))
            .unwrap_or(trimmed.len());
        if name_len > 0 && trimmed[name_len..].trim_start().starts_with('=') {
            let name = &trimmed[..name_len];
            let eq = offset
                + (line.len() - trimmed.len())
                + line[line.len() - trimmed.len()..].find('=').unwrap_or(0);
            let value =
                eq + 1 + text[eq + 1..line_end].len() - text[eq + 1..line_end].trim_start().len();
            return (
                value,
                one(value),
                "Invalid expression",
                format!(
                    "The value of the argument {} could not be parsed: look for an unclosed \
                     bracket, brace, parenthesis or string, or an incomplete attribute access.",
                    quote(name)
                ),
            );
        }
        return (
            offset,
            one(offset),
            "Argument or block definition required",
            "An argument or block definition is required here.".into(),
        );
    }
    (
        offset,
        one(offset),
        "Invalid syntax",
        parse_message(message),
    )
}

/// The last `{` that is never closed, skipping strings, comments and heredocs (a light scan,
/// only used to place an "unclosed block" error).
fn unclosed_brace(text: &str) -> Option<usize> {
    let b = text.as_bytes();
    let mut open: Vec<usize> = Vec::new();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'"' => {
                i += 1;
                while i < b.len() && b[i] != b'"' && b[i] != b'\n' {
                    i += if b[i] == b'\\' { 2 } else { 1 };
                }
            }
            b'#' => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            b'/' if b.get(i + 1) == Some(&b'/') => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                i += 2;
                while i + 1 < b.len() && !(b[i] == b'*' && b[i + 1] == b'/') {
                    i += 1;
                }
                i += 1;
            }
            b'<' if b.get(i + 1) == Some(&b'<') => {
                // A heredoc: skip to the line that holds only its delimiter.
                let start = i + 2 + usize::from(b.get(i + 2) == Some(&b'-'));
                let end = text[start.min(text.len())..]
                    .find(|c: char| !(c.is_alphanumeric() || c == '_'))
                    .map(|n| start + n)
                    .unwrap_or(text.len());
                let delim = &text[start.min(end)..end];
                if delim.is_empty() {
                    i += 2;
                    continue;
                }
                let mut pos = text[end..]
                    .find('\n')
                    .map(|n| end + n + 1)
                    .unwrap_or(text.len());
                loop {
                    let line_end = text[pos..]
                        .find('\n')
                        .map(|n| pos + n)
                        .unwrap_or(text.len());
                    if text[pos..line_end].trim() == delim || line_end >= text.len() {
                        i = line_end;
                        break;
                    }
                    pos = line_end + 1;
                }
            }
            b'{' => open.push(i),
            b'}' => {
                open.pop();
            }
            _ => {}
        }
        i += 1;
    }
    open.last().copied()
}

/// hcl-edit's message as a sentence.
fn parse_message(m: &str) -> String {
    let mut s = m.trim().to_string();
    if let Some(c) = s.get(0..1) {
        s.replace_range(0..1, &c.to_uppercase());
    }
    if !s.ends_with('.') {
        s.push('.');
    }
    s
}

/// `a`, `a.b`, `tags["x"]`, `list[0]` as path steps; `None` for anything dynamic.
/// The text of a static address (`module.m["k"].sim_thing.a[0]`), written back from a
/// traversal whose keys are all constants; `None` for any other expression.
fn static_address_text(e: &Expression) -> Option<String> {
    let root = match e {
        Expression::Variable(v) => return Some(v.as_str().to_string()),
        Expression::Traversal(t) => match &t.expr {
            Expression::Variable(v) => v.as_str().to_string(),
            _ => return None,
        },
        _ => return None,
    };
    let Expression::Traversal(t) = e else {
        return None;
    };
    let mut out = root;
    for op in &t.operators {
        match op.value() {
            TraversalOperator::GetAttr(a) => {
                out.push('.');
                out.push_str(a.as_str());
            }
            TraversalOperator::LegacyIndex(i) => out.push_str(&format!("[{}]", i.value())),
            TraversalOperator::Index(Expression::String(s)) => {
                out.push_str(&format!("[{}]", cairn_state::quote(s.value())))
            }
            TraversalOperator::Index(Expression::Number(n)) => {
                out.push_str(&format!("[{}]", n.value()))
            }
            _ => return None,
        }
    }
    Some(out)
}

fn static_path(e: &Expression) -> Option<Vec<String>> {
    match e {
        Expression::Variable(v) => Some(vec![v.as_str().to_string()]),
        Expression::Traversal(t) => {
            let Expression::Variable(root) = &t.expr else {
                return None;
            };
            let mut out = vec![root.as_str().to_string()];
            for op in &t.operators {
                match op.value() {
                    TraversalOperator::GetAttr(a) => out.push(a.as_str().to_string()),
                    TraversalOperator::LegacyIndex(i) => out.push(i.value().to_string()),
                    TraversalOperator::Index(Expression::String(s)) => out.push(s.value().clone()),
                    TraversalOperator::Index(Expression::Number(n)) => {
                        out.push(n.value().to_string())
                    }
                    _ => return None,
                }
            }
            Some(out)
        }
        _ => None,
    }
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

#[cfg(test)]
mod piece_tests {
    //! `parse_file`'s pieces must be exactly the whole file's structures (spans and
    //! whitespace included), and a cut in the wrong place must fall back to one parse.
    use super::*;

    /// A resource whose formatting puts `}` alone at the start of lines inside it: in a
    /// heredoc, a comment and an unindented nested block.
    fn tricky(i: usize) -> String {
        format!(
            "# resource {i}\nresource \"x\" \"r{i}\" {{\n  doc = <<EOT\n}}\nnot = \"a block\"\n}}\nEOT\n  /*\n}}\n  */\n  nested {{\n    v = \"${{x.r{i}.id}}-{i}\"\n}}\n  tags = {{ a = [1, 2] }}\n}}\n\n"
        )
    }

    fn debug_structures<'a>(bodies: impl IntoIterator<Item = &'a Body>) -> Vec<String> {
        bodies
            .into_iter()
            .flat_map(|b| b.iter())
            .map(|s| format!("{s:?}"))
            .collect()
    }

    #[test]
    fn pieces_are_the_whole_files_structures() {
        let text: String = (0..4000).map(tricky).collect();
        assert!(text.len() >= PARALLEL_PARSE_MIN);
        let whole = parse_body(&text).expect("the file parses");
        for n in [2, 3, 4, 7] {
            let pieces = parse_in_pieces(&text, n).expect("cut at block ends");
            assert!(pieces.len() > 1, "{n} pieces: not cut");
            assert_eq!(
                debug_structures(&pieces),
                debug_structures([&whole]),
                "{n} pieces"
            );
        }
        let (bodies, errors) = parse_file(&text);
        assert!(errors.is_empty());
        assert_eq!(debug_structures(&bodies), debug_structures([&whole]));
    }

    #[test]
    fn a_cut_inside_a_heredoc_falls_back_to_one_parse() {
        let filler: String = (0..1500).map(tricky).collect();
        // Inside the heredoc, lines that look exactly like a block's end and the next
        // block's start.
        let heredoc_lines: String = (0..20000)
            .map(|i| format!("line {i}\n}}\n\nresource \"x\" \"h{i}\" {{\n"))
            .collect();
        let text = format!(
            "{filler}resource \"x\" \"big\" {{\n  doc = <<EOT\n{heredoc_lines}EOT\n}}\n{filler}"
        );
        let mid = text.len() / 2;
        let heredoc_at = text.find("<<EOT\nline 0").expect("heredoc");
        assert!(heredoc_at < mid && mid < heredoc_at + heredoc_lines.len());
        assert!(parse_in_pieces(&text, 2).is_none());
        let whole = parse_body(&text).expect("the file parses");
        let (bodies, errors) = parse_file(&text);
        assert!(errors.is_empty());
        assert_eq!(debug_structures(&bodies), debug_structures([&whole]));
    }

    #[test]
    fn a_syntax_error_in_a_piece_is_reported_as_in_one_parse() {
        let mut text: String = (0..4000).map(tricky).collect();
        let at = text.len() * 3 / 4;
        let line = at + text[at..].find("  tags").expect("a tags line");
        text.insert_str(line, "  broken = = 1\n");
        let (bodies, errors) = parse_file(&text);
        // The error is the one a sequential parse finds, and the other blocks still load.
        assert_eq!(errors, parse_recovering(&text).1);
        assert_eq!(errors.len(), 1, "{errors:?}");
        let blocks: usize = bodies.iter().map(|b| b.iter().count()).sum();
        let whole: usize = (0..4000)
            .map(tricky)
            .map(|t| parse_body(&t).map_or(0, |b| b.iter().count()))
            .sum();
        assert_eq!(blocks, whole - 1);
    }
}
