//! `resource`, `data` and `check` blocks: meta-arguments, `lifecycle` (conditions,
//! `ignore_changes`), provisioners.

use super::static_path;
use crate::addr::Mode;
use crate::config::load::Loader;
use crate::config::*;
use crate::diag::{FileId, Span};
use crate::eval::refs::{depends_on_subject, traversal_subject};
use cairn_state::quote;
use hcl_edit::expr::Expression;
use hcl_edit::structure::{Attribute, Block};

impl Loader {
    pub(in crate::config) fn depends_on(
        &mut self,
        file: FileId,
        a: Option<&Attribute>,
    ) -> Vec<DependsOn> {
        let Some(a) = a else {
            return Vec::new();
        };
        let Expression::Array(items) = &a.value else {
            let sp = self.span(file, &a.value);
            self.err(
                sp,
                "Invalid depends_on",
                "The depends_on argument must be a list of references, like \
                 [sim_thing.a, module.b].",
            );
            return Vec::new();
        };
        let mut out = Vec::new();
        for e in items.iter() {
            let span = self.span(file, e);
            // As in Terraform, any whole object may be named (`var.x`, `local.y`, ...): it
            // orders like a reference, and is checked like one (`check_references`).
            match depends_on_subject(e) {
                Ok((subject, false)) => out.push(DependsOn { subject, span }),
                Ok((_, true)) => self.err(
                    span,
                    "Invalid depends_on reference",
                    "References in depends_on must be to a whole object (resource, etc), not \
                     to an attribute of an object.",
                ),
                Err((s, d)) => self.err(span, &s, d),
            }
        }
        out
    }

    pub(in crate::config) fn resource_block(
        &mut self,
        file: FileId,
        block: Block,
        m: &mut Module,
        mode: Mode,
    ) {
        let b = &block;
        let Some(Ok([type_, name])) = self
            .labels(file, b, &["type", "name"])
            .map(<[String; 2]>::try_from)
        else {
            return;
        };
        let span = self.header(file, b);
        const META: &[&str] = &["count", "for_each", "provider", "depends_on", "lifecycle"];
        let parts = self.parts(file, &b.body, None, None);
        let count = parts.attrs.get("count").map(|a| Box::new(a.value.clone()));
        let for_each = parts
            .attrs
            .get("for_each")
            .map(|a| Box::new(a.value.clone()));
        if let (Some(_), Some(fe)) = (&count, parts.attrs.get("for_each")) {
            let sp = self.span(file, &fe.key);
            self.err(
                sp,
                "Invalid combination of \"count\" and \"for_each\"",
                "The \"count\" and \"for_each\" meta-arguments are mutually-exclusive, only one \
                 should be used to be explicit about the number of resources to be created.",
            );
        }
        let provider = match parts.attrs.get("provider") {
            Some(a) => self.provider_ref(file, &a.value),
            None => None,
        };
        let depends_on = self.depends_on(file, parts.attrs.get("depends_on").copied());
        if let Some(a) = parts.attrs.get("lifecycle") {
            let sp = self.span(file, &a.key);
            self.err(
                sp,
                "Unsupported argument",
                "The lifecycle meta-argument is a block: lifecycle { ... }.",
            );
        }
        let mut lifecycle = Lifecycle::shared_default();
        let mut seen_lifecycle: Option<Span> = None;
        for lb in parts
            .blocks
            .iter()
            .filter(|b| b.ident.as_str() == "lifecycle")
        {
            let sp = self.header(file, lb);
            if let Some(prev) = seen_lifecycle {
                let was = self.range_str(prev);
                self.err(
                    sp,
                    "Duplicate lifecycle block",
                    format!("This resource already has a lifecycle block at {was}."),
                );
                continue;
            }
            seen_lifecycle = Some(sp);
            lifecycle = std::sync::Arc::new(self.lifecycle(file, lb, mode));
        }
        // Provisioners: `local-exec` runs; the others need a connection to the object
        // (SSH, WinRM), which Cairn does not make: plan and apply refuse them through
        // `unsupported_blocks`. A `connection` serves only those, so it is read past.
        let mut provisioners = Vec::new();
        for b in block.body.iter().filter_map(|s| s.as_block()) {
            if b.ident.as_str() == "provisioner" {
                if let Some(p) = self.provisioner(file, b, mode, m) {
                    provisioners.push(p);
                }
            }
        }
        // The body without the meta-arguments, moved; it keeps the body's span.
        let mut body = block.body;
        for meta in META {
            body.remove_attribute(meta);
        }
        body.remove_blocks("lifecycle");
        body.remove_blocks("provisioner");
        body.remove_blocks("connection");
        let key = ResourceKey {
            mode,
            type_: type_.clone(),
            name: name.clone(),
        };
        // One search of the map: insert, or find the earlier declaration.
        let prev_span = match m.resources.entry(key) {
            std::collections::btree_map::Entry::Vacant(v) => {
                v.insert(Box::new(Resource {
                    mode,
                    type_,
                    name,
                    count,
                    for_each,
                    provider: provider.map(Box::new),
                    depends_on,
                    lifecycle,
                    body,
                    file,
                    json: self.sources.is_json(file),
                    span,
                    generated: false,
                    check: None,
                    provisioners,
                }));
                return;
            }
            std::collections::btree_map::Entry::Occupied(e) => e.get().span,
        };
        {
            let was = self.range_str(prev_span);
            let (word, noun) = match mode {
                Mode::Managed => ("resource", "resource"),
                Mode::Data => ("data", "data resource"),
                Mode::Ephemeral => ("ephemeral", "ephemeral resource"),
            };
            self.err(
                span,
                &format!("Duplicate {word} {} configuration", quote(&type_)),
                format!(
                    "A {type_} {noun} named {} was already declared at {was}. Resource names \
                     must be unique per type in each module.",
                    quote(&name)
                ),
            );
        }
    }

    /// Condition blocks (`validation`, `precondition`, `postcondition`): each with its
    /// required `condition` and `error_message`.
    pub(in crate::config) fn conditions<'b>(
        &mut self,
        file: FileId,
        blocks: impl Iterator<Item = &'b Block>,
    ) -> Vec<Validation> {
        let mut out = Vec::new();
        for vb in blocks {
            if self.labels(file, vb, &[]).is_none() {
                continue;
            }
            let vp = self.parts(
                file,
                &vb.body,
                Some(&["condition", "error_message"]),
                Some(&[]),
            );
            let cond = self.required(file, vb, &vp, "condition");
            let msg = self.required(file, vb, &vp, "error_message");
            if let (Some(c), Some(msg)) = (cond, msg) {
                out.push(Validation {
                    condition: c.value.clone(),
                    error_message: msg.value.clone(),
                    span: self.span(file, &c.value),
                });
            }
        }
        out
    }

    /// A `lifecycle` block; a data source's may hold only its conditions.
    pub(in crate::config) fn lifecycle(
        &mut self,
        file: FileId,
        b: &Block,
        mode: Mode,
    ) -> Lifecycle {
        let mut l = Lifecycle::default();
        if self.labels(file, b, &[]).is_none() {
            return l;
        }
        let managed: &[&str] = &[
            "create_before_destroy",
            "prevent_destroy",
            "ignore_changes",
            "replace_triggered_by",
        ];
        if mode != Mode::Managed {
            // A data source's (or ephemeral resource's) lifecycle holds only its conditions.
            let (noun, nouns) = match mode {
                Mode::Ephemeral => ("ephemeral resource", "ephemeral resources"),
                _ => ("data resource", "data resources"),
            };
            for s in b.body.iter() {
                let Some(a) = s.as_attribute() else { continue };
                let name = a.key.as_str();
                let sp = self.span(file, &a.key);
                if managed.contains(&name) {
                    self.err(
                        sp,
                        &format!("Invalid {noun} lifecycle argument"),
                        format!(
                            "The lifecycle argument {} is defined only for managed resources \
                             (\"resource\" blocks), and is not valid for {nouns}.",
                            quote(name)
                        ),
                    );
                } else {
                    self.err(
                        sp,
                        "Unsupported argument",
                        format!("An argument named {} is not expected here.", quote(name)),
                    );
                }
            }
        }
        let parts = self.parts(
            file,
            &b.body,
            (mode == Mode::Managed).then_some(managed),
            Some(&["precondition", "postcondition"]),
        );
        let of_kind = |kind: &'static str| {
            parts
                .blocks
                .iter()
                .copied()
                .filter(move |b| b.ident.as_str() == kind)
        };
        l.preconditions = self.conditions(file, of_kind("precondition"));
        l.postconditions = self.conditions(file, of_kind("postcondition"));
        if mode != Mode::Managed {
            return l;
        }
        l.create_before_destroy = self.const_bool(
            file,
            parts.attrs.get("create_before_destroy").copied(),
            false,
        );
        l.prevent_destroy =
            self.const_bool(file, parts.attrs.get("prevent_destroy").copied(), false);
        if let Some(a) = parts.attrs.get("ignore_changes") {
            l.ignore_changes = self.ignore_changes(file, &a.value);
        }
        if let Some(a) = parts.attrs.get("replace_triggered_by") {
            match &a.value {
                Expression::Array(items) => {
                    for e in items.iter() {
                        match traversal_subject(e) {
                            Ok((
                                Subject::Resource {
                                    mode: Mode::Managed,
                                    ..
                                },
                                _,
                            )) => l.replace_triggered_by.push(e.clone()),
                            Ok(_) | Err(_) => {
                                let sp = self.span(file, e);
                                self.err(
                                    sp,
                                    "Invalid replace_triggered_by expression",
                                    "Only references to managed resources, their instances \
                                     and attributes are allowed in replace_triggered_by.",
                                );
                            }
                        }
                    }
                }
                other => {
                    let sp = self.span(file, other);
                    self.err(
                        sp,
                        "Invalid replace_triggered_by expression",
                        "The replace_triggered_by argument must be a list of references.",
                    );
                }
            }
        }
        l
    }

    fn ignore_changes(&mut self, file: FileId, e: &Expression) -> IgnoreChanges {
        if let Expression::Variable(v) = e {
            if v.as_str() == "all" {
                return IgnoreChanges::All;
            }
        }
        if e.as_str() == Some("all") {
            return IgnoreChanges::All;
        }
        let Expression::Array(items) = e else {
            let sp = self.span(file, e);
            self.err(
                sp,
                "Invalid ignore_changes",
                "The ignore_changes argument must be \"all\" or a list of attribute references.",
            );
            return IgnoreChanges::None;
        };
        let mut paths = Vec::new();
        for item in items.iter() {
            match static_path(item) {
                Some(p) => paths.push(p),
                None => {
                    let sp = self.span(file, item);
                    self.err(
                        sp,
                        "Invalid expression",
                        "A single static variable reference is required: only attribute access \
                         and indexing with constant keys. No calculations, function calls, \
                         template expressions, etc are allowed here.",
                    );
                }
            }
        }
        IgnoreChanges::Paths(paths)
    }

    /// A `provisioner "TYPE"` block: `local-exec` with its `when` and `on_failure` keywords
    /// read; another type is kept in `state_blocks` (plan and apply refuse it).
    pub(in crate::config) fn provisioner(
        &mut self,
        file: FileId,
        b: &Block,
        mode: Mode,
        m: &mut Module,
    ) -> Option<Provisioner> {
        let kind = self.labels(file, b, &["type"])?.remove(0);
        let span = self.header(file, b);
        if mode != Mode::Managed {
            self.err(
                span,
                "Unsupported block type",
                "Blocks of type \"provisioner\" are not expected here: only managed resources \
                 have provisioners.",
            );
            return None;
        }
        if kind != "local-exec" {
            m.state_blocks
                .push((format!("provisioner \"{kind}\""), span));
            return None;
        }
        let mut keyword = |name: &str, allowed: [&str; 2]| -> Option<bool> {
            let a = b.body.get_attribute(name)?;
            let word = match &a.value {
                Expression::Variable(v) => Some(v.as_str().to_string()),
                Expression::String(s) => Some(s.as_str().to_string()),
                _ => None,
            };
            match word {
                Some(w) if allowed.contains(&w.as_str()) => Some(w == allowed[1]),
                _ => {
                    let sp = self.span(file, &a.value);
                    self.err(
                        sp,
                        &format!("Invalid \"{name}\" keyword"),
                        format!(
                            "The \"{name}\" argument requires one of the following keywords: \
                             {}, {}.",
                            allowed[0], allowed[1]
                        ),
                    );
                    None
                }
            }
        };
        let when_destroy = keyword("when", ["create", "destroy"]).unwrap_or(false);
        let on_failure_continue = keyword("on_failure", ["fail", "continue"]).unwrap_or(false);
        let mut body = b.body.clone();
        body.remove_attribute("when");
        body.remove_attribute("on_failure");
        body.remove_blocks("connection");
        if when_destroy {
            // Only the object itself exists for sure when it is destroyed.
            for r in crate::eval::body_references(&body) {
                use crate::eval::Subject;
                if !matches!(
                    r.subject,
                    Subject::SelfRef | Subject::CountIndex | Subject::EachKey
                ) {
                    let sp = Span {
                        file,
                        start: r.start,
                        end: r.end,
                    };
                    self.err(
                        sp,
                        "Invalid reference from destroy provisioner",
                        "Destroy-time provisioners and their connection configurations may only \
                         reference attributes of the related resource, via 'self', \
                         'count.index', or 'each.key'.\n\nReferences to other resources during \
                         the destroy phase can cause dependency cycles and interact poorly with \
                         create_before_destroy.",
                    );
                }
            }
        }
        Some(Provisioner {
            kind,
            when_destroy,
            on_failure_continue,
            body,
            file,
            span,
        })
    }

    /// A `check` block: its scoped data sources join the module's resources (marked with the
    /// check's name), its `assert`s are kept as conditions.
    pub(in crate::config) fn check_block(&mut self, file: FileId, block: Block, m: &mut Module) {
        let Some(labels) = self.labels(file, &block, &["name"]) else {
            return;
        };
        let name = labels[0].clone();
        let span = self.header(file, &block);
        let parts = self.parts(file, &block.body, Some(&[]), Some(&["data", "assert"]));
        let asserts = self.conditions(
            file,
            parts
                .blocks
                .iter()
                .copied()
                .filter(|b| b.ident.as_str() == "assert"),
        );
        let has_assert = parts.blocks.iter().any(|b| b.ident.as_str() == "assert");
        let data: Vec<Block> = parts
            .blocks
            .iter()
            .filter(|b| b.ident.as_str() == "data")
            .map(|b| (*b).clone())
            .collect();
        if !has_assert {
            self.err(
                span,
                "Missing required block",
                "A check block must contain at least one assert block.",
            );
        }
        if let Some(prev) = m.checks.get(&name) {
            let was = self.range_str(prev.span);
            self.err(
                span,
                "Duplicate check block",
                format!(
                    "A check block named {} was already defined at {was}. Check blocks must \
                     be unique within a module.",
                    quote(&name)
                ),
            );
            return;
        }
        for d in data {
            let header = self.header(file, &d);
            let key = d
                .labels
                .iter()
                .map(|l| l.as_str().to_string())
                .collect::<Vec<_>>();
            self.resource_block(file, d, m, Mode::Data);
            if let [type_, rname] = key.as_slice() {
                let key = ResourceKey {
                    mode: Mode::Data,
                    type_: type_.clone(),
                    name: rname.clone(),
                };
                if let Some(r) = m.resources.get_mut(&key).filter(|r| r.span == header) {
                    r.check = Some(name.clone());
                }
            }
        }
        m.checks.insert(
            name.clone(),
            Check {
                name,
                asserts,
                file,
                span,
            },
        );
    }
}
