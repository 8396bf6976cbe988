//! `apply` of 10,000 `terraform_data` on PostgreSQL against the same on sled, in one run
//! (`cargo bench --bench pg_apply`): the real `cairn` binary, a fresh state each time, a real
//! server with PostgreSQL's durable defaults on the loopback interface. Prints best and median
//! of `CAIRN_BENCH_RUNS` (default 3) runs per store and the ratio of the medians.
//! `CAIRN_BENCH_N` overrides 10,000.

#[path = "../../state/tests/support/pgserver.rs"]
mod pgserver;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn apply(dir: &Path, env: &[(&str, String)]) -> Duration {
    let mut c = Command::new(env!("CARGO_BIN_EXE_cairn"));
    c.args(["apply", "-auto-approve", "-parallelism=10"])
        .current_dir(dir)
        .env("NO_COLOR", "1")
        .env_remove("CAIRN_STATE_DIR")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    for (k, v) in env {
        c.env(k, v);
    }
    let start = Instant::now();
    let out = c.output().expect("cairn runs");
    let t = start.elapsed();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    t
}

fn init(dir: &Path, env: &[(&str, String)]) {
    let mut c = Command::new(env!("CARGO_BIN_EXE_cairn"));
    c.arg("init").current_dir(dir).stdin(Stdio::null());
    for (k, v) in env {
        c.env(k, v);
    }
    let out = c.output().expect("cairn runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn project(n: usize, schema: Option<&str>) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let mut tf = String::new();
    if let Some(s) = schema {
        tf.push_str(&format!(
            "terraform {{\n  backend \"pg\" {{\n    schema_name = \"{s}\"\n  }}\n}}\n"
        ));
    }
    for i in 0..n {
        tf.push_str(&format!(
            "resource \"terraform_data\" \"r{i}\" {{\n  input = \"value-{i}\"\n}}\n"
        ));
    }
    std::fs::write(dir.path().join("main.tf"), tf).unwrap();
    dir
}

fn stats(mut v: Vec<Duration>) -> (f64, f64) {
    v.sort();
    (v[0].as_secs_f64(), v[v.len() / 2].as_secs_f64())
}

fn main() {
    let Some(server) = pgserver::start_or_skip(false) else {
        return;
    };
    let n: usize = std::env::var("CAIRN_BENCH_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000);
    let runs: usize = std::env::var("CAIRN_BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3);
    let pg_env = [("PG_CONN_STR", server.conn_str())];
    let (mut sled, mut pg) = (Vec::new(), Vec::new());
    for r in 0..runs {
        let d = project(n, None);
        init(d.path(), &[]);
        sled.push(apply(d.path(), &[]));
        let d = project(n, Some(&format!("bench_{r}")));
        init(d.path(), &pg_env);
        pg.push(apply(d.path(), &pg_env));
    }
    let (sb, sm) = stats(sled);
    let (pb, pm) = stats(pg);
    println!("cairn apply {n} terraform_data on sled:       best {sb:.2} s, median {sm:.2} s ({runs} runs)");
    println!("cairn apply {n} terraform_data on PostgreSQL: best {pb:.2} s, median {pm:.2} s ({runs} runs)");
    println!("PostgreSQL / sled (medians): {:.2}", pm / sm);
}
