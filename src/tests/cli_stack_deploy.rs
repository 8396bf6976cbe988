//! Issue 33: what a stack's deployment configuration evaluates at run time, on the real
//! binary — `deployment_auto_approve` checks over HCP Terraform's whole `context`
//! (`context.plan.deployment`, `context.success`, `changes.defer`) and the deployment file's
//! locals; `publish_output` values that are any expression over the deployments' outputs,
//! locals and literals.

use super::project;
use super::stack_fixtures::{net_then_app, run_cairn, sim_stack, sim_stack_with, UPSTREAM_MODULE};
use std::path::Path;

fn cairn(dir: &Path, args: &[&str], store: &Path) -> (i32, String, String) {
    run_cairn(dir, args, &[("SIM_STORE", store.to_str().unwrap())])
}

/// The stack's outputs (the stack: [`components`]).
const OUTPUTS: &str = r#"output "net_id" {
  type  = string
  value = component.net.id
}
output "app_id" {
  type  = string
  value = component.app.id
}
"#;

/// `app` waits for `net`'s id: its first round defers it.
fn components() -> String {
    sim_stack(&format!("{}{OUTPUTS}", net_then_app("./m")))
}

const RULES: &str = r#"locals {
  most = 2
}
deployment_auto_approve "small" {
  check {
    condition = context.plan.changes.total <= local.most
    reason    = "${context.plan.changes.total} changes (${context.plan.changes.defer} deferred), more than ${local.most}."
  }
}
deployment_auto_approve "not_prod" {
  check {
    condition = context.plan.deployment != deployment.prod
    reason    = "Deployment ${context.plan.deployment.name} needs a person's approval."
  }
}
deployment_auto_approve "sound" {
  check {
    condition = context.success && context.plan.applyable && context.plan.replans < 3
    reason    = "The plan did not succeed."
  }
}
deployment_group "canary" {
  auto_approve_checks = [
    deployment_auto_approve.small,
    deployment_auto_approve.not_prod,
    deployment_auto_approve.sound,
  ]
}
deployment "dev" {
  inputs           = { prefix = "dev" }
  deployment_group = deployment_group.canary
}
deployment "prod" {
  inputs           = { prefix = "prod" }
  deployment_group = deployment_group.canary
}
"#;

fn names(store: &Path) -> Vec<String> {
    let mut out: Vec<String> = std::fs::read_dir(store.join("things/main"))
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| {
            let j: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(e.path()).unwrap()).unwrap();
            j["name"].as_str().unwrap().to_string()
        })
        .collect();
    out.sort();
    out
}

#[test]
fn auto_approve_checks_see_the_deployment_success_deferrals_and_locals() {
    let dir = project(&[
        ("stack.tfcomponent.hcl", &components()),
        ("deploy.tfdeploy.hcl", RULES),
        ("m/main.tf", UPSTREAM_MODULE),
    ]);
    let d = dir.path();
    let store = d.join("sim-store");
    assert_eq!(cairn(d, &["stack", "init"], &store).0, 0);
    // Round 1: net to add, app deferred (total 2 = 1 add + 1 defer). dev passes every
    // check; prod is refused by not_prod, by name. No terminal: dev alone is applied.
    let (code, out, err) = cairn(d, &["stack", "apply"], &store);
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        out.contains(
            "Deployment \"dev\": auto-approved (every check of deployment_group.canary passed)."
        ),
        "{out}"
    );
    assert!(
        out.contains(
            "Deployment \"prod\": not auto-approved by deployment_group.canary:\n  - deployment_auto_approve.not_prod: Deployment prod needs a person's approval.\n"
        ),
        "{out}"
    );
    assert_eq!(names(&store), ["dev-net"]);
    // dev alone converges without a terminal: round 2 applies app (replans = 1).
    let (code, out, err) = cairn(d, &["stack", "apply", "-deployment=dev"], &store);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(names(&store), ["dev-app", "dev-net"]);
    // A limit from a local the plan exceeds: the reason interpolates the context.
    std::fs::write(
        d.join("deploy.tfdeploy.hcl"),
        RULES
            .replace("most = 2", "most = 1")
            .replace("\"dev\" }", "\"dev2\" }"),
    )
    .unwrap();
    let (code, out, err) = cairn(d, &["stack", "apply", "-deployment=dev"], &store);
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        out.contains("  - deployment_auto_approve.small: 3 changes (1 deferred), more than 1.\n"),
        "{out}"
    );
    assert_eq!(names(&store), ["dev-app", "dev-net"]);
    // A check referring to what it may not: the error, at its place.
    std::fs::write(
        d.join("deploy.tfdeploy.hcl"),
        RULES.replace("local.most", "var.most"),
    )
    .unwrap();
    let (code, _, err) = cairn(d, &["stack", "validate"], &store);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("deploy.tfdeploy.hcl:6:"), "{err}");
}

#[test]
fn published_outputs_are_expressions_over_outputs_locals_and_literals() {
    let root = project(&[
        ("network/stack.tfcomponent.hcl", &components()),
        (
            "network/deploy.tfdeploy.hcl",
            r#"locals {
  env = "edge"
}
deployment "main" {
  inputs = { prefix = "main" }
}
deployment "backup" {
  inputs = { prefix = "backup" }
}
publish_output "summary" {
  value = "${local.env}:${deployment.main.net_id}"
}
publish_output "ids" {
  value = {
    for name, d in { main = deployment.main, backup = deployment.backup } :
    upper(name) => d.app_id
  }
}
publish_output "count" {
  value = length([deployment.main.net_id, deployment.backup.net_id]) + 40
}
"#,
        ),
        ("network/m/main.tf", UPSTREAM_MODULE),
        (
            "app/stack.tfcomponent.hcl",
            &sim_stack_with(
                "label",
                r#"component "app" {
  source    = "./m"
  inputs    = { name = "consumer", upstream = var.label }
  providers = { sim = provider.sim.main }
}
"#,
            ),
        ),
        (
            "app/deploy.tfdeploy.hcl",
            r#"upstream_input "network" {
  type   = "stack"
  source = "../network"
}
deployment "main" {
  inputs = {
    label = "${upstream_input.network.summary}/${upstream_input.network.ids["BACKUP"]}/${upstream_input.network.count}"
  }
}
"#,
        ),
        ("app/m/main.tf", UPSTREAM_MODULE),
    ]);
    let store = root.path().join("sim-store");
    let network = root.path().join("network");
    let app = root.path().join("app");
    assert_eq!(cairn(&network, &["stack", "init"], &store).0, 0);
    assert_eq!(cairn(&app, &["stack", "init"], &store).0, 0);
    let (code, out, err) = cairn(&network, &["stack", "apply", "-auto-approve"], &store);
    assert_eq!(code, 0, "{out}{err}");
    let (code, out, err) = cairn(&app, &["stack", "apply", "-auto-approve"], &store);
    assert_eq!(code, 0, "{out}{err}");
    let consumer: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(
            std::fs::read_dir(store.join("things/main"))
                .unwrap()
                .flatten()
                .find(|e| e.file_name().to_string_lossy().starts_with("consumer"))
                .unwrap()
                .path(),
        )
        .unwrap(),
    )
    .unwrap();
    assert_eq!(consumer["value"], "edge:main-net-1/backup-app-1/42");
    // A published value referring to what it may not: at its place.
    std::fs::write(
        network.join("deploy.tfdeploy.hcl"),
        "deployment \"main\" {\n  inputs = { prefix = \"main\" }\n}\npublish_output \"x\" {\n  value = component.net.id\n}\n",
    )
    .unwrap();
    let (code, _, err) = cairn(&network, &["stack", "validate"], &store);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("deploy.tfdeploy.hcl:5:"), "{err}");
}

#[test]
fn checks_and_published_values_may_not_read_stores_directly() {
    let deploy = r#"store "env" "creds" {}
locals {
  token_set = store.env.creds.TOKEN != ""
}
deployment_auto_approve "x" {
  check {
    condition = store.env.creds.TOKEN == "" && local.token_set
    reason    = "no"
  }
}
deployment_group "g" {
  auto_approve_checks = [deployment_auto_approve.x]
}
deployment "dev" {
  inputs           = { prefix = "dev" }
  deployment_group = deployment_group.g
}
publish_output "p" {
  value = store.env.creds.TOKEN
}
"#;
    let dir = project(&[
        ("stack.tfcomponent.hcl", &components()),
        ("deploy.tfdeploy.hcl", deploy),
        ("m/main.tf", UPSTREAM_MODULE),
    ]);
    let d = dir.path();
    let (code, _, err) = cairn(d, &["stack", "validate"], &d.join("sim-store"));
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("An auto-approve check may not refer to store directly"),
        "{err}"
    );
    assert!(err.contains("deploy.tfdeploy.hcl:7:17"), "{err}");
    assert!(
        err.contains("A publish_output value may not refer to store directly"),
        "{err}"
    );
    assert!(err.contains("deploy.tfdeploy.hcl:19:11"), "{err}");
    assert_eq!(
        err.matches("Error:").count(),
        2,
        "the local may read the store: {err}"
    );
}
