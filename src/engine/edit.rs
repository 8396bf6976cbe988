//! State edits — `state rm`, `state mv`, `state import-tfstate`, `taint`, `untaint` — as the
//! engine records them:
//! each is a run of its own in a [`RunSession`] (`RunStarted`, the events the edit decides
//! from the current state, a commit, `RunFinished`), so `history` shows them and nothing is
//! ever rewritten.
//!
//! An edit the state refuses (nothing matches, an address taken, a state not empty) is a
//! failed run, finished as every recorded run is (its diagnostics recorded, located at the
//! block of the resource they name in the configuration of `dir`), so `history` and
//! `cairn ui` say what was refused and why. An edit refused before the store is open (a
//! Terraform state that does not parse) leaves no trace, as a configuration that does not
//! load leaves none for `apply`; nor does one refused on a state with no history yet.

use super::journal::state_diag;
use super::report::Report;
use super::session::RunSession;
use super::terraform_state::TfImport;
use crate::addr::{ResourceInstanceAddr, Target};
use crate::diag::{Diagnostic, Diagnostics};
use cairn_state::{EventBody, RunOutcome, RunSummary, Snapshot, StateError};
use std::path::PathBuf;
use std::time::Duration;

/// Where and how a state edit runs. The CLI fills it; the engine reads no environment.
#[derive(Clone, Debug)]
pub(crate) struct EditRequest {
    /// The root module's directory: where a refused edit's diagnostics are located.
    pub dir: PathBuf,
    pub state_dir: PathBuf,
    /// The command and its arguments, as the run records them (`state rm`, the addresses).
    pub command: String,
    pub args: Vec<String>,
    pub lock_timeout: Duration,
    /// `-lock=false` skips the store's lock where it has one to skip (PostgreSQL).
    pub lock: bool,
    /// `-dry-run`: decide the edit and return its events, recording nothing.
    pub dry_run: bool,
}

/// What to change.
pub(crate) enum StateEdit {
    /// Forget every instance a target matches (`state rm`); `named` is how the command line
    /// wrote them, for the message when nothing matches.
    Remove { targets: Vec<Target>, named: String },
    /// Move what `from` matches to `to` (`state mv`).
    Move { from: Target, to: Target },
    /// Adopt a Terraform state into an empty one (`state import-tfstate`, read with
    /// [`super::terraform_state::read_tfstate`]).
    ImportTfstate(Box<TfImport>),
    /// Mark (`taint: true`) or unmark the current object of `addr` tainted (`taint`,
    /// `untaint`; see `taint.rs`); with `allow_missing`, a missing instance is nothing to do.
    Taint {
        addr: ResourceInstanceAddr,
        taint: bool,
        allow_missing: bool,
    },
    /// Replace the whole state with a Terraform state (`state push`; see `push.rs`).
    Push(Box<super::push::Push>),
    /// Move what is under provider package `from` to package `to` (`state replace-provider`;
    /// `source` is `FROM -> TO` as typed). Nothing under `from` is nothing to do.
    ReplaceProvider {
        from: String,
        to: String,
        source: String,
    },
}

/// `state rm`, `state mv`, `state import-tfstate`: records the edit as a run of its own and
/// returns the events it recorded. The store's warnings are the report's notes; a refused
/// edit is its one error.
pub(crate) fn state_edit(req: &EditRequest, edit: StateEdit) -> Report<Vec<EventBody>> {
    let mut report = Report {
        result: None,
        diags: Diagnostics::new(),
        notes: Vec::new(),
        config: None,
    };
    match edit_run(req, edit, &mut report.notes) {
        Ok(events) => report.result = Some(events),
        Err(d) => report.diags.push(d),
    }
    report
}

fn edit_run(
    req: &EditRequest,
    edit: StateEdit,
    notes: &mut Vec<String>,
) -> Result<Vec<EventBody>, Diagnostic> {
    let (store, warnings) =
        RunSession::open(&req.state_dir, &req.command, req.lock_timeout, req.lock)
            .map_err(|e| state_diag(&e))?;
    notes.extend(warnings);
    // An edit that may turn out to be nothing to do (`taint -allow-missing`) records no run.
    let may_be_nothing = matches!(
        edit,
        StateEdit::Taint { .. } | StateEdit::ReplaceProvider { .. }
    );
    // A refused push leaves no trace: the serial it was checked against (the log's head) must
    // not move under the user's next try.
    let refusal_unrecorded = matches!(edit, StateEdit::Push(_));
    let lineage = store.lineage();
    let prepared = prepare(req, edit, store.snapshot(), &lineage);
    if prepared.is_err() && (store.snapshot().head == 0 || refusal_unrecorded) {
        // No state yet: a refused edit does not start a history.
        return prepared;
    }
    if req.dry_run || (may_be_nothing && prepared.as_ref().is_ok_and(Vec::is_empty)) {
        // `-dry-run` records nothing, not even a refusal.
        return prepared;
    }
    let session = RunSession::start(store, &req.command, &req.args).map_err(|e| state_diag(&e))?;
    let result = prepared.and_then(|events| {
        let record = || -> Result<(), StateError> {
            for e in &events {
                session.journal().try_append(e.clone())?;
            }
            session.journal().try_commit()
        };
        record().map_err(|e| state_diag(&e))?;
        Ok(events)
    });
    let (outcome, diags, config) = match &result {
        Ok(_) => (RunOutcome::Success, Diagnostics::new(), None),
        Err(d) => (
            RunOutcome::Failed,
            Diagnostics::from(d.clone()),
            configuration_in(&req.dir),
        ),
    };
    let finished = session.close(outcome, RunSummary::default(), &diags, config.as_ref());
    let events = result?;
    finished.map_err(|e| state_diag(&e))?;
    Ok(events)
}

/// The events an edit makes of the current state, or why the state refuses it.
fn prepare(
    req: &EditRequest,
    edit: StateEdit,
    snap: &Snapshot,
    lineage: &str,
) -> Result<Vec<EventBody>, Diagnostic> {
    match edit {
        StateEdit::Push(push) => super::push::prepare_push(snap, lineage, *push),
        StateEdit::ReplaceProvider { from, to, source } => {
            Ok(super::push::prepare_replace(snap, &from, &to, &source))
        }
        StateEdit::Remove { targets, named } => {
            let matched: Vec<EventBody> = all_addrs(snap)
                .into_iter()
                .filter(|addr| targets.iter().any(|t| t.contains(addr)))
                .map(|addr| EventBody::ResourceForgotten { addr: addr.clone() })
                .collect();
            if matched.is_empty() && !req.dry_run {
                let d = Diagnostic::error(
                    "No matching objects found",
                    format!(
                        "The state has no resource instance matching {named}. `cairn state list` shows the addresses it has."
                    ),
                );
                return Err(match targets.as_slice() {
                    [one] => about(d, one),
                    _ => d,
                });
            }
            Ok(matched)
        }
        StateEdit::Move { from, to } => Ok(plan_moves(snap, &from, &to)?
            .into_iter()
            .filter(|(src, dest)| src != dest)
            .map(|(from, to)| EventBody::ResourceMoved { from, to })
            .collect()),
        StateEdit::Taint {
            addr,
            taint,
            allow_missing,
        } => super::taint::prepare(snap, &addr, taint, allow_missing),
        StateEdit::ImportTfstate(import) => {
            let import = *import;
            if !snap.resources.is_empty() || !snap.data.is_empty() {
                return Err(Diagnostic::error(
                    "The state is not empty",
                    format!(
                        "The state in {} already holds {} resource instance(s). Import a Terraform state into an empty state directory (-state-dir=DIR), so no object is tracked twice.",
                        req.state_dir.display(),
                        snap.resources.len() + snap.data.len()
                    ),
                ));
            }
            let mut events = vec![import.event];
            if !import.outputs.is_empty() {
                events.push(EventBody::OutputsSet {
                    outputs: import.outputs,
                });
            }
            Ok(events)
        }
    }
}

/// Where each instance matched by `from` goes when moved to `to`: the state's own move rules
/// (`Snapshot::plan_moves`, which `moved` blocks use too), strict as `state mv` is: nothing
/// matched and an occupied destination are errors.
fn plan_moves(
    snap: &Snapshot,
    from: &Target,
    to: &Target,
) -> Result<Vec<(ResourceInstanceAddr, ResourceInstanceAddr)>, Diagnostic> {
    let plan = snap
        .plan_moves(from, to)
        .map_err(|e| Diagnostic::error("Invalid state move", e.to_string()))?;
    if plan.is_empty() {
        return Err(about(Diagnostic::error(
            "No matching objects found",
            format!("The state has no resource instance matching {from}. `cairn state list` shows the addresses it has."),
        ), from));
    }
    if let Some((src, dest)) = plan.blocked.first() {
        return Err(Diagnostic::error(
            "Invalid state move",
            format!("Cannot move {src} to {dest}: there is already a resource instance at that address."),
        )
        .with_address(dest));
    }
    Ok(plan.moves)
}

/// A diagnostic about `target` names it (`with ADDR`, and the run's record locates it at the
/// resource's block) when it is one resource or instance; a module is no single place.
fn about(d: Diagnostic, target: &Target) -> Diagnostic {
    match target {
        Target::Module(_) => d,
        Target::Resource(_) | Target::Instance(_) => d.with_address(target),
    }
}

/// Every instance address in a snapshot: managed then data, in address order.
fn all_addrs(s: &Snapshot) -> Vec<&ResourceInstanceAddr> {
    let mut v: Vec<_> = s.resources.keys().chain(s.data.keys()).collect();
    v.sort();
    v
}

/// The configuration in `dir`, if it has one that loads (where a failed edit's diagnostics
/// are located); `None` when there are no `*.tf` files.
fn configuration_in(dir: &std::path::Path) -> Option<crate::config::Config> {
    let has_config = std::fs::read_dir(dir).ok()?.flatten().any(|e| {
        let name = e.file_name();
        let name = name.to_string_lossy();
        name.ends_with(".tf") || name.ends_with(".tf.json")
    });
    if !has_config {
        return None;
    }
    crate::config::load(dir).0
}
