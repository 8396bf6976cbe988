//! Terraform state in and out: `state import-tfstate` (a `terraform.tfstate` read into one
//! `StateImported` event and its outputs) and `state pull` (the state exported as a
//! `terraform.tfstate`). `show -json` is `plan::json::state_json`, the shape its plans share.
//!
//! The format itself (resources, instances, provider addresses) is the state crate's
//! (`cairn_state::import_tfstate`/`export_tfstate`); what needs the providers is here: their
//! schemas say which attributes are of dynamic type (Terraform wraps those as
//! `{"value": …, "type": …}`), and the stack configuration (`cairn.json`,
//! `CAIRN_PROVIDER_*`) configures the default provider instances an import conjures.

use super::providers::stack_config;
use crate::addr::ResourceInstanceAddr;
use crate::diag::Diagnostic;
use crate::provider::Provider;
use crate::value::{Type, Value};
use cairn_state::{EventBody, Snapshot, StoredValue};
use serde_json::{json, Value as J};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

type Packages = BTreeMap<String, Arc<dyn Provider>>;

/// A Terraform state read for import: its `StateImported` event and its root outputs.
pub(crate) struct TfImport {
    pub event: EventBody,
    pub outputs: BTreeMap<String, cairn_state::OutputValue>,
}

impl TfImport {
    /// (provider instances, resource instances) the import brings.
    pub(crate) fn counts(&self) -> (usize, usize) {
        match &self.event {
            EventBody::StateImported {
                providers,
                resources,
                ..
            } => (providers.len(), resources.len()),
            _ => (0, 0),
        }
    }
}

/// Reads a Terraform state (`text`) for import. Each conjured provider instance is a *default*
/// provider: configured from the stack configuration of `dir` and `env`, exactly as the
/// engine configures a default provider, so an immediate plan of an unchanged configuration
/// shows no changes.
pub(crate) fn read_tfstate(
    text: &str,
    dir: &Path,
    env: &BTreeMap<String, String>,
) -> Result<TfImport, Diagnostic> {
    let packages = crate::provider::builtin::builtin();
    let names: Vec<&str> = packages.keys().map(String::as_str).collect();
    let stack = stack_config(dir, env, &names)?;
    let default_config = |package: &str| {
        stack
            .get(package)
            .and_then(|v| v.to_stored().ok())
            .unwrap_or_else(|| StoredValue::Object(Default::default()))
    };
    let mut event = cairn_state::import_tfstate(text, &default_config)
        .map_err(|e| super::journal::state_diag(&e))?;
    if let EventBody::StateImported { resources, .. } = &mut event {
        for (addr, object) in resources.iter_mut() {
            unwrap_dynamic(&packages, addr, &mut object.attrs);
        }
    }
    Ok(TfImport {
        event,
        outputs: tfstate_outputs(text),
    })
}

/// The state as a `terraform.tfstate` document (`state pull`), attributes of dynamic type
/// wrapped as Terraform reads them.
pub(crate) fn export(snap: &Snapshot, lineage: &str) -> J {
    let mut doc = cairn_state::export_tfstate(snap, lineage, snap.head);
    wrap_dynamic(&crate::provider::builtin::builtin(), &mut doc);
    doc
}

/// Terraform writes attributes of dynamic type (`terraform_data`'s `input`/`output`) as
/// `{"value": …, "type": …}`; the schema says which attributes those are, and Cairn stores
/// the value itself.
fn unwrap_dynamic(packages: &Packages, addr: &ResourceInstanceAddr, attrs: &mut StoredValue) {
    let r = &addr.resource;
    let Some(block) = packages
        .get(r.package())
        .and_then(|p| p.schema().block(r.mode, &r.type_))
    else {
        return;
    };
    let StoredValue::Object(m) = attrs else {
        return;
    };
    for (name, a) in &block.attributes {
        if a.ty != Type::Dynamic {
            continue;
        }
        if let Some(v) = m.get_mut(name) {
            if let StoredValue::Object(w) = v {
                if w.len() == 2 && w.contains_key("type") {
                    if let Some(inner) = w.remove("value") {
                        *v = inner;
                    }
                }
            }
        }
    }
}

/// The inverse of `unwrap_dynamic` on an exported Terraform state: attributes of dynamic type
/// are written as `{"value": …, "type": …}`, as Terraform reads them.
fn wrap_dynamic(packages: &Packages, doc: &mut J) {
    let Some(resources) = doc.get_mut("resources").and_then(J::as_array_mut) else {
        return;
    };
    for r in resources {
        let mode = match r.get("mode").and_then(J::as_str) {
            Some("data") => crate::addr::Mode::Data,
            _ => crate::addr::Mode::Managed,
        };
        let type_ = r.get("type").and_then(J::as_str).unwrap_or("").to_string();
        let Some(block) = packages
            .get(crate::addr::package_of(&type_))
            .and_then(|p| p.schema().block(mode, &type_))
        else {
            continue;
        };
        let dynamic: Vec<&String> = block
            .attributes
            .iter()
            .filter(|(_, a)| a.ty == Type::Dynamic)
            .map(|(n, _)| n)
            .collect();
        for inst in r
            .get_mut("instances")
            .and_then(J::as_array_mut)
            .into_iter()
            .flatten()
        {
            let Some(attrs) = inst.get_mut("attributes").and_then(J::as_object_mut) else {
                continue;
            };
            for name in &dynamic {
                if let Some(v) = attrs.get_mut(name.as_str()) {
                    if !v.is_null() {
                        let ty = crate::plan::json::type_json(&Value::from_json(v).type_of());
                        *v = json!({"value": v.clone(), "type": ty});
                    }
                }
            }
        }
    }
}

/// The root outputs of a Terraform state, as an `OutputsSet`'s map.
fn tfstate_outputs(text: &str) -> BTreeMap<String, cairn_state::OutputValue> {
    let Ok(doc) = serde_json::from_str::<J>(text) else {
        return BTreeMap::new();
    };
    doc.get("outputs")
        .and_then(J::as_object)
        .map(|o| {
            o.iter()
                .filter_map(|(name, out)| {
                    let value = out.get("value")?;
                    let sensitive = out.get("sensitive").and_then(J::as_bool).unwrap_or(false);
                    Some((
                        name.clone(),
                        cairn_state::OutputValue {
                            value: StoredValue::from_json(value),
                            sensitive,
                        },
                    ))
                })
                .collect()
        })
        .unwrap_or_default()
}
