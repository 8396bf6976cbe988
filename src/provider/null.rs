//! The `null` provider: `null_resource`, a resource that does nothing, as hashicorp/null 3.x.
//!
//! ```hcl
//! resource "null_resource" "x" {
//!   triggers = { version = var.version }   # optional map of strings; a change replaces
//! }
//! ```
//!
//! `id` is a random non-negative decimal number made at create (hashicorp/null uses Go's
//! `rand.Int()`: up to 2^63 - 1). Refresh changes nothing.
//!
//! hashicorp/null's deprecated `data "null_data_source"` (older modules still use it; `locals`
//! do its job today): `outputs` is a copy of `inputs` (a map of strings), `random` a random
//! decimal number read again at every read, `has_computed_default` `"default"` unless set,
//! and `id` `"static"`, as hashicorp/null 3.x.

use super::host::Host;
use super::schema_util::{self, TypeSchema};
use super::{ApplyRequest, ApplyResponse, Configured, Planned, Provider, ProviderResult};
use crate::schema::ProviderSchema;
use crate::value::{Type, Value};
use async_trait::async_trait;
use rand::Rng;
use std::sync::Arc;

const PACKAGE: &str = "null";
const RESOURCE: &str = "null_resource";
const DATA: &str = "null_data_source";

/// The `null` provider package (no configuration).
pub(crate) struct NullProvider {
    host: Host,
    schema: ProviderSchema,
    resource: TypeSchema,
    data: TypeSchema,
}

impl NullProvider {
    pub(crate) fn new(host: Host) -> NullProvider {
        let resource = TypeSchema::new("A resource that does nothing.")
            .optional(
                "triggers",
                Type::map(Type::String),
                "Arbitrary values whose change replaces the resource.",
            )
            .force_new()
            .computed("id", Type::String, "A random number made at create.");
        let data = TypeSchema::new("Deprecated: copies its inputs to its outputs.")
            .optional("inputs", Type::map(Type::String), "Arbitrary values.")
            .computed("outputs", Type::map(Type::String), "A copy of inputs.")
            .computed(
                "random",
                Type::String,
                "A random number, made at every read.",
            )
            .optional_computed(
                "has_computed_default",
                Type::String,
                "\"default\" unless set.",
            )
            .computed("id", Type::String, "Always \"static\".");
        NullProvider {
            host,
            schema: ProviderSchema {
                resources: [(RESOURCE.to_string(), resource.block.clone())].into(),
                data_sources: [(DATA.to_string(), data.block.clone())].into(),
                ..ProviderSchema::default()
            },
            resource,
            data,
        }
    }
}

#[async_trait]
impl Provider for NullProvider {
    fn package(&self) -> &str {
        PACKAGE
    }
    fn schema(&self) -> &ProviderSchema {
        &self.schema
    }
    async fn configure(&self, _config: &Value) -> ProviderResult<Arc<dyn Configured>> {
        Ok(Arc::new(NullInstance {
            host: self.host.clone(),
            resource: self.resource.clone(),
            data: self.data.clone(),
        }))
    }
}

struct NullInstance {
    host: Host,
    resource: TypeSchema,
    data: TypeSchema,
}

#[async_trait]
impl Configured for NullInstance {
    fn plan(&self, type_: &str, prior: Option<&Value>, config: &Value) -> ProviderResult<Planned> {
        if type_ != RESOURCE {
            return Err(schema_util::unknown_type(PACKAGE, "resource", type_));
        }
        self.resource.plan(prior, config)
    }

    async fn apply(&self, request: ApplyRequest) -> ApplyResponse {
        let (new_state, error) = match request {
            ApplyRequest::Create { type_, planned, .. } if type_ == RESOURCE => {
                match self.resource.conform(&planned) {
                    Ok(mut c) => {
                        let salt = || format!("{type_} {}", planned.to_json());
                        let id: i64 = self.host.rng(salt).gen_range(0..=i64::MAX);
                        c.insert("id".into(), Value::string(id.to_string()));
                        (Some(Value::Object(c)), None)
                    }
                    Err(e) => (None, Some(e)),
                }
            }
            ApplyRequest::Create { type_, .. } => (
                None,
                Some(schema_util::unknown_type(PACKAGE, "resource", &type_)),
            ),
            // `triggers` forces replacement: an update has nothing to change.
            ApplyRequest::Update { planned, .. } => (Some(planned), None),
            ApplyRequest::Delete { .. } => (None, None),
        };
        ApplyResponse { new_state, error }
    }

    async fn read(&self, _type_: &str, state: &Value) -> ProviderResult<Option<Value>> {
        Ok(Some(state.clone()))
    }

    async fn read_data(&self, type_: &str, config: &Value) -> ProviderResult<Value> {
        if type_ != DATA {
            return Err(schema_util::unknown_type(PACKAGE, "data source", type_));
        }
        schema_util::require_known(config, "the configuration")?;
        let c = self.data.conform(config)?;
        let inputs = c
            .get("inputs")
            .filter(|v| !v.is_null())
            .cloned()
            .unwrap_or_else(|| Value::Map(Default::default()));
        let salt = || format!("{type_} {}", config.to_json());
        let random: i64 = self.host.rng(salt).gen_range(0..=i64::MAX);
        let default = match c.get("has_computed_default").and_then(Value::as_str) {
            Some(v) => v.to_string(),
            None => "default".to_string(),
        };
        let computed = [
            ("outputs".to_string(), inputs),
            ("random".to_string(), Value::string(random.to_string())),
            ("has_computed_default".to_string(), Value::string(default)),
            ("id".to_string(), Value::string("static")),
        ]
        .into();
        Ok(schema_util::data_result(&self.data, &c, computed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::testkit::{assert_agrees, attr, configure, create, map, obj};

    #[tokio::test]
    async fn null_data_source_copies_inputs() {
        let p = configure(&NullProvider::new(Host::default())).await;
        let cfg = obj(&[("inputs", map(&[("a", "1"), ("b", "2")]))]);
        let v = p.read_data(DATA, &cfg).await.expect("read");
        assert_eq!(
            v.get("outputs"),
            cfg.get("inputs")
                .map(|m| match m {
                    Value::Map(m) | Value::Object(m) => Value::Map(m.clone()),
                    other => other.clone(),
                })
                .as_ref()
        );
        assert_eq!(attr(&v, "id"), "static");
        assert_eq!(attr(&v, "has_computed_default"), "default");
        assert!(attr(&v, "random").parse::<u64>().is_ok());
        let set = obj(&[("has_computed_default", crate::value::Value::string("x"))]);
        let v = p.read_data(DATA, &set).await.expect("read");
        assert_eq!(attr(&v, "has_computed_default"), "x");
        assert!(matches!(v.get("outputs"), Some(Value::Map(m)) if m.is_empty()));
    }

    #[tokio::test]
    async fn triggers_replace_and_id_is_a_random_number() {
        let p = configure(&NullProvider::new(Host::default())).await;
        let cfg = |v: &str| obj(&[("triggers", map(&[("v", v)]))]);
        let (plan, a) = create(&*p, RESOURCE, &cfg("1")).await;
        assert_agrees(&plan.planned, &a);
        assert!(attr(&a, "id").parse::<u64>().is_ok());
        let (_, b) = create(&*p, RESOURCE, &cfg("1")).await;
        assert_ne!(a.get("id"), b.get("id"));
        let same = p.plan(RESOURCE, Some(&a), &cfg("1")).expect("plan");
        assert_eq!(same.planned, a);
        let changed = p.plan(RESOURCE, Some(&a), &cfg("2")).expect("plan");
        assert_eq!(changed.requires_replace, ["triggers"]);
        assert_eq!(p.read(RESOURCE, &a).await, Ok(Some(a.clone())));
        assert!(
            NullProvider::new(Host::default()).schema().resources[RESOURCE].attributes["triggers"]
                .force_new
        );
    }
}
