//! The run context and node evaluation shared by every phase.
//!
//! One mechanism serves `inspect`, `plan`, `apply` and read-only runs: walk the term graph;
//! evaluate each variable, local, output and module call for every instance of its module;
//! expand each resource into instances and evaluate their configuration; then hand the
//! instance to the phase (`Phase`), which decides what a resource *is* in that phase: its
//! configuration (inspect), the provider's planned state (plan), the applied state (apply), or
//! the refreshed state (read-only).
//!
//! Locks: `values` is a `std::sync::RwLock` held only while evaluating expressions (synchronous)
//! or storing a result, never across an `.await`. The other `Mutex`es guard small collections
//! of results and are likewise never held across an `.await`.

use super::graph::{Node, TermGraph};
use super::observer::{Observer, Progress};
use super::providers::Registry;
use super::sabotage::Sabotage;
pub(crate) use super::values::InstanceScope;
use super::values::{Expansion, InstanceValues, Paths, Repetition, ResourceValues, Values};
use super::walk::{walk, Limits, NodeFuture, WalkOutcome};
use crate::addr::{
    InstanceKey, Mode, ModulePath, ProviderAddr, ResourceAddr, ResourceInstanceAddr,
};
use crate::config::{Config, Module, Resource, ResourceKey};
use crate::diag::{Diagnostic, Diagnostics, FileId, Span};
use crate::eval::convert::convert;
use crate::eval::{eval, eval_body, eval_body_with_sources, eval_config_body};
use crate::provider::Configured;
use crate::schema::Block;
use crate::value::ValueMap;
use crate::value::{Type, Value};
use cairn_graph::NodeId;
use hcl_edit::expr::Expression;
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, RwLock};

/// What a provider instance is during this run.
#[derive(Clone)]
pub(crate) enum ProviderState {
    /// Configured with a wholly known configuration.
    Configured(Arc<dyn Configured>),
    /// Its configuration holds values not known until apply (paths of the unknowns, and where
    /// they come from). Never configured with unknowns.
    Unknown { paths: Vec<String> },
    /// Not configured in this phase (inspect), or its configuration failed.
    Unavailable,
}

/// The engine's view of one provider instance in this run.
#[derive(Clone)]
pub(crate) struct ProviderSlot {
    pub addr: ProviderAddr,
    pub package: String,
    pub config: Value,
    pub state: ProviderState,
    /// The instance id in state (apply: after registering; plan: `None` while it is being
    /// created or replaced, as its id is not known until apply).
    pub id: Option<String>,
}

/// Phase-specific behaviour. The walk calls these; everything else is shared.
#[async_trait::async_trait]
pub(crate) trait Phase: Send + Sync + 'static {
    /// A provider instance's configuration has been evaluated (or synthesized for a default).
    async fn provider(
        &self,
        ctx: &Arc<Ctx>,
        addr: &ProviderAddr,
        config: Value,
        is_default: bool,
    ) -> Result<(), Diagnostics>;
    /// A managed or data instance's configuration has been evaluated: returns the value other
    /// expressions see for it.
    async fn instance(&self, ctx: &Arc<Ctx>, inst: Instance) -> Result<Value, Diagnostics>;
    /// Instances in state of a resource that this run no longer produces (count/for_each
    /// shrank, module instance gone, or the block removed).
    async fn orphans(
        &self,
        ctx: &Arc<Ctx>,
        orphans: Vec<(ResourceInstanceAddr, OrphanReason)>,
    ) -> Result<(), Diagnostics>;
    /// A root module output has been evaluated.
    fn output(&self, ctx: &Arc<Ctx>, name: &str, value: &Value, sensitive: bool);
    /// True for `inspect`, which evaluates whatever it can instead of stopping: a resource of
    /// a provider Cairn does not have is evaluated without a schema (`Instance::schemaless`),
    /// an unknown or failing `count`/`for_each` gives one instance of unknown expansion, and
    /// a term that fails is reported and becomes unknown, so its dependents still run.
    /// Whether the walk sees final values (apply): a `check` still unknown is then not
    /// reported as "known after apply".
    fn final_values(&self) -> bool {
        false
    }

    fn lenient(&self) -> bool {
        false
    }
    /// A node of the phase's own (e.g. apply's deletes).
    async fn extra(&self, ctx: &Arc<Ctx>, node: &Node) -> Result<(), Diagnostics> {
        let _ = (ctx, node);
        Ok(())
    }
}

/// Why an instance in state has no configuration now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum OrphanReason {
    NoResourceConfig,
    CountIndex,
    EachKey,
    NoModule,
}

/// One resource instance, with its evaluated configuration.
pub(crate) struct Instance {
    pub addr: ResourceInstanceAddr,
    pub static_module: ModulePath,
    pub key: ResourceKey,
    pub provider: ProviderAddr,
    /// The configuration, evaluated against the schema (may hold unknowns).
    pub config: Value,
    /// The resource type's schema; empty when `schemaless`.
    pub schema: Arc<Block>,
    /// No schema is available (a provider Cairn does not have, in `inspect`): `config` is
    /// the body as written, blocks as lists of objects.
    pub schemaless: bool,
    /// One instance standing for a `count`/`for_each` that is unknown or failed (`inspect`).
    pub unknown_expansion: bool,
    /// Where each argument and nested block of `config` is written (lenient phases only,
    /// for `inspect`'s `_attribute_sources`; empty otherwise).
    pub sources: crate::eval::Sources,
    /// Its `count.index` / `each` (provisioners evaluate with it).
    pub rep: Repetition,
}

/// Everything a walk shares.
pub(crate) struct Ctx {
    pub config: Arc<Config>,
    pub graph: Arc<TermGraph>,
    pub registry: Arc<Registry>,
    pub values: RwLock<Values>,
    pub providers: Mutex<BTreeMap<ProviderAddr, ProviderSlot>>,
    /// Root input variable values.
    pub inputs: ValueMap,
    /// Provider instances recorded in state.
    pub state_providers: BTreeMap<ProviderAddr, cairn_state::ProviderInstance>,
    /// Instances in state (by static resource), to find orphans.
    pub state_instances: StateInstances,
    pub limits: Limits,
    pub observer: Arc<dyn Observer>,
    pub diags: Mutex<Diagnostics>,
    /// `check` blocks (static module, name) whose scoped data source could not be read in
    /// this walk: their assertions are not evaluated.
    pub failed_checks: Mutex<BTreeSet<(ModulePath, String)>>,
    /// Every warning `check` blocks produced in this walk (also in `diags`).
    pub check_findings: Mutex<Vec<Diagnostic>>,
    pub cwd: PathBuf,
    /// When set (`-target`), only these nodes are walked.
    pub only: Option<BTreeSet<NodeId>>,
    /// `-target`: the resources a target names (and nothing else needs whole), with the
    /// targets that name them: only their instances those targets cover are planned (and only
    /// those may become orphans), as Terraform's `-target=a[0]` and `-target=module.m["b"]`.
    /// `-exclude` naming some instances puts the others here (`InstanceScope::Except`).
    pub only_instances: BTreeMap<NodeId, super::exclude::InstanceScope>,
    /// `path.*` per static module, computed once.
    pub paths_by_module: std::collections::HashMap<ModulePath, Arc<Paths>>,
    /// Resource schemas by (package, mode, type), copied out of the provider once per type
    /// rather than once per resource (see `resource_schema`).
    pub schemas: Mutex<std::collections::HashMap<(String, Mode, String), Arc<Block>>>,
}

impl Ctx {
    pub(crate) fn module(&self, path: &ModulePath) -> &Module {
        self.config
            .module(path)
            .expect("graph nodes name loaded modules")
    }

    /// `path.*` of a static module: computed once per module (see `paths_by_module`).
    pub(crate) fn paths(&self, module: &ModulePath) -> Arc<Paths> {
        if let Some(p) = self.paths_by_module.get(module) {
            return p.clone();
        }
        Arc::new(self.compute_paths(module))
    }

    pub(crate) fn compute_paths(&self, module: &ModulePath) -> Paths {
        let m = self.config.module(module);
        let module_dir = m
            .map(|m| m.dir.clone())
            .unwrap_or_else(|| self.config.root_dir.clone());
        let module_rel = match module_dir.strip_prefix(&self.config.root_dir) {
            Ok(rel) if rel.as_os_str().is_empty() => ".".to_string(),
            Ok(rel) => rel.display().to_string(),
            Err(_) => module_dir.display().to_string(),
        };
        Paths {
            module_rel,
            module_dir,
            root_dir: self.config.root_dir.clone(),
            cwd: self.cwd.clone(),
        }
    }

    /// Whether an expression refers to an open value in a module instance (see
    /// `Values::open`).
    pub(crate) fn refers_to_open(
        &self,
        module: &ModulePath,
        file: FileId,
        expr: &Expression,
    ) -> bool {
        let values = self.values.read().expect("values lock");
        let paths = self.paths(&module.without_keys());
        let scope = InstanceScope {
            values: &values,
            module,
            repetition: &Repetition::None,
            file,
            paths: &paths,
        };
        crate::eval::references(expr)
            .iter()
            .any(|r| crate::eval::Scope::is_open(&scope, &r.subject))
    }

    /// Records that a term of a module instance derives from open values.
    fn mark_open(&self, module: &ModulePath, term: String) {
        self.values
            .write()
            .expect("values lock")
            .open
            .insert((module.clone(), term));
    }

    /// Evaluates one expression in a module instance.
    pub(crate) fn eval_in(
        &self,
        module: &ModulePath,
        rep: &Repetition,
        file: FileId,
        expr: &Expression,
    ) -> Result<Value, Diagnostics> {
        let values = self.values.read().expect("values lock");
        let paths = self.paths(&module.without_keys());
        let scope = InstanceScope {
            values: &values,
            module,
            repetition: rep,
            file,
            paths: &paths,
        };
        eval(expr, &scope)
    }

    pub(crate) fn provider_slot(&self, addr: &ProviderAddr) -> Option<ProviderSlot> {
        self.providers
            .lock()
            .expect("providers lock")
            .get(addr)
            .cloned()
    }

    /// Configures the provider instance `addr` with `config` (wholly known) for this run, and
    /// reports it to the observer.
    pub(crate) async fn configure_provider(
        &self,
        addr: &ProviderAddr,
        config: &Value,
    ) -> Result<Arc<dyn Configured>, Diagnostics> {
        let configured = self
            .registry
            .configure(&addr.package, config)
            .await
            .map_err(|e| {
                Diagnostics::from(
                    Diagnostic::error(
                        "Failed to configure provider",
                        format!("Configuring {addr}: {e}"),
                    )
                    .with_address(addr),
                )
            })?;
        self.observer
            .event(Progress::ProviderConfigured { addr: addr.clone() });
        Ok(configured)
    }

    pub(crate) fn set_provider_slot(&self, slot: ProviderSlot) {
        self.providers
            .lock()
            .expect("providers lock")
            .insert(slot.addr.clone(), slot);
    }

    /// Reports what a `check` block found (warnings), remembering it as a check's finding.
    /// Not streamed to the observer as it happens: an apply replaces its plan's findings with
    /// its own (see `Plan::check_findings`).
    pub(crate) fn report_check(&self, diags: Diagnostics) {
        self.check_findings
            .lock()
            .expect("check findings")
            .extend(diags.iter().cloned());
        self.diags.lock().expect("diags lock").extend(diags);
    }

    pub(crate) fn report(&self, diags: Diagnostics) {
        for d in diags.iter() {
            if !d.is_error() {
                self.observer.event(Progress::Diagnostic(d.clone()));
            }
        }
        self.diags.lock().expect("diags lock").extend(diags);
    }

    /// `schema_of`, shared: each resource type's schema is copied once per run.
    pub(crate) fn resource_schema(
        &self,
        package: &str,
        mode: Mode,
        type_: &str,
        span: Span,
    ) -> Result<Arc<Block>, Diagnostic> {
        let key = (package.to_string(), mode, type_.to_string());
        if let Some(b) = self.schemas.lock().expect("schemas lock").get(&key) {
            return Ok(b.clone());
        }
        let b = Arc::new(self.schema_of(package, mode, type_, span)?);
        self.schemas
            .lock()
            .expect("schemas lock")
            .insert(key, b.clone());
        Ok(b)
    }

    /// The schema of a resource type if one is available: `Ok(None)` when `lenient` and no
    /// provider package of that name exists (neither built in nor installed), so the
    /// resource is evaluated without one. This is the one place that decides "schema if
    /// available"; a provider whose schema is known (built in, or an installed plugin in
    /// the registry) is always used.
    pub(crate) fn available_schema(
        &self,
        package: &str,
        mode: Mode,
        type_: &str,
        span: Span,
        lenient: bool,
    ) -> Result<Option<Arc<Block>>, Diagnostic> {
        if lenient && self.registry.package(package).is_none() {
            return Ok(None);
        }
        self.resource_schema(package, mode, type_, span).map(Some)
    }

    /// The schema block of a resource type, or a diagnostic naming the type and what exists.
    pub(crate) fn schema_of(
        &self,
        package: &str,
        mode: Mode,
        type_: &str,
        span: Span,
    ) -> Result<Block, Diagnostic> {
        let Some(provider) = self.registry.package(package) else {
            let known: Vec<&str> = self.registry.package_names().collect();
            return Err(Diagnostic::error(
                "Unknown provider",
                format!(
                    "There is no provider named {package:?} (needed for {type_}). The built-in providers are: {}.",
                    known.join(", ")
                ),
            )
            .with_span(Some(span)));
        };
        let schema = provider.schema();
        match schema.block(mode, type_) {
            Some(b) => Ok(b.clone()),
            None => {
                let kinds = if mode == Mode::Data {
                    &schema.data_sources
                } else {
                    &schema.resources
                };
                let hint = crate::eval::suggest::suffix(type_, kinds.keys().map(String::as_str));
                let what = if mode == Mode::Data {
                    "data source"
                } else {
                    "resource type"
                };
                Err(Diagnostic::error(
                    format!("Invalid {what}"),
                    format!("The provider {package:?} does not support {what} {type_:?}.{hint}"),
                )
                .with_span(Some(span)))
            }
        }
    }
}

/// `expansion` for `inspect`: an unknown `count`/`for_each` is `Expansion::Unknown`, and so
/// is one that fails (its diagnostics returned beside it).
pub(crate) fn expansion_lenient(
    ctx: &Ctx,
    module: &ModulePath,
    file: FileId,
    count: Option<&Expression>,
    for_each: Option<&Expression>,
    what: &str,
) -> (Expansion, Diagnostics) {
    let unknown = |e: Option<&Expression>| {
        e.and_then(|e| ctx.eval_in(module, &Repetition::None, file, e).ok())
            .is_some_and(|v| match &v {
                // A for_each map may be known while its values are not: that still expands.
                Value::Map(_) | Value::Object(_) => false,
                Value::Set(items) => items.iter().any(|i| !i.is_wholly_known()),
                _ => !v.is_wholly_known(),
            })
    };
    if unknown(count) || unknown(for_each) {
        return (Expansion::Unknown, Diagnostics::new());
    }
    match expansion(ctx, module, file, count, for_each, what) {
        Ok(Expansion::ForEach(m))
            if for_each.is_some_and(|e| ctx.refers_to_open(module, file, e)) =>
        {
            (Expansion::ForEachOpen(m), Diagnostics::new())
        }
        Ok(e) => (e, Diagnostics::new()),
        Err(d) => (Expansion::Unknown, d),
    }
}

/// The most instances one `count` (in every command) may ask for: a hostile `count = 1e8`
/// gets a diagnostic instead of exhausting memory. (`for_each` is bounded by the size of the
/// collection it is given, `value::MAX_ELEMENTS`.)
pub(crate) const MAX_INSTANCES: usize = 100_000;

/// Evaluates `count` / `for_each` into an expansion. Unknown values are errors that say so.
pub(crate) fn expansion(
    ctx: &Ctx,
    module: &ModulePath,
    file: FileId,
    count: Option<&Expression>,
    for_each: Option<&Expression>,
    what: &str,
) -> Result<Expansion, Diagnostics> {
    let span_of = |e: &Expression| crate::config::span_in(file, e);
    if let Some(e) = count {
        let v = ctx.eval_in(module, &Repetition::None, file, e)?;
        let err = |summary: &str, detail: String| {
            Diagnostics::from(Diagnostic::error(summary, detail).with_span(Some(span_of(e))))
        };
        if !v.is_wholly_known() {
            return Err(err(
                "Invalid count argument",
                format!("The \"count\" value of {what} depends on values that cannot be determined until apply, so Cairn cannot predict how many instances will be created. Use literal values, or values known at plan time (input variables, or attributes of resources that already exist)."),
            ));
        }
        let (v, _) = v.deep_unmark();
        // As Terraform: the value is converted to a number first, so `"1"` (a string, as
        // `.tf.json` writes every scalar it templates) counts one.
        let v = match convert(v.clone(), &Type::Number) {
            Ok(n) if !n.is_null() => n,
            _ => v,
        };
        return match v.as_number().and_then(|n| n.to_i64()) {
            Some(n) if n > MAX_INSTANCES as i64 => Err(err(
                "Invalid count argument",
                format!("The \"count\" value of {what} is {n}, beyond the bound of {MAX_INSTANCES} instances per resource or module call that keeps hostile input from exhausting memory."),
            )),
            Some(n) if n >= 0 => Ok(Expansion::Count(n as usize)),
            _ if v.is_null() => Err(err("Invalid count argument", "The given \"count\" argument value is null. An integer is required.".into())),
            _ => Err(err(
                "Invalid count argument",
                format!("The given \"count\" argument value is unsuitable: a whole number greater than or equal to zero is required, got {}.", crate::value::format_hcl(&v)),
            )),
        };
    }
    if let Some(e) = for_each {
        let v = ctx.eval_in(module, &Repetition::None, file, e)?;
        let err = |summary: &str, detail: String| {
            Diagnostics::from(Diagnostic::error(summary, detail).with_span(Some(span_of(e))))
        };
        if v.contains_sensitive() {
            return Err(err("Invalid for_each argument", "Sensitive values, or values derived from sensitive values, cannot be used as for_each arguments: they would be shown in instance addresses.".into()));
        }
        if v.is_unknown() {
            return Err(err(
                "Invalid for_each argument",
                format!("The \"for_each\" value of {what} depends on values that cannot be determined until apply, so Cairn cannot predict how many instances will be created. Use a map whose keys are known at plan time, or a set of known strings."),
            ));
        }
        return match &v {
            Value::Map(m) | Value::Object(m) => Ok(Expansion::ForEach(m.clone())),
            Value::Set(items) => {
                let mut m = ValueMap::new();
                for item in items {
                    match item.as_str() {
                        Some(s) => {
                            m.insert(s.to_string(), item.clone());
                        }
                        None if item.is_unknown() => {
                            return Err(err("Invalid for_each argument", format!("The \"for_each\" set of {what} includes values that cannot be determined until apply.")))
                        }
                        None => return Err(err("Invalid for_each argument", "The given \"for_each\" argument value is unsuitable: a set of strings is required; convert other elements with tostring().".into())),
                    }
                }
                Ok(Expansion::ForEach(m))
            }
            Value::Null(_) => Err(err("Invalid for_each argument", "The given \"for_each\" argument value is null. A map, or set of strings, is allowed.".into())),
            Value::List(_) | Value::Tuple(_) => Err(err(
                "Invalid for_each argument",
                "The given \"for_each\" argument value is unsuitable: the \"for_each\" argument must be a map, or set of strings, and you have provided a value of type tuple or list. Convert it with toset(), or build a map with a for expression.".into(),
            )),
            other => Err(err(
                "Invalid for_each argument",
                format!("The given \"for_each\" argument value is unsuitable: a map, or set of strings, is required, got {}.", other.type_of()),
            )),
        };
    }
    Ok(Expansion::Single)
}

/// Walks the graph with a phase. Returns the walk's outcome; diagnostics are in `ctx.diags`.
pub(crate) async fn run<P: Phase>(ctx: Arc<Ctx>, phase: Arc<P>) -> WalkOutcome {
    let graph = ctx.graph.clone();
    let observer = ctx.observer.clone();
    let limits = ctx.limits.clone();
    walk(
        &graph.dag,
        &limits,
        |id| -> NodeFuture {
            let ctx = ctx.clone();
            let phase = phase.clone();
            Box::pin(async move {
                if let Some(only) = &ctx.only {
                    if !only.contains(&id) {
                        return true;
                    }
                }
                match visit(&ctx, &phase, id).await {
                    Ok(()) => true,
                    Err(d) if phase.lenient() => {
                        // Reported, and unknown from here on: dependents still run.
                        ctx.report(d);
                        unknown_where_missing(&ctx, ctx.graph.node(id));
                        true
                    }
                    Err(d) => {
                        ctx.report(d);
                        false
                    }
                }
            })
        },
        |done, running, left| {
            observer.event(Progress::Counts {
                done,
                running,
                left,
            })
        },
    )
    .await
}

/// After a term failed in a lenient walk: every instance of it that has no value yet gets an
/// unknown one (a module call with no expansion yet expands unknown).
fn unknown_where_missing(ctx: &Ctx, node: &Node) {
    let mut values = ctx.values.write().expect("values lock");
    match node {
        Node::Var { module, name } => {
            let ty = ctx
                .module(module)
                .variables
                .get(name)
                .map_or(Type::Dynamic, |v| v.ty.clone());
            for m in values.instances_of(module) {
                if values.vars.get(&m).is_none_or(|x| !x.contains_key(name)) {
                    values.set_var(&m, name, Value::Unknown(ty.clone()));
                }
            }
        }
        Node::Local { module, name } => {
            for m in values.instances_of(module) {
                if values.locals.get(&m).is_none_or(|x| !x.contains_key(name)) {
                    values.set_local(&m, name, Value::unknown());
                }
            }
        }
        Node::Output { module, name } => {
            for m in values.instances_of(module) {
                if values.outputs.get(&m).is_none_or(|x| !x.contains_key(name)) {
                    values.set_output(&m, name, Value::unknown());
                }
            }
        }
        Node::Call { module, name } => {
            for m in values.instances_of(module) {
                if !values.calls.contains_key(&(m.clone(), name.clone())) {
                    values.set_call(&m, name, Expansion::Unknown);
                }
            }
        }
        Node::Resource { module, key } => {
            let k = (key.mode, key.type_.clone(), key.name.clone());
            for m in values.instances_of(module) {
                if values.resource(&m, &k).is_none() {
                    values.set_resource(
                        &m,
                        k.clone(),
                        ResourceValues {
                            expansion: Expansion::Unknown,
                            instances: InstanceValues::new(),
                            schemaless: false,
                        },
                    );
                }
            }
        }
        Node::Provider { .. } | Node::Orphan { .. } | Node::Destroy { .. } | Node::Check { .. } => {
        }
    }
}

async fn visit<P: Phase>(ctx: &Arc<Ctx>, phase: &Arc<P>, id: NodeId) -> Result<(), Diagnostics> {
    let node = ctx.graph.node(id).clone();
    match &node {
        Node::Var { module, name } => visit_var(ctx, module, name, phase.lenient()),
        Node::Local { module, name } => visit_local(ctx, module, name, phase.lenient()),
        Node::Output { module, name } => visit_output(ctx, phase, module, name),
        Node::Check { module, name } => visit_check(ctx, phase, module, name),
        Node::Call { module, name } => visit_call(ctx, module, name, phase.lenient()),
        Node::Provider { addr } => visit_provider(ctx, phase, addr).await,
        Node::Resource { module, key } => visit_resource(ctx, phase, module, key).await,
        Node::Orphan { addr } => {
            phase
                .orphans(
                    ctx,
                    vec![((**addr).clone(), OrphanReason::NoResourceConfig)],
                )
                .await
        }
        Node::Destroy { .. } => phase.extra(ctx, &node).await,
    }
}

/// A `locals` entry, evaluated in every instance of its module.
fn visit_local(
    ctx: &Arc<Ctx>,
    module: &ModulePath,
    name: &str,
    lenient: bool,
) -> Result<(), Diagnostics> {
    let local = &ctx.module(module).locals[name];
    let instances = ctx.values.read().expect("values lock").instances_of(module);
    for m in instances {
        if lenient && ctx.refers_to_open(&m, local.file, &local.expr) {
            ctx.mark_open(&m, format!("local.{name}"));
        }
        let v = ctx.eval_in(&m, &Repetition::None, local.file, &local.expr)?;
        ctx.values
            .write()
            .expect("values lock")
            .set_local(&m, name, v);
    }
    Ok(())
}

/// An `output`, evaluated in every instance of its module (a root output also goes to the
/// phase).
fn visit_output<P: Phase>(
    ctx: &Arc<Ctx>,
    phase: &Arc<P>,
    module: &ModulePath,
    name: &str,
) -> Result<(), Diagnostics> {
    let out = &ctx.module(module).outputs[name];
    let instances = ctx.values.read().expect("values lock").instances_of(module);
    for m in instances {
        if phase.lenient() && ctx.refers_to_open(&m, out.file, &out.value) {
            if let (Some(parent), Some(step)) = (m.parent(), m.0.last()) {
                ctx.mark_open(&parent, format!("module.{}", step.name));
            }
        }
        if !phase.lenient() {
            ctx.check_conditions(
                &m,
                &Repetition::None,
                out.file,
                &out.preconditions,
                None,
                ConditionKind::OutputPre,
                None,
            )?;
        }
        let mut v = ctx.eval_in(&m, &Repetition::None, out.file, &out.value)?;
        if out.sensitive {
            v = v.sensitive();
        } else if module.is_root() && v.contains_sensitive() {
            return Err(Diagnostic::error(
                "Output refers to sensitive values",
                "To reduce the risk of accidentally exporting sensitive data that was intended to be only internal, Cairn requires that any root module output containing sensitive data be explicitly marked as sensitive, to confirm your intent. Add sensitive = true to this output.",
            )
            .with_span(Some(out.span))
            .into());
        }
        if module.is_root() {
            phase.output(ctx, name, &v, out.sensitive);
        }
        ctx.values
            .write()
            .expect("values lock")
            .set_output(&m, name, v);
    }
    Ok(())
}

/// A `check` block's assertions, in every instance of its module (warnings).
fn visit_check<P: Phase>(
    ctx: &Arc<Ctx>,
    phase: &Arc<P>,
    module: &ModulePath,
    name: &str,
) -> Result<(), Diagnostics> {
    if phase.lenient() {
        return Ok(());
    }
    let check = &ctx.module(module).checks[name];
    // A scoped data source that could not be read leaves its check unevaluated (its
    // warning says why), as in Terraform.
    if ctx
        .failed_checks
        .lock()
        .expect("failed checks")
        .contains(&(module.clone(), name.to_string()))
    {
        return Ok(());
    }
    let instances = ctx.values.read().expect("values lock").instances_of(module);
    for m in instances {
        ctx.check_conditions(
            &m,
            &Repetition::None,
            check.file,
            &check.asserts,
            None,
            ConditionKind::CheckAssert {
                at_apply: phase.final_values(),
            },
            None,
        )?;
    }
    Ok(())
}

/// A module call's expansion (`count`/`for_each`), in every instance of the calling module.
fn visit_call(
    ctx: &Arc<Ctx>,
    module: &ModulePath,
    name: &str,
    lenient: bool,
) -> Result<(), Diagnostics> {
    let call = &ctx.module(module).calls[name];
    let instances = ctx.values.read().expect("values lock").instances_of(module);
    if ctx.config.module(&module.child(name, None)).is_none() {
        // Its source could not be loaded (reported when loading): outputs unknown.
        ctx.values
            .write()
            .expect("values lock")
            .unavailable
            .insert(module.child(name, None));
    }
    let mut diags = Diagnostics::new();
    for m in instances {
        let what = format!("module.{name}");
        let (count, for_each) = (call.count.as_ref(), call.for_each.as_ref());
        let e = if lenient {
            let (e, d) = expansion_lenient(ctx, &m, call.file, count, for_each, &what);
            diags.extend(d);
            e
        } else {
            expansion(ctx, &m, call.file, count, for_each, &what)?
        };
        ctx.values
            .write()
            .expect("values lock")
            .set_call(&m, name, e);
    }
    if diags.is_empty() {
        Ok(())
    } else {
        Err(diags)
    }
}

fn visit_var(
    ctx: &Arc<Ctx>,
    module: &ModulePath,
    name: &str,
    lenient: bool,
) -> Result<(), Diagnostics> {
    let var = &ctx.module(module).variables[name];
    if module.is_root() {
        let v = ctx
            .inputs
            .get(name)
            .cloned()
            .or_else(|| var.default.clone())
            .unwrap_or_else(|| Value::Null(var.ty.clone()));
        let v = if var.sensitive { v.sensitive() } else { v };
        ctx.values
            .write()
            .expect("values lock")
            .set_var(module, name, v);
        return Ok(());
    }
    let parent = module.parent().expect("a child module has a parent");
    let call_name = module.0.last().map(|s| s.name.clone()).unwrap_or_default();
    let call = &ctx.module(&parent).calls[&call_name];
    let instances = ctx.values.read().expect("values lock").instances_of(module);
    for child in instances {
        let parent_instance = child.parent().expect("child instance has a parent");
        let key = child.0.last().and_then(|s| s.key.clone());
        let rep = {
            let values = ctx.values.read().expect("values lock");
            values
                .calls
                .get(&(parent_instance.clone(), call_name.clone()))
                .map(|e| e.repetition(&key))
                .unwrap_or(Repetition::None)
        };
        let given = match call.inputs.get(name) {
            Some((expr, span)) => {
                if lenient && ctx.refers_to_open(&parent_instance, call.file, expr) {
                    ctx.mark_open(&child, format!("var.{name}"));
                }
                let v = ctx.eval_in(&parent_instance, &rep, call.file, expr)?;
                Some((v, *span))
            }
            None => None,
        };
        let v = match given {
            Some((v, _)) if v.is_null() && !var.nullable => var.default.clone().unwrap_or(v),
            Some((v, span)) => convert(v, &var.ty).map_err(|e| {
                Diagnostics::from(
                    Diagnostic::error(
                        "Invalid value for input variable",
                        format!("The given value is not suitable for module.{call_name}'s variable {name:?}: {e}."),
                    )
                    .with_span(Some(span)),
                )
            })?,
            None => match &var.default {
                Some(d) => d.clone(),
                None => {
                    return Err(Diagnostic::error(
                        "Missing required argument",
                        format!("The argument {name:?} is required by module.{call_name}, but no definition was found. Add {name} = ... to the module block."),
                    )
                    .with_span(Some(call.span))
                    .into())
                }
            },
        };
        let v = if var.sensitive { v.sensitive() } else { v };
        ctx.values
            .write()
            .expect("values lock")
            .set_var(&child, name, v.clone());
        for val in &var.validations {
            let ok = ctx.eval_in(&child, &Repetition::None, var.file, &val.condition)?;
            if ok.as_bool() == Some(false) {
                let msg = ctx
                    .eval_in(&child, &Repetition::None, var.file, &val.error_message)
                    .ok()
                    .and_then(|m| m.as_str().map(str::to_string))
                    .unwrap_or_default();
                return Err(Diagnostic::error(
                    "Invalid value for variable",
                    format!(
                        "{msg}\n\nThis was checked by the validation rule at {}.",
                        ctx.config.sources.location(val.span)
                    ),
                )
                .with_span(call.inputs.get(name).map(|(_, s)| *s).or(Some(call.span)))
                .into());
            }
        }
    }
    Ok(())
}

async fn visit_provider<P: Phase>(
    ctx: &Arc<Ctx>,
    phase: &Arc<P>,
    addr: &ProviderAddr,
) -> Result<(), Diagnostics> {
    let module = ctx.config.module(&addr.module);
    // An instance of a block with `for_each` has a node of its own only when the
    // configuration no longer has it (or in a destroy): configured as recorded in state.
    let block = module.filter(|_| addr.key.is_none()).and_then(|m| {
        m.providers.iter().find(|p| {
            super::graph::package_of_local(m, &p.name) == addr.package && p.alias == addr.alias
        })
    });
    let Some(provider) = ctx.registry.package(&addr.package).cloned() else {
        if phase.lenient() {
            // A provider Cairn does not have: its configuration as written, unchecked.
            let config = match block {
                Some(b) => {
                    let values = ctx.values.read().expect("values lock");
                    let paths = ctx.paths(&addr.module);
                    let scope = InstanceScope {
                        values: &values,
                        module: &addr.module,
                        repetition: &Repetition::None,
                        file: b.file,
                        paths: &paths,
                    };
                    eval_body(&b.body, None, &scope)?
                }
                None => Value::Object(ValueMap::new()),
            };
            return phase.provider(ctx, addr, config, block.is_none()).await;
        }
        let known: Vec<&str> = ctx.registry.package_names().collect();
        return Err(Diagnostic::error(
            "Unknown provider",
            format!(
                "There is no provider named {:?}. The built-in providers are: {}.",
                addr.package,
                known.join(", ")
            ),
        )
        .with_span(block.map(|b| b.span))
        .into());
    };
    if let Some(b) = block.filter(|b| b.for_each.is_some()) {
        return visit_provider_each(ctx, phase, addr, b, &provider).await;
    }
    let (config, is_default) = match block {
        Some(b) => {
            let instances = ctx
                .values
                .read()
                .expect("values lock")
                .instances_of(&addr.module);
            if instances.len() != 1 || instances[0] != addr.module {
                return Err(Diagnostic::error(
                    "Provider configuration in an expanded module",
                    format!("{addr} is declared in a module called with count or for_each. Declare the provider in the calling module and pass it in with providers = {{ ... }}."),
                )
                .with_span(Some(b.span))
                .into());
            }
            let values = ctx.values.read().expect("values lock");
            let paths = ctx.paths(&addr.module);
            let scope = InstanceScope {
                values: &values,
                module: &addr.module,
                repetition: &Repetition::None,
                file: b.file,
                paths: &paths,
            };
            (
                eval_config_body(
                    &b.body,
                    Some(&provider.schema().provider),
                    &scope,
                    None,
                    b.json,
                )?,
                false,
            )
        }
        None if ctx.state_provider_config(addr).is_some() && !ctx.graph_uses_default(addr) => {
            // Only in state (its resources are orphans): configure as it was recorded.
            (ctx.state_provider_config(addr).expect("checked"), false)
        }
        None => (ctx.registry.default_config(&addr.package), true),
    };
    let diags = provider.check_config(&config);
    if diags.has_errors() {
        let span = block.map(|b| b.span);
        return Err(diags
            .into_iter()
            .map(|d| d.with_span(span).with_address(addr))
            .collect());
    }
    ctx.report(diags);
    phase.provider(ctx, addr, config, is_default).await
}

/// An aliased provider block with `for_each` (OpenTofu's provider iteration): one provider
/// instance per element, `addr` with its key, each configured with its own `each.key` and
/// `each.value`. The collection must be known before any provider or resource is: only
/// variables, locals and constants may make it (OpenTofu's static evaluation).
async fn visit_provider_each<P: Phase>(
    ctx: &Arc<Ctx>,
    phase: &Arc<P>,
    addr: &ProviderAddr,
    b: &crate::config::ProviderBlock,
    provider: &Arc<dyn crate::provider::Provider>,
) -> Result<(), Diagnostics> {
    // Evaluated early, at load (`config::load`, OpenTofu's static evaluation: variables,
    // locals and constants only), where what it cannot be is reported.
    let mut diags = Diagnostics::new();
    let Some(each) = b.each.clone() else {
        if phase.lenient() {
            // Inspect: the instances are not known; the block's configuration as written.
            return phase
                .provider(ctx, addr, Value::Object(ValueMap::new()), false)
                .await;
        }
        return Err(Diagnostic::error(
            "Invalid provider for_each",
            format!(
                "The for_each of {addr} could not be evaluated when the configuration was \
                 loaded (see the errors there): a provider's instances must be known before \
                 any provider or resource is."
            ),
        )
        .with_span(b.for_each.as_ref().map(|fe| at_expr(b.file, fe)))
        .into());
    };
    for (k, v) in each {
        let inst = addr.instance(Some(InstanceKey::Str(k.clone())));
        let rep = Repetition::Each(k, v);
        let config = {
            let values = ctx.values.read().expect("values lock");
            let paths = ctx.paths(&addr.module);
            let scope = InstanceScope {
                values: &values,
                module: &addr.module,
                repetition: &rep,
                file: b.file,
                paths: &paths,
            };
            eval_config_body(
                &b.body,
                Some(&provider.schema().provider),
                &scope,
                None,
                b.json,
            )
        };
        let config = match config {
            Ok(c) => c,
            Err(d) => {
                diags.extend(d.into_iter().map(|x| x.with_address(&inst)));
                continue;
            }
        };
        let checked = provider.check_config(&config);
        if checked.has_errors() {
            diags.extend(
                checked
                    .into_iter()
                    .map(|d| d.with_span(Some(b.span)).with_address(&inst)),
            );
            continue;
        }
        ctx.report(checked);
        if let Err(d) = phase.provider(ctx, &inst, config, false).await {
            diags.extend(d);
        }
    }
    if diags.has_errors() {
        Err(diags)
    } else {
        ctx.report(diags);
        Ok(())
    }
}

/// The span of an expression in `file`.
fn at_expr(file: FileId, e: &Expression) -> Span {
    crate::config::span_in(file, e)
}

impl Ctx {
    /// A provider instance's configuration as it may be written down (state, plan): the
    /// arguments its block sets from ephemeral values null. The provider itself is
    /// configured with them.
    pub(crate) fn recordable_provider_config(&self, addr: &ProviderAddr, config: &Value) -> Value {
        let Some(m) = self.config.module(&addr.module) else {
            return config.clone();
        };
        let Some(b) = m.providers.iter().find(|p| {
            super::graph::package_of_local(m, &p.name) == addr.package && p.alias == addr.alias
        }) else {
            return config.clone();
        };
        let names = crate::config::ephemeral_arguments(m, &b.body);
        match config {
            Value::Object(attrs) if !names.is_empty() => Value::Object(
                attrs
                    .iter()
                    .map(|(k, v)| match names.contains(k) {
                        true => (k.clone(), Value::Null(v.type_of())),
                        false => (k.clone(), v.clone()),
                    })
                    .collect(),
            ),
            v => v.clone(),
        }
    }

    /// The configuration recorded in state for a provider instance, if any.
    pub(crate) fn state_provider_config(&self, addr: &ProviderAddr) -> Option<Value> {
        self.state_providers
            .get(addr)
            .map(|p| Value::from_stored(&p.config))
    }
    /// True when some configured resource uses this (synthesized default) provider address.
    pub(crate) fn graph_uses_default(&self, addr: &ProviderAddr) -> bool {
        self.graph.providers_of_resources().any(|a| a == addr)
    }
}

async fn visit_resource<P: Phase>(
    ctx: &Arc<Ctx>,
    phase: &Arc<P>,
    module: &ModulePath,
    key: &ResourceKey,
) -> Result<(), Diagnostics> {
    let visit = ResourceVisit::new(ctx, phase.lenient(), module, key)?;
    let instances = ctx.values.read().expect("values lock").instances_of(module);
    let mut diags = Diagnostics::new();
    let mut produced: BTreeSet<ResourceInstanceAddr> = BTreeSet::new();
    for m in &instances {
        let resource_addr = ResourceAddr::new(m.clone(), key.mode, &key.type_, &key.name);
        let Some(exp) = visit.expansion(ctx, m, &resource_addr, &mut diags) else {
            continue;
        };
        // Evaluate every instance's configuration (synchronous), then let the phase handle
        // them concurrently: provider calls inside are bounded by the semaphore.
        let ready = visit.ready_instances(ctx, m, &exp, &resource_addr, &mut produced, &mut diags);
        let values = visit
            .run_instances(ctx, phase, m, &exp, &resource_addr, ready, &mut diags)
            .await;
        ctx.values.write().expect("values lock").set_resource(
            m,
            (key.mode, key.type_.clone(), key.name.clone()),
            ResourceValues {
                expansion: exp,
                instances: InstanceValues::from_pairs(values),
                schemaless: visit.schemaless,
            },
        );
    }
    // Instances in state that this configuration no longer produces.
    let orphans = visit.orphans(ctx, &instances, &produced, diags.has_errors());
    if !orphans.is_empty() {
        if let Err(d) = phase.orphans(ctx, orphans).await {
            diags.extend(d);
        }
    }
    if diags.has_errors() {
        Err(diags)
    } else {
        ctx.report(diags);
        Ok(())
    }
}

/// One resource block as the walk visits it: what every instance of it shares.
struct ResourceVisit<'a> {
    res: &'a Resource,
    module: &'a ModulePath,
    key: &'a ResourceKey,
    provider: ProviderAddr,
    /// Where the instance key of its provider comes from, when its provider block has
    /// `for_each`.
    provider_key: Option<&'a super::graph::ProviderKeyAt>,
    schema: Arc<Block>,
    /// No schema is available (see `Instance::schemaless`).
    schemaless: bool,
    lenient: bool,
    /// `-target` naming some instances only: the others are left as they are.
    filter: Option<&'a super::exclude::InstanceScope>,
}

impl<'a> ResourceVisit<'a> {
    fn new(
        ctx: &'a Ctx,
        lenient: bool,
        module: &'a ModulePath,
        key: &'a ResourceKey,
    ) -> Result<Self, Diagnostics> {
        let res: &Resource = &ctx.module(module).resources[key];
        let Some(provider) = ctx.graph.provider_of(module, key).cloned() else {
            // Its provider could not be resolved: that was reported when the graph was built.
            return Err(Diagnostics::new());
        };
        let schema = ctx
            .available_schema(&provider.package, key.mode, &key.type_, res.span, lenient)
            .map_err(Diagnostics::from)?;
        let filter = ctx
            .graph
            .id(&Node::Resource {
                module: module.clone(),
                key: key.clone(),
            })
            .and_then(|id| ctx.only_instances.get(&id));
        let provider_key = ctx.graph.provider_key.get(&(module.clone(), key.clone()));
        Ok(ResourceVisit {
            res,
            module,
            key,
            provider,
            provider_key,
            schemaless: schema.is_none(),
            schema: schema.unwrap_or_default(),
            lenient,
            filter,
        })
    }

    fn in_scope(&self, a: &ResourceInstanceAddr) -> bool {
        self.filter.is_none_or(|s| s.covers(a))
    }

    /// The provider instance of one resource instance: the block's, or for a block with
    /// `for_each` the instance its key expression chooses (evaluated in the resource
    /// instance, or in the module call whose `providers` map chooses it).
    fn provider_instance(
        &self,
        ctx: &Ctx,
        m: &ModulePath,
        rep: &Repetition,
        addr: &ResourceInstanceAddr,
    ) -> Result<ProviderAddr, Diagnostics> {
        let Some(at) = self.provider_key else {
            return Ok(self.provider.clone());
        };
        let (module, rep) = if at.levels_up == 0 {
            (m.clone(), rep.clone())
        } else {
            let n = m.0.len().saturating_sub(at.levels_up);
            let caller = ModulePath(m.0[..n].to_vec());
            let step = &m.0[n];
            let rep = ctx
                .values
                .read()
                .expect("values lock")
                .calls
                .get(&(caller.clone(), step.name.clone()))
                .map(|e| e.repetition(&step.key))
                .unwrap_or(Repetition::None);
            (caller, rep)
        };
        let v = ctx.eval_in(&module, &rep, at.span.file, &at.expr)?;
        let bad = |detail: String| -> Diagnostics {
            Diagnostic::error("Invalid provider instance key", detail)
                .with_span(Some(at.span))
                .with_address(addr)
                .into()
        };
        let key = match &v {
            _ if !v.is_wholly_known() => {
                if self.lenient {
                    return Ok(self.provider.clone());
                }
                return Err(bad(format!(
                    "The instance key of {}'s provider is not known until apply: a provider \
                     instance must be chosen with values known at plan (each.key, \
                     count.index, variables, locals).",
                    addr
                )));
            }
            Value::String(s) => s.to_string(),
            Value::Number(n) => n.to_string(),
            _ => {
                return Err(bad(format!(
                    "A provider instance key is a string (a key of the provider's for_each), \
                     not {}.",
                    crate::eval::convert::friendly_name(&v.type_of(), false)
                )))
            }
        };
        let inst = self.provider.instance(Some(InstanceKey::Str(key)));
        if !self.lenient && ctx.provider_slot(&inst).is_none() {
            return Err(bad(format!(
                "{addr} uses the provider instance {inst}, which the for_each of \
                 {} does not have.",
                self.provider
            )));
        }
        Ok(inst)
    }

    /// The resource's `count`/`for_each` in module instance `m`; `None` when it failed (the
    /// error is in `diags`; a lenient phase never fails).
    fn expansion(
        &self,
        ctx: &Ctx,
        m: &ModulePath,
        resource_addr: &ResourceAddr,
        diags: &mut Diagnostics,
    ) -> Option<Expansion> {
        let res = self.res;
        let (count, for_each) = (res.count.as_deref(), res.for_each.as_deref());
        let what = resource_addr.to_string();
        if self.lenient {
            let (e, d) = expansion_lenient(ctx, m, res.file, count, for_each, &what);
            diags.extend(d);
            return Some(e);
        }
        match expansion(ctx, m, res.file, count, for_each, &what) {
            Ok(e) => Some(e),
            Err(d) => {
                diags.extend(d);
                None
            }
        }
    }

    /// One instance's configuration, evaluated in its scope (and where each argument is
    /// written, for a lenient phase).
    fn config(
        &self,
        ctx: &Ctx,
        m: &ModulePath,
        rep: &Repetition,
        addr: &ResourceInstanceAddr,
    ) -> Result<(Value, crate::eval::Sources), Diagnostics> {
        let res = self.res;
        let values = ctx.values.read().expect("values lock");
        let paths = ctx.paths(self.module);
        let scope = InstanceScope {
            values: &values,
            module: m,
            repetition: rep,
            file: res.file,
            paths: &paths,
        };
        let schema = (!self.schemaless).then_some(&*self.schema);
        if res.generated {
            // Filled in from the imported object by the plan (`imports.rs`).
            Ok((
                Value::Null(block_type(schema.unwrap_or(&Default::default()))),
                Vec::new(),
            ))
        } else if self.lenient {
            eval_body_with_sources(&res.body, schema, &scope, res.json)
                .or_else(|d| self.lenient_partial(ctx, &scope, schema, d, addr))
        } else {
            eval_config_body(&res.body, schema, &scope, None, res.json).map(|v| (v, Vec::new()))
        }
    }

    /// Inspect: a body that failed to evaluate, again without the arguments that fail on
    /// their own (a conditional whose results differ in type, say): those become unknown,
    /// their diagnostics are reported, and the resource stays. When the rest still fails
    /// (a nested block, a required argument), the first failure stands.
    fn lenient_partial(
        &self,
        ctx: &Ctx,
        scope: &InstanceScope<'_>,
        schema: Option<&Block>,
        failure: Diagnostics,
        addr: &ResourceInstanceAddr,
    ) -> Result<(Value, crate::eval::Sources), Diagnostics> {
        let res = self.res;
        let failed: Vec<String> = res
            .body
            .attributes()
            .filter(|a| eval(&a.value, scope).is_err())
            .map(|a| a.key.as_str().to_string())
            .collect();
        if failed.is_empty() {
            return Err(failure);
        }
        let mut body = res.body.clone();
        for k in &failed {
            body.remove_attribute(k);
        }
        let Ok((mut value, mut sources)) = eval_body_with_sources(&body, schema, scope, res.json)
        else {
            return Err(failure);
        };
        for a in res.body.attributes() {
            if failed.iter().any(|k| k == a.key.as_str()) {
                sources.push((
                    a.key.as_str().to_string(),
                    crate::config::span_in(res.file, a),
                ));
            }
        }
        if let Value::Object(m) = &mut value {
            for k in failed {
                let ty = schema
                    .and_then(|s| s.attributes.get(&k))
                    .map(|a| a.ty.clone())
                    .unwrap_or(Type::Dynamic);
                m.insert(k, Value::Unknown(ty));
            }
        }
        ctx.report(failure.into_iter().map(|d| d.with_address(addr)).collect());
        Ok((value, sources))
    }

    /// The instances of module instance `m` that go to the phase: each with its evaluated
    /// configuration, in scope, and past its preconditions. Every instance the configuration
    /// produces (whether it goes or not) is added to `produced`.
    fn ready_instances(
        &self,
        ctx: &Ctx,
        m: &ModulePath,
        exp: &Expansion,
        resource_addr: &ResourceAddr,
        produced: &mut BTreeSet<ResourceInstanceAddr>,
        diags: &mut Diagnostics,
    ) -> Vec<Instance> {
        let res = self.res;
        let mut ready: Vec<Instance> = Vec::new();
        for k in exp.keys() {
            let rep = exp.repetition(&k);
            let addr = resource_addr.instance(k.clone());
            let config = self.config(ctx, m, &rep, &addr);
            if !self.in_scope(&addr) {
                // Not targeted: not planned, and not an orphan either.
                produced.insert(addr);
                continue;
            }
            let (config, sources) = match config {
                Ok(c) => c,
                Err(d) => {
                    diags.extend(d.into_iter().map(|x| x.with_address(&addr)));
                    continue;
                }
            };
            let provider = match self.provider_instance(ctx, m, &rep, &addr) {
                Ok(p) => p,
                Err(d) => {
                    produced.insert(addr);
                    diags.extend(d);
                    continue;
                }
            };
            // Preconditions, before the provider sees the instance (inspect reports what
            // is written, so it checks none).
            if !self.lenient {
                if let Err(d) = ctx.check_conditions(
                    m,
                    &rep,
                    res.file,
                    &res.lifecycle.preconditions,
                    None,
                    ConditionKind::ResourcePre,
                    Some(&addr),
                ) {
                    // The instance is still produced: its object is not an orphan.
                    produced.insert(addr);
                    diags.extend(d);
                    continue;
                }
            }
            produced.insert(addr.clone());
            ready.push(Instance {
                addr,
                static_module: self.module.clone(),
                key: self.key.clone(),
                provider,
                config,
                schema: self.schema.clone(),
                schemaless: self.schemaless,
                unknown_expansion: *exp == Expansion::Unknown,
                sources,
                rep,
            });
        }
        ready
    }

    /// Hands the ready instances to the phase (concurrently when there are several) and
    /// checks their postconditions; returns each instance's value, in completion order.
    #[allow(clippy::too_many_arguments)]
    async fn run_instances<P: Phase>(
        &self,
        ctx: &Arc<Ctx>,
        phase: &Arc<P>,
        m: &ModulePath,
        exp: &Expansion,
        resource_addr: &ResourceAddr,
        mut ready: Vec<Instance>,
        diags: &mut Diagnostics,
    ) -> Vec<(Option<InstanceKey>, Value)> {
        let (res, lenient) = (self.res, self.lenient);
        let mut values: Vec<(Option<InstanceKey>, Value)> = Vec::new();
        if ready.len() == 1 {
            // One instance (no count/for_each, the common case): nothing to run beside it, so
            // no task is spawned for it.
            let inst = ready.pop().expect("one instance");
            let k = inst.addr.key.clone();
            let addr = inst.addr.clone();
            match phase.instance(ctx, inst).await {
                Ok(v) => {
                    if let Err(d) = postconditions(ctx, res, m, exp, &addr, &v, lenient) {
                        diags.extend(d);
                    }
                    values.push((k, v));
                }
                Err(d) => diags.extend(d),
            }
            return values;
        }
        let mut tasks = tokio::task::JoinSet::new();
        for inst in ready {
            let ctx = ctx.clone();
            let phase = phase.clone();
            tasks.spawn(async move {
                let k = inst.addr.key.clone();
                (k, phase.instance(&ctx, inst).await)
            });
        }
        while let Some(joined) = tasks.join_next().await {
            let (k, result) = joined.expect("instance task panicked");
            let k = match ctx.limits.broken(Sabotage::InstancesInCompletionOrder) {
                true => exp.keys().get(values.len()).cloned().unwrap_or(k),
                false => k,
            };
            match result {
                Ok(v) => {
                    let addr = resource_addr.instance(k.clone());
                    if let Err(d) = postconditions(ctx, res, m, exp, &addr, &v, lenient) {
                        diags.extend(d);
                    }
                    values.push((k, v));
                }
                Err(d) => diags.extend(d),
            }
        }
        values
    }

    /// The instances in state that the configuration no longer produces, with why. After an
    /// error, only those of module instances that are gone (the others may just have failed
    /// to evaluate).
    fn orphans(
        &self,
        ctx: &Ctx,
        instances: &[ModulePath],
        produced: &BTreeSet<ResourceInstanceAddr>,
        failed: bool,
    ) -> Vec<(ResourceInstanceAddr, OrphanReason)> {
        let in_state = ctx.state_instances.of(self.module, self.key);
        in_state
            .into_iter()
            .filter(|a| !produced.contains(a) && self.in_scope(a))
            .filter(|a| !failed || !instances.contains(&a.resource.module))
            .map(|a| {
                let reason = if !instances.contains(&a.resource.module) {
                    OrphanReason::NoModule
                } else if matches!(a.key, Some(InstanceKey::Str(_))) {
                    OrphanReason::EachKey
                } else {
                    OrphanReason::CountIndex
                };
                (a.clone(), reason)
            })
            .collect()
    }
}

/// The instances state holds of each static resource (managed instances with a current
/// object, and data results), for finding the ones the configuration no longer produces.
///
/// The state's maps are shared, not copied (`cairn_state::Shared`), and are sorted by address:
/// the instances of a resource in a module instance without keys (the root module, a call
/// without `count`/`for_each`) are one range of them. Only instances inside module instances
/// with keys, whose static resource is spread over one range per module instance, are listed
/// here by static resource. (At 100,000 resources a map of every instance by resource cost
/// about 30 MB for the whole walk; issue 31.)
#[derive(Default)]
pub(crate) struct StateInstances {
    pub(crate) managed:
        cairn_state::Shared<BTreeMap<ResourceInstanceAddr, cairn_state::ResourceInstance>>,
    pub(crate) data: cairn_state::Shared<BTreeMap<ResourceInstanceAddr, cairn_state::DataObject>>,
    pub(crate) keyed: BTreeMap<(ModulePath, ResourceKey), Vec<ResourceInstanceAddr>>,
}

impl StateInstances {
    pub(crate) fn of(&self, module: &ModulePath, key: &ResourceKey) -> Vec<&ResourceInstanceAddr> {
        let resource = ResourceAddr {
            module: module.clone(),
            mode: key.mode,
            type_: key.type_.clone(),
            name: key.name.clone(),
        };
        let start = ResourceInstanceAddr {
            resource,
            key: None,
        };
        let mut out: Vec<&ResourceInstanceAddr> = match key.mode {
            Mode::Data => self
                .data
                .range(&start..)
                .take_while(|(a, _)| a.resource == start.resource)
                .map(|(a, _)| a)
                .collect(),
            _ => self
                .managed
                .range(&start..)
                .take_while(|(a, _)| a.resource == start.resource)
                .filter(|(_, i)| i.current.is_some())
                .map(|(a, _)| a)
                .collect(),
        };
        if let Some(keyed) = self.keyed.get(&(module.clone(), key.clone())) {
            out.extend(keyed);
        }
        out
    }
}

/// Checks a resource instance's postconditions against its value (planned, then applied).
fn postconditions(
    ctx: &Ctx,
    res: &Resource,
    module: &ModulePath,
    exp: &Expansion,
    addr: &ResourceInstanceAddr,
    value: &Value,
    lenient: bool,
) -> Result<(), Diagnostics> {
    if lenient || res.lifecycle.postconditions.is_empty() {
        return Ok(());
    }
    ctx.check_conditions(
        module,
        &exp.repetition(&addr.key),
        res.file,
        &res.lifecycle.postconditions,
        Some(value),
        ConditionKind::ResourcePost,
        Some(addr),
    )
}

/// The value of an instance planned without its provider (inspect, or a provider whose
/// configuration is unknown): the configuration, with every computed attribute the
/// configuration leaves null unknown.
pub(crate) fn plan_without_provider(schema: &Block, config: &Value) -> Value {
    let mut attrs = config.attributes().cloned().unwrap_or_default();
    for (name, a) in &schema.attributes {
        let current = attrs.get(name);
        if a.write_only {
            // Never planned: its value goes to the provider only.
            attrs.insert(name.clone(), Value::Null(a.ty.clone()));
        } else if a.computed && current.is_none_or(Value::is_null) {
            attrs.insert(name.clone(), Value::Unknown(a.ty.clone()));
        } else if current.is_none() {
            attrs.insert(name.clone(), Value::Null(a.ty.clone()));
        }
    }
    Value::Object(attrs)
}

/// The first path at which `planned` knows a value that `actual` contradicts (the contract
/// check between a plan and what apply produced, or between plan and final plan).
pub(crate) fn contradiction(planned: &Value, actual: &Value) -> Option<String> {
    fn walk(p: &Value, a: &Value, path: &mut Vec<String>) -> Option<String> {
        let (p, a) = (p.unmarked(), a.unmarked());
        match (p, a) {
            (Value::Unknown(_), _) => None,
            (Value::Object(pm) | Value::Map(pm), Value::Object(am) | Value::Map(am)) => {
                for (k, pv) in pm {
                    path.push(k.clone());
                    let r = match am.get(k) {
                        Some(av) => walk(pv, av, path),
                        None if pv.is_null() => None,
                        None => Some(path.join(".")),
                    };
                    path.pop();
                    if r.is_some() {
                        return r;
                    }
                }
                None
            }
            (Value::List(pv) | Value::Tuple(pv), Value::List(av) | Value::Tuple(av))
                if pv.len() == av.len() =>
            {
                for (i, (x, y)) in pv.iter().zip(av).enumerate() {
                    path.push(format!("[{i}]"));
                    let r = walk(x, y, path);
                    path.pop();
                    if r.is_some() {
                        return r;
                    }
                }
                None
            }
            (Value::Set(pv), Value::Set(av)) if !p.is_wholly_known() && pv.len() <= av.len() => {
                None
            }
            (Value::Null(_), Value::Null(_)) => None,
            (Value::Number(x), Value::Number(y)) if x == y => None,
            _ if p == a => None,
            _ => Some(if path.is_empty() {
                "(the whole object)".to_string()
            } else {
                path.join(".")
            }),
        }
    }
    walk(planned, actual, &mut Vec::new())
}

/// The type of a schema block as an object type (for unknown values of whole instances).
pub(crate) fn block_type(schema: &Block) -> Type {
    Type::object(
        schema
            .attributes
            .iter()
            .map(|(k, a)| (k.clone(), a.ty.clone())),
    )
}

/// What a condition block guards, for its diagnostic's summary.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum ConditionKind {
    ResourcePre,
    ResourcePost,
    OutputPre,
    /// A `check` block's `assert`: failures are warnings; `at_apply` says whether values are
    /// final (at plan, one still unknown is said to be known after apply).
    CheckAssert {
        at_apply: bool,
    },
}

/// A scope with `self`: a postcondition's view of the object it checks.
pub(crate) struct SelfScope<'a> {
    pub(crate) inner: InstanceScope<'a>,
    pub(crate) this: &'a Value,
}

impl crate::eval::Scope for SelfScope<'_> {
    fn resolve(&self, subject: &crate::eval::Subject) -> Result<Value, crate::eval::ScopeError> {
        match subject {
            crate::eval::Subject::SelfRef => Ok(self.this.clone()),
            other => self.inner.resolve(other),
        }
    }
    fn file(&self) -> FileId {
        self.inner.file()
    }
    fn module_dir(&self) -> &std::path::Path {
        self.inner.module_dir()
    }
    fn root_dir(&self) -> &std::path::Path {
        self.inner.root_dir()
    }
    fn is_open(&self, subject: &crate::eval::Subject) -> bool {
        self.inner.is_open(subject)
    }
    fn provider_functions(&self) -> Option<&dyn crate::eval::ProviderFunctions> {
        self.inner.provider_functions()
    }
}

impl Ctx {
    /// Checks condition blocks (`precondition`, `postcondition`) in a module instance, with
    /// `this` as `self` for postconditions. A condition still unknown passes for now: it is
    /// checked again when its values are known (the apply walk evaluates it again), as in
    /// Terraform. A false one is an error with its `error_message` at the condition.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn check_conditions(
        &self,
        module: &ModulePath,
        rep: &Repetition,
        file: FileId,
        conditions: &[crate::config::Validation],
        this: Option<&Value>,
        kind: ConditionKind,
        addr: Option<&ResourceInstanceAddr>,
    ) -> Result<(), Diagnostics> {
        if conditions.is_empty() {
            return Ok(());
        }
        let values = self.values.read().expect("values lock");
        let paths = self.paths(&module.without_keys());
        let inner = InstanceScope {
            values: &values,
            module,
            repetition: rep,
            file,
            paths: &paths,
        };
        let unit = Value::null();
        let scope = SelfScope {
            inner,
            this: this.unwrap_or(&unit),
        };
        let mut diags = Diagnostics::new();
        for c in conditions {
            let with_addr = |d: Diagnostic| match addr {
                Some(a) => d.with_address(a),
                None => d,
            };
            let v = eval(&c.condition, &scope)?;
            if !v.is_wholly_known() {
                if kind == (ConditionKind::CheckAssert { at_apply: false }) {
                    diags.push(
                        Diagnostic::warning(
                            "Check block assertion known after apply",
                            "The condition could not be evaluated at this time, a result will be known when this plan is applied.",
                        )
                        .with_span(Some(c.span)),
                    );
                }
                continue;
            }
            let ok = match v.as_bool() {
                Some(b) => b,
                None => {
                    let what = if v.is_null() {
                        "null".to_string()
                    } else {
                        format!("a value of type {}", v.type_of())
                    };
                    diags.push(with_addr(
                        Diagnostic::error(
                            "Invalid condition result",
                            format!("Condition expression must return either true or false, not {what}."),
                        )
                        .with_span(Some(c.span)),
                    ));
                    continue;
                }
            };
            if ok {
                continue;
            }
            let message = match eval(&c.error_message, &scope) {
                Ok(m) => match m.unmarked().as_str() {
                    Some(s) => s.to_string(),
                    None => "(the error message is not a known string)".to_string(),
                },
                Err(d) => {
                    diags.extend(d);
                    continue;
                }
            };
            let summary = match kind {
                ConditionKind::ResourcePre => "Resource precondition failed",
                ConditionKind::ResourcePost => "Resource postcondition failed",
                ConditionKind::OutputPre => "Module output value precondition failed",
                ConditionKind::CheckAssert { .. } => "Check block assertion failed",
            };
            diags.push(with_addr(
                Diagnostic::error(summary, message).with_span(Some(c.span)),
            ));
        }
        if let ConditionKind::CheckAssert { .. } = kind {
            // A check never stops a run: its findings are warnings.
            drop(values);
            self.report_check(diags.into_iter().map(Diagnostic::into_warning).collect());
            return Ok(());
        }
        if diags.has_errors() {
            Err(diags)
        } else {
            Ok(())
        }
    }
}
