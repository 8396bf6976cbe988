//! The engine's API: one entry point per command, each taking plain request values
//! ([`Options`], a [`PlanMode`], a saved [`Plan`]) and an [`Observer`], and returning a
//! [`Report`]: `plan` (`PlanMode::Normal`, `Destroy`, `ReadOnly`), `apply_start` →
//! [`PendingApply::approve`]/[`PendingApply::decline`] (and `apply`, approved in advance),
//! `refresh`, `import`, `inspect`, `graph_dot`; the state edits are `edit::state_edit`.
//! Beside them, what commands that work on the state itself call: [`StateRead`] (the state
//! read without writing), [`backend`] (`init`'s backend and migration, `force-unlock`),
//! [`workspaces`], [`watch`] (the log followed beside other commands, for `cairn ui`) and
//! [`history`] (one description of each event and run, which every command renders).
//!
//! A command runs along source → steps → execution: `source.rs` loads what it starts from
//! (configuration, inputs, providers, state), `assemble.rs` makes the plan (the step
//! generator), `execute.rs` carries an approved plan out; a command that writes does so in
//! a `session::RunSession`.

use super::apply::order::add_destroys;
use super::assemble::{drift_plan, in_address_order, make_plan};
use super::core::{run as walk_phase, Ctx};
pub(crate) use super::edit::{state_edit, EditRequest, StateEdit};
use super::execute::{execute, record_read_only, record_refreshed};
use super::graph::Node;
use super::inspect_phase::InspectPhase;
pub use super::inspect_phase::Inspected;
use super::observer::{Observer, Progress};
use super::provider_inputs::provider_inputs;
use super::providers::{canonical, Registry};
pub(crate) use super::push::{replaced_resources, Push};
use super::recover::recover;
use super::refresh::refresh as refresh_pass;
pub use super::report::Report;
pub use super::request::Options;
use super::sabotage::Sabotage;
use super::session::RunSession;
pub use super::session::{finish_recorded, recorded_diagnostics};
pub use super::source::{config_hash, files_hash, load, Loaded};
use super::source::{load_with, new_ctx, open_read, term_graph};
pub use super::state_read::StateRead;
pub(crate) use super::terraform_state::{export as export_tfstate, read_tfstate};
use super::timing::{timed, timed_async};
pub use super::values::{Expansion, Values};
use super::values::{InstanceScope, Repetition};
use super::walk::Limits;
pub use super::{backend, encryption, history, plan_history, state_read, watch, workspaces};
use crate::addr::{ModulePath, ResourceInstanceAddr, Target};
use crate::config::ResourceKey;
use crate::diag::{Diagnostic, Diagnostics};
use crate::plan::{Action, Plan, PlanMode};
use crate::value::Value;
use crate::value::ValueMap;
use cairn_graph::NodeId;
use cairn_state::{EventBody, RunOutcome, RunSummary, Snapshot};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

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
    let snapshot = Arc::new(snapshot);
    let plan = stopping_providers(
        opts,
        &loaded.registry,
        make_plan(&loaded, opts, mode, &snapshot, &observer, &mut diags),
    )
    .await;
    drop(store);
    let (result, diags) = match diags.has_errors() {
        true => failed_plan(&loaded, mode, plan, diags),
        false => (plan, diags),
    };
    Report {
        result,
        diags,
        notes,
        config: Some(loaded.config),
    }
}

/// A plan that failed, as Terraform reports it. Terraform validates a configuration before it
/// plans and stops at validation's errors: those come alone, with no partial plan. An error
/// that only the plan's values reveal (an input variable's value, a resource's attributes)
/// comes after the partial plan of what could be planned. Cairn asks the validation question
/// only once a plan has failed (`schema_checks::validation_errors`), so a plan that succeeds
/// pays nothing for it. A failed destroy plan is never shown (nor is Terraform's).
fn failed_plan(
    loaded: &Loaded,
    mode: PlanMode,
    plan: Option<Plan>,
    diags: Diagnostics,
) -> (Option<Plan>, Diagnostics) {
    if mode == PlanMode::Destroy {
        return (None, diags);
    }
    let invalid = super::schema_checks::validation_errors(&loaded.config, &loaded.registry);
    if invalid.is_empty() {
        return (plan, diags);
    }
    let mut kept: Diagnostics = diags.into_iter().filter(|d| !d.is_error()).collect();
    kept.extend(invalid);
    (None, kept)
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
    if !exists || addr.resource.mode != crate::addr::Mode::Managed {
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
        match RunSession::begin(opts, &loaded, &*observer, &mut notes, &mut diags).await {
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
                        let slot = plan.provider_changes.iter().find(|p| p.addr == *c.provider);
                        let config = slot.and_then(|s| s.after.clone()).unwrap_or_else(Value::null);
                        let id = super::providers::new_instance_id(&c.provider.package);
                        let instance = cairn_state::ProviderInstance {
                            addr: (*c.provider).clone(),
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
                    provider: cairn_state::ProviderRef::new((*c.provider).clone(), provider_id),
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
            excludes: p.request.excludes.clone(),
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
        match RunSession::begin(opts, &loaded, &*observer, &mut notes, &mut diags).await {
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
            // The state's head before this run started must be the plan's base, and the
            // run's start (and recovery, which found nothing to resolve) added nothing else.
            } else if p.base_seq + 1 != run || snapshot.head != session.began_at {
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
    let plan = match plan {
        Some(plan) if !diags.has_errors() => plan,
        plan => {
            // A fresh plan that failed is shown as `plan` shows it (its partial plan, unless
            // validation already fails); a saved plan that cannot be applied is not shown again.
            let (plan, mut diags) = match (saved_plan, diags.has_errors()) {
                (false, true) => failed_plan(&loaded, mode, plan, diags),
                _ => (None, diags),
            };
            session.finish(
                RunOutcome::Failed,
                RunSummary::default(),
                &mut diags,
                Some(&loaded.config),
            );
            return ApplyStart::Done(Report {
                result: plan.map(|plan| Applied {
                    plan: Some(plan),
                    confirmed: false,
                    ..Default::default()
                }),
                diags,
                notes,
                config: Some(loaded.config),
            });
        }
    };
    // What the run is about to do, with why (deferred reads with their causal chain): the
    // run's own record of its plan, durable with the next commit.
    if plan.applyable {
        let record = crate::plan::record::plan_record(&plan, saved_plan, &loaded.files_hash);
        if let Err(e) = session
            .journal()
            .append_deferred(EventBody::RunPlanned { plan: record })
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
            mut plan,
            mut diags,
            notes,
            observer,
        } = self;
        let opts = &opts;
        // The apply's walk checks every `check` block again, with final values.
        diags.0.retain(|d| !plan.check_findings.contains(d));
        let journal = session.journal();
        let run = session.run;
        record_refreshed(journal, &plan, &mut diags);

        let (summary, outputs) = if plan.mode == PlanMode::ReadOnly {
            record_read_only(journal, &plan, &mut diags)
        } else {
            execute(
                &loaded, opts, &mut plan, journal, run, &observer, &mut diags,
            )
            .await
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

/// `cairn refresh [-preview]`: reads every managed object; records the result unless
/// previewing. The result is a refresh-only plan holding what changed outside (its drift).
pub async fn refresh(opts: &Options, preview: bool, observer: Arc<dyn Observer>) -> Report<Plan> {
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
) -> Report<Plan> {
    let mut diags = loaded.diags.clone();
    if !opts.excludes.is_empty() {
        diags.push(super::exclude::plan_warning());
    }
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
        let snapshot = Arc::new(snapshot);
        let scoped = super::exclude::refresh_scope(&snapshot, &opts.excludes).map(Arc::new);
        let inputs = provider_inputs(&loaded, opts, &snapshot, &observer, &mut diags).await;
        let r = refresh_pass(
            scoped.as_ref().unwrap_or(&snapshot),
            &loaded.registry,
            &inputs.args,
            &limits,
            &observer,
        )
        .await;
        inputs.close().await;
        diags.extend(r.diags);
        return Report {
            result: Some(drift_plan(r.drift)),
            diags,
            notes,
            config: Some(loaded.config),
        };
    }
    let (session, snapshot) =
        match RunSession::begin(opts, &loaded, &*observer, &mut notes, &mut diags).await {
            Ok(s) => s,
            Err(d) => return Report::fail(Diagnostics::from(d), Some(loaded.config)),
        };
    // `-exclude`: the excluded objects and their dependents are not read.
    let scoped = super::exclude::refresh_scope(&snapshot, &opts.excludes).map(Arc::new);
    let inputs = provider_inputs(&loaded, opts, &snapshot, &observer, &mut diags).await;
    let pass = refresh_pass(
        scoped.as_ref().unwrap_or(&snapshot),
        &loaded.registry,
        &inputs.args,
        &limits,
        &observer,
    );
    let r = timed_async("refresh pass", pass).await;
    inputs.close().await;
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
        result: Some(drift_plan(r.drift)),
        diags,
        notes,
        config: Some(loaded.config),
    }
}

/// The result of `inspect`: every instance, and the evaluated values (for `console`).
pub struct Inspection {
    /// Without their attributes until `take_instances`.
    instances: Vec<Inspected>,
    pub outputs: ValueMap,
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
        crate::eval::expr::eval(&expr, &ConsoleScope(&scope)).map_err(|d| (d, sources))
    }
}

/// The console's scope: the root module's, where `timestamp()` and `uuid()` give values, as
/// in `terraform console`.
struct ConsoleScope<'a, 'b>(&'a InstanceScope<'b>);

impl crate::eval::Scope for ConsoleScope<'_, '_> {
    fn resolve(&self, s: &crate::eval::Subject) -> Result<Value, crate::eval::ScopeError> {
        self.0.resolve(s)
    }
    fn file(&self) -> crate::diag::FileId {
        self.0.file()
    }
    fn module_dir(&self) -> &std::path::Path {
        self.0.module_dir()
    }
    fn root_dir(&self) -> &std::path::Path {
        self.0.root_dir()
    }
    fn is_open(&self, s: &crate::eval::Subject) -> bool {
        self.0.is_open(s)
    }
    fn provider_functions(&self) -> Option<&dyn crate::eval::ProviderFunctions> {
        self.0.provider_functions()
    }
    fn settles_impure(&self) -> bool {
        true
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
        Arc::new(super::observer::Silent),
    );
    ctx.values.write().expect("values").workspace = super::inspect_phase::selected_workspace(opts);
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
    let unchecked_providers = super::inspect_phase::unchecked_providers(&ctx);
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
    let instances = phase.take_sorted();
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
                        .filter_map(|c| graph.id(&Node::of_instance(&c.addr)))
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
