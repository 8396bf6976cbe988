//! Expression evaluation: reference extraction, the evaluation scope, operators, and the
//! built-in functions.
//!
//! Invariants: synchronous and deterministic (no I/O except the confined filesystem functions);
//! unknown in → unknown out wherever the result depends on it.
//!
//! The seam with the rest of Cairn is small:
//! - `Subject`/`Reference`: what an expression refers to (`refs`), used to build graphs;
//! - `Scope`: how the evaluator asks for the value of a subject; the engine implements it;
//! - `functions::call`: the built-in function library.

use crate::addr::Mode;
use crate::diag::FileId;
use crate::value::Value;
use std::path::Path;

pub(crate) mod body;
pub(crate) mod convert;
pub(crate) mod expand;
pub(crate) mod expr;
pub(crate) mod functions;
mod heredoc;
pub(crate) mod refs;
pub(crate) mod suggest;
pub(crate) mod type_constraints;

pub use body::{eval_block_body, eval_body, eval_body_with_sources, eval_config_body, Sources};
pub use expr::{eval, eval_template_string};
pub use refs::{body_references, references};

/// What a reference names: the part of a traversal that identifies a term. The rest of the
/// traversal (`[0].id`) is applied by the evaluator to the subject's value.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Subject {
    /// `var.NAME`
    Var(String),
    /// `local.NAME`
    Local(String),
    /// `module.NAME`, with the output name when the traversal names one statically
    /// (`module.m.out`, `module.m["k"].out`). Resolves to the call's value: an object of
    /// outputs, or a tuple/object of such objects when the call has `count`/`for_each`.
    ModuleCall {
        name: String,
        output: Option<String>,
    },
    /// `TYPE.NAME` or `data.TYPE.NAME`. Resolves to the resource's value: an object, or a
    /// tuple (count) / object (for_each) of instance objects.
    Resource {
        mode: Mode,
        type_: String,
        name: String,
    },
    /// `count.index`
    CountIndex,
    /// `each.key`
    EachKey,
    /// `each.value`
    EachValue,
    /// `self` (in provisioner-like contexts; kept for completeness of the language)
    SelfRef,
    /// `path.module`, `path.root`, `path.cwd`
    Path(String),
    /// `terraform.workspace`
    Terraform(String),
}

/// One reference found in an expression.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reference {
    pub(crate) subject: Subject,
    /// Byte range of the whole traversal in its file.
    pub(crate) start: usize,
    pub(crate) end: usize,
}

/// What the evaluator needs from its surroundings.
pub trait Scope {
    /// The value of a subject. An error is a message for a diagnostic at the reference
    /// (e.g. "Reference to undeclared input variable" with a "did you mean").
    fn resolve(&self, subject: &Subject) -> Result<Value, ScopeError>;
    /// The file the expressions being evaluated come from (for diagnostics' spans).
    fn file(&self) -> FileId;
    /// The module's directory (`path.module`, and the base of relative paths in `file()`).
    fn module_dir(&self) -> &Path;
    /// The root of the configuration's directory tree: filesystem functions may not read
    /// outside it.
    fn root_dir(&self) -> &Path;
    /// True when the subject's value is *open*: an object that lists only what the
    /// configuration wrote (a resource of a provider without a schema, in `inspect`), so an
    /// attribute or key it lacks is unknown rather than an error.
    fn is_open(&self, subject: &Subject) -> bool {
        let _ = subject;
        false
    }
    /// True when the subject's value is ephemeral (an ephemeral resource, an ephemeral
    /// variable or child output, a local derived from one): `ephemeralasnull` nulls it.
    fn is_ephemeral(&self, subject: &Subject) -> bool {
        let _ = subject;
        false
    }
    /// The providers' functions (`provider::NAME::FUNC`), when this scope has providers;
    /// without them such a call evaluates its arguments and is unknown.
    fn provider_functions(&self) -> Option<&dyn ProviderFunctions> {
        None
    }
    /// True where `timestamp()` and `uuid()` give values at once (`console`); elsewhere they
    /// are unknown until apply.
    fn settles_impure(&self) -> bool {
        false
    }
}

/// Provider-defined functions, as a scope offers them to the evaluator.
pub trait ProviderFunctions: Send + Sync {
    /// The signature of `provider::PROVIDER::NAME`, or the detail of an "unknown function"
    /// error.
    fn signature(&self, provider: &str, name: &str) -> Result<crate::schema::FunctionSig, String>;
    /// Calls it with arguments converted to its parameter types.
    fn call(
        &self,
        provider: &str,
        name: &str,
        args: Vec<Value>,
    ) -> Result<Value, crate::schema::FunctionFailure>;
}

/// Why a subject could not be resolved: a diagnostic's summary and detail.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScopeError {
    pub(crate) summary: String,
    pub(crate) detail: String,
}

impl ScopeError {
    pub(crate) fn new(summary: impl Into<String>, detail: impl Into<String>) -> Self {
        ScopeError {
            summary: summary.into(),
            detail: detail.into(),
        }
    }
}
#[cfg(test)]
mod tests;
