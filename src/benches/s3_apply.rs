//! `apply` of 1,000 `terraform_data` on S3 (moto's server on the loopback interface, a real
//! HTTP S3 endpoint) against the same on sled, in one run (`cargo bench --bench s3_apply`):
//! the real `cairn` binary, a fresh state and a fresh bucket key each time. Prints best and
//! median of `CAIRN_BENCH_RUNS` (default 3) runs per store, the ratio of the medians (issue
//! 29's goal: within 2×) and how many event batch objects the S3 apply wrote.
//! `CAIRN_BENCH_N` overrides 1,000.

#[path = "../../state/tests/support/s3server.rs"]
mod s3server;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn cairn(dir: &Path, args: &[&str], env: &[(&str, String)]) -> Duration {
    let mut c = Command::new(env!("CARGO_BIN_EXE_cairn"));
    c.args(args)
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
        "cairn {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    t
}

fn project(n: usize, backend: Option<(&str, &str)>) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let mut tf = String::new();
    if let Some((bucket, key)) = backend {
        tf.push_str(&format!(
            "terraform {{\n  backend \"s3\" {{\n    bucket = \"{bucket}\"\n    key = \"{key}\"\n    \
             region = \"us-east-1\"\n    use_path_style = true\n    use_lockfile = true\n    \
             skip_credentials_validation = true\n    skip_requesting_account_id = true\n  }}\n}}\n"
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
    let Some(server) = s3server::shared() else {
        return;
    };
    let n: usize = std::env::var("CAIRN_BENCH_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000);
    let runs: usize = std::env::var("CAIRN_BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3);
    let bucket = s3server::bucket_name("bench");
    server.bucket(&bucket);
    let env = [
        ("AWS_ACCESS_KEY_ID", s3server::ACCESS_KEY.to_string()),
        ("AWS_SECRET_ACCESS_KEY", s3server::SECRET_KEY.to_string()),
        ("AWS_ENDPOINT_URL_S3", server.endpoint()),
    ];
    let apply = ["apply", "-auto-approve", "-parallelism=10"];
    let (mut sled, mut s3) = (Vec::new(), Vec::new());
    for r in 0..runs {
        let d = project(n, None);
        cairn(d.path(), &["init"], &[]);
        sled.push(cairn(d.path(), &apply, &[]));
        let key = format!("run{r}/terraform.tfstate");
        let d = project(n, Some((&bucket, &key)));
        cairn(d.path(), &["init"], &env);
        s3.push(cairn(d.path(), &apply, &env));
    }
    let batches = server
        .keys(&bucket)
        .iter()
        .filter(|k| k.starts_with("run0/") && k.contains(".cairn/events/"))
        .count();
    let (sb, sm) = stats(sled);
    let (pb, pm) = stats(s3);
    println!(
        "cairn apply {n} terraform_data on sled: best {sb:.2} s, median {sm:.2} s ({runs} runs)"
    );
    println!("cairn apply {n} terraform_data on S3:   best {pb:.2} s, median {pm:.2} s ({runs} runs; {batches} event batch objects in one apply)");
    println!("S3 / sled (medians): {:.2} (goal: at most 2)", pm / sm);
}
