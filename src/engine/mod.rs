//! The lifecycle engine: graph building, refresh, plan, apply, read-only, destroy, and the
//! parallel walk. Only the engine combines graph, providers and store.

pub mod progress;
