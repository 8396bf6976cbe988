//! Terraform compatibility: a state file written by Terraform 1.11 (`fixtures/`, made by
//! `terraform apply` of `terraform_data` resources) imports, and exports back to the same
//! resources Terraform wrote.

use cairn_state::{export_tfstate, import_tfstate, Event, EventBody, Snapshot, StoredValue};

#[test]
fn a_terraform_written_state_round_trips() {
    let text = include_str!("fixtures/terraform_data.tfstate");
    let body = import_tfstate(text, &|_| StoredValue::Null).expect("imports");
    let EventBody::StateImported { providers, .. } = &body else {
        panic!("not an import: {body:?}")
    };
    let names: Vec<_> = providers
        .iter()
        .map(|p| format!("{} {} {}", p.addr, p.id, p.is_default))
        .collect();
    assert_eq!(names, ["provider[\"terraform\"] imported-terraform true"]);
    let mut snapshot = Snapshot::new();
    snapshot.apply(&Event {
        seq: 1,
        version: 1,
        time_ms: 0,
        run: 0,
        body,
    });
    let b0 = "terraform_data.b[0]".parse().expect("address");
    let deps: Vec<_> = snapshot
        .current(&b0)
        .expect("b[0]")
        .deps
        .iter()
        .map(|d| d.to_string())
        .collect();
    assert_eq!(deps, ["terraform_data.a"]);
    assert!(cairn_state::check::check_snapshot(&snapshot).is_empty());

    let original: serde_json::Value = serde_json::from_str(text).expect("json");
    let exported = export_tfstate(&snapshot, "437e2173-b3b8-6b60-e935-4ca089db32e9", 4);
    assert_eq!(exported["resources"], original["resources"]);
    assert_eq!(exported["lineage"], original["lineage"]);
    assert_eq!(exported["version"], 4);
}
