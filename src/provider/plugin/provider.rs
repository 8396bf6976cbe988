//! `PluginProvider`: a plugin binary behind Cairn's `Provider` / `Configured` traits, so the
//! engine cannot tell it from a built-in.
//!
//! Processes: the first process (started for the schema) answers validation and becomes the
//! first configured instance; every further provider instance (another configuration of the
//! same provider) gets a process of its own, because a plugin is configured once. All of them
//! live until the end of the command ([`super::launch::shutdown_all`]).
//!
//! The provider's private bytes and the schema version of each object travel with it through
//! the traits (`ObjectMeta`, kept in state beside the attributes; `Planned::private` from a
//! plan to its apply). What the traits do not carry is kept here, per configured instance and
//! for the run: the configuration of each plan, keyed by the planned value, which `apply`
//! passes back (the engine re-plans just before applying).
//!
//! Every object from Cairn's state goes through `UpgradeResourceState` with the schema version
//! it was written with before `ReadResource`, as Terraform does; plan and apply upgrade a prior
//! object that was not read in this run when its version is not the provider's.
//! Results that break the plan are errors, or warnings when the provider says it has
//! `legacy_type_system` (SDKv2), as Terraform tolerates them.

use super::cache::{SchemaCache, Validations};
use super::codec;
use super::launch::{run, run_sync, PluginProcess};
use super::rpc::{Client, Diag, Dyn, Schemas, TypeSchema};
use crate::addr::Mode;
use crate::diag::{Diagnostic, Diagnostics};
use crate::provider::schema_util::same;
use crate::provider::{
    Applied, ApplyRequest, ApplyResponse, ConfigDiff, Configured, Imported, ObjectMeta, Opened,
    Planned, Provider, ProviderDiag, ProviderError, ProviderResult, Renewed,
};
use crate::schema::{Block, FunctionFailure, FunctionSig, Nesting, ProviderSchema};
use crate::value::ValueMap;
use crate::value::{Type, Value};
use async_trait::async_trait;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// The Terraform version Cairn announces to providers in `ConfigureProvider`: the one whose
/// protocol behaviour it follows.
pub(crate) const TERRAFORM_VERSION: &str = "1.11.4";

/// The schemas of one plugin, in both forms.
#[derive(Debug)]
struct Shared {
    package: String,
    path: PathBuf,
    /// The handshake's protocol version (the client keeps its own; the tests read this one).
    #[cfg_attr(not(test), allow(dead_code))]
    protocol: u32,
    env: BTreeMap<String, String>,
    wire: Schemas,
    schema: ProviderSchema,
    /// Configurations this binary validated clean before (`cache::Validations`); `None`
    /// without a state directory.
    validations: Option<Arc<Validations>>,
}

impl Shared {
    fn provider_type(&self) -> Type {
        self.wire
            .provider
            .as_ref()
            .map(|s| s.ty.clone())
            .unwrap_or_else(|| Type::object([]))
    }

    fn type_schema(&self, mode: Mode, type_: &str) -> ProviderResult<&TypeSchema> {
        let found = match mode {
            Mode::Managed => self.wire.resources.get(type_),
            Mode::Data => self.wire.data_sources.get(type_),
            Mode::Ephemeral => self.wire.ephemeral_resources.get(type_),
        };
        found.ok_or_else(|| {
            ProviderError(format!(
                "Provider {} ({}) has no {} type {type_:?}.",
                self.package,
                self.path.display(),
                match mode {
                    Mode::Managed => "resource",
                    Mode::Data => "data source",
                    Mode::Ephemeral => "ephemeral resource",
                }
            ))
        })
    }
}

/// Where `PluginProvider::open` takes the schema from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Source {
    /// The plugin, always (plan and apply: the process runs anyway, and a binary's schema may
    /// depend on its environment); the answer refreshes the cache.
    Live,
    /// The cache if it has this binary's schema, else the plugin.
    CacheFirst,
    /// The cache only: no process is started.
    CacheOnly,
}

pub struct PluginProvider {
    shared: Arc<Shared>,
    /// The first process: validation, and the first configured instance. Started when first
    /// needed (a schema from the cache needs none).
    first: Arc<tokio::sync::OnceCell<(Arc<PluginProcess>, Client)>>,
    first_taken: AtomicBool,
    /// Schemas only (`inspect`, `validate`): never starts a process; provider-side checks
    /// report nothing and `configure` fails.
    offline: bool,
}

impl std::fmt::Debug for PluginProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PluginProvider")
            .field("package", &self.shared.package)
            .field("path", &self.shared.path)
            .finish()
    }
}

/// Errors among diagnostics as one provider error, which keeps each diagnostic (with its
/// attribute path) for the engine; warnings are returned.
fn check(what: &str, package: &str, diags: &[Diag]) -> ProviderResult<Vec<ProviderDiag>> {
    let mut errors = Vec::new();
    let mut warnings = Vec::new();
    for d in diags {
        if d.error {
            errors.push(d.clone());
        } else {
            tracing::warn!(target: "plugin", provider = package, "{what}: {}", d.message());
            warnings.push(d.to_provider_diag());
        }
    }
    if errors.is_empty() {
        Ok(warnings)
    } else {
        let message = errors
            .iter()
            .map(Diag::message)
            .collect::<Vec<_>>()
            .join("; ");
        let mut e = ProviderError(message);
        e.diags = errors.iter().map(Diag::to_provider_diag).collect();
        e.diags.extend(warnings);
        Err(e)
    }
}

/// Provider diagnostics as Cairn diagnostics (the attribute path, when there is one, is named
/// in the detail; the engine turns paths into spans where it knows the configuration).
fn to_diagnostics(diags: Vec<Diag>) -> Diagnostics {
    let mut out = Diagnostics::new();
    for d in diags {
        let detail = match &d.path {
            Some(p) if d.detail.is_empty() => format!("At {p}."),
            Some(p) => format!("{} (at {p})", d.detail),
            None => d.detail.clone(),
        };
        out.push(if d.error {
            Diagnostic::error(d.summary, detail)
        } else {
            Diagnostic::warning(d.summary, detail)
        });
    }
    out
}

fn encode(v: &Value, ty: &Type, what: &str) -> ProviderResult<Dyn> {
    codec::encode(v, ty)
        .map(Dyn::msgpack)
        .map_err(|e| ProviderError(format!("Cannot encode the {what} for the plugin: {e}.")))
}

fn decode(d: &Dyn, ty: &Type, what: &str) -> ProviderResult<Value> {
    let r = if !d.msgpack.is_empty() {
        codec::decode(&d.msgpack, ty)
    } else if !d.json.is_empty() {
        codec::decode_json(&d.json, ty)
    } else {
        Ok(Value::Null(ty.clone()))
    };
    r.map_err(|e| ProviderError(format!("The plugin returned an invalid {what}: {e}.")))
}

/// Starts the plugin process at `path` on the plugin runtime.
async fn start_process(
    path: &Path,
    env: &BTreeMap<String, String>,
) -> Result<(Arc<PluginProcess>, Client), String> {
    let (path, env) = (path.to_path_buf(), env.clone());
    run(async move {
        let p = PluginProcess::start(&path, &env).await?;
        let c = Client::new(p.protocol, p.channel.clone());
        Ok((p, c))
    })
    .await
}

/// Starts the plugin at `path` and returns its `GetProviderSchema` answer as it came over
/// the wire (protocol version, protobuf bytes), for `providers schema -json`, which renders
/// every field of it as Terraform does.
pub(crate) async fn raw_schema(
    path: &Path,
    env: &BTreeMap<String, String>,
) -> Result<(u32, Vec<u8>), String> {
    let (_process, client) = start_process(path, env).await?;
    let c = client.clone();
    let (_, _, bytes) = run(async move { c.get_schema().await })
        .await
        .map_err(|e| format!("Plugin {}: {e}", path.display()))?;
    Ok((client.protocol(), bytes))
}

fn provider_schema(wire: &Schemas) -> ProviderSchema {
    ProviderSchema {
        provider: wire
            .provider
            .as_ref()
            .map(|s| s.block.clone())
            .unwrap_or_default(),
        resources: wire
            .resources
            .iter()
            .map(|(k, s)| (k.clone(), s.block.clone()))
            .collect(),
        data_sources: wire
            .data_sources
            .iter()
            .map(|(k, s)| (k.clone(), s.block.clone()))
            .collect(),
        ephemeral_resources: wire
            .ephemeral_resources
            .iter()
            .map(|(k, s)| (k.clone(), s.block.clone()))
            .collect(),
    }
}

impl PluginProvider {
    /// Starts the plugin at `path` for the provider whose local name is `package`, and reads its
    /// schema.
    pub async fn start(
        package: &str,
        path: &Path,
        env: &BTreeMap<String, String>,
    ) -> Result<PluginProvider, String> {
        Self::open(package, path, env, None, Source::Live)
            .await
            .map(|p| p.expect("started when there is no cache"))
    }

    /// The plugin at `path`, with its schema as `source` says; a schema the plugin was asked
    /// for is stored in `cache`. `Ok(None)`: `Source::CacheOnly` and the cache has no schema
    /// of this binary.
    pub(crate) async fn open(
        package: &str,
        path: &Path,
        env: &BTreeMap<String, String>,
        cache: Option<&SchemaCache>,
        source: Source,
    ) -> Result<Option<PluginProvider>, String> {
        let offline = source == Source::CacheOnly;
        let first = Arc::new(tokio::sync::OnceCell::new());
        // The binary's hash (the cache's key) is read on a blocking thread: in `Live` mode the
        // process starts and answers its schema meanwhile (hashing a big provider takes longer
        // than starting it).
        let hashing = cache.map(|c| {
            let (c, path) = (c.clone(), path.to_path_buf());
            tokio::task::spawn_blocking(move || c.hash(&path))
        });
        let hash = async move {
            match hashing {
                Some(h) => h
                    .await
                    .map_err(|e| format!("hashing the plugin binary failed: {e}"))?
                    .map(Some),
                None => Ok(None),
            }
        };
        let live = async {
            let (process, client) = start_process(path, env).await?;
            let c = client.clone();
            let (wire, diags, bytes) = run(async move { c.get_schema().await })
                .await
                .map_err(|e| format!("Plugin {}: {e}", path.display()))?;
            Ok::<_, String>((process, client, wire, diags, bytes))
        };
        let (hash, cached, fresh) = match source {
            Source::Live => {
                let (hash, answer) = tokio::join!(hash, live);
                (hash?, None, Some(answer?))
            }
            Source::CacheFirst | Source::CacheOnly => {
                let hash = hash.await?;
                let cached = match (cache, &hash) {
                    (Some(c), Some(h)) => c.get(h),
                    _ => None,
                };
                let fresh = match (&cached, offline) {
                    (None, false) => Some(live.await?),
                    _ => None,
                };
                (hash, cached, fresh)
            }
        };
        let (protocol, wire, diags) = match (cached, fresh) {
            (Some(c), _) => {
                tracing::debug!(target: "plugin", provider = package, path = %path.display(), "schema from the cache");
                (c.protocol, c.schemas, c.diags)
            }
            (None, Some((process, client, wire, diags, bytes))) => {
                if let (Some(cache), Some(h), false) = (cache, &hash, diags.iter().any(|d| d.error))
                {
                    cache.put(h, client.protocol(), &bytes);
                }
                let protocol = client.protocol();
                let _ = first.set((process, client));
                (protocol, wire, diags)
            }
            (None, None) => return Ok(None),
        };
        check("schema", package, &diags)
            .map_err(|e| format!("Plugin {}: its schema: {e}", path.display()))?;
        let schema = provider_schema(&wire);
        Ok(Some(PluginProvider {
            shared: Arc::new(Shared {
                package: package.to_string(),
                path: path.to_path_buf(),
                env: env.clone(),
                protocol,
                wire,
                schema,
                validations: match (cache, &hash, offline) {
                    (Some(c), Some(h), false) => Some(Arc::new(Validations::open(c, h))),
                    _ => None,
                },
            }),
            first,
            first_taken: AtomicBool::new(false),
            offline,
        }))
    }

    /// Schemas only (see `offline`).
    pub(crate) fn offline(mut self, offline: bool) -> Self {
        self.offline = offline;
        self
    }

    /// The protocol version the plugin's handshake chose (5 or 6).
    #[cfg(test)]
    pub(crate) fn protocol(&self) -> u32 {
        self.shared.protocol
    }

    /// The first process's client, started now if need be.
    async fn first_client(&self) -> Result<Client, String> {
        let (path, env) = (self.shared.path.clone(), self.shared.env.clone());
        self.first
            .get_or_try_init(|| async move { start_process(&path, &env).await })
            .await
            .map(|(_, c)| c.clone())
    }

    /// The RPC of a validation, ready to run (or its answer already, when there is nothing
    /// to ask: an offline provider, a configuration that cannot be encoded).
    #[allow(clippy::type_complexity)]
    fn validation(
        &self,
        what: &'static str,
        // The resource or data source type: its clean answers are remembered
        // (`cache::Validations`); `None` for the provider's own configuration.
        remembered: Option<&str>,
        call: impl FnOnce(
                Client,
                Dyn,
            ) -> std::pin::Pin<
                Box<dyn std::future::Future<Output = Result<Vec<Diag>, String>> + Send>,
            > + Send
            + 'static,
        config: &Value,
        ty: &Type,
    ) -> Result<
        std::pin::Pin<Box<dyn std::future::Future<Output = Result<Vec<Diag>, String>> + Send>>,
        Vec<Diag>,
    > {
        if self.offline {
            return Err(Vec::new());
        }
        let dv = match encode(config, ty, what) {
            Ok(d) => d,
            Err(e) => {
                return Err(vec![Diag {
                    error: true,
                    summary: "Invalid configuration".into(),
                    detail: e.message,
                    path: None,
                    steps: Vec::new(),
                }])
            }
        };
        let seen = match (&self.shared.validations, remembered) {
            (Some(v), Some(type_)) => {
                Some((v.clone(), Validations::digest(what, type_, &dv.msgpack)))
            }
            _ => None,
        };
        if let Some((v, digest)) = &seen {
            if v.known(digest) {
                return Err(Vec::new());
            }
        }
        let first = self.first.clone();
        let (path, env) = (self.shared.path.clone(), self.shared.env.clone());
        Ok(Box::pin(async move {
            let c = first
                .get_or_try_init(|| async move { start_process(&path, &env).await })
                .await
                .map(|(_, c)| c.clone())?;
            let answer = call(c, dv).await;
            if let (Ok(diags), Some((v, digest))) = (&answer, seen) {
                if diags.is_empty() {
                    v.record(digest);
                }
            }
            answer
        }))
    }

    /// A validation's answer, or the plugin's failure as a diagnostic.
    fn validated(&self, r: Result<Vec<Diag>, String>) -> Vec<Diag> {
        match r {
            Ok(diags) => diags,
            Err(e) => vec![Diag {
                error: true,
                summary: "Provider failed to validate".into(),
                detail: format!(
                    "{} ({}): {e}",
                    self.shared.package,
                    self.shared.path.display()
                ),
                path: None,
                steps: Vec::new(),
            }],
        }
    }

    /// The validation RPC of a resource or data source configuration.
    #[allow(clippy::type_complexity)]
    fn validation_of(
        &self,
        mode: Mode,
        type_: &str,
        config: &Value,
    ) -> Result<
        std::pin::Pin<Box<dyn std::future::Future<Output = Result<Vec<Diag>, String>> + Send>>,
        Vec<Diag>,
    > {
        let ty = match self.shared.type_schema(mode, type_) {
            Ok(s) => s.ty.clone(),
            Err(e) => {
                return Err(vec![Diag {
                    error: true,
                    summary: "Unknown type".into(),
                    detail: e.message,
                    path: None,
                    steps: Vec::new(),
                }])
            }
        };
        let t = type_.to_string();
        match mode {
            Mode::Managed => self.validation(
                "resource configuration",
                Some(type_),
                move |c, dv| Box::pin(async move { c.validate_resource(&t, dv).await }),
                config,
                &ty,
            ),
            Mode::Data => self.validation(
                "data source configuration",
                Some(type_),
                move |c, dv| Box::pin(async move { c.validate_data(&t, dv).await }),
                config,
                &ty,
            ),
            Mode::Ephemeral => self.validation(
                "ephemeral resource configuration",
                Some(type_),
                move |c, dv| Box::pin(async move { c.validate_ephemeral(&t, dv).await }),
                config,
                &ty,
            ),
        }
    }

    fn validate_diags(&self, mode: Mode, type_: &str, config: &Value) -> Vec<Diag> {
        match self.validation_of(mode, type_, config) {
            Ok(fut) => self.validated(run_sync(fut)),
            Err(answer) => answer,
        }
    }

    async fn validate_diags_async(&self, mode: Mode, type_: &str, config: &Value) -> Vec<Diag> {
        match self.validation_of(mode, type_, config) {
            Ok(fut) => self.validated(run(fut).await),
            Err(answer) => answer,
        }
    }
}

#[async_trait]
impl Provider for PluginProvider {
    fn package(&self) -> &str {
        &self.shared.package
    }

    fn schema(&self) -> &ProviderSchema {
        &self.shared.schema
    }

    fn check_config(&self, config: &Value) -> Diagnostics {
        to_diagnostics(self.check_config_diags(config))
    }

    /// The engine's DiffConfig rule for plugins: a provider protocol has no notion of a
    /// configuration change that replaces every object, so any change reconfigures in place.
    fn diff_config(&self, old: &Value, new: &Value) -> ConfigDiff {
        if same(old, new) {
            ConfigDiff::NoChange
        } else {
            ConfigDiff::Update
        }
    }

    fn validate(&self, mode: Mode, type_: &str, config: &Value) -> Diagnostics {
        to_diagnostics(self.validate_diags(mode, type_, config))
    }

    fn functions(&self) -> BTreeMap<String, FunctionSig> {
        self.shared.wire.functions.clone()
    }

    fn call_function(&self, name: &str, args: Vec<Value>) -> Result<Value, FunctionFailure> {
        self.call(name, args)
    }

    fn validate_config(&self, mode: Mode, type_: &str, config: &Value) -> Vec<ProviderDiag> {
        self.validate_diags(mode, type_, config)
            .iter()
            .map(Diag::to_provider_diag)
            .collect()
    }

    async fn validate_config_async(
        &self,
        mode: Mode,
        type_: &str,
        config: &Value,
    ) -> Vec<ProviderDiag> {
        self.validate_diags_async(mode, type_, config)
            .await
            .iter()
            .map(Diag::to_provider_diag)
            .collect()
    }

    async fn configure(&self, config: &Value) -> ProviderResult<Arc<dyn Configured>> {
        if self.offline {
            return Err(ProviderError(format!(
                "Provider {} is loaded for its schema only.",
                self.shared.package
            )));
        }
        let (process, client) = if !self.first_taken.swap(true, Ordering::SeqCst) {
            self.first_client().await.map_err(ProviderError)?;
            self.first.get().cloned().expect("just started")
        } else {
            start_process(&self.shared.path, &self.shared.env)
                .await
                .map_err(ProviderError)?
        };
        let dv = encode(
            config,
            &self.shared.provider_type(),
            "provider configuration",
        )?;
        let c = client.clone();
        let diags = run(async move { c.configure(TERRAFORM_VERSION, dv).await })
            .await
            .map_err(ProviderError)?;
        check("configure", &self.shared.package, &diags)?;
        Ok(Arc::new(PluginInstance {
            inner: Arc::new(Inner {
                shared: self.shared.clone(),
                _process: process,
                client,
                plans: Mutex::new(HashMap::new()),
            }),
        }))
    }
}

impl PluginProvider {
    /// `CallFunction` on the first process (started now if need be, even when `offline`: a
    /// function call needs the provider, not its configuration).
    fn call(&self, name: &str, args: Vec<Value>) -> Result<Value, FunctionFailure> {
        let fail = |message: String| FunctionFailure { arg: None, message };
        let sig = self
            .shared
            .wire
            .functions
            .get(name)
            .ok_or_else(|| fail(format!("The provider has no function {name:?}.")))?;
        let mut encoded = Vec::new();
        for (i, a) in args.iter().enumerate() {
            let ty = match sig.params.get(i).or(sig.variadic.as_ref()) {
                Some(p) => &p.ty,
                None => return Err(fail(format!("Too many arguments to {name}."))),
            };
            let (a, _) = a.clone().deep_unmark();
            encoded.push(Dyn::msgpack(codec::encode(&a, ty).map_err(|e| {
                FunctionFailure {
                    arg: Some(i),
                    message: format!("Cannot encode this argument for the provider: {e}."),
                }
            })?));
        }
        let ret = sig.ret.clone();
        let first = self.first.clone();
        let (path, env) = (self.shared.path.clone(), self.shared.env.clone());
        let n = name.to_string();
        let out = run_sync(async move {
            let c = first
                .get_or_try_init(|| async move { start_process(&path, &env).await })
                .await
                .map(|(_, c)| c.clone())?;
            c.call_function(&n, encoded).await
        })
        .map_err(|e| fail(format!("Provider {}: {e}", self.shared.package)))??;
        decode(&out, &ret, "function result").map_err(|e| fail(e.message))
    }

    fn check_config_diags(&self, config: &Value) -> Vec<Diag> {
        let ty = self.shared.provider_type();
        match self.validation(
            "provider configuration",
            None,
            |c, dv| Box::pin(async move { c.validate_provider(dv).await }),
            config,
            &ty,
        ) {
            Ok(fut) => self.validated(run_sync(fut)),
            Err(answer) => answer,
        }
    }
}

/// A configured plugin process.
pub(crate) struct PluginInstance {
    inner: Arc<Inner>,
}

impl PluginInstance {
    /// The meta of an object in the provider's current schema with no private bytes (for
    /// callers of the meta-less trait methods).
    fn current_meta(&self, type_: &str) -> ObjectMeta {
        ObjectMeta {
            schema_version: self
                .inner
                .schema(Mode::Managed, type_)
                .ok()
                .and_then(|s| u64::try_from(s.version).ok())
                .unwrap_or(0),
            private: Vec::new(),
        }
    }
}

fn request_type(r: &ApplyRequest) -> &str {
    match r {
        ApplyRequest::Create { type_, .. }
        | ApplyRequest::Update { type_, .. }
        | ApplyRequest::Delete { type_, .. } => type_,
    }
}

struct Inner {
    shared: Arc<Shared>,
    _process: Arc<PluginProcess>,
    client: Client,
    /// (type, planned value) → the configuration apply must pass back.
    plans: Mutex<HashMap<(String, String), Dyn>>,
}

/// A value's identity for the side tables (marks removed; unknowns and null types included).
fn key(type_: &str, v: &Value) -> (String, String) {
    let (v, _) = v.clone().deep_unmark();
    (
        type_.to_string(),
        serde_json::to_string(&v).unwrap_or_default(),
    )
}

/// Terraform's proposed new state: the configuration, with computed attributes that the
/// configuration leaves null taking their prior value (null on create), block by block.
pub(crate) fn proposed_new(block: &Block, prior: Option<&Value>, config: &Value) -> Value {
    let config_u = config.unmarked();
    if config_u.is_null() || config_u.is_unknown() {
        return config.clone();
    }
    let Some(cattrs) = config_u.attributes() else {
        return config.clone();
    };
    let prior = prior.filter(|p| !p.is_null() && !p.is_unknown());
    let pattrs = prior.and_then(|p| p.unmarked().attributes());
    let mut out = ValueMap::new();
    for (name, a) in &block.attributes {
        let c = cattrs
            .get(name)
            .cloned()
            .unwrap_or(Value::Null(a.ty.clone()));
        let v = if a.computed && c.is_null() {
            pattrs
                .and_then(|p| p.get(name))
                .cloned()
                .unwrap_or(Value::Null(a.ty.clone()))
        } else {
            c
        };
        out.insert(name.clone(), v);
    }
    for (name, nb) in &block.blocks {
        let Some(c) = cattrs.get(name) else {
            continue;
        };
        let p = pattrs.and_then(|p| p.get(name));
        let v = match (nb.nesting, c.unmarked()) {
            (_, cu) if cu.is_null() || cu.is_unknown() => c.clone(),
            (Nesting::Single, _) => proposed_new(&nb.block, p, c),
            (Nesting::List, Value::List(elems)) | (Nesting::List, Value::Tuple(elems)) => {
                let pe = p.and_then(|p| p.unmarked().elements());
                Value::List(
                    elems
                        .iter()
                        .enumerate()
                        .map(|(i, e)| proposed_new(&nb.block, pe.and_then(|pe| pe.get(i)), e))
                        .collect(),
                )
            }
            (Nesting::Map, Value::Map(elems)) | (Nesting::Map, Value::Object(elems)) => {
                let pe = p.and_then(|p| p.unmarked().attributes());
                Value::Map(
                    elems
                        .iter()
                        .map(|(k, e)| {
                            (
                                k.clone(),
                                proposed_new(&nb.block, pe.and_then(|pe| pe.get(k)), e),
                            )
                        })
                        .collect(),
                )
            }
            (Nesting::Set, Value::Set(elems)) | (Nesting::Set, Value::List(elems)) => Value::set(
                elems
                    .iter()
                    .map(|e| proposed_new(&nb.block, None, e))
                    .collect(),
            ),
            _ => c.clone(),
        };
        out.insert(name.clone(), v);
    }
    Value::Object(out)
}

/// The first place where `new` breaks a known value of `planned`, if any.
fn inconsistency(planned: &Value, new: &Value, path: &str) -> Option<String> {
    let (p, n) = (planned.unmarked(), new.unmarked());
    if p.is_unknown() {
        return None;
    }
    match (p, n) {
        (Value::Object(pm), Value::Object(nm)) | (Value::Map(pm), Value::Map(nm)) => {
            if matches!(p, Value::Map(_)) && pm.len() != nm.len() {
                return Some(path.to_string());
            }
            for (k, pv) in pm {
                let nv = nm.get(k).cloned().unwrap_or(Value::null());
                let sub = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                if let Some(bad) = inconsistency(pv, &nv, &sub) {
                    return Some(bad);
                }
            }
            None
        }
        (Value::List(pe), Value::List(ne)) | (Value::Tuple(pe), Value::Tuple(ne)) => {
            if pe.len() != ne.len() {
                return Some(path.to_string());
            }
            pe.iter()
                .zip(ne)
                .enumerate()
                .find_map(|(i, (a, b))| inconsistency(a, b, &format!("{path}[{i}]")))
        }
        (Value::Set(pe), _) if !p.is_wholly_known() => {
            // A set with unknown elements can only be checked by size.
            match n {
                Value::Set(ne) if ne.len() <= pe.len() => None,
                _ => Some(path.to_string()),
            }
        }
        _ => (!same(p, n)).then(|| path.to_string()),
    }
}

impl Inner {
    fn schema(&self, mode: Mode, type_: &str) -> ProviderResult<&TypeSchema> {
        self.shared.type_schema(mode, type_)
    }

    /// `UpgradeResourceState`: the object as stored (raw JSON, written with schema version
    /// `version`) in the provider's current schema.
    async fn upgrade(&self, type_: &str, version: u64, state: &Value) -> ProviderResult<Value> {
        let ty = self.schema(Mode::Managed, type_)?.ty.clone();
        let (state, _) = state.clone().deep_unmark();
        let raw = serde_json::to_vec(&state.to_json()).unwrap_or_default();
        let c = self.client.clone();
        let t = type_.to_string();
        let version = i64::try_from(version).unwrap_or(i64::MAX);
        let (upgraded, diags) = run(async move { c.upgrade(&t, version, raw).await })
            .await
            .map_err(ProviderError)?;
        check("upgrade state", &self.shared.package, &diags)?;
        decode(&upgraded, &ty, "upgraded state")
    }

    /// A prior object from state, upgraded when it was written with another schema version
    /// than the provider's (an object read in this run already has the provider's).
    async fn current_form(
        &self,
        type_: &str,
        state: Value,
        meta: &ObjectMeta,
    ) -> ProviderResult<Value> {
        let version = self.schema(Mode::Managed, type_)?.version;
        if i64::try_from(meta.schema_version).ok() == Some(version) {
            Ok(state)
        } else {
            let upgraded = self.upgrade(type_, meta.schema_version, &state).await?;
            Ok(crate::value::carry_marks(&state, upgraded))
        }
    }

    async fn plan(
        self: Arc<Self>,
        type_: String,
        prior: Option<Value>,
        meta: ObjectMeta,
        config: Value,
    ) -> ProviderResult<Planned> {
        let ts = self.schema(Mode::Managed, &type_)?;
        let ty = ts.ty.clone();
        let prior = match prior.filter(|p| !p.is_null()) {
            Some(p) => Some(self.current_form(&type_, p, &meta).await?),
            None => None,
        };
        let prior_dv = encode(
            prior.as_ref().unwrap_or(&Value::Null(ty.clone())),
            &ty,
            "prior state",
        )?;
        let proposed = proposed_new(&ts.block, prior.as_ref(), &config);
        let proposed_dv = encode(&proposed, &ty, "proposed new state")?;
        let config_dv = encode(&config, &ty, "configuration")?;
        let prior_private = if prior.is_some() {
            meta.private.clone()
        } else {
            Vec::new()
        };
        let c = self.client.clone();
        let (t, cd) = (type_.clone(), config_dv.clone());
        let out = run(async move { c.plan(&t, prior_dv, proposed_dv, cd, prior_private).await })
            .await
            .map_err(ProviderError)?;
        let warnings = check("plan", &self.shared.package, &out.diags)?;
        let planned = decode(&out.planned, &ty, "planned state")?;
        if planned.is_null() {
            return Err(ProviderError(format!(
                "The plugin planned no object for {type_} (a null planned state)."
            )));
        }
        if let Some(path) = write_only_set(&planned, &ts.block) {
            return Err(ProviderError(format!(
                "Provider produced invalid plan: the plugin planned a value for the write-only \
                 attribute {type_}.{path}. Write-only attributes cannot be read back from the \
                 provider. This is a bug in the provider, which should be reported in the \
                 provider's own issue tracker."
            )));
        }
        if let Some(path) = inconsistency_config(&config, &planned, &ts.block) {
            let msg = format!(
                "The plugin planned a value for {type_}.{path} that differs from its configuration."
            );
            if out.legacy_type_system {
                tracing::warn!(target: "plugin", provider = %self.shared.package, "{msg} (tolerated: legacy type system)");
            } else {
                return Err(ProviderError(msg));
            }
        }
        self.plans
            .lock()
            .expect("plans")
            .insert(key(&type_, &planned), config_dv);
        Ok(Planned {
            planned,
            requires_replace: out.requires_replace,
            private: out.private,
            warnings,
        })
    }

    async fn apply(
        self: Arc<Self>,
        request: ApplyRequest,
        prior_meta: ObjectMeta,
        planned_private: Vec<u8>,
    ) -> Applied {
        let fail = |e: ProviderError| Applied {
            response: ApplyResponse {
                new_state: None,
                error: Some(e),
            },
            meta: prior_meta.clone(),
            warnings: Vec::new(),
        };
        let (type_, prior, planned) = match request {
            ApplyRequest::Create { type_, planned, .. } => (type_, None, Some(planned)),
            ApplyRequest::Update {
                type_,
                prior,
                planned,
            } => (type_, Some(prior), Some(planned)),
            ApplyRequest::Delete { type_, prior } => (type_, Some(prior), None),
        };
        let ts = match self.schema(Mode::Managed, &type_) {
            Ok(s) => s,
            Err(e) => return fail(e),
        };
        let ty = ts.ty.clone();
        let version = ts.version;
        let prior = match prior {
            Some(p) => match self.current_form(&type_, p, &prior_meta).await {
                Ok(p) => Some(p),
                Err(e) => return fail(e),
            },
            None => None,
        };
        let null = Value::Null(ty.clone());
        let encoded = (|| {
            Ok::<_, ProviderError>((
                encode(prior.as_ref().unwrap_or(&null), &ty, "prior state")?,
                encode(planned.as_ref().unwrap_or(&null), &ty, "planned state")?,
            ))
        })();
        let (prior_dv, planned_dv) = match encoded {
            Ok(x) => x,
            Err(e) => return fail(e),
        };
        let memo = planned
            .as_ref()
            .and_then(|p| self.plans.lock().expect("plans").remove(&key(&type_, p)));
        let config_dv = memo.unwrap_or_else(|| Dyn::msgpack(vec![0xc0]));
        // A destroy has no plan of its own: its private bytes are the object's.
        let private = if planned.is_some() {
            planned_private
        } else {
            prior_meta.private.clone()
        };
        let c = self.client.clone();
        let t = type_.clone();
        let out =
            match run(async move { c.apply(&t, prior_dv, planned_dv, config_dv, private).await })
                .await
            {
                Ok(o) => o,
                Err(e) => return fail(ProviderError(e)),
            };
        let new_state = match decode(&out.new_state, &ty, "new state") {
            Ok(v) if v.is_null() => None,
            Ok(v) => Some(v),
            Err(e) => return fail(e),
        };
        let (mut error, warnings) = match check("apply", &self.shared.package, &out.diags) {
            Ok(w) => (None, w),
            Err(e) => (Some(e), Vec::new()),
        };
        // A write-only value in what the provider returned is never kept: nulled, and an
        // error (the provider's bug), as Terraform reports it.
        let new_state = match new_state {
            Some(v) => match write_only_set(&v, &ts.block) {
                Some(path) => {
                    error.get_or_insert_with(|| {
                        ProviderError(format!(
                            "Provider produced invalid object: the plugin returned a value for \
                             the write-only attribute {type_}.{path}. Write-only attributes \
                             cannot be read back from the provider."
                        ))
                    });
                    Some(null_write_only(v, &ts.block))
                }
                None => Some(v),
            },
            None => None,
        };
        if let (None, Some(new), Some(planned)) = (&error, &new_state, &planned) {
            if !new.is_wholly_known() {
                error = Some(ProviderError(format!(
                    "The plugin returned a {type_} with unknown values after apply (at {}).",
                    new.unknown_paths().join(", ")
                )));
            } else if let Some(path) = inconsistency(planned, new, "") {
                let msg = format!(
                    "Provider produced inconsistent result after apply: {type_}.{path} differs from the planned value."
                );
                if out.legacy_type_system {
                    tracing::warn!(target: "plugin", provider = %self.shared.package, "{msg} (tolerated: legacy type system)");
                } else {
                    error = Some(ProviderError(msg));
                }
            }
        }
        let meta = ObjectMeta {
            schema_version: u64::try_from(version).unwrap_or(0),
            private: out.private,
        };
        Applied {
            response: ApplyResponse { new_state, error },
            meta,
            warnings,
        }
    }

    async fn read(
        self: Arc<Self>,
        type_: String,
        state: Value,
        meta: ObjectMeta,
        imported: bool,
    ) -> ProviderResult<Option<(Value, ObjectMeta)>> {
        let ts = self.schema(Mode::Managed, &type_)?;
        let ty = ts.ty.clone();
        let version = ts.version;
        // Every stored object goes through UpgradeResourceState first, as in Terraform; an
        // object the provider's import just returned is in its current form already.
        let upgraded = match imported {
            true => state,
            false => self.upgrade(&type_, meta.schema_version, &state).await?,
        };
        let upgraded = encode(&upgraded, &ty, "upgraded state")?;
        let c = self.client.clone();
        let t = type_.clone();
        let private = meta.private;
        let out = run(async move { c.read(&t, upgraded, private).await })
            .await
            .map_err(ProviderError)?;
        check("read", &self.shared.package, &out.diags)?;
        let new = decode(&out.new_state, &ty, "state")?;
        if new.is_null() {
            return Ok(None);
        }
        if let Some(path) = write_only_set(&new, &ts.block) {
            return Err(ProviderError(format!(
                "Provider produced invalid object: the plugin read a value for the write-only \
                 attribute {type_}.{path}. Write-only attributes cannot be read back from the \
                 provider."
            )));
        }
        Ok(Some((
            new,
            ObjectMeta {
                schema_version: u64::try_from(version).unwrap_or(0),
                private: out.private,
            },
        )))
    }

    /// `ImportResourceState`: each object decoded with its own type's schema, kept with the
    /// provider's private bytes and that type's schema version (an import returns the
    /// provider's current form).
    async fn import(self: Arc<Self>, type_: String, id: String) -> ProviderResult<Vec<Imported>> {
        self.schema(Mode::Managed, &type_)?;
        let c = self.client.clone();
        let t = type_.clone();
        let (found, diags) = run(async move { c.import(&t, &id).await })
            .await
            .map_err(ProviderError)?;
        check("import", &self.shared.package, &diags)?;
        let mut out = Vec::new();
        for i in found {
            let ts = self.schema(Mode::Managed, &i.type_name)?;
            let state = decode(&i.state, &ts.ty, "imported state")?;
            out.push(Imported {
                type_: i.type_name,
                state,
                meta: ObjectMeta {
                    schema_version: u64::try_from(ts.version).unwrap_or(0),
                    private: i.private,
                },
            });
        }
        Ok(out)
    }

    async fn read_data(self: Arc<Self>, type_: String, config: Value) -> ProviderResult<Value> {
        let ty = self.schema(Mode::Data, &type_)?.ty.clone();
        let dv = encode(&config, &ty, "configuration")?;
        let c = self.client.clone();
        let t = type_.clone();
        let (state, diags) = run(async move { c.read_data(&t, dv).await })
            .await
            .map_err(ProviderError)?;
        check("read", &self.shared.package, &diags)?;
        let v = decode(&state, &ty, "data source state")?;
        if !v.is_wholly_known() {
            return Err(ProviderError(format!(
                "The plugin returned unknown values for data source {type_} (at {}).",
                v.unknown_paths().join(", ")
            )));
        }
        Ok(v)
    }

    async fn open_ephemeral(
        self: Arc<Self>,
        type_: String,
        config: Value,
    ) -> ProviderResult<Opened> {
        let ty = self.schema(Mode::Ephemeral, &type_)?.ty.clone();
        let dv = encode(&config, &ty, "configuration")?;
        let c = self.client.clone();
        let t = type_.clone();
        let out = run(async move { c.open_ephemeral(&t, dv).await })
            .await
            .map_err(ProviderError)?;
        let warnings = check("open", &self.shared.package, &out.diags)?;
        let v = decode(&out.result, &ty, "ephemeral resource result")?;
        if !v.is_wholly_known() {
            return Err(ProviderError(format!(
                "The plugin returned unknown values for ephemeral resource {type_} (at {}).",
                v.unknown_paths().join(", ")
            )));
        }
        Ok(Opened {
            result: v,
            renew_at: out.renew_at,
            private: out.private,
            warnings,
        })
    }
}

/// The first write-only attribute (here or in a nested block) that holds a value in `v`, a
/// planned or new state: providers must answer null there, so that no write-only value is
/// ever stored (Terraform's rule).
pub(crate) fn write_only_set(v: &Value, block: &Block) -> Option<String> {
    let attrs = v.unmarked().attributes()?;
    for (name, a) in &block.attributes {
        if a.write_only && attrs.get(name).is_some_and(|x| !x.is_null()) {
            return Some(name.clone());
        }
    }
    for (name, nb) in &block.blocks {
        let Some(inner) = attrs.get(name) else {
            continue;
        };
        let found = match inner.unmarked() {
            Value::List(xs) | Value::Set(xs) | Value::Tuple(xs) => {
                xs.iter().find_map(|x| write_only_set(x, &nb.block))
            }
            Value::Map(m) | Value::Object(m) if nb.nesting != Nesting::Single => {
                m.values().find_map(|x| write_only_set(x, &nb.block))
            }
            x => write_only_set(x, &nb.block),
        };
        if let Some(p) = found {
            return Some(format!("{name}.{p}"));
        }
    }
    None
}

/// `v` with every write-only attribute of `block` (nested blocks included) null.
pub(crate) fn null_write_only(v: Value, block: &Block) -> Value {
    let Value::Object(mut attrs) = v else {
        return v;
    };
    for (name, a) in &block.attributes {
        if a.write_only {
            if let Some(x) = attrs.get_mut(name) {
                *x = Value::Null(a.ty.clone());
            }
        }
    }
    for (name, nb) in &block.blocks {
        let Some(inner) = attrs.remove(name) else {
            continue;
        };
        let inner = match inner {
            Value::List(xs) => Value::List(
                xs.into_iter()
                    .map(|x| null_write_only(x, &nb.block))
                    .collect(),
            ),
            Value::Set(xs) => Value::set(
                xs.into_iter()
                    .map(|x| null_write_only(x, &nb.block))
                    .collect(),
            ),
            Value::Map(m) => Value::Map(
                m.into_iter()
                    .map(|(k, x)| (k, null_write_only(x, &nb.block)))
                    .collect(),
            ),
            x => null_write_only(x, &nb.block),
        };
        attrs.insert(name.clone(), inner);
    }
    Value::Object(attrs)
}

/// Where a plan changed a value the configuration set (only attributes set in configuration
/// and not computed are checked, recursively through blocks).
fn inconsistency_config(config: &Value, planned: &Value, block: &Block) -> Option<String> {
    let c = config.unmarked().attributes()?;
    let p = planned.unmarked().attributes()?;
    for (name, a) in &block.attributes {
        let Some(cv) = c.get(name) else { continue };
        if cv.is_null() || a.write_only || (a.computed && !a.optional && !a.required) {
            continue;
        }
        let pv = p.get(name).cloned().unwrap_or(Value::null());
        if cv.is_wholly_known() && !same(cv, &pv) {
            return Some(name.clone());
        }
    }
    None
}

#[async_trait]
impl Configured for PluginInstance {
    fn plan(&self, type_: &str, prior: Option<&Value>, config: &Value) -> ProviderResult<Planned> {
        let inner = self.inner.clone();
        let (t, p, c) = (type_.to_string(), prior.cloned(), config.clone());
        let meta = self.current_meta(type_);
        run_sync(async move { inner.plan(t, p, meta, c).await })
    }

    async fn plan_async(
        &self,
        type_: &str,
        prior: Option<&Value>,
        meta: &ObjectMeta,
        config: &Value,
    ) -> ProviderResult<Planned> {
        self.inner
            .clone()
            .plan(
                type_.to_string(),
                prior.cloned(),
                meta.clone(),
                config.clone(),
            )
            .await
    }

    async fn apply(&self, request: ApplyRequest) -> ApplyResponse {
        let meta = self.current_meta(request_type(&request));
        self.inner
            .clone()
            .apply(request, meta, Vec::new())
            .await
            .response
    }

    async fn apply_object(
        &self,
        request: ApplyRequest,
        prior: &ObjectMeta,
        planned_private: &[u8],
    ) -> Applied {
        self.inner
            .clone()
            .apply(request, prior.clone(), planned_private.to_vec())
            .await
    }

    async fn read(&self, type_: &str, state: &Value) -> ProviderResult<Option<Value>> {
        let meta = self.current_meta(type_);
        Ok(self
            .inner
            .clone()
            .read(type_.to_string(), state.clone(), meta, false)
            .await?
            .map(|(v, _)| v))
    }

    async fn read_object(
        &self,
        type_: &str,
        state: &Value,
        meta: &ObjectMeta,
    ) -> ProviderResult<Option<(Value, ObjectMeta)>> {
        self.inner
            .clone()
            .read(type_.to_string(), state.clone(), meta.clone(), false)
            .await
    }

    async fn read_imported(
        &self,
        type_: &str,
        state: &Value,
        meta: &ObjectMeta,
    ) -> ProviderResult<Option<(Value, ObjectMeta)>> {
        self.inner
            .clone()
            .read(type_.to_string(), state.clone(), meta.clone(), true)
            .await
    }

    async fn import(&self, type_: &str, id: &str) -> ProviderResult<Vec<Imported>> {
        self.inner
            .clone()
            .import(type_.to_string(), id.to_string())
            .await
    }

    async fn read_data(&self, type_: &str, config: &Value) -> ProviderResult<Value> {
        self.inner
            .clone()
            .read_data(type_.to_string(), config.clone())
            .await
    }

    async fn open_ephemeral(&self, type_: &str, config: &Value) -> ProviderResult<Opened> {
        self.inner
            .clone()
            .open_ephemeral(type_.to_string(), config.clone())
            .await
    }

    async fn renew_ephemeral(
        &self,
        type_: &str,
        private: Option<Vec<u8>>,
    ) -> ProviderResult<Renewed> {
        let c = self.inner.client.clone();
        let t = type_.to_string();
        let out = run(async move { c.renew_ephemeral(&t, private).await })
            .await
            .map_err(ProviderError)?;
        check("renew", &self.inner.shared.package, &out.diags)?;
        Ok(Renewed {
            renew_at: out.renew_at,
            private: out.private,
        })
    }

    async fn close_ephemeral(&self, type_: &str, private: Option<Vec<u8>>) -> ProviderResult<()> {
        let c = self.inner.client.clone();
        let t = type_.to_string();
        let diags = run(async move { c.close_ephemeral(&t, private).await })
            .await
            .map_err(ProviderError)?;
        check("close", &self.inner.shared.package, &diags).map(|_| ())
    }

    /// Plugins have no create tokens: an interrupted create cannot be found again.
    async fn find_by_token(&self, _type_: &str, _token: &str) -> ProviderResult<Option<Value>> {
        Ok(None)
    }

    async fn stop(&self) {
        let c = self.inner.client.clone();
        match run(async move { c.stop().await }).await {
            Ok(None) => {}
            Ok(Some(e)) | Err(e) => {
                tracing::warn!(target: "plugin", provider = %self.inner.shared.package, "stop: {e}")
            }
        }
    }
}
