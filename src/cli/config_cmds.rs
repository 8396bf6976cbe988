//! Commands over the configuration alone: `validate` (problems with locations, or Terraform's
//! `validate -json` document) and `init` (check the configuration, name its providers and
//! where each provider instance comes from, create the state directory).
//!
//! Decisions:
//! - Paths in diagnostics are relative to the working directory (after `-chdir`), as Terraform
//!   shows `main.tf:3:5`.
//! - `init` is idempotent: it creates nothing that exists, and says what it found. It installs
//!   every plugin provider the configuration needs (`provider::install::init`: mirrors, the
//!   registry, the lock file) and then says, for each provider source address, what runs (a
//!   plugin with its version and where it came from, a development override, or the built-in
//!   provider of that type) and, for each provider instance, where it is configured: by a
//!   `provider` block, passed down through a module call's `providers`, inherited from the
//!   parent module, or a *default* instance (a root provider with no block, configured from
//!   stack configuration).

use super::args::{ForceUnlockArgs, InitArgs, ValidateArgs};
use super::output::Exit;
use super::Context;
use crate::addr::provider_source::SourceAddr;
use crate::addr::ProviderAddr;
use crate::config::{Config, Module, VarArg};
use crate::diag::{Diagnostic, Diagnostics, SourceMap};
use crate::engine::api::backend::{self, BackendRequest, StateStatus};
use crate::provider::install::init::{self as installer, Selected};
use serde_json::json;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

/// The CLI configuration (`provider_installation`, `plugin_cache_dir`, …) that the process
/// environment names (`CAIRN_CLI_CONFIG_FILE`, `TF_CLI_CONFIG_FILE`, `~/.terraformrc`): the
/// environment is read here, in the CLI, and handed to the installer as a map. Code below the
/// CLI that has `engine::api::Options::env` calls `CliConfig::from_env(&env, &dir)` instead.
pub(crate) fn cli_config() -> Result<crate::provider::install::CliConfig, Diagnostic> {
    let env: BTreeMap<String, String> = std::env::vars().collect();
    let cwd = std::env::current_dir().unwrap_or_else(|_| std::path::PathBuf::from("."));
    crate::provider::install::CliConfig::from_env(&env, &cwd)
}

/// Loads the configuration of the working directory.
pub(crate) fn load_config() -> (Option<Config>, Diagnostics) {
    crate::config::load(Path::new("."))
}

pub(crate) fn green_bold(s: &str, color: bool) -> String {
    if color {
        format!("\x1b[1m\x1b[32m{s}\x1b[0m")
    } else {
        s.to_string()
    }
}

pub(crate) fn validate(ctx: &Context, a: &ValidateArgs, vars: &[VarArg]) -> Exit {
    let dir = std::env::current_dir().unwrap_or_else(|_| std::path::PathBuf::from("."));
    let mut inputs = ctx.early_inputs(vars);
    inputs.cwd = dir.clone();
    let req = crate::engine::schema_checks::ValidateRequest {
        dir,
        state_dir: ctx.state_dir.clone(),
        env: std::env::vars().collect(),
        inputs,
    };
    let report = crate::engine::schema_checks::validate(&req);
    let (config, diags) = (report.config, report.diags);
    let empty = SourceMap::new();
    let map = config.as_ref().map(|c| &c.sources).unwrap_or(&empty);
    let valid = !diags.has_errors();
    if a.ui.json {
        let doc = json!({
            "format_version": "1.0",
            "valid": valid,
            "error_count": diags.error_count(),
            "warning_count": diags.warning_count(),
            "diagnostics": diags.iter().map(|d| map.to_json(d)).collect::<Vec<_>>(),
        });
        let text = serde_json::to_string_pretty(&doc).unwrap_or_default();
        ctx.out(&format!("{text}\n"));
    } else {
        ctx.report(map, &diags, a.ui.no_color);
        if valid {
            let (color, _) = ctx.colors(a.ui.no_color);
            let tail = if diags.is_empty() {
                "The configuration is valid."
            } else {
                "The configuration is valid, but there were some validation warnings as shown above."
            };
            ctx.out(&format!("{} {tail}\n", green_bold("Success!", color)));
        }
    }
    if valid {
        Exit::Ok
    } else {
        Exit::Error
    }
}

/// Where a provider instance comes from, for `init`.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Origin {
    addr: ProviderAddr,
    how: String,
    /// The provider source address the instance's local name stands for where it is declared.
    source: SourceAddr,
}

/// Per provider instance: how it is configured, its source address, and how many resource
/// blocks use it.
type Instances = BTreeMap<ProviderAddr, (String, SourceAddr, usize)>;

/// The package a module's local provider name stands for (`required_providers` may map it).
fn package_of_name(m: &Module, name: &str) -> String {
    m.required_providers
        .get(name)
        .and_then(|r| r.source.as_deref())
        .map(|s| s.rsplit('/').next().unwrap_or(s).to_string())
        .unwrap_or_else(|| name.to_string())
}

/// Walks the module tree resolving which instance each resource uses. `inherited` maps
/// (local name, alias) to the instance the parent hands down.
fn resolve(
    config: &Config,
    m: &Module,
    inherited: &BTreeMap<(String, Option<String>), Origin>,
    out: &mut Instances,
    diags: &mut Diagnostics,
) {
    let map = &config.sources;
    let mut here = inherited.clone();
    for p in &m.providers {
        let addr = ProviderAddr {
            module: m.path.clone(),
            package: package_of_name(m, &p.name),
            alias: p.alias.clone(),
            key: None,
        };
        let how = format!("the provider block at {}", map.location(p.span));
        let source = m.provider_source(&p.name);
        out.entry(addr.clone())
            .or_insert((how.clone(), source.clone(), 0));
        here.insert(
            (p.name.clone(), p.alias.clone()),
            Origin { addr, how, source },
        );
    }
    for r in m.resources.values() {
        let (name, alias) = match &r.provider {
            Some(p) => (p.name.clone(), p.alias.clone()),
            None => (r.provider_name().to_string(), None),
        };
        let origin = match here.get(&(name.clone(), alias.clone())) {
            Some(o) => o.clone(),
            None if alias.is_none() => {
                let addr = ProviderAddr::default_for(
                    crate::addr::ModulePath::root(),
                    &package_of_name(m, &name),
                );
                Origin {
                    how: "a default instance (no provider block: configured from stack \
                          configuration)"
                        .into(),
                    addr,
                    source: m.provider_source(&name),
                }
            }
            None => {
                diags.push(
                    Diagnostic::error(
                        "Provider configuration not present",
                        format!(
                            "{} uses the provider configuration {name}.{}, which this module \
                             neither declares with a provider block nor receives through its \
                             module call's `providers` argument.",
                            r.key().addr(m.path.clone()),
                            alias.as_deref().unwrap_or_default()
                        ),
                    )
                    .with_span(r.provider.as_ref().map(|p| p.span)),
                );
                continue;
            }
        };
        out.entry(origin.addr.clone())
            .or_insert((origin.how, origin.source, 0))
            .2 += 1;
    }
    for (name, call) in &m.calls {
        let Some(child) = m.children.get(name) else {
            continue;
        };
        let mut passed: BTreeMap<(String, Option<String>), Origin> = BTreeMap::new();
        if call.providers.is_empty() {
            // Implicit inheritance: the parent's default (non-aliased) configurations.
            for ((n, a), o) in &here {
                if a.is_none() {
                    passed.insert((n.clone(), None), o.clone());
                }
            }
        } else {
            for pass in &call.providers {
                let key = (pass.parent.name.clone(), pass.parent.alias.clone());
                let o = here.get(&key).cloned().unwrap_or_else(|| Origin {
                    addr: ProviderAddr::default_for(
                        crate::addr::ModulePath::root(),
                        &package_of_name(m, &pass.parent.name),
                    ),
                    how: "a default instance (no provider block: configured from stack \
                          configuration)"
                        .into(),
                    source: m.provider_source(&pass.parent.name),
                });
                passed.insert((pass.child.name.clone(), pass.child.alias.clone()), o);
            }
        }
        resolve(config, child, &passed, out, diags);
    }
}

pub(crate) fn init(ctx: &Context, a: &InitArgs, vars: &[VarArg]) -> Exit {
    let inputs = ctx.early_inputs(vars);
    // Modules first: the configuration is only whole once its remote modules are here.
    let module_lines = match cli_config() {
        Ok(cli) => {
            let got = crate::provider::install::modules::install(
                Path::new("."),
                &cli,
                a.upgrade,
                &inputs,
            );
            if got.diags.has_errors() {
                ctx.report(&SourceMap::new(), &got.diags, a.ui.no_color);
                ctx.err(
                    "Cairn could not be initialized: fix the errors above and run `cairn init` \
                     again.\n",
                );
                return Exit::Error;
            }
            got.lines
        }
        Err(_) => Vec::new(),
    };
    let (config, mut diags) = crate::config::load_with(Path::new("."), &inputs);
    let Some(config) = config else {
        ctx.report(&SourceMap::new(), &diags, a.ui.no_color);
        return Exit::Error;
    };
    let mut instances = Instances::new();
    resolve(
        &config,
        &config.root,
        &BTreeMap::new(),
        &mut instances,
        &mut diags,
    );
    let builtin = crate::provider::builtin::builtin();
    // Install plugins (only when the configuration itself is sound: a broken source address
    // must not start downloads).
    let mut selected = BTreeMap::new();
    let mut lock_before = None;
    if !diags.has_errors() {
        match cli_config() {
            Err(d) => diags.push(d),
            Ok(cli) => {
                diags.extend(cli.warnings.iter().cloned());
                lock_before = std::fs::read_to_string(crate::provider::install::LOCK_FILE).ok();
                let req = installer::Request {
                    config_dir: Path::new("."),
                    cli: &cli,
                    requirements: config
                        .provider_requirements()
                        .into_iter()
                        .map(|(addr, r)| (addr, r.constraints))
                        .collect(),
                    builtin_types: builtin.keys().cloned().collect(),
                    upgrade: a.upgrade,
                };
                let (sel, d) = installer::install(&req);
                selected = sel;
                diags.extend(d);
            }
        }
    }
    // Types served by a plugin (or whose installation failed, already reported) are checked
    // by the plugin at plan time, not against the built-in providers here.
    let not_builtin: std::collections::BTreeSet<String> = config
        .provider_requirements()
        .keys()
        .filter(|addr| !matches!(selected.get(*addr), Some(Selected::BuiltIn)))
        .map(|addr| addr.type_.clone())
        .collect();
    let skip_spans: std::collections::BTreeSet<(u32, usize)> = config
        .modules()
        .iter()
        .flat_map(|m| m.resources.values())
        .filter(|r| not_builtin.contains(crate::addr::package_of(&r.type_)))
        .map(|r| (r.span.file.0, r.span.start))
        .collect();
    diags.extend(
        crate::engine::schema_checks::check_types(&config, &builtin, true)
            .into_iter()
            .filter(|d| {
                d.span
                    .is_none_or(|s| !skip_spans.contains(&(s.file.0, s.start)))
            }),
    );
    let schema = |mode, type_: &str| {
        let package = crate::addr::package_of(type_);
        if not_builtin.contains(package) {
            return None;
        }
        builtin
            .get(package)
            .and_then(|p| p.schema().block(mode, type_))
    };
    diags.extend(crate::config::validate(&config, &schema));
    let (color, _) = ctx.colors(a.ui.no_color);
    if ctx.report(&config.sources, &diags, a.ui.no_color) {
        ctx.err(
            "Cairn could not be initialized: fix the errors above and run `cairn init` again.\n",
        );
        return Exit::Error;
    }
    let mut out = String::new();
    let modules = config.modules().len();
    let _ = writeln!(
        out,
        "Initializing Cairn in {}",
        std::env::current_dir()
            .map(|d| d.display().to_string())
            .unwrap_or_else(|_| ".".into())
    );
    let _ = writeln!(
        out,
        "- Configuration: {modules} module{}, valid.",
        if modules == 1 { "" } else { "s" }
    );
    if !module_lines.is_empty() {
        let _ = writeln!(out, "- Modules:");
        for l in &module_lines {
            let _ = writeln!(out, "  {l}");
        }
    }
    if selected.is_empty() {
        let _ = writeln!(out, "- Providers: none used yet.");
    } else {
        let _ = writeln!(out, "- Providers:");
        for (addr, sel) in &selected {
            let _ = writeln!(out, "  - {}", describe_selected(addr, sel));
        }
        let lock_now = std::fs::read_to_string(crate::provider::install::LOCK_FILE).ok();
        let lock = crate::provider::install::LOCK_FILE;
        match (&lock_before, &lock_now) {
            (None, Some(_)) => {
                let _ = writeln!(out, "- Lock file: created {lock}.");
            }
            (Some(b), Some(n)) if b != n => {
                let _ = writeln!(out, "- Lock file: updated {lock}.");
            }
            (Some(_), Some(_)) => {
                let _ = writeln!(out, "- Lock file: {lock} unchanged.");
            }
            _ => {}
        }
    }
    if !instances.is_empty() {
        let _ = writeln!(out, "- Provider instances:");
        for (addr, (how, source, n)) in &instances {
            let runs = match selected.get(source) {
                Some(Selected::BuiltIn) | None => format!("the built-in {}", source.type_),
                Some(Selected::DevOverride(_)) => {
                    format!("the plugin {} (dev override)", source.short())
                }
                Some(Selected::Plugin { version, .. }) => {
                    format!("the plugin {} {version}", source.short())
                }
            };
            let _ = writeln!(
                out,
                "  - {addr}: {how}; used by {n} resource block{}; runs {runs}",
                if *n == 1 { "" } else { "s" }
            );
        }
    }
    match configure_backend(ctx, &config, a)
        .and_then(|lines| backend::record_backend_digest(&ctx.state_root, &config).map(|_| lines))
    {
        Ok(lines) => {
            for l in lines {
                let _ = writeln!(out, "{l}");
            }
        }
        Err(d) => {
            ctx.out(&out);
            // A backend argument's error points into the configuration.
            ctx.report(&config.sources, &Diagnostics::from(d), a.ui.no_color);
            return Exit::Error;
        }
    }
    match state_dir_status(ctx) {
        Ok(s) => {
            let _ = writeln!(out, "- State: {s}");
        }
        Err(d) => {
            ctx.out(&out);
            return ctx.fail(d, a.ui.no_color);
        }
    }
    if selected
        .values()
        .any(|s| matches!(s, Selected::DevOverride(_)))
    {
        let _ = writeln!(
            out,
            "\nWarning: provider development overrides are in effect: the overridden providers \
             are not installed or locked, and run from their directories as they are."
        );
    }
    let _ = writeln!(
        out,
        "\n{}\n\nRun `cairn plan` to see what Cairn would change.",
        green_bold("Cairn has been successfully initialized!", color)
    );
    ctx.out(&out);
    Exit::Ok
}

/// Resolves and records the backend (`engine::api::backend`), and says what moved.
fn configure_backend(
    ctx: &Context,
    config: &Config,
    a: &InitArgs,
) -> Result<Vec<String>, Diagnostic> {
    let req = BackendRequest {
        state_root: &ctx.state_root,
        backend_config: &a.backend_config,
        migrate_state: a.migrate_state,
        reconfigure: a.reconfigure,
        lock_timeout: a.lock_timeout,
    };
    let Some(change) = backend::configure_backend(config, &req)? else {
        return Ok(Vec::new());
    };
    let mut lines = Vec::new();
    for m in &change.migrations {
        let which = if change.workspaces > 1 {
            format!(" (workspace {:?})", m.workspace)
        } else {
            String::new()
        };
        lines.push(format!(
            "- State{which}: copied {} event(s) from {} to {}; verified (event count and \
             checksum chain {}).",
            m.events,
            m.from,
            m.to,
            &m.checksum[..16]
        ));
        if let Some(backup) = &m.backup {
            lines.push(format!(
                "- The local log{which} was moved to {} (a backup; delete it when you no \
                 longer need it).",
                backup.display()
            ));
        }
    }
    Ok(lines)
}

/// `cairn force-unlock LOCK_ID`.
pub(crate) fn force_unlock(ctx: &Context, a: &ForceUnlockArgs) -> Exit {
    let lock = match backend::shared_lock(&ctx.state_dir) {
        Ok(lock) => lock,
        Err(d) => return ctx.fail(d, false),
    };
    if !a.force {
        if !ctx.stdin_tty {
            return ctx.fail(
                Diagnostic::error(
                    "Confirmation required",
                    "Standard input is not a terminal, so Cairn cannot ask whether to \
                     force-unlock. Run `cairn force-unlock -force LOCK_ID` to do it without \
                     asking.",
                ),
                false,
            );
        }
        ctx.out(&format!(
            "Do you really want to force-unlock?\n  Cairn will end the database session of the \
             run holding lock {}. If that run is still working, it stops writing state.\n  \
             Only 'yes' will be accepted to confirm.\n\n  Enter a value: ",
            a.lock_id
        ));
        let mut answer = String::new();
        let _ = std::io::stdin().read_line(&mut answer);
        if answer.trim() != "yes" {
            ctx.out("force-unlock cancelled.\n");
            return Exit::Error;
        }
    }
    match lock.force_unlock(&a.lock_id) {
        Ok(msg) => {
            ctx.out(&format!("{msg}\n"));
            Exit::Ok
        }
        Err(d) => ctx.fail(d, false),
    }
}

/// One line of `init`'s provider list: what runs for a source address and where it came from.
pub(crate) fn describe_selected(addr: &SourceAddr, sel: &Selected) -> String {
    match sel {
        Selected::BuiltIn => format!("{}: built in (no plugin installed)", addr.short()),
        Selected::DevOverride(d) => format!(
            "{}: plugin from dev_overrides ({}), not locked",
            addr.short(),
            d.display()
        ),
        Selected::Plugin { version, from, dir } => {
            let dir = dir.strip_prefix(".").unwrap_or(dir);
            format!(
                "{} {version}: plugin from {from}, in {}",
                addr.short(),
                dir.display()
            )
        }
    }
}

/// Creates the state directory if needed and says what is there.
fn state_dir_status(ctx: &Context) -> Result<String, Diagnostic> {
    let (status, warnings) = backend::ensure_state(&ctx.state_dir, "init")?;
    ctx.recovered(warnings);
    Ok(match status {
        StateStatus::Found {
            location,
            events,
            instances,
        } => format!(
            "found {location} ({events} event{}, {instances} resource instance{}).",
            if events == 1 { "" } else { "s" },
            if instances == 1 { "" } else { "s" }
        ),
        StateStatus::Created { location } => format!("created {location}."),
    })
}
