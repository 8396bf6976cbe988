//! Fixture tests of the lifecycle engine: each directory under `fixtures/engine/` is a
//! scenario — configurations, edits made to the cloud behind Cairn's back, and commands — and
//! its `expected.txt` is the whole transcript: the plan text, the calls the `sim` provider
//! logged, the state and outputs after each step. `UPDATE_EXPECT=1` rewrites the transcripts.
//! Every scenario runs at `-parallelism=1` and `-parallelism=8`; both must give the same
//! transcript.
//!
//! `script.txt`, one command a line (`#` starts a comment):
//! - `use DIR` — the configuration is now the scenario's `DIR/` (copied into the work dir);
//! - `plan [-read-only|-destroy|-refresh=false|-replace=ADDR|-target=ADDR|-out]`,
//!   `apply [-read-only|-replace=ADDR|-target=ADDR|SAVED]`, `destroy`, `refresh` (`plan -out`
//!   keeps the plan; `apply SAVED` applies the plan kept last);
//! - `crash ADDR name=N [value=V] [-lost]` — a run killed mid-apply: an `OperationStarted` of a
//!   create with a token is flushed, then (unless `-lost`) the object is really created under
//!   that token, and the run never records an outcome; `crash ADDR -delete [-lost]` likewise for
//!   a delete of the object in state (made, or with `-lost` never made);
//! - `state` — the state, and the violations `state check` finds (none: `ok`);
//! - `cloud delete ID`, `cloud set ID value=V`, `cloud ext KEY=VALUE` (lookup table, region
//!   `local`), `cloud ext-rm KEY` — edits made outside Cairn;
//! - `env NAME=VALUE` — an environment variable for the following commands (`env NAME=`
//!   removes it);
//! - `-ordered` on any command: the transcript also lists the changes it made in the order the
//!   provider saw them (only where that order is determined by dependencies).

use cairn::engine::api::{self, Options};
use cairn::engine::observer::Silent;
use cairn::plan::render::{render_plan, RenderOptions};
use cairn::plan::PlanMode;
use cairn::provider::ApplyRequest;
use cairn::state::{
    EventBody, OpAction, OpenOptions, ProviderAddr, ProviderInstance, ResourceInstanceAddr, Store,
    Target,
};
use cairn::value::Value;
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

/// The calls logged since `from` lines, one per line: `op type name id region ok`. With
/// `ordered`, the changes (create, update, delete) follow in the order they were made.
fn calls_since(store: &Path, from: &mut usize, ordered: bool) -> String {
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
    let changes: Vec<String> = out
        .iter()
        .filter(|l| {
            ["create ", "update ", "delete "]
                .iter()
                .any(|p| l.starts_with(p))
        })
        .cloned()
        .collect();
    // Calls made concurrently land in any order: the transcript sorts them.
    out.sort();
    *from = lines.len();
    let mut text = out.join("\n");
    if ordered {
        text.push_str("\n--- order of changes\n");
        text.push_str(&changes.join("\n"));
    }
    text
}

fn state_summary(state_dir: &Path) -> String {
    let o = OpenOptions {
        command: "test".into(),
        lock_timeout: std::time::Duration::from_secs(10),
        write: false,
        skip_lock: false,
        encryption: None,
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

/// `crash ADDR name=N [value=V] [-lost]`: what a run killed mid-create leaves behind.
fn crash(
    rt: &tokio::runtime::Runtime,
    state_dir: &Path,
    work: &Path,
    env: &BTreeMap<String, String>,
    args: &[&str],
) {
    let addr: ResourceInstanceAddr = args[0].parse().unwrap();
    let lost = args.contains(&"-lost");
    let mut attrs = cairn::value::ValueMap::new();
    for kv in args[1..].iter().filter(|a| !a.starts_with('-')) {
        let (k, v) = kv.split_once('=').unwrap();
        attrs.insert(k.to_string(), Value::string(v));
    }
    let config = Value::Object(attrs);
    let o = OpenOptions {
        command: "apply".into(),
        lock_timeout: std::time::Duration::from_secs(10),
        write: true,
        skip_lock: false,
        encryption: None,
    };
    let (mut store, _) = Store::open(state_dir, &o).unwrap();
    store.begin_run("apply", &[]).unwrap();
    let paddr = ProviderAddr::default_for(cairn::state::ModulePath::root(), "sim");
    let pref = match store.snapshot().providers.get(&paddr) {
        Some(p) => p.reference(),
        None => {
            let inst = ProviderInstance {
                addr: paddr.clone(),
                id: "sim-crashed".into(),
                config: Value::Object(Default::default()).to_stored().unwrap(),
                is_default: true,
            };
            let r = inst.reference();
            store
                .append(EventBody::ProviderRegistered { instance: inst })
                .unwrap();
            r
        }
    };
    let token = format!("crash-{addr}");
    let delete = args.contains(&"-delete");
    let prior = store.snapshot().current(&addr).cloned();
    store
        .append(EventBody::OperationStarted {
            addr: addr.clone(),
            deposed: None,
            action: if delete {
                OpAction::Delete
            } else {
                OpAction::Create
            },
            token: (!delete).then(|| token.clone()),
            provider: pref,
            prior: prior.clone().filter(|_| delete),
        })
        .unwrap();
    store.commit().unwrap();
    if delete && !lost {
        let prior = prior.expect("crash -delete needs an object in state");
        let packages = cairn::provider::builtin::builtin_with(cairn::provider::host::Host {
            env: env.clone(),
            cwd: work.to_path_buf(),
        });
        let sim = packages["sim"].clone();
        rt.block_on(async {
            let c = sim
                .configure(&Value::Object(Default::default()))
                .await
                .unwrap();
            let r = c
                .apply(ApplyRequest::Delete {
                    type_: addr.resource.type_.clone(),
                    prior: Value::from_stored(&prior.attrs),
                })
                .await;
            assert!(r.error.is_none(), "crash delete failed: {:?}", r.error);
        });
    } else if !lost && !delete {
        let packages = cairn::provider::builtin::builtin_with(cairn::provider::host::Host {
            env: env.clone(),
            cwd: work.to_path_buf(),
        });
        let sim = packages["sim"].clone();
        rt.block_on(async {
            let c = sim
                .configure(&Value::Object(Default::default()))
                .await
                .unwrap();
            let planned = c.plan(&addr.resource.type_, None, &config).unwrap().planned;
            let r = c
                .apply(ApplyRequest::Create {
                    type_: addr.resource.type_.clone(),
                    planned,
                    token,
                })
                .await;
            assert!(r.error.is_none(), "crash create failed: {:?}", r.error);
        });
    }
    // The run dies here: no outcome, no RunFinished.
    drop(store);
}

/// `state`: the invariants `cairn state check` checks.
fn state_check(state_dir: &Path) -> String {
    let o = OpenOptions {
        command: "test".into(),
        lock_timeout: std::time::Duration::from_secs(10),
        write: false,
        skip_lock: false,
        encryption: None,
    };
    let Ok((store, _)) = Store::open(state_dir, &o) else {
        return "(no state)".into();
    };
    let v = store.check();
    if v.is_empty() {
        return "ok".into();
    }
    v.iter()
        .map(|v| v.to_string())
        .collect::<Vec<_>>()
        .join("\n")
}

fn render(p: &cairn::plan::Plan) -> String {
    render_plan(
        p,
        &RenderOptions {
            color: false,
            width: 100,
        },
    )
}

fn notes_text(notes: &[String]) -> String {
    notes.iter().map(|n| format!("note: {n}\n")).collect()
}

/// Runs one scenario at one parallelism and returns its transcript.
fn run_scenario(dir: &Path, parallelism: usize) -> String {
    run_scenario_with(dir, parallelism, false)
}

/// The oracle's CLI configuration: `dev_overrides` maps `example.com/sim/sim` to the Python
/// plugin (`../shared/oracle/setup.sh`, run by `.ci/run`, writes it).
fn oracle_cli_config() -> PathBuf {
    let p = PathBuf::from(std::env::var("ORACLE_BIN").unwrap_or_else(|_| "/tmp/oracle-bin".into()))
        .join("terraformrc");
    assert!(
        p.exists(),
        "{} is missing: run ../shared/oracle/setup.sh (as .ci/run does)",
        p.display()
    );
    p
}

/// With `plugin`, every configuration gets the oracle's `required_providers` file, so `sim`
/// is the Python plugin provider (run over the plugin protocol), not the built-in.
fn run_scenario_with(dir: &Path, parallelism: usize, plugin: bool) -> String {
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
    if plugin {
        env.insert(
            "TF_CLI_CONFIG_FILE".into(),
            oracle_cli_config().display().to_string(),
        );
    }
    let mut calls_seen = 0;
    let mut saved: Option<cairn::plan::Plan> = None;
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
        // The store's lock is released when the previous command's store is dropped; a short
        // wait keeps a slow release from failing the next step (as -lock-timeout would).
        opts.lock_timeout = std::time::Duration::from_secs(10);
        let flag = |f: &str| words.contains(&f);
        if flag("-refresh=false") {
            opts.refresh = false;
        }
        for w in &words {
            if let Some(a) = w.strip_prefix("-replace=") {
                opts.replace.push(a.parse().unwrap());
            }
            if let Some(a) = w.strip_prefix("-target=") {
                opts.targets.push(a.parse::<Target>().unwrap());
            }
        }
        match words[0] {
            "use" => {
                use_config(&dir.join(words[1]), &work);
                if plugin {
                    std::fs::write(
                        work.join("oracle_providers.tf"),
                        "terraform {\n  required_providers {\n    sim = { source = \"example.com/sim/sim\" }\n  }\n}\n",
                    )
                    .unwrap();
                }
                continue;
            }
            "env" => {
                let (k, v) = words[1].split_once('=').unwrap();
                if v.is_empty() {
                    env.remove(k);
                } else {
                    env.insert(k.into(), v.into());
                }
                continue;
            }
            "cloud" => {
                cloud_edit(&store, &words[1..]);
                continue;
            }
            "crash" => {
                crash(&rt, &work.join(".cairn"), &work, &env, &words[1..]);
            }
            "state" => {
                let dir = work.join(".cairn");
                let _ = writeln!(
                    out,
                    "{}\n--- check\n{}",
                    state_summary(&dir),
                    state_check(&dir)
                );
            }
            "plan" => {
                let mode = if flag("-read-only") {
                    PlanMode::ReadOnly
                } else if flag("-destroy") {
                    PlanMode::Destroy
                } else {
                    PlanMode::Normal
                };
                let r = rt.block_on(api::plan(&opts, mode, Arc::new(Silent)));
                out.push_str(&notes_text(&r.notes));
                out.push_str(&diagnostics_text(&r.diags, r.config.as_ref()));
                if let Some(p) = &r.result {
                    out.push_str(&render(p));
                }
                if flag("-out") {
                    saved = r.result.clone();
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
                let plan_file = if flag("SAVED") {
                    Some(saved.clone().expect("apply SAVED needs a plan -out first"))
                } else {
                    None
                };
                let from_file = plan_file.is_some();
                let r = rt.block_on(api::apply(&opts, mode, plan_file, Arc::new(Silent)));
                out.push_str(&notes_text(&r.notes));
                if let Some(p) = r.result.as_ref().and_then(|a| a.plan.as_ref()) {
                    if !from_file {
                        out.push_str(&render(p));
                    }
                }
                out.push_str(&diagnostics_text(&r.diags, r.config.as_ref()));
                let _ = writeln!(out, "--- state\n{}", state_summary(&work.join(".cairn")));
            }
            "refresh" => {
                let r = rt.block_on(api::refresh(&opts, false, Arc::new(Silent)));
                out.push_str(&notes_text(&r.notes));
                out.push_str(&diagnostics_text(&r.diags, r.config.as_ref()));
                let _ = writeln!(out, "--- state\n{}", state_summary(&work.join(".cairn")));
            }
            other => panic!("{}: unknown command {other}", dir.display()),
        }
        let calls = calls_since(&store, &mut calls_seen, flag("-ordered"));
        let _ = writeln!(out, "--- calls\n{calls}\n");
    }
    stable_deposed_keys(&out.replace(&tmp.path().display().to_string(), "$TMP"))
}

/// Deposed keys are random: each is shown as `K1`, `K2`, … in the order they first appear.
fn stable_deposed_keys(text: &str) -> String {
    let re = regex::Regex::new(r"(deposed(?: object)?) ([0-9a-f]{8})\b").unwrap();
    let mut seen: Vec<String> = Vec::new();
    re.replace_all(text, |c: &regex::Captures| {
        let key = c[2].to_string();
        let n = match seen.iter().position(|k| *k == key) {
            Some(i) => i + 1,
            None => {
                seen.push(key);
                seen.len()
            }
        };
        format!("{} K{n}", &c[1])
    })
    .into_owned()
}

fn check_scenario(name: &str) {
    let dir = fixtures().join(name);
    let one = run_scenario(&dir, 1);
    let eight = run_scenario(&dir, 8);
    assert_eq!(
        one, eight,
        "{name}: the transcript differs between -parallelism=1 and -parallelism=8"
    );
    expect_test::expect_file![dir.join("expected.txt")].assert_eq(&one);
}

/// A scenario run with the Python `sim` plugin must give the transcript the built-in `sim`
/// gives: the same plans, calls and state.
fn check_plugin_scenario(name: &str) {
    let dir = fixtures().join(name);
    let plugin = run_scenario_with(&dir, 4, true);
    let expected = std::fs::read_to_string(dir.join("expected.txt")).unwrap_or_default();
    if expected != plugin {
        panic!("{name}: with the sim plugin, the transcript differs from the built-in's expected.txt\n--- actual\n{plugin}");
    }
}

macro_rules! plugin_scenarios {
    ($($name:ident),* $(,)?) => {
        mod sim_plugin {
            $(#[test] fn $name() { super::check_plugin_scenario(stringify!($name)); })*
        }
    };
}

macro_rules! scenarios {
    ($($name:ident),* $(,)?) => {
        $(#[test] fn $name() { check_scenario(stringify!($name)); })*
    };
}

scenarios!(
    basic,
    count_for_each,
    create_before_destroy,
    default_provider,
    deferral,
    deleted_outside,
    destroy_order,
    external,
    failures,
    ignore_changes,
    local_file,
    null_resource,
    pending_create,
    pending_delete,
    prevent_destroy,
    provider_from_output,
    provider_modules,
    provider_move,
    provider_region,
    provider_removed,
    random,
    read_only,
    refresh_failure,
    replace,
    saved_plan,
    target,
    terraform_data,
    provider_replaced_region,
    read_only_registers_provider,
    saved_plan_request,
    provider_reconfigured_orphans,
    provider_config_from_replaced,
    provider_replaced_cbd,
    provider_move_dependent_replaced,
    provider_reads_moved_dependency,
    provider_reads_its_own_object,
    provider_moved_resources_replaced,
    create_before_destroy_failed,
    json_syntax,
    overrides,
    provider_retargeted_failed_delete,
);

// The lifecycle scenarios that use only `sim`, run with the oracle's Python plugin. Left out,
// because they test what only the built-in `sim` has: create tokens (`pending_create`: a plugin
// has no `find_by_token`) and provider-level replacement on a region change
// (`default_provider`, `provider_region`, `provider_replaced_region`, `provider_from_output`,
// `provider_reconfigured_orphans`, `provider_config_from_replaced`, `provider_replaced_cbd`,
// `provider_move_dependent_replaced`, `provider_moved_resources_replaced`:
// the plugin protocol has no such notion, so a plugin's configuration change is an in-place
// reconfiguration — the engine's DiffConfig rule for plugins, as in Terraform).
plugin_scenarios!(
    basic,
    count_for_each,
    create_before_destroy,
    create_before_destroy_failed,
    deferral,
    deleted_outside,
    destroy_order,
    failures,
    ignore_changes,
    pending_delete,
    prevent_destroy,
    provider_modules,
    provider_move,
    provider_removed,
    read_only,
    read_only_registers_provider,
    refresh_failure,
    replace,
    saved_plan,
    target,
    json_syntax,
    overrides,
);
