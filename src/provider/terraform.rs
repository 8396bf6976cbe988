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

use super::builtin::Host;
use super::schema_util::{self, TypeSchema};
use super::{
    ApplyRequest, ApplyResponse, ConfigDiff, Configured, Planned, Provider, ProviderResult,
    ProviderSchema,
};
use crate::diag::{Diagnostic, Diagnostics};
use crate::value::{Type, Value};
use async_trait::async_trait;
use cairn_state::Mode;
use rand::RngCore;
use std::sync::Arc;

const PACKAGE: &str = "terraform";
const DATA: &str = "terraform_data";

/// The `terraform` provider package (no configuration).
pub struct TerraformProvider {
    host: Host,
    schema: ProviderSchema,
    data: TypeSchema,
}

impl TerraformProvider {
    pub fn new(host: Host) -> TerraformProvider {
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
        TerraformProvider {
            host,
            schema: ProviderSchema {
                resources: [(DATA.to_string(), data.block.clone())].into(),
                ..ProviderSchema::default()
            },
            data,
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
    fn check_config(&self, _config: &Value) -> Diagnostics {
        Diagnostics::new()
    }
    fn diff_config(&self, _old: &Value, _new: &Value) -> ConfigDiff {
        ConfigDiff::NoChange
    }
    fn validate(&self, mode: Mode, type_: &str, config: &Value) -> Diagnostics {
        match (mode, type_) {
            (Mode::Managed, DATA) => self.data.check(config),
            _ => Diagnostic::error(
                "Unsupported type",
                schema_util::unknown_type(PACKAGE, "such", type_).message,
            )
            .into(),
        }
    }
    async fn configure(&self, _config: &Value) -> ProviderResult<Arc<dyn Configured>> {
        Ok(Arc::new(TerraformInstance {
            host: self.host.clone(),
            data: self.data.clone(),
        }))
    }
}

struct TerraformInstance {
    host: Host,
    data: TypeSchema,
}

/// A random UUID-shaped id, as hashicorp/go-uuid's `GenerateUUID` makes (random bytes, no
/// version bits).
pub fn random_uuid(rng: &mut impl RngCore) -> String {
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

    async fn read_data(&self, type_: &str, _config: &Value) -> ProviderResult<Value> {
        Err(schema_util::unknown_type(PACKAGE, "data source", type_))
    }

    async fn find_by_token(&self, _type_: &str, _token: &str) -> ProviderResult<Option<Value>> {
        // Nothing exists outside state: an interrupted create left nothing behind to adopt.
        Ok(None)
    }

    async fn stop(&self) {}
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
