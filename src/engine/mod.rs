//! The lifecycle engine: graph building, refresh, plan, apply, read-only, destroy, recovery of
//! pending operations, and the parallel walk. Only the engine combines graph, providers and
//! store; it never prints (it reports `Progress` to an `Observer`).
//!
//! Callers use [`api`]: one entry point per command (`api::plan`, `api::apply`, …) and the
//! request and report types they take and return. The files form layers: `api.rs` on top;
//! `source.rs`, `assemble.rs`, `execute.rs`, `session.rs` below it; the phases and the walk
//! below those; `request.rs`, `report.rs`, `timing.rs`, `observer.rs` at the bottom. No file
//! imports one above it (no circles).
//!
//! | file | job |
//! | --- | --- |
//! | `api.rs` | the engine API: one entry point per command |
//! | `request.rs` | `Options`: what a command is asked to do |
//! | `report.rs` | `Report`: what a command answers |
//! | `timing.rs` | how long each phase took, in the debug log |
//! | `observer.rs` | the `Observer` and the `Progress` events it receives |
//! | `source.rs` | what a command starts from: configuration, inputs, providers, state |
//! | `assemble.rs` | plan assembly; which providers a plan deletes, whether it is applyable |
//! | `execute.rs` | carrying out an approved plan (apply walk, read-only records) |
//! | `graph.rs` | the term graph, built by named steps; cycles with locations; DOT |
//! | `walk.rs` | the one parallel walker (JoinSet + scheduler + `-parallelism` semaphore) |
//! | `values.rs` | values per module instance, and the evaluation `Scope` |
//! | `core.rs` | node evaluation shared by every phase, and the `Phase` trait |
//! | `refresh.rs` | the flat, state-only refresh |
//! | `plan_phase.rs` | the plan phase (diffs, plan-time data reads) |
//! | `provider_diags.rs` | a provider's errors and warnings about an instance, as diagnostics |
//! | `rules.rs` | rules plan and apply share: `ignore_changes`, unchanged values, a missing provider, dependencies |
//! | `deferral.rs` | the rule that defers a data read to apply |
//! | `imports.rs` | `import` blocks: targets, and the import of an object at plan |
//! | `apply/mod.rs` | the apply phase: turns each node the walk reaches into a step and runs it |
//! | `apply/steps.rs` | one step type per kind of change (create, update, replace, delete, import, read, …) |
//! | `apply/operation.rs` | one provider call between its operation records; the `Recorder` |
//! | `apply/order.rs` | the graph-building steps that add and order the `Destroy` nodes |
//! | `provision.rs` | `local-exec` provisioners around a create and a delete |
//! | `refactor.rs` | `moved` and `removed` blocks applied to the prior state before a plan |
//! | `recover.rs` | pending operations left by a run that died |
//! | `inspect_phase.rs` | the inspect phase: evaluation without providers or state |
//! | `journal.rs` | the engine's handle on the event log |
//! | `session.rs` | the run session: open, lock, begin, recover, journal, finish once |
//! | `edit.rs` | state edits (`state rm`/`mv`/`import-tfstate`) as runs of their own |
//! | `exclude.rs` | OpenTofu's `-exclude`: what a walk leaves out; the per-resource instance filter |
//! | `push.rs` | `state push` (Terraform's lineage and serial checks) and `state replace-provider` as state edits |
//! | `taint.rs` | `taint`/`untaint` as state edits: what they record, Terraform's refusals |
//! | `schema_checks.rs` | `cairn validate`: types, schemas and cycles, without state |
//! | `terraform_state.rs` | Terraform state in and out (import, `state pull`, `show -json`) |
//! | `providers.rs` | provider packages, configured instances, default providers |
//! | `state_read.rs` | the state opened for reading by the commands that only look |
//! | `backend.rs` | `init`'s backend and its migration, the state `init` makes, `force-unlock` |
//! | `workspaces.rs` | workspaces: selection, create, list, select, delete |
//! | `history.rs` | one description of each event and run (`history`, `log`, `cairn ui`) |
//! | `plan_history.rs` | plan-only runs: the lightweight record `cairn plan` leaves beside the log |
//! | `watch.rs` | following the log beside other commands (`cairn ui`), on either store |
//! | `sabotage.rs` | deliberately broken rules, for the property tests only |
//! | `test_runner/` | `cairn test`: run blocks of `*.tftest.hcl` files through plan and apply, assertions, teardown, mock providers |

pub mod api;
pub(crate) mod apply;
pub(crate) mod assemble;
pub mod backend;
pub(crate) mod core;
pub(crate) mod deferral;
pub(crate) mod edit;
pub mod encryption;
pub(crate) mod ephemeral;
pub(crate) mod exclude;
pub(crate) mod execute;
pub(crate) mod graph;
pub mod history;
pub(crate) mod imports;
pub(crate) mod inspect_phase;
pub(crate) mod journal;
pub mod observer;
pub mod plan_history;
pub(crate) mod plan_phase;
pub(crate) mod provider_diags;
pub(crate) mod provider_inputs;
pub(crate) mod providers;
pub(crate) mod provision;
pub(crate) mod push;
pub(crate) mod recover;
pub(crate) mod refactor;
pub(crate) mod refresh;
pub(crate) mod report;
pub(crate) mod request;
pub(crate) mod rules;
pub(crate) mod sabotage;
pub(crate) mod schema_checks;
pub(crate) mod session;
pub(crate) mod source;
pub mod stack;
pub mod state_read;
pub(crate) mod taint;
pub(crate) mod terraform_state;
pub mod test_runner;
pub(crate) mod timing;
pub(crate) mod values;
pub(crate) mod walk;
pub mod watch;
pub mod workspaces;

#[doc(hidden)]
pub use sabotage::Sabotage;
