//! Issue 33's stack fixtures and working-copy set-up, shared by the end-to-end test
//! binaries (`cli`, `ui`, `pg`, `s3` include this file): the sim stack most stack tests run,
//! the pieces their own stacks share, and making a working copy a stack's.
#![allow(dead_code)]

use std::path::Path;

/// `required_providers` for the `sim` test provider.
pub const SIM_REQUIRED: &str = "required_providers {\n  sim = { source = \"hashicorp/sim\" }\n}\n";
/// A `prefix` variable (each deployment gives its own).
pub const PREFIX_VAR: &str = "variable \"prefix\" {\n  type = string\n}\n";
/// The `sim` provider's `main` region, as `provider.sim.main`.
pub const SIM_MAIN: &str =
    "provider \"sim\" \"main\" {\n  config {\n    region = \"main\"\n  }\n}\n";

/// A stack on `provider.sim.main` with a `prefix` variable, then `body` (its components).
pub fn sim_stack(body: &str) -> String {
    format!("{SIM_REQUIRED}{PREFIX_VAR}{SIM_MAIN}{body}")
}

/// A stack on `provider.sim.main` with one string variable `var`, then `body`.
pub fn sim_stack_with(var: &str, body: &str) -> String {
    format!("{SIM_REQUIRED}variable \"{var}\" {{\n  type = string\n}}\n{SIM_MAIN}{body}")
}

/// Components `net` and `app` of the module at `source` (named by `var.prefix`), `app`
/// holding `net`'s id as its `upstream`: its first round defers it.
pub fn net_then_app(source: &str) -> String {
    format!(
        r#"component "net" {{
  source    = "{source}"
  inputs    = {{ name = "${{var.prefix}}-net" }}
  providers = {{ sim = provider.sim.main }}
}}
component "app" {{
  source    = "{source}"
  inputs    = {{ name = "${{var.prefix}}-app", upstream = component.net.id }}
  providers = {{ sim = provider.sim.main }}
}}
"#
    )
}

/// The objects the sim provider holds in `region` of its store `store`: (name, value) of
/// each, sorted.
pub fn sim_things(store: &Path, region: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(store.join("things").join(region))
        .into_iter()
        .flatten()
        .flatten()
    {
        let j: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(e.path()).unwrap()).unwrap();
        out.push((
            j["name"].as_str().unwrap().to_string(),
            j["value"].as_str().unwrap_or_default().to_string(),
        ));
    }
    out.sort();
    out
}

/// A module of one sim_thing `t` named `var.name` holding `var.value`; output `id`.
pub const THING_MODULE: &str = "terraform {\n  required_providers {\n    sim = { source = \"hashicorp/sim\" }\n  }\n}\nvariable \"name\" {\n  type = string\n}\nvariable \"value\" {\n  type = string\n}\nresource \"sim_thing\" \"t\" {\n  name  = var.name\n  value = var.value\n}\noutput \"id\" {\n  value = sim_thing.t.id\n}\n";

/// A module of one sim_thing `t` named `var.name` holding `var.upstream` (`-` by default);
/// output `id`.
pub const UPSTREAM_MODULE: &str = r#"variable "name" {
  type = string
}
variable "upstream" {
  type    = string
  default = "-"
}
resource "sim_thing" "t" {
  name  = var.name
  value = var.upstream
}
output "id" {
  value = sim_thing.t.id
}
"#;

/// Two deployments, `dev` and `prod`, each its `prefix`.
pub const DEV_AND_PROD: &str = "deployment \"dev\" {\n  inputs = { prefix = \"dev\" }\n}\ndeployment \"prod\" {\n  inputs = { prefix = \"prod\" }\n}\n";

/// The `net` module of the run stack: one sim_thing named `var.name`; outputs `id`, `name`.
pub const NET_TF: &str = r#"terraform {
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

/// The `app` module: a sim_thing `var.label` holding `var.net_id`; output `out`.
pub const APP_TF: &str = r#"terraform {
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

/// The stack most tests run: `net`, then `app` for each region of `var.regions` (one
/// provider configuration each), deferred until `net` is applied.
pub const RUN_COMPONENTS: &str = r#"required_providers {
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

/// Two deployments: `dev` in one region, `prod` in two.
pub const RUN_DEPLOYMENTS: &str = r#"deployment "dev" {
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

/// The run stack's files, for [`write_files`].
pub const RUN_STACK: [(&str, &str); 4] = [
    ("stack.tfcomponent.hcl", RUN_COMPONENTS),
    ("deploy.tfdeploy.hcl", RUN_DEPLOYMENTS),
    ("modules/net/main.tf", NET_TF),
    ("modules/app/main.tf", APP_TF),
];

/// Runs the `cairn` binary in `dir` with `env` set (once the variables no test may inherit
/// are unset), colours off and no standard input: (exit code, stdout, stderr).
pub fn run_cairn(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_cairn"))
        .args(args)
        .current_dir(dir)
        .env("NO_COLOR", "1")
        .env_remove("CAIRN_STATE_DIR")
        .env_remove("TOKEN")
        .env_remove("TF_CLI_CONFIG_FILE")
        .env_remove("TF_PLUGIN_CACHE_DIR")
        .envs(env.iter().copied())
        .stdin(std::process::Stdio::null())
        .output()
        .expect("the cairn binary runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Writes each `(path, text)` under `dir`, making the folders.
pub fn write_files(dir: &Path, files: &[(&str, &str)]) {
    for (p, text) in files {
        let path = dir.join(p);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
}

/// Makes a working copy (a root module's directory) a stack's: its `main.tf` gone and the
/// stack's `files` written.
pub fn make_stack_copy(dir: &Path, files: &[(&str, &str)]) {
    let _ = std::fs::remove_file(dir.join("main.tf"));
    write_files(dir, files);
}

/// `cairn stack init -backend=s3` with the test server's settings: `bucket`, `key`.
pub fn s3_stack_init(bucket: &str, key: &str) -> Vec<String> {
    vec![
        "stack".to_string(),
        "init".into(),
        "-backend=s3".into(),
        format!("-backend-config=bucket={bucket}"),
        format!("-backend-config=key={key}"),
        "-backend-config=region=us-east-1".into(),
        "-backend-config=use_path_style=true".into(),
        "-backend-config=use_lockfile=true".into(),
        "-backend-config=skip_credentials_validation=true".into(),
        "-backend-config=skip_requesting_account_id=true".into(),
        "-backend-config=skip_region_validation=true".into(),
    ]
}
