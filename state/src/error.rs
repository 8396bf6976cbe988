//! The state crate's error type: every failure says what was found and what to do.

use std::fmt;
use std::path::PathBuf;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StateError {
    /// Another process holds the state. Fields are `None` when the holder did not (yet) say
    /// who it is.
    Locked {
        dir: PathBuf,
        pid: Option<u32>,
        command: Option<String>,
        since_ms: Option<u64>,
        /// True when the recorded holder process no longer exists (its record is stale, so the
        /// lock is held by a process that has not identified itself yet).
        stale: bool,
    },
    /// A read-only open of a directory that holds no state.
    NotFound { dir: PathBuf },
    /// `append` (or a run) on a store opened with `write: false`.
    ReadOnly,
    /// `finish_run` with no run open.
    NoOpenRun,
    /// A record in the middle of the log cannot be read, or the log has a gap.
    Corrupt { seq: u64, detail: String },
    /// Committed history is lost or changed: the log reads shorter than its head, or its
    /// hash chain breaks at `from` (see `chain.rs`). `detail` says what and what that history
    /// held. Such a state is never written to.
    Damaged {
        location: String,
        from: u64,
        detail: String,
    },
    /// A record written by a newer Cairn.
    TooNew { seq: u64, version: u32 },
    /// `snapshot_at` / `events` past the head of the log.
    OutOfRange { seq: u64, head: u64 },
    /// The database failed (I/O, sled).
    Io { context: String, message: String },
    /// A Terraform state file that cannot be imported.
    TfState { message: String },
    /// The backend configuration is unusable (missing argument, bad `backend.json`).
    Backend { message: String },
    /// Bytes that cannot be decrypted or encrypted (wrong or missing key, or encryption that
    /// refuses to write): the message names what and which keys were tried.
    Encryption { message: String },
    /// A shared (PostgreSQL) state is locked by another run. `holder` is `None` when the
    /// holder has not written its record yet.
    LockedRemote {
        location: String,
        holder: Option<Box<LockHolder>>,
    },
}

/// Who holds a shared state's lock (the holder record beside the advisory lock).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LockHolder {
    pub run_id: String,
    pub who: String,
    pub host: String,
    pub pid: u32,
    pub command: String,
    pub since_ms: u64,
}

impl StateError {
    /// An I/O failure with what was being done.
    pub fn io_error(context: impl Into<String>, e: impl fmt::Display) -> StateError {
        StateError::io(context, e)
    }

    pub(crate) fn io(context: impl Into<String>, e: impl fmt::Display) -> StateError {
        StateError::Io {
            context: context.into(),
            message: e.to_string(),
        }
    }
}

/// Formats unix milliseconds as `2024-05-01 12:00:03 UTC`.
pub(crate) fn format_time_ms(ms: u64) -> String {
    let secs = ms / 1000;
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Civil-from-days (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = if m <= 2 { y + 1 } else { y };
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02} UTC",
        rem / 3600,
        (rem % 3600) / 60,
        rem % 60
    )
}

impl fmt::Display for StateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StateError::Locked {
                dir,
                pid,
                command,
                since_ms,
                stale,
            } => {
                write!(f, "the state in {} is locked", dir.display())?;
                match (pid, stale) {
                    (Some(pid), false) => {
                        write!(f, " by process {pid}")?;
                        if let Some(c) = command {
                            write!(f, " (cairn {c})")?;
                        }
                        if let Some(t) = since_ms {
                            write!(f, " since {}", format_time_ms(*t))?;
                        }
                        write!(
                            f,
                            "; wait for it to finish, or retry with -lock-timeout=DURATION"
                        )
                    }
                    (Some(pid), true) => write!(
                        f,
                        " by a process that has not identified itself yet (the last recorded \
                         holder, process {pid}{}, has exited); retry, or use \
                         -lock-timeout=DURATION",
                        command
                            .as_ref()
                            .map(|c| format!(" running cairn {c}"))
                            .unwrap_or_default()
                    ),
                    (None, _) => write!(
                        f,
                        " by another process that has not identified itself (no holder record \
                         in lock.json); retry, or use -lock-timeout=DURATION"
                    ),
                }
            }
            StateError::NotFound { dir } => write!(f, "no state found in {}", dir.display()),
            StateError::ReadOnly => write!(f, "the state was opened read-only and cannot change"),
            StateError::NoOpenRun => write!(f, "no run is open in the state log"),
            StateError::Corrupt { seq, detail } => write!(
                f,
                "state log record {seq} is corrupt ({detail}). The log is intact up to record {}: \
                 inspect it with `cairn state list -at={}`, export it with \
                 `cairn state pull -at={}` and import that into a fresh state directory with \
                 `cairn state import-tfstate`",
                seq.saturating_sub(1),
                seq.saturating_sub(1),
                seq.saturating_sub(1)
            ),
            StateError::Damaged {
                location,
                from,
                detail,
            } => {
                match from {
                    0 => write!(f, "the state log in {location} is damaged: {detail}.")?,
                    from => write!(
                        f,
                        "the state log in {location} is damaged from event {from} on: {detail}."
                    )?,
                }
                write!(
                    f,
                    " Nothing was written to it. `cairn state verify` checks the whole log. To \
                     go on from the last good event, run `cairn state recover`: it keeps a copy \
                     of the damaged store, records the recovery, and lists the objects whose \
                     history was lost so that you can import them again (`cairn import`). Or \
                     restore {} from a backup",
                    if location.starts_with("PostgreSQL") {
                        "the schema"
                    } else if location.starts_with("s3://") {
                        "the objects under the state's key (or their earlier versions)"
                    } else {
                        "the state directory"
                    }
                )
            }
            StateError::TooNew { seq, version } => write!(
                f,
                "state log record {seq} has schema version {version}, newer than this Cairn \
                 reads ({}); upgrade Cairn",
                crate::event::CURRENT_VERSION
            ),
            StateError::OutOfRange { seq, head } => write!(
                f,
                "position {seq} is past the end of the state log (the last event is {head})"
            ),
            StateError::Io { context, message } => write!(f, "{context}: {message}"),
            StateError::TfState { message } => {
                write!(f, "cannot import the Terraform state: {message}")
            }
            StateError::Backend { message } => write!(f, "backend configuration: {message}"),
            StateError::Encryption { message } => write!(f, "{message}"),
            StateError::LockedRemote { location, holder } => {
                write!(f, "the state in {location} is locked")?;
                match holder {
                    Some(h) => write!(
                        f,
                        " by {} on {} (process {}, cairn {}) since {}, lock ID {}; wait for it \
                         to finish, retry with -lock-timeout=DURATION, or if that run is gone \
                         `cairn force-unlock {}`",
                        h.who,
                        h.host,
                        h.pid,
                        h.command,
                        format_time_ms(h.since_ms),
                        h.run_id,
                        h.run_id
                    ),
                    None => write!(
                        f,
                        " by a run that has not identified itself yet; retry, or use \
                         -lock-timeout=DURATION"
                    ),
                }
            }
        }
    }
}

impl std::error::Error for StateError {}

#[cfg(test)]
mod tests {
    #[test]
    fn times_are_civil_utc() {
        assert_eq!(super::format_time_ms(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(
            super::format_time_ms(1_709_210_096_000),
            "2024-02-29 12:34:56 UTC"
        );
    }
}
