//! Values on the wire: the schema-directed msgpack encoding of `DynamicValue` (cty's
//! `msgpack` package, described in Terraform's `docs/plugin-protocol/object-wire-format.md`),
//! and the JSON form of cty types.
//!
//! The *type* drives the encoding, not the value:
//! - object → map with every attribute of the type (null → nil); map → map; list, set,
//!   tuple → array; number → int when it is an integer in `i64`/`u64` range, float64 when that
//!   is exact, else its decimal string; `dynamic` → `[type JSON as bin, value]`;
//! - unknown → extension 0 with one zero byte (`d4 00 00`), as cty writes it; on decode *any*
//!   extension is unknown (type 12 is a refined unknown: its refinements are dropped);
//! - sensitive marks are not encoded (the engine keeps them on its side).
//!
//! Decoding gives values of the schema's types: typed nulls and unknowns, sets in canonical
//! order, numbers exact (big ones arrive as strings).

use crate::value::ValueMap;
use crate::value::{Number, Type, Value};
use std::collections::BTreeMap;

/// Encodes `v` as a value of type `ty`.
pub fn encode(v: &Value, ty: &Type) -> Result<Vec<u8>, String> {
    let mut out = Vec::with_capacity(64);
    write(&mut out, v, ty, &mut String::new())?;
    Ok(out)
}

/// Decodes msgpack `bytes` as a value of type `ty`.
pub fn decode(bytes: &[u8], ty: &Type) -> Result<Value, String> {
    let mut rd = bytes;
    let raw = rmpv::decode::read_value(&mut rd).map_err(|e| format!("invalid msgpack: {e}"))?;
    if !rd.is_empty() {
        return Err(format!("{} bytes after the msgpack value", rd.len()));
    }
    from_raw(&raw, ty, &mut String::new())
}

/// Decodes the JSON form of a value (the `json` field of `DynamicValue`, and `raw_state`).
pub fn decode_json(bytes: &[u8], ty: &Type) -> Result<Value, String> {
    let j: serde_json::Value =
        serde_json::from_slice(bytes).map_err(|e| format!("invalid JSON value: {e}"))?;
    from_json(&j, ty, &mut String::new())
}

fn err(path: &str, msg: impl std::fmt::Display) -> String {
    if path.is_empty() {
        msg.to_string()
    } else {
        format!("at {path}: {msg}")
    }
}

fn write_unknown(out: &mut Vec<u8>) {
    // fixext1, type 0, payload 0: what cty writes for a wholly unknown value.
    out.extend_from_slice(&[0xd4, 0x00, 0x00]);
}

fn write_str(out: &mut Vec<u8>, s: &str) {
    // Writing into a Vec cannot fail.
    let _ = rmp::encode::write_str(out, s);
}

fn write_number(out: &mut Vec<u8>, n: &Number) {
    if n.is_integer() {
        if let Some(i) = n.to_i64() {
            let _ = rmp::encode::write_sint(out, i);
            return;
        }
        if let Ok(u) = n.to_string().parse::<u64>() {
            let _ = rmp::encode::write_uint(out, u);
            return;
        }
    }
    // A float64 when that is exact (an integer beyond u64 included: 1e281 read from a float64
    // goes back as one), else cty's decimal string.
    let f = n.to_f64();
    if f.is_finite() && Number::from_f64(f).is_some_and(|back| back.0 == n.0) {
        let _ = rmp::encode::write_f64(out, f);
        return;
    }
    write_str(out, &n.to_string());
}

fn elements(v: &Value) -> Option<&[Value]> {
    match v {
        Value::List(e) | Value::Set(e) | Value::Tuple(e) => Some(e),
        _ => None,
    }
}

fn write(out: &mut Vec<u8>, v: &Value, ty: &Type, path: &mut String) -> Result<(), String> {
    let v = v.unmarked();
    match v {
        Value::Null(_) => {
            let _ = rmp::encode::write_nil(out);
            return Ok(());
        }
        Value::Unknown(_) => {
            write_unknown(out);
            return Ok(());
        }
        _ => {}
    }
    match ty {
        Type::Dynamic => {
            let actual = concrete_type(v);
            let json = serde_json::to_vec(&type_to_json(&actual)).unwrap_or_default();
            let _ = rmp::encode::write_array_len(out, 2);
            let _ = rmp::encode::write_bin(out, &json);
            write(out, v, &actual, path)
        }
        Type::Bool => match v {
            Value::Bool(b) => {
                let _ = rmp::encode::write_bool(out, *b);
                Ok(())
            }
            Value::String(s) if s == "true" || s == "false" => {
                let _ = rmp::encode::write_bool(out, s == "true");
                Ok(())
            }
            _ => Err(err(path, "a bool is required")),
        },
        Type::Number => match v {
            Value::Number(n) => {
                write_number(out, n);
                Ok(())
            }
            Value::String(s) => {
                let n: Number = s
                    .parse()
                    .map_err(|_| err(path, format!("{s:?} is not a number")))?;
                write_number(out, &n);
                Ok(())
            }
            _ => Err(err(path, "a number is required")),
        },
        Type::String => match v {
            Value::String(s) => {
                write_str(out, s);
                Ok(())
            }
            Value::Number(n) => {
                write_str(out, &n.to_string());
                Ok(())
            }
            Value::Bool(b) => {
                write_str(out, if *b { "true" } else { "false" });
                Ok(())
            }
            _ => Err(err(path, "a string is required")),
        },
        Type::List(et) | Type::Set(et) => {
            let elems = elements(v).ok_or_else(|| err(path, "a list or set is required"))?;
            let _ = rmp::encode::write_array_len(out, elems.len() as u32);
            for (i, e) in elems.iter().enumerate() {
                let len = path.len();
                path.push_str(&format!("[{i}]"));
                write(out, e, et, path)?;
                path.truncate(len);
            }
            Ok(())
        }
        Type::Tuple(ets) => {
            let elems = elements(v).ok_or_else(|| err(path, "a tuple is required"))?;
            if elems.len() != ets.len() {
                return Err(err(
                    path,
                    format!("a tuple of {} elements is required", ets.len()),
                ));
            }
            let _ = rmp::encode::write_array_len(out, elems.len() as u32);
            for (i, (e, et)) in elems.iter().zip(ets).enumerate() {
                let len = path.len();
                path.push_str(&format!("[{i}]"));
                write(out, e, et, path)?;
                path.truncate(len);
            }
            Ok(())
        }
        Type::Map(et) => {
            let m = v
                .attributes()
                .ok_or_else(|| err(path, "a map is required"))?;
            let _ = rmp::encode::write_map_len(out, m.len() as u32);
            for (k, e) in m {
                write_str(out, k);
                let len = path.len();
                path.push_str(&format!("[{k:?}]"));
                write(out, e, et, path)?;
                path.truncate(len);
            }
            Ok(())
        }
        Type::Object(attrs, _) => {
            let m = v
                .attributes()
                .ok_or_else(|| err(path, "an object is required"))?;
            if let Some(extra) = m.keys().find(|k| !attrs.contains_key(*k)) {
                return Err(err(path, format!("unsupported attribute {extra:?}")));
            }
            let _ = rmp::encode::write_map_len(out, attrs.len() as u32);
            let null = Value::null();
            for (k, at) in attrs.iter() {
                write_str(out, k);
                let len = path.len();
                if !path.is_empty() {
                    path.push('.');
                }
                path.push_str(k);
                write(out, m.get(k).unwrap_or(&null), at, path)?;
                path.truncate(len);
            }
            Ok(())
        }
    }
}

/// The type a value has on the wire when its schema type is `dynamic`: the value's own type,
/// with the element types of collections unified to `dynamic` when they differ.
fn concrete_type(v: &Value) -> Type {
    match v.unmarked() {
        Value::List(e) => Type::list(common_type(e)),
        Value::Set(e) => Type::set(common_type(e)),
        Value::Map(m) => Type::map(common_type(&m.values().cloned().collect::<Vec<_>>())),
        Value::Tuple(e) => Type::Tuple(e.iter().map(concrete_type).collect()),
        Value::Object(m) => Type::object(m.iter().map(|(k, e)| (k.clone(), concrete_type(e)))),
        other => other.type_of(),
    }
}

fn common_type(elems: &[Value]) -> Type {
    let mut types = elems.iter().map(concrete_type);
    match types.next() {
        None => Type::Dynamic,
        Some(first) => {
            if types.all(|t| t == first) {
                first
            } else {
                Type::Dynamic
            }
        }
    }
}

fn number_from_raw(raw: &rmpv::Value) -> Option<Number> {
    match raw {
        rmpv::Value::Integer(i) => {
            if let Some(x) = i.as_i64() {
                Some(Number::from_i64(x))
            } else {
                i.as_u64().and_then(|u| u.to_string().parse().ok())
            }
        }
        rmpv::Value::F64(f) => Number::from_f64(*f),
        rmpv::Value::F32(f) => Number::from_f64(f64::from(*f)),
        rmpv::Value::String(s) => s.as_str().and_then(|s| s.parse().ok()),
        _ => None,
    }
}

fn from_raw(raw: &rmpv::Value, ty: &Type, path: &mut String) -> Result<Value, String> {
    match raw {
        rmpv::Value::Nil => return Ok(Value::Null(ty.clone())),
        rmpv::Value::Ext(_, _) => return Ok(Value::Unknown(ty.clone())),
        _ => {}
    }
    match ty {
        Type::Dynamic => {
            let parts = match raw {
                rmpv::Value::Array(a) if a.len() == 2 => a,
                _ => return Err(err(path, "a dynamic value must be [type, value]")),
            };
            let type_json: serde_json::Value = match &parts[0] {
                rmpv::Value::Binary(b) => serde_json::from_slice(b),
                rmpv::Value::String(s) => serde_json::from_slice(s.as_bytes()),
                _ => return Err(err(path, "a dynamic value's type must be JSON bytes")),
            }
            .map_err(|e| err(path, format!("invalid type JSON: {e}")))?;
            let actual = type_from_json(&type_json).map_err(|e| err(path, e))?;
            from_raw(&parts[1], &actual, path)
        }
        Type::Bool => raw
            .as_bool()
            .map(Value::Bool)
            .ok_or_else(|| err(path, "a bool is required")),
        Type::Number => number_from_raw(raw)
            .map(Value::Number)
            .ok_or_else(|| err(path, "a number is required")),
        Type::String => match raw {
            rmpv::Value::String(s) => s
                .as_str()
                .map(Value::string)
                .ok_or_else(|| err(path, "a string must be UTF-8")),
            _ => Err(err(path, "a string is required")),
        },
        Type::List(_) | Type::Set(_) | Type::Tuple(_) if raw.as_array().is_none() => {
            Err(err(path, "an array is required"))
        }
        Type::List(et) | Type::Set(et) => {
            let arr = raw.as_array().map(Vec::as_slice).unwrap_or_default();
            let mut elems = Vec::with_capacity(arr.len());
            for (i, e) in arr.iter().enumerate() {
                let len = path.len();
                path.push_str(&format!("[{i}]"));
                elems.push(from_raw(e, et, path)?);
                path.truncate(len);
            }
            Ok(if matches!(ty, Type::Set(_)) {
                Value::set(elems)
            } else {
                Value::List(elems)
            })
        }
        Type::Tuple(ets) => {
            let arr = raw.as_array().map(Vec::as_slice).unwrap_or_default();
            if arr.len() != ets.len() {
                return Err(err(
                    path,
                    format!("a tuple of {} elements is required", ets.len()),
                ));
            }
            let mut elems = Vec::with_capacity(arr.len());
            for (i, (e, et)) in arr.iter().zip(ets).enumerate() {
                let len = path.len();
                path.push_str(&format!("[{i}]"));
                elems.push(from_raw(e, et, path)?);
                path.truncate(len);
            }
            Ok(Value::Tuple(elems))
        }
        Type::Map(et) => {
            let entries = raw.as_map().ok_or_else(|| err(path, "a map is required"))?;
            let mut m = ValueMap::new();
            for (k, e) in entries {
                let k = k
                    .as_str()
                    .ok_or_else(|| err(path, "map keys must be strings"))?;
                let len = path.len();
                path.push_str(&format!("[{k:?}]"));
                m.insert(k.to_string(), from_raw(e, et, path)?);
                path.truncate(len);
            }
            Ok(Value::Map(m))
        }
        Type::Object(attrs, _) => {
            let entries = raw
                .as_map()
                .ok_or_else(|| err(path, "an object is required"))?;
            let mut m = ValueMap::new();
            for (k, e) in entries {
                let k = k
                    .as_str()
                    .ok_or_else(|| err(path, "attribute names must be strings"))?;
                let at = attrs
                    .get(k)
                    .ok_or_else(|| err(path, format!("unsupported attribute {k:?}")))?;
                let len = path.len();
                if !path.is_empty() {
                    path.push('.');
                }
                path.push_str(k);
                m.insert(k.to_string(), from_raw(e, at, path)?);
                path.truncate(len);
            }
            for (k, at) in attrs.iter() {
                m.entry(k.clone())
                    .or_insert_with(|| Value::Null(at.clone()));
            }
            Ok(Value::Object(m))
        }
    }
}

fn from_json(j: &serde_json::Value, ty: &Type, path: &mut String) -> Result<Value, String> {
    use serde_json::Value as J;
    if j.is_null() {
        return Ok(Value::Null(ty.clone()));
    }
    match ty {
        Type::Dynamic => {
            // The JSON encoding of a dynamic value is {"value": …, "type": …}.
            let (Some(t), Some(v)) = (j.get("type"), j.get("value")) else {
                return Err(err(path, "a dynamic value must be {\"type\", \"value\"}"));
            };
            let actual = type_from_json(t).map_err(|e| err(path, e))?;
            from_json(v, &actual, path)
        }
        Type::Bool => j
            .as_bool()
            .map(Value::Bool)
            .ok_or_else(|| err(path, "a bool is required")),
        Type::Number => match j {
            J::Number(n) => n.to_string().parse().map(Value::Number).ok(),
            J::String(s) => s.parse().map(Value::Number).ok(),
            _ => None,
        }
        .ok_or_else(|| err(path, "a number is required")),
        Type::String => match j {
            J::String(s) => Ok(Value::string(s.clone())),
            J::Number(n) => Ok(Value::string(n.to_string())),
            J::Bool(b) => Ok(Value::string(b.to_string())),
            _ => Err(err(path, "a string is required")),
        },
        Type::List(et) | Type::Set(et) => {
            let arr = j
                .as_array()
                .ok_or_else(|| err(path, "an array is required"))?;
            let mut elems = Vec::with_capacity(arr.len());
            for (i, e) in arr.iter().enumerate() {
                let len = path.len();
                path.push_str(&format!("[{i}]"));
                elems.push(from_json(e, et, path)?);
                path.truncate(len);
            }
            Ok(if matches!(ty, Type::Set(_)) {
                Value::set(elems)
            } else {
                Value::List(elems)
            })
        }
        Type::Tuple(ets) => {
            let arr = j
                .as_array()
                .filter(|a| a.len() == ets.len())
                .ok_or_else(|| {
                    err(
                        path,
                        format!("a tuple of {} elements is required", ets.len()),
                    )
                })?;
            let mut elems = Vec::with_capacity(arr.len());
            for (i, (e, et)) in arr.iter().zip(ets).enumerate() {
                let len = path.len();
                path.push_str(&format!("[{i}]"));
                elems.push(from_json(e, et, path)?);
                path.truncate(len);
            }
            Ok(Value::Tuple(elems))
        }
        Type::Map(et) => {
            let o = j
                .as_object()
                .ok_or_else(|| err(path, "an object is required"))?;
            let mut m = ValueMap::new();
            for (k, e) in o {
                let len = path.len();
                path.push_str(&format!("[{k:?}]"));
                m.insert(k.clone(), from_json(e, et, path)?);
                path.truncate(len);
            }
            Ok(Value::Map(m))
        }
        Type::Object(attrs, _) => {
            let o = j
                .as_object()
                .ok_or_else(|| err(path, "an object is required"))?;
            let mut m = ValueMap::new();
            for (k, at) in attrs.iter() {
                let len = path.len();
                if !path.is_empty() {
                    path.push('.');
                }
                path.push_str(k);
                let v = match o.get(k) {
                    Some(e) => from_json(e, at, path)?,
                    None => Value::Null(at.clone()),
                };
                m.insert(k.clone(), v);
                path.truncate(len);
            }
            Ok(Value::Object(m))
        }
    }
}

/// A cty type from its JSON form (`"string"`, `["list","number"]`, `["object",{…}]`,
/// `["object",{…},["optional"]]`, `["tuple",[…]]`, `"dynamic"`).
pub(crate) fn type_from_json(j: &serde_json::Value) -> Result<Type, String> {
    use serde_json::Value as J;
    let bad = || format!("unsupported type {j}");
    match j {
        J::String(s) => match s.as_str() {
            "string" => Ok(Type::String),
            "number" => Ok(Type::Number),
            "bool" => Ok(Type::Bool),
            "dynamic" => Ok(Type::Dynamic),
            _ => Err(bad()),
        },
        J::Array(a) if a.len() >= 2 => match a[0].as_str() {
            Some("list") => Ok(Type::list(type_from_json(&a[1])?)),
            Some("set") => Ok(Type::set(type_from_json(&a[1])?)),
            Some("map") => Ok(Type::map(type_from_json(&a[1])?)),
            Some("tuple") => Ok(Type::Tuple(
                a[1].as_array()
                    .ok_or_else(bad)?
                    .iter()
                    .map(type_from_json)
                    .collect::<Result<_, _>>()?,
            )),
            Some("object") => {
                let attrs = a[1]
                    .as_object()
                    .ok_or_else(bad)?
                    .iter()
                    .map(|(k, t)| Ok((k.clone(), type_from_json(t)?)))
                    .collect::<Result<BTreeMap<_, _>, String>>()?;
                let optional = a
                    .get(2)
                    .and_then(J::as_array)
                    .map(|o| {
                        o.iter()
                            .filter_map(J::as_str)
                            .map(|k| (k.to_string(), None))
                            .collect()
                    })
                    .unwrap_or_default();
                Ok(Type::Object(Box::new(attrs), optional))
            }
            _ => Err(bad()),
        },
        _ => Err(bad()),
    }
}

/// The JSON form of a type (the inverse of [`type_from_json`]).
pub(crate) fn type_to_json(t: &Type) -> serde_json::Value {
    use serde_json::json;
    match t {
        Type::Dynamic => json!("dynamic"),
        Type::Bool => json!("bool"),
        Type::Number => json!("number"),
        Type::String => json!("string"),
        Type::List(e) => json!(["list", type_to_json(e)]),
        Type::Set(e) => json!(["set", type_to_json(e)]),
        Type::Map(e) => json!(["map", type_to_json(e)]),
        Type::Tuple(es) => json!(["tuple", es.iter().map(type_to_json).collect::<Vec<_>>()]),
        Type::Object(attrs, optional) => {
            let o: serde_json::Map<String, serde_json::Value> = attrs
                .iter()
                .map(|(k, t)| (k.clone(), type_to_json(t)))
                .collect();
            if optional.is_empty() {
                json!(["object", o])
            } else {
                json!(["object", o, optional.keys().collect::<Vec<_>>()])
            }
        }
    }
}

#[cfg(test)]
mod tests;
