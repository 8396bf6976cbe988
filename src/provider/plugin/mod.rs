//! Plugin providers: any Terraform provider binary, run over the gRPC plugin protocol
//! (tfplugin5 and tfplugin6), behind the same `Provider` / `Configured` traits as the
//! built-in providers.
//!
//! - `launch`: the process, go-plugin's handshake, automatic mutual TLS, the end of a process;
//! - `rpc`: one client for both protocol versions (schemas and diagnostics converted);
//! - `codec`: the schema-directed msgpack encoding of values, unknowns included;
//! - `provider`: `PluginProvider` / `PluginInstance`, the traits' implementation.
//! - `cache`: schemas cached per binary hash in the state directory.
//! - `proto/`: the vendored protocol definitions (MPL-2.0), compiled by `build.rs`.

pub(crate) mod attach;
pub(crate) mod cache;
pub mod codec;
pub mod launch;
pub(crate) mod provider;
pub(crate) mod rpc;

pub use launch::shutdown_all;
pub use provider::PluginProvider;

/// The generated protocol code.
#[allow(clippy::all, missing_docs)]
pub mod proto {
    pub mod tfplugin5 {
        tonic::include_proto!("tfplugin5");
    }
    pub mod tfplugin6 {
        tonic::include_proto!("tfplugin6");
    }
    pub mod controller {
        tonic::include_proto!("plugin");
    }
}

#[cfg(test)]
mod tests;
