//! The PostgreSQL store of the event log (a [`Storage`]): the state a team shares
//! (`backend "pg"`). Sequence numbers, runs, the fold and checkpoints are the log core's
//! (`log.rs`); this file keeps records, the lineage and checkpoints in tables, the lock, and
//! the fault journal.
//!
//! Schema (in the configured schema, default `terraform_remote_state`):
//!
//! ```text
//! cairn_events       (seq bigint primary key, data bytea)  the log: records as in sled
//! cairn_meta         (key text primary key, value text)    "lineage"
//! cairn_checkpoints  (seq bigint primary key, data bytea)  a derived cache (checkpoint.rs format)
//! cairn_lock         (lock_key, run_id, who, host, pid, command, since_ms, backend_pid)
//! cairn_head         (id int primary key = 1, head bytea)   the log's head (chain.rs)
//! ```
//!
//! **Head.** Each flush writes the head (the last record's seq and chain hash) in the same
//! statement as the records, into its own table: rows deleted from, or reordered in,
//! `cairn_events` by hand (the triggers bypassed) break the chain or fall short of the head —
//! an error, never a shorter state.
//!
//! **Append-only.** `cairn_events` and `cairn_meta` refuse `UPDATE`, `DELETE` and `TRUNCATE`
//! by a trigger, and the creating role revokes those privileges from itself and from PUBLIC.
//! A least-privilege role needs only `SELECT, INSERT` on them (README, "State for teams").
//!
//! **Commits.** `put` buffers the encoded record (the log core folds the event); a flush
//! writes every buffered event in one `INSERT … SELECT unnest(…)` statement (group commit:
//! one round trip and one WAL flush for all writers waiting). Sequence numbers are assigned
//! by the lock holder; the primary key refuses a second writer that lost the lock.
//!
//! **Locking.** A writer holds a session-level advisory lock (key derived from the schema
//! name) for its whole run and writes a holder record (who, host, pid, command, since, run
//! id). The lock dies with the session: a runner killed or cut off never leaves it behind.
//! Readers take no lock: the log is append-only, so a prefix is always consistent.
//!
//! **Faults.** If a flush fails (server gone, connection killed), the store stops accepting
//! that anything is durable: every later flush fails, so the engine starts no new operation.
//! The events not known durable — among them the outcomes of provider calls that finished —
//! are written to the local journal `<state dir>/pg-journal` (fsynced). The next writer that
//! opens the log writes them to the database before anything else.
//!
//! All database work runs on a small tokio runtime owned by the store, so the store's
//! blocking API can be called from any thread, inside or outside the engine's runtime.

use crate::backend_config::PgConfig;
use crate::chain::Head;
use crate::checkpoint;
use crate::error::{LockHolder, StateError};
use crate::log::{current_user, decode_record, now_ms, LogCore, OpenOptions, Peek};
use crate::snapshot::Snapshot;
use crate::storage::{Flusher, Records, Storage};
use sha2::Digest;
use std::future::Future;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio_postgres::Client;

/// The local journal of events a writer could not make durable in the database.
pub(crate) const JOURNAL_FILE: &str = "pg-journal";

/// A connection: a client and the runtime its I/O runs on.
pub(crate) struct Conn {
    rt: Option<tokio::runtime::Runtime>,
    client: Arc<Client>,
}

impl Drop for Conn {
    fn drop(&mut self) {
        if let Some(rt) = self.rt.take() {
            rt.shutdown_background();
        }
    }
}

/// A database error as text: the server's message (and detail), or the client's error and
/// its causes. Never the connection string.
fn pg_message(e: &tokio_postgres::Error) -> String {
    if let Some(db) = e.as_db_error() {
        let mut m = db.message().to_string();
        if let Some(d) = db.detail() {
            m.push_str(&format!(" ({d})"));
        }
        return m;
    }
    let mut m = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        m.push_str(&format!(": {s}"));
        source = s.source();
    }
    m
}

impl Conn {
    pub(crate) fn connect(cfg: &PgConfig) -> Result<Conn, StateError> {
        let fail = |m: String| StateError::Io {
            context: format!("cannot connect to {}", cfg.describe()),
            message: m,
        };
        let (pg, tls) = crate::pgtls::parse(&cfg.conn_str).map_err(fail)?;
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("cairn-pg")
            .enable_all()
            .build()
            .map_err(|e| fail(e.to_string()))?;
        // Never `block_on`: the caller may itself be on a runtime (the engine's).
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        rt.spawn(async move {
            let connect = async {
                match tls {
                    None => {
                        let (client, conn) = pg.connect(tokio_postgres::NoTls).await?;
                        tokio::spawn(conn);
                        Ok(client)
                    }
                    Some(tls) => {
                        let (client, conn) = pg.connect(tls).await?;
                        tokio::spawn(conn);
                        Ok(client)
                    }
                }
            };
            let r = connect
                .await
                .map_err(|e: tokio_postgres::Error| pg_message(&e));
            let _ = tx.send(r);
        });
        let client = match rx.recv() {
            Ok(Ok(client)) => client,
            failed => {
                // Dropping a runtime blocks on its workers, which panics when the caller is
                // itself on a runtime (the engine's, at the start of plan or apply): let it
                // shut down in the background instead.
                rt.shutdown_background();
                return Err(match failed {
                    Ok(Err(m)) => fail(m),
                    _ => fail("the connection task stopped".into()),
                });
            }
        };
        Ok(Conn {
            rt: Some(rt),
            client: Arc::new(client),
        })
    }

    /// Runs `f` on the connection's runtime and waits for it (from any thread).
    pub(crate) fn run<T, F, Fut>(&self, context: &str, f: F) -> Result<T, StateError>
    where
        T: Send + 'static,
        F: FnOnce(Arc<Client>) -> Fut,
        Fut: Future<Output = Result<T, tokio_postgres::Error>> + Send + 'static,
    {
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        let fut = f(self.client.clone());
        let rt = self.rt.as_ref().expect("runtime until drop");
        rt.spawn(async move {
            let _ = tx.send(fut.await);
        });
        match rx.recv() {
            Ok(r) => r.map_err(|e| StateError::io(context.to_string(), pg_message(&e))),
            Err(_) => Err(StateError::io(
                context.to_string(),
                "the connection is closed",
            )),
        }
    }

    pub(crate) fn execute(&self, context: &str, sql: String) -> Result<(), StateError> {
        self.run(context, |c| async move { c.batch_execute(&sql).await })
    }
}

pub(crate) fn quote_ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

pub(crate) fn key_of(purpose: &str, schema: &str) -> i64 {
    let h = sha2::Sha256::digest(format!("cairn:{purpose}:{schema}").as_bytes());
    i64::from_be_bytes(h[..8].try_into().expect("8 bytes"))
}

pub(crate) fn host_name() -> String {
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

pub(crate) fn random_id() -> String {
    let mut bytes = [0u8; 16];
    if std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .is_err()
    {
        let seed = format!("{}{}{:?}", now_ms(), std::process::id(), Instant::now());
        bytes.copy_from_slice(&sha2::Sha256::digest(seed.as_bytes())[..16]);
    }
    let h: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &h[..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..]
    )
}

/// What the store and its flushers share.
struct Shared {
    /// Appended, not yet written to the database.
    pending: Vec<(u64, Vec<u8>)>,
    /// Why the database cannot be written any more (set by the first failed flush).
    failed: Option<String>,
    /// Events written to the local journal after a failure.
    journaled: u64,
}

struct Writer {
    conn: Arc<Conn>,
    shared: Mutex<Shared>,
    /// Held for a whole flush, so that flushes complete in order.
    flushing: Mutex<()>,
    insert_sql: String,
    journal: PathBuf,
}

impl Writer {
    fn flush(&self) -> Result<(), StateError> {
        let _order = self.flushing.lock().expect("pg flush order");
        let (batch, failed) = {
            let mut sh = self.shared.lock().expect("pg shared");
            (std::mem::take(&mut sh.pending), sh.failed.clone())
        };
        if let Some(why) = failed {
            self.keep_in_journal(&batch)?;
            return Err(self.failure(&why));
        }
        if batch.is_empty() {
            return Ok(());
        }
        // The records move into the statement and come back with its outcome (no copy).
        let head = batch
            .last()
            .map(|(seq, d)| Head::of(*seq, d).encode().to_vec())
            .expect("a batch");
        let (seqs, datas): (Vec<i64>, Vec<Vec<u8>>) =
            batch.into_iter().map(|(s, d)| (s as i64, d)).unzip();
        let sql = self.insert_sql.clone();
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        let client = self.conn.client.clone();
        self.conn
            .rt
            .as_ref()
            .expect("runtime until drop")
            .spawn(async move {
                let r = client.execute(&sql, &[&seqs, &datas, &head]).await;
                let _ = tx.send((r.map(|_| ()).map_err(|e| pg_message(&e)), seqs, datas));
            });
        let (result, seqs, datas) = match rx.recv() {
            Ok(x) => x,
            Err(_) => {
                return Err(StateError::io(
                    "cannot write to the state log",
                    "the connection is closed",
                ))
            }
        };
        match result {
            Ok(()) => Ok(()),
            Err(e) => {
                let why = format!("cannot write to the state log: {e}");
                self.shared.lock().expect("pg shared").failed = Some(why.clone());
                let batch: Vec<(u64, Vec<u8>)> =
                    seqs.into_iter().map(|s| s as u64).zip(datas).collect();
                self.keep_in_journal(&batch)?;
                Err(self.failure(&why))
            }
        }
    }

    fn failure(&self, why: &str) -> StateError {
        let n = self.shared.lock().expect("pg shared").journaled;
        StateError::Io {
            context: "the state database failed".into(),
            message: format!(
                "{why}. No new operation starts. The {n} event(s) not yet in the database \
                 (among them the outcomes of provider calls that finished) are kept in {}; the \
                 next run that reaches the database writes them there before anything else",
                self.journal.display()
            ),
        }
    }

    /// Appends records to the local journal and makes them durable.
    fn keep_in_journal(&self, batch: &[(u64, Vec<u8>)]) -> Result<(), StateError> {
        if batch.is_empty() {
            return Ok(());
        }
        crate::journal::append(&self.journal, batch).map_err(|e| {
            StateError::io(
                format!(
                    "the state database failed and the local journal {} cannot be written",
                    self.journal.display()
                ),
                e,
            )
        })?;
        self.shared.lock().expect("pg shared").journaled += batch.len() as u64;
        Ok(())
    }
}

/// An open state on PostgreSQL: the log core over the PostgreSQL store.
pub(crate) type PgLog = LogCore<PgStorage>;

/// The tables of one schema, over one connection (one [`Storage`]): a writer holds the lock
/// until it is dropped.
pub(crate) struct PgStorage {
    cfg: PgConfig,
    /// The schema, quoted for SQL.
    schema: String,
    writer: Arc<Writer>,
    write: bool,
    lock: Option<(i64, String)>,
    /// The state's encryption (checkpoints are sealed with it).
    crypt: crate::checkpoint::Crypt,
}

fn table_sql(s: &str) -> String {
    format!(
        r#"
CREATE TABLE IF NOT EXISTS {s}.cairn_events (seq bigint PRIMARY KEY CHECK (seq > 0), data bytea NOT NULL);
CREATE TABLE IF NOT EXISTS {s}.cairn_meta (key text PRIMARY KEY, value text NOT NULL);
CREATE TABLE IF NOT EXISTS {s}.cairn_checkpoints (seq bigint PRIMARY KEY, data bytea NOT NULL);
CREATE TABLE IF NOT EXISTS {s}.cairn_head (id integer PRIMARY KEY CHECK (id = 1), head bytea NOT NULL);
CREATE TABLE IF NOT EXISTS {s}.cairn_lock (
    lock_key bigint PRIMARY KEY, run_id text NOT NULL, who text NOT NULL, host text NOT NULL,
    pid integer NOT NULL, command text NOT NULL, since_ms bigint NOT NULL,
    backend_pid integer NOT NULL);
CREATE OR REPLACE FUNCTION {s}.cairn_append_only() RETURNS trigger LANGUAGE plpgsql AS $f$
BEGIN
    RAISE EXCEPTION 'the Cairn state log is append-only: % on %.% is refused',
        TG_OP, TG_TABLE_SCHEMA, TG_TABLE_NAME USING ERRCODE = 'insufficient_privilege';
END $f$;
CREATE OR REPLACE TRIGGER cairn_events_append_only BEFORE UPDATE OR DELETE ON {s}.cairn_events
    FOR EACH ROW EXECUTE FUNCTION {s}.cairn_append_only();
CREATE OR REPLACE TRIGGER cairn_events_no_truncate BEFORE TRUNCATE ON {s}.cairn_events
    FOR EACH STATEMENT EXECUTE FUNCTION {s}.cairn_append_only();
CREATE OR REPLACE TRIGGER cairn_meta_append_only BEFORE UPDATE OR DELETE ON {s}.cairn_meta
    FOR EACH ROW EXECUTE FUNCTION {s}.cairn_append_only();
CREATE OR REPLACE TRIGGER cairn_meta_no_truncate BEFORE TRUNCATE ON {s}.cairn_meta
    FOR EACH STATEMENT EXECUTE FUNCTION {s}.cairn_append_only();
REVOKE UPDATE, DELETE, TRUNCATE ON {s}.cairn_events, {s}.cairn_meta FROM PUBLIC, CURRENT_USER;
"#
    )
}

impl PgLog {
    /// Opens (with `write`, creating the schema and tables unless told not to, and taking the
    /// lock) the log in `cfg`'s schema. `dir` is the local state directory (fault journal).
    pub(crate) fn open(
        cfg: &PgConfig,
        dir: &Path,
        opts: &OpenOptions,
    ) -> Result<(PgLog, Vec<String>), StateError> {
        Self::open_inner(cfg, dir, opts, None)
    }

    /// Opens read-only as the log was after event `upto`.
    pub(crate) fn open_upto(
        cfg: &PgConfig,
        dir: &Path,
        opts: &OpenOptions,
        upto: u64,
    ) -> Result<(PgLog, Vec<String>), StateError> {
        let opts = OpenOptions {
            write: false,
            ..opts.clone()
        };
        Self::open_inner(cfg, dir, &opts, Some(upto))
    }

    fn open_inner(
        cfg: &PgConfig,
        dir: &Path,
        opts: &OpenOptions,
        upto: Option<u64>,
    ) -> Result<(PgLog, Vec<String>), StateError> {
        let storage = PgStorage::open(cfg, dir, opts)?;
        let (mut log, mut warnings) =
            LogCore::over(storage, dir, opts.write, upto, opts.encryption.clone())?;
        if opts.write {
            if let Some(n) = crate::journal::recover(&mut log, JOURNAL_FILE, "database connection")?
            {
                warnings.push(n.clone());
                log.notices.push(n);
            }
        } else if let Ok(records) = crate::journal::read(&dir.join(JOURNAL_FILE)) {
            if !records.is_empty() {
                warnings.push(format!(
                    "{} event(s) of a run that lost its database connection are kept in {} \
                     and not yet in the database; the next run that writes the state (apply, \
                     refresh, …) writes them there first",
                    records.len(),
                    dir.join(JOURNAL_FILE).display()
                ));
            }
        }
        Ok((log, warnings))
    }
}

impl PgLog {
    /// `cairn state recover` on the log in `cfg`'s schema (see [`crate::log::recover`]),
    /// holding the lock: the copy of the damaged log is kept in tables beside it
    /// ([`Storage::set_damage_aside`]). No log there is [`StateError::NotFound`].
    pub(crate) fn recover(
        cfg: &PgConfig,
        dir: &Path,
        opts: &OpenOptions,
        args: &[String],
    ) -> Result<(PgLog, crate::log::Recovery), StateError> {
        // A schema without the tables has nothing to recover (and is not created).
        drop(PgStorage::open(
            cfg,
            dir,
            &OpenOptions {
                write: false,
                ..opts.clone()
            },
        )?);
        let opts = OpenOptions {
            write: true,
            ..opts.clone()
        };
        let storage = PgStorage::open(cfg, dir, &opts)?;
        crate::log::recover(storage, dir, args, opts.encryption.clone())
    }
}

impl PgStorage {
    /// Connects to `cfg`'s schema; with `write`, creates the schema and tables (unless told
    /// not to) and takes the lock. `dir` is the local state directory (fault journal).
    fn open(cfg: &PgConfig, dir: &Path, opts: &OpenOptions) -> Result<PgStorage, StateError> {
        let conn = Arc::new(Conn::connect(cfg)?);
        let s = quote_ident(&cfg.schema);
        let exists: bool = {
            let q = format!("{}.cairn_events", s);
            conn.run("cannot read the state schema", |c| async move {
                c.query_one("SELECT to_regclass($1) IS NOT NULL", &[&q])
                    .await
                    .map(|r| r.get(0))
            })?
        };
        if !exists {
            if !opts.write {
                return Err(StateError::NotFound {
                    dir: PathBuf::from(cfg.describe()),
                });
            }
            if cfg.skip_table_creation {
                return Err(StateError::Backend {
                    message: format!(
                        "{} has no Cairn tables and skip_table_creation is set; create them \
                         as the README's \"State for teams\" shows",
                        cfg.describe()
                    ),
                });
            }
            let mut sql = format!(
                "BEGIN; SELECT pg_advisory_xact_lock({});",
                key_of("setup", &cfg.schema)
            );
            if !cfg.skip_schema_creation {
                sql.push_str(&format!("CREATE SCHEMA IF NOT EXISTS {s};"));
            }
            sql.push_str(&table_sql(&s));
            sql.push_str("COMMIT;");
            conn.execute(
                &format!("cannot create the state tables in {}", cfg.describe()),
                sql,
            )?;
        }
        let writer = Arc::new(Writer {
            conn: conn.clone(),
            shared: Mutex::new(Shared {
                pending: Vec::new(),
                failed: None,
                journaled: 0,
            }),
            flushing: Mutex::new(()),
            // The records and the head in one statement (one round trip, one transaction).
            insert_sql: format!(
                "WITH records AS (INSERT INTO {s}.cairn_events (seq, data) \
                 SELECT * FROM unnest($1::bigint[], $2::bytea[])) \
                 INSERT INTO {s}.cairn_head (id, head) VALUES (1, $3) \
                 ON CONFLICT (id) DO UPDATE SET head = EXCLUDED.head"
            ),
            journal: dir.join(JOURNAL_FILE),
        });
        let mut storage = PgStorage {
            cfg: cfg.clone(),
            schema: s,
            writer,
            write: opts.write,
            lock: None,
            crypt: opts.encryption.clone(),
        };
        if opts.write && !opts.skip_lock {
            storage.acquire_lock(opts)?;
        }
        Ok(storage)
    }

    fn conn(&self) -> &Conn {
        &self.writer.conn
    }

    fn acquire_lock(&mut self, opts: &OpenOptions) -> Result<(), StateError> {
        let key = key_of("lock", &self.cfg.schema);
        let deadline = Instant::now() + opts.lock_timeout;
        loop {
            let got: bool = self
                .conn()
                .run("cannot take the state lock", |c| async move {
                    c.query_one("SELECT pg_try_advisory_lock($1)", &[&key])
                        .await
                        .map(|r| r.get(0))
                })?;
            if got {
                break;
            }
            if Instant::now() >= deadline {
                return Err(StateError::LockedRemote {
                    location: self.cfg.describe(),
                    holder: read_holder(self.conn(), &self.schema, key)?,
                });
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        let run_id = random_id();
        let sql = format!(
            "INSERT INTO {s}.cairn_lock AS l (lock_key, run_id, who, host, pid, command, since_ms, \
             backend_pid) VALUES ($1, $2, $3, $4, $5, $6, $7, pg_backend_pid()) \
             ON CONFLICT (lock_key) DO UPDATE SET run_id = excluded.run_id, who = excluded.who, \
             host = excluded.host, pid = excluded.pid, command = excluded.command, \
             since_ms = excluded.since_ms, backend_pid = excluded.backend_pid",
            s = self.schema
        );
        let (id, who, host, pid, command, since) = (
            run_id.clone(),
            current_user(),
            host_name(),
            std::process::id() as i32,
            opts.command.clone(),
            now_ms() as i64,
        );
        self.conn()
            .run("cannot write the lock holder record", |c| async move {
                c.execute(&sql, &[&key, &id, &who, &host, &pid, &command, &since])
                    .await
                    .map(|_| ())
            })?;
        self.lock = Some((key, run_id));
        Ok(())
    }

    /// The lineage stored ('lineage:migrated' before 'lineage'), or an empty string.
    fn stored_lineage(&self) -> Result<String, StateError> {
        let s = self.schema.clone();
        self.conn().run("cannot read the lineage", |c| async move {
            c.query_opt(
                &format!("SELECT value FROM {s}.cairn_meta WHERE key IN ('lineage', 'lineage:migrated') ORDER BY key DESC LIMIT 1"),
                &[],
            )
            .await
            .map(|r| r.map(|r| r.get(0)).unwrap_or_default())
        })
    }

    /// Inserts the lineage row `key` unless it exists (`cairn_meta` is append-only).
    fn insert_lineage(&self, key: &'static str, lineage: &str) -> Result<(), StateError> {
        let s = self.schema.clone();
        let lineage = lineage.to_string();
        self.conn().run("cannot write the lineage", |c| async move {
            c.execute(
                &format!(
                    "INSERT INTO {s}.cairn_meta (key, value) VALUES ('{key}', $1) \
                     ON CONFLICT (key) DO NOTHING"
                ),
                &[&lineage],
            )
            .await
            .map(|_| ())
        })
    }
}

impl Storage for PgStorage {
    type Bytes = Vec<u8>;

    fn location(&self) -> String {
        self.cfg.describe()
    }

    fn last_seq(&self) -> Result<u64, StateError> {
        let s = self.schema.clone();
        let last: i64 = self.conn().run("cannot read the log", |c| async move {
            c.query_one(
                &format!("SELECT coalesce(max(seq), 0) FROM {s}.cairn_events"),
                &[],
            )
            .await
            .map(|r| r.get(0))
        })?;
        Ok(last as u64)
    }

    fn scan(&self, from: u64, to: Option<u64>) -> Result<Records<'_, Vec<u8>>, StateError> {
        let s = self.schema.clone();
        let (from, to) = (
            from as i64,
            to.map_or(i64::MAX, |t| t.min(i64::MAX as u64) as i64),
        );
        let rows: Vec<(i64, Vec<u8>)> = self.conn().run("cannot read the log", |c| async move {
            c.query(
                &format!(
                    "SELECT seq, data FROM {s}.cairn_events WHERE seq >= $1 AND seq <= $2 ORDER BY seq"
                ),
                &[&from, &to],
            )
            .await
            .map(|rows| rows.iter().map(|r| (r.get(0), r.get(1))).collect())
        })?;
        Ok(Box::new(
            rows.into_iter()
                .map(|(seq, data)| Ok((Ok(seq as u64), data))),
        ))
    }

    fn put(&mut self, seq: u64, bytes: &[u8]) -> Result<(), StateError> {
        self.writer
            .shared
            .lock()
            .expect("pg shared")
            .pending
            .push((seq, bytes.to_vec()));
        Ok(())
    }

    fn put_all(&mut self, records: &[(u64, Vec<u8>)]) -> Result<(), StateError> {
        self.writer.flush()?;
        // One transaction: all of it or nothing.
        let sql = self.writer.insert_sql.clone();
        // Per chunk: its seqs, its records, and the head after it.
        type Chunk = (Vec<i64>, Vec<Vec<u8>>, Vec<u8>);
        let chunks: Vec<Chunk> = records
            .chunks(20_000)
            .map(|c| {
                let (seq, last) = c.last().expect("a chunk");
                (
                    c.iter().map(|(s, _)| *s as i64).collect(),
                    c.iter().map(|(_, d)| d.clone()).collect(),
                    Head::of(*seq, last).encode().to_vec(),
                )
            })
            .collect();
        self.conn()
            .run("cannot copy into the state log", |c| async move {
                c.batch_execute("BEGIN").await?;
                for (seqs, datas, head) in chunks {
                    if let Err(e) = c.execute(&sql, &[&seqs, &datas, &head]).await {
                        let _ = c.batch_execute("ROLLBACK").await;
                        return Err(e);
                    }
                }
                c.batch_execute("COMMIT").await
            })
    }

    fn flush(&self) -> Result<(), StateError> {
        self.writer.flush()
    }

    fn flusher(&self) -> Flusher {
        let w = self.writer.clone();
        Flusher::new(move || w.flush())
    }

    fn keeps_head(&self) -> bool {
        true
    }

    fn read_head(&self) -> Result<Option<Head>, StateError> {
        let s = self.schema.clone();
        let row: Option<Vec<u8>> = self
            .conn()
            .run("cannot read the log head", |c| async move {
                // A schema made before the head (and not upgraded by a writer yet) has no table.
                let table = format!("{s}.cairn_head");
                let exists: bool = c
                    .query_one("SELECT to_regclass($1) IS NOT NULL", &[&table])
                    .await?
                    .get(0);
                if !exists {
                    return Ok(None);
                }
                c.query_opt(&format!("SELECT head FROM {table} WHERE id = 1"), &[])
                    .await
                    .map(|r| r.map(|r| r.get(0)))
            })?;
        match row {
            None => Ok(None),
            Some(b) => Head::decode(&b)
                .map(Some)
                .ok_or_else(|| StateError::Corrupt {
                    seq: 0,
                    detail: "the log head (table cairn_head) is damaged".into(),
                }),
        }
    }

    fn reset_head(&mut self, head: Option<Head>) -> Result<(), StateError> {
        let s = self.schema.clone();
        let sql = match head {
            Some(h) => format!(
                "INSERT INTO {s}.cairn_head (id, head) VALUES (1, '\\x{}'::bytea) \
                 ON CONFLICT (id) DO UPDATE SET head = EXCLUDED.head",
                h.encode()
                    .iter()
                    .map(|b| format!("{b:02x}"))
                    .collect::<String>()
            ),
            None => format!("DELETE FROM {s}.cairn_head"),
        };
        self.conn().execute("cannot reset the log head", sql)
    }

    /// One transaction: the three tables copied as they are into
    /// `cairn_damaged_<ms>_{events,head,checkpoints}` (the copy of the events append-only as
    /// the log is), then the log's own protection lifted explicitly, for this transaction
    /// only — its append-only trigger disabled and `DELETE` granted to this role — the
    /// records after `good` deleted (they stay in the copy), the protection restored as it
    /// was, the checkpoints past `good` deleted and the head set. Other sessions never see
    /// the trigger off (catalog changes are transactional), and a failure anywhere rolls it
    /// all back. Disabling a trigger needs the role that owns the tables: a least-privilege
    /// role is refused with the reason.
    fn set_damage_aside(&mut self, good: u64, head: Option<Head>) -> Result<String, StateError> {
        let s = self.schema.clone();
        let name = format!("cairn_damaged_{}", now_ms());
        let backup = format!(
            "the tables {name}_events, {name}_head and {name}_checkpoints of {}",
            self.cfg.describe()
        );
        let head = head.map(|h| h.encode().to_vec());
        let good = good.min(i64::MAX as u64) as i64;
        let n = name.clone();
        let result = self.conn().run("cannot recover the state log", |c| async move {
            let steps = async {
                c.batch_execute("BEGIN").await?;
                let events = format!("{s}.cairn_events");
                let had_delete: bool = c
                    .query_one(
                        "SELECT has_table_privilege($1, 'DELETE')",
                        &[&events],
                    )
                    .await?
                    .get(0);
                let mut sql = format!(
                    "CREATE TABLE IF NOT EXISTS {s}.cairn_head (id integer PRIMARY KEY \
                         CHECK (id = 1), head bytea NOT NULL);
                     CREATE TABLE {s}.{n}_events AS TABLE {s}.cairn_events;
                     CREATE TABLE {s}.{n}_head AS TABLE {s}.cairn_head;
                     CREATE TABLE {s}.{n}_checkpoints AS TABLE {s}.cairn_checkpoints;
                     COMMENT ON TABLE {s}.{n}_events IS 'cairn_events as cairn state recover found it damaged';
                     CREATE TRIGGER {n}_append_only BEFORE UPDATE OR DELETE ON {s}.{n}_events
                         FOR EACH ROW EXECUTE FUNCTION {s}.cairn_append_only();
                     CREATE TRIGGER {n}_no_truncate BEFORE TRUNCATE ON {s}.{n}_events
                         FOR EACH STATEMENT EXECUTE FUNCTION {s}.cairn_append_only();
                     REVOKE UPDATE, DELETE, TRUNCATE ON {s}.{n}_events FROM PUBLIC, CURRENT_USER;
                     ALTER TABLE {events} DISABLE TRIGGER cairn_events_append_only;"
                );
                if !had_delete {
                    sql.push_str(&format!("GRANT DELETE ON {events} TO CURRENT_USER;"));
                }
                c.batch_execute(&sql).await?;
                c.execute(&format!("DELETE FROM {events} WHERE seq > $1"), &[&good])
                    .await?;
                let mut sql = String::new();
                if !had_delete {
                    sql.push_str(&format!("REVOKE DELETE ON {events} FROM CURRENT_USER;"));
                }
                sql.push_str(&format!(
                    "ALTER TABLE {events} ENABLE TRIGGER cairn_events_append_only;"
                ));
                c.batch_execute(&sql).await?;
                c.execute(
                    &format!("DELETE FROM {s}.cairn_checkpoints WHERE seq > $1"),
                    &[&good],
                )
                .await?;
                match &head {
                    Some(h) => {
                        c.execute(
                            &format!(
                                "INSERT INTO {s}.cairn_head (id, head) VALUES (1, $1) \
                                 ON CONFLICT (id) DO UPDATE SET head = EXCLUDED.head"
                            ),
                            &[h],
                        )
                        .await?
                    }
                    None => c.execute(&format!("DELETE FROM {s}.cairn_head"), &[]).await?,
                };
                c.batch_execute("COMMIT").await
            };
            let r = steps.await;
            if r.is_err() {
                let _ = c.batch_execute("ROLLBACK").await;
            }
            r
        });
        match result {
            Ok(()) => Ok(backup),
            Err(StateError::Io { context, message }) => {
                let refused =
                    message.contains("must be owner") || message.contains("permission denied");
                Err(StateError::Io {
                    context,
                    message: format!(
                        "{message}. Nothing was changed (the recovery is one transaction){}",
                        if refused {
                            ". `cairn state recover` lifts the log's append-only protection for \
                             the length of that transaction, which only the role that owns the \
                             Cairn tables (or a superuser) may do: run it with that role's \
                             connection string"
                        } else {
                            ""
                        }
                    ),
                })
            }
            Err(e) => Err(e),
        }
    }

    fn read_lineage(&self) -> Result<Option<String>, StateError> {
        let lineage = self.stored_lineage()?;
        Ok((!lineage.is_empty()).then_some(lineage))
    }

    fn create_lineage(&mut self, lineage: &str) -> Result<(), StateError> {
        self.insert_lineage("lineage", lineage)
    }

    fn replace_lineage(&mut self, lineage: &str, head: u64) -> Result<(), StateError> {
        // An empty log's lineage row was made by its first open; the log is append-only, so
        // the copied lineage goes in a row of its own that takes precedence.
        let existing = self.stored_lineage()?;
        if !existing.is_empty() && existing != lineage && head > 0 {
            return Err(StateError::Backend {
                message: "the lineage of a state with events cannot change".into(),
            });
        }
        self.insert_lineage("lineage:migrated", lineage)
    }

    fn checkpoint_seqs(&self) -> Result<Vec<u64>, StateError> {
        let s = self.schema.clone();
        self.conn().run("cannot read checkpoints", |c| async move {
            c.query(
                &format!("SELECT seq FROM {s}.cairn_checkpoints ORDER BY seq"),
                &[],
            )
            .await
            .map(|rows| rows.iter().map(|r| r.get::<_, i64>(0) as u64).collect())
        })
    }

    fn read_checkpoint(&self, seq: u64) -> Result<Result<Snapshot, String>, StateError> {
        let s = self.schema.clone();
        let data: Vec<u8> = self
            .conn()
            .run("cannot read a checkpoint", |c| async move {
                c.query_one(
                    &format!("SELECT data FROM {s}.cairn_checkpoints WHERE seq = $1"),
                    &[&(seq as i64)],
                )
                .await
                .map(|r| r.get(0))
            })?;
        Ok(checkpoint::decode(&data, self.crypt.as_deref()))
    }

    fn write_checkpoint(&mut self, snapshot: &Snapshot, keep: usize) -> Result<(), StateError> {
        let seq = snapshot.head;
        let data = checkpoint::encode(snapshot, self.crypt.as_deref())
            .map_err(|e| StateError::io("cannot encode a checkpoint", e))?;
        let s = self.schema.clone();
        let keep = keep as i64;
        self.conn()
            .run("cannot write a checkpoint", |c| async move {
                c.execute(
                    &format!(
                        "INSERT INTO {s}.cairn_checkpoints (seq, data) VALUES ($1, $2) \
                     ON CONFLICT (seq) DO NOTHING"
                    ),
                    &[&(seq as i64), &data],
                )
                .await?;
                c.execute(
                    &format!(
                        "DELETE FROM {s}.cairn_checkpoints WHERE seq NOT IN \
                     (SELECT seq FROM {s}.cairn_checkpoints ORDER BY seq DESC LIMIT $1)"
                    ),
                    &[&keep],
                )
                .await
                .map(|_| ())
            })
    }

    fn remove_checkpoint(&mut self, seq: u64) -> Result<(), StateError> {
        let s = self.schema.clone();
        self.conn()
            .run("cannot delete a checkpoint", |c| async move {
                c.execute(
                    &format!("DELETE FROM {s}.cairn_checkpoints WHERE seq = $1"),
                    &[&(seq as i64)],
                )
                .await
                .map(|_| ())
            })
    }

    fn clear_checkpoints(&mut self) -> Result<(), StateError> {
        let s = self.schema.clone();
        self.conn()
            .run("cannot delete checkpoints", |c| async move {
                c.execute(&format!("DELETE FROM {s}.cairn_checkpoints"), &[])
                    .await
                    .map(|_| ())
            })
    }
}

fn read_holder(conn: &Conn, schema: &str, key: i64) -> Result<Option<Box<LockHolder>>, StateError> {
    let sql = format!(
        "SELECT l.run_id, l.who, l.host, l.pid, l.command, l.since_ms FROM {schema}.cairn_lock l \
         WHERE l.lock_key = $1 AND l.backend_pid IN (SELECT pid FROM pg_locks \
         WHERE locktype = 'advisory' AND granted AND objsubid = 1 \
         AND classid::bigint = ($1 >> 32) & 4294967295 AND objid::bigint = $1 & 4294967295)"
    );
    conn.run("cannot read the lock holder record", |c| async move {
        c.query_opt(&sql, &[&key]).await.map(|row| {
            row.map(|r| {
                Box::new(LockHolder {
                    run_id: r.get(0),
                    who: r.get(1),
                    host: r.get(2),
                    pid: r.get::<_, i32>(3) as u32,
                    command: r.get(4),
                    since_ms: r.get::<_, i64>(5) as u64,
                })
            })
        })
    })
}

/// The workspaces whose logs live beside `cfg`'s schema: every schema `<schema>:<name>` that
/// holds a `cairn_events` table (see `workspace.rs`).
pub(crate) fn workspace_schemas(cfg: &PgConfig) -> Result<Vec<String>, StateError> {
    let conn = Conn::connect(cfg)?;
    let prefix = format!("{}:", cfg.schema);
    conn.run("cannot list the workspaces", |c| async move {
        c.query(
            "SELECT substr(table_schema, length($1) + 1) FROM information_schema.tables \
             WHERE table_name = 'cairn_events' AND left(table_schema, length($1)) = $1 \
             ORDER BY 1",
            &[&prefix],
        )
        .await
        .map(|rows| rows.iter().map(|r| r.get::<_, String>(0)).collect())
    })
}

/// Records a plan-only run (`plan_runs.rs`) in `cfg`'s schema, without the lock: its own
/// table, created on first use, keeping the newest `keep`. `Ok(false)`: no state there yet.
pub(crate) fn record_plan_run(
    cfg: &PgConfig,
    id: &str,
    bytes: &[u8],
    keep: usize,
) -> Result<bool, StateError> {
    let conn = Conn::connect(cfg)?;
    match check_schema(&conn, cfg) {
        Err(StateError::NotFound { .. }) => return Ok(false),
        r => r?,
    }
    let s = quote_ident(&cfg.schema);
    conn.execute(
        "cannot create the plan records' table",
        format!(
            "CREATE TABLE IF NOT EXISTS {s}.cairn_plan_runs (id text PRIMARY KEY, data bytea NOT NULL)"
        ),
    )?;
    let (id, bytes) = (id.to_string(), bytes.to_vec());
    conn.run("cannot record the plan", |c| async move {
        c.execute(
            &format!("INSERT INTO {s}.cairn_plan_runs (id, data) VALUES ($1, $2)"),
            &[&id, &bytes],
        )
        .await?;
        c.execute(
            &format!(
                "DELETE FROM {s}.cairn_plan_runs WHERE id IN \
                 (SELECT id FROM {s}.cairn_plan_runs ORDER BY id DESC OFFSET $1)"
            ),
            &[&(keep as i64)],
        )
        .await
        .map(|_| ())
    })?;
    Ok(true)
}

/// The plan-only runs recorded in `cfg`'s schema (none: no table yet), by id.
pub(crate) fn plan_runs(cfg: &PgConfig) -> Result<Vec<(String, Vec<u8>)>, StateError> {
    let conn = Conn::connect(cfg)?;
    let table = format!("{}.cairn_plan_runs", quote_ident(&cfg.schema));
    conn.run("cannot read the plan records", |c| async move {
        let exists: bool = c
            .query_one("SELECT to_regclass($1) IS NOT NULL", &[&table])
            .await?
            .get(0);
        if !exists {
            return Ok(Vec::new());
        }
        c.query(&format!("SELECT id, data FROM {table} ORDER BY id"), &[])
            .await
            .map(|rows| rows.iter().map(|r| (r.get(0), r.get(1))).collect())
    })
}

/// Drops a workspace's schema and its log (`cairn workspace delete`). The append-only
/// triggers refuse changes to rows, not the removal of the whole workspace.
pub(crate) fn drop_schema(cfg: &PgConfig, schema: &str) -> Result<(), StateError> {
    let conn = Conn::connect(cfg)?;
    let q = format!("DROP SCHEMA IF EXISTS {} CASCADE", quote_ident(schema));
    conn.run("cannot delete the workspace's schema", |c| async move {
        c.batch_execute(&q).await
    })
}

/// Reads the events from `from` on, at most `max` (see `store::peek_events`). A missing
/// schema is [`StateError::NotFound`].
pub fn peek_events(
    cfg: &PgConfig,
    from: u64,
    max: usize,
    crypt: Option<&crate::crypt::Encryption>,
) -> Result<Peek, StateError> {
    let conn = Conn::connect(cfg)?;
    check_schema(&conn, cfg)?;
    read_events(&conn, cfg, from, max, crypt)
}

/// [`StateError::NotFound`] unless `cfg`'s schema has the log's table.
fn check_schema(conn: &Conn, cfg: &PgConfig) -> Result<(), StateError> {
    let table = format!("{}.cairn_events", quote_ident(&cfg.schema));
    let exists: bool = conn.run("cannot read the state schema", |c| async move {
        c.query_one("SELECT to_regclass($1) IS NOT NULL", &[&table])
            .await
            .map(|r| r.get(0))
    })?;
    if !exists {
        return Err(StateError::NotFound {
            dir: PathBuf::from(cfg.describe()),
        });
    }
    Ok(())
}

fn read_events(
    conn: &Conn,
    cfg: &PgConfig,
    from: u64,
    max: usize,
    crypt: Option<&crate::crypt::Encryption>,
) -> Result<Peek, StateError> {
    let s = quote_ident(&cfg.schema);
    let from = from.max(1);
    let rows: Vec<(i64, Vec<u8>)> = conn.run("cannot read the log", |c| async move {
        c.query(
            &format!(
                "SELECT seq, data FROM {s}.cairn_events WHERE seq >= $1 ORDER BY seq LIMIT $2"
            ),
            &[&(from as i64), &(max as i64)],
        )
        .await
        .map(|rows| rows.iter().map(|r| (r.get(0), r.get(1))).collect())
    })?;
    let mut out = Vec::with_capacity(rows.len());
    for (expected, (seq, data)) in (from..).zip(rows) {
        if seq as u64 != expected {
            return Err(StateError::Corrupt {
                seq: expected,
                detail: format!("the record is missing (the next record is {seq})"),
            });
        }
        out.push(decode_record(crypt, expected, &data)?);
    }
    Ok(Peek::Events(out, Vec::new()))
}

/// A reader of a PostgreSQL log beside other commands (`cairn ui`): it keeps one connection
/// across reads (made again after an error), takes no lock and writes nothing. Appends are
/// committed transactions, so a read sees whole flushes only, and polling costs one indexed
/// query that returns nothing when nothing is new.
pub struct PgReader {
    cfg: PgConfig,
    conn: Option<Conn>,
    /// The schema was found (the log's tables are never dropped).
    found: bool,
    crypt: crate::checkpoint::Crypt,
}

impl PgReader {
    pub(crate) fn new(cfg: PgConfig, crypt: crate::checkpoint::Crypt) -> PgReader {
        PgReader {
            cfg,
            conn: None,
            found: false,
            crypt,
        }
    }

    fn with_conn<T>(
        &mut self,
        f: impl FnOnce(&Conn, &PgConfig) -> Result<T, StateError>,
    ) -> Result<T, StateError> {
        if self.conn.is_none() {
            self.conn = Some(Conn::connect(&self.cfg)?);
        }
        let conn = self.conn.as_ref().expect("connected above");
        let r = f(conn, &self.cfg);
        if matches!(r, Err(StateError::Io { .. })) {
            // A broken connection is made again at the next read.
            self.conn = None;
        }
        r
    }

    /// The events from `from` (inclusive), at most `max` (see `store::peek_events`).
    pub fn read(&mut self, from: u64, max: usize) -> Result<Peek, StateError> {
        if !self.found {
            self.with_conn(check_schema)?;
            self.found = true;
        }
        let crypt = self.crypt.clone();
        self.with_conn(|c, cfg| read_events(c, cfg, from, max, crypt.as_deref()))
    }

    /// The writer holding the state now, if one does.
    pub fn holder(&mut self) -> Result<Option<Box<LockHolder>>, StateError> {
        self.with_conn(|c, cfg| {
            let schema = quote_ident(&cfg.schema);
            read_holder(c, &schema, key_of("lock", &cfg.schema))
        })
    }
}

/// `cairn force-unlock RUN_ID`: ends the database session of the run holding the lock of
/// `cfg`'s schema, if its lock ID is `run_id`. Returns what was done.
pub fn force_unlock(cfg: &PgConfig, run_id: &str) -> Result<String, StateError> {
    let conn = Conn::connect(cfg)?;
    let schema = quote_ident(&cfg.schema);
    let key = key_of("lock", &cfg.schema);
    let holder = read_holder(&conn, &schema, key)?;
    let Some(h) = holder else {
        return Err(StateError::Backend {
            message: format!("the state in {} is not locked", cfg.describe()),
        });
    };
    if h.run_id != run_id {
        return Err(StateError::Backend {
            message: format!(
                "lock ID {run_id} does not hold the state in {}: it is held by {} on {} with \
                 lock ID {}",
                cfg.describe(),
                h.who,
                h.host,
                h.run_id
            ),
        });
    }
    let sql = format!(
        "SELECT pg_terminate_backend(backend_pid) FROM {schema}.cairn_lock WHERE lock_key = $1 \
         AND run_id = $2"
    );
    let id = run_id.to_string();
    let ended: Option<bool> = conn.run("cannot end the lock holder's session", |c| async move {
        c.query_opt(&sql, &[&key, &id])
            .await
            .map(|r| r.map(|r| r.get(0)))
    })?;
    if ended != Some(true) {
        return Err(StateError::Backend {
            message: format!(
                "the database did not end the session of lock ID {run_id} (the role may lack \
                 the right to signal it)"
            ),
        });
    }
    Ok(format!(
        "The lock {run_id} held by {} on {} (cairn {}) was released: its database session \
         was ended.",
        h.who, h.host, h.command
    ))
}

impl Drop for PgStorage {
    fn drop(&mut self) {
        if self.write {
            let _ = self.writer.flush();
        }
        if let Some((key, run_id)) = self.lock.take() {
            let sql = format!(
                "DELETE FROM {}.cairn_lock WHERE lock_key = $1 AND run_id = $2",
                self.schema
            );
            let _ = self
                .conn()
                .run("cannot release the state lock", |c| async move {
                    c.execute(&sql, &[&key, &run_id]).await?;
                    c.execute("SELECT pg_advisory_unlock($1)", &[&key])
                        .await
                        .map(|_| ())
                });
        }
    }
}
