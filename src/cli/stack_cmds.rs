//! `cairn stack`: Terraform Stacks' configuration (`*.tfcomponent.hcl`, `*.tfdeploy.hcl`)
//! in the working directory. `stack validate` loads and checks it (`config::stack`) and
//! prints its diagnostics as `validate` does, or the components in dependency order.

use super::args::{StackCommand, ValidateArgs};
use super::config_cmds::green_bold;
use super::output::Exit;
use super::Context;
use serde_json::json;

pub(crate) fn stack(ctx: &Context, c: StackCommand) -> Exit {
    match c {
        StackCommand::Validate(a) => validate(ctx, &a),
    }
}

fn validate(ctx: &Context, a: &ValidateArgs) -> Exit {
    let dir = std::env::current_dir().unwrap_or_else(|_| std::path::PathBuf::from("."));
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
