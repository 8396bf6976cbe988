//! The plan view: a saved plan's changes by module, and the dependency graph of the
//! configuration's resources with each node's planned actions.
//!
//! The graph is the engine's own term graph (`engine::graph::build`, the one `cairn graph`
//! draws), reduced to resources and data sources: an edge `a → b` when `a` reaches `b`
//! through locals, variables, outputs and module calls. The layout is left to the page
//! (dagre); this module only says what is connected.

use crate::config::Config;
use crate::engine::graph::{build, Node, TermGraph};
use crate::plan::{render::reason_text, render_change, Action, Plan, RenderOptions};
use cairn_graph::NodeId;
use serde_json::{json, Value as J};
use std::collections::{BTreeMap, BTreeSet};

/// A plan as the UI shows it.
pub struct PlanView {
    pub name: String,
    pub plan: Plan,
}

fn action_name(a: Action) -> &'static str {
    match a {
        Action::NoOp => "no-op",
        Action::Create => "create",
        Action::Read => "read",
        Action::Update => "update",
        Action::DeleteThenCreate => "replace",
        Action::CreateThenDelete => "replace",
        Action::Delete => "delete",
    }
}

/// The static resource key (`module.m.sim_thing.a`, no instance keys) of an instance.
fn resource_key(addr: &cairn_state::ResourceInstanceAddr) -> String {
    let r = &addr.resource;
    cairn_state::ResourceAddr::new(r.module.without_keys(), r.mode, &r.type_, &r.name).to_string()
}

fn node_key(n: &Node) -> Option<String> {
    match n {
        Node::Resource { module, key } => Some(key.addr(module.clone()).to_string()),
        _ => None,
    }
}

/// Resource-to-resource edges: from each resource node, every resource reachable through
/// non-resource terms (provider instances are not followed: they are not data flow).
fn resource_edges(g: &TermGraph) -> BTreeSet<(String, String)> {
    let mut out = BTreeSet::new();
    for (id, node) in g.dag.nodes() {
        let Some(from) = node_key(node) else {
            continue;
        };
        let mut seen: BTreeSet<NodeId> = BTreeSet::new();
        let mut stack: Vec<NodeId> = g.dag.dependencies(id).collect();
        while let Some(n) = stack.pop() {
            if !seen.insert(n) {
                continue;
            }
            match g.node(n) {
                Node::Resource { .. } => {
                    if let Some(to) = node_key(g.node(n)) {
                        if to != from {
                            out.insert((from.clone(), to));
                        }
                    }
                }
                Node::Provider { .. } => {}
                _ => stack.extend(g.dag.dependencies(n)),
            }
        }
    }
    out
}

/// The plan as JSON: summary, changes grouped by module (each with its diff text and
/// reason), and the graph (nodes with their actions, a deferred-read mark, edges).
pub fn plan_json(view: &PlanView, config: Option<&Config>, config_error: Option<&str>) -> J {
    let plan = &view.plan;
    let opts = RenderOptions {
        color: false,
        width: 0,
    };
    let mut modules: BTreeMap<String, Vec<J>> = BTreeMap::new();
    // Static resource → its instances' changes.
    let mut by_resource: BTreeMap<String, Vec<J>> = BTreeMap::new();
    for ch in &plan.changes {
        let module = if ch.addr.resource.module.is_root() {
            "(root module)".to_string()
        } else {
            ch.addr.resource.module.to_string()
        };
        let deferred = ch.action == Action::Read;
        let j = json!({
            "addr": ch.addr.to_string(),
            "module": module,
            "resource": resource_key(&ch.addr),
            "action": action_name(ch.action),
            "deferred": deferred,
            "reason": ch.reason.as_ref().and_then(|r| reason_text(&ch.addr, r)),
            "chain": match &ch.reason {
                Some(crate::plan::Reason::ReadBecauseConfigUnknown { chain, .. }) => json!(chain),
                Some(crate::plan::Reason::ReadBecauseDependencyPending { dependency, via, .. }) => {
                    let mut c = via.clone();
                    c.push(dependency.to_string());
                    json!(c)
                }
                _ => json!([]),
            },
            "text": render_change(ch, &opts),
        });
        by_resource
            .entry(resource_key(&ch.addr))
            .or_default()
            .push(j.clone());
        if ch.action != Action::NoOp {
            modules.entry(module).or_default().push(j);
        }
    }
    let (add, change, destroy) = plan.counts();
    let mut nodes: BTreeMap<String, J> = BTreeMap::new();
    let mut edges = BTreeSet::new();
    if let Some(config) = config {
        let (g, _) = build(config);
        for (_, node) in g.dag.nodes() {
            if let Node::Resource { module, key } = node {
                let k = key.addr(module.clone()).to_string();
                nodes.insert(
                    k.clone(),
                    json!({
                        "id": k,
                        "module": if module.is_root() { "(root module)".to_string() } else { module.to_string() },
                        "data": key.mode == cairn_state::Mode::Data,
                    }),
                );
            }
        }
        edges = resource_edges(&g);
    }
    // Resources the configuration no longer has (deletes) are nodes too.
    for (k, changes) in &by_resource {
        let node = nodes.entry(k.clone()).or_insert_with(|| {
            json!({
                "id": k,
                "module": changes[0]["module"],
                "data": k.starts_with("data.") || k.contains(".data."),
                "orphan": true,
            })
        });
        let mut actions: Vec<&str> = changes
            .iter()
            .filter_map(|c| c["action"].as_str())
            .collect();
        actions.sort_unstable();
        actions.dedup();
        node["actions"] = json!(actions);
        node["deferred"] = json!(changes.iter().any(|c| c["deferred"] == json!(true)));
        node["changes"] = json!(changes);
    }
    for n in nodes.values_mut() {
        if n.get("actions").is_none() {
            n["actions"] = json!([]);
            n["changes"] = json!([]);
            n["deferred"] = json!(false);
        }
    }
    json!({
        "name": view.name,
        "mode": format!("{:?}", plan.mode),
        "add": add, "change": change, "destroy": destroy,
        "applyable": plan.applyable,
        "errored": plan.errored,
        "warnings": plan.warnings,
        "modules": modules.into_iter().map(|(m, c)| json!({"module": m, "changes": c})).collect::<Vec<_>>(),
        "graph": {
            "nodes": nodes.into_values().collect::<Vec<_>>(),
            "edges": edges.into_iter().map(|(a, b)| json!({"from": a, "to": b})).collect::<Vec<_>>(),
        },
        "config_error": config_error,
    })
}
