//! Issue 33: a stack run's history record in the stack's PostgreSQL schema
//! (`cairn_stack_history`, append-only): a `stack apply` made in one working copy is listed,
//! with its component runs, by another; a fleet's shared run (`stack apply -runner`, two
//! runners) is one record to which both runners append the items they finished; a command
//! stopped by a configuration error is a failed run there, with the error at its place; a
//! local `stack apply` killed mid-round names there the component runs it left unfinished.

use super::stack_fixtures::{sim_stack, THING_MODULE};
use super::{finish, pgserver, stack_copy, wait_for, Copy, FIRST_SECOND};
use serde_json::Value;
use std::time::Duration;

fn runs(c: &Copy) -> Vec<Value> {
    c.ok(&["stack", "history", "-json"])
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn components(run: &Value) -> Vec<Value> {
    run["steps"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|s| s["components"].as_array().unwrap().clone())
        .collect()
}

#[test]
fn stack_runs_are_recorded_in_the_stacks_schema_for_every_working_copy() {
    let Some(server) = pgserver::shared() else {
        return;
    };
    let schema = pgserver::schema("stackhist");
    let sim = tempfile::tempdir().unwrap();
    let flag = format!("-backend-config=schema_name={schema}");
    let copy = |deploy: &str| {
        let stack = sim_stack(FIRST_SECOND);
        let c = stack_copy(
            sim.path(),
            server,
            &[
                ("stack.tfcomponent.hcl", &stack),
                ("deploy.tfdeploy.hcl", deploy),
                ("m/main.tf", THING_MODULE),
            ],
        );
        c.ok(&["stack", "init", "-backend=pg", &flag]);
        c
    };
    let deploy = "deployment \"dev\" {\n  inputs = { prefix = \"dev\" }\n}\n";
    let a = copy(deploy);
    let b = copy(deploy);
    assert_eq!(a.ok(&["stack", "history"]), "No stack runs yet.\n");
    a.ok(&["stack", "apply", "-auto-approve"]);

    // The other working copy sees the run, and each component run in its own state.
    let all = runs(&b);
    assert_eq!(all.len(), 1, "{all:?}");
    assert_eq!(all[0]["command"], "stack apply");
    assert_eq!(all[0]["outcome"], "success");
    let id = all[0]["id"].as_str().unwrap().to_string();
    let full: Value = serde_json::from_str(&b.ok(&["stack", "history", &id, "-json"])).unwrap();
    let applied: Vec<Value> = components(&full)
        .into_iter()
        .filter(|c| c["status"] == "applied")
        .collect();
    assert_eq!(applied.len(), 2, "{full:#}");
    for c in &applied {
        let ws = c["workspace"].as_str().unwrap();
        let mut cmd = b.command(&["history", "-json"]);
        cmd.env("TF_WORKSPACE", ws);
        let out = cmd.output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        let run = c["runs"][0].clone();
        assert!(
            text.lines()
                .map(|l| serde_json::from_str::<Value>(l).unwrap())
                .any(|h| h["id"] == run && h["command"] == "stack apply"),
            "run {run} in {ws}: {text}"
        );
    }
    // The history is in the stack's schema, append-only.
    let rows = server
        .psql(&format!(
            "SELECT count(DISTINCT run_id) FROM \"{schema}\".cairn_stack_history"
        ))
        .unwrap();
    assert_eq!(rows, "1");
    assert!(server
        .psql(&format!(
            "UPDATE \"{schema}\".cairn_stack_history SET data = ''::bytea"
        ))
        .is_err());
    assert!(server
        .psql(&format!("DELETE FROM \"{schema}\".cairn_stack_history"))
        .is_err());

    // A fleet's run, two runners: one record, both runners, every item.
    let deploy2 = "deployment \"dev\" {\n  inputs = { prefix = \"dev\" }\n}\ndeployment \"prod\" {\n  inputs = { prefix = \"prod\" }\n}\n";
    let mut r1 = copy(deploy2);
    let mut r2 = copy(deploy2);
    for c in [&mut r1, &mut r2] {
        c.env.push(("SIM_LATENCY_MS".into(), "300".into()));
    }
    let runners = [&r1, &r2].map(|c| c.spawn(&["stack", "apply", "-runner", "-auto-approve"]));
    for r in runners {
        let (code, out, err) = finish(r);
        assert_eq!(code, 0, "{out}{err}");
    }
    let all = runs(&a);
    assert_eq!(all.len(), 2, "{all:?}");
    let fleet = &all[1];
    assert_eq!(fleet["command"], "stack apply -runner", "{fleet}");
    assert_eq!(fleet["outcome"], "success", "{fleet}");
    let runner_names = fleet["runners"].as_array().unwrap();
    let id = fleet["id"].as_str().unwrap().to_string();
    let full: Value = serde_json::from_str(&a.ok(&["stack", "history", &id, "-json"])).unwrap();
    let steps = full["steps"].as_array().unwrap();
    // One item per component of each deployment, each finished by one of the runners.
    assert_eq!(steps.len(), 4, "{full:#}");
    for s in steps {
        assert_eq!(s["status"], "done", "{s}");
        assert!(runner_names.contains(&s["runner"]), "{s} {runner_names:?}");
    }
    let prod_second = components(&full)
        .into_iter()
        .find(|c| c["deployment"] == "prod" && c["component"] == "second")
        .unwrap();
    assert_eq!(prod_second["status"], "applied", "{prod_second}");
    assert_eq!(prod_second["runs"].as_array().unwrap().len(), 1);
    // A runner killed mid-item: the run still ends as one record, the item done by the
    // runner that took it over, and the killed runner among the run's runners.
    let deploy3 = "deployment \"dev\" {\n  inputs = { prefix = \"dev3\" }\n}\ndeployment \"prod\" {\n  inputs = { prefix = \"prod3\" }\n}\n";
    for c in [&r1, &r2] {
        std::fs::write(c.dir.path().join("deploy.tfdeploy.hcl"), deploy3).unwrap();
    }
    let mut victim = r1.spawn(&["stack", "apply", "-runner", "-auto-approve"]);
    let victim_pid = victim.id();
    wait_for("the first runner's claim", Duration::from_secs(60), || {
        server
            .psql(&format!(
                "SELECT count(*) FROM \"{schema}\".cairn_stack_claims WHERE runner LIKE '%:{victim_pid}:%'"
            ))
            .is_ok_and(|n| n != "0")
    });
    std::thread::sleep(Duration::from_millis(150));
    victim.kill().unwrap();
    let _ = finish(victim);
    let (code, out, err) = finish(r2.spawn(&["stack", "apply", "-runner", "-auto-approve"]));
    assert_eq!(code, 0, "{out}{err}");
    let all = runs(&a);
    let last = all.last().unwrap();
    assert_eq!(last["outcome"], "success", "{last}");
    let names = last["runners"].as_array().unwrap();
    assert!(
        names
            .iter()
            .any(|n| n.as_str().unwrap().contains(&format!(":{victim_pid}:"))),
        "the killed runner is named among the run's runners: {last}"
    );
    let full: Value =
        serde_json::from_str(&a.ok(&["stack", "history", last["id"].as_str().unwrap(), "-json"]))
            .unwrap();
    let mut items: Vec<String> = full["steps"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["status"] == "done")
        .map(|s| s["item"].as_str().unwrap().to_string())
        .collect();
    items.sort();
    items.dedup();
    assert_eq!(items.len(), 4, "{full:#}");

    let text = a.ok(&["stack", "history", &id]);
    assert!(
        text.contains("component.second (prod): done by runner"),
        "{text}"
    );
    assert!(
        a.ok(&["stack", "history"]).contains("4 work items by"),
        "{}",
        a.ok(&["stack", "history"])
    );

    // A configuration error before the first round: a failed stack run in the schema, its
    // error at its place, seen from the other working copy.
    let path = a.dir.path().join("stack.tfcomponent.hcl");
    let text = std::fs::read_to_string(&path).unwrap();
    let bad = text.replacen("value = \"v\"", "value = var.nope", 1);
    std::fs::write(&path, &bad).unwrap();
    let (code, _, err) = a.run(&["stack", "apply", "-auto-approve"]);
    assert_eq!(code, 1, "{err}");
    let line = bad.lines().position(|l| l.contains("var.nope")).unwrap() + 1;
    let at = format!("stack.tfcomponent.hcl:{line}:");
    assert!(err.contains(&at), "{at}: {err}");
    let last = runs(&b).pop().unwrap();
    assert_eq!(
        (last["command"].as_str(), last["outcome"].as_str()),
        (Some("stack apply"), Some("failed")),
        "{last}"
    );
    let diags = last["diagnostics"].as_array().unwrap();
    assert!(
        diags
            .iter()
            .any(|d| d["location"].as_str().is_some_and(|l| l.starts_with(&at))),
        "{last}"
    );

    // A local stack apply killed mid-round (SIGKILL): its record in the schema names the
    // component runs it began, interrupted, as seen from the other working copy; the next
    // apply converges.
    std::fs::write(&path, &text).unwrap();
    let begun = || {
        server
            .psql(&format!(
                "SELECT count(*) FROM \"{schema}\".cairn_stack_history \
                 WHERE convert_from(data, 'UTF8') LIKE '%\"round_run_begun\"%'"
            ))
            .unwrap()
            .parse::<usize>()
            .unwrap()
    };
    let before = begun();
    let mut slow = copy(deploy);
    std::fs::write(slow.dir.path().join("deploy.tfdeploy.hcl"), deploy3).unwrap();
    slow.env.push(("SIM_LATENCY_MS".into(), "4000".into()));
    let mut killed = slow.spawn(&["stack", "apply", "-auto-approve"]);
    wait_for("a component run begun", Duration::from_secs(60), || {
        begun() >= before + 2
    });
    std::thread::sleep(Duration::from_millis(300));
    killed.kill().unwrap();
    let _ = finish(killed);
    let last = runs(&b).pop().unwrap();
    assert_eq!(last["outcome"], "unfinished", "{last}");
    let full: Value =
        serde_json::from_str(&b.ok(&["stack", "history", last["id"].as_str().unwrap(), "-json"]))
            .unwrap();
    let steps = full["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 1, "{full:#}");
    assert_eq!(steps[0]["status"], "interrupted", "{full:#}");
    let left = components(&full);
    assert_eq!(left.len(), 2, "{full:#}");
    for c in &left {
        assert_eq!(c["status"], "interrupted", "{c}");
        let ws = c["workspace"].as_str().unwrap();
        let mut cmd = b.command(&["history", "-json"]);
        cmd.env("TF_WORKSPACE", ws);
        let out = cmd.output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        let run = c["runs"][0].clone();
        assert!(
            text.lines()
                .map(|l| serde_json::from_str::<Value>(l).unwrap())
                .any(|h| h["id"] == run && h["outcome"] == "unfinished"),
            "run {run} unfinished in {ws}: {text}"
        );
    }
    slow.env.retain(|(k, _)| k != "SIM_LATENCY_MS");
    slow.ok(&["stack", "apply", "-auto-approve"]);
    let (code, out, err) = slow.run(&["stack", "plan", "-detailed-exitcode"]);
    assert_eq!(code, 0, "no changes after convergence: {out}{err}");
    assert_eq!(runs(&b).pop().unwrap()["outcome"], "success");
}
