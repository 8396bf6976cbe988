//! `*.tftest.hcl` files (`cairn test`): their blocks decoded into a [`TestFile`] — file-level
//! `variables`, `provider` and `mock_provider` blocks, `override_*` blocks and `run` blocks with
//! their `variables`, `module`, `plan_options`, `expect_failures` and `assert` blocks, as
//! Terraform 1.11 reads them. Expressions stay hcl-edit expressions in the file's own
//! [`SourceMap`]; the engine's test runner evaluates them.

use super::span_in;
use crate::eval::suggest;

/// The blocks a test file may hold.
const TOP: &[&str] = &[
    "run",
    "variables",
    "provider",
    "mock_provider",
    "override_resource",
    "override_data",
    "override_module",
];
use crate::diag::{Diagnostic, Diagnostics, FileId, SourceMap, Span};
use hcl_edit::expr::{Expression, TraversalOperator};
use hcl_edit::structure::{Block, Body, Structure};
use std::path::{Path, PathBuf};

/// One test file.
pub struct TestFile {
    /// As the user sees it: relative to the configuration's directory (`tests/a.tftest.hcl`).
    pub name: String,
    pub sources: SourceMap,
    pub file: FileId,
    pub variables: Vec<(String, Expression)>,
    pub providers: Vec<TestProvider>,
    pub overrides: Vec<Override>,
    pub runs: Vec<RunBlock>,
}

/// `command = plan|apply`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunCommand {
    Plan,
    Apply,
}

/// A `provider` or `mock_provider` block of a test file.
pub struct TestProvider {
    pub name: String,
    pub alias: Option<String>,
    /// The block's body (arguments of the provider's configuration); for a mock: unused.
    pub body: Body,
    pub span: Span,
    /// `Some` for a `mock_provider`: its `mock_resource`/`mock_data` defaults and overrides.
    pub mock: Option<MockBlocks>,
}

/// What a `mock_provider` holds.
#[derive(Default)]
pub struct MockBlocks {
    /// `mock_resource "TYPE" { defaults = {…} }`.
    pub resources: Vec<(String, Option<Expression>)>,
    /// `mock_data "TYPE" { defaults = {…} }`.
    pub data: Vec<(String, Option<Expression>)>,
    pub overrides: Vec<Override>,
}

/// Which kind of object an `override_*` block replaces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OverrideKind {
    Resource,
    Data,
    Module,
}

/// `override_resource`/`override_data` (`values`) or `override_module` (`outputs`).
pub struct Override {
    pub kind: OverrideKind,
    /// The target address as written (`aws_s3_bucket.b`, `module.m`, `data.x.y[0]`).
    pub target: String,
    pub target_span: Span,
    pub values: Option<Expression>,
    /// `override_during = plan`: the values are used when planning too (else only at apply).
    pub at_plan: bool,
}

/// A `run` block.
pub struct RunBlock {
    pub name: String,
    pub span: Span,
    pub command: RunCommand,
    pub variables: Vec<(String, Expression)>,
    /// `module { source = "…" }`: a local directory, relative to the configuration's root.
    pub module: Option<String>,
    pub refresh_only: bool,
    pub refresh: bool,
    pub replace: Vec<(String, Span)>,
    pub target: Vec<(String, Span)>,
    pub expect_failures: Vec<(String, Span)>,
    pub asserts: Vec<Assert>,
    pub overrides: Vec<Override>,
    /// `providers = { aws = aws.fake }`: local name → the test file's provider (`name.alias`).
    pub providers: Vec<(String, String)>,
    pub state_key: Option<String>,
}

/// An `assert` block.
pub struct Assert {
    pub condition: Expression,
    pub error_message: Expression,
    pub span: Span,
}

/// Every `*.tftest.hcl` file of `dir` and of `dir/<test_dir>`, in that order, each sorted
/// by name (as Terraform runs them); `filter` keeps only the files named (by their path
/// relative to `dir`).
pub fn test_files(dir: &Path, test_dir: &str, filter: &[String]) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for d in [dir.to_path_buf(), dir.join(test_dir)] {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        let mut files: Vec<PathBuf> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.is_file() && p.to_string_lossy().ends_with(".tftest.hcl"))
            .collect();
        files.sort();
        out.extend(files);
    }
    if !filter.is_empty() {
        out.retain(|p| {
            let rel = p.strip_prefix(dir).unwrap_or(p);
            filter.iter().any(|f| Path::new(f) == rel)
        });
    }
    out
}

/// Reads and decodes one test file; `name` is its path as shown.
pub fn load_test_file(path: &Path, name: &str) -> (Option<TestFile>, Diagnostics) {
    let mut diags = Diagnostics::new();
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) => {
            diags.push(Diagnostic::error(
                "Failed to read test file",
                format!("Cannot read {name}: {e}."),
            ));
            return (None, diags);
        }
    };
    let mut sources = SourceMap::new();
    let file = sources.add(name, text.clone());
    let body: Body = match text.parse() {
        Ok(b) => b,
        Err(e) => {
            let loc = e.location();
            let line_start: usize = text
                .split_inclusive('\n')
                .take(loc.line().saturating_sub(1))
                .map(str::len)
                .sum();
            let start = (line_start + loc.column().saturating_sub(1)).min(text.len());
            diags.push(
                Diagnostic::error("Invalid syntax", e.message().to_string()).with_span(Some(
                    Span {
                        file,
                        start,
                        end: start,
                    },
                )),
            );
            return (None, diags);
        }
    };
    let mut d = Decoder { file, diags };
    let mut tf = TestFile {
        name: name.to_string(),
        sources: SourceMap::new(),
        file,
        variables: Vec::new(),
        providers: Vec::new(),
        overrides: Vec::new(),
        runs: Vec::new(),
    };
    let mut names = std::collections::BTreeSet::new();
    for s in body.into_iter() {
        match s {
            Structure::Attribute(a) => d.err(
                &a.key,
                "Unsupported argument",
                format!(
                    "An argument named {:?} is not expected here.",
                    a.key.as_str()
                ),
            ),
            Structure::Block(b) => match b.ident.as_str() {
                "variables" => tf.variables.extend(d.variables(&b)),
                "provider" | "mock_provider" => {
                    if let Some(p) = d.provider(b) {
                        tf.providers.push(p);
                    }
                }
                "override_resource" | "override_data" | "override_module" => {
                    if let Some(o) = d.override_block(&b) {
                        tf.overrides.push(o);
                    }
                }
                "run" => {
                    if let Some(r) = d.run(&b) {
                        if !names.insert(r.name.clone()) {
                            d.err(
                                &b.ident,
                                "Duplicate \"run\" block names",
                                format!("This test file already has a run block named {}.", r.name),
                            );
                        }
                        tf.runs.push(r);
                    }
                }
                other => d.err(
                    &b.ident,
                    "Unsupported block type",
                    format!(
                        "Blocks of type {other:?} are not expected here.{}",
                        suggest::suffix(other, TOP.iter().copied())
                    ),
                ),
            },
        }
    }
    tf.sources = sources;
    (Some(tf), d.diags)
}

/// The decoder's state: the file, and what it found wrong.
struct Decoder {
    file: FileId,
    diags: Diagnostics,
}

impl Decoder {
    fn span(&self, node: &impl hcl_edit::Span) -> Span {
        span_in(self.file, node)
    }

    fn err(&mut self, at: &impl hcl_edit::Span, summary: &str, detail: String) {
        let sp = self.span(at);
        self.diags
            .push(Diagnostic::error(summary, detail).with_span(Some(sp)));
    }

    fn label(&mut self, b: &Block) -> Option<String> {
        match b.labels.first() {
            Some(l) if b.labels.len() == 1 => Some(l.as_str().to_string()),
            _ => {
                let kind = b.ident.as_str();
                self.err(
                    &b.ident,
                    &format!("Missing name for {kind}"),
                    format!("All {kind} blocks must have 1 labels (name)."),
                );
                None
            }
        }
    }

    fn variables(&mut self, b: &Block) -> Vec<(String, Expression)> {
        let mut out = Vec::new();
        for s in b.body.iter() {
            match s {
                Structure::Attribute(a) => out.push((a.key.as_str().to_string(), a.value.clone())),
                Structure::Block(nb) => self.err(
                    &nb.ident,
                    "Unsupported block type",
                    "Blocks are not allowed in a variables block.".into(),
                ),
            }
        }
        out
    }

    /// A string argument's constant text.
    fn string(&mut self, e: &Expression) -> Option<String> {
        match e {
            Expression::String(s) => Some(s.value().to_string()),
            Expression::StringTemplate(t) => {
                let lits: Option<String> = t
                    .iter()
                    .map(|el| match el {
                        hcl_edit::template::Element::Literal(l) => Some(l.value().to_string()),
                        _ => None,
                    })
                    .collect();
                if lits.is_none() {
                    self.err(
                        e,
                        "Invalid value",
                        "A static string is required here.".into(),
                    );
                }
                lits
            }
            _ => {
                self.err(e, "Invalid value", "A string is required here.".into());
                None
            }
        }
    }

    /// A traversal's text (`aws_s3_bucket.b`, `var.x`, `module.m[0]`), for addresses.
    fn traversal(&mut self, e: &Expression) -> Option<String> {
        let text = traversal_text(e);
        if text.is_none() {
            self.err(
                e,
                "Invalid reference",
                "A static reference to an object is required here.".into(),
            );
        }
        text
    }

    fn traversals(&mut self, e: &Expression) -> Vec<(String, Span)> {
        match e {
            Expression::Array(a) => a
                .iter()
                .filter_map(|x| Some((self.traversal(x)?, self.span(x))))
                .collect(),
            _ => {
                self.err(
                    e,
                    "Invalid value",
                    "A list of references is required here.".into(),
                );
                Vec::new()
            }
        }
    }

    fn provider(&mut self, b: Block) -> Option<TestProvider> {
        let name = self.label(&b)?;
        let span = self.span(&b.ident);
        let mock = b.ident.as_str() == "mock_provider";
        let mut alias = None;
        let mut blocks = MockBlocks::default();
        let mut body = Body::new();
        for s in b.body.into_iter() {
            match s {
                Structure::Attribute(a) if a.key.as_str() == "alias" => {
                    alias = self.string(&a.value)
                }
                Structure::Attribute(a) if mock && a.key.as_str() == "source" => {}
                Structure::Attribute(a) if mock => self.err(
                    &a.key,
                    "Unsupported argument",
                    format!(
                        "An argument named {:?} is not expected here.",
                        a.key.as_str()
                    ),
                ),
                Structure::Block(nb) if mock => match nb.ident.as_str() {
                    "mock_resource" | "mock_data" => {
                        let Some(t) = self.label(&nb) else { continue };
                        let defaults = self.only_attr(&nb, "defaults");
                        if nb.ident.as_str() == "mock_resource" {
                            blocks.resources.push((t, defaults));
                        } else {
                            blocks.data.push((t, defaults));
                        }
                    }
                    "override_resource" | "override_data" | "override_module" => {
                        if let Some(o) = self.override_block(&nb) {
                            blocks.overrides.push(o);
                        }
                    }
                    other => self.err(
                        &nb.ident,
                        "Unsupported block type",
                        format!("Blocks of type {other:?} are not expected here."),
                    ),
                },
                s => body.push(s),
            }
        }
        Some(TestProvider {
            name,
            alias,
            body,
            span,
            mock: mock.then_some(blocks),
        })
    }

    /// The one argument `name` a block may hold (`defaults`), if set.
    fn only_attr(&mut self, b: &Block, name: &str) -> Option<Expression> {
        let mut out = None;
        for s in b.body.iter() {
            match s {
                Structure::Attribute(a) if a.key.as_str() == name => out = Some(a.value.clone()),
                Structure::Attribute(a) => self.err(
                    &a.key,
                    "Unsupported argument",
                    format!(
                        "An argument named {:?} is not expected here.",
                        a.key.as_str()
                    ),
                ),
                Structure::Block(nb) => self.err(
                    &nb.ident,
                    "Unsupported block type",
                    format!(
                        "Blocks of type {:?} are not expected here.",
                        nb.ident.as_str()
                    ),
                ),
            }
        }
        out
    }

    fn override_block(&mut self, b: &Block) -> Option<Override> {
        let (kind, values_name) = match b.ident.as_str() {
            "override_resource" => (OverrideKind::Resource, "values"),
            "override_data" => (OverrideKind::Data, "values"),
            _ => (OverrideKind::Module, "outputs"),
        };
        let mut target = None;
        let mut values = None;
        let mut at_plan = false;
        for s in b.body.iter() {
            match s {
                Structure::Attribute(a) if a.key.as_str() == "target" => {
                    let sp = self.span(&a.value);
                    target = self.traversal(&a.value).map(|t| (t, sp));
                }
                Structure::Attribute(a) if a.key.as_str() == values_name => {
                    values = Some(a.value.clone())
                }
                Structure::Attribute(a) if a.key.as_str() == "override_during" => {
                    match self.traversal(&a.value).as_deref() {
                        Some("plan") => at_plan = true,
                        Some("apply") | None => {}
                        Some(_) => self.err(
                            &a.value,
                            "Invalid override_during value",
                            "override_during is plan or apply.".into(),
                        ),
                    }
                }
                Structure::Attribute(a) => self.err(
                    &a.key,
                    "Unsupported argument",
                    format!(
                        "An argument named {:?} is not expected here.",
                        a.key.as_str()
                    ),
                ),
                Structure::Block(nb) => self.err(
                    &nb.ident,
                    "Unsupported block type",
                    format!(
                        "Blocks of type {:?} are not expected here.",
                        nb.ident.as_str()
                    ),
                ),
            }
        }
        let Some((target, target_span)) = target else {
            self.err(
                &b.ident,
                "Missing required argument",
                "The argument \"target\" is required, but no definition was found.".into(),
            );
            return None;
        };
        Some(Override {
            kind,
            target,
            target_span,
            values,
            at_plan,
        })
    }

    // One arm per argument and nested block of `run`: long, but flat.
    fn run(&mut self, b: &Block) -> Option<RunBlock> {
        let name = self.label(b)?;
        let mut r = RunBlock {
            name,
            span: self.span(&b.labels[0]),
            command: RunCommand::Apply,
            variables: Vec::new(),
            module: None,
            refresh_only: false,
            refresh: true,
            replace: Vec::new(),
            target: Vec::new(),
            expect_failures: Vec::new(),
            asserts: Vec::new(),
            overrides: Vec::new(),
            providers: Vec::new(),
            state_key: None,
        };
        for s in b.body.iter() {
            match s {
                Structure::Attribute(a) => match a.key.as_str() {
                    "command" => match traversal_text(&a.value).as_deref() {
                        Some("plan") => r.command = RunCommand::Plan,
                        Some("apply") => r.command = RunCommand::Apply,
                        _ => self.err(
                            &a.value,
                            "Invalid \"command\" keyword",
                            "The \"command\" argument requires one of the following keywords without quotes: apply or plan.".into(),
                        ),
                    },
                    "expect_failures" => r.expect_failures = self.traversals(&a.value),
                    "state_key" => r.state_key = self.string(&a.value),
                    "parallel" => {}
                    "providers" => match &a.value {
                        Expression::Object(o) => {
                            for (k, v) in o.iter() {
                                let key = match k {
                                    hcl_edit::expr::ObjectKey::Ident(i) => i.as_str().to_string(),
                                    hcl_edit::expr::ObjectKey::Expression(e) => {
                                        traversal_text(e).unwrap_or_default()
                                    }
                                };
                                if let Some(t) = self.traversal(v.expr()) {
                                    r.providers.push((key, t));
                                }
                            }
                        }
                        other => self.err(
                            other,
                            "Invalid value",
                            "The \"providers\" argument requires an object of provider references.".into(),
                        ),
                    },
                    other => self.err(
                        &a.key,
                        "Unsupported argument",
                        format!(
                            "An argument named {other:?} is not expected here.{}",
                            suggest::suffix(
                                other,
                                ["command", "expect_failures", "state_key", "parallel", "providers"]
                            )
                        ),
                    ),
                },
                Structure::Block(nb) => match nb.ident.as_str() {
                    "variables" => r.variables.extend(self.variables(nb)),
                    "module" => {
                        r.module = self.only_attr_named(nb, &["source", "version"]);
                    }
                    "plan_options" => self.plan_options(nb, &mut r),
                    "assert" => {
                        let mut cond = None;
                        let mut msg = None;
                        for s in nb.body.iter() {
                            match s {
                                Structure::Attribute(a) if a.key.as_str() == "condition" => {
                                    cond = Some(a.value.clone())
                                }
                                Structure::Attribute(a) if a.key.as_str() == "error_message" => {
                                    msg = Some(a.value.clone())
                                }
                                Structure::Attribute(a) => self.err(
                                    &a.key,
                                    "Unsupported argument",
                                    format!("An argument named {:?} is not expected here.", a.key.as_str()),
                                ),
                                Structure::Block(x) => self.err(
                                    &x.ident,
                                    "Unsupported block type",
                                    format!("Blocks of type {:?} are not expected here.", x.ident.as_str()),
                                ),
                            }
                        }
                        if let Some(c) = cond.as_ref().filter(|c| crate::eval::references(c).is_empty()) {
                            self.err(
                                c,
                                "Invalid assert expression",
                                "The condition expression must refer to at least one object from elsewhere in the configuration, or else its result would not be checking anything.".into(),
                            );
                        }
                        match (cond, msg) {
                            (Some(condition), Some(error_message)) => r.asserts.push(Assert {
                                condition,
                                error_message,
                                span: self.span(&nb.ident),
                            }),
                            (c, _) => {
                                let missing = if c.is_none() { "condition" } else { "error_message" };
                                self.err(
                                    &nb.ident,
                                    "Missing required argument",
                                    format!("The argument {missing:?} is required, but no definition was found."),
                                )
                            }
                        }
                    }
                    "override_resource" | "override_data" | "override_module" => {
                        if let Some(o) = self.override_block(nb) {
                            r.overrides.push(o);
                        }
                    }
                    other => self.err(
                        &nb.ident,
                        "Unsupported block type",
                        format!("Blocks of type {other:?} are not expected here."),
                    ),
                },
            }
        }
        Some(r)
    }

    /// `module { source = "…" }`: the source (other allowed arguments are read past).
    fn only_attr_named(&mut self, b: &Block, allowed: &[&str]) -> Option<String> {
        let mut out = None;
        for s in b.body.iter() {
            match s {
                Structure::Attribute(a) if a.key.as_str() == allowed[0] => {
                    out = self.string(&a.value)
                }
                Structure::Attribute(a) if allowed.contains(&a.key.as_str()) => {}
                Structure::Attribute(a) => self.err(
                    &a.key,
                    "Unsupported argument",
                    format!(
                        "An argument named {:?} is not expected here.",
                        a.key.as_str()
                    ),
                ),
                Structure::Block(x) => self.err(
                    &x.ident,
                    "Unsupported block type",
                    format!(
                        "Blocks of type {:?} are not expected here.",
                        x.ident.as_str()
                    ),
                ),
            }
        }
        if out.is_none() {
            self.err(
                &b.ident,
                "Missing required argument",
                format!(
                    "The argument {:?} is required, but no definition was found.",
                    allowed[0]
                ),
            );
        }
        out
    }

    fn plan_options(&mut self, b: &Block, r: &mut RunBlock) {
        for s in b.body.iter() {
            match s {
                Structure::Attribute(a) => match a.key.as_str() {
                    "mode" => match traversal_text(&a.value).as_deref() {
                        Some("normal") => r.refresh_only = false,
                        Some("refresh-only") => r.refresh_only = true,
                        _ => self.err(
                            &a.value,
                            "Invalid \"mode\" keyword",
                            "The \"mode\" argument requires one of the following keywords without quotes: normal or refresh-only".into(),
                        ),
                    },
                    "refresh" => match &a.value {
                        Expression::Bool(v) => r.refresh = *v.value(),
                        other => self.err(other, "Invalid value", "A bool is required here.".into()),
                    },
                    "replace" => r.replace = self.traversals(&a.value),
                    "target" => r.target = self.traversals(&a.value),
                    other => self.err(
                        &a.key,
                        "Unsupported argument",
                        format!("An argument named {other:?} is not expected here."),
                    ),
                },
                Structure::Block(x) => self.err(
                    &x.ident,
                    "Unsupported block type",
                    format!("Blocks of type {:?} are not expected here.", x.ident.as_str()),
                ),
            }
        }
    }
}

/// A static traversal as text: `a.b`, `a.b[0]`, `a.b["k"]`; `None` for anything else.
pub fn traversal_text(e: &Expression) -> Option<String> {
    match e {
        Expression::Variable(v) => Some(v.as_str().to_string()),
        Expression::Traversal(t) => {
            let Expression::Variable(root) = &t.expr else {
                return None;
            };
            let mut out = root.as_str().to_string();
            for op in t.operators.iter() {
                match op.value() {
                    TraversalOperator::GetAttr(id) => {
                        out.push('.');
                        out.push_str(id.as_str());
                    }
                    TraversalOperator::Index(Expression::Number(n)) => {
                        out.push_str(&format!("[{}]", n.value()));
                    }
                    TraversalOperator::Index(Expression::String(s)) => {
                        out.push_str(&format!("[{:?}]", s.value().as_str()));
                    }
                    TraversalOperator::LegacyIndex(i) => {
                        out.push_str(&format!("[{}]", i.value()));
                    }
                    _ => return None,
                }
            }
            Some(out)
        }
        _ => None,
    }
}
