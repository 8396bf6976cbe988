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
//! instead of this one's; `CAIRN_BENCH_BEFORE` an older build beside it, each size's table
//! printed for both and their ratios (`support.rs`).

mod support;

use std::path::Path;
use std::process::Command;
use support::{run, Build, Figure};

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

fn cairn(build: &Build, dir: &Path, args: &[&str]) -> Command {
    let mut c = build.command();
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
    /// One figure per step of `STEPS`.
    figures: Vec<Figure>,
    events: u64,
    bytes: u64,
}

impl Row {
    fn per_event(&self) -> f64 {
        self.bytes as f64 / self.events.max(1) as f64
    }
}

fn measure(runs: usize, mut prepare: impl FnMut(), mut make: impl FnMut() -> Command) -> Figure {
    let mut f = Figure::default();
    for _ in 0..runs.max(1) {
        prepare();
        f.push(&run(&mut make()));
    }
    f
}

fn run_size(build: &Build, root: &Path, n: usize, runs: usize) -> Row {
    let dir = root.join(format!("n{n}"));
    chains(&dir, n, 10);
    let fresh = || {
        let _ = std::fs::remove_dir_all(dir.join(".cairn"));
    };
    let plan = measure(runs, fresh, || cairn(build, &dir, &["plan"]));
    let apply = measure(runs, fresh, || {
        cairn(build, &dir, &["apply", "-auto-approve"])
    });
    let mut figures = vec![plan, apply];
    // Bytes on disk per event, right after the apply (no-op plans record no events).
    let out = run(&mut cairn(build, &dir, &["state", "verify"])).stdout;
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
        || cairn(build, &dir, &["plan", "-detailed-exitcode"]),
    ));
    figures.push(measure(
        runs,
        || {},
        || {
            cairn(
                build,
                &dir,
                &["plan", "-detailed-exitcode", "-refresh=false"],
            )
        },
    ));
    figures.push(measure(
        runs,
        || {},
        || cairn(build, &dir, &["state", "list"]),
    ));
    let _ = std::fs::remove_dir_all(&dir);
    Row {
        n,
        figures,
        events,
        bytes,
    }
}

/// The table of `y`'s figures divided by `x`'s, step by step, with `digits` decimals.
fn ratio_table(x: &Row, y: &Row, digits: usize) {
    println!("| command | wall | CPU | memory |");
    println!("| --- | --- | --- | --- |");
    for (step, (a, b)) in STEPS.iter().zip(x.figures.iter().zip(&y.figures)) {
        println!(
            "| `{step}` | {:.digits$} | {:.digits$} | {:.digits$} |",
            b.median() / a.median(),
            b.cpu() / a.cpu(),
            b.peak_mib() / a.peak_mib()
        );
    }
    println!(
        "| bytes per event | {:.2} | | |",
        y.per_event() / x.per_event()
    );
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
    let builds = support::builds();
    let tmp = tempfile::tempdir().unwrap();
    println!(
        "terraform_data in chains of 10; {runs} run(s) of each (median wall time, largest peak RSS)"
    );
    // Rows by build, then by size.
    let mut rows: Vec<Vec<Row>> = builds.iter().map(|_| Vec::new()).collect();
    for (round, &n) in sizes.iter().enumerate() {
        let mut this: Vec<Option<Row>> = builds.iter().map(|_| None).collect();
        for (i, b) in support::in_turn(&builds, round) {
            this[i] = Some(run_size(b, tmp.path(), n, runs));
        }
        for (b, row) in builds.iter().zip(&this) {
            let row = row.as_ref().expect("measured");
            println!("\n{} resources{}", label(n), b.tag());
            println!("| command | wall | CPU | peak memory | per resource |");
            println!("| --- | --- | --- | --- | --- |");
            for (step, f) in STEPS.iter().zip(&row.figures) {
                println!(
                    "| `{step}` | {:.2} s | {:.2} s | {:.0} MiB | {:.1} KiB |",
                    f.median(),
                    f.cpu(),
                    f.peak_mib(),
                    f.peak_mib() * 1024.0 / n as f64
                );
            }
            println!(
                "on disk after the apply: {} bytes, {} events, {:.0} bytes per event",
                row.bytes,
                row.events,
                row.per_event()
            );
        }
        if let [Some(before), Some(after)] = &this[..] {
            println!("\n{} resources: after / before", label(n));
            ratio_table(before, after, 2);
        }
        for (i, row) in this.into_iter().enumerate() {
            rows[i].extend(row);
        }
    }
    for (b, rows) in builds.iter().zip(&rows) {
        for pair in rows.windows(2) {
            let (a, c) = (&pair[0], &pair[1]);
            println!(
                "\nratios {} / {}{} (linear: {:.1})",
                label(c.n),
                label(a.n),
                b.tag(),
                c.n as f64 / a.n as f64
            );
            ratio_table(a, c, 1);
        }
    }
}
