//! The built-in function library (Terraform's functions). Each function documents how it
//! treats unknown arguments.
//!
//! Every function is a `Def`: its parameters (name, type constraint, and whether it accepts
//! null, unknown and sensitive arguments), a return-type rule and an implementation. `call` does
//! what cty's function machinery does for Terraform, in the same order:
//! 1. checks the number of arguments;
//! 2. converts each argument to its parameter's type (`Invalid value for "str" parameter:
//!    string required`);
//! 3. rejects null arguments unless the parameter allows them;
//! 4. if any argument is itself unknown and its parameter does not handle unknowns, returns an
//!    unknown of the function's return type without running the function;
//! 5. removes sensitive marks from arguments whose parameter does not handle marks, runs the
//!    function, and marks the whole result sensitive if any removed mark was there. Functions
//!    that only move values around (`element`, `concat`, `lookup`, `values`...) see the marks
//!    inside their arguments and keep them on the parts they return, as Terraform's do.
//!
//! So, unless its doc comment says otherwise, a function returns an unknown result when any
//! argument is unknown, and a sensitive result when any argument contains a sensitive part.
//! Functions whose result does not depend on some unknown parts (`length`, `coalesce`, `merge`,
//! ...) opt in to seeing unknowns and document what they do.
//!
//! Errors are worded as Terraform words them (checked against `terraform console` 1.11), and
//! `FunctionError::message` is the whole diagnostic detail.
//!
//! The library, by family (one file each):
//! - strings: chomp endswith format formatlist indent join lower regex regexall replace split
//!   startswith strcontains strrev substr title trim trimprefix trimspace trimsuffix upper
//! - collections: alltrue anytrue chunklist coalesce coalescelist compact concat contains
//!   distinct element flatten index keys length lookup matchkeys merge one range reverse
//!   setintersection setproduct setsubtract setunion slice sort sum transpose values zipmap
//! - numeric: abs ceil floor log max min parseint pow signum
//! - encoding: base64decode base64encode base64gzip csvdecode jsondecode jsonencode
//!   textdecodebase64 textencodebase64 (Unicode, Latin-1, ASCII and Windows-1252 only)
//!   urlencode yamldecode (`yaml.rs`) yamlencode
//! - hashing: base64sha256 base64sha512 bcrypt md5 rsadecrypt sha1 sha256 sha512 uuidv5
//! - filesystem: abspath basename dirname file filebase64 filebase64sha256 filebase64sha512
//!   fileexists filemd5 fileset filesha1 filesha256 filesha512 pathexpand templatefile
//! - network: cidrhost cidrnetmask cidrsubnet cidrsubnets
//! - conversion: tobool tolist tomap tonumber toset tostring
//! - time: formatdate timeadd timecmp
//! - misc: ephemeralasnull issensitive nonsensitive plantimestamp sensitive timestamp uuid
//!
//! `try`, `can` and `templatestring` are special forms of the evaluator, not functions here;
//! the evaluator also resolves the `core::` namespace (`core::join` is `join`). Not provided:
//! the console-only `type`.

mod collections;
#[cfg(test)]
mod console_tests;
mod conversion;
mod definition;
mod descriptions;
mod encoding;
mod filesystem;
mod hashing;
mod jsondecode;
mod misc;
mod network;
mod numeric;
mod strings;
mod time;
mod yaml;

use crate::eval::convert::{self, quote};
use crate::value::Value;
use std::collections::BTreeMap;
use std::sync::OnceLock;

pub(crate) use definition::*;
pub(crate) use filesystem::TEMPLATE_EVALUATOR;

fn registry() -> &'static BTreeMap<&'static str, &'static Def> {
    static REGISTRY: OnceLock<BTreeMap<&'static str, &'static Def>> = OnceLock::new();
    REGISTRY.get_or_init(|| {
        let families: [&'static [Def]; 10] = [
            strings::DEFS,
            collections::DEFS,
            numeric::DEFS,
            encoding::DEFS,
            hashing::DEFS,
            filesystem::DEFS,
            network::DEFS,
            conversion::DEFS,
            misc::DEFS,
            time::DEFS,
        ];
        families
            .into_iter()
            .flatten()
            .map(|d| (d.name, d))
            .collect()
    })
}

/// True when `name` is a built-in function.
pub(crate) fn exists(name: &str) -> bool {
    registry().contains_key(name)
}

/// Every built-in function's name, sorted (for "did you mean").
pub(crate) fn names() -> impl Iterator<Item = &'static str> {
    registry().keys().copied()
}

/// The parameters `name` takes, or `None` if there is no such function.
pub(crate) fn arity(name: &str) -> Option<Arity> {
    registry().get(name).map(|d| Arity {
        params: d.params.iter().map(|p| p.name).collect(),
        variadic: d.variadic.map(|p| p.name),
    })
}

/// One parameter of a function's signature, for `metadata functions -json`.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct SigParam {
    pub(crate) name: &'static str,
    pub(crate) description: &'static str,
    pub(crate) ty: crate::value::Type,
    pub(crate) nullable: bool,
}

/// A built-in function's signature, as `terraform metadata functions -json` describes one.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Signature {
    pub(crate) name: &'static str,
    pub(crate) description: &'static str,
    pub(crate) params: Vec<SigParam>,
    pub(crate) variadic: Option<SigParam>,
    /// What the function returns given arguments of its parameters' types (unknown), as
    /// Terraform computes `return_type`: `dynamic` where it depends on the arguments.
    pub(crate) ret: crate::value::Type,
}

/// Every function's signature, by name: the library's, and the evaluator's special forms
/// `try`, `can` and `templatestring` (with Terraform's shapes for them).
pub(crate) fn signatures() -> BTreeMap<&'static str, Signature> {
    use crate::value::Type;
    let texts: BTreeMap<&str, (&'static str, &'static [&'static str])> = descriptions::DESCRIPTIONS
        .iter()
        .map(|(n, d, p)| (*n, (*d, *p)))
        .collect();
    let text = |name: &str| texts.get(name).copied().unwrap_or(("", &[]));
    let param = |p: &Param, desc: Option<&&'static str>| SigParam {
        name: p.name,
        description: desc.copied().unwrap_or(""),
        ty: p.ty.ty(),
        nullable: p.null,
    };
    let mut out: BTreeMap<&'static str, Signature> = registry()
        .values()
        .map(|d| {
            let (description, pdesc) = text(d.name);
            let params: Vec<SigParam> = d
                .params
                .iter()
                .enumerate()
                .map(|(i, p)| param(p, pdesc.get(i)))
                .collect();
            let variadic = d.variadic.map(|v| param(&v, pdesc.get(d.params.len())));
            // cty's `ReturnType` with each parameter's own type as the argument type: an
            // argument of unknown type where the parameter does not allow one gives `dynamic`.
            let untyped = d
                .params
                .iter()
                .chain(d.variadic.iter())
                .any(|p| matches!(p.ty, P::Any) && !p.dynamic);
            let ret = match d.ret {
                _ if untyped => Type::Dynamic,
                Ret::Fixed(p) => p.ty(),
                Ret::From(f) => {
                    let args: Vec<Value> = params
                        .iter()
                        .chain(variadic.iter())
                        .map(|p| Value::Unknown(p.ty.clone()))
                        .collect();
                    f(&args)
                }
            };
            let sig = Signature {
                name: d.name,
                description,
                params,
                variadic,
                ret,
            };
            (d.name, sig)
        })
        .collect();
    let special = |name: &'static str, params: Vec<(&'static str, Type)>, variadic: bool, ret| {
        let (description, pdesc) = text(name);
        let mut ps: Vec<SigParam> = params
            .into_iter()
            .enumerate()
            .map(|(i, (n, ty))| SigParam {
                name: n,
                description: pdesc.get(i).copied().unwrap_or(""),
                ty,
                nullable: false,
            })
            .collect();
        let v = if variadic { ps.pop() } else { None };
        Signature {
            name,
            description,
            params: ps,
            variadic: v,
            ret,
        }
    };
    out.insert(
        "try",
        special(
            "try",
            vec![("expressions", Type::Dynamic)],
            true,
            Type::Dynamic,
        ),
    );
    out.insert(
        "can",
        special(
            "can",
            vec![("expression", Type::Dynamic)],
            false,
            Type::Bool,
        ),
    );
    out.insert(
        "templatestring",
        special(
            "templatestring",
            vec![("template", Type::String), ("vars", Type::Dynamic)],
            false,
            Type::String,
        ),
    );
    out
}

/// Calls the built-in function `name` (see the module docs for the argument handling).
pub(crate) fn call(
    name: &str,
    args: Vec<Value>,
    ctx: &FunctionContext,
) -> Result<Value, FunctionError> {
    let def = registry().get(name).ok_or_else(|| FunctionError {
        arg: None,
        message: format!("There is no function named {}.", quote(name)),
    })?;
    let fits = args.len() >= def.params.len()
        && (def.variadic.is_some() || args.len() == def.params.len());
    if !fits {
        if let Some((_, detail)) = arity(name).and_then(|a| a.mismatch(name, args.len())) {
            return Err(FunctionError {
                arg: None,
                message: detail,
            });
        }
    }
    let param_of = |i: usize| -> Param {
        def.params
            .get(i)
            .copied()
            .or(def.variadic)
            .expect("arity checked")
    };
    let arg_error = |i: usize, msg: &str| FunctionError {
        arg: Some(i),
        message: format!(
            "Invalid value for {} parameter: {}.",
            quote(param_of(i).name),
            msg
        ),
    };

    // Steps 2 and 3: conversion and null checks.
    let mut converted = Vec::with_capacity(args.len());
    for (i, a) in args.into_iter().enumerate() {
        let param = param_of(i);
        // Terraform words a failed value conversion ("a number is required") without the
        // path to the element, and a type mismatch ("element 0: string required") with it.
        let a = convert::convert(a, &param.ty.ty()).map_err(|e| {
            let value_level = matches!(
                e.message.as_str(),
                "a number is required" | "a bool is required"
            );
            arg_error(
                i,
                &if value_level {
                    e.message
                } else {
                    e.to_string()
                },
            )
        })?;
        if a.is_null() && !param.null {
            return Err(arg_error(i, "argument must not be null"));
        }
        converted.push(a);
    }
    // Step 4: unknowns the function does not handle.
    let unhandled_unknown = converted
        .iter()
        .enumerate()
        .any(|(i, a)| a.is_unknown() && !param_of(i).unknown);
    // Step 5: marks.
    let mut marked = false;
    let args: Vec<Value> = converted
        .into_iter()
        .enumerate()
        .map(|(i, a)| {
            let param = param_of(i);
            if param.inner && !unhandled_unknown {
                let top = a.is_sensitive();
                marked |= top;
                if top {
                    a.unmarked().clone()
                } else {
                    a
                }
            } else if unhandled_unknown || !param.marked {
                let (a, m) = a.deep_unmark();
                marked |= m;
                a
            } else {
                a
            }
        })
        .collect();
    let mark = |v: Value| if marked { v.sensitive() } else { v };
    if unhandled_unknown {
        let ty = match def.ret {
            Ret::Fixed(p) => p.ty(),
            Ret::From(f) => f(&args),
        };
        return Ok(mark(Value::Unknown(ty)));
    }
    match (def.imp)(args, ctx) {
        Ok(v) => match crate::value::within_size_bounds(&v) {
            Ok(()) => Ok(mark(v)),
            Err(msg) => Err(FunctionError {
                arg: None,
                message: format!("Call to function {} failed: {}.", quote(name), msg),
            }),
        },
        Err(Fail::Arg(i, msg)) => Err(arg_error(i, &msg)),
        Err(Fail::Call(msg)) => Err(FunctionError {
            arg: None,
            message: format!("Call to function {} failed: {}.", quote(name), msg),
        }),
    }
}

#[cfg(test)]
pub(crate) mod testing {
    //! The `check` helper every family's tests use.
    use super::*;
    use crate::value::Type;
    use std::path::PathBuf;

    /// Calls `name` with `args` in a context rooted at this crate's `fixtures/` directory.
    pub(crate) fn run(name: &str, args: Vec<Value>) -> Result<Value, FunctionError> {
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures");
        let ctx = FunctionContext {
            module_dir: &root,
            root_dir: &root,
            settle_impure: false,
        };
        call(name, args, &ctx)
    }

    /// Asserts that `name(args...)` returns `expected`.
    #[track_caller]
    pub(crate) fn check(name: &str, args: Vec<Value>, expected: Value) {
        match run(name, args.clone()) {
            Ok(v) => assert_eq!(v, expected, "{name}({args:?})"),
            Err(e) => panic!("{name}({args:?}) failed: {}", e.message),
        }
    }

    /// Asserts that `name(args...)` fails with exactly `message`.
    #[track_caller]
    pub(crate) fn check_err(name: &str, args: Vec<Value>, message: &str) {
        match run(name, args.clone()) {
            Ok(v) => panic!("{name}({args:?}) returned {v:?}, expected an error"),
            Err(e) => assert_eq!(e.message, message, "{name}({args:?})"),
        }
    }

    pub(crate) fn s(x: &str) -> Value {
        Value::string(x)
    }
    pub(crate) fn n(x: i64) -> Value {
        Value::int(x)
    }
    pub(crate) fn num(x: &str) -> Value {
        Value::Number(x.parse().expect("number literal"))
    }
    pub(crate) fn b(x: bool) -> Value {
        Value::Bool(x)
    }
    pub(crate) fn tup(v: Vec<Value>) -> Value {
        Value::Tuple(v)
    }
    pub(crate) fn list(v: Vec<Value>) -> Value {
        Value::List(v)
    }
    pub(crate) fn strs(v: &[&str]) -> Value {
        Value::Tuple(v.iter().map(|x| s(x)).collect())
    }
    pub(crate) fn slist(v: &[&str]) -> Value {
        Value::List(v.iter().map(|x| s(x)).collect())
    }
    pub(crate) fn obj(v: Vec<(&str, Value)>) -> Value {
        Value::object(v)
    }
    pub(crate) fn map(v: Vec<(&str, Value)>) -> Value {
        Value::Map(v.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
    }
    pub(crate) fn unk(t: Type) -> Value {
        Value::Unknown(t)
    }
}

#[cfg(test)]
mod tests {
    use super::testing::*;
    use super::*;
    use crate::value::Type;

    #[test]
    fn library_is_large_enough() {
        assert!(names().count() >= 80, "{} functions", names().count());
        assert!(exists("upper"));
        assert!(!exists("uppercase"));
    }

    #[test]
    fn arity_messages() {
        let a = arity("upper").unwrap();
        assert_eq!(
            a.mismatch("upper", 0),
            Some((
                "Not enough function arguments",
                "Function \"upper\" expects 1 argument(s). Missing value for \"str\".".into()
            ))
        );
        check_err(
            "upper",
            vec![s("a"), s("b")],
            "Function \"upper\" expects only 1 argument(s).",
        );
        let err = run("upper", vec![s("a"), s("b")]).unwrap_err();
        assert_eq!(err.summary(), "Too many function arguments");
        check_err(
            "join",
            vec![],
            "Function \"join\" expects at least 1 argument(s). Missing value for \"separator\".",
        );
    }

    /// Every function, called with every combination of awkward arguments (unknowns, nulls,
    /// marks, empty and mixed collections, wrong types), returns a value or an error: it never
    /// panics, and every error is a complete sentence.
    #[test]
    fn no_function_panics() {
        let samples = vec![
            s("a"),
            s(""),
            n(2),
            num("-1.5"),
            b(true),
            Value::null(),
            Value::Null(Type::String),
            unk(Type::Dynamic),
            unk(Type::String),
            unk(Type::list(Type::String)),
            tup(vec![]),
            tup(vec![s("a"), unk(Type::String), Value::null()]),
            list(vec![n(1), n(2)]),
            Value::set(vec![s("x"), s("y")]),
            map(vec![("k", s("v"))]),
            obj(vec![("a", tup(vec![n(1)])), ("b", s("x").sensitive())]),
            s("10.0.0.0/8").sensitive(),
        ];
        for name in names() {
            let ar = arity(name).unwrap();
            let max = ar.max().unwrap_or(ar.min() + 2).min(3);
            for count in ar.min()..=max {
                let mut idx = vec![0usize; count];
                loop {
                    let args: Vec<Value> = idx.iter().map(|&i| samples[i].clone()).collect();
                    let shown = format!("{name}({args:?})");
                    let r = std::panic::catch_unwind(|| run(name, args));
                    match r {
                        Err(_) => panic!("{shown} panicked"),
                        Ok(Err(e)) => assert!(e.message.ends_with('.'), "{shown}: {}", e.message),
                        Ok(Ok(_)) => {}
                    }
                    // Next combination.
                    let mut k = 0;
                    while k < count {
                        idx[k] += 1;
                        if idx[k] < samples.len() {
                            break;
                        }
                        idx[k] = 0;
                        k += 1;
                    }
                    if k == count {
                        break;
                    }
                }
            }
        }
    }

    proptest::proptest! {
        /// The functions that parse text (formats, JSON, YAML, CSV, CIDR, timestamps, regular
        /// expressions, Base64) return values or errors for any text, never panic.
        #[test]
        fn parsers_never_panic(text in "[ -~\n\t\u{e9}\u{2028}]{0,40}") {
            let t = || s(&text);
            for (name, args) in [
                ("format", vec![t(), n(1), s("x")]),
                ("formatdate", vec![t(), s("2018-01-02T23:12:01Z")]),
                ("formatdate", vec![s("YYYY"), t()]),
                ("timeadd", vec![s("2018-01-02T23:12:01Z"), t()]),
                ("jsondecode", vec![t()]),
                ("yamldecode", vec![t()]),
                ("csvdecode", vec![t()]),
                ("cidrsubnets", vec![t(), n(4)]),
                ("cidrhost", vec![t(), n(1)]),
                ("regex", vec![t(), s("abc")]),
                ("replace", vec![s("abc"), t(), s("$1")]),
                ("base64decode", vec![t()]),
                ("parseint", vec![t(), n(16)]),
                ("tonumber", vec![t()]),
                ("uuidv5", vec![t(), s("x")]),
                ("fileset", vec![s("."), t()]),
            ] {
                let _ = run(name, args);
            }
        }
    }

    /// A valid call of every function (those reading files name a missing one).
    fn valid_calls() -> Vec<(&'static str, Vec<Value>)> {
        vec![
            ("upper", vec![s("a")]),
            ("lower", vec![s("a")]),
            ("title", vec![s("a")]),
            ("strrev", vec![s("a")]),
            ("chomp", vec![s("a")]),
            ("trimspace", vec![s("a")]),
            ("trim", vec![s("a"), s("b")]),
            ("trimprefix", vec![s("a"), s("b")]),
            ("trimsuffix", vec![s("a"), s("b")]),
            ("startswith", vec![s("a"), s("b")]),
            ("endswith", vec![s("a"), s("b")]),
            ("strcontains", vec![s("a"), s("b")]),
            ("indent", vec![n(2), s("a\nb")]),
            ("substr", vec![s("abc"), n(0), n(1)]),
            ("split", vec![s(","), s("a,b")]),
            ("join", vec![s(","), strs(&["a"])]),
            ("replace", vec![s("abc"), s("b"), s("x")]),
            ("regex", vec![s("b"), s("abc")]),
            ("regexall", vec![s("b"), s("abc")]),
            ("format", vec![s("%s"), s("a")]),
            ("formatlist", vec![s("%s"), strs(&["a"])]),
            ("length", vec![strs(&["a"])]),
            ("concat", vec![strs(&["a"]), strs(&["b"])]),
            (
                "merge",
                vec![obj(vec![("a", n(1))]), obj(vec![("b", n(2))])],
            ),
            ("keys", vec![obj(vec![("a", n(1))])]),
            ("values", vec![obj(vec![("a", n(1))])]),
            ("lookup", vec![obj(vec![("a", n(1))]), s("a"), n(0)]),
            ("element", vec![strs(&["a", "b"]), n(1)]),
            ("index", vec![strs(&["a", "b"]), s("b")]),
            ("flatten", vec![tup(vec![strs(&["a"])])]),
            ("distinct", vec![strs(&["a", "a"])]),
            ("contains", vec![strs(&["a"]), s("a")]),
            ("range", vec![n(3)]),
            ("zipmap", vec![strs(&["a"]), strs(&["b"])]),
            ("setproduct", vec![strs(&["a"]), strs(&["b"])]),
            ("setunion", vec![strs(&["a"]), strs(&["b"])]),
            ("setintersection", vec![strs(&["a"]), strs(&["a"])]),
            ("setsubtract", vec![strs(&["a"]), strs(&["b"])]),
            ("slice", vec![strs(&["a", "b"]), n(0), n(1)]),
            ("sort", vec![strs(&["b", "a"])]),
            ("reverse", vec![strs(&["a", "b"])]),
            ("chunklist", vec![strs(&["a", "b"]), n(1)]),
            ("coalesce", vec![s("a"), s("b")]),
            ("coalescelist", vec![strs(&["a"]), strs(&["b"])]),
            ("compact", vec![strs(&["a", ""])]),
            ("one", vec![strs(&["a"])]),
            ("alltrue", vec![tup(vec![b(true)])]),
            ("anytrue", vec![tup(vec![b(false)])]),
            ("transpose", vec![obj(vec![("a", strs(&["x"]))])]),
            ("sum", vec![tup(vec![n(1), n(2)])]),
            ("matchkeys", vec![strs(&["a"]), strs(&["k"]), strs(&["k"])]),
            ("abs", vec![n(-1)]),
            ("ceil", vec![num("1.5")]),
            ("floor", vec![num("1.5")]),
            ("log", vec![n(8), n(2)]),
            ("pow", vec![n(2), n(3)]),
            ("signum", vec![n(-3)]),
            ("parseint", vec![s("ff"), n(16)]),
            ("min", vec![n(1), n(2)]),
            ("max", vec![n(1), n(2)]),
            ("jsonencode", vec![obj(vec![("a", n(1))])]),
            ("jsondecode", vec![s("{}")]),
            ("yamlencode", vec![obj(vec![("a", n(1))])]),
            ("yamldecode", vec![s("a: 1")]),
            ("base64encode", vec![s("a")]),
            ("base64gzip", vec![s("a")]),
            ("bcrypt", vec![s("a"), n(4)]),
            ("pathexpand", vec![s("/a")]),
            (
                "rsadecrypt",
                vec![
                    s(include_str!("../../../fixtures/golden/rsa/cipher.b64")),
                    s(include_str!("../../../fixtures/golden/rsa/key_pkcs1.pem")),
                ],
            ),
            ("base64decode", vec![s("YQ==")]),
            ("urlencode", vec![s("a b")]),
            ("textencodebase64", vec![s("a"), s("UTF-16LE")]),
            ("textdecodebase64", vec![s("YQA="), s("UTF-16LE")]),
            ("csvdecode", vec![s("a\n1")]),
            ("md5", vec![s("a")]),
            ("sha1", vec![s("a")]),
            ("sha256", vec![s("a")]),
            ("sha512", vec![s("a")]),
            ("base64sha256", vec![s("a")]),
            ("base64sha512", vec![s("a")]),
            ("uuidv5", vec![s("dns"), s("a")]),
            ("cidrhost", vec![s("10.0.0.0/8"), n(1)]),
            ("cidrnetmask", vec![s("10.0.0.0/8")]),
            ("cidrsubnet", vec![s("10.0.0.0/8"), n(8), n(1)]),
            ("cidrsubnets", vec![s("10.0.0.0/8"), n(8), n(8)]),
            ("tostring", vec![n(1)]),
            ("tonumber", vec![s("1")]),
            ("tobool", vec![s("true")]),
            ("tolist", vec![strs(&["a"])]),
            ("toset", vec![strs(&["a"])]),
            ("tomap", vec![obj(vec![("a", n(1))])]),
            ("formatdate", vec![s("YYYY"), s("2024-01-01T00:00:00Z")]),
            ("timeadd", vec![s("2024-01-01T00:00:00Z"), s("1h")]),
            (
                "timecmp",
                vec![s("2024-01-01T00:00:00Z"), s("2024-01-01T00:00:00Z")],
            ),
            ("sensitive", vec![s("a")]),
            ("nonsensitive", vec![s("a")]),
            ("issensitive", vec![s("a")]),
            ("ephemeralasnull", vec![s("a")]),
            ("dirname", vec![s("a/b")]),
            ("basename", vec![s("a/b")]),
            ("abspath", vec![s("a")]),
            ("fileexists", vec![s("nope")]),
            ("file", vec![s("nope")]),
            ("filebase64", vec![s("nope")]),
            ("filemd5", vec![s("nope")]),
            ("filesha1", vec![s("nope")]),
            ("filesha256", vec![s("nope")]),
            ("filesha512", vec![s("nope")]),
            ("filebase64sha256", vec![s("nope")]),
            ("filebase64sha512", vec![s("nope")]),
            ("fileset", vec![s("."), s("*.none")]),
            ("templatefile", vec![s("nope"), obj(vec![])]),
        ]
    }

    /// Unknown in, unknown out: every function, called with valid arguments where one is
    /// replaced by an unknown, gives a result that is not wholly known, except where the
    /// result does not depend on that argument (listed, and documented on each function).
    #[test]
    fn unknown_in_unknown_out() {
        let cases = valid_calls();
        // (function, argument) whose unknown does not make the result unknown.
        let known_anyway = [
            ("coalesce", 1), // the first argument already decides
            ("coalescelist", 1),
            ("lookup", 2),      // the key is present: the default is not used
            ("issensitive", 0), // marks are known even on unknown values
        ];
        let tested: std::collections::BTreeSet<&str> = cases.iter().map(|c| c.0).collect();
        for name in names() {
            if !["timestamp", "uuid", "plantimestamp"].contains(&name) {
                assert!(
                    tested.contains(name),
                    "{name} has no unknown-propagation case"
                );
            }
        }
        for (name, args) in &cases {
            assert!(
                run(name, args.clone()).is_ok()
                    || name.starts_with("file")
                    || *name == "templatefile",
                "{name}({args:?}) should succeed: {:?}",
                run(name, args.clone())
            );
            for i in 0..args.len() {
                let mut with_unknown = args.clone();
                with_unknown[i] = unk(Type::Dynamic);
                let r = run(name, with_unknown.clone())
                    .unwrap_or_else(|e| panic!("{name}({with_unknown:?}): {}", e.message));
                if !known_anyway.contains(&(name, i)) {
                    assert!(!r.is_wholly_known(), "{name}({with_unknown:?}) = {r:?}");
                }
            }
        }
    }

    /// Sensitive in, sensitive out: a sensitive argument gives a result with a sensitive part,
    /// except for the functions whose job is to look at or remove the mark.
    #[test]
    fn sensitive_in_sensitive_out() {
        for (name, args) in valid_calls() {
            if ["nonsensitive", "issensitive"].contains(&name) {
                continue;
            }
            for i in 0..args.len() {
                let mut marked = args.clone();
                marked[i] = marked[i].clone().sensitive();
                if let Ok(r) = run(name, marked.clone()) {
                    assert!(r.contains_sensitive(), "{name}({marked:?}) = {r:?}");
                }
            }
        }
        check("nonsensitive", vec![s("a").sensitive()], s("a"));
        check("issensitive", vec![s("a").sensitive()], b(true));
    }

    #[test]
    fn generic_argument_handling() {
        check_err(
            "upper",
            vec![tup(vec![])],
            "Invalid value for \"str\" parameter: string required.",
        );
        check_err(
            "upper",
            vec![Value::null()],
            "Invalid value for \"str\" parameter: argument must not be null.",
        );
        check("upper", vec![n(5)], s("5"));
        check("upper", vec![unk(Type::String)], unk(Type::String));
        check("upper", vec![s("a").sensitive()], s("A").sensitive());
        check(
            "upper",
            vec![unk(Type::String).sensitive()],
            unk(Type::String).sensitive(),
        );
        let err = run("join", vec![s(",")]).unwrap_err();
        assert_eq!(err.summary(), "Error in function call");
        assert_eq!(
            err.message,
            "Call to function \"join\" failed: at least one list is required."
        );
    }
}
