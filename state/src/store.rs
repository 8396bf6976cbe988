//! The open log whichever store holds it: [`Store`], an [`EventLog`] (the log core of
//! `log.rs`) over the sled store in the state directory (`sled_store.rs`) or the PostgreSQL
//! store (`pg_store.rs`). Both pass the same conformance suite (`state/tests/conformance.rs`).
//!
//! [`Store::open`] picks the store from `<dir>/backend.json` (see [`crate::backend_config`]): no file
//! is the local sled log. Callers never name a store.

use crate::backend_config::{read_backend, Backend, PgConfig, S3Config};
use crate::error::StateError;
use crate::log::{OpenOptions, Peek};
use crate::pg_store::{PgLog, PgReader};
use crate::s3_store::{S3Log, S3Reader};
use crate::sled_store::{peek_sled, SledLog};
use std::path::Path;

/// The log as the engine sees it, also under this module's name.
pub use crate::log::EventLog;

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

impl From<S3Log> for Store {
    fn from(s: S3Log) -> Store {
        Store(Box::new(s))
    }
}

/// The shared store a state directory names, resolved against the environment.
#[derive(Clone, Debug)]
pub enum Remote {
    Pg(PgConfig),
    S3(Box<S3Config>),
}

/// The shared store `dir` names (`None`: the sled log in `dir`), its environment resolved.
/// A workspace's directory takes its root's backend: on PostgreSQL its own schema, on S3 its
/// own key (`<workspace_key_prefix>/<name>/<key>`, as Terraform's).
pub fn configured(dir: &Path) -> Result<Option<Remote>, StateError> {
    let (root, workspace) = match crate::workspace::of_dir(dir) {
        Some((root, name)) => (root, Some(name)),
        None => (dir.to_path_buf(), None),
    };
    match read_backend(&root)? {
        Backend::S3(settings) => {
            let cfg = settings.resolve(&process_env)?;
            Ok(Some(Remote::S3(Box::new(match workspace {
                Some(name) => cfg.in_workspace(&name),
                None => cfg,
            }))))
        }
        _ => Ok(configured_pg(dir)?.map(Remote::Pg)),
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
        Backend::Local | Backend::S3(_) => Ok(None),
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
/// Records are opened with `crypt`, the state's encryption.
pub fn peek_events(
    dir: &Path,
    from: u64,
    max: usize,
    crypt: Option<&crate::crypt::Encryption>,
) -> Result<Peek, StateError> {
    match configured(dir)? {
        None => peek_sled(dir, from, max, crypt),
        Some(Remote::Pg(pg)) => crate::pg_store::peek_events(&pg, from, max, crypt),
        Some(Remote::S3(s3)) => crate::s3_store::peek_events(&s3, from, max, crypt),
    }
}

/// A reader of a state directory's log beside other commands (`cairn ui`), whichever store
/// it names: it never waits for a lock and never writes.
pub enum LogReader {
    /// The sled log in this directory: read by brief visits ([`peek_sled`]) when no command
    /// holds it.
    Sled(std::path::PathBuf),
    /// A PostgreSQL log: read over one kept connection (readers take no lock).
    Pg(Box<PgReader>),
    /// An S3 log: read over one kept client (readers take no lock).
    S3(Box<S3Reader>),
}

impl LogReader {
    /// The reader for the store `dir`'s `backend.json` names (none: the sled log in `dir`),
    /// opening records with `crypt` (the sled reader is handed it at each visit).
    pub fn open(
        dir: &Path,
        crypt: Option<std::sync::Arc<crate::crypt::Encryption>>,
    ) -> Result<LogReader, StateError> {
        Ok(match configured(dir)? {
            None => LogReader::Sled(dir.to_path_buf()),
            Some(Remote::Pg(pg)) => LogReader::Pg(Box::new(PgReader::new(pg, crypt))),
            Some(Remote::S3(s3)) => LogReader::S3(Box::new(S3Reader::new(&s3, crypt)?)),
        })
    }
}

impl Store {
    /// Opens (with `write`, creating) the state of the state directory `dir`: the store its
    /// `backend.json` names, or the sled log in it. The warnings say what was repaired or
    /// skipped (a torn tail, an unreadable checkpoint, a fault journal written back).
    pub fn open(dir: &Path, opts: &OpenOptions) -> Result<(Store, Vec<String>), StateError> {
        match configured(dir)? {
            None => SledLog::open(dir, opts).map(|(s, w)| (s.into(), w)),
            Some(Remote::Pg(pg)) => PgLog::open(&pg, dir, opts).map(|(s, w)| (s.into(), w)),
            Some(Remote::S3(s3)) => S3Log::open(&s3, dir, opts).map(|(s, w)| (s.into(), w)),
        }
    }

    /// Opens the state read-only as it was after event `upto`, ignoring every record after
    /// it: the way to recover what precedes a corrupt record.
    pub fn open_upto(
        dir: &Path,
        opts: &OpenOptions,
        upto: u64,
    ) -> Result<(Store, Vec<String>), StateError> {
        match configured(dir)? {
            None => SledLog::open_upto(dir, opts, upto).map(|(s, w)| (s.into(), w)),
            Some(Remote::Pg(pg)) => {
                PgLog::open_upto(&pg, dir, opts, upto).map(|(s, w)| (s.into(), w))
            }
            Some(Remote::S3(s3)) => {
                S3Log::open_upto(&s3, dir, opts, upto).map(|(s, w)| (s.into(), w))
            }
        }
    }

    /// `cairn state recover`: goes on from the last good event of a damaged log (see
    /// [`crate::log::recover`]), keeping a copy of the damaged store: on sled a directory
    /// `damaged-<ms>/` beside the log, on PostgreSQL tables beside the log's, on S3 objects
    /// under `<key>.cairn/damaged-<ms>/`.
    pub fn recover(
        dir: &Path,
        opts: &OpenOptions,
        args: &[String],
    ) -> Result<(Store, crate::log::Recovery), StateError> {
        match configured(dir)? {
            None => SledLog::recover(dir, opts, args).map(|(s, r)| (s.into(), r)),
            Some(Remote::Pg(pg)) => {
                PgLog::recover(&pg, dir, opts, args).map(|(s, r)| (s.into(), r))
            }
            Some(Remote::S3(s3)) => {
                S3Log::recover(&s3, dir, opts, args).map(|(s, r)| (s.into(), r))
            }
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

    /// Opens an S3 log (migration; tests).
    pub fn open_s3(
        s3: &S3Config,
        dir: &Path,
        opts: &OpenOptions,
    ) -> Result<(Store, Vec<String>), StateError> {
        S3Log::open(s3, dir, opts).map(|(s, w)| (s.into(), w))
    }
}
