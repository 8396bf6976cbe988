//! Progress events: what the engine reports while it works. The CLI turns them into text lines,
//! a status line, or `-json` UI events; the engine never prints.

use crate::addr::{ProviderAddr, ResourceInstanceAddr};
use crate::diag::Diagnostic;
use crate::plan::Action;
use std::time::Duration;

#[derive(Clone, Debug, PartialEq)]
pub enum Progress {
    /// Refresh of one managed instance started / finished.
    RefreshStart { addr: ResourceInstanceAddr },
    RefreshDone {
        addr: ResourceInstanceAddr,
        id: Option<String>,
        elapsed: Duration,
    },
    /// An import block's import started (plan: "Preparing import... [id=ID]"); its read
    /// follows as `RefreshStart`/`RefreshDone`.
    ImportPreparing {
        addr: ResourceInstanceAddr,
        id: String,
    },
    /// `cairn import`: "Importing from ID "ID"...", then "Import prepared!" with the types
    /// the provider found.
    ImportFromId {
        addr: ResourceInstanceAddr,
        id: String,
    },
    ImportPrepared {
        addr: ResourceInstanceAddr,
        types: Vec<String>,
    },
    /// Apply adopts an imported object into state ("Importing... [id=ID]", then
    /// "Import complete [id=ID]").
    Importing {
        addr: ResourceInstanceAddr,
        id: String,
    },
    ImportComplete {
        addr: ResourceInstanceAddr,
        id: String,
    },
    /// An ephemeral resource instance is opened, renewed or closed (at plan or apply).
    Ephemeral {
        addr: ResourceInstanceAddr,
        step: EphemeralStep,
    },
    /// A data source read started / finished (at plan or apply).
    ReadStart { addr: ResourceInstanceAddr },
    ReadDone {
        addr: ResourceInstanceAddr,
        elapsed: Duration,
    },
    /// A create, update or delete started: `id` is the object's before the call (an update or
    /// a delete), `deposed` the key of the deposed object it acts on.
    ApplyStart {
        addr: ResourceInstanceAddr,
        action: Action,
        id: Option<String>,
        deposed: Option<String>,
    },
    /// Still running: emitted every 10 seconds for a long call.
    ApplyProgress {
        addr: ResourceInstanceAddr,
        action: Action,
        elapsed: Duration,
    },
    ApplyDone {
        addr: ResourceInstanceAddr,
        action: Action,
        id: Option<String>,
        elapsed: Duration,
        deposed: Option<String>,
    },
    ApplyErrored {
        addr: ResourceInstanceAddr,
        action: Action,
        elapsed: Duration,
        message: String,
        deposed: Option<String>,
    },
    /// A provisioner (`kind`: `local-exec`) started for an object, printed a line of output,
    /// or ended.
    ProvisionStart {
        addr: ResourceInstanceAddr,
        kind: String,
    },
    ProvisionOutput {
        addr: ResourceInstanceAddr,
        kind: String,
        line: String,
    },
    ProvisionDone {
        addr: ResourceInstanceAddr,
        kind: String,
        failed: bool,
    },
    /// A provider instance was configured (or reconfigured).
    ProviderConfigured { addr: ProviderAddr },
    /// Counts for a status line: done, running, left.
    Counts {
        done: usize,
        running: usize,
        left: usize,
    },
    /// A diagnostic found along the way (warnings, and errors as they happen).
    Diagnostic(Diagnostic),
}

/// Receives progress events. Called from many tasks at once, so it must be `Sync`.
pub trait Observer: Send + Sync {
    fn event(&self, event: Progress);

    /// The command's run began in the state's history (`run`: the seq of its `RunStarted`),
    /// before it records anything else (a stack fleet's runner names it in the stack run's
    /// record at once, so a runner that dies mid-run leaves its run linked).
    fn run_begun(&self, _run: u64) {}
}

/// An observer that ignores everything (tests, `inspect`).
pub struct Silent;

impl Observer for Silent {
    fn event(&self, _: Progress) {}
}

/// What happens to an ephemeral resource instance (`Progress::Ephemeral`): Terraform's
/// "Opening...", "Opening complete after 0s", "Renewing...", "Closing...", "Closing complete".
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EphemeralStep {
    Opening,
    Opened(Duration),
    Renewing,
    Closing,
    Closed(Duration),
}
