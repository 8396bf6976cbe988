//! One provider call that changes the world, between its operation records.
//!
//! Durability: before every create, update or delete an `OperationStarted` event (with a create
//! token for creates) is appended and flushed; after it, the outcome. A failed operation
//! records what the provider reports (a partial create is kept, tainted). Provisioners run
//! around the call: destroy-time ones before a delete (a failure keeps the object),
//! creation-time ones once a created object exists (a failure keeps it tainted).
//!
//! Every step writes through a [`Recorder`]: the journal and the run's summary.

use crate::addr::ResourceInstanceAddr;
use crate::diag::{Diagnostic, Diagnostics};
use crate::engine::core::{contradiction, Ctx};
use crate::engine::journal::Journal;
use crate::engine::observer::Progress;
use crate::engine::provider_diags::{provider_diag, provider_failure};
use crate::engine::sabotage::Sabotage;
use crate::engine::values::Repetition;
use crate::plan::Action;
use crate::provider::{Applied, ApplyRequest, Configured, ProviderError};
use crate::value::carry_marks;
use crate::value::Value;
use cairn_state::{EventBody, ObjectMeta, OpAction, ProviderRef, ResourceObject, RunSummary};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The summary of the error of an operation the stop kept from starting (never shown: the
/// interrupt message counts it).
const NOT_STARTED: &str = "Operation not started";

/// Where the steps of an apply write: the journal, and the run's summary (what was added,
/// changed, destroyed, imported and read, and how many steps failed).
pub(crate) struct Recorder {
    pub journal: Arc<Journal>,
    pub summary: Mutex<RunSummary>,
    /// What the operations did around a stop (Ctrl-C), for the one interrupt message.
    pub interruption: Mutex<Interruption>,
}

/// The operations of an apply as an interrupt sees them: those finished before it, those
/// running when it came (and how each ended), and those that were waiting for their turn
/// and never started (they call no provider and report no error of their own).
/// How many operations of each kind the interrupt message names (the rest are counted).
pub(crate) const LISTED: usize = 20;

#[derive(Default)]
pub(crate) struct Interruption {
    /// Finished before the stop: "sim_thing.a created", the first [`LISTED`] of them (the
    /// message names no more; a large apply finishes every step without a stop, and kept a
    /// string for each), and how many in all.
    pub finished: Vec<String>,
    pub finished_total: usize,
    /// Running when the stop came, and how each ended: "sim_thing.b (create failed: …)".
    pub running: Vec<String>,
    /// Waiting for their turn when the stop came: never started.
    pub never_started: Vec<String>,
}

impl Recorder {
    pub(crate) fn new(journal: Arc<Journal>) -> Self {
        Recorder {
            journal,
            summary: Mutex::new(RunSummary::default()),
            interruption: Mutex::new(Interruption::default()),
        }
    }

    fn tally(&self, f: impl FnOnce(&mut RunSummary)) {
        f(&mut self.summary.lock().expect("summary lock"));
    }

    fn count(&self, action: OpAction) {
        self.tally(|s| match action {
            OpAction::Create => s.added += 1,
            OpAction::Update => s.changed += 1,
            OpAction::Delete => s.destroyed += 1,
        });
    }

    pub(crate) fn interrupted(&self, f: impl FnOnce(&mut Interruption)) {
        f(&mut self.interruption.lock().expect("interruption lock"));
    }

    pub(crate) fn error(&self) {
        self.tally(|s| s.errors += 1);
    }

    pub(crate) fn imported(&self) {
        self.tally(|s| s.imported += 1);
    }

    pub(crate) fn read(&self) {
        self.tally(|s| s.read += 1);
    }

    /// Records an event and waits until it is durable.
    pub(crate) async fn record(&self, body: EventBody) -> Result<u64, Diagnostics> {
        self.journal.record(body).await.map_err(Diagnostics::from)
    }

    /// Appends an event (durable at the next commit).
    pub(crate) fn append(&self, body: EventBody) -> Result<u64, Diagnostics> {
        self.journal.append(body).map_err(Diagnostics::from)
    }
}

/// One provider apply of one object: what is recorded around it (the request itself is
/// [`Operation::run`]'s argument).
pub(crate) struct Operation<'a> {
    pub addr: &'a ResourceInstanceAddr,
    /// The deposed object operated on; `None`: the current one.
    pub deposed: Option<String>,
    /// The provider instance recorded with the object.
    pub provider: ProviderRef,
    /// The object before the operation (its meta goes to the provider).
    pub prior: Option<ResourceObject>,
    /// The instances the object depends on, recorded with it.
    pub deps: Vec<ResourceInstanceAddr>,
    /// The planned value and the provider's private bytes for it (not for a delete).
    pub planned: Option<(&'a Value, &'a [u8])>,
    /// `count.index` / `each` for provisioners; `None`: none run.
    pub provision: Option<&'a Repetition>,
}

/// What the provider returned: the object's new value (marks carried from the plan), what
/// the provider keeps beside it, and how long the call took.
struct Returned {
    new_state: Option<Value>,
    meta: ObjectMeta,
    elapsed: Duration,
}

/// What an operation has recorded so far.
struct Started {
    op: u64,
    op_action: OpAction,
    action: Action,
    token: Option<String>,
    started: Instant,
}

impl Operation<'_> {
    /// Runs the operation through `c`: its records, provisioners and the provider's call.
    /// Returns the object's new value (`None`: it is gone).
    pub(crate) async fn run(
        self,
        request: ApplyRequest,
        rec: &Recorder,
        ctx: &Arc<Ctx>,
        c: &Arc<dyn Configured>,
    ) -> Result<Option<Value>, Diagnostics> {
        let who = match &self.deposed {
            Some(k) => format!("{} (deposed object {k})", self.addr),
            None => self.addr.to_string(),
        };
        let action = match &request {
            ApplyRequest::Create { .. } => OpAction::Create,
            ApplyRequest::Update { .. } => OpAction::Update,
            ApplyRequest::Delete { .. } => OpAction::Delete,
        };
        let own = format!("{}: ", self.addr);
        let result = self.started(request, rec, ctx, c).await;
        // An operation still waiting for its turn when the run was stopped never started:
        // no provider call, no error of its own (the interrupt message counts it).
        if let Err(d) = &result {
            if d.iter().any(|d| d.summary == NOT_STARTED) {
                rec.interrupted(|i| i.never_started.push(who));
                return Err(Diagnostics::new());
            }
        }
        if !ctx.limits.stopped() {
            if result.is_ok() {
                let done = match action {
                    OpAction::Create => "created",
                    OpAction::Update => "updated",
                    OpAction::Delete => "destroyed",
                };
                rec.interrupted(|i| {
                    i.finished_total += 1;
                    if i.finished.len() < LISTED {
                        i.finished.push(format!("{who} {done}"));
                    }
                });
            }
            return result;
        }
        // Running when the stop came: how it ended goes into the one interrupt message,
        // errors included (they are the provider's answer to the stop, most often).
        let verb = match action {
            OpAction::Create => "create",
            OpAction::Update => "update",
            OpAction::Delete => "delete",
        };
        let ended = match &result {
            Ok(_) => format!("{who} ({verb} finished)"),
            Err(d) => {
                let why: Vec<String> = d
                    .iter()
                    .filter(|d| d.is_error())
                    .map(|d| {
                        // The provider's words, without the address the list names already.
                        let text = if d.detail.is_empty() {
                            &d.summary
                        } else {
                            &d.detail
                        };
                        text.strip_prefix(&own).unwrap_or(text).to_string()
                    })
                    .collect();
                format!("{who} ({verb} failed: {})", why.join("; "))
            }
        };
        rec.interrupted(|i| i.running.push(ended));
        match result {
            Ok(v) => Ok(v),
            // Warnings still reach the user; the errors are in the interrupt message.
            Err(d) => Err(Diagnostics::from_iter(
                d.iter().filter(|d| !d.is_error()).cloned(),
            )),
        }
    }

    /// [`Operation::run`] once the operation has its turn.
    async fn started(
        self,
        request: ApplyRequest,
        rec: &Recorder,
        ctx: &Arc<Ctx>,
        c: &Arc<dyn Configured>,
    ) -> Result<Option<Value>, Diagnostics> {
        let s = self.start(&request, rec, ctx).await?;
        // Destroy-time provisioners run before the delete; a failure keeps the object.
        if let (OpAction::Delete, Some(rep), Some(p)) = (s.op_action, self.provision, &self.prior) {
            let this = Value::from_stored(&p.attrs);
            if let Err(d) = crate::engine::provision::run(ctx, self.addr, rep, &this, true).await {
                self.provision_failed(rec, ctx, &s, Some(p.clone()), &d)
                    .await?;
                return Err(d);
            }
        }
        let applied = self.call(request, rec, ctx, c, &s).await?;
        let elapsed = s.started.elapsed();
        let Applied {
            mut response,
            meta,
            warnings,
        } = applied;
        for w in &warnings {
            ctx.report(Diagnostics::from(provider_diag(ctx, self.addr, w)));
        }
        // (Only when there is a plan: a delete's failure returns the object it kept.)
        if let Some((p, _)) = self.planned {
            response.new_state = response.new_state.take().map(|v| carry_marks(p, v));
        }
        // Creation-time provisioners run once the object exists; a failure keeps it tainted.
        if let (None, OpAction::Create, Some(rep), Some(v)) = (
            &response.error,
            s.op_action,
            self.provision,
            &response.new_state,
        ) {
            if let Err(d) = crate::engine::provision::run(ctx, self.addr, rep, v, false).await {
                let obj = self.object(v, true, &meta, &s).ok();
                self.provision_failed(rec, ctx, &s, obj, &d).await?;
                return Err(d);
            }
        }
        let returned = Returned {
            new_state: response.new_state,
            meta,
            elapsed,
        };
        match response.error {
            None => self.succeeded(rec, ctx, &s, returned).await,
            Some(err) => self.failed(rec, ctx, &s, returned, &err).await,
        }
    }

    /// `OperationStarted`, durable, and the "Creating..." line.
    async fn start(
        &self,
        request: &ApplyRequest,
        rec: &Recorder,
        ctx: &Arc<Ctx>,
    ) -> Result<Started, Diagnostics> {
        let (op_action, action, token) = match request {
            ApplyRequest::Create { token, .. } => {
                (OpAction::Create, Action::Create, Some(token.clone()))
            }
            ApplyRequest::Update { .. } => (OpAction::Update, Action::Update, None),
            ApplyRequest::Delete { .. } => (OpAction::Delete, Action::Delete, None),
        };
        let op = rec
            .record(EventBody::OperationStarted {
                addr: self.addr.clone(),
                deposed: self.deposed.clone(),
                action: op_action,
                token: token.clone(),
                provider: self.provider.clone(),
                prior: self.prior.clone(),
            })
            .await?;
        ctx.observer.event(Progress::ApplyStart {
            addr: self.addr.clone(),
            action,
            id: self
                .prior
                .as_ref()
                .and_then(|p| p.attrs.get("id"))
                .and_then(|i| match i {
                    cairn_state::StoredValue::String(s) => Some(s.clone()),
                    _ => None,
                }),
            deposed: self.deposed.clone(),
        });
        Ok(Started {
            op,
            op_action,
            action,
            token,
            started: Instant::now(),
        })
    }

    /// The provider's call, under the semaphore, with "Still creating..." every 10 seconds.
    async fn call(
        &self,
        request: ApplyRequest,
        rec: &Recorder,
        ctx: &Arc<Ctx>,
        c: &Arc<dyn Configured>,
        s: &Started,
    ) -> Result<Applied, Diagnostics> {
        let prior_meta = self
            .prior
            .as_ref()
            .map(|p| p.meta.clone())
            .unwrap_or_default();
        let planned_private = self.planned.map(|(_, p)| p).unwrap_or(&[][..]);
        let _permit = ctx.limits.calls.acquire().await.expect("semaphore open");
        // The state storage failed while this call waited its turn: it does not start (its
        // start is in the log, so the next run resolves it as pending).
        if let Some(e) = rec.journal.failure() {
            return Err(Diagnostics::from(Diagnostic::error(
                "State storage failed",
                e,
            )));
        }
        // The run was stopped while this call waited its turn: it does not start. Its start is
        // recorded, so its outcome is too: nothing changed (the object as it was).
        if ctx.limits.stopped() {
            let object = match s.op_action {
                OpAction::Create => None,
                OpAction::Update | OpAction::Delete => self.prior.clone(),
            };
            rec.record(EventBody::OperationFailed {
                op: s.op,
                object,
                error: "not started: the run was interrupted while it waited for its turn".into(),
            })
            .await?;
            return Err(Diagnostics::from(Diagnostic::error(
                NOT_STARTED,
                format!("{} was not started: the run was interrupted.", self.addr),
            )));
        }
        let call = c.apply_object(request, &prior_meta, planned_private);
        tokio::pin!(call);
        loop {
            tokio::select! {
                r = &mut call => break Ok(r),
                _ = tokio::time::sleep(Duration::from_secs(10)) => {
                    ctx.observer.event(Progress::ApplyProgress { addr: self.addr.clone(), action: s.action, elapsed: s.started.elapsed() });
                }
            }
        }
    }

    /// The object to record for value `v` after the call.
    fn object(
        &self,
        v: &Value,
        tainted: bool,
        meta: &ObjectMeta,
        s: &Started,
    ) -> Result<ResourceObject, Diagnostics> {
        let attrs = v.to_stored().map_err(|e| {
            Diagnostics::from(
                Diagnostic::error(
                    "Provider returned an unknown value after apply",
                    format!("Provider {} returned {e} for {}. This is a bug in the provider: apply returns a wholly known state.", self.provider.addr.package, self.addr),
                )
                .with_address(self.addr),
            )
        })?;
        Ok(ResourceObject {
            attrs,
            deps: self.deps.clone(),
            provider: self.provider.clone(),
            create_token: s
                .token
                .clone()
                .or(self.prior.as_ref().and_then(|p| p.create_token.clone())),
            tainted,
            meta: meta.clone(),
        })
    }

    /// The call succeeded: `OperationSucceeded` with the new object, and the check that it
    /// keeps every value the plan knew.
    async fn succeeded(
        &self,
        rec: &Recorder,
        ctx: &Arc<Ctx>,
        s: &Started,
        returned: Returned,
    ) -> Result<Option<Value>, Diagnostics> {
        let Returned {
            new_state,
            meta,
            elapsed,
        } = returned;
        let obj = match &new_state {
            Some(v) => Some(self.object(v, false, &meta, s)?),
            None => None,
        };
        let forget = s.op_action == OpAction::Create && ctx.limits.broken(Sabotage::ForgetCreates);
        let obj = if forget { None } else { obj };
        let op = s.op;
        if ctx.limits.broken(Sabotage::SettleTwice) {
            let again = EventBody::OperationSucceeded {
                op,
                object: obj.clone(),
            };
            rec.record(again).await?;
        }
        rec.record(EventBody::OperationSucceeded { op, object: obj })
            .await?;
        rec.count(s.op_action);
        let id = new_state
            .as_ref()
            .and_then(|v| v.get("id"))
            .and_then(|i| i.as_str())
            .map(str::to_string);
        ctx.observer.event(Progress::ApplyDone {
            addr: self.addr.clone(),
            action: s.action,
            id,
            elapsed,
            deposed: self.deposed.clone(),
        });
        if let (Some((planned, _)), Some(actual)) = (self.planned, &new_state) {
            if let Some(path) = contradiction(planned, actual) {
                rec.error();
                return Err(Diagnostic::error(
                    "Provider produced inconsistent result after apply",
                    format!("When applying changes to {}, provider {} produced an unexpected new value: .{path} differs from the planned value. This is a bug in the provider; the object was recorded in state as it is.", self.addr, self.provider.addr.package),
                )
                .with_address(self.addr)
                .into());
            }
        }
        Ok(new_state)
    }

    /// The call failed: `OperationFailed` with what the provider kept.
    async fn failed(
        &self,
        rec: &Recorder,
        ctx: &Arc<Ctx>,
        s: &Started,
        returned: Returned,
        err: &ProviderError,
    ) -> Result<Option<Value>, Diagnostics> {
        let Returned {
            new_state,
            meta,
            elapsed,
        } = returned;
        let obj = match (&new_state, &self.prior) {
            // A delete that failed keeps the object as it was: its dependencies and
            // taint, with the attributes the provider reports.
            (Some(v), Some(p)) if s.op_action == OpAction::Delete => self
                .object(v, p.tainted, &meta, s)
                .ok()
                .map(|o| ResourceObject {
                    deps: p.deps.clone(),
                    ..o
                }),
            (Some(v), _) => self
                .object(v, s.op_action == OpAction::Create, &meta, s)
                .ok(),
            // A plugin whose delete failed may answer with no object at all: as Terraform
            // does, the object stays as it was (it was not deleted).
            (None, Some(p)) if s.op_action == OpAction::Delete => Some(p.clone()),
            (None, _) => None,
        };
        rec.record(EventBody::OperationFailed {
            op: s.op,
            object: obj,
            error: err.message.clone(),
        })
        .await?;
        rec.error();
        ctx.observer.event(Progress::ApplyErrored {
            addr: self.addr.clone(),
            action: s.action,
            elapsed,
            message: err.message.clone(),
            deposed: self.deposed.clone(),
        });
        let what = match s.op_action {
            OpAction::Create => "create",
            OpAction::Update => "update",
            OpAction::Delete => "delete",
        };
        Err(provider_failure(ctx, self.addr, what, err))
    }

    /// Records an operation that failed outside the provider's call (a provisioner), keeping
    /// `object` as what exists now.
    async fn provision_failed(
        &self,
        rec: &Recorder,
        ctx: &Arc<Ctx>,
        s: &Started,
        object: Option<ResourceObject>,
        diags: &Diagnostics,
    ) -> Result<(), Diagnostics> {
        let error = diags
            .iter()
            .map(|d| d.detail.clone())
            .collect::<Vec<_>>()
            .join("; ");
        rec.record(EventBody::OperationFailed {
            op: s.op,
            object,
            error: error.clone(),
        })
        .await?;
        rec.error();
        ctx.observer.event(Progress::ApplyErrored {
            addr: self.addr.clone(),
            action: s.action,
            elapsed: s.started.elapsed(),
            message: error,
            deposed: self.deposed.clone(),
        });
        Ok(())
    }
}
