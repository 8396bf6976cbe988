//! Mock providers (`mock_provider` blocks of `cairn test` files, as Terraform 1.7+ has them):
//! a provider that changes nothing in any world. Its plan keeps the configuration, with the
//! computed attributes it does not set unknown (or, for an update, as they were); its apply
//! fills what is unknown from the `mock_resource` defaults of the type, else with generated
//! values (strings of 8 random letters and digits, zero, false, empty collections); a data
//! source is its configuration with the same filling.
//!
//! The schema is the real provider's when Cairn has it (built in, or an installed plugin);
//! otherwise — beyond Terraform, which must install the real provider first — one is made from
//! the configuration ([`schema_from_config`]): every argument written optional and computed,
//! of any type, nested blocks as lists, plus `id` and the defaults' attributes, computed.

use super::{ApplyRequest, ApplyResponse, Configured, Planned, Provider, ProviderResult};
use crate::addr::Mode;
use crate::config::Config;
use crate::schema::{Attribute, Block, NestedBlock, Nesting, ProviderSchema};
use crate::value::ValueMap;
use crate::value::{Type, Value};
use async_trait::async_trait;
use hcl_edit::structure::{Body, Structure};
use std::sync::Arc;

/// What a `mock_provider` block says: defaults by resource and data source type.
#[derive(Clone, Debug, Default)]
pub struct MockSpec {
    pub resources: ValueMap,
    pub data: ValueMap,
    /// An override's `override_during = plan`: plans fill what is unknown from the defaults.
    pub at_plan: bool,
}

/// An `override_resource` / `override_data` block: the resource (every instance of it) whose
/// computed values are `values`; no provider is asked about it.
#[derive(Clone, Debug)]
pub struct OverrideSpec {
    pub module: crate::addr::ModulePath,
    pub key: crate::config::ResourceKey,
    pub values: Value,
    /// `override_during = plan`.
    pub at_plan: bool,
}

pub(crate) struct MockProvider {
    package: String,
    schema: ProviderSchema,
    spec: Arc<MockSpec>,
}

impl MockProvider {
    /// A mock of `package`: with the real provider's schema when there is one.
    pub(crate) fn new(
        package: &str,
        real: Option<&Arc<dyn Provider>>,
        config: &Config,
        spec: MockSpec,
    ) -> Self {
        let schema = match real {
            Some(p) => p.schema().clone(),
            None => schema_from_config(package, config, &spec),
        };
        MockProvider {
            package: package.to_string(),
            schema,
            spec: Arc::new(spec),
        }
    }
}

impl MockProvider {
    /// The mock for overridden resources: configured by nothing (no provider block names it).
    pub(crate) fn without_provider_config(mut self) -> Self {
        self.schema.provider = Block::default();
        self
    }
}

#[async_trait]
impl Provider for MockProvider {
    fn package(&self) -> &str {
        &self.package
    }
    fn schema(&self) -> &ProviderSchema {
        &self.schema
    }
    fn validate(&self, _mode: Mode, _type_: &str, _config: &Value) -> crate::diag::Diagnostics {
        crate::diag::Diagnostics::new()
    }
    async fn configure(&self, _config: &Value) -> ProviderResult<Arc<dyn Configured>> {
        Ok(Arc::new(MockConfigured {
            schema: self.schema.clone(),
            spec: self.spec.clone(),
        }))
    }
}

struct MockConfigured {
    schema: ProviderSchema,
    spec: Arc<MockSpec>,
}

/// The planned value of a block: the configuration, with computed attributes it leaves null
/// taken from `prior` (an update) or unknown (a create).
fn plan_block(block: &Block, config: &Value, prior: Option<&Value>) -> Value {
    let Value::Object(attrs) = config.unmarked() else {
        return config.clone();
    };
    let mut out = attrs.clone();
    for (name, a) in &block.attributes {
        let set = out.get(name).is_some_and(|v| !v.is_null());
        if set || !a.computed {
            continue;
        }
        let before = prior.and_then(|p| match p.unmarked() {
            Value::Object(o) => o.get(name).cloned(),
            _ => None,
        });
        out.insert(
            name.clone(),
            before.unwrap_or_else(|| Value::Unknown(a.ty.clone())),
        );
    }
    Value::Object(out)
}

/// Every unknown (and, with `nulls`, every null computed attribute) filled from `defaults`,
/// else generated from its type.
fn fill(block: &Block, value: &Value, defaults: Option<&Value>, nulls: bool) -> Value {
    let Value::Object(attrs) = value.unmarked() else {
        return value.clone();
    };
    let mut out = attrs.clone();
    let default_of = |name: &str| match defaults.map(Value::unmarked) {
        Some(Value::Object(d)) => d.get(name).cloned(),
        _ => None,
    };
    for (name, a) in &block.attributes {
        let v = out.get(name).cloned().unwrap_or_else(Value::null);
        let missing = !v.is_wholly_known() || (nulls && a.computed && v.is_null());
        if missing {
            let new = default_of(name)
                .and_then(|d| crate::eval::convert::convert(d, &a.ty).ok())
                .unwrap_or_else(|| generated(&a.ty));
            out.insert(name.clone(), new);
        }
    }
    // Defaults of attributes the schema does not know (a made-up schema's open values).
    if let Some(Value::Object(d)) = defaults.map(Value::unmarked) {
        for (k, v) in d {
            let absent = out.get(k).is_none_or(|x| !x.is_wholly_known());
            if absent && !block.blocks.contains_key(k) {
                out.insert(k.clone(), v.clone());
            }
        }
    }
    Value::Object(out)
}

/// A value for an attribute nothing set, as Terraform's mocks make them.
fn generated(ty: &Type) -> Value {
    match ty {
        Type::String | Type::Dynamic => {
            use rand::Rng;
            let chars: String = rand::thread_rng()
                .sample_iter(&rand::distributions::Alphanumeric)
                .take(8)
                .map(char::from)
                .collect();
            Value::string(chars.to_lowercase())
        }
        Type::Number => Value::int(0),
        Type::Bool => Value::Bool(false),
        Type::Object(attrs, _) => Value::Object(
            attrs
                .iter()
                .map(|(k, t)| (k.clone(), generated(t)))
                .collect(),
        ),
        other => crate::eval::convert::convert(Value::Tuple(Vec::new()), other)
            .or_else(|_| crate::eval::convert::convert(Value::Object(ValueMap::new()), other))
            .unwrap_or_else(|_| Value::null()),
    }
}

#[async_trait]
impl Configured for MockConfigured {
    fn plan(&self, type_: &str, prior: Option<&Value>, config: &Value) -> ProviderResult<Planned> {
        let planned = match self.schema.block(Mode::Managed, type_) {
            Some(b) if self.spec.at_plan => fill(
                b,
                &plan_block(b, config, prior),
                self.spec.resources.get(type_),
                false,
            ),
            Some(b) => plan_block(b, config, prior),
            None => config.clone(),
        };
        Ok(Planned {
            planned,
            requires_replace: Vec::new(),
            private: Vec::new(),
            warnings: Vec::new(),
        })
    }
    async fn apply(&self, request: ApplyRequest) -> ApplyResponse {
        let (type_, planned) = match request {
            ApplyRequest::Delete { .. } => {
                return ApplyResponse {
                    new_state: None,
                    error: None,
                }
            }
            ApplyRequest::Create { type_, planned, .. }
            | ApplyRequest::Update { type_, planned, .. } => (type_, planned),
        };
        let new = match self.schema.block(Mode::Managed, &type_) {
            Some(b) => fill(b, &planned, self.spec.resources.get(&type_), false),
            None => planned,
        };
        ApplyResponse {
            new_state: Some(new),
            error: None,
        }
    }
    async fn read(&self, _type_: &str, state: &Value) -> ProviderResult<Option<Value>> {
        Ok(Some(state.clone()))
    }
    async fn read_data(&self, type_: &str, config: &Value) -> ProviderResult<Value> {
        Ok(match self.schema.block(Mode::Data, type_) {
            Some(b) => fill(b, config, self.spec.data.get(type_), true),
            None => config.clone(),
        })
    }
}

/// A schema for `package` made from the configuration: what each resource and data source of
/// the package writes, plus `id` and the mocks' default attributes, all of any type.
pub(crate) fn schema_from_config(
    package: &str,
    config: &Config,
    spec: &MockSpec,
) -> ProviderSchema {
    let mut schema = ProviderSchema::default();
    for m in config.modules() {
        for r in m.resources.values() {
            let owner = match &r.provider {
                Some(p) => p.name.as_str(),
                None => crate::addr::package_of(&r.type_),
            };
            if owner != package {
                continue;
            }
            let blocks = match r.mode {
                Mode::Managed => &mut schema.resources,
                Mode::Data => &mut schema.data_sources,
                Mode::Ephemeral => &mut schema.ephemeral_resources,
            };
            let b = blocks.entry(r.type_.clone()).or_default();
            merge_body(b, &r.body);
            b.attributes
                .entry("id".into())
                .or_insert_with(|| any_attr(true));
        }
    }
    for (types, defaults) in [
        (&mut schema.resources, &spec.resources),
        (&mut schema.data_sources, &spec.data),
    ] {
        for (t, d) in defaults {
            let b = types.entry(t.clone()).or_default();
            if let Value::Object(o) = d.unmarked() {
                for k in o.keys() {
                    b.attributes
                        .entry(k.clone())
                        .or_insert_with(|| any_attr(true));
                }
            }
        }
    }
    schema
}

fn any_attr(computed: bool) -> Attribute {
    Attribute {
        ty: Type::Dynamic,
        required: false,
        optional: true,
        computed,
        force_new: false,
        sensitive: false,
        write_only: false,
        description: String::new(),
    }
}

/// Adds what a body writes to a made-up block schema.
fn merge_body(b: &mut Block, body: &Body) {
    for s in body.iter() {
        match s {
            Structure::Attribute(a) => {
                b.attributes
                    .entry(a.key.as_str().to_string())
                    .or_insert_with(|| any_attr(false));
            }
            Structure::Block(nb) => {
                let (name, inner) = match nb.ident.as_str() {
                    "lifecycle" | "provisioner" | "connection" => continue,
                    "dynamic" => {
                        let Some(label) = nb.labels.first() else {
                            continue;
                        };
                        let content = nb.body.iter().find_map(|s| match s {
                            Structure::Block(c) if c.ident.as_str() == "content" => Some(&c.body),
                            _ => None,
                        });
                        let Some(content) = content else { continue };
                        (label.as_str().to_string(), content)
                    }
                    other => (other.to_string(), &nb.body),
                };
                let nested = b.blocks.entry(name).or_insert_with(|| NestedBlock {
                    nesting: Nesting::List,
                    block: Block::default(),
                    min_items: 0,
                    max_items: None,
                });
                merge_body(&mut nested.block, inner);
            }
        }
    }
}
