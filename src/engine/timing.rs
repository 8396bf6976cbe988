//! How long each phase of a command took, in the debug log (`CAIRN_LOG=debug`).

/// Runs one phase of a command and logs how long it took (`CAIRN_LOG=debug`), so a slow run
/// can be broken down without a profiler.
pub(crate) fn timed<T>(phase: &str, f: impl FnOnce() -> T) -> T {
    let start = std::time::Instant::now();
    let r = f();
    log_phase(phase, start);
    r
}

/// [`timed`] for a phase that awaits.
pub(super) async fn timed_async<T>(phase: &str, f: impl std::future::Future<Output = T>) -> T {
    let start = std::time::Instant::now();
    let r = f.await;
    log_phase(phase, start);
    r
}

fn log_phase(phase: &str, start: std::time::Instant) {
    tracing::debug!(elapsed_ms = start.elapsed().as_secs_f64() * 1e3, "{phase}");
}
