//! A stand-in for the function library while it is written on its own branch: just enough
//! functions (`upper`, `lower`, `length`, `tostring`, `join`) for the evaluator's own tests.
//! Replaced by `functions::{call, exists, names, arity}` when that lands.

use super::functions::{FunctionContext, FunctionError};
use crate::value::Value;

const NAMES: &[&str] = &["join", "length", "lower", "tostring", "upper"];

pub fn exists(name: &str) -> bool {
    NAMES.contains(&name)
}

pub fn names() -> Vec<&'static str> {
    NAMES.to_vec()
}

/// Minimum and maximum (None: variadic) argument counts, and the parameter names.
pub fn arity(name: &str) -> (usize, Option<usize>, &'static [&'static str]) {
    match name {
        "join" => (1, None, &["separator", "lists"]),
        _ => (1, Some(1), &["value"]),
    }
}

pub fn call(name: &str, args: &[Value], _ctx: &FunctionContext) -> Result<Value, FunctionError> {
    let bad = |arg: usize, m: &str| FunctionError {
        arg: Some(arg),
        message: m.to_string(),
    };
    if args.iter().any(|a| !a.is_wholly_known()) {
        return Ok(Value::unknown());
    }
    match name {
        "upper" | "lower" | "tostring" => {
            let s = match &args[0] {
                Value::String(s) => s.clone(),
                Value::Number(n) if name == "tostring" => n.to_string(),
                Value::Bool(b) if name == "tostring" => b.to_string(),
                _ => return Err(bad(0, "string required")),
            };
            Ok(Value::String(match name {
                "upper" => s.to_uppercase(),
                "lower" => s.to_lowercase(),
                _ => s,
            }))
        }
        "length" => match &args[0] {
            Value::String(s) => Ok(Value::int(s.chars().count() as i64)),
            v => match (v.elements(), v.attributes()) {
                (Some(e), _) => Ok(Value::int(e.len() as i64)),
                (_, Some(m)) => Ok(Value::int(m.len() as i64)),
                _ => Err(bad(
                    0,
                    "argument must be a string, a collection type, or a structural type",
                )),
            },
        },
        "join" => {
            let sep = args[0].as_str().ok_or_else(|| bad(0, "string required"))?;
            let mut parts = Vec::new();
            for (i, l) in args[1..].iter().enumerate() {
                for e in l
                    .elements()
                    .ok_or_else(|| bad(i + 1, "list of string required"))?
                {
                    parts.push(
                        e.as_str()
                            .ok_or_else(|| bad(i + 1, "list of string required"))?
                            .to_string(),
                    );
                }
            }
            Ok(Value::String(parts.join(sep)))
        }
        _ => Err(FunctionError {
            arg: None,
            message: format!("no function {name}"),
        }),
    }
}
