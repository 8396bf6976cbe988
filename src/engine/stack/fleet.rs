//! A fleet of runners applying one stack (`cairn stack apply -runner`): the stack's states
//! are on PostgreSQL, and so is the work. The runners join one *stack run*
//! (`cairn_state::pg_fleet`: a row per component of each deployment, and per instance to
//! destroy whose component is gone), and each claims the items that are ready — those whose
//! upstream components (for a deployment being destroyed, whose dependents) are done — with
//! a row lock taken `FOR UPDATE SKIP LOCKED` and held until the item is finished. A claimed
//! component is evaluated with the outputs its upstream components' states now hold (in the
//! database: written by whichever runner applied them), planned and applied instance by
//! instance through the engine's API, as `stack apply -auto-approve` does; each instance's
//! state lock is the state's own session-bound advisory lock. A runner that dies loses its
//! database sessions: its claims are pending again, its state locks free, and the runner
//! that takes the item over resolves the operations it left pending (the engine does, on
//! opening the state). The run ends when every item is done, failed, or blocked by an
//! upstream failure. `cairn stack destroy -runner` is a run of its own (its fingerprint
//! says so): every item destroys its component's instances, each claimed once every
//! component that depends on it is done — reverse dependency order.

use super::history::Recorder;
use super::{
    component_value, expand, group_rules, instances_in_state, instances_in_state_of, levels,
    removal_job, run_job_observed, state_outputs, AutoApproval, GroupRules, InstanceId,
    InstanceResult, Job, JobDone, Outcome, Stack, StackRequest,
};
use crate::diag::{Diagnostic, Diagnostics};
use crate::plan::PlanMode;
use crate::value::ValueMap;
use cairn_state::pg_fleet::{Claim, Fleet, WorkItem, WorkRow};
use sha2::Digest;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

/// What a runner reports as it goes (the CLI prints each as it comes).
pub enum FleetEvent {
    /// It joined (or started) the stack run.
    Joined {
        run_id: String,
        runner: String,
        started: bool,
        abandoned: Option<String>,
        items: usize,
        /// The stack run's record, for the runner's own entries.
        record: Arc<Recorder>,
    },
    /// It claimed an item; `before`: the runners that claimed it earlier and stopped.
    Claimed { label: String, before: Vec<String> },
    /// It finished an item: its instances' results, and the item's recorded status.
    Finished {
        label: String,
        results: Vec<InstanceResult>,
        status: &'static str,
    },
    /// It gave an item back unfinished (interrupted): pending again for any runner.
    Released { label: String },
    /// It marked an item blocked: an upstream component failed.
    Blocked { label: String, why: String },
    /// The stack run's record could not be written (the run goes on).
    Warning(String),
}

/// Links each component run a runner begins on a claimed item into the stack run's record
/// as the run begins (`history::Recorder::run_begun`): a runner killed mid-item leaves its
/// unfinished runs named there, beside those of the runner that takes the item over.
struct RunLink {
    rec: Arc<Recorder>,
    runner: String,
    item: String,
    id: InstanceId,
    warnings: Arc<std::sync::Mutex<Vec<String>>>,
}

impl crate::engine::observer::Observer for RunLink {
    fn event(&self, _: crate::engine::observer::Progress) {}

    fn run_begun(&self, run: u64) {
        if let Some(w) = self.rec.run_begun(&self.runner, &self.item, &self.id, run) {
            if let Ok(mut ws) = self.warnings.lock() {
                ws.push(w);
            }
        }
    }
}

/// Where a claimed item's runs are linked: the run's record, this runner and the item.
#[derive(Clone)]
struct ItemLink {
    rec: Arc<Recorder>,
    runner: String,
    item: String,
    warnings: Arc<std::sync::Mutex<Vec<String>>>,
}

impl ItemLink {
    fn observer(&self, id: &InstanceId) -> Arc<dyn crate::engine::observer::Observer> {
        Arc::new(RunLink {
            rec: self.rec.clone(),
            runner: self.runner.clone(),
            item: self.item.clone(),
            id: id.clone(),
            warnings: self.warnings.clone(),
        })
    }
}

/// How the run ended, as this runner saw it.
pub struct FleetEnd {
    pub run_id: String,
    /// Every item of the run at the end.
    pub rows: Vec<WorkRow>,
    /// The runners that claimed work in the run.
    pub runners: BTreeSet<String>,
    /// This runner's name, and how many items it finished.
    pub runner: String,
    pub mine: usize,
    /// It stopped (Ctrl-C) before the run ended.
    pub interrupted: bool,
}

/// An item's name for people: `component.app (dev)`.
fn label(i: &WorkItem) -> String {
    let id = InstanceId {
        deployment: i.deployment.clone(),
        component: i.component.clone(),
        key: i.key.clone(),
    };
    if i.removed {
        format!("{} ({}, removed)", id.address(), i.deployment)
    } else {
        format!("{} ({})", id.address(), i.deployment)
    }
}

/// The stack's configuration as the runners compare it: its files, the deployment filter,
/// and whether the run destroys the stack (`stack destroy -runner`).
fn fingerprint(req: &StackRequest, destroy: bool) -> String {
    let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(&req.dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let stack_file = name.ends_with(".tfcomponent.hcl") || name.ends_with(".tfdeploy.hcl");
            stack_file.then(|| (name, std::fs::read(e.path()).unwrap_or_default()))
        })
        .collect();
    files.sort();
    let mut h = sha2::Sha256::new();
    for (name, text) in files {
        h.update((name.len() as u64).to_be_bytes());
        h.update(name.as_bytes());
        h.update((text.len() as u64).to_be_bytes());
        h.update(&text);
    }
    h.update(req.deployment.as_deref().unwrap_or("*").as_bytes());
    if destroy {
        h.update(b"\0destroy");
    }
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

fn state_diag(what: &str, e: cairn_state::StateError) -> Diagnostic {
    Diagnostic::error(what, format!("{e}."))
}

/// The work of a run: every component of every selected deployment, and every instance in
/// the state whose component the configuration no longer declares.
fn work_items(stack: &Stack, in_state: &[InstanceId]) -> Vec<WorkItem> {
    let mut out = Vec::new();
    for d in &stack.deployments {
        for c in stack.model.components.keys() {
            let id = InstanceId {
                deployment: d.clone(),
                component: c.clone(),
                key: None,
            };
            out.push(WorkItem {
                item: id.workspace(),
                deployment: d.clone(),
                component: c.clone(),
                key: None,
                removed: false,
            });
        }
        for id in in_state {
            if id.deployment == *d && !stack.model.components.contains_key(&id.component) {
                out.push(WorkItem {
                    item: format!("removed:{}", id.workspace()),
                    deployment: d.clone(),
                    component: id.component.clone(),
                    key: id.key.clone(),
                    removed: true,
                });
            }
        }
    }
    out
}

/// Every component's value for `deployment` from what the states hold now.
fn state_values(
    stack: &Stack,
    req: &StackRequest,
    in_state: &[InstanceId],
    deployment: &str,
) -> Result<ValueMap, Diagnostic> {
    let mut values = ValueMap::new();
    for (name, c) in &stack.model.components {
        let mut outs = BTreeMap::new();
        let mut keys = Vec::new();
        for id in in_state
            .iter()
            .filter(|i| i.deployment == deployment && i.component == *name)
        {
            if let Some(v) = state_outputs(&req.state_root, id)? {
                outs.insert(id.key.clone(), v);
                keys.push(id.key.clone());
            }
        }
        if c.for_each.is_none() && keys.is_empty() {
            continue;
        }
        values.insert(name.clone(), component_value(&Some(keys), &outs));
    }
    Ok(values)
}

/// The engine calls a claimed item makes, and the results known without one (deferred
/// instances, errors evaluating the component).
fn item_jobs(
    stack: &Stack,
    req: &StackRequest,
    item: &WorkItem,
    destroy: bool,
) -> (Vec<Job>, Vec<InstanceResult>) {
    let failed = |id: InstanceId, diags: Diagnostics| InstanceResult {
        id,
        removed: item.removed,
        outcome: Outcome::Failed,
        diags,
        config: None,
        replay: None,
    };
    let id = InstanceId {
        deployment: item.deployment.clone(),
        component: item.component.clone(),
        key: item.key.clone(),
    };
    let in_state = match instances_in_state_of(&req.state_root, Some(&item.deployment)) {
        Ok(i) => i,
        Err(d) => return (Vec::new(), vec![failed(id, d.into())]),
    };
    if item.removed {
        if !in_state.contains(&id) {
            // Destroyed already (by a runner that stopped before recording it).
            return (Vec::new(), Vec::new());
        }
        return match removal_job(&stack.model, &req.state_root, &id) {
            Ok(job) => (vec![job], Vec::new()),
            Err(d) => (Vec::new(), vec![failed(id, d.into())]),
        };
    }
    let model = &stack.model;
    let destroying = destroy
        || model
            .deployments
            .get(&item.deployment)
            .is_some_and(|d| d.destroy);
    let mode = if destroying {
        PlanMode::Destroy
    } else {
        PlanMode::Normal
    };
    let values = match state_values(stack, req, &in_state, &item.deployment) {
        Ok(v) => v,
        Err(d) => return (Vec::new(), vec![failed(id, d.into())]),
    };
    let vars = super::deployment_vars(model, &item.deployment);
    let level = levels(model).get(&item.component).copied().unwrap_or(0);
    let ex = expand(
        stack,
        &item.deployment,
        &item.component,
        level,
        &vars,
        &values,
        &BTreeMap::new(),
        mode,
    );
    let mut results = Vec::new();
    let mut jobs = ex.jobs;
    let mine = |i: &&InstanceId| i.deployment == item.deployment && i.component == item.component;
    if destroying {
        jobs.retain(|j| in_state.contains(&j.id));
    } else if let Some(keys) = &ex.keys {
        // Instances of it whose key is gone from its for_each: destroyed.
        for gone in in_state
            .iter()
            .filter(mine)
            .filter(|i| !keys.contains(&i.key))
        {
            match removal_job(model, &req.state_root, gone) {
                Ok(job) => jobs.push(job),
                Err(d) => results.push(failed(gone.clone(), d.into())),
            }
        }
    }
    if ex.diags.has_errors() {
        results.push(failed(id, ex.diags));
        return (Vec::new(), results);
    }
    for (id, why) in ex.deferred {
        if destroying && !in_state.iter().any(|i| mine(&i)) {
            continue;
        }
        results.push(InstanceResult {
            id,
            removed: false,
            outcome: Outcome::Deferred(why),
            diags: Diagnostics::new(),
            config: None,
            replay: None,
        });
    }
    (jobs, results)
}

/// Plans each job (at most `parallelism` at once), then applies the plans: all of them
/// with `rules` `None` (`-auto-approve`), else only when the deployment group's rules approve
/// the component's plans (see `GroupRules::judge`); refused plans are failures naming why.
async fn apply_jobs(
    base: crate::engine::request::Options,
    root: std::path::PathBuf,
    jobs: Vec<Job>,
    parallelism: usize,
    rules: Option<GroupRules>,
    link: ItemLink,
) -> Vec<InstanceResult> {
    let sem = Arc::new(tokio::sync::Semaphore::new(parallelism.max(1)));
    let mut set = tokio::task::JoinSet::new();
    for job in jobs {
        let (base, root, sem) = (base.clone(), root.clone(), sem.clone());
        let observer = link.observer(&job.id);
        set.spawn(async move {
            let _permit = sem.acquire_owned().await;
            run_job_observed(base, root, job, true, observer).await
        });
    }
    let mut out = Vec::new();
    let mut pending = Vec::new();
    while let Some(joined) = set.join_next().await {
        match joined {
            Ok(JobDone::Result(r)) => out.push(*r),
            Ok(JobDone::Pending(id, _, removed, p, plan)) => pending.push((id, removed, p, plan)),
            Err(_) => {}
        }
    }
    let refused = match &rules {
        None => None,
        Some(rules) => {
            let plans: Vec<(&str, &crate::plan::Plan)> = pending
                .iter()
                .map(|(id, _, _, plan)| (id.component.as_str(), &**plan))
                .collect();
            let facts = super::approval::PlanFacts {
                success: !out.iter().any(|r| matches!(r.outcome, Outcome::Failed)),
                deferred: out
                    .iter()
                    .filter(|r| matches!(r.outcome, Outcome::Deferred(_)))
                    .count(),
                rounds: 1,
            };
            match rules.judge(&plans, &facts) {
                _ if pending.is_empty() => None,
                AutoApproval::Approved { .. } => None,
                AutoApproval::Refused { group, reasons } => Some(format!(
                    "The plan is not approved by deployment_group.{group}: {}. Apply it with \
                     a runner given -auto-approve, or change the group's rules.",
                    reasons.join("; ")
                )),
                AutoApproval::Default => Some(
                    "The plan has changes and its deployment is in no deployment_group: a \
                     runner without -auto-approve applies only plans that a group's \
                     auto-approve rules approve (and plans without changes)."
                        .to_string(),
                ),
            }
        }
    };
    let mut set = tokio::task::JoinSet::new();
    for (id, removed, p, _) in pending {
        if let Some(why) = &refused {
            let _ = p.decline();
            out.push(InstanceResult {
                id,
                removed,
                outcome: Outcome::Failed,
                diags: Diagnostic::error("Plan not approved", why.clone()).into(),
                config: None,
                replay: None,
            });
            continue;
        }
        let sem = sem.clone();
        set.spawn(async move {
            let _permit = sem.acquire_owned().await;
            let report = p.approve().await;
            let failed = report.diags.has_errors();
            InstanceResult {
                id,
                removed,
                outcome: match report.result {
                    Some(a) if !failed => Outcome::Applied(Box::new(a)),
                    _ => Outcome::Failed,
                },
                diags: report.diags,
                config: report.config,
                replay: None,
            }
        });
    }
    while let Some(joined) = set.join_next().await {
        if let Ok(r) = joined {
            out.push(r);
        }
    }
    out.sort_by(|a, b| a.id.cmp(&b.id));
    out
}

/// What became of a claimed item: `done`, `failed`, or `None` (interrupted: given back).
fn item_status(results: &[InstanceResult], stopped: bool) -> Option<&'static str> {
    let interrupted = results
        .iter()
        .any(|r| matches!(&r.outcome, Outcome::Applied(a) if !a.confirmed));
    let failed = results
        .iter()
        .any(|r| matches!(r.outcome, Outcome::Failed | Outcome::Deferred(_)));
    if interrupted || (stopped && failed) {
        return None;
    }
    Some(if failed { "failed" } else { "done" })
}

/// A short account of a failed item, for the run's record.
fn failure_message(results: &[InstanceResult]) -> String {
    let mut parts = Vec::new();
    for r in results {
        match &r.outcome {
            Outcome::Failed => {
                let first = r.diags.iter().find(|d| d.is_error());
                parts.push(match first {
                    Some(d) => format!("{}: {}", r.id.address(), d.summary),
                    None => format!("{}: failed", r.id.address()),
                });
            }
            Outcome::Deferred(why) => parts.push(format!(
                "{}: still deferred after its upstream components were applied: {why}",
                r.id.address()
            )),
            _ => {}
        }
    }
    parts.join("; ")
}

/// Runs this process as one runner of the stack's fleet until the stack run ends (see the
/// module docs). `note` hears each event as it happens.
pub async fn run(
    stack: &Stack,
    req: &StackRequest,
    auto_approve: bool,
    destroy: bool,
    note: &mut dyn FnMut(FleetEvent),
) -> Result<FleetEnd, Diagnostic> {
    let cfg = cairn_state::workspace::root_pg_config(&req.state_root)
        .map_err(|e| state_diag("Cannot read the stack's backend", e))?
        .ok_or_else(|| {
            Diagnostic::error(
                "A runner needs the pg backend",
                "`cairn stack apply -runner` shares the stack's work with other runners through \
                 PostgreSQL, and this stack's states are not there: run `cairn stack init \
                 -backend=pg` (with -backend-config=… or PG_CONN_STR) on every runner first.",
            )
        })?;
    // A component state whose runner died is locked until the server notices the end of
    // that runner's session, which may come a moment after its claim was released: wait.
    let mut req = req.clone();
    req.base.lock_timeout = req.base.lock_timeout.max(Duration::from_secs(60));
    let req = &req;
    let in_state = instances_in_state(&req.state_root)?;
    let items = work_items(stack, &in_state);
    let fp = fingerprint(req, destroy);
    let fleet = {
        let cfg = cfg.clone();
        tokio::task::spawn_blocking(move || Fleet::join(&cfg, &fp, &items))
            .await
            .map_err(|e| Diagnostic::error("Cannot join the stack run", e.to_string()))?
            .map_err(|e| state_diag("Cannot join the stack run", e))?
    };
    let fleet = Arc::new(fleet);
    // One record for this runner's part (the CLI's entries and the component runs it
    // begins), written over the runner's own connection.
    let record = Arc::new(Recorder::on_fleet(req, &fleet));
    let warnings: Arc<std::sync::Mutex<Vec<String>>> = Default::default();
    let rows = fleet
        .rows()
        .map_err(|e| state_diag("Cannot read the stack run", e))?;
    note(FleetEvent::Joined {
        run_id: fleet.run_id.clone(),
        runner: fleet.runner.clone(),
        started: fleet.started,
        abandoned: fleet.abandoned.clone(),
        items: rows.len(),
        record: record.clone(),
    });
    let model = &stack.model;
    let dependents = |name: &str| -> Vec<String> {
        model
            .components
            .iter()
            .filter(|(_, c)| c.depends_on.contains(name))
            .map(|(n, _)| n.clone())
            .collect()
    };
    type Running = (String, Vec<InstanceResult>, Claim);
    let mut running: tokio::task::JoinSet<Running> = tokio::task::JoinSet::new();
    let mut mine_running: BTreeSet<String> = BTreeSet::new();
    let mut labels: BTreeMap<String, String> = BTreeMap::new();
    let mut mine = 0;
    let stop = req.base.stop.clone();
    let mut interrupted = false;
    let said = |note: &mut dyn FnMut(FleetEvent)| {
        let ws: Vec<String> = warnings
            .lock()
            .map(|mut w| std::mem::take(&mut *w))
            .unwrap_or_default();
        for w in ws {
            note(FleetEvent::Warning(w));
        }
    };
    loop {
        said(note);
        let stopped = stop.load(Ordering::SeqCst);
        if stopped && mine_running.is_empty() {
            interrupted = true;
            break;
        }
        let rows = fleet
            .rows()
            .map_err(|e| state_diag("Cannot read the stack run", e))?;
        if rows.iter().all(WorkRow::is_final) && mine_running.is_empty() {
            break;
        }
        // Each component's status per deployment.
        let status: BTreeMap<(&str, &str), &str> = rows
            .iter()
            .filter(|r| !r.item.removed)
            .map(|r| {
                (
                    (r.item.deployment.as_str(), r.item.component.as_str()),
                    r.status.as_str(),
                )
            })
            .collect();
        let mut claimed_any = false;
        for row in rows.iter().filter(|r| !r.is_final()) {
            if stopped || mine_running.len() >= req.parallelism.max(1) {
                break;
            }
            if mine_running.contains(&row.item.item) {
                continue;
            }
            let i = &row.item;
            // What it waits for: upstream components (dependents, for a destroy).
            let waits: Vec<String> = if i.removed {
                Vec::new()
            } else if destroy
                || model
                    .deployments
                    .get(&i.deployment)
                    .is_some_and(|d| d.destroy)
            {
                dependents(&i.component)
            } else {
                model
                    .components
                    .get(&i.component)
                    .map(|c| {
                        c.depends_on
                            .iter()
                            .filter(|x| model.components.contains_key(*x))
                            .cloned()
                            .collect()
                    })
                    .unwrap_or_default()
            };
            let st = |c: &String| {
                status
                    .get(&(i.deployment.as_str(), c.as_str()))
                    .copied()
                    .unwrap_or("done")
            };
            let broken: Vec<String> = waits
                .iter()
                .filter(|c| matches!(st(c), "failed" | "blocked"))
                .map(|c| format!("component.{c} ({})", st(c)))
                .collect();
            if broken.is_empty() && !waits.iter().all(|c| st(c) == "done") {
                continue;
            }
            let claim = {
                let (fleet, item) = (fleet.clone(), i.item.clone());
                tokio::task::spawn_blocking(move || fleet.claim(&item))
                    .await
                    .map_err(|e| Diagnostic::error("Cannot claim work", e.to_string()))?
                    .map_err(|e| state_diag("Cannot claim work", e))?
            };
            let Some(claim) = claim else { continue };
            claimed_any = true;
            let name = label(i);
            if !broken.is_empty() {
                let why = format!("it waits for {}", broken.join(" and "));
                let msg = why.clone();
                tokio::task::spawn_blocking(move || claim.finish("blocked", Some(&msg)))
                    .await
                    .map_err(|e| Diagnostic::error("Cannot record work", e.to_string()))?
                    .map_err(|e| state_diag("Cannot record work", e))?;
                note(FleetEvent::Blocked { label: name, why });
                continue;
            }
            note(FleetEvent::Claimed {
                label: name.clone(),
                before: claim.before.clone(),
            });
            let link = ItemLink {
                rec: record.clone(),
                runner: fleet.runner.clone(),
                item: name.clone(),
                warnings: warnings.clone(),
            };
            labels.insert(i.item.clone(), name);
            mine_running.insert(i.item.clone());
            let (jobs, known) = item_jobs(stack, req, i, destroy);
            let rules = (!auto_approve).then(|| group_rules(model, &i.deployment));
            let (base, root, par, item) = (
                req.base.clone(),
                req.state_root.clone(),
                req.parallelism,
                i.item.clone(),
            );
            running.spawn(async move {
                let mut results = known;
                if !results.iter().any(|r| matches!(r.outcome, Outcome::Failed)) {
                    results.extend(apply_jobs(base, root, jobs, par, rules, link).await);
                }
                (item, results, claim)
            });
        }
        if claimed_any && !stopped {
            continue;
        }
        tokio::select! {
            Some(joined) = running.join_next(), if !running.is_empty() => {
                let Ok((item, results, claim)) = joined else { continue };
                mine_running.remove(&item);
                let name = labels.remove(&item).unwrap_or_else(|| item.clone());
                let stopped = stop.load(Ordering::SeqCst);
                match item_status(&results, stopped) {
                    None => {
                        tokio::task::spawn_blocking(move || claim.release()).await.ok();
                        note(FleetEvent::Released { label: name });
                    }
                    Some(status) => {
                        let msg = (status == "failed").then(|| failure_message(&results));
                        tokio::task::spawn_blocking(move || claim.finish(status, msg.as_deref()))
                            .await
                            .map_err(|e| Diagnostic::error("Cannot record work", e.to_string()))?
                            .map_err(|e| state_diag("Cannot record work", e))?;
                        mine += 1;
                        note(FleetEvent::Finished { label: name, results, status });
                    }
                }
            }
            _ = tokio::time::sleep(Duration::from_millis(250)) => {}
        }
    }
    said(note);
    let rows = fleet
        .rows()
        .map_err(|e| state_diag("Cannot read the stack run", e))?;
    if !interrupted && rows.iter().all(WorkRow::is_final) {
        let ok = rows.iter().all(|r| r.status == "done");
        fleet
            .close(if ok { "done" } else { "failed" })
            .map_err(|e| state_diag("Cannot close the stack run", e))?;
    }
    let runners = fleet
        .claims()
        .map_err(|e| state_diag("Cannot read the stack run", e))?
        .into_iter()
        .map(|(_, r)| r)
        .collect();
    Ok(FleetEnd {
        run_id: fleet.run_id.clone(),
        rows,
        runners,
        runner: fleet.runner.clone(),
        mine,
        interrupted,
    })
}

/// A run's failed and blocked items, for the end of a runner's report.
pub fn unfinished(end: &FleetEnd) -> Vec<String> {
    end.rows
        .iter()
        .filter(|r| r.status != "done")
        .map(|r| {
            format!(
                "{}: {}{}",
                label(&r.item),
                r.status,
                r.message
                    .as_ref()
                    .map(|m| format!(" — {m}"))
                    .unwrap_or_default()
            )
        })
        .collect()
}
