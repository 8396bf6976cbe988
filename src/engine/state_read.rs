//! The state read by a command that only looks (`show`, `state list|show|pull|check`,
//! `history`, `log`, `output`, `init`'s status): the store opened without waiting for its lock
//! and without writing, whichever store the state directory names. Callers get the snapshot,
//! time travel and the events, never the store.

use super::journal::state_diag;
use crate::diag::Diagnostic;
use cairn_state::{Event, OpenOptions, Recovery, Snapshot, StateError, Store, Verified};
use std::path::Path;

/// An open state, for reading.
pub struct StateRead(Store);

impl StateRead {
    /// Opens the state in `state_dir` for reading (`None`: there is no state yet), with the
    /// store's warnings (torn tail, bad checkpoint) for the caller to show.
    pub fn open(
        state_dir: &Path,
        command: &str,
    ) -> Result<Option<(StateRead, Vec<String>)>, Diagnostic> {
        let opts = OpenOptions {
            command: command.to_string(),
            lock_timeout: std::time::Duration::ZERO,
            write: false,
            skip_lock: false,
            encryption: crate::engine::encryption::state(),
        };
        match Store::open(state_dir, &opts) {
            Ok((store, warnings)) => Ok(Some((StateRead(store), warnings))),
            Err(StateError::NotFound { .. }) => Ok(None),
            Err(e) => Err(state_diag(&e)),
        }
    }

    /// The current state.
    pub fn snapshot(&self) -> &Snapshot {
        self.0.snapshot()
    }

    /// The current state, moved out (the store is read-only: it holds no other copy), and
    /// the store closed.
    pub fn into_snapshot(mut self) -> Snapshot {
        self.0.take_snapshot()
    }

    /// The state right after event `seq` (0: the empty state).
    pub fn snapshot_at(&self, seq: u64) -> Result<Snapshot, Diagnostic> {
        self.0.snapshot_at(seq).map_err(|e| state_diag(&e))
    }

    /// The seq of the last event (0: an empty log).
    pub fn head(&self) -> u64 {
        self.0.head()
    }

    /// The events from `from` (inclusive) to the head, in order.
    pub fn events(&self, from: u64) -> Result<Vec<Event>, Diagnostic> {
        self.0.events(from).map_err(|e| state_diag(&e))
    }

    /// The numbered invariants the state breaks, in words (empty: all hold).
    pub fn check(&self) -> Vec<String> {
        self.0.check().iter().map(ToString::to_string).collect()
    }

    /// Checks the whole hash chain of the log and the log against its head (`state verify`).
    pub fn verify(&self) -> Result<Verified, Diagnostic> {
        self.0.verify().map_err(|e| state_diag(&e))
    }

    /// The state's lineage.
    pub fn lineage(&self) -> String {
        self.0.lineage()
    }

    /// Where the log lives, for people.
    pub fn location(&self) -> String {
        self.0.location()
    }
}

/// An `-at` (or `-from`) position past the log's head.
pub fn out_of_range(seq: u64, head: u64) -> Diagnostic {
    state_diag(&StateError::OutOfRange { seq, head })
}

/// A command that needs a state found none in `state_dir`.
pub fn not_found(state_dir: &Path) -> Diagnostic {
    state_diag(&StateError::NotFound {
        dir: state_dir.to_path_buf(),
    })
}

/// `cairn state recover`: goes on from the last good event of the damaged state in
/// `state_dir`, keeping a copy of the damaged store and recording the recovery as a run.
pub fn recover(
    state_dir: &Path,
    lock_timeout: std::time::Duration,
    args: &[String],
) -> Result<Recovery, Diagnostic> {
    let opts = OpenOptions {
        command: "state recover".into(),
        lock_timeout,
        write: true,
        skip_lock: false,
        encryption: crate::engine::encryption::state(),
    };
    Store::recover(state_dir, &opts, args)
        .map(|(_, r)| r)
        .map_err(|e| state_diag(&e))
}
