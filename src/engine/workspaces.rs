//! Workspaces as commands see them (`cairn workspace new|select|list|delete`, and the
//! selection every command resolves first): the state crate keeps the layout
//! (`cairn_state::workspace`); this file opens the stores a workspace command needs, so the
//! CLI checks names, asks and prints, and never names a store.

use super::journal::state_diag;
use crate::diag::Diagnostic;
use cairn_state::workspace;
use cairn_state::{OpenOptions, Store};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Where the selected workspace's name came from (`TF_WORKSPACE`, the root's
/// `environment` file, or nothing: `default`).
pub use cairn_state::workspace::Source as WorkspaceSource;
/// The workspace every state has.
pub use cairn_state::workspace::DEFAULT as DEFAULT_WORKSPACE;

/// The selected workspace under the state directory `root`.
#[derive(Clone, Debug)]
pub struct Selection {
    pub name: String,
    pub source: WorkspaceSource,
    /// The workspace's state directory (`root` itself for `default`).
    pub state_dir: PathBuf,
}

/// The selected workspace: `TF_WORKSPACE` (given as `env`), else `<root>/environment`, else
/// `default`.
pub fn selected(root: &Path, env: Option<&str>) -> Selection {
    let (name, source) = workspace::selected(root, env);
    Selection {
        state_dir: workspace::dir(root, &name),
        name,
        source,
    }
}

/// The file under `root` that names the selected workspace (for messages).
pub fn environment_file(root: &Path) -> PathBuf {
    root.join(workspace::ENVIRONMENT_FILE)
}

/// Checks a workspace name by Terraform's rule; the error is the sentence to show.
pub fn check_name(name: &str) -> Result<(), String> {
    workspace::check_name(name)
}

/// Makes workspace `name`'s local state directory (and its marker) if it is missing.
pub fn ensure_dir(root: &Path, name: &str) -> Result<PathBuf, Diagnostic> {
    workspace::ensure_dir(root, name).map_err(|e| state_diag(&e))
}

/// Every workspace of the state, `default` first, then by name (on PostgreSQL, also those
/// other machines created).
pub fn list(root: &Path) -> Result<Vec<String>, Diagnostic> {
    workspace::list(root).map_err(|e| state_diag(&e))
}

/// Whether workspace `name` exists.
pub fn exists(root: &Path, name: &str) -> Result<bool, Diagnostic> {
    workspace::exists(root, name).map_err(|e| state_diag(&e))
}

/// Records `name` as the selected workspace (`default` removes the record).
pub fn select(root: &Path, name: &str) -> Result<(), Diagnostic> {
    workspace::select(root, name).map_err(|e| state_diag(&e))
}

/// Creates workspace `name`'s state (opening it for writing creates the log, or the
/// PostgreSQL schema, so other machines see the workspace at once).
/// `lock` false (`-lock=false`) takes no lock where the store has one to skip.
pub fn create(
    root: &Path,
    name: &str,
    lock_timeout: Duration,
    lock: bool,
) -> Result<(), Diagnostic> {
    let dir = ensure_dir(root, name)?;
    let opts = OpenOptions {
        command: "workspace new".into(),
        lock_timeout,
        write: true,
        skip_lock: !lock,
        encryption: crate::engine::encryption::state(),
    };
    Store::open(&dir, &opts)
        .map(drop)
        .map_err(|e| state_diag(&e))
}

/// The managed instances workspace `name` tracks, read under its lock (no run may be
/// writing a workspace being deleted).
pub fn tracked(
    root: &Path,
    name: &str,
    lock_timeout: Duration,
    lock: bool,
) -> Result<Vec<String>, Diagnostic> {
    let dir = ensure_dir(root, name)?;
    let opts = OpenOptions {
        command: "workspace delete".into(),
        lock_timeout,
        write: true,
        skip_lock: !lock,
        encryption: crate::engine::encryption::state(),
    };
    let (store, _) = Store::open(&dir, &opts).map_err(|e| state_diag(&e))?;
    let tracked = store
        .snapshot()
        .managed_addrs()
        .map(|a| a.to_string())
        .collect();
    Ok(tracked)
}

/// Deletes workspace `name`: its local directory and, on PostgreSQL, its schema. The caller
/// has checked that it is neither `default` nor selected, and that it is empty or forced.
pub fn delete(root: &Path, name: &str) -> Result<(), Diagnostic> {
    workspace::delete(root, name).map_err(|e| state_diag(&e))
}
