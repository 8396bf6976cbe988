//! Benchmark of the state log: append rates, open times with and without a checkpoint, size.
//!
//! Run with `cargo bench -p cairn-state`. `CAIRN_BENCH_INSTANCES` changes the size of the large
//! state (default 100,000 instances, three events each: started, succeeded, refreshed).
//! `CAIRN_BENCH_OPEN=DIR` only times one open of the state in DIR (used by the benchmark
//! itself, and for profiling).

use cairn_state::{
    EventBody, OpAction, OpenOptions, ProviderInstance, ProviderRef, ResourceObject, Store,
    StoredValue,
};
use std::path::Path;
use std::time::{Duration, Instant};

fn opts() -> OpenOptions {
    OpenOptions {
        command: "bench".into(),
        lock_timeout: Duration::ZERO,
        write: true,
    }
}

fn provider() -> ProviderRef {
    ProviderRef {
        addr: "provider[\"sim\"]".parse().expect("provider address"),
        id: "p1".into(),
    }
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
            }),
        })
        .expect("append");
    store
        .append(EventBody::ResourceRead {
            addr,
            attrs: attrs(i, 1),
        })
        .expect("append");
}

fn register(store: &mut Store) {
    store
        .append(EventBody::ProviderRegistered {
            instance: ProviderInstance {
                addr: provider().addr,
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

fn rate(events: u64, took: Duration) -> String {
    format!("{:>10.0} events/s", events as f64 / took.as_secs_f64())
}

/// Opens the state once, in this process, and prints the time (the child half of
/// `median_open`).
fn open_once(dir: &Path) {
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

/// The median time to open the state, each time in a fresh process as the CLI does (a process
/// that has just freed a large state allocates more slowly).
fn median_open(dir: &Path, runs: usize) -> (Duration, usize, Duration) {
    let mut times = Vec::new();
    let mut cpus = Vec::new();
    let mut resources = 0;
    let exe = std::env::current_exe().expect("current exe");
    for _ in 0..runs {
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
        resources = words.nth(1).and_then(|w| w.parse().ok()).expect("count");
        let cpu: u64 = words.nth(1).and_then(|w| w.parse().ok()).expect("cpu");
        times.push(Duration::from_micros(micros));
        cpus.push(Duration::from_micros(cpu));
    }
    times.sort();
    cpus.sort();
    (times[times.len() / 2], resources, cpus[cpus.len() / 2])
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

fn main() {
    if let Ok(dir) = std::env::var("CAIRN_BENCH_OPEN") {
        open_once(Path::new(&dir));
        return;
    }
    let instances: u64 = std::env::var("CAIRN_BENCH_INSTANCES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000);

    // One commit (flush) per event.
    let tmp = tempfile::tempdir().expect("tempdir");
    let (mut store, _) = Store::open(tmp.path(), &opts()).expect("open");
    register(&mut store);
    let n = 1_500;
    let start = Instant::now();
    for i in 0..n / 3 {
        instance(&mut store, i);
        store.commit().expect("commit");
    }
    // `instance` appends three events; commit after each of them is what the engine does
    // around provider calls, so time that exactly: three appends, each followed by a commit.
    let grouped3 = start.elapsed();
    let start = Instant::now();
    let mut appended = 0;
    while appended < n {
        store
            .append(EventBody::ResourceRead {
                addr: "sim_thing.web[0]".parse().expect("address"),
                attrs: attrs(0, appended),
            })
            .expect("append");
        store.commit().expect("commit");
        appended += 1;
    }
    let per_event = start.elapsed();
    println!(
        "append, one commit per event:      {} ({n} events)",
        rate(n, per_event)
    );
    println!(
        "append, one commit per instance:   {} ({n} events, 3 per commit)",
        rate(n, grouped3)
    );
    drop(store);

    // Group commit: many events, one commit per 1,000.
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
    let took = start.elapsed();
    let events = store.head();
    println!(
        "append, group commit (~1,000/commit): {} ({events} events, {instances} instances, \
         automatic checkpoints included)",
        rate(events, took)
    );
    store.checkpoint().expect("checkpoint");
    drop(store);
    if let Ok(keep) = std::env::var("CAIRN_BENCH_KEEP") {
        let _ = std::process::Command::new("cp")
            .args(["-r", &tmp.path().display().to_string(), &keep])
            .status();
    }

    println!(
        "on-disk size:                       {:.1} MiB for {events} events ({} bytes/event, \
         checkpoints included)",
        dir_size(tmp.path()) as f64 / (1 << 20) as f64,
        dir_size(tmp.path()) / events
    );
    let (with, resources, cpu) = median_open(tmp.path(), 5);
    println!(
        "open, with a checkpoint:            {:>8.1} ms ({:.1} ms cpu; {resources} instances, \
         median of 5)",
        with.as_secs_f64() * 1000.0,
        cpu.as_secs_f64() * 1000.0
    );
    {
        let (mut store, _) = Store::open(tmp.path(), &opts()).expect("open");
        store.clear_checkpoints().expect("clear");
    }
    println!(
        "on-disk size without checkpoints:   {:.1} MiB",
        dir_size(tmp.path()) as f64 / (1 << 20) as f64
    );
    let (without, resources, cpu) = median_open(tmp.path(), 3);
    println!(
        "open, without a checkpoint:         {:>8.1} ms ({:.1} ms cpu; {resources} instances, \
         full replay of {events} events, median of 3)",
        without.as_secs_f64() * 1000.0,
        cpu.as_secs_f64() * 1000.0
    );
    println!("load average while measuring:       {}", load_average());
}
