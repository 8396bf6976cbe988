//! Tidy rules of the state crate, checked: only `sled_store.rs` talks to sled, every file says what
//! it is for, and the store can move between threads (the engine shares it behind a mutex).

use std::path::Path;

fn sources() -> Vec<(String, String)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut out = Vec::new();
    for sub in ["src", "tests", "benches"] {
        let Ok(entries) = std::fs::read_dir(dir.join(sub)) else {
            continue;
        };
        for e in entries.flatten() {
            let path = e.path();
            if path.extension().is_some_and(|x| x == "rs") {
                let name = format!("{sub}/{}", e.file_name().to_string_lossy());
                let text = std::fs::read_to_string(&path).expect("readable source");
                out.push((name, text));
            }
        }
    }
    out.sort();
    out
}

#[test]
fn only_sled_store_rs_talks_to_sled() {
    let offenders: Vec<_> = sources()
        .into_iter()
        .filter(|(name, _)| name.starts_with("src/") && name != "src/sled_store.rs")
        .filter(|(_, text)| text.contains("sled::"))
        .map(|(name, _)| name)
        .collect();
    assert!(
        offenders.is_empty(),
        "sled used outside sled_store.rs: {offenders:?}"
    );
}

#[test]
fn every_file_starts_with_a_doc_line() {
    let missing: Vec<_> = sources()
        .into_iter()
        .filter(|(_, text)| !text.starts_with("//!"))
        .map(|(name, _)| name)
        .collect();
    assert!(
        missing.is_empty(),
        "files without a leading //! line: {missing:?}"
    );
}

#[test]
fn the_store_is_send() {
    fn send<T: Send>() {}
    send::<cairn_state::Store>();
    send::<cairn_state::Snapshot>();
}

/// The modules each file of `src/` names as `crate::<module>` outside comments (`lib.rs`,
/// which declares them all, left out).
fn module_imports() -> std::collections::BTreeMap<String, std::collections::BTreeSet<String>> {
    let files: Vec<(String, String)> = sources()
        .into_iter()
        .filter_map(|(name, text)| {
            let module = name.strip_prefix("src/")?.strip_suffix(".rs")?.to_string();
            (module != "lib").then_some((module, text))
        })
        .collect();
    let modules: std::collections::BTreeSet<String> =
        files.iter().map(|(m, _)| m.clone()).collect();
    let mut graph = std::collections::BTreeMap::new();
    for (module, text) in &files {
        let mut deps = std::collections::BTreeSet::new();
        for line in text.lines().filter(|l| !l.trim_start().starts_with("//")) {
            for (at, _) in line.match_indices("crate::") {
                let rest = &line[at + "crate::".len()..];
                let name: String = rest
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                if modules.contains(&name) && &name != module {
                    deps.insert(name);
                }
            }
        }
        graph.insert(module.clone(), deps);
    }
    graph
}

#[test]
fn the_files_form_a_dag_by_their_imports() {
    let graph = module_imports();
    // Depth-first search; a module met again while on the path closes a circle.
    fn visit(
        m: &str,
        graph: &std::collections::BTreeMap<String, std::collections::BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut std::collections::BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(i) = path.iter().position(|p| p == m) {
            let mut circle = path[i..].to_vec();
            circle.push(m.to_string());
            return Some(circle);
        }
        if done.contains(m) {
            return None;
        }
        path.push(m.to_string());
        for d in graph.get(m).into_iter().flatten() {
            if let Some(c) = visit(d, graph, path, done) {
                return Some(c);
            }
        }
        path.pop();
        done.insert(m.to_string());
        None
    }
    let mut done = std::collections::BTreeSet::new();
    for m in graph.keys() {
        if let Some(circle) = visit(m, &graph, &mut Vec::new(), &mut done) {
            panic!(
                "the files of state/src import in a circle: {}",
                circle.join(" -> ")
            );
        }
    }
    // The stores are below the log core's users: neither names `store` or `workspace`.
    for low in ["log", "storage", "sled_store", "pg_store"] {
        let deps = &graph[low];
        assert!(
            !deps.contains("store") && !deps.contains("workspace"),
            "{low}.rs imports {deps:?}"
        );
    }
}
