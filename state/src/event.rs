//! Events: the versioned, append-only records of the state log, and how old versions are read.
//!
//! Every record is an [`Event`] encoded with rmp-serde using *named* fields
//! (`rmp_serde::to_vec_named`), so adding an optional field later does not break old readers
//! more than it must. Each record carries its schema `version`. Records are never rewritten: a
//! record written by an older Cairn is upgraded *in memory* when it is read ([`decode`]), one
//! version step at a time.
//!
//! Version history:
//! - **v0** — the prototype format: the timestamp was in whole seconds (`time`), and
//!   `RunStarted` carried neither the user nor the pid. Upgrading multiplies the time by 1000
//!   and records the user as `"unknown"` and the pid as 0.
//! - **v1** — timestamps in milliseconds, `RunStarted` with user and pid.
//! - **v2** — the current format (this file's types): v1 plus two kinds of record,
//!   `RunPlanned` (what an `apply`/`destroy` planned, with why, deferred reads with their causal
//!   chain) and `RunDiagnostics` (a failed run's errors with their configuration locations).
//!   Every v1 record is a v2 record as it stands, so v1 records are read unchanged; a Cairn
//!   that reads only v1 refuses v2 records as too new (upgrade Cairn) instead of misreading
//!   them.
//! - **v3** — v2 plus `DependenciesUpdated` (an unchanged object's new dependencies). Every v2
//!   record is a v3 record as it stands. Later, still v3: `PlanRecord::graph` (the plan's dependency graph), an optional field: a
//!   `RunPlanned` written before it reads with no graph (a reader falls back to the
//!   configuration it has), and a Cairn that predates it skips the field.
//! - **v4** — v3 plus `ResourceTainted` / `ResourceUntainted` (`cairn taint` / `untaint`) and
//!   `ProviderReplaced` (`cairn state replace-provider`). Every v3 record is a v4 record as it
//!   stands; a Cairn that reads only v3 refuses v4 records as too new.
//! - **v5** — v4 plus `RunContext` (where a run ran: host, git commit and branch, CI job),
//!   recorded right after a command's `RunStarted`. Every v4 record is a v5 record as it
//!   stands, and a run recorded before has no context (it changes nothing in the state); a
//!   Cairn that reads only v4 refuses v5 records as too new instead of calling them damaged.

use crate::addr::{ProviderAddr, ResourceInstanceAddr};
use crate::stored_value::StoredValue;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;

/// The version [`encode`] writes.
pub const CURRENT_VERSION: u32 = 5;

/// One record of the log.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Event {
    /// Position in the log: contiguous, gap-free, starting at 1.
    pub seq: u64,
    /// Schema version of the record as it was written (after upgrade: [`CURRENT_VERSION`]).
    pub version: u32,
    /// Unix time in milliseconds.
    pub time_ms: u64,
    /// The seq of the `RunStarted` of the run this event belongs to (0: outside any run).
    pub run: u64,
    pub body: EventBody,
}

/// Which provider instance manages an object: its address and the instance's id (an id
/// distinguishes successive instances registered at the same address).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ProviderRef {
    pub addr: ProviderAddr,
    pub id: String,
}

/// A provider instance as state remembers it, with the configuration it was registered with.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProviderInstance {
    pub addr: ProviderAddr,
    pub id: String,
    pub config: StoredValue,
    /// True when the instance was conjured (not written in configuration): a provider with no
    /// alias in the root module, configured from stack configuration.
    pub is_default: bool,
}

impl ProviderInstance {
    pub fn reference(&self) -> ProviderRef {
        ProviderRef {
            addr: self.addr.clone(),
            id: self.id.clone(),
        }
    }
}

/// A managed resource object: what exists in the world for one instance (or one deposed
/// object of it).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResourceObject {
    pub attrs: StoredValue,
    /// Instances this object depended on when it was last written (for destroy ordering).
    pub deps: Vec<ResourceInstanceAddr>,
    pub provider: ProviderRef,
    /// The token the create call was made with (lets an interrupted create be found again).
    pub create_token: Option<String>,
    /// True when the object exists but its creation did not complete: the next plan replaces it.
    pub tainted: bool,
    /// What the provider keeps beside the attributes (absent in records before it existed).
    #[serde(default, skip_serializing_if = "ObjectMeta::is_empty")]
    pub meta: ObjectMeta,
}

/// What a provider keeps with an object besides its attributes, as Terraform's state does:
/// the schema version the attributes were written with (a plugin provider whose schema
/// version rose upgrades them with `UpgradeResourceState`) and the provider's private bytes
/// (returned by apply, read and import, passed back to the next read, plan and apply).
/// Built-in providers keep neither: the empty meta.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ObjectMeta {
    #[serde(default)]
    pub schema_version: u64,
    #[serde(default)]
    pub private: Vec<u8>,
}

impl ObjectMeta {
    pub fn is_empty(&self) -> bool {
        self.schema_version == 0 && self.private.is_empty()
    }
}

/// The result of reading a data resource.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DataObject {
    pub attrs: StoredValue,
    pub provider: ProviderRef,
}

/// A root module output.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutputValue {
    pub value: StoredValue,
    pub sensitive: bool,
}

/// What a world-changing operation does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum OpAction {
    Create,
    Update,
    Delete,
}

impl fmt::Display for OpAction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            OpAction::Create => "create",
            OpAction::Update => "update",
            OpAction::Delete => "delete",
        })
    }
}

/// How a run ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum RunOutcome {
    Success,
    Failed,
    Interrupted,
}

impl fmt::Display for RunOutcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RunOutcome::Success => "success",
            RunOutcome::Failed => "failed",
            RunOutcome::Interrupted => "interrupted",
        })
    }
}

/// Counts of what a run did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct RunSummary {
    pub added: u64,
    pub changed: u64,
    pub destroyed: u64,
    pub read: u64,
    pub errors: u64,
    /// Objects adopted by `import` blocks (absent in older records).
    #[serde(default)]
    pub imported: u64,
}

/// A planned action, as [`PlannedChange`] records it (no-ops are not recorded).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum PlannedAction {
    Create,
    /// A data source read deferred to apply.
    Read,
    Update,
    /// Replace: delete the old object, then create the new one.
    DeleteThenCreate,
    /// Replace with `create_before_destroy`.
    CreateThenDelete,
    Delete,
    /// `removed { lifecycle { destroy = false } }`: left out of the state, not destroyed.
    /// (Last, so that the records of older versions decode unchanged.)
    Forget,
}

impl PlannedAction {
    /// The word the UI and the plan JSON use: `create`, `read`, `update`, `replace`, `delete`.
    pub fn name(self) -> &'static str {
        match self {
            PlannedAction::Create => "create",
            PlannedAction::Read => "read",
            PlannedAction::Update => "update",
            PlannedAction::DeleteThenCreate | PlannedAction::CreateThenDelete => "replace",
            PlannedAction::Delete => "delete",
            PlannedAction::Forget => "forget",
        }
    }
}

/// Why a data read was deferred to apply, as the plan decided it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Deferral {
    /// `value` (a path in the data source's configuration, or its provider's) is unknown
    /// until apply; `chain` is where the unknown comes from, nearest first
    /// (`["local.k", "sim_thing.a.id"]`).
    ConfigUnknown { value: String, chain: Vec<String> },
    /// A managed resource it depends on (through `depends_on`, a reference, or indirectly
    /// through locals, variables and module inputs/outputs: `via`, nearest first) has a
    /// planned change.
    DependencyPending {
        dependency: ResourceInstanceAddr,
        action: PlannedAction,
        via: Vec<String>,
    },
}

/// One planned change of a [`PlanRecord`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlannedChange {
    pub addr: ResourceInstanceAddr,
    pub action: PlannedAction,
    /// Why, as the plan text says it (`because index 2 is out of range for count`), if it
    /// says why.
    #[serde(default)]
    pub reason: Option<String>,
    /// For a deferred read: why it was deferred, with the causal chain.
    #[serde(default)]
    pub deferral: Option<Deferral>,
    /// The change as the plan text draws it, sensitive values masked.
    #[serde(default)]
    pub diff: String,
}

/// The dependency graph of a plan's configuration, as the plan view draws it: every resource
/// and data source the configuration declares (static addresses: no instance keys) and which
/// reaches which through locals, variables, outputs and module calls.
///
/// Compact by design: each node once as text, each edge as two indices into `nodes`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanGraph {
    /// Static addresses (`sim_thing.a`, `module.net.data.sim_zone.z`), in address order.
    pub nodes: Vec<String>,
    /// `(a, b)`: `nodes[a]` depends on `nodes[b]`. Sorted, no duplicates.
    pub edges: Vec<(u32, u32)>,
}

impl PlanGraph {
    /// The edges as node names (`(from, to)`: `from` depends on `to`); an index out of range
    /// (a damaged record) is skipped.
    pub fn named_edges(&self) -> impl Iterator<Item = (&str, &str)> {
        self.edges.iter().filter_map(|&(a, b)| {
            Some((
                self.nodes.get(a as usize)?.as_str(),
                self.nodes.get(b as usize)?.as_str(),
            ))
        })
    }
}

/// What an `apply`/`destroy` run planned: the changes other than no-ops, in address order.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanRecord {
    /// `normal`, `destroy`, `read-only`.
    pub mode: String,
    /// The plan came from a saved plan file (`apply FILE`), not made by the run itself.
    pub saved: bool,
    /// A hash of the configuration files the plan was made from (SHA-256, hex): tells a reader
    /// whether the configuration it has is still the one planned.
    #[serde(default)]
    pub files_hash: String,
    pub changes: Vec<PlannedChange>,
    /// Root outputs the plan changes (name and action), sensitive or not: names only.
    #[serde(default)]
    pub outputs: Vec<(String, PlannedAction)>,
    /// The configuration's dependency graph as it was when the plan was made; `None` in
    /// records written before Cairn recorded it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub graph: Option<PlanGraph>,
}

/// How serious a recorded diagnostic is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Severity {
    Error,
    Warning,
}

/// A diagnostic as a run recorded it when it failed: where it was in the configuration then
/// (the files may have changed since).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordedDiagnostic {
    pub severity: Severity,
    pub summary: String,
    #[serde(default)]
    pub detail: String,
    /// `file:line:col` in the configuration, when the problem has a place there.
    #[serde(default)]
    pub location: Option<String>,
    /// The resource or provider address it belongs to, when it has one.
    #[serde(default)]
    pub address: Option<String>,
}

/// Where a run ran, as far as it could be told: the host, the git commit and branch of the
/// working directory (when it is inside a checkout), and the CI job (when the usual CI
/// variables are set). Every field is optional: what could not be told is absent.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct RunContext {
    #[serde(default)]
    pub host: Option<String>,
    /// The full hash of `HEAD`.
    #[serde(default)]
    pub git_commit: Option<String>,
    /// The branch checked out (absent on a detached `HEAD`).
    #[serde(default)]
    pub git_branch: Option<String>,
    /// The address of the CI job or build.
    #[serde(default)]
    pub ci_job: Option<String>,
}

impl RunContext {
    /// Nothing could be told.
    pub fn is_empty(&self) -> bool {
        self == &RunContext::default()
    }
}

/// What happened. See `snapshot.rs` for what each one does to the state.
// Events are built once and moved into the log; boxing the large variants would only make
// every producer and matcher noisier.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum EventBody {
    RunStarted {
        command: String,
        args: Vec<String>,
        user: String,
        pid: u32,
    },
    RunFinished {
        outcome: RunOutcome,
        summary: RunSummary,
    },
    ProviderRegistered {
        instance: ProviderInstance,
    },
    ProviderUpdated {
        addr: ProviderAddr,
        id: String,
        config: StoredValue,
    },
    ProviderRemoved {
        addr: ProviderAddr,
        id: String,
    },
    /// A refresh result: new attributes; dependencies, provider and token are kept.
    ResourceRead {
        addr: ResourceInstanceAddr,
        attrs: StoredValue,
        /// The provider's new meta for the object; `None` keeps the one it had (records from
        /// before meta existed, providers that keep none).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        meta: Option<ObjectMeta>,
    },
    /// Refresh found the object gone: the current object leaves state.
    ResourceGone {
        addr: ResourceInstanceAddr,
    },
    /// create_before_destroy: the current object becomes `deposed[key]`.
    ObjectDeposed {
        addr: ResourceInstanceAddr,
        key: String,
    },
    /// create_before_destroy whose create left no object: `deposed[key]` is current again
    /// (as Terraform restores it), so the next plan replaces it instead of creating beside it.
    ObjectRestored {
        addr: ResourceInstanceAddr,
        key: String,
    },
    /// Recorded (and committed) before a provider call that changes the world.
    OperationStarted {
        addr: ResourceInstanceAddr,
        /// The deposed object acted on, if not the current one.
        deposed: Option<String>,
        action: OpAction,
        token: Option<String>,
        provider: ProviderRef,
        /// The object before the operation.
        prior: Option<ResourceObject>,
    },
    OperationSucceeded {
        /// The seq of its `OperationStarted`.
        op: u64,
        /// The object now; `None`: the object is gone.
        object: Option<ResourceObject>,
    },
    OperationFailed {
        op: u64,
        /// What exists now, e.g. a partial create (tainted).
        object: Option<ResourceObject>,
        error: String,
    },
    DataRead {
        addr: ResourceInstanceAddr,
        object: DataObject,
    },
    DataDropped {
        addr: ResourceInstanceAddr,
    },
    /// The whole set of root outputs.
    OutputsSet {
        outputs: BTreeMap<String, OutputValue>,
    },
    /// `state rm`.
    ResourceForgotten {
        addr: ResourceInstanceAddr,
    },
    /// `state mv`.
    ResourceMoved {
        from: ResourceInstanceAddr,
        to: ResourceInstanceAddr,
    },
    /// A managed object now managed through another provider instance whose configuration
    /// equals the old one's: it moves without replacement (nothing in the world changes).
    ResourceRehomed {
        addr: ResourceInstanceAddr,
        provider: ProviderRef,
    },
    /// An unchanged (no-op) object whose dependencies changed in the configuration: state
    /// records the new ones, as Terraform rewrites them at every apply, so a later destroy
    /// orders its delete after what it depends on now.
    DependenciesUpdated {
        addr: ResourceInstanceAddr,
        deps: Vec<ResourceInstanceAddr>,
    },
    /// A pending operation resolved by a later run (adopted, dropped, refreshed).
    PendingResolved {
        op: u64,
        object: Option<ResourceObject>,
        how: String,
    },
    StateImported {
        source: String,
        providers: Vec<ProviderInstance>,
        resources: Vec<(ResourceInstanceAddr, ResourceObject)>,
    },
    /// What the open run planned, recorded as soon as it has its plan (before anything is
    /// applied). Changes nothing in the state.
    RunPlanned {
        plan: PlanRecord,
    },
    /// The diagnostics of a run that did not succeed, recorded before its `RunFinished`.
    /// Changes nothing in the state.
    RunDiagnostics {
        diagnostics: Vec<RecordedDiagnostic>,
    },
    /// `taint`: the current object is marked tainted, so the next plan replaces it.
    ResourceTainted {
        addr: ResourceInstanceAddr,
    },
    /// `untaint`: the current object is no longer tainted.
    ResourceUntainted {
        addr: ResourceInstanceAddr,
    },
    /// `state replace-provider`: every provider instance of package `from` (and every object
    /// managed through one) now belongs to package `to`; `source` is the provider source
    /// address the command named, for history.
    ProviderReplaced {
        from: String,
        to: String,
        source: String,
    },
    /// Where the open run ran (v5): recorded right after its `RunStarted`. Changes nothing in
    /// the state; the run's record keeps it for history.
    RunContext(RunContext),
}

impl EventBody {
    /// The variant's name, as `cairn log` shows it.
    pub fn kind(&self) -> &'static str {
        match self {
            EventBody::RunStarted { .. } => "RunStarted",
            EventBody::RunFinished { .. } => "RunFinished",
            EventBody::ProviderRegistered { .. } => "ProviderRegistered",
            EventBody::ProviderUpdated { .. } => "ProviderUpdated",
            EventBody::ProviderRemoved { .. } => "ProviderRemoved",
            EventBody::ResourceRead { .. } => "ResourceRead",
            EventBody::ResourceGone { .. } => "ResourceGone",
            EventBody::ObjectDeposed { .. } => "ObjectDeposed",
            EventBody::ObjectRestored { .. } => "ObjectRestored",
            EventBody::OperationStarted { .. } => "OperationStarted",
            EventBody::OperationSucceeded { .. } => "OperationSucceeded",
            EventBody::OperationFailed { .. } => "OperationFailed",
            EventBody::DataRead { .. } => "DataRead",
            EventBody::DataDropped { .. } => "DataDropped",
            EventBody::OutputsSet { .. } => "OutputsSet",
            EventBody::ResourceForgotten { .. } => "ResourceForgotten",
            EventBody::ResourceMoved { .. } => "ResourceMoved",
            EventBody::ResourceRehomed { .. } => "ResourceRehomed",
            EventBody::DependenciesUpdated { .. } => "DependenciesUpdated",
            EventBody::PendingResolved { .. } => "PendingResolved",
            EventBody::StateImported { .. } => "StateImported",
            EventBody::RunPlanned { .. } => "RunPlanned",
            EventBody::RunDiagnostics { .. } => "RunDiagnostics",
            EventBody::ResourceTainted { .. } => "ResourceTainted",
            EventBody::ResourceUntainted { .. } => "ResourceUntainted",
            EventBody::ProviderReplaced { .. } => "ProviderReplaced",
            EventBody::RunContext(_) => "RunContext",
        }
    }

    /// The operation this event settles, if it is an outcome.
    pub(crate) fn settles(&self) -> Option<u64> {
        match self {
            EventBody::OperationSucceeded { op, .. }
            | EventBody::OperationFailed { op, .. }
            | EventBody::PendingResolved { op, .. } => Some(*op),
            _ => None,
        }
    }
}

/// Why a record could not be read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum DecodeError {
    /// The bytes are not an event of any known version.
    Malformed(String),
    /// Written by a newer Cairn.
    TooNew(u32),
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecodeError::Malformed(m) => write!(f, "undecodable record: {m}"),
            DecodeError::TooNew(v) => write!(
                f,
                "record has schema version {v}, newer than this Cairn reads ({CURRENT_VERSION}); \
                 upgrade Cairn"
            ),
        }
    }
}

/// Encodes an event as it is stored (named fields).
pub fn encode(event: &Event) -> Vec<u8> {
    // Serializing these plain data types into a Vec cannot fail: every map key is a string and
    // no type has a fallible Serialize impl.
    rmp_serde::to_vec_named(event).unwrap_or_default()
}

/// Encodes an event into `out` (cleared first), as [`encode`] does: lets a writer reuse one
/// buffer for every record.
pub(crate) fn encode_into(event: &Event, out: &mut Vec<u8>) {
    out.clear();
    // As in `encode`: writing these types into a Vec cannot fail.
    if rmp_serde::encode::write_named(out, event).is_err() {
        out.clear();
    }
}

/// Decodes a stored record of any known version, upgrading it to the current one.
pub(crate) fn decode(bytes: &[u8]) -> Result<Event, DecodeError> {
    // The common case first: a current record decodes in one pass.
    let first = rmp_serde::from_slice::<Event>(bytes);
    if let Ok(e) = &first {
        // v1 to v4 records are v5 records as they stand (each version only added kinds of
        // record).
        if (1..=CURRENT_VERSION).contains(&e.version) {
            return first
                .map(|mut e| {
                    e.version = CURRENT_VERSION;
                    e
                })
                .map_err(|e| DecodeError::Malformed(e.to_string()));
        }
    }
    #[derive(Deserialize)]
    struct Header {
        version: u32,
    }
    let header: Header = match rmp_serde::from_slice(bytes) {
        Ok(h) => h,
        Err(e) => {
            let err = first.err().map(|e| e.to_string()).unwrap_or(e.to_string());
            return Err(DecodeError::Malformed(err));
        }
    };
    match header.version {
        0 => v0::decode(bytes).map(v0::upgrade),
        v if v > CURRENT_VERSION => Err(DecodeError::TooNew(v)),
        v => Err(DecodeError::Malformed(format!(
            "version {v} record does not match its schema: {}",
            first.err().map(|e| e.to_string()).unwrap_or_default()
        ))),
    }
}

/// The v0 format, kept only to read old records.
pub(crate) mod v0 {
    use super::{DecodeError, Event, EventBody};
    use serde::{Deserialize, Serialize};

    #[derive(Serialize, Deserialize)]
    pub(crate) struct EventV0 {
        pub(crate) seq: u64,
        pub(crate) version: u32,
        /// Unix time in seconds.
        pub(crate) time: u64,
        pub(crate) run: u64,
        pub(crate) body: BodyV0,
    }

    /// v0 bodies: `RunStarted` had no user or pid; every other variant is as in v1.
    #[derive(Serialize, Deserialize)]
    #[serde(untagged)]
    pub(crate) enum BodyV0 {
        RunStarted(RunStartedV0),
        Same(Box<EventBody>),
    }

    #[derive(Serialize, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub(crate) struct RunStartedV0 {
        #[serde(rename = "RunStarted")]
        pub(crate) run_started: RunStartedFieldsV0,
    }

    #[derive(Serialize, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub(crate) struct RunStartedFieldsV0 {
        pub(crate) command: String,
        pub(crate) args: Vec<String>,
    }

    pub(crate) fn decode(bytes: &[u8]) -> Result<EventV0, DecodeError> {
        rmp_serde::from_slice(bytes).map_err(|e| DecodeError::Malformed(format!("v0: {e}")))
    }

    pub(crate) fn upgrade(e: EventV0) -> Event {
        let body = match e.body {
            BodyV0::RunStarted(r) => EventBody::RunStarted {
                command: r.run_started.command,
                args: r.run_started.args,
                user: "unknown".into(),
                pid: 0,
            },
            BodyV0::Same(b) => *b,
        };
        Event {
            seq: e.seq,
            version: super::CURRENT_VERSION,
            time_ms: e.time.saturating_mul(1000),
            run: e.run,
            body,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Event {
        Event {
            seq: 3,
            version: CURRENT_VERSION,
            time_ms: 1_700_000_000_123,
            run: 1,
            body: EventBody::ResourceRead {
                addr: "sim_thing.a[0]".parse().unwrap(),
                attrs: StoredValue::Object(
                    [("id".to_string(), StoredValue::String("x".into()))].into(),
                ),
                meta: None,
            },
        }
    }

    #[test]
    fn current_records_round_trip() {
        let e = sample();
        assert_eq!(decode(&encode(&e)).unwrap(), e);
    }

    #[test]
    fn records_use_named_fields() {
        let bytes = encode(&sample());
        let text = String::from_utf8_lossy(&bytes);
        for field in [
            "seq",
            "version",
            "time_ms",
            "run",
            "body",
            "ResourceRead",
            "attrs",
        ] {
            assert!(text.contains(field), "{field} missing from {text:?}");
        }
    }

    #[test]
    fn v0_records_are_upgraded_on_read() {
        // A record as the prototype wrote it: seconds, and a RunStarted without user or pid.
        let old = v0::EventV0 {
            seq: 1,
            version: 0,
            time: 1_600_000_000,
            run: 1,
            body: v0::BodyV0::RunStarted(v0::RunStartedV0 {
                run_started: v0::RunStartedFieldsV0 {
                    command: "apply".into(),
                    args: vec!["-auto-approve".into()],
                },
            }),
        };
        let bytes = rmp_serde::to_vec_named(&old).unwrap();
        let e = decode(&bytes).unwrap();
        assert_eq!(
            e,
            Event {
                seq: 1,
                version: CURRENT_VERSION,
                time_ms: 1_600_000_000_000,
                run: 1,
                body: EventBody::RunStarted {
                    command: "apply".into(),
                    args: vec!["-auto-approve".into()],
                    user: "unknown".into(),
                    pid: 0,
                },
            }
        );
        // Every other v0 body is read as the v1 body of the same shape.
        let old = v0::EventV0 {
            seq: 2,
            version: 0,
            time: 5,
            run: 1,
            body: v0::BodyV0::Same(Box::new(sample().body)),
        };
        let e = decode(&rmp_serde::to_vec_named(&old).unwrap()).unwrap();
        assert_eq!(
            (e.time_ms, e.version, e.body),
            (5000, CURRENT_VERSION, sample().body)
        );
    }

    #[test]
    fn v1_and_v2_records_read_unchanged_and_the_newer_kinds_round_trip() {
        for version in [1, 2] {
            let mut old = sample();
            old.version = version;
            let e = decode(&encode(&old)).unwrap();
            assert_eq!((e.version, e.body), (CURRENT_VERSION, sample().body));
        }
        for body in [
            EventBody::DependenciesUpdated {
                addr: "sim_thing.b".parse().unwrap(),
                deps: vec!["sim_thing.a[\"k\"]".parse().unwrap()],
            },
            EventBody::RunPlanned {
                plan: PlanRecord {
                    mode: "normal".into(),
                    saved: false,
                    files_hash: "h".into(),
                    changes: vec![PlannedChange {
                        addr: "data.sim_lookup.l".parse().unwrap(),
                        action: PlannedAction::Read,
                        reason: Some("depends on sim_thing.a".into()),
                        deferral: Some(Deferral::DependencyPending {
                            dependency: "sim_thing.a".parse().unwrap(),
                            action: PlannedAction::Update,
                            via: vec!["local.k".into()],
                        }),
                        diff: "<= data ...".into(),
                    }],
                    outputs: vec![("o".into(), PlannedAction::Update)],
                    graph: Some(PlanGraph {
                        nodes: vec!["data.sim_lookup.l".into(), "sim_thing.a".into()],
                        edges: vec![(0, 1)],
                    }),
                },
            },
            EventBody::RunDiagnostics {
                diagnostics: vec![RecordedDiagnostic {
                    severity: Severity::Error,
                    summary: "Unsupported attribute".into(),
                    detail: "no such thing".into(),
                    location: Some("main.tf:3:9".into()),
                    address: None,
                }],
            },
        ] {
            let e = Event { body, ..sample() };
            assert_eq!(decode(&encode(&e)).unwrap(), e);
        }
    }

    /// A `RunContext` (v5) round-trips, empty fields and all; v4 records read unchanged.
    #[test]
    fn run_context_records_round_trip_and_v4_records_read() {
        for context in [
            RunContext::default(),
            RunContext {
                host: Some("h".into()),
                git_commit: Some("0123456789abcdef0123456789abcdef01234567".into()),
                git_branch: None,
                ci_job: Some("https://ci.example/1".into()),
            },
        ] {
            let e = Event {
                body: EventBody::RunContext(context),
                ..sample()
            };
            assert_eq!(decode(&encode(&e)).unwrap(), e);
        }
        let mut old = sample();
        old.version = 4;
        let e = decode(&encode(&old)).unwrap();
        assert_eq!((e.version, e.body), (CURRENT_VERSION, sample().body));
        // Fields a later Cairn leaves out read as absent.
        #[derive(Serialize)]
        enum Partial {
            RunContext { host: String },
        }
        #[derive(Serialize)]
        struct PartialEvent {
            seq: u64,
            version: u32,
            time_ms: u64,
            run: u64,
            body: Partial,
        }
        let bytes = rmp_serde::to_vec_named(&PartialEvent {
            seq: 2,
            version: CURRENT_VERSION,
            time_ms: 1,
            run: 1,
            body: Partial::RunContext { host: "h".into() },
        })
        .unwrap();
        assert_eq!(
            decode(&bytes).unwrap().body,
            EventBody::RunContext(RunContext {
                host: Some("h".into()),
                ..RunContext::default()
            })
        );
    }

    #[test]
    fn newer_and_garbage_records_are_refused() {
        let mut e = sample();
        e.version = 9;
        assert_eq!(decode(&encode(&e)), Err(DecodeError::TooNew(9)));
        assert!(matches!(
            decode(b"\xc1garbage"),
            Err(DecodeError::Malformed(_))
        ));
        let bytes = encode(&sample());
        assert!(decode(&bytes[..bytes.len() / 2]).is_err());
    }

    /// A `RunPlanned` written before plans recorded their graph decodes with no graph; one
    /// with a graph decodes as it is even for a reader whose `PlanRecord` lacks the field
    /// (serde skips the fields it does not know), so the field needs no version step.
    #[test]
    fn the_plan_graph_is_optional_in_records() {
        #[derive(Serialize, Deserialize, Debug, PartialEq)]
        struct OldRecord {
            mode: String,
            saved: bool,
            files_hash: String,
            changes: Vec<PlannedChange>,
            outputs: Vec<(String, PlannedAction)>,
        }
        #[derive(Serialize, Deserialize, Debug, PartialEq)]
        enum OldBody {
            RunPlanned { plan: OldRecord },
        }
        #[derive(Serialize, Deserialize, Debug, PartialEq)]
        struct OldEvent {
            seq: u64,
            version: u32,
            time_ms: u64,
            run: u64,
            body: OldBody,
        }
        let old = OldEvent {
            seq: 1,
            version: CURRENT_VERSION,
            time_ms: 1,
            run: 1,
            body: OldBody::RunPlanned {
                plan: OldRecord {
                    mode: "normal".into(),
                    saved: false,
                    files_hash: "h".into(),
                    changes: vec![],
                    outputs: vec![],
                },
            },
        };
        let e = decode(&rmp_serde::to_vec_named(&old).unwrap()).unwrap();
        let EventBody::RunPlanned { plan } = &e.body else {
            panic!("{e:?}")
        };
        assert_eq!(plan.graph, None);
        // A record with a graph, read by a Cairn that does not know the field.
        let new = Event {
            body: EventBody::RunPlanned {
                plan: PlanRecord {
                    graph: Some(PlanGraph {
                        nodes: vec!["a.b".into(), "a.c".into()],
                        edges: vec![(0, 1)],
                    }),
                    ..plan.clone()
                },
            },
            ..e
        };
        let read: OldEvent = rmp_serde::from_slice(&encode(&new)).unwrap();
        assert_eq!(read, old);
    }

    /// Records written before objects kept provider meta (no `meta` field) still decode, with
    /// the empty meta; records with meta keep it.
    #[test]
    fn object_meta_is_optional_in_records() {
        #[derive(Serialize)]
        struct OldObject {
            attrs: StoredValue,
            deps: Vec<ResourceInstanceAddr>,
            provider: ProviderRef,
            create_token: Option<String>,
            tainted: bool,
        }
        #[derive(Serialize)]
        enum OldBody {
            OperationSucceeded {
                op: u64,
                object: Option<OldObject>,
            },
            ResourceRead {
                addr: ResourceInstanceAddr,
                attrs: StoredValue,
            },
        }
        #[derive(Serialize)]
        struct OldEvent {
            seq: u64,
            version: u32,
            time_ms: u64,
            run: u64,
            body: OldBody,
        }
        let provider = ProviderRef {
            addr: "provider[\"sim\"]".parse().unwrap(),
            id: "p".into(),
        };
        let attrs = StoredValue::String("x".into());
        let old = |body| {
            rmp_serde::to_vec_named(&OldEvent {
                seq: 1,
                version: CURRENT_VERSION,
                time_ms: 1,
                run: 1,
                body,
            })
            .unwrap()
        };
        let e = decode(&old(OldBody::OperationSucceeded {
            op: 1,
            object: Some(OldObject {
                attrs: attrs.clone(),
                deps: vec![],
                provider: provider.clone(),
                create_token: None,
                tainted: false,
            }),
        }))
        .unwrap();
        let EventBody::OperationSucceeded {
            object: Some(obj), ..
        } = &e.body
        else {
            panic!("{e:?}")
        };
        assert_eq!(obj.meta, ObjectMeta::default());
        let e = decode(&old(OldBody::ResourceRead {
            addr: "sim_thing.a".parse().unwrap(),
            attrs: attrs.clone(),
        }))
        .unwrap();
        assert!(matches!(e.body, EventBody::ResourceRead { meta: None, .. }));
        // And with meta, both round-trip.
        let meta = ObjectMeta {
            schema_version: 3,
            private: b"\x00\xffprivate".to_vec(),
        };
        for body in [
            EventBody::OperationSucceeded {
                op: 1,
                object: Some(ResourceObject {
                    attrs: attrs.clone(),
                    deps: vec![],
                    provider: provider.clone(),
                    create_token: None,
                    tainted: false,
                    meta: meta.clone(),
                }),
            },
            EventBody::ResourceRead {
                addr: "sim_thing.a".parse().unwrap(),
                attrs: attrs.clone(),
                meta: Some(meta.clone()),
            },
        ] {
            let e = Event { body, ..sample() };
            assert_eq!(decode(&encode(&e)).unwrap(), e);
        }
    }
}
