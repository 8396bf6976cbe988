//! A module's interface: `variable`, `locals` and `output` blocks, and `module` calls.

use crate::config::load::{Loader, Pending};
use crate::config::*;
use crate::diag::FileId;
use crate::eval::expr::convert;
use crate::eval::type_constraints::{const_value, parse_variable_type};
use cairn_state::quote;
use hcl_edit::expr::{Expression, ObjectKey};
use hcl_edit::structure::Block;

const RESERVED_VARIABLE_NAMES: &[&str] = &[
    "source",
    "version",
    "providers",
    "count",
    "for_each",
    "lifecycle",
    "depends_on",
    "locals",
];

impl Loader {
    pub(in crate::config) fn variable_block(&mut self, file: FileId, b: &Block, m: &mut Module) {
        let Some(labels) = self.labels(file, b, &["name"]) else {
            return;
        };
        let name = labels[0].clone();
        let span = self.header(file, b);
        if RESERVED_VARIABLE_NAMES.contains(&name.as_str()) {
            let sp = self.span(file, &b.labels[0]);
            self.err(
                sp,
                "Invalid variable name",
                format!(
                    "The variable name {} is reserved due to its special meaning inside module \
                     blocks.",
                    quote(&name)
                ),
            );
            return;
        }
        let parts = self.parts(
            file,
            &b.body,
            Some(&[
                "type",
                "default",
                "description",
                "sensitive",
                "nullable",
                "ephemeral",
            ]),
            Some(&["validation"]),
        );
        let ty = match parts.attrs.get("type") {
            None => Type::Dynamic,
            Some(a) => match parse_variable_type(&a.value, file) {
                Ok(t) => t,
                Err(d) => {
                    self.diags.push(d);
                    Type::Dynamic
                }
            },
        };
        let nullable = self.const_bool(file, parts.attrs.get("nullable").copied(), true);
        let sensitive = self.const_bool(file, parts.attrs.get("sensitive").copied(), false);
        let ephemeral = self.const_bool(file, parts.attrs.get("ephemeral").copied(), false);
        // A description is checked to be a string and otherwise unused.
        if let Some(a) = parts.attrs.get("description") {
            self.const_string(file, a);
        }
        let mut default = None;
        if let Some(a) = parts.attrs.get("default") {
            match const_value(&a.value, file) {
                Err(d) => self.diags.push(d),
                Ok(v) => match convert(&v, &ty) {
                    Ok(v) if v.is_null() && !nullable => {
                        let sp = self.span(file, &a.value);
                        self.err(
                            sp,
                            "Invalid default value for variable",
                            "A null default value is not valid when nullable=false.",
                        );
                    }
                    Ok(v) => default = Some(v),
                    Err(msg) => {
                        let sp = self.span(file, &a.value);
                        self.err(
                            sp,
                            "Invalid default value for variable",
                            format!(
                                "This default value is not compatible with the variable's type \
                                 constraint: {msg}."
                            ),
                        );
                    }
                },
            }
        }
        let validations = self.conditions(file, parts.blocks.iter().copied());
        if let Some(prev) = m.variables.get(&name) {
            let was = self.range_str(prev.span);
            self.err(
                span,
                "Duplicate variable declaration",
                format!(
                    "A variable named {} was already declared at {was}. Variable names must be \
                     unique within a module.",
                    quote(&name)
                ),
            );
            return;
        }
        m.variables.insert(
            name.clone(),
            Variable {
                name,
                ty,
                default,
                sensitive,
                ephemeral,
                nullable,
                validations,
                file,
                span,
            },
        );
    }

    pub(in crate::config) fn locals_block(&mut self, file: FileId, b: &Block, m: &mut Module) {
        if self.labels(file, b, &[]).is_none() {
            return;
        }
        let parts = self.parts(file, &b.body, None, Some(&[]));
        for (name, a) in parts.attrs {
            let span = self.span(file, a);
            if let Some(prev) = m.locals.get(&name) {
                let was = self.range_str(prev.span);
                self.err(
                    span,
                    "Duplicate local value definition",
                    format!(
                        "A local value named {} was already defined at {was}. Local value names \
                         must be unique within a module.",
                        quote(&name)
                    ),
                );
                continue;
            }
            m.locals.insert(
                name.clone(),
                Local {
                    expr: a.value.clone(),
                    file,
                    span,
                },
            );
        }
    }

    pub(in crate::config) fn output_block(&mut self, file: FileId, b: &Block, m: &mut Module) {
        let Some(labels) = self.labels(file, b, &["name"]) else {
            return;
        };
        let name = labels[0].clone();
        let span = self.header(file, b);
        let parts = self.parts(
            file,
            &b.body,
            Some(&[
                "value",
                "description",
                "sensitive",
                "depends_on",
                "ephemeral",
            ]),
            Some(&["precondition"]),
        );
        let preconditions = self.conditions(file, parts.blocks.iter().copied());
        let value = self
            .required(file, b, &parts, "value")
            .map(|a| a.value.clone());
        let sensitive = self.const_bool(file, parts.attrs.get("sensitive").copied(), false);
        let ephemeral = self.const_bool(file, parts.attrs.get("ephemeral").copied(), false);
        // A description is checked to be a string and otherwise unused.
        if let Some(a) = parts.attrs.get("description") {
            self.const_string(file, a);
        }
        let depends_on = self.depends_on(file, parts.attrs.get("depends_on").copied());
        if let Some(prev) = m.outputs.get(&name) {
            let was = self.range_str(prev.span);
            self.err(
                span,
                "Duplicate output definition",
                format!(
                    "An output named {} was already defined at {was}. Output names must be \
                     unique within a module.",
                    quote(&name)
                ),
            );
            return;
        }
        let Some(value) = value else {
            return;
        };
        m.outputs.insert(
            name.clone(),
            Output {
                value,
                sensitive,
                ephemeral,
                depends_on,
                preconditions,
                file,
                span,
            },
        );
    }

    pub(in crate::config) fn module_block(&mut self, file: FileId, b: &Block, m: &mut Module) {
        let Some(labels) = self.labels(file, b, &["name"]) else {
            return;
        };
        let name = labels[0].clone();
        let span = self.header(file, b);
        let parts = self.parts(file, &b.body, None, Some(&[]));
        let source_attr = self.required(file, b, &parts, "source");
        // A source that refers to variables or locals is evaluated early, once the module's
        // files are all decoded (`Loader::pending`).
        let mut pending = Vec::new();
        let source = source_attr.and_then(|a| match is_early(&a.value) {
            true => {
                pending.push(Pending::Source {
                    call: name.clone(),
                    expr: a.value.clone(),
                    file,
                });
                Some(String::new())
            }
            false => self.const_string(file, a),
        });
        let source_span = source_attr
            .map(|a| self.span(file, &a.value))
            .unwrap_or(span);
        let count = parts.attrs.get("count").map(|a| a.value.clone());
        let for_each = parts.attrs.get("for_each").map(|a| a.value.clone());
        if let (Some(_), Some(fe)) = (&count, parts.attrs.get("for_each")) {
            let sp = self.span(file, &fe.key);
            self.err(
                sp,
                "Invalid combination of \"count\" and \"for_each\"",
                "The \"count\" and \"for_each\" meta-arguments are mutually-exclusive, only one \
                 should be used to be explicit about the number of resources to be created.",
            );
        }
        let depends_on = self.depends_on(file, parts.attrs.get("depends_on").copied());
        let mut providers = Vec::new();
        if let Some(a) = parts.attrs.get("providers") {
            match &a.value {
                Expression::Object(o) => {
                    for (k, v) in o.iter() {
                        let child = match k {
                            ObjectKey::Ident(i) => Some(ProviderRef {
                                name: i.as_str().to_string(),
                                alias: None,
                                key: None,
                                span: self.span(file, i),
                            }),
                            ObjectKey::Expression(e) => self.provider_ref(file, e),
                        };
                        let child = match child {
                            Some(c) if c.key.is_some() => {
                                self.err(
                                    c.span,
                                    "Invalid providers argument",
                                    "A key of the providers map names a provider configuration \
                                     of the child module (sim or sim.NAME), never an instance: \
                                     the instance key belongs on the right, as in \
                                     { sim = sim.by_region[each.key] }.",
                                );
                                None
                            }
                            c => c,
                        };
                        let parent = self.provider_ref(file, v.expr());
                        if let (Some(child), Some(parent)) = (child, parent) {
                            providers.push(ProviderPass { child, parent });
                        }
                    }
                }
                other => {
                    let sp = self.span(file, other);
                    self.err(
                        sp,
                        "Invalid providers argument",
                        "The providers argument must be a map from provider names in the child \
                         module to provider configurations here, like { sim = sim.east }.",
                    );
                }
            }
        }
        const META: &[&str] = &[
            "source",
            "version",
            "count",
            "for_each",
            "depends_on",
            "providers",
        ];
        let inputs = parts
            .attrs
            .iter()
            .filter(|(k, _)| !META.contains(&k.as_str()))
            .map(|(k, a)| (k.clone(), (a.value.clone(), span_in(file, *a))))
            .collect();
        if let Some(prev) = m.calls.get(&name) {
            let was = self.range_str(prev.span);
            self.err(
                span,
                "Duplicate module call",
                format!(
                    "A module call named {} was already defined at {was}. Module calls must have \
                     unique names within a module.",
                    quote(&name)
                ),
            );
            return;
        }
        let Some(source) = source else {
            return;
        };
        let version = parts
            .attrs
            .get("version")
            .and_then(|a| match is_early(&a.value) {
                true => {
                    pending.push(Pending::Version {
                        call: name.clone(),
                        expr: a.value.clone(),
                        file,
                    });
                    None
                }
                false => self.const_string(file, a),
            });
        let version_span = parts.attrs.get("version").map(|a| self.span(file, &a.key));
        let call = ModuleCall {
            name: name.clone(),
            source,
            source_span,
            version,
            version_span,
            count,
            for_each,
            providers,
            depends_on,
            inputs,
            file,
            span,
        };
        self.check_local_version(&call);
        m.calls.insert(name, call);
        self.pending.extend(pending);
    }

    /// A version constraint on a module with a local source is an error (local modules have
    /// no versions).
    pub(in crate::config) fn check_local_version(&mut self, call: &ModuleCall) {
        let s = call.source.as_str();
        let local = s.starts_with("./") || s.starts_with("../") || s == "." || s == "..";
        if let (true, Some(_), Some(sp)) = (local, &call.version, call.version_span) {
            self.err(
                sp,
                "Invalid registry module source address",
                format!(
                    "Cannot apply a version constraint to module {} because it has a local \
                     source: local modules have no versions.",
                    quote(&call.name)
                ),
            );
        }
    }
}

/// Whether an argument that must be known at load time is not a constant (it has references
/// to variables, locals, …, or a value known only during the run): then it is evaluated
/// early (`config::early`), which says what it may use.
pub(in crate::config) fn is_early(e: &Expression) -> bool {
    !crate::eval::references(e).is_empty()
        || !matches!(const_value(e, FileId(0)), Ok(v) if v.is_wholly_known())
}
