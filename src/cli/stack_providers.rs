//! `cairn stack init`'s provider installation: the providers a stack's `required_providers`
//! names and those its components' modules require, installed as `cairn init` installs a
//! root module's (`provider::install::init`: the same CLI configuration — mirrors,
//! `dev_overrides`, `plugin_cache_dir` — into `.terraform/providers` of the stack's
//! directory, locked in `.terraform.lock.hcl` beside the stack files). Each component's
//! provider configurations must be of the provider its module requires under that local
//! name: a stack's `provider.aws.x` passed to a module whose `aws` is another source is an
//! error, as in HCP Terraform (else the module's name would run another provider).

use super::config_cmds::describe_selected;
use super::Context;
use crate::addr::provider_source::SourceAddr;
use crate::addr::version::Constraints;
use crate::config::stack::{passed_provider_types, StackConfig};
use crate::diag::{Diagnostic, Diagnostics};
use crate::provider::install::init::{self as installer, Selected};
use crate::provider::install::{CliConfig, LOCK_FILE};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Installs the stack's providers; returns `init`'s lines about them, or `None` when it
/// failed (the errors are reported).
pub(super) fn install(
    ctx: &Context,
    dir: &Path,
    cfg: &StackConfig,
    modules: &[(String, PathBuf)],
    cli: &CliConfig,
    upgrade: bool,
    no_color: bool,
) -> Option<Vec<String>> {
    let mut requirements: BTreeMap<SourceAddr, Constraints> = BTreeMap::new();
    for (addr, constraints, _) in cfg.model.required_providers.values() {
        requirements
            .entry(addr.clone())
            .or_default()
            .merge(constraints);
    }
    let mut stack_diags = Diagnostics::new();
    for (key, module) in modules {
        let inputs = crate::config::EarlyInputs::in_dir(module);
        let (config, diags) = crate::config::load_with(module, &inputs);
        let Some(config) = config else {
            ctx.report(&crate::diag::SourceMap::new(), &diags, no_color);
            return None;
        };
        if ctx.report(&config.sources, &diags, no_color) {
            return None;
        }
        for (addr, r) in config.provider_requirements() {
            requirements.entry(addr).or_default().merge(&r.constraints);
        }
        let name = key.strip_prefix("component.").unwrap_or(key);
        let Some(c) = cfg.model.components.get(name) else {
            continue;
        };
        for (local, ty, span) in passed_provider_types(c) {
            let Some((stack_addr, _, _)) = cfg.model.required_providers.get(&ty) else {
                continue;
            };
            let module_addr = config.root.provider_source(&local);
            if module_addr != *stack_addr {
                stack_diags.push(
                    Diagnostic::error(
                        "Provider type mismatch",
                        format!(
                            "{key} passes provider.{ty}.… ({}) as its module's provider \
                             {local}, which the module ({}) requires as {}: add {local} = {{ \
                             source = \"{}\" }} to the module's required_providers, or pass a \
                             configuration of the provider it requires.",
                            stack_addr.short(),
                            module.display(),
                            module_addr.short(),
                            stack_addr.short()
                        ),
                    )
                    .with_span(Some(span)),
                );
            }
        }
    }
    if ctx.report(&cfg.sources, &stack_diags, no_color) {
        return None;
    }
    let mut warnings = Diagnostics::new();
    warnings.extend(cli.warnings.iter().cloned());
    ctx.report(&crate::diag::SourceMap::new(), &warnings, no_color);
    let lock_before = std::fs::read_to_string(dir.join(LOCK_FILE)).ok();
    let builtin = crate::provider::builtin::builtin();
    let req = installer::Request {
        config_dir: dir,
        cli,
        requirements,
        builtin_types: builtin.keys().cloned().collect(),
        upgrade,
    };
    let (selected, diags) = installer::install(&req);
    if ctx.report(&crate::diag::SourceMap::new(), &diags, no_color) {
        return None;
    }
    let mut lines = Vec::new();
    if selected.is_empty() {
        lines.push("- Providers: none required.".to_string());
        return Some(lines);
    }
    lines.push("- Providers:".to_string());
    for (addr, sel) in &selected {
        let sel = match sel {
            Selected::Plugin {
                version,
                from,
                dir: at,
            } => Selected::Plugin {
                version: version.clone(),
                from: from.clone(),
                dir: at.strip_prefix(dir).unwrap_or(at).to_path_buf(),
            },
            other => other.clone(),
        };
        lines.push(format!("  - {}", describe_selected(addr, &sel)));
    }
    let lock_now = std::fs::read_to_string(dir.join(LOCK_FILE)).ok();
    match (&lock_before, &lock_now) {
        (None, Some(_)) => lines.push(format!("- Lock file: created {LOCK_FILE}.")),
        (Some(b), Some(n)) if b != n => lines.push(format!("- Lock file: updated {LOCK_FILE}.")),
        (Some(_), Some(_)) => lines.push(format!("- Lock file: {LOCK_FILE} unchanged.")),
        _ => {}
    }
    if selected
        .values()
        .any(|s| matches!(s, Selected::DevOverride(_)))
    {
        lines.push(
            "\nWarning: provider development overrides are in effect: the overridden \
             providers are not installed or locked, and run from their directories as they \
             are."
                .to_string(),
        );
    }
    Some(lines)
}
