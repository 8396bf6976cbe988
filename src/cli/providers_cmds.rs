//! The provider and module commands Terraform users run around `init`: `providers` (the
//! requirement tree by module, and what the state requires), `providers schema -json`,
//! `get` (modules only) and `modules` (the declared modules with their resolved versions).
//!
//! Decisions:
//! - Terraform prints the trees of `providers` and `modules -json`'s list in Go's map order,
//!   which changes from run to run; Cairn prints them sorted (providers by source address,
//!   then child modules by name), so its output is stable. The shape and every line are
//!   Terraform's.
//! - `providers` reads the configuration and, if there is one, the state (without its lock).
//!   The state names provider packages; each is shown by the source address the
//!   configuration gives it (else Terraform's implied `hashicorp/NAME`).
//! - `providers schema -json` covers the providers the configuration and the state require,
//!   each answered by its plugin (`GetProviderSchema`, asked live) or, without one, by the
//!   built-in provider of its type (`provider::schema_json`).

use super::args::{
    GetArgs, ModulesArgs, ProvidersArgs, ProvidersCommand, ProvidersLockArgs, ProvidersMirrorArgs,
    ProvidersSchemaArgs,
};
use super::config_cmds::{cli_config, load_config};
use super::output::Exit;
use super::Context;
use crate::addr::module_source::{is_local, parse_source, Remote};
use crate::addr::provider_source::SourceAddr;
use crate::addr::version::Constraints;
use crate::config::{Config, Module};
use crate::diag::{Diagnostic, SourceMap};
use crate::provider::install::cli_config::MethodKind;
use crate::provider::install::locking::{self, LockRequest};
use crate::provider::install::CliConfig;
use crate::provider::schema_json;
use serde_json::{json, Map, Value as J};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

pub(crate) fn providers(ctx: &Context, a: ProvidersArgs) -> Exit {
    match a.command {
        None => tree(ctx),
        Some(ProvidersCommand::Schema(s)) => schema(ctx, &s),
        Some(ProvidersCommand::Lock(l)) => lock(ctx, &l),
        Some(ProvidersCommand::Mirror(m)) => mirror(ctx, &m),
    }
}

/// What `providers lock` and `providers mirror` share: the configuration's requirements
/// (only the named ones, if any), the platforms, the source.
fn lock_request(
    ctx: &Context,
    platforms: &[String],
    only: Option<MethodKind>,
    named: &[String],
) -> Result<(Config, CliConfig, LockRequestParts), Exit> {
    let Some(config) = loaded(ctx) else {
        return Err(Exit::Error);
    };
    let platforms = match locking::platforms(platforms) {
        Ok(p) => p,
        Err(d) => {
            ctx.report(&SourceMap::new(), &d, false);
            return Err(Exit::Error);
        }
    };
    let cli = match cli_config() {
        Ok(c) => c,
        Err(d) => return Err(ctx.fail(d, false)),
    };
    let mut requirements: BTreeMap<SourceAddr, Constraints> = config
        .provider_requirements()
        .into_iter()
        .map(|(a, r)| (a, r.constraints))
        .collect();
    if !named.is_empty() {
        let mut keep = BTreeSet::new();
        let mut diags = crate::diag::Diagnostics::new();
        for raw in named {
            match SourceAddr::parse(raw) {
                Ok(a) if requirements.contains_key(&a) => {
                    keep.insert(a);
                }
                Ok(a) => diags.push(Diagnostic::error(
                    "Invalid provider argument",
                    format!("The provider {a} is not required by the current configuration."),
                )),
                Err(e) => diags.push(Diagnostic::error("Invalid provider source address", e)),
            }
        }
        if ctx.report(&SourceMap::new(), &diags, false) {
            return Err(Exit::Error);
        }
        requirements.retain(|a, _| keep.contains(a));
    }
    Ok((
        config,
        cli,
        LockRequestParts {
            requirements,
            platforms,
            only,
        },
    ))
}

struct LockRequestParts {
    requirements: BTreeMap<SourceAddr, Constraints>,
    platforms: Vec<crate::provider::install::platform::Platform>,
    only: Option<MethodKind>,
}

/// `cairn providers lock`: see `provider::install::locking`.
fn lock(ctx: &Context, a: &ProvidersLockArgs) -> Exit {
    let only = match (&a.fs_mirror, &a.net_mirror) {
        (Some(_), Some(_)) => {
            return ctx.fail(
                Diagnostic::error(
                    "Invalid installation method options",
                    "The -fs-mirror and -net-mirror command line options are mutually-exclusive.",
                ),
                false,
            )
        }
        (Some(d), None) => Some(MethodKind::FilesystemMirror(d.clone())),
        (None, Some(u)) => {
            if !u.starts_with("https://") {
                return ctx.fail(
                    Diagnostic::error(
                        "Invalid network mirror URL",
                        "The -net-mirror option requires a valid https: URL as the mirror base URL.",
                    ),
                    false,
                );
            }
            let base = if u.ends_with('/') {
                u.clone()
            } else {
                format!("{u}/")
            };
            Some(MethodKind::NetworkMirror(base))
        }
        (None, None) => None,
    };
    let (_config, cli, parts) = match lock_request(ctx, &a.platform, only, &a.providers) {
        Ok(r) => r,
        Err(e) => return e,
    };
    let req = LockRequest {
        config_dir: Path::new("."),
        cli: &cli,
        requirements: parts.requirements,
        builtin_types: crate::provider::builtin::builtin()
            .keys()
            .cloned()
            .collect(),
        platforms: parts.platforms,
        only: parts.only,
    };
    let (lines, changed, diags) = locking::lock(&req);
    let mut out = String::new();
    for l in lines {
        out.push_str(&l);
        out.push('\n');
    }
    ctx.out(&out);
    if ctx.report(&SourceMap::new(), &diags, false) {
        return Exit::Error;
    }
    let (color, _) = ctx.colors(false);
    let bold = |s: &str| {
        if color {
            format!("\x1b[1m{s}\x1b[0m")
        } else {
            s.to_string()
        }
    };
    let green = |s: &str| {
        if color {
            format!("\x1b[1m\x1b[32m{s}\x1b[0m")
        } else {
            s.to_string()
        }
    };
    if changed {
        ctx.out(&format!(
            "\n{} {}\n\nReview the changes in .terraform.lock.hcl and then commit to your\n\
             version control system to retain the new checksums.\n\n",
            green("Success!"),
            bold("Cairn has updated the lock file.")
        ));
    } else {
        ctx.out(&format!(
            "\n{} {}\n",
            green("Success!"),
            bold("Cairn has validated the lock file and found no need for changes.")
        ));
    }
    Exit::Ok
}

/// `cairn providers mirror DIR`: see `provider::install::locking::mirror`.
fn mirror(ctx: &Context, a: &ProvidersMirrorArgs) -> Exit {
    let (_config, cli, parts) = match lock_request(ctx, &a.platform, None, &[]) {
        Ok(r) => r,
        Err(e) => return e,
    };
    let req = LockRequest {
        config_dir: Path::new("."),
        cli: &cli,
        requirements: parts.requirements,
        builtin_types: crate::provider::builtin::builtin()
            .keys()
            .cloned()
            .collect(),
        platforms: parts.platforms,
        only: parts.only,
    };
    let (lines, diags) = locking::mirror(&req, &a.dir);
    let mut out = String::new();
    for l in lines {
        out.push_str(&l);
        out.push('\n');
    }
    ctx.out(&out);
    if ctx.report(&SourceMap::new(), &diags, false) {
        return Exit::Error;
    }
    Exit::Ok
}

/// One level of treeprint's drawing: `├── ` / `└── ` before each item, `│   ` / `    ` before
/// the lines of its children.
struct Node {
    text: String,
    children: Vec<Node>,
}

fn draw(nodes: &[Node], prefix: &str, out: &mut String) {
    for (i, n) in nodes.iter().enumerate() {
        let last = i + 1 == nodes.len();
        out.push_str(prefix);
        out.push_str(if last { "└── " } else { "├── " });
        out.push_str(&n.text);
        out.push('\n');
        let inner = format!("{prefix}{}", if last { "    " } else { "│   " });
        draw(&n.children, &inner, out);
    }
}

/// A module's requirements: each provider it uses, with its version constraints.
fn requirements(m: &Module) -> BTreeMap<SourceAddr, Constraints> {
    let mut out: BTreeMap<SourceAddr, Constraints> = BTreeMap::new();
    for name in m.provider_names() {
        let c = out.entry(m.provider_source(&name)).or_default();
        if let Some(r) = m.required_providers.get(&name) {
            c.merge(&r.constraints);
        }
    }
    out
}

fn requirement_nodes(m: &Module) -> Vec<Node> {
    let mut nodes: Vec<Node> = requirements(m)
        .into_iter()
        .map(|(addr, c)| {
            let c = c.to_string();
            Node {
                text: if c.is_empty() {
                    format!("provider[{addr}]")
                } else {
                    format!("provider[{addr}] {c}")
                },
                children: Vec::new(),
            }
        })
        .collect();
    for (name, child) in &m.children {
        nodes.push(Node {
            text: format!("module.{name}"),
            children: requirement_nodes(child),
        });
    }
    nodes
}

/// The source addresses of the providers the state's objects were made by.
fn state_requirements(ctx: &Context, config: &Config) -> Result<BTreeSet<SourceAddr>, Exit> {
    let state = match ctx.read_store("providers") {
        Ok(s) => s,
        Err(d) => return Err(ctx.fail(d, false)),
    };
    let Some(state) = state else {
        return Ok(BTreeSet::new());
    };
    let sources = config.package_sources();
    Ok(state
        .snapshot()
        .resources
        .values()
        .flat_map(|r| r.objects())
        .map(|o| {
            let package = &o.provider.addr.package;
            sources
                .get(package)
                .and_then(|s| SourceAddr::parse(s).ok())
                .unwrap_or_else(|| SourceAddr::implied(package))
        })
        .collect())
}

fn tree(ctx: &Context) -> Exit {
    let Some(config) = loaded(ctx) else {
        return Exit::Error;
    };
    let state = match state_requirements(ctx, &config) {
        Ok(s) => s,
        Err(e) => return e,
    };
    let mut out = String::from("\nProviders required by configuration:\n.\n");
    draw(&requirement_nodes(&config.root), "", &mut out);
    out.push('\n');
    if !state.is_empty() {
        out.push_str("Providers required by state:\n\n");
        for addr in &state {
            out.push_str(&format!("    provider[{addr}]\n\n"));
        }
    }
    ctx.out(&out);
    Exit::Ok
}

fn schema(ctx: &Context, a: &ProvidersSchemaArgs) -> Exit {
    if !a.json {
        ctx.err(
            "The `cairn providers schema` command requires the `-json` flag.\n\n\
             Usage: cairn providers schema -json\n\n  Prints out a json representation of the \
             schemas for all providers used in the current configuration.\n",
        );
        return Exit::Error;
    }
    let Some(config) = loaded(ctx) else {
        return Exit::Error;
    };
    let mut addrs: BTreeSet<SourceAddr> = config.provider_requirements().into_keys().collect();
    match state_requirements(ctx, &config) {
        Ok(s) => addrs.extend(s),
        Err(e) => return e,
    }
    let env: BTreeMap<String, String> = std::env::vars().collect();
    let (schemas, diags) = schema_json::schemas_for(&addrs, Path::new("."), &env);
    if ctx.report(&config.sources, &diags, false) {
        return Exit::Error;
    }
    let doc = schema_json::document(schemas);
    ctx.out(&format!("{}\n", schema_json::go_json(&doc)));
    Exit::Ok
}

/// `cairn get [-update]`: installs the configuration's modules, nothing else, and shows each
/// module call where it is (Terraform's `get` lines, local modules included).
pub(crate) fn get(ctx: &Context, a: &GetArgs) -> Exit {
    let cli = match cli_config() {
        Ok(c) => c,
        Err(d) => return ctx.fail(d, a.no_color),
    };
    let inputs = ctx.early_inputs(&[]);
    let got = crate::provider::install::modules::install(Path::new("."), &cli, a.update, &inputs);
    let mut keyed = got.keyed;
    // Terraform installs depth first, calls in name order: `a`, `a.b`, `b`.
    keyed.sort_by(|x, y| x.0.split('.').cmp(y.0.split('.')));
    let mut out = String::new();
    for (_, lines) in keyed {
        for l in lines {
            out.push_str(&l);
            out.push('\n');
        }
    }
    ctx.out(&out);
    if ctx.report(&SourceMap::new(), &got.diags, a.no_color) {
        return Exit::Error;
    }
    match loaded(ctx) {
        Some(_) => Exit::Ok,
        None => Exit::Error,
    }
}

/// One declared module call for `modules`: its name, source as Terraform prints it, the
/// installed version, its constraints, and its own calls.
struct Declared {
    key: String,
    source: String,
    version: Option<String>,
    constraints: Option<String>,
    children: Vec<Declared>,
}

/// A module source as Terraform's `addrs.ModuleSource.String()` prints it: a local path as
/// written, a registry address without the default host, a go-getter address normalized.
fn display_source(source: &str) -> String {
    if is_local(source) {
        return source.trim_end_matches('/').to_string();
    }
    match parse_source(source) {
        Ok(Remote::Registry {
            host,
            namespace,
            name,
            system,
            sub,
        }) => {
            let mut s = if host == crate::addr::provider_source::DEFAULT_HOST {
                format!("{namespace}/{name}/{system}")
            } else {
                format!("{host}/{namespace}/{name}/{system}")
            };
            if let Some(d) = sub {
                s.push_str(&format!("//{d}"));
            }
            s
        }
        Ok(r) => r.recorded(),
        Err(_) => source.to_string(),
    }
}

fn declared(m: &Module, prefix: &str, versions: &BTreeMap<String, String>) -> Vec<Declared> {
    m.calls
        .values()
        .filter_map(|call| {
            let child = m.children.get(&call.name)?;
            let key = if prefix.is_empty() {
                call.name.clone()
            } else {
                format!("{prefix}.{}", call.name)
            };
            Some(Declared {
                key: call.name.clone(),
                source: display_source(&call.source),
                version: versions.get(&key).cloned(),
                constraints: call.version.as_ref().map(|v| v.trim().to_string()),
                children: declared(child, &key, versions),
            })
        })
        .collect()
}

/// `cairn modules [-json]`: every module the configuration declares (and that is installed),
/// with its resolved version.
pub(crate) fn modules(ctx: &Context, a: &ModulesArgs) -> Exit {
    let Some(config) = loaded(ctx) else {
        return Exit::Error;
    };
    let versions = crate::provider::install::modules::installed_versions(Path::new("."));
    let records = declared(&config.root, "", &versions);
    if a.json {
        fn flatten(records: &[Declared], out: &mut Vec<J>) {
            for r in records {
                let mut m = Map::new();
                m.insert("key".into(), json!(r.key));
                m.insert("source".into(), json!(r.source));
                m.insert(
                    "version".into(),
                    json!(r.version.clone().unwrap_or_default()),
                );
                out.push(J::Object(m));
                flatten(&r.children, out);
            }
        }
        let mut list = Vec::new();
        flatten(&records, &mut list);
        let doc = json!({"format_version": "1.0", "modules": if list.is_empty() { J::Null } else { J::Array(list) }});
        ctx.out(&format!("{}\n", schema_json::go_json(&doc)));
        return Exit::Ok;
    }
    if records.is_empty() {
        ctx.out("No modules found in configuration.\n");
        return Exit::Ok;
    }
    fn nodes(records: &[Declared]) -> Vec<Node> {
        records
            .iter()
            .map(|r| {
                let mut text = format!("\"{}\"[{}]", r.key, r.source);
                if let Some(v) = &r.version {
                    text.push_str(&format!(" {v}"));
                    if let Some(c) = r.constraints.as_ref().filter(|c| *c != v) {
                        text.push_str(&format!(" ({c})"));
                    }
                }
                Node {
                    text,
                    children: nodes(&r.children),
                }
            })
            .collect()
    }
    let mut out = String::from("\nModules declared by configuration:\n.\n");
    draw(&nodes(&records), "", &mut out);
    out.push('\n');
    ctx.out(&out);
    Exit::Ok
}

/// The configuration of the working directory, its problems printed; `None` when it has
/// errors.
fn loaded(ctx: &Context) -> Option<Config> {
    let (config, diags) = load_config();
    let empty = SourceMap::new();
    let map = config.as_ref().map(|c| &c.sources).unwrap_or(&empty);
    if ctx.report(map, &diags, false) {
        return None;
    }
    config
}
