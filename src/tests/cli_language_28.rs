//! Issue 28's language additions, end to end on the real binary with the built-in `sim`
//! provider: OpenTofu's provider `for_each` (each instance a provider in state with its own
//! configuration and replace rules, chosen per resource instance and per module call
//! instance; an element removed while objects still use it is OpenTofu's error), and the
//! constructs of real modules that Terraform 1.11 accepts (checked against `terraform` where
//! it can run them).

use super::project;
use std::path::Path;
use std::process::{Command, Stdio};

/// Runs `cairn ARGS` in `dir` (no inherited `TF_VAR_*` or `SIM_*`); (exit code, stdout,
/// stderr).
fn cairn(dir: &Path, args: &[&str]) -> (i32, String, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_cairn"));
    cmd.args(args)
        .current_dir(dir)
        .env("NO_COLOR", "1")
        .env_remove("CAIRN_STATE_DIR")
        .env_remove("CAIRN_LOG")
        .env_remove("CAIRN_LOG_PATH")
        .stdin(Stdio::null());
    for (k, _) in std::env::vars() {
        if k.starts_with("TF_VAR_") || k.starts_with("SIM_") {
            cmd.env_remove(k);
        }
    }
    let out = cmd.output().expect("the cairn binary runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `cairn` that must exit with `code`; returns stdout and stderr together.
fn run(dir: &Path, args: &[&str], code: i32) -> String {
    let (c, out, err) = cairn(dir, args);
    assert_eq!(c, code, "cairn {args:?}\n{out}\n{err}");
    format!("{out}{err}")
}

/// The objects in the sim store, as `region/id`, sorted.
fn objects(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let things = dir.join("sim-store/things");
    for region in std::fs::read_dir(&things).into_iter().flatten().flatten() {
        for f in std::fs::read_dir(region.path()).unwrap().flatten() {
            let name = f.file_name().to_string_lossy().replace(".json", "");
            out.push(format!("{}/{name}", region.file_name().to_string_lossy()));
        }
    }
    out.sort();
    out
}

const BY_REGION: &str = r#"
variable "regions" {
  type    = map(string)
  default = { eu = "eu-west", us = "us-east" }
}
variable "active" {
  type    = set(string)
  default = ["eu", "us"]
}
locals {
  active = var.active
}
provider "sim" {
  alias    = "by_region"
  for_each = var.regions
  region   = each.value
}
resource "sim_thing" "t" {
  for_each = local.active
  provider = sim.by_region[each.key]
  name     = "t-${each.key}"
}
module "m" {
  source    = "./mod"
  for_each  = local.active
  providers = { sim = sim.by_region[each.key] }
  n         = each.key
}
"#;

const MOD: &str = r#"
variable "n" {}
resource "sim_thing" "x" {
  name = "m-${var.n}"
}
"#;

#[test]
fn provider_for_each_instances_are_providers_of_their_own() {
    let d = project(&[("main.tf", BY_REGION), ("mod/main.tf", MOD)]);
    let dir = d.path();
    run(dir, &["validate"], 0);
    run(dir, &["apply", "-auto-approve"], 0);
    // Each object lives in the region of the instance its key chose, the module's too.
    assert_eq!(
        objects(dir),
        [
            "eu-west/m-eu-1",
            "eu-west/t-eu-1",
            "us-east/m-us-1",
            "us-east/t-us-1"
        ]
    );
    let list = run(dir, &["state", "list"], 0);
    assert!(
        list.contains("provider[\"sim\"].by_region[\"eu\"]")
            && list.contains("provider[\"sim\"].by_region[\"us\"]"),
        "{list}"
    );
    run(dir, &["plan", "-detailed-exitcode"], 0);

    // One instance's configuration changes: its replace rule replaces only what it manages.
    let plan = run(
        dir,
        &["plan", "-var", r#"regions={eu="eu-west",us="us-west"}"#],
        0,
    );
    assert!(
        plan.contains("# provider[\"sim\"].by_region[\"us\"] must be replaced"),
        "{plan}"
    );
    assert!(
        plan.contains(
            "(because its provider instance provider[\"sim\"].by_region[\"us\"] is replaced)"
        ),
        "{plan}"
    );
    assert!(!plan.contains("by_region[\"eu\"] must"), "{plan}");
    assert!(
        plan.contains("Plan: 2 to add, 0 to change, 2 to destroy."),
        "{plan}"
    );

    // Removing an element while objects still use it: OpenTofu's error, nothing changes.
    let (c, out, err) = cairn(
        dir,
        &[
            "apply",
            "-auto-approve",
            "-var",
            r#"regions={eu="eu-west"}"#,
            "-var",
            r#"active=["eu"]"#,
        ],
    );
    assert_eq!(c, 1, "{out}{err}");
    assert!(
        err.contains("Error: Provider instance not present"),
        "{err}"
    );
    assert!(
        err.contains(
            "To work with sim_thing.t[\"us\"] its original provider instance at \
             provider[\"sim\"].by_region[\"us\"] is required, but it has been removed."
        ),
        "{err}"
    );
    assert!(
        err.contains("module.m[\"us\"].sim_thing.x its original"),
        "{err}"
    );
    assert_eq!(objects(dir).len(), 4);

    // The way out: drop the resources first (the provider element stays), then the element.
    run(
        dir,
        &["apply", "-auto-approve", "-var", r#"active=["eu"]"#],
        0,
    );
    assert_eq!(objects(dir), ["eu-west/m-eu-1", "eu-west/t-eu-1"]);
    run(
        dir,
        &[
            "apply",
            "-auto-approve",
            "-var",
            r#"regions={eu="eu-west"}"#,
            "-var",
            r#"active=["eu"]"#,
        ],
        0,
    );
    let list = run(dir, &["state", "list"], 0);
    assert!(!list.contains("by_region[\"us\"]"), "{list}");
    assert!(list.contains("by_region[\"eu\"]"), "{list}");

    // A key its provider does not have is an error at the reference.
    let (c, _, err) = cairn(
        dir,
        &[
            "plan",
            "-var",
            r#"regions={eu="eu-west"}"#,
            "-var",
            r#"active=["eu","ap"]"#,
        ],
    );
    assert_eq!(c, 1);
    assert!(err.contains("Invalid provider instance key"), "{err}");
    assert!(err.contains("main.tf:20:14"), "{err}");
    assert!(err.contains("main.tf:26:23"), "{err}");

    run(dir, &["destroy", "-auto-approve"], 0);
    assert!(objects(dir).is_empty());
}

#[test]
fn provider_for_each_errors() {
    // for_each without alias; a block with for_each named without a key; a key on a block
    // without for_each; a for_each made from a resource.
    let d = project(&[(
        "main.tf",
        r#"
provider "sim" {
  for_each = toset(["a"])
}
"#,
    )]);
    let err = run(d.path(), &["validate"], 1);
    assert!(err.contains("Invalid provider configuration"), "{err}");
    assert!(err.contains("must have an alias"), "{err}");

    let d = project(&[(
        "main.tf",
        r#"
provider "sim" {
  alias    = "r"
  for_each = toset(["a"])
}
provider "sim" {
  alias = "plain"
}
resource "sim_thing" "a" {
  provider = sim.r
  name     = "a"
}
resource "sim_thing" "b" {
  provider = sim.plain["a"]
  name     = "b"
}
"#,
    )]);
    let err = run(d.path(), &["plan"], 1);
    assert!(err.contains("has for_each: it is a set of"), "{err}");
    assert!(err.contains("has no for_each, so it has no"), "{err}");

    let d = project(&[(
        "main.tf",
        r#"
resource "sim_thing" "src" {
  name = "src"
}
provider "sim" {
  alias    = "r"
  for_each = toset([sim_thing.src.id])
}
"#,
    )]);
    let err = run(d.path(), &["plan"], 1);
    assert!(err.contains("Invalid provider for_each"), "{err}");
    assert!(err.contains("refers to sim_thing.src.id"), "{err}");
}
