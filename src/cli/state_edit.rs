//! The one way the CLI runs a state edit (`state rm|mv|import-tfstate|push|replace-provider`,
//! `taint`, `untaint`): the engine's `api::state_edit`, a run of its own, with the store's
//! recovery warnings printed as they come. Its own file so that the command files that call
//! it (`state_cmds`, `taint_cmds`, `state_replace_cmds`) do not import each other.

use super::args::LockArgs;
use super::Context;
use crate::diag::{Diagnostic, Diagnostics, SourceMap};
use crate::engine::api::{EditRequest, StateEdit};
use cairn_state::EventBody;

/// Runs a state edit in the engine (a run of its own: `engine::edit`), printing the store's
/// warnings as they come.
pub(crate) fn edit(
    ctx: &Context,
    command: &str,
    args: Vec<String>,
    lock: &LockArgs,
    dry_run: bool,
    edit: StateEdit,
) -> Result<Vec<EventBody>, Diagnostic> {
    let req = EditRequest {
        dir: std::env::current_dir().unwrap_or_else(|_| ".".into()),
        state_dir: ctx.state_dir.clone(),
        command: command.to_string(),
        args,
        lock_timeout: lock.lock_timeout,
        lock: lock.lock,
        dry_run,
    };
    let report = crate::engine::api::state_edit(&req, edit);
    for w in report.notes {
        let d = Diagnostic::warning("State recovered", w);
        ctx.report(&SourceMap::new(), &Diagnostics::from(d), false);
    }
    match (report.result, report.diags.into_iter().next()) {
        (Some(events), None) => Ok(events),
        (_, Some(d)) => Err(d),
        (None, None) => Ok(Vec::new()),
    }
}
