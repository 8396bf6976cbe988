//! `cairn inspect`: the statically evaluated view of a configuration for policy tools, without
//! providers, credentials or state.
//!
//! Decisions:
//! - The JSON document is versioned (`format_version`) and described by the JSON Schema
//!   `fixtures/inspect/schema.json`, which the tests validate every document against. It is
//!   compact (one line, as `terraform show -json`): it is read by programs, and ten thousand
//!   resources written pretty were most of its bytes and of its time. A
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
use crate::addr::{Mode, ModulePath};
use crate::config::{Config, Resource, ResourceKey, VarArg};
use crate::diag::{SourceMap, Span};
use crate::engine::api::Inspected;
use crate::engine::api::{Expansion, Values};
use crate::value::Value;
use crate::value::ValueMap;
use serde_json::{json, Map, Value as J};
use std::path::PathBuf;

/// The version of the JSON document; bumped only on an incompatible change.
pub(crate) const FORMAT_VERSION: &str = "1.0";

/// `inspect [DIR | FILE.tf]`.
pub(crate) fn inspect(ctx: &Context, a: &InspectArgs, vars: Vec<VarArg>) -> Exit {
    let mut opts = super::engine_options::base_options(ctx, "inspect", vars);
    opts.refresh = false;
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
    let report = match super::lifecycle::block_on(ctx, &opts, crate::engine::api::inspect(&opts)) {
        Ok(r) => r,
        Err(d) => return ctx.fail(d, a.ui.no_color),
    };
    let empty = SourceMap::new();
    let map = report.config.as_ref().map(|c| &c.sources).unwrap_or(&empty);
    let (Some(mut inspection), Some(config)) = (report.result, report.config.as_ref()) else {
        ctx.report(map, &report.diags, a.ui.no_color);
        return Exit::Error;
    };
    let mut instances = inspection.take_instances();
    if !instances.is_sorted_by(|x, y| x.addr <= y.addr) {
        instances.sort_by(|x, y| x.addr.cmp(&y.addr));
    }
    if a.ui.json {
        let values = inspection.values();
        let diagnostics: Vec<J> = report.diags.iter().map(|d| map.to_json(d)).collect();
        // Everything but the resources as one small tree; the resources (the bulk) are
        // written straight from their values on all cores and put in its place.
        let doc = json!({
            "format_version": FORMAT_VERSION,
            "resources": RESOURCES,
            "outputs": outputs_json(config, &values),
            "locals": locals_json(config, &values),
            "variables": variables_json(config, &values),
            "module_calls": calls_json(config, &values),
            "providers_without_schema": inspection.unchecked_providers,
            "diagnostics": diagnostics,
        });
        drop(values);
        let text = serde_json::to_string(&doc).unwrap_or_default();
        let placeholder = serde_json::to_string(RESOURCES).unwrap_or_default();
        // `resources` is the document's second key, so its placeholder comes first.
        let (head, tail) = text.split_once(&placeholder).unwrap_or((&text, ""));
        ctx.out(head);
        ctx.out("[");
        write_resources(config, &instances, |part| ctx.out(part));
        ctx.out("]");
        ctx.out(tail);
        ctx.out("\n");
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

/// Stands for the resources in the document tree until they are written in its place.
const RESOURCES: &str = "@RESOURCES@";

/// How many resources one core renders at a time: the document is written in batches of this
/// many per core, so only a batch's text is ever in memory (about 1 KiB a resource), not the
/// whole array's.
const BATCH: usize = 512;

/// Writes the elements of the `resources` array as JSON text, separated by commas, through
/// `out`, in order: in batches, each cut into one run per core, each run rendered on its own
/// thread into a buffer of its own that every batch reuses.
fn write_resources(config: &Config, instances: &[Inspected], mut out: impl FnMut(&str)) {
    let render = |run: &[Inspected], buf: &mut Vec<u8>| {
        let mut json = JsonOut {
            buf: std::mem::take(buf),
            config,
            calls: None,
            file: None,
        };
        json.buf.clear();
        for (n, i) in run.iter().enumerate() {
            if n > 0 {
                json.buf.push(b',');
            }
            json.resource(i);
        }
        *buf = json.buf;
    };
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut bufs: Vec<Vec<u8>> = (0..threads.min(instances.len().div_ceil(BATCH)))
        .map(|_| Vec::with_capacity(BATCH * 1280))
        .collect();
    let mut first = true;
    for batch in instances.chunks(BATCH * threads) {
        let runs = threads.min(batch.len().div_ceil(BATCH)).max(1);
        let size = batch.len().div_ceil(runs);
        std::thread::scope(|scope| {
            let mut work = batch.chunks(size).zip(bufs.iter_mut());
            // The first run on this thread, the others beside it.
            let here = work.next();
            for (run, buf) in work {
                scope.spawn(move || render(run, buf));
            }
            if let Some((run, buf)) = here {
                render(run, buf);
            }
        });
        for buf in bufs.iter().take(runs) {
            if !std::mem::take(&mut first) {
                out(",");
            }
            // Only `str`s and ASCII were written.
            out(std::str::from_utf8(buf).unwrap_or_default());
        }
    }
}

/// The names of the metadata beside a resource's attributes; an attribute of the same name is
/// left out (its place is taken by the metadata: `id` is the instance address).
const METADATA: &[&str] = &[
    "id",
    "_provider",
    "_type",
    "_name",
    "_mode",
    "_module",
    "_schema",
    "_unknown_expansion",
    "_unknown",
    "_source",
    "_attribute_sources",
    "_module_calls",
];

/// Writes JSON text straight from the values, without building a `serde_json::Value` tree
/// per resource (the bulk of the document: ten thousand resources are millions of small
/// allocations that way). Strings are escaped by serde_json.
struct JsonOut<'c> {
    buf: Vec<u8>,
    config: &'c Config,
    /// The last module instance's `_module_calls` text (instances come in address order,
    /// so the resources of one module instance are consecutive).
    calls: Option<(ModulePath, Vec<u8>)>,
    /// The last location's file and its JSON text.
    file: Option<(crate::diag::FileId, Vec<u8>)>,
}

impl<'c> JsonOut<'c> {
    fn raw(&mut self, s: &str) {
        self.buf.extend_from_slice(s.as_bytes());
    }

    fn str(&mut self, s: &str) {
        // Escaped by serde_json; writing to a Vec<u8> cannot fail.
        let _ = serde_json::to_writer(&mut self.buf, s);
    }

    fn key(&mut self, first: &mut bool, k: &str) {
        if !std::mem::take(first) {
            self.buf.push(b',');
        }
        self.str(k);
        self.buf.push(b':');
    }

    fn json(&mut self, j: &J) {
        let _ = serde_json::to_writer(&mut self.buf, j);
    }

    /// A value as `Value::to_json` gives it (unknowns are null).
    fn value(&mut self, v: &Value) {
        match v {
            Value::Null(_) | Value::Unknown(_) => self.raw("null"),
            Value::Bool(b) => self.raw(if *b { "true" } else { "false" }),
            Value::Number(n) => match n.to_i64() {
                Some(i) => {
                    let _ = std::io::Write::write_fmt(&mut self.buf, format_args!("{i}"));
                }
                None => self.json(&Value::Number(n.clone()).to_json()),
            },
            Value::String(s) => self.str(s),
            Value::List(xs) | Value::Set(xs) | Value::Tuple(xs) => {
                self.buf.push(b'[');
                for (i, x) in xs.iter().enumerate() {
                    if i > 0 {
                        self.buf.push(b',');
                    }
                    self.value(x);
                }
                self.buf.push(b']');
            }
            Value::Map(m) | Value::Object(m) => {
                self.buf.push(b'{');
                let mut first = true;
                for (k, x) in m {
                    self.key(&mut first, k);
                    self.value(x);
                }
                self.buf.push(b'}');
            }
            Value::Sensitive(v) => self.value(v),
        }
    }

    /// `{"file", "line", "column"}` of the start of a span.
    fn location(&mut self, span: Span) {
        let config: &'c Config = self.config;
        let map = &config.sources;
        let p = map.pos(span.file, span.start);
        // The file's JSON text, kept for the next location (mostly in the same file).
        if self.file.as_ref().is_none_or(|(f, _)| *f != span.file) {
            let text =
                serde_json::to_vec(&map.path(span.file).to_string_lossy()).unwrap_or_default();
            self.file = Some((span.file, text));
        }
        self.raw("{\"file\":");
        if let Some((_, text)) = &self.file {
            self.buf.extend_from_slice(text);
        }
        let _ = std::io::Write::write_fmt(
            &mut self.buf,
            format_args!(",\"line\":{},\"column\":{}}}", p.line, p.column),
        );
    }

    /// One resource instance: its attributes, `id` (its address) and the `_` metadata.
    fn resource(&mut self, i: &Inspected) {
        let r = &i.addr.resource;
        self.buf.push(b'{');
        let mut first = true;
        if let Value::Object(m) = i.attrs.unmarked() {
            for (k, v) in m {
                if !METADATA.contains(&k.as_str()) {
                    self.key(&mut first, k);
                    self.value(v);
                }
            }
        }
        self.key(&mut first, "id");
        self.str(&i.addr.to_string());
        self.key(&mut first, "_provider");
        self.str(&i.provider.to_string());
        self.key(&mut first, "_type");
        self.str(&r.type_);
        self.key(&mut first, "_name");
        self.str(&r.name);
        self.key(&mut first, "_mode");
        self.str(match r.mode {
            Mode::Managed => "managed",
            Mode::Data => "data",
            Mode::Ephemeral => "ephemeral",
        });
        self.key(&mut first, "_module");
        self.str(&r.module.to_string());
        self.key(&mut first, "_schema");
        self.raw(if i.schemaless { "false" } else { "true" });
        self.key(&mut first, "_unknown_expansion");
        self.raw(if i.unknown_expansion { "true" } else { "false" });
        self.key(&mut first, "_unknown");
        self.buf.push(b'[');
        let mut n = 0;
        for p in i.attrs.unknown_paths() {
            let root = p.split(['.', '[']).next().unwrap_or_default();
            if METADATA.contains(&root) {
                continue;
            }
            if n > 0 {
                self.buf.push(b',');
            }
            n += 1;
            self.str(&p);
        }
        self.buf.push(b']');
        if let Some(res) = resource_config(self.config, i) {
            self.key(&mut first, "_source");
            self.location(res.span);
            self.key(&mut first, "_attribute_sources");
            self.buf.push(b'{');
            let mut f = true;
            for (n, (path, span)) in i.sources.iter().enumerate() {
                // A path written twice (an invalid body) keeps its first location.
                if i.sources[..n].iter().any(|(p, _)| p == path) {
                    continue;
                }
                self.key(&mut f, path.as_ref());
                self.location(*span);
            }
            self.buf.push(b'}');
        }
        self.key(&mut first, "_module_calls");
        let cached = matches!(&self.calls, Some((m, _)) if *m == r.module);
        if !cached {
            let text = serde_json::to_vec(&call_stack(self.config, &r.module)).unwrap_or_default();
            self.calls = Some((r.module.clone(), text));
        }
        if let Some((_, text)) = &self.calls {
            self.buf.extend_from_slice(text);
        }
        self.buf.push(b'}');
    }
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

/// Every module instance's named values of one kind, in (module, name) order.
fn named_json(
    config: &Config,
    by_module: &std::collections::HashMap<ModulePath, ValueMap>,
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
