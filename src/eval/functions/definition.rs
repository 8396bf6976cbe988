//! What every built-in function is made of: its definition (`Def`), parameters (`Param`, `P`),
//! arity, return-type rule (`Ret`), failures (`Fail`, `FunctionError`), the context it runs
//! in, and the argument helpers the families share. The registry and `call` (in `mod.rs`) and
//! every family file build on this file; it builds on none of them.

use crate::eval::convert::quote;
use crate::value::ValueMap;
use crate::value::{Type, Value};
use std::path::Path;

/// The deepest nesting `jsondecode` and `yamldecode` accept. Terraform's decoders allow more
/// (Go's stacks grow); 256 levels is deeper than any real document and safe for Cairn's
/// recursive readers on a small thread stack.
pub(crate) const MAX_DEPTH: usize = 256;

/// What a function may know of its surroundings: the confinement of filesystem functions.
pub struct FunctionContext<'a> {
    /// The calling module's directory (`path.module`).
    pub(crate) module_dir: &'a Path,
    /// The root module's directory: relative paths are resolved against it (Terraform's
    /// working directory), and files outside its tree may not be read.
    pub(crate) root_dir: &'a Path,
    /// `timestamp()` and `uuid()` give their values now (`console`, as `terraform console`
    /// does) instead of being unknown until apply.
    pub(crate) settle_impure: bool,
}

/// A function call failed: which argument (if one is to blame) and why.
///
/// `message` is the complete diagnostic detail, worded as Terraform words it:
/// `Invalid value for "str" parameter: string required.` when an argument is at fault, and
/// `Call to function "join" failed: at least one list is required.` otherwise. `summary()`
/// gives the matching diagnostic summary.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct FunctionError {
    /// Index of the argument at fault, for the diagnostic's span.
    pub(crate) arg: Option<usize>,
    pub(crate) message: String,
}

impl FunctionError {
    /// The diagnostic summary Terraform uses for this kind of failure.
    pub(crate) fn summary(&self) -> &'static str {
        if self.message.starts_with("Function \"") && self.message.contains("expects only") {
            "Too many function arguments"
        } else if self.message.starts_with("Function \"") && self.message.contains("Missing") {
            "Not enough function arguments"
        } else if self.arg.is_some() {
            "Invalid function argument"
        } else {
            "Error in function call"
        }
    }
}

/// How many arguments a function takes, with its parameters' names for messages.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Arity {
    /// The fixed parameters, in order.
    pub(crate) params: Vec<&'static str>,
    /// The name of the variadic parameter, if the function takes any number of further
    /// arguments.
    pub(crate) variadic: Option<&'static str>,
}

impl Arity {
    pub(crate) fn min(&self) -> usize {
        self.params.len()
    }
    /// `None` for variadic functions.
    pub(crate) fn max(&self) -> Option<usize> {
        match self.variadic {
            Some(_) => None,
            None => Some(self.params.len()),
        }
    }
    /// When `given` arguments do not fit: the diagnostic summary and detail Terraform gives
    /// ("Not enough function arguments" / "Function \"upper\" expects 1 argument(s). Missing
    /// value for \"str\".").
    pub(crate) fn mismatch(&self, name: &str, given: usize) -> Option<(&'static str, String)> {
        if given < self.min() {
            return Some((
                "Not enough function arguments",
                format!(
                    "Function {} expects {}{} argument(s). Missing value for {}.",
                    quote(name),
                    if self.variadic.is_some() {
                        "at least "
                    } else {
                        ""
                    },
                    self.min(),
                    quote(self.params[given])
                ),
            ));
        }
        match self.max() {
            Some(max) if given > max => Some((
                "Too many function arguments",
                format!("Function {} expects only {} argument(s).", quote(name), max),
            )),
            _ => None,
        }
    }
}

/// A parameter's type constraint, in a form that can live in a `const`.
#[derive(Clone, Copy, Debug)]
pub(crate) enum P {
    Any,
    Str,
    Num,
    Bool,
    List(&'static P),
    Set(&'static P),
    Map(&'static P),
}

impl P {
    pub(super) fn ty(&self) -> Type {
        match self {
            P::Any => Type::Dynamic,
            P::Str => Type::String,
            P::Num => Type::Number,
            P::Bool => Type::Bool,
            P::List(e) => Type::list(e.ty()),
            P::Set(e) => Type::set(e.ty()),
            P::Map(e) => Type::map(e.ty()),
        }
    }
}

/// One parameter: name, type, and what the function handles itself.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Param {
    pub(super) name: &'static str,
    pub(super) ty: P,
    /// The function accepts null for this parameter (otherwise: "argument must not be null").
    pub(super) null: bool,
    /// The function sees an unknown argument (otherwise: the result is unknown).
    pub(super) unknown: bool,
    /// The function sees sensitive marks (otherwise: they are removed and put on the result).
    pub(super) marked: bool,
    /// Only the argument's own mark is removed (and put on the result); marks on its parts
    /// reach the function, which keeps them where they belong (`element`, `concat`, ...).
    pub(super) inner: bool,
    /// cty's `AllowDynamicType`: an argument whose type is not yet known still gives the
    /// function's own result type. Without it, Terraform's `metadata functions` reports the
    /// return type `dynamic` when such a parameter takes any type.
    pub(super) dynamic: bool,
}

pub(crate) const fn p(name: &'static str, ty: P) -> Param {
    Param {
        name,
        ty,
        null: false,
        unknown: false,
        marked: false,
        inner: false,
        dynamic: false,
    }
}

impl Param {
    pub(crate) const fn null(mut self) -> Self {
        self.null = true;
        self
    }
    pub(crate) const fn unknown(mut self) -> Self {
        self.unknown = true;
        self
    }
    pub(crate) const fn marked(mut self) -> Self {
        self.marked = true;
        self
    }
    pub(crate) const fn inner_marks(mut self) -> Self {
        self.inner = true;
        self
    }
    pub(crate) const fn dynamic_type(mut self) -> Self {
        self.dynamic = true;
        self
    }
}

/// How a function's result type is decided when the function is not run (an argument is
/// unknown).
#[derive(Clone, Copy)]
pub(crate) enum Ret {
    Fixed(P),
    /// Computed from the (converted) arguments, which may be unknown.
    From(fn(&[Value]) -> Type),
}

/// Why an implementation failed: an argument's fault (index, reason) or the call's.
#[derive(Debug)]
pub(crate) enum Fail {
    Arg(usize, String),
    Call(String),
}

pub(crate) type Res = Result<Value, Fail>;

pub(crate) fn arg_err(i: usize, msg: impl Into<String>) -> Fail {
    Fail::Arg(i, msg.into())
}
pub(crate) fn call_err(msg: impl Into<String>) -> Fail {
    Fail::Call(msg.into())
}

/// A built-in function.
pub(crate) struct Def {
    pub(crate) name: &'static str,
    pub(crate) params: &'static [Param],
    pub(crate) variadic: Option<Param>,
    pub(crate) ret: Ret,
    pub(crate) imp: fn(Vec<Value>, &FunctionContext) -> Res,
}

// ---- helpers shared by the families ----

/// The string in a converted, known, non-null string argument.
pub(crate) fn str_of(v: &Value) -> &str {
    v.as_str().unwrap_or_default()
}

/// The elements of a converted list/set/tuple argument (empty for anything else).
pub(crate) fn elems_of(v: Value) -> Vec<Value> {
    match v {
        Value::List(e) | Value::Set(e) | Value::Tuple(e) => e,
        Value::Sensitive(v) => elems_of(*v),
        _ => Vec::new(),
    }
}

/// The entries of a converted map/object argument (empty for anything else).
pub(crate) fn entries_of(v: Value) -> ValueMap {
    match v {
        Value::Map(m) | Value::Object(m) => m,
        Value::Sensitive(v) => entries_of(*v),
        _ => ValueMap::new(),
    }
}

/// The element type of a list/set/map type, or of a value of one.
pub(crate) fn elem_type(t: &Type) -> Type {
    match t {
        Type::List(e) | Type::Set(e) | Type::Map(e) => (**e).clone(),
        _ => Type::Dynamic,
    }
}

/// An integer argument: whole and within `i64`, otherwise the error Terraform gives.
pub(crate) fn int_arg(_i: usize, v: &Value, _what: &str) -> Result<i64, Fail> {
    v.as_number().and_then(|n| n.to_i64()).ok_or_else(|| {
        call_err(
            "value must be a whole number, between -9223372036854775808 and 9223372036854775807",
        )
    })
}

/// Return-type rule: the type of argument 0.
pub(crate) fn ret_arg0(args: &[Value]) -> Type {
    args.first().map(Value::type_of).unwrap_or(Type::Dynamic)
}

/// Return-type rule: unknown type.
pub(crate) fn ret_dynamic(_: &[Value]) -> Type {
    Type::Dynamic
}
