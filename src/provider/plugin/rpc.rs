//! One client for both protocol versions: every RPC the lifecycle needs, with protocol 5 and 6
//! messages turned into the same plain Rust types (schemas into Cairn's `Block` plus the cty
//! type that drives the wire encoding, diagnostics with their attribute paths).
//!
//! The two protocols differ only in names (`GetSchema`/`GetProviderSchema`,
//! `PrepareProviderConfig`/`ValidateProviderConfig`, `Configure`/`ConfigureProvider`, …) and in
//! protocol 6's nested attributes, so the conversions are written once, as a macro instantiated
//! for each generated module.

use super::proto::{tfplugin5 as p5, tfplugin6 as p6};
use crate::provider::ProviderDiag;
use crate::schema::{
    Attribute, Block, FunctionFailure, FunctionParam, FunctionSig, NestedBlock, Nesting, PathStep,
};
use crate::value::Type;
use std::collections::BTreeMap;
use tonic::transport::Channel;

/// A provider diagnostic.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Diag {
    pub(crate) error: bool,
    pub(crate) summary: String,
    pub(crate) detail: String,
    /// The attribute path (`tags["x"]`, `rule[0].port`), when the provider gave one.
    pub(crate) path: Option<String>,
    /// The same path, step by step.
    pub(crate) steps: Vec<PathStep>,
}

impl Diag {
    pub(crate) fn to_provider_diag(&self) -> ProviderDiag {
        ProviderDiag {
            error: self.error,
            summary: self.summary.clone(),
            detail: self.detail.clone(),
            path: self.steps.clone(),
        }
    }

    /// The diagnostic as one line of text: `summary: detail (at path)`.
    pub(crate) fn message(&self) -> String {
        let mut m = self.summary.clone();
        if !self.detail.is_empty() {
            m.push_str(": ");
            m.push_str(&self.detail);
        }
        if let Some(p) = &self.path {
            m.push_str(&format!(" (at {p})"));
        }
        m
    }
}

/// A `DynamicValue`: msgpack, or JSON as a fallback.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Dyn {
    pub(crate) msgpack: Vec<u8>,
    pub(crate) json: Vec<u8>,
}

impl Dyn {
    pub(crate) fn msgpack(bytes: Vec<u8>) -> Dyn {
        Dyn {
            msgpack: bytes,
            json: Vec::new(),
        }
    }
}

/// One resource type's, data source's or the provider's schema.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct TypeSchema {
    pub(crate) version: i64,
    pub(crate) block: Block,
    /// The cty type of a value of this block (what the wire encoding follows).
    pub(crate) ty: Type,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Schemas {
    pub(crate) provider: Option<TypeSchema>,
    pub(crate) resources: BTreeMap<String, TypeSchema>,
    pub(crate) data_sources: BTreeMap<String, TypeSchema>,
    pub(crate) ephemeral_resources: BTreeMap<String, TypeSchema>,
    pub(crate) plan_destroy: bool,
    pub(crate) functions: BTreeMap<String, FunctionSig>,
}

pub(crate) struct PlanOut {
    pub(crate) planned: Dyn,
    pub(crate) requires_replace: Vec<String>,
    pub(crate) private: Vec<u8>,
    pub(crate) legacy_type_system: bool,
    pub(crate) diags: Vec<Diag>,
}

pub(crate) struct ApplyOut {
    pub(crate) new_state: Dyn,
    pub(crate) private: Vec<u8>,
    pub(crate) legacy_type_system: bool,
    pub(crate) diags: Vec<Diag>,
}

pub(crate) struct ReadOut {
    pub(crate) new_state: Dyn,
    pub(crate) private: Vec<u8>,
    pub(crate) diags: Vec<Diag>,
}

/// What `OpenEphemeralResource` answered.
pub(crate) struct OpenOut {
    pub(crate) result: Dyn,
    /// When the provider wants `RenewEphemeralResource` called (Unix seconds and nanos).
    pub(crate) renew_at: Option<std::time::SystemTime>,
    pub(crate) private: Option<Vec<u8>>,
    pub(crate) diags: Vec<Diag>,
}

/// What `RenewEphemeralResource` answered.
pub(crate) struct RenewOut {
    pub(crate) renew_at: Option<std::time::SystemTime>,
    pub(crate) private: Option<Vec<u8>>,
    pub(crate) diags: Vec<Diag>,
}

fn system_time(t: Option<prost_types::Timestamp>) -> Option<std::time::SystemTime> {
    let t = t?;
    let secs = u64::try_from(t.seconds).ok()?;
    let nanos = u32::try_from(t.nanos).unwrap_or(0);
    std::time::UNIX_EPOCH.checked_add(std::time::Duration::new(secs, nanos))
}

pub(crate) struct Imported {
    pub(crate) type_name: String,
    pub(crate) state: Dyn,
    pub(crate) private: Vec<u8>,
}

/// A connected provider, protocol 5 or 6.
#[derive(Clone)]
pub(crate) enum Client {
    V5(p5::provider_client::ProviderClient<Channel>),
    V6(p6::provider_client::ProviderClient<Channel>),
}

fn status(e: tonic::Status) -> String {
    format!("the plugin call failed: {} ({:?})", e.message(), e.code())
}

/// The largest message either side may send (schemas of big providers exceed tonic's 4 MiB).
const MAX_MESSAGE: usize = 256 << 20;

impl Client {
    pub(crate) fn new(protocol: u32, channel: Channel) -> Client {
        if protocol == 5 {
            Client::V5(
                p5::provider_client::ProviderClient::new(channel)
                    .max_decoding_message_size(MAX_MESSAGE)
                    .max_encoding_message_size(MAX_MESSAGE),
            )
        } else {
            Client::V6(
                p6::provider_client::ProviderClient::new(channel)
                    .max_decoding_message_size(MAX_MESSAGE)
                    .max_encoding_message_size(MAX_MESSAGE),
            )
        }
    }
}

/// Per-protocol conversions of the messages that have the same shape in both.
trait NestedType {
    fn nested(&self) -> Result<Option<(Type, Block)>, String>;
}

impl NestedType for p5::schema::Attribute {
    fn nested(&self) -> Result<Option<(Type, Block)>, String> {
        Ok(None)
    }
}

impl NestedType for p6::schema::Attribute {
    /// A protocol 6 nested attribute: its type is the object (or collection of objects) of its
    /// attributes.
    fn nested(&self) -> Result<Option<(Type, Block)>, String> {
        let Some(obj) = &self.nested_type else {
            return Ok(None);
        };
        let mut attrs = BTreeMap::new();
        let mut optional = BTreeMap::new();
        let mut block = Block::default();
        for a in &obj.attributes {
            let (ty, attr) = v6::attribute(a)?;
            attrs.insert(a.name.clone(), ty);
            // What the configuration may leave out (optional or computed) is an optional
            // attribute of the object type, so `{ a = 1 }` converts with `b` null.
            if !a.required {
                optional.insert(a.name.clone(), None);
            }
            block.attributes.insert(a.name.clone(), attr);
        }
        let object = Type::Object(Box::new(attrs), optional.into());
        use p6::schema::object::NestingMode as M;
        let ty = match M::try_from(obj.nesting).unwrap_or(M::Invalid) {
            M::Single => object,
            M::List => Type::list(object),
            M::Set => Type::set(object),
            M::Map => Type::map(object),
            M::Invalid => return Err(format!("attribute {}: invalid nesting mode", self.name)),
        };
        Ok(Some((ty, block)))
    }
}

macro_rules! conversions {
    ($p:ident) => {
        use super::*;

        pub(crate) fn diags(ds: &[$p::Diagnostic]) -> Vec<Diag> {
            ds.iter()
                .map(|d| Diag {
                    error: d.severity != $p::diagnostic::Severity::Warning as i32,
                    summary: d.summary.clone(),
                    detail: d.detail.clone(),
                    path: d.attribute.as_ref().map(path).filter(|p| !p.is_empty()),
                    steps: d.attribute.as_ref().map(steps).unwrap_or_default(),
                })
                .collect()
        }

        pub(crate) fn steps(p: &$p::AttributePath) -> Vec<PathStep> {
            use $p::attribute_path::step::Selector;
            p.steps
                .iter()
                .filter_map(|s| match &s.selector {
                    Some(Selector::AttributeName(n)) => Some(PathStep::Attr(n.clone())),
                    Some(Selector::ElementKeyString(k)) => Some(PathStep::Key(k.clone())),
                    Some(Selector::ElementKeyInt(i)) => Some(PathStep::Index(*i)),
                    None => None,
                })
                .collect()
        }

        pub(crate) fn path(p: &$p::AttributePath) -> String {
            use $p::attribute_path::step::Selector;
            let mut out = String::new();
            for s in &p.steps {
                match &s.selector {
                    Some(Selector::AttributeName(n)) => {
                        if !out.is_empty() {
                            out.push('.');
                        }
                        out.push_str(n);
                    }
                    Some(Selector::ElementKeyString(k)) => out.push_str(&format!("[{k:?}]")),
                    Some(Selector::ElementKeyInt(i)) => out.push_str(&format!("[{i}]")),
                    None => {}
                }
            }
            out
        }

        /// The first attribute name of a path (what Cairn's `requires_replace` holds).
        pub(crate) fn root_name(p: &$p::AttributePath) -> Option<String> {
            use $p::attribute_path::step::Selector;
            p.steps.iter().find_map(|s| match &s.selector {
                Some(Selector::AttributeName(n)) => Some(n.clone()),
                _ => None,
            })
        }

        pub(crate) fn attribute(a: &$p::schema::Attribute) -> Result<(Type, Attribute), String> {
            let (ty, _nested) = match a.nested()? {
                Some((ty, block)) => (ty, Some(block)),
                None => {
                    let j: serde_json::Value = serde_json::from_slice(&a.r#type)
                        .map_err(|e| format!("attribute {}: invalid type JSON: {e}", a.name))?;
                    let ty = super::super::codec::type_from_json(&j)
                        .map_err(|e| format!("attribute {}: {e}", a.name))?;
                    (ty, None)
                }
            };
            Ok((
                ty.clone(),
                Attribute {
                    ty,
                    required: a.required,
                    optional: a.optional,
                    computed: a.computed,
                    force_new: false,
                    sensitive: a.sensitive,
                    write_only: a.write_only,
                    description: a.description.clone(),
                },
            ))
        }

        /// A block's schema for the engine and its cty type for the wire.
        pub(crate) fn block(b: &$p::schema::Block) -> Result<(Type, Block), String> {
            let mut types = BTreeMap::new();
            let mut out = Block {
                description: b.description.clone(),
                ..Block::default()
            };
            for a in &b.attributes {
                let (ty, attr) = attribute(a)?;
                types.insert(a.name.clone(), ty);
                out.attributes.insert(a.name.clone(), attr);
            }
            use $p::schema::nested_block::NestingMode as M;
            for nb in &b.block_types {
                let (inner_ty, inner) = match &nb.block {
                    Some(inner) => block(inner)?,
                    None => (Type::object([]), Block::default()),
                };
                let mode = M::try_from(nb.nesting).unwrap_or(M::Invalid);
                let (ty, nesting) = match mode {
                    M::Single | M::Group => (inner_ty, Nesting::Single),
                    M::List => (Type::list(inner_ty), Nesting::List),
                    M::Set => (Type::set(inner_ty), Nesting::Set),
                    M::Map => (Type::map(inner_ty), Nesting::Map),
                    M::Invalid => {
                        return Err(format!("block {}: invalid nesting mode", nb.type_name))
                    }
                };
                types.insert(nb.type_name.clone(), ty);
                out.blocks.insert(
                    nb.type_name.clone(),
                    NestedBlock {
                        nesting,
                        block: inner,
                        min_items: nb.min_items.max(0) as usize,
                        max_items: (nb.max_items > 0).then_some(nb.max_items as usize),
                    },
                );
            }
            Ok((Type::object(types), out))
        }

        pub(crate) fn schema(s: &$p::Schema, what: &str) -> Result<TypeSchema, String> {
            let (ty, block) = match &s.block {
                Some(b) => block(b).map_err(|e| format!("{what}: {e}"))?,
                None => (Type::object([]), Block::default()),
            };
            Ok(TypeSchema {
                version: s.version,
                block,
                ty,
            })
        }

        pub(crate) fn dv(d: Option<$p::DynamicValue>) -> Dyn {
            d.map(|d| Dyn {
                msgpack: d.msgpack,
                json: d.json,
            })
            .unwrap_or_default()
        }

        /// The `provider_meta` of a resource call: Cairn has no `provider_meta` blocks, so it is
        /// always null, sent as a msgpack nil rather than left out: some servers (the
        /// `tf-provider` framework's) answer a call without it with no state.
        pub(crate) fn no_meta() -> Option<$p::DynamicValue> {
            Some($p::DynamicValue {
                msgpack: vec![0xc0],
                json: Vec::new(),
            })
        }

        pub(crate) fn to_dv(d: &Dyn) -> Option<$p::DynamicValue> {
            Some($p::DynamicValue {
                msgpack: d.msgpack.clone(),
                json: d.json.clone(),
            })
        }

        pub(crate) fn schemas(
            r: $p::get_provider_schema::Response,
        ) -> Result<(Schemas, Vec<Diag>), String> {
            let d = diags(&r.diagnostics);
            let mut out = Schemas {
                provider: r
                    .provider
                    .as_ref()
                    .map(|s| schema(s, "provider configuration"))
                    .transpose()?,
                plan_destroy: r
                    .server_capabilities
                    .as_ref()
                    .is_some_and(|c| c.plan_destroy),
                ..Schemas::default()
            };
            for (name, f) in &r.functions {
                out.functions.insert(name.clone(), function(name, f)?);
            }
            for (name, s) in &r.resource_schemas {
                out.resources.insert(name.clone(), schema(s, name)?);
            }
            for (name, s) in &r.data_source_schemas {
                out.data_sources.insert(name.clone(), schema(s, name)?);
            }
            for (name, s) in &r.ephemeral_resource_schemas {
                out.ephemeral_resources
                    .insert(name.clone(), schema(s, name)?);
            }
            Ok((out, d))
        }

        fn type_of(bytes: &[u8], what: &str) -> Result<Type, String> {
            let j: serde_json::Value = serde_json::from_slice(bytes)
                .map_err(|e| format!("{what}: invalid type JSON: {e}"))?;
            super::super::codec::type_from_json(&j).map_err(|e| format!("{what}: {e}"))
        }

        fn param(name: &str, p: &$p::function::Parameter) -> Result<FunctionParam, String> {
            Ok(FunctionParam {
                name: p.name.clone(),
                ty: type_of(&p.r#type, &format!("function {name}, parameter {}", p.name))?,
                allow_null: p.allow_null_value,
                allow_unknown: p.allow_unknown_values,
            })
        }

        pub(crate) fn function(name: &str, f: &$p::Function) -> Result<FunctionSig, String> {
            Ok(FunctionSig {
                params: f
                    .parameters
                    .iter()
                    .map(|p| param(name, p))
                    .collect::<Result<_, _>>()?,
                variadic: f
                    .variadic_parameter
                    .as_ref()
                    .map(|p| param(name, p))
                    .transpose()?,
                ret: match &f.r#return {
                    Some(r) => type_of(&r.r#type, &format!("function {name}, return"))?,
                    None => Type::Dynamic,
                },
                summary: f.summary.clone(),
            })
        }

        pub(crate) fn caps() -> Option<$p::ClientCapabilities> {
            Some($p::ClientCapabilities {
                deferral_allowed: false,
                write_only_attributes_allowed: true,
            })
        }
    };
}

mod v5 {
    conversions!(p5);
}
mod v6 {
    conversions!(p6);
}

/// One RPC on either protocol, written once. The method and its message module may be
/// named differently in the two (`configure(configure::Request)` in protocol 5,
/// `configure_provider(configure_provider::Request)` in 6); the same name once when they
/// are not. In `$request` and `$out`, `$m` is bound to the protocol's conversions module,
/// `$p` to its message module and `$q` to the call's message module; in `$out`, `$r` is the
/// response.
macro_rules! rpc {
    ($self:expr, $f5:ident($q5:ident) | $f6:ident($q6:ident),
     |$m:ident, $p:ident, $q:ident| $request:expr, |$r:ident| $out:expr) => {
        match $self.clone() {
            Client::V5(mut c) => {
                #[allow(unused_imports)]
                use {p5 as $p, p5::$q5 as $q, v5 as $m};
                let $r = c.$f5($request).await.map_err(status)?.into_inner();
                $out
            }
            Client::V6(mut c) => {
                #[allow(unused_imports)]
                use {p6 as $p, p6::$q6 as $q, v6 as $m};
                let $r = c.$f6($request).await.map_err(status)?.into_inner();
                $out
            }
        }
    };
    ($self:expr, $f:ident($q:ident), |$m:ident, $p:ident, $qm:ident| $request:expr,
     |$r:ident| $out:expr) => {
        rpc!($self, $f($q) | $f($q), |$m, $p, $qm| $request, |$r| $out)
    };
}

/// Decodes a `GetProviderSchema` response kept as protobuf bytes (the schema cache).
pub(crate) fn decode_schemas(protocol: u32, bytes: &[u8]) -> Result<(Schemas, Vec<Diag>), String> {
    use prost::Message as _;
    match protocol {
        5 => v5::schemas(
            p5::get_provider_schema::Response::decode(bytes).map_err(|e| e.to_string())?,
        ),
        6 => v6::schemas(
            p6::get_provider_schema::Response::decode(bytes).map_err(|e| e.to_string())?,
        ),
        p => Err(format!("protocol {p} is not 5 or 6")),
    }
}

impl Client {
    pub(crate) fn protocol(&self) -> u32 {
        match self {
            Client::V5(_) => 5,
            Client::V6(_) => 6,
        }
    }

    /// The schema, and the response as protobuf bytes (for the schema cache).
    pub(crate) async fn get_schema(&self) -> Result<(Schemas, Vec<Diag>, Vec<u8>), String> {
        use prost::Message as _;
        rpc!(
            self,
            get_schema(get_provider_schema) | get_provider_schema(get_provider_schema),
            |m, p, q| q::Request {},
            |r| {
                let bytes = r.encode_to_vec();
                let (s, d) = m::schemas(r)?;
                Ok((s, d, bytes))
            }
        )
    }

    pub(crate) async fn validate_provider(&self, config: Dyn) -> Result<Vec<Diag>, String> {
        rpc!(
            self,
            prepare_provider_config(prepare_provider_config)
                | validate_provider_config(validate_provider_config),
            |m, p, q| q::Request {
                config: m::to_dv(&config),
            },
            |r| Ok(m::diags(&r.diagnostics))
        )
    }

    pub(crate) async fn validate_resource(
        &self,
        type_: &str,
        config: Dyn,
    ) -> Result<Vec<Diag>, String> {
        rpc!(
            self,
            validate_resource_type_config(validate_resource_type_config)
                | validate_resource_config(validate_resource_config),
            |m, p, q| q::Request {
                type_name: type_.to_string(),
                config: m::to_dv(&config),
                client_capabilities: m::caps(),
            },
            |r| Ok(m::diags(&r.diagnostics))
        )
    }

    pub(crate) async fn validate_data(
        &self,
        type_: &str,
        config: Dyn,
    ) -> Result<Vec<Diag>, String> {
        rpc!(
            self,
            validate_data_source_config(validate_data_source_config)
                | validate_data_resource_config(validate_data_resource_config),
            |m, p, q| q::Request {
                type_name: type_.to_string(),
                config: m::to_dv(&config),
            },
            |r| Ok(m::diags(&r.diagnostics))
        )
    }

    pub(crate) async fn configure(&self, version: &str, config: Dyn) -> Result<Vec<Diag>, String> {
        rpc!(
            self,
            configure(configure) | configure_provider(configure_provider),
            |m, p, q| q::Request {
                terraform_version: version.to_string(),
                config: m::to_dv(&config),
                client_capabilities: m::caps(),
            },
            |r| Ok(m::diags(&r.diagnostics))
        )
    }

    pub(crate) async fn upgrade(
        &self,
        type_: &str,
        version: i64,
        raw_json: Vec<u8>,
    ) -> Result<(Dyn, Vec<Diag>), String> {
        rpc!(
            self,
            upgrade_resource_state(upgrade_resource_state),
            |m, p, q| q::Request {
                type_name: type_.to_string(),
                version,
                raw_state: Some(p::RawState {
                    json: raw_json,
                    flatmap: Default::default(),
                }),
            },
            |r| Ok((m::dv(r.upgraded_state), m::diags(&r.diagnostics)))
        )
    }

    pub(crate) async fn read(
        &self,
        type_: &str,
        state: Dyn,
        private: Vec<u8>,
    ) -> Result<ReadOut, String> {
        rpc!(
            self,
            read_resource(read_resource),
            |m, p, q| q::Request {
                type_name: type_.to_string(),
                current_state: m::to_dv(&state),
                private,
                provider_meta: m::no_meta(),
                client_capabilities: m::caps(),
                current_identity: None,
            },
            |r| Ok(ReadOut {
                new_state: m::dv(r.new_state),
                private: r.private,
                diags: m::diags(&r.diagnostics),
            })
        )
    }

    pub(crate) async fn plan(
        &self,
        type_: &str,
        prior: Dyn,
        proposed: Dyn,
        config: Dyn,
        prior_private: Vec<u8>,
    ) -> Result<PlanOut, String> {
        rpc!(
            self,
            plan_resource_change(plan_resource_change),
            |m, p, q| q::Request {
                type_name: type_.to_string(),
                prior_state: m::to_dv(&prior),
                proposed_new_state: m::to_dv(&proposed),
                config: m::to_dv(&config),
                prior_private,
                provider_meta: m::no_meta(),
                client_capabilities: m::caps(),
                prior_identity: None,
            },
            |r| {
                let mut requires_replace: Vec<String> =
                    r.requires_replace.iter().filter_map(m::root_name).collect();
                requires_replace.sort();
                requires_replace.dedup();
                Ok(PlanOut {
                    planned: m::dv(r.planned_state),
                    requires_replace,
                    private: r.planned_private,
                    legacy_type_system: r.legacy_type_system,
                    diags: m::diags(&r.diagnostics),
                })
            }
        )
    }

    pub(crate) async fn apply(
        &self,
        type_: &str,
        prior: Dyn,
        planned: Dyn,
        config: Dyn,
        planned_private: Vec<u8>,
    ) -> Result<ApplyOut, String> {
        rpc!(
            self,
            apply_resource_change(apply_resource_change),
            |m, p, q| q::Request {
                type_name: type_.to_string(),
                prior_state: m::to_dv(&prior),
                planned_state: m::to_dv(&planned),
                config: m::to_dv(&config),
                planned_private,
                provider_meta: m::no_meta(),
                planned_identity: None,
            },
            |r| Ok(ApplyOut {
                new_state: m::dv(r.new_state),
                private: r.private,
                legacy_type_system: r.legacy_type_system,
                diags: m::diags(&r.diagnostics),
            })
        )
    }

    pub(crate) async fn read_data(
        &self,
        type_: &str,
        config: Dyn,
    ) -> Result<(Dyn, Vec<Diag>), String> {
        rpc!(
            self,
            read_data_source(read_data_source),
            |m, p, q| q::Request {
                type_name: type_.to_string(),
                config: m::to_dv(&config),
                provider_meta: m::no_meta(),
                client_capabilities: m::caps(),
            },
            |r| Ok((m::dv(r.state), m::diags(&r.diagnostics)))
        )
    }

    pub(crate) async fn validate_ephemeral(
        &self,
        type_: &str,
        config: Dyn,
    ) -> Result<Vec<Diag>, String> {
        rpc!(
            self,
            validate_ephemeral_resource_config(validate_ephemeral_resource_config),
            |m, p, q| q::Request {
                type_name: type_.to_string(),
                config: m::to_dv(&config),
            },
            |r| Ok(m::diags(&r.diagnostics))
        )
    }

    pub(crate) async fn open_ephemeral(&self, type_: &str, config: Dyn) -> Result<OpenOut, String> {
        rpc!(
            self,
            open_ephemeral_resource(open_ephemeral_resource),
            |m, p, q| q::Request {
                type_name: type_.to_string(),
                config: m::to_dv(&config),
                client_capabilities: m::caps(),
            },
            |r| Ok(OpenOut {
                result: m::dv(r.result),
                renew_at: system_time(r.renew_at),
                private: r.private,
                diags: m::diags(&r.diagnostics),
            })
        )
    }

    pub(crate) async fn renew_ephemeral(
        &self,
        type_: &str,
        private: Option<Vec<u8>>,
    ) -> Result<RenewOut, String> {
        rpc!(
            self,
            renew_ephemeral_resource(renew_ephemeral_resource),
            |m, p, q| q::Request {
                type_name: type_.to_string(),
                private,
            },
            |r| Ok(RenewOut {
                renew_at: system_time(r.renew_at),
                private: r.private,
                diags: m::diags(&r.diagnostics),
            })
        )
    }

    pub(crate) async fn close_ephemeral(
        &self,
        type_: &str,
        private: Option<Vec<u8>>,
    ) -> Result<Vec<Diag>, String> {
        rpc!(
            self,
            close_ephemeral_resource(close_ephemeral_resource),
            |m, p, q| q::Request {
                type_name: type_.to_string(),
                private,
            },
            |r| Ok(m::diags(&r.diagnostics))
        )
    }

    pub(crate) async fn import(
        &self,
        type_: &str,
        id: &str,
    ) -> Result<(Vec<Imported>, Vec<Diag>), String> {
        rpc!(
            self,
            import_resource_state(import_resource_state),
            |m, p, q| q::Request {
                type_name: type_.to_string(),
                id: id.to_string(),
                client_capabilities: m::caps(),
                identity: None,
            },
            |r| {
                let imported = r.imported_resources.into_iter().map(|i| Imported {
                    type_name: i.type_name,
                    state: m::dv(i.state),
                    private: i.private,
                });
                Ok((imported.collect(), m::diags(&r.diagnostics)))
            }
        )
    }

    /// `CallFunction`: the result, or the provider's error (with the argument it blames).
    pub(crate) async fn call_function(
        &self,
        name: &str,
        args: Vec<Dyn>,
    ) -> Result<Result<Dyn, FunctionFailure>, String> {
        rpc!(
            self,
            call_function(call_function),
            |m, p, q| q::Request {
                name: name.to_string(),
                arguments: args.iter().filter_map(m::to_dv).collect(),
            },
            |r| Ok(match r.error {
                Some(e) => Err(FunctionFailure {
                    arg: e.function_argument.and_then(|i| usize::try_from(i).ok()),
                    message: e.text,
                }),
                None => Ok(m::dv(r.result)),
            })
        )
    }

    /// `StopProvider`: asks in-flight calls to return early. The provider's error, if any.
    pub(crate) async fn stop(&self) -> Result<Option<String>, String> {
        rpc!(
            self,
            stop(stop) | stop_provider(stop_provider),
            |m, p, q| q::Request {},
            |r| Ok(Some(r.error).filter(|e| !e.is_empty()))
        )
    }
}

#[cfg(test)]
mod nested_tests {
    use super::*;

    /// A protocol 6 nested attribute in each nesting mode: its type, and a configuration
    /// value that leaves out an optional attribute converts (that attribute null).
    #[test]
    fn nested_attributes_in_every_nesting_mode() {
        use p6::schema::object::NestingMode as M;
        let sub = |name: &str, required: bool| p6::schema::Attribute {
            name: name.into(),
            r#type: b"\"number\"".to_vec(),
            required,
            optional: !required,
            ..Default::default()
        };
        for (mode, wrap) in [
            (M::Single, None),
            (M::List, Some("list")),
            (M::Set, Some("set")),
            (M::Map, Some("map")),
        ] {
            let a = p6::schema::Attribute {
                name: "n".into(),
                nested_type: Some(p6::schema::Object {
                    attributes: vec![sub("a", true), sub("b", false)],
                    nesting: mode as i32,
                    ..Default::default()
                }),
                optional: true,
                ..Default::default()
            };
            let (ty, _) = v6::attribute(&a).unwrap();
            let one = crate::value::Value::object([("a", crate::value::Value::int(1))]);
            let config = match wrap {
                None => one,
                Some("map") => crate::value::Value::object([("k", one)]),
                Some(_) => crate::value::Value::Tuple(vec![one]),
            };
            let v = crate::eval::convert::convert(config, &ty)
                .unwrap_or_else(|e| panic!("{mode:?}: {e}"));
            let text = format!("{v:?}");
            assert!(text.contains("\"b\": Null(Number)"), "{mode:?}: {text}");
            // And it crosses the wire.
            let bytes = super::super::codec::encode(&v, &ty).unwrap();
            assert_eq!(
                super::super::codec::decode(&bytes, &ty).unwrap(),
                v,
                "{mode:?}"
            );
        }
    }
}
