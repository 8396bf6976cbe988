//! Issue 28's ephemeral values on the real binary: where an ephemeral value may not go (the
//! errors checked against `terraform validate -json` on the same files), the built-in
//! `ephemeral "random_password"` opened at plan and at apply and closed after each, deferred
//! while its configuration is unknown, and `ephemeralasnull`.

use super::check_cli_in;
use std::path::Path;
use std::process::Command;

fn write(dir: &Path, files: &[(&str, &str)]) {
    for (name, text) in files {
        let p = dir.join(name);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
}

const MISPLACED: &[(&str, &str)] = &[
    (
        "main.tf",
        r#"variable "secret" {
  type      = string
  ephemeral = true
  default   = "hunter2"
}
locals {
  l = "x-${var.secret}"
  n = ephemeralasnull(var.secret)
}
resource "terraform_data" "a" {
  input = local.l
}
output "o" {
  value = var.secret
}
output "ok" {
  value = local.n
}
data "terraform_remote_state" "r" {
  backend = "local"
  config  = { path = local.l }
}
module "m" {
  source = "./m"
  v      = var.secret
  w      = var.secret
}
output "mo" {
  value = module.m.out
}
output "e" {
  value     = "x"
  ephemeral = true
}
"#,
    ),
    (
        "m/main.tf",
        r#"variable "v" {
  ephemeral = true
}
variable "w" {}
output "out" {
  value = var.v
}
output "eout" {
  value     = var.v
  ephemeral = true
}
"#,
    ),
];

/// `validate -json`'s diagnostics as comparable text: severity, summary, detail and where,
/// sorted (the two tools list them in different orders).
fn diagnostics(json: &str) -> Vec<String> {
    let j: serde_json::Value = serde_json::from_str(json).expect(json);
    let mut out: Vec<String> = j["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            format!(
                "{} {}:{}:{}-{}:{} {} | {}",
                d["severity"].as_str().unwrap_or(""),
                d["range"]["filename"].as_str().unwrap_or(""),
                d["range"]["start"]["line"],
                d["range"]["start"]["column"],
                d["range"]["end"]["line"],
                d["range"]["end"]["column"],
                d["summary"].as_str().unwrap_or(""),
                d["detail"].as_str().unwrap_or("")
            )
        })
        .collect();
    out.sort();
    out
}

fn terraform_available() -> bool {
    Command::new("terraform").arg("version").output().is_ok()
}

#[test]
fn misplaced_ephemeral_values_are_terraforms_errors() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), MISPLACED);
    let (code, out, err) = check_cli_in(dir.path(), &["validate", "-json"], "");
    assert_eq!(code, 1, "{out}{err}");
    let cairn = diagnostics(&out);
    assert_eq!(cairn.len(), 6, "{cairn:#?}");
    assert!(terraform_available(), "Terraform 1.11 must be on PATH");
    let tf_dir = tempfile::tempdir().unwrap();
    write(tf_dir.path(), MISPLACED);
    let init = Command::new("terraform")
        .args(["init", "-backend=false", "-no-color"])
        .current_dir(tf_dir.path())
        .env("CHECKPOINT_DISABLE", "1")
        .output()
        .unwrap();
    assert!(init.status.success(), "{init:?}");
    let tf = Command::new("terraform")
        .args(["validate", "-json", "-no-color"])
        .current_dir(tf_dir.path())
        .env("CHECKPOINT_DISABLE", "1")
        .output()
        .unwrap();
    let tf = diagnostics(&String::from_utf8_lossy(&tf.stdout));
    assert_eq!(cairn, tf);
    // `plan` stops on the same errors, before any provider is asked anything.
    let (code, out, err) = check_cli_in(dir.path(), &["plan", "-no-color"], "");
    assert_eq!(code, 1, "{out}{err}");
    assert!(err.contains("Invalid use of ephemeral value"), "{err}");
    assert!(err.contains("Ephemeral output not allowed"), "{err}");
}

const PASSWORD: &str = r#"
resource "terraform_data" "len" {
  input = 12
}
ephemeral "random_password" "known" {
  count   = 2
  length  = 10 + count.index
  special = false
}
ephemeral "random_password" "later" {
  length = terraform_data.len.output
}
locals {
  both = [for p in ephemeral.random_password.known : length(p.result)]
}
check "lengths" {
  assert {
    condition     = local.both == [10, 11]
    error_message = "the passwords have the lengths they were asked for"
  }
}
check "later" {
  assert {
    condition     = length(ephemeral.random_password.later.result) == 12
    error_message = "the deferred password has its length"
  }
}
output "nulled" {
  value = ephemeralasnull({ p = ephemeral.random_password.known[0].result, k = "kept" })
}
"#;

#[test]
fn random_password_is_opened_at_plan_and_apply_and_never_stored() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), &[("main.tf", PASSWORD)]);
    let (code, out, err) = check_cli_in(dir.path(), &["plan", "-no-color"], "");
    assert_eq!(code, 0, "{out}{err}");
    // Known configurations are opened by the plan, and closed after it; the one whose
    // length is known only after apply is not.
    for i in 0..2 {
        let a = format!("ephemeral.random_password.known[{i}]");
        assert!(out.contains(&format!("{a}: Opening...")), "{out}");
        assert!(
            out.contains(&format!("{a}: Closing complete after")),
            "{out}"
        );
    }
    assert!(!out.contains("random_password.later: Opening"), "{out}");
    assert!(
        !out.contains("random_password.later") || !out.contains("will be"),
        "{out}"
    );
    assert!(!err.contains("Check block assertion failed"), "{err}");
    let (code, out, err) = check_cli_in(dir.path(), &["apply", "-auto-approve", "-no-color"], "");
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("ephemeral.random_password.later: Opening..."),
        "{out}"
    );
    assert!(
        out.contains("ephemeral.random_password.later: Closing complete"),
        "{out}"
    );
    assert!(!err.contains("assertion failed"), "{err}");
    assert!(out.contains("\"k\" = \"kept\""), "{out}");
    assert!(out.contains("\"p\" = tostring(null)"), "{out}");
    // Nothing of them in state.
    let (code, out, _) = check_cli_in(dir.path(), &["state", "list"], "");
    assert_eq!(code, 0);
    let resources: Vec<&str> = out
        .lines()
        .filter(|l| !l.starts_with("provider["))
        .collect();
    assert_eq!(resources, ["terraform_data.len"], "{out}");
    let (_, pulled, _) = check_cli_in(dir.path(), &["state", "pull"], "");
    assert!(!pulled.contains("random_password"), "{pulled}");
}
