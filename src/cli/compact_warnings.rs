//! `-compact-warnings` (`plan`, `apply`, `destroy`, `refresh`): when a run ends with warnings
//! and no error, each warning is one line (its summary, and where it is), as Terraform's
//! `format.DiagnosticWarningsCompact` prints them; errors are always printed whole.

use crate::diag::{Diagnostics, SourceMap};

/// The compact text of `diags`' warnings, or `None` when it is not to be used: an error among
/// them (everything is printed whole then), or no warning at all.
pub(crate) fn compact(map: &SourceMap, diags: &Diagnostics, color: bool) -> Option<String> {
    if diags.has_errors() || diags.is_empty() {
        return None;
    }
    let (bold_yellow, reset) = if color {
        ("\x1b[1m\x1b[33m", "\x1b[0m")
    } else {
        ("", "")
    };
    let mut s = format!("\n{bold_yellow}Warnings:{reset}\n\n");
    // The same warning about several places is one line, with how many more (Terraform
    // consolidates them so).
    let mut groups: Vec<(&crate::diag::Diagnostic, usize)> = Vec::new();
    for d in diags {
        match groups.iter_mut().find(|(g, _)| g.summary == d.summary) {
            Some((_, n)) => *n += 1,
            None => groups.push((d, 1)),
        }
    }
    for (d, n) in groups {
        s.push_str(&format!("- {}\n", d.summary));
        match (&d.span, n) {
            (Some(span), 1) => {
                let p = map.pos(span.file, span.start);
                let file = map.path_at(span.file, span.start).display();
                s.push_str(&format!("  on {file} line {}\n", p.line));
            }
            (Some(span), n) => {
                let p = map.pos(span.file, span.start);
                let file = map.path_at(span.file, span.start).display();
                s.push_str(&format!(
                    "  on {file} line {} (and {} more)\n",
                    p.line,
                    n - 1
                ));
            }
            (None, 1) => {}
            (None, n) => s.push_str(&format!("  ({n} occurrences of this warning)\n")),
        }
    }
    s.push_str("\nTo see the full warning notes, run Cairn without -compact-warnings.\n");
    Some(s)
}
