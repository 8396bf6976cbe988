//! End-to-end tests of the `cairn` binary: each runs the real executable in a temporary
//! directory through `check_cli` and looks at what a user sees (exit code, stdout, stderr).

mod import;
mod install;
mod language;

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

/// Issue 11 lifecycle workflows, end to end (saved plans, targeting, drift, data sources in
/// state, read-only, interrupts, providers in state).
#[path = "cli_lifecycle.rs"]
mod lifecycle;

/// `providers`, `providers schema`, `metadata functions`, `get`, `modules`, `login`, `logout`.
#[path = "cli_providers.rs"]
mod providers;

/// Issue 14's `moved` and `removed` blocks, end to end.
#[path = "cli_moves.rs"]
mod moves;

/// Issue 27's state commands: taint/untaint, dry runs, -exclude, -lock=false.
#[path = "cli_state_cmds.rs"]
mod state_cmds;

/// Issue 28's ephemeral values: misplaced ones, the built-in ephemeral random_password.
#[path = "cli_ephemeral.rs"]
mod ephemeral;
/// Issue 28's language additions: provider for_each, what real modules write.
#[path = "cli_language_28.rs"]
mod language_28;

/// Issue 28's early evaluation: variables and locals in module sources, required_providers
/// and the backend block; the backend `init` recorded checked at every command.
#[path = "cli_early.rs"]
mod early;

/// Issue 33: the stack fixtures and working-copy set-up every stack test binary shares.
#[path = "stack_fixtures.rs"]
mod stack_fixtures;

/// Issue 33: Terraform Stacks' configuration language (`cairn stack validate`).
#[path = "cli_stacks.rs"]
mod stacks;

/// Issue 33: a stack run's one history record (`cairn stack history`).
#[path = "cli_stack_history.rs"]
mod stack_history;

/// Issue 33: a stack's plugin providers (`stack init` installs them, components run them).
#[path = "cli_stack_plugins.rs"]
mod stack_plugins;

/// Issue 33: auto-approve checks' whole context, published outputs' expressions.
#[path = "cli_stack_deploy.rs"]
mod stack_deploy;

/// Issue 30: damage to the state log is always detected; `state verify`, `state recover`.
#[path = "cli_damage.rs"]
mod damage;

/// Issue 30: the fault-injection matrix (signals at each phase, read-only state, plugins).
#[path = "cli_faults.rs"]
mod faults;

/// Runs `cairn ARGS` in `dir` with `stdin` piped in (so standard input is never a terminal),
/// colours off by environment, and returns (exit code, stdout, stderr).
fn check_cli_in(dir: &Path, args: &[&str], stdin: &str) -> (i32, String, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_cairn"))
        .args(args)
        .current_dir(dir)
        .env("NO_COLOR", "1")
        .env_remove("CAIRN_STATE_DIR")
        .env_remove("CAIRN_LOG")
        .env_remove("CAIRN_LOG_PATH")
        .env_remove("TF_WORKSPACE")
        // Where a run ran is recorded from these: the transcripts are the same in CI.
        .env_remove("GITHUB_RUN_ID")
        .env_remove("CI_JOB_URL")
        .env_remove("BUILDKITE_BUILD_URL")
        .env_remove("BUILD_URL")
        .env_remove("CIRCLE_BUILD_URL")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the cairn binary runs");
    if let Some(mut i) = child.stdin.take() {
        let _ = i.write_all(stdin.as_bytes());
    }
    let out = child.wait_with_output().expect("cairn finishes");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `check_cli_in` in a fresh empty directory.
fn check_cli(args: &[&str], stdin: &str) -> (i32, String, String) {
    let dir = tempfile::tempdir().unwrap();
    check_cli_in(dir.path(), args, stdin)
}

#[test]
fn version_in_every_spelling() {
    let v = env!("CARGO_PKG_VERSION");
    for args in [&["version"][..], &["-version"], &["--version"]] {
        let (code, out, err) = check_cli(args, "");
        assert_eq!(code, 0, "{args:?}: {err}");
        assert!(out.contains(v), "{args:?}: {out}");
    }
    let (code, out, _) = check_cli(&["version", "-json"], "");
    assert_eq!(code, 0);
    let j: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(j["cairn_version"], v);
}

#[test]
fn completions_for_each_shell() {
    for (shell, marker) in [
        ("bash", "complete -F"),
        ("zsh", "#compdef cairn"),
        ("fish", "complete -c cairn"),
    ] {
        let (code, out, err) = check_cli(&["completions", shell], "");
        assert_eq!(code, 0, "{err}");
        assert!(
            out.contains(marker),
            "{shell}: {}",
            &out[..out.len().min(200)]
        );
        assert!(
            out.contains("import-tfstate"),
            "{shell} completes subcommands"
        );
    }
    let (code, _, err) = check_cli(&["completions", "powershell"], "");
    assert_eq!(code, 1);
    assert!(err.contains("invalid value 'powershell'"), "{err}");
}

#[test]
fn usage_errors_exit_1_and_help_exits_0() {
    let (code, _, err) = check_cli(&["plan", "-no-such-flag"], "");
    assert_eq!(code, 1);
    assert!(err.contains("-no-such-flag"), "{err}");
    let (code, _, err) = check_cli(&["plan", "-parallelism=many"], "");
    assert_eq!(code, 1);
    assert!(err.contains("many"), "{err}");
    let (code, _, err) = check_cli(&["plan", "-lock-timeout=soon"], "");
    assert_eq!(code, 1);
    assert!(err.contains("like 5s or 1m30s"), "{err}");
    let (code, out, _) = check_cli(&["plan", "-help"], "");
    assert_eq!(code, 0);
    assert!(out.contains("--detailed-exitcode"), "{out}");
    assert!(out.contains("--refresh[=<BOOL>]"), "{out}");
}

#[test]
fn chdir_to_a_missing_directory_is_an_error() {
    let (code, _, err) = check_cli(&["-chdir=does/not/exist", "version"], "");
    assert_eq!(code, 1);
    assert!(err.contains("Invalid -chdir option"), "{err}");
    assert!(err.contains("does/not/exist"), "{err}");
}

#[test]
fn log_level_is_checked() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_cairn"))
        .arg("version")
        .current_dir(dir.path())
        .env("CAIRN_LOG", "loud")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("CAIRN_LOG=\"loud\" is not a log level"),
        "{err}"
    );
    let log = dir.path().join("cairn.log");
    let out = Command::new(env!("CARGO_BIN_EXE_cairn"))
        .arg("version")
        .current_dir(dir.path())
        .env("CAIRN_LOG", "debug")
        .env("CAIRN_LOG_PATH", &log)
        .output()
        .unwrap();
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(
        text.contains("DEBUG") && text.contains("starting"),
        "{text}"
    );
}

// ---------------------------------------------------------------------------------------------
// State commands, against a store populated through the state crate's API.

use cairn::state::{
    DataObject, EventBody, OpAction, OpenOptions, OutputValue, ProviderAddr, ProviderInstance,
    ResourceInstanceAddr, ResourceObject, RunOutcome, RunSummary, Store, StoredValue,
};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

/// Compares with `fixtures/golden/cli/NAME`; `UPDATE_EXPECT=1` rewrites it.
fn check_golden(name: &str, actual: &str) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/golden/cli")
        .join(name);
    expect_test::expect_file![path].assert_eq(actual);
}

/// Runs each command line in `dir` and returns a transcript: `$ cairn …`, the exit code, and
/// what was printed. Process-specific text (user, pid) is replaced by placeholders.
fn transcript(dir: &Path, lines: &[&str]) -> String {
    let mut t = String::new();
    for line in lines {
        let args = split_line(line);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let (code, out, err) = check_cli_in(dir, &args, "");
        t.push_str(&format!("$ cairn {line}\n[exit {code}]\n{out}"));
        if !err.is_empty() {
            t.push_str(&format!("[stderr]\n{err}"));
        }
        t.push('\n');
    }
    // Who ran each `cairn` process, its pid, the machine and when it ran differ every time.
    let t = regex::Regex::new(r"by (uid \d+|\S+) \(pid \d+\)")
        .unwrap()
        .replace_all(&t, "by <user> (pid <pid>)");
    let host = regex::escape(&cairn::state::host_name());
    let t = regex::Regex::new(&format!(r"\b{host}\b"))
        .unwrap()
        .replace_all(&t, "<host>");
    let t = regex::Regex::new(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ(  \d+\.\ds)?")
        .unwrap()
        .replace_all(&t, |c: &regex::Captures| {
            if c[0].starts_with("2026-12-02T12:48") {
                c[0].to_string()
            } else if c.get(1).is_some() {
                format!("{:<20}  <d>s", "<now>")
            } else {
                "<now>".to_string()
            }
        });
    t.into_owned()
}

/// Splits a command line on spaces, keeping single-quoted parts together.
fn split_line(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    for c in line.chars() {
        match c {
            '\'' => quoted = !quoted,
            ' ' if !quoted => {
                if !cur.is_empty() {
                    out.push(std::mem::take(&mut cur));
                }
            }
            c => cur.push(c),
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

fn a(s: &str) -> ResourceInstanceAddr {
    s.parse().unwrap()
}

fn obj(pairs: &[(&str, StoredValue)]) -> StoredValue {
    StoredValue::Object(
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect(),
    )
}

fn s(v: &str) -> StoredValue {
    StoredValue::String(v.into())
}

/// A clock that starts at 2026-12-02T12:48:34Z and ticks one second per event.
fn test_clock() -> Box<dyn Fn() -> u64 + Send> {
    let t = AtomicU64::new(1_796_215_714_000);
    Box::new(move || t.fetch_add(1000, Ordering::SeqCst))
}

fn open_writer(dir: &Path) -> Store {
    // sled releases its file lock from a background thread shortly after a close: wait for it.
    let opts = OpenOptions {
        command: "test".into(),
        write: true,
        skip_lock: false,
        lock_timeout: std::time::Duration::from_secs(10),
        encryption: None,
    };
    let (mut store, _) = Store::open(&dir.join(".cairn"), &opts).unwrap();
    store.set_clock(test_clock());
    store
}

/// One apply's worth of events: a provider, two managed instances (b depends on a), a data
/// result and outputs.
fn populate(dir: &Path) {
    let mut store = open_writer(dir);
    store.begin_run("apply", &["-auto-approve".into()]).unwrap();
    let provider = ProviderInstance {
        addr: "provider[\"sim\"]".parse::<ProviderAddr>().unwrap(),
        id: "p1".into(),
        config: obj(&[("region", s("eu"))]),
        is_default: true,
    };
    let pref = provider.reference();
    store
        .append(EventBody::ProviderRegistered { instance: provider })
        .unwrap();
    let mut create = |addr: &str, attrs: StoredValue, deps: Vec<ResourceInstanceAddr>| {
        let token = format!("t-{addr}");
        let op = store
            .append(EventBody::OperationStarted {
                addr: a(addr),
                deposed: None,
                action: OpAction::Create,
                token: Some(token.clone()),
                provider: pref.clone(),
                prior: None,
            })
            .unwrap();
        store.commit().unwrap();
        store
            .append(EventBody::OperationSucceeded {
                op,
                object: Some(ResourceObject {
                    attrs,
                    deps,
                    provider: pref.clone(),
                    create_token: Some(token),
                    tainted: false,
                    meta: Default::default(),
                }),
            })
            .unwrap();
        store.commit().unwrap();
    };
    create(
        "sim_thing.a",
        obj(&[
            ("id", s("a-1")),
            ("name", s("alpha")),
            ("size", StoredValue::Number("3".into())),
            (
                "tags",
                StoredValue::Map(cairn_state::ValueMap::from([("env".to_string(), s("dev"))])),
            ),
            ("password", StoredValue::Sensitive(Box::new(s("hunter2")))),
            ("note", StoredValue::Null),
        ]),
        vec![],
    );
    create(
        "sim_thing.b[0]",
        obj(&[("id", s("b-1")), ("name", s("alpha-b"))]),
        vec![a("sim_thing.a")],
    );
    store
        .append(EventBody::DataRead {
            addr: a("data.sim_lookup.x"),
            object: DataObject {
                attrs: obj(&[("id", s("x")), ("value", s("alpha"))]),
                provider: pref.clone(),
            },
        })
        .unwrap();
    let out = |value: StoredValue, sensitive: bool| OutputValue { value, sensitive };
    store
        .append(EventBody::OutputsSet {
            outputs: BTreeMap::from([
                ("name".to_string(), out(s("alpha"), false)),
                (
                    "size".to_string(),
                    out(StoredValue::Number("3".into()), false),
                ),
                (
                    "ids".to_string(),
                    out(StoredValue::Tuple(vec![s("a-1"), s("b-1")]), false),
                ),
                ("token".to_string(), out(s("s3cr3t"), true)),
            ]),
        })
        .unwrap();
    store.commit().unwrap();
    store
        .finish_run(
            RunOutcome::Success,
            RunSummary {
                added: 2,
                read: 1,
                ..Default::default()
            },
        )
        .unwrap();
}

#[test]
fn state_read_commands() {
    let dir = tempfile::tempdir().unwrap();
    populate(dir.path());
    let t = transcript(
        dir.path(),
        &[
            "state list",
            "state list sim_thing.b",
            "state list -at=4",
            "state show sim_thing.a",
            "state show data.sim_lookup.x",
            "state show sim_thing.a -at=2",
            "state show sim_thing.nope",
            "state show 'not an address'",
            "state list -at=99",
            "state check",
            "output",
            "output name",
            "output -raw size",
            "output -raw ids",
            "output ids -json",
            "output token",
            "output missing",
            "output -json",
            "history",
            "log -from=9",
        ],
    );
    check_golden("state_read.txt", &t);
}

#[test]
fn state_edits_are_runs_of_their_own() {
    let dir = tempfile::tempdir().unwrap();
    populate(dir.path());
    let t = transcript(
        dir.path(),
        &[
            "state mv sim_thing.a sim_thing.c",
            "state mv sim_thing.c data.sim_lookup.c",
            "state mv sim_thing.c sim_thing.b[0]",
            "state rm sim_thing.b",
            "state rm sim_thing.zzz",
            "state list",
            "state list -at=12",
            "state list -at=10",
            "state check",
            "history",
            "log -from=10",
        ],
    );
    check_golden("state_edits.txt", &t);
    // The JSON forms carry every event and run.
    let (code, out, _) = check_cli_in(dir.path(), &["log", "-json"], "");
    assert_eq!(code, 0);
    let events: Vec<serde_json::Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(events.len(), 29);
    assert_eq!(events[0]["kind"], "RunStarted");
    assert_eq!(events[2]["kind"], "OperationStarted");
    assert_eq!(events[2]["addr"], "sim_thing.a");
    assert_eq!(events[3]["object"]["attrs"]["name"], "alpha");
    let (code, out, _) = check_cli_in(dir.path(), &["history", "-json"], "");
    assert_eq!(code, 0);
    let runs: Vec<serde_json::Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let commands: Vec<&str> = runs
        .iter()
        .map(|r| r["command"].as_str().unwrap())
        .collect();
    // Refused edits are failed runs that recorded why, like any failed run.
    assert_eq!(
        commands,
        ["apply", "state mv", "state mv", "state mv", "state rm", "state rm"]
    );
    assert_eq!(runs[0]["changes"]["added"], 2);
    let outcomes: Vec<&str> = runs
        .iter()
        .map(|r| r["outcome"].as_str().unwrap())
        .collect();
    assert_eq!(
        outcomes,
        ["success", "success", "failed", "failed", "success", "failed"]
    );
    let diags: Vec<&serde_json::Value> = events
        .iter()
        .filter(|e| e["kind"] == "RunDiagnostics")
        .collect();
    assert_eq!(diags.len(), 3, "{diags:?}");
    assert_eq!(
        diags[2]["diagnostics"][0]["summary"], "No matching objects found",
        "{diags:?}"
    );
    assert_eq!(diags[2]["diagnostics"][0]["address"], "sim_thing.zzz");
}

#[test]
fn state_pull_and_import_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let fixture =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/cli/terraform_data.tfstate");
    let f = fixture.to_str().unwrap();
    let (code, out, err) = check_cli_in(dir.path(), &["state", "import-tfstate", f], "");
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("Imported 2 resource instance(s) and 1 provider instance(s)"),
        "{out}"
    );
    let (_, list, _) = check_cli_in(dir.path(), &["state", "list"], "");
    assert_eq!(
        list,
        "provider[\"terraform\"]\nterraform_data.a\nterraform_data.b\n"
    );
    let (code, pulled, err) = check_cli_in(dir.path(), &["state", "pull"], "");
    assert_eq!(code, 0, "{err}");
    let j: serde_json::Value = serde_json::from_str(&pulled).unwrap();
    assert_eq!(j["version"], 4);
    assert_eq!(j["resources"].as_array().unwrap().len(), 2);
    assert_eq!(
        j["resources"][0]["instances"][0]["attributes"]["input"]["value"],
        "x"
    );
    // A second import would track the objects twice: refused.
    let (code, _, err) = check_cli_in(dir.path(), &["state", "import-tfstate", f], "");
    assert_eq!(code, 1);
    assert!(err.contains("The state is not empty"), "{err}");
    // What was pulled imports into a fresh directory and lists the same.
    std::fs::write(dir.path().join("pulled.tfstate"), &pulled).unwrap();
    let (code, _, err) = check_cli_in(
        dir.path(),
        &[
            "-state-dir=other",
            "state",
            "import-tfstate",
            "pulled.tfstate",
        ],
        "",
    );
    assert_eq!(code, 0, "{err}");
    let (_, list2, _) = check_cli_in(dir.path(), &["state", "list", "-state-dir", "other"], "");
    assert_eq!(list2, list);
    // The pulled state is what Terraform wrote: dynamic attributes keep Terraform's wrapping.
    let original: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&fixture).unwrap()).unwrap();
    for i in 0..2 {
        assert_eq!(
            j["resources"][i]["instances"][0]["attributes"],
            original["resources"][i]["instances"][0]["attributes"]
        );
    }
    // An immediate plan of the configuration that made it shows no changes.
    std::fs::write(
        dir.path().join("main.tf"),
        "resource \"terraform_data\" \"a\" {\n  input = \"x\"\n}\nresource \"terraform_data\" \"b\" {\n  input = terraform_data.a.id\n}\noutput \"o\" {\n  value = terraform_data.a.input\n}\noutput \"s\" {\n  value     = \"secret\"\n  sensitive = true\n}\n",
    )
    .unwrap();
    let (code, out, err) = check_cli_in(dir.path(), &["plan", "-detailed-exitcode"], "");
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("No changes."), "{out}");
    let (_, o, _) = check_cli_in(dir.path(), &["output", "-raw", "o"], "");
    assert_eq!(o, "x");
}

#[test]
fn bad_tfstate_files_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    for (content, expected) in [
        ("{\"version\": 3}", "found state format version 3"),
        ("not json", "not valid JSON"),
    ] {
        std::fs::write(dir.path().join("t.tfstate"), content).unwrap();
        let (code, _, err) =
            check_cli_in(dir.path(), &["state", "import-tfstate", "t.tfstate"], "");
        assert_eq!(code, 1);
        assert!(err.contains("Invalid Terraform state file"), "{err}");
        assert!(err.contains(expected), "{err}");
    }
    let (code, _, err) = check_cli_in(dir.path(), &["state", "import-tfstate", "missing"], "");
    assert_eq!(code, 1);
    assert!(
        err.contains("Cannot read the Terraform state file"),
        "{err}"
    );
}

#[test]
fn a_held_lock_names_its_holder() {
    let dir = tempfile::tempdir().unwrap();
    populate(dir.path());
    let _held = open_writer(dir.path());
    for args in [
        &["state", "list"][..],
        &["output"],
        &["state", "rm", "sim_thing.a"],
    ] {
        let (code, _, err) = check_cli_in(dir.path(), args, "");
        assert_eq!(code, 1, "{args:?}");
        assert!(err.contains("Error acquiring the state lock"), "{err}");
        assert!(
            err.contains(&format!("by process {} (cairn test)", std::process::id())),
            "{err}"
        );
    }
}

#[test]
fn state_dir_from_flag_and_environment() {
    let dir = tempfile::tempdir().unwrap();
    populate(dir.path());
    std::fs::rename(dir.path().join(".cairn"), dir.path().join("elsewhere")).unwrap();
    let (_, out, _) = check_cli_in(dir.path(), &["state", "list"], "");
    assert_eq!(out, "", "no state in .cairn now");
    let (_, out, _) = check_cli_in(dir.path(), &["-state-dir=elsewhere", "state", "list"], "");
    assert!(out.contains("sim_thing.a"), "{out}");
    let o = Command::new(env!("CARGO_BIN_EXE_cairn"))
        .args(["state", "list"])
        .current_dir(dir.path())
        .env("CAIRN_STATE_DIR", "elsewhere")
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&o.stdout).contains("sim_thing.a"));
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    let (_, out, _) = check_cli_in(
        dir.path(),
        &["-chdir=sub", "-state-dir=../elsewhere", "state", "list"],
        "",
    );
    assert!(out.contains("sim_thing.a"), "{out}");
}

// ---------------------------------------------------------------------------------------------
// Commands over the configuration alone.

/// A temporary directory holding `files` (path, content).
fn project(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    stack_fixtures::write_files(dir.path(), files);
    dir
}

const PROVIDERS_TF: &str = r#"
provider "sim" {
  region = "eu"
}
provider "sim" {
  alias  = "east"
  region = "us-east"
}
resource "sim_thing" "a" {
  name = "a"
}
resource "sim_thing" "b" {
  provider = sim.east
  name     = "b"
}
resource "random_id" "r" {
  byte_length = 4
}
module "child" {
  source = "./modules/child"
}
"#;

#[test]
fn init_names_provider_instances_and_is_idempotent() {
    let dir = project(&[
        ("main.tf", PROVIDERS_TF),
        (
            "modules/child/main.tf",
            "resource \"sim_thing\" \"c\" {\n  name = \"c\"\n}\n",
        ),
    ]);
    let (code, out, err) = check_cli_in(dir.path(), &["init"], "");
    assert_eq!(code, 0, "{err}");
    let out = out.replace(&dir.path().display().to_string(), "<dir>");
    check_golden("init.txt", &out);
    assert!(dir.path().join(".cairn").is_dir());
    let (code, out, _) = check_cli_in(dir.path(), &["init"], "");
    assert_eq!(code, 0);
    assert!(
        out.contains("- State: found .cairn (0 events, 0 resource instances)."),
        "{out}"
    );
}

#[test]
fn validate_human_and_json() {
    let dir = project(&[(
        "main.tf",
        "resource \"sim_thing\" \"a\" {\n  name = \"a\"\n}\n",
    )]);
    let (code, out, _) = check_cli_in(dir.path(), &["validate"], "");
    assert_eq!(
        (code, out.as_str()),
        (0, "Success! The configuration is valid.\n")
    );
    let (code, out, _) = check_cli_in(dir.path(), &["validate", "-json"], "");
    assert_eq!(code, 0);
    let j: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(j["valid"], true);
    assert_eq!(j["format_version"], "1.0");
    assert_eq!(j["diagnostics"], serde_json::json!([]));

    std::fs::write(dir.path().join("bad.tf"), "resource \"x\" {\n").unwrap();
    let (code, out, err) = check_cli_in(dir.path(), &["validate"], "");
    assert_eq!(code, 1);
    assert_eq!(out, "");
    assert!(err.contains("on bad.tf:1:"), "{err}");
    let (code, out, _) = check_cli_in(dir.path(), &["validate", "-json"], "");
    assert_eq!(code, 1);
    let j: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(j["valid"], false);
    assert_eq!(j["error_count"], 1);
    assert_eq!(j["warning_count"], 0);
    let d = &j["diagnostics"][0];
    assert_eq!(d["severity"], "error");
    assert_eq!(d["range"]["filename"], "bad.tf");
    assert_eq!(d["range"]["start"]["line"], 1);
    // -chdir: paths stay relative to the configuration directory.
    let parent = dir.path().parent().unwrap();
    let name = dir.path().file_name().unwrap().to_str().unwrap();
    let (code, _, err) = check_cli_in(parent, &[&format!("-chdir={name}"), "validate"], "");
    assert_eq!(code, 1);
    assert!(err.contains("on bad.tf:1:"), "{err}");
}

// ---------------------------------------------------------------------------------------------
// show: the state, and saved plans.

use cairn::plan::{Action, Change, OutputChange, Plan, PlanMode, Reason};
use cairn::value::Value;

/// A plan as the engine makes them: a create, a replace, a deferred read and an output.
fn sample_plan() -> Plan {
    let provider: ProviderAddr = "provider[\"sim\"]".parse().unwrap();
    let change = |addr: &str, action, before: Option<Value>, after: Option<Value>| Change {
        addr: a(addr),
        provider: provider.clone().into(),
        action,
        before,
        after,
        replace_paths: vec![],
        reason: None,
        sensitive_attrs: vec![],
        diff_unavailable: false,
        importing: None,
        deposed: None,
    };
    let mut replace = change(
        "sim_thing.b",
        Action::DeleteThenCreate,
        Some(Value::object([
            ("id", Value::string("b-1")),
            ("region", Value::string("eu")),
        ])),
        Some(Value::object([
            ("id", Value::unknown()),
            ("region", Value::string("us")),
        ])),
    );
    replace.replace_paths = vec!["region".into()];
    replace.reason = Some(Box::new(Reason::ReplaceBecauseCannotUpdate));
    let mut read = change(
        "data.sim_lookup.x",
        Action::Read,
        None,
        Some(Value::object([
            ("key", Value::unknown()),
            ("value", Value::unknown()),
        ])),
    );
    read.reason = Some(Box::new(Reason::ReadBecauseDependencyPending {
        dependency: a("sim_thing.a"),
        action: Action::Create,
        via: vec!["local.k".into()],
    }));
    Plan {
        mode: PlanMode::Normal,
        base_seq: 9,
        workspace: None,
        check_findings: Vec::new(),
        config_hash: "h".into(),
        changes: vec![
            change(
                "sim_thing.a",
                Action::Create,
                None,
                Some(Value::object([
                    ("id", Value::unknown()),
                    ("name", Value::string("a")),
                ])),
            ),
            replace,
            read,
        ],
        provider_changes: vec![],
        outputs: vec![OutputChange {
            name: "id".into(),
            action: Action::Create,
            before: None,
            after: Some(Value::unknown()),
            sensitive: false,
        }],
        drift: vec![],
        refreshed_meta: Vec::new(),
        data_reads: vec![],
        dropped_data: vec![],
        variables: Default::default(),
        request: Default::default(),
        warnings: vec![],
        applyable: true,
        errored: false,
        graph: None,
        moves: vec![],
        shapes: BTreeMap::new(),
        sources: BTreeMap::new(),
    }
}

#[test]
fn show_state_and_saved_plans() {
    let dir = tempfile::tempdir().unwrap();
    let (code, out, _) = check_cli_in(dir.path(), &["show"], "");
    assert_eq!(
        (code, out.as_str()),
        (0, "The state is empty. No resources are represented.\n")
    );
    populate(dir.path());
    cairn::plan::saved::save_plan(&dir.path().join("p.plan"), &sample_plan(), None).unwrap();
    std::fs::write(dir.path().join("junk.plan"), "junk").unwrap();
    let t = transcript(
        dir.path(),
        &["show", "show p.plan", "show junk.plan", "show nothing.plan"],
    );
    check_golden("show.txt", &t);

    let (code, out, _) = check_cli_in(dir.path(), &["show", "-json", "p.plan"], "");
    assert_eq!(code, 0);
    let j: serde_json::Value = serde_json::from_str(&out).unwrap();
    let addrs: Vec<&str> = j["resource_changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["address"].as_str().unwrap())
        .collect();
    assert_eq!(addrs, ["data.sim_lookup.x", "sim_thing.a", "sim_thing.b"]);
    assert_eq!(
        j["resource_changes"][2]["change"]["actions"],
        serde_json::json!(["delete", "create"])
    );

    let (code, out, _) = check_cli_in(dir.path(), &["show", "-json"], "");
    assert_eq!(code, 0);
    let j: serde_json::Value = serde_json::from_str(&out).unwrap();
    // Terraform's order: by address as text, so data sources first.
    let resources = &j["values"]["root_module"]["resources"];
    assert_eq!(resources[0]["address"], "data.sim_lookup.x");
    assert_eq!(resources[1]["address"], "sim_thing.a");
    assert_eq!(resources[2]["address"], "sim_thing.b[0]");
    assert_eq!(resources[2]["index"], 0);
    assert_eq!(j["values"]["outputs"]["token"]["sensitive"], true);
}

// ---------------------------------------------------------------------------------------------
// Lifecycle commands: what is checked before the engine runs.

#[test]
fn lifecycle_commands_check_flags_configuration_and_variables_first() {
    let dir = project(&[(
        "main.tf",
        "variable \"size\" {\n  type = number\n}\nresource \"sim_thing\" \"a\" {\n  name = \"a\"\n}\n",
    )]);
    let t = transcript(
        dir.path(),
        &[
            "plan",
            "plan -var=size=big",
            "plan -var=size=1 -var=nope=2",
            "plan -target=sim_thing -replace=data.sim_lookup.x -parallelism=0",
            "apply -destroy -read-only",
            "apply missing.plan -var=size=1",
        ],
    );
    check_golden("lifecycle_checks.txt", &t);
    // -json: the version message first, then one diagnostic message per problem.
    let (code, out, err) = check_cli_in(dir.path(), &["plan", "-json"], "");
    assert_eq!(code, 1);
    assert_eq!(err, "");
    let lines: Vec<serde_json::Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines[0]["type"], "version");
    assert_eq!(lines[1]["type"], "diagnostic");
    assert_eq!(lines[1]["@level"], "error");
    assert_eq!(lines[1]["@module"], "cairn.ui");
    assert!(lines[1]["diagnostic"]["summary"]
        .as_str()
        .unwrap()
        .contains("variable"));
}

#[test]
fn console_evaluates_in_the_configuration_scope() {
    let dir = project(&[(
        "main.tf",
        "variable \"n\" {\n  type    = number\n  default = 2\n}\nlocals {\n  doubled = var.n * 2\n  label   = \"n=${local.doubled}\"\n}\nresource \"sim_thing\" \"a\" {\n  name = \"alpha\"\n}\nresource \"sim_thing\" \"b\" {\n  count = 2\n  name  = \"b${count.index}\"\n}\n",
    )]);
    let input = "1 + 2\nvar.n\nlocal.label\nsim_thing.a.name\nsim_thing.a.id\nsim_thing.b[1].name\n{ a = [1, true] }\n";
    let (code, out, err) = check_cli_in(dir.path(), &["console", "-var", "n=5"], input);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        out,
        "3\n5\n\"n=10\"\n\"alpha\"\n(known after apply)\n\"b1\"\n{\n  \"a\" = [\n    1,\n    true,\n  ]\n}\n"
    );
    // Standard input is not a terminal: the first error stops the console.
    let (code, out, err) = check_cli_in(dir.path(), &["console"], "var.nn\n1 + 1\n");
    assert_eq!(code, 1);
    assert_eq!(out, "");
    assert!(
        err.contains("Reference to undeclared input variable"),
        "{err}"
    );
    // A configuration with errors is reported before any line is read.
    std::fs::write(
        dir.path().join("bad.tf"),
        "locals {\n  bad = \"a\" + 1\n}\n",
    )
    .unwrap();
    let (code, out, err) = check_cli_in(dir.path(), &["console"], "1\n");
    assert_eq!((code, out.as_str()), (1, ""));
    assert!(err.contains("on bad.tf:2:9:"), "{err}");
}

#[test]
fn validate_checks_types_references_and_schemas() {
    let dir = project(&[(
        "main.tf",
        "resource \"sim_thing\" \"a\" {\n  name  = \"a\"\n  bogus = 1\n}\nresource \"sim_thin\" \"b\" {\n  name = \"b\"\n}\nresource \"aws_instance\" \"c\" {}\noutput \"o\" {\n  value = local.nope\n}\n",
    )]);
    let t = transcript(dir.path(), &["validate", "validate -json"]);
    check_golden("validate_errors.txt", &t);
}

#[test]
fn read_commands_report_interrupted_operations() {
    let dir = tempfile::tempdir().unwrap();
    populate(dir.path());
    {
        let mut store = open_writer(dir.path());
        store.begin_run("apply", &[]).unwrap();
        let provider = store
            .snapshot()
            .providers
            .values()
            .next()
            .unwrap()
            .reference();
        store
            .append(EventBody::OperationStarted {
                addr: a("sim_thing.new"),
                deposed: None,
                action: OpAction::Create,
                token: Some("tok".into()),
                provider,
                prior: None,
            })
            .unwrap();
        store.commit().unwrap();
        // The process "dies" here: no outcome, no RunFinished.
    }
    let t = transcript(dir.path(), &["state list", "history"]);
    check_golden("pending.txt", &t);
}

// ---------------------------------------------------------------------------------------------
// End to end, through the engine.

/// A copy of the quickstart project in a temporary directory.
fn quickstart() -> tempfile::TempDir {
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/examples/quickstart");
    let dir = tempfile::tempdir().unwrap();
    for e in std::fs::read_dir(&src).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_file() {
            std::fs::copy(e.path(), dir.path().join(e.file_name())).unwrap();
        }
    }
    dir
}

#[test]
fn quickstart_end_to_end() {
    let dir = quickstart();
    let d = dir.path();
    // No terminal and no -auto-approve: the plan is shown, then a refusal naming the flag.
    let (code, out, err) = check_cli_in(d, &["apply"], "yes\n");
    assert_eq!(code, 1);
    assert!(
        out.contains("Plan: 4 to add, 0 to change, 0 to destroy."),
        "{out}"
    );
    assert!(err.contains("Approval required"), "{err}");
    assert!(err.contains("`cairn apply -auto-approve`"), "{err}");
    let (_, list, _) = check_cli_in(d, &["state", "list"], "");
    assert_eq!(list, "", "nothing was applied");

    let (code, out, err) = check_cli_in(d, &["apply", "-auto-approve"], "");
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("sim_thing.web: Creation complete after"),
        "{out}"
    );
    assert!(
        out.contains("Apply complete! Resources: 4 added, 0 changed, 0 destroyed."),
        "{out}"
    );
    assert!(out.contains("\nOutputs:\n"), "{out}");
    assert!(d.join("out/summary.txt").is_file());

    let (code, out, _) = check_cli_in(d, &["plan", "-detailed-exitcode"], "");
    assert_eq!(code, 0);
    assert!(out.contains("No changes."), "{out}");
    let (code, web_id, _) = check_cli_in(d, &["output", "-raw", "web_id"], "");
    assert_eq!(code, 0);
    assert!(web_id.starts_with("web-"), "{web_id}");

    let (code, _, err) = check_cli_in(d, &["destroy"], "yes\n");
    assert_eq!(code, 1);
    assert!(err.contains("`cairn destroy -auto-approve`"), "{err}");
    let (code, out, err) = check_cli_in(d, &["destroy", "-auto-approve"], "");
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("Destroy complete! Resources: 4 destroyed."),
        "{out}"
    );
    let (_, list, _) = check_cli_in(d, &["state", "list"], "");
    assert_eq!(list, "");
    let (_, history, _) = check_cli_in(d, &["history", "-json"], "");
    let outcomes: Vec<String> = history
        .lines()
        .map(|l| {
            let j: serde_json::Value = serde_json::from_str(l).unwrap();
            format!(
                "{} {}",
                j["command"].as_str().unwrap(),
                j["outcome"].as_str().unwrap()
            )
        })
        .collect();
    assert_eq!(
        outcomes,
        [
            "apply interrupted",
            "apply success",
            "plan no changes",
            "destroy interrupted",
            "destroy success"
        ]
    );
}

const SIM_TF: &str = r#"
resource "sim_thing" "a" {
  name = "a"
}
resource "sim_thing" "b" {
  name  = "b"
  value = sim_thing.a.id
}
output "b" {
  value = sim_thing.b.id
}
"#;

#[test]
fn json_ui_stream_of_plan_and_apply() {
    let dir = project(&[("main.tf", SIM_TF)]);
    let types = |out: &str| -> Vec<String> {
        out.lines()
            .map(|l| {
                let j: serde_json::Value = serde_json::from_str(l).unwrap();
                assert_eq!(j["@module"], "cairn.ui", "{l}");
                assert!(j["@timestamp"].as_str().unwrap().ends_with('Z'), "{l}");
                j["type"].as_str().unwrap().to_string()
            })
            .collect()
    };
    let (code, out, err) = check_cli_in(dir.path(), &["plan", "-json"], "");
    assert_eq!((code, err.as_str()), (0, ""));
    assert_eq!(
        types(&out),
        [
            "version",
            "planned_change",
            "planned_change",
            "change_summary",
            "outputs"
        ]
    );
    let (code, out, err) = check_cli_in(dir.path(), &["apply", "-json", "-auto-approve"], "");
    assert_eq!((code, err.as_str()), (0, ""));
    let t = types(&out);
    assert_eq!(t.first().map(String::as_str), Some("version"));
    assert_eq!(
        t.iter().filter(|t| *t == "apply_complete").count(),
        2,
        "{out}"
    );
    assert_eq!(&t[t.len() - 2..], ["change_summary", "outputs"]);
    let last: serde_json::Value = serde_json::from_str(out.lines().last().unwrap()).unwrap();
    assert!(last["outputs"]["b"]["value"]
        .as_str()
        .unwrap()
        .starts_with("b-"));
}

#[test]
fn saved_plans_and_exit_codes() {
    let dir = project(&[("main.tf", SIM_TF)]);
    let d = dir.path();
    let (code, out, err) = check_cli_in(d, &["plan", "-out=p.plan", "-detailed-exitcode"], "");
    assert_eq!(code, 2, "{err}");
    assert!(out.contains("Saved the plan to: p.plan"), "{out}");
    assert!(out.contains("cairn apply p.plan"), "{out}");
    let (code, show, _) = check_cli_in(d, &["show", "p.plan"], "");
    assert_eq!(code, 0);
    assert!(show.contains("Plan: 2 to add"), "{show}");
    // A saved plan applies without asking, even with no terminal.
    let (code, out, err) = check_cli_in(d, &["apply", "p.plan"], "");
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("Apply complete! Resources: 2 added"), "{out}");
    // The state moved on: the same plan is stale now.
    let (code, _, err) = check_cli_in(d, &["apply", "p.plan"], "");
    assert_eq!(code, 1);
    assert!(err.contains("Saved plan is stale"), "{err}");
    let (code, _, _) = check_cli_in(d, &["plan", "-detailed-exitcode"], "");
    assert_eq!(code, 0);
}

#[test]
fn inspect_and_graph() {
    let dir = project(&[("main.tf", SIM_TF)]);
    let d = dir.path();
    let (code, out, err) = check_cli_in(d, &["inspect"], "");
    assert_eq!(code, 0, "{err}");
    check_golden("inspect.txt", &out);
    let (code, out, _) = check_cli_in(d, &["inspect", "-json"], "");
    assert_eq!(code, 0);
    let j: serde_json::Value = serde_json::from_str(&out).unwrap();
    let b = &j["resources"][1];
    assert_eq!(b["id"], "sim_thing.b");
    assert_eq!(b["_provider"], "provider[\"sim\"]");
    assert_eq!(b["name"], "b");
    assert!(b["_unknown"]
        .as_array()
        .unwrap()
        .contains(&serde_json::json!("value")));
    assert!(!d.join(".cairn").exists(), "inspect needs no state");

    let (code, dot, err) = check_cli_in(d, &["graph"], "");
    assert_eq!(code, 0, "{err}");
    assert!(dot.starts_with("digraph {"), "{dot}");
    assert!(dot.contains("sim_thing.b"), "{dot}");
    let (code, dot, _) = check_cli_in(d, &["graph", "-type=refresh"], "");
    assert_eq!(code, 0);
    assert!(dot.starts_with("digraph"), "{dot}");
    // With no Graphviz on PATH, -format=svg says how to get it.
    let o = Command::new(env!("CARGO_BIN_EXE_cairn"))
        .args(["graph", "-format=svg"])
        .current_dir(d)
        .env("PATH", d)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("Graphviz is not installed"), "{err}");
    assert!(err.contains("apt-get install graphviz"), "{err}");
}

#[test]
fn drift_is_shown_by_plan_and_recorded_by_refresh() {
    let dir = project(&[(
        "main.tf",
        "resource \"sim_thing\" \"a\" {\n  name  = \"a\"\n  value = \"v\"\n}\n",
    )]);
    let d = dir.path();
    let (code, _, err) = check_cli_in(d, &["apply", "-auto-approve"], "");
    assert_eq!(code, 0, "{err}");
    // Change the object behind Cairn's back, in the sim provider's store.
    let mut changed = 0;
    for region in std::fs::read_dir(d.join("sim-store/things")).unwrap() {
        for f in std::fs::read_dir(region.unwrap().path()).unwrap() {
            let p = f.unwrap().path();
            let text = std::fs::read_to_string(&p).unwrap();
            std::fs::write(
                &p,
                text.replace("\"value\": \"v\"", "\"value\": \"tampered\""),
            )
            .unwrap();
            changed += 1;
        }
    }
    assert_eq!(changed, 1);
    let (code, out, _) = check_cli_in(d, &["plan", "-detailed-exitcode"], "");
    assert_eq!(code, 2);
    assert!(
        out.contains("Objects have changed outside of Cairn"),
        "{out}"
    );
    assert!(out.contains("~ value = \"v\" -> \"tampered\""), "{out}");
    let (code, out, _) = check_cli_in(d, &["refresh", "-preview"], "");
    assert_eq!(code, 0);
    assert!(out.contains("sim_thing.a has changed"), "{out}");
    assert!(!out.contains("Refresh complete!"), "{out}");
    let (code, out, _) = check_cli_in(d, &["refresh"], "");
    assert_eq!(code, 0);
    assert!(
        out.contains("Refresh complete! 1 object changed outside Cairn"),
        "{out}"
    );
    let (_, shown, _) = check_cli_in(d, &["state", "show", "sim_thing.a"], "");
    assert!(shown.contains("\"tampered\""), "{shown}");
}

#[test]
fn a_failed_apply_lists_its_errors_and_exits_1() {
    let dir = project(&[(
        "main.tf",
        "resource \"sim_thing\" \"a\" {\n  name = \"a\"\n}\nresource \"sim_thing\" \"b\" {\n  name  = \"b\"\n  value = sim_thing.a.id\n}\nresource \"sim_thing\" \"c\" {\n  name = \"c\"\n}\n",
    )]);
    let run = |args: &[&str]| {
        let o = Command::new(env!("CARGO_BIN_EXE_cairn"))
            .args(args)
            .current_dir(dir.path())
            .env("SIM_FAIL", "create:a")
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .output()
            .unwrap();
        (
            o.status.code(),
            String::from_utf8_lossy(&o.stdout).into_owned(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    };
    let (code, out, err) = run(&["apply", "-auto-approve"]);
    assert_eq!(code, Some(1));
    assert!(out.contains("sim_thing.a: Creation errored after"), "{out}");
    assert!(
        out.contains("sim_thing.c: Creation complete after"),
        "{out}"
    );
    assert!(
        !out.contains("sim_thing.b: Creating"),
        "b depends on a: skipped\n{out}"
    );
    assert!(
        out.contains("Apply failed. Before the errors above: 1 added"),
        "{out}"
    );
    assert!(!out.contains("Apply complete!"), "{out}");
    assert!(err.contains("sim: injected failure for create a"), "{err}");
    let (code, out, _) = run(&["apply", "-auto-approve", "-json"]);
    assert_eq!(code, Some(1));
    let types: Vec<String> = out
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["type"].to_string())
        .collect();
    assert!(types.contains(&"\"apply_errored\"".to_string()), "{out}");
    assert!(types.contains(&"\"diagnostic\"".to_string()), "{out}");
}

/// The same error for each of 1,200 instances is printed once, with how many instances it
/// affects (issue 14: "one diagnostic per problem").
#[test]
fn one_diagnostic_per_problem() {
    let dir = project(&[(
        "main.tf",
        "resource \"sim_thing\" \"a\" {\n  count = 1200\n  name  = \"a\"\n  value = 1 + \"x${count.index}\"\n}\n",
    )]);
    let (code, _, err) = check_cli_in(dir.path(), &["plan", "-no-color"], "");
    assert_eq!(code, 1, "{err}");
    assert_eq!(err.matches("Error: Invalid operand").count(), 1, "{err}");
    assert!(
        err.contains("with sim_thing.a[0] (and 1199 more instances)"),
        "{err}"
    );
    // The -json stream too: one diagnostic message, naming the other instances.
    let (code, out, _) = check_cli_in(dir.path(), &["plan", "-json"], "");
    assert_eq!(code, 1);
    let diags: Vec<serde_json::Value> = out
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|j| j["type"] == "diagnostic")
        .collect();
    assert_eq!(diags.len(), 1, "{out}");
    assert_eq!(diags[0]["diagnostic"]["address"], "sim_thing.a[0]");
    let more = diags[0]["diagnostic"]["cairn_more_addresses"]
        .as_array()
        .unwrap();
    assert_eq!(more.len(), 1199);
    assert!(more.iter().any(|a| a == "sim_thing.a[1199]"));
}

/// A module written in Terraform's JSON syntax beside a `.tf` file: `validate -json` ranges
/// point into the JSON.
#[test]
fn validate_json_ranges_point_into_tf_json() {
    let dir = project(&[
        ("main.tf", "locals {\n  a = 1\n}\n"),
        (
            "main.tf.json",
            "{\n  \"output\": {\n    \"o\": {\n      \"value\": \"${local.nope}\"\n    }\n  }\n}\n",
        ),
    ]);
    let (code, out, _) = check_cli_in(dir.path(), &["validate", "-json"], "");
    assert_eq!(code, 1, "{out}");
    let j: serde_json::Value = serde_json::from_str(&out).unwrap();
    let d = &j["diagnostics"][0];
    assert_eq!(d["summary"], "Reference to undeclared local value", "{out}");
    assert_eq!(d["range"]["filename"], "main.tf.json");
    assert_eq!(d["range"]["start"]["line"], 4);
    assert_eq!(d["range"]["start"]["column"], 19);
}

/// Workspaces, as a Terraform user drives them: each has its own state and history,
/// `terraform.workspace` names it, and the commands print Terraform's messages
/// (`fixtures/golden/cli/workspaces.txt`).
#[test]
fn workspaces_keep_separate_states() {
    let dir = project(&[(
        "main.tf",
        "resource \"terraform_data\" \"a\" {\n  input = terraform.workspace\n}\n\
         output \"ws\" {\n  value = terraform.workspace\n}\n",
    )]);
    let t = transcript(
        dir.path(),
        &[
            "apply -auto-approve",
            "workspace show",
            "workspace new dev",
            "workspace list",
            "plan",
            "apply -auto-approve",
            "history",
            "workspace new dev",
            "workspace new a/b",
            "workspace select nope",
            "workspace select default",
            "output ws",
            "state list",
            "workspace delete dev",
            "workspace delete default",
            "workspace delete -force dev",
            "workspace select -or-create qa",
            "workspace list",
        ],
    );
    let t = regex::Regex::new(r"\[id=[0-9a-f-]{36}\]")
        .unwrap()
        .replace_all(&t, "[id=<uuid>]");
    check_golden("workspaces.txt", &t);

    // TF_WORKSPACE selects (and starts) a workspace and cannot be changed by `select`.
    let tf_ws = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_cairn"))
            .args(args)
            .current_dir(dir.path())
            .env("NO_COLOR", "1")
            .env("TF_WORKSPACE", "ci")
            .env_remove("CAIRN_STATE_DIR")
            .stdin(Stdio::null())
            .output()
            .unwrap();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, out, err) = tf_ws(&["apply", "-auto-approve"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("ws = \"ci\""), "{out}");
    let (_, out, err) = tf_ws(&["workspace", "list"]);
    assert_eq!(out, "  default\n* ci\n  qa\n\n");
    assert!(err.contains("overridden using the TF_WORKSPACE"), "{err}");
    let (code, _, err) = tf_ws(&["workspace", "select", "default"]);
    assert_eq!(code, 1);
    assert!(
        err.contains("To select a new workspace, either update"),
        "{err}"
    );
    // Without it, the selection recorded by `select` is back.
    let (_, out, _) = check_cli_in(dir.path(), &["workspace", "show"], "");
    assert_eq!(out, "qa\n");

    // Another configuration reads a workspace's outputs.
    let reader = project(&[(
        "main.tf",
        &format!(
            "data \"terraform_remote_state\" \"ci\" {{\n  backend   = \"local\"\n  \
             workspace = \"ci\"\n  config    = {{ path = \"{}\" }}\n}}\n\
             output \"theirs\" {{\n  value = data.terraform_remote_state.ci.outputs.ws\n}}\n",
            dir.path().display()
        ),
    )]);
    let (code, out, err) = check_cli_in(reader.path(), &["apply", "-auto-approve"], "");
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("theirs = \"ci\""), "{out}");
}

/// `console` works in a directory with no configuration, as Terraform's does.
#[test]
fn console_without_configuration_files() {
    let (code, out, err) = check_cli(&["console"], "1 + 1\nupper(\"a\")\n");
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "2\n\"A\"\n");
}

/// `-target` narrows to what it names, as Terraform does: one instance of a counted
/// resource, one instance of a module (and a resource inside it); the others are neither
/// planned nor deleted, and a full plan afterwards plans them.
#[test]
fn target_names_instances_and_module_instances() {
    let dir = project(&[
        (
            "main.tf",
            "resource \"terraform_data\" \"a\" {\n  count = 2\n  input = count.index\n}\n\
             module \"m\" {\n  source   = \"./m\"\n  for_each = toset([\"a\", \"b\"])\n}\n",
        ),
        (
            "m/main.tf",
            "resource \"terraform_data\" \"n\" {\n  input = 1\n}\n",
        ),
    ]);
    let planned = |args: &[&str]| -> Vec<String> {
        let (code, out, err) = check_cli_in(dir.path(), args, "");
        assert_eq!(code, 0, "{args:?}: {err}");
        out.lines()
            .filter(|l| l.contains("will be created") && !l.contains("provider["))
            .map(|l| l.trim().to_string())
            .collect()
    };
    assert_eq!(
        planned(&["plan", "-target=terraform_data.a[0]"]),
        ["# terraform_data.a[0] will be created"]
    );
    assert_eq!(
        planned(&["plan", "-target=module.m[\"b\"]"]),
        ["# module.m[\"b\"].terraform_data.n will be created"]
    );
    assert_eq!(
        planned(&["plan", "-target=module.m[\"b\"].terraform_data.n"]),
        ["# module.m[\"b\"].terraform_data.n will be created"]
    );
    let (code, _, err) = check_cli_in(
        dir.path(),
        &["apply", "-auto-approve", "-target=terraform_data.a[1]"],
        "",
    );
    assert_eq!(code, 0, "{err}");
    // Shrinking the count while targeting a[0]: a[1] is not deleted (not targeted).
    std::fs::write(
        dir.path().join("main.tf"),
        "resource \"terraform_data\" \"a\" {\n  count = 1\n  input = count.index\n}\n",
    )
    .unwrap();
    let (code, out, err) = check_cli_in(dir.path(), &["plan", "-target=terraform_data.a[0]"], "");
    assert_eq!(code, 0, "{err}");
    assert!(!out.contains("will be destroyed"), "{out}");
    let (_, out, _) = check_cli_in(dir.path(), &["plan"], "");
    assert!(
        out.contains("# terraform_data.a[1] will be destroyed"),
        "{out}"
    );
}

/// A built-in provider's own rules are checked at plan, before anything is applied, as
/// Terraform's providers check theirs in `ValidateResourceConfig`.
#[test]
fn built_in_provider_rules_are_checked_at_plan() {
    let dir = project(&[(
        "main.tf",
        "resource \"random_string\" \"s\" {\n  length = 0\n}\nresource \"random_integer\" \"i\" {\n  min = 5\n  max = 1\n}\n",
    )]);
    let (code, _, err) = check_cli_in(dir.path(), &["plan", "-no-color"], "");
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("Argument \"length\" must be a whole number of at least 1, got: 0."),
        "{err}"
    );
    assert!(
        err.contains("The minimum (5) must be smaller than or equal to the maximum (1)."),
        "{err}"
    );
    let (code, _, err) = check_cli_in(dir.path(), &["apply", "-auto-approve", "-no-color"], "");
    assert_eq!(code, 1, "{err}");
    let (_, out, _) = check_cli_in(dir.path(), &["state", "list"], "");
    assert!(!out.contains("random_string.s"), "{out}");
}
