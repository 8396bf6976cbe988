//! The run session: how every command that writes the state records one run. It opens the
//! store for writing (waiting for the lock up to `-lock-timeout`), begins the run, resolves
//! the operations an earlier run left pending (recording how), hands out the journal the
//! run's events go through, and finishes the run exactly once with its outcome — recording a
//! failed run's diagnostics with their configuration locations first
//! ([`finish_recorded`]). `apply`/`destroy`/`apply -read-only`, `refresh` and `import` run in
//! a session ([`RunSession::begin`]); so do the state edits (`state rm`/`mv`/`import-tfstate`,
//! `super::edit::state_edit`), which resolve no pending operation: they open
//! ([`RunSession::open`]), decide their events from the state, and only then begin the run
//! ([`RunSession::start`]), so an edit refused on a state with no history starts none.

use std::sync::Arc;

use crate::addr::ResourceInstanceAddr;
use cairn_state::{
    EventBody, OpenOptions, RunContext, RunOutcome, RunSummary, Snapshot, StateError, Store,
};

use super::journal::state_error;
use super::journal::Journal;
use super::recover::recover;
use super::request::Options;
use super::source::Loaded;
use crate::config::{mask_var_args, Config, ResourceKey};
use crate::diag::{Diagnostic, Diagnostics};

/// One open, recorded run (see the module's documentation).
pub(crate) struct RunSession {
    journal: Arc<Journal>,
    /// The seq of its `RunStarted`.
    pub run: u64,
    /// The state's head once the run began (its `RunStarted` and `RunContext`), before it
    /// resolved anything: what a saved plan's base is checked against.
    pub began_at: u64,
}

impl RunSession {
    /// Opens the store for writing, waiting for its lock up to `lock_timeout` (with `lock`
    /// false, `-lock=false`, taking none where the store has one to skip); the store's
    /// warnings (a torn tail repaired, a bad checkpoint skipped) come with it.
    pub(crate) fn open(
        state_dir: &std::path::Path,
        command: &str,
        lock_timeout: std::time::Duration,
        lock: bool,
    ) -> Result<(Store, Vec<String>), StateError> {
        let o = OpenOptions {
            command: command.to_string(),
            lock_timeout,
            write: true,
            skip_lock: !lock,
            encryption: crate::engine::encryption::state(),
        };
        Store::open(state_dir, &o)
    }

    /// Begins the run on an open store (`RunStarted`): from here on the run ends with
    /// [`RunSession::finish`] (or [`RunSession::close`]), or is found open by the next writer.
    pub(crate) fn start(
        mut store: Store,
        command: &str,
        args: &[String],
    ) -> Result<RunSession, StateError> {
        let run = store.begin_run_in(command, args, run_context())?;
        let began_at = store.head();
        Ok(RunSession {
            journal: Arc::new(Journal::new(store)),
            run,
            began_at,
        })
    }

    /// Opens the store, begins the run (told to `observer`), and resolves pending operations through `registry`
    /// (notes and errors of the recovery go to `notes` and `diags`). Returns the session and
    /// the state as the run starts, after recovery.
    /// The command line is recorded with the values of sensitive `-var`s masked.
    pub(crate) async fn begin(
        opts: &Options,
        loaded: &Loaded,
        observer: &dyn super::observer::Observer,
        notes: &mut Vec<String>,
        diags: &mut Diagnostics,
    ) -> Result<(RunSession, Arc<Snapshot>), Diagnostic> {
        let registry = &loaded.registry;
        let (store, warnings) =
            Self::open(&opts.state_dir, &opts.command, opts.lock_timeout, opts.lock)
                .map_err(state_error)?;
        notes.extend(warnings);
        let args = mask_var_args(&opts.args, &loaded.config.sensitive_variables());
        let session = Self::start(store, &opts.command, &args).map_err(state_error)?;
        observer.run_begun(session.run);
        let mut snapshot = session.journal.snapshot();
        tracing::debug!("state open, run begun");
        recover(
            &mut snapshot,
            registry,
            Some(&session.journal),
            notes,
            diags,
        )
        .await;
        Ok((session, Arc::new(snapshot)))
    }

    /// The journal the run's events go through (shared with the walk's tasks).
    pub(crate) fn journal(&self) -> &Arc<Journal> {
        &self.journal
    }

    /// Finishes the run with `outcome` (the last holder of the journal does; the walk's tasks
    /// have all returned by then). A failure to record is added to `diags`.
    pub(crate) fn finish(
        self,
        outcome: RunOutcome,
        summary: RunSummary,
        diags: &mut Diagnostics,
        config: Option<&Config>,
    ) {
        if let Err(e) = self.close(outcome, summary, diags, config) {
            diags.push(state_error(e));
        }
    }

    /// [`RunSession::finish`], returning the store's error instead.
    pub(crate) fn close(
        self,
        outcome: RunOutcome,
        summary: RunSummary,
        diags: &Diagnostics,
        config: Option<&Config>,
    ) -> Result<(), StateError> {
        let mut store = match Arc::try_unwrap(self.journal) {
            Ok(j) => j.into_store(),
            Err(_) => return Ok(()),
        };
        finish_recorded(&mut store, outcome, summary, diags, config)
    }
}

/// Finishes the open run: the one way every recorded run ends. A run that did not succeed
/// first records its diagnostics (`RunDiagnostics`, with their locations as they are at the
/// time of the error: the files may change later), so the log says why it failed whatever the
/// command. `config`: the configuration the locations are found in, if the command has one.
pub fn finish_recorded(
    store: &mut Store,
    outcome: RunOutcome,
    summary: RunSummary,
    diags: &Diagnostics,
    config: Option<&Config>,
) -> Result<(), cairn_state::StateError> {
    if outcome != RunOutcome::Success && !diags.is_empty() && store.snapshot().open_run.is_some() {
        store.append(EventBody::RunDiagnostics {
            diagnostics: recorded_diagnostics(diags, config),
        })?;
    }
    store.finish_run(outcome, summary)
}

/// The most diagnostics a failed run records (a bound on one record's size; the count of
/// the others is recorded as a last diagnostic).
const MAX_RECORDED_DIAGNOSTICS: usize = 200;

/// Where a diagnostic is in the configuration (`file:line:col`): its span, else the block of
/// the resource its address names.
fn diagnostic_location(d: &Diagnostic, config: Option<&Config>) -> Option<String> {
    let config = config?;
    if let Some(span) = d.span {
        return Some(config.sources.location(span));
    }
    let addr: ResourceInstanceAddr = d.address.as_deref()?.parse().ok()?;
    let r = &addr.resource;
    let key = ResourceKey {
        mode: r.mode,
        type_: r.type_.clone(),
        name: r.name.clone(),
    };
    let block = config
        .module(&r.module.without_keys())?
        .resources
        .get(&key)?;
    Some(config.sources.location(block.span))
}

/// Diagnostics as the log records them: each with its configuration location (`file:line:col`
/// of its span, or of the block of the resource it names, as the configuration is at the time
/// of the error; none without a configuration) and address.
pub fn recorded_diagnostics(
    diags: &Diagnostics,
    config: Option<&Config>,
) -> Vec<cairn_state::RecordedDiagnostic> {
    use cairn_state::event::Severity as S;
    let mut out: Vec<cairn_state::RecordedDiagnostic> = diags
        .iter()
        .take(MAX_RECORDED_DIAGNOSTICS)
        .map(|d| cairn_state::RecordedDiagnostic {
            severity: match d.severity {
                crate::diag::Severity::Error => S::Error,
                crate::diag::Severity::Warning => S::Warning,
            },
            summary: d.summary.clone(),
            detail: d.detail.clone(),
            location: diagnostic_location(d, config),
            address: d.address.clone(),
        })
        .collect();
    if diags.len() > MAX_RECORDED_DIAGNOSTICS {
        out.push(cairn_state::RecordedDiagnostic {
            severity: S::Warning,
            summary: format!(
                "{} more diagnostic(s) not recorded",
                diags.len() - MAX_RECORDED_DIAGNOSTICS
            ),
            detail: String::new(),
            location: None,
            address: None,
        });
    }
    out
}

/// Where this run runs (`RunContext`): the host; the commit and branch of the git checkout the
/// working directory is in; the CI job, from the usual CI variables. What cannot be told (no
/// git, not a checkout, a detached `HEAD`, no CI) is left out, silently.
pub(crate) fn run_context() -> RunContext {
    let cwd = std::env::current_dir().ok();
    // Both git questions at once: a run waits for one process's time, not two.
    let git = |args: &[&str]| {
        let mut c = std::process::Command::new("git");
        c.args(args)
            .env("GIT_OPTIONAL_LOCKS", "0")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null());
        if let Some(d) = &cwd {
            c.current_dir(d);
        }
        c.spawn().ok()
    };
    let output = |child: Option<std::process::Child>| {
        let out = child?.wait_with_output().ok()?;
        let s = String::from_utf8(out.stdout).ok()?.trim().to_string();
        (out.status.success() && !s.is_empty()).then_some(s)
    };
    let commit = git(&["rev-parse", "--verify", "-q", "HEAD"]);
    let branch = git(&["symbolic-ref", "--short", "-q", "HEAD"]);
    let git_commit = output(commit);
    let git_branch = output(branch);
    let host = cairn_state::host_name();
    RunContext {
        host: (!host.is_empty() && host != "unknown host").then_some(host),
        // A branch without a commit (a fresh `git init`) is not a checkout of anything yet.
        git_branch: git_branch.filter(|_| git_commit.is_some()),
        git_commit,
        ci_job: ci_job(|v| std::env::var(v).ok().filter(|s| !s.is_empty())),
    }
}

/// The CI job running this process, from the variables CI providers set: GitHub Actions
/// (the workflow run's page), GitLab, Buildkite, Jenkins, CircleCI.
fn ci_job(var: impl Fn(&str) -> Option<String>) -> Option<String> {
    if let (Some(server), Some(repo), Some(run)) = (
        var("GITHUB_SERVER_URL"),
        var("GITHUB_REPOSITORY"),
        var("GITHUB_RUN_ID"),
    ) {
        return Some(format!(
            "{}/{repo}/actions/runs/{run}",
            server.trim_end_matches('/')
        ));
    }
    [
        "CI_JOB_URL",
        "BUILDKITE_BUILD_URL",
        "BUILD_URL",
        "CIRCLE_BUILD_URL",
    ]
    .into_iter()
    .find_map(var)
}

#[cfg(test)]
mod tests {
    use super::ci_job;

    #[test]
    fn the_ci_job_comes_from_the_first_provider_whose_variables_are_set() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |v: &str| {
                pairs
                    .iter()
                    .find(|(k, _)| *k == v)
                    .map(|(_, x)| x.to_string())
            }
        };
        assert_eq!(ci_job(env(&[("CI", "true")])), None);
        assert_eq!(
            ci_job(env(&[
                ("GITHUB_SERVER_URL", "https://github.com/"),
                ("GITHUB_REPOSITORY", "acme/infra"),
                ("GITHUB_RUN_ID", "42"),
            ])),
            Some("https://github.com/acme/infra/actions/runs/42".into())
        );
        // Only part of GitHub's: not a GitHub job.
        assert_eq!(ci_job(env(&[("GITHUB_RUN_ID", "42")])), None);
        for var in [
            "CI_JOB_URL",
            "BUILDKITE_BUILD_URL",
            "BUILD_URL",
            "CIRCLE_BUILD_URL",
        ] {
            let pairs: &'static [(&'static str, &'static str)] =
                Box::leak(vec![(var, "https://ci.example/job/7")].into_boxed_slice());
            assert_eq!(
                ci_job(env(pairs)),
                Some("https://ci.example/job/7".into()),
                "{var}"
            );
        }
    }
}
