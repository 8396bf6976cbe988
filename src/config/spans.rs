//! Where an attribute path points in a block body: a provider diagnostic names an attribute
//! (`rule[1].port`, `tags["k"]`), and the user is shown that attribute in the configuration.

use super::span_in;
use crate::diag::{FileId, Span};
use crate::schema::PathStep;
use hcl_edit::expr::{Expression, ObjectKey};
use hcl_edit::structure::{Body, Structure};

/// The span of `path` in `body` (a resource's, data source's or provider's): the argument's
/// value, an element of it (object keys, tuple indices), or a nested block (list and set
/// blocks by position, map blocks by label) and what is inside it. When the path goes deeper
/// than the configuration spells out (a value computed by a function, a `dynamic` block), the
/// deepest part that is written is shown. `None`: the configuration does not write the first
/// step (the caller shows the block header).
pub(crate) fn span_of_path(body: &Body, file: FileId, path: &[PathStep]) -> Option<Span> {
    let (first, rest) = path.split_first()?;
    let name = match first {
        PathStep::Attr(n) => n.as_str(),
        _ => return None,
    };
    for s in body.iter() {
        if let Structure::Attribute(a) = s {
            if a.key.as_str() == name {
                return Some(
                    in_expr(&a.value, file, rest).unwrap_or_else(|| span_in(file, &a.value)),
                );
            }
        }
    }
    let blocks: Vec<&hcl_edit::structure::Block> = body
        .iter()
        .filter_map(|s| match s {
            Structure::Block(b) if b.ident.as_str() == name => Some(b),
            _ => None,
        })
        .collect();
    if blocks.is_empty() {
        // A `dynamic "name"` block generates these: point at it.
        return body.iter().find_map(|s| match s {
            Structure::Block(b)
                if b.ident.as_str() == "dynamic"
                    && b.labels.first().map(|l| l.as_str()) == Some(name) =>
            {
                Some(span_in(file, &b.ident))
            }
            _ => None,
        });
    }
    let (block, rest) = match rest.split_first() {
        Some((PathStep::Index(i), r)) => match usize::try_from(*i).ok().and_then(|i| blocks.get(i))
        {
            Some(b) => (*b, r),
            None => return Some(span_in(file, &blocks[0].ident)),
        },
        Some((PathStep::Key(k), r)) => {
            match blocks
                .iter()
                .find(|b| b.labels.first().map(|l| l.as_str()) == Some(k.as_str()))
            {
                Some(b) => (*b, r),
                None => return Some(span_in(file, &blocks[0].ident)),
            }
        }
        _ => (blocks[0], rest),
    };
    Some(span_of_path(&block.body, file, rest).unwrap_or_else(|| span_in(file, &block.ident)))
}

/// The span of `path` inside an expression written as object and tuple literals.
fn in_expr(e: &Expression, file: FileId, path: &[PathStep]) -> Option<Span> {
    let (first, rest) = path.split_first()?;
    let found = match (e, first) {
        (Expression::Object(o), PathStep::Attr(k) | PathStep::Key(k)) => {
            o.iter().find_map(|(key, v)| {
                let name = match key {
                    ObjectKey::Ident(i) => Some(i.as_str()),
                    ObjectKey::Expression(Expression::String(s)) => Some(s.as_str()),
                    ObjectKey::Expression(_) => None,
                };
                (name == Some(k.as_str())).then(|| v.expr())
            })
        }
        (Expression::Array(a), PathStep::Index(i)) => {
            usize::try_from(*i).ok().and_then(|i| a.iter().nth(i))
        }
        (Expression::Parenthesis(p), _) => return in_expr(p.inner(), file, path),
        _ => None,
    }?;
    Some(in_expr(found, file, rest).unwrap_or_else(|| span_in(file, found)))
}
