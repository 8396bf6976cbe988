//! The journal: the engine's handle on the event log during a run.
//!
//! Many tasks record events at once, so the `Store` sits behind a `Mutex`. Commit points are
//! explicit: `record` appends and flushes (before and after every provider call that changes
//! the world), `append` only appends (results that arrive together, committed once by
//! `commit`). The mutex is a `std::sync::Mutex`: appends are short. Flushes run outside it,
//! one at a time, inside `tokio::task::block_in_place` so they never stall the runtime's other
//! tasks; a writer whose event a running flush already covers does not flush again.

use crate::diag::Diagnostic;
use cairn_state::log::Flusher;
use cairn_state::{EventBody, Snapshot, Store};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

pub struct Journal {
    store: Mutex<Store>,
    /// Flushes without the store's lock, so appends go on during a flush.
    flusher: Flusher,
    /// One flush at a time; writers that wait for it find their event already durable.
    flushing: Mutex<()>,
    /// Every event up to this seq is durable.
    durable: AtomicU64,
}

impl Journal {
    pub fn new(store: Store) -> Self {
        let flusher = store.flusher();
        let durable = AtomicU64::new(store.head());
        Journal {
            store: Mutex::new(store),
            flusher,
            flushing: Mutex::new(()),
            durable,
        }
    }

    pub fn into_store(self) -> Store {
        self.store.into_inner().expect("journal lock")
    }

    /// Appends without flushing; returns the event's sequence number.
    pub fn append(&self, body: EventBody) -> Result<u64, Diagnostic> {
        self.store
            .lock()
            .expect("journal lock")
            .append(body)
            .map_err(state_error)
    }

    /// Appends and flushes: a commit point. Concurrent writers share flushes (group commit).
    pub fn record(&self, body: EventBody) -> Result<u64, Diagnostic> {
        let seq = self
            .store
            .lock()
            .expect("journal lock")
            .append(body)
            .map_err(state_error)?;
        block(|| {
            if self.durable.load(Ordering::SeqCst) >= seq {
                return Ok(());
            }
            let _one = self.flushing.lock().expect("flush lock");
            if self.durable.load(Ordering::SeqCst) >= seq {
                return Ok(());
            }
            let head = self.store.lock().expect("journal lock").head();
            self.flusher.flush().map_err(state_error)?;
            self.durable.fetch_max(head, Ordering::SeqCst);
            Ok(())
        })?;
        Ok(seq)
    }

    /// Flushes (and lets the store write a checkpoint when one is due).
    pub fn commit(&self) -> Result<(), Diagnostic> {
        let mut store = self.store.lock().expect("journal lock");
        block(|| store.commit()).map_err(state_error)?;
        self.durable.fetch_max(store.head(), Ordering::SeqCst);
        Ok(())
    }

    /// A copy of the current state.
    pub fn snapshot(&self) -> Snapshot {
        self.store.lock().expect("journal lock").snapshot().clone()
    }

    /// Reads the current state without copying it.
    pub fn with_snapshot<T>(&self, f: impl FnOnce(&Snapshot) -> T) -> T {
        f(self.store.lock().expect("journal lock").snapshot())
    }
}

/// Runs blocking I/O without stalling other tasks (when on a multi-threaded runtime).
fn block<T>(f: impl FnOnce() -> T) -> T {
    match tokio::runtime::Handle::try_current() {
        Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(f)
        }
        _ => f(),
    }
}

pub fn state_error(e: cairn_state::StateError) -> Diagnostic {
    Diagnostic::error("State storage failed", format!("{e}"))
}
