//! Benchmarks of the lifecycle, run with `cargo bench --bench lifecycle` (they print figures and
//! ratios; they are not timed tests). Each runs the real `cairn` binary as a child process in a
//! temporary directory, so wall time and peak memory (the child's max RSS) are those a user
//! sees.
//!
//! 1. Load + evaluate (`cairn inspect`) of 10,000 `terraform_data` in chains of 10.
//! 2. `plan` and `apply -auto-approve` of the same configuration; with `terraform` installed,
//!    Terraform 1.x on 1,000 of them (10,000 would take it many minutes), and the ratio.
//! 3. Refresh of 1,000 `sim_thing`s with `latency_ms = 20` at `-parallelism=10`, against the
//!    floor of 100 rounds × 20 ms = 2 s.
//!
//! `CAIRN_BENCH_N` overrides 10,000; `CAIRN_BENCH_TERRAFORM=0` skips Terraform.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

/// Runs a command; returns its wall time and peak RSS in MiB.
fn measure(mut cmd: Command) -> (Duration, f64) {
    let start = Instant::now();
    let out = cmd.output().expect("command runs");
    let elapsed = start.elapsed();
    if !out.status.success() {
        panic!(
            "{:?} failed:\n{}\n{}",
            cmd,
            String::from_utf8_lossy(&out.stdout)
                .chars()
                .take(3000)
                .collect::<String>(),
            String::from_utf8_lossy(&out.stderr)
                .chars()
                .take(3000)
                .collect::<String>()
        );
    }
    (elapsed, peak_children_mib())
}

/// The largest max-RSS of any child so far (getrusage(RUSAGE_CHILDREN)); each measurement
/// below runs a larger child than the last, or is labelled as an upper bound.
fn peak_children_mib() -> f64 {
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage writes into the struct we own.
    unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut usage) };
    usage.ru_maxrss as f64 / 1024.0
}

fn chains(dir: &Path, n: usize, chain: usize) {
    let mut tf = String::new();
    for i in 0..n {
        let (c, j) = (i / chain, i % chain);
        if j == 0 {
            tf.push_str(&format!(
                "resource \"terraform_data\" \"r{c}_{j}\" {{\n  input = \"chain-{c}\"\n}}\n"
            ));
        } else {
            tf.push_str(&format!(
                "resource \"terraform_data\" \"r{c}_{j}\" {{\n  input = \"${{terraform_data.r{c}_{}.output}}-{j}\"\n}}\n",
                j - 1
            ));
        }
    }
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("main.tf"), tf).unwrap();
}

fn cairn(dir: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_cairn"));
    c.arg(format!("-chdir={}", dir.display()))
        .args(args)
        .env("NO_COLOR", "1");
    c
}

fn main() {
    let n: usize = std::env::var("CAIRN_BENCH_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000);
    let tmp = tempfile::tempdir().unwrap();

    // 1 and 2: terraform_data chains.
    let dir = tmp.path().join("chains");
    chains(&dir, n, 10);
    let (t, mem) = measure(cairn(&dir, &["inspect", "-json"]));
    println!("load+evaluate {n} resources (cairn inspect): {:.3} s, peak {:.0} MiB (target: well under 0.5 s)", t.as_secs_f64(), mem);
    let (t_plan, mem) = measure(cairn(&dir, &["plan"]));
    println!(
        "cairn plan   {n} terraform_data: {:.3} s, peak {:.0} MiB (target < 1 s, < 300 MB)",
        t_plan.as_secs_f64(),
        mem
    );
    let (t_apply, mem) = measure(cairn(&dir, &["apply", "-auto-approve"]));
    println!(
        "cairn apply  {n} terraform_data: {:.3} s, peak {:.0} MiB (target < 3 s, < 300 MB)",
        t_apply.as_secs_f64(),
        mem
    );
    let (t_noop, _) = measure(cairn(&dir, &["plan", "-detailed-exitcode"]));
    println!("cairn no-op plan {n}: {:.3} s", t_noop.as_secs_f64());

    let want_tf = std::env::var("CAIRN_BENCH_TERRAFORM")
        .map(|v| v != "0")
        .unwrap_or(true);
    if want_tf
        && Command::new("terraform")
            .arg("version")
            .output()
            .is_ok_and(|o| o.status.success())
    {
        let m = 1000.min(n);
        let tf_dir = tmp.path().join("tf");
        chains(&tf_dir, m, 10);
        let tf = |args: &[&str]| {
            let mut c = Command::new("terraform");
            c.current_dir(&tf_dir)
                .args(args)
                .env("CHECKPOINT_DISABLE", "1")
                .env("TF_IN_AUTOMATION", "1");
            c
        };
        measure(tf(&["init", "-input=false"]));
        let (tf_plan, _) = measure(tf(&["plan", "-input=false", "-lock=false"]));
        let (tf_apply, _) = measure(tf(&[
            "apply",
            "-input=false",
            "-auto-approve",
            "-lock=false",
        ]));
        let small = tmp.path().join("small");
        chains(&small, m, 10);
        let (c_plan, _) = measure(cairn(&small, &["plan"]));
        let (c_apply, _) = measure(cairn(&small, &["apply", "-auto-approve"]));
        println!(
            "at {m} resources: terraform plan {:.2} s vs cairn {:.3} s (ratio {:.0}x); terraform apply {:.2} s vs cairn {:.3} s (ratio {:.0}x)",
            tf_plan.as_secs_f64(),
            c_plan.as_secs_f64(),
            tf_plan.as_secs_f64() / c_plan.as_secs_f64(),
            tf_apply.as_secs_f64(),
            c_apply.as_secs_f64(),
            tf_apply.as_secs_f64() / c_apply.as_secs_f64()
        );
    } else {
        println!("terraform: skipped");
    }

    // 3: refresh of 1,000 sim_things at 20 ms latency.
    let sim = tmp.path().join("sim");
    std::fs::create_dir_all(&sim).unwrap();
    let mut tf = String::new();
    for i in 0..1000 {
        tf.push_str(&format!(
            "resource \"sim_thing\" \"t{i}\" {{\n  name = \"t{i}\"\n}}\n"
        ));
    }
    std::fs::write(sim.join("main.tf"), tf).unwrap();
    let store = sim.join("store");
    let mut create = cairn(&sim, &["apply", "-auto-approve"]);
    create.env("SIM_STORE", &store).env("SIM_LATENCY_MS", "0");
    measure(create);
    let mut refresh = cairn(&sim, &["refresh", "-parallelism=10"]);
    refresh.env("SIM_STORE", &store).env("SIM_LATENCY_MS", "20");
    let (t, _) = measure(refresh);
    println!(
        "refresh 1000 sim_thing at 20 ms, -parallelism=10: {:.3} s; floor 2.000 s; ratio {:.3} (target < 1.15)",
        t.as_secs_f64(),
        t.as_secs_f64() / 2.0
    );
}
