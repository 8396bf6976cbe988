//! Issue 30: damage to the state is always detected. A damage campaign on the sled store of
//! the real binary's state — bit flips, zeroed blocks, runs of random bytes, truncation,
//! removed files — after which no command may show a shorter state without an error, `plan`
//! never proposes to create what exists, and `state recover` goes on from the last good
//! event with a copy of the damaged store.

use super::project;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

fn cairn(dir: &Path, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_cairn"))
        .args(args)
        .current_dir(dir)
        .env("NO_COLOR", "1")
        .env_remove("CAIRN_STATE_DIR")
        .env_remove("CAIRN_LOG")
        .env_remove("CAIRN_LOG_PATH")
        .env_remove("TF_WORKSPACE")
        .env_remove("SIM_FAIL")
        .env_remove("SIM_LATENCY_MS")
        .stdin(Stdio::null())
        .output()
        .expect("the cairn binary runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn ok(dir: &Path, args: &[&str]) -> String {
    let (code, out, err) = cairn(dir, args);
    assert_eq!(code, 0, "cairn {args:?}\n{out}\n{err}");
    out
}

/// The resource instances `state list` shows (it lists provider instances too).
fn instances(listed: &str) -> usize {
    listed
        .lines()
        .filter(|l| l.starts_with("sim_thing."))
        .count()
}

fn ten_things() -> String {
    (0..10)
        .map(|i| format!("resource \"sim_thing\" \"t{i}\" {{\n  name = \"t{i}\"\n}}\n"))
        .collect()
}

/// A small deterministic generator (xorshift), so a failing trial can be replayed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
    fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next() % n
        }
    }
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let target = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_tree(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), &target).unwrap();
        }
    }
}

/// The files of sled's database (`db`, `snap.*`, `conf`), largest first.
fn sled_files(state: &Path) -> Vec<PathBuf> {
    let mut files: Vec<(u64, PathBuf)> = std::fs::read_dir(state.join("log"))
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().map(|t| t.is_file()).unwrap_or(false))
        .map(|e| (e.metadata().unwrap().len(), e.path()))
        .collect();
    files.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    files.into_iter().map(|(_, p)| p).collect()
}

/// Damages the state directory `state` as trial `kind` says; returns what was done.
fn damage(state: &Path, kind: u64, rng: &mut Rng) -> String {
    let files = sled_files(state);
    let db = state.join("log/db");
    let mut bytes = std::fs::read(&db).unwrap();
    // sled preallocates its segments: the damage goes where the data is (up to the last byte
    // that is not zero), as a failing disk's would matter.
    let len = bytes.iter().rposition(|b| *b != 0).map_or(1, |i| i + 1) as u64;
    let what = match kind % 6 {
        0 => {
            let n = 1 + rng.below(4);
            let mut at = Vec::new();
            for _ in 0..n {
                let i = rng.below(len) as usize;
                bytes[i] ^= 1 << rng.below(8);
                at.push(i);
            }
            std::fs::write(&db, &bytes).unwrap();
            format!("{n} bit flip(s) in log/db at {at:?}")
        }
        1 => {
            let block = rng.below(len.div_ceil(4096)) as usize * 4096;
            let end = (block + 4096).min(len as usize);
            bytes[block..end].fill(0);
            std::fs::write(&db, &bytes).unwrap();
            format!("zeroed block at {block} of log/db")
        }
        2 => {
            let at = rng.below(len.saturating_sub(64)) as usize;
            for b in &mut bytes[at..at + 64] {
                *b = rng.next() as u8;
            }
            std::fs::write(&db, &bytes).unwrap();
            format!("64 random bytes at {at} of log/db")
        }
        3 => {
            let to = rng.below(len);
            std::fs::write(&db, &bytes[..to as usize]).unwrap();
            format!("log/db truncated to {to} of {len} bytes")
        }
        4 => {
            let snaps: Vec<&PathBuf> = files
                .iter()
                .filter(|p| {
                    p.file_name()
                        .and_then(|n| n.to_str())
                        .is_some_and(|n| n.starts_with("snap."))
                })
                .collect();
            match snaps.first() {
                Some(s) => {
                    std::fs::remove_file(s).unwrap();
                    format!("removed {}", s.display())
                }
                None => {
                    std::fs::remove_file(&db).unwrap();
                    "removed log/db".into()
                }
            }
        }
        _ => {
            // The damage at the end of the file, where the newest writes are.
            let tail = len.min(4096);
            let at = (len - tail + rng.below(tail)) as usize;
            bytes[at] ^= 0x40;
            std::fs::write(&db, &bytes).unwrap();
            format!("a bit flip near the end of log/db (at {at})")
        }
    };
    what
}

/// The campaign: every trial either reads the whole state (the damage hit nothing in use:
/// `state list` as before, `plan` says "No changes.") or fails with a clear error (no panic)
/// — never a shorter state. `state recover` then goes on, or says clearly why it cannot.
#[test]
fn a_damage_campaign_on_sled_never_yields_a_shorter_state_without_an_error() {
    let dir = project(&[("main.tf", &ten_things())]);
    let d = dir.path();
    ok(d, &["apply", "-auto-approve"]);
    // A second run, so the log holds more than one.
    std::fs::write(
        d.join("main.tf"),
        ten_things().replace("name = \"t3\"", "name = \"t3\"\n  value = \"v\""),
    )
    .unwrap();
    ok(d, &["apply", "-auto-approve"]);
    let listed = ok(d, &["state", "list"]);
    assert_eq!(instances(&listed), 10, "{listed}");
    let verified = ok(d, &["state", "verify"]);
    assert!(verified.contains("The state log is intact"), "{verified}");
    let pristine = tempfile::tempdir().unwrap();
    copy_tree(&d.join(".cairn"), pristine.path());
    let trials = 48;
    let (mut detected, mut harmless, mut recovered) = (0, 0, 0);
    let mut silent = Vec::new();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for trial in 0..trials {
        std::fs::remove_dir_all(d.join(".cairn")).unwrap();
        copy_tree(pristine.path(), &d.join(".cairn"));
        let what = damage(&d.join(".cairn"), trial, &mut rng);
        let (code, out, err) = cairn(d, &["state", "list"]);
        eprintln!(
            "trial {trial}: {what}: exit {code}, {} instance(s) {}",
            instances(&out),
            err.lines().find(|l| l.contains("damaged")).unwrap_or("")
        );
        assert_ne!(code, 101, "trial {trial} ({what}): a panic\n{err}");
        assert!(!err.contains("panicked"), "trial {trial} ({what}):\n{err}");
        if code == 0 {
            if out != listed {
                silent.push(format!(
                    "trial {trial} ({what}): state list shows {} of 10 with exit 0",
                    instances(&out)
                ));
                continue;
            }
            let (code, out, err) = cairn(d, &["plan", "-detailed-exitcode"]);
            if code != 0 {
                assert_ne!(code, 101, "trial {trial} ({what}): a panic\n{err}");
                assert!(
                    code == 1 && !out.contains("will be created"),
                    "trial {trial} ({what}): plan with exit {code}\n{out}\n{err}"
                );
                detected += 1;
            } else {
                harmless += 1;
            }
            continue;
        }
        assert_eq!(code, 1, "trial {trial} ({what})\n{err}");
        // The error says what is wrong and what to do, in Cairn's words, not sled's.
        assert!(
            !err.contains("backtrace"),
            "trial {trial} ({what}): sled's raw text\n{err}"
        );
        assert!(
            err.contains("damaged") || err.contains("corrupt"),
            "trial {trial} ({what}): {err}"
        );
        detected += 1;
        // Nothing is written to a damaged state.
        let (code, out, err) = cairn(d, &["apply", "-auto-approve"]);
        assert_eq!(
            code, 1,
            "trial {trial} ({what}): apply on a damaged state\n{out}\n{err}"
        );
        assert!(
            !out.contains("Creation complete"),
            "trial {trial} ({what}):\n{out}"
        );
        let (code, out, err) = cairn(d, &["state", "recover"]);
        assert_ne!(code, 101, "trial {trial} ({what}): recover panicked\n{err}");
        if code == 0 {
            assert!(out.contains("Recovered the state"), "{out}");
            let backup = std::fs::read_dir(d.join(".cairn"))
                .unwrap()
                .filter_map(|e| e.ok())
                .any(|e| e.file_name().to_string_lossy().starts_with("damaged-"));
            assert!(
                backup,
                "trial {trial} ({what}): no copy of the damaged store"
            );
            ok(d, &["state", "verify"]);
            let history = ok(d, &["history"]);
            assert!(history.contains("state recover"), "{history}");
            recovered += 1;
        } else {
            assert_eq!(code, 1, "trial {trial} ({what}): recover\n{out}\n{err}");
        }
    }
    eprintln!(
        "damage campaign: {trials} trials, {detected} detected, {harmless} harmless, \
         {recovered} recovered, {} silent",
        silent.len()
    );
    assert!(
        silent.is_empty(),
        "history lost without a word:\n{}",
        silent.join("\n")
    );
}

/// A log that reads shorter than its head (the newest records gone, as sled's recovery drops
/// them) is an error naming the events lost, the runs and the resources they held; `state
/// recover` keeps a copy, records the recovery as a run and lists the objects to import.
#[test]
fn a_log_shorter_than_its_head_is_an_error_and_recover_goes_on() {
    let dir = project(&[("main.tf", &ten_things())]);
    let d = dir.path();
    ok(d, &["apply", "-auto-approve"]);
    let head_after_first = std::fs::read(d.join(".cairn/log-head")).unwrap();
    let first = tempfile::tempdir().unwrap();
    copy_tree(&d.join(".cairn/log"), first.path());
    std::fs::write(
        d.join("main.tf"),
        format!(
            "{}resource \"sim_thing\" \"extra\" {{\n  name = \"extra\"\n}}\n",
            ten_things()
        ),
    )
    .unwrap();
    ok(d, &["apply", "-auto-approve"]);
    // The database as after the first apply, the head as after the second: the second run's
    // events are lost.
    let head = std::fs::read(d.join(".cairn/log-head")).unwrap();
    assert_ne!(head, head_after_first);
    std::fs::remove_dir_all(d.join(".cairn/log")).unwrap();
    copy_tree(first.path(), &d.join(".cairn/log"));
    std::fs::remove_dir_all(d.join(".cairn/checkpoints")).ok();
    for args in [&["state", "list"][..], &["plan"], &["state", "verify"]] {
        let (code, out, err) = cairn(d, args);
        assert_eq!(code, 1, "{args:?}\n{out}\n{err}");
        assert!(err.contains("is damaged from event"), "{err}");
        assert!(err.contains("are lost"), "{err}");
        assert!(err.contains("cairn state recover"), "{err}");
        assert!(!out.contains("will be created"), "{out}");
    }
    let out = ok(d, &["state", "recover"]);
    assert!(out.contains("Recovered the state"), "{out}");
    assert!(out.contains("damaged-"), "{out}");
    ok(d, &["state", "verify"]);
    let listed = ok(d, &["state", "list"]);
    assert_eq!(instances(&listed), 10, "{listed}");
    let log = ok(d, &["history", "-json"]);
    assert!(log.contains("\"state recover\""), "{log}");
    // The recovery is a run of its own, with what it found, in the log.
    let events = ok(d, &["log"]);
    assert!(events.contains("State recovered from damage"), "{events}");
}

/// A changed record (its bytes rewritten in place, as a bad copy does) breaks the chain: the
/// error names the record, whatever the encoding still decodes to.
#[test]
fn state_verify_checks_the_whole_chain() {
    let dir = project(&[("main.tf", &ten_things())]);
    let d = dir.path();
    ok(d, &["apply", "-auto-approve"]);
    ok(d, &["apply", "-auto-approve"]);
    let out = ok(d, &["state", "verify"]);
    assert!(out.contains("events checked"), "{out}");
    // No state: nothing to verify.
    let empty = tempfile::tempdir().unwrap();
    let out = ok(empty.path(), &["state", "verify"]);
    assert!(out.contains("nothing to verify"), "{out}");
    // An undamaged state has nothing to recover.
    let (code, _, err) = cairn(d, &["state", "recover"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("nothing to recover"), "{err}");
}

/// Issue 30's small things users see: `validate` finds an attribute the resource type does
/// not have (as Terraform's validate does), a wrong-typed argument is wrong-typed and not
/// also missing, and `history`/`log` show the system's user name and the command once.
#[test]
fn validate_types_references_and_history_names_the_user_and_the_command_once() {
    let dir = project(&[(
        "main.tf",
        "resource \"sim_thing\" \"a\" {\n  name = \"a\"\n}\nresource \"sim_thing\" \"b\" {\n  name  = \"b\"\n  value = sim_thing.a.nope\n}\nresource \"sim_thing\" \"c\" {\n  name = [\"x\"]\n}\n",
    )]);
    let d = dir.path();
    for args in [&["validate"][..], &["plan"]] {
        let (code, _, err) = cairn(d, args);
        assert_eq!(code, 1, "{args:?}\n{err}");
        assert!(err.contains("Unsupported attribute"), "{args:?}\n{err}");
        assert!(err.contains("\"nope\""), "{args:?}\n{err}");
        assert!(err.contains("Incorrect attribute value type"), "{err}");
        assert!(
            !err.contains("Missing required argument"),
            "{args:?}\n{err}"
        );
    }
    std::fs::write(d.join("main.tf"), ten_things()).unwrap();
    ok(d, &["apply", "-auto-approve"]);
    let history = ok(d, &["history", "-json"]);
    assert!(!history.contains("\"uid "), "{history}");
    let log = ok(d, &["log"]);
    assert!(log.contains("cairn apply -auto-approve"), "{log}");
    assert!(!log.contains("cairn apply apply"), "{log}");
    // The user is the system's name for this process's uid (as `id -un` says).
    let me = Command::new("id").arg("-un").output().unwrap();
    let me = String::from_utf8_lossy(&me.stdout).trim().to_string();
    let without_env = Command::new(env!("CARGO_BIN_EXE_cairn"))
        .args(["apply", "-auto-approve"])
        .current_dir(d)
        .env_remove("USER")
        .env_remove("LOGNAME")
        .env_remove("USERNAME")
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(without_env.status.success());
    let history = ok(d, &["history", "-json"]);
    let last = history.lines().last().unwrap();
    assert!(last.contains(&format!("\"user\":\"{me}\"")), "{last}");
}

/// Issue 32: every run says where it ran. In a git checkout on branch `feature-x` under
/// GitHub Actions: the host (as `hostname` says), the commit (as `git rev-parse HEAD`), the
/// branch and the workflow run's page, in `history -json`, `history` and `log`. Outside a
/// checkout and CI: the host alone. A run recorded without a context (as every run before
/// it) reads as before, with none.
#[test]
fn history_says_where_each_run_ran_host_git_commit_branch_and_ci_job() {
    let git_ok = Command::new("git").arg("--version").output().is_ok();
    assert!(git_ok, "this test needs git");
    let host = Command::new("hostname").output().unwrap();
    let host = String::from_utf8_lossy(&host.stdout).trim().to_string();
    let ci_vars = [
        "GITHUB_SERVER_URL",
        "GITHUB_REPOSITORY",
        "GITHUB_RUN_ID",
        "CI_JOB_URL",
        "BUILDKITE_BUILD_URL",
        "BUILD_URL",
        "CIRCLE_BUILD_URL",
    ];
    let run = |d: &Path, args: &[&str], env: &[(&str, &str)]| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_cairn"));
        c.args(args)
            .current_dir(d)
            .env("NO_COLOR", "1")
            .env_remove("CAIRN_STATE_DIR")
            .env_remove("TF_WORKSPACE")
            .stdin(Stdio::null());
        for v in ci_vars {
            c.env_remove(v);
        }
        c.envs(env.iter().copied());
        let out = c.output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "{args:?}\n{text}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        text
    };
    let runs = |d: &Path| -> Vec<serde_json::Value> {
        run(d, &["history", "-json"], &[])
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    };

    // A git checkout, on branch feature-x, under GitHub Actions.
    let dir = project(&[("main.tf", &ten_things())]);
    let d = dir.path();
    let git = |args: &[&str]| {
        let out = Command::new("git")
            .args(args)
            .current_dir(d)
            .env("GIT_AUTHOR_NAME", "t")
            .env("GIT_AUTHOR_EMAIL", "t@example.com")
            .env("GIT_COMMITTER_NAME", "t")
            .env("GIT_COMMITTER_EMAIL", "t@example.com")
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}: {out:?}");
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    git(&["init", "-q"]);
    git(&["checkout", "-q", "-b", "feature-x"]);
    git(&["add", "main.tf"]);
    git(&["commit", "-q", "-m", "ten things"]);
    let commit = git(&["rev-parse", "HEAD"]);
    run(
        d,
        &["apply", "-auto-approve"],
        &[
            ("GITHUB_SERVER_URL", "https://github.com"),
            ("GITHUB_REPOSITORY", "acme/infra"),
            ("GITHUB_RUN_ID", "4242"),
        ],
    );
    let job = "https://github.com/acme/infra/actions/runs/4242";
    let r = &runs(d)[0];
    assert_eq!(r["host"], host.as_str(), "{r}");
    assert_eq!(r["git_commit"], commit.as_str(), "{r}");
    assert_eq!(r["git_branch"], "feature-x", "{r}");
    assert_eq!(r["ci_job"], job, "{r}");
    let text = run(d, &["history"], &[]);
    assert!(text.lines().next().unwrap().ends_with("WHERE"), "{text}");
    let place = format!("{host}, git feature-x@{}, {job}", &commit[..7]);
    assert!(text.lines().nth(1).unwrap().ends_with(&place), "{text}");
    // `log` says it where the run is introduced: right after its start.
    let log = run(d, &["log"], &[]);
    let lines: Vec<&str> = log.lines().collect();
    assert!(lines[0].contains("RunStarted"), "{log}");
    assert!(
        lines[1].contains("RunContext") && lines[1].ends_with(&format!("on {place}")),
        "{log}"
    );
    let events: Vec<serde_json::Value> = run(d, &["log", "-json"], &[])
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(events[1]["kind"], "RunContext");
    assert_eq!(events[1]["git_commit"], commit.as_str());
    // The state check and the chain accept the new kind of event.
    run(d, &["state", "check"], &[]);
    run(d, &["state", "verify"], &[]);

    // Not a checkout, no CI: the host alone.
    let dir = project(&[("main.tf", &ten_things())]);
    let d = dir.path();
    run(d, &["apply", "-auto-approve"], &[]);
    let r = &runs(d)[0];
    assert_eq!(r["host"], host.as_str(), "{r}");
    for field in ["git_commit", "git_branch", "ci_job"] {
        assert!(r[field].is_null(), "{field}: {r}");
    }
    assert!(run(d, &["history"], &[])
        .lines()
        .nth(1)
        .unwrap()
        .ends_with(&format!("  {host}")));

    // A run recorded without a context, as every run before Cairn recorded one: it reads,
    // with none, beside one that has it.
    {
        let opts = cairn::state::OpenOptions {
            command: "test".into(),
            write: true,
            lock_timeout: std::time::Duration::from_secs(10),
            ..Default::default()
        };
        let (mut store, _) = cairn::state::Store::open(&d.join(".cairn"), &opts).unwrap();
        store.begin_run("apply", &["apply".into()]).unwrap();
        store
            .finish_run(cairn::state::RunOutcome::Success, Default::default())
            .unwrap();
    }
    let all = runs(d);
    assert_eq!(all.len(), 2);
    assert_eq!(all[0]["host"], host.as_str());
    for field in ["host", "git_commit", "git_branch", "ci_job"] {
        assert!(all[1][field].is_null(), "{field}: {}", all[1]);
    }
    let text = run(d, &["history"], &[]);
    assert!(
        text.lines().nth(2).unwrap().ends_with("0 destroyed"),
        "{text}"
    );
    run(d, &["state", "check"], &[]);
}

#[test]
fn an_errored_plan_prints_what_terraform_prints() {
    // Checked with terraform 1.11 on the same files. An error that validation finds (no
    // input value involved) comes alone: no partial plan, from `plan` and from `apply`.
    let dir = project(&[(
        "main.tf",
        "resource \"terraform_data\" \"a\" {\n  input = 1\n}\nresource \"terraform_data\" \"b\" {\n  input = tonumber(\"x\")\n}\n",
    )]);
    let d = dir.path();
    for args in [&["plan"][..], &["apply", "-auto-approve"]] {
        let (code, out, err) = cairn(d, args);
        assert_eq!(code, 1, "{args:?}\n{out}\n{err}");
        assert!(err.contains("Invalid function argument"), "{args:?}\n{err}");
        assert!(out.trim().is_empty(), "{args:?}: no plan\n{out}");
    }
    let (code, out, _) = cairn(d, &["plan", "-json"]);
    assert_eq!(code, 1);
    assert!(!out.contains("planned_change"), "{out}");
    assert!(out.contains("\"type\":\"diagnostic\""), "{out}");
    // An error that only the plan's values reveal (a variable's value) comes after the
    // partial plan of what could be planned, from `plan` and from `apply`.
    std::fs::write(
        d.join("main.tf"),
        "variable \"v\" {\n  default = \"x\"\n}\nresource \"terraform_data\" \"a\" {\n  input = 1\n}\nresource \"terraform_data\" \"b\" {\n  input = tonumber(var.v)\n}\n",
    )
    .unwrap();
    for args in [&["plan"][..], &["apply", "-auto-approve"]] {
        let (code, out, err) = cairn(d, args);
        assert_eq!(code, 1, "{args:?}\n{out}\n{err}");
        assert!(
            out.contains("Cairn planned the following actions, but then encountered a problem:"),
            "{args:?}\n{out}"
        );
        assert!(
            out.contains("# terraform_data.a will be created"),
            "{args:?}\n{out}"
        );
        assert!(
            out.contains("Plan: 1 to add, 0 to change, 0 to destroy."),
            "{args:?}\n{out}"
        );
        assert!(!out.contains("Apply complete"), "{args:?}\n{out}");
        assert!(err.contains("Invalid function argument"), "{args:?}\n{err}");
    }
    // Nothing to show: Terraform's "Planning failed" line.
    std::fs::write(
        d.join("main.tf"),
        "variable \"v\" {\n  default = \"x\"\n}\nresource \"terraform_data\" \"b\" {\n  input = tonumber(var.v)\n}\n",
    )
    .unwrap();
    let (code, out, _) = cairn(d, &["plan"]);
    assert_eq!(code, 1);
    assert_eq!(
        out.trim(),
        "Planning failed. Cairn encountered an error while generating this plan."
    );
    // Nothing was recorded by the failed applies.
    let (_, list, _) = cairn(d, &["state", "list"]);
    assert!(list.trim().is_empty(), "{list}");
}

/// A process killed between its first durable commit and the head's first write (found by
/// p07: a kill 143 ms into a first apply) leaves a log longer than its head: a new log's
/// head is made durable at 0 before its first event, so the state opens whole, with nothing
/// lost; a head file removed outright is still damage.
#[test]
fn a_first_commit_cut_before_its_head_loses_nothing() {
    let dir = project(&[("main.tf", &ten_things())]);
    let d = dir.path();
    ok(d, &["init"]);
    // The head as it is before the first event: at 0.
    let genesis = std::fs::read(d.join(".cairn/log-head")).expect("a new log has its head");
    ok(d, &["apply", "-auto-approve"]);
    std::fs::write(d.join(".cairn/log-head"), &genesis).unwrap();
    let listed = ok(d, &["state", "list"]);
    assert_eq!(instances(&listed), 10, "{listed}");
    ok(d, &["state", "verify"]);
    let out = ok(d, &["plan"]);
    assert!(out.contains("No changes"), "{out}");
    std::fs::remove_file(d.join(".cairn/log-head")).unwrap();
    let (code, _, err) = cairn(d, &["state", "list"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("the log's head"), "{err}");
    assert!(err.contains("is missing"), "{err}");
}

/// A process killed while it first wrote a new log's head (found by p07 too: a kill 57 ms
/// into a first apply) leaves a torn head and no event: the next run writes it again and
/// goes on. Once the log has its lineage, a torn head is damage (the test above).
#[test]
fn a_new_logs_head_torn_as_it_was_first_written_is_written_again() {
    let dir = project(&[("main.tf", &ten_things())]);
    let d = dir.path();
    std::fs::create_dir_all(d.join(".cairn")).unwrap();
    std::fs::write(d.join(".cairn/log-head"), b"cairnhd1\x00\x00\x03").unwrap();
    ok(d, &["apply", "-auto-approve"]);
    let listed = ok(d, &["state", "list"]);
    assert_eq!(instances(&listed), 10, "{listed}");
    ok(d, &["state", "verify"]);
}
