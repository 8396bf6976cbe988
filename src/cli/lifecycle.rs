//! The steps `plan`, `apply`, `refresh` and `destroy` take around the engine, in order:
//! choose the observer (human lines or the `-json` stream), load the configuration and the
//! input variables (the CLI owns the `SourceMap`, so every diagnostic can be rendered with its
//! snippet), hand the engine its `Options` (`engine_options::engine_options`), then print what came back — diagnostics, the
//! plan, the apply summary and outputs — and pick the exit code.
//!
//! Decisions:
//! - The environment is read here (`TF_VAR_*`), never below: the configuration layer gets it as
//!   a map.
//! - Diagnostics that the observer saw as events and the ones the engine returns are merged
//!   without duplicates and printed once, after progress has stopped (the status line is gone
//!   by then).
//! - In `-json` mode every diagnostic is a `diagnostic` message on standard output, as
//!   Terraform's machine-readable UI does; nothing else is printed.

use super::args::UiArgs;
use super::engine_options::engine_options;
use super::output::{Exit, JsonUi};
use super::progress::{AnyObserver, HumanObserver, HumanOptions, JsonObserver};
use super::run_cmds::present_plan;
use super::Context;
use crate::config::{Config, VarArg};
use crate::diag::{Diagnostic, Diagnostics, SourceMap};
use crate::engine::api;
use crate::engine::observer::Observer;
use crate::plan::json::type_json;
use crate::plan::saved::{load_plan, save_plan};
use crate::plan::{Plan, PlanMode};
use crate::value::{format_hcl, Value};
use serde_json::{json, Map, Value as J};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// The observer for a run, and the JSON UI when `-json` was given (its `version` message is
/// already written).
pub(crate) fn make_observer(ctx: &Context, ui: &UiArgs) -> (AnyObserver, Option<JsonUi>) {
    if ui.json {
        let json_ui = JsonUi::new(ctx.stdout.clone(), super::output::system_clock());
        json_ui.version();
        (
            AnyObserver::Json(JsonObserver::new(json_ui.clone())),
            Some(json_ui),
        )
    } else {
        let (color, _) = ctx.colors(ui.no_color);
        let opts = HumanOptions::new(color, ctx.stdout_tty);
        (
            AnyObserver::Human(HumanObserver::new(ctx.stdout.clone(), opts)),
            None,
        )
    }
}

/// Prints diagnostics: human form on standard error, or `diagnostic` messages.
pub(crate) fn emit(
    ctx: &Context,
    map: &SourceMap,
    diags: &Diagnostics,
    json_ui: Option<&JsonUi>,
    no_color: bool,
) -> bool {
    match json_ui {
        Some(ui) => {
            for (d, more) in super::output::group_diagnostics(diags) {
                ui.diagnostic_of(map, d, &more);
            }
            diags.has_errors()
        }
        None => ctx.report(map, diags, no_color),
    }
}

/// `first` followed by each of `then` not already in it.
pub(crate) fn merge_diagnostics(first: Vec<Diagnostic>, then: Diagnostics) -> Diagnostics {
    let mut all = Diagnostics(first);
    for d in then {
        if !all.0.contains(&d) {
            all.push(d);
        }
    }
    all
}

/// How a run prints: the `-json` stream or human text, and `-no-color`.
pub(crate) struct RunUi {
    pub json: Option<JsonUi>,
    pub no_color: bool,
}

/// `plan -generate-config-out=FILE`: the generated resource blocks of the plan's imports, in
/// a new file, under Terraform's header (nothing is written when none was generated).
fn write_generated(ctx: &Context, plan: &Plan, path: &Path, human: bool) -> Result<(), Diagnostic> {
    let blocks: Vec<&str> = plan
        .changes
        .iter()
        .filter_map(|c| c.importing.as_ref()?.generated_config.as_deref())
        .collect();
    if blocks.is_empty() {
        return Ok(());
    }
    let mut text = String::from(
        "# __generated__ by Cairn\n# Please review these resources and move them into your main configuration files.\n",
    );
    for b in blocks {
        text.push('\n');
        text.push_str(b);
    }
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
        .and_then(|mut f| std::io::Write::write_all(&mut f, text.as_bytes()));
    if let Err(e) = written {
        return Err(Diagnostic::error(
            "Failed to write generated config",
            format!("Cairn could not write {}: {e}.", path.display()),
        ));
    }
    if human {
        ctx.out(&format!(
            "\nCairn has generated configuration and written it to {}. Please review the\nconfiguration and edit it as necessary before adding it to version control.\n",
            path.display()
        ));
    }
    Ok(())
}

/// `cairn import ADDR ID`, as `terraform import` prints it: the provider's progress lines,
/// then "Import successful!" (or the errors).
pub(crate) fn import(ctx: &Context, a: &super::args::ImportArgs, vars: Vec<VarArg>) -> Exit {
    let no_color = a.walk.ui.no_color;
    let (observer, json) = make_observer(ctx, &a.walk.ui);
    let observer = Arc::new(observer);
    let empty = SourceMap::new();
    let addr = match a.addr.parse::<crate::addr::ResourceInstanceAddr>() {
        Ok(addr) => addr,
        Err(e) => {
            let d = Diagnostic::error(
                "Invalid address",
                format!("Error parsing {:?}: {e}. An import address is a resource instance address, like sim_thing.a or module.m.sim_thing.b[\"k\"].", a.addr),
            );
            emit(ctx, &empty, &d.into(), json.as_ref(), no_color);
            return Exit::Error;
        }
    };
    if a.id.is_empty() {
        let d = Diagnostic::error("Invalid import id", "The import ID must not be empty.");
        emit(ctx, &empty, &d.into(), json.as_ref(), no_color);
        return Exit::Error;
    }
    let mut opts = match engine_options(ctx, "import", vars, &a.walk, None) {
        Ok(o) => o,
        Err(d) => {
            emit(ctx, &empty, &d, json.as_ref(), no_color);
            return Exit::Error;
        }
    };
    if let Some(dir) = &a.config {
        opts.dir = opts.dir.join(dir);
    }
    opts.import = Some((addr, a.id.clone()));
    let dyn_observer: Arc<dyn Observer> = observer.clone();
    let report = match block_on(ctx, &opts, api::import(&opts, dyn_observer)) {
        Ok(r) => r,
        Err(d) => return ctx.fail(d, no_color),
    };
    observer.finish();
    let mut seen = notes(&report.notes);
    seen.extend(observer.take_diagnostics());
    let all = merge_diagnostics(seen, report.diags);
    let map = report.config.as_ref().map(|c| &c.sources).unwrap_or(&empty);
    if emit(ctx, map, &all, json.as_ref(), no_color) {
        return Exit::Error;
    }
    if json.is_none() {
        let (color, _) = ctx.colors(no_color);
        let (g, b, r) = if color {
            ("\x1b[32m", "\x1b[1m", "\x1b[0m")
        } else {
            ("", "", "")
        };
        ctx.out(&format!(
            "\n{b}{g}Import successful!{r}\n\n{g}The resources that were imported are shown above. These resources are now in\nyour Cairn state and will henceforth be managed by Cairn.{r}\n\n"
        ));
    }
    Exit::Ok
}

/// What an apply or destroy did, for its closing lines.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct ApplySummary {
    /// Objects adopted by `import` blocks.
    pub imported: usize,
    pub added: usize,
    pub changed: usize,
    pub destroyed: usize,
    /// The root outputs after the run: value and whether it is sensitive.
    pub outputs: BTreeMap<String, (Value, bool)>,
}

/// `Apply complete! Resources: …` (or `Destroy complete!`), then the outputs, in either UI.
pub(crate) fn print_summary(
    ctx: &Context,
    s: &ApplySummary,
    destroy: bool,
    json_ui: Option<&JsonUi>,
    no_color: bool,
) {
    if let Some(ui) = json_ui {
        let op = if destroy { "destroy" } else { "apply" };
        ui.change_summary(op, s.imported, s.added, s.changed, s.destroyed);
        if !s.outputs.is_empty() {
            let outputs: Map<String, J> = s
                .outputs
                .iter()
                .map(|(k, (v, sensitive))| {
                    let (plain, marked) = v.clone().deep_unmark();
                    let mut o = json!({"sensitive": *sensitive || marked,
                                       "type": type_json(&plain.type_of())});
                    if !(*sensitive || marked) {
                        o["value"] = plain.to_json();
                    }
                    (k.clone(), o)
                })
                .collect();
            let mut f = Map::new();
            f.insert("outputs".into(), J::Object(outputs));
            ui.emit(
                "info",
                &format!("Outputs: {}", s.outputs.len()),
                "outputs",
                f,
            );
        }
        return;
    }
    let (color, _) = ctx.colors(no_color);
    let (g, b, r) = if color {
        ("\x1b[32m", "\x1b[1m", "\x1b[0m")
    } else {
        ("", "", "")
    };
    let mut out = String::new();
    if destroy {
        let _ = writeln!(
            out,
            "\n{b}{g}Destroy complete! Resources: {} destroyed.{r}",
            s.destroyed
        );
    } else {
        let imported = match s.imported {
            0 => String::new(),
            n => format!(" {n} imported,"),
        };
        let _ = writeln!(
            out,
            "\n{b}{g}Apply complete! Resources:{imported} {} added, {} changed, {} destroyed.{r}",
            s.added, s.changed, s.destroyed
        );
    }
    if !s.outputs.is_empty() && !destroy {
        let _ = writeln!(out, "\n{b}{g}Outputs:{r}\n");
        for (k, (v, sensitive)) in &s.outputs {
            if *sensitive || v.contains_sensitive() {
                let _ = writeln!(out, "{k} = <sensitive>");
            } else {
                let _ = writeln!(out, "{k} = {}", format_hcl(v));
            }
        }
    }
    ctx.out(&out);
}

/// Which lifecycle command is running.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Verb {
    Plan,
    Apply,
    Destroy,
    Refresh,
}

impl Verb {
    fn name(self) -> &'static str {
        match self {
            Verb::Plan => "plan",
            Verb::Apply => "apply",
            Verb::Destroy => "destroy",
            Verb::Refresh => "refresh",
        }
    }
}

/// Everything a lifecycle command was asked, flattened from its flags.
pub(crate) struct Invocation<'a> {
    pub verb: Verb,
    pub walk: &'a super::args::WalkArgs,
    pub flags: Option<&'a super::args::PlanFlags>,
    pub mode: PlanMode,
    pub vars: Vec<VarArg>,
    pub plan_file: Option<&'a Path>,
    pub out_file: Option<&'a Path>,
    /// `plan -generate-config-out=FILE`.
    pub generate_config_out: Option<&'a Path>,
    pub detailed_exitcode: bool,
    pub auto_approve: bool,
    /// `refresh -preview`: show, record nothing.
    pub preview: bool,
}

/// Runs an engine future on a runtime of its own (an [`EngineRuntime`] for this one call).
pub(crate) fn block_on<F: std::future::Future>(
    ctx: &Context,
    opts: &api::Options,
    f: F,
) -> Result<F::Output, Diagnostic> {
    EngineRuntime::start(ctx, opts)?.run(f)
}

/// The async runtime a command's engine calls run on, watching SIGINT (Ctrl-C) and SIGTERM
/// (what a CI runner sends) for as long as it lives — across several calls, so that `apply`
/// can plan in one, ask for approval on this thread (outside any async code), and execute in
/// the next, with the same provider processes and the same signal watch.
///
/// The first signal sets `opts.stop` and notifies `opts.interrupted`: the engine starts no new
/// step, tells every configured provider to stop, and records the outcome of every step that
/// was running (at the approval prompt, it answers "no"). A second signal abandons the steps
/// still running: the engine future is dropped (its tasks cancelled, the store closed and its
/// lock released) and an error says so; the operations those steps had started were recorded
/// before their provider calls, so they stay pending and the next run resolves them. The
/// signal watcher never outlives the runtime.
pub(crate) struct EngineRuntime {
    rt: Option<tokio::runtime::Runtime>,
    watcher: Option<tokio::task::JoinHandle<()>>,
    /// The name of the second signal, once it came.
    second: tokio::sync::watch::Receiver<Option<&'static str>>,
}

impl EngineRuntime {
    pub(crate) fn start(ctx: &Context, opts: &api::Options) -> Result<Self, Diagnostic> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .map_err(|e| {
                Diagnostic::error(
                    "Cannot start the engine",
                    format!("Starting the async runtime failed: {e}."),
                )
            })?;
        let stderr = ctx.stderr.clone();
        let stop = opts.stop.clone();
        let interrupted = opts.interrupted.clone();
        let (second_tx, second) = tokio::sync::watch::channel(None);
        // The watcher is a task of its own, so that a signal is seen (the stop flag set, the
        // message printed) even while the main thread waits in the approval prompt.
        let watcher = {
            let _entered = rt.enter();
            let mut signals = Signals::new();
            rt.spawn(async move {
                let first = signals.next().await;
                stop.store(true, Ordering::SeqCst);
                interrupted.notify_one();
                super::output::write_to(
                    &stderr,
                    &format!(
                        "\n{} received: no new steps start, providers are told to stop, and steps already running are recorded. Send it again to abandon them.\n",
                        capitalized(first)
                    ),
                );
                let _ = second_tx.send(Some(signals.next().await));
            })
        };
        Ok(EngineRuntime {
            rt: Some(rt),
            watcher: Some(watcher),
            second,
        })
    }

    /// Runs one engine future to its end, or until a second signal abandons it.
    pub(crate) fn run<F: std::future::Future>(&self, f: F) -> Result<F::Output, Diagnostic> {
        let rt = self.rt.as_ref().expect("runtime");
        let mut second = self.second.clone();
        let out = rt.block_on(async move {
            let second = async move {
                match second.wait_for(Option::is_some).await {
                    Ok(s) => Ok(s.unwrap_or("signal")),
                    Err(e) => Err(e),
                }
            };
            tokio::select! {
                out = f => Ok(out),
                Ok(second) = second => Err(second),
            }
        });
        out.map_err(|second| {
            Diagnostic::error(
                "Run abandoned",
                format!("A second {second} abandoned the steps still running. The operations they had started are recorded as pending in the state; the next run resolves them."),
            )
        })
    }
}

impl Drop for EngineRuntime {
    fn drop(&mut self) {
        let Some(rt) = self.rt.take() else { return };
        if let Some(watcher) = self.watcher.take() {
            watcher.abort();
            let _ = rt.block_on(watcher);
        }
        // Every task the engine spawned was joined; blocking work a stopped provider call left
        // behind (a latency sleep) has no one waiting for it, and the process does not wait
        // either.
        rt.shutdown_background();
    }
}

fn capitalized(s: &str) -> String {
    let mut c = s.chars();
    c.next()
        .map(|f| f.to_uppercase().chain(c).collect())
        .unwrap_or_default()
}

/// SIGINT and SIGTERM, as one stream of names ("interrupt", "termination signal").
struct Signals {
    int: Option<tokio::signal::unix::Signal>,
    term: Option<tokio::signal::unix::Signal>,
}

impl Signals {
    fn new() -> Self {
        use tokio::signal::unix::{signal, SignalKind};
        Signals {
            int: signal(SignalKind::interrupt()).ok(),
            term: signal(SignalKind::terminate()).ok(),
        }
    }

    async fn next(&mut self) -> &'static str {
        async fn recv(s: &mut Option<tokio::signal::unix::Signal>) {
            match s {
                Some(s) => {
                    if s.recv().await.is_none() {
                        std::future::pending::<()>().await
                    }
                }
                None => std::future::pending::<()>().await,
            }
        }
        tokio::select! {
            _ = recv(&mut self.int) => "interrupt",
            _ = recv(&mut self.term) => "termination signal",
        }
    }
}

/// Leaves `record` in the history; a record that cannot be written is a warning, never the
/// plan's failure.
fn record_plan_run(
    ctx: &Context,
    opts: &crate::engine::api::Options,
    record: &api::plan_history::PlanRunRecord,
    json: Option<&JsonUi>,
    no_color: bool,
) {
    if let Some(why) = api::plan_history::record(opts, record) {
        let d = Diagnostic::warning("The plan was not recorded in the history", why);
        emit(ctx, &SourceMap::new(), &d.into(), json, no_color);
    }
}

/// The engine's notes (recovered pending operations, repaired state) as warnings.
fn notes(report_notes: &[String]) -> Vec<Diagnostic> {
    report_notes
        .iter()
        .map(|n| Diagnostic::warning("Recovered state", n.clone()))
        .collect()
}

/// Runs a lifecycle command end to end.
pub(crate) fn run(ctx: &Context, inv: Invocation<'_>) -> Exit {
    let no_color = inv.walk.ui.no_color;
    let (observer, json) = make_observer(ctx, &inv.walk.ui);
    let observer = Arc::new(observer);
    let ui = RunUi { json, no_color };
    let empty = SourceMap::new();
    if let Some(path) = inv.plan_file {
        let refused = saved_plan_conflicts(&inv, path);
        if refused.has_errors() {
            emit(ctx, &empty, &refused, ui.json.as_ref(), no_color);
            return Exit::Error;
        }
    }
    let mut opts = match engine_options(ctx, inv.verb.name(), inv.vars.clone(), inv.walk, inv.flags)
    {
        Ok(o) => o,
        Err(d) => {
            emit(ctx, &empty, &d, ui.json.as_ref(), no_color);
            return Exit::Error;
        }
    };
    if let Some(path) = inv.generate_config_out {
        if path.exists() {
            let d = Diagnostic::error(
                "Target generated file already exists",
                "Cairn can only write generated config into a new file. Either choose a different target location or move all existing configuration out of the target file, delete it and try again.",
            );
            emit(ctx, &empty, &d.into(), ui.json.as_ref(), no_color);
            return Exit::Error;
        }
        opts.generate_config = true;
    }
    let dyn_observer: Arc<dyn Observer> = observer.clone();
    let finish = |config: Option<&Arc<Config>>, diags: Diagnostics, report_notes: &[String]| {
        observer.finish();
        let mut seen = notes(report_notes);
        seen.extend(observer.take_diagnostics());
        let all = merge_diagnostics(seen, diags);
        let map = config.map(|c| &c.sources).unwrap_or(&empty);
        if inv.walk.compact_warnings && ui.json.is_none() {
            let (_, color) = ctx.colors(no_color);
            if let Some(text) = super::compact_warnings::compact(map, &all, color) {
                ctx.err(&text);
                return false;
            }
        }
        emit(ctx, map, &all, ui.json.as_ref(), no_color)
    };
    match inv.verb {
        Verb::Plan => {
            let started_ms = api::plan_history::now_ms();
            let report = match block_on(ctx, &opts, api::plan(&opts, inv.mode, dyn_observer)) {
                Ok(r) => r,
                Err(d) => return ctx.fail(d, no_color),
            };
            observer.finish();
            if let Some(plan) = &report.result {
                present_plan(ctx, plan, ui.json.as_ref(), no_color);
                if let Some(path) = inv.generate_config_out {
                    if let Err(d) = write_generated(ctx, plan, path, ui.json.is_none()) {
                        emit(ctx, &empty, &d.into(), ui.json.as_ref(), no_color);
                        return Exit::Error;
                    }
                }
            }
            // The plan is a review: it leaves a lightweight record in the history (no lock,
            // no event), whatever its outcome. Made before the diagnostics are consumed.
            let errors = report.diags.iter().filter(|d| d.is_error()).count();
            let mut record = api::plan_history::plan_record(
                &opts,
                report.config.as_deref(),
                report.result.as_ref(),
                errors,
                started_ms,
                None,
            );
            let failed = finish(report.config.as_ref(), report.diags, &report.notes);
            let Some(plan) = report.result.filter(|_| !failed) else {
                record.outcome = "failed".into();
                record.errors = record.errors.max(1);
                record_plan_run(ctx, &opts, &record, ui.json.as_ref(), no_color);
                return Exit::Error;
            };
            if let Some(path) = inv.out_file {
                if let Err(d) = save_plan(
                    path,
                    &plan,
                    crate::engine::api::encryption::plan().as_deref(),
                ) {
                    emit(ctx, &empty, &d.into(), ui.json.as_ref(), no_color);
                    record.outcome = "failed".into();
                    record.errors = record.errors.max(1);
                    record_plan_run(ctx, &opts, &record, ui.json.as_ref(), no_color);
                    return Exit::Error;
                }
                record.saved_to = Some(path.display().to_string());
            }
            record_plan_run(ctx, &opts, &record, ui.json.as_ref(), no_color);
            if let Some(path) = inv.out_file {
                if ui.json.is_none() {
                    ctx.out(&format!(
                        "\nSaved the plan to: {p}\n\nTo perform exactly these actions, run:\n    cairn apply {p}\n",
                        p = path.display()
                    ));
                }
            }
            super::run_cmds::plan_exit(&plan, inv.detailed_exitcode)
        }
        Verb::Refresh => {
            let report = match block_on(ctx, &opts, api::refresh(&opts, inv.preview, dyn_observer))
            {
                Ok(r) => r,
                Err(d) => return ctx.fail(d, no_color),
            };
            observer.finish();
            if let Some(plan) = &report.result {
                let drift = &plan.drift;
                present_plan(ctx, plan, ui.json.as_ref(), no_color);
                if ui.json.is_none() && !inv.preview && !report.diags.has_errors() {
                    ctx.out(&match drift.len() {
                        0 => "\nRefresh complete! No object changed outside Cairn.\n".to_string(),
                        n => format!(
                            "\nRefresh complete! {n} object{} changed outside Cairn; the state records {} now.\n",
                            if n == 1 { "" } else { "s" },
                            if n == 1 { "it" } else { "them" },
                        ),
                    });
                }
            }
            if finish(report.config.as_ref(), report.diags, &report.notes) {
                Exit::Error
            } else {
                Exit::Ok
            }
        }
        Verb::Apply | Verb::Destroy => apply(ctx, &inv, &opts, &observer, &ui, finish),
    }
}

/// A saved plan is the whole request it was made with: flags that would change what it does
/// are refused beside it (`-var` and `-var-file` are checked by the engine, which refuses only
/// values that differ from the plan's, as Terraform does).
fn saved_plan_conflicts(inv: &Invocation<'_>, path: &Path) -> Diagnostics {
    let mut diags = Diagnostics::new();
    let mut refuse = |flag: &str| {
        diags.push(Diagnostic::error(
            format!("Can't use {flag} when applying a saved plan"),
            format!(
                "{} was made with its own choice of {flag}, and applies exactly as it was made. Make a new plan with {flag} instead.",
                path.display()
            ),
        ))
    };
    if !inv.walk.target.is_empty() {
        refuse("-target");
    }
    if !inv.walk.exclude.is_empty() {
        refuse("-exclude");
    }
    if let Some(f) = inv.flags {
        if !f.replace.is_empty() {
            refuse("-replace");
        }
        if !f.refresh {
            refuse("-refresh=false");
        }
    }
    match inv.mode {
        PlanMode::Destroy => refuse("-destroy"),
        PlanMode::ReadOnly => refuse("-read-only"),
        _ => {}
    }
    diags
}

/// `apply [PLANFILE]`, `apply -read-only`, `destroy`: the engine plans; the plan is shown and
/// the user asked; the engine applies what was approved, and the summary is printed.
fn apply(
    ctx: &Context,
    inv: &Invocation<'_>,
    opts: &api::Options,
    observer: &Arc<AnyObserver>,
    ui: &RunUi,
    finish: impl Fn(Option<&Arc<Config>>, Diagnostics, &[String]) -> bool,
) -> Exit {
    use super::prompt::Question;
    use super::run_cmds::{approve, objects_to_destroy};
    let no_color = ui.no_color;
    let saved = match inv.plan_file {
        Some(path) => match load_plan(path, crate::engine::api::encryption::plan().as_deref()) {
            Ok(p) => Some(p),
            Err(d) => {
                observer.finish();
                emit(
                    ctx,
                    &SourceMap::new(),
                    &d.into(),
                    ui.json.as_ref(),
                    no_color,
                );
                return Exit::Error;
            }
        },
        None => None,
    };
    let from_file = saved.is_some();
    let mode = saved.as_ref().map(|p| p.mode).unwrap_or(inv.mode);
    let shown = AtomicBool::new(false);
    let cannot_ask: Mutex<Option<Diagnostic>> = Mutex::new(None);
    let confirm = |plan: &Plan| -> bool {
        if from_file {
            // A saved plan was reviewed when it was made: Terraform applies it without asking.
            return true;
        }
        observer.clear_status();
        present_plan(ctx, plan, ui.json.as_ref(), no_color);
        shown.store(true, Ordering::SeqCst);
        let question = match plan.mode {
            PlanMode::Destroy => Question::Destroy {
                objects: objects_to_destroy(plan),
            },
            PlanMode::ReadOnly | PlanMode::RefreshOnly => Question::ReadOnly,
            PlanMode::Normal => Question::Apply,
        };
        // Ctrl-C at the prompt answers "no" at once.
        let mut stdin = super::prompt::InterruptibleStdin::new(opts.stop.clone());
        match approve(
            ctx,
            question,
            inv.verb.name(),
            inv.auto_approve,
            inv.walk.input,
            &mut stdin,
            no_color,
        ) {
            Ok(yes) => {
                if yes && inv.auto_approve && ui.json.is_none() {
                    ctx.out("\n");
                }
                observer.resume_status();
                yes
            }
            Err(d) => {
                *cannot_ask.lock().unwrap_or_else(|p| p.into_inner()) = Some(d);
                false
            }
        }
    };
    let dyn_observer: Arc<dyn Observer> = observer.clone();
    // The engine plans and records the plan; the question is asked here, on this thread and
    // outside any async code, while the runtime keeps the providers and the signal watch (so
    // Ctrl-C at the prompt answers "no"); then the engine executes what was approved.
    let rt = match EngineRuntime::start(ctx, opts) {
        Ok(rt) => rt,
        Err(d) => return ctx.fail(d, no_color),
    };
    let start = match rt.run(api::apply_start(opts, mode, saved, dyn_observer)) {
        Ok(s) => s,
        Err(d) => return ctx.fail(d, no_color),
    };
    let report = match start {
        api::ApplyStart::Done(report) => report,
        api::ApplyStart::Ask(pending) => {
            let yes = crate::engine::timing::timed("show the plan and confirm", || {
                confirm(pending.plan())
            });
            let finished = match yes {
                true => rt.run(pending.approve()),
                // Finished on the runtime: the providers it holds are dropped there.
                false => rt.run(async move { pending.decline() }),
            };
            match finished {
                Ok(r) => r,
                Err(d) => return ctx.fail(d, no_color),
            }
        }
    };
    drop(rt);
    observer.finish();
    let mut diags = report.diags;
    if let Some(d) = cannot_ask.into_inner().unwrap_or_else(|p| p.into_inner()) {
        diags.push(d);
    }
    let applied = report.result;
    if let Some(a) = &applied {
        if let (Some(plan), false) = (&a.plan, shown.load(Ordering::SeqCst) || from_file) {
            present_plan(ctx, plan, ui.json.as_ref(), no_color);
        }
        if !a.confirmed && !diags.has_errors() {
            let what = if mode == PlanMode::Destroy {
                "Destroy"
            } else {
                "Apply"
            };
            diags.push(Diagnostic::error(
                format!("{what} cancelled"),
                "Only 'yes' approves; nothing was changed.",
            ));
        }
    }
    let failed = finish(report.config.as_ref(), diags, &report.notes);
    match applied {
        Some(a) if a.confirmed => {
            let summary = ApplySummary {
                imported: a.summary.imported as usize,
                added: a.summary.added as usize,
                changed: a.summary.changed as usize,
                destroyed: a.summary.destroyed as usize,
                outputs: a.outputs,
            };
            if failed {
                // Terraform prints no "complete" line for a failed run; say what did happen.
                if ui.json.is_none() {
                    let what = if mode == PlanMode::Destroy {
                        "Destroy"
                    } else {
                        "Apply"
                    };
                    let how = if opts.stop.load(Ordering::SeqCst) {
                        "interrupted"
                    } else {
                        "failed"
                    };
                    ctx.out(&format!(
                        "\n{what} {how}. Before the errors above: {} added, {} changed, {} \
                         destroyed (recorded in the state).\n",
                        summary.added, summary.changed, summary.destroyed
                    ));
                }
                Exit::Error
            } else {
                print_summary(
                    ctx,
                    &summary,
                    mode == PlanMode::Destroy,
                    ui.json.as_ref(),
                    no_color,
                );
                Exit::Ok
            }
        }
        _ => Exit::Error,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::output::sink;
    use crate::cli::output::testing::Capture;
    use std::path::PathBuf;
    use std::sync::Arc;

    fn context() -> (Context, Capture, Capture) {
        let (out, err) = (Capture::default(), Capture::default());
        let ctx = Context {
            state_dir: PathBuf::from(".cairn"),
            state_root: PathBuf::from(".cairn"),
            workspace: "default".into(),
            workspace_source: crate::engine::api::workspaces::WorkspaceSource::Default,
            stdout: sink(out.clone()),
            stderr: sink(err.clone()),
            stdout_tty: false,
            stderr_tty: false,
            stdin_tty: false,
        };
        (ctx, out, err)
    }

    fn summary() -> ApplySummary {
        ApplySummary {
            imported: 0,
            added: 2,
            changed: 1,
            destroyed: 0,
            outputs: BTreeMap::from([
                ("name".to_string(), (Value::string("a"), false)),
                ("secret".to_string(), (Value::string("s"), true)),
                (
                    "list".to_string(),
                    (Value::Tuple(vec![Value::int(1), Value::int(2)]), false),
                ),
            ]),
        }
    }

    #[test]
    fn apply_summary_human() {
        let (ctx, out, _) = context();
        print_summary(&ctx, &summary(), false, None, true);
        assert_eq!(
            out.text(),
            "\nApply complete! Resources: 2 added, 1 changed, 0 destroyed.\n\nOutputs:\n\n\
             list = [\n  1,\n  2,\n]\nname = \"a\"\nsecret = <sensitive>\n"
        );
        let (ctx, out, _) = context();
        print_summary(&ctx, &summary(), true, None, true);
        assert_eq!(out.text(), "\nDestroy complete! Resources: 0 destroyed.\n");
    }

    #[test]
    fn apply_summary_json() {
        let (ctx, out, _) = context();
        let ui = JsonUi::new(ctx.stdout.clone(), Arc::new(|| std::time::UNIX_EPOCH));
        print_summary(&ctx, &summary(), false, Some(&ui), true);
        let lines: Vec<J> = out
            .text()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines[0]["type"], "change_summary");
        assert_eq!(lines[0]["changes"]["operation"], "apply");
        assert_eq!(lines[1]["type"], "outputs");
        assert_eq!(
            lines[1]["outputs"]["name"],
            json!({"sensitive": false, "type": "string", "value": "a"})
        );
        assert_eq!(
            lines[1]["outputs"]["secret"],
            json!({"sensitive": true, "type": "string"})
        );
    }

    #[test]
    fn diagnostics_merge_without_duplicates() {
        let a = Diagnostic::warning("A", "");
        let b = Diagnostic::error("B", "");
        let merged = merge_diagnostics(vec![a.clone()], Diagnostics(vec![a.clone(), b.clone()]));
        assert_eq!(merged.0, [a, b]);
    }
}
