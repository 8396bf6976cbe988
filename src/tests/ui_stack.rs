//! Issue 33: `cairn ui` in a stack's directory — the stack, its deployments and components
//! with each component instance's state, the stack runs, and one click away each
//! component's own history and state — over plain HTTP and in headless Chromium.

use super::stack_fixtures::{write_files, RUN_STACK};
use super::{browser_available, cairn, drive_browser, start_ui_with};
use std::path::Path;

fn stack_with_runs() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    write_files(d, &RUN_STACK);
    for args in [
        &["stack", "init"][..],
        &["stack", "apply", "-auto-approve"],
        &["stack", "plan"],
    ] {
        let (code, out) = stack_cairn(d, args);
        assert_eq!(code, 0, "cairn {args:?}: {out}");
    }
    tmp
}

fn stack_cairn(d: &Path, args: &[&str]) -> (i32, String) {
    let store = d.join("sim-store");
    cairn(d, args, &[("SIM_STORE", store.to_str().unwrap())])
}

#[test]
fn the_stack_view_over_http_and_in_headless_chromium() {
    let tmp = stack_with_runs();
    let d = tmp.path();
    let store = d.join("sim-store");
    let ui = start_ui_with(d, &["ui"], &[("SIM_STORE", store.to_str().unwrap())]);

    // The stack: deployments, components, each instance's state; the stack runs.
    let s = ui.json("/api/stack");
    let deployments: Vec<&str> = s["deployments"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["name"].as_str().unwrap())
        .collect();
    assert_eq!(deployments, ["dev", "prod"], "{s}");
    let prod = &s["deployments"][1]["components"];
    let app = prod
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "app")
        .unwrap();
    assert_eq!(app["depends_on"], serde_json::json!(["net"]), "{app}");
    let us = app["instances"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["workspace"] == "prod.app.us")
        .expect("prod's app[\"us\"] has a state");
    assert_eq!(us["address"], "component.app[\"us\"]");
    assert_eq!(us["state"]["resources"], 1, "{us}");
    assert_eq!(us["state"]["last_run"]["command"], "stack apply", "{us}");
    assert_eq!(us["state"]["last_run"]["outcome"], "success", "{us}");
    let runs = s["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2, "{s}");
    assert_eq!(runs[0]["command"], "stack plan");
    assert_eq!(runs[1]["command"], "stack apply");
    assert_eq!(runs[1]["outcome"], "success");

    // A stack run, with its rounds and each component instance's runs.
    let id = runs[1]["id"].as_str().unwrap();
    let r = ui.json(&format!("/api/stack/run/{id}"));
    assert_eq!(r["steps"].as_array().unwrap().len(), 3, "{r}");
    let first = r["steps"][0]["instances"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["workspace"] == "dev.net")
        .unwrap()
        .clone();
    assert_eq!(first["status"], "applied", "{first}");
    let run_id = first["runs"][0].as_u64().unwrap();

    // Every view of the UI for one component instance's state: `?ws=STATE`.
    let t = ui.json("/api/timeline?ws=dev.net");
    assert!(
        t["runs"]
            .as_array()
            .unwrap()
            .iter()
            .any(|x| x["id"] == run_id && x["command"] == "stack apply"),
        "{t}"
    );
    let run = ui.json(&format!("/api/run/{run_id}?ws=dev.net"));
    assert_eq!(run["command"], "stack apply", "{run}");
    let state = ui.json("/api/state?ws=prod.app.us");
    assert!(state.to_string().contains("sim_thing.app"), "{state}");
    // Only the stack's own states: anything else is refused.
    for bad in ["nope", "..%2F..", "dev.nothing"] {
        let (status, body) = ui.get(&format!("/api/timeline?ws={bad}"));
        assert_eq!(status, 404, "{bad}: {body}");
    }
    let (status, _) = ui.get("/api/stack/run/nope");
    assert_eq!(status, 404);

    in_the_browser(&ui.url, d);

    // A stack apply stopped by a configuration error is a failed run whose record carries
    // the error at its place.
    let path = d.join("stack.tfcomponent.hcl");
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, text.replace("component.net.id", "component.nope.id")).unwrap();
    let (code, out) = stack_cairn(d, &["stack", "apply", "-auto-approve"]);
    assert_eq!(code, 1, "{out}");
    let (_, list) = stack_cairn(d, &["stack", "history", "-json"]);
    let failed: serde_json::Value = serde_json::from_str(list.lines().last().unwrap()).unwrap();
    assert_eq!(failed["outcome"], "failed", "{failed}");
    let r = ui.json(&format!(
        "/api/stack/run/{}",
        failed["id"].as_str().unwrap()
    ));
    assert_eq!(r["outcome"], "failed", "{r}");
    assert!(
        r["diagnostics"]
            .as_array()
            .unwrap()
            .iter()
            .any(|g| g["location"]
                .as_str()
                .is_some_and(|l| l.starts_with("stack.tfcomponent.hcl:"))),
        "{r}"
    );
}

/// The stack's views in headless Chromium, a stack run landing while the page is open.
fn in_the_browser(url: &str, d: &Path) {
    if let Err(why) = browser_available() {
        assert!(
            std::env::var("CI").is_err(),
            "the browser test cannot run in CI: {why}; .ci/run installs it"
        );
        eprintln!("skipping the browser test: {why}");
        return;
    }
    let shots = drive_browser(url, Some("stack"), |line| {
        assert_eq!(line, "WAITING stack");
        let (code, out) = stack_cairn(d, &["stack", "apply", "-auto-approve"]);
        assert_eq!(code, 0, "{out}");
    });
    for name in ["stack", "stack-run"] {
        let p = shots.join(format!("{name}.png"));
        let len = std::fs::metadata(&p).map(|m| m.len()).unwrap_or(0);
        assert!(len > 10_000, "{} is missing or empty", p.display());
    }
}
