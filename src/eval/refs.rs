//! Reference extraction: which terms an expression (or a body) refers to, read from the AST.
//!
//! A reference is a traversal's root plus its static steps (`var.x`, `sim_thing.a`,
//! `data.sim_lookup.x`, `module.m.out`). Names bound by `for` expressions, template `%{for}`
//! directives and `dynamic` block iterators are not references; shadowing is respected.
//! The same `subject_of` decides what a traversal names for the evaluator, so extraction and
//! evaluation can never disagree.

use super::{Reference, Subject};
use crate::addr::Mode;
use hcl_edit::expr::{Expression, ObjectKey, TraversalOperator};
use hcl_edit::structure::{Block, Body, Structure};
use hcl_edit::template::{Directive, Element, Template};
use hcl_edit::{Decorated, Span as _};

/// Why a traversal does not name a term: a diagnostic's summary and detail.
pub(crate) type SubjectError = (String, String);

/// The subject a traversal rooted at `root` names, and how many of `ops` that consumed (the
/// rest are applied to the subject's value). `module.m` consumes one step even when an output
/// name follows: the call's value is an object of its outputs.
pub(crate) fn subject_of(
    root: &str,
    ops: &[Decorated<TraversalOperator>],
) -> Result<(Subject, usize), SubjectError> {
    let attr = |i: usize| -> Option<&str> {
        match ops.get(i).map(|o| o.value()) {
            Some(TraversalOperator::GetAttr(id)) => Some(id.as_str()),
            _ => None,
        }
    };
    let err = |s: &str, d: String| Err((s.to_string(), d));
    match root {
        "var" | "local" => match attr(0) {
            Some(n) => Ok((
                if root == "var" {
                    Subject::Var(n.to_string())
                } else {
                    Subject::Local(n.to_string())
                },
                1,
            )),
            None => err(
                "Invalid reference",
                format!(
                    "The \"{root}\" object cannot be accessed directly. Instead, access one of \
                     its attributes."
                ),
            ),
        },
        "module" => match attr(0) {
            Some(n) => {
                let output = match ops.get(1).map(|o| o.value()) {
                    Some(TraversalOperator::GetAttr(o)) => Some(o.to_string()),
                    Some(TraversalOperator::Index(_) | TraversalOperator::LegacyIndex(_)) => {
                        attr(2).map(str::to_string)
                    }
                    _ => None,
                };
                Ok((
                    Subject::ModuleCall {
                        name: n.to_string(),
                        output,
                    },
                    1,
                ))
            }
            None => err(
                "Invalid reference",
                "The \"module\" object cannot be accessed directly. Instead, access one of its \
                 attributes."
                    .into(),
            ),
        },
        // `resource.TYPE.NAME`: the long form of `TYPE.NAME`, for types whose name is one of
        // the reserved roots above.
        "resource" => match (attr(0), attr(1)) {
            (Some(t), Some(n)) => Ok((
                Subject::Resource {
                    mode: Mode::Managed,
                    type_: t.to_string(),
                    name: n.to_string(),
                },
                2,
            )),
            _ => err(
                "Invalid reference",
                "The \"resource\" object must be followed by two attribute names: the resource \
                 type and the resource name."
                    .into(),
            ),
        },
        "data" => match (attr(0), attr(1)) {
            (Some(t), Some(n)) => Ok((
                Subject::Resource {
                    mode: Mode::Data,
                    type_: t.to_string(),
                    name: n.to_string(),
                },
                2,
            )),
            _ => err(
                "Invalid reference",
                "A reference to a data source must be followed by at least one attribute \
                 access, specifying the resource name."
                    .into(),
            ),
        },
        "ephemeral" => match (attr(0), attr(1)) {
            (Some(t), Some(n)) => Ok((
                Subject::Resource {
                    mode: Mode::Ephemeral,
                    type_: t.to_string(),
                    name: n.to_string(),
                },
                2,
            )),
            _ => err(
                "Invalid reference",
                "A reference to an ephemeral resource must be followed by at least one \
                 attribute access, specifying the resource name."
                    .into(),
            ),
        },
        "count" => match attr(0) {
            Some("index") => Ok((Subject::CountIndex, 1)),
            other => err(
                "Invalid \"count\" attribute",
                format!(
                    "The \"count\" object does not have an attribute named {}. The only \
                     supported attribute is count.index, which is the index of each instance \
                     of a resource block that has the \"count\" argument set.",
                    cairn_state::quote(other.unwrap_or(""))
                ),
            ),
        },
        "each" => match attr(0) {
            Some("key") => Ok((Subject::EachKey, 1)),
            Some("value") => Ok((Subject::EachValue, 1)),
            other => err(
                "Invalid \"each\" attribute",
                format!(
                    "The \"each\" object does not have an attribute named {}. The supported \
                     attributes are each.key and each.value, the current key and value pair of \
                     the \"for_each\" attribute set.",
                    cairn_state::quote(other.unwrap_or(""))
                ),
            ),
        },
        "path" => match attr(0) {
            Some(a @ ("module" | "root" | "cwd")) => Ok((Subject::Path(a.to_string()), 1)),
            other => err(
                "Invalid \"path\" attribute",
                format!(
                    "The \"path\" object does not have an attribute named {}. The supported \
                     attributes are path.module, path.root and path.cwd.",
                    cairn_state::quote(other.unwrap_or(""))
                ),
            ),
        },
        "terraform" => match attr(0) {
            Some("workspace") => Ok((Subject::Terraform("workspace".into()), 1)),
            other => err(
                "Invalid \"terraform\" attribute",
                format!(
                    "The \"terraform\" object does not have an attribute named {}. The only \
                     supported attribute is terraform.workspace, the name of the currently \
                     selected workspace.",
                    cairn_state::quote(other.unwrap_or(""))
                ),
            ),
        },
        "self" => Ok((Subject::SelfRef, 0)),
        type_ => match attr(0) {
            Some(n) => Ok((
                Subject::Resource {
                    mode: Mode::Managed,
                    type_: type_.to_string(),
                    name: n.to_string(),
                },
                1,
            )),
            None => err(
                "Invalid reference",
                "A reference to a resource type must be followed by at least one attribute \
                 access, specifying the resource name."
                    .into(),
            ),
        },
    }
}

/// The references of one expression, in source order. Traversals that do not name a term
/// (`var` alone) are left out: the evaluator reports them.
pub fn references(expr: &Expression) -> Vec<Reference> {
    let mut w = Walker {
        bound: Vec::new(),
        out: Vec::new(),
        past_ephemeralasnull: false,
    };
    w.expr(expr);
    w.out
}

/// The references whose values may reach the result of `expr`: all but those inside
/// `ephemeralasnull(…)`, whose result is never ephemeral (for the ephemeral-value checks).
pub(crate) fn value_references(expr: &Expression) -> Vec<Reference> {
    let mut w = Walker {
        bound: Vec::new(),
        out: Vec::new(),
        past_ephemeralasnull: true,
    };
    w.expr(expr);
    w.out
}

/// The references of a body (a resource's arguments and nested blocks), handling `dynamic`
/// blocks: their `for_each` is read outside the iterator's scope, their `content` inside it.
pub fn body_references(body: &Body) -> Vec<Reference> {
    let mut w = Walker {
        bound: Vec::new(),
        out: Vec::new(),
        past_ephemeralasnull: false,
    };
    w.body(body);
    w.out
}

/// A static traversal as a subject, for `depends_on`, `replace_triggered_by` and the like:
/// the subject and whether the traversal goes further than the subject (`sim_thing.a.id`).
pub(crate) fn traversal_subject(expr: &Expression) -> Result<(Subject, bool), SubjectError> {
    match expr {
        Expression::Variable(v) => subject_of(v.as_str(), &[]).map(|(s, _)| (s, false)),
        Expression::Traversal(t) => match &t.expr {
            Expression::Variable(v) => {
                let (s, n) = subject_of(v.as_str(), &t.operators)?;
                // `module.m.out` names the output, so that step is part of the subject.
                let n = match &s {
                    Subject::ModuleCall {
                        output: Some(_), ..
                    } => n + 1,
                    _ => n,
                };
                Ok((s, t.operators.len() > n))
            }
            _ => Err(invalid_static()),
        },
        _ => Err(invalid_static()),
    }
}

/// `depends_on`'s reading of one entry: as `traversal_subject`, except that one instance of a
/// resource or module call (`x.pools[0]`, `module.m["a"]`) names its whole object, as
/// Terraform's `depends_on` accepts it (dependencies are between blocks).
pub(crate) fn depends_on_subject(expr: &Expression) -> Result<(Subject, bool), SubjectError> {
    let (subject, partial) = traversal_subject(expr)?;
    if !partial {
        return Ok((subject, false));
    }
    let (Expression::Traversal(t), true) = (
        expr,
        matches!(
            subject,
            Subject::Resource { .. } | Subject::ModuleCall { output: None, .. }
        ),
    ) else {
        return Ok((subject, true));
    };
    let Expression::Variable(v) = &t.expr else {
        return Ok((subject, true));
    };
    let (_, n) = subject_of(v.as_str(), &t.operators)?;
    let instance = matches!(
        t.operators.get(n..).map(|rest| rest.iter().map(|o| o.value()).collect::<Vec<_>>()),
        Some(rest) if rest.len() == 1
            && matches!(rest[0], TraversalOperator::Index(_) | TraversalOperator::LegacyIndex(_))
    );
    Ok((subject, !instance))
}

fn invalid_static() -> SubjectError {
    (
        "Invalid expression".into(),
        "A single static variable reference is required: only attribute access and indexing \
         with constant keys. No calculations, function calls, template expressions, etc are \
         allowed here."
            .into(),
    )
}

struct Walker {
    /// Names bound by enclosing `for` expressions and iterators, innermost last.
    bound: Vec<String>,
    out: Vec<Reference>,
    /// Leave out what is inside `ephemeralasnull(…)` (`value_references`).
    past_ephemeralasnull: bool,
}

impl Walker {
    fn is_bound(&self, name: &str) -> bool {
        self.bound.iter().any(|b| b == name)
    }

    fn root(
        &mut self,
        name: &str,
        ops: &[Decorated<TraversalOperator>],
        span: Option<std::ops::Range<usize>>,
    ) {
        if self.is_bound(name) {
            return;
        }
        if let Ok((subject, _)) = subject_of(name, ops) {
            let r = span.unwrap_or(0..0);
            self.out.push(Reference {
                subject,
                start: r.start,
                end: r.end,
            });
        }
    }

    fn expr(&mut self, e: &Expression) {
        match e {
            Expression::Null(_)
            | Expression::Bool(_)
            | Expression::Number(_)
            | Expression::String(_) => {}
            Expression::Array(a) => {
                for x in a.iter() {
                    self.expr(x);
                }
            }
            Expression::Object(o) => {
                for (k, v) in o.iter() {
                    if let ObjectKey::Expression(k) = k {
                        self.expr(k);
                    }
                    self.expr(v.expr());
                }
            }
            Expression::StringTemplate(t) => {
                for el in t.iter() {
                    self.element(el);
                }
            }
            Expression::HeredocTemplate(h) => self.template(&h.template),
            Expression::Parenthesis(p) => self.expr(p.inner()),
            Expression::Variable(v) => self.root(v.as_str(), &[], v.span()),
            Expression::Conditional(c) => {
                self.expr(&c.cond_expr);
                self.expr(&c.true_expr);
                self.expr(&c.false_expr);
            }
            Expression::FuncCall(f) => {
                if self.past_ephemeralasnull && f.name.name.as_str() == "ephemeralasnull" {
                    return;
                }
                for a in f.args.iter() {
                    self.expr(a);
                }
            }
            Expression::Traversal(t) => {
                match &t.expr {
                    Expression::Variable(v) => self.root(v.as_str(), &t.operators, t.span()),
                    other => self.expr(other),
                }
                for op in &t.operators {
                    if let TraversalOperator::Index(i) = op.value() {
                        self.expr(i);
                    }
                }
            }
            Expression::UnaryOp(u) => self.expr(&u.expr),
            Expression::BinaryOp(b) => {
                self.expr(&b.lhs_expr);
                self.expr(&b.rhs_expr);
            }
            Expression::ForExpr(f) => {
                self.expr(&f.intro.collection_expr);
                let n = self.bound.len();
                if let Some(k) = &f.intro.key_var {
                    self.bound.push(k.as_str().to_string());
                }
                self.bound.push(f.intro.value_var.as_str().to_string());
                if let Some(k) = &f.key_expr {
                    self.expr(k);
                }
                self.expr(&f.value_expr);
                if let Some(c) = &f.cond {
                    self.expr(&c.expr);
                }
                self.bound.truncate(n);
            }
        }
    }

    fn template(&mut self, t: &Template) {
        for el in t.iter() {
            self.element(el);
        }
    }

    fn element(&mut self, el: &Element) {
        match el {
            Element::Literal(_) => {}
            Element::Interpolation(i) => self.expr(&i.expr),
            Element::Directive(d) => match &**d {
                Directive::If(d) => {
                    self.expr(&d.if_expr.cond_expr);
                    self.template(&d.if_expr.template);
                    if let Some(e) = &d.else_expr {
                        self.template(&e.template);
                    }
                }
                Directive::For(d) => {
                    let f = &d.for_expr;
                    self.expr(&f.collection_expr);
                    let n = self.bound.len();
                    if let Some(k) = &f.key_var {
                        self.bound.push(k.as_str().to_string());
                    }
                    self.bound.push(f.value_var.as_str().to_string());
                    self.template(&f.template);
                    self.bound.truncate(n);
                }
            },
        }
    }

    fn body(&mut self, body: &Body) {
        for s in body.iter() {
            match s {
                Structure::Attribute(a) => self.expr(&a.value),
                Structure::Block(b) if b.ident.as_str() == "dynamic" => self.dynamic(b),
                Structure::Block(b) => self.body(&b.body),
            }
        }
    }

    fn dynamic(&mut self, b: &Block) {
        let label = b.labels.first().map(|l| l.as_str().to_string());
        let iterator = b
            .body
            .get_attribute("iterator")
            .and_then(|a| match &a.value {
                Expression::Variable(v) => Some(v.as_str().to_string()),
                _ => None,
            })
            .or(label);
        for s in b.body.iter() {
            match s {
                Structure::Attribute(a) if a.key.as_str() == "iterator" => {}
                Structure::Attribute(a) if a.key.as_str() == "for_each" => self.expr(&a.value),
                Structure::Attribute(a) => {
                    // `labels` and anything else is evaluated inside the iterator's scope.
                    self.with_bound(iterator.as_deref(), |w| w.expr(&a.value));
                }
                Structure::Block(c) => {
                    self.with_bound(iterator.as_deref(), |w| w.body(&c.body));
                }
            }
        }
    }

    fn with_bound(&mut self, name: Option<&str>, f: impl FnOnce(&mut Walker)) {
        let n = self.bound.len();
        if let Some(name) = name {
            self.bound.push(name.to_string());
        }
        f(self);
        self.bound.truncate(n);
    }
}
