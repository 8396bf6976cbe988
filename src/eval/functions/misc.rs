//! Marks and time-dependent functions: sensitive, nonsensitive, issensitive, ephemeralasnull,
//! timestamp, plantimestamp, uuid.
//!
//! `timestamp()` and `uuid()` give a new value on every call, so Terraform only settles them at
//! apply: during planning they are unknown strings ("known after apply"). Cairn's evaluator
//! works at plan time, so they return `Unknown(string)`. `plantimestamp()` is the time the
//! evaluation runs (UTC, RFC 3339), known at plan time as in Terraform.

use super::{p, Def, FunctionContext, Res, Ret, P};
use crate::value::{Type, Value};
use std::time::{SystemTime, UNIX_EPOCH};

pub(super) const DEFS: &[Def] = &[
    Def {
        name: "sensitive",
        params: &[p("value", P::Any).null().unknown().marked()],
        variadic: None,
        ret: Ret::From(super::ret_arg0),
        imp: sensitive,
    },
    Def {
        name: "nonsensitive",
        params: &[p("value", P::Any).null().unknown().marked()],
        variadic: None,
        ret: Ret::From(super::ret_arg0),
        imp: nonsensitive,
    },
    Def {
        name: "issensitive",
        params: &[p("value", P::Any).null().unknown().marked().dynamic_type()],
        variadic: None,
        ret: Ret::Fixed(P::Bool),
        imp: issensitive,
    },
    Def {
        name: "ephemeralasnull",
        params: &[p("value", P::Any).null().unknown().marked()],
        variadic: None,
        ret: Ret::From(super::ret_arg0),
        imp: ephemeralasnull,
    },
    Def {
        name: "timestamp",
        params: &[],
        variadic: None,
        ret: Ret::Fixed(P::Str),
        imp: timestamp,
    },
    Def {
        name: "plantimestamp",
        params: &[],
        variadic: None,
        ret: Ret::Fixed(P::Str),
        imp: plantimestamp,
    },
    Def {
        name: "uuid",
        params: &[],
        variadic: None,
        ret: Ret::Fixed(P::Str),
        imp: uuid,
    },
];

/// `sensitive(value)`: the value marked sensitive (unknowns stay unknown, and sensitive).
fn sensitive(a: Vec<Value>, _: &FunctionContext) -> Res {
    Ok(a.into_iter().next().unwrap_or(Value::null()).sensitive())
}

/// `nonsensitive(value)`: the value without its own sensitive mark (marks on parts inside stay,
/// as in Terraform). Unknowns stay unknown.
fn nonsensitive(a: Vec<Value>, _: &FunctionContext) -> Res {
    Ok(a.into_iter()
        .next()
        .unwrap_or(Value::null())
        .unmarked()
        .clone())
}

/// `issensitive(value)`: whether the value itself is marked sensitive; known even for an
/// unknown value.
fn issensitive(a: Vec<Value>, _: &FunctionContext) -> Res {
    Ok(Value::Bool(a[0].is_sensitive()))
}

/// `ephemeralasnull(value)` of a value that is not ephemeral: the value as it is. The
/// evaluator answers a call whose argument refers to ephemeral terms itself (it knows the
/// scope; `expr::Evaluator::ephemeral_as_null`), with nulls where they are.
fn ephemeralasnull(a: Vec<Value>, _: &FunctionContext) -> Res {
    Ok(a.into_iter().next().unwrap_or(Value::null()))
}

/// `timestamp()`: unknown until apply (see the module docs); now where the scope settles
/// impure functions (`console`).
fn timestamp(_: Vec<Value>, ctx: &FunctionContext) -> Res {
    if ctx.settle_impure {
        return plantimestamp(Vec::new(), ctx);
    }
    Ok(Value::Unknown(Type::String))
}

/// `uuid()`: unknown until apply (see the module docs); where the scope settles impure
/// functions (`console`), 16 random bytes written as go-uuid writes them (8-4-4-4-12 hex
/// digits, no version bits).
fn uuid(_: Vec<Value>, ctx: &FunctionContext) -> Res {
    if ctx.settle_impure {
        let bytes: [u8; 16] = rand::random();
        return Ok(Value::String(
            ::uuid::Uuid::from_bytes(bytes).hyphenated().to_string(),
        ));
    }
    Ok(Value::Unknown(Type::String))
}

/// `plantimestamp()`: now, as `2006-01-02T15:04:05Z`.
fn plantimestamp(_: Vec<Value>, _: &FunctionContext) -> Res {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    Ok(Value::String(rfc3339(secs)))
}

/// Seconds since the Unix epoch as an RFC 3339 UTC timestamp.
pub(crate) fn rfc3339(secs: i64) -> String {
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    // Howard Hinnant's civil-from-days algorithm.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use super::rfc3339;
    use crate::value::Type;

    #[test]
    fn marks() {
        check("sensitive", vec![n(1)], n(1).sensitive());
        check(
            "sensitive",
            vec![unk(Type::String)],
            unk(Type::String).sensitive(),
        );
        check("nonsensitive", vec![s("a").sensitive()], s("a"));
        check("nonsensitive", vec![s("a")], s("a"));
        check("issensitive", vec![n(1).sensitive()], b(true));
        check("issensitive", vec![tup(vec![n(1).sensitive()])], b(false));
        check("issensitive", vec![unk(Type::String).sensitive()], b(true));
    }

    #[test]
    fn time() {
        check("timestamp", vec![], unk(Type::String));
        check("uuid", vec![], unk(Type::String));
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(1_709_251_199), "2024-02-29T23:59:59Z");
        let now = super::super::testing::run("plantimestamp", vec![]).unwrap();
        assert!(now.as_str().unwrap().ends_with('Z'));
    }
}
