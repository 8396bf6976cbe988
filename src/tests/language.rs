//! The language against Terraform itself: each directory under `fixtures/golden/language/`
//! is a configuration with a `console.txt` holding expressions and what `terraform console`
//! (1.11), run in that directory, printed for each (`== EXPR` then the output; an error
//! flattened to `Error: summary: detail`). Each expression is piped into `cairn console` in a
//! copy of the directory and must print the same.

use super::check_cli_in;
use std::path::{Path, PathBuf};

/// `cairn console`'s boxed diagnostic flattened as the golden files hold Terraform's:
/// `Error: summary: detail` (the snippet left out, detail lines joined).
fn flatten(out: &str) -> String {
    let lines: Vec<&str> = out
        .lines()
        .map(|l| l.trim_start_matches(['│', '╷', '╵']).trim())
        .collect();
    let Some(start) = lines.iter().position(|l| l.starts_with("Error: ")) else {
        return out.trim_end().to_string();
    };
    let summary = &lines[start]["Error: ".len()..];
    // The detail is the last paragraph of the box.
    let body: Vec<&str> = lines[start + 1..]
        .iter()
        .take_while(|l| !l.starts_with("Error: ") && !l.starts_with("Warning: "))
        .copied()
        .collect();
    let end = body
        .iter()
        .rposition(|l| !l.is_empty())
        .map_or(0, |e| e + 1);
    let begin = body[..end]
        .iter()
        .rposition(|l| l.is_empty())
        .map_or(0, |b| b + 1);
    format!("Error: {summary}: {}", body[begin..end].join(" "))
}

fn copy_dir(from: &Path, to: &Path) {
    for e in std::fs::read_dir(from).unwrap().flatten() {
        let target = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            std::fs::create_dir_all(&target).unwrap();
            copy_dir(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), target).unwrap();
        }
    }
}

#[test]
fn language_matches_terraform_console() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/golden/language");
    let mut cases: Vec<PathBuf> = std::fs::read_dir(&root)
        .expect("fixtures/golden/language")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.join("console.txt").exists())
        .collect();
    cases.sort();
    let mut failures = Vec::new();
    let mut count = 0;
    for case in &cases {
        let dir = tempfile::tempdir().unwrap();
        copy_dir(case, dir.path());
        let golden = std::fs::read_to_string(case.join("console.txt")).unwrap();
        for block in golden.split("\n== ").map(|b| b.trim_start_matches("== ")) {
            let (expr, expected) = block.split_once('\n').unwrap_or((block, ""));
            let (_, out, err) = check_cli_in(dir.path(), &["console"], &format!("{expr}\n"));
            let got = flatten(&format!("{out}{err}"));
            count += 1;
            if got.trim_end() != expected.trim_end() {
                failures.push(format!(
                    "{}: {expr}\n  terraform: {expected}\n  cairn:     {got}",
                    case.file_name().unwrap().to_string_lossy()
                ));
            }
        }
    }
    assert!(count > 0, "no cases");
    assert!(
        failures.is_empty(),
        "{} of {count} differ from terraform console:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// `data "terraform_remote_state"` reads another configuration's outputs, from a state file
/// Terraform 1.11 wrote and from a Cairn state, with the values and types Terraform gives
/// (`fixtures/cli/remote-state/terraform-output.json` is Terraform's `output -json` of the
/// same consumer reading the same file); a missing state and a backend Cairn cannot read are
/// errors that say so.
#[test]
fn terraform_remote_state_reads_tfstate_files_and_cairn_states() {
    let fixture = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/cli/remote-state");
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&fixture, dir.path());
    let producer = dir.path().join("producer");
    let consumer = dir.path().join("consumer");
    let (code, _, err) = check_cli_in(&producer, &["apply", "-auto-approve"], "");
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = check_cli_in(&consumer, &["apply", "-auto-approve"], "");
    assert_eq!(code, 0, "{err}");
    let (code, out, err) = check_cli_in(&consumer, &["output", "-json"], "");
    assert_eq!(code, 0, "{err}");
    let cairn: serde_json::Value = serde_json::from_str(&out).unwrap();
    let terraform: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(fixture.join("terraform-output.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(cairn["from_tfstate"], terraform["from_tfstate"]);
    // Cairn's own state gives the same outputs (no defaults there), unmarked as Terraform's.
    let mut expected = terraform["from_tfstate"].clone();
    expected["value"].as_object_mut().unwrap().remove("d");
    expected["type"][1].as_object_mut().unwrap().remove("d");
    assert_eq!(cairn["from_cairn"], expected);
    assert_eq!(cairn["same"]["value"], serde_json::json!(true));

    std::fs::write(
        consumer.join("more.tf"),
        r#"
data "terraform_remote_state" "missing" {
  backend = "local"
  config  = { path = "../nowhere/terraform.tfstate" }
}
data "terraform_remote_state" "s3" {
  backend = "s3"
  config  = { bucket = "b" }
}
"#,
    )
    .unwrap();
    let (code, _, err) = check_cli_in(&consumer, &["plan"], "");
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("data.terraform_remote_state.missing: Unable to find remote state: No stored state was found for the given workspace in the given backend."),
        "{err}"
    );
    assert!(
        err.contains("Cairn reads the states of the \"local\" backend")
            && err.contains("not \"s3\""),
        "{err}"
    );
}

/// One diagnostic of `validate -json`, comparable across the two tools: severity, summary,
/// detail and where it starts. A cycle is its set of nodes: Terraform names them in its
/// summary ("Cycle: a, b"), Cairn walks the chain with each step's location in its detail
/// (a deliberate difference, in README's table).
fn comparable(d: &serde_json::Value) -> String {
    let summary = d["summary"].as_str().unwrap_or_default();
    let detail = d["detail"].as_str().unwrap_or_default();
    let mut nodes: Vec<String> = if let Some(list) = summary.strip_prefix("Cycle: ") {
        list.split(", ")
            .map(|n| n.trim_end_matches(" (expand)").to_string())
            .collect()
    } else if summary == "Cycle in the configuration" {
        let chain = detail
            .lines()
            .next()
            .and_then(|l| l.strip_prefix("The configuration has a cycle: "))
            .unwrap_or_default()
            .trim_end_matches('.');
        chain.split(" → ").map(str::to_string).collect()
    } else {
        let start = &d["range"]["start"];
        return format!(
            "{} {summary}: {detail} @ {}:{}",
            d["severity"], start["line"], start["column"]
        );
    };
    nodes.sort();
    nodes.dedup();
    format!("{} cycle {}", d["severity"], nodes.join(", "))
}

/// `cairn validate -json` finds what `terraform validate -json` (1.11) found, in each
/// `fixtures/golden/language/*/validate.json`.
#[test]
fn validate_matches_terraform_validate() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/golden/language");
    let mut count = 0;
    for case in std::fs::read_dir(&root)
        .unwrap()
        .flatten()
        .map(|e| e.path())
    {
        let Ok(golden) = std::fs::read_to_string(case.join("validate.json")) else {
            continue;
        };
        count += 1;
        let dir = tempfile::tempdir().unwrap();
        copy_dir(&case, dir.path());
        let (_, out, err) = check_cli_in(dir.path(), &["validate", "-json"], "");
        let cairn: serde_json::Value =
            serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}{err}"));
        let terraform: serde_json::Value = serde_json::from_str(&golden).unwrap();
        let set = |doc: &serde_json::Value| {
            let mut v: Vec<String> = doc["diagnostics"]
                .as_array()
                .unwrap()
                .iter()
                .map(comparable)
                .collect();
            v.sort();
            v
        };
        let name = case.file_name().unwrap().to_string_lossy().into_owned();
        assert_eq!(set(&cairn), set(&terraform), "{name}");
        assert_eq!(cairn["valid"], terraform["valid"], "{name}");
    }
    assert!(count >= 2, "no validate cases");
}

/// Issue 14: `precondition`/`postcondition` in a resource's `lifecycle` and an output's
/// `precondition`, with Terraform 1.11's summaries, lines and messages (recorded from
/// `terraform plan`/`apply` on `fixtures/cli/conditions/main.tf`); a condition unknown at plan
/// is checked at apply, where the instance it guards is not created; a failed postcondition
/// keeps the object it checked in state, as Terraform's does.
#[test]
fn conditions_fail_plans_and_applies_as_terraform_does() {
    let fixture = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/cli/conditions");
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&fixture, dir.path());
    let d = dir.path();
    let expect = |args: &[&str], summary: &str, at: &str, message: &str| {
        let (code, out, err) = check_cli_in(d, args, "");
        assert_eq!(code, 1, "{args:?}\n{out}\n{err}");
        for want in [summary, at, message] {
            assert!(err.contains(want), "{args:?}: no {want:?} in\n{err}");
        }
        err
    };
    // Terraform: `Error: Resource precondition failed`, `on main.tf line 9`, the message.
    expect(
        &["plan", "-var", "n=7"],
        "Error: Resource precondition failed",
        "main.tf:9:",
        "n must be below 5, got 7.",
    );
    expect(
        &["plan", "-var", "n=3"],
        "Error: Module output value precondition failed",
        "main.tf:21:",
        "n must not be three.",
    );
    // Postconditions read `self`: unknown at plan, so the plan passes; apply checks.
    let (code, _, err) = check_cli_in(d, &["plan", "-var", "n=2"], "");
    assert_eq!(code, 0, "{err}");
    expect(
        &["apply", "-auto-approve", "-var", "n=2"],
        "Error: Resource postcondition failed",
        "main.tf:13:",
        "output must be x1, got x2.",
    );
    let (_, listed, _) = check_cli_in(d, &["state", "list"], "");
    assert!(listed.contains("terraform_data.a"), "{listed}");
    // Unknown at plan (it reads a.output), false at apply: b is not created.
    let (code, _, err) = check_cli_in(d, &["destroy", "-auto-approve", "-var", "n=2"], "");
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = check_cli_in(d, &["plan", "-var", "n=4"], "");
    assert_eq!(code, 0, "{err}");
    expect(
        &["apply", "-auto-approve", "-var", "n=4"],
        "Error: Resource precondition failed",
        "main.tf:35:",
        "b needs n other than 4.",
    );
    let (_, listed, _) = check_cli_in(d, &["state", "list"], "");
    assert!(!listed.contains("terraform_data.b"), "{listed}");
    // All true: the apply succeeds, and `self` outside a postcondition is refused.
    let (code, _, err) = check_cli_in(d, &["destroy", "-auto-approve", "-var", "n=4"], "");
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = check_cli_in(d, &["apply", "-auto-approve", "-var", "n=1"], "");
    assert_eq!(code, 0, "{err}");
    std::fs::write(
        d.join("bad.tf"),
        "resource \"terraform_data\" \"c\" {\n  lifecycle {\n    precondition {\n      condition     = self.id != \"\"\n      error_message = \"x\"\n    }\n  }\n}\n",
    )
    .unwrap();
    expect(
        &["validate"],
        "Invalid \"self\" reference",
        "bad.tf:4:",
        "postcondition",
    );
}
