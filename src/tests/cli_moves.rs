//! `moved` and `removed` blocks end to end on the real binary (issue 14): the plan text and
//! JSON Terraform 1.11 prints for them (checked against `terraform` on the same
//! configurations with `terraform_data`), saved plans applied by another process, the events
//! the log records, and what the `sim` provider was asked to do (never a delete or a create
//! for a move or a forget).

use super::{check_golden, project};
use std::path::Path;
use std::process::{Command, Stdio};

/// Runs `cairn ARGS` in `dir`; returns (exit code, stdout, stderr).
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

/// `cairn` that must exit with `code`; returns stdout.
fn ok(dir: &Path, args: &[&str], code: i32) -> String {
    let (c, out, err) = cairn(dir, args);
    assert_eq!(c, code, "cairn {args:?}\n{out}\n{err}");
    out
}

/// The changing calls `sim` logged (`create`, `update`, `delete` with the name), sorted.
fn changing_calls(dir: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(dir.join("sim-store/calls.jsonl")).unwrap_or_default();
    let mut out: Vec<String> = text
        .lines()
        .filter_map(|l| {
            let j: serde_json::Value = serde_json::from_str(l).unwrap();
            let op = j["op"].as_str().unwrap();
            matches!(op, "create" | "update" | "delete")
                .then(|| format!("{op} {}", j["name"].as_str().unwrap()))
        })
        .collect();
    out.sort();
    out
}

/// The plan text without refresh lines (their order depends on timing).
fn without_refresh(out: &str) -> String {
    out.lines()
        .filter(|l| !l.contains("Refreshing state..."))
        .map(|l| format!("{l}\n"))
        .collect()
}

/// Forgets what `sim` logged so far.
fn clear_calls(dir: &Path) {
    let _ = std::fs::remove_file(dir.join("sim-store/calls.jsonl"));
}

fn write(dir: &Path, files: &[(&str, &str)]) {
    for (path, content) in files {
        let p = dir.join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, content).unwrap();
    }
}

/// The event lines of `cairn log` about moved or forgotten objects.
fn move_events(dir: &Path) -> Vec<String> {
    ok(dir, &["log"], 0)
        .lines()
        .filter(|l| l.contains("ResourceMoved") || l.contains("ResourceForgotten"))
        .map(|l| {
            let at = l.find("Resource").unwrap();
            l[at..].split_whitespace().collect::<Vec<_>>().join(" ")
        })
        .collect()
}

const CHILD_TF: &str = r#"
resource "sim_thing" "x" {
  name = "x"
}
"#;

const BEFORE_TF: &str = r#"
resource "sim_thing" "a" {
  name = "a"
}
resource "sim_thing" "c" {
  count = 2
  name  = "c${count.index}"
}
resource "sim_thing" "n" {
  name = "n"
}
module "old" {
  source = "./child"
}
"#;

/// A rename, instances from `count` to `for_each`, `count` added (Terraform's implied move)
/// and a module call renamed; every object keeps its id.
const MOVED_TF: &str = r#"
resource "sim_thing" "b" {
  name = "a"
}
moved {
  from = sim_thing.a
  to   = sim_thing.b
}

resource "sim_thing" "d" {
  for_each = toset(["p", "q"])
  name     = each.key == "p" ? "c0" : "c1"
}
moved {
  from = sim_thing.c[0]
  to   = sim_thing.d["p"]
}
moved {
  from = sim_thing.c[1]
  to   = sim_thing.d["q"]
}

resource "sim_thing" "n" {
  count = 1
  name  = "n"
}

module "new" {
  source = "./child"
}
moved {
  from = module.old
  to   = module.new
}
"#;

/// A chain (`a → b → e`), with a change of the moved object.
const CHAINED_TF: &str = r#"
resource "sim_thing" "e" {
  name  = "a"
  value = "v2"
}
moved {
  from = sim_thing.a
  to   = sim_thing.b
}
moved {
  from = sim_thing.b
  to   = sim_thing.e
}

resource "sim_thing" "d" {
  for_each = toset(["p", "q"])
  name     = each.key == "p" ? "c0" : "c1"
}

resource "sim_thing" "n" {
  count = 1
  name  = "n"
}

module "new" {
  source = "./child"
}
"#;

#[test]
fn moved_blocks_move_without_delete_or_create() {
    let dir = project(&[("main.tf", BEFORE_TF), ("child/main.tf", CHILD_TF)]);
    let d = dir.path();
    ok(d, &["apply", "-auto-approve"], 0);
    let ids_before = ok(d, &["state", "list"], 0);
    assert!(
        ids_before.contains("module.old.sim_thing.x"),
        "{ids_before}"
    );
    clear_calls(d);

    // A moves-only plan: changes to show, none to count; `-detailed-exitcode` says 2.
    write(d, &[("main.tf", MOVED_TF)]);
    let plan = ok(d, &["plan", "-out=moves.plan", "-detailed-exitcode"], 2);
    check_golden("moved_plan.txt", &without_refresh(&plan));
    let json: serde_json::Value =
        serde_json::from_str(&ok(d, &["show", "-json", "moves.plan"], 0)).unwrap();
    let moved: Vec<String> = json["resource_changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            format!(
                "{} <- {} {}",
                c["address"].as_str().unwrap(),
                c["previous_address"].as_str().unwrap_or("-"),
                c["change"]["actions"]
            )
        })
        .collect();
    assert_eq!(
        moved,
        [
            "sim_thing.b <- sim_thing.a [\"no-op\"]",
            "sim_thing.d[\"p\"] <- sim_thing.c[0] [\"no-op\"]",
            "sim_thing.d[\"q\"] <- sim_thing.c[1] [\"no-op\"]",
            "sim_thing.n[0] <- sim_thing.n [\"no-op\"]",
            "module.new.sim_thing.x <- module.old.sim_thing.x [\"no-op\"]",
        ]
    );
    assert_eq!(json["applyable"], true);

    // The saved plan, applied by another process: the moves are recorded, nothing is
    // created or deleted.
    let applied = ok(d, &["apply", "moves.plan"], 0);
    assert!(
        applied.contains("Apply complete! Resources: 0 added, 0 changed, 0 destroyed."),
        "{applied}"
    );
    assert_eq!(changing_calls(d), Vec::<String>::new());
    assert_eq!(
        move_events(d),
        [
            "ResourceMoved sim_thing.a -> sim_thing.b",
            "ResourceMoved sim_thing.c[0] -> sim_thing.d[\"p\"]",
            "ResourceMoved sim_thing.c[1] -> sim_thing.d[\"q\"]",
            "ResourceMoved module.old.sim_thing.x -> module.new.sim_thing.x",
            "ResourceMoved sim_thing.n -> sim_thing.n[0]",
        ]
    );
    let list = ok(d, &["state", "list"], 0);
    check_golden("moved_state_list.txt", &list);
    // Done: the moved blocks stay in the configuration and move nothing more.
    let again = ok(d, &["plan", "-detailed-exitcode"], 0);
    assert!(again.contains("No changes."), "{again}");

    // A chain, and a change of the moved object: updated in place where it ends.
    write(d, &[("main.tf", CHAINED_TF)]);
    let plan = ok(d, &["plan"], 0);
    assert!(!plan.contains("has moved"), "{plan}");
    // The state has `b` now: `b → e` moves it (a chain from `a` would too).
    check_golden("moved_chain_plan.txt", &without_refresh(&plan));
    ok(d, &["apply", "-auto-approve"], 0);
    assert_eq!(changing_calls(d), ["update a"]);
    assert_eq!(
        move_events(d).last().map(String::as_str),
        Some("ResourceMoved sim_thing.b -> sim_thing.e")
    );
    // `history` counts the moves of each run.
    let history = ok(d, &["history"], 0);
    // The plans are listed too (`-` for a run number), with the moves they proposed.
    assert!(
        history.lines().any(|l| l.starts_with("- ")
            && l.contains("plan -out=moves.plan")
            && l.contains("5 to move")),
        "{history}"
    );
    let changes: Vec<&str> = history
        .lines()
        .skip(1)
        .filter(|l| !l.starts_with("- "))
        // The column before the last (where the run ran).
        .map(|l| {
            l.split("  ")
                .filter(|c| !c.is_empty())
                .collect::<Vec<_>>()
                .iter()
                .rev()
                .nth(1)
                .unwrap()
                .trim()
        })
        .collect();
    assert_eq!(
        changes,
        [
            "5 added, 0 changed, 0 destroyed",
            "0 added, 0 changed, 0 destroyed, 5 moved",
            "0 added, 1 changed, 0 destroyed, 1 moved"
        ],
        "{history}"
    );
}

#[test]
fn a_chain_resolves_in_dependency_order() {
    let dir = project(&[(
        "main.tf",
        "resource \"sim_thing\" \"a\" {\n  name = \"a\"\n}\n",
    )]);
    let d = dir.path();
    ok(d, &["apply", "-auto-approve"], 0);
    // Written in the "wrong" order: `b → c` before `a → b`.
    write(
        d,
        &[(
            "main.tf",
            r#"
resource "sim_thing" "c" {
  name = "a"
}
moved {
  from = sim_thing.b
  to   = sim_thing.c
}
moved {
  from = sim_thing.a
  to   = sim_thing.b
}
"#,
        )],
    );
    let plan = ok(d, &["plan", "-detailed-exitcode"], 2);
    assert!(
        plan.contains("# sim_thing.a has moved to sim_thing.c"),
        "{plan}"
    );
    ok(d, &["apply", "-auto-approve"], 0);
    assert_eq!(
        move_events(d),
        [
            "ResourceMoved sim_thing.a -> sim_thing.b",
            "ResourceMoved sim_thing.b -> sim_thing.c"
        ]
    );
    assert_eq!(
        ok(d, &["state", "list"], 0),
        "provider[\"sim\"]\nsim_thing.c\n"
    );
}

#[test]
fn removed_blocks_forget_or_destroy() {
    let dir = project(&[
        (
            "main.tf",
            r#"
resource "sim_thing" "a" {
  name = "a"
}
resource "sim_thing" "b" {
  name = "b"
}
module "m" {
  source = "./child"
}
"#,
        ),
        ("child/main.tf", CHILD_TF),
    ]);
    let d = dir.path();
    ok(d, &["apply", "-auto-approve"], 0);
    clear_calls(d);
    write(
        d,
        &[(
            "main.tf",
            r#"
removed {
  from = sim_thing.a
  lifecycle {
    destroy = false
  }
}
removed {
  from = sim_thing.b
}
removed {
  from = module.m
  lifecycle {
    destroy = false
  }
}
"#,
        )],
    );
    let plan = ok(d, &["plan", "-out=rm.plan", "-detailed-exitcode"], 2);
    check_golden("removed_plan.txt", &without_refresh(&plan));
    let json: serde_json::Value =
        serde_json::from_str(&ok(d, &["show", "-json", "rm.plan"], 0)).unwrap();
    let actions: Vec<String> = json["resource_changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            format!(
                "{} {} {}",
                c["address"].as_str().unwrap(),
                c["change"]["actions"],
                c["action_reason"].as_str().unwrap_or("-")
            )
        })
        .collect();
    assert_eq!(
        actions,
        [
            "sim_thing.a [\"forget\"] delete_because_no_resource_config",
            "sim_thing.b [\"delete\"] delete_because_no_resource_config",
            "module.m.sim_thing.x [\"forget\"] delete_because_no_resource_config",
        ]
    );
    let applied = ok(d, &["apply", "rm.plan"], 0);
    assert!(
        applied.contains("Apply complete! Resources: 0 added, 0 changed, 1 destroyed."),
        "{applied}"
    );
    // Only `b` was deleted; the forgotten objects are still in the world.
    assert_eq!(changing_calls(d), ["delete b"]);
    assert_eq!(
        move_events(d),
        [
            "ResourceForgotten sim_thing.a",
            "ResourceForgotten module.m.sim_thing.x"
        ]
    );
    assert_eq!(ok(d, &["state", "list"], 0), "");
    let history = ok(d, &["history"], 0);
    assert!(
        history.contains("0 added, 0 changed, 1 destroyed, 2 forgotten"),
        "{history}"
    );
    let again = ok(d, &["plan", "-detailed-exitcode"], 0);
    assert!(again.contains("No changes."), "{again}");
}

/// Terraform's errors and warnings for `moved` and `removed` blocks that cannot be applied,
/// one configuration after another on the same state.
#[test]
fn moved_and_removed_errors() {
    let dir = project(&[(
        "main.tf",
        "resource \"sim_thing\" \"a\" {\n  name = \"a\"\n}\nresource \"sim_thing\" \"c\" {\n  name = \"c\"\n}\n",
    )]);
    let d = dir.path();
    ok(d, &["apply", "-auto-approve"], 0);
    let cases: &[(&str, &str)] = &[
        (
            "the source is still declared",
            r#"resource "sim_thing" "a" { name = "a" }
resource "sim_thing" "c" { name = "c" }
moved {
  from = sim_thing.a
  to   = sim_thing.b
}
"#,
        ),
        (
            "an instance source is still declared (count)",
            r#"resource "sim_thing" "a" {
  count = 1
  name  = "a"
}
resource "sim_thing" "c" {
  name = "c"
}
resource "sim_thing" "b" {
  name = "b"
}
moved {
  from = sim_thing.a[0]
  to   = sim_thing.b
}
"#,
        ),
        (
            "ambiguous statements",
            r#"resource "sim_thing" "b" { name = "b" }
resource "sim_thing" "c" { name = "c" }
moved {
  from = sim_thing.a
  to   = sim_thing.b
}
moved {
  from = sim_thing.a
  to   = sim_thing.d
}
moved {
  from = sim_thing.x
  to   = sim_thing.b
}
"#,
        ),
        (
            "a cycle",
            r#"resource "sim_thing" "c" { name = "c" }
moved {
  from = sim_thing.a
  to   = sim_thing.b
}
moved {
  from = sim_thing.b
  to   = sim_thing.a
}
"#,
        ),
        (
            "a move across resource types",
            r#"resource "sim_thing" "c" { name = "c" }
resource "terraform_data" "b" {}
moved {
  from = sim_thing.a
  to   = terraform_data.b
}
"#,
        ),
        (
            "a redundant statement",
            r#"resource "sim_thing" "c" { name = "c" }
moved {
  from = sim_thing.a
  to   = sim_thing.a
}
"#,
        ),
        (
            "the removed resource is still declared",
            r#"resource "sim_thing" "a" { name = "a" }
resource "sim_thing" "c" { name = "c" }
removed {
  from = sim_thing.c
}
"#,
        ),
        (
            "a destination already in the state: a warning, and the source is destroyed",
            r#"resource "sim_thing" "c" {
  name = "c"
}
moved {
  from = sim_thing.a
  to   = sim_thing.c
}
"#,
        ),
        (
            "a source not in the state is ignored",
            r#"resource "sim_thing" "a" {
  name = "a"
}
resource "sim_thing" "c" {
  name = "c"
}
moved {
  from = sim_thing.never
  to   = sim_thing.c
}
"#,
        ),
    ];
    let mut transcript = String::new();
    for (what, config) in cases {
        write(d, &[("main.tf", config)]);
        let (code, out, err) = cairn(d, &["plan", "-detailed-exitcode"]);
        let out = without_refresh(&out);
        transcript.push_str(&format!(
            "## {what}\n[exit {code}]\n{out}{}\n",
            if err.is_empty() {
                String::new()
            } else {
                format!("[stderr]\n{err}")
            }
        ));
    }
    check_golden("moved_errors.txt", &transcript);
    // Nothing of this changed the state.
    assert_eq!(move_events(d), Vec::<String>::new());
}

/// `cairn state mv` and `moved` blocks share one rule: a module call moved to another keeps
/// each instance's key.
#[test]
fn module_instances_move_with_their_keys() {
    let dir = project(&[
        (
            "main.tf",
            "module \"a\" {\n  source = \"./child\"\n  count  = 2\n}\n",
        ),
        ("child/main.tf", CHILD_TF),
    ]);
    let d = dir.path();
    ok(d, &["apply", "-auto-approve"], 0);
    write(
        d,
        &[(
            "main.tf",
            "module \"b\" {\n  source = \"./child\"\n  count  = 2\n}\nmoved {\n  from = module.a\n  to   = module.b\n}\n",
        )],
    );
    let plan = ok(d, &["plan", "-detailed-exitcode"], 2);
    assert!(
        plan.contains("# module.a[1].sim_thing.x has moved to module.b[1].sim_thing.x"),
        "{plan}"
    );
    // The machine-readable UI says "move", with the previous resource, as Terraform's does.
    let json = ok(d, &["plan", "-json"], 0);
    let moved: Vec<serde_json::Value> = json
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|j| j["type"] == "planned_change")
        .collect();
    assert_eq!(moved.len(), 2, "{json}");
    assert_eq!(
        moved[0]["@message"],
        "module.b[0].sim_thing.x: Plan to move"
    );
    assert_eq!(moved[0]["change"]["action"], "move");
    assert_eq!(
        moved[0]["change"]["previous_resource"]["addr"],
        "module.a[0].sim_thing.x"
    );
    ok(d, &["apply", "-auto-approve"], 0);
    clear_calls(d);
    // Back with `state mv`: the same rule.
    let out = ok(d, &["state", "mv", "module.b", "module.a"], 0);
    assert!(
        out.contains("Move \"module.b[0].sim_thing.x\" to \"module.a[0].sim_thing.x\""),
        "{out}"
    );
    assert_eq!(changing_calls(d), Vec::<String>::new());
}

/// A read-only plan moves (and its apply records the moves), as Terraform's `-refresh-only`
/// does; `destroy` moves, then destroys the objects where they end up, forgotten ones too.
#[test]
fn read_only_and_destroy_plans_move_too() {
    let dir = project(&[(
        "main.tf",
        "resource \"sim_thing\" \"a\" {\n  name = \"a\"\n}\nresource \"sim_thing\" \"k\" {\n  name = \"k\"\n}\n",
    )]);
    let d = dir.path();
    ok(d, &["apply", "-auto-approve"], 0);
    write(
        d,
        &[(
            "main.tf",
            r#"
resource "sim_thing" "b" {
  name = "a"
}
moved {
  from = sim_thing.a
  to   = sim_thing.b
}
removed {
  from = sim_thing.k
  lifecycle {
    destroy = false
  }
}
"#,
        )],
    );
    let plan = ok(d, &["plan", "-read-only", "-detailed-exitcode"], 2);
    check_golden("moved_read_only_plan.txt", &without_refresh(&plan));
    ok(d, &["apply", "-read-only", "-auto-approve"], 0);
    assert_eq!(move_events(d), ["ResourceMoved sim_thing.a -> sim_thing.b"]);
    // Forgetting is for normal plans: `k` is still in the state.
    let list = ok(d, &["state", "list"], 0);
    assert_eq!(list, "provider[\"sim\"]\nsim_thing.b\nsim_thing.k\n");

    // Back to `a`, then destroy: the move is made, and both objects are destroyed.
    write(
        d,
        &[(
            "main.tf",
            r#"
resource "sim_thing" "c" {
  name = "a"
}
moved {
  from = sim_thing.b
  to   = sim_thing.c
}
removed {
  from = sim_thing.k
  lifecycle {
    destroy = false
  }
}
"#,
        )],
    );
    clear_calls(d);
    let plan = ok(d, &["plan", "-destroy"], 0);
    assert!(plan.contains("# sim_thing.c will be destroyed"), "{plan}");
    assert!(plan.contains("# sim_thing.k will be destroyed"), "{plan}");
    assert!(
        !plan.contains("has moved") && !plan.contains("moved from"),
        "{plan}"
    );
    ok(d, &["destroy", "-auto-approve"], 0);
    assert_eq!(changing_calls(d), ["delete a", "delete k"]);
    assert_eq!(
        move_events(d).last().map(String::as_str),
        Some("ResourceMoved sim_thing.b -> sim_thing.c")
    );
}
