//! Pending operations: an operation that started (and was flushed) but has no outcome, because
//! the run that started it died. The next command that opens the state reports each one and
//! resolves it:
//! - a create: ask the provider for the object made under the recorded create token
//!   (`find_by_token`): found → adopted into state; not found → dropped;
//! - an update or delete: refresh the object: present → kept with what the world holds now;
//!   gone → removed.
//!
//! Nothing the cloud holds is ever forgotten. Writing commands record the resolutions as
//! `PendingResolved` events; `plan` resolves them in memory only.

use super::journal::Journal;
use super::providers::Registry;
use crate::diag::{Diagnostic, Diagnostics};
use crate::value::Value;
use cairn_state::{EventBody, OpAction, PendingOp, ResourceObject, Snapshot};
use std::sync::Arc;

/// One pending operation and how it was resolved.
pub(crate) struct Resolution {
    pub event: EventBody,
    /// A sentence for the user.
    pub message: String,
}

/// Resolves every pending operation in `snapshot` (without recording anything).
pub(crate) async fn resolve(
    snapshot: &Snapshot,
    registry: &Arc<Registry>,
) -> (Vec<Resolution>, Vec<Diagnostic>) {
    let mut out = Vec::new();
    let mut diags = Vec::new();
    for pending in snapshot.pending.values() {
        match resolve_one(snapshot, registry, pending).await {
            Ok(r) => out.push(r),
            Err(d) => diags.push(d),
        }
    }
    (out, diags)
}

/// Resolves one pending operation: configures its provider instance from state, then asks
/// what became of the object.
async fn resolve_one(
    snapshot: &Snapshot,
    registry: &Arc<Registry>,
    pending: &PendingOp,
) -> Result<Resolution, Diagnostic> {
    let addr = &pending.addr;
    let Some(inst) = snapshot.providers.get(&pending.provider.addr) else {
        return Err(Diagnostic::error(
            "Cannot resolve a pending operation",
            format!("The interrupted operation on {addr} used {}, which is not in state. Run `cairn state check`.", pending.provider.addr),
        )
        .with_address(addr));
    };
    let configured = registry
        .configure(
            &pending.provider.addr.package,
            &Value::from_stored(&inst.config),
        )
        .await
        .map_err(|e| {
            Diagnostic::error(
                "Cannot resolve a pending operation",
                format!("Configuring {} for {addr}: {e}", pending.provider.addr),
            )
            .with_address(addr)
        })?;
    let type_ = &addr.resource.type_;
    let mut meta = cairn_state::ObjectMeta::default();
    let (object, how): (Option<Value>, &str) = match pending.action {
        OpAction::Create => match &pending.token {
            Some(token) => match configured.find_by_token(type_, token).await {
                Ok(Some(v)) => (Some(v), "adopted the object it created"),
                Ok(None) => (None, "it created nothing; dropped"),
                Err(e) => {
                    return Err(Diagnostic::error(
                        "Cannot resolve a pending create",
                        format!("{addr}: {e}"),
                    )
                    .with_address(addr));
                }
            },
            None => (None, "it had no create token; dropped"),
        },
        OpAction::Update | OpAction::Delete => {
            let Some(prior) = &pending.prior else {
                return Ok(Resolution {
                    event: EventBody::PendingResolved {
                        op: pending.op,
                        object: None,
                        how: "no prior object".into(),
                    },
                    message: format!(
                        "{addr}: an interrupted {:?} had no prior object; nothing to resolve",
                        pending.action
                    ),
                });
            };
            match configured
                .read_object(type_, &Value::from_stored(&prior.attrs), &prior.meta)
                .await
            {
                Ok(Some((v, m))) => {
                    meta = m;
                    (Some(v), "refreshed the object")
                }
                Ok(None) => (None, "the object is gone; removed"),
                Err(e) => {
                    return Err(Diagnostic::error(
                        "Cannot resolve a pending operation",
                        format!("Refreshing {addr}: {e}"),
                    )
                    .with_address(addr));
                }
            }
        }
    };
    let object = match object.map(|v| v.to_stored()) {
        Some(Ok(attrs)) => Some(ResourceObject {
            attrs,
            deps: pending
                .prior
                .as_ref()
                .map(|p| p.deps.clone())
                .unwrap_or_default(),
            provider: pending.provider.clone(),
            create_token: pending
                .token
                .clone()
                .or(pending.prior.as_ref().and_then(|p| p.create_token.clone())),
            tainted: false,
            meta,
        }),
        Some(Err(e)) => {
            return Err(Diagnostic::error(
                "Provider returned an unknown value",
                format!("{addr}: {e}"),
            )
            .with_address(addr));
        }
        None => None,
    };
    let action = format!("{:?}", pending.action).to_lowercase();
    Ok(Resolution {
        message: format!(
            "{addr}: an interrupted {action} (run {}) was resolved: {how}",
            pending.run
        ),
        event: EventBody::PendingResolved {
            op: pending.op,
            object,
            how: how.to_string(),
        },
    })
}

/// Resolves pending operations in memory (`record == None`) or recording them.
pub(crate) async fn recover(
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
