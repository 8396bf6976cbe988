//! Plan-only runs in the history: `cairn plan` leaves a lightweight record beside the log
//! (`cairn_state::plan_runs`: no lock taken, no event appended), which `cairn history` and
//! `cairn ui` list among the runs, so a review is visible in the history.

use super::request::Options;
use crate::config::Config;
use crate::plan::{Action, Plan, PlanMode};
use cairn_state::plan_runs::{self, PlanRun, MAX_ADDRESSES};
use std::path::Path;

/// A plan-only run's record.
pub type PlanRunRecord = PlanRun;

/// The milliseconds since the epoch now (a plan's start, taken before it runs).
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

fn action_word(a: Action) -> &'static str {
    match a {
        Action::NoOp => "no-op",
        Action::Create => "create",
        Action::Read => "read",
        Action::Update => "update",
        Action::DeleteThenCreate | Action::CreateThenDelete => "replace",
        Action::Delete => "delete",
        Action::Forget => "forget",
    }
}

/// The record of a `cairn plan` that started at `started_ms`: `plan` is what it planned
/// (`None`: it failed before it had one), `errors` how many errors it reported, `saved_to`
/// the plan file it saved. The command line is masked with `config`'s sensitive variables.
pub fn plan_record(
    opts: &Options,
    config: Option<&Config>,
    plan: Option<&Plan>,
    errors: usize,
    started_ms: u64,
    saved_to: Option<&Path>,
) -> PlanRun {
    let sensitive = config.map(Config::sensitive_variables).unwrap_or_default();
    let mut r = PlanRun {
        id: PlanRun::new_id(started_ms),
        started_ms,
        finished_ms: now_ms().max(started_ms),
        args: crate::config::mask_var_args(&opts.args, &sensitive),
        user: cairn_state::current_user(),
        pid: std::process::id(),
        context: super::session::run_context(),
        errors: errors as u32,
        saved_to: saved_to.map(|p| p.display().to_string()),
        ..PlanRun::default()
    };
    if let Some(p) = plan {
        r.base_seq = Some(p.base_seq);
        r.mode = match p.mode {
            PlanMode::Normal => "normal",
            PlanMode::Destroy => "destroy",
            PlanMode::ReadOnly => "read-only",
            PlanMode::RefreshOnly => "refresh-only",
        }
        .into();
        let (add, change, destroy) = p.counts();
        (r.add, r.change, r.destroy) = (add as u32, change as u32, destroy as u32);
        r.import = p.imports() as u32;
        r.moved = p.moves.len() as u32;
        let changed: Vec<_> = p
            .changes
            .iter()
            .filter(|c| c.action != Action::NoOp)
            .collect();
        r.read = changed.iter().filter(|c| c.action == Action::Read).count() as u32;
        r.forget = changed
            .iter()
            .filter(|c| c.action == Action::Forget)
            .count() as u32;
        r.changes_total = changed.len() as u32;
        r.changes = changed
            .iter()
            .take(MAX_ADDRESSES)
            .map(|c| (action_word(c.action).to_string(), c.addr.to_string()))
            .collect();
    }
    r.outcome = if errors > 0 {
        "failed"
    } else if plan.is_some_and(|p| p.applyable) {
        "planned"
    } else {
        "no changes"
    }
    .into();
    r
}

/// Records `run` in the history of the state `opts` names, without its lock. `None`: done
/// (or there is no state yet to record it in); `Some(why)`: it could not be recorded (the
/// plan itself stands: the caller warns).
pub fn record(opts: &Options, run: &PlanRun) -> Option<String> {
    let crypt = super::encryption::state();
    match plan_runs::record(&opts.state_dir, run, crypt.as_deref()) {
        Ok(_) => None,
        Err(e) => Some(e.to_string()),
    }
}

/// The plan-only runs recorded in the state of `state_dir`, oldest first, with warnings for
/// the records that cannot be read.
pub fn list(state_dir: &Path) -> (Vec<PlanRun>, Vec<String>) {
    let crypt = super::encryption::state();
    match plan_runs::list(state_dir, crypt.as_deref()) {
        Ok(r) => r,
        Err(cairn_state::StateError::NotFound { .. }) => Default::default(),
        Err(e) => (
            Vec::new(),
            vec![format!("the plan records cannot be read: {e}")],
        ),
    }
}

/// A stamp that changes when the local plan records do (`None`: a remote store).
pub fn local_stamp(state_dir: &Path) -> Option<(Option<std::time::SystemTime>, usize)> {
    plan_runs::local_stamp(state_dir)
}

/// A plan run's counts in words, as `history` shows a run's: `2 to add, 1 to change, 0 to
/// destroy, 1 read deferred`, or `1 error(s)`.
pub fn changes_text(r: &PlanRun) -> String {
    let mut t = String::new();
    if r.import > 0 {
        t.push_str(&format!("{} to import, ", r.import));
    }
    t.push_str(&format!(
        "{} to add, {} to change, {} to destroy",
        r.add, r.change, r.destroy
    ));
    if r.read > 0 {
        t.push_str(&format!(", {} read deferred", r.read));
    }
    if r.forget > 0 {
        t.push_str(&format!(", {} to forget", r.forget));
    }
    if r.moved > 0 {
        t.push_str(&format!(", {} to move", r.moved));
    }
    if r.errors > 0 {
        t.push_str(&format!(", {} error(s)", r.errors));
    }
    t
}
