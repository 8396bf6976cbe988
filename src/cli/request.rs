//! The one conversion from a lifecycle command's arguments to what the engine is asked:
//! [`run_request`] checks the flags (addresses parsed, `-parallelism` at least 1) into a
//! [`RunRequest`], and [`engine_options`] makes the engine's `Options` of it, with the process
//! environment (the engine reads none of its own).

use super::args::{PlanFlags, WalkArgs};
use super::Context;
use crate::config::VarArg;
use crate::diag::{Diagnostic, Diagnostics};
use crate::engine;
use crate::plan::PlanMode;
use cairn_state::{ResourceInstanceAddr, Target};
use std::path::PathBuf;
use std::time::Duration;

/// Everything a lifecycle command asks of the engine, checked.
#[derive(Clone, Debug, PartialEq)]
pub struct RunRequest {
    pub mode: PlanMode,
    pub refresh: bool,
    pub targets: Vec<Target>,
    pub replace: Vec<ResourceInstanceAddr>,
    /// `-var` and `-var-file` in command-line order.
    pub vars: Vec<VarArg>,
    pub parallelism: usize,
    pub lock_timeout: Duration,
    pub state_dir: PathBuf,
    /// The selected workspace, when one was (`None`: `default`).
    pub workspace: Option<String>,
}

/// Builds the request from the shared flags; every bad address is reported.
pub fn run_request(
    ctx: &Context,
    walk: &WalkArgs,
    plan: Option<&PlanFlags>,
    mode: PlanMode,
    vars: Vec<VarArg>,
) -> Result<RunRequest, Diagnostics> {
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
    let mut replace = Vec::new();
    for r in plan.map(|p| p.replace.as_slice()).unwrap_or_default() {
        match r.parse::<ResourceInstanceAddr>() {
            Ok(a) if a.resource.mode == cairn_state::Mode::Managed => replace.push(a),
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
    Ok(RunRequest {
        mode,
        refresh: plan.is_none_or(|p| p.refresh),
        targets,
        replace,
        vars,
        parallelism: walk.parallelism,
        lock_timeout: walk.lock_timeout,
        state_dir: ctx.state_dir.clone(),
        workspace: ctx.selected_workspace(),
    })
}

/// The engine's options from a checked request. The engine reads no environment: it gets
/// the process's here.
pub fn engine_options(req: &RunRequest, command: &str) -> engine::Options {
    let dir = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    let mut o = engine::Options::new(dir.clone());
    o.state_dir = if req.state_dir.is_absolute() {
        req.state_dir.clone()
    } else {
        dir.join(&req.state_dir)
    };
    o.vars = req.vars.clone();
    o.workspace = req.workspace.clone();
    o.env = std::env::vars().collect();
    o.parallelism = req.parallelism;
    o.refresh = req.refresh;
    o.targets = req.targets.clone();
    o.replace = req.replace.clone();
    o.lock_timeout = req.lock_timeout;
    o.command = command.to_string();
    o.args = std::env::args().skip(1).collect();
    o
}
