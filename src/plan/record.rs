//! A plan as the state log records it ([`cairn_state::PlanRecord`]): what an `apply` or
//! `destroy` run planned, kept with the run so that `cairn ui` can show "the last plan of a
//! run" (its changes by module, why each was chosen, every deferred read with its causal
//! chain) long after the process that made it ended.
//!
//! Compact by design: no-op changes are left out (a run over 100,000 unchanged instances
//! records none of them), and each change is its masked plan text, not its values (a planned
//! value may hold unknowns, which the log cannot store; the text says `(known after apply)`).
//! The plan's dependency graph goes with it as the plan has it (`Plan::graph`: static
//! addresses once each, edges as index pairs), so the UI draws a run's graph as it was planned.

use super::{render_change_in, Action, OutputChange, Plan, PlanMode, Reason, RenderOptions};
use cairn_state::{Deferral, PlanRecord, PlannedAction, PlannedChange};

/// The recorded form of an action; `None` for a no-op (not recorded).
pub(crate) fn planned_action(a: Action) -> Option<PlannedAction> {
    Some(match a {
        Action::NoOp => return None,
        Action::Create => PlannedAction::Create,
        Action::Read => PlannedAction::Read,
        Action::Update => PlannedAction::Update,
        Action::DeleteThenCreate => PlannedAction::DeleteThenCreate,
        Action::CreateThenDelete => PlannedAction::CreateThenDelete,
        Action::Delete => PlannedAction::Delete,
        Action::Forget => PlannedAction::Forget,
    })
}

/// Why a read was deferred, from the plan's reason (`None` for other reasons).
pub(crate) fn deferral(reason: &Reason) -> Option<Deferral> {
    match reason {
        Reason::ReadBecauseConfigUnknown { value, chain } => Some(Deferral::ConfigUnknown {
            value: value.clone(),
            chain: chain.clone(),
        }),
        Reason::ReadBecauseDependencyPending {
            dependency,
            action,
            via,
        } => Some(Deferral::DependencyPending {
            dependency: dependency.clone(),
            action: planned_action(*action).unwrap_or(PlannedAction::Update),
            via: via.clone(),
        }),
        _ => None,
    }
}

/// The causal chain of a deferral, from the data source outwards: the terms it reaches the
/// cause through, then the cause (the managed resource with a pending change, or where the
/// unknown value comes from).
pub(crate) fn deferral_chain(d: &Deferral) -> Vec<String> {
    match d {
        Deferral::ConfigUnknown { chain, .. } => chain.clone(),
        Deferral::DependencyPending {
            dependency, via, ..
        } => {
            let mut c = via.clone();
            c.push(dependency.to_string());
            c
        }
    }
}

fn mode_name(m: PlanMode) -> &'static str {
    match m {
        PlanMode::Normal => "normal",
        PlanMode::Destroy => "destroy",
        PlanMode::ReadOnly => "read-only",
        PlanMode::RefreshOnly => "refresh-only",
    }
}

fn output_action(o: &OutputChange) -> Option<(String, PlannedAction)> {
    planned_action(o.action).map(|a| (o.name.clone(), a))
}

/// The record of `plan` (`saved`: it came from a plan file; `files_hash`: of the
/// configuration files it was made from, `engine::api::files_hash`).
pub(crate) fn plan_record(plan: &Plan, saved: bool, files_hash: &str) -> PlanRecord {
    let opts = RenderOptions {
        color: false,
        width: 0,
    };
    let moved_from = plan.moved_from();
    let changes = plan
        .changes
        .iter()
        .filter_map(|ch| {
            let action = planned_action(ch.action)?;
            Some(PlannedChange {
                addr: ch.addr.clone(),
                action,
                reason: match &ch.deposed {
                    Some(key) => Some(format!(
                        "deposed object {key}, left over from a partially-failed replacement"
                    )),
                    None => ch
                        .reason
                        .as_deref()
                        .and_then(|r| super::render::reason_text(&ch.addr, r)),
                },
                deferral: ch.reason.as_deref().and_then(deferral),
                diff: render_change_in(plan, ch, moved_from.get(&ch.addr).copied(), &opts),
            })
        })
        .collect();
    PlanRecord {
        mode: mode_name(plan.mode).to_string(),
        saved,
        files_hash: files_hash.to_string(),
        changes,
        outputs: plan.outputs.iter().filter_map(output_action).collect(),
        graph: plan.graph.clone(),
    }
}
