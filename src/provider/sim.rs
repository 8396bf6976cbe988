//! The `sim` provider: a simulated cloud in a directory, for tests, demos and benchmarks.
//!
//! It implements `shared/sim-provider.md` to the letter, and makes the same choices as the
//! reference implementation (`oracle/provider/sim_provider.py`) where that contract is silent,
//! so the same configuration on the same store gives the same store, ids and call log under
//! Terraform (with the oracle plugin) and under Cairn.
//!
//! ```hcl
//! provider "sim" {
//!   store      = "./sim-store"   # default: env SIM_STORE, else sim-store in the working dir
//!   region     = "local"         # default "local"
//!   latency_ms = 0               # default: env SIM_LATENCY_MS, else 0
//!   fail       = ["create:b"]    # default: env SIM_FAIL (comma-separated), else none
//! }
//! resource "sim_thing" "x" { name = "a"  value = "1" }   # id "a-<n>", out "a/1" (or "a/-")
//! data "sim_lookup" "y"    { key = "k1" }                # result: ext table, else a thing's out
//! ```
//!
//! Store layout: `things/<region>/<id>.json` (one line of JSON, keys `id, name, value, out,
//! token`, replaced atomically by writing a temporary file and renaming it),
//! `ext/<region>.json` (lookup tables written by tests), `calls.jsonl` (one line per call that
//! touched the store, keys `op, type, name, id, region, ok`). Both JSON forms are written
//! byte for byte as Python's `json.dumps` writes them (`", "` and `": "` separators, non-ASCII
//! escaped), like the oracle, so stores written by either tool compare equal.
//!
//! Behaviour, including the choices where the contract is silent (all shared with the oracle):
//! - Every call that touches the store appends exactly one line, failed calls included
//!   (`"ok": false`). A read that finds the file missing is a success (the object is gone); so
//!   is a delete of a missing object. `configure` lines have `"type": "sim"`, `"name"`: the
//!   region, `"id": null`; `lookup` lines `"type": "sim_lookup"`, `"name"`: the key.
//! - Latency is slept first, outside the store lock, on a blocking-pool thread (precise to
//!   microseconds, where tokio's timer rounds up to the next millisecond), so concurrent
//!   calls sleep together; `configure` does not sleep. Failure injection is checked after the
//!   sleep, under the lock. `OP:NAME:after` reports the same text as `OP:NAME`
//!   (`sim: injected failure for OP NAME`) after doing the work: a create returns the object it
//!   wrote along with the error, an update the rewritten object, a delete reports the object
//!   gone; a failed read or lookup is an error.
//! - Ids: `<name>-<n>` with `n` = 1 + the highest `n` among `create` lines of `calls.jsonl` for
//!   that name and region that carry an id (successful or `:after`-failed creates), skipping ids
//!   whose file exists. The scan is incremental (only new bytes of the log are parsed).
//! - An update of an object whose file is gone fails with `sim: object <id> not found in region
//!   <region>` (the object is reported as it was: state keeps it, the next refresh finds it
//!   gone). An update rewrites `value` and `out`, computing `out` from the `name` in the file.
//! - Lookup order: the region's ext table (non-string values JSON-encoded), then the thing whose
//!   id is the key, then the thing whose name is the key (the highest `n` if several), else
//!   `sim_lookup: no object for key "<key>"`.
//! - Create records the engine's create token in the object's `token` (an empty token is
//!   written as `null`, as the oracle writes every object); `find_by_token` scans
//!   the region's objects for it. It sleeps the latency, takes the lock, and — not being one of
//!   the contract's ops — is neither logged nor subject to failure injection.
//! - `diff_config` compares the effective settings (defaults and environment applied): a
//!   changed `store` or `region` is a replacement (an unknown one too: it may change), a changed
//!   `latency_ms` or `fail` an in-place update.
//! - `stop` interrupts calls still sleeping their latency (they fail with
//!   `sim: interrupted before the call was made` and touch nothing); calls already past the
//!   sleep finish.
//! - The `sim_thing` state is `{id, name, value, out}` (the token lives only in the store). A
//!   file edited by hand to hold a non-string `value` or `out` reads back as its JSON text.

use super::host::Host;
use super::schema_util::{self, get_str, need_str, TypeSchema};
use super::{
    ApplyRequest, ApplyResponse, ConfigDiff, Configured, Planned, Provider, ProviderError,
    ProviderResult,
};
use crate::diag::{Diagnostic, Diagnostics};
use crate::schema::ProviderSchema;
use crate::value::{Type, Value};
use async_trait::async_trait;
use serde_json::Value as J;
use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const PACKAGE: &str = "sim";
const THING: &str = "sim_thing";
const LOOKUP: &str = "sim_lookup";
const DEFAULT_REGION: &str = "local";
const OPS: [&str; 6] = ["create", "read", "update", "delete", "lookup", "configure"];

/// The `sim` provider package.
pub(crate) struct SimProvider {
    host: Host,
    schema: ProviderSchema,
    config: TypeSchema,
    thing: TypeSchema,
    lookup: TypeSchema,
}

impl SimProvider {
    pub(crate) fn new(host: Host) -> SimProvider {
        let config = TypeSchema::new("The sim provider: a simulated cloud in a directory.")
            .optional(
                "store",
                Type::String,
                "The store directory (default: env SIM_STORE, else ./sim-store).",
            )
            .optional(
                "region",
                Type::String,
                "The region objects live in (default \"local\").",
            )
            .optional(
                "latency_ms",
                Type::Number,
                "Milliseconds every store call sleeps first (default: env SIM_LATENCY_MS).",
            )
            .optional(
                "fail",
                Type::list(Type::String),
                "Failure injection: OP:NAME or OP:NAME:after (default: env SIM_FAIL).",
            );
        let thing = TypeSchema::new("An object in the sim store.")
            .required("name", Type::String, "The object's name.")
            .force_new()
            .optional("value", Type::String, "The object's value.")
            .computed("id", Type::String, "<name>-<n>.")
            .computed("out", Type::String, "\"<name>/<value>\", or \"<name>/-\".")
            .changes_with(&["value"]);
        let lookup = TypeSchema::new("Looks a key up in the sim store.")
            .required("key", Type::String, "The key to look up.")
            .computed("result", Type::String, "What the key names.");
        let schema = ProviderSchema {
            provider: config.block.clone(),
            resources: [(THING.to_string(), thing.block.clone())].into(),
            data_sources: [(LOOKUP.to_string(), lookup.block.clone())].into(),
            ephemeral_resources: Default::default(),
        };
        SimProvider {
            host,
            schema,
            config,
            thing,
            lookup,
        }
    }

    /// The effective settings of a configuration: unset (or unknown) arguments take their
    /// environment defaults.
    fn settings(&self, config: &Value) -> ProviderResult<Settings> {
        let c = self.config.conform(config)?;
        let store = match get_str(&c, "store") {
            Some(s) => self.host.resolve(s),
            None => match self.host.var("SIM_STORE") {
                Some(s) => self.host.resolve(s),
                None => self.host.cwd.join("sim-store"),
            },
        };
        let region = get_str(&c, "region").unwrap_or(DEFAULT_REGION).to_string();
        let latency_ms = match c["latency_ms"].as_number() {
            Some(n) => n.to_f64(),
            None => match self.host.var("SIM_LATENCY_MS") {
                Some(s) => s.trim().parse::<f64>().map_err(|_| {
                    ProviderError(format!("sim: SIM_LATENCY_MS must be a number, got {s:?}"))
                })?,
                None => 0.0,
            },
        };
        if latency_ms < 0.0 {
            return Err("latency_ms must be >= 0".into());
        }
        let latency = Duration::try_from_secs_f64(latency_ms / 1000.0)
            .map_err(|_| ProviderError("sim: latency_ms is too large".into()))?;
        let entries: Vec<String> = match c["fail"].elements() {
            Some(list) => list
                .iter()
                .filter_map(|e| e.as_str().map(str::to_string))
                .collect(),
            None => self
                .host
                .var("SIM_FAIL")
                .unwrap_or("")
                .split(',')
                .map(str::trim)
                .filter(|e| !e.is_empty())
                .map(str::to_string)
                .collect(),
        };
        Ok(Settings {
            store,
            region,
            latency,
            fail: entries.iter().filter_map(|e| FailRule::parse(e)).collect(),
        })
    }
}

/// A provider configuration with its defaults applied.
#[derive(Clone, Debug, PartialEq)]
struct Settings {
    store: PathBuf,
    region: String,
    latency: Duration,
    fail: Vec<FailRule>,
}

/// One failure-injection entry: `OP:NAME` or `OP:NAME:after`.
#[derive(Clone, Debug, PartialEq, Eq)]
struct FailRule {
    op: String,
    name: String,
    after: bool,
}

impl FailRule {
    /// As the oracle parses them: a trailing `:after` (with at least 3 parts) marks "after";
    /// NAME is everything between OP and that (so it may contain colons).
    fn parse(entry: &str) -> Option<FailRule> {
        let mut parts: Vec<&str> = entry.split(':').collect();
        let after = parts.len() >= 3 && parts.last() == Some(&"after");
        if after {
            parts.pop();
        }
        if parts.len() < 2 || !OPS.contains(&parts[0]) {
            return None;
        }
        Some(FailRule {
            op: parts[0].to_string(),
            name: parts[1..].join(":"),
            after,
        })
    }

    fn matches(&self, op: &str, name: Option<&str>, after: bool) -> bool {
        self.op == op && self.after == after && (self.name == "*" || Some(&*self.name) == name)
    }
}

#[async_trait]
impl Provider for SimProvider {
    fn package(&self) -> &str {
        PACKAGE
    }

    fn schema(&self) -> &ProviderSchema {
        &self.schema
    }

    fn check_config(&self, config: &Value) -> Diagnostics {
        let mut diags = self.config.check(config);
        let Ok(c) = self.config.conform(config) else {
            return diags;
        };
        if c["latency_ms"]
            .as_number()
            .is_some_and(|n| n.to_f64() < 0.0)
        {
            diags.push(Diagnostic::error(
                "latency_ms must be >= 0",
                "Set latency_ms to 0 or a positive number of milliseconds.",
            ));
        }
        for entry in c["fail"].elements().unwrap_or_default() {
            if let Some(e) = entry.as_str().filter(|e| FailRule::parse(e).is_none()) {
                diags.push(Diagnostic::error(
                    format!(
                        "sim: bad fail entry {e:?}: expected OP:NAME or OP:NAME:after with OP \
                         one of create, read, update, delete, lookup, configure"
                    ),
                    "Fix the entry in the provider's fail argument.",
                ));
            }
        }
        diags
    }

    fn diff_config(&self, old: &Value, new: &Value) -> ConfigDiff {
        if new.is_unknown() {
            return ConfigDiff::Replace(vec!["store".into(), "region".into()]);
        }
        let unknown = |name: &str| new.get(name).is_some_and(|v| !v.is_wholly_known());
        let (old_s, new_s) = match (self.settings(old), self.settings(new)) {
            (Ok(o), Ok(n)) => (o, n),
            // An unreadable configuration: compare what was written.
            _ if schema_util::same(old, new) => return ConfigDiff::NoChange,
            _ => return ConfigDiff::Update,
        };
        let mut replace = Vec::new();
        if unknown("store") || old_s.store != new_s.store {
            replace.push("store".to_string());
        }
        if unknown("region") || old_s.region != new_s.region {
            replace.push("region".to_string());
        }
        if !replace.is_empty() {
            ConfigDiff::Replace(replace)
        } else if unknown("latency_ms")
            || unknown("fail")
            || old_s.latency != new_s.latency
            || old_s.fail != new_s.fail
        {
            ConfigDiff::Update
        } else {
            ConfigDiff::NoChange
        }
    }

    async fn configure(&self, config: &Value) -> ProviderResult<Arc<dyn Configured>> {
        let s = self.settings(config)?;
        let (stop_tx, _) = tokio::sync::watch::channel(false);
        let instance = SimInstance {
            store: Arc::new(Store::new(s.store)),
            region: s.region.clone(),
            latency: s.latency,
            fail: Arc::new(s.fail),
            thing: self.thing.clone(),
            lookup: self.lookup.clone(),
            stop: stop_tx,
        };
        instance
            .call("configure", PACKAGE, Some(s.region), None, |_| {
                Ok(((), None))
            })
            .await
            .map_err(|e| ProviderError(e.message().to_string()))?;
        Ok(Arc::new(instance))
    }
}

/// A configured `sim` instance: one store, one region.
pub(crate) struct SimInstance {
    store: Arc<Store>,
    region: String,
    latency: Duration,
    fail: Arc<Vec<FailRule>>,
    thing: TypeSchema,
    lookup: TypeSchema,
    /// Set by `stop`: wakes calls still sleeping their latency so they give up early.
    stop: tokio::sync::watch::Sender<bool>,
}

/// Why a store call failed.
enum CallError<T> {
    /// Nothing was changed (or the work itself failed).
    Failed(String),
    /// An `:after` injection: the work was done, and here is its result.
    After(String, T),
}

impl<T> CallError<T> {
    fn message(&self) -> &str {
        match self {
            CallError::Failed(m) | CallError::After(m, _) => m,
        }
    }
}

/// What a unit of store work returns: its result and the id to log (when the work made one).
type Work<T> = Result<(T, Option<String>), String>;

impl SimInstance {
    /// Sleeps the latency (unless it is a configure), interruptible by `stop`.
    async fn sleep(&self, op: &str) -> Result<(), String> {
        if op == "configure" || self.latency.is_zero() {
            return Ok(());
        }
        let mut stop = self.stop.subscribe();
        if *stop.borrow() {
            return Err("sim: interrupted before the call was made".into());
        }
        // A blocking-pool thread sleeps, not the runtime's timer: tokio's timer has millisecond
        // granularity and rounds every deadline up, which made a 20 ms latency about 22 ms; a
        // thread's sleep overshoots by microseconds, so the model's latency is what it says.
        let latency = self.latency;
        let slept = tokio::task::spawn_blocking(move || std::thread::sleep(latency));
        tokio::select! {
            r = slept => r.map_err(|e| format!("sim: the latency timer failed: {e}")),
            _ = stop.changed() => Err("sim: interrupted before the call was made".into()),
        }
    }

    /// The one path every logged call takes: sleep, lock, check `fail` (before), do the work,
    /// check `fail` (after), append the call's line, unlock.
    async fn call<T: Send + 'static>(
        &self,
        op: &'static str,
        type_: &str,
        name: Option<String>,
        id: Option<String>,
        work: impl FnOnce(&Store) -> Work<T> + Send + 'static,
    ) -> Result<T, CallError<T>> {
        self.sleep(op).await.map_err(CallError::Failed)?;
        let store = self.store.clone();
        let fail = self.fail.clone();
        let region = self.region.clone();
        let type_ = type_.to_string();
        // The critical section is blocking file I/O and `flock`, which may wait for another
        // process; it runs on tokio's blocking pool so async workers keep running other calls
        // (and their latency sleeps) meanwhile. It is short: a few small reads and writes.
        let task = tokio::task::spawn_blocking(move || {
            let lock = store.lock().map_err(CallError::Failed)?;
            let log = |id: &Option<String>, ok: bool| -> Result<(), String> {
                lock.append(&log_line(
                    op,
                    &type_,
                    name.as_deref(),
                    id.as_deref(),
                    &region,
                    ok,
                ))
            };
            let injected = |after: bool| {
                fail.iter()
                    .any(|r| r.matches(op, name.as_deref(), after))
                    .then(|| {
                        format!(
                            "sim: injected failure for {op} {}",
                            name.as_deref().unwrap_or("None")
                        )
                    })
            };
            if let Some(msg) = injected(false) {
                log(&id, false).map_err(CallError::Failed)?;
                return Err(CallError::Failed(msg));
            }
            match work(&store) {
                Err(msg) => {
                    log(&id, false).map_err(CallError::Failed)?;
                    Err(CallError::Failed(msg))
                }
                Ok((result, new_id)) => {
                    let id = new_id.or(id);
                    if let Some(msg) = injected(true) {
                        log(&id, false).map_err(CallError::Failed)?;
                        return Err(CallError::After(msg, result));
                    }
                    log(&id, true).map_err(CallError::Failed)?;
                    Ok(result)
                }
            }
        });
        task.await
            .unwrap_or_else(|e| Err(CallError::Failed(format!("sim: store call failed: {e}"))))
    }

    async fn create(&self, type_: &str, planned: &Value, token: &str) -> ApplyResponse {
        let c = match self.thing.conform(planned) {
            Ok(c) => c,
            Err(e) => return failed(None, e),
        };
        let name = match need_str(&c, "name") {
            Ok(n) => n.to_string(),
            Err(e) => return failed(None, e),
        };
        let value = get_str(&c, "value").map(str::to_string);
        let (region, token) = (self.region.clone(), token.to_string());
        let n = name.clone();
        let r = self
            .call("create", type_, Some(name), None, move |store| {
                let id = store.new_id(&region, &n)?;
                let obj = Thing {
                    out: out(&n, value.as_deref()),
                    id: id.clone(),
                    name: Some(n),
                    value,
                    token: Some(token).filter(|t| !t.is_empty()),
                };
                store.put(&region, &obj)?;
                Ok((obj.state(), Some(id)))
            })
            .await;
        match r {
            Ok(state) => ApplyResponse {
                new_state: Some(state),
                error: None,
            },
            Err(CallError::Failed(m)) => failed(None, m.into()),
            Err(CallError::After(m, state)) => failed(Some(state), m.into()),
        }
    }

    async fn update(&self, type_: &str, prior: &Value, planned: &Value) -> ApplyResponse {
        let (p, c) = match (self.thing.conform(prior), self.thing.conform(planned)) {
            (Ok(p), Ok(c)) => (p, c),
            (Err(e), _) | (_, Err(e)) => return failed(Some(prior.clone()), e),
        };
        let id = match need_str(&p, "id") {
            Ok(id) => id.to_string(),
            Err(e) => return failed(Some(prior.clone()), e),
        };
        let name = get_str(&p, "name").map(str::to_string);
        let value = get_str(&c, "value").map(str::to_string);
        let region = self.region.clone();
        let oid = id.clone();
        let r = self
            .call("update", type_, name, Some(id), move |store| {
                let Some(mut obj) = store.get(&region, &oid)? else {
                    return Err(format!("sim: object {oid} not found in region {region}"));
                };
                obj.out = out(obj.name.as_deref().unwrap_or("None"), value.as_deref());
                obj.value = value;
                obj.id = oid;
                store.put(&region, &obj)?;
                Ok((obj.state(), None))
            })
            .await;
        match r {
            Ok(state) => ApplyResponse {
                new_state: Some(state),
                error: None,
            },
            Err(CallError::Failed(m)) => failed(Some(prior.clone()), m.into()),
            Err(CallError::After(m, state)) => failed(Some(state), m.into()),
        }
    }

    async fn delete(&self, type_: &str, prior: &Value) -> ApplyResponse {
        let p = match self.thing.conform(prior) {
            Ok(p) => p,
            Err(e) => return failed(Some(prior.clone()), e),
        };
        let id = match need_str(&p, "id") {
            Ok(id) => id.to_string(),
            Err(e) => return failed(Some(prior.clone()), e),
        };
        let name = get_str(&p, "name").map(str::to_string);
        let (region, oid) = (self.region.clone(), id.clone());
        let r = self
            .call("delete", type_, name, Some(id), move |store| {
                store.remove(&region, &oid).map(|_| ((), None))
            })
            .await;
        match r {
            Ok(()) => ApplyResponse {
                new_state: None,
                error: None,
            },
            Err(CallError::Failed(m)) => failed(Some(prior.clone()), m.into()),
            Err(CallError::After(m, ())) => failed(None, m.into()),
        }
    }
}

fn failed(state: Option<Value>, e: ProviderError) -> ApplyResponse {
    ApplyResponse {
        new_state: state,
        error: Some(e),
    }
}

fn out(name: &str, value: Option<&str>) -> Option<String> {
    Some(format!("{name}/{}", value.unwrap_or("-")))
}

#[async_trait]
impl Configured for SimInstance {
    fn plan(&self, type_: &str, prior: Option<&Value>, config: &Value) -> ProviderResult<Planned> {
        match type_ {
            THING => self.thing.plan(prior, config),
            _ => Err(schema_util::unknown_type(PACKAGE, "resource", type_)),
        }
    }

    async fn apply(&self, request: ApplyRequest) -> ApplyResponse {
        match &request {
            ApplyRequest::Create { type_, .. }
            | ApplyRequest::Update { type_, .. }
            | ApplyRequest::Delete { type_, .. }
                if type_ != THING =>
            {
                failed(None, schema_util::unknown_type(PACKAGE, "resource", type_))
            }
            ApplyRequest::Create {
                type_,
                planned,
                token,
            } => self.create(type_, planned, token).await,
            ApplyRequest::Update {
                type_,
                prior,
                planned,
            } => self.update(type_, prior, planned).await,
            ApplyRequest::Delete { type_, prior } => self.delete(type_, prior).await,
        }
    }

    /// The sim contract has no import, and the Python sim (on the `tf` framework) refuses it
    /// in that framework's words; so does the built-in one.
    async fn import(&self, type_: &str, _id: &str) -> ProviderResult<Vec<super::Imported>> {
        let summary = format!("{type_} does not support resource import");
        let detail = format!("This provider has not implemented import_ for {type_}");
        Err(ProviderError {
            message: format!("{summary}: {detail}"),
            diags: vec![super::ProviderDiag {
                error: true,
                summary,
                detail,
                path: Vec::new(),
            }],
        })
    }

    async fn read(&self, type_: &str, state: &Value) -> ProviderResult<Option<Value>> {
        if type_ != THING {
            return Err(schema_util::unknown_type(PACKAGE, "resource", type_));
        }
        let s = self.thing.conform(state)?;
        let id = need_str(&s, "id")?.to_string();
        let name = get_str(&s, "name").map(str::to_string);
        let (region, oid) = (self.region.clone(), id.clone());
        self.call("read", type_, name, Some(id), move |store| {
            let obj = store.get(&region, &oid)?;
            Ok((
                obj.map(|mut o| {
                    o.id = oid;
                    o.state()
                }),
                None,
            ))
        })
        .await
        .map_err(|e| ProviderError(e.message().to_string()))
    }

    async fn read_data(&self, type_: &str, config: &Value) -> ProviderResult<Value> {
        if type_ != LOOKUP {
            return Err(schema_util::unknown_type(PACKAGE, "data source", type_));
        }
        let c = self.lookup.conform(config)?;
        let key = need_str(&c, "key")?.to_string();
        let (region, k) = (self.region.clone(), key.clone());
        let result = self
            .call("lookup", LOOKUP, Some(key), None, move |store| {
                Ok((store.lookup(&region, &k)?, None))
            })
            .await
            .map_err(|e| ProviderError(e.message().to_string()))?;
        Ok(schema_util::data_result(
            &self.lookup,
            &c,
            [("result".to_string(), Value::string(result))].into(),
        ))
    }

    async fn find_by_token(&self, type_: &str, token: &str) -> ProviderResult<Option<Value>> {
        if type_ != THING {
            return Err(schema_util::unknown_type(PACKAGE, "resource", type_));
        }
        self.sleep("find_by_token").await?;
        let (store, region, token) = (self.store.clone(), self.region.clone(), token.to_string());
        // Blocking pool for the same reason as `call`.
        tokio::task::spawn_blocking(move || {
            let _lock = store.lock()?;
            Ok(store
                .things(&region)
                .into_iter()
                .find(|t| t.token.as_deref() == Some(&*token))
                .map(|t| t.state()))
        })
        .await
        .unwrap_or_else(|e| Err(format!("sim: store call failed: {e}")))
        .map_err(ProviderError)
    }

    async fn stop(&self) {
        self.stop.send_replace(true);
    }
}

// ------------------------------------------------------------------------------------------
// The store.

/// An object file's content. Fields missing or non-string in a hand-edited file read as null
/// or as their JSON text.
#[derive(Clone, Debug, PartialEq)]
struct Thing {
    id: String,
    name: Option<String>,
    value: Option<String>,
    out: Option<String>,
    token: Option<String>,
}

impl Thing {
    fn from_json(j: &J) -> Option<Thing> {
        let field = |k: &str| match j.get(k) {
            None | Some(J::Null) => None,
            Some(J::String(s)) => Some(s.clone()),
            Some(other) => Some(py_dumps(other)),
        };
        j.as_object()?;
        Some(Thing {
            id: field("id").unwrap_or_default(),
            name: field("name"),
            value: field("value"),
            out: field("out"),
            token: field("token"),
        })
    }

    /// The file's one line (without the newline), keys in the contract's order.
    fn to_line(&self) -> String {
        let s = |v: &Option<String>| v.clone().map(J::String).unwrap_or(J::Null);
        let mut m = serde_json::Map::new();
        m.insert("id".into(), J::String(self.id.clone()));
        m.insert("name".into(), s(&self.name));
        m.insert("value".into(), s(&self.value));
        m.insert("out".into(), s(&self.out));
        m.insert("token".into(), s(&self.token));
        py_dumps(&J::Object(m))
    }

    /// The `sim_thing` state.
    fn state(&self) -> Value {
        let s = |v: &Option<String>| {
            v.clone()
                .map(Value::String)
                .unwrap_or(Value::Null(Type::String))
        };
        Value::object([
            ("id", Value::string(&self.id)),
            ("name", s(&self.name)),
            ("value", s(&self.value)),
            ("out", s(&self.out)),
        ])
    }

    /// The `n` of `<name>-<n>` ids (0 when the id has no such suffix).
    fn n(&self) -> u64 {
        id_number(&self.id).map(|(_, n)| n).unwrap_or(0)
    }
}

/// Splits `<prefix>-<n>` as the oracle's `(.*)-([0-9]+)` does.
fn id_number(id: &str) -> Option<(&str, u64)> {
    let (prefix, n) = id.rsplit_once('-')?;
    if n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((prefix, n.parse().ok()?))
}

/// The store directory, and the incremental id-numbering cache of its call log.
struct Store {
    root: PathBuf,
    calls: PathBuf,
    /// Highest `n` per (region, name) among the create lines parsed so far. A std `Mutex`:
    /// only touched inside the blocking critical section, never across an `.await`.
    ids: Mutex<IdCache>,
}

#[derive(Default)]
struct IdCache {
    inode: u64,
    offset: u64,
    best: HashMap<(String, String), u64>,
}

/// Unique suffixes for temporary files written by this process.
static TMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// `flock(calls.jsonl)` held for one call; the descriptor also appends the call's line.
struct Locked {
    file: File,
}

impl Locked {
    /// Appends one line with a single `write(2)` on the `O_APPEND` descriptor.
    fn append(&self, line: &str) -> Result<(), String> {
        let bytes = format!("{line}\n").into_bytes();
        (&self.file)
            .write_all(&bytes)
            .map_err(|e| format!("sim: cannot append to the call log: {e}"))
    }
}

impl Drop for Locked {
    fn drop(&mut self) {
        // Closing the descriptor would release the lock too; unlocking first is explicit.
        // SAFETY: flock on a descriptor we own; no memory is involved.
        unsafe {
            libc::flock(std::os::fd::AsRawFd::as_raw_fd(&self.file), libc::LOCK_UN);
        }
    }
}

impl Store {
    fn new(root: PathBuf) -> Store {
        Store {
            calls: root.join("calls.jsonl"),
            root,
            ids: Mutex::new(IdCache::default()),
        }
    }

    fn thing_path(&self, region: &str, id: &str) -> PathBuf {
        self.root
            .join("things")
            .join(region)
            .join(format!("{id}.json"))
    }

    fn ext_path(&self, region: &str) -> PathBuf {
        self.root.join("ext").join(format!("{region}.json"))
    }

    /// Creates the store if needed, opens the call log for appending and takes its lock
    /// (blocking; see `SimInstance::call`).
    fn lock(&self) -> Result<Locked, String> {
        let ctx =
            |e: std::io::Error| format!("sim: cannot open store {}: {e}", self.root.display());
        std::fs::create_dir_all(&self.root).map_err(ctx)?;
        let file = OpenOptions::new()
            .append(true)
            .create(true)
            .open(&self.calls)
            .map_err(ctx)?;
        let fd = std::os::fd::AsRawFd::as_raw_fd(&file);
        loop {
            // SAFETY: flock on a descriptor we own; no memory is involved.
            if unsafe { libc::flock(fd, libc::LOCK_EX) } == 0 {
                return Ok(Locked { file });
            }
            let e = std::io::Error::last_os_error();
            if e.kind() != std::io::ErrorKind::Interrupted {
                return Err(ctx(e));
            }
        }
    }

    /// Highest `n` per (region, name), parsing only the log's bytes not seen before (whole
    /// lines only). Called under the lock.
    fn scan_ids(&self, region: &str, name: &str) -> Result<u64, String> {
        use std::os::unix::fs::MetadataExt;
        let mut cache = self.ids.lock().unwrap_or_else(|p| p.into_inner());
        let ctx = |e: std::io::Error| format!("sim: cannot read the call log: {e}");
        let mut f = File::open(&self.calls).map_err(ctx)?;
        let meta = f.metadata().map_err(ctx)?;
        if cache.inode != meta.ino() || meta.len() < cache.offset {
            *cache = IdCache {
                inode: meta.ino(),
                ..IdCache::default()
            };
        }
        if meta.len() > cache.offset {
            f.seek(SeekFrom::Start(cache.offset)).map_err(ctx)?;
            let mut data = Vec::new();
            f.take(meta.len() - cache.offset)
                .read_to_end(&mut data)
                .map_err(ctx)?;
            let end = data.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
            for line in data[..end].split(|&b| b == b'\n') {
                let Ok(rec) = serde_json::from_slice::<J>(line) else {
                    continue;
                };
                let (Some("create"), Some(id)) = (
                    rec.get("op").and_then(J::as_str),
                    rec.get("id").and_then(J::as_str),
                ) else {
                    continue;
                };
                let rec_name = rec.get("name").and_then(J::as_str);
                if let Some((prefix, n)) = id_number(id).filter(|(p, _)| Some(*p) == rec_name) {
                    let key = (
                        rec.get("region")
                            .and_then(J::as_str)
                            .unwrap_or_default()
                            .to_string(),
                        prefix.to_string(),
                    );
                    let best = cache.best.entry(key).or_insert(0);
                    *best = (*best).max(n);
                }
            }
            cache.offset += end as u64;
        }
        Ok(cache
            .best
            .get(&(region.to_string(), name.to_string()))
            .copied()
            .unwrap_or(0))
    }

    fn new_id(&self, region: &str, name: &str) -> Result<String, String> {
        let mut n = self.scan_ids(region, name)? + 1;
        while self.thing_path(region, &format!("{name}-{n}")).exists() {
            n += 1;
        }
        Ok(format!("{name}-{n}"))
    }

    fn get(&self, region: &str, id: &str) -> Result<Option<Thing>, String> {
        let path = self.thing_path(region, id);
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(format!("sim: cannot read {}: {e}", path.display())),
        };
        let bad = |e: String| format!("sim: object file {} is not valid JSON: {e}", path.display());
        let j: J = serde_json::from_str(&text).map_err(|e| bad(e.to_string()))?;
        Thing::from_json(&j)
            .map(Some)
            .ok_or_else(|| bad("not an object".into()))
    }

    fn put(&self, region: &str, obj: &Thing) -> Result<(), String> {
        let path = self.thing_path(region, &obj.id);
        let dir = path.parent().unwrap_or(Path::new("."));
        let ctx = |e: std::io::Error| format!("sim: cannot write {}: {e}", path.display());
        std::fs::create_dir_all(dir).map_err(ctx)?;
        let tmp = dir.join(format!(
            ".{}.json.tmp.{}.{}",
            obj.id,
            std::process::id(),
            TMP_COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::write(&tmp, format!("{}\n", obj.to_line())).map_err(ctx)?;
        std::fs::rename(&tmp, &path).map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            ctx(e)
        })
    }

    /// Removes an object; `false` when it was already gone.
    fn remove(&self, region: &str, id: &str) -> Result<bool, String> {
        let path = self.thing_path(region, id);
        match std::fs::remove_file(&path) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(format!("sim: cannot delete {}: {e}", path.display())),
        }
    }

    /// Every readable object of a region (hidden temporary files and bad files skipped).
    fn things(&self, region: &str) -> Vec<Thing> {
        let Ok(dir) = std::fs::read_dir(self.root.join("things").join(region)) else {
            return Vec::new();
        };
        let mut out: Vec<Thing> = dir
            .filter_map(Result::ok)
            .filter(|e| {
                let n = e.file_name();
                let n = n.to_string_lossy();
                !n.starts_with('.') && n.ends_with(".json")
            })
            .filter_map(|e| std::fs::read_to_string(e.path()).ok())
            .filter_map(|t| serde_json::from_str::<J>(&t).ok())
            .filter_map(|j| Thing::from_json(&j))
            .collect();
        out.sort_by(|a, b| a.id.cmp(&b.id));
        out
    }

    fn ext(&self, region: &str) -> Result<serde_json::Map<String, J>, String> {
        let path = self.ext_path(region);
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Default::default()),
            Err(e) => return Err(format!("sim: cannot read {}: {e}", path.display())),
        };
        match serde_json::from_str::<J>(&text) {
            Ok(J::Object(m)) => Ok(m),
            Ok(_) => Err(format!(
                "sim: lookup table {} is not a JSON object",
                path.display()
            )),
            Err(e) => Err(format!(
                "sim: lookup table {} is not valid JSON: {e}",
                path.display()
            )),
        }
    }

    /// The lookup order of the contract: ext table, thing by id, thing by name (highest n).
    fn lookup(&self, region: &str, key: &str) -> Result<String, String> {
        if let Some(v) = self.ext(region)?.get(key) {
            return Ok(match v {
                J::String(s) => s.clone(),
                other => py_dumps(other),
            });
        }
        // Fast path: the object whose file is named after the key (ids are file names).
        if let Some(t) = self.get(region, key).ok().flatten().filter(|t| t.id == key) {
            return Ok(t.out.unwrap_or_else(|| "None".into()));
        }
        let things = self.things(region);
        let found = things.iter().find(|t| t.id == key).or_else(|| {
            things
                .iter()
                .filter(|t| t.name.as_deref() == Some(key))
                .max_by_key(|t| t.n())
        });
        match found {
            Some(t) => Ok(t.out.clone().unwrap_or_else(|| "None".into())),
            None => Err(format!("sim_lookup: no object for key \"{key}\"")),
        }
    }
}

/// One `calls.jsonl` line (without the newline).
fn log_line(
    op: &str,
    type_: &str,
    name: Option<&str>,
    id: Option<&str>,
    region: &str,
    ok: bool,
) -> String {
    let s = |v: Option<&str>| v.map(|s| J::String(s.to_string())).unwrap_or(J::Null);
    let mut m = serde_json::Map::new();
    m.insert("op".into(), J::String(op.into()));
    m.insert("type".into(), J::String(type_.into()));
    m.insert("name".into(), s(name));
    m.insert("id".into(), s(id));
    m.insert("region".into(), J::String(region.into()));
    m.insert("ok".into(), J::Bool(ok));
    py_dumps(&J::Object(m))
}

/// JSON as Python's `json.dumps` writes it by default: `", "` and `": "` separators, keys in
/// insertion order, every non-ASCII character escaped as `\uXXXX` (surrogate pairs beyond the
/// BMP), lowercase hex.
pub(crate) fn py_dumps(j: &J) -> String {
    fn string(s: &str, out: &mut String) {
        out.push('"');
        for c in s.chars() {
            match c {
                '"' => out.push_str("\\\""),
                '\\' => out.push_str("\\\\"),
                '\n' => out.push_str("\\n"),
                '\r' => out.push_str("\\r"),
                '\t' => out.push_str("\\t"),
                '\u{8}' => out.push_str("\\b"),
                '\u{c}' => out.push_str("\\f"),
                c if (c as u32) < 0x20 || (c as u32) > 0x7e => {
                    let mut buf = [0u16; 2];
                    for unit in c.encode_utf16(&mut buf) {
                        out.push_str(&format!("\\u{unit:04x}"));
                    }
                }
                c => out.push(c),
            }
        }
        out.push('"');
    }
    fn walk(j: &J, out: &mut String) {
        match j {
            J::Null => out.push_str("null"),
            J::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            J::Number(n) => out.push_str(&n.to_string()),
            J::String(s) => string(s, out),
            J::Array(a) => {
                out.push('[');
                for (i, e) in a.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    walk(e, out);
                }
                out.push(']');
            }
            J::Object(m) => {
                out.push('{');
                for (i, (k, v)) in m.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    string(k, out);
                    out.push_str(": ");
                    walk(v, out);
                }
                out.push('}');
            }
        }
    }
    let mut out = String::new();
    walk(j, &mut out);
    out
}

#[cfg(test)]
#[path = "sim_tests.rs"]
mod tests;
