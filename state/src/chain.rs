//! The hash chain over the stored records and the log's head: how damage to a log is always
//! detected, whatever the store and whatever the event encoding.
//!
//! **Records.** A record as a store keeps it is `MARK` (2 bytes: `0xc1`, never the first byte
//! of a MessagePack value, then the chain version) + the chain hash (32 bytes) + the payload
//! (the event's bytes as `event.rs` encodes them, sealed by `crypt.rs` when the state is
//! encrypted: the chain covers what is stored, so damage is found without the key). The chain
//! hash of record `n` is SHA-256 over a domain tag, the hash of record `n-1`, `n` and the
//! payload: a
//! record changed, removed, moved or copied from elsewhere breaks the chain at it. Records
//! written before the chain (no mark) read as before; their hash is computed from their bytes
//! alone, so a chained record that follows one still links to it.
//!
//! **Head.** The last durable record's seq and chain hash, kept by every store outside its own
//! recovery (sled: the file `log-head` beside the database; PostgreSQL: the table `cairn_head`;
//! S3: the object `<key>.cairn/head`) and written with each flush. A log that reads shorter
//! than its head, or whose record at the head's seq has another hash, lost or changed
//! committed history: an error, never a shorter state.

use sha2::{Digest, Sha256};

/// A chain hash.
pub type Hash = [u8; 32];

/// The chain hash before the first record.
pub const ZERO: Hash = [0; 32];

/// How a chained record starts: `0xc1` (unused by MessagePack) and the chain's version.
pub(crate) const MARK: [u8; 2] = [0xc1, 0x01];

const PREFIX: usize = MARK.len() + 32;

/// The chain hash of record `seq` with `payload`, after `prev`.
pub fn link(prev: &Hash, seq: u64, payload: &[u8]) -> Hash {
    let mut h = Sha256::new();
    h.update(b"cairn-log-chain-v1");
    h.update(prev);
    h.update(seq.to_be_bytes());
    h.update(payload);
    h.finalize().into()
}

/// Writes the stored form of record `seq` (`payload` after `prev`) into `out` (cleared);
/// returns its chain hash.
pub(crate) fn seal(prev: &Hash, seq: u64, payload: &[u8], out: &mut Vec<u8>) -> Hash {
    let hash = link(prev, seq, payload);
    out.clear();
    out.reserve(PREFIX + payload.len());
    out.extend_from_slice(&MARK);
    out.extend_from_slice(&hash);
    out.extend_from_slice(payload);
    hash
}

/// A stored record split into its stored chain hash (`None`: written before the chain) and its
/// payload.
pub(crate) fn split(record: &[u8]) -> (Option<Hash>, &[u8]) {
    if record.len() >= PREFIX && record[..MARK.len()] == MARK {
        let hash: Hash = record[MARK.len()..PREFIX].try_into().expect("32 bytes");
        (Some(hash), &record[PREFIX..])
    } else {
        (None, record)
    }
}

/// The payload of a stored record (the event's bytes).
pub(crate) fn payload(record: &[u8]) -> &[u8] {
    split(record).1
}

/// The hash a record stands for in the chain: its stored one, or for a record written before
/// the chain, one computed from its bytes alone.
pub(crate) fn hash_of(seq: u64, record: &[u8]) -> Hash {
    match split(record) {
        (Some(h), _) => h,
        (None, bytes) => link(&ZERO, seq, bytes),
    }
}

/// Checks record `seq` against the hash of the record before it (`prev`): `Ok` with its hash,
/// or `Err` with what is wrong.
pub(crate) fn verify(prev: &Hash, seq: u64, record: &[u8]) -> Result<Hash, String> {
    match split(record) {
        (Some(stored), payload) => {
            if link(prev, seq, payload) == stored {
                Ok(stored)
            } else {
                Err("its checksum does not match its content and the record before it".into())
            }
        }
        (None, bytes) => Ok(link(&ZERO, seq, bytes)),
    }
}

/// The head of a log: its last durable record and that record's chain hash.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Head {
    pub seq: u64,
    pub hash: Hash,
}

const HEAD_MAGIC: &[u8; 8] = b"cairnhd1";
/// The encoded size of a [`Head`]: magic, seq, hash, and a checksum of those.
pub(crate) const HEAD_LEN: usize = 8 + 8 + 32 + 8;

impl Head {
    /// The head after record `seq` as stored (`record`).
    pub(crate) fn of(seq: u64, record: &[u8]) -> Head {
        Head {
            seq,
            hash: hash_of(seq, record),
        }
    }

    /// The head's bytes, checksummed (a torn or damaged head does not decode).
    pub(crate) fn encode(&self) -> [u8; HEAD_LEN] {
        let mut out = [0u8; HEAD_LEN];
        out[..8].copy_from_slice(HEAD_MAGIC);
        out[8..16].copy_from_slice(&self.seq.to_be_bytes());
        out[16..48].copy_from_slice(&self.hash);
        let sum = Sha256::digest(&out[..48]);
        out[48..].copy_from_slice(&sum[..8]);
        out
    }

    /// Decodes [`Head::encode`]'s bytes; `None` when they are not a whole, intact head.
    pub(crate) fn decode(bytes: &[u8]) -> Option<Head> {
        if bytes.len() != HEAD_LEN || &bytes[..8] != HEAD_MAGIC {
            return None;
        }
        if Sha256::digest(&bytes[..48])[..8] != bytes[48..] {
            return None;
        }
        Some(Head {
            seq: u64::from_be_bytes(bytes[8..16].try_into().ok()?),
            hash: bytes[16..48].try_into().ok()?,
        })
    }
}

/// A hash as people read it (the first 12 hex digits).
pub fn short(h: &Hash) -> String {
    h[..6].iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sealed_record_verifies_and_any_change_breaks_it() {
        let mut rec = Vec::new();
        let h1 = seal(&ZERO, 1, b"one", &mut rec);
        assert_eq!(verify(&ZERO, 1, &rec), Ok(h1));
        assert_eq!(payload(&rec), b"one");
        // Another predecessor, another seq, a flipped byte: broken.
        assert!(verify(&h1, 1, &rec).is_err());
        assert!(verify(&ZERO, 2, &rec).is_err());
        for i in 2..rec.len() {
            let mut bad = rec.clone();
            bad[i] ^= 0x10;
            assert!(verify(&ZERO, 1, &bad).is_err(), "byte {i}");
        }
        // A record before the chain: its own hash, linked to by the next.
        let legacy = b"\x95legacy";
        let hl = verify(&h1, 2, legacy).unwrap();
        assert_eq!(hl, hash_of(2, legacy));
        let h3 = seal(&hl, 3, b"three", &mut rec);
        assert_eq!(verify(&hl, 3, &rec), Ok(h3));
    }

    #[test]
    fn a_head_round_trips_and_a_damaged_one_does_not_decode() {
        let head = Head {
            seq: 42,
            hash: link(&ZERO, 42, b"x"),
        };
        let bytes = head.encode();
        assert_eq!(Head::decode(&bytes), Some(head));
        for i in 0..bytes.len() {
            let mut bad = bytes;
            bad[i] ^= 1;
            assert_eq!(Head::decode(&bad), None, "byte {i}");
        }
        assert_eq!(Head::decode(&bytes[..HEAD_LEN - 1]), None);
    }
}
