//! `PluginProvider`: a plugin binary behind Cairn's `Provider` / `Configured` traits, so the
//! engine cannot tell it from a built-in.
//!
//! Processes: the first process (started for the schema) answers validation and becomes the
//! first configured instance; every further provider instance (another configuration of the
//! same provider) gets a process of its own, because a plugin is configured once. All of them
//! live until the end of the command ([`super::launch::shutdown_all`]).
//!
//! What the traits do not carry is kept here, per configured instance and for the run:
//! - the `planned_private` bytes and the configuration of each plan, keyed by the planned
//!   value, which the engine passes back to `apply` (the engine re-plans just before applying);
//! - the `private` bytes a read or an apply returned, keyed by the state value, passed back
//!   with that state to plan, update and delete.
//!
//! Every state value that comes from Cairn's state goes through `UpgradeResourceState` (with
//! the schema version of the running provider) before `ReadResource`, as Terraform does.
//! Results that break the plan are errors, or warnings when the provider says it has
//! `legacy_type_system` (SDKv2), as Terraform tolerates them.

use super::codec;
use super::launch::{run, run_sync, PluginProcess};
use super::rpc::{Client, Diag, Dyn, Schemas, TypeSchema};
use crate::diag::{Diagnostic, Diagnostics};
use crate::provider::schema_util::same;
use crate::provider::{
    ApplyRequest, ApplyResponse, Block, ConfigDiff, Configured, Nesting, Planned, Provider,
    ProviderError, ProviderResult, ProviderSchema,
};
use crate::value::{Type, Value};
use async_trait::async_trait;
use cairn_state::Mode;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// The Terraform version Cairn announces to providers in `ConfigureProvider`: the one whose
/// protocol behaviour it follows.
pub const TERRAFORM_VERSION: &str = "1.11.4";

/// The schemas of one plugin, in both forms.
#[derive(Debug)]
struct Shared {
    package: String,
    path: PathBuf,
    env: BTreeMap<String, String>,
    wire: Schemas,
    schema: ProviderSchema,
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
        };
        found.ok_or_else(|| {
            ProviderError(format!(
                "Provider {} ({}) has no {} type {type_:?}.",
                self.package,
                self.path.display(),
                match mode {
                    Mode::Managed => "resource",
                    Mode::Data => "data source",
                }
            ))
        })
    }
}

pub struct PluginProvider {
    shared: Arc<Shared>,
    /// The first process: validation, and the first configured instance.
    first: Arc<PluginProcess>,
    first_client: Client,
    first_taken: AtomicBool,
}

impl std::fmt::Debug for PluginProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PluginProvider")
            .field("package", &self.shared.package)
            .field("path", &self.shared.path)
            .finish()
    }
}

/// Errors among diagnostics as one provider error (warnings go to the log).
fn check(what: &str, package: &str, diags: &[Diag]) -> ProviderResult<()> {
    let mut errors = Vec::new();
    for d in diags {
        if d.error {
            errors.push(d.message());
        } else {
            tracing::warn!(target: "plugin", provider = package, "{what}: {}", d.message());
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(ProviderError(errors.join("; ")))
    }
}

/// Provider diagnostics as Cairn diagnostics (the attribute path, when there is one, is named
/// in the detail).
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

impl PluginProvider {
    /// Starts the plugin at `path` for the provider whose local name is `package`, and reads its
    /// schema.
    pub async fn start(
        package: &str,
        path: &Path,
        env: &BTreeMap<String, String>,
    ) -> Result<PluginProvider, String> {
        let first = PluginProcess::start(path, env).await?;
        let client = Client::new(first.protocol, first.channel.clone());
        let c = client.clone();
        let (wire, diags) = run(async move { c.get_schema().await })
            .await
            .map_err(|e| format!("Plugin {}: {e}", path.display()))?;
        check("schema", package, &diags)
            .map_err(|e| format!("Plugin {}: its schema: {e}", path.display()))?;
        let schema = ProviderSchema {
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
        };
        Ok(PluginProvider {
            shared: Arc::new(Shared {
                package: package.to_string(),
                path: path.to_path_buf(),
                env: env.clone(),
                wire,
                schema,
            }),
            first,
            first_client: client,
            first_taken: AtomicBool::new(false),
        })
    }

    pub fn path(&self) -> &Path {
        &self.shared.path
    }

    pub fn protocol(&self) -> u32 {
        self.first.protocol
    }

    fn validate_with(
        &self,
        what: &'static str,
        call: impl FnOnce(
            Client,
            Dyn,
        ) -> std::pin::Pin<
            Box<dyn std::future::Future<Output = Result<Vec<Diag>, String>> + Send>,
        >,
        config: &Value,
        ty: &Type,
    ) -> Diagnostics {
        let dv = match encode(config, ty, what) {
            Ok(d) => d,
            Err(e) => return Diagnostics(vec![Diagnostic::error("Invalid configuration", e.0)]),
        };
        match run_sync(call(self.first_client.clone(), dv)) {
            Ok(diags) => to_diagnostics(diags),
            Err(e) => Diagnostics(vec![Diagnostic::error(
                "Provider failed to validate",
                format!(
                    "{} ({}): {e}",
                    self.shared.package,
                    self.shared.path.display()
                ),
            )]),
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
        let ty = self.shared.provider_type();
        self.validate_with(
            "provider configuration",
            |c, dv| Box::pin(async move { c.validate_provider(dv).await }),
            config,
            &ty,
        )
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
        let ty = match self.shared.type_schema(mode, type_) {
            Ok(s) => s.ty.clone(),
            Err(e) => return Diagnostics(vec![Diagnostic::error("Unknown type", e.0)]),
        };
        let t = type_.to_string();
        match mode {
            Mode::Managed => self.validate_with(
                "resource configuration",
                move |c, dv| Box::pin(async move { c.validate_resource(&t, dv).await }),
                config,
                &ty,
            ),
            Mode::Data => self.validate_with(
                "data source configuration",
                move |c, dv| Box::pin(async move { c.validate_data(&t, dv).await }),
                config,
                &ty,
            ),
        }
    }

    async fn configure(&self, config: &Value) -> ProviderResult<Arc<dyn Configured>> {
        let (process, client) = if !self.first_taken.swap(true, Ordering::SeqCst) {
            (self.first.clone(), self.first_client.clone())
        } else {
            let p = PluginProcess::start(&self.shared.path, &self.shared.env)
                .await
                .map_err(ProviderError)?;
            let c = Client::new(p.protocol, p.channel.clone());
            (p, c)
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
                privates: Mutex::new(HashMap::new()),
            }),
        }))
    }
}

/// A configured plugin process.
pub struct PluginInstance {
    inner: Arc<Inner>,
}

struct PlanMemo {
    config: Dyn,
    private: Vec<u8>,
}

struct Inner {
    shared: Arc<Shared>,
    _process: Arc<PluginProcess>,
    client: Client,
    /// (type, planned value) → what apply must pass back.
    plans: Mutex<HashMap<(String, String), PlanMemo>>,
    /// (type, state value) → the private bytes the provider returned with it.
    privates: Mutex<HashMap<(String, String), Vec<u8>>>,
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
pub fn proposed_new(block: &Block, prior: Option<&Value>, config: &Value) -> Value {
    let config_u = config.unmarked();
    if config_u.is_null() || config_u.is_unknown() {
        return config.clone();
    }
    let Some(cattrs) = config_u.attributes() else {
        return config.clone();
    };
    let prior = prior.filter(|p| !p.is_null() && !p.is_unknown());
    let pattrs = prior.and_then(|p| p.unmarked().attributes());
    let mut out = BTreeMap::new();
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

    fn private_of(&self, type_: &str, state: &Value) -> Vec<u8> {
        self.privates
            .lock()
            .expect("privates")
            .get(&key(type_, state))
            .cloned()
            .unwrap_or_default()
    }

    fn remember_private(&self, type_: &str, state: &Value, private: Vec<u8>) {
        if !private.is_empty() {
            self.privates
                .lock()
                .expect("privates")
                .insert(key(type_, state), private);
        }
    }

    async fn plan(
        self: Arc<Self>,
        type_: String,
        prior: Option<Value>,
        config: Value,
    ) -> ProviderResult<Planned> {
        let ts = self.schema(Mode::Managed, &type_)?;
        let ty = ts.ty.clone();
        let prior = prior.filter(|p| !p.is_null());
        let prior_dv = encode(
            prior.as_ref().unwrap_or(&Value::Null(ty.clone())),
            &ty,
            "prior state",
        )?;
        let proposed = proposed_new(&ts.block, prior.as_ref(), &config);
        let proposed_dv = encode(&proposed, &ty, "proposed new state")?;
        let config_dv = encode(&config, &ty, "configuration")?;
        let prior_private = prior
            .as_ref()
            .map(|p| self.private_of(&type_, p))
            .unwrap_or_default();
        let c = self.client.clone();
        let (t, cd) = (type_.clone(), config_dv.clone());
        let out = run(async move { c.plan(&t, prior_dv, proposed_dv, cd, prior_private).await })
            .await
            .map_err(ProviderError)?;
        check("plan", &self.shared.package, &out.diags)?;
        let planned = decode(&out.planned, &ty, "planned state")?;
        if planned.is_null() {
            return Err(ProviderError(format!(
                "The plugin planned no object for {type_} (a null planned state)."
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
        self.plans.lock().expect("plans").insert(
            key(&type_, &planned),
            PlanMemo {
                config: config_dv,
                private: out.private,
            },
        );
        Ok(Planned {
            planned,
            requires_replace: out.requires_replace,
        })
    }

    async fn apply(self: Arc<Self>, request: ApplyRequest) -> ApplyResponse {
        let fail = |e: ProviderError| ApplyResponse {
            new_state: None,
            error: Some(e),
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
        let (config_dv, mut private) = match memo {
            Some(m) => (m.config, m.private),
            None => (Dyn::msgpack(vec![0xc0]), Vec::new()),
        };
        if private.is_empty() {
            if let Some(p) = &prior {
                private = self.private_of(&type_, p);
            }
        }
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
        let mut error = check("apply", &self.shared.package, &out.diags).err();
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
        if let Some(new) = &new_state {
            self.remember_private(&type_, new, out.private);
        }
        ApplyResponse { new_state, error }
    }

    async fn read(self: Arc<Self>, type_: String, state: Value) -> ProviderResult<Option<Value>> {
        let ts = self.schema(Mode::Managed, &type_)?;
        let ty = ts.ty.clone();
        let version = ts.version;
        let private = self.private_of(&type_, &state);
        let raw = serde_json::to_vec(&state.to_json()).unwrap_or_default();
        let c = self.client.clone();
        let t = type_.clone();
        let out = run(async move {
            let (upgraded, diags) = c.upgrade(&t, version, raw).await?;
            Ok::<_, String>((upgraded, diags, c))
        })
        .await
        .map_err(ProviderError)?;
        let (upgraded, diags, c) = out;
        check("upgrade state", &self.shared.package, &diags)?;
        let t = type_.clone();
        let out = run(async move { c.read(&t, upgraded, private).await })
            .await
            .map_err(ProviderError)?;
        check("read", &self.shared.package, &out.diags)?;
        let new = decode(&out.new_state, &ty, "state")?;
        if new.is_null() {
            return Ok(None);
        }
        self.remember_private(&type_, &new, out.private);
        Ok(Some(new))
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
}

/// Where a plan changed a value the configuration set (only attributes set in configuration
/// and not computed are checked, recursively through blocks).
fn inconsistency_config(config: &Value, planned: &Value, block: &Block) -> Option<String> {
    let c = config.unmarked().attributes()?;
    let p = planned.unmarked().attributes()?;
    for (name, a) in &block.attributes {
        let Some(cv) = c.get(name) else { continue };
        if cv.is_null() || (a.computed && !a.optional && !a.required) {
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
        run_sync(async move { inner.plan(t, p, c).await })
    }

    async fn plan_async(
        &self,
        type_: &str,
        prior: Option<&Value>,
        config: &Value,
    ) -> ProviderResult<Planned> {
        self.inner
            .clone()
            .plan(type_.to_string(), prior.cloned(), config.clone())
            .await
    }

    async fn apply(&self, request: ApplyRequest) -> ApplyResponse {
        self.inner.clone().apply(request).await
    }

    async fn read(&self, type_: &str, state: &Value) -> ProviderResult<Option<Value>> {
        self.inner
            .clone()
            .read(type_.to_string(), state.clone())
            .await
    }

    async fn read_data(&self, type_: &str, config: &Value) -> ProviderResult<Value> {
        self.inner
            .clone()
            .read_data(type_.to_string(), config.clone())
            .await
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
