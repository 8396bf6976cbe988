//! The graph crate: a generic DAG and scheduler.
