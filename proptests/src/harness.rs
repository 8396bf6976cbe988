//! The world a scenario runs in: a temporary work directory with the configuration, the real
//! state store in `work/.cairn`, and a `sim` store in `work/store` — and the real engine,
//! called the way the CLI calls it. Each operation returns an [`Outcome`]: what the engine
//! reported, the calls the `sim` provider logged, and the state and cloud before and after.
//!
//! The world also keeps a transcript in the engine fixture format (`fixtures/engine/`), with
//! cloud edits naming real ids, so a failing case prints a reproduction to paste there.

use crate::gen::{Cfg, CloudEdit, Fault, Op, Rep};
use cairn::engine::api::{self, Options};
use cairn::engine::observer::Silent;
use cairn::engine::Sabotage;
use cairn::plan::render::{render_plan, RenderOptions};
use cairn::plan::{Plan, PlanMode};
use cairn::state::{Event, OpenOptions, Snapshot, Store};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// One line of `calls.jsonl`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Call {
    pub op: String,
    pub type_: String,
    pub name: String,
    pub id: Option<String>,
    pub region: String,
    pub ok: bool,
}

/// One object file of the `sim` store.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Obj {
    pub name: String,
    pub value: Option<String>,
    pub out: String,
    pub token: Option<String>,
}

/// The `sim` store: objects by (region, id), and the `local` ext table.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Cloud {
    pub objects: BTreeMap<(String, String), Obj>,
    pub ext: BTreeMap<String, String>,
}

/// What one operation did.
#[derive(Clone)]
pub struct Outcome {
    pub op: Op,
    pub parallelism: usize,
    pub fault: Option<String>,
    /// The report had a result and no error.
    pub ok: bool,
    pub errors: Vec<String>,
    /// The plan the operation made (plan, or the plan an apply applied).
    pub plan: Option<Plan>,
    pub plan_text: Option<String>,
    pub calls: Vec<Call>,
    pub state_before: Snapshot,
    pub state_after: Snapshot,
    pub cloud_before: Cloud,
    pub cloud_after: Cloud,
    /// The events the operation appended.
    pub events: Vec<Event>,
    pub config: Cfg,
}

pub struct World {
    _tmp: tempfile::TempDir,
    pub work: PathBuf,
    pub store: PathBuf,
    rt: &'static tokio::runtime::Runtime,
    calls_seen: usize,
    versions: Vec<Vec<(String, String)>>,
    script: Vec<String>,
    pub config: Cfg,
    /// A deliberately broken engine rule every operation of this world runs with (the
    /// "broken rule" tests); `None` for the properties.
    pub sabotage: Option<Sabotage>,
    /// The state (snapshot and number of events) the last operation left, while nothing else
    /// has written it: the next operation's "before" without opening the store again.
    last_state: Option<(Snapshot, usize)>,
}

/// How long to wait for the state lock. The store's lock outlives the engine's return by a
/// moment (sled releases its file lock from a background thread after the `Store` is dropped:
/// the holder record is already gone, the lock not yet), so opening it again at once can
/// fail with "locked by another process"; a command run right after another waits like the
/// CLI's `-lock-timeout` would.
pub const LOCK_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

fn state_opts() -> OpenOptions {
    OpenOptions {
        command: "proptest".into(),
        lock_timeout: crate::harness::LOCK_TIMEOUT,
        write: false,
        skip_lock: false,
        encryption: None,
    }
}

/// The state in `dir`, read-only (empty when there is none yet; any other failure to open it
/// fails the test rather than passing for an empty state).
pub fn read_state(dir: &Path) -> (Snapshot, Vec<Event>) {
    match Store::open(dir, &state_opts()) {
        Ok((store, _)) => {
            let events = store.events(1).unwrap_or_default();
            (store.snapshot().clone(), events)
        }
        Err(cairn::state::StateError::NotFound { .. }) => (Snapshot::default(), Vec::new()),
        // Anything else (a lock, a corrupt log) must not pass for an empty state.
        Err(e) => panic!("cannot open the state in {}: {e}", dir.display()),
    }
}

/// Reads the `sim` store.
pub fn read_cloud(store: &Path) -> Cloud {
    let mut cloud = Cloud::default();
    if let Ok(regions) = std::fs::read_dir(store.join("things")) {
        for region in regions.flatten() {
            let r = region.file_name().to_string_lossy().to_string();
            for f in std::fs::read_dir(region.path())
                .into_iter()
                .flatten()
                .flatten()
            {
                let Ok(text) = std::fs::read_to_string(f.path()) else {
                    continue;
                };
                let Ok(j) = serde_json::from_str::<serde_json::Value>(&text) else {
                    continue;
                };
                let s = |k: &str| j[k].as_str().map(str::to_string);
                let Some(id) = s("id") else { continue };
                cloud.objects.insert(
                    (r.clone(), id),
                    Obj {
                        name: s("name").unwrap_or_default(),
                        value: s("value"),
                        out: s("out").unwrap_or_default(),
                        token: s("token"),
                    },
                );
            }
        }
    }
    if let Ok(text) = std::fs::read_to_string(store.join("ext/local.json")) {
        if let Ok(serde_json::Value::Object(m)) = serde_json::from_str(&text) {
            for (k, v) in m {
                cloud.ext.insert(
                    k,
                    v.as_str()
                        .map(str::to_string)
                        .unwrap_or_else(|| v.to_string()),
                );
            }
        }
    }
    cloud
}

fn read_calls(store: &Path) -> Vec<Call> {
    let text = std::fs::read_to_string(store.join("calls.jsonl")).unwrap_or_default();
    text.lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .map(|j| {
            let s = |k: &str| j[k].as_str().map(str::to_string);
            Call {
                op: s("op").unwrap_or_default(),
                type_: s("type").unwrap_or_default(),
                name: s("name").unwrap_or_default(),
                id: s("id"),
                region: s("region").unwrap_or_default(),
                ok: j["ok"] == true,
            }
        })
        .collect()
}

/// The names of every thing instance of a configuration, sorted.
pub fn instance_names(cfg: &Cfg) -> Vec<String> {
    let mut out = Vec::new();
    for c in [false, true] {
        for t in cfg.things(c) {
            match &t.rep {
                Rep::One => out.push(t.name.clone()),
                Rep::Count(n) => out.extend((0..*n).map(|i| format!("{}c{i}", t.name))),
                Rep::ForEach(keys) => out.extend(keys.iter().map(|k| format!("{}k{k}", t.name))),
            }
        }
    }
    out.sort();
    out
}

/// The one runtime every world's engine runs on (building one per world cost more than
/// the small scenarios themselves). `block_on` from several test threads at once is fine: each
/// call drives its own future, the engine's tasks share the two workers.
pub fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: std::sync::OnceLock<tokio::runtime::Runtime> = std::sync::OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("runtime")
    })
}

impl Default for World {
    fn default() -> Self {
        Self::new()
    }
}

impl World {
    pub fn new() -> World {
        let tmp = tempfile::tempdir().expect("temp dir");
        let work = tmp.path().join("work");
        let store = work.join("store");
        std::fs::create_dir_all(&work).expect("work dir");
        World {
            _tmp: tmp,
            work,
            store,
            rt: runtime(),
            calls_seen: 0,
            versions: Vec::new(),
            script: Vec::new(),
            config: Cfg::default(),
            sabotage: None,
            last_state: None,
        }
    }

    /// A new world whose engine runs with `sabotage` (a broken rule), or a correct one.
    pub fn with_sabotage(sabotage: Option<Sabotage>) -> World {
        World {
            sabotage,
            ..World::new()
        }
    }

    pub fn state_dir(&self) -> PathBuf {
        self.work.join(".cairn")
    }

    /// Makes `cfg` the configuration (recorded as `use vN` when it changed).
    pub fn set_config(&mut self, cfg: &Cfg) {
        if !self.versions.is_empty() && &self.config == cfg {
            return;
        }
        let _ = std::fs::remove_file(self.work.join("main.tf"));
        let _ = std::fs::remove_dir_all(self.work.join("modules"));
        let files = cfg.files();
        for (path, text) in &files {
            let p = self.work.join(path);
            if let Some(parent) = p.parent() {
                std::fs::create_dir_all(parent).expect("config dir");
            }
            std::fs::write(&p, text).expect("config file");
        }
        self.versions.push(files);
        self.script.push(format!("use v{}", self.versions.len()));
        self.config = cfg.clone();
    }

    /// Applies a cloud edit (recorded with the real ids).
    pub fn cloud(&mut self, edit: &CloudEdit) {
        let things = self.store.join("things/local");
        let mut ids: Vec<String> = std::fs::read_dir(&things)
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| {
                e.file_name()
                    .to_string_lossy()
                    .strip_suffix(".json")
                    .map(str::to_string)
            })
            .collect();
        ids.sort();
        match edit {
            CloudEdit::Delete(i) | CloudEdit::SetValue(i, _) if !ids.is_empty() => {
                let id = &ids[*i as usize % ids.len()];
                let path = things.join(format!("{id}.json"));
                if let CloudEdit::SetValue(_, v) = edit {
                    let value = format!("c{}", v % 4);
                    let Ok(text) = std::fs::read_to_string(&path) else {
                        return;
                    };
                    let Ok(mut obj) =
                        serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(&text)
                    else {
                        return;
                    };
                    obj.insert("value".into(), serde_json::Value::String(value.clone()));
                    std::fs::write(&path, serde_json::to_string(&obj).expect("json"))
                        .expect("object file");
                    self.script.push(format!("cloud set {id} value={value}"));
                } else {
                    std::fs::remove_file(&path).expect("delete object");
                    self.script.push(format!("cloud delete {id}"));
                }
            }
            CloudEdit::ExtSet(k, v) => self.ext(&format!("k{k}"), Some(&format!("e{}", v % 4))),
            CloudEdit::ExtRm(k) => self.ext(&format!("k{k}"), None),
            _ => {}
        }
    }

    /// Sets (or removes) a key of the `local` ext table.
    pub fn ext(&mut self, key: &str, value: Option<&str>) {
        let path = self.store.join("ext/local.json");
        std::fs::create_dir_all(self.store.join("ext")).expect("ext dir");
        let mut obj: serde_json::Map<String, serde_json::Value> = std::fs::read_to_string(&path)
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or_default();
        match value {
            Some(v) => {
                obj.insert(key.into(), serde_json::Value::String(v.into()));
                self.script.push(format!("cloud ext {key}={v}"));
            }
            None => {
                obj.remove(key);
                self.script.push(format!("cloud ext-rm {key}"));
            }
        }
        std::fs::write(&path, serde_json::to_string(&obj).expect("json")).expect("ext file");
    }

    /// The `SIM_FAIL` entry a fault stands for in the current configuration.
    pub fn fault_entry(&self, fault: &Fault) -> Option<String> {
        let hubs = match fault.hub {
            true => crate::model::depended_on_names(&self.config),
            false => Vec::new(),
        };
        let names = match hubs.is_empty() {
            true => instance_names(&self.config),
            false => hubs,
        };
        if fault.op == "lookup" {
            return Some(format!(
                "lookup:k{}{}",
                1 + fault.which % 2,
                if fault.after { ":after" } else { "" }
            ));
        }
        let name = names.get(fault.which as usize % names.len().max(1))?;
        Some(format!(
            "{}:{name}{}",
            fault.op,
            if fault.after { ":after" } else { "" }
        ))
    }

    fn options(&self, parallelism: usize, fail: Option<&str>) -> Options {
        let mut opts = Options::new(&self.work);
        opts.env = BTreeMap::from([("SIM_STORE".to_string(), self.store.display().to_string())]);
        if let Some(f) = fail {
            opts.env.insert("SIM_FAIL".into(), f.into());
        }
        opts.parallelism = parallelism;
        opts.lock_timeout = LOCK_TIMEOUT;
        opts.sabotage = self.sabotage;
        opts
    }

    /// Runs one operation.
    pub fn run(&mut self, op: Op, parallelism: usize, fail: Option<&str>) -> Outcome {
        let (state_before, events_before) = match self.last_state.take() {
            Some(s) => s,
            None => {
                let (s, e) = read_state(&self.state_dir());
                (s, e.len())
            }
        };
        let cloud_before = read_cloud(&self.store);
        if let Some(f) = fail {
            self.script.push(format!("env SIM_FAIL={f}"));
        }
        self.script
            .push(format!("{}  # -parallelism={parallelism}", op.script()));
        let opts = self.options(parallelism, fail);
        let (ok, diags, plan) = match op {
            Op::Plan | Op::PlanReadOnly | Op::PlanDestroy => {
                let mode = match op {
                    Op::Plan => PlanMode::Normal,
                    Op::PlanReadOnly => PlanMode::ReadOnly,
                    _ => PlanMode::Destroy,
                };
                let r = self.rt.block_on(api::plan(&opts, mode, Arc::new(Silent)));
                (r.ok(), r.diags, r.result)
            }
            Op::Apply | Op::ApplyReadOnly | Op::Destroy => {
                let mode = match op {
                    Op::Apply => PlanMode::Normal,
                    Op::ApplyReadOnly => PlanMode::ReadOnly,
                    _ => PlanMode::Destroy,
                };
                let r = self
                    .rt
                    .block_on(api::apply(&opts, mode, None, Arc::new(Silent)));
                let ok = r.ok();
                // A plan that failed comes back unconfirmed, to be shown: nothing was applied.
                let applied = r.result.filter(|a| a.confirmed);
                (ok, r.diags, applied.and_then(|a| a.plan))
            }
            Op::Refresh => {
                let r = self
                    .rt
                    .block_on(api::refresh(&opts, false, Arc::new(Silent)));
                (r.ok(), r.diags, None)
            }
        };
        if fail.is_some() {
            self.script.push("env SIM_FAIL=".into());
        }
        let errors: Vec<String> = diags
            .iter()
            .filter(|d| d.severity == cairn::diag::Severity::Error)
            .map(|d| format!("{}: {}", d.summary, d.detail))
            .collect();
        let all = read_calls(&self.store);
        let calls = all[self.calls_seen.min(all.len())..].to_vec();
        self.calls_seen = all.len();
        let (state_after, events_after) = read_state(&self.state_dir());
        self.last_state = Some((state_after.clone(), events_after.len()));
        let events = events_after.into_iter().skip(events_before).collect();
        let plan_text = plan.as_ref().map(|p| {
            render_plan(
                p,
                &RenderOptions {
                    color: false,
                    width: 0,
                },
            )
        });
        Outcome {
            op,
            parallelism,
            fault: fail.map(str::to_string),
            ok,
            errors,
            plan,
            plan_text,
            calls,
            state_before,
            state_after,
            cloud_before,
            cloud_after: read_cloud(&self.store),
            events,
            config: self.config.clone(),
        }
    }

    /// A copy of this world (work dir, state, store, transcript) to run something else in.
    pub fn fork(&self) -> World {
        let mut w = World::new();
        copy_dir(&self.work, &w.work);
        w.calls_seen = self.calls_seen;
        w.versions = self.versions.clone();
        w.script = self.script.clone();
        w.config = self.config.clone();
        w.sabotage = self.sabotage;
        w.last_state = self.last_state.clone();
        w
    }

    /// Makes this world the one a crash would have left: the state log cut to `events`
    /// (rewritten event by event into a fresh store, the open run left unfinished) and the
    /// store's objects replaced by `cloud`.
    pub fn crash_to(&mut self, events: &[Event], cloud: &Cloud) -> Result<(), String> {
        let dir = self.state_dir();
        self.last_state = None;
        std::fs::remove_dir_all(&dir).map_err(|e| e.to_string())?;
        let o = OpenOptions {
            command: "proptest".into(),
            lock_timeout: crate::harness::LOCK_TIMEOUT,
            write: true,
            skip_lock: false,
            encryption: None,
        };
        let (mut store, _) = Store::open(&dir, &o).map_err(|e| e.to_string())?;
        for e in events {
            let seq = store.append(e.body.clone()).map_err(|e| e.to_string())?;
            if seq != e.seq {
                return Err(format!("rewriting the log: event {} became {seq}", e.seq));
            }
        }
        store.commit().map_err(|e| e.to_string())?;
        drop(store);
        let _ = std::fs::remove_dir_all(self.store.join("things"));
        for ((region, id), obj) in &cloud.objects {
            let d = self.store.join("things").join(region);
            std::fs::create_dir_all(&d).map_err(|e| e.to_string())?;
            let j = serde_json::json!({"id": id, "name": obj.name, "value": obj.value, "out": obj.out, "token": obj.token});
            std::fs::write(d.join(format!("{id}.json")), j.to_string())
                .map_err(|e| e.to_string())?;
        }
        self.script.push(format!(
            "# crash: the state log cut after event {}, the store as the provider left it",
            events.last().map(|e| e.seq).unwrap_or(0)
        ));
        Ok(())
    }

    /// Runs `apply` in a child process (the `apply` binary of this crate) with every `sim`
    /// call taking `latency_ms`, and kills it (SIGKILL) after `after_ms`. Returns whether it
    /// was killed (false: it finished first).
    pub fn killed_apply(
        &mut self,
        bin: &str,
        parallelism: usize,
        latency_ms: u64,
        after_ms: u64,
    ) -> Result<bool, String> {
        let mut child = std::process::Command::new(bin)
            .arg(&self.work)
            .arg(parallelism.to_string())
            .env("SIM_STORE", &self.store)
            .env("SIM_LATENCY_MS", latency_ms.to_string())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot start {bin}: {e}"))?;
        std::thread::sleep(std::time::Duration::from_millis(after_ms));
        let killed = matches!(child.try_wait(), Ok(None));
        if killed {
            let _ = child.kill();
        }
        let _ = child.wait();
        if std::env::var_os("CAIRN_PROPTEST_VERBOSE").is_some() {
            eprintln!(
                "apply process {} after {after_ms} ms",
                if killed { "killed" } else { "finished" }
            );
        }
        self.script.push(format!(
            "env SIM_LATENCY_MS={latency_ms}\napply  # -parallelism={parallelism}, {} after {after_ms} ms\nenv SIM_LATENCY_MS=0",
            if killed { "killed (SIGKILL)" } else { "finished before being killed" }
        ));
        // The calls the killed run made are not this world's next operation's.
        self.calls_seen = read_calls(&self.store).len();
        self.last_state = None;
        Ok(killed)
    }

    /// Writes a checkpoint of the state now (so later `snapshot_at` calls start from one).
    pub fn checkpoint(&self) {
        let o = OpenOptions {
            command: "proptest".into(),
            lock_timeout: crate::harness::LOCK_TIMEOUT,
            write: true,
            skip_lock: false,
            encryption: None,
        };
        if let Ok((mut store, _)) = Store::open(&self.state_dir(), &o) {
            let _ = store.checkpoint();
        }
    }

    /// The reproduction: every configuration version and the script, as a fixture.
    pub fn fixture(&self) -> String {
        let mut out = String::from(
            "=== fixture (paste into fixtures/engine/<name>/; add an empty expected.txt)\n",
        );
        if let Some(s) = self.sabotage {
            let _ = writeln!(out, "(the engine ran with the broken rule Sabotage::{s:?})");
        }
        for (i, files) in self.versions.iter().enumerate() {
            for (path, text) in files {
                let _ = writeln!(out, "--- v{}/{path}\n{text}", i + 1);
            }
        }
        let _ = writeln!(out, "--- script.txt\n{}", self.script.join("\n"));
        out
    }
}

fn copy_dir(from: &Path, to: &Path) {
    let _ = std::fs::create_dir_all(to);
    for entry in std::fs::read_dir(from).into_iter().flatten().flatten() {
        let target = to.join(entry.file_name());
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            copy_dir(&entry.path(), &target);
        } else {
            let _ = std::fs::copy(entry.path(), target);
        }
    }
}
