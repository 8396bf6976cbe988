//! End-to-end tests of the `cairn` binary: each runs the real executable in a temporary
//! directory through `check_cli` and looks at what a user sees (exit code, stdout, stderr).

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

/// Runs `cairn ARGS` in `dir` with `stdin` piped in (so standard input is never a terminal),
/// colours off by environment, and returns (exit code, stdout, stderr).
fn check_cli_in(dir: &Path, args: &[&str], stdin: &str) -> (i32, String, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_cairn"))
        .args(args)
        .current_dir(dir)
        .env("NO_COLOR", "1")
        .env_remove("CAIRN_STATE_DIR")
        .env_remove("CAIRN_LOG")
        .env_remove("CAIRN_LOG_PATH")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the cairn binary runs");
    if let Some(mut i) = child.stdin.take() {
        let _ = i.write_all(stdin.as_bytes());
    }
    let out = child.wait_with_output().expect("cairn finishes");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `check_cli_in` in a fresh empty directory.
fn check_cli(args: &[&str], stdin: &str) -> (i32, String, String) {
    let dir = tempfile::tempdir().unwrap();
    check_cli_in(dir.path(), args, stdin)
}

#[test]
fn version_in_every_spelling() {
    let v = env!("CARGO_PKG_VERSION");
    for args in [&["version"][..], &["-version"], &["--version"]] {
        let (code, out, err) = check_cli(args, "");
        assert_eq!(code, 0, "{args:?}: {err}");
        assert!(out.contains(v), "{args:?}: {out}");
    }
    let (code, out, _) = check_cli(&["version", "-json"], "");
    assert_eq!(code, 0);
    let j: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(j["cairn_version"], v);
}

#[test]
fn completions_for_each_shell() {
    for (shell, marker) in [
        ("bash", "complete -F"),
        ("zsh", "#compdef cairn"),
        ("fish", "complete -c cairn"),
    ] {
        let (code, out, err) = check_cli(&["completions", shell], "");
        assert_eq!(code, 0, "{err}");
        assert!(
            out.contains(marker),
            "{shell}: {}",
            &out[..out.len().min(200)]
        );
        assert!(
            out.contains("import-tfstate"),
            "{shell} completes subcommands"
        );
    }
    let (code, _, err) = check_cli(&["completions", "powershell"], "");
    assert_eq!(code, 1);
    assert!(err.contains("invalid value 'powershell'"), "{err}");
}

#[test]
fn usage_errors_exit_1_and_help_exits_0() {
    let (code, _, err) = check_cli(&["plan", "-no-such-flag"], "");
    assert_eq!(code, 1);
    assert!(err.contains("-no-such-flag"), "{err}");
    let (code, _, err) = check_cli(&["plan", "-parallelism=many"], "");
    assert_eq!(code, 1);
    assert!(err.contains("many"), "{err}");
    let (code, _, err) = check_cli(&["plan", "-lock-timeout=soon"], "");
    assert_eq!(code, 1);
    assert!(err.contains("like 5s or 1m30s"), "{err}");
    let (code, out, _) = check_cli(&["plan", "-help"], "");
    assert_eq!(code, 0);
    assert!(out.contains("--detailed-exitcode"), "{out}");
    assert!(out.contains("--refresh[=<BOOL>]"), "{out}");
}

#[test]
fn chdir_to_a_missing_directory_is_an_error() {
    let (code, _, err) = check_cli(&["-chdir=does/not/exist", "version"], "");
    assert_eq!(code, 1);
    assert!(err.contains("Invalid -chdir option"), "{err}");
    assert!(err.contains("does/not/exist"), "{err}");
}

#[test]
fn log_level_is_checked() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_cairn"))
        .arg("version")
        .current_dir(dir.path())
        .env("CAIRN_LOG", "loud")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("CAIRN_LOG=\"loud\" is not a log level"),
        "{err}"
    );
    let log = dir.path().join("cairn.log");
    let out = Command::new(env!("CARGO_BIN_EXE_cairn"))
        .arg("version")
        .current_dir(dir.path())
        .env("CAIRN_LOG", "debug")
        .env("CAIRN_LOG_PATH", &log)
        .output()
        .unwrap();
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(
        text.contains("DEBUG") && text.contains("starting"),
        "{text}"
    );
}
