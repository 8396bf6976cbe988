//! `cairn stack history [RUN]`: the stack's runs (`engine::stack::history`), one line each
//! as `cairn history` lists a state's runs, or one run with its rounds (a fleet: its work
//! items) and each component instance's state and runs in that state's own history.

use super::args::StackHistoryArgs;
use super::output::Exit;
use super::state_cmds::{fmt_run_duration, table, time_of};
use super::Context;
use crate::diag::Diagnostic;
use crate::engine::stack::history::{self, ComponentRun, StackRun};
use std::fmt::Write as _;

pub(crate) fn stack_history(ctx: &Context, a: &StackHistoryArgs) -> Exit {
    let root = if ctx.state_root.is_absolute() {
        ctx.state_root.clone()
    } else {
        std::env::current_dir()
            .unwrap_or_else(|_| std::path::PathBuf::from("."))
            .join(&ctx.state_root)
    };
    let no_color = a.ui.no_color;
    if let Some(id) = &a.run {
        let (run, warnings) = match history::get(&root, id) {
            Ok(r) => r,
            Err(d) => return ctx.fail(d, no_color),
        };
        for w in warnings {
            ctx.err(&format!("Warning: {w}\n"));
        }
        let Some(run) = run else {
            return ctx.fail(
                Diagnostic::error(
                    "No such stack run",
                    format!(
                        "The stack's history has no run {id:?}: `cairn stack history` lists them."
                    ),
                ),
                no_color,
            );
        };
        if a.ui.json {
            ctx.out(&format!(
                "{}\n",
                serde_json::to_string_pretty(&run_json(&run)).unwrap_or_default()
            ));
        } else {
            ctx.out(&run_text(&run));
        }
        return Exit::Ok;
    }
    let (runs, warnings) = match history::list(&root) {
        Ok(r) => r,
        Err(d) => return ctx.fail(d, no_color),
    };
    for w in warnings {
        ctx.err(&format!("Warning: {w}\n"));
    }
    if a.ui.json {
        let mut out = String::new();
        for r in &runs {
            let mut j = run_json(r);
            // One line per run: its summary, not every component.
            if let Some(o) = j.as_object_mut() {
                o.remove("steps");
            }
            let _ = writeln!(out, "{j}");
        }
        ctx.out(&out);
        return Exit::Ok;
    }
    if runs.is_empty() {
        ctx.out("No stack runs yet.\n");
        return Exit::Ok;
    }
    let rows: Vec<[String; 7]> = runs
        .iter()
        .map(|r| {
            [
                r.id.clone(),
                time_of(r.started_ms),
                r.finished_ms
                    .map(|f| fmt_run_duration(f.saturating_sub(r.started_ms)))
                    .unwrap_or_else(|| "-".into()),
                r.outcome.clone(),
                r.command.clone(),
                summary_text(r),
                crate::engine::history::context_text(&r.context),
            ]
        })
        .collect();
    ctx.out(&table(
        [
            "STACK RUN",
            "STARTED",
            "DURATION",
            "OUTCOME",
            "COMMAND",
            "COMPONENTS",
            "WHERE",
        ],
        &rows,
    ));
    Exit::Ok
}

pub(crate) fn summary_text(r: &StackRun) -> String {
    r.summary()
}

fn component_json(c: &ComponentRun) -> serde_json::Value {
    serde_json::to_value(c).unwrap_or_default()
}

/// A run as JSON: its summary, and each step's component instances.
pub(crate) fn run_json(r: &StackRun) -> serde_json::Value {
    let (add, change, destroy) = r.totals();
    serde_json::json!({
        "id": r.id,
        "command": r.command,
        "args": r.args,
        "user": r.user,
        "pid": r.pid,
        "host": r.context.host,
        "git_commit": r.context.git_commit,
        "git_branch": r.context.git_branch,
        "ci_job": r.context.ci_job,
        "deployment": r.deployment,
        "started": time_of(r.started_ms),
        "finished": r.finished_ms.map(time_of),
        "duration_ms": r.finished_ms.map(|f| f.saturating_sub(r.started_ms)),
        "outcome": r.outcome,
        "message": r.message,
        "diagnostics": r.diagnostics,
        "runners": r.runners,
        "changes": {"added": add, "changed": change, "destroyed": destroy},
        "summary": summary_text(r),
        "steps": r.steps.iter().map(|s| serde_json::json!({
            "round": s.round,
            "item": s.item,
            "runner": s.runner,
            "status": s.status,
            "reason": s.reason,
            "started": time_of(s.started_ms),
            "finished": time_of(s.finished_ms),
            "components": s.instances.iter().map(component_json).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
    })
}

fn component_line(c: &ComponentRun) -> String {
    let removed = if c.removed { " (removed)" } else { "" };
    let mut line = format!("{}{removed}: {}", c.address, c.status);
    match c.status.as_str() {
        "deferred" => {
            if let Some(r) = &c.reason {
                let _ = write!(line, ": {r}");
            }
        }
        "failed" if !c.errors.is_empty() => {
            let _ = write!(line, ": {}", c.errors.join("; "));
        }
        "applied" => {
            let _ = write!(
                line,
                " ({} added, {} changed, {} destroyed)",
                c.add, c.change, c.destroy
            );
        }
        "planned" | "not applied" => {
            let _ = write!(
                line,
                " ({} to add, {} to change, {} to destroy)",
                c.add, c.change, c.destroy
            );
        }
        _ => {}
    }
    let _ = write!(line, "; state {}", c.workspace);
    if !c.runs.is_empty() {
        let ids: Vec<String> = c.runs.iter().map(u64::to_string).collect();
        let _ = write!(
            line,
            ", run{} {}",
            if ids.len() == 1 { "" } else { "s" },
            ids.join(", ")
        );
    }
    if !c.plans.is_empty() {
        let _ = write!(line, ", plan {}", c.plans.join(", "));
    }
    line
}

/// One run in full.
pub(crate) fn run_text(r: &StackRun) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "Stack run {}: {} ({})", r.id, r.command, r.outcome);
    let duration = r
        .finished_ms
        .map(|f| format!(", {}", fmt_run_duration(f.saturating_sub(r.started_ms))))
        .unwrap_or_default();
    let _ = writeln!(out, "  Started {}{duration}", time_of(r.started_ms));
    let mut who = format!("  By {}", if r.user.is_empty() { "?" } else { &r.user });
    let place = crate::engine::history::context_text(&r.context);
    if !place.is_empty() && place != "-" {
        let _ = write!(who, " on {place}");
    }
    let _ = writeln!(out, "{who}");
    if !r.args.is_empty() {
        let _ = writeln!(out, "  Command line: cairn {}", r.args.join(" "));
    }
    if let Some(d) = &r.deployment {
        let _ = writeln!(out, "  Deployment: {d}");
    }
    if !r.runners.is_empty() {
        let _ = writeln!(out, "  Runners: {}", r.runners.join(", "));
    }
    if let Some(m) = &r.message {
        let _ = writeln!(out, "  {m}");
    }
    for d in &r.diagnostics {
        out.push('\n');
        for l in history::diagnostic_text(d).lines() {
            let _ = writeln!(out, "  {l}");
        }
    }
    for s in &r.steps {
        match (&s.round, &s.item) {
            (Some(n), _) => match &s.status {
                // A round the run stopped or died in.
                Some(status) => {
                    let _ = writeln!(out, "\nRound {n}: {status}");
                }
                None => {
                    let _ = writeln!(out, "\nRound {n}");
                }
            },
            (None, item) => {
                let _ = write!(
                    out,
                    "\n{}: {}",
                    item.as_deref().unwrap_or("work item"),
                    s.status.as_deref().unwrap_or("?")
                );
                if let Some(runner) = &s.runner {
                    let _ = write!(out, " by runner {runner}");
                }
                if let Some(why) = &s.reason {
                    let _ = write!(out, ": {why}");
                }
                out.push('\n');
            }
        }
        let mut current: Option<&str> = None;
        for c in &s.instances {
            if current != Some(c.deployment.as_str()) {
                current = Some(c.deployment.as_str());
                let _ = writeln!(out, "  Deployment {:?}", c.deployment);
            }
            let _ = writeln!(out, "    {}", component_line(c));
        }
    }
    if !r.steps.is_empty() {
        let _ = writeln!(
            out,
            "\nEach component instance's runs are in its state's own history: \
             TF_WORKSPACE=STATE cairn history (or cairn log)."
        );
    }
    out
}

/// The record of the stack run a command makes (`engine::stack::history::Recorder`), with
/// a failure to record said as a warning (the run itself goes on).
pub(crate) struct RunLog<'a> {
    ctx: &'a Context,
    rec: std::sync::Arc<history::Recorder>,
    no_color: bool,
}

impl<'a> RunLog<'a> {
    pub(crate) fn start(
        ctx: &'a Context,
        req: &crate::engine::stack::StackRequest,
        command: &str,
        no_color: bool,
    ) -> RunLog<'a> {
        let (rec, warn) = history::Recorder::start(req, command);
        let rec = std::sync::Arc::new(rec);
        let log = RunLog { ctx, rec, no_color };
        log.warn(warn);
        log
    }

    /// A runner's part of the fleet run whose record is `rec`.
    pub(crate) fn fleet(
        ctx: &'a Context,
        req: &crate::engine::stack::StackRequest,
        rec: std::sync::Arc<history::Recorder>,
        runner: &str,
        started: bool,
        no_color: bool,
    ) -> RunLog<'a> {
        let warn = rec.fleet_start(req, runner, started);
        let log = RunLog { ctx, rec, no_color };
        log.warn(warn);
        log
    }

    pub(crate) fn warn(&self, why: Option<String>) {
        if let Some(why) = why {
            let d = Diagnostic::warning("The stack run was not recorded in the history", why);
            self.ctx
                .report(&crate::diag::SourceMap::new(), &d.into(), self.no_color);
        }
    }

    pub(crate) fn rec(&self) -> &history::Recorder {
        &self.rec
    }

    /// `stack plan`'s round: each planned instance's plan recorded in its state's history
    /// too.
    pub(crate) fn plan_round(
        &self,
        req: &crate::engine::stack::StackRequest,
        started_ms: u64,
        results: &[crate::engine::stack::InstanceResult],
    ) {
        let (plans, warnings) = history::record_plans(req, results, started_ms);
        for w in warnings {
            self.warn(Some(w));
        }
        self.warn(self.rec.round(1, started_ms, results, &[], &plans, false));
    }

    /// What names round `n`'s component runs in the record as they begin.
    pub(crate) fn link(&self, n: usize) -> history::RoundLink {
        history::RoundLink::new(self.rec.clone(), n)
    }

    /// An apply's round `n` (its component runs named as they began by `link`): its plans,
    /// and what its applies did.
    pub(crate) fn round(
        &self,
        n: usize,
        link: &history::RoundLink,
        started_ms: u64,
        planned: &[crate::engine::stack::InstanceResult],
        applied: &[crate::engine::stack::InstanceResult],
    ) {
        self.said(link);
        self.warn(
            self.rec
                .round(n, started_ms, planned, applied, &Default::default(), true),
        );
    }

    /// Says the failures to name `link`'s component runs in the record.
    pub(crate) fn said(&self, link: &history::RoundLink) {
        for w in link.warnings() {
            self.warn(Some(w));
        }
    }

    pub(crate) fn finish(&self, outcome: &str, message: Option<String>) {
        self.warn(self.rec.finish(outcome, message, None));
    }
}

/// The milliseconds since the epoch now.
pub(crate) fn now_ms() -> u64 {
    crate::engine::api::plan_history::now_ms()
}
