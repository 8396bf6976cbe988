//! OpenTofu's `-exclude=ADDR`: the inverse of `-target`. The objects an exclusion names, and
//! everything that depends on them, are left out of the walk (kept as they are in state);
//! everything else is planned and applied as usual.
//!
//! As OpenTofu does (`TargetingTransformer.removeExcludedNodes`):
//! - a resource (or every resource of a module) an exclusion names is left out whole;
//! - an exclusion of some instances only (`a[1]`, `module.m["k"].a`) leaves that resource in
//!   the walk with those instances skipped, and leaves out everything that depends on the
//!   resource (more than the instance's own dependents, as `-target` over-targets);
//! - everything that depends on a left-out node, transitively, is left out too (resources,
//!   outputs, provider instances and module calls alike), so what stays never reads a value
//!   the walk did not compute.
//!
//! A destroy with exclusions keeps the named objects and everything they depend on (a
//! dependency cannot be deleted under an object that stays), from the dependencies state
//! recorded with each object ([`destroy_keeps`]).
//!
//! [`InstanceScope`] is the one per-resource instance filter both `-target` and `-exclude`
//! hand the walk.

use super::graph::{Node, TermGraph};
use crate::addr::{ResourceInstanceAddr, Target};
use cairn_graph::NodeId;
use cairn_state::Snapshot;
use std::collections::{BTreeMap, BTreeSet};

/// Which instances of one resource a walk plans: those some target covers (`-target`
/// naming instances), or all but those an exclusion covers (`-exclude` naming instances).
#[derive(Clone, Debug)]
pub(crate) enum InstanceScope {
    Only(Vec<Target>),
    Except(Vec<Target>),
}

impl InstanceScope {
    pub(crate) fn covers(&self, a: &ResourceInstanceAddr) -> bool {
        match self {
            InstanceScope::Only(ts) => ts.iter().any(|t| t.contains(a)),
            InstanceScope::Except(ts) => !ts.iter().any(|t| t.contains(a)),
        }
    }
}

/// Whether `t` names the whole of a static resource block (in every module instance), rather
/// than some of its instances.
fn names_whole(t: &Target) -> bool {
    match t {
        Target::Module(m) => m.without_keys() == *m,
        Target::Resource(r) => r.module.without_keys() == r.module,
        Target::Instance(_) => false,
    }
}

/// Whether `t` names (some instances of) the resource `key` of static module `module`.
fn names_resource(
    t: &Target,
    module: &crate::addr::ModulePath,
    key: &crate::config::ResourceKey,
) -> bool {
    let same = |m: &crate::addr::ModulePath, r: &crate::addr::ResourceAddr| {
        m.without_keys() == *module
            && r.type_ == key.type_
            && r.name == key.name
            && r.mode == key.mode
    };
    match t {
        Target::Instance(i) => same(&i.resource.module, &i.resource),
        Target::Resource(r) => same(&r.module, r),
        Target::Module(m) => module.starts_with(&m.without_keys()),
    }
}

/// The nodes a walk with `excludes` visits, and the resources whose instances it narrows
/// (see the module's documentation). `None`: no exclusion, every node.
pub(super) fn excluded(
    g: &TermGraph,
    excludes: &[Target],
) -> (Option<BTreeSet<NodeId>>, BTreeMap<NodeId, InstanceScope>) {
    if excludes.is_empty() {
        return (None, BTreeMap::new());
    }
    let mut out: BTreeSet<NodeId> = BTreeSet::new();
    let mut partial: BTreeMap<NodeId, InstanceScope> = BTreeMap::new();
    let mut hit: Vec<NodeId> = Vec::new();
    for (id, node) in g.dag.nodes() {
        match node {
            Node::Resource { module, key } => {
                let hits: Vec<Target> = excludes
                    .iter()
                    .filter(|t| names_resource(t, module, key))
                    .cloned()
                    .collect();
                if hits.is_empty() {
                    continue;
                }
                hit.push(id);
                if hits.iter().any(names_whole) {
                    out.insert(id);
                } else {
                    partial.insert(id, InstanceScope::Except(hits));
                }
            }
            Node::Call { module, name } => {
                let call = module.child(name, None);
                if excludes.iter().any(|t| {
                    matches!(t, Target::Module(m) if m.without_keys() == *m && call.starts_with(m))
                }) {
                    hit.push(id);
                    out.insert(id);
                }
            }
            Node::Orphan { addr } | Node::Destroy { addr, .. }
                if excludes.iter().any(|t| t.contains(addr)) =>
            {
                hit.push(id);
                out.insert(id);
            }
            _ => {}
        }
    }
    for id in hit {
        out.extend(g.dag.transitive_dependents(id));
    }
    // A resource left out whole needs no instance filter.
    partial.retain(|id, _| !out.contains(id));
    let keep = g.dag.ids().filter(|id| !out.contains(id)).collect();
    (Some(keep), partial)
}

/// Whether a plan with `excludes` reaches the object at `addr` without the graph (deposed
/// objects, a destroy): not when an exclusion covers it.
pub(super) fn not_excluded(excludes: &[Target], addr: &ResourceInstanceAddr) -> bool {
    !excludes.iter().any(|t| t.contains(addr))
}

/// What a destroy with `excludes` keeps: the objects an exclusion covers and everything they
/// depend on, transitively, by the dependencies state recorded with each object.
pub(super) fn destroy_keeps(
    state: &Snapshot,
    excludes: &[Target],
) -> BTreeSet<ResourceInstanceAddr> {
    let mut keep: BTreeSet<ResourceInstanceAddr> = BTreeSet::new();
    let mut todo: Vec<ResourceInstanceAddr> = state
        .resources
        .keys()
        .chain(state.data.keys())
        .filter(|a| !not_excluded(excludes, a))
        .cloned()
        .collect();
    while let Some(a) = todo.pop() {
        if !keep.insert(a.clone()) {
            continue;
        }
        if let Some(inst) = state.resources.get(&a) {
            for obj in inst.current.iter().chain(inst.deposed.values()) {
                todo.extend(obj.deps.iter().filter(|d| !keep.contains(*d)).cloned());
            }
        }
    }
    keep
}

/// The state `refresh -exclude` reads: without the objects an exclusion covers and those that
/// depend on them, transitively, by the dependencies state recorded with each object (the
/// refresh is flat: it walks the state, not the configuration). `None`: no exclusion.
pub(crate) fn refresh_scope(state: &Snapshot, excludes: &[Target]) -> Option<Snapshot> {
    if excludes.is_empty() {
        return None;
    }
    let mut out: BTreeSet<ResourceInstanceAddr> = state
        .resources
        .keys()
        .chain(state.data.keys())
        .filter(|a| !not_excluded(excludes, a))
        .cloned()
        .collect();
    loop {
        let more: Vec<ResourceInstanceAddr> = state
            .resources
            .iter()
            .filter(|(a, inst)| {
                !out.contains(*a)
                    && inst
                        .objects()
                        .any(|o| o.deps.iter().any(|d| out.contains(d)))
            })
            .map(|(a, _)| a.clone())
            .collect();
        if more.is_empty() {
            break;
        }
        out.extend(more);
    }
    let mut scoped = state.clone();
    scoped.resources.retain(|a, _| !out.contains(a));
    scoped.data.retain(|a, _| !out.contains(a));
    Some(scoped)
}

/// OpenTofu's warnings, worded for Cairn: the plan's ("Resource targeting is in effect") and
/// the apply's ("Applied changes may be incomplete").
pub(crate) fn plan_warning() -> crate::diag::Diagnostic {
    crate::diag::Diagnostic::warning(
        "Resource targeting is in effect",
        "You are creating a plan with either the -target option or the -exclude option, which means that the result of this plan may not represent all of the changes requested by the current configuration.\n\nThe -target and -exclude options are not for routine use, and are provided only for exceptional situations such as recovering from errors or mistakes, or when Cairn specifically suggests to use it as part of an error message.",
    )
}

pub(crate) fn apply_warning() -> crate::diag::Diagnostic {
    crate::diag::Diagnostic::warning(
        "Applied changes may be incomplete",
        "The plan was created with the -target or the -exclude option in effect, so some changes requested in the configuration may have been ignored and the output values may not be fully updated. Run the following command to verify that no other changes are pending:\n    cairn plan\n\nNote that the -target and -exclude options are not suitable for routine use, and are provided only for exceptional situations such as recovering from errors or mistakes, or when Cairn specifically suggests to use it as part of an error message.",
    )
}
