//! `cairn taint` / `untaint` as state edits: what marking (or unmarking) one instance's current
//! object tainted records, or why the state refuses it, with Terraform's messages.
//!
//! A tainted object is the one `tainted` flag a partial create already sets (`ResourceObject::
//! tainted`), so the plan replaces it the same way ("is tainted, so must be replaced"). The
//! edit is a `ResourceTainted` / `ResourceUntainted` event in a run of its own
//! (`edit::state_edit`), so `history` and `log` say who tainted what and when.
//!
//! `-allow-missing` turns a missing instance into nothing to do: no events (and no run; the
//! CLI prints Terraform's warning).

use crate::addr::ResourceInstanceAddr;
use crate::diag::Diagnostic;
use cairn_state::{EventBody, Snapshot};

/// The events `taint` (`taint = true`) or `untaint` makes of `snap`, or why the state refuses.
pub(super) fn prepare(
    snap: &Snapshot,
    addr: &ResourceInstanceAddr,
    taint: bool,
    allow_missing: bool,
) -> Result<Vec<EventBody>, Diagnostic> {
    if snap.resources.is_empty() && snap.data.is_empty() {
        if allow_missing {
            return Ok(Vec::new());
        }
        return Err(Diagnostic::error(
            "No such resource instance",
            "The state currently contains no resource instances whatsoever. This may occur if the configuration has never been applied or if it has recently been destroyed.",
        ));
    }
    let Some(inst) = snap.resources.get(addr) else {
        if allow_missing {
            return Ok(Vec::new());
        }
        return Err(Diagnostic::error(
            "No such resource instance",
            format!(
                "There is no resource instance in the state with the address {addr}. If the resource configuration has just been added, you must run \"cairn apply\" once to create the corresponding instance(s) before they can be tainted."
            ),
        ));
    };
    let Some(obj) = &inst.current else {
        let detail = if inst.deposed.is_empty() {
            format!("Resource instance {addr} does not currently have a remote object associated with it, so it cannot be tainted.")
        } else {
            format!("Resource instance {addr} is currently part-way through a create_before_destroy replacement action. Run \"cairn apply\" to complete its replacement before tainting it.")
        };
        return Err(Diagnostic::error("No such resource instance", detail));
    };
    if taint {
        // Tainting a tainted object again is no error (Terraform writes it again); the log
        // records the request all the same.
        return Ok(vec![EventBody::ResourceTainted { addr: addr.clone() }]);
    }
    if !obj.tainted {
        return Err(Diagnostic::error(
            "Resource instance is not tainted",
            format!(
                "Resource instance {addr} is not currently tainted, and so it cannot be untainted."
            ),
        ));
    }
    Ok(vec![EventBody::ResourceUntainted { addr: addr.clone() }])
}

#[cfg(test)]
mod tests {
    use super::*;
    use cairn_state::{Event, ProviderRef, ResourceObject, StoredValue};

    fn snap_with(tainted: bool) -> Snapshot {
        let mut s = Snapshot::new();
        s.apply(&Event {
            seq: 1,
            version: cairn_state::event::CURRENT_VERSION,
            time_ms: 0,
            run: 0,
            body: EventBody::StateImported {
                source: "test".into(),
                providers: vec![],
                resources: vec![(
                    "sim_thing.a".parse().unwrap(),
                    ResourceObject {
                        attrs: StoredValue::Null,
                        deps: vec![],
                        provider: ProviderRef::new(
                            "provider[\"sim\"]".parse().unwrap(),
                            "p".into(),
                        ),
                        create_token: None,
                        tainted,
                        meta: Default::default(),
                    },
                )],
            },
        });
        s
    }

    #[test]
    fn taint_untaint_and_their_refusals() {
        let a: ResourceInstanceAddr = "sim_thing.a".parse().unwrap();
        let zz: ResourceInstanceAddr = "sim_thing.zz".parse().unwrap();
        let s = snap_with(false);
        assert!(matches!(
            prepare(&s, &a, true, false).unwrap().as_slice(),
            [EventBody::ResourceTainted { .. }]
        ));
        let e = prepare(&s, &a, false, false).unwrap_err();
        assert_eq!(e.summary, "Resource instance is not tainted");
        assert_eq!(
            prepare(&s, &zz, true, false).unwrap_err().summary,
            "No such resource instance"
        );
        assert!(prepare(&s, &zz, true, true).unwrap().is_empty());
        let e = prepare(&Snapshot::new(), &a, true, false).unwrap_err();
        assert!(e.detail.contains("no resource instances whatsoever"));
        let t = snap_with(true);
        assert!(matches!(
            prepare(&t, &a, false, false).unwrap().as_slice(),
            [EventBody::ResourceUntainted { .. }]
        ));
        // The fold marks and unmarks the object.
        let mut s = snap_with(false);
        for (seq, body) in [
            (2, EventBody::ResourceTainted { addr: a.clone() }),
            (3, EventBody::ResourceUntainted { addr: a.clone() }),
        ] {
            s.apply(&Event {
                seq,
                version: cairn_state::event::CURRENT_VERSION,
                time_ms: 0,
                run: 0,
                body,
            });
            assert_eq!(s.current(&a).unwrap().tainted, seq == 2);
        }
    }
}
