//! Benchmark of the PostgreSQL log (`cargo bench -p cairn-state --bench pg`): a real server
//! with PostgreSQL's durable defaults (fsync on, synchronous commit) on the loopback
//! interface, started like the tests' (`tests/support/pgserver.rs`).
//!
//! 1. Events/s with group commit: 100,000 instances (three events each) appended, one commit
//!    per ~1,000 events (one `INSERT … unnest` round trip and one WAL flush each), automatic
//!    checkpoints included. Goal ≥ 20,000 events/s.
//! 2. Open of that 100,000-instance state with a checkpoint (goal < 1 s), and without one.
//!
//! `CAIRN_BENCH_INSTANCES` changes 100,000; `CAIRN_BENCH_REPS` the repetitions of the opens
//! (default 3). Figures are best and median.

#[path = "../tests/support/pgserver.rs"]
mod pgserver;

use cairn_state::backend_config::{write_backend, Backend, PgSettings};
use cairn_state::{
    EventBody, OpAction, OpenOptions, ProviderInstance, ProviderRef, ResourceObject, Store,
    StoredValue,
};
use std::time::{Duration, Instant};

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn env_number(name: &str) -> Option<u64> {
    std::env::var(name).ok()?.parse().ok()
}

fn provider() -> ProviderRef {
    ProviderRef::new("provider[\"sim\"]".parse().unwrap(), "p".into())
}

fn attrs(i: u64) -> StoredValue {
    StoredValue::Object(
        [
            ("id".to_string(), StoredValue::String(format!("thing-{i}"))),
            ("name".to_string(), StoredValue::String(format!("name-{i}"))),
            ("value".to_string(), StoredValue::String("v".repeat(40))),
        ]
        .into(),
    )
}

fn opts(write: bool) -> OpenOptions {
    OpenOptions {
        command: "bench".into(),
        lock_timeout: Duration::from_secs(30),
        write,
        skip_lock: false,
        encryption: None,
    }
}

fn stats(mut v: Vec<Duration>) -> (Duration, Duration) {
    v.sort();
    (v[0], v[v.len() / 2])
}

fn main() {
    let Some(server) = pgserver::start_or_skip(false) else {
        return;
    };
    let n = env_number("CAIRN_BENCH_INSTANCES").unwrap_or(100_000);
    let reps = env_number("CAIRN_BENCH_REPS").unwrap_or(3) as usize;
    let dir = tempfile::tempdir().unwrap();
    write_backend(
        dir.path(),
        &Backend::Pg(PgSettings {
            conn_str: Some(server.conn_str()),
            schema_name: Some("bench".into()),
            ..Default::default()
        }),
    )
    .unwrap();
    println!("PostgreSQL log benchmark ({n} instances, fsync on, loopback)");
    let (mut s, _) = Store::open(dir.path(), &opts(true)).unwrap();
    s.begin_run("bench", &[]).unwrap();
    s.append(EventBody::ProviderRegistered {
        instance: ProviderInstance {
            addr: "provider[\"sim\"]".parse().unwrap(),
            id: "p".into(),
            config: StoredValue::Null,
            is_default: true,
        },
    })
    .unwrap();
    let start = Instant::now();
    let mut since_commit = 0;
    for i in 0..n {
        let addr: cairn_state::ResourceInstanceAddr = format!("sim_thing.t[{i}]").parse().unwrap();
        let op = s
            .append(EventBody::OperationStarted {
                addr: addr.clone(),
                deposed: None,
                action: OpAction::Create,
                token: Some(format!("tok-{i}")),
                provider: provider(),
                prior: None,
            })
            .unwrap();
        let object = ResourceObject {
            attrs: attrs(i),
            deps: vec![],
            provider: provider(),
            create_token: Some(format!("tok-{i}")),
            tainted: false,
            meta: Default::default(),
        };
        s.append(EventBody::OperationSucceeded {
            op,
            object: Some(object),
        })
        .unwrap();
        s.append(EventBody::ResourceRead {
            addr,
            attrs: attrs(i + 1),
            meta: None,
        })
        .unwrap();
        since_commit += 3;
        if since_commit >= 1_000 {
            s.commit().unwrap();
            since_commit = 0;
        }
    }
    s.commit().unwrap();
    let elapsed = start.elapsed();
    let events = n * 3;
    println!(
        "{:<44} {:>8.0} events/s ({events} events in {:.2} s, ~1,000 per commit, checkpoints \
         included; goal >= 20,000)",
        "append, group commit on PostgreSQL:",
        events as f64 / elapsed.as_secs_f64(),
        elapsed.as_secs_f64()
    );
    s.checkpoint().unwrap();
    drop(s);
    let time_opens = |label: &str| {
        let mut times = Vec::new();
        for _ in 0..reps {
            let start = Instant::now();
            let (s, _) = Store::open(dir.path(), &opts(false)).unwrap();
            times.push(start.elapsed());
            assert_eq!(s.snapshot().resources.len() as u64, n);
        }
        let (best, median) = stats(times);
        println!(
            "{label:<44} best {:>7.1} ms, median {:>7.1} ms ({reps} runs)",
            best.as_secs_f64() * 1e3,
            median.as_secs_f64() * 1e3
        );
    };
    time_opens("open, with a checkpoint (goal < 1 s):");
    server
        .psql("DELETE FROM bench.cairn_checkpoints")
        .expect("checkpoints deleted");
    time_opens("open, without a checkpoint (full replay):");
}
