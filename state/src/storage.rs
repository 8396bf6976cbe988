//! What a backing store of the event log provides: the [`Storage`] trait, the few primitive
//! operations on stored records, the lineage and checkpoints that the log core
//! (`log.rs`: sequence numbers, runs, encoding, the fold, checkpoints and the integrity check,
//! written once) needs. The sled store (`sled_store.rs`) and the PostgreSQL store
//! (`pg_store.rs`) implement it; a new store implements it and gets the whole log.
//!
//! A store knows records as bytes under sequence numbers, nothing of events or snapshots
//! beyond handing a snapshot to the checkpoint encoding (`checkpoint.rs`) it chooses.
//!
//! **Locking** is the store's own: its constructor takes the writers' lock when it opens for
//! writing (sled: the database's file lock; PostgreSQL: an advisory lock), and dropping the
//! store releases it. The log core only ever holds an opened store.

use crate::chain::Head;
use crate::error::StateError;
use crate::snapshot::Snapshot;

/// The key of a stored record: its sequence number, or (`Err`) a description of a key that is
/// not one (a damaged store), for the corruption message.
pub(crate) type Key = Result<u64, String>;

/// Records as a store hands them out, in order of sequence number. An `Err` item is a read
/// that failed part way.
pub(crate) type Records<'a, B> = Box<dyn Iterator<Item = Result<(Key, B), StateError>> + 'a>;

/// The primitive operations of a backing store (see the module docs). Every method's error
/// names what failed in the store's own words.
pub(crate) trait Storage: Send {
    /// The bytes of one stored record as the store holds them (read without a copy).
    type Bytes: AsRef<[u8]>;

    /// Where the log lives, for people (never with a password).
    fn location(&self) -> String;

    // ---- Records ----

    /// The sequence number of the last stored record (0: none).
    fn last_seq(&self) -> Result<u64, StateError>;
    /// The stored records from `from` to `to` (inclusive; `None`: to the end), in order. With
    /// `from` 0 every key the store holds, sequence number or not (the integrity check). The
    /// log core checks that the sequence numbers are contiguous.
    fn scan(&self, from: u64, to: Option<u64>) -> Result<Records<'_, Self::Bytes>, StateError>;
    /// Stores record `seq`, the next after the last one: durable at the next [`flush`]
    /// (a store may buffer it).
    ///
    /// [`flush`]: Storage::flush
    fn put(&mut self, seq: u64, bytes: &[u8]) -> Result<(), StateError>;
    /// Stores records copied from another log (the next seqs, in order), all of them or none,
    /// after everything [`put`] before; durable at the next [`flush`].
    ///
    /// [`put`]: Storage::put
    /// [`flush`]: Storage::flush
    fn put_all(&mut self, records: &[(u64, Vec<u8>)]) -> Result<(), StateError>;
    /// Makes every record stored so far durable.
    fn flush(&self) -> Result<(), StateError>;
    /// A handle that does [`flush`] from any thread, without borrowing the store.
    ///
    /// [`flush`]: Storage::flush
    fn flusher(&self) -> Flusher;

    // ---- Torn tails ----

    /// Whether the last record can be half written (a store without atomic appends). Such a
    /// record is a torn write: the log opens at the record before it and a writer sets it
    /// aside ([`set_aside`]), so its seq is reused, and removes checkpoints past the head.
    ///
    /// [`set_aside`]: Storage::set_aside
    fn tears(&self) -> bool {
        false
    }
    /// Moves the torn last record `seq` out of the log, keeping its bytes elsewhere, durably.
    /// Called only when [`tears`](Storage::tears).
    fn set_aside(&mut self, seq: u64, _bytes: &[u8]) -> Result<(), StateError> {
        Err(StateError::Corrupt {
            seq,
            detail: format!("{} cannot set a record aside", self.location()),
        })
    }

    // ---- Head (chain.rs) ----

    /// Whether the store keeps the log's head outside its own recovery (written with each
    /// flush, from the last record flushed). A store that does refuses a chained log without
    /// a head.
    fn keeps_head(&self) -> bool {
        false
    }
    /// The head the store last made durable, if any. `Err`: it cannot be read or is damaged.
    fn read_head(&self) -> Result<Option<Head>, StateError> {
        Ok(None)
    }
    /// Sets the head to `head` (durably), even below the one stored: after a recovery that
    /// moved the damaged records out of the log.
    fn reset_head(&mut self, _head: Option<Head>) -> Result<(), StateError> {
        Ok(())
    }
    /// A recovery (`state recover`, see `log::recover`): keeps a copy of the whole damaged
    /// store as it is (records, head, checkpoints), then moves the records after `good` out
    /// of the log (they stay in the copy), removes the checkpoints past `good` and sets the
    /// head to `head`, durably. Returns where the copy is, for people. A store that can does
    /// it all at once (PostgreSQL: one transaction); one that cannot orders the steps so that
    /// a recovery cut short still reads as damaged (the head is set last).
    fn set_damage_aside(&mut self, good: u64, head: Option<Head>) -> Result<String, StateError>;

    // ---- Lineage ----

    /// The state's lineage, if one was stored.
    fn read_lineage(&self) -> Result<Option<String>, StateError>;
    /// Stores the lineage of a new state (durably).
    fn create_lineage(&mut self, lineage: &str) -> Result<(), StateError>;
    /// Replaces the lineage with a migrated log's (durably); `head` is the log's head. A store
    /// may refuse to change the lineage of a log with events.
    fn replace_lineage(&mut self, lineage: &str, head: u64) -> Result<(), StateError>;

    // ---- Checkpoints (a derived cache of the fold) ----

    /// The seqs of the stored checkpoints, ascending.
    fn checkpoint_seqs(&self) -> Result<Vec<u64>, StateError>;
    /// Reads and decodes the checkpoint at `seq`: the outer error is a failed read of the
    /// store, the inner one a checkpoint that does not decode (skipped with a warning).
    fn read_checkpoint(&self, seq: u64) -> Result<Result<Snapshot, String>, StateError>;
    /// Stores a checkpoint of `snapshot` (at its head) and removes all but the newest `keep`.
    fn write_checkpoint(&mut self, snapshot: &Snapshot, keep: usize) -> Result<(), StateError>;
    /// Removes the checkpoint at `seq`.
    fn remove_checkpoint(&mut self, seq: u64) -> Result<(), StateError>;
    /// Removes every checkpoint.
    fn clear_checkpoints(&mut self) -> Result<(), StateError>;
    /// A checkpoint the store decoded ahead (while it opened), if it is still the newest one
    /// covering at most `upto`. Taken once, at open.
    fn early_checkpoint(&mut self, _upto: u64) -> Option<Snapshot> {
        None
    }

    /// After a writer opened the log: removes what a crash left behind in the store's own
    /// files (temporaries, old formats).
    fn tidy(&mut self) -> Result<(), StateError> {
        Ok(())
    }
}

/// A handle that flushes the log without borrowing the store, so that many writers can share
/// one flush (group commit): each appends under the store's lock, then asks for a flush that
/// covers its event; one flush makes every event appended before it durable.
#[derive(Clone)]
pub struct Flusher(std::sync::Arc<dyn Fn() -> Result<(), StateError> + Send + Sync>);

impl Flusher {
    /// A flusher that calls `f`.
    pub(crate) fn new(f: impl Fn() -> Result<(), StateError> + Send + Sync + 'static) -> Flusher {
        Flusher(std::sync::Arc::new(f))
    }

    /// Makes every event appended so far durable.
    pub fn flush(&self) -> Result<(), StateError> {
        (self.0)()
    }
}
