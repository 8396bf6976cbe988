//! The command line: clap commands, arguments to options, printing, prompts, exit codes. The
//! only place that prints or reads the environment.
//!
//! Flow: `main` parses (normalizing Terraform's single-dash flags, see `args`), sets up logging
//! (`CAIRN_LOG`), applies `-chdir`, resolves the state directory (`-state-dir`, then
//! `CAIRN_STATE_DIR`, then `.cairn` in the working directory), and runs one command. Each
//! command returns an `Exit`; problems are `Diagnostic`s printed once, at the end, by
//! `Context::report`.

pub(crate) mod args;
pub(crate) mod compact_warnings;
pub(crate) mod config_cmds;
pub(crate) mod console;
mod context;
pub(crate) mod engine_options;
mod fmt_cmd;
pub(crate) mod inspect;
pub(crate) mod lifecycle;
pub(crate) mod logging;
pub(crate) mod login;
pub(crate) mod metadata;
pub(crate) mod output;
pub(crate) mod progress;
pub(crate) mod prompt;
pub(crate) mod providers_cmds;
pub mod run_cmds;
pub(crate) mod stack_cmds;
pub(crate) mod stack_history;
mod stack_providers;
pub(crate) mod state_cmds;
pub(crate) mod state_edit;
pub(crate) mod state_replace_cmds;
pub(crate) mod taint_cmds;
pub(crate) mod test_cmd;
pub(crate) mod ui_cmd;
pub(crate) mod workspace_cmds;

use crate::diag::Diagnostic;
use crate::plan::PlanMode;
use args::{Command, Parsed};
use lifecycle::{Invocation, Verb};
use output::{sink, Exit};
use std::io::IsTerminal;
use std::path::PathBuf;

pub use context::Context;

/// The process entry point: returns the exit code.
pub fn main() -> i32 {
    let parsed = match args::parse(std::env::args_os()) {
        Ok(p) => p,
        Err(e) => {
            let _ = e.print();
            // Usage errors exit 1 as Terraform's do (2 means "changes present").
            return if e.use_stderr() { 1 } else { 0 };
        }
    };
    let log_warning = logging::init(
        std::env::var("CAIRN_LOG").ok().as_deref(),
        std::env::var("CAIRN_LOG_PATH").ok().as_deref(),
    );
    let ctx = Context {
        state_dir: PathBuf::new(),
        state_root: PathBuf::new(),
        workspace: crate::engine::api::workspaces::DEFAULT_WORKSPACE.to_string(),
        workspace_source: crate::engine::api::workspaces::WorkspaceSource::Default,
        stdout: sink(std::io::stdout()),
        stderr: sink(std::io::stderr()),
        stdout_tty: std::io::stdout().is_terminal(),
        stderr_tty: std::io::stderr().is_terminal(),
        stdin_tty: std::io::stdin().is_terminal(),
    };
    if let Some(w) = log_warning {
        ctx.err(&format!("Warning: {w}\n"));
    }
    if let Some(dir) = &parsed.cli.chdir {
        if let Err(e) = std::env::set_current_dir(dir) {
            return ctx
                .fail(
                    Diagnostic::error(
                        "Invalid -chdir option",
                        format!("Cannot change to directory {}: {e}.", dir.display()),
                    ),
                    false,
                )
                .code();
        }
    }
    let state_dir = parsed
        .cli
        .state_dir
        .clone()
        .or_else(|| {
            std::env::var_os("CAIRN_STATE_DIR")
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        })
        .unwrap_or_else(|| PathBuf::from(".cairn"));
    let tf_workspace = std::env::var("TF_WORKSPACE").ok();
    let selection = crate::engine::api::workspaces::selected(&state_dir, tf_workspace.as_deref());
    let ctx = Context {
        state_dir: selection.state_dir,
        state_root: state_dir,
        workspace: selection.name,
        workspace_source: selection.source,
        ..ctx
    };
    tracing::debug!(state_dir = %ctx.state_dir.display(), workspace = %ctx.workspace, "starting");
    let env: std::collections::BTreeMap<String, String> = std::env::vars().collect();
    if touches_state_or_plans(&parsed.cli.command) {
        // The state's key, derived from here on while the configuration loads (`prepare`
        // below takes it over when its encryption block asks for exactly that key).
        crate::engine::api::encryption::derive_early(
            std::path::Path::new("."),
            &parsed.var_order,
            &env,
            &ctx.state_dir,
        );
    }
    if !matches!(
        parsed.cli.command,
        Command::Workspace(_)
            | Command::Version(_)
            | Command::Completions(_)
            | Command::Fmt(_)
            | Command::Stack(_)
    ) {
        // Commands that never touch the state make no workspace directory.
        let reads_state = !matches!(
            parsed.cli.command,
            Command::Inspect(_)
                | Command::Validate(_)
                | Command::Console(_)
                | Command::Get(_)
                | Command::Modules(_)
                | Command::Metadata(_)
                | Command::Login(_)
                | Command::Logout(_)
                | Command::Test(_)
        );
        if let Err(d) = workspace_cmds::check_selected(&ctx, reads_state) {
            return ctx.fail(d, false).code();
        }
    }
    if touches_state_or_plans(&parsed.cli.command) {
        // OpenTofu's `encryption` block (and TF_ENCRYPTION): resolved once, before any
        // command opens the state or a saved plan.
        if let Err((diags, map)) = crate::engine::api::encryption::prepare(
            std::path::Path::new("."),
            &parsed.var_order,
            &env,
            &ctx.workspace,
            Some(&ctx.state_dir),
        ) {
            ctx.report(&map, &diags, false);
            return Exit::Error.code();
        }
        // The backend block as this command evaluates it must be the one `init` recorded.
        if !matches!(parsed.cli.command, Command::Init(_)) {
            let inputs = ctx.early_inputs(&parsed.var_order);
            if let Err((diags, map)) = crate::engine::api::backend::check_backend_digest(
                std::path::Path::new("."),
                &ctx.state_root,
                &inputs,
            ) {
                ctx.report(&map, &diags, false);
                return Exit::Error.code();
            }
        }
    }
    let code = run(&ctx, parsed).code();
    // Which salt this state's key has, so that the next command derives it ahead.
    crate::engine::api::encryption::remember(&ctx.state_dir);
    // No plugin process outlives the command (also after errors).
    crate::provider::plugin::shutdown_all();
    code
}

/// Whether a command may open the state or a saved plan (and so needs its encryption).
fn touches_state_or_plans(c: &Command) -> bool {
    !matches!(
        c,
        Command::Workspace(_)
            | Command::Stack(_)
            | Command::Version(_)
            | Command::Completions(_)
            | Command::Fmt(_)
            | Command::Inspect(_)
            | Command::Validate(_)
            | Command::Console(_)
            | Command::Get(_)
            | Command::Modules(_)
            | Command::Metadata(_)
            | Command::Login(_)
            | Command::Logout(_)
            | Command::Test(_)
    )
}

/// Runs one parsed command.
pub fn run(ctx: &Context, parsed: Parsed) -> Exit {
    match parsed.cli.command {
        Command::Version(a) => version(ctx, a.json),
        Command::Completions(a) => completions(ctx, a.shell),
        Command::Show(a) => run_cmds::show(ctx, &a),
        Command::Validate(a) => config_cmds::validate(ctx, &a, &parsed.var_order),
        Command::Init(a) => config_cmds::init(ctx, &a, &parsed.var_order),
        Command::ForceUnlock(a) => config_cmds::force_unlock(ctx, &a),
        Command::State(c) => state_cmds::state(ctx, c),
        Command::History(a) => state_cmds::history(ctx, &a),
        Command::Log(a) => state_cmds::log(ctx, &a),
        Command::Output(a) => state_cmds::output(ctx, &a),
        Command::Plan(a) => {
            let mode = if a.destroy {
                PlanMode::Destroy
            } else if a.read_only {
                PlanMode::ReadOnly
            } else {
                PlanMode::Normal
            };
            if a.destroy && a.read_only {
                return ctx.fail(exclusive("-destroy", "-read-only"), a.walk.ui.no_color);
            }
            lifecycle::run(
                ctx,
                Invocation {
                    verb: Verb::Plan,
                    walk: &a.walk,
                    flags: Some(&a.plan),
                    mode,
                    vars: parsed.var_order,
                    plan_file: None,
                    out_file: a.out.as_deref(),
                    generate_config_out: a.generate_config_out.as_deref(),
                    detailed_exitcode: a.detailed_exitcode,
                    auto_approve: false,
                    preview: false,
                },
            )
        }
        Command::Apply(a) => {
            if a.destroy && a.read_only {
                return ctx.fail(exclusive("-destroy", "-read-only"), a.walk.ui.no_color);
            }
            let mode = if a.destroy {
                PlanMode::Destroy
            } else if a.read_only {
                PlanMode::ReadOnly
            } else {
                PlanMode::Normal
            };
            lifecycle::run(
                ctx,
                Invocation {
                    verb: if a.destroy {
                        Verb::Destroy
                    } else {
                        Verb::Apply
                    },
                    walk: &a.walk,
                    flags: Some(&a.plan),
                    mode,
                    vars: parsed.var_order,
                    plan_file: a.plan_file.as_deref(),
                    out_file: None,
                    generate_config_out: None,
                    detailed_exitcode: false,
                    auto_approve: a.auto_approve,
                    preview: false,
                },
            )
        }
        Command::Destroy(a) => lifecycle::run(
            ctx,
            Invocation {
                verb: Verb::Destroy,
                walk: &a.walk,
                flags: Some(&a.plan),
                mode: PlanMode::Destroy,
                vars: parsed.var_order,
                plan_file: None,
                out_file: None,
                generate_config_out: None,
                detailed_exitcode: false,
                auto_approve: a.auto_approve,
                preview: false,
            },
        ),
        Command::Refresh(a) => lifecycle::run(
            ctx,
            Invocation {
                verb: Verb::Refresh,
                walk: &a.walk,
                flags: None,
                mode: PlanMode::RefreshOnly,
                vars: parsed.var_order,
                plan_file: None,
                out_file: None,
                generate_config_out: None,
                detailed_exitcode: false,
                auto_approve: true,
                preview: a.preview,
            },
        ),
        Command::Import(a) => lifecycle::import(ctx, &a, parsed.var_order),
        Command::Console(a) => console::console(ctx, &a, parsed.var_order),
        Command::Test(a) => test_cmd::test(ctx, &a, parsed.var_order),
        Command::Graph(a) => run_cmds::graph(ctx, &a, parsed.var_order),
        Command::Inspect(a) => inspect::inspect(ctx, &a, parsed.var_order),
        Command::Ui(a) => ui_cmd::ui(ctx, &a),
        Command::Workspace(c) => workspace_cmds::workspace(ctx, c),
        Command::Stack(c) => stack_cmds::stack(ctx, c),
        Command::Fmt(a) => fmt_cmd::fmt(ctx, &a),
        Command::Taint(a) => taint_cmds::taint(ctx, &a, true),
        Command::Untaint(a) => taint_cmds::taint(ctx, &a, false),
        Command::Providers(a) => providers_cmds::providers(ctx, a),
        Command::Get(a) => providers_cmds::get(ctx, &a),
        Command::Modules(a) => providers_cmds::modules(ctx, &a),
        Command::Metadata(args::MetadataCommand::Functions(a)) => metadata::functions(ctx, &a),
        Command::Login(a) => login::login(ctx, &a),
        Command::Logout(a) => login::logout(ctx, &a),
    }
}

fn exclusive(a: &str, b: &str) -> Diagnostic {
    Diagnostic::error(
        "Incompatible options",
        format!("{a} and {b} cannot be used together: choose one."),
    )
}

/// The name a user typed for a command (`state list`), for messages and history.
pub fn command_name(c: &Command) -> &'static str {
    match c {
        Command::Init(_) => "init",
        Command::ForceUnlock(_) => "force-unlock",
        Command::Validate(_) => "validate",
        Command::Inspect(_) => "inspect",
        Command::Console(_) => "console",
        Command::Test(_) => "test",
        Command::Plan(_) => "plan",
        Command::Apply(_) => "apply",
        Command::Refresh(_) => "refresh",
        Command::Import(_) => "import",
        Command::Destroy(_) => "destroy",
        Command::Show(_) => "show",
        Command::Graph(_) => "graph",
        Command::State(s) => match s {
            args::StateCommand::List(_) => "state list",
            args::StateCommand::Show(_) => "state show",
            args::StateCommand::Rm(_) => "state rm",
            args::StateCommand::Mv(_) => "state mv",
            args::StateCommand::Pull(_) => "state pull",
            args::StateCommand::ImportTfstate(_) => "state import-tfstate",
            args::StateCommand::Check(_) => "state check",
            args::StateCommand::Verify(_) => "state verify",
            args::StateCommand::Recover(_) => "state recover",
            args::StateCommand::Push(_) => "state push",
            args::StateCommand::ReplaceProvider(_) => "state replace-provider",
        },
        Command::History(_) => "history",
        Command::Log(_) => "log",
        Command::Output(_) => "output",
        Command::Version(_) => "version",
        Command::Completions(_) => "completions",
        Command::Ui(_) => "ui",
        Command::Fmt(_) => "fmt",
        Command::Stack(s) => match s {
            args::StackCommand::Validate(_) => "stack validate",
            args::StackCommand::Init(_) => "stack init",
            args::StackCommand::Plan(_) => "stack plan",
            args::StackCommand::Apply(_) => "stack apply",
            args::StackCommand::Destroy(_) => "stack destroy",
            args::StackCommand::Show(_) => "stack show",
            args::StackCommand::Output(_) => "stack output",
            args::StackCommand::History(_) => "stack history",
        },
        Command::Workspace(w) => match w {
            args::WorkspaceCommand::New(_) => "workspace new",
            args::WorkspaceCommand::Select { .. } => "workspace select",
            args::WorkspaceCommand::List => "workspace list",
            args::WorkspaceCommand::Show => "workspace show",
            args::WorkspaceCommand::Delete { .. } => "workspace delete",
        },
        Command::Taint(_) => "taint",
        Command::Untaint(_) => "untaint",
        Command::Providers(p) => match p.command {
            None => "providers",
            Some(args::ProvidersCommand::Schema(_)) => "providers schema",
            Some(args::ProvidersCommand::Lock(_)) => "providers lock",
            Some(args::ProvidersCommand::Mirror(_)) => "providers mirror",
        },
        Command::Get(_) => "get",
        Command::Modules(_) => "modules",
        Command::Metadata(_) => "metadata functions",
        Command::Login(_) => "login",
        Command::Logout(_) => "logout",
    }
}

/// The platform as Terraform names it: `linux_amd64`.
fn platform() -> String {
    let arch = match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "x86" => "386",
        a => a,
    };
    format!("{}_{arch}", std::env::consts::OS)
}

fn version(ctx: &Context, json: bool) -> Exit {
    let v = env!("CARGO_PKG_VERSION");
    if json {
        let j = serde_json::json!({"cairn_version": v, "platform": platform()});
        let text = serde_json::to_string_pretty(&j).unwrap_or_default();
        ctx.out(&format!("{text}\n"));
    } else {
        ctx.out(&format!("Cairn v{v}\non {}\n", platform()));
    }
    Exit::Ok
}

fn completions(ctx: &Context, shell: args::Shell) -> Exit {
    use clap_complete::Shell as S;
    let shell = match shell {
        args::Shell::Bash => S::Bash,
        args::Shell::Zsh => S::Zsh,
        args::Shell::Fish => S::Fish,
    };
    let mut buf = Vec::new();
    clap_complete::generate(shell, &mut args::command(), "cairn", &mut buf);
    ctx.out(&String::from_utf8_lossy(&buf));
    Exit::Ok
}
