//! The journal: the engine's handle on the event log during a run.
//!
//! Many tasks record events at once, so the `Store` sits behind a `Mutex`. Commit points are
//! explicit: `record` appends and waits until the event is durable (before and after every
//! provider call that changes the world), `append` only appends (results that arrive together,
//! committed once by `commit`). The mutex is a `std::sync::Mutex`: appends are short.
//!
//! Group commit: one flush thread makes the log durable. A writer appends, asks for its
//! sequence number to be durable and awaits it (a `tokio::sync::watch`), so no runtime thread
//! blocks on a flush. The flush thread flushes everything appended so far, then tells every
//! waiter how far the log is durable: all writers whose events arrived while a flush ran share
//! the next one, however many there are (with chains of small steps, hundreds of operations
//! commit in one flush). A flush error reaches every writer waiting on it, and every later one.

use crate::diag::Diagnostic;
use cairn_state::log::Flusher;
use cairn_state::{EventBody, Snapshot, Store};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use tokio::sync::watch;

pub(crate) struct Journal {
    store: Mutex<Store>,
    group: Arc<Group>,
    /// Joined when the journal is dropped or turned back into its store.
    thread: FlushThread,
}

/// What writers and the flush thread share.
struct Group {
    state: Mutex<GroupState>,
    /// Wakes the flush thread.
    wake: Condvar,
    /// How far the log is durable, or why it cannot be made durable.
    durable: watch::Sender<Durable>,
}

#[derive(Clone, Debug, Default)]
struct Durable {
    seq: u64,
    error: Option<String>,
}

#[derive(Default)]
struct GroupState {
    /// The last sequence number appended to sled.
    appended: u64,
    /// The highest sequence number a writer waits for.
    wanted: u64,
    /// Every event up to this one is durable.
    durable: u64,
    closed: bool,
}

struct FlushThread(Option<(Arc<Group>, JoinHandle<()>)>);

impl Drop for FlushThread {
    fn drop(&mut self) {
        if let Some((group, handle)) = self.0.take() {
            group.state.lock().expect("journal group").closed = true;
            group.wake.notify_one();
            let _ = handle.join();
        }
    }
}

fn flush_loop(group: Arc<Group>, flusher: Flusher) {
    loop {
        let target = {
            let mut st = group.state.lock().expect("journal group");
            while st.wanted <= st.durable && !st.closed {
                st = group.wake.wait(st).expect("journal group");
            }
            if st.wanted <= st.durable {
                return; // closed, nobody waiting
            }
            st.appended
        };
        let result = flusher.flush();
        let mut st = group.state.lock().expect("journal group");
        match result {
            Ok(()) => {
                st.durable = st.durable.max(target);
                let seq = st.durable;
                group.durable.send_modify(|d| d.seq = seq);
            }
            Err(e) => {
                // Nothing more can be made durable: fail every waiter, now and later.
                st.durable = u64::MAX;
                let msg = e.to_string();
                group.durable.send_modify(|d| d.error = Some(msg));
            }
        }
    }
}

impl Journal {
    pub(crate) fn new(store: Store) -> Self {
        let flusher = store.flusher();
        let head = store.head();
        let group = Arc::new(Group {
            state: Mutex::new(GroupState {
                appended: head,
                wanted: head,
                durable: head,
                closed: false,
            }),
            wake: Condvar::new(),
            durable: watch::Sender::new(Durable {
                seq: head,
                error: None,
            }),
        });
        let g = group.clone();
        let handle = std::thread::Builder::new()
            .name("cairn-journal".into())
            .spawn(move || flush_loop(g, flusher))
            .expect("spawn the journal's flush thread");
        Journal {
            store: Mutex::new(store),
            group: group.clone(),
            thread: FlushThread(Some((group, handle))),
        }
    }

    pub(crate) fn into_store(self) -> Store {
        let Journal { store, thread, .. } = self;
        drop(thread);
        store.into_inner().expect("journal lock")
    }

    /// Appends without flushing; returns the event's sequence number.
    pub(crate) fn append(&self, body: EventBody) -> Result<u64, Diagnostic> {
        self.try_append(body).map_err(state_error)
    }

    /// [`Journal::append`] with the store's own error.
    pub(crate) fn try_append(&self, body: EventBody) -> Result<u64, cairn_state::StateError> {
        let mut store = self.store.lock().expect("journal lock");
        let seq = store.append(body)?;
        // Under the store's lock, so `appended` only grows.
        let mut st = self.group.state.lock().expect("journal group");
        st.appended = st.appended.max(seq);
        Ok(seq)
    }

    /// Appends an event that needs to be durable only with the next commit or recorded event
    /// (see `EventLog::append_deferred`: while the state's key is still being derived it is
    /// held in memory with the run's first records instead of waiting for the key).
    pub(crate) fn append_deferred(&self, body: EventBody) -> Result<u64, Diagnostic> {
        // `appended` is left alone: a held record is not in the store yet, so the flush
        // thread must not count it as flushed; the next `append`/`record` (which stores it
        // first) or `commit` covers it.
        let mut store = self.store.lock().expect("journal lock");
        store.append_deferred(body).map_err(state_error)
    }

    /// Appends and waits until the event is durable: a commit point. Concurrent writers share
    /// flushes (group commit).
    pub(crate) async fn record(&self, body: EventBody) -> Result<u64, Diagnostic> {
        let seq = self.append(body)?;
        let mut rx = self.group.durable.subscribe();
        {
            let mut st = self.group.state.lock().expect("journal group");
            if st.durable < seq {
                st.wanted = st.wanted.max(seq);
                self.group.wake.notify_one();
            }
        }
        let durable = rx
            .wait_for(|d| d.seq >= seq || d.error.is_some())
            .await
            .map_err(|_| {
                Diagnostic::error("State storage failed", "the journal's flush thread stopped")
            })?
            .clone();
        match durable.error {
            Some(e) => Err(Diagnostic::error("State storage failed", e)),
            None => Ok(seq),
        }
    }

    /// Flushes (and lets the store write a checkpoint when one is due).
    pub(crate) fn commit(&self) -> Result<(), Diagnostic> {
        self.try_commit().map_err(state_error)
    }

    /// [`Journal::commit`] with the store's own error.
    pub(crate) fn try_commit(&self) -> Result<(), cairn_state::StateError> {
        let mut store = self.store.lock().expect("journal lock");
        block(|| store.commit())?;
        let head = store.head();
        let mut st = self.group.state.lock().expect("journal group");
        if st.durable < head {
            st.durable = head;
            self.group.durable.send_modify(|d| d.seq = d.seq.max(head));
        }
        Ok(())
    }

    /// Why the log cannot be made durable any more, once a flush failed: no provider call
    /// that changes the world may start after that.
    pub(crate) fn failure(&self) -> Option<String> {
        self.group.durable.borrow().error.clone()
    }

    /// A copy of the current state.
    pub(crate) fn snapshot(&self) -> Snapshot {
        self.store.lock().expect("journal lock").snapshot().clone()
    }

    /// Reads the current state without copying it.
    pub(crate) fn with_snapshot<T>(&self, f: impl FnOnce(&Snapshot) -> T) -> T {
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

pub(crate) fn state_error(e: cairn_state::StateError) -> Diagnostic {
    Diagnostic::error("State storage failed", format!("{e}"))
}

/// A state problem met by a command that works on the state itself (the state edits, the
/// read commands), as a diagnostic: lock errors and unreadable logs get summaries of their
/// own.
pub(crate) fn state_diag(e: &cairn_state::StateError) -> Diagnostic {
    use cairn_state::StateError;
    let summary = match e {
        StateError::Locked { .. } | StateError::LockedRemote { .. } => {
            "Error acquiring the state lock"
        }
        StateError::Backend { .. } => "Backend configuration",
        StateError::Encryption { .. } => "State encryption",
        StateError::Corrupt { .. } | StateError::TooNew { .. } => "The state log cannot be read",
        StateError::TfState { .. } => "Invalid Terraform state file",
        StateError::OutOfRange { .. } => "Invalid -at position",
        _ => "State error",
    };
    let text = e.to_string();
    let mut c = text.chars();
    let capitalized: String = match c.next() {
        Some(f) => f.to_uppercase().chain(c).collect(),
        None => String::new(),
    };
    let detail = format!("{capitalized}.");
    Diagnostic::error(summary, detail.trim_end_matches("..").to_string())
}
