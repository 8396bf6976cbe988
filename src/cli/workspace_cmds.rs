//! `cairn workspace new|select|list|show|delete`: several states of one configuration, with
//! Terraform's commands, messages and `TF_WORKSPACE`. Where a workspace's state lives and
//! what opening it takes is the engine's business (`engine::api::workspaces`); this module
//! only checks names, decides by Terraform's rules, and prints.

use super::args::{WorkspaceCommand, WorkspaceNameArgs};
use super::output::Exit;
use super::Context;
use crate::diag::Diagnostic;
use crate::engine::api::workspaces::{
    self as workspace, WorkspaceSource as Source, DEFAULT_WORKSPACE as DEFAULT,
};

/// Checks the selected workspace's name before any command runs, and makes its state
/// directory when it does not exist yet: as Terraform's local backend does, selecting a
/// workspace (`TF_WORKSPACE`) that nobody created simply starts an empty state.
pub(crate) fn check_selected(ctx: &Context, make_dir: bool) -> Result<(), Diagnostic> {
    workspace::check_name(&ctx.workspace).map_err(|m| {
        let from = match ctx.workspace_source {
            Source::Env => "TF_WORKSPACE".to_string(),
            _ => workspace::environment_file(&ctx.state_root)
                .display()
                .to_string(),
        };
        Diagnostic::error(
            "Invalid workspace name",
            format!("{m} The name comes from {from}."),
        )
    })?;
    if make_dir && ctx.workspace != DEFAULT {
        workspace::ensure_dir(&ctx.state_root, &ctx.workspace)?;
    }
    Ok(())
}

/// Terraform's refusal to change the selection while `TF_WORKSPACE` overrides it.
fn overridden(what: &str) -> Diagnostic {
    Diagnostic::error(
        "Workspace overridden",
        format!(
            "The workspace is currently overridden using the TF_WORKSPACE environment \
             variable. {what}"
        ),
    )
}

fn doesnt_exist(name: &str) -> Diagnostic {
    Diagnostic::error(
        format!("Workspace {name:?} doesn't exist."),
        "You can create this workspace with the \"new\" subcommand or include the \
         \"-or-create\" flag with the \"select\" subcommand.",
    )
}

pub(crate) fn workspace(ctx: &Context, c: WorkspaceCommand) -> Exit {
    let root = &ctx.state_root;
    let result = match c {
        WorkspaceCommand::Show => {
            ctx.out(&format!("{}\n", ctx.workspace));
            return Exit::Ok;
        }
        WorkspaceCommand::List => workspace::list(root).map(|names| {
            let mut out = String::new();
            let mut names = names;
            if !names.contains(&ctx.workspace) {
                // TF_WORKSPACE names one that has no state yet.
                names.push(ctx.workspace.clone());
            }
            for n in names {
                let mark = if n == ctx.workspace { '*' } else { ' ' };
                out.push_str(&format!("{mark} {n}\n"));
            }
            ctx.out(&format!("{out}\n"));
            if ctx.workspace_source == Source::Env {
                ctx.err(
                    "The active workspace is being overridden using the TF_WORKSPACE \
                         environment variable.\n",
                );
            }
        }),
        WorkspaceCommand::New(a) => new(ctx, &a),
        WorkspaceCommand::Select { name, or_create } => select(ctx, &name, or_create),
        WorkspaceCommand::Delete { name, force } => delete(ctx, &name, force),
    };
    match result {
        Ok(()) => Exit::Ok,
        Err(d) => ctx.fail(d, false),
    }
}

fn checked_name(a: &WorkspaceNameArgs) -> Result<(), Diagnostic> {
    workspace::check_name(&a.name).map_err(|m| Diagnostic::error("Invalid workspace name", m))
}

/// Creates the workspace's state (so other machines see it at once on PostgreSQL).
fn create(ctx: &Context, a: &WorkspaceNameArgs) -> Result<(), Diagnostic> {
    workspace::create(&ctx.state_root, &a.name, a.lock_timeout, a.lock)
}

fn new(ctx: &Context, a: &WorkspaceNameArgs) -> Result<(), Diagnostic> {
    checked_name(a)?;
    if ctx.workspace_source == Source::Env && ctx.workspace != a.name {
        return Err(overridden(
            "You cannot create a new workspace when using this setting. To create a new \
             workspace, either unset this environment variable or update it to match the \
             workspace name you are trying to create, and then run this command again.",
        ));
    }
    if workspace::exists(&ctx.state_root, &a.name)? {
        return Err(Diagnostic::error(
            format!("Workspace {:?} already exists", a.name),
            "Select it with `cairn workspace select NAME`.",
        ));
    }
    create(ctx, a)?;
    workspace::select(&ctx.state_root, &a.name)?;
    ctx.out(&format!(
        "Created and switched to workspace {:?}!\n\nYou're now on a new, empty workspace. \
         Workspaces isolate their state,\nso if you run \"cairn plan\" Cairn will not see any \
         existing state\nfor this configuration.\n",
        a.name
    ));
    Ok(())
}

fn select(ctx: &Context, a: &WorkspaceNameArgs, or_create: bool) -> Result<(), Diagnostic> {
    checked_name(a)?;
    if ctx.workspace_source == Source::Env {
        return Err(overridden(
            "To select a new workspace, either update this environment variable or unset it \
             and then run this command again.",
        ));
    }
    if !workspace::exists(&ctx.state_root, &a.name)? {
        if !or_create {
            return Err(doesnt_exist(&a.name));
        }
        create(ctx, a)?;
        workspace::select(&ctx.state_root, &a.name)?;
        ctx.out(&format!(
            "Created and switched to workspace {:?}!\n\nYou're now on a new, empty \
             workspace. Workspaces isolate their state,\nso if you run \"cairn plan\" Cairn \
             will not see any existing state\nfor this configuration.\n",
            a.name
        ));
        return Ok(());
    }
    // A workspace another machine created (PostgreSQL) gets its local directory here.
    workspace::ensure_dir(&ctx.state_root, &a.name)?;
    workspace::select(&ctx.state_root, &a.name)?;
    ctx.out(&format!("Switched to workspace {:?}.\n", a.name));
    Ok(())
}

fn delete(ctx: &Context, a: &WorkspaceNameArgs, force: bool) -> Result<(), Diagnostic> {
    checked_name(a)?;
    if a.name == ctx.workspace {
        return Err(Diagnostic::error(
            format!("Workspace {:?} is your active workspace.", a.name),
            "You cannot delete the currently active workspace. Please switch to another \
             workspace and try again.",
        ));
    }
    if a.name == DEFAULT {
        return Err(Diagnostic::error(
            "Cannot delete the default workspace",
            "The default workspace always exists: it is the state of the state directory \
             itself.",
        ));
    }
    if !workspace::exists(&ctx.state_root, &a.name)? {
        return Err(doesnt_exist(&a.name));
    }
    // Read under the lock: no run may be writing the workspace being deleted.
    let tracked = workspace::tracked(&ctx.state_root, &a.name, a.lock_timeout, a.lock)?;
    if !tracked.is_empty() && !force {
        return Err(Diagnostic::error(
            "Workspace is not empty",
            format!(
                "Workspace {:?} is currently tracking the following resource instances:\n{}\n\n\
                 Deleting this workspace would cause Cairn to lose track of any associated \
                 remote objects, which would then require you to delete them manually outside \
                 of Cairn. You should destroy these objects with Cairn before deleting the \
                 workspace.\n\nIf you want to delete this workspace anyway, and have Cairn \
                 forget about these managed objects, use the -force option to disable this \
                 safety check.",
                a.name,
                tracked
                    .iter()
                    .map(|t| format!("  - {t}"))
                    .collect::<Vec<_>>()
                    .join("\n")
            ),
        ));
    }
    workspace::delete(&ctx.state_root, &a.name)?;
    ctx.out(&format!("Deleted workspace {:?}!\n", a.name));
    if !tracked.is_empty() {
        ctx.out(&format!(
            "WARNING: {:?} was non-empty.\nThe resources managed by the deleted workspace may \
             still exist,\nbut are no longer manageable by Cairn since the state has\nbeen \
             deleted.\n",
            a.name
        ));
    }
    Ok(())
}
