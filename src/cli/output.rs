//! Where output goes and how it looks: the colour decision, diagnostics (human via
//! `SourceMap::render`, or `-json` UI messages), the machine-readable UI stream, and exit codes.
//!
//! Decisions:
//! - Colour is on only when the stream is a terminal, `-no-color` was not given and `NO_COLOR`
//!   is unset or empty (<https://no-color.org>); each stream decides for itself.
//! - The `-json` UI writes one object per line with Terraform's envelope (`@level`, `@message`,
//!   `@module`, `@timestamp`, `type`), with `@module` = `cairn.ui`. The clock is injectable so
//!   the stream can be golden-tested.
//! - Exit codes are Terraform's: 0 success, 1 error, 2 "changes present" (only with
//!   `-detailed-exitcode`).

use crate::diag::{Diagnostic, Diagnostics, Severity, SourceMap};
use serde_json::{json, Map, Value as J};
use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

/// Process exit codes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exit {
    Ok = 0,
    Error = 1,
    /// `-detailed-exitcode` and the plan has changes (also `fmt`'s exit on a syntax error,
    /// which is 2 in Terraform).
    Changes = 2,
    /// `fmt -check`: some input is not in the canonical format.
    Unformatted = 3,
}

impl Exit {
    pub fn code(self) -> i32 {
        self as i32
    }
}

/// Whether to colour a stream: it is a terminal, `-no-color` was not given, `NO_COLOR` is not
/// set to a non-empty value.
pub(crate) fn color_enabled(
    no_color_flag: bool,
    is_terminal: bool,
    no_color_env: Option<&str>,
) -> bool {
    is_terminal && !no_color_flag && no_color_env.is_none_or(str::is_empty)
}

/// The width prose is wrapped at: the terminal's, else 80.
pub(crate) fn render_width(is_tty: bool) -> usize {
    if is_tty {
        // SAFETY: TIOCGWINSZ fills a winsize struct we own; a failure leaves it zeroed.
        let mut ws: libc::winsize = unsafe { std::mem::zeroed() };
        let ok = unsafe { libc::ioctl(libc::STDOUT_FILENO, libc::TIOCGWINSZ, &mut ws) } == 0;
        if ok && ws.ws_col >= 40 {
            return ws.ws_col as usize;
        }
    }
    80
}

/// A shareable output stream (the observer writes from many tasks; commands write too).
pub(crate) type Sink = Arc<Mutex<Box<dyn Write + Send>>>;

pub(crate) fn sink(w: impl Write + Send + 'static) -> Sink {
    Arc::new(Mutex::new(Box::new(w)))
}

/// Writes to a sink, ignoring a closed pipe (`cairn log | head` must not panic).
pub(crate) fn write_to(s: &Sink, text: &str) {
    let mut w = match s.lock() {
        Ok(w) => w,
        Err(poisoned) => poisoned.into_inner(),
    };
    let _ = w.write_all(text.as_bytes());
    let _ = w.flush();
}

/// Prints diagnostics in the human form, errors and warnings alike, to `out`.
///
/// One problem is printed once: diagnostics that differ only in the instance they are about
/// (the same error evaluating one expression for each of 1,200 instances) are one, naming the
/// first instance and how many more it affects.
pub(crate) fn render_diagnostics(map: &SourceMap, diags: &Diagnostics, color: bool) -> String {
    let mut s = String::new();
    for (d, more) in group_diagnostics(diags) {
        if more.is_empty() {
            s.push_str(&map.render(d, color));
        } else {
            let mut one = d.clone();
            one.address = Some(format!(
                "{} (and {} more instance{})",
                d.address.as_deref().unwrap_or_default(),
                more.len(),
                if more.len() == 1 { "" } else { "s" }
            ));
            s.push_str(&map.render(&one, color));
        }
        s.push('\n');
    }
    s
}

/// One problem once: diagnostics that differ only in the instance they are about (the same
/// error evaluating one expression for each of 1,200 instances) are one, with the other
/// instances it affects. The human form and the `-json` stream both print these.
pub(crate) fn group_diagnostics(diags: &Diagnostics) -> Vec<(&crate::diag::Diagnostic, Vec<&str>)> {
    let mut groups: Vec<(&crate::diag::Diagnostic, Vec<&str>)> = Vec::new();
    for d in diags {
        let same = groups.iter_mut().find(|(g, _)| {
            g.address.is_some()
                && d.address.is_some()
                && g.severity == d.severity
                && g.summary == d.summary
                && g.detail == d.detail
                && g.span == d.span
        });
        match (same, d.address.as_deref()) {
            // The same finding twice for one instance (a plan's and an apply's walk) is one.
            (Some((g, _)), Some(a)) if g.address.as_deref() == Some(a) => {}
            (Some((_, more)), Some(a)) => {
                if !more.contains(&a) {
                    more.push(a);
                }
            }
            _ => groups.push((d, Vec::new())),
        }
    }
    groups
}

/// A clock, so tests can fix time.
pub(crate) type Clock = Arc<dyn Fn() -> SystemTime + Send + Sync>;

pub(crate) fn system_clock() -> Clock {
    Arc::new(SystemTime::now)
}

/// RFC 3339 in UTC with microseconds, as Terraform writes `@timestamp`:
/// `2026-11-29T12:48:34.154216Z`.
pub(crate) fn rfc3339(t: SystemTime) -> String {
    let d = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = d.as_secs();
    let (y, m, day) = civil_from_days((secs / 86_400) as i64);
    let rem = secs % 86_400;
    format!(
        "{y:04}-{m:02}-{day:02}T{:02}:{:02}:{:02}.{:06}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        d.subsec_micros()
    )
}

/// RFC 3339 without fractions, for human tables: `2026-11-29T12:48:34Z`.
pub(crate) fn rfc3339_seconds(t: SystemTime) -> String {
    let full = rfc3339(t);
    format!("{}Z", &full[..19])
}

/// Days since 1970-01-01 to (year, month, day), proleptic Gregorian (Howard Hinnant's
/// `civil_from_days`).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// The `-json` UI: one JSON object per line, Terraform's envelope.
#[derive(Clone)]
pub struct JsonUi {
    out: Sink,
    clock: Clock,
}

impl JsonUi {
    pub fn new(out: Sink, clock: Clock) -> Self {
        JsonUi { out, clock }
    }

    /// Emits one message: `fields` are merged into the envelope.
    pub fn emit(&self, level: &str, message: &str, type_: &str, fields: Map<String, J>) {
        let mut o = Map::new();
        o.insert("@level".into(), J::from(level));
        o.insert("@message".into(), J::from(message));
        o.insert("@module".into(), J::from("cairn.ui"));
        o.insert("@timestamp".into(), J::from(rfc3339((self.clock)())));
        for (k, v) in fields {
            o.insert(k, v);
        }
        o.insert("type".into(), J::from(type_));
        let mut line = J::Object(o).to_string();
        line.push('\n');
        write_to(&self.out, &line);
    }

    /// The first message of every stream.
    pub fn version(&self) {
        let v = env!("CARGO_PKG_VERSION");
        let mut f = Map::new();
        f.insert("cairn".into(), J::from(v));
        f.insert("ui".into(), J::from("1.2"));
        self.emit("info", &format!("Cairn {v}"), "version", f);
    }

    pub fn diagnostic(&self, map: &SourceMap, d: &Diagnostic) {
        self.diagnostic_of(map, d, &[]);
    }

    /// A `diagnostic` message about `d.address` and the instances `more` (the same problem
    /// once: Cairn's `cairn_more_addresses` lists the others).
    pub fn diagnostic_of(&self, map: &SourceMap, d: &Diagnostic, more: &[&str]) {
        let (level, word) = match d.severity {
            Severity::Error => ("error", "Error"),
            Severity::Warning => ("warn", "Warning"),
        };
        let mut f = Map::new();
        let mut j = map.to_json(d);
        if !more.is_empty() {
            j["cairn_more_addresses"] = json!(more);
        }
        f.insert("diagnostic".into(), j);
        self.emit(level, &format!("{word}: {}", d.summary), "diagnostic", f);
    }

    /// A `change_summary` message: `operation` is `plan`, `apply` or `destroy`.
    pub fn change_summary(
        &self,
        operation: &str,
        import: usize,
        add: usize,
        change: usize,
        remove: usize,
    ) {
        let message = match (operation, import) {
            ("plan", 0) => format!("Plan: {add} to add, {change} to change, {remove} to destroy."),
            ("plan", n) => format!(
                "Plan: {n} to import, {add} to add, {change} to change, {remove} to destroy."
            ),
            ("destroy", _) => format!("Destroy complete! Resources: {remove} destroyed."),
            (_, 0) => format!(
                "Apply complete! Resources: {add} added, {change} changed, {remove} destroyed."
            ),
            (_, n) => format!(
                "Apply complete! Resources: {n} imported, {add} added, {change} changed, {remove} destroyed."
            ),
        };
        let mut f = Map::new();
        f.insert(
            "changes".into(),
            json!({"add": add, "change": change, "import": import, "remove": remove,
                   "operation": operation}),
        );
        self.emit("info", &message, "change_summary", f);
    }
}

/// Test helpers: a sink whose bytes can be read back.
#[cfg(test)]
pub(crate) mod testing {
    use std::sync::{Arc, Mutex};

    #[derive(Clone, Default)]
    pub(crate) struct Capture(pub Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Capture {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl Capture {
        pub(crate) fn text(&self) -> String {
            String::from_utf8_lossy(&self.0.lock().unwrap_or_else(|p| p.into_inner())).into_owned()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn timestamps_are_rfc3339() {
        for (secs, micros, expected) in [
            (0, 0, "1970-01-01T00:00:00.000000Z"),
            (1_796_215_714, 154_216, "2026-12-02T12:48:34.154216Z"),
            (951_782_400, 1, "2000-02-29T00:00:00.000001Z"),
            (4_107_542_399, 999_999, "2100-02-28T23:59:59.999999Z"),
        ] {
            let t = UNIX_EPOCH + Duration::from_secs(secs) + Duration::from_micros(micros);
            assert_eq!(rfc3339(t), expected);
        }
        assert_eq!(
            rfc3339_seconds(UNIX_EPOCH + Duration::from_millis(1500)),
            "1970-01-01T00:00:01Z"
        );
    }

    #[test]
    fn colour_decision() {
        assert!(color_enabled(false, true, None));
        assert!(color_enabled(false, true, Some("")));
        assert!(!color_enabled(false, true, Some("1")));
        assert!(!color_enabled(true, true, None));
        assert!(!color_enabled(false, false, None));
    }
}
