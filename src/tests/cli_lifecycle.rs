//! End-to-end tests of the everyday lifecycle workflows on the real binary (issue 11): saved
//! plans, targeted saved plans, drift, apply-time re-planning, data sources in state,
//! read-only on an empty state, interrupts, providers in state. Each looks at what the user
//! sees (exit code, plan text or JSON), the calls the `sim` provider logged
//! (`sim-store/calls.jsonl`), the state after the apply, and the next plan.

use super::project;
use std::path::Path;
use std::process::{Command, Stdio};

/// Runs `cairn ARGS` in `dir` with `env` set (and no inherited `TF_VAR_*` or `SIM_*`), and
/// returns (exit code, stdout, stderr).
fn cairn(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
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
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("the cairn binary runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `cairn` that must exit with `code`; returns stdout.
fn ok(dir: &Path, args: &[&str], code: i32) -> String {
    let (c, out, err) = cairn(dir, args, &[]);
    assert_eq!(c, code, "cairn {args:?}\n{out}\n{err}");
    out
}

/// The calls `sim` logged since the last look, one `op name` (and `id` when there is one) per
/// line; `seen` is how many lines were looked at before.
fn calls(dir: &Path, seen: &mut usize) -> Vec<String> {
    let text = std::fs::read_to_string(dir.join("sim-store/calls.jsonl")).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    let new = lines[*seen..]
        .iter()
        .map(|l| {
            let j: serde_json::Value = serde_json::from_str(l).unwrap();
            let mut s = format!(
                "{} {}",
                j["op"].as_str().unwrap(),
                j["name"].as_str().unwrap()
            );
            if let Some(id) = j["id"].as_str() {
                s.push_str(&format!(" {id}"));
            }
            if j["ok"] == false {
                s.push_str(" FAILED");
            }
            s
        })
        .collect();
    *seen = lines.len();
    new
}

/// The changing calls (`create`, `update`, `delete`) among `calls`, as `op name`, sorted (ids
/// of same-named objects made in parallel depend on timing).
fn changes(calls: &[String]) -> Vec<String> {
    let mut c: Vec<String> = calls
        .iter()
        .filter(|c| c.starts_with("create") || c.starts_with("update") || c.starts_with("delete"))
        .map(|c| c.split(' ').take(2).collect::<Vec<_>>().join(" "))
        .collect();
    c.sort();
    c
}

/// `state show ADDR`'s attribute `name` (a quoted string value).
fn state_attr(dir: &Path, addr: &str, name: &str) -> String {
    let out = ok(dir, &["state", "show", addr], 0);
    out.lines()
        .find_map(|l| {
            let (k, v) = l.trim().split_once(" = ")?;
            (k.trim() == name).then(|| v.trim().trim_matches('"').to_string())
        })
        .unwrap_or_else(|| panic!("{addr} has no {name}:\n{out}"))
}

const VARS_MAIN: &str = r#"
variable "v" {
  default = "1"
}
variable "n" {
  type    = number
  default = 1
}
variable "names" {
  type    = list(string)
  default = ["x"]
}
variable "from_env" {
  default = "default"
}
variable "from_auto" {
  default = "default"
}
resource "sim_thing" "root" {
  name  = "root"
  value = "${var.v}-${var.from_env}-${var.from_auto}"
}
resource "sim_thing" "counted" {
  count = var.n
  name  = "c${count.index}"
  value = var.v
}
module "m" {
  for_each = toset(var.names)
  source   = "./m"
  v        = "${var.v}-${each.key}"
}
output "inner" {
  value = { for k, m in module.m : k => m.inner }
}
"#;

const VARS_M: &str = r#"
variable "v" {}
resource "sim_thing" "t" {
  name  = "m"
  value = var.v
}
module "inner" {
  source = "../inner"
  v      = var.v
}
output "inner" {
  value = module.inner.value
}
"#;

const VARS_INNER: &str = r#"
variable "v" {}
resource "sim_thing" "t" {
  name  = "inner"
  value = var.v
}
output "value" {
  value = sim_thing.t.value
}
"#;

/// Issue 11.1: a plan saved with `-var`, `-var-file`, `*.auto.tfvars` and `TF_VAR_*` applies
/// with exactly those values — root variables, module inputs, `for_each` over module
/// instances, `count`, nested modules — even when none of them is given to `apply`.
#[test]
fn saved_plan_applies_with_the_variables_it_was_made_with() {
    let dir = project(&[
        ("main.tf", VARS_MAIN),
        ("m/main.tf", VARS_M),
        ("inner/main.tf", VARS_INNER),
        ("extra.tfvars", "names = [\"x\", \"y\"]\n"),
        ("set.auto.tfvars", "from_auto = \"auto\"\n"),
    ]);
    let d = dir.path();
    let (code, out, err) = cairn(
        d,
        &[
            "plan",
            "-var",
            "v=2",
            "-var",
            "n=2",
            "-var-file=extra.tfvars",
            "-out=p.bin",
        ],
        &[("TF_VAR_from_env", "env")],
    );
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(
        out.contains("Plan: 7 to add, 0 to change, 0 to destroy."),
        "{out}"
    );
    // The plan file lists the values; apply must use the same.
    let show = ok(d, &["show", "-json", "p.bin"], 0);
    let j: serde_json::Value = serde_json::from_str(&show).unwrap();
    assert_eq!(j["variables"]["v"]["value"], "2", "{show}");
    assert_eq!(j["variables"]["from_env"]["value"], "env", "{show}");
    assert_eq!(j["variables"]["from_auto"]["value"], "auto", "{show}");
    // Between plan and apply the auto file changes: the plan still holds what it was made with.
    std::fs::write(d.join("set.auto.tfvars"), "from_auto = \"changed\"\n").unwrap();
    let mut seen = 0;
    let out = ok(d, &["apply", "p.bin"], 0);
    assert!(
        out.contains("Apply complete! Resources: 7 added, 0 changed, 0 destroyed."),
        "{out}"
    );
    assert_eq!(
        changes(&calls(d, &mut seen)),
        [
            "create c0",
            "create c1",
            "create inner",
            "create inner",
            "create m",
            "create m",
            "create root"
        ]
    );
    assert_eq!(state_attr(d, "sim_thing.root", "value"), "2-env-auto");
    assert_eq!(state_attr(d, "sim_thing.counted[1]", "value"), "2");
    assert_eq!(
        state_attr(d, "module.m[\"y\"].module.inner.sim_thing.t", "value"),
        "2-y"
    );
    assert_eq!(state_attr(d, "module.m[\"x\"].sim_thing.t", "value"), "2-x");
    // The same request again plans no change.
    std::fs::write(d.join("set.auto.tfvars"), "from_auto = \"auto\"\n").unwrap();
    let (code, out, err) = cairn(
        d,
        &[
            "plan",
            "-detailed-exitcode",
            "-var",
            "v=2",
            "-var",
            "n=2",
            "-var-file=extra.tfvars",
        ],
        &[("TF_VAR_from_env", "env")],
    );
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains("No changes."), "{out}");
}

/// Issue 11.1: beside a plan file, a `-var` that changes a planned value, `-target`,
/// `-replace`, `-destroy`, `-read-only` and `-refresh=false` are refused before anything runs;
/// a `-var` equal to the plan's value is accepted (as Terraform does).
#[test]
fn saved_plan_refuses_flags_that_would_change_it() {
    let dir = project(&[(
        "main.tf",
        "variable \"v\" {\n  default = \"1\"\n}\nresource \"sim_thing\" \"a\" {\n  name  = \"a\"\n  value = var.v\n}\n",
    )]);
    let d = dir.path();
    ok(d, &["plan", "-var", "v=2", "-out=p.bin"], 0);
    let (code, _, err) = cairn(d, &["apply", "-var", "v=3", "p.bin"], &[]);
    assert_eq!(code, 1);
    assert!(
        err.contains("Can't change variable when applying a saved plan"),
        "{err}"
    );
    assert!(
        err.contains(
            "The saved plan specifies \"2\" as the value whereas during apply the value \"3\""
        ),
        "{err}"
    );
    std::fs::write(d.join("three.tfvars"), "v = \"3\"\n").unwrap();
    let (code, _, err) = cairn(d, &["apply", "-var-file=three.tfvars", "p.bin"], &[]);
    assert_eq!(code, 1);
    assert!(err.contains("The variable v cannot be set"), "{err}");
    for flag in [
        "-target=sim_thing.a",
        "-replace=sim_thing.a",
        "-destroy",
        "-read-only",
        "-refresh=false",
    ] {
        let (code, _, err) = cairn(d, &["apply", flag, "p.bin"], &[]);
        assert_eq!(code, 1, "{flag}");
        let name = flag.split('=').next().unwrap();
        assert!(
            err.contains("when applying a saved plan") && err.contains(name),
            "{flag}: {err}"
        );
    }
    assert!(
        !d.join("sim-store/calls.jsonl").exists()
            || !std::fs::read_to_string(d.join("sim-store/calls.jsonl"))
                .unwrap()
                .contains("create"),
        "a refused apply changes nothing"
    );
    // The same value is no change of the plan; TF_VAR_* at apply is ignored.
    let (code, out, err) = cairn(d, &["apply", "-var", "v=2", "p.bin"], &[("TF_VAR_v", "9")]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert_eq!(state_attr(d, "sim_thing.a", "value"), "2");
    let (code, _, _) = cairn(d, &["plan", "-detailed-exitcode", "-var", "v=2"], &[]);
    assert_eq!(code, 0);
}

/// Issue 11.1: a required variable given only at plan time (here by `TF_VAR_`) is in the
/// plan: `apply FILE` needs it from nowhere else, and a `-var` for another variable beside the
/// plan file is checked without asking for it again.
#[test]
fn saved_plan_holds_required_variables() {
    let dir = project(&[(
        "main.tf",
        "variable \"req\" {}\nvariable \"opt\" {\n  default = \"o\"\n}\nresource \"sim_thing\" \"a\" {\n  name  = \"a\"\n  value = \"${var.req}-${var.opt}\"\n}\n",
    )]);
    let d = dir.path();
    let (code, out, err) = cairn(d, &["plan", "-out=p.bin"], &[("TF_VAR_req", "r")]);
    assert_eq!(code, 0, "{out}\n{err}");
    let (code, out, err) = cairn(d, &["apply", "-var", "opt=o", "p.bin"], &[]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert_eq!(state_attr(d, "sim_thing.a", "value"), "r-o");
    let (code, _, _) = cairn(d, &["plan", "-detailed-exitcode"], &[("TF_VAR_req", "r")]);
    assert_eq!(code, 0);
}

/// Issue 11.1: a saved `-replace` and `-refresh=false` plan applies as planned: the replaced
/// object is replaced and nothing is read before the apply.
#[test]
fn saved_plan_carries_replace_and_refresh_choice() {
    let dir = project(&[(
        "main.tf",
        "resource \"sim_thing\" \"a\" {\n  name = \"a\"\n}\nresource \"sim_thing\" \"b\" {\n  name = \"b\"\n}\n",
    )]);
    let d = dir.path();
    ok(d, &["apply", "-auto-approve"], 0);
    let mut seen = 0;
    calls(d, &mut seen);
    let out = ok(
        d,
        &[
            "plan",
            "-replace=sim_thing.a",
            "-refresh=false",
            "-out=p.bin",
        ],
        0,
    );
    assert!(
        out.contains("Plan: 1 to add, 0 to change, 1 to destroy."),
        "{out}"
    );
    assert!(calls(d, &mut seen).iter().all(|c| !c.starts_with("read")));
    let out = ok(d, &["apply", "p.bin"], 0);
    assert!(
        out.contains("Resources: 1 added, 0 changed, 1 destroyed."),
        "{out}"
    );
    let made = calls(d, &mut seen);
    assert!(made.iter().all(|c| !c.starts_with("read")), "{made:?}");
    assert_eq!(changes(&made), ["create a", "delete a"]);
    assert_eq!(state_attr(d, "sim_thing.a", "id"), "a-2");
    ok(d, &["plan", "-detailed-exitcode"], 0);
}

/// Issue 11.4: `plan -target -out` then `apply FILE` evaluates and applies only the targets
/// and what they depend on: the rest (a `for_each` not known yet, a data source that would
/// fail, an output) is neither evaluated nor read. A full plan then finishes the job.
#[test]
fn targeted_saved_plan_applies_only_its_targets() {
    let dir = project(&[(
        "main.tf",
        r#"
resource "sim_thing" "a" {
  name = "a"
}
resource "sim_thing" "b" {
  for_each = toset([sim_thing.a.id])
  name     = "b"
  value    = each.key
}
data "sim_lookup" "later" {
  key        = "b"
  depends_on = [sim_thing.b]
}
output "b" {
  value = [for b in sim_thing.b : b.id]
}
output "found" {
  value = data.sim_lookup.later.result
}
"#,
    )]);
    let d = dir.path();
    // The whole configuration cannot be planned yet.
    let (code, _, err) = cairn(d, &["plan"], &[]);
    assert_eq!(code, 1);
    assert!(err.contains("Invalid for_each argument"), "{err}");
    let mut seen = 0;
    calls(d, &mut seen);
    let out = ok(d, &["plan", "-target=sim_thing.a", "-out=p.bin"], 0);
    assert!(
        out.contains("Plan: 1 to add, 0 to change, 0 to destroy."),
        "{out}"
    );
    assert!(calls(d, &mut seen).iter().all(|c| !c.starts_with("lookup")));
    let (code, out, err) = cairn(d, &["apply", "p.bin"], &[]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains("Apply complete! Resources: 1 added"), "{out}");
    let made = calls(d, &mut seen);
    assert_eq!(changes(&made), ["create a"]);
    assert!(made.iter().all(|c| !c.starts_with("lookup")), "{made:?}");
    let listed = ok(d, &["state", "list"], 0);
    assert!(listed.contains("sim_thing.a"), "{listed}");
    assert!(!listed.contains("sim_thing.b"), "{listed}");
    assert!(!listed.contains("data.sim_lookup.later"), "{listed}");
    // Then a full plan: b is created, the data source read at apply.
    let out = ok(d, &["plan", "-detailed-exitcode"], 2);
    assert!(
        out.contains("sim_thing.b[\"a-1\"] will be created"),
        "{out}"
    );
    ok(d, &["apply", "-auto-approve"], 0);
    assert_eq!(changes(&calls(d, &mut seen)), ["create b"]);
    ok(d, &["plan", "-detailed-exitcode"], 0);
}

/// Rewrites attribute `key` of the object with id `id` in the `sim` store (a change made
/// outside Cairn).
fn cloud_set(dir: &Path, id: &str, key: &str, value: &str) {
    let p = dir.join(format!("sim-store/things/local/{id}.json"));
    let text = std::fs::read_to_string(&p).unwrap();
    let mut j: serde_json::Value = serde_json::from_str(&text).unwrap();
    j[key] = serde_json::Value::String(value.into());
    std::fs::write(&p, j.to_string()).unwrap();
}

/// Issue 11.3: drift in a computed attribute of a resource named in a data source's
/// `depends_on`, with the configuration planning no-op, does not defer the read: it happens
/// during the plan, `-detailed-exitcode` exits 0, the drift is shown, and applying the plan
/// (saved or not) records the refreshed values. Terraform 1.11 agrees (exit 0, one lookup in
/// the plan, `out` recorded by the apply); it hides the drift note, Cairn shows it.
#[test]
fn drift_alone_defers_no_read_and_is_no_change() {
    let dir = project(&[(
        "main.tf",
        r#"
resource "sim_thing" "a" {
  name  = "a"
  value = "v"
}
data "sim_lookup" "l" {
  key        = "a"
  depends_on = [sim_thing.a]
}
resource "sim_thing" "b" {
  name  = "b"
  value = "w"
}
"#,
    )]);
    let d = dir.path();
    ok(d, &["apply", "-auto-approve"], 0);
    cloud_set(d, "a-1", "out", "a/drifted");
    let mut seen = 0;
    calls(d, &mut seen);
    let out = ok(d, &["plan", "-detailed-exitcode", "-out=p.bin"], 0);
    assert!(
        out.contains("Objects have changed outside of Cairn"),
        "{out}"
    );
    assert!(out.contains("~ out   = \"a/v\" -> \"a/drifted\""), "{out}");
    assert!(out.contains("No changes."), "{out}");
    assert!(!out.contains("read during apply"), "{out}");
    let made = calls(d, &mut seen);
    assert!(made.contains(&"lookup a".to_string()), "{made:?}");
    assert!(changes(&made).is_empty(), "{made:?}");
    let j: serde_json::Value =
        serde_json::from_str(&ok(d, &["show", "-json", "p.bin"], 0)).unwrap();
    let actions: Vec<String> = j["resource_changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| format!("{} {}", c["address"], c["change"]["actions"]))
        .collect();
    assert!(
        actions.iter().all(|a| a.ends_with("[\"no-op\"]")),
        "{actions:?}"
    );
    // Applying the plan records what refresh found, and changes nothing.
    let out = ok(d, &["apply", "p.bin"], 0);
    assert!(
        out.contains("Resources: 0 added, 0 changed, 0 destroyed."),
        "{out}"
    );
    assert!(changes(&calls(d, &mut seen)).is_empty());
    assert_eq!(state_attr(d, "sim_thing.a", "out"), "a/drifted");
    assert_eq!(state_attr(d, "data.sim_lookup.l", "result"), "a/drifted");
    let out = ok(d, &["plan", "-detailed-exitcode"], 0);
    assert!(!out.contains("changed outside"), "{out}");
    // A plain apply records drift too, without asking (there is nothing to approve).
    cloud_set(d, "a-1", "out", "a/again");
    let out = ok(d, &["apply"], 0);
    assert!(out.contains("No changes."), "{out}");
    assert_eq!(state_attr(d, "sim_thing.a", "out"), "a/again");
    assert!(changes(&calls(d, &mut seen)).is_empty());
    // A configured attribute's drift is a change: it is planned back, and the read waits.
    cloud_set(d, "a-1", "value", "tampered");
    let out = ok(d, &["plan", "-detailed-exitcode"], 2);
    assert!(
        out.contains("sim_thing.a will be updated in-place"),
        "{out}"
    );
    assert!(
        out.contains("data.sim_lookup.l will be read during apply"),
        "{out}"
    );
}

/// Issue 11.2: a resource planned as "update, known after apply" because of a data read
/// deferred to apply is planned again with the read's result; when that equals what the state
/// has, it is a no-op — no provider `update`, no event, not counted — and when it differs, it
/// is updated. Terraform 1.11 makes the same calls and prints the same summary.
#[test]
fn apply_replans_with_final_values_and_skips_what_is_unchanged() {
    let dir = project(&[
        (
            "main.tf",
            r#"
variable "v" {
  default = "1"
}
resource "sim_thing" "a" {
  name  = "a"
  value = var.v
}
data "sim_lookup" "l" {
  key        = "k"
  depends_on = [sim_thing.a]
}
resource "sim_thing" "c" {
  name  = "c"
  value = data.sim_lookup.l.result
}
output "r" {
  value = data.sim_lookup.l.result
}
"#,
        ),
        ("sim-store/ext/local.json", r#"{"k": "same"}"#),
    ]);
    let d = dir.path();
    ok(d, &["apply", "-auto-approve"], 0);
    let mut seen = 0;
    calls(d, &mut seen);
    let events_before = ok(d, &["log"], 0).lines().count();
    let out = ok(d, &["apply", "-auto-approve", "-var", "v=2"], 0);
    assert!(
        out.contains("sim_thing.c will be updated in-place"),
        "{out}"
    );
    assert!(
        out.contains("Plan: 0 to add, 2 to change, 0 to destroy."),
        "{out}"
    );
    assert!(!out.contains("sim_thing.c: Modifying"), "{out}");
    assert!(
        out.contains("Apply complete! Resources: 0 added, 1 changed, 0 destroyed."),
        "{out}"
    );
    assert_eq!(changes(&calls(d, &mut seen)), ["update a"]);
    let log = ok(d, &["log"], 0);
    let new_events: Vec<&str> = log.lines().skip(events_before).collect();
    assert!(
        new_events.iter().all(|e| !e.contains("sim_thing.c")),
        "{new_events:?}"
    );
    assert!(
        new_events.iter().any(|e| e.contains("0 added, 1 changed")),
        "{new_events:?}"
    );
    assert_eq!(state_attr(d, "sim_thing.c", "value"), "same");
    ok(d, &["plan", "-detailed-exitcode", "-var", "v=2"], 0);
    // The same plan with a read that returns something new updates c.
    std::fs::write(d.join("sim-store/ext/local.json"), r#"{"k": "new"}"#).unwrap();
    let out = ok(d, &["apply", "-auto-approve", "-var", "v=3"], 0);
    assert!(
        out.contains("Apply complete! Resources: 0 added, 2 changed, 0 destroyed."),
        "{out}"
    );
    assert_eq!(changes(&calls(d, &mut seen)), ["update a", "update c"]);
    assert_eq!(state_attr(d, "sim_thing.c", "value"), "new");
    ok(d, &["plan", "-detailed-exitcode", "-var", "v=3"], 0);
}

/// Issue 11.5: every data source read during the plan or the apply is in state after the
/// apply, referred to or not (`state list`, `state show`, `show -json`'s prior_state) — even
/// when the plan has no other change, which applies without asking, as Terraform does. A data
/// source removed from the configuration leaves state on the next apply without being read,
/// and an output that referred to it is planned as deleted.
#[test]
fn data_sources_live_in_state_after_apply() {
    let dir = project(&[
        (
            "main.tf",
            "resource \"sim_thing\" \"a\" {\n  name = \"a\"\n}\n",
        ),
        ("sim-store/ext/local.json", r#"{"k": "kv", "j": "jv"}"#),
    ]);
    let d = dir.path();
    ok(d, &["apply", "-auto-approve"], 0);
    std::fs::write(
        d.join("main.tf"),
        r#"
resource "sim_thing" "a" {
  name = "a"
}
data "sim_lookup" "plan_time" {
  key = "k"
}
data "sim_lookup" "apply_time" {
  key = sim_thing.a.name
  depends_on = [sim_thing.b]
}
resource "sim_thing" "b" {
  name = "b"
}
data "sim_lookup" "referred" {
  key = "j"
}
output "j" {
  value = data.sim_lookup.referred.result
}
"#,
    )
    .unwrap();
    let mut seen = 0;
    calls(d, &mut seen);
    let out = ok(d, &["apply", "-auto-approve"], 0);
    assert!(
        out.contains("data.sim_lookup.apply_time will be read during apply"),
        "{out}"
    );
    let listed = ok(d, &["state", "list"], 0);
    for addr in [
        "data.sim_lookup.plan_time",
        "data.sim_lookup.apply_time",
        "data.sim_lookup.referred",
    ] {
        assert!(listed.lines().any(|l| l == addr), "{addr} in\n{listed}");
    }
    assert_eq!(state_attr(d, "data.sim_lookup.plan_time", "result"), "kv");
    assert_eq!(state_attr(d, "data.sim_lookup.apply_time", "result"), "a/-");
    // Plan-time reads were not repeated at apply.
    let mut lookups: Vec<String> = calls(d, &mut seen)
        .into_iter()
        .filter(|c| c.starts_with("lookup"))
        .collect();
    lookups.sort();
    assert_eq!(lookups, ["lookup a", "lookup j", "lookup k"]);
    let j: serde_json::Value = serde_json::from_str(&ok(d, &["show", "-json"], 0)).unwrap();
    let shown: Vec<&str> = j["values"]["root_module"]["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["address"].as_str().unwrap())
        .collect();
    assert!(shown.contains(&"data.sim_lookup.plan_time"), "{shown:?}");
    ok(d, &["plan", "-detailed-exitcode"], 0);

    // A new data source and nothing else to do: the apply records it, without asking.
    std::fs::write(
        d.join("extra.tf"),
        "data \"sim_lookup\" \"added\" {\n  key = \"k\"\n}\n",
    )
    .unwrap();
    let (code, out, err) = cairn(d, &["apply"], &[]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains("No changes."), "{out}");
    assert_eq!(state_attr(d, "data.sim_lookup.added", "result"), "kv");
    let out = ok(d, &["plan", "-out=p.bin"], 0);
    assert!(out.contains("No changes."), "{out}");
    let j: serde_json::Value =
        serde_json::from_str(&ok(d, &["show", "-json", "p.bin"], 0)).unwrap();
    let prior: Vec<&str> = j["prior_state"]["values"]["root_module"]["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["address"].as_str().unwrap())
        .collect();
    assert!(prior.contains(&"data.sim_lookup.added"), "{prior:?}");

    // Removed from the configuration: dropped without a read; its output is deleted.
    std::fs::remove_file(d.join("extra.tf")).unwrap();
    let main = std::fs::read_to_string(d.join("main.tf")).unwrap();
    let cut = main.find("data \"sim_lookup\" \"referred\"").unwrap();
    std::fs::write(d.join("main.tf"), &main[..cut]).unwrap();
    calls(d, &mut seen);
    let out = ok(d, &["plan", "-detailed-exitcode"], 2);
    assert!(out.contains("- j = \"jv\" -> null"), "{out}");
    let made = calls(d, &mut seen);
    assert!(!made.contains(&"lookup j".to_string()), "{made:?}");
    ok(d, &["apply", "-auto-approve"], 0);
    let made = calls(d, &mut seen);
    assert!(!made.contains(&"lookup j".to_string()), "{made:?}");
    let listed = ok(d, &["state", "list"], 0);
    assert!(!listed.contains("data.sim_lookup.referred"), "{listed}");
    assert!(!listed.contains("data.sim_lookup.added"), "{listed}");
    assert!(listed.contains("data.sim_lookup.plan_time"), "{listed}");
    assert_eq!(ok(d, &["output"], 0), "");
    ok(d, &["plan", "-detailed-exitcode"], 0);
}

/// Issue 11.6: read-only on a configuration never applied has nothing to refresh and nothing
/// to propose: exit 0, no provider call but `configure`, and `apply -read-only` records
/// nothing and creates nothing. A data source whose configuration refers to a resource that
/// does not exist yet is not read and is no error (nor warning).
#[test]
fn read_only_on_a_configuration_never_applied() {
    let dir = project(&[
        (
            "main.tf",
            r#"
resource "sim_thing" "a" {
  name = "a"
}
data "sim_lookup" "known" {
  key = "k"
}
data "sim_lookup" "unknown" {
  key = sim_thing.a.id
}
output "r" {
  value = data.sim_lookup.unknown.result
}
"#,
        ),
        ("sim-store/ext/local.json", r#"{"k": "kv"}"#),
    ]);
    let d = dir.path();
    let mut seen = 0;
    let (code, out, err) = cairn(d, &["plan", "-read-only", "-detailed-exitcode"], &[]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains("No changes."), "{out}");
    assert_eq!(err, "");
    assert_eq!(calls(d, &mut seen), ["configure local"]);
    let (code, out, err) = cairn(d, &["apply", "-read-only", "-auto-approve"], &[]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert_eq!(err, "");
    assert!(calls(d, &mut seen)
        .iter()
        .all(|c| c.starts_with("configure")));
    assert_eq!(ok(d, &["state", "list"], 0), "");
    assert_eq!(ok(d, &["output"], 0), "");
    assert!(!d.join("sim-store/things").exists());
    // The configuration then applies as usual.
    ok(d, &["apply", "-auto-approve"], 0);
    ok(d, &["plan", "-read-only", "-detailed-exitcode"], 0);
    ok(d, &["plan", "-detailed-exitcode"], 0);
}

/// Issue 11.8: provider instances are listed by `state list` (root, aliased, inside a module),
/// `state show` shows the configuration each was last applied with, and `-at=SEQ` does the
/// same at any point of history.
#[test]
fn providers_are_visible_in_state() {
    let main = |latency: u32| {
        format!(
            r#"
provider "sim" {{
  region = "eu"
}}
provider "sim" {{
  alias      = "east"
  region     = "us-east"
  latency_ms = {latency}
}}
resource "sim_thing" "a" {{
  name = "a"
}}
resource "sim_thing" "b" {{
  provider = sim.east
  name     = "b"
}}
module "m" {{
  source = "./m"
}}
"#
        )
    };
    let dir = project(&[
        ("main.tf", &main(0)),
        (
            "m/main.tf",
            "provider \"sim\" {\n  alias  = \"inner\"\n  region = \"ap\"\n}\nresource \"sim_thing\" \"c\" {\n  provider = sim.inner\n  name     = \"c\"\n}\n",
        ),
    ]);
    let d = dir.path();
    ok(d, &["apply", "-auto-approve"], 0);
    let first_head = ok(d, &["log"], 0).lines().count();
    assert_eq!(
        ok(d, &["state", "list"], 0),
        "provider[\"sim\"]\nprovider[\"sim\"].east\nmodule.m.provider[\"sim\"].inner\n\
         sim_thing.a\nsim_thing.b\nmodule.m.sim_thing.c\n"
    );
    assert_eq!(
        ok(d, &["state", "list", "module.m"], 0),
        "module.m.provider[\"sim\"].inner\nmodule.m.sim_thing.c\n"
    );
    assert_eq!(
        ok(d, &["state", "list", "provider[\"sim\"].east"], 0),
        "provider[\"sim\"].east\n"
    );
    assert_eq!(
        ok(d, &["state", "show", "provider[\"sim\"].east"], 0),
        "# provider[\"sim\"].east:\nprovider \"sim\" {\n    alias      = \"east\"\n    latency_ms = 0\n    region     = \"us-east\"\n}\n"
    );
    assert!(
        ok(d, &["state", "show", "module.m.provider[\"sim\"].inner"], 0)
            .contains("region = \"ap\"")
    );
    // An in-place change of the provider's configuration; history keeps the old one.
    std::fs::write(d.join("main.tf"), main(5)).unwrap();
    ok(d, &["apply", "-auto-approve"], 0);
    assert!(ok(d, &["state", "show", "provider[\"sim\"].east"], 0).contains("latency_ms = 5"));
    let at = first_head.to_string();
    let old = ok(
        d,
        &["state", "show", "-at", &at, "provider[\"sim\"].east"],
        0,
    );
    assert!(old.contains("latency_ms = 0"), "{old}");
    // Before anything was applied, no provider was in state either.
    assert_eq!(ok(d, &["state", "list", "-at=1"], 0), "");
    let (code, _, err) = cairn(d, &["state", "show", "provider[\"sim\"].west"], &[]);
    assert_eq!(code, 1);
    assert!(
        err.contains("has no provider instance provider[\"sim\"].west"),
        "{err}"
    );
}

const SLOW_TF: &str = r#"
resource "sim_thing" "a" {
  name = "a"
}
resource "sim_thing" "b" {
  name = "b"
}
resource "sim_thing" "c" {
  name  = "c"
  value = sim_thing.a.id
}
resource "sim_thing" "d" {
  name = "d"
}
"#;

/// A `cairn apply -auto-approve -parallelism=2` running in the background, its standard
/// output collected as it comes.
struct Running {
    child: std::process::Child,
    stdout: std::sync::Arc<std::sync::Mutex<String>>,
    reader: std::thread::JoinHandle<()>,
}

impl Running {
    fn start(dir: &Path, env: &[(&str, &str)]) -> Self {
        Self::start_with(
            dir,
            &["apply", "-auto-approve", "-parallelism=2"],
            env,
            Stdio::null(),
        )
    }

    fn start_with(dir: &Path, args: &[&str], env: &[(&str, &str)], stdin: Stdio) -> Self {
        use std::io::Read;
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_cairn"));
        cmd.args(args)
            .current_dir(dir)
            .env("NO_COLOR", "1")
            .env_remove("CAIRN_STATE_DIR")
            .env_remove("CAIRN_LOG")
            .stdin(stdin)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().unwrap();
        let mut stdout = child.stdout.take().unwrap();
        let seen = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        let reader = {
            let seen = seen.clone();
            std::thread::spawn(move || {
                let mut buf = [0u8; 4096];
                while let Ok(n) = stdout.read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                    seen.lock()
                        .unwrap()
                        .push_str(&String::from_utf8_lossy(&buf[..n]));
                }
            })
        };
        Running {
            child,
            stdout: seen,
            reader,
        }
    }

    /// Waits (at most a minute) until standard output contains `text`.
    fn wait_for(&self, text: &str) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while !self.stdout.lock().unwrap().contains(text) {
            assert!(
                std::time::Instant::now() < deadline,
                "never printed {text:?}"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }

    fn signal(&self, s: libc::c_int) {
        // SAFETY: kill(2) on our own child's pid; no memory is shared.
        let r = unsafe { libc::kill(self.child.id() as libc::pid_t, s) };
        assert_eq!(r, 0, "kill {s}");
    }

    /// Waits for the exit: (exit code, stdout, stderr).
    fn finish(mut self) -> (i32, String, String) {
        use std::io::Read;
        let mut err = String::new();
        self.child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut err)
            .unwrap();
        let status = self.child.wait().unwrap();
        self.reader.join().unwrap();
        let out = self.stdout.lock().unwrap().clone();
        (status.code().unwrap_or(-1), out, err)
    }
}

/// Starts an apply with every `sim` call slowed to 3 s, waits until creates are under way,
/// sends `signals`, and returns (exit code, stdout, stderr, seconds from the first signal to
/// the exit).
fn interrupted_apply(dir: &Path, signals: &[libc::c_int]) -> (i32, String, String, f64) {
    let run = Running::start(dir, &[("SIM_LATENCY_MS", "3000")]);
    run.wait_for("Creating...");
    // Let the creates reach their (slow) provider calls.
    std::thread::sleep(std::time::Duration::from_millis(300));
    let sent = std::time::Instant::now();
    for &s in signals {
        run.signal(s);
    }
    let (code, out, err) = run.finish();
    (code, out, err, sent.elapsed().as_secs_f64())
}

/// The state's log is whole after an interrupted run: every operation started has an outcome
/// (or is resolved by the next run), `state check` passes, and the lock is free.
fn converges_after_interrupt(d: &Path) {
    ok(d, &["state", "check"], 0);
    // The lock was released: a command that takes it runs at once.
    let (code, out, err) = cairn(d, &["apply", "-auto-approve", "-lock-timeout=0s"], &[]);
    assert_eq!(code, 0, "{out}\n{err}");
    let listed = ok(d, &["state", "list"], 0);
    for r in ["sim_thing.a", "sim_thing.b", "sim_thing.c", "sim_thing.d"] {
        assert!(listed.contains(r), "{listed}");
    }
    // Nothing was created twice: one object per name in the cloud.
    let objects = std::fs::read_dir(d.join("sim-store/things/local"))
        .unwrap()
        .count();
    assert_eq!(objects, 4);
    ok(d, &["plan", "-detailed-exitcode"], 0);
    ok(d, &["state", "check"], 0);
}

/// Issue 11.7: Ctrl-C mid-apply starts no new step, tells the providers to stop (the slow
/// `sim` calls in flight give up at once instead of after their 3 s latency), records the
/// outcome of every step that was running, releases the lock, exits 1 with a summary of what
/// was and was not done; the next run converges.
#[test]
fn interrupt_stops_providers_and_records_every_step() {
    let dir = project(&[("main.tf", SLOW_TF)]);
    let d = dir.path();
    let (code, out, err, took) = interrupted_apply(d, &[libc::SIGINT]);
    assert_eq!(code, 1, "{out}\n{err}");
    assert!(
        took < 2.5,
        "the providers were not stopped: {took:.1}s\n{out}\n{err}"
    );
    assert!(
        err.contains("Interrupt received: no new steps start"),
        "{err}"
    );
    assert!(
        err.contains("sim: interrupted before the call was made"),
        "stop reached the provider\n{err}"
    );
    assert!(err.contains("Apply interrupted"), "{err}");
    // Two creates were running (parallelism 2) and ended at the stop; the third waited for
    // its turn and never started, and `c` waits on `a`: one message, no error of their own.
    assert!(err.contains("Never started: 2 steps ("), "{err}");
    assert!(err.contains("sim_thing.c"), "{err}");
    assert!(
        err.contains("Running when interrupted, and how it ended:"),
        "{err}"
    );
    assert_eq!(err.matches("Error: ").count(), 1, "one error box\n{err}");
    assert!(
        out.contains("Apply interrupted. Before the errors above: 0 added, 0 changed, 0 destroyed"),
        "{out}"
    );
    // No create reached the cloud; every started operation has its outcome in the log.
    let mut seen = 0;
    assert!(changes(&calls(d, &mut seen)).is_empty());
    let log = ok(d, &["log"], 0);
    let started = log.matches("OperationStarted").count();
    let settled =
        log.matches("OperationFailed").count() + log.matches("OperationSucceeded").count();
    assert!(started >= 2, "{log}");
    assert_eq!(started, settled, "{log}");
    assert!(log.contains("RunFinished        interrupted"), "{log}");
    converges_after_interrupt(d);
}

/// Issue 30: Ctrl-C during a 30-resource apply is one message, as Terraform reports an
/// interrupt — what finished, what was running and how it ended, how many steps never started
/// — with no error box for a step that never ran, and a summary that counts them right.
#[test]
fn interrupt_is_one_message_naming_what_never_started() {
    let mut tf = String::new();
    for i in 0..30 {
        tf.push_str(&format!(
            "resource \"sim_thing\" \"r{i:02}\" {{\n  name = \"r{i:02}\"\n}}\n"
        ));
    }
    let dir = project(&[("main.tf", &tf)]);
    let d = dir.path();
    let run = Running::start_with(
        d,
        &["apply", "-auto-approve", "-parallelism=4"],
        &[("SIM_LATENCY_MS", "700")],
        Stdio::null(),
    );
    // Let some creates finish, then stop while others run.
    run.wait_for("Creation complete");
    std::thread::sleep(std::time::Duration::from_millis(300));
    run.signal(libc::SIGINT);
    let (code, out, err) = run.finish();
    assert_eq!(code, 1, "{out}\n{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(err.matches("Error: ").count(), 1, "one error box\n{err}");
    assert!(err.contains("Apply interrupted"), "{err}");
    assert!(
        !err.contains("Every step had started"),
        "most steps had not started\n{err}"
    );
    let created = out.matches("Creation complete").count();
    let finished = err
        .split("Finished before the interrupt: ")
        .nth(1)
        .and_then(|r| r.split(".\n").next())
        .unwrap_or("");
    let never: usize = err
        .split("Never started: ")
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("a count of steps never started\n{err}"));
    let running = err
        .split("Running when interrupted, and how it ended: ")
        .nth(1)
        .and_then(|r| r.split(".\n").next())
        .map(|r| r.matches(" (create ").count())
        .unwrap_or(0);
    let finished_n = finished.matches("sim_thing.").count();
    assert!(finished_n >= 1, "{err}");
    assert!(running <= 4, "at most -parallelism were running\n{err}");
    assert_eq!(
        finished_n + running + never,
        30,
        "every step accounted for once\n{err}"
    );
    assert!(never >= 10, "{err}");
    // The summary counts what was made; the state holds exactly what the cloud holds.
    let objects = std::fs::read_dir(d.join("sim-store/things/local"))
        .unwrap()
        .count();
    assert!(created <= objects, "{out}");
    assert!(
        out.contains(&format!(
            "Apply interrupted. Before the errors above: {objects} added"
        )),
        "{out}\n{err}"
    );
    let listed = ok(d, &["state", "list"], 0);
    assert_eq!(
        listed
            .lines()
            .filter(|l| l.starts_with("sim_thing."))
            .count(),
        objects,
        "{listed}"
    );
    ok(d, &["state", "check"], 0);
    ok(d, &["apply", "-auto-approve", "-lock-timeout=0s"], 0);
    let objects = std::fs::read_dir(d.join("sim-store/things/local"))
        .unwrap()
        .count();
    assert_eq!(objects, 30);
}

/// A pseudo-terminal: (master, slave). A child with the slave as standard input sees a
/// terminal, so Cairn asks its question.
fn pty() -> (std::os::fd::OwnedFd, std::os::fd::OwnedFd) {
    use std::os::fd::FromRawFd;
    let (mut master, mut slave) = (0, 0);
    // SAFETY: openpty(3) writes two new descriptors into the two ints; no other pointers.
    let r = unsafe {
        libc::openpty(
            &mut master,
            &mut slave,
            std::ptr::null_mut(),
            std::ptr::null(),
            std::ptr::null(),
        )
    };
    assert_eq!(r, 0, "openpty");
    // SAFETY: both descriptors are new and owned by nothing else.
    unsafe {
        (
            std::os::fd::OwnedFd::from_raw_fd(master),
            std::os::fd::OwnedFd::from_raw_fd(slave),
        )
    }
}

/// Ctrl-C at the approval prompt cancels at once, as Terraform does: no waiting for a line
/// that never comes, nothing changed, the run recorded as interrupted, the lock released.
#[test]
fn interrupt_at_the_prompt_cancels_at_once() {
    let dir = project(&[("main.tf", SLOW_TF)]);
    let d = dir.path();
    let (master, slave) = pty();
    let mut run = Running::start_with(d, &["apply"], &[], Stdio::from(slave));
    run.wait_for("Enter a value");
    let sent = std::time::Instant::now();
    run.signal(libc::SIGINT);
    while run.child.try_wait().unwrap().is_none() {
        if sent.elapsed() > std::time::Duration::from_secs(20) {
            let _ = run.child.kill();
            panic!("still waiting at the prompt 20 s after Ctrl-C");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let (code, out, err) = run.finish();
    drop(master);
    assert_eq!(code, 1, "{out}\n{err}");
    assert!(err.contains("Apply cancelled"), "{err}");
    let mut seen = 0;
    assert!(changes(&calls(d, &mut seen)).is_empty());
    let history = ok(d, &["history"], 0);
    assert!(history.contains("interrupted"), "{history}");
    ok(d, &["apply", "-auto-approve", "-lock-timeout=0s"], 0);
}

/// Issue 11.7: SIGTERM (what a CI runner sends) does what Ctrl-C does.
#[test]
fn sigterm_stops_an_apply_like_ctrl_c() {
    let dir = project(&[("main.tf", SLOW_TF)]);
    let d = dir.path();
    let (code, out, err, took) = interrupted_apply(d, &[libc::SIGTERM]);
    assert_eq!(code, 1, "{out}\n{err}");
    assert!(took < 2.5, "{took:.1}s\n{out}\n{err}");
    assert!(err.contains("Termination signal received"), "{err}");
    assert!(err.contains("Apply interrupted"), "{err}");
    let log = ok(d, &["log"], 0);
    assert!(log.contains("RunFinished        interrupted"), "{log}");
    converges_after_interrupt(d);
}

/// Issue 11.7: a second Ctrl-C abandons what is still running. Whichever comes first — the
/// steps settling after the first signal, or the second signal — the run exits 1, the state
/// is consistent, operations left without an outcome are pending and the next run resolves
/// them (no object is lost or made twice), and it converges.
#[test]
fn second_interrupt_abandons_in_flight_work_and_the_next_run_resolves_it() {
    let dir = project(&[("main.tf", SLOW_TF)]);
    let d = dir.path();
    let (code, out, err, _) = interrupted_apply(d, &[libc::SIGINT, libc::SIGINT]);
    assert_eq!(code, 1, "{out}\n{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(
        err.contains("Run abandoned") || err.contains("Apply interrupted"),
        "{err}"
    );
    if err.contains("Run abandoned") {
        assert!(
            err.contains("A second interrupt abandoned the steps still running"),
            "{err}"
        );
    }
    converges_after_interrupt(d);
}

/// Issue 11.7, deterministically: a step whose provider cannot be stopped (`local_file`
/// writing into a FIFO nobody reads; `local`'s `stop` has nothing to cancel) keeps the run
/// waiting after the first Ctrl-C; the second abandons it. The operation it had started stays
/// pending in the log, the lock is released, and the next run resolves it and converges.
#[test]
fn second_interrupt_abandons_a_step_that_cannot_stop() {
    let dir = project(&[(
        "main.tf",
        r#"
resource "local_file" "f" {
  filename = "${path.module}/fifo"
  content  = "x"
}
resource "sim_thing" "a" {
  name = "a"
}
"#,
    )]);
    let d = dir.path();
    let fifo = std::ffi::CString::new(d.join("fifo").to_str().unwrap()).unwrap();
    // SAFETY: mkfifo(3) with a NUL-terminated path we own.
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o644) }, 0);
    let mut run = Running::start(d, &[]);
    run.wait_for("local_file.f: Creating...");
    run.wait_for("sim_thing.a: Creation complete");
    run.signal(libc::SIGINT);
    std::thread::sleep(std::time::Duration::from_millis(500));
    assert!(
        run.child.try_wait().unwrap().is_none(),
        "the first interrupt waits for the running step"
    );
    run.signal(libc::SIGINT);
    let (code, out, err) = run.finish();
    assert_eq!(code, 1, "{out}\n{err}");
    assert!(err.contains("Interrupt received"), "{err}");
    assert!(err.contains("Run abandoned"), "{err}");
    assert!(
        err.contains("A second interrupt abandoned the steps still running"),
        "{err}"
    );
    // sim_thing.a is recorded; local_file.f's create is pending.
    let log = ok(d, &["log"], 0);
    assert!(log.contains("OperationSucceeded sim_thing.a"), "{log}");
    assert!(
        log.contains("OperationStarted   create local_file.f"),
        "{log}"
    );
    assert!(!log.contains("OperationFailed    local_file.f"), "{log}");
    ok(d, &["state", "check"], 0);
    // The next run (the lock is free) resolves the pending create and converges.
    std::fs::remove_file(d.join("fifo")).unwrap();
    let (code, out, err) = cairn(d, &["apply", "-auto-approve", "-lock-timeout=0s"], &[]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(err.contains("local_file.f: an interrupted create"), "{err}");
    assert!(out.contains("Apply complete! Resources: 1 added"), "{out}");
    assert_eq!(std::fs::read_to_string(d.join("fifo")).unwrap(), "x");
    ok(d, &["plan", "-detailed-exitcode"], 0);
    ok(d, &["state", "check"], 0);
}

/// A `depends_on` added to an unchanged resource changes nothing in the world, so the plan
/// says so (`-detailed-exitcode` 0), but the next apply records the new dependency without
/// asking (as Terraform rewrites dependencies at every apply): a later destroy deletes the
/// dependent first. Before, the unchanged object kept the dependencies it was created with.
#[test]
fn a_new_dependency_of_an_unchanged_resource_is_recorded() {
    let tf = |extra: &str| {
        format!(
            "resource \"terraform_data\" \"a\" {{\n  input = \"a\"\n}}\n\nresource \"terraform_data\" \"b\" {{\n  input = \"b\"\n{extra}}}\n"
        )
    };
    let dir = project(&[("main.tf", &tf(""))]);
    let d = dir.path();
    ok(d, &["apply", "-auto-approve"], 0);
    std::fs::write(d.join("main.tf"), tf("  depends_on = [terraform_data.a]\n")).unwrap();
    let plan = ok(d, &["plan", "-detailed-exitcode"], 0);
    assert!(plan.contains("No changes"), "{plan}");
    // No question: nothing in the world changes.
    ok(d, &["apply", "-input=false"], 0);
    let log = ok(d, &["log"], 0);
    assert!(
        log.contains("DependenciesUpdated terraform_data.b depends on [terraform_data.a]"),
        "{log}"
    );
    // Recorded once: the next apply has nothing to record.
    ok(d, &["apply", "-input=false"], 0);
    assert_eq!(ok(d, &["log"], 0).matches("DependenciesUpdated").count(), 1);
}
