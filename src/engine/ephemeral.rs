//! Ephemeral resources (`ephemeral "TYPE" "NAME"`, Terraform 1.10): opened by the plan walk
//! and again by the apply walk when their configuration is known, renewed while the walk
//! lasts when the provider asks (`renew_at`), closed when it ends. Their values live only in
//! the walk's values: never in a `Change`, an event, a saved plan or state.
//!
//! A configuration not known yet (or a provider whose configuration is not) defers the open,
//! as a data source's read is deferred: the value is the schema's shape with every computed
//! attribute unknown, and apply opens it with the final configuration.
//!
//! Each walk that opens ephemeral resources owns one `Ephemerals` (the plan and apply phases
//! hold it); `close_all` runs after the walk.

use super::core::{plan_without_provider, Ctx, Instance, ProviderState};
use super::observer::{EphemeralStep, Progress};
use super::provider_diags::{provider_diag, provider_failure};
use super::rules::missing_provider;
use crate::addr::{Mode, ResourceInstanceAddr};
use crate::diag::{Diagnostic, Diagnostics};
use crate::provider::Configured;
use crate::value::Value;
use std::sync::{Arc, Mutex};
use std::time::{Instant, SystemTime};

/// One opened ephemeral resource instance, until it is closed.
struct OpenInstance {
    addr: ResourceInstanceAddr,
    type_: String,
    provider: Arc<dyn Configured>,
    /// The provider's private bytes, replaced by each renewal.
    private: Arc<Mutex<Option<Vec<u8>>>>,
    /// The renewal loop, when the provider asked for one.
    renewer: Option<tokio::task::JoinHandle<()>>,
}

/// The ephemeral resource instances one walk opened.
#[derive(Default)]
pub(crate) struct Ephemerals {
    open: Mutex<Vec<OpenInstance>>,
}

impl Ephemerals {
    /// An ephemeral instance reached by the walk: its value for the expressions that refer
    /// to it (unknown where it cannot be opened yet).
    pub(crate) async fn open(&self, ctx: &Arc<Ctx>, inst: Instance) -> Result<Value, Diagnostics> {
        let slot = ctx
            .provider_slot(&inst.provider)
            .ok_or_else(|| missing_provider(&inst.provider, &inst.addr))?;
        validate(ctx, &slot.package, &inst).await?;
        let deferred = || not_known_yet(&inst);
        if !inst.config.is_wholly_known() {
            return Ok(deferred());
        }
        let c = match &slot.state {
            ProviderState::Configured(c) => c.clone(),
            ProviderState::Unknown { .. } => return Ok(deferred()),
            ProviderState::Unavailable => return Err(missing_provider(&inst.provider, &inst.addr)),
        };
        ctx.observer.event(Progress::Ephemeral {
            addr: inst.addr.clone(),
            step: EphemeralStep::Opening,
        });
        let started = Instant::now();
        let opened = {
            let _permit = ctx.limits.calls.acquire().await.expect("semaphore open");
            c.open_ephemeral(&inst.key.type_, &inst.config).await
        };
        let opened = opened.map_err(|e| provider_failure(ctx, &inst.addr, "open", &e))?;
        ctx.observer.event(Progress::Ephemeral {
            addr: inst.addr.clone(),
            step: EphemeralStep::Opened(started.elapsed()),
        });
        if !opened.warnings.is_empty() {
            let diags: Diagnostics = opened
                .warnings
                .iter()
                .map(|d| provider_diag(ctx, &inst.addr, d))
                .collect();
            ctx.report(diags);
        }
        let private = Arc::new(Mutex::new(opened.private));
        let renewer = opened.renew_at.map(|at| {
            tokio::spawn(renew_loop(
                ctx.clone(),
                inst.addr.clone(),
                inst.key.type_.clone(),
                c.clone(),
                private.clone(),
                at,
            ))
        });
        self.open.lock().expect("ephemerals").push(OpenInstance {
            addr: inst.addr.clone(),
            type_: inst.key.type_.clone(),
            provider: c,
            private,
            renewer,
        });
        // What the schema marks sensitive stays so for everything derived from it.
        Ok(mark_sensitive(
            crate::value::carry_marks(&inst.config, opened.result),
            &inst.schema,
        ))
    }

    /// Closes every instance opened (renewals stop first), in the reverse order of opening;
    /// a failure to close is a warning about its instance.
    pub(crate) async fn close_all(&self, ctx: &Ctx) {
        let open = std::mem::take(&mut *self.open.lock().expect("ephemerals"));
        let mut diags = Diagnostics::new();
        for o in open.into_iter().rev() {
            if let Some(r) = &o.renewer {
                r.abort();
            }
            ctx.observer.event(Progress::Ephemeral {
                addr: o.addr.clone(),
                step: EphemeralStep::Closing,
            });
            let started = Instant::now();
            let private = o.private.lock().expect("private").take();
            match o.provider.close_ephemeral(&o.type_, private).await {
                Ok(()) => ctx.observer.event(Progress::Ephemeral {
                    addr: o.addr.clone(),
                    step: EphemeralStep::Closed(started.elapsed()),
                }),
                Err(e) => diags.push(
                    Diagnostic::warning(
                        "Failed to close ephemeral resource",
                        format!("Closing {}: {}", o.addr, e.message),
                    )
                    .with_address(&o.addr),
                ),
            }
        }
        ctx.report(diags);
    }
}

/// The provider's validation of an ephemeral configuration (`ValidateEphemeralResourceConfig`).
async fn validate(ctx: &Arc<Ctx>, package: &str, inst: &Instance) -> Result<(), Diagnostics> {
    let Some(p) = ctx.registry.package(package).cloned() else {
        return Ok(());
    };
    let found = {
        let _permit = ctx.limits.calls.acquire().await.expect("semaphore open");
        p.validate_config_async(Mode::Ephemeral, &inst.key.type_, &inst.config)
            .await
    };
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

/// Renews the instance each time the provider's `renew_at` comes, for as long as the walk
/// lasts (the loop is aborted when the instance is closed). A failed renewal is a warning:
/// the value already handed out stays what it is.
async fn renew_loop(
    ctx: Arc<Ctx>,
    addr: ResourceInstanceAddr,
    type_: String,
    c: Arc<dyn Configured>,
    private: Arc<Mutex<Option<Vec<u8>>>>,
    mut at: SystemTime,
) {
    loop {
        let wait = at.duration_since(SystemTime::now()).unwrap_or_default();
        tokio::time::sleep(wait).await;
        ctx.observer.event(Progress::Ephemeral {
            addr: addr.clone(),
            step: EphemeralStep::Renewing,
        });
        let current = private.lock().expect("private").clone();
        match c.renew_ephemeral(&type_, current).await {
            Ok(r) => {
                *private.lock().expect("private") = r.private;
                match r.renew_at {
                    Some(next) => at = next,
                    None => return,
                }
            }
            Err(e) => {
                ctx.report(
                    Diagnostic::warning(
                        "Failed to renew ephemeral resource",
                        format!("Renewing {addr}: {}", e.message),
                    )
                    .with_address(&addr)
                    .into(),
                );
                return;
            }
        }
    }
}

/// An instance's value before its provider answers: its configuration, every computed
/// attribute unknown.
pub(crate) fn not_known_yet(inst: &Instance) -> Value {
    let mut v = plan_without_provider(&inst.schema, &inst.config);
    if let Value::Object(m) = &mut v {
        for (k, a) in &inst.schema.attributes {
            if a.computed {
                m.insert(k.clone(), Value::Unknown(a.ty.clone()));
            }
        }
    }
    v
}

/// The top-level attributes the schema marks sensitive, marked.
pub(crate) fn mark_sensitive(v: Value, schema: &crate::schema::Block) -> Value {
    match v {
        Value::Object(mut m) => {
            for (k, a) in &schema.attributes {
                if a.sensitive {
                    if let Some(x) = m.remove(k) {
                        m.insert(k.clone(), x.sensitive());
                    }
                }
            }
            Value::Object(m)
        }
        v => v,
    }
}
