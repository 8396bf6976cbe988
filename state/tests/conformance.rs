//! The conformance suite of [`EventLog`]: every test runs on the sled log, on PostgreSQL
//! (a real server, `support/pgserver.rs`) and on S3 (moto's server, `support/s3server.rs`),
//! through `Store::open` of a state directory, so it
//! also checks that the directory's `backend.json` picks the store. Then tests of what only
//! the PostgreSQL store has: append-only enforcement, the least-privilege role, locking
//! across sessions, `force-unlock`, the fault journal, secrets kept out of errors.

mod support {
    pub mod pgserver;
    pub mod s3server;
}

use cairn_state::backend_config::{write_backend, Backend, PgSettings, S3Settings};
use cairn_state::{
    EventBody, OpAction, OpenOptions, ProviderInstance, ProviderRef, ResourceObject, RunOutcome,
    RunSummary, Snapshot, StateError, Store, StoredValue,
};
use std::path::Path;
use std::time::{Duration, Instant};
use support::{pgserver, s3server};

/// A state directory for one test on one store.
struct Env {
    dir: tempfile::TempDir,
    name: &'static str,
    backend: Option<Backend>,
}

impl Env {
    fn sled() -> Env {
        Env {
            dir: tempfile::tempdir().unwrap(),
            name: "sled",
            backend: None,
        }
    }

    /// A fresh bucket on the S3 server (moto's).
    fn s3(tag: &str) -> Option<Env> {
        let server = s3server::shared()?;
        let bucket = s3server::bucket_name(tag);
        server.bucket(&bucket);
        let mut settings = S3Settings::default();
        for (k, v) in [
            ("bucket", bucket),
            ("key", "conformance/terraform.tfstate".to_string()),
            ("region", s3server::REGION.to_string()),
            ("endpoint", server.endpoint()),
            ("use_path_style", "true".to_string()),
            ("access_key", s3server::ACCESS_KEY.to_string()),
            ("secret_key", s3server::SECRET_KEY.to_string()),
        ] {
            settings.set(k, &v).unwrap();
        }
        let env = Env {
            dir: tempfile::tempdir().unwrap(),
            name: "s3",
            backend: Some(Backend::S3(settings)),
        };
        env.configure(env.dir.path());
        Some(env)
    }

    fn pg(tag: &str) -> Option<Env> {
        let server = pgserver::shared()?;
        let env = Env {
            dir: tempfile::tempdir().unwrap(),
            name: "pg",
            backend: Some(Backend::Pg(PgSettings {
                conn_str: Some(server.conn_str()),
                schema_name: Some(pgserver::schema(tag)),
                ..Default::default()
            })),
        };
        env.configure(env.dir.path());
        Some(env)
    }

    /// The PostgreSQL schema of a `pg` environment.
    fn pg_schema(&self) -> String {
        match &self.backend {
            Some(Backend::Pg(p)) => p.schema_name.clone().expect("a schema"),
            _ => panic!("not a pg environment"),
        }
    }

    /// Makes `dir` name the same PostgreSQL schema or S3 key (a second working copy).
    fn configure(&self, dir: &Path) {
        if let Some(b) = &self.backend {
            write_backend(dir, b).unwrap();
        }
    }

    fn open(&self, write: bool) -> Result<Store, StateError> {
        Store::open(self.dir.path(), &opts("apply", write)).map(|(s, _)| s)
    }

    fn writer(&self) -> Store {
        self.open(true)
            .unwrap_or_else(|e| panic!("{}: {e}", self.name))
    }
}

fn opts(command: &str, write: bool) -> OpenOptions {
    OpenOptions {
        command: command.into(),
        lock_timeout: Duration::ZERO,
        write,
        skip_lock: false,
        encryption: None,
    }
}

/// Runs `test` on every store: sled, PostgreSQL and S3.
fn both(tag: &str, test: impl Fn(&Env)) {
    test(&Env::sled());
    if let Some(env) = Env::pg(tag) {
        test(&env);
    }
    if let Some(env) = Env::s3(tag) {
        test(&env);
    }
}

fn provider() -> ProviderRef {
    ProviderRef::new("provider[\"sim\"]".parse().unwrap(), "p".into())
}

/// Registers the provider and creates instance `n` (three events: started, succeeded, and
/// the provider before the first).
fn create(store: &mut Store, n: u64) {
    if store.snapshot().providers.is_empty() {
        store
            .append(EventBody::ProviderRegistered {
                instance: ProviderInstance {
                    addr: "provider[\"sim\"]".parse().unwrap(),
                    id: "p".into(),
                    config: StoredValue::Null,
                    is_default: true,
                },
            })
            .unwrap();
    }
    let op = store
        .append(EventBody::OperationStarted {
            addr: format!("sim_thing.a[{n}]").parse().unwrap(),
            deposed: None,
            action: OpAction::Create,
            token: Some(format!("t{n}")),
            provider: provider(),
            prior: None,
        })
        .unwrap();
    store
        .append(EventBody::OperationSucceeded {
            op,
            object: Some(ResourceObject {
                attrs: StoredValue::String(format!("v{n}")),
                deps: vec![],
                provider: provider(),
                create_token: None,
                tainted: false,
                meta: Default::default(),
            }),
        })
        .unwrap();
}

#[test]
fn an_empty_state_reads_as_not_found_and_a_writer_creates_it() {
    both("create", |env| {
        assert!(
            matches!(env.open(false), Err(StateError::NotFound { .. })),
            "{}",
            env.name
        );
        let s = env.writer();
        assert_eq!(s.head(), 0);
        assert!(s.is_writable());
        let lineage = s.lineage();
        assert!(!lineage.is_empty());
        drop(s);
        let s = env.open(false).unwrap();
        assert_eq!((s.head(), s.lineage()), (0, lineage), "{}", env.name);
        assert!(!s.is_writable());
    });
}

#[test]
fn committed_events_survive_a_reopen_in_order() {
    both("reopen", |env| {
        let mut s = env.writer();
        s.set_clock(Box::new(|| 1_000));
        let run = s.begin_run("apply", &["-auto-approve".into()]).unwrap();
        assert_eq!(run, 1);
        for n in 0..20 {
            create(&mut s, n);
        }
        s.commit().unwrap();
        s.finish_run(RunOutcome::Success, RunSummary::default())
            .unwrap();
        let events = s.events(1).unwrap();
        let snapshot = s.snapshot().clone();
        assert_eq!(events.len() as u64, s.head());
        assert_eq!(Snapshot::replay(&events), snapshot);
        drop(s);
        let s = env.open(false).unwrap();
        assert_eq!(s.events(1).unwrap(), events, "{}", env.name);
        assert_eq!(s.snapshot(), &snapshot);
        assert_eq!(s.snapshot().resources.len(), 20);
        assert!(s.check().is_empty(), "{}: {:?}", env.name, s.check());
        assert_eq!(s.events(5).unwrap(), events[4..].to_vec());
        assert_eq!(s.raw_events(3, 4).unwrap().len(), 2);
    });
}

#[test]
fn runs_and_read_only_rules() {
    both("runs", |env| {
        let mut s = env.writer();
        assert_eq!(
            s.finish_run(RunOutcome::Success, RunSummary::default()),
            Err(StateError::NoOpenRun)
        );
        s.begin_run("apply", &[]).unwrap();
        assert_eq!(s.snapshot().open_run, Some(1));
        create(&mut s, 1);
        s.finish_run(RunOutcome::Failed, RunSummary::default())
            .unwrap();
        assert_eq!(s.snapshot().open_run, None);
        drop(s);
        let mut r = env.open(false).unwrap();
        assert_eq!(
            r.append(EventBody::RunFinished {
                outcome: RunOutcome::Success,
                summary: RunSummary::default()
            }),
            Err(StateError::ReadOnly)
        );
        assert_eq!(r.checkpoint(), Err(StateError::ReadOnly));
        assert_eq!(r.commit(), Ok(()));
    });
}

#[test]
fn time_travel_equals_replaying_a_prefix_with_and_without_checkpoints() {
    both("travel", |env| {
        let mut s = env.writer();
        s.set_checkpoint_every(7);
        for round in 0..4 {
            s.begin_run("apply", &[]).unwrap();
            for n in 0..4 {
                create(&mut s, round * 10 + n);
            }
            s.finish_run(RunOutcome::Success, RunSummary::default())
                .unwrap();
        }
        let events = s.events(1).unwrap();
        let full = Snapshot::replay(&events);
        assert_eq!(s.snapshot(), &full);
        assert!(s.check().is_empty(), "{}: {:?}", env.name, s.check());
        drop(s);
        let s = env.open(false).unwrap();
        assert_eq!(
            s.snapshot(),
            &full,
            "{}: opened from a checkpoint",
            env.name
        );
        for at in 0..=s.head() {
            assert_eq!(
                s.snapshot_at(at).unwrap(),
                Snapshot::replay(&events[..at as usize]),
                "{} at {at}",
                env.name
            );
        }
        assert_eq!(
            s.snapshot_at(s.head() + 1),
            Err(StateError::OutOfRange {
                seq: s.head() + 1,
                head: s.head()
            })
        );
        drop(s);
        let mut s = env.writer();
        s.clear_checkpoints().unwrap();
        drop(s);
        let s = Store::open_upto(env.dir.path(), &opts("state pull", false), 9)
            .unwrap()
            .0;
        assert_eq!(s.snapshot(), &Snapshot::replay(&events[..9]));
        drop(s);
        let s = env.open(false).unwrap();
        assert_eq!(s.snapshot(), &full);
    });
}

#[test]
fn a_flusher_makes_appends_durable_from_another_thread() {
    both("flusher", |env| {
        let mut s = env.writer();
        s.begin_run("apply", &[]).unwrap();
        for n in 0..50 {
            create(&mut s, n);
        }
        let head = s.head();
        let f = s.flusher();
        std::thread::spawn(move || f.flush())
            .join()
            .unwrap()
            .unwrap();
        let events = s.events(1).unwrap();
        // Dropped without a commit: everything flushed is there.
        drop(s);
        let s = env.open(false).unwrap();
        assert_eq!(s.head(), head, "{}", env.name);
        assert_eq!(s.events(1).unwrap(), events);
    });
}

#[test]
fn a_second_writer_is_locked_out_until_the_first_is_done() {
    both("lock", |env| {
        let s = env.writer();
        let err = env.open(true).err().expect("locked");
        let msg = err.to_string();
        assert!(msg.contains("is locked"), "{}: {msg}", env.name);
        assert!(msg.contains("apply"), "{}: {msg}", env.name);
        let start = Instant::now();
        let release = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(400));
            drop(s);
        });
        let mut o = opts("plan", true);
        o.lock_timeout = Duration::from_secs(30);
        let (s2, _) = Store::open(env.dir.path(), &o).unwrap_or_else(|e| panic!("{e}"));
        release.join().unwrap();
        assert!(start.elapsed() >= Duration::from_millis(300));
        assert!(s2.is_writable());
    });
}

#[test]
fn records_copy_between_stores_byte_for_byte() {
    let Some(pg) = Env::pg("copy") else { return };
    let sled = Env::sled();
    let mut a = sled.writer();
    a.begin_run("apply", &[]).unwrap();
    for n in 0..30 {
        create(&mut a, n);
    }
    a.finish_run(RunOutcome::Success, RunSummary::default())
        .unwrap();
    let raw = a.raw_events(1, a.head()).unwrap();
    let mut b = pg.writer();
    b.set_lineage(&a.lineage()).unwrap();
    b.import_raw(&raw).unwrap();
    assert_eq!(b.snapshot(), a.snapshot());
    drop(b);
    let b = pg.open(false).unwrap();
    assert_eq!(b.raw_events(1, b.head()).unwrap(), raw);
    assert_eq!(b.lineage(), a.lineage());
    assert_eq!(b.events(1).unwrap(), a.events(1).unwrap());
}

// ---- PostgreSQL only ----

#[test]
fn the_database_refuses_to_rewrite_history() {
    let Some(env) = Env::pg("appendonly") else {
        return;
    };
    let mut s = env.writer();
    s.begin_run("apply", &[]).unwrap();
    create(&mut s, 1);
    s.commit().unwrap();
    drop(s);
    let server = pgserver::shared().unwrap();
    let schema = &env.pg_schema();
    for sql in [
        format!("UPDATE {schema}.cairn_events SET data = '\\x00' WHERE seq = 1"),
        format!("DELETE FROM {schema}.cairn_events WHERE seq = 1"),
        format!("TRUNCATE {schema}.cairn_events"),
        format!("DELETE FROM {schema}.cairn_meta"),
    ] {
        // Even the superuser: the trigger refuses.
        let err = server.psql(&sql).expect_err(&sql);
        assert!(err.contains("append-only"), "{sql}: {err}");
    }
    // A least-privilege role (README): SELECT and INSERT on the log, nothing else.
    server
        .psql(&format!(
            "CREATE ROLE {schema}_runner LOGIN PASSWORD 'runner-pw';
             GRANT USAGE ON SCHEMA {schema} TO {schema}_runner;
             GRANT SELECT, INSERT ON {schema}.cairn_events, {schema}.cairn_meta TO {schema}_runner;
             GRANT SELECT, INSERT, UPDATE ON {schema}.cairn_head TO {schema}_runner;
             GRANT SELECT, INSERT, UPDATE, DELETE ON {schema}.cairn_checkpoints, {schema}.cairn_lock
                 TO {schema}_runner;"
        ))
        .unwrap();
    let runner = tempfile::tempdir().unwrap();
    write_backend(
        runner.path(),
        &Backend::Pg(PgSettings {
            conn_str: Some(server.conn_str_as(&format!("{schema}_runner"), "runner-pw")),
            schema_name: Some(schema.clone()),
            ..Default::default()
        }),
    )
    .unwrap();
    let (mut s, _) = Store::open(runner.path(), &opts("apply", true)).unwrap();
    create(&mut s, 2);
    s.checkpoint().unwrap();
    drop(s);
    let (s, _) = Store::open(runner.path(), &opts("apply", false)).unwrap();
    assert_eq!(s.snapshot().resources.len(), 2);
    assert!(s.check().is_empty(), "{:?}", s.check());
}

#[test]
fn the_lock_error_names_the_holder_and_force_unlock_ends_its_session() {
    let Some(env) = Env::pg("holder") else {
        return;
    };
    let s = env.writer();
    let err = env.open(true).err().unwrap();
    let StateError::LockedRemote {
        holder: Some(h), ..
    } = &err
    else {
        panic!("{err}")
    };
    assert_eq!(h.pid, std::process::id());
    assert_eq!(h.command, "apply");
    let msg = err.to_string();
    assert!(
        msg.contains(&format!("cairn force-unlock {}", h.run_id)),
        "{msg}"
    );
    assert!(!msg.contains(pgserver::PASSWORD), "{msg}");
    let cfg = cairn_state::store::configured_pg(env.dir.path())
        .unwrap()
        .unwrap();
    let wrong = cairn_state::pg::force_unlock(&cfg, "nope").unwrap_err();
    assert!(wrong.to_string().contains("does not hold"), "{wrong}");
    let done = cairn_state::pg::force_unlock(&cfg, &h.run_id).unwrap();
    assert!(done.contains("released"), "{done}");
    // The lock is free at once; the old holder's session is gone.
    let mut o = opts("apply", true);
    o.lock_timeout = Duration::from_secs(5);
    let (s2, _) = Store::open(env.dir.path(), &o).unwrap();
    drop(s2);
    drop(s);
}

#[test]
fn a_lost_connection_keeps_outcomes_in_the_local_journal_for_the_next_run() {
    let Some(env) = Env::pg("journal") else {
        return;
    };
    let server = pgserver::shared().unwrap();
    let mut s = env.writer();
    s.begin_run("apply", &[]).unwrap();
    create(&mut s, 1);
    s.commit().unwrap();
    let durable = s.head();
    // The database ends the session (as a failover or a cut network would).
    let schema = &env.pg_schema();
    let app = server
        .psql(&format!(
            "SELECT pg_terminate_backend(backend_pid) FROM {schema}.cairn_lock"
        ))
        .unwrap();
    assert!(app.contains('t'), "{app}");
    create(&mut s, 2);
    let err = s.commit().unwrap_err().to_string();
    assert!(err.contains("No new operation starts"), "{err}");
    assert!(err.contains("pg-journal"), "{err}");
    // Later flushes keep failing (no new operation may start) and keep what was appended.
    create(&mut s, 3);
    assert!(s.flusher().flush().is_err());
    let expected = s.snapshot().clone();
    drop(s);
    assert!(env.dir.path().join("pg-journal").exists());
    let r = env.open(false).unwrap();
    assert_eq!(r.head(), durable);
    drop(r);
    let (s, warnings) = Store::open(env.dir.path(), &opts("apply", true)).unwrap();
    assert!(
        warnings.iter().any(|w| w.contains("wrote 4 of 4 event(s)")),
        "{warnings:?}"
    );
    assert_eq!(s.snapshot(), &expected);
    assert_eq!(Snapshot::replay(&s.events(1).unwrap()), expected);
    assert!(!env.dir.path().join("pg-journal").exists());
    assert!(s.check().is_empty(), "{:?}", s.check());
}

#[test]
fn secrets_stay_out_of_connection_errors() {
    let Some(server) = pgserver::shared() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let bad = server.conn_str_as("postgres", "wrong-Secret-42");
    write_backend(
        dir.path(),
        &Backend::Pg(PgSettings {
            conn_str: Some(bad),
            ..Default::default()
        }),
    )
    .unwrap();
    let err = Store::open(dir.path(), &opts("apply", true))
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("password authentication failed"), "{err}");
    assert!(!err.contains("wrong-Secret-42"), "{err}");
    assert!(err.contains("postgres:****@127.0.0.1"), "{err}");
}

#[test]
fn tls_connections_require_and_verify_full() {
    let Some(server) = pgserver::shared() else {
        return;
    };
    let Some(ca) = server.ca_file() else {
        assert!(
            !std::env::var("CI").is_ok_and(|v| v == "true"),
            "CI=true and the test server has no TLS (openssl missing?)"
        );
        eprintln!("SKIPPED: no openssl to make the test server's certificates");
        return;
    };
    let base = format!(
        "postgres://postgres:{}@localhost:{}/postgres",
        pgserver::PASSWORD,
        server.port
    );
    let schema = pgserver::schema("tls");
    let open = |conn: String| {
        let dir = tempfile::tempdir().unwrap();
        write_backend(
            dir.path(),
            &Backend::Pg(PgSettings {
                conn_str: Some(conn),
                schema_name: Some(schema.clone()),
                ..Default::default()
            }),
        )
        .unwrap();
        Store::open(dir.path(), &opts("apply", true)).map(|(s, _)| s.head())
    };
    assert_eq!(open(format!("{base}?sslmode=require")), Ok(0));
    assert_eq!(
        open(format!(
            "{base}?sslmode=verify-full&sslrootcert={}",
            ca.display()
        )),
        Ok(0)
    );
    // Verification really checks: the public roots do not know the test CA.
    let bad = open(format!("{base}?sslmode=verify-full")).unwrap_err();
    assert!(bad.to_string().contains("certificate"), "{bad}");
    assert!(!bad.to_string().contains(pgserver::PASSWORD), "{bad}");
}
