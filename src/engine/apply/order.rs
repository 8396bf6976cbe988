//! The graph-building steps of an apply: the plan's deletes join the term graph as `Destroy`
//! nodes, ordered by named steps as `graph::build`'s are:
//!
//! | step | what it orders |
//! | --- | --- |
//! | add destroy nodes | each delete's node; a replacement's halves (`order_replacement`); deletes under a replaced provider instance (`order_under_provider`) |
//! | order deletes around reconfigured providers | a provider instance reconfigured at apply is a possible delete of its objects: the deletes of what they depend on wait for it |
//! | order left-over deposed deletes | a deposed object left by an earlier run, between the deletes of its dependents and of its dependencies |
//! | order deletes by dependencies | dependents deleted before their dependencies; an orphan after the updates of what depended on it |
//!
//! The steps read the plan's changes through `steps::Kind`, as the steps that execute them do.

use super::steps::{DestroyInfo, Kind, Order};
use crate::addr::{ProviderAddr, ResourceInstanceAddr};
use crate::engine::graph::{EdgeKind, Node, TermGraph};
use crate::engine::rules::{may_be_replaced_at_apply, reconfigured_at_apply};
use crate::engine::sabotage::Sabotage;
use crate::plan::{Change, Plan};
use crate::value::Value;
use crate::value::ValueMap;
use cairn_graph::NodeId;
use cairn_state::{ResourceObject, Snapshot};
use std::collections::{BTreeMap, BTreeSet};

/// What the steps share: the plan, the prior state, and the `Destroy` nodes added so far.
struct Destroys<'p> {
    plan: &'p Plan,
    prior: &'p Snapshot,
    /// How to delete the object of each `Destroy` node.
    info: BTreeMap<(ResourceInstanceAddr, Option<String>), DestroyInfo>,
    /// The `Destroy` nodes of current objects (also the ones create-before-destroy deposes).
    ids: BTreeMap<ResourceInstanceAddr, NodeId>,
    /// Deletes of current objects (not deposed ones).
    current_deletes: BTreeSet<ResourceInstanceAddr>,
    /// The current objects the plan deletes (alone or before their replacement).
    plan_deletes: BTreeSet<&'p ResourceInstanceAddr>,
    /// The keys create-before-destroy replacements depose their current objects under.
    deposed_keys: BTreeMap<ResourceInstanceAddr, String>,
    /// Deletes of deposed objects left by earlier runs, with the objects they depend on.
    leftovers: Vec<(NodeId, &'p ResourceInstanceAddr, &'p [ResourceInstanceAddr])>,
}

/// One named step of ordering the deletes.
type OrderStep<'a, 'p> = (&'static str, &'a dyn Fn(&mut TermGraph, &mut Destroys<'p>));

/// Adds the plan's deletes to a term graph as `Destroy` nodes, ordered: dependents are deleted
/// before their dependencies; a delete-then-create replacement deletes before it creates; a
/// create-before-destroy replacement deletes its deposed object after it and its dependents
/// are applied; an orphan is deleted after the resources that depended on it are updated; a
/// replaced provider instance is registered after its old objects are deleted. Returns how to
/// delete each node's object; `deposed_keys` receives the keys create-before-destroy deposes
/// under.
pub(crate) fn add_destroys(
    g: &mut TermGraph,
    plan: &Plan,
    prior: &Snapshot,
    deposed_keys: &mut BTreeMap<ResourceInstanceAddr, String>,
    sabotage: Option<Sabotage>,
) -> BTreeMap<(ResourceInstanceAddr, Option<String>), DestroyInfo> {
    let plan_deletes = plan
        .changes
        .iter()
        .filter(|c| {
            matches!(
                Kind::of(c),
                Kind::Delete | Kind::DeposedDelete | Kind::Replace(Order::DeleteFirst)
            )
        })
        .map(|c| &c.addr)
        .collect();
    let mut d = Destroys {
        plan,
        prior,
        info: BTreeMap::new(),
        ids: BTreeMap::new(),
        current_deletes: BTreeSet::new(),
        plan_deletes,
        deposed_keys: BTreeMap::new(),
        leftovers: Vec::new(),
    };
    let steps: [OrderStep<'_, '_>; 4] = [
        ("add destroy nodes", &|g, d| add_destroy_nodes(g, d)),
        ("order deletes around reconfigured providers", &|g, d| {
            order_reconfigured_providers(g, d)
        }),
        ("order left-over deposed deletes", &|g, d| {
            order_leftover_deposed(g, d)
        }),
        ("order deletes by dependencies", &|g, d| {
            order_by_dependencies(g, d, sabotage)
        }),
    ];
    for (_name, step) in steps {
        step(g, &mut d);
    }
    deposed_keys.extend(d.deposed_keys);
    d.info
}

/// A `Destroy` node for each change that deletes an object, with its replacement's and its
/// provider instance's edges. One pass in plan order, as the checks that keep an edge from
/// closing a cycle see the graph as built so far.
fn add_destroy_nodes(g: &mut TermGraph, d: &mut Destroys<'_>) {
    let (plan, prior) = (d.plan, d.prior);
    for change in &plan.changes {
        // A deposed object: the current one, deposed by this apply (create-before-destroy),
        // or one left by an earlier run.
        let deposed = match (Kind::of(change), &change.deposed) {
            (Kind::DeposedDelete, Some(key)) => Some(key.clone()),
            (Kind::Delete | Kind::Replace(Order::DeleteFirst), None) => None,
            (Kind::Replace(Order::CreateFirst), _) => {
                let key = format!("{:08x}", rand::random::<u32>());
                d.deposed_keys.insert(change.addr.clone(), key.clone());
                Some(key)
            }
            _ => continue,
        };
        let obj = match &change.deposed {
            Some(key) => prior
                .resources
                .get(&change.addr)
                .and_then(|i| i.deposed.get(key)),
            None => prior.current(&change.addr),
        };
        let Some(obj) = obj else {
            continue;
        };
        let config = prior
            .providers
            .get(&obj.provider.addr)
            .map(|p| Value::from_stored(&p.config))
            .unwrap_or_else(|| Value::Object(ValueMap::new()));
        let id = g.add(Node::Destroy {
            addr: Box::new(change.addr.clone()),
            deposed: deposed.clone(),
        });
        if change.deposed.is_some() {
            d.leftovers.push((id, &change.addr, &obj.deps));
        } else {
            d.ids.insert(change.addr.clone(), id);
        }
        d.info.insert(
            (change.addr.clone(), deposed.clone()),
            DestroyInfo {
                provider: obj.provider.clone(),
                config,
            },
        );
        order_replacement(g, plan, change, obj, id);
        order_under_provider(g, d, change, obj, &deposed, id);
        if deposed.is_none() {
            d.current_deletes.insert(change.addr.clone());
        }
    }
}

/// A delete-then-create replacement deletes before it creates. A deposed object's delete
/// (create-before-destroy deposes it, or an earlier run left it) waits for the current object
/// and what depends on it (they may still refer to it) — unless its provider instance is
/// replaced at plan, which deletes the old world's objects before the new one is registered.
fn order_replacement(
    g: &mut TermGraph,
    plan: &Plan,
    change: &Change,
    obj: &ResourceObject,
    id: NodeId,
) {
    let provider_replaced = plan
        .provider_changes
        .iter()
        .any(|pc| pc.addr == obj.provider.addr && pc.action.is_replace());
    let kind = Kind::of(change);
    let after_current = match kind {
        Kind::Replace(Order::CreateFirst) => true,
        Kind::DeposedDelete => !provider_replaced,
        _ => false,
    };
    let Some(res) = g.id(&Node::of_instance(&change.addr)) else {
        return;
    };
    if kind == Kind::Replace(Order::DeleteFirst) {
        g.edge(res, id, EdgeKind::DependsOn, None);
    } else if after_current {
        g.edge(id, res, EdgeKind::DependsOn, None);
        for dependent in g.dag.transitive_dependents(res) {
            if matches!(g.node(dependent), Node::Resource { .. }) {
                g.edge(id, dependent, EdgeKind::DependsOn, None);
            }
        }
    }
}

/// A provider instance that is (or may turn out to be, once its configuration is known)
/// replaced deletes the objects still under it: the plan's own deletes of them go first, so
/// each object is deleted exactly once. (A deposed object's delete waits for its replacement,
/// which waits for the provider instance.) Except when an object that stays under it (nothing
/// in the plan deletes it) depends on this one: the instance may delete that object at apply,
/// which must happen before this delete, so this delete waits for the instance instead (and
/// finds the object gone if the instance deleted it).
fn order_under_provider(
    g: &mut TermGraph,
    d: &Destroys<'_>,
    change: &Change,
    obj: &ResourceObject,
    deposed: &Option<String>,
    id: NodeId,
) {
    let (plan, prior) = (d.plan, d.prior);
    let Some(p) = g.provider_node(&obj.provider.addr) else {
        return;
    };
    let replaced = plan.provider_changes.iter().any(|pc| {
        pc.addr == obj.provider.addr
            && (pc.action.is_replace() || (deposed.is_none() && may_be_replaced_at_apply(pc)))
    });
    // Only asked when the instance may be replaced (a search of the state).
    let depended_on_under_p = || {
        deposed.is_none()
            && prior.resources.iter().any(|(a, i)| {
                i.current.as_ref().is_some_and(|o| {
                    o.provider.addr == obj.provider.addr
                        && o.deps.contains(&change.addr)
                        && !d.plan_deletes.contains(a)
                })
            })
    };
    // A deposed object (create-before-destroy) under an instance that may be replaced at
    // apply: the instance's replacement deletes it with its other objects, so its own delete
    // waits for the instance (and finds it gone if it was replaced).
    let deposed_under_maybe = deposed.is_some()
        && plan.provider_changes.iter().any(|pc| {
            pc.addr == obj.provider.addr && !pc.action.is_replace() && may_be_replaced_at_apply(pc)
        });
    let no_cycle = |g: &TermGraph| !g.dag.transitive_dependencies(p).contains(&id);
    if deposed_under_maybe && no_cycle(g) {
        g.edge(id, p, EdgeKind::DependsOn, None);
    } else if replaced {
        if depended_on_under_p() && no_cycle(g) {
            g.edge(id, p, EdgeKind::DependsOn, None);
        } else {
            g.edge(p, id, EdgeKind::DependsOn, None);
        }
    }
}

/// A provider instance reconfigured at apply is a possible delete of its objects: the deletes
/// of what they depend on wait for it (a dependency among what its configuration reads is
/// create-before-destroy: `plan_phase::replacement_order`).
fn order_reconfigured_providers(g: &mut TermGraph, d: &mut Destroys<'_>) {
    let reconfigured: BTreeSet<&ProviderAddr> = d
        .plan
        .provider_changes
        .iter()
        .filter(|pc| reconfigured_at_apply(pc))
        .map(|pc| &pc.addr)
        .collect();
    // What each such instance depends on, kept until an edge is added: an edge to one instance
    // never changes what that instance depends on, but may change what another one does.
    let mut reach: BTreeMap<NodeId, BTreeSet<NodeId>> = BTreeMap::new();
    for (addr, inst) in &d.prior.resources {
        let Some(obj) = &inst.current else { continue };
        if !reconfigured.contains(&obj.provider.addr) {
            continue;
        }
        let Some(p) = g.provider_node(&obj.provider.addr) else {
            continue;
        };
        let before_p = reach
            .entry(p)
            .or_insert_with(|| g.dag.transitive_dependencies(p));
        // An object the plan deletes before the instance is registered is gone by then: the
        // instance cannot delete it, and its own delete already precedes its dependencies'.
        if d.ids.get(addr).is_some_and(|own| before_p.contains(own)) {
            continue;
        }
        let waits: Vec<NodeId> = obj
            .deps
            .iter()
            .filter(|dep| d.current_deletes.contains(*dep))
            .filter_map(|dep| d.ids.get(dep).copied())
            .filter(|dep_id| !before_p.contains(dep_id))
            .collect();
        if !waits.is_empty() {
            for dep_id in waits {
                g.edge(dep_id, p, EdgeKind::DependsOn, None);
            }
            reach.clear();
        }
    }
}

/// A left-over deposed object: deleted after the deletes of what depends on it and before the
/// deletes of what it depends on.
fn order_leftover_deposed(g: &mut TermGraph, d: &mut Destroys<'_>) {
    for &(my_id, mine, deps) in &d.leftovers {
        for dep in deps {
            if let Some(&dep_id) = d.ids.get(dep) {
                g.edge(dep_id, my_id, EdgeKind::DependsOn, None);
            }
        }
        for (addr, inst) in &d.prior.resources {
            let depends = inst.current.as_ref().is_some_and(|o| o.deps.contains(mine));
            if let (true, Some(&their)) = (depends, d.ids.get(addr)) {
                if !g.dag.transitive_dependencies(their).contains(&my_id) {
                    g.edge(my_id, their, EdgeKind::DependsOn, None);
                }
            }
        }
    }
}

/// Reverse dependency order among deletes, and orphans after their dependents' updates.
fn order_by_dependencies(g: &mut TermGraph, d: &mut Destroys<'_>, sabotage: Option<Sabotage>) {
    let pure_deletes: BTreeSet<&ResourceInstanceAddr> = d
        .plan
        .changes
        .iter()
        .filter(|c| matches!(Kind::of(c), Kind::Delete | Kind::DeposedDelete))
        .map(|c| &c.addr)
        .collect();
    let ids = &d.ids;
    for (addr, inst) in &d.prior.resources {
        let Some(obj) = &inst.current else { continue };
        for dep in &obj.deps {
            if let (Some(&dep_id), Some(&my_id)) = (ids.get(dep), ids.get(addr)) {
                match sabotage {
                    Some(Sabotage::DeleteDependenciesFirst) => {
                        g.edge(my_id, dep_id, EdgeKind::DependsOn, None)
                    }
                    _ => g.edge(dep_id, my_id, EdgeKind::DependsOn, None),
                }
            }
            if let Some(&dep_id) = ids.get(dep) {
                if pure_deletes.contains(dep) && !ids.contains_key(addr) {
                    if let Some(res) = g.id(&Node::of_instance(addr)) {
                        if !g.dag.transitive_dependencies(res).contains(&dep_id)
                            && !g.dag.transitive_dependencies(dep_id).contains(&res)
                        {
                            g.edge(dep_id, res, EdgeKind::DependsOn, None);
                        }
                    }
                }
            }
        }
    }
}
