//! The machine-readable view of a plan (`cairn show -json PLANFILE`), in the shape of
//! `terraform show -json PLANFILE` (format version 1.2), so tools that read Terraform plans
//! (policy checkers, cost estimators, CI summaries) read Cairn's.
//!
//! Field names, nesting and conventions follow Terraform 1.11's output exactly:
//! - `after` leaves unknown values out (unknown list elements become `null`) and
//!   `after_unknown` mirrors the value with `true` at every unknown: list elements as an array of
//!   booleans, object attributes only where not `false`; a wholly known `after` gives `{}`;
//! - `before_sensitive` / `after_sensitive` mark sensitive parts the same way (`false` for a
//!   missing value); sensitive values themselves appear in clear, as in Terraform;
//! - `replace_paths` is a list of paths, each a list of attribute names and indexes;
//! - `provider_name` is the provider's source address: `terraform.io/builtin/terraform` for
//!   the built-in `terraform` provider and Terraform's implied `registry.terraform.io/hashicorp/NAME`
//!   for every other package, since that is what a Terraform configuration without
//!   `required_providers` would name;
//! - data sources read while planning appear in `prior_state`, not in `resource_changes`.
//!
//! Cairn adds (every extension starts with `cairn_`, which Terraform never uses):
//! - `cairn_read_reason` on each deferred data read (`actions: ["read"]`): the reason in words
//!   (`message`, as the human plan prints it) and its parts — for
//!   `read_because_config_unknown`, the unknown `value` and the `chain` of references it came
//!   through (nearest first); for `read_because_dependency_pending`, the `dependency`, its
//!   `dependency_actions`, and the chain `via` which the data source depends on it;
//! - `cairn_provider_changes`: provider instances created, updated, replaced or removed (in
//!   Cairn providers are resources), each with `address`, `actions`, `before`, `after`;
//! - `cairn_plan_mode`: `normal`, `destroy`, `read-only` or `refresh-only`.
//!
//! Left out: `configuration` and `relevant_attributes` (they describe the configuration, which
//! a plan does not carry) and `timestamp` (so equal plans give equal JSON).

use super::{Action, Change, Plan, PlanMode, Reason};
use crate::addr::{InstanceKey, Mode, ModulePath, ResourceInstanceAddr};
use crate::value::{Type, Value};
use serde_json::{json, Map, Value as J};
use std::collections::BTreeMap;

/// The `terraform show -json` form of a plan.
pub(crate) fn plan_json(plan: &Plan) -> J {
    let mut changes: Vec<&Change> = plan.changes.iter().collect();
    changes.sort_by_cached_key(|c| listed(&c.addr));

    let mut root = Map::new();
    root.insert("format_version".into(), json!("1.2"));
    root.insert("terraform_version".into(), json!(env!("CARGO_PKG_VERSION")));
    if !plan.variables.is_empty() {
        let vars: Map<String, J> = plan
            .variables
            .iter()
            .map(|(k, v)| (k.clone(), json!({ "value": v.to_json() })))
            .collect();
        root.insert("variables".into(), J::Object(vars));
    }
    root.insert("planned_values".into(), planned_values(plan, &changes));
    if !plan.drift.is_empty() {
        let mut drift: Vec<_> = plan.drift.iter().collect();
        drift.sort_by_cached_key(|d| listed(&d.addr));
        let drift: Vec<J> = drift
            .iter()
            .map(|d| {
                let action = if d.after.is_some() {
                    Action::Update
                } else {
                    Action::Delete
                };
                let package = crate::addr::package_of(&d.addr.resource.type_);
                let mut o = address_fields(&d.addr, &provider_name(&plan.sources, package));
                o.insert(
                    "change".into(),
                    change_json(action, Some(&d.before), d.after.as_ref(), &[], &[]),
                );
                J::Object(o)
            })
            .collect();
        root.insert("resource_drift".into(), J::Array(drift));
    }
    let moved = plan.moved_from();
    root.insert(
        "resource_changes".into(),
        J::Array(
            changes
                .iter()
                .map(|c| resource_change(plan, c, moved.get(&c.addr).copied()))
                .collect(),
        ),
    );
    let mut outputs: Vec<_> = plan.outputs.iter().collect();
    outputs.sort_by(|a, b| a.name.cmp(&b.name));
    let output_changes: Map<String, J> = outputs
        .iter()
        .map(|o| {
            let mut c = Map::new();
            c.insert("actions".into(), actions(o.action));
            c.insert("before".into(), opt_json(o.before.as_ref()));
            // A wholly unknown value has no `after` at all; a deleted output's is null.
            match &o.after {
                None => {
                    c.insert("after".into(), J::Null);
                }
                Some(a) => {
                    if let Some(j) = omit_unknowns(a) {
                        c.insert("after".into(), j);
                    }
                }
            }
            c.insert(
                "after_unknown".into(),
                match &o.after {
                    Some(a) if !a.is_wholly_known() => unknown_as_bool(a),
                    _ => json!(false),
                },
            );
            let sens = |v: Option<&Value>| o.sensitive || v.is_some_and(Value::contains_sensitive);
            c.insert("before_sensitive".into(), json!(sens(o.before.as_ref())));
            c.insert("after_sensitive".into(), json!(sens(o.after.as_ref())));
            (o.name.clone(), J::Object(c))
        })
        .collect();
    root.insert("output_changes".into(), J::Object(output_changes));
    root.insert("prior_state".into(), prior_state(plan, &changes));
    root.insert("applyable".into(), json!(plan.applyable));
    root.insert("complete".into(), json!(!plan.errored));
    root.insert("errored".into(), json!(plan.errored));
    root.insert(
        "cairn_plan_mode".into(),
        json!(match plan.mode {
            PlanMode::Normal => "normal",
            PlanMode::Destroy => "destroy",
            PlanMode::ReadOnly => "read-only",
            PlanMode::RefreshOnly => "refresh-only",
        }),
    );
    let providers: Vec<J> = plan
        .provider_changes
        .iter()
        .filter(|p| p.action != Action::NoOp)
        .map(|p| {
            json!({
                "address": p.addr.to_string(),
                "actions": actions(p.action),
                "before": opt_json(p.before.as_ref()),
                "after": p.after.as_ref().and_then(omit_unknowns).unwrap_or(J::Null),
            })
        })
        .collect();
    if !providers.is_empty() {
        root.insert("cairn_provider_changes".into(), J::Array(providers));
    }
    J::Object(root)
}

/// Terraform's order of resources in its JSON: by module (the root first), then by address
/// as text (`data.` before managed resources, `[10]` before `[2]`).
fn listed(addr: &ResourceInstanceAddr) -> (ModulePath, String) {
    (addr.resource.module.clone(), addr.to_string())
}

/// A provider package's source address (`provider_name`): the one `required_providers`
/// declared (`sources`, see `Config::package_sources`), else the one Terraform implies.
pub(crate) fn provider_name(sources: &BTreeMap<String, String>, package: &str) -> String {
    if let Some(s) = sources.get(package) {
        s.clone()
    } else if package == "terraform" {
        "terraform.io/builtin/terraform".into()
    } else {
        format!("registry.terraform.io/hashicorp/{package}")
    }
}

fn actions(a: Action) -> J {
    json!(a.json_actions())
}

fn opt_json(v: Option<&Value>) -> J {
    v.map(Value::to_json).unwrap_or(J::Null)
}

/// `address`, `module_address`, `mode`, `type`, `name`, `index`, `provider_name`, in
/// Terraform's order.
/// `module_address` is only in `resource_changes` and `resource_drift`; `planned_values` and
/// `prior_state` say the module by nesting.
fn address_fields(addr: &ResourceInstanceAddr, provider: &str) -> Map<String, J> {
    address_fields_in(addr, provider, true)
}

fn address_fields_in(
    addr: &ResourceInstanceAddr,
    provider: &str,
    module_address: bool,
) -> Map<String, J> {
    let mut o = Map::new();
    o.insert("address".into(), json!(addr.to_string()));
    if module_address && !addr.resource.module.is_root() {
        o.insert(
            "module_address".into(),
            json!(addr.resource.module.to_string()),
        );
    }
    o.insert(
        "mode".into(),
        json!(match addr.resource.mode {
            Mode::Managed => "managed",
            Mode::Data => "data",
            Mode::Ephemeral => "ephemeral",
        }),
    );
    o.insert("type".into(), json!(addr.resource.type_));
    o.insert("name".into(), json!(addr.resource.name));
    match &addr.key {
        Some(InstanceKey::Int(i)) => {
            o.insert("index".into(), json!(i));
        }
        Some(InstanceKey::Str(s)) => {
            o.insert("index".into(), json!(s));
        }
        None => {}
    }
    o.insert("provider_name".into(), json!(provider));
    o
}

fn resource_change(plan: &Plan, c: &Change, prev: Option<&ResourceInstanceAddr>) -> J {
    let mut o = address_fields(&c.addr, &provider_name(&plan.sources, &c.provider.package));
    if let Some(prev) = prev {
        // Terraform's order: right after `address`.
        let mut with = Map::new();
        for (k, v) in o {
            let is_address = k == "address";
            with.insert(k, v);
            if is_address {
                with.insert("previous_address".into(), json!(prev.to_string()));
            }
        }
        o = with;
    }
    if let Some(key) = &c.deposed {
        o.insert("deposed".into(), json!(key));
    }
    o.insert(
        "change".into(),
        change_json(
            c.action,
            c.before.as_ref(),
            c.after.as_ref(),
            &c.replace_paths,
            &c.sensitive_attrs,
        ),
    );
    if let Some(i) = &c.importing {
        if let Some(J::Object(change)) = o.get_mut("change") {
            change.insert("importing".into(), json!({ "id": i.id }));
            if let Some(text) = &i.generated_config {
                change.insert("generated_config".into(), json!(text));
            }
        }
    }
    if let Some(r) = &c.reason {
        o.insert("action_reason".into(), json!(r.json_name()));
        if c.action == Action::Read {
            o.insert("cairn_read_reason".into(), read_reason(&c.addr, r));
        }
    }
    J::Object(o)
}

fn read_reason(addr: &ResourceInstanceAddr, r: &Reason) -> J {
    let message = super::render::reason_text(addr, r).unwrap_or_default();
    match r {
        Reason::ReadBecauseConfigUnknown { value, chain } => json!({
            "reason": r.json_name(),
            "message": message,
            "value": value,
            "chain": chain,
        }),
        Reason::ReadBecauseDependencyPending {
            dependency,
            action,
            via,
        } => json!({
            "reason": r.json_name(),
            "message": message,
            "dependency": dependency.to_string(),
            "dependency_actions": actions(*action),
            "via": via,
        }),
        other => json!({ "reason": other.json_name(), "message": message }),
    }
}

/// The `change` object of a resource change.
fn change_json(
    action: Action,
    before: Option<&Value>,
    after: Option<&Value>,
    replace_paths: &[String],
    sensitive: &[String],
) -> J {
    let mut c = Map::new();
    c.insert("actions".into(), actions(action));
    c.insert("before".into(), opt_json(before));
    c.insert(
        "after".into(),
        after.and_then(omit_unknowns).unwrap_or(J::Null),
    );
    c.insert(
        "after_unknown".into(),
        match after {
            Some(a) if !a.is_wholly_known() => unknown_as_bool(a),
            _ => json!({}),
        },
    );
    let sens = |v: Option<&Value>| match v {
        Some(v) if !v.is_null() => sensitive_as_bool(v, "", sensitive),
        _ => json!(false),
    };
    c.insert("before_sensitive".into(), sens(before));
    c.insert("after_sensitive".into(), sens(after));
    if !replace_paths.is_empty() {
        c.insert(
            "replace_paths".into(),
            J::Array(replace_paths.iter().map(|p| path_steps(p)).collect()),
        );
    }
    J::Object(c)
}

/// The value with unknowns left out (`None` when the value itself is unknown); unknown list
/// elements become `null` so positions still line up with `after_unknown`.
pub(crate) fn omit_unknowns(v: &Value) -> Option<J> {
    match v {
        Value::Unknown(_) => None,
        Value::Sensitive(inner) => omit_unknowns(inner),
        Value::List(l) | Value::Set(l) | Value::Tuple(l) => Some(J::Array(
            l.iter()
                .map(|e| omit_unknowns(e).unwrap_or(J::Null))
                .collect(),
        )),
        Value::Map(m) | Value::Object(m) => Some(J::Object(
            m.iter()
                .filter_map(|(k, e)| omit_unknowns(e).map(|j| (k.clone(), j)))
                .collect(),
        )),
        other => Some(other.to_json()),
    }
}

/// `true` where the value is unknown, Terraform's way (see the module docs).
pub(crate) fn unknown_as_bool(v: &Value) -> J {
    match v {
        Value::Unknown(_) => json!(true),
        Value::Sensitive(inner) => unknown_as_bool(inner),
        Value::List(l) | Value::Set(l) | Value::Tuple(l) => {
            J::Array(l.iter().map(unknown_as_bool).collect())
        }
        Value::Map(m) | Value::Object(m) => J::Object(
            m.iter()
                .map(|(k, e)| (k.clone(), unknown_as_bool(e)))
                .filter(|(_, j)| *j != J::Bool(false))
                .collect(),
        ),
        _ => json!(false),
    }
}

/// `true` where the value is sensitive: marked so, or at one of `paths` (the schema's
/// sensitive attributes).
pub(crate) fn sensitive_as_bool(v: &Value, path: &str, paths: &[String]) -> J {
    if v.is_sensitive() || (!path.is_empty() && paths.iter().any(|p| p == path)) {
        return json!(true);
    }
    match v {
        Value::List(l) | Value::Set(l) | Value::Tuple(l) => J::Array(
            l.iter()
                .enumerate()
                .map(|(i, e)| sensitive_as_bool(e, &format!("{path}[{i}]"), paths))
                .collect(),
        ),
        Value::Map(m) | Value::Object(m) => J::Object(
            m.iter()
                .map(|(k, e)| (k.clone(), sensitive_as_bool(e, &join_path(path, k), paths)))
                .filter(|(_, j)| *j != J::Bool(false))
                .collect(),
        ),
        _ => json!(false),
    }
}

fn join_path(parent: &str, key: &str) -> String {
    let ident = key
        .chars()
        .next()
        .is_some_and(|c| c.is_alphabetic() || c == '_')
        && key
            .chars()
            .all(|c| c.is_alphanumeric() || c == '_' || c == '-');
    if parent.is_empty() {
        key.to_string()
    } else if ident {
        format!("{parent}.{key}")
    } else {
        format!("{parent}[{}]", cairn_state::quote(key))
    }
}

/// Splits a path written as `a.b[0]["k"]` into Terraform's steps `["a", "b", 0, "k"]`.
/// Malformed input is kept as far as it reads.
pub(crate) fn path_steps(path: &str) -> J {
    let mut steps = Vec::new();
    let mut chars = path.chars().peekable();
    let mut name = String::new();
    let flush = |name: &mut String, steps: &mut Vec<J>| {
        if !name.is_empty() {
            steps.push(json!(std::mem::take(name)));
        }
    };
    while let Some(c) = chars.next() {
        match c {
            '.' => flush(&mut name, &mut steps),
            '[' => {
                flush(&mut name, &mut steps);
                if chars.peek() == Some(&'"') {
                    chars.next();
                    let mut key = String::new();
                    while let Some(c) = chars.next() {
                        match c {
                            '\\' => match chars.next() {
                                Some('n') => key.push('\n'),
                                Some('t') => key.push('\t'),
                                Some('r') => key.push('\r'),
                                Some(o) => key.push(o),
                                None => {}
                            },
                            '"' => break,
                            c => key.push(c),
                        }
                    }
                    steps.push(json!(key));
                } else {
                    let mut digits = String::new();
                    while let Some(&c) = chars.peek() {
                        if c == ']' {
                            break;
                        }
                        digits.push(c);
                        chars.next();
                    }
                    match digits.parse::<i64>() {
                        Ok(i) => steps.push(json!(i)),
                        Err(_) => steps.push(json!(digits)),
                    }
                }
                // The closing bracket.
                if chars.peek() == Some(&']') {
                    chars.next();
                }
            }
            c => name.push(c),
        }
    }
    flush(&mut name, &mut steps);
    J::Array(steps)
}

/// A type in cty's JSON form: `"string"`, `["list","string"]`, `["object",{"a":"number"}]`.
pub(crate) fn type_json(t: &Type) -> J {
    match t {
        Type::Dynamic => json!("dynamic"),
        Type::Bool => json!("bool"),
        Type::Number => json!("number"),
        Type::String => json!("string"),
        Type::List(e) => json!(["list", type_json(e)]),
        Type::Set(e) => json!(["set", type_json(e)]),
        Type::Map(e) => json!(["map", type_json(e)]),
        Type::Tuple(ts) => json!(["tuple", ts.iter().map(type_json).collect::<Vec<_>>()]),
        Type::Object(attrs, _) => {
            let m: Map<String, J> = attrs
                .iter()
                .map(|(k, t)| (k.clone(), type_json(t)))
                .collect();
            json!(["object", m])
        }
    }
}

/// One resource as `planned_values`, `prior_state` and `show -json` list it.
fn resource_value(
    addr: &ResourceInstanceAddr,
    provider: &str,
    schema_version: u64,
    v: &Value,
    sens: &[String],
) -> Map<String, J> {
    let mut o = address_fields_in(addr, provider, false);
    o.insert("schema_version".into(), json!(schema_version));
    o.insert("values".into(), omit_unknowns(v).unwrap_or(json!({})));
    let s = sensitive_as_bool(v, "", sens);
    o.insert(
        "sensitive_values".into(),
        if s.is_object() { s } else { json!({}) },
    );
    o
}

/// Nests resources into `root_module` / `child_modules` by module path; every ancestor of a
/// module with resources appears. Each module lists its resources by address, as text.
fn module_tree(resources: Vec<(ModulePath, Map<String, J>)>) -> J {
    let mut by_module: BTreeMap<ModulePath, Vec<J>> = BTreeMap::new();
    by_module.entry(ModulePath::root()).or_default();
    for (m, r) in resources {
        let mut p = m.parent();
        while let Some(anc) = p {
            p = anc.parent();
            by_module.entry(anc).or_default();
        }
        by_module.entry(m).or_default().push(J::Object(r));
    }
    for rs in by_module.values_mut() {
        // Terraform's order (see `listed`).
        rs.sort_by(|a, b| a["address"].as_str().cmp(&b["address"].as_str()));
    }
    fn build(path: &ModulePath, by_module: &BTreeMap<ModulePath, Vec<J>>) -> J {
        let mut o = Map::new();
        let resources = by_module.get(path).cloned().unwrap_or_default();
        if !resources.is_empty() {
            o.insert("resources".into(), J::Array(resources));
        }
        if !path.is_root() {
            o.insert("address".into(), json!(path.to_string()));
        }
        let children: Vec<J> = by_module
            .keys()
            .filter(|k| k.0.len() == path.0.len() + 1 && k.starts_with(path))
            .map(|k| build(k, by_module))
            .collect();
        if !children.is_empty() {
            o.insert("child_modules".into(), J::Array(children));
        }
        J::Object(o)
    }
    build(&ModulePath::root(), &by_module)
}

/// The current state as `terraform show -json` gives it (no plan file): the root outputs and
/// every resource instance, deposed objects with their `deposed_key`, each with its
/// `depends_on`. An empty state is `format_version` alone, as in Terraform.
pub(crate) fn state_json(state: &cairn_state::Snapshot, sources: &BTreeMap<String, String>) -> J {
    let mut root = Map::new();
    root.insert("format_version".into(), json!("1.0"));
    if state.resources.is_empty() && state.data.is_empty() && state.outputs.is_empty() {
        return J::Object(root);
    }
    root.insert("terraform_version".into(), json!(env!("CARGO_PKG_VERSION")));
    let mut outputs = Map::new();
    for (name, o) in &state.outputs {
        let v = Value::from_stored(&o.value);
        let mut j = Map::new();
        j.insert(
            "sensitive".into(),
            json!(o.sensitive || v.contains_sensitive()),
        );
        j.insert("value".into(), v.to_json());
        j.insert("type".into(), type_json(&v.type_of()));
        outputs.insert(name.clone(), J::Object(j));
    }
    let mut resources = Vec::new();
    for (addr, inst) in &state.resources {
        let objects = inst
            .current
            .iter()
            .map(|o| (None, o))
            .chain(inst.deposed.iter().map(|(k, o)| (Some(k), o)));
        for (deposed, o) in objects {
            let provider = provider_name(sources, &o.provider.addr.package);
            let v = Value::from_stored(&o.attrs);
            let mut j = resource_value(addr, &provider, o.meta.schema_version, &v, &[]);
            let deps: std::collections::BTreeSet<String> = o
                .deps
                .iter()
                .map(|d| d.config_resource().to_string())
                .collect();
            if !deps.is_empty() {
                j.insert("depends_on".into(), json!(deps));
            }
            if o.tainted {
                j.insert("tainted".into(), json!(true));
            }
            if let Some(k) = deposed {
                j.insert("deposed_key".into(), json!(k));
            }
            resources.push((addr.resource.module.clone(), j));
        }
    }
    for (addr, d) in &state.data {
        let provider = provider_name(sources, &d.provider.addr.package);
        let v = Value::from_stored(&d.attrs);
        let j = resource_value(addr, &provider, 0, &v, &[]);
        resources.push((addr.resource.module.clone(), j));
    }
    let mut values = Map::new();
    if !outputs.is_empty() {
        values.insert("outputs".into(), J::Object(outputs));
    }
    values.insert("root_module".into(), module_tree(resources));
    root.insert("values".into(), J::Object(values));
    J::Object(root)
}

fn output_value(v: &Value, sensitive: bool) -> J {
    let mut o = Map::new();
    o.insert(
        "sensitive".into(),
        json!(sensitive || v.contains_sensitive()),
    );
    if v.is_wholly_known() {
        o.insert("type".into(), type_json(&v.type_of()));
        o.insert("value".into(), v.to_json());
    }
    J::Object(o)
}

fn planned_values(plan: &Plan, changes: &[&Change]) -> J {
    let mut outputs = Map::new();
    let mut sorted: Vec<_> = plan.outputs.iter().collect();
    sorted.sort_by(|a, b| a.name.cmp(&b.name));
    for o in sorted {
        if let (Some(a), false) = (&o.after, o.action == Action::Delete) {
            outputs.insert(o.name.clone(), output_value(a, o.sensitive));
        }
    }
    let resources: Vec<(ModulePath, Map<String, J>)> = changes
        .iter()
        .filter_map(|c| {
            let after = c.after.as_ref()?;
            Some((
                c.addr.resource.module.clone(),
                resource_value(
                    &c.addr,
                    &provider_name(&plan.sources, &c.provider.package),
                    0,
                    after,
                    &c.sensitive_attrs,
                ),
            ))
        })
        .collect();
    let mut pv = Map::new();
    if !outputs.is_empty() {
        pv.insert("outputs".into(), J::Object(outputs));
    }
    pv.insert("root_module".into(), module_tree(resources));
    J::Object(pv)
}

fn prior_state(plan: &Plan, changes: &[&Change]) -> J {
    let mut outputs = Map::new();
    let mut sorted: Vec<_> = plan.outputs.iter().collect();
    sorted.sort_by(|a, b| a.name.cmp(&b.name));
    for o in sorted {
        if let Some(b) = o.before.as_ref().filter(|b| !b.is_null()) {
            outputs.insert(o.name.clone(), output_value(b, o.sensitive));
        }
    }
    let mut entries: Vec<(&ResourceInstanceAddr, Map<String, J>)> = changes
        .iter()
        .filter_map(|c| {
            let before = c.before.as_ref()?;
            let mut j = resource_value(
                &c.addr,
                &provider_name(&plan.sources, &c.provider.package),
                0,
                before,
                &c.sensitive_attrs,
            );
            if let Some(k) = &c.deposed {
                j.insert("deposed_key".into(), json!(k));
            }
            Some((&c.addr, j))
        })
        .collect();
    for d in &plan.data_reads {
        entries.push((
            &d.addr,
            resource_value(
                &d.addr,
                &provider_name(&plan.sources, &d.provider.package),
                0,
                &d.result,
                &[],
            ),
        ));
    }
    let resources = entries
        .into_iter()
        .map(|(a, j)| (a.resource.module.clone(), j))
        .collect();
    let mut values = Map::new();
    if !outputs.is_empty() {
        values.insert("outputs".into(), J::Object(outputs));
    }
    values.insert("root_module".into(), module_tree(resources));
    json!({
        "format_version": "1.0",
        "terraform_version": env!("CARGO_PKG_VERSION"),
        "values": values,
    })
}
