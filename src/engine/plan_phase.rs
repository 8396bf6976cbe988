//! The plan phase: diffs first, then data reads.
//!
//! Each managed instance is diffed by its provider against the refreshed state, with its
//! configuration evaluated from the *planned* values upstream. Each data instance is read
//! during the plan, after everything it depends on has been planned — unless its configuration
//! (or its provider's) holds unknowns, or a managed resource it depends on has a pending change
//! (see `deferral`): then it is deferred to apply, with the reason and the chain that caused it.
//! Read-only plans use the same walk: managed instances take their refreshed state, every data
//! source whose configuration is known is read, nothing else is proposed.

use super::core::{
    contradiction, plan_without_provider, Ctx, Instance, OrphanReason, Phase, ProviderSlot,
    ProviderState,
};
use super::deferral::find_pending;
use super::graph::Node;
use super::observer::Progress;
use super::provider_diags::{provider_diag, provider_failure, report_warnings};
use super::rules::{
    apply_ignore_changes, check_scoped_failure, equal_ignoring_marks, missing_provider,
    reconfigured_at_apply,
};
use super::sabotage::Sabotage;
use crate::addr::{Mode, ProviderAddr, ResourceAddr, ResourceInstanceAddr};
use crate::config::IgnoreChanges;
use crate::diag::{Diagnostic, Diagnostics};
use crate::eval::refs::references;
use crate::eval::Subject;
use crate::plan::{Action, Change, DataRead, PlanMode, ProviderChange, Reason};
use crate::provider::{ApplyRequest, ConfigDiff, Configured};
use crate::value::ValueMap;
use crate::value::{carry_marks, Value};
use cairn_state::{ObjectMeta, ResourceObject, Snapshot};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// What the plan walk collects.
#[derive(Default)]
pub(crate) struct PlanOut {
    /// In the order recorded (the walk's order); one instance recorded twice keeps the later
    /// (`into_changes`). A vector, not a map keyed by address: a map's node has room for
    /// eleven changes of several hundred bytes (issue 31).
    pub changes: Vec<Change>,
    pub provider_changes: BTreeMap<ProviderAddr, ProviderChange>,
    pub data_reads: BTreeMap<ResourceInstanceAddr, DataRead>,
    pub dropped_data: BTreeSet<ResourceInstanceAddr>,
    pub outputs: BTreeMap<String, (Value, bool)>,
    /// The managed changes with an action other than no-op, found by resource (for the
    /// deferral rule, which asks whether a resource has a pending change).
    pub pending: super::deferral::PendingActions,
    /// Data instances deferred to apply.
    pub deferred: BTreeSet<ResourceInstanceAddr>,
    /// Provider instances whose `diff_config` said replace.
    pub replaced_providers: BTreeSet<ProviderAddr>,
    pub warnings: Vec<String>,
}

/// What an `import` block brought into a plan: the object imported and read, planned
/// against as the prior object.
struct Imported {
    value: Value,
    importing: crate::plan::Importing,
    /// The configuration generated from the object (`plan -generate-config-out`).
    generated: Option<Value>,
    /// `cairn import`: the object is recorded as read, nothing is planned.
    cli: bool,
}

pub(crate) struct PlanPhase {
    pub mode: PlanMode,
    /// The refreshed prior state.
    pub prior: Arc<Snapshot>,
    /// `-replace=ADDR`
    pub replace: BTreeSet<ResourceInstanceAddr>,
    /// The state (before refresh) holds no resource, data source or output: in read-only
    /// mode nothing is read.
    pub never_applied: bool,
    /// `import` blocks' targets (see `imports.rs`).
    pub imports: super::imports::Imports,
    pub out: Mutex<PlanOut>,
    /// The ephemeral resources this walk opened, closed after it.
    pub ephemerals: super::ephemeral::Ephemerals,
}

/// A planned value equal to the prior one is made the prior one (`ValueMap`s are shared
/// when copied): a no-op plan then holds each object once, not twice — in the change and in
/// the walk's values alike (the walk's copy of the provider's planned maps was 26 MB of a
/// no-op plan of 100,000 resources; issue 31). Equal maps already shared compare at once.
fn share_prior(change: &mut Change) {
    if let (Some(before), Some(after)) = (&change.before, &mut change.after) {
        if before == after {
            *after = before.clone();
        }
    }
}

impl PlanOut {
    /// What the deferral rule reads of the plan so far.
    pub(crate) fn planned(&self) -> super::deferral::Planned<'_> {
        super::deferral::Planned {
            changes: &self.changes,
            pending: &self.pending,
            deferred: &self.deferred,
        }
    }

    /// The recorded changes in address order, the later of two for one address.
    pub(crate) fn take_changes(&mut self) -> Vec<Change> {
        // The indexes are into the vector as recorded.
        self.pending = super::deferral::PendingActions::default();
        let mut changes = std::mem::take(&mut self.changes);
        let unique = {
            let mut seen = rustc_hash::FxHashSet::default();
            changes.iter().all(|c| seen.insert(&c.addr))
        };
        if unique {
            // One change per address (the rule): sorted in place, without the stable sort's
            // buffer of half the changes (33 MB at 100,000).
            changes.sort_unstable_by(|a, b| a.addr.cmp(&b.addr));
            return changes;
        }
        changes.sort_by(|a, b| a.addr.cmp(&b.addr));
        // In place: of two for one address (in recorded order, the sort being stable), the
        // later's content is kept where the earlier stood.
        changes.dedup_by(|later, kept| {
            let same = later.addr == kept.addr;
            if same {
                std::mem::swap(later, kept);
            }
            same
        });
        changes
    }
}

impl PlanPhase {
    pub(crate) fn new(
        mode: PlanMode,
        prior: Arc<Snapshot>,
        replace: BTreeSet<ResourceInstanceAddr>,
    ) -> Self {
        PlanPhase {
            mode,
            prior,
            replace,
            never_applied: false,
            imports: Default::default(),
            out: Mutex::new(PlanOut::default()),
            ephemerals: Default::default(),
        }
    }

    fn out(&self) -> std::sync::MutexGuard<'_, PlanOut> {
        self.out.lock().expect("plan out lock")
    }

    fn record(&self, mut change: Change) {
        share_prior(&mut change);
        let mut out = self.out();
        let managed = change.addr.resource.mode == Mode::Managed;
        if !managed && change.action == Action::Read {
            out.deferred.insert(change.addr.clone());
        }
        out.changes.push(change);
        if managed {
            let out = &mut *out;
            out.pending.pushed(&out.changes);
        }
    }

    async fn plan_managed(&self, ctx: &Arc<Ctx>, inst: Instance) -> Result<Value, Diagnostics> {
        let res = &ctx.module(&inst.static_module).resources[&inst.key];
        let prior = self.prior.current(&inst.addr);
        let mut prior_value = prior.as_ref().map(|o| Value::from_stored(&o.attrs));
        let mut prior_meta = prior.as_ref().map(|o| o.meta.clone()).unwrap_or_default();
        let slot = ctx
            .provider_slot(&inst.provider)
            .ok_or_else(|| missing_provider(&inst.provider, &inst.addr))?;
        // An `import` block for this instance: an object not in state yet is imported now
        // (the provider's import, then a read), and planned against as the prior object.
        let mut importing = None;
        let mut generated = None;
        if self.mode == PlanMode::Normal {
            if let Some(imported) = self
                .import_prior(ctx, &slot, &inst, prior.is_some())
                .await?
            {
                if imported.cli {
                    return Ok(self.record_cli_import(&inst, imported));
                }
                prior_value = Some(imported.value);
                prior_meta = imported.importing.meta.clone();
                importing = Some(imported.importing);
                generated = imported.generated;
            }
        }
        let sensitive_attrs: Vec<String> = inst
            .schema
            .attributes
            .iter()
            .filter(|(_, a)| a.sensitive)
            .map(|(k, _)| k.clone())
            .collect();

        if self.mode == PlanMode::ReadOnly {
            // Read-only: a managed resource is what refresh found; nothing is proposed.
            return Ok(
                prior_value.unwrap_or_else(|| plan_without_provider(&inst.schema, &inst.config))
            );
        }

        let replace_reason = self.forced_replacement(ctx, &inst, prior, &slot);
        let config = match (&prior_value, &res.lifecycle.ignore_changes) {
            _ if generated.is_some() => generated.clone().expect("checked"),
            (Some(pv), ignore) if *ignore != IgnoreChanges::None => {
                apply_ignore_changes(&inst.config, pv, ignore, &inst.schema)
            }
            _ => inst.config.clone(),
        };

        validate_instance(ctx, &slot.package, Mode::Managed, &inst, &config).await?;
        let mut change = Change {
            addr: inst.addr.clone(),
            provider: crate::plan::shared_provider(&inst.provider),
            action: Action::NoOp,
            before: prior_value,
            after: None,
            replace_paths: Vec::new(),
            reason: None,
            sensitive_attrs,
            diff_unavailable: false,
            importing: importing.map(Box::new),
            deposed: None,
        };
        match &slot.state {
            ProviderState::Unknown { .. } => {
                let create_before_destroy = res.lifecycle.create_before_destroy;
                let in_state = prior.is_some();
                self.plan_unknown_provider(
                    &inst,
                    &config,
                    in_state,
                    replace_reason,
                    create_before_destroy,
                    &mut change,
                )
            }
            ProviderState::Unavailable => return Err(missing_provider(&inst.provider, &inst.addr)),
            ProviderState::Configured(c) => {
                change.reason = replace_reason.map(Box::new);
                self.plan_configured(ctx, c, &inst, &config, &prior_meta, &mut change)
                    .await?;
            }
        }
        if change.action.is_replace() && res.lifecycle.prevent_destroy {
            // Kept in the (failed) plan, which shows the replacement it refuses, as
            // Terraform's does.
            self.record(change);
            return Err(prevent_destroy_error(&inst.addr, res.span));
        }
        // The walk's value is the recorded one: shared with the prior object when equal.
        share_prior(&mut change);
        let after = change.after.clone().unwrap_or_else(Value::null);
        self.record(change);
        Ok(after)
    }

    /// The import an `import` block names for this instance, when the state has no object
    /// for it (`in_state` false): imported and read now, through the instance's provider.
    async fn import_prior(
        &self,
        ctx: &Arc<Ctx>,
        slot: &ProviderSlot,
        inst: &Instance,
        in_state: bool,
    ) -> Result<Option<Imported>, Diagnostics> {
        let Some(target) = self.imports.target(ctx, &inst.addr)? else {
            return Ok(None);
        };
        if in_state {
            return Ok(None);
        }
        let c = match &slot.state {
            ProviderState::Configured(c) => c.clone(),
            ProviderState::Unknown { .. } => {
                return Err(super::imports::unknown_provider(&slot.addr, &inst.addr))
            }
            ProviderState::Unavailable => return Err(missing_provider(&slot.addr, &inst.addr)),
        };
        let (value, meta) =
            super::imports::import_object(ctx, c, inst, &target.id, target.cli).await?;
        if target.cli {
            let importing = crate::plan::Importing {
                id: target.id,
                meta,
                generated: false,
                generated_config: None,
            };
            return Ok(Some(Imported {
                value,
                importing,
                generated: None,
                cli: true,
            }));
        }
        let generated_config = target.generated.then(|| {
            let res = &ctx.module(&inst.static_module).resources[&inst.key];
            super::imports::generated_hcl(
                &inst.addr,
                &target.id,
                res.provider.as_deref(),
                &inst.schema,
                &value,
            )
        });
        let generated = target
            .generated
            .then(|| super::imports::generated_config(&inst.schema, &value));
        let importing = crate::plan::Importing {
            id: target.id,
            meta,
            generated: target.generated,
            generated_config,
        };
        Ok(Some(Imported {
            value,
            importing,
            generated,
            cli: false,
        }))
    }

    /// `cairn import`: the object as read, nothing planned.
    fn record_cli_import(&self, inst: &Instance, imported: Imported) -> Value {
        let value = imported.value;
        self.record(Change {
            addr: inst.addr.clone(),
            provider: crate::plan::shared_provider(&inst.provider),
            action: Action::NoOp,
            before: Some(value.clone()),
            after: Some(value.clone()),
            replace_paths: Vec::new(),
            reason: None,
            sensitive_attrs: Vec::new(),
            diff_unavailable: false,
            importing: Some(Box::new(imported.importing)),
            deposed: None,
        });
        value
    }

    /// A replacement forced on an object in state whatever its diff, and why: tainted,
    /// `-replace`, or its provider instance replaced or changed.
    fn forced_replacement(
        &self,
        ctx: &Ctx,
        inst: &Instance,
        prior: Option<&ResourceObject>,
        slot: &ProviderSlot,
    ) -> Option<Reason> {
        let p = prior?;
        if p.tainted {
            Some(Reason::ReplaceBecauseTainted)
        } else if self.replace.contains(&inst.addr) {
            Some(Reason::ReplaceByRequest)
        } else if self.out().replaced_providers.contains(&inst.provider) {
            Some(Reason::ReplaceBecauseProviderChanged {
                provider: inst.provider.clone(),
                from: None,
            })
        } else if p.provider.addr != inst.provider
            && !same_provider_config(ctx, &p.provider.addr, slot)
        {
            Some(Reason::ReplaceBecauseProviderChanged {
                provider: inst.provider.clone(),
                from: Some(p.provider.addr.clone()),
            })
        } else {
            None
        }
    }

    /// The change of an instance whose provider's configuration is not known until apply:
    /// planned without the provider (an update's diff is unavailable).
    fn plan_unknown_provider(
        &self,
        inst: &Instance,
        config: &Value,
        in_state: bool,
        replace_reason: Option<Reason>,
        create_before_destroy: bool,
        change: &mut Change,
    ) {
        let after = plan_without_provider(&inst.schema, config);
        change.reason = Some(Box::new(Reason::ProviderConfigUnknown {
            provider: inst.provider.clone(),
        }));
        if in_state && replace_reason.is_none() {
            change.action = Action::Update;
            change.diff_unavailable = true;
            self.out().warnings.push(format!(
                "{}: the diff is unavailable until apply, because the configuration of {} depends on values not known until apply",
                inst.addr, inst.provider
            ));
        } else if in_state {
            change.action = replace_action(create_before_destroy);
            change.reason = replace_reason.map(Box::new);
        } else {
            change.action = Action::Create;
        }
        change.after = Some(after);
    }

    /// The change the configured provider plans for an instance: a create, or against the
    /// prior object (`change.before`) an update, a replacement (forced: `change.reason` holds
    /// why when this is called; or the provider's `requires_replace`, or
    /// `replace_triggered_by`), or no change.
    async fn plan_configured(
        &self,
        ctx: &Arc<Ctx>,
        c: &Arc<dyn Configured>,
        inst: &Instance,
        config: &Value,
        prior_meta: &ObjectMeta,
        change: &mut Change,
    ) -> Result<(), Diagnostics> {
        let res = &ctx.module(&inst.static_module).resources[&inst.key];
        let mut planned = c
            .plan_async(&inst.key.type_, change.before.as_ref(), prior_meta, config)
            .await
            .map_err(|e| provider_failure(ctx, &inst.addr, "plan", &e))?;
        planned.planned = carry_marks(config, planned.planned);
        report_warnings(ctx, &inst.addr, &planned.warnings);
        if let Some(path) = kept_config_violation(config, &planned.planned, &inst.schema) {
            return Err(Diagnostic::error(
                "Provider produced invalid plan",
                format!("Provider {} planned a value for {}.{path} that differs from its configuration. This is a bug in the provider: a plan must keep every configured value.", inst.provider.package, inst.addr),
            )
            .with_address(&inst.addr)
            .into());
        }
        let forced = change.reason.take();
        let Some(pv) = change.before.clone() else {
            change.action = Action::Create;
            change.after = Some(planned.planned);
            return Ok(());
        };
        let triggered = self.replace_triggered(ctx, inst)?;
        let reason = forced.or(if !planned.requires_replace.is_empty() {
            Some(Box::new(Reason::ReplaceBecauseCannotUpdate))
        } else if triggered {
            Some(Box::new(Reason::ReplaceByTriggers))
        } else {
            None
        });
        match reason {
            Some(reason) => {
                let mut fresh = c
                    .plan_async(&inst.key.type_, None, &Default::default(), config)
                    .await
                    .map_err(|e| provider_failure(ctx, &inst.addr, "plan", &e))?;
                fresh.planned = carry_marks(config, fresh.planned);
                change.action = replace_action(res.lifecycle.create_before_destroy);
                change.replace_paths = planned.requires_replace.clone();
                change.reason = Some(reason);
                change.after = Some(fresh.planned);
            }
            None => {
                change.action = if equal_ignoring_marks(&pv, &planned.planned) {
                    Action::NoOp
                } else {
                    Action::Update
                };
                if change.action == Action::Update && ctx.limits.broken(Sabotage::PlanApplies) {
                    update_now(c, &inst.key.type_, &pv, &planned.planned).await;
                }
                change.after = Some(planned.planned);
            }
        }
        Ok(())
    }

    /// `replace_triggered_by`: any referenced resource instance with a planned change (or a
    /// referenced value that is not known until apply) replaces this one.
    fn replace_triggered(&self, ctx: &Arc<Ctx>, inst: &Instance) -> Result<bool, Diagnostics> {
        let res = &ctx.module(&inst.static_module).resources[&inst.key];
        for expr in &res.lifecycle.replace_triggered_by {
            for r in references(expr) {
                if let Subject::Resource {
                    mode: Mode::Managed,
                    type_,
                    name,
                } = &r.subject
                {
                    let resource = ResourceAddr::new(
                        inst.addr.resource.module.clone(),
                        Mode::Managed,
                        type_,
                        name,
                    );
                    let out = self.out();
                    let changed = out
                        .pending
                        .of(&out.changes, &resource)
                        .any(|c| c.action != Action::Read);
                    if changed {
                        return Ok(true);
                    }
                }
            }
        }
        Ok(false)
    }

    async fn plan_data(&self, ctx: &Arc<Ctx>, inst: Instance) -> Result<Value, Diagnostics> {
        let slot = ctx
            .provider_slot(&inst.provider)
            .ok_or_else(|| missing_provider(&inst.provider, &inst.addr))?;
        let before = self
            .prior
            .data
            .get(&inst.addr)
            .map(|d| Value::from_stored(&d.attrs));
        if self.mode != PlanMode::ReadOnly {
            validate_instance(ctx, &slot.package, Mode::Data, &inst, &inst.config).await?;
        }
        let unknown_config = inst.config.unknown_paths().into_iter().next();
        let read_only =
            self.mode == PlanMode::ReadOnly && !ctx.limits.broken(Sabotage::ReadOnlyDefers);
        let reason = if read_only {
            // A configuration never applied has nothing to re-read: its data sources are read
            // by the first plan that creates something.
            if self.never_applied
                || unknown_config.is_some()
                || !matches!(slot.state, ProviderState::Configured(_))
            {
                if before.is_some() {
                    self.out().warnings.push(format!(
                        "{}: its configuration cannot be known without applying changes, so it keeps its previous result",
                        inst.addr
                    ));
                }
                return Ok(
                    before.unwrap_or_else(|| plan_without_provider(&inst.schema, &inst.config))
                );
            }
            None
        } else if let Some(path) = unknown_config {
            let chain = self.unknown_origin(ctx, &inst, &path);
            Some(Reason::ReadBecauseConfigUnknown { value: path, chain })
        } else if let ProviderState::Unknown { paths } = &slot.state {
            Some(Reason::ReadBecauseConfigUnknown {
                value: format!(
                    "provider configuration is not known until apply ({})",
                    inst.provider
                ),
                chain: paths.clone(),
            })
        } else {
            let start = ctx
                .graph
                .id(&Node::Resource {
                    module: inst.static_module.clone(),
                    key: inst.key.clone(),
                })
                .expect("resource node");
            let values = ctx.values.read().expect("values lock");
            let out = self.out();
            find_pending(
                &ctx.graph,
                &values,
                out.planned(),
                start,
                &inst.addr.resource.module,
                None,
            )
            .filter(|p| p.via.is_empty() || !ctx.limits.broken(Sabotage::DeferDirectOnly))
            .map(|p| Reason::ReadBecauseDependencyPending {
                dependency: p.dependency,
                action: p.action,
                via: p.via,
            })
        };
        if let Some(reason) = reason {
            return Ok(self.defer_read(&inst, reason));
        }
        let ProviderState::Configured(c) = &slot.state else {
            return Err(missing_provider(&inst.provider, &inst.addr));
        };
        ctx.observer.event(Progress::ReadStart {
            addr: inst.addr.clone(),
        });
        let started = Instant::now();
        let result = {
            let _permit = ctx.limits.calls.acquire().await.expect("semaphore open");
            c.read_data(&inst.key.type_, &inst.config).await
        };
        let result = match result {
            Ok(r) => r,
            Err(e) => {
                let d = provider_failure(ctx, &inst.addr, "read", &e);
                if !check_scoped_failure(ctx, &inst, d.clone()) {
                    return Err(d);
                }
                // Read again during apply, as Terraform does, to verify the check.
                return Ok(self.defer_read(&inst, Reason::ReadBecauseCheckNested));
            }
        };
        ctx.observer.event(Progress::ReadDone {
            addr: inst.addr.clone(),
            elapsed: started.elapsed(),
        });
        self.out().data_reads.insert(
            inst.addr.clone(),
            DataRead {
                addr: inst.addr.clone(),
                provider: inst.provider.clone(),
                config: inst.config.clone(),
                result: result.clone(),
                before,
            },
        );
        Ok(result)
    }

    /// Plans a data source's read for apply, for `reason`: its value is what the provider's
    /// schema says without reading (computed attributes unknown).
    fn defer_read(&self, inst: &Instance, reason: Reason) -> Value {
        let after = plan_without_provider(&inst.schema, &inst.config);
        self.record(Change {
            addr: inst.addr.clone(),
            provider: crate::plan::shared_provider(&inst.provider),
            action: Action::Read,
            before: None,
            after: Some(after.clone()),
            replace_paths: Vec::new(),
            reason: Some(Box::new(reason)),
            sensitive_attrs: inst
                .schema
                .attributes
                .iter()
                .filter(|(_, a)| a.sensitive)
                .map(|(k, _)| k.clone())
                .collect(),
            diff_unavailable: false,
            importing: None,
            deposed: None,
        });
        after
    }

    /// Where an unknown value in a data source's configuration comes from: the chain of terms
    /// from the attribute's expression to the resource whose value is not known yet.
    fn unknown_origin(&self, ctx: &Arc<Ctx>, inst: &Instance, path: &str) -> Vec<String> {
        let res = &ctx.module(&inst.static_module).resources[&inst.key];
        let attr = path.split(['.', '[']).next().unwrap_or(path);
        let Some(expr) = res.body.get_attribute(attr).map(|a| a.value.clone()) else {
            return Vec::new();
        };
        let from = ctx
            .graph
            .id(&Node::Resource {
                module: inst.static_module.clone(),
                key: inst.key.clone(),
            })
            .expect("resource node");
        let mut first = Vec::new();
        for r in references(&expr) {
            for target in ctx.graph.dag.dependencies(from) {
                if subject_matches(ctx.graph.node(target), &r.subject) {
                    first.push(target);
                }
            }
        }
        let values = ctx.values.read().expect("values lock");
        let out = self.out();
        match find_pending(
            &ctx.graph,
            &values,
            out.planned(),
            from,
            &inst.addr.resource.module,
            Some(first),
        ) {
            Some(p) => {
                let mut chain = p.via;
                chain.push(p.dependency.to_string());
                chain
            }
            None => Vec::new(),
        }
    }
}

fn subject_matches(node: &Node, subject: &Subject) -> bool {
    match (node, subject) {
        (Node::Var { name, .. }, Subject::Var(n))
        | (Node::Local { name, .. }, Subject::Local(n)) => name == n,
        (Node::Resource { key, .. }, Subject::Resource { mode, type_, name }) => {
            key.mode == *mode && &key.type_ == type_ && &key.name == name
        }
        (Node::Call { name, .. }, Subject::ModuleCall { name: n, .. }) => name == n,
        (Node::Output { module, name }, Subject::ModuleCall { name: call, output }) => {
            module.0.last().is_some_and(|s| &s.name == call)
                && output.as_ref().is_none_or(|o| o == name)
        }
        _ => false,
    }
}

#[async_trait::async_trait]
impl Phase for PlanPhase {
    async fn provider(
        &self,
        ctx: &Arc<Ctx>,
        addr: &ProviderAddr,
        config: Value,
        is_default: bool,
    ) -> Result<(), Diagnostics> {
        let package = ctx
            .registry
            .package(&addr.package)
            .expect("checked by the walk")
            .clone();
        let in_state = ctx.state_providers.get(addr);
        let old = in_state.map(|p| Value::from_stored(&p.config));
        let unknown = config.unknown_paths();
        // What the plan and state may keep: no ephemeral argument.
        let recorded = ctx.recordable_provider_config(addr, &config);
        let mut slot = ProviderSlot {
            addr: addr.clone(),
            package: addr.package.clone(),
            config: config.clone(),
            state: ProviderState::Unavailable,
            id: None,
        };
        let action = if !unknown.is_empty() {
            let paths = unknown.iter().map(|p| format!("{addr}.{p}")).collect();
            slot.state = ProviderState::Unknown { paths };
            if in_state.is_some() {
                Action::Update
            } else {
                Action::Create
            }
        } else {
            let configured = ctx.configure_provider(addr, &config).await?;
            slot.state = ProviderState::Configured(configured);
            match &old {
                None => Action::Create,
                Some(old) => match package.diff_config(old, &recorded) {
                    ConfigDiff::NoChange => Action::NoOp,
                    ConfigDiff::Update => Action::Update,
                    ConfigDiff::Replace(_) => {
                        self.out().replaced_providers.insert(addr.clone());
                        Action::DeleteThenCreate
                    }
                },
            }
        };
        if action == Action::NoOp || action == Action::Update {
            slot.id = in_state.map(|p| p.id.clone());
        }
        ctx.set_provider_slot(slot);
        // Read-only plans propose no changes, but a provider instance not yet in state must
        // be registered when read-only results through it are recorded.
        if self.mode != PlanMode::ReadOnly || (in_state.is_none() && unknown.is_empty()) {
            self.out().provider_changes.insert(
                addr.clone(),
                ProviderChange {
                    addr: addr.clone(),
                    action,
                    before: old,
                    after: Some(recorded),
                    is_default,
                },
            );
        }
        Ok(())
    }

    async fn instance(&self, ctx: &Arc<Ctx>, inst: Instance) -> Result<Value, Diagnostics> {
        match inst.key.mode {
            Mode::Managed => self.plan_managed(ctx, inst).await,
            Mode::Data => self.plan_data(ctx, inst).await,
            Mode::Ephemeral => self.ephemerals.open(ctx, inst).await,
        }
    }

    async fn orphans(
        &self,
        ctx: &Arc<Ctx>,
        orphans: Vec<(ResourceInstanceAddr, OrphanReason)>,
    ) -> Result<(), Diagnostics> {
        let mut diags = Diagnostics::new();
        for (addr, why) in orphans {
            if addr.resource.mode == Mode::Data {
                self.out().dropped_data.insert(addr);
                continue;
            }
            if self.mode == PlanMode::ReadOnly {
                continue;
            }
            let Some(prior) = self.prior.current(&addr) else {
                continue;
            };
            if let Some(d) = removed_provider_instance(ctx, &prior.provider.addr, &addr) {
                diags.push(d);
                continue;
            }
            let reason = match why {
                OrphanReason::NoResourceConfig => Reason::DeleteBecauseNoResourceConfig,
                OrphanReason::CountIndex => Reason::DeleteBecauseCountIndex,
                OrphanReason::EachKey => Reason::DeleteBecauseEachKey,
                OrphanReason::NoModule => Reason::DeleteBecauseNoModule,
            };
            self.record(Change {
                addr: addr.clone(),
                provider: crate::plan::shared_provider(&prior.provider.addr),
                action: Action::Delete,
                before: Some(Value::from_stored(&prior.attrs)),
                after: None,
                replace_paths: Vec::new(),
                reason: Some(Box::new(reason)),
                sensitive_attrs: Vec::new(),
                diff_unavailable: false,
                importing: None,
                deposed: None,
            });
        }
        if diags.has_errors() {
            Err(diags)
        } else {
            Ok(())
        }
    }

    fn output(&self, _ctx: &Arc<Ctx>, name: &str, value: &Value, sensitive: bool) {
        self.out()
            .outputs
            .insert(name.to_string(), (value.clone(), sensitive));
    }
}

/// OpenTofu's error for an object whose provider instance is an element its block's
/// `for_each` no longer has: the instance is needed to delete the object, so the element must
/// stay until the object is gone.
fn removed_provider_instance(
    ctx: &Ctx,
    provider: &ProviderAddr,
    addr: &ResourceInstanceAddr,
) -> Option<crate::diag::Diagnostic> {
    provider.key.as_ref()?;
    if ctx.provider_slot(provider).is_some() {
        return None;
    }
    let m = ctx.config.module(&provider.module)?;
    m.providers.iter().find(|p| {
        super::graph::package_of_local(m, &p.name) == provider.package
            && p.alias == provider.alias
            && p.for_each.is_some()
    })?;
    Some(
        crate::diag::Diagnostic::error(
            "Provider instance not present",
            format!(
                "To work with {addr} its original provider instance at {provider} is required, \
                 but it has been removed. This occurs when an element is removed from the \
                 provider configuration's for_each collection while objects created by that \
                 the associated provider instance still exist in the state. Re-add the \
                 for_each element to destroy {addr}, after which you can remove the provider \
                 configuration again.\n\nThis is commonly caused by using the same for_each \
                 collection both for a resource (or its containing module) and its associated \
                 provider configuration. To successfully remove an instance of a resource it \
                 must be possible to remove the corresponding element from the resource's \
                 for_each collection while retaining the corresponding element in the \
                 provider's for_each collection."
            ),
        )
        .with_address(addr),
    )
}

/// Only with `Sabotage::PlanApplies`: carries out a planned update during the plan.
async fn update_now(c: &Arc<dyn Configured>, type_: &str, prior: &Value, planned: &Value) {
    let request = ApplyRequest::Update {
        type_: type_.to_string(),
        prior: prior.clone(),
        planned: planned.clone(),
    };
    let _ = c.apply(request).await;
}

/// The order of replacements that provider instances constrain, decided once the plan's
/// provider changes are known:
/// - An object whose provider instance is replaced is deleted before the new instance is
///   registered (no object in state may name an unregistered instance), and its new object
///   can only be made through the new instance: its replacement is delete-then-create, even
///   with `create_before_destroy`.
/// - Replacements that a provider instance reconfigured at apply depends on are made
///   create-before-destroy. Such an instance is a possible delete of all its objects, but
///   whether it happens is known only once the values its configuration reads are applied —
///   after the create of a replaced object it depends on. So the old object must outlive that
///   create: delete-then-create would delete it before the objects that may be deleted (in
///   its world) because of it. With create-before-destroy the new object comes first, then
///   the provider instance (and the deletes its replacement makes), and the old object is
///   deleted last, after everything that depended on it. Only provider instances with
///   objects in state count (a replacement deletes nothing otherwise). An old object that
///   itself lives under such an instance is deposed; if the instance turns out replaced, its
///   replacement deletes it with the instance's other objects, dependents first, before the
///   new instance is registered (`apply::steps::delete_under`), so no object outlives its
///   instance.
pub(crate) fn replacement_order(
    plan: &mut crate::plan::Plan,
    graph: &super::graph::TermGraph,
    prior: &Snapshot,
) {
    let replaced: BTreeSet<&ProviderAddr> = plan
        .provider_changes
        .iter()
        .filter(|pc| pc.action.is_replace())
        .map(|pc| &pc.addr)
        .collect();
    for change in &mut plan.changes {
        if change.action == Action::CreateThenDelete
            && prior
                .current(&change.addr)
                .is_some_and(|o| replaced.contains(&o.provider.addr))
        {
            change.action = Action::DeleteThenCreate;
        }
    }
    let with_objects: BTreeSet<&ProviderAddr> = prior
        .resources
        .values()
        .filter_map(|i| i.current.as_ref())
        .map(|o| &o.provider.addr)
        .collect();
    let mut upstream = BTreeSet::new();
    for pc in &plan.provider_changes {
        if reconfigured_at_apply(pc) && with_objects.contains(&pc.addr) {
            if let Some(p) = graph.provider_node(&pc.addr) {
                upstream.extend(graph.dag.transitive_dependencies(p));
            }
        }
    }
    if upstream.is_empty() {
        return;
    }
    for change in &mut plan.changes {
        if change.action != Action::DeleteThenCreate {
            continue;
        }
        let node = Node::of_instance(&change.addr);
        if graph.id(&node).is_some_and(|id| upstream.contains(&id)) {
            change.action = Action::CreateThenDelete;
        }
    }
}

pub(crate) fn replace_action(create_before_destroy: bool) -> Action {
    if create_before_destroy {
        Action::CreateThenDelete
    } else {
        Action::DeleteThenCreate
    }
}

/// True when a resource moving from provider instance `old` to `slot` keeps an equal
/// configuration (`diff_config` reports no change): it moves without replacement.
fn same_provider_config(ctx: &Ctx, old: &ProviderAddr, slot: &ProviderSlot) -> bool {
    let Some(old_inst) = ctx.state_providers.get(old) else {
        return false;
    };
    if old.package != slot.addr.package || !slot.config.is_wholly_known() {
        return false;
    }
    let Some(p) = ctx.registry.package(&slot.package) else {
        return false;
    };
    p.diff_config(&Value::from_stored(&old_inst.config), &slot.config) == ConfigDiff::NoChange
}

/// A plan must keep every known, non-null configured value (but a write-only one, which is
/// never planned).
fn kept_config_violation(
    config: &Value,
    planned: &Value,
    schema: &crate::schema::Block,
) -> Option<String> {
    let cfg = config.attributes()?;
    let write_only = |k: &str| schema.attributes.get(k).is_some_and(|a| a.write_only);
    let known: ValueMap = cfg
        .iter()
        .filter(|(k, v)| !v.is_null() && !write_only(k))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    contradiction(&Value::Object(known), planned)
}

/// The provider's own checks of an instance's configuration (`ValidateResourceConfig` for
/// plugins), with each diagnostic at the attribute it names: errors stop the instance,
/// warnings are reported.
async fn validate_instance(
    ctx: &Arc<Ctx>,
    package: &str,
    mode: Mode,
    inst: &Instance,
    config: &Value,
) -> Result<(), Diagnostics> {
    let Some(p) = ctx.registry.package(package).cloned() else {
        return Ok(());
    };
    let found = {
        let _permit = ctx.limits.calls.acquire().await.expect("semaphore open");
        p.validate_config_async(mode, &inst.key.type_, config).await
    };
    if found.is_empty() {
        return Ok(());
    }
    let diags: Diagnostics = found
        .iter()
        .map(|d| provider_diag(ctx, &inst.addr, d))
        .collect();
    if diags.has_errors() {
        return Err(diags);
    }
    ctx.report(diags);
    Ok(())
}

pub(crate) fn prevent_destroy_error(
    addr: &ResourceInstanceAddr,
    span: crate::diag::Span,
) -> Diagnostics {
    Diagnostic::error(
        "Instance cannot be destroyed",
        format!("Resource {addr} has lifecycle.prevent_destroy set, but the plan calls for this resource to be destroyed. To avoid this error and continue with the plan, either disable lifecycle.prevent_destroy or reduce the scope of the plan using the -target flag."),
    )
    .with_span(Some(span))
    .with_address(addr)
    .into()
}
