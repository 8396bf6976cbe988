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
//! it. This costs one pass over the state per removal, which is fine at the sizes state has.

use crate::addr::{Mode, ProviderAddr, ResourceAddr, ResourceInstanceAddr};
use crate::event::{
    DataObject, Event, EventBody, OpAction, OutputValue, ProviderInstance, ProviderRef,
    ResourceObject, RunOutcome, RunSummary,
};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The state after some prefix of the log.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Snapshot {
    /// The seq of the last event applied (0: empty log).
    pub head: u64,
    pub providers: BTreeMap<ProviderAddr, ProviderInstance>,
    /// Managed resource instances.
    pub resources: BTreeMap<ResourceInstanceAddr, ResourceInstance>,
    /// Data resource results.
    pub data: BTreeMap<ResourceInstanceAddr, DataObject>,
    pub outputs: BTreeMap<String, OutputValue>,
    /// Operations started and not yet settled, by the seq of their `OperationStarted`.
    pub pending: BTreeMap<u64, PendingOp>,
    /// Every run, in log order (for `cairn history`).
    pub runs: Vec<RunRecord>,
    /// The run started and not finished, if any (a crashed run stays open until the next one).
    pub open_run: Option<u64>,
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
    pub deposed: Option<String>,
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
}

impl Snapshot {
    pub fn new() -> Self {
        Snapshot::default()
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
            EventBody::ResourceRead { addr, attrs } => {
                if let Some(obj) = self
                    .resources
                    .get_mut(&addr)
                    .and_then(|r| r.current.as_mut())
                {
                    obj.attrs = attrs;
                }
            }
            EventBody::ResourceGone { addr } => self.set_object(&addr, None, None),
            EventBody::ObjectDeposed { addr, key } => {
                if let Some(r) = self.resources.get_mut(&addr) {
                    if let Some(obj) = r.current.take() {
                        r.deposed.insert(key, obj);
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
                self.data.remove(&addr);
                if self.resources.remove(&addr).is_some() {
                    self.drop_dependency(&addr);
                }
            }
            EventBody::ResourceMoved { from, to } => {
                if let Some(d) = self.data.remove(&from) {
                    self.data.insert(to.clone(), d);
                }
                if let Some(r) = self.resources.remove(&from) {
                    if self.resources.insert(to.clone(), r).is_some() {
                        // The destination's old objects are replaced: nothing depends on them.
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
            EventBody::StateImported {
                providers,
                resources,
                ..
            } => {
                for p in providers {
                    self.providers.insert(p.addr.clone(), p);
                }
                for (addr, obj) in resources {
                    self.resources.entry(addr).or_default().current = Some(obj);
                }
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
        let inst = self.resources.entry(addr.clone()).or_default();
        match (deposed, object) {
            (None, o) => inst.current = o,
            (Some(k), Some(o)) => {
                inst.deposed.insert(k.to_string(), o);
            }
            (Some(k), None) => {
                inst.deposed.remove(k);
            }
        }
        if inst.is_empty() {
            self.resources.remove(addr);
            self.drop_dependency(addr);
        }
    }

    fn objects_mut(&mut self) -> impl Iterator<Item = &mut ResourceObject> {
        self.resources
            .values_mut()
            .flat_map(|r| r.current.iter_mut().chain(r.deposed.values_mut()))
    }

    fn drop_dependency(&mut self, gone: &ResourceInstanceAddr) {
        for obj in self.objects_mut() {
            if obj.deps.contains(gone) {
                obj.deps.retain(|d| d != gone);
            }
        }
    }

    fn rename_dependency(&mut self, from: &ResourceInstanceAddr, to: &ResourceInstanceAddr) {
        for obj in self.objects_mut() {
            if obj.deps.contains(from) {
                let mut deps: Vec<_> = obj
                    .deps
                    .iter()
                    .map(|d| if d == from { to.clone() } else { d.clone() })
                    .collect();
                deps.dedup();
                obj.deps = deps;
            }
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

    /// The deposed objects of the managed instance at `addr`.
    pub fn deposed(
        &self,
        addr: &ResourceInstanceAddr,
    ) -> Option<&BTreeMap<String, ResourceObject>> {
        self.resources.get(addr).map(|r| &r.deposed)
    }

    /// The data result at `addr`.
    pub fn data_object(&self, addr: &ResourceInstanceAddr) -> Option<&DataObject> {
        self.data.get(addr)
    }

    /// Every managed instance address in state, in order.
    pub fn managed_addrs(&self) -> impl Iterator<Item = &ResourceInstanceAddr> {
        self.resources.keys()
    }

    /// Every data instance address in state, in order.
    pub fn data_addrs(&self) -> impl Iterator<Item = &ResourceInstanceAddr> {
        self.data.keys()
    }

    /// Every address in state (managed and data), sorted as `state list` prints them.
    pub fn all_addrs(&self) -> Vec<&ResourceInstanceAddr> {
        let mut v: Vec<_> = self.resources.keys().chain(self.data.keys()).collect();
        v.sort();
        v
    }

    /// The instances of one resource (`sim_thing.a` → `sim_thing.a[0]`, `sim_thing.a[1]`, …).
    pub fn instances_of(&self, resource: &ResourceAddr) -> Vec<&ResourceInstanceAddr> {
        let map_keys: Box<dyn Iterator<Item = &ResourceInstanceAddr>> = match resource.mode {
            Mode::Managed => Box::new(self.resources.keys()),
            Mode::Data => Box::new(self.data.keys()),
        };
        map_keys.filter(|a| &a.resource == resource).collect()
    }

    /// Every instance (managed or data) with an object managed by the provider at `addr`.
    pub fn instances_of_provider(&self, addr: &ProviderAddr) -> Vec<&ResourceInstanceAddr> {
        let managed = self
            .resources
            .iter()
            .filter(|(_, r)| r.objects().any(|o| &o.provider.addr == addr))
            .map(|(a, _)| a);
        let data = self
            .data
            .iter()
            .filter(|(_, d)| &d.provider.addr == addr)
            .map(|(a, _)| a);
        managed.chain(data).collect()
    }

    /// The provider instance registered at `addr`.
    pub fn provider(&self, addr: &ProviderAddr) -> Option<&ProviderInstance> {
        self.providers.get(addr)
    }

    /// The provider instance a reference names, if it is still registered.
    pub fn resolve_provider(&self, r: &ProviderRef) -> Option<&ProviderInstance> {
        self.providers.get(&r.addr).filter(|p| p.id == r.id)
    }

    /// The pending operations, oldest first.
    pub fn pending_ops(&self) -> impl Iterator<Item = &PendingOp> {
        self.pending.values()
    }

    /// The pending operations on one instance.
    pub fn pending_for(&self, addr: &ResourceInstanceAddr) -> Vec<&PendingOp> {
        self.pending.values().filter(|p| &p.addr == addr).collect()
    }

    /// The run with this id.
    pub fn run(&self, id: u64) -> Option<&RunRecord> {
        let i = self.runs.binary_search_by_key(&id, |r| r.id).ok()?;
        self.runs.get(i)
    }

    /// True when nothing is in state (no resources, data, outputs, providers or pending ops).
    pub fn is_empty(&self) -> bool {
        self.resources.is_empty()
            && self.data.is_empty()
            && self.outputs.is_empty()
            && self.providers.is_empty()
            && self.pending.is_empty()
    }
}
