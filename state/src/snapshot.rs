//! The current state as a pure fold over the events of the log.
//!
//! [`Snapshot::apply`] is the only way state changes: no I/O, no clock, no randomness, so a
//! replay of the same events always gives the same snapshot, and a checkpoint (a serialized
//! snapshot) is interchangeable with the replay it stands for.
//!
//! The fold never fails: an event that refers to something absent (an outcome for an unknown
//! operation, a read of an instance that is not in state) changes nothing, and the integrity
//! check (`check.rs`) reports it.
//!
//! Dependencies are kept resolvable: when an instance leaves state (forgotten, gone, deleted),
//! it is removed from the dependencies of every remaining object; when it is moved, they follow
//! it. A derived count of dependents per instance ([`DepIndex`]) lets a removal skip that pass
//! when nothing depends on the instance (the usual case: a destroy deletes dependents first),
//! so destroying a large state stays linear.

use crate::addr::{ProviderAddr, ResourceInstanceAddr};
use crate::event::{
    DataObject, Event, EventBody, OpAction, OutputValue, ProviderInstance, ProviderRef,
    ResourceObject, RunContext, RunOutcome, RunSummary,
};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::collections::{BTreeMap, HashMap};
use std::ops::{Deref, DerefMut};
use std::sync::Arc;

/// The state after some prefix of the log.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Snapshot {
    /// The seq of the last event applied (0: empty log).
    pub head: u64,
    pub providers: BTreeMap<ProviderAddr, ProviderInstance>,
    /// Managed resource instances, shared by copies of the snapshot (see [`Shared`]).
    pub resources: Shared<BTreeMap<ResourceInstanceAddr, ResourceInstance>>,
    /// Data resource results (shared as `resources` is).
    pub data: Shared<BTreeMap<ResourceInstanceAddr, DataObject>>,
    pub outputs: BTreeMap<String, OutputValue>,
    /// Operations started and not yet settled, by the seq of their `OperationStarted`.
    pub pending: BTreeMap<u64, PendingOp>,
    /// Every run, in log order (for `cairn history`).
    pub runs: Vec<RunRecord>,
    /// The run started and not finished, if any (a crashed run stays open until the next one).
    pub open_run: Option<u64>,
    /// Derived from `resources` (never serialized, ignored by `==`).
    #[serde(skip)]
    pub(crate) dependents: DepIndex,
}

/// A part of the snapshot shared by its copies, copied on the first change to a shared one
/// (`Arc::make_mut` behind `DerefMut`): reading is as through the value itself. A run copies
/// the state it starts from (the plan's prior, the apply's) while the log goes on applying
/// events to its own: with 100,000 instances each such copy was about 80 MB (issue 31), and
/// now costs nothing until the log changes an instance, when the log copies once.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Shared<T>(Arc<T>);

impl<T> Clone for Shared<T> {
    fn clone(&self) -> Self {
        Shared(self.0.clone())
    }
}

impl<T> Deref for Shared<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

impl<T: Clone> DerefMut for Shared<T> {
    fn deref_mut(&mut self) -> &mut T {
        Arc::make_mut(&mut self.0)
    }
}

impl<T> From<T> for Shared<T> {
    fn from(v: T) -> Self {
        Shared(Arc::new(v))
    }
}

impl<'a, T> IntoIterator for &'a Shared<T>
where
    &'a T: IntoIterator,
{
    type Item = <&'a T as IntoIterator>::Item;
    type IntoIter = <&'a T as IntoIterator>::IntoIter;
    fn into_iter(self) -> Self::IntoIter {
        (*self.0).into_iter()
    }
}

impl<T: Serialize> Serialize for Shared<T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        (*self.0).serialize(s)
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Shared<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        T::deserialize(d).map(Shared::from)
    }
}

/// How many objects list each instance among their dependencies: a derived index that lets a
/// removal skip the search for dependents when there are none. `None` until first needed
/// (a removal or a move builds it from the objects then; while it is `None`, changes skip it). Two indexes always
/// compare equal, so snapshots compare by their state alone.
#[derive(Clone, Debug, Default)]
pub(crate) struct DepIndex(Option<HashMap<ResourceInstanceAddr, u32>>);

impl PartialEq for DepIndex {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}
impl Eq for DepIndex {}

impl DepIndex {
    fn build(resources: &BTreeMap<ResourceInstanceAddr, ResourceInstance>) -> DepIndex {
        let mut index = DepIndex(Some(HashMap::new()));
        for r in resources.values() {
            for o in r.objects() {
                index.add(&o.deps);
            }
        }
        index
    }
    fn add(&mut self, deps: &[ResourceInstanceAddr]) {
        if let Some(m) = &mut self.0 {
            for d in deps {
                *m.entry(d.clone()).or_default() += 1;
            }
        }
    }
    fn sub(&mut self, deps: &[ResourceInstanceAddr]) {
        for d in deps {
            self.sub_n(d, 1);
        }
    }
    fn sub_n(&mut self, dep: &ResourceInstanceAddr, n: u32) {
        if let Some(m) = &mut self.0 {
            if let Some(c) = m.get_mut(dep) {
                *c = c.saturating_sub(n);
                if *c == 0 {
                    m.remove(dep);
                }
            }
        }
    }
    /// True when some object may depend on `addr` (always true while the index is unbuilt).
    fn has_dependents(&self, addr: &ResourceInstanceAddr) -> bool {
        self.0.as_ref().is_none_or(|m| m.contains_key(addr))
    }
}

/// A managed instance: its current object and any deposed ones (create_before_destroy).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResourceInstance {
    pub current: Option<ResourceObject>,
    pub deposed: BTreeMap<String, ResourceObject>,
}

impl ResourceInstance {
    pub fn is_empty(&self) -> bool {
        self.current.is_none() && self.deposed.is_empty()
    }
    /// Every object of the instance: current first, then deposed by key.
    pub fn objects(&self) -> impl Iterator<Item = &ResourceObject> {
        self.current.iter().chain(self.deposed.values())
    }
}

/// An operation that started and has no outcome yet.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PendingOp {
    /// The seq of its `OperationStarted`.
    pub op: u64,
    pub run: u64,
    pub addr: ResourceInstanceAddr,
    pub(crate) deposed: Option<String>,
    pub action: OpAction,
    pub token: Option<String>,
    pub provider: ProviderRef,
    pub prior: Option<ResourceObject>,
}

/// One run, for history.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunRecord {
    /// The seq of its `RunStarted`.
    pub id: u64,
    pub command: String,
    pub args: Vec<String>,
    pub user: String,
    pub pid: u32,
    pub started_ms: u64,
    pub finished_ms: Option<u64>,
    /// `None`: the run has not finished (or its process died).
    pub outcome: Option<RunOutcome>,
    pub summary: RunSummary,
    /// The seq of the last event of the run.
    pub last_seq: u64,
    /// How many objects the run moved (`ResourceMoved`: `moved` blocks, `state mv`) and
    /// forgot (`ResourceForgotten`: `removed` blocks, `state rm`). (Checkpoints of format 4,
    /// which cannot know them, are skipped and rebuilt.)
    #[serde(default)]
    pub moved: u64,
    #[serde(default)]
    pub forgotten: u64,
    /// Where it ran (`RunContext`; empty for runs recorded without one). Last, with a default,
    /// so a checkpoint written before it (whose runs cannot have one) reads unchanged.
    #[serde(default)]
    pub context: RunContext,
}

impl Snapshot {
    pub fn new() -> Self {
        Snapshot::default()
    }

    /// A copy of everything but the resource instances (cheap next to them).
    pub(crate) fn clone_without_resources(&self) -> Snapshot {
        Snapshot {
            head: self.head,
            providers: self.providers.clone(),
            resources: Shared::default(),
            data: self.data.clone(),
            outputs: self.outputs.clone(),
            pending: self.pending.clone(),
            runs: self.runs.clone(),
            open_run: self.open_run,
            dependents: DepIndex::default(),
        }
    }

    /// True when the derived dependents index matches the objects (for tests).
    #[doc(hidden)]
    pub fn dependents_consistent(&self) -> bool {
        match &self.dependents.0 {
            None => true,
            Some(m) => DepIndex::build(&self.resources).0.as_ref() == Some(m),
        }
    }

    /// Replays events from an empty state.
    pub fn replay<'a>(events: impl IntoIterator<Item = &'a Event>) -> Snapshot {
        let mut s = Snapshot::new();
        for e in events {
            s.apply(e);
        }
        s
    }

    /// Applies one event.
    pub fn apply(&mut self, event: &Event) {
        self.apply_owned(event.clone());
    }

    /// Applies one event, consuming it (saves the clones on the hot path of the store).
    pub fn apply_owned(&mut self, event: Event) {
        self.head = event.seq;
        let (seq, time, run) = (event.seq, event.time_ms, event.run);
        if let Some(r) = self.run_mut(run) {
            r.last_seq = seq;
        }
        match event.body {
            EventBody::RunStarted {
                command,
                args,
                user,
                pid,
            } => {
                self.runs.push(RunRecord {
                    id: seq,
                    command,
                    args,
                    user,
                    pid,
                    started_ms: time,
                    finished_ms: None,
                    outcome: None,
                    summary: RunSummary::default(),
                    last_seq: seq,
                    moved: 0,
                    forgotten: 0,
                    context: RunContext::default(),
                });
                self.open_run = Some(seq);
            }
            EventBody::RunFinished { outcome, summary } => {
                if let Some(r) = self.run_mut(run) {
                    r.finished_ms = Some(time);
                    r.outcome = Some(outcome);
                    r.summary = summary;
                }
                if self.open_run == Some(run) {
                    self.open_run = None;
                }
            }
            EventBody::ProviderRegistered { instance } => {
                self.providers.insert(instance.addr.clone(), instance);
            }
            EventBody::ProviderUpdated { addr, id, config } => {
                if let Some(p) = self.providers.get_mut(&addr) {
                    if p.id == id {
                        p.config = config;
                    }
                }
            }
            EventBody::ProviderRemoved { addr, id } => {
                if self.providers.get(&addr).is_some_and(|p| p.id == id) {
                    self.providers.remove(&addr);
                }
            }
            EventBody::ResourceRead { addr, attrs, meta } => {
                if let Some(obj) = self
                    .resources
                    .get_mut(&addr)
                    .and_then(|r| r.current.as_mut())
                {
                    obj.attrs = attrs;
                    if let Some(meta) = meta {
                        obj.meta = meta;
                    }
                }
            }
            EventBody::ResourceGone { addr } => self.set_object(&addr, None, None),
            EventBody::ObjectDeposed { addr, key } => {
                if let Some(r) = self.resources.get_mut(&addr) {
                    if let Some(obj) = r.current.take() {
                        if let Some(old) = r.deposed.insert(key, obj) {
                            self.dependents.sub(&old.deps);
                        }
                    }
                }
            }
            EventBody::ObjectRestored { addr, key } => {
                if let Some(r) = self.resources.get_mut(&addr) {
                    if r.current.is_none() {
                        r.current = r.deposed.remove(&key);
                    }
                }
            }
            EventBody::OperationStarted {
                addr,
                deposed,
                action,
                token,
                provider,
                prior,
            } => {
                self.pending.insert(
                    seq,
                    PendingOp {
                        op: seq,
                        run,
                        addr,
                        deposed,
                        action,
                        token,
                        provider,
                        prior,
                    },
                );
            }
            EventBody::OperationSucceeded { op, object }
            | EventBody::OperationFailed { op, object, .. }
            | EventBody::PendingResolved { op, object, .. } => {
                if let Some(p) = self.pending.remove(&op) {
                    self.set_object(&p.addr, p.deposed.as_deref(), object);
                }
            }
            EventBody::DataRead { addr, object } => {
                self.data.insert(addr, object);
            }
            EventBody::DataDropped { addr } => {
                self.data.remove(&addr);
            }
            EventBody::OutputsSet { outputs } => self.outputs = outputs,
            EventBody::ResourceForgotten { addr } => {
                if let Some(r) = self.run_mut(run) {
                    r.forgotten += 1;
                }
                self.data.remove(&addr);
                if let Some(r) = self.resources.remove(&addr) {
                    for o in r.objects() {
                        self.dependents.sub(&o.deps);
                    }
                    self.drop_dependency(&addr);
                }
            }
            EventBody::ResourceMoved { from, to } => {
                if let Some(r) = self.run_mut(run) {
                    r.moved += 1;
                }
                if let Some(d) = self.data.remove(&from) {
                    self.data.insert(to.clone(), d);
                }
                if let Some(r) = self.resources.remove(&from) {
                    if let Some(old) = self.resources.insert(to.clone(), r) {
                        // The destination's old objects are replaced: nothing depends on them.
                        for o in old.objects() {
                            self.dependents.sub(&o.deps);
                        }
                        self.drop_dependency(&to);
                    }
                    self.rename_dependency(&from, &to);
                }
                for p in self.pending.values_mut() {
                    if p.addr == from {
                        p.addr = to.clone();
                    }
                }
            }
            EventBody::ResourceRehomed { addr, provider } => {
                if let Some(obj) = self
                    .resources
                    .get_mut(&addr)
                    .and_then(|r| r.current.as_mut())
                {
                    obj.provider = provider;
                }
            }
            EventBody::DependenciesUpdated { addr, deps } => {
                if let Some(obj) = self
                    .resources
                    .get_mut(&addr)
                    .and_then(|r| r.current.as_mut())
                {
                    self.dependents.sub(&obj.deps);
                    self.dependents.add(&deps);
                    obj.deps = deps;
                }
            }
            EventBody::StateImported {
                providers,
                resources,
                ..
            } => {
                for p in providers {
                    self.providers.insert(p.addr.clone(), p);
                }
                for (addr, obj) in resources {
                    self.dependents.add(&obj.deps);
                    if let Some(old) = self.resources.entry(addr).or_default().current.replace(obj)
                    {
                        self.dependents.sub(&old.deps);
                    }
                }
            }
            // Records of what a run planned and why it failed: nothing in the state changes.
            EventBody::RunPlanned { .. } | EventBody::RunDiagnostics { .. } => {}
            EventBody::ResourceTainted { addr } => self.set_tainted(&addr, true),
            EventBody::ResourceUntainted { addr } => self.set_tainted(&addr, false),
            EventBody::ProviderReplaced { from, to, .. } => self.replace_package(&from, &to),
            EventBody::RunContext(context) => {
                if let Some(r) = self.run_mut(run) {
                    r.context = context;
                }
            }
        }
    }

    /// Marks (or unmarks) the current object of `addr` tainted; nothing when there is none.
    fn set_tainted(&mut self, addr: &ResourceInstanceAddr, tainted: bool) {
        if let Some(o) = self
            .resources
            .get_mut(addr)
            .and_then(|i| i.current.as_mut())
        {
            o.tainted = tainted;
        }
    }

    /// Every provider instance of package `from`, and every object managed through one, now
    /// of package `to` (`state replace-provider`).
    fn replace_package(&mut self, from: &str, to: &str) {
        let moved: Vec<ProviderAddr> = self
            .providers
            .keys()
            .filter(|a| a.package == from)
            .cloned()
            .collect();
        for old in moved {
            if let Some(mut inst) = self.providers.remove(&old) {
                inst.addr.package = to.to_string();
                self.providers.insert(inst.addr.clone(), inst);
            }
        }
        for r in self.resources.values_mut() {
            for obj in r.current.iter_mut().chain(r.deposed.values_mut()) {
                if obj.provider.addr.package == from {
                    obj.provider = obj.provider.with_package(to);
                }
            }
        }
        for d in self.data.values_mut() {
            if d.provider.addr.package == from {
                d.provider = d.provider.with_package(to);
            }
        }
    }

    fn run_mut(&mut self, id: u64) -> Option<&mut RunRecord> {
        // Runs are pushed in seq order, so the vector is sorted by id.
        let i = self.runs.binary_search_by_key(&id, |r| r.id).ok()?;
        self.runs.get_mut(i)
    }

    /// Sets (or, with `None`, removes) the current or a deposed object of an instance.
    fn set_object(
        &mut self,
        addr: &ResourceInstanceAddr,
        deposed: Option<&str>,
        object: Option<ResourceObject>,
    ) {
        if let Some(o) = &object {
            self.dependents.add(&o.deps);
        }
        let inst = self.resources.entry(addr.clone()).or_default();
        let old = match (deposed, object) {
            (None, o) => std::mem::replace(&mut inst.current, o),
            (Some(k), Some(o)) => inst.deposed.insert(k.to_string(), o),
            (Some(k), None) => inst.deposed.remove(k),
        };
        let empty = inst.is_empty();
        if let Some(old) = old {
            self.dependents.sub(&old.deps);
        }
        if empty {
            self.resources.remove(addr);
            self.drop_dependency(addr);
        }
    }

    /// Builds the dependents index if it is not yet: only a removal or a move asks it, so a
    /// snapshot that is only read (`state list`, a plan) never holds a copy of every
    /// dependency address (issue 31). Built from the objects as they are then, and kept up to
    /// date by every later change.
    fn index_dependents(&mut self) {
        if self.dependents.0.is_none() {
            self.dependents = DepIndex::build(&self.resources);
        }
    }

    fn drop_dependency(&mut self, gone: &ResourceInstanceAddr) {
        self.index_dependents();
        if !self.dependents.has_dependents(gone) {
            return;
        }
        let mut removed = 0;
        for r in self.resources.values_mut() {
            for obj in r.current.iter_mut().chain(r.deposed.values_mut()) {
                let before = obj.deps.len();
                obj.deps.retain(|d| d != gone);
                removed += (before - obj.deps.len()) as u32;
            }
        }
        self.dependents.sub_n(gone, removed);
    }

    fn rename_dependency(&mut self, from: &ResourceInstanceAddr, to: &ResourceInstanceAddr) {
        self.index_dependents();
        if !self.dependents.has_dependents(from) {
            return;
        }
        let mut changes = Vec::new();
        for r in self.resources.values_mut() {
            for obj in r.current.iter_mut().chain(r.deposed.values_mut()) {
                if obj.deps.contains(from) {
                    let mut deps: Vec<ResourceInstanceAddr> = Vec::with_capacity(obj.deps.len());
                    for d in &obj.deps {
                        let d = if d == from { to } else { d };
                        if !deps.contains(d) {
                            deps.push(d.clone());
                        }
                    }
                    changes.push(std::mem::replace(&mut obj.deps, deps.clone()));
                    changes.push(deps);
                }
            }
        }
        for pair in changes.chunks(2) {
            self.dependents.sub(&pair[0]);
            self.dependents.add(&pair[1]);
        }
    }

    // ---- Queries the engine and the CLI use. ----

    /// The managed instance at `addr`.
    pub fn resource(&self, addr: &ResourceInstanceAddr) -> Option<&ResourceInstance> {
        self.resources.get(addr)
    }

    /// The current object of the managed instance at `addr`.
    pub fn current(&self, addr: &ResourceInstanceAddr) -> Option<&ResourceObject> {
        self.resources.get(addr)?.current.as_ref()
    }

    /// Every managed instance address in state, in order.
    pub fn managed_addrs(&self) -> impl Iterator<Item = &ResourceInstanceAddr> {
        self.resources.keys()
    }

    /// The provider instance a reference names, if it is still registered.
    pub fn resolve_provider(&self, r: &ProviderRef) -> Option<&ProviderInstance> {
        self.providers.get(&r.addr).filter(|p| p.id == r.id)
    }

    /// The pending operations on one instance.
    pub fn pending_for(&self, addr: &ResourceInstanceAddr) -> Vec<&PendingOp> {
        self.pending.values().filter(|p| &p.addr == addr).collect()
    }

    /// The run with this id.
    pub(crate) fn run(&self, id: u64) -> Option<&RunRecord> {
        let i = self.runs.binary_search_by_key(&id, |r| r.id).ok()?;
        self.runs.get(i)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stored_value::StoredValue;

    /// The snapshot as compact text: one line per thing in state.
    fn render(s: &Snapshot) -> String {
        let mut out = vec![format!("head {} open_run {:?}", s.head, s.open_run)];
        let obj = |o: &ResourceObject| {
            let deps: Vec<_> = o.deps.iter().map(|d| d.to_string()).collect();
            format!(
                "{} deps={:?} by {}/{}{}{}",
                o.attrs.to_json(),
                deps,
                o.provider.addr,
                o.provider.id,
                o.create_token
                    .as_ref()
                    .map(|t| format!(" token={t}"))
                    .unwrap_or_default(),
                if o.tainted { " tainted" } else { "" }
            )
        };
        for p in s.providers.values() {
            out.push(format!("{} {} {}", p.addr, p.id, p.config.to_json()));
        }
        for (a, r) in &s.resources {
            if let Some(o) = &r.current {
                out.push(format!("{a}: {}", obj(o)));
            }
            for (k, o) in &r.deposed {
                out.push(format!("{a} deposed {k}: {}", obj(o)));
            }
        }
        for (a, d) in &s.data {
            out.push(format!("{a}: {} by {}", d.attrs.to_json(), d.provider.addr));
        }
        for (n, o) in &s.outputs {
            out.push(format!(
                "output {n} = {} sensitive={}",
                o.value.to_json(),
                o.sensitive
            ));
        }
        for p in s.pending.values() {
            out.push(format!(
                "pending {}: {} {}{} run {}",
                p.op,
                p.action,
                p.addr,
                p.deposed
                    .as_ref()
                    .map(|k| format!(" deposed {k}"))
                    .unwrap_or_default(),
                p.run
            ));
        }
        for r in &s.runs {
            out.push(format!(
                "run {} {} {:?} {:?} last {} +{} ~{} -{}",
                r.id,
                r.command,
                r.args,
                r.outcome,
                r.last_seq,
                r.summary.added,
                r.summary.changed,
                r.summary.destroyed
            ));
        }
        out.join("\n")
    }

    /// Folds `events` (numbered from 1, run 1 when one was started) and compares the result.
    fn check_fold(events: Vec<EventBody>, expected: &str) {
        let mut s = Snapshot::new();
        let mut run = 0;
        for (i, body) in events.into_iter().enumerate() {
            let seq = i as u64 + 1;
            if matches!(body, EventBody::RunStarted { .. }) {
                run = seq;
            }
            s.apply(&Event {
                seq,
                version: 1,
                time_ms: seq * 1000,
                run,
                body,
            });
        }
        assert!(s.dependents_consistent(), "dependents index out of date");
        let got = render(&s);
        assert_eq!(got, expected.trim(), "got:\n{got}");
    }

    fn a(s: &str) -> ResourceInstanceAddr {
        s.parse().unwrap()
    }
    fn pref() -> ProviderRef {
        ProviderRef::new("provider[\"sim\"]".parse().unwrap(), "p1".into())
    }
    fn attrs(id: &str) -> StoredValue {
        StoredValue::Object([("id".to_string(), StoredValue::String(id.into()))].into())
    }
    fn obj(id: &str, deps: &[&str]) -> ResourceObject {
        ResourceObject {
            attrs: attrs(id),
            deps: deps.iter().map(|d| a(d)).collect(),
            provider: pref(),
            create_token: Some(format!("t-{id}")),
            tainted: false,
            meta: Default::default(),
        }
    }
    fn started() -> EventBody {
        EventBody::RunStarted {
            command: "apply".into(),
            args: vec!["-auto-approve".into()],
            user: "me".into(),
            pid: 7,
        }
    }
    fn provider() -> EventBody {
        EventBody::ProviderRegistered {
            instance: ProviderInstance {
                addr: pref().addr.clone(),
                id: "p1".into(),
                config: StoredValue::Null,
                is_default: true,
            },
        }
    }
    fn op(addr: &str, action: OpAction, deposed: Option<&str>) -> EventBody {
        EventBody::OperationStarted {
            addr: a(addr),
            deposed: deposed.map(str::to_string),
            action,
            token: Some("tok".into()),
            provider: pref(),
            prior: None,
        }
    }
    fn ok(op: u64, object: Option<ResourceObject>) -> EventBody {
        EventBody::OperationSucceeded { op, object }
    }

    #[test]
    fn runs_open_and_finish() {
        check_fold(
            vec![
                started(),
                EventBody::RunFinished {
                    outcome: RunOutcome::Success,
                    summary: RunSummary {
                        added: 2,
                        ..Default::default()
                    },
                },
                started(),
            ],
            r#"
head 3 open_run Some(3)
run 1 apply ["-auto-approve"] Some(Success) last 2 +2 ~0 -0
run 3 apply ["-auto-approve"] None last 3 +0 ~0 -0
"#,
        );
    }

    /// A `RunContext` gives its run a place and changes nothing else: the state folded from a
    /// log with one is the state folded from the same log without it (old logs have none).
    #[test]
    fn a_run_context_places_its_run_and_changes_nothing_else() {
        let context = RunContext {
            host: Some("build-7".into()),
            git_commit: Some("0123456789abcdef0123456789abcdef01234567".into()),
            git_branch: Some("feature-x".into()),
            ci_job: Some("https://ci.example/job/1".into()),
        };
        let body = |with: bool| {
            let mut v = vec![started()];
            if with {
                v.push(EventBody::RunContext(context.clone()));
            }
            v.extend([
                provider(),
                op("sim_thing.a", OpAction::Create, None),
                // The op's seq: 3 without the context, 4 with it.
                ok(if with { 4 } else { 3 }, Some(obj("a", &[]))),
            ]);
            v
        };
        let fold = |bodies: Vec<EventBody>| {
            let mut s = Snapshot::new();
            for (i, body) in bodies.into_iter().enumerate() {
                let seq = i as u64 + 1;
                s.apply(&Event {
                    seq,
                    version: crate::event::CURRENT_VERSION,
                    time_ms: 1,
                    run: 1,
                    body,
                });
            }
            s
        };
        let (with, without) = (fold(body(true)), fold(body(false)));
        assert_eq!(with.runs[0].context, context);
        assert_eq!(without.runs[0].context, RunContext::default());
        assert_eq!(with.resources, without.resources);
        assert_eq!(with.providers, without.providers);
        assert_eq!(with.outputs, without.outputs);
        assert_eq!(with.pending, without.pending);
        assert_eq!(with.open_run, without.open_run);
        // A run record as a checkpoint written before the context existed holds it (rmp,
        // positional, without the last field) reads with an empty context.
        let mut old = rmp_serde::to_vec(&without.runs[0]).unwrap();
        // The record is an array of its fields: drop the last (the empty context) and make
        // the array's header (a fixarray) say one field fewer.
        let ctx_len = rmp_serde::to_vec(&RunContext::default()).unwrap().len();
        old.truncate(old.len() - ctx_len);
        old[0] -= 1;
        let read: RunRecord = rmp_serde::from_slice(&old).unwrap();
        assert_eq!(read, without.runs[0]);
    }

    #[test]
    fn providers_register_update_and_leave() {
        check_fold(
            vec![
                provider(),
                EventBody::ProviderUpdated {
                    addr: pref().addr.clone(),
                    id: "p1".into(),
                    config: attrs("c"),
                },
                // An update or removal naming another instance id changes nothing.
                EventBody::ProviderUpdated {
                    addr: pref().addr.clone(),
                    id: "old".into(),
                    config: StoredValue::Null,
                },
                EventBody::ProviderRemoved {
                    addr: pref().addr.clone(),
                    id: "old".into(),
                },
            ],
            r#"
head 4 open_run None
provider["sim"] p1 {"id":"c"}
"#,
        );
        check_fold(
            vec![
                provider(),
                EventBody::ProviderRemoved {
                    addr: pref().addr.clone(),
                    id: "p1".into(),
                },
            ],
            "head 2 open_run None",
        );
    }

    #[test]
    fn operations_are_pending_until_settled() {
        check_fold(
            vec![
                started(),
                provider(),
                op("sim_thing.a", OpAction::Create, None),
                ok(3, Some(obj("a", &[]))),
                op("sim_thing.b", OpAction::Create, None),
                op("sim_thing.c", OpAction::Create, None),
                EventBody::OperationFailed {
                    op: 6,
                    object: Some(ResourceObject {
                        tainted: true,
                        ..obj("c", &["sim_thing.a"])
                    }),
                    error: "boom".into(),
                },
                // An outcome for an op that is not pending changes nothing.
                ok(99, None),
            ],
            r#"
head 8 open_run Some(1)
provider["sim"] p1 null
sim_thing.a: {"id":"a"} deps=[] by provider["sim"]/p1 token=t-a
sim_thing.c: {"id":"c"} deps=["sim_thing.a"] by provider["sim"]/p1 token=t-c tainted
pending 5: create sim_thing.b run 1
run 1 apply ["-auto-approve"] None last 8 +0 ~0 -0
"#,
        );
    }

    #[test]
    fn refresh_reads_and_gone() {
        check_fold(
            vec![
                op("sim_thing.a", OpAction::Create, None),
                ok(1, Some(obj("a", &[]))),
                op("sim_thing.b", OpAction::Create, None),
                ok(3, Some(obj("b", &["sim_thing.a"]))),
                EventBody::ResourceRead {
                    addr: a("sim_thing.b"),
                    attrs: attrs("b2"),
                    meta: None,
                },
                // A read of an instance not in state does not add it.
                EventBody::ResourceRead {
                    addr: a("sim_thing.zz"),
                    attrs: attrs("zz"),
                    meta: None,
                },
                EventBody::ResourceGone {
                    addr: a("sim_thing.a"),
                },
            ],
            r#"
head 7 open_run None
sim_thing.b: {"id":"b2"} deps=[] by provider["sim"]/p1 token=t-b
"#,
        );
    }

    #[test]
    fn create_before_destroy_deposes_then_deletes() {
        check_fold(
            vec![
                op("sim_thing.a", OpAction::Create, None),
                ok(1, Some(obj("old", &[]))),
                EventBody::ObjectDeposed {
                    addr: a("sim_thing.a"),
                    key: "00000001".into(),
                },
                op("sim_thing.a", OpAction::Create, None),
                ok(4, Some(obj("new", &[]))),
                op("sim_thing.a", OpAction::Delete, Some("00000001")),
            ],
            r#"
head 6 open_run None
sim_thing.a: {"id":"new"} deps=[] by provider["sim"]/p1 token=t-new
sim_thing.a deposed 00000001: {"id":"old"} deps=[] by provider["sim"]/p1 token=t-old
pending 6: delete sim_thing.a deposed 00000001 run 0
"#,
        );
        check_fold(
            vec![
                op("sim_thing.a", OpAction::Create, None),
                ok(1, Some(obj("old", &[]))),
                EventBody::ObjectDeposed {
                    addr: a("sim_thing.a"),
                    key: "k".into(),
                },
                op("sim_thing.a", OpAction::Delete, Some("k")),
                ok(4, None),
            ],
            "head 5 open_run None",
        );
    }

    #[test]
    fn deleting_the_last_object_removes_the_instance_and_dependencies_on_it() {
        check_fold(
            vec![
                EventBody::StateImported {
                    source: "test".into(),
                    providers: vec![],
                    resources: vec![
                        (a("sim_thing.a"), obj("a", &[])),
                        (a("sim_thing.b"), obj("b", &["sim_thing.a"])),
                    ],
                },
                op("sim_thing.a", OpAction::Delete, None),
                ok(2, None),
            ],
            r#"
head 3 open_run None
sim_thing.b: {"id":"b"} deps=[] by provider["sim"]/p1 token=t-b
"#,
        );
    }

    /// `taint`/`untaint` mark the current object; `state replace-provider` moves provider
    /// instances and objects to the new package.
    #[test]
    fn taints_and_provider_replacements() {
        check_fold(
            vec![
                provider(),
                EventBody::StateImported {
                    source: "test".into(),
                    providers: vec![],
                    resources: vec![(a("sim_thing.a"), obj("a", &[]))],
                },
                EventBody::ResourceTainted {
                    addr: a("sim_thing.a"),
                },
                EventBody::ResourceTainted {
                    addr: a("sim_thing.gone"),
                },
                EventBody::ProviderReplaced {
                    from: "sim".into(),
                    to: "other".into(),
                    source: "hashicorp/sim -> acme/other".into(),
                },
            ],
            r#"
head 5 open_run None
provider["other"] p1 null
sim_thing.a: {"id":"a"} deps=[] by provider["other"]/p1 token=t-a tainted
"#,
        );
        check_fold(
            vec![
                EventBody::StateImported {
                    source: "test".into(),
                    providers: vec![],
                    resources: vec![(a("sim_thing.a"), obj("a", &[]))],
                },
                EventBody::ResourceTainted {
                    addr: a("sim_thing.a"),
                },
                EventBody::ResourceUntainted {
                    addr: a("sim_thing.a"),
                },
            ],
            r#"
head 3 open_run None
sim_thing.a: {"id":"a"} deps=[] by provider["sim"]/p1 token=t-a
"#,
        );
    }

    #[test]
    fn pending_ops_resolve() {
        check_fold(
            vec![
                op("sim_thing.a", OpAction::Create, None),
                EventBody::PendingResolved {
                    op: 1,
                    object: Some(obj("found", &[])),
                    how: "adopted".into(),
                },
                op("sim_thing.b", OpAction::Create, None),
                EventBody::PendingResolved {
                    op: 3,
                    object: None,
                    how: "dropped".into(),
                },
            ],
            r#"
head 4 open_run None
sim_thing.a: {"id":"found"} deps=[] by provider["sim"]/p1 token=t-found
"#,
        );
    }

    #[test]
    fn data_and_outputs() {
        let data = |id: &str| DataObject {
            attrs: attrs(id),
            provider: pref(),
        };
        check_fold(
            vec![
                EventBody::DataRead {
                    addr: a("data.sim_x.a"),
                    object: data("1"),
                },
                EventBody::DataRead {
                    addr: a("data.sim_x.b"),
                    object: data("2"),
                },
                EventBody::DataRead {
                    addr: a("data.sim_x.a"),
                    object: data("3"),
                },
                EventBody::DataDropped {
                    addr: a("data.sim_x.b"),
                },
                EventBody::OutputsSet {
                    outputs: [(
                        "x".to_string(),
                        OutputValue {
                            value: attrs("o"),
                            sensitive: false,
                        },
                    )]
                    .into(),
                },
                EventBody::OutputsSet {
                    outputs: [(
                        "y".to_string(),
                        OutputValue {
                            value: StoredValue::Bool(true),
                            sensitive: true,
                        },
                    )]
                    .into(),
                },
            ],
            r#"
head 6 open_run None
data.sim_x.a: {"id":"3"} by provider["sim"]
output y = true sensitive=true
"#,
        );
    }

    #[test]
    fn state_rm_and_mv() {
        let import = EventBody::StateImported {
            source: "test".into(),
            providers: vec![],
            resources: vec![
                (a("sim_thing.a"), obj("a", &[])),
                (a("sim_thing.b"), obj("b", &["sim_thing.a"])),
                (a("sim_thing.c"), obj("c", &["sim_thing.b"])),
            ],
        };
        check_fold(
            vec![
                import.clone(),
                EventBody::ResourceMoved {
                    from: a("sim_thing.a"),
                    to: a("module.m.sim_thing.a[0]"),
                },
                EventBody::ResourceForgotten {
                    addr: a("sim_thing.c"),
                },
            ],
            r#"
head 3 open_run None
sim_thing.b: {"id":"b"} deps=["module.m.sim_thing.a[0]"] by provider["sim"]/p1 token=t-b
module.m.sim_thing.a[0]: {"id":"a"} deps=[] by provider["sim"]/p1 token=t-a
"#,
        );
        check_fold(
            vec![
                import,
                EventBody::ResourceForgotten {
                    addr: a("sim_thing.b"),
                },
                EventBody::DataRead {
                    addr: a("data.sim_x.d"),
                    object: DataObject {
                        attrs: attrs("d"),
                        provider: pref(),
                    },
                },
                EventBody::ResourceMoved {
                    from: a("data.sim_x.d"),
                    to: a("data.sim_x.e"),
                },
            ],
            r#"
head 4 open_run None
sim_thing.a: {"id":"a"} deps=[] by provider["sim"]/p1 token=t-a
sim_thing.c: {"id":"c"} deps=[] by provider["sim"]/p1 token=t-c
data.sim_x.e: {"id":"d"} by provider["sim"]
"#,
        );
    }

    #[test]
    fn queries() {
        let mut s = Snapshot::new();
        for (i, body) in [
            provider(),
            op("sim_thing.a[0]", OpAction::Create, None),
            ok(2, Some(obj("a", &[]))),
            op("sim_thing.a[1]", OpAction::Create, None),
        ]
        .into_iter()
        .enumerate()
        {
            s.apply_owned(Event {
                seq: i as u64 + 1,
                version: 1,
                time_ms: 0,
                run: 0,
                body,
            });
        }
        let a0 = a("sim_thing.a[0]");
        assert_eq!(s.current(&a0).map(|o| o.attrs.clone()), Some(attrs("a")));
        assert_eq!(s.managed_addrs().collect::<Vec<_>>(), vec![&a0]);
        assert_eq!(s.pending_for(&a("sim_thing.a[1]")).len(), 1);
        assert!(s.resolve_provider(&pref()).is_some());
    }
}
