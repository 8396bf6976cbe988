//! Configuration loading: a module tree read from disk into blocks and expressions (the
//! hcl-edit AST, kept with spans). Loading never calls a provider; a bad file never stops the
//! other files from being checked.
//!
//! Decisions:
//! - Expressions stay hcl-edit `Expression`s (with their byte spans into their own file); the
//!   `file` next to them says which file. Nothing is evaluated here except what must be
//!   constant: variable defaults and type constraints (converted once, so every caller sees
//!   typed defaults).
//! - Spans are `diag::Span`s (file + byte range). Paths in the `SourceMap` are shown relative to
//!   the root directory given to `load`, as Terraform shows `main.tf` and `modules/x/main.tf`.
//! - The tree is static: `Module::path` has no instance keys; `count`/`for_each` on module
//!   calls are expanded by the engine.

use crate::addr::provider_source::SourceAddr;
use crate::addr::version::Constraints;
use crate::addr::{Mode, ModulePath, ResourceAddr};
use crate::diag::{FileId, SourceMap, Span};
use crate::eval::Subject;
use crate::value::ValueMap;
use crate::value::{Type, Value};
use hcl_edit::expr::Expression;
use hcl_edit::structure::Body;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// A loaded configuration: the root module with its tree of children, and every source file.
#[derive(Debug)]
pub struct Config {
    pub(crate) root: Module,
    pub sources: SourceMap,
    pub(crate) root_dir: PathBuf,
}

impl Config {
    /// `plan -generate-config-out`: a resource block, empty and marked `generated`, for each
    /// root `import` block whose resource has none (the plan fills in its configuration from
    /// the imported object). A block with `for_each` gets Terraform's error instead: generation
    /// makes one resource without `for_each`, which such a block cannot import into.
    pub(crate) fn generate_import_blocks(&mut self) -> crate::diag::Diagnostics {
        let mut diags = crate::diag::Diagnostics::new();
        let blocks = self.root.imports.clone();
        for b in blocks {
            if !b.module.is_root() || self.root.resources.contains_key(&b.key) {
                continue;
            }
            if b.for_each.is_some() {
                diags.push(
                    crate::diag::Diagnostic::error(
                        "Invalid import 'to' expression",
                        "The target resource does not use for_each.",
                    )
                    .with_span(Some(b.to_span)),
                );
                continue;
            }
            self.root.resources.insert(
                b.key.clone(),
                Box::new(Resource {
                    mode: b.key.mode,
                    type_: b.key.type_.clone(),
                    name: b.key.name.clone(),
                    count: None,
                    for_each: None,
                    provider: b.provider.clone().map(Box::new),
                    depends_on: Vec::new(),
                    lifecycle: Lifecycle::shared_default(),
                    body: Body::default(),
                    file: b.file,
                    json: false,
                    span: b.span,
                    generated: true,
                    check: None,
                    provisioners: Vec::new(),
                }),
            );
        }
        diags
    }

    /// The module at a static path (instance keys are ignored).
    pub(crate) fn module(&self, path: &ModulePath) -> Option<&Module> {
        let mut m = &self.root;
        for step in &path.0 {
            m = m.children.get(&step.name)?;
        }
        Some(m)
    }

    /// Every provider the configuration needs, by source address, with every module's version
    /// constraints merged (Terraform's rule: all must hold).
    pub(crate) fn provider_requirements(&self) -> BTreeMap<SourceAddr, ProviderRequirement> {
        let mut out: BTreeMap<SourceAddr, ProviderRequirement> = BTreeMap::new();
        for m in self.modules() {
            for name in m.provider_names() {
                let addr = m.provider_source(&name);
                let req = out.entry(addr).or_default();
                if let Some(r) = m.required_providers.get(&name) {
                    req.constraints.merge(&r.constraints);
                }
                if !req.modules.contains(&m.path) {
                    req.modules.push(m.path.clone());
                }
            }
        }
        out
    }

    /// The source address of every provider package a module declares in
    /// `required_providers` (`example.com/ns/kv6` for package `kv6`), fully qualified.
    pub(crate) fn package_sources(&self) -> BTreeMap<String, String> {
        self.modules()
            .into_iter()
            .flat_map(|m| m.required_providers.values())
            .filter(|r| r.source.is_some())
            .map(|r| (r.addr.type_.clone(), r.addr.to_string()))
            .collect()
    }

    /// Every module of the tree, parents before children, children in name order.
    pub fn modules(&self) -> Vec<&Module> {
        fn walk<'a>(m: &'a Module, out: &mut Vec<&'a Module>) {
            out.push(m);
            for c in m.children.values() {
                walk(c, out);
            }
        }
        let mut out = Vec::new();
        walk(&self.root, &mut out);
        out
    }
}

/// One module: the blocks of one directory's `*.tf` files.
#[derive(Debug, Clone)]
pub struct Module {
    /// Static path from the root (no instance keys).
    pub(crate) path: ModulePath,
    pub(crate) dir: PathBuf,
    pub(crate) required_providers: BTreeMap<String, RequiredProvider>,
    pub(crate) providers: Vec<ProviderBlock>,
    pub(crate) variables: BTreeMap<String, Variable>,
    pub locals: BTreeMap<String, Local>,
    /// Boxed: a `Resource` is large (its body and meta-argument expressions), and a module
    /// with thousands of them would otherwise shift whole resources inside the map's nodes
    /// on every insertion.
    pub resources: BTreeMap<ResourceKey, Box<Resource>>,
    pub outputs: BTreeMap<String, Output>,
    /// `check` blocks by name: assertions whose failures are warnings. Their scoped `data`
    /// blocks are in `resources`, with `Resource::check` naming the block.
    pub(crate) checks: BTreeMap<String, Check>,
    pub(crate) calls: BTreeMap<String, ModuleCall>,
    /// The loaded child module of each call in `calls` whose source could be loaded.
    pub(crate) children: BTreeMap<String, Module>,
    /// `import` blocks and provisioners other than `local-exec` (kind, header): Terraform's
    /// valid blocks that Cairn does not act on. `inspect` (which has no state to import
    /// against) reads past them; every other command reports them (`unsupported_blocks`).
    pub(crate) state_blocks: Vec<(String, Span)>,
    /// `moved` blocks, in file order: applied to the prior state at the start of a plan
    /// (`engine::refactor`).
    pub(crate) moved: Vec<MovedBlock>,
    /// `removed` blocks, in file order.
    pub(crate) removed: Vec<RemovedBlock>,
    /// `import` blocks (root module only: in a child module they are a load error).
    pub(crate) imports: Vec<ImportBlock>,
    /// `terraform { backend "pg" { … } }`: where the state lives (root module only; `None`:
    /// the local state directory).
    pub(crate) backend: Option<BackendBlock>,
    /// `terraform { encryption { … } }` (OpenTofu's state and plan encryption; root module
    /// only), kept as written: the engine evaluates it early (variables and locals only).
    pub(crate) encryption: Option<EncryptionBlock>,
}

/// An `encryption` block: its body as written, in its file.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct EncryptionBlock {
    pub(crate) file: FileId,
    pub(crate) body: hcl_edit::structure::Body,
    pub(crate) span: Span,
}

/// A `backend` block Cairn uses: its type and its arguments (strings: constants, or
/// evaluated early from variables and locals, `early.rs`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BackendBlock {
    pub(crate) kind: String,
    pub(crate) args: BTreeMap<String, String>,
    pub(crate) span: Span,
}

/// `moved { from = … to = … }`: addresses relative to the block's module. Both are modules
/// (calls or instances) or both are resources or resource instances (checked at load).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct MovedBlock {
    pub(crate) from: crate::addr::Target,
    pub(crate) to: crate::addr::Target,
    /// The block's header (`moved`): where its diagnostics point, as Terraform's do.
    pub(crate) span: Span,
}

/// `removed { from = … lifecycle { destroy = … } }`: a resource or module (never an
/// instance), relative to the block's module.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RemovedBlock {
    pub(crate) from: crate::addr::Target,
    /// `lifecycle { destroy }`; `true` when absent (Terraform's default).
    pub(crate) destroy: bool,
    pub(crate) span: Span,
}

/// `import { to = ADDR  id = EXPR  for_each = EXPR  provider = NAME.ALIAS }`: adopt an
/// existing object into state at plan (`engine::plan_phase`), as Terraform does.
#[derive(Debug, Clone)]
pub(crate) struct ImportBlock {
    /// The target's static resource: its module path without instance keys, and its key
    /// (always a managed resource).
    pub(crate) module: ModulePath,
    pub(crate) key: ResourceKey,
    /// `to` as written: a traversal whose index steps may use `each` (evaluated per element
    /// of `for_each` by `engine::imports::targets`).
    pub(crate) to: Expression,
    pub(crate) id: Expression,
    pub(crate) for_each: Option<Expression>,
    pub(crate) provider: Option<ProviderRef>,
    pub(crate) file: FileId,
    /// The block header (`import`).
    pub(crate) span: Span,
    pub(crate) to_span: Span,
    pub(crate) id_span: Span,
}

/// A diagnostic for each block in `Module::state_blocks` of the tree: an error for a command
/// that would have to act on them (it must not silently ignore them), a warning for
/// `validate` (the configuration is valid Terraform; Cairn's plan would refuse it).
pub(crate) fn unsupported_blocks(config: &Config, error: bool) -> crate::diag::Diagnostics {
    let mut diags = crate::diag::Diagnostics::new();
    for m in config.modules() {
        for (kind, span) in &m.state_blocks {
            let (summary, detail) = match kind.strip_prefix("provisioner ") {
                Some(p) => (
                    "Unsupported provisioner",
                    format!(
                        "Cairn runs the \"local-exec\" provisioner only. A {p} provisioner needs \
                         a connection (SSH or WinRM) to the object, which Cairn does not make: \
                         run the command from local-exec (for example through ssh), or build \
                         it into the machine's image or user data."
                    ),
                ),
                None => (
                    "Unsupported block type",
                    format!(
                        "Cairn does not act on {kind:?} blocks: plan and apply refuse a \
                         configuration with one, and only `cairn inspect` and `cairn validate` \
                         read past them."
                    ),
                ),
            };
            let d = match error {
                true => crate::diag::Diagnostic::error(summary, detail),
                false => crate::diag::Diagnostic::warning(summary, detail),
            };
            diags.push(d.with_span(Some(*span)));
        }
    }
    diags
}

impl Module {
    /// A module with no blocks yet.
    pub(crate) fn empty(path: ModulePath, dir: PathBuf) -> Module {
        Module {
            path,
            dir,
            required_providers: BTreeMap::new(),
            providers: Vec::new(),
            variables: BTreeMap::new(),
            locals: BTreeMap::new(),
            resources: BTreeMap::new(),
            outputs: BTreeMap::new(),
            checks: BTreeMap::new(),
            calls: BTreeMap::new(),
            children: BTreeMap::new(),
            state_blocks: Vec::new(),
            moved: Vec::new(),
            removed: Vec::new(),
            imports: Vec::new(),
            backend: None,
            encryption: None,
        }
    }

    /// The source address a provider local name stands for in this module: its
    /// `required_providers` entry, or `hashicorp/NAME` (Terraform's default).
    pub(crate) fn provider_source(&self, local: &str) -> SourceAddr {
        self.required_providers
            .get(local)
            .map(|r| r.addr.clone())
            .unwrap_or_else(|| SourceAddr::implied(local))
    }

    /// The provider local names this module uses: its `required_providers`, provider blocks,
    /// and the provider of every resource and data source (`provider = x.y` or its type's
    /// prefix).
    pub(crate) fn provider_names(&self) -> std::collections::BTreeSet<String> {
        let mut out: std::collections::BTreeSet<String> =
            self.required_providers.keys().cloned().collect();
        out.extend(self.providers.iter().map(|p| p.name.clone()));
        for r in self.resources.values() {
            out.insert(match &r.provider {
                Some(p) => p.name.clone(),
                None => r.provider_name().to_string(),
            });
        }
        out
    }

    /// The provider block for a local name and alias, if this module declares one.
    pub(crate) fn provider(&self, name: &str, alias: Option<&str>) -> Option<&ProviderBlock> {
        self.providers
            .iter()
            .find(|p| p.name == name && p.alias.as_deref() == alias)
    }
}

/// `terraform { required_providers { NAME = { source = "...", version = "..." } } }`
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RequiredProvider {
    pub(crate) name: String,
    /// `source`, e.g. `cairn/sim` (the last segment is the package); `None` when only a
    /// version string was given.
    pub(crate) source: Option<String>,
    pub(crate) version: Option<String>,
    /// The parsed source address: `source`, or `hashicorp/NAME` without one (an invalid
    /// source is a load diagnostic and leaves the implied address here).
    pub(crate) addr: SourceAddr,
    /// The parsed `version` constraints (empty without one, or when invalid: a diagnostic).
    pub(crate) constraints: Constraints,
    pub(crate) span: Span,
}

/// Every provider a configuration needs, over all its modules.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct ProviderRequirement {
    /// The constraints of every module that states some, merged (all must hold).
    pub(crate) constraints: Constraints,
    /// The modules that need it (static paths, root first), for messages.
    pub(crate) modules: Vec<ModulePath>,
}

/// `provider "NAME" { alias = "..." ... }`
#[derive(Debug, Clone)]
pub(crate) struct ProviderBlock {
    /// The local name (the provider package unless `required_providers` maps it).
    pub(crate) name: String,
    pub(crate) alias: Option<String>,
    /// OpenTofu's provider iteration: one provider instance per element, each configured
    /// with its own `each.key` / `each.value` (only with `alias`; known without providers or
    /// state: variables, locals and constants).
    pub(crate) for_each: Option<Expression>,
    /// `for_each`'s instances, evaluated early (`early.rs`, as OpenTofu's static evaluation):
    /// each key with its `each.value`. `None` without `for_each`, or when it could not be
    /// evaluated (reported at load).
    pub(crate) each: Option<ValueMap>,
    /// The arguments and blocks, without `alias` and `for_each`.
    pub(crate) body: Body,
    pub(crate) file: FileId,
    /// Written in JSON (`.tf.json`): nested blocks may be arguments (`eval_config_body`).
    pub(crate) json: bool,
    /// The block header.
    pub(crate) span: Span,
}

/// `variable "NAME" { ... }`
#[derive(Debug, Clone)]
pub(crate) struct Variable {
    pub(crate) name: String,
    /// The type constraint; `Type::Dynamic` when absent.
    pub(crate) ty: Type,
    /// The default, already converted to `ty` (with `optional()` defaults applied).
    pub(crate) default: Option<Value>,
    pub(crate) sensitive: bool,
    /// `ephemeral = true`: its value may come from ephemeral values, is never stored (not
    /// in a saved plan either) and makes what derives from it ephemeral.
    pub(crate) ephemeral: bool,
    pub(crate) nullable: bool,
    pub(crate) validations: Vec<Validation>,
    pub(crate) file: FileId,
    pub(crate) span: Span,
}

/// A condition block: a variable's `validation`, a resource's or data source's
/// `precondition`/`postcondition` (in `lifecycle`), an output's `precondition`:
/// `{ condition = ..., error_message = ... }`. `span` is the condition expression's.
#[derive(Debug, Clone)]
pub(crate) struct Validation {
    pub(crate) condition: Expression,
    pub(crate) error_message: Expression,
    pub(crate) span: Span,
}

/// One entry of a `locals` block.
#[derive(Debug, Clone)]
pub struct Local {
    pub expr: Expression,
    pub file: FileId,
    /// The whole `name = expr` line.
    pub(crate) span: Span,
}

/// The key of a resource within its module: mode, type, name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ResourceKey {
    pub(crate) mode: Mode,
    pub(crate) type_: String,
    pub(crate) name: String,
}

impl ResourceKey {
    pub(crate) fn addr(&self, module: ModulePath) -> ResourceAddr {
        ResourceAddr::new(module, self.mode, &self.type_, &self.name)
    }
}

/// `resource "TYPE" "NAME" { ... }` or `data "TYPE" "NAME" { ... }`
#[derive(Debug, Clone)]
pub struct Resource {
    pub(crate) mode: Mode,
    pub(crate) type_: String,
    pub(crate) name: String,
    /// Boxed, as `for_each`: an absent expression would take an `Expression`'s 128 bytes in
    /// every resource (10,000 resources: 2.4 MiB of nothing).
    pub(crate) count: Option<Box<Expression>>,
    pub(crate) for_each: Option<Box<Expression>>,
    /// Boxed: absent in most resources, and 200 bytes when present.
    pub(crate) provider: Option<Box<ProviderRef>>,
    pub(crate) depends_on: Vec<DependsOn>,
    /// Shared: most resources have no `lifecycle` block, and all of those hold one empty
    /// `Lifecycle` (104 bytes in each of 100,000 resources otherwise).
    pub(crate) lifecycle: std::sync::Arc<Lifecycle>,
    /// Everything else: arguments, nested blocks and `dynamic` blocks.
    pub body: Body,
    pub file: FileId,
    /// Written in JSON (`.tf.json`): nested blocks may be arguments (`eval_config_body`).
    pub(crate) json: bool,
    /// The block header (`resource "sim_thing" "a"`).
    pub(crate) span: Span,
    /// Not written: generated for an `import` block by `plan -generate-config-out`
    /// (`Config::generate_import_blocks`); its configuration is the imported object's.
    pub(crate) generated: bool,
    /// A data source scoped to the `check` block of this name: only that block may refer to
    /// it, and a failure to read it is a warning.
    pub(crate) check: Option<String>,
    /// `provisioner "local-exec"` blocks, in order.
    pub(crate) provisioners: Vec<Provisioner>,
}

/// A `provisioner "local-exec" { … }` block of a managed resource.
#[derive(Debug, Clone)]
pub(crate) struct Provisioner {
    /// The provisioner type (`local-exec`).
    pub(crate) kind: String,
    /// `when = destroy`: runs before the object is deleted (else after it is created).
    pub(crate) when_destroy: bool,
    /// `on_failure = continue`: a failure is ignored (else it fails the instance).
    pub(crate) on_failure_continue: bool,
    /// The arguments, without `when` and `on_failure` (and nested `connection` blocks).
    pub(crate) body: Body,
    pub(crate) file: FileId,
    /// The block header.
    pub(crate) span: Span,
}

/// A `check "NAME" { data … assert { condition error_message } }` block.
#[derive(Debug, Clone)]
pub(crate) struct Check {
    pub(crate) name: String,
    pub(crate) asserts: Vec<Validation>,
    pub(crate) file: FileId,
    /// The block header.
    pub(crate) span: Span,
}

impl Resource {
    pub(crate) fn key(&self) -> ResourceKey {
        ResourceKey {
            mode: self.mode,
            type_: self.type_.clone(),
            name: self.name.clone(),
        }
    }
    /// The provider local name this resource uses: the explicit `provider` argument's, or
    /// the type's prefix (`sim_thing` → `sim`).
    pub(crate) fn provider_name(&self) -> &str {
        match &self.provider {
            Some(p) => &p.name,
            None => crate::addr::package_of(&self.type_),
        }
    }
}

/// A reference to a provider configuration: `sim` or `sim.east`, or an instance of an
/// aliased block with `for_each`: `sim.by_region[each.key]` (the key an expression evaluated
/// where the reference is written).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ProviderRef {
    pub(crate) name: String,
    pub(crate) alias: Option<String>,
    pub(crate) key: Option<Expression>,
    pub(crate) span: Span,
}

impl std::fmt::Display for ProviderRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.name)?;
        if let Some(a) = &self.alias {
            write!(f, ".{a}")?;
        }
        Ok(())
    }
}

/// One entry of `depends_on`: any whole object a reference may name (a resource, data
/// resource, module call, variable, local value, ...).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DependsOn {
    pub(crate) subject: Subject,
    pub(crate) span: Span,
}

/// `lifecycle { ... }`
#[derive(Debug, Clone, Default)]
pub(crate) struct Lifecycle {
    pub(crate) create_before_destroy: bool,
    pub(crate) prevent_destroy: bool,
    pub(crate) ignore_changes: IgnoreChanges,
    pub(crate) replace_triggered_by: Vec<Expression>,
    /// Checked before the instance is planned (and again at apply while unknown).
    pub(crate) preconditions: Vec<Validation>,
    /// Checked on the planned (then the applied) object, which they read as `self`.
    pub(crate) postconditions: Vec<Validation>,
}

impl Lifecycle {
    /// The empty lifecycle (no `lifecycle` block), one for the whole program.
    pub(crate) fn shared_default() -> std::sync::Arc<Lifecycle> {
        static EMPTY: std::sync::LazyLock<std::sync::Arc<Lifecycle>> =
            std::sync::LazyLock::new(Default::default);
        EMPTY.clone()
    }
}

/// `ignore_changes = all` or `ignore_changes = [a, b.c, tags["x"]]`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) enum IgnoreChanges {
    #[default]
    None,
    All,
    /// Each path is a list of steps: attribute names and index keys (as strings).
    Paths(Vec<Vec<String>>),
}

/// `output "NAME" { ... }`
#[derive(Debug, Clone)]
pub struct Output {
    pub value: Expression,
    pub(crate) sensitive: bool,
    /// `ephemeral = true` (child modules only): the value may derive from ephemeral values.
    pub(crate) ephemeral: bool,
    pub(crate) depends_on: Vec<DependsOn>,
    /// Checked before the value is evaluated.
    pub(crate) preconditions: Vec<Validation>,
    pub file: FileId,
    pub(crate) span: Span,
}

/// `module "NAME" { source = "./x" ... }`: `source` and `version` are constants or
/// evaluated early (`early.rs`), as the loader found them.
#[derive(Debug, Clone)]
pub(crate) struct ModuleCall {
    pub(crate) name: String,
    /// As written (`./modules/net`).
    pub(crate) source: String,
    pub(crate) source_span: Span,
    /// `version`: a registry module's version constraints, as written (or evaluated
    /// early).
    pub(crate) version: Option<String>,
    /// The `version` argument's name, where a version on a local module is reported.
    pub(crate) version_span: Option<Span>,
    pub(crate) count: Option<Expression>,
    pub(crate) for_each: Option<Expression>,
    /// `providers = { child = parent }`, in the order written.
    pub(crate) providers: Vec<ProviderPass>,
    pub(crate) depends_on: Vec<DependsOn>,
    /// Every other argument: an input variable of the child, with the span of its line.
    pub(crate) inputs: BTreeMap<String, (Expression, Span)>,
    pub(crate) file: FileId,
    pub(crate) span: Span,
}

/// One entry of a module call's `providers` map: the child's `name.alias` gets the parent's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ProviderPass {
    pub(crate) child: ProviderRef,
    pub(crate) parent: ProviderRef,
}

/// The span of an hcl-edit node in `file`, or the empty span at 0 when it has none.
pub(crate) fn span_in(file: FileId, node: &impl hcl_edit::Span) -> Span {
    let r = node.span().unwrap_or(0..0);
    Span {
        file,
        start: r.start,
        end: r.end,
    }
}

mod decode;
pub(crate) mod early;
mod ephemeral;
pub(crate) mod format;
mod json_syntax;
mod load;
mod overrides;
mod parse;
mod references;
pub(crate) mod spans;
pub(crate) mod stack;
pub mod test_file;
mod validate;
pub(crate) use ephemeral::{check as check_ephemeral, ephemeral_arguments, ephemeral_terms};
pub(crate) use load::{keep_ahead, root_files_mention};
pub use load::{load, load_file, load_lenient, load_with, NO_CONFIGURATION_FILES};
pub(crate) use references::{check_references, scoped_reference};
pub(crate) use validate::validate;

#[cfg(test)]
mod tests;

mod vars;
pub(crate) use vars::{input_values, input_values_with, mask_var_args, Missing};
pub use vars::{EarlyInputs, VarArg};
