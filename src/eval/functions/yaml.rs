//! `yamldecode`: YAML read by libyaml's parser (the `libyaml-safer` port, the same C
//! library go-yaml v2 ports) and turned into values as Terraform's YAML library,
//! go-cty-yaml v1.1.0 (Terraform 1.11), turns them: this file is a port of its `decode.go`
//! and `resolve.go` over the parser's events.
//!
//! One document (several are an error, as in Terraform). Mappings become objects (a
//! repeated key: the last one wins; `<<` merges a mapping in) and sequences tuples. Scalars
//! resolve YAML 1.1 flavoured: `yes`/`no`/`on`/`off`/`y`/`n` and `true`/`false` are
//! booleans, `~`, `null` and empty are null, integers match the YAML 1.2 patterns (`0x`/`0o`
//! prefixes, no underscores), timestamps become RFC 3339 strings, and the tags `!!str`,
//! `!!int`, `!!float`, `!!bool`, `!!null`, `!!binary`, `!!timestamp` are understood.
//! Positions in errors are go-cty-yaml's: its line is libyaml's zero-based line, and an
//! error on the first line has none.
//!
//! Differences kept on purpose: `.inf` is an error (Terraform gives an infinite number,
//! which `Value` cannot hold), and nesting deeper than `MAX_DEPTH` is an error rather than
//! a stack overflow.

use crate::eval::convert::{convert, friendly_name, parse_number, quote};
use crate::value::{Number, Type, Value};
use libyaml_safer::{Error, ErrorKind, Event, EventData, Mark, Parser, ScalarStyle};
use std::collections::BTreeMap;

const LONG_TAG: &str = "tag:yaml.org,2002:";

/// Decodes one YAML document; errors are `on line N, column M: message` as go-cty-yaml
/// words them.
pub(crate) fn decode(src: &str) -> Result<Value, String> {
    // libyaml-safer 0.3 panics on a double-quoted scalar whose escape backslash is the last
    // byte of the input (it reads the escape's letter past the end, where the C library reads
    // its NUL padding and reports an unknown escape). Ask the parser the same question with a
    // letter that is never an escape in its place: if that is the unknown escape, it is
    // libyaml's (and Terraform's) answer for the input as given; otherwise the backslash was
    // outside a double-quoted scalar and the input is read as it is.
    if let Some(head) = src.strip_suffix('\\') {
        let probe = format!("{head}\\q");
        if let Err(e) = decode_document(&probe) {
            if e.ends_with("found unknown escape character") {
                return Err(e);
            }
        }
    }
    decode_document(src)
}

fn decode_document(src: &str) -> Result<Value, String> {
    // go-cty-yaml reads an empty string as one line break.
    let mut input = if src.is_empty() {
        &b"\n"[..]
    } else {
        src.as_bytes()
    };
    let mut parser = Parser::new();
    parser.set_input_string(&mut input);
    let mut d = Decoder {
        parser,
        anchors: BTreeMap::new(),
        pending: BTreeMap::new(),
        depth: 0,
    };
    let evt = d.next()?;
    if !matches!(evt.data, EventData::StreamStart { .. }) {
        return Err(at(&evt, "missing stream start token"));
    }
    let evt = d.next()?;
    if !matches!(evt.data, EventData::DocumentStart { .. }) {
        return Err(at(&evt, "missing start of document"));
    }
    let value = d.value()?;
    let evt = d.next()?;
    match evt.data {
        EventData::DocumentEnd { .. } => {}
        EventData::DocumentStart { .. } => {
            return Err(at(&evt, "only a single document is allowed"))
        }
        _ => {
            let name = event_name(&evt.data);
            return Err(at(
                &evt,
                &format!("unexpected extra content ({name}) after value"),
            ));
        }
    }
    let evt = d.next()?;
    if !matches!(evt.data, EventData::StreamEnd) {
        return Err(at(&evt, "unexpected extra content after value"));
    }
    Ok(value)
}

/// An error at an event, placed as go-cty-yaml places it (`parseEventErrorWrap`).
fn at(evt: &Event, msg: &str) -> String {
    at_mark(evt.start_mark, msg)
}

fn at_mark(mark: Mark, msg: &str) -> String {
    if mark.line == 0 {
        msg.to_string()
    } else {
        format!("on line {}, column {}: {msg}", mark.line, mark.column + 1)
    }
}

/// A parser error, placed as go-cty-yaml's `parserErrorWrap` places it.
fn parser_error(e: Error) -> String {
    let cause = match e.problem() {
        "" => "invalid YAML syntax",
        p => p,
    };
    match (e.problem_mark(), e.context_mark()) {
        (Some(m), _) if m.line != 0 => {
            // Scanner errors are reported at the start of the next line.
            if e.kind() == ErrorKind::Scanner {
                format!("on line {}, column 1: {cause}", m.line + 1)
            } else {
                format!("on line {}, column {}: {cause}", m.line, m.column + 1)
            }
        }
        (_, Some(m)) if m.line != 0 => at_mark(m, cause),
        _ => cause.to_string(),
    }
}

/// go-yaml's name of an event type.
fn event_name(e: &EventData) -> &'static str {
    match e {
        EventData::StreamStart { .. } => "stream start",
        EventData::StreamEnd => "stream end",
        EventData::DocumentStart { .. } => "document start",
        EventData::DocumentEnd { .. } => "document end",
        EventData::Alias { .. } => "alias",
        EventData::Scalar { .. } => "scalar",
        EventData::SequenceStart { .. } => "sequence start",
        EventData::SequenceEnd => "sequence end",
        EventData::MappingStart { .. } => "mapping start",
        EventData::MappingEnd => "mapping end",
    }
}

struct Decoder<'r, 'b> {
    parser: Parser<&'b mut &'r [u8]>,
    /// Values of the anchors defined so far.
    anchors: BTreeMap<String, Value>,
    /// Anchors whose node is still being read (an alias to one is an error: values are
    /// finite).
    pending: BTreeMap<String, usize>,
    depth: usize,
}

impl Decoder<'_, '_> {
    fn next(&mut self) -> Result<Event, String> {
        self.parser.parse().map_err(parser_error)
    }

    fn value(&mut self) -> Result<Value, String> {
        let evt = self.next()?;
        self.node(evt)
    }

    /// The value of the node that starts with `evt`.
    fn node(&mut self, evt: Event) -> Result<Value, String> {
        self.depth += 1;
        if self.depth > super::MAX_DEPTH {
            let line = evt.start_mark.line + 1;
            return Err(format!("on line {line}, column 1: exceeded max depth"));
        }
        let v = self.node_inner(evt);
        self.depth -= 1;
        v
    }

    fn node_inner(&mut self, evt: Event) -> Result<Value, String> {
        match evt.data {
            EventData::Scalar {
                ref anchor,
                ref tag,
                ref value,
                style,
                ..
            } => {
                let tag = tag.as_deref().unwrap_or("");
                let v = resolve(tag, value, style).map_err(|e| at(&evt, &e))?;
                if let Some(a) = anchor {
                    self.anchors.insert(a.clone(), v.clone());
                }
                Ok(v)
            }
            EventData::Alias { ref anchor } => {
                if self.pending.contains_key(anchor) {
                    let msg = format!(
                        "cannot refer to anchor {} from inside its own definition",
                        quote(anchor)
                    );
                    return Err(at(&evt, &msg));
                }
                self.anchors.get(anchor).cloned().ok_or_else(|| {
                    at(
                        &evt,
                        &format!("reference to undefined anchor {}", quote(anchor)),
                    )
                })
            }
            EventData::MappingStart {
                ref anchor,
                ref tag,
                ..
            } => {
                check_tag(&evt, tag, "map", "mapping")?;
                self.collection(anchor.clone(), |d| d.mapping())
            }
            EventData::SequenceStart {
                ref anchor,
                ref tag,
                ..
            } => {
                check_tag(&evt, tag, "seq", "sequence")?;
                self.collection(anchor.clone(), |d| d.sequence())
            }
            EventData::DocumentStart { .. } => Err(at(&evt, "only a single document is allowed")),
            EventData::StreamEnd => Err(at(&evt, "expecting value but found end of stream")),
            ref other => {
                let msg = format!("unexpected parser event {}", event_name(other));
                Err(at(&evt, &msg))
            }
        }
    }

    /// Reads a mapping's or sequence's contents, defining its anchor around them.
    fn collection(
        &mut self,
        anchor: Option<String>,
        read: impl FnOnce(&mut Self) -> Result<Value, String>,
    ) -> Result<Value, String> {
        if let Some(a) = &anchor {
            *self.pending.entry(a.clone()).or_default() += 1;
        }
        let v = read(self)?;
        if let Some(a) = anchor {
            if let Some(n) = self.pending.get_mut(&a) {
                *n -= 1;
                if *n == 0 {
                    self.pending.remove(&a);
                }
            }
            self.anchors.insert(a, v.clone());
        }
        Ok(v)
    }

    fn mapping(&mut self) -> Result<Value, String> {
        // Pairs as they come (a later key wins, a merge key's too); sorted once at the end.
        let mut vals: Vec<(String, Value)> = Vec::new();
        loop {
            let evt = self.next()?;
            let EventData::Scalar {
                ref tag,
                ref value,
                style,
                ..
            } = evt.data
            else {
                if matches!(evt.data, EventData::MappingEnd) {
                    return Ok(Value::Object(vals.into_iter().collect()));
                }
                return Err(at(&evt, "only strings are allowed as mapping keys"));
            };
            let tag = tag.as_deref().unwrap_or("");
            let key = resolve(tag, value, style)?;
            if tag.is_empty() && value == "<<" {
                // A merge key: the value, a mapping, is merged into this one.
                match self.value()? {
                    Value::Object(m) | Value::Map(m) => vals.extend(m),
                    other => {
                        let ty = friendly_name(&other.type_of(), false);
                        return Err(at(&evt, &format!("cannot merge {ty} into mapping")));
                    }
                }
                continue;
            }
            let key = match convert(key, &Type::String) {
                Ok(Value::String(k)) => k,
                Ok(_) => return Err(at(&evt, "mapping key cannot be null")),
                Err(_) => return Err(at(&evt, "only strings are allowed as mapping keys")),
            };
            let v = self.value()?;
            vals.push((key, v));
        }
    }

    fn sequence(&mut self) -> Result<Value, String> {
        let mut vals = Vec::new();
        loop {
            let evt = self.next()?;
            if matches!(evt.data, EventData::SequenceEnd) {
                return Ok(Value::Tuple(vals));
            }
            vals.push(self.node(evt)?);
        }
    }
}

/// A mapping or sequence may carry only its own standard tag.
fn check_tag(evt: &Event, tag: &Option<String>, own: &str, what: &str) -> Result<(), String> {
    match tag.as_deref() {
        Some(t) if !t.is_empty() && t.strip_prefix(LONG_TAG) != Some(own) => {
            Err(at(evt, &format!("can't interpret {what} as {t}")))
        }
        _ => Ok(()),
    }
}

/// The YAML 1.2 integer pattern go-cty-yaml uses: `[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+`.
fn is_integer(s: &str) -> bool {
    let all = |b: &str, f: fn(&u8) -> bool| !b.is_empty() && b.as_bytes().iter().all(f);
    if let Some(b) = s.strip_prefix("0o") {
        return all(b, |c| (b'0'..=b'7').contains(c));
    }
    if let Some(b) = s.strip_prefix("0x") {
        return all(b, u8::is_ascii_hexdigit);
    }
    all(s.strip_prefix(['-', '+']).unwrap_or(s), u8::is_ascii_digit)
}

/// The float pattern: `[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?`.
fn is_float(s: &str) -> bool {
    let s = s.strip_prefix(['-', '+']).unwrap_or(s);
    let (mantissa, exp) = match s.find(['e', 'E']) {
        Some(i) => (&s[..i], Some(&s[i + 1..])),
        None => (s, None),
    };
    let digits = |d: &str| d.bytes().all(|c| c.is_ascii_digit());
    let mantissa_ok = match mantissa.split_once('.') {
        Some(("", frac)) => !frac.is_empty() && digits(frac),
        Some((int, frac)) => digits(int) && digits(frac),
        None => !mantissa.is_empty() && digits(mantissa),
    };
    let exp_ok = exp.is_none_or(|e| {
        let e = e.strip_prefix(['-', '+']).unwrap_or(e);
        !e.is_empty() && digits(e)
    });
    mantissa_ok && exp_ok
}

/// Go's `strconv.ParseInt(s, 0, 64)`, then `ParseUint`: prefixed (`0x`, `0o`, `0b`, `0`)
/// or decimal integers that fit 64 bits.
fn go_parse_int(s: &str) -> Option<Number> {
    let (neg, body) = match s.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, s.strip_prefix('+').unwrap_or(s)),
    };
    let (radix, digits) = if let Some(b) = body.strip_prefix("0x").or(body.strip_prefix("0X")) {
        (16, b)
    } else if let Some(b) = body.strip_prefix("0o").or(body.strip_prefix("0O")) {
        (8, b)
    } else if let Some(b) = body.strip_prefix("0b").or(body.strip_prefix("0B")) {
        (2, b)
    } else if body.len() > 1 && body.starts_with('0') {
        (8, &body[1..])
    } else {
        (10, body)
    };
    if digits.is_empty() || digits.starts_with(['+', '-']) {
        return None;
    }
    let magnitude = u64::from_str_radix(digits, radix).ok()?;
    let text = if neg {
        if magnitude > i64::MAX as u64 + 1 {
            return None;
        }
        format!("-{magnitude}")
    } else {
        magnitude.to_string()
    };
    parse_number(&text)
}

/// The first-character hint of go-yaml's resolve table: 'S' sign, 'D' digit, 'M' a
/// character some map entry starts with, '.' a possible float, 0 nothing to resolve.
fn hint(s: &str) -> u8 {
    match s.as_bytes().first() {
        None => b'N',
        Some(b'+' | b'-') => b'S',
        Some(b'0'..=b'9') => b'D',
        Some(b'y' | b'Y' | b'n' | b'N' | b't' | b'T' | b'f' | b'F' | b'o' | b'O' | b'~') => b'M',
        Some(b'.') => b'.',
        Some(_) => 0,
    }
}

/// The values go-yaml's resolve map gives words.
fn resolve_word(s: &str) -> Option<Result<Value, String>> {
    Some(Ok(match s {
        "y" | "Y" | "yes" | "Yes" | "YES" | "true" | "True" | "TRUE" | "on" | "On" | "ON" => {
            Value::Bool(true)
        }
        "n" | "N" | "no" | "No" | "NO" | "false" | "False" | "FALSE" | "off" | "Off" | "OFF" => {
            Value::Bool(false)
        }
        "" | "~" | "null" | "Null" | "NULL" => Value::Null(Type::Dynamic),
        ".inf" | ".Inf" | ".INF" | "+.inf" | "+.Inf" | "+.INF" | "-.inf" | "-.Inf" | "-.INF" => {
            return Some(Err("floating point infinity is not supported".into()))
        }
        _ => return None,
    }))
}

/// go-cty-yaml's `resolveScalar`: a scalar's value from its tag (long form, or empty),
/// text and style.
fn resolve(tag: &str, src: &str, style: ScalarStyle) -> Result<Value, String> {
    let short = tag.strip_prefix(LONG_TAG);
    if !tag.is_empty()
        && !matches!(
            short,
            Some("str" | "bool" | "int" | "float" | "null" | "timestamp" | "binary")
        )
    {
        return Err(format!("unsupported tag {}", quote(tag)));
    }
    let mut short = short.unwrap_or("");
    let h = hint(src);
    if h != 0 && short != "str" && short != "binary" {
        if matches!(style, ScalarStyle::SingleQuoted | ScalarStyle::DoubleQuoted) {
            return Ok(Value::String(src.to_string()));
        }
        if let Some(v) = resolve_word(src) {
            return v;
        }
        if short.is_empty() && matches!(src, ".nan" | ".NaN" | ".NAN") {
            return Err("floating point NaN is not supported".into());
        }
        match h {
            b'.' => {
                if let Some(n) = parse_number(src) {
                    return Ok(Value::Number(n));
                }
            }
            b'D' | b'S' => {
                if short.is_empty() || short == "timestamp" {
                    if let Some(t) = timestamp(src) {
                        return Ok(Value::String(t));
                    }
                }
                if is_integer(src) {
                    short = "int";
                } else if is_float(src) {
                    short = "float";
                }
            }
            _ => {}
        }
    }
    // An implied tag is named in its long form too, as go-cty-yaml names it.
    let cannot = || format!("cannot parse {} as {LONG_TAG}{short}", quote(src));
    match short {
        "str" | "" => Ok(Value::String(src.to_string())),
        "binary" => {
            use base64::Engine as _;
            base64::engine::general_purpose::STANDARD
                // Go's decoder skips line breaks.
                .decode(src.replace(['\r', '\n'], ""))
                .map(|_| Value::String(src.to_string()))
                .map_err(|_| format!("{}: not valid base64", cannot()))
        }
        "bool" => match resolve_word(src) {
            Some(Ok(v @ Value::Bool(_))) => Ok(v),
            _ => Err(cannot()),
        },
        "int" | "float" => {
            let plain = src.replace('_', "");
            parse_number(&plain)
                .or_else(|| go_parse_int(&plain))
                .map(Value::Number)
                .ok_or_else(cannot)
        }
        "timestamp" => timestamp(src).map(Value::String).ok_or_else(cannot),
        _ => Ok(Value::Null(Type::Dynamic)),
    }
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
        // A quoted scalar stays a string whatever its tag (go-cty-yaml's `resolveScalar`;
        // `terraform console` 1.11.4 gives "7").
        ok(
            "a: !!str 123\nb: !!int '7'",
            obj(vec![("a", s("123")), ("b", s("7"))]),
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
        // go-cty-yaml counts lines from zero here (`terraform console` 1.11.4).
        assert_eq!(
            decode("a: 1\n---\nb: 2"),
            Err("on line 1, column 1: unexpected extra content after value".into())
        );
        assert!(decode("a: [1, 2").is_err());
        assert!(decode("a: .nan").is_err());
        assert!(decode("a: *nope").is_err());
    }

    /// Each expected text is `terraform console` 1.11.4's for `yamldecode(SRC)`: the value
    /// as it prints it, or the function's error message.
    #[test]
    fn matches_terraform_console() {
        let cases: &[(&str, Result<&str, &str>)] = &[
        ("a: 1\n---\nb: 2", Err("on line 1, column 1: unexpected extra content after value")),
        ("a: [1, 2", Err("on line 1, column 1: did not find expected ',' or ']'")),
        ("a: *nope", Err("reference to undefined anchor \"nope\"")),
        ("a: .nan", Err("floating point NaN is not supported")),
        ("a: &x [*x]", Err("cannot refer to anchor \"x\" from inside its own definition")),
        ("a:\n  b: 1\n c: 2", Err("on line 2, column 2: did not find expected key")),
        ("{a: 1", Err("on line 1, column 1: did not find expected ',' or '}'")),
        ("a: !!foo x", Err("unsupported tag \"tag:yaml.org,2002:foo\"")),
        ("- a\nb: c", Err("on line 1, column 1: did not find expected '-' indicator")),
        ("\ta: 1", Err("found character that cannot start any token")),
        ("a: 1\n...\nb", Err("on line 2, column 1: did not find expected <document start>")),
        ("? [1]\n: 2", Err("only strings are allowed as mapping keys")),
        ("a: 'x", Err("found unexpected end of stream")),
        ("a: !!bool yes2", Err("cannot parse \"yes2\" as tag:yaml.org,2002:bool")),
        ("[1, 2]\n# c\n", Ok("[\n  1,\n  2,\n]")),
        ("--- |\n  x\n", Ok("<<EOT\nx\n\nEOT")),
        ("a: 2001-12-14 21:59:43.10 -5", Ok("{\n  \"a\" = \"2001-12-14 21:59:43.10 -5\"\n}")),
        ("a: 2001-12-14t21:59:43.10Z", Ok("{\n  \"a\" = \"2001-12-14T21:59:43Z\"\n}")),
        ("a: 2001-12-14 21:59:43.10", Ok("{\n  \"a\" = \"2001-12-14T21:59:43Z\"\n}")),
        ("a: 2001-1-2T3:04:05+02:00", Ok("{\n  \"a\" = \"2001-01-02T03:04:05+02:00\"\n}")),
        ("[1e3, +12, 012, 0o17, 0x, -1.5e-3, 1., .5e1, -.5, -0]", Ok("[\n  1000,\n  12,\n  12,\n  15,\n  \"0x\",\n  -0.0015,\n  1,\n  5,\n  -0.5,\n  -0,\n]")),
        ("a: !!binary aGVsbG8=", Ok("{\n  \"a\" = \"aGVsbG8=\"\n}")),
        ("a: !!binary 'aGVsbG8'", Err("cannot parse \"aGVsbG8\" as tag:yaml.org,2002:binary: not valid base64")),
        ("a: !!timestamp 2001-12-14", Ok("{\n  \"a\" = \"2001-12-14T00:00:00Z\"\n}")),
        ("x: !!int 0x1FFFFFFFFFFFFFFFF", Err("cannot parse \"0x1FFFFFFFFFFFFFFFF\" as tag:yaml.org,2002:int")),
        ("key: value\n  bad: 1", Err("on line 2, column 1: mapping values are not allowed in this context")),
        ("a: b: c", Err("mapping values are not allowed in this context")),
        ("1: a\ntrue: b\nnull: c", Err("on line 2, column 1: mapping key cannot be null")),
        ("[a, b]: c", Err("only strings are allowed as mapping keys")),
        ("a: !!str\nb: !!null x", Ok("{\n  \"a\" = \"\"\n  \"b\" = null\n}")),
        ("<<: [{a: 1}, {b: 2}]\nc: 3", Err("cannot merge tuple into mapping")),
        ("<<: 5", Err("cannot merge number into mapping")),
        ("a: !!map [1]", Err("can't interpret sequence as tag:yaml.org,2002:map")),
        ("a: &a 1\nb: &a 2\nc: *a", Ok("{\n  \"a\" = 1\n  \"b\" = 2\n  \"c\" = 2\n}")),
        ("%YAML 1.1\n---\na: 1", Ok("{\n  \"a\" = 1\n}")),
        ("a: 1\n\n\n  # x\nb: [\n 1,\n 2\n ]", Ok("{\n  \"a\" = 1\n  \"b\" = [\n    1,\n    2,\n  ]\n}")),
        ("a: |2\n   x\n  y\n", Ok("{\n  \"a\" = <<-EOT\n   x\n  y\n  \n  EOT\n}")),
        ("a: >-\n  one\n\n   two\n  three\n", Ok("{\n  \"a\" = <<-EOT\n  one\n  \n   two\n  three\n  EOT\n}")),
        ("!!str 12", Ok("\"12\"")),
        ("---\n...\n", Ok("null")),
        ("---", Ok("null")),
        ("- - - x", Ok("[\n  [\n    [\n      \"x\",\n    ],\n  ],\n]")),
        ("a:\n- 1\n- 2\nb: 3", Ok("{\n  \"a\" = [\n    1,\n    2,\n  ]\n  \"b\" = 3\n}")),
        ("a: 1 # c\n#d\n", Ok("{\n  \"a\" = 1\n}")),
        ("a: 'it''s'\nb: \"multi\n  line\"\nc: plain\n  continued", Ok("{\n  \"a\" = \"it's\"\n  \"b\" = \"multi line\"\n  \"c\" = \"plain continued\"\n}")),
        (" a: 1\n b: 2", Ok("{\n  \"a\" = 1\n  \"b\" = 2\n}")),
        ("a: @x", Err("found character that cannot start any token")),
        ("a: `x", Err("found character that cannot start any token")),
        ("{a: 1, b}", Ok("{\n  \"a\" = 1\n  \"b\" = null\n}")),
        ("[a: 1, b]", Ok("[\n  {\n    \"a\" = 1\n  },\n  \"b\",\n]")),
        ("? a\n: 1", Ok("{\n  \"a\" = 1\n}")),
        ("0.1", Ok("0.1")),
        ("1_000", Ok("\"1_000\"")),
        ("\"a\\qb\"", Err("found unknown escape character")),
        // A backslash as the input's last byte (libyaml-safer alone would panic here).
        ("\"\\", Err("found unknown escape character")),
        ("x: 1\ny: \"a\\", Err("on line 2, column 1: found unknown escape character")),
        ("a\\", Ok("\"a\\\\\"")),
        ("'a\\", Err("found unexpected end of stream")),
        ];
        for (src, want) in cases {
            let got = decode(src).map(|v| crate::value::format_hcl(&v));
            assert_eq!(got.as_deref().map_err(|e| e.as_str()), *want, "{src:?}");
        }
        // Terraform gives "Aé😀\u0085\u00a0" (the console escapes U+0085 and U+00A0, which
        // `format_hcl` does not yet): the decoded string is the same.
        assert_eq!(
            decode(r#"a: "\x41\u00e9\U0001F600\N\_""#),
            Ok(obj(vec![("a", s("Aé😀\u{85}\u{a0}"))]))
        );
        // The one difference kept: Terraform's infinite number, which `Value` cannot hold.
        assert_eq!(
            decode("+.inf"),
            Err("floating point infinity is not supported".into())
        );
    }
}
