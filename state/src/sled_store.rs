//! The sled store of the event log (a [`Storage`]): the only file of the crate that talks to
//! sled. Sequence numbers, runs, the fold and checkpoints are the log core's (`log.rs`).
//!
//! Layout of a state directory:
//!
//! ```text
//! <dir>/log/          the sled database (sled 0.34)
//!   tree "events"         key: big-endian u64 seq of the entry's first record; value: a batch
//!                         of records (`chain.rs`), one per durable commit (layout 2), or
//!                         in states written before batches one record (layout 1)
//!   tree "meta"           "lineage": the state's lineage (for Terraform state export)
//!   tree "torn"           records set aside from a torn tail, keyed like "events"
//! <dir>/checkpoints/  <seq>.ckpt: a snapshot and the seq it covers (see `checkpoint.rs`)
//! <dir>/lock.json     who holds the database open (pid, command, since), for lock errors
//! <dir>/log-head      the log's head (`chain.rs`): two checksummed slots written in turn,
//!                     fsynced with each flush, outside sled's own recovery
//! <dir>/damaged-*/    what `cairn state recover` moved aside (a copy of the damaged store)
//! ```
//!
//! **Batches.** sled writes a small value about 2.3 times over (in its log fragment, then in
//! each rewrite of its page) plus a per-key cost, so one key per event cost about 450 bytes
//! on disk for a 180-byte record. The store keeps the records appended since the last flush
//! in memory and the flush writes them as one value: `0xc1 0xb1` (a mark no single record
//! starts with: MessagePack never starts with `0xc1`, and a chained record goes on with the
//! chain's version `0x01`), the record count (u32), the codec (0: plain, 1: zstd), the body's
//! length before compression (u32), a CRC-32 of the header and the stored body, then the
//! body: each record as a varint length and its bytes, zstd-compressed from 256 bytes (the
//! records of one commit share most of their bytes). A long commit is several batches of at
//! most [`BATCH_RECORDS`] records and about [`BATCH_BYTES`] bytes, written at once
//! (`sled::Batch`), so reading one record never decodes much more. Entries of both layouts
//! read side by side, in key order: a state of layout 1 opens as it is and goes on in
//! batches. Reads see the records not yet flushed too, as they did when each `put` went to
//! sled. A batch that does not decode stands as one record at its first seq whose chain hash
//! is zero, which fails the chain's check: the log core then treats it as any damaged record
//! (a torn tail when it is the last and uncommitted, else damage with its recovery), and
//! setting records aside splits a batch at the cut (the records before it stay).
//!
//! **Damage.** sled recovers from a damaged file by dropping what it cannot read, which can
//! silently shorten the log; the head file, written after each flush from the last record the
//! flush covers, makes that an error (see `log.rs`). sled's own corruption errors are turned
//! into [`StateError::Damaged`] with advice.
//!
//! **Commit points.** `put` keeps the record in memory; `flush` writes the batch into sled and
//! flushes (fsync). sled recovers a prefix of its writes after a crash, so a crash loses at
//! most a suffix of the uncommitted events — the property test checks exactly that. A record
//! can still tear ([`Storage::tears`]: a damaged last batch): a torn one is moved to the
//! `torn` tree.
//!
//! **Locking.** sled takes an exclusive `flock` on its database file, so a second opener —
//! another process or the same one — fails; that failure is translated into
//! [`StateError::Locked`] using `lock.json`, which every opener writes once it holds the lock
//! and removes (before releasing the lock) when it closes. Read-only opens take the same lock:
//! sled has no read-only mode; they simply never write. [`peek_sled`] is the exception for
//! readers that run beside other commands (`cairn ui`): it holds the database only while it
//! reads the new records and writes no holder record, so a command that meets the lock then
//! waits out the grace period for an unidentified holder instead of failing.
//!
//! **Checkpoints** are files beside the database, not in it (`checkpoint.rs` says why and how
//! they are laid out); the newest is decoded on a thread of its own while sled opens. A writer
//! drops the sled tree `checkpoints` where versions before format 3 kept theirs.

use crate::chain::{Head, HEAD_LEN};
use crate::checkpoint::{Checkpoints, Early};
use crate::error::StateError;
use crate::log::{decode_record, now_ms, LogCore, OpenOptions, Peek};
use crate::snapshot::Snapshot;
use crate::storage::{Flusher, Key, Records, Storage};
use std::fs;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The sled tree where checkpoints were kept before they moved to files (format 3).
const OLD_CHECKPOINT_TREE: &str = "checkpoints";

/// An open state on sled: the log core over the sled store.
pub(crate) type SledLog = LogCore<SledStorage>;

/// The sled database of a state directory and its checkpoint files (one [`Storage`]).
pub(crate) struct SledStorage {
    dir: PathBuf,
    db: sled::Db,
    events: sled::Tree,
    checkpoints: Checkpoints,
    meta: sled::Tree,
    torn: sled::Tree,
    /// The newest checkpoint, decoded while the database opened.
    early: Option<Early>,
    /// Records appended since the last flush, written as one batch by the next.
    pending: Arc<Pending>,
    /// The log's head beside the database.
    head: Arc<HeadFile>,
}

/// The file of the log's head (`log-head`): two slots of a [`Head`] each, written in turn and
/// fsynced, so a write torn by a crash leaves the other slot (an older, still true head).
pub(crate) struct HeadFile {
    path: PathBuf,
    /// The open file, the seq last written and the slot to write next.
    state: Mutex<(Option<fs::File>, u64, u64)>,
}

impl HeadFile {
    fn new(dir: &Path) -> HeadFile {
        HeadFile {
            path: dir.join("log-head"),
            state: Mutex::new((None, 0, 0)),
        }
    }

    /// The newest intact slot; `Err` when the file is there but neither slot is intact.
    fn read(&self) -> Result<Option<Head>, StateError> {
        let bytes = match fs::read(&self.path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => {
                return Err(StateError::io(
                    format!("cannot read {}", self.path.display()),
                    e,
                ))
            }
        };
        let best = bytes
            .chunks(HEAD_LEN)
            .take(2)
            .filter_map(Head::decode)
            .max_by_key(|h| h.seq);
        match best {
            Some(h) => Ok(Some(h)),
            None => Err(StateError::Corrupt {
                seq: 0,
                detail: format!("the log head {} is damaged", self.path.display()),
            }),
        }
    }

    /// Writes `head` (durably) unless a newer one is written already; `force`: whatever.
    fn write(&self, head: Head, force: bool) -> Result<(), StateError> {
        let mut st = self.state.lock().expect("log head");
        if !force && head.seq <= st.1 && st.0.is_some() {
            return Ok(());
        }
        let fail =
            |e: std::io::Error| StateError::io(format!("cannot write {}", self.path.display()), e);
        if st.0.is_none() {
            let created = !self.path.exists();
            let f = fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .open(&self.path)
                .map_err(fail)?;
            if created {
                if let Some(parent) = self.path.parent() {
                    fs::File::open(parent)
                        .and_then(|d| d.sync_all())
                        .map_err(fail)?;
                }
            }
            st.0 = Some(f);
        }
        let bytes = head.encode();
        let slots: &[u64] = if force { &[0, 1] } else { &[st.2] };
        let file = st.0.as_ref().expect("opened");
        for slot in slots {
            file.write_at(&bytes, slot * HEAD_LEN as u64)
                .map_err(fail)?;
        }
        file.sync_data().map_err(fail)?;
        st.1 = head.seq;
        st.2 = 1 - st.2;
        Ok(())
    }
}

/// Writes the pending records as one batch (several for a long commit), flushes the database
/// and then records the head: the last record as it was before the flush, which the flush
/// made durable. Flushes are kept in order, so batches are written in the order of their
/// records.
fn flush_with_head(
    db: &sled::Db,
    events: &sled::Tree,
    pending: &Pending,
    head: &HeadFile,
    dir: &Path,
) -> Result<(), StateError> {
    let mut thread = pending.order.lock().expect("flush order");
    let last = match pending.write(events, dir)? {
        Some(last) => Some(last),
        None => last_record(events, dir)?,
    };
    guarded_flush(db, dir, &mut thread)?;
    if let Some((seq, record)) = last {
        head.write(Head::of(seq, &record), false)?;
    }
    Ok(())
}

/// The free space a flush needs on the state directory's filesystem: sled writes its log in
/// segments of 512 KiB and rolls to a new one when the current is full.
const FLUSH_RESERVE: u64 = 1 << 20;

/// Bytes available to this process on the filesystem of `dir` (`None` when it cannot say).
fn free_bytes(dir: &Path) -> Option<u64> {
    use std::os::unix::ffi::OsStrExt;
    let path = std::ffi::CString::new(dir.as_os_str().as_bytes()).ok()?;
    // SAFETY: statvfs only writes into the zeroed struct we hand it; `path` is NUL-terminated.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statvfs(path.as_ptr(), &mut st) } != 0 {
        return None;
    }
    Some(st.f_bavail as u64 * st.f_frsize as u64)
}

fn disk_full(dir: &Path, free: u64) -> StateError {
    StateError::io(
        format!("cannot flush the state log ({})", dir.display()),
        format!(
            "No space left on device: the filesystem of the state directory has {free} bytes \
             free, and writing the log needs at least {FLUSH_RESERVE}. Nothing after the last \
             durable event was recorded; free some space and run the command again (the next \
             run resolves any operation this one left pending)"
        ),
    )
}

/// The thread that runs sled's flushes for [`guarded_flush`]: one for the store's life (a
/// thread started for each flush cost a tenth of a small durable commit). Dropped, it ends
/// once its last flush has; abandoned (a flush that never returned), it is left to the
/// process's exit.
struct FlushThread {
    requests: Option<std::sync::mpsc::Sender<std::sync::mpsc::Sender<sled::Result<usize>>>>,
    handle: Option<std::thread::JoinHandle<()>>,
}

impl FlushThread {
    fn start(db: &sled::Db) -> Result<FlushThread, StateError> {
        let (tx, rx) = std::sync::mpsc::channel::<std::sync::mpsc::Sender<_>>();
        let db = db.clone();
        let handle = std::thread::Builder::new()
            .name("cairn-sled-flush".into())
            .spawn(move || {
                for reply in rx {
                    let _ = reply.send(db.flush());
                }
            })
            .map_err(|e| StateError::io("cannot start the state log's flush", e))?;
        Ok(FlushThread {
            requests: Some(tx),
            handle: Some(handle),
        })
    }

    fn abandon(mut self) {
        self.handle = None;
    }
}

impl Drop for FlushThread {
    fn drop(&mut self) {
        self.requests = None;
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

/// `db.flush()`, which sled 0.34 never returns from when the disk fills up while it writes (its
/// writer threads fail, and the flush waits for a durable position that never comes). A flush
/// on a filesystem without room for a new log segment is refused up front, before anything is
/// written; otherwise the flush runs on the store's flush thread (`thread`, started when first
/// needed) while this one watches the free space, and a flush still waiting once the disk is
/// full is reported as the full disk it is (that thread is abandoned to the process's exit; a
/// later flush starts another).
fn guarded_flush(
    db: &sled::Db,
    dir: &Path,
    thread: &mut Option<FlushThread>,
) -> Result<(), StateError> {
    if let Some(free) = free_bytes(dir).filter(|f| *f < FLUSH_RESERVE) {
        return Err(disk_full(dir, free));
    }
    // The reply's sender goes to the thread (none is kept here): a flush thread that dies
    // drops it, and the wait below ends.
    let (tx, rx) = std::sync::mpsc::channel();
    let unsent = match thread.as_ref().and_then(|t| t.requests.as_ref()) {
        Some(requests) => requests.send(tx).err().map(|e| e.0),
        None => Some(tx),
    };
    if let Some(tx) = unsent {
        let t = FlushThread::start(db)?;
        let requests = t
            .requests
            .as_ref()
            .expect("a new flush thread takes requests");
        let sent = requests.send(tx).is_ok();
        if let Some(old) = thread.replace(t) {
            old.abandon();
        }
        if !sent {
            return Err(StateError::io(
                format!("cannot flush the state log ({})", dir.display()),
                "the flush thread stopped",
            ));
        }
    }
    let abandon = |thread: &mut Option<FlushThread>| {
        if let Some(t) = thread.take() {
            t.abandon();
        }
    };
    loop {
        match rx.recv_timeout(std::time::Duration::from_millis(500)) {
            Ok(r) => {
                return r
                    .map(|_| ())
                    .map_err(sled_err("cannot flush the state log", dir))
            }
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                abandon(thread);
                return Err(StateError::io(
                    format!("cannot flush the state log ({})", dir.display()),
                    "the flush stopped without an answer",
                ));
            }
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                if let Some(free) = free_bytes(dir).filter(|f| *f < FLUSH_RESERVE) {
                    abandon(thread);
                    return Err(disk_full(dir, free));
                }
            }
        }
    }
}

/// The holder record in `lock.json`.
#[derive(serde::Serialize, serde::Deserialize)]
struct Holder {
    pid: u32,
    command: String,
    since_ms: u64,
    write: bool,
}

fn key(seq: u64) -> [u8; 8] {
    seq.to_be_bytes()
}

fn seq_of(k: &[u8]) -> Option<u64> {
    Some(u64::from_be_bytes(k.get(..8)?.try_into().ok()?))
}

/// A key of the events tree as the log core reads it.
fn record_key(k: &[u8]) -> Key {
    match seq_of(k) {
        Some(seq) if k.len() == 8 => Ok(seq),
        _ => Err(format!("{k:02x?}")),
    }
}

// ---- Batches (layout 2) ----

/// How a batch value starts: `0xc1` (never the first byte of a MessagePack value) and the
/// batch layout's version (`0xb1`: never the chain's version, the second byte of a single
/// record, `chain::MARK`).
const BATCH_MARK: [u8; 2] = [0xc1, 0xb1];
/// The header of a batch value: mark, record count (u32), codec (u8), length of the body
/// before compression (u32), CRC-32 of the header before it and of the stored body (u32).
const BATCH_HEADER: usize = 2 + 4 + 1 + 4 + 4;
/// The body as stored: the records as they are.
const PLAIN: u8 = 0;
/// The body as stored: zstd over the records.
const ZSTD: u8 = 1;
/// Bodies shorter than this are stored plain (compressing them gains nothing).
const COMPRESS_FROM: usize = 256;
/// The zstd level of batch bodies: batches are small, the default level is fast enough.
const ZSTD_LEVEL: i32 = 3;
/// A batch holds at most this many records and about this many bytes before compression, so
/// that reading one record never decodes much more (a longer commit is several batches,
/// written at once).
const BATCH_RECORDS: usize = 1024;
const BATCH_BYTES: usize = 256 << 10;
/// The most a batch body may claim to hold when decoded (its header is checked by the CRC
/// first; this bounds the allocation whatever): far above what [`BATCH_BYTES`] lets a writer
/// put in one, and above any single record (a batch holds at least one).
const BATCH_MAX_BODY: usize = 1 << 30;

/// Whether a value of the events tree is a batch (else a single record, layout 1).
fn is_batch(value: &[u8]) -> bool {
    value.starts_with(&BATCH_MARK)
}

/// How many records a batch says it holds (`None`: not a whole batch header).
fn batch_count(value: &[u8]) -> Option<u64> {
    if !is_batch(value) || value.len() < BATCH_HEADER {
        return None;
    }
    Some(u32::from_be_bytes(value[2..6].try_into().ok()?) as u64)
}

/// Encodes contiguous records as one batch value (its key is the first record's seq).
fn encode_batch(records: &[(u64, Vec<u8>)]) -> Vec<u8> {
    let mut body = Vec::with_capacity(records.iter().map(|r| r.1.len() + 3).sum());
    for (_, bytes) in records {
        crate::codec::put_uint(&mut body, bytes.len() as u64);
        body.extend_from_slice(bytes);
    }
    let (codec, stored) = if body.len() >= COMPRESS_FROM {
        match zstd::bulk::compress(&body, ZSTD_LEVEL) {
            Ok(z) if z.len() < body.len() => (ZSTD, z),
            _ => (PLAIN, body.clone()),
        }
    } else {
        (PLAIN, body.clone())
    };
    let mut out = Vec::with_capacity(BATCH_HEADER + stored.len());
    out.extend_from_slice(&BATCH_MARK);
    out.extend_from_slice(&(records.len() as u32).to_be_bytes());
    out.push(codec);
    out.extend_from_slice(&(body.len() as u32).to_be_bytes());
    let mut crc = crc32fast::Hasher::new();
    crc.update(&out);
    crc.update(&stored);
    out.extend_from_slice(&crc.finalize().to_be_bytes());
    out.extend_from_slice(&stored);
    out
}

/// The records of a batch value, in order, or what is wrong with it.
fn decode_batch(value: &[u8]) -> Result<Vec<Vec<u8>>, String> {
    let count = batch_count(value).ok_or("the batch ends inside its header")? as usize;
    let codec = value[6];
    let raw_len = u32::from_be_bytes(value[7..11].try_into().expect("4 bytes")) as usize;
    let crc = u32::from_be_bytes(value[11..15].try_into().expect("4 bytes"));
    let stored = &value[BATCH_HEADER..];
    let mut h = crc32fast::Hasher::new();
    h.update(&value[..11]);
    h.update(stored);
    if h.finalize() != crc {
        return Err("the batch fails its checksum".into());
    }
    if raw_len > BATCH_MAX_BODY {
        return Err(format!("the batch claims {raw_len} bytes"));
    }
    let unpacked;
    let body = match codec {
        PLAIN => stored,
        ZSTD => {
            unpacked = zstd::bulk::decompress(stored, raw_len)
                .map_err(|e| format!("the batch does not decompress ({e})"))?;
            &unpacked[..]
        }
        c => return Err(format!("the batch has an unknown codec {c}")),
    };
    if body.len() != raw_len {
        return Err("the batch's body has another length than its header says".into());
    }
    let mut r = crate::codec::Reader::new(body);
    let mut out = Vec::with_capacity(count.min(BATCH_RECORDS * 4));
    for _ in 0..count {
        let n = r.len()?;
        out.push(r.raw(n)?.to_vec());
    }
    if !r.at_end() {
        return Err("the batch holds more than its header says".into());
    }
    Ok(out)
}

/// Splits contiguous records into batches of at most [`BATCH_RECORDS`] records and about
/// [`BATCH_BYTES`] bytes.
fn batches(records: &[(u64, Vec<u8>)]) -> Vec<&[(u64, Vec<u8>)]> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut bytes = 0;
    for (i, (_, r)) in records.iter().enumerate() {
        if i > start && (i - start >= BATCH_RECORDS || bytes + r.len() > BATCH_BYTES) {
            out.push(&records[start..i]);
            start = i;
            bytes = 0;
        }
        bytes += r.len();
    }
    if start < records.len() {
        out.push(&records[start..]);
    }
    out
}

/// Writes contiguous records into the events tree as batches, all of them or none (durable at
/// the next flush of the database).
fn write_batches(events: &sled::Tree, records: &[(u64, Vec<u8>)]) -> sled::Result<()> {
    let parts = batches(records);
    match parts[..] {
        [] => Ok(()),
        [one] => events.insert(key(one[0].0), encode_batch(one)).map(|_| ()),
        _ => {
            let mut batch = sled::Batch::default();
            for part in parts {
                batch.insert(&key(part[0].0), encode_batch(part));
            }
            events.apply_batch(batch)
        }
    }
}

/// A record as the store hands it out: a single record as sled holds it, or one taken out of
/// a batch (or appended, not yet written).
pub(crate) enum SledBytes {
    Stored(sled::IVec),
    Owned(Vec<u8>),
}

impl AsRef<[u8]> for SledBytes {
    fn as_ref(&self) -> &[u8] {
        match self {
            SledBytes::Stored(v) => v,
            SledBytes::Owned(v) => v,
        }
    }
}

/// The records of one entry of the events tree whose seq lies in `from..=to`: a single record
/// (its key as read), or each record of a batch. A batch that cannot be read stands as one
/// record at its first seq that fails the chain's check (`chain::verify`: its stored hash is
/// zero), so the log core treats it as any damaged record: a torn tail when it is the last and
/// uncommitted, else damage from there on, with its recovery.
fn expand(
    k: &[u8],
    v: sled::IVec,
    from: u64,
    to: u64,
    out: &mut std::collections::VecDeque<(Key, SledBytes)>,
) {
    let first = match record_key(k) {
        Ok(first) if is_batch(&v) => first,
        key => {
            out.push_back((key, SledBytes::Stored(v)));
            return;
        }
    };
    match decode_batch(&v) {
        Ok(records) => {
            for (seq, r) in (first..).zip(records) {
                if seq >= from && seq <= to {
                    out.push_back((Ok(seq), SledBytes::Owned(r)));
                }
            }
        }
        Err(_) => {
            let mut r = Vec::with_capacity(2 + 32 + v.len());
            r.extend_from_slice(&crate::chain::MARK);
            r.extend_from_slice(&[0; 32]);
            r.extend_from_slice(&v);
            out.push_back((Ok(first), SledBytes::Owned(r)));
        }
    }
}

/// The records `from..=to` of the events tree, then those of `pending` (appended, not yet
/// written) in the range that the tree does not hold.
struct Scan {
    entries: sled::Iter,
    buf: std::collections::VecDeque<(Key, SledBytes)>,
    from: u64,
    to: u64,
    /// The last seq read from the tree.
    last: u64,
    tree_done: bool,
    pending: std::vec::IntoIter<(u64, Vec<u8>)>,
    err: Box<dyn Fn(sled::Error) -> StateError>,
}

impl Iterator for Scan {
    type Item = Result<(Key, SledBytes), StateError>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some((k, v)) = self.buf.pop_front() {
                if let Ok(seq) = k {
                    self.last = self.last.max(seq);
                }
                return Some(Ok((k, v)));
            }
            if !self.tree_done {
                match self.entries.next() {
                    Some(Ok((k, v))) => {
                        expand(&k, v, self.from, self.to, &mut self.buf);
                        continue;
                    }
                    Some(Err(e)) => {
                        self.tree_done = true;
                        return Some(Err((self.err)(e)));
                    }
                    None => self.tree_done = true,
                }
            }
            let (seq, r) = self.pending.next()?;
            if seq >= self.from && seq <= self.to && seq > self.last {
                return Some(Ok((Ok(seq), SledBytes::Owned(r))));
            }
        }
    }
}

/// The key of the entry of the events tree that holds record `seq` (a batch starting before
/// it, or its own), if any.
fn entry_holding(events: &sled::Tree, seq: u64) -> sled::Result<Option<(u64, sled::IVec)>> {
    let Some((k, v)) = events.range(..=key(seq)).next_back().transpose()? else {
        return Ok(None);
    };
    let Ok(first) = record_key(&k) else {
        return Ok(None);
    };
    let count = if is_batch(&v) {
        batch_count(&v).unwrap_or(1).max(1)
    } else {
        1
    };
    Ok((seq < first.saturating_add(count)).then_some((first, v)))
}

/// Reads the records `from..=to` (`None`: to the end; `from` 0: every key) of the events tree,
/// then those of `pending` that it does not hold.
fn scan_tree(
    events: &sled::Tree,
    pending: Vec<(u64, Vec<u8>)>,
    from: u64,
    to: Option<u64>,
    dir: &Path,
) -> Result<Scan, StateError> {
    let err = sled_err("cannot read the log", dir);
    // The batch holding `from` starts before it.
    let start = if from == 0 {
        None
    } else {
        Some(
            entry_holding(events, from)
                .map_err(&err)?
                .map_or(from, |(first, _)| first),
        )
    };
    let entries = match (start, to) {
        (None, None) => events.iter(),
        (None, Some(to)) => events.range(..=key(to)),
        (Some(s), None) => events.range(key(s)..),
        (Some(s), Some(to)) => events.range(key(s)..=key(to)),
    };
    Ok(Scan {
        entries,
        buf: Default::default(),
        from,
        to: to.unwrap_or(u64::MAX),
        last: 0,
        tree_done: false,
        pending: pending.into_iter(),
        err: Box::new(err),
    })
}

/// The last record of the events tree: its seq and bytes.
fn last_record(events: &sled::Tree, dir: &Path) -> Result<Option<(u64, Vec<u8>)>, StateError> {
    let last = events
        .last()
        .map_err(sled_err("cannot read the log", dir))?;
    let Some((k, v)) = last else {
        return Ok(None);
    };
    let mut buf = Default::default();
    expand(&k, v, 0, u64::MAX, &mut buf);
    Ok(buf
        .pop_back()
        .and_then(|(k, v)| Some((k.ok()?, v.as_ref().to_vec()))))
}

/// The seq of the last record of the events tree (0: none; `None`: a key that is not one).
fn last_seq_of(events: &sled::Tree, dir: &Path) -> Result<Option<u64>, StateError> {
    let last = events
        .last()
        .map_err(sled_err("cannot read the log", dir))?;
    let Some((k, v)) = last else {
        return Ok(Some(0));
    };
    let Some(first) = seq_of(&k) else {
        return Ok(None);
    };
    Ok(Some(match batch_count(&v) {
        Some(n) if n > 0 => first + n - 1,
        _ => first,
    }))
}

/// Appended records, not yet written to the tree, and the lock that keeps flushes in order.
#[derive(Default)]
struct Pending {
    records: Mutex<Vec<(u64, Vec<u8>)>>,
    /// Held for a whole flush; holds the thread that runs sled's flushes.
    order: Mutex<Option<FlushThread>>,
}

impl Pending {
    /// Writes the pending records into the tree (not yet durable); returns the last one.
    fn write(&self, events: &sled::Tree, dir: &Path) -> Result<Option<(u64, Vec<u8>)>, StateError> {
        let mut recs = self.records.lock().expect("pending records");
        if recs.is_empty() {
            return Ok(None);
        }
        write_batches(events, &recs).map_err(sled_err("cannot append to the state log", dir))?;
        let last = recs.pop();
        recs.clear();
        Ok(last)
    }

    fn snapshot(&self) -> Vec<(u64, Vec<u8>)> {
        self.records.lock().expect("pending records").clone()
    }
}

fn sled_err(context: &str, dir: &Path) -> impl Fn(sled::Error) -> StateError {
    let context = format!("{context} ({})", dir.display());
    let location = dir.display().to_string();
    move |e| match e {
        // sled's own words ("Read corrupted data at file offset None backtrace ()") say
        // nothing a user can act on: say what is damaged and what to do.
        sled::Error::Corruption { .. } => StateError::Damaged {
            location: location.clone(),
            from: 0,
            detail: format!(
                "the database file under {}/log fails its own checksums ({context}), as after \
                 a failing disk, a bad copy or a truncated backup",
                location
            ),
        },
        e => StateError::io(context.clone(), e),
    }
}

fn process_alive(pid: u32) -> bool {
    if pid == std::process::id() {
        return true;
    }
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return false;
    };
    // SAFETY: signal 0 only checks that the process exists and may be signalled.
    let r = unsafe { libc::kill(pid, 0) };
    r == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

impl SledLog {
    /// Opens (with `write`, creating) the state in `dir`. The warnings say what was repaired
    /// or skipped (a torn tail, an unreadable checkpoint).
    pub(crate) fn open(
        dir: &Path,
        opts: &OpenOptions,
    ) -> Result<(SledLog, Vec<String>), StateError> {
        Self::open_inner(dir, opts, None)
    }

    /// Opens the state read-only (whatever `opts.write` says) as it was after event `upto`,
    /// ignoring every record after it: the way to recover what precedes a corrupt record.
    pub(crate) fn open_upto(
        dir: &Path,
        opts: &OpenOptions,
        upto: u64,
    ) -> Result<(SledLog, Vec<String>), StateError> {
        let opts = OpenOptions {
            write: false,
            ..opts.clone()
        };
        Self::open_inner(dir, &opts, Some(upto))
    }

    fn open_inner(
        dir: &Path,
        opts: &OpenOptions,
        upto: Option<u64>,
    ) -> Result<(SledLog, Vec<String>), StateError> {
        let storage = SledStorage::open(dir, opts, upto.is_none())?;
        LogCore::over(storage, dir, opts.write, upto, opts.encryption.clone())
    }
}

impl SledLog {
    /// `cairn state recover` on the sled log in `dir` (see [`crate::log::recover`]): the copy
    /// of the damaged store is `<dir>/damaged-<unix ms>/` (the database, its head and the
    /// checkpoints, as they were).
    pub(crate) fn recover(
        dir: &Path,
        opts: &OpenOptions,
        args: &[String],
    ) -> Result<(SledLog, crate::log::Recovery), StateError> {
        if !dir.join("log").join("db").exists() {
            return Err(StateError::NotFound {
                dir: dir.to_path_buf(),
            });
        }
        let opts = OpenOptions {
            write: true,
            ..opts.clone()
        };
        match SledStorage::open(dir, &opts, false) {
            Ok(storage) => crate::log::recover(storage, dir, args, opts.encryption.clone()),
            // sled itself cannot open its files: the database is moved aside whole and the
            // state goes on from the newest checkpoint that reads.
            Err(StateError::Damaged { detail, .. }) => {
                Self::recover_unreadable(dir, &opts, args, detail)
            }
            Err(e) => Err(e),
        }
    }

    /// [`SledLog::recover`] when sled cannot open the database: the database (and its head
    /// and checkpoints) move to `<dir>/damaged-<unix ms>/`, a new log starts, and its first
    /// run (`state recover`) imports the objects of the newest checkpoint that reads, with a
    /// warning saying what was lost (the runs, and what changed after that checkpoint).
    fn recover_unreadable(
        dir: &Path,
        opts: &OpenOptions,
        args: &[String],
        damage: String,
    ) -> Result<(SledLog, crate::log::Recovery), StateError> {
        use crate::event::{EventBody, RecordedDiagnostic, RunOutcome, RunSummary, Severity};
        use crate::log::EventLog;
        let checkpoints = Checkpoints::new(dir, opts.encryption.clone());
        let saved = checkpoints
            .seqs()
            .into_iter()
            .rev()
            .find_map(|seq| checkpoints.read(seq).ok());
        let to = dir.join(format!("damaged-{}", now_ms()));
        let fail = |e: std::io::Error| {
            StateError::io(
                format!("cannot move the damaged state to {}", to.display()),
                e,
            )
        };
        fs::create_dir_all(&to).map_err(fail)?;
        fs::rename(dir.join("log"), to.join("log")).map_err(fail)?;
        if dir.join("log-head").exists() {
            fs::rename(dir.join("log-head"), to.join("log-head")).map_err(fail)?;
        }
        if dir.join("checkpoints").exists() {
            copy_tree(&dir.join("checkpoints"), &to.join("checkpoints")).map_err(fail)?;
            checkpoints.clear().map_err(fail)?;
        }
        let (mut log, _) = SledLog::open(dir, opts)?;
        let good = saved.as_ref().map_or(0, |s| s.head);
        log.begin_run("state recover", args)?;
        if let Some(s) = &saved {
            log.append(EventBody::StateImported {
                source: format!("the checkpoint at event {} of the damaged log", s.head),
                providers: s.providers.values().cloned().collect(),
                resources: s
                    .resources
                    .iter()
                    .filter_map(|(a, i)| i.current.clone().map(|o| (a.clone(), o)))
                    .collect(),
            })?;
        }
        let backup = to.display().to_string();
        let detail = match &saved {
            Some(s) => format!(
                "{damage}. sled cannot read the database: it was moved to {backup}, and a new \
                 log starts from the checkpoint at event {} ({} resource instance(s)); the \
                 runs before it and anything changed after it are not in the new log.",
                s.head,
                s.resources.len()
            ),
            None => format!(
                "{damage}. sled cannot read the database: it was moved to {backup}; no \
                 checkpoint could be read, so the new log starts empty: import the objects \
                 you manage again."
            ),
        };
        log.append(EventBody::RunDiagnostics {
            diagnostics: vec![RecordedDiagnostic {
                severity: Severity::Warning,
                summary: "State recovered from damage".into(),
                detail,
                location: None,
                address: None,
            }],
        })?;
        log.finish_run(RunOutcome::Success, RunSummary::default())?;
        let recovery = crate::log::Recovery {
            good,
            last: good,
            backup,
            damage: format!(
                "{damage}; sled cannot read the database, so the state goes on from {}",
                match &saved {
                    Some(s) => format!("its newest readable checkpoint (event {})", s.head),
                    None => "nothing (no checkpoint reads)".into(),
                }
            ),
            runs: Vec::new(),
            // What changed after the checkpoint cannot be read: the CLI says to compare.
            objects: Vec::new(),
        };
        Ok((log, recovery))
    }
}

/// Copies the directory `from` to `to` (files and subdirectories).
fn copy_tree(from: &Path, to: &Path) -> std::io::Result<()> {
    fs::create_dir_all(to)?;
    for e in fs::read_dir(from)? {
        let e = e?;
        let target = to.join(e.file_name());
        if e.file_type()?.is_dir() {
            copy_tree(&e.path(), &target)?;
        } else {
            fs::copy(e.path(), &target)?;
        }
    }
    Ok(())
}

impl SledStorage {
    /// Moves records `from..` out of the log into the tree `torn` (a recovery), durably.
    fn set_aside_from(&mut self, from: u64) -> Result<(), StateError> {
        self.move_aside_from(from, "cannot set damaged records aside")?;
        self.db
            .flush()
            .map_err(sled_err("cannot set damaged records aside", &self.dir))?;
        Ok(())
    }

    /// Moves records `from..` out of the events tree into the tree `torn` (keyed by their
    /// entry's key and the time), not yet durably: whole entries, and the tail of a batch that
    /// starts before `from` (its records before `from` stay, as a batch of their own).
    fn move_aside_from(&mut self, from: u64, context: &str) -> Result<(), StateError> {
        let err = sled_err(context, &self.dir);
        self.pending.write(&self.events, &self.dir)?;
        let stamp = now_ms().to_be_bytes();
        let torn_key = |k: &[u8]| {
            let mut tk = k.to_vec();
            tk.extend_from_slice(&stamp);
            tk
        };
        if let Some((first, v)) = entry_holding(&self.events, from).map_err(&err)? {
            if first < from && is_batch(&v) {
                if let Ok(records) = decode_batch(&v) {
                    let records: Vec<(u64, Vec<u8>)> = (first..).zip(records).collect();
                    let cut = (from - first) as usize;
                    self.torn
                        .insert(torn_key(&key(from)), encode_batch(&records[cut..]))
                        .map_err(&err)?;
                    self.events
                        .insert(key(first), encode_batch(&records[..cut]))
                        .map_err(&err)?;
                }
            }
        }
        let keys: Vec<sled::IVec> = self
            .events
            .range(key(from)..)
            .keys()
            .filter_map(Result::ok)
            .collect();
        for k in keys {
            if let Some(v) = self.events.get(&k).map_err(&err)? {
                self.torn.insert(torn_key(&k), v).map_err(&err)?;
            }
            self.events.remove(&k).map_err(&err)?;
        }
        Ok(())
    }

    /// A copy of the database, its head and its checkpoints as they are now, in
    /// `<dir>/damaged-<unix ms>/`; returns where.
    fn backup(&self) -> Result<String, StateError> {
        let _ = self.db.flush();
        let to = self.dir.join(format!("damaged-{}", now_ms()));
        let fail = |e: std::io::Error| {
            StateError::io(
                format!("cannot copy the damaged state to {}", to.display()),
                e,
            )
        };
        copy_tree(&self.dir.join("log"), &to.join("log")).map_err(fail)?;
        let ckpts = self.dir.join("checkpoints");
        if ckpts.exists() {
            copy_tree(&ckpts, &to.join("checkpoints")).map_err(fail)?;
        }
        if self.head.path.exists() {
            fs::copy(&self.head.path, to.join("log-head")).map_err(fail)?;
        }
        Ok(to.display().to_string())
    }

    /// Opens (with `write`, creating) the database in `dir`, holding its lock; with `early`,
    /// decodes the newest checkpoint meanwhile.
    fn open(dir: &Path, opts: &OpenOptions, early: bool) -> Result<SledStorage, StateError> {
        let log_dir = dir.join("log");
        if opts.write {
            fs::create_dir_all(dir)
                .map_err(|e| StateError::io(format!("cannot create {}", dir.display()), e))?;
        } else if !log_dir.join("db").exists() {
            return Err(StateError::NotFound {
                dir: dir.to_path_buf(),
            });
        }
        // Decoding the newest checkpoint does not need the database: it starts now, and
        // overlaps with sled opening (which replays sled's own log after a writer).
        let early =
            early.then(|| Checkpoints::new(dir, opts.encryption.clone()).read_newest_early());
        let db = Self::open_locked(dir, &log_dir, opts)?;
        let holder = Holder {
            pid: std::process::id(),
            command: opts.command.clone(),
            since_ms: now_ms(),
            write: opts.write,
        };
        write_holder(dir, &holder)?;
        let tree = |name: &str| {
            db.open_tree(name)
                .map_err(sled_err("cannot open tree", dir))
        };
        Ok(SledStorage {
            dir: dir.to_path_buf(),
            events: tree("events")?,
            checkpoints: Checkpoints::new(dir, opts.encryption.clone()),
            meta: tree("meta")?,
            torn: tree("torn")?,
            db,
            early: early.and_then(|h| h.join().ok().flatten()),
            pending: Arc::default(),
            head: Arc::new(HeadFile::new(dir)),
        })
    }

    fn open_locked(dir: &Path, log_dir: &Path, opts: &OpenOptions) -> Result<sled::Db, StateError> {
        let deadline = Instant::now() + opts.lock_timeout;
        // sled releases its file lock a little after the last handle is dropped (its I/O
        // threads let go lazily), so a process reopening the state right after closing it can
        // find it "locked" with no holder record. A holder that has not identified itself is
        // waited for this long before it is reported, whatever the lock timeout.
        let grace = Instant::now() + Duration::from_secs(3);
        loop {
            let result = sled::Config::new()
                .path(log_dir)
                .mode(sled::Mode::HighThroughput)
                // The log is written once and read back only on open (after the newest
                // checkpoint), so its pages need not stay: an apply of 100,000 resources
                // kept about 1 KB of them per resource under a 256 MiB cap, and its peak
                // was 14 MiB lower again with 16 MiB than with 64 (with the record buffers
                // trimmed, `log.rs`; issue 31).
                .cache_capacity(16 << 20)
                .flush_every_ms(None)
                .open();
            match result {
                Ok(db) => return Ok(db),
                Err(sled::Error::Io(e)) if e.to_string().contains("could not acquire lock") => {
                    let now = Instant::now();
                    let unidentified = !dir.join("lock.json").exists();
                    if now >= deadline && !(unidentified && now < grace) {
                        return Err(read_holder(dir));
                    }
                    std::thread::sleep(Duration::from_millis(50));
                }
                Err(e) => return Err(sled_err("cannot open the state database", dir)(e)),
            }
        }
    }

    fn write_lineage(&mut self, lineage: &str) -> Result<(), StateError> {
        self.meta
            .insert("lineage", lineage.as_bytes())
            .map_err(sled_err("cannot write the lineage", &self.dir))?;
        self.flush()
    }
}

impl Storage for SledStorage {
    type Bytes = SledBytes;

    fn location(&self) -> String {
        self.dir.display().to_string()
    }

    fn last_seq(&self) -> Result<u64, StateError> {
        if let Some((seq, _)) = self.pending.records.lock().expect("pending records").last() {
            return Ok(*seq);
        }
        last_seq_of(&self.events, &self.dir)?.ok_or_else(|| StateError::Corrupt {
            seq: 0,
            detail: "a key of the events tree is not a sequence number".into(),
        })
    }

    fn scan(&self, from: u64, to: Option<u64>) -> Result<Records<'_, SledBytes>, StateError> {
        let pending = self.pending.snapshot();
        let scan = scan_tree(&self.events, pending, from, to, &self.dir)?;
        Ok(Box::new(scan))
    }

    fn put(&mut self, seq: u64, bytes: &[u8]) -> Result<(), StateError> {
        self.pending
            .records
            .lock()
            .expect("pending records")
            .push((seq, bytes.to_vec()));
        Ok(())
    }

    fn put_all(&mut self, records: &[(u64, Vec<u8>)]) -> Result<(), StateError> {
        let _order = self.pending.order.lock().expect("flush order");
        self.pending.write(&self.events, &self.dir)?;
        write_batches(&self.events, records)
            .map_err(sled_err("cannot append to the state log", &self.dir))
    }

    fn flush(&self) -> Result<(), StateError> {
        flush_with_head(&self.db, &self.events, &self.pending, &self.head, &self.dir)
    }

    fn flusher(&self) -> Flusher {
        let db = self.db.clone();
        let events = self.events.clone();
        let pending = self.pending.clone();
        let head = self.head.clone();
        let dir = self.dir.clone();
        Flusher::new(move || flush_with_head(&db, &events, &pending, &head, &dir))
    }

    fn keeps_head(&self) -> bool {
        true
    }

    fn read_head(&self) -> Result<Option<Head>, StateError> {
        self.head.read()
    }

    fn reset_head(&mut self, head: Option<Head>) -> Result<(), StateError> {
        self.pending.write(&self.events, &self.dir)?;
        self.db
            .flush()
            .map_err(sled_err("cannot flush the state log", &self.dir))?;
        match head {
            Some(h) => self.head.write(h, true),
            None => match fs::remove_file(&self.head.path) {
                Ok(()) => Ok(()),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
                Err(e) => Err(StateError::io("cannot reset the log head", e)),
            },
        }
    }

    fn set_damage_aside(&mut self, good: u64, head: Option<Head>) -> Result<String, StateError> {
        let backup = self.backup()?;
        self.set_aside_from(good + 1)?;
        for seq in self.checkpoint_seqs()? {
            if seq > good {
                self.remove_checkpoint(seq)?;
            }
        }
        self.reset_head(head)?;
        Ok(backup)
    }

    fn tears(&self) -> bool {
        true
    }

    fn set_aside(&mut self, seq: u64, _bytes: &[u8]) -> Result<(), StateError> {
        // The torn record is the last one: moved aside as stored (a batch whose tail tore
        // keeps its records before it).
        self.move_aside_from(seq, "cannot set the torn record aside")?;
        self.flush()
    }

    fn read_lineage(&self) -> Result<Option<String>, StateError> {
        let v = self
            .meta
            .get("lineage")
            .map_err(sled_err("cannot read the lineage", &self.dir))?;
        Ok(v.map(|v| String::from_utf8_lossy(&v).into_owned()))
    }

    fn create_lineage(&mut self, lineage: &str) -> Result<(), StateError> {
        self.write_lineage(lineage)
    }

    fn replace_lineage(&mut self, lineage: &str, _head: u64) -> Result<(), StateError> {
        self.write_lineage(lineage)
    }

    fn checkpoint_seqs(&self) -> Result<Vec<u64>, StateError> {
        Ok(self.checkpoints.seqs())
    }

    fn read_checkpoint(&self, seq: u64) -> Result<Result<Snapshot, String>, StateError> {
        Ok(self.checkpoints.read(seq))
    }

    fn write_checkpoint(&mut self, snapshot: &Snapshot, keep: usize) -> Result<(), StateError> {
        self.checkpoints
            .write(snapshot, keep)
            .map_err(|e| StateError::io("cannot write a checkpoint", e))
    }

    fn remove_checkpoint(&mut self, seq: u64) -> Result<(), StateError> {
        self.checkpoints.remove(seq).map_err(|e| {
            StateError::io(
                format!("cannot tidy {}", self.dir.join("checkpoints").display()),
                e,
            )
        })
    }

    fn clear_checkpoints(&mut self) -> Result<(), StateError> {
        self.checkpoints
            .clear()
            .map_err(|e| StateError::io("cannot delete checkpoints", e))
    }

    fn early_checkpoint(&mut self, upto: u64) -> Option<Snapshot> {
        self.early.take()?.take(&self.checkpoints, upto)
    }

    /// Removes temporary checkpoint files a crash left, and the sled tree of old-format
    /// checkpoints.
    fn tidy(&mut self) -> Result<(), StateError> {
        let context = format!("cannot tidy {}", self.dir.join("checkpoints").display());
        self.checkpoints
            .remove_temporaries()
            .map_err(|e| StateError::io(context.clone(), e))?;
        if self
            .db
            .tree_names()
            .iter()
            .any(|n| n == OLD_CHECKPOINT_TREE.as_bytes())
        {
            self.db
                .drop_tree(OLD_CHECKPOINT_TREE)
                .map_err(sled_err("cannot drop the old checkpoints", &self.dir))?;
        }
        Ok(())
    }
}

impl SledLog {
    /// Test-only hook: writes raw bytes as record `seq`, bypassing encoding (fault injection):
    /// in place in the batch that holds it, else as a single record.
    #[cfg(test)]
    pub(crate) fn put_raw(&mut self, seq: u64, bytes: &[u8]) {
        self.storage.flush().expect("test hook flush");
        let events = &self.storage.events;
        match entry_holding(events, seq).expect("test hook read") {
            Some((first, v)) if is_batch(&v) => {
                let mut records: Vec<(u64, Vec<u8>)> =
                    (first..).zip(decode_batch(&v).expect("a batch")).collect();
                records[(seq - first) as usize].1 = bytes.to_vec();
                events
                    .insert(key(first), encode_batch(&records))
                    .expect("test hook insert");
            }
            _ => {
                events.insert(key(seq), bytes).expect("test hook insert");
            }
        }
        self.storage.db.flush().expect("test hook flush");
    }

    /// Test-only hook: removes record `seq` (a batch holding it is split around it).
    #[cfg(test)]
    pub(crate) fn remove_raw(&mut self, seq: u64) {
        self.storage.flush().expect("test hook flush");
        let events = &self.storage.events;
        match entry_holding(events, seq).expect("test hook read") {
            Some((first, v)) if is_batch(&v) => {
                let records: Vec<(u64, Vec<u8>)> =
                    (first..).zip(decode_batch(&v).expect("a batch")).collect();
                let at = (seq - first) as usize;
                events.remove(key(first)).expect("test hook remove");
                if at > 0 {
                    events
                        .insert(key(first), encode_batch(&records[..at]))
                        .expect("test hook insert");
                }
                if at + 1 < records.len() {
                    events
                        .insert(key(seq + 1), encode_batch(&records[at + 1..]))
                        .expect("test hook insert");
                }
            }
            _ => {
                events.remove(key(seq)).expect("test hook remove");
            }
        }
        self.storage.db.flush().expect("test hook flush");
    }

    /// Test-only hook: sets the head to record `seq` as stored.
    #[cfg(test)]
    pub(crate) fn set_head_raw(&mut self, seq: u64) {
        let (_, bytes) = self
            .storage
            .scan(seq, Some(seq))
            .expect("test hook read")
            .next()
            .expect("the record")
            .expect("test hook read");
        let head = Head::of(seq, bytes.as_ref());
        self.storage.reset_head(Some(head)).expect("test hook head");
    }

    /// Test-only hook: the seqs of the checkpoints present.
    #[cfg(test)]
    pub(crate) fn checkpoint_positions(&self) -> Vec<u64> {
        self.storage.checkpoints.seqs()
    }
}

/// Reads the events from `from` (inclusive) to the end, at most `max` of them (so no visit
/// is long; a reader that got `max` visits again for the rest), for a reader that runs beside other
/// commands (`cairn ui`): it never waits for the lock and never writes — not even
/// `lock.json`, so an opener that meets the lock during the visit waits out the same grace
/// period as for sled's lazy release (see `open_locked`) instead of failing. It does not fold
/// a snapshot, so the visit is as short as reading the new records.
pub(crate) fn peek_sled(
    dir: &Path,
    from: u64,
    max: usize,
    crypt: Option<&crate::crypt::Encryption>,
) -> Result<Peek, StateError> {
    let log_dir = dir.join("log");
    if !log_dir.join("db").exists() {
        return Err(StateError::NotFound {
            dir: dir.to_path_buf(),
        });
    }
    if lock_held(dir) {
        return Ok(Peek::Busy);
    }
    let db = match sled::Config::new()
        .path(&log_dir)
        .mode(sled::Mode::HighThroughput)
        .flush_every_ms(None)
        .open()
    {
        Ok(db) => db,
        Err(sled::Error::Io(e)) if e.to_string().contains("could not acquire lock") => {
            return Ok(Peek::Busy)
        }
        Err(e) => return Err(sled_err("cannot open the state database", dir)(e)),
    };
    let events = db
        .open_tree("events")
        .map_err(sled_err("cannot open tree", dir))?;
    let mut out = Vec::new();
    let mut warnings = Vec::new();
    let from = from.max(1);
    let last_seq = last_seq_of(&events, dir)?.unwrap_or(0);
    let records = scan_tree(&events, Vec::new(), from, None, dir)?;
    for (expected, item) in (from..).zip(records.take(max)) {
        let (k, v) = item?;
        let seq = match k {
            Ok(seq) if seq == expected => seq,
            Ok(seq) => {
                return Err(StateError::Corrupt {
                    seq: expected,
                    detail: format!("the record is missing (the next record is {seq})"),
                })
            }
            Err(k) => {
                return Err(StateError::Corrupt {
                    seq: expected,
                    detail: format!("unexpected key {k} in the events tree"),
                })
            }
        };
        // A batch that cannot be read stands as a record with a zero hash (see `expand`).
        let read = match crate::chain::split(v.as_ref()).0 {
            Some(h) if h == crate::chain::ZERO => Err(StateError::Corrupt {
                seq,
                detail: "the batch of records it starts cannot be read".into(),
            }),
            _ => Ok(()),
        }
        .and_then(|()| decode_record(crypt, seq, v.as_ref()));
        match read {
            Ok(e) => out.push(e),
            Err(StateError::Corrupt { detail, .. }) if seq == last_seq => {
                warnings.push(format!(
                    "the last state log record ({seq}) is incomplete ({detail}); left out"
                ));
            }
            Err(e) => return Err(e),
        }
    }
    drop(events);
    drop(db);
    Ok(Peek::Events(out, warnings))
}

impl Drop for SledStorage {
    fn drop(&mut self) {
        // Records appended and never flushed are written as sled wrote them when each `put`
        // went to it: sled flushes on drop (a process killed loses them either way).
        let unflushed = self.pending.records.lock().is_ok_and(|r| !r.is_empty());
        if unflushed {
            let _ = self.flush();
        }
        // Remove our holder record while we still hold the lock (the sled Db is dropped after
        // this), so we never delete the record of the next holder.
        let path = self.dir.join("lock.json");
        if let Ok(text) = fs::read_to_string(&path) {
            if serde_json::from_str::<Holder>(&text).is_ok_and(|h| h.pid == std::process::id()) {
                let _ = fs::remove_file(&path);
            }
        }
    }
}

fn write_holder(dir: &Path, holder: &Holder) -> Result<(), StateError> {
    let path = dir.join("lock.json");
    let tmp = dir.join(format!("lock.json.{}", holder.pid));
    let text = serde_json::to_string(holder).unwrap_or_default();
    fs::write(&tmp, text)
        .and_then(|()| fs::rename(&tmp, &path))
        .map_err(|e| StateError::io(format!("cannot write {}", path.display()), e))
}

/// Whether `lock.json` names a holder that may still hold the database: one whose process is
/// alive, or a record that cannot be read. A process killed (`kill -9`) leaves its record
/// behind; the next writer replaces it, and a reader may visit meanwhile (sled's own file
/// lock, released with the process, still keeps out a writer that is really there).
pub(crate) fn lock_held(dir: &Path) -> bool {
    let Ok(text) = fs::read_to_string(dir.join("lock.json")) else {
        return dir.join("lock.json").exists();
    };
    match serde_json::from_str::<Holder>(&text) {
        Ok(h) => process_alive(h.pid),
        Err(_) => true,
    }
}

/// The lock error for `dir`, from whatever `lock.json` says.
fn read_holder(dir: &Path) -> StateError {
    let holder = fs::read_to_string(dir.join("lock.json"))
        .ok()
        .and_then(|t| serde_json::from_str::<Holder>(&t).ok());
    match holder {
        Some(h) => StateError::Locked {
            dir: dir.to_path_buf(),
            stale: !process_alive(h.pid),
            pid: Some(h.pid),
            command: Some(h.command),
            since_ms: Some(h.since_ms),
        },
        None => StateError::Locked {
            dir: dir.to_path_buf(),
            pid: None,
            command: None,
            since_ms: None,
            stale: false,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::SledLog as Store;
    use super::*;
    use crate::event::{
        self, Event, EventBody, OpAction, ProviderRef, ResourceObject, RunOutcome, RunSummary,
        CURRENT_VERSION,
    };
    use crate::log::{EventLog, KEEP_CHECKPOINTS};
    use crate::stored_value::StoredValue;

    fn opts(command: &str, write: bool) -> OpenOptions {
        OpenOptions {
            command: command.into(),
            lock_timeout: Duration::ZERO,
            write,
            skip_lock: false,
            encryption: None,
        }
    }

    fn open(dir: &Path) -> (Store, Vec<String>) {
        Store::open(dir, &opts("apply", true)).unwrap_or_else(|e| panic!("{e}"))
    }

    fn create(n: u64) -> EventBody {
        EventBody::OperationStarted {
            addr: format!("sim_thing.a[{n}]").parse().unwrap(),
            deposed: None,
            action: OpAction::Create,
            token: Some(format!("t{n}")),
            provider: ProviderRef::new("provider[\"sim\"]".parse().unwrap(), "p".into()),
            prior: None,
        }
    }

    fn created(op: u64, n: u64) -> EventBody {
        EventBody::OperationSucceeded {
            op,
            object: Some(ResourceObject {
                attrs: StoredValue::String(format!("v{n}")),
                deps: vec![],
                provider: ProviderRef::new("provider[\"sim\"]".parse().unwrap(), "p".into()),
                create_token: Some(format!("t{n}")),
                tainted: false,
                meta: Default::default(),
            }),
        }
    }

    /// A log of a run creating `n` instances: 2n + 1 events.
    /// The `sim` provider's instance `p`, registered.
    fn sim_registered() -> EventBody {
        EventBody::ProviderRegistered {
            instance: crate::event::ProviderInstance {
                addr: "provider[\"sim\"]".parse().unwrap(),
                id: "p".into(),
                config: StoredValue::Null,
                is_default: true,
            },
        }
    }

    fn fill(store: &mut Store, n: u64) {
        store.begin_run("apply", &[]).unwrap();
        if store.snapshot().providers.is_empty() {
            store.append(sim_registered()).unwrap();
        }
        for i in 0..n {
            let op = store.append(create(i)).unwrap();
            store.append(created(op, i)).unwrap();
        }
        store.commit().unwrap();
    }

    #[test]
    fn appends_survive_a_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let before = {
            let (mut s, warnings) = open(dir.path());
            assert!(warnings.is_empty());
            fill(&mut s, 3);
            s.finish_run(RunOutcome::Success, RunSummary::default())
                .unwrap();
            assert_eq!(s.head(), 9);
            s.snapshot().clone()
        };
        let (s, warnings) = Store::open(dir.path(), &opts("state list", false)).unwrap();
        assert!(warnings.is_empty(), "{warnings:?}");
        assert_eq!(s.snapshot(), &before);
        assert_eq!(s.snapshot().resources.len(), 3);
        let events = s.events(1).unwrap();
        assert_eq!(events.len(), 9);
        assert!(events
            .iter()
            .enumerate()
            .all(|(i, e)| e.seq == i as u64 + 1));
        assert_eq!(Snapshot::replay(&events), before);
        assert!(s.check().is_empty(), "{:?}", s.check());
        assert!(!s.lineage().is_empty());
    }

    #[test]
    fn peeks_read_new_events_without_the_lock_and_stand_aside_for_holders() {
        let dir = tempfile::tempdir().unwrap();
        assert!(matches!(
            peek_sled(&dir.path().join("nothing"), 1, 10, None),
            Err(StateError::NotFound { .. })
        ));
        let (mut s, _) = open(dir.path());
        fill(&mut s, 3);
        // A command holds the state: the visit reads nothing and says so.
        assert!(matches!(
            peek_sled(dir.path(), 1, 100, None),
            Ok(Peek::Busy)
        ));
        s.finish_run(RunOutcome::Success, RunSummary::default())
            .unwrap();
        drop(s);
        let read = |from, max| match peek_sled(dir.path(), from, max, None) {
            Ok(Peek::Events(e, w)) => {
                assert!(w.is_empty(), "{w:?}");
                e.iter().map(|e| e.seq).collect::<Vec<_>>()
            }
            // sled lets go of its lock lazily after the holder closes.
            Ok(Peek::Busy) => Vec::new(),
            Err(e) => panic!("{e}"),
        };
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut all = read(1, 100);
        while all.is_empty() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
            all = read(1, 100);
        }
        assert_eq!(all, (1..=9).collect::<Vec<_>>());
        assert_eq!(read(4, 100), (4..=9).collect::<Vec<_>>());
        assert_eq!(read(4, 2), vec![4, 5], "at most `max` per visit");
        assert_eq!(read(10, 100), Vec::<u64>::new());
        // The visit left no holder record, and a writer opens right after it.
        assert!(!dir.path().join("lock.json").exists());
        let (s, _) = Store::open(
            dir.path(),
            &OpenOptions {
                lock_timeout: Duration::from_secs(5),
                ..opts("apply", true)
            },
        )
        .unwrap();
        assert_eq!(s.head(), 9);
    }

    #[test]
    fn read_only_stores_refuse_to_change_and_missing_states_are_not_created() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("nothing");
        let err = Store::open(&missing, &opts("state list", false))
            .err()
            .unwrap();
        assert_eq!(
            err,
            StateError::NotFound {
                dir: missing.clone()
            }
        );
        assert!(!missing.exists());
        drop(open(dir.path()));
        let (mut s, _) = Store::open(dir.path(), &opts("state list", false)).unwrap();
        assert_eq!(s.append(create(0)), Err(StateError::ReadOnly));
        assert_eq!(s.begin_run("x", &[]), Err(StateError::ReadOnly));
        assert_eq!(s.checkpoint(), Err(StateError::ReadOnly));
    }

    #[test]
    fn finish_run_needs_an_open_run() {
        let dir = tempfile::tempdir().unwrap();
        let (mut s, _) = open(dir.path());
        assert_eq!(
            s.finish_run(RunOutcome::Success, RunSummary::default()),
            Err(StateError::NoOpenRun)
        );
        let run = s.begin_run("apply", &["-auto-approve".into()]).unwrap();
        let seq = s.append(create(0)).unwrap();
        assert_eq!(s.events(seq).unwrap()[0].run, run);
        s.finish_run(RunOutcome::Failed, RunSummary::default())
            .unwrap();
        let r = s.snapshot().run(run).unwrap();
        assert_eq!((r.outcome, r.last_seq), (Some(RunOutcome::Failed), 3));
        assert_eq!(r.pid, std::process::id());
    }

    #[test]
    fn a_torn_tail_opens_at_the_last_complete_event() {
        let dir = tempfile::tempdir().unwrap();
        let (mut s, _) = open(dir.path());
        fill(&mut s, 2);
        let before = s.snapshot().clone();
        let bytes = event::encode(&Event {
            seq: 7,
            version: CURRENT_VERSION,
            time_ms: 0,
            run: 1,
            body: create(9),
        });
        s.put_raw(7, &bytes[..bytes.len() - 3]);
        drop(s);

        // A reader sees the torn record, warns, and leaves it alone.
        let (r, warnings) = Store::open(dir.path(), &opts("state list", false)).unwrap();
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(
            warnings[0].starts_with(
                "the last state log record (7) is incomplete, probably from a process killed \
                 while writing"
            ),
            "{}",
            warnings[0]
        );
        assert!(
            warnings[0].ends_with("the state opens at record 6"),
            "{}",
            warnings[0]
        );
        assert_eq!(r.snapshot(), &before);
        assert_eq!(r.check().iter().map(|v| v.number).collect::<Vec<_>>(), [1]);
        drop(r);

        // A writer sets it aside, and the log goes on from there.
        let (mut w, warnings) = open(dir.path());
        assert!(warnings[0].ends_with("and the torn record was set aside"));
        assert_eq!(w.snapshot(), &before);
        assert_eq!(w.append(create(7)).unwrap(), 7);
        w.commit().unwrap();
        assert!(w.check().is_empty(), "{:?}", w.check());
        drop(w);
        let (w, warnings) = open(dir.path());
        assert!(warnings.is_empty(), "{warnings:?}");
        assert_eq!(w.head(), 7);
    }

    fn check_corrupt(damage: impl FnOnce(&mut Store), seq: u64, detail: &str) {
        let dir = tempfile::tempdir().unwrap();
        let (mut s, _) = open(dir.path());
        fill(&mut s, 3);
        damage(&mut s);
        drop(s);
        for write in [false, true] {
            let err = Store::open(dir.path(), &opts("apply", write))
                .err()
                .unwrap();
            match &err {
                StateError::Damaged {
                    from, detail: d, ..
                } => {
                    assert_eq!(*from, seq, "{err}");
                    assert!(d.contains(detail), "{err}");
                }
                e => panic!("not damage: {e:?}"),
            }
        }
        let err = Store::open(dir.path(), &opts("apply", false))
            .err()
            .unwrap();
        let msg = err.to_string();
        assert!(
            msg.contains(&format!("is damaged from event {seq} on"))
                && msg.contains("cairn state recover"),
            "{msg}"
        );
        // The intact prefix still opens, for recovery.
        let (s, _) = Store::open_upto(dir.path(), &opts("state pull", false), seq - 1).unwrap();
        assert_eq!(s.head(), seq - 1);
    }

    #[test]
    fn a_corrupt_record_in_the_middle_is_an_error_naming_it() {
        check_corrupt(
            |s| s.put_raw(3, b"\x93garbage"),
            3,
            "invalid length 3, expected struct Event with 5 elements",
        );
    }

    #[test]
    fn a_missing_record_is_corruption() {
        check_corrupt(
            |s| s.remove_raw(4),
            4,
            "the record is missing (the next record is 5)",
        );
    }

    /// Rewrites the events tree with one record per key, as states written before batches
    /// (layout 1) hold it.
    fn unbatch(s: &mut Store) {
        s.storage.flush().unwrap();
        let events = &s.storage.events;
        let entries: Vec<_> = events.iter().map(Result::unwrap).collect();
        for (k, v) in entries {
            if is_batch(&v) {
                let first = seq_of(&k).unwrap();
                events.remove(&k).unwrap();
                for (seq, r) in (first..).zip(decode_batch(&v).unwrap()) {
                    events.insert(key(seq), r).unwrap();
                }
            }
        }
        s.storage.db.flush().unwrap();
    }

    #[test]
    fn batches_round_trip_and_damage_is_refused() {
        let records: Vec<(u64, Vec<u8>)> = (5..2505)
            .map(|i| (i, format!("record {i} ").repeat(3).into_bytes()))
            .collect();
        for part in [&records[..1], &records[..300]] {
            let v = encode_batch(part);
            assert!(is_batch(&v));
            assert_eq!(v[6], if part.len() == 1 { PLAIN } else { ZSTD });
            assert_eq!(batch_count(&v), Some(part.len() as u64));
            let want: Vec<Vec<u8>> = part.iter().map(|r| r.1.clone()).collect();
            assert_eq!(decode_batch(&v).unwrap(), want);
            for i in (2..v.len()).step_by(7).chain([v.len() - 1]) {
                let mut bad = v.clone();
                bad[i] ^= 0x08;
                assert!(decode_batch(&bad).is_err(), "byte {i}");
            }
            assert!(decode_batch(&v[..v.len() - 1]).is_err());
            assert!(decode_batch(&v[..10]).is_err());
        }
        // A long commit: batches of at most BATCH_RECORDS records, in order.
        let parts = batches(&records);
        assert_eq!(
            parts.iter().map(|p| p.len()).collect::<Vec<_>>(),
            [1024, 1024, 452]
        );
        assert_eq!(parts[1][0].0, 5 + 1024);
    }

    #[test]
    fn each_commit_is_one_batch_and_states_of_one_record_per_key_still_open() {
        let dir = tempfile::tempdir().unwrap();
        let (mut s, _) = open(dir.path());
        fill(&mut s, 20);
        // The run's start was its own commit; the rest is one.
        assert_eq!(s.storage.events.len(), 2);
        let (_, v) = s.storage.events.last().unwrap().unwrap();
        assert_eq!(v[6], ZSTD, "a batch of 41 records is compressed");
        let head = s.head();
        unbatch(&mut s);
        assert_eq!(s.storage.events.len() as u64, head);
        let before = s.snapshot().clone();
        drop(s);

        // Layout 1 opens, and the log goes on in batches after its single records.
        let (mut s, warnings) = open(dir.path());
        assert!(warnings.is_empty(), "{warnings:?}");
        assert_eq!(s.snapshot(), &before);
        s.finish_run(RunOutcome::Success, RunSummary::default())
            .unwrap();
        fill(&mut s, 5);
        assert_eq!(s.storage.events.len() as u64, head + 3);
        assert!(s.check().is_empty(), "{:?}", s.check());
        let all = s.events(1).unwrap();
        assert_eq!(all.len() as u64, s.head());
        assert!(all.iter().zip(1..).all(|(e, seq)| e.seq == seq));
        // Reads that start inside a batch, and history at a position inside one.
        let mid = s.head() - 3;
        assert_eq!(s.events(mid).unwrap().len(), 4);
        assert_eq!(
            s.snapshot_at(mid).unwrap(),
            Snapshot::replay(&all[..mid as usize])
        );
        let after = s.snapshot().clone();
        let n = s.head();
        drop(s);
        let (s, warnings) = open(dir.path());
        assert!(warnings.is_empty(), "{warnings:?}");
        assert_eq!(s.snapshot(), &after);
        assert_eq!(s.verify().unwrap().events, n);
    }

    #[test]
    fn records_appended_without_a_commit_are_written_when_the_store_closes() {
        let dir = tempfile::tempdir().unwrap();
        let (mut s, _) = open(dir.path());
        fill(&mut s, 1);
        s.append(create(7)).unwrap();
        let head = s.head();
        drop(s);
        let (s, warnings) = open(dir.path());
        assert!(warnings.is_empty(), "{warnings:?}");
        assert_eq!(s.head(), head);
        assert_eq!(s.verify().unwrap().events, head);
    }

    #[test]
    fn a_damaged_batch_is_damage_from_its_first_record() {
        // fill(3): the run's start (1), then one batch of 7 (2..=8).
        check_corrupt(
            |s| {
                s.storage.flush().unwrap();
                let (k, v) = s.storage.events.last().unwrap().unwrap();
                assert_eq!(seq_of(&k), Some(2));
                let mut bad = v.to_vec();
                let i = bad.len() - 5;
                bad[i] ^= 0x20;
                s.storage.events.insert(k, bad).unwrap();
                s.storage.db.flush().unwrap();
            },
            2,
            "record 2 its checksum does not match its content",
        );
    }

    #[test]
    fn a_recovery_keeps_the_good_records_of_a_batch_and_sets_the_rest_aside() {
        let dir = tempfile::tempdir().unwrap();
        let (mut s, _) = open(dir.path());
        fill(&mut s, 3);
        s.finish_run(RunOutcome::Success, RunSummary::default())
            .unwrap();
        fill(&mut s, 2);
        // Record 5 is in the middle of the batch 2..=8.
        s.put_raw(5, b"\x93garbage");
        drop(s);
        let (s, recovery) = Store::recover(dir.path(), &opts("state recover", true), &[]).unwrap();
        assert_eq!(recovery.good, 4);
        assert!(s.check().is_empty(), "{:?}", s.check());
        let events = s.events(1).unwrap();
        assert!(events.iter().zip(1..).all(|(e, seq)| e.seq == seq));
        assert!(
            matches!(&events[4].body, EventBody::RunStarted { command, .. } if command == "state recover"),
            "{:?}",
            events[4]
        );
        // Set aside: the tail of the batch 2..=8 (from 5), and the entries after it: the
        // finish of the run (9), the next run's start (10) and its batch (11..=14).
        assert_eq!(s.storage.torn.len(), 4);
        drop(s);
        let (s, warnings) = open(dir.path());
        assert!(warnings.is_empty(), "{warnings:?}");
        assert!(s.head() > 4);
    }

    #[test]
    fn a_record_out_of_place_is_corruption() {
        let bytes = event::encode(&Event {
            seq: 2,
            version: CURRENT_VERSION,
            time_ms: 0,
            run: 1,
            body: create(0),
        });
        check_corrupt(
            move |s| s.put_raw(4, &bytes),
            4,
            "the record says it is number 2",
        );
    }

    #[test]
    fn checkpoints_give_the_same_state_as_a_full_replay() {
        let dir = tempfile::tempdir().unwrap();
        let (mut s, _) = open(dir.path());
        s.set_checkpoint_every(7);
        for _ in 0..5 {
            fill(&mut s, 5);
            s.finish_run(RunOutcome::Success, RunSummary::default())
                .unwrap();
        }
        let positions = s.checkpoint_positions();
        assert_eq!(positions.len(), KEEP_CHECKPOINTS, "{positions:?}");
        let full = Snapshot::replay(&s.events(1).unwrap());
        assert_eq!(s.snapshot(), &full);
        assert!(s.check().is_empty(), "{:?}", s.check());
        drop(s);
        let (mut s, _) = open(dir.path());
        assert_eq!(s.snapshot(), &full);
        // Time travel from a checkpoint equals replaying the prefix.
        let events = s.events(1).unwrap();
        for at in 0..=s.head() {
            let expected = Snapshot::replay(&events[..at as usize]);
            assert_eq!(s.snapshot_at(at).unwrap(), expected, "at {at}");
        }
        assert_eq!(
            s.snapshot_at(s.head() + 1),
            Err(StateError::OutOfRange {
                seq: s.head() + 1,
                head: s.head()
            })
        );
        // Deleting checkpoints changes nothing but speed.
        s.clear_checkpoints().unwrap();
        drop(s);
        let (s, _) = open(dir.path());
        assert_eq!(s.snapshot(), &full);
    }

    #[test]
    fn an_unreadable_checkpoint_is_skipped_with_a_warning() {
        let dir = tempfile::tempdir().unwrap();
        let (mut s, _) = open(dir.path());
        fill(&mut s, 4);
        s.checkpoint().unwrap();
        let at = s.head();
        fill(&mut s, 1);
        let full = s.snapshot().clone();
        let file = s.storage.checkpoints.file(at);
        let mut bytes = std::fs::read(&file).unwrap();
        let middle = bytes.len() / 2;
        bytes[middle] ^= 1;
        std::fs::write(&file, bytes).unwrap();
        assert_eq!(s.check().iter().map(|v| v.number).collect::<Vec<_>>(), [9]);
        drop(s);
        let (s, warnings) = open(dir.path());
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(
            warnings[0].starts_with("checkpoint at 10 is unreadable"),
            "{warnings:?}"
        );
        assert_eq!(s.snapshot(), &full);
    }

    #[test]
    fn checkpoints_of_the_old_format_are_ignored_and_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let (mut s, _) = open(dir.path());
        fill(&mut s, 3);
        let full = s.snapshot().clone();
        // Where format 2 kept them: chunks and a header in a sled tree.
        let old = s.storage.db.open_tree(OLD_CHECKPOINT_TREE).unwrap();
        old.insert([0, 0, 0, 0, 0, 0, 0, 7, 255, 255, 255, 255], &[0u8; 24][..])
            .unwrap();
        old.insert([0, 0, 0, 0, 0, 0, 0, 7, 0, 0, 0, 0], &b"\x93garbage"[..])
            .unwrap();
        s.commit().unwrap();
        drop((old, s));
        let (s, warnings) = Store::open(dir.path(), &opts("state list", false)).unwrap();
        assert!(warnings.is_empty(), "{warnings:?}");
        assert_eq!(s.snapshot(), &full);
        drop(s);
        let (s, warnings) = open(dir.path());
        assert!(warnings.is_empty(), "{warnings:?}");
        assert_eq!(s.snapshot(), &full);
        assert!(!s
            .storage
            .db
            .tree_names()
            .iter()
            .any(|n| n == OLD_CHECKPOINT_TREE.as_bytes()));
        assert!(s.check().is_empty(), "{:?}", s.check());
    }

    #[test]
    fn checkpoints_past_the_head_are_never_used() {
        let dir = tempfile::tempdir().unwrap();
        let (mut s, _) = open(dir.path());
        fill(&mut s, 3);
        let before = s.snapshot().clone();
        fill(&mut s, 2);
        s.checkpoint().unwrap();
        let lost = s.head();
        // The log loses its tail (as if a torn record was set aside): the checkpoint covers
        // events that are gone, and the next appends take their seqs.
        for seq in before.head + 1..=lost {
            s.remove_raw(seq);
        }
        drop(s);
        // Those events were committed: their loss is damage, never a shorter state.
        let err = Store::open(dir.path(), &opts("apply", false))
            .err()
            .unwrap();
        assert!(
            matches!(&err, StateError::Damaged { from, .. } if *from == before.head + 1),
            "{err}"
        );
        assert!(err.to_string().contains("are lost"), "{err}");
        // As if they had never been committed (a torn tail): the head says so.
        let (mut s, _) = Store::open_upto(dir.path(), &opts("apply", false), before.head).unwrap();
        s.set_head_raw(before.head);
        drop(s);
        let (mut s, warnings) = open(dir.path());
        assert!(warnings.is_empty(), "{warnings:?}");
        assert_eq!(s.snapshot(), &before);
        assert!(s.checkpoint_positions().is_empty());
        while s.head() < lost {
            s.append(create(s.head() + 100)).unwrap();
        }
        s.commit().unwrap();
        let full = Snapshot::replay(&s.events(1).unwrap());
        drop(s);
        let (s, _) = open(dir.path());
        assert_eq!(s.snapshot(), &full);
        assert!(s.check().is_empty(), "{:?}", s.check());
    }

    #[test]
    fn check_reports_outcomes_of_unknown_operations() {
        let dir = tempfile::tempdir().unwrap();
        let (mut s, _) = open(dir.path());
        fill(&mut s, 1);
        s.append(created(3, 0)).unwrap();
        s.append(EventBody::OperationFailed {
            op: 1,
            object: None,
            error: "x".into(),
        })
        .unwrap();
        let found: Vec<_> = s.check().into_iter().map(|v| v.to_string()).collect();
        assert_eq!(
            found,
            [
                "invariant 3: event 5 (OperationSucceeded) settles operation 3, which was \
                 already settled",
                "invariant 3: event 6 (OperationFailed) settles operation 1, which was never \
                 started",
            ]
        );
    }

    // ---- Locking ----

    #[test]
    fn a_second_opener_is_told_who_holds_the_lock() {
        let dir = tempfile::tempdir().unwrap();
        let (s, _) = open(dir.path());
        for write in [true, false] {
            let err = Store::open(dir.path(), &opts("plan", write)).err().unwrap();
            let StateError::Locked {
                pid,
                command,
                since_ms,
                stale,
                ..
            } = &err
            else {
                panic!("{err}")
            };
            assert_eq!(
                (*pid, command.as_deref(), *stale),
                (Some(std::process::id()), Some("apply"), false)
            );
            let since = since_ms.unwrap();
            assert!(now_ms() - since < 60_000);
            assert_eq!(
                err.to_string(),
                format!(
                    "the state in {} is locked by process {} (cairn apply) since {}; wait for \
                     it to finish, or retry with -lock-timeout=DURATION",
                    dir.path().display(),
                    std::process::id(),
                    crate::error::format_time_ms(since)
                )
            );
        }
        drop(s);
        assert!(!dir.path().join("lock.json").exists());
        drop(open(dir.path()));
    }

    #[test]
    fn lock_timeout_waits_for_the_holder() {
        let dir = tempfile::tempdir().unwrap();
        let (s, _) = open(dir.path());
        let start = Instant::now();
        let mut o = opts("plan", true);
        o.lock_timeout = Duration::from_millis(300);
        assert!(matches!(
            Store::open(dir.path(), &o),
            Err(StateError::Locked { .. })
        ));
        assert!(start.elapsed() >= Duration::from_millis(300));
        let release = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(200));
            drop(s);
        });
        o.lock_timeout = Duration::from_secs(20);
        let (s2, _) = Store::open(dir.path(), &o).unwrap_or_else(|e| panic!("{e}"));
        release.join().unwrap();
        assert!(s2.is_writable());
    }

    #[test]
    fn a_missing_or_stale_holder_record_says_what_is_known() {
        let dir = tempfile::tempdir().unwrap();
        let (_s, _) = open(dir.path());
        let lock = dir.path().join("lock.json");
        std::fs::remove_file(&lock).unwrap();
        let err = Store::open(dir.path(), &opts("plan", true)).err().unwrap();
        assert!(
            err.to_string()
                .contains("by another process that has not identified itself"),
            "{err}"
        );
        // A holder record left by a process that has exited.
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let dead = child.id();
        child.wait().unwrap();
        std::fs::write(
            &lock,
            format!(r#"{{"pid":{dead},"command":"apply","since_ms":0,"write":true}}"#),
        )
        .unwrap();
        let err = Store::open(dir.path(), &opts("plan", true)).err().unwrap();
        assert!(
            matches!(err, StateError::Locked { stale: true, .. }),
            "{err}"
        );
        assert!(
            err.to_string().contains(&format!(
                "the last recorded holder, process {dead} running cairn apply, has exited"
            )),
            "{err}"
        );
    }

    /// The child half of `another_process_is_locked_out`: opens the state named by
    /// `CAIRN_LOCK_CHILD_DIR` and prints the outcome.
    #[test]
    #[ignore = "run by another_process_is_locked_out in a child process"]
    fn lock_child() {
        let Ok(dir) = std::env::var("CAIRN_LOCK_CHILD_DIR") else {
            return;
        };
        let write = std::env::var("CAIRN_LOCK_CHILD_WRITE").is_ok();
        match Store::open(Path::new(&dir), &opts("output", write)) {
            Ok((s, _)) => println!("CHILD opened at {}", s.head()),
            Err(e) => println!("CHILD error: {e}"),
        }
    }

    fn run_child(dir: &Path, write: bool) -> String {
        let exe = std::env::current_exe().unwrap();
        let mut cmd = std::process::Command::new(exe);
        cmd.args([
            "--exact",
            "sled_store::tests::lock_child",
            "--ignored",
            "--nocapture",
        ])
        .env("CAIRN_LOCK_CHILD_DIR", dir);
        if write {
            cmd.env("CAIRN_LOCK_CHILD_WRITE", "1");
        }
        let out = cmd.output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        stdout
            .lines()
            .find(|l| l.starts_with("CHILD"))
            .unwrap_or_else(|| panic!("child printed no outcome: {stdout}"))
            .to_string()
    }

    #[test]
    fn another_process_is_locked_out() {
        let dir = tempfile::tempdir().unwrap();
        let (mut s, _) = open(dir.path());
        fill(&mut s, 1);
        for write in [false, true] {
            assert_eq!(
                run_child(dir.path(), write),
                format!(
                    "CHILD error: the state in {} is locked by process {} (cairn apply) since \
                     {}; wait for it to finish, or retry with -lock-timeout=DURATION",
                    dir.path().display(),
                    std::process::id(),
                    crate::error::format_time_ms(
                        read_holder_since(dir.path()).expect("holder record")
                    )
                )
            );
        }
        drop(s);
        assert_eq!(run_child(dir.path(), false), "CHILD opened at 4");
    }

    fn read_holder_since(dir: &Path) -> Option<u64> {
        match read_holder(dir) {
            StateError::Locked { since_ms, .. } => since_ms,
            _ => None,
        }
    }

    /// A new log whose key is still being derived (on the prefetch thread) begins a run
    /// without waiting for it: the run's first records are held back (readable, checked)
    /// and stored, sealed and chained in order, before the next record (so is a deferred
    /// append after them); reopened, the log holds every record.
    #[test]
    fn a_runs_first_records_do_not_wait_for_the_key_being_derived() {
        use crate::crypt::{Encryption, Hash, Method, Pbkdf2};
        let enc = std::sync::Arc::new(
            Encryption::new(
                "state",
                Method::AesGcm {
                    address: "method.aes_gcm.m".into(),
                    keys: Pbkdf2 {
                        address: "key_provider.pbkdf2.k".into(),
                        passphrase: "a passphrase of some length".into(),
                        key_length: 32,
                        // Long enough to be still deriving when the run begins.
                        iterations: 300_000,
                        salt_length: 32,
                        hash: Hash::Sha512,
                    },
                    aad: Vec::new(),
                },
                vec![],
                true,
            )
            .unwrap(),
        );
        enc.prefetch(None);
        let dir = tempfile::tempdir().unwrap();
        let o = OpenOptions {
            encryption: Some(enc.clone()),
            ..opts("apply", true)
        };
        let (mut s, _) = Store::open(dir.path(), &o).unwrap();
        let run = s
            .begin_run_in(
                "apply",
                &[],
                crate::event::RunContext {
                    host: Some("h".into()),
                    ..Default::default()
                },
            )
            .unwrap();
        // A record durable only with the next commit (the run's plan) is held with them.
        let seq = s.append_deferred(sim_registered()).unwrap();
        assert!(
            !enc.ready_to_seal(),
            "begin_run or a deferred append waited for the key"
        );
        assert_eq!((run, seq, s.head()), (1, 3, 3));
        // Held, yet read and checked like stored records.
        let events = s.events(1).unwrap();
        assert!(
            matches!(events[0].body, EventBody::RunStarted { .. }),
            "{events:?}"
        );
        assert!(s.check().is_empty(), "{:?}", s.check());
        fill(&mut s, 2);
        assert!(enc.ready_to_seal());
        let want = s.snapshot().clone();
        drop(s);
        let (s, warnings) = Store::open(dir.path(), &o).unwrap();
        assert!(warnings.is_empty(), "{warnings:?}");
        assert_eq!(s.snapshot(), &want);
        assert_eq!(s.events(1).unwrap().len() as u64, want.head);
        assert!(s.check().is_empty());
        s.verify().unwrap();
    }

    /// With encryption, the records and the checkpoint files hold no attribute value in the
    /// clear; the checkpoint opens with the key (and reopening folds it), and without the key
    /// the log is an error naming it.
    #[test]
    fn encrypted_records_and_checkpoints_hold_no_value_in_the_clear() {
        use crate::crypt::{Encryption, Hash, Method, Pbkdf2};
        let enc = std::sync::Arc::new(
            Encryption::new(
                "state",
                Method::AesGcm {
                    address: "method.aes_gcm.m".into(),
                    keys: Pbkdf2 {
                        address: "key_provider.pbkdf2.k".into(),
                        passphrase: "a passphrase of some length".into(),
                        key_length: 32,
                        iterations: 1000,
                        salt_length: 32,
                        hash: Hash::Sha512,
                    },
                    aad: Vec::new(),
                },
                vec![],
                true,
            )
            .unwrap(),
        );
        let dir = tempfile::tempdir().unwrap();
        let o = OpenOptions {
            encryption: Some(enc.clone()),
            ..opts("apply", true)
        };
        let (mut s, _) = Store::open(dir.path(), &o).unwrap();
        fill(&mut s, 20);
        s.checkpoint().unwrap();
        fill(&mut s, 3);
        let want = s.snapshot().clone();
        drop(s);
        let ckpts = Checkpoints::new(dir.path(), None).seqs();
        assert_eq!(ckpts.len(), 1);
        let mut stack = vec![dir.path().to_path_buf()];
        while let Some(d) = stack.pop() {
            for e in fs::read_dir(&d).unwrap().flatten() {
                if e.path().is_dir() {
                    stack.push(e.path());
                    continue;
                }
                let bytes = fs::read(e.path()).unwrap();
                // Attribute values are "v<n>"; create tokens "t<n>".
                for needle in [&b"v13"[..], b"t13", b"sim_thing"] {
                    assert!(
                        !bytes.windows(needle.len()).any(|w| w == needle),
                        "{} holds {:?}",
                        e.path().display(),
                        String::from_utf8_lossy(needle)
                    );
                }
            }
        }
        let (s, warnings) = Store::open(dir.path(), &o).unwrap();
        assert!(warnings.is_empty(), "{warnings:?}");
        assert_eq!(s.snapshot(), &want);
        assert!(s.check().is_empty());
        drop(s);
        let err = Store::open(dir.path(), &opts("list", false)).err().unwrap();
        assert!(err.to_string().contains("key_provider.pbkdf2.k"), "{err}");
    }
}
