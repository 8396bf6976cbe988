//! The commands over the state log: `state list|show|rm|mv|pull|import-tfstate|check`,
//! `history`, `log` and `output`.
//!
//! Decisions:
//! - Read commands open the store read-only; the store's lock is exclusive, so while a writer
//!   runs they fail with the store's lock error, which names the holder (pid, command, since).
//! - A state directory that does not exist yet reads as an empty state: `state list` prints
//!   nothing and `output` warns that there are no outputs, as Terraform does before the first
//!   apply.
//! - Reads open the state through `engine::api::StateRead`; edits (`rm`, `mv`,
//!   `import-tfstate`) are the engine's `api::state_edit` (`engine/edit.rs`):
//!   runs of their own, so `history` shows them and nothing is ever rewritten; this module
//!   parses their arguments and prints what they did. Terraform state in and out
//!   (`import-tfstate`, `pull`) is `engine/terraform_state.rs`.
//! - `history -json` and `log -json` write one JSON object per line (streams a tool can read
//!   incrementally); stored values appear as plain JSON, as in `state pull`.

use super::args::{
    HistoryArgs, LogArgs, OutputArgs, StateCommand, StateImportArgs, StateMvArgs, StateRmArgs,
};
use super::output::{rfc3339_seconds, Exit};
use super::state_edit::edit;
use super::Context;
use crate::addr::{ProviderAddr, ResourceInstanceAddr, Target};
use crate::diag::{Diagnostic, Diagnostics, SourceMap};
use crate::engine::api::history::{self, EventContext, OpRef};
use crate::engine::api::state_read;
use crate::engine::api::StateEdit;
use crate::value::{format_hcl, Type, Value};
use cairn_state::{Event, EventBody, OpAction, Snapshot};
use serde_json::{json, Map, Value as J};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::{Duration, UNIX_EPOCH};

fn capitalized(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_uppercase().chain(c).collect(),
        None => String::new(),
    }
}

/// The snapshot to read: now, or after event `at`.
fn read_snapshot(ctx: &Context, command: &str, at: Option<u64>) -> Result<Snapshot, Diagnostic> {
    let Some(store) = ctx.read_store(command)? else {
        return match at {
            Some(seq) if seq > 0 => Err(state_read::out_of_range(seq, 0)),
            _ => Ok(Snapshot::new()),
        };
    };
    match at {
        Some(seq) => store.snapshot_at(seq),
        None => {
            warn_pending(ctx, store.snapshot());
            // Moved, not copied: a copy held the whole state twice (100,000 instances: about
            // 100 MB more at the peak of `state list`).
            Ok(store.into_snapshot())
        }
    }
}

/// Says which operations a crashed run left without an outcome: the next `plan`, `apply` or
/// `refresh` resolves them, and until then the state may not show what exists.
pub(crate) fn warn_pending(ctx: &Context, snap: &Snapshot) {
    if snap.pending.is_empty() {
        return;
    }
    let mut detail =
        String::from("A run stopped before it recorded the outcome of these operations:\n");
    for p in snap.pending.values() {
        let _ = writeln!(
            detail,
            "- {} {} (event {}, run {})",
            p.action, p.addr, p.op, p.run
        );
    }
    detail.push_str(
        "The next `cairn plan`, `apply` or `refresh` asks the provider what happened and records it.",
    );
    let d = Diagnostic::warning(
        format!("{} interrupted operation(s) pending", snap.pending.len()),
        detail,
    );
    let (_, color) = ctx.colors(false);
    ctx.err(&super::output::render_diagnostics(
        &SourceMap::new(),
        &Diagnostics::from(d),
        color,
    ));
}

fn parse_target(s: &str) -> Result<Target, Diagnostic> {
    s.parse::<Target>().map_err(|e| {
        Diagnostic::error(
            "Invalid address",
            format!("{}. Addresses look like sim_thing.a, sim_thing.a[0], data.sim_lookup.x, module.m.sim_thing.a[\"k\"] or module.m.", capitalized(&e.to_string())),
        )
    })
}

/// Every instance address in a snapshot: managed then data, in address order.
fn all_addrs(s: &Snapshot) -> Vec<&ResourceInstanceAddr> {
    let mut v: Vec<_> = s.resources.keys().chain(s.data.keys()).collect();
    v.sort();
    v
}

pub(crate) fn state(ctx: &Context, cmd: StateCommand) -> Exit {
    let result = match cmd {
        StateCommand::List(a) => list(ctx, &a.addrs, a.at.at),
        StateCommand::Show(a) => show(ctx, &a.addr, a.at.at, &a.ui),
        StateCommand::Rm(a) => rm(ctx, &a),
        StateCommand::Mv(a) => mv(ctx, &a),
        StateCommand::Pull(a) => pull(ctx, a.at.at, a.decrypt),
        StateCommand::ImportTfstate(a) => import(ctx, &a),
        StateCommand::Check(_) => check(ctx),
        StateCommand::Verify(_) => verify(ctx),
        StateCommand::Recover(a) => recover(ctx, &a),
        StateCommand::Push(a) => Ok(super::state_replace_cmds::push(ctx, &a)),
        StateCommand::ReplaceProvider(a) => {
            Ok(super::state_replace_cmds::replace_provider(ctx, &a))
        }
    };
    result.unwrap_or_else(|d| ctx.fail(d, false))
}

/// What `state list ADDR…` may name: instances (a module, a resource, an instance) or a
/// provider instance.
enum ListFilter {
    Instances(Target),
    Provider(ProviderAddr),
}

impl ListFilter {
    fn parse(s: &str) -> Result<Self, Diagnostic> {
        if let Ok(p) = s.parse::<ProviderAddr>() {
            return Ok(ListFilter::Provider(p));
        }
        parse_target(s).map(ListFilter::Instances)
    }
    /// A provider instance is named by its address, or by a module that holds it.
    fn has_provider(&self, p: &ProviderAddr) -> bool {
        match self {
            ListFilter::Provider(q) => q == p,
            ListFilter::Instances(Target::Module(m)) => p.module.starts_with(&m.without_keys()),
            ListFilter::Instances(_) => false,
        }
    }
    fn has_instance(&self, a: &ResourceInstanceAddr) -> bool {
        matches!(self, ListFilter::Instances(t) if t.contains(a))
    }
}

/// `state list`: provider instances (they are resources of the state too), then resource and
/// data instances, each in address order.
fn list(ctx: &Context, filters: &[String], at: Option<u64>) -> Result<Exit, Diagnostic> {
    let filters = filters
        .iter()
        .map(|f| ListFilter::parse(f))
        .collect::<Result<Vec<_>, _>>()?;
    let snap = read_snapshot(ctx, "state list", at)?;
    let mut out = String::new();
    for addr in snap.providers.keys() {
        if filters.is_empty() || filters.iter().any(|f| f.has_provider(addr)) {
            let _ = writeln!(out, "{addr}");
        }
    }
    for addr in all_addrs(&snap) {
        if filters.is_empty() || filters.iter().any(|f| f.has_instance(addr)) {
            let _ = writeln!(out, "{addr}");
        }
    }
    ctx.out(&out);
    Ok(Exit::Ok)
}

/// `state show ADDR`: one resource or data instance, or one provider instance with the
/// configuration it was last applied with.
fn show(
    ctx: &Context,
    addr: &str,
    at: Option<u64>,
    ui: &super::args::UiArgs,
) -> Result<Exit, Diagnostic> {
    let no_color = ui.no_color;
    let provider = addr.parse::<ProviderAddr>().ok();
    let target: Option<ResourceInstanceAddr> = match &provider {
        Some(_) => None,
        None => Some(addr.parse().map_err(|e: crate::addr::AddrError| {
            Diagnostic::error(
                "Invalid address",
                format!(
                    "{}. `state show` takes one instance, like sim_thing.a, sim_thing.a[0] or provider[\"sim\"].east.",
                    capitalized(&e.to_string())
                ),
            )
        })?),
    };
    let snap = read_snapshot(ctx, "state show", at)?;
    // The same view as `cairn show`, of a state holding only this instance.
    let mut one = Snapshot::new();
    if let Some(p) = &provider {
        if let Some(inst) = snap.providers.get(p) {
            one.providers.insert(p.clone(), inst.clone());
        }
    }
    if let Some(target) = &target {
        if let Some(inst) = snap.resources.get(target) {
            one.resources.insert(target.clone(), inst.clone());
        } else if let Some(d) = snap.data.get(target) {
            one.data.insert(target.clone(), d.clone());
        }
    }
    if ui.json && (!one.resources.is_empty() || !one.data.is_empty()) {
        let view = ctx.state_view(&one);
        let text = serde_json::to_string(&instance_json(&one, &view.sources)).unwrap_or_default();
        ctx.out(&format!("{text}\n"));
        return Ok(Exit::Ok);
    }
    if ui.json {
        if let Some(p) = one.providers.values().next() {
            // A provider instance is Cairn's own: its address, id and configuration.
            let j = json!({
                "address": p.addr.to_string(),
                "id": p.id,
                "is_default": p.is_default,
                "config": p.config.to_json(),
            });
            ctx.out(&format!(
                "{}\n",
                serde_json::to_string(&j).unwrap_or_default()
            ));
            return Ok(Exit::Ok);
        }
    }
    if !one.resources.is_empty() || !one.data.is_empty() || !one.providers.is_empty() {
        let (color, _) = ctx.colors(no_color);
        let opts = crate::plan::render::RenderOptions {
            color,
            width: super::output::render_width(ctx.stdout_tty),
        };
        let view = ctx.state_view(&one);
        let text = crate::plan::render::render_state(&one, &opts, &view.shapes);
        ctx.out(&format!("{}\n", text.trim_end()));
        return Ok(Exit::Ok);
    }
    let what = if provider.is_some() {
        "provider instance"
    } else {
        "resource instance"
    };
    Err(Diagnostic::error(
        "No instance found for the given address",
        format!(
            "The state{} has no {what} {addr}. `cairn state list` shows the addresses it has.",
            at.map(|s| format!(" after event {s}")).unwrap_or_default()
        ),
    ))
}

/// `state show -json`: the one instance of `one` as `show -json` lists it among the state's
/// values (`address`, `mode`, `type`, `name`, `provider_name`, `values`, …); Terraform's
/// `state show` has no `-json`, and this is the object its `show -json` would give.
fn instance_json(one: &Snapshot, sources: &BTreeMap<String, String>) -> J {
    fn first_resource(module: &J) -> Option<J> {
        if let Some(r) = module["resources"].as_array().and_then(|rs| rs.first()) {
            return Some(r.clone());
        }
        module["child_modules"]
            .as_array()?
            .iter()
            .find_map(first_resource)
    }
    let state = crate::plan::json::state_json(one, sources);
    first_resource(&state["values"]["root_module"]).unwrap_or(J::Null)
}

fn rm(ctx: &Context, a: &StateRmArgs) -> Result<Exit, Diagnostic> {
    let targets = a
        .addrs
        .iter()
        .map(|s| parse_target(s))
        .collect::<Result<Vec<_>, _>>()?;
    let named = a.addrs.join(", ");
    let events = edit(
        ctx,
        "state rm",
        a.addrs.clone(),
        &a.lock,
        a.dry_run,
        StateEdit::Remove { targets, named },
    )?;
    let removed: Vec<&ResourceInstanceAddr> = events
        .iter()
        .filter_map(|e| match e {
            EventBody::ResourceForgotten { addr } => Some(addr),
            _ => None,
        })
        .collect();
    let mut out = String::new();
    if a.dry_run {
        // Terraform's words for what would happen; nothing was recorded.
        for addr in &removed {
            let _ = writeln!(out, "Would remove {addr}");
        }
        if removed.is_empty() {
            out.push_str("Would have removed nothing.\n");
        }
        ctx.out(&out);
        return Ok(Exit::Ok);
    }
    for addr in &removed {
        let _ = writeln!(out, "Removed {addr}");
    }
    let _ = writeln!(
        out,
        "Successfully removed {} resource instance(s).",
        removed.len()
    );
    ctx.out(&out);
    Ok(Exit::Ok)
}

fn mv(ctx: &Context, a: &StateMvArgs) -> Result<Exit, Diagnostic> {
    let from = parse_target(&a.from)?;
    let to = parse_target(&a.to)?;
    let events = edit(
        ctx,
        "state mv",
        vec![a.from.clone(), a.to.clone()],
        &a.lock,
        a.dry_run,
        StateEdit::Move { from, to },
    )?;
    let moved: Vec<(&ResourceInstanceAddr, &ResourceInstanceAddr)> = events
        .iter()
        .filter_map(|e| match e {
            EventBody::ResourceMoved { from, to } => Some((from, to)),
            _ => None,
        })
        .collect();
    let mut out = String::new();
    let verb = if a.dry_run { "Would move" } else { "Move" };
    for (s, d) in &moved {
        let _ = writeln!(out, "{verb} \"{s}\" to \"{d}\"");
    }
    if !a.dry_run {
        let _ = writeln!(out, "Successfully moved {} object(s).", moved.len());
    }
    ctx.out(&out);
    Ok(Exit::Ok)
}

/// With state encryption (and no `-decrypt`), the Terraform state is written sealed with
/// the state's primary method, in a JSON envelope that keeps only the lineage and serial
/// readable, as OpenTofu's encrypted state keeps them.
fn pull(ctx: &Context, at: Option<u64>, decrypt: bool) -> Result<Exit, Diagnostic> {
    let Some(store) = ctx.read_store("state pull")? else {
        return Err(state_read::not_found(&ctx.state_dir));
    };
    let lineage = store.lineage();
    let snap = match at {
        Some(seq) => store.snapshot_at(seq)?,
        None => store.into_snapshot(),
    };
    let doc = crate::engine::api::export_tfstate(&snap, &lineage);
    let text = serde_json::to_string_pretty(&doc).unwrap_or_default();
    let enc = crate::engine::api::encryption::state();
    let text = match enc {
        Some(e) if !decrypt && !e.writes_plaintext() => {
            use base64::Engine as _;
            let sealed = e.seal(text.as_bytes()).map_err(|m| {
                Diagnostic::error("State encryption", format!("Encrypting the state: {m}."))
            })?;
            let env = serde_json::json!({
                "lineage": lineage,
                "serial": snap.head,
                "encrypted_data": base64::engine::general_purpose::STANDARD.encode(sealed),
                "encryption_version": "cairn-1",
            });
            serde_json::to_string_pretty(&env).unwrap_or_default()
        }
        _ => text,
    };
    ctx.out(&format!("{text}\n"));
    Ok(Exit::Ok)
}

fn import(ctx: &Context, a: &StateImportArgs) -> Result<Exit, Diagnostic> {
    let text = std::fs::read_to_string(&a.file).map_err(|e| {
        Diagnostic::error(
            "Cannot read the Terraform state file",
            format!("Reading {}: {e}.", a.file.display()),
        )
    })?;
    let cwd = std::env::current_dir().unwrap_or_else(|_| ".".into());
    let env: BTreeMap<String, String> = std::env::vars().collect();
    let imported = crate::engine::api::read_tfstate(&text, &cwd, &env)?;
    let (np, nr) = imported.counts();
    edit(
        ctx,
        "state import-tfstate",
        vec![a.file.display().to_string()],
        &a.lock,
        false,
        StateEdit::ImportTfstate(Box::new(imported)),
    )?;
    ctx.out(&format!(
        "Imported {nr} resource instance(s) and {np} provider instance(s) from {}.\n",
        a.file.display()
    ));
    Ok(Exit::Ok)
}

fn check(ctx: &Context) -> Result<Exit, Diagnostic> {
    let Some(store) = ctx.read_store("state check")? else {
        ctx.out("No state yet: nothing to check.\n");
        return Ok(Exit::Ok);
    };
    let violations = store.check();
    if violations.is_empty() {
        let s = store.snapshot();
        ctx.out(&format!(
            "The state is consistent: {} events, {} resource instance(s), {} data result(s), {} provider instance(s).\n",
            s.head,
            s.resources.len(),
            s.data.len(),
            s.providers.len()
        ));
        return Ok(Exit::Ok);
    }
    let mut detail = String::new();
    for v in &violations {
        let _ = writeln!(detail, "- {v}");
    }
    detail.push_str(
        "\nThe invariants are numbered in the state crate's documentation. Nothing was changed.",
    );
    Err(Diagnostic::error(
        format!("The state breaks {} invariant(s)", violations.len()),
        detail,
    ))
}

fn verify(ctx: &Context) -> Result<Exit, Diagnostic> {
    let Some(store) = ctx.read_store("state verify")? else {
        ctx.out("No state yet: nothing to verify.\n");
        return Ok(Exit::Ok);
    };
    let v = store.verify()?;
    let head = match v.head {
        Some(h) => format!("the head kept beside it says {h}"),
        None => "no head kept yet (written at the next commit)".into(),
    };
    ctx.out(&format!(
        "The state log is intact: {} events checked ({} of them chained, last chain hash {}), \
         {head}.\n",
        v.events, v.chained, v.hash
    ));
    Ok(Exit::Ok)
}

fn recover(ctx: &Context, a: &super::args::StateRecoverArgs) -> Result<Exit, Diagnostic> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let r = crate::engine::api::state_read::recover(&ctx.state_dir, a.lock_timeout, &args)?;
    let mut out = format!(
        "Recovered the state: {}.\nThe log goes on from event {} (of {}); a copy of the \
         damaged store is in {}.\n",
        r.damage, r.good, r.last, r.backup
    );
    if !r.runs.is_empty() {
        let _ = writeln!(out, "Runs whose history was lost: {}.", r.runs.join(", "));
    }
    if r.objects.is_empty() {
        let _ = writeln!(
            out,
            "Which objects' history was lost cannot be read from the damaged store: compare \
             `cairn state list` with your infrastructure and import what is missing \
             (`cairn import`)."
        );
    } else {
        let _ = writeln!(out, "Objects whose history was lost (import them again):");
        for o in &r.objects {
            let _ = writeln!(out, "  {o}");
        }
    }
    ctx.out(&out);
    Ok(Exit::Ok)
}

pub(crate) fn time_of(ms: u64) -> String {
    rfc3339_seconds(UNIX_EPOCH + Duration::from_millis(ms))
}

/// A run's duration: tenths below ten seconds, then Terraform's `1m5s` form.
pub(crate) fn fmt_run_duration(ms: u64) -> String {
    if ms < 10_000 {
        format!("{}.{}s", ms / 1000, ms % 1000 / 100)
    } else {
        super::progress::fmt_elapsed(Duration::from_millis(ms))
    }
}

pub(crate) fn history(ctx: &Context, a: &HistoryArgs) -> Exit {
    let snap = match read_snapshot(ctx, "history", None) {
        Ok(s) => s,
        Err(d) => return ctx.fail(d, a.ui.no_color),
    };
    // Plan-only runs (`cairn plan`'s lightweight records beside the log) are listed among
    // the runs, by when they started.
    let (plans, warnings) = crate::engine::api::plan_history::list(&ctx.state_dir);
    for w in warnings {
        ctx.err(&format!("Warning: {w}\n"));
    }
    enum Row<'a> {
        Run(&'a cairn_state::RunRecord),
        Plan(&'a cairn_state::plan_runs::PlanRun),
    }
    // Runs keep their order; each plan goes before the first run that started after it.
    let mut rows: Vec<Row> = Vec::with_capacity(snap.runs.len() + plans.len());
    let mut pending = plans.iter().peekable();
    for r in &snap.runs {
        while let Some(p) = pending.next_if(|p| p.started_ms < r.started_ms) {
            rows.push(Row::Plan(p));
        }
        rows.push(Row::Run(r));
    }
    rows.extend(pending.map(Row::Plan));
    let outcome = history::run_outcome;
    let sensitive = sensitive_vars_here();
    if a.ui.json {
        let mut out = String::new();
        for row in &rows {
            let j = match row {
                Row::Run(r) => json!({
                    "kind": "run",
                    "id": r.id,
                    "command": r.command,
                    "args": crate::config::mask_var_args(&r.args, &sensitive),
                    "user": r.user,
                    "pid": r.pid,
                    "host": r.context.host,
                    "git_commit": r.context.git_commit,
                    "git_branch": r.context.git_branch,
                    "ci_job": r.context.ci_job,
                    "started": time_of(r.started_ms),
                    "finished": r.finished_ms.map(time_of),
                    "duration_ms": r.finished_ms.map(|f| f.saturating_sub(r.started_ms)),
                    "outcome": outcome(r),
                    "changes": {"added": r.summary.added, "changed": r.summary.changed,
                                "destroyed": r.summary.destroyed, "read": r.summary.read,
                                "imported": r.summary.imported, "errors": r.summary.errors,
                                "moved": r.moved, "forgotten": r.forgotten},
                    "last_seq": r.last_seq,
                }),
                Row::Plan(p) => json!({
                    "kind": "plan",
                    "id": null,
                    "plan_id": p.id,
                    "command": "plan",
                    "args": crate::config::mask_var_args(&p.args, &sensitive),
                    "user": p.user,
                    "pid": p.pid,
                    "host": p.context.host,
                    "git_commit": p.context.git_commit,
                    "git_branch": p.context.git_branch,
                    "ci_job": p.context.ci_job,
                    "started": time_of(p.started_ms),
                    "finished": time_of(p.finished_ms),
                    "duration_ms": p.finished_ms.saturating_sub(p.started_ms),
                    "outcome": p.outcome,
                    "mode": p.mode,
                    "planned": {"add": p.add, "change": p.change, "destroy": p.destroy,
                                "read": p.read, "import": p.import, "forget": p.forget, "moved": p.moved,
                                "errors": p.errors},
                    "addresses": p.changes.iter().map(|(action, addr)| json!({"action": action, "addr": addr})).collect::<Vec<_>>(),
                    "addresses_total": p.changes_total,
                    "base_seq": p.base_seq,
                    "saved_to": p.saved_to,
                }),
            };
            let _ = writeln!(out, "{j}");
        }
        ctx.out(&out);
        return Exit::Ok;
    }
    if rows.is_empty() {
        ctx.out("No runs yet.\n");
        return Exit::Ok;
    }
    let rows: Vec<[String; 7]> = rows
        .iter()
        .map(|row| match row {
            Row::Run(r) => [
                r.id.to_string(),
                time_of(r.started_ms),
                r.finished_ms
                    .map(|f| fmt_run_duration(f.saturating_sub(r.started_ms)))
                    .unwrap_or_else(|| "-".into()),
                outcome(r),
                r.command.clone(),
                history::run_changes(r),
                history::context_text(&r.context),
            ],
            // A plan is no run of the log: no number; its counts are what it proposed.
            Row::Plan(p) => [
                "-".into(),
                time_of(p.started_ms),
                fmt_run_duration(p.finished_ms.saturating_sub(p.started_ms)),
                p.outcome.clone(),
                match &p.saved_to {
                    Some(f) => format!("plan -out={f}"),
                    None => "plan".into(),
                },
                crate::engine::api::plan_history::changes_text(p),
                history::context_text(&p.context),
            ],
        })
        .collect();
    ctx.out(&table(
        [
            "RUN", "STARTED", "DURATION", "OUTCOME", "COMMAND", "CHANGES", "WHERE",
        ],
        &rows,
    ));
    Exit::Ok
}

/// A left-aligned table with two spaces between columns; the last column is not padded.
pub(crate) fn table<const N: usize>(head: [&str; N], rows: &[[String; N]]) -> String {
    let mut w = head.map(str::len);
    for r in rows {
        for (i, c) in r.iter().enumerate() {
            w[i] = w[i].max(c.chars().count());
        }
    }
    let mut out = String::new();
    let line = |cells: Vec<&str>, out: &mut String| {
        let mut l = String::new();
        for (i, c) in cells.iter().enumerate() {
            if i + 1 == N {
                l.push_str(c);
            } else {
                let _ = write!(l, "{c:<width$}  ", width = w[i]);
            }
        }
        out.push_str(l.trim_end());
        out.push('\n');
    };
    line(head.to_vec(), &mut out);
    for r in rows {
        line(r.iter().map(String::as_str).collect(), &mut out);
    }
    out
}

/// The sensitive variables of the configuration in the working directory (none when it does
/// not load): runs recorded before Cairn masked their values at write time show them masked.
fn sensitive_vars_here() -> std::collections::BTreeSet<String> {
    match super::config_cmds::load_config() {
        (Some(c), _) => c.sensitive_variables(),
        (None, _) => Default::default(),
    }
}

/// `e` with a recorded command line's sensitive `-var` values masked.
fn mask_run_started<'a>(
    e: &'a Event,
    sensitive: &std::collections::BTreeSet<String>,
) -> std::borrow::Cow<'a, Event> {
    match &e.body {
        EventBody::RunStarted { args, .. } if !sensitive.is_empty() => {
            let mut e = e.clone();
            if let EventBody::RunStarted { args: a, .. } = &mut e.body {
                *a = crate::config::mask_var_args(args, sensitive);
            }
            std::borrow::Cow::Owned(e)
        }
        _ => std::borrow::Cow::Borrowed(e),
    }
}

/// The operations `log` has read so far (for the outcome events that name them).
#[derive(Default)]
struct Ops(BTreeMap<u64, (ResourceInstanceAddr, OpAction, u64)>);

impl EventContext for Ops {
    fn op(&self, op: u64) -> Option<OpRef<'_>> {
        self.0.get(&op).map(|(addr, action, run)| OpRef {
            addr,
            action: *action,
            run: *run,
        })
    }
}

/// One event in a line of `cairn log`: seq, time, run, kind and its words
/// (`engine::api::history`).
fn event_text(e: &Event, ops: &Ops) -> String {
    let what = history::describe(e, ops).words;
    format!(
        "{:>5}  {}  run {:<4} {:<18} {what}",
        e.seq,
        time_of(e.time_ms),
        e.run,
        e.body.kind()
    )
}

pub(crate) fn log(ctx: &Context, a: &LogArgs) -> Exit {
    let store = match ctx.read_store("log") {
        Ok(Some(s)) => s,
        Ok(None) => {
            if !a.ui.json {
                ctx.out("The state log is empty.\n");
            }
            return Exit::Ok;
        }
        Err(d) => return ctx.fail(d, a.ui.no_color),
    };
    let head = store.head();
    if a.from > head.max(1) {
        return ctx.fail(state_read::out_of_range(a.from, head), a.ui.no_color);
    }
    // Operation names need the `OperationStarted` events, which may precede `-from`.
    let events = match store.events(1) {
        Ok(e) => e,
        Err(d) => return ctx.fail(d, a.ui.no_color),
    };
    let mut ops = Ops::default();
    let mut out = String::new();
    let sensitive = sensitive_vars_here();
    for e in &events {
        let e = &mask_run_started(e, &sensitive);
        if let EventBody::OperationStarted { addr, action, .. } = &e.body {
            ops.0.insert(e.seq, (addr.clone(), *action, e.run));
        }
        if e.seq < a.from {
            continue;
        }
        if a.ui.json {
            let _ = writeln!(
                out,
                "{}",
                history::event_record_json(e, &time_of(e.time_ms))
            );
        } else {
            let _ = writeln!(out, "{}", event_text(e, &ops));
        }
    }
    ctx.out(&out);
    Exit::Ok
}

pub(crate) fn output(ctx: &Context, a: &OutputArgs) -> Exit {
    match output_inner(ctx, a) {
        Ok(e) => e,
        Err(d) => ctx.fail(d, a.no_color),
    }
}

fn output_inner(ctx: &Context, a: &OutputArgs) -> Result<Exit, Diagnostic> {
    if a.json && a.raw {
        return Err(Diagnostic::error(
            "Invalid output format",
            "The -raw and -json options are mutually exclusive.",
        ));
    }
    let snap = read_snapshot(ctx, "output", None)?;
    let values: BTreeMap<&String, (Value, bool)> = snap
        .outputs
        .iter()
        .map(|(k, o)| {
            let (v, marked) = Value::from_stored(&o.value).deep_unmark();
            (k, (v, o.sensitive || marked))
        })
        .collect();
    let Some(name) = &a.name else {
        if a.raw {
            return Err(Diagnostic::error(
                "Output name required",
                "The -raw option prints one output: run `cairn output -raw NAME`.",
            ));
        }
        if a.json {
            let m: Map<String, J> = values
                .iter()
                .map(|(k, (v, s))| {
                    (
                        (*k).clone(),
                        json!({"sensitive": s, "type": crate::plan::json::type_json(&v.type_of()), "value": v.to_json()}),
                    )
                })
                .collect();
            let text = serde_json::to_string_pretty(&J::Object(m)).unwrap_or_default();
            ctx.out(&format!("{text}\n"));
            return Ok(Exit::Ok);
        }
        if values.is_empty() {
            let d = Diagnostic::warning(
                "No outputs found",
                "The state has no outputs. Declare an `output` block in the configuration and run `cairn apply` (or `cairn apply -read-only`) to record it.",
            );
            let (_, color) = ctx.colors(a.no_color);
            ctx.err(&super::output::render_diagnostics(
                &SourceMap::new(),
                &Diagnostics::from(d),
                color,
            ));
            return Ok(Exit::Ok);
        }
        let mut out = String::new();
        for (k, (v, sensitive)) in &values {
            if *sensitive {
                let _ = writeln!(out, "{k} = <sensitive>");
            } else {
                let _ = writeln!(out, "{k} = {}", format_hcl(v));
            }
        }
        ctx.out(&out);
        return Ok(Exit::Ok);
    };
    let Some((v, _)) = values.get(name) else {
        return Err(Diagnostic::error(
            format!("Output \"{name}\" not found"),
            "The output variable requested could not be found in the state. Declare it in the configuration and run `cairn apply` (or `cairn apply -read-only`) to record it.",
        ));
    };
    if a.json {
        ctx.out(&format!("{}\n", v.to_json()));
    } else if a.raw {
        let text = match v {
            Value::String(s) => s.clone(),
            Value::Number(n) => n.to_string(),
            Value::Bool(b) => b.to_string(),
            Value::Null(_) => {
                return Err(Diagnostic::error(
                    "Unsupported value for raw output",
                    format!("The -raw option only supports strings, numbers, and boolean values, but output value \"{name}\" is null."),
                ))
            }
            other => {
                return Err(Diagnostic::error(
                    "Unsupported value for raw output",
                    format!(
                        "The -raw option only supports strings, numbers, and boolean values, but output value \"{name}\" is {}.\n\nUse the -json option for machine-readable representations of output values that have complex types.",
                        type_phrase(&other.type_of())
                    ),
                ))
            }
        };
        ctx.out(&text);
    } else {
        ctx.out(&format!("{}\n", format_hcl(v)));
    }
    Ok(Exit::Ok)
}

fn type_phrase(t: &Type) -> String {
    let s = t.to_string();
    let article = if s.starts_with(['a', 'e', 'i', 'o', 'u']) {
        "an"
    } else {
        "a"
    };
    format!("{article} {}", s.split('(').next().unwrap_or(&s))
}
