//! The decode entry points the fuzz targets (`fixtures/fuzz/`) and their regression tests
//! call: each is the function the store itself runs on bytes it reads back. Nothing here
//! changes what they do; the invariants the targets check live with the targets
//! (`fixtures/fuzz/src/checks.rs`).

use crate::chain::Head;
use crate::event::Event;
use crate::Snapshot;

/// A stored log record (chain prefix, then the event's bytes) decoded as record `seq`, as the
/// log reads it (unencrypted state).
pub fn decode_record(seq: u64, bytes: &[u8]) -> Result<Event, String> {
    crate::log::decode_record(None, seq, bytes).map_err(|e| e.to_string())
}

/// An event's bytes (a record's payload, any known version) decoded and upgraded as the log
/// decodes them.
pub fn decode_event(bytes: &[u8]) -> Result<Event, String> {
    crate::event::decode(bytes).map_err(|e| e.to_string())
}

/// An event's bytes as the log stores them.
pub fn encode_event(event: &Event) -> Vec<u8> {
    crate::event::encode(event)
}

/// A record as the log stores it: `payload` chained after `prev`.
pub fn seal_record(prev: &crate::chain::Hash, seq: u64, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    crate::chain::seal(prev, seq, payload, &mut out);
    out
}

/// Checkpoint bytes decoded as the store reads a checkpoint file (unencrypted).
pub fn decode_checkpoint(bytes: &[u8]) -> Result<Snapshot, String> {
    crate::checkpoint::decode(bytes, None)
}

/// A snapshot encoded as a checkpoint.
pub fn encode_checkpoint(snapshot: &Snapshot) -> Result<Vec<u8>, String> {
    crate::checkpoint::encode(snapshot, None)
}

/// The bytes of a log head decoded as the store reads its head.
pub fn decode_head(bytes: &[u8]) -> Option<Head> {
    Head::decode(bytes)
}

/// A head encoded as the store writes it.
pub fn encode_head(head: &Head) -> Vec<u8> {
    head.encode().to_vec()
}
