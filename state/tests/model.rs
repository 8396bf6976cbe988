//! Model-based property tests of the store: random appends, commits, reopens, drops and
//! crashes, checked against a simple in-memory model; and checkpoint opens against replays.
//!
//! The model is the list of events appended, plus how many of them were committed; the state
//! they mean is computed by a deliberately small interpreter here, not by `Snapshot::apply`.
//! A crash is simulated by copying the database directory while the store is still open (what
//! a killed process leaves on disk) and opening the copy: events after the last commit may be
//! missing, but only as a contiguous suffix.
//!
//! `CAIRN_PROPTEST_CASES` raises the number of cases (default 12).

use cairn_state::{
    EventBody, OpAction, OpenOptions, ProviderInstance, ProviderRef, ResourceInstanceAddr,
    ResourceObject, Snapshot, Store, StoredValue,
};
use proptest::prelude::*;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

fn cases() -> u32 {
    std::env::var("CAIRN_PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(12)
}

#[derive(Clone, Debug)]
enum Action {
    Create(u8, u8),
    Update(u8, u8),
    Delete(u8),
    Refresh(u8, u8),
    /// An operation that starts and fails, leaving a tainted object.
    Fail(u8, u8),
    /// An operation that starts and never ends (pending).
    Start(u8),
    Forget(u8),
    Move(u8, u8),
    Commit,
    Reopen,
    DropWithoutCommit,
    Crash,
    Checkpoint,
}

fn action() -> impl Strategy<Value = Action> {
    let i = 0u8..6;
    prop_oneof![
        4 => (i.clone(), any::<u8>()).prop_map(|(a, v)| Action::Create(a, v)),
        3 => (i.clone(), any::<u8>()).prop_map(|(a, v)| Action::Update(a, v)),
        2 => i.clone().prop_map(Action::Delete),
        2 => (i.clone(), any::<u8>()).prop_map(|(a, v)| Action::Refresh(a, v)),
        1 => (i.clone(), any::<u8>()).prop_map(|(a, v)| Action::Fail(a, v)),
        1 => i.clone().prop_map(Action::Start),
        1 => i.clone().prop_map(Action::Forget),
        1 => (i.clone(), i).prop_map(|(a, b)| Action::Move(a, b)),
        3 => Just(Action::Commit),
        1 => Just(Action::Reopen),
        1 => Just(Action::DropWithoutCommit),
        1 => Just(Action::Crash),
        1 => Just(Action::Checkpoint),
    ]
}

fn addr(i: u8) -> ResourceInstanceAddr {
    format!("sim_thing.r[{i}]").parse().expect("address")
}

fn pref() -> ProviderRef {
    ProviderRef::new("provider[\"sim\"]".parse().expect("provider"), "p".into())
}

fn object(v: u8, tainted: bool) -> ResourceObject {
    with_deps(v, tainted, vec![])
}

fn with_deps(v: u8, tainted: bool, deps: Vec<ResourceInstanceAddr>) -> ResourceObject {
    ResourceObject {
        attrs: StoredValue::Number(v.to_string()),
        deps,
        provider: pref(),
        create_token: None,
        tainted,
        meta: Default::default(),
    }
}

/// What the model says is in state: address → (value, tainted), and pending ops by seq.
#[derive(Debug, Default, PartialEq)]
struct ModelState {
    objects: BTreeMap<String, (String, bool)>,
    pending: BTreeMap<u64, String>,
}

/// The model's own reading of an event list (only the kinds this test generates).
fn interpret(events: &[EventBody]) -> ModelState {
    let mut m = ModelState::default();
    for (i, e) in events.iter().enumerate() {
        let seq = i as u64 + 1;
        match e {
            EventBody::OperationStarted { addr, .. } => {
                m.pending.insert(seq, addr.to_string());
            }
            EventBody::OperationSucceeded { op, object }
            | EventBody::OperationFailed { op, object, .. } => {
                if let Some(a) = m.pending.remove(op) {
                    match object {
                        Some(o) => {
                            let v = format!("{:?}", o.attrs);
                            m.objects.insert(a, (v, o.tainted));
                        }
                        None => {
                            m.objects.remove(&a);
                        }
                    }
                }
            }
            EventBody::ResourceRead { addr, attrs, .. } => {
                if let Some(o) = m.objects.get_mut(&addr.to_string()) {
                    o.0 = format!("{attrs:?}");
                }
            }
            EventBody::ResourceForgotten { addr } => {
                m.objects.remove(&addr.to_string());
            }
            EventBody::ResourceMoved { from, to } => {
                if let Some(o) = m.objects.remove(&from.to_string()) {
                    m.objects.insert(to.to_string(), o);
                }
                for a in m.pending.values_mut() {
                    if *a == from.to_string() {
                        *a = to.to_string();
                    }
                }
            }
            _ => {}
        }
    }
    m
}

/// What the store says is in state, in the model's terms.
fn observe(s: &Snapshot) -> ModelState {
    ModelState {
        objects: s
            .resources
            .iter()
            .filter_map(|(a, r)| {
                let o = r.current.as_ref()?;
                Some((a.to_string(), (format!("{:?}", o.attrs), o.tainted)))
            })
            .collect(),
        pending: s
            .pending
            .iter()
            .map(|(op, p)| (*op, p.addr.to_string()))
            .collect(),
    }
}

fn opts() -> OpenOptions {
    OpenOptions {
        command: "test".into(),
        lock_timeout: Duration::from_secs(10),
        write: true,
        skip_lock: false,
        encryption: None,
    }
}

fn open(dir: &Path) -> Result<Store, TestCaseError> {
    let (mut s, warnings) =
        Store::open(dir, &opts()).map_err(|e| TestCaseError::fail(e.to_string()))?;
    prop_assert!(warnings.is_empty(), "{warnings:?}");
    s.set_checkpoint_every(5);
    Ok(s)
}

fn copy_dir(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_dir(&entry.path(), &target)?;
        } else {
            std::fs::copy(entry.path(), &target)?;
        }
    }
    Ok(())
}

/// Checks the reopened store against the model: a prefix of the appended events, at least as
/// long as the committed ones; the model then forgets the lost suffix.
fn check_recovered(
    store: &Store,
    model: &mut Vec<EventBody>,
    committed: &mut usize,
) -> Result<(), TestCaseError> {
    let events = store
        .events(1)
        .map_err(|e| TestCaseError::fail(e.to_string()))?;
    let bodies: Vec<EventBody> = events.iter().map(|e| e.body.clone()).collect();
    prop_assert!(
        bodies.len() >= *committed && bodies.len() <= model.len(),
        "recovered {} events; {} were committed and {} appended",
        bodies.len(),
        committed,
        model.len()
    );
    prop_assert_eq!(
        &bodies[..],
        &model[..bodies.len()],
        "not a prefix of the appended events"
    );
    model.truncate(bodies.len());
    *committed = model.len();
    prop_assert_eq!(store.head(), model.len() as u64);
    prop_assert_eq!(observe(store.snapshot()), interpret(model));
    prop_assert_eq!(store.snapshot(), &Snapshot::replay(&events));
    prop_assert!(store.snapshot().dependents_consistent());
    let violations = store.check();
    // Pending operations of a crashed run are expected; everything else must hold.
    prop_assert!(violations.is_empty(), "{violations:?}");
    Ok(())
}

fn run_actions(actions: Vec<Action>) -> Result<(), TestCaseError> {
    let tmp = tempfile::tempdir().map_err(|e| TestCaseError::fail(e.to_string()))?;
    let mut generation = 0;
    let mut dir: PathBuf = tmp.path().join("g0");
    let mut store = Some(open(&dir)?);
    let mut model: Vec<EventBody> = Vec::new();
    let mut committed: usize;
    let append = |store: &mut Store, model: &mut Vec<EventBody>, body: EventBody| {
        let seq = store
            .append(body.clone())
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        model.push(body);
        prop_assert_eq!(seq, model.len() as u64);
        Ok::<u64, TestCaseError>(seq)
    };
    {
        let s = store.as_mut().expect("open store");
        append(
            s,
            &mut model,
            EventBody::ProviderRegistered {
                instance: ProviderInstance {
                    addr: pref().addr.clone(),
                    id: "p".into(),
                    config: StoredValue::Null,
                    is_default: true,
                },
            },
        )?;
        // Committed, so a crash cannot leave later objects naming an unregistered provider.
        s.commit().map_err(|e| TestCaseError::fail(e.to_string()))?;
        committed = 1;
    }
    for a in actions {
        let s = store.as_mut().expect("open store");
        let present = |s: &Store, i: u8| s.snapshot().current(&addr(i)).is_some();
        // Objects depend on the instances with smaller numbers that exist when they are written.
        let deps = |s: &Store, i: u8| -> Vec<ResourceInstanceAddr> {
            (0..i)
                .map(addr)
                .filter(|a| s.snapshot().resource(a).is_some())
                .collect()
        };
        let busy = |s: &Store, i: u8| !s.snapshot().pending_for(&addr(i)).is_empty();
        let op = |s: &mut Store, m: &mut Vec<EventBody>, i: u8, action: OpAction| {
            append(
                s,
                m,
                EventBody::OperationStarted {
                    addr: addr(i),
                    deposed: None,
                    action,
                    token: None,
                    provider: pref(),
                    prior: None,
                },
            )
        };
        match a {
            Action::Create(i, v) if !present(s, i) && !busy(s, i) => {
                let op = op(s, &mut model, i, OpAction::Create)?;
                s.commit().map_err(|e| TestCaseError::fail(e.to_string()))?;
                committed = model.len();
                let object = Some(with_deps(v, false, deps(s, i)));
                append(s, &mut model, EventBody::OperationSucceeded { op, object })?;
            }
            Action::Update(i, v) if present(s, i) && !busy(s, i) => {
                let op = op(s, &mut model, i, OpAction::Update)?;
                let object = Some(with_deps(v, false, deps(s, i)));
                append(s, &mut model, EventBody::OperationSucceeded { op, object })?;
            }
            Action::Delete(i) if present(s, i) && !busy(s, i) => {
                let op = op(s, &mut model, i, OpAction::Delete)?;
                append(
                    s,
                    &mut model,
                    EventBody::OperationSucceeded { op, object: None },
                )?;
            }
            Action::Fail(i, v) if !present(s, i) && !busy(s, i) => {
                let op = op(s, &mut model, i, OpAction::Create)?;
                let body = EventBody::OperationFailed {
                    op,
                    object: Some(object(v, true)),
                    error: "boom".into(),
                };
                append(s, &mut model, body)?;
            }
            Action::Start(i) if !busy(s, i) => {
                op(s, &mut model, i, OpAction::Update)?;
            }
            Action::Refresh(i, v) if present(s, i) => {
                let body = EventBody::ResourceRead {
                    addr: addr(i),
                    attrs: StoredValue::Number(v.to_string()),
                    meta: None,
                };
                append(s, &mut model, body)?;
            }
            Action::Forget(i) if present(s, i) && !busy(s, i) => {
                append(
                    s,
                    &mut model,
                    EventBody::ResourceForgotten { addr: addr(i) },
                )?;
            }
            Action::Move(i, j) if present(s, i) && !present(s, j) && !busy(s, i) && !busy(s, j) => {
                let body = EventBody::ResourceMoved {
                    from: addr(i),
                    to: addr(j),
                };
                append(s, &mut model, body)?;
            }
            Action::Commit => {
                s.commit().map_err(|e| TestCaseError::fail(e.to_string()))?;
                committed = model.len();
            }
            Action::Checkpoint => {
                s.checkpoint()
                    .map_err(|e| TestCaseError::fail(e.to_string()))?;
                committed = model.len();
            }
            Action::Reopen => {
                s.commit().map_err(|e| TestCaseError::fail(e.to_string()))?;
                committed = model.len();
                drop(store.take());
                let s = open(&dir)?;
                check_recovered(&s, &mut model, &mut committed)?;
                store = Some(s);
            }
            Action::DropWithoutCommit => {
                drop(store.take());
                let s = open(&dir)?;
                check_recovered(&s, &mut model, &mut committed)?;
                store = Some(s);
            }
            Action::Crash => {
                generation += 1;
                let copy = tmp.path().join(format!("g{generation}"));
                // What a crash leaves on disk: the database as written so far, the
                // checkpoint files (each written after the flush of what it covers) and the
                // log's head (written after each flush).
                for part in ["log", "checkpoints"] {
                    if dir.join(part).exists() {
                        copy_dir(&dir.join(part), &copy.join(part))
                            .map_err(|e| TestCaseError::fail(e.to_string()))?;
                    }
                }
                if dir.join("log-head").exists() {
                    std::fs::copy(dir.join("log-head"), copy.join("log-head"))
                        .map_err(|e| TestCaseError::fail(e.to_string()))?;
                }
                drop(store.take());
                dir = copy;
                let s = open(&dir)?;
                check_recovered(&s, &mut model, &mut committed)?;
                store = Some(s);
            }
            _ => {}
        }
    }
    drop(store.take());
    let s = open(&dir)?;
    check_recovered(&s, &mut model, &mut committed)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases()))]

    #[test]
    fn the_store_agrees_with_the_model(actions in prop::collection::vec(action(), 1..60)) {
        run_actions(actions)?;
    }

    /// Opening from checkpoints, opening with none, and replaying every prefix agree.
    #[test]
    fn checkpoints_and_time_travel_agree_with_replay(
        actions in prop::collection::vec(action(), 1..60),
        every in 1u64..12,
    ) {
        let tmp = tempfile::tempdir().map_err(|e| TestCaseError::fail(e.to_string()))?;
        let dir = tmp.path().join("g0");
        let mut s = open(&dir)?;
        s.set_checkpoint_every(every);
        let mut seq = 0u64;
        for a in actions {
            let body = match a {
                Action::Create(i, v) | Action::Update(i, v) => {
                    seq += 1;
                    s.append(EventBody::OperationStarted {
                        addr: addr(i), deposed: None, action: OpAction::Create, token: None,
                        provider: pref(), prior: None,
                    }).map_err(|e| TestCaseError::fail(e.to_string()))?;
                    let deps = vec![addr((i + 1) % 6), addr((i + 2) % 6)];
                    EventBody::OperationSucceeded { op: seq, object: Some(with_deps(v, v % 3 == 0, deps)) }
                }
                Action::Refresh(i, v) => EventBody::ResourceRead {
                    addr: addr(i), attrs: StoredValue::Number(v.to_string()), meta: None,
                },
                Action::Delete(i) | Action::Forget(i) => EventBody::ResourceForgotten { addr: addr(i) },
                Action::Move(i, j) => EventBody::ResourceMoved { from: addr(i), to: addr(j) },
                Action::Start(i) | Action::Fail(i, _) => EventBody::OperationStarted {
                    addr: addr(i), deposed: None, action: OpAction::Delete, token: None,
                    provider: pref(), prior: None,
                },
                _ => {
                    s.commit().map_err(|e| TestCaseError::fail(e.to_string()))?;
                    continue;
                }
            };
            seq = s.append(body).map_err(|e| TestCaseError::fail(e.to_string()))?;
        }
        s.commit().map_err(|e| TestCaseError::fail(e.to_string()))?;
        let events = s.events(1).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let replayed = Snapshot::replay(&events);
        // Incremental apply equals replay.
        prop_assert_eq!(s.snapshot(), &replayed);
        prop_assert!(s.snapshot().dependents_consistent());
        drop(s);
        let mut s = open(&dir)?;
        prop_assert_eq!(s.snapshot(), &replayed);
        for at in 0..=s.head() {
            let prefix = Snapshot::replay(&events[..at as usize]);
            prop_assert!(prefix.dependents_consistent());
            prop_assert_eq!(s.snapshot_at(at).map_err(|e| TestCaseError::fail(e.to_string()))?, prefix);
        }
        s.clear_checkpoints().map_err(|e| TestCaseError::fail(e.to_string()))?;
        drop(s);
        let s = open(&dir)?;
        prop_assert_eq!(s.snapshot(), &replayed);
    }
}
