//! Events: the versioned, append-only records of the state log, and how old versions are read.
//!
//! Every record is an [`Event`]. From v6 on it is written in a compact binary form
//! (`compact`: no field names, one byte per kind of record and of value, large records
//! zstd-compressed); v0 to v5 records were MessagePack with *named* fields
//! (`rmp_serde::to_vec_named`) and are still read as they are. Records are never rewritten: a
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
//! - **v6** — the same events as v5 in the compact form (`compact`; issue 31: the named form
//!   took about 1 KB per event on disk, most of it field and variant names repeated in every
//!   record). Its first two bytes read as MessagePack `[6]`, so a Cairn that reads only v5
//!   refuses it as too new. v5 and older records are read as before.

use crate::addr::{ProviderAddr, ResourceInstanceAddr};
use crate::stored_value::StoredValue;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;

/// The version [`encode`] writes.
pub const CURRENT_VERSION: u32 = 6;

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
/// distinguishes successive instances registered at the same address). Read through
/// `Deref` (`r.addr`, `r.id`); made with [`ProviderRef::new`].
///
/// Shared: every object of a state names one of a handful of provider instances, and each
/// held its own copy of the address (96 bytes) and the id (two strings on the heap), about
/// 150 bytes of every instance of a snapshot (issue 31). One copy of each is kept in the
/// process (interned when made or read) and each object holds a pointer to it.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ProviderRef(std::sync::Arc<ProviderRefData>);

/// What a [`ProviderRef`] names.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ProviderRefData {
    pub addr: ProviderAddr,
    pub id: String,
}

impl ProviderRef {
    /// The shared reference to provider instance `id` at `addr`.
    pub fn new(addr: ProviderAddr, id: String) -> ProviderRef {
        ProviderRef::shared(ProviderRefData { addr, id })
    }

    /// The same instance with its address's package replaced (a provider's source moved).
    pub fn with_package(&self, package: &str) -> ProviderRef {
        let mut addr = self.addr.clone();
        addr.package = package.to_string();
        ProviderRef::new(addr, self.id.clone())
    }

    fn shared(data: ProviderRefData) -> ProviderRef {
        use std::sync::{Arc, Mutex, OnceLock};
        static SHARED: OnceLock<Mutex<std::collections::HashSet<Arc<ProviderRefData>>>> =
            OnceLock::new();
        let mut shared = SHARED
            .get_or_init(Default::default)
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if let Some(a) = shared.get(&data) {
            return ProviderRef(a.clone());
        }
        let a = Arc::new(data);
        shared.insert(a.clone());
        ProviderRef(a)
    }
}

impl std::ops::Deref for ProviderRef {
    type Target = ProviderRefData;
    fn deref(&self) -> &ProviderRefData {
        &self.0
    }
}

impl std::fmt::Debug for ProviderRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProviderRef")
            .field("addr", &self.addr)
            .field("id", &self.id)
            .finish()
    }
}

impl Serialize for ProviderRef {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(s)
    }
}

impl<'de> Deserialize<'de> for ProviderRef {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<ProviderRef, D::Error> {
        ProviderRefData::deserialize(d).map(ProviderRef::shared)
    }
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
        ProviderRef::new(self.addr.clone(), self.id.clone())
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

/// Encodes an event as it is stored (the v6 compact form, [`compact`]).
pub fn encode(event: &Event) -> Vec<u8> {
    let mut out = Vec::new();
    encode_into(event, &mut out);
    out
}

/// Encodes an event into `out` (cleared first), as [`encode`] does: lets a writer reuse one
/// buffer for every record.
pub(crate) fn encode_into(event: &Event, out: &mut Vec<u8>) {
    compact::encode_into(event, out);
}

/// Encodes an event in the named MessagePack form of v1 to v5 (for tests of old records).
#[doc(hidden)]
pub fn encode_named(event: &Event) -> Vec<u8> {
    // Serializing these plain data types into a Vec cannot fail: every map key is a string and
    // no type has a fallible Serialize impl.
    rmp_serde::to_vec_named(event).unwrap_or_default()
}

/// Decodes a stored record of any known version, upgrading it to the current one.
pub(crate) fn decode(bytes: &[u8]) -> Result<Event, DecodeError> {
    if bytes.starts_with(&compact::MAGIC) {
        return compact::decode(bytes).map_err(DecodeError::Malformed);
    }
    // The common case first: a current record decodes in one pass.
    let first = rmp_serde::from_slice::<Event>(bytes);
    if let Ok(e) = &first {
        // v1 to v5 records read as v6 records as they stand (each version only added kinds
        // of record; v6 changed only how records are written).
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

/// Schema v6: the compact binary form of a record (`codec.rs`), written from v6 on.
///
/// A record starts with the two bytes `0x91 0x06`, which MessagePack reads as an array holding
/// the number 6: a Cairn that reads only v5 takes it for a record of version 6 and refuses it as
/// too new (upgrade Cairn) instead of calling it damaged. No older record starts so (they are
/// MessagePack maps). Then one byte says how the body is stored — [`PLAIN`], or [`ZSTD`]
/// (zstd-compressed, for large records such as a `RunPlanned` of many changes) — and the body:
/// `seq`, `time_ms`, `run` as varints, a tag byte per kind of body, and its fields in
/// declaration order. `RunPlanned` and `RunDiagnostics` keep the named MessagePack form of
/// their body inside it (their optional fields evolve by the serde rules as before).
pub(crate) mod compact {
    use super::*;
    use crate::codec::{
        put_bytes, put_str, put_token, put_uint, read_bytes, read_token, Code, Reader,
    };

    /// The first two bytes of a v6 record.
    pub(crate) const MAGIC: [u8; 2] = [0x91, 0x06];
    /// The body follows as it is.
    const PLAIN: u8 = 0;
    /// The body follows zstd-compressed, preceded by its length.
    const ZSTD: u8 = 1;
    /// Bodies at least this long are compressed (when that makes them shorter).
    const COMPRESS_FROM: usize = 4096;
    /// The most a compressed body may expand per byte, and the largest body (a damaged length
    /// cannot make a reader allocate more; a `RunPlanned` of 100,000 changes expands about
    /// twentyfold).
    const MAX_RATIO: u64 = 1024;
    const MAX_BODY: u64 = 1 << 32;

    pub(crate) fn encode_into(event: &Event, out: &mut Vec<u8>) {
        out.clear();
        out.extend_from_slice(&MAGIC);
        out.push(PLAIN);
        put_uint(out, event.seq);
        put_uint(out, event.time_ms);
        put_uint(out, event.run);
        event.body.put(out);
        let body = out.len() - 3;
        if body >= COMPRESS_FROM {
            if let Ok(z) = zstd::bulk::compress(&out[3..], 3) {
                if z.len() + 10 < body {
                    out.truncate(2);
                    out.push(ZSTD);
                    put_uint(out, body as u64);
                    out.extend_from_slice(&z);
                }
            }
        }
    }

    pub(crate) fn decode(bytes: &[u8]) -> Result<Event, String> {
        let mut r = Reader::new(bytes);
        if r.raw(2)? != MAGIC {
            return r.fail("not a v6 record");
        }
        let inflated;
        let body = match r.byte()? {
            PLAIN => &bytes[3..],
            ZSTD => {
                let n = r.uint()?;
                let packed = (bytes.len() - r.pos) as u64;
                if n > MAX_BODY || n > packed.saturating_mul(MAX_RATIO) {
                    return r.fail("impossible length");
                }
                inflated = zstd::bulk::decompress(&bytes[r.pos..], n as usize)
                    .map_err(|e| format!("the compressed body does not decompress: {e}"))?;
                if inflated.len() as u64 != n {
                    return Err("the compressed body has the wrong length".into());
                }
                &inflated[..]
            }
            _ => return r.fail("unknown body encoding"),
        };
        let mut r = Reader::new(body);
        let event = Event {
            seq: r.uint()?,
            version: CURRENT_VERSION,
            time_ms: r.uint()?,
            run: r.uint()?,
            body: EventBody::read(&mut r)?,
        };
        if !r.at_end() {
            return r.fail("stray bytes after the record");
        }
        Ok(event)
    }

    /// A field kept in its named MessagePack form.
    fn put_named<T: Serialize>(out: &mut Vec<u8>, v: &T) {
        // As in `encode`: writing these types into a Vec cannot fail.
        put_bytes(out, &rmp_serde::to_vec_named(v).unwrap_or_default());
    }

    fn read_named<T: for<'de> Deserialize<'de>>(r: &mut Reader<'_>) -> Result<T, String> {
        let n = r.len()?;
        let b = r.raw(n)?;
        rmp_serde::from_slice(b).map_err(|e| e.to_string())
    }

    macro_rules! byte_enum {
        ($t:ty, $what:literal, [$($v:path = $n:literal),* $(,)?]) => {
            impl Code for $t {
                fn put(&self, out: &mut Vec<u8>) {
                    out.push(match self { $($v => $n,)* });
                }
                fn read(r: &mut Reader<'_>) -> Result<Self, String> {
                    match r.byte()? {
                        $($n => Ok($v),)*
                        _ => r.fail(concat!("invalid ", $what)),
                    }
                }
            }
        };
    }

    byte_enum!(
        OpAction,
        "operation",
        [
            OpAction::Create = 0,
            OpAction::Update = 1,
            OpAction::Delete = 2,
        ]
    );
    byte_enum!(
        RunOutcome,
        "outcome",
        [
            RunOutcome::Success = 0,
            RunOutcome::Failed = 1,
            RunOutcome::Interrupted = 2,
        ]
    );

    impl Code for ProviderRef {
        fn put(&self, out: &mut Vec<u8>) {
            let ProviderRefData { addr, id } = &**self;
            addr.put(out);
            put_str(out, id);
        }
        /// Every object of a state names one of a few provider instances: this thread's
        /// last ones are kept by their encoded bytes, so reading one again is a comparison
        /// of bytes — no strings decoded, no hashing, no lock. (The encoding is prefix-free:
        /// bytes that begin with one reference's encoding decode to that reference.)
        fn read(r: &mut Reader<'_>) -> Result<Self, String> {
            const KEPT: usize = 8;
            thread_local! {
                static LAST: std::cell::RefCell<Vec<(Box<[u8]>, ProviderRef)>> =
                    const { std::cell::RefCell::new(Vec::new()) };
            }
            let start = r.pos;
            let rest = r.bytes.get(start..).unwrap_or_default();
            let hit = LAST.with_borrow(|last| {
                last.iter()
                    .find(|(bytes, _)| rest.starts_with(bytes))
                    .map(|(bytes, p)| (bytes.len(), p.clone()))
            });
            if let Some((len, p)) = hit {
                r.pos += len;
                return Ok(p);
            }
            let p = ProviderRef::new(ProviderAddr::read(r)?, String::read(r)?);
            let bytes: Box<[u8]> = r.bytes[start..r.pos].into();
            LAST.with_borrow_mut(|last| {
                if last.len() == KEPT {
                    last.remove(0);
                }
                last.push((bytes, p.clone()));
            });
            Ok(p)
        }
    }

    impl Code for ObjectMeta {
        fn put(&self, out: &mut Vec<u8>) {
            let ObjectMeta {
                schema_version,
                private,
            } = self;
            put_uint(out, *schema_version);
            put_bytes(out, private);
        }
        fn read(r: &mut Reader<'_>) -> Result<Self, String> {
            Ok(ObjectMeta {
                schema_version: r.uint()?,
                private: read_bytes(r)?,
            })
        }
    }

    impl Code for ResourceObject {
        fn put(&self, out: &mut Vec<u8>) {
            let ResourceObject {
                attrs,
                deps,
                provider,
                create_token,
                tainted,
                meta,
            } = self;
            attrs.put(out);
            deps.put(out);
            provider.put(out);
            put_token(out, create_token);
            tainted.put(out);
            meta.put(out);
        }
        fn read(r: &mut Reader<'_>) -> Result<Self, String> {
            Ok(ResourceObject {
                attrs: StoredValue::read(r)?,
                deps: Vec::read(r)?,
                provider: ProviderRef::read(r)?,
                create_token: read_token(r)?,
                tainted: bool::read(r)?,
                meta: ObjectMeta::read(r)?,
            })
        }
    }

    impl Code for ProviderInstance {
        fn put(&self, out: &mut Vec<u8>) {
            let ProviderInstance {
                addr,
                id,
                config,
                is_default,
            } = self;
            addr.put(out);
            put_str(out, id);
            config.put(out);
            is_default.put(out);
        }
        fn read(r: &mut Reader<'_>) -> Result<Self, String> {
            Ok(ProviderInstance {
                addr: ProviderAddr::read(r)?,
                id: String::read(r)?,
                config: StoredValue::read(r)?,
                is_default: bool::read(r)?,
            })
        }
    }

    impl Code for DataObject {
        fn put(&self, out: &mut Vec<u8>) {
            let DataObject { attrs, provider } = self;
            attrs.put(out);
            provider.put(out);
        }
        fn read(r: &mut Reader<'_>) -> Result<Self, String> {
            Ok(DataObject {
                attrs: StoredValue::read(r)?,
                provider: ProviderRef::read(r)?,
            })
        }
    }

    impl Code for OutputValue {
        fn put(&self, out: &mut Vec<u8>) {
            let OutputValue { value, sensitive } = self;
            value.put(out);
            sensitive.put(out);
        }
        fn read(r: &mut Reader<'_>) -> Result<Self, String> {
            Ok(OutputValue {
                value: StoredValue::read(r)?,
                sensitive: bool::read(r)?,
            })
        }
    }

    impl Code for RunSummary {
        fn put(&self, out: &mut Vec<u8>) {
            let RunSummary {
                added,
                changed,
                destroyed,
                read,
                errors,
                imported,
            } = self;
            for n in [added, changed, destroyed, read, errors, imported] {
                put_uint(out, *n);
            }
        }
        fn read(r: &mut Reader<'_>) -> Result<Self, String> {
            Ok(RunSummary {
                added: r.uint()?,
                changed: r.uint()?,
                destroyed: r.uint()?,
                read: r.uint()?,
                errors: r.uint()?,
                imported: r.uint()?,
            })
        }
    }

    impl Code for RunContext {
        fn put(&self, out: &mut Vec<u8>) {
            let RunContext {
                host,
                git_commit,
                git_branch,
                ci_job,
            } = self;
            for f in [host, git_commit, git_branch, ci_job] {
                f.put(out);
            }
        }
        fn read(r: &mut Reader<'_>) -> Result<Self, String> {
            Ok(RunContext {
                host: Option::read(r)?,
                git_commit: Option::read(r)?,
                git_branch: Option::read(r)?,
                ci_job: Option::read(r)?,
            })
        }
    }

    impl Code for EventBody {
        fn put(&self, out: &mut Vec<u8>) {
            match self {
                EventBody::RunStarted {
                    command,
                    args,
                    user,
                    pid,
                } => {
                    out.push(0);
                    put_str(out, command);
                    args.put(out);
                    put_str(out, user);
                    pid.put(out);
                }
                EventBody::RunFinished { outcome, summary } => {
                    out.push(1);
                    outcome.put(out);
                    summary.put(out);
                }
                EventBody::ProviderRegistered { instance } => {
                    out.push(2);
                    instance.put(out);
                }
                EventBody::ProviderUpdated { addr, id, config } => {
                    out.push(3);
                    addr.put(out);
                    put_str(out, id);
                    config.put(out);
                }
                EventBody::ProviderRemoved { addr, id } => {
                    out.push(4);
                    addr.put(out);
                    put_str(out, id);
                }
                EventBody::ResourceRead { addr, attrs, meta } => {
                    out.push(5);
                    addr.put(out);
                    attrs.put(out);
                    meta.put(out);
                }
                EventBody::ResourceGone { addr } => {
                    out.push(6);
                    addr.put(out);
                }
                EventBody::ObjectDeposed { addr, key } => {
                    out.push(7);
                    addr.put(out);
                    put_str(out, key);
                }
                EventBody::ObjectRestored { addr, key } => {
                    out.push(8);
                    addr.put(out);
                    put_str(out, key);
                }
                EventBody::OperationStarted {
                    addr,
                    deposed,
                    action,
                    token,
                    provider,
                    prior,
                } => {
                    out.push(9);
                    addr.put(out);
                    deposed.put(out);
                    action.put(out);
                    put_token(out, token);
                    provider.put(out);
                    prior.put(out);
                }
                EventBody::OperationSucceeded { op, object } => {
                    out.push(10);
                    op.put(out);
                    object.put(out);
                }
                EventBody::OperationFailed { op, object, error } => {
                    out.push(11);
                    op.put(out);
                    object.put(out);
                    put_str(out, error);
                }
                EventBody::DataRead { addr, object } => {
                    out.push(12);
                    addr.put(out);
                    object.put(out);
                }
                EventBody::DataDropped { addr } => {
                    out.push(13);
                    addr.put(out);
                }
                EventBody::OutputsSet { outputs } => {
                    out.push(14);
                    outputs.put(out);
                }
                EventBody::ResourceForgotten { addr } => {
                    out.push(15);
                    addr.put(out);
                }
                EventBody::ResourceMoved { from, to } => {
                    out.push(16);
                    from.put(out);
                    to.put(out);
                }
                EventBody::ResourceRehomed { addr, provider } => {
                    out.push(17);
                    addr.put(out);
                    provider.put(out);
                }
                EventBody::DependenciesUpdated { addr, deps } => {
                    out.push(18);
                    addr.put(out);
                    deps.put(out);
                }
                EventBody::PendingResolved { op, object, how } => {
                    out.push(19);
                    op.put(out);
                    object.put(out);
                    put_str(out, how);
                }
                EventBody::StateImported {
                    source,
                    providers,
                    resources,
                } => {
                    out.push(20);
                    put_str(out, source);
                    providers.put(out);
                    resources.put(out);
                }
                EventBody::RunPlanned { plan } => {
                    out.push(21);
                    put_named(out, plan);
                }
                EventBody::RunDiagnostics { diagnostics } => {
                    out.push(22);
                    put_named(out, diagnostics);
                }
                EventBody::ResourceTainted { addr } => {
                    out.push(23);
                    addr.put(out);
                }
                EventBody::ResourceUntainted { addr } => {
                    out.push(24);
                    addr.put(out);
                }
                EventBody::ProviderReplaced { from, to, source } => {
                    out.push(25);
                    put_str(out, from);
                    put_str(out, to);
                    put_str(out, source);
                }
                EventBody::RunContext(context) => {
                    out.push(26);
                    context.put(out);
                }
            }
        }

        fn read(r: &mut Reader<'_>) -> Result<Self, String> {
            Ok(match r.byte()? {
                0 => EventBody::RunStarted {
                    command: String::read(r)?,
                    args: Vec::read(r)?,
                    user: String::read(r)?,
                    pid: u32::read(r)?,
                },
                1 => EventBody::RunFinished {
                    outcome: RunOutcome::read(r)?,
                    summary: RunSummary::read(r)?,
                },
                2 => EventBody::ProviderRegistered {
                    instance: ProviderInstance::read(r)?,
                },
                3 => EventBody::ProviderUpdated {
                    addr: ProviderAddr::read(r)?,
                    id: String::read(r)?,
                    config: StoredValue::read(r)?,
                },
                4 => EventBody::ProviderRemoved {
                    addr: ProviderAddr::read(r)?,
                    id: String::read(r)?,
                },
                5 => EventBody::ResourceRead {
                    addr: ResourceInstanceAddr::read(r)?,
                    attrs: StoredValue::read(r)?,
                    meta: Option::read(r)?,
                },
                6 => EventBody::ResourceGone {
                    addr: ResourceInstanceAddr::read(r)?,
                },
                7 => EventBody::ObjectDeposed {
                    addr: ResourceInstanceAddr::read(r)?,
                    key: String::read(r)?,
                },
                8 => EventBody::ObjectRestored {
                    addr: ResourceInstanceAddr::read(r)?,
                    key: String::read(r)?,
                },
                9 => EventBody::OperationStarted {
                    addr: ResourceInstanceAddr::read(r)?,
                    deposed: Option::read(r)?,
                    action: OpAction::read(r)?,
                    token: read_token(r)?,
                    provider: ProviderRef::read(r)?,
                    prior: Option::read(r)?,
                },
                10 => EventBody::OperationSucceeded {
                    op: r.uint()?,
                    object: Option::read(r)?,
                },
                11 => EventBody::OperationFailed {
                    op: r.uint()?,
                    object: Option::read(r)?,
                    error: String::read(r)?,
                },
                12 => EventBody::DataRead {
                    addr: ResourceInstanceAddr::read(r)?,
                    object: DataObject::read(r)?,
                },
                13 => EventBody::DataDropped {
                    addr: ResourceInstanceAddr::read(r)?,
                },
                14 => EventBody::OutputsSet {
                    outputs: BTreeMap::read(r)?,
                },
                15 => EventBody::ResourceForgotten {
                    addr: ResourceInstanceAddr::read(r)?,
                },
                16 => EventBody::ResourceMoved {
                    from: ResourceInstanceAddr::read(r)?,
                    to: ResourceInstanceAddr::read(r)?,
                },
                17 => EventBody::ResourceRehomed {
                    addr: ResourceInstanceAddr::read(r)?,
                    provider: ProviderRef::read(r)?,
                },
                18 => EventBody::DependenciesUpdated {
                    addr: ResourceInstanceAddr::read(r)?,
                    deps: Vec::read(r)?,
                },
                19 => EventBody::PendingResolved {
                    op: r.uint()?,
                    object: Option::read(r)?,
                    how: String::read(r)?,
                },
                20 => EventBody::StateImported {
                    source: String::read(r)?,
                    providers: Vec::read(r)?,
                    resources: Vec::read(r)?,
                },
                21 => EventBody::RunPlanned {
                    plan: read_named(r)?,
                },
                22 => EventBody::RunDiagnostics {
                    diagnostics: read_named(r)?,
                },
                23 => EventBody::ResourceTainted {
                    addr: ResourceInstanceAddr::read(r)?,
                },
                24 => EventBody::ResourceUntainted {
                    addr: ResourceInstanceAddr::read(r)?,
                },
                25 => EventBody::ProviderReplaced {
                    from: String::read(r)?,
                    to: String::read(r)?,
                    source: String::read(r)?,
                },
                26 => EventBody::RunContext(RunContext::read(r)?),
                _ => return r.fail("unknown kind of record"),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// More provider references than the reader keeps, interleaved, two of them differing
    /// only in their id's last byte: each decodes to itself, shared with the process's copy.
    #[test]
    fn provider_refs_read_back_shared() {
        use crate::codec::{Code, Reader};
        let refs: Vec<ProviderRef> = (0..12)
            .map(|i| {
                ProviderRef::new(
                    ProviderAddr {
                        module: crate::addr::ModulePath(Vec::new()),
                        package: format!("example.com/p/p{}", i % 5),
                        alias: (i % 2 == 1).then(|| format!("a{i}")),
                        key: None,
                    },
                    format!("id-{i}"),
                )
            })
            .collect();
        let order: Vec<usize> = (0..60).map(|i| (i * 7) % 12).collect();
        let mut out = Vec::new();
        for &i in &order {
            refs[i].put(&mut out);
        }
        let mut r = Reader::new(&out);
        for &i in &order {
            let got = ProviderRef::read(&mut r).unwrap();
            assert_eq!(got, refs[i]);
            assert!(std::sync::Arc::ptr_eq(&got.0, &refs[i].0));
        }
        assert!(r.at_end());
        // A truncated reference is an error, not a match of a kept one.
        let mut one = Vec::new();
        refs[0].put(&mut one);
        let cut = &one[..one.len() - 1];
        assert!(ProviderRef::read(&mut Reader::new(cut)).is_err());
    }

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

    /// v6 records name no field; the named form of v1 to v5 still reads as the same event.
    #[test]
    fn records_are_compact_and_named_ones_still_read() {
        let compact = encode(&sample());
        let named = encode_named(&sample());
        assert!(compact.starts_with(&compact::MAGIC), "{compact:?}");
        assert!(compact.len() * 3 < named.len(), "{compact:?}");
        let text = String::from_utf8_lossy(&compact);
        assert!(
            !text.contains("attrs") && !text.contains("ResourceRead"),
            "{text}"
        );
        let mut old = sample();
        old.version = 5;
        assert_eq!(decode(&encode_named(&old)).unwrap(), sample());
        // A Cairn that reads only v5 sees a v6 record as a record of version 6, too new.
        #[derive(Deserialize)]
        struct Header {
            version: u32,
        }
        let header: Header = rmp_serde::from_slice(&compact).unwrap();
        assert_eq!(header.version, 6);
        let text = String::from_utf8_lossy(&named);
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

    /// Every kind of record round-trips in the compact form, a large one compressed, and
    /// damaged compact bytes are errors, never panics.
    #[test]
    fn every_kind_round_trips_in_the_compact_form() {
        let addr: ResourceInstanceAddr = "module.m[\"k\"].sim_thing.a[2]".parse().unwrap();
        let provider = ProviderRef::new(
            "provider[\"sim\"].by_region[\"us\"]".parse().unwrap(),
            "p1".into(),
        );
        let object = ResourceObject {
            attrs: StoredValue::Object(
                [
                    ("id".to_string(), StoredValue::String("i-1".into())),
                    ("n".to_string(), StoredValue::Number("-1.5".into())),
                    (
                        "s".to_string(),
                        StoredValue::Sensitive(Box::new(StoredValue::Bool(true))),
                    ),
                ]
                .into(),
            ),
            deps: vec!["sim_thing.b".parse().unwrap()],
            provider: provider.clone(),
            create_token: Some("tok".into()),
            tainted: true,
            meta: ObjectMeta {
                schema_version: 2,
                private: vec![0, 255, 7],
            },
        };
        let instance = ProviderInstance {
            addr: provider.addr.clone(),
            id: "p1".into(),
            config: StoredValue::Map([("r".to_string(), StoredValue::Null)].into()),
            is_default: true,
        };
        let bodies = vec![
            EventBody::RunStarted {
                command: "apply".into(),
                args: vec!["-auto-approve".into()],
                user: "u".into(),
                pid: 42,
            },
            EventBody::RunFinished {
                outcome: RunOutcome::Interrupted,
                summary: RunSummary {
                    added: 1,
                    changed: 2,
                    destroyed: 3,
                    read: 4,
                    errors: 5,
                    imported: 6,
                },
            },
            EventBody::ProviderRegistered {
                instance: instance.clone(),
            },
            EventBody::ProviderUpdated {
                addr: provider.addr.clone(),
                id: "p1".into(),
                config: StoredValue::Tuple(vec![StoredValue::Null]),
            },
            EventBody::ProviderRemoved {
                addr: provider.addr.clone(),
                id: "p1".into(),
            },
            EventBody::ResourceRead {
                addr: addr.clone(),
                attrs: StoredValue::List(vec![StoredValue::Set(vec![])]),
                meta: Some(ObjectMeta::default()),
            },
            EventBody::ResourceGone { addr: addr.clone() },
            EventBody::ObjectDeposed {
                addr: addr.clone(),
                key: "d1".into(),
            },
            EventBody::ObjectRestored {
                addr: addr.clone(),
                key: "d1".into(),
            },
            EventBody::OperationStarted {
                addr: addr.clone(),
                deposed: Some("d1".into()),
                action: OpAction::Update,
                token: Some("t".into()),
                provider: provider.clone(),
                prior: Some(object.clone()),
            },
            EventBody::OperationSucceeded {
                op: 300,
                object: Some(object.clone()),
            },
            EventBody::OperationFailed {
                op: 301,
                object: None,
                error: "boom".into(),
            },
            EventBody::DataRead {
                addr: "data.sim_zone.z".parse().unwrap(),
                object: DataObject {
                    attrs: StoredValue::Null,
                    provider: provider.clone(),
                },
            },
            EventBody::DataDropped {
                addr: "data.sim_zone.z".parse().unwrap(),
            },
            EventBody::OutputsSet {
                outputs: [(
                    "o".to_string(),
                    OutputValue {
                        value: StoredValue::String("v".into()),
                        sensitive: true,
                    },
                )]
                .into(),
            },
            EventBody::ResourceForgotten { addr: addr.clone() },
            EventBody::ResourceMoved {
                from: addr.clone(),
                to: "sim_thing.c[\"x\"]".parse().unwrap(),
            },
            EventBody::ResourceRehomed {
                addr: addr.clone(),
                provider: provider.clone(),
            },
            EventBody::DependenciesUpdated {
                addr: addr.clone(),
                deps: vec![],
            },
            EventBody::PendingResolved {
                op: 7,
                object: Some(object.clone()),
                how: "adopted".into(),
            },
            EventBody::StateImported {
                source: "terraform.tfstate".into(),
                providers: vec![instance],
                resources: vec![(addr.clone(), object)],
            },
            EventBody::RunDiagnostics {
                diagnostics: vec![RecordedDiagnostic {
                    severity: Severity::Warning,
                    summary: "s".into(),
                    detail: String::new(),
                    location: None,
                    address: Some("sim_thing.a".into()),
                }],
            },
            EventBody::ResourceTainted { addr: addr.clone() },
            EventBody::ResourceUntainted { addr: addr.clone() },
            EventBody::ProviderReplaced {
                from: "a/b".into(),
                to: "c/d".into(),
                source: "c/d".into(),
            },
            EventBody::RunContext(RunContext {
                host: Some("h".into()),
                ..RunContext::default()
            }),
        ];
        let mut big = PlanRecord {
            mode: "normal".into(),
            saved: false,
            files_hash: "h".into(),
            changes: vec![],
            outputs: vec![],
            graph: None,
        };
        for i in 0..2000 {
            big.changes.push(PlannedChange {
                addr: format!("terraform_data.r{i}").parse().unwrap(),
                action: PlannedAction::Create,
                reason: None,
                deferral: None,
                diff: format!("  + resource \"terraform_data\" \"r{i}\" {{ input = \"{i}\" }}"),
            });
        }
        for body in bodies
            .into_iter()
            .chain([EventBody::RunPlanned { plan: big }])
        {
            let e = Event {
                seq: 123_456,
                version: CURRENT_VERSION,
                time_ms: 1_700_000_000_123,
                run: 99,
                body,
            };
            let bytes = encode(&e);
            assert_eq!(decode(&bytes).unwrap(), e, "{}", e.body.kind());
            if e.body.kind() == "RunPlanned" {
                assert_eq!(bytes[2], 1, "a large record is compressed");
                assert!(bytes.len() * 5 < encode_named(&e).len(), "{}", bytes.len());
            }
            for cut in [3, bytes.len() / 2, bytes.len() - 1] {
                assert!(
                    decode(&bytes[..cut]).is_err(),
                    "{} cut at {cut}",
                    e.body.kind()
                );
            }
            let mut longer = bytes.clone();
            longer.push(0);
            if bytes[2] == 0 {
                assert!(decode(&longer).is_err(), "{}", e.body.kind());
            }
        }
        for garbage in [
            &[0x91, 0x06][..],
            &[0x91, 0x06, 9],
            &[0x91, 0x06, 1, 0xff, 0xff],
        ] {
            assert!(decode(garbage).is_err(), "{garbage:?}");
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
            let e = decode(&encode_named(&old)).unwrap();
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
        let e = decode(&encode_named(&old)).unwrap();
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
        assert_eq!(decode(&encode_named(&e)), Err(DecodeError::TooNew(9)));
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
        let read: OldEvent = rmp_serde::from_slice(&encode_named(&new)).unwrap();
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
        let provider = ProviderRef::new("provider[\"sim\"]".parse().unwrap(), "p".into());
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
