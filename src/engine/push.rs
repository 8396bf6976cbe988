//! `cairn state push FILE` and `cairn state replace-provider FROM TO` as state edits: what
//! they record, or why the state refuses them, with Terraform's checks and words.
//!
//! **push** replaces the whole state with a Terraform state (version 4): every instance and
//! provider instance of the current state is forgotten (`ResourceForgotten`,
//! `ProviderRemoved`), then the pushed state is imported (`StateImported`, `OutputsSet`), all
//! in one run, so `history` shows the push and `-at` still reaches the state before it. As
//! Terraform's `statemgr.CheckValidImport`, unless `-force`: an empty state takes anything;
//! otherwise the pushed lineage must be the state's (`state pull` prints it) and its serial
//! newer than the state's (its last event's sequence number, the serial `state pull` gives),
//! or equal with the same content.
//!
//! **replace-provider**: Cairn's state names a provider by its type (the last segment of its
//! source address, as `state import-tfstate` reads Terraform's); the source is the
//! configuration's `required_providers`. The objects whose provider is FROM's type are
//! replaced: renamed to TO's type when that differs (`ProviderReplaced`: provider instances
//! and objects move to the new package), recorded as the user's decision when it does not.

use super::terraform_state::TfImport;
use crate::diag::Diagnostic;
use cairn_state::{EventBody, Snapshot};
use std::collections::BTreeSet;

/// What `state push` was given besides the state itself.
pub(crate) struct Push {
    pub import: TfImport,
    /// The pushed state's `lineage` and `serial` (`None`: it has none).
    pub lineage: Option<String>,
    pub serial: u64,
    /// The pushed document's `resources` and `outputs`, to compare with the state's at an
    /// equal serial.
    pub content: serde_json::Value,
    pub force: bool,
}

/// The events `state push` makes of `snap` (whose lineage is `lineage`), or why it refuses.
pub(super) fn prepare_push(
    snap: &Snapshot,
    lineage: &str,
    push: Push,
) -> Result<Vec<EventBody>, Diagnostic> {
    let empty = snap.resources.is_empty() && snap.data.is_empty() && snap.outputs.is_empty();
    if !push.force && !empty {
        check_valid_import(snap, lineage, &push)?;
    }
    let mut events: Vec<EventBody> = snap
        .resources
        .keys()
        .chain(snap.data.keys())
        .map(|addr| EventBody::ResourceForgotten { addr: addr.clone() })
        .collect();
    events.extend(snap.providers.values().map(|p| EventBody::ProviderRemoved {
        addr: p.addr.clone(),
        id: p.id.clone(),
    }));
    events.push(push.import.event);
    events.push(EventBody::OutputsSet {
        outputs: push.import.outputs,
    });
    Ok(events)
}

/// Terraform's rules for pushing over a state that is not empty.
fn check_valid_import(snap: &Snapshot, lineage: &str, push: &Push) -> Result<(), Diagnostic> {
    let refuse = |why: String| {
        Diagnostic::error(
            "Failed to write state",
            format!("{why}. Use -force to write it anyway (`cairn state pull` prints the state's lineage and serial)."),
        )
    };
    let Some(new_lineage) = push.lineage.as_deref().filter(|l| !l.is_empty()) else {
        // A state without a lineage (legacy): anything goes, as in Terraform.
        return Ok(());
    };
    if new_lineage != lineage {
        return Err(refuse(format!(
            "cannot import state with lineage {new_lineage:?} over unrelated state with lineage {lineage:?}"
        )));
    }
    let serial = snap.head;
    if push.serial > serial {
        return Ok(());
    }
    if push.serial < serial {
        return Err(refuse(format!(
            "cannot import state with serial {} over newer state with serial {serial}",
            push.serial
        )));
    }
    let current = super::terraform_state::export(snap, lineage);
    let same = ["resources", "outputs"].iter().all(|k| {
        let norm = |v: &serde_json::Value| match v {
            serde_json::Value::Null => serde_json::json!([]),
            serde_json::Value::Object(m) if m.is_empty() => serde_json::json!([]),
            v => v.clone(),
        };
        norm(&current[*k]) == norm(&push.content[*k])
    });
    if same {
        return Ok(());
    }
    Err(refuse(format!(
        "cannot overwrite existing state with serial {serial} with a different state that has the same serial"
    )))
}

/// The resources (`sim_thing.c`, once for all its instances) whose objects a provider
/// replacement from package `from` changes, in address order.
pub(crate) fn replaced_resources(snap: &Snapshot, from: &str) -> Vec<String> {
    let mut out: BTreeSet<String> = BTreeSet::new();
    for (addr, inst) in &snap.resources {
        if inst.objects().any(|o| o.provider.addr.package == from) {
            out.insert(addr.resource.to_string());
        }
    }
    for (addr, d) in &snap.data {
        if d.provider.addr.package == from {
            out.insert(addr.resource.to_string());
        }
    }
    out.into_iter().collect()
}

/// The events `state replace-provider` makes: one `ProviderReplaced`, or none when nothing in
/// the state is under `from` (Terraform's "No matching resources found.").
pub(super) fn prepare_replace(
    snap: &Snapshot,
    from: &str,
    to: &str,
    source: &str,
) -> Vec<EventBody> {
    if replaced_resources(snap, from).is_empty() {
        return Vec::new();
    }
    vec![EventBody::ProviderReplaced {
        from: from.to_string(),
        to: to.to_string(),
        source: source.to_string(),
    }]
}
