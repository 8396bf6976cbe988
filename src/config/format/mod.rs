//! Terraform's canonical format (`terraform fmt`, 1.11): hclwrite's token-level layout
//! (`layout.rs`) over `hclsyntax`'s tokens (`lexer.rs`), after the rewrites Terraform's `fmt`
//! command makes to the tree (`rewrite.rs`): block labels quoted, `"${x}"` unwrapped, legacy
//! `type = "string"` in `variable` blocks. Only native syntax; a file must parse first (with
//! hcl-edit, whose errors are worded as Terraform's), or it is not touched.

mod layout;
mod lexer;
mod rewrite;

use super::parse::{parse_for_format, SyntaxError};
use layout::WTok;
use std::borrow::Cow;

/// The files `fmt` formats, by how their names end (`terraform fmt`'s list in 1.11).
pub(crate) const EXTENSIONS: &[&str] = &[".tf", ".tfvars", ".tftest.hcl", ".tfmock.hcl"];

/// Formats a whole file. A syntax error is returned instead (byte range, summary, detail),
/// and the file is left as it is.
pub(crate) fn format_source(src: &str) -> Result<String, SyntaxError> {
    let bom = if src.starts_with('\u{feff}') { 3 } else { 0 };
    let body = parse_for_format(&src[bom..])
        .map_err(|(s, e, summary, detail)| (s + bom, e + bom, summary, detail))?;
    let (tokens, open_heredoc) = lexer::lex(src);
    if open_heredoc {
        // Where Terraform points: the heredoc's last line.
        let last = tokens.len().saturating_sub(2);
        let (start, end) = tokens.get(last).map_or((0, 0), |t| (t.start, t.end));
        let end = src[start..end].trim_end().len() + start;
        return Err((
            start,
            end.max(start),
            "Unterminated template string",
            "No closing marker was found for the string.".into(),
        ));
    }
    let edits = rewrite::edits(src, bom, &tokens, &body);

    // The writer's tokens: the source's, with the edited ranges replaced. Spaces are those
    // of the source (hclwrite counts bytes); `layout::format` recomputes all but the last.
    let mut out: Vec<WTok<'_>> = Vec::with_capacity(tokens.len() + 8);
    let mut edits = edits.into_iter().peekable();
    let mut prev_end = 0;
    let mut i = 0;
    while i < tokens.len() {
        if let Some(edit) = edits.next_if(|e| e.from == i) {
            // Every edit replaces at least one token.
            out.extend(edit.with);
            prev_end = tokens[edit.to - 1].end;
            i = edit.to;
            continue;
        }
        let t = tokens[i];
        out.push(WTok {
            ty: t.ty,
            text: Cow::Borrowed(&src[t.start..t.end]),
            spaces: t.start.saturating_sub(prev_end),
        });
        prev_end = t.end;
        i += 1;
    }
    layout::format(&mut out);

    let mut text = String::with_capacity(src.len() + src.len() / 8);
    for t in &out {
        for _ in 0..t.spaces {
            text.push(' ');
        }
        text.push_str(&t.text);
    }
    Ok(text)
}

#[cfg(test)]
mod tests;
