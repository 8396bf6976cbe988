//! Following the log beside other commands (`cairn ui`), whichever store holds it.
//!
//! sled allows one opener at a time, and every Cairn command holds the database for its whole
//! run. A watcher never holds it: it watches the log directory's files and `lock.json`; when
//! the files changed and no command holds the state, it makes a brief visit
//! (`cairn_state::peek_events`) that reads only the new events and lets go. A command that
//! starts during a visit waits for it (the lock's grace period), so a watcher never makes a
//! command fail. On PostgreSQL (`backend.json`) readers take no lock: the watcher keeps one
//! connection (`cairn_state::pg::PgReader`), polls for events after the last one it has (one
//! indexed query), and sees runs as they are written, with the writer from the lock's holder
//! record.

use cairn_state::{Event, LogReader, Peek, StateError};
use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

/// The most events one visit to the log reads: a visit stays short (well under the grace
/// period a command starting meanwhile waits), and a reader catches up over several.
const VISIT_MAX: usize = 20_000;

/// Who holds the state while a command runs.
#[derive(Clone, Debug, PartialEq)]
pub enum Holder {
    /// Some process whose holder record was not there to read.
    Unknown,
    /// A local command (sled's `lock.json`); a field the record lacks is `None`.
    Local {
        pid: Option<serde_json::Value>,
        command: Option<serde_json::Value>,
        since_ms: Option<serde_json::Value>,
    },
    /// A writer of a PostgreSQL state (its holder record).
    Remote {
        pid: u32,
        command: String,
        since_ms: u64,
        who: String,
        host: String,
    },
}

/// What one look at the log found.
#[derive(Debug, Default)]
pub struct Look {
    /// The new events (after the `from` asked for), in order.
    pub events: Vec<Event>,
    /// The store's warnings about what it read.
    pub warnings: Vec<String>,
    /// Another store is named now: its log is read from the start, and what was read of
    /// the previous one no longer applies.
    pub restarted: bool,
    /// The command holding the state, while one does.
    pub busy: Option<Holder>,
    /// No state yet.
    pub missing: bool,
    pub error: Option<String>,
    /// More events are waiting: look again soon.
    pub more: bool,
    /// Nothing was read: only `busy` is news, what was known of the log stands.
    pub keep_status: bool,
    /// The store named now could not be opened (the previous one, if any, was read).
    pub open_error: Option<String>,
}

/// The log directory's files (name, size, mtime): changes when anything is written.
type Signature = Vec<(String, u64, u128)>;

/// A watcher of one state directory's log.
pub struct LogWatch {
    state_dir: PathBuf,
    source: Option<LogReader>,
    last: Option<Signature>,
    crypt: Option<std::sync::Arc<cairn_state::crypt::Encryption>>,
}

fn signature(state_dir: &Path) -> Signature {
    let mut out = Vec::new();
    let mut dirs = vec![state_dir.join("log")];
    while let Some(d) = dirs.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            let Ok(md) = e.metadata() else { continue };
            if md.is_dir() {
                dirs.push(e.path());
                continue;
            }
            let mtime = md
                .modified()
                .ok()
                .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
                .map_or(0, |d| d.as_nanos());
            out.push((e.path().display().to_string(), md.len(), mtime));
        }
    }
    out.sort();
    out
}

fn holder(state_dir: &Path) -> Option<Holder> {
    let text = std::fs::read_to_string(state_dir.join("lock.json")).ok()?;
    let j: serde_json::Value = serde_json::from_str(&text).ok()?;
    // A process killed while it held the state (`kill -9`) leaves its record behind: it holds
    // nothing, and what it wrote can be read.
    if let Some(pid) = j.get("pid").and_then(|p| p.as_u64()) {
        if !process_alive(pid) {
            return None;
        }
    }
    Some(Holder::Local {
        pid: j.get("pid").cloned(),
        command: j.get("command").cloned(),
        since_ms: j.get("since_ms").cloned(),
    })
}

/// Whether process `pid` exists on this machine (sled's `lock.json` is written by a local
/// process).
fn process_alive(pid: u64) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return false;
    };
    if pid <= 0 {
        return false;
    }
    // SAFETY: signal 0 only checks that the process exists and may be signalled.
    let r = unsafe { libc::kill(pid, 0) };
    r == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

impl LogWatch {
    pub fn new(state_dir: &Path) -> LogWatch {
        LogWatch {
            state_dir: state_dir.to_path_buf(),
            source: None,
            last: None,
            crypt: None,
        }
    }

    /// Reads records with the state's encryption (`terraform { encryption }`).
    pub fn with_encryption(
        mut self,
        crypt: Option<std::sync::Arc<cairn_state::crypt::Encryption>>,
    ) -> LogWatch {
        self.crypt = crypt;
        self
    }

    /// The store this watcher reads now: `sled` or `postgres`.
    pub fn store(&self) -> &'static str {
        match &self.source {
            Some(LogReader::Pg(_)) => "postgres",
            Some(LogReader::S3(_)) => "s3",
            _ => "sled",
        }
    }

    /// One look at the log: the events after `from - 1` when there are new ones, and who
    /// holds the state. Opens the store again when `cairn init` named another one meanwhile.
    pub fn look(&mut self, from: u64) -> Look {
        let mut look = Look::default();
        // Which store: read again when `cairn init` names another one meanwhile.
        let backend = self.state_dir.join("backend.json").exists();
        let stale = match &self.source {
            None => true,
            Some(LogReader::Sled(_)) => backend,
            Some(LogReader::Pg(_)) | Some(LogReader::S3(_)) => !backend,
        };
        let mut from = from;
        if stale {
            match LogReader::open(&self.state_dir, self.crypt.clone()) {
                Ok(r) => {
                    if self.source.is_some() {
                        // Another store: its log is read from the start.
                        look.restarted = true;
                        from = 1;
                    }
                    self.source = Some(r);
                    self.last = None;
                }
                Err(e) => look.open_error = Some(e.to_string()),
            }
        }
        match self.source.take() {
            Some(LogReader::Sled(r)) => {
                self.look_sled(from, &mut look);
                self.source = Some(LogReader::Sled(r));
            }
            Some(LogReader::Pg(mut r)) => {
                look_remote(&mut *r, from, &mut look);
                self.source = Some(LogReader::Pg(r));
            }
            Some(LogReader::S3(mut r)) => {
                look_remote(&mut *r, from, &mut look);
                self.source = Some(LogReader::S3(r));
            }
            None => {}
        }
        look
    }

    /// One look at a sled log: reads new events if the files changed and nobody holds them.
    fn look_sled(&mut self, from: u64, look: &mut Look) {
        if let Some(h) = holder(&self.state_dir) {
            look.busy = Some(h);
            look.keep_status = true;
            return;
        }
        let before = signature(&self.state_dir);
        if self.last.as_ref() == Some(&before) {
            look.keep_status = true;
            return;
        }
        match cairn_state::peek_events(&self.state_dir, from, VISIT_MAX, self.crypt.as_deref()) {
            Ok(Peek::Busy) => {
                look.busy = holder(&self.state_dir).or(Some(Holder::Unknown));
            }
            Ok(Peek::Events(events, warnings)) => {
                look.more = events.len() >= VISIT_MAX;
                look.events = events;
                look.warnings = warnings;
                self.last = if look.more {
                    // Visit again soon for the rest (the files have not changed since:
                    // forget the signature so the next look reads).
                    None
                } else {
                    // sled may touch its files as it closes: compare against what it left.
                    Some(signature(&self.state_dir))
                };
            }
            Err(StateError::NotFound { .. }) => look.missing = true,
            Err(e) => {
                look.error = Some(e.to_string());
                self.last = Some(before);
            }
        }
    }
}

/// A shared store's reader: PostgreSQL's or S3's.
trait RemoteReader {
    fn read(&mut self, from: u64, max: usize) -> Result<Peek, StateError>;
    fn holder(&mut self) -> Result<Option<Box<cairn_state::LockHolder>>, StateError>;
}

impl RemoteReader for cairn_state::pg::PgReader {
    fn read(&mut self, from: u64, max: usize) -> Result<Peek, StateError> {
        cairn_state::pg::PgReader::read(self, from, max)
    }
    fn holder(&mut self) -> Result<Option<Box<cairn_state::LockHolder>>, StateError> {
        cairn_state::pg::PgReader::holder(self)
    }
}

impl RemoteReader for cairn_state::s3_store::S3Reader {
    fn read(&mut self, from: u64, max: usize) -> Result<Peek, StateError> {
        cairn_state::s3_store::S3Reader::read(self, from, max)
    }
    fn holder(&mut self) -> Result<Option<Box<cairn_state::LockHolder>>, StateError> {
        cairn_state::s3_store::S3Reader::holder(self)
    }
}

/// One look at a shared (PostgreSQL or S3) log: who is writing, and every new event (readers
/// take no lock there, so runs appear as they are written, not only when they finish).
fn look_remote(r: &mut dyn RemoteReader, from: u64, look: &mut Look) {
    let mut from = from;
    loop {
        match r.read(from, VISIT_MAX) {
            Ok(Peek::Events(events, warnings)) => {
                let more = events.len() >= VISIT_MAX;
                from = events.last().map_or(from, |e| e.seq + 1);
                look.events.extend(events);
                look.warnings.extend(warnings);
                if more {
                    continue;
                }
            }
            Ok(Peek::Busy) => {}
            Err(StateError::NotFound { .. }) => look.missing = true,
            Err(e) => look.error = Some(e.to_string()),
        }
        break;
    }
    if !look.missing && look.error.is_none() {
        match r.holder() {
            Ok(h) => {
                look.busy = h.map(|h| Holder::Remote {
                    pid: h.pid,
                    command: h.command,
                    since_ms: h.since_ms,
                    who: h.who,
                    host: h.host,
                })
            }
            Err(e) => look.error = Some(e.to_string()),
        }
    }
}
