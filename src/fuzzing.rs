//! The decode and load entry points the fuzz targets (`fixtures/fuzz/`) and their regression
//! tests (`src/tests/fuzz.rs`) call: each is the function Cairn itself runs on that input,
//! reached without a network, a plugin process or a state store. Nothing here changes what
//! those functions do; the invariants the targets check live with the targets
//! (`fixtures/fuzz/src/checks.rs`).

use crate::plan::Plan;
use crate::provider::install::platform::Platform;
use crate::value::{Type, Value};
use std::path::Path;

/// A saved plan file's bytes (`plan -out=FILE`), decoded as `apply FILE` and `show FILE` read
/// them (unencrypted).
pub fn decode_plan(bytes: &[u8]) -> Result<Plan, String> {
    crate::plan::saved::decode_plan(bytes, "plan.tfplan", None)
        .map(|(plan, _)| plan)
        .map_err(|d| format!("{}: {}", d.summary, d.detail))
}

/// A plan as `cairn show FILE` prints it.
pub fn render_plan(plan: &Plan) -> String {
    crate::plan::render::render_plan(plan, &crate::plan::render::RenderOptions::default())
}

/// A plan as `cairn show -json FILE` prints it.
pub fn plan_json(plan: &Plan) -> serde_json::Value {
    crate::plan::json::plan_json(plan)
}

/// A cty type from its JSON form, as plugin schemas and dynamic values carry it.
pub fn type_from_json(j: &serde_json::Value) -> Result<Type, String> {
    crate::provider::plugin::codec::type_from_json(j)
}

/// The JSON form of a type.
pub fn type_to_json(t: &Type) -> serde_json::Value {
    crate::provider::plugin::codec::type_to_json(t)
}

/// A plugin's msgpack `DynamicValue`, decoded against `ty`.
pub fn decode_msgpack(bytes: &[u8], ty: &Type) -> Result<Value, String> {
    crate::provider::plugin::codec::decode(bytes, ty)
}

/// A plugin's JSON `DynamicValue` (or `raw_state`), decoded against `ty`.
pub fn decode_json(bytes: &[u8], ty: &Type) -> Result<Value, String> {
    crate::provider::plugin::codec::decode_json(bytes, ty)
}

/// A value encoded as Cairn sends it to a plugin.
pub fn encode_msgpack(v: &Value, ty: &Type) -> Result<Vec<u8>, String> {
    crate::provider::plugin::codec::encode(v, ty)
}

/// A plugin's `GetProviderSchema` response (protobuf, protocol 5 or 6), decoded: the value
/// type of each of its schemas (provider, resources, data sources, ephemeral resources).
pub fn decode_schemas(protocol: u32, bytes: &[u8]) -> Result<Vec<(String, Type)>, String> {
    let (s, _) = crate::provider::plugin::rpc::decode_schemas(protocol, bytes)?;
    let mut out = Vec::new();
    if let Some(p) = &s.provider {
        out.push(("provider".to_string(), p.ty.clone()));
    }
    for (kind, map) in [
        ("resource", &s.resources),
        ("data", &s.data_sources),
        ("ephemeral", &s.ephemeral_resources),
    ] {
        for (name, t) in map {
            out.push((format!("{kind} {name}"), t.ty.clone()));
        }
    }
    Ok(out)
}

/// A provider registry's answers, each read as `cairn init` reads it.
pub mod registry {
    use super::*;
    use crate::provider::install::{modules, remote};

    /// The platform the targets ask packages for.
    pub fn platform() -> Platform {
        Platform {
            os: "linux".into(),
            arch: "amd64".into(),
        }
    }

    /// The service discovery document (`/.well-known/terraform.json`) of `host`: the base
    /// URL of its service `name`.
    pub fn service(doc: &str, name: &str) -> Result<String, String> {
        remote::service_from_doc(doc, "registry.example.com", name).map(|u| u.to_string())
    }

    /// A provider's `versions` answer: the versions with a package for [`platform`].
    pub fn provider_versions(doc: &str) -> Result<Vec<String>, String> {
        remote::provider_versions_answer(doc, &platform())
            .map(|v| v.iter().map(|v| v.to_string()).collect())
    }

    /// A provider's `download` answer, its `SHA256SUMS` and their detached signature: the
    /// checksum the package must have, the `zh:` hashes to lock and the key that signed.
    pub fn provider_download(
        doc: &str,
        sums: &[u8],
        sig: &[u8],
    ) -> Result<(String, Vec<String>, String), String> {
        remote::download_answer(doc, sums, sig)
    }

    /// A module's `versions` answer.
    pub fn module_versions(doc: &str) -> Result<Vec<String>, String> {
        modules::module_versions_answer(doc).map(|v| v.iter().map(|v| v.to_string()).collect())
    }

    /// A module `download` answer's body: the location to fetch, made absolute.
    pub fn module_location(body: &str) -> Option<String> {
        modules::location_answer(body)
    }

    /// A module archive (`kind`: `zip`, `tar.gz`) unpacked into `dest` as `init` unpacks it.
    pub fn unpack(archive: &Path, kind: &str, dest: &Path) -> Result<(), String> {
        modules::unpack(archive, kind, dest)
    }
}

/// What a command reported about a configuration: whether it had errors, and each diagnostic
/// as the CLI prints it (text, then JSON).
pub struct Checked {
    pub has_errors: bool,
    pub rendered: Vec<String>,
    /// The errors that name no place in a file although the configuration's files were read
    /// (summary and detail).
    pub errors_without_place: Vec<String>,
}

fn checked(
    report_diags: &crate::diag::Diagnostics,
    config: Option<&crate::config::Config>,
) -> Checked {
    let empty = crate::diag::SourceMap::new();
    let map = config.map(|c| &c.sources).unwrap_or(&empty);
    let mut rendered = Vec::new();
    let mut errors_without_place = Vec::new();
    for d in report_diags.iter() {
        rendered.push(map.render(d, false));
        rendered.push(map.to_json(d).to_string());
        if d.is_error() && d.span.is_none() && d.address.is_none() {
            errors_without_place.push(format!("{}: {}", d.summary, d.detail));
        }
    }
    Checked {
        has_errors: report_diags.has_errors(),
        rendered,
        errors_without_place,
    }
}

/// The configuration in `dir` checked as `cairn validate` checks it (built-in providers).
pub fn validate(dir: &Path) -> Checked {
    let report =
        crate::engine::schema_checks::validate(&crate::engine::schema_checks::ValidateRequest {
            dir: dir.to_path_buf(),
            state_dir: dir.join(".cairn"),
            env: Default::default(),
            inputs: crate::config::EarlyInputs::in_dir(dir),
        });
    checked(&report.diags, report.config.as_deref())
}

/// The configuration in `dir` evaluated as `cairn inspect` evaluates it (variables from its
/// `.tfvars` files, no state, built-in providers): the diagnostics, and the root module's
/// outputs.
pub fn inspect(dir: &Path) -> (Checked, Vec<(String, Value)>) {
    thread_local! {
        static RT: tokio::runtime::Runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a tokio runtime");
    }
    let opts = crate::engine::api::Options::new(dir);
    let report = RT.with(|rt| rt.block_on(crate::engine::api::inspect(&opts)));
    let outputs = report
        .result
        .as_ref()
        .map(|i| {
            i.outputs
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        })
        .unwrap_or_default();
    (checked(&report.diags, report.config.as_deref()), outputs)
}

/// A Terraform state (`state import-tfstate FILE`) read for import as the CLI reads it, with
/// the stack configuration of `dir`: the event it records.
pub fn import_tfstate(text: &str, dir: &Path) -> Result<cairn_state::EventBody, String> {
    crate::engine::terraform_state::read_tfstate(text, dir, &Default::default())
        .map(|i| i.event)
        .map_err(|d| format!("{}: {}", d.summary, d.detail))
}

/// The state as `state pull` writes it (a Terraform state, format version 4).
pub fn export_tfstate(snapshot: &cairn_state::Snapshot) -> serde_json::Value {
    crate::engine::terraform_state::export(snapshot, "fuzz")
}
