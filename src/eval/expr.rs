//! The expression evaluator: the whole HCL expression language with Terraform's semantics.
//!
//! Decisions:
//! - Evaluation asks the `Scope` for each subject (`var.x`, `sim_thing.a`, ...) and applies
//!   the rest of the traversal itself, so every attribute and index error is reported here
//!   with the span of the step at fault.
//! - Unknown in → unknown out: an operator, template, traversal, conditional or `for` whose
//!   result depends on an unknown gives an unknown (of the right type where it is known);
//!   `false && unknown` and `true || unknown` are known.
//! - Sensitive marks propagate: a result computed from a sensitive value is sensitive.
//! - Errors are collected from independent sub-expressions (all elements of a tuple, all
//!   arguments of a call), so one run reports them all.
//! - Number literals are read from their source text, never through f64, so
//!   `9007199254740993` stays exact; division keeps 100 significant digits.

use super::convert::{equals, friendly_name, unify};
use super::functions::FunctionContext;
use super::refs::subject_of;
use super::suggest;
use super::{functions, Scope, ScopeError, Subject};
use crate::diag::{Diagnostic, Diagnostics, FileId, Span};
use crate::value::ValueMap;
use crate::value::{Number, Type, Value};
use bigdecimal::{BigDecimal, Zero};
use hcl_edit::expr::{
    BinaryOperator, Expression, ForExpr, FuncCall, ObjectKey, Traversal, TraversalOperator,
    UnaryOperator,
};
use hcl_edit::template::{Directive, Element, Template};
use hcl_edit::{Decorated, Span as _};
use std::collections::BTreeMap;
use std::ops::Range;
use std::path::Path;
use std::str::FromStr;

type R = Result<Value, Diagnostics>;

/// `convert::convert` for a borrowed value, with the error as its message.
pub(crate) fn convert(v: &Value, ty: &Type) -> Result<Value, String> {
    super::convert::convert(v.clone(), ty).map_err(|e| e.to_string())
}

/// Evaluates an expression in a scope.
pub fn eval(expr: &Expression, scope: &dyn Scope) -> R {
    Evaluator::new(scope).expr(expr)
}

/// Evaluates a template (`templatefile`'s contents) with `vars` as its only names.
/// Errors are returned as one message each (the template has no file of its own).
pub fn eval_template_string(
    src: &str,
    vars: &ValueMap,
    ctx: &FunctionContext,
    origin: &str,
) -> Result<Value, String> {
    let template = hcl_edit::parser::parse_template(src).map_err(|e| {
        format!(
            "invalid template syntax at line {}, column {}: {}",
            e.location().line(),
            e.location().column(),
            e.message()
        )
    })?;
    let scope = TemplateScope {
        module_dir: ctx.module_dir,
        root_dir: ctx.root_dir,
    };
    let mut ev = Evaluator::new(&scope);
    ev.template_source = Some((origin.to_string(), src.to_string()));
    for (k, v) in vars {
        ev.bindings.push((k.clone(), v.clone()));
    }
    ev.template_in(&template, true, None).map_err(|d| {
        d.iter()
            .map(|d| {
                if d.summary == TEMPLATE_VARS {
                    d.detail.clone()
                } else {
                    format!("{}: {}", d.summary, d.detail)
                }
            })
            .collect::<Vec<_>>()
            .join("; ")
    })
}

/// The summary of a template's reference to a variable it was not given (an error of the
/// `vars` argument).
const TEMPLATE_VARS: &str = "Invalid vars";

/// 1-based line and column (in characters) of a byte offset.
fn line_col(src: &str, at: usize) -> (usize, usize) {
    let before = &src[..at.min(src.len())];
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().unwrap_or("").chars().count() + 1;
    (line, col)
}

struct TemplateScope<'a> {
    module_dir: &'a Path,
    root_dir: &'a Path,
}

impl Scope for TemplateScope<'_> {
    fn resolve(&self, subject: &Subject) -> Result<Value, ScopeError> {
        Err(ScopeError::new(
            "Invalid reference",
            format!(
                "A template can only use the variables passed to it; {} is not one of them.",
                describe(subject)
            ),
        ))
    }
    fn file(&self) -> FileId {
        FileId(u32::MAX)
    }
    fn module_dir(&self) -> &Path {
        self.module_dir
    }
    fn root_dir(&self) -> &Path {
        self.root_dir
    }
}

pub(crate) fn describe(s: &Subject) -> String {
    match s {
        Subject::Var(n) => format!("var.{n}"),
        Subject::Local(n) => format!("local.{n}"),
        Subject::ModuleCall { name, .. } => format!("module.{name}"),
        Subject::Resource { mode, type_, name } => match mode {
            crate::addr::Mode::Managed => format!("{type_}.{name}"),
            crate::addr::Mode::Data => format!("data.{type_}.{name}"),
            crate::addr::Mode::Ephemeral => format!("ephemeral.{type_}.{name}"),
        },
        Subject::CountIndex => "count.index".into(),
        Subject::EachKey => "each.key".into(),
        Subject::EachValue => "each.value".into(),
        Subject::SelfRef => "self".into(),
        Subject::Path(p) => format!("path.{p}"),
        Subject::Terraform(p) => format!("terraform.{p}"),
    }
}

/// The evaluator's state: the scope and the names bound by `for` expressions, template
/// `%{for}` directives and `dynamic` iterators (innermost last).
pub(crate) struct Evaluator<'a> {
    scope: &'a dyn Scope,
    file: FileId,
    pub(crate) bindings: Vec<(String, Value)>,
    /// Indices into `bindings` of names bound to elements of an open value (`Scope::is_open`).
    open_bindings: Vec<usize>,
    /// Whether the traversal being applied started at an open value: a missing attribute or
    /// key is then unknown, not an error.
    open: bool,
    /// Inside `templatefile`/`templatestring`: the template's origin and text, so that a name
    /// the variables do not define is reported as Terraform reports it (`line,col-col`).
    template_source: Option<(String, String)>,
}

fn one(d: Diagnostic) -> Diagnostics {
    Diagnostics::from(d)
}

/// Splits off the sensitive mark: the plain value and whether it was marked.
fn unmark(v: Value) -> (Value, bool) {
    match v {
        Value::Sensitive(inner) => (unmark(*inner).0, true),
        v => (v, false),
    }
}

fn mark(v: Value, sensitive: bool) -> Value {
    if sensitive {
        v.sensitive()
    } else {
        v
    }
}

/// The element type of a collection type (for unknown results of indexing).
fn element_type(t: &Type) -> Type {
    match t {
        Type::List(e) | Type::Set(e) | Type::Map(e) => (**e).clone(),
        _ => Type::Dynamic,
    }
}

fn type_name(v: &Value) -> String {
    match v.unmarked() {
        Value::Null(_) => "null".into(),
        Value::Unknown(t) => friendly_name(t, false),
        Value::Bool(_) => "bool".into(),
        Value::Number(_) => "number".into(),
        Value::String(_) => "string".into(),
        Value::List(_) => "list".into(),
        Value::Set(_) => "set".into(),
        Value::Tuple(_) => "tuple".into(),
        Value::Map(_) => "map".into(),
        Value::Object(_) => "object".into(),
        Value::Sensitive(_) => "sensitive".into(),
    }
}

impl<'a> Evaluator<'a> {
    pub(crate) fn new(scope: &'a dyn Scope) -> Self {
        // `templatefile` evaluates through this evaluator; register it once.
        functions::TEMPLATE_EVALUATOR.get_or_init(|| eval_template_string);
        Evaluator {
            file: scope.file(),
            scope,
            bindings: Vec::new(),
            open_bindings: Vec::new(),
            open: false,
            template_source: None,
        }
    }

    fn span(&self, r: Option<Range<usize>>) -> Option<Span> {
        r.map(|r| Span {
            file: self.file,
            start: r.start,
            end: r.end,
        })
    }

    fn error(
        &self,
        r: Option<Range<usize>>,
        summary: &str,
        detail: impl Into<String>,
    ) -> Diagnostics {
        one(Diagnostic::error(summary, detail).with_span(self.span(r)))
    }

    fn bound(&self, name: &str) -> Option<&Value> {
        self.bindings
            .iter()
            .rev()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v)
    }

    /// Evaluates one expression.
    pub(crate) fn expr(&mut self, e: &Expression) -> R {
        match e {
            Expression::Null(_) => Ok(Value::null()),
            Expression::Bool(b) => Ok(Value::Bool(*b.value())),
            Expression::Number(n) => {
                let text: String = n
                    .as_repr()
                    .map(|r| r.to_string())
                    .unwrap_or_else(|| n.value().to_string())
                    .chars()
                    .filter(|c| !c.is_whitespace())
                    .collect();
                match BigDecimal::from_str(&text) {
                    Ok(d) if !Number::in_range(&d) && !Number::in_range(&d.normalized()) => {
                        Err(self.error(
                            e.span(),
                            "Number out of range",
                            format!(
                                "The number {text} is out of range: {}.",
                                crate::value::number_range_error()
                            ),
                        ))
                    }
                    Ok(d) => Ok(Value::Number(Number::signed(d, text.starts_with('-')))),
                    Err(_) => Number::from_f64(n.value().as_f64().unwrap_or(f64::NAN))
                        .map(Value::Number)
                        .ok_or_else(|| self.error(e.span(), "Invalid number literal", "")),
                }
            }
            Expression::String(s) => Ok(Value::String(crate::value::nfc(s.value().clone()))),
            Expression::Array(a) => {
                let mut out = Vec::new();
                let mut diags = Diagnostics::new();
                for x in a.iter() {
                    match self.expr(x) {
                        Ok(v) => out.push(v),
                        Err(d) => diags.extend(d),
                    }
                }
                if diags.is_empty() {
                    Ok(Value::Tuple(out))
                } else {
                    Err(diags)
                }
            }
            Expression::Object(o) => {
                let mut out = ValueMap::new();
                let mut diags = Diagnostics::new();
                let mut unknown = false;
                for (k, v) in o.iter() {
                    let key = match k {
                        ObjectKey::Ident(id) => Ok(Some(id.as_str().to_string())),
                        ObjectKey::Expression(ke) => self.object_key(ke),
                    };
                    let val = self.expr(v.expr());
                    match (key, val) {
                        (Ok(Some(k)), Ok(v)) => {
                            out.insert(k, v);
                        }
                        (Ok(None), Ok(_)) => unknown = true,
                        (Ok(Some(_)) | Ok(None), Err(d)) | (Err(d), Ok(_)) => diags.extend(d),
                        (Err(d1), Err(d2)) => {
                            diags.extend(d1);
                            diags.extend(d2);
                        }
                    }
                }
                if !diags.is_empty() {
                    Err(diags)
                } else if unknown {
                    Ok(Value::unknown())
                } else {
                    Ok(Value::Object(out))
                }
            }
            Expression::StringTemplate(t) => self.template(t, e.span()),
            Expression::HeredocTemplate(h) => match h.indent() {
                Some(n) => self.template_in(&super::heredoc::flush(&h.template, n), true, e.span()),
                None => self.template_in(&h.template, true, e.span()),
            },
            Expression::Parenthesis(p) => self.expr(p.inner()),
            Expression::Variable(v) => self.root(v.as_str(), &[], e.span()).map(|(v, _)| v),
            Expression::Conditional(c) => self.conditional(c, e.span()),
            Expression::FuncCall(f) => self.call(f, e.span()),
            Expression::Traversal(t) => self.traversal(t),
            Expression::UnaryOp(u) => {
                let v = self.expr(&u.expr)?;
                let (v, s) = unmark(v);
                let r = match u.operator.value() {
                    UnaryOperator::Neg => {
                        match self.operand(v, &Type::Number, u.expr.span(), "")? {
                            Value::Number(n) => Value::Number(n.neg()),
                            other => other,
                        }
                    }
                    UnaryOperator::Not => match self.operand(v, &Type::Bool, u.expr.span(), "")? {
                        Value::Bool(b) => Value::Bool(!b),
                        other => other,
                    },
                };
                Ok(mark(r, s))
            }
            Expression::BinaryOp(b) => self.binary(b, e.span()),
            Expression::ForExpr(f) => self.for_expr(f),
        }
    }

    /// An object key: a string, or `None` when it is unknown.
    fn object_key(&mut self, ke: &Expression) -> Result<Option<String>, Diagnostics> {
        // A bare name as a key (`{ (a) = 1 }` aside) is the name itself.
        if let Expression::Variable(v) = ke {
            return Ok(Some(v.as_str().to_string()));
        }
        let k = self.expr(ke)?;
        let (k, _) = unmark(k);
        match k {
            Value::Unknown(_) => Ok(None),
            Value::Null(_) => Err(self.error(
                ke.span(),
                "Invalid object key",
                "Can't use a null value as a key.",
            )),
            k => match convert(&k, &Type::String) {
                Ok(Value::String(s)) => Ok(Some(s)),
                _ => Err(self.error(
                    ke.span(),
                    "Invalid object key",
                    "Can't use this value as a key: string required.",
                )),
            },
        }
    }

    /// Converts an operand, with Terraform's "Invalid operand" error at `span`.
    fn operand(&self, v: Value, ty: &Type, span: Option<Range<usize>>, side: &str) -> R {
        let which = if side.is_empty() {
            "Unsuitable value for unary operand".to_string()
        } else {
            format!("Unsuitable value for {side} operand")
        };
        if v.is_null() {
            return Err(self.error(
                span,
                "Invalid operand",
                format!("{which}: argument must not be null."),
            ));
        }
        convert(&v, ty).map_err(|m| self.error(span, "Invalid operand", format!("{which}: {m}.")))
    }

    fn binary(&mut self, b: &hcl_edit::expr::BinaryOp, span: Option<Range<usize>>) -> R {
        use BinaryOperator as Op;
        let op = *b.operator.value();
        let l = self.expr(&b.lhs_expr);
        let r = self.expr(&b.rhs_expr);
        let (l, r) = match (l, r) {
            (Ok(l), Ok(r)) => (l, r),
            (Err(mut d), Err(d2)) => {
                d.extend(d2);
                return Err(d);
            }
            (Err(d), _) | (_, Err(d)) => return Err(d),
        };
        match op {
            Op::Eq | Op::NotEq => {
                let v = equals(&l, &r);
                Ok(if op == Op::NotEq {
                    let (v, s) = unmark(v);
                    mark(
                        match v {
                            Value::Bool(b) => Value::Bool(!b),
                            other => other,
                        },
                        s,
                    )
                } else {
                    v
                })
            }
            Op::And | Op::Or => {
                let (l, ls) = unmark(l);
                let (r, rs) = unmark(r);
                let lspan = b.lhs_expr.span();
                let rspan = b.rhs_expr.span();
                let lv = self.operand(l, &Type::Bool, lspan, "left");
                let rv = self.operand(r, &Type::Bool, rspan, "right");
                let (lv, rv) = match (lv, rv) {
                    (Ok(l), Ok(r)) => (l, r),
                    (Err(mut d), Err(d2)) => {
                        d.extend(d2);
                        return Err(d);
                    }
                    (Err(d), _) | (_, Err(d)) => return Err(d),
                };
                let decisive = op == Op::Or;
                let v = match (lv.as_bool(), rv.as_bool()) {
                    (Some(x), _) if x == decisive => Value::Bool(decisive),
                    (_, Some(y)) if y == decisive => Value::Bool(decisive),
                    (Some(_), Some(_)) => Value::Bool(!decisive),
                    _ => Value::Unknown(Type::Bool),
                };
                Ok(mark(v, ls || rs))
            }
            _ => {
                let (l, ls) = unmark(l);
                let (r, rs) = unmark(r);
                let lv = self.operand(l, &Type::Number, b.lhs_expr.span(), "left");
                let rv = self.operand(r, &Type::Number, b.rhs_expr.span(), "right");
                let (lv, rv) = match (lv, rv) {
                    (Ok(l), Ok(r)) => (l, r),
                    (Err(mut d), Err(d2)) => {
                        d.extend(d2);
                        return Err(d);
                    }
                    (Err(d), _) | (_, Err(d)) => return Err(d),
                };
                let s = ls || rs;
                let result_type = match op {
                    Op::Less | Op::LessEq | Op::Greater | Op::GreaterEq => Type::Bool,
                    _ => Type::Number,
                };
                let (nx, ny) = match (lv, rv) {
                    (Value::Number(x), Value::Number(y)) => (x, y),
                    _ => return Ok(mark(Value::Unknown(result_type), s)),
                };
                let (x, y) = (&nx.0, &ny.0);
                let v = match op {
                    Op::Plus | Op::Minus | Op::Mul | Op::Div
                        if !Number::in_range(x) || !Number::in_range(y) =>
                    {
                        return Err(self.error(
                            span,
                            "Number out of range",
                            format!(
                                "An operand is out of range: {}.",
                                crate::value::number_range_error()
                            ),
                        ))
                    }
                    // Rounded as cty rounds (512-bit mantissas; see `value::binary512`).
                    Op::Plus => Value::Number(nx.add(&ny)),
                    Op::Minus => Value::Number(nx.sub(&ny)),
                    Op::Mul => Value::Number(nx.mul(&ny)),
                    // As in Terraform, `x % 0` is `x`.
                    Op::Mod if y.is_zero() => Value::Number(nx),
                    Op::Div | Op::Mod => {
                        if y.is_zero() {
                            return Err(self.error(
                                span,
                                "Operation failed",
                                "Error during operation: can't divide by zero.",
                            ));
                        }
                        if op == Op::Div {
                            Value::Number(nx.div(&ny))
                        } else {
                            Value::Number(nx.rem(&ny))
                        }
                    }
                    Op::Less => Value::Bool(x < y),
                    Op::LessEq => Value::Bool(x <= y),
                    Op::Greater => Value::Bool(x > y),
                    Op::GreaterEq => Value::Bool(x >= y),
                    Op::Eq | Op::NotEq | Op::And | Op::Or => Value::unknown(),
                };
                Ok(mark(v, s))
            }
        }
    }

    fn conditional(&mut self, c: &hcl_edit::expr::Conditional, span: Option<Range<usize>>) -> R {
        let cond = self.expr(&c.cond_expr)?;
        let t = self.expr(&c.true_expr);
        let f = self.expr(&c.false_expr);
        let (cond, cs) = unmark(cond);
        let cond = match cond {
            Value::Null(_) => {
                return Err(self.error(
                    c.cond_expr.span(),
                    "Invalid condition result",
                    "The condition value is null. Conditions must either be true or false.",
                ))
            }
            v => convert(&v, &Type::Bool).map_err(|_| {
                self.error(
                    c.cond_expr.span(),
                    "Incorrect condition type",
                    "The condition expression must be of type bool.",
                )
            })?,
        };
        // Both arms are evaluated for their types; only the chosen arm's errors count. An
        // untyped null takes the other arm's type.
        let types: Vec<Type> = [&t, &f]
            .iter()
            .filter_map(|r| r.as_ref().ok())
            .filter(|v| !matches!(v.unmarked(), Value::Null(Type::Dynamic)))
            .map(|v| v.type_of())
            .collect();
        let ty = match unify(&types) {
            Some(ty) => ty,
            None => {
                return Err(self.error(
                    span,
                    "Inconsistent conditional result types",
                    format!(
                        "The true and false result expressions must have consistent types. The \
                         'true' value is {}, but the 'false' value is {}.",
                        t.as_ref().map(type_name).unwrap_or_default(),
                        f.as_ref().map(type_name).unwrap_or_default()
                    ),
                ))
            }
        };
        let chosen = match cond {
            Value::Bool(true) => t?,
            Value::Bool(false) => f?,
            _ => return Ok(mark(Value::Unknown(ty), cs)),
        };
        // The chosen value takes the unified type, as in Terraform.
        let chosen = convert(&chosen, &ty).unwrap_or(chosen);
        Ok(mark(chosen, cs))
    }

    fn traversal(&mut self, t: &Traversal) -> R {
        let (v, consumed) = match &t.expr {
            Expression::Variable(v) => self.root(v.as_str(), &t.operators, t.span())?,
            other => (self.expr(other)?, 0),
        };
        let open = self.is_open_root(&t.expr, &t.operators);
        let saved = std::mem::replace(&mut self.open, open);
        let r = self.apply_ops(v, &t.operators[consumed.min(t.operators.len())..]);
        self.open = saved;
        r
    }

    /// Whether a traversal (or a bare name) starts at an open value: a name bound to an
    /// element of one, or a subject the scope says is open.
    fn is_open_root(&self, root: &Expression, ops: &[Decorated<TraversalOperator>]) -> bool {
        let Expression::Variable(v) = root else {
            // `one(aws_x.y[*]).id`, `(var.a ? aws_x.y : aws_x.z).id`, `values(aws_x.s)[0].id`:
            // a value computed from an open one is open too.
            return self.is_open_expr(root);
        };
        let name = v.as_str();
        if let Some(i) = self.bindings.iter().rposition(|(n, _)| n == name) {
            return self.open_bindings.contains(&i);
        }
        match subject_of(name, ops) {
            Ok((subject, _)) => self.scope.is_open(&subject),
            Err(_) => false,
        }
    }

    /// Whether an expression's value may be (or hold) an open value: a reference to one (see
    /// `is_open_root`), or a function call, conditional, collection or `for` built from one,
    /// so that a traversal, `for` or `dynamic` block over it treats a missing attribute as
    /// unknown. (Operators and templates give primitives, never open.)
    pub(crate) fn is_open_expr(&self, e: &Expression) -> bool {
        match e {
            Expression::Traversal(t) => self.is_open_root(&t.expr, &t.operators),
            Expression::Variable(_) => self.is_open_root(e, &[]),
            Expression::Parenthesis(p) => self.is_open_expr(p.inner()),
            Expression::FuncCall(f) => f.args.iter().any(|a| self.is_open_expr(a)),
            Expression::Conditional(c) => {
                self.is_open_expr(&c.true_expr) || self.is_open_expr(&c.false_expr)
            }
            Expression::Array(a) => a.iter().any(|x| self.is_open_expr(x)),
            Expression::Object(o) => o.iter().any(|(_, v)| self.is_open_expr(v.expr())),
            // The names a `for` binds are not in scope here; its elements come from its
            // collection.
            Expression::ForExpr(f) => self.is_open_expr(&f.intro.collection_expr),
            _ => false,
        }
    }

    /// Binds `name` (pushed last onto `bindings`) as an element of an open collection when
    /// `open`; returns the length of `open_bindings` to restore.
    pub(crate) fn bind_open(&mut self, open: bool) -> usize {
        let n = self.open_bindings.len();
        if open {
            self.open_bindings.push(self.bindings.len() - 1);
        }
        n
    }

    /// Undoes `bind_open`.
    pub(crate) fn unbind_open(&mut self, n: usize) {
        self.open_bindings.truncate(n);
    }

    /// The value of a root name and the steps it consumed: a bound name, or a subject the
    /// scope resolves.
    fn root(
        &mut self,
        name: &str,
        ops: &[Decorated<TraversalOperator>],
        span: Option<Range<usize>>,
    ) -> Result<(Value, usize), Diagnostics> {
        if let Some(v) = self.bound(name) {
            return Ok((v.clone(), 0));
        }
        if let (Some((origin, src)), Some(r)) = (&self.template_source, &span) {
            if !matches!(name, "path" | "terraform") {
                let (line, col) = line_col(src, r.start);
                let end_col = col + name.chars().count();
                return Err(one(Diagnostic::error(
                    TEMPLATE_VARS,
                    format!(
                        "vars map does not contain key {}, referenced at {origin}:{line},{col}-{end_col}",
                        cairn_state::quote(name)
                    ),
                )));
            }
        }
        let (subject, consumed) =
            subject_of(name, ops).map_err(|(s, d)| self.error(span.clone(), &s, d))?;
        // The span of the subject part of the traversal.
        let sub_span = match (span.clone(), consumed) {
            (Some(r), n) if n > 0 => ops
                .get(n - 1)
                .and_then(|o| o.span())
                .map(|e| r.start..e.end)
                .or(Some(r)),
            (r, _) => r,
        };
        match self.scope.resolve(&subject) {
            Ok(v) => Ok((v, consumed)),
            Err(e) => Err(self.error(sub_span, &e.summary, e.detail)),
        }
    }

    /// Applies traversal steps to a value.
    fn apply_ops(&mut self, mut v: Value, ops: &[Decorated<TraversalOperator>]) -> R {
        for (i, op) in ops.iter().enumerate() {
            match op.value() {
                TraversalOperator::GetAttr(name) => {
                    v = self.get_attr(v, name.as_str(), op.span())?;
                }
                TraversalOperator::Index(ke) => {
                    let k = self.expr(ke)?;
                    v = self.index(v, k, op.span())?;
                }
                TraversalOperator::LegacyIndex(n) => {
                    v = self.index(v, Value::int(*n.value() as i64), op.span())?;
                }
                TraversalOperator::FullSplat(_) => return self.splat(v, &ops[i + 1..], true),
                TraversalOperator::AttrSplat(_) => return self.splat(v, &ops[i + 1..], false),
            }
        }
        Ok(v)
    }

    fn splat(&mut self, v: Value, rest: &[Decorated<TraversalOperator>], full: bool) -> R {
        // A full splat applies every following step to each element; the legacy `.*` only
        // the attribute accesses that directly follow it.
        let n = if full {
            rest.len()
        } else {
            rest.iter()
                .take_while(|o| matches!(o.value(), TraversalOperator::GetAttr(_)))
                .count()
        };
        let (each, after) = rest.split_at(n);
        let (v, s) = unmark(v);
        let r = match v {
            Value::Null(_) => Value::Tuple(Vec::new()),
            Value::Unknown(_) => return Ok(mark(Value::unknown(), s)),
            Value::List(items) | Value::Set(items) => {
                let mut out = Vec::new();
                for item in items {
                    out.push(self.apply_ops(item, each)?);
                }
                Value::List(out)
            }
            Value::Tuple(items) => {
                let mut out = Vec::new();
                for item in items {
                    out.push(self.apply_ops(item, each)?);
                }
                Value::Tuple(out)
            }
            other => Value::Tuple(vec![self.apply_ops(other, each)?]),
        };
        let r = self.apply_ops(r, after)?;
        Ok(mark(r, s))
    }

    fn get_attr(&self, v: Value, name: &str, span: Option<Range<usize>>) -> R {
        let (v, s) = unmark(v);
        let r = match v {
            Value::Unknown(Type::Object(attrs, _)) => match attrs.get(name) {
                Some(t) => Value::Unknown(t.clone()),
                None => {
                    return Err(self.error(
                        span,
                        "Unsupported attribute",
                        format!(
                            "This object does not have an attribute named {}.{}",
                            cairn_state::quote(name),
                            suggest::suffix(name, attrs.keys().map(String::as_str))
                        ),
                    ))
                }
            },
            Value::Unknown(Type::List(_) | Type::Set(_) | Type::Tuple(_)) => {
                return Err(self.error(
                    span,
                    "Unsupported attribute",
                    format!(
                        "Can't access attributes on a list of objects. Did you mean to access \
                         attribute {} for a specific element of the list, or across all \
                         elements of the list?",
                        cairn_state::quote(name)
                    ),
                ))
            }
            Value::Unknown(t @ (Type::String | Type::Number | Type::Bool)) => {
                return Err(self.error(
                    span,
                    "Unsupported attribute",
                    format!(
                        "Can't access attributes on a primitive-typed value ({}).",
                        friendly_name(&t, false)
                    ),
                ))
            }
            Value::Unknown(t) => Value::Unknown(element_type(&t)),
            Value::Null(_) => {
                return Err(self.error(
                    span,
                    "Attempt to get attribute from null value",
                    "This value is null, so it does not have any attributes.",
                ))
            }
            Value::Object(mut m) => match m.remove(name) {
                Some(x) => x,
                None if self.open => Value::unknown(),
                None => {
                    return Err(self.error(
                        span,
                        "Unsupported attribute",
                        format!(
                            "This object does not have an attribute named {}.{}",
                            cairn_state::quote(name),
                            suggest::suffix(name, m.keys().map(String::as_str))
                        ),
                    ))
                }
            },
            Value::Map(mut m) => match m.remove(name) {
                Some(x) => x,
                None if self.open => Value::unknown(),
                None => {
                    return Err(self.error(
                        span,
                        "Missing map element",
                        format!(
                            "This map does not have an element with the key {}.",
                            cairn_state::quote(name)
                        ),
                    ))
                }
            },
            Value::List(_) | Value::Set(_) | Value::Tuple(_) => {
                return Err(self.error(
                    span,
                    "Unsupported attribute",
                    format!(
                        "Can't access attributes on a list of objects. Did you mean to access \
                         attribute {} for a specific element of the list, or across all \
                         elements of the list?",
                        cairn_state::quote(name)
                    ),
                ))
            }
            other => {
                return Err(self.error(
                    span,
                    "Unsupported attribute",
                    format!(
                        "Can't access attributes on a primitive-typed value ({}).",
                        type_name(&other)
                    ),
                ))
            }
        };
        Ok(mark(r, s))
    }

    fn index(&self, v: Value, k: Value, span: Option<Range<usize>>) -> R {
        let (v, vs) = unmark(v);
        let (k, ks) = unmark(k);
        let s = vs || ks;
        let invalid = |detail: &str| self.error(span.clone(), "Invalid index", detail.to_string());
        const NO_ELEMENT: &str =
            "The given key does not identify an element in this collection value.";
        if let Value::Null(_) = v {
            return Err(self.error(
                span,
                "Attempt to index null value",
                "This value is null, so it does not have any indices.",
            ));
        }
        if k.is_null() {
            return Err(invalid("Can't use a null value as an indexing key."));
        }
        if let Value::Unknown(t) = &v {
            return Ok(mark(Value::Unknown(element_type(t)), s));
        }
        if k.is_unknown() {
            let et = match &v {
                Value::List(items) | Value::Set(items) => {
                    items.first().map(Value::type_of).unwrap_or(Type::Dynamic)
                }
                Value::Map(m) => m
                    .values()
                    .next()
                    .map(Value::type_of)
                    .unwrap_or(Type::Dynamic),
                _ => Type::Dynamic,
            };
            return Ok(mark(Value::Unknown(et), s));
        }
        let r = match v {
            Value::List(items) | Value::Tuple(items) => {
                let base = NO_ELEMENT.trim_end_matches('.');
                let i = match convert(&k, &Type::Number) {
                    Ok(Value::Number(n)) => n,
                    _ => return Err(invalid(&format!("{base}: a number is required."))),
                };
                if !i.is_integer() {
                    return Err(invalid(
                        "The given key does not identify an element in this collection value: \
                         indexing a sequence requires a whole number, but the given index has a \
                         fractional part.",
                    ));
                }
                if *i.0 < BigDecimal::zero() {
                    return Err(invalid(&format!(
                        "{base}: a negative number is not a valid index for a sequence."
                    )));
                }
                if items.is_empty() {
                    return Err(invalid(&format!("{base}: the collection has no elements.")));
                }
                match i.to_i64().map(|i| i as usize) {
                    Some(i) if i < items.len() => items.into_iter().nth(i).unwrap_or(Value::null()),
                    _ => return Err(invalid(NO_ELEMENT)),
                }
            }
            Value::Map(mut m) | Value::Object(mut m) => {
                let key = match convert(&k, &Type::String) {
                    Ok(Value::String(s)) => s,
                    _ => {
                        return Err(invalid(&format!(
                            "{}: a string is required.",
                            NO_ELEMENT.trim_end_matches('.')
                        )))
                    }
                };
                match m.remove(&key) {
                    Some(x) => x,
                    None => return Err(invalid(NO_ELEMENT)),
                }
            }
            Value::Set(_) => {
                return Err(invalid(
                    "Elements of a set are identified only by their value and don't have any \
                     separate index or key to select with, so it's only possible to perform \
                     operations across all elements of the set.",
                ))
            }
            other => {
                return Err(invalid(&format!(
                    "This value does not have any indices: a {} cannot be indexed.",
                    type_name(&other)
                )))
            }
        };
        Ok(mark(r, s))
    }

    /// The elements of a collection for iteration: (key, value) pairs, or `None` when the
    /// collection is unknown. Errors are for null and non-collections.
    fn iterable(
        &self,
        coll: Value,
        span: Option<Range<usize>>,
        what: &str,
    ) -> Result<Option<Vec<(Value, Value)>>, Diagnostics> {
        Ok(Some(match coll {
            Value::Unknown(_) => return Ok(None),
            Value::Null(_) => {
                return Err(self.error(
                    span,
                    "Iteration over null value",
                    format!("A null value cannot be used as the collection in a {what}."),
                ))
            }
            Value::List(items) | Value::Tuple(items) => items
                .into_iter()
                .enumerate()
                .map(|(i, v)| (Value::int(i as i64), v))
                .collect(),
            Value::Set(items) => items.into_iter().map(|v| (v.clone(), v)).collect(),
            Value::Map(m) | Value::Object(m) => {
                m.into_iter().map(|(k, v)| (Value::String(k), v)).collect()
            }
            other => {
                return Err(self.error(
                    span,
                    "Iteration over non-iterable value",
                    format!(
                        "A value of type {} cannot be used as the collection in a {what}.",
                        type_name(&other)
                    ),
                ))
            }
        }))
    }

    fn for_expr(&mut self, f: &ForExpr) -> R {
        let coll = self.expr(&f.intro.collection_expr)?;
        let coll_open = self.is_open_expr(&f.intro.collection_expr);
        let (coll, s) = unmark(coll);
        let Some(items) =
            self.iterable(coll, f.intro.collection_expr.span(), "'for' expression")?
        else {
            return Ok(mark(Value::unknown(), s));
        };
        let key_var = f.intro.key_var.as_ref().map(|k| k.as_str().to_string());
        let value_var = f.intro.value_var.as_str().to_string();
        let mut list = Vec::new();
        // A tree while the keys come in any order; a `ValueMap` once complete.
        let mut obj: BTreeMap<String, Value> = BTreeMap::new();
        let mut groups: BTreeMap<String, Vec<Value>> = BTreeMap::new();
        let mut unknown = false;
        let mut diags = Diagnostics::new();
        for (k, v) in items {
            let n = self.bindings.len();
            if let Some(kv) = &key_var {
                self.bindings.push((kv.clone(), k));
            }
            self.bindings.push((value_var.clone(), v));
            let open_n = self.open_bindings.len();
            if coll_open {
                self.open_bindings.push(self.bindings.len() - 1);
            }
            let r = self.for_item(f, &mut list, &mut obj, &mut groups, &mut unknown);
            self.bindings.truncate(n);
            self.open_bindings.truncate(open_n);
            if let Err(d) = r {
                // Like HCL, stop at the first item that fails rather than repeat its error.
                diags.extend(d);
                break;
            }
        }
        if !diags.is_empty() {
            return Err(diags);
        }
        if unknown {
            return Ok(mark(Value::unknown(), s));
        }
        Ok(mark(
            if f.key_expr.is_none() {
                Value::Tuple(list)
            } else if f.grouping {
                Value::Object(
                    groups
                        .into_iter()
                        .map(|(k, v)| (k, Value::Tuple(v)))
                        .collect(),
                )
            } else {
                Value::Object(obj.into())
            },
            s,
        ))
    }

    fn for_item(
        &mut self,
        f: &ForExpr,
        list: &mut Vec<Value>,
        obj: &mut BTreeMap<String, Value>,
        groups: &mut BTreeMap<String, Vec<Value>>,
        unknown: &mut bool,
    ) -> Result<(), Diagnostics> {
        if let Some(c) = &f.cond {
            let cv = self.expr(&c.expr)?;
            match unmark(cv).0 {
                Value::Unknown(_) => {
                    *unknown = true;
                    return Ok(());
                }
                Value::Null(_) => {
                    return Err(self.error(
                        c.expr.span(),
                        "Invalid 'for' condition",
                        "The value of the 'if' clause must not be null.",
                    ))
                }
                v => match convert(&v, &Type::Bool) {
                    Ok(Value::Bool(true)) => {}
                    Ok(_) => return Ok(()),
                    Err(_) => {
                        return Err(self.error(
                            c.expr.span(),
                            "Invalid 'for' condition",
                            "The value of the 'if' clause must be a bool.",
                        ))
                    }
                },
            }
        }
        match &f.key_expr {
            None => list.push(self.expr(&f.value_expr)?),
            Some(ke) => {
                let k = self.expr(ke)?;
                let v = self.expr(&f.value_expr)?;
                let key =
                    match unmark(k).0 {
                        Value::Unknown(_) => {
                            *unknown = true;
                            return Ok(());
                        }
                        Value::Null(_) => {
                            return Err(self.error(
                                ke.span(),
                                "Invalid object key",
                                "Key expression in 'for' expression must not produce a null value.",
                            ))
                        }
                        k => match convert(&k, &Type::String) {
                            Ok(Value::String(s)) => s,
                            _ => return Err(self.error(
                                ke.span(),
                                "Invalid object key",
                                "The key expression produced an invalid result: string required.",
                            )),
                        },
                    };
                if f.grouping {
                    groups.entry(key).or_default().push(v);
                } else if let std::collections::btree_map::Entry::Vacant(e) = obj.entry(key.clone())
                {
                    e.insert(v);
                } else {
                    return Err(self.error(
                        ke.span(),
                        "Duplicate object key",
                        format!(
                            "Two different items produced the key {} in this 'for' expression. \
                             If duplicates are expected, use the ellipsis (...) after the value \
                             expression to enable grouping by key.",
                            cairn_state::quote(&key)
                        ),
                    ));
                }
            }
        }
        Ok(())
    }

    /// A template: `"${x}"` alone gives x's value unchanged; anything else is a string.
    pub(crate) fn template(&mut self, t: &Template, span: Option<Range<usize>>) -> R {
        self.template_in(t, false, span)
    }

    /// A template whose literals may span lines (`lines`: a heredoc or a bare template), where
    /// strip markers trim only the line next to them (see `heredoc`).
    /// `span` is the template's, for the error when its result is beyond the size bound.
    fn template_in(&mut self, t: &Template, lines: bool, span: Option<Range<usize>>) -> R {
        let elements: Vec<&Element> = t.iter().collect();
        if let [Element::Interpolation(i)] = elements.as_slice() {
            return self.expr(&i.expr);
        }
        let mut st = TemplateState {
            lines,
            ..TemplateState::default()
        };
        self.render(&elements, false, false, &mut st);
        if st.out.len() > crate::value::MAX_STRING_BYTES && st.diags.is_empty() {
            let msg = crate::value::within_size_bounds(&Value::String(std::mem::take(&mut st.out)))
                .err()
                .unwrap_or_default();
            st.diags.extend(self.error(
                span,
                "Template result too long",
                format!("Evaluating this template stopped: {msg}."),
            ));
        }
        if !st.diags.is_empty() {
            return Err(st.diags);
        }
        let v = if st.unknown {
            Value::Unknown(Type::String)
        } else {
            Value::String(crate::value::nfc(st.out))
        };
        Ok(mark(v, st.sensitive))
    }

    fn render(&mut self, els: &[&Element], lead: bool, trail: bool, st: &mut TemplateState) {
        for (i, el) in els.iter().enumerate() {
            match el {
                Element::Literal(s) => {
                    let start = (i == 0 && lead) || (i > 0 && strip_after(els[i - 1]));
                    let end = (i + 1 == els.len() && trail)
                        || (i + 1 < els.len() && strip_before(els[i + 1]));
                    if st.lines {
                        st.out
                            .push_str(&super::heredoc::strip_lines(s.as_str(), start, end));
                    } else {
                        let mut s: &str = s.as_str();
                        if start {
                            s = s.trim_start();
                        }
                        if end {
                            s = s.trim_end();
                        }
                        st.out.push_str(s);
                    }
                }
                // Past the bound: stop building (reported by `template`).
                _ if st.out.len() > crate::value::MAX_STRING_BYTES => return,
                Element::Interpolation(ip) => match self.expr(&ip.expr) {
                    Err(d) => st.diags.extend(d),
                    Ok(v) => {
                        let (v, s) = unmark(v);
                        st.sensitive |= s;
                        match v {
                            Value::Unknown(_) => st.unknown = true,
                            Value::Null(_) => st.diags.extend(self.error(
                                ip.expr.span(),
                                "Invalid template interpolation value",
                                "The expression result is null. Cannot include a null value in \
                                 a string template.",
                            )),
                            Value::String(x) => st.out.push_str(&x),
                            v => match convert(&v, &Type::String) {
                                Ok(Value::String(x)) => st.out.push_str(&x),
                                _ => st.diags.extend(self.error(
                                    ip.expr.span(),
                                    "Invalid template interpolation value",
                                    format!(
                                        "Cannot include the given value in a string template: \
                                         string required, but have {}.",
                                        type_name(&v)
                                    ),
                                )),
                            },
                        }
                    }
                },
                Element::Directive(d) => match &**d {
                    Directive::If(d) => {
                        let cond = match self.expr(&d.if_expr.cond_expr) {
                            Ok(c) => c,
                            Err(e) => {
                                st.diags.extend(e);
                                continue;
                            }
                        };
                        let (cond, s) = unmark(cond);
                        st.sensitive |= s;
                        let b = match cond {
                            Value::Unknown(_) => {
                                st.unknown = true;
                                continue;
                            }
                            Value::Null(_) => None,
                            v => convert(&v, &Type::Bool).ok().and_then(|v| v.as_bool()),
                        };
                        let Some(b) = b else {
                            st.diags.extend(self.error(
                                d.if_expr.cond_expr.span(),
                                "Invalid template if condition",
                                "The condition must be a bool value, and not null.",
                            ));
                            continue;
                        };
                        let endif_start = d.endif_expr.strip.strip_start();
                        if b {
                            let trail = match &d.else_expr {
                                Some(e) => e.strip.strip_start(),
                                None => endif_start,
                            };
                            let inner: Vec<&Element> = d.if_expr.template.iter().collect();
                            self.render(&inner, d.if_expr.strip.strip_end(), trail, st);
                        } else if let Some(e) = &d.else_expr {
                            let inner: Vec<&Element> = e.template.iter().collect();
                            self.render(&inner, e.strip.strip_end(), endif_start, st);
                        }
                    }
                    Directive::For(d) => {
                        let f = &d.for_expr;
                        let coll = match self.expr(&f.collection_expr) {
                            Ok(c) => c,
                            Err(e) => {
                                st.diags.extend(e);
                                continue;
                            }
                        };
                        let (coll, s) = unmark(coll);
                        st.sensitive |= s;
                        let items = match self.iterable(
                            coll,
                            f.collection_expr.span(),
                            "template 'for' directive",
                        ) {
                            Ok(Some(items)) => items,
                            Ok(None) => {
                                st.unknown = true;
                                continue;
                            }
                            Err(e) => {
                                st.diags.extend(e);
                                continue;
                            }
                        };
                        let inner: Vec<&Element> = f.template.iter().collect();
                        let coll_open = self.is_open_expr(&f.collection_expr);
                        for (k, v) in items {
                            let n = self.bindings.len();
                            if let Some(kv) = &f.key_var {
                                self.bindings.push((kv.as_str().to_string(), k));
                            }
                            self.bindings.push((f.value_var.as_str().to_string(), v));
                            let open_n = self.bind_open(coll_open);
                            self.render(
                                &inner,
                                f.strip.strip_end(),
                                d.endfor_expr.strip.strip_start(),
                                st,
                            );
                            self.bindings.truncate(n);
                            self.unbind_open(open_n);
                        }
                    }
                },
            }
        }
    }

    /// `ephemeralasnull(e)`: see `call`.
    fn ephemeral_as_null(&mut self, e: &Expression) -> R {
        let ephemeral = |ev: &Self, e: &Expression| {
            super::refs::value_references(e)
                .iter()
                .any(|r| ev.scope.is_ephemeral(&r.subject))
        };
        if !ephemeral(self, e) {
            return self.expr(e);
        }
        match e {
            Expression::Parenthesis(p) => self.ephemeral_as_null(p.inner()),
            Expression::Object(o) => {
                let mut out = ValueMap::new();
                for (k, v) in o.iter() {
                    let key = match k {
                        ObjectKey::Ident(i) => Some(i.as_str().to_string()),
                        ObjectKey::Expression(k) => self.object_key(k)?,
                    };
                    let v = self.ephemeral_as_null(v.expr())?;
                    match key {
                        Some(key) => {
                            out.insert(key, v);
                        }
                        // An unknown key: the whole object is unknown.
                        None => return Ok(Value::unknown()),
                    }
                }
                Ok(Value::Object(out))
            }
            Expression::Array(a) => {
                let mut out = Vec::new();
                for x in a.iter() {
                    out.push(self.ephemeral_as_null(x)?);
                }
                Ok(Value::Tuple(out))
            }
            _ => {
                let v = self.expr(e)?;
                Ok(Value::Null(v.type_of()))
            }
        }
    }

    fn call(&mut self, f: &FuncCall, span: Option<Range<usize>>) -> R {
        let name = f.name.name.as_str();
        let full_name = f
            .name
            .namespace
            .iter()
            .map(|n| n.as_str())
            .chain([name])
            .collect::<Vec<_>>()
            .join("::");
        let name_span = f.name.name.span().or(span.clone());
        let args: Vec<&Expression> = f.args.iter().collect();
        // `core::NAME` is the built-in NAME, as in Terraform 1.8+.
        let namespace: Vec<&str> = f.name.namespace.iter().map(|n| n.as_str()).collect();
        let builtin = matches!(namespace.as_slice(), [] | ["core"]);
        if let ["provider", provider] = namespace.as_slice() {
            return self.provider_call(provider, name, f, &args, span, name_span);
        }
        if builtin && (name == "try" || name == "can") {
            return self.try_can(name, &args, span);
        }
        if builtin && name == "templatestring" {
            return self.templatestring(&args, span);
        }
        if builtin && name == "ephemeralasnull" && args.len() == 1 {
            // Ephemerality is decided from references (`Scope::is_ephemeral`): a value that
            // refers to an ephemeral term is null of its type; object and tuple
            // constructors keep their other parts, as Terraform nulls only ephemeral parts.
            return self.ephemeral_as_null(args[0]);
        }
        // Terraform words an unknown `core::` function (and any other namespace but
        // `provider::`) as a bad namespace.
        let bad_namespace = match namespace.as_slice() {
            ["core"] => !functions::exists(name),
            [] => false,
            [first, ..] => *first != "provider",
        };
        if bad_namespace {
            return Err(self.error(
                name_span,
                "Unknown provider function",
                format!(
                    "The function namespace {} is not valid. Provider function calls must use \
                     the \"provider::\" namespace prefix.",
                    cairn_state::quote(namespace[0])
                ),
            ));
        }
        if !builtin || !functions::exists(name) {
            return Err(self.error(
                name_span,
                "Call to unknown function",
                format!(
                    "There is no function named {}.{}",
                    cairn_state::quote(&full_name),
                    suggest::suffix(name, functions::names())
                ),
            ));
        }
        // Evaluate every argument, collecting all errors.
        let mut values = Vec::new();
        let mut spans = Vec::new();
        let mut diags = Diagnostics::new();
        for a in &args {
            match self.expr(a) {
                Ok(v) => values.push(v),
                Err(d) => diags.extend(d),
            }
            spans.push(a.span());
        }
        if !diags.is_empty() {
            return Err(diags);
        }
        if f.args.expand_final() {
            let last = values.pop().unwrap_or(Value::null());
            let last_span = spans.pop().flatten();
            let (last, s) = unmark(last);
            match last {
                Value::Unknown(_) => return Ok(mark(Value::unknown(), s)),
                Value::Null(_) => {
                    return Err(self.error(
                        last_span,
                        "Invalid expanding argument value",
                        "The expanding argument (indicated by ...) must not be null.",
                    ))
                }
                Value::List(items) | Value::Set(items) | Value::Tuple(items) => {
                    for item in items {
                        values.push(mark(item, s));
                        spans.push(last_span.clone());
                    }
                }
                _ => {
                    return Err(self.error(
                        last_span,
                        "Invalid expanding argument value",
                        "The expanding argument (indicated by ...) must be of a tuple, list, or \
                         set type.",
                    ))
                }
            }
        }
        // `lookup(aws_x.y, "id", default)` on an open object: a key it does not hold is
        // unknown (the provider may set it), as the traversal `aws_x.y.id` is.
        if name == "lookup" && values.len() >= 2 && self.is_open_expr(args[0]) {
            if let (Value::Object(m) | Value::Map(m), Some(k)) =
                (values[0].unmarked(), values[1].as_str())
            {
                if !m.contains_key(k) {
                    let s = values[0].is_sensitive() || values[1].is_sensitive();
                    return Ok(mark(Value::unknown(), s));
                }
            }
        }
        if let Some((summary, detail)) =
            functions::arity(name).and_then(|a| a.mismatch(name, values.len()))
        {
            // Too many: point at the first extra argument; too few: at the call.
            let at = match functions::arity(name).and_then(|a| a.max()) {
                Some(max) if values.len() > max => spans.get(max).cloned().flatten().or(span),
                _ => span,
            };
            return Err(self.error(at, summary, detail));
        }
        let ctx = FunctionContext {
            module_dir: self.scope.module_dir(),
            root_dir: self.scope.root_dir(),
            settle_impure: self.scope.settles_impure(),
        };
        functions::call(name, values, &ctx)
            .map(Value::nfc)
            .map_err(|e| {
                let at = e.arg.and_then(|i| spans.get(i).cloned().flatten()).or(span);
                self.error(at, e.summary(), e.message.clone())
            })
    }

    /// `provider::PROVIDER::NAME(...)`: a provider-defined function. Arguments are converted to
    /// the parameter types; an unknown argument where the parameter does not allow one makes
    /// the result unknown (no call), a null one where it does not allow null is an error at
    /// that argument, as is a provider error that blames an argument.
    fn provider_call(
        &mut self,
        provider: &str,
        name: &str,
        f: &FuncCall,
        args: &[&Expression],
        span: Option<Range<usize>>,
        name_span: Option<Range<usize>>,
    ) -> R {
        let full = format!("provider::{provider}::{name}");
        let mut values = Vec::new();
        let mut spans = Vec::new();
        let mut diags = Diagnostics::new();
        for a in args {
            match self.expr(a) {
                Ok(v) => values.push(v),
                Err(d) => diags.extend(d),
            }
            spans.push(a.span());
        }
        if !diags.is_empty() {
            return Err(diags);
        }
        if f.args.expand_final() {
            let last = values.pop().unwrap_or(Value::null());
            let last_span = spans.pop().flatten();
            let (last, s) = unmark(last);
            match last {
                Value::List(items) | Value::Set(items) | Value::Tuple(items) => {
                    for item in items {
                        values.push(mark(item, s));
                        spans.push(last_span.clone());
                    }
                }
                Value::Unknown(_) => return Ok(mark(Value::unknown(), s)),
                _ => {
                    return Err(self.error(
                        last_span,
                        "Invalid expanding argument value",
                        "The expanding argument (indicated by ...) must be of a tuple, list, or \
                         set type.",
                    ))
                }
            }
        }
        let Some(funcs) = self.scope.provider_functions() else {
            return Ok(Value::unknown());
        };
        let sig = funcs
            .signature(provider, name)
            .map_err(|m| self.error(name_span.clone(), "Call to unknown function", m))?;
        let min = sig.params.len();
        if values.len() < min {
            return Err(self.error(
                span,
                "Not enough function arguments",
                format!(
                    "Function {} expects {min} argument(s). Missing value for {}.",
                    cairn_state::quote(&full),
                    cairn_state::quote(&sig.params[values.len()].name)
                ),
            ));
        }
        if values.len() > min && sig.variadic.is_none() {
            return Err(self.error(
                spans.get(min).cloned().flatten().or(span),
                "Too many function arguments",
                format!(
                    "Function {} expects only {min} argument(s).",
                    cairn_state::quote(&full)
                ),
            ));
        }
        let mut sensitive = false;
        let mut unknown = false;
        let mut converted = Vec::new();
        for (i, v) in values.into_iter().enumerate() {
            let param = sig
                .params
                .get(i)
                .or(sig.variadic.as_ref())
                .expect("arity checked");
            let at = spans.get(i).cloned().flatten();
            let (v, s) = v.deep_unmark();
            sensitive |= s;
            if v.is_null() && !param.allow_null {
                return Err(self.error(
                    at,
                    "Invalid function argument",
                    format!(
                        "Invalid value for {} parameter: argument must not be null.",
                        cairn_state::quote(&param.name)
                    ),
                ));
            }
            if !v.is_wholly_known() && !param.allow_unknown {
                unknown = true;
            }
            match super::convert::convert(v, &param.ty) {
                Ok(v) => converted.push(v),
                Err(e) => {
                    return Err(self.error(
                        at,
                        "Invalid function argument",
                        format!(
                            "Invalid value for {} parameter: {e}.",
                            cairn_state::quote(&param.name)
                        ),
                    ))
                }
            }
        }
        if unknown {
            return Ok(mark(Value::Unknown(sig.ret.clone()), sensitive));
        }
        match funcs.call(provider, name, converted) {
            Ok(v) => Ok(mark(v.nfc(), sensitive)),
            Err(e) => {
                let message = e.message.trim_end_matches('.').to_string();
                Err(match e.arg.and_then(|i| spans.get(i).cloned().flatten()) {
                    Some(at) => {
                        let pname = e
                            .arg
                            .and_then(|i| sig.params.get(i).or(sig.variadic.as_ref()))
                            .map(|p| p.name.clone())
                            .unwrap_or_default();
                        self.error(
                            Some(at),
                            "Invalid function argument",
                            format!(
                                "Invalid value for {} parameter: {message}.",
                                cairn_state::quote(&pname)
                            ),
                        )
                    }
                    None => self.error(
                        span,
                        "Error in function call",
                        format!(
                            "Call to function {} failed: {message}.",
                            cairn_state::quote(&full)
                        ),
                    ),
                })
            }
        }
    }

    /// `templatestring(template, vars)`: renders a template held in a string value elsewhere
    /// in the configuration. As in Terraform it is a special form: the template must be given
    /// by reference (`local.t`), never as a literal template, whose `${}` would already have
    /// been evaluated in the calling scope.
    fn templatestring(&mut self, args: &[&Expression], span: Option<Range<usize>>) -> R {
        let arity = functions::Arity {
            params: vec!["template", "vars"],
            variadic: None,
        };
        if let Some((summary, detail)) = arity.mismatch("templatestring", args.len()) {
            return Err(self.error(span, summary, detail));
        }
        let arg_error = |ev: &Self, i: usize, msg: String| {
            let param = ["template", "vars"][i];
            ev.error(
                args[i].span().or(span.clone()),
                "Invalid function argument",
                format!("Invalid value for \"{param}\" parameter: {msg}."),
            )
        };
        if matches!(
            args[0],
            Expression::String(_) | Expression::StringTemplate(_) | Expression::HeredocTemplate(_)
        ) {
            return Err(arg_error(
                self,
                0,
                "invalid template expression: templatestring is only for rendering templates \
                 retrieved dynamically from elsewhere, and so does not support providing a \
                 literal template; consider using a template string expression instead"
                    .into(),
            ));
        }
        let template = self.expr(args[0])?;
        let vars = self.expr(args[1])?;
        let (template, t_marked) = unmark(template);
        let (vars, v_marked) = vars.deep_unmark();
        let marked = t_marked || v_marked;
        let template = match template {
            Value::Unknown(_) => return Ok(mark(Value::Unknown(Type::String), marked)),
            Value::String(s) => s,
            Value::Null(_) => {
                return Err(arg_error(self, 0, "argument must not be null".into()));
            }
            other => match convert(&other, &Type::String) {
                Ok(Value::String(s)) => s,
                _ => return Err(arg_error(self, 0, "string required".into())),
            },
        };
        let vars: ValueMap = match vars {
            Value::Unknown(_) => return Ok(mark(Value::Unknown(Type::String), marked)),
            Value::Map(m) | Value::Object(m) => m,
            Value::Null(_) => {
                return Err(arg_error(self, 1, "argument must not be null".into()));
            }
            _ => return Err(arg_error(self, 1, "map of any single type required".into())),
        };
        if vars.values().any(|v| !v.is_wholly_known()) {
            return Ok(mark(Value::Unknown(Type::String), marked));
        }
        let ctx = FunctionContext {
            module_dir: self.scope.module_dir(),
            root_dir: self.scope.root_dir(),
            settle_impure: self.scope.settles_impure(),
        };
        match eval_template_string(&template, &vars, &ctx, "<templatestring argument>") {
            Ok(v) => Ok(mark(v, marked)),
            Err(m) if m.starts_with("vars map does not contain key") => Err(arg_error(self, 1, m)),
            Err(m) => Err(self.error(
                span,
                "Error in function call",
                format!("Call to function \"templatestring\" failed: {m}."),
            )),
        }
    }

    /// `try(...)` and `can(...)`: special forms that catch evaluation errors of their
    /// arguments. An argument that succeeds but is not wholly known makes the result unknown,
    /// since a later, known value might still fail.
    fn try_can(&mut self, name: &str, args: &[&Expression], span: Option<Range<usize>>) -> R {
        if name == "can" {
            if args.len() != 1 {
                return Err(self.error(
                    span,
                    if args.is_empty() {
                        "Not enough function arguments"
                    } else {
                        "Too many function arguments"
                    },
                    "Function \"can\" expects 1 argument(s).",
                ));
            }
            return Ok(match self.expr(args[0]) {
                Ok(v) if !v.is_wholly_known() => Value::Unknown(Type::Bool),
                Ok(_) => Value::Bool(true),
                Err(_) => Value::Bool(false),
            });
        }
        if args.is_empty() {
            return Err(self.error(
                span,
                "Not enough function arguments",
                "Function \"try\" expects at least 1 argument(s). Missing value for \"expressions\".",
            ));
        }
        let mut messages = Vec::new();
        for a in args {
            match self.expr(a) {
                Ok(v) if !v.is_wholly_known() => return Ok(Value::unknown()),
                Ok(v) => return Ok(v),
                Err(d) => messages.extend(d.into_iter().map(|d| {
                    format!(
                        "- {}",
                        if d.detail.is_empty() {
                            d.summary
                        } else {
                            d.detail
                        }
                    )
                })),
            }
        }
        Err(self.error(
            span,
            "Error in function call",
            format!(
                "Call to function \"try\" failed: no expression succeeded:\n{}\n\nAt least one \
                 expression must produce a successful result.",
                messages.join("\n")
            ),
        ))
    }
}

#[derive(Default)]
struct TemplateState {
    /// Literals may span lines: strip markers trim one line token (see `heredoc`).
    lines: bool,
    out: String,
    unknown: bool,
    sensitive: bool,
    diags: Diagnostics,
}

/// Whether an element strips the whitespace of the literal before it (`${~`, `%{~`).
fn strip_before(el: &Element) -> bool {
    match el {
        Element::Literal(_) => false,
        Element::Interpolation(i) => i.strip.strip_start(),
        Element::Directive(d) => match &**d {
            Directive::If(d) => d.if_expr.strip.strip_start(),
            Directive::For(d) => d.for_expr.strip.strip_start(),
        },
    }
}

/// Whether an element strips the whitespace of the literal after it (`~}`).
fn strip_after(el: &Element) -> bool {
    match el {
        Element::Literal(_) => false,
        Element::Interpolation(i) => i.strip.strip_end(),
        Element::Directive(d) => match &**d {
            Directive::If(d) => d.endif_expr.strip.strip_end(),
            Directive::For(d) => d.endfor_expr.strip.strip_end(),
        },
    }
}
