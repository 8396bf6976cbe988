//! Which managed resources a data source depends on, and whether one of them has a pending
//! change — the rule that decides whether a data read happens during the plan or is deferred
//! to apply.
//!
//! "Depends on" is: listed in `depends_on` (a module there stands for every managed resource in
//! it); referenced by the configuration directly **or indirectly** through locals, variables,
//! module inputs and outputs; or a dependency of a `depends_on` of an enclosing module call.
//! The search walks the term graph from the data source through non-resource terms, tracking
//! module *instances*, and stops at resources: a managed resource counts when one of its
//! instances (in the module instance reached) has a planned change other than no-op; a data
//! source counts when one of its instances is itself deferred. Provider configurations are not
//! followed: an unknown provider configuration defers by its own rule.

use super::graph::{EdgeKind, Node, TermGraph};
use super::values::Values;
use crate::addr::{Mode, ModulePath, ResourceAddr, ResourceInstanceAddr};
use crate::plan::Action;
use crate::plan::Change;
use cairn_graph::NodeId;
use std::collections::{BTreeSet, VecDeque};

/// A pending dependency found by the search.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Pending {
    pub dependency: ResourceInstanceAddr,
    pub action: Action,
    /// The terms between the data source and the dependency, nearest first.
    pub via: Vec<String>,
}

/// The instances of a static module path reachable from module instance `from`.
pub(crate) fn map_instances(
    values: &Values,
    from: &ModulePath,
    target: &ModulePath,
) -> Vec<ModulePath> {
    let from_static = from.without_keys();
    if &from_static == target {
        return vec![from.clone()];
    }
    if from_static.starts_with(target) {
        return vec![ModulePath(from.0[..target.0.len()].to_vec())];
    }
    let all = values.instances_of(target);
    if target.starts_with(&from_static) {
        return all.into_iter().filter(|m| m.starts_with(from)).collect();
    }
    all
}

/// How a term in a module instance is named in messages: `local.k`,
/// `module.net["a"].var.x`.
pub(crate) fn label(node: &Node, instance: &ModulePath) -> String {
    let prefix = if instance.is_root() {
        String::new()
    } else {
        format!("{instance}.")
    };
    match node {
        Node::Var { name, .. } => format!("{prefix}var.{name}"),
        Node::Local { name, .. } => format!("{prefix}local.{name}"),
        Node::Output { name, .. } => format!("{prefix}output.{name}"),
        Node::Call { name, .. } => format!("{prefix}module.{name}"),
        Node::Resource { key, .. } => key.addr(instance.clone()).to_string(),
        other => other.to_string(),
    }
}

/// Whether the edge `from → to` carries a dependency for the deferral rule.
fn follows(graph: &TermGraph, from: NodeId, to: NodeId) -> bool {
    let kind = graph.edge_kind(from, to);
    match graph.node(from) {
        // From a module call only its own depends_on and its enclosing call count.
        Node::Call { .. } => matches!(kind, Some(EdgeKind::DependsOn | EdgeKind::Expansion)),
        _ => matches!(
            kind,
            Some(
                EdgeKind::Reference
                    | EdgeKind::DependsOn
                    | EdgeKind::ModuleInput
                    | EdgeKind::Expansion
            )
        ),
    }
}

/// The managed changes of a walk with a pending action (not no-op): their indexes in
/// the plan's changes (`PlanOut::changes`), in a table hashed by resource address. Not a map keyed by instance
/// address: a copy of every address planned for a change cost 17 MB at 100,000 creates
/// (issue 31); an index costs 4 bytes.
#[derive(Default)]
pub(crate) struct PendingActions {
    table: hashbrown::HashTable<u32>,
}

fn resource_hash(r: &ResourceAddr) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = rustc_hash::FxHasher::default();
    r.hash(&mut h);
    h.finish()
}

impl PendingActions {
    /// Records that `changes`' last element was just pushed: pending when its action is not
    /// no-op, replacing an earlier change of the same instance (the later of two counts).
    pub(crate) fn pushed(&mut self, changes: &[Change]) {
        let i = changes.len() - 1;
        let change = &changes[i];
        let hash = resource_hash(&change.addr.resource);
        let pending = change.action != Action::NoOp;
        match self
            .table
            .find_entry(hash, |&j| changes[j as usize].addr == change.addr)
        {
            Ok(entry) if pending => *entry.into_mut() = i as u32,
            Ok(entry) => {
                entry.remove();
            }
            Err(_) if pending => {
                self.table.insert_unique(hash, i as u32, |&j| {
                    resource_hash(&changes[j as usize].addr.resource)
                });
            }
            Err(_) => {}
        }
    }

    /// The pending changes of `resource`'s instances, in no particular order.
    pub(crate) fn of<'a, 'r>(
        &'a self,
        changes: &'a [Change],
        resource: &'r ResourceAddr,
    ) -> impl Iterator<Item = &'a Change> + use<'a, 'r> {
        self.table
            .iter_hash(resource_hash(resource))
            .map(|&j| &changes[j as usize])
            .filter(move |c| c.addr.resource == *resource)
    }
}

impl PendingActions {
    /// The pending change of `resource` with the lowest instance address, if any.
    pub(crate) fn first<'a>(
        &'a self,
        changes: &'a [Change],
        resource: &ResourceAddr,
    ) -> Option<&'a Change> {
        self.of(changes, resource)
            .min_by(|a, b| a.addr.cmp(&b.addr))
    }
}

/// What the walk planned so far, as the rule reads it: the changes recorded, which of them
/// are pending, and the data reads deferred to apply.
#[derive(Clone, Copy)]
pub(crate) struct Planned<'a> {
    pub changes: &'a [Change],
    pub pending: &'a PendingActions,
    pub deferred: &'a BTreeSet<ResourceInstanceAddr>,
}

/// Searches from `start` (a data source node evaluated in module instance `instance`), or from
/// the given first steps, for the nearest dependency with a pending change.
pub(crate) fn find_pending(
    graph: &TermGraph,
    values: &Values,
    planned: Planned<'_>,
    start: NodeId,
    instance: &ModulePath,
    first_steps: Option<Vec<NodeId>>,
) -> Option<Pending> {
    let mut queue: VecDeque<(NodeId, ModulePath, Vec<String>)> = VecDeque::new();
    let mut seen: BTreeSet<(NodeId, ModulePath)> = BTreeSet::new();
    let push_deps = |queue: &mut VecDeque<_>,
                     seen: &mut BTreeSet<_>,
                     from: NodeId,
                     m: &ModulePath,
                     via: &Vec<String>,
                     steps: Option<Vec<NodeId>>| {
        let deps: Vec<NodeId> = match steps {
            Some(s) => s,
            None => graph
                .dag
                .dependencies(from)
                .filter(|to| follows(graph, from, *to))
                .collect(),
        };
        for to in deps {
            for m2 in map_instances(values, m, graph.node(to).module()) {
                if seen.insert((to, m2.clone())) {
                    queue.push_back((to, m2, via.clone()));
                }
            }
        }
    };
    push_deps(
        &mut queue,
        &mut seen,
        start,
        instance,
        &Vec::new(),
        first_steps,
    );
    while let Some((id, m, via)) = queue.pop_front() {
        match graph.node(id) {
            Node::Resource { key, .. } => {
                let resource = ResourceAddr::new(m.clone(), key.mode, &key.type_, &key.name);
                let lo = resource.instance(None);
                if key.mode == Mode::Managed {
                    if let Some(change) = planned.pending.first(planned.changes, &resource) {
                        return Some(Pending {
                            dependency: change.addr.clone(),
                            action: change.action,
                            via,
                        });
                    }
                }
                if key.mode == Mode::Data {
                    if let Some(addr) = planned
                        .deferred
                        .range(lo..)
                        .take_while(|a| a.resource == resource)
                        .next()
                    {
                        return Some(Pending {
                            dependency: addr.clone(),
                            action: Action::Read,
                            via,
                        });
                    }
                }
            }
            Node::Provider { .. } | Node::Orphan { .. } | Node::Destroy { .. } => {}
            node => {
                let mut via = via.clone();
                via.push(label(node, &m));
                push_deps(&mut queue, &mut seen, id, &m, &via, None);
            }
        }
    }
    None
}
