//! Issue 27's state commands end to end on the real binary: `taint`/`untaint`, `state rm
//! -dry-run`, `state mv -dry-run`, `-lock=false`, against what Terraform 1.11 printed for the
//! same steps on the same configuration (`fixtures/golden/state_cmds/terraform*.txt`, made by
//! its `make-goldens.sh` with the oracle); OpenTofu's `-exclude` and `-compact-warnings`
//! against Cairn's own goldens (Terraform has no `-exclude`).

use super::{check_cli_in, check_golden};
use std::path::{Path, PathBuf};

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/golden/state_cmds")
}

/// A directory holding the fixture's configuration, applied once.
fn applied() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(fixtures().join("main.tf"), dir.path().join("main.tf")).unwrap();
    let (code, out, err) = check_cli_in(dir.path(), &["apply", "-auto-approve"], "");
    assert_eq!(code, 0, "{out}\n{err}");
    dir
}

/// One step of a transcript: the words typed after the program's name, the exit code, and
/// what was printed (stdout then stderr).
#[derive(Debug)]
struct Step {
    line: String,
    code: i32,
    text: String,
}

/// Reads a transcript `make-goldens.sh` wrote.
fn transcript(path: &Path) -> Vec<Step> {
    let text = std::fs::read_to_string(path).unwrap();
    let mut steps: Vec<Step> = Vec::new();
    for line in text.lines() {
        if let Some(cmd) = line.strip_prefix("$ terraform ") {
            steps.push(Step {
                line: cmd.to_string(),
                code: 0,
                text: String::new(),
            });
        } else if let Some(code) = line.strip_prefix("exit ") {
            steps.last_mut().unwrap().code = code.parse().unwrap();
        } else if line != "--- stdout" && line != "--- stderr" {
            let s = steps.last_mut().unwrap();
            s.text.push_str(line);
            s.text.push('\n');
        }
    }
    steps
}

/// What both tools must agree on: the words, with Terraform's name for itself as Cairn's,
/// without the boxes, line wrapping and the oracle's dev-overrides warning; for a plan, its
/// `#` lines (refresh order varies).
fn normalized(line: &str, text: &str) -> String {
    if line.starts_with("plan") {
        return text
            .lines()
            .filter(|l| l.starts_with("  # ") || l.starts_with("Plan:"))
            .map(|l| format!("{l}\n"))
            .collect();
    }
    let text = match text.find("Warning: Provider development overrides") {
        Some(_) => text
            .split("releases.\n")
            .last()
            .unwrap_or_default()
            .to_string(),
        None => text.to_string(),
    };
    text.replace("terraform", "cairn")
        .replace("Terraform", "Cairn")
        .replace(['│', '╷', '╵'], " ")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

fn run_steps(dir: &Path, steps: &[Step]) {
    for step in steps {
        let args: Vec<&str> = step.line.split(' ').collect();
        let (code, out, err) = check_cli_in(dir, &args, "");
        let ours = format!("{out}{err}");
        assert_eq!(code, step.code, "cairn {}\n{ours}", step.line);
        assert_eq!(
            normalized(&step.line, &ours),
            normalized(&step.line, &step.text),
            "cairn {}:\n{ours}\nTerraform:\n{}",
            step.line,
            step.text
        );
    }
}

/// Every step of `steps.txt` prints what Terraform printed and exits as it did.
#[test]
fn taint_untaint_and_dry_runs_as_terraform() {
    let dir = applied();
    run_steps(dir.path(), &transcript(&fixtures().join("terraform.txt")));
    // Each taint and untaint is a run in the log: who tainted what.
    let (_, log, _) = check_cli_in(dir.path(), &["log"], "");
    let events: Vec<String> = log
        .lines()
        .filter(|l| l.contains("Tainted") || l.contains("Untainted"))
        .map(|l| l.split_whitespace().skip(4).collect::<Vec<_>>().join(" "))
        .collect();
    assert_eq!(
        events,
        [
            "ResourceTainted sim_thing.a",
            "ResourceTainted sim_thing.a",
            "ResourceTainted sim_thing.c[1]",
            "ResourceUntainted sim_thing.a",
        ]
    );
    let (_, history, _) = check_cli_in(dir.path(), &["history"], "");
    let commands: Vec<&str> = history
        .lines()
        .skip(2)
        .map(|l| l.split_whitespace().nth(4).unwrap_or_default())
        .collect();
    // apply, then taint ×2, taint zz (refused: a failed run), taint c[1], untaint b (refused),
    // untaint a, untaint zz (refused); -allow-missing, dry runs and data refusals record none.
    assert_eq!(
        commands,
        ["taint", "taint", "taint", "taint", "untaint", "untaint", "untaint"],
        "{history}"
    );
    // The dry runs changed nothing.
    let (_, list, _) = check_cli_in(dir.path(), &["state", "list"], "");
    assert!(list.contains("sim_thing.a\n") && list.contains("sim_thing.b\n"));
}

#[test]
fn taint_on_an_empty_state_as_terraform() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(fixtures().join("main.tf"), dir.path().join("main.tf")).unwrap();
    run_steps(
        dir.path(),
        &transcript(&fixtures().join("terraform-empty.txt")),
    );
    // Nothing was recorded: no state was started.
    let (_, history, _) = check_cli_in(dir.path(), &["history"], "");
    assert!(!history.contains("taint"), "{history}");
}

/// A tainted object is replaced by the next apply, and is no longer tainted after it.
#[test]
fn a_tainted_object_is_replaced_by_apply() {
    let dir = applied();
    let (code, _, err) = check_cli_in(dir.path(), &["taint", "sim_thing.c[0]"], "");
    assert_eq!(code, 0, "{err}");
    let (code, out, err) = check_cli_in(dir.path(), &["apply", "-auto-approve"], "");
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("# sim_thing.c[0] is tainted, so must be replaced"),
        "{out}"
    );
    assert!(out.contains("1 added, 0 changed, 1 destroyed"), "{out}");
    let (code, out, _) = check_cli_in(dir.path(), &["plan", "-detailed-exitcode"], "");
    assert_eq!(code, 0, "{out}");
}

/// `-exclude` leaves out the named object and what depends on it, with OpenTofu's warnings;
/// it is refused beside `-target`, as OpenTofu refuses it.
#[test]
fn exclude_leaves_out_what_depends_on_the_excluded() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(fixtures().join("main.tf"), dir.path().join("main.tf")).unwrap();
    let (code, out, err) = check_cli_in(
        dir.path(),
        &["apply", "-auto-approve", "-exclude=sim_thing.a"],
        "",
    );
    assert_eq!(code, 0, "{out}\n{err}");
    let (_, list, _) = check_cli_in(dir.path(), &["state", "list"], "");
    let mut got = format!("$ cairn apply -auto-approve -exclude=sim_thing.a\n{out}{err}");
    got.push_str(&format!("$ cairn state list\n{list}"));
    // Excluding one instance keeps its siblings and leaves out what depends on the resource.
    let (code, out, err) = check_cli_in(
        dir.path(),
        &[
            "destroy",
            "-auto-approve",
            "-exclude=sim_thing.c[1]",
            "-compact-warnings",
        ],
        "",
    );
    assert_eq!(code, 0, "{out}\n{err}");
    got.push_str(&format!(
        "$ cairn destroy -auto-approve -exclude=sim_thing.c[1] -compact-warnings\n{out}{err}"
    ));
    let (_, list, _) = check_cli_in(dir.path(), &["state", "list"], "");
    got.push_str(&format!("$ cairn state list\n{list}"));
    let (code, out, err) = check_cli_in(
        dir.path(),
        &["plan", "-exclude=sim_thing.a", "-target=sim_thing.b"],
        "",
    );
    assert_eq!(code, 1);
    got.push_str(&format!(
        "$ cairn plan -exclude=sim_thing.a -target=sim_thing.b\n{out}{err}"
    ));
    let got: String = got
        .lines()
        .filter(|l| !l.contains("Refreshing state...") && !l.contains("Still "))
        .map(|l| format!("{l}\n"))
        .collect();
    check_golden("../state_cmds/exclude.txt", &got);
}
