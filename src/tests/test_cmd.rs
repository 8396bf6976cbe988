//! `cairn test` on the real binary, against what `terraform test` (1.11) printed for the same
//! test files: each case under `fixtures/test/CASE/` has a `commands` file (one argument list
//! per line) and, made by `fixtures/test/make-goldens.sh`, Terraform's standard output, exit
//! code and the sim provider's create/update/delete calls for each line in `expected/`.
//! Cairn's standard output must equal Terraform's (for `-verbose`, the lines about files and
//! runs: the plan and state in between are each tool's own renderers; for `-json`, every
//! message but the version, with timestamps, `@module` and elapsed times left out, the
//! tool's name as Cairn, and diagnostics of the test file by severity, summary and detail,
//! those of the configuration by severity), its exit code and calls too. Cairn's standard
//! error (its diagnostics, rendered its way) is its own golden, `N.cairn.stderr`.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/test")
}

/// The oracle's CLI configuration: `dev_overrides` for the sim plugin.
fn oracle_cli_config() -> PathBuf {
    let p = PathBuf::from(std::env::var("ORACLE_BIN").unwrap_or_else(|_| "/tmp/oracle-bin".into()))
        .join("terraformrc");
    assert!(
        p.exists(),
        "{} is missing: run ../shared/oracle/setup.sh",
        p.display()
    );
    p
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let name = e.file_name();
        if name == "expected" {
            continue;
        }
        let p = e.path();
        if p.is_dir() {
            copy_dir(&p, &to.join(&name));
        } else {
            std::fs::copy(&p, to.join(&name)).unwrap();
        }
    }
}

/// The create/update/delete calls of the sim store, one `op name id region` a line.
fn calls(work: &Path) -> Option<String> {
    let text = std::fs::read_to_string(work.join("sim-store/calls.jsonl")).ok()?;
    let mut out = String::new();
    for l in text.lines() {
        let j: serde_json::Value = serde_json::from_str(l).unwrap();
        let op = j["op"].as_str().unwrap();
        if ["create", "update", "delete"].contains(&op) {
            let id = j["id"]
                .as_str()
                .map(str::to_string)
                .unwrap_or("None".into());
            let region = j["region"].as_str().unwrap();
            out.push_str(&format!(
                "{op} {} {id} {region}\n",
                j["name"].as_str().unwrap()
            ));
        }
    }
    Some(out)
}

/// The lines `-verbose` shares with the plain output.
fn progress_lines(s: &str) -> String {
    s.lines()
        .filter(|l| {
            l.contains(".tftest.hcl... ")
                || l.starts_with("  run \"")
                || l.starts_with("Success!")
                || l.starts_with("Failure!")
        })
        .map(|l| format!("{l}\n"))
        .collect()
}

/// `-json` messages without what differs by tool or by moment.
fn json_messages(s: &str) -> Vec<serde_json::Value> {
    s.lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|j| j["type"] != "version")
        // Terraform's "still running" messages come every two seconds of a run.
        .filter(|j| j["test_run"]["progress"] != "running")
        .map(|mut j| {
            let o = j.as_object_mut().unwrap();
            o.remove("@timestamp");
            o.remove("@module");
            if let Some(r) = o.get_mut("test_run").and_then(|r| r.as_object_mut()) {
                r.remove("elapsed");
            }
            // A diagnostic about the test file is compared whole (but its snippet); one about
            // the configuration is each engine's own words: only its severity.
            if let Some(d) = o.get_mut("diagnostic") {
                let in_test = d["range"]["filename"]
                    .as_str()
                    .is_some_and(|f| f.ends_with(".tftest.hcl"));
                *d = match in_test {
                    true => serde_json::json!({
                        "severity": d["severity"],
                        "summary": d["summary"],
                        "detail": d["detail"],
                    }),
                    false => serde_json::json!({ "severity": d["severity"] }),
                };
                if !in_test {
                    o.remove("@message");
                }
            }
            if let Some(m) = o.get_mut("@message") {
                *m = serde_json::Value::from(
                    m.as_str().unwrap_or("").replace("Terraform ", "Cairn "),
                );
            }
            j
        })
        .fold(Vec::new(), |mut out: Vec<serde_json::Value>, j| {
            // So do its "tearing down" messages while a teardown lasts: one is kept.
            let repeated = j["test_run"]["progress"] == "teardown" && out.last() == Some(&j);
            if !repeated {
                out.push(j);
            }
            out
        })
}

fn run_case(case: &str) {
    let dir = fixtures().join(case);
    let commands = std::fs::read_to_string(dir.join("commands")).unwrap();
    for (i, line) in commands.lines().enumerate() {
        let n = i + 1;
        let tmp = tempfile::tempdir().unwrap();
        let work = tmp.path().join("work");
        copy_dir(&dir, &work);
        let args: Vec<&str> = line.split_whitespace().collect();
        let out = Command::new(env!("CARGO_BIN_EXE_cairn"))
            .args(&args)
            .current_dir(&work)
            .env("NO_COLOR", "1")
            .env("SIM_STORE", work.join("sim-store"))
            .env("TF_CLI_CONFIG_FILE", oracle_cli_config())
            .env_remove("CAIRN_STATE_DIR")
            .env_remove("CAIRN_LOG")
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        let expected = |ext: &str| std::fs::read_to_string(dir.join(format!("expected/{n}.{ext}")));
        let tf_out = expected("stdout").unwrap();
        let what = format!("{case}: cairn {line}\n--- stdout\n{stdout}\n--- stderr\n{stderr}");
        if line.contains("-json") {
            assert_eq!(json_messages(&stdout), json_messages(&tf_out), "{what}");
        } else if line.contains("-verbose") {
            assert_eq!(progress_lines(&stdout), progress_lines(&tf_out), "{what}");
        } else {
            assert_eq!(stdout, tf_out, "{what}");
        }
        let code: i32 = expected("exit").unwrap().trim().parse().unwrap();
        assert_eq!(out.status.code(), Some(code), "{what}");
        if let Ok(tf_calls) = expected("calls") {
            assert_eq!(calls(&work).unwrap_or_default(), tf_calls, "{what}");
        }
        // Cairn's diagnostics, its own rendering, with the temporary directory masked.
        let stderr = stderr.replace(&work.display().to_string(), "WORK");
        expect_test::expect_file![dir.join(format!("expected/{n}.cairn.stderr"))]
            .assert_eq(&stderr);
        // A test never touches the working directory's own state.
        assert!(!work.join(".cairn").exists(), "{case}: .cairn was created");
    }
}

#[test]
fn basic() {
    run_case("basic");
}

#[test]
fn expect_failures() {
    run_case("expect");
}

#[test]
fn sim_modules() {
    run_case("sim_modules");
}

#[test]
fn mock_providers() {
    run_case("mocks");
}

/// A real public module's own test files (`fixtures/test/real_*`, with their licence and
/// `SOURCE`): they mock `azurerm`, which Cairn does not have and cannot install here, so the
/// mocks run on a schema made from the configuration. Terraform cannot run them offline (it
/// must install the real provider first), so the golden is Cairn's own output, and every run
/// must pass.
fn real_module(case: &str) {
    let dir = fixtures().join(case);
    let tmp = tempfile::tempdir().unwrap();
    let work = tmp.path().join("work");
    copy_dir(&dir, &work);
    let out = Command::new(env!("CARGO_BIN_EXE_cairn"))
        .args(["test", "-test-directory=tests/unit"])
        .current_dir(&work)
        .env("NO_COLOR", "1")
        .env_remove("CAIRN_STATE_DIR")
        .env_remove("TF_CLI_CONFIG_FILE")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(0), "{case}\n{stdout}\n{stderr}");
    assert_eq!(stderr, "", "{case}");
    expect_test::expect_file![dir.join("expected.stdout")].assert_eq(&stdout);
    assert!(!work.join(".cairn").exists(), "{case}: .cairn was created");
}

#[test]
fn real_user_assigned_identity() {
    real_module("real_azurerm_user_assigned_identity");
}

#[test]
fn real_route_table() {
    real_module("real_azurerm_route_table");
}

#[test]
fn overrides() {
    run_case("overrides");
}

/// `override_module` at file and run level: the call is not run, its outputs are the values
/// given (null for the others), at plan as at apply.
#[test]
fn override_module() {
    run_case("override_module");
}

/// `override_during = plan`: the override's values are known when planning; without it (a
/// run's override replacing the file's) they are not.
#[test]
fn override_during() {
    run_case("override_during");
}

#[test]
fn provider_blocks() {
    run_case("providers");
}

#[test]
fn failures_and_teardown() {
    run_case("failures");
}

#[test]
fn bad_test_file() {
    run_case("bad_file");
}

#[test]
fn test_directory_tfvars() {
    run_case("tfvars");
}
