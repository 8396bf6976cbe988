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
data "terraform_remote_state" "gcs" {
  backend = "gcs"
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
            && err.contains("\"pg\" and \"s3\" backends, not \"gcs\""),
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

/// `check` blocks warn as Terraform 1.11 does, on the same configuration
/// (`fixtures/cli/checks`, with Terraform's own `plan`, `apply` and `validate` output beside
/// it): a false assertion is a warning with its message, one unknown at plan is "known after
/// apply", a scoped data source that cannot be read is a warning and is read again during
/// apply, nothing outside the check may refer to it, and the run succeeds.
#[test]
fn check_blocks_warn_as_terraform_does() {
    let fixture = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/cli/checks");
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&fixture, dir.path());
    let d = dir.path();
    let terraform = |name: &str| std::fs::read_to_string(fixture.join(name)).unwrap();
    // (Cairn's text, Terraform's text) for each thing both must say.
    let both = |cairn: &str, tf: &str, wants: &[(&str, &str)]| {
        for (c, t) in wants {
            assert!(cairn.contains(c), "Cairn lacks {c:?}:\n{cairn}");
            assert!(tf.contains(t), "Terraform's output lacks {t:?}");
        }
    };
    let (code, out, err) = check_cli_in(d, &["plan"], "");
    assert_eq!(code, 0, "{err}");
    let plan = terraform("terraform-plan.txt");
    both(
        &format!("{out}{err}"),
        &plan,
        &[
            (
                "# data.terraform_remote_state.x will be read during apply\n  # (config will be reloaded to verify a check block)",
                "# data.terraform_remote_state.x will be read during apply\n  # (config will be reloaded to verify a check block)",
            ),
            ("Warning: Check block assertion failed", "Warning: Check block assertion failed"),
            ("main.tf:9:", "on main.tf line 9, in check \"small\""),
            ("n is 3, too big", "n is 3, too big"),
            ("Warning: Check block assertion known after apply", "Warning: Check block assertion known after apply"),
            ("main.tf:15:", "on main.tf line 15, in check \"later\""),
            ("The condition could not be evaluated at this time, a result will be known when this plan is applied.", "The condition could not be evaluated at this time, a result will be known\nwhen this plan is applied."),
            ("main.tf:20:", "on main.tf line 20, in check \"remote\""),
            ("No stored state was found for the given workspace in the given backend.", "No stored state was found for the given workspace in the given backend."),
        ],
    );
    let (code, out, err) = check_cli_in(d, &["apply", "-auto-approve"], "");
    assert_eq!(code, 0, "{err}");
    let apply = terraform("terraform-apply.txt");
    let cairn = format!("{out}{err}");
    both(
        &cairn,
        &apply,
        &[
            ("n is 3, too big", "n is 3, too big"),
            ("output is not 5", "output is not 5"),
            ("main.tf:20:", "on main.tf line 20, in check \"remote\""),
            (
                "Apply complete! Resources: 1 added, 0 changed, 0 destroyed.",
                "Apply complete! Resources: 1 added, 0 changed, 0 destroyed.",
            ),
        ],
    );
    // The apply reports its own findings only: nothing is "known after apply" any more.
    assert!(!cairn.contains("known after apply\n"), "{cairn}");
    assert!(!apply.contains("Check block assertion known after apply"));
    assert_eq!(cairn.matches("n is 3, too big").count(), 1, "{cairn}");
    assert_eq!(apply.matches("n is 3, too big").count(), 1);

    // Only the check may refer to its data source.
    std::fs::write(
        d.join("bad.tf"),
        "output \"x\" { value = data.terraform_remote_state.x.outputs }\n",
    )
    .unwrap();
    let validate = terraform("terraform-validate-scoped.txt");
    for args in [&["validate"][..], &["plan"]] {
        let (code, _, err) = check_cli_in(d, args, "");
        assert_eq!(code, 1, "{args:?}: {err}");
        both(
            &err,
            &validate,
            &[
                ("Error: Reference to scoped resource", "Error: Reference to scoped resource"),
                ("bad.tf:1:22", "on bad.tf line 1, in output \"x\""),
                ("The referenced data resource \"terraform_remote_state\" \"x\" is not available from this context.", "The referenced data resource \"terraform_remote_state\" \"x\" is not available\nfrom this context."),
            ],
        );
    }
}

/// `provisioner "local-exec"` runs as Terraform 1.11 runs it on the same configuration
/// (`fixtures/cli/provisioners`, Terraform's own output beside it): after a create with
/// `self`, `environment` and both output streams; `when = destroy` before the delete of a
/// `triggers_replace` replacement; `on_failure = continue`; a failure keeps the object
/// tainted; the `-json` stream has Terraform's `provision_*` messages; destroy-time
/// provisioners may refer to `self` only; other provisioner types are refused.
#[test]
fn local_exec_provisioners_run_as_terraform_runs_them() {
    let fixture = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/cli/provisioners");
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&fixture, dir.path());
    let d = dir.path();
    let terraform = |name: &str| std::fs::read_to_string(fixture.join(name)).unwrap();
    // Every line both tools print about provisioners, in the order each prints them.
    let lines = |text: &str| -> Vec<String> {
        text.lines()
            .filter(|l| l.contains("local-exec") || l.contains("Destruction complete"))
            .map(str::to_string)
            .collect()
    };
    let same_lines = |cairn: &str, tf: &str, of: &str| {
        let mine: Vec<String> = lines(cairn)
            .into_iter()
            .filter(|l| l.starts_with(of))
            .collect();
        let theirs: Vec<String> = lines(tf)
            .into_iter()
            .filter(|l| l.starts_with(of))
            .collect();
        assert_eq!(mine, theirs, "{of}:\n{cairn}");
    };
    let (code, out, err) = check_cli_in(d, &["apply", "-auto-approve", "-parallelism=1"], "");
    assert_eq!(code, 0, "{err}");
    let tf = terraform("terraform-apply.txt");
    same_lines(&out, &tf, "terraform_data.a");
    same_lines(&out, &tf, "terraform_data.b");
    assert!(out.contains("Apply complete! Resources: 2 added"), "{out}");

    let (code, out, err) = check_cli_in(d, &["apply", "-auto-approve", "-var", "v=2"], "");
    assert_eq!(code, 0, "{err}");
    same_lines(
        &out,
        &terraform("terraform-replace.txt"),
        "terraform_data.a",
    );

    // A failing command: an error naming the command, its exit status and output; the
    // object stays, tainted, and the next plan replaces it.
    std::fs::write(
        d.join("fail.tf"),
        "resource \"terraform_data\" \"c\" {\n  provisioner \"local-exec\" {\n    command = \"echo failing; exit 7\"\n  }\n}\n",
    )
    .unwrap();
    let (code, out, err) = check_cli_in(d, &["apply", "-auto-approve", "-var", "v=2"], "");
    assert_eq!(code, 1, "{out}");
    let tf = terraform("terraform-fail.txt");
    for want in [
        "Error: local-exec provisioner error",
        "Error running command 'echo failing; exit 7': exit status 7. Output: failing",
    ] {
        assert!(err.contains(want), "{err}");
        assert!(tf.contains(want), "Terraform: {want}");
    }
    assert!(err.contains("fail.tf:2:3"), "{err}");
    same_lines(&out, &tf, "terraform_data.c");
    let (_, out, _) = check_cli_in(d, &["plan", "-var", "v=2"], "");
    let tainted = terraform("terraform-tainted.txt");
    assert!(tainted.contains("# terraform_data.c is tainted, so must be replaced"));
    assert!(
        out.contains("# terraform_data.c is tainted, so must be replaced"),
        "{out}"
    );
    std::fs::remove_file(d.join("fail.tf")).unwrap();

    // The machine-readable stream.
    let (code, out, err) = check_cli_in(d, &["apply", "-auto-approve", "-json", "-var", "v=3"], "");
    assert_eq!(code, 0, "{err}");
    let types: Vec<String> = out
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|j| j["hook"]["provisioner"] == "local-exec")
        .map(|j| {
            format!(
                "{} {}",
                j["type"].as_str().unwrap(),
                j["@message"].as_str().unwrap()
            )
        })
        .collect();
    assert!(
        types.contains(
            &"provision_start terraform_data.a: Provisioning with 'local-exec'...".to_string()
        ),
        "{types:#?}"
    );
    assert!(
        types.contains(
            &"provision_progress terraform_data.a: (local-exec): destroying hello".to_string()
        ),
        "{types:#?}"
    );
    assert!(
        types.contains(
            &"provision_complete terraform_data.a: (local-exec) Provisioning complete".to_string()
        ),
        "{types:#?}"
    );

    // Destroy-time provisioners see only their object.
    std::fs::write(
        d.join("bad.tf"),
        "resource \"terraform_data\" \"d\" {\n  provisioner \"local-exec\" {\n    when    = destroy\n    command = \"echo ${terraform_data.a.id}\"\n  }\n}\n",
    )
    .unwrap();
    let tf = terraform("terraform-validate-destroy-ref.txt");
    for args in [&["validate"][..], &["plan"]] {
        let (code, _, err) = check_cli_in(d, args, "");
        assert_eq!(code, 1, "{args:?}: {err}");
        assert!(
            err.contains("Error: Invalid reference from destroy provisioner"),
            "{err}"
        );
        assert!(err.contains("bad.tf:4:"), "{err}");
        assert!(tf.contains("Error: Invalid reference from destroy provisioner"));
    }
    // A provisioner that needs a connection to the object is refused, where it is written.
    std::fs::write(
        d.join("bad.tf"),
        "resource \"terraform_data\" \"d\" {\n  provisioner \"remote-exec\" {\n    inline = [\"true\"]\n  }\n}\n",
    )
    .unwrap();
    let (code, _, err) = check_cli_in(d, &["plan"], "");
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("bad.tf:2:3"), "{err}");
    assert!(err.contains("Error: Unsupported provisioner"), "{err}");
    assert!(
        err.contains("A \"remote-exec\" provisioner needs a connection"),
        "{err}"
    );
}

/// A failed variable validation points where the value came from, as Terraform 1.11 does
/// (`fixtures/cli/var-validation`, Terraform's output beside it): the value in a `.tfvars`
/// file, or the variable's block for a `-var`, with the rule that checked it; a condition
/// may refer to another variable.
#[test]
fn variable_validation_points_at_the_value() {
    let fixture = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/cli/var-validation");
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&fixture, dir.path());
    let terraform = |name: &str| std::fs::read_to_string(fixture.join(name)).unwrap();
    let (code, _, err) = check_cli_in(dir.path(), &["plan"], "");
    assert_eq!(code, 1);
    let tf = terraform("terraform-plan-file.txt");
    assert!(tf.contains("on terraform.tfvars line 1:") && tf.contains("n must be below 5."));
    assert!(tf.contains("This was checked by the validation rule at main.tf:3,3-13."));
    assert!(err.contains("on terraform.tfvars:1:5:"), "{err}");
    assert!(err.contains("n must be below 5."), "{err}");
    assert!(
        err.contains("This was checked by the validation rule at main.tf:4:21."),
        "{err}"
    );

    let (code, _, err) = check_cli_in(dir.path(), &["plan", "-var", "n=3", "-var", "m=5"], "");
    assert_eq!(code, 1);
    let tf = terraform("terraform-plan-cli.txt");
    assert!(tf.contains("on main.tf line 8:") && tf.contains("m must be below n."));
    assert!(err.contains("on main.tf:8:1:"), "{err}");
    assert!(err.contains("m must be below n."), "{err}");
    assert!(
        err.contains("This was checked by the validation rule at main.tf:12:21."),
        "{err}"
    );
    assert!(
        err.contains("The value comes from the command line."),
        "{err}"
    );
}
