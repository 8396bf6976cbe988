//! Which providers of a configuration run as plugins: every provider local name the
//! configuration uses (`required_providers` entries, provider blocks, resource type prefixes,
//! `provider =` arguments) is resolved to its source address (`required_providers`, else
//! Terraform's implied `hashicorp/<name>`), and where `install::Installed::locate` finds a
//! plugin for it (dev_overrides, or `.terraform/providers` checked against the lock file), that
//! plugin is started and answers for the name. Built-in providers answer only for names with no
//! plugin installed.

use super::provider::Source;
use super::{cache::SchemaCache, launch::run_sync, PluginProvider};
use crate::addr::provider_source::SourceAddr;
use crate::config::Config;
use crate::diag::{Diagnostic, Diagnostics};
use crate::provider::install::{CliConfig, Installed};
use std::collections::BTreeMap;
use std::path::Path;

/// Every local name the configuration uses, with its source address and the span that named
/// the source (if a `required_providers` entry did).
pub(crate) fn local_names(config: &Config) -> (BTreeMap<String, SourceAddr>, Diagnostics) {
    let mut diags = Diagnostics::new();
    let mut names: BTreeMap<String, SourceAddr> = BTreeMap::new();
    for m in config.modules() {
        for (name, rp) in &m.required_providers {
            let addr = match &rp.source {
                Some(s) => match SourceAddr::parse(s) {
                    Ok(a) => a,
                    Err(e) => {
                        diags.push(
                            Diagnostic::error("Invalid provider source address", e)
                                .with_span(Some(rp.span)),
                        );
                        continue;
                    }
                },
                None => SourceAddr::implied(name),
            };
            names.entry(name.clone()).or_insert(addr);
        }
    }
    let mut implied = |name: &str| {
        if !name.is_empty() && !names.contains_key(name) {
            names.insert(name.to_string(), SourceAddr::implied(name));
        }
    };
    for m in config.modules() {
        for p in &m.providers {
            implied(&p.name);
        }
        for r in m.resources.values() {
            match &r.provider {
                Some(p) => implied(&p.name),
                None => implied(r.type_.split('_').next().unwrap_or_default()),
            }
        }
    }
    (names, diags)
}

/// A plugin for every local name whose source address has one installed. Plan and apply
/// (`offline` false) start it and ask for its schema, which is cached in `state_dir` per
/// binary hash. `offline` (`inspect`, `validate`): schemas only, from the cache when it has
/// this binary's (no process starts); a plugin whose schema is not cached is started for it
/// only when `start_uncached` (`validate`), else left out (`inspect`).
pub(crate) fn plugins(
    config: &Config,
    env: &BTreeMap<String, String>,
    dir: &Path,
    state_dir: Option<&Path>,
    offline: bool,
    start_uncached: bool,
) -> (Vec<PluginProvider>, Diagnostics) {
    let (names, mut diags) = local_names(config);
    let cli = match CliConfig::from_env(env, dir) {
        Ok(c) => c,
        Err(d) => {
            diags.push(d);
            return (Vec::new(), diags);
        }
    };
    let installed = match Installed::load(dir, &cli) {
        Ok(i) => i,
        Err(d) => {
            diags.push(d);
            return (Vec::new(), diags);
        }
    };
    let mut wanted = Vec::new();
    for (name, addr) in &names {
        match installed.locate(addr) {
            Ok(Some(located)) => {
                tracing::debug!(provider = %name, source = %addr.short(), path = %located.path.display(), origin = %located.origin, "plugin provider");
                wanted.push((name.clone(), located.path));
            }
            Ok(None) => {}
            Err(d) => diags.push(d),
        }
    }
    if wanted.is_empty() {
        return (Vec::new(), diags);
    }
    let env = env.clone();
    let cache = state_dir.map(SchemaCache::new);
    let started = run_sync(async move {
        let mut set = tokio::task::JoinSet::new();
        for (i, (name, path)) in wanted.into_iter().enumerate() {
            let env = env.clone();
            let cache = cache.clone();
            let source = match (offline, start_uncached) {
                (false, _) => Source::Live,
                (true, true) => Source::CacheFirst,
                (true, false) => Source::CacheOnly,
            };
            set.spawn(async move {
                let p = PluginProvider::open(&name, &path, &env, cache.as_ref(), source)
                    .await
                    .map(|p| p.map(|p| p.offline(offline)));
                (i, p)
            });
        }
        let mut out = Vec::new();
        while let Some(r) = set.join_next().await {
            if let Ok(x) = r {
                out.push(x);
            }
        }
        out.sort_by_key(|(i, _)| *i);
        out
    });
    let mut out = Vec::new();
    for (_, r) in started {
        match r {
            Ok(Some(p)) => out.push(p),
            Ok(None) => {}
            Err(e) => diags.push(Diagnostic::error("Cannot start a provider plugin", e)),
        }
    }
    (out, diags)
}
