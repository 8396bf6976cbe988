//! Team state on PostgreSQL, end to end on the real `cairn` binary against a real server
//! (`state/tests/support/pgserver.rs`): the backend block with `-backend-config` and the
//! environment, two working copies sharing one state, concurrent applies, a runner killed
//! with SIGKILL, the server crashing mid-apply, and migration sled → PostgreSQL → sled.

#[path = "../../state/tests/support/pgserver.rs"]
mod pgserver;

#[path = "signal_at.rs"]
mod signal_at;

/// Issue 33: stack runs' history on PostgreSQL (`cairn stack history`).
#[path = "pg_stack_history.rs"]
mod stack_history;

/// Issue 33: the stack fixtures and working-copy set-up every stack test binary shares.
#[path = "stack_fixtures.rs"]
mod stack_fixtures;
use stack_fixtures::{make_stack_copy, sim_stack, DEV_AND_PROD, THING_MODULE};
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

/// A working copy of a stack whose states are on `server` (`PG_CONN_STR`): `files`
/// written in place of the root module.
fn stack_copy(sim: &Path, server: &pgserver::PgServer, files: &[(&str, &str)]) -> Copy {
    let mut c = Copy::new(sim, "");
    make_stack_copy(c.dir.path(), files);
    c.env.push(("PG_CONN_STR".into(), server.conn_str()));
    c
}

/// Components `first` and `second` of `m` ([`THING_MODULE`]), `second` holding `first`'s id.
const FIRST_SECOND: &str = r#"component "first" {
  source    = "./m"
  inputs    = { name = "${var.prefix}-first", value = "v" }
  providers = { sim = provider.sim.main }
}
component "second" {
  source    = "./m"
  inputs    = { name = "${var.prefix}-second", value = component.first.id }
  providers = { sim = provider.sim.main }
}
"#;

/// Once the destroy run of the stack in `schema` has claimed work, a runner of `copy`
/// (whose files would apply the stack: another configuration) is refused.
fn refused_while_the_destroy_runs(server: &pgserver::PgServer, schema: &str, copy: &Copy) {
    wait_for(
        "the destroy run's first claim",
        Duration::from_secs(60),
        || {
            server
                .psql(&format!(
                    "SELECT count(*) FROM \"{schema}\".cairn_stack_claims JOIN \"{schema}\".cairn_stack_runs \
                     USING (run_id) WHERE status = 'running'"
                ))
                .is_ok_and(|n| n != "0")
        },
    );
    let (code, out, err) = copy.run(&["stack", "apply", "-runner", "-auto-approve"]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        err.contains("is still running with another configuration"),
        "{err}"
    );
}

/// The fleet tests' stack: `net`, then `db` holding its id, then `app` (`for_each` over two
/// keys) holding `db`'s, each component two objects (`m`, [`fleet_files`]).
fn fleet_stack() -> String {
    sim_stack(
        r#"component "net" {
  source    = "./m"
  inputs    = { name = "${var.prefix}-net", value = "v" }
  providers = { sim = provider.sim.main }
}
component "db" {
  source    = "./m"
  inputs    = { name = "${var.prefix}-db", value = component.net.id }
  providers = { sim = provider.sim.main }
}
component "app" {
  source    = "./m"
  for_each  = toset(["a", "b"])
  inputs    = { name = "${var.prefix}-app-${each.key}", value = component.db.id }
  providers = { sim = provider.sim.main }
}
"#,
    )
}

/// The fleet stack's `apps` output.
const APPS_OUTPUT: &str = r#"output "apps" {
  type  = list(string)
  value = [for k, a in component.app : a.id]
}
"#;

/// The fleet stack's files: `stack`, two deployments, the module of two chained objects.
fn fleet_files(stack: &str) -> [(&str, &str); 3] {
    [
        ("stack.tfcomponent.hcl", stack),
        ("deploy.tfdeploy.hcl", DEV_AND_PROD),
        ("m/main.tf", "terraform {\n  required_providers {\n    sim = { source = \"hashicorp/sim\" }\n  }\n}\nvariable \"name\" {\n  type = string\n}\nvariable \"value\" {\n  type = string\n}\nresource \"sim_thing\" \"one\" {\n  name  = \"${var.name}-1\"\n  value = var.value\n}\nresource \"sim_thing\" \"two\" {\n  name  = \"${var.name}-2\"\n  value = sim_thing.one.id\n}\noutput \"id\" {\n  value = sim_thing.two.id\n}\n"),
    ]
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
        &["state", "verify"],
        &["state", "recover"],
    ] {
        check(&wrong, args, "password authentication failed");
    }
    server.pg_ctl_stop("fast");
    for args in [
        &["plan"][..],
        &["apply", "-auto-approve"],
        &["state", "list"],
        &["state", "recover"],
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
    let stack = sim_stack(&format!(
        "{FIRST_SECOND}output \"second\" {{\n  type  = string\n  value = component.second.id\n}}\n"
    ));
    let files = [
        ("stack.tfcomponent.hcl", stack.as_str()),
        ("deploy.tfdeploy.hcl", DEV_AND_PROD),
        ("m/main.tf", THING_MODULE),
    ];
    let copy = || stack_copy(sim.path(), server, &files);
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

/// Issue 30: `state recover` on PostgreSQL. A row of the last apply deleted behind the
/// triggers' back makes `state verify` fail; a least-privilege role cannot lift the log's
/// append-only protection, so its recovery is refused with the reason and changes nothing;
/// the role that owns the tables (not a superuser) recovers in one transaction: the three
/// tables copied as they were into `cairn_damaged_<ms>_*` (the copy append-only too), the rows
/// after the last good event gone from the log, the trigger and the privileges restored, the
/// recovery a run in the history, the object whose history was lost listed.
#[test]
fn state_recover_sets_the_damaged_rows_aside_in_one_transaction() {
    let Some(server) = pgserver::shared() else {
        return;
    };
    let schema = pgserver::schema("recover");
    let owner = format!("{schema}_owner");
    server
        .psql(&format!(
            "CREATE ROLE {owner} LOGIN PASSWORD 'owner-pw'; \
             GRANT CREATE ON DATABASE postgres TO {owner};"
        ))
        .unwrap();
    let sim = tempfile::tempdir().unwrap();
    let mut a = Copy::new(sim.path(), &config(Some(&schema), 3));
    a.env
        .push(("PG_CONN_STR".into(), server.conn_str_as(&owner, "owner-pw")));
    a.ok(&["init"]);
    a.ok(&["apply", "-auto-approve"]);
    std::fs::write(a.dir.path().join("main.tf"), config(Some(&schema), 4)).unwrap();
    a.ok(&["apply", "-auto-approve"]);
    let second: u64 = {
        let h = a.ok(&["history", "-json"]);
        let last: serde_json::Value = serde_json::from_str(h.lines().last().unwrap()).unwrap();
        last["id"].as_u64().unwrap()
    };
    let t = format!("{schema}.cairn_events");
    let count = |sql: &str| -> u64 { server.psql(sql).unwrap().trim().parse().unwrap() };
    let rows = count(&format!("SELECT count(*) FROM {t}"));
    let gone = second + 3;
    assert!(gone < rows, "{gone} {rows}");
    server
        .psql(&format!(
            "ALTER TABLE {t} DISABLE TRIGGER USER; DELETE FROM {t} WHERE seq = {gone}; \
             ALTER TABLE {t} ENABLE TRIGGER USER;"
        ))
        .unwrap();
    let (code, _, err) = a.run(&["state", "verify"]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains(&format!("is damaged from event {gone} on")),
        "{err}"
    );
    assert!(err.contains("cairn state recover"), "{err}");
    assert!(err.contains("Or restore the schema from a backup"), "{err}");

    // A least-privilege role (README's): refused, nothing changed.
    let runner = format!("{schema}_runner");
    server
        .psql(&format!(
            "CREATE ROLE {runner} LOGIN PASSWORD 'runner-pw';
             GRANT USAGE ON SCHEMA {schema} TO {runner};
             GRANT SELECT, INSERT ON {t}, {schema}.cairn_meta TO {runner};
             GRANT SELECT, INSERT, UPDATE ON {schema}.cairn_head TO {runner};
             GRANT SELECT, INSERT, UPDATE, DELETE ON {schema}.cairn_checkpoints, {schema}.cairn_lock
                 TO {runner};"
        ))
        .unwrap();
    a.env.push((
        "PG_CONN_STR".into(),
        server.conn_str_as(&runner, "runner-pw"),
    ));
    let (code, out, err) = a.run(&["state", "recover"]);
    a.env.pop();
    assert_eq!(code, 1, "{out}\n{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(err.contains("Nothing was changed"), "{err}");
    assert!(
        err.contains("only the role that owns the Cairn tables"),
        "{err}"
    );
    assert!(!err.contains("runner-pw"), "{err}");
    let backups = || {
        server
            .psql(&format!(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = \
                 '{schema}' AND table_name LIKE 'cairn\\_damaged\\_%' ORDER BY table_name"
            ))
            .unwrap()
    };
    assert_eq!(backups().trim(), "", "a refused recovery leaves no copy");
    assert_eq!(count(&format!("SELECT count(*) FROM {t}")), rows - 1);
    assert_eq!(a.run(&["state", "verify"]).0, 1, "still damaged");

    // The owner recovers.
    let out = a.ok(&["state", "recover"]);
    assert!(out.contains("Recovered the state"), "{out}");
    assert!(
        out.contains(&format!("The log goes on from event {}", gone - 1)),
        "{out}"
    );
    assert!(out.contains("cairn_damaged_"), "{out}");
    assert!(out.contains("Runs whose history was lost: run"), "{out}");
    assert!(
        out.contains("Objects whose history was lost (import them again):\n  sim_thing.t3"),
        "{out}"
    );
    assert!(!out.contains("owner-pw"), "{out}");
    let verified = a.ok(&["state", "verify"]);
    assert!(verified.contains("The state log is intact"), "{verified}");
    assert!(a.ok(&["history"]).contains("state recover"));
    assert!(a.ok(&["log"]).contains("State recovered from damage"));
    // The copy: the three tables as they were, the events append-only.
    let tables: Vec<String> = backups().lines().map(str::to_string).collect();
    assert_eq!(tables.len(), 3, "{tables:?}");
    let copy = tables
        .iter()
        .find(|n| n.ends_with("_events"))
        .expect("events copy");
    assert_eq!(
        count(&format!("SELECT count(*) FROM {schema}.{copy}")),
        rows - 1
    );
    assert_eq!(
        count(&format!("SELECT max(seq) FROM {schema}.{copy}")),
        rows
    );
    let err = server
        .psql(&format!("DELETE FROM {schema}.{copy} WHERE seq = 1"))
        .unwrap_err();
    assert!(err.contains("append-only"), "{err}");
    // The log: nothing after the last good event but the recovery run; its protection back.
    let recovered_from: u64 = count(&format!(
        "SELECT min(seq) FROM {t} WHERE seq >= {}",
        gone - 1
    ));
    assert_eq!(recovered_from, gone - 1);
    let err = server
        .psql(&format!("DELETE FROM {t} WHERE seq = 1"))
        .unwrap_err();
    assert!(err.contains("append-only"), "{err}");
    assert_eq!(
        server
            .psql(&format!(
                "SELECT tgenabled FROM pg_trigger WHERE tgrelid = '{t}'::regclass \
                 AND tgname = 'cairn_events_append_only'"
            ))
            .unwrap()
            .trim(),
        "O"
    );
    assert_eq!(
        server
            .psql(&format!(
                "SELECT has_table_privilege('{owner}', '{t}', 'DELETE')"
            ))
            .unwrap()
            .trim(),
        "f"
    );
    // The state goes on without the lost object's history: t3 is to be imported again.
    let listed = a.ok(&["state", "list"]);
    let instances: Vec<&str> = listed
        .lines()
        .filter(|l| l.starts_with("sim_thing."))
        .collect();
    assert_eq!(
        instances,
        ["sim_thing.t0", "sim_thing.t1", "sim_thing.t2"],
        "{listed}"
    );
    let (code, _, err) = a.run(&["state", "recover"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("nothing to recover"), "{err}");
}

/// Issue 30's fault matrix on PostgreSQL: SIGINT and SIGTERM at each phase of an apply (load,
/// refresh, plan, the provider calls, the state writes at the end): no panic, exit 0 (the
/// signal came after the run finished) or 1; the lock is free (the next apply takes it at
/// once) and its holder record gone, the log reads whole, and the next apply converges.
#[test]
fn signals_at_every_phase_on_postgresql_leave_a_whole_state_and_a_free_lock() {
    let Some(server) = pgserver::shared() else {
        return;
    };
    let schema = pgserver::schema("signals");
    let sim = tempfile::tempdir().unwrap();
    let first = config(Some(&schema), 3);
    let mut a = Copy::new(sim.path(), &first);
    a.env.push(("PG_CONN_STR".into(), server.conn_str()));
    a.ok(&["init"]);
    a.ok(&["apply", "-auto-approve"]);
    // The next run: an update and two creates, each call 150 ms.
    let next = format!(
        "{}resource \"sim_thing\" \"n0\" {{\n  name = \"n0\"\n}}\n\
         resource \"sim_thing\" \"n1\" {{\n  name = \"n1\"\n}}\n",
        first.replace("name = \"t1\"", "name = \"t1\"\n  value = \"x\"")
    );
    a.env.push(("SIM_LATENCY_MS".into(), "150".into()));
    let mut phases = std::collections::BTreeSet::new();
    for (phase, marker) in signal_at::PHASES {
        for signal in [libc::SIGINT, libc::SIGTERM] {
            std::fs::write(a.dir.path().join("main.tf"), &next).unwrap();
            let what = format!("signal {signal} at {phase}");
            let run = signal_at::signal_at(a.command(&["apply", "-auto-approve"]), *marker, signal);
            let (code, out, err) = (run.code, run.out, run.err);
            assert!(!err.contains("panicked"), "{what}\n{err}");
            // A signal before Cairn installed its handler (while it reads the configuration,
            // before the state is opened) ends the process as the signal does (no code):
            // nothing was written then.
            assert!(
                code == 0 || code == 1 || code == -1 && out.is_empty(),
                "{what}: exit {code}\n{out}\n{err}"
            );
            if run.hit {
                phases.insert(*phase);
            }
            let holders = server
                .psql(&format!("SELECT count(*) FROM {schema}.cairn_lock"))
                .unwrap();
            assert_eq!(holders.trim(), "0", "{what}: a holder record is left");
            let checked = a.ok(&["state", "check"]);
            assert!(checked.contains("consistent"), "{what}: {checked}");
            std::fs::write(a.dir.path().join("main.tf"), &first).unwrap();
            a.ok(&["apply", "-auto-approve", "-lock-timeout=0s"]);
        }
    }
    assert_eq!(
        phases.len(),
        signal_at::PHASES.len(),
        "the signals hit too few phases: {phases:?}"
    );
    std::fs::write(a.dir.path().join("main.tf"), &next).unwrap();
    a.ok(&["apply", "-auto-approve", "-lock-timeout=0s"]);
    let out = a.ok(&["plan"]);
    assert!(out.contains("No changes."), "{out}");
    assert_eq!(things(sim.path()), 5, "one object per name");
}

/// Issue 33: a fleet of runners (`stack apply -runner`) sharing one stack through
/// PostgreSQL. Three runner processes, each in its own working directory, apply a stack of
/// three components wired through outputs (one with `for_each`) in two deployments; one
/// runner is killed with SIGKILL while it applies a component it claimed. The others take
/// its work over: every object is created exactly once, every downstream component was
/// claimed only after its upstream one was finished, the run converges, and a plan after it
/// shows no changes. Then two runners destroy a deployment (`destroy = true`), dependents
/// first, while a runner with the old files is refused.
#[test]
fn three_runners_share_a_stack_and_survive_one_killed_mid_apply() {
    let Some(server) = pgserver::shared() else {
        return;
    };
    let schema = pgserver::schema("fleet");
    let sim = tempfile::tempdir().unwrap();
    let stack = format!("{}{APPS_OUTPUT}", fleet_stack());
    let files = fleet_files(&stack);
    let flag = format!("-backend-config=schema_name={schema}");
    let copy = || {
        let mut c = stack_copy(sim.path(), server, &files);
        c.env.push(("SIM_LATENCY_MS".into(), "700".into()));
        c.ok(&["stack", "init", "-backend=pg", &flag]);
        c
    };
    let copies = [copy(), copy(), copy()];
    let mut runners: Vec<Child> = copies
        .iter()
        .map(|c| {
            c.spawn(&[
                "stack",
                "apply",
                "-runner",
                "-auto-approve",
                "-parallelism=2",
            ])
        })
        .collect();
    let q = |sql: &str| server.psql(sql).unwrap();
    // Wait for a runner to be in the middle of applying a component it claimed (its row
    // still pending), then kill that runner.
    let pids: Vec<u32> = runners.iter().map(|r| r.id()).collect();
    let mut victim = None;
    wait_for(
        "a claimed component mid-apply",
        Duration::from_secs(90),
        || {
            // (Empty until the first runner made the tables.)
            let held = server.psql(&format!(
            "SELECT c.runner FROM \"{schema}\".cairn_stack_claims c JOIN \"{schema}\".cairn_stack_work w \
             USING (run_id, item) WHERE w.status = 'pending' AND w.component = 'db' ORDER BY c.claimed_ms LIMIT 1"
        )).unwrap_or_default();
            victim = held
                .split(':')
                .nth(1)
                .and_then(|p| p.parse::<u32>().ok())
                .and_then(|p| pids.iter().position(|x| *x == p));
            // Its run in the component's state has begun (the stack run's record names it).
            victim.is_some_and(|v| {
                server
                    .psql(&format!(
                        "SELECT count(*) FROM \"{schema}\".cairn_stack_history WHERE \
                         convert_from(data, 'UTF8') LIKE '%\"kind\":\"run_begun\"%' AND \
                         convert_from(data, 'UTF8') LIKE '%:{}:%component.db (%'",
                        pids[v]
                    ))
                    .is_ok_and(|n| n != "0")
            })
        },
    );
    std::thread::sleep(Duration::from_millis(600));
    let victim = victim.unwrap();
    let mut killed = runners.remove(victim);
    killed.kill().unwrap(); // SIGKILL
    let (_, killed_out, _) = finish(killed);
    let ends: Vec<_> = runners.into_iter().map(finish).collect();
    let everything = format!("killed runner:\n{killed_out}\n{ends:#?}");
    let mut outs = vec![killed_out];
    for (code, out, _) in ends {
        assert_eq!(code, 0, "a surviving runner:\n{everything}");
        assert!(out.contains("Stack apply complete! Stack run"), "{out}");
        assert!(out.contains("apps = tolist(["), "{out}");
        outs.push(out);
    }
    let all = outs.join("\n");
    assert!(
        all.contains("taking over from runner"),
        "a survivor took the killed runner's component over:\n{all}"
    );
    // The stack run's one record links every component run that touched the killed
    // runner's item: its own (interrupted, by it; unfinished in the component's state) and
    // that of the runner that took the item over.
    let victim_pid = format!(":{}:", pids[victim]);
    let list = copies[0].ok(&["stack", "history", "-json"]);
    let run: serde_json::Value = serde_json::from_str(list.lines().last().unwrap()).unwrap();
    let run_id = run["id"].as_str().unwrap();
    assert!(
        run["summary"].as_str().unwrap().contains("interrupted)"),
        "{run}"
    );
    let record: serde_json::Value =
        serde_json::from_str(&copies[0].ok(&["stack", "history", run_id, "-json"])).unwrap();
    let steps = record["steps"].as_array().unwrap();
    let dead = steps
        .iter()
        .find(|s| {
            s["status"] == "interrupted"
                && s["runner"].as_str().unwrap().contains(&victim_pid)
                && s["item"].as_str().unwrap().starts_with("component.db (")
        })
        .unwrap_or_else(|| panic!("the killed runner's item in {record:#}"));
    let parts = dead["components"].as_array().unwrap();
    assert_eq!(parts.len(), 1, "{dead:#}");
    let part = &parts[0];
    assert_eq!(part["status"], "interrupted", "{dead:#}");
    let dead_run = part["runs"][0].as_u64().unwrap();
    let ws = part["workspace"].as_str().unwrap();
    let mut cmd = copies[0].command(&["history", "-json"]);
    cmd.env("TF_WORKSPACE", ws);
    let state_runs: Vec<serde_json::Value> = String::from_utf8(cmd.output().unwrap().stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let in_state = state_runs
        .iter()
        .find(|r| r["id"] == dead_run)
        .unwrap_or_else(|| panic!("run {dead_run} in {ws}: {state_runs:#?}"));
    assert_eq!(in_state["pid"], pids[victim], "{in_state}");
    assert!(
        ["unfinished", "interrupted"].contains(&in_state["outcome"].as_str().unwrap()),
        "{in_state}"
    );
    let taker = steps
        .iter()
        .find(|s| s["item"] == dead["item"] && s["status"] == "done")
        .unwrap_or_else(|| panic!("the item taken over in {record:#}"));
    assert!(
        !taker["runner"].as_str().unwrap().contains(&victim_pid),
        "{taker:#}"
    );
    let taker_runs = taker["components"][0]["runs"].as_array().unwrap();
    assert!(
        !taker_runs.is_empty() && !taker_runs.contains(&dead["components"][0]["runs"][0]),
        "{taker:#}"
    );
    let text = copies[0].ok(&["stack", "history", run_id]);
    let line = format!(
        "{}: interrupted by runner {}",
        dead["item"].as_str().unwrap(),
        dead["runner"].as_str().unwrap()
    );
    assert!(text.contains(&line), "{line}:\n{text}");
    assert!(
        text.contains(&format!(
            "{}: interrupted; state {ws}, run {dead_run}",
            part["address"].as_str().unwrap()
        )),
        "{text}"
    );
    // Every object exactly once: one successful create per name, 16 objects in the store.
    let calls = std::fs::read_to_string(sim.path().join("calls.jsonl")).unwrap();
    let mut created: std::collections::BTreeMap<String, usize> = Default::default();
    for l in calls.lines() {
        let j: serde_json::Value = serde_json::from_str(l).unwrap();
        if j["op"] == "create" && j["ok"] == true {
            *created
                .entry(j["name"].as_str().unwrap().to_string())
                .or_default() += 1;
        }
    }
    assert_eq!(created.len(), 16, "{created:?}");
    assert!(created.values().all(|n| *n == 1), "{created:?}");
    let stored = std::fs::read_dir(sim.path().join("things/main"))
        .unwrap()
        .count();
    assert_eq!(stored, 16);
    // Every component instance's apply reported once, by one runner.
    for d in ["dev", "prod"] {
        for a in [
            "component.net",
            "component.db",
            "component.app[\"a\"]",
            "component.app[\"b\"]",
        ] {
            let line = format!("{a} ({d}): Apply complete!");
            assert_eq!(all.matches(&line).count(), 1, "{line}:\n{all}");
        }
    }
    // Every item done; no downstream claim before its upstream item was finished.
    let status = q(&format!(
        "SELECT string_agg(DISTINCT status, ',') FROM \"{schema}\".cairn_stack_work"
    ));
    assert_eq!(status, "done");
    let early = q(&format!(
        "SELECT count(*) FROM \"{schema}\".cairn_stack_claims c \
         JOIN \"{schema}\".cairn_stack_work d USING (run_id, item) \
         JOIN \"{schema}\".cairn_stack_work u ON u.run_id = d.run_id AND u.deployment = d.deployment \
         AND ((d.component = 'db' AND u.component = 'net') OR (d.component = 'app' AND u.component = 'db')) \
         WHERE c.claimed_ms < u.finished_ms"
    ));
    assert_eq!(early, "0");
    let takeovers = q(&format!(
        "SELECT count(*) FROM (SELECT item FROM \"{schema}\".cairn_stack_claims GROUP BY item \
         HAVING count(DISTINCT runner) > 1) t"
    ));
    // The killed runner's claims (one per item it was applying) were taken over, by
    // runners that name it.
    assert!(takeovers.parse::<usize>().unwrap() >= 1, "{takeovers}");
    for l in all
        .lines()
        .filter(|l| l.contains("taking over from runner"))
    {
        assert!(l.contains(&victim_pid), "{l}");
    }
    let (code, out, err) = copies[0].run(&["stack", "plan", "-detailed-exitcode"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("8 unchanged."), "{out}");
    // A runner started now finds the run ended and starts another: nothing to change.
    let out = copies[1].ok(&["stack", "apply", "-runner", "-auto-approve"]);
    assert!(out.contains("started stack run"), "{out}");
    assert!(
        out.contains("Resources it applied: 0 added, 0 changed, 0 destroyed"),
        "{out}"
    );

    // Deployment prod destroyed by two runners: dependents first, dev left as it is.
    let deploy = "deployment \"dev\" {\n  inputs = { prefix = \"dev\" }\n}\ndeployment \"prod\" {\n  inputs = { prefix = \"prod\" }\n  destroy = true\n}\n";
    for c in &copies[..2] {
        std::fs::write(c.dir.path().join("deploy.tfdeploy.hcl"), deploy).unwrap();
    }
    let runners: Vec<Child> = copies[..2]
        .iter()
        .map(|c| c.spawn(&["stack", "apply", "-runner", "-auto-approve"]))
        .collect();
    // While that run goes on, a runner with other stack files is refused.
    refused_while_the_destroy_runs(server, &schema, &copies[2]);
    let mut destroyed = 0;
    for r in runners {
        let (code, out, err) = finish(r);
        assert_eq!(code, 0, "{out}\n{err}");
        destroyed += out
            .lines()
            .filter(|l| l.contains("(prod): Apply complete!"))
            .map(|l| {
                l.split(", ")
                    .nth(2)
                    .unwrap()
                    .split(' ')
                    .next()
                    .unwrap()
                    .parse::<usize>()
                    .unwrap()
            })
            .sum::<usize>();
    }
    assert_eq!(destroyed, 8);
    let stored = std::fs::read_dir(sim.path().join("things/main"))
        .unwrap()
        .count();
    assert_eq!(stored, 8);
    let early = q(&format!(
        "SELECT count(*) FROM \"{schema}\".cairn_stack_claims c \
         JOIN \"{schema}\".cairn_stack_work d USING (run_id, item) \
         JOIN \"{schema}\".cairn_stack_work u ON u.run_id = d.run_id AND u.deployment = d.deployment \
         AND ((d.component = 'net' AND u.component = 'db') OR (d.component = 'db' AND u.component = 'app')) \
         WHERE d.deployment = 'prod' AND c.claimed_ms < u.finished_ms AND d.run_id = \
         (SELECT run_id FROM \"{schema}\".cairn_stack_runs ORDER BY started_ms DESC LIMIT 1)"
    ));
    assert_eq!(early, "0");

    // The app component removed (a removed block): a runner destroys dev's two instances.
    let text = files[0].1;
    let without_app = format!(
        "{}removed {{\n  from   = component.app\n  source = \"./m\"\n}}\n",
        &text[..text.find("component \"app\"").unwrap()]
    );
    std::fs::write(
        copies[0].dir.path().join("stack.tfcomponent.hcl"),
        without_app,
    )
    .unwrap();
    let out = copies[0].ok(&["stack", "apply", "-runner", "-auto-approve"]);
    assert!(
        out.contains("component.app[\"a\"] (dev, removed): claimed."),
        "{out}"
    );
    assert!(
        out.contains("Resources it applied: 0 added, 0 changed, 4 destroyed."),
        "{out}"
    );
    let stored = std::fs::read_dir(sim.path().join("things/main"))
        .unwrap()
        .count();
    assert_eq!(stored, 4);

    // Without -auto-approve a runner applies what a deployment group's rules approve: dev's
    // app comes back (no object destroyed), prod, in no group, is not approved.
    let deploy = "deployment_auto_approve \"no_destroy\" {\n  check {\n    condition = context.plan.changes.remove == 0\n    reason    = \"It destroys.\"\n  }\n}\ndeployment_group \"canary\" {\n  auto_approve_checks = [deployment_auto_approve.no_destroy]\n}\ndeployment \"dev\" {\n  inputs = { prefix = \"dev\" }\n  deployment_group = deployment_group.canary\n}\ndeployment \"prod\" {\n  inputs = { prefix = \"prod\" }\n}\n";
    std::fs::write(copies[2].dir.path().join("deploy.tfdeploy.hcl"), deploy).unwrap();
    let (code, out, err) = copies[2].run(&["stack", "apply", "-runner"]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        out.contains("component.app[\"a\"] (dev): Apply complete! Resources: 2 added"),
        "{out}"
    );
    assert!(out.contains("component.net (prod): apply failed."), "{out}");
    assert!(err.contains("Plan not approved"), "{err}");
    assert!(err.contains("in no deployment_group"), "{err}");
    assert!(err.contains("component.db (prod): blocked"), "{err}");
    let stored = std::fs::read_dir(sim.path().join("things/main"))
        .unwrap()
        .count();
    assert_eq!(stored, 8);
}

/// Issue 33: `cairn stack destroy -runner`. Three runner processes destroy a stack of
/// three components wired through outputs (one with `for_each`) in two deployments: they
/// share one destroy run, each component instance is destroyed exactly once, by the runner
/// that claimed it, and only after every component that depends on it was destroyed;
/// meanwhile a runner that would apply the same files is refused (the destroy run is
/// another configuration).
#[test]
fn three_runners_destroy_a_stack_dependents_first() {
    let Some(server) = pgserver::shared() else {
        return;
    };
    let schema = pgserver::schema("fleetdestroy");
    let sim = tempfile::tempdir().unwrap();
    let stack = fleet_stack();
    let files = fleet_files(&stack);
    let flag = format!("-backend-config=schema_name={schema}");
    let copy = |latency: &str| {
        let mut c = stack_copy(sim.path(), server, &files);
        c.env.push(("SIM_LATENCY_MS".into(), latency.into()));
        c.ok(&["stack", "init", "-backend=pg", &flag]);
        c
    };
    let copies = [copy("300"), copy("300"), copy("300"), copy("0")];
    copies[3].ok(&["stack", "apply", "-auto-approve"]);
    let stored = || {
        std::fs::read_dir(sim.path().join("things/main"))
            .map(|d| d.count())
            .unwrap_or(0)
    };
    assert_eq!(stored(), 16);
    let runners: Vec<Child> = copies[..3]
        .iter()
        .map(|c| {
            c.spawn(&[
                "stack",
                "destroy",
                "-runner",
                "-auto-approve",
                "-parallelism=2",
            ])
        })
        .collect();
    let q = |sql: &str| server.psql(sql).unwrap();
    refused_while_the_destroy_runs(server, &schema, &copies[3]);
    let mut outs = Vec::new();
    for r in runners {
        let (code, out, err) = finish(r);
        assert_eq!(code, 0, "{out}\n{err}");
        assert!(out.contains("Stack destroy complete! Stack run"), "{out}");
        outs.push(out);
    }
    let all = outs.join("\n");
    // One destroy run, shared: every runner names the same one.
    let run_ids: std::collections::BTreeSet<&str> = all
        .lines()
        .filter_map(|l| l.split(" stack run ").nth(1))
        .filter_map(|r| r.split(' ').next())
        .collect();
    assert_eq!(run_ids.len(), 1, "{all}");
    // Each instance destroyed once (its two objects), by one runner; the store is empty.
    for d in ["dev", "prod"] {
        for a in [
            "component.net",
            "component.db",
            "component.app[\"a\"]",
            "component.app[\"b\"]",
        ] {
            let line =
                format!("{a} ({d}): Apply complete! Resources: 0 added, 0 changed, 2 destroyed.");
            assert_eq!(all.matches(&line).count(), 1, "{line}:\n{all}");
        }
    }
    assert_eq!(stored(), 0);
    let deletes = std::fs::read_to_string(sim.path().join("calls.jsonl"))
        .unwrap()
        .lines()
        .filter(|l| l.contains("\"op\": \"delete\"") && l.contains("\"ok\": true"))
        .count();
    assert_eq!(deletes, 16);
    // Reverse dependency order: no component claimed before its dependents were finished.
    let run = format!(
        "(SELECT run_id FROM \"{schema}\".cairn_stack_runs ORDER BY started_ms DESC LIMIT 1)"
    );
    let early = q(&format!(
        "SELECT count(*) FROM \"{schema}\".cairn_stack_claims c \
         JOIN \"{schema}\".cairn_stack_work d USING (run_id, item) \
         JOIN \"{schema}\".cairn_stack_work u ON u.run_id = d.run_id AND u.deployment = d.deployment \
         AND ((d.component = 'net' AND u.component = 'db') OR (d.component = 'db' AND u.component = 'app')) \
         WHERE c.claimed_ms < u.finished_ms AND d.run_id = {run}"
    ));
    assert_eq!(early, "0");
    let status = q(&format!(
        "SELECT string_agg(DISTINCT status, ',') FROM \"{schema}\".cairn_stack_work WHERE run_id = {run}"
    ));
    assert_eq!(status, "done");
    let claimers = q(&format!(
        "SELECT count(DISTINCT runner) FROM \"{schema}\".cairn_stack_claims WHERE run_id = {run}"
    ));
    assert!(claimers.parse::<usize>().unwrap() >= 2, "{claimers}");
    // Nothing left: a plan adds everything again.
    let (code, out, err) = copies[3].run(&["stack", "plan", "-detailed-exitcode"]);
    assert_eq!(code, 2, "{out}{err}");
    assert!(out.contains("component.net: 2 to add"), "{out}");
}
