//! Importing existing objects on the real binary (issues 12 and 14): `import` blocks (with
//! `for_each`) planned as imports and adopted by apply, also from a saved plan in another
//! process; `cairn import ADDR ID` as a recorded run; Terraform's errors. The built-in
//! `random` provider imports as hashicorp/random does; `sim` refuses import as the Python sim
//! does under Terraform. (The same stories against a plugin provider, beside Terraform 1.11,
//! are in `fixtures/provider-v5/tests/lifecycle.rs`.)

use super::{check_cli_in, check_golden, project, transcript};

const RANDOM_TF: &str = r#"
variable "name" {
  default = "abc"
}
import {
  to = random_integer.port
  id = "15390,1,50000"
}
import {
  to = random_string.s
  id = var.name
}
resource "random_integer" "port" {
  min = 1
  max = 50000
}
resource "random_string" "s" {
  length = length(var.name)
}
resource "random_id" "i" {
  byte_length = 4
}
resource "random_integer" "other" {
  min = 1
  max = 2
}
output "port" {
  value = random_integer.port.result
}
"#;

/// Import blocks with the built-in `random` provider: the plan text, a saved plan applied
/// in another process, the next plan (no changes), `cairn import`, and how history and the
/// log record them.
#[test]
fn import_blocks_and_the_import_command() {
    let dir = project(&[("main.tf", RANDOM_TF)]);
    let d = dir.path();
    let t = transcript(
        d,
        &[
            "plan -target=random_integer.port -target=random_string.s",
            "plan -out=p.plan -target=random_integer.port -target=random_string.s",
            "show -json p.plan",
            "apply p.plan",
            "plan -detailed-exitcode -target=random_integer.port -target=random_string.s",
            "import random_id.i p-,AAECAw",
            "import random_id.i AAECAw",
            "import random_id.nope AAECAw",
            "import random_integer.other 1,2",
            "state show random_id.i",
            "history",
        ],
    );
    check_golden("import.txt", &t);
}

/// `for_each` on import blocks: one import per element, `to` keyed by `each.key`, the id from
/// `each.value`.
#[test]
fn import_blocks_with_for_each() {
    let tf = r#"
variable "names" {
  default = { a = "abc", b = "xyz12" }
}
import {
  for_each = var.names
  to       = random_string.s[each.key]
  id       = each.value
}
resource "random_string" "s" {
  for_each = var.names
  length   = length(each.value)
}
"#;
    let dir = project(&[("main.tf", tf)]);
    let d = dir.path();
    let (code, out, err) = check_cli_in(d, &["plan", "-detailed-exitcode"], "");
    assert_eq!(code, 2, "{out}{err}");
    for want in [
        "random_string.s[\"a\"]: Preparing import... [id=abc]",
        "random_string.s[\"b\"]: Preparing import... [id=xyz12]",
        "  # random_string.s[\"a\"] will be imported\n",
        "  # random_string.s[\"b\"] will be imported\n",
        "Plan: 2 to import, 0 to add, 0 to change, 0 to destroy.",
    ] {
        assert!(out.contains(want), "{want:?} in\n{out}");
    }
    // The JSON UI, as Terraform's: each import a planned_change of action "import".
    let (code, out, err) = check_cli_in(d, &["plan", "-json"], "");
    assert_eq!(code, 0, "{out}{err}");
    let planned: Vec<serde_json::Value> = out
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|j| j["type"] == "planned_change")
        .collect();
    assert_eq!(planned.len(), 2, "{out}");
    assert_eq!(planned[0]["change"]["action"], "import", "{out}");
    assert_eq!(planned[0]["change"]["importing"]["id"], "abc", "{out}");
    assert!(
        out.contains("\"changes\":{\"add\":0,\"change\":0,\"import\":2,\"remove\":0"),
        "{out}"
    );
    let (code, out, err) = check_cli_in(d, &["apply", "-auto-approve"], "");
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("Apply complete! Resources: 2 imported, 0 added, 0 changed, 0 destroyed."),
        "{out}"
    );
    let (code, out, _) = check_cli_in(d, &["state", "show", "random_string.s[\"b\"]"], "");
    assert_eq!(code, 0);
    assert!(out.contains("result      = \"xyz12\""), "{out}");
    let (code, _, err) = check_cli_in(d, &["plan", "-detailed-exitcode"], "");
    assert_eq!(code, 0, "{err}");
}

/// A changed configuration is an import and an update in one plan ("imported from"), and the
/// apply adopts the object, then updates it.
#[test]
fn an_import_combined_with_an_update() {
    let tf = r#"
import {
  to = terraform_data.d
  id = "x"
}
resource "terraform_data" "d" {
  input = "v"
}
"#;
    let dir = project(&[("main.tf", tf)]);
    let d = dir.path();
    let (code, out, err) = check_cli_in(d, &["plan", "-detailed-exitcode"], "");
    assert_eq!(code, 2, "{out}{err}");
    assert!(
        out.contains("# terraform_data.d will be updated in-place"),
        "{out}"
    );
    assert!(out.contains("# (imported from \"x\")"), "{out}");
    assert!(
        out.contains("Plan: 1 to import, 0 to add, 1 to change, 0 to destroy."),
        "{out}"
    );
    let (code, out, err) = check_cli_in(d, &["apply", "-auto-approve"], "");
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("Apply complete! Resources: 1 imported, 0 added, 1 changed, 0 destroyed."),
        "{out}"
    );
    let (code, out, err) = check_cli_in(d, &["state", "show", "terraform_data.d"], "");
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("id     = \"x\""), "{out}");
    assert!(out.contains("output = \"v\""), "{out}");
    let tf = r#"
import {
  to = random_password.p
  id = "s3cret!"
}
resource "random_password" "p" {
  length  = 7
  special = false
}
"#;
    let dir = project(&[("main.tf", tf)]);
    let d = dir.path();
    let (code, out, err) = check_cli_in(d, &["plan", "-detailed-exitcode"], "");
    assert_eq!(code, 2, "{out}{err}");
    assert!(
        out.contains("# random_password.p must be replaced"),
        "{out}"
    );
    assert!(out.contains("# (imported from \"s3cret!\")"), "{out}");
    assert!(
        out.contains("Plan: 1 to import, 1 to add, 0 to change, 1 to destroy."),
        "{out}"
    );
    let (code, out, err) = check_cli_in(d, &["apply", "-auto-approve"], "");
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("random_password.p: Importing... [id=s3cret!]"),
        "{out}"
    );
    assert!(
        out.contains("Apply complete! Resources: 1 imported, 1 added, 0 changed, 1 destroyed."),
        "{out}"
    );
    let (code, _, err) = check_cli_in(d, &["plan", "-detailed-exitcode"], "");
    assert_eq!(code, 0, "{err}");
}

/// Terraform's errors: an import block whose resource is not configured (with and without
/// `for_each` keys), in a child module, of a data source, without `id`; `sim` refusing import.
#[test]
fn import_errors_as_terraform_prints_them() {
    let tf = r#"
import {
  to = random_id.missing
  id = "AAAA"
}
import {
  for_each = toset(["a", "zz"])
  to       = random_id.keyed[each.key]
  id       = "AAAA"
}
resource "random_id" "keyed" {
  for_each    = toset(["a"])
  byte_length = 3
}
"#;
    let dir = project(&[("main.tf", tf)]);
    let (code, _, err) = check_cli_in(dir.path(), &["plan", "-no-color"], "");
    assert_eq!(code, 1, "{err}");
    check_golden("import_errors.txt", &err);
    // With every resource configured, a key the resource's for_each does not make.
    let dir = project(&[("main.tf", &tf[tf.find("import {\n  for_each").unwrap()..])]);
    let (code, _, err) = check_cli_in(dir.path(), &["plan", "-no-color"], "");
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains(
            "The configuration for the given import target random_id.keyed[\"zz\"] does not exist."
        ),
        "{err}"
    );
    assert!(err.contains("on main.tf:3:14:"), "{err}");
    // Generation makes one resource without `for_each`: Terraform's error, at `to`.
    let keyed = "import {\n  for_each = toset([\"a\"])\n  to       = random_id.gen[each.key]\n  id       = \"AAAA\"\n}\n";
    let dir = project(&[("main.tf", keyed)]);
    let (code, _, err) = check_cli_in(
        dir.path(),
        &["plan", "-generate-config-out=gen.tf", "-no-color"],
        "",
    );
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("Error: Invalid import 'to' expression"),
        "{err}"
    );
    assert!(
        err.contains("The target resource does not use for_each."),
        "{err}"
    );
    assert!(err.contains("on main.tf:3:14:"), "{err}");
    assert!(!dir.path().join("gen.tf").exists());
    let tf = r#"
import {
  to = data.random_id.x
  id = "a"
}
import {
  to = random_id.y
}
import {
  to = random_id.w
  id = var.nope
}
module "m" {
  source = "./m"
}
"#;
    let dir = project(&[
        ("main.tf", tf),
        (
            "m/main.tf",
            "import {\n  to = random_id.z\n  id = \"AAAA\"\n}\n",
        ),
    ]);
    let (code, out, err) = check_cli_in(dir.path(), &["validate"], "");
    assert_eq!(code, 1, "{out}");
    assert!(
        err.contains("Only managed resources can be imported."),
        "{err}"
    );
    assert!(
        err.contains("The argument \"id\" is required, but no definition was found."),
        "{err}"
    );
    assert!(
        err.contains("An import block was detected in \"module.m\". Import blocks are only allowed in the root module."),
        "{err}"
    );
    // The built-in sim refuses, in the words of the Python sim's framework.
    let tf = "import {\n  to = sim_thing.a\n  id = \"x\"\n}\nresource \"sim_thing\" \"a\" {\n  name = \"a\"\n}\n";
    let dir = project(&[("main.tf", tf)]);
    let (code, _, err) = check_cli_in(dir.path(), &["plan"], "");
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("Error: sim_thing does not support resource import"),
        "{err}"
    );
    assert!(
        err.contains("This provider has not implemented import_ for sim_thing"),
        "{err}"
    );
}

/// Targets inside module instances: an import block's `to` with a module key, and
/// `cairn import` to another instance of the same module.
#[test]
fn imports_into_module_instances() {
    let dir = project(&[
        (
            "main.tf",
            "module \"m\" {\n  for_each = toset([\"a\", \"b\"])\n  source   = \"./m\"\n}\n\
             import {\n  to = module.m[\"a\"].random_integer.n\n  id = \"5,1,9\"\n}\n",
        ),
        (
            "m/main.tf",
            "resource \"random_integer\" \"n\" {\n  min = 1\n  max = 9\n}\n",
        ),
    ]);
    let d = dir.path();
    let (code, out, err) = check_cli_in(
        d,
        &["import", "module.m[\"b\"].random_integer.n", "3,1,9"],
        "",
    );
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("Import successful!"), "{out}");
    let (code, out, err) = check_cli_in(d, &["plan", "-detailed-exitcode"], "");
    assert_eq!(code, 2, "{out}{err}");
    assert!(
        out.contains("  # module.m[\"a\"].random_integer.n will be imported\n"),
        "{out}"
    );
    assert!(
        out.contains("Plan: 1 to import, 0 to add, 0 to change, 0 to destroy."),
        "{out}"
    );
    let (code, out, err) = check_cli_in(d, &["apply", "-auto-approve"], "");
    assert_eq!(code, 0, "{out}{err}");
    let (code, out, _) = check_cli_in(
        d,
        &["state", "show", "module.m[\"a\"].random_integer.n"],
        "",
    );
    assert_eq!(code, 0);
    assert!(out.contains("result = 5"), "{out}");
}

/// `cairn import -config=DIR` (Terraform's flag): the resource block and its provider come
/// from DIR, the state stays in the working directory.
#[test]
fn import_takes_the_configuration_from_another_directory() {
    let dir = project(&[(
        "conf/main.tf",
        "resource \"random_integer\" \"p\" {\n  min = 1\n  max = 50000\n}\n",
    )]);
    let (code, out, err) = check_cli_in(
        dir.path(),
        &[
            "import",
            "-config=conf",
            "random_integer.p",
            "15390,1,50000",
            "-no-color",
        ],
        "",
    );
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("Import successful!"), "{out}");
    assert!(dir.path().join(".cairn").is_dir());
    assert!(!dir.path().join("conf/.cairn").exists());
    let (code, out, _) = check_cli_in(dir.path(), &["state", "list"], "");
    assert_eq!(code, 0);
    assert!(out.contains("random_integer.p"), "{out}");
    let (code, _, err) = check_cli_in(
        dir.path(),
        &[
            "import",
            "-config=nope",
            "random_integer.q",
            "1,1,2",
            "-no-color",
        ],
        "",
    );
    assert_eq!(code, 1);
    assert!(
        err.contains("Module directory") && err.contains("nope"),
        "{err}"
    );
}
