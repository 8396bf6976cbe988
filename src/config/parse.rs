//! Parsing a configuration file with hcl-edit: a large file in pieces on all cores, cut where
//! top-level blocks end (`parse_file`), and syntax errors recovered from and worded as
//! Terraform words them, so one mistake does not hide the rest of the file.

use cairn_state::quote;
use hcl_edit::structure::{Body, Structure};

/// Parses a file body for evaluation; a syntax error is its byte offset and message.
///
/// Lean (`hcl_edit::parser::parse_body_lean`, our fork's): no whitespace or comments are
/// kept. A loaded configuration is evaluated and its spans shown, never written back, and
/// the decor was a third of its syntax trees (a boxed string for every space between two
/// tokens); `cairn fmt` parses with decor (`parse_for_format`).
fn parse_body(text: &str) -> Result<Body, (usize, String)> {
    parse_body_with(text, hcl_edit::parser::parse_body_lean)
}

fn parse_body_with(
    text: &str,
    parser: fn(&str) -> Result<Body, hcl_edit::parser::Error>,
) -> Result<Body, (usize, String)> {
    // hcl-edit is not expected to panic, but a parser bug must not take the whole run down:
    // a panic becomes a syntax error at the start of the file.
    let r = std::panic::catch_unwind(|| parser(text));
    match r {
        Ok(Ok(mut body)) => {
            compact(&mut body);
            Ok(body)
        }
        Ok(Err(e)) => {
            // hcl-edit's offset can fall inside a multi-byte character: snap to its start.
            let mut at = e.location().offset().min(text.len());
            while !text.is_char_boundary(at) {
                at -= 1;
            }
            Err((at, e.message().to_string()))
        }
        Err(_) => Err((0, "The file could not be parsed.".into())),
    }
}

/// Replaces each top-level structure of a parsed body with its copy. The parser grows every
/// vector it fills by doubling, so a block's body holding one argument keeps room for four
/// (a `Structure` is a few hundred bytes), and so do templates and traversals; a copy is
/// sized exactly (`Vec::clone`). The syntax trees live as long as the configuration, for the
/// whole run: at 100,000 small resources this is about a third of their memory. Done here,
/// on the parsing threads, one structure at a time, so it never holds two whole files.
fn compact(body: &mut Body) {
    for i in 0..body.len() {
        if let Some(s) = body.get_mut(i) {
            *s = s.clone();
        }
    }
}

/// Files at least this large are parsed in pieces on several threads (see `parse_file`).
const PARALLEL_PARSE_MIN: usize = 128 * 1024;

/// Parses a file into its top-level structures, as one body or as consecutive pieces.
///
/// A large file is cut into one piece per available core, each cut right after a `}` that
/// stands alone at the start of a line (where a top-level block ends in formatted HCL), and
/// the pieces are parsed at once on scoped threads. A piece other than the first is parsed
/// behind as many spaces as the bytes before it, so every span is the span in the whole
/// file. The pieces are kept only when every piece parses and none has a top-level argument:
/// a piece then ends exactly where one top-level structure ends and the next begins (a cut
/// inside a block, string, heredoc or comment leaves the piece before it unterminated, a
/// syntax error), so the pieces' structures are those of the whole file. Otherwise — a cut
/// in the wrong place, or any syntax error at all — the whole file is parsed again as one,
/// so diagnostics are exactly those of a sequential parse.
pub(super) fn parse_file(text: &str) -> (Vec<Body>, Vec<SyntaxError>) {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    if let Some(bodies) = parse_in_pieces(text, threads) {
        return (bodies, Vec::new());
    }
    let (body, errors) = parse_recovering(text);
    if body.is_some() {
        return (body.into_iter().collect(), errors);
    }
    // A syntax error hcl-edit cannot go past: parse each top-level block on its own, so the
    // errors of every block are reported and the blocks that parse are still checked.
    let starts = block_starts(text);
    if starts.len() <= 2 {
        return (Vec::new(), errors);
    }
    let mut bodies = Vec::new();
    let mut all = Vec::new();
    let mid = (starts.len() - 1) / 2;
    parse_halves(text, &starts[..=mid], &mut bodies, &mut all);
    parse_halves(text, &starts[mid..], &mut bodies, &mut all);
    (bodies, all)
}

/// Parses the blocks between the first and last of `starts` (behind padding, so spans are
/// the file's): all at once when they parse, else each half again, down to single blocks
/// whose errors are reported. A few parses per broken block, not one per block.
fn parse_halves(
    text: &str,
    starts: &[usize],
    bodies: &mut Vec<Body>,
    errors: &mut Vec<SyntaxError>,
) {
    let (start, end) = (starts[0], starts[starts.len() - 1]);
    let mut padded = String::with_capacity(end);
    padded.extend(std::iter::repeat_n(' ', start));
    padded.push_str(&text[start..end]);
    let (body, errs) = parse_recovering(&padded);
    if body.is_some() || starts.len() <= 2 {
        errors.extend(errs);
        bodies.extend(body);
        return;
    }
    let mid = (starts.len() - 1) / 2;
    parse_halves(text, &starts[..=mid], bodies, errors);
    parse_halves(text, &starts[mid..], bodies, errors);
}

/// `0`, the start of every line that begins a top-level block (a block type at the start of
/// the line, then a space, a quote or a brace), and the length of `text`.
fn block_starts(text: &str) -> Vec<usize> {
    const TOP: &[&str] = &[
        "resource",
        "data",
        "module",
        "variable",
        "output",
        "locals",
        "provider",
        "terraform",
        "moved",
        "import",
        "removed",
        "check",
    ];
    let mut out = vec![0];
    let mut at = 0;
    for line in text.split_inclusive('\n') {
        let starts_block = TOP.iter().any(|t| {
            line.strip_prefix(t)
                .is_some_and(|rest| rest.starts_with([' ', '"', '{']))
        });
        if starts_block && at > 0 {
            out.push(at);
        }
        at += line.len();
    }
    out.push(text.len());
    out.dedup();
    out
}

/// The parallel half of `parse_file`: `None` when the file is not cut (too small, no cut
/// point) or when a piece does not parse cleanly.
fn parse_in_pieces(text: &str, pieces: usize) -> Option<Vec<Body>> {
    let cuts = piece_cuts(text, pieces);
    if cuts.len() <= 2 {
        return None;
    }
    std::thread::scope(|scope| {
        let handles: Vec<_> = cuts
            .windows(2)
            .map(|w| {
                let (start, end) = (w[0], w[1]);
                scope.spawn(move || parse_piece(text, start, end))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().ok().flatten())
            .collect()
    })
}

/// Where `parse_file` cuts a file into `pieces` parts: `0`, the cut points, and the length.
/// Only `0` and the length for a small file or when no cut point is found.
fn piece_cuts(text: &str, pieces: usize) -> Vec<usize> {
    let mut cuts = vec![0];
    if text.len() >= PARALLEL_PARSE_MIN {
        for i in 1..pieces {
            let from = (text.len() * i / pieces).max(*cuts.last().unwrap_or(&0));
            let Some(cut) = next_block_end(text, from) else {
                break;
            };
            cuts.push(cut);
        }
    }
    cuts.push(text.len());
    cuts.dedup();
    cuts
}

/// The first position at or after `from` that looks like the start of a top-level block in
/// formatted HCL: just after a line that is only `}`, followed by blank or comment lines and
/// then a line that starts with a top-level block type and a space. A guess: `parse_file`
/// checks it by parsing.
fn next_block_end(text: &str, from: usize) -> Option<usize> {
    const TOP: &[&str] = &[
        "resource ",
        "data ",
        "module ",
        "variable ",
        "output ",
        "locals ",
        "provider ",
        "terraform ",
    ];
    let mut at = from;
    while let Some(i) = text[at..].find("\n}") {
        let brace = at + i + 1;
        at = brace + 1;
        let rest = &text[at..];
        let eol = if rest.starts_with('\n') {
            1
        } else if rest.starts_with("\r\n") {
            2
        } else {
            continue;
        };
        let cut = at + eol;
        let mut line_start = cut;
        loop {
            let line = &text[line_start..];
            let trimmed = line.trim_start_matches([' ', '\t']);
            if trimmed.starts_with('\n') || trimmed.starts_with("\r\n") {
                line_start += line.find('\n').map_or(line.len(), |n| n + 1);
            } else if trimmed.starts_with('#') || trimmed.starts_with("//") {
                match line.find('\n') {
                    Some(n) => line_start += n + 1,
                    None => break,
                }
            } else {
                if TOP.iter().any(|t| line.starts_with(t)) {
                    return Some(cut);
                }
                break;
            }
        }
    }
    None
}

/// Parses `text[start..end]` as a body whose spans are those in `text`; `None` on any syntax
/// error or top-level argument (see `parse_file`).
fn parse_piece(text: &str, start: usize, end: usize) -> Option<Body> {
    let body = if start == 0 {
        parse_body(&text[..end]).ok()?
    } else {
        let mut padded = String::with_capacity(end);
        padded.extend(std::iter::repeat_n(' ', start));
        padded.push_str(&text[start..end]);
        parse_body(&padded).ok()?
    };
    if body.iter().any(Structure::is_attribute) {
        return None;
    }
    // The padding would be the first structure's leading whitespace, but a lean parse keeps
    // no whitespace (`parse_body`): the pieces' structures are the whole file's as they are.
    Some(body)
}

/// A syntax problem: byte range, summary and detail.
pub(super) type SyntaxError = (usize, usize, &'static str, String);

/// Parses one file for `cairn fmt`: its body, or the first syntax error worded as Terraform's.
pub(super) fn parse_for_format(text: &str) -> Result<Body, SyntaxError> {
    let (offset, message) = match parse_body_with(text, hcl_edit::parser::parse_body) {
        Ok(body) => return Ok(body),
        Err(e) => e,
    };
    let offset = offset.min(text.len());
    if message.contains("expected `=` or `:`") {
        // An object key whose `=` is not on its line: Terraform points after the key.
        let key_end = text[..offset].trim_end().len();
        return Err((
            key_end,
            offset.max(key_end),
            "Missing attribute value",
            "Expected an attribute value, introduced by an equals sign (\"=\").".into(),
        ));
    }
    Err(describe_syntax_error(text, offset, &message))
}

/// Parses a file body. hcl-edit stops at the first error; one kind is recovered from: an
/// argument set twice is reported, blanked out (to the end of its line) and the file parsed
/// again, so the rest of the file is still checked.
fn parse_recovering(text: &str) -> (Option<Body>, Vec<SyntaxError>) {
    let mut work = text.to_string();
    let mut errors: Vec<SyntaxError> = Vec::new();
    for _ in 0..32 {
        let (offset, message) = match parse_body(&work) {
            Ok(body) => return (Some(body), errors),
            Err(e) => e,
        };
        let offset = offset.min(work.len());
        if !message.contains("redefined attribute") {
            if errors.is_empty() {
                errors.push(describe_syntax_error(&work, offset, &message));
            } else if let Some(last) = errors.last_mut() {
                // A blanked-out argument may have spanned lines; what follows is not checked.
                last.3
                    .push_str(" The rest of this file could not be checked.");
            }
            return (None, errors);
        }
        let key: String = work[offset..]
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == '-')
            .collect();
        errors.push((
            offset,
            offset + key.len().max(1),
            "Attribute redefined",
            format!(
                "The argument {} was already set in this block. Each argument may be set only \
                 once.",
                quote(&key)
            ),
        ));
        let line_end = work[offset..]
            .find('\n')
            .map(|i| offset + i)
            .unwrap_or(work.len());
        // Keep byte offsets stable: as many spaces as bytes.
        let spaces = " ".repeat(line_end - offset);
        work.replace_range(offset..line_end, &spaces);
    }
    (None, errors)
}

/// Words a parse error as Terraform would, where hcl-edit's message is terse: unclosed blocks,
/// unterminated strings, quoted argument names, junk where an argument belongs.
fn describe_syntax_error(text: &str, offset: usize, message: &str) -> SyntaxError {
    let one = |at: usize| -> usize {
        text[at.min(text.len())..]
            .chars()
            .next()
            .map(|c| at + c.len_utf8())
            .unwrap_or(at)
    };
    let rest_is_blank = text[offset..].trim().is_empty();
    let line_end = text[offset..]
        .find('\n')
        .map(|i| offset + i)
        .unwrap_or(text.len());
    let line = &text[offset..line_end];
    let m = message.to_ascii_lowercase();
    if m.contains("block body") && rest_is_blank {
        // Point at the opening brace that is never closed, as Terraform does.
        let at = unclosed_brace(text).unwrap_or(offset);
        return (
            at,
            one(at),
            "Unclosed configuration block",
            "There is no closing brace for this block before the end of the file. This may be \
             caused by incorrect brace nesting elsewhere in this file."
                .into(),
        );
    }
    if m.contains("heredoc end delimiter") {
        return (
            offset,
            one(offset),
            "Unterminated template string",
            "No closing marker was found for the heredoc: its delimiter must stand on a line of \
             its own."
                .into(),
        );
    }
    if m.starts_with("expected newline") {
        return (
            offset,
            one(offset),
            "Missing newline after argument",
            "An argument definition must end with a newline.".into(),
        );
    }
    if m.starts_with("invalid expression") {
        return (
            offset,
            one(offset),
            "Invalid expression",
            "Expected the start of an expression, but found an invalid expression token.".into(),
        );
    }
    if m.starts_with("unexpected token") || m.contains("block body") {
        if let Some(after) = line.strip_prefix('"') {
            let close = after.find('"').map(|i| offset + i + 2).unwrap_or(line_end);
            return (
                offset,
                close,
                "Invalid argument name",
                "Argument names must not be quoted.".into(),
            );
        }
        // An odd number of quotes on the line: a string that never ends.
        if line.matches('"').count() % 2 == 1 {
            let q = line.find('"').map(|i| offset + i).unwrap_or(offset);
            return (
                q,
                one(q),
                "Unterminated template string",
                "No closing marker was found for the string.".into(),
            );
        }
        // `name = ...` whose value does not parse (an unclosed bracket, a dangling `.`).
        let trimmed = line.trim_start();
        let name_len = trimmed
            .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == '-'))
            .unwrap_or(trimmed.len());
        if name_len > 0 && trimmed[name_len..].trim_start().starts_with('=') {
            let name = &trimmed[..name_len];
            let eq = offset
                + (line.len() - trimmed.len())
                + line[line.len() - trimmed.len()..].find('=').unwrap_or(0);
            let value =
                eq + 1 + text[eq + 1..line_end].len() - text[eq + 1..line_end].trim_start().len();
            return (
                value,
                one(value),
                "Invalid expression",
                format!(
                    "The value of the argument {} could not be parsed: look for an unclosed \
                     bracket, brace, parenthesis or string, or an incomplete attribute access.",
                    quote(name)
                ),
            );
        }
        return (
            offset,
            one(offset),
            "Argument or block definition required",
            "An argument or block definition is required here.".into(),
        );
    }
    (
        offset,
        one(offset),
        "Invalid syntax",
        parse_message(message),
    )
}

/// The last `{` that is never closed, skipping strings, comments and heredocs (a light scan,
/// only used to place an "unclosed block" error).
fn unclosed_brace(text: &str) -> Option<usize> {
    let b = text.as_bytes();
    let mut open: Vec<usize> = Vec::new();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'"' => {
                i += 1;
                while i < b.len() && b[i] != b'"' && b[i] != b'\n' {
                    i += if b[i] == b'\\' { 2 } else { 1 };
                }
            }
            b'#' => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            b'/' if b.get(i + 1) == Some(&b'/') => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                i += 2;
                while i + 1 < b.len() && !(b[i] == b'*' && b[i + 1] == b'/') {
                    i += 1;
                }
                i += 1;
            }
            b'<' if b.get(i + 1) == Some(&b'<') => {
                // A heredoc: skip to the line that holds only its delimiter.
                let start = i + 2 + usize::from(b.get(i + 2) == Some(&b'-'));
                let end = text[start.min(text.len())..]
                    .find(|c: char| !(c.is_alphanumeric() || c == '_'))
                    .map(|n| start + n)
                    .unwrap_or(text.len());
                let delim = &text[start.min(end)..end];
                if delim.is_empty() {
                    i += 2;
                    continue;
                }
                let mut pos = text[end..]
                    .find('\n')
                    .map(|n| end + n + 1)
                    .unwrap_or(text.len());
                loop {
                    let line_end = text[pos..]
                        .find('\n')
                        .map(|n| pos + n)
                        .unwrap_or(text.len());
                    if text[pos..line_end].trim() == delim || line_end >= text.len() {
                        i = line_end;
                        break;
                    }
                    pos = line_end + 1;
                }
            }
            b'{' => open.push(i),
            b'}' => {
                open.pop();
            }
            _ => {}
        }
        i += 1;
    }
    open.last().copied()
}

/// hcl-edit's message as a sentence.
fn parse_message(m: &str) -> String {
    let mut s = m.trim().to_string();
    if let Some(c) = s.get(0..1) {
        s.replace_range(0..1, &c.to_uppercase());
    }
    if !s.ends_with('.') {
        s.push('.');
    }
    s
}

#[cfg(test)]
mod piece_tests {
    //! `parse_file`'s pieces must be exactly the whole file's structures (spans and
    //! whitespace included), and a cut in the wrong place must fall back to one parse.
    use super::*;

    /// A resource whose formatting puts `}` alone at the start of lines inside it: in a
    /// heredoc, a comment and an unindented nested block.
    fn tricky(i: usize) -> String {
        format!(
            "# resource {i}\nresource \"x\" \"r{i}\" {{\n  doc = <<EOT\n}}\nnot = \"a block\"\n}}\nEOT\n  /*\n}}\n  */\n  nested {{\n    v = \"${{x.r{i}.id}}-{i}\"\n}}\n  tags = {{ a = [1, 2] }}\n}}\n\n"
        )
    }

    fn debug_structures<'a>(bodies: impl IntoIterator<Item = &'a Body>) -> Vec<String> {
        bodies
            .into_iter()
            .flat_map(|b| b.iter())
            .map(|s| format!("{s:?}"))
            .collect()
    }

    #[test]
    fn pieces_are_the_whole_files_structures() {
        let text: String = (0..4000).map(tricky).collect();
        assert!(text.len() >= PARALLEL_PARSE_MIN);
        let whole = parse_body(&text).expect("the file parses");
        for n in [2, 3, 4, 7] {
            let pieces = parse_in_pieces(&text, n).expect("cut at block ends");
            assert!(pieces.len() > 1, "{n} pieces: not cut");
            assert_eq!(
                debug_structures(&pieces),
                debug_structures([&whole]),
                "{n} pieces"
            );
        }
        let (bodies, errors) = parse_file(&text);
        assert!(errors.is_empty());
        assert_eq!(debug_structures(&bodies), debug_structures([&whole]));
    }

    #[test]
    fn a_cut_inside_a_heredoc_falls_back_to_one_parse() {
        let filler: String = (0..1500).map(tricky).collect();
        // Inside the heredoc, lines that look exactly like a block's end and the next
        // block's start.
        let heredoc_lines: String = (0..20000)
            .map(|i| format!("line {i}\n}}\n\nresource \"x\" \"h{i}\" {{\n"))
            .collect();
        let text = format!(
            "{filler}resource \"x\" \"big\" {{\n  doc = <<EOT\n{heredoc_lines}EOT\n}}\n{filler}"
        );
        let mid = text.len() / 2;
        let heredoc_at = text.find("<<EOT\nline 0").expect("heredoc");
        assert!(heredoc_at < mid && mid < heredoc_at + heredoc_lines.len());
        assert!(parse_in_pieces(&text, 2).is_none());
        let whole = parse_body(&text).expect("the file parses");
        let (bodies, errors) = parse_file(&text);
        assert!(errors.is_empty());
        assert_eq!(debug_structures(&bodies), debug_structures([&whole]));
    }

    #[test]
    fn a_syntax_error_in_a_piece_is_reported_as_in_one_parse() {
        let mut text: String = (0..4000).map(tricky).collect();
        let at = text.len() * 3 / 4;
        let line = at + text[at..].find("  tags").expect("a tags line");
        text.insert_str(line, "  broken = = 1\n");
        let (bodies, errors) = parse_file(&text);
        // The error is the one a sequential parse finds, and the other blocks still load.
        assert_eq!(errors, parse_recovering(&text).1);
        assert_eq!(errors.len(), 1, "{errors:?}");
        let blocks: usize = bodies.iter().map(|b| b.iter().count()).sum();
        let whole: usize = (0..4000)
            .map(tricky)
            .map(|t| parse_body(&t).map_or(0, |b| b.iter().count()))
            .sum();
        assert_eq!(blocks, whole - 1);
    }
}

/// The sizes of the syntax tree's nodes the configuration keeps for the whole run (issue 31;
/// the vendored hcl-edit's PATCHES.md §4): an expression was 72 bytes because three of its
/// kinds held an array, an object and a formatted number inline, and every expression inline
/// (an attribute's value, a traversal's root and index, an interpolation) paid for them.
#[cfg(test)]
mod sizes {
    #[test]
    fn syntax_tree_nodes_stay_small() {
        use hcl_edit::expr::{Expression, Traversal, TraversalOperator};
        use hcl_edit::structure::Attribute;
        use hcl_edit::template::Element;
        use std::mem::size_of;
        assert_eq!(size_of::<Expression>(), 48);
        assert_eq!(size_of::<Attribute>(), 104);
        assert_eq!(size_of::<Traversal>(), 88);
        assert_eq!(size_of::<hcl_edit::Decorated<TraversalOperator>>(), 64);
        assert_eq!(size_of::<Element>(), 64);
    }
}
