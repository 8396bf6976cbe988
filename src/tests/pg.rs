//! Team state on PostgreSQL, end to end on the real `cairn` binary against a real server
//! (`state/tests/support/pgserver.rs`): the backend block with `-backend-config` and the
//! environment, two working copies sharing one state, concurrent applies, a runner killed
//! with SIGKILL, the server crashing mid-apply, and migration sled → PostgreSQL → sled.

#[path = "../../state/tests/support/pgserver.rs"]
mod pgserver;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A working copy: a directory with the configuration, sharing the sim store `sim`.
struct Copy {
    dir: tempfile::TempDir,
    sim: std::path::PathBuf,
    env: Vec<(String, String)>,
}

fn config(schema: Option<&str>, n: usize) -> String {
    let mut tf = String::new();
    if let Some(schema) = schema {
        tf.push_str(&format!(
            "terraform {{\n  backend \"pg\" {{\n    schema_name = \"{schema}\"\n  }}\n}}\n"
        ));
    }
    for i in 0..n {
        tf.push_str(&format!(
            "resource \"sim_thing\" \"t{i}\" {{\n  name = \"t{i}\"\n}}\n"
        ));
    }
    tf
}

impl Copy {
    fn new(sim: &Path, tf: &str) -> Copy {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("main.tf"), tf).unwrap();
        Copy {
            dir,
            sim: sim.to_path_buf(),
            env: Vec::new(),
        }
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_cairn"));
        c.args(args)
            .current_dir(self.dir.path())
            .env("NO_COLOR", "1")
            .env("SIM_STORE", &self.sim)
            .env_remove("CAIRN_STATE_DIR")
            .env_remove("CAIRN_LOG")
            .env_remove("PG_CONN_STR")
            .env_remove("PG_SCHEMA_NAME")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for (k, v) in &self.env {
            c.env(k, v);
        }
        c
    }

    fn run(&self, args: &[&str]) -> (i32, String, String) {
        let out = self.command(args).output().expect("cairn runs");
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    fn ok(&self, args: &[&str]) -> String {
        let (code, out, err) = self.run(args);
        assert_eq!(code, 0, "cairn {args:?}:\n{out}\n{err}");
        out
    }

    fn spawn(&self, args: &[&str]) -> Child {
        self.command(args).spawn().expect("cairn starts")
    }

    /// `history -json` without the timing fields (identical across stores).
    /// The runs of the log `history -json` lists (the plans it lists beside them come and go
    /// with the `plan` checks these tests make between two looks).
    fn history(&self) -> Vec<String> {
        self.ok(&["history", "-json"])
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
            .filter(|j| j["kind"] == "run")
            .map(|j| {
                format!(
                    "{} {} {} {}",
                    j["id"], j["command"], j["outcome"], j["started"]
                )
            })
            .collect()
    }
}

/// How many objects the sim store holds.
fn things(sim: &Path) -> usize {
    std::fs::read_dir(sim.join("things/local"))
        .map(|d| d.filter(|e| e.is_ok()).count())
        .unwrap_or(0)
}

/// How many successful creates the sim provider made.
fn creates(sim: &Path) -> usize {
    std::fs::read_to_string(sim.join("calls.jsonl"))
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains("\"op\": \"create\"") && l.contains("\"ok\": true"))
        .count()
}

fn wait_for(what: &str, timeout: Duration, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn finish(child: Child) -> (i32, String, String) {
    let out = child.wait_with_output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn two_working_copies_share_one_state_and_secrets_stay_hidden() {
    let Some(server) = pgserver::shared() else {
        return;
    };
    let schema = pgserver::schema("share");
    let sim = tempfile::tempdir().unwrap();
    let tf = config(Some(&schema), 3);
    let a = Copy::new(sim.path(), &tf);
    let conn = server.conn_str();
    let flag = format!("-backend-config=conn_str={conn}");
    let out = a.ok(&["init", &flag]);
    assert!(out.contains(&format!("schema {schema}")), "{out}");
    assert!(!out.contains(pgserver::PASSWORD), "{out}");
    assert!(out.contains("postgres:****@127.0.0.1"), "{out}");
    let out = a.ok(&["apply", "-auto-approve"]);
    assert!(out.contains("3 added"), "{out}");
    // The second copy takes its connection string from the environment.
    let mut b = Copy::new(sim.path(), &tf);
    b.env.push(("PG_CONN_STR".into(), conn.clone()));
    b.ok(&["init"]);
    let out = b.ok(&["plan"]);
    assert!(out.contains("No changes."), "{out}");
    assert_eq!(b.ok(&["state", "list"]), a.ok(&["state", "list"]));
    assert_eq!(a.history(), b.history());
    // No password anywhere a user or a log can see it.
    for args in [
        &["history", "-json"][..],
        &["log"],
        &["show", "-json"],
        &["state", "pull"],
    ] {
        let (_, out, err) = b.run(args);
        assert!(!out.contains(pgserver::PASSWORD), "{args:?}: {out}");
        assert!(!err.contains(pgserver::PASSWORD), "{args:?}: {err}");
    }
    // A wrong password is an error that names the server, not the secret.
    let mut c = Copy::new(sim.path(), &tf);
    c.env.push((
        "PG_CONN_STR".into(),
        server.conn_str_as("postgres", "Wrong-Pw-77"),
    ));
    let (code, out, err) = c.run(&["init"]);
    assert_eq!(code, 1, "{out}");
    assert!(err.contains("password authentication failed"), "{err}");
    assert!(
        !err.contains("Wrong-Pw-77") && !out.contains("Wrong-Pw-77"),
        "{err}"
    );
}

#[test]
fn concurrent_applies_wait_or_fail_naming_the_holder_and_lose_nothing() {
    let Some(server) = pgserver::shared() else {
        return;
    };
    let schema = pgserver::schema("concurrent");
    let sim = tempfile::tempdir().unwrap();
    let mut a = Copy::new(sim.path(), &config(Some(&schema), 6));
    a.env.push(("PG_CONN_STR".into(), server.conn_str()));
    a.env.push(("SIM_LATENCY_MS".into(), "400".into()));
    let mut b = Copy::new(sim.path(), &config(Some(&schema), 6));
    b.env = a.env.clone();
    a.ok(&["init"]);
    b.ok(&["init"]);
    let first = a.spawn(&["apply", "-auto-approve", "-parallelism=2"]);
    wait_for(
        "the first apply to start creating",
        Duration::from_secs(30),
        || creates(sim.path()) > 0 || sim.path().join("calls.jsonl").exists(),
    );
    // Without a timeout: fails at once, naming the holder and the way out.
    let (code, _, err) = b.run(&["apply", "-auto-approve"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("is locked by"), "{err}");
    assert!(err.contains("cairn apply"), "{err}");
    assert!(err.contains("cairn force-unlock"), "{err}");
    // With one: waits for the first, then finds nothing to do.
    let (code, out, err) = b.run(&["apply", "-auto-approve", "-lock-timeout=120s"]);
    assert_eq!(code, 0, "{out}\n{err}");
    let (code, out, err) = finish(first);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains("6 added"), "{out}");
    assert_eq!(creates(sim.path()), 6);
    assert_eq!(things(sim.path()), 6);
    let out = b.ok(&["state", "check"]);
    assert!(!out.contains("invariant"), "{out}");
    assert_eq!(a.history().len(), 2);
}

#[test]
fn a_runner_killed_mid_apply_is_recovered_from_the_other_copy() {
    let Some(server) = pgserver::shared() else {
        return;
    };
    let schema = pgserver::schema("kill");
    let sim = tempfile::tempdir().unwrap();
    let mut a = Copy::new(sim.path(), &config(Some(&schema), 4));
    a.env.push(("PG_CONN_STR".into(), server.conn_str()));
    a.env.push(("SIM_LATENCY_MS".into(), "1500".into()));
    let mut b = Copy::new(sim.path(), &config(Some(&schema), 4));
    b.env.push(("PG_CONN_STR".into(), server.conn_str()));
    a.ok(&["init"]);
    b.ok(&["init"]);
    let mut runner = a.spawn(&["apply", "-auto-approve", "-parallelism=2"]);
    wait_for("the first creates", Duration::from_secs(60), || {
        creates(sim.path()) >= 2
    });
    std::thread::sleep(Duration::from_millis(300));
    runner.kill().unwrap(); // SIGKILL
    runner.wait().unwrap();
    // The lock died with the runner's session: the other copy goes ahead at once.
    let (code, out, err) = b.run(&["apply", "-auto-approve", "-lock-timeout=20s"]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert_eq!(things(sim.path()), 4, "every object exactly once");
    let out = b.ok(&["state", "list"]);
    let objects = out.lines().filter(|l| l.starts_with("sim_thing.")).count();
    assert_eq!(objects, 4, "{out}");
    let out = b.ok(&["plan"]);
    assert!(out.contains("No changes."), "{out}");
    b.ok(&["state", "check"]);
}

#[test]
fn the_server_crashing_mid_apply_loses_no_outcome() {
    let Some(mut server) = pgserver::start_or_skip(true) else {
        return;
    };
    let sim = tempfile::tempdir().unwrap();
    let mut a = Copy::new(sim.path(), &config(Some("crash"), 6));
    a.env.push(("PG_CONN_STR".into(), server.conn_str()));
    a.env.push(("SIM_LATENCY_MS".into(), "1500".into()));
    a.ok(&["init"]);
    // One call at a time: the second is under way when the server dies, the rest must not
    // start.
    let runner = a.spawn(&["apply", "-auto-approve", "-parallelism=1"]);
    wait_for("the first creates", Duration::from_secs(60), || {
        std::fs::read_to_string(sim.path().join("calls.jsonl"))
            .unwrap_or_default()
            .contains("\"op\": \"create\"")
    });
    server.pg_ctl_stop("immediate");
    let (code, out, err) = finish(runner);
    assert_eq!(code, 1, "{out}\n{err}");
    assert!(err.contains("No new operation starts"), "{err}");
    assert!(err.contains("pg-journal"), "{err}");
    let made = things(sim.path());
    assert!(made < 6, "the run stopped starting operations: {made}");
    server.launch().unwrap();
    let (code, out, err) = a.run(&["apply", "-auto-approve"]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(
        out.contains("event(s) kept in") || err.contains("event(s) kept in"),
        "the user is told the journal was written back:\n{out}\n{err}"
    );
    assert_eq!(
        things(sim.path()),
        6,
        "every object accounted for, once\n{out}\n{err}\n{}",
        a.ok(&["log"])
    );
    let out = a.ok(&["plan"]);
    assert!(out.contains("No changes."), "{out}");
    a.ok(&["state", "check"]);
    assert!(!a.dir.path().join(".cairn/pg-journal").exists());
}

#[test]
fn migration_sled_to_postgres_and_back_keeps_history() {
    let Some(server) = pgserver::shared() else {
        return;
    };
    let schema = pgserver::schema("migrate");
    let sim = tempfile::tempdir().unwrap();
    let mut a = Copy::new(sim.path(), &config(None, 3));
    a.env.push(("PG_CONN_STR".into(), server.conn_str()));
    a.ok(&["init"]);
    a.ok(&["apply", "-auto-approve"]);
    std::fs::write(a.dir.path().join("main.tf"), config(None, 2)).unwrap();
    a.ok(&["apply", "-auto-approve"]);
    let on_sled = a.history();
    let log_sled = a.ok(&["log"]);
    assert_eq!(on_sled.len(), 2);

    // sled → PostgreSQL: init without -migrate-state refuses to leave the state behind.
    std::fs::write(a.dir.path().join("main.tf"), config(Some(&schema), 2)).unwrap();
    let (code, _, err) = a.run(&["init"]);
    assert_eq!(code, 1);
    assert!(err.contains("cairn init -migrate-state"), "{err}");
    let out = a.ok(&["init", "-migrate-state"]);
    assert!(
        out.contains("verified (event count and checksum chain"),
        "{out}"
    );
    assert!(!out.contains(pgserver::PASSWORD), "{out}");
    assert_eq!(a.history(), on_sled);
    assert_eq!(a.ok(&["log"]), log_sled);
    assert!(a.ok(&["plan"]).contains("No changes."));

    // A second copy into the same schema is refused: the target is not empty.
    let mut other = Copy::new(sim.path(), &config(None, 1));
    other.env = a.env.clone();
    other.ok(&["apply", "-auto-approve"]);
    std::fs::write(other.dir.path().join("main.tf"), config(Some(&schema), 1)).unwrap();
    let (code, _, err) = other.run(&["init", "-migrate-state"]);
    assert_eq!(code, 1);
    assert!(err.contains("migrates only into an empty state"), "{err}");

    // PostgreSQL → sled.
    std::fs::write(a.dir.path().join("main.tf"), config(None, 2)).unwrap();
    a.ok(&["init", "-migrate-state"]);
    assert!(!a.dir.path().join(".cairn/backend.json").exists());
    assert_eq!(a.history(), on_sled);
    assert_eq!(a.ok(&["log"]), log_sled);
    assert!(a.ok(&["plan"]).contains("No changes."));
}

/// `data "terraform_remote_state"` reads a state kept on PostgreSQL: with `backend = "pg"`
/// and the connection from the environment, and through the producer's directory (whose
/// `backend.json` names the server) with `backend = "local"`.
#[test]
fn terraform_remote_state_reads_a_state_on_postgresql() {
    let Some(server) = pgserver::shared() else {
        return;
    };
    let schema = pgserver::schema("remote");
    let sim = tempfile::tempdir().unwrap();
    let producer = Copy::new(
        sim.path(),
        &format!(
            "terraform {{\n  backend \"pg\" {{\n    schema_name = \"{schema}\"\n  }}\n}}\n\
             output \"vpc\" {{ value = \"vpc-1\" }}\noutput \"ids\" {{ value = tolist([\"a\", \"b\"]) }}\n"
        ),
    );
    let conn = server.conn_str();
    producer.ok(&["init", &format!("-backend-config=conn_str={conn}")]);
    producer.ok(&["apply", "-auto-approve"]);
    let producer_dir = producer.dir.path().display().to_string();
    let mut consumer = Copy::new(
        sim.path(),
        &format!(
            "data \"terraform_remote_state\" \"pg\" {{\n  backend = \"pg\"\n  config = {{ schema_name = \"{schema}\" }}\n}}\n\
             data \"terraform_remote_state\" \"dir\" {{\n  backend = \"local\"\n  config = {{ path = \"{producer_dir}\" }}\n}}\n\
             output \"vpc\" {{ value = data.terraform_remote_state.pg.outputs.vpc }}\n\
             output \"ids\" {{ value = data.terraform_remote_state.dir.outputs.ids }}\n"
        ),
    );
    consumer.env.push(("PG_CONN_STR".into(), conn));
    consumer.ok(&["apply", "-auto-approve"]);
    let out: serde_json::Value = serde_json::from_str(&consumer.ok(&["output", "-json"])).unwrap();
    assert_eq!(out["vpc"]["value"], serde_json::json!("vpc-1"));
    assert_eq!(out["ids"]["value"], serde_json::json!(["a", "b"]));
    assert_eq!(out["ids"]["type"], serde_json::json!(["list", "string"]));
}

/// Workspaces of a team state: one created on one machine is listed and selected on another,
/// each has its own history and objects, a saved plan applies only to its own workspace, and
/// `init -migrate-state` carries every workspace across.
#[test]
fn workspaces_are_shared_by_every_copy_and_migrate_together() {
    let Some(server) = pgserver::shared() else {
        return;
    };
    let schema = pgserver::schema("ws");
    let sim = tempfile::tempdir().unwrap();
    let body = "resource \"sim_thing\" \"t\" {\n  name = \"t-${terraform.workspace}\"\n}\n\
                output \"ws\" { value = terraform.workspace }\n";
    // A copy on sled with two workspaces, then migrated to PostgreSQL.
    let mut a = Copy::new(sim.path(), body);
    a.env.push(("PG_CONN_STR".into(), server.conn_str()));
    a.ok(&["apply", "-auto-approve"]);
    let out = a.ok(&["workspace", "new", "staging"]);
    assert!(
        out.contains("Created and switched to workspace \"staging\"!"),
        "{out}"
    );
    a.ok(&["apply", "-auto-approve"]);
    let staging_history = a.history();
    assert_eq!(staging_history.len(), 1);
    let backend =
        format!("terraform {{\n  backend \"pg\" {{\n    schema_name = \"{schema}\"\n  }}\n}}\n");
    std::fs::write(a.dir.path().join("main.tf"), format!("{backend}{body}")).unwrap();
    let out = a.ok(&["init", "-migrate-state"]);
    assert!(out.contains("(workspace \"staging\"): copied"), "{out}");
    assert!(out.contains("(workspace \"default\"): copied"), "{out}");
    assert_eq!(a.history(), staging_history);
    assert!(a.ok(&["plan"]).contains("No changes."));

    // Another machine sees both workspaces and works in either.
    let mut b = Copy::new(sim.path(), &format!("{backend}{body}"));
    b.env.push(("PG_CONN_STR".into(), server.conn_str()));
    b.ok(&["init"]);
    assert_eq!(b.ok(&["workspace", "list"]), "* default\n  staging\n\n");
    assert_eq!(
        b.ok(&["workspace", "select", "staging"]),
        "Switched to workspace \"staging\".\n"
    );
    assert_eq!(b.ok(&["workspace", "show"]), "staging\n");
    assert_eq!(b.history(), staging_history);
    assert!(b.ok(&["output", "ws"]).contains("\"staging\""));
    b.ok(&["workspace", "new", "qa"]);
    assert_eq!(
        a.ok(&["workspace", "list"]),
        "  default\n  qa\n* staging\n\n"
    );

    // A plan saved in one workspace is refused in another.
    b.ok(&["plan", "-out=qa.plan"]);
    b.ok(&["workspace", "select", "staging"]);
    let (code, _, err) = b.run(&["apply", "qa.plan"]);
    assert_eq!(code, 1);
    assert!(err.contains("Saved plan is for another workspace"), "{err}");
    b.ok(&["workspace", "select", "qa"]);
    assert!(b.ok(&["apply", "qa.plan"]).contains("1 added"));

    // Deleting: never the selected one, never one that tracks objects unless forced.
    let (code, _, err) = b.run(&["workspace", "delete", "qa"]);
    assert_eq!(code, 1);
    assert!(
        err.contains("Workspace \"qa\" is your active workspace."),
        "{err}"
    );
    b.ok(&["destroy", "-auto-approve"]);
    b.ok(&["workspace", "select", "default"]);
    assert_eq!(
        b.ok(&["workspace", "delete", "qa"]),
        "Deleted workspace \"qa\"!\n"
    );
    let (code, _, err) = b.run(&["workspace", "delete", "staging"]);
    assert_eq!(code, 1);
    assert!(err.contains("Workspace is not empty"), "{err}");
    assert!(err.contains("- sim_thing.t"), "{err}");
    assert_eq!(a.ok(&["workspace", "list"]), "  default\n* staging\n\n");
    assert_eq!(things(sim.path()), 2);
}

/// `-lock=false` (issue 27): a writer takes no advisory lock, so it runs beside a holder that
/// a locked writer must wait for; the holder, killed, is recovered as any dead runner is.
#[test]
fn lock_false_writes_beside_the_lock_holder() {
    let Some(server) = pgserver::shared() else {
        return;
    };
    let schema = pgserver::schema("nolock");
    let sim = tempfile::tempdir().unwrap();
    let mut a = Copy::new(sim.path(), &config(Some(&schema), 2));
    a.env.push(("PG_CONN_STR".into(), server.conn_str()));
    let mut b = Copy::new(sim.path(), &config(Some(&schema), 2));
    b.env = a.env.clone();
    a.ok(&["init"]);
    b.ok(&["init"]);
    a.ok(&["apply", "-auto-approve"]);
    // A holds the lock while its provider takes its time creating a third object.
    std::fs::write(a.dir.path().join("main.tf"), config(Some(&schema), 3)).unwrap();
    a.env.push(("SIM_LATENCY_MS".into(), "5000".into()));
    // (It waits for the lock B takes while it looks for the holder.)
    let mut holder = a.spawn(&["apply", "-auto-approve", "-lock-timeout=60s"]);
    wait_for(
        "the holder to take the lock",
        Duration::from_secs(60),
        || {
            let (code, _, err) = b.run(&["taint", "sim_thing.t0"]);
            assert!(code == 1 || code == 0, "{err}");
            code == 1 && err.contains("is locked by")
        },
    );
    let out = b.ok(&["taint", "-lock=false", "sim_thing.t0"]);
    assert!(
        out.contains("Resource instance sim_thing.t0 has been marked as tainted."),
        "{out}"
    );
    // Killed mid-create (before it could append after B's event), as a runner may die.
    let _ = holder.kill();
    let _ = holder.wait();
    let out = b.ok(&["plan"]);
    assert!(
        out.contains("# sim_thing.t0 is tainted, so must be replaced"),
        "{out}"
    );
    let out = b.ok(&["state", "check"]);
    assert!(!out.contains("invariant"), "{out}");
}

/// Issue 30: a refused password or a stopped server at the start of `plan`, `apply` or a
/// state command is a clear error and exit 1 — never a panic (the store's runtime used to be
/// dropped on the engine's runtime: "Cannot drop a runtime in a context where blocking is not
/// allowed", exit 101).
#[test]
fn a_refused_password_or_a_stopped_server_at_the_start_is_a_clear_error() {
    let Some(mut server) = pgserver::start_or_skip(true) else {
        return;
    };
    let sim = tempfile::tempdir().unwrap();
    let mut a = Copy::new(sim.path(), &config(Some("refused"), 2));
    a.env.push(("PG_CONN_STR".into(), server.conn_str()));
    a.ok(&["init"]);
    a.ok(&["apply", "-auto-approve"]);
    let check = |a: &Copy, args: &[&str], want: &str| {
        let (code, out, err) = a.run(args);
        assert_eq!(code, 1, "{args:?}:\n{out}\n{err}");
        assert!(!err.contains("panicked"), "{args:?}:\n{err}");
        assert!(!err.contains("RUST_BACKTRACE"), "{args:?}:\n{err}");
        assert!(
            err.to_lowercase().contains("cannot connect to"),
            "{args:?}:\n{err}"
        );
        assert!(err.contains(want), "{args:?}: wants {want:?}\n{err}");
        assert!(!err.contains("Wrong-Pw-77") && !out.contains("Wrong-Pw-77"));
    };
    let wrong = Copy {
        dir: tempfile::tempdir().unwrap(),
        sim: sim.path().to_path_buf(),
        env: vec![(
            "PG_CONN_STR".into(),
            server.conn_str_as("postgres", "Wrong-Pw-77"),
        )],
    };
    // The working copy was initialized with the right password; only the secret changed.
    copy_dir(a.dir.path(), wrong.dir.path());
    for args in [
        &["plan"][..],
        &["apply", "-auto-approve"],
        &["destroy", "-auto-approve"],
        &["state", "list"],
        &["history"],
    ] {
        check(&wrong, args, "password authentication failed");
    }
    server.pg_ctl_stop("fast");
    for args in [
        &["plan"][..],
        &["apply", "-auto-approve"],
        &["state", "list"],
    ] {
        check(&a, args, "127.0.0.1");
    }
    // Nothing was lost: the server back, the state is as the first apply left it.
    server.launch().unwrap();
    let out = a.ok(&["plan"]);
    assert!(out.contains("No changes."), "{out}");
    assert_eq!(things(sim.path()), 2);
}

fn copy_dir(from: &Path, to: &Path) {
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let target = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            std::fs::create_dir_all(&target).unwrap();
            copy_dir(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), &target).unwrap();
        }
    }
}

/// Issue 30: rows deleted, reordered, duplicated or cut from the end of `cairn_events` behind
/// the triggers' back (as a DBA's repair or a point-in-time restore does) are an error on
/// every command — never a shorter or different state — naming the first damaged event;
/// `state verify` says the same, and the log reads again once the rows are put back.
#[test]
fn deleted_reordered_or_duplicated_rows_are_damage_never_a_shorter_state() {
    let Some(server) = pgserver::shared() else {
        return;
    };
    let schema = pgserver::schema("damage");
    let sim = tempfile::tempdir().unwrap();
    let mut a = Copy::new(sim.path(), &config(Some(&schema), 3));
    a.env.push(("PG_CONN_STR".into(), server.conn_str()));
    a.ok(&["init"]);
    a.ok(&["apply", "-auto-approve"]);
    std::fs::write(a.dir.path().join("main.tf"), config(Some(&schema), 4)).unwrap();
    a.ok(&["apply", "-auto-approve"]);
    let listed = a.ok(&["state", "list"]);
    let verified = a.ok(&["state", "verify"]);
    assert!(verified.contains("The state log is intact"), "{verified}");
    let last: u64 = server
        .psql(&format!("SELECT max(seq) FROM {schema}.cairn_events"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let t = format!("{schema}.cairn_events");
    let bypass = |sql: &str| {
        server
            .psql(&format!(
                "ALTER TABLE {t} DISABLE TRIGGER USER; {sql}; ALTER TABLE {t} ENABLE TRIGGER USER;"
            ))
            .unwrap();
    };
    bypass(&format!("CREATE TABLE {schema}.saved AS SELECT * FROM {t}"));
    let restore = || {
        bypass(&format!(
            "DELETE FROM {t}; INSERT INTO {t} SELECT * FROM {schema}.saved"
        ))
    };
    let damaged = |what: &str, from: u64| {
        for args in [&["state", "list"][..], &["plan"], &["state", "verify"]] {
            let (code, out, err) = a.run(args);
            assert_eq!(code, 1, "{what}: {args:?}\n{out}\n{err}");
            assert!(!err.contains("panicked"), "{what}\n{err}");
            assert!(
                err.contains(&format!("is damaged from event {from} on")),
                "{what}: {args:?}\n{err}"
            );
            assert!(!out.contains("will be created"), "{what}\n{out}");
        }
        // Nothing is written to it.
        let (code, _, err) = a.run(&["apply", "-auto-approve"]);
        assert_eq!(code, 1, "{what}\n{err}");
        assert_eq!(things(sim.path()), 4, "{what}: nothing was created");
    };
    // A row deleted in the middle.
    bypass(&format!("DELETE FROM {t} WHERE seq = 5"));
    damaged("a deleted row", 5);
    restore();
    assert_eq!(a.ok(&["state", "list"]), listed);
    // Two rows swapped (reordered).
    bypass(&format!(
        "UPDATE {t} SET data = (SELECT data FROM {schema}.saved WHERE seq = 7) WHERE seq = 6; \
         UPDATE {t} SET data = (SELECT data FROM {schema}.saved WHERE seq = 6) WHERE seq = 7"
    ));
    damaged("two rows swapped", 6);
    restore();
    // A row duplicated in place of another.
    bypass(&format!(
        "UPDATE {t} SET data = (SELECT data FROM {schema}.saved WHERE seq = 3) WHERE seq = 4"
    ));
    damaged("a duplicated row", 4);
    restore();
    // The newest rows cut off (an older backup restored): shorter than the head.
    bypass(&format!("DELETE FROM {t} WHERE seq > {}", last - 4));
    damaged("the newest rows cut off", last - 3);
    let (_, _, err) = a.run(&["state", "list"]);
    assert!(err.contains("are lost"), "{err}");
    restore();
    assert_eq!(a.ok(&["state", "list"]), listed);
    a.ok(&["state", "verify"]);
    let out = a.ok(&["plan"]);
    assert!(out.contains("No changes."), "{out}");
}

/// Early evaluation (OpenTofu 1.8) in the backend block: the connection string from a
/// sensitive variable and the schema from a local value over another variable, at `init`
/// and at every command; another `-var` later is "Backend configuration changed" until
/// `init -migrate-state` moves the state; the password is never printed nor recorded in
/// the digest `init` keeps.
#[test]
fn backend_conn_str_and_schema_from_variables() {
    let Some(server) = pgserver::shared() else {
        return;
    };
    let (s1, s2) = (pgserver::schema("early1"), pgserver::schema("early2"));
    let sim = tempfile::tempdir().unwrap();
    let tf = format!(
        "variable \"pg_conn\" {{\n  type      = string\n  sensitive = true\n}}\n\n\
         variable \"team\" {{\n  type = string\n}}\n\n\
         locals {{\n  schema = \"${{var.team}}\"\n}}\n\n\
         terraform {{\n  backend \"pg\" {{\n    conn_str    = var.pg_conn\n    schema_name = local.schema\n  }}\n}}\n\n{}",
        config(None, 2)
    );
    let a = Copy::new(sim.path(), &tf);
    let conn = server.conn_str();
    let var_conn = format!("pg_conn={conn}");
    let (t1, t2) = (format!("team={s1}"), format!("team={s2}"));
    // A variable the backend needs and init was not given: named, with how to give it.
    let (code, out, err) = a.run(&["init", "-var", &t1]);
    assert_eq!(code, 1, "{out}");
    assert!(err.contains("No value for required variable"), "{err}");
    assert!(err.contains("\"pg_conn\" is not set"), "{err}");
    assert!(err.contains("on main.tf:16:19"), "{err}");
    let out = a.ok(&["init", "-var", &var_conn, "-var", &t1]);
    assert!(out.contains(&format!("schema {s1}")), "{out}");
    let out = a.ok(&["apply", "-auto-approve", "-var", &var_conn, "-var", &t1]);
    assert!(out.contains("2 added"), "{out}");
    // The state is in the schema the variable named.
    let rows = server
        .psql(&format!("SELECT count(*) FROM \"{s1}\".cairn_events"))
        .unwrap();
    assert!(rows.trim() != "0", "{rows}");
    // Another value at a later command: refused, naming the block and what to run.
    let (code, out, err) = a.run(&["plan", "-var", &var_conn, "-var", &t2]);
    assert_eq!(code, 1, "{out}");
    assert!(err.contains("Backend configuration changed"), "{err}");
    assert!(err.contains("on main.tf:15:3"), "{err}");
    assert!(err.contains("cairn init -reconfigure"), "{err}");
    // init with it: the state has events, so it must be told to move them.
    let (code, _, err) = a.run(&["init", "-var", &var_conn, "-var", &t2]);
    assert_eq!(code, 1);
    assert!(err.contains("cairn init -migrate-state"), "{err}");
    let out = a.ok(&["init", "-migrate-state", "-var", &var_conn, "-var", &t2]);
    assert!(
        out.contains("verified (event count and checksum chain"),
        "{out}"
    );
    let out = a.ok(&["plan", "-var", &var_conn, "-var", &t2]);
    assert!(out.contains("No changes."), "{out}");
    // TF_VAR_* count as well.
    let mut b = Copy::new(sim.path(), &tf);
    b.env.push(("TF_VAR_pg_conn".into(), conn.clone()));
    b.env.push(("TF_VAR_team".into(), s2.clone()));
    b.ok(&["init"]);
    assert!(b.ok(&["plan"]).contains("No changes."));
    // The secret is nowhere a user sees, nor in the digest.
    let digest =
        std::fs::read_to_string(a.dir.path().join(".cairn/backend-config.digest")).unwrap();
    assert!(!digest.contains(pgserver::PASSWORD), "{digest}");
    assert!(!digest.contains(&s2), "{digest}");
    for args in [&["history", "-json"][..], &["log"], &["state", "list"]] {
        let (_, out, err) = b.run(args);
        assert!(!out.contains(pgserver::PASSWORD), "{args:?}: {out}");
        assert!(!err.contains(pgserver::PASSWORD), "{args:?}: {err}");
    }
}

/// Issue 33: a stack whose component states live in PostgreSQL (`stack init -backend=pg`):
/// one working copy applies it, round by round; another, on the same schema, finds every
/// component instance's state there — a plan with no changes, the same outputs.
#[test]
fn a_stack_on_postgresql_keeps_each_component_instance_in_its_own_schema() {
    let Some(server) = pgserver::shared() else {
        return;
    };
    let schema = pgserver::schema("stack");
    let sim = tempfile::tempdir().unwrap();
    let files = [
        (
            "stack.tfcomponent.hcl",
            r#"required_providers {
  sim = { source = "hashicorp/sim" }
}
variable "prefix" {
  type = string
}
provider "sim" "main" {
  config {
    region = "main"
  }
}
component "first" {
  source    = "./m"
  inputs    = { name = "${var.prefix}-first", value = "v" }
  providers = { sim = provider.sim.main }
}
component "second" {
  source    = "./m"
  inputs    = { name = "${var.prefix}-second", value = component.first.id }
  providers = { sim = provider.sim.main }
}
output "second" {
  type  = string
  value = component.second.id
}
"#,
        ),
        (
            "deploy.tfdeploy.hcl",
            "deployment \"dev\" {\n  inputs = { prefix = \"dev\" }\n}\ndeployment \"prod\" {\n  inputs = { prefix = \"prod\" }\n}\n",
        ),
        (
            "m/main.tf",
            "terraform {\n  required_providers {\n    sim = { source = \"hashicorp/sim\" }\n  }\n}\nvariable \"name\" {\n  type = string\n}\nvariable \"value\" {\n  type = string\n}\nresource \"sim_thing\" \"t\" {\n  name  = var.name\n  value = var.value\n}\noutput \"id\" {\n  value = sim_thing.t.id\n}\n",
        ),
    ];
    let copy = || {
        let mut c = Copy::new(sim.path(), "");
        std::fs::remove_file(c.dir.path().join("main.tf")).unwrap();
        for (p, text) in files {
            let path = c.dir.path().join(p);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        c.env.push(("PG_CONN_STR".into(), server.conn_str()));
        c
    };
    let a = copy();
    let flag = format!("-backend-config=schema_name={schema}");
    let out = a.ok(&["stack", "init", "-backend=pg", &flag]);
    assert!(out.contains("- Backend: pg (recorded)."), "{out}");
    let out = a.ok(&["stack", "apply", "-auto-approve"]);
    assert!(
        out.contains(
            "Stack apply complete! Resources: 4 added, 0 changed, 0 destroyed, in 3 rounds."
        ),
        "{out}"
    );
    // Each component instance is a schema of its own, beside the stack's.
    let schemas = server
        .psql(&format!(
            "SELECT string_agg(nspname, ',' ORDER BY nspname) FROM pg_namespace WHERE nspname LIKE '{schema}:%'"
        ))
        .unwrap();
    for w in ["dev.first", "dev.second", "prod.first", "prod.second"] {
        assert!(schemas.contains(&format!("{schema}:{w}")), "{schemas}");
    }
    // Nothing of the state is in the working copy: the logs are on the server.
    assert!(!a
        .dir
        .path()
        .join(".cairn/workspaces/dev.first/log")
        .exists());

    let b = copy();
    b.ok(&["stack", "init", "-backend=pg", &flag]);
    let (code, out, err) = b.run(&["stack", "plan", "-detailed-exitcode"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("4 unchanged."), "{out}");
    assert_eq!(
        b.ok(&["stack", "output", "-deployment=prod", "second"]),
        a.ok(&["stack", "output", "-deployment=prod", "second"])
    );
    let out = b.ok(&["stack", "destroy", "-auto-approve"]);
    assert!(out.contains("4 destroyed"), "{out}");
    let (code, out, _) = a.run(&["stack", "plan", "-detailed-exitcode"]);
    assert_eq!(code, 2, "{out}");
}

/// Issue 30: a TLS failure at the start of a command — the server's certificate is not one
/// the client trusts (`sslmode=verify-full` with the public roots; the test server's CA is
/// its own) — is a clear error naming the certificate, exit 1, never a panic, and no
/// password shown; with the CA given, the same commands work.
#[test]
fn an_untrusted_server_certificate_is_a_clear_error() {
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
    let sim = tempfile::tempdir().unwrap();
    let schema = pgserver::schema("tlsfail");
    let verify = server
        .conn_str()
        .replace("127.0.0.1", "localhost")
        .replace("sslmode=disable", "sslmode=verify-full");
    let mut a = Copy::new(sim.path(), &config(Some(&schema), 1));
    a.env.push(("PG_CONN_STR".into(), verify.clone()));
    for args in [
        &["init"][..],
        &["plan"],
        &["apply", "-auto-approve"],
        &["state", "list"],
    ] {
        let (code, out, err) = a.run(args);
        assert_eq!(code, 1, "{args:?}:\n{out}\n{err}");
        assert!(!err.contains("panicked"), "{args:?}:\n{err}");
        assert!(
            err.contains("certificate"),
            "{args:?}: names the TLS problem\n{err}"
        );
        assert!(
            !err.contains(pgserver::PASSWORD) && !out.contains(pgserver::PASSWORD),
            "{args:?}: no password shown"
        );
    }
    let mut b = Copy::new(sim.path(), &config(Some(&schema), 1));
    b.env.push((
        "PG_CONN_STR".into(),
        format!("{verify}&sslrootcert={}", ca.display()),
    ));
    b.ok(&["init"]);
    let out = b.ok(&["apply", "-auto-approve"]);
    assert!(out.contains("1 added"), "{out}");
}
