//! Growth with the number of resources (issue 31), run with `cargo bench --bench scale`. It
//! prints, for each size N, the table of the lifecycle on N `terraform_data` in chains of 10
//! (the generator of `lifecycle.rs`): `plan` on an empty state, `apply -auto-approve`, a no-op
//! `plan` after it (refresh included), a no-op `plan -refresh=false` and `state list`, each with
//! its wall time and the child's peak RSS (its own `ru_maxrss`, from `wait4`); the state
//! directory's bytes on disk per event after the apply; and the ratios between successive sizes
//! (linear growth is a ratio equal to the ratio of the sizes).
//!
//! Each command runs the real release binary as a child process. `CAIRN_BENCH_SCALE` chooses
//! the sizes, a comma-separated list of counts with an optional `k` or `m` suffix (default
//! `10k,100k`; `1m` alone adds a million to the default: it takes several minutes and a few
//! GB). `CAIRN_BENCH_RUNS` runs each command several times (default 1; the figure is then the
//! median time and the largest peak memory). `CAIRN_BENCH_BIN` runs another build of `cairn`
//! instead of this one's (to compare two versions on one machine).

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

/// One run of a command: wall time in seconds, the child's peak RSS in MiB, its CPU time (user
/// and system) in seconds and its stdout. The child is reaped with `wait4` (which returns its
/// own resource usage), not `Child::wait`. On a shared machine the CPU time is the steadier
/// figure: the wall time grows with everyone else's load.
#[allow(clippy::zombie_processes)]
fn run_once(cmd: &mut Command) -> (f64, f64, f64, String) {
    let out = tempfile::tempfile().expect("temp file");
    let err = tempfile::tempfile().expect("temp file");
    cmd.stdin(Stdio::null())
        .stdout(out.try_clone().expect("dup"))
        .stderr(err.try_clone().expect("dup"));
    let start = Instant::now();
    let child = cmd.spawn().expect("command starts");
    let mut status = 0;
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: waits for our own child and writes into values we own; `child` is not waited on
    // again (std's Child does not reap on drop).
    let pid = unsafe { libc::wait4(child.id() as i32, &mut status, 0, &mut usage) };
    let elapsed = start.elapsed().as_secs_f64();
    assert_eq!(pid, child.id() as i32, "wait4 failed");
    let read = |mut f: std::fs::File| {
        use std::io::{Read, Seek};
        let mut s = String::new();
        f.rewind().ok();
        f.read_to_string(&mut s).ok();
        s
    };
    // `plan -detailed-exitcode` exits 0 when nothing changes: every command here exits 0.
    if !(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0) {
        let cut = |s: String| s.chars().take(3000).collect::<String>();
        panic!("{cmd:?} failed:\n{}\n{}", cut(read(out)), cut(read(err)));
    }
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    let cpu = secs(usage.ru_utime) + secs(usage.ru_stime);
    (elapsed, usage.ru_maxrss as f64 / 1024.0, cpu, read(out))
}

fn chains(dir: &Path, n: usize, chain: usize) {
    let mut tf = String::with_capacity(n * 90);
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
    let bin =
        std::env::var_os("CAIRN_BENCH_BIN").unwrap_or_else(|| env!("CARGO_BIN_EXE_cairn").into());
    let mut c = Command::new(bin);
    c.arg(format!("-chdir={}", dir.display()))
        .args(args)
        .env("NO_COLOR", "1");
    c
}

fn du(path: &Path) -> u64 {
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return 0;
    };
    if meta.is_dir() {
        std::fs::read_dir(path)
            .map(|rd| rd.flatten().map(|e| du(&e.path())).sum())
            .unwrap_or(0)
    } else {
        meta.len()
    }
}

/// `10k` → 10,000; `1m` → 1,000,000; `2500` → 2,500.
fn parse_size(s: &str) -> Option<usize> {
    let s = s.trim().to_ascii_lowercase();
    let (num, mul) = match s.strip_suffix('k') {
        Some(n) => (n, 1_000),
        None => match s.strip_suffix('m') {
            Some(n) => (n, 1_000_000),
            None => (s.as_str(), 1),
        },
    };
    num.parse::<usize>().ok().map(|n| n * mul)
}

const STEPS: [&str; 5] = [
    "plan (empty state)",
    "apply -auto-approve",
    "no-op plan",
    "no-op plan -refresh=false",
    "state list",
];

struct Row {
    n: usize,
    /// (wall seconds, MiB, CPU seconds) per step of `STEPS`.
    figures: Vec<(f64, f64, f64)>,
    events: u64,
    bytes: u64,
}

fn measure(
    runs: usize,
    mut prepare: impl FnMut(),
    mut make: impl FnMut() -> Command,
) -> (f64, f64, f64) {
    let mut times = Vec::new();
    let mut cpus = Vec::new();
    let mut peak: f64 = 0.0;
    for _ in 0..runs.max(1) {
        prepare();
        let (t, mem, cpu, _) = run_once(&mut make());
        times.push(t);
        cpus.push(cpu);
        peak = peak.max(mem);
    }
    times.sort_by(f64::total_cmp);
    cpus.sort_by(f64::total_cmp);
    (times[times.len() / 2], peak, cpus[cpus.len() / 2])
}

fn run_size(root: &Path, n: usize, runs: usize) -> Row {
    let dir = root.join(format!("n{n}"));
    chains(&dir, n, 10);
    let fresh = || {
        let _ = std::fs::remove_dir_all(dir.join(".cairn"));
    };
    let plan = measure(runs, fresh, || cairn(&dir, &["plan"]));
    let apply = measure(runs, fresh, || cairn(&dir, &["apply", "-auto-approve"]));
    let mut figures = vec![plan, apply];
    // Bytes on disk per event, right after the apply (no-op plans record no events).
    let (_, _, _, out) = run_once(&mut cairn(&dir, &["state", "verify"]));
    let events = out
        .split("intact: ")
        .nth(1)
        .and_then(|s| s.split(' ').next())
        .and_then(|s| s.parse::<u64>().ok())
        .unwrap_or_else(|| panic!("state verify said: {out}"));
    let bytes = du(&dir.join(".cairn"));
    figures.push(measure(
        runs,
        || {},
        || cairn(&dir, &["plan", "-detailed-exitcode"]),
    ));
    figures.push(measure(
        runs,
        || {},
        || cairn(&dir, &["plan", "-detailed-exitcode", "-refresh=false"]),
    ));
    figures.push(measure(runs, || {}, || cairn(&dir, &["state", "list"])));
    let _ = std::fs::remove_dir_all(&dir);
    Row {
        n,
        figures,
        events,
        bytes,
    }
}

fn label(n: usize) -> String {
    if n >= 1_000_000 && n.is_multiple_of(1_000_000) {
        format!("{}M", n / 1_000_000)
    } else if n >= 1_000 && n.is_multiple_of(1_000) {
        format!("{}k", n / 1_000)
    } else {
        n.to_string()
    }
}

fn main() {
    let mut sizes: Vec<usize> = vec![10_000, 100_000];
    if let Ok(v) = std::env::var("CAIRN_BENCH_SCALE") {
        let parsed: Vec<usize> = v.split(',').filter_map(parse_size).collect();
        assert!(
            !parsed.is_empty() && parsed.len() == v.split(',').count(),
            "CAIRN_BENCH_SCALE={v}: expected sizes like 10k,100k,1m"
        );
        sizes = if parsed == [1_000_000] {
            vec![10_000, 100_000, 1_000_000]
        } else {
            parsed
        };
    }
    let runs = std::env::var("CAIRN_BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1);
    let tmp = tempfile::tempdir().unwrap();
    println!(
        "terraform_data in chains of 10; {runs} run(s) of each (median wall time, largest peak RSS)"
    );
    let mut rows = Vec::new();
    for &n in &sizes {
        let row = run_size(tmp.path(), n, runs);
        println!("\n{} resources", label(n));
        println!("| command | wall | CPU | peak memory | per resource |");
        println!("| --- | --- | --- | --- | --- |");
        for (step, (t, mib, cpu)) in STEPS.iter().zip(&row.figures) {
            println!(
                "| `{step}` | {t:.2} s | {cpu:.2} s | {mib:.0} MiB | {:.1} KiB |",
                mib * 1024.0 / n as f64
            );
        }
        println!(
            "on disk after the apply: {} bytes, {} events, {:.0} bytes per event",
            row.bytes,
            row.events,
            row.bytes as f64 / row.events.max(1) as f64
        );
        rows.push(row);
    }
    for pair in rows.windows(2) {
        let (a, b) = (&pair[0], &pair[1]);
        println!(
            "\nratios {} / {} (linear: {:.1})",
            label(b.n),
            label(a.n),
            b.n as f64 / a.n as f64
        );
        println!("| command | wall | CPU | memory |");
        println!("| --- | --- | --- | --- |");
        for (i, step) in STEPS.iter().enumerate() {
            println!(
                "| `{step}` | {:.1} | {:.1} | {:.1} |",
                b.figures[i].0 / a.figures[i].0,
                b.figures[i].2 / a.figures[i].2,
                b.figures[i].1 / a.figures[i].1
            );
        }
        println!(
            "| bytes per event | {:.2} | |",
            (b.bytes as f64 / b.events.max(1) as f64) / (a.bytes as f64 / a.events.max(1) as f64)
        );
    }
}
