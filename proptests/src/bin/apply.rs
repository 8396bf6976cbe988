//! `apply WORKDIR [PARALLELISM]`: runs one `cairn apply -auto-approve` on the real engine, with
//! the `SIM_*` variables of the environment — a process the crash property kills at a random
//! moment (the `cairn` CLI is not needed for it, and this keeps the test independent of it).

use cairn::engine::api::{self, Options};
use cairn::engine::observer::Silent;
use cairn::plan::PlanMode;
use std::sync::Arc;

fn main() {
    let mut args = std::env::args().skip(1);
    let Some(dir) = args.next() else {
        eprintln!("usage: apply WORKDIR [PARALLELISM]");
        std::process::exit(2);
    };
    let mut opts = Options::new(&dir);
    opts.env = std::env::vars()
        .filter(|(k, _)| k.starts_with("SIM_"))
        .collect();
    opts.parallelism = args.next().and_then(|p| p.parse().ok()).unwrap_or(10);
    opts.command = "apply".into();
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("cannot start the runtime: {e}");
            std::process::exit(1);
        }
    };
    let r = rt.block_on(api::apply(&opts, PlanMode::Normal, None, Arc::new(Silent)));
    for d in r.diags.iter() {
        eprintln!("{:?}: {}: {}", d.severity, d.summary, d.detail);
    }
    std::process::exit(if r.ok() { 0 } else { 1 });
}
