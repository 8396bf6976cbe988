//! `jsondecode`'s reader: JSON read as Terraform reads it (cty's JSON decoder over Go's
//! `encoding/json`).
//!
//! Why not serde_json: every message here is Go's (`invalid character ']' looking for
//! beginning of value`, `unexpected EOF`, `extraneous data after JSON object`), and the
//! golden files and tests check them; serde_json's errors (`expected value at line 1
//! column 4`) carry neither the offending character nor Go's context words. Numbers keep
//! every digit (`12345678901234567890123` is exact), which serde_json does only with
//! `arbitrary_precision`, a feature that would unify across the workspace and change how
//! every other `serde_json::Value` holds and prints numbers (`1e5` kept as written instead
//! of `100000.0`). Nesting 200 deep must decode and deeper than `MAX_DEPTH` fail with a
//! message (serde_json stops at 128 unless `unbounded_depth`, again workspace-wide), and a
//! lone UTF-16 surrogate escape becomes U+FFFD as in Go rather than an error.

use super::MAX_DEPTH;
use crate::eval::convert::parse_number;
use crate::value::ValueMap;
use crate::value::{Type, Value};

/// Decodes JSON text: objects become objects and arrays tuples; errors are worded as Go's
/// `encoding/json` words them.
pub(crate) fn decode(text: &str) -> Result<Value, String> {
    let mut parser = JsonParser {
        b: text.as_bytes(),
        i: 0,
        depth: 0,
    };
    parser.skip_ws();
    if parser.i >= parser.b.len() {
        return Err("EOF".into());
    }
    let v = parser.value()?;
    parser.skip_ws();
    if parser.i < parser.b.len() {
        return Err("extraneous data after JSON object".into());
    }
    Ok(v)
}

struct JsonParser<'a> {
    b: &'a [u8],
    i: usize,
    /// Nesting of arrays and objects, bounded so that deeply nested input is an error
    /// rather than a stack overflow.
    depth: usize,
}

impl JsonParser<'_> {
    fn skip_ws(&mut self) {
        while self.i < self.b.len() && matches!(self.b[self.i], b' ' | b'\t' | b'\n' | b'\r') {
            self.i += 1;
        }
    }
    fn describe(&self) -> String {
        let rest = std::str::from_utf8(&self.b[self.i..]).unwrap_or("");
        match rest.chars().next() {
            Some(c) => format!("'{c}'"),
            None => "EOF".into(),
        }
    }
    /// An error between tokens (Go's decoder says just "EOF" at the end of the input).
    fn err(&self, context: &str) -> String {
        if self.i >= self.b.len() {
            "EOF".into()
        } else if context.is_empty() {
            format!("invalid character {}", self.describe())
        } else {
            format!("invalid character {} {context}", self.describe())
        }
    }
    fn value(&mut self) -> Result<Value, String> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err("exceeded max depth".into());
        }
        let v = self.value_inner();
        self.depth -= 1;
        v
    }

    fn value_inner(&mut self) -> Result<Value, String> {
        self.skip_ws();
        let Some(&c) = self.b.get(self.i) else {
            return Err(self.err(""));
        };
        match c {
            b'{' => {
                self.i += 1;
                // Pairs as they come (a later key wins); sorted once at the end.
                let mut m: Vec<(String, Value)> = Vec::new();
                self.skip_ws();
                if self.b.get(self.i) == Some(&b'}') {
                    self.i += 1;
                    return Ok(Value::Object(ValueMap::new()));
                }
                let mut first = true;
                loop {
                    self.skip_ws();
                    if self.b.get(self.i) != Some(&b'"') {
                        return Err(self.err(if first {
                            ""
                        } else {
                            "looking for beginning of object key string"
                        }));
                    }
                    first = false;
                    let k = self.string()?;
                    self.skip_ws();
                    if self.b.get(self.i) != Some(&b':') {
                        return Err(self.err("after object key"));
                    }
                    self.i += 1;
                    let v = self.value()?;
                    m.push((k, v));
                    self.skip_ws();
                    match self.b.get(self.i) {
                        Some(b',') => self.i += 1,
                        Some(b'}') => {
                            self.i += 1;
                            return Ok(Value::Object(m.into_iter().collect()));
                        }
                        _ => return Err(self.err("after object key:value pair")),
                    }
                }
            }
            b'[' => {
                self.i += 1;
                let mut v = Vec::new();
                self.skip_ws();
                if self.b.get(self.i) == Some(&b']') {
                    self.i += 1;
                    return Ok(Value::Tuple(v));
                }
                loop {
                    v.push(self.value()?);
                    self.skip_ws();
                    match self.b.get(self.i) {
                        Some(b',') => self.i += 1,
                        Some(b']') => {
                            self.i += 1;
                            return Ok(Value::Tuple(v));
                        }
                        _ => return Err(self.err("after array element")),
                    }
                }
            }
            b'"' => Ok(Value::String(self.string()?)),
            b't' => self.literal("true", Value::Bool(true)),
            b'f' => self.literal("false", Value::Bool(false)),
            b'n' => self.literal("null", Value::Null(Type::Dynamic)),
            b'-' | b'0'..=b'9' => {
                // -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
                let start = self.i;
                let digits = |p: &mut Self| {
                    let s = p.i;
                    while p.i < p.b.len() && p.b[p.i].is_ascii_digit() {
                        p.i += 1;
                    }
                    p.i - s
                };
                if self.b[self.i] == b'-' {
                    self.i += 1;
                }
                match self.b.get(self.i) {
                    Some(b'0') => self.i += 1,
                    Some(b'1'..=b'9') => {
                        digits(self);
                    }
                    None => return Err("unexpected EOF".into()),
                    Some(_) => return Err(self.err("in numeric literal")),
                }
                if self.b.get(self.i) == Some(&b'.') {
                    self.i += 1;
                    if digits(self) == 0 {
                        return Err(if self.i >= self.b.len() {
                            "unexpected EOF".into()
                        } else {
                            self.err("after decimal point in numeric literal")
                        });
                    }
                }
                if matches!(self.b.get(self.i), Some(b'e' | b'E')) {
                    self.i += 1;
                    if matches!(self.b.get(self.i), Some(b'+' | b'-')) {
                        self.i += 1;
                    }
                    if digits(self) == 0 {
                        return Err(if self.i >= self.b.len() {
                            "unexpected EOF".into()
                        } else {
                            self.err("in exponent of numeric literal")
                        });
                    }
                }
                let text = std::str::from_utf8(&self.b[start..self.i]).unwrap_or("");
                match text.parse::<crate::value::Number>() {
                    Ok(n) => Ok(Value::Number(n)),
                    Err(e) if e.contains("out of range") => Err(e),
                    Err(_) => parse_number(text)
                        .map(Value::Number)
                        .ok_or_else(|| self.err("in numeric literal")),
                }
            }
            _ => Err(self.err("looking for beginning of value")),
        }
    }
    fn literal(&mut self, word: &str, v: Value) -> Result<Value, String> {
        let rest = &self.b[self.i..];
        if rest.starts_with(word.as_bytes()) {
            self.i += word.len();
            return Ok(v);
        }
        if word.as_bytes().starts_with(rest) {
            return Err("unexpected EOF".into());
        }
        let at = rest
            .iter()
            .zip(word.as_bytes())
            .position(|(a, b)| a != b)
            .unwrap_or(0);
        self.i += at;
        Err(self.err(&format!(
            "in literal {word} (expecting '{}')",
            word.as_bytes()[at] as char
        )))
    }
    fn string(&mut self) -> Result<String, String> {
        self.i += 1; // opening quote
        let mut out = String::new();
        loop {
            let rest = std::str::from_utf8(&self.b[self.i..]).map_err(|e| e.to_string())?;
            let Some(c) = rest.chars().next() else {
                return Err("unexpected EOF".into());
            };
            self.i += c.len_utf8();
            match c {
                '"' => return Ok(out),
                '\\' => {
                    let Some(&e) = self.b.get(self.i) else {
                        return Err("unexpected EOF".into());
                    };
                    self.i += 1;
                    match e {
                        b'"' => out.push('"'),
                        b'\\' => out.push('\\'),
                        b'/' => out.push('/'),
                        b'b' => out.push('\u{8}'),
                        b'f' => out.push('\u{c}'),
                        b'n' => out.push('\n'),
                        b'r' => out.push('\r'),
                        b't' => out.push('\t'),
                        b'u' => {
                            let mut cp = self.hex4()?;
                            if (0xD800..0xDC00).contains(&cp)
                                && self.b[self.i..].starts_with(b"\\u")
                            {
                                self.i += 2;
                                let lo = self.hex4()?;
                                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo.wrapping_sub(0xDC00));
                            }
                            out.push(char::from_u32(cp).unwrap_or('\u{FFFD}'));
                        }
                        _ => {
                            self.i -= 1;
                            return Err(self.err("in string escape code"));
                        }
                    }
                }
                c if (c as u32) < 0x20 => {
                    self.i -= 1;
                    return Err(self.err("in string literal"));
                }
                c => out.push(c),
            }
        }
    }
    fn hex4(&mut self) -> Result<u32, String> {
        let h = self
            .b
            .get(self.i..self.i + 4)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u32::from_str_radix(h, 16).ok())
            .ok_or_else(|| self.err("in \\u hexadecimal character escape"))?;
        self.i += 4;
        Ok(h)
    }
}
