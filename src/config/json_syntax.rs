//! Terraform's JSON configuration syntax (`*.tf.json`, `*.tfvars.json`).
//!
//! A JSON file is parsed with `jsonc-parser` in strict JSON mode (it keeps the byte range of
//! every value and property name) and rewritten as HCL native syntax, which the loader then
//! parses and decodes exactly like a `.tf` file: one block decoder for both syntaxes. The
//! rewrite follows Terraform's rules for JSON bodies:
//!
//! - a property whose name is a block type of the body (`resource`, `variable`, `lifecycle`,
//!   `dynamic`, …) is one block (an object) or several (an array of objects); each label is
//!   one more level of object keys (each level may also be an array of objects);
//! - every other property is an argument; the `"//"` property of a body is a comment;
//! - a string is a template (`"${var.x}"` is the value of `var.x`, of its own type), except
//!   where Terraform reads a bare expression from a string: `depends_on`, `provider`,
//!   `providers`, variable `type`, lifecycle `ignore_changes` and `replace_triggered_by`, a
//!   `dynamic` block's `iterator`, `moved`/`removed`/`import` addresses;
//! - in a variables file (`*.tfvars.json`) strings are literal values.
//!
//! Nested blocks of a resource, data source or provider are not known without the provider's
//! schema (loading never calls a provider): they are rewritten as arguments with object (or
//! tuple of objects) values, and `eval::body` decodes such an argument as blocks when the
//! schema says it is a block type and the body came from JSON (`Resource::json`).
//!
//! Every piece of HCL written is anchored to the JSON position it came from
//! (`Translated::anchors`), and the `SourceMap` shows positions, lines and snippets of the
//! JSON file: diagnostics and `inspect` locations carry `file:line:col` into the JSON. Inside a
//! string with escapes the column drifts by the escapes' extra bytes, as in Terraform.

use jsonc_parser::ast::{Object, ObjectProp, ObjectPropName, StringLit, Value as J};
use jsonc_parser::common::Ranged;

/// A JSON configuration file rewritten as HCL.
#[derive(Debug, Default)]
pub(crate) struct Translated {
    pub(crate) hcl: String,
    /// `(hcl offset, json offset)`, by increasing HCL offset: each piece of `hcl` from an
    /// anchor on comes from the JSON text at the anchor's JSON offset on. JSON offsets go
    /// back where a block's header repeats a key written once (`"resource"` for every
    /// resource).
    pub(crate) anchors: Vec<(usize, usize)>,
}

/// A problem found in the JSON, with byte offsets into the JSON text.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct JsonError {
    pub(crate) start: usize,
    pub(crate) end: usize,
    pub(crate) summary: &'static str,
    pub(crate) detail: String,
}

/// Which file a JSON text is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// `*.tf.json`: a configuration body.
    Config,
    /// `*.tfvars.json`: an object of variable values (literal strings).
    Vars,
}

/// Parses `text` as strict JSON. `Err` is the syntax error, as a `JsonError`.
fn parse(text: &str) -> Result<J<'_>, JsonError> {
    let opts = jsonc_parser::ParseOptions {
        allow_comments: false,
        allow_loose_object_property_names: false,
        allow_trailing_commas: false,
        allow_missing_commas: false,
        allow_single_quoted_strings: false,
        allow_hexadecimal_numbers: false,
        allow_unary_plus_numbers: false,
        allow_bare_decimal_point_numbers: false,
        allow_non_finite_numbers: false,
        allow_extended_string_escapes: false,
    };
    match jsonc_parser::parse_to_ast(text, &Default::default(), &opts) {
        Ok(r) => match r.value {
            Some(v) => Ok(v),
            None => Err(JsonError {
                start: 0,
                end: 0,
                summary: "Missing value",
                detail: "The JSON data ends prematurely.".into(),
            }),
        },
        Err(e) => {
            let r = e.range();
            let (summary, detail) = syntax_message(text, r.start, e.kind());
            Err(JsonError {
                start: r.start,
                end: r.end.max(r.start),
                summary,
                detail,
            })
        }
    }
}

/// Terraform's words for a JSON syntax error at `at`.
fn syntax_message(
    text: &str,
    at: usize,
    kind: &jsonc_parser::errors::ParseErrorKind,
) -> (&'static str, String) {
    use jsonc_parser::errors::ParseErrorKind as K;
    let in_array = innermost_open(text, at) == Some('[');
    let start_of_value = (
        "Invalid start of value",
        "A JSON value must start with a brace, a bracket, a number, a string, or a keyword.",
    );
    let (summary, detail) = match kind {
        K::TrailingCommasNotAllowed => {
            let next = text
                .get(at + 1..)
                .and_then(|t| t.trim_start().chars().next());
            if next == Some(']') {
                (
                    "Trailing comma in array",
                    "JSON does not permit a trailing comma after the final value in an array.",
                )
            } else {
                (
                    "Trailing comma in object",
                    "JSON does not permit a trailing comma after the final property in an \
                     object.",
                )
            }
        }
        K::ExpectedComma if in_array => (
            "Missing attribute seperator comma",
            "A comma must appear between each value in an array.",
        ),
        K::ExpectedComma => (
            "Missing attribute seperator comma",
            "A comma must appear between each property definition in an object.",
        ),
        K::ExpectedColonAfterObjectKey => (
            "Missing property value colon",
            "A colon must appear between an object property's name and its value.",
        ),
        K::UnterminatedObject => (
            "Unclosed object",
            "No closing brace was found for this JSON object.",
        ),
        K::UnterminatedArray => (
            "Unclosed array",
            "No closing bracket was found for this JSON array.",
        ),
        K::MultipleRootJsonValues => (
            "Extraneous data after value",
            "Extra characters appear after the JSON value.",
        ),
        K::ExpectedStringObjectProperty => (
            "Invalid object property name",
            "A JSON object property name must be a string",
        ),
        K::String(_) => (
            "Invalid JSON string",
            "There is a syntax error in the given JSON string.",
        ),
        K::UnexpectedWord => {
            let word: String = text[at..]
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            let hint = ["true", "false", "null"]
                .into_iter()
                // The first character, not byte: a word may start with any letter.
                .find(|k| word.chars().next().is_none_or(|c| k.starts_with(c)))
                .map(|k| format!(" Did you mean {}?", cairn_state::quote(k)))
                .unwrap_or_default();
            return (
                "Invalid JSON keyword",
                format!(
                    "{} is not a valid JSON keyword.{hint}",
                    cairn_state::quote(&word)
                ),
            );
        }
        K::UnexpectedCloseBrace if in_array => (
            "Mismatched brackets",
            "A JSON array must be closed with a bracket, not a brace.",
        ),
        K::UnexpectedCloseBracket if !in_array => (
            "Mismatched braces",
            "A JSON object must be closed with a brace, not a bracket.",
        ),
        _ => start_of_value,
    };
    (summary, detail.to_string())
}

/// The innermost bracket (`{` or `[`) still open at `at`, outside strings.
fn innermost_open(text: &str, at: usize) -> Option<char> {
    let mut stack = Vec::new();
    let mut in_string = false;
    let mut escaped = false;
    for c in text[..at.min(text.len())].chars() {
        if in_string {
            match c {
                _ if escaped => escaped = false,
                '\\' => escaped = true,
                '"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match c {
            '"' => in_string = true,
            '{' | '[' => stack.push(c),
            '}' | ']' => {
                stack.pop();
            }
            _ => {}
        }
    }
    stack.pop()
}

/// Rewrites a JSON file as HCL (see the module docs). `None` when the text is not JSON (the
/// syntax error is in the list); otherwise the HCL of everything that could be rewritten,
/// with the structural errors found.
pub(crate) fn translate(
    text: &str,
    path: &str,
    kind: Kind,
) -> (Option<Translated>, Vec<JsonError>) {
    let root = match parse(text) {
        Ok(v) => v,
        Err(e) => return (None, vec![e]),
    };
    let mut w = Writer {
        text,
        path,
        out: Translated::default(),
        errors: Vec::new(),
        literal: kind == Kind::Vars,
    };
    match kind {
        Kind::Config => match &root {
            J::Object(o) => w.body(o, BodyKind::File),
            J::Array(a) if a.elements.iter().all(|e| matches!(e, J::Object(_))) => {
                for e in &a.elements {
                    if let J::Object(o) = e {
                        w.body(o, BodyKind::File);
                    }
                }
            }
            other => w.error(
                other.range(),
                "Root value must be object",
                "The root value in a JSON-based configuration must be either a JSON object or a \
                 JSON array of objects.",
            ),
        },
        Kind::Vars => match &root {
            J::Object(o) => w.body(o, BodyKind::Attributes),
            other => w.error(
                other.range(),
                "Invalid variables file",
                "The root value of a JSON variables file must be an object, whose properties \
                 are the variables' values.",
            ),
        },
    }
    (Some(w.out), w.errors)
}

/// The body schemas of Terraform's configuration language, as far as the JSON decoding needs
/// them: which properties are blocks (with how many labels and what body), which arguments
/// are bare expressions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BodyKind {
    File,
    Terraform,
    RequiredProviders,
    Variable,
    Validation,
    /// Every property is an argument (backend, connection, variables files…).
    Attributes,
    Locals,
    Output,
    Resource,
    Lifecycle,
    Condition,
    Provisioner,
    Dynamic,
    Module,
    /// `moved`, `removed`, `import`: addresses are bare expressions.
    StateBlock,
    Check,
    /// `terraform { encryption { … } }` (OpenTofu's state and plan encryption).
    Encryption,
    /// `state`, `plan` and the remote state targets of an `encryption` block.
    EncryptionTarget,
    /// `remote_state_data_sources` of an `encryption` block.
    RemoteStateSources,
}

impl BodyKind {
    /// The nested block types of this body: `(type, labels, body)`.
    fn block(self, name: &str) -> Option<(usize, BodyKind)> {
        use BodyKind::*;
        Some(match (self, name) {
            (File, "terraform") => (0, Terraform),
            (File, "provider") => (1, Resource),
            (File, "variable") => (1, Variable),
            (File, "locals") => (0, Locals),
            (File, "output") => (1, Output),
            (File, "resource" | "data" | "ephemeral") => (2, Resource),
            (File, "module") => (1, Module),
            (File, "moved" | "import" | "removed") => (0, StateBlock),
            (File, "check") => (1, Check),
            (Terraform, "required_providers") => (0, RequiredProviders),
            (Terraform, "backend") => (1, Attributes),
            (Terraform, "cloud") => (0, Attributes),
            (Terraform, "provider_meta") => (1, Attributes),
            (Terraform, "encryption") => (0, Encryption),
            (Encryption, "key_provider" | "method") => (2, Attributes),
            (Encryption, "state" | "plan") => (0, EncryptionTarget),
            (Encryption, "remote_state_data_sources") => (0, RemoteStateSources),
            (EncryptionTarget, "fallback") => (0, Attributes),
            (RemoteStateSources, "default") => (0, EncryptionTarget),
            (RemoteStateSources, "remote_state_data_source") => (1, EncryptionTarget),
            (Variable, "validation") => (0, Validation),
            (Output, "precondition") => (0, Condition),
            (Resource, "lifecycle") => (0, Lifecycle),
            (Resource, "provisioner") => (1, Provisioner),
            (Resource, "connection") => (0, Attributes),
            (Resource, "dynamic") => (1, Dynamic),
            (Dynamic, "content") => (0, Resource),
            (Lifecycle, "precondition" | "postcondition") => (0, Condition),
            (Provisioner, "connection") => (0, Attributes),
            (StateBlock, "lifecycle") => (0, Attributes),
            (Check, "data") => (2, Resource),
            (Check, "assert") => (0, Condition),
            _ => return None,
        })
    }

    /// Whether an argument of this body is a bare expression written as a string.
    fn bare(self, name: &str) -> bool {
        use BodyKind::*;
        matches!(
            (self, name),
            (Resource | Module | Output, "depends_on")
                | (Resource, "provider")
                | (Module, "providers")
                | (Variable, "type")
                | (Lifecycle, "ignore_changes" | "replace_triggered_by")
                | (Dynamic, "iterator")
                | (StateBlock, "from" | "to")
        )
    }
}

/// How a JSON value is read as an expression.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Strings are templates.
    Template,
    /// Strings are bare HCL expressions.
    Bare,
    /// A `required_providers` entry: `configuration_aliases` holds bare references.
    RequiredProvider,
}

struct Writer<'t> {
    /// The JSON text and its path as shown, for ranges in messages.
    text: &'t str,
    path: &'t str,
    out: Translated,
    errors: Vec<JsonError>,
    /// Strings are literal values (variables files).
    literal: bool,
}

fn prop_name<'a>(p: &'a ObjectProp<'a>) -> (&'a str, jsonc_parser::common::Range) {
    match &p.name {
        ObjectPropName::String(s) => (s.value.as_ref(), s.range),
        ObjectPropName::Word(w) => (w.value, w.range),
    }
}

/// Whether `s` is an HCL identifier (an argument or block type name).
fn is_ident(s: &str) -> bool {
    let mut c = s.chars();
    c.next().is_some_and(|f| f.is_alphabetic() || f == '_')
        && c.all(|x| x.is_alphanumeric() || x == '_' || x == '-')
}

impl Writer<'_> {
    /// `main.tf.json:3,5-20`, as Terraform writes a range in a message.
    fn range_str(&self, r: jsonc_parser::common::Range) -> String {
        let pos = |at: usize| -> (usize, usize) {
            let before = &self.text[..at.min(self.text.len())];
            let line = before.matches('\n').count() + 1;
            let col = before.rsplit('\n').next().unwrap_or("").chars().count() + 1;
            (line, col)
        };
        let (a, b) = (pos(r.start), pos(r.end));
        if a.0 == b.0 {
            format!("{}:{},{}-{}", self.path, a.0, a.1, b.1)
        } else {
            format!("{}:{},{}-{},{}", self.path, a.0, a.1, b.0, b.1)
        }
    }

    fn error(&mut self, r: jsonc_parser::common::Range, summary: &'static str, detail: &str) {
        self.errors.push(JsonError {
            start: r.start,
            end: r.end.max(r.start),
            summary,
            detail: detail.to_string(),
        });
    }

    /// Marks that what is written next comes from JSON offset `json`.
    fn anchor(&mut self, json: usize) {
        let g = self.out.hcl.len();
        match self.out.anchors.last_mut() {
            Some(last) if last.0 == g => last.1 = json,
            _ => self.out.anchors.push((g, json)),
        }
    }

    fn push(&mut self, s: &str) {
        self.out.hcl.push_str(s);
    }

    fn body(&mut self, o: &Object, kind: BodyKind) {
        let mut seen: Vec<(&str, jsonc_parser::common::Range)> = Vec::new();
        for p in &o.properties {
            let (name, range) = prop_name(p);
            if name == "//" {
                continue;
            }
            if let Some((labels, inner)) = kind.block(name) {
                let at = range.start + 1;
                self.blocks(name, at, &p.value, labels, inner, &mut Vec::new());
                continue;
            }
            if !is_ident(name) {
                let summary = match kind {
                    BodyKind::Locals => "Invalid local value name",
                    _ => "Invalid argument name",
                };
                self.error(
                    range,
                    summary,
                    "A name must start with a letter or underscore and may contain only \
                     letters, digits, underscores, and dashes.",
                );
                continue;
            }
            if let Some((_, first)) = seen.iter().find(|(n, _)| *n == name) {
                let was = self.range_str(*first);
                self.errors.push(JsonError {
                    start: range.start,
                    end: range.end,
                    summary: "Duplicate attribute definition",
                    detail: format!(
                        "The argument {} was already set at {was}.",
                        cairn_state::quote(name),
                    ),
                });
                continue;
            }
            seen.push((name, p.range));
            self.push("\n");
            self.anchor(range.start + 1);
            self.push(name);
            self.push(" = ");
            let mode = if kind.bare(name) {
                Mode::Bare
            } else if kind == BodyKind::RequiredProviders {
                Mode::RequiredProvider
            } else {
                Mode::Template
            };
            self.expr(&p.value, mode);
        }
        self.push("\n");
    }

    /// The blocks of type `name` a property's value holds: `labels` more levels of object keys,
    /// then a body or an array of bodies.
    /// `at`: where the block is named in the JSON (its type's key, its last label's key, or
    /// its object in an array), which its header points at.
    fn blocks(
        &mut self,
        name: &str,
        at: usize,
        v: &J,
        labels: usize,
        inner: BodyKind,
        got: &mut Vec<(String, jsonc_parser::common::Range)>,
    ) {
        match v {
            J::Array(a) => {
                for e in &a.elements {
                    self.blocks(name, e.range().start, e, labels, inner, got);
                }
            }
            J::Object(o) if got.len() < labels => {
                for p in &o.properties {
                    let (key, r) = prop_name(p);
                    if key == "//" {
                        continue;
                    }
                    got.push((key.to_string(), r));
                    self.blocks(name, r.start + 1, &p.value, labels, inner, got);
                    got.pop();
                }
            }
            J::Object(o) => {
                self.push("\n");
                self.anchor(at);
                self.push(name);
                for (label, r) in got.iter() {
                    self.push(" ");
                    self.anchor(r.start);
                    self.quoted_literal(label, false);
                }
                self.push(" ");
                self.anchor(o.range.start);
                self.push("{");
                self.body(o, inner);
                self.anchor(o.range.end.saturating_sub(1));
                self.push("}\n");
            }
            other => {
                let detail = if got.len() < labels {
                    format!(
                        "A JSON object is required here, whose keys are the labels of {} \
                         blocks ({} more label{} expected).",
                        cairn_state::quote(name),
                        labels - got.len(),
                        if labels - got.len() == 1 { "" } else { "s" }
                    )
                } else {
                    format!(
                        "Either a JSON object or a JSON array is required, representing the \
                         contents of one or more {} blocks.",
                        cairn_state::quote(name)
                    )
                };
                self.error(other.range(), "Incorrect JSON value type", &detail);
            }
        }
    }

    fn expr(&mut self, v: &J, mode: Mode) {
        self.anchor(v.range().start);
        match v {
            J::StringLit(s) => self.string(s, mode),
            J::NumberLit(n) => self.push(n.value),
            J::BooleanLit(b) => self.push(if b.value { "true" } else { "false" }),
            J::NullKeyword(_) => self.push("null"),
            J::Array(a) => {
                self.push("[");
                for (i, e) in a.elements.iter().enumerate() {
                    if i > 0 {
                        self.push(", ");
                    }
                    self.expr(e, mode);
                }
                self.anchor(a.range.end.saturating_sub(1));
                self.push("]");
            }
            J::Object(o) => {
                self.push("{");
                for p in &o.properties {
                    let (_, r) = prop_name(p);
                    self.push("\n");
                    self.anchor(r.start);
                    match (&p.name, mode) {
                        (ObjectPropName::String(k), Mode::Template) => self.string(k, mode),
                        (ObjectPropName::String(k), Mode::Bare) => {
                            // A bare key is an expression too (`providers = { aws.x = aws.y }`).
                            self.string(k, Mode::Bare);
                        }
                        (ObjectPropName::String(k), Mode::RequiredProvider) => {
                            self.string(k, Mode::Template);
                        }
                        (ObjectPropName::Word(w), _) => self.quoted_literal(w.value, true),
                    }
                    self.push(" = ");
                    let inner = match mode {
                        Mode::RequiredProvider if prop_name(p).0 == "configuration_aliases" => {
                            Mode::Bare
                        }
                        Mode::RequiredProvider => Mode::Template,
                        m => m,
                    };
                    self.expr(&p.value, inner);
                }
                self.push("\n");
                self.anchor(o.range.end.saturating_sub(1));
                self.push("}");
            }
        }
    }

    /// A JSON string as an HCL expression: a bare expression, a literal or a template.
    fn string(&mut self, s: &StringLit, mode: Mode) {
        let text: &str = &s.value;
        let base = s.range.start + 1;
        if self.literal {
            self.quoted_literal(text, true);
            return;
        }
        if mode == Mode::Bare {
            if text.trim().is_empty() {
                self.push("null");
                self.error(
                    s.range,
                    "Invalid expression",
                    "A bare expression is expected in this string, not an empty string.",
                );
                return;
            }
            self.anchor(base);
            self.push(text);
            return;
        }
        if !text.contains("${") && !text.contains("%{") {
            self.quoted_literal(text, false);
            return;
        }
        let tpl = match hcl_edit::parser::parse_template(text) {
            Ok(t) => t,
            Err(e) => {
                let at = base + e.location().offset().min(text.len());
                let (summary, detail) = if e.message().contains("expected `}`") {
                    (
                        "Unclosed template interpolation sequence",
                        "There is no closing brace for this interpolation sequence before the \
                         end of the file. This might be caused by incorrect nesting inside the \
                         given expression."
                            .to_string(),
                    )
                } else {
                    (
                        "Invalid template",
                        format!("{}.", e.message().trim_end_matches('.')),
                    )
                };
                self.errors.push(JsonError {
                    start: at,
                    end: at + 1,
                    summary,
                    detail,
                });
                self.push("null");
                return;
            }
        };
        let mut literals = Vec::new();
        literal_spans(&tpl, &mut literals);
        literals.sort_by_key(|r| r.start);
        self.push("\"");
        let mut at = 0;
        for r in literals {
            if r.start > at {
                self.anchor(base + at);
                self.push(&text[at..r.start]);
            }
            self.anchor(base + r.start);
            escape_into(&mut self.out.hcl, &text[r.clone()], false);
            at = r.end;
        }
        if at < text.len() {
            self.anchor(base + at);
            self.push(&text[at..]);
        }
        self.push("\"");
    }

    /// `text` as an HCL quoted string with the same value; `escape_templates`: `${` and `%{`
    /// are literal text too.
    fn quoted_literal(&mut self, text: &str, escape_templates: bool) {
        self.push("\"");
        escape_into(&mut self.out.hcl, text, escape_templates);
        self.push("\"");
    }
}

/// The byte ranges of a template's literal text, at every depth of its directives.
fn literal_spans(t: &hcl_edit::template::Template, out: &mut Vec<std::ops::Range<usize>>) {
    use hcl_edit::template::{Directive, Element};
    use hcl_edit::Span as _;
    for e in t.iter() {
        match e {
            Element::Literal(l) => {
                if let Some(r) = l.span() {
                    out.push(r);
                }
            }
            Element::Interpolation(_) => {}
            Element::Directive(d) => match &**d {
                Directive::If(i) => {
                    literal_spans(&i.if_expr.template, out);
                    if let Some(e) = &i.else_expr {
                        literal_spans(&e.template, out);
                    }
                }
                Directive::For(f) => literal_spans(&f.for_expr.template, out),
            },
        }
    }
}

/// Appends `text` escaped for an HCL quoted string.
fn escape_into(out: &mut String, text: &str, escape_templates: bool) {
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '$' | '%' if escape_templates && chars.peek() == Some(&'{') => {
                out.push(c);
                out.push(c);
            }
            c if c.is_control() => {
                use std::fmt::Write as _;
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hcl(json: &str) -> String {
        let (t, errors) = translate(json, "main.tf.json", Kind::Config);
        assert!(errors.is_empty(), "{errors:?}");
        t.unwrap().hcl
    }

    #[test]
    fn blocks_labels_and_templates() {
        let h = hcl(
            r#"{"resource": {"sim_thing": {"a": {"name": "x-${var.n}", "count": 2,
            "depends_on": ["sim_thing.b"], "lifecycle": {"ignore_changes": "all"},
            "//": "a comment", "tags": {"k": "v \"q\""}}}}}"#,
        );
        let body = hcl_edit::parser::parse_body(&h).unwrap_or_else(|e| panic!("{e}\n{h}"));
        let b = body.get_blocks("resource").next().unwrap();
        assert_eq!(b.labels.len(), 2);
        assert!(h.contains(r#"name = "x-${var.n}""#), "{h}");
        assert!(h.contains("depends_on = [sim_thing.b]"), "{h}");
        assert!(h.contains("ignore_changes = all"), "{h}");
        assert!(h.contains(r#""k" = "v \"q\"""#), "{h}");
        assert!(!h.contains("comment"), "{h}");
    }

    #[test]
    fn nested_quotes_in_interpolations_and_directives() {
        let h = hcl(
            r#"{"locals": {"a": "${join(\",\", [\"x\"])} \"lit\" %{ if true }\"y\"%{ endif }"}}"#,
        );
        let body = hcl_edit::parser::parse_body(&h).unwrap_or_else(|e| panic!("{e}\n{h}"));
        assert_eq!(body.iter().count(), 1, "{h}");
        assert!(
            h.contains(r#""${join(",", ["x"])} \"lit\" %{ if true }\"y\"%{ endif }""#),
            "{h}"
        );
    }

    #[test]
    fn arrays_of_blocks_and_errors() {
        let h = hcl(r#"{"variable": [{"a": {}}, {"b": {"type": "list(string)"}}]}"#);
        assert!(h.contains("variable \"a\" {"), "{h}");
        assert!(h.contains("type = list(string)"), "{h}");
        let (_, errors) = translate(r#"{"resource": {"t": "x"}}"#, "main.tf.json", Kind::Config);
        assert_eq!(errors.len(), 1);
        assert_eq!(errors[0].start, 19);
        let (t, errors) = translate("{\"a\": 1,}", "main.tf.json", Kind::Config);
        assert!(t.is_none());
        assert_eq!(errors[0].summary, "Trailing comma in object");
    }

    #[test]
    fn dynamic_blocks_and_provider_maps() {
        let h = hcl(
            r#"{"resource": {"t": {"n": {"dynamic": {"setting": {"for_each": "${[1]}",
            "iterator": "it", "content": {"n": "${it.value}"}}}}}},
            "module": {"m": {"source": "./m", "providers": {"sim.extra": "sim.east"}}},
            "terraform": {"required_providers": {"sim": {"source": "cairn/sim",
            "configuration_aliases": ["sim.extra"]}}}}"#,
        );
        hcl_edit::parser::parse_body(&h).unwrap_or_else(|e| panic!("{e}\n{h}"));
        assert!(h.contains("dynamic \"setting\" {"), "{h}");
        assert!(h.contains("iterator = it"), "{h}");
        assert!(h.contains("content {\nn = \"${it.value}\""), "{h}");
        assert!(h.contains("sim.extra = sim.east"), "{h}");
        assert!(h.contains("\"configuration_aliases\" = [sim.extra]"), "{h}");
    }

    #[test]
    fn anchors_map_back() {
        let json = r#"{"locals": {"abc": "${var.x}"}}"#;
        let (t, _) = translate(json, "main.tf.json", Kind::Config);
        let t = t.unwrap();
        let origins: Vec<_> = t
            .anchors
            .iter()
            .map(|&(g, j)| (g, crate::diag::FileId(0), j))
            .collect();
        let at = |g: usize| crate::diag::anchored_offset(&origins, g).1;
        let g = t.hcl.find("var.x").unwrap();
        assert_eq!(at(g), json.find("var.x").unwrap());
        let g = t.hcl.find("abc").unwrap();
        assert_eq!(at(g), json.find("abc").unwrap());
    }
}
