//! `cairn state push PATH` and `cairn state replace-provider FROM TO`: state edits that replace
//! what the state holds (the whole state; a provider), each a run of its own in the log
//! (`engine::push`, through `engine::edit`). Messages, prompt and exit codes are Terraform's.

use super::args::{StatePushArgs, StateReplaceProviderArgs};
use super::output::Exit;
use super::state_edit::edit;
use super::Context;
use crate::diag::Diagnostic;
use crate::engine::api::{Push, StateEdit};
use cairn_state::addr::provider_source::SourceAddr;
use std::collections::BTreeMap;
use std::io::Read as _;
use std::io::Write as _;

/// `state push PATH` (`-` reads standard input).
pub(crate) fn push(ctx: &Context, a: &StatePushArgs) -> Exit {
    let text = if a.path == "-" {
        let mut s = String::new();
        std::io::stdin().read_to_string(&mut s).map(|_| s)
    } else {
        std::fs::read_to_string(&a.path)
    };
    let text = match text {
        Ok(t) => t,
        Err(e) => {
            return ctx.fail(
                Diagnostic::error(
                    "Cannot read the state to push",
                    format!("Reading {}: {e}.", a.path),
                ),
                false,
            )
        }
    };
    let doc: serde_json::Value = match serde_json::from_str(&text) {
        Ok(d) => d,
        Err(e) => {
            return ctx.fail(
                Diagnostic::error(
                    "Error reading source state",
                    format!("{:?} is not a Terraform state: {e}.", a.path),
                ),
                false,
            )
        }
    };
    let cwd = std::env::current_dir().unwrap_or_else(|_| ".".into());
    let env: BTreeMap<String, String> = std::env::vars().collect();
    let import = match crate::engine::api::read_tfstate(&text, &cwd, &env) {
        Ok(i) => i,
        Err(d) => return ctx.fail(d, false),
    };
    let push = Push {
        import,
        lineage: doc["lineage"].as_str().map(str::to_string),
        serial: doc["serial"].as_u64().unwrap_or(0),
        content: serde_json::json!({
            "resources": doc["resources"],
            "outputs": doc["outputs"],
        }),
        force: a.force,
    };
    match edit(
        ctx,
        "state push",
        vec![a.path.clone()],
        &a.lock,
        false,
        StateEdit::Push(Box::new(push)),
    ) {
        // As Terraform, a push prints nothing when it succeeds.
        Ok(_) => Exit::Ok,
        Err(d) => ctx.fail(d, false),
    }
}

/// A provider source address as `state replace-provider` takes it, or Terraform's error.
fn provider_arg(which: &str, s: &str) -> Result<SourceAddr, Diagnostic> {
    SourceAddr::parse(s)
        .map_err(|e| Diagnostic::error(format!("Invalid {which:?} provider {s:?}"), e))
}

/// `state replace-provider FROM TO`: shows what changes, asks (unless `-auto-approve`), and
/// records the replacement.
pub(crate) fn replace_provider(ctx: &Context, a: &StateReplaceProviderArgs) -> Exit {
    let (from, to) = match (provider_arg("from", &a.from), provider_arg("to", &a.to)) {
        (Ok(f), Ok(t)) => (f, t),
        (Err(d), _) | (_, Err(d)) => return ctx.fail(d, false),
    };
    let snap = match ctx.read_store("state replace-provider") {
        Ok(Some(store)) => store.into_snapshot(),
        Ok(None) => cairn_state::Snapshot::new(),
        Err(d) => return ctx.fail(d, false),
    };
    // The state names a provider by its type; its source address is the configuration's
    // (`required_providers`, else Terraform's implied `hashicorp/TYPE`). What is under FROM's
    // type changes when the configuration names FROM there, or already TO.
    let sources = ctx.state_view(&snap).sources;
    let source_of = |package: &str| {
        sources
            .get(package)
            .and_then(|s| SourceAddr::parse(s).ok())
            .unwrap_or_else(|| SourceAddr::implied(package))
    };
    let named = source_of(&from.type_);
    let resources = if named == from || named == to {
        crate::engine::api::replaced_resources(&snap, &from.type_)
    } else {
        Vec::new()
    };
    if resources.is_empty() {
        ctx.out("No matching resources found.\n");
        return Exit::Ok;
    }
    let mut text = format!(
        "Cairn will perform the following actions:\n\n  ~ Updating provider:\n    - {from}\n    + {to}\n\nChanging {} resources:\n\n",
        resources.len()
    );
    for r in &resources {
        text.push_str(&format!("  {r}\n"));
    }
    text.push('\n');
    ctx.out(&text);
    if !a.auto_approve {
        ctx.out("Do you want to make these changes?\nOnly 'yes' will be accepted to continue.\n\nEnter a value: ");
        let _ = std::io::stdout().flush();
        let mut line = String::new();
        match std::io::stdin().read_line(&mut line) {
            Ok(0) | Err(_) => {
                ctx.err("Error asking for approval: EOF\n");
                return Exit::Error;
            }
            Ok(_) if line.trim() == "yes" => {}
            Ok(_) => {
                ctx.out("Cancelled replacing providers.\n");
                return Exit::Ok;
            }
        }
    }
    let source = format!("{from} -> {to}");
    match edit(
        ctx,
        "state replace-provider",
        vec![a.from.clone(), a.to.clone()],
        &a.lock,
        false,
        StateEdit::ReplaceProvider {
            from: from.type_.clone(),
            to: to.type_.clone(),
            source,
        },
    ) {
        Ok(events) if events.is_empty() => {
            ctx.out("No matching resources found.\n");
            Exit::Ok
        }
        Ok(_) => {
            ctx.out(&format!(
                "Successfully replaced provider for {} resources.\n",
                resources.len()
            ));
            Exit::Ok
        }
        Err(d) => ctx.fail(d, false),
    }
}
