//! The event log, written once over any [`Storage`]: [`LogCore`] assigns sequence numbers and
//! runs, encodes events, folds them into the [`Snapshot`], writes and reads checkpoints,
//! travels in time and checks the numbered invariants; [`EventLog`] is how the engine sees
//! an open log. The stores (`sled_store.rs`, `pg_store.rs`) only keep bytes.
//!
//! **Commit points.** `append` encodes the event, hands the record to the store (which may
//! buffer it) and applies the event to the in-memory snapshot; `commit` flushes the store.
//! A crash loses at most a suffix of the uncommitted events.
//!
//! **Checkpoints** are a derived cache: deleting them changes nothing but speed. They are
//! written by `checkpoint()` and automatically on `commit` once enough events have
//! accumulated (at least [`CHECKPOINT_EVERY`], and at least the number of instances in state,
//! so their cost stays proportional to the events appended), always after the flush that
//! makes the events they cover durable. The newest [`KEEP_CHECKPOINTS`] are kept. One that
//! does not decode is skipped with a warning.
//!
//! **Faults.** An undecodable *last* record of a store whose appends can tear
//! ([`Storage::tears`]) is a torn write: the state opens at the record before it with a
//! warning, and a writer sets the torn bytes aside (so the next append can take its seq) and
//! removes checkpoints past the head — nothing is silently dropped. Any other undecodable
//! record, or a gap in the seqs, is [`StateError::Corrupt`]: never a silently different state.

use crate::chain::{self, Hash, Head};
use crate::check::{self, Violation};
use crate::error::StateError;
use crate::event::{
    self, DecodeError, Event, EventBody, RunContext, RunOutcome, RunSummary, CURRENT_VERSION,
};
use crate::snapshot::Snapshot;
use crate::storage::{Key, Storage};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

pub use crate::storage::Flusher;

/// Write an automatic checkpoint once at least this many events follow the last one.
pub(crate) const CHECKPOINT_EVERY: u64 = 10_000;
/// How many checkpoints are kept.
pub(crate) const KEEP_CHECKPOINTS: usize = 3;

/// How to open a state directory.
#[derive(Clone, Debug)]
pub struct OpenOptions {
    /// The command opening it (recorded in `lock.json` for other processes' lock errors).
    pub command: String,
    /// How long to keep retrying while another process holds the lock (zero: fail at once).
    pub lock_timeout: Duration,
    /// Whether events may be appended. A read-only open of a missing directory is
    /// [`StateError::NotFound`]; a write open creates it.
    pub write: bool,
    /// `-lock=false`: a PostgreSQL writer takes no advisory lock and writes no holder record
    /// (its appends still fail on a sequence another writer took: nothing is overwritten).
    /// sled's exclusive hold of its database files is no lock a writer can skip.
    pub skip_lock: bool,
    /// The state's encryption (OpenTofu's `encryption { state { … } }`): every record and
    /// checkpoint is sealed with its primary method and opened with any of its methods.
    /// `None`: none configured (an encrypted record is then an error naming its key).
    pub encryption: Option<std::sync::Arc<crate::crypt::Encryption>>,
}

impl Default for OpenOptions {
    fn default() -> Self {
        OpenOptions {
            command: String::new(),
            lock_timeout: Duration::ZERO,
            write: false,
            skip_lock: false,
            encryption: None,
        }
    }
}

/// Where a clock reading comes from (tests and golden outputs fix it).
pub(crate) type Clock = Box<dyn Fn() -> u64 + Send>;

/// What a brief visit to the log found (`store::peek_events`).
#[derive(Debug)]
pub enum Peek {
    /// Another process holds the database now: nothing was read; try again later.
    Busy,
    /// The events from the asked position to the end (a torn last record left out, with a
    /// warning), read while holding the database for as short a time as it takes.
    Events(Vec<Event>, Vec<String>),
}

/// An event log and the snapshot it folds to. Appends are buffered; `commit` (or the
/// [`Flusher`]) makes them durable.
pub trait EventLog: Send {
    /// Appends an event (durable at the next commit) and applies it to the snapshot. Events
    /// belong to the open run (a `RunStarted` to its own).
    fn append(&mut self, body: EventBody) -> Result<u64, StateError>;
    /// Appends as [`EventLog::append`] does an event that needs to be durable only with the
    /// next [`EventLog::commit`] (never with a [`Flusher`]'s flush): while a run's first
    /// records are held back for the state's key (see [`EventLog::begin_run_in`]), it is held
    /// with them instead of waiting for the key.
    fn append_deferred(&mut self, body: EventBody) -> Result<u64, StateError> {
        self.append(body)
    }
    /// A commit point: everything appended so far is durable when this returns.
    fn commit(&mut self) -> Result<(), StateError>;
    /// A handle that makes everything appended so far durable, usable from another thread.
    fn flusher(&self) -> Flusher;
    /// The current state.
    fn snapshot(&self) -> &Snapshot;
    /// The current state, moved out of a store opened read-only (an empty one is left in its
    /// place), for a reader that keeps the store open only to hold its lock: it saves a copy
    /// of the whole state (a no-op plan of 100,000 instances held two). A writer's state is
    /// its log's fold and stays: for it this is a copy.
    fn take_snapshot(&mut self) -> Snapshot;
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
    /// The records `from..=to`, decrypted (for copying the log to another store: each
    /// store seals with its own encryption).
    fn raw_events(&self, from: u64, to: u64) -> Result<Vec<(u64, Vec<u8>)>, StateError>;
    /// Appends records copied from another log (decrypted, the next seqs, in order), sealed
    /// with this log's encryption, and commits.
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
    /// Checks the whole hash chain, from the first event, and the log against its head
    /// (`chain.rs`): what was checked, or [`StateError::Damaged`] naming where it breaks.
    fn verify(&self) -> Result<Verified, StateError>;
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
        self.begin_run_in(command, args, RunContext::default())
    }

    /// Starts a run as [`EventLog::begin_run`] does, recording where it runs (`RunContext`,
    /// right after its `RunStarted`, in the same commit) unless nothing of that is known.
    fn begin_run_in(
        &mut self,
        command: &str,
        args: &[String],
        context: RunContext,
    ) -> Result<u64, StateError> {
        let seq = self.append(EventBody::RunStarted {
            command: command.to_string(),
            args: args.to_vec(),
            user: current_user(),
            pid: std::process::id(),
        })?;
        if !context.is_empty() {
            self.append(EventBody::RunContext(context))?;
        }
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

/// What [`EventLog::verify`] checked.
#[derive(Clone, Debug)]
pub struct Verified {
    /// Events read and checked.
    pub events: u64,
    /// Of them, those that carry their chain hash (written since the chain).
    pub chained: u64,
    /// The head the store keeps (`None`: none yet, as before the first commit since the chain).
    pub head: Option<u64>,
    /// The chain hash of the last event, short.
    pub hash: String,
}

/// What [`recover`] did.
#[derive(Clone, Debug)]
pub struct Recovery {
    /// The last good event: the log goes on from it.
    pub good: u64,
    /// The last event the damaged log held (or its head said was committed).
    pub last: u64,
    /// Where the copy of the damaged store is.
    pub backup: String,
    /// The damage found.
    pub damage: String,
    /// The runs whose history was lost (as far as it could be read).
    pub runs: Vec<String>,
    /// The resources whose history was lost (import them again).
    pub objects: Vec<String>,
}

/// An open log on the store `S`: the one implementation of [`EventLog`].
pub(crate) struct LogCore<S: Storage> {
    /// The store; its own open functions reach into it (journal, test hooks).
    pub(crate) storage: S,
    dir: PathBuf,
    snapshot: Snapshot,
    write: bool,
    lineage: String,
    /// The seq of the newest checkpoint (0: none).
    last_checkpoint: u64,
    checkpoint_every: u64,
    clock: Clock,
    /// Reused for encoding each appended event (saves an allocation and its regrowth per
    /// event).
    encode_buf: Vec<u8>,
    /// The sealed record (with encryption).
    seal_buf: Vec<u8>,
    /// The state's encryption (see [`OpenOptions::encryption`]).
    pub(crate) crypt: Option<std::sync::Arc<crate::crypt::Encryption>>,
    /// Messages for the user about work done on open (see [`EventLog::notices`]).
    pub(crate) notices: Vec<String>,
    /// The chain hash of the record at the head (`chain.rs`).
    chain: Hash,
    /// Reused for the stored form of each appended event (its chain hash and payload).
    record_buf: Vec<u8>,
    /// A run's first records (`RunStarted`, `RunContext`, and what
    /// [`EventLog::append_deferred`] appends after them, such as the run's plan), encoded but
    /// not yet sealed nor stored, while the state's key is still being derived (see
    /// [`EventLog::begin_run_in`]): sealed, chained and stored, in order, before anything
    /// else is appended, committed or read from the store.
    held: Vec<(u64, Vec<u8>)>,
}

impl<S: Storage> LogCore<S> {
    /// Opens the log in `storage` (opened, and locked when `write`): folds the newest usable
    /// checkpoint and the records after it up to `upto` (`None`: all), and with `write`
    /// tidies the store and gives a new state its lineage. `dir` is the local state
    /// directory. The warnings say what was repaired or skipped.
    pub(crate) fn over(
        storage: S,
        dir: &Path,
        write: bool,
        upto: Option<u64>,
        crypt: Option<std::sync::Arc<crate::crypt::Encryption>>,
    ) -> Result<(LogCore<S>, Vec<String>), StateError> {
        let mut log = LogCore {
            storage,
            dir: dir.to_path_buf(),
            snapshot: Snapshot::new(),
            write,
            lineage: String::new(),
            last_checkpoint: 0,
            checkpoint_every: CHECKPOINT_EVERY,
            clock: Box::new(now_ms),
            encode_buf: Vec::new(),
            seal_buf: Vec::new(),
            crypt,
            notices: Vec::new(),
            chain: chain::ZERO,
            record_buf: Vec::new(),
            held: Vec::new(),
        };
        let warnings = log.load(upto)?;
        if write {
            log.tidy()?;
            // A new log's head starts at 0, made durable before its first event: a process
            // killed between its first commit and the head's first write then leaves a head
            // that lags (the events after it are checked by the chain), never a missing one,
            // which only damage explains (found by p07: a kill 143 ms into a first apply).
            // (A head torn while it was first written, found by p07 too, is written again:
            // no event depends on it yet.)
            if log.storage.keeps_head()
                && log.storage.last_seq()? == 0
                && !matches!(log.storage.read_head(), Ok(Some(_)))
            {
                log.storage.reset_head(Some(chain::Head {
                    seq: 0,
                    hash: chain::ZERO,
                }))?;
            }
        }
        log.lineage = match log.storage.read_lineage()? {
            Some(lineage) => lineage,
            None if write => {
                let lineage = new_lineage(dir);
                log.storage.create_lineage(&lineage)?;
                lineage
            }
            None => new_lineage(dir),
        };
        Ok((log, warnings))
    }

    /// Seals `plain` (with encryption), chains it to the head and stores it as record `seq`.
    fn store_record(&mut self, seq: u64, plain: &[u8]) -> Result<(), StateError> {
        let mut record = std::mem::take(&mut self.record_buf);
        let payload = match &self.crypt {
            Some(c) => {
                c.seal_into(plain, &mut self.seal_buf)
                    .map_err(|message| StateError::Encryption { message })?;
                &self.seal_buf
            }
            None => plain,
        };
        let hash = chain::seal(&self.chain, seq, payload, &mut record);
        let put = self.storage.put(seq, &record);
        self.record_buf = record;
        trim(&mut self.record_buf);
        trim(&mut self.seal_buf);
        put?;
        self.chain = hash;
        Ok(())
    }

    /// Stores the records [`EventLog::begin_run_in`] held back (waiting for the key now if
    /// it is still being derived).
    fn store_held(&mut self) -> Result<(), StateError> {
        if self.held.is_empty() {
            return Ok(());
        }
        for (seq, plain) in std::mem::take(&mut self.held) {
            self.store_record(seq, &plain)?;
        }
        Ok(())
    }

    /// Encodes, seals, chains and stores `event` (the next seq), and applies it.
    fn store_event(&mut self, event: Event) -> Result<u64, StateError> {
        let seq = event.seq;
        event::encode_into(&event, &mut self.encode_buf);
        let plain = std::mem::take(&mut self.encode_buf);
        let stored = self.store_record(seq, &plain);
        self.encode_buf = plain;
        trim(&mut self.encode_buf);
        stored?;
        self.snapshot.apply_owned(event);
        Ok(seq)
    }

    /// `body` as event `seq` of run `run`, stamped with this version and the clock's time.
    fn stamped(&self, seq: u64, run: u64, body: EventBody) -> Event {
        Event {
            seq,
            version: CURRENT_VERSION,
            time_ms: (self.clock)(),
            run,
            body,
        }
    }

    /// Holds `body` back as record `seq` of run `run` (see [`LogCore::held`]): encoded, not
    /// yet sealed nor stored, and applied.
    fn hold(&mut self, seq: u64, run: u64, body: EventBody) {
        let event = self.stamped(seq, run, body);
        let mut plain = Vec::new();
        event::encode_into(&event, &mut plain);
        self.held.push((seq, plain));
        self.snapshot.apply_owned(event);
    }

    /// Rebuilds the snapshot: the newest usable checkpoint, then the events after it, each
    /// checked against the hash chain; a whole open also checks the log against its head.
    fn load(&mut self, upto: Option<u64>) -> Result<Vec<String>, StateError> {
        let mut warnings = Vec::new();
        // The head the store made durable: the log must reach it with the same hash. (An open
        // up to a position reads a prefix on purpose: no head.) It is read before the log's
        // end: a reader beside a writer (another runner, `cairn ui`) that read the end first
        // could see a head committed after it, and take the events between for lost.
        let head = match upto {
            None => match self.storage.read_head() {
                Ok(h) => h,
                // A new log's head, torn while it was first written (a process killed then):
                // no event depends on it, and a writer's open writes it again. (A new log: no
                // event and no lineage, which is written only once the head is whole.)
                Err(_)
                    if self.storage.last_seq()? == 0 && self.storage.read_lineage()?.is_none() =>
                {
                    None
                }
                Err(e) => return Err(self.damaged(1, e.to_string())),
            },
            Some(_) => None,
        };
        let last_seq = self.storage.last_seq()?;
        if last_seq == 0 {
            return match head {
                Some(h) if h.seq > 0 => Err(self.lost(0, h, &Snapshot::new())),
                _ => Ok(warnings),
            };
        }
        let end = upto.map_or(last_seq, |u| u.min(last_seq));
        let snapshot = match self.storage.early_checkpoint(end) {
            Some(s) => Some(s),
            None => {
                let (snapshot, ckpt_warnings) = self.newest_checkpoint(end)?;
                warnings.extend(ckpt_warnings);
                snapshot
            }
        };
        self.snapshot = snapshot.unwrap_or_default();
        self.last_checkpoint = self.snapshot.head;
        let from = self.snapshot.head + 1;
        let mut prev = match from {
            1 => chain::ZERO,
            _ => self.hash_at(from - 1)?,
        };
        let mut expected = from;
        let mut torn = None;
        let mut damage = None;
        let tears = self.storage.tears();
        let committed = |seq: u64| head.is_some_and(|h| seq <= h.seq);
        for item in self.storage.scan(from, Some(end))? {
            let (k, v) = item?;
            let seq = match check_key(k, expected) {
                Ok(seq) => seq,
                Err(StateError::Corrupt { seq, detail }) => {
                    damage = Some((seq, detail));
                    break;
                }
                Err(e) => return Err(e),
            };
            expected += 1;
            let bytes = v.as_ref();
            let read = chain::verify(&prev, seq, bytes)
                .map_err(|detail| StateError::Corrupt { seq, detail })
                .and_then(|h| decode_record(self.crypt.as_deref(), seq, bytes).map(|e| (h, e)));
            match read {
                Ok((h, event)) => {
                    prev = h;
                    self.snapshot.apply_owned(event);
                }
                Err(StateError::Corrupt { detail, .. })
                    if tears && seq == last_seq && !committed(seq) =>
                {
                    warnings.push(format!(
                        "the last state log record ({seq}) is incomplete, probably from a \
                         process killed while writing ({detail}); the state opens at record {}{}",
                        seq - 1,
                        if self.write {
                            " and the torn record was set aside"
                        } else {
                            ""
                        }
                    ));
                    if self.write {
                        torn = Some((seq, v.as_ref().to_vec()));
                    }
                }
                Err(StateError::Corrupt { seq, detail }) => {
                    damage = Some((seq, detail));
                    break;
                }
                Err(e) => return Err(e),
            }
        }
        if damage.is_none() && expected <= end && torn.is_none() {
            damage = Some((expected, "the record is missing".into()));
        }
        if let Some((seq, detail)) = damage {
            let what = format!("record {seq} {detail}");
            return Err(self.damaged_at(seq, what));
        }
        if let Some(h) = head {
            if self.snapshot.head < h.seq {
                return Err(self.lost(self.snapshot.head, h, &self.snapshot));
            }
            let at = if h.seq == self.snapshot.head {
                prev
            } else if h.seq == 0 {
                chain::ZERO
            } else {
                self.hash_at(h.seq)?
            };
            if at != h.hash {
                return Err(self.damaged_at(
                    1,
                    format!(
                        "event {} is not the one committed (its chain hash is {}, the head \
                         recorded {}): the history up to it was changed or replaced",
                        h.seq,
                        chain::short(&at),
                        chain::short(&h.hash)
                    ),
                ));
            }
        } else if upto.is_none() && self.storage.keeps_head() && self.hash_is_stored(last_seq)? {
            return Err(self.damaged(
                last_seq + 1,
                "the log's head (its last committed event, kept beside the log) is missing, \
                 so whether events were lost cannot be told"
                    .into(),
            ));
        }
        if let Some((seq, bytes)) = torn {
            self.storage.set_aside(seq, &bytes)?;
        }
        self.chain = prev;
        Ok(warnings)
    }

    /// The chain hash of record `seq` (read from the store).
    fn hash_at(&self, seq: u64) -> Result<Hash, StateError> {
        for item in self.storage.scan(seq, Some(seq))? {
            let (k, v) = item?;
            if k == Ok(seq) {
                return Ok(chain::hash_of(seq, v.as_ref()));
            }
        }
        Err(self.damaged(seq, format!("record {seq} is missing")))
    }

    /// Whether record `seq` carries its chain hash (written since the chain).
    fn hash_is_stored(&self, seq: u64) -> Result<bool, StateError> {
        last_is_chained(&self.storage, seq)
    }

    fn damaged(&self, from: u64, detail: String) -> StateError {
        StateError::Damaged {
            location: self.storage.location(),
            from,
            detail,
        }
    }

    /// The error for damage found at record `from` while folding: what the log from there
    /// holds, as far as it can be read.
    fn damaged_at(&self, from: u64, what: String) -> StateError {
        let prefix = &self.snapshot;
        let mut after = prefix.clone();
        let mut read = 0;
        if let Ok(records) = self.storage.scan(from.max(1), None) {
            for (k, v) in records.flatten() {
                if let (Ok(seq), Ok(e)) = (k, open_any(self.crypt.as_deref(), v.as_ref())) {
                    if seq >= from && e.seq == seq && seq > after.head {
                        after.apply_owned(e);
                        read += 1;
                    }
                }
            }
        }
        let newer = self.checkpoint_after(after.head.max(from));
        let after = newer.unwrap_or(after);
        let held = if after.head >= from {
            held_by(prefix, &after, from)
        } else {
            "what the log held from there on cannot be read".into()
        };
        let _ = read;
        self.damaged(from, format!("{what}; {held}"))
    }

    /// The error for a log that reads shorter than its head `h`: events after `last` lost.
    fn lost(&self, last: u64, h: Head, prefix: &Snapshot) -> StateError {
        let held = match self.checkpoint_after(last) {
            Some(after) => held_by(prefix, &after, last + 1),
            None => "no checkpoint covers them, so which runs and resources they held cannot \
                     be read; compare `cairn state list` with your infrastructure"
                .into(),
        };
        self.damaged(
            last + 1,
            format!(
                "the log ends at event {last}, but {} events were committed (its head, kept \
                 beside the log, says so): events {}..{} are lost; {held}",
                h.seq,
                last + 1,
                h.seq
            ),
        )
    }

    /// The newest checkpoint past `seq` that decodes.
    fn checkpoint_after(&self, seq: u64) -> Option<Snapshot> {
        let seqs = self.storage.checkpoint_seqs().ok()?;
        seqs.into_iter()
            .rev()
            .filter(|s| *s > seq)
            .find_map(|s| self.read_checkpoint(s).ok().and_then(Result::ok))
    }

    /// After a write open: removes checkpoints past the head of a store whose tail can tear
    /// (their seqs will name other events), then what the store's own tidying removes.
    fn tidy(&mut self) -> Result<(), StateError> {
        if self.storage.tears() {
            for seq in self.storage.checkpoint_seqs()? {
                if seq > self.snapshot.head {
                    self.storage.remove_checkpoint(seq)?;
                }
            }
        }
        self.storage.tidy()
    }

    /// The newest checkpoint covering at most `upto` that decodes, and a warning for each
    /// newer one that does not.
    fn newest_checkpoint(&self, upto: u64) -> Result<(Option<Snapshot>, Vec<String>), StateError> {
        let mut warnings = Vec::new();
        for seq in self.storage.checkpoint_seqs()?.into_iter().rev() {
            if seq > upto {
                continue;
            }
            match self.read_checkpoint(seq)? {
                Ok(s) => return Ok((Some(s), warnings)),
                Err(e) => warnings.push(format!(
                    "checkpoint at {seq} is unreadable ({e}); skipped (it is rebuilt)"
                )),
            }
        }
        Ok((None, warnings))
    }

    /// The checkpoint at `seq`, decoded and holding the state at `seq`.
    fn read_checkpoint(&self, seq: u64) -> Result<Result<Snapshot, String>, StateError> {
        Ok(self.storage.read_checkpoint(seq)?.and_then(|snap| {
            if snap.head == seq {
                Ok(snap)
            } else {
                Err(format!("it holds the state at {}", snap.head))
            }
        }))
    }

    fn write_checkpoint(&mut self) -> Result<(), StateError> {
        let seq = self.snapshot.head;
        if seq == 0 || seq == self.last_checkpoint {
            return Ok(());
        }
        self.storage
            .write_checkpoint(&self.snapshot, KEEP_CHECKPOINTS)?;
        self.last_checkpoint = seq;
        Ok(())
    }

    /// The records `from..=to`, checked contiguous, each passed to `each` with its seq.
    fn read_between<T>(
        &self,
        from: u64,
        to: u64,
        mut each: impl FnMut(u64, &[u8]) -> Result<T, StateError>,
    ) -> Result<Vec<T>, StateError> {
        let mut out = Vec::new();
        if from > to {
            return Ok(out);
        }
        let mut expected = from;
        for item in self.storage.scan(from, Some(to))? {
            let (k, v) = item?;
            let seq = check_key(k, expected)?;
            expected += 1;
            out.push(each(seq, v.as_ref())?);
        }
        if expected <= to {
            return Err(StateError::Corrupt {
                seq: expected,
                detail: "the record is missing".into(),
            });
        }
        Ok(out)
    }

    fn events_between(&self, from: u64, to: u64) -> Result<Vec<Event>, StateError> {
        let crypt = self.crypt.as_deref();
        let (stored_to, held) = self.split_held(from, to);
        let mut out = self.read_between(from, stored_to, |seq, b| decode_record(crypt, seq, b))?;
        for (seq, plain) in held {
            out.push(event::decode(plain).map_err(|e| StateError::Corrupt {
                seq: *seq,
                detail: e.to_string(),
            })?);
        }
        Ok(out)
    }

    /// `from..=to` split at the records held back (see [`LogCore::held`]): the last seq to
    /// read from the store, and the held records in the range.
    fn split_held(&self, from: u64, to: u64) -> (u64, &[(u64, Vec<u8>)]) {
        match self.held.first() {
            Some((first, _)) if *first <= to => {
                let held = &self.held[..];
                let lo = held.partition_point(|(s, _)| *s < from);
                let hi = held.partition_point(|(s, _)| *s <= to);
                (to.min(first - 1), &held[lo..hi])
            }
            _ => (to, &[]),
        }
    }
}

/// A buffer reused for every record lets go of what one large record grew it to: a run's
/// plan record (`RunPlanned`) is about 350 bytes per planned change, 35 MB at 100,000, and
/// the encoding, sealing and chaining buffers each kept that much for the rest of the run
/// (issue 31). Records of up to 1 MiB keep their buffer.
fn trim(buf: &mut Vec<u8>) {
    if buf.capacity() > 1 << 20 {
        *buf = Vec::new();
    }
}

/// The seq of a record read where `expected` should be, or why the log is corrupt there.
fn check_key(k: Key, expected: u64) -> Result<u64, StateError> {
    match k {
        Ok(seq) if seq == expected => Ok(seq),
        Ok(seq) => Err(StateError::Corrupt {
            seq: expected,
            detail: format!("the record is missing (the next record is {seq})"),
        }),
        Err(k) => Err(StateError::Corrupt {
            seq: expected,
            detail: format!("unexpected key {k} in the events tree"),
        }),
    }
}

impl<S: Storage> EventLog for LogCore<S> {
    fn append(&mut self, body: EventBody) -> Result<u64, StateError> {
        if !self.write {
            return Err(StateError::ReadOnly);
        }
        let seq = self.snapshot.head + 1;
        let run = match body {
            EventBody::RunStarted { .. } => seq,
            _ => self.snapshot.open_run.unwrap_or(0),
        };
        let event = self.stamped(seq, run, body);
        self.store_held()?;
        self.store_event(event)
    }

    fn append_deferred(&mut self, body: EventBody) -> Result<u64, StateError> {
        let holding = self.write
            && !self.held.is_empty()
            && self.crypt.as_ref().is_some_and(|c| !c.ready_to_seal());
        if !holding {
            return self.append(body);
        }
        let seq = self.snapshot.head + 1;
        let run = self.snapshot.open_run.unwrap_or(0);
        self.hold(seq, run, body);
        Ok(seq)
    }

    /// Begins the run as [`EventLog::begin_run_in`] says; while the state's key is still
    /// being derived (a new log, whose first write takes the key derived ahead), the run's
    /// first records are held back, not committed: they are stored before the next append
    /// (every provider call that changes the world is preceded by a commit that stores them
    /// first) or commit, so PBKDF2 runs beside the plan instead of holding up the state's
    /// open. A process that dies before that leaves no trace of a run that did nothing.
    fn begin_run_in(
        &mut self,
        command: &str,
        args: &[String],
        context: RunContext,
    ) -> Result<u64, StateError> {
        let waits = self.write
            && self.held.is_empty()
            && self.crypt.as_ref().is_some_and(|c| !c.ready_to_seal());
        if !waits {
            let seq = self.append(EventBody::RunStarted {
                command: command.to_string(),
                args: args.to_vec(),
                user: current_user(),
                pid: std::process::id(),
            })?;
            if !context.is_empty() {
                self.append(EventBody::RunContext(context))?;
            }
            self.commit()?;
            return Ok(seq);
        }
        let first = self.snapshot.head + 1;
        let mut bodies = vec![EventBody::RunStarted {
            command: command.to_string(),
            args: args.to_vec(),
            user: current_user(),
            pid: std::process::id(),
        }];
        if !context.is_empty() {
            bodies.push(EventBody::RunContext(context));
        }
        for body in bodies {
            self.hold(self.snapshot.head + 1, first, body);
        }
        Ok(first)
    }

    fn commit(&mut self) -> Result<(), StateError> {
        if !self.write {
            return Ok(());
        }
        self.store_held()?;
        self.storage.flush()?;
        let due = self
            .checkpoint_every
            .max(self.snapshot.resources.len() as u64);
        if self.snapshot.head - self.last_checkpoint >= due {
            self.write_checkpoint()?;
        }
        Ok(())
    }

    fn flusher(&self) -> Flusher {
        self.storage.flusher()
    }

    fn snapshot(&self) -> &Snapshot {
        &self.snapshot
    }

    fn take_snapshot(&mut self) -> Snapshot {
        match self.write {
            true => self.snapshot.clone(),
            false => std::mem::take(&mut self.snapshot),
        }
    }

    fn dir(&self) -> &Path {
        &self.dir
    }

    fn location(&self) -> String {
        self.storage.location()
    }

    fn is_writable(&self) -> bool {
        self.write
    }

    fn lineage(&self) -> String {
        self.lineage.clone()
    }

    fn set_clock(&mut self, clock: Clock) {
        self.clock = clock;
    }

    fn set_checkpoint_every(&mut self, n: u64) {
        self.checkpoint_every = n.max(1);
    }

    fn events(&self, from: u64) -> Result<Vec<Event>, StateError> {
        self.events_between(from.max(1), self.snapshot.head)
    }

    fn raw_events(&self, from: u64, to: u64) -> Result<Vec<(u64, Vec<u8>)>, StateError> {
        let crypt = self.crypt.as_deref();
        let (stored_to, held) = self.split_held(from, to);
        let mut out = self.read_between(from, stored_to, |seq, v| {
            let plain = crate::crypt::open_with(
                crypt,
                &format!("state log record {seq}"),
                chain::payload(v),
            )
            .map_err(|message| StateError::Encryption { message })?;
            Ok((seq, plain.into_owned()))
        })?;
        out.extend(held.iter().cloned());
        Ok(out)
    }

    fn import_raw(&mut self, records: &[(u64, Vec<u8>)]) -> Result<(), StateError> {
        if !self.write {
            return Err(StateError::ReadOnly);
        }
        self.store_held()?;
        let mut events = Vec::with_capacity(records.len());
        for (i, (seq, bytes)) in records.iter().enumerate() {
            let want = self.snapshot.head + 1 + i as u64;
            if *seq != want {
                return Err(StateError::Corrupt {
                    seq: *seq,
                    detail: format!("expected record {want}"),
                });
            }
            events.push(decode_record(None, *seq, bytes)?);
        }
        // Stored as this log stores its own: sealed with its encryption, chained to its head.
        let mut chain = self.chain;
        let mut stored = Vec::with_capacity(records.len());
        for (seq, plain) in records {
            let payload = match &self.crypt {
                Some(c) => c
                    .seal(plain)
                    .map_err(|message| StateError::Encryption { message })?,
                None => plain.clone(),
            };
            let mut record = Vec::new();
            chain = chain::seal(&chain, *seq, &payload, &mut record);
            stored.push((*seq, record));
        }
        self.storage.put_all(&stored)?;
        self.chain = chain;
        for e in events {
            self.snapshot.apply_owned(e);
        }
        self.commit()
    }

    fn set_lineage(&mut self, lineage: &str) -> Result<(), StateError> {
        if !self.write {
            return Err(StateError::ReadOnly);
        }
        self.store_held()?;
        self.storage.replace_lineage(lineage, self.snapshot.head)?;
        self.lineage = lineage.to_string();
        Ok(())
    }

    fn snapshot_at(&self, seq: u64) -> Result<Snapshot, StateError> {
        let head = self.snapshot.head;
        if seq > head {
            return Err(StateError::OutOfRange { seq, head });
        }
        if seq == head {
            return Ok(self.snapshot.clone());
        }
        let mut s = self.newest_checkpoint(seq)?.0.unwrap_or_default();
        for e in self.events_between(s.head + 1, seq)? {
            s.apply_owned(e);
        }
        Ok(s)
    }

    fn checkpoint(&mut self) -> Result<(), StateError> {
        if !self.write {
            return Err(StateError::ReadOnly);
        }
        self.commit()?;
        self.write_checkpoint()
    }

    fn clear_checkpoints(&mut self) -> Result<(), StateError> {
        if !self.write {
            return Err(StateError::ReadOnly);
        }
        self.store_held()?;
        self.storage.clear_checkpoints()?;
        self.last_checkpoint = 0;
        self.commit()
    }

    /// Checks the numbered invariants (see the crate docs) over the whole log, every
    /// checkpoint and the snapshot held.
    fn check(&self) -> Vec<Violation> {
        let mut checker = check::LogChecker::new();
        let seqs = self.storage.checkpoint_seqs().unwrap_or_default();
        let checkpoints: BTreeMap<u64, Result<Snapshot, String>> = seqs
            .into_iter()
            .map(|s| {
                let r = self
                    .read_checkpoint(s)
                    .unwrap_or_else(|e| Err(e.to_string()));
                (s, r)
            })
            .collect();
        checker.expect_checkpoints(&checkpoints);
        let records = match self.storage.scan(0, None) {
            Ok(r) => r,
            Err(e) => {
                checker.unreadable(1, &e.to_string());
                return checker.finish(&self.snapshot);
            }
        };
        let mut expected = 1;
        for item in records {
            let (k, v) = match item {
                Ok(kv) => kv,
                Err(e) => {
                    checker.unreadable(expected, &e.to_string());
                    break;
                }
            };
            let seq = match k {
                Ok(seq) => seq,
                Err(k) => {
                    checker.unreadable(expected, &format!("unexpected key {k}"));
                    continue;
                }
            };
            if seq > self.snapshot.head {
                checker.beyond_head(seq);
                continue;
            }
            if seq != expected {
                checker.gap(expected, seq);
            }
            expected = seq + 1;
            let decoded = crate::crypt::open_with(
                self.crypt.as_deref(),
                &format!("state log record {seq}"),
                chain::payload(v.as_ref()),
            )
            .and_then(|b| event::decode(&b).map_err(|e| e.to_string()));
            checker.record(seq, decoded);
        }
        // The records held back until the key is derived (in memory, not yet stored).
        for (seq, plain) in &self.held {
            if *seq != expected {
                checker.gap(expected, *seq);
            }
            expected = seq + 1;
            checker.record(*seq, event::decode(plain).map_err(|e| e.to_string()));
        }
        if expected <= self.snapshot.head {
            checker.gap(expected, self.snapshot.head + 1);
        }
        checker.finish(&self.snapshot)
    }

    fn verify(&self) -> Result<Verified, StateError> {
        let head = self.storage.read_head()?;
        let mut prev = chain::ZERO;
        let mut expected = 1;
        let mut chained = 0;
        for item in self.storage.scan(1, None)? {
            let (k, v) = item?;
            let seq = check_key(k, expected).map_err(|e| match e {
                StateError::Corrupt { seq, detail } => {
                    self.damaged_at(seq, format!("record {seq} {detail}"))
                }
                e => e,
            })?;
            expected += 1;
            let bytes = v.as_ref();
            let h = chain::verify(&prev, seq, bytes)
                .map_err(|d| self.damaged_at(seq, format!("record {seq}: {d}")))?;
            decode_record(self.crypt.as_deref(), seq, bytes)
                .map_err(|e| self.damaged_at(seq, e.to_string()))?;
            if chain::split(bytes).0.is_some() {
                chained += 1;
            }
            if head.is_some_and(|hd| hd.seq == seq && hd.hash != h) {
                return Err(self.damaged_at(
                    1,
                    format!("event {seq} is not the one committed (its chain hash differs from the head's)"),
                ));
            }
            prev = h;
        }
        let events = expected - 1;
        if let Some(h) = head {
            if events < h.seq {
                return Err(self.lost(events, h, &self.snapshot));
            }
        }
        if events < self.snapshot.head {
            return Err(self.damaged(
                events + 1,
                format!(
                    "the log ends at event {events} but the state was read to {}",
                    self.snapshot.head
                ),
            ));
        }
        Ok(Verified {
            events,
            chained,
            head: head.map(|h| h.seq),
            hash: chain::short(&prev),
        })
    }

    fn notices(&self) -> Vec<String> {
        self.notices.clone()
    }
}

/// Recovers a damaged log in `storage` (opened for writing, holding the lock): finds the
/// last good event (the chain intact and decodable up to it, and no further), has the store
/// keep a copy of itself as damaged, move the records after the last good one aside, drop
/// checkpoints past it and set the head to it ([`Storage::set_damage_aside`]), then opens
/// the log and records the recovery as a run
/// (`state recover`, with a warning naming the damage and the objects whose history was
/// lost). An undamaged log is an error: there is nothing to recover.
pub(crate) fn recover<S: Storage>(
    mut storage: S,
    dir: &Path,
    args: &[String],
    crypt: Option<std::sync::Arc<crate::crypt::Encryption>>,
) -> Result<(LogCore<S>, Recovery), StateError> {
    let head = storage.read_head().unwrap_or(None);
    let head_damaged = storage.read_head().is_err();
    // A store whose last records cannot be read (an S3 batch that fails its checksum) says
    // so here; the scan below then reads as far as it can.
    let mut last = storage.last_seq().unwrap_or(0);
    // The intact prefix, folded.
    let mut prefix = Snapshot::new();
    let mut prev = chain::ZERO;
    let mut good = 0;
    let mut damage = None;
    let mut later = Snapshot::new();
    // What each run planned to change (its `RunPlanned`), as far as it reads: a run the
    // damage cut names the objects it was to change, even when their events are gone.
    let mut planned: BTreeMap<u64, Vec<String>> = BTreeMap::new();
    let mut note_plan = |e: &Event| {
        if let EventBody::RunPlanned { plan } = &e.body {
            planned.entry(e.run).or_default().extend(
                plan.changes
                    .iter()
                    .filter(|c| {
                        !matches!(
                            c.action,
                            event::PlannedAction::Read | event::PlannedAction::Forget
                        )
                    })
                    .map(|c| c.addr.to_string()),
            );
        }
    };
    {
        for (expected, item) in (1u64..).zip(storage.scan(1, None)?) {
            let (k, v) = match item {
                Ok(kv) => kv,
                Err(e) => {
                    // An unreadable part of the store that names its place (an S3 batch):
                    // what follows it may still say what the lost history held.
                    let (what, place) = match &e {
                        StateError::Corrupt { seq, detail } => (
                            format!("record {seq} cannot be read ({detail})"),
                            Some(*seq),
                        ),
                        e => (format!("record {expected} cannot be read: {e}"), None),
                    };
                    if damage.is_none() {
                        damage = Some(what);
                        later = prefix.clone();
                    }
                    match place {
                        Some(seq) => last = last.max(seq),
                        None => break,
                    }
                    continue;
                }
            };
            if let Ok(seq) = k {
                last = last.max(seq);
            }
            let bytes = v.as_ref();
            match (damage.is_none(), k) {
                (true, Ok(seq)) if seq == expected => {
                    match chain::verify(&prev, seq, bytes).and_then(|h| {
                        decode_record(crypt.as_deref(), seq, bytes)
                            .map(|e| (h, e))
                            .map_err(|e| e.to_string())
                    }) {
                        Ok((h, e)) => {
                            prev = h;
                            good = seq;
                            note_plan(&e);
                            prefix.apply_owned(e);
                        }
                        Err(d) => {
                            damage = Some(format!("record {seq}: {d}"));
                            later = prefix.clone();
                        }
                    }
                }
                (true, Ok(seq)) => {
                    damage = Some(format!("record {expected} is missing (the next is {seq})"));
                    later = prefix.clone();
                }
                (true, Err(k)) => {
                    damage = Some(format!(
                        "unexpected key {k} where record {expected} should be"
                    ));
                    later = prefix.clone();
                }
                (false, Ok(seq)) => {
                    // Past the damage: what can still be read says what the lost history held.
                    if let Ok(e) = open_any(crypt.as_deref(), bytes) {
                        if e.seq == seq && seq > later.head {
                            note_plan(&e);
                            later.apply_owned(e);
                        }
                    }
                }
                (false, Err(_)) => {}
            }
        }
    }
    if damage.is_none() {
        match head {
            Some(h) if h.seq > good => {
                damage = Some(format!(
                    "the log ends at event {good}, but its head says {} events were committed",
                    h.seq
                ));
            }
            Some(h) if h.hash != hash_of_record(&storage, h.seq)? => {
                damage = Some(format!("event {} is not the one committed", h.seq));
                // The whole history is suspect; what is intact reads the same.
            }
            None if head_damaged => damage = Some("the log head is damaged".into()),
            None if storage.keeps_head() && good > 0 && last_is_chained(&storage, good)? => {
                damage = Some("the log head is missing".into());
            }
            _ => {}
        }
    }
    let Some(damage) = damage else {
        return Err(StateError::Backend {
            message: format!(
                "the state log in {} is not damaged (every event checks against the chain and \
                 the head): there is nothing to recover",
                storage.location()
            ),
        });
    };
    // What the lost history held: the best later state known (a checkpoint past the good
    // prefix, or what could still be read of the records past the damage).
    let newest = storage
        .checkpoint_seqs()?
        .into_iter()
        .rev()
        .filter(|s| *s > good)
        .find_map(|s| storage.read_checkpoint(s).ok().and_then(Result::ok));
    let after = match newest {
        Some(c) if c.head > later.head => c,
        _ => later,
    };
    let (mut runs, mut objects) = if after.head > good {
        lost_history(&prefix, &after, good + 1)
    } else {
        (Vec::new(), Vec::new())
    };
    // The runs the damage cut or removed: the one still running at the last good event,
    // and those that started after it (their start may be unreadable: the run is then known
    // by its later records). What they planned to change is lost history too.
    let mut cut: Vec<(u64, String)> = prefix
        .runs
        .last()
        .filter(|r| r.finished_ms.is_none())
        .into_iter()
        .chain(after.runs.iter().filter(|r| r.id > good))
        .map(|r| {
            (
                r.id,
                format!("run {} (cairn {} by {})", r.id, r.command, r.user),
            )
        })
        .collect();
    for id in planned.keys().filter(|id| **id > good) {
        if !cut.iter().any(|(c, _)| c == id) {
            cut.push((*id, format!("run {id}")));
        }
    }
    cut.sort();
    for (id, name) in cut {
        if !runs.contains(&name) {
            runs.push(name);
        }
        for a in planned.get(&id).into_iter().flatten() {
            if !objects.contains(a) {
                objects.push(a.clone());
            }
        }
    }
    objects.sort();
    let new_head = if good == 0 {
        None
    } else {
        Some(Head {
            seq: good,
            hash: hash_of_record(&storage, good)?,
        })
    };
    let backup = storage.set_damage_aside(good, new_head)?;
    let (mut log, _) = LogCore::over(storage, dir, true, None, crypt)?;
    let recovery = Recovery {
        good,
        last: head.map_or(last, |h| h.seq.max(last)),
        backup,
        damage,
        runs,
        objects,
    };
    log.begin_run("state recover", args)?;
    let mut detail = format!(
        "{}. The log goes on from event {good}; the damaged store was copied to {}.",
        recovery.damage, recovery.backup
    );
    if !recovery.runs.is_empty() {
        detail.push_str(&format!(" Runs lost: {}.", recovery.runs.join(", ")));
    }
    if !recovery.objects.is_empty() {
        detail.push_str(&format!(
            " History lost for: {} (import them again).",
            recovery.objects.join(", ")
        ));
    }
    log.append(EventBody::RunDiagnostics {
        diagnostics: vec![event::RecordedDiagnostic {
            severity: event::Severity::Warning,
            summary: "State recovered from damage".into(),
            detail,
            location: None,
            address: None,
        }],
    })?;
    log.finish_run(RunOutcome::Success, RunSummary::default())?;
    Ok((log, recovery))
}

/// The event in a stored record, whatever number it says it is (reading past damage).
fn open_any(crypt: Option<&crate::crypt::Encryption>, bytes: &[u8]) -> Result<Event, String> {
    let plain = crate::crypt::open_with(crypt, "a state log record", chain::payload(bytes))?;
    event::decode(&plain).map_err(|e| e.to_string())
}

/// The chain hash of record `seq` in `storage`.
fn hash_of_record<S: Storage>(storage: &S, seq: u64) -> Result<Hash, StateError> {
    for item in storage.scan(seq, Some(seq))? {
        let (k, v) = item?;
        if k == Ok(seq) {
            return Ok(chain::hash_of(seq, v.as_ref()));
        }
    }
    Ok(chain::ZERO)
}

/// Whether record `seq` in `storage` carries its chain hash.
fn last_is_chained<S: Storage>(storage: &S, seq: u64) -> Result<bool, StateError> {
    match storage.scan(seq, Some(seq))?.next() {
        Some(item) => Ok(chain::split(item?.1.as_ref()).0.is_some()),
        None => Ok(false),
    }
}

/// The event in record `seq` (its chain hash set aside, opened with the state's encryption),
/// checked to say it is number `seq`.
pub(crate) fn decode_record(
    crypt: Option<&crate::crypt::Encryption>,
    seq: u64,
    bytes: &[u8],
) -> Result<Event, StateError> {
    let bytes = crate::crypt::open_with(
        crypt,
        &format!("state log record {seq}"),
        chain::payload(bytes),
    )
    .map_err(|message| StateError::Encryption { message })?;
    match event::decode(&bytes) {
        Ok(e) if e.seq == seq => Ok(e),
        Ok(e) => Err(StateError::Corrupt {
            seq,
            detail: format!("the record says it is number {}", e.seq),
        }),
        Err(DecodeError::TooNew(version)) => Err(StateError::TooNew { seq, version }),
        Err(DecodeError::Malformed(m)) => Err(StateError::Corrupt { seq, detail: m }),
    }
}

/// What the history from `from` held, comparing the state before it (`prefix`) with a later
/// one (`after`): its runs, and the resources whose history it holds.
pub(crate) fn lost_history(
    prefix: &Snapshot,
    after: &Snapshot,
    from: u64,
) -> (Vec<String>, Vec<String>) {
    let runs: Vec<String> = after
        .runs
        .iter()
        .filter(|r| r.id >= from || r.last_seq >= from)
        .map(|r| format!("run {} (cairn {} by {})", r.id, r.command, r.user))
        .collect();
    let mut changed: Vec<String> = after
        .resources
        .iter()
        .filter(|(a, i)| prefix.resources.get(*a) != Some(*i))
        .map(|(a, _)| a.to_string())
        .collect();
    changed.extend(
        prefix
            .resources
            .keys()
            .filter(|a| !after.resources.contains_key(*a))
            .map(|a| a.to_string()),
    );
    (runs, changed)
}

fn held_by(prefix: &Snapshot, after: &Snapshot, from: u64) -> String {
    let (runs, changed) = lost_history(prefix, after, from);
    format!(
        "that history (to event {}) holds {} and changed {}",
        after.head,
        if runs.is_empty() {
            "no whole run".to_string()
        } else {
            runs.join(", ")
        },
        if changed.is_empty() {
            "no resource".to_string()
        } else {
            changed.join(", ")
        }
    )
}

/// The time now, in unix milliseconds.
pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// The name of this machine (`gethostname`), for records of who made what where.
pub fn host_name() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is valid for its length; gethostname NUL-terminates within it or
    // truncates, and we stop at the first NUL.
    let r = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if r != 0 {
        return "unknown host".into();
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

/// Who runs this process, for run records and lock holders.
pub fn current_user() -> String {
    for var in ["USER", "LOGNAME", "USERNAME"] {
        if let Ok(u) = std::env::var(var) {
            if !u.is_empty() {
                return u;
            }
        }
    }
    // SAFETY: getuid has no preconditions and cannot fail.
    let uid = unsafe { libc::getuid() };
    user_name(uid).unwrap_or_else(|| format!("uid {uid}"))
}

/// The name of user `uid` in the system's user database (`getpwuid_r`), as `whoami` says.
fn user_name(uid: libc::uid_t) -> Option<String> {
    let mut buf = vec![0 as libc::c_char; 4096];
    // SAFETY: a zeroed passwd is a valid value to be overwritten.
    let mut pwd: libc::passwd = unsafe { std::mem::zeroed() };
    let mut result: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: every pointer is valid for the call: `pwd` and `result` are ours, `buf` is valid
    // for its length; on success `result` points to `pwd`, whose strings live in `buf`.
    let r = unsafe { libc::getpwuid_r(uid, &mut pwd, buf.as_mut_ptr(), buf.len(), &mut result) };
    if r != 0 || result.is_null() || pwd.pw_name.is_null() {
        return None;
    }
    // SAFETY: pw_name is a NUL-terminated string inside `buf`, which is still alive.
    let name = unsafe { std::ffi::CStr::from_ptr(pwd.pw_name) };
    let name = name.to_string_lossy().into_owned();
    (!name.is_empty()).then_some(name)
}

/// A fresh lineage: a UUID-shaped name derived from the directory, the time and the pid.
pub(crate) fn new_lineage(dir: &Path) -> String {
    let seed = format!("{}|{}|{}", dir.display(), now_ms(), std::process::id());
    // FNV-1a over the seed, twice with different offsets, gives 128 bits.
    let fnv = |offset: u64| {
        seed.bytes().fold(offset, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
        })
    };
    let (a, b) = (fnv(0xcbf2_9ce4_8422_2325), fnv(0x84222325_cbf29ce4));
    format!(
        "{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
        a >> 32,
        (a >> 16) & 0xffff,
        a & 0xffff,
        b >> 48,
        b & 0xffff_ffff_ffff
    )
}
