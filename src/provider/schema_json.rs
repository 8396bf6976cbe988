//! `providers schema -json`: the providers' schemas in Terraform's document shape
//! (`format_version` "1.0", `provider_schemas` keyed by the full source address), as
//! Terraform 1.11's `jsonprovider` package writes it.
//!
//! Decisions:
//! - A plugin's schema is its `GetProviderSchema` answer itself (asked live, as Terraform
//!   does), rendered field by field from the protobuf message: descriptions and their kinds,
//!   `deprecated`, `sensitive`, `write_only`, nested attribute types, `group` nesting, schema
//!   versions, ephemeral resources and functions survive exactly, which the engine's `Block`
//!   (what the engine needs to evaluate) does not keep.
//! - A built-in provider's schema is its `Block`s, with `description_kind` "plain" and
//!   version 0. The built-in `terraform` provider has no configuration block, so its
//!   `provider` is `{"version":0}`, as Terraform prints its own.
//! - Keys are in Go's order: struct fields in declaration order, map keys sorted (serde_json
//!   keeps insertion order here). Type JSON from a plugin is re-written with sorted object
//!   keys, as cty re-marshals it. Go's HTML escaping of `<`, `>`, `&` is applied by
//!   [`go_json`] on the whole text.

use super::install::{CliConfig, Installed};
use super::plugin::launch::run_sync;
use super::plugin::proto::{tfplugin5 as p5, tfplugin6 as p6};
use super::Provider;
use crate::addr::provider_source::SourceAddr;
use crate::diag::{Diagnostic, Diagnostics};
use crate::schema::{Attribute, Block, FunctionSig, Nesting};
use crate::value::Type;
use serde_json::{json, Map, Value as J};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The whole document: `{"format_version":"1.0","provider_schemas":{…}}` (the map left out
/// when empty, as Go's `omitempty` does).
pub(crate) fn document(schemas: BTreeMap<SourceAddr, J>) -> J {
    let mut doc = Map::new();
    doc.insert("format_version".into(), json!("1.0"));
    if !schemas.is_empty() {
        let by_name: BTreeMap<String, J> = schemas
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect();
        doc.insert(
            "provider_schemas".into(),
            J::Object(by_name.into_iter().collect()),
        );
    }
    J::Object(doc)
}

/// Compact JSON text as Go's `encoding/json` writes it: `<`, `>`, `&`, U+2028 and U+2029
/// escaped. (They can only occur inside strings, so a replacement on the text is exact.)
pub(crate) fn go_json(v: &J) -> String {
    let text = serde_json::to_string(v).unwrap_or_default();
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '<' => out.push_str("\\u003c"),
            '>' => out.push_str("\\u003e"),
            '&' => out.push_str("\\u0026"),
            '\u{2028}' => out.push_str("\\u2028"),
            '\u{2029}' => out.push_str("\\u2029"),
            c => out.push(c),
        }
    }
    out
}

/// A type's JSON (cty's form: `"string"`, `["list","string"]`, `["object",{…},["opt"]]`).
pub(crate) fn type_json(t: &Type) -> J {
    super::plugin::codec::type_to_json(t)
}

/// A built-in provider's schemas (see the module docs).
pub(crate) fn builtin_json(p: &dyn Provider) -> J {
    let s = p.schema();
    let mut out = Map::new();
    let empty_provider = s.provider.attributes.is_empty() && s.provider.blocks.is_empty();
    if p.package() == "terraform" && empty_provider {
        out.insert("provider".into(), json!({"version": 0}));
    } else {
        out.insert("provider".into(), builtin_schema(&s.provider));
    }
    for (key, types) in [
        ("resource_schemas", &s.resources),
        ("data_source_schemas", &s.data_sources),
    ] {
        if !types.is_empty() {
            let m: Map<String, J> = types
                .iter()
                .map(|(k, b)| (k.clone(), builtin_schema(b)))
                .collect();
            out.insert(key.into(), J::Object(m));
        }
    }
    let functions = p.functions();
    if !functions.is_empty() {
        let m: Map<String, J> = functions
            .iter()
            .map(|(k, f)| (k.clone(), function_sig_json(f)))
            .collect();
        out.insert("functions".into(), J::Object(m));
    }
    J::Object(out)
}

fn builtin_schema(b: &Block) -> J {
    json!({"version": 0, "block": builtin_block(b)})
}

fn builtin_block(b: &Block) -> J {
    let mut out = Map::new();
    if !b.attributes.is_empty() {
        let m: Map<String, J> = b
            .attributes
            .iter()
            .map(|(k, a)| (k.clone(), builtin_attribute(a)))
            .collect();
        out.insert("attributes".into(), J::Object(m));
    }
    if !b.blocks.is_empty() {
        let m: Map<String, J> = b
            .blocks
            .iter()
            .map(|(k, nb)| {
                let mut t = Map::new();
                let mode = match nb.nesting {
                    Nesting::Single => "single",
                    Nesting::List => "list",
                    Nesting::Set => "set",
                    Nesting::Map => "map",
                };
                t.insert("nesting_mode".into(), json!(mode));
                t.insert("block".into(), builtin_block(&nb.block));
                if nb.min_items > 0 {
                    t.insert("min_items".into(), json!(nb.min_items));
                }
                if let Some(max) = nb.max_items.filter(|m| *m > 0) {
                    t.insert("max_items".into(), json!(max));
                }
                (k.clone(), J::Object(t))
            })
            .collect();
        out.insert("block_types".into(), J::Object(m));
    }
    if !b.description.is_empty() {
        out.insert("description".into(), json!(b.description));
    }
    out.insert("description_kind".into(), json!("plain"));
    J::Object(out)
}

fn builtin_attribute(a: &Attribute) -> J {
    let mut out = Map::new();
    out.insert("type".into(), type_json(&a.ty));
    if !a.description.is_empty() {
        out.insert("description".into(), json!(a.description));
    }
    out.insert("description_kind".into(), json!("plain"));
    for (key, on) in [
        ("required", a.required),
        ("optional", a.optional),
        ("computed", a.computed),
        ("sensitive", a.sensitive),
    ] {
        if on {
            out.insert(key.into(), json!(true));
        }
    }
    J::Object(out)
}

/// A function signature as `jsonfunction` writes it (description, summary, return type,
/// parameters, variadic parameter).
pub(crate) fn function_sig_json(f: &FunctionSig) -> J {
    let mut out = Map::new();
    if !f.summary.is_empty() {
        out.insert("summary".into(), json!(f.summary));
    }
    out.insert("return_type".into(), type_json(&f.ret));
    let param = |p: &crate::schema::FunctionParam| {
        let mut m = Map::new();
        if !p.name.is_empty() {
            m.insert("name".into(), json!(p.name));
        }
        if p.allow_null {
            m.insert("is_nullable".into(), json!(true));
        }
        m.insert("type".into(), type_json(&p.ty));
        J::Object(m)
    };
    if !f.params.is_empty() {
        out.insert(
            "parameters".into(),
            J::Array(f.params.iter().map(param).collect()),
        );
    }
    if let Some(v) = &f.variadic {
        out.insert("variadic_parameter".into(), param(v));
    }
    J::Object(out)
}

/// The schemas of the providers at these source addresses, each rendered: an installed
/// plugin's (dev override or locked package, `install::Installed::locate`), else the built-in
/// provider of that type. A provider with neither is an error saying to run `cairn init`.
pub(crate) fn schemas_for(
    addrs: &BTreeSet<SourceAddr>,
    config_dir: &Path,
    env: &BTreeMap<String, String>,
) -> (BTreeMap<SourceAddr, J>, Diagnostics) {
    let mut diags = Diagnostics::new();
    let mut out = BTreeMap::new();
    let cli = match CliConfig::from_env(env, config_dir) {
        Ok(c) => c,
        Err(d) => {
            diags.push(d);
            return (out, diags);
        }
    };
    let installed = match Installed::load(config_dir, &cli) {
        Ok(i) => i,
        Err(d) => {
            diags.push(d);
            return (out, diags);
        }
    };
    let builtin = super::builtin::builtin();
    for addr in addrs {
        match installed.locate(addr) {
            Ok(Some(located)) => match plugin_json(&located.path, env) {
                Ok(j) => {
                    out.insert(addr.clone(), j);
                }
                Err(e) => diags.push(Diagnostic::error(
                    "Failed to load plugin schemas",
                    format!("Error while loading the schema of provider {addr}: {e}"),
                )),
            },
            Ok(None) => match builtin.get(&addr.type_) {
                Some(p) => {
                    out.insert(addr.clone(), builtin_json(p.as_ref()));
                }
                None => diags.push(Diagnostic::error(
                    "Missing required provider",
                    format!(
                        "The provider {addr} is not installed and Cairn has no built-in \
                         provider {:?}. Run `cairn init` to install it.",
                        addr.type_
                    ),
                )),
            },
            Err(d) => diags.push(d),
        }
    }
    (out, diags)
}

/// A plugin's schemas: starts the binary at `path`, asks `GetProviderSchema` and renders the
/// answer (see the module docs).
pub(crate) fn plugin_json(path: &Path, env: &BTreeMap<String, String>) -> Result<J, String> {
    let (path, env) = (path.to_path_buf(), env.clone());
    let (protocol, bytes) =
        run_sync(async move { super::plugin::provider::raw_schema(&path, &env).await })?;
    response_json(protocol, &bytes)
}

/// Renders a `GetProviderSchema` response kept as protobuf bytes.
pub(crate) fn response_json(protocol: u32, bytes: &[u8]) -> Result<J, String> {
    use prost::Message as _;
    match protocol {
        5 => Ok(v5::provider(
            &p5::get_provider_schema::Response::decode(bytes).map_err(|e| e.to_string())?,
        )),
        6 => Ok(v6::provider(
            &p6::get_provider_schema::Response::decode(bytes).map_err(|e| e.to_string())?,
        )),
        p => Err(format!("protocol {p} is not 5 or 6")),
    }
}

/// Type JSON as the plugin sent it, re-written with sorted object keys (cty's marshalling);
/// `None` when there is none (a nested attribute) or it is not JSON.
fn raw_type(bytes: &[u8]) -> Option<J> {
    fn sorted(v: J) -> J {
        match v {
            J::Object(m) => {
                let b: BTreeMap<String, J> = m.into_iter().map(|(k, v)| (k, sorted(v))).collect();
                J::Object(b.into_iter().collect())
            }
            J::Array(a) => J::Array(a.into_iter().map(sorted).collect()),
            v => v,
        }
    }
    if bytes.is_empty() {
        return None;
    }
    serde_json::from_slice(bytes).ok().map(sorted)
}

fn flags(out: &mut Map<String, J>, pairs: &[(&str, bool)]) {
    for (k, on) in pairs {
        if *on {
            out.insert((*k).into(), json!(true));
        }
    }
}

fn kind(markdown: bool) -> J {
    json!(if markdown { "markdown" } else { "plain" })
}

/// The conversions, written once for both protocols' generated messages.
macro_rules! render {
    ($p:ident) => {
        use super::*;

        pub(super) fn provider(r: &$p::get_provider_schema::Response) -> J {
            let mut out = Map::new();
            out.insert(
                "provider".into(),
                r.provider
                    .as_ref()
                    .map(schema)
                    .unwrap_or_else(|| json!({"version": 0})),
            );
            for (key, types) in [
                ("resource_schemas", &r.resource_schemas),
                ("data_source_schemas", &r.data_source_schemas),
                ("ephemeral_resource_schemas", &r.ephemeral_resource_schemas),
            ] {
                if !types.is_empty() {
                    let sorted: BTreeMap<&String, &$p::Schema> = types.iter().collect();
                    let m: Map<String, J> = sorted
                        .into_iter()
                        .map(|(k, s)| (k.clone(), schema(s)))
                        .collect();
                    out.insert(key.into(), J::Object(m));
                }
            }
            if !r.functions.is_empty() {
                let sorted: BTreeMap<&String, &$p::Function> = r.functions.iter().collect();
                let m: Map<String, J> = sorted
                    .into_iter()
                    .map(|(k, f)| (k.clone(), function(f)))
                    .collect();
                out.insert("functions".into(), J::Object(m));
            }
            J::Object(out)
        }

        fn schema(s: &$p::Schema) -> J {
            let mut out = Map::new();
            out.insert("version".into(), json!(s.version.max(0)));
            out.insert(
                "block".into(),
                s.block
                    .as_ref()
                    .map(block)
                    .unwrap_or_else(|| json!({"description_kind": "plain"})),
            );
            J::Object(out)
        }

        fn block(b: &$p::schema::Block) -> J {
            let mut out = Map::new();
            if !b.attributes.is_empty() {
                let sorted: BTreeMap<&String, &$p::schema::Attribute> =
                    b.attributes.iter().map(|a| (&a.name, a)).collect();
                let m: Map<String, J> = sorted
                    .into_iter()
                    .map(|(k, a)| (k.clone(), attribute(a)))
                    .collect();
                out.insert("attributes".into(), J::Object(m));
            }
            if !b.block_types.is_empty() {
                let sorted: BTreeMap<&String, &$p::schema::NestedBlock> =
                    b.block_types.iter().map(|n| (&n.type_name, n)).collect();
                let m: Map<String, J> = sorted
                    .into_iter()
                    .map(|(k, n)| (k.clone(), nested_block(n)))
                    .collect();
                out.insert("block_types".into(), J::Object(m));
            }
            if !b.description.is_empty() {
                out.insert("description".into(), json!(b.description));
            }
            out.insert(
                "description_kind".into(),
                kind(b.description_kind == $p::StringKind::Markdown as i32),
            );
            flags(&mut out, &[("deprecated", b.deprecated)]);
            J::Object(out)
        }

        fn nested_block(n: &$p::schema::NestedBlock) -> J {
            use $p::schema::nested_block::NestingMode as M;
            let mode = match M::try_from(n.nesting).unwrap_or(M::Invalid) {
                M::Single => "single",
                M::Group => "group",
                M::List => "list",
                M::Set => "set",
                M::Map => "map",
                M::Invalid => "invalid",
            };
            let mut out = Map::new();
            out.insert("nesting_mode".into(), json!(mode));
            out.insert(
                "block".into(),
                n.block
                    .as_ref()
                    .map(block)
                    .unwrap_or_else(|| json!({"description_kind": "plain"})),
            );
            if n.min_items > 0 {
                out.insert("min_items".into(), json!(n.min_items));
            }
            if n.max_items > 0 {
                out.insert("max_items".into(), json!(n.max_items));
            }
            J::Object(out)
        }

        fn attribute(a: &$p::schema::Attribute) -> J {
            let mut out = Map::new();
            if let Some(t) = raw_type(&a.r#type) {
                out.insert("type".into(), t);
            }
            if let Some(n) = nested_type(a) {
                out.insert("nested_type".into(), n);
            }
            if !a.description.is_empty() {
                out.insert("description".into(), json!(a.description));
            }
            out.insert(
                "description_kind".into(),
                kind(a.description_kind == $p::StringKind::Markdown as i32),
            );
            flags(
                &mut out,
                &[
                    ("deprecated", a.deprecated),
                    ("required", a.required),
                    ("optional", a.optional),
                    ("computed", a.computed),
                    ("sensitive", a.sensitive),
                    ("write_only", a.write_only),
                ],
            );
            J::Object(out)
        }

        fn function(f: &$p::Function) -> J {
            let mut out = Map::new();
            if !f.description.is_empty() {
                out.insert("description".into(), json!(f.description));
            }
            if !f.summary.is_empty() {
                out.insert("summary".into(), json!(f.summary));
            }
            if !f.deprecation_message.is_empty() {
                out.insert("deprecation_message".into(), json!(f.deprecation_message));
            }
            out.insert(
                "return_type".into(),
                f.r#return
                    .as_ref()
                    .and_then(|r| raw_type(&r.r#type))
                    .unwrap_or(J::Null),
            );
            if !f.parameters.is_empty() {
                out.insert(
                    "parameters".into(),
                    J::Array(f.parameters.iter().map(parameter).collect()),
                );
            }
            if let Some(v) = &f.variadic_parameter {
                out.insert("variadic_parameter".into(), parameter(v));
            }
            J::Object(out)
        }

        fn parameter(p: &$p::function::Parameter) -> J {
            let mut out = Map::new();
            if !p.name.is_empty() {
                out.insert("name".into(), json!(p.name));
            }
            if !p.description.is_empty() {
                out.insert("description".into(), json!(p.description));
            }
            flags(&mut out, &[("is_nullable", p.allow_null_value)]);
            out.insert(
                "type".into(),
                raw_type(&p.r#type).unwrap_or(J::Null),
            );
            J::Object(out)
        }
    };
}

mod v5 {
    render!(p5);

    fn nested_type(_: &p5::schema::Attribute) -> Option<J> {
        None
    }
}

mod v6 {
    render!(p6);

    /// A protocol 6 nested attribute's object: its attributes and nesting mode.
    fn nested_type(a: &p6::schema::Attribute) -> Option<J> {
        let obj = a.nested_type.as_ref()?;
        use p6::schema::object::NestingMode as M;
        let mode = match M::try_from(obj.nesting).unwrap_or(M::Invalid) {
            M::Single => "single",
            M::List => "list",
            M::Set => "set",
            M::Map => "map",
            M::Invalid => "invalid",
        };
        let mut out = Map::new();
        if !obj.attributes.is_empty() {
            let sorted: BTreeMap<&String, &p6::schema::Attribute> =
                obj.attributes.iter().map(|a| (&a.name, a)).collect();
            let m: Map<String, J> = sorted
                .into_iter()
                .map(|(k, a)| (k.clone(), attribute(a)))
                .collect();
            out.insert("attributes".into(), J::Object(m));
        }
        out.insert("nesting_mode".into(), json!(mode));
        Some(J::Object(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_escapes_html_characters() {
        assert_eq!(
            go_json(&json!({"d": "<a> & b\u{2028}"})),
            r#"{"d":"\u003ca\u003e \u0026 b\u2028"}"#
        );
    }

    #[test]
    fn the_builtin_terraform_provider_has_no_configuration_block() {
        let all = super::super::builtin::builtin_with(super::super::host::Host::at("/"));
        let j = builtin_json(all["terraform"].as_ref());
        assert_eq!(j["provider"], json!({"version": 0}));
        let null = builtin_json(all["null"].as_ref());
        assert_eq!(
            null["provider"],
            json!({"version": 0, "block": {"description_kind": "plain"}})
        );
    }
}
