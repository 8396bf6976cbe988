//! The plan view: a plan's changes by module — a saved plan file's, or the one a run recorded
//! in the log — and the dependency graph of the configuration's resources with each node's
//! planned actions.
//!
//! The graph is the one the plan was made under: the engine's own term graph (the one
//! `cairn graph` draws) reduced to resources and data sources
//! (`TermGraph::resource_graph`: an edge `a → b` when `a` reaches `b` through locals,
//! variables, outputs and module calls), kept in the plan (`PlanRecord::graph`, saved plan
//! files and `RunPlanned` alike). Only a plan recorded before Cairn kept its graph is drawn
//! from the configuration as it is now. The layout is left to the page (dagre); this module
//! only says what is connected.

use crate::config::Config;
use crate::engine::graph::build;
use crate::plan::record::{deferral_chain, plan_record};
use crate::plan::Plan;
use cairn_state::{PlanRecord, PlannedAction, PlannedChange};
use serde_json::{json, Value as J};
use std::collections::BTreeMap;

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
    pub(crate) fn of_plan(name: String, plan: &Plan, files_hash: &str) -> PlanView {
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
fn resource_key(addr: &crate::addr::ResourceInstanceAddr) -> String {
    let r = &addr.resource;
    crate::addr::ResourceAddr::new(r.module.without_keys(), r.mode, &r.type_, &r.name).to_string()
}

/// A graph node: its static address, module and whether it is a data source.
fn node_json(k: &str) -> J {
    let (module, data) = match k.parse::<crate::addr::ResourceAddr>() {
        Ok(a) => (
            if a.module.is_root() {
                "(root module)".to_string()
            } else {
                a.module.to_string()
            },
            a.mode == crate::addr::Mode::Data,
        ),
        // Not an address (a damaged record): shown as it is, in the root.
        Err(_) => ("(root module)".to_string(), false),
    };
    json!({ "id": k, "module": module, "data": data })
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
            PlannedAction::Read | PlannedAction::Forget => {}
        }
    }
    c
}

/// Why a planned change was chosen: the plan's reason, and for a deferred read the kind of
/// cause and the causal chain (from the data source outwards to the cause).
pub(crate) fn deferral_json(c: &PlannedChange) -> J {
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
pub(crate) fn change_json(ch: &PlannedChange) -> J {
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
    // The graph the plan was made under; for a plan recorded before plans kept theirs, the
    // configuration's graph as it is now.
    let now;
    let (graph, graph_from) = match &plan.graph {
        Some(g) => (Some(g), "plan"),
        None => {
            now = config.map(|c| build(c).0.resource_graph());
            (now.as_ref(), "configuration")
        }
    };
    let mut nodes: BTreeMap<String, J> = BTreeMap::new();
    let mut edges: Vec<(&str, &str)> = Vec::new();
    if let Some(g) = graph {
        for k in &g.nodes {
            nodes.insert(k.clone(), node_json(k));
        }
        edges = g.named_edges().collect();
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
            "from": graph_from,
        },
        // Only a graph drawn from the configuration needs it.
        "config_error": if plan.graph.is_some() { None } else { config_error },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use cairn_state::PlanGraph;

    fn view(graph: Option<PlanGraph>) -> PlanView {
        PlanView {
            name: "t".into(),
            record: PlanRecord {
                mode: "normal".into(),
                saved: false,
                files_hash: String::new(),
                changes: vec![PlannedChange {
                    addr: "sim_thing.gone".parse().unwrap(),
                    action: PlannedAction::Delete,
                    reason: None,
                    deferral: None,
                    diff: String::new(),
                }],
                outputs: Vec::new(),
                graph,
            },
            errored: false,
            warnings: Vec::new(),
            note: None,
        }
    }

    fn edges(j: &J) -> Vec<(String, String)> {
        j["graph"]["edges"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| (e["from"].to_string(), e["to"].to_string()))
            .collect()
    }

    /// A recorded graph is drawn as recorded; a record from before plans kept their graph
    /// falls back to the configuration as it is now (and says so).
    #[test]
    fn the_recorded_graph_wins_and_old_records_fall_back_to_the_configuration() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/ui/project");
        let (config, diags) = crate::config::load(&dir);
        assert!(!diags.has_errors());
        let config = config.unwrap();
        let recorded = PlanGraph {
            nodes: vec!["module.m.data.sim_lookup.x".into(), "sim_thing.old".into()],
            edges: vec![(0, 1)],
        };
        let j = plan_json(&view(Some(recorded)), Some(&config), Some("unused"));
        assert_eq!(j["graph"]["from"], "plan");
        assert_eq!(j["config_error"], J::Null);
        assert_eq!(
            edges(&j),
            [(
                "\"module.m.data.sim_lookup.x\"".to_string(),
                "\"sim_thing.old\"".to_string()
            )]
        );
        let nodes = j["graph"]["nodes"].as_array().unwrap();
        let ids: Vec<&str> = nodes.iter().map(|n| n["id"].as_str().unwrap()).collect();
        // The recorded nodes, and the deleted resource the plan names.
        assert_eq!(
            ids,
            [
                "module.m.data.sim_lookup.x",
                "sim_thing.gone",
                "sim_thing.old"
            ]
        );
        assert_eq!(nodes[0]["module"], "module.m");
        assert_eq!(nodes[0]["data"], true);
        assert_eq!(nodes[1]["orphan"], true);

        let j = plan_json(&view(None), Some(&config), None);
        assert_eq!(j["graph"]["from"], "configuration");
        let now = build(&config).0.resource_graph();
        assert_eq!(
            edges(&j).len(),
            now.edges.len(),
            "the configuration's edges: {j}"
        );
        assert!(edges(&j).contains(&(
            "\"sim_thing.dep\"".to_string(),
            "\"sim_thing.base\"".to_string()
        )));
    }
}
