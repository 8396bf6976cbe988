//! Where ephemeral values may go (Terraform 1.10/1.11), checked on the configuration before
//! anything is evaluated, with Terraform's errors.
//!
//! A term is ephemeral when it is an ephemeral resource (`ephemeral.T.N`), an input variable
//! declared `ephemeral = true`, a child module's output declared so, or a local value whose
//! expression refers to an ephemeral term. An expression is ephemeral when it refers to an
//! ephemeral term outside `ephemeralasnull(…)`. Such an expression may set a write-only
//! attribute, a provider's configuration, an ephemeral resource's arguments, a local value, an
//! ephemeral child output or ephemeral child variable; it may not set an ordinary argument of a
//! managed resource or data source (both are stored), a child module input not declared
//! ephemeral, or an output not declared ephemeral; and a root module output cannot be
//! ephemeral at all.
//!
//! Cairn decides this from references, where Terraform marks values: an expression that
//! refers to an ephemeral term is ephemeral even where, at run time, the ephemeral part would
//! not reach its result (say, the branch of a conditional not taken).

use super::{span_in, Config, Module, Resource};
use crate::addr::Mode;
use crate::diag::{Diagnostic, Diagnostics, FileId};
use crate::eval::refs::value_references;
use crate::eval::Subject;
use crate::schema::Block;
use cairn_state::quote;
use hcl_edit::expr::Expression;
use hcl_edit::structure::Body;
use std::collections::BTreeSet;

/// Every misplaced ephemeral value of the configuration. `schema` gives a managed resource's
/// or data source's schema, where a provider describes it (its write-only attributes may take
/// ephemeral values).
pub(crate) fn check<'a>(
    config: &Config,
    schema: &dyn Fn(Mode, &str) -> Option<&'a Block>,
) -> Diagnostics {
    let mut diags = Diagnostics::new();
    for m in config.modules() {
        check_module(m, schema, &mut diags);
    }
    diags
}

/// The arguments of a block of module `m` (a provider's) set from ephemeral values: never
/// written down with its configuration.
pub(crate) fn ephemeral_arguments(m: &Module, body: &Body) -> BTreeSet<String> {
    let locals = ephemeral_locals(m);
    body.attributes()
        .filter(|a| refers_to_ephemeral(m, &locals, &a.value))
        .map(|a| a.key.as_str().to_string())
        .collect()
}

/// The ephemeral terms of every module, by static module path: `var.NAME`, `local.NAME`,
/// `module.CALL.OUTPUT` (ephemeral resources are ephemeral by their mode).
pub(crate) fn ephemeral_terms(
    config: &Config,
) -> std::collections::HashSet<(crate::addr::ModulePath, String)> {
    let mut out = std::collections::HashSet::new();
    for m in config.modules() {
        let p = &m.path;
        for v in m.variables.values().filter(|v| v.ephemeral) {
            out.insert((p.clone(), format!("var.{}", v.name)));
        }
        for l in ephemeral_locals(m) {
            out.insert((p.clone(), format!("local.{l}")));
        }
        for (call, child) in &m.children {
            for (o, out_decl) in &child.outputs {
                if out_decl.ephemeral {
                    out.insert((p.clone(), format!("module.{call}.{o}")));
                }
            }
        }
    }
    out
}

/// The local values of `m` that are ephemeral (to a fixed point: locals refer to locals).
fn ephemeral_locals(m: &Module) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    loop {
        let before = out.len();
        for (name, l) in &m.locals {
            if !out.contains(name) && refers_to_ephemeral(m, &out, &l.expr) {
                out.insert(name.clone());
            }
        }
        if out.len() == before {
            return out;
        }
    }
}

fn is_ephemeral(m: &Module, locals: &BTreeSet<String>, s: &Subject) -> bool {
    match s {
        Subject::Resource { mode, .. } => *mode == Mode::Ephemeral,
        Subject::Var(n) => m.variables.get(n).is_some_and(|v| v.ephemeral),
        Subject::Local(n) => locals.contains(n),
        Subject::ModuleCall { name, output } => {
            m.children.get(name).is_some_and(|c| match output {
                Some(o) => c.outputs.get(o).is_some_and(|o| o.ephemeral),
                None => c.outputs.values().any(|o| o.ephemeral),
            })
        }
        _ => false,
    }
}

fn refers_to_ephemeral(m: &Module, locals: &BTreeSet<String>, e: &Expression) -> bool {
    value_references(e)
        .iter()
        .any(|r| is_ephemeral(m, locals, &r.subject))
}

fn check_module<'a>(
    m: &Module,
    schema: &dyn Fn(Mode, &str) -> Option<&'a Block>,
    diags: &mut Diagnostics,
) {
    let locals = ephemeral_locals(m);
    let eph = |e: &Expression| refers_to_ephemeral(m, &locals, e);
    for r in m.resources.values() {
        if r.mode == Mode::Ephemeral {
            continue;
        }
        let block = schema(r.mode, &r.type_);
        check_body(m, r, &r.body, block, &eph, diags);
    }
    let root = m.path.is_root();
    for (name, o) in &m.outputs {
        if root && o.ephemeral {
            diags.push(
                Diagnostic::error(
                    "Ephemeral output not allowed",
                    "Ephemeral outputs are not allowed in context of a root module",
                )
                .with_span(Some(o.span)),
            );
            continue;
        }
        let _ = name;
        if !o.ephemeral && eph(&o.value) {
            diags.push(
                Diagnostic::error(
                    "Ephemeral value not allowed",
                    "This output value is not declared as returning an ephemeral value, so it \
                     cannot be set to a result derived from an ephemeral value.",
                )
                .with_span(Some(span_in(o.file, &o.value))),
            );
        }
    }
    for (name, call) in &m.calls {
        let Some(child) = m.children.get(name) else {
            continue;
        };
        for (input, (expr, _)) in &call.inputs {
            let accepts = child.variables.get(input).is_some_and(|v| v.ephemeral);
            if !accepts && eph(expr) {
                diags.push(
                    Diagnostic::error(
                        "Ephemeral value not allowed",
                        "This input variable is not declared as accepting a ephemeral values, \
                         so it cannot be set to a result derived from an ephemeral value.",
                    )
                    .with_span(Some(span_in(call.file, expr))),
                );
            }
        }
    }
}

/// The arguments of a managed resource or data source body (nested and `dynamic` blocks
/// included): an ephemeral value only where the schema says write-only.
fn check_body(
    m: &Module,
    r: &Resource,
    body: &Body,
    block: Option<&Block>,
    eph: &dyn Fn(&Expression) -> bool,
    diags: &mut Diagnostics,
) {
    for a in body.attributes() {
        let name = a.key.as_str();
        let write_only = block
            .and_then(|b| b.attributes.get(name))
            .is_some_and(|at| at.write_only);
        if !write_only && eph(&a.value) {
            diags.push(invalid_use(m, r, r.file, name, &a.value));
        }
    }
    for b in body.blocks() {
        let (kind, inner) = match b.ident.as_str() {
            "dynamic" => {
                let label = b.labels.first().map(|l| l.as_str().to_string());
                let content = b.body.blocks().find(|c| c.ident.as_str() == "content");
                match (label, content) {
                    (Some(l), Some(c)) => (l, &c.body),
                    _ => continue,
                }
            }
            k => (k.to_string(), &b.body),
        };
        let nested = block.and_then(|s| s.blocks.get(&kind)).map(|n| &n.block);
        check_body(m, r, inner, nested, eph, diags);
    }
}

fn invalid_use(m: &Module, r: &Resource, file: FileId, name: &str, e: &Expression) -> Diagnostic {
    let addr = crate::addr::ResourceAddr::new(m.path.clone(), r.mode, &r.type_, &r.name);
    Diagnostic::error(
        "Invalid use of ephemeral value",
        format!(
            "Ephemeral values are not valid for {}, because it is not a write-only attribute \
             and must be persisted to state.",
            quote(name)
        ),
    )
    .with_span(Some(span_in(file, e)))
    .with_address(addr)
}
