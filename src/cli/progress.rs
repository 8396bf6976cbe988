//! Live progress: the two `Observer`s the CLI hands the engine. `HumanObserver` prints
//! Terraform's lines (`sim_thing.a: Creating...`, `Creation complete after 2s [id=a-1]`), a
//! `Still creating... [10s elapsed]` line every ten seconds for long calls and, on a terminal, a
//! status line redrawn in place; `JsonObserver` streams the `-json` UI messages.
//!
//! Decisions:
//! - The "still running" ticker is a thread owned by the observer (`Ticker`), woken on an
//!   interval and stopped and joined on drop: no detached task, and it works whether or not the
//!   engine runs on tokio. If the engine also sends `ApplyProgress`, both paths go through one
//!   per-instance counter of reported intervals, so a line is never printed twice.
//! - The status line (`done / running / left, elapsed`) is only drawn on a terminal. It is
//!   cleared (`\r\x1b[K`) before any other line is written and redrawn after it, all under one
//!   lock, so lines never interleave with it; dropping the observer clears it for good.
//! - Diagnostics that arrive as events are not printed as they come: they are kept, and the
//!   command prints them with the ones the engine returns (deduplicated) once it has the
//!   `SourceMap` their spans point into.
//! - `RefreshStart` carries no id, so the human `Refreshing state... [id=…]` line is printed when
//!   the read finishes and the id is known (it is one line either way).

use super::output::{write_to, JsonUi, Sink};
use crate::addr::{InstanceKey, ResourceInstanceAddr};
use crate::diag::Diagnostic;
use crate::engine::observer::{EphemeralStep, Observer, Progress};
use crate::plan::Action;
use cairn_state::quote_go;
use serde_json::{json, Map, Value as J};
use std::collections::BTreeMap;
use std::sync::mpsc;
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How often a "still running" line is printed for a long call.
pub(crate) const STILL_RUNNING_EVERY: Duration = Duration::from_secs(10);

/// Terraform's elapsed-time format: whole seconds, `2s`, `1m5s`, `1h0m3s`.
pub(crate) fn fmt_elapsed(d: Duration) -> String {
    let s = d.as_secs();
    if s < 60 {
        format!("{s}s")
    } else if s < 3600 {
        format!("{}m{}s", s / 60, s % 60)
    } else {
        format!("{}h{}m{}s", s / 3600, s % 3600 / 60, s % 60)
    }
}

/// The words of each action in progress lines: (`Creating`, `Creation complete`,
/// `Still creating`, `Creation errored`).
fn words(action: Action) -> (&'static str, &'static str, &'static str, &'static str) {
    match action {
        Action::Create => (
            "Creating",
            "Creation complete",
            "Still creating",
            "Creation errored",
        ),
        Action::Update => (
            "Modifying",
            "Modifications complete",
            "Still modifying",
            "Modifications errored",
        ),
        Action::Delete => (
            "Destroying",
            "Destruction complete",
            "Still destroying",
            "Destruction errored",
        ),
        Action::DeleteThenCreate | Action::CreateThenDelete => (
            "Replacing",
            "Replacement complete",
            "Still replacing",
            "Replacement errored",
        ),
        Action::Read => ("Reading", "Read complete", "Still reading", "Read errored"),
        Action::Forget => (
            "Forgetting",
            "Forgotten",
            "Still forgetting",
            "Forgetting errored",
        ),
        Action::NoOp => (
            "Checking",
            "Check complete",
            "Still checking",
            "Check errored",
        ),
    }
}

/// The action name in Terraform's JSON hooks.
fn hook_action(action: Action) -> &'static str {
    match action {
        Action::NoOp => "noop",
        Action::Create => "create",
        Action::Read => "read",
        Action::Update => "update",
        Action::DeleteThenCreate | Action::CreateThenDelete => "replace",
        Action::Delete => "delete",
        Action::Forget => "forget",
    }
}

/// A thread that calls `tick` every `interval` until it is dropped. Dropping wakes it at once
/// (the channel disconnects) and joins it.
pub(crate) struct Ticker {
    stop: Option<mpsc::Sender<()>>,
    handle: Option<JoinHandle<()>>,
}

impl Ticker {
    pub(crate) fn start(interval: Duration, tick: impl Fn() + Send + 'static) -> Ticker {
        let (stop, rx) = mpsc::channel::<()>();
        let handle = std::thread::Builder::new()
            .name("cairn-progress".into())
            .spawn(move || {
                while let Err(mpsc::RecvTimeoutError::Timeout) = rx.recv_timeout(interval) {
                    tick();
                }
            })
            .ok();
        Ticker {
            stop: Some(stop),
            handle,
        }
    }
}

impl Drop for Ticker {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

/// A call in flight, for the "still running" lines.
struct Running {
    action: Action,
    since: Instant,
    /// How many `STILL_RUNNING_EVERY` intervals have been reported.
    reported: u64,
    /// The address as the lines show it (with its deposed key) and the object's id.
    shown: String,
    id: Option<String>,
}

/// A call that crossed a new "still running" interval.
struct Due {
    addr: ResourceInstanceAddr,
    shown: String,
    id: Option<String>,
    action: Action,
    elapsed: Duration,
}

impl Due {
    /// `sim_thing.a: Still destroying... [id=a-1, 10s elapsed]`, as Terraform prints it.
    fn line(&self) -> String {
        format!("{}: {}", self.shown, self.what())
    }

    /// The line after the address.
    fn what(&self) -> String {
        let id = match &self.id {
            Some(id) => format!("id={id}, "),
            None => String::new(),
        };
        format!(
            "{}... [{id}{} elapsed]",
            words(self.action).2,
            fmt_elapsed(self.elapsed)
        )
    }
}

/// An address as the progress lines show it: a deposed object's with its key, as Terraform.
fn shown(addr: &ResourceInstanceAddr, deposed: &Option<String>) -> String {
    match deposed {
        Some(key) => format!("{addr} (deposed object {key})"),
        None => addr.to_string(),
    }
}

/// What both observers track: calls in flight and the diagnostics seen.
#[derive(Default)]
struct Tracker {
    running: BTreeMap<ResourceInstanceAddr, Running>,
    diagnostics: Vec<Diagnostic>,
    counts: Option<(usize, usize, usize)>,
}

impl Tracker {
    fn start(&mut self, addr: &ResourceInstanceAddr, action: Action) {
        self.start_shown(addr, action, addr.to_string(), None);
    }

    fn start_shown(
        &mut self,
        addr: &ResourceInstanceAddr,
        action: Action,
        shown: String,
        id: Option<String>,
    ) {
        self.running.insert(
            addr.clone(),
            Running {
                action,
                since: Instant::now(),
                reported: 0,
                shown,
                id,
            },
        );
    }

    /// Records that `addr` has been running for `elapsed`; returns the elapsed time to report
    /// if a new interval was crossed.
    fn progress(
        &mut self,
        addr: &ResourceInstanceAddr,
        action: Action,
        elapsed: Duration,
        every: Duration,
    ) -> Option<Due> {
        let r = self.running.entry(addr.clone()).or_insert_with(|| Running {
            action,
            since: Instant::now()
                .checked_sub(elapsed)
                .unwrap_or_else(Instant::now),
            reported: 0,
            shown: addr.to_string(),
            id: None,
        });
        let n = (elapsed.as_nanos() / every.as_nanos().max(1)) as u64;
        if n > r.reported {
            r.reported = n;
            Some(Due {
                addr: addr.clone(),
                shown: r.shown.clone(),
                id: r.id.clone(),
                action,
                elapsed: every * n as u32,
            })
        } else {
            None
        }
    }

    /// Every call that crossed a new interval since the last tick.
    fn due(&mut self, every: Duration) -> Vec<Due> {
        let now = Instant::now();
        let mut due = Vec::new();
        for (addr, r) in &mut self.running {
            let n = (now.duration_since(r.since).as_nanos() / every.as_nanos().max(1)) as u64;
            if n > r.reported {
                r.reported = n;
                due.push(Due {
                    addr: addr.clone(),
                    shown: r.shown.clone(),
                    id: r.id.clone(),
                    action: r.action,
                    elapsed: every * n as u32,
                });
            }
        }
        due
    }
}

/// Settings of the human observer.
#[derive(Clone, Debug)]
pub(crate) struct HumanOptions {
    pub color: bool,
    /// Draw the status line (only on a terminal).
    pub status_line: bool,
    /// How often the ticker wakes.
    pub tick: Duration,
    /// How often a "still running" line is printed.
    pub still_every: Duration,
}

impl HumanOptions {
    pub(crate) fn new(color: bool, status_line: bool) -> Self {
        HumanOptions {
            color,
            status_line,
            tick: Duration::from_secs(1),
            still_every: STILL_RUNNING_EVERY,
        }
    }
}

struct HumanShared {
    out: Sink,
    opts: HumanOptions,
    started: Instant,
    tracker: Mutex<Tracker>,
    /// Whether the status line is on screen now.
    status_shown: Mutex<bool>,
    /// Set while the CLI prints a plan and asks for approval: no status line is drawn.
    paused: std::sync::atomic::AtomicBool,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl HumanShared {
    /// Writes lines, clearing the status line first and redrawing it after.
    fn lines(&self, lines: &[String]) {
        let mut shown = lock(&self.status_shown);
        let mut text = String::new();
        if *shown {
            text.push_str("\r\x1b[K");
            *shown = false;
        }
        for l in lines {
            text.push_str(l);
            text.push('\n');
        }
        if let Some(status) = self.status_text() {
            text.push_str(&status);
            *shown = true;
        }
        write_to(&self.out, &text);
    }

    fn status_text(&self) -> Option<String> {
        if !self.opts.status_line || self.paused.load(std::sync::atomic::Ordering::SeqCst) {
            return None;
        }
        let (done, running, left) = lock(&self.tracker).counts?;
        let elapsed = fmt_elapsed(self.started.elapsed());
        let (dim, reset) = if self.opts.color {
            ("\x1b[2m", "\x1b[0m")
        } else {
            ("", "")
        };
        Some(format!(
            "{dim}[{done} done, {running} running, {left} left, {elapsed} elapsed]{reset}"
        ))
    }

    fn redraw(&self) {
        self.lines(&[]);
    }

    fn bold(&self, s: &str) -> String {
        if self.opts.color {
            format!("\x1b[1m{s}\x1b[0m")
        } else {
            s.to_string()
        }
    }

    fn tick(&self) {
        let due = lock(&self.tracker).due(self.opts.still_every);
        let lines: Vec<String> = due.iter().map(|d| self.still_line(d)).collect();
        if !lines.is_empty() || self.opts.status_line {
            self.lines(&lines);
        }
    }

    fn still_line(&self, due: &Due) -> String {
        format!("{}: {}", self.bold(&due.shown), due.what())
    }

    fn event(&self, event: Progress) {
        let b = |a: &ResourceInstanceAddr| self.bold(&a.to_string());
        let id = |id: &Option<String>| match id {
            Some(id) => format!(" [id={id}]"),
            None => String::new(),
        };
        let line = match event {
            Progress::RefreshStart { addr } => {
                lock(&self.tracker).start(&addr, Action::Read);
                return;
            }
            Progress::RefreshDone { addr, id: i, .. } => {
                lock(&self.tracker).running.remove(&addr);
                format!("{}: Refreshing state...{}", b(&addr), id(&i))
            }
            Progress::ImportPreparing { addr, id } => {
                format!("{}: Preparing import... [id={id}]", b(&addr))
            }
            Progress::Importing { addr, id } => format!("{}: Importing... [id={id}]", b(&addr)),
            Progress::ImportFromId { addr, id } => {
                format!("{}: Importing from ID {}...", b(&addr), quote_go(&id))
            }
            Progress::ImportPrepared { addr, types } => {
                let mut line = format!("{}: Import prepared!", b(&addr));
                for t in types {
                    line.push_str(&format!("\n  Prepared {t} for import"));
                }
                line
            }
            Progress::ImportComplete { addr, id } => {
                format!("{}: Import complete [id={id}]", b(&addr))
            }
            Progress::Ephemeral { addr, step } => match step {
                EphemeralStep::Opening => format!("{}: Opening...", b(&addr)),
                EphemeralStep::Opened(t) => {
                    format!("{}: Opening complete after {}", b(&addr), fmt_elapsed(t))
                }
                EphemeralStep::Renewing => format!("{}: Renewing...", b(&addr)),
                EphemeralStep::Closing => format!("{}: Closing...", b(&addr)),
                EphemeralStep::Closed(t) => {
                    format!("{}: Closing complete after {}", b(&addr), fmt_elapsed(t))
                }
            },
            Progress::ReadStart { addr } => {
                lock(&self.tracker).start(&addr, Action::Read);
                format!("{}: Reading...", b(&addr))
            }
            Progress::ReadDone { addr, elapsed } => {
                lock(&self.tracker).running.remove(&addr);
                format!("{}: Read complete after {}", b(&addr), fmt_elapsed(elapsed))
            }
            Progress::ApplyStart {
                addr,
                action,
                id: i,
                deposed,
            } => {
                if action == Action::NoOp {
                    return;
                }
                let s = shown(&addr, &deposed);
                let line = format!("{}: {}...{}", self.bold(&s), words(action).0, id(&i));
                lock(&self.tracker).start_shown(&addr, action, s, i);
                line
            }
            Progress::ApplyProgress {
                addr,
                action,
                elapsed,
            } => {
                let every = self.opts.still_every;
                match lock(&self.tracker).progress(&addr, action, elapsed, every) {
                    Some(due) => self.still_line(&due),
                    None => return,
                }
            }
            Progress::ApplyDone {
                addr,
                action,
                id: i,
                elapsed,
                deposed,
            } => {
                lock(&self.tracker).running.remove(&addr);
                if action == Action::NoOp {
                    return;
                }
                format!(
                    "{}: {} after {}{}",
                    self.bold(&shown(&addr, &deposed)),
                    words(action).1,
                    fmt_elapsed(elapsed),
                    id(&i)
                )
            }
            Progress::ApplyErrored {
                addr,
                action,
                elapsed,
                deposed,
                ..
            } => {
                lock(&self.tracker).running.remove(&addr);
                format!(
                    "{}: {} after {}",
                    self.bold(&shown(&addr, &deposed)),
                    words(action).3,
                    fmt_elapsed(elapsed)
                )
            }
            Progress::ProvisionStart { addr, kind } => {
                format!("{}: Provisioning with '{kind}'...", b(&addr))
            }
            Progress::ProvisionOutput { addr, kind, line } => {
                format!("{} ({kind}): {line}", b(&addr))
            }
            Progress::ProvisionDone { .. } => return,
            Progress::ProviderConfigured { addr } => {
                tracing::debug!(provider = %addr, "provider configured");
                return;
            }
            Progress::Counts {
                done,
                running,
                left,
            } => {
                lock(&self.tracker).counts = Some((done, running, left));
                if self.opts.status_line {
                    self.redraw();
                }
                return;
            }
            Progress::Diagnostic(d) => {
                lock(&self.tracker).diagnostics.push(d);
                return;
            }
        };
        self.lines(&[line]);
    }
}

/// Human progress lines; see the module docs.
pub(crate) struct HumanObserver {
    shared: Arc<HumanShared>,
    /// Behind a mutex so `finish` works through a shared reference (the engine holds the
    /// observer in an `Arc`).
    ticker: Mutex<Option<Ticker>>,
}

impl HumanObserver {
    pub(crate) fn new(out: Sink, opts: HumanOptions) -> Self {
        let shared = Arc::new(HumanShared {
            out,
            started: Instant::now(),
            tracker: Mutex::new(Tracker::default()),
            status_shown: Mutex::new(false),
            paused: std::sync::atomic::AtomicBool::new(false),
            opts,
        });
        let s = Arc::clone(&shared);
        let ticker = Mutex::new(Some(Ticker::start(shared.opts.tick, move || s.tick())));
        HumanObserver { shared, ticker }
    }

    /// The diagnostics that arrived as events, in order.
    pub(crate) fn take_diagnostics(&self) -> Vec<Diagnostic> {
        std::mem::take(&mut lock(&self.shared.tracker).diagnostics)
    }

    /// Clears the status line and keeps it off (while the CLI prints the plan and asks for
    /// approval) until `resume_status`.
    pub(crate) fn clear_status(&self) {
        self.shared
            .paused
            .store(true, std::sync::atomic::Ordering::SeqCst);
        let mut shown = lock(&self.shared.status_shown);
        if *shown {
            write_to(&self.shared.out, "\r\x1b[K");
            *shown = false;
        }
    }

    /// Lets the status line be drawn again.
    pub(crate) fn resume_status(&self) {
        self.shared
            .paused
            .store(false, std::sync::atomic::Ordering::SeqCst);
    }

    /// Stops the ticker and clears the status line; called by `drop` too.
    pub(crate) fn finish(&self) {
        let ticker = lock(&self.ticker).take();
        drop(ticker);
        let mut shown = lock(&self.shared.status_shown);
        if *shown {
            write_to(&self.shared.out, "\r\x1b[K");
            *shown = false;
        }
    }
}

impl Drop for HumanObserver {
    fn drop(&mut self) {
        self.finish();
    }
}

impl Observer for HumanObserver {
    fn event(&self, event: Progress) {
        self.shared.event(event);
    }
}

/// The `resource` object of Terraform's JSON hooks.
pub(crate) fn resource_json(addr: &ResourceInstanceAddr) -> J {
    let r = &addr.resource;
    let key = match &addr.key {
        None => J::Null,
        Some(InstanceKey::Int(i)) => J::from(*i),
        Some(InstanceKey::Str(s)) => J::from(s.as_str()),
    };
    let resource = {
        let mut s = if r.mode == crate::addr::Mode::Data {
            format!("data.{}.{}", r.type_, r.name)
        } else {
            format!("{}.{}", r.type_, r.name)
        };
        if let Some(k) = &addr.key {
            s.push_str(&k.to_string());
        }
        s
    };
    json!({
        "addr": addr.to_string(),
        "module": r.module.to_string(),
        "resource": resource,
        "implied_provider": r.package(),
        "resource_type": r.type_,
        "resource_name": r.name,
        "resource_key": key,
    })
}

struct JsonShared {
    ui: JsonUi,
    still_every: Duration,
    tracker: Mutex<Tracker>,
}

impl JsonShared {
    fn hook(&self, level: &str, message: String, type_: &str, hook: J) {
        let mut f = Map::new();
        f.insert("hook".into(), hook);
        self.ui.emit(level, &message, type_, f);
    }

    fn progress(&self, due: &Due) {
        self.hook(
            "info",
            due.line(),
            "apply_progress",
            json!({"resource": resource_json(&due.addr), "action": hook_action(due.action),
                   "elapsed_seconds": due.elapsed.as_secs()}),
        );
    }

    fn tick(&self) {
        let due = lock(&self.tracker).due(self.still_every);
        for d in &due {
            self.progress(d);
        }
    }

    fn event(&self, event: Progress) {
        match event {
            Progress::RefreshStart { addr } => {
                lock(&self.tracker).start(&addr, Action::Read);
                self.hook(
                    "info",
                    format!("{addr}: Refreshing state..."),
                    "refresh_start",
                    json!({"resource": resource_json(&addr)}),
                );
            }
            Progress::RefreshDone { addr, id, .. } => {
                lock(&self.tracker).running.remove(&addr);
                let mut hook = json!({"resource": resource_json(&addr)});
                let mut message = format!("{addr}: Refresh complete");
                if let Some(id) = id {
                    message.push_str(&format!(" [id={id}]"));
                    hook["id_key"] = J::from("id");
                    hook["id_value"] = J::from(id);
                }
                self.hook("info", message, "refresh_complete", hook);
            }
            // Terraform's JSON UI says nothing here; the read follows as refresh_start.
            Progress::ImportPreparing { .. } => {}
            Progress::ImportFromId { addr, id } => self.hook(
                "info",
                format!("{addr}: Importing from ID {}...", quote_go(&id)),
                "import_start",
                json!({"resource": resource_json(&addr), "id": id}),
            ),
            Progress::ImportPrepared { addr, types } => self.hook(
                "info",
                format!("{addr}: Import prepared!"),
                "import_prepared",
                json!({"resource": resource_json(&addr), "types": types}),
            ),
            Progress::Importing { addr, id } => self.hook(
                "info",
                format!("{addr}: Importing... [id={id}]"),
                "apply_start",
                json!({"resource": resource_json(&addr), "action": "import", "id": id}),
            ),
            Progress::ImportComplete { addr, id } => self.hook(
                "info",
                format!("{addr}: Import complete [id={id}]"),
                "apply_complete",
                json!({"resource": resource_json(&addr), "action": "import", "id": id}),
            ),
            Progress::Ephemeral { addr, step } => {
                let (message, kind, action, elapsed) = match step {
                    EphemeralStep::Opening => ("Opening...".to_string(), "start", "open", None),
                    EphemeralStep::Opened(t) => (
                        format!("Opening complete after {}", fmt_elapsed(t)),
                        "complete",
                        "open",
                        Some(t),
                    ),
                    EphemeralStep::Renewing => ("Renewing...".to_string(), "start", "renew", None),
                    EphemeralStep::Closing => ("Closing...".to_string(), "start", "close", None),
                    EphemeralStep::Closed(t) => (
                        format!("Closing complete after {}", fmt_elapsed(t)),
                        "complete",
                        "close",
                        Some(t),
                    ),
                };
                let mut hook = json!({"resource": resource_json(&addr), "action": action});
                if let Some(t) = elapsed {
                    hook["elapsed_seconds"] = json!(t.as_secs());
                }
                self.hook(
                    "info",
                    format!("{addr}: {message}"),
                    &format!("ephemeral_op_{kind}"),
                    hook,
                );
            }
            Progress::ReadStart { addr } => {
                lock(&self.tracker).start(&addr, Action::Read);
                self.hook(
                    "info",
                    format!("{addr}: Reading..."),
                    "apply_start",
                    json!({"resource": resource_json(&addr), "action": "read"}),
                );
            }
            Progress::ReadDone { addr, elapsed } => {
                lock(&self.tracker).running.remove(&addr);
                self.hook(
                    "info",
                    format!("{addr}: Read complete after {}", fmt_elapsed(elapsed)),
                    "apply_complete",
                    json!({"resource": resource_json(&addr), "action": "read",
                           "elapsed_seconds": elapsed.as_secs()}),
                );
            }
            Progress::ApplyStart {
                addr,
                action,
                id,
                deposed: _,
            } => {
                if action == Action::NoOp {
                    return;
                }
                // Terraform's JSON messages name no deposed key and their "still" lines no id.
                let mut message = format!("{addr}: {}...", words(action).0);
                let mut hook =
                    json!({"resource": resource_json(&addr), "action": hook_action(action)});
                if let Some(id) = &id {
                    message.push_str(&format!(" [id={id}]"));
                    hook["id_key"] = J::from("id");
                    hook["id_value"] = J::from(id.as_str());
                }
                lock(&self.tracker).start(&addr, action);
                self.hook("info", message, "apply_start", hook);
            }
            Progress::ApplyProgress {
                addr,
                action,
                elapsed,
            } => {
                let due = lock(&self.tracker).progress(&addr, action, elapsed, self.still_every);
                if let Some(d) = due {
                    self.progress(&d);
                }
            }
            Progress::ApplyDone {
                addr,
                action,
                id,
                elapsed,
                deposed: _,
            } => {
                lock(&self.tracker).running.remove(&addr);
                if action == Action::NoOp {
                    return;
                }
                let mut hook = json!({"resource": resource_json(&addr),
                                      "action": hook_action(action)});
                let mut message =
                    format!("{addr}: {} after {}", words(action).1, fmt_elapsed(elapsed));
                if let Some(id) = id {
                    message.push_str(&format!(" [id={id}]"));
                    hook["id_key"] = J::from("id");
                    hook["id_value"] = J::from(id);
                }
                hook["elapsed_seconds"] = J::from(elapsed.as_secs());
                self.hook("info", message, "apply_complete", hook);
            }
            Progress::ApplyErrored {
                addr,
                action,
                elapsed,
                deposed: _,
                ..
            } => {
                lock(&self.tracker).running.remove(&addr);
                self.hook(
                    "error",
                    format!("{addr}: {} after {}", words(action).3, fmt_elapsed(elapsed)),
                    "apply_errored",
                    json!({"resource": resource_json(&addr), "action": hook_action(action),
                           "elapsed_seconds": elapsed.as_secs()}),
                );
            }
            Progress::ProvisionStart { addr, kind } => self.hook(
                "info",
                format!("{addr}: Provisioning with '{kind}'..."),
                "provision_start",
                json!({"resource": resource_json(&addr), "provisioner": kind}),
            ),
            Progress::ProvisionOutput { addr, kind, line } => self.hook(
                "info",
                format!("{addr}: ({kind}): {line}"),
                "provision_progress",
                json!({"resource": resource_json(&addr), "provisioner": kind, "output": line}),
            ),
            Progress::ProvisionDone { addr, kind, failed } => {
                let (level, word, type_) = match failed {
                    false => ("info", "complete", "provision_complete"),
                    true => ("error", "errored", "provision_errored"),
                };
                self.hook(
                    level,
                    format!("{addr}: ({kind}) Provisioning {word}"),
                    type_,
                    json!({"resource": resource_json(&addr), "provisioner": kind}),
                )
            }
            Progress::ProviderConfigured { addr } => {
                tracing::debug!(provider = %addr, "provider configured");
            }
            Progress::Counts {
                done,
                running,
                left,
            } => {
                lock(&self.tracker).counts = Some((done, running, left));
            }
            Progress::Diagnostic(d) => lock(&self.tracker).diagnostics.push(d),
        }
    }
}

/// The `-json` UI stream; see the module docs.
pub(crate) struct JsonObserver {
    shared: Arc<JsonShared>,
    ticker: Mutex<Option<Ticker>>,
}

impl JsonObserver {
    pub(crate) fn new(ui: JsonUi) -> Self {
        Self::with_timing(ui, Duration::from_secs(1), STILL_RUNNING_EVERY)
    }

    /// With a custom ticker interval and "still running" period (tests).
    pub(crate) fn with_timing(ui: JsonUi, tick: Duration, still_every: Duration) -> Self {
        let shared = Arc::new(JsonShared {
            ui,
            still_every,
            tracker: Mutex::new(Tracker::default()),
        });
        let s = Arc::clone(&shared);
        let ticker = Mutex::new(Some(Ticker::start(tick, move || s.tick())));
        JsonObserver { shared, ticker }
    }

    pub(crate) fn take_diagnostics(&self) -> Vec<Diagnostic> {
        std::mem::take(&mut lock(&self.shared.tracker).diagnostics)
    }

    pub(crate) fn finish(&self) {
        let ticker = lock(&self.ticker).take();
        drop(ticker);
    }
}

impl Drop for JsonObserver {
    fn drop(&mut self) {
        self.finish();
    }
}

impl Observer for JsonObserver {
    fn event(&self, event: Progress) {
        self.shared.event(event);
    }
}

/// The observer a command uses: human or `-json`.
pub(crate) enum AnyObserver {
    Human(HumanObserver),
    Json(JsonObserver),
}

impl AnyObserver {
    pub(crate) fn take_diagnostics(&self) -> Vec<Diagnostic> {
        match self {
            AnyObserver::Human(o) => o.take_diagnostics(),
            AnyObserver::Json(o) => o.take_diagnostics(),
        }
    }
    /// See `HumanObserver::clear_status`; the JSON stream has no status line.
    pub(crate) fn clear_status(&self) {
        if let AnyObserver::Human(o) = self {
            o.clear_status();
        }
    }
    pub(crate) fn resume_status(&self) {
        if let AnyObserver::Human(o) = self {
            o.resume_status();
        }
    }
    pub(crate) fn finish(&self) {
        match self {
            AnyObserver::Human(o) => o.finish(),
            AnyObserver::Json(o) => o.finish(),
        }
    }
}

impl Observer for AnyObserver {
    fn event(&self, event: Progress) {
        match self {
            AnyObserver::Human(o) => o.event(event),
            AnyObserver::Json(o) => o.event(event),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::output::testing::Capture;
    use crate::cli::output::{sink, Clock};
    use std::path::PathBuf;
    use std::time::UNIX_EPOCH;

    /// Compares with `fixtures/golden/cli/NAME`; `UPDATE_EXPECT=1` rewrites it.
    fn check_golden(name: &str, actual: &str) {
        let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("fixtures/golden/cli")
            .join(name);
        expect_test::expect_file![path].assert_eq(actual);
    }

    fn addr(s: &str) -> ResourceInstanceAddr {
        s.parse().unwrap()
    }

    /// A lifecycle touching every event kind.
    fn events() -> Vec<Progress> {
        let secs = Duration::from_secs;
        vec![
            Progress::RefreshStart {
                addr: addr("sim_thing.old"),
            },
            Progress::RefreshDone {
                addr: addr("sim_thing.old"),
                id: Some("old-1".into()),
                elapsed: secs(0),
            },
            Progress::ReadStart {
                addr: addr("data.sim_lookup.x"),
            },
            Progress::ReadDone {
                addr: addr("data.sim_lookup.x"),
                elapsed: secs(1),
            },
            Progress::ProviderConfigured {
                addr: "provider[\"sim\"]".parse().unwrap(),
            },
            Progress::Counts {
                done: 0,
                running: 1,
                left: 3,
            },
            Progress::ApplyStart {
                addr: addr("sim_thing.a"),
                action: Action::Create,
                id: None,
                deposed: None,
            },
            Progress::ApplyProgress {
                addr: addr("sim_thing.a"),
                action: Action::Create,
                elapsed: secs(10),
            },
            Progress::ApplyProgress {
                addr: addr("sim_thing.a"),
                action: Action::Create,
                elapsed: secs(12),
            },
            Progress::ApplyDone {
                addr: addr("sim_thing.a"),
                action: Action::Create,
                id: Some("a-1".into()),
                elapsed: secs(12),
                deposed: None,
            },
            Progress::ApplyStart {
                addr: addr("module.m[\"k\"].sim_thing.b[0]"),
                action: Action::Update,
                id: Some("b-1".into()),
                deposed: None,
            },
            Progress::ApplyDone {
                addr: addr("module.m[\"k\"].sim_thing.b[0]"),
                action: Action::Update,
                id: Some("b-1".into()),
                elapsed: secs(75),
                deposed: None,
            },
            Progress::ApplyStart {
                addr: addr("sim_thing.old"),
                action: Action::Delete,
                id: Some("old-1".into()),
                deposed: Some("0a1b2c3d".into()),
            },
            Progress::ApplyDone {
                addr: addr("sim_thing.old"),
                action: Action::Delete,
                id: None,
                elapsed: secs(0),
                deposed: Some("0a1b2c3d".into()),
            },
            Progress::ApplyStart {
                addr: addr("sim_thing.c"),
                action: Action::DeleteThenCreate,
                id: None,
                deposed: None,
            },
            Progress::ApplyErrored {
                addr: addr("sim_thing.c"),
                action: Action::DeleteThenCreate,
                elapsed: secs(2),
                message: "boom".into(),
                deposed: None,
            },
            Progress::ApplyStart {
                addr: addr("data.sim_lookup.later"),
                action: Action::Read,
                id: None,
                deposed: None,
            },
            Progress::ApplyDone {
                addr: addr("data.sim_lookup.later"),
                action: Action::Read,
                id: None,
                elapsed: secs(0),
                deposed: None,
            },
            Progress::Diagnostic(Diagnostic::warning("Something to know", "Detail.")),
        ]
    }

    fn fixed_clock() -> Clock {
        Arc::new(|| UNIX_EPOCH + Duration::from_micros(1_796_215_714_154_216))
    }

    #[test]
    fn json_stream_shape() {
        let cap = Capture::default();
        let ui = JsonUi::new(sink(cap.clone()), fixed_clock());
        ui.version();
        // A ticker that never fires during the test: only engine events drive the stream.
        let obs = JsonObserver::with_timing(ui, Duration::from_secs(3600), STILL_RUNNING_EVERY);
        for e in events() {
            obs.event(e);
        }
        let diags = obs.take_diagnostics();
        obs.finish();
        assert_eq!(diags.len(), 1);
        let text = cap.text();
        for line in text.lines() {
            let j: J = serde_json::from_str(line).unwrap();
            for k in ["@level", "@message", "@module", "@timestamp", "type"] {
                assert!(j.get(k).is_some(), "{k} missing in {line}");
            }
        }
        check_golden("json_events.jsonl", &text);
    }

    #[test]
    fn human_lines() {
        let cap = Capture::default();
        let opts = HumanOptions {
            tick: Duration::from_secs(3600),
            ..HumanOptions::new(false, false)
        };
        let obs = HumanObserver::new(sink(cap.clone()), opts);
        for e in events() {
            obs.event(e);
        }
        assert_eq!(obs.take_diagnostics().len(), 1);
        drop(obs);
        check_golden("human_events.txt", &cap.text());
    }

    #[test]
    fn status_line_is_cleared_before_lines_and_at_the_end() {
        let cap = Capture::default();
        let opts = HumanOptions {
            tick: Duration::from_secs(3600),
            ..HumanOptions::new(false, true)
        };
        let obs = HumanObserver::new(sink(cap.clone()), opts);
        obs.event(Progress::Counts {
            done: 1,
            running: 2,
            left: 3,
        });
        obs.event(Progress::ApplyStart {
            addr: addr("sim_thing.a"),
            action: Action::Create,
            id: None,
            deposed: None,
        });
        drop(obs);
        assert_eq!(
            cap.text(),
            "[1 done, 2 running, 3 left, 0s elapsed]\r\x1b[Ksim_thing.a: Creating...\n\
             [1 done, 2 running, 3 left, 0s elapsed]\r\x1b[K"
        );
    }

    #[test]
    fn a_paused_status_line_stays_off() {
        let cap = Capture::default();
        let opts = HumanOptions {
            tick: Duration::from_millis(5),
            ..HumanOptions::new(false, true)
        };
        let obs = HumanObserver::new(sink(cap.clone()), opts);
        obs.event(Progress::Counts {
            done: 1,
            running: 0,
            left: 0,
        });
        obs.clear_status();
        let before = cap.text();
        assert!(before.ends_with("\r\x1b[K"), "{before:?}");
        std::thread::sleep(Duration::from_millis(40));
        assert_eq!(cap.text(), before, "the ticker draws nothing while paused");
        obs.resume_status();
        std::thread::sleep(Duration::from_millis(40));
        assert!(cap.text().len() > before.len());
    }

    #[test]
    fn ticker_reports_long_calls_and_stops_on_drop() {
        let cap = Capture::default();
        let opts = HumanOptions {
            tick: Duration::from_millis(5),
            still_every: Duration::from_millis(30),
            ..HumanOptions::new(false, false)
        };
        let obs = HumanObserver::new(sink(cap.clone()), opts);
        obs.event(Progress::ApplyStart {
            addr: addr("sim_thing.slow"),
            action: Action::Delete,
            id: None,
            deposed: None,
        });
        std::thread::sleep(Duration::from_millis(100));
        obs.event(Progress::ApplyDone {
            addr: addr("sim_thing.slow"),
            action: Action::Delete,
            id: None,
            elapsed: Duration::from_millis(100),
            deposed: None,
        });
        drop(obs);
        let text = cap.text();
        let still = text.matches("sim_thing.slow: Still destroying...").count();
        assert!(still >= 2, "{text}");
        assert!(
            text.ends_with("sim_thing.slow: Destruction complete after 0s\n"),
            "{text}"
        );
        // Nothing is written after the observer is gone.
        std::thread::sleep(Duration::from_millis(40));
        assert_eq!(cap.text(), text);
    }

    #[test]
    fn elapsed_format() {
        for (s, f) in [(0, "0s"), (59, "59s"), (60, "1m0s"), (3725, "1h2m5s")] {
            assert_eq!(fmt_elapsed(Duration::from_secs(s)), f);
        }
    }
}
