//! The cost of durable commits (issue 30), run with `cargo bench --bench durable`. Every commit
//! of the local state log is durable before Cairn goes on — before a provider call starts, its
//! start is flushed; after it ends, its outcome — which costs sled's `fsync` of its log and the
//! head file's `fdatasync` per commit (group commit: one flush for every event appended
//! meanwhile). This measures what that costs an `apply`.
//!
//! The same binary (the bench profile's: release) applies N `terraform_data` three ways:
//! - **durable**: as shipped, the state directory on disk;
//! - **no fsync**: the same, with `fsync`, `fdatasync`, `syncfs` and `sync_file_range` made to
//!   return at once by a preloaded shim (built here with `cc`; it also counts the calls), so
//!   the writes still happen and only the wait for the disk is gone;
//! - **tmpfs**: the state directory in `/dev/shm` (memory: neither the writes nor the syncs
//!   reach a disk).
//!
//! Each in chains of 10 (the ten operations ready at a time share each commit: group commit)
//! and in one chain (every operation waits for its own commits, with nothing to share a flush
//! with: the worst case). It prints the median wall time of each, the ratios, the number of sync calls per apply and
//! per event, and the cost of one sync. `terraform_data` needs no provider call, so the share
//! of the syncs is an upper bound: with real providers, whose calls take milliseconds to
//! minutes, it is smaller. `CAIRN_BENCH_DURABLE` chooses the sizes (default `100,1000`),
//! `CAIRN_BENCH_RUNS` the runs per figure (default 3, the median is shown), `CAIRN_BENCH_BIN`
//! another build of `cairn` (to measure a debug build without building a release one),
//! `CAIRN_BENCH_BEFORE` an older build beside it (`support.rs`).

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use support::Build;

/// The preloaded shim: counts the sync calls of the process (written to
/// `$CAIRN_SHIM_COUNTS/<pid>` at exit) and, with `CAIRN_SHIM_SKIP_SYNC` set, returns from them
/// at once.
const SHIM: &str = r#"
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <fcntl.h>

static atomic_long calls;
static int skip = -1;

static int skipping(void) {
    if (skip < 0) skip = getenv("CAIRN_SHIM_SKIP_SYNC") != NULL;
    return skip;
}

int fsync(int fd) {
    static int (*real)(int);
    atomic_fetch_add(&calls, 1);
    if (skipping()) return 0;
    if (!real) real = dlsym(RTLD_NEXT, "fsync");
    return real(fd);
}

int fdatasync(int fd) {
    static int (*real)(int);
    atomic_fetch_add(&calls, 1);
    if (skipping()) return 0;
    if (!real) real = dlsym(RTLD_NEXT, "fdatasync");
    return real(fd);
}

int syncfs(int fd) {
    static int (*real)(int);
    atomic_fetch_add(&calls, 1);
    if (skipping()) return 0;
    if (!real) real = dlsym(RTLD_NEXT, "syncfs");
    return real(fd);
}

int sync_file_range(int fd, off64_t offset, off64_t nbytes, unsigned int flags) {
    static int (*real)(int, off64_t, off64_t, unsigned int);
    atomic_fetch_add(&calls, 1);
    if (skipping()) return 0;
    if (!real) real = dlsym(RTLD_NEXT, "sync_file_range");
    return real(fd, offset, nbytes, flags);
}

__attribute__((destructor)) static void report(void) {
    const char *dir = getenv("CAIRN_SHIM_COUNTS");
    if (!dir) return;
    char path[4096];
    snprintf(path, sizeof path, "%s/%d", dir, (int)getpid());
    FILE *f = fopen(path, "w");
    if (!f) return;
    fprintf(f, "%ld\n", atomic_load(&calls));
    fclose(f);
}
"#;

/// Builds the shim in `dir`; returns the library's path.
fn build_shim(dir: &Path) -> PathBuf {
    let src = dir.join("syncshim.c");
    let lib = dir.join("libsyncshim.so");
    std::fs::write(&src, SHIM).unwrap();
    let out = Command::new("cc")
        .args(["-shared", "-fPIC", "-O2", "-o"])
        .arg(&lib)
        .arg(&src)
        .arg("-ldl")
        .output()
        .unwrap_or_else(|e| panic!("this benchmark builds a small C shim and needs `cc`: {e}"));
    assert!(
        out.status.success(),
        "cc failed to build the sync shim:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    lib
}

/// The configuration: `n` `terraform_data` in chains of `chain`.
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

/// How an apply runs.
#[derive(Clone, Copy, PartialEq)]
enum Way {
    Durable,
    NoSync,
    Tmpfs,
}

struct Setup {
    shim: PathBuf,
    counts: PathBuf,
}

impl Setup {
    fn cairn(&self, build: &Build, dir: &Path, state: &Path, args: &[&str], way: Way) -> Command {
        let mut c = build.command();
        c.arg(format!("-chdir={}", dir.display()))
            .args(args)
            .env("NO_COLOR", "1")
            .env("CAIRN_STATE_DIR", state)
            .env("LD_PRELOAD", &self.shim)
            .env("CAIRN_SHIM_COUNTS", &self.counts);
        if way == Way::NoSync {
            c.env("CAIRN_SHIM_SKIP_SYNC", "1");
        }
        c
    }

    /// The sync calls counted since the last call (every process's), and resets the count.
    fn take_counts(&self) -> u64 {
        let mut total = 0;
        for e in std::fs::read_dir(&self.counts).unwrap().flatten() {
            total += std::fs::read_to_string(e.path())
                .ok()
                .and_then(|s| s.trim().parse::<u64>().ok())
                .unwrap_or(0);
            let _ = std::fs::remove_file(e.path());
        }
        total
    }
}

/// One figure: the median wall time of `runs` applies of `n` resources on a fresh state, the
/// sync calls of one apply, and the events it recorded.
fn measure(
    setup: &Setup,
    build: &Build,
    dir: &Path,
    n: usize,
    runs: usize,
    way: Way,
) -> (f64, u64, u64) {
    let base = match way {
        Way::Tmpfs => tempfile::tempdir_in("/dev/shm").expect("a directory in /dev/shm"),
        _ => tempfile::tempdir_in(dir).unwrap(),
    };
    let state = base.path().join(format!("state-{n}"));
    let mut times = Vec::new();
    let mut syncs = 0;
    let mut events = 0;
    for _ in 0..runs.max(1) {
        let _ = std::fs::remove_dir_all(&state);
        setup.take_counts();
        let t =
            support::run(&mut setup.cairn(build, dir, &state, &["apply", "-auto-approve"], way));
        syncs = setup.take_counts();
        times.push(t.wall);
        let out =
            support::run(&mut setup.cairn(build, dir, &state, &["state", "verify"], Way::Durable))
                .stdout;
        setup.take_counts();
        events = out
            .split("intact: ")
            .nth(1)
            .and_then(|s| s.split(' ').next())
            .and_then(|s| s.parse::<u64>().ok())
            .unwrap_or_else(|| panic!("state verify said: {out}"));
    }
    times.sort_by(f64::total_cmp);
    (times[times.len() / 2], syncs, events)
}

fn main() {
    let sizes: Vec<usize> = std::env::var("CAIRN_BENCH_DURABLE")
        .ok()
        .map(|v| v.split(',').filter_map(|s| s.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![100, 1000]);
    let runs: usize = std::env::var("CAIRN_BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3);
    let builds = support::builds();
    // On disk (not a tmpfs `/tmp`): the benchmark's own directory under the target dir.
    let root = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let counts = root.path().join("counts");
    std::fs::create_dir_all(&counts).unwrap();
    let setup = Setup {
        shim: build_shim(root.path()),
        counts,
    };
    let tmpfs = Path::new("/dev/shm").is_dir();
    println!(
        "durable commits: `apply -auto-approve` of N terraform_data on a fresh local state, \
         median of {runs} run(s)"
    );
    println!(
        "{:>6} {:>6} {:>6} {:>7} {:>10} {:>10} {:>8} {:>10} {:>8} {:>7} {:>11} {:>9}",
        "build",
        "N",
        "chain",
        "events",
        "durable s",
        "no fsync s",
        "ratio",
        "tmpfs s",
        "ratio",
        "syncs",
        "syncs/event",
        "ms/sync"
    );
    for n in sizes {
        // Chains of 10 (ten operations at a time share each commit), and one chain: every
        // operation waits for its own commits, with nothing to share a flush with.
        for chain in [10, n] {
            let dir = root.path().join(format!("n{n}-{chain}"));
            chains(&dir, n, chain);
            let mut durables = Vec::new();
            for b in &builds {
                let (durable, syncs, events) = measure(&setup, b, &dir, n, runs, Way::Durable);
                let (nosync, skipped, _) = measure(&setup, b, &dir, n, runs, Way::NoSync);
                assert!(
                    syncs > 0 && skipped > 0,
                    "the shim counted no sync call: is LD_PRELOAD honoured?"
                );
                let mem = tmpfs.then(|| measure(&setup, b, &dir, n, runs, Way::Tmpfs).0);
                durables.push(durable);
                println!(
                "{:>6} {:>6} {:>6} {:>7} {:>10.3} {:>10.3} {:>7.2}x {:>10} {:>8} {:>7} {:>11.2} {:>9.2}",
                if b.name.is_empty() { "-" } else { b.name },
                n,
                chain,
                events,
                durable,
                nosync,
                durable / nosync,
                mem.map_or("-".into(), |m| format!("{m:.3}")),
                mem.map_or("-".into(), |m| format!("{:.2}x", durable / m)),
                syncs,
                syncs as f64 / events.max(1) as f64,
                (durable - nosync).max(0.0) * 1000.0 / syncs as f64,
            );
            }
            support::compare(
                &builds,
                &format!("durable apply, {n} in chains of {chain} (median s)"),
                &durables,
            );
            let _ = std::fs::remove_dir_all(&dir);
        }
    }
    println!(
        "chain: resources per dependency chain; ratio: durable / no fsync (the cost of waiting for the disk at each commit) and \
         durable / tmpfs; syncs: fsync + fdatasync calls of one apply (sled's log and the \
         head file, group-committed); ms/sync: the time each one adds."
    );
}
