//! Block decoding: each top-level block of a file checked (labels, arguments, nested blocks,
//! constants) and sorted into its `Module` (`Loader::file_body`). A broken block is reported
//! and left out; the rest still loads.
//!
//! - `terraform_block.rs`: `terraform` (required providers, backend) and `provider` blocks;
//! - `module.rs`: a module's interface — `variable`, `locals`, `output`, `module` calls;
//! - `resource.rs`: `resource`, `data` and `check` blocks, `lifecycle`, provisioners;
//! - `refactoring.rs`: `moved`, `removed` and `import` blocks (static addresses).

use super::load::Loader;
use crate::addr::Mode;
use crate::config::*;
use crate::diag::FileId;
use crate::eval::expr::convert;
use crate::eval::suggest;
use crate::eval::type_constraints::const_value;
use cairn_state::quote;
use hcl_edit::expr::{Expression, TraversalOperator};
use hcl_edit::structure::{Attribute, Block, Body, Structure};
use std::collections::BTreeMap;

mod module;
mod refactoring;
mod resource;
mod terraform_block;

pub(super) fn valid_name(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_alphabetic() || c == '_')
        && chars.all(|c| c.is_alphanumeric() || c == '_' || c == '-')
}

/// The parts of a body, after checking it against the arguments and blocks it may hold.
pub(super) struct Parts<'b> {
    attrs: BTreeMap<String, &'b Attribute>,
    blocks: Vec<&'b Block>,
}

impl Loader {
    /// Takes the parsed body by value: resource and provider bodies move into the module
    /// instead of being copied.
    pub(in crate::config) fn file_body(&mut self, file: FileId, body: Body, m: &mut Module) {
        const TOP: &[&str] = &[
            "terraform",
            "provider",
            "variable",
            "locals",
            "resource",
            "data",
            "ephemeral",
            "output",
            "module",
        ];
        for s in body.into_iter() {
            match s {
                Structure::Attribute(a) => {
                    let sp = self.span(file, &a.key);
                    self.err(
                        sp,
                        "Unsupported argument",
                        format!(
                            "An argument named {} is not expected here.",
                            quote(a.key.as_str())
                        ),
                    );
                }
                Structure::Block(b) => match b.ident.as_str() {
                    "terraform" => self.terraform_block(file, &b, m),
                    "provider" => self.provider_block(file, b, m),
                    "variable" => self.variable_block(file, &b, m),
                    "locals" => self.locals_block(file, &b, m),
                    "resource" => self.resource_block(file, b, m, Mode::Managed),
                    "data" => self.resource_block(file, b, m, Mode::Data),
                    "ephemeral" => self.resource_block(file, b, m, Mode::Ephemeral),
                    "output" => self.output_block(file, &b, m),
                    "module" => self.module_block(file, &b, m),
                    "moved" => self.moved_block(file, &b, m),
                    "removed" => self.removed_block(file, &b, m),
                    "import" => self.import_block(file, &b, m),
                    "check" => self.check_block(file, b, m),
                    other => {
                        let sp = self.span(file, &b.ident);
                        self.err(
                            sp,
                            "Unsupported block type",
                            format!(
                                "Blocks of type {} are not expected here.{}",
                                quote(other),
                                suggest::suffix(other, TOP.iter().copied())
                            ),
                        );
                    }
                },
            }
        }
    }

    /// Checks a block's labels; returns them when there are exactly as many as `names`.
    pub(in crate::config) fn labels(
        &mut self,
        file: FileId,
        b: &Block,
        names: &[&str],
    ) -> Option<Vec<String>> {
        let n = names.len();
        if b.labels.len() == n && b.labels.iter().all(|l| valid_name(l.as_str())) {
            return Some(b.labels.iter().map(|l| l.as_str().to_string()).collect());
        }
        let kind = b.ident.as_str().to_string();
        let list = names.join(", ");
        if b.labels.len() < n {
            let sp = self.header(file, b);
            self.err(
                sp,
                &format!("Missing name for {kind}"),
                format!("All {kind} blocks must have {n} labels ({list})."),
            );
            return None;
        }
        if b.labels.len() > n {
            let sp = self.span(file, &b.labels[n]);
            if n == 0 {
                self.err(
                    sp,
                    &format!("Extraneous label for {kind}"),
                    format!("No labels are expected for {kind} blocks."),
                );
            } else {
                self.err(
                    sp,
                    &format!("Extraneous label for {kind}"),
                    format!("Only {n} labels ({list}) are expected for {kind} blocks."),
                );
            }
            return None;
        }
        let mut ok = true;
        for (l, what) in b.labels.iter().zip(names) {
            if !valid_name(l.as_str()) {
                let sp = self.span(file, l);
                let what = if *what == "name" {
                    kind.clone()
                } else {
                    format!("{kind} {what}")
                };
                self.err(
                    sp,
                    &format!("Invalid {what} name"),
                    "A name must start with a letter or underscore and may contain only letters, \
                     digits, underscores, and dashes.",
                );
                ok = false;
            }
        }
        ok.then(|| b.labels.iter().map(|l| l.as_str().to_string()).collect())
    }

    /// Sorts a body into its arguments and blocks, reporting duplicates and anything not in
    /// `attrs`/`blocks` (`None` allows any).
    pub(in crate::config) fn parts<'b>(
        &mut self,
        file: FileId,
        body: &'b Body,
        attrs: Option<&[&str]>,
        blocks: Option<&[&str]>,
    ) -> Parts<'b> {
        let mut out = Parts {
            attrs: BTreeMap::new(),
            blocks: Vec::new(),
        };
        for s in body.iter() {
            match s {
                Structure::Attribute(a) => {
                    let name = a.key.as_str();
                    if let Some(allowed) = attrs {
                        if !allowed.contains(&name) {
                            let sp = self.span(file, &a.key);
                            self.err(
                                sp,
                                "Unsupported argument",
                                format!(
                                    "An argument named {} is not expected here.{}",
                                    quote(name),
                                    suggest::suffix(name, allowed.iter().copied())
                                ),
                            );
                            continue;
                        }
                    }
                    if let Some(prev) = out.attrs.get(name) {
                        let was = self.range_str(self.span(file, &prev.key));
                        let sp = self.span(file, &a.key);
                        self.err(
                            sp,
                            "Attribute redefined",
                            format!(
                                "The argument {} was already set at {was}. Each argument may be \
                                 set only once.",
                                quote(name)
                            ),
                        );
                        continue;
                    }
                    out.attrs.insert(name.to_string(), a);
                }
                Structure::Block(b) => {
                    let name = b.ident.as_str();
                    if let Some(allowed) = blocks {
                        if !allowed.contains(&name) {
                            let sp = self.span(file, &b.ident);
                            self.err(
                                sp,
                                "Unsupported block type",
                                format!(
                                    "Blocks of type {} are not expected here.{}",
                                    quote(name),
                                    suggest::suffix(name, allowed.iter().copied())
                                ),
                            );
                            continue;
                        }
                    }
                    out.blocks.push(b);
                }
            }
        }
        out
    }

    pub(in crate::config) fn required<'b>(
        &mut self,
        file: FileId,
        b: &Block,
        parts: &Parts<'b>,
        name: &str,
    ) -> Option<&'b Attribute> {
        let a = parts.attrs.get(name).copied();
        if a.is_none() {
            let sp = self.header(file, b);
            self.err(
                sp,
                "Missing required argument",
                format!(
                    "The argument {} is required, but no definition was found.",
                    quote(name)
                ),
            );
        }
        a
    }

    pub(in crate::config) fn const_of(
        &mut self,
        file: FileId,
        a: &Attribute,
        ty: &Type,
    ) -> Option<Value> {
        let v = match const_value(&a.value, file) {
            Ok(v) => v,
            Err(d) => {
                self.diags.push(d);
                return None;
            }
        };
        match convert(&v, ty) {
            Ok(v) if v.is_null() => {
                let sp = self.span(file, &a.value);
                self.err(
                    sp,
                    "Invalid value",
                    format!("The argument {} must not be null.", quote(a.key.as_str())),
                );
                None
            }
            Ok(v) => Some(v),
            Err(m) => {
                let sp = self.span(file, &a.value);
                self.err(
                    sp,
                    "Incorrect attribute value type",
                    format!(
                        "Inappropriate value for attribute {}: {m}.",
                        quote(a.key.as_str())
                    ),
                );
                None
            }
        }
    }

    pub(in crate::config) fn const_string(
        &mut self,
        file: FileId,
        a: &Attribute,
    ) -> Option<String> {
        self.const_of(file, a, &Type::String)
            .and_then(|v| v.as_str().map(str::to_string))
    }

    pub(in crate::config) fn const_bool(
        &mut self,
        file: FileId,
        a: Option<&Attribute>,
        default: bool,
    ) -> bool {
        match a {
            None => default,
            Some(a) => self
                .const_of(file, a, &Type::Bool)
                .and_then(|v| v.as_bool())
                .unwrap_or(default),
        }
    }
}

/// `a`, `a.b`, `tags["x"]`, `list[0]` as path steps; `None` for anything dynamic.
pub(super) fn static_path(e: &Expression) -> Option<Vec<String>> {
    match e {
        Expression::Variable(v) => Some(vec![v.as_str().to_string()]),
        Expression::Traversal(t) => {
            let Expression::Variable(root) = &t.expr else {
                return None;
            };
            let mut out = vec![root.as_str().to_string()];
            for op in &t.operators {
                match op.value() {
                    TraversalOperator::GetAttr(a) => out.push(a.as_str().to_string()),
                    TraversalOperator::LegacyIndex(i) => out.push(i.value().to_string()),
                    TraversalOperator::Index(Expression::String(s)) => out.push(s.value().clone()),
                    TraversalOperator::Index(Expression::Number(n)) => {
                        out.push(n.value().to_string())
                    }
                    _ => return None,
                }
            }
            Some(out)
        }
        _ => None,
    }
}
