//! `cairn taint ADDR` and `cairn untaint ADDR`: mark a resource instance's current object
//! tainted (the next plan replaces it), or no longer. Each is a state edit recorded as a run
//! of its own (`engine::taint`, through `engine::edit`), so `history` and `log` show who
//! tainted what.
//!
//! Messages and exit codes are Terraform's: `Resource instance X has been marked as
//! tainted.`, a data resource refused before the state is read, Terraform's "No such resource
//! instance" errors, and `-allow-missing`'s warning (exit 0, nothing recorded).

use super::args::TaintArgs;
use super::output::Exit;
use super::state_edit::edit;
use super::Context;
use crate::addr::{Mode, ResourceInstanceAddr};
use crate::diag::{Diagnostic, Diagnostics, SourceMap};
use crate::engine::api::StateEdit;

/// `taint` (`taint` true) or `untaint`.
pub(crate) fn taint(ctx: &Context, a: &TaintArgs, taint: bool) -> Exit {
    let command = if taint { "taint" } else { "untaint" };
    let addr: ResourceInstanceAddr = match a.addr.parse() {
        Ok(addr) => addr,
        Err(e) => {
            let e: crate::addr::AddrError = e;
            return ctx.fail(
                Diagnostic::error(
                    "Invalid address",
                    format!(
                        "{e}. `cairn {command}` takes one resource instance, like sim_thing.a, sim_thing.a[0] or module.m.sim_thing.a[\"k\"]."
                    ),
                ),
                false,
            );
        }
    };
    if taint && addr.resource.mode != Mode::Managed {
        ctx.err(&format!("Resource instance {addr} cannot be tainted\n"));
        return Exit::Error;
    }
    let events = edit(
        ctx,
        command,
        vec![a.addr.clone()],
        &a.lock,
        false,
        StateEdit::Taint {
            addr: addr.clone(),
            taint,
            allow_missing: a.allow_missing,
        },
    );
    match events {
        Ok(events) if events.is_empty() => {
            // Only `-allow-missing` makes a missing instance nothing to do.
            let d = Diagnostic::warning(
                "No such resource instance",
                format!(
                    "Resource instance {addr} was not found, but this is not an error because -allow-missing was set."
                ),
            );
            ctx.report(&SourceMap::new(), &Diagnostics::from(d), false);
            Exit::Ok
        }
        Ok(_) if taint => {
            ctx.out(&format!(
                "Resource instance {addr} has been marked as tainted.\n"
            ));
            Exit::Ok
        }
        Ok(_) => {
            ctx.out(&format!(
                "Resource instance {addr} has been successfully untainted.\n"
            ));
            Exit::Ok
        }
        Err(d) => ctx.fail(d, false),
    }
}
