//! Benchmark of `cairn ui`'s two heaviest endpoints, run with `cargo bench --bench ui` (it
//! prints figures; it is not a timed test).
//!
//! A state log of 1,000 `apply` runs that create 100 instances each (100,000 instances in 10
//! modules, about 203,000 events, each run with its recorded plan and the plan's dependency
//! graph: 100 resources, 190 edges) is written through the state crate's `Store`, read back the
//! way the server reads it (`peek_events`) and folded into the UI's model. Then the timeline
//! (every run) and the state at an event (the head, the middle and an early event: counted
//! over all instances, the first 1,000 listed) are computed and serialized to JSON, as the
//! HTTP handlers do, several times each; the best and the median are printed. The goal is
//! under 200 ms each. `CAIRN_BENCH_RUNS` sets the number of repetitions (default 5).
//!
//! Then the timeline of 10,000 runs (goal: under a second), its first page and every page in
//! turn; `CAIRN_BENCH_UI=timeline` runs only that. It measures the library in this process:
//! to compare with an older commit, run it there too (`CAIRN_BENCH_BEFORE` is for the benchmarks
//! that run the binary).

use cairn::ui::model::{Model, StateQuery, TimelineQuery};
use cairn_state::{
    EventBody, ModulePath, OpAction, OpenOptions, PlanGraph, PlanRecord, PlannedAction,
    PlannedChange, ProviderAddr, ProviderInstance, ProviderRef, ResourceInstanceAddr,
    ResourceObject, RunOutcome, RunSummary, Store, StoredValue,
};
use std::time::{Duration, Instant};

const RUNS: u64 = 1_000;
const PER_RUN: u64 = 100;

/// The dependency graph each run's plan records: 100 static resources in 10 modules
/// (`module.mK.sim_thing.t` and nine `uJ` beside it), each `uJ` reading `t` and `uJ-1`, each
/// module's `t` reading the previous module's.
fn plan_graph() -> PlanGraph {
    let mut nodes: Vec<String> = (0..10)
        .flat_map(|k| {
            std::iter::once(format!("module.m{k}.sim_thing.t"))
                .chain((0..9).map(move |j| format!("module.m{k}.sim_thing.u{j}")))
        })
        .collect();
    nodes.sort();
    let at = |n: String| nodes.iter().position(|x| *x == n).expect("node") as u32;
    let mut edges = Vec::new();
    for k in 0..10 {
        if k > 0 {
            edges.push((
                at(format!("module.m{k}.sim_thing.t")),
                at(format!("module.m{}.sim_thing.t", k - 1)),
            ));
        }
        for j in 0..9 {
            let u = at(format!("module.m{k}.sim_thing.u{j}"));
            edges.push((u, at(format!("module.m{k}.sim_thing.t"))));
            if j > 0 {
                edges.push((u, at(format!("module.m{k}.sim_thing.u{}", j - 1))));
            }
        }
    }
    edges.sort();
    PlanGraph { nodes, edges }
}

fn build_log(dir: &std::path::Path) {
    let (mut store, _) = Store::open(
        dir,
        &OpenOptions {
            command: "bench".into(),
            write: true,
            ..Default::default()
        },
    )
    .expect("open");
    let provider = ProviderAddr::default_for(ModulePath::root(), "sim");
    let pref = ProviderRef::new(provider.clone(), "p1".into());
    let graph = plan_graph();
    for run in 0..RUNS {
        store
            .begin_run("apply", &["apply".into(), "-auto-approve".into()])
            .expect("begin");
        if run == 0 {
            store
                .append(EventBody::ProviderRegistered {
                    instance: ProviderInstance {
                        addr: provider.clone(),
                        id: "p1".into(),
                        config: StoredValue::Object(Default::default()),
                        is_default: true,
                    },
                })
                .expect("append");
        }
        // Each run records its plan as `apply` does: every change with its plan text.
        store
            .append(EventBody::RunPlanned {
                plan: PlanRecord {
                    mode: "normal".into(),
                    saved: false,
                    files_hash: "0".repeat(64),
                    changes: (0..PER_RUN)
                        .map(|i| {
                            let n = run * PER_RUN + i;
                            let addr = format!("module.m{}.sim_thing.t[{n}]", n % 10);
                            PlannedChange {
                                diff: format!(
                                    "  # {addr} will be created\n  + resource \"sim_thing\" \"t\" {{\n      + id    = (known after apply)\n      + name  = \"t{n}\"\n      + out   = (known after apply)\n      + value = \"v{run}\"\n    }}"
                                ),
                                addr: addr.parse().expect("address"),
                                action: PlannedAction::Create,
                                reason: None,
                                deferral: None,
                            }
                        })
                        .collect(),
                    outputs: Vec::new(),
                    graph: Some(graph.clone()),
                },
            })
            .expect("append");
        for i in 0..PER_RUN {
            let n = run * PER_RUN + i;
            let addr: ResourceInstanceAddr = format!("module.m{}.sim_thing.t[{n}]", n % 10)
                .parse()
                .expect("address");
            let op = store
                .append(EventBody::OperationStarted {
                    addr,
                    deposed: None,
                    action: OpAction::Create,
                    token: None,
                    provider: pref.clone(),
                    prior: None,
                })
                .expect("append");
            let attrs = StoredValue::Object(cairn_state::ValueMap::from([
                ("id".to_string(), StoredValue::String(format!("t{n}-1"))),
                ("name".to_string(), StoredValue::String(format!("t{n}"))),
                ("value".to_string(), StoredValue::String(format!("v{run}"))),
                (
                    "out".to_string(),
                    StoredValue::String(format!("t{n}/v{run}")),
                ),
            ]));
            store
                .append(EventBody::OperationSucceeded {
                    op,
                    object: Some(ResourceObject {
                        attrs,
                        deps: Vec::new(),
                        provider: pref.clone(),
                        create_token: None,
                        tainted: false,
                        meta: Default::default(),
                    }),
                })
                .expect("append");
        }
        store
            .finish_run(
                RunOutcome::Success,
                RunSummary {
                    added: PER_RUN,
                    ..Default::default()
                },
            )
            .expect("finish");
    }
}

fn measure<T>(name: &str, reps: usize, mut f: impl FnMut() -> T) -> T {
    let mut times: Vec<Duration> = Vec::new();
    let mut last = None;
    for _ in 0..reps {
        let start = Instant::now();
        last = Some(f());
        times.push(start.elapsed());
    }
    times.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    println!(
        "{name:<44} best {:>8.1} ms   median {:>8.1} ms",
        ms(times[0]),
        ms(times[times.len() / 2])
    );
    last.expect("at least one repetition")
}

fn main() {
    let reps: usize = std::env::var("CAIRN_BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5)
        .max(1);
    // `CAIRN_BENCH_UI=timeline`: only the timeline of 10,000 runs.
    if std::env::var("CAIRN_BENCH_UI").as_deref() == Ok("timeline") {
        many_runs(reps);
        return;
    }
    let tmp = tempfile::tempdir().expect("temp dir");
    let dir = tmp.path().join("state");
    let start = Instant::now();
    build_log(&dir);
    println!(
        "wrote {RUNS} runs, {} instances in {:.1} s",
        RUNS * PER_RUN,
        start.elapsed().as_secs_f64()
    );

    let start = Instant::now();
    // Read as the server does: visits of at most 20,000 events each.
    let mut events = Vec::new();
    let mut visits = 0;
    let mut longest = Duration::ZERO;
    loop {
        let t = Instant::now();
        let batch = match cairn_state::peek_events(&dir, events.len() as u64 + 1, 20_000, None)
            .expect("peek")
        {
            cairn_state::Peek::Events(e, _) => e,
            cairn_state::Peek::Busy => panic!("the log is held by another process"),
        };
        longest = longest.max(t.elapsed());
        visits += 1;
        let done = batch.len() < 20_000;
        events.extend(batch);
        if done {
            break;
        }
    }
    let read = start.elapsed();
    println!(
        "{visits} visits to the log, the longest {:.0} ms",
        longest.as_secs_f64() * 1e3
    );
    let n_events = events.len();
    if let Some(e) = events
        .iter()
        .find(|e| matches!(e.body, EventBody::RunPlanned { .. }))
    {
        let whole = cairn_state::event::encode(e).len();
        let mut bare = e.clone();
        if let EventBody::RunPlanned { plan } = &mut bare.body {
            plan.graph = None;
        }
        let without = cairn_state::event::encode(&bare).len();
        println!(
            "one RunPlanned record: {whole} bytes, of which the graph {} bytes",
            whole - without
        );
    }
    let start = Instant::now();
    let mut model = Model::new();
    model.extend(events);
    println!(
        "read {n_events} events in {:.0} ms, folded the model in {:.0} ms (once, at start)",
        read.as_secs_f64() * 1e3,
        start.elapsed().as_secs_f64() * 1e3
    );
    let head = model.head();

    let body = measure("timeline (1,000 runs, all on one page)", reps, || {
        serde_json::to_string(&model.timeline(&TimelineQuery {
            limit: Some(1000),
            ..Default::default()
        }))
        .expect("json")
    });
    println!("  {} KiB of JSON", body.len() / 1024);
    let _ = measure("timeline filtered (outcome=failed)", reps, || {
        serde_json::to_string(&model.timeline(&TimelineQuery {
            outcome: Some("failed".into()),
            ..Default::default()
        }))
        .expect("json")
    });
    for (label, at) in [
        ("state at the head", head),
        ("state at the middle of the log", head / 2),
        ("state at an early event", head / 100),
    ] {
        let body = measure(&format!("{label} ({at})"), reps, || {
            let j = model
                .state_at(&StateQuery {
                    at: Some(at),
                    ..Default::default()
                })
                .expect("state");
            serde_json::to_string(&j).expect("json")
        });
        println!("  {} KiB of JSON", body.len() / 1024);
    }
    // A run in the middle: its page, and its recorded plan as the plan page shows it.
    let run_id = model.timeline(&TimelineQuery {
        limit: Some(RUNS as usize),
        ..Default::default()
    })["runs"][RUNS as usize / 2]["id"]
        .as_u64()
        .expect("a run");
    let body = measure("one run's page (100 changes)", reps, || {
        serde_json::to_string(&model.run(run_id).expect("run")).expect("json")
    });
    println!("  {} KiB of JSON", body.len() / 1024);
    let body = measure("one run's recorded plan (100 changes)", reps, || {
        let (record, _) = model.run_plan(run_id).expect("a recorded plan");
        let view = cairn::ui::plan::PlanView {
            name: "bench".into(),
            record: record.clone(),
            errored: false,
            warnings: Vec::new(),
            note: None,
        };
        serde_json::to_string(&cairn::ui::plan::plan_json(&view, None, None)).expect("json")
    });
    println!("  {} KiB of JSON", body.len() / 1024);
    let _ = measure("diff between the middle and the head", reps, || {
        serde_json::to_string(&model.diff(head / 2, head, 500).expect("diff")).expect("json")
    });
    drop(model);
    many_runs(reps);
}

/// The timeline of 10,000 runs (issue 32's goal: under a second): each run updates one of 50
/// instances, one in ten fails with a recorded error. The events are built in memory and folded
/// as the server folds what it reads; then the timeline's first page (what the page asks for
/// and draws) and every page in turn (all 10,000 runs, as "older runs" walks them).
fn many_runs(reps: usize) {
    use cairn_state::{Event, RecordedDiagnostic};
    const N: u64 = 10_000;
    let pref = ProviderRef::new(
        ProviderAddr::default_for(ModulePath::root(), "sim"),
        "p1".into(),
    );
    let object = |n: u64, v: u64| ResourceObject {
        attrs: StoredValue::Object(cairn_state::ValueMap::from([
            ("id".to_string(), StoredValue::String(format!("t{n}"))),
            ("value".to_string(), StoredValue::String(format!("v{v}"))),
        ])),
        deps: Vec::new(),
        provider: pref.clone(),
        create_token: None,
        tainted: false,
        meta: Default::default(),
    };
    let mut events = Vec::new();
    let mut seq = 0u64;
    let mut push = |events: &mut Vec<Event>, run: u64, body: EventBody| -> u64 {
        seq += 1;
        events.push(Event {
            seq,
            version: 1,
            time_ms: 1_700_000_000_000 + seq * 1000,
            run,
            body,
        });
        seq
    };
    for r in 0..N {
        let run = events.len() as u64 + 1;
        let n = r % 50;
        push(
            &mut events,
            run,
            EventBody::RunStarted {
                command: "apply".into(),
                args: vec![
                    "apply".into(),
                    "-auto-approve".into(),
                    "-var".into(),
                    format!("v={r}"),
                ],
                user: "ann".into(),
                pid: 1,
            },
        );
        let addr: ResourceInstanceAddr = format!("sim_thing.t[{n}]").parse().expect("address");
        let first = r < 50;
        let op = push(
            &mut events,
            run,
            EventBody::OperationStarted {
                addr,
                deposed: None,
                action: if first {
                    OpAction::Create
                } else {
                    OpAction::Update
                },
                token: None,
                provider: pref.clone(),
                prior: (!first).then(|| object(n, r - 50)),
            },
        );
        let failed = r % 10 == 9 && !first;
        if failed {
            push(
                &mut events,
                run,
                EventBody::OperationFailed {
                    op,
                    object: Some(object(n, r - 50)),
                    error: "injected failure".into(),
                },
            );
            push(
                &mut events,
                run,
                EventBody::RunDiagnostics {
                    diagnostics: vec![RecordedDiagnostic {
                        severity: cairn_state::event::Severity::Error,
                        summary: "injected failure".into(),
                        detail: String::new(),
                        location: Some("main.tf:1:1".into()),
                        address: Some(format!("sim_thing.t[{n}]")),
                    }],
                },
            );
        } else {
            push(
                &mut events,
                run,
                EventBody::OperationSucceeded {
                    op,
                    object: Some(object(n, r)),
                },
            );
        }
        push(
            &mut events,
            run,
            EventBody::RunFinished {
                outcome: if failed {
                    RunOutcome::Failed
                } else {
                    RunOutcome::Success
                },
                summary: RunSummary {
                    added: first as u64,
                    changed: (!first && !failed) as u64,
                    errors: failed as u64,
                    ..Default::default()
                },
            },
        );
    }
    let n_events = events.len();
    let start = Instant::now();
    let mut model = Model::new();
    model.extend(events);
    println!(
        "\n{N} runs ({n_events} events) folded in {:.0} ms",
        start.elapsed().as_secs_f64() * 1e3
    );
    let body = measure("timeline of 10,000 runs: first page", reps, || {
        serde_json::to_string(&model.timeline(&TimelineQuery::default())).expect("json")
    });
    println!("  {} KiB of JSON", body.len() / 1024);
    let total = measure("timeline of 10,000 runs: every page", reps, || {
        let mut before = None;
        let mut bytes = 0;
        loop {
            let t = model.timeline(&TimelineQuery {
                before,
                limit: Some(1000),
                ..Default::default()
            });
            bytes += serde_json::to_string(&t).expect("json").len();
            match t["next_before"].as_u64() {
                Some(b) => before = Some(b),
                None => break bytes,
            }
        }
    });
    println!(
        "  {} KiB of JSON in all (goal: under a second)",
        total / 1024
    );
}
