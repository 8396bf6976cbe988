//! Signals sent at a phase of a run, found by what the run prints (never by a delay, which a
//! loaded machine stretches): issue 30's fault matrix on the shared stores.

use std::io::{BufRead, BufReader, Read};
use std::process::Command;
use std::time::Duration;

/// The phases of an apply, each with the line of its output that says it has begun (`None`:
/// the start, while the configuration loads, signalled after `LOAD_DELAY`).
pub const PHASES: &[(&str, Option<&str>)] = &[
    ("load", None),
    ("refresh", Some("Refreshing state...")),
    ("plan", Some("will perform the following actions")),
    ("apply", Some("Creating...")),
    ("state write", Some("Creation complete")),
];

const LOAD_DELAY: Duration = Duration::from_millis(30);

/// What a signalled run did.
pub struct Signalled {
    pub code: i32,
    pub out: String,
    pub err: String,
    /// The phase's line was printed before the signal (or the phase is the start).
    pub hit: bool,
}

/// Starts `cmd` (its standard output piped) and sends it `signal` once a line of its output
/// contains `marker` (or `LOAD_DELAY` after the start).
pub fn signal_at(mut cmd: Command, marker: Option<&'static str>, signal: i32) -> Signalled {
    let mut child = cmd.spawn().expect("cairn starts");
    let pid = child.id() as libc::pid_t;
    let stdout = child.stdout.take().expect("piped stdout");
    let mut stderr = child.stderr.take().expect("piped stderr");
    let errs = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    let reader = std::thread::spawn(move || {
        let mut out = String::new();
        let mut hit = marker.is_none();
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if !hit && marker.is_some_and(|m| line.contains(m)) {
                // SAFETY: kill(2) on our own child's pid.
                unsafe { libc::kill(pid, signal) };
                hit = true;
            }
            out.push_str(&line);
            out.push('\n');
        }
        (out, hit)
    });
    if marker.is_none() {
        std::thread::sleep(LOAD_DELAY);
        // SAFETY: kill(2) on our own child's pid.
        unsafe { libc::kill(pid, signal) };
    }
    let status = child.wait().expect("cairn ends");
    let (out, hit) = reader.join().expect("the reader ends");
    let err = errs.join().expect("the reader ends");
    Signalled {
        code: status.code().unwrap_or(-1),
        out,
        err,
        hit,
    }
}
