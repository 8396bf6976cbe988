//! The function library against Terraform itself: `fixtures/golden/functions_console.txt`
//! holds expressions and what `terraform console` (1.11) printed for each, recorded by piping
//! each expression into `terraform console` in an empty directory (errors flattened to
//! `Error: summary: detail`). Each is evaluated here through the real evaluator and rendered
//! as the console renders values; every difference is reported at once.
//!
//! Left out on purpose: cases where Terraform panics (`indent(-1, ...)`), where the answer
//! depends on Terraform's working directory, and the exact text of regular-expression syntax
//! errors (Go's and Rust's regex engines word them differently; both are reported as the same
//! kind of error).
//!
//! Expressions whose rendering depends on things outside the function library (Terraform
//! prints a typed null as `tostring(null)`, Cairn's renderer as `null`) are compared after
//! normalizing that rendering, and said so below.

use crate::diag::FileId;
use crate::eval::{eval, Scope, ScopeError, Subject};
use crate::value::{format_hcl, Value};
use std::path::{Path, PathBuf};

struct EmptyScope {
    dir: PathBuf,
}

impl Scope for EmptyScope {
    fn resolve(&self, s: &Subject) -> Result<Value, ScopeError> {
        Err(ScopeError::new(
            "Invalid reference",
            format!("{s:?} is not available here."),
        ))
    }
    fn file(&self) -> FileId {
        FileId(0)
    }
    fn module_dir(&self) -> &Path {
        &self.dir
    }
    fn root_dir(&self) -> &Path {
        &self.dir
    }
}

fn render(src: &str, scope: &EmptyScope) -> String {
    let expr = match hcl_edit::parser::parse_expr(src) {
        Ok(e) => e,
        Err(e) => return format!("parse error: {}", e.message()),
    };
    match eval(&expr, scope) {
        Ok(v) => format_hcl(&v),
        Err(diags) => diags
            .iter()
            .map(|d| format!("Error: {}: {}", d.summary, d.detail))
            .collect::<Vec<_>>()
            .join("\n"),
    }
}

/// Terraform prints typed nulls with their conversion (`tostring(null)`), nested heredocs as
/// `<<-EOT`, and a heredoc for a string ending in a newline with a blank line before `EOT`;
/// that is the renderer's business, not the functions', so it is compared without those.
fn normalize(text: &str) -> String {
    let lines: Vec<&str> = text.lines().map(str::trim_end).collect();
    let mut kept: Vec<&str> = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        let next_is_eot = lines.get(i + 1).is_some_and(|n| n.trim() == "EOT");
        if !(l.is_empty() && next_is_eot) {
            kept.push(l);
        }
    }
    let mut out = kept.join("\n").replace("<<-EOT", "<<EOT");
    for f in ["tostring", "tonumber", "tobool"] {
        out = out.replace(&format!("{f}(null)"), "null");
    }
    out
}

#[test]
fn functions_match_terraform_console() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures");
    let golden =
        std::fs::read_to_string(dir.join("golden/functions_console.txt")).expect("golden file");
    let scope = EmptyScope { dir: dir.clone() };
    let mut failures = Vec::new();
    let mut count = 0;
    for case in golden.split("== ").skip(1) {
        let (expr, expected) = case.split_once('\n').unwrap_or((case, ""));
        let expected = normalize(expected.trim_end());
        let got = normalize(&render(expr, &scope));
        count += 1;
        if got != expected {
            failures.push(format!(
                "{expr}\n  terraform: {expected}\n  cairn:     {got}"
            ));
        }
    }
    assert!(count > 150, "only {count} cases");
    assert!(
        failures.is_empty(),
        "{} of {count} differ from terraform console:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
