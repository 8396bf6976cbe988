//! Terraform state (format version 4): export of a snapshot, import into a `StateImported` event.
//!
//! Export writes what Terraform 1.x writes, so other tools can read it: resources grouped by
//! module instance, mode, type and name; provider configuration addresses with the full source
//! address of the package (`provider["registry.terraform.io/hashicorp/sim"]`, `terraform` as
//! `terraform.io/builtin/terraform`); dependencies as configuration resource addresses; tainted
//! objects with `"status": "tainted"`; deposed objects with `"deposed"`; sensitive values listed
//! in `sensitive_attributes` as Terraform's attribute paths.
//!
//! Import takes the package from the last segment of the provider's source address, so both
//! Terraform's full addresses and bare `provider["sim"]` work. Terraform's state has no provider
//! instances, only provider addresses on resources, so one instance is conjured per address
//! (configured by the caller's `default_config`), and every resource is attached to it.
//! Dependencies name resources; they become every imported instance of that resource. Data
//! resources are not imported (the next plan reads them again) and neither are outputs (the
//! next apply sets them). Deposed objects are refused rather than silently dropped.
//!
//! Values are untyped in the JSON: arrays come back as tuples and objects as objects; the
//! engine converts them with the provider's schema when it loads them.

use crate::addr::{
    InstanceKey, Mode, ModulePath, ProviderAddr, ResourceAddr, ResourceInstanceAddr,
};
use crate::error::StateError;
use crate::event::{EventBody, ObjectMeta, ProviderInstance, ResourceObject};
use crate::snapshot::Snapshot;
use crate::stored_value::StoredValue;
use base64::Engine as _;
use serde_json::{json, Map, Value as J};
use std::collections::{BTreeMap, BTreeSet};

/// The Terraform version written into exported state (the format Cairn mirrors).
pub(crate) const TERRAFORM_VERSION: &str = "1.11.0";

/// The source address Terraform uses for a provider package.
pub(crate) fn source_address(package: &str) -> String {
    if package == "terraform" {
        "terraform.io/builtin/terraform".into()
    } else {
        format!("registry.terraform.io/hashicorp/{package}")
    }
}

/// `module.m.provider["registry.terraform.io/hashicorp/sim"].alias`
fn provider_string(addr: &ProviderAddr) -> String {
    ProviderAddr {
        module: addr.module.clone(),
        package: source_address(&addr.package),
        alias: addr.alias.clone(),
        key: None,
    }
    .to_string()
}

/// The cty type of a stored value, in Terraform's JSON type notation.
fn type_json(v: &StoredValue) -> J {
    let elem = |items: &[StoredValue]| items.first().map(type_json).unwrap_or(json!("dynamic"));
    match v {
        StoredValue::Null => json!("dynamic"),
        StoredValue::Bool(_) => json!("bool"),
        StoredValue::Number(_) => json!("number"),
        StoredValue::String(_) => json!("string"),
        StoredValue::List(items) => json!(["list", elem(items)]),
        StoredValue::Set(items) => json!(["set", elem(items)]),
        StoredValue::Tuple(items) => {
            json!(["tuple", items.iter().map(type_json).collect::<Vec<_>>()])
        }
        StoredValue::Map(m) => {
            let first: Vec<_> = m.values().take(1).cloned().collect();
            json!(["map", elem(&first)])
        }
        StoredValue::Object(m) => {
            let attrs: Map<String, J> = m.iter().map(|(k, v)| (k.clone(), type_json(v))).collect();
            json!(["object", attrs])
        }
        StoredValue::Sensitive(inner) => type_json(inner),
    }
}

/// The paths (Terraform's `[{"type": "get_attr", "value": "x"}, …]`) of sensitive values.
fn sensitive_paths(v: &StoredValue, path: &mut Vec<J>, out: &mut Vec<J>) {
    match v {
        StoredValue::Sensitive(_) => out.push(J::Array(path.clone())),
        StoredValue::Object(m) => {
            for (k, x) in m {
                path.push(json!({"type": "get_attr", "value": k}));
                sensitive_paths(x, path, out);
                path.pop();
            }
        }
        StoredValue::Map(m) => {
            for (k, x) in m {
                path.push(json!({"type": "index", "value": {"value": k, "type": "string"}}));
                sensitive_paths(x, path, out);
                path.pop();
            }
        }
        StoredValue::List(items) | StoredValue::Tuple(items) => {
            for (i, x) in items.iter().enumerate() {
                path.push(json!({"type": "index", "value": {"value": i, "type": "number"}}));
                sensitive_paths(x, path, out);
                path.pop();
            }
        }
        // Set elements have no path in Terraform's notation.
        _ => {}
    }
}

/// Marks the value at a Terraform attribute path sensitive (paths that do not match are
/// ignored, as Terraform ignores them).
fn mark_sensitive(v: &mut StoredValue, path: &[J]) {
    let Some((step, rest)) = path.split_first() else {
        if !matches!(v, StoredValue::Sensitive(_)) {
            *v = StoredValue::Sensitive(Box::new(std::mem::replace(v, StoredValue::Null)));
        }
        return;
    };
    let value = &step["value"];
    let next = match (step["type"].as_str(), v) {
        (Some("get_attr"), StoredValue::Object(m) | StoredValue::Map(m)) => {
            value.as_str().and_then(|k| m.get_mut(k))
        }
        (Some("index"), StoredValue::Object(m) | StoredValue::Map(m)) => {
            value["value"].as_str().and_then(|k| m.get_mut(k))
        }
        (Some("index"), StoredValue::List(items) | StoredValue::Tuple(items)) => value["value"]
            .as_u64()
            .and_then(|i| items.get_mut(usize::try_from(i).ok()?)),
        _ => None,
    };
    if let Some(next) = next {
        mark_sensitive(next, rest);
    }
}

fn instance_json(
    key: &Option<InstanceKey>,
    attrs: &StoredValue,
    deps: &[ResourceInstanceAddr],
    tainted: bool,
    deposed: Option<&str>,
    meta: &ObjectMeta,
) -> J {
    let mut o = Map::new();
    match key {
        Some(InstanceKey::Int(i)) => {
            o.insert("index_key".into(), json!(i));
        }
        Some(InstanceKey::Str(s)) => {
            o.insert("index_key".into(), json!(s));
        }
        None => {}
    }
    if tainted {
        o.insert("status".into(), json!("tainted"));
    }
    if let Some(k) = deposed {
        o.insert("deposed".into(), json!(k));
    }
    o.insert("schema_version".into(), json!(meta.schema_version));
    o.insert("attributes".into(), attrs.to_json());
    let mut sensitive = Vec::new();
    sensitive_paths(attrs, &mut Vec::new(), &mut sensitive);
    o.insert("sensitive_attributes".into(), J::Array(sensitive));
    let deps: BTreeSet<String> = deps
        .iter()
        .map(|d| d.config_resource().to_string())
        .collect();
    if !deps.is_empty() {
        o.insert("dependencies".into(), json!(deps));
    }
    if !meta.private.is_empty() {
        o.insert(
            "private".into(),
            json!(base64::engine::general_purpose::STANDARD.encode(&meta.private)),
        );
    }
    J::Object(o)
}

/// The snapshot as Terraform state JSON (format version 4).
pub fn export_tfstate(snapshot: &Snapshot, lineage: &str, serial: u64) -> J {
    let mut outputs = Map::new();
    for (name, out) in &snapshot.outputs {
        let mut o = Map::new();
        o.insert("value".into(), out.value.to_json());
        o.insert("type".into(), type_json(&out.value));
        if out.sensitive || matches!(out.value, StoredValue::Sensitive(_)) {
            o.insert("sensitive".into(), json!(true));
        }
        outputs.insert(name.clone(), J::Object(o));
    }
    // Group instances by resource, in address order (BTreeMap keys sort by module, then mode).
    let mut groups: BTreeMap<ResourceAddr, (Option<ProviderAddr>, Vec<J>)> = BTreeMap::new();
    for (addr, inst) in &snapshot.resources {
        let g = groups.entry(addr.resource.clone()).or_default();
        if let Some(o) = &inst.current {
            g.0.get_or_insert_with(|| o.provider.addr.clone());
            g.1.push(instance_json(
                &addr.key, &o.attrs, &o.deps, o.tainted, None, &o.meta,
            ));
        }
        for (k, o) in &inst.deposed {
            g.0.get_or_insert_with(|| o.provider.addr.clone());
            g.1.push(instance_json(
                &addr.key,
                &o.attrs,
                &o.deps,
                o.tainted,
                Some(k),
                &o.meta,
            ));
        }
    }
    for (addr, d) in &snapshot.data {
        let g = groups.entry(addr.resource.clone()).or_default();
        g.0.get_or_insert_with(|| d.provider.addr.clone());
        g.1.push(instance_json(
            &addr.key,
            &d.attrs,
            &[],
            false,
            None,
            &ObjectMeta::default(),
        ));
    }
    let resources: Vec<J> = groups
        .into_iter()
        .map(|(r, (provider, instances))| {
            let mut o = Map::new();
            if !r.module.is_root() {
                o.insert("module".into(), json!(r.module.to_string()));
            }
            let mode = match r.mode {
                Mode::Managed => "managed",
                Mode::Data => "data",
                Mode::Ephemeral => "ephemeral",
            };
            o.insert("mode".into(), json!(mode));
            o.insert("type".into(), json!(r.type_));
            o.insert("name".into(), json!(r.name));
            let provider = provider
                .unwrap_or_else(|| ProviderAddr::default_for(r.module.without_keys(), r.package()));
            o.insert("provider".into(), json!(provider_string(&provider)));
            o.insert("instances".into(), J::Array(instances));
            J::Object(o)
        })
        .collect();
    json!({
        "version": 4,
        "terraform_version": TERRAFORM_VERSION,
        "serial": serial,
        "lineage": lineage,
        "outputs": outputs,
        "resources": resources,
        "check_results": null,
    })
}

fn bad(message: impl Into<String>) -> StateError {
    StateError::TfState {
        message: message.into(),
    }
}

fn describe_json(v: &J) -> String {
    match v {
        J::Null => "null".into(),
        J::Bool(b) => format!("the boolean {b}"),
        J::Number(n) => format!("the number {n}"),
        J::String(s) => format!("the string {s:?}"),
        J::Array(_) => "an array".into(),
        J::Object(_) => "an object".into(),
    }
}

/// Reads a Terraform state (format version 4) into a `StateImported` event: one conjured
/// provider instance per provider address, configured with `default_config(package)`.
pub fn import_tfstate(
    json: &str,
    default_config: &dyn Fn(&str) -> StoredValue,
) -> Result<EventBody, StateError> {
    let doc: J =
        serde_json::from_str(json).map_err(|e| bad(format!("the file is not valid JSON ({e})")))?;
    let J::Object(top) = &doc else {
        return Err(bad(format!(
            "expected a JSON object with \"version\": 4, found {}",
            describe_json(&doc)
        )));
    };
    match top.get("version") {
        Some(v) if v.as_u64() == Some(4) => {}
        Some(v) => {
            return Err(bad(format!(
                "found state format version {v}; only version 4 (written by Terraform 0.12 and \
                 later) can be imported{}",
                if v.as_u64().is_some_and(|n| n < 4) {
                    ": upgrade it first by running a Terraform 0.12 or later command on it"
                } else {
                    ""
                }
            )))
        }
        None => {
            return Err(bad(
                "found no \"version\" field; this does not look like a Terraform state file",
            ))
        }
    }
    let lineage = top.get("lineage").and_then(J::as_str).unwrap_or("unknown");
    let serial = top.get("serial").and_then(J::as_u64).unwrap_or(0);
    let empty = Vec::new();
    let resources = match top.get("resources") {
        None | Some(J::Null) => &empty,
        Some(J::Array(a)) => a,
        Some(other) => {
            return Err(bad(format!(
                "\"resources\" should be an array, found {}",
                describe_json(other)
            )))
        }
    };

    let mut providers: BTreeMap<ProviderAddr, ProviderInstance> = BTreeMap::new();
    // (instance, object, dependency resource addresses)
    let mut objects: Vec<(ResourceInstanceAddr, ResourceObject, Vec<ResourceAddr>)> = Vec::new();
    for (i, r) in resources.iter().enumerate() {
        let field = |name: &str| {
            r.get(name)
                .and_then(J::as_str)
                .ok_or_else(|| bad(format!("resource {} has no string \"{name}\" field", i + 1)))
        };
        let (mode, type_, name) = (field("mode")?, field("type")?, field("name")?);
        let module: ModulePath = match r.get("module").and_then(J::as_str) {
            Some(m) => m
                .parse()
                .map_err(|e| bad(format!("resource {type_}.{name}: {e}")))?,
            None => ModulePath::root(),
        };
        let mode = match mode {
            "managed" => Mode::Managed,
            "data" => continue,
            other => {
                return Err(bad(format!(
                    "resource {type_}.{name} has mode {other:?} (expected \"managed\" or \"data\")"
                )))
            }
        };
        let resource = ResourceAddr::new(module, mode, type_, name);
        let provider = parse_provider(field("provider")?)
            .map_err(|e| bad(format!("resource {resource}: {e}")))?;
        let pref = providers
            .entry(provider.clone())
            .or_insert_with(|| conjure(&provider, default_config))
            .reference();
        let instances = r.get("instances").and_then(J::as_array).unwrap_or(&empty);
        for inst in instances {
            let key = match inst.get("index_key") {
                None | Some(J::Null) => None,
                Some(J::String(s)) => Some(InstanceKey::Str(s.clone())),
                Some(n) => {
                    Some(InstanceKey::Int(n.as_i64().ok_or_else(|| {
                        bad(format!("resource {resource} has index key {n}"))
                    })?))
                }
            };
            let addr = resource.instance(key);
            if let Some(d) = inst.get("deposed").and_then(J::as_str) {
                return Err(bad(format!(
                    "{addr} has a deposed object ({d}) left by an interrupted \
                     create_before_destroy replacement; run `terraform apply` to finish it \
                     before importing, so no object is lost"
                )));
            }
            let mut attrs = StoredValue::from_json(inst.get("attributes").unwrap_or(&J::Null));
            if let Some(paths) = inst.get("sensitive_attributes").and_then(J::as_array) {
                for p in paths {
                    if let Some(steps) = p.as_array() {
                        mark_sensitive(&mut attrs, steps);
                    }
                }
            }
            let mut deps = Vec::new();
            for d in inst
                .get("dependencies")
                .and_then(J::as_array)
                .unwrap_or(&empty)
            {
                let text = d.as_str().unwrap_or_default();
                deps.push(
                    text.parse::<ResourceAddr>()
                        .map_err(|e| bad(format!("{addr} has dependency {d}: {e}")))?,
                );
            }
            let obj = ResourceObject {
                attrs,
                deps: Vec::new(),
                provider: pref.clone(),
                create_token: None,
                tainted: inst.get("status").and_then(J::as_str) == Some("tainted"),
                meta: ObjectMeta {
                    schema_version: inst.get("schema_version").and_then(J::as_u64).unwrap_or(0),
                    private: match inst.get("private").and_then(J::as_str) {
                        None => Vec::new(),
                        Some(p) => base64::engine::general_purpose::STANDARD
                            .decode(p)
                            .map_err(|e| {
                                bad(format!("{addr} has undecodable private data: {e}"))
                            })?,
                    },
                },
            };
            objects.push((addr, obj, deps));
        }
    }
    // Dependencies name configuration resources: resolve each to the imported instances of it
    // (in every instance of its module).
    let all: Vec<ResourceInstanceAddr> = objects.iter().map(|(a, _, _)| a.clone()).collect();
    let resources = objects
        .into_iter()
        .map(|(addr, mut obj, deps)| {
            let mut resolved: Vec<ResourceInstanceAddr> = all
                .iter()
                .filter(|a| {
                    deps.iter().any(|d| {
                        a.resource.mode == d.mode
                            && a.resource.type_ == d.type_
                            && a.resource.name == d.name
                            && a.resource.module.without_keys() == d.module.without_keys()
                    })
                })
                .cloned()
                .collect();
            resolved.sort();
            resolved.dedup();
            obj.deps = resolved;
            (addr, obj)
        })
        .collect();
    Ok(EventBody::StateImported {
        source: format!("terraform state (lineage {lineage}, serial {serial})"),
        providers: providers.into_values().collect(),
        resources,
    })
}

/// `provider["registry.terraform.io/hashicorp/sim"].east` → `provider["sim"].east`.
fn parse_provider(s: &str) -> Result<ProviderAddr, String> {
    let mut addr: ProviderAddr = s.parse().map_err(|e| format!("{e}"))?;
    if let Some(last) = addr.package.rsplit('/').next() {
        addr.package = last.to_string();
    }
    if addr.package.is_empty() {
        return Err(format!("provider {s:?} names no provider"));
    }
    Ok(addr)
}

fn conjure(addr: &ProviderAddr, default_config: &dyn Fn(&str) -> StoredValue) -> ProviderInstance {
    let mut id = format!("imported-{}", addr.package);
    if !addr.module.is_root() {
        id = format!("{id}-{}", addr.module.to_string().replace('.', "-"));
    }
    if let Some(a) = &addr.alias {
        id = format!("{id}-{a}");
    }
    ProviderInstance {
        addr: addr.clone(),
        id,
        config: default_config(&addr.package),
        is_default: addr.module.is_root() && addr.alias.is_none(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{DataObject, OutputValue, ProviderRef};
    use crate::snapshot::ResourceInstance;

    fn obj(attrs: StoredValue, deps: &[&str], provider: &str, tainted: bool) -> ResourceObject {
        ResourceObject {
            attrs,
            deps: deps.iter().map(|d| d.parse().unwrap()).collect(),
            provider: ProviderRef::new(provider.parse().unwrap(), "p".into()),
            create_token: Some("tok".into()),
            tainted,
            meta: Default::default(),
        }
    }

    fn object(fields: &[(&str, StoredValue)]) -> StoredValue {
        StoredValue::Object(
            fields
                .iter()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect(),
        )
    }

    fn s(v: &str) -> StoredValue {
        StoredValue::String(v.into())
    }

    fn sample() -> Snapshot {
        let mut snap = Snapshot::new();
        let mut put = |addr: &str, o: ResourceObject| {
            snap.resources.insert(
                addr.parse().unwrap(),
                ResourceInstance {
                    current: Some(o),
                    deposed: Default::default(),
                },
            );
        };
        let root = "provider[\"sim\"]";
        put(
            "sim_thing.a[0]",
            obj(
                object(&[("id", s("a0")), ("n", StoredValue::Number("3".into()))]),
                &[],
                root,
                false,
            ),
        );
        put(
            "sim_thing.a[1]",
            obj(object(&[("id", s("a1"))]), &[], root, true),
        );
        put(
            "sim_thing.b[\"k\"]",
            obj(
                object(&[
                    ("id", s("b")),
                    ("secret", StoredValue::Sensitive(Box::new(s("pw")))),
                    ("tags", StoredValue::Tuple(vec![s("x"), s("y")])),
                ]),
                &["sim_thing.a[0]", "sim_thing.a[1]"],
                "provider[\"sim\"].east",
                false,
            ),
        );
        put(
            "module.m[\"x\"].sim_thing.c",
            obj(
                object(&[("id", s("c"))]),
                &["sim_thing.b[\"k\"]"],
                "module.m.provider[\"sim\"]",
                false,
            ),
        );
        snap.data.insert(
            "data.sim_lookup.d".parse().unwrap(),
            DataObject {
                attrs: object(&[("id", s("d"))]),
                provider: ProviderRef::new(root.parse().unwrap(), "p".into()),
            },
        );
        snap.outputs.insert(
            "o".into(),
            OutputValue {
                value: StoredValue::List(vec![s("a")]),
                sensitive: false,
            },
        );
        snap
    }

    #[test]
    fn export_writes_terraform_v4() {
        let out = export_tfstate(&sample(), "lin", 7);
        let text = serde_json::to_string_pretty(&out).unwrap();
        let expected = r#"{
  "version": 4,
  "terraform_version": "1.11.0",
  "serial": 7,
  "lineage": "lin",
  "outputs": {
    "o": {
      "value": [
        "a"
      ],
      "type": [
        "list",
        "string"
      ]
    }
  },
  "resources": [
    {
      "mode": "managed",
      "type": "sim_thing",
      "name": "a",
      "provider": "provider[\"registry.terraform.io/hashicorp/sim\"]",
      "instances": [
        {
          "index_key": 0,
          "schema_version": 0,
          "attributes": {
            "id": "a0",
            "n": 3
          },
          "sensitive_attributes": []
        },
        {
          "index_key": 1,
          "status": "tainted",
          "schema_version": 0,
          "attributes": {
            "id": "a1"
          },
          "sensitive_attributes": []
        }
      ]
    },
    {
      "mode": "managed",
      "type": "sim_thing",
      "name": "b",
      "provider": "provider[\"registry.terraform.io/hashicorp/sim\"].east",
      "instances": [
        {
          "index_key": "k",
          "schema_version": 0,
          "attributes": {
            "id": "b",
            "secret": "pw",
            "tags": [
              "x",
              "y"
            ]
          },
          "sensitive_attributes": [
            [
              {
                "type": "get_attr",
                "value": "secret"
              }
            ]
          ],
          "dependencies": [
            "sim_thing.a"
          ]
        }
      ]
    },
    {
      "mode": "data",
      "type": "sim_lookup",
      "name": "d",
      "provider": "provider[\"registry.terraform.io/hashicorp/sim\"]",
      "instances": [
        {
          "schema_version": 0,
          "attributes": {
            "id": "d"
          },
          "sensitive_attributes": []
        }
      ]
    },
    {
      "module": "module.m[\"x\"]",
      "mode": "managed",
      "type": "sim_thing",
      "name": "c",
      "provider": "module.m.provider[\"registry.terraform.io/hashicorp/sim\"]",
      "instances": [
        {
          "schema_version": 0,
          "attributes": {
            "id": "c"
          },
          "sensitive_attributes": [],
          "dependencies": [
            "sim_thing.b"
          ]
        }
      ]
    }
  ],
  "check_results": null
}"#;
        assert_eq!(text, expected, "got:\n{text}");
    }

    #[test]
    fn export_then_import_gives_the_same_resources() {
        let mut before = sample();
        // A plugin's object keeps its schema version and private bytes (base64 in the file).
        let first = before.resources.values_mut().next().unwrap();
        first.current.as_mut().unwrap().meta = ObjectMeta {
            schema_version: 2,
            private: b"\x00private\xff".to_vec(),
        };
        let text = export_tfstate(&before, "lin", 3).to_string();
        let config = |package: &str| object(&[("from", s(package))]);
        let body = import_tfstate(&text, &config).unwrap();
        let EventBody::StateImported {
            source, providers, ..
        } = &body
        else {
            panic!("not an import: {body:?}");
        };
        assert_eq!(source, "terraform state (lineage lin, serial 3)");
        let summary: Vec<_> = providers
            .iter()
            .map(|p| {
                format!(
                    "{} {} default={} {:?}",
                    p.addr, p.id, p.is_default, p.config
                )
            })
            .collect();
        assert_eq!(
            summary,
            [
                "provider[\"sim\"] imported-sim default=true Object({\"from\": String(\"sim\")})",
                "provider[\"sim\"].east imported-sim-east default=false Object({\"from\": String(\"sim\")})",
                "module.m.provider[\"sim\"] imported-sim-module-m default=false Object({\"from\": String(\"sim\")})",
            ]
        );
        let mut after = Snapshot::new();
        after.apply_owned(crate::Event {
            seq: 1,
            version: 1,
            time_ms: 0,
            run: 0,
            body,
        });
        assert_eq!(
            after.resources.keys().collect::<Vec<_>>(),
            before.resources.keys().collect::<Vec<_>>()
        );
        for (addr, inst) in &before.resources {
            let (b, a) = (inst.current.as_ref().unwrap(), after.current(addr).unwrap());
            assert_eq!(a.attrs, b.attrs, "{addr}");
            assert_eq!(a.deps, b.deps, "{addr}");
            assert_eq!(a.tainted, b.tainted, "{addr}");
            assert_eq!(a.meta, b.meta, "{addr}");
            assert_eq!(a.provider.addr, b.provider.addr, "{addr}");
            assert!(after.resolve_provider(&a.provider).is_some(), "{addr}");
        }
        assert!(crate::check::check_snapshot(&after).is_empty());
    }

    fn check_import_error(json: &str, expected: &str) {
        let err = import_tfstate(json, &|_| StoredValue::Null).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!("cannot import the Terraform state: {expected}")
        );
    }

    #[test]
    fn bad_files_say_what_was_found() {
        check_import_error(
            "{\"version\": 4,",
            "the file is not valid JSON (EOF while parsing a value at line 1 column 14)",
        );
        check_import_error(
            "[1]",
            "expected a JSON object with \"version\": 4, found an array",
        );
        check_import_error(
            "{\"version\": 3, \"serial\": 1}",
            "found state format version 3; only version 4 (written by Terraform 0.12 and later) \
             can be imported: upgrade it first by running a Terraform 0.12 or later command on it",
        );
        check_import_error(
            "{\"version\": 5}",
            "found state format version 5; only version 4 (written by Terraform 0.12 and later) \
             can be imported",
        );
        check_import_error(
            "{\"serial\": 1}",
            "found no \"version\" field; this does not look like a Terraform state file",
        );
        check_import_error(
            r#"{"version": 4, "resources": [{"mode": "managed", "type": "sim_thing", "name": "a",
                "provider": "provider[\"registry.terraform.io/hashicorp/sim\"]",
                "instances": [{"deposed": "00aa", "attributes": {}}]}]}"#,
            "sim_thing.a has a deposed object (00aa) left by an interrupted \
             create_before_destroy replacement; run `terraform apply` to finish it before \
             importing, so no object is lost",
        );
        check_import_error(
            r#"{"version": 4, "resources": [{"mode": "managed", "type": "sim_thing"}]}"#,
            "resource 1 has no string \"name\" field",
        );
    }

    #[test]
    fn bare_provider_names_and_empty_states_import() {
        let body = import_tfstate(
            r#"{"version": 4, "serial": 1, "lineage": "x", "resources": [
                {"mode": "managed", "type": "sim_thing", "name": "a", "provider": "provider[\"sim\"]",
                 "instances": [{"schema_version": 0, "attributes": {"id": "1"}}]}]}"#,
            &|_| StoredValue::Null,
        )
        .unwrap();
        let EventBody::StateImported {
            providers,
            resources,
            ..
        } = body
        else {
            panic!()
        };
        assert_eq!(providers[0].addr.to_string(), "provider[\"sim\"]");
        assert_eq!(resources[0].0.to_string(), "sim_thing.a");
        let body = import_tfstate(r#"{"version": 4, "resources": []}"#, &|_| StoredValue::Null);
        assert!(
            matches!(body, Ok(EventBody::StateImported { resources, .. }) if resources.is_empty())
        );
    }
}
