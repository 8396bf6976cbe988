//! Cairn's durable vocabulary — addresses, stored values, events — and the event log.
//!
//! Nothing here knows of HCL or the graph. Only `sled_store.rs` talks to sled, only
//! `pg_store.rs` to PostgreSQL.
//!
//! - [`addr`]: every kind of address, parsed and printed: resources, instances, module paths,
//!   provider configurations (here, and re-exported at the crate root), provider source
//!   addresses ([`addr::provider_source`]), module sources ([`addr::module_source`]) and version
//!   constraints ([`addr::version`]).
//! - [`value`]: [`StoredValue`], the stored form of values (never unknown).
//! - [`event`]: the versioned events of the log and how old versions are upgraded on read.
//! - [`snapshot`]: the current state as a pure fold over events.
//! - [`log`]: the log core, written once: the [`EventLog`] trait and `LogCore`, which assigns
//!   sequence numbers and runs, encodes, folds into the snapshot and keeps checkpoints over
//!   any `Storage` (`storage.rs`: the primitive operations a backing store provides).
//! - `sled_store.rs` (sled, in the state directory) and [`pg_store`] (PostgreSQL, team
//!   state): the two stores; [`backend`]: which store a state directory names.
//! - [`store`]: [`Store`], the open log on whichever store; [`workspace`]: workspaces.
//! - [`check`]: the integrity check.
//! - [`tfstate`]: Terraform state (format version 4) export and import.
//!
//! # Invariants
//!
//! The integrity check ([`Store::check`]) reports each broken invariant by its number here.
//!
//! 1. Sequence numbers are contiguous from 1 to the head, every record decodes (old versions
//!    upgraded), and every record's `seq` is its key.
//! 2. Every event belongs to a run that started before it (or to none, run 0); a run start
//!    names itself; each `RunFinished` closes the open run, once.
//! 3. Every operation referenced by an outcome (`OperationSucceeded`, `OperationFailed`,
//!    `PendingResolved`) was started earlier in the log, and is settled at most once.
//! 4. No pending operation belongs to a run that finished cleanly (outcome `Success`).
//! 5. Every provider reference of a live object (current or deposed managed object, data
//!    result) resolves to a registered provider instance with the same id.
//! 6. Every dependency of a live object resolves to a managed instance in state.
//! 7. Each live address appears once, in its place: managed instances only among resources,
//!    data results only among data, no instance without an object, at most one pending
//!    operation per object.
//! 8. The snapshot held equals a full replay of the log.
//! 9. Every checkpoint decodes and equals the replay of the log up to its position.

#![warn(unreachable_pub)]

pub mod addr;
pub mod backend_config;
pub mod chain;
pub mod check;
mod checkpoint;
mod codec;
pub mod crypt;
pub(crate) mod error;
pub mod event;
/// The decode entry points of the fuzz targets (`fixtures/fuzz/`); not an API.
#[doc(hidden)]
pub mod fuzzing;
mod journal;
pub mod log;
pub mod migrate;
pub(crate) mod moves;
pub mod pg_fleet;
pub mod pg_store;
mod pgtls;
pub mod plan_runs;
mod quote;
pub mod s3_store;
mod sled_store;
pub(crate) mod snapshot;
pub mod stack_runs;
mod storage;
pub mod store;
pub(crate) mod stored_value;
pub(crate) mod tfstate;
pub mod workspace;

pub use addr::{
    package_of, AddrError, InstanceKey, Mode, ModulePath, ModuleStep, ProviderAddr, ResourceAddr,
    ResourceInstanceAddr, Target,
};

pub use error::{LockHolder, StateError};
pub use event::{
    DataObject, Deferral, Event, EventBody, ObjectMeta, OpAction, OutputValue, PlanGraph,
    PlanRecord, PlannedAction, PlannedChange, ProviderInstance, ProviderRef, RecordedDiagnostic,
    ResourceObject, RunContext, RunOutcome, RunSummary,
};
pub use log::{current_user, host_name, EventLog, Flusher, OpenOptions, Peek, Recovery, Verified};
pub use moves::{MoveError, MovePlan};
/// The PostgreSQL store's public functions under their earlier path (`pg::force_unlock`,
/// `pg::PgReader`).
pub use pg_store as pg;
pub use quote::{quote, quote_go, write_quoted, write_quoted_as, Quoting};
pub use snapshot::{PendingOp, ResourceInstance, RunRecord, Shared, Snapshot};
pub use store::{peek_events, LogReader, Store};
pub use stored_value::{StoredValue, ValueMap};
pub use tfstate::{export_tfstate, import_tfstate};
