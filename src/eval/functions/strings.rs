//! String functions: format, formatlist, join, split, replace, regex, regexall, substr, trim*,
//! upper, lower, title, indent, startswith, endswith, strrev, chomp, strcontains.
//!
//! "Character" means grapheme cluster here, as in Terraform: `substr`, `strrev`, `length` and
//! `format` widths count user-perceived characters, so combining marks stay with their base.
//! Unless a function's doc says otherwise, an unknown argument gives an unknown result.

use super::{
    arg_err, call_err, elems_of, int_arg, p, str_of, Def, FunctionContext, Param, Res, Ret, P,
};
use crate::eval::convert::{self, quote};
use crate::value::{Type, Value};
use bigdecimal::num_bigint::BigInt;
use bigdecimal::{BigDecimal, RoundingMode};
use regex::Regex;
use unicode_segmentation::UnicodeSegmentation;

const STR: P = P::Str;

/// The widest padding `indent` and `format` produce: beyond it a typo (`%9999999999d`) would
/// exhaust memory instead of failing.
const MAX_PAD: usize = 1_000_000;
const STR_PARAM: &[Param] = &[p("str", STR)];

pub(super) const DEFS: &[Def] = &[
    Def {
        name: "upper",
        params: STR_PARAM,
        variadic: None,
        ret: Ret::Fixed(STR),
        imp: upper,
    },
    Def {
        name: "lower",
        params: STR_PARAM,
        variadic: None,
        ret: Ret::Fixed(STR),
        imp: lower,
    },
    Def {
        name: "title",
        params: STR_PARAM,
        variadic: None,
        ret: Ret::Fixed(STR),
        imp: title,
    },
    Def {
        name: "strrev",
        params: STR_PARAM,
        variadic: None,
        ret: Ret::Fixed(STR),
        imp: strrev,
    },
    Def {
        name: "chomp",
        params: STR_PARAM,
        variadic: None,
        ret: Ret::Fixed(STR),
        imp: chomp,
    },
    Def {
        name: "trimspace",
        params: STR_PARAM,
        variadic: None,
        ret: Ret::Fixed(STR),
        imp: trimspace,
    },
    Def {
        name: "trim",
        params: &[p("str", STR), p("cutset", STR)],
        variadic: None,
        ret: Ret::Fixed(STR),
        imp: trim,
    },
    Def {
        name: "trimprefix",
        params: &[p("str", STR), p("prefix", STR)],
        variadic: None,
        ret: Ret::Fixed(STR),
        imp: trimprefix,
    },
    Def {
        name: "trimsuffix",
        params: &[p("str", STR), p("suffix", STR)],
        variadic: None,
        ret: Ret::Fixed(STR),
        imp: trimsuffix,
    },
    Def {
        name: "startswith",
        params: &[p("str", STR), p("prefix", STR)],
        variadic: None,
        ret: Ret::Fixed(P::Bool),
        imp: startswith,
    },
    Def {
        name: "endswith",
        params: &[p("str", STR), p("suffix", STR)],
        variadic: None,
        ret: Ret::Fixed(P::Bool),
        imp: endswith,
    },
    Def {
        name: "strcontains",
        params: &[p("str", STR), p("substr", STR)],
        variadic: None,
        ret: Ret::Fixed(P::Bool),
        imp: strcontains,
    },
    Def {
        name: "indent",
        params: &[p("spaces", P::Num), p("str", STR)],
        variadic: None,
        ret: Ret::Fixed(STR),
        imp: indent,
    },
    Def {
        name: "substr",
        params: &[p("str", STR), p("offset", P::Num), p("length", P::Num)],
        variadic: None,
        ret: Ret::Fixed(STR),
        imp: substr,
    },
    Def {
        name: "split",
        params: &[p("separator", STR), p("str", STR)],
        variadic: None,
        ret: Ret::Fixed(P::List(&STR)),
        imp: split,
    },
    Def {
        name: "join",
        params: &[p("separator", STR)],
        variadic: Some(p("lists", P::List(&STR))),
        ret: Ret::Fixed(STR),
        imp: join,
    },
    Def {
        name: "replace",
        params: &[p("str", STR), p("substr", STR), p("replace", STR)],
        variadic: None,
        ret: Ret::Fixed(STR),
        imp: replace,
    },
    Def {
        name: "regex",
        params: &[p("pattern", STR), p("string", STR)],
        variadic: None,
        ret: Ret::From(regex_ret),
        imp: regex_fn,
    },
    Def {
        name: "regexall",
        params: &[p("pattern", STR), p("string", STR)],
        variadic: None,
        ret: Ret::From(regexall_ret),
        imp: regexall,
    },
    Def {
        name: "format",
        params: &[p("format", STR)],
        variadic: Some(p("args", P::Any).null().unknown()),
        ret: Ret::Fixed(STR),
        imp: format,
    },
    Def {
        name: "formatlist",
        params: &[p("format", STR)],
        variadic: Some(p("args", P::Any).null().unknown()),
        ret: Ret::Fixed(P::List(&STR)),
        imp: formatlist,
    },
];

fn s(v: String) -> Value {
    Value::String(v)
}

/// Go's `unicode.ToUpper`/`ToLower` use the simple (one character to one character) case
/// mappings: characters whose full upper-case mapping is longer (`ß`, `ﬀ`) stay as they are,
/// and `İ`, the one character whose full lower-case mapping is longer, becomes `i`.
fn map_case(text: &str, upper: bool) -> String {
    text.chars()
        .map(|c| {
            let m: Vec<char> = if upper {
                c.to_uppercase().collect()
            } else {
                c.to_lowercase().collect()
            };
            match (m.len(), upper) {
                (1, _) => m[0],
                (_, false) => m.first().copied().unwrap_or(c),
                _ => c,
            }
        })
        .collect()
}

/// `upper(str)`: unknown str → unknown string.
fn upper(a: Vec<Value>, _: &FunctionContext) -> Res {
    Ok(s(map_case(str_of(&a[0]), true)))
}

/// `lower(str)`: unknown str → unknown string.
fn lower(a: Vec<Value>, _: &FunctionContext) -> Res {
    Ok(s(map_case(str_of(&a[0]), false)))
}

/// `title(str)`: the first letter of each word upper-cased (Go's `strings.Title`: words are
/// separated by anything but letters, digits, underscores and apostrophes... as Go decides).
/// Unknown str → unknown string.
fn title(a: Vec<Value>, _: &FunctionContext) -> Res {
    fn is_separator(c: char) -> bool {
        if c.is_ascii() {
            return !(c.is_ascii_alphanumeric() || c == '_');
        }
        if c.is_alphanumeric() {
            return false;
        }
        c.is_whitespace()
    }
    let mut prev = ' ';
    let out: String = str_of(&a[0])
        .chars()
        .map(|c| {
            let r = if is_separator(prev) {
                let mut u: Vec<char> = c.to_uppercase().collect();
                if u.len() == 1 {
                    u.pop().unwrap_or(c)
                } else {
                    c
                }
            } else {
                c
            };
            prev = c;
            r
        })
        .collect();
    Ok(s(out))
}

/// `strrev(str)`: grapheme clusters in reverse order. Unknown → unknown string.
fn strrev(a: Vec<Value>, _: &FunctionContext) -> Res {
    Ok(s(str_of(&a[0]).graphemes(true).rev().collect()))
}

/// `chomp(str)`: removes every trailing `\n`, `\r\n` or `\r`. Unknown → unknown string.
fn chomp(a: Vec<Value>, _: &FunctionContext) -> Res {
    Ok(s(str_of(&a[0]).trim_end_matches(['\n', '\r']).to_string()))
}

/// `trimspace(str)`: removes leading and trailing white space. Unknown → unknown string.
fn trimspace(a: Vec<Value>, _: &FunctionContext) -> Res {
    Ok(s(str_of(&a[0]).trim().to_string()))
}

/// `trim(str, cutset)`: removes the cutset's characters from both ends. Unknown → unknown.
fn trim(a: Vec<Value>, _: &FunctionContext) -> Res {
    let cut: Vec<char> = str_of(&a[1]).chars().collect();
    Ok(s(str_of(&a[0]).trim_matches(&cut[..]).to_string()))
}

/// `trimprefix(str, prefix)`: unknown → unknown string.
fn trimprefix(a: Vec<Value>, _: &FunctionContext) -> Res {
    let (st, pre) = (str_of(&a[0]), str_of(&a[1]));
    Ok(s(st.strip_prefix(pre).unwrap_or(st).to_string()))
}

/// `trimsuffix(str, suffix)`: unknown → unknown string.
fn trimsuffix(a: Vec<Value>, _: &FunctionContext) -> Res {
    let (st, suf) = (str_of(&a[0]), str_of(&a[1]));
    Ok(s(st.strip_suffix(suf).unwrap_or(st).to_string()))
}

/// `startswith(str, prefix)`: unknown → unknown bool.
fn startswith(a: Vec<Value>, _: &FunctionContext) -> Res {
    Ok(Value::Bool(str_of(&a[0]).starts_with(str_of(&a[1]))))
}

/// `endswith(str, suffix)`: unknown → unknown bool.
fn endswith(a: Vec<Value>, _: &FunctionContext) -> Res {
    Ok(Value::Bool(str_of(&a[0]).ends_with(str_of(&a[1]))))
}

/// `strcontains(str, substr)`: unknown → unknown bool.
fn strcontains(a: Vec<Value>, _: &FunctionContext) -> Res {
    Ok(Value::Bool(str_of(&a[0]).contains(str_of(&a[1]))))
}

/// `indent(spaces, str)`: prefixes every line but the first with `spaces` spaces. Unknown →
/// unknown string.
fn indent(a: Vec<Value>, _: &FunctionContext) -> Res {
    let n = int_arg(0, &a[0], "number of spaces")?;
    if n > MAX_PAD as i64 {
        return Err(arg_err(
            0,
            format!("cannot indent by more than {MAX_PAD} spaces"),
        ));
    }
    let pad = " ".repeat(n.max(0) as usize);
    Ok(s(str_of(&a[1]).replace('\n', &format!("\n{pad}"))))
}

/// `substr(str, offset, length)`: counts grapheme clusters; a negative offset counts from the
/// end; length -1 takes the rest. Unknown → unknown string.
fn substr(a: Vec<Value>, _: &FunctionContext) -> Res {
    let text = str_of(&a[0]);
    let mut offset = int_arg(1, &a[1], "offset")?;
    let length = int_arg(2, &a[2], "length")?;
    let g: Vec<&str> = text.graphemes(true).collect();
    if offset < 0 {
        offset += g.len() as i64;
    } else if length == 0 {
        return Ok(s(String::new()));
    }
    let start = offset.max(0) as usize;
    if start >= g.len() && offset > 0 {
        return Ok(s(String::new()));
    }
    let rest = &g[start.min(g.len())..];
    let taken = if length < 0 {
        rest
    } else {
        &rest[..(length as usize).min(rest.len())]
    };
    Ok(s(taken.concat()))
}

/// `split(separator, str)`: a list of strings; an empty separator splits into characters as
/// Go does. Unknown → unknown list of string.
fn split(a: Vec<Value>, _: &FunctionContext) -> Res {
    let (sep, text) = (str_of(&a[0]), str_of(&a[1]));
    let parts: Vec<Value> = if sep.is_empty() {
        text.chars().map(|c| Value::String(c.to_string())).collect()
    } else {
        text.split(sep).map(|p| Value::String(p.into())).collect()
    };
    Ok(Value::List(parts))
}

/// `join(separator, lists...)`: unknown when any list has an unknown element; null elements
/// are an error.
fn join(a: Vec<Value>, _: &FunctionContext) -> Res {
    let mut it = a.into_iter();
    let sep = it
        .next()
        .map(|v| str_of(&v).to_string())
        .unwrap_or_default();
    let lists: Vec<Value> = it.collect();
    if lists.is_empty() {
        return Err(call_err("at least one list is required"));
    }
    if lists.iter().any(|l| !l.is_wholly_known()) {
        return Ok(Value::Unknown(Type::String));
    }
    let many = lists.len() > 1;
    let mut items = Vec::new();
    for (li, list) in lists.into_iter().enumerate() {
        for (ei, e) in elems_of(list).into_iter().enumerate() {
            if e.is_null() {
                let msg = if many {
                    format!(
                        "element {ei} of list {} is null; cannot concatenate null values",
                        li + 1
                    )
                } else {
                    format!("element {ei} is null; cannot concatenate null values")
                };
                return Err(arg_err(li + 1, msg));
            }
            items.push(str_of(&e).to_string());
        }
    }
    Ok(s(items.join(&sep)))
}

/// The last line of a regex error ("unclosed group"), for one-line messages.
fn regex_reason(e: &regex::Error) -> String {
    let text = e.to_string();
    let last = text.lines().last().unwrap_or_default().trim();
    last.strip_prefix("error: ").unwrap_or(last).to_string()
}

/// Translates RE2's ASCII-only Perl classes for Rust's regex engine, whose `\d`, `\w`, `\s`
/// and `\b` are Unicode-aware: in Terraform `\d` does not match `٣`.
fn re2_pattern(pattern: &str) -> String {
    let mut out = String::with_capacity(pattern.len());
    let mut chars = pattern.chars().peekable();
    let mut in_class = false;
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                let Some(e) = chars.next() else {
                    out.push('\\');
                    break;
                };
                let replacement = match (e, in_class) {
                    ('d', false) => Some("[0-9]"),
                    ('D', false) => Some("[^0-9]"),
                    ('w', false) => Some("[0-9A-Za-z_]"),
                    ('W', false) => Some("[^0-9A-Za-z_]"),
                    ('s', false) => Some("[\\t\\n\\f\\r ]"),
                    ('S', false) => Some("[^\\t\\n\\f\\r ]"),
                    ('b', false) => Some("(?-u:\\b)"),
                    ('B', false) => Some("(?-u:\\B)"),
                    ('d', true) => Some("0-9"),
                    ('w', true) => Some("0-9A-Za-z_"),
                    ('s', true) => Some("\\t\\n\\f\\r "),
                    _ => None,
                };
                match replacement {
                    Some(r) => out.push_str(r),
                    None => {
                        out.push('\\');
                        out.push(e);
                    }
                }
            }
            '[' if !in_class => {
                in_class = true;
                out.push('[');
                // A `]` right after `[` or `[^` is a literal.
                if chars.peek() == Some(&'^') {
                    out.push('^');
                    chars.next();
                }
                if chars.peek() == Some(&']') {
                    out.push(']');
                    chars.next();
                }
            }
            '[' if in_class && chars.peek() == Some(&':') => {
                // A POSIX class like [:alpha:] inside a bracket expression.
                out.push('[');
                for x in chars.by_ref() {
                    out.push(x);
                    if x == ']' {
                        break;
                    }
                }
            }
            ']' if in_class => {
                in_class = false;
                out.push(']');
            }
            c => out.push(c),
        }
    }
    out
}

/// Compiles a Terraform (RE2) pattern.
fn re2(pattern: &str) -> Result<Regex, regex::Error> {
    Regex::new(&re2_pattern(pattern))
}

/// Compiles a Terraform (RE2) pattern for `regex`/`regexall`.
fn compile(i: usize, pattern: &str) -> Result<Regex, super::Fail> {
    re2(pattern).map_err(|e| arg_err(i, format!("invalid regexp pattern: {}", regex_reason(&e))))
}

/// `replace(str, substr, replace)`: a `substr` wrapped in slashes is a regular expression and
/// `replace` may refer to its groups (`$1`, `${name}`). Unknown → unknown string.
fn replace(a: Vec<Value>, _: &FunctionContext) -> Res {
    let (text, sub, rep) = (str_of(&a[0]), str_of(&a[1]), str_of(&a[2]));
    if sub.len() > 1 && sub.starts_with('/') && sub.ends_with('/') {
        let re = re2(&sub[1..sub.len() - 1])
            .map_err(|e| call_err(format!("error parsing regexp: {}", regex_reason(&e))))?;
        return Ok(s(re.replace_all(text, rep).into_owned()));
    }
    if sub.is_empty() {
        // Go's strings.Replace with an empty old string inserts `rep` around every character.
        let mut out = String::from(rep);
        for c in text.chars() {
            out.push(c);
            out.push_str(rep);
        }
        return Ok(s(out));
    }
    Ok(s(text.replace(sub, rep)))
}

/// The result type of one match: a string (no groups), an object of named groups, or a tuple
/// of the numbered groups.
fn match_type(re: &Regex) -> Result<Type, String> {
    let names: Vec<Option<&str>> = re.capture_names().skip(1).collect();
    if names.is_empty() {
        return Ok(Type::String);
    }
    let named = names.iter().filter(|n| n.is_some()).count();
    if named == 0 {
        return Ok(Type::Tuple(vec![Type::String; names.len()]));
    }
    if named != names.len() {
        return Err(
            "invalid regexp pattern: cannot mix both named and unnamed capture groups".into(),
        );
    }
    Ok(Type::object(
        names
            .into_iter()
            .flatten()
            .map(|n| (n.to_string(), Type::String)),
    ))
}

fn regex_ret(a: &[Value]) -> Type {
    match a.first().and_then(Value::as_str).map(re2) {
        Some(Ok(re)) => match_type(&re).unwrap_or(Type::Dynamic),
        _ => Type::Dynamic,
    }
}

fn regexall_ret(a: &[Value]) -> Type {
    Type::list(regex_ret(a))
}

fn match_value(re: &Regex, ty: &Type, caps: &regex::Captures) -> Value {
    let group = |i: usize| match caps.get(i) {
        Some(m) => Value::String(m.as_str().to_string()),
        None => Value::Null(Type::String),
    };
    match ty {
        Type::String => group(0),
        Type::Tuple(ts) => Value::Tuple((1..=ts.len()).map(group).collect()),
        _ => Value::Object(
            re.capture_names()
                .enumerate()
                .filter_map(|(i, n)| n.map(|n| (n.to_string(), group(i))))
                .collect(),
        ),
    }
}

/// `regex(pattern, string)`: the first match — a string, a tuple of the groups, or an object
/// of the named groups. No match is an error. Unknown → unknown (of the result type when the
/// pattern is known).
fn regex_fn(a: Vec<Value>, _: &FunctionContext) -> Res {
    let re = compile(0, str_of(&a[0]))?;
    let ty = match_type(&re).map_err(|m| arg_err(0, m))?;
    match re.captures(str_of(&a[1])) {
        Some(c) => Ok(match_value(&re, &ty, &c)),
        None => Err(call_err(
            "pattern did not match any part of the given string",
        )),
    }
}

/// `regexall(pattern, string)`: every match, as a list. Unknown → unknown list.
fn regexall(a: Vec<Value>, _: &FunctionContext) -> Res {
    let re = compile(0, str_of(&a[0]))?;
    let ty = match_type(&re).map_err(|m| arg_err(0, m))?;
    Ok(Value::List(
        re.captures_iter(str_of(&a[1]))
            .map(|c| match_value(&re, &ty, &c))
            .collect(),
    ))
}

// ---- format ----

/// `format(spec, args...)`: printf-style formatting with Terraform's verbs (`%v %#v %t %b %d
/// %o %x %X %e %E %f %g %G %s %q %%`), flags, width, precision and `%[n]` indexes. Unknown
/// (anywhere inside) args → unknown string; null formats as `null` with `%v`, else an error.
fn format(a: Vec<Value>, _: &FunctionContext) -> Res {
    let mut it = a.into_iter();
    let spec = it
        .next()
        .map(|v| str_of(&v).to_string())
        .unwrap_or_default();
    let args: Vec<Value> = it.collect();
    if args.iter().any(|v| !v.is_wholly_known()) {
        return Ok(Value::Unknown(Type::String));
    }
    let (out, used) = format_str(&spec, &args).map_err(call_err)?;
    if used < args.len() {
        return Err(arg_err(used + 1, too_many(used)));
    }
    Ok(s(out))
}

fn too_many(used: usize) -> String {
    if used == 0 {
        "too many arguments; no verbs in format string".into()
    } else {
        format!("too many arguments; only {used} used by format string")
    }
}

/// `formatlist(spec, args...)`: `format` for each index of the list arguments (which must have
/// the same length); other arguments repeat. Unknown list arguments → unknown list; an
/// iteration with an unknown argument → an unknown element.
fn formatlist(a: Vec<Value>, _: &FunctionContext) -> Res {
    let mut it = a.into_iter();
    let spec = it
        .next()
        .map(|v| str_of(&v).to_string())
        .unwrap_or_default();
    let args: Vec<Value> = it.collect();
    if args.is_empty() {
        let (out, _) = format_str(&spec, &args).map_err(call_err)?;
        return Ok(Value::List(vec![s(out)]));
    }
    let mut iter_len: Option<(usize, usize)> = None;
    let mut any_unknown = false;
    for (i, arg) in args.iter().enumerate() {
        if arg.is_unknown() {
            if matches!(arg.type_of(), Type::List(_) | Type::Set(_) | Type::Tuple(_)) {
                any_unknown = true;
            }
            continue;
        }
        if arg.is_null() {
            continue;
        }
        if let Some(e) = arg.elements() {
            match iter_len {
                None => iter_len = Some((e.len(), i)),
                Some((l, chooser)) if l != e.len() => {
                    return Err(arg_err(
                        i + 1,
                        format!(
                            "argument {} has length {}, which is inconsistent with argument {} \
                             of length {}",
                            i + 1,
                            e.len(),
                            chooser + 1,
                            l
                        ),
                    ))
                }
                _ => {}
            }
        }
    }
    if any_unknown {
        return Ok(Value::Unknown(Type::list(Type::String)));
    }
    let n = iter_len.map(|(l, _)| l).unwrap_or(1);
    let mut out = Vec::with_capacity(n);
    'results: for idx in 0..n {
        let mut call_args = Vec::with_capacity(args.len());
        for arg in &args {
            let v = match arg.elements() {
                Some(e) if !arg.is_null() => e[idx].clone(),
                _ => arg.clone(),
            };
            if !v.is_wholly_known() {
                out.push(Value::Unknown(Type::String));
                continue 'results;
            }
            call_args.push(v);
        }
        let iteration = |e: String| call_err(format!("error on format iteration {idx}: {e}"));
        let (text, used) = format_str(&spec, &call_args).map_err(iteration)?;
        if used < call_args.len() {
            return Err(iteration(too_many(used)));
        }
        out.push(s(text));
    }
    Ok(Value::List(out))
}

#[derive(Default)]
struct Verb {
    raw: String,
    offset: usize,
    arg: usize,
    mode: char,
    zero: bool,
    sharp: bool,
    plus: bool,
    minus: bool,
    space: bool,
    width: Option<usize>,
    prec: Option<usize>,
}

/// Formats `args` by `spec`; returns the text and how many arguments were used.
fn format_str(spec: &str, args: &[Value]) -> Result<(String, usize), String> {
    let b = spec.as_bytes();
    let mut out = String::new();
    let mut i = 0;
    let mut next_arg = 1usize;
    let mut max_used = 0usize;
    while i < b.len() {
        if b[i] != b'%' {
            let start = i;
            while i < b.len() && b[i] != b'%' {
                i += 1;
            }
            out.push_str(&spec[start..i]);
            continue;
        }
        let start = i;
        i += 1;
        if i < b.len() && b[i] == b'%' {
            out.push('%');
            i += 1;
            continue;
        }
        let mut v = Verb {
            offset: start,
            ..Verb::default()
        };
        while i < b.len() {
            match b[i] {
                b'-' => v.minus = true,
                b'#' => v.sharp = true,
                b' ' => v.space = true,
                b'+' => v.plus = true,
                b'0' => v.zero = true,
                _ => break,
            }
            i += 1;
        }
        if i < b.len() && b[i] == b'[' {
            i += 1;
            let ds = i;
            while i < b.len() && b[i].is_ascii_digit() {
                i += 1;
            }
            if i == ds || i >= b.len() || b[i] != b']' {
                return Err(format!("invalid format string starting at offset {i}"));
            }
            next_arg = spec[ds..i].parse().map_err(|_| "invalid argument index")?;
            i += 1;
        }
        let ws = i;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        if i > ws {
            v.width = spec[ws..i].parse().ok();
        }
        if i < b.len() && b[i] == b'.' {
            i += 1;
            let ps = i;
            while i < b.len() && b[i].is_ascii_digit() {
                i += 1;
            }
            v.prec = Some(spec[ps..i].parse().unwrap_or(0));
        }
        if v.width.is_some_and(|w| w > MAX_PAD) || v.prec.is_some_and(|p| p > MAX_PAD) {
            return Err(format!(
                "width or precision in {} at {} is larger than {MAX_PAD}",
                quote(&spec[start..i]),
                start
            ));
        }
        let mode = match spec[i..].chars().next() {
            Some(c) if c.is_alphabetic() => c,
            _ => return Err(format!("invalid format string starting at offset {i}")),
        };
        i += mode.len_utf8();
        v.mode = mode;
        v.raw = spec[start..i].to_string();
        v.arg = next_arg;
        next_arg += 1;
        if v.arg > args.len() || v.arg == 0 {
            return Err(format!(
                "not enough arguments for {} at {}: need index {} but have {} total",
                quote(&v.raw),
                v.offset,
                v.arg,
                args.len()
            ));
        }
        max_used = max_used.max(v.arg);
        out.push_str(&format_one(&v, &args[v.arg - 1])?);
    }
    Ok((out, max_used))
}

fn unsupported(v: &Verb, why: impl std::fmt::Display) -> String {
    format!(
        "unsupported value for {} at {}: {}",
        quote(&v.raw),
        v.offset,
        why
    )
}

fn format_one(v: &Verb, arg: &Value) -> Result<String, String> {
    let arg = arg.unmarked();
    if v.mode != 'v' && arg.is_null() {
        return Err(unsupported(v, "null value cannot be formatted"));
    }
    match v.mode {
        'v' => {
            if !v.sharp {
                match arg {
                    Value::String(t) => return Ok(pad(v, t.clone())),
                    Value::Number(n) => {
                        let text = fmt_float(&n.0.abs(), 'g', None);
                        return Ok(pad(
                            v,
                            format!("{}{text}", if n.sign_bit() { "-" } else { "" }),
                        ));
                    }
                    _ => {}
                }
            }
            Ok(pad(v, super::encoding::json_text(arg)))
        }
        't' => {
            let b = convert::convert(arg.clone(), &Type::Bool).map_err(|e| unsupported(v, e))?;
            Ok(pad(v, b.as_bool().unwrap_or(false).to_string()))
        }
        'b' | 'd' | 'o' | 'x' | 'X' | 'e' | 'E' | 'f' | 'g' | 'G' => {
            let n = convert::convert(arg.clone(), &Type::Number).map_err(|e| unsupported(v, e))?;
            let (n, sign_bit) = match n.as_number() {
                Some(n) => (n.0.clone(), n.sign_bit()),
                None => return Err(unsupported(v, "a number is required")),
            };
            if matches!(v.mode, 'b' | 'd' | 'o' | 'x' | 'X') {
                if !n.is_integer() {
                    return Err(unsupported(v, "an integer is required"));
                }
                Ok(fmt_integer(v, &n))
            } else {
                let text = fmt_float(&n.abs(), v.mode, v.prec);
                Ok(pad_number(v, sign_bit, text))
            }
        }
        's' | 'q' => {
            let t = convert::convert(arg.clone(), &Type::String).map_err(|e| unsupported(v, e))?;
            let mut t = t.as_str().unwrap_or_default().to_string();
            if let Some(p) = v.prec.filter(|p| *p > 0) {
                t = t.graphemes(true).take(p).collect();
            }
            if v.mode == 'q' {
                t = super::encoding::json_text(&Value::String(t));
            }
            Ok(pad(v, t))
        }
        m => Err(format!(
            "unsupported format verb '{m}' in {} at offset {}",
            quote(&v.raw),
            v.offset
        )),
    }
}

/// Pads to the verb's width, counting grapheme clusters.
fn pad(v: &Verb, text: String) -> String {
    let Some(w) = v.width else { return text };
    let len = text.graphemes(true).count();
    if len >= w {
        return text;
    }
    let fill = if v.zero { "0" } else { " " }.repeat(w - len);
    if v.minus {
        text + &fill
    } else {
        fill + &text
    }
}

/// Pads a formatted number as Go's fmt does: sign, then zero padding after it.
fn pad_number(v: &Verb, neg: bool, digits: String) -> String {
    let sign = if neg {
        "-"
    } else if v.plus {
        "+"
    } else if v.space {
        " "
    } else {
        ""
    };
    let len = sign.len() + digits.len();
    match v.width {
        Some(w) if w > len => {
            if v.minus {
                format!("{sign}{digits}{}", " ".repeat(w - len))
            } else if v.zero {
                format!("{sign}{}{digits}", "0".repeat(w - len))
            } else {
                format!("{}{sign}{digits}", " ".repeat(w - len))
            }
        }
        _ => format!("{sign}{digits}"),
    }
}

fn fmt_integer(v: &Verb, n: &BigDecimal) -> String {
    let (int, _) = n.with_scale(0).into_bigint_and_exponent();
    let neg = int < BigInt::from(0);
    let mag = if neg { -int } else { int };
    let (radix, prefix) = match v.mode {
        'b' => (2, "0b"),
        'o' => (8, "0"),
        'x' => (16, "0x"),
        'X' => (16, "0X"),
        _ => (10, ""),
    };
    let mut digits = mag.to_str_radix(radix);
    if v.mode == 'X' {
        digits = digits.to_uppercase();
    }
    if let Some(p) = v.prec {
        if digits.len() < p {
            digits = format!("{}{digits}", "0".repeat(p - digits.len()));
        }
    }
    if v.sharp {
        digits = format!("{prefix}{digits}");
    }
    pad_number(v, neg, digits)
}

/// The decimal digits and decimal-point position of a non-negative number: `d1 d2 ... dn`
/// with value `0.d1d2...dn × 10^dp`. Zero has no digits.
fn digits_of(n: &BigDecimal) -> (Vec<u8>, i64) {
    let n = n.normalized();
    let (int, scale) = n.as_bigint_and_exponent();
    let text = int.magnitude().to_string();
    if text == "0" {
        return (Vec::new(), 0);
    }
    let digits: Vec<u8> = text.bytes().map(|c| c - b'0').collect();
    let dp = digits.len() as i64 - scale;
    (digits, dp)
}

/// Rounds a non-negative `n` to `scale` decimal places as Go rounds the `big.Float` Terraform
/// holds: that float is the nearest 512-bit binary number to the decimal, so a decimal tie
/// (`0.05` to one place) rounds up or down as the binary number lies above or below it, and
/// only exact ties (`2.5`) go to even.
fn round_go(n: &BigDecimal, scale: i64) -> BigDecimal {
    let (d, dp) = digits_of(n);
    // Digits after the cut: a tie is "5" followed by nothing but zeros.
    let cut = dp + scale;
    let tie = cut >= 0 && (cut as usize) < d.len() && {
        let rest = &d[cut as usize..];
        rest[0] == 5 && rest[1..].iter().all(|x| *x == 0)
    };
    if !tie {
        return n.with_scale_round(scale, RoundingMode::HalfEven);
    }
    match binary_direction(n) {
        std::cmp::Ordering::Greater => n.with_scale_round(scale, RoundingMode::Up),
        std::cmp::Ordering::Less => n.with_scale_round(scale, RoundingMode::Down),
        std::cmp::Ordering::Equal => n.with_scale_round(scale, RoundingMode::HalfEven),
    }
}

/// Whether the nearest 512-bit binary float to `n` (positive) is above, below or equal to it.
fn binary_direction(n: &BigDecimal) -> std::cmp::Ordering {
    let (m, k) = n.normalized().as_bigint_and_exponent(); // n = m / 10^k
    let m = m.magnitude().clone();
    let ten_k = |k: i64| bigdecimal::num_bigint::BigUint::from(10u32).pow(k.unsigned_abs() as u32);
    // n = num / den
    let (num, den) = if k >= 0 {
        (m, ten_k(k))
    } else {
        (m * ten_k(k), bigdecimal::num_bigint::BigUint::from(1u32))
    };
    // Scale by 2^e so that the quotient has 512 bits: q = round(num * 2^e / den).
    let bits = |x: &bigdecimal::num_bigint::BigUint| x.bits() as i64;
    let e = 512 - (bits(&num) - bits(&den));
    let (sn, sd) = if e >= 0 {
        (num << (e as usize), den)
    } else {
        (num, den << ((-e) as usize))
    };
    let q = &sn / &sd;
    let r = &sn - &q * &sd;
    // Round half to even.
    let twice = &r << 1usize;
    let q = if twice > sd || (twice == sd && q.bit(0)) {
        q + 1u32
    } else {
        q
    };
    (q * &sd).cmp(&sn)
}

/// Rounds `n` (non-negative) to `sig` significant digits, as Go does (see `round_go`).
fn round_sig(n: &BigDecimal, sig: usize) -> (Vec<u8>, i64) {
    let (d, dp) = digits_of(n);
    if d.len() <= sig || d.is_empty() {
        return (d, dp);
    }
    // Keep `sig` digits: round to scale (sig - dp).
    let r = round_go(n, sig as i64 - dp);
    digits_of(&r)
}

/// Go's `%e`, `%f` and `%g` for a non-negative number (`prec` as Go's precision).
fn fmt_float(n: &BigDecimal, mode: char, prec: Option<usize>) -> String {
    let upper = mode.is_uppercase();
    match mode.to_ascii_lowercase() {
        'f' => {
            let p = prec.unwrap_or(6);
            let r = round_go(n, p as i64);
            let text = crate::value::Number::new(r).to_string();
            let (int, frac) = text.split_once('.').unwrap_or((&text, ""));
            if p == 0 {
                int.to_string()
            } else {
                format!("{int}.{frac:0<p$}")
            }
        }
        'e' => {
            let p = prec.unwrap_or(6);
            let (d, dp) = round_sig(n, p + 1);
            fmt_e(&d, dp, p, upper)
        }
        _ => {
            // %g: shortest when no precision was given.
            let (d, dp, shortest) = match prec {
                None => {
                    let (d, dp) = digits_of(n);
                    (d, dp, true)
                }
                Some(p) => {
                    let (d, dp) = round_sig(n, p.max(1));
                    (d, dp, false)
                }
            };
            let nd = d.len().max(1);
            let mut eprec = prec.map(|p| p.max(1)).unwrap_or(nd);
            if eprec > nd && nd as i64 >= dp {
                eprec = nd;
            }
            if shortest {
                eprec = 6;
            }
            let exp = dp - 1;
            if exp < -4 || exp >= eprec as i64 {
                fmt_e(&d, dp, nd - 1, upper)
            } else {
                // Go's digit count: none for zero (`%g` of 0 is `0`).
                let decimals = (d.len() as i64 - dp).max(0) as usize;
                fmt_float(n, 'f', Some(decimals))
            }
        }
    }
}

fn fmt_e(d: &[u8], dp: i64, prec: usize, upper: bool) -> String {
    let mut digits: Vec<u8> = d.to_vec();
    if digits.is_empty() {
        digits.push(0);
    }
    digits.resize(prec + 1, 0);
    let exp = if d.is_empty() { 0 } else { dp - 1 };
    let mut out = String::new();
    out.push((b'0' + digits[0]) as char);
    if prec > 0 {
        out.push('.');
        for x in &digits[1..] {
            out.push((b'0' + x) as char);
        }
    }
    out.push(if upper { 'E' } else { 'e' });
    out.push(if exp < 0 { '-' } else { '+' });
    out.push_str(&format!("{:02}", exp.abs()));
    out
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use crate::value::{Type, Value};

    #[test]
    fn simple_string_functions() {
        check("upper", vec![s("héllo ß")], s("HÉLLO ß"));
        check("lower", vec![s("HÉLLO")], s("héllo"));
        check(
            "title",
            vec![s("hello world-wide o'neil")],
            s("Hello World-Wide O'Neil"),
        );
        check("strrev", vec![s("héllo")], s("olléh"));
        check("strrev", vec![s("e\u{301}a")], s("ae\u{301}"));
        check("chomp", vec![s("a\n\r\n\r")], s("a"));
        check("chomp", vec![s("a\nb")], s("a\nb"));
        check("trimspace", vec![s(" \t a b \n")], s("a b"));
        check("trim", vec![s("?!hello?!"), s("!?")], s("hello"));
        check("trimprefix", vec![s("helloworld"), s("hello")], s("world"));
        check("trimprefix", vec![s("helloworld"), s("x")], s("helloworld"));
        check("trimsuffix", vec![s("helloworld"), s("world")], s("hello"));
        check("startswith", vec![s("hello"), s("he")], b(true));
        check("startswith", vec![s("hello"), s("")], b(true));
        check("endswith", vec![s("hello"), s("lo")], b(true));
        check("strcontains", vec![s("hello"), s("ell")], b(true));
        check("strcontains", vec![s("hello"), s("x")], b(false));
        check("indent", vec![n(2), s("a\nb\n")], s("a\n  b\n  "));
        check(
            "startswith",
            vec![unk(Type::String), s("a")],
            unk(Type::Bool),
        );
    }

    #[test]
    fn substr_counts_characters() {
        check("substr", vec![s("hello world"), n(1), n(4)], s("ello"));
        check("substr", vec![s("🤔🤷"), n(0), n(1)], s("🤔"));
        check("substr", vec![s("hello world"), n(-5), n(-1)], s("world"));
        check("substr", vec![s("hello"), n(10), n(2)], s(""));
        check("substr", vec![s("hello"), n(2), n(0)], s(""));
        check("substr", vec![s("hello"), n(3), n(100)], s("lo"));
        check_err(
            "substr",
            vec![s("hello"), num("1.5"), n(1)],
            "Call to function \"substr\" failed: value must be a whole number, between \
             -9223372036854775808 and 9223372036854775807.",
        );
    }

    #[test]
    fn split_and_join() {
        check(
            "split",
            vec![s(","), s("a,b,,c")],
            slist(&["a", "b", "", "c"]),
        );
        check("split", vec![s(","), s("")], slist(&[""]));
        check(
            "join",
            vec![s("-"), strs(&["a", "b"]), strs(&["c"])],
            s("a-b-c"),
        );
        check("join", vec![s(","), tup(vec![n(1), b(true)])], s("1,true"));
        check(
            "join",
            vec![s(","), tup(vec![s("a"), unk(Type::String)])],
            unk(Type::String),
        );
        check_err(
            "join",
            vec![s(","), tup(vec![s("a"), Value::null()])],
            "Invalid value for \"lists\" parameter: element 1 is null; cannot concatenate null \
             values.",
        );
        check(
            "join",
            vec![s(","), tup(vec![s("a").sensitive(), s("b")])],
            s("a,b").sensitive(),
        );
    }

    #[test]
    fn replace_and_regex() {
        check(
            "replace",
            vec![s("1 + 2 + 3"), s("+"), s("-")],
            s("1 - 2 - 3"),
        );
        check(
            "replace",
            vec![s("hello world"), s("/w(or)ld/"), s("$1 ${1}x")],
            s("hello or orx"),
        );
        check("replace", vec![s("abc"), s(""), s("-")], s("-a-b-c-"));
        check(
            "regex",
            vec![s("[a-z]+"), s("53453453.345345aaabbbccc23454")],
            s("aaabbbccc"),
        );
        check(
            "regex",
            vec![s("(\\d\\d\\d\\d)-(\\d\\d)-(\\d\\d)"), s("2019-02-01")],
            tup(vec![s("2019"), s("02"), s("01")]),
        );
        check(
            "regex",
            vec![
                s("^(?:(?P<scheme>[^:/?#]+):)?(?://(?P<authority>[^/?#]*))?"),
                s("https://terraform.io/docs/"),
            ],
            obj(vec![
                ("authority", s("terraform.io")),
                ("scheme", s("https")),
            ]),
        );
        check(
            "regex",
            vec![s("a(b)?"), s("a")],
            tup(vec![Value::Null(Type::String)]),
        );
        check_err(
            "regex",
            vec![s("x"), s("abc")],
            "Call to function \"regex\" failed: pattern did not match any part of the given \
             string.",
        );
        check(
            "regexall",
            vec![s("[a-z]+"), s("1234abcd5678efgh9")],
            slist(&["abcd", "efgh"]),
        );
        check("regexall", vec![s("[a-z]+"), s("1234")], list(vec![]));
        check(
            "regex",
            vec![s("(a)(b)"), unk(Type::String)],
            unk(Type::Tuple(vec![Type::String, Type::String])),
        );
    }

    #[test]
    fn perl_classes_are_ascii_as_in_re2() {
        check("regexall", vec![s("\\d+"), s("12٣4")], slist(&["12", "4"]));
        check("replace", vec![s("a é_1"), s("/\\w/"), s("x")], s("x éxx"));
        check("regexall", vec![s("[\\d.]+"), s("v1.2٣")], slist(&["1.2"]));
        check(
            "regexall",
            vec![s("[[:alpha:]\\d]+"), s("ab1 c")],
            slist(&["ab1", "c"]),
        );
        check("regexall", vec![s("[]a]+"), s("a]b")], slist(&["a]"]));
        check(
            "replace",
            vec![s("a\u{b}b c"), s("/\\s/"), s("_")],
            s("a\u{b}b_c"),
        );
    }

    #[test]
    fn format_verbs() {
        let f = |spec: &str, args: Vec<Value>, out: &str| {
            let mut all = vec![s(spec)];
            all.extend(args);
            check("format", all, s(out));
        };
        // Each expected output below was produced by `terraform console` (1.11).
        f(
            "%v|%v|%v|%v",
            vec![n(1234567), n(100000), num("0.00001"), num("1.5")],
            "1.234567e+06|100000|1e-05|1.5",
        );
        f(
            "%d|%5d|%-5d|%05d|%+d|%x|%X|%o|%b",
            vec![
                n(42),
                n(42),
                n(42),
                n(42),
                n(42),
                n(255),
                n(255),
                n(8),
                n(5),
            ],
            "42|   42|42   |00042|+42|ff|FF|10|101",
        );
        f(
            "%f|%.2f|%e|%g|%8.3f|%G",
            vec![
                num("3.14159"),
                num("3.14159"),
                num("1234.5"),
                num("0.000012"),
                num("2.5"),
                num("1e21"),
            ],
            "3.141590|3.14|1.234500e+03|1.2e-05|   2.500|1E+21",
        );
        f(
            "%s|%q|%5s|%-5s|%.2s|%t",
            vec![s("abc"), s("a\"b"), s("ab"), s("ab"), s("abcdef"), b(true)],
            "abc|\"a\\\"b\"|   ab|ab   |ab|true",
        );
        f(
            "%v %#v",
            vec![tup(vec![n(1), s("a")]), obj(vec![("a", n(1))])],
            "[1,\"a\"] {\"a\":1}",
        );
        f("%%|%s", vec![n(1)], "%|1");
        f("%q", vec![n(1)], "\"1\"");
        f(
            "%10.3v|%-8v|",
            vec![s("abcdef"), n(12)],
            "    abcdef|12      |",
        );
        f(
            "%.3g|%10.4e|%+.1f",
            vec![num("1234.5678"), num("3.0"), n(2)],
            "1.23e+03|3.0000e+00|+2.0",
        );
        f("%5.1f|% d", vec![num("-2.25"), n(5)], " -2.2| 5");
        f(
            "%d",
            vec![num("12345678901234567890123")],
            "12345678901234567890123",
        );
        f("%[2]s %[1]s", vec![s("a"), s("b")], "b a");
        f("%v", vec![Value::Null(Type::String)], "null");
        assert!(super::super::testing::run("format", vec![s("%99999999999d"), n(1)]).is_err());
        assert!(super::super::testing::run("indent", vec![n(i64::MAX), s("a\nb")]).is_err());
        assert!(
            super::super::testing::run("cidrsubnet", vec![s("10.0.0.0/8"), n(i64::MAX), n(0)])
                .is_err()
        );
    }

    #[test]
    fn format_errors() {
        let e = |args: Vec<Value>, msg: &str| check_err("format", args, msg);
        e(
            vec![s("%[2]s %s %[1]s"), s("a"), s("b")],
            "Call to function \"format\" failed: not enough arguments for \"%s\" at 6: need \
             index 3 but have 2 total.",
        );
        e(
            vec![s("%d"), num("1.5")],
            "Call to function \"format\" failed: unsupported value for \"%d\" at 0: an \
             integer is required.",
        );
        e(
            vec![s("%z"), n(1)],
            "Call to function \"format\" failed: unsupported format verb 'z' in \"%z\" at \
             offset 0.",
        );
        e(
            vec![s("%s"), s("a"), s("b")],
            "Invalid value for \"args\" parameter: too many arguments; only 1 used by format \
             string.",
        );
        e(
            vec![s("%d"), s("x")],
            "Call to function \"format\" failed: unsupported value for \"%d\" at 0: a number \
             is required.",
        );
        e(
            vec![s("%d"), b(true)],
            "Call to function \"format\" failed: unsupported value for \"%d\" at 0: number \
             required.",
        );
        e(
            vec![s("%t"), s("x")],
            "Call to function \"format\" failed: unsupported value for \"%t\" at 0: a bool is \
             required.",
        );
        e(
            vec![s("%."), n(1)],
            "Call to function \"format\" failed: invalid format string starting at offset 2.",
        );
        e(
            vec![s("abc%")],
            "Call to function \"format\" failed: invalid format string starting at offset 4.",
        );
        e(
            vec![s("%s"), Value::Null(Type::String)],
            "Call to function \"format\" failed: unsupported value for \"%s\" at 0: null \
             value cannot be formatted.",
        );
    }

    #[test]
    fn format_unknowns_and_lists() {
        check(
            "format",
            vec![s("%s-%s"), s("a"), tup(vec![unk(Type::String)])],
            unk(Type::String),
        );
        check(
            "formatlist",
            vec![s("%s=%s"), strs(&["a", "b"]), s("x")],
            slist(&["a=x", "b=x"]),
        );
        check(
            "formatlist",
            vec![s("%s=%s"), tup(vec![s("a"), unk(Type::String)]), s("x")],
            list(vec![s("a=x"), unk(Type::String)]),
        );
        check(
            "formatlist",
            vec![s("%s"), unk(Type::list(Type::String))],
            unk(Type::list(Type::String)),
        );
        check_err(
            "formatlist",
            vec![s("%s%s"), strs(&["a", "b"]), strs(&["c"])],
            "Invalid value for \"args\" parameter: argument 2 has length 1, which is \
             inconsistent with argument 1 of length 2.",
        );
        check("formatlist", vec![s("%s"), tup(vec![])], list(vec![]));
    }
}
