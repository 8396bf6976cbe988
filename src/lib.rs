//! Cairn: an infrastructure-as-code engine for Terraform-style HCL configurations.
//!
//! See `ARCHITECTURE.md` for the map: `config` loads, `eval` evaluates, `provider` touches the
//! world, `engine` combines graph, providers and store, `plan` renders, `cli` is the only place
//! that prints.

pub mod cli;
pub mod config;
pub mod diag;
pub mod engine;
pub mod eval;
pub mod plan;
pub mod provider;
pub mod ui;
pub mod value;

pub use cairn_state as state;
