//! HCL's native-syntax token stream, as `hclsyntax`'s scanner (`scan_tokens.rl`) cuts it:
//! the same token kinds, at the same boundaries, with the same template and heredoc modes.
//!
//! Why a lexer of our own rather than hcl-edit's: hcl-edit parses straight to a tree whose
//! whitespace and comments are "decor" strings; the canonical format is defined on
//! `hclsyntax`'s flat tokens (a `#` comment owns its newline, a heredoc line is one token,
//! `$${` is a literal piece of a quoted string, `}` closes an interpolation or a brace by the
//! brace count), and those boundaries decide spacing, line cells and label rewriting. The
//! syntax itself is still checked by hcl-edit's parser before a file is formatted.

/// A token kind: `hclsyntax.TokenType`, only as finely as formatting needs it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Tok {
    Newline,
    /// A comment; `#` and `//` comments include their line's newline.
    Comment,
    Ident,
    NumberLit,
    OBrace,
    CBrace,
    OBrack,
    CBrack,
    OParen,
    CParen,
    OQuote,
    CQuote,
    /// `<<EOT` or `<<-EOT` with its newline.
    OHeredoc,
    /// A heredoc's closing marker line (leading spaces included, newline not).
    CHeredoc,
    /// A literal piece of a quoted string.
    QuotedLit,
    /// A literal piece of a heredoc.
    StringLit,
    /// A newline inside a quoted string (a syntax error; kept for completeness).
    QuotedNewline,
    TemplateInterp,
    TemplateControl,
    TemplateSeqEnd,
    Dot,
    Comma,
    Ellipsis,
    Colon,
    DoubleColon,
    Question,
    Equal,
    Bang,
    Minus,
    Plus,
    Star,
    Slash,
    Percent,
    EqualOp,
    NotEqual,
    Lt,
    Gt,
    LtEq,
    GtEq,
    And,
    Or,
    FatArrow,
    /// Any other single character (`;`, `&`, …): never valid, but a token all the same.
    Other,
    Eof,
}

/// A token: its kind and byte range in the source.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Token {
    pub(crate) ty: Tok,
    pub(crate) start: usize,
    pub(crate) end: usize,
}

enum Mode {
    Main,
    Quoted,
    Heredoc {
        marker: (usize, usize),
        start_of_line: bool,
    },
}

/// Scans `src` (after a UTF-8 byte order mark, which is skipped) into tokens, ending with `Eof`,
/// and says whether a heredoc was still open at the end (its closing marker missing, or not
/// followed by a newline: an error in Terraform that hcl-edit lets pass).
pub(crate) fn lex(src: &str) -> (Vec<Token>, bool) {
    let mut lx = Lexer {
        b: src.as_bytes(),
        src,
        p: if src.starts_with('\u{feff}') { 3 } else { 0 },
        out: Vec::with_capacity(src.len() / 4),
        modes: vec![Mode::Main],
        braces: 0,
        ret_braces: Vec::new(),
    };
    lx.run();
    let open_heredoc = lx.modes.iter().any(|m| matches!(m, Mode::Heredoc { .. }));
    let n = lx.b.len();
    lx.out.push(Token {
        ty: Tok::Eof,
        start: n,
        end: n,
    });
    (lx.out, open_heredoc)
}

struct Lexer<'a> {
    b: &'a [u8],
    src: &'a str,
    p: usize,
    out: Vec<Token>,
    modes: Vec<Mode>,
    braces: i64,
    ret_braces: Vec<i64>,
}

impl Lexer<'_> {
    fn emit(&mut self, ty: Tok, start: usize, end: usize) {
        self.out.push(Token { ty, start, end });
        self.p = end;
    }

    fn at(&self, i: usize) -> u8 {
        self.b.get(i).copied().unwrap_or(0)
    }

    fn char_len(&self, i: usize) -> usize {
        self.src[i..].chars().next().map_or(1, char::len_utf8)
    }

    fn run(&mut self) {
        while self.p < self.b.len() {
            match self.modes.last() {
                Some(Mode::Main) | None => self.main(),
                Some(Mode::Quoted) => self.quoted(),
                Some(Mode::Heredoc { .. }) => self.heredoc(),
            }
        }
    }

    /// `${` or `%{` (with an optional `~`) at `p`: opens an interpolation or directive.
    fn template_open(&mut self, ty: Tok) {
        let p = self.p;
        let end = if self.at(p + 2) == b'~' { p + 3 } else { p + 2 };
        self.emit(ty, p, end);
        self.braces += 1;
        self.ret_braces.push(self.braces);
        if let Some(Mode::Heredoc { start_of_line, .. }) = self
            .modes
            .iter_mut()
            .rev()
            .find(|m| matches!(m, Mode::Heredoc { .. }))
        {
            *start_of_line = false;
        }
        self.modes.push(Mode::Main);
    }

    /// A `}` or `~}` at `p` that closes an interpolation (when the brace count says so).
    fn close_brace(&mut self, len: usize) {
        let p = self.p;
        if self.ret_braces.last() == Some(&self.braces) {
            self.emit(Tok::TemplateSeqEnd, p, p + len);
            self.braces -= 1;
            self.ret_braces.pop();
            self.modes.pop();
        } else {
            let ty = if len == 2 {
                Tok::TemplateSeqEnd
            } else {
                Tok::CBrace
            };
            self.emit(ty, p, p + len);
            self.braces -= 1;
        }
    }

    fn main(&mut self) {
        let p = self.p;
        let c = self.b[p];
        let next = self.at(p + 1);
        match c {
            b' ' | b'\t' => {
                let mut e = p;
                while matches!(self.at(e), b' ' | b'\t') {
                    e += 1;
                }
                self.p = e;
            }
            b'0'..=b'9' => {
                let e = self.number(p);
                self.emit(Tok::NumberLit, p, e);
            }
            b'#' => self.line_comment(p),
            b'/' if next == b'/' => self.line_comment(p),
            b'/' if next == b'*' => {
                let e = self.src[p + 2..]
                    .find("*/")
                    .map_or(self.b.len(), |i| p + 2 + i + 2);
                self.emit(Tok::Comment, p, e);
            }
            b'\n' => self.emit(Tok::Newline, p, p + 1),
            b'\r' if next == b'\n' => self.emit(Tok::Newline, p, p + 2),
            b'=' if next == b'=' => self.emit(Tok::EqualOp, p, p + 2),
            b'=' if next == b'>' => self.emit(Tok::FatArrow, p, p + 2),
            b'!' if next == b'=' => self.emit(Tok::NotEqual, p, p + 2),
            b'>' if next == b'=' => self.emit(Tok::GtEq, p, p + 2),
            b'<' if next == b'=' => self.emit(Tok::LtEq, p, p + 2),
            b'<' if next == b'<' && self.heredoc_intro(p).is_some() => {
                let (e, marker) = self.heredoc_intro(p).unwrap_or((p + 2, (p, p)));
                self.emit(Tok::OHeredoc, p, e);
                self.modes.push(Mode::Heredoc {
                    marker,
                    start_of_line: true,
                });
            }
            b'&' if next == b'&' => self.emit(Tok::And, p, p + 2),
            b'|' if next == b'|' => self.emit(Tok::Or, p, p + 2),
            b':' if next == b':' => self.emit(Tok::DoubleColon, p, p + 2),
            b'.' if next == b'.' && self.at(p + 2) == b'.' => self.emit(Tok::Ellipsis, p, p + 3),
            b'{' => {
                self.emit(Tok::OBrace, p, p + 1);
                self.braces += 1;
            }
            b'}' => self.close_brace(1),
            b'~' if next == b'}' => self.close_brace(2),
            b'"' => {
                self.emit(Tok::OQuote, p, p + 1);
                self.modes.push(Mode::Quoted);
            }
            _ => {
                let single = match c {
                    b'[' => Some(Tok::OBrack),
                    b']' => Some(Tok::CBrack),
                    b'(' => Some(Tok::OParen),
                    b')' => Some(Tok::CParen),
                    b'.' => Some(Tok::Dot),
                    b',' => Some(Tok::Comma),
                    b'*' => Some(Tok::Star),
                    b'/' => Some(Tok::Slash),
                    b'%' => Some(Tok::Percent),
                    b'+' => Some(Tok::Plus),
                    b'-' => Some(Tok::Minus),
                    b'=' => Some(Tok::Equal),
                    b'<' => Some(Tok::Lt),
                    b'>' => Some(Tok::Gt),
                    b'!' => Some(Tok::Bang),
                    b'?' => Some(Tok::Question),
                    b':' => Some(Tok::Colon),
                    _ => None,
                };
                if let Some(t) = single {
                    self.emit(t, p, p + 1);
                } else if let Some(e) = self.ident(p) {
                    self.emit(Tok::Ident, p, e);
                } else {
                    let n = self.char_len(p);
                    self.emit(Tok::Other, p, p + n);
                }
            }
        }
    }

    /// `NumberLit = digit ("" | (NLC - '.') | (NLC* (NLC - '.')))` with
    /// `NLC = digit | '.' | ('e'|'E') ('+'|'-')? digit`: the longest run not ending in `.`.
    fn number(&self, p: usize) -> usize {
        let mut i = p + 1;
        let mut last = i;
        loop {
            match self.at(i) {
                b'0'..=b'9' => {
                    i += 1;
                    last = i;
                }
                b'.' => i += 1,
                b'e' | b'E' => {
                    let mut j = i + 1;
                    if matches!(self.at(j), b'+' | b'-') {
                        j += 1;
                    }
                    if self.at(j).is_ascii_digit() {
                        i = j + 1;
                        last = i;
                    } else {
                        break;
                    }
                }
                _ => break,
            }
        }
        last
    }

    /// `Ident = (ID_Start | '_') (ID_Continue | '-')*`: its end, if one starts at `p`.
    fn ident(&self, p: usize) -> Option<usize> {
        let mut chars = self.src[p..].char_indices();
        let (_, first) = chars.next()?;
        if !(first == '_' || unicode_ident::is_xid_start(first)) {
            return None;
        }
        let mut end = p + first.len_utf8();
        for (i, c) in chars {
            if c == '-' || unicode_ident::is_xid_continue(c) {
                end = p + i + c.len_utf8();
            } else {
                break;
            }
        }
        Some(end)
    }

    /// `<<` `-`? Ident Newline at `p`: the token's end and the marker's range.
    fn heredoc_intro(&self, p: usize) -> Option<(usize, (usize, usize))> {
        let mut i = p + 2;
        if self.at(i) == b'-' {
            i += 1;
        }
        let e = self.ident(i)?;
        let nl = match (self.at(e), self.at(e + 1)) {
            (b'\n', _) => e + 1,
            (b'\r', b'\n') => e + 2,
            _ => return None,
        };
        Some((nl, (i, e)))
    }

    fn line_comment(&mut self, p: usize) {
        let e = self.src[p..].find('\n').map_or(self.b.len(), |i| p + i + 1);
        self.emit(Tok::Comment, p, e);
    }

    /// Inside `"…"`: literal pieces cut where `hclsyntax` cuts them (a `$` or `%` not opening
    /// a sequence is a piece of its own; `$${` and `%%{` are one piece), sequences, the end.
    fn quoted(&mut self) {
        let p = self.p;
        let c = self.b[p];
        let next = self.at(p + 1);
        match c {
            b'$' | b'%' if next == b'{' => self.template_open(if c == b'$' {
                Tok::TemplateInterp
            } else {
                Tok::TemplateControl
            }),
            b'$' | b'%' if next == c && self.at(p + 2) == b'{' => {
                let e = if self.at(p + 3) == b'~' { p + 4 } else { p + 3 };
                self.emit(Tok::QuotedLit, p, e);
            }
            b'$' | b'%' => self.emit(Tok::QuotedLit, p, p + 1),
            b'"' => {
                self.emit(Tok::CQuote, p, p + 1);
                self.modes.pop();
            }
            b'\r' | b'\n' => {
                let mut e = p;
                while matches!(self.at(e), b'\r' | b'\n') {
                    e += 1;
                }
                self.emit(Tok::QuotedNewline, p, e);
            }
            _ => {
                let mut e = p;
                loop {
                    match self.at(e) {
                        0 if e >= self.b.len() => break,
                        b'$' | b'%' | b'"' | b'\r' | b'\n' => break,
                        b'\\' => {
                            if e + 1 >= self.b.len() || matches!(self.at(e + 1), b'\r' | b'\n') {
                                break;
                            }
                            e += 1 + self.char_len(e + 1);
                        }
                        _ => e += self.char_len(e),
                    }
                }
                if e == p {
                    // A lone backslash before a newline or the end: not a literal.
                    self.emit(Tok::Other, p, p + 1);
                } else {
                    self.emit(Tok::QuotedLit, p, e);
                }
            }
        }
    }

    /// Inside a heredoc: each line is a literal (its newline included) up to a sequence; a
    /// line at a line start that is only the marker (spaces around it) closes the heredoc as
    /// a `CHeredoc` token and a `Newline` token.
    fn heredoc(&mut self) {
        let p = self.p;
        let Some(Mode::Heredoc {
            marker,
            start_of_line,
        }) = self.modes.last()
        else {
            return;
        };
        let (marker, start_of_line) = (*marker, *start_of_line);
        let c = self.b[p];
        let next = self.at(p + 1);
        if (c == b'$' || c == b'%') && next == b'{' {
            return self.template_open(if c == b'$' {
                Tok::TemplateInterp
            } else {
                Tok::TemplateControl
            });
        }
        // The literal runs to the end of the line or the next sequence opener.
        let mut e = p;
        let mut eol = false;
        loop {
            match self.at(e) {
                0 if e >= self.b.len() => break,
                b'\n' => {
                    e += 1;
                    eol = true;
                    break;
                }
                b'\r' if self.at(e + 1) == b'\n' => {
                    e += 2;
                    eol = true;
                    break;
                }
                b'$' | b'%' if self.at(e + 1) == b'{' => break,
                b'$' | b'%' if self.at(e + 1) == self.at(e) && self.at(e + 2) == b'{' => {
                    e += 3;
                }
                _ => e += self.char_len(e),
            }
        }
        if eol && start_of_line {
            let line = &self.src[p..e];
            let body = line.trim_end_matches(['\n']).trim_end_matches('\r');
            if body.trim() == &self.src[marker.0..marker.1] {
                let nl = p + body.len();
                self.emit(Tok::CHeredoc, p, nl);
                self.emit(Tok::Newline, nl, e);
                self.modes.pop();
                return;
            }
        }
        if let Some(Mode::Heredoc { start_of_line, .. }) = self.modes.last_mut() {
            *start_of_line = eol;
        }
        self.emit(Tok::StringLit, p, e);
    }
}
