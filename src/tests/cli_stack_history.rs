//! Issue 33: each `stack plan`, `stack apply` and `stack destroy` is one record in the
//! stack's history (`cairn stack history [RUN] [-json]`), linking each component instance's
//! runs in its own state's history; a stack run killed midway shows as unfinished, with the
//! component runs it left unfinished named as interrupted.

use super::stacks::{cairn_env, run_stack, sim};
use serde_json::Value;
use std::path::Path;
use std::process::{Command, Stdio};

/// `stack history -json`: one object per line.
fn runs(dir: &Path) -> Vec<Value> {
    let (code, out, err) = sim(dir, &["stack", "history", "-json"]);
    assert_eq!(code, 0, "{out}{err}");
    out.lines()
        .map(|l| serde_json::from_str(l).expect("one JSON object per line"))
        .collect()
}

fn run(dir: &Path, id: &str) -> Value {
    let (code, out, err) = sim(dir, &["stack", "history", id, "-json"]);
    assert_eq!(code, 0, "{out}{err}");
    serde_json::from_str(&out).unwrap()
}

/// A component state's own history (`TF_WORKSPACE=STATE cairn history -json`).
fn component_history(dir: &Path, workspace: &str) -> Vec<Value> {
    let store = dir.join("sim-store");
    let (code, out, err) = cairn_env(
        dir,
        &["history", "-json"],
        &[
            ("SIM_STORE", store.to_str().unwrap()),
            ("TF_WORKSPACE", workspace),
        ],
    );
    assert_eq!(code, 0, "{out}{err}");
    out.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The component instance `address` of `deployment` in step `step` of a run.
fn component<'a>(run: &'a Value, step: usize, deployment: &str, address: &str) -> &'a Value {
    run["steps"][step]["components"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["deployment"] == deployment && c["address"] == address)
        .unwrap_or_else(|| panic!("{deployment} {address} in step {step}: {run:#}"))
}

#[test]
fn each_stack_run_is_one_record_linking_its_component_runs() {
    let dir = run_stack();
    let d = dir.path();
    let (code, out, err) = sim(d, &["stack", "init"]);
    assert_eq!(code, 0, "{out}{err}");
    let (code, out, _) = sim(d, &["stack", "history"]);
    assert_eq!((code, out.as_str()), (0, "No stack runs yet.\n"));

    // An apply: three rounds, net first, the apps deferred until it is applied.
    let (code, out, err) = sim(d, &["stack", "apply", "-auto-approve"]);
    assert_eq!(code, 0, "{out}{err}");
    let all = runs(d);
    assert_eq!(all.len(), 1, "{all:?}");
    let r = &all[0];
    assert_eq!(r["command"], "stack apply", "{r}");
    assert_eq!(r["outcome"], "success", "{r}");
    assert_eq!(
        r["args"],
        serde_json::json!(["stack", "apply", "-auto-approve"])
    );
    assert_eq!(r["changes"]["added"], 5, "{r}");
    assert!(r["host"].is_string(), "{r}");
    assert!(r["finished"].is_string(), "{r}");
    let id = r["id"].as_str().unwrap().to_string();

    let full = run(d, &id);
    let steps = full["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 3, "{full:#}");
    assert_eq!(steps[0]["round"], 1);
    let net = component(&full, 0, "dev", "component.net");
    assert_eq!(net["status"], "applied", "{net}");
    assert_eq!(net["workspace"], "dev.net", "{net}");
    assert_eq!(net["add"], 1, "{net}");
    let app = component(&full, 0, "prod", "component.app[\"us\"]");
    assert_eq!(app["status"], "deferred", "{app}");
    assert_eq!(
        app["reason"],
        "inputs.net_id is not known until component.net is applied"
    );
    let app = component(&full, 1, "prod", "component.app[\"us\"]");
    assert_eq!(app["status"], "applied", "{app}");
    assert_eq!(app["workspace"], "prod.app.us");
    assert_eq!(
        component(&full, 2, "prod", "component.app[\"us\"]")["status"],
        "no changes"
    );

    // Each run the record names is a run of that component's own history, by this command.
    for (step, dep, addr, ws) in [
        (0, "dev", "component.net", "dev.net"),
        (1, "prod", "component.app[\"us\"]", "prod.app.us"),
        (2, "prod", "component.app[\"us\"]", "prod.app.us"),
    ] {
        let c = component(&full, step, dep, addr);
        let ids = c["runs"].as_array().unwrap();
        assert_eq!(ids.len(), 1, "{c}");
        let history = component_history(d, ws);
        let own = history
            .iter()
            .find(|h| h["id"] == ids[0])
            .unwrap_or_else(|| panic!("run {} in {ws}'s history: {history:?}", ids[0]));
        assert_eq!(own["command"], "stack apply", "{own}");
        assert_eq!(own["outcome"], "success", "{own}");
    }

    // The text: the run's line, and the run with its rounds and component runs.
    let (code, out, _) = sim(d, &["stack", "history"]);
    assert_eq!(code, 0);
    assert!(out.starts_with("STACK RUN"), "{out}");
    assert!(out.contains(&id), "{out}");
    assert!(
        out.contains("3 rounds; 5 no changes; 5 added, 0 changed, 0 destroyed"),
        "{out}"
    );
    let (code, out, _) = sim(d, &["stack", "history", &id]);
    assert_eq!(code, 0);
    assert!(
        out.starts_with(&format!("Stack run {id}: stack apply (success)")),
        "{out}"
    );
    let net_run = component(&full, 0, "dev", "component.net")["runs"][0].clone();
    assert!(
        out.contains(&format!(
            "    component.net: applied (1 added, 0 changed, 0 destroyed); state dev.net, run {net_run}\n"
        )),
        "{out}"
    );
    assert!(
        out.contains("component.app[\"eu\"]: deferred: inputs.net_id is not known until component.net is applied; state dev.app.eu"),
        "{out}"
    );

    // A plan: its component plans are plan records in each state's history, named by the run.
    let (code, out, err) = sim(d, &["stack", "plan", "-deployment=dev"]);
    assert_eq!(code, 0, "{out}{err}");
    let all = runs(d);
    assert_eq!(all.len(), 2);
    let p = &all[1];
    assert_eq!(p["command"], "stack plan");
    assert_eq!(p["deployment"], "dev");
    let full = run(d, p["id"].as_str().unwrap());
    let net = component(&full, 0, "dev", "component.net");
    assert_eq!(net["status"], "no changes", "{net}");
    let plan_id = net["plans"][0].as_str().expect("a plan record").to_string();
    let history = component_history(d, "dev.net");
    assert!(
        history.iter().any(|h| h["plan_id"] == plan_id.as_str()),
        "{history:?}"
    );
    assert!(full["steps"][0]["components"]
        .as_array()
        .unwrap()
        .iter()
        .all(|c| c["deployment"] == "dev"));

    // A round nobody approved (no terminal to ask): the run is cancelled, its plans not
    // applied, and the runs they began in the components' states are named.
    let deploy = d.join("deploy.tfdeploy.hcl");
    let text = std::fs::read_to_string(&deploy).unwrap();
    std::fs::write(
        &deploy,
        format!("{text}\ndeployment \"qa\" {{\n  inputs = {{\n    prefix  = \"qa\"\n    regions = []\n  }}\n}}\n"),
    )
    .unwrap();
    let (code, out, err) = sim(d, &["stack", "apply"]);
    assert_eq!(code, 1, "{out}{err}");
    let all = runs(d);
    let c = &all[2];
    assert_eq!(c["outcome"], "cancelled", "{c}");
    let full = run(d, c["id"].as_str().unwrap());
    let qa = component(&full, 0, "qa", "component.net");
    assert_eq!(qa["status"], "not applied", "{qa}");
    assert_eq!(qa["add"], 1, "{qa}");
    let declined = qa["runs"][0].clone();
    let history = component_history(d, "qa.net");
    let own = history.iter().find(|h| h["id"] == declined).unwrap();
    assert_eq!(own["outcome"], "interrupted", "{own}");
    std::fs::write(&deploy, text).unwrap();

    // A destroy is a run too.
    let (code, out, err) = sim(d, &["stack", "destroy", "-auto-approve"]);
    assert_eq!(code, 0, "{out}{err}");
    let all = runs(d);
    assert_eq!(all[3]["command"], "stack destroy");
    assert_eq!(all[3]["outcome"], "success");
    assert_eq!(all[3]["changes"]["destroyed"], 5, "{}", all[3]);

    // An unknown run is an error that says how to list them.
    let (code, _, err) = sim(d, &["stack", "history", "nope"]);
    assert_eq!(code, 1);
    assert!(err.contains("No such stack run"), "{err}");
}

/// Starts `cairn ARGS` (`stack apply|destroy -auto-approve`) on the run stack in `d` with
/// a sim provider whose every store call takes 4 s, and returns it once the first round's
/// component runs began (at least two: the new run's start and two begun runs in its record).
fn slow_apply(d: &Path, args: &[&str]) -> std::process::Child {
    let runs_dir = d.join(".cairn/stack-runs");
    let before: Vec<std::ffi::OsString> = std::fs::read_dir(&runs_dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    let store = d.join("sim-store");
    let child = Command::new(env!("CARGO_BIN_EXE_cairn"))
        .args(args)
        .current_dir(d)
        .env("NO_COLOR", "1")
        .env("SIM_STORE", &store)
        .env("SIM_LATENCY_MS", "4000")
        .env_remove("CAIRN_STATE_DIR")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The new run's entries.
    let entries = || -> usize {
        std::fs::read_dir(&runs_dir)
            .into_iter()
            .flatten()
            .flatten()
            .filter(|run| !before.contains(&run.file_name()))
            .flat_map(|run| {
                std::fs::read_dir(run.path())
                    .into_iter()
                    .flatten()
                    .flatten()
            })
            .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
            .count()
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while entries() < 3 {
        assert!(
            std::time::Instant::now() < deadline,
            "the component runs never began"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // Into the creates (4 s each).
    std::thread::sleep(std::time::Duration::from_millis(300));
    child
}

/// The nets' runs the last round of run `r` names (it left them unfinished): checks each is
/// `status` there, and one of `outcomes` in its state's own history.
fn nets_left(d: &Path, r: &Value, status: &str, outcomes: &[&str]) {
    let steps = r["steps"].as_array().unwrap();
    let last = steps.last().unwrap_or_else(|| panic!("no round: {r:#}"));
    assert_eq!(last["round"], steps.len(), "{r:#}");
    assert_eq!(last["status"], status, "{r:#}");
    for (dep, ws) in [("dev", "dev.net"), ("prod", "prod.net")] {
        let c = component(r, steps.len() - 1, dep, "component.net");
        assert_eq!(c["status"], status, "{c}");
        assert_eq!(c["workspace"], ws, "{c}");
        let ids = c["runs"].as_array().unwrap();
        assert_eq!(ids.len(), 1, "{c}");
        let history = component_history(d, ws);
        let own = history
            .iter()
            .find(|h| h["id"] == ids[0])
            .unwrap_or_else(|| panic!("run {} in {ws}'s history: {history:?}", ids[0]));
        assert_eq!(own["command"], "stack apply", "{own}");
        assert!(
            outcomes.iter().any(|o| own["outcome"] == *o),
            "{outcomes:?}: {own}"
        );
    }
}

/// The next apply resolves what the stopped one left (the nets' pending creates) and
/// converges, each object made once; then a plan has nothing to do.
fn converges_after(d: &Path) {
    let (code, out, err) = sim(d, &["stack", "apply", "-auto-approve"]);
    assert_eq!(code, 0, "{out}{err}");
    let all = runs(d);
    assert_eq!(all.last().unwrap()["outcome"], "success");
    let store = d.join("sim-store");
    let main = super::stack_fixtures::sim_things(&store, "main");
    let names: Vec<&str> = main.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["dev-net", "prod-net"], "{main:?}");
    let (code, out, err) = sim(d, &["stack", "plan", "-detailed-exitcode"]);
    assert_eq!(code, 0, "no changes after convergence: {out}{err}");
}

/// A stack apply killed (SIGKILL) mid-round: its record has no end (`unfinished`), and its
/// round names the component runs it began — interrupted, each an unfinished run of its
/// component's own history — so the record links them; the next apply converges.
#[test]
fn a_stack_run_killed_midway_links_its_unfinished_component_runs() {
    let dir = run_stack();
    let d = dir.path();
    let (code, out, err) = sim(d, &["stack", "init"]);
    assert_eq!(code, 0, "{out}{err}");
    let mut child = slow_apply(d, &["stack", "apply", "-auto-approve"]);
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let all = runs(d);
    assert_eq!(all.len(), 1, "{all:?}");
    assert_eq!(all[0]["outcome"], "unfinished", "{}", all[0]);
    assert!(all[0]["finished"].is_null());
    assert_eq!(
        all[0]["summary"], "1 round (the last interrupted); 2 interrupted",
        "{}",
        all[0]
    );
    let id = all[0]["id"].as_str().unwrap().to_string();
    nets_left(d, &run(d, &id), "interrupted", &["unfinished"]);
    let (_, out, _) = sim(d, &["stack", "history"]);
    assert!(out.contains("unfinished"), "{out}");
    let (_, out, _) = sim(d, &["stack", "history", &id]);
    assert!(out.contains("\nRound 1: interrupted\n"), "{out}");
    assert!(
        out.contains("    component.net: interrupted; state dev.net, run "),
        "{out}"
    );

    converges_after(d);
    let all = runs(d);
    assert_eq!(all.len(), 3);
    assert_eq!(all[0]["outcome"], "unfinished");

    // A stack destroy too: killed in its first round, it names the runs it began; the next
    // destroy resolves them and finishes.
    let mut child = slow_apply(d, &["stack", "destroy", "-auto-approve"]);
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let all = runs(d);
    let last = all.last().unwrap();
    assert_eq!(
        (last["command"].as_str(), last["outcome"].as_str()),
        (Some("stack destroy"), Some("unfinished")),
        "{last}"
    );
    let full = run(d, last["id"].as_str().unwrap());
    let steps = full["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 1, "{full:#}");
    assert_eq!(steps[0]["status"], "interrupted", "{full:#}");
    let left = steps[0]["components"].as_array().unwrap();
    assert!(left.len() >= 2, "{full:#}");
    for c in left {
        assert_eq!(c["status"], "interrupted", "{c}");
        let ws = c["workspace"].as_str().unwrap();
        let history = component_history(d, ws);
        let own = history.iter().find(|h| h["id"] == c["runs"][0]).unwrap();
        assert_eq!(
            (own["command"].as_str(), own["outcome"].as_str()),
            (Some("stack destroy"), Some("unfinished")),
            "{own}"
        );
    }
    let (code, out, err) = sim(d, &["stack", "destroy", "-auto-approve"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(super::stack_fixtures::sim_things(&d.join("sim-store"), "main").is_empty());
    assert_eq!(runs(d).last().unwrap()["outcome"], "success");
}

/// Ctrl-C twice mid-round abandons the running steps: the stack run ends `interrupted` (not
/// unfinished), its round naming the component runs it left unfinished; one Ctrl-C lets the
/// steps finish and the run ends `interrupted` with its round recorded. Either way the next
/// apply converges.
#[test]
fn an_interrupted_stack_run_is_recorded_as_interrupted_with_its_component_runs() {
    let dir = run_stack();
    let d = dir.path();
    let (code, out, err) = sim(d, &["stack", "init"]);
    assert_eq!(code, 0, "{out}{err}");
    let child = slow_apply(d, &["stack", "apply", "-auto-approve"]);
    let pid = child.id() as libc::pid_t;
    unsafe { libc::kill(pid, libc::SIGINT) };
    std::thread::sleep(std::time::Duration::from_millis(300));
    unsafe { libc::kill(pid, libc::SIGINT) };
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("Run abandoned"), "{err}");
    let all = runs(d);
    assert_eq!(all.len(), 1, "{all:?}");
    assert_eq!(all[0]["outcome"], "interrupted", "{}", all[0]);
    assert!(all[0]["finished"].is_string(), "{}", all[0]);
    let id = all[0]["id"].as_str().unwrap().to_string();
    // The abandoned steps' runs end interrupted in their states when their store closes in
    // time, else unfinished (resolved by the next run there).
    nets_left(
        d,
        &run(d, &id),
        "interrupted",
        &["interrupted", "unfinished"],
    );

    // Destroyed first so that the next run begins the creates again.
    converges_after(d);
    let (code, out, err) = sim(d, &["stack", "destroy", "-auto-approve"]);
    assert_eq!(code, 0, "{out}{err}");
    let child = slow_apply(d, &["stack", "apply", "-auto-approve"]);
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    let all = runs(d);
    let last = all.last().unwrap();
    assert_eq!(last["outcome"], "interrupted", "{last}");
    let full = run(d, last["id"].as_str().unwrap());
    let steps = full["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 1, "{full:#}");
    assert!(steps[0]["status"].is_null(), "its round ended: {full:#}");
    for (dep, ws) in [("dev", "dev.net"), ("prod", "prod.net")] {
        let c = component(&full, 0, dep, "component.net");
        let history = component_history(d, ws);
        let own = history.iter().find(|h| h["id"] == c["runs"][0]).unwrap();
        assert_ne!(own["outcome"], "unfinished", "{own}");
    }
    converges_after(d);
}

/// A configuration error found before the first round is a failed stack run of its own,
/// carrying the errors where they are (`FILE:LINE:COL`), as HCP Terraform shows a failed
/// stack run with its diagnostics; before `stack init` recorded the backend, nothing is.
#[test]
fn a_configuration_error_is_a_failed_stack_run_with_its_diagnostics() {
    let dir = run_stack();
    let d = dir.path();
    // Not initialized: the error alone, and no history made for it.
    let text = std::fs::read_to_string(d.join("stack.tfcomponent.hcl")).unwrap();
    let bad = text.replace(
        "component \"app\" {\n",
        "component \"app\" {\n  depends_on = [component.nope]\n",
    );
    std::fs::write(d.join("stack.tfcomponent.hcl"), &bad).unwrap();
    let (code, _, err) = sim(d, &["stack", "apply", "-auto-approve"]);
    assert_eq!(code, 1, "{err}");
    assert!(!d.join(".cairn").exists(), "nothing recorded before init");

    std::fs::write(d.join("stack.tfcomponent.hcl"), &text).unwrap();
    let (code, out, err) = sim(d, &["stack", "init"]);
    assert_eq!(code, 0, "{out}{err}");
    // An unknown component in depends_on (apply), then a parse error (plan).
    std::fs::write(d.join("stack.tfcomponent.hcl"), &bad).unwrap();
    let (code, _, err) = sim(d, &["stack", "apply", "-auto-approve"]);
    assert_eq!(code, 1, "{err}");
    let line = bad
        .lines()
        .position(|l| l.contains("component.nope"))
        .unwrap()
        + 1;
    let at = format!("stack.tfcomponent.hcl:{line}:");
    assert!(err.contains(&at), "{at} in {err}");
    std::fs::write(
        d.join("stack.tfcomponent.hcl"),
        format!("{text}\ncomponent \"broken\" {{\n  source = \n"),
    )
    .unwrap();
    let (code, _, err) = sim(d, &["stack", "plan"]);
    assert_eq!(code, 1, "{err}");

    let all = runs(d);
    assert_eq!(all.len(), 2, "{all:?}");
    for (r, command) in all.iter().zip(["stack apply", "stack plan"]) {
        assert_eq!(r["command"], command, "{r}");
        assert_eq!(r["outcome"], "failed", "{r}");
        assert!(r["finished"].is_string(), "{r}");
        assert!(
            r["message"]
                .as_str()
                .unwrap()
                .contains("nothing was planned or applied"),
            "{r}"
        );
    }
    let first = run(d, all[0]["id"].as_str().unwrap());
    let diags = first["diagnostics"].as_array().unwrap();
    assert!(!diags.is_empty(), "{first:#}");
    assert!(
        diags.iter().any(|g| g["severity"] == "Error"
            && g["location"].as_str().is_some_and(|l| l.starts_with(&at))
            && (g["detail"].as_str().unwrap().contains("nope")
                || g["summary"].as_str().unwrap().contains("nope"))),
        "{first:#}"
    );
    assert!(first["steps"].as_array().unwrap().is_empty(), "{first:#}");
    let second = run(d, all[1]["id"].as_str().unwrap());
    let parse = &second["diagnostics"][0];
    assert!(
        parse["location"]
            .as_str()
            .is_some_and(|l| l.starts_with("stack.tfcomponent.hcl:")),
        "{second:#}"
    );
    // The text says it too, place kept.
    let (code, out, err) = sim(d, &["stack", "history", all[0]["id"].as_str().unwrap()]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("stack apply (failed)"), "{out}");
    assert!(out.contains(&format!("on {at}")), "{out}");
    let (_, list, _) = sim(d, &["stack", "history"]);
    assert_eq!(list.matches("failed").count(), 2, "{list}");
}
