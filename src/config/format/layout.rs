//! hclwrite's `format`: only the spaces before tokens change. Three passes over lines of
//! tokens (a line ends at a newline token or a `#`/`//` comment, which owns its newline):
//! indentation by the net count of open brackets, spaces between tokens by a table of rules,
//! and alignment of `=` and of trailing comments down runs of consecutive lines.

use super::lexer::Tok;
use std::borrow::Cow;
use unicode_segmentation::UnicodeSegmentation;

/// A token as the writer sees it: kind, text, and the spaces written before it.
#[derive(Clone, Debug)]
pub(crate) struct WTok<'a> {
    pub(crate) ty: Tok,
    pub(crate) text: Cow<'a, str>,
    pub(crate) spaces: usize,
}

impl WTok<'_> {
    fn is_newline(&self) -> bool {
        match self.ty {
            Tok::Newline => true,
            Tok::Comment => self.text.ends_with('\n'),
            _ => false,
        }
    }

    fn bracket_change(&self) -> i32 {
        bracket_change(self.ty)
    }

    /// Columns the token takes: its spaces and its grapheme clusters.
    fn columns(&self) -> usize {
        let t = &*self.text;
        let n = if t.is_ascii() {
            t.len() - t.matches("\r\n").count()
        } else {
            t.graphemes(true).count()
        };
        self.spaces + n
    }
}

pub(crate) fn bracket_change(ty: Tok) -> i32 {
    match ty {
        Tok::OBrace | Tok::OBrack | Tok::OParen | Tok::TemplateControl | Tok::TemplateInterp => 1,
        Tok::CBrace | Tok::CBrack | Tok::CParen | Tok::TemplateSeqEnd => -1,
        _ => 0,
    }
}

/// One line's cells, as index ranges into the token list: `lead` always, `assign` from a `=`
/// whose right-hand side closes its brackets on the line, `comment` a trailing comment.
#[derive(Clone, Copy, Default)]
struct Line {
    lead: (usize, usize),
    assign: Option<(usize, usize)>,
    comment: Option<usize>,
}

fn columns(toks: &[WTok<'_>], r: (usize, usize)) -> usize {
    toks[r.0..r.1].iter().map(WTok::columns).sum()
}

/// Sets every token's `spaces` for the canonical layout. The last token must be `Eof`; it
/// belongs to no line and keeps its spaces (hclwrite keeps a file's trailing blanks).
pub(crate) fn format(toks: &mut [WTok<'_>]) {
    let lines = lines_for_format(toks);
    format_indent(toks, &lines);
    format_spaces(toks, &lines);
    format_cells(toks, &lines);
}

fn lines_for_format(toks: &[WTok<'_>]) -> Vec<Line> {
    let mut lines = Vec::with_capacity(toks.len() / 4 + 1);
    let mut start = 0;
    for (i, t) in toks.iter().enumerate() {
        if t.ty == Tok::Eof {
            lines.push(Line {
                lead: (start, i),
                ..Line::default()
            });
            start = usize::MAX;
            break;
        }
        if t.is_newline() {
            lines.push(Line {
                lead: (start, i + 1),
                ..Line::default()
            });
            start = i + 1;
        }
    }
    if start != usize::MAX && start < toks.len() {
        lines.push(Line {
            lead: (start, toks.len()),
            ..Line::default()
        });
    }
    for line in &mut lines {
        let (s, mut e) = line.lead;
        if e == s {
            continue;
        }
        if e - s > 1 && toks[e - 1].ty == Tok::Comment {
            line.comment = Some(e - 1);
            e -= 1;
            line.lead = (s, e);
        }
        for i in s + 1..e {
            if toks[i].ty == Tok::Equal {
                let net: i32 = toks[i..e].iter().map(WTok::bracket_change).sum();
                if net == 0 {
                    line.assign = Some((i, e));
                    line.lead = (s, i);
                }
                break;
            }
        }
    }
    lines
}

fn format_indent(toks: &mut [WTok<'_>], lines: &[Line]) {
    let mut indents: Vec<i32> = Vec::with_capacity(10);
    for line in lines {
        let (s, e) = line.lead;
        if e == s {
            continue;
        }
        if toks[s].ty == Tok::Newline {
            toks[s].spaces = 0;
            continue;
        }
        let mut net = 0;
        for t in &toks[s..e] {
            net += t.bracket_change();
            if t.ty == Tok::OHeredoc {
                break;
            }
        }
        if let Some((a, b)) = line.assign {
            net += toks[a..b].iter().map(WTok::bracket_change).sum::<i32>();
        }
        if net > 0 {
            toks[s].spaces = 2 * indents.len();
            indents.push(net);
        } else {
            let mut closed = -net;
            while closed > 0 {
                let Some(top) = indents.last_mut() else {
                    break;
                };
                if closed > *top {
                    closed -= *top;
                    indents.pop();
                } else if closed < *top {
                    *top -= closed;
                    closed = 0;
                } else {
                    indents.pop();
                    closed = 0;
                }
            }
            toks[s].spaces = 2 * indents.len();
        }
    }
}

fn format_spaces(toks: &mut [WTok<'_>], lines: &[Line]) {
    for line in lines {
        let (s, e) = line.lead;
        space_run(toks, s, e);
        if let Some((a, b)) = line.assign {
            toks[a].spaces = 1;
            space_run(toks, a, b);
        }
    }
}

/// Spaces between consecutive tokens of one cell.
fn space_run(toks: &mut [WTok<'_>], s: usize, e: usize) {
    for i in s..e.saturating_sub(1) {
        let before = if i > s { Some(i - 1) } else { None };
        let space = space_after(toks, i, before, i + 1);
        toks[i + 1].spaces = usize::from(space);
    }
}

fn is_in_keyword(t: &WTok<'_>) -> bool {
    t.ty == Tok::Ident && t.text == "in"
}

/// hclwrite's `spaceAfterToken`: whether `subject` has a space after it, between `before`
/// (none at the start of a cell) and `after`.
fn space_after(toks: &[WTok<'_>], subject: usize, before: Option<usize>, after: usize) -> bool {
    let sub = &toks[subject];
    let aft = &toks[after];
    let (s, a) = (sub.ty, aft.ty);
    let b = before.map(|i| toks[i].ty);
    if a == Tok::Newline || a == Tok::Eof {
        return false;
    }
    if s == Tok::Ident && a == Tok::OParen {
        return false;
    }
    if (s == Tok::Ident && a == Tok::DoubleColon) || (s == Tok::DoubleColon && a == Tok::Ident) {
        return false;
    }
    if s == Tok::Dot || a == Tok::Dot {
        return false;
    }
    if a == Tok::Comma || a == Tok::Ellipsis {
        return false;
    }
    if s == Tok::Comma {
        return true;
    }
    if matches!(
        s,
        Tok::QuotedLit | Tok::StringLit | Tok::OQuote | Tok::OHeredoc
    ) || matches!(
        a,
        Tok::QuotedLit | Tok::StringLit | Tok::CQuote | Tok::CHeredoc
    ) {
        return false;
    }
    if is_in_keyword(sub) && b == Some(Tok::Ident) {
        return true;
    }
    if a == Tok::OBrack && (s == Tok::Ident || s == Tok::NumberLit || bracket_change(s) < 0) {
        return false;
    }
    if s == Tok::Bang {
        return false;
    }
    if s == Tok::Minus {
        // Negation (no space) when what comes before cannot end an expression.
        return !matches!(
            b,
            None | Some(
                Tok::OParen
                    | Tok::OBrace
                    | Tok::OBrack
                    | Tok::Equal
                    | Tok::Colon
                    | Tok::Comma
                    | Tok::Question
                    | Tok::Plus
                    | Tok::Star
                    | Tok::Slash
                    | Tok::Percent
                    | Tok::Minus
                    | Tok::EqualOp
                    | Tok::NotEqual
                    | Tok::Gt
                    | Tok::GtEq
                    | Tok::Lt
                    | Tok::LtEq
                    | Tok::And
                    | Tok::Or
                    | Tok::Bang
            )
        );
    }
    if s == Tok::OBrace || a == Tok::CBrace {
        return !(s == Tok::OBrace && a == Tok::CBrace);
    }
    if (s == Tok::TemplateInterp || s == Tok::TemplateControl) && a == Tok::OBrace {
        return true;
    }
    if s == Tok::CBrace && a == Tok::TemplateSeqEnd {
        return true;
    }
    if s == Tok::TemplateSeqEnd && (a == Tok::TemplateInterp || a == Tok::TemplateControl) {
        return false;
    }
    if bracket_change(s) > 0 {
        return false;
    }
    if bracket_change(a) < 0 {
        return false;
    }
    true
}

fn format_cells(toks: &mut [WTok<'_>], lines: &[Line]) {
    // `=` first: moving it moves the comments after it.
    let mut chain_start: Option<usize> = None;
    let mut max = 0;
    let close_assign = |toks: &mut [WTok<'_>], from: usize, to: usize, max: usize| {
        for line in &lines[from..to] {
            let cols = columns(toks, line.lead);
            if let Some((a, _)) = line.assign {
                toks[a].spaces = max - cols + 1;
            }
        }
    };
    for (i, line) in lines.iter().enumerate() {
        if line.assign.is_none() {
            if let Some(start) = chain_start.take() {
                close_assign(toks, start, i, max);
                max = 0;
            }
        } else {
            chain_start.get_or_insert(i);
            max = max.max(columns(toks, line.lead));
        }
    }
    if let Some(start) = chain_start.take() {
        close_assign(toks, start, lines.len(), max);
    }

    let width = |toks: &[WTok<'_>], line: &Line| {
        columns(toks, line.lead) + line.assign.map_or(0, |r| columns(toks, r))
    };
    let close_comment = |toks: &mut [WTok<'_>], from: usize, to: usize, max: usize| {
        for line in &lines[from..to] {
            let cols = width(toks, line);
            if let Some(c) = line.comment {
                toks[c].spaces = max - cols + 1;
            }
        }
    };
    max = 0;
    for (i, line) in lines.iter().enumerate() {
        if line.comment.is_none() {
            if let Some(start) = chain_start.take() {
                close_comment(toks, start, i, max);
                max = 0;
            }
        } else {
            chain_start.get_or_insert(i);
            max = max.max(width(toks, line));
        }
    }
    if let Some(start) = chain_start.take() {
        close_comment(toks, start, lines.len(), max);
    }
}
