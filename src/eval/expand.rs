//! `count` and `for_each`: evaluating the meta-arguments into instance keys, with Terraform's
//! errors. An unknown value is not an error here (`Ok(None)`): validate and inspect can live
//! with it; at plan time the engine reports `unknown_expansion` for it, which names the
//! references the value depends on.

use super::expr::{convert, Evaluator};
use super::Scope;
use crate::diag::{Diagnostic, Diagnostics, FileId, Span};
use crate::value::ValueMap;
use crate::value::{Type, Value};
use hcl_edit::expr::Expression;
use hcl_edit::Span as _;

fn at(expr: &Expression, file: FileId) -> Option<Span> {
    expr.span().map(|r| Span {
        file,
        start: r.start,
        end: r.end,
    })
}

/// The number of instances `count = expr` asks for; `None` when it is not known yet.
pub(crate) fn count_value(
    expr: &Expression,
    scope: &dyn Scope,
) -> Result<Option<i64>, Diagnostics> {
    let v = Evaluator::new(scope).expr(expr)?;
    let span = at(expr, scope.file());
    let bad = |detail: &str| -> Diagnostics {
        Diagnostic::error("Invalid count argument", detail.to_string())
            .with_span(span)
            .into()
    };
    if v.contains_sensitive() {
        return Err(bad(
            "Sensitive values, or values derived from sensitive values, cannot be used as count \
             arguments.",
        ));
    }
    match &v {
        Value::Unknown(_) => return Ok(None),
        Value::Null(_) => {
            return Err(bad(
                "The given \"count\" argument value is null. An integer is required.",
            ))
        }
        _ => {}
    }
    let n = match convert(&v, &Type::Number) {
        Ok(Value::Number(n)) => n,
        Ok(_) => return Ok(None),
        // Terraform's wording for a count of the wrong type.
        Err(m) => {
            return Err(Diagnostic::error(
                "Incorrect value type",
                format!("Invalid expression value: {m}."),
            )
            .with_span(span)
            .into())
        }
    };
    match n.to_i64() {
        Some(i) if i >= 0 => Ok(Some(i)),
        Some(_) => Err(bad(
            "The given \"count\" argument value is unsuitable: must be greater than or equal to \
             zero.",
        )),
        None => Err(bad(
            "The given \"count\" argument value is unsuitable: the value must be a whole number.",
        )),
    }
}

/// The instances `for_each = expr` asks for: each key with its `each.value`; `None` when the
/// set of keys is not known yet.
pub(crate) fn for_each_value(
    expr: &Expression,
    scope: &dyn Scope,
) -> Result<Option<ValueMap>, Diagnostics> {
    let v = Evaluator::new(scope).expr(expr)?;
    for_each_of(v, at(expr, scope.file()))
}

/// The instances a `for_each` value (evaluated, written at `span`) asks for, as
/// [`for_each_value`] gives them.
pub(crate) fn for_each_of(v: Value, span: Option<Span>) -> Result<Option<ValueMap>, Diagnostics> {
    let bad = |summary: &str, detail: String| -> Diagnostics {
        Diagnostic::error(summary, detail).with_span(span).into()
    };
    if v.is_sensitive() {
        return Err(bad(
            "Invalid for_each argument",
            "Sensitive values, or values derived from sensitive values, cannot be used as \
             for_each arguments. If used, the sensitive value could be exposed as a resource \
             instance key."
                .into(),
        ));
    }
    match v {
        Value::Unknown(_) => Ok(None),
        Value::Null(_) => Err(bad(
            "Invalid for_each argument",
            "The given \"for_each\" argument value is unsuitable: the given \"for_each\" \
             argument value is null. A map, or set of strings is allowed."
                .into(),
        )),
        Value::Map(m) | Value::Object(m) => Ok(Some(m)),
        Value::Set(items) => {
            let mut out = ValueMap::new();
            for item in items {
                match item {
                    Value::Unknown(_) => return Ok(None),
                    Value::Null(_) => {
                        return Err(bad(
                            "Invalid for_each set argument",
                            "The given \"for_each\" argument value is unsuitable: \"for_each\" \
                             sets must not contain null values."
                                .into(),
                        ))
                    }
                    Value::String(s) => {
                        out.insert(s.clone(), Value::String(s));
                    }
                    Value::Sensitive(_) => {
                        return Err(bad(
                            "Invalid for_each argument",
                            "Sensitive values, or values derived from sensitive values, cannot \
                             be used as for_each arguments. If used, the sensitive value could \
                             be exposed as a resource instance key."
                                .into(),
                        ))
                    }
                    other => {
                        return Err(bad(
                            "Invalid for_each set argument",
                            format!(
                                "The given \"for_each\" argument value is unsuitable: \
                                 \"for_each\" supports maps and sets of strings, but you have \
                                 provided a set containing type {}.",
                                super::convert::friendly_name(&other.type_of(), false)
                            ),
                        ))
                    }
                }
            }
            Ok(Some(out))
        }
        other => Err(bad(
            "Invalid for_each argument",
            format!(
                "The given \"for_each\" argument value is unsuitable: the \"for_each\" argument \
                 must be a map, or set of strings, and you have provided a value of type {}.",
                super::convert::friendly_name(&other.type_of(), false)
            ),
        )),
    }
}
