//! Diagnostics: failures are values. Every user-facing problem is a `Diagnostic` with a severity,
//! a summary (sentence case, no trailing period), a detail that says what to do, and — where
//! there is one — a source span or a resource address. Code collects them and reports them all.
//!
//! Spans are byte ranges into a file registered in the `SourceMap`; line and column are computed
//! from the map's line index when a diagnostic is rendered or serialized.

use serde::Serialize;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Error,
    Warning,
}

/// A file registered in a `SourceMap`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FileId(pub(crate) u32);

/// A byte range in one source file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Span {
    pub(crate) file: FileId,
    pub(crate) start: usize,
    pub(crate) end: usize,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnostic {
    pub severity: Severity,
    pub summary: String,
    pub detail: String,
    pub(crate) span: Option<Span>,
    /// The resource or provider address the problem belongs to, when it has one.
    pub(crate) address: Option<String>,
}

impl Diagnostic {
    pub(crate) fn error(summary: impl Into<String>, detail: impl Into<String>) -> Self {
        Diagnostic {
            severity: Severity::Error,
            summary: summary.into(),
            detail: detail.into(),
            span: None,
            address: None,
        }
    }
    pub(crate) fn warning(summary: impl Into<String>, detail: impl Into<String>) -> Self {
        Diagnostic {
            severity: Severity::Warning,
            ..Diagnostic::error(summary, detail)
        }
    }
    pub(crate) fn with_span(mut self, span: Option<Span>) -> Self {
        if self.span.is_none() {
            self.span = span;
        }
        self
    }
    pub(crate) fn with_address(mut self, address: impl ToString) -> Self {
        if self.address.is_none() {
            self.address = Some(address.to_string());
        }
        self
    }
    pub(crate) fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }
    /// The same finding as a warning (a `check` block's, which never stops a run).
    pub(crate) fn into_warning(self) -> Self {
        Diagnostic {
            severity: Severity::Warning,
            ..self
        }
    }
}

/// A collection of diagnostics, in the order they were found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Diagnostics(pub(crate) Vec<Diagnostic>);

impl Diagnostics {
    pub(crate) fn new() -> Self {
        Diagnostics(Vec::new())
    }
    pub(crate) fn push(&mut self, d: Diagnostic) {
        self.0.push(d);
    }
    pub(crate) fn extend(&mut self, other: impl IntoIterator<Item = Diagnostic>) {
        self.0.extend(other);
    }
    pub fn has_errors(&self) -> bool {
        self.0.iter().any(Diagnostic::is_error)
    }
    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }
    pub fn iter(&self) -> std::slice::Iter<'_, Diagnostic> {
        self.0.iter()
    }
    pub(crate) fn error_count(&self) -> usize {
        self.0.iter().filter(|d| d.is_error()).count()
    }
    pub(crate) fn warning_count(&self) -> usize {
        self.0.len() - self.error_count()
    }
}

impl From<Diagnostic> for Diagnostics {
    fn from(d: Diagnostic) -> Self {
        Diagnostics(vec![d])
    }
}

impl IntoIterator for Diagnostics {
    type Item = Diagnostic;
    type IntoIter = std::vec::IntoIter<Diagnostic>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.into_iter()
    }
}

impl<'a> IntoIterator for &'a Diagnostics {
    type Item = &'a Diagnostic;
    type IntoIter = std::slice::Iter<'a, Diagnostic>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}

impl FromIterator<Diagnostic> for Diagnostics {
    fn from_iter<T: IntoIterator<Item = Diagnostic>>(iter: T) -> Self {
        Diagnostics(iter.into_iter().collect())
    }
}

/// A line/column position: 1-based line and column (in characters), 0-based byte offset.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub(crate) struct Pos {
    pub(crate) line: usize,
    pub(crate) column: usize,
    pub(crate) byte: usize,
}

#[derive(Clone, Debug)]
struct SourceFile {
    /// The path as it is shown to users (relative to the working directory where possible).
    path: PathBuf,
    text: Arc<str>,
    /// Byte offset of the start of each line: `u32`s, sized exactly (a 100,000-resource file
    /// has 300,000 lines). A file past 4 GiB (which no parser here reads whole) saturates.
    line_starts: Box<[u32]>,
    /// For a text made from other files (a `.tf.json` file rewritten as HCL, blocks merged
    /// with override files): where each piece comes from, `(offset here, file, offset there)`
    /// by offset here. Positions, paths and snippets are shown in those files.
    origins: Option<Vec<(usize, FileId, usize)>>,
    /// Written in Terraform's JSON syntax (or made from such a file).
    json: bool,
}

/// Where a byte of a text made from others comes from, by its origins (`(offset here, file,
/// offset there)`, by offset here): the last origin at or before it plus the distance, kept
/// short of the next origin when that one is further on in the same file.
pub(crate) fn anchored_offset(origins: &[(usize, FileId, usize)], byte: usize) -> (FileId, usize) {
    let i = origins.partition_point(|a| a.0 <= byte);
    if i == 0 {
        return origins.first().map_or((FileId(0), 0), |o| (o.1, 0));
    }
    let (g, f, j) = origins[i - 1];
    let at = j + (byte - g);
    match origins.get(i) {
        Some(&(_, nf, next)) if nf == f && next >= j => (f, at.min(next)),
        _ => (f, at),
    }
}

fn line_starts(text: &str) -> Box<[u32]> {
    let at = |i: usize| u32::try_from(i).unwrap_or(u32::MAX);
    std::iter::once(0)
        .chain(text.match_indices('\n').map(|(i, _)| at(i + 1)))
        .collect()
}

/// Every source file that was read, so spans can be turned into positions and snippets.
#[derive(Clone, Debug, Default)]
pub struct SourceMap {
    files: Vec<SourceFile>,
}

impl SourceMap {
    pub(crate) fn new() -> Self {
        SourceMap::default()
    }

    /// How many files the map holds.
    pub(crate) fn file_count(&self) -> usize {
        self.files.len()
    }

    /// Forgets the files added after the first `n` (nothing may refer to them any more).
    pub(crate) fn truncate(&mut self, n: usize) {
        self.files.truncate(n);
    }

    pub(crate) fn add(&mut self, path: impl AsRef<Path>, text: impl Into<Arc<str>>) -> FileId {
        let text: Arc<str> = text.into();
        self.files.push(SourceFile {
            path: path.as_ref().to_path_buf(),
            line_starts: line_starts(&text),
            text,
            origins: None,
            json: false,
        });
        FileId(self.files.len() as u32 - 1)
    }

    /// Adds a text made from other files of the map (a `.tf.json` file rewritten as HCL,
    /// blocks merged with override files): spans are offsets into `text`; positions, paths
    /// and snippets are those of the files `origins` point into (`(offset in text, file,
    /// offset in that file)`, by offset in text). `json`: made from JSON syntax.
    pub(crate) fn add_rewritten(
        &mut self,
        path: impl AsRef<Path>,
        text: impl Into<Arc<str>>,
        origins: Vec<(usize, FileId, usize)>,
        json: bool,
    ) -> FileId {
        let id = self.add(path, text);
        let f = &mut self.files[id.0 as usize];
        f.origins = Some(origins);
        f.json = json;
        id
    }

    /// Marks a file as written in JSON syntax.
    pub(crate) fn set_json(&mut self, file: FileId) {
        self.files[file.0 as usize].json = true;
    }

    /// Whether a file is written in JSON syntax (or made from such a file).
    pub(crate) fn is_json(&self, file: FileId) -> bool {
        self.files[file.0 as usize].json
    }

    /// The file and byte users see for a byte of `file` (through its origins, if any).
    pub(crate) fn resolve(&self, file: FileId, byte: usize) -> (FileId, usize) {
        let (mut file, mut byte) = (file, byte);
        // Origins always point at files added earlier: this ends.
        while let Some(o) = &self.files[file.0 as usize].origins {
            let (f, b) = anchored_offset(o, byte);
            if f.0 >= file.0 {
                break;
            }
            (file, byte) = (f, b);
        }
        let text = &self.files[file.0 as usize].text;
        let mut byte = byte.min(text.len());
        while !text.is_char_boundary(byte) {
            byte -= 1;
        }
        (file, byte)
    }

    /// The text and line starts users see for a file, and a byte of the file in that text.
    fn shown(&self, file: FileId, byte: usize) -> (&str, &[u32], usize) {
        let (file, byte) = self.resolve(file, byte);
        let f = &self.files[file.0 as usize];
        (&f.text, &f.line_starts, byte)
    }

    /// The path users see for a span starting at `byte` of `file`.
    pub(crate) fn path_at(&self, file: FileId, byte: usize) -> &Path {
        self.path(self.resolve(file, byte).0)
    }

    /// Every file: its path and text.
    pub(crate) fn files(&self) -> impl Iterator<Item = (&Path, &str)> {
        self.files.iter().map(|f| (f.path.as_path(), &*f.text))
    }

    pub(crate) fn path(&self, file: FileId) -> &Path {
        &self.files[file.0 as usize].path
    }

    pub(crate) fn text(&self, file: FileId) -> &str {
        &self.files[file.0 as usize].text
    }

    /// The line, column and byte of a byte of `file`, in the text users see (the JSON of a
    /// `.tf.json` file).
    pub(crate) fn pos(&self, file: FileId, byte: usize) -> Pos {
        let (text, line_starts, byte) = self.shown(file, byte);
        let byte = byte.min(text.len());
        let line = line_starts.partition_point(|&s| s as usize <= byte) - 1;
        let start = line_starts[line] as usize;
        let column = text
            .get(start..byte)
            .map(|s| s.chars().count())
            .unwrap_or(byte - start)
            + 1;
        Pos {
            line: line + 1,
            column,
            byte,
        }
    }

    /// `file:line:col` of a span's start.
    pub(crate) fn location(&self, span: Span) -> String {
        let p = self.pos(span.file, span.start);
        format!(
            "{}:{}:{}",
            self.path_at(span.file, span.start).display(),
            p.line,
            p.column
        )
    }

    /// Renders one diagnostic as Terraform does: a heading, the location, a snippet with a caret
    /// under the span, and the detail.
    pub fn render(&self, d: &Diagnostic, color: bool) -> String {
        let (red, yellow, bold, reset) = if color {
            ("\x1b[31m", "\x1b[33m", "\x1b[1m", "\x1b[0m")
        } else {
            ("", "", "", "")
        };
        let (tone, word) = match d.severity {
            Severity::Error => (red, "Error"),
            Severity::Warning => (yellow, "Warning"),
        };
        let mut out = String::new();
        let _ = writeln!(out, "{tone}╷{reset}");
        let _ = writeln!(
            out,
            "{tone}│{reset} {tone}{bold}{word}:{reset} {bold}{}{reset}",
            d.summary
        );
        if d.span.is_some() || d.address.is_some() {
            let _ = writeln!(out, "{tone}│{reset}");
        }
        if let Some(span) = d.span {
            let start = self.pos(span.file, span.start);
            let end = self.pos(span.file, span.end.max(span.start));
            let _ = writeln!(
                out,
                "{tone}│{reset}   on {}:{}:{}:",
                self.path_at(span.file, span.start).display(),
                start.line,
                start.column
            );
            let (text, line_starts, _) = self.shown(span.file, span.start);
            let line_start = (line_starts[start.line - 1] as usize).min(text.len());
            let line_end = text[line_start..]
                .find('\n')
                .map(|i| line_start + i)
                .unwrap_or(text.len());
            let line = text[line_start..line_end].trim_end_matches('\r');
            let _ = writeln!(out, "{tone}│{reset}   {:>4}: {}", start.line, line);
            let width = if end.line == start.line {
                (end.column.saturating_sub(start.column)).max(1)
            } else {
                1
            };
            let _ = writeln!(
                out,
                "{tone}│{reset}         {}{bold}{}{reset}",
                " ".repeat(start.column - 1),
                "^".repeat(width.min(line.chars().count().saturating_sub(start.column - 1).max(1)))
            );
        }
        if let Some(a) = &d.address {
            let _ = writeln!(out, "{tone}│{reset}   with {a}");
        }
        if !d.detail.is_empty() {
            let _ = writeln!(out, "{tone}│{reset}");
            for l in d.detail.lines() {
                let _ = writeln!(out, "{tone}│{reset} {l}");
            }
        }
        let _ = writeln!(out, "{tone}╵{reset}");
        out
    }

    /// The JSON form used by `validate -json` and the `-json` UI, as Terraform writes it.
    pub fn to_json(&self, d: &Diagnostic) -> serde_json::Value {
        let mut o = serde_json::json!({
            "severity": d.severity,
            "summary": d.summary,
            "detail": d.detail,
        });
        if let Some(span) = d.span {
            let start = self.pos(span.file, span.start);
            let end = self.pos(span.file, span.end.max(span.start));
            o["range"] = serde_json::json!({
                "filename": self.path_at(span.file, span.start).display().to_string(),
                "start": start,
                "end": end,
            });
        }
        if let Some(a) = &d.address {
            o["address"] = serde_json::Value::String(a.clone());
        }
        o
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_a_caret_under_the_span() {
        let mut map = SourceMap::new();
        let f = map.add("main.tf", "resource \"x\" \"y\" {\n  name = \"a\" + 1\n}\n");
        let start = map.text(f).find("\"a\" + 1").unwrap();
        let d = Diagnostic::error(
            "Invalid operand",
            "Unsuitable value for left operand: a number is required.",
        )
        .with_span(Some(Span {
            file: f,
            start,
            end: start + 7,
        }));
        let text = map.render(&d, false);
        assert!(text.contains("on main.tf:2:10:"), "{text}");
        let expected = format!(
            "      2:   name = \"a\" + 1\n│{}^^^^^^^\n",
            " ".repeat(9 + 9)
        );
        assert!(text.contains(&expected), "{text}");
        let j = map.to_json(&d);
        assert_eq!(j["range"]["start"]["line"], 2);
        assert_eq!(j["range"]["start"]["column"], 10);
        assert_eq!(j["range"]["end"]["column"], 17);
    }
}
