//! A stack's run history (`cairn stack history`): each `stack plan`, `stack apply` and
//! `stack destroy` (and a fleet's shared run) is one *stack run*, recorded as entries
//! appended under its id — its start, each round (or each work item a runner finished), its
//! end — so a run that crashed has no end entry and shows as unfinished, and several runners
//! of one fleet run append to the same record without coordinating. Entries are opaque bytes
//! here (the engine writes JSON, sealed with the state's encryption when it has one); they
//! are never changed or deleted.
//!
//! Where they live, in the stack's backend (its state root's `backend.json`), so every
//! machine sees them: sled — one file per entry, `<state root>/stack-runs/<run>/<entry>`,
//! written to a temporary file, synced, and linked into place (a link never replaces a file);
//! PostgreSQL — the table `cairn_stack_history` of the stack's schema, beside the fleet's
//! tables, append-only by trigger as the log is; S3 — one object per entry under
//! `<key>.cairn/stack-runs/<run>/<entry>`, created with `If-None-Match: *`.

use crate::backend_config::{PgConfig, S3Config};
use crate::pg_store::{key_of, quote_ident, Conn};
use crate::store::{configured, Remote};
use crate::StateError;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// One stored entry: its run, its own id (ordered by time within the run) and its bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    pub run: String,
    pub id: String,
    pub bytes: Vec<u8>,
}

/// An id (a run's or an entry's) is a file or object name: letters, digits, `-` and `_`.
pub fn valid_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 100
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// A new entry (or run) id made at `ms` by this process: `<ms, 13 digits>-<counter>-<pid>-<random>`,
/// ordered by time, and within one process by the order they were made.
pub fn new_id(ms: u64) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    use rand::RngCore;
    let n = COUNTER.fetch_add(1, Ordering::SeqCst);
    let r = rand::rngs::OsRng.next_u32() & 0xffff;
    format!("{ms:013}-{n:06}-{}-{r:04x}", std::process::id())
}

fn io(what: &str, e: impl std::fmt::Display) -> StateError {
    StateError::Backend {
        message: format!("cannot {what}: {e}"),
    }
}

/// Appends entry `id` of stack run `run` to the history of the stack whose state root is
/// `root`. Durable when it returns.
pub fn append(root: &Path, run: &str, id: &str, bytes: &[u8]) -> Result<(), StateError> {
    Writer::new(root).append(run, id, bytes)
}

/// Appends the entries of a stack's runs (the stack whose state root is `root`), keeping on
/// PostgreSQL one connection for all of them — a fleet's runner lends the one it holds
/// ([`crate::pg_fleet::Fleet::history_writer`]) — and knowing, after the first, that the
/// table is there: a stack run records each component run as it begins, so a connection per
/// entry would cost a connection (and a runtime thread) per component run.
pub struct Writer {
    root: PathBuf,
    /// The connection, once opened or lent, and whether the table is known to exist.
    pg: Mutex<Option<(Arc<Conn>, bool)>>,
}

impl Writer {
    pub fn new(root: &Path) -> Writer {
        Writer {
            root: root.to_path_buf(),
            pg: Mutex::new(None),
        }
    }

    /// One that appends over `conn` (autocommit, not in a transaction) on PostgreSQL.
    pub(crate) fn with_conn(root: &Path, conn: Arc<Conn>) -> Writer {
        Writer {
            root: root.to_path_buf(),
            pg: Mutex::new(Some((conn, false))),
        }
    }

    /// Appends entry `id` of stack run `run`. Durable when it returns.
    pub fn append(&self, run: &str, id: &str, bytes: &[u8]) -> Result<(), StateError> {
        if !valid_id(run) || !valid_id(id) {
            return Err(io("record the stack run", format!("bad id {run:?}/{id:?}")));
        }
        match configured(&self.root)? {
            None => append_local(&self.root, run, id, bytes),
            Some(Remote::Pg(pg)) => self.append_pg(&pg, run, id, bytes),
            Some(Remote::S3(s3)) => append_s3(&s3, run, id, bytes),
        }
    }

    fn append_pg(
        &self,
        cfg: &PgConfig,
        run: &str,
        id: &str,
        bytes: &[u8],
    ) -> Result<(), StateError> {
        let mut kept = self.pg.lock().unwrap_or_else(|e| e.into_inner());
        let fresh = kept.is_none();
        let (conn, ready) = match kept.take() {
            Some(k) => k,
            None => (Arc::new(Conn::connect(cfg)?), false),
        };
        match append_pg(&conn, cfg, ready, run, id, bytes) {
            Ok(()) => {
                *kept = Some((conn, true));
                Ok(())
            }
            // A kept connection the server closed since is replaced, once.
            Err(_) if !fresh => {
                let conn = Arc::new(Conn::connect(cfg)?);
                append_pg(&conn, cfg, false, run, id, bytes)?;
                *kept = Some((conn, true));
                Ok(())
            }
            Err(e) => Err(e),
        }
    }
}

/// Every entry of the stack's history (only run `run`'s, when given), by run and entry id.
pub fn list(root: &Path, run: Option<&str>) -> Result<Vec<Entry>, StateError> {
    if run.is_some_and(|r| !valid_id(r)) {
        return Ok(Vec::new());
    }
    let mut out = match configured(root)? {
        None => list_local(root, run)?,
        Some(Remote::Pg(pg)) => list_pg(&pg, run)?,
        Some(Remote::S3(s3)) => list_s3(&s3, run)?,
    };
    out.sort_by(|a, b| (&a.run, &a.id).cmp(&(&b.run, &b.id)));
    Ok(out)
}

/// A stamp that changes when the local history does (the directory's modification time and
/// run count), for a reader that polls; `None` on a remote store (ask [`list`]).
pub fn local_stamp(root: &Path) -> Option<(Option<std::time::SystemTime>, usize)> {
    if configured(root).ok()?.is_some() {
        return None;
    }
    let dir = root.join("stack-runs");
    let mut newest = std::fs::metadata(&dir).and_then(|m| m.modified()).ok();
    let mut count = 0;
    for e in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
        count += 1;
        let m = e.metadata().and_then(|m| m.modified()).ok();
        if m > newest {
            newest = m;
        }
    }
    Some((newest, count))
}

fn append_local(root: &Path, run: &str, id: &str, bytes: &[u8]) -> Result<(), StateError> {
    use std::io::Write;
    let dir = root.join("stack-runs").join(run);
    std::fs::create_dir_all(&dir).map_err(|e| io(&format!("create {}", dir.display()), e))?;
    let tmp = dir.join(format!(".{id}.tmp"));
    let target = dir.join(id);
    let write = || -> std::io::Result<()> {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        // A link never replaces a file: an entry, once there, stays as it was written.
        std::fs::hard_link(&tmp, &target)?;
        std::fs::remove_file(&tmp)?;
        std::fs::File::open(&dir)?.sync_all()?;
        if let Some(parent) = dir.parent() {
            std::fs::File::open(parent)?.sync_all()?;
        }
        Ok(())
    };
    write().map_err(|e| io(&format!("write {}", target.display()), e))
}

fn list_local(root: &Path, run: Option<&str>) -> Result<Vec<Entry>, StateError> {
    let base = root.join("stack-runs");
    let runs: Vec<String> = match run {
        Some(r) => vec![r.to_string()],
        None => match std::fs::read_dir(&base) {
            Ok(d) => d
                .flatten()
                .filter_map(|e| e.file_name().to_str().map(str::to_string))
                .filter(|n| valid_id(n))
                .collect(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(io(&format!("read {}", base.display()), e)),
        },
    };
    let mut out = Vec::new();
    for r in runs {
        let dir = base.join(&r);
        let entries = match std::fs::read_dir(&dir) {
            Ok(d) => d,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(io(&format!("read {}", dir.display()), e)),
        };
        for e in entries.flatten() {
            let Some(name) = e.file_name().to_str().map(str::to_string) else {
                continue;
            };
            if !valid_id(&name) {
                continue;
            }
            let bytes = std::fs::read(e.path())
                .map_err(|err| io(&format!("read {}", e.path().display()), err))?;
            out.push(Entry {
                run: r.clone(),
                id: name,
                bytes,
            });
        }
    }
    Ok(out)
}

fn history_table(cfg: &PgConfig) -> String {
    format!("{}.cairn_stack_history", quote_ident(&cfg.schema))
}

/// Appends over `conn`; `ready`: the table is known to exist (else looked for, and made).
fn append_pg(
    conn: &Conn,
    cfg: &PgConfig,
    ready: bool,
    run: &str,
    id: &str,
    bytes: &[u8],
) -> Result<(), StateError> {
    let table = history_table(cfg);
    let probe = table.clone();
    let exists: bool = ready
        || conn.run("cannot read the stack's schema", |c| async move {
            c.query_one("SELECT to_regclass($1) IS NOT NULL", &[&probe])
                .await
                .map(|r| r.get(0))
        })?;
    if !exists {
        if cfg.skip_table_creation {
            return Err(StateError::Backend {
                message: format!(
                    "{} has no table cairn_stack_history and skip_table_creation is set; \
                     create it as the README's \"Stack runs\" shows",
                    cfg.describe()
                ),
            });
        }
        let s = quote_ident(&cfg.schema);
        let mut setup = format!(
            "BEGIN; SELECT pg_advisory_xact_lock({});",
            key_of("setup", &cfg.schema)
        );
        if !cfg.skip_schema_creation {
            setup.push_str(&format!("CREATE SCHEMA IF NOT EXISTS {s};"));
        }
        setup.push_str(&format!(
            r#"
CREATE TABLE IF NOT EXISTS {table} (
    run_id text NOT NULL, entry_id text NOT NULL, data bytea NOT NULL,
    PRIMARY KEY (run_id, entry_id));
CREATE OR REPLACE FUNCTION {s}.cairn_stack_history_append_only() RETURNS trigger
    LANGUAGE plpgsql AS $f$
BEGIN
    RAISE EXCEPTION 'the stack run history is append-only: % on %.% is refused',
        TG_OP, TG_TABLE_SCHEMA, TG_TABLE_NAME USING ERRCODE = 'insufficient_privilege';
END $f$;
CREATE OR REPLACE TRIGGER cairn_stack_history_append_only BEFORE UPDATE OR DELETE ON {table}
    FOR EACH ROW EXECUTE FUNCTION {s}.cairn_stack_history_append_only();
CREATE OR REPLACE TRIGGER cairn_stack_history_no_truncate BEFORE TRUNCATE ON {table}
    FOR EACH STATEMENT EXECUTE FUNCTION {s}.cairn_stack_history_append_only();
COMMIT;"#
        ));
        conn.execute("cannot create the stack run history's table", setup)?;
    }
    let (run, id, bytes) = (run.to_string(), id.to_string(), bytes.to_vec());
    conn.run("cannot record the stack run", |c| async move {
        c.execute(
            &format!("INSERT INTO {table} (run_id, entry_id, data) VALUES ($1, $2, $3)"),
            &[&run, &id, &bytes],
        )
        .await
        .map(|_| ())
    })
}

fn list_pg(cfg: &PgConfig, run: Option<&str>) -> Result<Vec<Entry>, StateError> {
    let conn = Conn::connect(cfg)?;
    let table = history_table(cfg);
    let run = run.map(str::to_string);
    conn.run("cannot read the stack run history", |c| async move {
        let exists: bool = c
            .query_one("SELECT to_regclass($1) IS NOT NULL", &[&table])
            .await?
            .get(0);
        if !exists {
            return Ok(Vec::new());
        }
        let rows = match &run {
            Some(r) => {
                c.query(
                    &format!(
                        "SELECT run_id, entry_id, data FROM {table} WHERE run_id = $1 \
                         ORDER BY entry_id"
                    ),
                    &[r],
                )
                .await?
            }
            None => {
                c.query(
                    &format!(
                        "SELECT run_id, entry_id, data FROM {table} ORDER BY run_id, entry_id"
                    ),
                    &[],
                )
                .await?
            }
        };
        Ok(rows
            .iter()
            .map(|r| Entry {
                run: r.get(0),
                id: r.get(1),
                bytes: r.get(2),
            })
            .collect())
    })
}

fn s3_prefix(cfg: &S3Config) -> String {
    format!("{}.cairn/stack-runs/", cfg.state_key())
}

fn append_s3(cfg: &S3Config, run: &str, id: &str, bytes: &[u8]) -> Result<(), StateError> {
    let client = crate::s3_store::Client::new(cfg)?;
    let key = format!("{}{run}/{id}", s3_prefix(cfg));
    if client.put(&key, bytes.to_vec(), true)? {
        Ok(())
    } else {
        Err(io(
            "record the stack run",
            format!("{key} exists already (entries are never replaced)"),
        ))
    }
}

fn list_s3(cfg: &S3Config, run: Option<&str>) -> Result<Vec<Entry>, StateError> {
    let client = crate::s3_store::Client::new(cfg)?;
    let base = s3_prefix(cfg);
    let prefix = match run {
        Some(r) => format!("{base}{r}/"),
        None => base.clone(),
    };
    let mut out = Vec::new();
    for k in client.list(&prefix, None)? {
        let Some((r, id)) = k[base.len()..].split_once('/') else {
            continue;
        };
        if !valid_id(r) || !valid_id(id) {
            continue;
        }
        if let Some(bytes) = client.get(&k)? {
            out.push(Entry {
                run: r.to_string(),
                id: id.to_string(),
                bytes,
            });
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_entries_are_appended_listed_in_order_and_never_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let run = new_id(1);
        let (a, b) = (new_id(5), new_id(5));
        assert!(a < b, "{a} {b}");
        append(root, &run, &b, b"two").unwrap();
        append(root, &run, &a, b"one").unwrap();
        append(root, "other", &new_id(2), b"x").unwrap();
        assert!(append(root, &run, &a, b"again").is_err());
        assert!(append(root, "../x", &a, b"bad").is_err());
        let all = list(root, Some(&run)).unwrap();
        let bodies: Vec<&[u8]> = all.iter().map(|e| e.bytes.as_slice()).collect();
        assert_eq!(bodies, vec![b"one".as_slice(), b"two".as_slice()]);
        assert_eq!(list(root, None).unwrap().len(), 3);
        assert!(list(root, Some("nope")).unwrap().is_empty());
    }
}
