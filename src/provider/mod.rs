//! The provider interface: how Cairn touches the world.
//!
//! A provider comes in two states, as two types: a `Provider` (schema, config checks, resource
//! validation) and the `Configured` value that `configure` returns (plan, apply, read,
//! read_data, find_by_token). Nothing can call a provider before it is configured, because
//! there is no way to get a `Configured` otherwise.
//!
//! Invariant: the engine never sees a provider's internals; it only speaks this interface.

use crate::diag::Diagnostics;
use crate::value::{Type, Value};
use async_trait::async_trait;
use cairn_state::Mode;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

/// One attribute of a schema block.
#[derive(Clone, Debug, PartialEq)]
pub struct Attribute {
    pub ty: Type,
    pub required: bool,
    pub optional: bool,
    pub computed: bool,
    /// A change to this attribute replaces the object.
    pub force_new: bool,
    pub sensitive: bool,
    pub description: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Nesting {
    Single,
    List,
    Set,
}

/// A nested block type inside a schema block (`dynamic` blocks generate these).
#[derive(Clone, Debug, PartialEq)]
pub struct NestedBlock {
    pub nesting: Nesting,
    pub block: Block,
    pub min_items: usize,
    pub max_items: Option<usize>,
}

/// The schema of a configuration block: a provider's, a resource type's or a data source's.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Block {
    pub attributes: BTreeMap<String, Attribute>,
    pub blocks: BTreeMap<String, NestedBlock>,
    pub description: String,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct ProviderSchema {
    pub provider: Block,
    pub resources: BTreeMap<String, Block>,
    pub data_sources: BTreeMap<String, Block>,
}

impl ProviderSchema {
    pub fn block(&self, mode: Mode, type_: &str) -> Option<&Block> {
        match mode {
            Mode::Managed => self.resources.get(type_),
            Mode::Data => self.data_sources.get(type_),
        }
    }
}

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
    pub requires_replace: Vec<String>,
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
    pub new_state: Option<Value>,
    pub error: Option<ProviderError>,
}

/// An error a provider reports, worded by the provider.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProviderError(pub String);

impl fmt::Display for ProviderError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
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

pub type ProviderResult<T> = Result<T, ProviderError>;

/// A provider package, not yet configured.
#[async_trait]
pub trait Provider: Send + Sync {
    /// The package name: the prefix of its types (`sim` for `sim_thing`).
    fn package(&self) -> &str;
    fn schema(&self) -> &ProviderSchema;
    /// Checks a provider configuration, which may hold unknown values during plan. The
    /// default is for a provider without configuration arguments.
    fn check_config(&self, config: &Value) -> Diagnostics {
        let _ = config;
        Diagnostics::new()
    }
    /// Old vs new configuration of one provider instance. The default is for a provider whose
    /// configuration changes nothing about its objects.
    fn diff_config(&self, old: &Value, new: &Value) -> ConfigDiff {
        let _ = (old, new);
        ConfigDiff::NoChange
    }
    /// Checks a resource or data source configuration (may hold unknowns). The engine has
    /// already checked it against the schema; this is for provider-specific rules.
    fn validate(&self, mode: Mode, type_: &str, config: &Value) -> Diagnostics;
    /// Configures an instance with a wholly known configuration.
    async fn configure(&self, config: &Value) -> ProviderResult<Arc<dyn Configured>>;
}

/// A configured provider instance.
#[async_trait]
pub trait Configured: Send + Sync {
    /// Plans one managed object: `prior` is `None` for a create. Makes no calls to the world.
    fn plan(&self, type_: &str, prior: Option<&Value>, config: &Value) -> ProviderResult<Planned>;
    /// `plan` for a provider that has to wait for its answer (a plugin process); the engine
    /// calls this one. Built-in providers plan without waiting and keep the default.
    async fn plan_async(
        &self,
        type_: &str,
        prior: Option<&Value>,
        config: &Value,
    ) -> ProviderResult<Planned> {
        self.plan(type_, prior, config)
    }
    /// Creates, updates or deletes one object.
    async fn apply(&self, request: ApplyRequest) -> ApplyResponse;
    /// Refreshes one object: its state now, or `None` when it is gone.
    async fn read(&self, type_: &str, state: &Value) -> ProviderResult<Option<Value>>;
    /// Reads a data source with a wholly known configuration. The default is for a provider
    /// without data sources.
    async fn read_data(&self, type_: &str, config: &Value) -> ProviderResult<Value> {
        let _ = config;
        Err(ProviderError(format!(
            "the provider has no data source type \"{type_}\""
        )))
    }
    /// The object a create made under `token`, if the provider can tell. The default is for
    /// objects that exist only in state (an interrupted create left nothing to adopt).
    async fn find_by_token(&self, type_: &str, token: &str) -> ProviderResult<Option<Value>> {
        let _ = (type_, token);
        Ok(None)
    }
    /// Asks in-flight calls to stop early (Ctrl-C). Calls already running may still finish.
    /// The default is for a provider whose calls are all quick.
    async fn stop(&self) {}
}

pub mod builtin;
pub mod external;
pub mod host;
pub mod install;
pub mod local;
pub mod null;
pub mod plugin;
pub mod random;
pub mod schema_util;
pub mod sim;
pub mod terraform;
#[cfg(test)]
mod testkit;
