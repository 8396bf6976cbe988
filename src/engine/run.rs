//! The engine's entry points: one function per lifecycle command. Each loads the
//! configuration, opens the state, resolves pending operations, and runs its phases.

use super::apply::{add_destroys, finishing_events, ApplyPhase};
use super::core::{run as walk_phase, Ctx};
use super::graph::{add_orphans, build, Node, TermGraph};
use super::inspect::{InspectPhase, Inspected};
use super::journal::{state_error, Journal};
use super::plan::PlanPhase;
use super::progress::{Observer, Progress};
use super::providers::{canonical, stack_config, Registry};
use super::recover::resolve;
use super::refresh::refresh as refresh_pass;
use super::sabotage::Sabotage;
pub use super::session::finish_recorded;
use super::session::RunSession;
use super::values::{InstanceScope, Repetition, Values};
use super::walk::Limits;
use crate::config::{Config, ResourceKey};
use crate::diag::{Diagnostic, Diagnostics};
use crate::plan::{
    Action, Change, Drift, OutputChange, Plan, PlanMode, PlanRequest, ProviderChange,
};
use crate::provider::Provider;
use crate::value::Value;
use cairn_graph::NodeId;
use cairn_state::{
    EventBody, ModulePath, OpenOptions, ProviderAddr, ResourceInstanceAddr, RunOutcome, RunSummary,
    Snapshot, Store, Target,
};
use sha2::Digest;
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

/// Everything a lifecycle command needs to know. The CLI fills it; the engine reads no
/// environment of its own (`env` is the process environment, passed in).
#[derive(Clone)]
pub struct Options {
    /// The root module's directory (the working directory after `-chdir`).
    pub dir: PathBuf,
    pub state_dir: PathBuf,
    pub vars: Vec<crate::config::VarArg>,
    pub env: BTreeMap<String, String>,
    pub parallelism: usize,
    pub refresh: bool,
    pub targets: Vec<Target>,
    pub replace: Vec<ResourceInstanceAddr>,
    pub lock_timeout: Duration,
    pub command: String,
    pub args: Vec<String>,
    /// Set by Ctrl-C (or SIGTERM): no new step starts.
    pub stop: Arc<AtomicBool>,
    /// Notified (once, with `notify_one`) by Ctrl-C after `stop` is set: every configured
    /// provider instance is told to stop, so its calls in flight give up early.
    pub interrupted: Arc<tokio::sync::Notify>,
    /// The provider packages; `None` means the built-in ones.
    pub packages: Option<BTreeMap<String, Arc<dyn Provider>>>,
    /// A deliberately broken rule, for the property tests only (see `sabotage.rs`); `None`
    /// unless test code sets it. Not reachable from the CLI or the environment.
    #[doc(hidden)]
    pub sabotage: Option<Sabotage>,
    /// `cairn inspect FILE.tf`: load only this file of `dir` (and the modules it calls).
    pub only_file: Option<PathBuf>,
    /// `cairn import ADDR ID`: the instance to import and its id (see [`import`]).
    pub import: Option<(ResourceInstanceAddr, String)>,
    /// `plan -generate-config-out`: import blocks without a resource block get a generated
    /// one (`Config::generate_import_blocks`), filled in from the imported object.
    pub generate_config: bool,
    /// The selected workspace (`terraform.workspace`); `None`: `default` (for `inspect`:
    /// the one `terraform workspace select` recorded in `.terraform/environment`).
    pub workspace: Option<String>,
}

impl Options {
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        let dir = dir.into();
        Options {
            state_dir: dir.join(".cairn"),
            dir,
            vars: Vec::new(),
            env: BTreeMap::new(),
            parallelism: 10,
            refresh: true,
            targets: Vec::new(),
            replace: Vec::new(),
            lock_timeout: Duration::ZERO,
            command: "cairn".into(),
            args: Vec::new(),
            stop: Arc::new(AtomicBool::new(false)),
            interrupted: Arc::new(tokio::sync::Notify::new()),
            packages: None,
            sabotage: None,
            only_file: None,
            import: None,
            generate_config: false,
            workspace: None,
        }
    }
}

/// What a command produced: its result (when it got that far), every diagnostic, notes for
/// the user, and the configuration (to render diagnostics' source snippets).
pub struct Report<T> {
    pub result: Option<T>,
    pub diags: Diagnostics,
    pub notes: Vec<String>,
    pub config: Option<Arc<Config>>,
}

impl<T> Report<T> {
    fn fail(diags: Diagnostics, config: Option<Arc<Config>>) -> Self {
        Report {
            result: None,
            diags,
            notes: Vec::new(),
            config,
        }
    }
    pub fn ok(&self) -> bool {
        self.result.is_some() && !self.diags.has_errors()
    }
}

/// A loaded configuration with its inputs and providers.
pub struct Loaded {
    pub config: Arc<Config>,
    pub inputs: BTreeMap<String, Value>,
    /// A hash of the configuration's files (see [`config_hash`]); empty when loaded leniently
    /// (`inspect` makes no saved plan).
    pub files_hash: String,
    pub registry: Arc<Registry>,
    pub diags: Diagnostics,
}

/// Runs one phase of a command and logs how long it took (`CAIRN_LOG=debug`), so a slow run
/// can be broken down without a profiler.
pub fn timed<T>(phase: &str, f: impl FnOnce() -> T) -> T {
    let start = std::time::Instant::now();
    let r = f();
    log_phase(phase, start);
    r
}

/// [`timed`] for a phase that awaits.
async fn timed_async<T>(phase: &str, f: impl std::future::Future<Output = T>) -> T {
    let start = std::time::Instant::now();
    let r = f.await;
    log_phase(phase, start);
    r
}

fn log_phase(phase: &str, start: std::time::Instant) {
    tracing::debug!(elapsed_ms = start.elapsed().as_secs_f64() * 1e3, "{phase}");
}

/// Loads the configuration, the input variables and the provider registry.
pub fn load(opts: &Options) -> Result<Loaded, Report<()>> {
    load_with(opts, None, false)
}

/// [`load`]; with `saved` (the variable values of a saved plan) the inputs are exactly those
/// values: no `-var`, tfvars file or `TF_VAR_*` is read, as the plan already holds them. When
/// `lenient` (`inspect`), errors in the configuration or the variables do not stop it (they are
/// in `Loaded::diags`), and a root variable without a value is unknown.
fn load_with(
    opts: &Options,
    saved: Option<&BTreeMap<String, Value>>,
    lenient: bool,
) -> Result<Loaded, Report<()>> {
    let (config, mut diags) = timed("load configuration", || match &opts.only_file {
        Some(f) => crate::config::load_file(&opts.dir, f),
        None => crate::config::load(&opts.dir),
    });
    let Some(mut config) = config else {
        return Err(Report::fail(diags, None));
    };
    if opts.generate_config {
        diags.extend(config.generate_import_blocks());
    }
    if !lenient {
        diags.extend(crate::config::unsupported_blocks(&config, true));
    }
    if diags.has_errors() && !lenient {
        return Err(Report::fail(diags, Some(Arc::new(config))));
    }
    // Before input values add their files to the source map: the hash is of the configuration.
    // Only a saved plan needs it; `inspect` (lenient) makes none.
    let files_hash = match lenient {
        true => String::new(),
        false => files_hash(&config),
    };
    let missing = match lenient {
        true => crate::config::Missing::Unknown,
        false => crate::config::Missing::Error,
    };
    let (inputs, var_diags) = match saved {
        Some(values) => (values.clone(), changed_variables(opts, &mut config, values)),
        None => timed("input variables", || {
            crate::config::input_values_with(&mut config, &opts.vars, &opts.env, &opts.dir, missing)
        }),
    };
    let config = Arc::new(config);
    diags.extend(var_diags);
    if diags.has_errors() && !lenient {
        return Err(Report::fail(diags, Some(config)));
    }
    let mut packages = opts.packages.clone().unwrap_or_else(|| {
        crate::provider::builtin::builtin_with(crate::provider::builtin::Host {
            env: opts.env.clone(),
            cwd: opts.dir.clone(),
        })
    });
    // Installed plugins answer for their local names instead of the built-ins, with their
    // schemas from the cache in the state directory when the binary is unchanged. `inspect`
    // (lenient) never starts a provider process: it uses cached schemas, and evaluates without
    // the schemas of plugins not cached.
    if opts.packages.is_none() {
        let (plugins, plugin_diags) = timed("start provider plugins", || {
            crate::provider::plugin::attach::plugins(
                &config,
                &opts.env,
                &opts.dir,
                Some(&opts.state_dir),
                lenient,
                false,
            )
        });
        // A lenient load reads past plugins it cannot use (as it did before it used any).
        if !lenient {
            diags.extend(plugin_diags);
        }
        if diags.has_errors() && !lenient {
            return Err(Report::fail(diags, Some(config)));
        }
        for p in plugins {
            packages.insert(p.package().to_string(), Arc::new(p));
        }
    }
    let names: Vec<&str> = packages.keys().map(String::as_str).collect();
    let stack = match stack_config(&opts.dir, &opts.env, &names) {
        Ok(s) => s,
        Err(d) => {
            diags.push(d);
            return Err(Report::fail(diags, Some(config)));
        }
    };
    let registry = Arc::new(Registry::new(packages, stack));
    Ok(Loaded {
        config,
        inputs,
        files_hash,
        registry,
        diags,
    })
}

/// Opens the state to read it; no state yet reads as an empty one. The store is returned so
/// the caller holds the lock for as long as it works on the snapshot.
fn open_read(opts: &Options) -> Result<(Option<Store>, Snapshot, Vec<String>), Diagnostic> {
    let o = OpenOptions {
        command: opts.command.clone(),
        lock_timeout: opts.lock_timeout,
        write: false,
    };
    match timed("open state", || Store::open(&opts.state_dir, &o)) {
        Ok((store, warnings)) => {
            let snapshot = store.snapshot().clone();
            Ok((Some(store), snapshot, warnings))
        }
        Err(cairn_state::StateError::NotFound { .. }) => {
            Ok((None, Snapshot::default(), Vec::new()))
        }
        Err(e) => Err(state_error(e)),
    }
}

/// A hash of the configuration's module directories and files (not the variable files: a
/// saved plan carries the values).
pub fn files_hash(config: &Config) -> String {
    let mut h = sha2::Sha256::new();
    for m in config.modules() {
        h.update(m.dir.display().to_string().as_bytes());
    }
    let mut files: Vec<(String, &str)> = config
        .sources
        .files()
        .map(|(p, t)| (p.display().to_string(), t))
        .collect();
    files.sort();
    for (p, t) in files {
        h.update(p.as_bytes());
        h.update([0]);
        h.update(t.as_bytes());
        h.update([0]);
    }
    format!("{:x}", h.finalize())
}

/// A hash of the configuration's files and the input values: a saved plan applies only to
/// the configuration it was made from.
pub fn config_hash(files_hash: &str, inputs: &BTreeMap<String, Value>) -> String {
    let mut h = sha2::Sha256::new();
    h.update(files_hash.as_bytes());
    h.update([0]);
    h.update(serde_json::to_string(inputs).unwrap_or_default().as_bytes());
    format!("{:x}", h.finalize())
}

/// Builds the term graph and reports cycles.
fn term_graph(config: &Config) -> (TermGraph, Diagnostics) {
    let (g, mut diags) = build(config);
    diags.extend(g.cycle_diagnostics(&config.sources));
    (g, diags)
}

/// Instances in state by static resource.
type StateByResource = BTreeMap<(ModulePath, ResourceKey), Vec<ResourceInstanceAddr>>;

/// State instances grouped by static resource, and those whose resource the configuration no
/// longer has at all.
fn classify_state(
    config: &Config,
    snapshot: &Snapshot,
) -> (StateByResource, Vec<(ResourceInstanceAddr, ProviderAddr)>) {
    let mut by_resource: BTreeMap<(ModulePath, ResourceKey), Vec<ResourceInstanceAddr>> =
        BTreeMap::new();
    let mut orphans = Vec::new();
    let managed = snapshot
        .resources
        .iter()
        .filter_map(|(a, i)| i.current.as_ref().map(|o| (a, o.provider.addr.clone())));
    let data = snapshot
        .data
        .iter()
        .map(|(a, d)| (a, d.provider.addr.clone()));
    for (addr, provider) in managed.chain(data) {
        let module = addr.resource.module.without_keys();
        let key = ResourceKey {
            mode: addr.resource.mode,
            type_: addr.resource.type_.clone(),
            name: addr.resource.name.clone(),
        };
        let declared = config
            .module(&module)
            .is_some_and(|m| m.resources.contains_key(&key));
        if declared {
            by_resource
                .entry((module, key))
                .or_default()
                .push(addr.clone());
        } else {
            orphans.push((addr.clone(), provider));
        }
    }
    (by_resource, orphans)
}

/// The nodes a `-target` run walks: the targets and everything they depend on.
/// The nodes a `-target` walk visits (the targets and what they depend on), and the resources
/// whose instances it narrows: those a target names that nothing else needs whole.
type Targeted = (
    Option<BTreeSet<NodeId>>,
    BTreeMap<NodeId, Vec<cairn_state::Target>>,
);

fn targeted(g: &TermGraph, targets: &[Target]) -> Targeted {
    if targets.is_empty() {
        return (None, BTreeMap::new());
    }
    let mut keep = BTreeSet::new();
    let mut named: BTreeMap<NodeId, Vec<Target>> = BTreeMap::new();
    let mut needed = BTreeSet::new();
    for (node, id) in &g.index {
        let hit = match node {
            // A resource (static) is hit when a target names it or a module around it,
            // whatever instance keys the target has.
            Node::Resource { module, key } => {
                let hits: Vec<Target> = targets
                    .iter()
                    .filter(|t| match t {
                        Target::Instance(i) => {
                            i.resource.module.without_keys() == *module
                                && i.resource.type_ == key.type_
                                && i.resource.name == key.name
                                && i.resource.mode == key.mode
                        }
                        Target::Resource(r) => {
                            r.module.without_keys() == *module
                                && r.type_ == key.type_
                                && r.name == key.name
                                && r.mode == key.mode
                        }
                        Target::Module(m) => module.starts_with(&m.without_keys()),
                    })
                    .cloned()
                    .collect();
                let hit = !hits.is_empty();
                if hit {
                    named.insert(*id, hits);
                }
                hit
            }
            Node::Orphan { addr } | Node::Destroy { addr, .. } => targets.iter().any(|t| t.contains(addr)),
            Node::Call { module, name } => targets.iter().any(|t| matches!(t, Target::Module(m) if m.without_keys().starts_with(&module.child(name, None)))),
            _ => false,
        };
        if hit {
            keep.insert(*id);
            let deps = g.dag.transitive_dependencies(*id);
            needed.extend(deps.iter().copied());
            keep.extend(deps);
        }
    }
    // A named resource that another target's node depends on is planned whole.
    named.retain(|id, _| !needed.contains(id));
    (Some(keep), named)
}

fn new_ctx(
    loaded: &Loaded,
    graph: TermGraph,
    snapshot: &Snapshot,
    opts: &Options,
    observer: Arc<dyn Observer>,
) -> Arc<Ctx> {
    let (state_instances, _) = classify_state(&loaded.config, snapshot);
    let (only, only_instances) = targeted(&graph, &opts.targets);
    let mut ctx = Ctx {
        config: loaded.config.clone(),
        graph: Arc::new(graph),
        registry: loaded.registry.clone(),
        values: RwLock::new(Values {
            functions: Some(super::values::Functions(loaded.registry.clone())),
            workspace: opts.workspace.clone(),
            ..Values::new()
        }),
        providers: Mutex::new(BTreeMap::new()),
        inputs: loaded.inputs.clone(),
        state_providers: snapshot.providers.clone(),
        state_instances,
        limits: Limits {
            calls: Arc::new(tokio::sync::Semaphore::new(opts.parallelism.max(1))),
            stop: opts.stop.clone(),
            sabotage: opts.sabotage,
        },
        observer,
        diags: Mutex::new(Diagnostics::new()),
        failed_checks: Mutex::new(BTreeSet::new()),
        check_findings: Mutex::new(Vec::new()),
        cwd: opts.dir.clone(),
        only,
        only_instances,
        paths_by_module: Default::default(),
        schemas: Default::default(),
    };
    let modules: Vec<ModulePath> = loaded
        .config
        .modules()
        .iter()
        .map(|m| m.path.clone())
        .collect();
    for m in modules {
        let p = Arc::new(ctx.compute_paths(&m));
        ctx.paths_by_module.insert(m, p);
    }
    Arc::new(ctx)
}

/// Resolves pending operations in memory (`record == None`) or recording them.
pub(super) async fn recover(
    snapshot: &mut Snapshot,
    registry: &Arc<Registry>,
    journal: Option<&Journal>,
    notes: &mut Vec<String>,
    diags: &mut Diagnostics,
) {
    if snapshot.pending.is_empty() {
        return;
    }
    let (resolutions, errors) = resolve(snapshot, registry).await;
    diags.extend(errors);
    for r in resolutions {
        notes.push(r.message.clone());
        match journal {
            Some(j) => {
                if let Err(d) = j.record(r.event).await {
                    diags.push(d);
                }
            }
            None => {
                // In memory only: the plan's base stays the log's real head.
                let head = snapshot.head;
                let event = cairn_state::Event {
                    seq: head,
                    version: cairn_state::event::CURRENT_VERSION,
                    time_ms: 0,
                    run: 0,
                    body: r.event,
                };
                snapshot.apply_owned(event);
                snapshot.head = head;
            }
        }
    }
    if let Some(j) = journal {
        *snapshot = j.snapshot();
    }
}

/// The plan walk over an opened state.
/// A plan, with the block shapes of its resource types for the plan text.
async fn make_plan(
    loaded: &Loaded,
    opts: &Options,
    mode: PlanMode,
    prior: &Snapshot,
    observer: &Arc<dyn Observer>,
    diags: &mut Diagnostics,
) -> Option<Plan> {
    let mut plan = assemble_plan(loaded, opts, mode, prior, observer, diags).await?;
    plan.shapes = block_shapes(&loaded.registry, &plan);
    Some(plan)
}

/// The nested-block shapes of the resource types a plan shows (changes, drift, data reads),
/// from their providers' schemas.
fn block_shapes(registry: &Registry, plan: &Plan) -> BTreeMap<String, crate::plan::BlockShape> {
    let types: BTreeSet<(cairn_state::Mode, &str)> = plan
        .changes
        .iter()
        .map(|c| &c.addr)
        .chain(plan.drift.iter().map(|d| &d.addr))
        .chain(plan.data_reads.iter().map(|d| &d.addr))
        .map(|a| (a.resource.mode, a.resource.type_.as_str()))
        .collect();
    let mut out = BTreeMap::new();
    for name in registry.package_names() {
        let Some(package) = registry.package(name) else {
            continue;
        };
        for (mode, type_) in &types {
            if let Some(block) = package.schema().block(*mode, type_) {
                let shape = crate::plan::BlockShape::of(block);
                if !shape.blocks.is_empty() {
                    out.insert(crate::plan::BlockShape::key(*mode, type_), shape);
                }
            }
        }
    }
    out
}

async fn assemble_plan(
    loaded: &Loaded,
    opts: &Options,
    mode: PlanMode,
    prior: &Snapshot,
    observer: &Arc<dyn Observer>,
    diags: &mut Diagnostics,
) -> Option<Plan> {
    let limits = Limits {
        calls: Arc::new(tokio::sync::Semaphore::new(opts.parallelism.max(1))),
        stop: opts.stop.clone(),
        sabotage: opts.sabotage,
    };
    // `moved` and `removed` blocks first: the plan is made against the moved state, without
    // the objects that are forgotten.
    let mut refactor = timed("moved blocks", || {
        super::moves::resolve(&loaded.config, prior)
    });
    if mode != PlanMode::Normal {
        // As Terraform: a destroy destroys what `removed` blocks would forget, and a
        // read-only plan forgets nothing (both still move).
        refactor.forget.clear();
    }
    diags.extend(refactor.diags.clone());
    if refactor.diags.has_errors() {
        return None;
    }
    let moved_prior;
    let mut forgotten = Vec::new();
    let prior = if refactor.moves.is_empty() && refactor.forget.is_empty() {
        prior
    } else {
        let mut s = prior.clone();
        for (from, to) in &refactor.moves {
            super::moves::apply_event(
                &mut s,
                EventBody::ResourceMoved {
                    from: from.clone(),
                    to: to.clone(),
                },
            );
        }
        for addr in &refactor.forget {
            if let Some(obj) = s.current(addr) {
                forgotten.push(Change {
                    addr: addr.clone(),
                    provider: obj.provider.addr.clone(),
                    action: Action::Forget,
                    before: Some(Value::from_stored(&obj.attrs)),
                    after: None,
                    replace_paths: Vec::new(),
                    reason: Some(crate::plan::Reason::DeleteBecauseNoResourceConfig),
                    sensitive_attrs: sensitive_attrs(&loaded.registry, addr, &obj.provider.addr),
                    diff_unavailable: false,
                    importing: None,
                });
            }
            super::moves::apply_event(&mut s, EventBody::ResourceForgotten { addr: addr.clone() });
        }
        moved_prior = s;
        &moved_prior
    };
    let (refreshed, drift, refreshed_meta) = if opts.refresh {
        let r = refresh_pass(prior, &loaded.registry, &limits, observer).await;
        diags.extend(r.diags);
        (Arc::new(r.snapshot), r.drift, r.metas)
    } else {
        (Arc::new(prior.clone()), Vec::new(), Vec::new())
    };
    let mut plan = Plan {
        mode,
        base_seq: prior.head,
        workspace: opts.workspace.clone().filter(|w| w != "default"),
        check_findings: Vec::new(),
        config_hash: config_hash(&loaded.files_hash, &loaded.inputs),
        changes: Vec::new(),
        provider_changes: Vec::new(),
        outputs: Vec::new(),
        drift,
        refreshed_meta,
        data_reads: Vec::new(),
        dropped_data: Vec::new(),
        variables: loaded.inputs.clone(),
        request: PlanRequest {
            targets: opts.targets.clone(),
            replace: opts.replace.clone(),
            refresh: opts.refresh,
        },
        warnings: Vec::new(),
        applyable: false,
        errored: false,
        graph: None,
        moves: refactor.moves.clone(),
        shapes: BTreeMap::new(),
    };
    plan.warnings.extend(refactor_warnings(&refactor));
    if mode == PlanMode::Destroy {
        destroy_plan(&refreshed, &mut plan, &opts.targets);
        plan.changes.extend(forgotten);
        if opts.sabotage == Some(Sabotage::DestroySkipsChildModules) {
            plan.changes.retain(|c| c.addr.resource.module.is_root());
        }
        diags.extend(prevent_destroy_violations(&loaded.config, &plan));
        plan.errored = diags.has_errors();
        plan.applyable = !plan.errored && plan.has_changes();
        // The graph the plan was made under, for `cairn ui` (a destroy walks no term graph).
        plan.graph = Some(timed("plan graph", || {
            build(&loaded.config).0.resource_graph()
        }));
        return Some(plan);
    }
    let (mut graph, graph_diags) = timed("term graph", || term_graph(&loaded.config));
    diags.extend(graph_diags);
    let (_, orphans) = timed("classify state", || {
        classify_state(&loaded.config, &refreshed)
    });
    add_orphans(&mut graph, orphans);
    if mode == PlanMode::Normal {
        // As Terraform: an import block without its resource stops the plan before it starts.
        let errors = import_config_errors(&loaded.config);
        if errors.has_errors() {
            diags.extend(errors);
            return None;
        }
    }
    let ctx = new_ctx(loaded, graph, &refreshed, opts, observer.clone());
    let replace: BTreeSet<ResourceInstanceAddr> = opts.replace.iter().cloned().collect();
    let mut phase = PlanPhase::new(mode, refreshed.clone(), replace);
    phase.imports.cli = opts.import.clone();
    phase.imports.generated = loaded
        .config
        .root
        .resources
        .iter()
        .filter(|(_, r)| r.generated)
        .map(|(k, _)| (ModulePath::root(), k.clone()))
        .collect();
    phase.never_applied =
        prior.resources.is_empty() && prior.data.is_empty() && prior.outputs.is_empty();
    let phase = Arc::new(phase);
    // Nodes that never ran (on a cycle, or after a failure) were reported by the walk.
    timed_async("plan walk", walk_phase(ctx.clone(), phase.clone())).await;
    diags.extend(in_address_order(std::mem::take(
        &mut *ctx.diags.lock().expect("diags"),
    )));
    if mode == PlanMode::Normal {
        diags.extend(phase.imports.unclaimed(&loaded.config));
    }
    plan.check_findings = std::mem::take(&mut *ctx.check_findings.lock().expect("checks"));
    let out = std::mem::take(&mut *phase.out.lock().expect("plan out"));
    plan.changes = out.changes.into_values().collect();
    plan.changes.extend(forgotten);
    if mode == PlanMode::ReadOnly {
        // A read-only plan proposes no changes, but shows the objects it moves, as they are.
        let planned: BTreeSet<ResourceInstanceAddr> =
            plan.changes.iter().map(|c| c.addr.clone()).collect();
        let ends: BTreeSet<&ResourceInstanceAddr> = plan.moves.iter().map(|(_, to)| to).collect();
        for addr in ends {
            if let (false, Some(obj)) = (planned.contains(addr), refreshed.current(addr)) {
                let v = Value::from_stored(&obj.attrs);
                plan.changes.push(Change {
                    addr: addr.clone(),
                    provider: obj.provider.addr.clone(),
                    action: Action::NoOp,
                    before: Some(v.clone()),
                    after: Some(v),
                    replace_paths: Vec::new(),
                    reason: None,
                    sensitive_attrs: sensitive_attrs(&loaded.registry, addr, &obj.provider.addr),
                    diff_unavailable: false,
                    importing: None,
                });
            }
        }
    }
    plan.changes.sort_by(|a, b| a.addr.cmp(&b.addr));
    // A move from an instance the configuration still declares: the plan was made from the
    // wrong prior state, so it is not shown (as in Terraform).
    let mut move_diags = Diagnostics::new();
    super::moves::check_instance_sources(&loaded.config, &refactor, &plan, &mut move_diags);
    if move_diags.has_errors() {
        diags.extend(move_diags);
        return None;
    }
    plan.data_reads = out.data_reads.into_values().collect();
    plan.dropped_data = out.dropped_data.into_iter().collect();
    plan.warnings.extend(out.warnings);
    // The dependency graph as it is now, kept with the plan (saved plan files, the run's
    // `RunPlanned`), so `cairn ui` draws it as planned after the files change.
    plan.graph = Some(timed("plan graph", || ctx.graph.resource_graph()));
    // Provider instances: those the walk planned, then those in state nothing uses any more.
    let mut provider_changes: BTreeMap<ProviderAddr, ProviderChange> = out.provider_changes;
    if mode == PlanMode::Normal {
        let deleted: BTreeSet<&ResourceInstanceAddr> = plan
            .changes
            .iter()
            .filter(|c| c.action == Action::Delete)
            .map(|c| &c.addr)
            .collect();
        let still_used: BTreeSet<ProviderAddr> = plan
            .changes
            .iter()
            .filter(|c| c.action != Action::Delete)
            .map(|c| c.provider.clone())
            .chain(plan.data_reads.iter().map(|d| d.provider.clone()))
            // An object in state that this plan does not delete keeps its provider, even when
            // planning it failed.
            .chain(refreshed.resources.iter().filter_map(|(a, i)| {
                i.current
                    .as_ref()
                    .filter(|_| !deleted.contains(a))
                    .map(|o| o.provider.addr.clone())
            }))
            .collect();
        for (addr, inst) in &refreshed.providers {
            let in_config = loaded.config.module(&addr.module).is_some_and(|m| {
                m.providers.iter().any(|p| {
                    super::graph::package_of_local(m, &p.name) == addr.package
                        && p.alias == addr.alias
                })
            });
            let unused = !still_used.contains(addr);
            // A synthesized default goes when nothing uses it; a declared one when its block goes.
            if unused && !in_config {
                provider_changes.insert(
                    addr.clone(),
                    ProviderChange {
                        addr: addr.clone(),
                        action: Action::Delete,
                        before: Some(Value::from_stored(&inst.config)),
                        after: None,
                        is_default: inst.is_default,
                    },
                );
            }
        }
    }
    plan.provider_changes = provider_changes.into_values().collect();
    if mode == PlanMode::Normal {
        super::plan::replacement_order(&mut plan, &ctx.graph, &refreshed);
    }
    plan.outputs = output_changes(&refreshed, &out.outputs);
    if mode == PlanMode::ReadOnly {
        // Read-only records no output it cannot know without applying changes.
        for o in &mut plan.outputs {
            if o.action == Action::Create && !o.after.as_ref().is_some_and(Value::is_wholly_known) {
                o.action = Action::NoOp;
            }
        }
    }
    if !opts.targets.is_empty() {
        // A targeted plan evaluates only the outputs in its scope; the others stay as they are.
        plan.outputs.retain(|o| o.action != Action::Delete);
    }
    plan.errored = diags.has_errors();
    plan.applyable = !plan.errored
        && match mode {
            PlanMode::ReadOnly => {
                !plan.moves.is_empty()
                    || !plan.drift.is_empty()
                    || plan.outputs.iter().any(|o| o.action != Action::NoOp)
                    || plan
                        .data_reads
                        .iter()
                        .any(|d| d.before.as_ref() != Some(&d.result))
            }
            _ => {
                plan.has_changes()
                    || plan.changes.iter().any(|c| c.action == Action::Read)
                    || !plan.drift.is_empty()
                    // Data sources read during the plan are recorded by apply, as in Terraform.
                    || plan.data_reads.iter().any(|d| {
                        !d.before
                            .as_ref()
                            .is_some_and(|b| super::plan::equal_ignoring_marks(b, &d.result))
                    })
                    || !plan.dropped_data.is_empty()
                    // A resource that moves to an equal provider instance, or an unchanged one
                    // whose dependencies changed: recorded by apply.
                    || plan.changes.iter().any(|c| {
                        refreshed.current(&c.addr).is_some_and(|o| {
                            o.provider.addr != c.provider
                                || (c.action == Action::NoOp
                                    && !super::apply::same_deps(
                                        &super::apply::instance_deps(&ctx, &c.addr),
                                        &o.deps,
                                    ))
                        })
                    })
            }
        };
    Some(plan)
}

/// The attributes the schema of an object's resource type marks sensitive (masked in the
/// plan text), for changes made without the plan walk; none when the provider is not there.
fn sensitive_attrs(
    registry: &Registry,
    addr: &ResourceInstanceAddr,
    provider: &ProviderAddr,
) -> Vec<String> {
    registry
        .package(&provider.package)
        .and_then(|p| {
            p.schema()
                .block(addr.resource.mode, &addr.resource.type_)
                .map(|b| {
                    b.attributes
                        .iter()
                        .filter(|(_, a)| a.sensitive)
                        .map(|(k, _)| k.clone())
                        .collect()
                })
        })
        .unwrap_or_default()
}

/// The warnings Terraform gives about `moved` blocks that could not move an object, and
/// about objects a `removed` block forgets.
fn refactor_warnings(r: &super::moves::Refactor) -> Vec<String> {
    let mut out = Vec::new();
    if !r.blocked.is_empty() {
        let list: String = r
            .blocked
            .iter()
            .map(|(a, b)| format!("\n  - {a} could not move to {b}"))
            .collect();
        out.push(format!("Unresolved resource instance address changes\nCairn tried to adjust resource instance addresses in the prior state based on change information recorded in the configuration, but some adjustments did not succeed due to existing objects already at the intended addresses:{list}\n\nCairn has planned to destroy these objects. If Cairn's proposed changes aren't appropriate, you must first resolve the conflicts using the \"cairn state\" subcommands and then create a new plan."));
    }
    if !r.forget.is_empty() {
        let list: String = r.forget.iter().map(|a| format!("\n - {a}")).collect();
        out.push(format!("Some objects will no longer be managed by Cairn\nIf you apply this plan, Cairn will discard its tracking information for the following objects, but it will not delete them:{list}\n\nAfter applying this plan, Cairn will no longer manage these objects. You will need to import them into Cairn to manage them again."));
    }
    out
}

/// Import blocks whose target resource has no block in the configuration, or whose
/// `provider` differs from the resource's.
fn import_config_errors(config: &Config) -> Diagnostics {
    let mut diags = Diagnostics::new();
    for b in &config.root.imports {
        let res = config
            .module(&b.module)
            .and_then(|m| m.resources.get(&b.key));
        let Some(res) = res else {
            let addr = b.key.addr(b.module.clone()).to_string();
            diags.push(super::imports::no_config(&addr, b.to_span));
            continue;
        };
        if let Some(p) = &b.provider {
            let same = res
                .provider
                .as_ref()
                .is_some_and(|r| r.name == p.name && r.alias == p.alias)
                || (res.provider.is_none() && p.alias.is_none() && p.name == res.provider_name());
            if !same {
                diags.push(
                    Diagnostic::error(
                        "Invalid import provider argument",
                        "The provider argument in the target resource block must match the import block.",
                    )
                    .with_span(Some(p.span)),
                );
            }
        }
    }
    diags
}

fn output_changes(
    prior: &Snapshot,
    outputs: &BTreeMap<String, (Value, bool)>,
) -> Vec<OutputChange> {
    let mut out = Vec::new();
    for (name, (v, sensitive)) in outputs {
        let before = prior.outputs.get(name).map(|o| {
            let v = Value::from_stored(&o.value);
            if o.sensitive {
                v.sensitive()
            } else {
                v
            }
        });
        let action = match &before {
            None => Action::Create,
            Some(b) if super::plan::equal_ignoring_marks(b, v) && v.is_wholly_known() => {
                Action::NoOp
            }
            Some(_) => Action::Update,
        };
        out.push(OutputChange {
            name: name.clone(),
            action,
            before,
            after: Some(v.clone()),
            sensitive: *sensitive,
        });
    }
    for (name, o) in &prior.outputs {
        if !outputs.contains_key(name) {
            out.push(OutputChange {
                name: name.clone(),
                action: Action::Delete,
                before: Some(Value::from_stored(&o.value)),
                after: None,
                sensitive: o.sensitive,
            });
        }
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

/// Diagnostics of a parallel walk arrive in completion order; reported by address (stable,
/// so unaddressed ones keep their order) they read the same at any `-parallelism`.
fn in_address_order(diags: Diagnostics) -> Diagnostics {
    let mut v: Vec<Diagnostic> = diags.into_iter().collect();
    v.sort_by(|a, b| a.address.cmp(&b.address));
    v.into_iter().collect()
}

/// `prevent_destroy` holds for `destroy` too, while the configuration still says so.
fn prevent_destroy_violations(config: &Config, plan: &Plan) -> Diagnostics {
    let mut diags = Diagnostics::new();
    for c in plan.changes.iter().filter(|c| c.action == Action::Delete) {
        let key = ResourceKey {
            mode: c.addr.resource.mode,
            type_: c.addr.resource.type_.clone(),
            name: c.addr.resource.name.clone(),
        };
        let res = config
            .module(&c.addr.resource.module.without_keys())
            .and_then(|m| m.resources.get(&key));
        if let Some(res) = res.filter(|r| r.lifecycle.prevent_destroy) {
            diags.extend(super::plan::prevent_destroy_error(&c.addr, res.span));
        }
    }
    diags
}

fn destroy_plan(state: &Snapshot, plan: &mut Plan, targets: &[Target]) {
    for (addr, inst) in &state.resources {
        if !targets.is_empty() && !targets.iter().any(|t| t.contains(addr)) {
            continue;
        }
        for obj in inst.current.iter() {
            plan.changes.push(Change {
                addr: addr.clone(),
                provider: obj.provider.addr.clone(),
                action: Action::Delete,
                before: Some(Value::from_stored(&obj.attrs)),
                after: None,
                replace_paths: Vec::new(),
                reason: None,
                sensitive_attrs: Vec::new(),
                diff_unavailable: false,
                importing: None,
            });
        }
    }
    if targets.is_empty() {
        plan.dropped_data = state.data.keys().cloned().collect();
        for (addr, inst) in &state.providers {
            plan.provider_changes.push(ProviderChange {
                addr: addr.clone(),
                action: Action::Delete,
                before: Some(Value::from_stored(&inst.config)),
                after: None,
                is_default: inst.is_default,
            });
        }
        for (name, o) in &state.outputs {
            plan.outputs.push(OutputChange {
                name: name.clone(),
                action: Action::Delete,
                before: Some(Value::from_stored(&o.value)),
                after: None,
                sensitive: o.sensitive,
            });
        }
    }
}

/// `cairn plan` (and `plan -destroy`, `plan -read-only`): proposes changes, records nothing.
pub async fn plan(opts: &Options, mode: PlanMode, observer: Arc<dyn Observer>) -> Report<Plan> {
    let loaded = match load(opts) {
        Ok(l) => l,
        Err(r) => return Report::fail(r.diags, r.config),
    };
    let mut diags = loaded.diags.clone();
    let mut notes = Vec::new();
    let (store, mut snapshot, warnings) = match open_read(opts) {
        Ok(s) => s,
        Err(d) => return Report::fail(Diagnostics::from(d), Some(loaded.config)),
    };
    notes.extend(warnings);
    recover(
        &mut snapshot,
        &loaded.registry,
        None,
        &mut notes,
        &mut diags,
    )
    .await;
    let plan = stopping_providers(
        opts,
        &loaded.registry,
        make_plan(&loaded, opts, mode, &snapshot, &observer, &mut diags),
    )
    .await;
    drop(store);
    Report {
        result: plan,
        diags,
        notes,
        config: Some(loaded.config),
    }
}

/// `cairn import ADDR ID` (Terraform's `terraform import`): the resource block must be in the
/// configuration; the walk is the plan's, targeted at the resource (its provider and what its
/// configuration needs), without refresh; the instance is imported and read instead of planned
/// (`PlanPhase`, `Imports::cli`), and recorded (`StateImported`) in a run of its own.
pub async fn import(opts: &Options, observer: Arc<dyn Observer>) -> Report<()> {
    let Some((addr, _)) = opts.import.clone() else {
        return Report::fail(Diagnostics::new(), None);
    };
    let opts = Options {
        targets: vec![Target::Instance(addr.clone())],
        refresh: false,
        ..opts.clone()
    };
    let loaded = match load(&opts) {
        Ok(l) => l,
        Err(r) => return Report::fail(r.diags, r.config),
    };
    let exists = loaded
        .config
        .module(&addr.resource.module.without_keys())
        .is_some_and(|m| {
            m.resources.contains_key(&ResourceKey {
                mode: addr.resource.mode,
                type_: addr.resource.type_.clone(),
                name: addr.resource.name.clone(),
            })
        });
    if !exists || addr.resource.mode != cairn_state::Mode::Managed {
        let module = if addr.resource.module.is_root() {
            "the root module".to_string()
        } else {
            format!("{}", addr.resource.module.without_keys())
        };
        let d = Diagnostic::error(
            format!("resource address {:?} does not exist in the configuration.", addr.to_string()),
            format!(
                "Before importing this resource, please create its configuration in {module}. For example:\n\nresource {:?} {:?} {{\n  # (resource arguments)\n}}",
                addr.resource.type_, addr.resource.name
            ),
        );
        return Report::fail(Diagnostics::from(d), Some(loaded.config));
    }
    let registry = loaded.registry.clone();
    stopping_providers(
        &opts,
        &registry,
        import_loaded(&opts, &addr, observer, loaded),
    )
    .await
}

async fn import_loaded(
    opts: &Options,
    addr: &ResourceInstanceAddr,
    observer: Arc<dyn Observer>,
    loaded: Loaded,
) -> Report<()> {
    let mut diags = loaded.diags.clone();
    let mut notes = Vec::new();
    let (session, snapshot) =
        match RunSession::begin(opts, &loaded.registry, &mut notes, &mut diags).await {
            Ok(s) => s,
            Err(d) => return Report::fail(Diagnostics::from(d), Some(loaded.config)),
        };
    let mut summary = RunSummary::default();
    if snapshot.current(addr).is_some() {
        diags.push(
            Diagnostic::error(
                "Resource already managed by Cairn",
                format!("Cairn is already managing a remote object for {addr}. To import to this address you must first remove the existing object from the state."),
            )
            .with_address(addr),
        );
    } else if let Some(plan) = make_plan(
        &loaded,
        opts,
        PlanMode::Normal,
        &snapshot,
        &observer,
        &mut diags,
    )
    .await
    {
        let change = plan.changes.iter().find(|c| &c.addr == addr);
        match change.and_then(|c| Some((c, c.importing.as_ref()?, c.before.as_ref()?))) {
            Some((c, importing, before)) if !diags.has_errors() => {
                // The provider instance the object is managed through: the one in state (an
                // apply reconfigures it if its configuration changed), else registered now
                // with the configuration the walk evaluated.
                let provider_id = match snapshot.providers.get(&c.provider) {
                    Some(p) => p.id.clone(),
                    None => {
                        let slot = plan.provider_changes.iter().find(|p| p.addr == c.provider);
                        let config = slot.and_then(|s| s.after.clone()).unwrap_or_else(Value::null);
                        let id = super::providers::new_instance_id(&c.provider.package);
                        let instance = cairn_state::ProviderInstance {
                            addr: c.provider.clone(),
                            id: id.clone(),
                            config: config.to_stored().unwrap_or(cairn_state::StoredValue::Null),
                            is_default: slot.is_some_and(|s| s.is_default),
                        };
                        if let Err(d) =
                            session.journal().append(EventBody::ProviderRegistered { instance })
                        {
                            diags.push(d);
                        }
                        id
                    }
                };
                let object = cairn_state::ResourceObject {
                    attrs: before.to_stored().unwrap_or(cairn_state::StoredValue::Null),
                    deps: Vec::new(),
                    provider: cairn_state::ProviderRef {
                        addr: c.provider.clone(),
                        id: provider_id,
                    },
                    create_token: None,
                    tainted: false,
                    meta: importing.meta.clone(),
                };
                match session
                    .journal()
                    .record(EventBody::StateImported {
                        source: format!("import {:?}", importing.id),
                        providers: Vec::new(),
                        resources: vec![(addr.clone(), object)],
                    })
                    .await
                {
                    Ok(_) => summary.imported = 1,
                    Err(d) => diags.push(d),
                }
            }
            _ if diags.has_errors() => {}
            _ => diags.push(Diagnostic::error(
                "Import failed",
                format!("{addr} was not imported: it is outside the configuration's instances (its count or for_each makes no such key)."),
            ).with_address(addr)),
        }
    }
    summary.errors = diags.error_count() as u64;
    let outcome = if diags.has_errors() {
        RunOutcome::Failed
    } else {
        RunOutcome::Success
    };
    session.finish(outcome, summary, &mut diags, Some(&loaded.config));
    Report {
        result: Some(()),
        diags,
        notes,
        config: Some(loaded.config),
    }
}

/// What an apply did.
#[derive(Clone, Debug, Default)]
pub struct Applied {
    pub plan: Option<Plan>,
    pub summary: RunSummary,
    /// Root outputs after the apply.
    pub outputs: BTreeMap<String, (Value, bool)>,
    /// False when the user declined.
    pub confirmed: bool,
}

/// `cairn apply [PLANFILE]`, `apply -read-only`, `destroy`, approved in advance (what
/// `-auto-approve` means): [`apply_start`], then [`PendingApply::approve`].
pub async fn apply(
    opts: &Options,
    mode: PlanMode,
    saved: Option<Plan>,
    observer: Arc<dyn Observer>,
) -> Report<Applied> {
    match apply_start(opts, mode, saved, observer).await {
        ApplyStart::Done(report) => report,
        ApplyStart::Ask(pending) => pending.approve().await,
    }
}

/// Where [`apply_start`] left an apply. (One per apply, moved once: boxing a variant would
/// buy nothing.)
#[allow(clippy::large_enum_variant)]
pub enum ApplyStart {
    /// Finished without a decision to ask for: an error, a plan with nothing to apply, or one
    /// that only records what refresh found (applied without asking, as Terraform does).
    Done(Report<Applied>),
    /// The plan is made and recorded; the caller shows it, asks however it likes, and then
    /// calls [`PendingApply::approve`] or [`PendingApply::decline`].
    Ask(PendingApply),
}

/// An apply whose plan waits for the caller's decision. Its run is open (the state stays
/// locked) until `approve` or `decline` finishes it; dropping it unanswered leaves the run to
/// be finished as interrupted by the next writer, as a crash would.
pub struct PendingApply {
    opts: Options,
    loaded: Loaded,
    session: RunSession,
    plan: Plan,
    diags: Diagnostics,
    notes: Vec<String>,
    observer: Arc<dyn Observer>,
}

/// The first half of an apply: loads the configuration (a saved plan's request replaces the
/// command line's), opens the run, recovers pending operations, plans (or checks the saved
/// plan) and records the plan. No provider changes anything before the decision.
pub async fn apply_start(
    opts: &Options,
    mode: PlanMode,
    saved: Option<Plan>,
    observer: Arc<dyn Observer>,
) -> ApplyStart {
    // A saved plan is the whole request: its mode, variable values, targets, replacements and
    // refresh choice, never the command line's.
    let opts = match &saved {
        Some(p) => Options {
            targets: p.request.targets.clone(),
            replace: p.request.replace.clone(),
            refresh: p.request.refresh,
            ..opts.clone()
        },
        None => opts.clone(),
    };
    let mode = match saved.as_ref().map(|p| p.mode).unwrap_or(mode) {
        PlanMode::ReadOnly if opts.sabotage == Some(Sabotage::ReadOnlyApplies) => PlanMode::Normal,
        mode => mode,
    };
    let loaded = match load_with(&opts, saved.as_ref().map(|p| &p.variables), false) {
        Ok(l) => l,
        Err(r) => return ApplyStart::Done(Report::fail(r.diags, r.config)),
    };
    let registry = loaded.registry.clone();
    let start = stopping_providers(
        &opts,
        &registry,
        start_loaded(&opts, mode, loaded, saved, observer),
    )
    .await;
    match start {
        ApplyStart::Ask(pending) if pending.records_only() => {
            ApplyStart::Done(pending.approve().await)
        }
        start => start,
    }
}

/// Runs `work` while watching for an interrupt: the first one tells every provider instance
/// configured so far to stop (`Configured::stop`), so that their calls in flight give up early
/// and report it; the walk itself starts no new step (`Limits::stop`). Each step that was
/// running still records its outcome. The watcher is joined before returning.
async fn stopping_providers<T>(
    opts: &Options,
    registry: &Arc<Registry>,
    work: impl std::future::Future<Output = T>,
) -> T {
    let interrupted = opts.interrupted.clone();
    let registry = registry.clone();
    let watcher = tokio::spawn(async move {
        interrupted.notified().await;
        let stops = registry.all_configured();
        tracing::debug!(providers = stops.len(), "interrupted: stopping providers");
        for p in stops {
            p.stop().await;
        }
    });
    let out = work.await;
    watcher.abort();
    let _ = watcher.await;
    out
}

/// [`apply_start`] once the configuration is loaded.
async fn start_loaded(
    opts: &Options,
    mode: PlanMode,
    loaded: Loaded,
    saved: Option<Plan>,
    observer: Arc<dyn Observer>,
) -> ApplyStart {
    let mut diags = loaded.diags.clone();

    let mut notes = Vec::new();
    let (session, snapshot) =
        match RunSession::begin(opts, &loaded.registry, &mut notes, &mut diags).await {
            Ok(s) => s,
            Err(d) => {
                return ApplyStart::Done(Report::fail(Diagnostics::from(d), Some(loaded.config)))
            }
        };
    let run = session.run;

    let saved_plan = saved.is_some();
    let plan = match saved {
        Some(p) => {
            let here = opts.workspace.as_deref().unwrap_or("default");
            let there = p.workspace.as_deref().unwrap_or("default");
            if here != there {
                diags.push(Diagnostic::error(
                    "Saved plan is for another workspace",
                    format!("The plan was made in workspace {there:?}, and the selected workspace is {here:?}. Select {there:?} (`cairn workspace select {there}`) to apply it, or run plan again in {here:?}."),
                ));
            // The state's head before this run started must be the plan's base.
            } else if p.base_seq + 1 != run || snapshot.head != run {
                diags.push(Diagnostic::error(
                    "Saved plan is stale",
                    format!("The plan was made against state position {}, but the state has changed since (it was at {} when this apply started). Run plan again.", p.base_seq, run.saturating_sub(1)),
                ));
            } else if p.config_hash != config_hash(&loaded.files_hash, &p.variables) {
                diags.push(Diagnostic::error(
                    "Saved plan does not match the configuration",
                    "The configuration files or variable values changed since this plan was made. Run plan again.",
                ));
            }
            Some(p)
        }
        None => {
            let p = make_plan(&loaded, opts, mode, &snapshot, &observer, &mut diags).await;
            tracing::debug!("plan made");
            p
        }
    };
    let Some(plan) = plan.filter(|_| !diags.has_errors()) else {
        session.finish(
            RunOutcome::Failed,
            RunSummary::default(),
            &mut diags,
            Some(&loaded.config),
        );
        return ApplyStart::Done(Report {
            result: None,
            diags,
            notes,
            config: Some(loaded.config),
        });
    };
    // What the run is about to do, with why (deferred reads with their causal chain): the
    // run's own record of its plan, durable with the next commit.
    if plan.applyable {
        let record = crate::plan::record::plan_record(&plan, saved_plan, &loaded.files_hash);
        if let Err(e) = session
            .journal()
            .append(EventBody::RunPlanned { plan: record })
        {
            diags.push(e);
        }
    }
    if !plan.applyable {
        session.finish(
            RunOutcome::Success,
            RunSummary::default(),
            &mut diags,
            Some(&loaded.config),
        );
        return ApplyStart::Done(Report {
            result: Some(Applied {
                plan: Some(plan),
                confirmed: true,
                ..Default::default()
            }),
            diags,
            notes,
            config: Some(loaded.config),
        });
    }
    ApplyStart::Ask(PendingApply {
        opts: opts.clone(),
        loaded,
        session,
        plan,
        diags,
        notes,
        observer,
    })
}

impl PendingApply {
    /// The plan to decide on.
    pub fn plan(&self) -> &Plan {
        &self.plan
    }

    /// True when the plan changes nothing but the state's record of the world (drift, data
    /// results, data sources gone from the configuration): applied without asking.
    fn records_only(&self) -> bool {
        self.plan.mode == PlanMode::Normal
            && !self.plan.has_changes()
            && !self.plan.changes.iter().any(|c| c.action == Action::Read)
    }

    /// "No" (or an interrupt while the user was asked): nothing changes; the run is finished
    /// as interrupted.
    pub fn decline(self) -> Report<Applied> {
        let PendingApply {
            loaded,
            session,
            plan,
            mut diags,
            notes,
            ..
        } = self;
        session.finish(
            RunOutcome::Interrupted,
            RunSummary::default(),
            &mut diags,
            Some(&loaded.config),
        );
        Report {
            result: Some(Applied {
                plan: Some(plan),
                confirmed: false,
                ..Default::default()
            }),
            diags,
            notes,
            config: Some(loaded.config),
        }
    }

    /// "Yes": applies the plan, recording every step, and finishes the run. An interrupt that
    /// came while the caller was asking makes it a [`PendingApply::decline`].
    pub async fn approve(self) -> Report<Applied> {
        if self.opts.stop.load(std::sync::atomic::Ordering::SeqCst) {
            return self.decline();
        }
        let registry = self.loaded.registry.clone();
        let opts = self.opts.clone();
        stopping_providers(&opts, &registry, self.run_approved()).await
    }

    async fn run_approved(self) -> Report<Applied> {
        let PendingApply {
            opts,
            loaded,
            session,
            plan,
            mut diags,
            notes,
            observer,
        } = self;
        let opts = &opts;
        // The apply's walk checks every `check` block again, with final values.
        diags.0.retain(|d| !plan.check_findings.contains(d));
        let journal = session.journal();
        let run = session.run;
        // What refresh found is part of the state now: drift, and the provider meta of objects
        // (drifted or not).
        let mut metas: BTreeMap<&ResourceInstanceAddr, &cairn_state::ObjectMeta> =
            plan.refreshed_meta.iter().map(|(a, m)| (a, m)).collect();
        // The `moved` blocks' moves and the objects `removed` blocks forget, first: the rest
        // of the plan (drift included) is at the moved addresses.
        let mut events: Vec<EventBody> = plan
            .moves
            .iter()
            .map(|(from, to)| EventBody::ResourceMoved {
                from: from.clone(),
                to: to.clone(),
            })
            .collect();
        events.extend(
            plan.changes
                .iter()
                .filter(|c| c.action == Action::Forget)
                .map(|c| EventBody::ResourceForgotten {
                    addr: c.addr.clone(),
                }),
        );
        for d in &plan.drift {
            let event = match &d.after {
                Some(v) => match v.to_stored() {
                    Ok(attrs) => EventBody::ResourceRead {
                        addr: d.addr.clone(),
                        attrs,
                        meta: metas.remove(&d.addr).cloned(),
                    },
                    Err(_) => continue,
                },
                None => EventBody::ResourceGone {
                    addr: d.addr.clone(),
                },
            };
            events.push(event);
        }
        journal.with_snapshot(|s| {
            for (addr, meta) in metas {
                if let Some(obj) = s.current(addr) {
                    events.push(EventBody::ResourceRead {
                        addr: addr.clone(),
                        attrs: obj.attrs.clone(),
                        meta: Some(meta.clone()),
                    });
                }
            }
        });
        for event in events {
            if let Err(e) = journal.append(event) {
                diags.push(e);
            }
        }
        if let Err(e) = journal.commit() {
            diags.push(e);
        }

        let (summary, outputs) = if plan.mode == PlanMode::ReadOnly {
            record_read_only(journal, &plan, &mut diags)
        } else {
            execute(&loaded, opts, &plan, journal, run, &observer, &mut diags).await
        };
        let outcome = if opts.stop.load(std::sync::atomic::Ordering::SeqCst) {
            RunOutcome::Interrupted
        } else if diags.has_errors() {
            RunOutcome::Failed
        } else {
            RunOutcome::Success
        };
        timed("finish the run", || {
            session.finish(outcome, summary, &mut diags, Some(&loaded.config))
        });
        Report {
            result: Some(Applied {
                plan: Some(plan),
                summary,
                outputs,
                confirmed: true,
            }),
            diags,
            notes,
            config: Some(loaded.config),
        }
    }
}

/// The most diagnostics a failed run records (a bound on one record's size; the count of
/// the others is recorded as a last diagnostic).
const MAX_RECORDED_DIAGNOSTICS: usize = 200;

/// Where a diagnostic is in the configuration (`file:line:col`): its span, else the block of
/// the resource its address names.
fn diagnostic_location(d: &Diagnostic, config: Option<&Config>) -> Option<String> {
    let config = config?;
    if let Some(span) = d.span {
        return Some(config.sources.location(span));
    }
    let addr: ResourceInstanceAddr = d.address.as_deref()?.parse().ok()?;
    let r = &addr.resource;
    let key = ResourceKey {
        mode: r.mode,
        type_: r.type_.clone(),
        name: r.name.clone(),
    };
    let block = config
        .module(&r.module.without_keys())?
        .resources
        .get(&key)?;
    Some(config.sources.location(block.span))
}

/// Diagnostics as the log records them: each with its configuration location (`file:line:col`
/// of its span, or of the block of the resource it names, as the configuration is at the time
/// of the error; none without a configuration) and address.
pub fn recorded_diagnostics(
    diags: &Diagnostics,
    config: Option<&Config>,
) -> Vec<cairn_state::RecordedDiagnostic> {
    use cairn_state::event::Severity as S;
    let mut out: Vec<cairn_state::RecordedDiagnostic> = diags
        .iter()
        .take(MAX_RECORDED_DIAGNOSTICS)
        .map(|d| cairn_state::RecordedDiagnostic {
            severity: match d.severity {
                crate::diag::Severity::Error => S::Error,
                crate::diag::Severity::Warning => S::Warning,
            },
            summary: d.summary.clone(),
            detail: d.detail.clone(),
            location: diagnostic_location(d, config),
            address: d.address.clone(),
        })
        .collect();
    if diags.len() > MAX_RECORDED_DIAGNOSTICS {
        out.push(cairn_state::RecordedDiagnostic {
            severity: S::Warning,
            summary: format!(
                "{} more diagnostic(s) not recorded",
                diags.len() - MAX_RECORDED_DIAGNOSTICS
            ),
            detail: String::new(),
            location: None,
            address: None,
        });
    }
    out
}

/// `-var` and `-var-file` beside a saved plan: a variable they set to a value other than the
/// plan's is an error (the plan applies with its own values), as in Terraform.
fn changed_variables(
    opts: &Options,
    config: &mut Config,
    planned: &BTreeMap<String, Value>,
) -> Diagnostics {
    let mut diags = Diagnostics::new();
    if opts.vars.is_empty() {
        return diags;
    }
    let none = BTreeMap::new();
    let (given, d) = crate::config::input_values(config, &opts.vars, &none, &opts.dir);
    // A required variable the command line does not set has its value in the plan.
    let d: Diagnostics = d
        .into_iter()
        .filter(|d| {
            d.summary != "No value for required variable"
                && d.summary != "Required variable not set"
        })
        .collect();
    if d.has_errors() {
        return d;
    }
    let (baseline, _) = crate::config::input_values(config, &[], &none, &opts.dir);
    let named: BTreeSet<&str> = opts
        .vars
        .iter()
        .filter_map(|v| match v {
            crate::config::VarArg::Var(t) => t.split_once('=').map(|(n, _)| n.trim()),
            crate::config::VarArg::File(_) => None,
        })
        .collect();
    for (name, value) in &given {
        let set_here = named.contains(name.as_str()) || baseline.get(name) != Some(value);
        let same = planned
            .get(name)
            .is_some_and(|p| super::plan::equal_ignoring_marks(p, value));
        if set_here && !same {
            let shown = |v: Option<&Value>| match v {
                Some(v) if v.contains_sensitive() => "(sensitive value)".to_string(),
                Some(v) => crate::value::format_hcl(v),
                None => "no value".to_string(),
            };
            diags.push(Diagnostic::error(
                "Can't change variable when applying a saved plan",
                format!(
                    "The variable {name} cannot be set using the -var and -var-file options when applying a saved plan file, because a saved plan includes the variable values that were set when it was created. The saved plan specifies {} as the value whereas during apply the value {} was set by a CLI argument.",
                    shown(planned.get(name)),
                    shown(Some(value)),
                ),
            ));
        }
    }
    diags
}

/// Records a read-only apply: data results and outputs (the refresh was recorded already).
fn record_read_only(
    journal: &Journal,
    plan: &Plan,
    diags: &mut Diagnostics,
) -> (RunSummary, BTreeMap<String, (Value, bool)>) {
    let mut summary = RunSummary::default();
    // Provider instances the results are read through, registered first.
    for pc in &plan.provider_changes {
        let registered = journal.with_snapshot(|s| s.providers.contains_key(&pc.addr));
        let Some(Ok(config)) = pc.after.as_ref().map(Value::to_stored) else {
            continue;
        };
        if pc.action == Action::Create && !registered {
            let instance = cairn_state::ProviderInstance {
                addr: pc.addr.clone(),
                id: super::providers::new_instance_id(&pc.addr.package),
                config,
                is_default: pc.is_default,
            };
            if let Err(e) = journal.append(EventBody::ProviderRegistered { instance }) {
                diags.push(e);
            }
        }
    }
    for read in &plan.data_reads {
        let Ok(attrs) = read.result.to_stored() else {
            continue;
        };
        let provider_id = journal
            .with_snapshot(|s| s.providers.get(&read.provider).map(|p| p.id.clone()))
            .unwrap_or_default();
        let object = cairn_state::DataObject {
            attrs,
            provider: cairn_state::ProviderRef {
                addr: read.provider.clone(),
                id: provider_id,
            },
        };
        if let Err(e) = journal.append(EventBody::DataRead {
            addr: read.addr.clone(),
            object,
        }) {
            diags.push(e);
        }
        summary.read += 1;
    }
    // An output whose new value cannot be known without applying changes keeps its old value.
    let outputs: BTreeMap<String, (Value, bool)> = plan
        .outputs
        .iter()
        .filter_map(|o| {
            let v = match (&o.after, &o.before) {
                (Some(a), _) if a.is_wholly_known() => a.clone(),
                (_, Some(b)) => b.clone(),
                (Some(a), None) if a.is_wholly_known() => a.clone(),
                _ => return None,
            };
            Some((o.name.clone(), (v, o.sensitive)))
        })
        .collect();
    let configured: BTreeSet<ProviderAddr> =
        journal.with_snapshot(|s| s.providers.keys().cloned().collect());
    for e in journal.with_snapshot(|s| finishing_events(s, &outputs, &configured, &[])) {
        if let Err(e) = journal.append(e) {
            diags.push(e);
        }
    }
    if let Err(e) = journal.commit() {
        diags.push(e);
    }
    (summary, outputs)
}

/// Applies a plan: the apply walk (or, for destroy, the deletes alone), then the finishing
/// events.
async fn execute(
    loaded: &Loaded,
    opts: &Options,
    plan: &Plan,
    journal: &Arc<Journal>,
    run: u64,
    observer: &Arc<dyn Observer>,
    diags: &mut Diagnostics,
) -> (RunSummary, BTreeMap<String, (Value, bool)>) {
    let prior = journal.snapshot();
    let mut deposed_keys = BTreeMap::new();
    let mut graph = if plan.mode == PlanMode::Destroy {
        TermGraph::empty()
    } else {
        let (g, d) = term_graph(&loaded.config);
        diags.extend(d);
        g
    };
    let destroy = timed("add destroys", || {
        add_destroys(&mut graph, plan, &prior, &mut deposed_keys, opts.sabotage)
    });
    let cycles = graph.cycle_diagnostics(&loaded.config.sources);
    if cycles.has_errors() {
        diags.extend(cycles);
        return (RunSummary::default(), BTreeMap::new());
    }
    let ctx = new_ctx(loaded, graph, &prior, opts, observer.clone());
    let phase = Arc::new(ApplyPhase {
        changes: plan
            .changes
            .iter()
            .map(|c| (c.addr.clone(), c.clone()))
            .collect(),
        data_reads: plan
            .data_reads
            .iter()
            .map(|d| (d.addr.clone(), d.clone()))
            .collect(),
        journal: journal.clone(),
        destroy,
        deposed_keys,
        run,
        outputs: Mutex::new(BTreeMap::new()),
        summary: Mutex::new(RunSummary::default()),
    });
    let outcome = timed_async("apply walk", walk_phase(ctx.clone(), phase.clone())).await;
    diags.extend(in_address_order(std::mem::take(
        &mut *ctx.diags.lock().expect("diags"),
    )));
    if opts.stop.load(std::sync::atomic::Ordering::SeqCst) {
        // What was not done: resources (and destroys) never started, because of the stop or
        // because something they depend on did not finish.
        let not_done: BTreeSet<String> = outcome
            .not_run
            .iter()
            .chain(&outcome.skipped)
            .filter(|id| {
                matches!(
                    ctx.graph.node(**id),
                    Node::Resource { .. } | Node::Destroy { .. } | Node::Orphan { .. }
                )
            })
            .map(|id| ctx.graph.node(*id).to_string())
            .collect();
        let not_done = if not_done.is_empty() {
            "Every step had started.".to_string()
        } else {
            format!(
                "Not started: {}.",
                not_done.into_iter().collect::<Vec<_>>().join(", ")
            )
        };
        diags.push(Diagnostic::error(
            "Apply interrupted",
            format!("The run was stopped: no new step started, and the providers were told to stop. Every step that had started is recorded with its outcome. {not_done} Run apply again to finish."),
        ));
    }
    let outputs = std::mem::take(&mut *phase.outputs.lock().expect("outputs"));
    let configured: BTreeSet<ProviderAddr> = ctx
        .providers
        .lock()
        .expect("providers")
        .keys()
        .cloned()
        .collect();
    let configured = if plan.mode == PlanMode::Destroy {
        BTreeSet::new()
    } else {
        configured
    };
    // A whole walk replaces the outputs. A failed or targeted one records the outputs it
    // evaluated (their dependencies all applied) and keeps the others' old values, as
    // Terraform does.
    let whole = outcome.ok() && !diags.has_errors() && opts.targets.is_empty();
    tracing::debug!("finishing events");
    let finishing = journal.with_snapshot(|s| {
        let outs = if whole || plan.mode == PlanMode::Destroy {
            outputs.clone()
        } else {
            let mut outs = state_outputs(s);
            outs.extend(outputs.clone());
            outs
        };
        finishing_events(s, &outs, &configured, &plan.dropped_data)
    });
    for e in finishing {
        if let Err(e) = journal.append(e) {
            diags.push(e);
        }
    }
    if let Err(e) = journal.commit() {
        diags.push(e);
    }
    let summary = *phase.summary.lock().expect("summary");
    (summary, outputs)
}

fn state_outputs(s: &Snapshot) -> BTreeMap<String, (Value, bool)> {
    s.outputs
        .iter()
        .map(|(k, o)| (k.clone(), (Value::from_stored(&o.value), o.sensitive)))
        .collect()
}

/// `cairn refresh [-preview]`: reads every managed object; records the result unless
/// previewing.
pub async fn refresh(
    opts: &Options,
    preview: bool,
    observer: Arc<dyn Observer>,
) -> Report<Vec<Drift>> {
    let loaded = match load(opts) {
        Ok(l) => l,
        Err(r) => return Report::fail(r.diags, r.config),
    };
    let registry = loaded.registry.clone();
    stopping_providers(
        opts,
        &registry,
        refresh_loaded(opts, preview, observer, loaded),
    )
    .await
}

/// [`refresh`] once the configuration is loaded.
async fn refresh_loaded(
    opts: &Options,
    preview: bool,
    observer: Arc<dyn Observer>,
    loaded: Loaded,
) -> Report<Vec<Drift>> {
    let mut diags = loaded.diags.clone();
    let mut notes = Vec::new();
    let limits = Limits {
        calls: Arc::new(tokio::sync::Semaphore::new(opts.parallelism.max(1))),
        stop: opts.stop.clone(),
        sabotage: opts.sabotage,
    };
    if preview {
        let (_store, mut snapshot, warnings) = match open_read(opts) {
            Ok(s) => s,
            Err(d) => return Report::fail(Diagnostics::from(d), Some(loaded.config)),
        };
        notes.extend(warnings);
        recover(
            &mut snapshot,
            &loaded.registry,
            None,
            &mut notes,
            &mut diags,
        )
        .await;
        let r = refresh_pass(&snapshot, &loaded.registry, &limits, &observer).await;
        diags.extend(r.diags);
        return Report {
            result: Some(r.drift),
            diags,
            notes,
            config: Some(loaded.config),
        };
    }
    let (session, snapshot) =
        match RunSession::begin(opts, &loaded.registry, &mut notes, &mut diags).await {
            Ok(s) => s,
            Err(d) => return Report::fail(Diagnostics::from(d), Some(loaded.config)),
        };
    let pass = refresh_pass(&snapshot, &loaded.registry, &limits, &observer);
    let r = timed_async("refresh pass", pass).await;
    diags.extend(r.diags);
    // All refresh results arrive together: one commit for the group.
    for e in r.events {
        if let Err(e) = session.journal().append(e) {
            diags.push(e);
        }
    }
    let summary = RunSummary {
        read: r.drift.len() as u64,
        errors: diags.error_count() as u64,
        ..Default::default()
    };
    let outcome = if diags.has_errors() {
        RunOutcome::Failed
    } else {
        RunOutcome::Success
    };
    timed("finish the run", || {
        session.finish(outcome, summary, &mut diags, Some(&loaded.config))
    });
    Report {
        result: Some(r.drift),
        diags,
        notes,
        config: Some(loaded.config),
    }
}

/// The result of `inspect`: every instance, and the evaluated values (for `console`).
pub struct Inspection {
    /// Without their attributes until `take_instances`.
    instances: Vec<Inspected>,
    pub outputs: BTreeMap<String, Value>,
    /// Provider packages Cairn does not have, whose resources were evaluated without a schema.
    pub unchecked_providers: Vec<String>,
    ctx: Arc<Ctx>,
}

impl Inspection {
    /// Every evaluated value: variables, locals, outputs and module call expansions, per
    /// module instance.
    pub fn values(&self) -> std::sync::RwLockReadGuard<'_, Values> {
        self.ctx.values.read().expect("values lock")
    }

    /// Every instance, in address order, with its attributes moved out of the evaluated
    /// values (a copy of ten thousand resources' values is tens of MiB). A reference to a
    /// resource in `eval` afterwards sees no value: `console` evaluates, `inspect` takes.
    pub fn take_instances(&mut self) -> Vec<Inspected> {
        let mut instances = std::mem::take(&mut self.instances);
        let mut values = self.ctx.values.write().expect("values lock");
        for i in &mut instances {
            let r = &i.addr.resource;
            let key = (r.mode, r.type_.clone(), r.name.clone());
            let value = values
                .resources
                .get_mut(&r.module)
                .and_then(|m| m.get_mut(&key))
                .and_then(|rv| rv.instances.get_mut(&i.addr.key));
            if let Some(v) = value {
                i.attrs = std::mem::replace(v, Value::unknown());
            }
        }
        instances
    }

    /// Evaluates an expression in the root module's scope (`cairn console`).
    pub fn eval(&self, source: &str) -> Result<Value, (Diagnostics, crate::diag::SourceMap)> {
        let mut sources = crate::diag::SourceMap::new();
        let file = sources.add("<console>", source.to_string());
        let expr: hcl_edit::expr::Expression = match source.trim().parse() {
            Ok(e) => e,
            Err(e) => {
                let d = Diagnostic::error("Invalid expression", format!("{e}"));
                return Err((d.into(), sources));
            }
        };
        let values = self.ctx.values.read().expect("values lock");
        let root = ModulePath::root();
        let paths = self.ctx.paths(&root);
        let scope = InstanceScope {
            values: &values,
            module: &root,
            repetition: &Repetition::None,
            file,
            paths: &paths,
        };
        crate::eval::expr::eval(&expr, &scope).map_err(|d| (d, sources))
    }
}

/// `cairn inspect` / `cairn console`: evaluates the configuration without providers or state.
pub async fn inspect(opts: &Options) -> Report<Inspection> {
    let loaded = match load_with(opts, None, true) {
        Ok(l) => l,
        Err(r) => return Report::fail(r.diags, r.config),
    };
    let mut diags = loaded.diags.clone();
    let (graph, graph_diags) = timed("term graph", || term_graph(&loaded.config));
    diags.extend(graph_diags);
    let ctx = new_ctx(
        &loaded,
        graph,
        &Snapshot::default(),
        opts,
        Arc::new(super::progress::Silent),
    );
    ctx.values.write().expect("values").workspace = super::inspect::selected_workspace(opts);
    let resources = ctx
        .graph
        .dag
        .nodes()
        .filter(|(_, n)| matches!(n, Node::Resource { .. }))
        .count();
    let phase = Arc::new(InspectPhase::with_capacity(resources));
    timed_async("inspect walk", walk_phase(ctx.clone(), phase.clone())).await;
    diags.extend(in_address_order(std::mem::take(
        &mut *ctx.diags.lock().expect("diags"),
    )));
    let unchecked_providers = super::inspect::unchecked_providers(&ctx);
    if !unchecked_providers.is_empty() {
        let names: Vec<String> = unchecked_providers
            .iter()
            .map(|p| format!("{p:?}"))
            .collect();
        diags.push(Diagnostic::warning(
            "Providers without a schema",
            format!(
                "Cairn neither has built in nor has installed {}, so the resources and data sources of {} were evaluated as written: every argument and block they set has its value, and every attribute they do not set is unknown.",
                names.join(", "),
                if names.len() == 1 { "that provider" } else { "those providers" }
            ),
        ));
    }
    let instances = phase.into_sorted();
    let outputs = ctx
        .values
        .read()
        .expect("values")
        .outputs
        .get(&ModulePath::root())
        .cloned()
        .unwrap_or_default();
    Report {
        result: Some(Inspection {
            instances,
            outputs,
            unchecked_providers,
            ctx,
        }),
        diags,
        notes: Vec::new(),
        config: Some(loaded.config),
    }
}

/// Which graph `cairn graph` draws.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GraphKind {
    Plan,
    Refresh,
    Apply,
}

/// `cairn graph`: the graph as DOT. For `Plan`, deferred reads of `plan` (when given) are
/// marked.
pub fn graph_dot(opts: &Options, kind: GraphKind, plan: Option<&Plan>) -> Report<String> {
    let loaded = match load(opts) {
        Ok(l) => l,
        Err(r) => return Report::fail(r.diags, r.config),
    };
    let (mut graph, diags) = term_graph(&loaded.config);
    let dot = match kind {
        GraphKind::Refresh => {
            let snapshot = match open_read(opts) {
                Ok((_, s, _)) => s,
                Err(d) => return Report::fail(d.into(), Some(loaded.config)),
            };
            refresh_dot(&snapshot)
        }
        GraphKind::Plan | GraphKind::Apply => {
            if let (GraphKind::Apply, Some(p)) = (kind, plan) {
                let snapshot = match open_read(opts) {
                    Ok((_, s, _)) => s,
                    Err(d) => return Report::fail(d.into(), Some(loaded.config)),
                };
                add_destroys(&mut graph, p, &snapshot, &mut BTreeMap::new(), None);
            }
            let marked: BTreeSet<NodeId> = plan
                .map(|p| {
                    p.changes
                        .iter()
                        .filter(|c| c.action == Action::Read)
                        .filter_map(|c| {
                            graph.id(&Node::Resource {
                                module: c.addr.resource.module.without_keys(),
                                key: ResourceKey {
                                    mode: c.addr.resource.mode,
                                    type_: c.addr.resource.type_.clone(),
                                    name: c.addr.resource.name.clone(),
                                },
                            })
                        })
                        .collect()
                })
                .unwrap_or_default();
            graph.to_dot(&marked)
        }
    };
    Report {
        result: Some(dot),
        diags,
        notes: Vec::new(),
        config: Some(loaded.config),
    }
}

/// The refresh graph: provider instances and one node per managed instance, each depending
/// only on its provider.
fn refresh_dot(snapshot: &Snapshot) -> String {
    let mut g: cairn_graph::Dag<String> = cairn_graph::Dag::new();
    let mut providers = BTreeMap::new();
    for (addr, inst) in &snapshot.resources {
        let Some(obj) = &inst.current else { continue };
        let p = *providers
            .entry(obj.provider.addr.clone())
            .or_insert_with(|| g.add_node(obj.provider.addr.to_string()));
        let id = g.add_node(addr.to_string());
        g.add_edge(id, p);
    }
    g.to_dot(|n: &String| {
        let provider = n.starts_with("provider");
        cairn_graph::DotNode::new(n.clone())
            .shape(if provider { "diamond" } else { "box" })
            .style("filled")
            .color(if provider { "khaki" } else { "palegreen" })
    })
}

/// Reports progress of pending-operation notes and warnings as diagnostics (for the CLI).
pub fn notes_as_warnings(observer: &dyn Observer, notes: &[String]) {
    for n in notes {
        observer.event(Progress::Diagnostic(Diagnostic::warning(
            "Recovered state",
            n.clone(),
        )));
    }
}

/// A canonical form of a value, for comparisons in tests.
pub fn canonical_value(v: &Value) -> String {
    canonical(v)
}
