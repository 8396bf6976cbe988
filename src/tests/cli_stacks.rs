//! Issue 33's Terraform Stacks configuration language on the real binary: `cairn stack
//! validate` on a stack with components wired through outputs, `for_each` on a component and
//! on a provider, two deployments, a deployment group with an auto-approve rule, a store and a
//! published output; and every kind of mistake, reported at its file:line:col.

use super::{check_golden, project};
use std::path::Path;
use std::process::{Command, Stdio};

fn cairn(dir: &Path, args: &[&str]) -> (i32, String, String) {
    cairn_env(dir, args, &[])
}

fn cairn_env(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_cairn"))
        .args(args)
        .env_remove("TOKEN")
        .envs(env.iter().copied())
        .current_dir(dir)
        .env("NO_COLOR", "1")
        .env_remove("CAIRN_STATE_DIR")
        .stdin(Stdio::null())
        .output()
        .expect("the cairn binary runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
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
