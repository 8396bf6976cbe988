//! The local fault journal of a shared store (PostgreSQL's `pg-journal`, S3's `s3-journal`
//! in the state directory): the events a writer could not make durable in the store —
//! among them the outcomes of provider calls that finished — appended and fsynced here, and
//! written to the store by the next writer's open, before anything else.
//!
//! Records: `seq` (8 bytes), length (4), CRC-32 of the bytes (4), the bytes; a torn last
//! record is ignored.

use crate::error::StateError;
use crate::event::{EventBody, RunOutcome, RunSummary};
use crate::log::{decode_record, EventLog, LogCore};
use crate::storage::Storage;
use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

/// Appends records to the journal at `path` and makes them durable.
pub(crate) fn append(path: &Path, batch: &[(u64, Vec<u8>)]) -> std::io::Result<()> {
    let mut buf = Vec::new();
    for (seq, data) in batch {
        buf.extend_from_slice(&seq.to_be_bytes());
        buf.extend_from_slice(&(data.len() as u32).to_be_bytes());
        buf.extend_from_slice(&crc32fast::hash(data).to_be_bytes());
        buf.extend_from_slice(data);
    }
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)?;
    f.write_all(&buf)?;
    f.sync_all()
}

/// Reads a local journal: its intact records (a torn last record is ignored).
pub(crate) fn read(path: &Path) -> std::io::Result<Vec<(u64, Vec<u8>)>> {
    let bytes = std::fs::read(path)?;
    let mut out = Vec::new();
    let mut at = 0;
    while at + 16 <= bytes.len() {
        let seq = u64::from_be_bytes(bytes[at..at + 8].try_into().expect("8"));
        let len = u32::from_be_bytes(bytes[at + 8..at + 12].try_into().expect("4")) as usize;
        let crc = u32::from_be_bytes(bytes[at + 12..at + 16].try_into().expect("4"));
        let Some(data) = bytes.get(at + 16..at + 16 + len) else {
            break;
        };
        if crc32fast::hash(data) != crc {
            break;
        }
        out.push((seq, data.to_vec()));
        at += 16 + len;
    }
    Ok(out)
}

/// Writes the events a run before this one kept in the local journal `file` (in the state
/// directory) to the store, first thing: as they were if nobody wrote since, else their
/// outcomes as a run of their own. `lost` names what that run lost ("database connection").
pub(crate) fn recover<S: Storage>(
    log: &mut LogCore<S>,
    file: &str,
    lost: &str,
) -> Result<Option<String>, StateError> {
    let path = log.dir().join(file);
    let records = match read(&path) {
        Ok(r) => r,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(StateError::io(format!("cannot read {}", path.display()), e)),
    };
    // The journal keeps records as stored (chained, sealed with the state's encryption); the
    // log's raw records are the events' bytes, their chain hash set aside and decrypted.
    let records = records
        .into_iter()
        .map(|(seq, data)| {
            crate::crypt::open_with(
                log.crypt.as_deref(),
                &format!("record {seq} of {}", path.display()),
                crate::chain::payload(&data),
            )
            .map(|b| (seq, b.into_owned()))
            .map_err(|message| StateError::Encryption { message })
        })
        .collect::<Result<Vec<_>, StateError>>()?;
    let total = records.len();
    let head = log.head();
    // Records the database already has (a commit whose reply was lost) are skipped.
    let first = records.first().map_or(head + 1, |r| r.0);
    let stored: BTreeMap<u64, Vec<u8>> = if first <= head {
        log.raw_events(first, head)?.into_iter().collect()
    } else {
        BTreeMap::new()
    };
    let missing: Vec<(u64, Vec<u8>)> = records
        .into_iter()
        .filter(|(seq, data)| stored.get(seq) != Some(data))
        .collect();
    let written = missing.len();
    let contiguous = missing
        .iter()
        .enumerate()
        .all(|(i, (seq, _))| *seq == head + 1 + i as u64);
    if contiguous {
        // Nobody wrote since: the events go in as they were, in their own run.
        log.import_raw(&missing)?;
    } else {
        // Other runs wrote meanwhile: the outcomes go in as a run of their own.
        let bodies: Vec<EventBody> = missing
            .iter()
            .filter_map(|(seq, data)| decode_record(None, *seq, data).ok())
            .map(|e| e.body)
            .filter(|b| {
                !matches!(
                    b,
                    EventBody::RunStarted { .. }
                        | EventBody::RunFinished { .. }
                        | EventBody::RunContext(_)
                )
            })
            .collect();
        log.begin_run("journal recovery", &[])?;
        for b in bodies {
            log.append(b)?;
        }
        log.finish_run(RunOutcome::Interrupted, RunSummary::default())?;
    }
    std::fs::remove_file(&path)
        .map_err(|e| StateError::io(format!("cannot remove {}", path.display()), e))?;
    Ok(Some(format!(
        "wrote {written} of {total} event(s) kept in {} by a run that lost its {lost} to {}{}",
        path.display(),
        log.location(),
        if written < total {
            " (the others were already there)"
        } else {
            ""
        }
    )))
}
