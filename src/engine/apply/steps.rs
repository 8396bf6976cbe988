//! The steps of an apply, as Pulumi's step generator and step executor have them: one type per
//! kind of change, each owning its execution and the events it writes. [`Step::for_change`]
//! turns what the plan says about an instance into its step ([`Kind::of`] is the one place
//! apply reads a planned `Action`); [`Step::for_destroy`] makes the step of a `Destroy` node;
//! the walker runs [`Step::execute`] without knowing what a step does.
//!
//! | step | what it does |
//! | --- | --- |
//! | `Keep` | nothing: an instance outside this plan (`-target`) keeps what state holds |
//! | `Same` | no change: records a move to another provider instance and new dependencies |
//! | `Import` | adopts the object the plan imported (`StateImported`), then runs its change |
//! | `Create` | plans again with final values, checks the plan, creates |
//! | `Update` | plans again; updates, or nothing when the final values equal the prior ones, or a replacement when the diff (unavailable at plan) says so |
//! | `Replace` | both orders: delete then create, or depose, create, and restore on failure |
//! | `Delete` / `DeposedDelete` | a `Destroy` node: deletes through the provider instance recorded in state |
//! | `Read` | a data source: records a plan-time read, reads now, or keeps what state holds |
//! | `Forget` / `Move` | state only (`removed`, `moved`): one event each, recorded before the walk |
//!
//! Provider instances are steps too ([`ProviderStep`]): registered, updated, or replaced —
//! a replacement deletes the objects still under the old instance first.

use super::operation::{Operation, Recorder};
use crate::addr::{Mode, ProviderAddr, ResourceInstanceAddr};
use crate::config::IgnoreChanges;
use crate::diag::{Diagnostic, Diagnostics};
use crate::engine::core::{contradiction, Ctx, Instance, ProviderSlot, ProviderState};
use crate::engine::observer::Progress;
use crate::engine::provider_diags::provider_failure;
use crate::engine::providers::new_instance_id;
use crate::engine::rules::{
    apply_ignore_changes, check_scoped_failure, equal_ignoring_marks, instance_deps,
    missing_provider, same_deps,
};
use crate::engine::sabotage::Sabotage;
use crate::engine::values::Repetition;
use crate::plan::{Action, Change, DataRead, Importing};
use crate::provider::{ApplyRequest, ConfigDiff, Configured, ProviderError};
use crate::value::carry_marks;
use crate::value::Value;
use cairn_state::{DataObject, EventBody, ProviderInstance, ProviderRef, ResourceObject};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

/// How to delete one object: its provider instance as recorded in state.
#[derive(Clone, Debug)]
pub(crate) struct DestroyInfo {
    pub provider: ProviderRef,
    pub config: Value,
}

/// The order of a replacement's halves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Order {
    /// Delete the old object, then create the new one.
    DeleteFirst,
    /// `create_before_destroy`: depose the old object, create, delete the deposed one later
    /// (its own `Destroy` node).
    CreateFirst,
}

/// What kind of step a planned change is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Same,
    Create,
    Update,
    Replace(Order),
    Delete,
    DeposedDelete,
    Read,
    Forget,
}

impl Kind {
    /// The kind of a planned change: the one place apply reads a planned `Action`.
    pub(crate) fn of(change: &Change) -> Kind {
        match change.action {
            Action::NoOp => Kind::Same,
            Action::Create => Kind::Create,
            Action::Update => Kind::Update,
            Action::DeleteThenCreate => Kind::Replace(Order::DeleteFirst),
            Action::CreateThenDelete => Kind::Replace(Order::CreateFirst),
            Action::Delete if change.deposed.is_some() => Kind::DeposedDelete,
            Action::Delete => Kind::Delete,
            Action::Read => Kind::Read,
            Action::Forget => Kind::Forget,
        }
    }
}

/// What every step of one apply executes with: where it records, and what the plan and the
/// graph-building steps decided before the walk.
pub(crate) struct Executor {
    pub rec: Recorder,
    /// The run's number (part of every create token).
    pub run: u64,
    /// The plan's changes, in the plan's order: moved out of the plan for the walk and back
    /// after it, never copied (see [`Executor::change`]).
    pub changes: Vec<Change>,
    /// The places in `changes` of current objects' changes, sorted by address (a stable sort:
    /// of two changes of one address the later comes last, and `change` takes it, as a map
    /// would). A deposed object's delete is a `Destroy` node of its own (see
    /// `order::add_destroys`) and is not here.
    pub by_addr: Vec<usize>,
    /// Data sources read at plan time, recorded without reading again.
    pub data_reads: BTreeMap<ResourceInstanceAddr, DataRead>,
    /// How to delete the object of each `Destroy` node.
    pub destroy: BTreeMap<(ResourceInstanceAddr, Option<String>), DestroyInfo>,
    /// Deposed keys chosen for create-before-destroy replacements.
    pub deposed_keys: BTreeMap<ResourceInstanceAddr, String>,
}

/// A managed instance as the walk reaches it: its evaluated configuration, its planned
/// change, and the object state holds for it now.
pub(crate) struct Target<'a> {
    inst: Instance,
    change: &'a Change,
    current: Option<ResourceObject>,
}

/// A data source as the walk reaches it, and how its result comes.
pub(crate) struct Read<'a> {
    inst: Instance,
    how: ReadHow<'a>,
}

enum ReadHow<'a> {
    /// Read at plan time: recorded, not read again.
    Recorded(&'a DataRead),
    /// Deferred to apply: read now.
    Now(&'a Change),
    /// Nothing planned: what state holds.
    FromState,
}

/// A `Destroy` node's object: current (`deposed: None`) or deposed.
pub(crate) struct Delete {
    addr: ResourceInstanceAddr,
    deposed: Option<String>,
    info: DestroyInfo,
}

/// One step of an apply.
pub(crate) enum Step<'a> {
    /// Outside this plan (`-target`): the object as state holds it.
    Keep(Option<ResourceObject>),
    Same(Target<'a>),
    /// The plan imported the object: adopt it, then run `then` on it.
    Import(&'a Importing, Box<Step<'a>>),
    Create(Target<'a>),
    /// `forced`: planned unchanged, updated anyway (`Sabotage::ApplyUpdatesNoOps` only).
    Update {
        target: Target<'a>,
        forced: bool,
    },
    Replace(Target<'a>, Order),
    Delete(Delete),
    DeposedDelete(Delete),
    Read(Read<'a>),
    Forget(ResourceInstanceAddr),
    Move {
        from: ResourceInstanceAddr,
        to: ResourceInstanceAddr,
    },
}

impl Executor {
    /// The planned change of the current object at `addr` (of two, the later in the plan).
    pub(crate) fn change(&self, addr: &ResourceInstanceAddr) -> Option<&Change> {
        let end = self
            .by_addr
            .partition_point(|&i| &self.changes[i].addr <= addr);
        self.by_addr[..end]
            .last()
            .map(|&i| &self.changes[i])
            .filter(|c| &c.addr == addr)
    }
}

impl<'a> Step<'a> {
    /// The step of an instance the walk reached, from what the plan says of it.
    pub(crate) fn for_change(ex: &'a Executor, ctx: &Ctx, inst: Instance) -> Step<'a> {
        let change = ex.change(&inst.addr);
        if inst.key.mode == Mode::Data {
            let how = match (ex.data_reads.get(&inst.addr), change) {
                (Some(read), _) => ReadHow::Recorded(read),
                (None, Some(c)) if Kind::of(c) == Kind::Read => ReadHow::Now(c),
                _ => ReadHow::FromState,
            };
            return Step::Read(Read { inst, how });
        }
        let current = ex
            .rec
            .journal
            .with_snapshot(|s| s.current(&inst.addr).cloned());
        let Some(change) = change else {
            return Step::Keep(current);
        };
        let importing = change.importing.as_ref().filter(|_| current.is_none());
        let target = Target {
            inst,
            change,
            current,
        };
        let step = match Kind::of(change) {
            Kind::Same if !ctx.limits.broken(Sabotage::ApplyUpdatesNoOps) => Step::Same(target),
            Kind::Same => Step::Update {
                target,
                forced: true,
            },
            Kind::Update => Step::Update {
                target,
                forced: false,
            },
            Kind::Replace(order) => Step::Replace(target, order),
            // A plan gives an instance the walk reaches no other kind of change (deletes,
            // reads and forgets are of objects without configuration); were it to, the
            // instance is created, as apply always did.
            Kind::Create | Kind::Delete | Kind::DeposedDelete | Kind::Read | Kind::Forget => {
                Step::Create(target)
            }
        };
        match importing {
            Some(importing) => Step::Import(importing, Box::new(step)),
            None => step,
        }
    }

    /// The step of a `Destroy` node (`order::add_destroys` made it, with its info).
    pub(crate) fn for_destroy(
        ex: &Executor,
        addr: &ResourceInstanceAddr,
        deposed: &Option<String>,
    ) -> Step<'a> {
        let info = ex
            .destroy
            .get(&(addr.clone(), deposed.clone()))
            .cloned()
            .expect("destroy node has its info");
        let delete = Delete {
            addr: addr.clone(),
            deposed: deposed.clone(),
            info,
        };
        match delete.deposed {
            Some(_) => Step::DeposedDelete(delete),
            None => Step::Delete(delete),
        }
    }

    /// The step of a change that only touches the state (`removed` blocks' forgets).
    pub(crate) fn for_state_change(change: &Change) -> Option<Step<'a>> {
        (Kind::of(change) == Kind::Forget).then(|| Step::Forget(change.addr.clone()))
    }

    /// The step of a `moved` block's move.
    pub(crate) fn for_move(from: &ResourceInstanceAddr, to: &ResourceInstanceAddr) -> Step<'a> {
        Step::Move {
            from: from.clone(),
            to: to.clone(),
        }
    }

    /// The one event of a step that only touches the state (a move, a forget): recorded
    /// before the walk, with what refresh found (`execute::record_refreshed`).
    pub(crate) fn state_event(&self) -> Option<EventBody> {
        match self {
            Step::Forget(addr) => Some(EventBody::ResourceForgotten { addr: addr.clone() }),
            Step::Move { from, to } => Some(EventBody::ResourceMoved {
                from: from.clone(),
                to: to.clone(),
            }),
            _ => None,
        }
    }

    /// Runs the step. Returns the value other expressions see for its instance (a delete:
    /// null).
    pub(crate) async fn execute(self, ex: &Executor, ctx: &Arc<Ctx>) -> Result<Value, Diagnostics> {
        match self {
            Step::Import(importing, then) => {
                let mut then = *then;
                if let Some(target) = then.target_mut() {
                    target.current = Some(target.adopt(ex, ctx, importing)?);
                }
                then.run(ex, ctx).await
            }
            step => step.run(ex, ctx).await,
        }
    }

    /// [`Step::execute`] of every step but `Import` (which wraps one of the others).
    async fn run(self, ex: &Executor, ctx: &Arc<Ctx>) -> Result<Value, Diagnostics> {
        match self {
            Step::Keep(current) => Ok(current
                .map(|o| Value::from_stored(&o.attrs))
                .unwrap_or_else(Value::unknown)),
            Step::Same(target) => target.same(ex, ctx),
            Step::Create(target) => target.change_object(ex, ctx, Intent::Create).await,
            Step::Update { target, forced } => {
                target
                    .change_object(ex, ctx, Intent::Update { forced })
                    .await
            }
            Step::Replace(target, order) => {
                target.change_object(ex, ctx, Intent::Replace(order)).await
            }
            Step::Delete(d) | Step::DeposedDelete(d) => {
                d.execute(ex, ctx).await?;
                Ok(Value::null())
            }
            Step::Read(read) => read.execute(ex, ctx).await,
            Step::Import(..) => unreachable!("an import wraps a change step; execute unwraps it"),
            Step::Forget(_) | Step::Move { .. } => {
                if let Some(event) = self.state_event() {
                    ex.rec.append(event)?;
                }
                Ok(Value::null())
            }
        }
    }

    fn target_mut(&mut self) -> Option<&mut Target<'a>> {
        match self {
            Step::Same(t) | Step::Create(t) | Step::Replace(t, _) => Some(t),
            Step::Update { target, .. } => Some(target),
            _ => None,
        }
    }
}

/// What a managed change asks for, once its step runs (a diff unavailable at plan may still
/// make it a replacement).
#[derive(Clone, Copy)]
enum Intent {
    Create,
    Update { forced: bool },
    Replace(Order),
}

impl<'a> Target<'a> {
    fn addr(&self) -> &ResourceInstanceAddr {
        &self.inst.addr
    }

    /// `Same`: nothing to change. A move to another provider instance with an equal
    /// configuration is recorded, and so are new dependencies.
    fn same(self, ex: &Executor, ctx: &Arc<Ctx>) -> Result<Value, Diagnostics> {
        let inst = &self.inst;
        let moved = self
            .current
            .as_ref()
            .is_some_and(|o| o.provider.addr != inst.provider);
        if let (true, Some(id)) = (moved, ctx.provider_slot(&inst.provider).and_then(|s| s.id)) {
            let provider = ProviderRef::new(inst.provider.clone(), id);
            ex.rec.append(EventBody::ResourceRehomed {
                addr: inst.addr.clone(),
                provider,
            })?;
        }
        // Its dependencies may have changed (a new `depends_on`, a dependency that gained
        // instances): state records them, as Terraform does at every apply, so a later
        // destroy deletes this object before what it depends on now.
        if let Some(obj) = &self.current {
            let deps = instance_deps(ctx, &inst.addr);
            if !same_deps(&deps, &obj.deps) {
                ex.rec.append(EventBody::DependenciesUpdated {
                    addr: inst.addr.clone(),
                    deps,
                })?;
            }
        }
        Ok(self
            .current
            .map(|o| Value::from_stored(&o.attrs))
            .or(self.change.after.clone())
            .unwrap_or_else(Value::unknown))
    }

    /// `Import`: the object the plan imported (`import` blocks), recorded into state as the
    /// plan found it (`StateImported`), with its meta, before anything else is done with it;
    /// the provider is not called again (as in Terraform, the import happened at plan).
    fn adopt(
        &self,
        ex: &Executor,
        ctx: &Arc<Ctx>,
        importing: &Importing,
    ) -> Result<ResourceObject, Diagnostics> {
        let inst = &self.inst;
        let slot = ctx
            .provider_slot(&inst.provider)
            .ok_or_else(|| missing_provider(&inst.provider, &inst.addr))?;
        let Some(before) = &self.change.before else {
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
            deps: instance_deps(ctx, &inst.addr),
            provider: ProviderRef::new(inst.provider.clone(), slot.id.clone().unwrap_or_default()),
            create_token: None,
            tainted: false,
            meta: importing.meta.clone(),
        };
        // Appended, not awaited to durability: nothing changed in the world, so a crash
        // before the next commit only means the next plan imports it again.
        ex.rec.append(EventBody::StateImported {
            source: format!("import {:?}", importing.id),
            providers: Vec::new(),
            resources: vec![(inst.addr.clone(), object.clone())],
        })?;
        ex.rec.imported();
        ctx.observer.event(Progress::ImportComplete {
            addr: inst.addr.clone(),
            id: importing.id.clone(),
        });
        Ok(object)
    }

    /// `Create`, `Update`, `Replace`: planned again with final values, then carried out.
    async fn change_object(
        self,
        ex: &Executor,
        ctx: &Arc<Ctx>,
        intent: Intent,
    ) -> Result<Value, Diagnostics> {
        let p = Prepared::new(ctx, self)?;
        let intent = match intent {
            // Its provider instance was replaced at apply, which deleted the old object: create.
            Intent::Update { .. } if p.t.change.diff_unavailable && p.t.current.is_none() => {
                Intent::Create
            }
            intent => intent,
        };
        // A diff unavailable at plan (the provider's configuration was unknown) may turn out
        // to be a provider replacement: the object lives in the old world, so it is replaced —
        // deleted through the configuration it was created with, created through the new one.
        let old_world = match (&p.t.current, p.t.change.diff_unavailable) {
            (Some(obj), true) => old_world(ctx, obj, &p.slot),
            _ => None,
        };
        match (intent, old_world) {
            (_, Some(config)) => {
                p.create(ex, ctx, Some(Order::DeleteFirst), Some(config))
                    .await
            }
            (Intent::Update { forced }, None) => p.update(ex, ctx, forced).await,
            (Intent::Create, None) => p.create(ex, ctx, None, None).await,
            (Intent::Replace(order), None) => p.create(ex, ctx, Some(order), None).await,
        }
    }
}

/// A managed change about to be planned again: its provider instance, and its configuration
/// with `ignore_changes` applied.
struct Prepared<'a> {
    t: Target<'a>,
    slot: ProviderSlot,
    c: Arc<dyn Configured>,
    provider: ProviderRef,
    prior: Option<Value>,
    config: Value,
    deps: Vec<ResourceInstanceAddr>,
}

impl<'a> Prepared<'a> {
    fn new(ctx: &Arc<Ctx>, t: Target<'a>) -> Result<Self, Diagnostics> {
        let inst = &t.inst;
        let slot = ctx
            .provider_slot(&inst.provider)
            .ok_or_else(|| missing_provider(&inst.provider, &inst.addr))?;
        let ProviderState::Configured(c) = &slot.state else {
            return Err(missing_provider(&inst.provider, &inst.addr));
        };
        let c = c.clone();
        let provider = ProviderRef::new(inst.provider.clone(), slot.id.clone().unwrap_or_default());
        let res = &ctx.module(&inst.static_module).resources[&inst.key];
        let prior = t.current.as_ref().map(|o| Value::from_stored(&o.attrs));
        let config = match (&prior, &res.lifecycle.ignore_changes) {
            (Some(pv), ignore) if *ignore != IgnoreChanges::None => {
                apply_ignore_changes(&inst.config, pv, ignore, &inst.schema)
            }
            _ => inst.config.clone(),
        };
        let deps = instance_deps(ctx, &inst.addr);
        Ok(Prepared {
            t,
            slot,
            c,
            provider,
            prior,
            config,
            deps,
        })
    }

    fn plan_failed(&self, ctx: &Arc<Ctx>, e: ProviderError) -> Diagnostics {
        provider_failure(ctx, &self.t.inst.addr, "plan", &e)
    }

    /// `Update`: planned against the prior object. Nothing to do when the final values equal
    /// it; a replacement when the diff, unavailable at plan, asks for one.
    async fn update(
        self,
        ex: &Executor,
        ctx: &Arc<Ctx>,
        forced: bool,
    ) -> Result<Value, Diagnostics> {
        let change = self.t.change;
        let meta = self
            .t
            .current
            .as_ref()
            .map(|o| o.meta.clone())
            .unwrap_or_default();
        let mut planned = self
            .c
            .plan_async(
                &self.t.inst.key.type_,
                self.prior.as_ref(),
                &meta,
                &self.config,
            )
            .await
            .map_err(|e| self.plan_failed(ctx, e))?;
        planned.planned = carry_marks(&self.config, planned.planned);
        let unchanged = self
            .prior
            .as_ref()
            .is_some_and(|p| equal_ignoring_marks(p, &planned.planned));
        if change.diff_unavailable {
            // The diff could not be made at plan time; make it now.
            if !planned.requires_replace.is_empty() {
                return self.create(ex, ctx, Some(Order::DeleteFirst), None).await;
            } else if unchanged {
                return Ok(self.prior.unwrap_or_else(Value::unknown));
            }
        } else {
            check_final(self.t.addr(), change, &planned.planned)?;
            // Planned "known after apply" (e.g. from a data read deferred to apply), the
            // final values turned out to be the prior ones: nothing to do, as in
            // Terraform's final plan. No provider call, no event, not counted as changed.
            if !forced && unchanged {
                return Ok(self.prior.unwrap_or_else(Value::unknown));
            }
        }
        let prior = self
            .prior
            .clone()
            .ok_or_else(|| gone_before_update(self.t.addr()))?;
        let request = ApplyRequest::Update {
            type_: self.t.inst.key.type_.clone(),
            prior,
            planned: planned.planned.clone(),
        };
        let new = Operation {
            addr: self.t.addr(),
            deposed: None,
            provider: self.provider.clone(),
            prior: self.t.current.clone(),
            deps: self.deps.clone(),
            planned: Some((&planned.planned, &planned.private[..])),
            provision: None,
        }
        .run(request, &ex.rec, ctx, &self.c)
        .await?;
        Ok(new.unwrap_or_else(Value::unknown))
    }

    /// `Create`, or a replacement (`order`): planned as a new object; the old one deleted
    /// first (through `old_world`, the configuration it was created with, when that is
    /// another world) or deposed first, then the create. A create-before-destroy whose create
    /// leaves no object restores the deposed one.
    async fn create(
        self,
        ex: &Executor,
        ctx: &Arc<Ctx>,
        order: Option<Order>,
        old_world: Option<Value>,
    ) -> Result<Value, Diagnostics> {
        let type_ = &self.t.inst.key.type_;
        let mut planned = self
            .c
            .plan_async(type_, None, &Default::default(), &self.config)
            .await
            .map_err(|e| self.plan_failed(ctx, e))?;
        planned.planned = carry_marks(&self.config, planned.planned);
        if !self.t.change.diff_unavailable {
            check_final(self.t.addr(), self.t.change, &planned.planned)?;
        }
        let mut deposed_key = None;
        match (order, &self.t.current) {
            (Some(Order::DeleteFirst), Some(prior)) => {
                self.delete_first(ex, ctx, prior.clone(), old_world).await?;
            }
            (Some(Order::CreateFirst), Some(_)) => {
                deposed_key = Some(self.depose(ex).await?);
            }
            _ => {}
        }
        let token = format!("{}-{}-{:08x}", ex.run, self.t.addr(), rand::random::<u32>());
        let request = ApplyRequest::Create {
            type_: type_.clone(),
            planned: planned.planned.clone(),
            token,
        };
        let created = Operation {
            addr: self.t.addr(),
            deposed: None,
            provider: self.provider.clone(),
            prior: None,
            deps: self.deps.clone(),
            planned: Some((&planned.planned, &planned.private[..])),
            provision: Some(&self.t.inst.rep),
        }
        .run(request, &ex.rec, ctx, &self.c)
        .await;
        if let (Err(_), Some(key)) = (&created, deposed_key) {
            self.restore(ex, key).await?;
        }
        Ok(created?.unwrap_or_else(Value::unknown))
    }

    /// The delete half of a delete-then-create replacement, here, before the create.
    async fn delete_first(
        &self,
        ex: &Executor,
        ctx: &Arc<Ctx>,
        prior: ResourceObject,
        old_world: Option<Value>,
    ) -> Result<(), Diagnostics> {
        let addr = self.t.addr();
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
                                "Configuring {} as recorded in state to delete {addr}: {e}",
                                prior.provider.addr
                            ),
                        )
                        .with_address(addr),
                    )
                })?,
            None => self.c.clone(),
        };
        let request = ApplyRequest::Delete {
            type_: self.t.inst.key.type_.clone(),
            prior: Value::from_stored(&prior.attrs),
        };
        Operation {
            addr,
            deposed: None,
            provider: prior.provider.clone(),
            prior: Some(prior),
            deps: Vec::new(),
            planned: None,
            provision: Some(&self.t.inst.rep),
        }
        .run(request, &ex.rec, ctx, &deleter)
        .await?;
        Ok(())
    }

    /// The first half of a create-before-destroy replacement: the current object becomes
    /// deposed (its delete is a `Destroy` node of its own). Returns its key.
    async fn depose(&self, ex: &Executor) -> Result<String, Diagnostics> {
        let key = ex
            .deposed_keys
            .get(self.t.addr())
            .cloned()
            .unwrap_or_else(|| "00000000".to_string());
        ex.rec
            .record(EventBody::ObjectDeposed {
                addr: self.t.addr().clone(),
                key: key.clone(),
            })
            .await?;
        Ok(key)
    }

    /// The replacement failed and left no object: the deposed object is current again, as
    /// Terraform restores it (a partial object stays current, tainted, and the deposed one
    /// is deleted by the next plan).
    async fn restore(&self, ex: &Executor, key: String) -> Result<(), Diagnostics> {
        let addr = self.t.addr();
        let nothing = ex.rec.journal.with_snapshot(|s| {
            s.resources
                .get(addr)
                .is_some_and(|r| r.current.is_none() && r.deposed.contains_key(&key))
        });
        if nothing {
            ex.rec
                .record(EventBody::ObjectRestored {
                    addr: addr.clone(),
                    key,
                })
                .await?;
        }
        Ok(())
    }
}

impl Read<'_> {
    /// `Read`: a plan-time result recorded, a deferred read made now (its result must agree
    /// with what the plan knew), or, with nothing planned, what state holds.
    async fn execute(self, ex: &Executor, ctx: &Arc<Ctx>) -> Result<Value, Diagnostics> {
        let inst = &self.inst;
        let slot = ctx
            .provider_slot(&inst.provider)
            .ok_or_else(|| missing_provider(&inst.provider, &inst.addr))?;
        match self.how {
            ReadHow::Recorded(read) => {
                // Read during the plan: not repeated.
                self.record(ex, &slot, &read.result)?;
                Ok(read.result.clone())
            }
            ReadHow::Now(change) => self.read_now(ex, ctx, &slot, change).await,
            ReadHow::FromState => Ok(ex
                .rec
                .journal
                .with_snapshot(|s| s.data.get(&inst.addr).map(|d| Value::from_stored(&d.attrs)))
                .unwrap_or_else(Value::unknown)),
        }
    }

    async fn read_now(
        &self,
        ex: &Executor,
        ctx: &Arc<Ctx>,
        slot: &ProviderSlot,
        change: &Change,
    ) -> Result<Value, Diagnostics> {
        let inst = &self.inst;
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
        .map_err(|e| provider_failure(ctx, &inst.addr, "read", &e));
        let result = match result {
            Ok(r) => r,
            Err(d) if check_scoped_failure(ctx, inst, d.clone()) => {
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
        self.record(ex, slot, &result)?;
        Ok(result)
    }

    /// `DataRead`, counted as read.
    fn record(
        &self,
        ex: &Executor,
        slot: &ProviderSlot,
        result: &Value,
    ) -> Result<(), Diagnostics> {
        let inst = &self.inst;
        let attrs = result.to_stored().map_err(|e| {
            Diagnostics::from(
                Diagnostic::error(
                    "Data source returned an unknown value",
                    format!("{}: {e}", inst.addr),
                )
                .with_address(&inst.addr),
            )
        })?;
        ex.rec.append(EventBody::DataRead {
            addr: inst.addr.clone(),
            object: DataObject {
                attrs,
                provider: ProviderRef::new(
                    inst.provider.clone(),
                    slot.id.clone().unwrap_or_default(),
                ),
            },
        })?;
        ex.rec.read();
        Ok(())
    }
}

impl Delete {
    /// `Delete`, `DeposedDelete`: the object (if still there) deleted through the provider
    /// instance recorded in state, configured as recorded.
    async fn execute(self, ex: &Executor, ctx: &Arc<Ctx>) -> Result<(), Diagnostics> {
        let addr = &self.addr;
        let object = ex.rec.journal.with_snapshot(|s| {
            let inst = s.resources.get(addr)?;
            match &self.deposed {
                None => inst.current.clone(),
                Some(k) => inst.deposed.get(k).cloned(),
            }
        });
        let Some(object) = object else { return Ok(()) };
        let info = &self.info;
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
        delete_object(ex, ctx, &c, addr, self.deposed.clone(), object).await
    }
}

/// Deletes one object through `c`, running its destroy-time provisioners.
async fn delete_object(
    ex: &Executor,
    ctx: &Arc<Ctx>,
    c: &Arc<dyn Configured>,
    addr: &ResourceInstanceAddr,
    deposed: Option<String>,
    object: ResourceObject,
) -> Result<(), Diagnostics> {
    let request = ApplyRequest::Delete {
        type_: addr.resource.type_.clone(),
        prior: Value::from_stored(&object.attrs),
    };
    Operation {
        addr,
        deposed,
        provider: object.provider.clone(),
        prior: Some(object),
        deps: Vec::new(),
        planned: None,
        provision: Some(&rep_of(addr)),
    }
    .run(request, &ex.rec, ctx, c)
    .await?;
    Ok(())
}

/// A provider instance whose configuration the walk has evaluated: registered when new,
/// updated when its configuration changed, replaced when `diff_config` says so.
pub(crate) struct ProviderStep<'a> {
    pub addr: &'a ProviderAddr,
    pub config: Value,
    pub is_default: bool,
}

impl ProviderStep<'_> {
    pub(crate) async fn execute(self, ex: &Executor, ctx: &Arc<Ctx>) -> Result<(), Diagnostics> {
        let (addr, config) = (self.addr, &self.config);
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
        let configured = ctx.configure_provider(addr, config).await?;
        // What the state keeps: no ephemeral argument.
        let recorded = ctx.recordable_provider_config(addr, config);
        let stored = recorded.to_stored().expect("checked known");
        let in_state = ex
            .rec
            .journal
            .with_snapshot(|s| s.providers.get(addr).cloned());
        let id = match in_state {
            None => self.register(ex, stored).await?,
            Some(old) => match package.diff_config(&Value::from_stored(&old.config), &recorded) {
                ConfigDiff::NoChange => old.id,
                ConfigDiff::Update => {
                    ex.rec
                        .record(EventBody::ProviderUpdated {
                            addr: addr.clone(),
                            id: old.id.clone(),
                            config: stored.clone(),
                        })
                        .await?;
                    old.id
                }
                ConfigDiff::Replace(_) => self.replace(ex, ctx, &old, stored).await?,
            },
        };
        ctx.set_provider_slot(ProviderSlot {
            addr: addr.clone(),
            package: addr.package.clone(),
            config: self.config,
            state: ProviderState::Configured(configured),
            id: Some(id),
        });
        Ok(())
    }

    /// `ProviderRegistered` under a new instance id.
    async fn register(
        &self,
        ex: &Executor,
        config: cairn_state::StoredValue,
    ) -> Result<String, Diagnostics> {
        let id = new_instance_id(&self.addr.package);
        ex.rec
            .record(EventBody::ProviderRegistered {
                instance: ProviderInstance {
                    addr: self.addr.clone(),
                    id: id.clone(),
                    config,
                    is_default: self.is_default,
                },
            })
            .await?;
        Ok(id)
    }

    /// The instance is replaced. Objects the plan knew to replace were deleted before this
    /// node (graph edges). Those it could not know about — its configuration was unknown
    /// until now — are deleted here, in the old world, before the new instance takes the
    /// address (so no object ever names an unregistered instance); their resources then
    /// create in the new one.
    async fn replace(
        &self,
        ex: &Executor,
        ctx: &Arc<Ctx>,
        old: &ProviderInstance,
        config: cairn_state::StoredValue,
    ) -> Result<String, Diagnostics> {
        delete_under(ex, ctx, old).await?;
        // Data results read through the old instance leave state with it (the data sources
        // are read again through the new one): otherwise, from the new instance's
        // registration until that read, state would hold a result naming an unregistered
        // instance (found by the p13 property).
        let stale: Vec<ResourceInstanceAddr> = ex.rec.journal.with_snapshot(|s| {
            s.data
                .iter()
                .filter(|(_, d)| d.provider.addr == old.addr && d.provider.id == old.id)
                .map(|(a, _)| a.clone())
                .collect()
        });
        for addr in stale {
            ex.rec.append(EventBody::DataDropped { addr })?;
        }
        self.register(ex, config).await
    }
}

/// Deletes every object still managed by provider instance `old` — current and deposed
/// (the old object of a create-before-destroy replacement that the instance's new
/// configuration reads) — with the configuration recorded for it, dependents before their
/// dependencies.
async fn delete_under(
    ex: &Executor,
    ctx: &Arc<Ctx>,
    old: &ProviderInstance,
) -> Result<(), Diagnostics> {
    type Left = (ResourceInstanceAddr, Option<String>, ResourceObject);
    let mut left: Vec<Left> = ex.rec.journal.with_snapshot(|s| {
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
        delete_object(ex, ctx, &c, &addr, deposed, obj).await?;
    }
    Ok(())
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

/// The final plan must agree with every value the saved plan knew.
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

/// The `count.index` / `each.key` of an instance from its address (`each.value` is not
/// known when only the address is: destroy-time provisioners may not use it).
fn rep_of(addr: &ResourceInstanceAddr) -> Repetition {
    match &addr.key {
        Some(crate::addr::InstanceKey::Int(i)) => Repetition::Count(*i),
        Some(crate::addr::InstanceKey::Str(k)) => Repetition::Each(k.clone(), Value::unknown()),
        None => Repetition::None,
    }
}
