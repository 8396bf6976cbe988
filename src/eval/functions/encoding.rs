//! Encoding functions: jsonencode, jsondecode, yamlencode, yamldecode, base64encode, base64decode,
//! base64gzip, rsadecrypt,
//! textencodebase64, textdecodebase64, urlencode, csvdecode.
//!
//! JSON is written as Go's `encoding/json` writes it (Terraform's output is byte-for-byte the
//! same): `<`, `>`, `&`, U+2028 and U+2029 are escaped, object keys are sorted, numbers are
//! written in plain decimal. JSON is read by `jsondecode.rs`, YAML by `yaml.rs`. YAML is written in the
//! style of Terraform's `yamlencode`: every string double-quoted except multi-line ones, which
//! use literal blocks.

use super::{arg_err, call_err, p, str_of, Def, FunctionContext, Res, Ret, P};
use crate::value::{Type, Value};
use base64::Engine as _;

pub(super) const DEFS: &[Def] = &[
    Def {
        name: "jsonencode",
        params: &[p("val", P::Any).null().unknown().dynamic_type()],
        variadic: None,
        ret: Ret::Fixed(P::Str),
        imp: jsonencode,
    },
    Def {
        name: "jsondecode",
        params: &[p("str", P::Str)],
        variadic: None,
        ret: Ret::From(super::ret_dynamic),
        imp: jsondecode,
    },
    Def {
        name: "yamlencode",
        params: &[p("value", P::Any).null().unknown().dynamic_type()],
        variadic: None,
        ret: Ret::Fixed(P::Str),
        imp: yamlencode,
    },
    Def {
        name: "yamldecode",
        params: &[p("src", P::Str)],
        variadic: None,
        ret: Ret::From(super::ret_dynamic),
        imp: yamldecode,
    },
    Def {
        name: "base64gzip",
        params: &[p("str", P::Str)],
        variadic: None,
        ret: Ret::Fixed(P::Str),
        imp: base64gzip,
    },
    Def {
        name: "base64encode",
        params: &[p("str", P::Str)],
        variadic: None,
        ret: Ret::Fixed(P::Str),
        imp: base64encode,
    },
    Def {
        name: "base64decode",
        params: &[p("str", P::Str)],
        variadic: None,
        ret: Ret::Fixed(P::Str),
        imp: base64decode,
    },
    Def {
        name: "textencodebase64",
        params: &[p("string", P::Str), p("encoding", P::Str)],
        variadic: None,
        ret: Ret::Fixed(P::Str),
        imp: textencodebase64,
    },
    Def {
        name: "textdecodebase64",
        params: &[p("source", P::Str), p("encoding", P::Str)],
        variadic: None,
        ret: Ret::Fixed(P::Str),
        imp: textdecodebase64,
    },
    Def {
        name: "urlencode",
        params: &[p("str", P::Str)],
        variadic: None,
        ret: Ret::Fixed(P::Str),
        imp: urlencode,
    },
    Def {
        name: "csvdecode",
        params: &[p("str", P::Str)],
        variadic: None,
        ret: Ret::From(super::ret_dynamic),
        imp: csvdecode,
    },
];

/// `jsonencode(val)`: unknown anywhere inside → unknown string.
fn jsonencode(a: Vec<Value>, _: &FunctionContext) -> Res {
    if !a[0].is_wholly_known() {
        return Ok(Value::Unknown(Type::String));
    }
    Ok(Value::String(json_text(&a[0])))
}

/// JSON text of a value, as Go's encoder writes it.
pub(crate) fn json_text(v: &Value) -> String {
    let mut out = String::new();
    write_json(v, &mut out);
    out
}

fn write_json(v: &Value, out: &mut String) {
    match v {
        Value::Null(_) | Value::Unknown(_) => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => out.push_str(&n.to_string()),
        Value::String(s) => write_json_string(s, out),
        Value::List(e) | Value::Set(e) | Value::Tuple(e) => {
            out.push('[');
            for (i, x) in e.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_json(x, out);
            }
            out.push(']');
        }
        Value::Map(m) | Value::Object(m) => {
            out.push('{');
            for (i, (k, x)) in m.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_json_string(k, out);
                out.push(':');
                write_json(x, out);
            }
            out.push('}');
        }
        Value::Sensitive(v) => write_json(v, out),
    }
}

fn write_json_string(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => {
                out.push_str(&format!("\\u{:04x}", c as u32))
            }
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

/// `jsondecode(str)`: see `jsondecode.rs`. Unknown → unknown (of unknown type).
fn jsondecode(a: Vec<Value>, _: &FunctionContext) -> Res {
    super::jsondecode::decode(str_of(&a[0])).map_err(call_err)
}

/// `yamlencode(value)`: unknown anywhere inside → unknown string.
fn yamlencode(a: Vec<Value>, _: &FunctionContext) -> Res {
    if !a[0].is_wholly_known() {
        return Ok(Value::Unknown(Type::String));
    }
    let mut out = String::new();
    let v = &a[0];
    match v.unmarked() {
        Value::Null(_) | Value::Bool(_) | Value::Number(_) => {
            yaml_scalar(v.unmarked(), 0, &mut out);
            out.push_str("\n...\n");
        }
        _ => yaml_node(v.unmarked(), 0, &mut out),
    }
    Ok(Value::String(out))
}

fn is_yaml_collection(v: &Value) -> bool {
    match v.unmarked() {
        Value::List(e) | Value::Set(e) | Value::Tuple(e) => !e.is_empty(),
        Value::Map(m) | Value::Object(m) => !m.is_empty(),
        _ => false,
    }
}

/// Writes a node that starts at the current position (after `key: ` / `- ` or at the start of
/// a line) and ends with a newline.
fn yaml_node(v: &Value, indent: usize, out: &mut String) {
    let pad = " ".repeat(indent);
    match v.unmarked() {
        Value::List(e) | Value::Set(e) | Value::Tuple(e) if !e.is_empty() => {
            for (i, x) in e.iter().enumerate() {
                if i > 0 {
                    out.push_str(&pad);
                }
                out.push_str("- ");
                if is_yaml_collection(x) {
                    yaml_node(x, indent + 2, out);
                } else {
                    yaml_scalar(x.unmarked(), indent + 2, out);
                    out.push('\n');
                }
            }
        }
        Value::Map(m) | Value::Object(m) if !m.is_empty() => {
            for (i, (k, x)) in m.iter().enumerate() {
                if i > 0 {
                    out.push_str(&pad);
                }
                yaml_key(k, out);
                out.push(':');
                let x = x.unmarked();
                match x {
                    Value::List(_) | Value::Set(_) | Value::Tuple(_) if is_yaml_collection(x) => {
                        out.push('\n');
                        out.push_str(&pad);
                        yaml_node(x, indent, out);
                    }
                    Value::Map(_) | Value::Object(_) if is_yaml_collection(x) => {
                        out.push('\n');
                        out.push_str(&" ".repeat(indent + 2));
                        yaml_node(x, indent + 2, out);
                    }
                    _ => {
                        out.push(' ');
                        yaml_scalar(x, indent + 2, out);
                        out.push('\n');
                    }
                }
            }
        }
        other => {
            yaml_scalar(other, indent, out);
            out.push('\n');
        }
    }
}

fn yaml_scalar(v: &Value, indent: usize, out: &mut String) {
    match v {
        Value::Null(_) | Value::Unknown(_) => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => out.push_str(&n.to_string()),
        Value::String(s) => yaml_string(s, indent, out),
        Value::List(_) | Value::Set(_) | Value::Tuple(_) => out.push_str("[]"),
        Value::Map(_) | Value::Object(_) => out.push_str("{}"),
        Value::Sensitive(v) => yaml_scalar(v, indent, out),
    }
}

/// Whether go-yaml writes `c` as it is inside a double-quoted scalar (its `is_printable`,
/// minus the line breaks it always escapes).
fn yaml_printable(c: char) -> bool {
    let u = c as u32;
    (c != '\u{feff}')
        && (c == '\n'
            || (0x20..=0x7e).contains(&u)
            || (0xa0..=0xd7ff).contains(&u)
            || (0xe000..=0xfffd).contains(&u))
}

/// A string scalar: a literal block when it has line breaks and YAML allows one, otherwise
/// double-quoted, folded at spaces past column 80 as go-yaml does (`allow_breaks` is false for
/// mapping keys).
fn yaml_string(s: &str, indent: usize, out: &mut String) {
    yaml_string_with(s, indent, out, true)
}

fn yaml_key(s: &str, out: &mut String) {
    yaml_string_with(s, 0, out, false)
}

fn yaml_string_with(s: &str, indent: usize, out: &mut String, allow_breaks: bool) {
    let indent = indent.max(2);
    let literal_ok = allow_breaks
        && s.contains('\n')
        && !s.ends_with(' ')
        && !s.contains(" \n")
        && s.chars()
            .all(|c| c != '\r' && (c == '\n' || yaml_printable(c)));
    if literal_ok {
        let body = s.trim_end_matches('\n');
        let trailing = s.len() - body.len();
        out.push('|');
        if s.starts_with([' ', '\n']) {
            out.push('2');
        }
        out.push_str(match trailing {
            0 => "-",
            1 => "",
            _ => "+",
        });
        let pad = " ".repeat(indent);
        for line in body.split('\n') {
            out.push('\n');
            if !line.is_empty() {
                out.push_str(&pad);
                out.push_str(line);
            }
        }
        for _ in 1..trailing {
            out.push('\n');
        }
        return;
    }
    let mut column = out.len() - out.rfind('\n').map(|i| i + 1).unwrap_or(0);
    let chars: Vec<char> = s.chars().collect();
    out.push('"');
    column += 1;
    let mut spaces = false;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == ' ' {
            if allow_breaks && !spaces && column > 80 && i != 0 && i != chars.len() - 1 {
                out.push('\n');
                out.push_str(&" ".repeat(indent));
                column = indent;
                if chars.get(i + 1) == Some(&' ') {
                    out.push('\\');
                    column += 1;
                }
            } else {
                out.push(' ');
                column += 1;
            }
            spaces = true;
            i += 1;
            continue;
        }
        spaces = false;
        let escaped: Option<String> = match c {
            '\0' => Some("\\0".into()),
            '\u{7}' => Some("\\a".into()),
            '\u{8}' => Some("\\b".into()),
            '\t' => Some("\\t".into()),
            '\n' => Some("\\n".into()),
            '\u{b}' => Some("\\v".into()),
            '\u{c}' => Some("\\f".into()),
            '\r' => Some("\\r".into()),
            '\u{1b}' => Some("\\e".into()),
            '"' => Some("\\\"".into()),
            '\\' => Some("\\\\".into()),
            '\u{85}' => Some("\\N".into()),
            '\u{a0}' => None,
            '\u{2028}' => Some("\\L".into()),
            '\u{2029}' => Some("\\P".into()),
            c if yaml_printable(c) => None,
            c if (c as u32) <= 0xff => Some(format!("\\x{:02X}", c as u32)),
            c if (c as u32) <= 0xffff => Some(format!("\\u{:04X}", c as u32)),
            c => Some(format!("\\U{:08X}", c as u32)),
        };
        match escaped {
            Some(e) => {
                column += e.len();
                out.push_str(&e);
            }
            None => {
                column += 1;
                out.push(c);
            }
        }
        i += 1;
    }
    out.push('"');
}

/// `yamldecode(src)`: see `yaml.rs` for what is supported. Unknown → unknown (of unknown type).
fn yamldecode(a: Vec<Value>, _: &FunctionContext) -> Res {
    super::yaml::decode(str_of(&a[0])).map_err(call_err)
}

/// `base64encode(str)`: the UTF-8 bytes of `str` in standard Base64. Unknown → unknown.
fn base64encode(a: Vec<Value>, _: &FunctionContext) -> Res {
    Ok(Value::String(
        base64::engine::general_purpose::STANDARD.encode(str_of(&a[0])),
    ))
}

/// `base64gzip(str)`: the string gzip-compressed, then Base64-encoded, laid out as Go's
/// `compress/gzip` writes it for Terraform (write, flush, close): a 10-byte header with no
/// name and mtime 0, the data compressed at the default level and ended by a sync flush, an
/// empty final stored block, then CRC-32 and length. The compressed blocks come from
/// miniz (flate2) rather than Go's compressor: for short strings the bytes are Terraform's
/// exactly; for long ones the matches chosen may differ, but the stream always decompresses
/// to the same string.
fn base64gzip(a: Vec<Value>, _: &FunctionContext) -> Res {
    use flate2::{Compress, Compression, FlushCompress};
    let data = str_of(&a[0]).as_bytes();
    let mut out: Vec<u8> = vec![0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff];
    let mut z = Compress::new(Compression::default(), false);
    let mut deflated = Vec::with_capacity(data.len() / 2 + 64);
    loop {
        let consumed = z.total_in() as usize;
        deflated.reserve(data.len() + 64);
        z.compress_vec(&data[consumed..], &mut deflated, FlushCompress::Sync)
            .map_err(|e| call_err(e.to_string()))?;
        // Done when everything went in and the flush left spare room in the buffer.
        if z.total_in() as usize == data.len() && deflated.len() < deflated.capacity() {
            break;
        }
    }
    out.extend_from_slice(&deflated);
    out.extend_from_slice(&[1, 0, 0, 0xff, 0xff]);
    let mut crc = flate2::Crc::new();
    crc.update(data);
    out.extend_from_slice(&crc.sum().to_le_bytes());
    out.extend_from_slice(&(data.len() as u32).to_le_bytes());
    Ok(Value::String(
        base64::engine::general_purpose::STANDARD.encode(out),
    ))
}

/// `base64decode(str)`: the decoded bytes, which must be UTF-8. Unknown → unknown.
fn base64decode(a: Vec<Value>, _: &FunctionContext) -> Res {
    let text = str_of(&a[0]);
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(text)
        .map_err(|_| {
            call_err(format!(
                "failed to decode base64 data {}",
                crate::eval::convert::quote(text)
            ))
        })?;
    String::from_utf8(bytes)
        .map(Value::String)
        .map_err(|_| call_err("the result of decoding the provided string is not valid UTF-8"))
}

/// The text encodings `textencodebase64`/`textdecodebase64` know: the Unicode ones, Latin-1,
/// ASCII and Windows-1252 (the ones configurations use, for Windows user data and legacy
/// files). Named by IANA name or alias, case-insensitively.
#[derive(Clone, Copy, PartialEq)]
enum TextEncoding {
    Utf8,
    Utf16,
    Utf16Be,
    Utf16Le,
    Latin1,
    Ascii,
    Windows1252,
}

impl TextEncoding {
    fn lookup(name: &str) -> Option<TextEncoding> {
        let n = name.to_ascii_lowercase();
        Some(match n.as_str() {
            "utf-8" | "utf8" | "csutf8" => TextEncoding::Utf8,
            "utf-16" | "utf16" | "csutf16" => TextEncoding::Utf16,
            "utf-16be" | "csutf16be" => TextEncoding::Utf16Be,
            "utf-16le" | "csutf16le" => TextEncoding::Utf16Le,
            "iso-8859-1" | "iso_8859-1" | "iso_8859-1:1987" | "iso-ir-100" | "latin1" | "l1"
            | "ibm819" | "cp819" | "csisolatin1" => TextEncoding::Latin1,
            "us-ascii" | "ascii" | "iso646-us" | "us" | "ibm367" | "cp367" | "csascii"
            | "ansi_x3.4-1968" | "ansi_x3.4-1986" | "iso-ir-6" | "iso_646.irv:1991" => {
                TextEncoding::Ascii
            }
            "windows-1252" | "cp1252" | "cswindows1252" => TextEncoding::Windows1252,
            _ => return None,
        })
    }
    fn name(self) -> &'static str {
        match self {
            TextEncoding::Utf8 => "UTF-8",
            TextEncoding::Utf16 => "UTF-16",
            TextEncoding::Utf16Be => "UTF-16BE",
            TextEncoding::Utf16Le => "UTF-16LE",
            TextEncoding::Latin1 => "ISO_8859-1:1987",
            TextEncoding::Ascii => "US-ASCII",
            TextEncoding::Windows1252 => "windows-1252",
        }
    }
}

/// Windows-1252's characters for bytes 0x80–0x9F (undefined bytes map to the C1 control of
/// the same number, as the WHATWG encoding standard does).
const CP1252_HIGH: [u16; 32] = [
    0x20AC, 0x0081, 0x201A, 0x0192, 0x201E, 0x2026, 0x2020, 0x2021, 0x02C6, 0x2030, 0x0160, 0x2039,
    0x0152, 0x008D, 0x017D, 0x008F, 0x0090, 0x2018, 0x2019, 0x201C, 0x201D, 0x2022, 0x2013, 0x2014,
    0x02DC, 0x2122, 0x0161, 0x203A, 0x0153, 0x009D, 0x017E, 0x0178,
];

fn encoding_arg(v: &Value) -> Result<TextEncoding, super::Fail> {
    let name = str_of(v);
    TextEncoding::lookup(name).ok_or_else(|| {
        arg_err(
            1,
            format!(
                "{} is not a supported IANA encoding name or alias in this Cairn version",
                crate::eval::convert::quote(name)
            ),
        )
    })
}

/// `textencodebase64(string, encoding)`: the string encoded in the named encoding, in Base64.
/// Characters the encoding cannot represent are an error. Unknown → unknown.
fn textencodebase64(a: Vec<Value>, _: &FunctionContext) -> Res {
    let enc = encoding_arg(&a[1])?;
    let text = str_of(&a[0]);
    let unrepresentable = || {
        arg_err(
            0,
            format!(
                "the given string contains characters that cannot be represented in {}",
                enc.name()
            ),
        )
    };
    let single = |c: char| -> Option<u8> {
        let u = c as u32;
        match enc {
            TextEncoding::Ascii => (u < 0x80).then_some(u as u8),
            TextEncoding::Latin1 => (u < 0x100).then_some(u as u8),
            _ => {
                if u < 0x80 || (0xA0..0x100).contains(&u) {
                    Some(u as u8)
                } else {
                    CP1252_HIGH
                        .iter()
                        .position(|x| u32::from(*x) == u)
                        .map(|i| 0x80 + i as u8)
                }
            }
        }
    };
    let bytes: Vec<u8> = match enc {
        TextEncoding::Utf8 => text.as_bytes().to_vec(),
        TextEncoding::Utf16 | TextEncoding::Utf16Be => {
            let mut b: Vec<u8> = if enc == TextEncoding::Utf16 {
                vec![0xFE, 0xFF]
            } else {
                Vec::new()
            };
            b.extend(text.encode_utf16().flat_map(u16::to_be_bytes));
            b
        }
        TextEncoding::Utf16Le => text.encode_utf16().flat_map(u16::to_le_bytes).collect(),
        _ => text
            .chars()
            .map(|c| single(c).ok_or_else(unrepresentable))
            .collect::<Result<_, _>>()?,
    };
    Ok(Value::String(
        base64::engine::general_purpose::STANDARD.encode(bytes),
    ))
}

/// `textdecodebase64(source, encoding)`: Base64 bytes decoded from the named encoding.
/// Unknown → unknown.
fn textdecodebase64(a: Vec<Value>, _: &FunctionContext) -> Res {
    let enc = encoding_arg(&a[1])?;
    let src = str_of(&a[0]);
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(src)
        .map_err(|e| {
            let offset = match e {
                base64::DecodeError::InvalidByte(o, _) => o,
                base64::DecodeError::InvalidLastSymbol(o, _) => o,
                _ => src.len().saturating_sub(1),
            };
            arg_err(
                0,
                format!("the given value is has an invalid base64 symbol at offset {offset}"),
            )
        })?;
    let undefined = || {
        arg_err(
            0,
            format!(
                "the given string contains symbols that are not defined for {}",
                enc.name()
            ),
        )
    };
    let utf16 = |units: Vec<u16>| String::from_utf16(&units).map_err(|_| undefined());
    let pairs = |b: &[u8], be: bool| -> Result<Vec<u16>, super::Fail> {
        if !b.len().is_multiple_of(2) {
            return Err(undefined());
        }
        Ok(b.chunks(2)
            .map(|c| {
                if be {
                    u16::from_be_bytes([c[0], c[1]])
                } else {
                    u16::from_le_bytes([c[0], c[1]])
                }
            })
            .collect())
    };
    let text = match enc {
        TextEncoding::Utf8 => String::from_utf8(bytes).map_err(|_| undefined())?,
        TextEncoding::Utf16Be => utf16(pairs(&bytes, true)?)?,
        TextEncoding::Utf16Le => utf16(pairs(&bytes, false)?)?,
        TextEncoding::Utf16 => match bytes.as_slice() {
            [0xFF, 0xFE, rest @ ..] => utf16(pairs(rest, false)?)?,
            [0xFE, 0xFF, rest @ ..] => utf16(pairs(rest, true)?)?,
            rest => utf16(pairs(rest, true)?)?,
        },
        TextEncoding::Ascii => {
            if bytes.iter().any(|b| *b >= 0x80) {
                return Err(undefined());
            }
            bytes.iter().map(|b| *b as char).collect()
        }
        TextEncoding::Latin1 => bytes.iter().map(|b| *b as char).collect(),
        TextEncoding::Windows1252 => bytes
            .iter()
            .map(|b| match b {
                0x80..=0x9F => char::from_u32(u32::from(CP1252_HIGH[(b - 0x80) as usize]))
                    .unwrap_or('\u{FFFD}'),
                b => *b as char,
            })
            .collect(),
    };
    Ok(Value::String(text))
}

/// `urlencode(str)`: Go's `url.QueryEscape` (spaces become `+`). Unknown → unknown.
fn urlencode(a: Vec<Value>, _: &FunctionContext) -> Res {
    let mut out = String::new();
    for b in str_of(&a[0]).bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                out.push(b as char)
            }
            b' ' => out.push('+'),
            b => out.push_str(&format!("%{b:02X}")),
        }
    }
    Ok(Value::String(out))
}

/// `csvdecode(str)`: RFC 4180 CSV whose first line names the columns; a list of objects with
/// string attributes. Unknown → unknown.
fn csvdecode(a: Vec<Value>, _: &FunctionContext) -> Res {
    let records = parse_csv(str_of(&a[0])).map_err(call_err)?;
    let mut it = records.into_iter();
    let Some((_, header)) = it.next() else {
        return Err(call_err("missing header line"));
    };
    for (i, h) in header.iter().enumerate() {
        if header[..i].contains(h) {
            return Err(call_err(format!(
                "duplicate column name {}",
                crate::eval::convert::quote(h)
            )));
        }
    }
    let mut rows = Vec::new();
    for (line, rec) in it {
        if rec.len() != header.len() {
            return Err(call_err(format!(
                "CSV parse error on line {line}: wrong number of fields"
            )));
        }
        rows.push(Value::Object(
            header
                .iter()
                .cloned()
                .zip(rec.into_iter().map(Value::String))
                .collect(),
        ));
    }
    Ok(Value::List(rows))
}

/// Parses CSV as Go's `encoding/csv` does (quoted fields, doubled quotes, blank lines
/// skipped); each record comes with its line number.
fn parse_csv(text: &str) -> Result<Vec<(usize, Vec<String>)>, String> {
    let chars: Vec<char> = text.chars().collect();
    let mut records = Vec::new();
    let mut i = 0;
    let mut line = 1;
    while i < chars.len() {
        // Blank lines are skipped.
        if chars[i] == '\n' || (chars[i] == '\r' && chars.get(i + 1) == Some(&'\n')) {
            i += if chars[i] == '\r' { 2 } else { 1 };
            line += 1;
            continue;
        }
        let start_line = line;
        let mut fields = Vec::new();
        loop {
            let mut field = String::new();
            if chars.get(i) == Some(&'"') {
                i += 1;
                loop {
                    match chars.get(i) {
                        None => {
                            return Err(format!(
                                "CSV parse error on line {start_line}: extraneous or missing \" \
                                 in quoted-field"
                            ))
                        }
                        Some('"') if chars.get(i + 1) == Some(&'"') => {
                            field.push('"');
                            i += 2;
                        }
                        Some('"') => {
                            i += 1;
                            break;
                        }
                        Some(&c) => {
                            if c == '\n' {
                                line += 1;
                            }
                            field.push(c);
                            i += 1;
                        }
                    }
                }
                match chars.get(i) {
                    None | Some(',') | Some('\n') => {}
                    Some('\r') if chars.get(i + 1) == Some(&'\n') => {}
                    Some(_) => {
                        return Err(format!(
                            "CSV parse error on line {line}: extraneous or missing \" in \
                             quoted-field"
                        ))
                    }
                }
            } else {
                while let Some(&c) = chars.get(i) {
                    if c == ',' || c == '\n' || (c == '\r' && chars.get(i + 1) == Some(&'\n')) {
                        break;
                    }
                    if c == '"' {
                        return Err(format!(
                            "CSV parse error on line {line}: bare \" in non-quoted-field"
                        ));
                    }
                    field.push(c);
                    i += 1;
                }
            }
            fields.push(field);
            match chars.get(i) {
                Some(',') => i += 1,
                Some('\r') => {
                    i += 2;
                    line += 1;
                    break;
                }
                Some('\n') => {
                    i += 1;
                    line += 1;
                    break;
                }
                _ => break,
            }
        }
        records.push((start_line, fields));
    }
    Ok(records)
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use crate::value::{Type, Value};

    #[test]
    fn json() {
        // Expected texts from `terraform console` (1.11).
        check(
            "jsonencode",
            vec![obj(vec![
                ("a", s("<&>")),
                ("b", tup(vec![n(1), num("1.5"), b(true), Value::null()])),
                ("c", s("\u{2028}\t\u{1}")),
            ])],
            s(r#"{"a":"\u003c\u0026\u003e","b":[1,1.5,true,null],"c":"\u2028\t\u0001"}"#),
        );
        check(
            "jsonencode",
            vec![tup(vec![unk(Type::String)])],
            unk(Type::String),
        );
        check(
            "jsonencode",
            vec![s("x").sensitive()],
            s("\"x\"").sensitive(),
        );
        check(
            "jsondecode",
            vec![s(
                r#"{"a": [1, 12345678901234567890123, "x\u00e9"], "b": null}"#,
            )],
            obj(vec![
                (
                    "a",
                    tup(vec![n(1), num("12345678901234567890123"), s("xé")]),
                ),
                ("b", Value::null()),
            ]),
        );
        check_err(
            "jsondecode",
            vec![s("[1,]")],
            "Call to function \"jsondecode\" failed: invalid character ']' looking for \
             beginning of value.",
        );
        // Each message as `terraform console` (1.11) gives it.
        for (text, msg) in [
            ("", "EOF"),
            ("{x", "invalid character 'x'"),
            ("{\"a\" 1}", "invalid character '1' after object key"),
            ("[1 2]", "invalid character '2' after array element"),
            (
                "{\"a\":}",
                "invalid character '}' looking for beginning of value",
            ),
            ("tru", "unexpected EOF"),
            ("1 2", "extraneous data after JSON object"),
            ("\"abc", "unexpected EOF"),
            (
                "{\"a\":1,}",
                "invalid character '}' looking for beginning of object key string",
            ),
            ("[1", "EOF"),
            ("01", "extraneous data after JSON object"),
            ("  ", "EOF"),
        ] {
            check_err(
                "jsondecode",
                vec![s(text)],
                &format!("Call to function \"jsondecode\" failed: {msg}."),
            );
        }
        check(
            "jsondecode",
            vec![s("{\"a\":1, \"a\":2}")],
            obj(vec![("a", n(2))]),
        );
        check("jsondecode", vec![unk(Type::String)], unk(Type::Dynamic));
        let nested = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
        assert!(super::super::testing::run("jsondecode", vec![s(&nested(200))]).is_ok());
        assert!(super::super::testing::run("yamldecode", vec![s(&nested(200))]).is_ok());
        let deep = nested(100_000);
        check_err(
            "jsondecode",
            vec![s(&deep)],
            "Call to function \"jsondecode\" failed: exceeded max depth.",
        );
        check_err(
            "yamldecode",
            vec![s(&deep)],
            "Call to function \"yamldecode\" failed: on line 1, column 1: exceeded max depth.",
        );
    }

    #[test]
    fn yaml() {
        // Expected text from `terraform console` (1.11).
        let v = obj(vec![
            ("a", n(1)),
            ("b", strs(&["x", "y"])),
            ("c", obj(vec![("d", b(true)), ("e", Value::null())])),
            ("f", s("multi\nline")),
            ("g", tup(vec![])),
            ("h", obj(vec![])),
            ("i", s("")),
            ("j", s("true")),
            ("l", num("1.5")),
            ("m", s("a: b")),
            (
                "n",
                tup(vec![tup(vec![n(1), n(2)]), obj(vec![("x", n(1))])]),
            ),
            ("o", s("  lead")),
        ]);
        let expected = "\"a\": 1\n\"b\":\n- \"x\"\n- \"y\"\n\"c\":\n  \"d\": true\n  \"e\": null\n\
                        \"f\": |-\n  multi\n  line\n\"g\": []\n\"h\": {}\n\"i\": \"\"\n\
                        \"j\": \"true\"\n\"l\": 1.5\n\"m\": \"a: b\"\n\"n\":\n- - 1\n  - 2\n\
                        - \"x\": 1\n\"o\": \"  lead\"\n";
        check("yamlencode", vec![v], s(expected));
        check("yamlencode", vec![s("x")], s("\"x\"\n"));
        // Long strings fold at column 80; strings with leading breaks get an indentation
        // indicator; characters outside the printable set are escaped (terraform console).
        let long = "aaaaaaaaaa bbbbbbbbbb cccccccccc dddddddddd eeeeeeeeee ffffffffff gggggggggg \
                    hhhhhhhhhh iiiiiiiiii";
        check(
            "yamlencode",
            vec![obj(vec![("x", obj(vec![("y", s(long))]))])],
            s("\"x\":\n  \"y\": \"aaaaaaaaaa bbbbbbbbbb cccccccccc dddddddddd eeeeeeeeee ffffffffff \
               gggggggggg\n    hhhhhhhhhh iiiiiiiiii\"\n"),
        );
        check(
            "yamlencode",
            vec![tup(vec![s(&long.replace("h iii", "h  iii"))])],
            s(
                "- \"aaaaaaaaaa bbbbbbbbbb cccccccccc dddddddddd eeeeeeeeee ffffffffff gggggggggg \
               hhhhhhhhhh\n  \\ iiiiiiiiii\"\n",
            ),
        );
        check(
            "yamlencode",
            vec![obj(vec![
                ("d", s("\nlead")),
                ("e", s("é\u{7}")),
                ("f", s("x \n y")),
            ])],
            s("\"d\": |2-\n\n  lead\n\"e\": \"é\\a\"\n\"f\": \"x \\n y\"\n"),
        );
        check(
            "yamlencode",
            vec![tup(vec![s("😀 \u{a0}\u{85}x")])],
            s("- \"\\U0001F600 \u{a0}\\Nx\"\n"),
        );
        check("yamlencode", vec![b(true)], s("true\n...\n"));
        check("yamlencode", vec![tup(vec![])], s("[]\n"));
    }

    #[test]
    fn text_encodings() {
        // Expected values and messages from `terraform console` (1.11).
        let enc = |text: &str, e: &str, out: &str| {
            check("textencodebase64", vec![s(text), s(e)], s(out));
            check("textdecodebase64", vec![s(out), s(e)], s(text));
        };
        enc(
            "Hello World",
            "UTF-16LE",
            "SABlAGwAbABvACAAVwBvAHIAbABkAA==",
        );
        enc("Hé", "UTF-16", "/v8ASADp");
        enc("Hé", "utf-16be", "AEgA6Q==");
        enc("Hé", "ISO-8859-1", "SOk=");
        enc("H€", "windows-1252", "SIA=");
        enc("H", "latin1", "SA==");
        check_err(
            "textencodebase64",
            vec![s("H€"), s("ISO-8859-1")],
            "Invalid value for \"string\" parameter: the given string contains characters that \
             cannot be represented in ISO_8859-1:1987.",
        );
        check_err(
            "textencodebase64",
            vec![s("Hé"), s("US-ASCII")],
            "Invalid value for \"string\" parameter: the given string contains characters that \
             cannot be represented in US-ASCII.",
        );
        check_err(
            "textdecodebase64",
            vec![s("6Q=="), s("UTF-8")],
            "Invalid value for \"source\" parameter: the given string contains symbols that are \
             not defined for UTF-8.",
        );
        check_err(
            "textdecodebase64",
            vec![s("x"), s("UTF-8")],
            "Invalid value for \"source\" parameter: the given value is has an invalid base64 \
             symbol at offset 0.",
        );
        check_err(
            "textencodebase64",
            vec![s("x"), s("Shift_JIS")],
            "Invalid value for \"encoding\" parameter: \"Shift_JIS\" is not a supported IANA \
             encoding name or alias in this Cairn version.",
        );
    }

    #[test]
    fn base64_and_url() {
        check("base64encode", vec![s("hello")], s("aGVsbG8="));
        check("base64decode", vec![s("aGVsbG8=")], s("hello"));
        check_err(
            "base64decode",
            vec![s("aGVsbG8")],
            "Call to function \"base64decode\" failed: failed to decode base64 data \"aGVsbG8\".",
        );
        check_err(
            "base64decode",
            vec![s("/w==")],
            "Call to function \"base64decode\" failed: the result of decoding the provided \
             string is not valid UTF-8.",
        );
        check(
            "urlencode",
            vec![s("a b&c=d/é~_.-")],
            s("a+b%26c%3Dd%2F%C3%A9~_.-"),
        );
    }

    #[test]
    fn csv() {
        check(
            "csvdecode",
            vec![s("a,b\n1,2\n3,4")],
            list(vec![
                obj(vec![("a", s("1")), ("b", s("2"))]),
                obj(vec![("a", s("3")), ("b", s("4"))]),
            ]),
        );
        check(
            "csvdecode",
            vec![s("a,\"b c\"\n\"x\"\"y\",2\n")],
            list(vec![obj(vec![("a", s("x\"y")), ("b c", s("2"))])]),
        );
        check_err(
            "csvdecode",
            vec![s("a,b\n1,2,3")],
            "Call to function \"csvdecode\" failed: CSV parse error on line 2: wrong number of \
             fields.",
        );
        check_err(
            "csvdecode",
            vec![s("")],
            "Call to function \"csvdecode\" failed: missing header line.",
        );
    }
}

#[cfg(test)]
mod gzip_tests {
    use super::*;
    use std::io::Read as _;

    /// Whatever blocks the compressor chose, the stream is a valid gzip member of the string.
    #[test]
    fn base64gzip_round_trips() {
        let root = std::path::Path::new(".");
        let ctx = FunctionContext {
            module_dir: root,
            root_dir: root,
            settle_impure: false,
        };
        for s in ["", "test", &"hello world ✓ ".repeat(500)] {
            let Ok(Value::String(b64)) = base64gzip(vec![Value::String(s.to_string())], &ctx)
            else {
                panic!("base64gzip failed for {s:?}");
            };
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(b64)
                .expect("base64");
            let mut out = String::new();
            flate2::read::GzDecoder::new(&bytes[..])
                .read_to_string(&mut out)
                .expect("gzip");
            assert_eq!(out, s);
        }
    }
}
