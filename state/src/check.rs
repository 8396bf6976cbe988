//! The integrity check: the numbered invariants of the crate docs, checked over a log.
//!
//! [`check_snapshot`] checks what a snapshot alone can show (invariants 4–7);
//! [`LogChecker`] walks the records of a log (invariants 1–3), replays them, and compares the
//! replay with the snapshot held and with every checkpoint (8–9). `Store::check` drives it.

use crate::addr::Mode;
use crate::event::{Event, EventBody, RunOutcome};
use crate::snapshot::Snapshot;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

/// One broken invariant: its number in the crate docs and what was found.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Violation {
    pub(crate) number: u32,
    pub(crate) message: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invariant {}: {}", self.number, self.message)
    }
}

fn v(number: u32, message: String) -> Violation {
    Violation { number, message }
}

/// Invariants 4–7 on one snapshot.
pub fn check_snapshot(s: &Snapshot) -> Vec<Violation> {
    let mut out = Vec::new();
    // 4. No pending operation belongs to a run that finished cleanly.
    for p in s.pending.values() {
        if let Some(r) = s.run(p.run) {
            if r.outcome == Some(RunOutcome::Success) {
                out.push(v(
                    4,
                    format!(
                        "operation {} ({} {}) is pending, but its run {} finished successfully",
                        p.op, p.action, p.addr, p.run
                    ),
                ));
            }
        }
    }
    // 5. Provider references resolve.
    let objects = s.resources.iter().flat_map(|(a, r)| {
        r.current
            .iter()
            .map(move |o| (a, None, o))
            .chain(r.deposed.iter().map(move |(k, o)| (a, Some(k), o)))
    });
    let describe = |a: &dyn fmt::Display, k: Option<&String>| match k {
        Some(k) => format!("{a} (deposed object {k})"),
        None => a.to_string(),
    };
    for (addr, key, obj) in objects.clone() {
        if s.resolve_provider(&obj.provider).is_none() {
            out.push(v(
                5,
                format!(
                    "{} names provider {} (instance {}), which is not registered",
                    describe(addr, key),
                    obj.provider.addr,
                    obj.provider.id
                ),
            ));
        }
    }
    for (addr, d) in &s.data {
        if s.resolve_provider(&d.provider).is_none() {
            out.push(v(
                5,
                format!(
                    "{addr} names provider {} (instance {}), which is not registered",
                    d.provider.addr, d.provider.id
                ),
            ));
        }
    }
    // 6. Dependencies resolve.
    for (addr, key, obj) in objects {
        for dep in &obj.deps {
            if !s.resources.contains_key(dep) {
                out.push(v(
                    6,
                    format!(
                        "{} depends on {dep}, which is not in state",
                        describe(addr, key)
                    ),
                ));
            }
        }
    }
    // 7. Each live address appears once, in its place.
    for (addr, r) in &s.resources {
        if addr.resource.mode != Mode::Managed {
            out.push(v(
                7,
                format!("{addr} is a data address among managed resources"),
            ));
        }
        if r.is_empty() {
            out.push(v(7, format!("{addr} is in state with no object")));
        }
    }
    for addr in s.data.keys() {
        if addr.resource.mode != Mode::Data {
            out.push(v(
                7,
                format!("{addr} is a managed address among data results"),
            ));
        }
    }
    let mut targets = BTreeMap::new();
    for p in s.pending.values() {
        if let Some(other) = targets.insert((&p.addr, &p.deposed), p.op) {
            out.push(v(
                7,
                format!(
                    "operations {other} and {} are both pending on {}",
                    p.op,
                    describe(&p.addr, p.deposed.as_ref())
                ),
            ));
        }
    }
    out
}

/// Walks a log record by record (invariants 1–3) and replays it (8–9).
pub(crate) struct LogChecker {
    out: Vec<Violation>,
    replay: Snapshot,
    started_runs: BTreeSet<u64>,
    finished_runs: BTreeSet<u64>,
    started_ops: BTreeSet<u64>,
    settled_ops: BTreeSet<u64>,
    seen_checkpoints: BTreeSet<u64>,
    checkpoints_at: BTreeMap<u64, Snapshot>,
}

impl Default for LogChecker {
    fn default() -> Self {
        Self::new()
    }
}

impl LogChecker {
    pub(crate) fn new() -> Self {
        LogChecker {
            out: Vec::new(),
            replay: Snapshot::new(),
            started_runs: BTreeSet::new(),
            finished_runs: BTreeSet::new(),
            started_ops: BTreeSet::new(),
            settled_ops: BTreeSet::new(),
            seen_checkpoints: BTreeSet::new(),
            checkpoints_at: BTreeMap::new(),
        }
    }

    /// Registers checkpoints to compare with the replay when it reaches their position.
    pub(crate) fn expect_checkpoints(
        &mut self,
        checkpoints: &BTreeMap<u64, Result<Snapshot, String>>,
    ) {
        for (seq, c) in checkpoints {
            match c {
                Ok(s) => {
                    self.checkpoints_at.insert(*seq, s.clone());
                }
                Err(e) => self
                    .out
                    .push(v(9, format!("checkpoint at {seq} does not decode: {e}"))),
            }
        }
    }

    /// The log could not be read at `seq`.
    pub(crate) fn unreadable(&mut self, seq: u64, message: &str) {
        self.out
            .push(v(1, format!("record {seq} cannot be read: {message}")));
    }

    /// Records `expected..found` are missing.
    pub(crate) fn gap(&mut self, expected: u64, found: u64) {
        let what = if found == expected + 1 {
            format!("record {expected} is missing")
        } else {
            format!("records {expected} to {} are missing", found - 1)
        };
        self.out.push(v(1, what));
    }

    /// A record past the head the store opened at (a torn tail not yet set aside).
    pub(crate) fn beyond_head(&mut self, seq: u64) {
        self.out.push(v(
            1,
            format!(
                "record {seq} is past the last complete event (a torn write); it is set aside \
                 when the state is next opened for writing"
            ),
        ));
    }

    /// The record at `seq`, decoded (or why it did not decode).
    pub(crate) fn record(&mut self, seq: u64, decoded: Result<Event, String>) {
        let e = match decoded {
            Ok(e) => e,
            Err(m) => {
                self.out
                    .push(v(1, format!("record {seq} does not decode: {m}")));
                return;
            }
        };
        if e.seq != seq {
            self.out
                .push(v(1, format!("record {seq} says it is number {}", e.seq)));
        }
        // 2. Runs.
        match &e.body {
            EventBody::RunStarted { .. } => {
                if e.run != e.seq {
                    self.out.push(v(
                        2,
                        format!("run start {} names run {} instead of itself", e.seq, e.run),
                    ));
                }
                self.started_runs.insert(e.seq);
            }
            _ if e.run != 0 && !self.started_runs.contains(&e.run) => self.out.push(v(
                2,
                format!(
                    "event {} ({}) belongs to run {}, which has not started",
                    e.seq,
                    e.body.kind(),
                    e.run
                ),
            )),
            EventBody::RunFinished { .. } => {
                if !self.finished_runs.insert(e.run) {
                    self.out.push(v(
                        2,
                        format!("run {} finishes twice (again at {})", e.run, e.seq),
                    ));
                } else if self.replay.open_run != Some(e.run) {
                    self.out.push(v(
                        2,
                        format!(
                            "event {} finishes run {}, which is not the open run",
                            e.seq, e.run
                        ),
                    ));
                }
            }
            _ => {}
        }
        // 3. Operations.
        if let EventBody::OperationStarted { .. } = e.body {
            self.started_ops.insert(e.seq);
        }
        if let Some(op) = e.body.settles() {
            if !self.started_ops.contains(&op) {
                self.out.push(v(
                    3,
                    format!(
                        "event {} ({}) settles operation {op}, which was never started",
                        e.seq,
                        e.body.kind()
                    ),
                ));
            } else if !self.settled_ops.insert(op) {
                self.out.push(v(
                    3,
                    format!(
                        "event {} ({}) settles operation {op}, which was already settled",
                        e.seq,
                        e.body.kind()
                    ),
                ));
            }
        }
        self.replay.apply_owned(e);
        // 9. Checkpoints equal the replay at their position.
        if let Some(c) = self.checkpoints_at.get(&seq) {
            self.seen_checkpoints.insert(seq);
            if c != &self.replay {
                self.out.push(v(
                    9,
                    format!("checkpoint at {seq} differs from the replay of the log up to {seq}"),
                ));
            }
        }
    }

    /// Final checks against the snapshot the store holds.
    pub(crate) fn finish(mut self, held: &Snapshot) -> Vec<Violation> {
        for seq in self.checkpoints_at.keys() {
            if !self.seen_checkpoints.contains(seq) {
                self.out.push(v(
                    9,
                    format!("checkpoint at {seq} is past the end of the log"),
                ));
            }
        }
        if &self.replay != held {
            self.out.push(v(
                8,
                format!(
                    "the state held (at {}) differs from a full replay of the log (at {})",
                    held.head, self.replay.head
                ),
            ));
        }
        self.out.extend(check_snapshot(held));
        self.out.sort_by_key(|v| v.number);
        self.out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::addr::ProviderAddr;
    use crate::event::{ProviderRef, ResourceObject};
    use crate::snapshot::{PendingOp, ResourceInstance, RunRecord};
    use crate::stored_value::StoredValue;
    use crate::OpAction;

    fn obj(deps: &[&str]) -> ResourceObject {
        ResourceObject {
            attrs: StoredValue::Null,
            deps: deps.iter().map(|d| d.parse().unwrap()).collect(),
            provider: ProviderRef::new("provider[\"sim\"]".parse().unwrap(), "p1".into()),
            create_token: None,
            tainted: false,
            meta: Default::default(),
        }
    }

    fn numbers(s: &Snapshot) -> Vec<u32> {
        check_snapshot(s).into_iter().map(|v| v.number).collect()
    }

    #[test]
    fn snapshot_invariants_are_reported_by_number() {
        let mut s = Snapshot::new();
        s.resources.insert(
            "sim_thing.a".parse().unwrap(),
            ResourceInstance {
                current: Some(obj(&["sim_thing.missing"])),
                deposed: Default::default(),
            },
        );
        // 5 (provider not registered) and 6 (dependency missing).
        assert_eq!(numbers(&s), vec![5, 6]);
        let p: ProviderAddr = "provider[\"sim\"]".parse().unwrap();
        s.providers.insert(
            p.clone(),
            crate::event::ProviderInstance {
                addr: p,
                id: "p1".into(),
                config: StoredValue::Null,
                is_default: true,
            },
        );
        s.resources
            .get_mut(&"sim_thing.a".parse().unwrap())
            .unwrap()
            .current = Some(obj(&[]));
        assert!(check_snapshot(&s).is_empty());
        // 7: an empty instance, and a data address among resources.
        s.resources
            .insert("data.sim_x.y".parse().unwrap(), ResourceInstance::default());
        assert_eq!(numbers(&s), vec![7, 7]);
        s.resources.remove(&"data.sim_x.y".parse().unwrap());
        // 4: a pending op of a run that succeeded.
        s.runs.push(RunRecord {
            id: 1,
            command: "apply".into(),
            args: vec![],
            user: "u".into(),
            pid: 1,
            started_ms: 0,
            finished_ms: Some(1),
            outcome: Some(RunOutcome::Success),
            summary: Default::default(),
            last_seq: 3,
            moved: 0,
            forgotten: 0,
            context: Default::default(),
        });
        s.pending.insert(
            2,
            PendingOp {
                op: 2,
                run: 1,
                addr: "sim_thing.a".parse().unwrap(),
                deposed: None,
                action: OpAction::Update,
                token: None,
                provider: obj(&[]).provider,
                prior: None,
            },
        );
        let found = check_snapshot(&s);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].number, 4);
        assert!(found[0].message.contains("operation 2"), "{}", found[0]);
    }
}
