//! What a lifecycle command is asked to do: [`Options`], the plain request every engine entry
//! point takes (the CLI fills it; the engine reads no environment of its own).

use super::sabotage::Sabotage;
use crate::addr::{ResourceInstanceAddr, Target};
use crate::provider::Provider;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

/// Everything a lifecycle command needs to know. The CLI fills it; the engine reads no
/// environment of its own (`env` is the process environment, passed in).
#[derive(Clone)]
pub struct Options {
    /// The root module's directory (the working directory after `-chdir`).
    pub dir: PathBuf,
    pub state_dir: PathBuf,
    pub vars: Vec<crate::config::VarArg>,
    pub env: BTreeMap<String, String>,
    pub parallelism: usize,
    pub refresh: bool,
    pub targets: Vec<Target>,
    pub replace: Vec<ResourceInstanceAddr>,
    pub lock_timeout: Duration,
    /// `-lock=false`: take no state lock where the store has one to skip (PostgreSQL's
    /// advisory lock); sled's exclusive hold of its files stays.
    pub lock: bool,
    /// `-exclude`: leave these objects, and everything that depends on them, out (OpenTofu's
    /// inverse of `-target`; see `exclude.rs`).
    pub excludes: Vec<Target>,
    pub command: String,
    pub args: Vec<String>,
    /// Set by Ctrl-C (or SIGTERM): no new step starts.
    pub stop: Arc<AtomicBool>,
    /// Notified (once, with `notify_one`) by Ctrl-C after `stop` is set: every configured
    /// provider instance is told to stop, so its calls in flight give up early.
    pub interrupted: Arc<tokio::sync::Notify>,
    /// The provider packages; `None` means the built-in ones.
    pub packages: Option<BTreeMap<String, Arc<dyn Provider>>>,
    /// A deliberately broken rule, for the property tests only (see `sabotage.rs`); `None`
    /// unless test code sets it. Not reachable from the CLI or the environment.
    #[doc(hidden)]
    pub sabotage: Option<Sabotage>,
    /// `cairn inspect FILE.tf`: load only this file of `dir` (and the modules it calls).
    pub only_file: Option<PathBuf>,
    /// `cairn import ADDR ID`: the instance to import and its id (see `api::import`).
    pub import: Option<(ResourceInstanceAddr, String)>,
    /// `plan -generate-config-out`: import blocks without a resource block get a generated
    /// one (`Config::generate_import_blocks`), filled in from the imported object.
    pub generate_config: bool,
    /// The selected workspace (`terraform.workspace`); `None`: `default` (for `inspect`:
    /// the one `terraform workspace select` recorded in `.terraform/environment`).
    pub workspace: Option<String>,
    /// `cairn test`'s mock providers, by local name: they answer instead of the real ones.
    pub mocks: BTreeMap<String, crate::provider::mock::MockSpec>,
    /// `cairn test`'s `override_resource` / `override_data` blocks.
    pub overrides: Vec<crate::provider::mock::OverrideSpec>,
    /// `cairn test`'s `override_module` blocks: the module call (by the names of the calls
    /// from the root) that is not run, and its outputs (an object; those it lacks are null).
    pub module_overrides: Vec<(Vec<String>, crate::value::Value)>,
    /// `cairn test`'s `provider` blocks, as (name, alias, body text with constant values):
    /// each replaces the root module's block of that name and alias.
    pub test_providers: Vec<(String, Option<String>, String)>,
    /// Where plugin providers are installed and locked (`.terraform/providers`,
    /// `.terraform.lock.hcl`): `None` is `dir`; a stack's component runs with the stack's
    /// directory, where `cairn stack init` installed them.
    pub plugin_dir: Option<PathBuf>,
}

impl Options {
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        let dir = dir.into();
        Options {
            state_dir: dir.join(".cairn"),
            dir,
            vars: Vec::new(),
            env: BTreeMap::new(),
            parallelism: 10,
            refresh: true,
            targets: Vec::new(),
            replace: Vec::new(),
            lock_timeout: Duration::ZERO,
            lock: true,
            excludes: Vec::new(),
            command: "cairn".into(),
            args: Vec::new(),
            stop: Arc::new(AtomicBool::new(false)),
            interrupted: Arc::new(tokio::sync::Notify::new()),
            packages: None,
            sabotage: None,
            only_file: None,
            import: None,
            generate_config: false,
            workspace: None,
            mocks: BTreeMap::new(),
            overrides: Vec::new(),
            module_overrides: Vec::new(),
            test_providers: Vec::new(),
            plugin_dir: None,
        }
    }
}
