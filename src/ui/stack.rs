//! The stack view of `cairn ui` (started in a stack's directory, beside its
//! `*.tfcomponent.hcl` files): what it shows of the stack — its deployments and components,
//! each component instance's state (as its own reader's model summarizes it) and the stack
//! runs (`engine::stack::history`). The states themselves, each a workspace of the stack's
//! state root with the whole of the UI served for it when a request names it
//! (`?ws=DEPLOYMENT.COMPONENT[.KEY]`), are kept by `StackHub` in `mod.rs`.

use crate::engine::stack::history::{self, instance_of_workspace};
use serde_json::{json, Value as J};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The component instances' workspaces in the state root `root`.
pub(super) fn workspaces(root: &Path) -> Vec<String> {
    crate::engine::api::workspaces::list(root)
        .unwrap_or_default()
        .into_iter()
        .filter(|n| instance_of_workspace(n).is_some())
        .collect()
}

/// The module directory of the component whose state is workspace `ws` of the stack in
/// `dir` (a local source beside the stack, others where `stack init` installed them; a
/// `removed` block's source when the component is gone).
pub(super) fn module_dir(dir: &Path, ws: &str) -> Option<PathBuf> {
    let id = instance_of_workspace(ws)?;
    let env: BTreeMap<String, String> = std::env::vars().collect();
    let (cfg, _) = crate::config::stack::load_stack(dir, &env);
    let source = cfg
        .model
        .components
        .get(&id.component)
        .map(|c| c.source.clone())
        .or_else(|| {
            cfg.model
                .removed
                .iter()
                .find(|r| r.name == id.component)
                .map(|r| r.source.clone())
        })?;
    if crate::addr::module_source::is_local(&source) {
        return Some(dir.join(source));
    }
    crate::provider::install::modules::installed_dir(dir, &format!("component.{}", id.component))
}

/// The workspace named by a request's query (`ws=NAME`), decoded.
pub(super) fn ws_of(query: Option<&str>) -> Option<String> {
    query?
        .split('&')
        .find_map(|p| p.strip_prefix("ws="))
        .map(percent_decoded)
        .filter(|w| !w.is_empty())
}

/// What changes when a stack run is recorded.
pub(super) fn runs_stamp(root: &Path) -> String {
    history::list(root)
        .map(|(r, _)| {
            format!(
                "{}/{}",
                r.len(),
                r.last()
                    .map(|r| format!("{}:{}", r.id, r.outcome))
                    .unwrap_or_default()
            )
        })
        .unwrap_or_default()
}

/// The stack in `dir` with its states in `root`: its deployments, their components (in
/// dependency order) and each component instance's state (`summary` of its workspace), and
/// the stack runs, newest first.
pub(super) fn overview_json(
    dir: &Path,
    root: &Path,
    workspaces: &[String],
    summary: &dyn Fn(&str) -> J,
) -> J {
    let env: BTreeMap<String, String> = std::env::vars().collect();
    let (cfg, diags) = crate::config::stack::load_stack(dir, &env);
    let errors: Vec<String> = diags
        .iter()
        .filter(|d| d.severity == crate::diag::Severity::Error)
        .map(|d| match d.span {
            Some(sp) => format!("{}: {}", cfg.sources.location(sp), d.summary),
            None => d.summary.clone(),
        })
        .collect();
    let mut instances: BTreeMap<(String, String), Vec<J>> = BTreeMap::new();
    for ws in workspaces {
        let Some(id) = instance_of_workspace(ws) else {
            continue;
        };
        instances
            .entry((id.deployment.clone(), id.component.clone()))
            .or_default()
            .push(json!({
                "address": id.address(),
                "key": id.key,
                "workspace": ws,
                "state": summary(ws),
            }));
    }
    // In dependency order: a component after those it depends on.
    let comps = &cfg.model.components;
    let mut order: Vec<String> = Vec::new();
    while order.len() < comps.len() {
        let before = order.len();
        for (n, c) in comps {
            if !order.contains(n)
                && c.depends_on
                    .iter()
                    .all(|x| order.contains(x) || !comps.contains_key(x))
            {
                order.push(n.clone());
            }
        }
        if order.len() == before {
            // A cycle (which `errors` reports): the rest by name.
            let rest: Vec<String> = comps
                .keys()
                .filter(|n| !order.contains(n))
                .cloned()
                .collect();
            order.extend(rest);
        }
    }
    let mut deployments: Vec<String> = cfg.deployments.clone();
    for (d, _) in instances.keys() {
        if !deployments.contains(d) {
            deployments.push(d.clone());
        }
    }
    let deployments: Vec<J> = deployments
        .iter()
        .map(|d| {
            let mut names = order.clone();
            for (dd, c) in instances.keys() {
                if dd == d && !names.contains(c) {
                    names.push(c.clone());
                }
            }
            let components: Vec<J> = names
                .iter()
                .map(|c| {
                    let def = comps.get(c);
                    json!({
                        "name": c,
                        "source": def.map(|x| x.source.clone()),
                        "depends_on": def.map(|x| x.depends_on.iter().cloned().collect::<Vec<_>>()).unwrap_or_default(),
                        "declared": def.is_some(),
                        "instances": instances.get(&(d.clone(), c.clone())).cloned().unwrap_or_default(),
                    })
                })
                .collect();
            json!({
                "name": d,
                "declared": cfg.deployments.contains(d),
                "components": components,
            })
        })
        .collect();
    let (runs, warnings) = history::list(root)
        .unwrap_or_else(|d| (Vec::new(), vec![format!("{}: {}", d.summary, d.detail)]));
    let runs: Vec<J> = runs.iter().rev().map(run_summary).collect();
    json!({
        "dir": dir.display().to_string(),
        "errors": errors,
        "warnings": warnings,
        "deployments": deployments,
        "runs": runs,
    })
}

fn run_summary(r: &history::StackRun) -> J {
    let (add, change, destroy) = r.totals();
    json!({
        "id": r.id,
        "command": r.command,
        "args": r.args,
        "user": r.user,
        "host": r.context.host,
        "git_commit": r.context.git_commit,
        "git_branch": r.context.git_branch,
        "ci_job": r.context.ci_job,
        "deployment": r.deployment,
        "started_ms": r.started_ms,
        "finished_ms": r.finished_ms,
        "duration_ms": r.finished_ms.map(|f| f.saturating_sub(r.started_ms)),
        "outcome": r.outcome,
        "message": r.message,
        "diagnostics": r.diagnostics,
        "runners": r.runners,
        "summary": r.summary(),
        "changes": {"added": add, "changed": change, "destroyed": destroy},
    })
}

/// Stack run `id` with its rounds (a fleet: its work items) and component instances
/// (`Ok(None)`: there is none).
pub(super) fn stack_run_json(root: &Path, id: &str) -> Result<Option<J>, String> {
    match history::get(root, id) {
        Ok((Some(r), _)) => {
            let mut j = run_summary(&r);
            j["steps"] = serde_json::to_value(&r.steps).unwrap_or_default();
            Ok(Some(j))
        }
        Ok((None, _)) => Ok(None),
        Err(d) => Err(format!("{}: {}", d.summary, d.detail)),
    }
}

/// A query value with its `%XX` escapes (and `+`) decoded.
fn percent_decoded(v: &str) -> String {
    let b = v.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' if i + 2 < b.len() => {
                let hex = std::str::from_utf8(&b[i + 1..i + 3]).unwrap_or("");
                if let Ok(x) = u8::from_str_radix(hex, 16) {
                    out.push(x);
                    i += 3;
                    continue;
                }
                out.push(b'%');
            }
            b'+' => out.push(b' '),
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}
