//! A stack run's one history record (`cairn stack history`): each `stack plan`, `stack
//! apply` and `stack destroy`, and a fleet's shared run (`stack apply -runner`), is a *stack
//! run* with an id, who ran it and where (the `RunContext` every component run records: host,
//! git commit, CI job), its start and end, its outcome, and its rounds (a fleet: the work
//! items each runner finished); for each component instance of each deployment, the state it
//! ran in (its workspace), the runs it made in that state's own history (`cairn history`
//! there lists them), and how it ended (or why it was deferred).
//!
//! The record is appended as it goes, entry by entry (`cairn_state::stack_runs`: in the
//! stack's backend, so every machine sees it; never changed): a start, each round, an end.
//! A run that crashed has no end: it reads as `unfinished` (`running` while its process
//! lives on this host). A component's runs are found in its state's history by who made
//! them: this process (host and pid) since the round started — each state is locked by one
//! writer at a time, so the runs are exactly this stack run's. A `stack plan` leaves a plan
//! record (`engine::plan_history`) in each planned component's state, which `cairn history`
//! lists among its runs, and the stack run names it.

use super::{InstanceId, InstanceResult, Outcome, StackRequest};
use crate::diag::{Diagnostic, Diagnostics, SourceMap};
use crate::engine::observer::Observer;
use cairn_state::stack_runs;
use cairn_state::{RecordedDiagnostic, RunContext};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// One component instance in a round (or a fleet's work item).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct ComponentRun {
    pub deployment: String,
    pub component: String,
    #[serde(default)]
    pub key: Option<String>,
    /// `component.app["eu"]`.
    pub address: String,
    /// The state it ran in: the workspace `DEPLOYMENT.COMPONENT[.KEY]` of the stack.
    pub workspace: String,
    /// Destroyed because the configuration no longer has it.
    #[serde(default)]
    pub removed: bool,
    /// `applied`, `planned` (changes proposed), `no changes`, `not applied` (planned, then
    /// not approved or interrupted), `deferred` or `failed`; in a fleet's item its runner
    /// did not finish, `interrupted` (the runner stopped or died: its runs here are left
    /// unfinished, resolved by the runner that took the item over) or `running`; likewise in
    /// a round the run stopped or died in (its runs resolved by the next run in their state).
    pub status: String,
    /// Why it was deferred.
    #[serde(default)]
    pub reason: Option<String>,
    pub add: u64,
    pub change: u64,
    pub destroy: u64,
    /// The runs it made in its state's history (their ids, as `cairn history` shows them).
    #[serde(default)]
    pub runs: Vec<u64>,
    /// The plan records it left in its state's history (`stack plan`).
    #[serde(default)]
    pub plans: Vec<String>,
    /// Its errors' summaries, when it failed.
    #[serde(default)]
    pub errors: Vec<String>,
}

/// What one entry of the record says.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
enum Body {
    /// The run started (a fleet: the runner that started it).
    Started {
        command: String,
        args: Vec<String>,
        user: String,
        pid: u32,
        context: RunContext,
        deployment: Option<String>,
        runner: Option<String>,
    },
    /// A runner joined a fleet's run.
    Joined {
        runner: String,
        user: String,
        pid: u32,
        context: RunContext,
    },
    /// A round of `stack plan|apply|destroy`.
    Round {
        round: usize,
        started_ms: u64,
        instances: Vec<ComponentRun>,
    },
    /// A fleet's work item, finished (or blocked) by a runner.
    Item {
        runner: String,
        item: String,
        status: String,
        #[serde(default)]
        reason: Option<String>,
        started_ms: u64,
        instances: Vec<ComponentRun>,
    },
    /// A runner claimed a fleet's work item and starts on it (before any of its component
    /// runs): with no `Item` from that runner after it, the runner stopped (or died) on it.
    Claimed {
        runner: String,
        item: String,
        started_ms: u64,
    },
    /// A runner's component run began in an instance's state, while it worked on `item`:
    /// recorded as the run begins, so a runner killed mid-item leaves its run linked.
    RunBegun {
        runner: String,
        item: String,
        instance: ComponentRun,
    },
    /// A component run began in an instance's state in round `round` of a `stack
    /// apply|destroy` (not a fleet's): recorded as the run begins, so a stack run killed
    /// mid-round leaves its runs linked (the round's own entry, written when the round ends,
    /// takes the place of these).
    RoundRunBegun {
        round: usize,
        instance: ComponentRun,
    },
    /// A runner left a fleet's run before it ended (interrupted).
    Left { runner: String },
    /// The run ended (a fleet: as the runner `runner` saw it).
    Finished {
        outcome: String,
        #[serde(default)]
        message: Option<String>,
        #[serde(default)]
        runner: Option<String>,
        /// Why it failed before its first round (the configuration's errors).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        diagnostics: Vec<RecordedDiagnostic>,
    },
}

/// A stack run's diagnostics as its record keeps them (`RecordedDiagnostic`, as a run's
/// `RunDiagnostics` in a state's log): `diags` with their places in `map`'s files
/// (`FILE:LINE:COL`, relative to the stack's directory `dir` where they are in it).
pub fn recorded(map: &SourceMap, diags: &Diagnostics, dir: &Path) -> Vec<RecordedDiagnostic> {
    let prefix = format!("{}/", dir.display());
    let mut out = crate::engine::session::recorded_diagnostics(diags, None);
    for (r, d) in out.iter_mut().zip(diags.iter()) {
        r.location = d.span.map(|span| {
            let at = map.location(span);
            at.strip_prefix(&prefix).map(str::to_string).unwrap_or(at)
        });
    }
    out
}

/// `Error: SUMMARY` with its place and detail, as lines of text.
pub fn diagnostic_text(d: &RecordedDiagnostic) -> String {
    let word = match d.severity {
        cairn_state::event::Severity::Warning => "Warning",
        cairn_state::event::Severity::Error => "Error",
    };
    let mut t = format!("{word}: {}", d.summary);
    if let Some(at) = &d.location {
        let _ = write!(t, "\n  on {at}");
    }
    if let Some(a) = &d.address {
        let _ = write!(t, "\n  with {a}");
    }
    for l in d.detail.lines() {
        let _ = write!(t, "\n  {l}");
    }
    t
}

#[derive(Clone, Debug, Serialize, Deserialize)]
struct Stored {
    at_ms: u64,
    #[serde(flatten)]
    body: Body,
}

/// A round, or a fleet's work item, as the record shows it.
#[derive(Clone, Debug, Serialize)]
pub struct Step {
    /// The round's number (`None`: a fleet's item).
    pub round: Option<usize>,
    /// The fleet's item and the runner that worked on it.
    pub item: Option<String>,
    pub runner: Option<String>,
    /// A fleet item's status: `done`, `failed`, `blocked`, `interrupted` (its runner
    /// stopped or died on it) or `running`; a round's, only when it has no end: `running`
    /// while its process lives, else `interrupted` (killed, or abandoned by a second Ctrl-C).
    pub status: Option<String>,
    pub reason: Option<String>,
    pub started_ms: u64,
    pub finished_ms: u64,
    pub instances: Vec<ComponentRun>,
}

/// One stack run, as `cairn stack history` and `cairn ui` show it.
#[derive(Clone, Debug, Serialize)]
pub struct StackRun {
    pub id: String,
    /// `stack plan`, `stack apply`, `stack destroy`, `stack apply -runner`.
    pub command: String,
    pub args: Vec<String>,
    pub user: String,
    pub pid: u32,
    pub context: RunContext,
    /// `-deployment=NAME`.
    pub deployment: Option<String>,
    pub started_ms: u64,
    pub finished_ms: Option<u64>,
    /// `success`, `failed`, `cancelled`, `interrupted`; `running` while its process lives on
    /// this host; `unfinished` when it ended without saying how (a crash).
    pub outcome: String,
    pub message: Option<String>,
    /// Why it failed before its first round: the configuration's diagnostics.
    pub diagnostics: Vec<RecordedDiagnostic>,
    /// A fleet's runners, in the order they joined.
    pub runners: Vec<String>,
    pub steps: Vec<Step>,
}

impl StackRun {
    /// Every component instance's last word in the run (by deployment and address).
    pub fn components(&self) -> Vec<&ComponentRun> {
        let mut last: BTreeMap<(String, String), &ComponentRun> = BTreeMap::new();
        for s in &self.steps {
            for c in &s.instances {
                last.insert((c.deployment.clone(), c.address.clone()), c);
            }
        }
        last.into_values().collect()
    }

    /// The run in a few words: its rounds (or work items), its component instances by how
    /// they ended, and what its applies changed.
    pub fn summary(&self) -> String {
        let mut parts = Vec::new();
        let rounds = self.steps.iter().filter(|s| s.round.is_some()).count();
        let items: std::collections::BTreeSet<&str> = self
            .steps
            .iter()
            .filter_map(|s| s.item.as_deref())
            .collect();
        let items = items.len();
        let interrupted = self
            .steps
            .iter()
            .filter(|s| s.item.is_some() && s.status.as_deref() == Some("interrupted"))
            .count();
        let s = |n: usize| if n == 1 { "" } else { "s" };
        // Only a run's last round can be left without its end (it stopped or died in it).
        let unended = self
            .steps
            .iter()
            .filter(|s| s.round.is_some())
            .find_map(|s| s.status.as_deref());
        if rounds > 0 {
            let mut text = format!("{rounds} round{}", s(rounds));
            if let Some(status) = unended {
                let _ = write!(text, " (the last {status})");
            }
            parts.push(text);
        }
        if items > 0 {
            let mut text = format!(
                "{items} work item{} by {} runner{}",
                s(items),
                self.runners.len(),
                s(self.runners.len())
            );
            if interrupted > 0 {
                let _ = write!(text, " ({interrupted} interrupted)");
            }
            parts.push(text);
        }
        let mut by_status: BTreeMap<&str, usize> = BTreeMap::new();
        for c in self.components() {
            *by_status.entry(c.status.as_str()).or_default() += 1;
        }
        if !by_status.is_empty() {
            parts.push(
                by_status
                    .iter()
                    .map(|(s, n)| format!("{n} {s}"))
                    .collect::<Vec<_>>()
                    .join(", "),
            );
        }
        let (add, change, destroy) = self.totals();
        if add + change + destroy > 0 {
            parts.push(format!(
                "{add} added, {change} changed, {destroy} destroyed"
            ));
        }
        if parts.is_empty() {
            "-".into()
        } else {
            parts.join("; ")
        }
    }

    /// The resources added, changed and destroyed by its applies.
    pub fn totals(&self) -> (u64, u64, u64) {
        let mut t = (0, 0, 0);
        for s in &self.steps {
            for c in s.instances.iter().filter(|c| c.status == "applied") {
                t.0 += c.add;
                t.1 += c.change;
                t.2 += c.destroy;
            }
        }
        t
    }
}

/// The component instance whose state is workspace `name` (`DEPLOYMENT.COMPONENT[.KEY]`).
pub fn instance_of_workspace(name: &str) -> Option<InstanceId> {
    InstanceId::parse_workspace(name)
}

fn now_ms() -> u64 {
    crate::engine::plan_history::now_ms()
}

/// This process's host, as its runs record it.
fn my_host() -> Option<String> {
    crate::engine::session::run_context().host
}

/// Writes the record of one stack run as it goes. A failure to write is returned as a
/// warning's text: the stack run itself goes on.
pub struct Recorder {
    root: PathBuf,
    /// Where its entries go (on PostgreSQL, over one connection for the whole run).
    writer: stack_runs::Writer,
    pub id: String,
    host: Option<String>,
    crypt: Option<std::sync::Arc<cairn_state::crypt::Encryption>>,
}

impl Recorder {
    fn new(req: &StackRequest, id: String) -> Recorder {
        Recorder {
            root: req.state_root.clone(),
            writer: stack_runs::Writer::new(&req.state_root),
            id,
            host: my_host(),
            crypt: crate::engine::encryption::state(),
        }
    }

    fn append(&self, body: Body) -> Option<String> {
        let at_ms = now_ms();
        let json = match serde_json::to_vec(&Stored { at_ms, body }) {
            Ok(j) => j,
            Err(e) => return Some(format!("the stack run's record cannot be encoded: {e}")),
        };
        let bytes = match &self.crypt {
            Some(c) => match c.seal(&json) {
                Ok(b) => b,
                Err(e) => return Some(format!("the stack run's record cannot be sealed: {e}")),
            },
            None => json,
        };
        let entry = stack_runs::new_id(at_ms);
        self.writer
            .append(&self.id, &entry, &bytes)
            .err()
            .map(|e| format!("stack run {} could not be recorded: {e}", self.id))
    }

    /// Starts the record of a `stack plan|apply|destroy` (`command`) run.
    pub fn start(req: &StackRequest, command: &str) -> (Recorder, Option<String>) {
        let rec = Recorder::new(req, stack_runs::new_id(now_ms()));
        let warn = rec.append(Body::Started {
            command: command.to_string(),
            args: req.base.args.clone(),
            user: cairn_state::current_user(),
            pid: std::process::id(),
            context: crate::engine::session::run_context(),
            deployment: req.deployment.clone(),
            runner: None,
        });
        (rec, warn)
    }

    /// The record of the fleet run `fleet` is a member of (under the fleet's own id),
    /// written over the runner's own database connection. No entry of its own: see
    /// [`Recorder::fleet_start`].
    pub fn on_fleet(req: &StackRequest, fleet: &cairn_state::pg_fleet::Fleet) -> Recorder {
        Recorder {
            writer: fleet.history_writer(&req.state_root),
            ..Recorder::new(req, fleet.run_id.clone())
        }
    }

    /// A runner's part of the fleet's run: the start when it started the run, else its
    /// joining.
    pub fn fleet_start(&self, req: &StackRequest, runner: &str, started: bool) -> Option<String> {
        let context = crate::engine::session::run_context();
        let body = if started {
            Body::Started {
                command: "stack apply -runner".into(),
                args: req.base.args.clone(),
                user: cairn_state::current_user(),
                pid: std::process::id(),
                context,
                deployment: req.deployment.clone(),
                runner: Some(runner.to_string()),
            }
        } else {
            Body::Joined {
                runner: runner.to_string(),
                user: cairn_state::current_user(),
                pid: std::process::id(),
                context,
            }
        };
        self.append(body)
    }

    /// Records round `round`, which started at `started_ms`: each instance's plan (or
    /// deferral) in `planned`, and what became of those applied in `applied`.
    pub fn round(
        &self,
        round: usize,
        started_ms: u64,
        planned: &[InstanceResult],
        applied: &[InstanceResult],
        plans: &BTreeMap<InstanceId, String>,
        apply: bool,
    ) -> Option<String> {
        let mut instances = Vec::new();
        for r in planned {
            let done = applied.iter().find(|a| a.id == r.id);
            let mut c = self.component(r, done.unwrap_or(r), started_ms, apply);
            if let Some(p) = plans.get(&r.id) {
                c.plans.push(p.clone());
            }
            instances.push(c);
        }
        for a in applied {
            if !planned.iter().any(|r| r.id == a.id) {
                instances.push(self.component(a, a, started_ms, apply));
            }
        }
        self.append(Body::Round {
            round,
            started_ms,
            instances,
        })
    }

    /// Records a fleet's work item `item`, finished (`done`, `failed`) or `blocked` by
    /// `runner`, claimed at `started_ms`.
    #[allow(clippy::too_many_arguments)]
    pub fn item(
        &self,
        runner: &str,
        item: &str,
        status: &str,
        reason: Option<String>,
        started_ms: u64,
        results: &[InstanceResult],
    ) -> Option<String> {
        let instances = results
            .iter()
            .map(|r| self.component(r, r, started_ms, true))
            .collect();
        self.append(Body::Item {
            runner: runner.to_string(),
            item: item.to_string(),
            status: status.to_string(),
            reason,
            started_ms,
            instances,
        })
    }

    /// `runner` claimed the fleet's work item `item` at `started_ms` and starts on it.
    pub fn claimed(&self, runner: &str, item: &str, started_ms: u64) -> Option<String> {
        self.append(Body::Claimed {
            runner: runner.to_string(),
            item: item.to_string(),
            started_ms,
        })
    }

    /// `runner`'s run `run` began in the state of instance `id` while it worked on `item`.
    pub fn run_begun(&self, runner: &str, item: &str, id: &InstanceId, run: u64) -> Option<String> {
        self.append(Body::RunBegun {
            runner: runner.to_string(),
            item: item.to_string(),
            instance: begun(id, run),
        })
    }

    /// Run `run` began in the state of instance `id` in round `round` of this (local) run.
    pub fn round_run_begun(&self, round: usize, id: &InstanceId, run: u64) -> Option<String> {
        self.append(Body::RoundRunBegun {
            round,
            instance: begun(id, run),
        })
    }

    /// A runner left a fleet's run before it ended.
    pub fn left(&self, runner: &str) -> Option<String> {
        self.append(Body::Left {
            runner: runner.to_string(),
        })
    }

    /// The run ended: `success`, `failed`, `cancelled` or `interrupted`.
    pub fn finish(
        &self,
        outcome: &str,
        message: Option<String>,
        runner: Option<&str>,
    ) -> Option<String> {
        self.append(Body::Finished {
            outcome: outcome.to_string(),
            message,
            runner: runner.map(str::to_string),
            diagnostics: Vec::new(),
        })
    }

    /// A `command` (`stack plan`, `stack apply`, …) stopped by the configuration's errors
    /// before its first round: a failed run of its own, carrying them (in `map`'s files).
    /// Recorded only where the stack's backend is known — `stack init` made its state root
    /// — and quietly not at all when that backend cannot be written: the errors themselves
    /// are what the command reports.
    pub fn failed_to_load(
        req: &StackRequest,
        command: &str,
        map: &SourceMap,
        diags: &Diagnostics,
    ) -> bool {
        if !req.state_root.is_dir() {
            return false;
        }
        let (rec, warn) = Recorder::start(req, command);
        if warn.is_some() {
            return false;
        }
        let diagnostics = recorded(map, diags, &req.dir);
        let errors = diags.error_count();
        let message = format!(
            "The stack's configuration has {errors} error{}: nothing was planned or applied.",
            if errors == 1 { "" } else { "s" }
        );
        rec.append(Body::Finished {
            outcome: "failed".into(),
            message: Some(message),
            runner: None,
            diagnostics,
        })
        .is_none()
    }

    /// One instance's entry: `planned` is its round's result, `done` what its apply did (the
    /// same when it was not applied).
    fn component(
        &self,
        planned: &InstanceResult,
        done: &InstanceResult,
        since_ms: u64,
        apply: bool,
    ) -> ComponentRun {
        let id = &planned.id;
        let mut c = ComponentRun {
            deployment: id.deployment.clone(),
            component: id.component.clone(),
            key: id.key.clone(),
            address: id.address(),
            workspace: id.workspace(),
            removed: planned.removed || done.removed,
            ..ComponentRun::default()
        };
        match &done.outcome {
            Outcome::Deferred(why) => {
                c.status = "deferred".into();
                c.reason = Some(why.clone());
            }
            Outcome::Failed => {
                c.status = "failed".into();
                c.errors = done
                    .diags
                    .iter()
                    .filter(|d| d.severity == crate::diag::Severity::Error)
                    .map(|d| d.summary.clone())
                    .collect();
            }
            Outcome::Applied(a) if a.confirmed => {
                c.status = "applied".into();
                (c.add, c.change, c.destroy) =
                    (a.summary.added, a.summary.changed, a.summary.destroyed);
                if let Some(p) = &a.plan {
                    if !p.applyable {
                        c.status = "no changes".into();
                    }
                }
            }
            Outcome::Applied(a) => {
                c.status = "not applied".into();
                if let Some(p) = &a.plan {
                    let (x, y, z) = p.counts();
                    (c.add, c.change, c.destroy) = (x as u64, y as u64, z as u64);
                }
            }
            Outcome::Planned(p) => {
                let (x, y, z) = p.counts();
                (c.add, c.change, c.destroy) = (x as u64, y as u64, z as u64);
                c.status = if !p.has_changes() {
                    "no changes"
                } else if apply {
                    "not applied"
                } else {
                    "planned"
                }
                .into();
            }
        }
        if apply && c.status != "deferred" {
            c.runs = self.runs_since(id, since_ms);
        }
        c
    }

    /// The runs this process made in `id`'s state since `since_ms`.
    fn runs_since(&self, id: &InstanceId, since_ms: u64) -> Vec<u64> {
        let dir = cairn_state::workspace::dir(&self.root, &id.workspace());
        let Ok(Some((state, _))) =
            crate::engine::state_read::StateRead::open(&dir, "stack history")
        else {
            return Vec::new();
        };
        let pid = std::process::id();
        state
            .snapshot()
            .runs
            .iter()
            .filter(|r| r.pid == pid && r.context.host == self.host && r.started_ms >= since_ms)
            .map(|r| r.id)
            .collect()
    }
}

/// `stack plan`: leaves a plan record in the history of each planned (or failed) instance's
/// state that exists, as `cairn plan` does; returns each one's record id. Failures to record
/// are returned as warnings.
pub fn record_plans(
    req: &StackRequest,
    results: &[InstanceResult],
    started_ms: u64,
) -> (BTreeMap<InstanceId, String>, Vec<String>) {
    let mut ids = BTreeMap::new();
    let mut warnings = Vec::new();
    for r in results {
        let plan = match &r.outcome {
            Outcome::Planned(p) => Some(&**p),
            Outcome::Failed => None,
            _ => continue,
        };
        let dir = cairn_state::workspace::dir(&req.state_root, &r.id.workspace());
        let mut opts = req.base.clone();
        opts.state_dir = dir;
        let errors = r
            .diags
            .iter()
            .filter(|d| d.severity == crate::diag::Severity::Error)
            .count();
        let run = crate::engine::plan_history::plan_record(
            &opts,
            r.config.as_deref(),
            plan,
            errors,
            started_ms,
            None,
        );
        let crypt = crate::engine::encryption::state();
        match cairn_state::plan_runs::record(&opts.state_dir, &run, crypt.as_deref()) {
            Ok(true) => {
                ids.insert(r.id.clone(), run.id);
            }
            Ok(false) => {}
            Err(e) => warnings.push(format!(
                "the plan of {} ({}) was not recorded in its state's history: {e}",
                r.id.address(),
                r.id.deployment
            )),
        }
    }
    (ids, warnings)
}

/// Instance `id`'s run `run`, begun (until its step ends: interrupted if it never does).
fn begun(id: &InstanceId, run: u64) -> ComponentRun {
    ComponentRun {
        deployment: id.deployment.clone(),
        component: id.component.clone(),
        key: id.key.clone(),
        address: id.address(),
        workspace: id.workspace(),
        status: "interrupted".into(),
        runs: vec![run],
        ..ComponentRun::default()
    }
}

/// Names each component run of round `round` of a local `stack apply|destroy` in the stack
/// run's record as the run begins (`Observer::run_begun`), so a stack run killed (or
/// abandoned) mid-round leaves its component runs linked, as interrupted steps. A failure to
/// write is kept for [`RoundLink::warnings`]: the run goes on.
#[derive(Clone)]
pub struct RoundLink {
    rec: Arc<Recorder>,
    round: usize,
    warnings: Arc<Mutex<Vec<String>>>,
}

impl RoundLink {
    pub fn new(rec: Arc<Recorder>, round: usize) -> RoundLink {
        RoundLink {
            rec,
            round,
            warnings: Default::default(),
        }
    }

    /// The write failures so far (taken: each is said once).
    pub fn warnings(&self) -> Vec<String> {
        self.warnings
            .lock()
            .map(|mut w| std::mem::take(&mut *w))
            .unwrap_or_default()
    }
}

impl super::Observers for RoundLink {
    fn observer(&self, id: &InstanceId) -> Arc<dyn Observer> {
        Arc::new(RoundRunLink {
            link: self.clone(),
            id: id.clone(),
        })
    }
}

struct RoundRunLink {
    link: RoundLink,
    id: InstanceId,
}

impl Observer for RoundRunLink {
    fn event(&self, _: crate::engine::observer::Progress) {}

    fn run_begun(&self, run: u64) {
        let l = &self.link;
        if let Some(w) = l.rec.round_run_begun(l.round, &self.id, run) {
            if let Ok(mut ws) = l.warnings.lock() {
                ws.push(w);
            }
        }
    }
}

/// Whether process `pid` lives on this machine.
fn alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

/// Every stack run of the stack whose state root is `root`, oldest first, with warnings for
/// entries that cannot be read (skipped).
pub fn list(root: &Path) -> Result<(Vec<StackRun>, Vec<String>), Diagnostic> {
    read(root, None)
}

/// Stack run `id` (`None`: there is none).
pub fn get(root: &Path, id: &str) -> Result<(Option<StackRun>, Vec<String>), Diagnostic> {
    let (mut runs, warnings) = read(root, Some(id))?;
    Ok((runs.pop(), warnings))
}

fn read(root: &Path, only: Option<&str>) -> Result<(Vec<StackRun>, Vec<String>), Diagnostic> {
    let entries = stack_runs::list(root, only).map_err(|e| {
        Diagnostic::error(
            "Cannot read the stack's run history",
            format!("{}: {e}.", root.display()),
        )
    })?;
    let crypt = crate::engine::encryption::state();
    let mut warnings = Vec::new();
    let mut by_run: BTreeMap<String, Vec<Stored>> = BTreeMap::new();
    for e in entries {
        let what = format!("stack run {} entry {}", e.run, e.id);
        let decoded =
            cairn_state::crypt::open_with(crypt.as_deref(), &what, &e.bytes).and_then(|plain| {
                serde_json::from_slice::<Stored>(&plain)
                    .map_err(|err| format!("{what} is unreadable: {err}"))
            });
        match decoded {
            Ok(s) => by_run.entry(e.run).or_default().push(s),
            Err(w) => warnings.push(w),
        }
    }
    let host = my_host();
    let mut runs: Vec<StackRun> = by_run
        .into_iter()
        .map(|(id, entries)| fold(id, entries, &host))
        .collect();
    runs.sort_by(|a, b| (a.started_ms, &a.id).cmp(&(b.started_ms, &b.id)));
    Ok((runs, warnings))
}

/// A run's entries (in the order they were appended) folded into what it says.
fn fold(id: String, entries: Vec<Stored>, host: &Option<String>) -> StackRun {
    let mut run = StackRun {
        id,
        command: "stack apply -runner".into(),
        args: Vec::new(),
        user: String::new(),
        pid: 0,
        context: RunContext::default(),
        deployment: None,
        started_ms: entries.first().map(|e| e.at_ms).unwrap_or(0),
        finished_ms: None,
        outcome: String::new(),
        message: None,
        diagnostics: Vec::new(),
        runners: Vec::new(),
        steps: Vec::new(),
    };
    let mut started = false;
    let mut live = false;
    // A fleet's steps as they come: an item a runner claimed stands where it was claimed
    // until the runner's `Item` for it replaces it (at the end, where it finished).
    let mut steps: Vec<Option<Step>> = Vec::new();
    let mut open: BTreeMap<(String, String), usize> = BTreeMap::new();
    // A local run's rounds whose component runs began, until the round's own entry.
    let mut open_rounds: BTreeMap<usize, usize> = BTreeMap::new();
    let mut left: Vec<String> = Vec::new();
    for e in entries {
        match e.body {
            Body::Started {
                command,
                args,
                user,
                pid,
                context,
                deployment,
                runner,
            } => {
                started = true;
                live |= context.host == *host && alive(pid);
                (run.command, run.args, run.user, run.pid, run.context) =
                    (command, args, user, pid, context);
                run.deployment = deployment;
                run.started_ms = run.started_ms.min(e.at_ms);
                if let Some(r) = runner {
                    if !run.runners.contains(&r) {
                        run.runners.insert(0, r);
                    }
                }
            }
            Body::Joined {
                runner,
                user,
                pid,
                context,
            } => {
                live |= context.host == *host && alive(pid);
                if !started && run.user.is_empty() {
                    (run.user, run.pid, run.context) = (user, pid, context);
                }
                if !run.runners.contains(&runner) {
                    run.runners.push(runner);
                }
            }
            Body::Round {
                round,
                started_ms,
                mut instances,
            } => {
                let mut step = Step {
                    round: Some(round),
                    item: None,
                    runner: None,
                    status: None,
                    reason: None,
                    started_ms,
                    finished_ms: e.at_ms,
                    instances: Vec::new(),
                };
                // The runs it began are linked even when the end's own look missed one.
                match open_rounds.remove(&round) {
                    Some(slot) => {
                        if let Some(begun) = steps[slot].take() {
                            for c in begun.instances {
                                merge_runs(&mut instances, c);
                            }
                        }
                        step.instances = instances;
                        steps[slot] = Some(step);
                    }
                    None => {
                        step.instances = instances;
                        steps.push(Some(step));
                    }
                }
            }
            Body::RoundRunBegun { round, instance } => {
                let slot = *open_rounds.entry(round).or_insert_with(|| {
                    steps.push(Some(Step {
                        round: Some(round),
                        item: None,
                        runner: None,
                        status: Some("interrupted".into()),
                        reason: None,
                        started_ms: e.at_ms,
                        finished_ms: e.at_ms,
                        instances: Vec::new(),
                    }));
                    steps.len() - 1
                });
                if let Some(step) = steps[slot].as_mut() {
                    step.finished_ms = e.at_ms;
                    merge_runs(&mut step.instances, instance);
                }
            }
            Body::Claimed {
                runner,
                item,
                started_ms,
            } => {
                open.entry((runner.clone(), item.clone()))
                    .or_insert_with(|| {
                        steps.push(Some(attempt(runner, item, started_ms, e.at_ms)));
                        steps.len() - 1
                    });
            }
            Body::RunBegun {
                runner,
                item,
                instance,
            } => {
                let slot = *open
                    .entry((runner.clone(), item.clone()))
                    .or_insert_with(|| {
                        steps.push(Some(attempt(runner, item, e.at_ms, e.at_ms)));
                        steps.len() - 1
                    });
                if let Some(step) = steps[slot].as_mut() {
                    step.finished_ms = e.at_ms;
                    merge_runs(&mut step.instances, instance);
                }
            }
            Body::Item {
                runner,
                item,
                status,
                reason,
                started_ms,
                mut instances,
            } => {
                // The runs it began are linked even when the end's own look missed one.
                if let Some(slot) = open.remove(&(runner.clone(), item.clone())) {
                    if let Some(claimed) = steps[slot].take() {
                        for c in claimed.instances {
                            merge_runs(&mut instances, c);
                        }
                    }
                }
                steps.push(Some(Step {
                    round: None,
                    item: Some(item),
                    runner: Some(runner),
                    status: Some(status),
                    reason,
                    started_ms,
                    finished_ms: e.at_ms,
                    instances,
                }));
            }
            Body::Left { runner } => left.push(runner),
            Body::Finished {
                outcome,
                message,
                diagnostics,
                ..
            } => {
                // A fleet's runners each say how it ended: the first one's word stands.
                if run.finished_ms.is_none() {
                    run.finished_ms = Some(e.at_ms);
                    run.outcome = outcome;
                    run.message = message;
                    run.diagnostics = diagnostics;
                }
            }
        }
    }
    if run.finished_ms.is_none() {
        run.outcome = if live { "running" } else { "unfinished" }.into();
    }
    // A round with no entry of its own: the run stopped (or died) in it — its component
    // runs still running while its process lives, else interrupted (left unfinished in
    // their states' histories, resolved by the next run there).
    let status = if run.finished_ms.is_none() && live {
        "running"
    } else {
        "interrupted"
    };
    for slot in open_rounds.into_values() {
        if let Some(step) = steps[slot].as_mut() {
            step.status = Some(status.into());
            for c in &mut step.instances {
                c.status = status.into();
            }
        }
    }
    // What is left of the claims: items their runners did not finish — still being worked
    // on while the runner lives (on this host: elsewhere, until the run ends or another
    // runner finished the item), else interrupted (the runner stopped or died).
    for ((runner, item), slot) in open {
        let taken_over = steps[slot + 1..]
            .iter()
            .flatten()
            .any(|s| s.item.as_deref() == Some(item.as_str()));
        let working = run.finished_ms.is_none()
            && !taken_over
            && !left.contains(&runner)
            && runner_alive(&runner, host);
        let status = if working { "running" } else { "interrupted" };
        if let Some(step) = steps[slot].as_mut() {
            step.status = Some(status.into());
            for c in &mut step.instances {
                c.status = status.into();
            }
        }
    }
    run.steps = steps.into_iter().flatten().collect();
    run
}

/// A fleet's item as its runner claimed it, until the runner says how it ended.
fn attempt(runner: String, item: String, started_ms: u64, at_ms: u64) -> Step {
    Step {
        round: None,
        item: Some(item),
        runner: Some(runner),
        status: Some("interrupted".into()),
        reason: None,
        started_ms,
        finished_ms: at_ms,
        instances: Vec::new(),
    }
}

/// Adds `c`'s runs to the same instance's in `into` (or `c` itself when it has none there).
fn merge_runs(into: &mut Vec<ComponentRun>, c: ComponentRun) {
    match into
        .iter_mut()
        .find(|x| x.deployment == c.deployment && x.address == c.address)
    {
        Some(x) => {
            for r in c.runs {
                if !x.runs.contains(&r) {
                    x.runs.push(r);
                }
            }
            x.runs.sort_unstable();
        }
        None => into.push(c),
    }
}

/// Whether a fleet's runner (`HOST:PID:RANDOM`) still lives: only known on its own host,
/// elsewhere taken as living.
fn runner_alive(runner: &str, host: &Option<String>) -> bool {
    let mut parts = runner.rsplitn(3, ':');
    let (_, pid, on) = (parts.next(), parts.next(), parts.next());
    match (on, pid.and_then(|p| p.parse::<u32>().ok())) {
        (Some(on), Some(pid)) if host.as_deref() == Some(on) => alive(pid),
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(at_ms: u64, body: Body) -> Stored {
        Stored { at_ms, body }
    }

    #[test]
    fn a_fleet_run_is_folded_from_every_runners_entries() {
        let host = Some("elsewhere".to_string());
        let ctx = RunContext {
            host: Some("ci-1".into()),
            ..Default::default()
        };
        let item = |runner: &str, status: &str| Body::Item {
            runner: runner.into(),
            item: "component.net (dev)".into(),
            status: status.into(),
            reason: None,
            started_ms: 5,
            instances: vec![ComponentRun {
                status: "applied".into(),
                add: 2,
                address: "component.net".into(),
                deployment: "dev".into(),
                ..Default::default()
            }],
        };
        // A runner joined, the starter's entry later (clocks differ), the first end wins.
        let run = fold(
            "r1".into(),
            vec![
                entry(
                    3,
                    Body::Joined {
                        runner: "b".into(),
                        user: "u".into(),
                        pid: 2,
                        context: ctx.clone(),
                    },
                ),
                entry(
                    4,
                    Body::Started {
                        command: "stack apply -runner".into(),
                        args: vec!["stack".into(), "apply".into(), "-runner".into()],
                        user: "u".into(),
                        pid: 1,
                        context: ctx.clone(),
                        deployment: None,
                        runner: Some("a".into()),
                    },
                ),
                entry(9, item("b", "done")),
                entry(
                    10,
                    Body::Finished {
                        outcome: "success".into(),
                        message: None,
                        runner: Some("b".into()),
                        diagnostics: Vec::new(),
                    },
                ),
                entry(
                    11,
                    Body::Finished {
                        outcome: "failed".into(),
                        message: None,
                        runner: Some("a".into()),
                        diagnostics: Vec::new(),
                    },
                ),
            ],
            &host,
        );
        assert_eq!(run.runners, ["a", "b"]);
        assert_eq!((run.started_ms, run.finished_ms), (3, Some(10)));
        assert_eq!(run.outcome, "success");
        assert_eq!(run.totals(), (2, 0, 0));
        assert_eq!(
            run.summary(),
            "1 work item by 2 runners; 1 applied; 2 added, 0 changed, 0 destroyed"
        );
        // No end: unfinished (its process is not on this host).
        let run = fold("r2".into(), vec![entry(3, item("b", "done"))], &host);
        assert_eq!(run.outcome, "unfinished");
        assert_eq!(run.finished_ms, None);
    }

    #[test]
    fn an_item_whose_runner_died_keeps_its_runs_beside_the_takers() {
        let host = Some("ci-1".to_string());
        let id = InstanceId {
            deployment: "dev".into(),
            component: "db".into(),
            key: None,
        };
        let rec = |runner: &str, run: u64| Body::RunBegun {
            runner: runner.into(),
            item: "component.db (dev)".into(),
            instance: ComponentRun {
                deployment: id.deployment.clone(),
                address: id.address(),
                workspace: id.workspace(),
                status: "interrupted".into(),
                runs: vec![run],
                ..Default::default()
            },
        };
        let claimed = |runner: &str, at: u64| Body::Claimed {
            runner: runner.into(),
            item: "component.db (dev)".into(),
            started_ms: at,
        };
        // Runner a (a dead process elsewhere: taken over by b) began run 7 and died; b
        // claimed the item, began run 9 and finished it (its own look found run 9 only).
        let dead = "elsewhere:1:x";
        let run = fold(
            "r1".into(),
            vec![
                entry(1, claimed(dead, 1)),
                entry(2, rec(dead, 7)),
                entry(5, claimed("ci-1:2:y", 5)),
                entry(6, rec("ci-1:2:y", 9)),
                entry(
                    8,
                    Body::Item {
                        runner: "ci-1:2:y".into(),
                        item: "component.db (dev)".into(),
                        status: "done".into(),
                        reason: None,
                        started_ms: 5,
                        instances: vec![ComponentRun {
                            deployment: "dev".into(),
                            address: "component.db".into(),
                            status: "applied".into(),
                            add: 2,
                            runs: vec![9],
                            ..Default::default()
                        }],
                    },
                ),
            ],
            &host,
        );
        assert_eq!(run.steps.len(), 2, "{:#?}", run.steps);
        let (first, then) = (&run.steps[0], &run.steps[1]);
        assert_eq!(first.runner.as_deref(), Some(dead));
        assert_eq!(first.status.as_deref(), Some("interrupted"));
        assert_eq!(first.instances[0].runs, [7]);
        assert_eq!(first.instances[0].status, "interrupted");
        assert_eq!(then.status.as_deref(), Some("done"));
        assert_eq!(then.instances[0].runs, [9]);
        assert_eq!(run.components()[0].status, "applied");
        assert_eq!(
            run.summary(),
            "1 work item by 0 runners (1 interrupted); 1 applied; 2 added, 0 changed, 0 destroyed"
        );
        // Before anyone took it over, with the runner alive elsewhere: still running.
        let run = fold(
            "r2".into(),
            vec![entry(1, claimed(dead, 1)), entry(2, rec(dead, 7))],
            &host,
        );
        assert_eq!(run.steps[0].status.as_deref(), Some("running"));
        assert_eq!(run.steps[0].instances[0].runs, [7]);
    }

    #[test]
    fn a_round_without_its_end_names_the_runs_it_began() {
        let host = Some("ci-1".to_string());
        let id = |d: &str| InstanceId {
            deployment: d.into(),
            component: "net".into(),
            key: None,
        };
        let started = Body::Started {
            command: "stack apply".into(),
            args: Vec::new(),
            user: "u".into(),
            pid: u32::MAX,
            context: RunContext {
                host: Some("ci-1".into()),
                ..Default::default()
            },
            deployment: None,
            runner: None,
        };
        let begun = |round: usize, d: &str, run: u64| Body::RoundRunBegun {
            round,
            instance: super::begun(&id(d), run),
        };
        let ended = Body::Round {
            round: 1,
            started_ms: 1,
            instances: vec![ComponentRun {
                deployment: "dev".into(),
                address: "component.net".into(),
                status: "applied".into(),
                runs: vec![4],
                ..Default::default()
            }],
        };
        // Round 1 ended (its runs merged into its entry); round 2 began two runs and the
        // process is gone.
        let run = fold(
            "r1".into(),
            vec![
                entry(1, started),
                entry(2, begun(1, "dev", 3)),
                entry(5, ended),
                entry(6, begun(2, "dev", 5)),
                entry(7, begun(2, "prod", 2)),
            ],
            &host,
        );
        assert_eq!(run.outcome, "unfinished");
        assert_eq!(run.steps.len(), 2, "{:#?}", run.steps);
        assert_eq!(run.steps[0].status, None);
        assert_eq!(run.steps[0].instances.len(), 1);
        assert_eq!(run.steps[0].instances[0].runs, [3, 4]);
        assert_eq!(run.steps[0].instances[0].status, "applied");
        assert_eq!(run.steps[1].round, Some(2));
        assert_eq!(run.steps[1].status.as_deref(), Some("interrupted"));
        let runs: Vec<(&str, &str, &[u64])> = run.steps[1]
            .instances
            .iter()
            .map(|c| (c.deployment.as_str(), c.status.as_str(), c.runs.as_slice()))
            .collect();
        assert_eq!(
            runs,
            [
                ("dev", "interrupted", &[5][..]),
                ("prod", "interrupted", &[2][..])
            ]
        );
        assert_eq!(
            run.summary(),
            "2 rounds (the last interrupted); 2 interrupted"
        );
    }
}
