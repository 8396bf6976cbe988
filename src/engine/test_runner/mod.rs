//! `cairn test`: runs the `run` blocks of `*.tftest.hcl` files through the engine's own plan
//! and apply, and checks their assertions against what the walk evaluated.
//!
//! Each file runs on its own: every module under test (the configuration, or a `run`'s
//! `module { source }`, or a `state_key`) gets a state of its own in a temporary directory —
//! never the working directory's state — carried from run to run and destroyed at the end of
//! the file in reverse order of creation. A run's assertions are evaluated in the root module
//! scope of the walk that made it (`make_plan_keeping` / `execute_keeping`), with `output.NAME`
//! and `run.NAME.OUTPUT` added (`scope.rs`). Mock providers are `provider::mock`. The runner never
//! prints: it reports [`TestEvent`]s to a [`TestObserver`].

mod scope;

use super::api::{self, Options};
use super::assemble::make_plan_keeping;
use super::core::Ctx;
use super::execute::{execute_keeping, record_refreshed};
use super::observer::Observer;
use super::session::RunSession;
use super::source::{load_with, open_read, Loaded};
use crate::addr::{ModulePath, ResourceInstanceAddr, Target};
use crate::config::test_file::{RunBlock, RunCommand, TestFile};
use crate::config::{Config, VarArg};
use crate::diag::{Diagnostic, Diagnostics, SourceMap};
use crate::plan::{Plan, PlanMode};
use crate::value::Value;
use crate::value::ValueMap;
use cairn_state::{RunOutcome, RunSummary, Snapshot};
use scope::{PlainScope, RunScope};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// What `cairn test` asks for.
pub struct TestRequest {
    /// The command's options: the configuration's directory, `-var`/`-var-file`, the
    /// environment. Its state directory is never used.
    pub base: Options,
    pub test_directory: String,
    pub filter: Vec<String>,
    pub verbose: bool,
}

/// A run's or a file's outcome, as Terraform names them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum TestStatus {
    Pending,
    Skip,
    Pass,
    Fail,
    Error,
}

impl TestStatus {
    pub fn word(self) -> &'static str {
        match self {
            TestStatus::Pending => "pending",
            TestStatus::Skip => "skip",
            TestStatus::Pass => "pass",
            TestStatus::Fail => "fail",
            TestStatus::Error => "error",
        }
    }
}

/// What `-verbose` shows after a run: its plan, or the state and outputs it left.
pub enum Shown<'a> {
    Plan(&'a Plan),
    State(&'a Snapshot),
}

/// Diagnostics with the source map that renders them: the test file's, or the
/// configuration's.
pub struct Found<'a> {
    pub diags: &'a Diagnostics,
    pub sources: &'a SourceMap,
}

/// What the runner reports, in order.
pub enum TestEvent<'a> {
    /// Every file found, with its run blocks' names.
    Abstract(&'a [(String, Vec<String>)]),
    FileStart(&'a str),
    RunStart {
        file: &'a str,
        run: &'a str,
    },
    RunDone {
        file: &'a str,
        run: &'a str,
        status: TestStatus,
        shown: Option<Shown<'a>>,
        found: Vec<Found<'a>>,
    },
    Teardown(&'a str),
    /// A state destroyed at the end of a file (named by the last run that applied to it):
    /// the destroy's errors, and the addresses it left in the state.
    TeardownRun {
        file: &'a str,
        run: &'a str,
        found: Vec<Found<'a>>,
        left: &'a [String],
    },
    FileDone {
        file: &'a str,
        status: TestStatus,
        found: Vec<Found<'a>>,
    },
}

pub trait TestObserver: Send + Sync {
    fn event(&self, e: TestEvent<'_>);
}

/// The counts of the closing line.
#[derive(Clone, Copy, Debug, Default)]
pub struct TestSummary {
    pub passed: usize,
    pub failed: usize,
    pub errored: usize,
    pub skipped: usize,
    pub status: Option<TestStatus>,
}

/// One state of a file: the module it holds and where it lives.
struct TestState {
    key: String,
    dir: PathBuf,
    module_dir: PathBuf,
    /// The options of the last run that used it (its variables): what destroys it.
    opts: Option<Options>,
    last_run: String,
}

/// Runs every test file; `Err` is a problem before any file ran (no files, a bad file).
pub async fn run_tests(
    req: &TestRequest,
    observer: &dyn TestObserver,
) -> Result<TestSummary, (Diagnostics, SourceMap)> {
    let root = req.base.dir.clone();
    let paths = crate::config::test_file::test_files(&root, &req.test_directory, &req.filter);
    let mut files = Vec::new();
    let mut bad = Diagnostics::new();
    let mut bad_sources = SourceMap::new();
    for p in &paths {
        let name = p.strip_prefix(&root).unwrap_or(p).display().to_string();
        let (tf, d) = crate::config::test_file::load_test_file(p, &name);
        if d.has_errors() {
            if let Some(tf) = tf {
                bad_sources = tf.sources;
            }
            bad.extend(d);
            break;
        }
        files.extend(tf);
    }
    if bad.has_errors() {
        return Err((bad, bad_sources));
    }
    let listing: Vec<(String, Vec<String>)> = files
        .iter()
        .map(|f| {
            (
                f.name.clone(),
                f.runs.iter().map(|r| r.name.clone()).collect(),
            )
        })
        .collect();
    observer.event(TestEvent::Abstract(&listing));
    let mut summary = TestSummary::default();
    let mut status = TestStatus::Pending;
    for f in &files {
        let s = run_file(req, f, observer, &mut summary).await;
        status = status.max(s);
    }
    summary.status = Some(status);
    Ok(summary)
}

/// The values a file's runs have produced so far: `run.NAME` → an object of its outputs.
type RunOutputs = ValueMap;

async fn run_file(
    req: &TestRequest,
    f: &TestFile,
    observer: &dyn TestObserver,
    summary: &mut TestSummary,
) -> TestStatus {
    observer.event(TestEvent::FileStart(&f.name));
    let tmp = match tempfile::Builder::new().prefix("cairn-test-").tempdir() {
        Ok(t) => t,
        Err(e) => {
            let d = Diagnostics::from(Diagnostic::error(
                "Cannot run tests",
                format!("Creating a temporary directory failed: {e}."),
            ));
            observer.event(TestEvent::FileDone {
                file: &f.name,
                status: TestStatus::Error,
                found: vec![Found {
                    diags: &d,
                    sources: &f.sources,
                }],
            });
            summary.errored += f.runs.len();
            return TestStatus::Error;
        }
    };
    let mut states: Vec<TestState> = Vec::new();
    let mut outputs = RunOutputs::new();
    let mut file_status = TestStatus::Pending;
    let mut stopped = false;
    for run in &f.runs {
        if stopped {
            observer.event(TestEvent::RunDone {
                file: &f.name,
                run: &run.name,
                status: TestStatus::Skip,
                shown: None,
                found: Vec::new(),
            });
            summary.skipped += 1;
            continue;
        }
        observer.event(TestEvent::RunStart {
            file: &f.name,
            run: &run.name,
        });
        let (status, stop) =
            run_one(req, f, run, tmp.path(), &mut states, &mut outputs, observer).await;
        stopped |= stop;
        match status {
            TestStatus::Pass => summary.passed += 1,
            TestStatus::Fail => summary.failed += 1,
            TestStatus::Error => summary.errored += 1,
            _ => summary.skipped += 1,
        }
        file_status = file_status.max(status);
    }
    observer.event(TestEvent::Teardown(&f.name));
    for st in states.iter().rev() {
        let Some(opts) = &st.opts else { continue };
        let (d, config, left) = destroy(opts).await;
        if d.has_errors() || !left.is_empty() {
            file_status = TestStatus::Error;
        }
        let empty = SourceMap::new();
        let found = match d.is_empty() {
            true => Vec::new(),
            false => vec![Found {
                diags: &d,
                sources: config.as_ref().map(|c| &c.sources).unwrap_or(&empty),
            }],
        };
        observer.event(TestEvent::TeardownRun {
            file: &f.name,
            run: &st.last_run,
            found,
            left: &left,
        });
    }
    let status = if file_status == TestStatus::Pending {
        TestStatus::Pass
    } else {
        file_status
    };
    observer.event(TestEvent::FileDone {
        file: &f.name,
        status,
        found: Vec::new(),
    });
    status
}

/// Destroys one state: the destroy's diagnostics (with the configuration that renders them)
/// and the addresses still in the state afterwards.
async fn destroy(opts: &Options) -> (Diagnostics, Option<Arc<Config>>, Vec<String>) {
    let report = api::apply(
        opts,
        PlanMode::Destroy,
        None,
        Arc::new(super::observer::Silent),
    )
    .await;
    // The destroy's store may still be closing: wait for it rather than read nothing.
    let read = Options {
        lock_timeout: std::time::Duration::from_secs(10),
        ..opts.clone()
    };
    let left: Vec<String> = match open_read(&read) {
        Ok((_, s, _)) => s
            .resources
            .iter()
            .filter(|(_, i)| i.current.is_some() || !i.deposed.is_empty())
            .map(|(a, _)| a.to_string())
            .collect(),
        Err(_) => Vec::new(),
    };
    let diags: Diagnostics = report.diags.into_iter().filter(|d| d.is_error()).collect();
    (diags, report.config, left)
}

/// The state a run uses: found by its key, or made.
fn state_for<'s>(
    states: &'s mut Vec<TestState>,
    key: String,
    module_dir: PathBuf,
    tmp: &Path,
) -> &'s mut TestState {
    if let Some(i) = states.iter().position(|s| s.key == key) {
        return &mut states[i];
    }
    let dir = tmp.join(format!("state-{}", states.len()));
    states.push(TestState {
        key,
        dir,
        module_dir,
        opts: None,
        last_run: String::new(),
    });
    states.last_mut().expect("just pushed")
}

/// What one run produced, for its assertions.
struct Outcome {
    loaded: Option<Loaded>,
    plan: Option<Plan>,
    ctx: Option<Arc<Ctx>>,
    snapshot: Option<Snapshot>,
    diags: Diagnostics,
}

// The steps of one run, in order: variables, options, the walk, expected failures, asserts.
// Long (about 220 lines), but one straight sequence whose steps share the run's diagnostics
// and its `done` report; cutting it would pass most of its locals along.
async fn run_one(
    req: &TestRequest,
    f: &TestFile,
    run: &RunBlock,
    tmp: &Path,
    states: &mut Vec<TestState>,
    outputs: &mut RunOutputs,
    observer: &dyn TestObserver,
) -> (TestStatus, bool) {
    let root = &req.base.dir;
    let module_dir = match &run.module {
        Some(src) => root.join(src),
        None => root.clone(),
    };
    let mut test_diags = Diagnostics::new();
    let done = |status: TestStatus,
                test_diags: &Diagnostics,
                config: Option<(&Diagnostics, &SourceMap)>,
                shown: Option<Shown<'_>>| {
        let mut found = Vec::new();
        if let Some((d, s)) = config {
            if !d.is_empty() {
                found.push(Found {
                    diags: d,
                    sources: s,
                });
            }
        }
        if !test_diags.is_empty() {
            found.push(Found {
                diags: test_diags,
                sources: &f.sources,
            });
        }
        // An error other than a failed assertion stops the file: its later runs are skipped.
        let stop = found.iter().any(|fd| {
            fd.diags
                .iter()
                .any(|d| d.is_error() && d.summary != "Test assertion failed")
        });
        observer.event(TestEvent::RunDone {
            file: &f.name,
            run: &run.name,
            status,
            shown,
            found,
        });
        (status, stop)
    };
    // The run's variables: the file's, then its own, each evaluated with `run.*` and the
    // variables before it.
    let mut vars: ValueMap = ValueMap::new();
    let cli_vars = cli_values(&req.base);
    for (name, expr) in f.variables.iter().chain(&run.variables) {
        let mut visible = cli_vars.clone();
        visible.extend(vars.clone());
        let scope = PlainScope::new(&visible, outputs, f.file, root);
        match crate::eval::eval(expr, &scope) {
            Ok(v) => {
                vars.insert(name.clone(), v);
            }
            Err(d) => test_diags.extend(d),
        }
    }
    if test_diags.has_errors() {
        return done(TestStatus::Error, &test_diags, None, None);
    }
    let key = run
        .state_key
        .clone()
        .or_else(|| run.module.clone())
        .unwrap_or_default();
    let state = state_for(states, key, module_dir.clone(), tmp);
    let declared = declared_variables(&state.module_dir);
    let vars_file = tmp.join(format!(
        "{}.{}.tfvars",
        states_len_hint(&state.dir),
        run.name
    ));
    let mut text = String::new();
    for (name, v) in &vars {
        if declared.contains(name) {
            let (v, _) = v.clone().deep_unmark();
            text.push_str(&format!("{name} = {}\n", crate::value::format_hcl(&v)));
        }
    }
    if let Err(e) = std::fs::write(&vars_file, text) {
        test_diags.push(Diagnostic::error(
            "Cannot run tests",
            format!("Writing {} failed: {e}.", vars_file.display()),
        ));
        return done(TestStatus::Error, &test_diags, None, None);
    }
    let mut opts = req.base.clone();
    opts.dir = state.module_dir.clone();
    opts.state_dir = state.dir.clone();
    // A test file in the test directory also reads that directory's `terraform.tfvars` and
    // `*.auto.tfvars`, before the command line's values (as Terraform).
    let mut vars_args = test_dir_tfvars(root, &req.test_directory, &f.name);
    vars_args.append(&mut opts.vars);
    opts.vars = vars_args;
    opts.vars.push(VarArg::File(vars_file.clone()));
    opts.command = "test".into();
    opts.refresh = run.refresh;
    for (t, sp) in &run.target {
        match t.parse::<Target>() {
            Ok(t) => opts.targets.push(t),
            Err(e) => test_diags.push(
                Diagnostic::error("Invalid target address", format!("{t}: {e}."))
                    .with_span(Some(*sp)),
            ),
        }
    }
    for (t, sp) in &run.replace {
        match t.parse::<ResourceInstanceAddr>() {
            Ok(a) => opts.replace.push(a),
            Err(e) => test_diags.push(
                Diagnostic::error("Invalid replace address", format!("{t}: {e}."))
                    .with_span(Some(*sp)),
            ),
        }
    }
    mock_providers(f, run, &vars, outputs, root, &mut opts, &mut test_diags);
    if test_diags.has_errors() {
        return done(TestStatus::Error, &test_diags, None, None);
    }
    let mode = if run.refresh_only {
        PlanMode::RefreshOnly
    } else {
        PlanMode::Normal
    };
    let apply = run.command == RunCommand::Apply && !run.refresh_only;
    let out = walk(&opts, mode, apply).await;
    // The state is destroyed with the variables of the last run that applied to it.
    if out.snapshot.is_some() {
        state.opts = Some(opts.clone());
        state.last_run = run.name.clone();
    }
    let config = out.loaded.as_ref().map(|l| l.config.clone());
    let empty = SourceMap::new();
    let sources = config.as_ref().map(|c| &c.sources).unwrap_or(&empty);
    let out_diags_again = out.diags.clone();
    let (mut config_diags, expected_seen) = expected_failures(run, out.diags, config.as_deref());
    // An apply whose plan failed as expected could not apply: the run fails, with the
    // original diagnostics.
    if apply && out.snapshot.is_none() && !expected_seen.is_empty() {
        for (t, sp) in run
            .expect_failures
            .iter()
            .filter(|(t, _)| expected_seen.contains(t))
        {
            test_diags.push(
                Diagnostic::warning(
                    "Expected failure while planning",
                    format!("A custom condition within {t} failed during the planning stage and prevented the requested apply operation. While this was an expected failure, the apply operation could not be executed and so the overall test case will be marked as a failure and the original diagnostic included in the test report."),
                )
                .with_span(Some(*sp)),
            );
        }
        config_diags = out_diags_again;
    }
    let moved = at_test_variables(&mut config_diags, config.as_deref(), &vars_file, f, run);
    test_diags.extend(moved);
    for (t, sp) in &run.expect_failures {
        if !expected_seen.contains(t) {
            test_diags.push(
                Diagnostic::error(
                    "Missing expected failure",
                    format!(
                        "The checkable object, {t}, was expected to report an error but did not."
                    ),
                )
                .with_span(Some(*sp)),
            );
        }
    }
    let shown = match (req.verbose, &out.plan, &out.snapshot) {
        (true, _, Some(s)) if apply => Some(Shown::State(s)),
        (true, Some(p), _) => Some(Shown::Plan(p)),
        _ => None,
    };
    if config_diags.has_errors() {
        config_diags.0.sort_by_key(|d| !d.is_error());
        return done(
            TestStatus::Error,
            &test_diags,
            Some((&config_diags, sources)),
            shown,
        );
    }
    let Some(ctx) = out.ctx else {
        // Expected failures stopped the walk before it evaluated anything: nothing to assert.
        let status = if test_diags.has_errors() {
            TestStatus::Fail
        } else {
            TestStatus::Pass
        };
        return done(status, &test_diags, Some((&config_diags, sources)), shown);
    };
    // The run's outputs, for `run.NAME.OUTPUT` in later runs.
    let values = ctx.values.read().expect("values");
    let root_outputs = values
        .outputs
        .get(&ModulePath::root())
        .cloned()
        .unwrap_or_default();
    outputs.insert(run.name.clone(), Value::Object(root_outputs.clone()));
    let mut failed = false;
    if !expected_seen.is_empty() || run.expect_failures.is_empty() {
        let paths = ctx.paths(&ModulePath::root());
        let scope = RunScope::new(&values, &paths, f.file, &root_outputs, outputs, &vars);
        for a in &run.asserts {
            match scope::check_assert(a, &scope, run.command == RunCommand::Plan) {
                Ok(()) => {}
                Err(d) => {
                    failed |= d.has_errors();
                    test_diags.extend(d)
                }
            }
        }
    }
    let status = if failed || test_diags.has_errors() {
        TestStatus::Fail
    } else {
        TestStatus::Pass
    };
    drop(values);
    done(status, &test_diags, Some((&config_diags, sources)), shown)
}

fn states_len_hint(dir: &Path) -> String {
    dir.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// The `-var` values of the command line, as test files see them in `var.NAME`.
fn cli_values(base: &Options) -> ValueMap {
    let mut out = ValueMap::new();
    for v in &base.vars {
        if let VarArg::Var(t) = v {
            if let Some((k, val)) = t.split_once('=') {
                out.insert(k.trim().to_string(), Value::string(val));
            }
        }
    }
    out
}

/// The names of the root variables the module in `dir` declares.
fn declared_variables(dir: &Path) -> std::collections::BTreeSet<String> {
    let (config, _) = crate::config::load(dir);
    config
        .and_then(|c| {
            c.module(&ModulePath::root())
                .map(|m| m.variables.keys().cloned().collect())
        })
        .unwrap_or_default()
}

/// Plans (and applies, for `command = apply`) in the run's state, keeping the walk's values.
/// A plan with errors is not applied.
async fn walk(opts: &Options, mode: PlanMode, apply: bool) -> Outcome {
    let observer: Arc<dyn Observer> = Arc::new(super::observer::Silent);
    let mut out = Outcome {
        loaded: None,
        plan: None,
        ctx: None,
        snapshot: None,
        diags: Diagnostics::new(),
    };
    let loaded = match load_with(opts, None, false) {
        Ok(l) => l,
        Err(r) => {
            out.diags = r.diags;
            out.loaded = r.config.map(|config| Loaded {
                config,
                inputs: ValueMap::new(),
                files_hash: String::new(),
                registry: Arc::new(super::providers::Registry::new(
                    BTreeMap::new(),
                    Default::default(),
                )),
                diags: Diagnostics::new(),
            });
            return out;
        }
    };
    let mut diags = loaded.diags.clone();
    let mut notes = Vec::new();
    let (session, snapshot) = match RunSession::begin(
        opts,
        &loaded,
        &super::observer::Silent,
        &mut notes,
        &mut diags,
    )
    .await
    {
        Ok(s) => s,
        Err(d) => {
            diags.push(d);
            out.diags = diags;
            out.loaded = Some(loaded);
            return out;
        }
    };
    let mut ctx = None;
    let mut plan = make_plan_keeping(
        &loaded, opts, mode, &snapshot, &observer, &mut diags, &mut ctx,
    )
    .await;
    let mut summary = RunSummary::default();
    if let (Some(p), true) = (&mut plan, apply) {
        {
            if !diags.has_errors() {
                let journal = session.journal();
                record_refreshed(journal, p, &mut diags);
                let mut applied_ctx = None;
                let (s, _) = execute_keeping(
                    &loaded,
                    opts,
                    p,
                    journal,
                    session.run,
                    &observer,
                    &mut diags,
                    &mut applied_ctx,
                )
                .await;
                summary = s;
                if applied_ctx.is_some() {
                    ctx = applied_ctx;
                }
                out.snapshot = Some(journal.snapshot());
            }
        }
    }
    let outcome = if diags.has_errors() {
        RunOutcome::Failed
    } else {
        RunOutcome::Success
    };
    session.finish(outcome, summary, &mut diags, Some(&loaded.config));
    out.plan = plan;
    out.ctx = ctx;
    out.diags = diags;
    out.loaded = Some(loaded);
    out
}

/// Splits a run's diagnostics into those `expect_failures` expects (dropped) and the rest;
/// also says which expected objects failed.
fn expected_failures(
    run: &RunBlock,
    diags: Diagnostics,
    config: Option<&Config>,
) -> (Diagnostics, std::collections::BTreeSet<String>) {
    let mut seen = std::collections::BTreeSet::new();
    if run.expect_failures.is_empty() {
        return (diags, seen);
    }
    let mut rest = Diagnostics::new();
    for d in diags {
        let object = config.and_then(|c| scope::checkable_object(&d, c));
        match object.and_then(|o| {
            run.expect_failures
                .iter()
                .find(|(t, _)| scope::names(t, &o))
        }) {
            Some((t, _)) => {
                seen.insert(t.clone());
            }
            None => rest.push(d),
        }
    }
    (rest, seen)
}

/// The file's `mock_provider` blocks as the run sees them: those without an alias, and those
/// the run's `providers` names (`aws = aws.fake`), each with its defaults evaluated.
fn mock_providers(
    f: &TestFile,
    run: &RunBlock,
    vars: &ValueMap,
    outputs: &RunOutputs,
    root: &Path,
    opts: &mut Options,
    diags: &mut Diagnostics,
) {
    for p in f.providers.iter().filter(|p| p.mock.is_none()) {
        let scope = PlainScope::new(vars, outputs, f.file, root);
        match scope::body_text(&p.body, &scope) {
            Ok(text) => opts
                .test_providers
                .push((p.name.clone(), p.alias.clone(), text)),
            Err(d) => diags.extend(d),
        }
    }
    for p in &f.providers {
        let Some(mock) = &p.mock else { continue };
        let local = match &p.alias {
            None => Some(p.name.clone()),
            Some(alias) => run
                .providers
                .iter()
                .find(|(_, to)| *to == format!("{}.{alias}", p.name))
                .map(|(local, _)| local.clone()),
        };
        let Some(local) = local else { continue };
        let scope = PlainScope::new(vars, outputs, f.file, root);
        let mut spec = crate::provider::mock::MockSpec::default();
        for (list, into) in [
            (&mock.resources, &mut spec.resources),
            (&mock.data, &mut spec.data),
        ] {
            for (type_, defaults) in list {
                let v = match defaults {
                    Some(e) => match crate::eval::eval(e, &scope) {
                        Ok(v) => v,
                        Err(d) => {
                            diags.extend(d);
                            continue;
                        }
                    },
                    None => Value::Object(ValueMap::new()),
                };
                into.insert(type_.clone(), v);
            }
        }
        opts.mocks.insert(local, spec);
        overrides(&mock.overrides, &scope, opts, diags);
    }
    let scope = PlainScope::new(vars, outputs, f.file, root);
    overrides(&f.overrides, &scope, opts, diags);
    overrides(&run.overrides, &scope, opts, diags);
}

/// `override_resource` and `override_data` blocks, their values evaluated; a later one for
/// the same resource replaces an earlier one (a run's win over the file's).
fn overrides(
    list: &[crate::config::test_file::Override],
    scope: &PlainScope<'_>,
    opts: &mut Options,
    diags: &mut Diagnostics,
) {
    use crate::config::test_file::OverrideKind;
    for o in list.iter().filter(|o| o.kind == OverrideKind::Module) {
        let path = module_path(&o.target);
        let Some(path) = path else {
            diags.push(
                Diagnostic::error(
                    "Invalid override target",
                    format!(
                        "{}: an override_module's target is a module call, as module.NAME.",
                        o.target
                    ),
                )
                .with_span(Some(o.target_span)),
            );
            continue;
        };
        let outputs = match &o.values {
            Some(e) => match crate::eval::eval(e, scope) {
                Ok(v) => v,
                Err(d) => {
                    diags.extend(d);
                    continue;
                }
            },
            None => Value::Object(ValueMap::new()),
        };
        opts.module_overrides.retain(|(p, _)| *p != path);
        opts.module_overrides.push((path, outputs));
    }
    for o in list.iter().filter(|o| o.kind != OverrideKind::Module) {
        let addr = match o.target.parse::<ResourceInstanceAddr>() {
            Ok(a) => a,
            Err(e) => {
                diags.push(
                    Diagnostic::error("Invalid override target", format!("{}: {e}.", o.target))
                        .with_span(Some(o.target_span)),
                );
                continue;
            }
        };
        let values = match &o.values {
            Some(e) => match crate::eval::eval(e, scope) {
                Ok(v) => v,
                Err(d) => {
                    diags.extend(d);
                    continue;
                }
            },
            None => Value::Object(ValueMap::new()),
        };
        let r = &addr.resource;
        let key = crate::config::ResourceKey {
            mode: r.mode,
            type_: r.type_.clone(),
            name: r.name.clone(),
        };
        let module = r.module.without_keys();
        opts.overrides
            .retain(|x| !(x.module == module && x.key == key));
        opts.overrides.push(crate::provider::mock::OverrideSpec {
            module,
            key,
            values,
            at_plan: o.at_plan,
        });
    }
}

/// `module.a.module.b` → `["a", "b"]`; `None` for anything else (an instance key included).
fn module_path(target: &str) -> Option<Vec<String>> {
    let parts: Vec<&str> = target.split('.').collect();
    if !parts.len().is_multiple_of(2) || parts.is_empty() {
        return None;
    }
    parts
        .chunks(2)
        .map(|c| {
            let ok = c[0] == "module"
                && !c[1].is_empty()
                && c[1]
                    .chars()
                    .all(|ch| ch.is_alphanumeric() || ch == '_' || ch == '-');
            ok.then(|| c[1].to_string())
        })
        .collect()
}

/// Diagnostics about a value in the run's generated variables file (a failed validation) are
/// about the test file's expression for that variable: they move there, out of `diags`.
fn at_test_variables(
    diags: &mut Diagnostics,
    config: Option<&Config>,
    vars_file: &Path,
    f: &TestFile,
    run: &RunBlock,
) -> Diagnostics {
    let mut moved = Diagnostics::new();
    let Some(config) = config else {
        return moved;
    };
    let mut kept = Diagnostics::new();
    for mut d in std::mem::take(diags) {
        let target = d.span.and_then(|sp| {
            // (The source map may hold the path relative to the working directory.)
            if config.sources.path(sp.file).file_name() != vars_file.file_name() {
                return None;
            }
            // The generated file has one `name = value` line per variable.
            let text = config.sources.text(sp.file);
            let line_start = text[..sp.start.min(text.len())]
                .rfind('\n')
                .map_or(0, |i| i + 1);
            let name = text[line_start..].split(" = ").next()?.to_string();
            run.variables
                .iter()
                .rev()
                .chain(f.variables.iter().rev())
                .find(|(n, _)| *n == name)
                .map(|(_, e)| crate::config::span_in(f.file, e))
        });
        match target {
            Some(sp) => {
                d.span = Some(sp);
                moved.push(d);
            }
            None => kept.push(d),
        }
    }
    *diags = kept;
    moved
}

/// The variable files of the test directory, for a test file in it (`tests/x.tftest.hcl`).
fn test_dir_tfvars(root: &Path, test_dir: &str, file: &str) -> Vec<VarArg> {
    let dir = root.join(test_dir);
    if !Path::new(file).starts_with(test_dir) {
        return Vec::new();
    }
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| {
                    let n = p
                        .file_name()
                        .map(|n| n.to_string_lossy().into_owned())
                        .unwrap_or_default();
                    n.ends_with(".auto.tfvars") || n.ends_with(".auto.tfvars.json")
                })
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    for first in ["terraform.tfvars.json", "terraform.tfvars"] {
        let p = dir.join(first);
        if p.is_file() {
            files.insert(0, p);
        }
    }
    files.into_iter().map(VarArg::File).collect()
}
