//! `cairn fmt`: Terraform's `fmt` command (`internal/command/fmt.go`, 1.11) over
//! `config::format`. The same files in the same order (each target; a directory's entries
//! sorted by name, hidden and editor files skipped, subdirectories with `-recursive`), the
//! same paths printed (relative to the working directory, as Go's `filepath.Rel` makes
//! them), the same output through the same line discipline (Terraform's `UiWriter`: each
//! write loses one trailing newline and gains one), the same exit codes: 2 on an error,
//! 3 for `-check` with something to change. Files are formatted on all cores; what is
//! printed is gathered and printed in file order.

use super::args::FmtArgs;
use super::context::Context;
use super::output::Exit;
use crate::config::format::{format_source, EXTENSIONS};
use crate::diag::{Diagnostic, Diagnostics, SourceMap, Span};
use std::io::Read as _;
use std::path::{Path, PathBuf};

/// What `fmt` does with each file, after `-check` and standard input had their say.
#[derive(Clone, Copy)]
struct Mode {
    list: bool,
    write: bool,
    diff: bool,
}

/// One file's outcome: what it prints (in order), or its error.
enum Outcome {
    Printed(Vec<String>),
    /// A syntax error: the file's text (for the snippet) and the error.
    Syntax(String, (usize, usize, &'static str, String)),
    Failed(Diagnostic),
}

/// A step of the walk: a file to format, or an error met while walking.
enum Step {
    File { shown: String, path: PathBuf },
    Error(Diagnostic),
}

pub(crate) fn fmt(ctx: &Context, a: &FmtArgs) -> Exit {
    let stdin = a.targets.first().is_some_and(|t| t == "-");
    let mut mode = Mode {
        list: a.list && !stdin,
        write: a.write && !stdin,
        diff: a.diff,
    };
    let list_requested = mode.list;
    if a.check {
        mode.list = true;
        mode.write = false;
    }
    let mut map = SourceMap::new();
    let mut diags = Diagnostics::new();
    let mut printed: Vec<String> = Vec::new();
    if stdin {
        let mut src = Vec::new();
        let outcome = match std::io::stdin().read_to_end(&mut src) {
            Ok(_) => process("<stdin>", None, src, mode),
            Err(_) => Outcome::Failed(Diagnostic::error("Failed to read <stdin>", "")),
        };
        collect("<stdin>", outcome, &mut printed, &mut map, &mut diags);
    } else {
        let targets: Vec<String> = if a.targets.is_empty() {
            vec![".".into()]
        } else {
            a.targets.clone()
        };
        let steps = walk(&targets, a.recursive);
        let outcomes = run_parallel(&steps, mode);
        for (step, outcome) in steps.iter().zip(outcomes) {
            match (step, outcome) {
                (Step::Error(d), _) => diags.push(d.clone()),
                (Step::File { shown, .. }, Some(o)) => {
                    collect(shown, o, &mut printed, &mut map, &mut diags)
                }
                (Step::File { .. }, None) => {}
            }
        }
    }
    if !a.check {
        for p in &printed {
            ui_write(ctx, p);
        }
    }
    if diags.has_errors() {
        ctx.report(&map, &diags, a.no_color);
        return Exit::Changes;
    }
    if a.check {
        let all: String = printed.concat();
        if list_requested && !all.is_empty() {
            ui_write(ctx, &all);
        }
        return if all.is_empty() {
            Exit::Ok
        } else {
            Exit::Unformatted
        };
    }
    Exit::Ok
}

/// Terraform's `cli.UiWriter`: one write, one line: a trailing newline is dropped and one is
/// added (so even an empty write prints a newline).
fn ui_write(ctx: &Context, text: &str) {
    let t = text.strip_suffix('\n').unwrap_or(text);
    ctx.out(&format!("{t}\n"));
}

fn collect(
    shown: &str,
    outcome: Outcome,
    printed: &mut Vec<String>,
    map: &mut SourceMap,
    diags: &mut Diagnostics,
) {
    match outcome {
        Outcome::Printed(p) => printed.extend(p),
        Outcome::Syntax(text, (start, end, summary, detail)) => {
            let file = map.add(shown, text);
            diags.push(Diagnostic::error(summary, detail).with_span(Some(Span {
                file,
                start,
                end,
            })));
        }
        Outcome::Failed(d) => diags.push(d),
    }
}

/// Formats the walk's files on every core; outcomes in the steps' order.
fn run_parallel(steps: &[Step], mode: Mode) -> Vec<Option<Outcome>> {
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(steps.len().max(1));
    let one = |step: &Step| match step {
        Step::File { shown, path } => Some(match std::fs::read(path) {
            Ok(src) => process(shown, Some(path), src, mode),
            Err(_) => Outcome::Failed(Diagnostic::error(
                format!("Failed to read file {shown}"),
                "",
            )),
        }),
        Step::Error(_) => None,
    };
    if threads <= 1 {
        return steps.iter().map(one).collect();
    }
    let next = std::sync::atomic::AtomicUsize::new(0);
    let mut results: Vec<Option<Outcome>> = steps.iter().map(|_| None).collect();
    let parts: Vec<Vec<(usize, Option<Outcome>)>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    let mut done = Vec::new();
                    loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        if i >= steps.len() {
                            break done;
                        }
                        done.push((i, one(&steps[i])));
                    }
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_default())
            .collect()
    });
    for (i, o) in parts.into_iter().flatten() {
        results[i] = o;
    }
    results
}

/// One file (or standard input): formatted, compared, listed, written, diffed, printed.
fn process(shown: &str, path: Option<&Path>, src: Vec<u8>, mode: Mode) -> Outcome {
    let src = match String::from_utf8(src) {
        Ok(s) => s,
        Err(_) => {
            return Outcome::Failed(Diagnostic::error(
                "Invalid character encoding",
                format!(
                    "{shown}: all input files must be UTF-8 encoded. Ensure that UTF-8 \
                     encoding is selected in your editor."
                ),
            ))
        }
    };
    let result = match format_source(&src) {
        Ok(r) => r,
        Err(e) => return Outcome::Syntax(src, e),
    };
    let mut out = Vec::new();
    if src != result {
        if mode.list {
            out.push(format!("{shown}\n"));
        }
        if mode.write {
            if let Some(path) = path {
                if std::fs::write(path, &result).is_err() {
                    return Outcome::Failed(Diagnostic::error(
                        format!("Failed to write {shown}"),
                        "",
                    ));
                }
            }
        }
        if mode.diff {
            match bytes_diff(&src, &result, shown) {
                Ok(d) => out.push(d),
                Err(e) => {
                    return Outcome::Failed(Diagnostic::error(
                        format!("Failed to generate diff for {shown}: {e}"),
                        "",
                    ))
                }
            }
        }
    }
    if !mode.list && !mode.write && !mode.diff {
        out.push(result);
    }
    Outcome::Printed(out)
}

/// The unified diff Terraform shows: it runs `diff -u` on two temporary files, labelled
/// `old/PATH` and `new/PATH`; so does this (the same program, so the same hunks).
fn bytes_diff(old: &str, new: &str, shown: &str) -> Result<String, String> {
    let write = |text: &str| -> Result<tempfile::NamedTempFile, String> {
        let mut f = tempfile::NamedTempFile::new().map_err(|e| e.to_string())?;
        std::io::Write::write_all(&mut f, text.as_bytes()).map_err(|e| e.to_string())?;
        Ok(f)
    };
    let (f1, f2) = (write(old)?, write(new)?);
    let out = std::process::Command::new("diff")
        .arg(format!("--label=old/{shown}"))
        .arg(format!("--label=new/{shown}"))
        .arg("-u")
        .arg(f1.path())
        .arg(f2.path())
        .output()
        .map_err(|e| e.to_string())?;
    let mut data = out.stdout;
    data.extend(out.stderr);
    if data.is_empty() && !out.status.success() {
        return Err(format!("diff exited with {}", out.status));
    }
    Ok(String::from_utf8_lossy(&data).into_owned())
}

/// The files each target names, in Terraform's order. A target that does not exist ends the
/// walk (Terraform stops there too).
fn walk(targets: &[String], recursive: bool) -> Vec<Step> {
    let base = working_dir();
    let mut steps = Vec::new();
    for t in targets {
        let shown = normalize_path(&base, t);
        let Ok(meta) = std::fs::metadata(&shown) else {
            steps.push(Step::Error(Diagnostic::error(
                format!("No file or directory at {shown}"),
                "",
            )));
            break;
        };
        if meta.is_dir() {
            walk_dir(&base, &shown, recursive, &mut steps);
        } else if EXTENSIONS.iter().any(|e| shown.ends_with(e)) {
            steps.push(Step::File {
                path: PathBuf::from(&shown),
                shown: normalize_path(&base, &shown),
            });
        } else {
            steps.push(Step::Error(Diagnostic::error(
                "Only .tf, .tfvars, and .tftest.hcl files can be processed with cairn fmt",
                "",
            )));
        }
    }
    steps
}

fn walk_dir(base: &str, dir: &str, recursive: bool, steps: &mut Vec<Step>) {
    let entries = match std::fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) => {
            let summary = if e.kind() == std::io::ErrorKind::NotFound {
                format!("There is no configuration directory at {dir}")
            } else {
                format!("Cannot read directory {dir}")
            };
            steps.push(Step::Error(Diagnostic::error(summary, "")));
            return;
        }
    };
    let mut entries: Vec<(String, bool)> = entries
        .filter_map(Result::ok)
        .map(|e| {
            let is_dir = e.file_type().is_ok_and(|t| t.is_dir());
            (e.file_name().to_string_lossy().into_owned(), is_dir)
        })
        .collect();
    entries.sort();
    for (name, is_dir) in entries {
        if is_ignored(&name) {
            continue;
        }
        let sub = clean(&format!("{dir}/{name}"));
        if is_dir {
            if recursive {
                walk_dir(base, &sub, recursive, steps);
            }
            continue;
        }
        if EXTENSIONS.iter().any(|e| name.ends_with(e)) {
            steps.push(Step::File {
                path: PathBuf::from(&sub),
                shown: normalize_path(base, &sub),
            });
        }
    }
}

/// Terraform's `configs.IsIgnoredFile`: hidden files, vim's `~` and emacs's `#…#` files.
fn is_ignored(name: &str) -> bool {
    name.starts_with('.') || name.ends_with('~') || (name.starts_with('#') && name.ends_with('#'))
}

/// The working directory as Go's `os.Getwd` gives it: `$PWD` when it names the same
/// directory (so a path through a symlink stays as typed), else the resolved one.
fn working_dir() -> String {
    let real = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    if let Ok(pwd) = std::env::var("PWD") {
        if pwd.starts_with('/') {
            use std::os::unix::fs::MetadataExt as _;
            if let (Ok(a), Ok(b)) = (std::fs::metadata(&pwd), std::fs::metadata(".")) {
                if a.dev() == b.dev() && a.ino() == b.ino() {
                    return pwd;
                }
            }
        }
    }
    real.to_string_lossy().into_owned()
}

/// Terraform's `NormalizePath`: a path relative to the working directory when it can be.
fn normalize_path(base: &str, given: &str) -> String {
    let abs = if given.starts_with('/') {
        clean(given)
    } else {
        clean(&format!("{base}/{given}"))
    };
    rel(&clean(base), &abs)
}

/// Go's `filepath.Rel` for two clean absolute paths.
fn rel(base: &str, target: &str) -> String {
    if base == target {
        return ".".into();
    }
    let b: Vec<&str> = base.split('/').filter(|c| !c.is_empty()).collect();
    let t: Vec<&str> = target.split('/').filter(|c| !c.is_empty()).collect();
    let common = b.iter().zip(&t).take_while(|(x, y)| x == y).count();
    let mut parts: Vec<&str> = vec![".."; b.len() - common];
    parts.extend(&t[common..]);
    if parts.is_empty() {
        ".".into()
    } else {
        parts.join("/")
    }
}

/// Go's `filepath.Clean`: the shortest equivalent path, lexically.
fn clean(p: &str) -> String {
    if p.is_empty() {
        return ".".into();
    }
    let rooted = p.starts_with('/');
    let mut out: Vec<&str> = Vec::new();
    for c in p.split('/') {
        match c {
            "" | "." => {}
            ".." => {
                if out.last().is_some_and(|l| *l != "..") {
                    out.pop();
                } else if !rooted {
                    out.push("..");
                }
            }
            c => out.push(c),
        }
    }
    let joined = out.join("/");
    match (rooted, joined.is_empty()) {
        (true, _) => format!("/{joined}"),
        (false, true) => ".".into(),
        (false, false) => joined,
    }
}

#[cfg(test)]
mod tests {
    use super::{clean, normalize_path, rel};

    #[test]
    fn paths_as_go_cleans_and_relativizes_them() {
        assert_eq!(clean("./a//b/../c/"), "a/c");
        assert_eq!(clean("../../x"), "../../x");
        assert_eq!(clean("/.."), "/");
        assert_eq!(rel("/a/b", "/a/c/d"), "../c/d");
        assert_eq!(rel("/a/b", "/a/b"), ".");
        assert_eq!(normalize_path("/w", "."), ".");
        assert_eq!(normalize_path("/w", "./m/main.tf"), "m/main.tf");
        assert_eq!(normalize_path("/w/x", "/w/y/a.tf"), "../y/a.tf");
    }
}
