//! `cairn console`: reads expressions from standard input, one per line, and prints each value
//! in the root module's scope, as `terraform console` does.
//!
//! The scope is the engine's `inspect` evaluation (`engine::api::inspect`, `Inspection::eval`):
//! variables, locals, module outputs, and resources as their configuration evaluates, with what
//! only apply could know shown as `(known after apply)`.
//!
//! Decisions:
//! - As Terraform's console does when standard input is not a terminal, the first error stops
//!   it with exit code 1; on a terminal an error is reported and the next line is read.
//! - Problems of the configuration itself are printed once, before the first line is read;
//!   errors stop the console there.

use super::args::ConsoleArgs;
use super::engine_options::base_options;
use super::lifecycle::block_on;
use super::output::Exit;
use super::Context;
use crate::diag::Diagnostics;
use crate::value::format_hcl;
use std::io::BufRead;

/// `_a` carries only `-var`/`-var-file`, which arrive in command-line order as `vars`.
pub(crate) fn console(ctx: &Context, _a: &ConsoleArgs, vars: Vec<crate::config::VarArg>) -> Exit {
    let mut opts = base_options(ctx, "console", vars);
    opts.refresh = false;
    let mut report = match block_on(ctx, &opts, crate::engine::api::inspect(&opts)) {
        Ok(r) => r,
        Err(d) => return ctx.fail(d, false),
    };
    // Like Terraform's, the console evaluates in an empty directory too (functions, literals).
    report
        .diags
        .0
        .retain(|d| d.summary != crate::config::NO_CONFIGURATION_FILES);
    let empty = crate::diag::SourceMap::new();
    let map = report.config.as_ref().map(|c| &c.sources).unwrap_or(&empty);
    if !report.diags.is_empty() && ctx.report(map, &report.diags, false) {
        return Exit::Error;
    }
    let Some(inspection) = report.result else {
        return Exit::Error;
    };
    let mut failed = false;
    for line in std::io::stdin().lock().lines() {
        let Ok(line) = line else { break };
        let text = line.trim();
        if text.is_empty() {
            continue;
        }
        if text == "exit" {
            break;
        }
        match inspection.eval(text) {
            Ok(v) => ctx.out(&format!("{}\n", format_hcl(&v))),
            Err((diags, sources)) => {
                ctx.report(&sources, &Diagnostics(diags.0), false);
                failed = true;
                if !ctx.stdin_tty {
                    break;
                }
            }
        }
    }
    if failed {
        Exit::Error
    } else {
        Exit::Ok
    }
}
