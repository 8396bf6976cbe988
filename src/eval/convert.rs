//! Type conversion and unification after cty's `convert` package: the implicit conversions
//! Terraform applies to function arguments, variable values and collection literals.
//!
//! Decisions:
//! - Conversions are the *unsafe* set Terraform uses everywhere: string ↔ number, string ↔ bool,
//!   number/bool → string; number ↔ bool is never allowed.
//! - Structural → collection: a tuple becomes a list/set and an object a map; when the target's
//!   element type is `any`, the element types are unified first (`unify`), so `tolist([1, "a"])`
//!   is `["1", "a"]`.
//! - Objects: attributes the target does not declare are dropped (as cty does); missing
//!   attributes are an error unless `optional(...)`, and optional attributes that are missing or
//!   null take their default (converted to the attribute's type) or null.
//! - Null stays null, with the target type; unknown stays unknown, with the target type.
//! - Sensitive marks are preserved wherever they sit in the value.
//! - Error messages follow cty's `MismatchMessage` wording ("string required",
//!   "attribute \"tags\" is required", "all list elements must have the same type"), prefixed by
//!   the path to the offending part (`attribute "tags": `, `element 0: `).

use crate::value::ValueMap;
use crate::value::{Number, Type, Value};
use std::collections::BTreeMap;
use std::fmt;

/// One step of the path to the part of a value a conversion failed on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum PathStep {
    /// An object attribute.
    Attr(String),
    /// A list, set or tuple element.
    Index(usize),
    /// A map element.
    Key(String),
}

/// Why a value could not be converted: where (`path`) and what was wrong (`message`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ConvertError {
    pub(crate) path: Vec<PathStep>,
    pub(crate) message: String,
}

impl ConvertError {
    fn new(path: &[PathStep], message: impl Into<String>) -> Self {
        ConvertError {
            path: path.to_vec(),
            message: message.into(),
        }
    }
}

impl fmt::Display for ConvertError {
    /// `attribute "tags": element 0: string required`
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for step in &self.path {
            match step {
                PathStep::Attr(a) => write!(f, "attribute {}: ", quote(a))?,
                PathStep::Index(i) => write!(f, "element {i}: ")?,
                PathStep::Key(k) => write!(f, "element {}: ", quote(k))?,
            }
        }
        f.write_str(&self.message)
    }
}

impl std::error::Error for ConvertError {}

/// A string as Go's `%q` quotes it, as cty's and Terraform's messages do.
pub(crate) use cairn_state::quote_go as quote;

/// Converts `v` to type `ty` by Terraform's rules (see the module docs).
pub(crate) fn convert(v: Value, ty: &Type) -> Result<Value, ConvertError> {
    conv(v, ty, &mut Vec::new())
}

/// True when `ty` mentions `any` somewhere.
pub(crate) fn has_dynamic(ty: &Type) -> bool {
    match ty {
        Type::Dynamic => true,
        Type::Bool | Type::Number | Type::String => false,
        Type::List(t) | Type::Set(t) | Type::Map(t) => has_dynamic(t),
        Type::Tuple(ts) => ts.iter().any(has_dynamic),
        Type::Object(attrs, _) => attrs.values().any(has_dynamic),
    }
}

/// The type a value of type `from` has after conversion to `to` (they differ only where `to`
/// says `any`).
fn resolved(from: &Type, to: &Type) -> Type {
    match (from, to) {
        (_, Type::Dynamic) => from.clone(),
        (_, t) if !has_dynamic(t) => t.clone(),
        (Type::List(f) | Type::Set(f), Type::List(t)) => Type::list(resolved(f, t)),
        (Type::List(f) | Type::Set(f), Type::Set(t)) => Type::set(resolved(f, t)),
        (Type::Map(f), Type::Map(t)) => Type::map(resolved(f, t)),
        (Type::Tuple(fs), Type::List(t)) => {
            Type::list(resolved(&unify(fs).unwrap_or(Type::Dynamic), t))
        }
        (Type::Tuple(fs), Type::Set(t)) => {
            Type::set(resolved(&unify(fs).unwrap_or(Type::Dynamic), t))
        }
        (Type::Object(fs, _), Type::Map(t)) => {
            let tys: Vec<Type> = fs.values().cloned().collect();
            Type::map(resolved(&unify(&tys).unwrap_or(Type::Dynamic), t))
        }
        (Type::Tuple(fs), Type::Tuple(ts)) if fs.len() == ts.len() => {
            Type::Tuple(fs.iter().zip(ts).map(|(f, t)| resolved(f, t)).collect())
        }
        (Type::Object(fs, _), Type::Object(ts, opt)) => Type::Object(
            ts.iter()
                .map(|(k, t)| {
                    let r = fs
                        .get(k)
                        .map(|f| resolved(f, t))
                        .unwrap_or_else(|| t.clone());
                    (k.clone(), r)
                })
                .collect::<BTreeMap<_, _>>()
                .into(),
            opt.clone(),
        ),
        (_, t) => t.clone(),
    }
}

fn conv(v: Value, to: &Type, path: &mut Vec<PathStep>) -> Result<Value, ConvertError> {
    if *to == Type::Dynamic {
        return Ok(v);
    }
    match v {
        Value::Sensitive(inner) => Ok(conv(*inner, to, path)?.sensitive()),
        Value::Null(t) => {
            if t != Type::Dynamic && !convertible(&t, to) {
                return Err(ConvertError::new(path, mismatch(&t, to)));
            }
            Ok(Value::Null(resolved(&t, to)))
        }
        Value::Unknown(t) => {
            if t != Type::Dynamic && !convertible(&t, to) {
                return Err(ConvertError::new(path, mismatch(&t, to)));
            }
            Ok(Value::Unknown(resolved(&t, to)))
        }
        v => match to {
            Type::Dynamic => Ok(v),
            Type::String => match v {
                Value::String(_) => Ok(v),
                Value::Number(n) => Ok(Value::String(n.to_string())),
                Value::Bool(b) => Ok(Value::String(b.to_string())),
                v => Err(ConvertError::new(path, mismatch(&v.type_of(), to))),
            },
            Type::Number => match v {
                Value::Number(_) => Ok(v),
                Value::String(s) => match parse_number(&s) {
                    Some(n) => Ok(Value::Number(n)),
                    None => Err(ConvertError::new(path, "a number is required")),
                },
                v => Err(ConvertError::new(path, mismatch(&v.type_of(), to))),
            },
            Type::Bool => match v {
                Value::Bool(_) => Ok(v),
                Value::String(s) => match s.as_str() {
                    "true" | "1" => Ok(Value::Bool(true)),
                    "false" | "0" => Ok(Value::Bool(false)),
                    _ => Err(ConvertError::new(path, "a bool is required")),
                },
                v => Err(ConvertError::new(path, mismatch(&v.type_of(), to))),
            },
            Type::List(et) | Type::Set(et) => {
                let is_set = matches!(to, Type::Set(_));
                let (elems, structural) = match v {
                    Value::List(e) | Value::Set(e) => (e, false),
                    Value::Tuple(e) => (e, true),
                    v => return Err(ConvertError::new(path, mismatch(&v.type_of(), to))),
                };
                let et: Type = if **et == Type::Dynamic && structural {
                    let tys: Vec<Type> = elems.iter().map(Value::type_of).collect();
                    match unify(&tys) {
                        Some(t) => t,
                        None => {
                            let kind = if is_set { "set" } else { "list" };
                            return Err(ConvertError::new(
                                path,
                                format!("all {kind} elements must have the same type"),
                            ));
                        }
                    }
                } else {
                    (**et).clone()
                };
                let mut out = Vec::with_capacity(elems.len());
                for (i, e) in elems.into_iter().enumerate() {
                    path.push(PathStep::Index(i));
                    out.push(conv(e, &et, path)?);
                    path.pop();
                }
                Ok(if is_set {
                    Value::set(out)
                } else {
                    Value::List(out)
                })
            }
            Type::Map(et) => {
                let (elems, structural) = match v {
                    Value::Map(m) => (m, false),
                    Value::Object(m) => (m, true),
                    v => return Err(ConvertError::new(path, mismatch(&v.type_of(), to))),
                };
                let et: Type = if **et == Type::Dynamic && structural {
                    let tys: Vec<Type> = elems.values().map(Value::type_of).collect();
                    match unify(&tys) {
                        Some(t) => t,
                        None => {
                            return Err(ConvertError::new(
                                path,
                                "all map elements must have the same type",
                            ))
                        }
                    }
                } else {
                    (**et).clone()
                };
                let mut out = ValueMap::new();
                for (k, e) in elems {
                    path.push(PathStep::Key(k.clone()));
                    let c = conv(e, &et, path)?;
                    path.pop();
                    out.insert(k, c);
                }
                Ok(Value::Map(out))
            }
            Type::Tuple(ts) => {
                let elems = match v {
                    Value::Tuple(e) | Value::List(e) if e.len() == ts.len() => e,
                    v => return Err(ConvertError::new(path, mismatch(&v.type_of(), to))),
                };
                let mut out = Vec::with_capacity(elems.len());
                for (i, (e, t)) in elems.into_iter().zip(ts).enumerate() {
                    path.push(PathStep::Index(i));
                    out.push(conv(e, t, path)?);
                    path.pop();
                }
                Ok(Value::Tuple(out))
            }
            Type::Object(attrs, optional) => {
                let mut given = match v {
                    Value::Object(m) | Value::Map(m) => m,
                    v => return Err(ConvertError::new(path, mismatch(&v.type_of(), to))),
                };
                let missing: Vec<&String> = attrs
                    .keys()
                    .filter(|k| !given.contains_key(*k) && !optional.contains_key(*k))
                    .collect();
                if !missing.is_empty() {
                    return Err(ConvertError::new(path, missing_attrs(&missing)));
                }
                let mut out = ValueMap::new();
                for (k, t) in attrs.iter() {
                    path.push(PathStep::Attr(k.clone()));
                    let value = match given.remove(k) {
                        Some(v) if !v.is_null() => conv(v, t, path)?,
                        given_null => match optional.get(k) {
                            Some(Some(default)) => conv((**default).clone(), t, path)?,
                            _ => {
                                let null = given_null.unwrap_or(Value::Null(Type::Dynamic));
                                conv(null, t, path)?
                            }
                        },
                    };
                    path.pop();
                    out.insert(k.clone(), value);
                }
                Ok(Value::Object(out))
            }
        },
    }
}

fn missing_attrs(missing: &[&String]) -> String {
    match missing {
        [one] => format!("attribute {} is required", quote(one)),
        [a, b] => format!("attributes {} and {} are required", quote(a), quote(b)),
        many => {
            let (last, rest) = many.split_last().expect("more than two");
            let rest: Vec<String> = rest.iter().map(|a| quote(a)).collect();
            format!(
                "attributes {}, and {} are required",
                rest.join(", "),
                quote(last)
            )
        }
    }
}

/// Parses a number as cty does for string → number conversion: optional sign, decimal digits
/// with an optional fraction, optional exponent. No spaces, no hex, no underscores.
pub(crate) fn parse_number(s: &str) -> Option<Number> {
    let b = s.as_bytes();
    let mut i = 0;
    if i < b.len() && (b[i] == b'+' || b[i] == b'-') {
        i += 1;
    }
    let int_start = i;
    while i < b.len() && b[i].is_ascii_digit() {
        i += 1;
    }
    let mut digits = i - int_start;
    if i < b.len() && b[i] == b'.' {
        i += 1;
        let frac_start = i;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        digits += i - frac_start;
    }
    if digits == 0 {
        return None;
    }
    if i < b.len() && (b[i] == b'e' || b[i] == b'E') {
        i += 1;
        if i < b.len() && (b[i] == b'+' || b[i] == b'-') {
            i += 1;
        }
        let exp_start = i;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        if i == exp_start {
            return None;
        }
    }
    if i != b.len() {
        return None;
    }
    // BigDecimal does not accept "5." or ".5" or "+5" in every version: normalize first.
    let mut text = s.trim_start_matches('+').to_string();
    if let Some(pos) = text.find(['e', 'E']) {
        let (mant, exp) = text.split_at(pos);
        text = format!("{}{}", fix_mantissa(mant), exp);
    } else {
        text = fix_mantissa(&text);
    }
    text.parse().ok()
}

fn fix_mantissa(m: &str) -> String {
    let (sign, m) = match m.strip_prefix('-') {
        Some(rest) => ("-", rest),
        None => ("", m),
    };
    let m = m.strip_suffix('.').unwrap_or(m);
    if m.starts_with('.') {
        format!("{sign}0{m}")
    } else {
        format!("{sign}{m}")
    }
}

/// True when a value of type `from` may convert to `to` (value-dependent conversions such as
/// string → number count as possible).
pub(crate) fn convertible(from: &Type, to: &Type) -> bool {
    if from == to || *from == Type::Dynamic || *to == Type::Dynamic {
        return true;
    }
    match (from, to) {
        (Type::Number | Type::Bool, Type::String) => true,
        (Type::String, Type::Number | Type::Bool) => true,
        (Type::List(f) | Type::Set(f), Type::List(t) | Type::Set(t)) => convertible(f, t),
        (Type::Tuple(fs), Type::List(t) | Type::Set(t)) => {
            if **t == Type::Dynamic {
                unify(fs).is_some() || fs.is_empty()
            } else {
                fs.iter().all(|f| convertible(f, t))
            }
        }
        (Type::Map(f), Type::Map(t)) => convertible(f, t),
        (Type::Object(fs, _), Type::Map(t)) => {
            if **t == Type::Dynamic {
                let tys: Vec<Type> = fs.values().cloned().collect();
                unify(&tys).is_some() || tys.is_empty()
            } else {
                fs.values().all(|f| convertible(f, t))
            }
        }
        (Type::Tuple(fs), Type::Tuple(ts)) => {
            fs.len() == ts.len() && fs.iter().zip(ts).all(|(f, t)| convertible(f, t))
        }
        (Type::List(f), Type::Tuple(ts)) => ts.iter().all(|t| convertible(f, t)),
        (Type::Object(fs, _), Type::Object(ts, opt)) => ts.iter().all(|(k, t)| match fs.get(k) {
            Some(f) => convertible(f, t),
            None => opt.contains_key(k),
        }),
        (Type::Map(f), Type::Object(ts, _)) => ts.values().all(|t| convertible(f, t)),
        _ => false,
    }
}

/// A friendly name for a type, as cty's `FriendlyName` (`constraint = false`) or
/// `FriendlyNameForConstraint` (`true`) spell it.
pub(crate) fn friendly_name(t: &Type, constraint: bool) -> String {
    match t {
        Type::Dynamic => {
            if constraint {
                "any type".into()
            } else {
                "dynamic".into()
            }
        }
        Type::Bool => "bool".into(),
        Type::Number => "number".into(),
        Type::String => "string".into(),
        Type::List(e) | Type::Set(e) | Type::Map(e) => {
            let kind = match t {
                Type::List(_) => "list",
                Type::Set(_) => "set",
                _ => "map",
            };
            if constraint && **e == Type::Dynamic {
                format!("{kind} of any single type")
            } else {
                format!("{kind} of {}", friendly_name(e, constraint))
            }
        }
        Type::Tuple(_) => "tuple".into(),
        Type::Object(..) => "object".into(),
    }
}

/// Why a value of type `got` does not fit `want`, worded as cty's `MismatchMessage`.
pub(crate) fn mismatch(got: &Type, want: &Type) -> String {
    match (got, want) {
        (Type::Object(gattrs, _), Type::Object(wattrs, opt)) => {
            let missing: Vec<&String> = wattrs
                .keys()
                .filter(|k| !gattrs.contains_key(*k) && !opt.contains_key(*k))
                .collect();
            if !missing.is_empty() {
                return missing_attrs(&missing);
            }
            for (k, w) in wattrs.iter() {
                if let Some(g) = gattrs.get(k) {
                    if !convertible(g, w) {
                        return format!("attribute {}: {}", quote(k), mismatch(g, w));
                    }
                }
            }
            "incorrect object attributes".into()
        }
        (Type::Tuple(_), Type::List(e)) if **e == Type::Dynamic => {
            "all list elements must have the same type".into()
        }
        (Type::Tuple(_), Type::Set(e)) if **e == Type::Dynamic => {
            "all set elements must have the same type".into()
        }
        (Type::Object(..), Type::Map(e)) if **e == Type::Dynamic => {
            "all map elements must have the same type".into()
        }
        (Type::Tuple(gs), Type::List(w) | Type::Set(w)) => {
            for (i, g) in gs.iter().enumerate() {
                if !convertible(g, w) {
                    return format!("element {i}: {}", mismatch(g, w));
                }
            }
            format!("all elements must be {}", friendly_name(w, true))
        }
        (Type::Object(gs, _), Type::Map(w)) => {
            for (k, g) in gs.iter() {
                if !convertible(g, w) {
                    return format!("element {}: {}", quote(k), mismatch(g, w));
                }
            }
            format!("all elements must be {}", friendly_name(w, true))
        }
        (Type::List(g) | Type::Set(g), Type::List(w) | Type::Set(w)) => {
            let noun = if matches!(want, Type::List(_)) {
                "list"
            } else {
                "set"
            };
            format!("incorrect {noun} element type: {}", mismatch(g, w))
        }
        (Type::Map(g), Type::Map(w)) => {
            format!("incorrect map element type: {}", mismatch(g, w))
        }
        _ => format!("{} required", friendly_name(want, true)),
    }
}

/// The common type of several types, after cty's unsafe unification: what a list or map built
/// from values of these types, or a conditional choosing between them, has as its type.
/// `None` when there is none (`number` and `bool`, `string` and `list`).
///
/// `any` (the type of an untyped `null` or of a value not known yet) takes whatever type the
/// others unify to, so `["a", null]` unifies to `string`.
pub(crate) fn unify(types: &[Type]) -> Option<Type> {
    let known: Vec<Type> = types
        .iter()
        .filter(|t| **t != Type::Dynamic)
        .cloned()
        .collect();
    let types = &known[..];
    let first = match types.first() {
        None => return Some(Type::Dynamic),
        Some(f) => f,
    };
    if types.iter().all(|t| t == first) {
        return Some(first.clone());
    }
    let all = |f: fn(&Type) -> bool| types.iter().all(f);
    if all(|t| matches!(t, Type::Bool | Type::Number | Type::String)) {
        // Mixed primitives unify only to string (number and bool have no common type).
        return if types.contains(&Type::String) {
            Some(Type::String)
        } else {
            None
        };
    }
    if all(|t| matches!(t, Type::Object(..))) {
        let attr_sets: Vec<&BTreeMap<String, Type>> = types
            .iter()
            .filter_map(|t| match t {
                Type::Object(a, _) => Some(&**a),
                _ => None,
            })
            .collect();
        let same_keys = attr_sets.iter().all(|a| a.keys().eq(attr_sets[0].keys()));
        if same_keys {
            let mut out = BTreeMap::new();
            for k in attr_sets[0].keys() {
                let tys: Vec<Type> = attr_sets.iter().map(|a| a[k].clone()).collect();
                out.insert(k.clone(), unify(&tys)?);
            }
            return Some(Type::Object(Box::new(out), Default::default()));
        }
        let tys: Vec<Type> = attr_sets.iter().flat_map(|a| a.values().cloned()).collect();
        return Some(Type::map(unify(&tys)?));
    }
    if all(|t| matches!(t, Type::Tuple(_))) {
        let elem_sets: Vec<&Vec<Type>> = types
            .iter()
            .filter_map(|t| match t {
                Type::Tuple(e) => Some(e),
                _ => None,
            })
            .collect();
        if elem_sets.iter().all(|e| e.len() == elem_sets[0].len()) {
            let mut out = Vec::new();
            for i in 0..elem_sets[0].len() {
                let tys: Vec<Type> = elem_sets.iter().map(|e| e[i].clone()).collect();
                out.push(unify(&tys)?);
            }
            return Some(Type::Tuple(out));
        }
        let tys: Vec<Type> = elem_sets.iter().flat_map(|e| e.iter().cloned()).collect();
        return Some(Type::list(unify(&tys)?));
    }
    for (kind, make) in [
        (0u8, Type::list as fn(Type) -> Type),
        (1, Type::set),
        (2, Type::map),
    ] {
        let elems: Option<Vec<Type>> = types
            .iter()
            .map(|t| match (kind, t) {
                (0, Type::List(e)) | (1, Type::Set(e)) | (2, Type::Map(e)) => Some((**e).clone()),
                _ => None,
            })
            .collect();
        if let Some(elems) = elems {
            return Some(make(unify(&elems)?));
        }
    }
    // Lists and tuples together: a list of all their elements' common type
    // (`[tolist([1]), [2, "x"]]` is a list of lists of strings); maps and objects likewise.
    let seq_elems: Option<Vec<Type>> = types
        .iter()
        .map(|t| match t {
            Type::List(e) => Some(vec![(**e).clone()]),
            Type::Tuple(es) => Some(es.clone()),
            _ => None,
        })
        .collect::<Option<Vec<_>>>()
        .map(|v| v.into_iter().flatten().collect());
    if let Some(elems) = seq_elems {
        return Some(Type::list(unify(&elems)?));
    }
    let map_elems: Option<Vec<Type>> = types
        .iter()
        .map(|t| match t {
            Type::Map(e) => Some(vec![(**e).clone()]),
            Type::Object(attrs, _) => Some(attrs.values().cloned().collect()),
            _ => None,
        })
        .collect::<Option<Vec<_>>>()
        .map(|v| v.into_iter().flatten().collect());
    if let Some(elems) = map_elems {
        return Some(Type::map(unify(&elems)?));
    }
    // Other mixed kinds: a type every other converts to, preferring collections over
    // structural types.
    let mut candidates: Vec<&Type> = types.iter().collect();
    candidates.sort_by_key(|t| match t {
        Type::List(_) | Type::Set(_) | Type::Map(_) => 0,
        _ => 1,
    });
    candidates
        .into_iter()
        .find(|c| types.iter().all(|t| convertible(t, c)))
        .cloned()
}

/// `a == b` with unknowns: unknown when the answer depends on an unknown part; sensitive when
/// either side has a sensitive part. Nulls are equal to each other whatever their types;
/// values of different kinds (a list and a tuple, `1` and `"1"`) are not equal.
pub(crate) fn equals(a: &Value, b: &Value) -> Value {
    let (a, ma) = a.clone().deep_unmark();
    let (b, mb) = b.clone().deep_unmark();
    let result = match eq_inner(&a, &b) {
        Some(x) => Value::Bool(x),
        None => Value::Unknown(Type::Bool),
    };
    if ma || mb {
        result.sensitive()
    } else {
        result
    }
}

fn eq_inner(a: &Value, b: &Value) -> Option<bool> {
    use Value as V;
    match (a, b) {
        (V::Sensitive(a), b) | (b, V::Sensitive(a)) => eq_inner(a, b),
        (V::Unknown(_), _) | (_, V::Unknown(_)) => None,
        (V::Null(_), V::Null(_)) => Some(true),
        (V::Null(_), _) | (_, V::Null(_)) => Some(false),
        (V::Bool(x), V::Bool(y)) => Some(x == y),
        (V::Number(x), V::Number(y)) => Some(x == y),
        (V::String(x), V::String(y)) => Some(x == y),
        (V::List(x), V::List(y)) | (V::Tuple(x), V::Tuple(y)) => {
            if x.len() != y.len() {
                return Some(false);
            }
            for (p, q) in x.iter().zip(y) {
                match eq_inner(p, q) {
                    Some(true) => {}
                    other => return other,
                }
            }
            Some(true)
        }
        (V::Set(x), V::Set(y)) => {
            if !a.is_wholly_known() || !b.is_wholly_known() {
                return None;
            }
            if x.len() != y.len() {
                return Some(false);
            }
            Some(x.iter().zip(y).all(|(p, q)| eq_inner(p, q) == Some(true)))
        }
        (V::Map(x), V::Map(y)) | (V::Object(x), V::Object(y)) => {
            if !x.keys().eq(y.keys()) {
                return Some(false);
            }
            for (p, q) in x.values().zip(y.values()) {
                match eq_inner(p, q) {
                    Some(true) => {}
                    other => return other,
                }
            }
            Some(true)
        }
        _ => Some(false),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(x: &str) -> Value {
        Value::string(x)
    }
    fn n(x: i64) -> Value {
        Value::int(x)
    }

    /// Converts `v` to `ty` and compares with the expected value or error text.
    fn check(v: Value, ty: Type, expected: Result<Value, &str>) {
        let got = convert(v.clone(), &ty).map_err(|e| e.to_string());
        let expected = expected.map_err(str::to_string);
        assert_eq!(got, expected, "converting {v:?} to {ty}");
    }

    #[test]
    fn primitives() {
        check(n(5), Type::String, Ok(s("5")));
        check(Value::Bool(true), Type::String, Ok(s("true")));
        check(s("1e3"), Type::Number, Ok(n(1000)));
        check(
            s(".5"),
            Type::Number,
            Ok(Value::Number("0.5".parse().unwrap())),
        );
        check(s("+5"), Type::Number, Ok(n(5)));
        check(s("5."), Type::Number, Ok(n(5)));
        check(s(" 5"), Type::Number, Err("a number is required"));
        check(s("0x10"), Type::Number, Err("a number is required"));
        check(s("1"), Type::Bool, Ok(Value::Bool(true)));
        check(s("false"), Type::Bool, Ok(Value::Bool(false)));
        check(s("yes"), Type::Bool, Err("a bool is required"));
        check(n(1), Type::Bool, Err("bool required"));
        check(Value::Bool(true), Type::Number, Err("number required"));
        check(Value::Tuple(vec![]), Type::String, Err("string required"));
        check(
            s("12345678901234567890123"),
            Type::Number,
            Ok(Value::Number("12345678901234567890123".parse().unwrap())),
        );
    }

    #[test]
    fn collections() {
        let t = Value::Tuple(vec![s("a"), n(1)]);
        check(
            t.clone(),
            Type::list(Type::Dynamic),
            Ok(Value::List(vec![s("a"), s("1")])),
        );
        check(
            t.clone(),
            Type::set(Type::String),
            Ok(Value::Set(vec![s("1"), s("a")])),
        );
        check(
            Value::Tuple(vec![n(1), Value::object([("a", n(1))])]),
            Type::list(Type::Dynamic),
            Err("all list elements must have the same type"),
        );
        check(
            Value::Tuple(vec![s("a"), Value::Tuple(vec![])]),
            Type::list(Type::String),
            Err("element 1: string required"),
        );
        check(
            Value::object([("a", n(1)), ("b", s("x"))]),
            Type::map(Type::Dynamic),
            Ok(Value::Map(
                [("a".into(), s("1")), ("b".into(), s("x"))].into(),
            )),
        );
        check(
            Value::object([("a", n(1))]),
            Type::list(Type::Dynamic),
            Err("list of any single type required"),
        );
        // Tuples of different lengths unify to a list.
        check(
            Value::Tuple(vec![
                Value::Tuple(vec![n(1)]),
                Value::Tuple(vec![s("a"), n(2)]),
            ]),
            Type::set(Type::Dynamic),
            Ok(Value::Set(vec![
                Value::List(vec![s("1")]),
                Value::List(vec![s("a"), s("2")]),
            ])),
        );
    }

    #[test]
    fn objects() {
        let mut optional = BTreeMap::new();
        optional.insert("port".to_string(), Some(Box::new(n(80))));
        optional.insert("note".to_string(), None);
        let ty = Type::Object(
            [
                ("name".to_string(), Type::String),
                ("port".to_string(), Type::Number),
                ("note".to_string(), Type::String),
                ("tags".to_string(), Type::map(Type::String)),
            ]
            .into_iter()
            .collect::<BTreeMap<_, _>>()
            .into(),
            optional.into(),
        );
        check(
            Value::object([
                ("name", s("web")),
                ("extra", n(1)),
                ("tags", Value::object([("a", n(1))])),
            ]),
            ty.clone(),
            Ok(Value::object([
                ("name", s("web")),
                ("port", n(80)),
                ("note", Value::Null(Type::String)),
                ("tags", Value::Map([("a".into(), s("1"))].into())),
            ])),
        );
        check(
            Value::object([("name", s("web")), ("tags", Value::Tuple(vec![]))]),
            ty.clone(),
            Err("attribute \"tags\": map of string required"),
        );
        check(
            Value::object([("tags", Value::object([("a", Value::Tuple(vec![]))]))]),
            ty.clone(),
            Err("attribute \"name\" is required"),
        );
        check(
            Value::object([
                ("name", s("x")),
                ("port", s("eighty")),
                ("tags", Value::Object(Default::default())),
            ]),
            ty,
            Err("attribute \"port\": a number is required"),
        );
    }

    #[test]
    fn null_unknown_and_marks() {
        check(
            Value::null(),
            Type::list(Type::String),
            Ok(Value::Null(Type::list(Type::String))),
        );
        check(
            Value::unknown(),
            Type::Number,
            Ok(Value::Unknown(Type::Number)),
        );
        check(
            Value::Unknown(Type::list(Type::String)),
            Type::Number,
            Err("number required"),
        );
        check(n(3).sensitive(), Type::String, Ok(s("3").sensitive()));
        check(
            Value::Tuple(vec![n(3).sensitive(), Value::Unknown(Type::Number)]),
            Type::list(Type::String),
            Ok(Value::List(vec![
                s("3").sensitive(),
                Value::Unknown(Type::String),
            ])),
        );
    }

    #[test]
    fn unification() {
        let u = |ts: Vec<Type>| unify(&ts);
        assert_eq!(u(vec![Type::Number, Type::String]), Some(Type::String));
        assert_eq!(u(vec![Type::Number, Type::Bool]), None);
        assert_eq!(
            u(vec![
                Type::list(Type::String),
                Type::Tuple(vec![Type::String])
            ]),
            Some(Type::list(Type::String))
        );
        assert_eq!(
            u(vec![
                Type::object([("a".into(), Type::Number)]),
                Type::object([("b".into(), Type::String)])
            ]),
            Some(Type::map(Type::String))
        );
        assert_eq!(u(vec![Type::String, Type::list(Type::String)]), None);
        assert_eq!(u(vec![Type::String, Type::Dynamic]), Some(Type::String));
        assert_eq!(u(vec![Type::Dynamic]), Some(Type::Dynamic));
    }

    #[test]
    fn equality() {
        let t = Value::Bool(true);
        let f = Value::Bool(false);
        assert_eq!(equals(&n(1), &Value::Number("1.0".parse().unwrap())), t);
        assert_eq!(equals(&n(1), &s("1")), f);
        assert_eq!(equals(&Value::null(), &Value::Null(Type::String)), t);
        assert_eq!(equals(&Value::unknown(), &n(1)), Value::Unknown(Type::Bool));
        assert_eq!(
            equals(
                &Value::Tuple(vec![n(1), Value::unknown()]),
                &Value::Tuple(vec![n(2), n(3)])
            ),
            f
        );
        assert_eq!(
            equals(
                &Value::Tuple(vec![Value::unknown()]),
                &Value::Tuple(vec![n(2), n(3)])
            ),
            f
        );
        assert_eq!(equals(&s("a").sensitive(), &s("a")), t.sensitive());
    }
}
