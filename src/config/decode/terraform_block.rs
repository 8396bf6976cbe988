//! `terraform` blocks (required providers, backend) and `provider` blocks.

use super::module::is_early;
use super::valid_name;
use crate::config::load::{Early, Loader, Pending};
use crate::config::*;
use crate::diag::{FileId, Span};
use crate::eval::type_constraints::const_value;
use cairn_state::quote;
use hcl_edit::expr::{Expression, ObjectKey, TraversalOperator};
use hcl_edit::structure::Block;
use std::collections::BTreeMap;

/// The backends Cairn keeps state in (`local`: the state directory).
const SUPPORTED_BACKENDS: &[&str] = &["local", "pg", "s3"];

impl Loader {
    pub(in crate::config) fn terraform_block(&mut self, file: FileId, b: &Block, m: &mut Module) {
        if self.labels(file, b, &[]).is_none() {
            return;
        }
        let parts = self.parts(
            file,
            &b.body,
            Some(&["required_version", "experiments"]),
            Some(&[
                "required_providers",
                "backend",
                "cloud",
                "provider_meta",
                "encryption",
            ]),
        );
        for inner in parts.blocks {
            match inner.ident.as_str() {
                "required_providers" => self.required_providers(file, inner, m),
                "backend"
                    if inner
                        .labels
                        .first()
                        .is_some_and(|l| SUPPORTED_BACKENDS.contains(&l.as_str())) =>
                {
                    self.backend_block(file, inner, m)
                }
                kind @ ("backend" | "cloud") => self.unsupported_backend(file, inner, kind, m),
                "encryption" => self.encryption_block(file, inner, m),
                _ => {}
            }
        }
    }

    /// A `backend` Cairn has no store for (`gcs`, `azurerm`, `remote`, …) or a `cloud` block:
    /// an error in the root module, since running on as if there were none would start an
    /// empty local state and the next apply would create every object a second time; in a
    /// child module the block is ignored with a warning, as Terraform does.
    fn unsupported_backend(&mut self, file: FileId, b: &Block, kind: &str, m: &Module) {
        let sp = self.header(file, b);
        if !m.path.is_root() {
            self.warn(
                sp,
                "Backend configuration ignored",
                "Any selected backend applies to the entire configuration, so Cairn expects \
                 backend configurations only in the root module. This block has no effect.",
            );
            return;
        }
        let name = match (kind, b.labels.first()) {
            ("backend", Some(label)) => format!("backend {}", quote(label.as_str())),
            ("backend", None) => "backend".to_string(),
            _ => "HCP Terraform (cloud block)".to_string(),
        };
        self.err(
            sp,
            &format!("Unsupported {name}"),
            format!(
                "Cairn keeps state locally or in the backends \"pg\" and \"s3\"; it cannot read \
                 or write state in the {name}, and it will not start an empty state in its \
                 place (the next apply would create every object a second time). To bring the \
                 state over: run `terraform state pull > x.tfstate` where this block is \
                 configured, replace the block with one of Cairn's backends (or remove it for \
                 a local state), run `cairn init`, then `cairn state import-tfstate x.tfstate`."
            ),
        );
    }

    /// `encryption { … }`: kept as written for the engine, which evaluates it early; in a
    /// child module ignored with a warning (encryption is the whole configuration's, as
    /// OpenTofu has it).
    fn encryption_block(&mut self, file: FileId, b: &Block, m: &mut Module) {
        if self.labels(file, b, &[]).is_none() {
            return;
        }
        let span = self.header(file, b);
        if !m.path.is_root() {
            self.warn(
                span,
                "Encryption configuration ignored",
                "State and plan encryption applies to the entire configuration, so it is read \
                 only from the root module. This block has no effect.",
            );
            return;
        }
        if let Some(prev) = &m.encryption {
            let was = self.range_str(prev.span);
            self.err(
                span,
                "Duplicate encryption configuration",
                format!("An encryption block was already given at {was}. A configuration may have only one."),
            );
            return;
        }
        m.encryption = Some(crate::config::EncryptionBlock {
            file,
            body: b.body.clone(),
            span,
        });
    }

    /// `backend "pg" { conn_str = "…" schema_name = "…" … }` (or `backend "local" {}`):
    /// constant arguments only, checked against the backend's argument list.
    fn backend_block(&mut self, file: FileId, b: &Block, m: &mut Module) {
        let Some(labels) = self.labels(file, b, &["type"]) else {
            return;
        };
        let kind = labels[0].clone();
        let allowed: Vec<&str> = match kind.as_str() {
            "pg" => cairn_state::backend_config::PG_ARGUMENTS
                .iter()
                .map(|(k, _)| *k)
                .collect(),
            // `dynamodb_table` reaches the backend, which says why Cairn does without it.
            "s3" => cairn_state::backend_config::S3_ARGUMENTS
                .iter()
                .copied()
                .filter(|k| !k.contains('.'))
                .chain(
                    cairn_state::backend_config::S3_OBJECT_ARGUMENTS
                        .iter()
                        .copied(),
                )
                .chain(["dynamodb_table"])
                .collect(),
            _ => Vec::new(),
        };
        let blocks: &[&str] = if kind == "s3" { &["endpoints"] } else { &[] };
        let parts = self.parts(file, &b.body, Some(allowed.as_slice()), Some(blocks));
        let mut args = BTreeMap::new();
        let mut pending = Vec::new();
        for (name, a) in parts.attrs {
            let list = name.starts_with("shared_") && name.ends_with("_files");
            let object = kind == "s3"
                && cairn_state::backend_config::S3_OBJECT_ARGUMENTS.contains(&name.as_str());
            if is_early(&a.value) {
                pending.push(Pending::Backend {
                    arg: name,
                    list,
                    object,
                    expr: a.value.clone(),
                    file,
                });
            } else if object {
                // `assume_role = { role_arn = "…" }`, `endpoints = { s3 = "…" }`: kept as JSON,
                // which the backend takes apart and checks.
                match const_value(&a.value, file) {
                    Ok(v @ (crate::value::Value::Object(_) | crate::value::Value::Map(_))) => {
                        args.insert(name, v.to_json().to_string());
                    }
                    Ok(_) => {
                        let sp = self.span(file, &a.value);
                        self.err(
                            sp,
                            "Incorrect attribute value type",
                            format!("Inappropriate value for attribute {name:?}: an object is required."),
                        );
                    }
                    Err(d) => self.diags.push(d),
                }
            } else if list {
                // A list of paths, kept as JSON for the backend.
                let ty = crate::value::Type::List(Box::new(crate::value::Type::String));
                if let Some(v) = self.const_of(file, a, &ty) {
                    let paths: Vec<&str> = v
                        .elements()
                        .unwrap_or_default()
                        .iter()
                        .filter_map(|e| e.as_str())
                        .collect();
                    args.insert(name, serde_json::to_string(&paths).unwrap_or_default());
                }
            } else if let Some(v) = self.const_string(file, a) {
                args.insert(name, v);
            }
        }
        for inner in parts.blocks {
            // `endpoints { s3 = "…" }`: the S3 endpoint (other services' are not used).
            let ep = self.parts(
                file,
                &inner.body,
                Some(&["s3", "sts", "iam", "sso", "dynamodb"]),
                Some(&[]),
            );
            for (service, a) in &ep.attrs {
                let arg = format!("endpoints.{service}");
                if is_early(&a.value) {
                    pending.push(Pending::Backend {
                        arg,
                        list: false,
                        object: false,
                        expr: a.value.clone(),
                        file,
                    });
                } else if let Some(v) = self.const_string(file, a) {
                    args.insert(arg, v);
                }
            }
        }
        let span = self.header(file, b);
        if let Some(prev) = &m.backend {
            let was = self.range_str(prev.span);
            self.err(
                span,
                "Duplicate backend configuration",
                format!("A backend was already configured at {was}. A module may have only one."),
            );
            return;
        }
        m.backend = Some(crate::config::BackendBlock { kind, args, span });
        self.pending.extend(pending);
    }

    pub(in crate::config) fn required_providers(
        &mut self,
        file: FileId,
        b: &Block,
        m: &mut Module,
    ) {
        if self.labels(file, b, &[]).is_none() {
            return;
        }
        let parts = self.parts(file, &b.body, None, Some(&[]));
        for (name, a) in parts.attrs {
            let span = self.span(file, a);
            if let Some(prev) = m.required_providers.get(&name) {
                let was = self.range_str(prev.span);
                self.err(
                    span,
                    "Duplicate required provider",
                    format!(
                        "Provider {name} was already required at {was}. Each provider may be \
                         required only once."
                    ),
                );
                continue;
            }
            let (mut source, mut version) = (Early::Absent, Early::Absent);
            let (mut source_span, mut version_span) = (span, span);
            match &a.value {
                Expression::Object(o) => {
                    for (k, v) in o.iter() {
                        let key = match k {
                            ObjectKey::Ident(i) => i.as_str().to_string(),
                            ObjectKey::Expression(Expression::String(s)) => s.value().clone(),
                            ObjectKey::Expression(e) => {
                                let sp = self.span(file, e);
                                self.err(
                                    sp,
                                    "Invalid required_providers object",
                                    "Keys must be attribute names.",
                                );
                                continue;
                            }
                        };
                        if key == "configuration_aliases" {
                            // References to provider configurations, not a string: what a
                            // module call's `providers` passes is checked there.
                            continue;
                        }
                        let text = match const_value(v.expr(), file)
                            .map(|v| v.as_str().map(str::to_string))
                        {
                            // Variables and locals: evaluated early (`Loader::pending`).
                            _ if is_early(v.expr()) => Early::Expr(v.expr().clone()),
                            Ok(Some(t)) => Early::Const(t),
                            Ok(None) => {
                                let sp = self.span(file, v.expr());
                                self.err(
                                    sp,
                                    "Invalid required_providers object",
                                    format!("The {key} must be a string."),
                                );
                                Early::Absent
                            }
                            Err(d) => {
                                self.diags.push(d);
                                Early::Absent
                            }
                        };
                        let value_span = self.span(file, v.expr());
                        match key.as_str() {
                            "source" => {
                                source = text;
                                source_span = value_span;
                            }
                            "version" => {
                                version = text;
                                version_span = value_span;
                            }
                            _ => {
                                let sp = self.span(file, v.expr());
                                self.err(
                                    sp,
                                    "Invalid required_providers object",
                                    "required_providers objects can only contain \"version\", \
                                     \"source\" and \"configuration_aliases\" attributes.",
                                );
                            }
                        }
                    }
                }
                other => match const_value(other, file) {
                    Ok(v) if v.as_str().is_some() => {
                        version = Early::Const(v.as_str().unwrap_or_default().to_string());
                        version_span = self.span(file, other);
                    }
                    _ => {
                        let sp = self.span(file, other);
                        self.err(
                            sp,
                            "Invalid required_providers object",
                            "required_providers entries must be objects with \"source\" and \
                             \"version\" attributes.",
                        );
                        continue;
                    }
                },
            }
            let early = |e: &Early| matches!(e, Early::Expr(_));
            if early(&source) || early(&version) {
                self.pending.push(Pending::Provider {
                    name,
                    source,
                    version,
                    source_span,
                    version_span,
                    span,
                    file,
                });
                continue;
            }
            let text = |e: Early| match e {
                Early::Const(s) => Some(s),
                _ => None,
            };
            self.insert_required_provider(
                m,
                name,
                (text(source), source_span),
                (text(version), version_span),
                span,
            );
        }
    }

    /// A `required_providers` entry with its source and version known (constants, or
    /// evaluated early): parsed and recorded.
    pub(in crate::config) fn insert_required_provider(
        &mut self,
        m: &mut Module,
        name: String,
        (source, source_span): (Option<String>, Span),
        (version, version_span): (Option<String>, Span),
        span: Span,
    ) {
        {
            let addr = match &source {
                None => crate::addr::provider_source::SourceAddr::implied(&name),
                Some(s) => match crate::addr::provider_source::SourceAddr::parse(s) {
                    Ok(a) => a,
                    Err(detail) => {
                        self.err(source_span, "Invalid provider source address", detail);
                        crate::addr::provider_source::SourceAddr::implied(&name)
                    }
                },
            };
            let constraints = match version.as_deref() {
                None => Default::default(),
                Some(v) => crate::addr::version::Constraints::parse(v).unwrap_or_else(|detail| {
                    self.err(version_span, "Invalid version constraint", detail);
                    Default::default()
                }),
            };
            m.required_providers.insert(
                name.clone(),
                RequiredProvider {
                    name,
                    source,
                    version,
                    addr,
                    constraints,
                    span,
                },
            );
        }
    }

    pub(in crate::config) fn provider_block(&mut self, file: FileId, b: Block, m: &mut Module) {
        let (alias, span, name) = match self.provider_header(file, &b, m) {
            Some(x) => x,
            None => return,
        };
        // The body without `alias` and `for_each`, moved (it keeps the body's span: its
        // braces).
        let mut body = b.body;
        body.remove_attribute("alias");
        let for_each = body.remove_attribute("for_each").map(|a| a.value);
        if let (Some(fe), None) = (&for_each, &alias) {
            let sp = self.span(file, fe);
            self.err(
                sp,
                "Invalid provider configuration",
                format!(
                    "A provider configuration with for_each must have an alias: a default \
                     configuration is one instance. Add alias = \"NAME\" to provider {} and \
                     choose an instance with provider = {}.NAME[each.key].",
                    quote(&name),
                    name
                ),
            );
            return;
        }
        m.providers.push(ProviderBlock {
            name,
            alias,
            for_each,
            each: None,
            body,
            file,
            json: self.sources.is_json(file),
            span,
        });
    }

    /// Checks a provider block; its alias, header span and name when it is fine.
    fn provider_header(
        &mut self,
        file: FileId,
        b: &Block,
        m: &Module,
    ) -> Option<(Option<String>, Span, String)> {
        let labels = self.labels(file, b, &["name"])?;
        let name = labels[0].clone();
        let span = self.header(file, b);
        let parts = self.parts(file, &b.body, None, None);
        let mut alias = None;
        if let Some(a) = parts.attrs.get("alias") {
            match self.const_string(file, a) {
                Some(s) if valid_name(&s) => alias = Some(s),
                Some(_) => {
                    let sp = self.span(file, &a.value);
                    self.err(
                        sp,
                        "Invalid provider configuration alias",
                        "An alias must be a valid name. A name must start with a letter or \
                         underscore and may contain only letters, digits, underscores, and dashes.",
                    );
                    return None;
                }
                None => return None,
            }
        }
        if let Some(prev) = m.provider(&name, alias.as_deref()) {
            let was = self.range_str(prev.span);
            let detail = match &alias {
                None => format!(
                    "A default (non-aliased) provider configuration for {} was already given at \
                     {was}. If multiple configurations are required, set the \"alias\" argument \
                     for alternative configurations.",
                    quote(&name)
                ),
                Some(a) => format!(
                    "A provider configuration for {} with alias {} was already given at {was}. \
                     Each configuration for the same provider must have a distinct alias.",
                    quote(&name),
                    quote(a)
                ),
            };
            self.err(span, "Duplicate provider configuration", detail);
            return None;
        }
        Some((alias, span, name))
    }

    /// `provider = sim` or `provider = sim.east`.
    pub(in crate::config) fn provider_ref(
        &mut self,
        file: FileId,
        e: &Expression,
    ) -> Option<ProviderRef> {
        let span = self.span(file, e);
        let r = match e {
            Expression::Variable(v) => Some((v.as_str().to_string(), None, None)),
            Expression::Traversal(t) => match (&t.expr, t.operators.as_slice()) {
                (Expression::Variable(v), [op]) => match op.value() {
                    TraversalOperator::GetAttr(a) => {
                        Some((v.as_str().to_string(), Some(a.as_str().to_string()), None))
                    }
                    _ => None,
                },
                // `sim.by_region[each.key]`: an instance of a block with `for_each`.
                (Expression::Variable(v), [op, idx]) => match (op.value(), idx.value()) {
                    (TraversalOperator::GetAttr(a), TraversalOperator::Index(k)) => Some((
                        v.as_str().to_string(),
                        Some(a.as_str().to_string()),
                        Some(k.clone()),
                    )),
                    _ => None,
                },
                _ => None,
            },
            _ => None,
        };
        match r {
            Some((name, alias, key)) => Some(ProviderRef {
                name,
                alias,
                key,
                span,
            }),
            None => {
                self.err(
                    span,
                    "Invalid provider reference",
                    "A provider reference is a provider name followed by an optional alias, \
                     like \"sim.east\", without quotes.",
                );
                None
            }
        }
    }
}
