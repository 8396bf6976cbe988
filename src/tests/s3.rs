//! Where state lives, end to end on the real `cairn` binary: a backend Cairn has no store for
//! is an error naming it, never an empty local state in its place.

#[path = "signal_at.rs"]
mod signal_at;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

fn cairn(dir: &Path, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_cairn"))
        .args(args)
        .current_dir(dir)
        .env("NO_COLOR", "1")
        .env_remove("CAIRN_STATE_DIR")
        .env_remove("TF_WORKSPACE")
        .stdin(Stdio::null())
        .output()
        .expect("cairn runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Every backend Cairn does not keep state in — and a `cloud` block — stops `init` and every
/// other command with an error at the block that names it and says how to bring the state
/// over; nothing is created. In a child module the block is ignored with a warning, as
/// Terraform does.
#[test]
fn unsupported_backends_are_errors_that_say_how_to_bring_the_state_over() {
    let cases = [
        (
            "gcs",
            "terraform {\n  backend \"gcs\" {\n    bucket = \"b\"\n  }\n}\n",
            "backend \"gcs\"",
            "main.tf:2:3",
        ),
        (
            "azurerm",
            "terraform {\n  backend \"azurerm\" {}\n}\n",
            "backend \"azurerm\"",
            "main.tf:2:3",
        ),
        (
            "remote",
            "terraform {\n  backend \"remote\" {}\n}\n",
            "backend \"remote\"",
            "main.tf:2:3",
        ),
        (
            "http",
            "terraform {\n  backend \"http\" {}\n}\n",
            "backend \"http\"",
            "main.tf:2:3",
        ),
        (
            "consul",
            "terraform {\n  backend \"consul\" {}\n}\n",
            "backend \"consul\"",
            "main.tf:2:3",
        ),
        (
            "kubernetes",
            "\nterraform {\n  backend \"kubernetes\" {}\n}\n",
            "backend \"kubernetes\"",
            "main.tf:3:3",
        ),
        (
            "cloud",
            "terraform {\n  cloud {\n    organization = \"o\"\n  }\n}\n",
            "HCP Terraform (cloud block)",
            "main.tf:2:3",
        ),
    ];
    for (name, tf, what, at) in cases {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("main.tf"), tf).unwrap();
        for cmd in [
            &["init"][..],
            &["plan"],
            &["apply", "-auto-approve"],
            &["state", "list"],
        ] {
            let (code, out, err) = cairn(dir.path(), cmd);
            assert_eq!(code, 1, "{name} {cmd:?}:\n{out}\n{err}");
            assert!(
                err.contains(&format!("Error: Unsupported {what}")),
                "{name} {cmd:?}:\n{err}"
            );
            assert!(
                err.contains(&format!("on {at}:")) || err.contains(&format!("at {at}.")),
                "{name} {cmd:?}:\n{err}"
            );
            assert!(
                err.contains("`terraform state pull > x.tfstate`")
                    && err.contains("`cairn state import-tfstate x.tfstate`"),
                "{name} {cmd:?}:\n{err}"
            );
            assert!(!err.contains("Warning"), "{name}: {err}");
        }
        assert!(
            !dir.path().join(".cairn").exists(),
            "{name}: no state may be created"
        );
    }

    // In a child module: a warning, and the root's (local) state works.
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("child")).unwrap();
    std::fs::write(
        dir.path().join("child/main.tf"),
        "terraform {\n  backend \"gcs\" {}\n}\noutput \"x\" {\n  value = 1\n}\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("main.tf"),
        "module \"c\" {\n  source = \"./child\"\n}\noutput \"x\" {\n  value = module.c.x\n}\n",
    )
    .unwrap();
    let (code, out, err) = cairn(dir.path(), &["init"]);
    assert_eq!(code, 0, "{out}\n{err}");
    let all = format!("{out}{err}");
    assert!(
        all.contains("Warning: Backend configuration ignored"),
        "{all}"
    );
    assert!(all.contains("child/main.tf:2:3"), "{all}");
}

#[path = "../../state/tests/support/s3server.rs"]
mod s3server;

use std::process::Child;
use std::time::{Duration, Instant};

const KEY: &str = "team/terraform.tfstate";

/// Issue 33: stack runs' history on S3 (`cairn stack history`).
#[path = "s3_stack_history.rs"]
mod stack_history;

/// Issue 33: the stack fixtures and working-copy set-up every stack test binary shares.
#[path = "stack_fixtures.rs"]
mod stack_fixtures;
use stack_fixtures::{make_stack_copy, s3_stack_init, SIM_MAIN, SIM_REQUIRED, THING_MODULE};

/// A Cairn working copy on the S3 server's bucket, sharing the sim store `sim`.
struct Copy {
    dir: tempfile::TempDir,
    sim: std::path::PathBuf,
    env: Vec<(String, String)>,
}

fn backend_block(bucket: &str) -> String {
    format!(
        "terraform {{\n  backend \"s3\" {{\n    bucket = \"{bucket}\"\n    key    = \"{KEY}\"\n    \
         region = \"us-east-1\"\n    use_path_style = true\n    use_lockfile = true\n    \
         encrypt = true\n    skip_credentials_validation = true\n    skip_requesting_account_id = true\n    \
         skip_region_validation = true\n  }}\n}}\n"
    )
}

fn things(n: usize) -> String {
    (0..n)
        .map(|i| format!("resource \"sim_thing\" \"t{i}\" {{\n  name = \"t{i}\"\n}}\n"))
        .collect()
}

impl Copy {
    fn new(sim: &Path, tf: &str, env: &[(&str, String)]) -> Copy {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("main.tf"), tf).unwrap();
        Copy {
            dir,
            sim: sim.to_path_buf(),
            env: env
                .iter()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect(),
        }
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_cairn"));
        c.args(args)
            .current_dir(self.dir.path())
            .env("NO_COLOR", "1")
            .env("SIM_STORE", &self.sim)
            .env_remove("CAIRN_STATE_DIR")
            .env_remove("TF_WORKSPACE")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for k in [
            "AWS_ACCESS_KEY_ID",
            "AWS_SECRET_ACCESS_KEY",
            "AWS_SESSION_TOKEN",
            "AWS_PROFILE",
            "AWS_ENDPOINT_URL",
            "AWS_ENDPOINT_URL_S3",
            "AWS_SHARED_CREDENTIALS_FILE",
            "AWS_CONFIG_FILE",
            "AWS_REGION",
            "AWS_DEFAULT_REGION",
            "AWS_ENDPOINT_URL_STS",
            "AWS_ENDPOINT_URL_SSO",
            "AWS_WEB_IDENTITY_TOKEN_FILE",
            "AWS_ROLE_ARN",
            "AWS_ROLE_SESSION_NAME",
        ] {
            c.env_remove(k);
        }
        c.env("HOME", self.dir.path());
        for (k, v) in &self.env {
            c.env(k, v);
        }
        c
    }

    fn run(&self, args: &[&str]) -> (i32, String, String) {
        let out = self.command(args).output().expect("cairn runs");
        let r = (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        );
        assert!(
            !r.1.contains(s3server::SECRET_KEY) && !r.2.contains(s3server::SECRET_KEY),
            "cairn {args:?} printed the secret key:\n{}\n{}",
            r.1,
            r.2
        );
        // A presigned URL is a credential too.
        assert!(
            !r.2.contains("X-Amz-Signature"),
            "cairn {args:?} printed a signed URL:\n{}",
            r.2
        );
        r
    }

    fn ok(&self, args: &[&str]) -> String {
        let (code, out, err) = self.run(args);
        assert_eq!(code, 0, "cairn {args:?}:\n{out}\n{err}");
        out
    }
}

/// A working copy of a stack of two components on S3 (`second` holds `first`'s id; one
/// deployment), sharing the sim store `sim`; `s3_stack_init` initializes it.
fn stack_copy(sim: &Path, server: &s3server::S3Server) -> Copy {
    let c = Copy::new(sim, "", &env_creds(&server.endpoint()));
    let stack = format!(
        "{SIM_REQUIRED}{SIM_MAIN}{}",
        r#"component "first" {
  source    = "./m"
  inputs    = { name = "first", value = "v" }
  providers = { sim = provider.sim.main }
}
component "second" {
  source    = "./m"
  inputs    = { name = "second", value = component.first.id }
  providers = { sim = provider.sim.main }
}
"#
    );
    make_stack_copy(
        c.dir.path(),
        &[
            ("stack.tfcomponent.hcl", &stack),
            (
                "deploy.tfdeploy.hcl",
                "deployment \"dev\" {\n  inputs = {}\n}\n",
            ),
            ("m/main.tf", THING_MODULE),
        ],
    );
    c
}

/// A stack on the test S3 server in a bucket of its own: its working copies share one sim
/// store ([`stack_copy`]) and are initialized with `init`.
struct S3Stack {
    server: &'static s3server::S3Server,
    bucket: String,
    sim: tempfile::TempDir,
    init: Vec<String>,
}

impl S3Stack {
    /// `None` where no S3 server can be started (the tests then skip).
    fn new(name: &str) -> Option<S3Stack> {
        let server = s3server::shared()?;
        let bucket = s3server::bucket_name(name);
        server.bucket(&bucket);
        Some(S3Stack {
            server,
            init: s3_stack_init(&bucket, KEY),
            bucket,
            sim: tempfile::tempdir().unwrap(),
        })
    }

    /// A new working copy of the stack, not initialized yet.
    fn copy(&self) -> Copy {
        stack_copy(self.sim.path(), self.server)
    }

    /// `cairn stack init -backend=s3 …` for this bucket.
    fn init(&self) -> Vec<&str> {
        self.init.iter().map(String::as_str).collect()
    }
}

fn env_creds(endpoint: &str) -> Vec<(&'static str, String)> {
    vec![
        ("AWS_ACCESS_KEY_ID", s3server::ACCESS_KEY.to_string()),
        ("AWS_SECRET_ACCESS_KEY", s3server::SECRET_KEY.to_string()),
        ("AWS_ENDPOINT_URL_S3", endpoint.to_string()),
    ]
}

fn wait_for(what: &str, timeout: Duration, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
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

/// init, apply, state list, history, `-at`, `state check` and workspaces on S3, from two
/// working copies (one with keys in the environment, one with a profile in a shared
/// credentials file): the second sees the first's state; objects are where Terraform's
/// layout puts them; no lock is left; the secret key is never printed.
#[test]
fn two_working_copies_share_one_state_on_s3() {
    let Some(server) = s3server::shared() else {
        return;
    };
    let bucket = s3server::bucket_name("share");
    server.bucket(&bucket);
    let sim = tempfile::tempdir().unwrap();
    let tf = format!("{}{}", backend_block(&bucket), things(3));
    let a = Copy::new(sim.path(), &tf, &env_creds(&server.endpoint()));
    let out = a.ok(&["init"]);
    assert!(out.contains("s3://"), "{out}");
    a.ok(&["apply", "-auto-approve"]);
    let listed = a.ok(&["state", "list"]);
    assert_eq!(
        listed
            .lines()
            .filter(|l| l.starts_with("sim_thing."))
            .count(),
        3,
        "{listed}"
    );

    // The second copy: a profile in a shared credentials file, the endpoint as an argument.
    let b = Copy::new(sim.path(), &tf, &[]);
    let creds = b.dir.path().join("creds");
    std::fs::write(
        &creds,
        format!(
            "[team]\naws_access_key_id = {}\naws_secret_access_key = {}\n",
            s3server::ACCESS_KEY,
            s3server::SECRET_KEY
        ),
    )
    .unwrap();
    let b = Copy {
        env: vec![
            (
                "AWS_SHARED_CREDENTIALS_FILE".into(),
                creds.display().to_string(),
            ),
            ("AWS_PROFILE".into(), "team".into()),
        ],
        ..b
    };
    b.ok(&[
        "init",
        &format!("-backend-config=endpoint={}", server.endpoint()),
    ]);
    assert_eq!(b.ok(&["state", "list"]), listed);
    let plan = b.ok(&["plan"]);
    assert!(plan.contains("No changes"), "{plan}");
    let history = b.ok(&["history"]);
    assert!(history.contains("apply"), "{history}");
    let first = b.ok(&["state", "list", "-at=1"]);
    assert!(!first.contains("sim_thing."), "{first}");
    b.ok(&["state", "check"]);
    for dir in [a.dir.path(), b.dir.path()] {
        let record = std::fs::read_to_string(dir.join(".cairn/backend.json")).unwrap();
        assert!(!record.contains(s3server::SECRET_KEY), "{record}");
    }

    let keys = server.keys(&bucket);
    assert!(
        keys.iter().any(|k| k == &format!("{KEY}.cairn/lineage")),
        "{keys:?}"
    );
    assert!(
        keys.iter()
            .any(|k| k.starts_with(&format!("{KEY}.cairn/events/"))),
        "{keys:?}"
    );
    assert!(
        !keys.iter().any(|k| k.ends_with(".tflock")),
        "a lock was left: {keys:?}"
    );

    // A workspace lives under workspace_key_prefix, as Terraform's.
    b.ok(&["workspace", "new", "dev"]);
    b.ok(&["apply", "-auto-approve"]);
    let keys = server.keys(&bucket);
    assert!(
        keys.iter()
            .any(|k| k == &format!("env:/dev/{KEY}.cairn/lineage")),
        "{keys:?}"
    );
    let ws = a.ok(&["workspace", "list"]);
    assert!(ws.contains("dev"), "{ws}");
}

/// A lock object left by a run that is gone (in Terraform's layout): Cairn refuses, naming
/// the holder and its lock ID, and `force-unlock` with that ID releases it.
#[test]
fn a_held_lock_is_named_and_force_unlock_releases_it() {
    let Some(server) = s3server::shared() else {
        return;
    };
    let bucket = s3server::bucket_name("lock");
    server.bucket(&bucket);
    let sim = tempfile::tempdir().unwrap();
    let a = Copy::new(
        sim.path(),
        &format!("{}{}", backend_block(&bucket), things(1)),
        &env_creds(&server.endpoint()),
    );
    a.ok(&["init"]);
    let lock = format!(
        r#"{{"ID":"5f0e7c1a-0000-4000-8000-00000000abcd","Operation":"OperationTypeApply","Info":"","Who":"ann@build-7","Version":"1.11.4","Created":"2026-01-02T03:04:05.123456789Z","Path":"{bucket}/{KEY}"}}"#
    );
    let (status, _) = server
        .request("PUT", &format!("/{bucket}/{KEY}.tflock"), lock.as_bytes())
        .unwrap();
    assert_eq!(status, 200);
    let (code, out, err) = a.run(&["apply", "-auto-approve"]);
    assert_eq!(code, 1, "{out}\n{err}");
    assert!(err.contains("is locked by ann on build-7"), "{err}");
    assert!(
        err.contains("5f0e7c1a-0000-4000-8000-00000000abcd"),
        "{err}"
    );
    let (code, _, err) = a.run(&["force-unlock", "-force", "wrong-id"]);
    assert_eq!(code, 1, "{err}");
    let out = a.ok(&[
        "force-unlock",
        "-force",
        "5f0e7c1a-0000-4000-8000-00000000abcd",
    ]);
    assert!(out.contains("released"), "{out}");
    a.ok(&["apply", "-auto-approve"]);
}

/// Terraform 1.11 (its own s3 backend with use_lockfile) and Cairn on one bucket key: while
/// Terraform holds the lock (an apply waiting at its prompt) Cairn refuses, naming it; while
/// Cairn holds it, Terraform cannot take it.
#[test]
fn terraform_and_cairn_share_the_lock_object() {
    let Some(server) = s3server::shared() else {
        return;
    };
    if Command::new("terraform").arg("version").output().is_err() {
        assert!(std::env::var("CI").is_err(), "CI needs terraform");
        eprintln!("skipped: no terraform");
        return;
    }
    let bucket = s3server::bucket_name("tf");
    server.bucket(&bucket);
    let sim = tempfile::tempdir().unwrap();
    let creds = env_creds(&server.endpoint());
    let cairn_copy = Copy::new(
        sim.path(),
        &format!("{}{}", backend_block(&bucket), things(1)),
        &creds,
    );
    cairn_copy.ok(&["init"]);

    let tf_dir = tempfile::tempdir().unwrap();
    std::fs::write(
        tf_dir.path().join("main.tf"),
        format!(
            "terraform {{\n  backend \"s3\" {{\n    bucket = \"{bucket}\"\n    key = \"{KEY}\"\n    \
             region = \"us-east-1\"\n    use_path_style = true\n    use_lockfile = true\n    \
             skip_credentials_validation = true\n    skip_requesting_account_id = true\n    \
             skip_metadata_api_check = true\n    skip_region_validation = true\n    \
             endpoints = {{\n      s3 = \"{}\"\n    }}\n  }}\n}}\nresource \"terraform_data\" \"x\" {{}}\n",
            server.endpoint()
        ),
    )
    .unwrap();
    let terraform = |args: &[&str]| {
        let mut c = Command::new("terraform");
        c.args(args)
            .current_dir(tf_dir.path())
            .env("TF_IN_AUTOMATION", "1")
            .env("NO_COLOR", "1")
            .env("AWS_ACCESS_KEY_ID", s3server::ACCESS_KEY)
            .env("AWS_SECRET_ACCESS_KEY", s3server::SECRET_KEY)
            .env("AWS_EC2_METADATA_DISABLED", "true")
            .env_remove("TF_CLI_CONFIG_FILE")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        c
    };
    let out = terraform(&["init", "-input=false", "-no-color"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "terraform init:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // Terraform holds the lock while its apply waits for "yes".
    let mut tf = terraform(&["apply", "-no-color"])
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    let lock_key = format!("{KEY}.tflock");
    wait_for("terraform's lock", Duration::from_secs(60), || {
        server.object(&bucket, &lock_key).is_some()
    });
    let (code, out, err) = cairn_copy.run(&["apply", "-auto-approve"]);
    assert_eq!(code, 1, "{out}\n{err}");
    assert!(err.contains("terraform, OperationTypeApply"), "{err}");
    tf.stdin.take().unwrap().write_all(b"no\n").unwrap();
    let _ = finish(tf);
    wait_for(
        "terraform to release its lock",
        Duration::from_secs(30),
        || server.object(&bucket, &lock_key).is_none(),
    );
    cairn_copy.ok(&["apply", "-auto-approve"]);

    // Cairn holds the lock for the whole of a slow apply.
    std::fs::write(
        cairn_copy.dir.path().join("main.tf"),
        format!("{}{}", backend_block(&bucket), things(3)),
    )
    .unwrap();
    let mut slow = cairn_copy.command(&["apply", "-auto-approve"]);
    slow.env("SIM_LATENCY_MS", "4000");
    let cairn = slow.spawn().unwrap();
    wait_for("cairn's lock", Duration::from_secs(60), || {
        server.object(&bucket, &lock_key).is_some()
    });
    let out = terraform(&["plan", "-input=false", "-no-color", "-lock-timeout=1s"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success(),
        "terraform planned under cairn's lock"
    );
    assert!(err.contains("Error acquiring the state lock"), "{err}");
    assert!(err.contains("cairn pid="), "{err}");
    let (code, out, err) = finish(cairn);
    assert_eq!(code, 0, "{out}\n{err}");
    wait_for("cairn to release its lock", Duration::from_secs(30), || {
        server.object(&bucket, &lock_key).is_none()
    });
}

fn s3_config(server: &s3server::S3Server, bucket: &str) -> cairn_state::backend_config::S3Config {
    let mut s = cairn_state::backend_config::S3Settings::default();
    for (k, v) in [
        ("bucket", bucket.to_string()),
        ("key", KEY.to_string()),
        ("region", "us-east-1".to_string()),
        ("endpoint", server.endpoint()),
        ("use_path_style", "true".to_string()),
        ("access_key", s3server::ACCESS_KEY.to_string()),
        ("secret_key", s3server::SECRET_KEY.to_string()),
    ] {
        s.set(k, &v).unwrap();
    }
    s.resolve(&|_| None).unwrap()
}

/// Two writers on one key whose lock was broken under the first: the second writes event N
/// first, and the first's conditional put of event N fails cleanly (412), naming it; it
/// never overwrites, and every later commit of the first fails too. The log stays intact.
#[test]
fn a_writer_that_loses_the_conditional_put_race_fails_cleanly() {
    let Some(server) = s3server::shared() else {
        return;
    };
    let bucket = s3server::bucket_name("race");
    server.bucket(&bucket);
    let cfg = s3_config(server, &bucket);
    let opts = cairn_state::OpenOptions {
        command: "apply".into(),
        write: true,
        ..Default::default()
    };
    let (da, db) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (mut a, _) = cairn_state::Store::open_s3(&cfg, da.path(), &opts).unwrap();
    // The lock is broken under A (as a mistaken force-unlock would).
    let holder = cairn_state::s3_store::S3Reader::new(&cfg, None)
        .unwrap()
        .holder()
        .unwrap()
        .expect("A holds the lock");
    cairn_state::s3_store::force_unlock(&cfg, &holder.run_id).unwrap();
    let (mut b, _) = cairn_state::Store::open_s3(&cfg, db.path(), &opts).unwrap();
    b.begin_run("apply", &[]).unwrap();
    let e = a.begin_run("apply", &[]).unwrap_err().to_string();
    assert!(e.contains("another writer already wrote event 1"), "{e}");
    assert!(e.contains("lost the race"), "{e}");
    assert!(
        a.commit().is_err(),
        "a failed store accepts no later commit"
    );
    b.finish_run(cairn_state::RunOutcome::Success, Default::default())
        .unwrap();
    drop((a, b));
    let ro = cairn_state::OpenOptions::default();
    let (r, _) = cairn_state::Store::open_s3(&cfg, db.path(), &ro).unwrap();
    assert_eq!(r.head(), 2);
    assert!(r.check().is_empty(), "{:?}", r.check());
    let events = r.events(1).unwrap();
    assert_eq!(events[0].run, 1);
}

/// The server stops answering in the middle of an apply and comes back: the requests
/// waiting on it go through, nothing is lost, and the next plan has nothing to do.
#[test]
fn the_server_paused_mid_apply_loses_nothing() {
    // A server of its own: the others' tests must not see it stop.
    if s3server::shared().is_none() {
        return;
    }
    let own = s3server::S3Server::start().expect("a second moto server starts");
    let server = &own;
    let bucket = s3server::bucket_name("pause");
    server.bucket(&bucket);
    let sim = tempfile::tempdir().unwrap();
    let a = Copy::new(
        sim.path(),
        &format!("{}{}", backend_block(&bucket), things(3)),
        &env_creds(&server.endpoint()),
    );
    a.ok(&["init"]);
    let mut slow = a.command(&["apply", "-auto-approve", "-parallelism=1"]);
    slow.env("SIM_LATENCY_MS", "700");
    let child = slow.spawn().unwrap();
    std::thread::sleep(Duration::from_millis(1200));
    server.pause(true);
    std::thread::sleep(Duration::from_secs(3));
    server.pause(false);
    let (code, out, err) = finish(child);
    assert_eq!(code, 0, "{out}\n{err}");
    let listed = a.ok(&["state", "list"]);
    assert_eq!(
        listed
            .lines()
            .filter(|l| l.starts_with("sim_thing."))
            .count(),
        3,
        "{listed}"
    );
    let plan = a.ok(&["plan"]);
    assert!(plan.contains("No changes"), "{plan}");
    a.ok(&["state", "check"]);
}

#[path = "../../state/tests/support/pgserver.rs"]
mod pgserver;

/// `history -json` without the timing fields (identical across stores).
fn history(c: &Copy) -> Vec<String> {
    c.ok(&["history", "-json"])
        .lines()
        .map(|l| {
            let j: serde_json::Value = serde_json::from_str(l).unwrap();
            format!(
                "{} {} {} {}",
                j["id"], j["command"], j["outcome"], j["started"]
            )
        })
        .collect()
}

/// `init -migrate-state` local → s3 → pg → s3 → local (pg when a PostgreSQL server can
/// start), the whole history each time: every run and plan, `-at` and the state itself.
#[test]
fn migrate_state_between_local_pg_and_s3_keeps_the_whole_history() {
    let Some(server) = s3server::shared() else {
        return;
    };
    let bucket = s3server::bucket_name("migrate");
    server.bucket(&bucket);
    let sim = tempfile::tempdir().unwrap();
    let mut env = env_creds(&server.endpoint());
    let pg = pgserver::shared();
    if let Some(pg) = pg {
        env.push(("PG_CONN_STR", pg.conn_str()));
    }
    let c = Copy::new(sim.path(), &things(2), &env);
    c.ok(&["init"]);
    c.ok(&["apply", "-auto-approve"]);
    std::fs::write(c.dir.path().join("main.tf"), things(3)).unwrap();
    c.ok(&["apply", "-auto-approve"]);
    // A plan's record (beside the log, in the store) moves with it.
    std::fs::write(c.dir.path().join("main.tf"), things(4)).unwrap();
    c.ok(&["plan"]);
    std::fs::write(c.dir.path().join("main.tf"), things(3)).unwrap();
    let runs = history(&c);
    assert!(
        runs.iter()
            .any(|r| r.starts_with("null \"plan\" \"planned\"")),
        "{runs:?}"
    );
    let listed = c.ok(&["state", "list"]);
    let at = c.ok(&["state", "list", "-at=3"]);
    let mut steps = vec![backend_block(&bucket)];
    if pg.is_some() {
        let schema = pgserver::schema("s3mig");
        steps.push(format!(
            "terraform {{\n  backend \"pg\" {{\n    schema_name = \"{schema}\"\n  }}\n}}\n"
        ));
        steps.push(backend_block(&bucket).replace(KEY, "team/second.tfstate"));
    }
    steps.push(String::new());
    for backend in steps {
        std::fs::write(
            c.dir.path().join("main.tf"),
            format!("{backend}{}", things(3)),
        )
        .unwrap();
        let out = c.ok(&["init", "-migrate-state"]);
        assert!(out.contains("event"), "{out}");
        assert_eq!(history(&c), runs, "after migrating to {backend}");
        assert_eq!(c.ok(&["state", "list"]), listed);
        assert_eq!(c.ok(&["state", "list", "-at=3"]), at);
        c.ok(&["state", "check"]);
    }
}

/// `terraform_remote_state` with `backend = "s3"` reads Terraform's `terraform.tfstate`
/// object (written by Terraform 1.11's own s3 backend) and Cairn's log alike.
#[test]
fn remote_state_on_s3_reads_terraforms_objects_and_cairns_logs() {
    let Some(server) = s3server::shared() else {
        return;
    };
    if Command::new("terraform").arg("version").output().is_err() {
        assert!(std::env::var("CI").is_err(), "CI needs terraform");
        return;
    }
    let bucket = s3server::bucket_name("remote");
    server.bucket(&bucket);
    let sim = tempfile::tempdir().unwrap();
    let creds = env_creds(&server.endpoint());
    let producer = Copy::new(
        sim.path(),
        &format!(
            "{}output \"from_cairn\" {{\n  value = \"c1\"\n}}\n",
            backend_block(&bucket)
        ),
        &creds,
    );
    producer.ok(&["init"]);
    producer.ok(&["apply", "-auto-approve"]);

    let tf_dir = tempfile::tempdir().unwrap();
    std::fs::write(
        tf_dir.path().join("main.tf"),
        format!(
            "terraform {{\n  backend \"s3\" {{\n    bucket = \"{bucket}\"\n    key = \"tf/terraform.tfstate\"\n    \
             region = \"us-east-1\"\n    use_path_style = true\n    use_lockfile = true\n    \
             skip_credentials_validation = true\n    skip_requesting_account_id = true\n    \
             skip_metadata_api_check = true\n    skip_region_validation = true\n    \
             endpoints = {{\n      s3 = \"{}\"\n    }}\n  }}\n}}\noutput \"from_terraform\" {{\n  value = [\"t1\", \"t2\"]\n}}\n",
            server.endpoint()
        ),
    )
    .unwrap();
    for args in [
        &["init", "-input=false"][..],
        &["apply", "-auto-approve", "-input=false"],
    ] {
        let out = Command::new("terraform")
            .args(args)
            .current_dir(tf_dir.path())
            .env("NO_COLOR", "1")
            .env("AWS_ACCESS_KEY_ID", s3server::ACCESS_KEY)
            .env("AWS_SECRET_ACCESS_KEY", s3server::SECRET_KEY)
            .env("AWS_EC2_METADATA_DISABLED", "true")
            .env_remove("TF_CLI_CONFIG_FILE")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "terraform {args:?}:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    assert!(server.object(&bucket, "tf/terraform.tfstate").is_some());

    let consumer = Copy::new(
        sim.path(),
        &format!(
            "data \"terraform_remote_state\" \"c\" {{\n  backend = \"s3\"\n  config = {{\n    bucket = \"{bucket}\"\n    \
             key = \"{KEY}\"\n    region = \"us-east-1\"\n    use_path_style = true\n  }}\n}}\n\
             data \"terraform_remote_state\" \"t\" {{\n  backend = \"s3\"\n  config = {{\n    bucket = \"{bucket}\"\n    \
             key = \"tf/terraform.tfstate\"\n    region = \"us-east-1\"\n    endpoints = {{ s3 = \"{}\" }}\n  }}\n}}\n\
             output \"both\" {{\n  value = [data.terraform_remote_state.c.outputs.from_cairn, data.terraform_remote_state.t.outputs.from_terraform[1]]\n}}\n",
            server.endpoint()
        ),
        &creds,
    );
    consumer.ok(&["init"]);
    consumer.ok(&["apply", "-auto-approve"]);
    let out = consumer.ok(&["output", "-json", "both"]);
    assert_eq!(out.trim(), r#"["c1","t2"]"#);
}

/// An apply of 1,000 resources on the loopback S3 server groups its durable commits into batch
/// objects (far fewer than one per event), and both timings are printed. How fast it is
/// against sled is measured by `cargo bench --bench s3_apply`, not asserted here.
#[test]
fn an_apply_of_1000_resources_on_s3_writes_batches() {
    let Some(server) = s3server::shared() else {
        return;
    };
    let bucket = s3server::bucket_name("speed");
    server.bucket(&bucket);
    let mut took = Vec::new();
    for backend in [String::new(), backend_block(&bucket)] {
        let sim = tempfile::tempdir().unwrap();
        let c = Copy::new(
            sim.path(),
            &format!("{backend}{}", things(1000)),
            &env_creds(&server.endpoint()),
        );
        c.ok(&["init"]);
        let start = Instant::now();
        let out = c.ok(&["apply", "-auto-approve"]);
        took.push(start.elapsed());
        assert!(out.contains("1000 added"), "{out}");
    }
    let batches = server
        .keys(&bucket)
        .iter()
        .filter(|k| k.contains(".cairn/events/"))
        .count();
    println!(
        "apply of 1,000 resources: sled {:.2} s, s3 {:.2} s ({:.2}×), {batches} event batch objects",
        took[0].as_secs_f64(),
        took[1].as_secs_f64(),
        took[1].as_secs_f64() / took[0].as_secs_f64()
    );
    assert!(
        batches > 0 && batches < 500,
        "{batches} event batch objects for 1,000 creates"
    );
}

/// How many successful creates the sim provider made.
fn creates(sim: &Path) -> usize {
    std::fs::read_to_string(sim.join("calls.jsonl"))
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains("\"op\": \"create\"") && l.contains("\"ok\": true"))
        .count()
}

/// A runner killed with SIGKILL mid-apply leaves its lock object behind (S3 has no session
/// to end it): the other working copy is refused with the holder's lock ID, releases it with
/// `force-unlock`, and its apply converges: every object exactly once, nothing to do after.
#[test]
fn a_runner_killed_mid_apply_leaves_a_lock_that_force_unlock_releases() {
    let Some(server) = s3server::shared() else {
        return;
    };
    let bucket = s3server::bucket_name("kill");
    server.bucket(&bucket);
    let sim = tempfile::tempdir().unwrap();
    let tf = format!("{}{}", backend_block(&bucket), things(4));
    let a = Copy::new(sim.path(), &tf, &env_creds(&server.endpoint()));
    let b = Copy::new(sim.path(), &tf, &env_creds(&server.endpoint()));
    a.ok(&["init"]);
    b.ok(&["init"]);
    let mut slow = a.command(&["apply", "-auto-approve", "-parallelism=2"]);
    slow.env("SIM_LATENCY_MS", "1500");
    let mut runner = slow.spawn().unwrap();
    wait_for("the first creates", Duration::from_secs(60), || {
        creates(sim.path()) >= 2
    });
    std::thread::sleep(Duration::from_millis(300));
    runner.kill().unwrap(); // SIGKILL
    runner.wait().unwrap();
    let (code, out, err) = b.run(&["apply", "-auto-approve"]);
    assert_eq!(code, 1, "{out}\n{err}");
    let id = err
        .split("lock ID ")
        .nth(1)
        .and_then(|r| r.split(';').next())
        .unwrap_or_else(|| panic!("no lock ID in:\n{err}"))
        .to_string();
    b.ok(&["force-unlock", "-force", &id]);
    b.ok(&["apply", "-auto-approve"]);
    let objects = std::fs::read_dir(sim.path().join("things/local"))
        .map(|d| d.count())
        .unwrap_or(0);
    assert_eq!(objects, 4, "every object exactly once");
    let out = b.ok(&["plan"]);
    assert!(out.contains("No changes."), "{out}");
    b.ok(&["state", "check"]);
}

/// The server stops answering for longer than a request may take, in the middle of an
/// apply (a request hangs; operations already started finish meanwhile): the run stops and
/// keeps the events not yet in the bucket (the outcomes of the calls that finished) in
/// `.cairn/s3-journal`; the server comes back and
/// the next run writes them first, then converges: every object exactly once.
#[test]
fn an_outage_longer_than_a_request_keeps_outcomes_in_the_local_journal() {
    // A server of its own: the others' tests must not see it stop.
    if s3server::shared().is_none() {
        return;
    }
    let own = s3server::S3Server::start().expect("a second moto server starts");
    let server = &own;
    let bucket = s3server::bucket_name("outage");
    server.bucket(&bucket);
    let sim = tempfile::tempdir().unwrap();
    let a = Copy::new(
        sim.path(),
        &format!("{}{}", backend_block(&bucket), things(4)),
        &env_creds(&server.endpoint()),
    );
    a.ok(&["init"]);
    let mut slow = a.command(&["apply", "-auto-approve", "-parallelism=1"]);
    slow.env("SIM_LATENCY_MS", "1500");
    let runner = slow.spawn().unwrap();
    wait_for("the first create", Duration::from_secs(60), || {
        creates(sim.path()) >= 1
    });
    server.pause(true);
    let journal = a.dir.path().join(".cairn/s3-journal");
    let waited = std::panic::catch_unwind(|| {
        wait_for("the journal", Duration::from_secs(90), || journal.exists())
    });
    server.pause(false);
    waited.unwrap();
    let (code, out, err) = finish(runner);
    assert_eq!(code, 1, "{out}\n{err}");
    assert!(err.contains("No new operation starts"), "{err}");
    assert!(err.contains("s3-journal"), "{err}");
    let (code, out, err) = a.run(&["apply", "-auto-approve"]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(format!("{out}{err}").contains("kept in"), "{out}\n{err}");
    assert!(!journal.exists());
    let objects = std::fs::read_dir(sim.path().join("things/local"))
        .map(|d| d.count())
        .unwrap_or(0);
    assert_eq!(objects, 4, "every object exactly once");
    let out = a.ok(&["plan"]);
    assert!(out.contains("No changes."), "{out}");
    a.ok(&["state", "check"]);
}

/// Issue 33: a stack whose component states live on S3 (`stack init -backend=s3`): each
/// component instance is a workspace key of its own; a second working copy finds them.
#[test]
fn a_stack_on_s3_keeps_each_component_instance_under_its_own_key() {
    let Some(stack) = S3Stack::new("stack") else {
        return;
    };
    let init = stack.init();
    let copy = || stack.copy();
    let a = copy();
    let out = a.ok(&init);
    assert!(out.contains("- Backend: s3 (recorded)."), "{out}");
    let out = a.ok(&["stack", "apply", "-auto-approve"]);
    assert!(
        out.contains(
            "Stack apply complete! Resources: 2 added, 0 changed, 0 destroyed, in 3 rounds."
        ),
        "{out}"
    );
    let b = copy();
    b.ok(&init);
    let (code, out, err) = b.run(&["stack", "plan", "-detailed-exitcode"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("2 unchanged."), "{out}");
    let out = b.ok(&["stack", "show", "-json"]);
    let doc: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        doc["deployments"]["dev"][1]["workspace"], "dev.second",
        "{out}"
    );
    assert_eq!(
        doc["deployments"]["dev"][1]["resources"][0], "sim_thing.t",
        "{out}"
    );
}

/// Issue 30: the S3 damage campaign. Event batches (`K.cairn/events/<first seq>`) deleted in
/// the middle, swapped, replaced by a copy of another, changed in one byte, or the newest cut
/// off (an older copy of the bucket restored) are an error on every command — never a shorter
/// or different state, never a plan that creates what exists — naming the first damaged event;
/// nothing is written to the damaged log; once the objects are put back it reads whole again.
#[test]
fn damaged_event_objects_are_an_error_never_a_shorter_state() {
    let Some(server) = s3server::shared() else {
        return;
    };
    let bucket = s3server::bucket_name("damage");
    server.bucket(&bucket);
    let sim = tempfile::tempdir().unwrap();
    let a = Copy::new(
        sim.path(),
        &format!("{}{}", backend_block(&bucket), things(3)),
        &env_creds(&server.endpoint()),
    );
    a.ok(&["init"]);
    a.ok(&["apply", "-auto-approve"]);
    std::fs::write(
        a.dir.path().join("main.tf"),
        format!("{}{}", backend_block(&bucket), things(4)),
    )
    .unwrap();
    a.ok(&["apply", "-auto-approve"]);
    let listed = a.ok(&["state", "list"]);
    assert!(a
        .ok(&["state", "verify"])
        .contains("The state log is intact"));
    // The batches, oldest first, with their first seqs and bytes.
    let prefix = format!("{KEY}.cairn/events/");
    let mut batches: Vec<(u64, String, Vec<u8>)> = server
        .keys(&bucket)
        .into_iter()
        .filter_map(|k| {
            let first: u64 = k.strip_prefix(&prefix)?.parse().ok()?;
            let body = server.object(&bucket, &k)?;
            Some((first, k, body))
        })
        .collect();
    batches.sort();
    assert!(
        batches.len() >= 4,
        "batches: {:?}",
        batches.iter().map(|b| &b.1).collect::<Vec<_>>()
    );
    let put = |key: &str, body: &[u8]| {
        let (status, _) = server
            .request("PUT", &format!("/{bucket}/{key}"), body)
            .unwrap();
        assert_eq!(status, 200);
    };
    let delete = |key: &str| {
        let (status, _) = server
            .request("DELETE", &format!("/{bucket}/{key}"), &[])
            .unwrap();
        assert!(status == 204 || status == 200, "{status}");
    };
    let restore = || {
        for (_, k, body) in &batches {
            put(k, body);
        }
    };
    // A batch that reads but does not chain is damage from its first event; one whose bytes
    // fail their checksum is a corrupt record, with where the log is intact up to.
    let damaged = |what: &str, from: u64| {
        for args in [&["state", "list"][..], &["plan"], &["state", "verify"]] {
            let (code, out, err) = a.run(args);
            assert_eq!(code, 1, "{what}: {args:?}\n{out}\n{err}");
            assert!(!err.contains("panicked"), "{what}\n{err}");
            assert!(
                err.contains(&format!("is damaged from event {from} on"))
                    || err.contains(&format!(
                        "record {from} is corrupt (the batch {KEY}.cairn/events/{from:020}"
                    )) && err.contains(&format!("intact up to record {}", from - 1)),
                "{what}: {args:?}: from event {from}\n{err}"
            );
            assert!(!out.contains("will be created"), "{what}\n{out}");
        }
        let (code, _, err) = a.run(&["apply", "-auto-approve"]);
        assert_eq!(code, 1, "{what}\n{err}");
        assert_eq!(creates(sim.path()), 4, "{what}: nothing was created");
    };
    let mid = batches.len() / 2;
    // A batch deleted in the middle.
    delete(&batches[mid].1);
    damaged("a batch deleted", batches[mid].0);
    restore();
    assert_eq!(a.ok(&["state", "list"]), listed);
    // Two batches swapped.
    put(&batches[mid].1, &batches[mid + 1].2);
    put(&batches[mid + 1].1, &batches[mid].2);
    damaged("two batches swapped", batches[mid].0);
    restore();
    // A batch replaced by a copy of the one before it.
    put(&batches[mid].1, &batches[mid - 1].2);
    damaged("a batch duplicated", batches[mid].0);
    restore();
    // One byte changed inside a batch.
    let mut flipped = batches[mid].2.clone();
    let at = flipped.len() / 2;
    flipped[at] ^= 0x20;
    put(&batches[mid].1, &flipped);
    damaged("a byte changed", batches[mid].0);
    restore();
    // The newest batches cut off: shorter than the recorded head.
    let cut = batches.len() - 2;
    for (_, k, _) in &batches[cut..] {
        delete(k);
    }
    damaged("the newest batches cut off", batches[cut].0);
    let (_, _, err) = a.run(&["state", "list"]);
    assert!(err.contains("are lost"), "{err}");
    restore();
    assert_eq!(a.ok(&["state", "list"]), listed);
    a.ok(&["state", "verify"]);
    let out = a.ok(&["plan"]);
    assert!(out.contains("No changes."), "{out}");
}

/// Issue 30: `state recover` on S3. One byte changed in the batch that holds the start of the
/// last apply: `state verify` fails; `state recover` copies every event batch, the head and the
/// checkpoints as they were to `<key>.cairn/damaged-<ms>/`, deletes the batches from the
/// damaged one on, rewrites the head, records the recovery as a run and lists the object
/// whose history was lost (from the cut run's plan, read past the damage).
#[test]
fn state_recover_moves_the_damaged_batches_to_a_backup_prefix() {
    let Some(server) = s3server::shared() else {
        return;
    };
    let bucket = s3server::bucket_name("recover");
    server.bucket(&bucket);
    let sim = tempfile::tempdir().unwrap();
    let a = Copy::new(
        sim.path(),
        &format!("{}{}", backend_block(&bucket), things(3)),
        &env_creds(&server.endpoint()),
    );
    a.ok(&["init"]);
    a.ok(&["apply", "-auto-approve"]);
    std::fs::write(
        a.dir.path().join("main.tf"),
        format!("{}{}", backend_block(&bucket), things(4)),
    )
    .unwrap();
    a.ok(&["apply", "-auto-approve"]);
    let second: u64 = {
        let h = a.ok(&["history", "-json"]);
        let last: serde_json::Value = serde_json::from_str(h.lines().last().unwrap()).unwrap();
        last["id"].as_u64().unwrap()
    };
    let prefix = format!("{KEY}.cairn/events/");
    let mut batches: Vec<(u64, String, Vec<u8>)> = server
        .keys(&bucket)
        .into_iter()
        .filter_map(|k| {
            let first: u64 = k.strip_prefix(&prefix)?.parse().ok()?;
            let body = server.object(&bucket, &k)?;
            Some((first, k, body))
        })
        .collect();
    batches.sort();
    // The batch holding the second apply's first event.
    let hit = batches
        .iter()
        .rposition(|b| b.0 <= second)
        .expect("a batch holds the run");
    let (first, key, body) = batches[hit].clone();
    let mut flipped = body.clone();
    let at = flipped.len() / 2;
    flipped[at] ^= 0x20;
    let (status, _) = server
        .request("PUT", &format!("/{bucket}/{key}"), &flipped)
        .unwrap();
    assert_eq!(status, 200);
    let (code, _, err) = a.run(&["state", "verify"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains(&format!("record {first} is corrupt")), "{err}");

    let out = a.ok(&["state", "recover"]);
    assert!(out.contains("Recovered the state"), "{out}");
    assert!(
        out.contains(&format!("The log goes on from event {}", first - 1)),
        "{out}"
    );
    let backup = format!("{KEY}.cairn/damaged-");
    assert!(out.contains(&format!("s3://{bucket}/{backup}")), "{out}");
    assert!(out.contains(&format!("run {second}")), "{out}");
    assert!(
        out.contains("Objects whose history was lost (import them again):\n  sim_thing.t3"),
        "{out}"
    );
    let verified = a.ok(&["state", "verify"]);
    assert!(verified.contains("The state log is intact"), "{verified}");
    assert!(a.ok(&["history"]).contains("state recover"));
    assert!(a.ok(&["log"]).contains("State recovered from damage"));
    // The copy: every batch as it was (the damaged one with its changed byte) and the head.
    let keys = server.keys(&bucket);
    let copies: Vec<&String> = keys
        .iter()
        .filter(|k| k.starts_with(&backup) && k.contains("/events/"))
        .collect();
    assert_eq!(copies.len(), batches.len(), "{copies:?}");
    let copy = copies
        .iter()
        .find(|k| k.ends_with(&format!("/events/{first:020}")))
        .expect("the damaged batch is copied");
    assert_eq!(server.object(&bucket, copy).unwrap(), flipped);
    assert!(keys
        .iter()
        .any(|k| k.starts_with(&backup) && k.ends_with("/head")));
    // The log: the batches before the damage as they were, none of those after it.
    for (f, k, b) in &batches {
        if *f < first {
            assert_eq!(server.object(&bucket, k).as_ref(), Some(b), "{k}");
        } else if *f > first {
            assert!(server.object(&bucket, k).is_none(), "{k} is still there");
        }
    }
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

/// An S3 endpoint that refuses every request as AWS does a key it does not know (moto checks no
/// signature): 403 with `InvalidAccessKeyId`. Returns its URL; it answers until the process
/// ends.
fn refusing_endpoint() -> String {
    use std::io::{BufRead, BufReader, Read};
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", l.local_addr().unwrap());
    std::thread::spawn(move || {
        for conn in l.incoming() {
            let Ok(conn) = conn else { continue };
            std::thread::spawn(move || {
                let mut r = BufReader::new(conn);
                let mut len = 0usize;
                loop {
                    let mut line = String::new();
                    if r.read_line(&mut line).unwrap_or(0) == 0 {
                        return;
                    }
                    let lower = line.to_ascii_lowercase();
                    if let Some(v) = lower.strip_prefix("content-length:") {
                        len = v.trim().parse().unwrap_or(0);
                    }
                    if line == "\r\n" {
                        break;
                    }
                }
                let mut body = vec![0; len];
                let _ = r.read_exact(&mut body);
                let xml = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>\
                           InvalidAccessKeyId</Code><Message>The AWS Access Key Id you provided \
                           does not exist in our records.</Message></Error>";
                let _ = write!(
                    r.get_mut(),
                    "HTTP/1.1 403 Forbidden\r\nContent-Type: application/xml\r\nContent-Length: \
                     {}\r\nConnection: close\r\n\r\n{xml}",
                    xml.len()
                );
            });
        }
    });
    url
}

/// Issue 30's fault matrix on S3: credentials the server refuses, or an endpoint nothing
/// listens on, at the start of every command that reads or writes the state — a clear error
/// naming the store and the server's answer (or the connection), exit 1, never a panic, never
/// the secret; nothing is written, no lock is left, and with the server back the state is as
/// the last apply left it.
#[test]
fn a_refused_key_or_an_unreachable_endpoint_at_the_start_is_a_clear_error() {
    let Some(server) = s3server::shared() else {
        return;
    };
    let bucket = s3server::bucket_name("refused");
    server.bucket(&bucket);
    let sim = tempfile::tempdir().unwrap();
    let mut a = Copy::new(
        sim.path(),
        &format!("{}{}", backend_block(&bucket), things(2)),
        &env_creds(&server.endpoint()),
    );
    a.ok(&["init"]);
    a.ok(&["apply", "-auto-approve"]);
    let check = |a: &Copy, args: &[&str], want: &[&str]| {
        let (code, out, err) = a.run(args);
        assert_eq!(code, 1, "{args:?}:\n{out}\n{err}");
        assert!(!err.contains("panicked"), "{args:?}:\n{err}");
        assert!(!err.contains("RUST_BACKTRACE"), "{args:?}:\n{err}");
        assert!(
            err.contains(&format!("s3://{bucket}/{KEY}")),
            "{args:?}:\n{err}"
        );
        for w in want {
            assert!(err.contains(w), "{args:?}: wants {w:?}\n{err}");
        }
        assert!(!out.contains("will be created"), "{args:?}:\n{out}");
        // Nor a presigned URL: its signature is good for that request until it expires.
        assert!(!err.contains("X-Amz-Signature"), "{args:?}:\n{err}");
        assert!(!err.contains(s3server::ACCESS_KEY), "{args:?}:\n{err}");
    };
    let set_endpoint = |a: &mut Copy, url: String| {
        for (k, v) in a.env.iter_mut() {
            if k == "AWS_ENDPOINT_URL_S3" {
                *v = url.clone();
            }
        }
    };
    set_endpoint(&mut a, refusing_endpoint());
    for args in [
        &["plan"][..],
        &["apply", "-auto-approve"],
        &["destroy", "-auto-approve"],
        &["state", "list"],
        &["history"],
        &["state", "verify"],
        &["state", "recover"],
    ] {
        check(&a, args, &["HTTP 403", "InvalidAccessKeyId"]);
    }
    // Nothing listens: refused connections, retried for about ten seconds, then the error.
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", l.local_addr().unwrap())
    };
    set_endpoint(&mut a, closed.clone());
    for args in [&["plan"][..], &["apply", "-auto-approve"]] {
        check(&a, args, &[closed.trim_start_matches("http://")]);
    }
    // Nothing was written and no lock is left: with the server back, nothing to do.
    set_endpoint(&mut a, server.endpoint());
    let out = a.ok(&["plan"]);
    assert!(out.contains("No changes."), "{out}");
    assert_eq!(creates(sim.path()), 2);
    assert!(!server.keys(&bucket).iter().any(|k| k.ends_with(".tflock")));
}

/// Issue 30's fault matrix on S3: an endpoint whose TLS certificate is not trusted (a
/// self-signed one, served by `openssl s_server`) is a clear error naming the certificate,
/// exit 1, never a panic; nothing is written, and the state is whole on the real endpoint.
#[test]
fn an_untrusted_endpoint_certificate_is_a_clear_error() {
    let Some(server) = s3server::shared() else {
        return;
    };
    let certs = tempfile::tempdir().unwrap();
    let (cert, key) = (certs.path().join("cert.pem"), certs.path().join("key.pem"));
    let made = Command::new("openssl")
        .args([
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
        ])
        .args([
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
        ])
        .args(["-addext", "basicConstraints=critical,CA:FALSE"])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    if !made.is_ok_and(|s| s.success()) {
        eprintln!("skipped: openssl cannot make a certificate");
        return;
    }
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let mut tls = Command::new("openssl")
        .args(["s_server", "-quiet", "-www", "-accept"])
        .arg(format!("127.0.0.1:{port}"))
        .arg("-cert")
        .arg(&cert)
        .arg("-key")
        .arg(&key)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("openssl s_server starts");
    wait_for("openssl s_server", Duration::from_secs(20), || {
        std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
    });
    let bucket = s3server::bucket_name("tls");
    server.bucket(&bucket);
    let sim = tempfile::tempdir().unwrap();
    let mut a = Copy::new(
        sim.path(),
        &format!("{}{}", backend_block(&bucket), things(2)),
        &env_creds(&server.endpoint()),
    );
    a.ok(&["init"]);
    a.ok(&["apply", "-auto-approve"]);
    let real = server.endpoint();
    let set_endpoint = |a: &mut Copy, url: &str| {
        for (k, v) in a.env.iter_mut() {
            if k == "AWS_ENDPOINT_URL_S3" {
                *v = url.to_string();
            }
        }
    };
    set_endpoint(&mut a, &format!("https://127.0.0.1:{port}"));
    for args in [&["plan"][..], &["state", "list"]] {
        let (code, out, err) = a.run(args);
        assert_eq!(code, 1, "{args:?}:\n{out}\n{err}");
        assert!(!err.contains("panicked"), "{args:?}:\n{err}");
        assert!(err.contains("invalid peer certificate"), "{args:?}:\n{err}");
        assert!(
            err.contains(&format!("s3://{bucket}/{KEY}")),
            "{args:?}:\n{err}"
        );
        assert!(!err.contains("X-Amz-Signature"), "{args:?}:\n{err}");
    }
    let _ = tls.kill();
    let _ = tls.wait();
    set_endpoint(&mut a, &real);
    let out = a.ok(&["plan"]);
    assert!(out.contains("No changes."), "{out}");
    assert_eq!(creates(sim.path()), 2);
}

/// Issue 30's fault matrix on S3: SIGINT and SIGTERM at each phase of an apply (load,
/// refresh, plan, the provider calls, the state writes at the end): no panic, exit 0 (the
/// signal came after the run finished) or 1; the lock object is always removed, the log reads
/// whole (`state check`), and the next apply converges with each object once.
#[test]
fn signals_at_every_phase_on_s3_leave_a_whole_state_and_no_lock_object() {
    let Some(server) = s3server::shared() else {
        return;
    };
    let bucket = s3server::bucket_name("signals");
    server.bucket(&bucket);
    let sim = tempfile::tempdir().unwrap();
    let first = format!("{}{}", backend_block(&bucket), things(3));
    let mut a = Copy::new(sim.path(), &first, &env_creds(&server.endpoint()));
    a.ok(&["init"]);
    a.ok(&["apply", "-auto-approve"]);
    // The next run: an update and two creates, each call 150 ms.
    let next = format!(
        "{}{}resource \"sim_thing\" \"n0\" {{\n  name = \"n0\"\n}}\n\
         resource \"sim_thing\" \"n1\" {{\n  name = \"n1\"\n}}\n",
        backend_block(&bucket),
        things(3).replace("name = \"t1\"", "name = \"t1\"\n  value = \"x\"")
    );
    a.env.push(("SIM_LATENCY_MS".into(), "150".into()));
    let lock = format!("{KEY}.tflock");
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
            assert!(
                !server.keys(&bucket).contains(&lock),
                "{what}: the lock object is left\n{out}\n{err}"
            );
            let checked = a.ok(&["state", "check"]);
            assert!(checked.contains("consistent"), "{what}: {checked}");
            // Back to the first configuration for the next signal.
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
    let objects = std::fs::read_dir(sim.path().join("things/local"))
        .map(|r| r.count())
        .unwrap_or(0);
    assert_eq!(objects, 5, "one object per name");
}

/// The S3 server is killed in the middle of an apply and started again later (it replays
/// what it had recorded, as a server with a disk comes back with its data): while it is down
/// every command fails with an error naming the bucket and the connection, never a panic nor
/// an empty state; the apply that lost it stops and keeps its outcomes in the local journal;
/// once the server is back the next run writes them first, and nothing is lost: every object
/// exactly once, the history whole, nothing left to do.
#[test]
fn the_server_stopped_and_restarted_mid_use_loses_nothing() {
    if s3server::shared().is_none() {
        return;
    }
    let mut server = s3server::S3Server::start_with(s3server::Options {
        recording: true,
        ..Default::default()
    })
    .expect("a recording moto server starts");
    let bucket = s3server::bucket_name("restart");
    server.bucket(&bucket);
    let sim = tempfile::tempdir().unwrap();
    let a = Copy::new(
        sim.path(),
        &format!("{}{}", backend_block(&bucket), things(2)),
        &env_creds(&server.endpoint()),
    );
    a.ok(&["init"]);
    a.ok(&["apply", "-auto-approve"]);
    std::fs::write(
        a.dir.path().join("main.tf"),
        format!("{}{}", backend_block(&bucket), things(5)),
    )
    .unwrap();
    let mut slow = a.command(&["apply", "-auto-approve", "-parallelism=1"]);
    slow.env("SIM_LATENCY_MS", "1500");
    let runner = slow.spawn().unwrap();
    wait_for("the first create", Duration::from_secs(60), || {
        creates(sim.path()) >= 3
    });
    server.stop();
    let (code, out, err) = finish(runner);
    assert_eq!(code, 1, "{out}\n{err}");
    assert!(err.contains("the state bucket failed"), "{err}");
    assert!(err.contains("No new operation starts"), "{err}");
    assert!(!err.contains("panicked"), "{err}");

    // While it is down: a clear error naming the bucket, for readers and writers alike.
    for args in [
        &["state", "list"][..],
        &["plan"],
        &["apply", "-auto-approve"],
    ] {
        let (code, out, err) = a.run(args);
        assert_eq!(code, 1, "{args:?}\n{out}\n{err}");
        assert!(err.contains(&format!("s3://{bucket}/")), "{args:?}\n{err}");
        assert!(
            err.contains("Connection refused") || err.contains("connect"),
            "{args:?}\n{err}"
        );
        assert!(!err.contains("panicked"), "{args:?}\n{err}");
        assert!(!out.contains("will be created"), "{args:?}\n{out}");
    }
    let before = creates(sim.path());

    server.restart();
    // Nothing of what the bucket held is lost; the journal is written back by the next
    // writer, and the run converges.
    let (code, out, err) = a.run(&["apply", "-auto-approve"]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(format!("{out}{err}").contains("kept in"), "{out}\n{err}");
    assert!(!a.dir.path().join(".cairn/s3-journal").exists());
    let objects = std::fs::read_dir(sim.path().join("things/local"))
        .map(|d| d.count())
        .unwrap_or(0);
    assert_eq!(objects, 5, "every object exactly once");
    assert_eq!(
        creates(sim.path()),
        5,
        "no object created twice ({before} before the restart)"
    );
    let listed = a.ok(&["state", "list"]);
    assert_eq!(
        listed
            .lines()
            .filter(|l| l.starts_with("sim_thing."))
            .count(),
        5,
        "{listed}"
    );
    let out = a.ok(&["plan"]);
    assert!(out.contains("No changes."), "{out}");
    a.ok(&["state", "check"]);
    let history = a.ok(&["history"]);
    assert!(history.lines().count() >= 3, "{history}");
}

/// The SSE-C key of these tests: base64 of 32 bytes (never printed, never in backend.json).
const CUSTOMER_KEY: &str = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=";
/// base64 of the MD5 of the key's 32 bytes, as S3 (and Terraform) send it.
const CUSTOMER_KEY_MD5: &str = "hRasmdxgYDKV3nvbahU1MA==";
const ROLE: &str = "arn:aws:iam::123456789012:role/tfstate";

/// A header of a recorded request, whatever its case.
fn header<'a>(entry: &'a serde_json::Value, name: &str) -> Option<&'a str> {
    entry["headers"]
        .as_object()?
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(name))
        .and_then(|(_, v)| v.as_str())
}

/// The reads and writes of objects under `key` in a recording: (method, url, entry).
fn object_requests<'a>(
    rec: &'a [serde_json::Value],
    bucket: &str,
    key: &str,
) -> Vec<(&'a str, &'a str, &'a serde_json::Value)> {
    rec.iter()
        .filter_map(|e| {
            let (m, u) = (e["method"].as_str()?, e["url"].as_str()?);
            let path = u.split_once("://")?.1.split_once('/')?.1;
            let on_key = path.starts_with(&format!("{bucket}/{key}"));
            (on_key && matches!(m, "GET" | "PUT" | "HEAD") && !path.contains("?acl"))
                .then_some((m, u, e))
        })
        .collect()
}

/// The sessions moto's STS handed out: (role, session name, external id, access key).
fn assumed_roles(server: &s3server::S3Server) -> Vec<(String, String, String, String)> {
    let (_, body) = server
        .request("GET", "/moto-api/data.json", &[])
        .expect("moto answers");
    let data: serde_json::Value = serde_json::from_slice(&body).unwrap();
    data["sts"]["AssumedRole"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|r| {
            let s = |k: &str| r[k].as_str().unwrap_or_default().to_string();
            (
                s("role_arn"),
                s("session_name"),
                s("external_id"),
                s("access_key_id"),
            )
        })
        .collect()
}

/// Terraform 1.6+'s `assume_role`, `sse_customer_key` (with `encrypt`), `acl` and
/// `endpoints` (S3's and STS's), the role and the endpoints given in a `-backend-config` file:
/// Cairn asks moto's STS for the role (its session name and external ID), signs every
/// request with the role's credentials, sends the SSE-C headers with every read and write of
/// an object and the ACL with every write — the same headers Terraform 1.11 sends with the
/// same file on the same server. The key is never printed nor written to backend.json.
#[test]
fn assume_role_sse_c_and_acl_from_a_backend_config_file_as_terraform_sends_them() {
    if s3server::shared().is_none() {
        return;
    }
    let server = s3server::S3Server::start_with(s3server::Options {
        recording: true,
        ..Default::default()
    })
    .expect("a recording moto server starts");
    let bucket = s3server::bucket_name("role");
    server.bucket(&bucket);
    let sim = tempfile::tempdir().unwrap();
    let block = |key: &str| {
        format!(
            "terraform {{\n  backend \"s3\" {{\n    bucket = \"{bucket}\"\n    key    = \"{key}\"\n    \
             region = \"us-east-1\"\n    use_path_style = true\n    use_lockfile = true\n    \
             encrypt = true\n    acl = \"public-read\"\n    skip_credentials_validation = true\n    \
             skip_requesting_account_id = true\n    skip_metadata_api_check = true\n    \
             skip_region_validation = true\n  }}\n}}\n"
        )
    };
    let file = format!(
        "# the team's backend settings\nendpoints = {{\n  s3  = \"{0}\"\n  sts = \"{0}\"\n}}\n\
         assume_role = {{\n  role_arn     = \"{ROLE}\"\n  session_name = \"cairn-ci\"\n  \
         external_id  = \"ext-42\"\n  duration     = \"1h\"\n}}\n",
        server.endpoint()
    );
    let env = vec![
        ("AWS_ACCESS_KEY_ID", s3server::ACCESS_KEY.to_string()),
        ("AWS_SECRET_ACCESS_KEY", s3server::SECRET_KEY.to_string()),
        ("AWS_SSE_CUSTOMER_KEY", CUSTOMER_KEY.to_string()),
    ];
    let a = Copy::new(sim.path(), &format!("{}{}", block(KEY), things(2)), &env);
    std::fs::write(a.dir.path().join("team.s3.tfbackend"), &file).unwrap();
    let mut outputs = String::new();
    for args in [
        &["init", "-backend-config=team.s3.tfbackend"][..],
        &["apply", "-auto-approve"],
        &["state", "list"],
        &["plan"],
    ] {
        let out = a.ok(args);
        outputs.push_str(&out);
    }
    assert!(outputs.contains("No changes."), "{outputs}");
    assert!(!outputs.contains(CUSTOMER_KEY), "the SSE-C key was printed");
    let record = std::fs::read_to_string(a.dir.path().join(".cairn/backend.json")).unwrap();
    assert!(!record.contains(CUSTOMER_KEY), "{record}");
    assert!(record.contains(ROLE), "{record}");

    // The role, as asked.
    let roles = assumed_roles(&server);
    assert!(
        roles
            .iter()
            .any(|r| (r.0.as_str(), r.1.as_str(), r.2.as_str()) == (ROLE, "cairn-ci", "ext-42")),
        "{roles:?}"
    );
    let role_keys: Vec<&str> = roles.iter().map(|r| r.3.as_str()).collect();
    // Every object request: signed with the role's keys, SSE-C on reads and writes, the ACL
    // on writes.
    let rec = server.recording();
    let cairn_requests = object_requests(&rec, &bucket, KEY);
    assert!(
        cairn_requests.iter().any(|r| r.0 == "PUT") && cairn_requests.iter().any(|r| r.0 == "GET"),
        "{cairn_requests:?}"
    );
    for (method, url, e) in &cairn_requests {
        let signer = url
            .split("X-Amz-Credential=")
            .nth(1)
            .and_then(|c| c.split("%2F").next())
            .unwrap_or_else(|| panic!("unsigned: {url}"));
        assert!(
            role_keys.contains(&signer),
            "{method} {url}: signed by {signer}"
        );
        assert!(url.contains("X-Amz-Security-Token="), "{url}");
        assert_eq!(
            header(e, "x-amz-server-side-encryption-customer-algorithm"),
            Some("AES256"),
            "{method} {url}"
        );
        assert_eq!(
            header(e, "x-amz-server-side-encryption-customer-key"),
            Some(CUSTOMER_KEY),
            "{method} {url}"
        );
        assert_eq!(
            header(e, "x-amz-server-side-encryption-customer-key-md5"),
            Some(CUSTOMER_KEY_MD5),
            "{method} {url}"
        );
        if *method == "PUT" {
            assert_eq!(header(e, "x-amz-acl"), Some("public-read"), "{url}");
        }
    }
    // The ACL as the server keeps it.
    let (_, acl) = server
        .request("GET", &format!("/{bucket}/{KEY}.cairn/lineage?acl"), &[])
        .unwrap();
    assert!(
        String::from_utf8_lossy(&acl).contains("AllUsers"),
        "{}",
        String::from_utf8_lossy(&acl)
    );

    // A role without role_arn, and a duration STS would refuse, are init's errors, in
    // Terraform's words.
    let (code, _, err) = a.run(&[
        "init",
        "-reconfigure",
        "-backend-config=team.s3.tfbackend",
        "-backend-config=assume_role={session_name=\"x\"}",
    ]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("assume_role needs role_arn"), "{err}");
    let (code, _, err) = a.run(&[
        "init",
        "-reconfigure",
        "-backend-config=team.s3.tfbackend",
        &format!("-backend-config=assume_role={{role_arn=\"{ROLE}\", duration=\"5s\"}}"),
    ]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("Duration must be between 15m0s and 12h0m0s, had 5s"),
        "{err}"
    );

    // Terraform 1.11 with the same file on the same server sends the same headers.
    if Command::new("terraform").arg("version").output().is_err() {
        assert!(std::env::var("CI").is_err(), "CI needs terraform");
        return;
    }
    let tf_key = "tf/terraform.tfstate";
    let tf_dir = tempfile::tempdir().unwrap();
    std::fs::write(
        tf_dir.path().join("main.tf"),
        format!("{}resource \"terraform_data\" \"x\" {{}}\n", block(tf_key)),
    )
    .unwrap();
    std::fs::write(tf_dir.path().join("team.s3.tfbackend"), &file).unwrap();
    let terraform = |args: &[&str]| {
        let out = Command::new("terraform")
            .args(args)
            .current_dir(tf_dir.path())
            .env("TF_IN_AUTOMATION", "1")
            .env("AWS_EC2_METADATA_DISABLED", "true")
            .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
            .env_remove("TF_CLI_CONFIG_FILE")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "terraform {args:?}:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    terraform(&[
        "init",
        "-input=false",
        "-no-color",
        "-backend-config=team.s3.tfbackend",
    ]);
    terraform(&["apply", "-auto-approve", "-input=false", "-no-color"]);
    let rec = server.recording();
    let names = |reqs: &[(&str, &str, &serde_json::Value)], method: &str| {
        let mut set = std::collections::BTreeSet::new();
        for (m, _, e) in reqs.iter().filter(|r| r.0 == method) {
            let _ = m;
            for (k, _) in e["headers"].as_object().unwrap() {
                let k = k.to_ascii_lowercase();
                if k.starts_with("x-amz-server-side-encryption") || k == "x-amz-acl" {
                    set.insert(k);
                }
            }
        }
        set
    };
    let tf_requests: Vec<_> = object_requests(&rec, &bucket, tf_key);
    let cairn_requests = object_requests(&rec, &bucket, KEY);
    assert!(!tf_requests.is_empty());
    assert_eq!(names(&cairn_requests, "PUT"), names(&tf_requests, "PUT"));
    assert_eq!(names(&cairn_requests, "GET"), names(&tf_requests, "GET"));
    let terraform_sessions = assumed_roles(&server)
        .iter()
        .filter(|r| (r.0.as_str(), r.1.as_str(), r.2.as_str()) == (ROLE, "cairn-ci", "ext-42"))
        .count();
    assert!(
        terraform_sessions > roles.len(),
        "terraform assumed the role too"
    );
}

/// `insecure = true` (Terraform's argument): an HTTPS endpoint whose certificate is not
/// trusted is an error naming the certificate without it, and works with it.
#[test]
fn insecure_skips_tls_verification_of_the_endpoint() {
    if s3server::shared().is_none() {
        return;
    }
    let server = s3server::S3Server::start_with(s3server::Options {
        tls: true,
        ..Default::default()
    })
    .expect("a moto server with TLS starts");
    let bucket = s3server::bucket_name("tls");
    // The bucket, made over TLS (the tests' plain client speaks HTTP only).
    let made = Command::new("sh")
        .args([
            "-c",
            &format!(
                "printf 'PUT /{bucket} HTTP/1.1\\r\\nHost: 127.0.0.1:{0}\\r\\nContent-Length: 0\\r\\n\
                 Authorization: AWS4-HMAC-SHA256 Credential={1}/20260101/us-east-1/s3/aws4_request, \
                 SignedHeaders=host, Signature=0\\r\\nConnection: close\\r\\n\\r\\n' | \
                 openssl s_client -quiet -connect 127.0.0.1:{0} 2>/dev/null | head -1",
                server.port,
                s3server::ACCESS_KEY
            ),
        ])
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&made.stdout).contains("200"),
        "{}",
        String::from_utf8_lossy(&made.stdout)
    );
    let sim = tempfile::tempdir().unwrap();
    let a = Copy::new(
        sim.path(),
        &format!("{}{}", backend_block(&bucket), things(1)),
        &env_creds(&server.endpoint()),
    );
    // As Terraform 1.11: init fails on the certificate ("x509: cannot validate certificate"
    // there), and works with insecure = true.
    for args in [&["init"][..], &["apply", "-auto-approve"]] {
        let (code, out, err) = a.run(args);
        assert_eq!(code, 1, "{args:?}\n{out}\n{err}");
        assert!(err.contains("invalid peer certificate"), "{args:?}\n{err}");
        assert!(!err.contains("panicked"), "{err}");
    }
    assert_eq!(creates(sim.path()), 0);
    a.ok(&["init", "-reconfigure", "-backend-config=insecure=true"]);
    a.ok(&["apply", "-auto-approve"]);
    assert_eq!(creates(sim.path()), 1);
    let out = a.ok(&["plan"]);
    assert!(out.contains("No changes."), "{out}");
}

/// The STS calls of a recording: (form body, authorization header).
fn sts_calls(rec: &[serde_json::Value]) -> Vec<(String, Option<String>)> {
    use base64::Engine;
    rec.iter()
        .filter(|e| e["method"] == "POST")
        .filter_map(|e| {
            let raw = e["body"].as_str()?;
            let body = if e["body_encoded"] == true {
                let bytes = base64::engine::general_purpose::STANDARD.decode(raw).ok()?;
                String::from_utf8(bytes).ok()?
            } else {
                raw.to_string()
            };
            body.contains("Action=AssumeRole")
                .then(|| (body, header(e, "authorization").map(str::to_string)))
        })
        .collect()
}

/// The access keys that signed the requests for objects under `key`.
fn signers(rec: &[serde_json::Value], bucket: &str, key: &str) -> Vec<String> {
    let mut out: Vec<String> = object_requests(rec, bucket, key)
        .iter()
        .map(|(m, url, _)| {
            url.split("X-Amz-Credential=")
                .nth(1)
                .and_then(|c| c.split("%2F").next())
                .unwrap_or_else(|| panic!("unsigned: {m} {url}"))
                .to_string()
        })
        .collect();
    out.sort();
    out.dedup();
    out
}

/// A stand-in for IAM Identity Center's portal (`GetRoleCredentials`, `GET
/// /federation/credentials`): moto serves no SSO portal. It answers with temporary keys
/// when the bearer token is `token` and the account and role are `account`/`role`, else 401
/// as the portal does; it counts the calls.
fn sso_portal(
    token: &'static str,
    account: &'static str,
    role: &'static str,
) -> (String, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    use std::io::{BufRead, BufReader};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let calls = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = calls.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { continue };
            let mut reader = BufReader::new(conn.try_clone().unwrap());
            let mut line = String::new();
            if reader.read_line(&mut line).is_err() {
                continue;
            }
            let mut bearer = None;
            loop {
                let mut h = String::new();
                if reader.read_line(&mut h).unwrap_or(0) == 0 || h == "\r\n" {
                    break;
                }
                if let Some((k, v)) = h.split_once(':') {
                    if k.eq_ignore_ascii_case("x-amz-sso_bearer_token") {
                        bearer = Some(v.trim().to_string());
                    }
                }
            }
            counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let path = line
                .split_whitespace()
                .nth(1)
                .unwrap_or_default()
                .to_string();
            let right = path.starts_with("/federation/credentials?")
                && path.contains(&format!("account_id={account}"))
                && path.contains(&format!("role_name={role}"))
                && bearer.as_deref() == Some(token);
            let expires = (std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_millis()
                + 3_600_000) as u64;
            let (status, body) = if right {
                (
                    "200 OK",
                    format!(
                        "{{\"roleCredentials\":{{\"accessKeyId\":\"ASIASSOPORTAL0000001\",\
                         \"secretAccessKey\":\"sso-portal-secret-never-shown\",\
                         \"sessionToken\":\"sso-session-token\",\"expiration\":{expires}}}}}"
                    ),
                )
            } else {
                (
                    "401 Unauthorized",
                    "{\"message\":\"Session token not found or invalid\"}".to_string(),
                )
            };
            let _ = write!(
                conn,
                "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\
                 connection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    (url, calls)
}

/// Credentials as Terraform's S3 backend takes them from the shared files and the
/// environment (through the AWS SDK for Go), each on its own state key of one bucket, every
/// file in its default place under HOME: a profile's `role_arn` with `source_profile` (the
/// role assumed at STS with the source profile's keys), `credential_process`, web identity
/// from `AWS_WEB_IDENTITY_TOKEN_FILE` + `AWS_ROLE_ARN` and from the
/// `assume_role_with_web_identity` argument (STS `AssumeRoleWithWebIdentity`, unsigned, with
/// the token), and an SSO profile (`sso_session`; the token `aws sso login` cached traded
/// at the portal — a stand-in here, moto has none). Every object request is signed with the
/// credentials those give; none is ever printed; an expired SSO token is a clear error.
#[test]
fn credentials_from_profiles_roles_processes_web_identity_and_sso() {
    if s3server::shared().is_none() {
        return;
    }
    let server = s3server::S3Server::start_with(s3server::Options {
        recording: true,
        ..Default::default()
    })
    .expect("a recording moto server starts");
    let bucket = s3server::bucket_name("creds");
    server.bucket(&bucket);
    let sim = tempfile::tempdir().unwrap();
    let block = |key: &str| {
        format!(
            "terraform {{\n  backend \"s3\" {{\n    bucket = \"{bucket}\"\n    key    = \"{key}\"\n    \
             region = \"us-east-1\"\n    use_path_style = true\n    use_lockfile = true\n  }}\n}}\n"
        )
    };
    const DEPLOY: &str = "arn:aws:iam::123456789012:role/deploy";
    const OIDC: &str = "arn:aws:iam::123456789012:role/oidc";
    const WEB_TOKEN: &str = "eyJhbGciOiJSUzI1NiJ9.web-identity-token-of-the-ci";
    const PROCESS_SECRET: &str = "process-secret-never-shown";
    const SSO_TOKEN: &str = "sso-access-token-never-shown";
    let (portal, portal_calls) = sso_portal(SSO_TOKEN, "111122223333", "StateAdmin");
    let config = |home: &Path| {
        let aws = home.join(".aws");
        std::fs::create_dir_all(aws.join("sso/cache")).unwrap();
        let script = home.join("creds.sh");
        std::fs::write(
            &script,
            format!(
                "echo run >> '{}/process-runs'\nprintf '%s' '{{\"Version\": 1, \
                 \"AccessKeyId\": \"ASIAPROCESS000000001\", \"SecretAccessKey\": \
                 \"{PROCESS_SECRET}\", \"SessionToken\": \"process-token\", \"Expiration\": \
                 \"2999-01-01T00:00:00Z\"}}'\n",
                home.display()
            ),
        )
        .unwrap();
        std::fs::write(
            aws.join("config"),
            format!(
                "[profile base]\nregion = us-east-1\n\n\
                 [profile deploy]\nrole_arn = {DEPLOY}\nsource_profile = base\n\
                 role_session_name = cairn-deploy\nexternal_id = ext-7\n\n\
                 [profile proc]\ncredential_process = sh {}\n\n\
                 [profile sso]\nsso_session = corp\nsso_account_id = 111122223333\n\
                 sso_role_name = StateAdmin\n\n\
                 [sso-session corp]\nsso_start_url = https://corp.awsapps.com/start\n\
                 sso_region = us-east-1\n",
                script.display()
            ),
        )
        .unwrap();
        std::fs::write(
            aws.join("credentials"),
            format!(
                "[base]\naws_access_key_id = {}\naws_secret_access_key = {}\n",
                s3server::ACCESS_KEY,
                s3server::SECRET_KEY
            ),
        )
        .unwrap();
        std::fs::write(home.join("web-token"), WEB_TOKEN).unwrap();
    };
    let endpoint = ("AWS_ENDPOINT_URL", server.endpoint());
    let use_copy = |key: &str, env: Vec<(&str, String)>, files: &[(&str, String)]| {
        let c = Copy::new(sim.path(), &format!("{}{}", block(key), things(1)), &env);
        config(c.dir.path());
        for (name, text) in files {
            std::fs::write(c.dir.path().join(name), text).unwrap();
        }
        c
    };
    let run_all = |c: &Copy, init: &[&str], secrets: &[&str]| {
        let mut printed = String::new();
        for args in [init, &["apply", "-auto-approve"], &["plan"]] {
            let (code, out, err) = c.run(args);
            assert_eq!(code, 0, "cairn {args:?}:\n{out}\n{err}");
            printed.push_str(&out);
            printed.push_str(&err);
        }
        assert!(printed.contains("No changes."), "{printed}");
        for s in secrets {
            assert!(!printed.contains(s), "a credential was printed: {printed}");
        }
    };

    // A profile's role_arn with source_profile: STS AssumeRole signed with the base
    // profile's keys; every object request signed with the role's.
    let a = use_copy(
        "role/terraform.tfstate",
        vec![endpoint.clone(), ("AWS_PROFILE", "deploy".into())],
        &[],
    );
    run_all(&a, &["init"], &[]);
    let roles = assumed_roles(&server);
    let deploy: Vec<&(String, String, String, String)> = roles
        .iter()
        .filter(|r| (r.0.as_str(), r.1.as_str(), r.2.as_str()) == (DEPLOY, "cairn-deploy", "ext-7"))
        .collect();
    assert!(!deploy.is_empty(), "{roles:?}");
    let rec = server.recording();
    let calls = sts_calls(&rec);
    let deploy_calls: Vec<_> = calls
        .iter()
        .filter(|(b, _)| b.contains("RoleSessionName=cairn-deploy"))
        .collect();
    assert!(!deploy_calls.is_empty(), "{calls:?}");
    for (_, auth) in deploy_calls {
        let auth = auth.as_deref().expect("AssumeRole is signed");
        assert!(
            auth.contains(&format!("Credential={}/", s3server::ACCESS_KEY)),
            "{auth}"
        );
    }
    let used = signers(&rec, &bucket, "role/terraform.tfstate");
    assert!(
        !used.is_empty() && used.iter().all(|k| deploy.iter().any(|r| &r.3 == k)),
        "{used:?} {deploy:?}"
    );

    // credential_process: run once per command, its keys sign every request.
    let b = use_copy("process/terraform.tfstate", vec![endpoint.clone()], &[]);
    run_all(
        &b,
        &["init", "-backend-config=profile=proc"],
        &[PROCESS_SECRET],
    );
    let runs = std::fs::read_to_string(b.dir.path().join("process-runs")).unwrap();
    assert!(runs.lines().count() >= 3, "{runs}");
    let rec = server.recording();
    assert_eq!(
        signers(&rec, &bucket, "process/terraform.tfstate"),
        ["ASIAPROCESS000000001"]
    );

    // Web identity from the environment (as an EKS or CI runner sets it): unsigned, with the
    // token read from its file.
    let c = use_copy(
        "oidc-env/terraform.tfstate",
        vec![
            endpoint.clone(),
            ("AWS_ROLE_ARN", OIDC.into()),
            ("AWS_ROLE_SESSION_NAME", "cairn-oidc-env".into()),
        ],
        &[],
    );
    let c = Copy {
        env: c
            .env
            .iter()
            .cloned()
            .chain([(
                "AWS_WEB_IDENTITY_TOKEN_FILE".to_string(),
                c.dir.path().join("web-token").display().to_string(),
            )])
            .collect(),
        ..c
    };
    run_all(&c, &["init"], &[WEB_TOKEN]);
    // And from the backend's assume_role_with_web_identity, in a -backend-config file.
    let d = use_copy(
        "oidc-arg/terraform.tfstate",
        vec![endpoint.clone()],
        &[(
            "oidc.s3.tfbackend",
            format!(
                "assume_role_with_web_identity = {{\n  role_arn = \"{OIDC}\"\n  \
                 session_name = \"cairn-oidc-arg\"\n  web_identity_token_file = \"web-token\"\n  \
                 duration = \"1h\"\n}}\n"
            ),
        )],
    );
    // The token file as given (relative: to the working directory, as the SDK reads it).
    run_all(
        &d,
        &["init", "-backend-config=oidc.s3.tfbackend"],
        &[WEB_TOKEN],
    );
    let roles = assumed_roles(&server);
    let rec = server.recording();
    let calls = sts_calls(&rec);
    for (session, key) in [
        ("cairn-oidc-env", "oidc-env/terraform.tfstate"),
        ("cairn-oidc-arg", "oidc-arg/terraform.tfstate"),
    ] {
        let of: Vec<&String> = roles
            .iter()
            .filter(|r| r.0 == OIDC && r.1 == session)
            .map(|r| &r.3)
            .collect();
        assert!(!of.is_empty(), "{session}: {roles:?}");
        let used = signers(&rec, &bucket, key);
        assert!(
            !used.is_empty() && used.iter().all(|k| of.contains(&k)),
            "{session}: {used:?} {of:?}"
        );
        let call = calls
            .iter()
            .find(|(b, _)| b.contains(session))
            .unwrap_or_else(|| panic!("no STS call for {session}"));
        assert!(
            call.0.contains("Action=AssumeRoleWithWebIdentity"),
            "{}",
            call.0
        );
        // The token's characters are all left as they are by form encoding.
        assert!(
            call.0.contains(&format!("WebIdentityToken={WEB_TOKEN}&"))
                || call.0.ends_with(&format!("WebIdentityToken={WEB_TOKEN}")),
            "{}",
            call.0
        );
        assert!(call.1.is_none(), "AssumeRoleWithWebIdentity is not signed");
    }

    // SSO: the token `aws sso login` cached for the session, traded at the portal.
    let e = use_copy(
        "sso/terraform.tfstate",
        vec![
            endpoint.clone(),
            ("AWS_ENDPOINT_URL_SSO", portal.clone()),
            ("AWS_PROFILE", "sso".into()),
        ],
        &[],
    );
    use sha1::Digest;
    let cache_name: String = sha1::Sha1::digest(b"corp")
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let cache = e
        .dir
        .path()
        .join(format!(".aws/sso/cache/{cache_name}.json"));
    let (code, _, err) = e.run(&["init"]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("no SSO token cached") && err.contains("aws sso login --profile sso"),
        "{err}"
    );
    std::fs::write(
        &cache,
        format!(
            "{{\"startUrl\": \"https://corp.awsapps.com/start\", \"region\": \"us-east-1\", \
             \"accessToken\": \"{SSO_TOKEN}\", \"expiresAt\": \"2999-01-01T00:00:00Z\"}}"
        ),
    )
    .unwrap();
    run_all(&e, &["init"], &[SSO_TOKEN, "sso-portal-secret-never-shown"]);
    assert!(portal_calls.load(std::sync::atomic::Ordering::SeqCst) >= 3);
    let rec = server.recording();
    assert_eq!(
        signers(&rec, &bucket, "sso/terraform.tfstate"),
        ["ASIASSOPORTAL0000001"]
    );
    // An expired token: the command stops at its start, saying how to log in again.
    std::fs::write(
        &cache,
        format!("{{\"accessToken\": \"{SSO_TOKEN}\", \"expiresAt\": \"2020-01-01T00:00:00Z\"}}"),
    )
    .unwrap();
    let (code, out, err) = e.run(&["plan"]);
    assert_eq!(code, 1, "{out}\n{err}");
    assert!(
        err.contains("expired") && err.contains("aws sso login --profile sso"),
        "{err}"
    );
    assert!(!err.contains(SSO_TOKEN), "{err}");
    // A token the portal refuses.
    std::fs::write(
        &cache,
        "{\"accessToken\": \"revoked\", \"expiresAt\": \"2999-01-01T00:00:00Z\"}",
    )
    .unwrap();
    let (code, _, err) = e.run(&["plan"]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("HTTP 401") && err.contains("Session token not found"),
        "{err}"
    );

    // A profile whose role has no source is not taken for one with keys; a loop of
    // source_profiles is an error, not a hang.
    let f = use_copy("loop/terraform.tfstate", vec![endpoint.clone()], &[]);
    std::fs::write(
        f.dir.path().join(".aws/config"),
        "[profile x]\nrole_arn = arn:aws:iam::1:role/x\nsource_profile = y\n\
         [profile y]\nrole_arn = arn:aws:iam::1:role/y\nsource_profile = x\n",
    )
    .unwrap();
    let (code, _, err) = f.run(&["init", "-backend-config=profile=x"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("source_profile chains"), "{err}");
}
