//! Type conversion functions: tostring, tonumber, tobool, tolist, toset, tomap.
//!
//! Each converts its argument by Terraform's conversion rules (see `eval::convert`), with the
//! error wording of Terraform's explicit conversions ("cannot convert \"abc\" to number; given
//! string must be a decimal representation of a number"). Null converts to a typed null; an
//! unknown argument converts to an unknown of the target type.

use super::{arg_err, p, Def, Fail, FunctionContext, Res, Ret, P};
use crate::eval::convert::{self, convertible, friendly_name, mismatch, quote};
use crate::value::{Type, Value};

pub(super) const DEFS: &[Def] = &[
    Def {
        name: "tostring",
        params: &[p("v", P::Any).null().inner_marks().dynamic_type()],
        variadic: None,
        ret: Ret::Fixed(P::Str),
        imp: tostring,
    },
    Def {
        name: "tonumber",
        params: &[p("v", P::Any).null().inner_marks().dynamic_type()],
        variadic: None,
        ret: Ret::Fixed(P::Num),
        imp: tonumber,
    },
    Def {
        name: "tobool",
        params: &[p("v", P::Any).null().inner_marks().dynamic_type()],
        variadic: None,
        ret: Ret::Fixed(P::Bool),
        imp: tobool,
    },
    Def {
        name: "tolist",
        params: &[p("v", P::Any).null().inner_marks().dynamic_type()],
        variadic: None,
        ret: Ret::From(list_ret),
        imp: tolist,
    },
    Def {
        name: "toset",
        params: &[p("v", P::Any).null().inner_marks().dynamic_type()],
        variadic: None,
        ret: Ret::From(set_ret),
        imp: toset,
    },
    Def {
        name: "tomap",
        params: &[p("v", P::Any).null().inner_marks().dynamic_type()],
        variadic: None,
        ret: Ret::From(map_ret),
        imp: tomap,
    },
];

fn target_ret(a: &[Value], want: Type) -> Type {
    match a.first() {
        Some(v) => match convert::convert(Value::Unknown(v.type_of()), &want) {
            Ok(Value::Unknown(t)) => t,
            _ => want,
        },
        None => want,
    }
}

fn list_ret(a: &[Value]) -> Type {
    target_ret(a, Type::list(Type::Dynamic))
}
fn set_ret(a: &[Value]) -> Type {
    target_ret(a, Type::set(Type::Dynamic))
}
fn map_ret(a: &[Value]) -> Type {
    target_ret(a, Type::map(Type::Dynamic))
}

/// Terraform's `MakeToFunc`: a type check with explicit-conversion wording, then the value
/// conversion.
fn to(v: Value, want: Type) -> Result<Value, Fail> {
    let got = v.type_of();
    if got != Type::Dynamic && !convertible(&got, &want) {
        let msg = match (&got, &want) {
            (Type::Tuple(_), Type::Tuple(_)) => format!(
                "incompatible tuple type for conversion: {}",
                mismatch(&got, &want)
            ),
            (Type::Object(..), Type::Object(..)) => format!(
                "incompatible object type for conversion: {}",
                mismatch(&got, &want)
            ),
            _ => format!(
                "cannot convert {} to {}",
                friendly_name(&got, false),
                friendly_name(&want, true)
            ),
        };
        return Err(arg_err(0, msg));
    }
    let text = v.as_str().map(str::to_string);
    convert::convert(v, &want).map_err(|_| {
        let what = text
            .as_deref()
            .map(quote)
            .unwrap_or_else(|| "string".into());
        match (&got, &want) {
            (Type::String, Type::Bool) => arg_err(
                0,
                format!(
                    "cannot convert {what} to bool; only the strings \"true\" or \"false\" are \
                     allowed"
                ),
            ),
            (Type::String, Type::Number) => arg_err(
                0,
                format!(
                    "cannot convert {what} to number; given string must be a decimal \
                     representation of a number"
                ),
            ),
            _ => arg_err(
                0,
                format!(
                    "cannot convert {} to {}",
                    friendly_name(&got, false),
                    friendly_name(&want, true)
                ),
            ),
        }
    })
}

/// `tostring(v)`: numbers and bools become strings.
fn tostring(a: Vec<Value>, _: &FunctionContext) -> Res {
    to(a.into_iter().next().unwrap_or(Value::null()), Type::String)
}

/// `tonumber(v)`: strings must be decimal numbers.
fn tonumber(a: Vec<Value>, _: &FunctionContext) -> Res {
    to(a.into_iter().next().unwrap_or(Value::null()), Type::Number)
}

/// `tobool(v)`: strings must be "true" or "false".
fn tobool(a: Vec<Value>, _: &FunctionContext) -> Res {
    to(a.into_iter().next().unwrap_or(Value::null()), Type::Bool)
}

/// `tolist(v)`: a tuple or set becomes a list of the elements' common type.
fn tolist(a: Vec<Value>, _: &FunctionContext) -> Res {
    to(
        a.into_iter().next().unwrap_or(Value::null()),
        Type::list(Type::Dynamic),
    )
}

/// `toset(v)`: a tuple or list becomes a set of the elements' common type.
fn toset(a: Vec<Value>, _: &FunctionContext) -> Res {
    to(
        a.into_iter().next().unwrap_or(Value::null()),
        Type::set(Type::Dynamic),
    )
}

/// `tomap(v)`: an object becomes a map of the attributes' common type.
fn tomap(a: Vec<Value>, _: &FunctionContext) -> Res {
    to(
        a.into_iter().next().unwrap_or(Value::null()),
        Type::map(Type::Dynamic),
    )
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use crate::value::{Type, Value};

    #[test]
    fn conversions() {
        // Expected values and messages from `terraform console` (1.11).
        check("tostring", vec![num("1.50")], s("1.5"));
        check("tostring", vec![b(true)], s("true"));
        check("tostring", vec![Value::null()], Value::Null(Type::String));
        check("tonumber", vec![s("1e3")], n(1000));
        check("tobool", vec![s("1")], b(true));
        check("tolist", vec![tup(vec![s("a"), n(1)])], slist(&["a", "1"]));
        check(
            "tolist",
            vec![tup(vec![s("a"), Value::null()])],
            list(vec![s("a"), Value::Null(Type::String)]),
        );
        check(
            "toset",
            vec![tup(vec![tup(vec![n(1)]), tup(vec![s("a"), n(2)])])],
            Value::set(vec![slist(&["1"]), slist(&["a", "2"])]),
        );
        check(
            "tomap",
            vec![obj(vec![("a", Value::null()), ("b", n(1))])],
            map(vec![("a", Value::Null(Type::Number)), ("b", n(1))]),
        );
        check("tostring", vec![unk(Type::Dynamic)], unk(Type::String));
        check(
            "tolist",
            vec![unk(Type::Tuple(vec![Type::String]))],
            unk(Type::list(Type::String)),
        );
        check("tostring", vec![n(1).sensitive()], s("1").sensitive());
        check(
            "tolist",
            vec![tup(vec![n(1).sensitive(), n(2)])],
            list(vec![n(1).sensitive(), n(2)]),
        );
        let e = |f: &str, v: Value, msg: &str| check_err(f, vec![v], msg);
        e(
            "tonumber",
            s("abc"),
            "Invalid value for \"v\" parameter: cannot convert \"abc\" to number; given string \
             must be a decimal representation of a number.",
        );
        e(
            "tobool",
            s("x"),
            "Invalid value for \"v\" parameter: cannot convert \"x\" to bool; only the strings \
             \"true\" or \"false\" are allowed.",
        );
        e(
            "tobool",
            n(1),
            "Invalid value for \"v\" parameter: cannot convert number to bool.",
        );
        e(
            "tonumber",
            b(true),
            "Invalid value for \"v\" parameter: cannot convert bool to number.",
        );
        e(
            "tostring",
            tup(vec![]),
            "Invalid value for \"v\" parameter: cannot convert tuple to string.",
        );
        e(
            "tolist",
            obj(vec![("a", n(1))]),
            "Invalid value for \"v\" parameter: cannot convert object to list of any single type.",
        );
        e(
            "tomap",
            tup(vec![n(1)]),
            "Invalid value for \"v\" parameter: cannot convert tuple to map of any single type.",
        );
        e(
            "tolist",
            tup(vec![n(1), obj(vec![])]),
            "Invalid value for \"v\" parameter: cannot convert tuple to list of any single type.",
        );
    }
}
