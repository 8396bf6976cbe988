//! Debug logging: `CAIRN_LOG=trace|debug|info|warn|error` turns on `tracing` output, to standard
//! error or, with `CAIRN_LOG_PATH`, appended to that file. Off by default, so normal output is
//! never mixed with logs.

use std::fs::OpenOptions;
use std::str::FromStr;
use std::sync::Mutex;
use tracing_subscriber::filter::LevelFilter;

/// Installs the global subscriber as the environment asks. Returns a warning to show when the
/// settings could not be honoured (an unknown level, an unwritable file).
pub(crate) fn init(level: Option<&str>, path: Option<&str>) -> Option<String> {
    let level = level.map(str::trim).filter(|l| !l.is_empty())?;
    let filter = match LevelFilter::from_str(level) {
        Ok(f) => f,
        Err(_) => {
            return Some(format!(
                "CAIRN_LOG={level:?} is not a log level; use trace, debug, info, warn or error"
            ))
        }
    };
    let builder = tracing_subscriber::fmt()
        .with_max_level(filter)
        .with_target(true)
        .with_ansi(false);
    match path.filter(|p| !p.is_empty()) {
        Some(p) => match OpenOptions::new().create(true).append(true).open(p) {
            Ok(f) => {
                let _ = builder.with_writer(Mutex::new(f)).try_init();
                None
            }
            Err(e) => Some(format!(
                "cannot open CAIRN_LOG_PATH {p:?}: {e}; logging is off"
            )),
        },
        None => {
            let _ = builder.with_writer(std::io::stderr).try_init();
            None
        }
    }
}
