//! The layer map, enforced: ARCHITECTURE.md's "Layer map" puts every source file of the
//! workspace's crates on a floor, and this test reads the code's own imports and fails on
//!
//! - an import that runs up the map (a file importing from a higher floor),
//! - an import between two rooms of one floor (siblings do not know each other),
//! - a file that the map does not place,
//! - a circle between files (any two files that reach each other through imports).
//!
//! "Imports" are what the compiler resolves, not only `use` lines: every path of two or more
//! segments in the code (`crate::x::y`, `super::z`, `cairn_state::a`, paths inside macro
//! calls) is resolved through the module tree, following re-exports (`pub use`) to the file
//! that defines the name. A module root's `pub use` of its own descendants (a facade) is not an
//! arrow; importing through a facade is an arrow to the file behind it. Test code
//! (`#[cfg(test)]`) is not part of the house. Crate roots (`lib.rs`) only declare modules and
//! re-export; they are exempt.
//!
//! Every offence is reported at once as `FILE:LINE: what`, so one run shows the whole list.
//! This test reads files; it needs no part of the cairn library.

use petgraph::algo::tarjan_scc;
use petgraph::graph::{DiGraph, NodeIndex};
use proc_macro2::{TokenStream, TokenTree};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use syn::visit::Visit;

/// The crates of the house: name as other crates spell it, and root file.
const CRATES: &[(&str, &str)] = &[
    ("cairn", "src/lib.rs"),
    ("cairn_bin", "src/main.rs"),
    ("cairn_state", "state/src/lib.rs"),
    ("cairn_graph", "graph/src/lib.rs"),
];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

type ModPath = Vec<String>;

/// One module of the tree: the file it lives in and the names it holds.
#[derive(Default)]
struct Module {
    file: String,
    /// Names of items defined here (functions, types, constants, macros…).
    items: BTreeSet<String>,
    /// Names bound by `use` (any visibility): name → absolute path.
    bindings: BTreeMap<String, ModPath>,
    /// Targets of glob imports (`use x::*`), absolute.
    globs: Vec<ModPath>,
}

/// A path as written somewhere in a module, before resolution.
struct Written {
    module: ModPath,
    path: Vec<String>,
    line: usize,
    /// `pub use` (of any restricted visibility): a facade re-export when it points below.
    reexport: bool,
}

/// One resolved arrow between two files.
#[derive(Clone)]
struct Edge {
    from: String,
    to: String,
    line: usize,
    path: String,
}

struct Tree {
    modules: BTreeMap<ModPath, Module>,
    written: Vec<Written>,
    /// Raw `use` trees, resolved once the whole tree is known: (module, path, bound name).
    raw_uses: Vec<(ModPath, Vec<String>, Option<String>)>,
    crates: BTreeSet<String>,
    problems: Vec<String>,
}

fn is_cfg_test(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        if !a.path().is_ident("cfg") {
            return false;
        }
        let text = match &a.meta {
            syn::Meta::List(l) => l.tokens.to_string(),
            _ => return false,
        };
        text == "test" || text.starts_with("all (test") || text.starts_with("any (test")
    })
}

fn item_attrs(item: &syn::Item) -> &[syn::Attribute] {
    use syn::Item::*;
    match item {
        Const(i) => &i.attrs,
        Enum(i) => &i.attrs,
        ExternCrate(i) => &i.attrs,
        Fn(i) => &i.attrs,
        ForeignMod(i) => &i.attrs,
        Impl(i) => &i.attrs,
        Macro(i) => &i.attrs,
        Mod(i) => &i.attrs,
        Static(i) => &i.attrs,
        Struct(i) => &i.attrs,
        Trait(i) => &i.attrs,
        TraitAlias(i) => &i.attrs,
        Type(i) => &i.attrs,
        Union(i) => &i.attrs,
        Use(i) => &i.attrs,
        _ => &[],
    }
}

fn item_name(item: &syn::Item) -> Option<String> {
    use syn::Item::*;
    let ident = match item {
        Const(i) => &i.ident,
        Enum(i) => &i.ident,
        Fn(i) => &i.sig.ident,
        Macro(i) => i.ident.as_ref()?,
        Static(i) => &i.ident,
        Struct(i) => &i.ident,
        Trait(i) => &i.ident,
        TraitAlias(i) => &i.ident,
        Type(i) => &i.ident,
        Union(i) => &i.ident,
        _ => return None,
    };
    Some(ident.to_string())
}

/// Flattens a `use` tree into (path, bound name or None for a glob, line).
fn flatten_use(
    tree: &syn::UseTree,
    prefix: &mut Vec<String>,
    out: &mut Vec<(Vec<String>, Option<String>, usize)>,
) {
    match tree {
        syn::UseTree::Path(p) => {
            prefix.push(p.ident.to_string());
            flatten_use(&p.tree, prefix, out);
            prefix.pop();
        }
        syn::UseTree::Name(n) => {
            let name = n.ident.to_string();
            let mut path = prefix.clone();
            let bound = if name == "self" {
                prefix.last().cloned()
            } else {
                path.push(name.clone());
                Some(name)
            };
            out.push((path, bound, n.ident.span().start().line));
        }
        syn::UseTree::Rename(r) => {
            let mut path = prefix.clone();
            if r.ident != "self" {
                path.push(r.ident.to_string());
            }
            out.push((
                path,
                Some(r.rename.to_string()),
                r.ident.span().start().line,
            ));
        }
        syn::UseTree::Glob(g) => {
            out.push((prefix.clone(), None, g.star_token.spans[0].start().line));
        }
        syn::UseTree::Group(g) => {
            for t in &g.items {
                flatten_use(t, prefix, out);
            }
        }
    }
}

/// Collects every multi-segment path in code (and `use` items nested in function bodies).
struct PathCollector {
    out: Vec<(Vec<String>, usize)>,
}

impl PathCollector {
    /// Paths inside macro calls are tokens, not syntax: `a :: b :: c` runs are read from them.
    fn scan_tokens(&mut self, tokens: TokenStream) {
        let trees: Vec<TokenTree> = tokens.into_iter().collect();
        let mut i = 0;
        while i < trees.len() {
            if let TokenTree::Group(g) = &trees[i] {
                self.scan_tokens(g.stream());
                i += 1;
                continue;
            }
            let TokenTree::Ident(first) = &trees[i] else {
                i += 1;
                continue;
            };
            let mut path = vec![first.to_string()];
            let line = first.span().start().line;
            let mut j = i + 1;
            while j + 1 < trees.len() {
                match (&trees[j], &trees[j + 1], trees.get(j + 2)) {
                    (TokenTree::Punct(a), TokenTree::Punct(b), Some(TokenTree::Ident(next)))
                        if a.as_char() == ':' && b.as_char() == ':' =>
                    {
                        path.push(next.to_string());
                        j += 3;
                    }
                    _ => break,
                }
            }
            if path.len() >= 2 {
                self.out.push((path, line));
            }
            i = j.max(i + 1);
        }
    }
}

impl<'ast> Visit<'ast> for PathCollector {
    fn visit_path(&mut self, p: &'ast syn::Path) {
        if p.segments.len() >= 2 {
            let path = p.segments.iter().map(|s| s.ident.to_string()).collect();
            self.out
                .push((path, p.segments[0].ident.span().start().line));
        }
        syn::visit::visit_path(self, p);
    }
    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        let mut flat = Vec::new();
        flatten_use(&u.tree, &mut Vec::new(), &mut flat);
        for (path, _, line) in flat {
            if path.len() >= 2 {
                self.out.push((path, line));
            }
        }
    }
    fn visit_item(&mut self, i: &'ast syn::Item) {
        if !is_cfg_test(item_attrs(i)) {
            syn::visit::visit_item(self, i);
        }
    }
    fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
        if !is_cfg_test(&f.attrs) {
            syn::visit::visit_impl_item_fn(self, f);
        }
    }
    fn visit_macro(&mut self, m: &'ast syn::Macro) {
        self.visit_path(&m.path);
        self.scan_tokens(m.tokens.clone());
    }
    fn visit_visibility(&mut self, _: &'ast syn::Visibility) {}
    fn visit_attribute(&mut self, _: &'ast syn::Attribute) {}
}

impl Tree {
    fn load(base: &Path, crates: &[(&str, &str)]) -> Tree {
        let mut tree = Tree {
            modules: BTreeMap::new(),
            written: Vec::new(),
            raw_uses: Vec::new(),
            crates: crates.iter().map(|(n, _)| n.to_string()).collect(),
            problems: Vec::new(),
        };
        for (name, file) in crates {
            tree.load_file(base, vec![name.to_string()], file);
        }
        tree.bind_uses();
        tree
    }

    fn load_file(&mut self, base: &Path, module: ModPath, rel: &str) {
        let text = match std::fs::read_to_string(base.join(rel)) {
            Ok(t) => t,
            Err(e) => {
                self.problems.push(format!("{rel}: cannot read: {e}"));
                return;
            }
        };
        let file = match syn::parse_file(&text) {
            Ok(f) => f,
            Err(e) => {
                let at = e.span().start();
                self.problems.push(format!(
                    "{rel}:{}:{}: does not parse: {e}",
                    at.line,
                    at.column + 1
                ));
                return;
            }
        };
        let name = Path::new(rel)
            .file_name()
            .unwrap()
            .to_string_lossy()
            .to_string();
        let dir = Path::new(rel).parent().unwrap().to_path_buf();
        // Where `mod x;` looks for x: beside a mod.rs/lib.rs/main.rs, in a folder named after
        // any other file.
        let child_dir = if matches!(name.as_str(), "mod.rs" | "lib.rs" | "main.rs") {
            dir.clone()
        } else {
            dir.join(rel_stem(rel))
        };
        self.load_items(base, module, rel, &dir, &child_dir, &file.items);
    }

    fn load_items(
        &mut self,
        base: &Path,
        module: ModPath,
        rel: &str,
        file_dir: &Path,
        child_dir: &Path,
        items: &[syn::Item],
    ) {
        self.modules.entry(module.clone()).or_default().file = rel.to_string();
        for item in items {
            if is_cfg_test(item_attrs(item)) {
                continue;
            }
            if let Some(n) = item_name(item) {
                self.modules.get_mut(&module).unwrap().items.insert(n);
            }
            match item {
                syn::Item::Mod(m) => {
                    let mut child = module.clone();
                    child.push(m.ident.to_string());
                    if let Some((_, inner)) = &m.content {
                        let sub = child_dir.join(m.ident.to_string());
                        self.load_items(base, child, rel, file_dir, &sub, inner);
                        continue;
                    }
                    let explicit = m.attrs.iter().find_map(|a| match &a.meta {
                        syn::Meta::NameValue(nv) if nv.path.is_ident("path") => match &nv.value {
                            syn::Expr::Lit(syn::ExprLit {
                                lit: syn::Lit::Str(s),
                                ..
                            }) => Some(file_dir.join(s.value())),
                            _ => None,
                        },
                        _ => None,
                    });
                    let candidates = match explicit {
                        Some(p) => vec![p],
                        None => vec![
                            child_dir.join(format!("{}.rs", m.ident)),
                            child_dir.join(m.ident.to_string()).join("mod.rs"),
                        ],
                    };
                    match candidates.iter().find(|p| base.join(p).is_file()) {
                        Some(p) => self.load_file(base, child, &p.to_string_lossy()),
                        None => {
                            let line = m.ident.span().start().line;
                            self.problems
                                .push(format!("{rel}:{line}: no file for `mod {}`", m.ident));
                        }
                    }
                }
                syn::Item::Use(u) => {
                    let mut flat = Vec::new();
                    flatten_use(&u.tree, &mut Vec::new(), &mut flat);
                    let reexport = !matches!(u.vis, syn::Visibility::Inherited);
                    for (path, bound, line) in flat {
                        self.raw_uses.push((module.clone(), path.clone(), bound));
                        self.written.push(Written {
                            module: module.clone(),
                            path,
                            line,
                            reexport,
                        });
                    }
                }
                other => {
                    let mut c = PathCollector { out: Vec::new() };
                    c.visit_item(other);
                    for (path, line) in c.out {
                        self.written.push(Written {
                            module: module.clone(),
                            path,
                            line,
                            reexport: false,
                        });
                    }
                }
            }
        }
    }

    /// Records every `use` as a binding of its module, once all modules are known.
    fn bind_uses(&mut self) {
        let raw = std::mem::take(&mut self.raw_uses);
        for (module, path, bound) in &raw {
            let Some(abs) = self.absolute(module, path, 0) else {
                continue;
            };
            let m = self.modules.get_mut(module).unwrap();
            match bound {
                Some(name) => {
                    m.bindings.insert(name.clone(), abs);
                }
                None => m.globs.push(abs),
            }
        }
    }

    /// The absolute form of a path written in `module`, or None when it leaves the house
    /// (std, serde, …) or names something local (a variable, a generic, `Self`).
    fn absolute(&self, module: &ModPath, path: &[String], depth: usize) -> Option<ModPath> {
        let first = path.first()?;
        let rest = &path[1..];
        let join = |base: &[String], rest: &[String]| -> ModPath {
            base.iter().chain(rest).cloned().collect()
        };
        match first.as_str() {
            "crate" => Some(join(&module[..1], rest)),
            "self" => Some(join(module, rest)),
            "super" => {
                let mut base = module.clone();
                let mut rest = path;
                while rest.first().map(String::as_str) == Some("super") {
                    base.pop();
                    rest = &rest[1..];
                }
                (!base.is_empty()).then(|| join(&base, rest))
            }
            name if self.crates.contains(name) => Some(path.to_vec()),
            name => {
                let mut child = module.clone();
                child.push(name.to_string());
                if self.modules.contains_key(&child) {
                    return Some(join(module, path));
                }
                if depth > 8 {
                    return None;
                }
                let m = self.modules.get(module)?;
                let bound = m.bindings.get(name)?;
                Some(join(bound, rest))
            }
        }
    }

    /// Whether `module` holds `name` (defined, bound, a child or through a glob).
    fn holds(&self, module: &ModPath, name: &str, depth: usize) -> bool {
        let Some(m) = self.modules.get(module) else {
            return false;
        };
        let mut child = module.clone();
        child.push(name.to_string());
        m.items.contains(name)
            || m.bindings.contains_key(name)
            || self.modules.contains_key(&child)
            || (depth < 8 && m.globs.iter().any(|g| self.holds(g, name, depth + 1)))
    }

    /// The file that defines what an absolute path names, through re-exports and globs.
    fn resolve(&self, abs: &[String], depth: usize) -> Option<String> {
        let mut module: ModPath = vec![abs.first()?.clone()];
        self.modules.get(&module)?;
        let mut i = 1;
        while i < abs.len() {
            let name = &abs[i];
            let mut child = module.clone();
            child.push(name.clone());
            if self.modules.contains_key(&child) {
                module = child;
                i += 1;
                continue;
            }
            let m = &self.modules[&module];
            if m.items.contains(name) || depth > 12 {
                break;
            }
            if let Some(target) = m.bindings.get(name) {
                let next: ModPath = target.iter().chain(&abs[i + 1..]).cloned().collect();
                return self
                    .resolve(&next, depth + 1)
                    .or_else(|| Some(m.file.clone()));
            }
            if let Some(g) = m.globs.iter().find(|g| self.holds(g, name, 0)) {
                let next: ModPath = g.iter().chain(&abs[i..]).cloned().collect();
                return self
                    .resolve(&next, depth + 1)
                    .or_else(|| Some(m.file.clone()));
            }
            break;
        }
        Some(self.modules[&module].file.clone())
    }

    fn edges(&self) -> Vec<Edge> {
        let mut out = Vec::new();
        for w in &self.written {
            let Some(abs) = self.absolute(&w.module, &w.path, 0) else {
                continue;
            };
            // A facade: a module's `pub use` of its own descendants.
            if w.reexport && abs.len() > w.module.len() && abs.starts_with(&w.module) {
                continue;
            }
            let Some(to) = self.resolve(&abs, 0) else {
                continue;
            };
            let from = &self.modules[&w.module].file;
            if &to != from {
                out.push(Edge {
                    from: from.clone(),
                    to,
                    line: w.line,
                    path: w.path.join("::"),
                });
            }
        }
        out
    }

    fn files(&self) -> BTreeSet<String> {
        self.modules.values().map(|m| m.file.clone()).collect()
    }
}

fn rel_stem(rel: &str) -> String {
    Path::new(rel)
        .file_stem()
        .unwrap()
        .to_string_lossy()
        .to_string()
}

/// The map: each room (a folder ending in `/` or a file, whose folder of child modules it
/// also covers) on its floor.
struct Map {
    rooms: Vec<(String, u32)>,
}

impl Map {
    /// Reads the "## Layer map" table: `| floor | rooms in backticks | … |`.
    fn parse(markdown: &str) -> Result<Map, String> {
        let section = markdown
            .split("\n## ")
            .find(|s| s.starts_with("Layer map"))
            .ok_or("ARCHITECTURE.md has no \"## Layer map\" section")?;
        let mut rooms = Vec::new();
        for line in section.lines().filter(|l| l.starts_with('|')) {
            let cells: Vec<&str> = line.split('|').map(str::trim).collect();
            let Some(Ok(floor)) = cells.get(1).map(|c| c.parse::<u32>()) else {
                continue;
            };
            let cell = cells.get(2).copied().unwrap_or("");
            for (k, part) in cell.split('`').enumerate() {
                if k % 2 == 1 {
                    rooms.push((part.to_string(), floor));
                }
            }
        }
        if rooms.is_empty() {
            return Err("the \"## Layer map\" table places no room".into());
        }
        Ok(Map { rooms })
    }

    /// The room and floor of a file: the longest room that covers it.
    fn place(&self, file: &str) -> Option<(&str, u32)> {
        self.rooms
            .iter()
            .filter(|(room, _)| {
                if room.ends_with('/') {
                    file.starts_with(room.as_str())
                } else {
                    let folder = format!("{}/", room.trim_end_matches(".rs"));
                    file == room || file.starts_with(&folder)
                }
            })
            .max_by_key(|(room, _)| room.len())
            .map(|(room, floor)| (room.as_str(), *floor))
    }
}

fn is_crate_root(file: &str) -> bool {
    file.ends_with("lib.rs")
}

/// Every offence of `tree` against `map`, as `FILE:LINE: what`.
fn offences(tree: &Tree, map: &Map) -> Vec<String> {
    let mut out = tree.problems.clone();
    for file in tree.files() {
        if !is_crate_root(&file) && map.place(&file).is_none() {
            out.push(format!(
                "{file}: not on the layer map: add its room to ARCHITECTURE.md's \"Layer map\""
            ));
        }
    }
    let edges = tree.edges();
    let mut seen = BTreeSet::new();
    for e in &edges {
        if is_crate_root(&e.from) || is_crate_root(&e.to) {
            continue;
        }
        let (Some((from_room, from_floor)), Some((to_room, to_floor))) =
            (map.place(&e.from), map.place(&e.to))
        else {
            continue;
        };
        let why = if to_floor > from_floor {
            format!("imports up the map: {from_room} (floor {from_floor}) → {to_room} (floor {to_floor})")
        } else if to_floor == from_floor && from_room != to_room {
            format!("imports a sibling: {from_room} and {to_room} share floor {from_floor}")
        } else {
            continue;
        };
        if seen.insert((e.from.clone(), e.to.clone(), e.path.clone())) {
            out.push(format!(
                "{}:{}: `{}` ({}) {why}",
                e.from, e.line, e.path, e.to
            ));
        }
    }
    out.extend(circles(&edges));
    out
}

/// Circles between files: every strongly connected set of two or more files, with one import
/// for each arrow inside it.
fn circles(edges: &[Edge]) -> Vec<String> {
    let mut graph = DiGraph::<String, ()>::new();
    let mut nodes: HashMap<String, NodeIndex> = HashMap::new();
    let mut node = |g: &mut DiGraph<String, ()>, f: &str| {
        *nodes
            .entry(f.to_string())
            .or_insert_with(|| g.add_node(f.to_string()))
    };
    let mut example: BTreeMap<(String, String), &Edge> = BTreeMap::new();
    for e in edges
        .iter()
        .filter(|e| !is_crate_root(&e.from) && !is_crate_root(&e.to))
    {
        let (a, b) = (node(&mut graph, &e.from), node(&mut graph, &e.to));
        if example.insert((e.from.clone(), e.to.clone()), e).is_none() {
            graph.add_edge(a, b, ());
        }
    }
    let mut out = Vec::new();
    for scc in tarjan_scc(&graph) {
        if scc.len() < 2 {
            continue;
        }
        let files: BTreeSet<&String> = scc.iter().map(|n| &graph[*n]).collect();
        let mut text = format!(
            "a circle between {} files: {}",
            files.len(),
            files
                .iter()
                .map(|f| f.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        );
        for ((from, to), e) in &example {
            if files.contains(from) && files.contains(to) {
                text.push_str(&format!("\n    {from}:{}: `{}` → {to}", e.line, e.path));
            }
        }
        out.push(text);
    }
    out
}

#[test]
fn no_import_runs_against_the_layer_map() {
    let base = root();
    let map = Map::parse(&std::fs::read_to_string(base.join("ARCHITECTURE.md")).unwrap())
        .unwrap_or_else(|e| panic!("{e}"));
    let tree = Tree::load(&base, CRATES);
    let found = offences(&tree, &map);
    println!(
        "{} files, {} arrows between files",
        tree.files().len(),
        tree.edges().len()
    );
    assert!(
        found.is_empty(),
        "{} offence(s) against ARCHITECTURE.md's layer map:\n{}",
        found.len(),
        found.join("\n")
    );
}

/// The checker itself: it sees arrows the real code has, and on a small house built to break
/// the map it reports each kind of offence (so a broken resolver cannot pass silently).
#[test]
fn the_checker_finds_what_it_should() {
    let tree = Tree::load(&root(), CRATES);
    let edges = tree.edges();
    let has = |from: &str, to: &str| edges.iter().any(|e| e.from == from && e.to.starts_with(to));
    assert!(has("src/main.rs", "src/cli/"), "main → cli not seen");
    assert!(
        edges
            .iter()
            .any(|e| e.from.starts_with("src/engine/") && e.to.starts_with("src/config/")),
        "engine → config not seen"
    );
    assert!(
        edges
            .iter()
            .any(|e| e.from.starts_with("src/engine/") && e.to.starts_with("state/src/")),
        "engine → state not seen"
    );

    let dir = tempfile::tempdir().unwrap();
    let write = |rel: &str, text: &str| {
        let p = dir.path().join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    };
    write("src/lib.rs", "mod low; mod high; mod side; mod lost;\n");
    write(
        "src/low.rs",
        "pub use crate::high::Up;\npub fn f() { crate::side::g(); }\n",
    );
    write(
        "src/high/mod.rs",
        "mod inner;\npub use inner::Up;\npub fn h() { inner::k(); }\n",
    );
    write(
        "src/high/inner.rs",
        "pub struct Up;\npub fn k() {}\npub fn back() { super::h() }\n",
    );
    write(
        "src/side.rs",
        "pub fn g() { println!(\"{}\", crate::low::f()); }\n",
    );
    write(
        "src/lost.rs",
        "#[cfg(test)]\nmod tests { use crate::high::h; }\n",
    );
    let map = Map::parse("# x\n\n## Layer map\n\n| floor | rooms |\n|---|---|\n| 0 | `src/low.rs`, `src/side.rs` |\n| 1 | `src/high/` |\n").unwrap();
    let tree = Tree::load(dir.path(), &[("demo", "src/lib.rs")]);
    let found = offences(&tree, &map).join("\n");
    for expected in [
        "src/low.rs:1: `crate::high::Up` (src/high/inner.rs) imports up the map",
        "src/low.rs:2: `crate::side::g` (src/side.rs) imports a sibling",
        "src/lost.rs: not on the layer map",
        "a circle between 2 files: src/high/inner.rs, src/high/mod.rs",
        "a circle between 2 files: src/low.rs, src/side.rs",
    ] {
        assert!(
            found.contains(expected),
            "expected `{expected}` in:\n{found}"
        );
    }
    assert!(
        !found.contains("src/lost.rs:2"),
        "test code counted:\n{found}"
    );
}
