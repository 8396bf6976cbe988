//! Property tests of the lifecycle live in tests/.
