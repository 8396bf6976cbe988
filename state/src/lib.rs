//! Cairn's durable vocabulary — addresses, stored values, events — and the sled event log.
//!
//! Nothing here knows of HCL or the graph. Only `log.rs` talks to sled.

pub mod addr;
pub mod value;

pub use addr::*;
pub use value::StoredValue;
