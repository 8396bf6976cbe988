//! Fixture tests of the lifecycle engine: each directory under `fixtures/engine/` is a
//! scenario — configurations, edits made to the cloud behind Cairn's back, and commands — and
//! its `expected.txt` is the whole transcript: the plan text, the calls the `sim` provider
//! logged, the state and outputs after each step. `UPDATE_EXPECT=1` rewrites the transcripts.
//! Every scenario runs at `-parallelism=1` and `-parallelism=8`; both must give the same
//! transcript.
//!
//! `script.txt`, one command a line (`#` starts a comment):
//! - `use DIR` — the configuration is now the scenario's `DIR/` (copied into the work dir);
//! - `plan [-read-only|-destroy|-refresh=false]`, `apply [-read-only]`, `destroy`, `refresh`;
//! - `cloud delete ID`, `cloud set ID value=V`, `cloud ext KEY=VALUE` (lookup table, region
//!   `local`), `cloud ext-rm KEY` — edits made outside Cairn;
//! - `env NAME=VALUE` — an environment variable for the following commands.

use cairn::engine::progress::Silent;
use cairn::engine::{self, Options};
use cairn::plan::render::{render_plan, RenderOptions};
use cairn::plan::PlanMode;
use cairn::state::{OpenOptions, Store};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/engine")
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// Replaces the work dir's `*.tf` files (and modules) with those of `src`.
fn use_config(src: &Path, work: &Path) {
    for entry in std::fs::read_dir(work).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name().to_string_lossy().to_string();
        if name.starts_with('.') || name == "store" {
            continue;
        }
        if entry.file_type().unwrap().is_dir() {
            std::fs::remove_dir_all(entry.path()).unwrap();
        } else {
            std::fs::remove_file(entry.path()).unwrap();
        }
    }
    copy_dir(src, work);
}

/// The calls logged since `from` lines, one per line: `op type name id region ok`.
fn calls_since(store: &Path, from: &mut usize) -> String {
    let text = std::fs::read_to_string(store.join("calls.jsonl")).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    let mut out: Vec<String> = lines[*from..]
        .iter()
        .map(|l| {
            let j: serde_json::Value = serde_json::from_str(l).unwrap();
            let s = |k: &str| {
                j[k].as_str()
                    .map(str::to_string)
                    .unwrap_or_else(|| "-".into())
            };
            format!(
                "{} {} {} {} {}{}",
                s("op"),
                s("type"),
                s("name"),
                s("id"),
                s("region"),
                if j["ok"] == true { "" } else { " FAILED" }
            )
        })
        .collect();
    // Calls made concurrently land in any order: the transcript sorts them.
    out.sort();
    *from = lines.len();
    out.join("\n")
}

fn state_summary(state_dir: &Path) -> String {
    let o = OpenOptions {
        command: "test".into(),
        lock_timeout: std::time::Duration::ZERO,
        write: false,
    };
    let Ok((store, _)) = Store::open(state_dir, &o) else {
        return "(no state)".into();
    };
    let s = store.snapshot();
    let mut out = String::new();
    for (addr, p) in &s.providers {
        let _ = writeln!(
            out,
            "{addr}{} {}",
            if p.is_default { " (default)" } else { "" },
            p.config.to_json()
        );
    }
    for (addr, inst) in &s.resources {
        if let Some(o) = &inst.current {
            let deps: Vec<String> = o.deps.iter().map(|d| d.to_string()).collect();
            let _ = writeln!(
                out,
                "{addr}{} {} deps=[{}] via {}",
                if o.tainted { " (tainted)" } else { "" },
                o.attrs.to_json(),
                deps.join(", "),
                o.provider.addr
            );
        }
        for k in inst.deposed.keys() {
            let _ = writeln!(out, "{addr} deposed {k}");
        }
    }
    for (addr, d) in &s.data {
        let _ = writeln!(out, "{addr} {}", d.attrs.to_json());
    }
    for (name, o) in &s.outputs {
        let _ = writeln!(
            out,
            "output.{name} = {}{}",
            o.value.to_json(),
            if o.sensitive { " (sensitive)" } else { "" }
        );
    }
    if !s.pending.is_empty() {
        let _ = writeln!(out, "pending operations: {}", s.pending.len());
    }
    out.trim_end().to_string()
}

fn cloud_edit(store: &Path, args: &[&str]) {
    let things = store.join("things/local");
    match args {
        ["delete", id] => std::fs::remove_file(things.join(format!("{id}.json"))).unwrap(),
        ["set", id, kv] => {
            let path = things.join(format!("{id}.json"));
            let mut obj: serde_json::Map<String, serde_json::Value> =
                serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
            let (k, v) = kv.split_once('=').unwrap();
            obj.insert(k.into(), serde_json::Value::String(v.into()));
            std::fs::write(&path, serde_json::to_string(&obj).unwrap()).unwrap();
        }
        ["ext", kv] | ["ext-rm", kv] => {
            let path = store.join("ext/local.json");
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            let mut obj: serde_json::Map<String, serde_json::Value> =
                std::fs::read_to_string(&path)
                    .ok()
                    .and_then(|t| serde_json::from_str(&t).ok())
                    .unwrap_or_default();
            match kv.split_once('=') {
                Some((k, v)) => {
                    obj.insert(k.into(), serde_json::Value::String(v.into()));
                }
                None => {
                    obj.remove(*kv);
                }
            }
            std::fs::write(&path, serde_json::to_string(&obj).unwrap()).unwrap();
        }
        other => panic!("unknown cloud edit {other:?}"),
    }
}

fn diagnostics_text(
    report_diags: &cairn::diag::Diagnostics,
    config: Option<&Arc<cairn::config::Config>>,
) -> String {
    let mut out = String::new();
    for d in report_diags.iter() {
        match config {
            Some(c) => out.push_str(&c.sources.render(d, false)),
            None => {
                let _ = writeln!(out, "{:?}: {}: {}", d.severity, d.summary, d.detail);
            }
        }
    }
    out
}

/// Runs one scenario at one parallelism and returns its transcript.
fn run_scenario(dir: &Path, parallelism: usize) -> String {
    let tmp = tempfile::tempdir().unwrap();
    let work = tmp.path().join("work");
    let store = tmp.path().join("work/store");
    std::fs::create_dir_all(&work).unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let script = std::fs::read_to_string(dir.join("script.txt")).unwrap();
    let mut env = BTreeMap::from([("SIM_STORE".to_string(), store.display().to_string())]);
    let mut calls_seen = 0;
    let mut out = String::new();
    for line in script
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
    {
        let words: Vec<&str> = line.split_whitespace().collect();
        let _ = writeln!(out, "$ {line}");
        let mut opts = Options::new(&work);
        opts.env = env.clone();
        opts.parallelism = parallelism;
        opts.command = words[0].to_string();
        let flag = |f: &str| words.contains(&f);
        if flag("-refresh=false") {
            opts.refresh = false;
        }
        match words[0] {
            "use" => {
                use_config(&dir.join(words[1]), &work);
                continue;
            }
            "env" => {
                let (k, v) = words[1].split_once('=').unwrap();
                env.insert(k.into(), v.into());
                continue;
            }
            "cloud" => {
                cloud_edit(&store, &words[1..]);
                continue;
            }
            "plan" => {
                let mode = if flag("-read-only") {
                    PlanMode::ReadOnly
                } else if flag("-destroy") {
                    PlanMode::Destroy
                } else {
                    PlanMode::Normal
                };
                let r = rt.block_on(engine::plan(&opts, mode, Arc::new(Silent)));
                out.push_str(&diagnostics_text(&r.diags, r.config.as_ref()));
                if let Some(p) = &r.result {
                    out.push_str(&render_plan(
                        p,
                        &RenderOptions {
                            color: false,
                            width: 100,
                        },
                    ));
                }
            }
            "apply" | "destroy" => {
                let mode = if words[0] == "destroy" {
                    PlanMode::Destroy
                } else if flag("-read-only") {
                    PlanMode::ReadOnly
                } else {
                    PlanMode::Normal
                };
                let r = rt.block_on(engine::apply(
                    &opts,
                    mode,
                    None,
                    &|_| true,
                    Arc::new(Silent),
                ));
                if let Some(p) = r.result.as_ref().and_then(|a| a.plan.as_ref()) {
                    out.push_str(&render_plan(
                        p,
                        &RenderOptions {
                            color: false,
                            width: 100,
                        },
                    ));
                }
                out.push_str(&diagnostics_text(&r.diags, r.config.as_ref()));
                let _ = writeln!(out, "--- state\n{}", state_summary(&work.join(".cairn")));
            }
            "refresh" => {
                let r = rt.block_on(engine::refresh(&opts, false, Arc::new(Silent)));
                out.push_str(&diagnostics_text(&r.diags, r.config.as_ref()));
                let _ = writeln!(out, "--- state\n{}", state_summary(&work.join(".cairn")));
            }
            other => panic!("{}: unknown command {other}", dir.display()),
        }
        let calls = calls_since(&store, &mut calls_seen);
        let _ = writeln!(out, "--- calls\n{calls}\n");
    }
    out.replace(&tmp.path().display().to_string(), "$TMP")
}

fn check_scenario(name: &str) {
    let dir = fixtures().join(name);
    let one = run_scenario(&dir, 1);
    let eight = run_scenario(&dir, 8);
    assert_eq!(
        one, eight,
        "{name}: the transcript differs between -parallelism=1 and -parallelism=8"
    );
    let expected_path = dir.join("expected.txt");
    if std::env::var_os("UPDATE_EXPECT").is_some() {
        std::fs::write(&expected_path, &one).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&expected_path).unwrap_or_default();
    if expected != one {
        panic!(
            "{name}: transcript differs from {} (UPDATE_EXPECT=1 rewrites it)\n--- actual\n{one}",
            expected_path.display()
        );
    }
}

macro_rules! scenarios {
    ($($name:ident),* $(,)?) => {
        $(#[test] fn $name() { check_scenario(stringify!($name)); })*
    };
}

scenarios!(
    basic,
    external,
    local_file,
    null_resource,
    random,
    terraform_data
);
