//! Provisioners: `provisioner "local-exec"` runs a command on this machine after its object
//! is created (or, `when = destroy`, before it is deleted), as Terraform's does.
//!
//! - The arguments (`command`, `interpreter`, `environment`, `working_dir`, `quiet`) are
//!   evaluated when the provisioner runs, with `self` the object (created, or about to be
//!   deleted) and the instance's `count.index` / `each`.
//! - The command runs under `interpreter` (default `/bin/sh -c`), in `working_dir` (default the
//!   working directory), with Cairn's environment plus `environment`. Each line it prints, on
//!   standard output or error, is a progress line (`ADDR (local-exec): …`); with a sensitive
//!   value in the arguments the output is suppressed.
//! - A failure (the command cannot start, or exits non-zero) fails the instance unless
//!   `on_failure = continue`: after a create, the object is kept in state tainted (the next
//!   plan replaces it); before a delete, the object is not deleted.
//! - A destroy-time provisioner runs only while its resource block is in the configuration
//!   (Terraform's rule): an object whose block was removed is deleted without it.
//!
//! `apply::operation::Operation::run` calls [`run`] around the provider's create and delete.

use super::core::{Ctx, InstanceScope, SelfScope};
use super::observer::Progress;
use super::values::Repetition;
use crate::addr::ResourceInstanceAddr;
use crate::config::ResourceKey;
use crate::diag::{Diagnostic, Diagnostics};
use crate::eval::eval_config_body;
use crate::provider::schema_util::TypeSchema;
use crate::value::{Type, Value};
use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};

/// `local-exec`'s arguments, as Terraform's provisioner schema has them.
fn local_exec_schema() -> &'static TypeSchema {
    static SCHEMA: OnceLock<TypeSchema> = OnceLock::new();
    SCHEMA.get_or_init(|| {
        TypeSchema::new("Runs a command on the machine running Cairn.")
            .required("command", Type::String, "The command to run.")
            .optional(
                "interpreter",
                Type::List(Box::new(Type::String)),
                "The program and its first arguments (default: /bin/sh -c).",
            )
            .optional(
                "environment",
                Type::Map(Box::new(Type::String)),
                "Variables added to the command's environment.",
            )
            .optional("working_dir", Type::String, "Where the command runs.")
            .optional("quiet", Type::Bool, "Do not print the command.")
    })
}

/// Runs the resource's provisioners of one kind (`destroy`: the destroy-time ones) for the
/// object `this` of instance `addr`. An error is the first failure that counts.
pub(crate) async fn run(
    ctx: &Arc<Ctx>,
    addr: &ResourceInstanceAddr,
    rep: &Repetition,
    this: &Value,
    destroy: bool,
) -> Result<(), Diagnostics> {
    let key = ResourceKey {
        mode: addr.resource.mode,
        type_: addr.resource.type_.clone(),
        name: addr.resource.name.clone(),
    };
    let static_module = addr.resource.module.without_keys();
    let Some(res) = ctx
        .config
        .module(&static_module)
        .and_then(|m| m.resources.get(&key))
    else {
        return Ok(());
    };
    for p in res
        .provisioners
        .iter()
        .filter(|p| p.when_destroy == destroy)
    {
        let config = {
            let values = ctx.values.read().expect("values lock");
            let paths = ctx.paths(&static_module);
            let scope = SelfScope {
                inner: InstanceScope {
                    values: &values,
                    module: &addr.resource.module,
                    repetition: rep,
                    file: p.file,
                    paths: &paths,
                },
                this,
            };
            eval_config_body(
                &p.body,
                Some(&local_exec_schema().block),
                &scope,
                Some(p.span),
                false,
            )
        }
        .map_err(|d| {
            d.into_iter()
                .map(|x| x.with_address(addr))
                .collect::<Diagnostics>()
        })?;
        let failed = |detail: String| {
            Diagnostics::from(
                Diagnostic::error("local-exec provisioner error", detail)
                    .with_span(Some(p.span))
                    .with_address(addr),
            )
        };
        if let Some(path) = config.unknown_paths().first() {
            return Err(failed(format!(
                "The provisioner's argument {path} is not known: it depends on a value that \
                 failed or was not applied."
            )));
        }
        if ctx.limits.stopped() {
            return Err(failed(
                "The provisioner did not run: the run was interrupted.".into(),
            ));
        }
        let outcome = local_exec(ctx, addr, &p.kind, &config).await;
        ctx.observer.event(Progress::ProvisionDone {
            addr: addr.clone(),
            kind: p.kind.clone(),
            failed: outcome.is_err(),
        });
        match outcome {
            Ok(()) => {}
            Err(detail) if p.on_failure_continue => {
                tracing::warn!(%addr, "local-exec failed, on_failure = continue: {detail}");
            }
            Err(detail) => return Err(failed(detail)),
        }
    }
    Ok(())
}

/// Runs one `local-exec`; the error is Terraform's detail for it.
async fn local_exec(
    ctx: &Arc<Ctx>,
    addr: &ResourceInstanceAddr,
    kind: &str,
    config: &Value,
) -> Result<(), String> {
    let sensitive = config.contains_sensitive();
    let (config, _) = config.clone().deep_unmark();
    let get = |name: &str| config.get(name).filter(|v| !v.is_null());
    let command = get("command")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let strings = |v: Option<&Value>| -> Vec<String> {
        match v {
            Some(Value::List(items) | Value::Tuple(items)) => items
                .iter()
                .filter_map(|i| i.as_str().map(str::to_string))
                .collect(),
            _ => Vec::new(),
        }
    };
    let mut argv = strings(get("interpreter"));
    if argv.is_empty() {
        argv = vec!["/bin/sh".into(), "-c".into()];
    }
    argv.push(command.clone());
    let env: BTreeMap<String, String> = match get("environment") {
        Some(Value::Map(m) | Value::Object(m)) => m
            .iter()
            .filter_map(|(k, v)| v.as_str().map(|s| (k.clone(), s.to_string())))
            .collect(),
        _ => BTreeMap::new(),
    };
    let dir = get("working_dir")
        .and_then(Value::as_str)
        .map(|d| ctx.cwd.join(d))
        .unwrap_or_else(|| ctx.cwd.clone());
    let quiet = get("quiet").and_then(Value::as_bool).unwrap_or(false);
    let say = |line: String| {
        ctx.observer.event(Progress::ProvisionOutput {
            addr: addr.clone(),
            kind: kind.to_string(),
            line,
        })
    };
    ctx.observer.event(Progress::ProvisionStart {
        addr: addr.clone(),
        kind: kind.to_string(),
    });
    if quiet {
        say("(output suppressed due to quiet = true)".into());
    } else if sensitive {
        say("(output suppressed due to sensitive value in config)".into());
    } else {
        let quoted: Vec<String> = argv.iter().map(|a| format!("{a:?}")).collect();
        say(format!("Executing: [{}]", quoted.join(" ")));
    }
    // Standard output and error share one pipe, as Terraform's (and a terminal's) do: the
    // lines keep the order the command wrote them in.
    let spawn_err = |e: std::io::Error| format!("Error running command '{command}': {e}. Output: ");
    let (reader, writer) = std::io::pipe().map_err(spawn_err)?;
    let mut child = {
        let mut cmd = tokio::process::Command::new(&argv[0]);
        cmd.args(&argv[1..])
            .envs(&env)
            .current_dir(&dir)
            .stdin(std::process::Stdio::null())
            .stdout(writer.try_clone().map_err(spawn_err)?)
            .stderr(writer)
            // A run abandoned by a second Ctrl-C leaves no command behind.
            .kill_on_drop(true);
        cmd.spawn().map_err(spawn_err)?
        // `cmd` and its copies of the pipe's write end are dropped here: the reader sees the
        // end when the command (and what it started) closes its own.
    };
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<String>();
    tokio::task::spawn_blocking(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(reader).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut output = String::new();
    while let Some(line) = rx.recv().await {
        if !sensitive && !quiet {
            say(line.clone());
        }
        output.push_str(&line);
        output.push('\n');
    }
    let status = child
        .wait()
        .await
        .map_err(|e| format!("Error running command '{command}': {e}. Output: {output}"))?;
    if status.success() {
        return Ok(());
    }
    let how = match status.code() {
        Some(c) => format!("exit status {c}"),
        None => "killed by a signal".to_string(),
    };
    let shown = if sensitive {
        "(output suppressed due to sensitive value in config)".to_string()
    } else {
        output.trim_end().to_string()
    };
    Err(format!(
        "Error running command '{command}': {how}. Output: {shown}"
    ))
}
