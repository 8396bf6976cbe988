//! Cairn: an infrastructure-as-code engine for Terraform-style HCL configurations.
//!
//! See `ARCHITECTURE.md` for the map: `config` loads, `eval` evaluates, `provider` touches the
//! world, `engine` combines graph, providers and store, `plan` renders, `cli` is the only place
//! that prints.

// `pub(crate)` by default: a `pub` item the crate does not export is a warning, so the
// compiler reports dead code (see ARCHITECTURE.md, "Visibility").
#![warn(unreachable_pub)]

pub mod cli;
pub mod config;
pub mod diag;
pub mod engine;
pub mod eval;
/// The decode and load entry points of the fuzz targets (`fixtures/fuzz/`); not an API.
#[doc(hidden)]
pub mod fuzzing;
pub mod plan;
pub mod provider;
pub mod schema;
pub mod ui;
pub mod value;

pub use cairn_state as state;
/// Every kind of address (resources, instances, modules, provider configurations, provider and
/// module sources, version constraints): one module, in the state crate.
pub use cairn_state::addr;
