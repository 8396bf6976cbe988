//! The loader and evaluator never panic on bad input: randomly mutated fixture files and random
//! bytes are loaded; every problem must come back as diagnostics. Each loaded configuration's
//! locals, outputs and resource bodies are also evaluated (every reference resolves to an
//! unknown), so the evaluator sees the same broken-but-parsable ASTs.
//!
//! `CAIRN_PROPTEST_CASES` raises the number of cases (default 64 per property).

use cairn::diag::FileId;
use cairn::eval::{eval, eval_body, Scope, ScopeError, Subject};
use cairn::value::Value;
use proptest::prelude::*;
use std::path::{Path, PathBuf};

fn cases() -> u32 {
    std::env::var("CAIRN_PROPTEST_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(64)
}

/// Every `.tf` file under `fixtures/config`, as seeds for mutation.
fn seeds() -> Vec<Vec<u8>> {
    fn walk(dir: &Path, out: &mut Vec<Vec<u8>>) {
        let Ok(rd) = std::fs::read_dir(dir) else {
            return;
        };
        let mut paths: Vec<PathBuf> = rd.filter_map(|e| e.ok().map(|e| e.path())).collect();
        paths.sort();
        for p in paths {
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|e| e == "tf") {
                if let Ok(b) = std::fs::read(&p) {
                    out.push(b);
                }
            }
        }
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/config");
    let mut out = Vec::new();
    walk(&root, &mut out);
    assert!(!out.is_empty(), "no seed fixtures found");
    out
}

/// Pieces of HCL syntax that mutations insert, so mutants stay close to real input.
const TOKENS: &[&str] = &[
    "{",
    "}",
    "[",
    "]",
    "(",
    ")",
    "\"",
    "${",
    "%{",
    "~}",
    "<<EOT\n",
    "<<-EOT\n",
    "EOT\n",
    "=",
    "==",
    ".",
    "*",
    "...",
    "?",
    ":",
    "for x in ",
    " if ",
    "=>",
    "\n",
    "var.",
    "local.",
    "#",
    "//",
    "/*",
    "*/",
    "-",
    "!",
    "&&",
    "1e999",
    "9999999999999999999999",
    "null",
    "\\",
    "%{endfor}",
    "%{if true}",
    "dynamic \"d\" {",
    "count = ",
    "try(",
    "can(",
    "é",
    "日本",
    "🦀",
    "\u{feff}",
    "\r\n",
    "\t",
];

#[derive(Debug, Clone)]
enum Mutation {
    Delete(usize, usize),
    Insert(usize, usize),
    Bytes(usize, Vec<u8>),
    Duplicate(usize, usize, usize),
}

fn apply(mut text: Vec<u8>, muts: &[Mutation]) -> Vec<u8> {
    for m in muts {
        let len = text.len().max(1);
        match m {
            Mutation::Delete(at, n) => {
                let at = at % len;
                let end = (at + n % 16).min(text.len());
                if at < end {
                    text.drain(at..end);
                }
            }
            Mutation::Insert(at, tok) => {
                let at = (at % len).min(text.len());
                let t = TOKENS[tok % TOKENS.len()].as_bytes();
                text.splice(at..at, t.iter().copied());
            }
            Mutation::Bytes(at, bytes) => {
                let at = (at % len).min(text.len());
                text.splice(at..at, bytes.iter().copied());
            }
            Mutation::Duplicate(from, n, to) => {
                let from = from % len;
                let end = (from + n % 64).min(text.len());
                if from < end {
                    let chunk: Vec<u8> = text[from..end].to_vec();
                    let to = (to % len).min(text.len());
                    text.splice(to..to, chunk);
                }
            }
        }
    }
    text
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<usize>(), any::<usize>()).prop_map(|(a, n)| Mutation::Delete(a, n)),
        (any::<usize>(), any::<usize>()).prop_map(|(a, t)| Mutation::Insert(a, t)),
        (any::<usize>(), proptest::collection::vec(any::<u8>(), 1..4))
            .prop_map(|(a, b)| Mutation::Bytes(a, b)),
        (any::<usize>(), any::<usize>(), any::<usize>())
            .prop_map(|(f, n, t)| Mutation::Duplicate(f, n, t)),
    ]
}

/// Everything resolves to an unknown: evaluation of any parsable expression must not panic.
struct Unknowns<'a> {
    file: FileId,
    dir: &'a Path,
}

impl Scope for Unknowns<'_> {
    fn resolve(&self, _: &Subject) -> Result<Value, ScopeError> {
        Ok(Value::unknown())
    }
    fn file(&self) -> FileId {
        self.file
    }
    fn module_dir(&self) -> &Path {
        self.dir
    }
    fn root_dir(&self) -> &Path {
        self.dir
    }
}

/// Loads `bytes` as a one-file configuration and evaluates what loaded. Panics (failing the
/// property) only if the loader or evaluator panics or a parse failure goes unreported.
fn load_and_evaluate(bytes: &[u8]) {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("main.tf"), bytes).expect("write");
    let (config, diags) = cairn::config::load(dir.path());
    let config = config.expect("the directory exists, so a configuration is returned");
    let parses = std::str::from_utf8(bytes).ok().is_some_and(hcl_edit_parses);
    assert!(
        parses || diags.has_errors(),
        "a file that does not parse must give an error"
    );
    for d in &diags {
        // Every diagnostic renders (spans are inside their files).
        let _ = config.sources.render(d, false);
        let _ = config.sources.to_json(d);
    }
    for m in config.modules() {
        for l in m.locals.values() {
            let _ = eval(
                &l.expr,
                &Unknowns {
                    file: l.file,
                    dir: dir.path(),
                },
            );
        }
        for o in m.outputs.values() {
            let _ = eval(
                &o.value,
                &Unknowns {
                    file: o.file,
                    dir: dir.path(),
                },
            );
        }
        for r in m.resources.values() {
            let _ = eval_body(
                &r.body,
                None,
                &Unknowns {
                    file: r.file,
                    dir: dir.path(),
                },
            );
            let _ = cairn::eval::body_references(&r.body);
        }
    }
}

fn hcl_edit_parses(text: &str) -> bool {
    std::panic::catch_unwind(|| hcl_edit::parser::parse_body(text).is_ok()).unwrap_or(false)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]

    #[test]
    fn mutated_fixtures_never_panic(
        seed in any::<usize>(),
        muts in proptest::collection::vec(mutation(), 1..6),
    ) {
        let seeds = seeds();
        let text = apply(seeds[seed % seeds.len()].clone(), &muts);
        load_and_evaluate(&text);
    }

    #[test]
    fn random_text_never_panics(text in "\\PC{0,300}") {
        load_and_evaluate(text.as_bytes());
    }

    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        load_and_evaluate(&bytes);
    }
}
