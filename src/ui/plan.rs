//! The plan view: a plan's changes by module — a saved plan file's, or the one a run recorded
//! in the log — and the dependency graph of the configuration's resources with each node's
//! planned actions.
//!
//! The graph is the engine's own term graph (`engine::graph::build`, the one `cairn graph`
//! draws), reduced to resources and data sources: an edge `a → b` when `a` reaches `b`
//! through locals, variables, outputs and module calls. The layout is left to the page
//! (dagre); this module only says what is connected.

use crate::config::Config;
use crate::engine::graph::{build, Node, TermGraph};
use crate::plan::record::{deferral_chain, plan_record};
use crate::plan::Plan;
use cairn_graph::NodeId;
use cairn_state::{PlanRecord, PlannedAction, PlannedChange};
use serde_json::{json, Value as J};
use std::collections::{BTreeMap, BTreeSet};

/// A plan as the UI shows it: a saved plan file (`cairn ui -plan=FILE`) or the plan a run
/// recorded in the log (`RunPlanned`), both as a [`PlanRecord`], so one page shows either.
pub struct PlanView {
    pub name: String,
    pub record: PlanRecord,
    pub errored: bool,
    pub warnings: Vec<String>,
    /// Something the page should say about the plan (e.g. the configuration changed since).
    pub note: Option<String>,
}

impl PlanView {
    /// A saved plan file's view.
    pub fn of_plan(name: String, plan: &Plan, files_hash: &str) -> PlanView {
        PlanView {
            name,
            record: plan_record(plan, true, files_hash),
            errored: plan.errored,
            warnings: plan.warnings.clone(),
            note: None,
        }
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

/// Counts for the summary line: (add, change, destroy), as `Plan::counts`.
fn counts(r: &PlanRecord) -> (usize, usize, usize) {
    let mut c = (0, 0, 0);
    for ch in &r.changes {
        match ch.action {
            PlannedAction::Create => c.0 += 1,
            PlannedAction::Update => c.1 += 1,
            PlannedAction::Delete => c.2 += 1,
            PlannedAction::DeleteThenCreate | PlannedAction::CreateThenDelete => {
                c.0 += 1;
                c.2 += 1
            }
            PlannedAction::Read => {}
        }
    }
    c
}

/// Why a planned change was chosen: the plan's reason, and for a deferred read the kind of
/// cause and the causal chain (from the data source outwards to the cause).
pub fn deferral_json(c: &PlannedChange) -> J {
    let d = c.deferral.as_ref();
    json!({
        "reason": c.reason,
        "cause": d.map(|d| match d {
            cairn_state::Deferral::ConfigUnknown { .. } => "config-unknown",
            cairn_state::Deferral::DependencyPending { .. } => "dependency-pending",
        }),
        "chain": d.map(deferral_chain).unwrap_or_default(),
    })
}

/// One planned change as JSON: action, why, a deferred read's causal chain, the plan text.
pub fn change_json(ch: &PlannedChange) -> J {
    let module = if ch.addr.resource.module.is_root() {
        "(root module)".to_string()
    } else {
        ch.addr.resource.module.to_string()
    };
    let mut j = deferral_json(ch);
    j["addr"] = json!(ch.addr.to_string());
    j["module"] = json!(module);
    j["resource"] = json!(resource_key(&ch.addr));
    j["action"] = json!(ch.action.name());
    j["deferred"] = json!(ch.action == PlannedAction::Read);
    j["text"] = json!(ch.diff);
    j
}

/// The plan as JSON: summary, changes grouped by module (each with its diff text and
/// reason), and the graph (nodes with their actions, a deferred-read mark, edges).
pub fn plan_json(view: &PlanView, config: Option<&Config>, config_error: Option<&str>) -> J {
    let plan = &view.record;
    let mut modules: BTreeMap<String, Vec<J>> = BTreeMap::new();
    // Static resource → its instances' changes.
    let mut by_resource: BTreeMap<String, Vec<J>> = BTreeMap::new();
    for ch in &plan.changes {
        let j = change_json(ch);
        by_resource
            .entry(resource_key(&ch.addr))
            .or_default()
            .push(j.clone());
        modules
            .entry(j["module"].as_str().unwrap_or_default().to_string())
            .or_default()
            .push(j);
    }
    let (add, change, destroy) = counts(plan);
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
        "mode": plan.mode,
        "saved": plan.saved,
        "note": view.note,
        "add": add, "change": change, "destroy": destroy,
        "deferred": plan.changes.iter().filter(|c| c.action == PlannedAction::Read).count(),
        "errored": view.errored,
        "warnings": view.warnings,
        "modules": modules.into_iter().map(|(m, c)| json!({"module": m, "changes": c})).collect::<Vec<_>>(),
        "graph": {
            "nodes": nodes.into_values().collect::<Vec<_>>(),
            "edges": edges.into_iter().map(|(a, b)| json!({"from": a, "to": b})).collect::<Vec<_>>(),
        },
        "config_error": config_error,
    })
}
