//! Values in HCL syntax, as `terraform console` prints them: `tolist([...])`, `toset([...])`,
//! `tomap({...})` for collections, `[...]` and `{...}` for tuples and objects, quoted keys,
//! heredocs for multi-line strings, `(known after apply)` and `(sensitive value)`.

use super::{Type, Value};
use crate::value::ValueMap;
use cairn_state::write_quoted;
use std::fmt::Write as _;

/// Renders a value as `terraform console` does.
pub(crate) fn format_hcl(v: &Value) -> String {
    let mut out = String::new();
    write_value(&mut out, v, 0);
    out
}

/// `format_hcl`, appended to `out` (no intermediate string).
pub(crate) fn write_hcl(out: &mut String, v: &Value) {
    write_value(out, v, 0);
}

fn indent(out: &mut String, level: usize) {
    for _ in 0..level {
        out.push_str("  ");
    }
}

fn write_value(out: &mut String, v: &Value, level: usize) {
    match v {
        Value::Null(t) => out.push_str(match t {
            Type::String => "tostring(null)",
            Type::Number => "tonumber(null)",
            Type::Bool => "tobool(null)",
            Type::List(_) => "tolist(null)",
            Type::Set(_) => "toset(null)",
            Type::Map(_) => "tomap(null)",
            _ => "null",
        }),
        Value::Unknown(_) => out.push_str("(known after apply)"),
        Value::Sensitive(_) => out.push_str("(sensitive value)"),
        Value::Bool(b) => {
            let _ = write!(out, "{b}");
        }
        Value::Number(n) => {
            let _ = write!(out, "{n}");
        }
        Value::String(s) => write_string(out, s, level),
        Value::List(items) => write_seq(out, "tolist(", items, ")", level),
        Value::Set(items) => write_seq(out, "toset(", items, ")", level),
        Value::Tuple(items) => write_seq(out, "", items, "", level),
        Value::Map(m) => write_map(out, "tomap(", m, ")", level),
        Value::Object(m) => write_map(out, "", m, "", level),
    }
}

fn write_string(out: &mut String, s: &str, level: usize) {
    if !s.contains('\n') {
        write_quoted(out, s);
    } else if level == 0 {
        out.push_str("<<EOT\n");
        out.push_str(s);
        out.push_str("\nEOT");
    } else {
        out.push_str("<<-EOT\n");
        for line in s.split('\n') {
            indent(out, level);
            out.push_str(line);
            out.push('\n');
        }
        indent(out, level);
        out.push_str("EOT");
    }
}

fn write_seq(out: &mut String, open: &str, items: &[Value], close: &str, level: usize) {
    out.push_str(open);
    if items.is_empty() {
        out.push_str("[]");
    } else {
        out.push_str("[\n");
        for item in items {
            indent(out, level + 1);
            write_value(out, item, level + 1);
            out.push_str(",\n");
        }
        indent(out, level);
        out.push(']');
    }
    out.push_str(close);
}

fn write_map(out: &mut String, open: &str, m: &ValueMap, close: &str, level: usize) {
    out.push_str(open);
    if m.is_empty() {
        out.push_str("{}");
    } else {
        out.push_str("{\n");
        for (k, item) in m {
            indent(out, level + 1);
            write_quoted(out, k);
            out.push_str(" = ");
            write_value(out, item, level + 1);
            out.push('\n');
        }
        indent(out, level);
        out.push('}');
    }
    out.push_str(close);
}
