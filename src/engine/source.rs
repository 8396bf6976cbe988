//! The source of a run: what a command starts from before any step is planned — the
//! configuration with its input variables and provider registry ([`load`]), the state read
//! without writing it ([`open_read`]), the term graph, the state's instances grouped by
//! resource, the `-target` scope, and the walk's context ([`new_ctx`]) made of all of them.

use super::core::{Ctx, StateInstances};
use super::graph::{build, Node, TermGraph};
use super::journal::state_error;
use super::observer::Observer;
use super::providers::{stack_config, Registry};
use super::report::Report;
use super::request::Options;
use super::timing::timed;
use super::values::Values;
use super::walk::Limits;
use crate::addr::{ModulePath, ProviderAddr, ResourceInstanceAddr, Target};
use crate::config::{Config, ResourceKey};
use crate::diag::{Diagnostic, Diagnostics};
use crate::provider::Provider;
use crate::value::Value;
use crate::value::ValueMap;
use cairn_graph::NodeId;
use cairn_state::{OpenOptions, Snapshot, Store};
use sha2::Digest;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, RwLock};

/// A loaded configuration with its inputs and providers.
pub struct Loaded {
    pub config: Arc<Config>,
    pub inputs: ValueMap,
    /// A hash of the configuration's files (see [`config_hash`]); empty when loaded leniently
    /// (`inspect` makes no saved plan).
    pub files_hash: String,
    pub registry: Arc<Registry>,
    pub diags: Diagnostics,
}

/// Loads the configuration, the input variables and the provider registry.
pub fn load(opts: &Options) -> Result<Loaded, Report<()>> {
    load_with(opts, None, false)
}

/// mimalloc's `purge_delay` option (its `mi_option_e` in mimalloc 3, which `libmimalloc-sys`
/// builds, has no Rust name for it): the one before `use_numa_nodes`.
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;
const _: () = assert!(libmimalloc_sys::mi_option_use_numa_nodes == MI_OPTION_PURGE_DELAY + 1);

/// From this many resource blocks on, freed memory goes back to the system at once.
const LARGE_CONFIGURATION: usize = 20_000;

/// How fast freed memory goes back to the system, by the configuration's size (issue 31). A
/// large run returns it at once (mimalloc's purge delay 0 instead of 10–100 ms), which keeps
/// its peak down: 100,000 resources, `plan` 383 → 344 MiB, `apply` 623 → 577 MiB. It costs
/// system time in `madvise` calls, which a small run would see (10,000 resources: `apply`
/// 0.43 → 0.50 s, for 145 → 97 MiB), so a small run keeps mimalloc's default. Setting the
/// option is harmless when mimalloc is not the allocator (`--features system-alloc`).
fn size_memory_for(resources: usize) {
    if resources >= LARGE_CONFIGURATION {
        // SAFETY: sets an option of the linked mimalloc; any value is valid, at any time.
        unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, 0) };
    }
}

/// [`load`]; with `saved` (the variable values of a saved plan) the inputs are exactly those
/// values: no `-var`, tfvars file or `TF_VAR_*` is read, as the plan already holds them. When
/// `lenient` (`inspect`), errors in the configuration or the variables do not stop it (they are
/// in `Loaded::diags`), and a root variable without a value is unknown.
pub(super) fn load_with(
    opts: &Options,
    saved: Option<&ValueMap>,
    lenient: bool,
) -> Result<Loaded, Report<()>> {
    // Early evaluation (module sources, backend, required_providers) reads the same inputs
    // as the run; a saved plan's values when applying one.
    let mut inputs = early_inputs(opts);
    inputs.given = saved.cloned();
    let (config, mut diags) = timed("load configuration", || match &opts.only_file {
        _ if lenient => crate::config::load_lenient(&opts.dir, opts.only_file.as_deref(), &inputs),
        Some(f) => crate::config::load_file(&opts.dir, f, &inputs),
        None => crate::config::load_with(&opts.dir, &inputs),
    });
    let Some(mut config) = config else {
        return Err(Report::fail(diags, None));
    };
    size_memory_for(config.modules().iter().map(|m| m.resources.len()).sum());
    if opts.generate_config {
        diags.extend(config.generate_import_blocks());
    }
    override_modules(&mut config, &opts.module_overrides, &mut diags);
    let rerouted = reroute_overrides(&mut config, &opts.overrides, &mut diags);
    replace_providers(&mut config, &opts.test_providers, &mut diags);
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
        Some(values) => {
            let mut diags = changed_variables(opts, &mut config, values);
            let mut values = values.clone();
            diags.extend(ephemeral_inputs(opts, &mut config, &mut values));
            (values, diags)
        }
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
        crate::provider::builtin::builtin_with(crate::provider::host::Host {
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
                opts.plugin_dir.as_deref().unwrap_or(&opts.dir),
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
    // `cairn test`'s mock providers answer instead of the real ones (whose schema they use
    // when there is one).
    for (name, spec) in &opts.mocks {
        let mock = crate::provider::mock::MockProvider::new(
            name,
            packages.get(name),
            &config,
            spec.clone(),
        );
        packages.insert(name.clone(), Arc::new(mock));
    }
    for (name, original, spec) in rerouted {
        let real = packages.get(&original);
        let mock = crate::provider::mock::MockProvider::new(&name, real, &config, spec);
        packages.insert(name, Arc::new(mock.without_provider_config()));
    }
    // Ephemeral values where they may not go (a stored argument, a root output), before
    // anything is opened or planned.
    if !lenient {
        let schema = |mode, type_: &str| {
            packages
                .get(crate::addr::package_of(type_))
                .and_then(|p| p.schema().block(mode, type_))
        };
        diags.extend(crate::config::check_ephemeral(&config, &schema));
        if diags.has_errors() {
            return Err(Report::fail(diags, Some(config)));
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

/// What early evaluation reads for a run: its `-var`s, environment, directory, workspace.
pub(crate) fn early_inputs(opts: &Options) -> crate::config::EarlyInputs {
    crate::config::EarlyInputs::new(&opts.vars, &opts.env, &opts.dir, opts.workspace.as_deref())
}

/// Opens the state to read it; no state yet reads as an empty one. The store is returned so
/// the caller holds the lock for as long as it works on the snapshot.
pub(super) fn open_read(
    opts: &Options,
) -> Result<(Option<Store>, Snapshot, Vec<String>), Diagnostic> {
    let o = OpenOptions {
        command: opts.command.clone(),
        lock_timeout: opts.lock_timeout,
        write: false,
        skip_lock: false,
        encryption: crate::engine::encryption::state(),
    };
    match timed("open state", || Store::open(&opts.state_dir, &o)) {
        Ok((mut store, warnings)) => {
            // Moved out, not copied: the store stays open only to hold its lock.
            let snapshot = store.take_snapshot();
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
pub fn config_hash(files_hash: &str, inputs: &ValueMap) -> String {
    let mut h = sha2::Sha256::new();
    h.update(files_hash.as_bytes());
    h.update([0]);
    h.update(serde_json::to_string(inputs).unwrap_or_default().as_bytes());
    format!("{:x}", h.finalize())
}

/// Builds the term graph and reports cycles.
pub(super) fn term_graph(config: &Config) -> (TermGraph, Diagnostics) {
    let (g, mut diags) = build(config);
    diags.extend(g.cycle_diagnostics(&config.sources));
    (g, diags)
}

/// What of the state the configuration still declares ([`StateInstances`]), and the
/// instances whose resource the configuration no longer has at all.
pub(super) fn classify_state(
    config: &Config,
    snapshot: &Snapshot,
) -> (StateInstances, Vec<(ResourceInstanceAddr, ProviderAddr)>) {
    let mut keyed: BTreeMap<(ModulePath, ResourceKey), Vec<ResourceInstanceAddr>> = BTreeMap::new();
    let mut orphans = Vec::new();
    let managed = snapshot
        .resources
        .iter()
        .filter_map(|(a, i)| i.current.as_ref().map(|o| (a, &o.provider.addr)));
    let data = snapshot.data.iter().map(|(a, d)| (a, &d.provider.addr));
    for (addr, provider) in managed.chain(data) {
        let has_keys = addr.resource.module.0.iter().any(|s| s.key.is_some());
        let module = match has_keys {
            true => std::borrow::Cow::Owned(addr.resource.module.without_keys()),
            false => std::borrow::Cow::Borrowed(&addr.resource.module),
        };
        let key = ResourceKey {
            mode: addr.resource.mode,
            type_: addr.resource.type_.clone(),
            name: addr.resource.name.clone(),
        };
        let declared = config
            .module(&module)
            .is_some_and(|m| m.resources.contains_key(&key));
        if !declared {
            orphans.push((addr.clone(), provider.clone()));
        } else if has_keys {
            keyed
                .entry((module.into_owned(), key))
                .or_default()
                .push(addr.clone());
        }
    }
    let instances = StateInstances {
        managed: snapshot.resources.clone(),
        data: snapshot.data.clone(),
        keyed,
    };
    (instances, orphans)
}

/// The nodes a `-target` run walks: the targets and everything they depend on.
/// The nodes a `-target` walk visits (the targets and what they depend on), and the resources
/// whose instances it narrows: those a target names that nothing else needs whole.
pub(super) type Targeted = (
    Option<BTreeSet<NodeId>>,
    BTreeMap<NodeId, super::exclude::InstanceScope>,
);

pub(super) fn targeted(g: &TermGraph, targets: &[Target]) -> Targeted {
    if targets.is_empty() {
        return (None, BTreeMap::new());
    }
    let mut keep = BTreeSet::new();
    let mut named: BTreeMap<NodeId, super::exclude::InstanceScope> = BTreeMap::new();
    let mut needed = BTreeSet::new();
    for (id, node) in g.dag.nodes() {
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
                    named.insert(id, super::exclude::InstanceScope::Only(hits));
                }
                hit
            }
            Node::Orphan { addr } | Node::Destroy { addr, .. } => targets.iter().any(|t| t.contains(addr)),
            Node::Call { module, name } => targets.iter().any(|t| matches!(t, Target::Module(m) if m.without_keys().starts_with(&module.child(name, None)))),
            _ => false,
        };
        if hit {
            keep.insert(id);
            let deps = g.dag.transitive_dependencies(id);
            needed.extend(deps.iter().copied());
            keep.extend(deps);
        }
    }
    // A named resource that another target's node depends on is planned whole.
    named.retain(|id, _| !needed.contains(id));
    (Some(keep), named)
}

pub(super) fn new_ctx(
    loaded: &Loaded,
    graph: TermGraph,
    snapshot: &Snapshot,
    opts: &Options,
    observer: Arc<dyn Observer>,
) -> Arc<Ctx> {
    let (only, only_instances) = if opts.excludes.is_empty() {
        targeted(&graph, &opts.targets)
    } else {
        super::exclude::excluded(&graph, &opts.excludes)
    };
    new_ctx_only(
        loaded,
        graph,
        snapshot,
        opts,
        observer,
        only,
        only_instances,
    )
}

/// [`new_ctx`] for a walk of the nodes `only` (every node: `None`), whatever the targets.
pub(super) fn new_ctx_only(
    loaded: &Loaded,
    graph: TermGraph,
    snapshot: &Snapshot,
    opts: &Options,
    observer: Arc<dyn Observer>,
    only: Option<BTreeSet<NodeId>>,
    only_instances: BTreeMap<NodeId, super::exclude::InstanceScope>,
) -> Arc<Ctx> {
    let (state_instances, _) = classify_state(&loaded.config, snapshot);
    let mut ctx = Ctx {
        config: loaded.config.clone(),
        graph: Arc::new(graph),
        registry: loaded.registry.clone(),
        values: RwLock::new(Values {
            functions: Some(super::values::Functions(loaded.registry.clone())),
            workspace: opts.workspace.clone(),
            ephemeral: crate::config::ephemeral_terms(&loaded.config),
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

/// `-var` and `-var-file` beside a saved plan: a variable they set to a value other than the
/// plan's is an error (the plan applies with its own values), as in Terraform.
/// A saved plan holds no ephemeral variable (`ephemeral = true`): their values come again
/// from `-var`, `-var-file`, `TF_VAR_*` or their defaults when it is applied, as Terraform
/// asks for them again.
fn ephemeral_inputs(opts: &Options, config: &mut Config, values: &mut ValueMap) -> Diagnostics {
    let names: BTreeSet<String> = config
        .root
        .variables
        .values()
        .filter(|v| v.ephemeral)
        .map(|v| v.name.clone())
        .collect();
    if names.is_empty() {
        return Diagnostics::new();
    }
    let (given, diags) = crate::config::input_values(config, &opts.vars, &opts.env, &opts.dir);
    let diags: Diagnostics = diags
        .into_iter()
        .filter(|d| {
            // Only the ephemeral variables' own problems: the others come from the plan.
            d.severity != crate::diag::Severity::Error
                || names.iter().any(|n| d.detail.contains(&format!("\"{n}\"")))
        })
        .collect();
    for n in &names {
        if let Some(v) = given.get(n) {
            values.insert(n.clone(), v.clone());
        }
    }
    diags
}

pub(super) fn changed_variables(
    opts: &Options,
    config: &mut Config,
    planned: &ValueMap,
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
            crate::config::VarArg::Value(n, _) => Some(n.as_str()),
            crate::config::VarArg::File(_) => None,
        })
        .collect();
    for (name, value) in &given {
        let set_here = named.contains(name.as_str()) || baseline.get(name) != Some(value);
        let same = planned
            .get(name)
            .is_some_and(|p| super::rules::equal_ignoring_marks(p, value));
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

/// `cairn test`'s overridden resources: each is moved to a provider of its own (a mock whose
/// defaults are the override's values), so no real provider is asked about it. Returns each
/// such provider's name, the package the resource had, and the mock's defaults.
/// `cairn test`'s `override_module` blocks: the called module is emptied (no resources,
/// calls, locals or checks are left to run) and each of its outputs becomes the value given
/// for it, or null, as `terraform test` does.
fn override_modules(config: &mut Config, list: &[(Vec<String>, Value)], diags: &mut Diagnostics) {
    for (path, outputs) in list {
        let mut m = Some(&mut config.root);
        for name in path {
            m = m.and_then(|m| m.children.get_mut(name));
        }
        let Some(m) = m else {
            diags.push(Diagnostic::warning(
                "Override target not found",
                format!(
                    "The override of module.{} names no module call of the configuration: it is ignored.",
                    path.join(".module.")
                ),
            ));
            continue;
        };
        m.resources.clear();
        m.locals.clear();
        m.checks.clear();
        m.calls.clear();
        m.children.clear();
        m.providers.clear();
        m.moved.clear();
        m.removed.clear();
        m.imports.clear();
        m.state_blocks.clear();
        let given = match outputs.unmarked() {
            Value::Object(o) => o.clone(),
            _ => ValueMap::new(),
        };
        for (name, out) in m.outputs.iter_mut() {
            let text = match given.get(name) {
                Some(v) => crate::value::format_hcl(v),
                None => "null".to_string(),
            };
            match text.parse::<hcl_edit::expr::Expression>() {
                Ok(e) => out.value = e,
                Err(e) => diags.push(Diagnostic::error(
                    "Invalid override value",
                    format!(
                        "The override of output {name} of module.{} could not be used: {e}.",
                        path.join(".module.")
                    ),
                )),
            }
            out.depends_on.clear();
            out.preconditions.clear();
        }
    }
}

fn reroute_overrides(
    config: &mut Config,
    overrides: &[crate::provider::mock::OverrideSpec],
    diags: &mut Diagnostics,
) -> Vec<(String, String, crate::provider::mock::MockSpec)> {
    let mut out = Vec::new();
    for o in overrides {
        // The package the resource has now, then the resource itself, to move it.
        let original = config.module(&o.module).and_then(|m| {
            let r = m.resources.get(&o.key)?;
            let local = match &r.provider {
                Some(p) => p.name.clone(),
                None => crate::addr::package_of(&r.type_).to_string(),
            };
            Some(super::graph::package_of_local(m, &local))
        });
        let resource = original.as_ref().and_then(|_| {
            let mut m = &mut config.root;
            for step in &o.module.0 {
                m = m.children.get_mut(&step.name)?;
            }
            m.resources.get_mut(&o.key)
        });
        let (Some(original), Some(r)) = (original, resource) else {
            diags.push(Diagnostic::warning(
                "Override target not found",
                format!(
                    "The override of {}{}.{} names no resource of the configuration: it is ignored.",
                    if o.module.is_root() { String::new() } else { format!("{}.", o.module) },
                    o.key.type_,
                    o.key.name
                ),
            ));
            continue;
        };
        // Named by the resource, so that its provider stays the same from run to run.
        let module: Vec<&str> = o.module.0.iter().map(|s| s.name.as_str()).collect();
        let mode = if o.key.mode == crate::addr::Mode::Data {
            "data"
        } else {
            "managed"
        };
        let name = format!(
            "cairnoverride_{}_{mode}_{}_{}",
            module.join("_"),
            o.key.type_,
            o.key.name
        );
        r.provider = Some(Box::new(crate::config::ProviderRef {
            name: name.clone(),
            alias: None,
            key: None,
            span: r.span,
        }));
        let mut spec = crate::provider::mock::MockSpec {
            at_plan: o.at_plan,
            ..Default::default()
        };
        let into = match o.key.mode {
            crate::addr::Mode::Managed => &mut spec.resources,
            crate::addr::Mode::Data | crate::addr::Mode::Ephemeral => &mut spec.data,
        };
        into.insert(o.key.type_.clone(), o.values.clone());
        out.push((name, original, spec));
    }
    out
}

/// `cairn test`'s `provider` blocks replace the root module's blocks of the same name and
/// alias; their text (constants, evaluated by the runner) is added to the sources as a file of
/// its own.
fn replace_providers(
    config: &mut Config,
    providers: &[(String, Option<String>, String)],
    diags: &mut Diagnostics,
) {
    for (name, alias, text) in providers {
        let label = match alias {
            Some(a) => format!("provider \"{name}\" (alias {a}) of the test file"),
            None => format!("provider \"{name}\" of the test file"),
        };
        let file = config.sources.add(&label, text.clone());
        let body: hcl_edit::structure::Body = match text.parse() {
            Ok(b) => b,
            Err(e) => {
                diags.push(Diagnostic::error(
                    "Invalid provider block",
                    format!("The test file's provider block for {name:?} could not be used: {e}"),
                ));
                continue;
            }
        };
        let root = &mut config.root;
        root.providers
            .retain(|p| !(p.name == *name && p.alias == *alias));
        root.providers.push(crate::config::ProviderBlock {
            name: name.clone(),
            alias: alias.clone(),
            for_each: None,
            each: None,
            body,
            file,
            json: false,
            span: crate::diag::Span {
                file,
                start: 0,
                end: 0,
            },
        });
    }
}
