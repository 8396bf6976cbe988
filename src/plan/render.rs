//! The human view of a plan, after Terraform's `plan` text: drift, legend, one block per
//! instance with its attribute diff, the summary line, output changes, warnings.
//!
//! # How a diff is drawn
//!
//! Every value is drawn at an *indent*: the column where its line's two-character marker
//! (`+ `, `- `, `~ `, or two spaces) starts. The children of an object, map or list are drawn at
//! `indent + 4` and its closing bracket at `indent + 2`, which gives Terraform's layout: a
//! resource block at indent 2 has its attributes at 6 and its `}` at 4.
//!
//! Rules, each Terraform's:
//! - attributes that are null before and after are not drawn at all; unchanged attributes are
//!   hidden and counted (`# (2 unchanged attributes hidden)`), except the identifying ones
//!   (`id`, `name`, `tags`), which are drawn with all their contents;
//! - `=` signs line up across the attributes of one object, hidden ones included;
//! - list elements are matched by position in tuples and by longest common subsequence in
//!   lists and sets; unchanged elements are drawn only next to a changed one;
//! - unknowns read `(known after apply)`, sensitive values `(sensitive value)`, and the
//!   attributes in `replace_paths` end with `# forces replacement`;
//! - nested blocks (`Plan::shapes`) come after the attributes, one group per block type after a
//!   blank line: `~ rule {`, map blocks with their key (`+ listener "web" {`); list blocks are
//!   matched by position, set blocks by value, map blocks by key; unchanged blocks are hidden
//!   and counted (`# (2 unchanged blocks hidden)`). Views without a plan (`render_change`,
//!   `render_state` without the state's shapes) draw nested blocks as attributes.
//!
//! Where Terraform prints a heredoc for multi-line strings, Cairn prints one quoted string with
//! escapes, so one value is always one line.
//!
//! Deferred data reads say why they were deferred, with the chain of references that led there
//! — Terraform only says "config refers to values not yet known" or "depends on a resource or a
//! module with changes pending".

use super::{
    Action, BlockShape, Change, DataRead, Drift, NestedShape, OutputChange, Plan, PlanMode,
    ProviderChange, Reason,
};
use crate::addr::{Mode, ResourceInstanceAddr};
use crate::diag::{Diagnostic, SourceMap};
use crate::schema::Nesting;
use crate::value::Value;
use crate::value::ValueMap;
use cairn_state::{quote_go, Snapshot};
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// How to draw a plan.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RenderOptions {
    /// ANSI colour and bold.
    pub color: bool,
    /// Column at which prose is wrapped and the width of horizontal rules; 0 means no wrapping.
    pub width: usize,
}

impl Default for RenderOptions {
    fn default() -> Self {
        RenderOptions {
            color: false,
            width: 80,
        }
    }
}

/// The plan as text, ready to print.
pub fn render_plan(plan: &Plan, opts: &RenderOptions) -> String {
    let r = Renderer {
        c: Colors(opts.color),
        width: opts.width,
        marks: true,
        shapes: &plan.shapes,
    };
    let mut out = String::new();
    match plan.mode {
        PlanMode::Normal | PlanMode::Destroy => r.normal(plan, &mut out),
        PlanMode::ReadOnly | PlanMode::RefreshOnly => r.read_only(plan, &mut out),
    }
    for w in &plan.warnings {
        let (summary, detail) = w.split_once('\n').unwrap_or((w, ""));
        let wrapper = Renderer {
            width: opts.width.saturating_sub(2),
            ..r
        };
        let detail: Vec<String> = detail.trim().lines().map(|l| wrapper.wrap(l)).collect();
        out.push('\n');
        out.push_str(
            &SourceMap::new().render(&Diagnostic::warning(summary, detail.join("\n")), opts.color),
        );
    }
    out
}

/// One change drawn as in the plan text (header, reason, attribute diff), for views that show
/// changes one at a time (`cairn ui`).
pub(crate) fn render_change(ch: &Change, opts: &RenderOptions) -> String {
    let r = Renderer {
        c: Colors(opts.color),
        width: opts.width,
        marks: true,
        shapes: &NO_SHAPES,
    };
    r.change_block(ch, None)
}

/// One change of `plan` drawn as the plan text draws it: with the plan's nested-block shapes
/// and where a `moved` block moved it from (`prev`, from `Plan::moved_from`), for the log's
/// record of a plan (`record::plan_record`).
pub(crate) fn render_change_in(
    plan: &Plan,
    ch: &Change,
    prev: Option<&ResourceInstanceAddr>,
    opts: &RenderOptions,
) -> String {
    let r = Renderer {
        c: Colors(opts.color),
        width: opts.width,
        marks: true,
        shapes: &plan.shapes,
    };
    r.change_block(ch, prev)
}

/// The current state as `terraform show` prints it: one block per provider instance, resource
/// instance and data result, then the outputs. Sensitive values read `(sensitive value)`.
/// The nested blocks of `shapes` (`engine::schema_checks::state_view`) are drawn as blocks, as
/// `terraform show` draws them.
pub(crate) fn render_state(
    state: &Snapshot,
    opts: &RenderOptions,
    shapes: &BTreeMap<String, BlockShape>,
) -> String {
    let r = Renderer {
        c: Colors(opts.color),
        width: opts.width,
        marks: false,
        shapes,
    };
    let mut blocks: Vec<String> = Vec::new();
    let block = |head: String, comment: String, v: &Value, shape: Option<&BlockShape>| {
        let mut lines = vec![r.c.bold(&comment)];
        let body = match (v, shape) {
            (Value::Object(m), _) if m.values().all(Value::is_null) => Lines::one("{\n}"),
            (Value::Object(m), Some(shape)) => r.whole_block(m, shape, 0, "", &Ctx::NONE),
            _ => r.whole(v, Mark::NoOp, 0, "", &Ctx::NONE),
        };
        body.write_after(&format!("{head} "), &mut lines);
        lines.join("\n")
    };
    for (addr, p) in &state.providers {
        let mut config = match Value::from_stored(&p.config) {
            Value::Object(m) => m,
            _ => ValueMap::new(),
        };
        if let Some(alias) = &p.addr.alias {
            config.insert("alias".into(), Value::string(alias.clone()));
        }
        let head = format!("provider {}", cairn_state::quote(&p.addr.package));
        let note = if p.is_default { " (default)" } else { "" };
        blocks.push(block(
            head,
            format!("# {addr}:{note}"),
            &Value::Object(config),
            None,
        ));
    }
    let mut objects: Vec<(&ResourceInstanceAddr, String, Value)> = Vec::new();
    for (addr, inst) in &state.resources {
        if let Some(cur) = &inst.current {
            let note = if cur.tainted { " (tainted)" } else { "" };
            objects.push((addr, note.into(), Value::from_stored(&cur.attrs)));
        }
        for (key, obj) in &inst.deposed {
            let note = format!(" (deposed object {key})");
            objects.push((addr, note, Value::from_stored(&obj.attrs)));
        }
    }
    for (addr, d) in &state.data {
        objects.push((addr, String::new(), Value::from_stored(&d.attrs)));
    }
    objects.sort_by(|a, b| a.0.cmp(b.0));
    for (addr, note, v) in objects {
        let kind = match addr.resource.mode {
            Mode::Managed => "resource",
            Mode::Data => "data",
            Mode::Ephemeral => "ephemeral",
        };
        let head = format!(
            "{kind} {} {}",
            cairn_state::quote(&addr.resource.type_),
            cairn_state::quote(&addr.resource.name)
        );
        let shape = shapes.get(&BlockShape::key(addr.resource.mode, &addr.resource.type_));
        blocks.push(block(head, format!("# {addr}:{note}"), &v, shape));
    }
    if blocks.is_empty() && state.outputs.is_empty() {
        return "The state is empty. No resources are represented.\n".into();
    }
    let mut out = String::new();
    for b in &blocks {
        let _ = writeln!(out, "{b}\n");
    }
    if !state.outputs.is_empty() {
        let _ = writeln!(out, "\n{}\n", r.c.bold("Outputs:"));
        for (name, o) in &state.outputs {
            let v = Value::from_stored(&o.value);
            let body = if o.sensitive {
                Lines::one("(sensitive value)")
            } else {
                r.whole(&v, Mark::NoOp, 0, "", &Ctx::NONE)
            };
            let mut lines = Vec::new();
            body.write_after(&format!("{} = ", key_text(name, false)), &mut lines);
            let _ = writeln!(out, "{}", lines.join("\n"));
        }
    }
    out
}

/// The symbol Terraform shows for an action: `+`, `-`, `~`, `-/+`, `+/-`, `<=`.
pub(crate) fn action_symbol(action: Action) -> &'static str {
    match action {
        Action::NoOp => " ",
        Action::Create => "+",
        Action::Read => "<=",
        Action::Update => "~",
        Action::DeleteThenCreate => "-/+",
        Action::CreateThenDelete => "+/-",
        Action::Delete => "-",
        Action::Forget => ".",
    }
}

/// The words of the legend, in Terraform's order.
const LEGEND: [(Action, &str); 6] = [
    (Action::Create, "create"),
    (Action::Update, "update in-place"),
    (Action::Delete, "destroy"),
    (
        Action::DeleteThenCreate,
        "destroy and then create replacement",
    ),
    (
        Action::CreateThenDelete,
        "create replacement and then destroy",
    ),
    (Action::Read, "read (data resources)"),
];

/// ANSI styling that disappears when colour is off.
#[derive(Clone, Copy)]
struct Colors(bool);

impl Colors {
    fn paint(self, code: &str, s: &str) -> String {
        if self.0 && !s.is_empty() {
            format!("\x1b[{code}m{s}\x1b[0m")
        } else {
            s.to_string()
        }
    }
    fn bold(self, s: &str) -> String {
        self.paint("1", s)
    }
    fn green(self, s: &str) -> String {
        self.paint("32", s)
    }
    fn red(self, s: &str) -> String {
        self.paint("31", s)
    }
    fn yellow(self, s: &str) -> String {
        self.paint("33", s)
    }
    fn cyan(self, s: &str) -> String {
        self.paint("36", s)
    }
    /// An action symbol in its colour, right-aligned in `width` columns.
    fn symbol(self, action: Action, width: usize) -> String {
        let s = action_symbol(action);
        let pad = " ".repeat(width.saturating_sub(s.chars().count()));
        let painted = match action {
            Action::Create => self.green(s),
            Action::Delete => self.red(s),
            Action::Update => self.yellow(s),
            Action::Read => self.cyan(s),
            Action::DeleteThenCreate => format!("{}/{}", self.red("-"), self.green("+")),
            Action::CreateThenDelete => format!("{}/{}", self.green("+"), self.red("-")),
            Action::NoOp | Action::Forget => s.to_string(),
        };
        format!("{pad}{painted}")
    }
    fn mark(self, m: Mark) -> String {
        match m {
            Mark::Create => self.green("+"),
            Mark::Delete => self.red("-"),
            Mark::Update => self.yellow("~"),
            Mark::NoOp => " ".to_string(),
        }
    }
}

/// What happened to one value inside a diff.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mark {
    Create,
    Delete,
    Update,
    NoOp,
}

/// Drawn lines: the first continues the line it is placed on (after `name = `); the others
/// are whole lines, already indented.
#[derive(Debug)]
struct Lines(Vec<String>);

impl Lines {
    fn one(s: impl Into<String>) -> Lines {
        Lines(vec![s.into()])
    }
    /// Appends text to the last line.
    fn suffix(mut self, s: &str) -> Lines {
        if let Some(last) = self.0.last_mut() {
            last.push_str(s);
        }
        self
    }
    /// `self`, then `sep` on its last line, then `other` continuing that line.
    fn then(mut self, sep: &str, other: Lines) -> Lines {
        let mut it = other.0.into_iter();
        let first = it.next().unwrap_or_default();
        self = self.suffix(&format!("{sep}{first}"));
        self.0.extend(it);
        self
    }
    /// Writes the lines after a prefix on the first line.
    fn write_after(self, prefix: &str, out: &mut Vec<String>) {
        let mut it = self.0.into_iter();
        out.push(format!("{prefix}{}", it.next().unwrap_or_default()));
        out.extend(it);
    }
}

/// Per-block facts the diff needs: which paths force replacement and which are sensitive.
#[derive(Clone, Copy)]
struct Ctx<'a> {
    replace_paths: &'a [String],
    sensitive_paths: &'a [String],
    /// The resource's write-only attributes and the mark they are drawn with, as
    /// `(write-only attribute)` (their values are never planned).
    write_only: Option<(&'a std::collections::BTreeSet<String>, Mark)>,
}

impl Ctx<'_> {
    const NONE: Ctx<'static> = Ctx {
        replace_paths: &[],
        sensitive_paths: &[],
        write_only: None,
    };
}

#[derive(Clone, Copy)]
struct Renderer<'s> {
    c: Colors,
    width: usize,
    /// Whether lines carry a two-column change marker (plans) or not (state).
    marks: bool,
    /// The nested blocks of resource types (`Plan::shapes`): their values are drawn as blocks.
    shapes: &'s BTreeMap<String, BlockShape>,
}

/// No shapes: every value is drawn as an attribute.
static NO_SHAPES: BTreeMap<String, BlockShape> = BTreeMap::new();

/// True for null and for a missing value.
fn nullish(v: Option<&Value>) -> bool {
    v.is_none_or(Value::is_null)
}

/// The value unless it is null or missing.
fn present(v: Option<&Value>) -> Option<&Value> {
    v.filter(|v| !v.is_null())
}

/// Equality as a user sees it: nulls are equal whatever their type, unknowns equal nothing,
/// sensitive marks do not matter.
fn same(a: &Value, b: &Value) -> bool {
    match (a.unmarked(), b.unmarked()) {
        (Value::Unknown(_), _) | (_, Value::Unknown(_)) => false,
        (Value::Null(_), Value::Null(_)) => true,
        (
            Value::List(x) | Value::Set(x) | Value::Tuple(x),
            Value::List(y) | Value::Set(y) | Value::Tuple(y),
        ) => x.len() == y.len() && x.iter().zip(y).all(|(p, q)| same(p, q)),
        (Value::Map(x) | Value::Object(x), Value::Map(y) | Value::Object(y)) => {
            let nonnull = |m: &ValueMap| {
                m.iter()
                    .filter(|(_, v)| !v.is_null())
                    .map(|(k, _)| k.clone())
                    .collect::<Vec<_>>()
            };
            nonnull(x) == nonnull(y)
                && x.iter().all(|(k, v)| match y.get(k) {
                    Some(w) => same(v, w),
                    None => v.is_null(),
                })
        }
        (x, y) => x == y,
    }
}

fn is_ident(k: &str) -> bool {
    let mut cs = k.chars();
    cs.next().is_some_and(|c| c.is_alphabetic() || c == '_')
        && cs.all(|c| c.is_alphanumeric() || c == '_' || c == '-')
}

/// The path of an attribute or element, written as `Value::unknown_paths` writes it.
fn child_path(parent: &str, key: &str) -> String {
    if parent.is_empty() {
        key.to_string()
    } else if is_ident(key) {
        format!("{parent}.{key}")
    } else {
        format!("{parent}[{}]", cairn_state::quote(key))
    }
}

/// How a key is written: map keys quoted, object attributes bare when they can be.
fn key_text(key: &str, is_map: bool) -> String {
    if is_map || !is_ident(key) {
        cairn_state::quote(key)
    } else {
        key.to_string()
    }
}

/// Attributes Terraform always shows, with all their contents, because they identify the
/// object.
fn identifying(key: &str) -> bool {
    matches!(key, "id" | "name" | "tags")
}

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// A primitive value in HCL syntax.
fn primitive(v: &Value) -> String {
    match v {
        Value::Null(_) => "null".into(),
        Value::Unknown(_) => "(known after apply)".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => cairn_state::quote(s),
        Value::Sensitive(_) => "(sensitive value)".into(),
        Value::List(_) | Value::Set(_) | Value::Tuple(_) => "[]".into(),
        Value::Map(_) | Value::Object(_) => "{}".into(),
    }
}

/// One step of a list diff.
#[derive(Clone, Copy)]
enum Op<'v> {
    Keep(&'v Value),
    Remove(&'v Value),
    Add(&'v Value),
    Change(&'v Value, &'v Value),
}

/// Matches two lists by longest common subsequence; a run of removals followed by a run of
/// additions is paired into changes where both sides are objects or maps, so a changed nested
/// block reads as `~ {` rather than a removal and an addition.
fn lcs_ops<'v>(b: &'v [Value], a: &'v [Value]) -> Vec<Op<'v>> {
    let (n, m) = (b.len(), a.len());
    let mut t = vec![vec![0usize; m + 1]; n + 1];
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            t[i][j] = if same(&b[i], &a[j]) {
                t[i + 1][j + 1] + 1
            } else {
                t[i + 1][j].max(t[i][j + 1])
            };
        }
    }
    let mut raw = Vec::new();
    let (mut i, mut j) = (0, 0);
    while i < n || j < m {
        if i < n && j < m && same(&b[i], &a[j]) {
            raw.push(Op::Keep(&a[j]));
            i += 1;
            j += 1;
        } else if i < n && (j == m || t[i + 1][j] >= t[i][j + 1]) {
            raw.push(Op::Remove(&b[i]));
            i += 1;
        } else {
            raw.push(Op::Add(&a[j]));
            j += 1;
        }
    }
    // Pair removals with the additions that follow them when all of them are objects.
    let mut ops = Vec::with_capacity(raw.len());
    let mut k = 0;
    while k < raw.len() {
        if !matches!(raw[k], Op::Remove(_)) {
            ops.push(raw[k]);
            k += 1;
            continue;
        }
        let start = k;
        while k < raw.len() && matches!(raw[k], Op::Remove(_)) {
            k += 1;
        }
        let mid = k;
        while k < raw.len() && matches!(raw[k], Op::Add(_)) {
            k += 1;
        }
        let objects = raw[start..k].iter().all(|op| match op {
            Op::Remove(v) | Op::Add(v) => v.attributes().is_some(),
            _ => false,
        });
        let pairs = if objects {
            (mid - start).min(k - mid)
        } else {
            0
        };
        for i in 0..pairs {
            if let (Op::Remove(x), Op::Add(y)) = (&raw[start + i], &raw[mid + i]) {
                ops.push(Op::Change(x, y));
            }
        }
        for op in raw[start + pairs..mid].iter().chain(&raw[mid + pairs..k]) {
            ops.push(*op);
        }
    }
    ops
}

impl Renderer<'_> {
    fn pad(n: usize) -> String {
        " ".repeat(n)
    }

    /// Word-wraps a paragraph to the configured width.
    fn wrap(&self, text: &str) -> String {
        if self.width == 0 {
            return text.to_string();
        }
        let mut out = String::new();
        // A line's own indentation (a list item, ` - x`) is kept.
        let body = text.trim_start_matches(' ');
        let mut line = " ".repeat(text.len() - body.len());
        let mut empty = true;
        for word in body.split(' ') {
            if !empty && line.chars().count() + 1 + word.chars().count() > self.width {
                out.push_str(&line);
                out.push('\n');
                line.clear();
                empty = true;
            }
            if !empty {
                line.push(' ');
            }
            line.push_str(word);
            empty = false;
        }
        out.push_str(&line);
        out
    }

    fn rule(&self) -> String {
        "─".repeat(if self.width == 0 { 80 } else { self.width })
    }

    fn sensitive(&self, v: &Value, path: &str, ctx: &Ctx) -> bool {
        v.is_sensitive() || ctx.sensitive_paths.iter().any(|p| p == path)
    }

    /// A whole value with every nested line marked `mark`.
    /// The marker column of a line (`+ `), or nothing when drawing state without markers.
    fn gutter(&self, mark: Mark) -> String {
        if self.marks {
            format!("{} ", self.c.mark(mark))
        } else {
            String::new()
        }
    }

    fn gutter_width(&self) -> usize {
        if self.marks {
            2
        } else {
            0
        }
    }

    fn whole(&self, v: &Value, mark: Mark, indent: usize, path: &str, ctx: &Ctx) -> Lines {
        if self.sensitive(v, path, ctx) {
            return Lines::one("(sensitive value)");
        }
        match v {
            Value::Map(m) | Value::Object(m) if !m.is_empty() => {
                let is_map = matches!(v, Value::Map(_));
                let shown: Vec<(&String, &Value)> =
                    m.iter().filter(|(_, e)| !e.is_null()).collect();
                if shown.is_empty() {
                    return Lines::one("{}");
                }
                let w = shown
                    .iter()
                    .map(|(k, _)| key_text(k, is_map).chars().count())
                    .max()
                    .unwrap_or(0);
                let mut lines = vec!["{".to_string()];
                for (k, e) in shown {
                    let cp = child_path(path, k);
                    let prefix = format!(
                        "{}{}{:<w$} = ",
                        Self::pad(indent + 4),
                        self.gutter(mark),
                        key_text(k, is_map)
                    );
                    self.whole(e, mark, indent + 4, &cp, ctx)
                        .write_after(&prefix, &mut lines);
                }
                lines.push(format!("{}}}", Self::pad(indent + self.gutter_width())));
                Lines(lines)
            }
            Value::List(l) | Value::Set(l) | Value::Tuple(l) if !l.is_empty() => {
                let mut lines = vec!["[".to_string()];
                for (i, e) in l.iter().enumerate() {
                    let cp = format!("{path}[{i}]");
                    let prefix = format!("{}{}", Self::pad(indent + 4), self.gutter(mark));
                    self.whole(e, mark, indent + 4, &cp, ctx)
                        .suffix(",")
                        .write_after(&prefix, &mut lines);
                }
                lines.push(format!("{}]", Self::pad(indent + self.gutter_width())));
                Lines(lines)
            }
            v => Lines::one(primitive(v)),
        }
    }

    /// A schema block's value drawn whole (state views): its attributes as `whole` draws an
    /// object's, then its nested blocks, each group after a blank line (`rule {`,
    /// `listener "web" {`), as `terraform show` draws them.
    fn whole_block(
        &self,
        m: &ValueMap,
        shape: &BlockShape,
        indent: usize,
        path: &str,
        ctx: &Ctx,
    ) -> Lines {
        // Write-only attributes are drawn without a value, as `terraform show` draws them.
        const NULL: Value = Value::Null(crate::value::Type::Dynamic);
        let mut attrs: Vec<(&String, &Value)> = m
            .iter()
            .filter(|(k, e)| {
                !shape.blocks.contains_key(*k) && !e.is_null() && !shape.write_only.contains(*k)
            })
            .chain(shape.write_only.iter().map(|k| (k, &NULL)))
            .collect();
        attrs.sort_by(|a, b| a.0.cmp(b.0));
        let w = attrs
            .iter()
            .map(|(k, _)| key_text(k, false).chars().count())
            .max()
            .unwrap_or(0);
        let mut lines = vec!["{".to_string()];
        for (k, e) in &attrs {
            let prefix = format!(
                "{}{}{:<w$} = ",
                Self::pad(indent + 4),
                self.gutter(Mark::NoOp),
                key_text(k, false)
            );
            if shape.write_only.contains(*k) {
                lines.push(format!("{prefix}(write-only attribute)"));
                continue;
            }
            self.whole(e, Mark::NoOp, indent + 4, &child_path(path, k), ctx)
                .write_after(&prefix, &mut lines);
        }
        for (name, nested) in &shape.blocks {
            let cp = child_path(path, name);
            let elems: Vec<(String, &ValueMap)> =
                match (nested.nesting, m.get(name).map(Value::unmarked)) {
                    (Nesting::Single, Some(Value::Object(o))) => vec![(String::new(), o)],
                    (
                        Nesting::List | Nesting::Set,
                        Some(Value::List(l) | Value::Set(l) | Value::Tuple(l)),
                    ) => l
                        .iter()
                        .filter_map(|e| e.unmarked().attributes())
                        .map(|o| (String::new(), o))
                        .collect(),
                    (Nesting::Map, Some(Value::Map(o) | Value::Object(o))) => o
                        .iter()
                        .filter_map(|(k, e)| {
                            e.unmarked()
                                .attributes()
                                .map(|a| (format!(" {}", cairn_state::quote(k)), a))
                        })
                        .collect(),
                    _ => Vec::new(),
                };
            if !elems.is_empty() && !attrs.is_empty() {
                lines.push(String::new());
            }
            for (label, o) in elems {
                let prefix = format!(
                    "{}{}{name}{label} ",
                    Self::pad(indent + 4),
                    self.gutter(Mark::NoOp)
                );
                self.whole_block(o, &nested.shape, indent + 4, &cp, ctx)
                    .write_after(&prefix, &mut lines);
            }
        }
        if lines.len() == 1 {
            return Lines::one("{}");
        }
        lines.push(format!("{}}}", Self::pad(indent + self.gutter_width())));
        Lines(lines)
    }

    /// The change of one attribute or element from `b` to `a`.
    fn diff(
        &self,
        b: Option<&Value>,
        a: Option<&Value>,
        indent: usize,
        path: &str,
        ctx: &Ctx,
        show_all: bool,
    ) -> (Mark, Lines) {
        let (b, a) = match (present(b), present(a)) {
            (None, None) => return (Mark::NoOp, Lines::one("null")),
            (None, Some(a)) => {
                return (Mark::Create, self.whole(a, Mark::Create, indent, path, ctx));
            }
            (Some(b), None) => {
                let before = self.whole(b, Mark::Delete, indent, path, ctx);
                return (Mark::Delete, before.suffix(" -> null"));
            }
            (Some(b), Some(a)) => (b, a),
        };
        if self.sensitive(b, path, ctx) || self.sensitive(a, path, ctx) {
            let m = if same(b, a) { Mark::NoOp } else { Mark::Update };
            return (m, Lines::one("(sensitive value)"));
        }
        if a.is_unknown() {
            let before = self.whole(b, Mark::Delete, indent, path, ctx);
            return (Mark::Update, before.suffix(" -> (known after apply)"));
        }
        if same(b, a) {
            return (Mark::NoOp, self.whole(a, Mark::NoOp, indent, path, ctx));
        }
        match (b.unmarked(), a.unmarked()) {
            (Value::Map(x) | Value::Object(x), Value::Map(y) | Value::Object(y)) => {
                let is_map = matches!(a.unmarked(), Value::Map(_));
                self.object_diff(x, y, is_map, indent, path, ctx, show_all)
            }
            (
                Value::List(x) | Value::Set(x) | Value::Tuple(x),
                Value::List(y) | Value::Set(y) | Value::Tuple(y),
            ) => {
                let positional = matches!(a.unmarked(), Value::Tuple(_))
                    || matches!(b.unmarked(), Value::Tuple(_));
                self.list_diff(x, y, positional, indent, path, ctx, show_all)
            }
            _ => {
                let before = self.whole(b, Mark::Delete, indent, path, ctx);
                let after = self.whole(a, Mark::Create, indent, path, ctx);
                (Mark::Update, before.then(" -> ", after))
            }
        }
    }

    /// The diff of two objects (or maps): one line per attribute that is not null on both
    /// sides, unchanged ones hidden and counted unless `show_all`.
    #[allow(clippy::too_many_arguments)]
    fn object_diff(
        &self,
        b: &ValueMap,
        a: &ValueMap,
        is_map: bool,
        indent: usize,
        path: &str,
        ctx: &Ctx,
        show_all: bool,
    ) -> (Mark, Lines) {
        // A resource's own write-only attributes (not those of its nested blocks).
        let write_only = ctx.write_only.filter(|_| path.is_empty() && !is_map);
        let is_wo = |k: &str| write_only.is_some_and(|(names, _)| names.contains(k));
        let mut keys: Vec<&String> = b
            .keys()
            .chain(a.keys())
            .chain(write_only.into_iter().flat_map(|(names, _)| names.iter()))
            .collect();
        keys.sort();
        keys.dedup();
        keys.retain(|k| is_wo(k) || !(nullish(b.get(*k)) && nullish(a.get(*k))));
        let w = keys
            .iter()
            .map(|k| key_text(k, is_map).chars().count())
            .max()
            .unwrap_or(0);
        let mut lines = vec!["{".to_string()];
        let mut hidden = 0;
        let mut changed = false;
        for k in keys {
            if let Some((_, mark)) = write_only.filter(|_| is_wo(k)) {
                if mark == Mark::NoOp && !show_all {
                    hidden += 1;
                    continue;
                }
                changed |= mark != Mark::NoOp;
                lines.push(format!(
                    "{}{} {:<w$} = (write-only attribute){}",
                    Self::pad(indent + 4),
                    self.c.mark(mark),
                    key_text(k, is_map),
                    if mark == Mark::Delete { " -> null" } else { "" }
                ));
                continue;
            }
            let cp = child_path(path, k);
            let ident = !is_map && identifying(k);
            let (mark, body) =
                self.diff(b.get(k), a.get(k), indent + 4, &cp, ctx, show_all || ident);
            if mark == Mark::NoOp && !show_all && !ident {
                hidden += 1;
                continue;
            }
            changed |= mark != Mark::NoOp;
            let body = self.forces(body, mark, &cp, ctx);
            let prefix = format!(
                "{}{} {:<w$} = ",
                Self::pad(indent + 4),
                self.c.mark(mark),
                key_text(k, is_map)
            );
            body.write_after(&prefix, &mut lines);
        }
        if hidden > 0 {
            let what = if is_map {
                plural(hidden, "unchanged element", "unchanged elements")
            } else {
                plural(hidden, "unchanged attribute", "unchanged attributes")
            };
            lines.push(format!("{}# ({what} hidden)", Self::pad(indent + 6)));
        }
        Self::close(lines, indent, changed)
    }

    /// An object's lines (`{` and its children) closed at `indent`, or `{}` when it has none.
    fn close(mut lines: Vec<String>, indent: usize, changed: bool) -> (Mark, Lines) {
        if lines.len() == 1 {
            return (Mark::NoOp, Lines::one("{}"));
        }
        lines.push(format!("{}}}", Self::pad(indent + 2)));
        (
            if changed { Mark::Update } else { Mark::NoOp },
            Lines(lines),
        )
    }

    /// The diff of a schema block: its attributes as `object_diff` draws them, then its nested
    /// blocks, each group after a blank line, as Terraform draws them: `+ rule {`, map blocks
    /// with their key (`~ listener "web" {`), unchanged blocks hidden and counted.
    #[allow(clippy::too_many_arguments)]
    fn block_diff(
        &self,
        b: &ValueMap,
        a: &ValueMap,
        shape: &BlockShape,
        indent: usize,
        path: &str,
        ctx: &Ctx,
        show_all: bool,
    ) -> (Mark, Lines) {
        let only_attrs = |m: &ValueMap| -> ValueMap {
            m.iter()
                .filter(|(k, _)| !shape.blocks.contains_key(*k))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        };
        let (ba, aa) = (only_attrs(b), only_attrs(a));
        let has_attrs = ba
            .keys()
            .chain(aa.keys())
            .any(|k| !(nullish(ba.get(k)) && nullish(aa.get(k))));
        let (mut changed, attr_lines) =
            match self.object_diff(&ba, &aa, false, indent, path, ctx, show_all) {
                (m, Lines(mut l)) if l.len() > 1 => {
                    l.pop();
                    (m != Mark::NoOp, l)
                }
                (m, _) => (m != Mark::NoOp, vec!["{".to_string()]),
            };
        let mut lines = attr_lines;
        let mut hidden = 0;
        for (name, nested) in &shape.blocks {
            let cp = child_path(path, name);
            let (bv, av) = (present(b.get(name)), present(a.get(name)));
            // A block value that is not a collection of objects (unknown until apply): drawn
            // as an attribute.
            let drawable = |v: Option<&Value>| {
                v.is_none_or(|v| match (nested.nesting, v.unmarked()) {
                    (_, Value::Unknown(_)) => false,
                    (Nesting::Single, Value::Object(_) | Value::Map(_)) => true,
                    (Nesting::List | Nesting::Set, Value::List(_) | Value::Set(_))
                    | (Nesting::List | Nesting::Set, Value::Tuple(_)) => true,
                    (Nesting::Map, Value::Map(_) | Value::Object(_)) => true,
                    _ => false,
                })
            };
            let mut group: Vec<(String, Mark, Lines)> = Vec::new();
            if !drawable(bv) || !drawable(av) {
                let (mark, body) = self.diff(bv, av, indent + 4, &cp, ctx, show_all);
                if mark == Mark::NoOp && !show_all {
                    hidden += 1;
                    continue;
                }
                changed |= mark != Mark::NoOp;
                if has_attrs {
                    lines.push(String::new());
                }
                let prefix = format!("{}{} {name} = ", Self::pad(indent + 4), self.c.mark(mark));
                self.forces(body, mark, &cp, ctx)
                    .write_after(&prefix, &mut lines);
                continue;
            }
            let elems = |v: Option<&Value>| -> Vec<Value> {
                match v.map(Value::unmarked) {
                    Some(Value::List(l) | Value::Set(l) | Value::Tuple(l)) => l.clone(),
                    _ => Vec::new(),
                }
            };
            let entries = |v: Option<&Value>| -> ValueMap {
                match v.map(Value::unmarked) {
                    Some(Value::Map(m) | Value::Object(m)) => m.clone(),
                    _ => ValueMap::new(),
                }
            };
            match nested.nesting {
                Nesting::Single => {
                    if bv.is_some() || av.is_some() {
                        let (m, l) =
                            self.nested_block(bv, av, nested, indent + 4, &cp, ctx, show_all);
                        group.push((String::new(), m, l));
                    }
                }
                Nesting::List => {
                    let (bl, al) = (elems(bv), elems(av));
                    for i in 0..bl.len().max(al.len()) {
                        let ep = format!("{cp}[{i}]");
                        let (m, l) = self.nested_block(
                            bl.get(i),
                            al.get(i),
                            nested,
                            indent + 4,
                            &ep,
                            ctx,
                            show_all,
                        );
                        group.push((String::new(), m, l));
                    }
                }
                Nesting::Set => {
                    // Set elements have no identity but their value: an unchanged element is
                    // in both; the others are removed and added.
                    let (bl, al) = (elems(bv), elems(av));
                    let mut matched = vec![false; al.len()];
                    for x in &bl {
                        let found = al
                            .iter()
                            .enumerate()
                            .position(|(j, y)| !matched[j] && same(x, y));
                        let after = found.map(|j| {
                            matched[j] = true;
                            &al[j]
                        });
                        let (m, l) = self.nested_block(
                            Some(x),
                            after,
                            nested,
                            indent + 4,
                            &cp,
                            ctx,
                            show_all,
                        );
                        group.push((String::new(), m, l));
                    }
                    for (j, y) in al.iter().enumerate().filter(|(j, _)| !matched[*j]) {
                        let _ = j;
                        let (m, l) = self.nested_block(
                            None,
                            Some(y),
                            nested,
                            indent + 4,
                            &cp,
                            ctx,
                            show_all,
                        );
                        group.push((String::new(), m, l));
                    }
                }
                Nesting::Map => {
                    let (bm, am) = (entries(bv), entries(av));
                    let keys: std::collections::BTreeSet<&String> =
                        bm.keys().chain(am.keys()).collect();
                    for k in keys {
                        let ep = child_path(&cp, k);
                        let (m, l) = self.nested_block(
                            bm.get(k),
                            am.get(k),
                            nested,
                            indent + 4,
                            &ep,
                            ctx,
                            show_all,
                        );
                        group.push((format!(" {}", cairn_state::quote(k)), m, l));
                    }
                }
            }
            let mut first = true;
            for (label, mark, body) in group {
                if mark == Mark::NoOp && !show_all {
                    hidden += 1;
                    continue;
                }
                changed |= mark != Mark::NoOp;
                if first && has_attrs {
                    lines.push(String::new());
                }
                first = false;
                let prefix = format!(
                    "{}{} {name}{label} ",
                    Self::pad(indent + 4),
                    self.c.mark(mark)
                );
                self.forces(body, mark, &cp, ctx)
                    .write_after(&prefix, &mut lines);
            }
        }
        if hidden > 0 {
            lines.push(String::new());
            lines.push(format!(
                "{}# ({} hidden)",
                Self::pad(indent + 6),
                plural(hidden, "unchanged block", "unchanged blocks")
            ));
        }
        Self::close(lines, indent, changed)
    }

    /// One nested block from `b` to `a` (either may be missing: added or removed).
    #[allow(clippy::too_many_arguments)]
    fn nested_block(
        &self,
        b: Option<&Value>,
        a: Option<&Value>,
        nested: &NestedShape,
        indent: usize,
        path: &str,
        ctx: &Ctx,
        show_all: bool,
    ) -> (Mark, Lines) {
        let empty = ValueMap::new();
        let bo = b.and_then(|v| v.unmarked().attributes()).unwrap_or(&empty);
        let ao = a.and_then(|v| v.unmarked().attributes()).unwrap_or(&empty);
        let (_, body) = self.block_diff(bo, ao, &nested.shape, indent, path, ctx, show_all);
        let mark = match (b, a) {
            (None, Some(_)) => Mark::Create,
            (Some(_), None) => Mark::Delete,
            (Some(x), Some(y)) if same(x, y) => Mark::NoOp,
            _ => Mark::Update,
        };
        (mark, body)
    }

    /// Adds `# forces replacement` to the first line of a changed value whose path is one of
    /// the replace paths.
    fn forces(&self, body: Lines, mark: Mark, path: &str, ctx: &Ctx) -> Lines {
        if mark == Mark::NoOp || !ctx.replace_paths.iter().any(|p| p == path) {
            return body;
        }
        let mut v = body.0;
        if let Some(first) = v.first_mut() {
            first.push_str(&self.c.red(" # forces replacement"));
        }
        Lines(v)
    }

    /// The diff of two lists, sets or tuples.
    #[allow(clippy::too_many_arguments)]
    fn list_diff(
        &self,
        b: &[Value],
        a: &[Value],
        positional: bool,
        indent: usize,
        path: &str,
        ctx: &Ctx,
        show_all: bool,
    ) -> (Mark, Lines) {
        let ops: Vec<Op> = if positional {
            (0..b.len().max(a.len()))
                .map(|i| match (b.get(i), a.get(i)) {
                    (Some(x), Some(y)) if same(x, y) => Op::Keep(y),
                    (Some(x), Some(y)) => Op::Change(x, y),
                    (Some(x), None) => Op::Remove(x),
                    (None, Some(y)) => Op::Add(y),
                    (None, None) => unreachable!("index below the longer length"),
                })
                .collect()
        } else {
            lcs_ops(b, a)
        };
        let mut rendered: Vec<(Mark, Lines)> = Vec::with_capacity(ops.len());
        for (i, op) in ops.iter().enumerate() {
            let cp = format!("{path}[{i}]");
            let ind = indent + 4;
            rendered.push(match *op {
                Op::Keep(y) => (Mark::NoOp, self.whole(y, Mark::NoOp, ind, &cp, ctx)),
                Op::Add(y) => (Mark::Create, self.whole(y, Mark::Create, ind, &cp, ctx)),
                Op::Remove(x) => (Mark::Delete, self.whole(x, Mark::Delete, ind, &cp, ctx)),
                Op::Change(x, y) => self.diff(Some(x), Some(y), ind, &cp, ctx, show_all),
            });
        }
        let changed: Vec<bool> = rendered.iter().map(|(m, _)| *m != Mark::NoOp).collect();
        let mut lines = vec!["[".to_string()];
        let mut hidden = 0;
        let flush = |hidden: &mut usize, lines: &mut Vec<String>| {
            if *hidden > 0 {
                lines.push(format!(
                    "{}# ({} hidden)",
                    Self::pad(indent + 6),
                    plural(*hidden, "unchanged element", "unchanged elements")
                ));
                *hidden = 0;
            }
        };
        for (i, (mark, body)) in rendered.into_iter().enumerate() {
            // Unchanged elements next to a change are drawn for context (whole, as Terraform
            // does); the others are summarised.
            let near_change =
                (i > 0 && changed[i - 1]) || changed.get(i + 1).copied().unwrap_or(false);
            if mark == Mark::NoOp && !show_all && !near_change {
                hidden += 1;
                continue;
            }
            flush(&mut hidden, &mut lines);
            let prefix = format!("{}{} ", Self::pad(indent + 4), self.c.mark(mark));
            body.suffix(",").write_after(&prefix, &mut lines);
        }
        flush(&mut hidden, &mut lines);
        if lines.len() == 1 {
            return (Mark::NoOp, Lines::one("[]"));
        }
        lines.push(format!("{}]", Self::pad(indent + 2)));
        let any = changed.iter().any(|c| *c);
        (if any { Mark::Update } else { Mark::NoOp }, Lines(lines))
    }

    /// A block `SYM resource "type" "name" { ... }` for an instance's before → after.
    fn resource_block(
        &self,
        addr: &ResourceInstanceAddr,
        action: Action,
        before: Option<&Value>,
        after: Option<&Value>,
        ctx: &Ctx,
        show_all: bool,
    ) -> Vec<String> {
        let kind = match addr.resource.mode {
            Mode::Managed => "resource",
            Mode::Data => "data",
            Mode::Ephemeral => "ephemeral",
        };
        let head = format!(
            "{} {kind} {} {} ",
            self.c.symbol(action, 3),
            cairn_state::quote(&addr.resource.type_),
            cairn_state::quote(&addr.resource.name)
        );
        let empty = ValueMap::new();
        let attrs = |v: Option<&Value>| -> ValueMap {
            match v.and_then(Value::attributes) {
                Some(m) => m.clone(),
                None => empty.clone(),
            }
        };
        let key = BlockShape::key(addr.resource.mode, &addr.resource.type_);
        // Write-only attributes are drawn for an object being made (`+ x = (write-only
        // attribute)`) or deleted (`- x = (write-only attribute) -> null`); in an update or
        // a replacement they count among the unchanged attributes, as in Terraform's plans.
        let wo_mark = match action {
            Action::Create => Some(Mark::Create),
            Action::Update | Action::CreateThenDelete | Action::DeleteThenCreate => {
                Some(Mark::NoOp)
            }
            Action::Delete => Some(Mark::Delete),
            _ => None,
        };
        let with_wo;
        let ctx = match (self.shapes.get(&key), wo_mark) {
            (Some(shape), Some(mark)) if !shape.write_only.is_empty() => {
                with_wo = Ctx {
                    write_only: Some((&shape.write_only, mark)),
                    ..*ctx
                };
                &with_wo
            }
            _ => ctx,
        };
        let (_, body) = match self.shapes.get(&key) {
            Some(shape) => {
                self.block_diff(&attrs(before), &attrs(after), shape, 2, "", ctx, show_all)
            }
            None => self.object_diff(&attrs(before), &attrs(after), false, 2, "", ctx, show_all),
        };
        let mut lines = Vec::new();
        body.write_after(&head, &mut lines);
        if lines.len() == 1 {
            // Nothing to show inside: Terraform still draws an empty block.
            lines[0] = format!("{head}{{");
            lines.push("    }".into());
        }
        lines
    }

    /// The header comment of a change and its reason lines; `prev` is where a `moved` block
    /// moved the object from.
    fn change_header(&self, ch: &Change, prev: Option<&ResourceInstanceAddr>) -> Vec<String> {
        let mut lines = Vec::new();
        let shown;
        let addr: &dyn std::fmt::Display = match &ch.deposed {
            Some(key) => {
                shown = format!("{} (deposed object {key})", ch.addr);
                &shown
            }
            None => &ch.addr,
        };
        if ch.action == Action::Forget {
            // Terraform's layout, one column left of the others.
            lines.push(format!(
                " {}",
                self.c.bold(&format!(
                    "# {addr} will no longer be managed by Cairn, but will not be destroyed"
                ))
            ));
            lines.push(" # (destroy = false is set in the configuration)".into());
            return lines;
        }
        if let (Action::NoOp, Some(prev)) = (ch.action, prev) {
            lines.push(format!(
                "  {}",
                self.c.bold(&format!("# {prev} has moved to {addr}"))
            ));
            return lines;
        }
        let main = match (ch.action, ch.reason.as_deref()) {
            (
                Action::DeleteThenCreate | Action::CreateThenDelete,
                Some(Reason::ReplaceBecauseTainted),
            ) => {
                format!("# {addr} is tainted, so must be replaced")
            }
            (
                Action::DeleteThenCreate | Action::CreateThenDelete,
                Some(Reason::ReplaceByRequest),
            ) => {
                format!("# {addr} will be replaced, as requested")
            }
            (
                Action::DeleteThenCreate | Action::CreateThenDelete,
                Some(Reason::ReplaceByTriggers),
            ) => {
                format!("# {addr} will be replaced due to changes in replace_triggered_by")
            }
            (Action::DeleteThenCreate | Action::CreateThenDelete, _) => {
                format!("# {addr} must be replaced")
            }
            (Action::NoOp, _) if ch.importing.is_some() => format!("# {addr} will be imported"),
            (action, _) => format!("# {addr} will be {}", action.verb()),
        };
        lines.push(format!("  {}", self.c.bold(&main)));
        if let Some(reason) = &ch.reason {
            if let Some(text) = reason_text(&ch.addr, reason) {
                lines.push(format!("  # ({text})"));
            }
        }
        if ch.deposed.is_some() {
            lines.push(
                "  # (left over from a partially-failed replacement of this instance)".into(),
            );
        }
        if let Some(i) = &ch.importing {
            if ch.action != Action::NoOp {
                lines.push(format!("  # (imported from {})", quote_go(&i.id)));
            }
            if i.generated {
                lines.push("  # (config will be generated)".into());
            }
        }
        if ch.diff_unavailable
            && !matches!(
                ch.reason.as_deref(),
                Some(Reason::ProviderConfigUnknown { .. })
            )
        {
            lines.push(format!(
                "  # (the configuration of {} is not known until apply)",
                ch.provider
            ));
        }
        if let Some(prev) = prev {
            lines.push(format!("  # (moved from {prev})"));
        }
        lines
    }

    fn change_block(&self, ch: &Change, prev: Option<&ResourceInstanceAddr>) -> String {
        let ctx = Ctx {
            replace_paths: &ch.replace_paths,
            sensitive_paths: &ch.sensitive_attrs,
            write_only: None,
        };
        let mut lines = self.change_header(ch, prev);
        // A forgotten object is drawn as it is, unchanged.
        let after = match ch.action {
            Action::Forget => ch.before.as_ref(),
            _ => ch.after.as_ref(),
        };
        let mut block = self.resource_block(
            &ch.addr,
            ch.action,
            ch.before.as_ref(),
            after,
            &ctx,
            // Terraform shows every attribute of an object it imports.
            ch.importing.is_some(),
        );
        if ch.action == Action::Forget {
            if let Some(first) = block.first_mut() {
                *first = format!(" {}", first.trim_start());
            }
        }
        lines.extend(block);
        lines.join("\n") + "\n"
    }

    fn provider_block(&self, p: &ProviderChange) -> String {
        let verb = match p.action {
            Action::Create => "will be configured",
            Action::Update => "will be reconfigured in-place",
            Action::DeleteThenCreate | Action::CreateThenDelete => "must be replaced",
            Action::Delete | Action::Forget => "will be removed",
            Action::Read | Action::NoOp => "is unchanged",
        };
        let mut lines = vec![format!(
            "  {}",
            self.c.bold(&format!("# {} {verb}", p.addr))
        )];
        if matches!(
            p.action,
            Action::Update | Action::DeleteThenCreate | Action::CreateThenDelete
        ) {
            let empty = ValueMap::new();
            let b = p
                .before
                .as_ref()
                .and_then(Value::attributes)
                .unwrap_or(&empty);
            let a = p
                .after
                .as_ref()
                .and_then(Value::attributes)
                .unwrap_or(&empty);
            let (_, body) = self.object_diff(b, a, false, 2, "", &Ctx::NONE, false);
            // HCL names an alias inside the block; the comment above names the instance.
            let head = format!(
                "{} provider {}",
                self.c.symbol(p.action, 3),
                cairn_state::quote(&p.addr.package)
            );
            body.write_after(&format!("{head} "), &mut lines);
        }
        lines.join("\n") + "\n"
    }

    fn drift_block(&self, d: &Drift, ctx: &Ctx) -> String {
        let (action, words) = match d.after {
            Some(_) => (Action::Update, "has changed"),
            None => (Action::Delete, "has been deleted"),
        };
        let mut lines = vec![format!(
            "  {}",
            self.c.bold(&format!("# {} {words}", d.addr))
        )];
        lines.extend(self.resource_block(
            &d.addr,
            action,
            Some(&d.before),
            d.after.as_ref(),
            ctx,
            false,
        ));
        lines.join("\n") + "\n"
    }

    fn data_block(&self, d: &DataRead) -> String {
        let (action, words) = match d.before {
            Some(_) => (Action::Update, "has a new result"),
            None => (Action::Create, "has been read"),
        };
        let mut lines = vec![format!(
            "  {}",
            self.c.bold(&format!("# {} {words}", d.addr))
        )];
        lines.extend(self.resource_block(
            &d.addr,
            action,
            d.before.as_ref(),
            Some(&d.result),
            &Ctx::NONE,
            false,
        ));
        lines.join("\n") + "\n"
    }

    fn outputs(&self, outputs: &[&OutputChange], out: &mut String) {
        let w = outputs
            .iter()
            .map(|o| key_text(&o.name, false).chars().count())
            .max()
            .unwrap_or(0);
        let _ = writeln!(out, "\n{}", self.c.bold("Changes to Outputs:"));
        for o in outputs {
            let sens: Vec<String> = if o.sensitive {
                vec![String::new()]
            } else {
                vec![]
            };
            let ctx = Ctx {
                replace_paths: &[],
                sensitive_paths: &sens,
                write_only: None,
            };
            let (mark, body) = self.diff(o.before.as_ref(), o.after.as_ref(), 2, "", &ctx, false);
            let mark = match o.action {
                Action::Create => Mark::Create,
                Action::Delete => Mark::Delete,
                _ if mark == Mark::NoOp => Mark::Update,
                _ => mark,
            };
            let prefix = format!(
                "  {} {:<w$} = ",
                self.c.mark(mark),
                key_text(&o.name, false)
            );
            let mut lines = Vec::new();
            body.write_after(&prefix, &mut lines);
            for l in lines {
                let _ = writeln!(out, "{l}");
            }
        }
    }

    /// The note on what changed outside Cairn; in a read-only plan, also the objects that
    /// `moved` blocks move (Terraform lists them there in a refresh-only plan).
    fn drift_section(&self, plan: &Plan, drift: &[&Drift], moved: &[&Change], out: &mut String) {
        let _ = writeln!(
            out,
            "\n{} {}\n",
            self.c.cyan(&self.c.bold("Note:")),
            self.c.bold("Objects have changed outside of Cairn")
        );
        let _ = writeln!(
            out,
            "{}",
            self.wrap("Cairn detected the following changes made outside of Cairn since the last \"cairn apply\":")
        );
        for d in drift {
            // Borrow the schema's sensitive attributes from the instance's change, if any.
            let sens = plan
                .changes
                .iter()
                .find(|c| c.addr == d.addr)
                .map(|c| c.sensitive_attrs.as_slice())
                .unwrap_or(&[]);
            let ctx = Ctx {
                replace_paths: &[],
                sensitive_paths: sens,
                write_only: None,
            };
            let _ = write!(out, "\n{}", self.drift_block(d, &ctx));
        }
        let from = plan.moved_from();
        for c in moved {
            let _ = write!(
                out,
                "\n{}",
                self.change_block(c, from.get(&c.addr).copied())
            );
        }
    }

    fn normal(&self, plan: &Plan, out: &mut String) {
        // Unchanged objects are drawn only when a `moved` block moved them.
        let moved = plan.moved_from();
        let mut changes: Vec<&Change> = plan
            .changes
            .iter()
            .filter(|c| {
                c.action != Action::NoOp || moved.contains_key(&c.addr) || c.importing.is_some()
            })
            .collect();
        changes.sort_by(|a, b| a.addr.cmp(&b.addr));
        let mut providers: Vec<&ProviderChange> = plan
            .provider_changes
            .iter()
            .filter(|p| p.action != Action::NoOp)
            .collect();
        providers.sort_by(|a, b| a.addr.cmp(&b.addr));
        let outputs = sorted_outputs(plan);
        let drift = sorted_drift(plan);

        if !drift.is_empty() {
            self.drift_section(plan, &drift, &[], out);
            let _ = writeln!(
                out,
                "\n\n{}\n\n{}",
                self.wrap("Unless you have made equivalent changes to your configuration, or ignored the relevant attributes using ignore_changes, the following plan may include actions to undo or respond to these changes."),
                self.rule()
            );
        }

        // A failed plan with nothing planned says so, as Terraform's does (providers to
        // configure are no plan of their own).
        if plan.errored && changes.is_empty() && outputs.is_empty() {
            let _ = writeln!(
                out,
                "\n{}",
                self.wrap(
                    "Planning failed. Cairn encountered an error while generating this plan."
                )
            );
            return;
        }

        if changes.is_empty() && providers.is_empty() && outputs.is_empty() {
            let (head, body) = match plan.mode {
                PlanMode::Destroy => (
                    "No changes. No objects need to be destroyed.",
                    "Either you have not created any objects yet or the existing objects were already deleted outside of Cairn.".to_string(),
                ),
                _ if !drift.is_empty() => (
                    "No changes. Your infrastructure matches the configuration.",
                    "Your configuration already matches the changes detected above. If you'd like to update the Cairn state to match, run \"cairn refresh\".".to_string(),
                ),
                _ => (
                    "No changes. Your infrastructure matches the configuration.",
                    "Cairn has compared your real infrastructure against your configuration and found no differences, so no changes are needed.".to_string(),
                ),
            };
            let _ = writeln!(
                out,
                "\n{}\n\n{}",
                self.c.green(&self.c.bold(head)),
                self.wrap(&body)
            );
            return;
        }

        if !changes.is_empty() || !providers.is_empty() {
            let used: Vec<Action> = changes
                .iter()
                .map(|c| c.action)
                .filter(|a| *a != Action::NoOp)
                .chain(
                    providers
                        .iter()
                        .map(|p| p.action)
                        .filter(|a| *a != Action::Create && *a != Action::Delete),
                )
                .collect();
            // As Terraform: no legend when every change is a move or an import (a forget has
            // no symbol in the legend, but it still brings the legend's heading).
            if !used.is_empty() {
                let _ = writeln!(
                    out,
                    "\n{}",
                    self.wrap("Cairn used the selected providers to generate the following execution plan. Resource actions are indicated with the following symbols:")
                );
            }
            for (action, words) in LEGEND {
                if used.contains(&action) {
                    let _ = writeln!(out, "{} {words}", self.c.symbol(action, 3));
                }
            }
            let lead = if plan.errored {
                "Cairn planned the following actions, but then encountered a problem:"
            } else {
                "Cairn will perform the following actions:"
            };
            let _ = writeln!(out, "\n{lead}");
            for p in &providers {
                let _ = write!(out, "\n{}", self.provider_block(p));
            }
            for c in &changes {
                let _ = write!(
                    out,
                    "\n{}",
                    self.change_block(c, moved.get(&c.addr).copied())
                );
            }
            let (add, change, destroy) = plan.counts();
            let import = match plan.imports() {
                0 => String::new(),
                n => format!(" {n} to import,"),
            };
            let _ = writeln!(
                out,
                "\n{}{import} {add} to add, {change} to change, {destroy} to destroy.",
                self.c.bold("Plan:")
            );
        }
        if !outputs.is_empty() {
            self.outputs(&outputs, out);
            if changes.is_empty() && providers.is_empty() {
                let _ = writeln!(
                    out,
                    "\n{}",
                    self.wrap("You can apply this plan to save these new output values to the Cairn state, without changing any real infrastructure.")
                );
            }
        }
    }

    fn read_only(&self, plan: &Plan, out: &mut String) {
        let read_only = plan.mode == PlanMode::ReadOnly;
        let name = if read_only {
            "read-only"
        } else {
            "refresh-only"
        };
        let drift = sorted_drift(plan);
        let outputs = sorted_outputs(plan);
        let mut data: Vec<&DataRead> = if read_only {
            plan.data_reads
                .iter()
                .filter(|d| d.before.as_ref().is_none_or(|b| !same(b, &d.result)))
                .collect()
        } else {
            Vec::new()
        };
        data.sort_by(|a, b| a.addr.cmp(&b.addr));

        let from = plan.moved_from();
        let mut moved: Vec<&Change> = plan
            .changes
            .iter()
            .filter(|c| from.contains_key(&c.addr))
            .collect();
        moved.sort_by(|a, b| a.addr.cmp(&b.addr));
        if drift.is_empty() && data.is_empty() && outputs.is_empty() && moved.is_empty() {
            let body = if read_only {
                "Cairn has checked that the real remote objects still match the result of your most recent changes, that data sources return the results recorded in the state, and found no differences."
            } else {
                "Cairn has checked that the real remote objects still match the result of your most recent changes, and found no differences."
            };
            let _ = writeln!(
                out,
                "\n{}\n\n{}",
                self.c.green(
                    &self
                        .c
                        .bold("No changes. Your infrastructure still matches the configuration.")
                ),
                self.wrap(body)
            );
            return;
        }
        if !drift.is_empty() || !moved.is_empty() {
            self.drift_section(plan, &drift, &moved, out);
        }
        if !data.is_empty() {
            let _ = writeln!(
                out,
                "\n{} {}\n",
                self.c.cyan(&self.c.bold("Note:")),
                self.c.bold("Data sources have new results")
            );
            let _ = writeln!(out, "{}", self.wrap("Cairn read these data sources and found results that differ from the ones in the state:"));
            for d in &data {
                let _ = write!(out, "\n{}", self.data_block(d));
            }
        }
        if !outputs.is_empty() {
            self.outputs(&outputs, out);
        }
        let what = if read_only {
            "the refreshed objects, the new data source results and the output values"
        } else {
            "the refreshed objects and the output values"
        };
        let _ = writeln!(
            out,
            "\n\n{}",
            self.wrap(&format!("This is a {name} plan, so Cairn will not take any actions to undo these. If you were expecting these changes then you can apply this plan to record {what} in the Cairn state without changing any remote objects."))
        );
        let mut parts = Vec::new();
        if !moved.is_empty() {
            parts.push(plural(moved.len(), "object moved", "objects moved"));
        }
        if !drift.is_empty() {
            parts.push(plural(
                drift.len(),
                "object changed outside Cairn",
                "objects changed outside Cairn",
            ));
        }
        if !data.is_empty() {
            parts.push(plural(
                data.len(),
                "data result changed",
                "data results changed",
            ));
        }
        if !outputs.is_empty() {
            parts.push(plural(
                outputs.len(),
                "output to change",
                "outputs to change",
            ));
        }
        let title = if read_only {
            "Read-only plan:"
        } else {
            "Refresh-only plan:"
        };
        let summary = self.wrap(&format!("{title} {}.", parts.join(", ")));
        let summary = summary.replacen(title, &self.c.bold(title), 1);
        let _ = writeln!(out, "\n{summary}");
    }
}

fn sorted_outputs(plan: &Plan) -> Vec<&OutputChange> {
    let mut v: Vec<&OutputChange> = plan
        .outputs
        .iter()
        .filter(|o| o.action != Action::NoOp)
        .collect();
    v.sort_by(|a, b| a.name.cmp(&b.name));
    v
}

fn sorted_drift(plan: &Plan) -> Vec<&Drift> {
    let mut v: Vec<&Drift> = plan.drift.iter().collect();
    v.sort_by(|a, b| a.addr.cmp(&b.addr));
    v
}

/// The past participle for "which will be …" in deferred-read reasons.
fn pending_verb(action: Action) -> &'static str {
    match action {
        Action::NoOp => "left unchanged",
        Action::Create => "created",
        Action::Read => "read during apply",
        Action::Update => "updated",
        Action::DeleteThenCreate | Action::CreateThenDelete => "replaced",
        Action::Delete => "destroyed",
        Action::Forget => "forgotten",
    }
}

/// The words in parentheses under a change's header, where Terraform prints one (and, for
/// deferred reads, with the chain that Terraform leaves out). `None` for reasons the header
/// already says.
pub(crate) fn reason_text(addr: &ResourceInstanceAddr, reason: &Reason) -> Option<String> {
    Some(match reason {
        Reason::ReplaceBecauseCannotUpdate
        | Reason::ReplaceBecauseTainted
        | Reason::ReplaceByRequest
        | Reason::ReplaceByTriggers => return None,
        Reason::ReplaceBecauseProviderChanged {
            provider,
            from: None,
        } => format!("because its provider instance {provider} is replaced"),
        Reason::ReplaceBecauseProviderChanged {
            provider,
            from: Some(from),
        } => format!("because it moves from {from} to {provider}, which is configured differently"),
        Reason::DeleteBecauseNoResourceConfig => {
            format!("because {} is not in configuration", addr.resource)
        }
        Reason::DeleteBecauseNoModule => {
            format!("because {} is not in configuration", addr.resource.module)
        }
        Reason::DeleteBecauseCountIndex => match &addr.key {
            Some(k) => format!("because index {k} is out of range for count"),
            None => "because the resource no longer has count".into(),
        },
        Reason::DeleteBecauseEachKey => match &addr.key {
            Some(k) => format!("because key {k} is not in for_each map"),
            None => "because the resource no longer has for_each".into(),
        },
        Reason::ProviderConfigUnknown { provider } => {
            format!("the configuration of {provider} is not known until apply")
        }
        Reason::ReadBecauseConfigUnknown { value, chain } => {
            let mut s = format!("config refers to values not yet known: {value}");
            if let Some((origin, via)) = chain.split_last() {
                s.push_str(&format!(", from {origin}"));
                if !via.is_empty() {
                    s.push_str(&format!(" via {}", via.join(", ")));
                }
            }
            s
        }
        Reason::ReadBecauseCheckNested => "config will be reloaded to verify a check block".into(),
        Reason::ReadBecauseDependencyPending {
            dependency,
            action,
            via,
        } => {
            let mut s = format!(
                "depends on {dependency}, which will be {}",
                pending_verb(*action)
            );
            if !via.is_empty() {
                s.push_str(&format!(", via {}", via.join(", ")));
            }
            s
        }
    })
}
