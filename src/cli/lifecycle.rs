//! The steps `plan`, `apply`, `refresh` and `destroy` take around the engine, in order:
//! choose the observer (human lines or the `-json` stream), load the configuration and the
//! input variables (the CLI owns the `SourceMap`, so every diagnostic can be rendered with its
//! snippet), hand the engine a `RunRequest`, then print what came back — diagnostics, the
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
use super::output::{Exit, JsonUi};
use super::progress::{AnyObserver, HumanObserver, HumanOptions, JsonObserver};
use super::run_cmds::{present_plan, save_plan};
use super::Context;
use crate::config::{Config, VarArg};
use crate::diag::{Diagnostic, Diagnostics, SourceMap};
use crate::plan::json::type_json;
use crate::plan::Plan;
use crate::value::{format_hcl, Value};
use serde_json::{json, Map, Value as J};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

/// The observer for a run, and the JSON UI when `-json` was given (its `version` message is
/// already written).
pub fn make_observer(ctx: &Context, ui: &UiArgs) -> (AnyObserver, Option<JsonUi>) {
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
pub fn emit(
    ctx: &Context,
    map: &SourceMap,
    diags: &Diagnostics,
    json_ui: Option<&JsonUi>,
    no_color: bool,
) -> bool {
    match json_ui {
        Some(ui) => {
            for d in diags {
                ui.diagnostic(map, d);
            }
            diags.has_errors()
        }
        None => ctx.report(map, diags, no_color),
    }
}

/// `first` followed by each of `then` not already in it.
pub fn merge_diagnostics(first: Vec<Diagnostic>, then: Diagnostics) -> Diagnostics {
    let mut all = Diagnostics(first);
    for d in then {
        if !all.0.contains(&d) {
            all.push(d);
        }
    }
    all
}

/// The `TF_VAR_*` part of the environment.
pub fn tf_var_env() -> BTreeMap<String, String> {
    std::env::vars()
        .filter(|(k, _)| k.starts_with("TF_VAR_"))
        .collect()
}

/// Loads the configuration of the working directory and its input variables. On errors they
/// are printed and the exit code comes back instead.
pub fn prepare(
    ctx: &Context,
    vars: &[VarArg],
    json_ui: Option<&JsonUi>,
    no_color: bool,
) -> Result<(Config, BTreeMap<String, Value>), Exit> {
    let (config, mut diags) = crate::config::load(Path::new("."));
    let Some(mut config) = config else {
        emit(ctx, &SourceMap::new(), &diags, json_ui, no_color);
        return Err(Exit::Error);
    };
    let mut values = BTreeMap::new();
    if !diags.has_errors() {
        let cwd = std::env::current_dir().unwrap_or_else(|_| ".".into());
        let (v, d) = crate::config::input_values(&mut config, vars, &tf_var_env(), &cwd);
        values = v;
        diags.extend(d);
    }
    if diags.has_errors() {
        emit(ctx, &config.sources, &diags, json_ui, no_color);
        return Err(Exit::Error);
    }
    // Warnings are printed now; the run goes on.
    emit(ctx, &config.sources, &diags, json_ui, no_color);
    Ok((config, values))
}

/// How a run prints: the `-json` stream or human text, and `-no-color`.
pub struct RunUi {
    pub json: Option<JsonUi>,
    pub no_color: bool,
}

/// After the engine planned: print the plan (or the errors), save it with `-out`, and pick the
/// exit code.
pub fn finish_plan(
    ctx: &Context,
    ui: &RunUi,
    map: &SourceMap,
    result: Result<Plan, Diagnostics>,
    observer: &mut AnyObserver,
    out_file: Option<&Path>,
    detailed: bool,
) -> (Exit, Option<Plan>) {
    let (json_ui, no_color) = (ui.json.as_ref(), ui.no_color);
    observer.finish();
    let seen = observer.take_diagnostics();
    match result {
        Err(diags) => {
            emit(ctx, map, &merge_diagnostics(seen, diags), json_ui, no_color);
            (Exit::Error, None)
        }
        Ok(plan) => {
            present_plan(ctx, &plan, json_ui, no_color);
            emit(ctx, map, &Diagnostics(seen), json_ui, no_color);
            if let Some(path) = out_file {
                if let Err(d) = save_plan(path, &plan) {
                    emit(ctx, map, &d.into(), json_ui, no_color);
                    return (Exit::Error, Some(plan));
                }
                if json_ui.is_none() {
                    ctx.out(&format!(
                        "\nSaved the plan to: {p}\n\nTo perform exactly these actions, run:\n    cairn apply {p}\n",
                        p = path.display()
                    ));
                }
            }
            (super::run_cmds::plan_exit(&plan, detailed), Some(plan))
        }
    }
}

/// What an apply or destroy did, for its closing lines.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ApplySummary {
    pub added: usize,
    pub changed: usize,
    pub destroyed: usize,
    /// The root outputs after the run: value and whether it is sensitive.
    pub outputs: BTreeMap<String, (Value, bool)>,
}

/// `Apply complete! Resources: …` (or `Destroy complete!`), then the outputs, in either UI.
pub fn print_summary(
    ctx: &Context,
    s: &ApplySummary,
    destroy: bool,
    json_ui: Option<&JsonUi>,
    no_color: bool,
) {
    if let Some(ui) = json_ui {
        let op = if destroy { "destroy" } else { "apply" };
        ui.change_summary(op, s.added, s.changed, s.destroyed);
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
        let _ = writeln!(
            out,
            "\n{b}{g}Apply complete! Resources: {} added, {} changed, {} destroyed.{r}",
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

/// The engine's side of a run. Every call of the lifecycle commands goes through these two
/// functions, so wiring the engine is a change here only.
///
/// The engine (`crate::engine`) has not landed on this branch yet: until it does, they refuse
/// with an error that names what is missing, after everything before them (flags, addresses,
/// configuration, variables) has been checked and reported.
pub mod engine_seam {
    use super::*;
    use crate::cli::run_cmds::RunRequest;
    use crate::engine::progress::Observer;

    fn missing(what: &str) -> Diagnostics {
        Diagnostics::from(Diagnostic::error(
            "The lifecycle engine is not in this build",
            format!(
                "The configuration and variables are valid, but this build of Cairn cannot {what}                  yet: the engine that refreshes, plans and applies has not been merged."
            ),
        ))
    }

    pub fn plan(
        _config: &Config,
        _values: &BTreeMap<String, Value>,
        _req: &RunRequest,
        _obs: &dyn Observer,
    ) -> Result<Plan, Diagnostics> {
        Err(missing("plan"))
    }

    pub fn apply(
        _config: &Config,
        _plan: &Plan,
        _req: &RunRequest,
        _obs: &dyn Observer,
    ) -> Result<ApplySummary, (ApplySummary, Diagnostics)> {
        Err((ApplySummary::default(), missing("apply")))
    }
}

/// Which lifecycle command is running.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verb {
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
pub struct Invocation<'a> {
    pub verb: Verb,
    pub walk: &'a super::args::WalkArgs,
    pub flags: Option<&'a super::args::PlanFlags>,
    pub mode: crate::plan::PlanMode,
    pub vars: Vec<VarArg>,
    pub plan_file: Option<&'a Path>,
    pub out_file: Option<&'a Path>,
    pub detailed_exitcode: bool,
    pub auto_approve: bool,
    /// `refresh -preview`: show, record nothing.
    pub preview: bool,
}

/// Runs a lifecycle command end to end.
pub fn run(ctx: &Context, inv: Invocation<'_>) -> Exit {
    use crate::cli::prompt::Question;
    use crate::cli::run_cmds::{approve, load_plan, objects_to_destroy, run_request};
    use crate::plan::PlanMode;

    let no_color = inv.walk.ui.no_color;
    let (mut observer, json) = make_observer(ctx, &inv.walk.ui);
    let ui = RunUi { json, no_color };
    let req = match run_request(ctx, inv.walk, inv.flags, inv.mode, inv.vars.clone()) {
        Ok(r) => r,
        Err(d) => {
            emit(ctx, &SourceMap::new(), &d, ui.json.as_ref(), no_color);
            return Exit::Error;
        }
    };
    let (config, values) = match prepare(ctx, &req.vars, ui.json.as_ref(), no_color) {
        Ok(cv) => cv,
        Err(e) => return e,
    };
    let map = &config.sources;
    // The plan: a saved one, or a fresh one.
    let plan = match inv.plan_file {
        Some(path) => match load_plan(path) {
            Ok(p) => p,
            Err(d) => {
                emit(ctx, map, &d.into(), ui.json.as_ref(), no_color);
                return Exit::Error;
            }
        },
        None => {
            let result = engine_seam::plan(&config, &values, &req, &observer);
            let (exit, plan) = finish_plan(
                ctx,
                &ui,
                map,
                result,
                &mut observer,
                inv.out_file,
                inv.detailed_exitcode,
            );
            let Some(plan) = plan else { return exit };
            if inv.verb == Verb::Plan || inv.preview || exit == Exit::Error {
                return exit;
            }
            plan
        }
    };
    if !plan.applyable && inv.plan_file.is_none() {
        // "No changes." has been shown; nothing to approve or apply.
        return Exit::Ok;
    }
    if inv.plan_file.is_none() && inv.verb != Verb::Refresh {
        let question = match plan.mode {
            PlanMode::Destroy => Question::Destroy {
                objects: objects_to_destroy(&plan),
            },
            PlanMode::ReadOnly | PlanMode::RefreshOnly => Question::ReadOnly,
            PlanMode::Normal => Question::Apply,
        };
        let mut stdin = std::io::stdin().lock();
        match approve(
            ctx,
            question,
            inv.verb.name(),
            inv.auto_approve,
            inv.walk.input,
            &mut stdin,
            no_color,
        ) {
            Ok(true) => {}
            Ok(false) => {
                let what = if inv.verb == Verb::Destroy {
                    "Destroy"
                } else {
                    "Apply"
                };
                emit(
                    ctx,
                    map,
                    &Diagnostic::error(
                        format!("{what} cancelled"),
                        "Only 'yes' approves; nothing was changed.",
                    )
                    .into(),
                    ui.json.as_ref(),
                    no_color,
                );
                return Exit::Error;
            }
            Err(d) => {
                emit(ctx, map, &d.into(), ui.json.as_ref(), no_color);
                return Exit::Error;
            }
        }
    }
    let result = engine_seam::apply(&config, &plan, &req, &observer);
    observer.finish();
    let seen = observer.take_diagnostics();
    let destroy = plan.mode == PlanMode::Destroy;
    match result {
        Ok(summary) => {
            emit(ctx, map, &Diagnostics(seen), ui.json.as_ref(), no_color);
            print_summary(ctx, &summary, destroy, ui.json.as_ref(), no_color);
            Exit::Ok
        }
        Err((summary, diags)) => {
            emit(
                ctx,
                map,
                &merge_diagnostics(seen, diags),
                ui.json.as_ref(),
                no_color,
            );
            if summary != ApplySummary::default() && ui.json.is_some() {
                print_summary(ctx, &summary, destroy, ui.json.as_ref(), no_color);
            }
            Exit::Error
        }
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
