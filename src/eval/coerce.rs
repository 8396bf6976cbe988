//! Type conversion, unification and equality as the evaluator needs them (cty's rules).
//!
//! `convert` turns a value into a type constraint's type (safe and unsafe conversions alike:
//! `"5"` → `5`, tuples → lists, objects → maps, `optional()` defaults); `unify` finds the
//! common type of conditional arms; `equals` is `==`. Error messages are cty's, prefixed with
//! the path to the offending part (`attribute "a": a number is required`).

use crate::value::{Number, Type, Value};
use std::collections::BTreeMap;

/// Converts `v` to `ty`. Unknown and null values take the target type; sensitive marks stay.
pub fn convert(v: &Value, ty: &Type) -> Result<Value, String> {
    convert_at(v, ty, &mut Vec::new())
}

fn fail(path: &[String], msg: impl Into<String>) -> String {
    let msg = msg.into();
    if path.is_empty() {
        msg
    } else {
        format!("{}: {msg}", path.join(""))
    }
}

fn type_word(ty: &Type) -> String {
    match ty {
        Type::String => "string required".into(),
        Type::Number => "a number is required".into(),
        Type::Bool => "a bool is required".into(),
        Type::List(t) => format!("list of {} required", friendly(t)),
        Type::Set(t) => format!("set of {} required", friendly(t)),
        Type::Map(t) => format!("map of {} required", friendly(t)),
        Type::Tuple(_) => "tuple required".into(),
        Type::Object(..) => "object required".into(),
        Type::Dynamic => "a value is required".into(),
    }
}

/// A type's name in messages, as cty says it: `string`, `list of number`, `object`.
pub fn friendly(ty: &Type) -> String {
    match ty {
        Type::Dynamic => "dynamic".into(),
        Type::String => "string".into(),
        Type::Number => "number".into(),
        Type::Bool => "bool".into(),
        Type::List(t) => format!("list of {}", friendly(t)),
        Type::Set(t) => format!("set of {}", friendly(t)),
        Type::Map(t) => format!("map of {}", friendly(t)),
        Type::Tuple(_) => "tuple".into(),
        Type::Object(..) => "object".into(),
    }
}

fn convert_at(v: &Value, ty: &Type, path: &mut Vec<String>) -> Result<Value, String> {
    if let Value::Sensitive(inner) = v {
        return convert_at(inner, ty, path).map(Value::sensitive);
    }
    if *ty == Type::Dynamic {
        return Ok(v.clone());
    }
    match v {
        Value::Unknown(_) => return Ok(Value::Unknown(ty.clone())),
        Value::Null(_) => return Ok(Value::Null(ty.clone())),
        _ => {}
    }
    let elems = |v: &Value| -> Option<Vec<Value>> { v.elements().map(|e| e.to_vec()) };
    match ty {
        Type::Dynamic => Ok(v.clone()),
        Type::String => match v {
            Value::String(_) => Ok(v.clone()),
            Value::Number(n) => Ok(Value::String(n.to_string())),
            Value::Bool(b) => Ok(Value::String(b.to_string())),
            _ => Err(fail(path, "string required")),
        },
        Type::Number => match v {
            Value::Number(_) => Ok(v.clone()),
            Value::String(s) => s
                .parse::<Number>()
                .ok()
                .filter(|_| !s.trim().is_empty() && s.trim() == s)
                .map(Value::Number)
                .ok_or_else(|| fail(path, "a number is required")),
            _ => Err(fail(path, "a number is required")),
        },
        Type::Bool => match v {
            Value::Bool(_) => Ok(v.clone()),
            Value::String(s) if s == "true" => Ok(Value::Bool(true)),
            Value::String(s) if s == "false" => Ok(Value::Bool(false)),
            _ => Err(fail(path, "a bool is required")),
        },
        Type::List(et) | Type::Set(et) => {
            let items = match v {
                Value::List(_) | Value::Tuple(_) | Value::Set(_) => elems(v).unwrap_or_default(),
                _ => return Err(fail(path, type_word(ty))),
            };
            let mut out = Vec::with_capacity(items.len());
            // An element type of `any` becomes the unified type of the elements.
            let et = if **et == Type::Dynamic {
                let types: Vec<Type> = items.iter().map(Value::type_of).collect();
                unify(&types).unwrap_or(Type::Dynamic)
            } else {
                (**et).clone()
            };
            for (i, e) in items.iter().enumerate() {
                path.push(format!("element {i}"));
                let r = convert_at(e, &et, path);
                path.pop();
                out.push(r?);
            }
            Ok(if matches!(ty, Type::Set(_)) {
                Value::set(out)
            } else {
                Value::List(out)
            })
        }
        Type::Map(et) => {
            let m = match v {
                Value::Map(m) | Value::Object(m) => m,
                _ => return Err(fail(path, type_word(ty))),
            };
            let et = if **et == Type::Dynamic {
                let types: Vec<Type> = m.values().map(Value::type_of).collect();
                unify(&types).unwrap_or(Type::Dynamic)
            } else {
                (**et).clone()
            };
            let mut out = BTreeMap::new();
            for (k, e) in m {
                path.push(format!("element {}", cairn_state::quote(k)));
                let r = convert_at(e, &et, path);
                path.pop();
                out.insert(k.clone(), r?);
            }
            Ok(Value::Map(out))
        }
        Type::Tuple(ts) => {
            let items = match v {
                Value::List(_) | Value::Tuple(_) | Value::Set(_) => elems(v).unwrap_or_default(),
                _ => return Err(fail(path, "tuple required")),
            };
            if items.len() != ts.len() {
                return Err(fail(
                    path,
                    format!("tuple required with exactly {} elements", ts.len()),
                ));
            }
            let mut out = Vec::new();
            for (i, (e, t)) in items.iter().zip(ts).enumerate() {
                path.push(format!("element {i}"));
                let r = convert_at(e, t, path);
                path.pop();
                out.push(r?);
            }
            Ok(Value::Tuple(out))
        }
        Type::Object(attrs, optional) => {
            let m = match v {
                Value::Map(m) | Value::Object(m) => m,
                _ => return Err(fail(path, "object required")),
            };
            let mut out = BTreeMap::new();
            for (k, t) in attrs {
                let given = m.get(k).filter(|v| !v.is_null());
                let r = match (given, optional.get(k)) {
                    (Some(e), _) => {
                        path.push(format!("attribute {}", cairn_state::quote(k)));
                        let r = convert_at(e, t, path);
                        path.pop();
                        r?
                    }
                    (None, Some(Some(default))) => {
                        path.push(format!("attribute {}", cairn_state::quote(k)));
                        let r = convert_at(default, t, path);
                        path.pop();
                        r?
                    }
                    (None, Some(None)) => Value::Null(t.clone()),
                    (None, None) if m.contains_key(k) => Value::Null(t.clone()),
                    (None, None) => {
                        return Err(fail(
                            path,
                            format!("attribute {} is required", cairn_state::quote(k)),
                        ))
                    }
                };
                out.insert(k.clone(), r);
            }
            Ok(Value::Object(out))
        }
    }
}

/// The common type of several values' types, as conditional results and collection elements
/// need it: primitives unify to string, tuples and lists to lists, objects and maps to maps.
/// `None` when there is none.
pub fn unify(types: &[Type]) -> Option<Type> {
    let mut acc = Type::Dynamic;
    for t in types {
        acc = unify2(&acc, t)?;
    }
    Some(acc)
}

fn unify2(a: &Type, b: &Type) -> Option<Type> {
    use Type::*;
    if a == b {
        return Some(a.clone());
    }
    Some(match (a, b) {
        (Dynamic, t) | (t, Dynamic) => t.clone(),
        (String, Number | Bool) | (Number | Bool, String) => String,
        (List(x), List(y)) => List(Box::new(unify2(x, y)?)),
        (Set(x), Set(y)) => Set(Box::new(unify2(x, y)?)),
        (Map(x), Map(y)) => Map(Box::new(unify2(x, y)?)),
        (Tuple(xs), Tuple(ys)) if xs.len() == ys.len() => Tuple(
            xs.iter()
                .zip(ys)
                .map(|(x, y)| unify2(x, y))
                .collect::<Option<Vec<_>>>()?,
        ),
        (Tuple(xs), Tuple(ys)) => List(Box::new(unify(&[xs.clone(), ys.clone()].concat())?)),
        (Tuple(xs), List(y)) | (List(y), Tuple(xs)) => {
            let mut all = xs.clone();
            all.push((**y).clone());
            List(Box::new(unify(&all)?))
        }
        (Object(xa, _), Object(ya, _)) if xa.keys().eq(ya.keys()) => Type::object(
            xa.iter()
                .zip(ya.values())
                .map(|((k, x), y)| Some((k.clone(), unify2(x, y)?)))
                .collect::<Option<Vec<_>>>()?,
        ),
        (Object(xa, _), Object(ya, _)) => {
            let all: Vec<Type> = xa.values().chain(ya.values()).cloned().collect();
            Map(Box::new(unify(&all)?))
        }
        (Object(xa, _), Map(y)) | (Map(y), Object(xa, _)) => {
            let mut all: Vec<Type> = xa.values().cloned().collect();
            all.push((**y).clone());
            Map(Box::new(unify(&all)?))
        }
        _ => return None,
    })
}

/// `a == b`: unknown when either side is not wholly known; otherwise structural equality of
/// values of the same kind (a list never equals a tuple, as in Terraform), numbers by value.
pub fn equals(a: &Value, b: &Value) -> Value {
    let sensitive = a.contains_sensitive() || b.contains_sensitive();
    let (a, _) = a.clone().deep_unmark();
    let (b, _) = b.clone().deep_unmark();
    let r = if !a.is_wholly_known() || !b.is_wholly_known() {
        Value::Unknown(Type::Bool)
    } else {
        Value::Bool(eq(&a, &b))
    };
    if sensitive {
        r.sensitive()
    } else {
        r
    }
}

fn eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Null(_), Value::Null(_)) => true,
        (Value::Bool(x), Value::Bool(y)) => x == y,
        (Value::Number(x), Value::Number(y)) => x.0 == y.0,
        (Value::String(x), Value::String(y)) => x == y,
        (Value::List(x), Value::List(y))
        | (Value::Set(x), Value::Set(y))
        | (Value::Tuple(x), Value::Tuple(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| eq(p, q))
        }
        (Value::Map(x), Value::Map(y)) | (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|((k, p), (l, q))| k == l && eq(p, q))
        }
        _ => false,
    }
}
