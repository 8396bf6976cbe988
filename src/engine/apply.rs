//! The apply phase: the same walk as the plan, with final values.
//!
//! Each planned instance is planned again by its provider with its configuration evaluated from
//! the *applied* values upstream; the result must agree with every value the saved plan knew,
//! else the run stops with "inconsistent final plan". Deferred data reads happen once their
//! dependencies are applied; reads done at plan time are not repeated (their results are
//! recorded). Deletes are separate `Destroy` nodes in reverse dependency order.
//!
//! Durability: before every create, update or delete an `OperationStarted` event (with a create
//! token for creates) is appended and flushed; after it, the outcome. A failed step records what
//! the provider reports (a partial create is kept, tainted), fails its node so its dependents
//! are skipped, and lets everything independent finish.

use super::core::{contradiction, Ctx, Instance, OrphanReason, Phase, ProviderSlot, ProviderState};
use super::graph::{EdgeKind, Node, TermGraph};
use super::journal::Journal;
use super::observer::Progress;
use super::plan_phase::{
    apply_ignore_changes, equal_ignoring_marks, may_be_replaced_at_apply, missing_provider,
};
use super::providers::new_instance_id;
use super::sabotage::Sabotage;
use super::values::Repetition;
use super::values::Values;
use crate::config::IgnoreChanges;
use crate::diag::{Diagnostic, Diagnostics};
use crate::plan::{Action, Change, DataRead, Plan};
use crate::provider::{ApplyRequest, ConfigDiff};
use crate::value::{carry_marks, Value};
use cairn_graph::NodeId;
use cairn_state::{
    DataObject, EventBody, Mode, ModulePath, OpAction, OutputValue, ProviderAddr, ProviderInstance,
    ProviderRef, ResourceAddr, ResourceInstanceAddr, ResourceObject, RunSummary, Snapshot,
};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How to delete one object: its provider instance as recorded in state.
#[derive(Clone, Debug)]
pub(crate) struct DestroyInfo {
    pub provider: ProviderRef,
    pub config: Value,
}

pub(crate) struct ApplyPhase {
    pub changes: BTreeMap<ResourceInstanceAddr, Change>,
    pub data_reads: BTreeMap<ResourceInstanceAddr, DataRead>,
    pub journal: Arc<Journal>,
    pub destroy: BTreeMap<(ResourceInstanceAddr, Option<String>), DestroyInfo>,
    /// Deposed keys chosen for create-before-destroy replacements.
    pub deposed_keys: BTreeMap<ResourceInstanceAddr, String>,
    pub run: u64,
    pub outputs: Mutex<BTreeMap<String, (Value, bool)>>,
    pub summary: Mutex<RunSummary>,
}

impl ApplyPhase {
    fn count(&self, action: OpAction) {
        let mut s = self.summary.lock().expect("summary lock");
        match action {
            OpAction::Create => s.added += 1,
            OpAction::Update => s.changed += 1,
            OpAction::Delete => s.destroyed += 1,
        }
    }

    fn error(&self) {
        self.summary.lock().expect("summary lock").errors += 1;
    }

    /// Records an operation that failed outside the provider's call (a provisioner), keeping
    /// `object` as what exists now.
    #[allow(clippy::too_many_arguments)]
    async fn record_failure(
        &self,
        ctx: &Arc<Ctx>,
        op: u64,
        object: Option<ResourceObject>,
        addr: &ResourceInstanceAddr,
        action: Action,
        deposed: Option<String>,
        started: Instant,
        diags: &Diagnostics,
    ) -> Result<(), Diagnostics> {
        let error = diags
            .iter()
            .map(|d| d.detail.clone())
            .collect::<Vec<_>>()
            .join("; ");
        self.journal
            .record(EventBody::OperationFailed {
                op,
                object,
                error: error.clone(),
            })
            .await
            .map_err(Diagnostics::from)?;
        self.error();
        ctx.observer.event(Progress::ApplyErrored {
            addr: addr.clone(),
            action,
            elapsed: started.elapsed(),
            message: error,
            deposed,
        });
        Ok(())
    }

    /// Runs one provider apply with its operation records around it.
    #[allow(clippy::too_many_arguments)]
    async fn operate(
        &self,
        ctx: &Arc<Ctx>,
        c: &Arc<dyn crate::provider::Configured>,
        addr: &ResourceInstanceAddr,
        deposed: Option<String>,
        request: ApplyRequest,
        provider: ProviderRef,
        prior: Option<ResourceObject>,
        deps: Vec<ResourceInstanceAddr>,
        planned: Option<(&Value, &[u8])>,
        provision: Option<&Repetition>,
    ) -> Result<Option<Value>, Diagnostics> {
        let (planned, planned_private) = match planned {
            Some((v, p)) => (Some(v), p),
            None => (None, &[][..]),
        };
        let prior_meta = prior.as_ref().map(|p| p.meta.clone()).unwrap_or_default();
        let (op_action, plan_action, token) = match &request {
            ApplyRequest::Create { token, .. } => {
                (OpAction::Create, Action::Create, Some(token.clone()))
            }
            ApplyRequest::Update { .. } => (OpAction::Update, Action::Update, None),
            ApplyRequest::Delete { .. } => (OpAction::Delete, Action::Delete, None),
        };
        let op = self
            .journal
            .record(EventBody::OperationStarted {
                addr: addr.clone(),
                deposed: deposed.clone(),
                action: op_action,
                token: token.clone(),
                provider: provider.clone(),
                prior: prior.clone(),
            })
            .await
            .map_err(Diagnostics::from)?;
        ctx.observer.event(Progress::ApplyStart {
            addr: addr.clone(),
            action: plan_action,
            id: prior
                .as_ref()
                .and_then(|p| p.attrs.get("id"))
                .and_then(|i| match i {
                    cairn_state::StoredValue::String(s) => Some(s.clone()),
                    _ => None,
                }),
            deposed: deposed.clone(),
        });
        let started = Instant::now();
        // Destroy-time provisioners run before the delete; a failure keeps the object.
        if let (OpAction::Delete, Some(rep), Some(p)) = (op_action, provision, &prior) {
            let this = Value::from_stored(&p.attrs);
            if let Err(d) = super::provision::run(ctx, addr, rep, &this, true).await {
                self.record_failure(
                    ctx,
                    op,
                    Some(p.clone()),
                    addr,
                    plan_action,
                    deposed.clone(),
                    started,
                    &d,
                )
                .await?;
                return Err(d);
            }
        }
        let response = {
            let _permit = ctx.limits.calls.acquire().await.expect("semaphore open");
            // The state storage failed while this call waited its turn: it does not start
            // (its start is in the log, so the next run resolves it as pending).
            if let Some(e) = self.journal.failure() {
                return Err(Diagnostics::from(Diagnostic::error(
                    "State storage failed",
                    e,
                )));
            }
            let call = c.apply_object(request, &prior_meta, planned_private);
            tokio::pin!(call);
            // "Still creating..." every 10 seconds while the call runs.
            loop {
                tokio::select! {
                    r = &mut call => break r,
                    _ = tokio::time::sleep(Duration::from_secs(10)) => {
                        ctx.observer.event(Progress::ApplyProgress { addr: addr.clone(), action: plan_action, elapsed: started.elapsed() });
                    }
                }
            }
        };
        let elapsed = started.elapsed();
        let crate::provider::Applied {
            mut response,
            meta,
            warnings,
        } = response;
        for w in &warnings {
            ctx.report(Diagnostics::from(super::provider_diags::provider_diag(
                ctx, addr, w,
            )));
        }
        // (Only when there is a plan: a delete's failure returns the object it kept.)
        if let Some(p) = planned {
            response.new_state = response.new_state.take().map(|v| carry_marks(p, v));
        }
        let object = |v: &Value, tainted: bool| -> Result<ResourceObject, Diagnostics> {
            let attrs = v.to_stored().map_err(|e| {
                Diagnostics::from(
                    Diagnostic::error(
                        "Provider returned an unknown value after apply",
                        format!("Provider {} returned {e} for {addr}. This is a bug in the provider: apply returns a wholly known state.", provider.addr.package),
                    )
                    .with_address(addr),
                )
            })?;
            Ok(ResourceObject {
                attrs,
                deps: deps.clone(),
                provider: provider.clone(),
                create_token: token
                    .clone()
                    .or(prior.as_ref().and_then(|p| p.create_token.clone())),
                tainted,
                meta: meta.clone(),
            })
        };
        // Creation-time provisioners run once the object exists; a failure keeps it tainted.
        if let (None, OpAction::Create, Some(rep), Some(v)) =
            (&response.error, op_action, provision, &response.new_state)
        {
            if let Err(d) = super::provision::run(ctx, addr, rep, v, false).await {
                let obj = object(v, true).ok();
                self.record_failure(
                    ctx,
                    op,
                    obj,
                    addr,
                    plan_action,
                    deposed.clone(),
                    started,
                    &d,
                )
                .await?;
                return Err(d);
            }
        }
        match response.error {
            None => {
                let obj = match &response.new_state {
                    Some(v) => Some(object(v, false)?),
                    None => None,
                };
                let forget =
                    op_action == OpAction::Create && ctx.limits.broken(Sabotage::ForgetCreates);
                let obj = if forget { None } else { obj };
                if ctx.limits.broken(Sabotage::SettleTwice) {
                    let again = EventBody::OperationSucceeded {
                        op,
                        object: obj.clone(),
                    };
                    self.journal
                        .record(again)
                        .await
                        .map_err(Diagnostics::from)?;
                }
                self.journal
                    .record(EventBody::OperationSucceeded { op, object: obj })
                    .await
                    .map_err(Diagnostics::from)?;
                self.count(op_action);
                let id = response
                    .new_state
                    .as_ref()
                    .and_then(|v| v.get("id"))
                    .and_then(|i| i.as_str())
                    .map(str::to_string);
                ctx.observer.event(Progress::ApplyDone {
                    addr: addr.clone(),
                    action: plan_action,
                    id,
                    elapsed,
                    deposed: deposed.clone(),
                });
                if let (Some(planned), Some(actual)) = (planned, &response.new_state) {
                    if let Some(path) = contradiction(planned, actual) {
                        self.error();
                        return Err(Diagnostic::error(
                            "Provider produced inconsistent result after apply",
                            format!("When applying changes to {addr}, provider {} produced an unexpected new value: .{path} differs from the planned value. This is a bug in the provider; the object was recorded in state as it is.", provider.addr.package),
                        )
                        .with_address(addr)
                        .into());
                    }
                }
                Ok(response.new_state)
            }
            Some(err) => {
                let obj = match (&response.new_state, &prior) {
                    // A delete that failed keeps the object as it was: its dependencies and
                    // taint, with the attributes the provider reports.
                    (Some(v), Some(p)) if op_action == OpAction::Delete => {
                        object(v, p.tainted).ok().map(|o| ResourceObject {
                            deps: p.deps.clone(),
                            ..o
                        })
                    }
                    (Some(v), _) => object(v, op_action == OpAction::Create).ok(),
                    (None, _) => None,
                };
                self.journal
                    .record(EventBody::OperationFailed {
                        op,
                        object: obj,
                        error: err.message.clone(),
                    })
                    .await
                    .map_err(Diagnostics::from)?;
                self.error();
                ctx.observer.event(Progress::ApplyErrored {
                    addr: addr.clone(),
                    action: plan_action,
                    elapsed,
                    message: err.message.clone(),
                    deposed: deposed.clone(),
                });
                let what = match op_action {
                    OpAction::Create => "create",
                    OpAction::Update => "update",
                    OpAction::Delete => "delete",
                };
                Err(super::provider_diags::provider_failure(
                    ctx, addr, what, &err,
                ))
            }
        }
    }

    async fn apply_managed(&self, ctx: &Arc<Ctx>, inst: Instance) -> Result<Value, Diagnostics> {
        let current = self
            .journal
            .with_snapshot(|s| s.current(&inst.addr).cloned());
        let Some(change) = self.changes.get(&inst.addr) else {
            // Not part of this plan (outside -target): what state holds.
            return Ok(current
                .map(|o| Value::from_stored(&o.attrs))
                .unwrap_or_else(Value::unknown));
        };
        let mut current = current;
        if let (Some(importing), None) = (&change.importing, &current) {
            current = Some(self.adopt(ctx, &inst, change, importing).await?);
        }
        let no_op = change.action == Action::NoOp;
        if no_op && !ctx.limits.broken(Sabotage::ApplyUpdatesNoOps) {
            // Moved to another provider instance with an equal configuration: record the move.
            let moved = current
                .as_ref()
                .is_some_and(|o| o.provider.addr != inst.provider);
            if let (true, Some(id)) = (moved, ctx.provider_slot(&inst.provider).and_then(|s| s.id))
            {
                let provider = ProviderRef {
                    addr: inst.provider.clone(),
                    id,
                };
                self.journal
                    .append(EventBody::ResourceRehomed {
                        addr: inst.addr.clone(),
                        provider,
                    })
                    .map_err(Diagnostics::from)?;
            }
            // Its dependencies may have changed (a new `depends_on`, a dependency that gained
            // instances): state records them, as Terraform does at every apply, so a later
            // destroy deletes this object before what it depends on now.
            if let Some(obj) = &current {
                let deps = resource_deps(ctx, &inst);
                if !same_deps(&deps, &obj.deps) {
                    self.journal
                        .append(EventBody::DependenciesUpdated {
                            addr: inst.addr.clone(),
                            deps,
                        })
                        .map_err(Diagnostics::from)?;
                }
            }
            return Ok(current
                .map(|o| Value::from_stored(&o.attrs))
                .or(change.after.clone())
                .unwrap_or_else(Value::unknown));
        }
        let slot = ctx
            .provider_slot(&inst.provider)
            .ok_or_else(|| missing_provider(&inst.provider, &inst.addr))?;
        let ProviderState::Configured(c) = &slot.state else {
            return Err(missing_provider(&inst.provider, &inst.addr));
        };
        let provider_ref = ProviderRef {
            addr: inst.provider.clone(),
            id: slot.id.clone().unwrap_or_default(),
        };
        let res = &ctx.module(&inst.static_module).resources[&inst.key];
        let prior_value = current.as_ref().map(|o| Value::from_stored(&o.attrs));
        let config = match (&prior_value, &res.lifecycle.ignore_changes) {
            (Some(pv), ignore) if *ignore != IgnoreChanges::None => {
                apply_ignore_changes(&inst.config, pv, ignore, &inst.schema)
            }
            _ => inst.config.clone(),
        };
        let deps = resource_deps(ctx, &inst);
        let type_ = inst.key.type_.clone();
        let plan_err = |e: crate::provider::ProviderError| {
            super::provider_diags::provider_failure(ctx, &inst.addr, "plan", &e)
        };

        let mut action = change.action;
        if no_op {
            // Only with `Sabotage::ApplyUpdatesNoOps`: an unchanged instance is updated anyway.
            action = Action::Update;
        }
        if action == Action::Update && change.diff_unavailable && current.is_none() {
            // Its provider instance was replaced at apply, which deleted the old object: create.
            action = Action::Create;
        }
        // A diff unavailable at plan (the provider's configuration was unknown) may turn out to
        // be a provider replacement: the object lives in the old world, so it is replaced —
        // deleted through the configuration it was created with, created through the new one.
        let old_world = match (&current, change.diff_unavailable) {
            (Some(obj), true) => old_world(ctx, obj, &slot),
            _ => None,
        };
        if old_world.is_some() {
            action = Action::DeleteThenCreate;
        }
        if action == Action::Update {
            let mut planned = c
                .plan_async(
                    &type_,
                    prior_value.as_ref(),
                    &current.as_ref().map(|o| o.meta.clone()).unwrap_or_default(),
                    &config,
                )
                .await
                .map_err(plan_err)?;
            planned.planned = carry_marks(&config, planned.planned);
            if change.diff_unavailable {
                // The diff could not be made at plan time; make it now.
                if !planned.requires_replace.is_empty() {
                    action = Action::DeleteThenCreate;
                } else if prior_value
                    .as_ref()
                    .is_some_and(|p| equal_ignoring_marks(p, &planned.planned))
                {
                    return Ok(prior_value.unwrap_or_else(Value::unknown));
                }
            } else {
                check_final(&inst.addr, change, &planned.planned)?;
                // Planned "known after apply" (e.g. from a data read deferred to apply), the
                // final values turned out to be the prior ones: nothing to do, as in
                // Terraform's final plan. No provider call, no event, not counted as changed.
                if !no_op
                    && prior_value
                        .as_ref()
                        .is_some_and(|p| equal_ignoring_marks(p, &planned.planned))
                {
                    return Ok(prior_value.unwrap_or_else(Value::unknown));
                }
            }
            if action == Action::Update {
                let prior_v = prior_value
                    .clone()
                    .ok_or_else(|| gone_before_update(&inst.addr))?;
                let request = ApplyRequest::Update {
                    type_: type_.clone(),
                    prior: prior_v,
                    planned: planned.planned.clone(),
                };
                let new = self
                    .operate(
                        ctx,
                        c,
                        &inst.addr,
                        None,
                        request,
                        provider_ref,
                        current.clone(),
                        deps,
                        Some((&planned.planned, &planned.private[..])),
                        None,
                    )
                    .await?;
                return Ok(new.unwrap_or_else(Value::unknown));
            }
        }
        // Create, or the create half of a replacement.
        let mut planned = c
            .plan_async(&type_, None, &Default::default(), &config)
            .await
            .map_err(plan_err)?;
        planned.planned = carry_marks(&config, planned.planned);
        if !change.diff_unavailable {
            check_final(&inst.addr, change, &planned.planned)?;
        }
        if action == Action::DeleteThenCreate && current.is_some() {
            // Replaced because its diff was unavailable at plan: delete first, here.
            let prior = current.clone().expect("checked");
            let deleter = match &old_world {
                Some(config) => ctx
                    .registry
                    .configure(&prior.provider.addr.package, config)
                    .await
                    .map_err(|e| {
                        Diagnostics::from(
                            Diagnostic::error(
                                "Failed to configure provider",
                                format!(
                                    "Configuring {} as recorded in state to delete {}: {e}",
                                    prior.provider.addr, inst.addr
                                ),
                            )
                            .with_address(&inst.addr),
                        )
                    })?,
                None => c.clone(),
            };
            let request = ApplyRequest::Delete {
                type_: type_.clone(),
                prior: Value::from_stored(&prior.attrs),
            };
            self.operate(
                ctx,
                &deleter,
                &inst.addr,
                None,
                request,
                prior.provider.clone(),
                Some(prior),
                Vec::new(),
                None,
                Some(&inst.rep),
            )
            .await?;
        }
        let mut deposed_key = None;
        if action == Action::CreateThenDelete && current.is_some() {
            let key = self
                .deposed_keys
                .get(&inst.addr)
                .cloned()
                .unwrap_or_else(|| "00000000".to_string());
            self.journal
                .record(EventBody::ObjectDeposed {
                    addr: inst.addr.clone(),
                    key: key.clone(),
                })
                .await
                .map_err(Diagnostics::from)?;
            deposed_key = Some(key);
        }
        let token = format!("{}-{}-{:08x}", self.run, inst.addr, rand::random::<u32>());
        let request = ApplyRequest::Create {
            type_,
            planned: planned.planned.clone(),
            token,
        };
        let created = self
            .operate(
                ctx,
                c,
                &inst.addr,
                None,
                request,
                provider_ref,
                None,
                deps,
                Some((&planned.planned, &planned.private[..])),
                Some(&inst.rep),
            )
            .await;
        if let (Err(_), Some(key)) = (&created, deposed_key) {
            // The replacement failed and left no object: the deposed object is current again,
            // as Terraform restores it (a partial object stays current, tainted, and the
            // deposed one is deleted by the next plan).
            let nothing = self.journal.with_snapshot(|s| {
                s.resources
                    .get(&inst.addr)
                    .is_some_and(|r| r.current.is_none() && r.deposed.contains_key(&key))
            });
            if nothing {
                self.journal
                    .record(EventBody::ObjectRestored {
                        addr: inst.addr.clone(),
                        key,
                    })
                    .await
                    .map_err(Diagnostics::from)?;
            }
        }
        Ok(created?.unwrap_or_else(Value::unknown))
    }

    /// An object the plan imported (`import` blocks): recorded into state as the plan found
    /// it (`StateImported`), with its meta, before anything else is done with it; the
    /// provider is not called again (as in Terraform, the import happened at plan).
    async fn adopt(
        &self,
        ctx: &Arc<Ctx>,
        inst: &Instance,
        change: &Change,
        importing: &crate::plan::Importing,
    ) -> Result<ResourceObject, Diagnostics> {
        let slot = ctx
            .provider_slot(&inst.provider)
            .ok_or_else(|| missing_provider(&inst.provider, &inst.addr))?;
        let Some(before) = &change.before else {
            return Err(missing_provider(&inst.provider, &inst.addr));
        };
        ctx.observer.event(Progress::Importing {
            addr: inst.addr.clone(),
            id: importing.id.clone(),
        });
        let object = ResourceObject {
            attrs: before.to_stored().map_err(|e| {
                Diagnostics::from(
                    Diagnostic::error("Invalid imported object", format!("{}: {e}", inst.addr))
                        .with_address(&inst.addr),
                )
            })?,
            deps: resource_deps(ctx, inst),
            provider: ProviderRef {
                addr: inst.provider.clone(),
                id: slot.id.clone().unwrap_or_default(),
            },
            create_token: None,
            tainted: false,
            meta: importing.meta.clone(),
        };
        // Appended, not awaited to durability: nothing changed in the world, so a crash
        // before the next commit only means the next plan imports it again.
        self.journal
            .append(EventBody::StateImported {
                source: format!("import {:?}", importing.id),
                providers: Vec::new(),
                resources: vec![(inst.addr.clone(), object.clone())],
            })
            .map_err(Diagnostics::from)?;
        self.summary.lock().expect("summary lock").imported += 1;
        ctx.observer.event(Progress::ImportComplete {
            addr: inst.addr.clone(),
            id: importing.id.clone(),
        });
        Ok(object)
    }

    /// Deletes every object still managed by provider instance `old` — current and deposed
    /// (the old object of a create-before-destroy replacement that the instance's new
    /// configuration reads) — with the configuration recorded for it, dependents before their
    /// dependencies.
    async fn delete_under(
        &self,
        ctx: &Arc<Ctx>,
        old: &ProviderInstance,
    ) -> Result<(), Diagnostics> {
        type Left = (ResourceInstanceAddr, Option<String>, ResourceObject);
        let mut left: Vec<Left> = self.journal.with_snapshot(|s| {
            s.resources
                .iter()
                .flat_map(|(a, i)| {
                    let current = i.current.iter().map(|o| (a.clone(), None, o.clone()));
                    let deposed = i
                        .deposed
                        .iter()
                        .map(|(k, o)| (a.clone(), Some(k.clone()), o.clone()));
                    current.chain(deposed).collect::<Vec<Left>>()
                })
                .filter(|(_, _, o)| o.provider.addr == old.addr && o.provider.id == old.id)
                .collect()
        });
        if left.is_empty() {
            return Ok(());
        }
        let c = ctx
            .registry
            .configure(&old.addr.package, &Value::from_stored(&old.config))
            .await
            .map_err(|e| {
                Diagnostics::from(
                    Diagnostic::error(
                        "Failed to configure provider",
                        format!(
                            "Configuring {} as recorded, to delete its objects: {e}",
                            old.addr
                        ),
                    )
                    .with_address(&old.addr),
                )
            })?;
        while !left.is_empty() {
            // Next: an object no remaining object depends on.
            let i = (0..left.len())
                .find(|&i| !left.iter().any(|(_, _, o)| o.deps.contains(&left[i].0)))
                .unwrap_or(0);
            let (addr, deposed, obj) = left.remove(i);
            let request = ApplyRequest::Delete {
                type_: addr.resource.type_.clone(),
                prior: Value::from_stored(&obj.attrs),
            };
            self.operate(
                ctx,
                &c,
                &addr,
                deposed,
                request,
                obj.provider.clone(),
                Some(obj),
                Vec::new(),
                None,
                Some(&rep_of(&addr)),
            )
            .await?;
        }
        Ok(())
    }

    async fn apply_data(&self, ctx: &Arc<Ctx>, inst: Instance) -> Result<Value, Diagnostics> {
        let slot = ctx
            .provider_slot(&inst.provider)
            .ok_or_else(|| missing_provider(&inst.provider, &inst.addr))?;
        let provider_ref = ProviderRef {
            addr: inst.provider.clone(),
            id: slot.id.clone().unwrap_or_default(),
        };
        let record = |result: &Value| -> Result<(), Diagnostics> {
            let attrs = result.to_stored().map_err(|e| {
                Diagnostics::from(
                    Diagnostic::error(
                        "Data source returned an unknown value",
                        format!("{}: {e}", inst.addr),
                    )
                    .with_address(&inst.addr),
                )
            })?;
            self.journal
                .append(EventBody::DataRead {
                    addr: inst.addr.clone(),
                    object: DataObject {
                        attrs,
                        provider: provider_ref.clone(),
                    },
                })
                .map_err(Diagnostics::from)?;
            self.summary.lock().expect("summary lock").read += 1;
            Ok(())
        };
        if let Some(read) = self.data_reads.get(&inst.addr) {
            // Read during the plan: not repeated.
            record(&read.result)?;
            return Ok(read.result.clone());
        }
        match self.changes.get(&inst.addr) {
            Some(change) if change.action == Action::Read => {
                if let Some(path) = inst.config.unknown_paths().first() {
                    return Err(Diagnostic::error(
                        "Data source configuration still unknown",
                        format!("{}: {path} is still not known during apply. A value it depends on failed or was not applied.", inst.addr),
                    )
                    .with_address(&inst.addr)
                    .into());
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
                }
                .map_err(|e| super::provider_diags::provider_failure(ctx, &inst.addr, "read", &e));
                let result = match result {
                    Ok(r) => r,
                    Err(d) if super::plan_phase::check_scoped_failure(ctx, &inst, d.clone()) => {
                        return Ok(Value::unknown());
                    }
                    Err(d) => return Err(d),
                };
                ctx.observer.event(Progress::ReadDone {
                    addr: inst.addr.clone(),
                    elapsed: started.elapsed(),
                });
                if let Some(after) = &change.after {
                    if let Some(path) = contradiction(after, &result) {
                        return Err(inconsistent(&inst.addr, &path));
                    }
                }
                record(&result)?;
                Ok(result)
            }
            _ => Ok(self
                .journal
                .with_snapshot(|s| s.data.get(&inst.addr).map(|d| Value::from_stored(&d.attrs)))
                .unwrap_or_else(Value::unknown)),
        }
    }

    async fn destroy(
        &self,
        ctx: &Arc<Ctx>,
        addr: &ResourceInstanceAddr,
        deposed: &Option<String>,
    ) -> Result<(), Diagnostics> {
        let info = self
            .destroy
            .get(&(addr.clone(), deposed.clone()))
            .cloned()
            .expect("destroy node has its info");
        let object = self.journal.with_snapshot(|s| {
            let inst = s.resources.get(addr)?;
            match deposed {
                None => inst.current.clone(),
                Some(k) => inst.deposed.get(k).cloned(),
            }
        });
        let Some(object) = object else { return Ok(()) };
        let config = match ctx.limits.broken(Sabotage::DeleteWithDefaultProviderConfig) {
            true => ctx.registry.default_config(&info.provider.addr.package),
            false => info.config.clone(),
        };
        let c = ctx
            .registry
            .configure(&info.provider.addr.package, &config)
            .await
            .map_err(|e| {
                Diagnostics::from(
                    Diagnostic::error(
                        "Failed to configure provider",
                        format!("Configuring {} to delete {addr}: {e}", info.provider.addr),
                    )
                    .with_address(addr),
                )
            })?;
        let request = ApplyRequest::Delete {
            type_: addr.resource.type_.clone(),
            prior: Value::from_stored(&object.attrs),
        };
        self.operate(
            ctx,
            &c,
            addr,
            deposed.clone(),
            request,
            object.provider.clone(),
            Some(object),
            Vec::new(),
            None,
            Some(&rep_of(addr)),
        )
        .await?;
        Ok(())
    }
}

/// The configuration (as recorded in state) of the provider instance that made `obj`, when
/// the instance that manages it now is another world: `diff_config` says replace, or the
/// instance differs and its configuration is not equal.
fn old_world(ctx: &Ctx, obj: &ResourceObject, slot: &ProviderSlot) -> Option<Value> {
    let old = ctx.state_provider_config(&obj.provider.addr)?;
    if obj.provider.addr.package != slot.package {
        return Some(old);
    }
    let package = ctx.registry.package(&slot.package)?;
    match package.diff_config(&old, &slot.config) {
        ConfigDiff::Replace(_) => Some(old),
        ConfigDiff::Update if obj.provider.addr != slot.addr => Some(old),
        _ => None,
    }
}

fn check_final(
    addr: &ResourceInstanceAddr,
    change: &Change,
    planned: &Value,
) -> Result<(), Diagnostics> {
    if let Some(after) = &change.after {
        if let Some(path) = contradiction(after, planned) {
            return Err(inconsistent(addr, &path));
        }
    }
    Ok(())
}

fn inconsistent(addr: &ResourceInstanceAddr, path: &str) -> Diagnostics {
    Diagnostic::error(
        "Provider produced inconsistent final plan",
        format!("When expanding the plan for {addr} to include new values learned so far during apply, .{path} changed from the value the plan showed. The apply stopped before changing it; run plan again."),
    )
    .with_address(addr)
    .into()
}

fn gone_before_update(addr: &ResourceInstanceAddr) -> Diagnostics {
    Diagnostic::error("Object to update is gone", format!("{addr} was planned for an in-place update, but it is no longer in state. Run plan again."))
        .with_address(addr)
        .into()
}

/// The managed instances an instance depends on: the resources reached from its node through
/// non-resource terms, with their instances in the module instances reached.
fn resource_deps(ctx: &Arc<Ctx>, inst: &Instance) -> Vec<ResourceInstanceAddr> {
    instance_deps(ctx, &inst.addr)
}

/// [`resource_deps`] by address (what the plan compares with the dependencies in state).
pub(crate) fn instance_deps(ctx: &Ctx, addr: &ResourceInstanceAddr) -> Vec<ResourceInstanceAddr> {
    let Some(start) = ctx.graph.id(&Node::of_instance(addr)) else {
        return Vec::new();
    };
    let values = ctx.values.read().expect("values lock");
    let mut out = BTreeSet::new();
    collect_deps(&ctx.graph, &values, start, &addr.resource.module, &mut out);
    out.into_iter().collect()
}

/// Collects every managed instance reachable from `start` through non-resource terms.
pub(crate) fn collect_deps(
    graph: &TermGraph,
    values: &Values,
    start: NodeId,
    instance: &ModulePath,
    out: &mut BTreeSet<ResourceInstanceAddr>,
) {
    let mut queue: VecDeque<(NodeId, ModulePath)> = VecDeque::new();
    let mut seen = BTreeSet::new();
    let push = |queue: &mut VecDeque<(NodeId, ModulePath)>,
                seen: &mut BTreeSet<(NodeId, ModulePath)>,
                from: NodeId,
                m: &ModulePath| {
        for to in graph.dag.dependencies(from) {
            if graph.edge_kind(from, to) == Some(EdgeKind::Provider) {
                continue;
            }
            for m2 in super::deferral::map_instances(values, m, graph.node(to).module()) {
                if seen.insert((to, m2.clone())) {
                    queue.push_back((to, m2));
                }
            }
        }
    };
    push(&mut queue, &mut seen, start, instance);
    while let Some((id, m)) = queue.pop_front() {
        match graph.node(id) {
            Node::Resource { key, .. } if key.mode == Mode::Managed => {
                let resource = ResourceAddr::new(m.clone(), key.mode, &key.type_, &key.name);
                if let Some(rv) =
                    values.resource(&m, &(key.mode, key.type_.clone(), key.name.clone()))
                {
                    out.extend(rv.instances.keys().map(|k| resource.instance(k.clone())));
                }
            }
            Node::Provider { .. } | Node::Orphan { .. } | Node::Destroy { .. } => {}
            _ => push(&mut queue, &mut seen, id, &m),
        }
    }
}

#[async_trait::async_trait]
impl Phase for ApplyPhase {
    fn final_values(&self) -> bool {
        true
    }

    async fn provider(
        &self,
        ctx: &Arc<Ctx>,
        addr: &ProviderAddr,
        config: Value,
        is_default: bool,
    ) -> Result<(), Diagnostics> {
        if let Some(p) = config.unknown_paths().first() {
            return Err(Diagnostic::error(
                "Provider configuration still unknown",
                format!("{addr}.{p} is still not known during apply. A value it depends on failed or was not applied."),
            )
            .with_address(addr)
            .into());
        }
        let package = ctx
            .registry
            .package(&addr.package)
            .expect("checked by the walk")
            .clone();
        let configured = ctx.configure_provider(addr, &config).await?;
        let stored = config.to_stored().expect("checked known");
        let in_state = self
            .journal
            .with_snapshot(|s| s.providers.get(addr).cloned());
        let register = |id: String| {
            self.journal.record(EventBody::ProviderRegistered {
                instance: ProviderInstance {
                    addr: addr.clone(),
                    id,
                    config: stored.clone(),
                    is_default,
                },
            })
        };
        let id = match in_state {
            None => {
                let id = new_instance_id(&addr.package);
                register(id.clone()).await?;
                id
            }
            Some(old) => match package.diff_config(&Value::from_stored(&old.config), &config) {
                ConfigDiff::NoChange => old.id,
                ConfigDiff::Update => {
                    self.journal
                        .record(EventBody::ProviderUpdated {
                            addr: addr.clone(),
                            id: old.id.clone(),
                            config: stored.clone(),
                        })
                        .await
                        .map_err(Diagnostics::from)?;
                    old.id
                }
                ConfigDiff::Replace(_) => {
                    // Objects the plan knew to replace were deleted before this node (graph
                    // edges). Those it could not know about — its configuration was unknown
                    // until now — are deleted here, in the old world, before the new instance
                    // takes the address (so no object ever names an unregistered instance);
                    // their resources then create in the new one.
                    self.delete_under(ctx, &old).await?;
                    // Data results read through the old instance leave state with it (the
                    // data sources are read again through the new one): otherwise, from the
                    // new instance's registration until that read, state would hold a result
                    // naming an unregistered instance (found by the p13 property).
                    let stale: Vec<ResourceInstanceAddr> = self.journal.with_snapshot(|s| {
                        s.data
                            .iter()
                            .filter(|(_, d)| d.provider.addr == old.addr && d.provider.id == old.id)
                            .map(|(a, _)| a.clone())
                            .collect()
                    });
                    for addr in stale {
                        self.journal
                            .append(EventBody::DataDropped { addr })
                            .map_err(Diagnostics::from)?;
                    }
                    let id = new_instance_id(&addr.package);
                    register(id.clone()).await?;
                    id
                }
            },
        };
        ctx.set_provider_slot(ProviderSlot {
            addr: addr.clone(),
            package: addr.package.clone(),
            config,
            state: ProviderState::Configured(configured),
            id: Some(id),
        });
        Ok(())
    }

    async fn instance(&self, ctx: &Arc<Ctx>, inst: Instance) -> Result<Value, Diagnostics> {
        match inst.key.mode {
            Mode::Managed => self.apply_managed(ctx, inst).await,
            Mode::Data => self.apply_data(ctx, inst).await,
        }
    }

    async fn orphans(
        &self,
        _ctx: &Arc<Ctx>,
        orphans: Vec<(ResourceInstanceAddr, OrphanReason)>,
    ) -> Result<(), Diagnostics> {
        // Managed orphans are deleted by their `Destroy` nodes; data orphans leave state.
        for (addr, _) in orphans {
            if addr.resource.mode == Mode::Data
                && self.journal.with_snapshot(|s| s.data.contains_key(&addr))
            {
                self.journal
                    .append(EventBody::DataDropped { addr })
                    .map_err(Diagnostics::from)?;
            }
        }
        Ok(())
    }

    fn output(&self, _ctx: &Arc<Ctx>, name: &str, value: &Value, sensitive: bool) {
        self.outputs
            .lock()
            .expect("outputs lock")
            .insert(name.to_string(), (value.clone(), sensitive));
    }

    async fn extra(&self, ctx: &Arc<Ctx>, node: &Node) -> Result<(), Diagnostics> {
        match node {
            Node::Destroy { addr, deposed } => self.destroy(ctx, addr, deposed).await,
            _ => Ok(()),
        }
    }
}

/// Adds the plan's deletes to a term graph as `Destroy` nodes, ordered: dependents are deleted
/// before their dependencies; a delete-then-create replacement deletes before it creates; a
/// create-before-destroy replacement deletes its deposed object after it and its dependents
/// are applied; an orphan is deleted after the resources that depended on it are updated; a
/// replaced provider instance is registered after its old objects are deleted.
pub(crate) fn add_destroys(
    g: &mut TermGraph,
    plan: &Plan,
    prior: &Snapshot,
    deposed_keys: &mut BTreeMap<ResourceInstanceAddr, String>,
    sabotage: Option<Sabotage>,
) -> BTreeMap<(ResourceInstanceAddr, Option<String>), DestroyInfo> {
    let mut info = BTreeMap::new();
    let mut ids: BTreeMap<ResourceInstanceAddr, NodeId> = BTreeMap::new();
    // Deletes of current objects (not deposed ones).
    let mut current_deletes: BTreeSet<ResourceInstanceAddr> = BTreeSet::new();
    // The current objects the plan deletes (alone or before their replacement).
    let plan_deletes: BTreeSet<&ResourceInstanceAddr> = plan
        .changes
        .iter()
        .filter(|c| matches!(c.action, Action::Delete | Action::DeleteThenCreate))
        .map(|c| &c.addr)
        .collect();
    let static_node = Node::of_instance;
    // Deletes of deposed objects left by earlier runs, with the objects they depend on.
    let mut leftovers: Vec<(NodeId, &ResourceInstanceAddr, &[ResourceInstanceAddr])> = Vec::new();
    for change in &plan.changes {
        // A deposed object: the current one, deposed by this apply (create-before-destroy),
        // or one left by an earlier run.
        let deposed = match (change.action, &change.deposed) {
            (Action::Delete, Some(key)) => Some(key.clone()),
            (Action::Delete | Action::DeleteThenCreate, None) => None,
            (Action::CreateThenDelete, _) => {
                let key = format!("{:08x}", rand::random::<u32>());
                deposed_keys.insert(change.addr.clone(), key.clone());
                Some(key)
            }
            _ => continue,
        };
        let obj = match &change.deposed {
            Some(key) => prior
                .resources
                .get(&change.addr)
                .and_then(|i| i.deposed.get(key)),
            None => prior.current(&change.addr),
        };
        let Some(obj) = obj else {
            continue;
        };
        let config = prior
            .providers
            .get(&obj.provider.addr)
            .map(|p| Value::from_stored(&p.config))
            .unwrap_or_else(|| Value::Object(BTreeMap::new()));
        let id = g.add(Node::Destroy {
            addr: change.addr.clone(),
            deposed: deposed.clone(),
        });
        if change.deposed.is_some() {
            leftovers.push((id, &change.addr, &obj.deps));
        } else {
            ids.insert(change.addr.clone(), id);
        }
        info.insert(
            (change.addr.clone(), deposed.clone()),
            DestroyInfo {
                provider: obj.provider.clone(),
                config,
            },
        );
        // A deposed object left by an earlier run is what create-before-destroy deposed: its
        // delete, too, waits for the current object and what depends on it (they may still
        // refer to it) — unless its provider instance is replaced at plan, which deletes the
        // old world's objects before the new one is registered.
        let provider_replaced = plan
            .provider_changes
            .iter()
            .any(|pc| pc.addr == obj.provider.addr && pc.action.is_replace());
        let after_current = match change.action {
            Action::CreateThenDelete => true,
            Action::Delete => change.deposed.is_some() && !provider_replaced,
            _ => false,
        };
        if let Some(res) = g.id(&static_node(&change.addr)) {
            if change.action == Action::DeleteThenCreate {
                g.edge(res, id, EdgeKind::DependsOn, None);
            } else if after_current {
                g.edge(id, res, EdgeKind::DependsOn, None);
                for dependent in g.dag.transitive_dependents(res) {
                    if matches!(g.node(dependent), Node::Resource { .. }) {
                        g.edge(id, dependent, EdgeKind::DependsOn, None);
                    }
                }
            }
        }
        // A provider instance that is (or may turn out to be, once its configuration is
        // known) replaced deletes the objects still under it: the plan's own deletes of them
        // go first, so each object is deleted exactly once. (A deposed object's delete waits
        // for its replacement, which waits for the provider instance.)
        // Except when an object that stays under it (nothing in the plan deletes it) depends
        // on this one: the instance may delete that object at apply, which must happen
        // before this delete, so this delete waits for the instance instead (and finds the
        // object gone if the instance deleted it).
        if let Some(p) = g.id(&Node::Provider {
            addr: obj.provider.addr.clone(),
        }) {
            let replaced = plan.provider_changes.iter().any(|pc| {
                pc.addr == obj.provider.addr
                    && (pc.action.is_replace()
                        || (deposed.is_none() && may_be_replaced_at_apply(pc)))
            });
            // Only asked when the instance may be replaced (a search of the state).
            let depended_on_under_p = || {
                deposed.is_none()
                    && prior.resources.iter().any(|(a, i)| {
                        i.current.as_ref().is_some_and(|o| {
                            o.provider.addr == obj.provider.addr
                                && o.deps.contains(&change.addr)
                                && !plan_deletes.contains(a)
                        })
                    })
            };
            // A deposed object (create-before-destroy) under an instance that may be replaced
            // at apply: the instance's replacement deletes it with its other objects, so its
            // own delete waits for the instance (and finds it gone if it was replaced).
            let deposed_under_maybe = deposed.is_some()
                && plan.provider_changes.iter().any(|pc| {
                    pc.addr == obj.provider.addr
                        && !pc.action.is_replace()
                        && may_be_replaced_at_apply(pc)
                });
            let no_cycle = |g: &TermGraph| !g.dag.transitive_dependencies(p).contains(&id);
            if deposed_under_maybe && no_cycle(g) {
                g.edge(id, p, EdgeKind::DependsOn, None);
            } else if replaced {
                if depended_on_under_p() && no_cycle(g) {
                    g.edge(id, p, EdgeKind::DependsOn, None);
                } else {
                    g.edge(p, id, EdgeKind::DependsOn, None);
                }
            }
        }
        if deposed.is_none() {
            current_deletes.insert(change.addr.clone());
        }
    }
    // A provider instance reconfigured at apply is a possible delete of its objects: the
    // deletes of what they depend on wait for it (a dependency among what its configuration
    // reads is create-before-destroy: `plan::replacement_order`).
    let reconfigured: BTreeSet<&ProviderAddr> = plan
        .provider_changes
        .iter()
        .filter(|pc| pc.action == Action::Update && may_be_replaced_at_apply(pc))
        .map(|pc| &pc.addr)
        .collect();
    // What each such instance depends on, kept until an edge is added: an edge to one instance
    // never changes what that instance depends on, but may change what another one does.
    let mut reach: BTreeMap<NodeId, BTreeSet<NodeId>> = BTreeMap::new();
    for (addr, inst) in &prior.resources {
        let Some(obj) = &inst.current else { continue };
        if !reconfigured.contains(&obj.provider.addr) {
            continue;
        }
        let Some(p) = g.id(&Node::Provider {
            addr: obj.provider.addr.clone(),
        }) else {
            continue;
        };
        let before_p = reach
            .entry(p)
            .or_insert_with(|| g.dag.transitive_dependencies(p));
        // An object the plan deletes before the instance is registered is gone by then: the
        // instance cannot delete it, and its own delete already precedes its dependencies'.
        if ids.get(addr).is_some_and(|own| before_p.contains(own)) {
            continue;
        }
        let waits: Vec<NodeId> = obj
            .deps
            .iter()
            .filter(|dep| current_deletes.contains(*dep))
            .filter_map(|dep| ids.get(dep).copied())
            .filter(|dep_id| !before_p.contains(dep_id))
            .collect();
        if !waits.is_empty() {
            for dep_id in waits {
                g.edge(dep_id, p, EdgeKind::DependsOn, None);
            }
            reach.clear();
        }
    }
    // Reverse dependency order among deletes, and orphans after their dependents' updates.
    let pure_deletes: BTreeSet<&ResourceInstanceAddr> = plan
        .changes
        .iter()
        .filter(|c| c.action == Action::Delete)
        .map(|c| &c.addr)
        .collect();
    // A left-over deposed object: deleted after the deletes of what depends on it and before
    // the deletes of what it depends on.
    for (my_id, mine, deps) in leftovers {
        for dep in deps {
            if let Some(&dep_id) = ids.get(dep) {
                g.edge(dep_id, my_id, EdgeKind::DependsOn, None);
            }
        }
        for (addr, inst) in &prior.resources {
            let depends = inst.current.as_ref().is_some_and(|o| o.deps.contains(mine));
            if let (true, Some(&their)) = (depends, ids.get(addr)) {
                if !g.dag.transitive_dependencies(their).contains(&my_id) {
                    g.edge(my_id, their, EdgeKind::DependsOn, None);
                }
            }
        }
    }
    for (addr, inst) in &prior.resources {
        let Some(obj) = &inst.current else { continue };
        for dep in &obj.deps {
            if let (Some(&dep_id), Some(&my_id)) = (ids.get(dep), ids.get(addr)) {
                match sabotage {
                    Some(Sabotage::DeleteDependenciesFirst) => {
                        g.edge(my_id, dep_id, EdgeKind::DependsOn, None)
                    }
                    _ => g.edge(dep_id, my_id, EdgeKind::DependsOn, None),
                }
            }
            if let Some(&dep_id) = ids.get(dep) {
                if pure_deletes.contains(dep) && !ids.contains_key(addr) {
                    if let Some(res) = g.id(&static_node(addr)) {
                        if !g.dag.transitive_dependencies(res).contains(&dep_id)
                            && !g.dag.transitive_dependencies(dep_id).contains(&res)
                        {
                            g.edge(dep_id, res, EdgeKind::DependsOn, None);
                        }
                    }
                }
            }
        }
    }
    info
}

/// Builds the events that finish an apply: outputs, dropped data, providers no longer used.
pub(crate) fn finishing_events(
    snapshot: &Snapshot,
    outputs: &BTreeMap<String, (Value, bool)>,
    configured_providers: &BTreeSet<ProviderAddr>,
    dropped_data: &[ResourceInstanceAddr],
) -> Vec<EventBody> {
    let mut events = Vec::new();
    for addr in dropped_data {
        if snapshot.data.contains_key(addr) {
            events.push(EventBody::DataDropped { addr: addr.clone() });
        }
    }
    // Data sources dropped by this run no longer keep their provider instance.
    let used: BTreeSet<&ProviderAddr> = snapshot
        .resources
        .values()
        .flat_map(|i| i.current.iter().chain(i.deposed.values()))
        .map(|o| &o.provider.addr)
        .chain(
            snapshot
                .data
                .iter()
                .filter(|(a, _)| !dropped_data.contains(a))
                .map(|(_, d)| &d.provider.addr),
        )
        .collect();
    for (addr, p) in &snapshot.providers {
        if !used.contains(addr) && !configured_providers.contains(addr) {
            events.push(EventBody::ProviderRemoved {
                addr: addr.clone(),
                id: p.id.clone(),
            });
        }
    }
    let mut out = BTreeMap::new();
    for (name, (v, sensitive)) in outputs {
        if let Ok(stored) = v.to_stored() {
            out.insert(
                name.clone(),
                OutputValue {
                    value: stored,
                    sensitive: *sensitive,
                },
            );
        }
    }
    if out != snapshot.outputs {
        events.push(EventBody::OutputsSet { outputs: out });
    }
    events
}

/// True when two dependency lists name the same instances (in any order).
pub(crate) fn same_deps(a: &[ResourceInstanceAddr], b: &[ResourceInstanceAddr]) -> bool {
    a.iter().collect::<BTreeSet<_>>() == b.iter().collect::<BTreeSet<_>>()
}

/// The `count.index` / `each.key` of an instance from its address (`each.value` is not
/// known when only the address is: destroy-time provisioners may not use it).
fn rep_of(addr: &ResourceInstanceAddr) -> Repetition {
    match &addr.key {
        Some(cairn_state::InstanceKey::Int(i)) => Repetition::Count(*i),
        Some(cairn_state::InstanceKey::Str(k)) => Repetition::Each(k.clone(), Value::unknown()),
        None => Repetition::None,
    }
}
