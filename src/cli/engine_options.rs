//! The one conversion from a command's arguments to what the engine is asked: the engine's
//! `Options`, with the process environment (the engine reads none of its own).
//! [`engine_options`] checks a lifecycle command's flags (addresses parsed, `-parallelism` at
//! least 1) and reports every bad one; [`base_options`] is what every command shares.

use super::args::{PlanFlags, WalkArgs};
use super::Context;
use crate::addr::{ResourceInstanceAddr, Target};
use crate::config::VarArg;
use crate::diag::{Diagnostic, Diagnostics};
use crate::engine::api;
use std::path::PathBuf;

/// The options every command starts from: the working directory, the state directory and
/// workspace, the variables (`-var`, `-var-file` in command-line order), the environment and
/// the command line.
pub(crate) fn base_options(ctx: &Context, command: &str, vars: Vec<VarArg>) -> api::Options {
    let dir = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    let mut o = api::Options::new(dir.clone());
    o.state_dir = if ctx.state_dir.is_absolute() {
        ctx.state_dir.clone()
    } else {
        dir.join(&ctx.state_dir)
    };
    o.vars = vars;
    o.workspace = ctx.selected_workspace();
    o.env = std::env::vars().collect();
    o.command = command.to_string();
    o.args = std::env::args().skip(1).collect();
    o
}

/// A lifecycle command's options from its flags (`plan` is `None` for commands without
/// `-replace`/`-refresh`); every bad address is reported.
pub(crate) fn engine_options(
    ctx: &Context,
    command: &str,
    vars: Vec<VarArg>,
    walk: &WalkArgs,
    plan: Option<&PlanFlags>,
) -> Result<api::Options, Diagnostics> {
    let mut diags = Diagnostics::new();
    let mut targets = Vec::new();
    for t in &walk.target {
        match t.parse::<Target>() {
            Ok(t) => targets.push(t),
            Err(e) => diags.push(Diagnostic::error(
                "Invalid target address",
                format!("-target={t}: {e}."),
            )),
        }
    }
    let mut excludes = Vec::new();
    for t in &walk.exclude {
        match t.parse::<Target>() {
            Ok(t) => excludes.push(t),
            Err(e) => diags.push(Diagnostic::error(
                "Invalid exclude address",
                format!("-exclude={t}: {e}."),
            )),
        }
    }
    if !walk.target.is_empty() && !walk.exclude.is_empty() {
        // OpenTofu's words.
        diags.push(Diagnostic::error(
            "Invalid combination of arguments",
            "-target and -exclude flags cannot be used together. Please remove one of the flags",
        ));
    }
    let mut replace = Vec::new();
    for r in plan.map(|p| p.replace.as_slice()).unwrap_or_default() {
        match r.parse::<ResourceInstanceAddr>() {
            Ok(a) if a.resource.mode == crate::addr::Mode::Managed => replace.push(a),
            Ok(a) => diags.push(Diagnostic::error(
                "Invalid replace address",
                format!(
                    "-replace={a}: only managed resources can be replaced; {a} is a data resource."
                ),
            )),
            Err(e) => diags.push(Diagnostic::error(
                "Invalid replace address",
                format!("-replace={r}: {e}."),
            )),
        }
    }
    if walk.parallelism == 0 {
        diags.push(Diagnostic::error(
            "Invalid -parallelism",
            "-parallelism must be at least 1.",
        ));
    }
    if diags.has_errors() {
        return Err(diags);
    }
    let mut o = base_options(ctx, command, vars);
    o.refresh = plan.is_none_or(|p| p.refresh);
    o.targets = targets;
    o.excludes = excludes;
    o.lock = walk.lock;
    o.replace = replace;
    o.parallelism = walk.parallelism;
    o.lock_timeout = walk.lock_timeout;
    Ok(o)
}
