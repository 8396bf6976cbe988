//! The event log as the engine sees it: one [`EventLog`] trait, two stores behind it (the
//! sled [`SledLog`] in the state directory and the PostgreSQL [`PgLog`]), and [`Store`], the
//! open log whichever it is. Both pass the same conformance suite
//! (`state/tests/conformance.rs`).
//!
//! [`Store::open`] picks the store from `<dir>/backend.json` (see [`crate::backend`]): no file
//! is the local sled log. Callers never name a store.

use crate::backend::{read_backend, Backend, PgConfig};
use crate::check::Violation;
use crate::error::StateError;
use crate::event::{Event, EventBody, RunOutcome, RunSummary};
use crate::log::{current_user, peek_sled, Clock, Flusher, OpenOptions, Peek, SledLog};
use crate::pg::PgLog;
use crate::snapshot::Snapshot;
use std::path::Path;

/// An event log and the snapshot it folds to. Appends are buffered; `commit` (or the
/// [`Flusher`]) makes them durable.
pub trait EventLog: Send {
    /// Appends an event (durable at the next commit) and applies it to the snapshot. Events
    /// belong to the open run (a `RunStarted` to its own).
    fn append(&mut self, body: EventBody) -> Result<u64, StateError>;
    /// A commit point: everything appended so far is durable when this returns.
    fn commit(&mut self) -> Result<(), StateError>;
    /// A handle that makes everything appended so far durable, usable from another thread.
    fn flusher(&self) -> Flusher;
    /// The current state.
    fn snapshot(&self) -> &Snapshot;
    /// The local state directory (working files: checkpoints of sled, the fault journal).
    fn dir(&self) -> &Path;
    /// Where the log lives, for people (never with a password).
    fn location(&self) -> String;
    /// Whether the store was opened for writing.
    fn is_writable(&self) -> bool;
    /// The state's lineage: a stable id made when the state was created.
    fn lineage(&self) -> String;
    /// Replaces the clock events are stamped with (unix ms).
    fn set_clock(&mut self, clock: Clock);
    /// Changes how many events an automatic checkpoint waits for (at least 1).
    fn set_checkpoint_every(&mut self, n: u64);
    /// The events from `from` (inclusive) to the head, in order.
    fn events(&self, from: u64) -> Result<Vec<Event>, StateError>;
    /// The records `from..=to` as stored (for copying the log to another store).
    fn raw_events(&self, from: u64, to: u64) -> Result<Vec<(u64, Vec<u8>)>, StateError>;
    /// Appends records copied from another log (the next seqs, in order) and commits.
    fn import_raw(&mut self, records: &[(u64, Vec<u8>)]) -> Result<(), StateError>;
    /// Replaces the lineage (a migrated log keeps the lineage of its source).
    fn set_lineage(&mut self, lineage: &str) -> Result<(), StateError>;
    /// The state as it was right after event `seq` (time travel; 0 is the empty state).
    fn snapshot_at(&self, seq: u64) -> Result<Snapshot, StateError>;
    /// Writes a checkpoint at the head now (and commits).
    fn checkpoint(&mut self) -> Result<(), StateError>;
    /// Deletes every checkpoint (a derived cache: changes nothing but speed).
    fn clear_checkpoints(&mut self) -> Result<(), StateError>;
    /// Checks the numbered invariants (crate docs). Empty: all hold.
    fn check(&self) -> Vec<Violation>;
    /// Messages for the user about work done on open (a fault journal written back).
    fn notices(&self) -> Vec<String> {
        Vec::new()
    }

    /// The seq of the last event (0: empty log).
    fn head(&self) -> u64 {
        self.snapshot().head
    }

    /// Starts a run (appends `RunStarted` and commits); returns its id.
    fn begin_run(&mut self, command: &str, args: &[String]) -> Result<u64, StateError> {
        let seq = self.append(EventBody::RunStarted {
            command: command.to_string(),
            args: args.to_vec(),
            user: current_user(),
            pid: std::process::id(),
        })?;
        self.commit()?;
        Ok(seq)
    }

    /// Finishes the open run (appends `RunFinished` and commits).
    fn finish_run(&mut self, outcome: RunOutcome, summary: RunSummary) -> Result<(), StateError> {
        if !self.is_writable() {
            return Err(StateError::ReadOnly);
        }
        if self.snapshot().open_run.is_none() {
            return Err(StateError::NoOpenRun);
        }
        self.append(EventBody::RunFinished { outcome, summary })?;
        self.commit()
    }
}

/// An open state, on whichever store its directory names.
pub struct Store(Box<dyn EventLog>);

impl std::ops::Deref for Store {
    type Target = dyn EventLog;
    fn deref(&self) -> &Self::Target {
        &*self.0
    }
}

impl std::ops::DerefMut for Store {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut *self.0
    }
}

impl From<SledLog> for Store {
    fn from(s: SledLog) -> Store {
        Store(Box::new(s))
    }
}

impl From<PgLog> for Store {
    fn from(s: PgLog) -> Store {
        Store(Box::new(s))
    }
}

/// The environment as the backend reads it (`PG_CONN_STR`, …).
fn process_env(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

/// The PostgreSQL configuration `dir` names, if any (its environment resolved).
///
/// A workspace's directory (see [`crate::workspace`]) takes its root's backend; on PostgreSQL
/// its log is in the workspace's own schema.
pub fn configured_pg(dir: &Path) -> Result<Option<PgConfig>, StateError> {
    let (root, workspace) = match crate::workspace::of_dir(dir) {
        Some((root, name)) => (root, Some(name)),
        None => (dir.to_path_buf(), None),
    };
    match read_backend(&root)? {
        Backend::Local => Ok(None),
        Backend::Pg(settings) => {
            let mut cfg = settings.resolve(&process_env)?;
            if let Some(name) = workspace {
                cfg.schema = crate::workspace::pg_schema(&cfg.schema, &name)?;
            }
            Ok(Some(cfg))
        }
    }
}

/// Reads the events from `from` (inclusive), at most `max`, for a reader that runs beside
/// other commands (`cairn ui`): never waits for a lock and never writes. On sled it visits
/// the database briefly ([`peek_sled`]); on PostgreSQL it simply reads (readers take no lock).
pub fn peek_events(dir: &Path, from: u64, max: usize) -> Result<Peek, StateError> {
    match configured_pg(dir)? {
        None => peek_sled(dir, from, max),
        Some(pg) => crate::pg::peek_events(&pg, from, max),
    }
}

/// A reader of a state directory's log beside other commands (`cairn ui`), whichever store
/// it names: it never waits for a lock and never writes.
pub enum LogReader {
    /// The sled log in this directory: read by brief visits ([`peek_sled`]) when no command
    /// holds it.
    Sled(std::path::PathBuf),
    /// A PostgreSQL log: read over one kept connection (readers take no lock).
    Pg(Box<crate::pg::PgReader>),
}

impl LogReader {
    /// The reader for the store `dir`'s `backend.json` names (none: the sled log in `dir`).
    pub fn open(dir: &Path) -> Result<LogReader, StateError> {
        Ok(match configured_pg(dir)? {
            None => LogReader::Sled(dir.to_path_buf()),
            Some(pg) => LogReader::Pg(Box::new(crate::pg::PgReader::new(pg))),
        })
    }
}

impl Store {
    /// Opens (with `write`, creating) the state of the state directory `dir`: the store its
    /// `backend.json` names, or the sled log in it. The warnings say what was repaired or
    /// skipped (a torn tail, an unreadable checkpoint, a fault journal written back).
    pub fn open(dir: &Path, opts: &OpenOptions) -> Result<(Store, Vec<String>), StateError> {
        match configured_pg(dir)? {
            None => SledLog::open(dir, opts).map(|(s, w)| (s.into(), w)),
            Some(pg) => PgLog::open(&pg, dir, opts).map(|(s, w)| (s.into(), w)),
        }
    }

    /// Opens the state read-only as it was after event `upto`, ignoring every record after
    /// it: the way to recover what precedes a corrupt record.
    pub fn open_upto(
        dir: &Path,
        opts: &OpenOptions,
        upto: u64,
    ) -> Result<(Store, Vec<String>), StateError> {
        match configured_pg(dir)? {
            None => SledLog::open_upto(dir, opts, upto).map(|(s, w)| (s.into(), w)),
            Some(pg) => PgLog::open_upto(&pg, dir, opts, upto).map(|(s, w)| (s.into(), w)),
        }
    }

    /// Opens the sled log in `dir`, whatever `backend.json` says (migration).
    pub fn open_local(dir: &Path, opts: &OpenOptions) -> Result<(Store, Vec<String>), StateError> {
        SledLog::open(dir, opts).map(|(s, w)| (s.into(), w))
    }

    /// Opens a PostgreSQL log (migration; tests).
    pub fn open_pg(
        pg: &PgConfig,
        dir: &Path,
        opts: &OpenOptions,
    ) -> Result<(Store, Vec<String>), StateError> {
        PgLog::open(pg, dir, opts).map(|(s, w)| (s.into(), w))
    }
}

macro_rules! delegate_sled {
    (shared { $($name:ident(&self $(, $arg:ident: $ty:ty)*) -> $ret:ty;)* } exclusive { $($mname:ident(&mut self $(, $marg:ident: $mty:ty)*) -> $mret:ty;)* }) => {
        impl EventLog for SledLog {
            $(fn $name(&self $(, $arg: $ty)*) -> $ret { SledLog::$name(self $(, $arg)*) })*
            $(fn $mname(&mut self $(, $marg: $mty)*) -> $mret { SledLog::$mname(self $(, $marg)*) })*
            fn location(&self) -> String {
                self.dir().display().to_string()
            }
        }
    };
}

delegate_sled! {
    shared {
    flusher(&self) -> Flusher;
    snapshot(&self) -> &Snapshot;
    dir(&self) -> &Path;
    is_writable(&self) -> bool;
    lineage(&self) -> String;
    events(&self, from: u64) -> Result<Vec<Event>, StateError>;
    raw_events(&self, from: u64, to: u64) -> Result<Vec<(u64, Vec<u8>)>, StateError>;
    snapshot_at(&self, seq: u64) -> Result<Snapshot, StateError>;
    check(&self) -> Vec<Violation>;
    head(&self) -> u64;
    }
    exclusive {
    append(&mut self, body: EventBody) -> Result<u64, StateError>;
    commit(&mut self) -> Result<(), StateError>;
    import_raw(&mut self, records: &[(u64, Vec<u8>)]) -> Result<(), StateError>;
    set_lineage(&mut self, lineage: &str) -> Result<(), StateError>;
    set_clock(&mut self, clock: Clock) -> ();
    set_checkpoint_every(&mut self, n: u64) -> ();
    checkpoint(&mut self) -> Result<(), StateError>;
    clear_checkpoints(&mut self) -> Result<(), StateError>;
    begin_run(&mut self, command: &str, args: &[String]) -> Result<u64, StateError>;
    finish_run(&mut self, outcome: RunOutcome, summary: RunSummary) -> Result<(), StateError>;
    }
}
