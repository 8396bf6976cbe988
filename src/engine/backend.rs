//! Where the state lives: `cairn init`'s backend configuration (`backend "pg"`,
//! `-backend-config`) and its migration of every workspace's log between stores
//! (`-migrate-state`), the state directory `init` creates, and `cairn force-unlock`. The CLI
//! asks and prints; the stores are opened here.

use super::journal::state_diag;
use crate::config::Config;
use crate::diag::Diagnostic;
use cairn_state::backend_config::{self, Backend, PgSettings, S3Settings};
use cairn_state::store::Remote;
use cairn_state::workspace;
use cairn_state::{OpenOptions, StateError, Store};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// What `cairn init` asks of the backend.
#[derive(Clone, Debug)]
pub struct BackendRequest<'a> {
    /// The state directory as configured (every workspace lives under it).
    pub state_root: &'a Path,
    /// The `-backend-config` arguments, in order (`KEY=VALUE` or a file).
    pub backend_config: &'a [String],
    /// `-migrate-state`: copy every workspace's log into the new backend.
    pub migrate_state: bool,
    /// `-reconfigure`: use the new backend and leave the old state where it is.
    pub reconfigure: bool,
    pub lock_timeout: Duration,
}

/// One workspace's log copied to the new backend.
#[derive(Clone, Debug)]
pub struct Migration {
    pub workspace: String,
    pub events: u64,
    /// Where the log was and is now, for people.
    pub from: String,
    pub to: String,
    /// The checksum chain's last link, hex.
    pub checksum: String,
    /// Where the local log was kept as a backup (a migration away from sled).
    pub backup: Option<PathBuf>,
}

/// What configuring the backend did: nothing (`None`: it is the recorded one), or recorded a
/// new one after copying these logs.
#[derive(Clone, Debug, Default)]
pub struct BackendChange {
    /// How many workspaces the state has.
    pub workspaces: usize,
    pub migrations: Vec<Migration>,
}

fn unix_ms() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or(0)
}

/// The environment, as the backend reads it.
fn env_var(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

/// Opens workspace `name`'s state in `backend` (whatever the state directory names).
/// The shared store workspace `name` of `backend` is in (`None`: the local sled log).
fn remote_of(
    name: &str,
    backend: &Backend,
) -> Result<Option<cairn_state::store::Remote>, Diagnostic> {
    Ok(match backend {
        Backend::Local => None,
        Backend::Pg(s) => {
            let mut cfg = s.resolve(&env_var).map_err(|e| state_diag(&e))?;
            cfg.schema = workspace::pg_schema(&cfg.schema, name).map_err(|e| state_diag(&e))?;
            Some(cairn_state::store::Remote::Pg(cfg))
        }
        Backend::S3(s) => {
            let cfg = s.resolve(&env_var).map_err(|e| state_diag(&e))?;
            Some(cairn_state::store::Remote::S3(Box::new(
                cfg.in_workspace(name),
            )))
        }
    })
}

fn open_backend(
    root: &Path,
    name: &str,
    backend: &Backend,
    opts: &OpenOptions,
) -> Result<Option<Store>, Diagnostic> {
    let dir = workspace::dir(root, name);
    let opened = match backend {
        Backend::Local => Store::open_local(&dir, opts),
        Backend::Pg(s) => {
            let mut cfg = s.resolve(&env_var).map_err(|e| state_diag(&e))?;
            cfg.schema = workspace::pg_schema(&cfg.schema, name).map_err(|e| state_diag(&e))?;
            Store::open_pg(&cfg, &dir, opts)
        }
        Backend::S3(s) => {
            let cfg = s.resolve(&env_var).map_err(|e| state_diag(&e))?;
            Store::open_s3(&cfg.in_workspace(name), &dir, opts)
        }
    };
    match opened {
        Ok((store, _)) => Ok(Some(store)),
        Err(StateError::NotFound { .. }) if !opts.write => Ok(None),
        Err(e) => Err(state_diag(&e)),
    }
}

/// An argument whose `-backend-config=KEY=VALUE` value is an HCL expression, as Terraform
/// parses a value of a type other than a string: objects (`assume_role={role_arn="…"}`,
/// `endpoints={s3="…"}`) and lists of paths.
fn takes_expression(key: &str) -> bool {
    backend_config::S3_OBJECT_ARGUMENTS.contains(&key)
        || (key.starts_with("shared_") && key.ends_with("_files"))
        || matches!(
            key,
            "assume_role.policy_arns"
                | "assume_role.tags"
                | "assume_role.transitive_tag_keys"
                | "assume_role_with_web_identity.policy_arns"
        )
}

/// A constant value as a backend argument's text: strings as they are, numbers and bools as
/// written, lists and objects as JSON.
fn argument_text(v: &crate::value::Value) -> Option<String> {
    use crate::value::Value;
    match v.unmarked() {
        Value::Null(_) => None,
        Value::String(s) => Some(s.clone()),
        Value::Bool(b) => Some(b.to_string()),
        Value::Number(n) => Some(n.to_string()),
        other => Some(other.to_json().to_string()),
    }
}

/// Where byte `at` of `text` is, as `line:column` (1-based).
fn line_col(text: &str, at: usize) -> String {
    let before = &text[..at.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    format!("{line}:{col}")
}

/// Parses `-backend-config` arguments: `KEY=VALUE` pairs, or files in HCL as Terraform reads
/// them — `key = "value"` attributes, objects (`endpoints = { s3 = "…" }`, `assume_role = {
/// … }`, or the same as blocks), lists — with constant values. Later values win.
fn backend_config_pairs(args: &[String], base: &Path) -> Result<BTreeMap<String, String>, String> {
    use hcl_edit::Span as _;
    let mut out = BTreeMap::new();
    for arg in args {
        let as_file = base.join(arg);
        match arg.split_once('=') {
            Some((k, v)) if !as_file.is_file() => {
                let k = k.trim();
                let text = if takes_expression(k) {
                    let expr = hcl_edit::parser::parse_expr(v)
                        .map_err(|e| format!("-backend-config={k}=…: not an HCL value ({e})"))?;
                    let value =
                        crate::eval::type_constraints::const_value(&expr, crate::diag::FileId(0))
                            .map_err(|d| format!("-backend-config={k}=…: {}", d.summary))?;
                    argument_text(&value).unwrap_or_default()
                } else {
                    v.to_string()
                };
                out.insert(k.to_string(), text);
            }
            _ => {
                let text = std::fs::read_to_string(&as_file).map_err(|e| {
                    format!("-backend-config={arg}: not KEY=VALUE and not a readable file ({e})")
                })?;
                let shown = as_file.display();
                let body = hcl_edit::parser::parse_body(&text)
                    .map_err(|e| format!("{shown}: not an HCL file of arguments: {e}"))?;
                let at = |span: Option<std::ops::Range<usize>>| {
                    span.map_or_else(|| "1:1".to_string(), |r| line_col(&text, r.start))
                };
                for a in body.attributes() {
                    let value = crate::eval::type_constraints::const_value(
                        &a.value,
                        crate::diag::FileId(0),
                    )
                    .map_err(|d| {
                        format!(
                            "{shown}:{}: {}: {} (a -backend-config file takes constant values)",
                            at(a.value.span()),
                            d.summary,
                            d.detail
                        )
                    })?;
                    if let Some(t) = argument_text(&value) {
                        out.insert(a.key.as_str().to_string(), t);
                    }
                }
                for b in body.blocks() {
                    // `endpoints { s3 = "…" }`: an object written as a block.
                    let mut obj = serde_json::Map::new();
                    for a in b.body.attributes() {
                        let value = crate::eval::type_constraints::const_value(
                            &a.value,
                            crate::diag::FileId(0),
                        )
                        .map_err(|d| {
                            format!(
                                "{shown}:{}: {}: {}",
                                at(a.value.span()),
                                d.summary,
                                d.detail
                            )
                        })?;
                        obj.insert(a.key.as_str().to_string(), value.to_json());
                    }
                    if b.body.blocks().next().is_some() || !b.labels.is_empty() {
                        return Err(format!(
                            "{shown}:{}: the block {} takes attributes only",
                            at(b.span()),
                            b.ident.as_str()
                        ));
                    }
                    out.insert(
                        b.ident.as_str().to_string(),
                        serde_json::Value::Object(obj).to_string(),
                    );
                }
            }
        }
    }
    Ok(out)
}

/// The backend the configuration's `backend` block and `-backend-config` name.
fn wanted_backend(
    config: &Config,
    pairs: &BTreeMap<String, String>,
) -> Result<Backend, Diagnostic> {
    match &config.root.backend {
        Some(b) if b.kind == "pg" => {
            let mut settings = PgSettings::default();
            for (k, v) in &b.args {
                settings.set(k, v).map_err(|m| {
                    Diagnostic::error("Invalid backend configuration", m).with_span(Some(b.span))
                })?;
            }
            for (k, v) in pairs {
                settings
                    .set(k, v)
                    .map_err(|m| Diagnostic::error("Invalid -backend-config", m))?;
            }
            Ok(Backend::Pg(settings))
        }
        Some(b) if b.kind == "s3" => {
            let mut settings = S3Settings::default();
            for (k, v) in &b.args {
                settings.set(k, v).map_err(|m| {
                    Diagnostic::error("Invalid backend configuration", m).with_span(Some(b.span))
                })?;
            }
            for (k, v) in pairs {
                settings
                    .set(k, v)
                    .map_err(|m| Diagnostic::error("Invalid -backend-config", m))?;
            }
            // Resolved once now, so that a missing bucket, region or credential is init's
            // error, not the first command's.
            settings.resolve(&env_var).map_err(|e| {
                Diagnostic::error("Invalid backend configuration", e.to_string())
                    .with_span(Some(b.span))
            })?;
            Ok(Backend::S3(settings))
        }
        _ if !pairs.is_empty() => Err(Diagnostic::error(
            "Invalid -backend-config",
            "-backend-config sets arguments of a backend block, and the configuration has                  none: add terraform { backend \"pg\" {} } or backend \"s3\" {}",
        )),
        _ => Ok(Backend::Local),
    }
}

/// Resolves the backend the configuration and `-backend-config` name and records it in the
/// state directory; with `-migrate-state`, first copies every workspace's state from the
/// previous backend into it (Terraform migrates them all too). `None`: the backend is the
/// one already recorded.
pub fn configure_backend(
    config: &Config,
    req: &BackendRequest,
) -> Result<Option<BackendChange>, Diagnostic> {
    let pairs = backend_config_pairs(req.backend_config, Path::new("."))
        .map_err(|m| Diagnostic::error("Invalid -backend-config", m))?;
    let wanted = wanted_backend(config, &pairs)?;
    record_backend(wanted, req)
}

/// `cairn stack init -backend=KIND`: the backend a stack's states live in, named on the
/// command line (a stack has no `backend` block) and set with `-backend-config`, recorded
/// in the stack's state directory as `init` records a root module's. `None`: it is the one
/// already recorded.
pub fn configure_named_backend(
    kind: &str,
    req: &BackendRequest,
) -> Result<Option<BackendChange>, Diagnostic> {
    let pairs = backend_config_pairs(req.backend_config, Path::new("."))
        .map_err(|m| Diagnostic::error("Invalid -backend-config", m))?;
    let invalid = |m: String| Diagnostic::error("Invalid -backend-config", m);
    let wanted = match kind {
        "local" if pairs.is_empty() => Backend::Local,
        "local" => {
            return Err(invalid(
                "-backend-config sets arguments of the pg or s3 backend; the local backend \
                 takes none."
                    .into(),
            ))
        }
        "pg" => {
            let mut settings = PgSettings::default();
            for (k, v) in &pairs {
                settings.set(k, v).map_err(invalid)?;
            }
            Backend::Pg(settings)
        }
        "s3" => {
            let mut settings = S3Settings::default();
            for (k, v) in &pairs {
                settings.set(k, v).map_err(invalid)?;
            }
            settings
                .resolve(&env_var)
                .map_err(|e| invalid(e.to_string()))?;
            Backend::S3(settings)
        }
        other => {
            return Err(Diagnostic::error(
                "Invalid -backend",
                format!("There is no backend named {other:?}: choose local, pg or s3."),
            ))
        }
    };
    record_backend(wanted, req)
}

/// Records `wanted` as the backend of `req.state_root`, migrating every workspace's log
/// when asked (see [`configure_backend`]).
fn record_backend(
    wanted: Backend,
    req: &BackendRequest,
) -> Result<Option<BackendChange>, Diagnostic> {
    let root = req.state_root;
    let current = backend_config::read_backend(root).map_err(|e| state_diag(&e))?;
    if current == wanted {
        return Ok(None);
    }
    let opts = |write| OpenOptions {
        command: "init".into(),
        lock_timeout: req.lock_timeout,
        write,
        skip_lock: false,
        encryption: crate::engine::encryption::state(),
    };
    // `-reconfigure` leaves the previous state where it is: it is not even read (it may be
    // out of reach, which may be why the backend changes).
    let names = match req.reconfigure {
        true => Vec::new(),
        false => workspace::list(root).map_err(|e| state_diag(&e))?,
    };
    let mut with_events = Vec::new();
    for name in &names {
        let previous = open_backend(root, name, &current, &opts(false))?;
        let events = previous.as_ref().map_or(0, |s| s.head());
        if events > 0 {
            let location = previous.as_ref().map(|s| s.location()).unwrap_or_default();
            with_events.push((name.clone(), events, location));
        }
    }
    if let Some((_, events, location)) = with_events
        .first()
        .filter(|_| !req.migrate_state && !req.reconfigure)
    {
        return Err(Diagnostic::error(
            "Backend configuration changed",
            format!(
                "The state in {location} has {events} event(s) and the configuration now names                  another backend. Run `cairn init -migrate-state` to copy the whole log there,                  or `cairn init -reconfigure` to use the new backend and leave that state                  where it is."
            ),
        ));
    }
    let mut change = BackendChange {
        workspaces: names.len(),
        migrations: Vec::new(),
    };
    if req.migrate_state {
        let stamp = unix_ms();
        for (name, _, _) in &with_events {
            let m = migrate(root, name, (&current, &wanted), stamp, &opts)?;
            change.migrations.push(m);
        }
    }
    backend_config::write_backend(root, &wanted).map_err(|e| state_diag(&e))?;
    Ok(Some(change))
}

/// Copies workspace `name`'s log from one backend to the other, holding both locks for the
/// whole copy; a local log moved away is kept as a backup, out of the way of a later
/// migration back.
fn migrate(
    root: &Path,
    name: &str,
    (current, wanted): (&Backend, &Backend),
    stamp: u128,
    opts: &dyn Fn(bool) -> OpenOptions,
) -> Result<Migration, Diagnostic> {
    workspace::ensure_dir(root, name).map_err(|e| state_diag(&e))?;
    let source = open_backend(root, name, current, &opts(true))?.expect("a write open creates");
    let mut target = open_backend(root, name, wanted, &opts(true))?.expect("a write open creates");
    let m = cairn_state::migrate::copy_log(&source, &mut target).map_err(|e| state_diag(&e))?;
    let mut migration = Migration {
        workspace: name.to_string(),
        events: m.events,
        from: source.location(),
        to: target.location(),
        checksum: m.checksum,
        backup: None,
    };
    drop((source, target));
    // The plan-only runs recorded beside the log go with it.
    let dir = workspace::dir(root, name);
    cairn_state::plan_runs::copy(
        &dir,
        remote_of(name, current)?.as_ref(),
        remote_of(name, wanted)?.as_ref(),
    )
    .map_err(|e| state_diag(&e))?;
    if *current == Backend::Local {
        let backup = dir.join(format!("migrated-{stamp}"));
        let kept = |e| state_diag(&StateError::io_error("cannot keep the local log", e));
        std::fs::create_dir_all(&backup).map_err(kept)?;
        // The log's head goes with its log (a head left behind would call the next local
        // log damaged), and so do the plan records.
        for part in ["log", "checkpoints", "log-head", "plans"] {
            let from = dir.join(part);
            if from.exists() {
                std::fs::rename(&from, backup.join(part)).map_err(kept)?;
            }
        }
        migration.backup = Some(backup);
    }
    Ok(migration)
}

/// What `init` found or made at the selected workspace's state directory.
#[derive(Clone, Debug)]
pub enum StateStatus {
    Found {
        location: String,
        events: u64,
        instances: usize,
    },
    Created {
        location: String,
    },
}

/// Creates the state (directory, log or schema) if it does not exist yet and says what is
/// there; the store's recovery warnings are returned for the caller to show.
pub fn ensure_state(
    state_dir: &Path,
    command: &str,
) -> Result<(StateStatus, Vec<String>), Diagnostic> {
    if let Some((state, warnings)) = super::state_read::StateRead::open(state_dir, command)? {
        let s = state.snapshot();
        let status = StateStatus::Found {
            location: state.location(),
            events: s.head,
            instances: s.resources.len(),
        };
        return Ok((status, warnings));
    }
    let opts = OpenOptions {
        command: command.into(),
        write: true,
        ..Default::default()
    };
    match Store::open(state_dir, &opts) {
        Ok((store, _)) => Ok((
            StateStatus::Created {
                location: store.location(),
            },
            Vec::new(),
        )),
        Err(e) => Err(state_diag(&e)),
    }
}

/// The shared (PostgreSQL or S3) state whose lock `force-unlock` may break.
pub struct SharedLock(Remote);

/// The lock of the state in `state_dir`, when it is shared: a local state's lock belongs to a
/// running process and is released when it exits, so there is none to force.
pub fn shared_lock(state_dir: &Path) -> Result<SharedLock, Diagnostic> {
    match cairn_state::store::configured(state_dir) {
        Ok(Some(remote)) => Ok(SharedLock(remote)),
        Ok(None) => Err(Diagnostic::error(
            "Nothing to unlock",
            format!(
                "The state in {} is local: its lock belongs to a running cairn process \
                 and is released when that process exits, so there is no lock to \
                 force.",
                state_dir.display()
            ),
        )),
        Err(e) => Err(state_diag(&e)),
    }
}

impl SharedLock {
    /// Releases lock `lock_id` (PostgreSQL: ends the holder's database session; S3: deletes
    /// the lock object, Terraform's too); says what it did.
    pub fn force_unlock(&self, lock_id: &str) -> Result<String, Diagnostic> {
        match &self.0 {
            Remote::Pg(cfg) => cairn_state::pg::force_unlock(cfg, lock_id),
            Remote::S3(cfg) => cairn_state::s3_store::force_unlock(cfg, lock_id),
        }
        .map_err(|e| state_diag(&e))
    }
}

/// The error for a backend block Cairn has no store for in the root module of `dir`, if it
/// has one, with its `file:line:col` in the text: a command that reads the state without
/// loading the configuration (`state list`, `output`, …) and finds none asks this, so that it
/// never shows an empty state in place of the team's.
pub fn unsupported_backend(dir: &Path) -> Option<Diagnostic> {
    let (config, diags) = crate::config::load(dir);
    let d = diags.iter().find(|d| {
        d.summary.starts_with("Unsupported backend") || d.summary.starts_with("Unsupported HCP")
    })?;
    let at = match (&config, d.span) {
        (Some(c), Some(span)) => format!(
            "The configuration names it at {}. ",
            c.sources.location(span)
        ),
        _ => String::new(),
    };
    Some(Diagnostic::error(
        d.summary.clone(),
        format!("{at}{}", d.detail),
    ))
}

/// The file under the state root where `init` records a digest of the backend block as it
/// evaluated it (never the values: a salted SHA-256), for every later command to compare.
const DIGEST_FILE: &str = "backend-config.digest";

/// What `backend-config.digest` holds.
#[derive(serde::Serialize, serde::Deserialize)]
struct Recorded {
    /// The backend type (`local` without a block).
    kind: String,
    salt: String,
    sha256: String,
}

/// The salted digest of the root module's backend block as evaluated (its type and every
/// argument, after early evaluation).
fn backend_digest(config: &Config, salt: &str) -> (String, String) {
    use sha2::Digest;
    let mut h = sha2::Sha256::new();
    h.update(salt.as_bytes());
    h.update([0]);
    let kind = match &config.root.backend {
        Some(b) => {
            h.update(b.kind.as_bytes());
            h.update([0]);
            for (k, v) in &b.args {
                h.update(k.as_bytes());
                h.update([0]);
                h.update(v.as_bytes());
                h.update([0]);
            }
            b.kind.clone()
        }
        None => {
            h.update(b"local");
            "local".to_string()
        }
    };
    (kind, format!("{:x}", h.finalize()))
}

/// Records the digest of the configuration's backend block as `init` evaluated it.
pub fn record_backend_digest(state_root: &Path, config: &Config) -> Result<(), Diagnostic> {
    let salt: String = {
        use rand::Rng;
        let bytes: [u8; 16] = rand::thread_rng().gen();
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    };
    let (kind, sha256) = backend_digest(config, &salt);
    let text = serde_json::to_string_pretty(&Recorded { kind, salt, sha256 }).unwrap_or_default();
    let path = state_root.join(DIGEST_FILE);
    let write = || -> std::io::Result<()> {
        use std::io::Write;
        use std::os::unix::fs::OpenOptionsExt;
        std::fs::create_dir_all(state_root)?;
        let tmp = state_root.join(format!("{DIGEST_FILE}.{}", std::process::id()));
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)?;
        f.write_all(text.as_bytes())?;
        f.sync_all()?;
        std::fs::rename(&tmp, &path)
    };
    write().map_err(|e| {
        state_diag(&StateError::io_error(
            "cannot record the backend configuration's digest",
            e,
        ))
    })
}

/// Every command after `init`: the backend block, evaluated with this command's inputs
/// (`-var`, `TF_VAR_*`, the files), must be the one `init` recorded, or the command would
/// use a state its configuration no longer names. Nothing recorded (a state directory from
/// before the record, or no `init` yet), or a configuration that does not load (the command
/// reports that itself): nothing to compare.
pub fn check_backend_digest(
    dir: &Path,
    state_root: &Path,
    inputs: &crate::config::EarlyInputs,
) -> Result<(), (crate::diag::Diagnostics, crate::diag::SourceMap)> {
    let Ok(text) = std::fs::read_to_string(state_root.join(DIGEST_FILE)) else {
        return Ok(());
    };
    let Ok(recorded) = serde_json::from_str::<Recorded>(&text) else {
        return Ok(());
    };
    if recorded.kind == "local" && !crate::config::root_files_mention(dir, "backend") {
        return Ok(());
    }
    let (config, diags) = crate::config::load_with(dir, inputs);
    let Some(config) = config.filter(|_| !diags.has_errors()) else {
        return Ok(());
    };
    let (kind, now) = backend_digest(&config, &recorded.salt);
    if now == recorded.sha256 {
        return Ok(());
    }
    let what = match (&config.root.backend, kind == recorded.kind) {
        (Some(b), true) => format!(
            "The backend \"{kind}\" block at {} evaluates to another configuration than when \
             `cairn init` ran (a variable or local value it uses has another value, or an \
             argument changed).",
            config.sources.location(b.span)
        ),
        (Some(b), false) => format!(
            "The configuration names the backend \"{kind}\" at {}; `cairn init` recorded the \
             backend \"{}\".",
            config.sources.location(b.span),
            recorded.kind
        ),
        (None, _) => format!(
            "The configuration no longer has a backend block; `cairn init` recorded the \
             backend \"{}\".",
            recorded.kind
        ),
    };
    let d = Diagnostic::error(
        "Backend configuration changed",
        format!(
            "{what} Cairn will not use a state the configuration no longer names. Run `cairn \
             init -reconfigure` to use the new backend and leave the state where it is, or \
             `cairn init -migrate-state` to copy the state there (give init the same -var \
             values)."
        ),
    )
    .with_span(config.root.backend.as_ref().map(|b| b.span));
    Err((d.into(), config.sources))
}
