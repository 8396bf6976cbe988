//! The rewrites `terraform fmt` makes before laying tokens out (`internal/command/fmt.go`):
//! in every body, each attribute's expression goes through `formatValueExpr` (`"${x}"` is
//! `x`), except `type` in a top-level `variable` block, which goes through `formatTypeExpr`
//! (`"string"` is `string`, `list` is `list(any)`); each block's labels are written again as
//! quoted strings (`SetLabels(Labels())`), which drops comments among them.

use super::layout::WTok;
use super::lexer::{Tok, Token};
use hcl_edit::structure::{BlockLabel, Body, Structure};
use hcl_edit::Span as _;
use std::borrow::Cow;

/// Tokens `from..to` (indices into the source's tokens) are written as `with`.
pub(super) struct Edit<'a> {
    pub(super) from: usize,
    pub(super) to: usize,
    pub(super) with: Vec<WTok<'a>>,
}

/// The edits for a file, in token order. `bom`: bytes before the text hcl-edit parsed.
pub(super) fn edits<'a>(src: &'a str, bom: usize, toks: &[Token], body: &Body) -> Vec<Edit<'a>> {
    let mut w = Walker {
        src,
        bom,
        toks,
        edits: Vec::new(),
    };
    w.body(body, &mut Vec::new());
    // Each edit replaces at least one token (a span that covers none is left alone).
    w.edits.retain(|e| e.to > e.from);
    w.edits.sort_by_key(|e| e.from);
    w.edits
}

struct Walker<'a, 't> {
    src: &'a str,
    bom: usize,
    toks: &'t [Token],
    edits: Vec<Edit<'a>>,
}

fn new_tok(ty: Tok, text: &'static str) -> WTok<'static> {
    WTok {
        ty,
        text: Cow::Borrowed(text),
        spaces: 0,
    }
}

impl<'a> Walker<'a, '_> {
    /// hclwrite's `partitionTokens`: the tokens starting inside a byte range.
    fn range(&self, span: Option<std::ops::Range<usize>>) -> Option<(usize, usize)> {
        let span = span?;
        let (s, e) = (span.start + self.bom, span.end + self.bom);
        let from = self.toks.partition_point(|t| t.start < s);
        let to = self.toks.partition_point(|t| t.start < e);
        Some((from, to))
    }

    fn source_toks(&self, from: usize, to: usize) -> Vec<WTok<'a>> {
        self.toks[from..to]
            .iter()
            .map(|t| WTok {
                ty: t.ty,
                text: Cow::Borrowed(&self.src[t.start..t.end]),
                spaces: 0,
            })
            .collect()
    }

    fn body(&mut self, body: &Body, in_blocks: &mut Vec<String>) {
        for s in body.iter() {
            match s {
                Structure::Attribute(a) => {
                    let Some((from, to)) = self.range(a.value.span()) else {
                        continue;
                    };
                    let is_type = in_blocks.len() == 1
                        && in_blocks[0] == "variable"
                        && a.key.as_str() == "type";
                    let kinds: Vec<Tok> = self.toks[from..to].iter().map(|t| t.ty).collect();
                    let new = if is_type {
                        self.type_expr(from, &kinds)
                    } else {
                        self.value_expr(from, &kinds)
                    };
                    if let Some(with) = new {
                        self.edits.push(Edit { from, to, with });
                    }
                }
                Structure::Block(b) => {
                    self.labels(b);
                    in_blocks.push(b.ident.as_str().to_string());
                    self.body(&b.body, in_blocks);
                    in_blocks.pop();
                }
            }
        }
    }

    /// `SetLabels(Labels())`: every label quoted; what lay between the type name and the last
    /// label (comments) is dropped. A quoted label that is not one literal piece (`"a$b"`,
    /// `"a$${b}"`: hclsyntax cuts those in several) is not a label to hclwrite and is lost,
    /// as Terraform loses it.
    fn labels(&mut self, b: &hcl_edit::structure::Block) {
        let Some(last) = b.labels.last() else {
            return;
        };
        let (Some((type_idx, _)), Some((_, end))) =
            (self.range(b.ident.span()), self.range(last.span()))
        else {
            return;
        };
        let mut with = Vec::new();
        for label in &b.labels {
            let Some((s, e)) = self.range(label.span()) else {
                continue;
            };
            let kinds: Vec<Tok> = self.toks[s..e].iter().map(|t| t.ty).collect();
            let value: Option<Cow<'_, str>> = match (label, kinds.as_slice()) {
                (BlockLabel::Ident(i), [Tok::Ident]) => Some(Cow::Borrowed(i.as_str())),
                (BlockLabel::String(v), [Tok::OQuote, Tok::QuotedLit, Tok::CQuote]) => {
                    Some(Cow::Borrowed(v.as_str()))
                }
                (_, [Tok::OQuote, Tok::CQuote]) => Some(Cow::Borrowed("")),
                _ => None,
            };
            let Some(value) = value else {
                continue;
            };
            with.push(new_tok(Tok::OQuote, "\""));
            let escaped = escape_quoted(&value);
            if !escaped.is_empty() {
                with.push(WTok {
                    ty: Tok::QuotedLit,
                    text: Cow::Owned(escaped),
                    spaces: 0,
                });
            }
            with.push(new_tok(Tok::CQuote, "\""));
        }
        // When every label is lost, the tokens go and nothing replaces them.
        self.edits.push(Edit {
            from: type_idx + 1,
            to: end,
            with,
        });
    }

    /// `formatTypeExpr`: `list`/`map`/`set` alone gain `(any)`; the quoted types of Terraform
    /// 0.11 become `string`, `list(string)`, `map(string)`.
    fn type_expr(&self, from: usize, kinds: &[Tok]) -> Option<Vec<WTok<'a>>> {
        let text = |i: usize| &self.src[self.toks[from + i].start..self.toks[from + i].end];
        let call = |name: &'static str, arg: &'static str| {
            vec![
                new_tok(Tok::Ident, name),
                new_tok(Tok::OParen, "("),
                new_tok(Tok::Ident, arg),
                new_tok(Tok::CParen, ")"),
            ]
        };
        match kinds {
            [Tok::Ident] => match text(0) {
                "list" => Some(call("list", "any")),
                "map" => Some(call("map", "any")),
                "set" => Some(call("set", "any")),
                _ => None,
            },
            [Tok::OQuote, Tok::QuotedLit, Tok::CQuote] => match text(1) {
                "string" => Some(vec![new_tok(Tok::Ident, "string")]),
                "list" => Some(call("list", "string")),
                "map" => Some(call("map", "string")),
                _ => None,
            },
            _ => None,
        }
    }

    /// `formatValueExpr`: a quoted template that is one interpolation and nothing else is
    /// unwrapped; newlines just inside it are trimmed, and a result still on several lines
    /// is parenthesized unless it already is.
    fn value_expr(&self, from: usize, kinds: &[Tok]) -> Option<Vec<WTok<'a>>> {
        let n = kinds.len();
        if n < 5
            || kinds[0] != Tok::OQuote
            || kinds[1] != Tok::TemplateInterp
            || kinds[n - 2] != Tok::TemplateSeqEnd
            || kinds[n - 1] != Tok::CQuote
        {
            return None;
        }
        let inside = &kinds[2..n - 2];
        let mut quotes = 0i32;
        for k in inside {
            match k {
                Tok::OQuote => quotes += 1,
                Tok::CQuote => quotes -= 1,
                _ if quotes > 0 => {}
                Tok::TemplateInterp | Tok::TemplateSeqEnd | Tok::QuotedLit => return None,
                _ => {}
            }
        }
        let mut s = 2;
        let mut e = n - 2;
        while s < e && kinds[s] == Tok::Newline {
            s += 1;
        }
        while e > s && kinds[e - 1] == Tok::Newline {
            e -= 1;
        }
        let trimmed = &kinds[s..e];
        let mut multi = false;
        let mut lead_paren = false;
        let mut trail_paren = false;
        for (i, k) in trimmed.iter().enumerate() {
            if i == 0 && *k == Tok::OParen {
                lead_paren = true;
            } else if *k == Tok::Newline {
                multi = true;
            } else if i == trimmed.len() - 1 && *k == Tok::CParen {
                trail_paren = true;
            }
        }
        let mut out = Vec::with_capacity(trimmed.len() + 2);
        let wrap = multi && !(lead_paren && trail_paren);
        if wrap {
            out.push(new_tok(Tok::OParen, "("));
        }
        out.extend(self.source_toks(from + s, from + e));
        if wrap {
            out.push(new_tok(Tok::CParen, ")"));
        }
        Some(out)
    }
}

/// hclwrite's `escapeQuotedStringLit`: a string as the inside of a quoted literal.
fn escape_quoted(s: &str) -> String {
    let mut buf = String::with_capacity(s.len());
    for (i, c) in s.char_indices() {
        match c {
            '\n' => buf.push_str("\\n"),
            '\r' => buf.push_str("\\r"),
            '\t' => buf.push_str("\\t"),
            '"' => buf.push_str("\\\""),
            '\\' => buf.push_str("\\\\"),
            '$' | '%' => {
                buf.push(c);
                if s[i + 1..].starts_with('{') {
                    buf.push(c);
                }
            }
            c if !is_go_printable(c) => {
                let n = c as u32;
                if n < 65536 {
                    buf.push_str(&format!("\\u{n:04x}"));
                } else {
                    buf.push_str(&format!("\\U{n:08x}"));
                }
            }
            c => buf.push(c),
        }
    }
    buf
}

/// Go's `unicode.IsPrint`, near enough: letters, marks, numbers, punctuation, symbols and the
/// ASCII space; control, format, separator (other than U+0020) and unassigned characters not.
fn is_go_printable(c: char) -> bool {
    if c == ' ' {
        return true;
    }
    if c.is_control() || c.is_whitespace() {
        return false;
    }
    // Format characters (Cf) that commonly appear: zero-width and direction marks, BOM.
    !matches!(c as u32, 0xad | 0x600..=0x605 | 0x61c | 0x6dd | 0x70f | 0x200b..=0x200f
        | 0x202a..=0x202e | 0x2060..=0x2064 | 0x2066..=0x206f | 0xfeff | 0xfff9..=0xfffb
        | 0xe000..=0xf8ff | 0xf0000..=0x10ffff)
}
