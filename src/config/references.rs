//! Static reference checks: every reference in every expression of the module tree names
//! something declared where it is used — a variable, local, resource, module call or module
//! output of its own module — and `count`/`each`/`self` appear only where they have a value.
//! This is what `validate` adds to loading, without evaluating anything.

use super::{Config, Module, ResourceKey};
use crate::addr::Mode;
use crate::diag::{Diagnostic, Diagnostics, FileId, Span};
use crate::eval::suggest;
use crate::eval::{body_references, references, Reference, Subject};
use cairn_state::quote;
use hcl_edit::expr::Expression;

/// Where an expression sits: which per-instance names it may use.
#[derive(Clone, Copy)]
struct Ctx<'a> {
    count: bool,
    for_each: bool,
    /// The resource the expression belongs to, which it may not refer to.
    this: Option<(Mode, &'a str, &'a str)>,
    /// In a postcondition: `self` is the object.
    self_ok: bool,
    /// Inside this `check` block: its scoped data sources may be referred to.
    scope: Option<&'a str>,
}

const PLAIN: Ctx<'static> = Ctx {
    count: false,
    for_each: false,
    this: None,
    self_ok: false,
    scope: None,
};

/// Checks the references of every module in the tree (see the module docs).
pub(crate) fn check_references(config: &Config) -> Diagnostics {
    let mut diags = Diagnostics::new();
    for m in config.modules() {
        check_module(m, &mut diags);
    }
    diags
}

fn check_module(m: &Module, diags: &mut Diagnostics) {
    let mut check = |refs: Vec<Reference>, file: FileId, ctx: Ctx| {
        for r in refs {
            if let Some(d) = check_one(m, &r, ctx) {
                diags.push(d.with_span(Some(Span {
                    file,
                    start: r.start,
                    end: r.end,
                })));
            }
        }
    };
    let expr_refs = |e: &Expression| references(e);
    for p in &m.providers {
        let ctx = Ctx {
            for_each: p.for_each.is_some(),
            ..PLAIN
        };
        check(body_references(&p.body), p.file, ctx);
        if let Some(fe) = &p.for_each {
            check(expr_refs(fe), p.file, PLAIN);
        }
    }
    for v in m.variables.values() {
        for rule in &v.validations {
            check(expr_refs(&rule.condition), v.file, PLAIN);
            check(expr_refs(&rule.error_message), v.file, PLAIN);
        }
    }
    for l in m.locals.values() {
        check(expr_refs(&l.expr), l.file, PLAIN);
    }
    for c in m.checks.values() {
        let scope = Ctx {
            scope: Some(c.name.as_str()),
            ..PLAIN
        };
        for rule in &c.asserts {
            check(expr_refs(&rule.condition), c.file, scope);
            check(expr_refs(&rule.error_message), c.file, scope);
        }
    }
    for r in m.resources.values() {
        let this = Some((r.mode, r.type_.as_str(), r.name.as_str()));
        let meta = Ctx {
            this,
            scope: r.check.as_deref(),
            ..PLAIN
        };
        if let Some(c) = &r.count {
            check(expr_refs(c), r.file, meta);
        }
        if let Some(f) = &r.for_each {
            check(expr_refs(f), r.file, meta);
        }
        let inner = Ctx {
            count: r.count.is_some(),
            for_each: r.for_each.is_some(),
            this,
            self_ok: false,
            scope: r.check.as_deref(),
        };
        check(body_references(&r.body), r.file, inner);
        for e in &r.lifecycle.replace_triggered_by {
            check(expr_refs(e), r.file, inner);
        }
        for rule in &r.lifecycle.preconditions {
            check(expr_refs(&rule.condition), r.file, inner);
            check(expr_refs(&rule.error_message), r.file, inner);
        }
        let post = Ctx {
            self_ok: true,
            ..inner
        };
        for rule in &r.lifecycle.postconditions {
            check(expr_refs(&rule.condition), r.file, post);
            check(expr_refs(&rule.error_message), r.file, post);
        }
        // A provisioner's `self` is the object it runs for.
        for p in &r.provisioners {
            check(body_references(&p.body), r.file, post);
        }
        // A block naming itself in its depends_on is accepted, as Terraform's validate
        // does: the dependency on itself orders nothing.
        for d in &r.depends_on {
            check(
                vec![Reference {
                    subject: d.subject.clone(),
                    start: d.span.start,
                    end: d.span.end,
                }],
                r.file,
                Ctx { this: None, ..meta },
            );
        }
    }
    for o in m.outputs.values() {
        check(expr_refs(&o.value), o.file, PLAIN);
        for rule in &o.preconditions {
            check(expr_refs(&rule.condition), o.file, PLAIN);
            check(expr_refs(&rule.error_message), o.file, PLAIN);
        }
    }
    for b in &m.imports {
        // `to` names its target (checked by the loader); its keys and `id` may use `each`
        // when the block has `for_each`.
        let inner = Ctx {
            for_each: b.for_each.is_some(),
            ..PLAIN
        };
        if let Some(e) = &b.for_each {
            check(expr_refs(e), b.file, PLAIN);
        }
        check(expr_refs(&b.id), b.file, inner);
    }
    for c in m.calls.values() {
        if let Some(e) = &c.count {
            check(expr_refs(e), c.file, PLAIN);
        }
        if let Some(e) = &c.for_each {
            check(expr_refs(e), c.file, PLAIN);
        }
        let inner = Ctx {
            count: c.count.is_some(),
            for_each: c.for_each.is_some(),
            this: None,
            self_ok: false,
            scope: None,
        };
        for (e, _) in c.inputs.values() {
            check(expr_refs(e), c.file, inner);
        }
    }
}

fn where_(m: &Module) -> String {
    if m.path.is_root() {
        "the root module".into()
    } else {
        m.path.to_string()
    }
}

fn check_one(m: &Module, r: &Reference, ctx: Ctx) -> Option<Diagnostic> {
    match &r.subject {
        Subject::Var(n) if !m.variables.contains_key(n) => Some(Diagnostic::error(
            "Reference to undeclared input variable",
            format!(
                "An input variable with the name {} has not been declared.{}",
                quote(n),
                match suggest::did_you_mean(n, m.variables.keys().map(String::as_str)) {
                    Some(s) => format!(" Did you mean {}?", quote(&s)),
                    None => format!(
                        " This variable can be declared with a variable {} {{}} block.",
                        quote(n)
                    ),
                }
            ),
        )),
        Subject::Local(n) if !m.locals.contains_key(n) => Some(Diagnostic::error(
            "Reference to undeclared local value",
            format!(
                "A local value with the name {} has not been declared.{}",
                quote(n),
                suggest::suffix(n, m.locals.keys().map(String::as_str))
            ),
        )),
        Subject::Resource { mode, type_, name } => {
            if ctx.this == Some((*mode, type_.as_str(), name.as_str())) {
                let addr = match mode {
                    Mode::Managed => format!("{type_}.{name}"),
                    Mode::Data => format!("data.{type_}.{name}"),
                    Mode::Ephemeral => format!("ephemeral.{type_}.{name}"),
                };
                return Some(Diagnostic::error(
                    "Self-referential block",
                    format!("Configuration for {addr} may not refer to itself."),
                ));
            }
            let declared = m.resources.get(&ResourceKey {
                mode: *mode,
                type_: type_.clone(),
                name: name.clone(),
            });
            if let Some(r) = declared {
                return scoped_reference(r, ctx.scope);
            }
            let same_type = m
                .resources
                .keys()
                .filter(|k| k.mode == *mode && k.type_ == *type_)
                .map(|k| k.name.as_str());
            let hint = suggest::suffix(name, same_type);
            let what = match mode {
                Mode::Managed => "managed resource",
                Mode::Data => "data resource",
                Mode::Ephemeral => "ephemeral resource",
            };
            Some(Diagnostic::error(
                "Reference to undeclared resource",
                format!(
                    "A {what} {} {} has not been declared in {}.{hint}",
                    quote(type_),
                    quote(name),
                    where_(m)
                ),
            ))
        }
        Subject::ModuleCall { name, output } => {
            if !m.calls.contains_key(name) {
                return Some(Diagnostic::error(
                    "Reference to undeclared module",
                    format!(
                        "No module call named {} is declared in {}.{}",
                        quote(name),
                        where_(m),
                        suggest::suffix(name, m.calls.keys().map(String::as_str))
                    ),
                ));
            }
            let child = m.children.get(name)?;
            let out = output.as_ref()?;
            if child.outputs.contains_key(out) {
                return None;
            }
            Some(Diagnostic::error(
                "Unsupported attribute",
                format!(
                    "This object does not have an attribute named {}.{}",
                    quote(out),
                    suggest::suffix(out, child.outputs.keys().map(String::as_str))
                ),
            ))
        }
        Subject::CountIndex if !ctx.count => Some(Diagnostic::error(
            "Reference to \"count\" in non-counted context",
            "The \"count\" object can only be used in \"module\", \"resource\", and \"data\" \
             blocks, and only when the \"count\" argument is set.",
        )),
        Subject::EachKey | Subject::EachValue if !ctx.for_each => Some(Diagnostic::error(
            "Reference to \"each\" in context without for_each",
            "The \"each\" object can be used only in \"module\" or \"resource\" blocks, and only \
             when the \"for_each\" argument is set.",
        )),
        Subject::SelfRef if !ctx.self_ok => Some(Diagnostic::error(
            "Invalid \"self\" reference",
            "The \"self\" object is not available in this context. This object can be used only \
             in resource provisioner, connection, and postcondition blocks.",
        )),
        _ => None,
    }
}

/// Terraform's error for a reference to a `check` block's data source from outside it.
pub(crate) fn scoped_reference(r: &super::Resource, from: Option<&str>) -> Option<Diagnostic> {
    let scope = r.check.as_deref()?;
    (from != Some(scope)).then(|| {
        Diagnostic::error(
            "Reference to scoped resource",
            format!(
                "The referenced data resource {} {} is not available from this context.",
                quote(&r.type_),
                quote(&r.name)
            ),
        )
    })
}
