//! The lifecycle engine: graph building, refresh, plan, apply, read-only, destroy, recovery of
//! pending operations, and the parallel walk. Only the engine combines graph, providers and
//! store; it never prints (it reports `Progress` to an `Observer`).
//!
//! | file | job |
//! | --- | --- |
//! | `run.rs` | the engine API: one entry point per command |
//! | `source.rs` | what a command starts from: configuration, inputs, providers, state |
//! | `assemble.rs` | plan assembly; which providers a plan deletes, whether it is applyable |
//! | `execute.rs` | carrying out an approved plan (apply walk, read-only records) |
//! | `graph.rs` | the term graph, built by named steps; cycles with locations; DOT |
//! | `walk.rs` | the one parallel walker (JoinSet + scheduler + `-parallelism` semaphore) |
//! | `values.rs` | values per module instance, and the evaluation `Scope` |
//! | `core.rs` | node evaluation shared by every phase, and the `Phase` trait |
//! | `refresh.rs` | the flat, state-only refresh |
//! | `plan.rs` | the plan phase (diffs, plan-time data reads) |
//! | `deferral.rs` | the rule that defers a data read to apply |
//! | `apply.rs` | the apply phase, destroy ordering, operation records |
//! | `moves.rs` | `moved` and `removed` blocks applied to the prior state before a plan |
//! | `recover.rs` | pending operations left by a run that died |
//! | `inspect.rs` | evaluation without providers or state |
//! | `journal.rs` | the engine's handle on the event log |
//! | `session.rs` | the run session: open, lock, begin, recover, journal, finish once |
//! | `edit.rs` | state edits (`state rm`/`mv`/`import-tfstate`) as runs of their own |
//! | `validate.rs` | `cairn validate`: types, schemas and cycles, without state |
//! | `tfstate.rs` | Terraform state in and out (import, `state pull`, `show -json`) |
//! | `providers.rs` | provider packages, configured instances, default providers |
//! | `sabotage.rs` | deliberately broken rules, for the property tests only |

pub(crate) mod apply;
pub(crate) mod assemble;
pub(crate) mod core;
pub(crate) mod deferral;
pub(crate) mod edit;
pub(crate) mod execute;
pub(crate) mod graph;
pub(crate) mod imports;
pub(crate) mod inspect;
pub(crate) mod journal;
pub(crate) mod moves;
pub(crate) mod plan;
pub mod progress;
pub(crate) mod provider_diags;
pub(crate) mod providers;
pub(crate) mod provision;
pub(crate) mod recover;
pub(crate) mod refresh;
pub(crate) mod report;
pub(crate) mod request;
pub(crate) mod run;
pub(crate) mod sabotage;
pub(crate) mod session;
pub(crate) mod source;
pub(crate) mod tfstate;
pub(crate) mod timing;
pub(crate) mod validate;
pub(crate) mod values;
pub(crate) mod walk;

pub use run::*;
#[doc(hidden)]
pub use sabotage::Sabotage;
