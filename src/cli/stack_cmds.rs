//! `cairn stack`: Terraform Stacks' configuration (`*.tfcomponent.hcl`, `*.tfdeploy.hcl`)
//! in the working directory. `stack validate` loads and checks it (`config::stack`) and
//! prints its diagnostics as `validate` does, or the components in dependency order.
//! `stack init` installs the components' modules and providers (`stack_providers`) and
//! records the backend; `stack plan`,
//! `apply` and `destroy` run `engine::stack` and print, per deployment and component
//! instance, its plan (or why it is deferred), then the totals; `apply` goes round by round
//! until nothing is deferred; `show` and `output` read the component instances' states.

use super::args::{
    StackApplyArgs, StackCommand, StackInitArgs, StackOutputArgs, StackPlanArgs, StackRunArgs,
    StackShowArgs, ValidateArgs,
};
use super::config_cmds::green_bold;
use super::lifecycle::EngineRuntime;
use super::output::{render_width, Exit};
use super::prompt::Question;
use super::stack_history::{self, RunLog};
use super::Context;
use crate::diag::{Diagnostic, SourceMap};
use crate::engine::api::backend::{self, BackendRequest};
use crate::engine::stack::{self as engine_stack, fleet, InstanceResult, Outcome, StackRequest};
use crate::plan::render::{render_plan, RenderOptions};
use crate::plan::Action;
use serde_json::json;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;

pub(crate) fn stack(ctx: &Context, c: StackCommand) -> Exit {
    match c {
        StackCommand::Validate(a) => validate(ctx, &a),
        StackCommand::Init(a) => init(ctx, &a),
        StackCommand::Plan(a) => plan(ctx, &a),
        StackCommand::Apply(a) => apply(ctx, &a, false),
        StackCommand::Destroy(a) => apply(ctx, &a, true),
        StackCommand::Show(a) => show(ctx, &a),
        StackCommand::Output(a) => output(ctx, &a),
        StackCommand::History(a) => super::stack_history::stack_history(ctx, &a),
    }
}

fn cwd() -> PathBuf {
    std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."))
}

fn validate(ctx: &Context, a: &ValidateArgs) -> Exit {
    let dir = cwd();
    let (stack, diags) = crate::config::stack::load_stack(&dir, &std::env::vars().collect());
    let valid = !diags.has_errors();
    if a.ui.json {
        let doc = json!({
            "format_version": "1.0",
            "valid": valid,
            "error_count": diags.error_count(),
            "warning_count": diags.warning_count(),
            "diagnostics": diags.iter().map(|d| stack.sources.to_json(d)).collect::<Vec<_>>(),
            "components": stack.components.iter().map(|(n, deps)| json!({
                "name": n,
                "depends_on": deps.iter().collect::<Vec<_>>(),
            })).collect::<Vec<_>>(),
            "deployments": stack.deployments,
        });
        let text = serde_json::to_string_pretty(&doc).unwrap_or_default();
        ctx.out(&format!("{text}\n"));
    } else {
        ctx.report(&stack.sources, &diags, a.ui.no_color);
        if valid {
            let (color, _) = ctx.colors(a.ui.no_color);
            ctx.out(&format!(
                "{} The stack configuration is valid: {} component(s), {} deployment(s).\n",
                green_bold("Success!", color),
                stack.components.len(),
                stack.deployments.len()
            ));
        }
    }
    if valid {
        Exit::Ok
    } else {
        Exit::Error
    }
}

/// The state root as an absolute path (every component state is a workspace under it).
fn state_root(ctx: &Context) -> PathBuf {
    if ctx.state_root.is_absolute() {
        ctx.state_root.clone()
    } else {
        cwd().join(&ctx.state_root)
    }
}

/// `cairn stack init`: checks the configuration, installs each component's (and removed
/// block's) module as a module call of the stack (`component.NAME`) and each module's own
/// remote calls, and records the backend of the stack's states.
fn init(ctx: &Context, a: &StackInitArgs) -> Exit {
    let dir = cwd();
    let env: BTreeMap<String, String> = std::env::vars().collect();
    let (cfg, diags) = crate::config::stack::load_stack(&dir, &env);
    if ctx.report(&cfg.sources, &diags, a.ui.no_color) {
        ctx.err("The stack could not be initialized: fix the errors above and run `cairn stack init` again.\n");
        return Exit::Error;
    }
    let cli = match super::config_cmds::cli_config() {
        Ok(c) => c,
        Err(d) => return ctx.fail(d, a.ui.no_color),
    };
    let mut calls: Vec<(String, String, Option<String>)> = cfg
        .model
        .components
        .iter()
        .map(|(n, c)| {
            (
                format!("component.{n}"),
                c.source.clone(),
                c.version.clone(),
            )
        })
        .collect();
    for r in &cfg.model.removed {
        let key = format!("component.{}", r.name);
        if !calls.iter().any(|(k, _, _)| *k == key) {
            calls.push((key, r.source.clone(), r.version.clone()));
        }
    }
    let mut out = String::new();
    let _ = writeln!(out, "Initializing the stack in {}", dir.display());
    let got = crate::provider::install::modules::install_with(
        &dir,
        &cli,
        a.upgrade,
        &crate::config::EarlyInputs::in_dir(&dir),
        &calls,
    );
    if ctx.report(&SourceMap::new(), &got.diags, a.ui.no_color) {
        return Exit::Error;
    }
    let _ = writeln!(out, "- Components:");
    let mut modules = Vec::new();
    for (key, source, _) in &calls {
        let module = if crate::addr::module_source::is_local(source) {
            Some(dir.join(source))
        } else {
            crate::provider::install::modules::installed_dir(&dir, key)
        };
        let Some(module) = module else { continue };
        let shown = module
            .strip_prefix(&dir)
            .map(|p| p.display().to_string())
            .unwrap_or_else(|_| module.display().to_string());
        let _ = writeln!(out, "  - {key}: {source} in {shown}");
        // The module's own remote calls, as `init` installs a root module's.
        let inner = crate::provider::install::modules::install(
            &module,
            &cli,
            a.upgrade,
            &crate::config::EarlyInputs::in_dir(&module),
        );
        if ctx.report(&SourceMap::new(), &inner.diags, a.ui.no_color) {
            return Exit::Error;
        }
        for l in inner.lines {
            let _ = writeln!(out, "    {l}");
        }
        modules.push((key.clone(), module));
    }
    // The providers, as `init` installs a root module's: beside the stack's files.
    let Some(lines) =
        super::stack_providers::install(ctx, &dir, &cfg, &modules, &cli, a.upgrade, a.ui.no_color)
    else {
        ctx.out(&out);
        ctx.err("The stack could not be initialized: fix the errors above and run `cairn stack init` again.\n");
        return Exit::Error;
    };
    for l in lines {
        let _ = writeln!(out, "{l}");
    }
    let root = state_root(ctx);
    let req = BackendRequest {
        state_root: &root,
        backend_config: &a.backend_config,
        migrate_state: a.migrate_state,
        reconfigure: a.reconfigure,
        lock_timeout: std::time::Duration::ZERO,
    };
    if let Err(e) = std::fs::create_dir_all(&root) {
        return ctx.fail(
            Diagnostic::error(
                "Cannot create the state directory",
                format!("{}: {e}.", root.display()),
            ),
            a.ui.no_color,
        );
    }
    match backend::configure_named_backend(&a.backend, &req) {
        Ok(Some(change)) => {
            let _ = writeln!(out, "- Backend: {} (recorded).", a.backend);
            for m in change.migrations {
                let _ = writeln!(
                    out,
                    "- State of {}: copied {} event(s) from {} to {}.",
                    m.workspace, m.events, m.from, m.to
                );
            }
        }
        Ok(None) => {
            let _ = writeln!(out, "- Backend: {} (unchanged).", a.backend);
        }
        Err(d) => {
            ctx.out(&out);
            return ctx.fail(d, a.ui.no_color);
        }
    }
    let (color, _) = ctx.colors(a.ui.no_color);
    let _ = writeln!(
        out,
        "\n{}\n\nRun `cairn stack plan` to see what Cairn would change.",
        green_bold("The stack has been successfully initialized!", color)
    );
    ctx.out(&out);
    Exit::Ok
}

fn request(ctx: &Context, command: &str, run: &StackRunArgs) -> Result<StackRequest, Diagnostic> {
    if run.parallelism == 0 {
        return Err(Diagnostic::error(
            "Invalid -parallelism",
            "-parallelism must be at least 1.",
        ));
    }
    let mut base = super::engine_options::base_options(ctx, command, Vec::new());
    base.lock_timeout = run.lock_timeout;
    base.workspace = None;
    // The components' plugin providers are those `stack init` installed beside the stack.
    base.plugin_dir = Some(cwd());
    Ok(StackRequest {
        dir: cwd(),
        state_root: state_root(ctx),
        base,
        deployment: run.deployment.clone(),
        parallelism: run.parallelism,
    })
}

/// Totals over a round's instances.
#[derive(Default)]
struct Totals {
    add: usize,
    change: usize,
    destroy: usize,
    changed: usize,
    unchanged: usize,
    deferred: usize,
    failed: usize,
}

fn plan_of(r: &InstanceResult) -> Option<&crate::plan::Plan> {
    match &r.outcome {
        Outcome::Planned(p) => Some(p),
        Outcome::Applied(a) => a.plan.as_ref(),
        _ => None,
    }
}

/// Prints a round's plans, per deployment and component instance; returns the totals.
fn present_round(
    ctx: &Context,
    stack: &engine_stack::Stack,
    round: &engine_stack::Round,
    no_color: bool,
) -> Totals {
    let (color, _) = ctx.colors(no_color);
    let opts = RenderOptions {
        color,
        width: render_width(ctx.stdout_tty),
    };
    let mut t = Totals::default();
    ctx.report(&stack.sources, &round.diags, no_color);
    let mut out = String::new();
    let mut current: Option<&str> = None;
    for r in &round.results {
        if current != Some(r.id.deployment.as_str()) {
            current = Some(r.id.deployment.as_str());
            let title = format!("Deployment {:?}", r.id.deployment);
            let _ = writeln!(
                out,
                "\n{}\n{}",
                bold(&title, color),
                "─".repeat(title.len())
            );
        }
        let name = r.id.address();
        let removed = if r.removed { " (removed)" } else { "" };
        match &r.outcome {
            Outcome::Deferred(why) => {
                t.deferred += 1;
                let _ = writeln!(out, "\n{name}: deferred: {why}.");
            }
            Outcome::Failed => {
                t.failed += 1;
                let _ = writeln!(out, "\n{name}{removed}: failed (see the errors above).");
            }
            _ => {
                let Some(p) = plan_of(r) else { continue };
                let (add, change, destroy) = p.counts();
                t.add += add;
                t.change += change;
                t.destroy += destroy;
                if p.has_changes() {
                    t.changed += 1;
                    let _ = writeln!(
                        out,
                        "\n{name}{removed}: {add} to add, {change} to change, {destroy} to destroy."
                    );
                    let text = render_plan(p, &opts);
                    for l in text.trim_end().lines() {
                        match l.trim_end() {
                            "" => out.push('\n'),
                            l => {
                                let _ = writeln!(out, "  {l}");
                            }
                        }
                    }
                } else {
                    t.unchanged += 1;
                    let _ = writeln!(out, "\n{name}{removed}: no changes.");
                }
            }
        }
        if !r.diags.is_empty() {
            let empty = SourceMap::new();
            let map = r.config.as_ref().map(|c| &c.sources).unwrap_or(&empty);
            ctx.out(&out);
            out.clear();
            ctx.report(map, &r.diags, no_color);
        }
    }
    ctx.out(&out);
    t
}

fn bold(s: &str, color: bool) -> String {
    if color {
        format!("\x1b[1m{s}\x1b[0m")
    } else {
        s.to_string()
    }
}

fn totals_line(t: &Totals, what: &str) -> String {
    let mut line = format!(
        "{what}: {} to add, {} to change, {} to destroy in {} component instance{}",
        t.add,
        t.change,
        t.destroy,
        t.changed,
        if t.changed == 1 { "" } else { "s" }
    );
    let _ = write!(line, "; {} unchanged", t.unchanged);
    if t.deferred > 0 {
        let _ = write!(line, "; {} deferred", t.deferred);
    }
    if t.failed > 0 {
        let _ = write!(line, "; {} failed", t.failed);
    }
    line.push('.');
    line
}

/// A round as JSON: each instance's status, counts and changes.
fn round_json(round: &engine_stack::Round) -> serde_json::Value {
    let mut deployments: BTreeMap<String, Vec<serde_json::Value>> = BTreeMap::new();
    for r in &round.results {
        let mut o = json!({
            "address": r.id.address(),
            "component": r.id.component,
            "key": r.id.key,
            "removed": r.removed,
        });
        match &r.outcome {
            Outcome::Deferred(why) => {
                o["status"] = json!("deferred");
                o["reason"] = json!(why);
            }
            Outcome::Failed => {
                o["status"] = json!("failed");
                o["diagnostics"] = json!(r
                    .diags
                    .iter()
                    .map(|d| d.summary.clone())
                    .collect::<Vec<_>>());
            }
            _ => {
                if let Some(p) = plan_of(r) {
                    let (add, change, destroy) = p.counts();
                    o["status"] = json!(if p.has_changes() {
                        "planned"
                    } else {
                        "no_changes"
                    });
                    o["changes"] = json!({"add": add, "change": change, "destroy": destroy});
                    o["resource_changes"] = json!(p
                        .changes
                        .iter()
                        .filter(|c| c.action != Action::NoOp)
                        .map(|c| json!({"address": c.addr.to_string(), "action": c.action.json_actions()}))
                        .collect::<Vec<_>>());
                }
            }
        }
        deployments
            .entry(r.id.deployment.clone())
            .or_default()
            .push(o);
    }
    json!(deployments)
}

fn plan(ctx: &Context, a: &StackPlanArgs) -> Exit {
    let no_color = a.run.ui.no_color;
    let req = match request(ctx, "stack plan", &a.run) {
        Ok(r) => r,
        Err(d) => return ctx.fail(d, no_color),
    };
    let stack = match engine_stack::load(&req) {
        Ok(s) => s,
        Err((map, diags)) => {
            ctx.report(&map, &diags, no_color);
            // The failed run is in the stack's history with its errors.
            engine_stack::history::Recorder::failed_to_load(&req, "stack plan", &map, &diags);
            return Exit::Error;
        }
    };
    ctx.report(&stack.sources, &stack.warnings, no_color);
    let rt = match EngineRuntime::start(ctx, &req.base) {
        Ok(rt) => rt,
        Err(d) => return ctx.fail(d, no_color),
    };
    let log = RunLog::start(ctx, &req, "stack plan", no_color);
    let started = stack_history::now_ms();
    let round = match rt.run(engine_stack::plan_round(
        &stack, &req, false, a.destroy, None,
    )) {
        Ok(r) => r,
        Err(d) => {
            log.finish("failed", Some(d.summary.clone()));
            return ctx.fail(d, no_color);
        }
    };
    let mut failed = round.diags.has_errors()
        || round
            .results
            .iter()
            .any(|r| matches!(r.outcome, Outcome::Failed));
    log.plan_round(&req, started, &round.results);
    log.finish(if failed { "failed" } else { "success" }, None);
    let saved = match (&a.out, failed) {
        (Some(path), false) => match engine_stack::save_round(&round, path) {
            Ok(n) => Some((path, n)),
            Err(d) => {
                ctx.fail(d, no_color);
                failed = true;
                None
            }
        },
        _ => None,
    };
    let t = if a.run.ui.json {
        let mut t = Totals::default();
        for r in &round.results {
            match plan_of(r) {
                Some(p) => {
                    let (x, y, z) = p.counts();
                    t.add += x;
                    t.change += y;
                    t.destroy += z;
                    if p.has_changes() {
                        t.changed += 1;
                    } else {
                        t.unchanged += 1;
                    }
                }
                None if matches!(r.outcome, Outcome::Deferred(_)) => t.deferred += 1,
                None => t.failed += 1,
            }
        }
        let doc = json!({
            "format_version": "1.0",
            "deployments": round_json(&round),
            "totals": {"add": t.add, "change": t.change, "destroy": t.destroy,
                       "changed": t.changed, "unchanged": t.unchanged,
                       "deferred": t.deferred, "failed": t.failed},
            "diagnostics": round.diags.iter().map(|d| stack.sources.to_json(d)).collect::<Vec<_>>(),
        });
        ctx.out(&format!(
            "{}\n",
            serde_json::to_string_pretty(&doc).unwrap_or_default()
        ));
        t
    } else {
        let t = present_round(ctx, &stack, &round, no_color);
        ctx.out(&format!("\n{}\n", totals_line(&t, "Stack plan")));
        if t.deferred > 0 {
            ctx.out("Deferred component instances are planned by `cairn stack apply` once the components they wait for are applied.\n");
        }
        if let Some((path, n)) = saved {
            ctx.out(&format!(
                "\nSaved the plans of {n} component instance{} to {}. To apply them, run:\n  cairn stack apply {}\n",
                if n == 1 { "" } else { "s" },
                path.display(),
                path.display()
            ));
        }
        t
    };
    if failed {
        return Exit::Error;
    }
    let changes = t.changed > 0 || t.deferred > 0;
    if a.detailed_exitcode && changes {
        Exit::Changes
    } else {
        Exit::Ok
    }
}

fn apply(ctx: &Context, a: &StackApplyArgs, destroy: bool) -> Exit {
    let no_color = a.run.ui.no_color;
    let command = if destroy {
        "stack destroy"
    } else {
        "stack apply"
    };
    let req = match request(ctx, command, &a.run) {
        Ok(r) => r,
        Err(d) => return ctx.fail(d, no_color),
    };
    let stack = match engine_stack::load(&req) {
        Ok(s) => s,
        Err((map, diags)) => {
            ctx.report(&map, &diags, no_color);
            // The failed run is in the stack's history with its errors.
            let run = if a.runner {
                format!("{command} -runner")
            } else {
                command.to_string()
            };
            engine_stack::history::Recorder::failed_to_load(&req, &run, &map, &diags);
            return Exit::Error;
        }
    };
    ctx.report(&stack.sources, &stack.warnings, no_color);
    let rt = match EngineRuntime::start(ctx, &req.base) {
        Ok(rt) => rt,
        Err(d) => return ctx.fail(d, no_color),
    };
    let (color, _) = ctx.colors(no_color);
    if let Some(path) = &a.plan_file {
        if destroy {
            return ctx.fail(
                Diagnostic::error(
                    "Unexpected argument",
                    "stack destroy takes no plan file: save a destroy plan with `cairn stack plan -destroy -out=FILE` and apply it with `cairn stack apply FILE`.",
                ),
                no_color,
            );
        }
        return apply_saved(ctx, &rt, &stack, &req, path, no_color);
    }
    if a.runner {
        return run_as_runner(ctx, &rt, &stack, &req, a.auto_approve, destroy, no_color);
    }
    let mut applied = Totals::default();
    let mut rounds = 0;
    let stdin = std::io::stdin();
    let mut stdin = stdin.lock();
    let log = RunLog::start(ctx, &req, command, no_color);
    loop {
        rounds += 1;
        ctx.out(&format!("\n{}\n", bold(&format!("Round {rounds}"), color)));
        let started = stack_history::now_ms();
        // Each component run is named in the record as it begins (a kill leaves it linked).
        let link = log.link(rounds);
        let links: &dyn engine_stack::Observers = &link;
        let planning = engine_stack::plan_round(&stack, &req, true, destroy, Some(links));
        let mut round = match rt.run(planning) {
            Ok(r) => r,
            Err(d) => return abandoned(ctx, &log, &link, d, no_color),
        };
        let t = present_round(ctx, &stack, &round, no_color);
        let failed = round.diags.has_errors() || t.failed > 0;
        if failed {
            let planned = std::mem::take(&mut round.results);
            round.decline();
            log.round(rounds, &link, started, &planned, &[]);
            log.finish(
                "failed",
                Some(format!("Stopped in round {rounds}: errors.")),
            );
            ctx.err(&format!(
                "\n{command} stopped in round {rounds}: fix the errors above and run it again.\n"
            ));
            return Exit::Error;
        }
        if !round.has_pending() {
            let planned = std::mem::take(&mut round.results);
            round.decline();
            log.round(rounds, &link, started, &planned, &[]);
            if t.deferred > 0 {
                log.finish(
                    "failed",
                    Some(format!("Round {rounds} has nothing to apply, and {} component instance(s) are still deferred: the stack cannot converge.", t.deferred)),
                );
                return ctx.fail(
                    Diagnostic::error(
                        "The stack cannot converge",
                        format!(
                            "Round {rounds} has nothing to apply, and {} component instance(s) are still deferred: what they wait for is not known even after every upstream component is applied.",
                            t.deferred
                        ),
                    ),
                    no_color,
                );
            }
            break;
        }
        ctx.out(&format!(
            "\n{}\n",
            totals_line(&t, &format!("Round {rounds}"))
        ));
        let question = if destroy {
            Question::Destroy { objects: t.destroy }
        } else {
            Question::Apply
        };
        // Deployment groups' auto-approve rules: a deployment whose plans pass every check
        // of its group is applied without asking.
        let mut auto = std::collections::BTreeSet::new();
        if !a.auto_approve {
            for d in round.pending_deployments() {
                match engine_stack::auto_approval(&stack, &round, &d, rounds) {
                    engine_stack::AutoApproval::Approved { group } => {
                        ctx.out(&format!(
                            "Deployment {d:?}: auto-approved (every check of deployment_group.{group} passed).\n"
                        ));
                        auto.insert(d);
                    }
                    engine_stack::AutoApproval::Refused { group, reasons } => {
                        let mut text = format!(
                            "Deployment {d:?}: not auto-approved by deployment_group.{group}:\n"
                        );
                        for r in reasons {
                            let _ = writeln!(text, "  - {r}");
                        }
                        ctx.out(&text);
                    }
                    engine_stack::AutoApproval::Default => {}
                }
            }
        }
        let all_auto = !auto.is_empty() && round.pending_deployments().is_subset(&auto);
        let planned = std::mem::take(&mut round.results);
        let deferred = planned
            .iter()
            .filter(|r| matches!(r.outcome, Outcome::Deferred(_)))
            .count();
        let mut not_approved = None;
        if !all_auto {
            let answer = super::run_cmds::approve(
                ctx,
                question,
                command,
                a.auto_approve,
                true,
                &mut stdin,
                no_color,
            );
            if !matches!(answer, Ok(true)) {
                // Only the auto-approved deployments go ahead.
                let approved = round.split_off(&auto);
                let rest: Vec<String> = round.pending_deployments().into_iter().collect();
                round.decline();
                match answer {
                    Err(d) => {
                        ctx.fail(d, no_color);
                    }
                    _ => ctx.out(&format!("\n{command} cancelled.\n")),
                }
                if !approved.has_pending() {
                    log.round(rounds, &link, started, &planned, &[]);
                    log.finish(
                        "cancelled",
                        Some(format!("The plans of round {rounds} were not approved.")),
                    );
                    return Exit::Error;
                }
                ctx.out(&format!(
                    "Applying the auto-approved deployment{} only ({}).\n",
                    if auto.len() == 1 { "" } else { "s" },
                    auto.iter()
                        .map(|d| format!("{d:?}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
                not_approved = Some(rest);
                round = approved;
            }
        }
        let results = match rt.run(round.approve(req.parallelism)) {
            Ok(r) => r,
            Err(d) => return abandoned(ctx, &log, &link, d, no_color),
        };
        log.round(rounds, &link, started, &planned, &results);
        let errors = !report_applied(ctx, &results, &mut applied, no_color);
        if req.base.stop.load(std::sync::atomic::Ordering::SeqCst) {
            // Ctrl-C (or SIGTERM): the steps that ran are recorded; no new round starts.
            log.finish(
                "interrupted",
                Some(format!("Interrupted in round {rounds}.")),
            );
            ctx.err(&format!(
                "\n{command} interrupted in round {rounds}: what was applied is recorded; run it again to go on.\n"
            ));
            return Exit::Error;
        }
        if errors {
            log.finish(
                "failed",
                Some(format!("Stopped in round {rounds}: an apply failed.")),
            );
            ctx.err(&format!(
                "\n{command} stopped in round {rounds}: fix the errors above and run it again.\n"
            ));
            return Exit::Error;
        }
        if let Some(rest) = not_approved {
            log.finish(
                "cancelled",
                Some(format!(
                    "Stopped in round {rounds}: the plans of deployment{} {} were not approved.",
                    if rest.len() == 1 { "" } else { "s" },
                    rest.join(", ")
                )),
            );
            ctx.err(&format!(
                "\n{command} stopped in round {rounds}: the plans of deployment{} {} were not approved.\n",
                if rest.len() == 1 { "" } else { "s" },
                rest.iter().map(|d| format!("{d:?}")).collect::<Vec<_>>().join(", ")
            ));
            return Exit::Error;
        }
        if deferred == 0 {
            // One more round confirms convergence (every plan empty) unless nothing waited.
            if destroy {
                break;
            }
        }
        if rounds >= 32 {
            log.finish(
                "failed",
                Some("32 rounds applied changes and the stack still has changes to make.".into()),
            );
            return ctx.fail(
                Diagnostic::error(
                    "The stack did not converge",
                    "32 rounds applied changes and the stack still has changes to make.",
                ),
                no_color,
            );
        }
    }
    log.finish("success", None);
    ctx.out(&format!(
        "\n{} Resources: {} added, {} changed, {} destroyed, in {} round{}.\n",
        green_bold(
            if destroy {
                "Stack destroy complete!"
            } else {
                "Stack apply complete!"
            },
            color
        ),
        applied.add,
        applied.change,
        applied.destroy,
        rounds,
        if rounds == 1 { "" } else { "s" }
    ));
    if !destroy {
        print_outputs(ctx, &stack, &req, no_color);
    }
    Exit::Ok
}

/// `stack apply -runner`: this process is one runner of the stack's fleet (see
/// `engine::stack::fleet`); it prints what it claims and finishes as it goes, then how the
/// stack run ended and, when every item is done, the stack's outputs.
fn run_as_runner(
    ctx: &Context,
    rt: &EngineRuntime,
    stack: &engine_stack::Stack,
    req: &StackRequest,
    auto_approve: bool,
    destroy: bool,
    no_color: bool,
) -> Exit {
    let (color, _) = ctx.colors(no_color);
    let mut applied = Totals::default();
    let mut errors = false;
    // The fleet's shared run is one stack run in the history: each runner appends its part.
    let mut log: Option<RunLog> = None;
    let mut me = String::new();
    let mut claimed_at: BTreeMap<String, u64> = BTreeMap::new();
    let mut note = |e: fleet::FleetEvent| match e {
        fleet::FleetEvent::Joined {
            run_id,
            runner,
            started,
            abandoned,
            items,
            record,
        } => {
            log = Some(RunLog::fleet(ctx, req, record, &runner, started, no_color));
            me = runner.clone();
            if let Some(old) = abandoned {
                ctx.out(&format!(
                    "Stack run {old} had no runner left and another configuration: abandoned.\n"
                ));
            }
            ctx.out(&format!(
                "Runner {runner} {} stack run {run_id} ({items} work item{}).\n",
                if started { "started" } else { "joined" },
                if items == 1 { "" } else { "s" }
            ));
            if !auto_approve {
                ctx.out("Without -auto-approve, this runner applies only the plans its deployment groups' rules approve.\n");
            }
        }
        fleet::FleetEvent::Claimed { label, before } => {
            let now = stack_history::now_ms();
            claimed_at.insert(label.clone(), now);
            // Before the item's first component run: a runner that dies on it is named.
            if let Some(log) = &log {
                log.warn(log.rec().claimed(&me, &label, now));
            }
            if before.is_empty() {
                ctx.out(&format!("{label}: claimed.\n"));
            } else {
                ctx.out(&format!(
                    "{label}: claimed, taking over from runner {} (stopped before finishing it).\n",
                    before.join(", ")
                ));
            }
        }
        fleet::FleetEvent::Finished {
            label,
            results,
            status,
        } => {
            if let Some(log) = &log {
                let since = claimed_at
                    .remove(&label)
                    .unwrap_or_else(stack_history::now_ms);
                log.warn(log.rec().item(&me, &label, status, None, since, &results));
            }
            for r in &results {
                if let Outcome::Deferred(why) = &r.outcome {
                    ctx.out(&format!(
                        "{} ({}): deferred: {why}.\n",
                        r.id.address(),
                        r.id.deployment
                    ));
                }
            }
            let applied_ok = report_applied(
                ctx,
                &results
                    .into_iter()
                    .filter(|r| !matches!(r.outcome, Outcome::Deferred(_)))
                    .collect::<Vec<_>>(),
                &mut applied,
                no_color,
            );
            if status != "done" || !applied_ok {
                errors = true;
                ctx.out(&format!("{label}: {status}.\n"));
            }
        }
        fleet::FleetEvent::Released { label } => {
            ctx.out(&format!(
                "{label}: given back unfinished (interrupted): another runner takes it over.\n"
            ));
        }
        fleet::FleetEvent::Warning(why) => {
            if let Some(log) = &log {
                log.warn(Some(why));
            }
        }
        fleet::FleetEvent::Blocked { label, why } => {
            if let Some(log) = &log {
                let now = stack_history::now_ms();
                log.warn(
                    log.rec()
                        .item(&me, &label, "blocked", Some(why.clone()), now, &[]),
                );
            }
            errors = true;
            ctx.out(&format!("{label}: blocked: {why}.\n"));
        }
    };
    let end = match rt.run(fleet::run(stack, req, auto_approve, destroy, &mut note)) {
        Ok(Ok(end)) => end,
        Ok(Err(d)) | Err(d) => {
            if let Some(log) = &log {
                log.warn(log.rec().left(&me));
            }
            return ctx.fail(d, no_color);
        }
    };
    let runners = end.runners.len();
    if let Some(log) = &log {
        if end.interrupted {
            log.warn(log.rec().left(&end.runner));
        } else {
            let unfinished = fleet::unfinished(&end);
            let (outcome, message) = if unfinished.is_empty() && !errors {
                ("success", None)
            } else {
                (
                    "failed",
                    Some(format!(
                        "{} of {} work items not done.",
                        unfinished.len(),
                        end.rows.len()
                    )),
                )
            };
            log.warn(log.rec().finish(outcome, message, Some(&end.runner)));
        }
    }
    if end.interrupted {
        ctx.err(&format!(
            "\nRunner {} stopped: what it applied is recorded, and the items it had not finished are pending again for the other runners of stack run {}.\n",
            end.runner, end.run_id
        ));
        return Exit::Error;
    }
    let unfinished = fleet::unfinished(&end);
    if !unfinished.is_empty() {
        let mut text = format!(
            "\nStack run {} ended with {} of {} work items not done:\n",
            end.run_id,
            unfinished.len(),
            end.rows.len()
        );
        for u in unfinished {
            let _ = writeln!(text, "  {u}");
        }
        text.push_str(
            "Fix the errors and run the runners again: a new stack run takes up what is left.\n",
        );
        ctx.err(&text);
        return Exit::Error;
    }
    ctx.out(&format!(
        "\n{} Stack run {}: {} work item{} done by {} runner{}; this runner ({}) finished {}. Resources it applied: {} added, {} changed, {} destroyed.\n",
        green_bold(
            if destroy {
                "Stack destroy complete!"
            } else {
                "Stack apply complete!"
            },
            color
        ),
        end.run_id,
        end.rows.len(),
        if end.rows.len() == 1 { "" } else { "s" },
        runners,
        if runners == 1 { "" } else { "s" },
        end.runner,
        end.mine,
        applied.add,
        applied.change,
        applied.destroy
    ));
    if errors {
        return Exit::Error;
    }
    if !destroy {
        print_outputs(ctx, stack, req, no_color);
    }
    Exit::Ok
}

/// Applies the results of a round's approval; says whether all succeeded, and adds them up.
fn report_applied(
    ctx: &Context,
    results: &[InstanceResult],
    applied: &mut Totals,
    no_color: bool,
) -> bool {
    let mut ok = true;
    for r in results {
        match &r.outcome {
            Outcome::Applied(x) if !x.confirmed => {
                ok = false;
                ctx.out(&format!(
                    "{} ({}): not applied (interrupted before it started).\n",
                    r.id.address(),
                    r.id.deployment
                ));
            }
            Outcome::Applied(x) => {
                applied.add += x.summary.added as usize;
                applied.change += x.summary.changed as usize;
                applied.destroy += x.summary.destroyed as usize;
                ctx.out(&format!(
                    "{} ({}): Apply complete! Resources: {} added, {} changed, {} destroyed.\n",
                    r.id.address(),
                    r.id.deployment,
                    x.summary.added,
                    x.summary.changed,
                    x.summary.destroyed
                ));
            }
            _ => {
                ok = false;
                let empty = SourceMap::new();
                let map = r.config.as_ref().map(|c| &c.sources).unwrap_or(&empty);
                ctx.out(&format!(
                    "{} ({}): apply failed.\n",
                    r.id.address(),
                    r.id.deployment
                ));
                ctx.report(map, &r.diags, no_color);
            }
        }
    }
    ok
}

/// `stack apply FILE`: the saved plans, each checked against its state, applied without
/// asking (as `apply FILE`), in dependency order.
fn apply_saved(
    ctx: &Context,
    rt: &EngineRuntime,
    stack: &engine_stack::Stack,
    req: &StackRequest,
    path: &std::path::Path,
    no_color: bool,
) -> Exit {
    let log = RunLog::start(ctx, req, "stack apply", no_color);
    let started = stack_history::now_ms();
    let link = log.link(1);
    let links: &dyn engine_stack::Observers = &link;
    let mut round = match rt.run(engine_stack::apply_saved(req, path, Some(links))) {
        Ok(r) => r,
        Err(d) => return abandoned(ctx, &log, &link, d, no_color),
    };
    let t = present_round(ctx, stack, &round, no_color);
    let planned = std::mem::take(&mut round.results);
    if round.diags.has_errors() || t.failed > 0 {
        round.decline();
        log.round(1, &link, started, &planned, &[]);
        log.finish(
            "failed",
            Some("The saved stack plan was not applied.".into()),
        );
        ctx.err("\nThe saved stack plan was not applied: fix the errors above (a stale plan: run `cairn stack plan -out=FILE` again).\n");
        return Exit::Error;
    }
    let mut applied = Totals::default();
    let results = match rt.run(round.approve(req.parallelism)) {
        Ok(r) => r,
        Err(d) => return abandoned(ctx, &log, &link, d, no_color),
    };
    log.round(1, &link, started, &planned, &results);
    if !report_applied(ctx, &results, &mut applied, no_color) {
        log.finish("failed", Some("An apply failed.".into()));
        return Exit::Error;
    }
    log.finish("success", None);
    let (color, _) = ctx.colors(no_color);
    ctx.out(&format!(
        "\n{} Resources: {} added, {} changed, {} destroyed.\nComponents the plan deferred are planned by the next `cairn stack plan` or `cairn stack apply`.\n",
        green_bold("Saved stack plan applied!", color),
        applied.add,
        applied.change,
        applied.destroy
    ));
    Exit::Ok
}

/// A second Ctrl-C (or SIGTERM) abandoned the round's steps still running (`d` says so): the
/// run is interrupted, its record naming the component runs the round began (left unfinished
/// in their states, their pending operations resolved by the next run there).
fn abandoned(
    ctx: &Context,
    log: &RunLog,
    link: &engine_stack::history::RoundLink,
    d: Diagnostic,
    no_color: bool,
) -> Exit {
    log.said(link);
    log.finish("interrupted", Some(d.summary.clone()));
    ctx.fail(d, no_color)
}

/// Each deployment's stack outputs after an apply.
fn print_outputs(ctx: &Context, stack: &engine_stack::Stack, req: &StackRequest, no_color: bool) {
    for d in &stack.deployments {
        match engine_stack::outputs(stack, req, d) {
            Ok(outs) if !outs.is_empty() => {
                let mut text = format!("\nOutputs of deployment {d:?}:\n\n");
                for (n, (v, sensitive)) in &outs {
                    let shown = if *sensitive {
                        "<sensitive>".to_string()
                    } else {
                        crate::value::format_hcl(v)
                    };
                    let _ = writeln!(text, "{n} = {shown}");
                }
                ctx.out(&text);
            }
            Ok(_) => {}
            Err(diags) => {
                ctx.report(&stack.sources, &diags, no_color);
            }
        }
    }
}

fn show(ctx: &Context, a: &StackShowArgs) -> Exit {
    let run = StackRunArgs {
        deployment: a.deployment.clone(),
        parallelism: 1,
        lock_timeout: std::time::Duration::ZERO,
        ui: super::args::UiArgs {
            json: a.ui.json,
            no_color: a.ui.no_color,
        },
    };
    let req = match request(ctx, "stack show", &run) {
        Ok(r) => r,
        Err(d) => return ctx.fail(d, a.ui.no_color),
    };
    let shown = match engine_stack::show(&req) {
        Ok(s) => s,
        Err(d) => return ctx.fail(d, a.ui.no_color),
    };
    if a.ui.json {
        let mut deployments: BTreeMap<String, Vec<serde_json::Value>> = BTreeMap::new();
        for s in &shown {
            deployments
                .entry(s.id.deployment.clone())
                .or_default()
                .push(json!({
                    "address": s.id.address(),
                    "workspace": s.id.workspace(),
                    "resources": s.resources,
                    "runs": s.runs,
                    "outputs": s.outputs.iter().map(|(n, (v, sens))| (n.clone(), json!({
                        "sensitive": sens,
                        "value": if *sens { serde_json::Value::Null } else { v.to_json() },
                    }))).collect::<serde_json::Map<_, _>>(),
                }));
        }
        let doc = json!({"format_version": "1.0", "deployments": deployments});
        ctx.out(&format!(
            "{}\n",
            serde_json::to_string_pretty(&doc).unwrap_or_default()
        ));
        return Exit::Ok;
    }
    if shown.is_empty() {
        ctx.out("The stack has no state yet: run `cairn stack apply`.\n");
        return Exit::Ok;
    }
    let (color, _) = ctx.colors(a.ui.no_color);
    let mut out = String::new();
    let mut current: Option<&str> = None;
    for s in &shown {
        if current != Some(s.id.deployment.as_str()) {
            current = Some(s.id.deployment.as_str());
            let title = format!("Deployment {:?}", s.id.deployment);
            let _ = writeln!(
                out,
                "\n{}\n{}",
                bold(&title, color),
                "─".repeat(title.len())
            );
        }
        let _ = writeln!(
            out,
            "\n{} ({} resource instance{}, {} run{}; state {})",
            s.id.address(),
            s.resources.len(),
            if s.resources.len() == 1 { "" } else { "s" },
            s.runs,
            if s.runs == 1 { "" } else { "s" },
            s.id.workspace()
        );
        for r in &s.resources {
            let _ = writeln!(out, "  {r}");
        }
        for (n, (v, sens)) in &s.outputs {
            let shown = if *sens {
                "<sensitive>".to_string()
            } else {
                crate::value::format_hcl(v)
            };
            let _ = writeln!(out, "  output {n} = {shown}");
        }
    }
    ctx.out(&out);
    Exit::Ok
}

fn output(ctx: &Context, a: &StackOutputArgs) -> Exit {
    let run = StackRunArgs {
        deployment: Some(a.deployment.clone()),
        parallelism: 1,
        lock_timeout: std::time::Duration::ZERO,
        ui: super::args::UiArgs {
            json: a.ui.json,
            no_color: a.ui.no_color,
        },
    };
    let req = match request(ctx, "stack output", &run) {
        Ok(r) => r,
        Err(d) => return ctx.fail(d, a.ui.no_color),
    };
    let stack = match engine_stack::load(&req) {
        Ok(s) => s,
        Err((map, diags)) => {
            ctx.report(&map, &diags, a.ui.no_color);
            return Exit::Error;
        }
    };
    let outs = match engine_stack::outputs(&stack, &req, &a.deployment) {
        Ok(o) => o,
        Err(diags) => {
            ctx.report(&stack.sources, &diags, a.ui.no_color);
            return Exit::Error;
        }
    };
    if let Some(name) = &a.name {
        let Some((v, _)) = outs.get(name) else {
            return ctx.fail(
                Diagnostic::error(
                    "Output not found",
                    format!(
                        "The stack has no output named {name:?}, or deployment {:?} has not applied what it needs yet.",
                        a.deployment
                    ),
                ),
                a.ui.no_color,
            );
        };
        if a.ui.json {
            ctx.out(&format!("{}\n", v.to_json()));
        } else if let Some(s) = v.unmarked().as_str() {
            ctx.out(&format!("{s}\n"));
        } else {
            ctx.out(&format!("{}\n", crate::value::format_hcl(v)));
        }
        return Exit::Ok;
    }
    if a.ui.json {
        let doc: serde_json::Map<String, serde_json::Value> = outs
            .iter()
            .map(|(n, (v, sens))| (n.clone(), json!({"sensitive": sens, "value": v.to_json()})))
            .collect();
        ctx.out(&format!(
            "{}\n",
            serde_json::to_string_pretty(&doc).unwrap_or_default()
        ));
        return Exit::Ok;
    }
    let mut text = String::new();
    for (n, (v, sens)) in &outs {
        let shown = if *sens {
            "<sensitive>".to_string()
        } else {
            crate::value::format_hcl(v)
        };
        let _ = writeln!(text, "{n} = {shown}");
    }
    ctx.out(&text);
    Exit::Ok
}
