//! `moved`, `removed` and `import` blocks: static addresses relative to their module.

use crate::addr::{Mode, ModulePath};
use crate::config::load::Loader;
use crate::config::*;
use crate::diag::{FileId, Span};
use hcl_edit::expr::{Expression, TraversalOperator};
use hcl_edit::structure::{Attribute, Block};

/// The static resource an import block's `to` names (`module.m["k"].t.n[each.key]`): its
/// module path without keys and its key; the index steps are evaluated later.
pub(crate) fn import_target_static(e: &Expression) -> Result<(ModulePath, ResourceKey), String> {
    let bad = || {
        "The import target must be a resource instance address, like echo5_item.x, \
         echo5_item.x[\"key\"] or module.m.echo5_item.x."
            .to_string()
    };
    let Expression::Traversal(t) = e else {
        return Err(bad());
    };
    let Expression::Variable(root) = &t.expr else {
        return Err(bad());
    };
    let mut names: Vec<(String, bool)> = vec![(root.as_str().to_string(), false)];
    for op in t.operators.iter() {
        match op.value() {
            TraversalOperator::GetAttr(a) => names.push((a.as_str().to_string(), false)),
            TraversalOperator::Index(_) | TraversalOperator::LegacyIndex(_) => {
                match names.last_mut() {
                    Some((_, keyed @ false)) => *keyed = true,
                    _ => return Err(bad()),
                }
            }
            _ => return Err(bad()),
        }
    }
    let mut module = ModulePath::root();
    let mut i = 0;
    while names.get(i).is_some_and(|(n, _)| n == "module") {
        if names[i].1 {
            return Err(bad());
        }
        let Some((name, _)) = names.get(i + 1) else {
            return Err(bad());
        };
        module = module.child(name, None);
        i += 2;
    }
    match &names[i..] {
        [(d, false), ..] if d == "data" => Err("Only managed resources can be imported.".into()),
        [(type_, false), (name, _)] => Ok((
            module,
            ResourceKey {
                mode: Mode::Managed,
                type_: type_.clone(),
                name: name.clone(),
            },
        )),
        _ => Err(bad()),
    }
}

/// The text of a static address (`module.m["k"].sim_thing.a[0]`), written back from a
/// traversal whose keys are all constants; `None` for any other expression.
fn static_address_text(e: &Expression) -> Option<String> {
    let root = match e {
        Expression::Variable(v) => return Some(v.as_str().to_string()),
        Expression::Traversal(t) => match &t.expr {
            Expression::Variable(v) => v.as_str().to_string(),
            _ => return None,
        },
        _ => return None,
    };
    let Expression::Traversal(t) = e else {
        return None;
    };
    let mut out = root;
    for op in &t.operators {
        match op.value() {
            TraversalOperator::GetAttr(a) => {
                out.push('.');
                out.push_str(a.as_str());
            }
            TraversalOperator::LegacyIndex(i) => out.push_str(&format!("[{}]", i.value())),
            TraversalOperator::Index(Expression::String(s)) => {
                out.push_str(&format!("[{}]", cairn_state::quote(s.value())))
            }
            TraversalOperator::Index(Expression::Number(n)) => {
                out.push_str(&format!("[{}]", n.value()))
            }
            _ => return None,
        }
    }
    Some(out)
}

impl Loader {
    /// `import { to = … id = … }`: root module only; `to` a managed resource instance.
    pub(in crate::config) fn import_block(&mut self, file: FileId, b: &Block, m: &mut Module) {
        let span = self.header(file, b);
        let parts = self.parts(
            file,
            &b.body,
            Some(&["to", "id", "for_each", "provider"]),
            Some(&[]),
        );
        if !m.path.is_root() {
            self.err(
                span,
                "Invalid import configuration",
                format!(
                    "An import block was detected in \"{}\". Import blocks are only allowed in \
                     the root module.",
                    m.path
                ),
            );
            return;
        }
        let mut missing = false;
        for arg in ["to", "id"] {
            if !parts.attrs.contains_key(arg) {
                self.err(
                    span,
                    "Missing required argument",
                    format!("The argument \"{arg}\" is required, but no definition was found."),
                );
                missing = true;
            }
        }
        if missing {
            return;
        }
        let to = &parts.attrs["to"].value;
        let id = &parts.attrs["id"].value;
        let to_span = self.span(file, to);
        let id_span = self.span(file, id);
        let (module, key) = match import_target_static(to) {
            Ok(t) => t,
            Err(detail) => {
                self.err(to_span, "Invalid import address", detail);
                return;
            }
        };
        let provider = match parts.attrs.get("provider") {
            Some(a) => match self.provider_ref(file, &a.value) {
                Some(p) => Some(p),
                None => return,
            },
            None => None,
        };
        m.imports.push(ImportBlock {
            module,
            key,
            to: to.clone(),
            id: id.clone(),
            for_each: parts.attrs.get("for_each").map(|a| a.value.clone()),
            provider,
            file,
            span,
            to_span,
            id_span,
        });
    }

    /// A static address in a `moved` or `removed` block (`from`, `to`): a traversal with
    /// constant keys only, parsed as a state address.
    fn move_address(&mut self, file: FileId, a: &Attribute) -> Option<crate::addr::Target> {
        let sp = self.span(file, &a.value);
        let Some(text) = static_address_text(&a.value) else {
            self.err(
                sp,
                "Invalid expression",
                "A single static variable reference is required: only attribute access and \
                 indexing with constant keys. No calculations, function calls, template \
                 expressions, etc are allowed here.",
            );
            return None;
        };
        match text.parse::<crate::addr::Target>() {
            Ok(t) => Some(t),
            Err(e) => {
                self.err(
                    sp,
                    "Invalid address",
                    format!(
                        "{e}. An address here names a resource (sim_thing.a), a resource \
                         instance (sim_thing.a[0]) or a module (module.m)."
                    ),
                );
                None
            }
        }
    }

    pub(in crate::config) fn moved_block(&mut self, file: FileId, b: &Block, m: &mut Module) {
        if self.labels(file, b, &[]).is_none() {
            return;
        }
        let parts = self.parts(file, &b.body, Some(&["from", "to"]), Some(&[]));
        let from = self.required(file, b, &parts, "from");
        let to = self.required(file, b, &parts, "to");
        let from = from.and_then(|a| self.move_address(file, a));
        let to = to.and_then(|a| self.move_address(file, a));
        let (Some(from), Some(to)) = (from, to) else {
            return;
        };
        let span = self.header(file, b);
        let is_module = |t: &crate::addr::Target| matches!(t, crate::addr::Target::Module(_));
        if is_module(&from) != is_module(&to) {
            self.err(
                span,
                "Invalid \"moved\" addresses",
                "The \"from\" and \"to\" addresses must either both refer to resources or both \
                 refer to modules.",
            );
            return;
        }
        m.moved.push(MovedBlock { from, to, span });
    }

    pub(in crate::config) fn removed_block(&mut self, file: FileId, b: &Block, m: &mut Module) {
        if self.labels(file, b, &[]).is_none() {
            return;
        }
        let parts = self.parts(
            file,
            &b.body,
            Some(&["from"]),
            Some(&["lifecycle", "provisioner", "connection"]),
        );
        let from = self.required(file, b, &parts, "from");
        let from_span = from.map(|a| self.span(file, &a.value));
        let from = from.and_then(|a| self.move_address(file, a));
        let mut destroy = true;
        let mut seen_lifecycle: Option<Span> = None;
        for lb in &parts.blocks {
            let sp = self.header(file, lb);
            match lb.ident.as_str() {
                "lifecycle" => {
                    if let Some(prev) = seen_lifecycle {
                        let was = self.range_str(prev);
                        self.err(
                            sp,
                            "Duplicate lifecycle block",
                            format!("This removed block already has a lifecycle block at {was}."),
                        );
                        continue;
                    }
                    seen_lifecycle = Some(sp);
                    if self.labels(file, lb, &[]).is_none() {
                        continue;
                    }
                    let lp = self.parts(file, &lb.body, Some(&["destroy"]), Some(&[]));
                    destroy = self.const_bool(file, lp.attrs.get("destroy").copied(), true);
                }
                // Destroy-time provisioners of a removed resource: Cairn runs none
                // (`unsupported_blocks`); a `connection` block is read past, as in resources.
                "provisioner" => m.state_blocks.push(("provisioner".to_string(), sp)),
                _ => {}
            }
        }
        let (Some(from), Some(from_span)) = (from, from_span) else {
            return;
        };
        match &from {
            crate::addr::Target::Instance(_) => self.err(
                from_span,
                "Resource instance keys not allowed",
                "Resource address must be a resource (e.g. \"test_instance.foo\"), not a \
                 resource instance (e.g. \"test_instance.foo[1]\").",
            ),
            crate::addr::Target::Module(p) if p.0.iter().any(|s| s.key.is_some()) => self.err(
                from_span,
                "Module instance keys not allowed",
                "Module address must be a module (e.g. \"module.foo\"), not a module instance \
                 (e.g. \"module.foo[1]\").",
            ),
            crate::addr::Target::Resource(r) if r.mode == Mode::Data => self.err(
                from_span,
                "Data source address not allowed",
                "Data sources are never destroyed, so they are not valid targets of removed \
                 blocks. To remove the data source from state, remove the data source block \
                 from configuration.",
            ),
            crate::addr::Target::Resource(r) if r.module.0.iter().any(|s| s.key.is_some()) => self
                .err(
                    from_span,
                    "Module instance keys not allowed",
                    "Module address must be a module (e.g. \"module.foo\"), not a module \
                     instance (e.g. \"module.foo[1]\").",
                ),
            _ => m.removed.push(RemovedBlock {
                from,
                destroy,
                span: self.header(file, b),
            }),
        }
    }
}
