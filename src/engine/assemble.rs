//! Plan assembly: how a plan is made of the prior state — `moved` and `removed` blocks
//! first, then refresh, then the plan walk (or, for `destroy`, the state itself) — and the
//! plan's closing rules, each in one place: which provider instances a plan deletes
//! ([`deleted_providers`]) and whether it is applyable ([`applyable`]).

use super::core::{run as walk_phase, Ctx};
use super::graph::{add_orphans, build};
use super::observer::Observer;
use super::plan_phase::{PlanOut, PlanPhase};
use super::provider_inputs::provider_inputs;
use super::providers::Registry;
use super::refresh::refresh as refresh_pass;
use super::request::Options;
use super::sabotage::Sabotage;
use super::source::{classify_state, config_hash, new_ctx, term_graph, Loaded};
use super::timing::{timed, timed_async};
use super::walk::Limits;
use crate::addr::{ModulePath, ProviderAddr, ResourceInstanceAddr, Target};
use crate::config::{Config, ResourceKey};
use crate::diag::{Diagnostic, Diagnostics};
use crate::plan::{Action, Change, OutputChange, Plan, PlanMode, PlanRequest, ProviderChange};
use crate::value::Value;
use crate::value::ValueMap;
use cairn_state::{EventBody, ResourceObject, Snapshot};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// A plan, with the block shapes of its resource types for the plan text.
pub(super) async fn make_plan(
    loaded: &Loaded,
    opts: &Options,
    mode: PlanMode,
    prior: &Arc<Snapshot>,
    observer: &Arc<dyn Observer>,
    diags: &mut Diagnostics,
) -> Option<Plan> {
    make_plan_keeping(loaded, opts, mode, prior, observer, diags, &mut None).await
}

/// [`make_plan`], keeping the plan walk's context in `walked` (its evaluated values: what
/// `cairn test`'s assertions read).
pub(super) async fn make_plan_keeping(
    loaded: &Loaded,
    opts: &Options,
    mode: PlanMode,
    prior: &Arc<Snapshot>,
    observer: &Arc<dyn Observer>,
    diags: &mut Diagnostics,
    walked: &mut Option<Arc<Ctx>>,
) -> Option<Plan> {
    let mut plan = assemble_plan(loaded, opts, mode, prior, observer, diags, walked).await?;
    plan.shapes = block_shapes(&loaded.registry, &plan);
    Some(plan)
}

/// The nested-block shapes of the resource types a plan shows (changes, drift, data reads),
/// from their providers' schemas.
fn block_shapes(registry: &Registry, plan: &Plan) -> BTreeMap<String, crate::plan::BlockShape> {
    let types: BTreeSet<(crate::addr::Mode, &str)> = plan
        .changes
        .iter()
        .map(|c| &c.addr)
        .chain(plan.drift.iter().map(|d| &d.addr))
        .chain(plan.data_reads.iter().map(|d| &d.addr))
        .map(|a| (a.resource.mode, a.resource.type_.as_str()))
        .collect();
    crate::plan::BlockShape::of_types(types, |mode, type_| {
        let package = registry.package(crate::addr::package_of(type_))?;
        package
            .schema()
            .block(mode, type_)
            .map(crate::plan::BlockShape::of)
    })
}

/// The plan walk over an opened state. The state is shared, not copied: refresh copies it
/// only when it finds a change, and `-refresh=false` plans against it as it is.
async fn assemble_plan(
    loaded: &Loaded,
    opts: &Options,
    mode: PlanMode,
    prior: &Arc<Snapshot>,
    observer: &Arc<dyn Observer>,
    diags: &mut Diagnostics,
    walked: &mut Option<Arc<Ctx>>,
) -> Option<Plan> {
    let limits = Limits {
        calls: Arc::new(tokio::sync::Semaphore::new(opts.parallelism.max(1))),
        stop: opts.stop.clone(),
        sabotage: opts.sabotage,
    };
    // `moved` and `removed` blocks first: the plan is made against the moved state, without
    // the objects that are forgotten.
    let mut refactor = timed("moved blocks", || {
        super::refactor::resolve(&loaded.config, prior)
    });
    if mode != PlanMode::Normal {
        // As Terraform: a destroy destroys what `removed` blocks would forget, and a
        // read-only plan forgets nothing (both still move).
        refactor.forget.clear();
    }
    diags.extend(refactor.diags.clone());
    if refactor.diags.has_errors() {
        return None;
    }
    let mut forgotten = Vec::new();
    let prior = if refactor.moves.is_empty() && refactor.forget.is_empty() {
        prior.clone()
    } else {
        Arc::new(moved_state(
            &loaded.registry,
            prior,
            &refactor,
            &mut forgotten,
        ))
    };
    if !opts.excludes.is_empty() {
        diags.push(super::exclude::plan_warning());
    }
    let (refreshed, drift, refreshed_meta) = if opts.refresh {
        let inputs = provider_inputs(loaded, opts, &prior, observer, diags).await;
        let r = refresh_pass(&prior, &loaded.registry, &inputs.args, &limits, observer).await;
        inputs.close().await;
        diags.extend(r.diags);
        (r.snapshot, r.drift, r.metas)
    } else {
        (prior.clone(), Vec::new(), Vec::new())
    };
    let mut plan = empty_plan(loaded, opts, mode, &prior, drift, refreshed_meta, &refactor);
    if mode == PlanMode::Destroy {
        finish_destroy_plan(loaded, opts, &refreshed, forgotten, &mut plan, diags);
        return Some(plan);
    }
    let (ctx, mut out) = plan_walk(loaded, opts, mode, &prior, &refreshed, observer, diags).await?;
    *walked = Some(ctx.clone());
    plan.check_findings = std::mem::take(&mut *ctx.check_findings.lock().expect("checks"));
    plan.changes = out.take_changes();
    plan.changes.extend(forgotten);
    if mode == PlanMode::Normal && opts.import.is_none() {
        plan.changes
            .extend(deposed_deletes(&refreshed, &opts.targets, &opts.excludes));
    }
    if mode == PlanMode::ReadOnly {
        // A read-only plan proposes no changes, but shows the objects it moves, as they are.
        show_moved_objects(&loaded.registry, &refreshed, &mut plan);
    }
    // Sorted already unless forgotten objects or deposed deletes were added: a stable sort
    // of sorted changes still takes a buffer of half of them (20 MB at 100,000; issue 31).
    let by_place = |a: &Change, b: &Change| (&a.addr, &a.deposed).cmp(&(&b.addr, &b.deposed));
    if !plan.changes.is_sorted_by(|a, b| by_place(a, b).is_le()) {
        plan.changes.sort_by(by_place);
    }
    // A move from an instance the configuration still declares: the plan was made from the
    // wrong prior state, so it is not shown (as in Terraform).
    let mut move_diags = Diagnostics::new();
    super::refactor::check_instance_sources(&loaded.config, &refactor, &plan, &mut move_diags);
    if move_diags.has_errors() {
        diags.extend(move_diags);
        return None;
    }
    plan.data_reads = out.data_reads.into_values().collect();
    plan.dropped_data = out.dropped_data.into_iter().collect();
    plan.warnings.extend(out.warnings);
    // The dependency graph as it is now, kept with the plan (saved plan files, the run's
    // `RunPlanned`), so `cairn ui` draws it as planned after the files change.
    plan.graph = Some(timed("plan graph", || ctx.graph.resource_graph()));
    // Provider instances: those the walk planned, then those in state nothing uses any more.
    let mut provider_changes: BTreeMap<ProviderAddr, ProviderChange> = out.provider_changes;
    if mode == PlanMode::Normal {
        for p in deleted_providers(&plan, &refreshed, Some(&loaded.config)) {
            // An instance of a block with `for_each` that the walk configured stays (its
            // element is still in the collection).
            if p.addr.key.is_some() && provider_changes.contains_key(&p.addr) {
                continue;
            }
            provider_changes.insert(p.addr.clone(), p);
        }
    }
    plan.provider_changes = provider_changes.into_values().collect();
    if mode == PlanMode::Normal {
        super::plan_phase::replacement_order(&mut plan, &ctx.graph, &refreshed);
    }
    plan.outputs = plan_outputs(opts, mode, &refreshed, &out.outputs);
    plan.errored = diags.has_errors();
    // A resource that moves to an equal provider instance, or an unchanged one whose
    // dependencies changed: recorded by apply.
    let recorded_again = |c: &Change| {
        refreshed.current(&c.addr).is_some_and(|o| {
            o.provider.addr != *c.provider
                || (c.action == Action::NoOp
                    && !super::rules::same_deps(
                        &super::rules::instance_deps(&ctx, &c.addr),
                        &o.deps,
                    ))
        })
    };
    plan.applyable = applyable(&plan, &recorded_again);
    Some(plan)
}

/// The prior state with the moves of `moved` blocks made and the objects `removed` blocks
/// forget gone (in memory); each forgotten object's `Forget` change goes to `forgotten`.
fn moved_state(
    registry: &Registry,
    prior: &Snapshot,
    refactor: &super::refactor::Refactor,
    forgotten: &mut Vec<Change>,
) -> Snapshot {
    let mut s = prior.clone();
    for (from, to) in &refactor.moves {
        super::refactor::apply_event(
            &mut s,
            EventBody::ResourceMoved {
                from: from.clone(),
                to: to.clone(),
            },
        );
    }
    for addr in &refactor.forget {
        if let Some(obj) = s.current(addr) {
            forgotten.push(Change {
                addr: addr.clone(),
                provider: crate::plan::shared_provider(&obj.provider.addr),
                action: Action::Forget,
                before: Some(Value::from_stored(&obj.attrs)),
                after: None,
                replace_paths: Vec::new(),
                reason: Some(Box::new(crate::plan::Reason::DeleteBecauseNoResourceConfig)),
                sensitive_attrs: sensitive_attrs(registry, addr, &obj.provider.addr),
                diff_unavailable: false,
                importing: None,
                deposed: None,
            });
        }
        super::refactor::apply_event(&mut s, EventBody::ResourceForgotten { addr: addr.clone() });
    }
    s
}

/// A plan of no changes yet: the request it answers, what refresh found, the moves.
fn empty_plan(
    loaded: &Loaded,
    opts: &Options,
    mode: PlanMode,
    prior: &Snapshot,
    drift: Vec<crate::plan::Drift>,
    refreshed_meta: Vec<(ResourceInstanceAddr, cairn_state::ObjectMeta)>,
    refactor: &super::refactor::Refactor,
) -> Plan {
    // Ephemeral variables are never written down: applying the plan asks for them again.
    let variables: ValueMap = loaded
        .inputs
        .iter()
        .filter(|(k, _)| {
            !loaded
                .config
                .root
                .variables
                .get(*k)
                .is_some_and(|v| v.ephemeral)
        })
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let mut plan = Plan {
        mode,
        base_seq: prior.head,
        workspace: opts.workspace.clone().filter(|w| w != "default"),
        check_findings: Vec::new(),
        config_hash: config_hash(&loaded.files_hash, &variables),
        changes: Vec::new(),
        provider_changes: Vec::new(),
        outputs: Vec::new(),
        drift,
        refreshed_meta,
        data_reads: Vec::new(),
        dropped_data: Vec::new(),
        variables: variables.clone(),
        request: PlanRequest {
            targets: opts.targets.clone(),
            excludes: opts.excludes.clone(),
            replace: opts.replace.clone(),
            refresh: opts.refresh,
        },
        warnings: Vec::new(),
        applyable: false,
        errored: false,
        graph: None,
        moves: refactor.moves.clone(),
        shapes: BTreeMap::new(),
        sources: loaded.config.package_sources(),
    };
    plan.warnings.extend(refactor_warnings(refactor));
    plan
}

/// A destroy plan: every object in the refreshed state (in the `-target` scope) deleted; no
/// walk of the configuration.
fn finish_destroy_plan(
    loaded: &Loaded,
    opts: &Options,
    refreshed: &Snapshot,
    forgotten: Vec<Change>,
    plan: &mut Plan,
    diags: &mut Diagnostics,
) {
    destroy_plan(refreshed, plan, &opts.targets, &opts.excludes);
    plan.changes.extend(forgotten);
    if opts.sabotage == Some(Sabotage::DestroySkipsChildModules) {
        plan.changes.retain(|c| c.addr.resource.module.is_root());
    }
    diags.extend(prevent_destroy_violations(&loaded.config, plan));
    plan.errored = diags.has_errors();
    plan.applyable = applyable(plan, &|_| false);
    // The graph the plan was made under, for `cairn ui` (a destroy walks no term graph).
    plan.graph = Some(timed("plan graph", || {
        build(&loaded.config).0.resource_graph()
    }));
}

/// The plan walk: the term graph with the state's orphans, walked by the plan phase. Returns
/// the walk's context and what the phase collected; `None` when an import block has no
/// resource (the plan stops before it starts, as in Terraform).
async fn plan_walk(
    loaded: &Loaded,
    opts: &Options,
    mode: PlanMode,
    prior: &Snapshot,
    refreshed: &Arc<Snapshot>,
    observer: &Arc<dyn Observer>,
    diags: &mut Diagnostics,
) -> Option<(Arc<Ctx>, PlanOut)> {
    let (mut graph, graph_diags) = timed("term graph", || term_graph(&loaded.config));
    diags.extend(graph_diags);
    let (_, orphans) = timed("classify state", || {
        classify_state(&loaded.config, refreshed)
    });
    add_orphans(&mut graph, orphans);
    if mode == PlanMode::Normal {
        // As Terraform: an import block without its resource stops the plan before it starts.
        let errors = import_config_errors(&loaded.config);
        if errors.has_errors() {
            diags.extend(errors);
            return None;
        }
    }
    let ctx = new_ctx(loaded, graph, refreshed, opts, observer.clone());
    let replace: BTreeSet<ResourceInstanceAddr> = opts.replace.iter().cloned().collect();
    let mut phase = PlanPhase::new(mode, refreshed.clone(), replace);
    // Room for a change per resource (one instance each, the usual case) or per object in
    // state, whichever is more: a vector grown by doubling ends up to twice the size of its
    // changes (at 100,000 resources, 51 MB for 39; issue 31).
    let resources: usize = loaded
        .config
        .modules()
        .iter()
        .map(|m| m.resources.len())
        .sum();
    phase
        .out
        .get_mut()
        .expect("plan out lock")
        .changes
        .reserve(resources.max(refreshed.resources.len() + refreshed.data.len()));
    phase.imports.cli = opts.import.clone();
    phase.imports.generated = loaded
        .config
        .root
        .resources
        .iter()
        .filter(|(_, r)| r.generated)
        .map(|(k, _)| (ModulePath::root(), k.clone()))
        .collect();
    phase.never_applied =
        prior.resources.is_empty() && prior.data.is_empty() && prior.outputs.is_empty();
    let phase = Arc::new(phase);
    // Nodes that never ran (on a cycle, or after a failure) were reported by the walk.
    timed_async("plan walk", walk_phase(ctx.clone(), phase.clone())).await;
    phase.ephemerals.close_all(&ctx).await;
    diags.extend(in_address_order(std::mem::take(
        &mut *ctx.diags.lock().expect("diags"),
    )));
    if mode == PlanMode::Normal {
        diags.extend(phase.imports.unclaimed(&loaded.config));
    }
    let out = std::mem::take(&mut *phase.out.lock().expect("plan out"));
    Some((ctx, out))
}

/// A read-only plan's no-op changes for the objects that moved and that it planned nothing
/// for: shown as they are.
fn show_moved_objects(registry: &Registry, refreshed: &Snapshot, plan: &mut Plan) {
    let planned: BTreeSet<ResourceInstanceAddr> =
        plan.changes.iter().map(|c| c.addr.clone()).collect();
    let ends: BTreeSet<ResourceInstanceAddr> =
        plan.moves.iter().map(|(_, to)| to.clone()).collect();
    for addr in &ends {
        if let (false, Some(obj)) = (planned.contains(addr), refreshed.current(addr)) {
            let v = Value::from_stored(&obj.attrs);
            plan.changes.push(Change {
                addr: addr.clone(),
                provider: crate::plan::shared_provider(&obj.provider.addr),
                action: Action::NoOp,
                before: Some(v.clone()),
                after: Some(v),
                replace_paths: Vec::new(),
                reason: None,
                sensitive_attrs: sensitive_attrs(registry, addr, &obj.provider.addr),
                diff_unavailable: false,
                importing: None,
                deposed: None,
            });
        }
    }
}

/// The plan's output changes: against the state's outputs; a read-only plan records none it
/// cannot know without applying changes, and a targeted plan deletes none.
fn plan_outputs(
    opts: &Options,
    mode: PlanMode,
    refreshed: &Snapshot,
    outputs: &BTreeMap<String, (Value, bool)>,
) -> Vec<crate::plan::OutputChange> {
    let mut changes = output_changes(refreshed, outputs);
    if mode == PlanMode::ReadOnly {
        // Read-only records no output it cannot know without applying changes.
        for o in &mut changes {
            if o.action == Action::Create && !o.after.as_ref().is_some_and(Value::is_wholly_known) {
                o.action = Action::NoOp;
            }
        }
    }
    if !opts.targets.is_empty() || !opts.excludes.is_empty() {
        // A targeted plan evaluates only the outputs in its scope; the others stay as they are.
        changes.retain(|o| o.action != Action::Delete);
    }
    changes
}

/// The attributes the schema of an object's resource type marks sensitive (masked in the
/// plan text), for changes made without the plan walk; none when the provider is not there.
pub(super) fn sensitive_attrs(
    registry: &Registry,
    addr: &ResourceInstanceAddr,
    provider: &ProviderAddr,
) -> Vec<String> {
    registry
        .package(&provider.package)
        .and_then(|p| {
            p.schema()
                .block(addr.resource.mode, &addr.resource.type_)
                .map(|b| {
                    b.attributes
                        .iter()
                        .filter(|(_, a)| a.sensitive)
                        .map(|(k, _)| k.clone())
                        .collect()
                })
        })
        .unwrap_or_default()
}

/// The warnings Terraform gives about `moved` blocks that could not move an object, and
/// about objects a `removed` block forgets.
pub(super) fn refactor_warnings(r: &super::refactor::Refactor) -> Vec<String> {
    let mut out = Vec::new();
    if !r.blocked.is_empty() {
        let list: String = r
            .blocked
            .iter()
            .map(|(a, b)| format!("\n  - {a} could not move to {b}"))
            .collect();
        out.push(format!("Unresolved resource instance address changes\nCairn tried to adjust resource instance addresses in the prior state based on change information recorded in the configuration, but some adjustments did not succeed due to existing objects already at the intended addresses:{list}\n\nCairn has planned to destroy these objects. If Cairn's proposed changes aren't appropriate, you must first resolve the conflicts using the \"cairn state\" subcommands and then create a new plan."));
    }
    if !r.forget.is_empty() {
        let list: String = r.forget.iter().map(|a| format!("\n - {a}")).collect();
        out.push(format!("Some objects will no longer be managed by Cairn\nIf you apply this plan, Cairn will discard its tracking information for the following objects, but it will not delete them:{list}\n\nAfter applying this plan, Cairn will no longer manage these objects. You will need to import them into Cairn to manage them again."));
    }
    out
}

/// Import blocks whose target resource has no block in the configuration, or whose
/// `provider` differs from the resource's.
pub(super) fn import_config_errors(config: &Config) -> Diagnostics {
    let mut diags = Diagnostics::new();
    for b in &config.root.imports {
        let res = config
            .module(&b.module)
            .and_then(|m| m.resources.get(&b.key));
        let Some(res) = res else {
            let addr = b.key.addr(b.module.clone()).to_string();
            diags.push(super::imports::no_config(&addr, b.to_span));
            continue;
        };
        if let Some(p) = &b.provider {
            let same = res
                .provider
                .as_ref()
                .is_some_and(|r| r.name == p.name && r.alias == p.alias)
                || (res.provider.is_none() && p.alias.is_none() && p.name == res.provider_name());
            if !same {
                diags.push(
                    Diagnostic::error(
                        "Invalid import provider argument",
                        "The provider argument in the target resource block must match the import block.",
                    )
                    .with_span(Some(p.span)),
                );
            }
        }
    }
    diags
}

pub(super) fn output_changes(
    prior: &Snapshot,
    outputs: &BTreeMap<String, (Value, bool)>,
) -> Vec<OutputChange> {
    let mut out = Vec::new();
    for (name, (v, sensitive)) in outputs {
        let before = prior.outputs.get(name).map(|o| {
            let v = Value::from_stored(&o.value);
            if o.sensitive {
                v.sensitive()
            } else {
                v
            }
        });
        let action = match &before {
            None => Action::Create,
            Some(b) if super::rules::equal_ignoring_marks(b, v) && v.is_wholly_known() => {
                Action::NoOp
            }
            Some(_) => Action::Update,
        };
        out.push(OutputChange {
            name: name.clone(),
            action,
            before,
            after: Some(v.clone()),
            sensitive: *sensitive,
        });
    }
    for (name, o) in &prior.outputs {
        if !outputs.contains_key(name) {
            out.push(OutputChange {
                name: name.clone(),
                action: Action::Delete,
                before: Some(Value::from_stored(&o.value)),
                after: None,
                sensitive: o.sensitive,
            });
        }
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

/// Diagnostics of a parallel walk arrive in completion order; reported by address (stable,
/// so unaddressed ones keep their order) they read the same at any `-parallelism`.
pub(super) fn in_address_order(diags: Diagnostics) -> Diagnostics {
    let mut v: Vec<Diagnostic> = diags.into_iter().collect();
    v.sort_by(|a, b| a.address.cmp(&b.address));
    v.into_iter().collect()
}

/// `prevent_destroy` holds for `destroy` too, while the configuration still says so.
pub(super) fn prevent_destroy_violations(config: &Config, plan: &Plan) -> Diagnostics {
    let mut diags = Diagnostics::new();
    // A deposed object is already replaced: its delete finishes that replacement.
    for c in plan
        .changes
        .iter()
        .filter(|c| c.action == Action::Delete && c.deposed.is_none())
    {
        let key = ResourceKey {
            mode: c.addr.resource.mode,
            type_: c.addr.resource.type_.clone(),
            name: c.addr.resource.name.clone(),
        };
        let res = config
            .module(&c.addr.resource.module.without_keys())
            .and_then(|m| m.resources.get(&key));
        if let Some(res) = res.filter(|r| r.lifecycle.prevent_destroy) {
            diags.extend(super::plan_phase::prevent_destroy_error(&c.addr, res.span));
        }
    }
    diags
}

/// Deletes of the deposed objects in `state` — left over from a create-before-destroy whose
/// create failed part-way, or whose delete failed — planned by every plan that may change
/// something, as Terraform does (only the targeted instances' when targeted).
pub(super) fn deposed_deletes(
    state: &Snapshot,
    targets: &[Target],
    excludes: &[Target],
) -> Vec<Change> {
    let mut out = Vec::new();
    let in_scope = |a: &ResourceInstanceAddr| {
        targeted(targets, a) && super::exclude::not_excluded(excludes, a)
    };
    for (addr, inst) in state.resources.iter().filter(|(a, _)| in_scope(a)) {
        for (key, obj) in &inst.deposed {
            out.push(delete_of(addr, obj, Some(key.clone())));
        }
    }
    out
}

/// Whether `-target` (none: everything) reaches `addr`.
fn targeted(targets: &[Target], addr: &ResourceInstanceAddr) -> bool {
    targets.is_empty() || targets.iter().any(|t| t.contains(addr))
}

/// The plain delete of an object in state (current, or deposed under `deposed`).
fn delete_of(addr: &ResourceInstanceAddr, obj: &ResourceObject, deposed: Option<String>) -> Change {
    Change {
        addr: addr.clone(),
        provider: crate::plan::shared_provider(&obj.provider.addr),
        action: Action::Delete,
        before: Some(Value::from_stored(&obj.attrs)),
        after: None,
        replace_paths: Vec::new(),
        reason: None,
        sensitive_attrs: Vec::new(),
        diff_unavailable: false,
        importing: None,
        deposed,
    }
}

pub(super) fn destroy_plan(
    state: &Snapshot,
    plan: &mut Plan,
    targets: &[Target],
    excludes: &[Target],
) {
    // `-exclude`: what an exclusion names stays, and so does everything it depends on.
    let keeps = super::exclude::destroy_keeps(state, excludes);
    plan.changes
        .extend(deposed_deletes(state, targets, excludes));
    for (addr, inst) in state
        .resources
        .iter()
        .filter(|(a, _)| targeted(targets, a) && !keeps.contains(*a))
    {
        if let Some(obj) = &inst.current {
            plan.changes.push(delete_of(addr, obj, None));
        }
    }
    if targets.is_empty() && excludes.is_empty() {
        plan.dropped_data = state.data.keys().cloned().collect();
        plan.provider_changes = deleted_providers(plan, state, None);
        for (name, o) in &state.outputs {
            plan.outputs.push(OutputChange {
                name: name.clone(),
                action: Action::Delete,
                before: Some(Value::from_stored(&o.value)),
                after: None,
                sensitive: o.sensitive,
            });
        }
    }
}

/// A plan holding only what refresh found (`cairn refresh`), so it renders as the drift
/// section.
pub(crate) fn drift_plan(drift: Vec<crate::plan::Drift>) -> Plan {
    Plan {
        mode: PlanMode::RefreshOnly,
        base_seq: 0,
        workspace: None,
        check_findings: Vec::new(),
        config_hash: String::new(),
        changes: Vec::new(),
        provider_changes: Vec::new(),
        outputs: Vec::new(),
        applyable: !drift.is_empty(),
        drift,
        refreshed_meta: Vec::new(),
        data_reads: Vec::new(),
        dropped_data: Vec::new(),
        variables: ValueMap::new(),
        request: Default::default(),
        warnings: Vec::new(),
        errored: false,
        graph: None,
        moves: Vec::new(),
        shapes: BTreeMap::new(),
        sources: BTreeMap::new(),
    }
}

/// The provider instances in `state` a plan deletes. A destroy (`config` is `None`) deletes
/// every one, unless it is targeted. A normal plan deletes those nothing uses any more that
/// the configuration does not declare: a synthesized default goes when nothing uses it, a
/// declared one when its block goes. An object in state that the plan does not delete keeps
/// its provider, even when planning it failed. Other modes delete none.
pub(super) fn deleted_providers(
    plan: &Plan,
    state: &Snapshot,
    config: Option<&Config>,
) -> Vec<ProviderChange> {
    let delete = |addr: &ProviderAddr, inst: &cairn_state::ProviderInstance| ProviderChange {
        addr: addr.clone(),
        action: Action::Delete,
        before: Some(Value::from_stored(&inst.config)),
        after: None,
        is_default: inst.is_default,
    };
    match (plan.mode, config) {
        (PlanMode::Destroy, _)
            if plan.request.targets.is_empty() && plan.request.excludes.is_empty() =>
        {
            state.providers.iter().map(|(a, i)| delete(a, i)).collect()
        }
        (PlanMode::Normal, Some(config)) => {
            let deleted: BTreeSet<&ResourceInstanceAddr> = plan
                .changes
                .iter()
                .filter(|c| c.action == Action::Delete && c.deposed.is_none())
                .map(|c| &c.addr)
                .collect();
            // Inserted one by one (not collected: that gathers every resource's reference
            // in a vector to sort, though nearly all name the same few providers).
            let mut still_used: BTreeSet<&ProviderAddr> = BTreeSet::new();
            plan.changes
                .iter()
                .filter(|c| c.action != Action::Delete)
                .map(|c| &*c.provider)
                .chain(plan.data_reads.iter().map(|d| &d.provider))
                .chain(state.resources.iter().filter_map(|(a, i)| {
                    i.current
                        .as_ref()
                        .filter(|_| !deleted.contains(a))
                        .map(|o| &o.provider.addr)
                }))
                .for_each(|p| {
                    still_used.insert(p);
                });
            state
                .providers
                .iter()
                .filter(|(addr, _)| {
                    // An instance of a block with `for_each` is in the configuration when
                    // the walk configured it (its key is still an element), which the
                    // caller keeps.
                    let in_config = addr.key.is_none()
                        && config.module(&addr.module).is_some_and(|m| {
                            m.providers.iter().any(|p| {
                                super::graph::package_of_local(m, &p.name) == addr.package
                                    && p.alias == addr.alias
                            })
                        });
                    !still_used.contains(addr) && !in_config
                })
                .map(|(a, i)| delete(a, i))
                .collect()
        }
        _ => Vec::new(),
    }
}

/// Whether applying `plan` does anything, so that apply records it (and asks first). An
/// errored plan is not applyable. A destroy is when it deletes something; a read-only plan
/// when it moves objects, found drift, changes an output or read a data source anew; a normal
/// plan when it changes something, reads at apply, found drift, read a data source anew or
/// dropped one, or has a change that `recorded_again` says apply records even unchanged (an
/// object that moves to an equal provider instance, or whose dependencies changed).
pub(super) fn applyable(plan: &Plan, recorded_again: &dyn Fn(&Change) -> bool) -> bool {
    if plan.errored {
        return false;
    }
    match plan.mode {
        PlanMode::Destroy => plan.has_changes(),
        PlanMode::ReadOnly => {
            !plan.moves.is_empty()
                || !plan.drift.is_empty()
                || plan.outputs.iter().any(|o| o.action != Action::NoOp)
                || plan
                    .data_reads
                    .iter()
                    .any(|d| d.before.as_ref() != Some(&d.result))
        }
        PlanMode::Normal | PlanMode::RefreshOnly => {
            plan.has_changes()
                || plan.changes.iter().any(|c| c.action == Action::Read)
                || !plan.drift.is_empty()
                // Data sources read during the plan are recorded by apply, as in Terraform.
                || plan.data_reads.iter().any(|d| {
                    !d.before
                        .as_ref()
                        .is_some_and(|b| super::rules::equal_ignoring_marks(b, &d.result))
                })
                || !plan.dropped_data.is_empty()
                || plan.changes.iter().any(recorded_again)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cairn_state::{Event, ObjectMeta, ProviderInstance, ProviderRef, ResourceObject};

    fn plan(mode: PlanMode) -> Plan {
        Plan {
            mode,
            base_seq: 0,
            workspace: None,
            check_findings: Vec::new(),
            config_hash: String::new(),
            changes: Vec::new(),
            provider_changes: Vec::new(),
            outputs: Vec::new(),
            drift: Vec::new(),
            refreshed_meta: Vec::new(),
            data_reads: Vec::new(),
            dropped_data: Vec::new(),
            variables: Default::default(),
            request: PlanRequest::default(),
            warnings: Vec::new(),
            applyable: false,
            errored: false,
            graph: None,
            moves: Vec::new(),
            shapes: BTreeMap::new(),
            sources: BTreeMap::new(),
        }
    }

    fn provider(package: &str, alias: Option<&str>) -> ProviderAddr {
        ProviderAddr {
            module: ModulePath::root(),
            package: package.into(),
            alias: alias.map(String::from),
            key: None,
        }
    }

    fn addr(s: &str) -> ResourceInstanceAddr {
        s.parse().expect("address")
    }

    /// A state with the provider instances `providers` and, under the first, the resources
    /// `resources`.
    fn state(providers: &[ProviderAddr], resources: &[&str]) -> Snapshot {
        let instances: Vec<ProviderInstance> = providers
            .iter()
            .map(|p| ProviderInstance {
                addr: p.clone(),
                id: format!("{}-id", p.package),
                config: cairn_state::StoredValue::Null,
                is_default: p.alias.is_none(),
            })
            .collect();
        let objects = resources
            .iter()
            .map(|r| {
                let object = ResourceObject {
                    attrs: cairn_state::StoredValue::Null,
                    deps: Vec::new(),
                    provider: ProviderRef::new(providers[0].clone(), instances[0].id.clone()),
                    create_token: None,
                    tainted: false,
                    meta: ObjectMeta::default(),
                };
                (addr(r), object)
            })
            .collect();
        let mut s = Snapshot::default();
        s.apply_owned(Event {
            seq: 1,
            version: cairn_state::event::CURRENT_VERSION,
            time_ms: 0,
            run: 0,
            body: EventBody::StateImported {
                source: "test".into(),
                providers: instances,
                resources: objects,
            },
        });
        s
    }

    fn config(text: &str) -> Config {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("main.tf"), text).expect("write main.tf");
        crate::config::load(dir.path()).0.expect("configuration")
    }

    fn change(a: &str, action: Action, provider: &ProviderAddr) -> Change {
        Change {
            addr: addr(a),
            provider: provider.clone().into(),
            action,
            before: None,
            after: None,
            replace_paths: Vec::new(),
            reason: None,
            sensitive_attrs: Vec::new(),
            diff_unavailable: false,
            importing: None,
            deposed: None,
        }
    }

    fn deleted(plan: &Plan, state: &Snapshot, config: Option<&Config>) -> Vec<String> {
        deleted_providers(plan, state, config)
            .into_iter()
            .map(|p| p.addr.to_string())
            .collect()
    }

    #[test]
    fn destroy_deletes_every_provider_unless_targeted() {
        let sim = provider("sim", None);
        let east = provider("sim", Some("east"));
        let s = state(&[sim.clone(), east], &["sim_thing.a"]);
        let mut p = plan(PlanMode::Destroy);
        assert_eq!(deleted(&p, &s, None).len(), 2);
        p.request.targets = vec!["sim_thing.a".parse().expect("target")];
        assert!(deleted(&p, &s, None).is_empty());
    }

    #[test]
    fn a_provider_goes_when_unused_and_undeclared() {
        let sim = provider("sim", None);
        let east = provider("sim", Some("east"));
        let s = state(&[sim.clone(), east.clone()], &["sim_thing.a"]);
        let empty = config("");
        let declared = config("provider \"sim\" {\n  alias = \"east\"\n}\n");
        let mut p = plan(PlanMode::Normal);
        // sim_thing.a stays in state (not deleted): its provider stays, the alias goes.
        assert_eq!(deleted(&p, &s, Some(&empty)), vec![east.to_string()]);
        // A declared provider stays even when nothing uses it.
        assert!(deleted(&p, &s, Some(&declared)).is_empty());
        // Deleting the last object under the default provider deletes it too.
        p.changes.push(change("sim_thing.a", Action::Delete, &sim));
        assert_eq!(
            deleted(&p, &s, Some(&empty)),
            vec![sim.to_string(), east.to_string()]
        );
        // Read-only plans delete no provider.
        assert!(deleted(&plan(PlanMode::ReadOnly), &s, Some(&empty)).is_empty());
    }

    #[test]
    fn applyable_rules() {
        let sim = provider("sim", None);
        let never = |_: &Change| false;
        let mut p = plan(PlanMode::Normal);
        assert!(!applyable(&p, &never));
        p.changes.push(change("sim_thing.a", Action::NoOp, &sim));
        assert!(!applyable(&p, &never));
        // An unchanged object whose record changes (dependencies, provider) is applied.
        assert!(applyable(&p, &|_| true));
        p.changes.push(change("sim_thing.b", Action::Create, &sim));
        assert!(applyable(&p, &never));
        p.errored = true;
        assert!(!applyable(&p, &never));

        let mut d = plan(PlanMode::Destroy);
        assert!(!applyable(&d, &|_| true));
        d.changes.push(change("sim_thing.a", Action::Delete, &sim));
        assert!(applyable(&d, &never));

        // A read-only plan applies what it found, never changes.
        let mut r = plan(PlanMode::ReadOnly);
        r.changes.push(change("sim_thing.b", Action::Create, &sim));
        assert!(!applyable(&r, &|_| true));
        r.moves.push((addr("sim_thing.a"), addr("sim_thing.c")));
        assert!(applyable(&r, &never));
    }
}
