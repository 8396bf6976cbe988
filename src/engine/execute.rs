//! Execution: what an approved plan does to the world and the state — the apply walk (or,
//! for `destroy`, the deletes alone) with its finishing events ([`execute`]), or, for a
//! read-only plan, recording what was read ([`record_read_only`]).

use super::apply::operation::{Interruption, Recorder, LISTED};
use super::apply::order::add_destroys;
use super::apply::steps::{DestroyInfo, Executor, Step};
use super::apply::ApplyPhase;
use super::assemble::in_address_order;
use super::core::{run as walk_phase, Ctx};
use super::graph::{Node, TermGraph};
use super::journal::Journal;
use super::observer::Observer;
use super::provider_inputs::{provider_inputs, ProviderInputs};
use super::request::Options;
use super::source::{new_ctx, term_graph, Loaded};
use super::timing::{timed, timed_async};
use super::walk::WalkOutcome;
use crate::addr::{ProviderAddr, ResourceInstanceAddr};
use crate::diag::{Diagnostic, Diagnostics};
use crate::plan::{Action, Plan, PlanMode};
use crate::value::{Type, Value};
use cairn_state::{EventBody, OutputValue, RunSummary, Snapshot};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

/// Records what refresh found and the refactoring, first: the `moved` blocks' moves and the
/// objects `removed` blocks forget (the rest of the plan, drift included, is at the moved
/// addresses), then drift and the provider meta of refreshed objects; one commit.
pub(super) fn record_refreshed(journal: &Journal, plan: &Plan, diags: &mut Diagnostics) {
    // What refresh found is part of the state now: drift, and the provider meta of objects
    // (drifted or not).
    let mut metas: BTreeMap<&ResourceInstanceAddr, &cairn_state::ObjectMeta> =
        plan.refreshed_meta.iter().map(|(a, m)| (a, m)).collect();
    // The `moved` blocks' moves and the objects `removed` blocks forget, first: the rest
    // of the plan (drift included) is at the moved addresses.
    let mut events: Vec<EventBody> = plan
        .moves
        .iter()
        .map(|(from, to)| Step::for_move(from, to))
        .chain(plan.changes.iter().filter_map(Step::for_state_change))
        .filter_map(|step| step.state_event())
        .collect();
    for d in &plan.drift {
        let event = match &d.after {
            Some(v) => match v.to_stored() {
                Ok(attrs) => EventBody::ResourceRead {
                    addr: d.addr.clone(),
                    attrs,
                    meta: metas.remove(&d.addr).cloned(),
                },
                Err(_) => continue,
            },
            None => EventBody::ResourceGone {
                addr: d.addr.clone(),
            },
        };
        events.push(event);
    }
    journal.with_snapshot(|s| {
        for (addr, meta) in metas {
            if let Some(obj) = s.current(addr) {
                events.push(EventBody::ResourceRead {
                    addr: addr.clone(),
                    attrs: obj.attrs.clone(),
                    meta: Some(meta.clone()),
                });
            }
        }
    });
    for event in events {
        if let Err(e) = journal.append(event) {
            diags.push(e);
        }
    }
    if let Err(e) = journal.commit() {
        diags.push(e);
    }
}

/// Records a read-only apply: data results and outputs (the refresh was recorded already).
pub(super) fn record_read_only(
    journal: &Journal,
    plan: &Plan,
    diags: &mut Diagnostics,
) -> (RunSummary, BTreeMap<String, (Value, bool)>) {
    let mut summary = RunSummary::default();
    // Provider instances the results are read through, registered first.
    for pc in &plan.provider_changes {
        let registered = journal.with_snapshot(|s| s.providers.contains_key(&pc.addr));
        let Some(Ok(config)) = pc.after.as_ref().map(Value::to_stored) else {
            continue;
        };
        if pc.action == Action::Create && !registered {
            let instance = cairn_state::ProviderInstance {
                addr: pc.addr.clone(),
                id: super::providers::new_instance_id(&pc.addr.package),
                config,
                is_default: pc.is_default,
            };
            if let Err(e) = journal.append(EventBody::ProviderRegistered { instance }) {
                diags.push(e);
            }
        }
    }
    for read in &plan.data_reads {
        let Ok(attrs) = read.result.to_stored() else {
            continue;
        };
        let provider_id = journal
            .with_snapshot(|s| s.providers.get(&read.provider).map(|p| p.id.clone()))
            .unwrap_or_default();
        let object = cairn_state::DataObject {
            attrs,
            provider: cairn_state::ProviderRef::new(read.provider.clone(), provider_id),
        };
        if let Err(e) = journal.append(EventBody::DataRead {
            addr: read.addr.clone(),
            object,
        }) {
            diags.push(e);
        }
        summary.read += 1;
    }
    // An output whose new value cannot be known without applying changes keeps its old value.
    let outputs: BTreeMap<String, (Value, bool)> = plan
        .outputs
        .iter()
        .filter_map(|o| {
            let v = match (&o.after, &o.before) {
                (Some(a), _) if a.is_wholly_known() => a.clone(),
                (_, Some(b)) => b.clone(),
                (Some(a), None) if a.is_wholly_known() => a.clone(),
                _ => return None,
            };
            Some((o.name.clone(), (v, o.sensitive)))
        })
        .collect();
    let configured: BTreeSet<ProviderAddr> =
        journal.with_snapshot(|s| s.providers.keys().cloned().collect());
    for e in journal.with_snapshot(|s| finishing_events(s, &outputs, &configured, &[])) {
        if let Err(e) = journal.append(e) {
            diags.push(e);
        }
    }
    if let Err(e) = journal.commit() {
        diags.push(e);
    }
    (summary, outputs)
}

/// Applies a plan: the apply walk (or, for destroy, the deletes alone), then the finishing
/// events.
pub(super) async fn execute(
    loaded: &Loaded,
    opts: &Options,
    plan: &mut Plan,
    journal: &Arc<Journal>,
    run: u64,
    observer: &Arc<dyn Observer>,
    diags: &mut Diagnostics,
) -> (RunSummary, BTreeMap<String, (Value, bool)>) {
    execute_keeping(loaded, opts, plan, journal, run, observer, diags, &mut None).await
}

/// [`execute`], keeping the apply walk's context in `walked` (its evaluated values, for
/// `cairn test`'s assertions). The plan's changes are lent to the walk's steps (moved, not
/// copied: at 100,000 resources a copy was a tenth of the apply's memory) and are back in
/// `plan`, in their order, when it returns.
#[allow(clippy::too_many_arguments)]
pub(super) async fn execute_keeping(
    loaded: &Loaded,
    opts: &Options,
    plan: &mut Plan,
    journal: &Arc<Journal>,
    run: u64,
    observer: &Arc<dyn Observer>,
    diags: &mut Diagnostics,
    walked: &mut Option<Arc<Ctx>>,
) -> (RunSummary, BTreeMap<String, (Value, bool)>) {
    let prior = Arc::new(journal.snapshot());
    let mut deposed_keys = BTreeMap::new();
    let mut graph = if plan.mode == PlanMode::Destroy {
        TermGraph::empty()
    } else {
        let (g, d) = term_graph(&loaded.config);
        diags.extend(d);
        g
    };
    let mut destroy = timed("add destroys", || {
        add_destroys(&mut graph, plan, &prior, &mut deposed_keys, opts.sabotage)
    });
    let cycles = graph.cycle_diagnostics(&loaded.config.sources);
    if cycles.has_errors() {
        diags.extend(cycles);
        return (RunSummary::default(), BTreeMap::new());
    }
    // A delete configures its provider instance as recorded, with the arguments set from
    // ephemeral values evaluated again (they are never recorded).
    let inputs = match destroy.is_empty() {
        true => ProviderInputs::default(),
        false => provider_inputs(loaded, opts, &prior, observer, diags).await,
    };
    for info in destroy.values_mut() {
        let recorded = std::mem::replace(&mut info.config, Value::Null(Type::Dynamic));
        info.config = inputs.args.config(&info.provider.addr, recorded);
    }
    let ctx = new_ctx(loaded, graph, &prior, opts, observer.clone());
    let steps = executor(plan, journal, run, destroy, deposed_keys);
    let phase = Arc::new(ApplyPhase {
        steps,
        outputs: Mutex::new(BTreeMap::new()),
        ephemerals: Default::default(),
    });
    let outcome = timed_async("apply walk", walk_phase(ctx.clone(), phase.clone())).await;
    phase.ephemerals.close_all(&ctx).await;
    inputs.close().await;
    *walked = Some(ctx.clone());
    diags.extend(in_address_order(std::mem::take(
        &mut *ctx.diags.lock().expect("diags"),
    )));
    if opts.stop.load(std::sync::atomic::Ordering::SeqCst) {
        let interruption =
            std::mem::take(&mut *phase.steps.rec.interruption.lock().expect("interruption"));
        diags.push(interrupted(&ctx.graph, &outcome, interruption));
    }
    let outputs = std::mem::take(&mut *phase.outputs.lock().expect("outputs"));
    let configured: BTreeSet<ProviderAddr> = ctx
        .providers
        .lock()
        .expect("providers")
        .keys()
        .cloned()
        .collect();
    let configured = if plan.mode == PlanMode::Destroy {
        BTreeSet::new()
    } else {
        configured
    };
    // A whole walk replaces the outputs. A failed or targeted one records the outputs it
    // evaluated (their dependencies all applied) and keeps the others' old values, as
    // Terraform does.
    let whole =
        outcome.ok() && !diags.has_errors() && opts.targets.is_empty() && opts.excludes.is_empty();
    if !opts.excludes.is_empty() {
        diags.push(super::exclude::apply_warning());
    }
    tracing::debug!("finishing events");
    let finishing = journal.with_snapshot(|s| {
        let outs = if whole || plan.mode == PlanMode::Destroy {
            outputs.clone()
        } else {
            let mut outs = state_outputs(s);
            outs.extend(outputs.clone());
            outs
        };
        finishing_events(s, &outs, &configured, &plan.dropped_data)
    });
    for e in finishing {
        if let Err(e) = journal.append(e) {
            diags.push(e);
        }
    }
    if let Err(e) = journal.commit() {
        diags.push(e);
    }
    let summary = *phase.steps.rec.summary.lock().expect("summary");
    // The changes back into the plan, in their order (the walk's tasks have all returned).
    drop(ctx);
    plan.changes = match Arc::try_unwrap(phase) {
        Ok(phase) => phase.steps.changes,
        Err(phase) => phase.steps.changes.clone(),
    };
    (summary, outputs)
}

/// What the apply's steps execute with (`apply::steps::Executor`): the plan's changes, moved
/// (not copied) out of the plan for the walk, and the index of current objects' changes by
/// address.
fn executor(
    plan: &mut Plan,
    journal: &Arc<Journal>,
    run: u64,
    destroy: BTreeMap<(ResourceInstanceAddr, Option<String>), DestroyInfo>,
    deposed_keys: BTreeMap<ResourceInstanceAddr, String>,
) -> Executor {
    let changes = std::mem::take(&mut plan.changes);
    // The changes of current objects, by address (a deposed object's delete is a `Destroy`
    // node of its own, see `add_destroys`); a stable sort keeps the plan's order of two
    // changes of one address, and `Executor::change` takes the later, as a map would. A plan
    // made here is sorted by address already.
    let mut by_addr: Vec<usize> = (0..changes.len())
        .filter(|&i| changes[i].deposed.is_none())
        .collect();
    if !by_addr.is_sorted_by(|&a, &b| changes[a].addr <= changes[b].addr) {
        by_addr.sort_by(|&a, &b| changes[a].addr.cmp(&changes[b].addr));
    }
    Executor {
        rec: Recorder::new(journal.clone()),
        run,
        changes,
        by_addr,
        data_reads: plan
            .data_reads
            .iter()
            .map(|d| (d.addr.clone(), d.clone()))
            .collect(),
        destroy,
        deposed_keys,
    }
}

/// The one error of an apply the user stopped, as Terraform reports an interrupt: that the
/// run was interrupted, what finished before, what was running and how it ended, and how many
/// steps never started (no error of their own: they did nothing).
fn interrupted(graph: &TermGraph, outcome: &WalkOutcome, mut i: Interruption) -> Diagnostic {
    // Never started: operations that waited for their turn, and resources (and destroys) the
    // walk did not reach, because of the stop or because something they depend on did not
    // finish.
    let mut never: BTreeSet<String> = i.never_started.drain(..).collect();
    never.extend(
        outcome
            .not_run
            .iter()
            .chain(&outcome.skipped)
            .filter(|id| {
                matches!(
                    graph.node(**id),
                    Node::Resource { .. } | Node::Destroy { .. } | Node::Orphan { .. }
                )
            })
            .map(|id| graph.node(*id).to_string()),
    );
    let listed = |items: Vec<String>, n: usize| {
        let mut shown: Vec<String> = items.into_iter().take(LISTED).collect();
        if n > LISTED {
            shown.push(format!("and {} more", n - LISTED));
        }
        shown.join(", ")
    };
    let list = |items: Vec<String>| {
        let n = items.len();
        listed(items, n)
    };
    let mut parts = vec![
        "The run was interrupted: no new step started, and the providers were told to stop."
            .to_string(),
    ];
    parts.push(if i.finished.is_empty() {
        "Finished before the interrupt: nothing.".to_string()
    } else {
        format!(
            "Finished before the interrupt: {}.",
            listed(std::mem::take(&mut i.finished), i.finished_total)
        )
    });
    parts.push(if i.running.is_empty() {
        "Running when interrupted: nothing.".to_string()
    } else {
        format!(
            "Running when interrupted, and how it ended: {}.",
            list(std::mem::take(&mut i.running))
        )
    });
    parts.push(match never.len() {
        0 => "Every step had started.".to_string(),
        n => format!(
            "Never started: {n} step{} ({}).",
            if n == 1 { "" } else { "s" },
            list(never.into_iter().collect())
        ),
    });
    parts.push(
        "Every step that started is recorded with its outcome. Run apply again to finish.".into(),
    );
    Diagnostic::error("Apply interrupted", parts.join("\n"))
}

pub(super) fn state_outputs(s: &Snapshot) -> BTreeMap<String, (Value, bool)> {
    s.outputs
        .iter()
        .map(|(k, o)| (k.clone(), (Value::from_stored(&o.value), o.sensitive)))
        .collect()
}

/// Builds the events that finish an apply: outputs, dropped data, providers no longer used.
fn finishing_events(
    snapshot: &Snapshot,
    outputs: &BTreeMap<String, (Value, bool)>,
    configured_providers: &BTreeSet<ProviderAddr>,
    dropped_data: &[ResourceInstanceAddr],
) -> Vec<EventBody> {
    let mut events = Vec::new();
    for addr in dropped_data {
        if snapshot.data.contains_key(addr) {
            events.push(EventBody::DataDropped { addr: addr.clone() });
        }
    }
    // Data sources dropped by this run no longer keep their provider instance.
    let used: BTreeSet<&ProviderAddr> = snapshot
        .resources
        .values()
        .flat_map(|i| i.current.iter().chain(i.deposed.values()))
        .map(|o| &o.provider.addr)
        .chain(
            snapshot
                .data
                .iter()
                .filter(|(a, _)| !dropped_data.contains(a))
                .map(|(_, d)| &d.provider.addr),
        )
        .collect();
    for (addr, p) in &snapshot.providers {
        if !used.contains(addr) && !configured_providers.contains(addr) {
            events.push(EventBody::ProviderRemoved {
                addr: addr.clone(),
                id: p.id.clone(),
            });
        }
    }
    let mut out = BTreeMap::new();
    for (name, (v, sensitive)) in outputs {
        if let Ok(stored) = v.to_stored() {
            out.insert(
                name.clone(),
                OutputValue {
                    value: stored,
                    sensitive: *sensitive,
                },
            );
        }
    }
    if out != snapshot.outputs {
        events.push(EventBody::OutputsSet { outputs: out });
    }
    events
}
