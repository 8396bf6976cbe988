//! Issue 33's Terraform Stacks configuration language on the real binary: `cairn stack
//! validate` on a stack with components wired through outputs, `for_each` on a component and
//! on a provider, two deployments, a deployment group with an auto-approve rule, a store and a
//! published output; and every kind of mistake, reported at its file:line:col.

use super::stack_fixtures::{
    run_cairn, sim_stack, sim_stack_with, sim_things, APP_TF, NET_TF, RUN_COMPONENTS,
    RUN_DEPLOYMENTS, RUN_STACK,
};
use super::{check_golden, project};
use std::path::Path;
use std::process::Command;

fn cairn(dir: &Path, args: &[&str]) -> (i32, String, String) {
    cairn_env(dir, args, &[])
}

pub(super) fn cairn_env(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    run_cairn(dir, args, env)
}

const COMPONENTS: &str = r#"required_providers {
  sim = {
    source = "hashicorp/sim"
  }
}

provider "sim" "main" {
  config {
    region = var.region
  }
}

provider "sim" "regional" {
  for_each = toset(var.regions)
  config {
    region = each.value
  }
}

variable "region" {
  type = string
}

variable "regions" {
  type    = list(string)
  default = ["a", "b"]
}

variable "token" {
  type      = string
  ephemeral = true
  default   = ""
}

locals {
  prefix = "x-${var.region}"
}

component "net" {
  source = "./modules/net"
  inputs = {
    name = local.prefix
  }
  providers = {
    sim = provider.sim.main
  }
}

component "app" {
  source   = "./modules/app"
  for_each = provider.sim.regional
  inputs = {
    net_id = component.net.id
    names  = [for k, v in var.regions : "${k}-${v}"]
    r      = each.key
  }
  providers = {
    sim = each.value
  }
}

component "dns" {
  source     = "./modules/net"
  depends_on = [component.app]
  inputs = {
    name = "dns"
  }
  providers = {
    sim = provider.sim.main
  }
}

output "net_id" {
  type  = string
  value = component.net.id
}
"#;

const DEPLOYMENTS: &str = r#"store "env" "creds" {}

store "file" "secrets" {
  path = "secrets.json"
}

locals {
  r = "eu"
}

deployment_auto_approve "no_changes" {
  check {
    condition = context.plan.changes.total == 0
    reason    = "The plan has changes."
  }
}

deployment_group "auto" {
  auto_approve_checks = [deployment_auto_approve.no_changes]
}

deployment "dev" {
  inputs = {
    region = local.r
    token  = store.env.creds.TOKEN
  }
  deployment_group = deployment_group.auto
}

deployment "prod" {
  inputs = {
    region = "us"
    token  = store.file.secrets.token
  }
}

publish_output "net" {
  value = deployment.dev.net_id
}
"#;

#[test]
fn a_valid_stack_validates_with_its_components_in_dependency_order() {
    let dir = project(&[
        ("main.tfcomponent.hcl", COMPONENTS),
        ("deploy.tfdeploy.hcl", DEPLOYMENTS),
        ("modules/net/main.tf", "output \"id\" { value = \"n\" }\n"),
        ("modules/app/main.tf", "variable \"net_id\" {}\n"),
        ("secrets.json", "{\"token\": \"s3cr3t-value\"}"),
    ]);
    let token = [("TOKEN", "env-s3cr3t")];
    let (code, out, err) = cairn_env(dir.path(), &["stack", "validate"], &token);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(
        out,
        "Success! The stack configuration is valid: 3 component(s), 2 deployment(s).\n"
    );
    let (code, out, _) = cairn_env(dir.path(), &["stack", "validate", "-json"], &token);
    assert_eq!(code, 0);
    let j: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(j["valid"], true);
    assert_eq!(
        j["components"],
        serde_json::json!([
            {"name": "app", "depends_on": ["net"]},
            {"name": "dns", "depends_on": ["app"]},
            {"name": "net", "depends_on": []},
        ])
    );
    assert_eq!(j["deployments"], serde_json::json!(["dev", "prod"]));
}

#[test]
fn stack_mistakes_are_reported_at_their_place() {
    let dir = project(&[
        (
            "a.tfcomponent.hcl",
            r#"variable "region" {
  default = "x"
}

component "a" {
  source = "./m"
  inputs = {
    x = component.b.out
    y = var.regoin
  }
  version = "1.0"
}

component "b" {
  source     = "./m"
  depends_on = [component.a]
  inputs = {
    z = each.key
    w = module.x.y
  }
}

component "b" {
  source = "./m"
}

provider "sim" "p" {
  config {}
}

removed {
  from   = component.a
  source = "./m"
}

resource "sim_thing" "x" {}
"#,
        ),
        ("list.json", "[\"s3cr3t-value\"]"),
        (
            "d.tfdeploy.hcl",
            r#"identity_token "aws" {
  audience = ["x"]
}

store "varset" "v" {
  id = "x"
}

deployment "dev" {
  inputs = {
    regon = "x"
  }
  deployment_group = deployment_group.nope
}

deployment "prod" {
  inputs = {}
}

upstream_input "net" {
  type   = "stack"
  source = "../nothere"
}

publish_output "x" {
  value = deployment.dev.nope
}

store "file" "missing" {
  path = "missing.json"
}

store "file" "notobject" {
  path = "list.json"
}

deployment_group "g" {}

component "c" {
  source = "./m"
}
"#,
        ),
    ]);
    let (code, out, err) = cairn(dir.path(), &["stack", "validate"]);
    assert_eq!(code, 1, "{out}");
    assert_eq!(out, "");
    check_golden("stack_validate_errors.txt", &err);
    assert!(
        !err.contains("s3cr3t"),
        "a store's contents are never printed"
    );
}

#[test]
fn deployment_inputs_are_evaluated_against_the_variables_types() {
    let deploy = DEPLOYMENTS.replace("region = \"us\"", "region = \"us\"\n    regions = local.r");
    let dir = project(&[
        ("main.tfcomponent.hcl", COMPONENTS),
        ("deploy.tfdeploy.hcl", &deploy),
        ("secrets.json", "{\"token\": \"s3cr3t-value\"}"),
    ]);
    // TOKEN is not in the environment: store.env.creds.TOKEN names nothing.
    let (code, _, err) = cairn(dir.path(), &["stack", "validate"]);
    assert_eq!(code, 1);
    assert!(
        err.contains("on deploy.tfdeploy.hcl:25:29:")
            && err.contains("This object does not have an attribute named \"TOKEN\"."),
        "{err}"
    );
    assert!(
        err.contains("Error: Invalid value for input variable")
            && err.contains("on deploy.tfdeploy.hcl:33:15:")
            && err.contains(
                "The given value is not suitable for var.regions declared at \
                 main.tfcomponent.hcl:24,1-9: list of string required."
            ),
        "{err}"
    );
    assert!(!err.contains("s3cr3t"), "{err}");
}

#[test]
fn a_deployment_file_without_deployments_is_an_error() {
    let dir = project(&[
        (
            "c.tfcomponent.hcl",
            "component \"a\" {\n  source = \"./m\"\n}\n",
        ),
        ("d.tfdeploy.hcl", "locals {\n  x = 1\n}\n"),
    ]);
    let (code, _, err) = cairn(dir.path(), &["stack", "validate"]);
    assert_eq!(code, 1);
    assert!(err.contains("Error: No deployment blocks"), "{err}");
}

#[test]
fn a_directory_without_component_files_is_not_a_stack() {
    let dir = project(&[("main.tf", "")]);
    let (code, _, err) = cairn(dir.path(), &["stack", "validate"]);
    assert_eq!(code, 1);
    assert!(
        err.contains("Error: No component configuration files"),
        "{err}"
    );
    assert!(err.contains("NAME.tfcomponent.hcl"), "{err}");
}

// ---- Running a stack: `stack init | plan | apply | destroy | show | output` ----

pub(super) fn run_stack() -> tempfile::TempDir {
    project(&RUN_STACK)
}

/// Runs cairn with the sim provider's store in the project.
pub(super) fn sim(dir: &Path, args: &[&str]) -> (i32, String, String) {
    let store = dir.join("sim-store");
    cairn_env(dir, args, &[("SIM_STORE", store.to_str().unwrap())])
}

/// The sim objects of a region: (name, value) of each.
fn things(dir: &Path, region: &str) -> Vec<(String, String)> {
    sim_things(&dir.join("sim-store"), region)
}

#[test]
fn a_stack_applies_in_rounds_until_its_deferred_components_converge() {
    let dir = run_stack();
    let d = dir.path();
    let (code, out, err) = sim(d, &["stack", "init"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("- component.net: ./modules/net in modules/net"),
        "{out}"
    );
    assert!(out.contains("- Backend: local"), "{out}");

    // The plan: net is planned, app waits for net's id, in both deployments.
    let (code, out, err) = sim(d, &["stack", "plan", "-detailed-exitcode"]);
    assert_eq!(code, 2, "{out}{err}");
    assert!(out.contains("Deployment \"dev\""), "{out}");
    assert!(out.contains("Deployment \"prod\""), "{out}");
    assert!(
        out.contains("component.app[\"us\"]: deferred: inputs.net_id is not known until component.net is applied."),
        "{out}"
    );
    assert!(
        out.contains("component.net: 1 to add, 0 to change, 0 to destroy."),
        "{out}"
    );
    assert!(out.contains("+ name  = \"prod-net\""), "{out}");
    assert!(
        out.contains("Stack plan: 2 to add, 0 to change, 0 to destroy in 2 component instances; 0 unchanged; 3 deferred."),
        "{out}"
    );
    // Nothing was written by the plan.
    assert!(things(d, "main").is_empty());

    // -json: each instance's status and the totals.
    let (code, out, err) = sim(d, &["stack", "plan", "-json"]);
    assert_eq!(code, 0, "{out}{err}");
    let doc: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(doc["totals"]["deferred"], 3, "{out}");
    let prod = doc["deployments"]["prod"].as_array().unwrap();
    assert_eq!(prod[0]["address"], "component.net", "{out}");
    assert_eq!(prod[0]["status"], "planned", "{out}");
    assert_eq!(
        prod[0]["resource_changes"][0]["address"], "sim_thing.net",
        "{out}"
    );
    assert_eq!(prod[1]["status"], "deferred", "{out}");

    // Apply: round 1 applies net, round 2 the apps with net's id, round 3 finds nothing.
    let (code, out, err) = sim(d, &["stack", "apply", "-auto-approve", "-parallelism=3"]);
    assert_eq!(code, 0, "{out}{err}");
    let r2 = out.find("Round 2").expect("a second round");
    let r3 = out.find("Round 3").expect("a third round");
    assert!(
        out[..r2].contains("component.net (prod): Apply complete! Resources: 1 added"),
        "{out}"
    );
    assert!(
        out[r2..r3].contains("component.app[\"us\"] (prod): Apply complete! Resources: 1 added"),
        "{out}"
    );
    assert!(
        out.contains(
            "Stack apply complete! Resources: 5 added, 0 changed, 0 destroyed, in 3 rounds."
        ),
        "{out}"
    );
    assert!(out.contains("net_id = \"prod-net-1\""), "{out}");

    // Each deployment got its own inputs; each app got its deployment's net id.
    assert_eq!(
        things(d, "main"),
        vec![
            ("dev-net".to_string(), "net".to_string()),
            ("prod-net".to_string(), "net".to_string())
        ]
    );
    assert_eq!(
        things(d, "us"),
        vec![("prod-app-us".into(), "prod-net-1".into())]
    );
    assert_eq!(
        things(d, "eu"),
        vec![
            ("dev-app-eu".into(), "dev-net-1".into()),
            ("prod-app-eu".into(), "prod-net-1".into())
        ]
    );
    // Every component instance is a state of its own.
    for w in [
        "dev.net",
        "dev.app.eu",
        "prod.net",
        "prod.app.eu",
        "prod.app.us",
    ] {
        assert!(
            d.join(".cairn/workspaces").join(w).join("log").is_dir(),
            "{w}"
        );
    }

    // A second plan has nothing to do.
    let (code, out, err) = sim(d, &["stack", "plan", "-detailed-exitcode"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("Stack plan: 0 to add, 0 to change, 0 to destroy in 0 component instances; 5 unchanged."),
        "{out}"
    );

    // Outputs per deployment.
    let (code, out, _) = sim(d, &["stack", "output", "-deployment=prod", "net_id"]);
    assert_eq!((code, out.as_str()), (0, "prod-net-1\n"));
    let (code, out, _) = sim(d, &["stack", "output", "-deployment=dev", "-json"]);
    assert_eq!(code, 0, "{out}");
    let doc: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(doc["apps"]["value"]["eu"], "dev-app-eu/dev-net-1", "{out}");
    let (code, _, err) = sim(d, &["stack", "output", "-deployment=dev", "nope"]);
    assert_eq!(code, 1);
    assert!(err.contains("Output not found"), "{err}");

    // show: each instance, its resources and outputs.
    let (code, out, _) = sim(d, &["stack", "show", "-deployment=prod"]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("component.app[\"us\"] (1 resource instance"),
        "{out}"
    );
    assert!(out.contains("  sim_thing.app"), "{out}");
    assert!(out.contains("  output id = \"prod-net-1\""), "{out}");
    assert!(!out.contains("Deployment \"dev\""), "{out}");

    // destroy: apps before net, everything gone.
    let (code, out, err) = sim(d, &["stack", "destroy", "-auto-approve"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("Stack destroy complete! Resources: 0 added, 0 changed, 5 destroyed"),
        "{out}"
    );
    assert!(things(d, "main").is_empty() && things(d, "eu").is_empty());
    let (_, out, _) = sim(d, &["stack", "show"]);
    assert!(out.contains("The stack has no state yet"), "{out}");
}

#[test]
fn removed_blocks_and_removed_keys_destroy_their_component_instances() {
    let dir = run_stack();
    let d = dir.path();
    assert_eq!(sim(d, &["stack", "init"]).0, 0);
    let (code, out, err) = sim(d, &["stack", "apply", "-auto-approve"]);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(things(d, "us").len(), 1);

    // A key gone from the for_each: that instance is destroyed, the others stay.
    let fewer = RUN_DEPLOYMENTS.replace(r#"["eu", "us"]"#, r#"["eu"]"#);
    std::fs::write(d.join("deploy.tfdeploy.hcl"), fewer).unwrap();
    let (code, out, err) = sim(d, &["stack", "plan", "-deployment=prod"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("component.app[\"us\"] (removed): 0 to add, 0 to change, 1 to destroy."),
        "{out}"
    );
    assert!(!out.contains("Deployment \"dev\""), "{out}");
    let (code, out, err) = sim(d, &["stack", "apply", "-auto-approve"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(things(d, "us").is_empty());
    assert_eq!(things(d, "eu").len(), 2);

    // A component block deleted without a removed block: refused, nothing destroyed.
    let without_app = {
        let i = RUN_COMPONENTS.find("component \"app\"").unwrap();
        let j = RUN_COMPONENTS.find("output \"net_id\"").unwrap();
        let k = RUN_COMPONENTS.find("output \"apps\"").unwrap();
        format!("{}{}", &RUN_COMPONENTS[..i], &RUN_COMPONENTS[j..k])
    };
    std::fs::write(d.join("stack.tfcomponent.hcl"), &without_app).unwrap();
    let (code, _, err) = sim(d, &["stack", "plan"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("Unclaimed component instance"), "{err}");
    assert!(err.contains("add a removed block"), "{err}");

    // With a removed block: its instances are destroyed in every deployment.
    let removed = format!(
        "{without_app}\nremoved {{\n  from   = component.app\n  source = \"./modules/app\"\n}}\n"
    );
    std::fs::write(d.join("stack.tfcomponent.hcl"), removed).unwrap();
    let (code, out, err) = sim(d, &["stack", "apply", "-auto-approve"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("component.app[\"eu\"] (removed): 0 to add, 0 to change, 1 to destroy."),
        "{out}"
    );
    assert!(
        out.contains("Resources: 0 added, 0 changed, 2 destroyed"),
        "{out}"
    );
    assert!(things(d, "eu").is_empty());
    assert_eq!(things(d, "main").len(), 2);
    let (code, out, _) = sim(d, &["stack", "plan", "-detailed-exitcode"]);
    assert_eq!(code, 0, "{out}");
}

#[test]
fn stack_apply_without_a_terminal_asks_for_auto_approve() {
    let dir = run_stack();
    let d = dir.path();
    assert_eq!(sim(d, &["stack", "init"]).0, 0);
    let (code, _, err) = sim(d, &["stack", "apply"]);
    assert_eq!(code, 1);
    assert!(err.contains("-auto-approve"), "{err}");
    assert!(things(d, "main").is_empty());
    let (code, _, err) = sim(d, &["stack", "plan", "-deployment=qa"]);
    assert_eq!(code, 1);
    assert!(err.contains("no deployment named \"qa\""), "{err}");
}

/// A runner of a fleet (`stack apply -runner`) shares the work through PostgreSQL: on the
/// local backend it is refused with what to do, and `stack destroy` takes no `-runner`.
/// (The fleet itself runs in `src/tests/pg.rs` against a real server.)
#[test]
fn a_runner_needs_the_pg_backend() {
    let dir = run_stack();
    let d = dir.path();
    assert_eq!(sim(d, &["stack", "init"]).0, 0);
    let (code, _, err) = sim(d, &["stack", "apply", "-runner", "-auto-approve"]);
    assert_eq!(code, 1);
    assert!(err.contains("A runner needs the pg backend"), "{err}");
    assert!(err.contains("cairn stack init -backend=pg"), "{err}");
    let (code, _, err) = sim(d, &["stack", "destroy", "-runner", "-auto-approve"]);
    assert_eq!(code, 1);
    assert!(err.contains("A runner needs the pg backend"), "{err}");
    assert!(things(d, "main").is_empty());
}

#[test]
fn a_saved_stack_plan_applies_once_and_a_stale_one_is_refused() {
    let dir = run_stack();
    let d = dir.path();
    assert_eq!(sim(d, &["stack", "init"]).0, 0);
    let (code, out, err) = sim(d, &["stack", "plan", "-out=stack.plan"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("Saved the plans of 2 component instances to stack.plan."),
        "{out}"
    );
    // Applied without asking (as `apply FILE`), in dependency order: the two nets.
    let (code, out, err) = sim(d, &["stack", "apply", "stack.plan"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("Saved stack plan applied! Resources: 2 added, 0 changed, 0 destroyed."),
        "{out}"
    );
    assert_eq!(things(d, "main").len(), 2);
    assert!(things(d, "eu").is_empty());
    // The same file again: its states moved on.
    let (code, _, err) = sim(d, &["stack", "apply", "stack.plan"]);
    assert_eq!(code, 1);
    assert!(err.contains("Saved plan is stale"), "{err}");
    assert_eq!(things(d, "main").len(), 2);
    // The deferred apps are planned now that the nets are applied.
    let (code, out, err) = sim(d, &["stack", "plan", "-out=next.plan", "-deployment=prod"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("component.app[\"us\"]: 1 to add"), "{out}");
    let (code, out, err) = sim(d, &["stack", "apply", "next.plan"]);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(
        things(d, "us"),
        vec![("prod-app-us".into(), "prod-net-1".into())]
    );
    let (code, _, err) = sim(d, &["stack", "apply", "nope.plan"]);
    assert_eq!(code, 1);
    assert!(err.contains("Failed to read plan file"), "{err}");
}

#[test]
fn a_provider_configured_from_a_component_defers_its_users_and_their_dependents() {
    let components = r#"required_providers {
  sim = { source = "hashicorp/sim" }
}
provider "sim" "main" {
  config {
    region = "main"
  }
}
provider "sim" "dyn" {
  config {
    region = component.base.id
  }
}
component "base" {
  source    = "./m"
  inputs    = { name = "base" }
  providers = { sim = provider.sim.main }
}
component "onit" {
  source    = "./m"
  inputs    = { name = "onit" }
  providers = { sim = provider.sim.dyn }
}
component "after" {
  source     = "./m"
  depends_on = [component.onit]
  inputs     = { name = "after" }
  providers  = { sim = provider.sim.main }
}
"#;
    let dir = project(&[
        ("s.tfcomponent.hcl", components),
        ("d.tfdeploy.hcl", "deployment \"d\" {\n  inputs = {}\n}\n"),
        ("m/main.tf", NET_TF),
    ]);
    let d = dir.path();
    assert_eq!(sim(d, &["stack", "init"]).0, 0);
    let (code, out, err) = sim(d, &["stack", "plan"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("component.onit: deferred: the configuration of provider.sim.dyn is not known until component.base is applied."),
        "{out}"
    );
    assert!(
        out.contains("component.after: deferred: it depends on component.onit (itself deferred), not applied yet."),
        "{out}"
    );
    let (code, out, err) = sim(d, &["stack", "apply", "-auto-approve"]);
    assert_eq!(code, 0, "{out}{err}");
    let r2 = out.find("Round 2").unwrap();
    assert!(
        out[..r2].contains("component.base (d): Apply complete!"),
        "{out}"
    );
    assert!(
        out[r2..].contains("component.after (d): Apply complete!"),
        "{out}"
    );
    // onit's objects are in the region its provider got from base's id.
    assert_eq!(things(d, "base-1"), vec![("onit".into(), "net".into())]);
    let (code, _, _) = sim(d, &["stack", "plan", "-detailed-exitcode"]);
    assert_eq!(code, 0);
}

/// A component whose module is a git repository: `stack init` installs it as `init` installs a
/// module call (`.terraform/modules/component.NAME`, recorded in `modules.json`); before that,
/// a plan says to run it.
#[test]
fn stack_init_installs_a_components_remote_module() {
    let repos = tempfile::tempdir().unwrap();
    let work = repos.path().join("work");
    std::fs::create_dir_all(&work).unwrap();
    std::fs::write(work.join("main.tf"), NET_TF).unwrap();
    let git = |dir: &Path, args: &[&str]| {
        let ok = Command::new("git")
            .args(["-c", "user.email=t@example.com", "-c", "user.name=t"])
            .args(args)
            .current_dir(dir)
            .output()
            .expect("git runs")
            .status
            .success();
        assert!(ok, "git {args:?}");
    };
    git(&work, &["init", "-q", "-b", "main"]);
    git(&work, &["add", "-A"]);
    git(&work, &["commit", "-qm", "v1"]);
    git(&work, &["tag", "v1"]);
    git(repos.path(), &["clone", "-q", "--bare", "work", "net.git"]);
    let source = format!(
        "git::file://{}?ref=v1",
        repos.path().join("net.git").display()
    );
    let components = format!(
        "required_providers {{\n  sim = {{ source = \"hashicorp/sim\" }}\n}}\nprovider \"sim\" \"main\" {{\n  config {{\n    region = \"main\"\n  }}\n}}\ncomponent \"net\" {{\n  source    = \"{source}\"\n  inputs    = {{ name = \"remote\" }}\n  providers = {{ sim = provider.sim.main }}\n}}\n"
    );
    let dir = project(&[
        ("s.tfcomponent.hcl", &components),
        ("d.tfdeploy.hcl", "deployment \"d\" {\n  inputs = {}\n}\n"),
    ]);
    let d = dir.path();
    let (code, _, err) = sim(d, &["stack", "plan"]);
    assert_eq!(code, 1);
    assert!(err.contains("Component module not installed"), "{err}");
    assert!(err.contains("run `cairn stack init`"), "{err}");
    let (code, out, err) = sim(d, &["stack", "init"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains(&format!(
            "- component.net: {source} in .terraform/modules/component.net"
        )),
        "{out}"
    );
    let manifest = std::fs::read_to_string(d.join(".terraform/modules/modules.json")).unwrap();
    assert!(manifest.contains("\"Key\":\"component.net\""), "{manifest}");
    let (code, out, err) = sim(d, &["stack", "apply", "-auto-approve"]);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(things(d, "main"), vec![("remote".into(), "net".into())]);
}

/// `deployment { destroy = true }`: that deployment's components are destroyed (dependents
/// first) by `stack apply`; the other deployment is left as it is.
#[test]
fn a_deployment_marked_destroy_is_destroyed_and_the_others_stay() {
    let dir = run_stack();
    let d = dir.path();
    assert_eq!(sim(d, &["stack", "init"]).0, 0);
    let (code, out, err) = sim(d, &["stack", "apply", "-auto-approve"]);
    assert_eq!(code, 0, "{out}{err}");
    let destroying = RUN_DEPLOYMENTS.replace(
        "deployment \"prod\" {\n",
        "deployment \"prod\" {\n  destroy = true\n",
    );
    std::fs::write(d.join("deploy.tfdeploy.hcl"), destroying).unwrap();
    let (code, out, err) = sim(d, &["stack", "plan"]);
    assert_eq!(code, 0, "{out}{err}");
    let prod = out.find("Deployment \"prod\"").unwrap();
    assert!(
        out[prod..].contains("component.net: 0 to add, 0 to change, 1 to destroy."),
        "{out}"
    );
    assert!(
        out[prod..].find("component.app[\"us\"]").unwrap()
            < out[prod..].find("component.net").unwrap(),
        "apps are listed (and destroyed) before net: {out}"
    );
    let (code, out, err) = sim(d, &["stack", "apply", "-auto-approve"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("Resources: 0 added, 0 changed, 3 destroyed"),
        "{out}"
    );
    assert_eq!(things(d, "main"), vec![("dev-net".into(), "net".into())]);
    assert!(things(d, "us").is_empty());
    let (_, out, _) = sim(d, &["stack", "show"]);
    assert!(
        out.contains("Deployment \"dev\"") && !out.contains("Deployment \"prod\""),
        "{out}"
    );
}

/// `publish_output` and `upstream_input` between two stacks at run time: the downstream
/// stack's deployment input is the upstream stack's published output, read from the
/// upstream's states. Before the upstream is applied the downstream's component is
/// deferred (with a warning naming the upstream); after, the value flows, and a change
/// upstream is a change downstream.
#[test]
fn a_published_output_flows_into_a_downstream_stack() {
    let root = project(&[
        (
            "network/stack.tfcomponent.hcl",
            &sim_stack(
                r#"component "net" {
  source    = "./modules/net"
  inputs    = { name = "${var.prefix}-net" }
  providers = { sim = provider.sim.main }
}
output "net_id" {
  type  = string
  value = component.net.id
}
"#,
            ),
        ),
        (
            "network/deploy.tfdeploy.hcl",
            "deployment \"main\" {\n  inputs = { prefix = \"main\" }\n}\npublish_output \"net_id\" {\n  description = \"The network's id.\"\n  value       = deployment.main.net_id\n}\n",
        ),
        ("network/modules/net/main.tf", NET_TF),
        (
            "app/stack.tfcomponent.hcl",
            &sim_stack_with(
                "net_id",
                r#"component "app" {
  source    = "./modules/app"
  inputs    = { net_id = var.net_id, label = "app" }
  providers = { sim = provider.sim.main }
}
"#,
            ),
        ),
        (
            "app/deploy.tfdeploy.hcl",
            "upstream_input \"network\" {\n  type   = \"stack\"\n  source = \"../network\"\n}\ndeployment \"main\" {\n  inputs = { net_id = upstream_input.network.net_id }\n}\n",
        ),
        ("app/modules/app/main.tf", APP_TF),
    ]);
    let store = root.path().join("sim-store");
    let env = [("SIM_STORE", store.to_str().unwrap())];
    let network = root.path().join("network");
    let app = root.path().join("app");
    let run = |dir: &Path, args: &[&str]| cairn_env(dir, args, &env);
    assert_eq!(run(&network, &["stack", "init"]).0, 0);
    assert_eq!(run(&app, &["stack", "init"]).0, 0);
    // The upstream has published nothing yet: the downstream waits for it.
    let (code, out, err) = run(&app, &["stack", "plan"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(err.contains("Upstream stack not applied yet"), "{err}");
    assert!(err.contains("has not published net_id yet"), "{err}");
    assert!(
        out.contains("component.app: deferred: inputs.net_id is not known"),
        "{out}"
    );
    let (code, _, err) = run(&app, &["stack", "apply", "-auto-approve"]);
    assert_eq!(code, 1);
    assert!(err.contains("The stack cannot converge"), "{err}");
    assert!(things(root.path(), "main").is_empty());
    // Applied upstream, the published value flows downstream.
    let (code, out, err) = run(&network, &["stack", "apply", "-auto-approve"]);
    assert_eq!(code, 0, "{out}{err}");
    let (_, net_id, _) = run(&network, &["stack", "output", "-deployment=main", "net_id"]);
    assert_eq!(net_id.trim(), "main-net-1");
    let (code, out, err) = run(&app, &["stack", "apply", "-auto-approve"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(!err.contains("Upstream stack not applied yet"), "{err}");
    assert!(
        things(root.path(), "main").contains(&("app".into(), "main-net-1".into())),
        "{:?}",
        things(root.path(), "main")
    );
    // A change upstream is a change downstream.
    std::fs::write(
        network.join("deploy.tfdeploy.hcl"),
        "deployment \"main\" {\n  inputs = { prefix = \"edge\" }\n}\npublish_output \"net_id\" {\n  value = deployment.main.net_id\n}\n",
    )
    .unwrap();
    let (code, out, err) = run(&network, &["stack", "apply", "-auto-approve"]);
    assert_eq!(code, 0, "{out}{err}");
    let (code, out, _) = run(&app, &["stack", "plan", "-detailed-exitcode"]);
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("\"main-net-1\" -> \"edge-net-1\""), "{out}");
    let (code, out, err) = run(&app, &["stack", "apply", "-auto-approve"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        things(root.path(), "main").contains(&("app".into(), "edge-net-1".into())),
        "{:?}",
        things(root.path(), "main")
    );
}

/// `deployment_group` and `deployment_auto_approve` at run time: a deployment whose plans
/// pass every check of its group's rules is applied without asking (even without a
/// terminal), round after round; one without a group is asked for; a plan a check refuses
/// is not applied, with the check's reason.
#[test]
fn deployment_groups_auto_approve_the_plans_their_checks_pass() {
    let deploy = |dev_prefix: &str| {
        format!(
            r#"deployment_auto_approve "no_destroy" {{
  check {{
    condition = context.plan.changes.remove == 0
    reason    = "Plan destroys ${{context.plan.changes.remove}} object(s)."
  }}
}}
deployment_auto_approve "small" {{
  check {{
    condition = context.plan.changes.total <= 3 && context.plan.applyable
    reason    = "Plan has ${{context.plan.changes.total}} changes."
  }}
}}
deployment_group "canary" {{
  auto_approve_checks = [deployment_auto_approve.no_destroy, deployment_auto_approve.small]
}}
deployment "dev" {{
  inputs = {{
    prefix  = "{dev_prefix}"
    regions = ["eu"]
  }}
  deployment_group = deployment_group.canary
}}
deployment "prod" {{
  inputs = {{
    prefix  = "prod"
    regions = ["eu"]
  }}
}}
"#
        )
    };
    let dir = project(&[
        ("stack.tfcomponent.hcl", RUN_COMPONENTS),
        ("deploy.tfdeploy.hcl", &deploy("dev")),
        ("modules/net/main.tf", NET_TF),
        ("modules/app/main.tf", APP_TF),
    ]);
    let d = dir.path();
    assert_eq!(sim(d, &["stack", "init"]).0, 0);
    // No terminal, no -auto-approve: dev's rules approve its plans, prod is not applied.
    let (code, out, err) = sim(d, &["stack", "apply"]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        out.contains(
            "Deployment \"dev\": auto-approved (every check of deployment_group.canary passed)."
        ),
        "{out}"
    );
    assert!(
        out.contains("Applying the auto-approved deployment only (\"dev\")."),
        "{out}"
    );
    assert!(err.contains("-auto-approve"), "{err}");
    assert!(
        err.contains("deployment \"prod\" were not approved"),
        "{err}"
    );
    assert_eq!(
        things(d, "main"),
        vec![("dev-net".to_string(), "net".to_string())]
    );
    // dev alone: its rules approve every round, to convergence, without a terminal.
    let (code, out, err) = sim(d, &["stack", "apply", "-deployment=dev"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("Stack apply complete!"), "{out}");
    assert_eq!(things(d, "eu").len(), 1);
    // prod, which has no group, with -auto-approve.
    let (code, out, err) = sim(d, &["stack", "apply", "-auto-approve"]);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(things(d, "eu").len(), 2);
    let (code, out, _) = sim(d, &["stack", "plan", "-detailed-exitcode"]);
    assert_eq!(code, 0, "{out}");
    // A replacement in dev: the no_destroy check refuses it, with its reason.
    std::fs::write(d.join("deploy.tfdeploy.hcl"), deploy("dev2")).unwrap();
    let (code, out, err) = sim(d, &["stack", "apply", "-deployment=dev"]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        out.contains("Deployment \"dev\": not auto-approved by deployment_group.canary:\n  - deployment_auto_approve.no_destroy: Plan destroys 1 object(s)."),
        "{out}"
    );
    assert!(err.contains("-auto-approve"), "{err}");
    assert!(things(d, "main").contains(&("dev-net".to_string(), "net".to_string())));
}
