//! `cairn fmt` end to end, against what Terraform 1.11's `terraform fmt` did to the same input
//! (goldens made by `fixtures/fmt/make_goldens.py`, which runs Terraform):
//! - every file of real public modules (uglified) and of hand-written ugly files formats
//!   byte-for-byte as Terraform formatted it;
//! - the real modules as published are already canonical for both;
//! - formatting is idempotent;
//! - every flag combination of `fixtures/fmt/cli/cases.txt` (listing, writing, diffs,
//!   `-check`, `-recursive`, standard input, errors) exits, writes and prints as Terraform did.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/fmt")
}

/// Runs `cairn fmt ARGS` in `dir` with `stdin`: (exit code, stdout, stderr).
fn cairn_fmt(dir: &Path, args: &[&str], stdin: &[u8]) -> (i32, String, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_cairn"))
        .arg("fmt")
        .args(args)
        .current_dir(dir)
        .env("NO_COLOR", "1")
        .env_remove("PWD")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the cairn binary runs");
    if let Some(mut i) = child.stdin.take() {
        let _ = i.write_all(stdin);
    }
    let out = child.wait_with_output().expect("cairn finishes");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Every file under `root`, by path relative to it.
fn snapshot(root: &Path) -> BTreeMap<String, Vec<u8>> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, Vec<u8>>) {
        for e in std::fs::read_dir(dir).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(root, &p, out);
            } else {
                let rel = p.strip_prefix(root).unwrap().to_string_lossy().into_owned();
                out.insert(rel, std::fs::read(&p).unwrap());
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(root, root, &mut out);
    out
}

fn copy_tree(from: &Path, to: &Path) {
    for (rel, bytes) in snapshot(from) {
        let p = to.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, bytes).unwrap();
    }
}

#[test]
fn every_file_formats_as_terraform_formatted_it() {
    let input = fixtures().join("input");
    let golden = snapshot(&fixtures().join("golden"));
    let tmp = tempfile::tempdir().unwrap();
    copy_tree(&input, tmp.path());
    let (code, out, err) = cairn_fmt(tmp.path(), &["-recursive", "-list=false"], b"");
    assert_eq!(code, 0, "{out}{err}");
    let got = snapshot(tmp.path());
    assert_eq!(
        got.keys().collect::<Vec<_>>(),
        golden.keys().collect::<Vec<_>>()
    );
    let differing: Vec<&String> = got
        .iter()
        .filter(|(k, v)| golden.get(*k) != Some(v))
        .map(|(k, _)| k)
        .collect();
    assert!(
        differing.is_empty(),
        "{} of {} files differ from Terraform's format: {differing:?}",
        differing.len(),
        got.len()
    );
    let formats = got.keys().filter(|k| !k.ends_with("LICENSE")).count();
    assert!(formats > 150, "only {formats} files compared");
}

#[test]
fn published_modules_are_canonical_as_terraform_says() {
    let expected = std::fs::read_to_string(fixtures().join("modules-check.txt")).unwrap();
    let (code, out, err) = cairn_fmt(&fixtures().join("modules"), &["-check", "-recursive"], b"");
    assert_eq!(format!("exit {code}\nstdout:\n{out}"), expected, "{err}");
}

/// Terraform's format is idempotent except where its unwrapping of `"${x}"` uncovers another
/// (`"${"${x}"}"` is `"${x}"` after one run, `x` after two): `fixtures/fmt/twice/` holds such
/// a file, and `cairn fmt` takes the same two steps.
#[test]
fn nested_unwrapping_takes_two_runs_as_in_terraform() {
    let src = std::fs::read(fixtures().join("twice/nested-unwrap.tf")).unwrap();
    let (_, once, _) = cairn_fmt(&fixtures(), &["-"], &src);
    assert_eq!(
        once,
        "a = \"${x}${y}\"\nb = \"${x}\"\nc = \"${x}\\n\"\nd = \"${x}%{if y}z%{endif}\"\n"
    );
    let (_, twice, _) = cairn_fmt(&fixtures(), &["-"], once.as_bytes());
    assert!(twice.contains("b = x\n"), "{twice}");
}

#[test]
fn formatting_is_idempotent() {
    let (code, out, err) = cairn_fmt(&fixtures().join("golden"), &["-check", "-recursive"], b"");
    assert_eq!((code, out.as_str()), (0, ""), "{err}");
    let one = std::fs::read(fixtures().join("golden/hand/exprs.tf")).unwrap();
    let (code, out, _) = cairn_fmt(&fixtures(), &["-"], &one);
    assert_eq!((code, out.as_bytes()), (0, &one[..]));
}

/// The same broken file Terraform's goldens were made with (`make_goldens.py`'s `BAD`).
const BAD: &str = "a = \nb = 2\n";

#[test]
fn command_line_cases_match_terraform() {
    let cases = std::fs::read_to_string(fixtures().join("cli/cases.txt")).unwrap();
    let mut failures = Vec::new();
    let mut count = 0;
    for line in cases.lines() {
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let mut f = line.split('|').map(str::to_string).collect::<Vec<_>>();
        f.resize(4, String::new());
        let (name, args, stdin, setup) = (&f[0], &f[1], &f[2], &f[3]);
        let tmp = tempfile::tempdir().unwrap();
        // Canonical, so that the path printed for an absolute target is as Terraform's.
        let tree = tmp.path().canonicalize().unwrap().join("tree");
        copy_tree(&fixtures().join("cli/tree"), &tree);
        if setup == "bad" {
            std::fs::write(tree.join("bad.tf"), BAD).unwrap();
        }
        let before = snapshot(&tree);
        let abs = tree.to_string_lossy().into_owned();
        let argv: Vec<String> = args
            .split_whitespace()
            .map(|a| a.replace("{ABS}", &abs))
            .collect();
        let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
        let input = if stdin.is_empty() {
            Vec::new()
        } else {
            std::fs::read(tree.join(stdin)).unwrap()
        };
        let (code, out, err) = cairn_fmt(&tree, &argv, &input);
        let after = snapshot(&tree);
        let changed: Vec<&str> = after
            .iter()
            .filter(|(k, v)| before.get(*k) != Some(v))
            .map(|(k, _)| k.as_str())
            .collect();
        let got = format!(
            "exit {code}\nchanged {}\nstdout:\n{}",
            changed.join(" "),
            out.replace(&abs, "{ABS}")
        );
        let want = std::fs::read_to_string(fixtures().join(format!("cli/{name}.txt"))).unwrap();
        count += 1;
        if got != want {
            failures.push(format!(
                "case {name} (fmt {args}):\n--- terraform\n{want}\n--- cairn\n{got}\n{err}"
            ));
        }
    }
    assert!(count >= 20);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn a_syntax_error_is_its_diagnostic_and_exit_2() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("bad.tf"), BAD).unwrap();
    std::fs::write(tmp.path().join("good.tf"), "a=1\n").unwrap();
    let (code, out, err) = cairn_fmt(tmp.path(), &[], b"");
    assert_eq!(code, 2);
    // The other file is still formatted and listed, as Terraform does.
    assert_eq!(out, "good.tf\n");
    expect_test::expect_file!["../../fixtures/fmt/syntax-error.stderr"].assert_eq(&err);
    // Standard input: the same error, named `<stdin>`.
    let (code, _, err) = cairn_fmt(tmp.path(), &["-"], BAD.as_bytes());
    assert_eq!(code, 2);
    assert!(err.contains("<stdin>:1:5"), "{err}");
}

/// Every file of `fixtures/fmt/errors/` is refused as Terraform refuses it: exit 2, its first
/// error on the line Terraform names, and the file untouched.
#[test]
fn syntax_errors_are_found_where_terraform_finds_them() {
    let expected = std::fs::read_to_string(fixtures().join("errors.txt")).unwrap();
    let dir = fixtures().join("errors");
    let mut failures = Vec::new();
    for line in expected.lines() {
        let mut w = line.split(' ');
        let (name, want_line) = (w.next().unwrap(), w.nth(3).unwrap());
        let before = std::fs::read(dir.join(name)).unwrap();
        // -write=false: a bug must not rewrite the fixture.
        let (code, out, err) = cairn_fmt(&dir, &["-write=false", name], b"");
        let at = format!("on {name}:{want_line}:");
        if code != 2 || !err.contains(&at) || !out.is_empty() {
            failures.push(format!(
                "{name}: exit {code}, want 2 and `{at}`:\n{err}{out}"
            ));
        }
        assert_eq!(std::fs::read(dir.join(name)).unwrap(), before);
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
