//! Terraform Stacks' configuration language (`cairn stack validate`): the component
//! configuration (`*.tfcomponent.hcl`: `component`, `required_providers`, two-label
//! `provider "TYPE" "NAME"` blocks with a `config` block, `variable`, `output`, `locals`,
//! `removed`) and the deployment configuration (`*.tfdeploy.hcl`: `deployment`,
//! `deployment_group`, `deployment_auto_approve`, `locals`, `publish_output`, `upstream_input`,
//! `store`) of one directory, decoded with the same parser as `.tf` files and checked as
//! HashiCorp's reference describes them: arguments and blocks, labels, duplicates, references
//! to what each file may name, and the components' dependency order (no cycles).
//!
//! Where Cairn differs from HCP Terraform: `store` reads local sources (`store "file"`, a JSON
//! object in a file; `store "env"`, the process environment) instead of HCP variable sets,
//! `upstream_input` names another stack by its directory, and `identity_token` is refused
//! (there is no HCP to issue the token).

use super::parse::parse_file;
use super::span_in;
use crate::diag::{Diagnostic, Diagnostics, FileId, SourceMap, Span};
use crate::eval::expr::convert;
use crate::eval::type_constraints::{const_value, parse_variable_type};
use crate::eval::{suggest, Scope as EvalScope, ScopeError, Subject};
use crate::value::ValueMap;
use crate::value::{Type, Value};
use cairn_state::addr::module_source;
use cairn_state::addr::provider_source::SourceAddr;
use cairn_state::addr::version::Constraints;
use cairn_state::quote;
use hcl_edit::expr::{Expression, ForExpr, ObjectKey, Traversal, TraversalOperator};
use hcl_edit::structure::{Attribute, Block, Body, Structure};
use hcl_edit::visit::{self, Visit};
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The suffix of a component configuration file.
pub(crate) const COMPONENT_SUFFIX: &str = ".tfcomponent.hcl";
/// The suffix of a deployment configuration file.
pub(crate) const DEPLOY_SUFFIX: &str = ".tfdeploy.hcl";

/// What a stack's directory declares, as far as the checks need it.
pub(crate) struct StackConfig {
    pub(crate) sources: SourceMap,
    /// Component name → the components it depends on, in dependency order's terms.
    pub(crate) components: BTreeMap<String, BTreeSet<String>>,
    pub(crate) deployments: Vec<String>,
    /// What running the stack needs (`engine::stack`): the blocks with their expressions,
    /// and each deployment's evaluated inputs.
    pub(crate) model: StackModel,
}

/// The runnable form of a stack: every block the engine evaluates, with its expressions
/// kept (spans into `StackConfig::sources`).
#[derive(Default)]
pub(crate) struct StackModel {
    pub(crate) dir: PathBuf,
    pub(crate) components: BTreeMap<String, ComponentDef>,
    pub(crate) removed: Vec<RemovedDef>,
    /// (type, name) → the provider configuration block.
    pub(crate) providers: BTreeMap<(String, String), ProviderDef>,
    /// `required_providers`: provider type → (source address, version constraints, where).
    pub(crate) required_providers: BTreeMap<String, (SourceAddr, Constraints, Span)>,
    /// The component configuration's locals: name → (file, expression).
    pub(crate) locals: BTreeMap<String, (FileId, Expression)>,
    pub(crate) outputs: BTreeMap<String, OutputDef>,
    /// name → (type, default, sensitive).
    pub(crate) variables: BTreeMap<String, (Type, Option<Value>, bool)>,
    /// Deployment name → its definition.
    pub(crate) deployments: BTreeMap<String, DeploymentDef>,
    /// `upstream_input` name → the upstream stack's directory.
    pub(crate) upstreams: BTreeMap<String, PathBuf>,
    /// The deployment configuration's `locals`, evaluated (unknown where they cannot be).
    pub(crate) deploy_locals: BTreeMap<String, Value>,
    /// `publish_output` name → its `value` (over `deployment.NAME.OUTPUT`, locals, literals).
    pub(crate) publish: BTreeMap<String, (FileId, Expression)>,
    /// `deployment_group` name → the `deployment_auto_approve` rules it checks.
    pub(crate) groups: BTreeMap<String, Vec<String>>,
    /// `deployment_auto_approve` name → its checks: (file, condition, reason).
    pub(crate) auto_approves: BTreeMap<String, Vec<(FileId, Expression, Expression)>>,
}

/// A `component` block.
pub(crate) struct ComponentDef {
    pub(crate) file: FileId,
    pub(crate) span: Span,
    pub(crate) source: String,
    pub(crate) version: Option<String>,
    pub(crate) for_each: Option<Expression>,
    pub(crate) inputs: Option<Expression>,
    pub(crate) providers: Option<Expression>,
    /// The components it depends on: `depends_on`, references in its arguments, and those
    /// the provider configurations it references depend on.
    pub(crate) depends_on: BTreeSet<String>,
}

/// A `removed` block: the component `name`'s instances (those `from` names) are destroyed.
pub(crate) struct RemovedDef {
    pub(crate) name: String,
    pub(crate) source: String,
    pub(crate) version: Option<String>,
}

/// A `provider "TYPE" "NAME"` block.
pub(crate) struct ProviderDef {
    pub(crate) file: FileId,
    pub(crate) for_each: Option<Expression>,
    pub(crate) config: Option<Body>,
    /// The components its `for_each` and `config` refer to.
    pub(crate) depends_on: BTreeSet<String>,
}

/// An `output` block of the component configuration.
pub(crate) struct OutputDef {
    pub(crate) file: FileId,
    pub(crate) value: Expression,
    pub(crate) ty: Option<Type>,
    pub(crate) sensitive: bool,
}

/// A `deployment` block: its inputs evaluated and converted to the variables' types.
#[derive(Clone, Default)]
pub(crate) struct DeploymentDef {
    pub(crate) inputs: ValueMap,
    /// `destroy = true`: the deployment's components are destroyed.
    pub(crate) destroy: bool,
    /// Its `deployment_group` (none: its own default group, whose only rule is
    /// `empty_plan`).
    pub(crate) group: Option<String>,
}

/// One reference found in an expression: its root (`component`), its steps' names up to the
/// first non-name step (`["vpc", "id"]`), and where it is.
struct Ref {
    root: String,
    names: Vec<String>,
    span: Span,
}

/// Collects the references of an expression, leaving out names a `for` binds.
struct Refs {
    file: FileId,
    bound: Vec<String>,
    out: Vec<Ref>,
}

impl Visit for Refs {
    fn visit_traversal(&mut self, node: &Traversal) {
        if let Expression::Variable(v) = &node.expr {
            let mut names = Vec::new();
            for op in &node.operators {
                match op.value() {
                    TraversalOperator::GetAttr(id) => names.push(id.as_str().to_string()),
                    _ => break,
                }
            }
            self.root_ref(v.as_str(), names, span_in(self.file, node));
        } else {
            self.visit_expr(&node.expr);
        }
        for op in &node.operators {
            if let TraversalOperator::Index(e) = op.value() {
                self.visit_expr(e);
            }
        }
    }

    fn visit_expr(&mut self, node: &Expression) {
        if let Expression::Variable(v) = node {
            self.root_ref(v.as_str(), Vec::new(), span_in(self.file, node));
        } else {
            visit::visit_expr(self, node);
        }
    }

    fn visit_object_item(&mut self, key: &ObjectKey, value: &hcl_edit::expr::ObjectValue) {
        // A bare identifier key is a name, not a reference.
        if let ObjectKey::Expression(e) = key {
            self.visit_expr(e);
        }
        self.visit_expr(value.expr());
    }

    fn visit_for_expr(&mut self, node: &ForExpr) {
        self.visit_expr(&node.intro.collection_expr);
        let before = self.bound.len();
        if let Some(k) = &node.intro.key_var {
            self.bound.push(k.as_str().to_string());
        }
        self.bound.push(node.intro.value_var.as_str().to_string());
        if let Some(k) = &node.key_expr {
            self.visit_expr(k);
        }
        self.visit_expr(&node.value_expr);
        if let Some(c) = &node.cond {
            self.visit_expr(&c.expr);
        }
        self.bound.truncate(before);
    }
}

impl Refs {
    fn root_ref(&mut self, root: &str, names: Vec<String>, span: Span) {
        if self.bound.iter().any(|b| b == root) {
            return;
        }
        self.out.push(Ref {
            root: root.to_string(),
            names,
            span,
        });
    }
}

fn refs_of(file: FileId, e: &Expression) -> Vec<Ref> {
    let mut r = Refs {
        file,
        bound: Vec::new(),
        out: Vec::new(),
    };
    r.visit_expr(e);
    r.out
}

/// The components an expression refers to (`component.NAME…`), each once, in order.
pub(crate) fn component_refs(e: &Expression) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for r in refs_of(FileId(0), e) {
        if let (true, Some(n)) = (r.root == "component", r.names.first()) {
            if !out.contains(n) {
                out.push(n.clone());
            }
        }
    }
    out
}

/// The provider configurations a component's `providers` argument passes, by type: each
/// (the module's local name, the stack's provider type, where) for an entry written
/// `provider.TYPE.NAME[…]`, or `each.value` of a `for_each` over one.
pub(crate) fn passed_provider_types(c: &ComponentDef) -> Vec<(String, String, Span)> {
    let Some(Expression::Object(o)) = &c.providers else {
        return Vec::new();
    };
    let each_type = c.for_each.as_ref().and_then(|e| {
        refs_of(c.file, e)
            .into_iter()
            .find(|r| r.root == "provider")
            .and_then(|r| r.names.first().cloned())
    });
    let mut out = Vec::new();
    for (k, v) in o.iter() {
        let local = match k {
            ObjectKey::Ident(id) => id.as_str().to_string(),
            ObjectKey::Expression(Expression::String(s)) => s.value().to_string(),
            _ => continue,
        };
        for r in refs_of(c.file, v.expr()) {
            let ty = match r.root.as_str() {
                "provider" => r.names.first().cloned(),
                "each" => each_type.clone(),
                _ => None,
            };
            if let Some(ty) = ty {
                out.push((local.clone(), ty, r.span));
                break;
            }
        }
    }
    out
}

fn body_refs(file: FileId, b: &Body) -> Vec<Ref> {
    let mut r = Refs {
        file,
        bound: Vec::new(),
        out: Vec::new(),
    };
    r.visit_body(b);
    r.out
}

/// Which of the two configurations an expression is in: each names different things.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Scope {
    Component,
    Deploy,
}

/// What the component configuration declares (names and where), for reference checks.
#[derive(Default)]
struct Declared {
    /// name → (where, whether it has a default).
    variables: BTreeMap<String, (Span, bool)>,
    /// name → its type (when it reads) and default (when constant), for the deployments'
    /// inputs.
    variable_types: BTreeMap<String, (Type, Option<Value>)>,
    /// Deployment locals: name → (file, expression).
    deploy_local_exprs: BTreeMap<String, (FileId, Expression)>,
    /// `store "file"` name → path (relative to the stack's directory).
    store_files: BTreeMap<String, String>,
    locals: BTreeMap<String, Span>,
    deploy_locals: BTreeMap<String, Span>,
    components: BTreeMap<String, Span>,
    providers: BTreeMap<(String, String), Span>,
    required_providers: BTreeMap<String, Span>,
    outputs: BTreeMap<String, Span>,
    deployments: BTreeMap<String, Span>,
    groups: BTreeMap<String, Span>,
    auto_approves: BTreeMap<String, Span>,
    stores: BTreeMap<(String, String), Span>,
    upstreams: BTreeMap<String, Span>,
    publish: BTreeMap<String, Span>,
}

/// An expression kept for the checks after every block is declared.
struct Pending {
    refs: Vec<Ref>,
    scope: Scope,
    /// `each` may be used (the block has `for_each`).
    each: bool,
    /// The component whose argument this is (its dependencies are collected).
    component: Option<String>,
}

/// A deployment's name, where it is, and the keys its `inputs` object sets (when `inputs` is
/// written as an object; `None` when it is computed).
type DeploymentInputs = (String, Span, Option<Vec<(String, Span)>>);

struct Decoder {
    sources: SourceMap,
    diags: Diagnostics,
    declared: Declared,
    pending: Vec<Pending>,
    /// component → `depends_on` entries (name, span).
    depends_on: BTreeMap<String, Vec<(String, Span)>>,
    /// `deployment_group` and `auto_approve_checks` references to check.
    group_refs: Vec<(String, String, Span)>,
    /// `deployment` → the keys its `inputs` object sets (when it is written as an object).
    deployment_inputs: Vec<DeploymentInputs>,
    /// `deployment` name → its `inputs` expression and file, evaluated by `eval_deployments`.
    deployment_exprs: Vec<(String, FileId, Expression)>,
    removed: Vec<(String, Span)>,
    dir: PathBuf,
    model: StackModel,
}

/// Every `*.tfcomponent.hcl` and `*.tfdeploy.hcl` file of `dir`, sorted by name.
fn stack_files(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            let n = p.file_name().map(|n| n.to_string_lossy().to_string());
            p.is_file()
                && n.is_some_and(|n| n.ends_with(COMPONENT_SUFFIX) || n.ends_with(DEPLOY_SUFFIX))
        })
        .collect();
    files.sort();
    Ok(files)
}

/// Loads and checks the stack configuration of `dir`. The configuration comes back with
/// whatever could be decoded, even when there are errors, so every error is reported.
///
/// `env` is the process environment (what `store "env"` reads).
pub(crate) fn load_stack(dir: &Path, env: &BTreeMap<String, String>) -> (StackConfig, Diagnostics) {
    load_stack_with(dir, env, &ValueMap::new())
}

/// [`load_stack`], with the values the upstream stacks publish (`upstream_input.NAME`: an
/// object of the upstream stack's `publish_output`s); an upstream input not given is
/// unknown.
pub(crate) fn load_stack_with(
    dir: &Path,
    env: &BTreeMap<String, String>,
    upstream: &ValueMap,
) -> (StackConfig, Diagnostics) {
    let mut d = Decoder {
        sources: SourceMap::new(),
        diags: Diagnostics::new(),
        declared: Declared::default(),
        pending: Vec::new(),
        depends_on: BTreeMap::new(),
        group_refs: Vec::new(),
        deployment_inputs: Vec::new(),
        deployment_exprs: Vec::new(),
        removed: Vec::new(),
        dir: dir.to_path_buf(),
        model: StackModel {
            dir: dir.to_path_buf(),
            ..StackModel::default()
        },
    };
    let files = match stack_files(dir) {
        Ok(f) => f,
        Err(e) => {
            d.diags.push(Diagnostic::error(
                "Failed to read stack directory",
                format!("Cannot read {}: {e}.", dir.display()),
            ));
            Vec::new()
        }
    };
    let mut have_components = false;
    for path in &files {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().to_string())
            .unwrap_or_default();
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) => {
                d.diags.push(Diagnostic::error(
                    "Failed to read file",
                    format!("The file {} could not be read: {e}.", quote(&name)),
                ));
                continue;
            }
        };
        let scope = if name.ends_with(COMPONENT_SUFFIX) {
            have_components = true;
            Scope::Component
        } else {
            Scope::Deploy
        };
        let (bodies, errors) = parse_file(&text);
        let file = d.sources.add(&name, text);
        for (start, end, summary, detail) in errors {
            d.diags
                .push(Diagnostic::error(summary, detail).with_span(Some(Span {
                    file,
                    start,
                    end,
                })));
        }
        for body in bodies {
            for s in body.iter() {
                match s {
                    Structure::Attribute(a) => d.err(
                        file,
                        &a.key,
                        "Unsupported argument",
                        format!(
                            "An argument named {} is not expected here.",
                            quote(a.key.as_str())
                        ),
                    ),
                    Structure::Block(b) => match scope {
                        Scope::Component => d.component_file_block(file, b),
                        Scope::Deploy => d.deploy_file_block(file, b),
                    },
                }
            }
        }
    }
    if !have_components && !d.diags.has_errors() {
        d.diags.push(Diagnostic::error(
            "No component configuration files",
            format!(
                "The directory {} contains no {COMPONENT_SUFFIX} files: a stack's components \
                 are declared in files named NAME{COMPONENT_SUFFIX}, its deployments in \
                 NAME{DEPLOY_SUFFIX}.",
                dir.display()
            ),
        ));
    }
    let have_deploy_files = files
        .iter()
        .any(|p| p.to_string_lossy().ends_with(DEPLOY_SUFFIX));
    if have_deploy_files && d.declared.deployments.is_empty() && !d.diags.has_errors() {
        d.diags.push(Diagnostic::error(
            "No deployment blocks",
            "The stack's deployment configuration declares no deployment: each stack needs at \
             least one deployment block, which sets its variables.",
        ));
    }
    d.check_references();
    let components = d.component_order();
    d.check_deployments();
    if !d.diags.has_errors() {
        d.eval_deployments(env, upstream);
    }
    let deployments = d.declared.deployments.keys().cloned().collect();
    let mut model = std::mem::take(&mut d.model);
    // A component also waits for the components its provider configurations refer to.
    for c in model.components.values_mut() {
        let mut deps = BTreeSet::new();
        for e in [&c.inputs, &c.providers, &c.for_each].into_iter().flatten() {
            for r in refs_of(FileId(0), e) {
                if r.root == "provider" && r.names.len() >= 2 {
                    if let Some(p) = model
                        .providers
                        .get(&(r.names[0].clone(), r.names[1].clone()))
                    {
                        deps.extend(p.depends_on.iter().cloned());
                    }
                }
            }
        }
        c.depends_on.extend(deps);
    }
    for (name, deps) in &components {
        if let Some(c) = model.components.get_mut(name) {
            c.depends_on.extend(deps.iter().cloned());
        }
    }
    (
        StackConfig {
            sources: d.sources,
            components,
            deployments,
            model,
        },
        d.diags,
    )
}

/// A block's allowed contents: arguments, nested block types.
struct Shape<'a> {
    attrs: &'a [&'a str],
    blocks: &'a [&'a str],
}

impl Decoder {
    fn err(&mut self, file: FileId, at: &impl hcl_edit::Span, summary: &str, detail: String) {
        let sp = span_in(file, at);
        self.err_at(sp, summary, detail);
    }

    fn err_at(&mut self, sp: Span, summary: &str, detail: String) {
        self.diags
            .push(Diagnostic::error(summary, detail).with_span(Some(sp)));
    }

    /// The block's labels when it has exactly `names.len()` valid ones.
    fn labels(&mut self, file: FileId, b: &Block, names: &[&str]) -> Option<Vec<String>> {
        let kind = b.ident.as_str().to_string();
        let n = names.len();
        if b.labels.len() != n {
            let (summary, detail) = if b.labels.len() < n {
                (
                    format!("Missing name for {kind}"),
                    format!(
                        "All {kind} blocks must have {n} labels ({}).",
                        names.join(", ")
                    ),
                )
            } else if n == 0 {
                (
                    format!("Extraneous label for {kind}"),
                    format!("No labels are expected for {kind} blocks."),
                )
            } else {
                (
                    format!("Extraneous label for {kind}"),
                    format!(
                        "Only {n} labels ({}) are expected for {kind} blocks.",
                        names.join(", ")
                    ),
                )
            };
            let at = b
                .labels
                .get(n)
                .map_or(span_in(file, &b.ident), |l| span_in(file, l));
            self.err_at(at, &summary, detail);
            return None;
        }
        let mut ok = true;
        for l in &b.labels {
            if !super::decode::valid_name(l.as_str()) {
                self.err(
                    file,
                    l,
                    &format!("Invalid {kind} name"),
                    "A name must start with a letter or underscore and may contain only \
                     letters, digits, underscores, and dashes."
                        .into(),
                );
                ok = false;
            }
        }
        ok.then(|| b.labels.iter().map(|l| l.as_str().to_string()).collect())
    }

    /// The block's arguments by name and its nested blocks, reporting what `shape` does not
    /// allow and arguments set twice.
    fn parts<'b>(
        &mut self,
        file: FileId,
        b: &'b Block,
        shape: Shape,
    ) -> (BTreeMap<String, &'b Attribute>, Vec<&'b Block>) {
        let mut attrs: BTreeMap<String, &Attribute> = BTreeMap::new();
        let mut blocks = Vec::new();
        for s in b.body.iter() {
            match s {
                Structure::Attribute(a) => {
                    let name = a.key.as_str();
                    if !shape.attrs.contains(&name) {
                        self.err(
                            file,
                            &a.key,
                            "Unsupported argument",
                            format!(
                                "An argument named {} is not expected here.{}",
                                quote(name),
                                suggest::suffix(name, shape.attrs.iter().copied())
                            ),
                        );
                    } else if let Some(prev) = attrs.get(name) {
                        let was = range_str(&self.sources, span_in(file, &prev.key));
                        self.err(
                            file,
                            &a.key,
                            "Attribute redefined",
                            format!(
                                "The argument {} was already set at {was}. Each argument may \
                                 be set only once.",
                                quote(name)
                            ),
                        );
                    } else {
                        attrs.insert(name.to_string(), a);
                    }
                }
                Structure::Block(nb) => {
                    let name = nb.ident.as_str();
                    if shape.blocks.contains(&name) {
                        blocks.push(nb);
                    } else {
                        self.err(
                            file,
                            &nb.ident,
                            "Unsupported block type",
                            format!(
                                "Blocks of type {} are not expected here.{}",
                                quote(name),
                                suggest::suffix(name, shape.blocks.iter().copied())
                            ),
                        );
                    }
                }
            }
        }
        (attrs, blocks)
    }

    fn required<'b>(
        &mut self,
        file: FileId,
        b: &Block,
        attrs: &BTreeMap<String, &'b Attribute>,
        name: &str,
    ) -> Option<&'b Attribute> {
        let a = attrs.get(name).copied();
        if a.is_none() {
            self.err(
                file,
                &b.ident,
                "Missing required argument",
                format!(
                    "The argument {} is required, but no definition was found.",
                    quote(name)
                ),
            );
        }
        a
    }

    /// A constant string argument.
    fn const_string(&mut self, file: FileId, a: &Attribute) -> Option<String> {
        match const_value(&a.value, file) {
            Ok(v) => match v.as_str() {
                Some(s) => Some(s.to_string()),
                None => {
                    self.err(
                        file,
                        &a.value,
                        "Invalid value",
                        format!(
                            "The argument {} must be a string constant.",
                            quote(a.key.as_str())
                        ),
                    );
                    None
                }
            },
            Err(d) => {
                self.diags.push(d);
                None
            }
        }
    }

    fn const_bool(&mut self, file: FileId, a: Option<&&Attribute>) -> bool {
        let Some(a) = a else { return false };
        match const_value(&a.value, file) {
            Ok(v) => match v.as_bool() {
                Some(b) => b,
                None => {
                    self.err(
                        file,
                        &a.value,
                        "Invalid value",
                        format!(
                            "The argument {} must be true or false.",
                            quote(a.key.as_str())
                        ),
                    );
                    false
                }
            },
            Err(d) => {
                self.diags.push(d);
                false
            }
        }
    }

    /// Records `name` in `map`, or reports it declared twice.
    fn declare<K: Ord + Clone>(
        &mut self,
        map: fn(&mut Declared) -> &mut BTreeMap<K, Span>,
        key: K,
        shown: &str,
        kind: &str,
        sp: Span,
    ) -> bool {
        if let Some(prev) = map(&mut self.declared).get(&key).copied() {
            let was = range_str(&self.sources, prev);
            self.err_at(
                sp,
                &format!("Duplicate {kind} declaration"),
                format!(
                    "A {kind} named {} was already declared at {was}.",
                    quote(shown)
                ),
            );
            return false;
        }
        map(&mut self.declared).insert(key, sp);
        true
    }

    fn keep(&mut self, file: FileId, e: &Expression, scope: Scope, each: bool, c: Option<&str>) {
        self.pending.push(Pending {
            refs: refs_of(file, e),
            scope,
            each,
            component: c.map(str::to_string),
        });
    }

    /// A `required_providers` entry's source address and version constraints, checked and
    /// kept for `stack init` (which installs the provider) and the components' runs.
    fn requirement(&mut self, file: FileId, a: &Attribute, name: &str, v: &Value) {
        let source = v.get("source").and_then(|s| s.as_str()).unwrap_or_default();
        let addr = match SourceAddr::parse(source) {
            Ok(addr) => addr,
            Err(e) => {
                self.err(file, &a.value, "Invalid provider source address", e);
                return;
            }
        };
        let constraints = match v.get("version") {
            None => Constraints::default(),
            Some(ver) if ver.is_null() => Constraints::default(),
            Some(ver) => match ver.as_str().map(Constraints::parse) {
                Some(Ok(c)) => c,
                Some(Err(e)) => {
                    self.err(file, &a.value, "Invalid version constraint", e);
                    return;
                }
                None => {
                    self.err(
                        file,
                        &a.value,
                        "Invalid version constraint",
                        "A provider's version must be a string of constraints (\"~> 1.2\").".into(),
                    );
                    return;
                }
            },
        };
        self.model
            .required_providers
            .insert(name.to_string(), (addr, constraints, span_in(file, &a.key)));
    }

    /// What an expression evaluated at run time (an auto-approve check, a published value)
    /// may not name: stores and upstream inputs, which only the deployment file's locals and
    /// deployments' inputs read.
    fn run_time_refs(&mut self, file: FileId, e: &Expression, what: &str) {
        for r in refs_of(file, e) {
            if matches!(r.root.as_str(), "store" | "upstream_input") {
                self.err_at(
                    r.span,
                    "Invalid reference",
                    format!(
                        "{what} may not refer to {} directly: it sees the deployment \
                         configuration's locals (a local may read it) and deployment.NAME.",
                        r.root
                    ),
                );
            }
        }
    }

    fn component_file_block(&mut self, file: FileId, b: &Block) {
        let header = span_in(file, &b.ident);
        match b.ident.as_str() {
            "component" => self.component(file, b),
            "required_providers" => {
                if self.labels(file, b, &[]).is_none() {
                    return;
                }
                for s in b.body.iter() {
                    let Structure::Attribute(a) = s else {
                        if let Structure::Block(nb) = s {
                            self.err(
                                file,
                                &nb.ident,
                                "Unsupported block type",
                                "Blocks are not allowed in a required_providers block.".into(),
                            );
                        }
                        continue;
                    };
                    let name = a.key.as_str().to_string();
                    match const_value(&a.value, file) {
                        Ok(v) if v.get("source").is_some_and(|s| s.as_str().is_some()) => {
                            self.requirement(file, a, &name, &v);
                        }
                        Ok(_) => self.err(
                            file,
                            &a.value,
                            "Invalid required_providers object",
                            "required_providers objects must have a \"source\" string \
                             attribute and may have a \"version\" constraint."
                                .into(),
                        ),
                        Err(d) => self.diags.push(d),
                    }
                    let sp = span_in(file, &a.key);
                    self.declare(
                        |d| &mut d.required_providers,
                        name.clone(),
                        &name,
                        "provider requirement",
                        sp,
                    );
                }
            }
            "provider" => {
                let Some(l) = self.labels(file, b, &["type", "name"]) else {
                    return;
                };
                let (attrs, blocks) = self.parts(
                    file,
                    b,
                    Shape {
                        attrs: &["for_each"],
                        blocks: &["config"],
                    },
                );
                if blocks.len() > 1 {
                    self.err(
                        file,
                        &blocks[1].ident,
                        "Duplicate config block",
                        "A provider block may have at most one config block.".into(),
                    );
                }
                let each = attrs.contains_key("for_each");
                if let Some(a) = attrs.get("for_each") {
                    self.keep(file, &a.value, Scope::Component, false, None);
                }
                for c in &blocks {
                    self.pending.push(Pending {
                        refs: body_refs(file, &c.body),
                        scope: Scope::Component,
                        each,
                        component: None,
                    });
                }
                let shown = format!("{}.{}", l[0], l[1]);
                if self.declare(
                    |d| &mut d.providers,
                    (l[0].clone(), l[1].clone()),
                    &shown,
                    "provider configuration",
                    header,
                ) {
                    let for_each = attrs.get("for_each").map(|a| a.value.clone());
                    let config = blocks.first().map(|c| c.body.clone());
                    let mut refs: Vec<Ref> = for_each
                        .as_ref()
                        .map(|e| refs_of(file, e))
                        .unwrap_or_default();
                    if let Some(b) = &config {
                        refs.extend(body_refs(file, b));
                    }
                    let depends_on = refs
                        .into_iter()
                        .filter(|r| r.root == "component")
                        .filter_map(|r| r.names.first().cloned())
                        .collect();
                    self.model.providers.insert(
                        (l[0].clone(), l[1].clone()),
                        ProviderDef {
                            file,
                            for_each,
                            config,
                            depends_on,
                        },
                    );
                }
            }
            "variable" => {
                let Some(l) = self.labels(file, b, &["name"]) else {
                    return;
                };
                let (attrs, _) = self.parts(
                    file,
                    b,
                    Shape {
                        attrs: &[
                            "type",
                            "default",
                            "description",
                            "sensitive",
                            "nullable",
                            "ephemeral",
                        ],
                        blocks: &[],
                    },
                );
                let mut ty = None;
                if let Some(t) = self.required(file, b, &attrs, "type") {
                    match parse_variable_type(&t.value, file) {
                        Ok(t) => ty = Some(t),
                        Err(d) => self.diags.push(d),
                    }
                }
                let mut default = None;
                if let Some(a) = attrs.get("default") {
                    match const_value(&a.value, file) {
                        Ok(v) => default = Some(v),
                        Err(d) => self.diags.push(d),
                    }
                }
                if let Some(ty) = &ty {
                    self.declared
                        .variable_types
                        .entry(l[0].clone())
                        .or_insert((ty.clone(), default.clone()));
                }
                let sensitive = self.const_bool(file, attrs.get("sensitive"));
                for n in ["nullable", "ephemeral"] {
                    self.const_bool(file, attrs.get(n));
                }
                if let Some(ty) = &ty {
                    self.model.variables.entry(l[0].clone()).or_insert((
                        ty.clone(),
                        default.clone(),
                        sensitive,
                    ));
                }
                if let Some(a) = attrs.get("description") {
                    self.const_string(file, a);
                }
                let has_default = attrs.contains_key("default");
                if let Some(prev) = self.declared.variables.get(&l[0]).map(|v| v.0) {
                    let was = range_str(&self.sources, prev);
                    self.err_at(
                        header,
                        "Duplicate variable declaration",
                        format!(
                            "A variable named {} was already declared at {was}.",
                            quote(&l[0])
                        ),
                    );
                } else {
                    self.declared
                        .variables
                        .insert(l[0].clone(), (header, has_default));
                }
            }
            "output" => {
                let Some(l) = self.labels(file, b, &["name"]) else {
                    return;
                };
                let (attrs, _) = self.parts(
                    file,
                    b,
                    Shape {
                        attrs: &["type", "value", "description", "sensitive", "ephemeral"],
                        blocks: &[],
                    },
                );
                let mut ty = None;
                if let Some(t) = self.required(file, b, &attrs, "type") {
                    match parse_variable_type(&t.value, file) {
                        Ok(t) => ty = Some(t),
                        Err(d) => self.diags.push(d),
                    }
                }
                let value = self
                    .required(file, b, &attrs, "value")
                    .map(|v| v.value.clone());
                if let Some(v) = &value {
                    self.keep(file, v, Scope::Component, false, None);
                }
                let sensitive = self.const_bool(file, attrs.get("sensitive"));
                self.const_bool(file, attrs.get("ephemeral"));
                if self.declare(|d| &mut d.outputs, l[0].clone(), &l[0], "output", header) {
                    if let Some(value) = value {
                        self.model.outputs.insert(
                            l[0].clone(),
                            OutputDef {
                                file,
                                value,
                                ty,
                                sensitive,
                            },
                        );
                    }
                }
            }
            "locals" => self.locals(file, b, Scope::Component),
            "removed" => {
                if self.labels(file, b, &[]).is_none() {
                    return;
                }
                let (attrs, _) = self.parts(
                    file,
                    b,
                    Shape {
                        attrs: &["from", "source", "version", "providers", "for_each"],
                        blocks: &[],
                    },
                );
                let each = attrs.contains_key("for_each");
                let mut def = None;
                if let Some(f) = self.required(file, b, &attrs, "from") {
                    match removed_from(&f.value) {
                        Some(name) => {
                            self.removed.push((name.clone(), span_in(file, &f.value)));
                            def = Some(name);
                        }
                        None => self.err(
                            file,
                            &f.value,
                            "Invalid removed block",
                            "The \"from\" argument must be a reference to a component: \
                             component.NAME or component.NAME[KEY]."
                                .into(),
                        ),
                    }
                }
                let mut source = None;
                if let Some(s) = self.required(file, b, &attrs, "source") {
                    self.source(file, s, attrs.get("version").copied());
                    source = const_value(&s.value, file)
                        .ok()
                        .and_then(|v| v.as_str().map(str::to_string));
                }
                if let (Some(name), Some(source)) = (def, source) {
                    let version = attrs
                        .get("version")
                        .and_then(|v| const_value(&v.value, file).ok())
                        .and_then(|v| v.as_str().map(str::to_string));
                    self.model.removed.push(RemovedDef {
                        name,
                        source,
                        version,
                    });
                }
                for n in ["providers", "for_each"] {
                    if let Some(a) = attrs.get(n) {
                        self.keep(
                            file,
                            &a.value,
                            Scope::Component,
                            each && n != "for_each",
                            None,
                        );
                    }
                }
            }
            "identity_token"
            | "deployment"
            | "store"
            | "deployment_group"
            | "deployment_auto_approve"
            | "publish_output"
            | "upstream_input" => self.err_at(
                header,
                "Unsupported block type",
                format!(
                    "Blocks of type {} belong in a deployment configuration file \
                     (NAME{DEPLOY_SUFFIX}), not in a component configuration file.",
                    quote(b.ident.as_str())
                ),
            ),
            other => self.err_at(
                header,
                "Unsupported block type",
                format!(
                    "Blocks of type {} are not expected here.{}",
                    quote(other),
                    suggest::suffix(
                        other,
                        [
                            "component",
                            "required_providers",
                            "provider",
                            "variable",
                            "output",
                            "locals",
                            "removed"
                        ]
                    )
                ),
            ),
        }
    }

    fn locals(&mut self, file: FileId, b: &Block, scope: Scope) {
        if self.labels(file, b, &[]).is_none() {
            return;
        }
        for s in b.body.iter() {
            match s {
                Structure::Attribute(a) => {
                    let name = a.key.as_str().to_string();
                    let sp = span_in(file, &a.key);
                    let map: fn(&mut Declared) -> &mut BTreeMap<String, Span> = match scope {
                        Scope::Component => |d| &mut d.locals,
                        Scope::Deploy => |d| &mut d.deploy_locals,
                    };
                    if self.declare(map, name.clone(), &name, "local value", sp) {
                        match scope {
                            Scope::Deploy => self
                                .declared
                                .deploy_local_exprs
                                .insert(name.clone(), (file, a.value.clone())),
                            Scope::Component => self
                                .model
                                .locals
                                .insert(name.clone(), (file, a.value.clone())),
                        };
                    }
                    self.keep(file, &a.value, scope, false, None);
                }
                Structure::Block(nb) => self.err(
                    file,
                    &nb.ident,
                    "Unsupported block type",
                    "Blocks are not allowed in a locals block.".into(),
                ),
            }
        }
    }

    /// A `source` (and `version`) of a component or removed block: a local path, a registry
    /// address or a go-getter address, as for a module call.
    fn source(&mut self, file: FileId, s: &Attribute, version: Option<&Attribute>) {
        let Some(src) = self.const_string(file, s) else {
            return;
        };
        let registry = if module_source::is_local(&src) {
            false
        } else {
            match module_source::parse_source(&src) {
                Ok(r) => matches!(r, module_source::Remote::Registry { .. }),
                Err(m) => {
                    self.err(file, &s.value, "Invalid module source address", m);
                    return;
                }
            }
        };
        if let Some(v) = version {
            if !registry {
                self.err(
                    file,
                    &v.key,
                    "Invalid version constraint",
                    "A version constraint is allowed only for a component whose source is a \
                     module registry address."
                        .into(),
                );
            } else if let Some(text) = self.const_string(file, v) {
                if let Err(m) = cairn_state::addr::version::Constraints::parse(&text) {
                    self.err(file, &v.value, "Invalid version constraint", m);
                }
            }
        }
    }

    /// A `store "file"`'s file: it must hold a JSON object (its keys are the store's). What
    /// it holds is never shown: only where it is and why it cannot be read.
    fn store_file(&mut self, file: FileId, p: &Attribute, path: &str) {
        let full = self.dir.join(path);
        let problem = match std::fs::read_to_string(&full) {
            Err(e) => Some(format!("it cannot be read: {e}")),
            Ok(text) => match serde_json::from_str::<serde_json::Value>(&text) {
                Ok(serde_json::Value::Object(_)) => None,
                Ok(_) => Some("it does not hold a JSON object".to_string()),
                Err(e) => Some(format!(
                    "it is not JSON (line {}, column {})",
                    e.line(),
                    e.column()
                )),
            },
        };
        if let Some(why) = problem {
            self.err(
                file,
                &p.value,
                "Invalid store file",
                format!(
                    "A store \"file\" reads a JSON object of secrets from {} (relative to the \
                     stack's directory), but {why}.",
                    quote(path)
                ),
            );
        }
    }

    fn component(&mut self, file: FileId, b: &Block) {
        let Some(l) = self.labels(file, b, &["name"]) else {
            return;
        };
        let name = l[0].clone();
        let header = span_in(file, &b.ident);
        let (attrs, _) = self.parts(
            file,
            b,
            Shape {
                attrs: &[
                    "source",
                    "version",
                    "inputs",
                    "providers",
                    "for_each",
                    "depends_on",
                ],
                blocks: &[],
            },
        );
        if let Some(s) = self.required(file, b, &attrs, "source") {
            self.source(file, s, attrs.get("version").copied());
        }
        let each = attrs.contains_key("for_each");
        for n in ["inputs", "providers", "for_each"] {
            if let Some(a) = attrs.get(n) {
                self.keep(
                    file,
                    &a.value,
                    Scope::Component,
                    each && n != "for_each",
                    Some(&name),
                );
            }
        }
        if let Some(a) = attrs.get("providers") {
            if !matches!(a.value, Expression::Object(_)) {
                self.err(
                    file,
                    &a.value,
                    "Invalid providers argument",
                    "The providers argument must be an object whose attributes name the \
                     module's providers, each set to a provider configuration: \
                     { sim = provider.sim.main }."
                        .into(),
                );
            }
        }
        let mut deps = Vec::new();
        if let Some(a) = attrs.get("depends_on") {
            match &a.value {
                Expression::Array(items) => {
                    for it in items.iter() {
                        let rs = refs_of(file, it);
                        match rs.as_slice() {
                            [r] if r.root == "component" && !r.names.is_empty() => {
                                deps.push((r.names[0].clone(), r.span))
                            }
                            _ => self.err(
                                file,
                                it,
                                "Invalid depends_on reference",
                                "Each element of depends_on must be a reference to a \
                                 component: component.NAME."
                                    .into(),
                            ),
                        }
                    }
                }
                _ => self.err(
                    file,
                    &a.value,
                    "Invalid depends_on",
                    "The depends_on argument must be a list of component references.".into(),
                ),
            }
        }
        if self.declare(
            |d| &mut d.components,
            name.clone(),
            &name,
            "component",
            header,
        ) {
            let source = attrs
                .get("source")
                .and_then(|s| const_value(&s.value, file).ok())
                .and_then(|v| v.as_str().map(str::to_string));
            if let Some(source) = source {
                let version = attrs
                    .get("version")
                    .and_then(|v| const_value(&v.value, file).ok())
                    .and_then(|v| v.as_str().map(str::to_string));
                self.model.components.insert(
                    name.clone(),
                    ComponentDef {
                        file,
                        span: header,
                        source,
                        version,
                        for_each: attrs.get("for_each").map(|a| a.value.clone()),
                        inputs: attrs.get("inputs").map(|a| a.value.clone()),
                        providers: attrs.get("providers").map(|a| a.value.clone()),
                        depends_on: deps.iter().map(|(n, _)| n.clone()).collect(),
                    },
                );
            }
            self.depends_on.insert(name, deps);
        }
    }

    fn deploy_file_block(&mut self, file: FileId, b: &Block) {
        let header = span_in(file, &b.ident);
        match b.ident.as_str() {
            "deployment" => {
                let Some(l) = self.labels(file, b, &["name"]) else {
                    return;
                };
                let (attrs, _) = self.parts(
                    file,
                    b,
                    Shape {
                        attrs: &["inputs", "deployment_group", "destroy", "import"],
                        blocks: &[],
                    },
                );
                let mut keys = None;
                if let Some(a) = attrs.get("inputs") {
                    self.keep(file, &a.value, Scope::Deploy, false, None);
                    self.deployment_exprs
                        .push((l[0].clone(), file, a.value.clone()));
                    if let Expression::Object(o) = &a.value {
                        let mut ks = Vec::new();
                        for (k, _) in o.iter() {
                            let key = match k {
                                ObjectKey::Ident(id) => Some(id.as_str().to_string()),
                                ObjectKey::Expression(Expression::String(s)) => {
                                    Some(s.value().to_string())
                                }
                                _ => None,
                            };
                            match key {
                                Some(key) => ks.push((key, span_in(file, k))),
                                None => {
                                    ks.clear();
                                    break;
                                }
                            }
                        }
                        keys = Some(ks);
                    }
                }
                if let Some(a) = attrs.get("deployment_group") {
                    match refs_of(file, &a.value).as_slice() {
                        [r] if r.root == "deployment_group" && r.names.len() == 1 => {
                            self.group_refs.push((
                                "deployment_group".into(),
                                r.names[0].clone(),
                                r.span,
                            ));
                            self.model
                                .deployments
                                .entry(l[0].clone())
                                .or_default()
                                .group = Some(r.names[0].clone());
                        }
                        _ => self.err(
                            file,
                            &a.value,
                            "Invalid deployment_group",
                            "The deployment_group argument must be a reference to a \
                             deployment group: deployment_group.NAME."
                                .into(),
                        ),
                    }
                }
                let destroy = self.const_bool(file, attrs.get("destroy"));
                self.const_bool(file, attrs.get("import"));
                self.model
                    .deployments
                    .entry(l[0].clone())
                    .or_default()
                    .destroy = destroy;
                if self.declare(
                    |d| &mut d.deployments,
                    l[0].clone(),
                    &l[0],
                    "deployment",
                    header,
                ) {
                    self.deployment_inputs.push((l[0].clone(), header, keys));
                }
            }
            "deployment_group" => {
                let Some(l) = self.labels(file, b, &["name"]) else {
                    return;
                };
                let (attrs, _) = self.parts(
                    file,
                    b,
                    Shape {
                        attrs: &["auto_approve_checks"],
                        blocks: &[],
                    },
                );
                if let Some(a) = self.required(file, b, &attrs, "auto_approve_checks") {
                    let items: Vec<Expression> = match &a.value {
                        Expression::Array(items) => items.iter().cloned().collect(),
                        _ => {
                            self.err(
                                file,
                                &a.value,
                                "Invalid auto_approve_checks",
                                "The auto_approve_checks argument must be a list of \
                                 deployment_auto_approve references."
                                    .into(),
                            );
                            Vec::new()
                        }
                    };
                    for it in &items {
                        match refs_of(file, it).as_slice() {
                            [r] if r.root == "deployment_auto_approve" && r.names.len() == 1 => {
                                self.group_refs.push((
                                    "deployment_auto_approve".into(),
                                    r.names[0].clone(),
                                    r.span,
                                ));
                                self.model
                                    .groups
                                    .entry(l[0].clone())
                                    .or_default()
                                    .push(r.names[0].clone());
                            }
                            _ => self.err(
                                file,
                                it,
                                "Invalid auto_approve_checks",
                                "Each element must be a reference to an auto-approve rule: \
                                 deployment_auto_approve.NAME."
                                    .into(),
                            ),
                        }
                    }
                }
                self.declare(
                    |d| &mut d.groups,
                    l[0].clone(),
                    &l[0],
                    "deployment group",
                    header,
                );
            }
            "deployment_auto_approve" => {
                let Some(l) = self.labels(file, b, &["name"]) else {
                    return;
                };
                let (_, checks) = self.parts(
                    file,
                    b,
                    Shape {
                        attrs: &[],
                        blocks: &["check"],
                    },
                );
                if checks.is_empty() {
                    self.err_at(
                        header,
                        "Missing check block",
                        "A deployment_auto_approve block must have at least one check block \
                         with a condition and a reason."
                            .into(),
                    );
                }
                for c in checks {
                    let (attrs, _) = self.parts(
                        file,
                        c,
                        Shape {
                            attrs: &["condition", "reason"],
                            blocks: &[],
                        },
                    );
                    if let (Some(cond), Some(reason)) =
                        (attrs.get("condition"), attrs.get("reason"))
                    {
                        self.model
                            .auto_approves
                            .entry(l[0].clone())
                            .or_default()
                            .push((file, cond.value.clone(), reason.value.clone()));
                    }
                    for n in ["condition", "reason"] {
                        if let Some(a) = self.required(file, c, &attrs, n) {
                            self.run_time_refs(file, &a.value, "An auto-approve check");
                            // `context` is the plan being approved.
                            let refs = refs_of(file, &a.value)
                                .into_iter()
                                .filter(|r| r.root != "context")
                                .collect();
                            self.pending.push(Pending {
                                refs,
                                scope: Scope::Deploy,
                                each: false,
                                component: None,
                            });
                        }
                    }
                }
                self.declare(
                    |d| &mut d.auto_approves,
                    l[0].clone(),
                    &l[0],
                    "auto-approve rule",
                    header,
                );
            }
            "locals" => self.locals(file, b, Scope::Deploy),
            "publish_output" => {
                let Some(l) = self.labels(file, b, &["name"]) else {
                    return;
                };
                let (attrs, _) = self.parts(
                    file,
                    b,
                    Shape {
                        attrs: &["description", "value"],
                        blocks: &[],
                    },
                );
                if let Some(v) = self.required(file, b, &attrs, "value") {
                    self.keep(file, &v.value, Scope::Deploy, false, None);
                    self.run_time_refs(file, &v.value, "A publish_output value");
                    self.model
                        .publish
                        .insert(l[0].clone(), (file, v.value.clone()));
                }
                self.declare(
                    |d| &mut d.publish,
                    l[0].clone(),
                    &l[0],
                    "published output",
                    header,
                );
            }
            "upstream_input" => {
                let Some(l) = self.labels(file, b, &["name"]) else {
                    return;
                };
                let (attrs, _) = self.parts(
                    file,
                    b,
                    Shape {
                        attrs: &["type", "source"],
                        blocks: &[],
                    },
                );
                if let Some(t) = self.required(file, b, &attrs, "type") {
                    if let Some(s) = self.const_string(file, t) {
                        if s != "stack" {
                            self.err(
                                file,
                                &t.value,
                                "Invalid upstream_input type",
                                format!("The type must be \"stack\", not {}.", quote(&s)),
                            );
                        }
                    }
                }
                if let Some(s) = self.required(file, b, &attrs, "source") {
                    if let Some(src) = self.const_string(file, s) {
                        let dir = self.dir.join(&src);
                        let ok = stack_files(&dir).is_ok_and(|f| {
                            f.iter()
                                .any(|p| p.to_string_lossy().ends_with(COMPONENT_SUFFIX))
                        });
                        if ok {
                            self.model.upstreams.insert(l[0].clone(), dir.clone());
                        } else {
                            self.err(
                                file,
                                &s.value,
                                "Upstream stack not found",
                                format!(
                                    "Cairn reads an upstream stack from its directory, relative \
                                     to this stack's directory; {} holds no \
                                     {COMPONENT_SUFFIX} files. HCP Terraform's stack \
                                     addresses (app.terraform.io/ORG/PROJECT/STACK) need HCP.",
                                    quote(&src)
                                ),
                            );
                        }
                    }
                }
                self.declare(
                    |d| &mut d.upstreams,
                    l[0].clone(),
                    &l[0],
                    "upstream input",
                    header,
                );
            }
            "store" => {
                let Some(l) = self.labels(file, b, &["type", "name"]) else {
                    return;
                };
                match l[0].as_str() {
                    "file" => {
                        let (attrs, _) = self.parts(
                            file,
                            b,
                            Shape {
                                attrs: &["path"],
                                blocks: &[],
                            },
                        );
                        if let Some(p) = self.required(file, b, &attrs, "path") {
                            if let Some(path) = self.const_string(file, p) {
                                self.store_file(file, p, &path);
                                self.declared.store_files.insert(l[1].clone(), path);
                            }
                        }
                    }
                    "env" => {
                        self.parts(
                            file,
                            b,
                            Shape {
                                attrs: &[],
                                blocks: &[],
                            },
                        );
                    }
                    "varset" => {
                        self.err(
                            file,
                            &b.labels[0],
                            "HCP variable sets are not available",
                            "A store of type \"varset\" reads an HCP Terraform variable set, \
                             and Cairn runs without HCP. Use store \"file\" (a JSON object in a \
                             local file: path = \"secrets.json\") or store \"env\" (the process \
                             environment) instead."
                                .into(),
                        );
                        return;
                    }
                    other => {
                        self.err(
                            file,
                            &b.labels[0],
                            "Invalid store type",
                            format!(
                                "The store type {} is not known: Cairn's stores are \"file\" \
                                 and \"env\".",
                                quote(other)
                            ),
                        );
                        return;
                    }
                }
                let shown = format!("{}.{}", l[0], l[1]);
                self.declare(
                    |d| &mut d.stores,
                    (l[0].clone(), l[1].clone()),
                    &shown,
                    "store",
                    header,
                );
            }
            "identity_token" => self.err_at(
                header,
                "identity_token is not available in Cairn",
                "An identity_token block asks HCP Terraform to sign a workload identity \
                 (OIDC) token for each run; Cairn has no HCP and no token issuer to sign one, \
                 and a token it made up would be trusted by no cloud. Pass credentials to \
                 providers through their own environment variables, or read them with a \
                 store block (store \"env\" or store \"file\")."
                    .into(),
            ),
            "component" | "provider" | "variable" | "output" | "required_providers" | "removed" => {
                self.err_at(
                    header,
                    "Unsupported block type",
                    format!(
                        "Blocks of type {} belong in a component configuration file \
                     (NAME{COMPONENT_SUFFIX}), not in a deployment configuration file.",
                        quote(b.ident.as_str())
                    ),
                )
            }
            other => self.err_at(
                header,
                "Unsupported block type",
                format!(
                    "Blocks of type {} are not expected here.{}",
                    quote(other),
                    suggest::suffix(
                        other,
                        [
                            "deployment",
                            "deployment_group",
                            "deployment_auto_approve",
                            "locals",
                            "publish_output",
                            "upstream_input",
                            "store"
                        ]
                    )
                ),
            ),
        }
    }

    /// Checks one reference against what its configuration may name; returns the component
    /// it names, if any.
    fn check_ref(&mut self, r: &Ref, scope: Scope, each: bool) -> Option<String> {
        let first = r.names.first().cloned();
        let missing = |this: &mut Self, what: &str, name: &str, cands: Vec<String>| {
            this.err_at(
                r.span,
                &format!("Reference to undeclared {what}"),
                format!(
                    "There is no {what} named {} in this stack.{}",
                    quote(name),
                    suggest::suffix(name, cands.iter().map(String::as_str))
                ),
            );
        };
        let need_attr = |this: &mut Self, root: &str| {
            this.err_at(
                r.span,
                "Invalid reference",
                format!(
                    "The {} object cannot be accessed directly. Instead, access one of its \
                     attributes.",
                    quote(root)
                ),
            );
        };
        match (scope, r.root.as_str()) {
            (_, "each") => {
                if !each {
                    self.err_at(
                        r.span,
                        "each.value cannot be used in this context",
                        "A reference to \"each.key\" or \"each.value\" is only allowed in a \
                         block that has for_each set."
                            .into(),
                    );
                }
            }
            (Scope::Component, "var") => match first {
                Some(n) if !self.declared.variables.contains_key(&n) => {
                    let c = self.declared.variables.keys().cloned().collect();
                    missing(self, "input variable", &n, c)
                }
                None => need_attr(self, "var"),
                _ => {}
            },
            (_, "local") => {
                let map = match scope {
                    Scope::Component => &self.declared.locals,
                    Scope::Deploy => &self.declared.deploy_locals,
                };
                match first {
                    Some(n) if !map.contains_key(&n) => {
                        let c = map.keys().cloned().collect();
                        missing(self, "local value", &n, c)
                    }
                    None => need_attr(self, "local"),
                    _ => {}
                }
            }
            (Scope::Component, "component") => match first {
                Some(n) if !self.declared.components.contains_key(&n) => {
                    let c = self.declared.components.keys().cloned().collect();
                    missing(self, "component", &n, c)
                }
                Some(n) => return Some(n),
                None => need_attr(self, "component"),
            },
            (Scope::Component, "provider") => match (r.names.first(), r.names.get(1)) {
                (Some(t), Some(n)) => {
                    if !self
                        .declared
                        .providers
                        .contains_key(&(t.clone(), n.clone()))
                    {
                        let c = self
                            .declared
                            .providers
                            .keys()
                            .map(|(a, b)| format!("{a}.{b}"))
                            .collect();
                        missing(self, "provider configuration", &format!("{t}.{n}"), c)
                    }
                }
                _ => self.err_at(
                    r.span,
                    "Invalid reference",
                    "A provider configuration is named by its type and name: \
                     provider.TYPE.NAME."
                        .into(),
                ),
            },
            (Scope::Deploy, "store") => match (r.names.first(), r.names.get(1)) {
                (Some(t), Some(n)) => {
                    if !self.declared.stores.contains_key(&(t.clone(), n.clone())) {
                        let c = self
                            .declared
                            .stores
                            .keys()
                            .map(|(a, b)| format!("{a}.{b}"))
                            .collect();
                        missing(self, "store", &format!("{t}.{n}"), c)
                    }
                }
                _ => self.err_at(
                    r.span,
                    "Invalid reference",
                    "A store is named by its type and name: store.TYPE.NAME.KEY.".into(),
                ),
            },
            (Scope::Deploy, "upstream_input") => match first {
                Some(n) if !self.declared.upstreams.contains_key(&n) => {
                    let c = self.declared.upstreams.keys().cloned().collect();
                    missing(self, "upstream input", &n, c)
                }
                None => need_attr(self, "upstream_input"),
                _ => {}
            },
            (Scope::Deploy, "deployment") => match (r.names.first(), r.names.get(1)) {
                (Some(d), o) => {
                    if !self.declared.deployments.contains_key(d) {
                        let c = self.declared.deployments.keys().cloned().collect();
                        missing(self, "deployment", d, c)
                    } else if let Some(o) = o {
                        if !self.declared.outputs.contains_key(o) {
                            let c = self.declared.outputs.keys().cloned().collect();
                            missing(self, "output", o, c)
                        }
                    }
                }
                _ => need_attr(self, "deployment"),
            },
            (Scope::Deploy, "identity_token") => self.err_at(
                r.span,
                "identity_token is not available in Cairn",
                "There is no HCP to sign an identity token; see the identity_token block's \
                 error."
                    .into(),
            ),
            (_, root) => {
                let names: &[&str] = match scope {
                    Scope::Component => &["var", "local", "component", "provider", "each"],
                    Scope::Deploy => &["local", "store", "upstream_input", "deployment"],
                };
                let file = match scope {
                    Scope::Component => "component",
                    Scope::Deploy => "deployment",
                };
                self.err_at(
                    r.span,
                    "Reference to unknown symbol",
                    format!(
                        "There is no symbol {} in a {file} configuration file, which may \
                         refer to {}.",
                        quote(root),
                        names.join(", ")
                    ),
                );
            }
        }
        None
    }

    fn check_references(&mut self) {
        let pending = std::mem::take(&mut self.pending);
        for p in &pending {
            for r in &p.refs {
                if let Some(target) = self.check_ref(r, p.scope, p.each) {
                    if let Some(c) = &p.component {
                        if let Some(deps) = self.depends_on.get_mut(c) {
                            deps.push((target, r.span));
                        }
                    }
                }
            }
        }
        let groups = std::mem::take(&mut self.group_refs);
        for (kind, name, sp) in groups {
            let (map, what) = if kind == "deployment_group" {
                (&self.declared.groups, "deployment group")
            } else {
                (&self.declared.auto_approves, "auto-approve rule")
            };
            if !map.contains_key(&name) {
                let c: Vec<String> = map.keys().cloned().collect();
                self.err_at(
                    sp,
                    &format!("Reference to undeclared {what}"),
                    format!(
                        "There is no {what} named {} in this stack.{}",
                        quote(&name),
                        suggest::suffix(&name, c.iter().map(String::as_str))
                    ),
                );
            }
        }
        let undeclared: Vec<(String, Span)> = self
            .declared
            .providers
            .iter()
            .filter(|((t, _), _)| !self.declared.required_providers.contains_key(t))
            .map(|((t, _), sp)| (t.clone(), *sp))
            .collect();
        for (t, sp) in undeclared {
            self.err_at(
                sp,
                "Provider type not declared",
                format!(
                    "The provider type {} is not declared in the stack's required_providers                      block: add {t} = {{ source = \"NAMESPACE/{t}\" }} there.",
                    quote(&t)
                ),
            );
        }
        let removed = std::mem::take(&mut self.removed);
        for (name, sp) in removed {
            if let Some(at) = self.declared.components.get(&name).copied() {
                let at = range_str(&self.sources, at);
                self.err_at(
                    sp,
                    "Cannot remove a component that is still declared",
                    format!(
                        "The component {} is declared at {at}: a removed block destroys a \
                         component's objects after its component block is deleted. Delete the \
                         component block, or this removed block.",
                        quote(&name)
                    ),
                );
            }
        }
    }

    /// The dependencies of each component (`depends_on` and references); a cycle is an
    /// error naming its components in order.
    fn component_order(&mut self) -> BTreeMap<String, BTreeSet<String>> {
        let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (c, deps) in &self.depends_on {
            let set = out.entry(c.clone()).or_default();
            for (d, _) in deps {
                set.insert(d.clone());
            }
        }
        let undeclared: Vec<(String, Span)> = self
            .depends_on
            .values()
            .flatten()
            .filter(|(d, _)| !self.declared.components.contains_key(d))
            .cloned()
            .collect();
        for (d, sp) in undeclared {
            let c: Vec<String> = self.declared.components.keys().cloned().collect();
            self.err_at(
                sp,
                "Reference to undeclared component",
                format!(
                    "There is no component named {} in this stack.{}",
                    quote(&d),
                    suggest::suffix(&d, c.iter().map(String::as_str))
                ),
            );
        }
        // Depth-first search; each cycle is reported once, from its smallest member.
        let mut state: BTreeMap<&str, u8> = BTreeMap::new();
        let mut cycles: Vec<Vec<String>> = Vec::new();
        fn dfs<'a>(
            n: &'a str,
            g: &'a BTreeMap<String, BTreeSet<String>>,
            state: &mut BTreeMap<&'a str, u8>,
            path: &mut Vec<&'a str>,
            cycles: &mut Vec<Vec<String>>,
        ) {
            state.insert(n, 1);
            path.push(n);
            for d in g.get(n).into_iter().flatten() {
                match state.get(d.as_str()) {
                    Some(1) => {
                        let at = path.iter().position(|p| *p == d).unwrap_or(0);
                        cycles.push(path[at..].iter().map(|s| s.to_string()).collect());
                    }
                    Some(_) => {}
                    None if g.contains_key(d) => dfs(d, g, state, path, cycles),
                    None => {}
                }
            }
            path.pop();
            state.insert(n, 2);
        }
        for n in out.keys() {
            if !state.contains_key(n.as_str()) {
                dfs(n, &out, &mut state, &mut Vec::new(), &mut cycles);
            }
        }
        for cyc in cycles {
            let at = self.declared.components[&cyc[0]];
            let mut chain: Vec<String> = cyc.iter().map(|c| format!("component.{c}")).collect();
            chain.push(format!("component.{}", cyc[0]));
            self.err_at(
                at,
                "Cycle in component dependencies",
                format!(
                    "Components depend on each other in a circle: {}. Each component is \
                     applied after those it depends on, so a circle has no order.",
                    chain.join(" → ")
                ),
            );
        }
        out
    }

    /// Each deployment's `inputs` against the declared variables: no unknown names, every
    /// variable without a default set.
    fn check_deployments(&mut self) {
        let inputs = std::mem::take(&mut self.deployment_inputs);
        for (dep, header, keys) in inputs {
            let Some(keys) = keys else { continue };
            let set: BTreeSet<&str> = keys.iter().map(|(k, _)| k.as_str()).collect();
            for (k, sp) in &keys {
                if !self.declared.variables.contains_key(k) {
                    let c: Vec<String> = self.declared.variables.keys().cloned().collect();
                    self.err_at(
                        *sp,
                        "Unsupported argument",
                        format!(
                            "The stack declares no variable named {}: a deployment's inputs \
                             set the variables of the component configuration.{}",
                            quote(k),
                            suggest::suffix(k, c.iter().map(String::as_str))
                        ),
                    );
                }
            }
            let missing: Vec<String> = self
                .declared
                .variables
                .iter()
                .filter(|(n, (_, has_default))| !has_default && !set.contains(n.as_str()))
                .map(|(n, _)| n.clone())
                .collect();
            for n in missing {
                self.err_at(
                    header,
                    "No value for required variable",
                    format!(
                        "The deployment {} does not set the input variable {}, which has no \
                         default value. Add it to the deployment's inputs.",
                        quote(&dep),
                        quote(&n)
                    ),
                );
            }
        }
    }
}

/// Where deployment expressions are evaluated: the deployment's `locals`, its stores (every
/// value from a store is sensitive) and `upstream_input`s (unknown until the upstream stack
/// is applied).
struct DeployScope<'a> {
    file: FileId,
    dir: &'a Path,
    locals: &'a BTreeMap<String, (FileId, Expression)>,
    stores: &'a BTreeMap<(String, String), Span>,
    store_files: &'a BTreeMap<String, String>,
    env: &'a BTreeMap<String, String>,
    /// Locals evaluated so far, and those being evaluated (a circle is an error).
    memo: &'a RefCell<BTreeMap<String, Option<Value>>>,
    /// What each upstream stack publishes (unknown when not given, or not published yet).
    upstream: &'a ValueMap,
}

impl DeployScope<'_> {
    fn store(&self, kind: &str) -> Value {
        let mut out = BTreeMap::new();
        for (t, n) in self.stores.keys() {
            if t != kind {
                continue;
            }
            let v = match kind {
                "env" => Value::object(
                    self.env
                        .iter()
                        .map(|(k, v)| (k.clone(), Value::string(v.clone()).sensitive())),
                ),
                _ => {
                    let text = self
                        .store_files
                        .get(n)
                        .and_then(|p| std::fs::read_to_string(self.dir.join(p)).ok());
                    match text.and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok()) {
                        Some(serde_json::Value::Object(m)) => Value::object(
                            m.iter()
                                .map(|(k, v)| (k.clone(), Value::from_json(v).sensitive())),
                        ),
                        _ => Value::unknown(),
                    }
                }
            };
            out.insert(n.clone(), v);
        }
        Value::object(out)
    }
}

impl EvalScope for DeployScope<'_> {
    fn resolve(&self, subject: &Subject) -> Result<Value, ScopeError> {
        match subject {
            Subject::Local(n) => {
                if let Some(v) = self.memo.borrow().get(n) {
                    return v.clone().ok_or_else(|| {
                        ScopeError::new(
                            "Cycle in local values",
                            format!("The local value {} refers to itself.", quote(n)),
                        )
                    });
                }
                let Some((file, e)) = self.locals.get(n) else {
                    return Ok(Value::unknown());
                };
                self.memo.borrow_mut().insert(n.clone(), None);
                let inner = DeployScope {
                    file: *file,
                    ..*self
                };
                let v = crate::eval::eval(e, &inner).unwrap_or_else(|_| Value::unknown());
                self.memo.borrow_mut().insert(n.clone(), Some(v.clone()));
                Ok(v)
            }
            Subject::Resource { type_, name, .. } if type_ == "store" => Ok(self.store(name)),
            Subject::Resource { type_, name, .. } if type_ == "upstream_input" => Ok(self
                .upstream
                .get(name)
                .cloned()
                .unwrap_or_else(Value::unknown)),
            _ => Ok(Value::unknown()),
        }
    }
    fn file(&self) -> FileId {
        self.file
    }
    fn module_dir(&self) -> &Path {
        self.dir
    }
    fn root_dir(&self) -> &Path {
        self.dir
    }
}

impl Decoder {
    /// Each deployment's `inputs` evaluated (its locals and stores; an upstream input is
    /// unknown) and converted to the type of the variable it sets, as a module's input
    /// variables are: a value that does not fit is an error at the input.
    fn eval_deployments(&mut self, env: &BTreeMap<String, String>, upstream: &ValueMap) {
        let memo = RefCell::new(BTreeMap::new());
        // The deployment file's locals, for what the engine evaluates later (auto-approve
        // checks, published outputs): unknown where they cannot be evaluated.
        let mut deploy_locals = BTreeMap::new();
        for (name, (file, _)) in &self.declared.deploy_local_exprs {
            let scope = DeployScope {
                file: *file,
                dir: &self.dir,
                locals: &self.declared.deploy_local_exprs,
                stores: &self.declared.stores,
                store_files: &self.declared.store_files,
                env,
                memo: &memo,
                upstream,
            };
            let v = scope
                .resolve(&Subject::Local(name.clone()))
                .unwrap_or_else(|_| Value::unknown());
            deploy_locals.insert(name.clone(), v);
        }
        self.model.deploy_locals = deploy_locals;
        let exprs = std::mem::take(&mut self.deployment_exprs);
        for (dep, file, e) in &exprs {
            let scope = DeployScope {
                file: *file,
                dir: &self.dir,
                locals: &self.declared.deploy_local_exprs,
                stores: &self.declared.stores,
                store_files: &self.declared.store_files,
                env,
                memo: &memo,
                upstream,
            };
            let value = match crate::eval::eval(e, &scope) {
                Ok(v) => v,
                Err(ds) => {
                    self.diags.extend(ds.0);
                    continue;
                }
            };
            let Expression::Object(o) = e else { continue };
            for (k, item) in o.iter() {
                let key = match k {
                    ObjectKey::Ident(id) => id.as_str().to_string(),
                    ObjectKey::Expression(Expression::String(s)) => s.value().to_string(),
                    _ => continue,
                };
                let Some((ty, _)) = self.declared.variable_types.get(&key) else {
                    continue;
                };
                let Some(v) = value.get(&key) else { continue };
                let converted = convert(v, ty);
                if let Ok(c) = &converted {
                    self.model
                        .deployments
                        .entry(dep.clone())
                        .or_default()
                        .inputs
                        .insert(key.clone(), c.clone());
                }
                if let Err(m) = converted {
                    let declared_at = self
                        .declared
                        .variables
                        .get(&key)
                        .map(|(sp, _)| range_str(&self.sources, *sp))
                        .unwrap_or_default();
                    self.err(
                        *file,
                        item.expr(),
                        "Invalid value for input variable",
                        format!(
                            "The given value is not suitable for var.{key} declared at \
                             {declared_at}: {m}."
                        ),
                    );
                }
            }
        }
    }
}

/// `component.NAME` or `component.NAME[KEY]`: the component's name.
fn removed_from(e: &Expression) -> Option<String> {
    let Expression::Traversal(t) = e else {
        return None;
    };
    let Expression::Variable(v) = &t.expr else {
        return None;
    };
    if v.as_str() != "component" {
        return None;
    }
    let ops: Vec<&TraversalOperator> = t.operators.iter().map(|o| o.value()).collect();
    match ops.as_slice() {
        [TraversalOperator::GetAttr(n)]
        | [TraversalOperator::GetAttr(n), TraversalOperator::Index(_)] => {
            Some(n.as_str().to_string())
        }
        _ => None,
    }
}

/// `main.tfcomponent.hcl:3,3-8`, as Terraform writes a range in a message.
fn range_str(sources: &SourceMap, s: Span) -> String {
    let a = sources.pos(s.file, s.start);
    let b = sources.pos(s.file, s.end);
    let path = sources.path_at(s.file, s.start).display().to_string();
    if a.line == b.line {
        format!("{path}:{},{}-{}", a.line, a.column, b.column)
    } else {
        format!("{path}:{},{}-{},{}", a.line, a.column, b.line, b.column)
    }
}
