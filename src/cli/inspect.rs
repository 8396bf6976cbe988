//! `cairn inspect`: the statically evaluated view of a configuration for policy tools, without
//! providers, credentials or state.
//!
//! Decisions:
//! - The JSON document is versioned (`format_version`) and described by the JSON Schema
//!   `fixtures/inspect/schema.json`, which the tests validate every document against. A
//!   resource keeps the flat shape policy loaders use (its attributes at the top level, `id`
//!   its address), with `_`-prefixed metadata beside them: type, provider, whether a schema
//!   was used, unknown paths, unknown expansion, and where it came from (block, module call
//!   stack, each argument).
//! - Problems never stop the view: diagnostics are part of the document (and printed on
//!   standard error), and the exit code is 0 whenever the view was produced; 1 only when
//!   nothing could be loaded.

use super::args::InspectArgs;
use super::output::Exit;
use super::Context;
use crate::config::{Config, Resource, ResourceKey, VarArg};
use crate::diag::{SourceMap, Span};
use crate::engine::inspect::Inspected;
use crate::engine::values::{Expansion, Values};
use crate::value::Value;
use cairn_state::{Mode, ModulePath};
use serde_json::{json, Map, Value as J};
use std::path::PathBuf;
use std::time::Duration;

/// The version of the JSON document; bumped only on an incompatible change.
pub const FORMAT_VERSION: &str = "1.0";

/// `inspect [DIR | FILE.tf]`.
pub fn inspect(ctx: &Context, a: &InspectArgs, vars: Vec<VarArg>) -> Exit {
    let req = super::run_cmds::RunRequest {
        mode: crate::plan::PlanMode::Normal,
        refresh: false,
        targets: Vec::new(),
        replace: Vec::new(),
        vars,
        parallelism: 10,
        lock_timeout: Duration::ZERO,
        state_dir: ctx.state_dir.clone(),
    };
    let mut opts = super::lifecycle::engine_options(&req, "inspect");
    if let Some(p) = &a.path {
        let p = if p.is_absolute() {
            p.clone()
        } else {
            opts.dir.join(p)
        };
        if p.is_file() {
            opts.dir = p.parent().map(PathBuf::from).unwrap_or_default();
            opts.only_file = Some(p);
        } else {
            opts.dir = p;
        }
    }
    let report = match super::lifecycle::block_on(ctx, &opts, crate::engine::inspect(&opts)) {
        Ok(r) => r,
        Err(d) => return ctx.fail(d, a.ui.no_color),
    };
    let empty = SourceMap::new();
    let map = report.config.as_ref().map(|c| &c.sources).unwrap_or(&empty);
    let (Some(mut inspection), Some(config)) = (report.result, report.config.as_ref()) else {
        ctx.report(map, &report.diags, a.ui.no_color);
        return Exit::Error;
    };
    let mut instances = std::mem::take(&mut inspection.instances);
    if !instances.is_sorted_by(|x, y| x.addr <= y.addr) {
        instances.sort_by(|x, y| x.addr.cmp(&y.addr));
    }
    if a.ui.json {
        let values = inspection.values();
        let diagnostics: Vec<J> = report.diags.iter().map(|d| map.to_json(d)).collect();
        // Everything but the resources as one tree; the resources (the bulk) are rendered
        // on all cores, one at a time, straight to text, and put in its place.
        let doc = json!({
            "format_version": FORMAT_VERSION,
            "resources": "@RESOURCES@",
            "outputs": outputs_json(config, &values),
            "locals": locals_json(config, &values),
            "variables": variables_json(config, &values),
            "module_calls": calls_json(config, &values),
            "providers_without_schema": inspection.unchecked_providers,
            "diagnostics": diagnostics,
        });
        drop(values);
        let text = serde_json::to_string_pretty(&doc).unwrap_or_default();
        let resources = resources_text(config, &instances);
        let text = text.replacen("\"@RESOURCES@\"", &resources, 1);
        ctx.out(&format!("{text}\n"));
        if !report.diags.is_empty() {
            ctx.report(map, &report.diags, a.ui.no_color);
        }
    } else {
        ctx.report(map, &report.diags, a.ui.no_color);
        let mut out = super::run_cmds::render_instances(&instances);
        if instances.is_empty() {
            out.push_str("The configuration has no resources.\n");
        }
        ctx.out(&out);
    }
    super::run_cmds::exit_without_drop((instances, inspection, report.config));
    Exit::Ok
}

/// The `resources` array as pretty JSON text at the document's second level, exactly as
/// `serde_json::to_string_pretty` of the whole document would write it. Each resource's JSON
/// tree lives only while it is written, and long lists are cut into one run per core.
fn resources_text(config: &Config, instances: &[Inspected]) -> String {
    if instances.is_empty() {
        return "[]".to_string();
    }
    let render = |run: &[Inspected]| {
        let mut out = String::with_capacity(run.len() * 1024);
        for i in run {
            let text = serde_json::to_string_pretty(&resource_json(config, i)).unwrap_or_default();
            out.push_str("    ");
            out.push_str(&text.replace('\n', "\n    "));
            out.push_str(",\n");
        }
        out
    };
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let runs = threads.min(instances.len() / 1024).max(1);
    let size = instances.len().div_ceil(runs);
    let parts: Vec<String> = std::thread::scope(|scope| {
        let handles: Vec<_> = instances
            .chunks(size)
            .map(|run| scope.spawn(move || render(run)))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect()
    });
    let mut out = String::from("[\n");
    for p in parts {
        out.push_str(&p);
    }
    out.truncate(out.len() - 2);
    out.push_str("\n  ]");
    out
}

/// `{"file", "line", "column"}` of the start of a span.
fn location(map: &SourceMap, span: Span) -> J {
    let p = map.pos(span.file, span.start);
    json!({
        "file": map.path_at(span.file, span.start).display().to_string(),
        "line": p.line,
        "column": p.column,
    })
}

/// A value as JSON with the paths of its unknowns (`ingress[0].cidr_blocks[1]`; `""` when
/// the whole value is unknown).
fn value_fields(v: &Value, out: &mut Map<String, J>) {
    out.insert("value".into(), v.to_json());
    out.insert("unknown".into(), json!(v.unknown_paths()));
    out.insert("sensitive".into(), json!(v.contains_sensitive()));
}

/// The module calls from the root down to a module instance, each with its block's location.
fn call_stack(config: &Config, module: &ModulePath) -> Vec<J> {
    let mut out = Vec::new();
    for i in 1..=module.0.len() {
        let parent = ModulePath(module.0[..i - 1].to_vec());
        let here = ModulePath(module.0[..i].to_vec());
        let name = &module.0[i - 1].name;
        let call = config.module(&parent).and_then(|m| m.calls.get(name));
        out.push(json!({
            "address": here.to_string(),
            "source": call.map(|c| c.source.clone()),
            "location": call.map(|c| location(&config.sources, c.span)),
        }));
    }
    out
}

fn resource_config<'c>(config: &'c Config, i: &Inspected) -> Option<&'c Resource> {
    let r = &i.addr.resource;
    let key = ResourceKey {
        mode: r.mode,
        type_: r.type_.clone(),
        name: r.name.clone(),
    };
    config
        .module(&r.module.without_keys())
        .and_then(|m| m.resources.get(&key))
        .map(|b| &**b)
}

/// Where each argument and nested block of a resource is written (the first block of a
/// repeated type; a `dynamic` block under the name it generates).
fn attribute_locations(config: &Config, res: &Resource) -> Map<String, J> {
    use hcl_edit::structure::Structure;
    let mut out = Map::new();
    for s in res.body.iter() {
        let (name, node_span) = match s {
            Structure::Attribute(a) => (a.key.as_str().to_string(), hcl_edit::Span::span(a)),
            Structure::Block(b) if b.ident.as_str() == "dynamic" => match b.labels.first() {
                Some(l) => (l.as_str().to_string(), hcl_edit::Span::span(b)),
                None => continue,
            },
            Structure::Block(b) => (b.ident.as_str().to_string(), hcl_edit::Span::span(b)),
        };
        let Some(r) = node_span else { continue };
        let span = Span {
            file: res.file,
            start: r.start,
            end: r.end,
        };
        out.entry(name)
            .or_insert_with(|| location(&config.sources, span));
    }
    out
}

/// One resource instance: its attributes, `id` (its address) and the `_` metadata.
fn resource_json(config: &Config, i: &Inspected) -> J {
    let mut m = match i.attrs.to_json() {
        J::Object(m) => m,
        _ => Map::new(),
    };
    let r = &i.addr.resource;
    m.insert("id".into(), json!(i.addr.to_string()));
    m.insert("_provider".into(), json!(i.provider.to_string()));
    m.insert("_type".into(), json!(r.type_));
    m.insert("_name".into(), json!(r.name));
    let mode = match r.mode {
        Mode::Managed => "managed",
        Mode::Data => "data",
    };
    m.insert("_mode".into(), json!(mode));
    m.insert("_module".into(), json!(r.module.to_string()));
    m.insert("_schema".into(), json!(!i.schemaless));
    m.insert("_unknown_expansion".into(), json!(i.unknown_expansion));
    let mut unknown = i.attrs.unknown_paths();
    unknown.retain(|p| p != "id" && p != "_provider");
    m.insert("_unknown".into(), json!(unknown));
    if let Some(res) = resource_config(config, i) {
        m.insert("_source".into(), location(&config.sources, res.span));
        m.insert(
            "_attribute_sources".into(),
            J::Object(attribute_locations(config, res)),
        );
    }
    m.insert("_module_calls".into(), json!(call_stack(config, &r.module)));
    J::Object(m)
}

/// Every module instance's named values of one kind, in (module, name) order.
fn named_json(
    config: &Config,
    by_module: &std::collections::HashMap<ModulePath, std::collections::BTreeMap<String, Value>>,
    span_of: impl Fn(&crate::config::Module, &str) -> Option<Span>,
) -> Vec<J> {
    let mut modules: Vec<&ModulePath> = by_module.keys().collect();
    modules.sort();
    let mut out = Vec::new();
    for m in modules {
        let static_module = config.module(&m.without_keys());
        for (name, v) in &by_module[m] {
            let mut o = Map::new();
            o.insert("module".into(), json!(m.to_string()));
            o.insert("name".into(), json!(name));
            value_fields(v, &mut o);
            if let Some(span) = static_module.and_then(|sm| span_of(sm, name)) {
                o.insert("location".into(), location(&config.sources, span));
            }
            out.push(J::Object(o));
        }
    }
    out
}

fn outputs_json(config: &Config, values: &Values) -> Vec<J> {
    named_json(config, &values.outputs, |m, n| {
        m.outputs.get(n).map(|o| o.span)
    })
}

fn locals_json(config: &Config, values: &Values) -> Vec<J> {
    named_json(config, &values.locals, |m, n| {
        m.locals.get(n).map(|l| l.span)
    })
}

fn variables_json(config: &Config, values: &Values) -> Vec<J> {
    named_json(config, &values.vars, |m, n| {
        m.variables.get(n).map(|v| v.span)
    })
}

/// Every module call instance: its address, source, whether its module could be loaded, and
/// where it is called from.
fn calls_json(config: &Config, values: &Values) -> Vec<J> {
    let mut calls: Vec<(&(ModulePath, String), &Expansion)> = values.calls.iter().collect();
    calls.sort_by(|a, b| a.0.cmp(b.0));
    let mut out = Vec::new();
    for ((parent, name), exp) in calls {
        let static_child = parent.without_keys().child(name, None);
        let call = config
            .module(&parent.without_keys())
            .and_then(|m| m.calls.get(name));
        for key in exp.keys() {
            let here = parent.child(name, key);
            out.push(json!({
                "address": here.to_string(),
                "module": parent.to_string(),
                "name": name,
                "source": call.map(|c| c.source.clone()),
                "available": config.module(&static_child).is_some(),
                "unknown_expansion": *exp == Expansion::Unknown,
                "location": call.map(|c| location(&config.sources, c.span)),
                "module_calls": call_stack(config, &here),
            }));
        }
    }
    out
}
