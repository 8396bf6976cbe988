//! What the benchmarks that run the `cairn` binary share (each has `mod support;`): the builds
//! they measure, one run of a command with the child's own resource use, and figures over
//! several runs.
//!
//! A benchmark measures this build's `cairn` (the bench profile's: release), or the binary
//! `CAIRN_BENCH_BIN` names. With `CAIRN_BENCH_BEFORE` naming another build (an older commit's
//! `target/release/cairn`), it measures both on the same machine in the same run: the runs
//! interleaved, the order of the two turned at each round (so neither always runs first, on
//! a cold cache or a busier minute), each figure printed for `before` and `after` and the
//! ratio after ÷ before. That is how a change shows it makes no benchmark slower.

#![allow(dead_code)]

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Instant;

/// One build of `cairn` a benchmark runs.
pub struct Build {
    /// `before`, `after`, or empty when only one build is measured.
    pub name: &'static str,
    pub bin: PathBuf,
}

impl Build {
    pub fn command(&self) -> Command {
        Command::new(&self.bin)
    }

    /// ` [before]`, ` [after]`, or nothing when one build is measured: appended to a figure's
    /// label.
    pub fn tag(&self) -> String {
        if self.name.is_empty() {
            String::new()
        } else {
            format!(" [{}]", self.name)
        }
    }
}

/// The builds to measure: `CAIRN_BENCH_BEFORE`'s first when set, then this one.
pub fn builds() -> Vec<Build> {
    let this = std::env::var_os("CAIRN_BENCH_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_cairn")));
    match std::env::var_os("CAIRN_BENCH_BEFORE") {
        Some(before) => {
            let before = PathBuf::from(before);
            assert!(
                before.is_file(),
                "CAIRN_BENCH_BEFORE={}: no such file (name an older build's cairn binary)",
                before.display()
            );
            println!("before: {}\nafter:  {}", before.display(), this.display());
            vec![
                Build {
                    name: "before",
                    bin: before,
                },
                Build {
                    name: "after",
                    bin: this,
                },
            ]
        }
        None => vec![Build {
            name: "",
            bin: this,
        }],
    }
}

/// The builds in round `round`'s order: as given in even rounds, reversed in odd ones. Each
/// item is the build's index in `builds` and the build.
pub fn in_turn(builds: &[Build], round: usize) -> Vec<(usize, &Build)> {
    let mut v: Vec<(usize, &Build)> = builds.iter().enumerate().collect();
    if round % 2 == 1 {
        v.reverse();
    }
    v
}

/// A number from the environment, or `default`.
pub fn env_num(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// One finished command.
pub struct Run {
    /// Wall time, seconds.
    pub wall: f64,
    /// The child's user and system time, seconds (the steadier figure on a shared machine).
    pub cpu: f64,
    /// The child's own peak RSS, MiB.
    pub peak_mib: f64,
    pub stdout: String,
}

/// Runs `cmd` to its end with stdin closed and its output captured; a failure stops the
/// benchmark with the command's output. The child is reaped with `wait4`, which returns its own
/// resource use (not `Child::wait`). `plan -detailed-exitcode` exits 0 when nothing changes,
/// the only case the benchmarks run.
#[allow(clippy::zombie_processes)]
pub fn run(cmd: &mut Command) -> Run {
    let out = tempfile::tempfile().expect("temp file");
    let err = tempfile::tempfile().expect("temp file");
    cmd.stdin(Stdio::null())
        .stdout(out.try_clone().expect("dup"))
        .stderr(err.try_clone().expect("dup"));
    let start = Instant::now();
    let child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("{cmd:?} does not start: {e}"));
    let mut status = 0;
    // SAFETY: a plain C struct, all zeroes is a valid value.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: waits for our own child and writes into values we own; `child` is not waited on
    // again (std's Child does not reap on drop).
    let pid = unsafe { libc::wait4(child.id() as i32, &mut status, 0, &mut usage) };
    let wall = start.elapsed().as_secs_f64();
    assert_eq!(pid, child.id() as i32, "wait4 failed");
    let read = |mut f: std::fs::File| {
        use std::io::{Read, Seek};
        let mut s = String::new();
        f.rewind().ok();
        f.read_to_string(&mut s).ok();
        s
    };
    if !(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0) {
        let tail = |s: String| {
            let skip = s.chars().count().saturating_sub(3000);
            s.chars().skip(skip).collect::<String>()
        };
        panic!(
            "{cmd:?} failed (wait status {status}):\n{}\n{}",
            tail(read(out)),
            tail(read(err))
        );
    }
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    Run {
        wall,
        cpu: secs(usage.ru_utime) + secs(usage.ru_stime),
        peak_mib: usage.ru_maxrss as f64 / 1024.0,
        stdout: read(out),
    }
}

/// Several runs of one command: best and median wall time, median CPU time, largest peak.
#[derive(Default, Clone)]
pub struct Figure {
    walls: Vec<f64>,
    cpus: Vec<f64>,
    peak_mib: f64,
}

fn median_of(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

impl Figure {
    pub fn push(&mut self, run: &Run) {
        self.add(run.wall, run.cpu, run.peak_mib);
    }

    /// A run measured some other way (a fleet of processes, a time within a run).
    pub fn add(&mut self, wall: f64, cpu: f64, peak_mib: f64) {
        self.walls.push(wall);
        self.cpus.push(cpu);
        self.peak_mib = self.peak_mib.max(peak_mib);
    }

    pub fn runs(&self) -> usize {
        self.walls.len()
    }

    pub fn best(&self) -> f64 {
        self.walls.iter().copied().fold(f64::INFINITY, f64::min)
    }

    pub fn median(&self) -> f64 {
        median_of(&self.walls)
    }

    pub fn cpu(&self) -> f64 {
        median_of(&self.cpus)
    }

    pub fn peak_mib(&self) -> f64 {
        self.peak_mib
    }
}

impl std::fmt::Display for Figure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "best {:.3} s, median {:.3} s, CPU {:.3} s, peak {:.0} MiB",
            self.best(),
            self.median(),
            self.cpu(),
            self.peak_mib
        )
    }
}

/// `runs` rounds of `make(build)` for each build, `prepare(build)` before each run; the
/// figures in the order of `builds`.
pub fn measure(
    builds: &[Build],
    runs: usize,
    mut prepare: impl FnMut(&Build),
    mut make: impl FnMut(&Build) -> Command,
) -> Vec<Figure> {
    let mut figs = vec![Figure::default(); builds.len()];
    for round in 0..runs.max(1) {
        for (i, b) in in_turn(builds, round) {
            prepare(b);
            figs[i].push(&run(&mut make(b)));
        }
    }
    figs
}

/// Prints `what: figure` for each build and, with two, the ratios after ÷ before.
pub fn report(builds: &[Build], what: &str, figs: &[Figure]) {
    for (b, f) in builds.iter().zip(figs) {
        println!("{what}{}: {f}", b.tag());
    }
    if let [before, after] = figs {
        println!(
            "{what}: after / before: median {:.2}, best {:.2}, CPU {:.2}, peak {:.2}",
            after.median() / before.median(),
            after.best() / before.best(),
            after.cpu() / before.cpu(),
            after.peak_mib() / before.peak_mib()
        );
    }
}

/// Prints the ratio after ÷ before of one number each build gave (a rate, a ratio between
/// two stores), when two builds were measured.
pub fn compare(builds: &[Build], what: &str, values: &[f64]) {
    if let ([_, _], [before, after]) = (builds, values) {
        println!(
            "{what}: before {before:.3}, after {after:.3}, after / before {:.2}",
            after / before
        );
    }
}

/// Prints, for each build, the ratio of the medians `num` ÷ `den` (`what`: "S3 / sled") with
/// `goal` after it, then how that ratio moved between the builds.
pub fn ratio_of_medians(builds: &[Build], what: &str, num: &[Figure], den: &[Figure], goal: &str) {
    let ratios: Vec<f64> = num
        .iter()
        .zip(den)
        .map(|(n, d)| n.median() / d.median())
        .collect();
    for (b, r) in builds.iter().zip(&ratios) {
        println!("{what} (medians){}: {r:.2}{goal}", b.tag());
    }
    compare(builds, what, &ratios);
}

/// `build`'s `cairn ARGS` in `dir`, with `env` and the state where the configuration says
/// (`CAIRN_STATE_DIR` removed), run to its end.
pub fn cairn_in(
    build: &Build,
    dir: &std::path::Path,
    args: &[&str],
    env: &[(&str, String)],
) -> Run {
    let mut c = build.command();
    c.args(args)
        .current_dir(dir)
        .env("NO_COLOR", "1")
        .env_remove("CAIRN_STATE_DIR");
    for (k, v) in env {
        c.env(k, v);
    }
    run(&mut c)
}

/// `init` and `apply -auto-approve -parallelism=10` of a fresh project on sled and of one on
/// another store, for each build in turn, `runs` rounds: `project(on_store, round, build)`
/// writes a project and returns its directory; `env` reaches the other store. The apply
/// figures by build: (on sled, on the store).
pub fn sled_beside(
    builds: &[Build],
    runs: usize,
    env: &[(&str, String)],
    mut project: impl FnMut(bool, usize, usize) -> tempfile::TempDir,
) -> (Vec<Figure>, Vec<Figure>) {
    let apply = ["apply", "-auto-approve", "-parallelism=10"];
    let mut sled = vec![Figure::default(); builds.len()];
    let mut store = sled.clone();
    for r in 0..runs.max(1) {
        for (i, b) in in_turn(builds, r) {
            let d = project(false, r, i);
            cairn_in(b, d.path(), &["init"], &[]);
            sled[i].push(&cairn_in(b, d.path(), &apply, &[]));
            let d = project(true, r, i);
            cairn_in(b, d.path(), &["init"], env);
            store[i].push(&cairn_in(b, d.path(), &apply, env));
        }
    }
    (sled, store)
}

/// Prints [`sled_beside`]'s figures for `n` resources on sled and on `store`.
pub fn report_sled_beside(
    builds: &[Build],
    n: usize,
    store: &str,
    figs: &(Vec<Figure>, Vec<Figure>),
) {
    report(
        builds,
        &format!("cairn apply {n} terraform_data on sled"),
        &figs.0,
    );
    report(
        builds,
        &format!("cairn apply {n} terraform_data on {store}"),
        &figs.1,
    );
}
