//! `cairn validate`: the configuration checked without state or provider calls — blocks
//! Cairn does not support, resource types against the providers' schemas (built-in and
//! installed plugins, whose schemas come from the cache in the state directory), arguments
//! against those schemas, and dependency cycles with the chain `plan` would print.

use super::report::Report;
use crate::config::Config;
use crate::diag::{Diagnostic, Diagnostics, Span};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

/// What `validate` checks, and with what. The CLI fills it; the engine reads no environment.
#[derive(Clone, Debug)]
pub(crate) struct ValidateRequest {
    /// The root module's directory.
    pub dir: PathBuf,
    /// Where installed plugins' cached schemas are.
    pub state_dir: PathBuf,
    pub env: BTreeMap<String, String>,
    /// What early evaluation reads (`-var`, the environment, the workspace).
    pub inputs: crate::config::EarlyInputs,
}

/// Checks the configuration of `req.dir`: every problem found is in the report's
/// diagnostics, with the configuration (when it loaded) to render them.
pub(crate) fn validate(req: &ValidateRequest) -> Report<()> {
    let (config, mut diags) = crate::config::load_with(&req.dir, &req.inputs);
    if let Some(config) = &config {
        diags.extend(crate::config::unsupported_blocks(config, false));
        let mut providers = crate::provider::builtin::builtin();
        // Installed plugins, with their schemas from the cache in the state directory (a
        // plugin whose binary is not cached yet is started once, for its schema).
        let (plugins, plugin_diags) = crate::provider::plugin::attach::plugins(
            config,
            &req.env,
            &req.dir,
            Some(&req.state_dir),
            true,
            true,
        );
        diags.extend(plugin_diags);
        for p in plugins {
            providers.insert(
                crate::provider::Provider::package(&p).to_string(),
                Arc::new(p),
            );
        }
        diags.extend(validate_with(config, &providers));
    }
    Report {
        result: Some(()),
        diags,
        notes: Vec::new(),
        config: config.map(Arc::new),
    }
}

/// What `validate` checks of a loaded configuration, given its providers: resource types,
/// arguments against the schemas, expressions (input variables unknown), and cycles. Also run
/// by a plan that failed ([`validation_errors`]).
pub(crate) fn validate_with(
    config: &Config,
    providers: &BTreeMap<String, Arc<dyn crate::provider::Provider>>,
) -> Diagnostics {
    let mut diags = check_types(config, providers, false);
    let schema = |mode, type_: &str| {
        providers
            .get(crate::addr::package_of(type_))
            .and_then(|p| p.schema().block(mode, type_))
    };
    diags.extend(crate::config::validate(config, &schema));
    // Cycles, with the chain plan would print.
    let (graph, _) = super::graph::build(config);
    diags.extend(graph.cycle_diagnostics(&config.sources));
    diags
}

/// The errors `validate` finds in a configuration whose plan failed, if any. Terraform
/// validates before it plans and stops there, so an error that does not depend on input
/// values is reported alone, with no partial plan; an error that only the plan's values
/// reveal comes with the plan of what could be planned. Cairn plans without that first pass
/// (it costs a whole evaluation of every configuration) and asks this question only when the
/// plan has failed: the output is Terraform's either way.
pub(crate) fn validation_errors(
    config: &Config,
    registry: &super::providers::Registry,
) -> Diagnostics {
    validate_with(config, registry.packages())
        .into_iter()
        .filter(|d| d.is_error())
        .collect()
}

/// Resource types no built-in provider has: an unknown type of a known provider (with a "did
/// you mean"), and an unknown provider package — an error when `absent_is_error` (`init`,
/// which must have every provider), else one warning naming them all (`validate`: a
/// configuration is not invalid because Cairn lacks its provider).
pub(crate) fn check_types(
    config: &Config,
    providers: &BTreeMap<String, Arc<dyn crate::provider::Provider>>,
    absent_is_error: bool,
) -> Diagnostics {
    let mut diags = Diagnostics::new();
    // Providers Cairn does not have: their resources are checked without a schema (the
    // expressions still are), and one warning names them all.
    let mut unchecked: BTreeMap<&str, Span> = BTreeMap::new();
    for m in config.modules() {
        for r in m.resources.values() {
            let package = crate::addr::package_of(&r.type_);
            let what = match r.mode {
                crate::addr::Mode::Managed => "resource type",
                crate::addr::Mode::Data => "data source",
                crate::addr::Mode::Ephemeral => "ephemeral resource type",
            };
            let d = match providers.get(package) {
                None if absent_is_error => Diagnostic::error(
                    format!("Unknown provider \"{package}\""),
                    format!(
                        "{} \"{}\" belongs to the provider \"{package}\", which is neither built in ({}) nor installed as a plugin. Declare its source in required_providers and run `cairn init` to install it.",
                        capitalize(what),
                        r.type_,
                        providers.keys().map(String::as_str).collect::<Vec<_>>().join(", ")
                    ),
                ),
                None => {
                    unchecked.entry(package).or_insert(r.span);
                    continue;
                }
                Some(p) if p.schema().block(r.mode, &r.type_).is_none() => {
                    let schema = p.schema();
                    let names = match r.mode {
                        crate::addr::Mode::Managed => schema.resources.keys(),
                        crate::addr::Mode::Data => schema.data_sources.keys(),
                        crate::addr::Mode::Ephemeral => schema.ephemeral_resources.keys(),
                    };
                    Diagnostic::error(
                        format!("Invalid {what}"),
                        format!(
                            "The provider \"{package}\" does not support {what} \"{}\".{}",
                            r.type_,
                            crate::eval::suggest::suffix(&r.type_, names.map(String::as_str))
                        ),
                    )
                }
                Some(_) => continue,
            };
            diags.push(d.with_span(Some(r.span)));
        }
    }
    if let Some(first) = unchecked.values().min_by_key(|s| (s.file, s.start)) {
        let names: Vec<String> = unchecked.keys().map(|p| format!("\"{p}\"")).collect();
        let (these, them) = match names.len() {
            1 => ("provider", "its"),
            _ => ("providers", "their"),
        };
        diags.push(
            Diagnostic::warning(
                format!("Unchecked {these}: {}", names.join(", ")),
                format!(
                    "Cairn neither has built in nor has installed the {these} {}, so {them} \
                     resources and data sources were checked without a schema: their \
                     expressions were checked, their argument names and types were not.",
                    names.join(", ")
                ),
            )
            .with_span(Some(*first)),
        );
    }
    diags
}

fn capitalize(s: &str) -> String {
    let mut c = s.chars();
    c.next()
        .map(|f| f.to_uppercase().chain(c).collect())
        .unwrap_or_default()
}

/// What drawing a state (`cairn show`, `state show`, `show -json`) needs of the configuration
/// in the working directory, found without starting a process.
pub(crate) struct StateView {
    /// The nested-block shapes of the state's resource types, so the state is drawn as
    /// Terraform draws it: from the built-in providers and the plugins' cached schemas. Types
    /// whose schema is not at hand (no configuration here, a plugin never run) have none and
    /// are drawn as attributes.
    pub shapes: BTreeMap<String, crate::plan::BlockShape>,
    /// The provider packages' source addresses (`Config::package_sources`).
    pub sources: BTreeMap<String, String>,
}

pub(crate) fn state_view(req: &ValidateRequest, state: &cairn_state::Snapshot) -> StateView {
    let types: std::collections::BTreeSet<(crate::addr::Mode, &str)> = state
        .resources
        .keys()
        .chain(state.data.keys())
        .map(|a| (a.resource.mode, a.resource.type_.as_str()))
        .collect();
    let mut providers = crate::provider::builtin::builtin();
    let mut sources = BTreeMap::new();
    if let (Some(config), _) = crate::config::load_with(&req.dir, &req.inputs) {
        sources = config.package_sources();
        let (plugins, _) = crate::provider::plugin::attach::plugins(
            &config,
            &req.env,
            &req.dir,
            Some(&req.state_dir),
            true,
            false,
        );
        for p in plugins {
            providers.insert(
                crate::provider::Provider::package(&p).to_string(),
                Arc::new(p),
            );
        }
    }
    let shapes = crate::plan::BlockShape::of_types(types, |mode, type_| {
        let package = providers.get(crate::addr::package_of(type_))?;
        package
            .schema()
            .block(mode, type_)
            .map(crate::plan::BlockShape::of)
    });
    StateView { shapes, sources }
}
