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
    // Evaluated early, as OpenTofu evaluates it statically: `validate` already says so.
    for cmd in ["validate", "plan"] {
        let err = run(d.path(), &[cmd], 1);
        assert!(err.contains("Dynamic value in static context"), "{err}");
        assert!(
            err.contains("Unable to use sim_thing.src in static context, which is required by the for_each of provider sim.r"),
            "{err}"
        );
        assert!(err.contains("on main.tf:7:21"), "{err}");
    }
}

/// Runs `cairn console` in `dir` with `input` on standard input; its stdout.
fn console(dir: &Path, input: &str) -> String {
    use std::io::Write;
    let mut child = Command::new(env!("CARGO_BIN_EXE_cairn"))
        .arg("console")
        .current_dir(dir)
        .env("NO_COLOR", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn depends_on_an_instance_or_the_block_itself() {
    // `terraform validate` (1.11) says "Success! The configuration is valid." here, and
    // `terraform plan` plans the three objects.
    let d = project(&[
        (
            "main.tf",
            r#"
resource "terraform_data" "pools" {
  input      = 1
  depends_on = [terraform_data.pools]
}
resource "terraform_data" "b" {
  depends_on = [terraform_data.c["x"], terraform_data.d[0], module.m["k"]]
}
resource "terraform_data" "c" {
  for_each = toset(["x"])
}
resource "terraform_data" "d" {
  count = 1
}
module "m" {
  source   = "./m"
  for_each = toset(["k"])
}
"#,
        ),
        ("m/main.tf", "output \"o\" { value = 1 }\n"),
    ]);
    let out = run(d.path(), &["validate"], 0);
    assert!(
        out.contains("Success! The configuration is valid."),
        "{out}"
    );
    let out = run(d.path(), &["plan"], 0);
    assert!(out.contains("Plan: 4 to add"), "{out}");
    // An attribute of an instance is still no whole object, as in Terraform.
    let d = project(&[(
        "main.tf",
        r#"
resource "terraform_data" "d" {
  count = 1
}
resource "terraform_data" "b" {
  depends_on = [terraform_data.d[0].id]
}
"#,
    )]);
    let out = run(d.path(), &["validate"], 1);
    assert!(out.contains("Invalid depends_on reference"), "{out}");
}

#[test]
fn json_count_string_counts_as_terraform_converts_it() {
    // `terraform plan`: "# terraform_data.a[0] will be created", "Plan: 1 to add".
    let d = project(&[(
        "main.tf.json",
        r#"{"resource": {"terraform_data": {"a": {"count": "1", "input": "x"}}}}"#,
    )]);
    let out = run(d.path(), &["plan"], 0);
    assert!(
        out.contains("# terraform_data.a[0] will be created"),
        "{out}"
    );
    assert!(
        out.contains("Plan: 1 to add, 0 to change, 0 to destroy."),
        "{out}"
    );
}

#[test]
fn file_functions_in_a_module_above_the_root() {
    // An example directory calling the module two levels up, which hashes its own file, as
    // terraform-aws-modules' examples do (`terraform validate` succeeds).
    let d = project(&[
        ("package.py", "print(1)\n"),
        (
            "main.tf",
            r#"
resource "terraform_data" "a" {
  input = filesha256("${path.module}/package.py")
}
"#,
        ),
        (
            "examples/basic/main.tf",
            "module \"up\" {\n  source = \"../../\"\n}\n",
        ),
    ]);
    let dir = d.path().join("examples/basic");
    run(&dir, &["validate"], 0);
    let out = run(&dir, &["plan"], 0);
    assert!(
        out.contains("\"cc42155088fca5730758db72b2a5bca33112a941dfaa2d43098ec422ce4ea213\""),
        "{out}"
    );
    // Outside both trees is still refused.
    let d = project(&[
        ("secret.txt", "x"),
        (
            "root/main.tf",
            "output \"o\" { value = file(\"../secret.txt\") }\n",
        ),
    ]);
    let out = run(&d.path().join("root"), &["validate"], 1);
    assert!(
        out.contains("is outside the configuration directory"),
        "{out}"
    );
}

#[test]
fn inspect_keeps_a_resource_whose_argument_fails() {
    let d = project(&[(
        "main.tf",
        r#"
variable "on" {
  default = true
}
resource "aws_thing" "a" {
  name = "a"
  tags = var.on ? { a = 1 } : ["x"]
}
"#,
    )]);
    let (_, out, _) = cairn(d.path(), &["inspect", "-json"]);
    let doc: serde_json::Value = serde_json::from_str(out.lines().next().unwrap()).unwrap();
    let r = &doc["resources"][0];
    assert_eq!(r["id"], "aws_thing.a", "{doc}");
    assert_eq!(r["name"], "a");
    assert_eq!(r["_unknown"], serde_json::json!(["tags"]));
    assert_eq!(r["_attribute_sources"]["tags"]["line"], 7);
    assert_eq!(
        doc["diagnostics"][0]["summary"],
        "Inconsistent conditional result types"
    );
}

#[test]
fn inspect_uses_a_module_installed_from_another_source() {
    let d = project(&[
        (
            ".terraform/modules/modules.json",
            r#"{"Modules":[{"Key":"","Source":"","Dir":"."},{"Key":"vpc","Source":"registry.terraform.io/acme/vpc/aws","Version":"1.0.0","Dir":".terraform/modules/vpc"}]}"#,
        ),
        (
            ".terraform/modules/vpc/main.tf",
            "resource \"aws_vpc\" \"this\" {\n  cidr_block = \"10.0.0.0/16\"\n}\n",
        ),
        (
            "main.tf",
            "module \"vpc\" {\n  source  = \"acme/network/aws\"\n  version = \"1.0.0\"\n}\n",
        ),
    ]);
    let (c, out, err) = cairn(d.path(), &["inspect"]);
    assert_eq!(c, 0, "{out}{err}");
    assert!(out.contains("# module.vpc.aws_vpc.this"), "{out}");
    assert!(err.contains("Warning: Module source has changed"), "{err}");
    let out = run(d.path(), &["validate"], 1);
    assert!(out.contains("Error: Module source has changed"), "{out}");
}

#[test]
fn console_gives_impure_functions_values() {
    // `terraform console` prints a fresh uuid and the current time for these.
    let d = project(&[("main.tf", "locals {\n  a = 1\n}\n")]);
    let out = console(
        d.path(),
        "uuid()\ntimestamp()\nplantimestamp()\nlength(uuid())\n",
    );
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 4, "{out}");
    let uuid = lines[0].trim_matches('"');
    assert_eq!(uuid.len(), 36, "{out}");
    assert_eq!(
        uuid.split('-').map(str::len).collect::<Vec<_>>(),
        [8, 4, 4, 4, 12]
    );
    for t in &lines[1..3] {
        assert!(
            t.starts_with("\"20") && t.ends_with("Z\"") && t.len() == 22,
            "{out}"
        );
    }
    assert_eq!(lines[3], "36");
}

#[test]
fn repeated_object_keys_and_newlines_inside_for_expressions() {
    // Both parse in Terraform 1.11, and `terraform plan` shows these very outputs: a repeated
    // key keeps its last value; inside a `for` expression newlines are insignificant (a
    // conditional over lines as the value, `=>` on its own line, the collection on the next).
    let d = project(&[(
        "main.tf",
        r#"
locals {
  xs = [1, 2, 3]
  o  = { a = 1, b = 3, a = 2 }
  o2 = { "a" = 1, a = "x" }
  ys = [for x in local.xs : x > 1
    ? "big"
    : "small"]
  zs = { for x in local.xs : x => x > 1
    ? "big"
    : "small" }
  o3 = { for k in ["p", "q"] :
    k
    =>
    upper(k)
  }
  o4 = [for x in
    local.xs : x]
}
output "o" { value = local.o }
output "o2" { value = local.o2 }
output "o3" { value = local.o3 }
output "o4" { value = local.o4 }
output "ys" { value = local.ys }
output "zs" { value = local.zs }
"#,
    )]);
    let out = run(d.path(), &["plan"], 0);
    let expected = r#"Changes to Outputs:
  + o  = {
      + a = 2
      + b = 3
    }
  + o2 = {
      + a = "x"
    }
  + o3 = {
      + p = "P"
      + q = "Q"
    }
  + o4 = [
      + 1,
      + 2,
      + 3,
    ]
  + ys = [
      + "small",
      + "big",
      + "big",
    ]
  + zs = {
      + "1" = "small"
      + "2" = "big"
      + "3" = "big"
    }
"#;
    assert!(out.contains(expected), "{out}");
    // `fmt` keeps both items of a repeated key and indents the continued lines as
    // `terraform fmt` does (the same file, byte for byte, checked with terraform 1.11).
    let out = run(d.path(), &["fmt", "-check"], 3);
    assert!(out.contains("main.tf"), "{out}");
    run(d.path(), &["fmt"], 0);
    let text = std::fs::read_to_string(d.path().join("main.tf")).unwrap();
    assert!(text.contains("  o  = { a = 1, b = 3, a = 2 }\n"), "{text}");
    assert!(text.contains("    ? \"big\"\n  : \"small\"]\n"), "{text}");
    assert!(
        text.contains("  o4 = [for x in\n  local.xs : x]\n"),
        "{text}"
    );
}
