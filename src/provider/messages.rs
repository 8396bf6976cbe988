//! What providers and the engine say to each other, apart from the traits: a plan's answer
//! (`Planned`), an apply's request and response, an import's objects, a provider's errors and
//! diagnostics. The traits (`mod.rs`), the schema helpers and every provider build on this
//! file; it builds on none of them.

use crate::schema::PathStep;
use crate::value::Value;
use cairn_state::ObjectMeta;
use std::fmt;

/// What a change of a provider instance's configuration means.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ConfigDiff {
    NoChange,
    /// Reconfigure in place; its objects stay.
    Update,
    /// A different world: every object managed through this instance must be replaced.
    /// Names the arguments that force it.
    Replace(Vec<String>),
}

/// A provider's answer to `plan`.
#[derive(Clone, Debug, PartialEq)]
pub struct Planned {
    /// The planned new state: configured values kept, computed ones unknown where they will
    /// change.
    pub planned: Value,
    /// Attribute names whose change forces replacement.
    pub(crate) requires_replace: Vec<String>,
    /// The provider's private bytes for this plan (plugins: `planned_private`), which the
    /// engine hands back to the apply of this plan.
    pub(crate) private: Vec<u8>,
    /// Warnings the provider gave with its plan.
    pub(crate) warnings: Vec<ProviderDiag>,
}

/// What `Configured::apply_object` returns: the response, the meta to keep with the new
/// object, and the provider's warnings.
#[derive(Clone, Debug, PartialEq)]
pub struct Applied {
    pub(crate) response: ApplyResponse,
    pub(crate) meta: ObjectMeta,
    pub(crate) warnings: Vec<ProviderDiag>,
}

/// An ephemeral resource the provider opened (`Configured::open_ephemeral`): its result,
/// which is never stored, when to renew it, and what the provider keeps for its renewal and
/// its closing (private bytes, which Cairn never stores either).
#[derive(Clone, Debug, PartialEq)]
pub struct Opened {
    pub(crate) result: Value,
    pub(crate) renew_at: Option<std::time::SystemTime>,
    pub(crate) private: Option<Vec<u8>>,
    pub(crate) warnings: Vec<ProviderDiag>,
}

/// What a renewal answered: the next renewal time and the new private bytes.
#[derive(Clone, Debug, PartialEq)]
pub struct Renewed {
    pub(crate) renew_at: Option<std::time::SystemTime>,
    pub(crate) private: Option<Vec<u8>>,
}

#[derive(Clone, Debug, PartialEq)]
pub enum ApplyRequest {
    Create {
        type_: String,
        planned: Value,
        token: String,
    },
    Update {
        type_: String,
        prior: Value,
        planned: Value,
    },
    Delete {
        type_: String,
        prior: Value,
    },
}

/// A provider's answer to `apply`. On failure `new_state` is what the provider says exists now
/// (a partial create returns the object it made; a failed update the object as it is).
#[derive(Clone, Debug, PartialEq)]
pub struct ApplyResponse {
    /// `None` when the object does not exist (after a delete, or a create that made nothing).
    pub(crate) new_state: Option<Value>,
    pub error: Option<ProviderError>,
}

/// An error a provider reports, worded by the provider: one message, and (from plugins) the
/// diagnostics it was made of, each with the attribute path it is about, so the engine can
/// point at that attribute in the configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProviderError {
    pub(crate) message: String,
    pub(crate) diags: Vec<ProviderDiag>,
}

/// A provider error with a message only (the usual constructor; named like the type so that
/// `ProviderError(msg)` and `.map_err(ProviderError)` read as they did when this was a tuple
/// struct).
#[allow(non_snake_case)]
pub(crate) fn ProviderError(message: String) -> ProviderError {
    ProviderError {
        message,
        diags: Vec::new(),
    }
}

impl fmt::Display for ProviderError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ProviderError {}

impl From<String> for ProviderError {
    fn from(s: String) -> Self {
        ProviderError(s)
    }
}

impl From<&str> for ProviderError {
    fn from(s: &str) -> Self {
        ProviderError(s.to_string())
    }
}

/// One object a provider's import found (`ImportResourceState`'s `imported_resources`): its
/// type (an import may return objects of other types too), its state as the provider returned
/// it (to be read before it is kept), and the meta to keep with it.
#[derive(Clone, Debug, PartialEq)]
pub struct Imported {
    pub(crate) type_: String,
    pub(crate) state: Value,
    pub(crate) meta: ObjectMeta,
}

/// The error of a resource type that cannot be imported, worded as Terraform's SDK words it.
pub(crate) fn import_unsupported(type_: &str) -> ProviderError {
    let summary = format!("resource {type_} doesn't support import");
    ProviderError {
        message: summary.clone(),
        diags: vec![ProviderDiag {
            error: true,
            summary,
            detail: String::new(),
            path: Vec::new(),
        }],
    }
}

/// A provider diagnostic about (optionally) one attribute of a configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProviderDiag {
    pub(crate) error: bool,
    pub(crate) summary: String,
    pub(crate) detail: String,
    /// Empty: about the whole object.
    pub(crate) path: Vec<PathStep>,
}

pub(crate) type ProviderResult<T> = Result<T, ProviderError>;
