//! One description of each event of the log and of each run, which `cairn history`,
//! `cairn log` (text and `-json`) and `cairn ui` render: the words for an event are written
//! here once, in one `match`, in the two registers the commands use (`cairn log`'s terse
//! words, the UI's sentence with its label and address). What only the UI shows beside them
//! (diffs, deferral chains, locations) it adds itself.
//!
//! What an event's words need from the rest of the log (the operation an outcome settles,
//! whether a read drifted, whether a read was deferred) comes through [`EventContext`], which
//! each caller answers from what it has read.

use crate::addr::{ProviderAddr, ResourceInstanceAddr};
use cairn_state::{
    Event, EventBody, OpAction, PlannedAction, RunContext, RunOutcome, RunRecord, RunSummary,
    StoredValue,
};
use serde_json::{json, Map, Value as J};
use std::fmt::Write as _;

/// The operation an event refers to (`op`: the seq of its `OperationStarted`).
#[derive(Clone, Copy, Debug)]
pub struct OpRef<'a> {
    pub addr: &'a ResourceInstanceAddr,
    pub action: OpAction,
    /// The run that started it.
    pub run: u64,
}

/// What describing an event needs from the rest of the log.
pub trait EventContext {
    /// The operation started at event `op`, when it was read.
    fn op(&self, op: u64) -> Option<OpRef<'_>>;
    /// Whether the `ResourceRead` at event `seq` changed `addr`'s attributes (drift).
    fn drifted(&self, _seq: u64, _addr: &ResourceInstanceAddr, _attrs: &StoredValue) -> bool {
        false
    }
    /// Whether run `run`'s plan deferred the read of `addr` to apply.
    fn deferred(&self, _run: u64, _addr: &ResourceInstanceAddr) -> bool {
        false
    }
    /// The root module's sensitive variables, whose `-var` values a recorded command line
    /// shows masked (runs recorded before Cairn masked them at write time).
    fn sensitive_vars(&self) -> Option<&std::collections::BTreeSet<String>> {
        None
    }
}

/// One event described.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Description {
    /// The instance it is about (for a move, where it went).
    pub addr: Option<String>,
    /// For a move: where the instance was.
    pub from: Option<String>,
    /// A one-word label (`created`, `drifted`, `planned`, …) for events about instances and
    /// records.
    pub label: Option<&'static str>,
    /// The event in a sentence (`cairn ui`); `None` when the operation it settles was not read.
    pub text: Option<String>,
    /// The event's words in `cairn log` (after its seq, time, run and kind).
    pub words: String,
}

/// A run's summary: `1 imported, 2 added, 0 changed, 1 destroyed, 3 read, 1 error(s)`.
pub fn summary_text(s: &RunSummary) -> String {
    let mut t = match s.imported {
        0 => String::new(),
        n => format!("{n} imported, "),
    };
    let _ = write!(
        t,
        "{} added, {} changed, {} destroyed",
        s.added, s.changed, s.destroyed
    );
    if s.read > 0 {
        let _ = write!(t, ", {} read", s.read);
    }
    if s.errors > 0 {
        let _ = write!(t, ", {} error(s)", s.errors);
    }
    t
}

/// A run's changes in `history`: its summary, and the objects it moved or forgot. A taint,
/// an untaint or a provider replacement that succeeded says what it marked (who did it is the
/// run's user, in `history -json` and `log`).
pub fn run_changes(r: &RunRecord) -> String {
    let marked = match r.command.as_str() {
        "taint" => Some("tainted"),
        "untaint" => Some("untainted"),
        "state replace-provider" => Some("provider replaced:"),
        _ => None,
    };
    if let (Some(word), Some(RunOutcome::Success)) = (marked, r.outcome) {
        // The operands: every argument but the flags (`-lock-timeout` is the one that may
        // take its value as the next argument).
        let mut operands = Vec::new();
        let mut args = r.args.iter().map(String::as_str);
        while let Some(a) = args.next() {
            if a.trim_start_matches('-') == "lock-timeout" {
                args.next();
            } else if !a.starts_with('-') {
                operands.push(a);
            }
        }
        if !operands.is_empty() {
            return format!("{word} {}", operands.join(" → "));
        }
    }
    let mut t = summary_text(&r.summary);
    if r.moved > 0 {
        let _ = write!(t, ", {} moved", r.moved);
    }
    if r.forgotten > 0 {
        let _ = write!(t, ", {} forgotten", r.forgotten);
    }
    t
}

/// A run's outcome in words (`unfinished` while it runs or after it died).
pub fn run_outcome(r: &RunRecord) -> String {
    match r.outcome {
        Some(o) => o.to_string(),
        None => "unfinished".to_string(),
    }
}

/// Where a run ran, in words (`host, git BRANCH@SHORTSHA, CI-JOB`, what is known of it; the
/// empty string for a run recorded without it): `history`, `log` and the UI say it so.
pub fn context_text(c: &RunContext) -> String {
    let mut parts: Vec<String> = Vec::new();
    if let Some(h) = &c.host {
        parts.push(h.clone());
    }
    if let Some(commit) = &c.git_commit {
        let short: String = commit.chars().take(7).collect();
        parts.push(match &c.git_branch {
            Some(b) => format!("git {b}@{short}"),
            None => format!("git {short}"),
        });
    }
    if let Some(j) = &c.ci_job {
        parts.push(j.clone());
    }
    parts.join(", ")
}

/// A list of dependencies as the run and resource pages show it.
fn deps_text(deps: &[ResourceInstanceAddr]) -> String {
    if deps.is_empty() {
        "nothing".to_string()
    } else {
        deps.iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// The command line of a `RunStarted`: `cairn`, the command's own words once (the recorded
/// arguments start with them), then its arguments.
fn command_line(command: &str, args: &[String]) -> String {
    let words = command.split_whitespace().count();
    let skip = if args
        .iter()
        .take(words)
        .map(String::as_str)
        .eq(command.split_whitespace())
    {
        words
    } else {
        0
    };
    format!(
        "cairn {command}{}",
        args.iter()
            .skip(skip)
            .map(|a| format!(" {a}"))
            .collect::<String>()
    )
}

/// The command line of a `RunStarted`, as the UI shows it: the command's own words once, even
/// when its arguments repeat them.
fn started_text(command: &str, args: &[String], user: &str, pid: u32) -> String {
    format!(
        "{user} started `{}` (pid {pid})",
        command_line(command, args)
    )
}

/// A plan record's counts: (to add, to change, to destroy, reads deferred).
fn plan_counts(changes: &[cairn_state::PlannedChange]) -> [usize; 4] {
    let n = |a: &[PlannedAction]| changes.iter().filter(|c| a.contains(&c.action)).count();
    let replace = [
        PlannedAction::DeleteThenCreate,
        PlannedAction::CreateThenDelete,
    ];
    [
        n(&[PlannedAction::Create]) + n(&replace),
        n(&[PlannedAction::Update]),
        n(&[PlannedAction::Delete]) + n(&replace),
        n(&[PlannedAction::Read]),
    ]
}

fn about(
    addr: &ResourceInstanceAddr,
    label: &'static str,
    text: String,
    words: String,
) -> Description {
    Description {
        addr: Some(addr.to_string()),
        from: None,
        label: Some(label),
        text: Some(text),
        words,
    }
}

fn record(text: String, words: String) -> Description {
    Description {
        text: Some(text),
        words,
        ..Description::default()
    }
}

// One arm per event kind, each in both registers side by side: long because the log has
// that many kinds, and kept in one match so that a new kind is described in one place.
/// Describes one event.
pub fn describe(e: &Event, ctx: &dyn EventContext) -> Description {
    let op_name = |op: &u64| match ctx.op(*op) {
        Some(o) => format!("{} (operation {op})", o.addr),
        None => format!("operation {op}"),
    };
    match &e.body {
        EventBody::RunStarted {
            command,
            args,
            user,
            pid,
        } => {
            let masked;
            let args = match ctx.sensitive_vars() {
                Some(s) => {
                    masked = crate::config::mask_var_args(args, s);
                    &masked
                }
                None => args,
            };
            let c = command_line(command, args);
            record(
                started_text(command, args, user, *pid),
                format!("{c} by {user} (pid {pid})"),
            )
        }
        EventBody::RunContext(c) => {
            let place = context_text(c);
            record(format!("ran on {place}"), format!("on {place}"))
        }
        EventBody::RunFinished { outcome, summary } => {
            let imported = match summary.imported {
                0 => String::new(),
                n => format!("{n} imported, "),
            };
            record(
                format!(
                    "finished: {outcome} ({imported}{} added, {} changed, {} destroyed, {} read, {} errors)",
                    summary.added, summary.changed, summary.destroyed, summary.read, summary.errors
                ),
                format!("{outcome}: {}", summary_text(summary)),
            )
        }
        EventBody::ProviderRegistered { instance } => record(
            format!("provider instance {} registered", instance.addr),
            format!(
                "{} [id={}]{}",
                instance.addr,
                instance.id,
                if instance.is_default {
                    " (default)"
                } else {
                    ""
                }
            ),
        ),
        EventBody::ProviderUpdated { addr, id, .. } => record(
            format!("provider instance {addr} reconfigured"),
            format!("{addr} [id={id}]"),
        ),
        EventBody::ProviderRemoved { addr, id } => record(
            format!("provider instance {addr} removed"),
            format!("{addr} [id={id}]"),
        ),
        EventBody::ResourceRead { addr, attrs, .. } => {
            if ctx.drifted(e.seq, addr, attrs) {
                let text = format!("{addr} changed outside Cairn (refresh)");
                about(addr, "drifted", text, addr.to_string())
            } else {
                let text = format!("{addr} refreshed, unchanged");
                about(addr, "refreshed", text, addr.to_string())
            }
        }
        EventBody::ResourceGone { addr } => about(
            addr,
            "gone",
            format!("{addr} was deleted outside Cairn (refresh)"),
            addr.to_string(),
        ),
        EventBody::ObjectDeposed { addr, key } => about(
            addr,
            "deposed",
            format!(
                "{addr}: the current object became deposed object {key} (create before destroy)"
            ),
            format!("{addr} (deposed key {key})"),
        ),
        EventBody::ObjectRestored { addr, key } => about(
            addr,
            "restored",
            format!(
                "{addr}: deposed object {key} is current again (its replacement was not created)"
            ),
            format!("{addr} (deposed key {key})"),
        ),
        EventBody::OperationStarted {
            addr,
            deposed,
            action,
            token,
            ..
        } => {
            let mut words = format!("{action} {addr}");
            if let Some(d) = deposed {
                let _ = write!(words, " (deposed {d})");
            }
            if let Some(t) = token {
                let _ = write!(words, " [token={t}]");
            }
            let what = deposed
                .as_ref()
                .map(|d| format!(" (deposed object {d})"))
                .unwrap_or_default();
            about(
                addr,
                "started",
                format!("{action} of {addr}{what} started"),
                words,
            )
        }
        EventBody::OperationSucceeded { op, object } => {
            let words = format!(
                "{}: {}",
                op_name(op),
                if object.is_some() {
                    "object written"
                } else {
                    "object removed"
                }
            );
            match ctx.op(*op) {
                Some(o) => {
                    let label = match o.action {
                        OpAction::Create => "created",
                        OpAction::Update => "updated",
                        OpAction::Delete => "deleted",
                    };
                    about(o.addr, label, format!("{} {label}", o.addr), words)
                }
                None => Description {
                    words,
                    ..Description::default()
                },
            }
        }
        EventBody::OperationFailed { op, object, error } => {
            let words = format!(
                "{}: {error}{}",
                op_name(op),
                if object.is_some() {
                    " (partial object kept)"
                } else {
                    ""
                }
            );
            match ctx.op(*op) {
                Some(o) => about(
                    o.addr,
                    "failed",
                    format!("{} of {} failed", o.action, o.addr),
                    words,
                ),
                None => Description {
                    words,
                    ..Description::default()
                },
            }
        }
        EventBody::PendingResolved { op, how, object } => {
            let words = format!(
                "{}: {how}{}",
                op_name(op),
                if object.is_some() {
                    " (object kept)"
                } else {
                    ""
                }
            );
            match ctx.op(*op) {
                Some(o) => about(
                    o.addr,
                    "resolved",
                    format!(
                        "pending {} of {} (operation {op}, run {}) resolved: {how}{}",
                        o.action,
                        o.addr,
                        o.run,
                        if object.is_some() { "" } else { " (no object)" }
                    ),
                    words,
                ),
                None => Description {
                    words,
                    ..Description::default()
                },
            }
        }
        EventBody::DataRead { addr, .. } => {
            let text = if ctx.deferred(e.run, addr) {
                format!("{addr} read during apply (deferred by the plan)")
            } else {
                format!("{addr} read")
            };
            about(addr, "read", text, addr.to_string())
        }
        EventBody::DataDropped { addr } => about(
            addr,
            "dropped",
            format!("{addr} dropped from state"),
            addr.to_string(),
        ),
        EventBody::OutputsSet { outputs } => {
            let names: Vec<&str> = outputs.keys().map(String::as_str).collect();
            record(
                format!("{} root output(s) set", outputs.len()),
                if names.is_empty() {
                    "no outputs".to_string()
                } else {
                    names.join(", ")
                },
            )
        }
        EventBody::ResourceForgotten { addr } => about(
            addr,
            "forgotten",
            format!("{addr} removed from state (state rm)"),
            addr.to_string(),
        ),
        EventBody::ResourceMoved { from, to } => Description {
            from: Some(from.to_string()),
            ..about(
                to,
                "moved",
                format!("{from} moved to {to}"),
                format!("{from} -> {to}"),
            )
        },
        EventBody::ResourceRehomed { addr, provider } => about(
            addr,
            "rehomed",
            format!("{addr} now managed through {}", provider.addr),
            format!("{addr} now via {} ({})", provider.addr, provider.id),
        ),
        EventBody::DependenciesUpdated { addr, deps } => about(
            addr,
            "dependencies",
            format!("{addr} now depends on {}", deps_text(deps)),
            format!(
                "{addr} depends on [{}]",
                deps.iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        ),
        EventBody::ResourceTainted { addr } => about(
            addr,
            "tainted",
            format!("{addr} marked tainted (taint): the next plan replaces it"),
            addr.to_string(),
        ),
        EventBody::ResourceUntainted { addr } => about(
            addr,
            "untainted",
            format!("{addr} no longer tainted (untaint)"),
            addr.to_string(),
        ),
        EventBody::ProviderReplaced { from, to, source } => record(
            format!("provider {from} replaced by {to} (state replace-provider {source})"),
            format!("{from} -> {to} ({source})"),
        ),
        EventBody::StateImported {
            source,
            providers,
            resources,
        } => record(
            format!("{} instance(s) imported from {source}", resources.len()),
            format!(
                "from {source}: {} provider instance(s), {} resource instance(s)",
                providers.len(),
                resources.len()
            ),
        ),
        EventBody::RunPlanned { plan } => {
            let [add, change, destroy, read] = plan_counts(&plan.changes);
            let counts = format!(
                "{add} to add, {change} to change, {destroy} to destroy, {read} read(s) deferred to apply"
            );
            Description {
                label: Some("planned"),
                ..record(
                    format!(
                        "planned{}: {counts}",
                        if plan.saved { " (a saved plan)" } else { "" }
                    ),
                    format!(
                        "{}{}: {counts}",
                        plan.mode,
                        if plan.saved { " (saved plan)" } else { "" }
                    ),
                )
            }
        }
        EventBody::RunDiagnostics { diagnostics } => {
            let errors = diagnostics
                .iter()
                .filter(|d| d.severity == cairn_state::event::Severity::Error)
                .count();
            let first = diagnostics
                .first()
                .map(|d| {
                    format!(
                        ": {}{}",
                        d.summary,
                        d.location
                            .as_ref()
                            .or(d.address.as_ref())
                            .map(|l| format!(" ({l})"))
                            .unwrap_or_default()
                    )
                })
                .unwrap_or_default();
            let warnings = diagnostics.len() - errors;
            Description {
                label: Some("diagnostics"),
                ..record(
                    format!("the run recorded {errors} error(s) and {warnings} warning(s)"),
                    format!("{errors} error(s), {warnings} warning(s){first}"),
                )
            }
        }
    }
}

/// Makes an event's serde JSON readable: stored values (`attrs`, `config`, `value`) become
/// plain JSON, and addresses become their strings (`sim_thing.a[0]`, `provider["sim"]`).
fn plain_values(j: J) -> J {
    match j {
        J::Object(m) if has_keys(&m, &["key", "resource"]) => {
            match serde_json::from_value::<ResourceInstanceAddr>(J::Object(m.clone())) {
                Ok(a) => J::String(a.to_string()),
                Err(_) => J::Object(m),
            }
        }
        J::Object(m) if has_keys(&m, &["alias", "module", "package"]) => {
            match serde_json::from_value::<ProviderAddr>(J::Object(m.clone())) {
                Ok(a) => J::String(a.to_string()),
                Err(_) => J::Object(m),
            }
        }
        J::Object(m) => J::Object(
            m.into_iter()
                .map(|(k, v)| {
                    let v = if matches!(k.as_str(), "attrs" | "config" | "value") {
                        match serde_json::from_value::<StoredValue>(v.clone()) {
                            Ok(s) => s.to_json(),
                            Err(_) => plain_values(v),
                        }
                    } else {
                        plain_values(v)
                    };
                    (k, v)
                })
                .collect(),
        ),
        J::Array(a) => J::Array(a.into_iter().map(plain_values).collect()),
        other => other,
    }
}

fn has_keys(m: &Map<String, J>, keys: &[&str]) -> bool {
    m.len() == keys.len() && keys.iter().all(|k| m.contains_key(*k))
}

/// One event as a JSON object (`cairn log -json`): `seq`, `version`, `time` (given, as the
/// caller formats times), `run`, `kind`, and the event's fields with plain values.
pub fn event_record_json(e: &Event, time: &str) -> J {
    let mut o = Map::new();
    o.insert("seq".into(), json!(e.seq));
    o.insert("version".into(), json!(e.version));
    o.insert("time".into(), json!(time));
    o.insert("run".into(), json!(e.run));
    o.insert("kind".into(), json!(e.body.kind()));
    if let Ok(J::Object(body)) = serde_json::to_value(&e.body) {
        // Externally tagged: {"Kind": {fields}}; unit-like variants have no fields.
        for (_, fields) in body {
            if let J::Object(f) = plain_values(fields) {
                o.extend(f);
            }
        }
    }
    J::Object(o)
}
