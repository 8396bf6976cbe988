//! What `plan`, `apply`, `refresh`, `destroy` and `show` share around the engine: presenting a plan (human text through
//! `plan::render`, or `-json` UI messages), the approval step, and exit codes.
//!
//! Decisions:
//! - Addresses given to `-target` and `-replace` are parsed here, all of them, and reported
//!   together before anything runs.
//! - Saved plan files are `plan::saved` (their format belongs to the plan, not to the CLI).
//! - The approval step runs only after the plan is shown, and only when the plan has
//!   something to do: "No changes." never asks.

use super::args::ShowArgs;
use super::output::{render_width, Exit, JsonUi};
use super::progress::resource_json;
use super::prompt::{self, Answer, Question};
use super::Context;
use crate::config::VarArg;
use crate::diag::Diagnostic;
use crate::plan::render::{render_plan, RenderOptions};
use crate::plan::saved::load_plan;
use crate::plan::{Action, Plan, PlanMode};
use cairn_state::Snapshot;
use serde_json::{json, Map, Value as J};
use std::io::BufRead;

/// Terraform's action names in `planned_change` messages.
fn change_action(a: Action) -> &'static str {
    match a {
        Action::NoOp => "noop",
        Action::Create => "create",
        Action::Read => "read",
        Action::Update => "update",
        Action::DeleteThenCreate | Action::CreateThenDelete => "replace",
        Action::Delete => "delete",
        // Terraform's word for a forget in its machine-readable UI.
        Action::Forget => "remove",
    }
}

/// The plan as `-json` UI messages: drift, one `planned_change` per change, the
/// `change_summary`, and the planned `outputs`.
pub fn plan_messages(ui: &JsonUi, plan: &Plan) {
    for d in &plan.drift {
        let action = if d.after.is_some() {
            "update"
        } else {
            "delete"
        };
        let mut f = Map::new();
        f.insert(
            "change".into(),
            json!({"resource": resource_json(&d.addr), "action": action}),
        );
        ui.emit(
            "info",
            &format!("{}: Drift detected ({action})", d.addr),
            "resource_drift",
            f,
        );
    }
    let moved = plan.moved_from();
    for c in &plan.changes {
        // A `moved` block's move, or an import, with nothing else to do is Terraform's
        // action "move" / "import".
        let prev = moved.get(&c.addr).copied();
        let action = match (c.action, prev, c.importing.is_some()) {
            (Action::NoOp, _, true) => "import",
            (Action::NoOp, Some(_), false) => "move",
            (Action::NoOp, None, false) => continue,
            (a, _, _) => change_action(a),
        };
        let mut change = json!({"resource": resource_json(&c.addr)});
        if let Some(p) = prev {
            change["previous_resource"] = resource_json(p);
        }
        change["action"] = json!(action);
        if let Some(r) = &c.reason {
            change["reason"] = json!(r.json_name());
        }
        if let Some(i) = &c.importing {
            change["importing"] = json!({ "id": i.id });
        }
        let mut f = Map::new();
        f.insert("change".into(), change);
        ui.emit(
            "info",
            &format!("{}: Plan to {action}", c.addr),
            "planned_change",
            f,
        );
    }
    let (add, change, destroy) = plan.counts();
    ui.change_summary("plan", plan.imports(), add, change, destroy);
    let outputs: Map<String, J> = plan
        .outputs
        .iter()
        .map(|o| {
            (
                o.name.clone(),
                json!({"sensitive": o.sensitive, "action": change_action(o.action)}),
            )
        })
        .collect();
    if !outputs.is_empty() {
        let mut f = Map::new();
        let n = outputs.len();
        f.insert("outputs".into(), J::Object(outputs));
        ui.emit("info", &format!("Outputs: {n}"), "outputs", f);
    }
}

/// Shows a plan: human text on standard output, or `-json` messages.
pub fn present_plan(ctx: &Context, plan: &Plan, json_ui: Option<&JsonUi>, no_color: bool) {
    match json_ui {
        Some(ui) => plan_messages(ui, plan),
        None => {
            let (color, _) = ctx.colors(no_color);
            let opts = RenderOptions {
                color,
                width: render_width(ctx.stdout_tty),
            };
            ctx.out(&render_plan(plan, &opts));
        }
    }
}

/// The exit code of `plan`: with `-detailed-exitcode`, 2 when there are changes.
///
/// Drift alone is no change (as in Terraform): a normal plan that only found objects changed
/// outside Cairn exits 0, though applying it records what refresh found. A read-only plan's
/// changes are exactly what it would record.
pub fn plan_exit(plan: &Plan, detailed: bool) -> Exit {
    let changes = match plan.mode {
        PlanMode::ReadOnly | PlanMode::RefreshOnly => plan.applyable,
        PlanMode::Normal | PlanMode::Destroy => {
            plan.has_changes() || plan.changes.iter().any(|c| c.action == Action::Read)
        }
    };
    if plan.errored {
        Exit::Error
    } else if detailed && changes {
        Exit::Changes
    } else {
        Exit::Ok
    }
}

/// How many managed objects a destroy plan deletes.
pub fn objects_to_destroy(plan: &Plan) -> usize {
    plan.changes
        .iter()
        .filter(|c| matches!(c.action, Action::Delete))
        .count()
}

/// The approval step after a plan is shown. `Ok(true)`: go ahead; `Ok(false)`: the user said
/// something other than `yes` (the command prints "cancelled" and exits 1); `Err`: cannot ask.
pub fn approve(
    ctx: &Context,
    question: Question,
    command: &str,
    auto_approve: bool,
    input_enabled: bool,
    stdin: &mut dyn BufRead,
    no_color: bool,
) -> Result<bool, Diagnostic> {
    if auto_approve {
        return Ok(true);
    }
    if !input_enabled || !ctx.stdin_tty {
        return Err(prompt::cannot_ask(command, !input_enabled));
    }
    let (color, _) = ctx.colors(no_color);
    ctx.out(&prompt::prompt_text(question, color));
    match prompt::read_answer(stdin) {
        Answer::Approved => {
            ctx.out("\n");
            Ok(true)
        }
        Answer::Declined(_) => Ok(false),
    }
}

/// `show`: a saved plan (human or Terraform's `show -json`), or the current state.
pub fn show(ctx: &Context, a: &ShowArgs) -> Exit {
    let (color, _) = ctx.colors(a.ui.no_color);
    let opts = RenderOptions {
        color,
        width: render_width(ctx.stdout_tty),
    };
    if let Some(path) = &a.plan_file {
        let plan = match load_plan(path, crate::engine::api::encryption::plan().as_deref()) {
            Ok(p) => p,
            Err(d) => return ctx.fail(d, a.ui.no_color),
        };
        if a.ui.json {
            let text =
                serde_json::to_string(&crate::plan::json::plan_json(&plan)).unwrap_or_default();
            ctx.out(&format!("{text}\n"));
        } else {
            ctx.out(&render_plan(&plan, &opts));
        }
        return Exit::Ok;
    }
    let snap = match ctx.read_store("show") {
        Ok(Some(store)) => store.into_snapshot(),
        Ok(None) => Snapshot::new(),
        Err(d) => return ctx.fail(d, a.ui.no_color),
    };
    let view = ctx.state_view(&snap);
    if a.ui.json {
        let j = crate::plan::json::state_json(&snap, &view.sources);
        let text = serde_json::to_string(&j).unwrap_or_default();
        ctx.out(&format!("{text}\n"));
    } else {
        ctx.out(&crate::plan::render::render_state(
            &snap,
            &opts,
            &view.shapes,
        ));
    }
    Exit::Ok
}

/// `graph`: the engine's graph as DOT, or as SVG through Graphviz.
pub fn graph(ctx: &Context, a: &super::args::GraphArgs, vars: Vec<VarArg>) -> Exit {
    use super::args::{GraphFormat, GraphType};
    use crate::engine::api::GraphKind;
    let plan = match &a.plan {
        Some(path) => match load_plan(path, crate::engine::api::encryption::plan().as_deref()) {
            Ok(p) => Some(p),
            Err(d) => return ctx.fail(d, false),
        },
        None => None,
    };
    let kind = match a.type_ {
        GraphType::Plan => GraphKind::Plan,
        GraphType::Refresh => GraphKind::Refresh,
        GraphType::Apply => GraphKind::Apply,
    };
    let mut opts = super::engine_options::base_options(ctx, "graph", vars);
    opts.refresh = false;
    opts.parallelism = 1;
    let report = crate::engine::api::graph_dot(&opts, kind, plan.as_ref());
    let empty = crate::diag::SourceMap::new();
    let map = report.config.as_ref().map(|c| &c.sources).unwrap_or(&empty);
    if ctx.report(map, &report.diags, false) {
        return Exit::Error;
    }
    let Some(dot) = report.result else {
        return Exit::Error;
    };
    match a.format {
        GraphFormat::Dot => ctx.out(&dot),
        GraphFormat::Svg => match dot_to_svg(&dot, "dot") {
            Ok(svg) => ctx.out(&svg),
            Err(d) => return ctx.fail(d, false),
        },
    }
    Exit::Ok
}

/// The human form of `inspect`: each instance as a block. A long list is cut into one run per
/// core, rendered at once on scoped threads and joined in order (the text is the same).
pub(super) fn render_instances(instances: &[crate::engine::api::Inspected]) -> String {
    const PER_THREAD_MIN: usize = 2048;
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let runs = threads.min(instances.len() / PER_THREAD_MIN).max(1);
    if runs == 1 {
        let mut out = String::with_capacity(instances.len() * 256);
        render_run(instances, &mut out);
        return out;
    }
    let size = instances.len().div_ceil(runs);
    let parts: Vec<String> = std::thread::scope(|scope| {
        let handles: Vec<_> = instances
            .chunks(size)
            .map(|run| {
                scope.spawn(move || {
                    let mut out = String::with_capacity(run.len() * 256);
                    render_run(run, &mut out);
                    out
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect()
    });
    parts.concat()
}

/// Appends each instance's block to `out`.
fn render_run(instances: &[crate::engine::api::Inspected], out: &mut String) {
    use crate::value::Value;
    use std::fmt::Write as _;
    let mut text = String::new();
    for i in instances {
        let r = &i.addr.resource;
        let kind = match r.mode {
            crate::addr::Mode::Managed => "resource",
            crate::addr::Mode::Data => "data",
            crate::addr::Mode::Ephemeral => "ephemeral",
        };
        let _ = write!(out, "# {}\n{kind} ", i.addr);
        cairn_state::write_quoted(out, &r.type_);
        out.push(' ');
        cairn_state::write_quoted(out, &r.name);
        out.push_str(" {\n");
        let (id, provider) = (
            Value::string(i.addr.to_string()),
            Value::string(i.provider.to_string()),
        );
        let attrs = merged_with_ids(i, &id, &provider);
        let width = attrs.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
        for (k, v) in attrs {
            if v.is_null() {
                continue;
            }
            let _ = write!(out, "  {k:width$} = ");
            text.clear();
            crate::value::write_hcl(&mut text, v);
            if text.contains('\n') {
                out.push_str(&text.replace('\n', "\n  "));
            } else {
                out.push_str(&text);
            }
            out.push('\n');
        }
        out.push_str("}\n\n");
    }
}

/// An instance's attributes with its address as `id` and its provider as `_provider`, without copying the attributes: borrowed pairs in key order, `id` and
/// `_provider` replacing any attribute of the same name.
fn merged_with_ids<'v>(
    i: &'v crate::engine::api::Inspected,
    id: &'v crate::value::Value,
    provider: &'v crate::value::Value,
) -> Vec<(&'v str, &'v crate::value::Value)> {
    let mut out: Vec<(&str, &crate::value::Value)> = i
        .attrs
        .attributes()
        .into_iter()
        .flatten()
        .filter(|(k, _)| k.as_str() != "id" && k.as_str() != "_provider")
        .map(|(k, v)| (k.as_str(), v))
        .collect();
    for (k, v) in [("id", id), ("_provider", provider)] {
        let at = out.partition_point(|(x, _)| *x < k);
        out.insert(at, (k, v));
    }
    out
}

/// Leaks what a command built (the configuration, its values, the graph) instead of
/// dropping it: the process exits right after the command, and freeing hundreds of
/// thousands of small allocations one by one costs a large configuration tens of
/// milliseconds for nothing. Only for values the command is done with.
pub(super) fn exit_without_drop<T>(done: T) {
    std::mem::forget(done);
}

/// Renders DOT as SVG through Graphviz's `program` (normally `dot`), or says how to install it.
pub fn dot_to_svg(dot: &str, program: &str) -> Result<String, Diagnostic> {
    use std::io::Write;
    use std::process::{Command, Stdio};
    let child = Command::new(program)
        .arg("-Tsvg")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn();
    let mut child = match child {
        Ok(c) => c,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(Diagnostic::error(
                "Graphviz is not installed",
                format!(
                    "-format=svg renders the graph with Graphviz's `{program}` program, which \
                     was not found. Install Graphviz (`apt-get install graphviz` on Debian and \
                     Ubuntu, `dnf install graphviz` on Fedora, `brew install graphviz` on \
                     macOS), or print DOT with -format=dot and render it elsewhere."
                ),
            ))
        }
        Err(e) => {
            return Err(Diagnostic::error(
                "Cannot run Graphviz",
                format!("Starting `{program} -Tsvg` failed: {e}."),
            ))
        }
    };
    // Write on a thread of its own so a large graph cannot deadlock against `dot`'s output.
    let mut stdin = child.stdin.take();
    let input = dot.to_string();
    let writer = std::thread::spawn(move || {
        if let Some(i) = stdin.as_mut() {
            let _ = i.write_all(input.as_bytes());
        }
    });
    let out = child.wait_with_output();
    let _ = writer.join();
    let out = out.map_err(|e| {
        Diagnostic::error(
            "Cannot run Graphviz",
            format!("`{program} -Tsvg` failed: {e}."),
        )
    })?;
    if !out.status.success() {
        return Err(Diagnostic::error(
            "Graphviz failed",
            format!(
                "`{program} -Tsvg` exited with {}: {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ),
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::args::{parse, Command};
    use crate::cli::args::{PlanFlags, WalkArgs};
    use crate::cli::engine_options::engine_options;
    use crate::cli::output::sink;
    use crate::cli::output::testing::Capture;
    use crate::plan::Change;
    use std::path::PathBuf;
    use std::sync::Arc;
    use std::time::UNIX_EPOCH;

    fn context(stdin_tty: bool) -> (Context, Capture, Capture) {
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
            stdin_tty,
        };
        (ctx, out, err)
    }

    fn plan_args(line: &str) -> (WalkArgs, PlanFlags, Vec<VarArg>) {
        let p = parse(std::iter::once("cairn").chain(line.split(' '))).unwrap();
        match p.cli.command {
            Command::Plan(a) => (a.walk, a.plan, p.var_order),
            _ => panic!("not plan"),
        }
    }

    #[test]
    fn requests_report_every_bad_address() {
        let (ctx, _, _) = context(false);
        let (walk, flags, vars) =
            plan_args("plan -target=sim_thing.a -target=module.m -replace=sim_thing.b[0] -var=a=1");
        let r = engine_options(&ctx, "plan", vars, &walk, Some(&flags)).unwrap_or_else(|_| {
            panic!("the flags are valid");
        });
        assert_eq!(r.targets.len(), 2);
        assert_eq!(r.replace[0].to_string(), "sim_thing.b[0]");
        assert_eq!(r.vars, [VarArg::Var("a=1".into())]);
        assert!(r.refresh);
        let (walk, flags, vars) =
            plan_args("plan -target=!bad -replace=data.sim_lookup.x -parallelism=0");
        let Err(diags) = engine_options(&ctx, "plan", vars, &walk, Some(&flags)) else {
            panic!("the flags are invalid");
        };
        let summaries: Vec<&str> = diags.iter().map(|d| d.summary.as_str()).collect();
        assert_eq!(
            summaries,
            [
                "Invalid target address",
                "Invalid replace address",
                "Invalid -parallelism"
            ]
        );
    }

    fn plan_with(actions: &[Action]) -> Plan {
        let changes = actions
            .iter()
            .enumerate()
            .map(|(i, a)| Change {
                addr: format!("sim_thing.t{i}").parse().unwrap(),
                provider: std::sync::Arc::new("provider[\"sim\"]".parse().unwrap()),
                action: *a,
                before: None,
                after: None,
                replace_paths: vec![],
                reason: None,
                sensitive_attrs: vec![],
                diff_unavailable: false,
                importing: None,
                deposed: None,
            })
            .collect();
        Plan {
            mode: PlanMode::Normal,
            base_seq: 0,
            workspace: None,
            check_findings: Vec::new(),
            config_hash: String::new(),
            changes,
            provider_changes: vec![],
            outputs: vec![],
            drift: vec![],
            refreshed_meta: Vec::new(),
            data_reads: vec![],
            dropped_data: vec![],
            variables: Default::default(),
            request: Default::default(),
            warnings: vec![],
            applyable: actions.iter().any(|a| *a != Action::NoOp),
            errored: false,
            graph: None,
            moves: vec![],
            shapes: std::collections::BTreeMap::new(),
            sources: std::collections::BTreeMap::new(),
        }
    }

    #[test]
    fn approval_needs_a_terminal_or_auto_approve() {
        let q = Question::Apply;
        let (ctx, out, _) = context(false);
        let d = approve(&ctx, q, "apply", false, true, &mut "yes\n".as_bytes(), true).unwrap_err();
        assert_eq!(d.summary, "Approval required");
        assert!(
            d.detail.contains("Standard input is not a terminal"),
            "{}",
            d.detail
        );
        assert!(
            d.detail.contains("`cairn apply -auto-approve`"),
            "{}",
            d.detail
        );
        assert_eq!(out.text(), "", "nothing is read from a pipe");
        let d = approve(&ctx, q, "destroy", false, false, &mut "".as_bytes(), true).unwrap_err();
        assert!(d.detail.contains("-input=false") && d.detail.contains("destroy -auto-approve"));
        assert_eq!(
            approve(&ctx, q, "apply", true, true, &mut "".as_bytes(), true),
            Ok(true)
        );

        let (ctx, out, _) = context(true);
        let q = Question::Destroy { objects: 2 };
        assert_eq!(
            approve(
                &ctx,
                q,
                "destroy",
                false,
                true,
                &mut "yes\n".as_bytes(),
                true
            ),
            Ok(true)
        );
        assert!(
            out.text().contains("Cairn will destroy 2 objects"),
            "{}",
            out.text()
        );
        assert_eq!(
            approve(
                &ctx,
                q,
                "destroy",
                false,
                true,
                &mut "no\n".as_bytes(),
                true
            ),
            Ok(false)
        );
    }

    #[test]
    fn exit_codes() {
        let none = plan_with(&[Action::NoOp]);
        let some = plan_with(&[Action::Create, Action::Delete]);
        assert_eq!(plan_exit(&none, true), Exit::Ok);
        assert_eq!(plan_exit(&some, false), Exit::Ok);
        assert_eq!(plan_exit(&some, true), Exit::Changes);
        let errored = Plan {
            errored: true,
            ..some.clone()
        };
        assert_eq!(plan_exit(&errored, true), Exit::Error);
        assert_eq!(objects_to_destroy(&some), 1);
    }

    #[test]
    fn plan_json_messages() {
        let cap = Capture::default();
        let clock: crate::cli::output::Clock = Arc::new(|| UNIX_EPOCH);
        let ui = JsonUi::new(sink(cap.clone()), clock);
        let mut plan = plan_with(&[Action::Create, Action::NoOp, Action::DeleteThenCreate]);
        plan.changes[2].reason = Some(Box::new(crate::plan::Reason::ReplaceByRequest));
        plan.outputs.push(crate::plan::OutputChange {
            name: "o".into(),
            action: Action::Create,
            before: None,
            after: None,
            sensitive: true,
        });
        plan_messages(&ui, &plan);
        let lines: Vec<J> = cap
            .text()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let types: Vec<&str> = lines.iter().map(|l| l["type"].as_str().unwrap()).collect();
        assert_eq!(
            types,
            [
                "planned_change",
                "planned_change",
                "change_summary",
                "outputs"
            ]
        );
        assert_eq!(lines[0]["@message"], "sim_thing.t0: Plan to create");
        assert_eq!(lines[1]["change"]["action"], "replace");
        assert_eq!(lines[1]["change"]["reason"], "replace_by_request");
        assert_eq!(
            lines[2]["changes"],
            json!({"add": 2, "change": 0, "import": 0, "remove": 1, "operation": "plan"})
        );
        assert_eq!(
            lines[2]["@message"],
            "Plan: 2 to add, 0 to change, 1 to destroy."
        );
        assert_eq!(
            lines[3]["outputs"]["o"],
            json!({"sensitive": true, "action": "create"})
        );
    }

    #[test]
    fn svg_through_graphviz() {
        let d = dot_to_svg("digraph {}", "cairn-no-such-dot-program").unwrap_err();
        assert_eq!(d.summary, "Graphviz is not installed");
        assert!(
            d.detail.contains("apt-get install graphviz"),
            "{}",
            d.detail
        );
        // A stand-in for `dot` that echoes its input wrapped in <svg>, and one that fails.
        let dir = tempfile::tempdir().unwrap();
        let fake = dir.path().join("dot");
        std::fs::write(&fake, "#!/bin/sh\necho \"<svg $1>\"; cat; echo '</svg>'\n").unwrap();
        let bad = dir.path().join("bad");
        std::fs::write(
            &bad,
            "#!/bin/sh\necho 'syntax error in line 1' >&2; exit 1\n",
        )
        .unwrap();
        for f in [&fake, &bad] {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(f, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        let svg = dot_to_svg("digraph { a -> b }", fake.to_str().unwrap()).unwrap();
        assert_eq!(svg, "<svg -Tsvg>\ndigraph { a -> b }</svg>\n");
        let d = dot_to_svg("digraph {", bad.to_str().unwrap()).unwrap_err();
        assert!(d.detail.contains("syntax error in line 1"), "{}", d.detail);
    }
}
