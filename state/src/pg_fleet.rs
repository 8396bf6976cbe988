//! A stack's runner fleet on PostgreSQL (`cairn stack apply -runner`): several runners, on
//! as many machines, share one *stack run* through the database — no coordination service
//! besides PostgreSQL. Tables, in the stack's schema (the one its backend names):
//!
//! ```text
//! cairn_stack_runs    (run_id, fingerprint, status, started_ms, ended_ms, started_by)
//! cairn_stack_work    (run_id, item, deployment, component, key, removed, status,
//!                      runner, message, finished_ms)            one row per work item
//! cairn_stack_claims  (run_id, item, runner, claimed_ms)        who took what, when
//! ```
//!
//! **Joining.** Under a transaction-scoped advisory lock, a runner finds the run whose
//! status is `running`: with the same fingerprint (the stack's configuration and deployment
//! filter) it joins it; with another, it is refused while a member is alive, and otherwise
//! marks it `abandoned` and starts a new run with its own work items. Every member holds a
//! session-level *shared* advisory lock on the run for as long as it lives; an exclusive
//! try-lock that succeeds proves no member is left.
//!
//! **Claiming.** A work item is claimed in a transaction of its own connection, held for the
//! whole time the item is worked on: `SELECT … FOR UPDATE SKIP LOCKED` on a `pending` row
//! (another runner's claim is skipped, not waited for), and `UPDATE … status` + `COMMIT`
//! when it is finished. A runner that dies (SIGKILL, a lost machine) loses its session: the
//! transaction is rolled back, the row is `pending` again and unlocked, and the next runner
//! that looks takes it over. The claims log is written outside the transaction (autocommit),
//! so a takeover can say whose work it continues.

use crate::backend_config::PgConfig;
use crate::error::StateError;
use crate::log::now_ms;
use crate::pg_store::{host_name, key_of, quote_ident, random_id, Conn};
use std::sync::{Arc, Mutex};

/// Connections of finished claims and of claim attempts that found the row taken, kept for
/// the next claim (a runner polls for work: one connection each time would be wasteful).
type Pool = Arc<Mutex<Vec<Conn>>>;

/// One unit of work of a stack run: a component of a deployment (every instance of it), or
/// an instance to destroy whose component the configuration no longer declares.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkItem {
    /// A unique name of the item within the run.
    pub item: String,
    pub deployment: String,
    pub component: String,
    pub key: Option<String>,
    pub removed: bool,
}

/// A work item's row: the item and where it stands.
#[derive(Clone, Debug)]
pub struct WorkRow {
    pub item: WorkItem,
    /// `pending`, `done`, `failed` or `blocked`.
    pub status: String,
    /// The runner that finished it.
    pub runner: Option<String>,
    pub message: Option<String>,
}

impl WorkRow {
    /// Whether nothing more happens to it in this run.
    pub fn is_final(&self) -> bool {
        self.status != "pending"
    }
}

/// A runner's membership of a stack run (its own connection, holding the member lock).
pub struct Fleet {
    cfg: PgConfig,
    /// Autocommit once joined: it also carries the run history's entries (`history_writer`).
    conn: Arc<Conn>,
    schema: String,
    pub run_id: String,
    /// This runner's name: `HOST:PID:RANDOM`.
    pub runner: String,
    /// Whether this runner started the run (else it joined one).
    pub started: bool,
    /// A run of another configuration this runner found with no member left and abandoned.
    pub abandoned: Option<String>,
    idle: Pool,
}

fn tables_sql(s: &str) -> String {
    format!(
        r#"
CREATE TABLE IF NOT EXISTS {s}.cairn_stack_runs (
    run_id text PRIMARY KEY, fingerprint text NOT NULL, status text NOT NULL,
    started_ms bigint NOT NULL, ended_ms bigint, started_by text NOT NULL);
CREATE TABLE IF NOT EXISTS {s}.cairn_stack_work (
    run_id text NOT NULL, item text NOT NULL, deployment text NOT NULL, component text NOT NULL,
    key text, removed boolean NOT NULL, status text NOT NULL, runner text, message text,
    finished_ms bigint, PRIMARY KEY (run_id, item));
CREATE TABLE IF NOT EXISTS {s}.cairn_stack_claims (
    run_id text NOT NULL, item text NOT NULL, runner text NOT NULL, claimed_ms bigint NOT NULL);
"#
    )
}

/// The member lock of a run: shared by its live runners.
fn member_key(run_id: &str) -> i64 {
    key_of("stack-run-member", run_id)
}

impl Fleet {
    /// Joins the stack run in `cfg`'s schema whose configuration is `fingerprint`, or starts
    /// one with `items` (see the module docs). The returned membership lasts until dropped.
    pub fn join(
        cfg: &PgConfig,
        fingerprint: &str,
        items: &[WorkItem],
    ) -> Result<Fleet, StateError> {
        let conn = Conn::connect(cfg)?;
        let s = quote_ident(&cfg.schema);
        let runner = format!(
            "{}:{}:{}",
            host_name(),
            std::process::id(),
            &random_id()[..8]
        );
        let table = format!("{s}.cairn_stack_claims");
        let exists: bool = conn.run("cannot read the stack's schema", |c| async move {
            c.query_one("SELECT to_regclass($1) IS NOT NULL", &[&table])
                .await
                .map(|r| r.get(0))
        })?;
        if !exists {
            if cfg.skip_table_creation {
                return Err(StateError::Backend {
                    message: format!(
                        "{} has no stack run tables and skip_table_creation is set; create \
                         them as the README's \"A fleet of runners\" shows",
                        cfg.describe()
                    ),
                });
            }
            let mut setup = format!(
                "BEGIN; SELECT pg_advisory_xact_lock({});",
                key_of("setup", &cfg.schema)
            );
            if !cfg.skip_schema_creation {
                setup.push_str(&format!("CREATE SCHEMA IF NOT EXISTS {s};"));
            }
            setup.push_str(&tables_sql(&s));
            setup.push_str("COMMIT;");
            conn.execute(
                &format!("cannot create the stack run tables in {}", cfg.describe()),
                setup,
            )?;
        }
        conn.execute(
            "cannot start the stack run transaction",
            format!(
                "BEGIN; SELECT pg_advisory_xact_lock({});",
                key_of("stack-runs", &cfg.schema)
            ),
        )?;
        let joined = Self::join_locked(&conn, &s, fingerprint, items, &runner);
        let (run_id, started, abandoned) = match joined {
            Ok(x) => x,
            Err(e) => {
                let _ = conn.execute("cannot end the transaction", "ROLLBACK".into());
                return Err(e);
            }
        };
        conn.execute(
            "cannot join the stack run",
            format!(
                "SELECT pg_advisory_lock_shared({}); COMMIT;",
                member_key(&run_id)
            ),
        )?;
        Ok(Fleet {
            cfg: cfg.clone(),
            conn: Arc::new(conn),
            schema: s,
            run_id,
            runner,
            started,
            abandoned,
            idle: Pool::default(),
        })
    }

    /// Inside the join transaction: the run to join, whether this runner starts it, and the
    /// run it abandoned.
    fn join_locked(
        conn: &Conn,
        s: &str,
        fingerprint: &str,
        items: &[WorkItem],
        runner: &str,
    ) -> Result<(String, bool, Option<String>), StateError> {
        let sql = format!(
            "SELECT r.run_id, r.fingerprint, r.started_by, \
             EXISTS (SELECT 1 FROM {s}.cairn_stack_work w WHERE w.run_id = r.run_id \
             AND w.status = 'pending') FROM {s}.cairn_stack_runs r WHERE r.status = 'running' \
             ORDER BY r.started_ms DESC"
        );
        let open: Vec<(String, String, String, bool)> =
            conn.run("cannot read the stack runs", |c| async move {
                c.query(&sql, &[]).await.map(|rows| {
                    rows.iter()
                        .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3)))
                        .collect()
                })
            })?;
        let mut abandoned = None;
        for (run_id, fp, started_by, pending) in open {
            let key = member_key(&run_id);
            let alive: bool = conn.run("cannot read the stack run's members", |c| async move {
                let got: bool = c
                    .query_one("SELECT pg_try_advisory_lock($1)", &[&key])
                    .await?
                    .get(0);
                if got {
                    c.execute("SELECT pg_advisory_unlock($1)", &[&key]).await?;
                }
                Ok(!got)
            })?;
            if fp == fingerprint && pending {
                return Ok((run_id, false, None));
            }
            if fp != fingerprint && alive && pending {
                return Err(StateError::Backend {
                    message: format!(
                        "stack run {run_id}, started by runner {started_by}, is still running \
                         with another configuration (other stack files, another \
                         -deployment, or an apply where it destroys): a runner joins only a \
                         run of the same configuration. Wait for it to end, or run this runner \
                         with the same files and command"
                    ),
                });
            }
            // Finished but not closed (its last runner stopped first), or abandoned.
            let status = if !pending {
                "ended"
            } else {
                abandoned = Some(run_id.clone());
                "abandoned"
            };
            let sql = format!(
                "UPDATE {s}.cairn_stack_runs SET status = $2, ended_ms = $3 WHERE run_id = $1"
            );
            let now = now_ms() as i64;
            conn.run("cannot close a stack run", |c| async move {
                c.execute(&sql, &[&run_id, &status, &now]).await.map(|_| ())
            })?;
        }
        let run_id = random_id();
        let sql = format!(
            "INSERT INTO {s}.cairn_stack_runs (run_id, fingerprint, status, started_ms, started_by) \
             VALUES ($1, $2, 'running', $3, $4)"
        );
        let (id, fp, now, by) = (
            run_id.clone(),
            fingerprint.to_string(),
            now_ms() as i64,
            runner.to_string(),
        );
        conn.run("cannot start a stack run", |c| async move {
            c.execute(&sql, &[&id, &fp, &now, &by]).await.map(|_| ())
        })?;
        let sql = format!(
            "INSERT INTO {s}.cairn_stack_work (run_id, item, deployment, component, key, removed, \
             status) SELECT $1, * , 'pending' FROM unnest($2::text[], $3::text[], $4::text[], \
             $5::text[], $6::boolean[])"
        );
        let id = run_id.clone();
        let cols = (
            items.iter().map(|i| i.item.clone()).collect::<Vec<_>>(),
            items
                .iter()
                .map(|i| i.deployment.clone())
                .collect::<Vec<_>>(),
            items
                .iter()
                .map(|i| i.component.clone())
                .collect::<Vec<_>>(),
            items.iter().map(|i| i.key.clone()).collect::<Vec<_>>(),
            items.iter().map(|i| i.removed).collect::<Vec<_>>(),
        );
        conn.run("cannot write the stack run's work", |c| async move {
            c.execute(&sql, &[&id, &cols.0, &cols.1, &cols.2, &cols.3, &cols.4])
                .await
                .map(|_| ())
        })?;
        Ok((run_id, true, abandoned))
    }

    /// What appends this runner's entries to the history of the stack whose state root is
    /// `root` (`stack_runs`): over the runner's own connection, not one per entry.
    pub fn history_writer(&self, root: &std::path::Path) -> crate::stack_runs::Writer {
        crate::stack_runs::Writer::with_conn(root, self.conn.clone())
    }

    /// Every work item of the run and where it stands.
    pub fn rows(&self) -> Result<Vec<WorkRow>, StateError> {
        let sql = format!(
            "SELECT item, deployment, component, key, removed, status, runner, message \
             FROM {}.cairn_stack_work WHERE run_id = $1 ORDER BY item",
            self.schema
        );
        let id = self.run_id.clone();
        self.conn
            .run("cannot read the stack run's work", |c| async move {
                c.query(&sql, &[&id]).await.map(|rows| {
                    rows.iter()
                        .map(|r| WorkRow {
                            item: WorkItem {
                                item: r.get(0),
                                deployment: r.get(1),
                                component: r.get(2),
                                key: r.get(3),
                                removed: r.get(4),
                            },
                            status: r.get(5),
                            runner: r.get(6),
                            message: r.get(7),
                        })
                        .collect()
                })
            })
    }

    /// Claims `item` if it is pending and no other runner holds it: `None` otherwise. The
    /// claim holds the row lock until [`Claim::finish`] (or until it is dropped, or this
    /// process dies: the row is pending again). Also returns the runners that claimed it
    /// before in this run (a takeover).
    pub fn claim(&self, item: &str) -> Result<Option<Claim>, StateError> {
        let pooled = self.idle.lock().expect("claim pool").pop();
        // A kept connection the server closed since is replaced.
        let conn = match pooled {
            Some(c) if c.execute("cannot start a claim", "BEGIN".into()).is_ok() => c,
            _ => {
                let c = Conn::connect(&self.cfg)?;
                c.execute("cannot start a claim", "BEGIN".into())?;
                c
            }
        };
        let sql = format!(
            "SELECT status FROM {}.cairn_stack_work WHERE run_id = $1 AND item = $2 \
             AND status = 'pending' FOR UPDATE SKIP LOCKED",
            self.schema
        );
        let (id, it) = (self.run_id.clone(), item.to_string());
        let got = conn.run("cannot claim a work item", |c| async move {
            c.query_opt(&sql, &[&id, &it]).await.map(|r| r.is_some())
        })?;
        if !got {
            if conn
                .execute("cannot end a claim", "ROLLBACK".into())
                .is_ok()
            {
                self.idle.lock().expect("claim pool").push(conn);
            }
            return Ok(None);
        }
        let sql = format!(
            "SELECT DISTINCT runner FROM {s}.cairn_stack_claims WHERE run_id = $1 AND item = $2 \
             AND runner <> $3",
            s = self.schema
        );
        let (id, it, me) = (self.run_id.clone(), item.to_string(), self.runner.clone());
        let before: Vec<String> = self.conn.run("cannot read the claims", |c| async move {
            c.query(&sql, &[&id, &it, &me])
                .await
                .map(|rows| rows.iter().map(|r| r.get(0)).collect())
        })?;
        let sql = format!(
            "INSERT INTO {}.cairn_stack_claims (run_id, item, runner, claimed_ms) \
             VALUES ($1, $2, $3, $4)",
            self.schema
        );
        let (id, it, me, now) = (
            self.run_id.clone(),
            item.to_string(),
            self.runner.clone(),
            now_ms() as i64,
        );
        self.conn.run("cannot record a claim", |c| async move {
            c.execute(&sql, &[&id, &it, &me, &now]).await.map(|_| ())
        })?;
        Ok(Some(Claim {
            conn,
            pool: self.idle.clone(),
            schema: self.schema.clone(),
            run_id: self.run_id.clone(),
            item: item.to_string(),
            runner: self.runner.clone(),
            before,
        }))
    }

    /// Closes the run (`done` or `failed`) once every item is final; a no-op when another
    /// runner closed it first.
    pub fn close(&self, status: &str) -> Result<(), StateError> {
        let sql = format!(
            "UPDATE {}.cairn_stack_runs SET status = $2, ended_ms = $3 WHERE run_id = $1 \
             AND status = 'running'",
            self.schema
        );
        let (id, st, now) = (self.run_id.clone(), status.to_string(), now_ms() as i64);
        self.conn.run("cannot close the stack run", |c| async move {
            c.execute(&sql, &[&id, &st, &now]).await.map(|_| ())
        })
    }

    /// How many runners claimed work in this run, by name.
    pub fn claims(&self) -> Result<Vec<(String, String)>, StateError> {
        let sql = format!(
            "SELECT item, runner FROM {}.cairn_stack_claims WHERE run_id = $1 ORDER BY claimed_ms",
            self.schema
        );
        let id = self.run_id.clone();
        self.conn.run("cannot read the claims", |c| async move {
            c.query(&sql, &[&id])
                .await
                .map(|rows| rows.iter().map(|r| (r.get(0), r.get(1))).collect())
        })
    }
}

/// A work item held by this runner (its row locked in an open transaction).
pub struct Claim {
    conn: Conn,
    pool: Pool,
    schema: String,
    run_id: String,
    pub item: String,
    runner: String,
    /// The runners that claimed it before in this run (and stopped before finishing it).
    pub before: Vec<String>,
}

impl Claim {
    /// Records the item's outcome (`done`, `failed` or `blocked`) and commits: the row lock
    /// is released with it.
    pub fn finish(self, status: &str, message: Option<&str>) -> Result<(), StateError> {
        let sql = format!(
            "UPDATE {}.cairn_stack_work SET status = $3, runner = $4, message = $5, \
             finished_ms = $6 WHERE run_id = $1 AND item = $2",
            self.schema
        );
        let (id, it, st, me, msg, now) = (
            self.run_id.clone(),
            self.item.clone(),
            status.to_string(),
            self.runner.clone(),
            message.map(str::to_string),
            now_ms() as i64,
        );
        self.conn
            .run("cannot record a work item's outcome", |c| async move {
                c.execute(&sql, &[&id, &it, &st, &me, &msg, &now])
                    .await
                    .map(|_| ())
            })?;
        self.conn
            .execute("cannot commit a work item's outcome", "COMMIT".into())?;
        self.pool.lock().expect("claim pool").push(self.conn);
        Ok(())
    }

    /// Gives the item back (rolled back: pending again for any runner).
    pub fn release(self) {
        if self
            .conn
            .execute("cannot end a claim", "ROLLBACK".into())
            .is_ok()
        {
            self.pool.lock().expect("claim pool").push(self.conn);
        }
    }
}
