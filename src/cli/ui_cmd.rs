//! `ui`: starts the read-only web server (`crate::ui`), prints its address with the access
//! token, and serves until Ctrl-C.

use super::args::UiServeArgs;
use super::output::Exit;
use super::Context;
use crate::diag::Diagnostic;
use std::time::Duration;

pub(crate) fn ui(ctx: &Context, a: &UiServeArgs) -> Exit {
    let config_dir = std::env::current_dir().unwrap_or_else(|_| ".".into());
    let opts = crate::ui::Options {
        state_dir: ctx.state_dir.clone(),
        config_dir: config_dir.clone(),
        port: a.port,
        plans: a.plan.clone(),
        poll: Duration::from_millis(250),
        // In a stack's directory (its `*.tfcomponent.hcl` files): the stack view.
        stack_dir: is_stack_dir(&config_dir).then(|| config_dir.clone()),
    };
    let opts_is_stack = opts.stack_dir.is_some();
    let server = match crate::ui::Server::bind(opts) {
        Ok(s) => s,
        Err(d) => return ctx.fail(d, false),
    };
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            return ctx.fail(
                Diagnostic::error("Cannot start the UI server", e.to_string()),
                false,
            )
        }
    };
    let what = if opts_is_stack {
        "the stack and its states"
    } else {
        "the state"
    };
    ctx.out(&format!(
        "Cairn UI (read-only) for {what} in {}:\n\n    {}\n\nThe address holds an access token: share it only with people who may read this state.\nPress Ctrl-C to stop.\n",
        ctx.state_dir.display(),
        server.url
    ));
    let stop = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    match rt.block_on(server.serve(stop)) {
        Ok(()) => Exit::Ok,
        Err(e) => ctx.fail(Diagnostic::error("The UI server stopped", e), false),
    }
}

/// Whether `dir` holds a stack's component configuration (`*.tfcomponent.hcl`).
fn is_stack_dir(dir: &std::path::Path) -> bool {
    std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten().any(|e| {
                e.file_name()
                    .to_str()
                    .is_some_and(|n| n.ends_with(".tfcomponent.hcl"))
            })
        })
        .unwrap_or(false)
}
