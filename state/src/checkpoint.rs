//! The byte form of a checkpoint: a snapshot split into parts that encode and decode in
//! parallel.
//!
//! Opening a large state from a checkpoint is dominated by decoding the resource instances
//! (allocating their strings and maps), so the resources are cut into a few slices, each its
//! own rmp document, and decoded on scoped threads. The slices come out of a `BTreeMap` in
//! order, so they are joined and bulk-built into the map again without re-sorting.
//!
//! Layout: `u32 part count`, then each part's length as `u64`, then the parts. Part 0 is the
//! snapshot without its resources; parts 1.. are `Vec<(address, instance)>` slices. rmp's
//! compact (positional) encoding is used: only this file, in this version, reads it (the
//! store ignores checkpoints of other formats and rebuilds them).

use crate::addr::ResourceInstanceAddr;
use crate::snapshot::{ResourceInstance, Snapshot};

/// Below this many instances a checkpoint is one part.
const SPLIT_ABOVE: usize = 2_000;

fn threads() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .clamp(1, 8)
}

/// Encodes a snapshot as checkpoint bytes.
pub fn encode(snapshot: &Snapshot) -> Result<Vec<u8>, String> {
    let head = snapshot.clone_without_resources();
    let entries: Vec<(&ResourceInstanceAddr, &ResourceInstance)> =
        snapshot.resources.iter().collect();
    let n_slices = if entries.len() > SPLIT_ABOVE {
        threads() * 2
    } else {
        1
    };
    let per = entries.len().div_ceil(n_slices).max(1);
    let slices: Vec<&[(&ResourceInstanceAddr, &ResourceInstance)]> = entries.chunks(per).collect();
    let encoded: Vec<Result<Vec<u8>, String>> = std::thread::scope(|scope| {
        let handles: Vec<_> = slices
            .iter()
            .map(|slice| scope.spawn(move || rmp_serde::to_vec(slice).map_err(|e| e.to_string())))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Err("encoder panicked".into())))
            .collect()
    });
    let mut parts = vec![rmp_serde::to_vec(&head).map_err(|e| e.to_string())?];
    for p in encoded {
        parts.push(p?);
    }
    let mut out =
        Vec::with_capacity(4 + parts.len() * 8 + parts.iter().map(Vec::len).sum::<usize>());
    out.extend_from_slice(&(parts.len() as u32).to_be_bytes());
    for p in &parts {
        out.extend_from_slice(&(p.len() as u64).to_be_bytes());
    }
    for p in &parts {
        out.extend_from_slice(p);
    }
    Ok(out)
}

/// Decodes checkpoint bytes.
pub fn decode(bytes: &[u8]) -> Result<Snapshot, String> {
    let n = u32::from_be_bytes(
        bytes
            .get(..4)
            .and_then(|b| b.try_into().ok())
            .ok_or("truncated checkpoint")?,
    ) as usize;
    let mut offset = 4 + n * 8;
    let mut parts = Vec::with_capacity(n);
    for i in 0..n {
        let len = bytes
            .get(4 + i * 8..12 + i * 8)
            .and_then(|b| b.try_into().ok())
            .map(u64::from_be_bytes)
            .ok_or("truncated checkpoint")? as usize;
        let part = bytes
            .get(offset..offset.saturating_add(len))
            .ok_or("truncated checkpoint")?;
        parts.push(part);
        offset += len;
    }
    if offset != bytes.len() || parts.is_empty() {
        return Err("checkpoint parts do not add up".into());
    }
    type Slice = Vec<(ResourceInstanceAddr, ResourceInstance)>;
    let (head, slices) = std::thread::scope(|scope| {
        let handles: Vec<_> = parts[1..]
            .iter()
            .map(|p| scope.spawn(move || rmp_serde::from_slice::<Slice>(p)))
            .collect();
        let head = rmp_serde::from_slice::<Snapshot>(parts[0]);
        let slices: Vec<_> = handles
            .into_iter()
            .map(|h| h.join().map_err(|_| "decoder panicked".to_string()))
            .collect();
        (head, slices)
    });
    let mut snapshot = head.map_err(|e| e.to_string())?;
    let slices = slices
        .into_iter()
        .map(|s| s?.map_err(|e| e.to_string()))
        .collect::<Result<Vec<Slice>, String>>()?;
    // One allocation of the right size (growing it would copy and touch far more memory),
    // already sorted: `from_iter` reuses it, notices the order, and builds the tree in one pass.
    let mut all = Vec::with_capacity(slices.iter().map(Vec::len).sum());
    for s in slices {
        all.extend(s);
    }
    snapshot.resources = all.into_iter().collect();
    Ok(snapshot)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{ProviderRef, ResourceObject};
    use crate::value::StoredValue;

    #[test]
    fn split_checkpoints_round_trip() {
        for n in [0, 5, SPLIT_ABOVE + 7] {
            let mut s = Snapshot::new();
            s.head = 42;
            for i in 0..n {
                s.resources.insert(
                    format!("sim_thing.a[{i}]").parse().unwrap(),
                    ResourceInstance {
                        current: Some(ResourceObject {
                            attrs: StoredValue::Number(i.to_string()),
                            deps: vec![],
                            provider: ProviderRef {
                                addr: "provider[\"sim\"]".parse().unwrap(),
                                id: "p".into(),
                            },
                            create_token: None,
                            tainted: false,
                        }),
                        deposed: Default::default(),
                    },
                );
            }
            let bytes = encode(&s).unwrap();
            assert_eq!(decode(&bytes).unwrap(), s, "{n} instances");
            assert!(decode(&bytes[..bytes.len() - 1]).is_err());
        }
    }
}
