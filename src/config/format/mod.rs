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
    let (tokens, open_heredoc) = lexer::lex(src);
    let token_error = token_error(src, &tokens, open_heredoc);
    let body = match parse_for_format(&src[bom..]) {
        Ok(body) => body,
        // Terraform reports the first error in the file: whichever of the two comes first.
        Err((s, e, summary, detail)) => {
            return Err(match token_error {
                Some(t) if t.0 <= s + bom => t,
                _ => (s + bom, e + bom, summary, detail),
            })
        }
    };
    if let Some(e) = token_error {
        return Err(e);
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

/// The syntax errors hclsyntax finds that hcl-edit lets pass, seen in the tokens: a heredoc
/// still open at the end, a quoted string broken over lines, a `.` with the line ending after
/// it where newlines count (outside parentheses, brackets and interpolations).
fn token_error(src: &str, tokens: &[lexer::Token], open_heredoc: bool) -> Option<SyntaxError> {
    use lexer::Tok;
    let mut open: Vec<Tok> = Vec::new();
    for (i, t) in tokens.iter().enumerate() {
        match t.ty {
            Tok::OParen
            | Tok::OBrack
            | Tok::OBrace
            | Tok::TemplateInterp
            | Tok::TemplateControl => open.push(t.ty),
            Tok::CParen | Tok::CBrack | Tok::CBrace | Tok::TemplateSeqEnd => {
                open.pop();
            }
            Tok::QuotedNewline => {
                // Where Terraform points: the literal the newline breaks.
                let at = match i.checked_sub(1).map(|j| tokens[j]) {
                    Some(p) if matches!(p.ty, Tok::QuotedLit | Tok::OQuote) => p.start,
                    _ => t.start,
                };
                return Some((
                    at,
                    t.start.max(at + 1),
                    "Invalid multi-line string",
                    "Quoted strings may not be split over multiple lines. To produce a multi-line \
                     string, either use the \\n escape to represent a newline character or use \
                     the \"heredoc\" multi-line template syntax."
                        .into(),
                ));
            }
            Tok::Dot => {
                let newline_next = tokens.get(i + 1).is_some_and(|n| {
                    n.ty == Tok::Newline
                        || (n.ty == Tok::Comment && src[n.start..n.end].ends_with('\n'))
                });
                let newlines_count = matches!(open.last(), None | Some(Tok::OBrace));
                if newline_next && newlines_count {
                    return Some((
                        t.start,
                        t.end,
                        "Invalid attribute name",
                        "An attribute name is required after a dot.".into(),
                    ));
                }
            }
            _ => {}
        }
    }
    if open_heredoc {
        // Where Terraform points: the heredoc's last line.
        let last = tokens.len().saturating_sub(2);
        let (start, end) = tokens.get(last).map_or((0, 0), |t| (t.start, t.end));
        let end = src[start..end].trim_end().len() + start;
        return Some((
            start,
            end.max(start),
            "Unterminated template string",
            "No closing marker was found for the string.".into(),
        ));
    }
    None
}

#[cfg(test)]
mod tests;
