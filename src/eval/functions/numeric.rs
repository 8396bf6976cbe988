//! Number functions: abs, ceil, floor, log, pow, signum, parseint, min, max.
//!
//! Numbers are exact decimals; `abs`, `ceil`, `floor`, `min`, `max` and `parseint` stay exact
//! (integers beyond 2^53 included). `log` and `pow` go through 64-bit floats as Terraform's do,
//! and their results are the shortest decimals that round-trip those floats. Results that are
//! not finite (`log(0, 10)` is -Inf in Terraform) cannot be represented and are errors.
//! Any unknown argument gives an unknown number.

use super::{arg_err, call_err, p, Def, FunctionContext, Res, Ret, P};
use crate::value::{Number, Value};
use bigdecimal::num_bigint::BigInt;
use bigdecimal::{BigDecimal, RoundingMode, Signed, Zero};

const NUM: P = P::Num;

pub(super) const DEFS: &[Def] = &[
    Def {
        name: "abs",
        params: &[p("num", NUM)],
        variadic: None,
        ret: Ret::Fixed(NUM),
        imp: abs,
    },
    Def {
        name: "ceil",
        params: &[p("num", NUM)],
        variadic: None,
        ret: Ret::Fixed(NUM),
        imp: ceil,
    },
    Def {
        name: "floor",
        params: &[p("num", NUM)],
        variadic: None,
        ret: Ret::Fixed(NUM),
        imp: floor,
    },
    Def {
        name: "log",
        params: &[p("num", NUM), p("base", NUM)],
        variadic: None,
        ret: Ret::Fixed(NUM),
        imp: log,
    },
    Def {
        name: "pow",
        params: &[p("num", NUM), p("power", NUM)],
        variadic: None,
        ret: Ret::Fixed(NUM),
        imp: pow,
    },
    Def {
        name: "signum",
        params: &[p("num", NUM)],
        variadic: None,
        ret: Ret::Fixed(NUM),
        imp: signum,
    },
    Def {
        name: "parseint",
        params: &[p("number", P::Any), p("base", NUM)],
        variadic: None,
        ret: Ret::Fixed(NUM),
        imp: parseint,
    },
    Def {
        name: "min",
        params: &[],
        variadic: Some(p("numbers", NUM)),
        ret: Ret::Fixed(NUM),
        imp: min,
    },
    Def {
        name: "max",
        params: &[],
        variadic: Some(p("numbers", NUM)),
        ret: Ret::Fixed(NUM),
        imp: max,
    },
];

fn dec(v: &Value) -> BigDecimal {
    v.as_number().map(|n| (*n.0).clone()).unwrap_or_default()
}

fn number(d: BigDecimal) -> Value {
    Value::Number(Number::new(d.normalized()))
}

/// A float result as Terraform shows it: the shortest decimal that round-trips.
fn from_float(f: f64) -> Res {
    if !f.is_finite() {
        return Err(call_err(format!(
            "the result ({f}) is not a finite number, which Cairn cannot represent"
        )));
    }
    if f == 0.0 && f.is_sign_negative() {
        return Ok(Value::Number(Number::negative_zero()));
    }
    format!("{f}")
        .parse::<BigDecimal>()
        .map(number)
        .map_err(|e| call_err(e.to_string()))
}

/// `abs(num)`: exact.
fn abs(a: Vec<Value>, _: &FunctionContext) -> Res {
    Ok(number(dec(&a[0]).abs()))
}

/// `ceil(num)`: exact.
fn ceil(a: Vec<Value>, _: &FunctionContext) -> Res {
    Ok(number(
        dec(&a[0]).with_scale_round(0, RoundingMode::Ceiling),
    ))
}

/// `floor(num)`: exact.
fn floor(a: Vec<Value>, _: &FunctionContext) -> Res {
    Ok(number(dec(&a[0]).with_scale_round(0, RoundingMode::Floor)))
}

/// `log(num, base)`: through 64-bit floats.
fn log(a: Vec<Value>, _: &FunctionContext) -> Res {
    let (x, base) = (a[0].as_number(), a[1].as_number());
    let (x, base) = (
        x.map(Number::to_f64).unwrap_or(f64::NAN),
        base.map(Number::to_f64).unwrap_or(f64::NAN),
    );
    from_float(x.ln() / base.ln())
}

/// `pow(num, power)`: through 64-bit floats, as Terraform does.
fn pow(a: Vec<Value>, _: &FunctionContext) -> Res {
    let (x, y) = (a[0].as_number(), a[1].as_number());
    let (x, y) = (
        x.map(Number::to_f64).unwrap_or(f64::NAN),
        y.map(Number::to_f64).unwrap_or(f64::NAN),
    );
    from_float(x.powf(y))
}

/// `signum(num)`: -1, 0 or 1; the number must be whole (as in Terraform).
fn signum(a: Vec<Value>, _: &FunctionContext) -> Res {
    let n = dec(&a[0]);
    if !n.is_integer() || Number::new(n.clone()).to_i64().is_none() {
        return Err(call_err(
            "value must be a whole number, between -9223372036854775808 and \
             9223372036854775807",
        ));
    }
    Ok(Value::int(if n.is_zero() {
        0
    } else if n.is_negative() {
        -1
    } else {
        1
    }))
}

/// `parseint(number, base)`: exact, bases 2 to 62 (digits 0-9, then a-z, then A-Z; case does
/// not matter up to base 36).
fn parseint(a: Vec<Value>, _: &FunctionContext) -> Res {
    let Some(text) = a[0].as_str() else {
        return Err(arg_err(
            0,
            format!(
                "first argument must be a string, not {}",
                crate::eval::convert::friendly_name(&a[0].type_of(), false)
            ),
        ));
    };
    let base = match a[1].as_number().and_then(Number::to_i64) {
        Some(b) if (2..=62).contains(&b) => b as u32,
        Some(_) => {
            return Err(arg_err(
                1,
                "base must be a whole number between 2 and 62 inclusive",
            ))
        }
        None => {
            return Err(arg_err(
                1,
                "value must be a whole number, between -9223372036854775808 and \
                 9223372036854775807",
            ))
        }
    };
    let bad = || {
        arg_err(
            0,
            format!(
                "cannot parse {} as a base {} integer",
                crate::eval::convert::quote(text),
                base
            ),
        )
    };
    let (neg, digits) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text.strip_prefix('+').unwrap_or(text)),
    };
    if digits.is_empty() {
        return Err(bad());
    }
    let mut acc = BigInt::from(0);
    for c in digits.chars() {
        let d = match c {
            '0'..='9' => c as u32 - '0' as u32,
            'a'..='z' => c as u32 - 'a' as u32 + 10,
            'A'..='Z' if base <= 36 => c as u32 - 'A' as u32 + 10,
            'A'..='Z' => c as u32 - 'A' as u32 + 36,
            _ => return Err(bad()),
        };
        if d >= base {
            return Err(bad());
        }
        acc = acc * base + d;
    }
    if neg {
        acc = -acc;
    }
    Ok(number(BigDecimal::from(acc)))
}

/// `min(numbers...)`: exact; of equal numbers the first (`min(-0, 0)` is `-0`), as cty.
fn min(a: Vec<Value>, _: &FunctionContext) -> Res {
    extreme(a, std::cmp::Ordering::Less)
}

/// `max(numbers...)`: exact; of equal numbers the first, as cty.
fn max(a: Vec<Value>, _: &FunctionContext) -> Res {
    extreme(a, std::cmp::Ordering::Greater)
}

fn extreme(a: Vec<Value>, better: std::cmp::Ordering) -> Res {
    let mut best: Option<Number> = None;
    for n in a.iter().filter_map(Value::as_number) {
        if best.as_ref().is_none_or(|b| n.cmp(b) == better) {
            best = Some(n.clone());
        }
    }
    let best = best.ok_or_else(|| call_err("must pass at least one number"))?;
    let negative_zero = best.is_negative_zero();
    match number(*best.0) {
        Value::Number(_) if negative_zero => Ok(Value::Number(Number::negative_zero())),
        v => Ok(v),
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use crate::value::Type;

    #[test]
    fn numbers() {
        // Expected values from `terraform console` (1.11).
        check(
            "abs",
            vec![num("-12345678901234567890.5")],
            num("12345678901234567890.5"),
        );
        check("ceil", vec![num("1.5")], n(2));
        check("floor", vec![num("-1.5")], n(-2));
        check(
            "floor",
            vec![num("12345678901234567890.5")],
            num("12345678901234567890"),
        );
        check("log", vec![n(10), n(3)], num("2.095903274289385"));
        check("log", vec![n(8), n(2)], n(3));
        check("pow", vec![n(2), n(-1)], num("0.5"));
        check("ceil", vec![num("-0.5")], n(0));
        check("floor", vec![num("0.99999999999999999999")], n(0));
        check(
            "max",
            vec![num("0.1"), num("0.30000000000000001")],
            num("0.30000000000000001"),
        );
        check("pow", vec![n(3), n(40)], num("12157665459056929000"));
        check("pow", vec![n(2), num("0.5")], num("1.4142135623730951"));
        check(
            "pow",
            vec![n(10), n(30)],
            num("1000000000000000000000000000000"),
        );
        check("signum", vec![n(-7)], n(-1));
        check("signum", vec![n(0)], n(0));
        check_err(
            "signum",
            vec![num("-0.5")],
            "Call to function \"signum\" failed: value must be a whole number, between \
             -9223372036854775808 and 9223372036854775807.",
        );
        check("parseint", vec![s("zZ"), n(62)], n(2231));
        check("parseint", vec![s("-FF"), n(16)], n(-255));
        check(
            "parseint",
            vec![
                s("111111111111111111111111111111111111111111111111111111111111111111"),
                n(2),
            ],
            num("73786976294838206463"),
        );
        check_err(
            "parseint",
            vec![s("1.5"), n(10)],
            "Invalid value for \"number\" parameter: cannot parse \"1.5\" as a base 10 integer.",
        );
        check_err(
            "parseint",
            vec![s("12"), n(1)],
            "Invalid value for \"base\" parameter: base must be a whole number between 2 and 62 \
             inclusive.",
        );
        check("max", vec![n(1), s("3"), n(2)], n(3));
        check(
            "min",
            vec![num("9007199254740993"), num("9007199254740994")],
            num("9007199254740993"),
        );
        check_err(
            "min",
            vec![],
            "Call to function \"min\" failed: must pass at least one number.",
        );
        check("max", vec![n(1), unk(Type::Number)], unk(Type::Number));
        check("abs", vec![n(-1).sensitive()], n(1).sensitive());
    }
}
