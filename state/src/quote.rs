//! Quoted strings, written once for the whole program, in the two forms Terraform uses:
//! HCL's (which is also JSON's), as it prints strings (`"a\nb"`, `"\u0001"`), and Go's `%q`,
//! as its messages quote names and values (`"a\nb"`, `"\x01"`).

/// Which quoting.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Quoting {
    /// HCL and JSON: `"`, `\`, `\n`, `\r`, `\t` escaped by name, other C0 controls as
    /// `\u00XX`, everything else as it is.
    Hcl,
    /// Go's `strconv.Quote`: also `\a`, `\b`, `\f`, `\v` by name, other C0 controls and DEL as
    /// `\xXX`, C1 controls as `\u00XX`. (Go also escapes the other characters Unicode calls
    /// unprintable, such as U+2028; those are written as they are here.)
    Go,
}

/// Appends `s` to `out` as a double-quoted string in the given quoting; runs of plain
/// characters are copied whole.
pub fn write_quoted_as(out: &mut String, s: &str, quoting: Quoting) {
    use std::fmt::Write as _;
    out.reserve(s.len() + 2);
    out.push('"');
    let b = s.as_bytes();
    let mut plain = 0;
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        let go = quoting == Quoting::Go;
        let named = match c {
            b'"' => "\\\"",
            b'\\' => "\\\\",
            b'\n' => "\\n",
            b'\r' => "\\r",
            b'\t' => "\\t",
            0x07 if go => "\\a",
            0x08 if go => "\\b",
            0x0b if go => "\\v",
            0x0c if go => "\\f",
            _ => "",
        };
        // A C1 control (U+0080–U+009F) is the two bytes C2 80–C2 9F.
        let c1 = go && c == 0xc2 && matches!(b.get(i + 1), Some(0x80..=0x9f));
        if named.is_empty() && !c1 && !(c < 0x20 || go && c == 0x7f) {
            i += 1;
            continue;
        }
        out.push_str(&s[plain..i]);
        if !named.is_empty() {
            out.push_str(named);
        } else if c1 {
            let _ = write!(out, "\\u{:04x}", b[i + 1]);
            i += 1;
        } else if go {
            let _ = write!(out, "\\x{c:02x}");
        } else {
            let _ = write!(out, "\\u{c:04x}");
        }
        i += 1;
        plain = i;
    }
    out.push_str(&s[plain..]);
    out.push('"');
}

/// Appends `s` as an HCL string literal.
pub fn write_quoted(out: &mut String, s: &str) {
    write_quoted_as(out, s, Quoting::Hcl)
}

/// `s` as an HCL (and JSON) string literal.
pub fn quote(s: &str) -> String {
    let mut out = String::new();
    write_quoted(&mut out, s);
    out
}

/// `s` as Go's `%q` writes it.
pub fn quote_go(s: &str) -> String {
    let mut out = String::new();
    write_quoted_as(&mut out, s, Quoting::Go);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hcl_quoting() {
        for (s, want) in [
            ("", r#""""#),
            ("plain", r#""plain""#),
            ("say \"hi\"", r#""say \"hi\"""#),
            ("back\\slash", r#""back\\slash""#),
            ("a\nb\r\tc", r#""a\nb\r\tc""#),
            ("\u{1}\u{1f}\u{7f}\u{8}", "\"\\u0001\\u001f\u{7f}\\u0008\""),
            ("ünïcødé ✓ \"mixed\"\n", "\"ünïcødé ✓ \\\"mixed\\\"\\n\""),
        ] {
            let mut out = String::from("prefix:");
            write_quoted(&mut out, s);
            assert_eq!(out, format!("prefix:{want}"), "{s:?}");
            assert_eq!(quote(s), want, "{s:?}");
        }
    }

    /// Each expected text is Go's `fmt.Sprintf("%q", s)`.
    #[test]
    fn go_quoting() {
        for (s, want) in [
            ("plain é", r#""plain é""#),
            ("say \"hi\"\\", r#""say \"hi\"\\""#),
            ("a\nb\r\tc", r#""a\nb\r\tc""#),
            ("\u{7}\u{8}\u{b}\u{c}", r#""\a\b\v\f""#),
            ("\u{1}\u{1f}\u{7f}", r#""\x01\x1f\x7f""#),
            ("\u{85}x\u{9f}", r#""\u0085x\u009f""#),
            ("\u{a0}✓", "\"\u{a0}✓\""),
        ] {
            assert_eq!(quote_go(s), want, "{s:?}");
        }
    }
}
