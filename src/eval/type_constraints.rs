//! Type constraints: `string`, `list(number)`, `map(any)`, `tuple([...])`,
//! `object({a = string, b = optional(number, 3)})`, `any`, read from their expressions.

use super::expr::convert;
use super::expr::Evaluator;
use super::{Scope, ScopeError, Subject};
use crate::diag::{Diagnostic, FileId, Span};
use crate::value::{Type, Value};
use hcl_edit::expr::{Expression, ObjectKey};
use hcl_edit::Span as _;
use std::collections::BTreeMap;
use std::path::Path;

/// Reads a type constraint. `file` is used for the diagnostic's span.
pub(crate) fn parse_type(expr: &Expression, file: FileId) -> Result<Type, Diagnostic> {
    parse(expr, file, false)
}

/// Reads a variable's `type`, with Terraform's legacy forms: a bare `list` or `map` keyword
/// means `list(any)` / `map(any)`, and a quoted constraint (`"string"`, Terraform 0.11's form)
/// is an error that says to remove the quotes.
pub(crate) fn parse_variable_type(expr: &Expression, file: FileId) -> Result<Type, Diagnostic> {
    match expr {
        Expression::Variable(v) if v.as_str() == "list" => Ok(Type::list(Type::Dynamic)),
        Expression::Variable(v) if v.as_str() == "map" => Ok(Type::map(Type::Dynamic)),
        Expression::String(s) => {
            let r = expr.span().unwrap_or(0..0);
            Err(Diagnostic::error(
                "Invalid quoted type constraints",
                format!(
                    "Terraform 0.11 and earlier required type constraints to be given in \
                     quotes, but that form is now deprecated and will be removed in a future \
                     version of Terraform. Remove the quotes around {}.",
                    cairn_state::quote(s.value())
                ),
            )
            .with_span(Some(Span {
                file,
                start: r.start,
                end: r.end,
            })))
        }
        _ => parse_type(expr, file),
    }
}

fn invalid(expr: &Expression, file: FileId, detail: impl Into<String>) -> Diagnostic {
    let r = expr.span().unwrap_or(0..0);
    Diagnostic::error("Invalid type specification", detail).with_span(Some(Span {
        file,
        start: r.start,
        end: r.end,
    }))
}

fn parse(expr: &Expression, file: FileId, in_object: bool) -> Result<Type, Diagnostic> {
    match expr {
        Expression::Parenthesis(p) => parse(p.inner(), file, in_object),
        Expression::Variable(v) => match v.as_str() {
            "string" => Ok(Type::String),
            "number" => Ok(Type::Number),
            "bool" => Ok(Type::Bool),
            "any" => Ok(Type::Dynamic),
            "list" | "map" | "set" => Err(invalid(
                expr,
                file,
                format!(
                    "The {} type constructor requires one argument specifying the element type.",
                    v.as_str()
                ),
            )),
            other => Err(invalid(
                expr,
                file,
                format!(
                    "The keyword {} is not a valid type specification.",
                    cairn_state::quote(other)
                ),
            )),
        },
        Expression::FuncCall(f) if f.name.namespace.is_empty() => {
            let name = f.name.name.as_str();
            let args: Vec<&Expression> = f.args.iter().collect();
            let one_arg = |what: &str| -> Result<&Expression, Diagnostic> {
                match args.as_slice() {
                    [a] => Ok(*a),
                    _ => Err(invalid(
                        expr,
                        file,
                        format!("The {name} type constructor requires one argument specifying the {what}."),
                    )),
                }
            };
            match name {
                "list" => Ok(Type::list(parse(one_arg("element type")?, file, false)?)),
                "set" => Ok(Type::set(parse(one_arg("element type")?, file, false)?)),
                "map" => Ok(Type::map(parse(one_arg("element type")?, file, false)?)),
                "tuple" => match one_arg("element types as a list")? {
                    Expression::Array(a) => Ok(Type::Tuple(
                        a.iter()
                            .map(|e| parse(e, file, false))
                            .collect::<Result<_, _>>()?,
                    )),
                    other => Err(invalid(
                        other,
                        file,
                        "The tuple type constructor requires a list of element types.",
                    )),
                },
                "object" => match one_arg("attribute types as an object")? {
                    Expression::Object(o) => {
                        let mut attrs = BTreeMap::new();
                        let mut optional = BTreeMap::new();
                        for (k, v) in o.iter() {
                            let key = match k {
                                ObjectKey::Ident(id) => id.as_str().to_string(),
                                ObjectKey::Expression(Expression::String(s)) => s.value().clone(),
                                ObjectKey::Expression(e) => {
                                    return Err(invalid(
                                        e,
                                        file,
                                        "Object constructor map keys must be attribute names.",
                                    ))
                                }
                            };
                            let ve = v.expr();
                            match ve {
                                Expression::FuncCall(of)
                                    if of.name.name.as_str() == "optional"
                                        && of.name.namespace.is_empty() =>
                                {
                                    let oargs: Vec<&Expression> = of.args.iter().collect();
                                    let (ty, default) = match oargs.as_slice() {
                                        [t] => (parse(t, file, true)?, None),
                                        [t, d] => {
                                            let ty = parse(t, file, true)?;
                                            let dv = const_value(d, file)?;
                                            let dv = convert(&dv, &ty).map_err(|m| {
                                                invalid(
                                                    d,
                                                    file,
                                                    format!("Invalid default value for optional attribute: {m}."),
                                                )
                                            })?;
                                            (ty, Some(Box::new(dv)))
                                        }
                                        _ => {
                                            return Err(invalid(
                                                ve,
                                                file,
                                                "The optional modifier requires the attribute type and, optionally, a default value.",
                                            ))
                                        }
                                    };
                                    attrs.insert(key.clone(), ty);
                                    optional.insert(key, default);
                                }
                                _ => {
                                    attrs.insert(key, parse(ve, file, true)?);
                                }
                            }
                        }
                        Ok(Type::Object(Box::new(attrs), optional.into()))
                    }
                    other => Err(invalid(
                        other,
                        file,
                        "The object type constructor requires an object of attribute types.",
                    )),
                },
                "optional" => Err(invalid(
                    expr,
                    file,
                    if in_object {
                        "Optional attribute modifier is only for attribute types directly inside an object type constraint."
                    } else {
                        "Keyword \"optional\" is valid only as a modifier for object type attributes."
                    },
                )),
                other => Err(invalid(
                    expr,
                    file,
                    format!(
                        "Keyword {} is not a valid type constructor.",
                        cairn_state::quote(other)
                    ),
                )),
            }
        }
        _ => Err(invalid(
            expr,
            file,
            "A type specification is either a primitive type keyword (bool, number, string) or a \
             complex type constructor call, like list(string).",
        )),
    }
}

/// A scope with no names: for values that must be constant (defaults, `source`, `alias`).
pub(crate) struct ConstScope {
    pub(crate) file: FileId,
}

impl Scope for ConstScope {
    fn resolve(&self, _: &Subject) -> Result<Value, ScopeError> {
        Err(ScopeError::new(
            "Variables not allowed",
            "Variables may not be used here.",
        ))
    }
    fn file(&self) -> FileId {
        self.file
    }
    fn module_dir(&self) -> &Path {
        Path::new(".")
    }
    fn root_dir(&self) -> &Path {
        Path::new(".")
    }
}

/// Evaluates an expression that may not refer to anything. Returns the first error.
pub(crate) fn const_value(expr: &Expression, file: FileId) -> Result<Value, Diagnostic> {
    let scope = ConstScope { file };
    Evaluator::new(&scope).expr(expr).map_err(|d| {
        d.into_iter()
            .next()
            .unwrap_or_else(|| Diagnostic::error("Invalid expression", ""))
    })
}
