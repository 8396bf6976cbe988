//! Issue 33: `cairn ui` in a stack's directory — the stack, its deployments and components
//! with each component instance's state, the stack runs, and one click away each
//! component's own history and state — over plain HTTP and in headless Chromium.

use super::{browser_available, cairn, root, start_ui_with};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};

const COMPONENTS: &str = r#"required_providers {
  sim = { source = "hashicorp/sim" }
}

variable "prefix" {
  type = string
}

variable "regions" {
  type = set(string)
}

provider "sim" "main" {
  config {
    region = "main"
  }
}

provider "sim" "regional" {
  for_each = var.regions
  config {
    region = each.value
  }
}

component "net" {
  source    = "./modules/net"
  inputs    = { name = "${var.prefix}-net" }
  providers = { sim = provider.sim.main }
}

component "app" {
  source   = "./modules/app"
  for_each = provider.sim.regional
  inputs = {
    net_id = component.net.id
    label  = "${var.prefix}-app-${each.key}"
  }
  providers = { sim = each.value }
}

output "net_id" {
  type  = string
  value = component.net.id
}

output "apps" {
  type  = map(string)
  value = { for k, a in component.app : k => a.out }
}
"#;

const DEPLOYMENTS: &str = r#"deployment "dev" {
  inputs = {
    prefix  = "dev"
    regions = ["eu"]
  }
}

deployment "prod" {
  inputs = {
    prefix  = "prod"
    regions = ["eu", "us"]
  }
}
"#;

const NET_TF: &str = r#"terraform {
  required_providers {
    sim = { source = "hashicorp/sim" }
  }
}
variable "name" {
  type = string
}
resource "sim_thing" "net" {
  name  = var.name
  value = "net"
}
output "id" {
  value = sim_thing.net.id
}
output "name" {
  value = var.name
}
"#;

const APP_TF: &str = r#"terraform {
  required_providers {
    sim = { source = "hashicorp/sim" }
  }
}
variable "net_id" {
  type = string
}
variable "label" {
  type = string
}
resource "sim_thing" "app" {
  name  = var.label
  value = var.net_id
}
output "out" {
  value = sim_thing.app.out
}
"#;

fn stack_with_runs() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    for (p, text) in [
        ("stack.tfcomponent.hcl", COMPONENTS),
        ("deploy.tfdeploy.hcl", DEPLOYMENTS),
        ("modules/net/main.tf", NET_TF),
        ("modules/app/main.tf", APP_TF),
    ] {
        let path = d.join(p);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
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

    if let Err(why) = browser_available() {
        assert!(
            std::env::var("CI").is_err(),
            "the browser test cannot run in CI: {why}; .ci/run installs it"
        );
        eprintln!("skipping the browser test: {why}");
        return;
    }
    let shots = root().join("fixtures/ui-screenshots");
    std::fs::create_dir_all(&shots).unwrap();
    let mut node = Command::new("node")
        .arg(root().join("fixtures/ui-browser/drive.js"))
        .arg(&ui.url)
        .arg(&shots)
        .arg("stack")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("node runs");
    let mut stdin = node.stdin.take().unwrap();
    let stdout = BufReader::new(node.stdout.take().unwrap());
    let mut log = String::new();
    for line in stdout.lines() {
        let line = line.unwrap();
        log.push_str(&line);
        log.push('\n');
        if line == "WAITING stack" {
            let (code, out) = stack_cairn(d, &["stack", "apply", "-auto-approve"]);
            assert_eq!(code, 0, "{out}");
            stdin.write_all(b"go\n").unwrap();
        }
    }
    let out = node.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "the browser run failed:\n{log}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    println!("{log}");
    for name in ["stack", "stack-run"] {
        let p = shots.join(format!("{name}.png"));
        let len = std::fs::metadata(&p).map(|m| m.len()).unwrap_or(0);
        assert!(len > 10_000, "{} is missing or empty", p.display());
    }
}
