//! Plan-only runs: what a `cairn plan` leaves in the history. A plan changes nothing and must
//! not take the writers' lock (it runs beside an apply, and rule 5 of the lifecycle says it
//! appends no event), so it is not a run of the log: it is one small record beside it, made
//! without the lock and never read by the fold — who planned, where, when, against which state
//! position, the counts of what it planned and the first addresses it would change (no values:
//! nothing sensitive). `cairn history` and `cairn ui` list them among the runs.
//!
//! Where they live, per store: sled — one file per plan in `<state_dir>/plans/` (written to a
//! temporary file, then renamed); PostgreSQL — the table `cairn_plan_runs` of the state's
//! schema; S3 — one object per plan under `<key>.cairn/plans/`. Each record is JSON, sealed
//! with the state's encryption when it has one. Only the newest [`KEEP`] are kept, so a busy
//! review process never grows them without bound.

use crate::event::RunContext;
use crate::StateError;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// How many plan records a state keeps (the oldest go first).
pub const KEEP: usize = 500;

/// How many changed addresses a record lists (all are counted).
pub const MAX_ADDRESSES: usize = 50;

/// One `cairn plan`, as the history shows it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanRun {
    /// Unique and ordered by time: `<started ms, 13 digits>-<pid>-<random>`.
    pub id: String,
    pub started_ms: u64,
    pub finished_ms: u64,
    /// The command line, its sensitive `-var` values masked.
    pub args: Vec<String>,
    pub user: String,
    pub pid: u32,
    #[serde(default)]
    pub context: RunContext,
    /// The state position it planned against (the seq of the last event); `None` when it
    /// failed before it read the state.
    #[serde(default)]
    pub base_seq: Option<u64>,
    /// `normal`, `destroy`, `refresh-only` or `read-only`.
    pub mode: String,
    /// `planned` (changes proposed), `no changes` or `failed` (it had errors).
    pub outcome: String,
    pub add: u32,
    pub change: u32,
    pub destroy: u32,
    /// Reads the plan defers to the apply.
    pub read: u32,
    pub import: u32,
    pub forget: u32,
    /// Objects its `moved` blocks move.
    #[serde(default)]
    pub moved: u32,
    pub errors: u32,
    /// The plan file it saved (`-out=FILE`), as given.
    #[serde(default)]
    pub saved_to: Option<String>,
    /// The first [`MAX_ADDRESSES`] changes: (action, address).
    #[serde(default)]
    pub changes: Vec<(String, String)>,
    /// How many changes there are in all.
    #[serde(default)]
    pub changes_total: u32,
}

impl PlanRun {
    /// A new id for a plan started at `started_ms` by this process.
    pub fn new_id(started_ms: u64) -> String {
        use rand::RngCore;
        let r = rand::rngs::OsRng.next_u32() & 0xffff;
        format!("{started_ms:013}-{}-{r:04x}", std::process::id())
    }

    fn encode(&self, crypt: Option<&crate::crypt::Encryption>) -> Result<Vec<u8>, StateError> {
        let json = serde_json::to_vec(self).map_err(|e| io("encode the plan record", e))?;
        match crypt {
            Some(c) => c.seal(&json).map_err(|e| io("encrypt the plan record", e)),
            None => Ok(json),
        }
    }

    fn decode(
        what: &str,
        bytes: &[u8],
        crypt: Option<&crate::crypt::Encryption>,
    ) -> Result<PlanRun, String> {
        let plain = crate::crypt::open_with(crypt, what, bytes)?;
        serde_json::from_slice(&plain).map_err(|e| format!("{what} is unreadable: {e}"))
    }
}

fn io(what: &str, e: impl std::fmt::Display) -> StateError {
    StateError::Backend {
        message: format!("cannot {what}: {e}"),
    }
}

/// A plan's id is its file or object name: only the characters [`PlanRun::new_id`] makes.
fn valid_id(id: &str) -> bool {
    !id.is_empty() && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
}

/// Copies every plan record, as stored (sealed or not), from the state of `dir` in store
/// `from` to the same state in store `to` (`None`: the sled directory `dir`): `init
/// -migrate-state` takes them along with the log. The number copied.
pub fn copy(
    dir: &Path,
    from: Option<&crate::store::Remote>,
    to: Option<&crate::store::Remote>,
) -> Result<usize, StateError> {
    let raw = match from {
        None => list_local(dir)?,
        Some(crate::store::Remote::Pg(pg)) => crate::pg_store::plan_runs(pg)?,
        Some(crate::store::Remote::S3(s3)) => crate::s3_store::plan_runs(s3)?,
    };
    for (id, bytes) in &raw {
        if !valid_id(id) {
            continue;
        }
        match to {
            None => record_local(dir, id, bytes)?,
            Some(crate::store::Remote::Pg(pg)) => {
                crate::pg_store::record_plan_run(pg, id, bytes, KEEP)?
            }
            Some(crate::store::Remote::S3(s3)) => {
                crate::s3_store::record_plan_run(s3, id, bytes.clone(), KEEP)?
            }
        };
    }
    Ok(raw.len())
}

/// Records `run` in the state of `dir` (its `backend.json`'s store, or sled's directory),
/// without the lock, and drops the oldest records past [`KEEP`]. `Ok(false)`: there is no
/// state there yet (nothing was recorded).
pub fn record(
    dir: &Path,
    run: &PlanRun,
    crypt: Option<&crate::crypt::Encryption>,
) -> Result<bool, StateError> {
    if !valid_id(&run.id) {
        return Err(io("record the plan", format!("bad id {:?}", run.id)));
    }
    let bytes = run.encode(crypt)?;
    match crate::store::configured(dir)? {
        None => record_local(dir, &run.id, &bytes),
        Some(crate::store::Remote::Pg(pg)) => {
            crate::pg_store::record_plan_run(&pg, &run.id, &bytes, KEEP)
        }
        Some(crate::store::Remote::S3(s3)) => {
            crate::s3_store::record_plan_run(&s3, &run.id, bytes, KEEP)
        }
    }
}

/// The plan records of the state of `dir`, oldest first, and warnings for the ones that
/// cannot be read (skipped).
pub fn list(
    dir: &Path,
    crypt: Option<&crate::crypt::Encryption>,
) -> Result<(Vec<PlanRun>, Vec<String>), StateError> {
    let raw = match crate::store::configured(dir)? {
        None => list_local(dir)?,
        Some(crate::store::Remote::Pg(pg)) => crate::pg_store::plan_runs(&pg)?,
        Some(crate::store::Remote::S3(s3)) => crate::s3_store::plan_runs(&s3)?,
    };
    let mut runs = Vec::with_capacity(raw.len());
    let mut warnings = Vec::new();
    for (id, bytes) in raw {
        match PlanRun::decode(&format!("plan record {id}"), &bytes, crypt) {
            Ok(r) => runs.push(r),
            Err(e) => warnings.push(e),
        }
    }
    runs.sort_by(|a, b| (a.started_ms, &a.id).cmp(&(b.started_ms, &b.id)));
    Ok((runs, warnings))
}

/// A stamp that changes when the local plan records change (the directory's modification
/// time and entry count), for a reader that polls; `None` on a remote store (ask [`list`]).
pub fn local_stamp(dir: &Path) -> Option<(Option<std::time::SystemTime>, usize)> {
    if crate::store::configured(dir).ok()?.is_some() {
        return None;
    }
    let plans = dir.join("plans");
    let modified = std::fs::metadata(&plans).and_then(|m| m.modified()).ok();
    let count = std::fs::read_dir(&plans).map(|d| d.count()).unwrap_or(0);
    Some((modified, count))
}

/// A sled state: a state exists when its log does.
fn record_local(dir: &Path, id: &str, bytes: &[u8]) -> Result<bool, StateError> {
    if !dir.join("log").exists() {
        return Ok(false);
    }
    let plans = dir.join("plans");
    std::fs::create_dir_all(&plans).map_err(|e| io(&format!("create {}", plans.display()), e))?;
    let tmp = plans.join(format!(".{id}.tmp"));
    let path = plans.join(format!("{id}.json"));
    let write = || -> std::io::Result<()> {
        use std::io::Write;
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, &path)
    };
    if let Err(e) = write() {
        let _ = std::fs::remove_file(&tmp);
        return Err(io(&format!("write {}", path.display()), e));
    }
    let mut ids = local_ids(&plans)?;
    if ids.len() > KEEP {
        ids.sort();
        for old in &ids[..ids.len() - KEEP] {
            let _ = std::fs::remove_file(plans.join(format!("{old}.json")));
        }
    }
    Ok(true)
}

fn local_ids(plans: &Path) -> Result<Vec<String>, StateError> {
    let entries = match std::fs::read_dir(plans) {
        Ok(d) => d,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io(&format!("read {}", plans.display()), e)),
    };
    Ok(entries
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            name.strip_suffix(".json")
                .filter(|id| valid_id(id))
                .map(str::to_string)
        })
        .collect())
}

fn list_local(dir: &Path) -> Result<Vec<(String, Vec<u8>)>, StateError> {
    let plans = dir.join("plans");
    let mut out = Vec::new();
    for id in local_ids(&plans)? {
        // Removed by a writer pruning the oldest since the listing: skipped.
        if let Ok(bytes) = std::fs::read(plans.join(format!("{id}.json"))) {
            out.push((id, bytes));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(ms: u64) -> PlanRun {
        PlanRun {
            id: PlanRun::new_id(ms),
            started_ms: ms,
            finished_ms: ms + 5,
            args: vec!["plan".into()],
            user: "alice".into(),
            mode: "normal".into(),
            outcome: "planned".into(),
            add: 1,
            changes: vec![("create".into(), "sim_thing.a".into())],
            changes_total: 1,
            ..Default::default()
        }
    }

    #[test]
    fn local_records_round_trip_need_a_state_and_keep_the_newest() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        // No state yet: nothing is recorded.
        assert!(!record(dir, &run(1), None).unwrap());
        assert!(list(dir, None).unwrap().0.is_empty());
        std::fs::create_dir_all(dir.join("log")).unwrap();
        for ms in (0..(KEEP as u64 + 3)).rev() {
            assert!(record(dir, &run(1_000 + ms), None).unwrap());
        }
        let (runs, warnings) = list(dir, None).unwrap();
        assert!(warnings.is_empty(), "{warnings:?}");
        assert_eq!(runs.len(), KEEP);
        assert_eq!(runs[0].started_ms, 1_003, "the oldest three are gone");
        assert_eq!(runs.last().unwrap().started_ms, 1_000 + KEEP as u64 + 2);
        assert_eq!(runs[0].changes, run(1_003).changes);
        // A damaged record is a warning, the others are listed.
        std::fs::write(dir.join("plans/0000000000001-1-0000.json"), b"{").unwrap();
        let (runs, warnings) = list(dir, None).unwrap();
        assert_eq!(runs.len(), KEEP);
        assert!(
            warnings[0].contains("plan record 0000000000001-1-0000"),
            "{warnings:?}"
        );
        assert!(local_stamp(dir).is_some());
    }
}
