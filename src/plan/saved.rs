//! Saved plan files (`plan -out=FILE`, `apply FILE`, `show FILE`, `cairn ui -plan FILE`).
//!
//! A saved plan is JSON: `{"cairn_plan_format": 2, "cairn_version", "plan"}` with the `Plan`
//! serialized by serde (unknowns included). JSON keeps it inspectable with ordinary tools;
//! `cairn show -json FILE` gives the Terraform-shaped view.
//!
//! With plan encryption (`terraform { encryption { plan { … } } }`), the file is that JSON
//! sealed with the plan's primary method (see `cairn_state::crypt`): nothing in it is
//! readable without the key, and a plan file is read only with one of the plan's methods.

use super::Plan;
use crate::diag::Diagnostic;
use cairn_state::crypt::Encryption;
use serde_json::{json, Value as J};
use std::path::Path;

/// The version of the saved plan format this Cairn writes and reads.
pub const PLAN_FORMAT: u64 = 2;

/// Writes a plan for `apply FILE`.
/// With `enc`, the file is sealed with its primary method.
pub fn save_plan(path: &Path, plan: &Plan, enc: Option<&Encryption>) -> Result<(), Diagnostic> {
    let doc = json!({
        "cairn_plan_format": PLAN_FORMAT,
        "cairn_version": env!("CARGO_PKG_VERSION"),
        // Who made it, where and when (shown by `cairn ui` beside the plan's state position).
        "made": {
            "time_ms": std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_millis() as u64)
                .unwrap_or(0),
            "user": cairn_state::current_user(),
            "host": cairn_state::host_name(),
        },
        "plan": plan,
    });
    let text = serde_json::to_string(&doc).map_err(|e| {
        Diagnostic::error(
            "Failed to write plan file",
            format!("Encoding the plan: {e}."),
        )
    })?;
    let bytes = match enc {
        Some(e) => e.seal(text.as_bytes()).map_err(|m| {
            Diagnostic::error(
                "Failed to write plan file",
                format!("Encrypting the plan: {m}."),
            )
        })?,
        None => text.into_bytes(),
    };
    std::fs::write(path, bytes).map_err(|e| {
        Diagnostic::error(
            "Failed to write plan file",
            format!("Writing {}: {e}.", path.display()),
        )
    })
}

/// Reads a plan saved by `plan -out=FILE`.
/// With `enc`, a sealed file is opened with its methods (an unencrypted one is read only
/// when they include `unencrypted`); without, a sealed file is an error naming its key.
pub fn load_plan(path: &Path, enc: Option<&Encryption>) -> Result<Plan, Diagnostic> {
    load_plan_made(path, enc).map(|(p, _)| p)
}

/// Who made a saved plan, where and when, as the file records it (files written before Cairn
/// recorded it have none).
#[derive(Clone, Debug, Default, serde::Deserialize, serde::Serialize)]
pub struct Made {
    pub time_ms: u64,
    pub user: String,
    pub host: String,
}

/// [`load_plan`], with who made the plan, where and when, if the file says.
pub fn load_plan_made(
    path: &Path,
    enc: Option<&Encryption>,
) -> Result<(Plan, Option<Made>), Diagnostic> {
    let bytes = std::fs::read(path).map_err(|e| {
        Diagnostic::error(
            "Failed to read plan file",
            format!("{} cannot be read: {e}.", path.display()),
        )
    })?;
    decode_plan(&bytes, &path.display().to_string(), enc)
}

/// A saved plan's bytes (`name`: the file, for messages) decoded as [`load_plan_made`] reads
/// them.
pub(crate) fn decode_plan(
    bytes: &[u8],
    name: &str,
    enc: Option<&Encryption>,
) -> Result<(Plan, Option<Made>), Diagnostic> {
    let bad = |why: String| Diagnostic::error("Failed to read plan file", format!("{name} {why}"));
    let what = format!("the plan file {name}");
    let opened = cairn_state::crypt::open_with(enc, &what, bytes)
        .map_err(|m| Diagnostic::error("Failed to decrypt plan file", format!("{m}.")))?;
    let doc: J = serde_json::from_slice(&opened).map_err(|_| {
        bad(
            "is not a Cairn plan file (it is not JSON). Save a plan with `cairn plan -out=FILE`."
                .into(),
        )
    })?;
    match doc.get("cairn_plan_format").and_then(J::as_u64) {
        Some(PLAN_FORMAT) => {}
        Some(v) => {
            return Err(bad(format!(
                "has plan format {v}; this Cairn reads format {PLAN_FORMAT}. Make the plan again with this Cairn."
            )))
        }
        None => {
            return Err(bad(
                "is not a Cairn plan file. Save a plan with `cairn plan -out=FILE`.".into(),
            ))
        }
    }
    let made = doc
        .get("made")
        .and_then(|m| serde_json::from_value::<Made>(m.clone()).ok());
    let plan = doc.get("plan").cloned().unwrap_or(J::Null);
    let plan = serde_json::from_value(plan).map_err(|e| bad(format!("is damaged: {e}.")))?;
    Ok((plan, made))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{Action, Change, PlanMode};

    /// A plan of one create (the fields a saved plan must keep).
    fn plan_with_one_create() -> Plan {
        Plan {
            mode: PlanMode::Normal,
            base_seq: 0,
            workspace: None,
            check_findings: Vec::new(),
            config_hash: String::new(),
            changes: vec![Change {
                addr: "sim_thing.t0".parse().unwrap(),
                provider: std::sync::Arc::new("provider[\"sim\"]".parse().unwrap()),
                action: Action::Create,
                before: None,
                after: None,
                replace_paths: vec![],
                reason: None,
                sensitive_attrs: vec![],
                diff_unavailable: false,
                importing: None,
                deposed: None,
            }],
            provider_changes: vec![],
            outputs: vec![],
            drift: vec![],
            refreshed_meta: Vec::new(),
            data_reads: vec![],
            dropped_data: vec![],
            variables: Default::default(),
            request: Default::default(),
            warnings: vec![],
            applyable: true,
            errored: false,
            graph: None,
            moves: vec![],
            shapes: std::collections::BTreeMap::new(),
            sources: std::collections::BTreeMap::new(),
        }
    }

    #[test]
    fn saved_plans_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p");
        let mut plan = plan_with_one_create();
        plan.changes[0].after = Some(crate::value::Value::object([
            ("id", crate::value::Value::unknown()),
            ("n", crate::value::Value::int(3)),
        ]));
        save_plan(&path, &plan, None).unwrap();
        assert_eq!(load_plan(&path, None).unwrap(), plan);
        std::fs::write(&path, r#"{"cairn_plan_format": 99}"#).unwrap();
        let d = load_plan(&path, None).unwrap_err();
        assert!(d.detail.contains("has plan format 99"), "{}", d.detail);
    }
}
