//! `yamldecode`: a YAML reader for the documents configurations actually decode.
//!
//! Supported: one document (an optional `---` start and `...` end), block mappings and
//! sequences (compact forms like `- a: 1` included), flow collections (`[1, 2]`, `{a: 1}`,
//! spanning lines), plain, single- and double-quoted scalars (multi-line, folded), literal and
//! folded block scalars (`|`, `>`, with chomping and indentation indicators), comments, anchors
//! and aliases, and the standard `!!str`, `!!int`, `!!float`, `!!bool`, `!!null`, `!!binary`
//! and `!!timestamp` tags. Not supported (an error saying so): complex `? ` keys and merge
//! keys. Several documents in one string are an error, as in Terraform.
//!
//! Scalars resolve as Terraform's YAML library resolves them (YAML 1.1 flavoured): `yes`/`no`/
//! `on`/`off`/`y`/`n` and `true`/`false` are booleans, `~`, `null` and empty are null, numbers
//! may use `0x`/`0o`/`0b` prefixes, timestamps become RFC 3339 strings. Mappings become objects
//! (a repeated key: the last one wins) and sequences tuples, as in Terraform.

use crate::eval::convert::{parse_number, quote};
use crate::value::{Number, Type, Value};
use bigdecimal::num_bigint::BigInt;
use bigdecimal::BigDecimal;
use std::collections::BTreeMap;

/// Decodes one YAML document; errors are `on line N, column M: message`.
pub(crate) fn decode(src: &str) -> Result<Value, String> {
    let mut p = Parser {
        lines: src
            .split('\n')
            .map(|l| {
                let l = l.strip_suffix('\r').unwrap_or(l);
                let indent = l.len() - l.trim_start_matches(' ').len();
                (indent, l[indent..].to_string())
            })
            .collect(),
        pos: 0,
        anchors: BTreeMap::new(),
        depth: 0,
    };
    if src.ends_with('\n') {
        p.lines.pop();
    }
    p.skip_blank();
    // Directives and the document start marker.
    while p.pos < p.lines.len() && p.lines[p.pos].1.starts_with('%') {
        p.pos += 1;
        p.skip_blank();
    }
    if p.pos < p.lines.len() && is_marker(&p.lines[p.pos].1, "---") {
        let rest = p.lines[p.pos].1[3..].trim_start().to_string();
        if strip_comment(&rest).is_empty() {
            p.pos += 1;
        } else {
            p.lines[p.pos] = (p.lines[p.pos].0 + 4, rest);
        }
        p.skip_blank();
    }
    let started = p.pos > 0 && p.lines[..p.pos].iter().any(|(_, l)| is_marker(l, "---"));
    let value = if p.pos >= p.lines.len() || is_marker(&p.lines[p.pos].1, "...") {
        if !started {
            return Err("on line 1, column 1: missing start of document".into());
        }
        Value::Null(Type::Dynamic)
    } else {
        p.node(None)?
    };
    p.skip_blank();
    if p.pos < p.lines.len() && is_marker(&p.lines[p.pos].1, "...") {
        p.pos += 1;
        p.skip_blank();
    }
    if p.pos < p.lines.len() {
        return Err(p.err("unexpected extra content after value"));
    }
    Ok(value)
}

fn is_marker(text: &str, m: &str) -> bool {
    text.starts_with(m) && (text.len() == 3 || text[3..].starts_with([' ', '\t']))
}

/// The text without a trailing comment (a `#` after white space, outside quotes).
fn strip_comment(text: &str) -> &str {
    let b = text.as_bytes();
    let mut quote: Option<u8> = None;
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        match quote {
            Some(b'"') if c == b'\\' => i += 1,
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None => {
                if (c == b'"' || c == b'\'')
                    && (i == 0 || matches!(b[i - 1], b' ' | b'[' | b'{' | b',' | b':'))
                {
                    quote = Some(c);
                } else if c == b'#' && (i == 0 || b[i - 1] == b' ' || b[i - 1] == b'\t') {
                    return text[..i].trim_end();
                }
            }
        }
        i += 1;
    }
    text.trim_end()
}

/// Where the `:` of a mapping entry is (outside quotes and brackets, followed by a space or
/// the end), if this line is one.
fn map_colon(text: &str) -> Option<usize> {
    let b = text.as_bytes();
    let mut i = 0;
    if b.first() == Some(&b'"') || b.first() == Some(&b'\'') {
        let q = b[0];
        i = 1;
        while i < b.len() {
            if q == b'"' && b[i] == b'\\' {
                i += 2;
                continue;
            }
            if b[i] == q {
                if q == b'\'' && b.get(i + 1) == Some(&b'\'') {
                    i += 2;
                    continue;
                }
                break;
            }
            i += 1;
        }
        i += 1;
        let rest = text.get(i..)?.trim_start();
        let off = text.len() - rest.len();
        return (rest.starts_with(':') && (rest.len() == 1 || rest[1..].starts_with([' ', '\t'])))
            .then_some(off);
    }
    if b.first()
        .is_some_and(|c| matches!(c, b'[' | b'{' | b'#' | b'|' | b'>' | b'*'))
    {
        return None;
    }
    while i < b.len() {
        if b[i] == b':' && (i + 1 == b.len() || b[i + 1] == b' ' || b[i + 1] == b'\t') {
            return Some(i);
        }
        if b[i] == b'#' && i > 0 && b[i - 1] == b' ' {
            return None;
        }
        i += 1;
    }
    None
}

fn is_seq_item(text: &str) -> bool {
    text == "-" || text.starts_with("- ") || text.starts_with("-\t")
}

struct Parser {
    /// (indent, text after the indent) per line; rewritten in place for compact forms.
    lines: Vec<(usize, String)>,
    pos: usize,
    anchors: BTreeMap<String, Value>,
    depth: usize,
}

impl Parser {
    /// An error at the current line, worded as Terraform's YAML library words positions.
    fn err(&self, msg: impl std::fmt::Display) -> String {
        let line = self.pos.min(self.lines.len().saturating_sub(1));
        let column = self.lines.get(line).map(|l| l.0).unwrap_or(0) + 1;
        format!("on line {}, column {column}: {msg}", line + 1)
    }

    fn blank(&self, i: usize) -> bool {
        let t = &self.lines[i].1;
        strip_comment(t).is_empty() && !t.starts_with('\t')
            || t.trim().is_empty()
            || t.trim_start().starts_with('#')
    }

    fn skip_blank(&mut self) {
        while self.pos < self.lines.len() && self.blank(self.pos) {
            self.pos += 1;
        }
    }

    /// A node starting at the current (non-blank) line; `parent` is the indent of the
    /// enclosing block (None at the top).
    fn node(&mut self, parent: Option<usize>) -> Result<Value, String> {
        self.depth += 1;
        if self.depth > super::MAX_DEPTH {
            return Err(self.err("exceeded max depth"));
        }
        let v = self.node_inner(parent);
        self.depth -= 1;
        v
    }

    fn node_inner(&mut self, parent: Option<usize>) -> Result<Value, String> {
        let (indent, text) = self.lines[self.pos].clone();
        if let Some(p) = parent {
            if indent <= p && !(is_seq_item(&text) && indent == p) {
                return Ok(Value::Null(Type::Dynamic));
            }
        }
        if text.starts_with('\t') {
            return Err(self.err("found a tab character where an indentation space is expected"));
        }
        if text.starts_with("? ") {
            return Err(self.err("complex mapping keys (\"? \") are not supported"));
        }
        if is_seq_item(&text) {
            return self.seq(indent);
        }
        if map_colon(&text).is_some() {
            return self.map(indent);
        }
        self.pos += 1;
        self.inline(&text, indent, parent)
    }

    fn seq(&mut self, indent: usize) -> Result<Value, String> {
        let mut items = Vec::new();
        loop {
            self.skip_blank();
            if self.pos >= self.lines.len() {
                break;
            }
            let (ind, text) = self.lines[self.pos].clone();
            if ind == 0 && (is_marker(&text, "---") || is_marker(&text, "...")) {
                break;
            }
            if ind != indent || !is_seq_item(&text) {
                if ind > indent {
                    return Err(self.err("bad indentation of a sequence entry"));
                }
                break;
            }
            let rest = text[1..].trim_start().to_string();
            let col = indent + (text.len() - rest.len());
            if strip_comment(&rest).is_empty() {
                self.pos += 1;
                self.skip_blank();
                if self.pos < self.lines.len() && self.lines[self.pos].0 > indent {
                    items.push(self.node(Some(indent))?);
                } else {
                    items.push(Value::Null(Type::Dynamic));
                }
            } else if is_seq_item(&rest) || map_colon(&rest).is_some() {
                self.lines[self.pos] = (col, rest);
                items.push(self.node(Some(indent))?);
            } else {
                self.pos += 1;
                items.push(self.inline(&rest, col, Some(indent))?);
            }
        }
        Ok(Value::Tuple(items))
    }

    fn map(&mut self, indent: usize) -> Result<Value, String> {
        let mut m = BTreeMap::new();
        loop {
            self.skip_blank();
            if self.pos >= self.lines.len() {
                break;
            }
            let (ind, text) = self.lines[self.pos].clone();
            if ind == 0 && (is_marker(&text, "---") || is_marker(&text, "...")) {
                break;
            }
            if ind != indent {
                if ind > indent {
                    return Err(self.err("bad indentation of a mapping entry"));
                }
                break;
            }
            if is_seq_item(&text) {
                break;
            }
            let Some(colon) = map_colon(&text) else {
                return Err(self.err("could not find expected ':'"));
            };
            let key_text = text[..colon].trim_end();
            if key_text == "<<" {
                return Err(self.err("merge keys (\"<<\") are not supported"));
            }
            let key = match self.flow_scalar_text(key_text)? {
                Value::String(s) => s,
                Value::Null(_) => "null".into(),
                Value::Bool(b) => b.to_string(),
                Value::Number(n) => n.to_string(),
                _ => return Err(self.err("mapping keys must be scalars")),
            };
            let rest = text[colon + 1..].trim_start().to_string();
            let col = indent + (text.len() - rest.len());
            let (props, body) = split_props(strip_comment(&rest));
            let value = if body.is_empty() {
                self.pos += 1;
                self.skip_blank();
                let v = if self.pos < self.lines.len()
                    && (self.lines[self.pos].0 > indent
                        || (self.lines[self.pos].0 == indent
                            && is_seq_item(&self.lines[self.pos].1)))
                {
                    self.node(Some(indent))?
                } else {
                    Value::Null(Type::Dynamic)
                };
                self.apply_props(&props, v, None)?
            } else {
                self.pos += 1;
                self.inline(&rest, col, Some(indent))?
            };
            m.insert(key, value);
        }
        Ok(Value::Object(m))
    }

    /// Applies `&anchor` and `!!tag` properties to a value (re-resolving a plain scalar under
    /// a tag).
    fn apply_props(
        &mut self,
        props: &[String],
        v: Value,
        plain: Option<&str>,
    ) -> Result<Value, String> {
        let mut v = v;
        for p in props {
            if let Some(tag) = p.strip_prefix('!') {
                if let Some(raw) = plain {
                    v = resolve_tagged(tag, raw).map_err(|m| self.err(m))?;
                } else if !matches!(tag, "!map" | "!seq" | "!omap") {
                    if let Value::String(s) = &v {
                        v = resolve_tagged(tag, s).map_err(|m| self.err(m))?;
                    }
                }
            }
        }
        for p in props {
            if let Some(name) = p.strip_prefix('&') {
                self.anchors.insert(name.to_string(), v.clone());
            }
        }
        Ok(v)
    }

    /// A value written after `key: ` or `- ` (the line is already consumed); `col` is its
    /// column and `parent` the indent of the enclosing block.
    fn inline(&mut self, text: &str, col: usize, parent: Option<usize>) -> Result<Value, String> {
        let parent_indent = parent.unwrap_or(0);
        let stripped = strip_comment(text);
        let (props, body) = split_props(stripped);
        let body = body.to_string();
        if let Some(name) = body.strip_prefix('*') {
            return self
                .anchors
                .get(name.trim())
                .cloned()
                .ok_or_else(|| self.err(format!("unknown anchor {} referenced", quote(name))));
        }
        if body.starts_with('|') || body.starts_with('>') {
            let v = self.block_scalar(&body, parent, col)?;
            return self.apply_props(&props, Value::String(v), None);
        }
        if body.starts_with('[') || body.starts_with('{') {
            let mut all = body.clone();
            while !flow_balanced(&all) {
                if self.pos >= self.lines.len() {
                    return Err(self.err("did not find the end of a flow collection"));
                }
                all.push(' ');
                all.push_str(strip_comment(self.lines[self.pos].1.trim()));
                self.pos += 1;
            }
            let mut f = Flow {
                depth: 0,
                s: all.chars().collect(),
                i: 0,
            };
            let v = f.value(self).map_err(|m| self.err(m))?;
            f.ws();
            if f.i < f.s.len() {
                return Err(self.err("unexpected content after a flow collection"));
            }
            return self.apply_props(&props, v, None);
        }
        if body.starts_with('"') || body.starts_with('\'') {
            // Quoted scalars may continue on later lines.
            let mut all =
                text[text.find(body.chars().next().unwrap_or('"')).unwrap_or(0)..].to_string();
            while !quoted_closed(&all) {
                if self.pos >= self.lines.len() {
                    return Err(
                        self.err("found unexpected end of stream while scanning a quoted scalar")
                    );
                }
                all.push('\n');
                all.push_str(self.lines[self.pos].1.trim());
                self.pos += 1;
            }
            let (s, used) = unquote(&all).map_err(|m| self.err(m))?;
            if !strip_comment(all[used..].trim()).is_empty() {
                return Err(self.err("unexpected content after a quoted scalar"));
            }
            return self.apply_props(&props, Value::String(s), None);
        }
        // A plain scalar, possibly continued on more-indented lines.
        let mut words = body.clone();
        loop {
            let save = self.pos;
            self.skip_blank();
            if self.pos < self.lines.len()
                && self.lines[self.pos].0 > parent_indent
                && !is_seq_item(&self.lines[self.pos].1)
                && map_colon(&self.lines[self.pos].1).is_none()
                && !words.is_empty()
            {
                let blanks = self.pos - save;
                words.push_str(if blanks > 0 { "\n" } else { " " });
                words.push_str(strip_comment(&self.lines[self.pos].1));
                self.pos += 1;
            } else {
                self.pos = save;
                break;
            }
        }
        let v = if props.iter().any(|p| p.starts_with('!')) {
            Value::String(words.clone())
        } else {
            resolve_plain(&words).map_err(|m| self.err(m))?
        };
        self.apply_props(&props, v, Some(&words))
    }

    /// `|` or `>` block scalars: the following lines indented more than the parent.
    fn block_scalar(
        &mut self,
        header: &str,
        parent: Option<usize>,
        _col: usize,
    ) -> Result<String, String> {
        let literal = header.starts_with('|');
        let mut chomp = ' ';
        let mut explicit: Option<usize> = None;
        for c in header[1..].chars() {
            match c {
                '-' | '+' => chomp = c,
                '1'..='9' => explicit = Some(c as usize - '0' as usize),
                ' ' | '\t' => break,
                _ => return Err(self.err("invalid block scalar header")),
            }
        }
        let parent_indent = parent.map(|p| p as i64).unwrap_or(-1);
        let mut raw: Vec<String> = Vec::new();
        let mut content_indent: Option<usize> =
            explicit.map(|e| (parent_indent + e as i64) as usize);
        while self.pos < self.lines.len() {
            let (ind, text) = &self.lines[self.pos];
            if text.is_empty() {
                raw.push(String::new());
                self.pos += 1;
                continue;
            }
            let ci = *content_indent.get_or_insert(*ind);
            if (*ind as i64) <= parent_indent || *ind < ci {
                break;
            }
            raw.push(format!("{}{}", " ".repeat(ind - ci), text));
            self.pos += 1;
        }
        // Trailing blank lines belong to the chomping, not the content.
        let mut trailing = 0;
        while raw.last().is_some_and(String::is_empty) {
            raw.pop();
            trailing += 1;
        }
        let body = if literal {
            raw.join("\n")
        } else {
            let mut out = String::new();
            let mut prev_more = false;
            for (i, line) in raw.iter().enumerate() {
                let more = line.starts_with(' ');
                if i > 0 {
                    if line.is_empty() {
                        out.push('\n');
                        continue;
                    }
                    let prev_empty = raw[i - 1].is_empty();
                    if more || prev_more {
                        out.push('\n');
                    } else if !prev_empty {
                        out.push(' ');
                    }
                }
                out.push_str(line);
                prev_more = more;
            }
            out
        };
        Ok(match chomp {
            '-' => body,
            '+' => format!("{body}\n{}", "\n".repeat(trailing)),
            _ if body.is_empty() => body,
            _ => format!("{body}\n"),
        })
    }

    fn flow_scalar_text(&self, text: &str) -> Result<Value, String> {
        if text.starts_with('"') || text.starts_with('\'') {
            let (s, _) = unquote(text).map_err(|m| self.err(m))?;
            return Ok(Value::String(s));
        }
        Ok(Value::String(text.to_string()))
    }
}

/// Splits leading `&anchor` and `!tag` properties from a value's text.
fn split_props(text: &str) -> (Vec<String>, &str) {
    let mut props = Vec::new();
    let mut rest = text;
    while rest.starts_with('&') || rest.starts_with('!') {
        let end = rest.find([' ', '\t']).unwrap_or(rest.len());
        props.push(rest[..end].to_string());
        rest = rest[end..].trim_start();
    }
    (props, rest)
}

fn flow_balanced(s: &str) -> bool {
    let mut depth = 0i32;
    let mut quote: Option<char> = None;
    let mut esc = false;
    for c in s.chars() {
        if let Some(q) = quote {
            if esc {
                esc = false;
            } else if q == '"' && c == '\\' {
                esc = true;
            } else if c == q {
                quote = None;
            }
            continue;
        }
        match c {
            '"' | '\'' => quote = Some(c),
            '[' | '{' => depth += 1,
            ']' | '}' => depth -= 1,
            _ => {}
        }
    }
    depth <= 0 && quote.is_none()
}

fn quoted_closed(s: &str) -> bool {
    unquote(s).is_ok()
}

/// Reads a quoted scalar at the start of `s`: its value and the bytes it used. Line breaks
/// inside fold to spaces (an empty line to a newline).
fn unquote(s: &str) -> Result<(String, usize), String> {
    let q = s.chars().next().ok_or("expected a quoted scalar")?;
    let chars: Vec<(usize, char)> = s.char_indices().collect();
    let mut out = String::new();
    let mut i = 1;
    while i < chars.len() {
        let c = chars[i].1;
        if c == q {
            if q == '\'' && chars.get(i + 1).map(|x| x.1) == Some('\'') {
                out.push('\'');
                i += 2;
                continue;
            }
            let used = chars.get(i + 1).map(|x| x.0).unwrap_or(s.len());
            return Ok((out, used));
        }
        if c == '\n' {
            // Folding: trailing spaces before and leading spaces after are dropped.
            while out.ends_with(' ') {
                out.pop();
            }
            let mut breaks = 0;
            while i < chars.len() && (chars[i].1 == '\n' || chars[i].1 == ' ') {
                if chars[i].1 == '\n' {
                    breaks += 1;
                }
                i += 1;
            }
            if breaks == 1 {
                out.push(' ');
            } else {
                out.push_str(&"\n".repeat(breaks - 1));
            }
            continue;
        }
        if q == '"' && c == '\\' {
            let e = chars.get(i + 1).map(|x| x.1).ok_or("unterminated escape")?;
            i += 2;
            let hex = |n: usize, i: &mut usize| -> Result<char, String> {
                let h: String = chars.iter().skip(*i).take(n).map(|x| x.1).collect();
                *i += n;
                u32::from_str_radix(&h, 16)
                    .ok()
                    .and_then(char::from_u32)
                    .ok_or_else(|| format!("invalid escape \\{e}{h}"))
            };
            match e {
                '0' => out.push('\0'),
                'a' => out.push('\u{7}'),
                'b' => out.push('\u{8}'),
                't' | '\t' => out.push('\t'),
                'n' => out.push('\n'),
                'v' => out.push('\u{b}'),
                'f' => out.push('\u{c}'),
                'r' => out.push('\r'),
                'e' => out.push('\u{1b}'),
                ' ' => out.push(' '),
                '"' => out.push('"'),
                '/' => out.push('/'),
                '\\' => out.push('\\'),
                'N' => out.push('\u{85}'),
                '_' => out.push('\u{a0}'),
                'L' => out.push('\u{2028}'),
                'P' => out.push('\u{2029}'),
                'x' => out.push(hex(2, &mut i)?),
                'u' => out.push(hex(4, &mut i)?),
                'U' => out.push(hex(8, &mut i)?),
                '\n' => {
                    while i < chars.len() && chars[i].1 == ' ' {
                        i += 1;
                    }
                }
                other => return Err(format!("found unknown escape character {other:?}")),
            }
            continue;
        }
        out.push(c);
        i += 1;
    }
    Err("found unexpected end of stream while scanning a quoted scalar".into())
}

/// A flow collection reader.
struct Flow {
    s: Vec<char>,
    i: usize,
    depth: usize,
}

impl Flow {
    fn ws(&mut self) {
        while self.i < self.s.len() && (self.s[self.i] == ' ' || self.s[self.i] == '\t') {
            self.i += 1;
        }
    }
    fn value(&mut self, p: &mut Parser) -> Result<Value, String> {
        self.depth += 1;
        if self.depth > super::MAX_DEPTH {
            return Err("exceeded max depth".into());
        }
        let v = self.value_inner(p);
        self.depth -= 1;
        v
    }

    fn value_inner(&mut self, p: &mut Parser) -> Result<Value, String> {
        self.ws();
        // `&anchor` and `!tag` properties before a flow value.
        if let Some(&c @ ('&' | '!')) = self.s.get(self.i) {
            let start = self.i + 1;
            while self.i < self.s.len() && !matches!(self.s[self.i], ' ' | ',' | ']' | '}') {
                self.i += 1;
            }
            let name: String = self.s[start..self.i].iter().collect();
            let v = self.value(p)?;
            if c == '&' {
                p.anchors.insert(name, v.clone());
                return Ok(v);
            }
            return match v {
                Value::String(raw) => {
                    resolve_tagged(&format!("!{}", name.trim_start_matches('!')), &raw)
                }
                Value::Number(n) => resolve_tagged(
                    &format!("!{}", name.trim_start_matches('!')),
                    &n.to_string(),
                ),
                other => Ok(other),
            };
        }
        match self.s.get(self.i) {
            Some('[') => {
                self.i += 1;
                let mut items = Vec::new();
                loop {
                    self.ws();
                    if self.s.get(self.i) == Some(&']') {
                        self.i += 1;
                        return Ok(Value::Tuple(items));
                    }
                    items.push(self.value(p)?);
                    self.ws();
                    match self.s.get(self.i) {
                        Some(',') => self.i += 1,
                        Some(']') => {}
                        _ => return Err("did not find expected ',' or ']'".into()),
                    }
                }
            }
            Some('{') => {
                self.i += 1;
                let mut m = BTreeMap::new();
                loop {
                    self.ws();
                    if self.s.get(self.i) == Some(&'}') {
                        self.i += 1;
                        return Ok(Value::Object(m));
                    }
                    let key = match self.scalar(true)? {
                        (Value::String(s), _) => s,
                        (Value::Null(_), _) => "null".into(),
                        (Value::Bool(b), _) => b.to_string(),
                        (Value::Number(n), _) => n.to_string(),
                        _ => return Err("mapping keys must be scalars".into()),
                    };
                    self.ws();
                    let v = if self.s.get(self.i) == Some(&':') {
                        self.i += 1;
                        self.value(p)?
                    } else {
                        Value::Null(Type::Dynamic)
                    };
                    m.insert(key, v);
                    self.ws();
                    match self.s.get(self.i) {
                        Some(',') => self.i += 1,
                        Some('}') => {}
                        _ => return Err("did not find expected ',' or '}'".into()),
                    }
                }
            }
            Some('*') => {
                self.i += 1;
                let start = self.i;
                while self.i < self.s.len() && !matches!(self.s[self.i], ',' | ']' | '}' | ' ') {
                    self.i += 1;
                }
                let name: String = self.s[start..self.i].iter().collect();
                p.anchors
                    .get(&name)
                    .cloned()
                    .ok_or_else(|| format!("unknown anchor {} referenced", quote(&name)))
            }
            _ => Ok(self.scalar(false)?.0),
        }
    }
    /// A scalar inside a flow collection; keys stop at `:`.
    fn scalar(&mut self, key: bool) -> Result<(Value, bool), String> {
        self.ws();
        if let Some(&q) = self.s.get(self.i).filter(|c| **c == '"' || **c == '\'') {
            let rest: String = self.s[self.i..].iter().collect();
            let (v, used) = unquote(&rest)?;
            self.i += rest[..used].chars().count();
            let _ = q;
            return Ok((Value::String(v), true));
        }
        let start = self.i;
        while self.i < self.s.len() {
            let c = self.s[self.i];
            if matches!(c, ',' | ']' | '}' | '[' | '{') {
                break;
            }
            if c == ':'
                && (key
                    || self
                        .s
                        .get(self.i + 1)
                        .is_none_or(|n| *n == ' ' || *n == ','))
            {
                break;
            }
            self.i += 1;
        }
        let text: String = self.s[start..self.i].iter().collect();
        let text = text.trim();
        Ok((resolve_plain(text)?, false))
    }
}

fn int_with_prefix(plain: &str) -> Option<BigInt> {
    let (neg, digits) = match plain.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, plain.strip_prefix('+').unwrap_or(plain)),
    };
    let (radix, body) = if let Some(b) = digits.strip_prefix("0x") {
        (16, b)
    } else if let Some(b) = digits.strip_prefix("0o") {
        (8, b)
    } else if let Some(b) = digits.strip_prefix("0b") {
        (2, b)
    } else {
        return None;
    };
    let v = BigInt::parse_bytes(body.as_bytes(), radix)?;
    Some(if neg { -v } else { v })
}

/// YAML timestamps (`2001-12-14`, `2001-12-14t21:59:43.10Z`, `2001-12-14 21:59:43`) as
/// RFC 3339 strings, or None.
fn timestamp(s: &str) -> Option<String> {
    let b = s.as_bytes();
    if b.len() < 8 || !b[..4].iter().all(u8::is_ascii_digit) || b[4] != b'-' {
        return None;
    }
    let (date, time) = match s.find(['T', 't', ' ']) {
        Some(i) => (&s[..i], Some(&s[i + 1..])),
        None => (s, None),
    };
    let parts: Vec<&str> = date.split('-').collect();
    if parts.len() != 3
        || parts
            .iter()
            .any(|p| p.is_empty() || !p.bytes().all(|c| c.is_ascii_digit()))
    {
        return None;
    }
    let (y, m, d): (i64, i64, i64) = (
        parts[0].parse().ok()?,
        parts[1].parse().ok()?,
        parts[2].parse().ok()?,
    );
    if !(1..=12).contains(&m) || !(1..=31).contains(&d) || parts[1].len() > 2 || parts[2].len() > 2
    {
        return None;
    }
    let Some(time) = time else {
        return Some(format!("{y:04}-{m:02}-{d:02}T00:00:00Z"));
    };
    let (clock, zone) = match time.find(['Z', '+', '-']) {
        Some(i) => (&time[..i], &time[i..]),
        None => (time, "Z"),
    };
    let clock = clock.split('.').next()?;
    let hms: Vec<&str> = clock.split(':').collect();
    if hms.len() != 3
        || hms
            .iter()
            .any(|p| p.is_empty() || p.len() > 2 || !p.bytes().all(|c| c.is_ascii_digit()))
    {
        return None;
    }
    let (h, mi, se): (i64, i64, i64) = (
        hms[0].parse().ok()?,
        hms[1].parse().ok()?,
        hms[2].parse().ok()?,
    );
    let zone = match zone {
        "Z" => "Z".to_string(),
        z if z.len() == 6 && z.as_bytes()[3] == b':' => {
            if &z[1..] == "00:00" {
                "Z".to_string()
            } else {
                z.to_string()
            }
        }
        _ => return None,
    };
    Some(format!("{y:04}-{m:02}-{d:02}T{h:02}:{mi:02}:{se:02}{zone}"))
}

/// Resolves a plain (unquoted, untagged) scalar.
fn resolve_plain(s: &str) -> Result<Value, String> {
    match s {
        "" | "~" | "null" | "Null" | "NULL" => return Ok(Value::Null(Type::Dynamic)),
        "y" | "Y" | "yes" | "Yes" | "YES" | "true" | "True" | "TRUE" | "on" | "On" | "ON" => {
            return Ok(Value::Bool(true))
        }
        "n" | "N" | "no" | "No" | "NO" | "false" | "False" | "FALSE" | "off" | "Off" | "OFF" => {
            return Ok(Value::Bool(false))
        }
        ".inf" | ".Inf" | ".INF" | "+.inf" | "+.Inf" | "+.INF" | "-.inf" | "-.Inf" | "-.INF" => {
            return Err("floating point infinity is not supported".into())
        }
        ".nan" | ".NaN" | ".NAN" => return Err("floating point NaN is not supported".into()),
        _ => {}
    }
    let first = s.as_bytes()[0];
    if first.is_ascii_digit() || first == b'+' || first == b'-' || first == b'.' {
        if let Some(t) = timestamp(s) {
            return Ok(Value::String(t));
        }
        if let Some(n) = parse_number(s) {
            return Ok(Value::Number(n));
        }
        if let Some(i) = int_with_prefix(s) {
            return Ok(Value::Number(Number::new(BigDecimal::from(i))));
        }
    }
    Ok(Value::String(s.to_string()))
}

/// Resolves a scalar under an explicit tag (`!!int`, `!!str`...).
fn resolve_tagged(tag: &str, raw: &str) -> Result<Value, String> {
    let long = |t: &str| format!("tag:yaml.org,2002:{t}");
    match tag {
        "!str" => Ok(Value::String(raw.to_string())),
        "!binary" => {
            use base64::Engine as _;
            base64::engine::general_purpose::STANDARD
                .decode(raw.split_whitespace().collect::<String>())
                .map(|_| Value::String(raw.to_string()))
                .map_err(|_| {
                    format!(
                        "cannot parse {} as {}: not valid base64",
                        quote(raw),
                        long("binary")
                    )
                })
        }
        "!bool" => match resolve_plain(raw) {
            Ok(v @ Value::Bool(_)) => Ok(v),
            _ => Err(format!("cannot parse {} as {}", quote(raw), long("bool"))),
        },
        "!int" | "!float" => {
            let plain = raw.replace('_', "");
            parse_number(&plain)
                .map(Value::Number)
                .or_else(|| {
                    int_with_prefix(&plain).map(|i| Value::Number(Number::new(BigDecimal::from(i))))
                })
                .ok_or_else(|| format!("cannot parse {} as {}", quote(raw), long(&tag[1..])))
        }
        "!null" => Ok(Value::Null(Type::Dynamic)),
        "!timestamp" => timestamp(raw)
            .map(Value::String)
            .ok_or_else(|| format!("cannot parse {} as {}", quote(raw), long("timestamp"))),
        other => Err(format!("unsupported tag {}", quote(&format!("!{other}")))),
    }
}

#[cfg(test)]
mod tests {
    use super::decode;
    use crate::eval::functions::testing::*;
    use crate::value::{Type, Value};

    #[track_caller]
    fn ok(src: &str, expected: Value) {
        assert_eq!(decode(src), Ok(expected), "{src:?}");
    }

    #[test]
    fn block_structures() {
        ok(
            "a: 1\nb:\n  - x\n  - y\nc:\n  d: true\n  e: null\n",
            obj(vec![
                ("a", n(1)),
                // YAML 1.1: `y` is true, as in Terraform.
                ("b", tup(vec![s("x"), b(true)])),
                (
                    "c",
                    obj(vec![("d", b(true)), ("e", Value::Null(Type::Dynamic))]),
                ),
            ]),
        );
        ok(
            "---\n# comment\nlist:\n- name: a   # trailing\n  port: 80\n- name: b\n...\n",
            obj(vec![(
                "list",
                tup(vec![
                    obj(vec![("name", s("a")), ("port", n(80))]),
                    obj(vec![("name", s("b"))]),
                ]),
            )]),
        );
        ok(
            "- - 1\n  - 2\n- [3, {x: z}]",
            tup(vec![
                tup(vec![n(1), n(2)]),
                tup(vec![n(3), obj(vec![("x", s("z"))])]),
            ]),
        );
        ok("---\n", Value::Null(Type::Dynamic));
        assert_eq!(
            decode(""),
            Err("on line 1, column 1: missing start of document".into())
        );
        assert_eq!(
            decode("# only\n"),
            Err("on line 1, column 1: missing start of document".into())
        );
        ok("hello", s("hello"));
        ok(
            "{a: [1, 2,\n  3], 'b': \"c\"}",
            obj(vec![("a", tup(vec![n(1), n(2), n(3)])), ("b", s("c"))]),
        );
    }

    #[test]
    fn scalars() {
        // Expected values from `terraform console` (1.11).
        ok(
            "a: yes\nb: Off\nc: ~\nd: 1_000\ne: 0x1F\nf: 1.5e3\ng: '1'\nh: \"a\\tb\\u00e9\"\ni: 'it''s'\nj: 2001-12-14\nk: plain text here\nl: 12345678901234567890123",
            obj(vec![
                ("a", b(true)),
                ("b", b(false)),
                ("c", Value::Null(Type::Dynamic)),
                ("d", s("1_000")),
                ("e", n(31)),
                ("f", n(1500)),
                ("g", s("1")),
                ("h", s("a\tbé")),
                ("i", s("it's")),
                ("j", s("2001-12-14T00:00:00Z")),
                ("k", s("plain text here")),
                ("l", num("12345678901234567890123")),
            ]),
        );
        ok(
            "a: !!str 123\nb: !!int '7'",
            obj(vec![("a", s("123")), ("b", n(7))]),
        );
        ok(
            "url: http://x.y/z#frag",
            obj(vec![("url", s("http://x.y/z#frag"))]),
        );
    }

    #[test]
    fn block_scalars() {
        ok(
            "a: |\n  line1\n  line2\nb: x",
            obj(vec![("a", s("line1\nline2\n")), ("b", s("x"))]),
        );
        ok(
            "a: |-\n  line1\n\n  line2\n",
            obj(vec![("a", s("line1\n\nline2"))]),
        );
        ok(
            "a: >\n  folded\n  text\n\n  para\n",
            obj(vec![("a", s("folded text\npara\n"))]),
        );
        ok("a: |+\n  keep\n\n", obj(vec![("a", s("keep\n\n"))]));
        ok("- |\n  in seq\n- b", tup(vec![s("in seq\n"), s("b")]));
    }

    #[test]
    fn anchors_and_errors() {
        ok(
            "{a: &foo [1, 2, 3], b: *foo, c: !!str 12}",
            obj(vec![
                ("a", tup(vec![n(1), n(2), n(3)])),
                ("b", tup(vec![n(1), n(2), n(3)])),
                ("c", s("12")),
            ]),
        );
        ok(
            "base: &b {x: 1}\nother: *b",
            obj(vec![
                ("base", obj(vec![("x", n(1))])),
                ("other", obj(vec![("x", n(1))])),
            ]),
        );
        ok("a: 1\na: 2", obj(vec![("a", n(2))]));
        assert_eq!(
            decode("a: 1\n---\nb: 2"),
            Err("on line 2, column 1: unexpected extra content after value".into())
        );
        assert!(decode("a: [1, 2").is_err());
        assert!(decode("a: .nan").is_err());
        assert!(decode("a: *nope").is_err());
    }
}
