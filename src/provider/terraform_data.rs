//! The `terraform` provider: the `terraform_data` resource, as Terraform 1.11's built-in one.
//!
//! ```hcl
//! resource "terraform_data" "x" {
//!   input            = { any = "value" }   # optional, any type
//!   triggers_replace = [var.version]       # optional, any type; a change replaces
//! }
//! # terraform_data.x.output == input (after apply); terraform_data.x.id: a random UUID
//! ```
//!
//! Behaviour, after Terraform's `internal/builtin/providers/terraform/resource_data.go`:
//! - create: `id` unknown in the plan and a random UUID (8-4-4-4-12 lowercase hex, random
//!   bytes as `go-uuid` makes them) after apply; `output` unknown in the plan (null when
//!   `input` is null) and equal to `input` after apply;
//! - a change of `triggers_replace` replaces the object (new `id`);
//! - a change of `input` alone is an in-place update that makes `output` unknown until apply;
//! - read returns the state as it is (there is nothing outside Cairn to drift);
//! - delete forgets the object.
//!
//! `input`, `output` and `triggers_replace` are of type `any` (dynamic); their values keep the
//! types the configuration gave them.
//!
//! ## `data "terraform_remote_state"`
//!
//! Another configuration's root outputs, as Terraform's built-in data source:
//!
//! ```hcl
//! data "terraform_remote_state" "net" {
//!   backend  = "local"                        # or "pg", "s3"
//!   config   = { path = "../network/.cairn" } # a Cairn state directory, a configuration
//!                                             #   directory holding one, or a terraform.tfstate
//!   defaults = { vpc_id = "none" }            # used where the state has no such output
//! }
//! # data.terraform_remote_state.net.outputs.vpc_id
//! ```
//!
//! - `backend = "local"`: `config.path` (default `terraform.tfstate`, relative to the working
//!   directory) is a Terraform state file (outputs typed by the file's `type`s), or a Cairn
//!   state directory (or a directory holding `.cairn`), whose store — sled, or the PostgreSQL
//!   schema its `backend.json` names — is opened read-only, waiting up to 30 s for a writer.
//! - `backend = "pg"`: `config` takes the `pg` backend's arguments (`conn_str`, `schema_name`,
//!   or `PG_CONN_STR`/`PG_SCHEMA_NAME` from the environment) and reads that Cairn state.
//! - A state that does not exist is an error, "Unable to find remote state", as in Terraform.
//!   Outputs marked sensitive in the other state are not sensitive here (Terraform 1.11 drops
//!   the mark too); `defaults` fill in outputs the state lacks.
//! - `backend = "s3"`: `config` takes the `s3` backend's arguments (`endpoints = { s3 = … }`
//!   too) and the `AWS_*` environment; Cairn's log at the key when there is one, else the
//!   `terraform.tfstate` object Terraform keeps there.
//! - Other backends (gcs, remote, …) are refused with the list of what Cairn reads.
//! - `workspace` selects another workspace of that state: a Cairn state directory's
//!   `workspaces/NAME` (or its PostgreSQL schema `<schema>:NAME`), and for a tfstate file
//!   Terraform's `terraform.tfstate.d/NAME/terraform.tfstate` (`workspace_dir` in `config`).
//!
//! Reading another configuration's state is reading a system outside this configuration's
//! own state, like any data source: this is the one provider that uses the state crate.

use super::host::Host;
use super::schema_util::{self, TypeSchema};
use super::{
    ApplyRequest, ApplyResponse, Configured, Planned, Provider, ProviderError, ProviderResult,
};
use crate::schema::ProviderSchema;
use crate::value::ValueMap;
use crate::value::{Type, Value};
use async_trait::async_trait;
use rand::RngCore;
use std::sync::Arc;

const PACKAGE: &str = "terraform";
const DATA: &str = "terraform_data";
const REMOTE_STATE: &str = "terraform_remote_state";

/// The `terraform` provider package (no configuration).
pub(crate) struct TerraformProvider {
    host: Host,
    schema: ProviderSchema,
    data: TypeSchema,
    remote: TypeSchema,
}

impl TerraformProvider {
    pub(crate) fn new(host: Host) -> TerraformProvider {
        let data = TypeSchema::new("Stores a value and follows the resource lifecycle.")
            .optional(
                "input",
                Type::Dynamic,
                "A value to store; a change updates in place.",
            )
            .optional(
                "triggers_replace",
                Type::Dynamic,
                "A value whose change replaces the resource.",
            )
            .force_new()
            .computed("output", Type::Dynamic, "The value of input, after apply.")
            .changes_with(&["input"])
            .computed("id", Type::String, "A random UUID made at create.");
        let remote = TypeSchema::new("The root outputs of another configuration's state.")
            .required(
                "backend",
                Type::String,
                "Where the state is: local, pg or s3.",
            )
            .optional("config", Type::Dynamic, "The backend's arguments.")
            .optional(
                "defaults",
                Type::Dynamic,
                "Outputs to use where the state has none.",
            )
            .optional(
                "workspace",
                Type::String,
                "The workspace whose state to read.",
            )
            .computed("outputs", Type::Dynamic, "The state's root outputs.");
        TerraformProvider {
            host,
            schema: ProviderSchema {
                resources: [(DATA.to_string(), data.block.clone())].into(),
                data_sources: [(REMOTE_STATE.to_string(), remote.block.clone())].into(),
                ..ProviderSchema::default()
            },
            data,
            remote,
        }
    }
}

#[async_trait]
impl Provider for TerraformProvider {
    fn package(&self) -> &str {
        PACKAGE
    }
    fn schema(&self) -> &ProviderSchema {
        &self.schema
    }
    async fn configure(&self, _config: &Value) -> ProviderResult<Arc<dyn Configured>> {
        Ok(Arc::new(TerraformInstance {
            host: self.host.clone(),
            data: self.data.clone(),
            remote: self.remote.clone(),
        }))
    }
}

struct TerraformInstance {
    host: Host,
    data: TypeSchema,
    remote: TypeSchema,
}

/// A random UUID-shaped id, as hashicorp/go-uuid's `GenerateUUID` makes (random bytes, no
/// version bits).
pub(crate) fn random_uuid(rng: &mut impl RngCore) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut b = [0u8; 16];
    rng.fill_bytes(&mut b);
    let mut s = String::with_capacity(36);
    for (i, x) in b.iter().enumerate() {
        if matches!(i, 4 | 6 | 8 | 10) {
            s.push('-');
        }
        s.push(HEX[usize::from(x >> 4)] as char);
        s.push(HEX[usize::from(x & 15)] as char);
    }
    s
}

/// Reading the outputs of another configuration's state (`terraform_remote_state`).
mod remote {
    use super::super::ProviderError;
    use super::Host;
    use crate::value::Value;
    use cairn_state::backend_config::{PgConfig, PgSettings, S3Settings};
    use cairn_state::store::Store;
    use cairn_state::{OpenOptions, StateError};

    use std::path::Path;
    use std::time::Duration;

    use crate::value::ValueMap;
    type Outputs = ValueMap;

    fn err(msg: impl std::fmt::Display) -> ProviderError {
        ProviderError(format!("terraform_remote_state: {msg}"))
    }

    fn not_found() -> ProviderError {
        ProviderError(
            "Unable to find remote state: No stored state was found for the given workspace in \
             the given backend."
                .into(),
        )
    }

    fn arg_str<'a>(args: &'a ValueMap, key: &str) -> Result<Option<&'a str>, ProviderError> {
        match args.get(key).map(Value::unmarked) {
            None | Some(Value::Null(_)) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(Value::Bool(b)) => Ok(Some(if *b { "true" } else { "false" })),
            Some(other) => Err(err(format!(
                "config.{key} must be a string, not a {}",
                other.type_of()
            ))),
        }
    }

    pub(crate) fn read(
        host: &Host,
        backend: &str,
        args: &ValueMap,
        workspace: &str,
    ) -> Result<Outputs, ProviderError> {
        match backend {
            "local" => {
                for key in args.keys() {
                    if !matches!(key.as_str(), "path" | "workspace_dir") {
                        return Err(err(format!(
                            "the local backend has no argument \"{key}\" (it takes path)"
                        )));
                    }
                }
                let path = host
                    .cwd
                    .join(arg_str(args, "path")?.unwrap_or("terraform.tfstate"));
                if path.is_dir() {
                    let dir = if path.join(".cairn").is_dir() {
                        path.join(".cairn")
                    } else {
                        path
                    };
                    from_store(&cairn_state::workspace::dir(&dir, workspace), None)
                } else if workspace != "default" {
                    // Terraform's local backend keeps other workspaces' states apart.
                    let wsdir = arg_str(args, "workspace_dir")?.unwrap_or("terraform.tfstate.d");
                    from_tfstate_file(
                        &host
                            .cwd
                            .join(wsdir)
                            .join(workspace)
                            .join("terraform.tfstate"),
                    )
                } else {
                    from_tfstate_file(&path)
                }
            }
            "pg" => {
                let mut settings = PgSettings::default();
                for key in args.keys() {
                    if let Some(v) = arg_str(args, key)? {
                        settings.set(key, v).map_err(err)?;
                    }
                }
                let mut cfg = settings
                    .resolve(&|k: &str| host.var(k).map(str::to_string))
                    .map_err(err)?;
                cfg.schema =
                    cairn_state::workspace::pg_schema(&cfg.schema, workspace).map_err(err)?;
                // The pg log keeps its fault journal in a local directory; a reader never
                // writes one, so any existing directory does.
                from_store(&host.cwd, Some(cfg))
            }
            "s3" => from_s3(host, args, workspace),
            other => Err(err(format!(
                "Cairn reads the states of the \"local\" backend (a terraform.tfstate file or a \
                 Cairn state directory) and of the \"pg\" and \"s3\" backends, not \"{other}\"; export \
                 that state to a file (terraform state pull > FILE) and read it with \
                 backend = \"local\""
            ))),
        }
    }

    /// `backend = "s3"`: Cairn's log at the key if there is one, else the state object
    /// Terraform keeps there.
    fn from_s3(host: &Host, args: &ValueMap, workspace: &str) -> Result<Outputs, ProviderError> {
        let mut settings = S3Settings::default();
        for (key, value) in args {
            if let v @ (Value::Object(_)
            | Value::Map(_)
            | Value::List(_)
            | Value::Tuple(_)
            | Value::Set(_)) = value.unmarked()
            {
                // `endpoints = { s3 = "…" }`, `assume_role = { … }`, lists of files: as JSON,
                // which the backend takes apart, as from the backend block.
                settings.set(key, &v.to_json().to_string()).map_err(err)?;
                continue;
            }
            if let Some(v) = arg_str(args, key)? {
                settings.set(key, v).map_err(err)?;
            }
        }
        let cfg = settings
            .resolve(&|k: &str| host.var(k).map(str::to_string))
            .map_err(err)?
            .in_workspace(workspace);
        let opts = OpenOptions {
            command: "terraform_remote_state".into(),
            ..Default::default()
        };
        match Store::open_s3(&cfg, &host.cwd, &opts) {
            Ok((store, _)) => outputs_of(&store),
            Err(StateError::NotFound { .. }) => {
                match cairn_state::s3_store::read_terraform_state(&cfg).map_err(err)? {
                    Some(bytes) => {
                        from_tfstate_text(&String::from_utf8_lossy(&bytes), &cfg.describe())
                    }
                    None => Err(not_found()),
                }
            }
            Err(e) => Err(err(e)),
        }
    }

    fn from_store(dir: &Path, pg: Option<PgConfig>) -> Result<Outputs, ProviderError> {
        let opts = OpenOptions {
            command: "terraform_remote_state".into(),
            lock_timeout: Duration::from_secs(30),
            write: false,
            skip_lock: false,
            encryption: None,
        };
        let opened = match pg {
            None => Store::open(dir, &opts),
            Some(cfg) => Store::open_pg(&cfg, dir, &opts),
        };
        let store = match opened {
            Ok((store, _)) => store,
            Err(StateError::NotFound { .. }) => return Err(not_found()),
            Err(e) => return Err(err(e)),
        };
        outputs_of(&store)
    }

    fn outputs_of(store: &Store) -> Result<Outputs, ProviderError> {
        let snapshot = store.snapshot();
        if snapshot.head == 0 {
            return Err(not_found());
        }
        Ok(snapshot
            .outputs
            .iter()
            // Unmarked, as Terraform reads them (see the module docs).
            .map(|(name, o)| (name.clone(), Value::from_stored(&o.value).deep_unmark().0))
            .collect())
    }

    fn from_tfstate_file(path: &Path) -> Result<Outputs, ProviderError> {
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(not_found()),
            Err(e) => return Err(err(format!("cannot read {}: {e}", path.display()))),
        };
        from_tfstate_text(&text, &path.display().to_string())
    }

    /// The outputs of a Terraform state's text read from `path` (for messages).
    fn from_tfstate_text(text: &str, path: &str) -> Result<Outputs, ProviderError> {
        let doc: serde_json::Value = serde_json::from_str(text)
            .map_err(|e| err(format!("{path} is not a Terraform state (JSON): {e}")))?;
        let mut out = ValueMap::new();
        let Some(outputs) = doc.get("outputs").and_then(serde_json::Value::as_object) else {
            return Ok(out);
        };
        for (name, o) in outputs {
            let Some(j) = o.get("value") else { continue };
            let value = Value::from_json(j);
            let value = match o.get("type") {
                Some(t) => {
                    let ty = crate::provider::plugin::codec::type_from_json(t)
                        .map_err(|e| err(format!("output {name} of {path}: {e}")))?;
                    crate::eval::convert::convert(value.clone(), &ty).unwrap_or(value)
                }
                None => value,
            };
            out.insert(name.clone(), value);
        }
        Ok(out)
    }
}

#[async_trait]
impl Configured for TerraformInstance {
    fn plan(&self, type_: &str, prior: Option<&Value>, config: &Value) -> ProviderResult<Planned> {
        if type_ != DATA {
            return Err(schema_util::unknown_type(PACKAGE, "resource", type_));
        }
        let mut p = self.data.plan(prior, config)?;
        // Terraform: a null input plans a null output on create and on replace (an update to
        // a null input still plans an unknown one).
        if let Value::Object(m) = &mut p.planned {
            let input_null = m.get("input").is_some_and(Value::is_null);
            let fresh = prior.is_none() || !p.requires_replace.is_empty();
            if input_null && fresh {
                m.insert("output".into(), Value::Null(Type::Dynamic));
            }
        }
        Ok(p)
    }

    async fn apply(&self, request: ApplyRequest) -> ApplyResponse {
        let (type_, planned) = match request {
            ApplyRequest::Delete { .. } => {
                return ApplyResponse {
                    new_state: None,
                    error: None,
                }
            }
            ApplyRequest::Create { type_, planned, .. } => (type_, planned),
            ApplyRequest::Update { type_, planned, .. } => (type_, planned),
        };
        let result = (|| -> ProviderResult<Value> {
            if type_ != DATA {
                return Err(schema_util::unknown_type(PACKAGE, "resource", &type_));
            }
            let mut m = self.data.conform(&planned)?;
            let input = m["input"].clone();
            schema_util::require_known(&input, "input")?;
            m.insert("output".into(), input);
            if m["id"].is_unknown() || m["id"].is_null() {
                let salt = || format!("{type_} {}", planned.to_json());
                m.insert(
                    "id".into(),
                    Value::string(random_uuid(&mut self.host.rng(salt))),
                );
            }
            let v = Value::Object(m);
            schema_util::require_known(&v, "the new terraform_data")?;
            Ok(v)
        })();
        match result {
            Ok(v) => ApplyResponse {
                new_state: Some(v),
                error: None,
            },
            Err(e) => ApplyResponse {
                new_state: None,
                error: Some(e),
            },
        }
    }

    async fn read(&self, type_: &str, state: &Value) -> ProviderResult<Option<Value>> {
        if type_ != DATA {
            return Err(schema_util::unknown_type(PACKAGE, "resource", type_));
        }
        Ok(Some(state.clone()))
    }

    /// As Terraform's built-in provider: the id is the given one, everything else null.
    async fn import(&self, type_: &str, id: &str) -> ProviderResult<Vec<super::Imported>> {
        if type_ != DATA {
            return Err(super::import_unsupported(type_));
        }
        let mut m = self.data.conform(&Value::Null(Type::Dynamic))?;
        m.insert("id".into(), Value::string(id));
        Ok(vec![super::Imported {
            type_: type_.to_string(),
            state: Value::Object(m),
            meta: Default::default(),
        }])
    }

    async fn read_data(&self, type_: &str, config: &Value) -> ProviderResult<Value> {
        if type_ != REMOTE_STATE {
            return Err(schema_util::unknown_type(PACKAGE, "data source", type_));
        }
        schema_util::require_known(config, "the configuration")?;
        let c = self.remote.conform(config)?;
        let workspace = schema_util::get_str(&c, "workspace")
            .unwrap_or("default")
            .to_string();
        cairn_state::workspace::check_name(&workspace)
            .map_err(|m| ProviderError(format!("terraform_remote_state: {m}")))?;
        let backend = schema_util::need_str(&c, "backend")?.to_string();
        let args: ValueMap = match c.get("config").map(Value::unmarked) {
            None | Some(Value::Null(_)) => ValueMap::new(),
            Some(Value::Object(m) | Value::Map(m)) => m.clone(),
            Some(other) => {
                return Err(ProviderError(format!(
                    "terraform_remote_state: config must be an object of the backend's \
                     arguments, not a {}",
                    other.type_of()
                )))
            }
        };
        let host = self.host.clone();
        let outputs =
            tokio::task::spawn_blocking(move || remote::read(&host, &backend, &args, &workspace))
                .await
                .map_err(|e| ProviderError(format!("terraform_remote_state: {e}")))??;
        let mut merged = match c.get("defaults").map(Value::unmarked) {
            Some(Value::Object(m) | Value::Map(m)) => m.clone(),
            _ => ValueMap::new(),
        };
        merged.extend(outputs);
        let mut computed = ValueMap::new();
        computed.insert("outputs".to_string(), Value::Object(merged));
        Ok(schema_util::data_result(&self.remote, &c, computed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::testkit::{assert_agrees, attr, configure, create, obj, s};

    #[tokio::test]
    async fn create_copies_input_to_output_and_makes_a_uuid() {
        let p = configure(&TerraformProvider::new(Host::default())).await;
        let input = obj(&[("x", Value::int(1)), ("y", Value::Tuple(vec![s("a")]))]);
        let (plan, state) = create(&*p, DATA, &obj(&[("input", input.clone())])).await;
        assert!(plan.planned.get("id").is_some_and(Value::is_unknown));
        assert!(plan.planned.get("output").is_some_and(Value::is_unknown));
        assert_agrees(&plan.planned, &state);
        assert_eq!(state.get("output"), Some(&input));
        let id = attr(&state, "id");
        let parts: Vec<usize> = id.split('-').map(str::len).collect();
        assert_eq!(parts, [8, 4, 4, 4, 12], "{id}");
        assert!(id.chars().all(|c| c == '-' || c.is_ascii_hexdigit()));
        assert_eq!(p.read(DATA, &state).await, Ok(Some(state.clone())));
    }

    #[tokio::test]
    async fn null_input_plans_null_output() {
        let p = configure(&TerraformProvider::new(Host::default())).await;
        let (plan, state) = create(&*p, DATA, &obj(&[("triggers_replace", s("t1"))])).await;
        assert!(plan.planned.get("output").is_some_and(Value::is_null));
        assert!(state.get("output").is_some_and(Value::is_null));
    }

    #[tokio::test]
    async fn input_change_updates_and_trigger_change_replaces() {
        let p = configure(&TerraformProvider::new(Host::default())).await;
        let cfg = |i: &str, t: &str| obj(&[("input", s(i)), ("triggers_replace", s(t))]);
        let (_, prior) = create(&*p, DATA, &cfg("a", "t1")).await;
        let same = p.plan(DATA, Some(&prior), &cfg("a", "t1")).expect("plan");
        assert_eq!(same.planned, prior);
        let upd = p.plan(DATA, Some(&prior), &cfg("b", "t1")).expect("plan");
        assert!(upd.requires_replace.is_empty());
        assert_eq!(upd.planned.get("id"), prior.get("id"));
        assert!(upd.planned.get("output").is_some_and(Value::is_unknown));
        let r = p
            .apply(ApplyRequest::Update {
                type_: DATA.into(),
                prior: prior.clone(),
                planned: upd.planned.clone(),
            })
            .await;
        let new = r.new_state.expect("state");
        assert_agrees(&upd.planned, &new);
        assert_eq!(new.get("output"), Some(&s("b")));
        let rep = p.plan(DATA, Some(&prior), &cfg("a", "t2")).expect("plan");
        assert_eq!(rep.requires_replace, ["triggers_replace"]);
        assert!(rep.planned.get("id").is_some_and(Value::is_unknown));
    }
}
