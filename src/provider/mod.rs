//! The provider interface: how Cairn touches the world.
//!
//! A provider comes in two states, as two types: a `Provider` (schema, config checks, resource
//! validation) and the `Configured` value that `configure` returns (plan, apply, read,
//! read_data, find_by_token). Nothing can call a provider before it is configured, because
//! there is no way to get a `Configured` otherwise.
//!
//! Invariant: the engine never sees a provider's internals; it only speaks this interface.

use crate::addr::Mode;
use crate::diag::Diagnostics;
use crate::schema::{FunctionFailure, FunctionSig, ProviderSchema};
use crate::value::Value;
use async_trait::async_trait;
use std::collections::BTreeMap;
use std::sync::Arc;

pub(crate) use cairn_state::ObjectMeta;

pub use messages::*;

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
    /// already checked it against the schema; this is for provider-specific rules. The
    /// default checks it against the type's schema block (a type the package does not have
    /// is an error); a provider with rules of its own overrides it.
    fn validate(&self, mode: Mode, type_: &str, config: &Value) -> Diagnostics {
        match self.schema().block(mode, type_) {
            Some(block) => schema_util::check_block(block, config),
            None => schema_util::unsupported_type(self.package(), type_),
        }
    }
    /// `validate` with each diagnostic's attribute path, for the engine to point at (plan
    /// calls this for every instance). The default is `validate`'s diagnostics, about the
    /// whole object: a built-in's own rules (`random_string.length` at least 1, …) are checked
    /// at plan, as Terraform's providers check theirs in `ValidateResourceConfig`.
    fn validate_config(&self, mode: Mode, type_: &str, config: &Value) -> Vec<ProviderDiag> {
        self.validate(mode, type_, config)
            .into_iter()
            .map(|d| ProviderDiag {
                error: d.severity == crate::diag::Severity::Error,
                summary: d.summary,
                detail: d.detail,
                path: Vec::new(),
            })
            .collect()
    }
    /// `validate_config` on the runtime: a plugin asks over its RPC without blocking the
    /// walk's thread, so many validations run at once (bounded by `-parallelism`).
    async fn validate_config_async(
        &self,
        mode: Mode,
        type_: &str,
        config: &Value,
    ) -> Vec<ProviderDiag> {
        self.validate_config(mode, type_, config)
    }
    /// Configures an instance with a wholly known configuration.
    async fn configure(&self, config: &Value) -> ProviderResult<Arc<dyn Configured>>;
    /// The functions this provider offers (`provider::NAME::FUNC`); built-ins offer none.
    fn functions(&self) -> BTreeMap<String, FunctionSig> {
        BTreeMap::new()
    }
    /// Calls one of `functions()` with arguments already converted to its parameter types
    /// (wholly known where the parameter does not allow unknowns). Needs no configuration.
    fn call_function(&self, name: &str, args: Vec<Value>) -> Result<Value, FunctionFailure> {
        let _ = args;
        Err(FunctionFailure {
            arg: None,
            message: format!("The provider has no function {name:?}."),
        })
    }
}

/// A configured provider instance.
#[async_trait]
pub trait Configured: Send + Sync {
    /// Plans one managed object: `prior` is `None` for a create. Makes no calls to the world.
    fn plan(&self, type_: &str, prior: Option<&Value>, config: &Value) -> ProviderResult<Planned>;
    /// `plan` for a provider that has to wait for its answer (a plugin process); the engine
    /// calls this one. Built-in providers plan without waiting and keep the default.
    /// `meta` is what state keeps beside `prior` (schema version, private bytes).
    async fn plan_async(
        &self,
        type_: &str,
        prior: Option<&Value>,
        meta: &ObjectMeta,
        config: &Value,
    ) -> ProviderResult<Planned> {
        let _ = meta;
        self.plan(type_, prior, config)
    }
    /// Creates, updates or deletes one object.
    async fn apply(&self, request: ApplyRequest) -> ApplyResponse;
    /// `apply` with what state keeps beside the prior object (`prior`) and the private bytes
    /// of the plan being applied; also returns the meta to keep with the new object. Built-in
    /// providers keep no meta and keep this default.
    async fn apply_object(
        &self,
        request: ApplyRequest,
        prior: &ObjectMeta,
        planned_private: &[u8],
    ) -> Applied {
        let _ = (prior, planned_private);
        Applied {
            response: self.apply(request).await,
            meta: ObjectMeta::default(),
            warnings: Vec::new(),
        }
    }
    /// Refreshes one object: its state now, or `None` when it is gone.
    async fn read(&self, type_: &str, state: &Value) -> ProviderResult<Option<Value>>;
    /// `read` with what state keeps beside the object; also returns the meta to keep with the
    /// refreshed object (plugins: upgraded from `meta.schema_version` to the provider's).
    async fn read_object(
        &self,
        type_: &str,
        state: &Value,
        meta: &ObjectMeta,
    ) -> ProviderResult<Option<(Value, ObjectMeta)>> {
        let _ = meta;
        Ok(self
            .read(type_, state)
            .await?
            .map(|v| (v, ObjectMeta::default())))
    }
    /// `read_object` of an object `import` just returned (in the provider's current form:
    /// plugins skip `UpgradeResourceState`, as Terraform does).
    async fn read_imported(
        &self,
        type_: &str,
        state: &Value,
        meta: &ObjectMeta,
    ) -> ProviderResult<Option<(Value, ObjectMeta)>> {
        self.read_object(type_, state, meta).await
    }
    /// Reads a data source with a wholly known configuration. The default is for a provider
    /// without data sources.
    async fn read_data(&self, type_: &str, config: &Value) -> ProviderResult<Value> {
        let _ = config;
        Err(ProviderError(format!(
            "the provider has no data source type \"{type_}\""
        )))
    }
    /// Opens an ephemeral resource with a wholly known configuration (plan and apply, each
    /// run). The default is for a provider without ephemeral resources.
    async fn open_ephemeral(&self, type_: &str, config: &Value) -> ProviderResult<Opened> {
        let _ = config;
        Err(ProviderError(format!(
            "the provider has no ephemeral resource type \"{type_}\""
        )))
    }
    /// Renews an opened ephemeral resource when its `renew_at` has come. The default (a
    /// resource that needs no renewal) asks for none again.
    async fn renew_ephemeral(
        &self,
        type_: &str,
        private: Option<Vec<u8>>,
    ) -> ProviderResult<Renewed> {
        let _ = (type_, private);
        Ok(Renewed {
            renew_at: None,
            private: None,
        })
    }
    /// Closes an opened ephemeral resource at the end of the run. The default has nothing
    /// to release.
    async fn close_ephemeral(&self, type_: &str, private: Option<Vec<u8>>) -> ProviderResult<()> {
        let _ = (type_, private);
        Ok(())
    }
    /// The object a create made under `token`, if the provider can tell. The default is for
    /// objects that exist only in state (an interrupted create left nothing to adopt).
    async fn find_by_token(&self, type_: &str, token: &str) -> ProviderResult<Option<Value>> {
        let _ = (type_, token);
        Ok(None)
    }
    /// Imports the existing object `id` as a `type_` (`import` blocks, `cairn import`): what
    /// the provider found, each to be read (`read_object`) before it is kept; the read tells
    /// whether it exists. Makes no change to the world. The default is for a provider whose
    /// types cannot be imported.
    async fn import(&self, type_: &str, id: &str) -> ProviderResult<Vec<Imported>> {
        let _ = id;
        Err(import_unsupported(type_))
    }
    /// Asks in-flight calls to stop early (Ctrl-C). Calls already running may still finish.
    /// The default is for a provider whose calls are all quick.
    async fn stop(&self) {}
}

pub mod builtin;
pub(crate) mod external;
pub mod host;
pub mod install;
pub(crate) mod local;
mod messages;
pub mod mock;
pub(crate) mod null;
pub mod plugin;
pub(crate) mod random;
pub(crate) mod schema_json;
pub mod schema_util;
pub(crate) mod sim;
pub(crate) mod terraform_data;
#[cfg(test)]
mod testkit;
