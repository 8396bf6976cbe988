//! Rules that plan and apply both follow:
//! - `apply_ignore_changes`: an instance's configuration once `ignore_changes` has taken its
//!   prior values;
//! - `equal_ignoring_marks`: when two values count as unchanged;
//! - `missing_provider`: the error of an instance whose provider instance is not available;
//! - `may_be_replaced_at_apply`, `reconfigured_at_apply`: which provider instances may turn
//!   out to be replaced only at apply;
//! - `instance_deps`, `same_deps`: which instances an object depends on (recorded with it,
//!   for destroy ordering);
//! - `check_scoped_failure`: what becomes of a `check` block's data source that could not
//!   be read.

use super::core::{Ctx, Instance};
use super::graph::{EdgeKind, Node, TermGraph};
use super::values::Values;
use crate::addr::{Mode, ModulePath, ProviderAddr, ResourceAddr, ResourceInstanceAddr};
use crate::config::IgnoreChanges;
use crate::diag::{Diagnostic, Diagnostics};
use crate::plan::{Action, ProviderChange};
use crate::value::Value;
use cairn_graph::NodeId;
use std::collections::{BTreeSet, VecDeque};

/// `ignore_changes`: the ignored attributes take their prior values before planning.
pub(crate) fn apply_ignore_changes(
    config: &Value,
    prior: &Value,
    ignore: &IgnoreChanges,
    schema: &crate::schema::Block,
) -> Value {
    let (Some(cfg), Some(pri)) = (config.attributes(), prior.attributes()) else {
        return config.clone();
    };
    let mut out = cfg.clone();
    match ignore {
        IgnoreChanges::None => {}
        IgnoreChanges::All => {
            for (k, a) in &schema.attributes {
                if a.required || a.optional {
                    if let Some(v) = pri.get(k) {
                        out.insert(k.clone(), v.clone());
                    }
                }
            }
        }
        IgnoreChanges::Paths(paths) => {
            for path in paths {
                if let Some(first) = path.first() {
                    if path.len() == 1 {
                        if let Some(v) = pri.get(first) {
                            out.insert(first.clone(), v.clone());
                        }
                    } else if let (Some(c), Some(p)) = (out.get(first).cloned(), pri.get(first)) {
                        out.insert(first.clone(), set_path(&c, p, &path[1..]));
                    }
                }
            }
        }
    }
    Value::Object(out)
}

/// `config` with the value at `path` taken from `prior`.
fn set_path(config: &Value, prior: &Value, path: &[String]) -> Value {
    let Some((head, rest)) = path.split_first() else {
        return prior.clone();
    };
    match (config.unmarked(), prior.unmarked()) {
        (Value::Map(c), Value::Map(p)) | (Value::Object(c), Value::Object(p)) => {
            let mut c2 = c.clone();
            match p.get(head) {
                Some(pv) if rest.is_empty() => {
                    c2.insert(head.clone(), pv.clone());
                }
                Some(pv) => {
                    let inner = c.get(head).cloned().unwrap_or_else(Value::null);
                    c2.insert(head.clone(), set_path(&inner, pv, rest));
                }
                None => {
                    c2.remove(head);
                }
            }
            if matches!(config.unmarked(), Value::Map(_)) {
                Value::Map(c2)
            } else {
                Value::Object(c2)
            }
        }
        _ => config.clone(),
    }
}

/// Unchanged, for plan decisions: marks and the types of nulls do not count.
pub(crate) fn equal_ignoring_marks(a: &Value, b: &Value) -> bool {
    crate::provider::schema_util::same(a, b)
}

/// The error of an instance whose provider instance could not be configured.
pub(crate) fn missing_provider(
    provider: &ProviderAddr,
    addr: &ResourceInstanceAddr,
) -> Diagnostics {
    Diagnostic::error(
        "Provider instance not available",
        format!("{addr} needs {provider}, which could not be configured (see the errors above)."),
    )
    .with_address(addr)
    .into()
}

/// A provider instance in state whose configuration is not known until apply: once the
/// values it depends on are applied, its `diff_config` may say replace, and then its
/// replacement deletes every object still under it (`apply::steps::delete_under`).
pub(crate) fn may_be_replaced_at_apply(pc: &ProviderChange) -> bool {
    pc.action.is_replace()
        || (pc.action == Action::Update && pc.after.as_ref().is_some_and(|a| !a.is_wholly_known()))
}

/// The managed instances an instance depends on: the resources reached from its node through
/// non-resource terms, with their instances in the module instances reached. Apply records
/// them with the object; the plan compares them with the dependencies in state.
pub(crate) fn instance_deps(ctx: &Ctx, addr: &ResourceInstanceAddr) -> Vec<ResourceInstanceAddr> {
    let Some(start) = ctx.graph.id(&Node::of_instance(addr)) else {
        return Vec::new();
    };
    let values = ctx.values.read().expect("values lock");
    let mut out = BTreeSet::new();
    collect_deps(&ctx.graph, &values, start, &addr.resource.module, &mut out);
    out.into_iter().collect()
}

/// Collects every managed instance reachable from `start` through non-resource terms.
pub(crate) fn collect_deps(
    graph: &TermGraph,
    values: &Values,
    start: NodeId,
    instance: &ModulePath,
    out: &mut BTreeSet<ResourceInstanceAddr>,
) {
    let mut queue: VecDeque<(NodeId, ModulePath)> = VecDeque::new();
    let mut seen = BTreeSet::new();
    let push = |queue: &mut VecDeque<(NodeId, ModulePath)>,
                seen: &mut BTreeSet<(NodeId, ModulePath)>,
                from: NodeId,
                m: &ModulePath| {
        for to in graph.dag.dependencies(from) {
            if graph.edge_kind(from, to) == Some(EdgeKind::Provider) {
                continue;
            }
            for m2 in super::deferral::map_instances(values, m, graph.node(to).module()) {
                if seen.insert((to, m2.clone())) {
                    queue.push_back((to, m2));
                }
            }
        }
    };
    push(&mut queue, &mut seen, start, instance);
    while let Some((id, m)) = queue.pop_front() {
        match graph.node(id) {
            Node::Resource { key, .. } if key.mode == Mode::Managed => {
                let resource = ResourceAddr::new(m.clone(), key.mode, &key.type_, &key.name);
                if let Some(rv) =
                    values.resource(&m, &(key.mode, key.type_.clone(), key.name.clone()))
                {
                    out.extend(rv.instances.keys().map(|k| resource.instance(k.clone())));
                }
            }
            Node::Provider { .. } | Node::Orphan { .. } | Node::Destroy { .. } => {}
            _ => push(&mut queue, &mut seen, id, &m),
        }
    }
}

/// True when two dependency lists name the same instances (in any order).
pub(crate) fn same_deps(a: &[ResourceInstanceAddr], b: &[ResourceInstanceAddr]) -> bool {
    // Both are usually sorted without repeats (as `instance_deps` makes and the state records
    // them): equal lists are the same set, without building either set. A no-op plan asks
    // this of every instance.
    a == b || a.iter().collect::<BTreeSet<_>>() == b.iter().collect::<BTreeSet<_>>()
}

/// A provider instance whose configuration is known only at apply, so that it may turn out
/// to be replaced then ("reconfigured at apply"; not one the plan already replaces).
pub(crate) fn reconfigured_at_apply(pc: &ProviderChange) -> bool {
    pc.action == Action::Update && may_be_replaced_at_apply(pc)
}

/// A `check` block's data source that could not be read: its failure becomes a warning and
/// its check is not evaluated in this walk (Terraform's rule). Returns false for any other
/// data source, whose failure stays an error.
pub(crate) fn check_scoped_failure(ctx: &Ctx, inst: &Instance, diags: Diagnostics) -> bool {
    let res = &ctx.module(&inst.static_module).resources[&inst.key];
    let Some(check) = res.check.clone() else {
        return false;
    };
    ctx.report_check(
        diags
            .into_iter()
            .map(|d| d.into_warning().with_span(Some(res.span)))
            .collect(),
    );
    ctx.failed_checks
        .lock()
        .expect("failed checks")
        .insert((inst.static_module.clone(), check));
    true
}

#[cfg(test)]
mod tests {
    use super::same_deps;
    use crate::addr::ResourceInstanceAddr;

    #[test]
    fn same_deps_is_set_equality() {
        let a: ResourceInstanceAddr = "sim_thing.a".parse().unwrap();
        let b: ResourceInstanceAddr = "module.m.sim_thing.b[1]".parse().unwrap();
        let (one_a, one_b) = (std::slice::from_ref(&a), std::slice::from_ref(&b));
        let ab = [a.clone(), b.clone()];
        assert!(same_deps(&[], &[]));
        assert!(same_deps(&ab, &ab));
        assert!(same_deps(&ab, &[b.clone(), a.clone()]));
        assert!(same_deps(one_a, &[a.clone(), a.clone()]));
        assert!(!same_deps(one_a, one_b));
        assert!(!same_deps(one_a, &ab));
    }
}
