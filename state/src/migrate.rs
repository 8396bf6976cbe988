//! `cairn init -migrate-state`: copies a whole log — every event, so history and time travel
//! survive — from one store to another (sled ↔ PostgreSQL), then verifies the copy.
//!
//! The target must be empty. Records are copied byte for byte in one commit (on PostgreSQL
//! one transaction: all of it or nothing), the lineage with them. Verification reads the
//! target back and compares the event count and a checksum chain: `c0 = 0…0`,
//! `cN = sha256(cN-1 ‖ seq ‖ record)`, over both logs.

use crate::error::StateError;
use crate::store::Store;
use sha2::{Digest, Sha256};

/// What a migration copied.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Migrated {
    pub events: u64,
    /// The last link of the checksum chain, hex.
    pub checksum: String,
}

/// The checksum chain's last link over `records`.
pub(crate) fn checksum_chain(records: &[(u64, Vec<u8>)]) -> String {
    let mut link = [0u8; 32];
    for (seq, data) in records {
        let mut h = Sha256::new();
        h.update(link);
        h.update(seq.to_be_bytes());
        h.update(data);
        link = h.finalize().into();
    }
    link.iter().map(|b| format!("{b:02x}")).collect()
}

/// Copies every event of `from` into the empty `to` and verifies the copy.
pub fn copy_log(from: &Store, to: &mut Store) -> Result<Migrated, StateError> {
    if to.head() > 0 {
        return Err(StateError::Backend {
            message: format!(
                "the state in {} already has {} event(s); Cairn migrates only into an empty \
                 state, so nothing was copied",
                to.location(),
                to.head()
            ),
        });
    }
    let records = from.raw_events(1, from.head())?;
    let checksum = checksum_chain(&records);
    to.set_lineage(&from.lineage())?;
    to.import_raw(&records)?;
    let copied = to.raw_events(1, to.head())?;
    let check = checksum_chain(&copied);
    if copied.len() != records.len() || check != checksum {
        return Err(StateError::Backend {
            message: format!(
                "the copy in {} does not match its source: {} event(s) with checksum {check}, \
                 expected {} with checksum {checksum}",
                to.location(),
                copied.len(),
                records.len()
            ),
        });
    }
    if to.snapshot() != from.snapshot() || to.lineage() != from.lineage() {
        return Err(StateError::Backend {
            message: format!(
                "the state folded from the copy in {} differs from its source",
                to.location()
            ),
        });
    }
    Ok(Migrated {
        events: records.len() as u64,
        checksum,
    })
}
