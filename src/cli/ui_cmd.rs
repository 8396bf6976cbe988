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
        config_dir,
        port: a.port,
        plans: a.plan.clone(),
        poll: Duration::from_millis(250),
    };
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
    ctx.out(&format!(
        "Cairn UI (read-only) for the state in {}:\n\n    {}\n\nThe address holds an access token: share it only with people who may read this state.\nPress Ctrl-C to stop.\n",
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
