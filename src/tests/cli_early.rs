//! Issue 28's early evaluation (OpenTofu 1.8), end to end on the real binary: variables and
//! local values in a module call's `source` and `version` (the root's and a child's, whose
//! variables come from its call), in `required_providers` and in the `backend` block, at
//! `init`, `validate` and every later command; the errors for what cannot be evaluated early
//! and for a variable without a value; and the backend `init` recorded checked at each
//! command. (The backend from variables against a real PostgreSQL server is in `pg.rs`.)

use super::project;
use std::path::Path;
use std::process::{Command, Stdio};

/// Runs `cairn ARGS` in `dir` (no inherited `TF_VAR_*`); (exit code, stdout + stderr).
fn cairn(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> (i32, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_cairn"));
    cmd.args(args)
        .current_dir(dir)
        .env("NO_COLOR", "1")
        .env("SIM_STORE", dir.join("sim-store"))
        .env_remove("CAIRN_STATE_DIR")
        .env_remove("CAIRN_LOG")
        .env_remove("TF_WORKSPACE")
        .env_remove("PG_CONN_STR")
        .stdin(Stdio::null());
    for (k, _) in std::env::vars() {
        if k.starts_with("TF_VAR_") {
            cmd.env_remove(k);
        }
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("the cairn binary runs");
    (
        out.status.code().unwrap_or(-1),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

fn run(dir: &Path, args: &[&str], code: i32) -> String {
    let (c, out) = cairn(dir, args, &[]);
    assert_eq!(c, code, "cairn {args:?}\n{out}");
    out
}

const MODULES: &[(&str, &str)] = &[
    (
        "modules/net_v1/main.tf",
        "variable \"name\" {\n  type = string\n}\noutput \"which\" {\n  value = \"v1:${var.name}\"\n}\n",
    ),
    (
        "modules/net_v2/main.tf",
        "variable \"name\" {\n  type = string\n}\noutput \"which\" {\n  value = \"v2:${var.name}\"\n}\n",
    ),
    // A child whose own call's source comes from its variable, set by the root's call.
    (
        "modules/outer/main.tf",
        "variable \"flavour\" {\n  type = string\n}\nlocals {\n  dir = \"../net_${var.flavour}\"\n}\nmodule \"inner\" {\n  source = local.dir\n  name   = \"inner\"\n}\noutput \"which\" {\n  value = module.inner.which\n}\n",
    ),
];

const ROOT: &str = r#"
variable "net_version" {
  type    = string
  default = "v1"
}

locals {
  net = "./modules/net_${var.net_version}"
}

module "net" {
  source = local.net
  name   = "x-${var.net_version}"
}

module "outer" {
  source  = "./modules/outer"
  flavour = var.net_version
}

output "which" {
  value = module.net.which
}

output "inner" {
  value = module.outer.which
}
"#;

fn with_modules(root: &str) -> tempfile::TempDir {
    let mut files: Vec<(&str, &str)> = MODULES.to_vec();
    files.push(("main.tf", root));
    project(&files)
}

#[test]
fn module_sources_from_variables_and_locals_at_init_and_every_command() {
    let p = with_modules(ROOT);
    let dir = p.path();
    let out = run(dir, &["init"], 0);
    assert!(out.contains("4 modules"), "{out}");
    let out = run(dir, &["apply", "-auto-approve"], 0);
    assert!(out.contains("which = \"v1:x-v1\""), "{out}");
    assert!(out.contains("inner = \"v1:inner\""), "{out}");
    // Another -var: another module, for the root's call and the child's alike.
    let out = run(dir, &["plan", "-var", "net_version=v2"], 0);
    assert!(out.contains("\"v1:x-v1\" -> \"v2:x-v2\""), "{out}");
    assert!(out.contains("\"v1:inner\" -> \"v2:inner\""), "{out}");
    // From the environment and from a .auto.tfvars file too.
    let (code, out) = cairn(dir, &["plan"], &[("TF_VAR_net_version", "v2")]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("-> \"v2:x-v2\""), "{out}");
    std::fs::write(dir.join("pick.auto.tfvars"), "net_version = \"v2\"\n").unwrap();
    let out = run(dir, &["validate"], 0);
    assert!(out.contains("Success!"), "{out}");
    let out = run(dir, &["apply", "-auto-approve"], 0);
    assert!(out.contains("which = \"v2:x-v2\""), "{out}");
    // validate takes -var (as OpenTofu's does), and a source that is not there is an error at
    // the expression.
    let out = run(dir, &["validate", "-var", "net_version=v3"], 1);
    assert!(out.contains("Unreadable module directory"), "{out}");
    assert!(out.contains("modules/net_v3"), "{out}");
    assert!(out.contains("on main.tf:12:12"), "{out}");
    assert!(out.contains("on modules/outer/main.tf:8:12"), "{out}");
}

#[test]
fn what_cannot_be_evaluated_early_is_an_error_at_its_reference() {
    let p = with_modules(
        r#"
variable "net_version" {
  type = string
}

resource "sim_thing" "a" {
  name = "a"
}

locals {
  net = "./modules/net_${sim_thing.a.id}"
}

module "net" {
  source = local.net
  name   = "x"
}

module "net2" {
  source = "./modules/net_${var.net_version}"
  name   = "y"
}

module "net3" {
  source = "./modules/net_${module.net2.which}"
  name   = "z"
}
"#,
    );
    let dir = p.path();
    let out = run(dir, &["init"], 1);
    // A resource, through a local: at the resource's reference, saying who needed it.
    assert!(
        out.contains("Error: Dynamic value in static context"),
        "{out}"
    );
    assert!(out.contains("on main.tf:11:26"), "{out}");
    assert!(
        out.contains("Unable to use sim_thing.a in static context, which is required by local.net, which module.net's source uses"),
        "{out}"
    );
    // A variable without a value: named, with how to set it.
    assert!(
        out.contains("Error: No value for required variable"),
        "{out}"
    );
    assert!(out.contains("on main.tf:20:29"), "{out}");
    assert!(out.contains("\"net_version\" is not set"), "{out}");
    assert!(
        out.contains("-var 'net_version=…' (at `cairn init` too)"),
        "{out}"
    );
    // A module output.
    assert!(
        out.contains("Error: Module output not supported in static context"),
        "{out}"
    );
    assert!(out.contains("on main.tf:25:29"), "{out}");
    // No second error for a call whose source failed.
    assert!(!out.contains("Module not installed"), "{out}");
    // With the variable given at init, only the two real errors are left.
    let out = run(dir, &["init", "-var", "net_version=v1"], 1);
    assert!(!out.contains("No value for required variable"), "{out}");
    assert!(out.contains("Dynamic value in static context"), "{out}");
}

#[test]
fn required_providers_source_and_version_from_locals() {
    let p = project(&[(
        "main.tf",
        r#"
variable "ns" {
  type    = string
  default = "acme"
}

locals {
  sim_source = "${var.ns}/sim"
}

terraform {
  required_providers {
    sim = {
      source = local.sim_source
    }
  }
}

resource "sim_thing" "a" {
  name = "a"
}
"#,
    )]);
    let dir = p.path();
    let out = run(dir, &["init"], 0);
    assert!(out.contains("acme/sim: built in"), "{out}");
    let out = run(dir, &["init", "-var", "ns=other"], 0);
    assert!(out.contains("other/sim: built in"), "{out}");
    // An impure function's value is known only during the run.
    std::fs::write(
        dir.join("main.tf"),
        "terraform {\n  required_providers {\n    sim = {\n      source = \"acme/sim\"\n      version = \"${formatdate(\"YYYY\", timestamp())}.0.0\"\n    }\n  }\n}\n",
    )
    .unwrap();
    let out = run(dir, &["validate"], 1);
    assert!(
        out.contains("Error: Unable to compute static value"),
        "{out}"
    );
    assert!(out.contains("required_providers sim's version"), "{out}");
}

#[test]
fn a_backend_block_may_not_refer_to_a_resource_and_its_recorded_digest_is_checked() {
    let p = project(&[
        (
            "main.tf",
            r#"
resource "sim_thing" "a" {
  name = "a"
}
"#,
        ),
        (
            "backend.tf.off",
            r#"
variable "schema" {
  type      = string
  sensitive = true
}

terraform {
  backend "pg" {
    schema_name = sim_thing.a.id
    conn_str    = "postgres://u:Secret-Pw-1@127.0.0.1:1/db?password=${var.schema}"
  }
}
"#,
        ),
    ]);
    let dir = p.path();
    run(dir, &["init"], 0);
    run(dir, &["apply", "-auto-approve"], 0);
    let digest = std::fs::read_to_string(dir.join(".cairn/backend-config.digest")).unwrap();
    assert!(digest.contains("\"kind\": \"local\""), "{digest}");
    std::fs::rename(dir.join("backend.tf.off"), dir.join("backend.tf")).unwrap();
    // A resource in the backend block: an error at the reference, at init and later.
    for cmd in [
        &["init", "-var", "schema=s"][..],
        &["validate", "-var", "schema=s"],
    ] {
        let out = run(dir, cmd, 1);
        assert!(
            out.contains("Error: Dynamic value in static context"),
            "{out}"
        );
        assert!(out.contains("on backend.tf:9:19"), "{out}");
        assert!(
            out.contains("Unable to use sim_thing.a in static context, which is required by the backend's schema_name"),
            "{out}"
        );
        assert!(!out.contains("Secret-Pw-1"), "{out}");
    }
    // A backend block where `init` recorded none: every command says so, naming the block.
    std::fs::write(
        dir.join("backend.tf"),
        "variable \"schema\" {\n  type = string\n}\n\nterraform {\n  backend \"pg\" {\n    schema_name = var.schema\n  }\n}\n",
    )
    .unwrap();
    for cmd in [&["plan", "-var", "schema=s"][..], &["state", "list"]] {
        let (code, out) = cairn(dir, cmd, &[("TF_VAR_schema", "s")]);
        assert_eq!(code, 1, "{out}");
        assert!(
            out.contains("Error: Backend configuration changed"),
            "{out}"
        );
        assert!(
            out.contains("The configuration names the backend \"pg\" at backend.tf:6:3"),
            "{out}"
        );
        assert!(out.contains("cairn init -reconfigure"), "{out}");
        assert!(out.contains("-migrate-state"), "{out}");
    }
    // Back to no backend block: the recorded one again.
    std::fs::remove_file(dir.join("backend.tf")).unwrap();
    let out = run(dir, &["plan"], 0);
    assert!(out.contains("No changes."), "{out}");
}

/// A sensitive variable may not choose a module (OpenTofu's `Sensitive value not allowed`,
/// at the expression, naming the argument as OpenTofu does: `module.CALL.source`, prefixed
/// with the module it is written in when that is not the root); a sensitive backend argument
/// is fine (`pg.rs` sets a connection string from one).
#[test]
fn a_sensitive_value_cannot_choose_a_module() {
    let p = project(&[
        (
            "main.tf",
            "variable \"src\" {\n  type      = string\n  default   = \"./modules/a\"\n  sensitive = true\n}\nmodule \"m\" {\n  source = var.src\n}\nmodule \"outer\" {\n  source = \"./modules/b\"\n  s      = \"../a\"\n}\n",
        ),
        ("modules/a/main.tf", "output \"x\" {\n  value = 1\n}\n"),
        (
            "modules/b/main.tf",
            "variable \"s\" {\n  type      = string\n  sensitive = true\n}\nmodule \"inner\" {\n  source = \"${var.s}\"\n}\n",
        ),
    ]);
    let out = run(p.path(), &["init"], 1);
    assert!(out.contains("Error: Sensitive value not allowed"), "{out}");
    assert!(out.contains("on main.tf:7:12"), "{out}");
    assert!(
        out.contains("Sensitive values, or values derived from sensitive values, cannot be used as module.m.source."),
        "{out}"
    );
    assert!(out.contains("on modules/b/main.tf:6:12"), "{out}");
    assert!(
        out.contains("cannot be used as module.outer:module.inner.source."),
        "{out}"
    );
}
