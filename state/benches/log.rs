//! Benchmark of the state log: append rates, open times with and without a checkpoint, size.
//!
//! Run with `cargo bench -p cairn-state`. The machine this runs on may be shared and noisy, so
//! every figure is measured several times and printed as the best and the median of its
//! repetitions (as hyperfine does): the best is what the code can do, the median what to
//! expect; a wide gap between them means the machine was busy. It allocates with mimalloc, as
//! the `cairn` binary does (with glibc's allocator opening a large state is about twice as
//! slow: building the snapshot is mostly allocation).
//!
//! Environment:
//! - `CAIRN_BENCH_INSTANCES`: size of the large state (default 100,000 instances, three events
//!   each: create started, create succeeded, refreshed).
//! - `CAIRN_BENCH_REPS`: repetitions of every figure (default 5 for the fast ones, 3 for the
//!   large-state ones).
//! - `CAIRN_BENCH_ONLY`: `commit` (per-event commits), `group` (group commit) or `open` (write
//!   the large state once, then time opens): one part only, for profiling.
//! - `CAIRN_BENCH_KEEP=DIR`: copy the large state there (and, without its checkpoints, to
//!   `DIR-replay`), to profile an open with `CAIRN_BENCH_OPEN=DIR`.
//! - `CAIRN_BENCH_OPEN=DIR`: only open the state in DIR once and print the time (the benchmark
//!   runs itself this way, so that every open is a fresh process as with the CLI; also handy
//!   for `perf record`).

use cairn_state::{
    EventBody, OpAction, OpenOptions, ProviderInstance, ProviderRef, ResourceObject, Store,
    StoredValue,
};
use std::path::Path;
use std::time::{Duration, Instant};

/// The allocator of the `cairn` binary (`src/main.rs`), so that the figures are the CLI's.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn opts() -> OpenOptions {
    OpenOptions {
        command: "bench".into(),
        lock_timeout: Duration::ZERO,
        write: true,
        skip_lock: false,
        encryption: None,
    }
}

fn provider() -> ProviderRef {
    ProviderRef::new(
        "provider[\"sim\"]".parse().expect("provider address"),
        "p1".into(),
    )
}

fn attrs(i: u64, generation: u64) -> StoredValue {
    let s = |v: String| StoredValue::String(v);
    StoredValue::Object(
        [
            ("id".to_string(), s(format!("thing-{i:08}"))),
            ("name".to_string(), s(format!("web-{i}"))),
            (
                "size".to_string(),
                StoredValue::Number((i % 97).to_string()),
            ),
            ("enabled".to_string(), StoredValue::Bool(i & 1 == 0)),
            (
                "tags".to_string(),
                StoredValue::Map(
                    [
                        ("env".to_string(), s("prod".into())),
                        ("gen".to_string(), s(generation.to_string())),
                    ]
                    .into(),
                ),
            ),
        ]
        .into(),
    )
}

/// Appends the three events of one instance: create started, succeeded, refreshed.
fn instance(store: &mut Store, i: u64) {
    let addr: cairn_state::ResourceInstanceAddr =
        format!("sim_thing.web[{i}]").parse().expect("address");
    let op = store
        .append(EventBody::OperationStarted {
            addr: addr.clone(),
            deposed: None,
            action: OpAction::Create,
            token: Some(format!("tok-{i}")),
            provider: provider(),
            prior: None,
        })
        .expect("append");
    store
        .append(EventBody::OperationSucceeded {
            op,
            object: Some(ResourceObject {
                attrs: attrs(i, 0),
                deps: vec![],
                provider: provider(),
                create_token: Some(format!("tok-{i}")),
                tainted: false,
                meta: Default::default(),
            }),
        })
        .expect("append");
    store
        .append(EventBody::ResourceRead {
            addr,
            attrs: attrs(i, 1),
            meta: None,
        })
        .expect("append");
}

fn register(store: &mut Store) {
    store
        .append(EventBody::ProviderRegistered {
            instance: ProviderInstance {
                addr: provider().addr.clone(),
                id: "p1".into(),
                config: StoredValue::Null,
                is_default: true,
            },
        })
        .expect("append");
}

fn dir_size(path: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(path) else {
        return 0;
    };
    entries
        .filter_map(|e| e.ok())
        .map(|e| match e.metadata() {
            Ok(m) if m.is_dir() => dir_size(&e.path()),
            Ok(m) => m.len(),
            Err(_) => 0,
        })
        .sum()
}

/// Best and median of a set of measurements.
struct Stats<T> {
    best: T,
    median: T,
    n: usize,
}

/// `values` measured; `better` orders them best first.
fn stats<T: Copy>(mut values: Vec<T>, better: impl Fn(&T, &T) -> std::cmp::Ordering) -> Stats<T> {
    values.sort_by(&better);
    Stats {
        best: values[0],
        median: values[values.len() / 2],
        n: values.len(),
    }
}

/// Event rates: best (highest) and median.
fn rates(events: u64, times: &[Duration]) -> Stats<f64> {
    let r = times
        .iter()
        .map(|t| events as f64 / t.as_secs_f64())
        .collect();
    stats(r, |a: &f64, b: &f64| b.total_cmp(a))
}

fn print_rate(label: &str, s: &Stats<f64>, what: &str) {
    println!(
        "{label:<40} best {:>8.0} events/s, median {:>8.0} ({what}, {} runs)",
        s.best, s.median, s.n
    );
}

fn print_open(label: &str, wall: &Stats<Duration>, cpu: &Stats<Duration>, what: &str) {
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!(
        "{label:<40} best {:>8.1} ms, median {:>8.1} ms (cpu best {:.1} ms, median {:.1} ms; \
         {what}, {} runs)",
        ms(wall.best),
        ms(wall.median),
        ms(cpu.best),
        ms(cpu.median),
        wall.n
    );
}

/// Opens the state once, in this process, and prints the time (the child half of `opens`).
fn open_once(dir: &Path) {
    // Transparent huge pages off, as the `cairn` binary has them (its `main.rs`): with them
    // the kernel zeroes 2 MiB at each first touch of mimalloc's arenas, up to half this
    // open's time, varying from run to run.
    #[cfg(target_os = "linux")]
    // SAFETY: a process-wide flag, no pointers.
    unsafe {
        libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0);
    }
    let cpu_before = cpu_micros();
    let start = Instant::now();
    let (store, warnings) = Store::open(dir, &opts()).expect("open");
    let took = start.elapsed();
    let cpu = cpu_micros() - cpu_before;
    assert!(warnings.is_empty(), "{warnings:?}");
    println!(
        "open: {} µs, {} instances, {cpu} µs cpu",
        took.as_micros(),
        store.snapshot().resources.len()
    );
    // Exit without freeing the state, as the CLI would after its work.
    std::process::exit(0);
}

/// CPU time (user + system, all threads) this process has used, in µs.
fn cpu_micros() -> u64 {
    // SAFETY: getrusage only writes the struct we pass.
    let usage = unsafe {
        let mut u: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut u);
        u
    };
    let us = |t: libc::timeval| t.tv_sec as u64 * 1_000_000 + t.tv_usec as u64;
    us(usage.ru_utime) + us(usage.ru_stime)
}

/// One open of the state in `dir` in a fresh process, as the CLI does (a process that has just
/// freed a large state allocates differently): wall time, instances, cpu time.
fn open_child(dir: &Path) -> (Duration, usize, Duration) {
    let exe = std::env::current_exe().expect("current exe");
    let out = std::process::Command::new(&exe)
        .env("CAIRN_BENCH_OPEN", dir)
        .output()
        .expect("run the open benchmark");
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .find_map(|l| l.strip_prefix("open: "))
        .unwrap_or_else(|| panic!("no timing from the child: {text}"));
    let mut words = line.split_whitespace();
    let micros: u64 = words.next().and_then(|w| w.parse().ok()).expect("time");
    let resources = words.nth(1).and_then(|w| w.parse().ok()).expect("count");
    let cpu: u64 = words.nth(1).and_then(|w| w.parse().ok()).expect("cpu");
    (
        Duration::from_micros(micros),
        resources,
        Duration::from_micros(cpu),
    )
}

/// `runs` opens of the state in `dir`: wall and cpu times, and the instances found.
fn opens(dir: &Path, runs: usize) -> (Stats<Duration>, Stats<Duration>, usize) {
    let mut walls = Vec::new();
    let mut cpus = Vec::new();
    let mut resources = 0;
    for _ in 0..runs {
        let (wall, r, cpu) = open_child(dir);
        walls.push(wall);
        cpus.push(cpu);
        resources = r;
    }
    (stats(walls, Ord::cmp), stats(cpus, Ord::cmp), resources)
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

fn env_number(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1 << 20) as f64
}

/// Commits after every event, and after every instance (three events), `reps` times each.
fn commit_rates(reps: usize) {
    const EVENTS: u64 = 600;
    let mut per_event = Vec::new();
    let mut per_instance = Vec::new();
    for _ in 0..reps {
        let tmp = tempfile::tempdir().expect("tempdir");
        let (mut store, _) = Store::open(tmp.path(), &opts()).expect("open");
        register(&mut store);
        store.commit().expect("commit");
        // `instance` appends three events; a commit after each group of three is what the
        // engine does around one provider call (started, then its outcome and refresh).
        let start = Instant::now();
        for i in 0..EVENTS / 3 {
            instance(&mut store, i);
            store.commit().expect("commit");
        }
        per_instance.push(start.elapsed());
        let start = Instant::now();
        for n in 0..EVENTS {
            store
                .append(EventBody::ResourceRead {
                    addr: "sim_thing.web[0]".parse().expect("address"),
                    attrs: attrs(0, n),
                    meta: None,
                })
                .expect("append");
            store.commit().expect("commit");
        }
        per_event.push(start.elapsed());
    }
    print_rate(
        "append, one commit per event:",
        &rates(EVENTS, &per_event),
        &format!("{EVENTS} events"),
    );
    print_rate(
        "append, one commit per 3 events:",
        &rates(EVENTS, &per_instance),
        &format!("{EVENTS} events"),
    );
}

/// What writing the large state left: the last state written, its size before any open, and
/// the first open of each state written.
struct Written {
    dir: tempfile::TempDir,
    size: u64,
    first_walls: Vec<Duration>,
    first_cpus: Vec<Duration>,
}

/// Writes the large state `reps` times (group commit), opening each once (the first open after
/// a writer also recovers sled's own log: sled scans what was written since its last open);
/// keeps the last one for the other opens.
fn group_commit(reps: usize, instances: u64) -> Written {
    let mut times = Vec::new();
    let mut events = 0;
    let mut written: Option<Written> = None;
    let (mut first_walls, mut first_cpus) = (Vec::new(), Vec::new());
    for _ in 0..reps {
        drop(written.take());
        let tmp = tempfile::tempdir().expect("tempdir");
        let (mut store, _) = Store::open(tmp.path(), &opts()).expect("open");
        register(&mut store);
        let start = Instant::now();
        for i in 0..instances {
            instance(&mut store, i);
            if i % 333 == 332 {
                store.commit().expect("commit");
            }
        }
        store.commit().expect("commit");
        times.push(start.elapsed());
        events = store.head();
        store.checkpoint().expect("checkpoint");
        drop(store);
        let size = dir_size(tmp.path());
        let (wall, _, cpu) = open_child(tmp.path());
        first_walls.push(wall);
        first_cpus.push(cpu);
        written = Some(Written {
            dir: tmp,
            size,
            first_walls: Vec::new(),
            first_cpus: Vec::new(),
        });
    }
    print_rate(
        "append, group commit (~1,000/commit):",
        &rates(events, &times),
        &format!("{events} events, {instances} instances, automatic checkpoints included"),
    );
    let mut w = written.expect("at least one repetition");
    w.first_walls = first_walls;
    w.first_cpus = first_cpus;
    w
}

fn main() {
    if let Ok(dir) = std::env::var("CAIRN_BENCH_OPEN") {
        open_once(Path::new(&dir));
        return;
    }
    let instances = env_number("CAIRN_BENCH_INSTANCES").unwrap_or(100_000);
    let reps = env_number("CAIRN_BENCH_REPS").map(|n| n.max(1) as usize);
    let (fast_reps, slow_reps) = (reps.unwrap_or(5), reps.unwrap_or(3));
    let only = std::env::var("CAIRN_BENCH_ONLY").unwrap_or_default();
    println!(
        "state log benchmark: best and median of repetitions (load average at start: {})",
        load_average()
    );

    if only.is_empty() || only == "commit" {
        commit_rates(fast_reps);
    }
    if only == "commit" {
        return;
    }
    let group_reps = if only == "open" { 1 } else { slow_reps };
    let written = group_commit(group_reps, instances);
    let tmp = &written.dir;
    if only == "group" {
        return;
    }
    let events = instances * 3 + 1;
    if let Ok(keep) = std::env::var("CAIRN_BENCH_KEEP") {
        let _ = std::process::Command::new("cp")
            .args(["-r", &tmp.path().display().to_string(), &keep])
            .status();
    }
    println!(
        "{:<40} {:.1} MiB for {events} events ({} bytes/event, checkpoints included)",
        "on-disk size:",
        mib(written.size),
        written.size / events
    );
    print_open(
        "open, first after writing:",
        &stats(written.first_walls.clone(), Ord::cmp),
        &stats(written.first_cpus.clone(), Ord::cmp),
        "sled also recovers what the writer wrote",
    );
    let (wall, cpu, resources) = opens(tmp.path(), fast_reps);
    print_open(
        "open, with a checkpoint:",
        &wall,
        &cpu,
        &format!("{resources} instances"),
    );
    {
        let (mut store, _) = Store::open(tmp.path(), &opts()).expect("open");
        store.clear_checkpoints().expect("clear");
    }
    if let Ok(keep) = std::env::var("CAIRN_BENCH_KEEP") {
        let _ = std::process::Command::new("cp")
            .args([
                "-r",
                &tmp.path().display().to_string(),
                &format!("{keep}-replay"),
            ])
            .status();
    }
    let size = dir_size(tmp.path());
    println!(
        "{:<40} {:.1} MiB",
        "on-disk size without checkpoints:",
        mib(size)
    );
    let (wall, cpu, resources) = opens(tmp.path(), slow_reps);
    print_open(
        "open, without a checkpoint:",
        &wall,
        &cpu,
        &format!("{resources} instances, full replay of {events} events"),
    );
    println!("{:<40} {}", "load average at the end:", load_average());
}
