//! Running a stack (`cairn stack plan|apply|destroy|show|output`): every component instance
//! of every deployment is a state of its own — a workspace of the stack's state directory
//! named `DEPLOYMENT.COMPONENT[.KEY]`, so it has its own log, history and lock in whichever
//! backend `cairn stack init` recorded (a directory on sled, a schema on PostgreSQL, a key
//! on S3) — and is planned and applied by the engine's own API (`api::plan`,
//! `api::apply_start`), with the component's module as the root module, the component's
//! inputs as its variables (`VarArg::Value`) and the stack's provider configurations as its
//! provider blocks (`Options::test_providers`).
//!
//! A round plans every component of every deployment in dependency order (references
//! `component.X` in its inputs, providers and `for_each`, `depends_on`, and what its
//! provider configurations refer to), independent ones at the same time within
//! `parallelism`; each component's planned outputs become `component.X` for the components
//! after it. A component whose `for_each`, inputs or provider configuration is not known
//! (an upstream output that only an apply will tell) is *deferred*, with the reason. An
//! apply applies a round's plans in dependency order and plans again, round after round,
//! until nothing is deferred (or a round applies nothing: it cannot converge).
//!
//! Component instances in the state that the configuration no longer has (a `removed`
//! block's component, a key gone from a `for_each`) are destroyed: the module is the
//! `removed` block's `source` (or the component's), the provider configuration the one
//! recorded in the instance's own state.

use super::api::{self, Applied, ApplyStart, PendingApply};
use super::observer::{Observer, Silent};
use super::request::Options;
use crate::config::stack::{component_refs, load_stack, StackModel};
use crate::config::{Config, VarArg};
use crate::diag::{Diagnostic, Diagnostics, FileId, SourceMap};
use crate::eval::{Scope as EvalScope, ScopeError, Subject};
use crate::plan::{Plan, PlanMode};
use crate::value::Value;
use crate::value::ValueMap;
use cairn_state::quote;
use cairn_state::workspace;
use hcl_edit::expr::Expression;
use hcl_edit::structure::{Body, Structure};
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

mod approval;
pub mod fleet;
pub mod history;

pub use approval::AutoApproval;
pub(crate) use approval::{group_rules, GroupRules};

/// What a stack command asks.
#[derive(Clone)]
pub struct StackRequest {
    /// The stack's directory (its `*.tfcomponent.hcl` and `*.tfdeploy.hcl` files).
    pub dir: PathBuf,
    /// The stack's state directory: its backend record and every component instance's
    /// state (a workspace each).
    pub state_root: PathBuf,
    /// What every component run starts from (environment, lock timeout, stop flags).
    pub base: Options,
    /// `-deployment=NAME`: only this deployment.
    pub deployment: Option<String>,
    /// How many component instances are planned or applied at once.
    pub parallelism: usize,
}

/// A loaded stack.
pub struct Stack {
    pub sources: SourceMap,
    model: StackModel,
    pub deployments: Vec<String>,
    /// Warnings of loading it (an upstream stack that has not published yet).
    pub warnings: Diagnostics,
}

/// Loads and checks the stack's configuration (what `stack validate` checks). Each
/// `upstream_input`'s stack is read too: what it publishes (`publish_output`, from its
/// deployments' outputs in its own states) is the input's value.
pub fn load(req: &StackRequest) -> Result<Stack, (SourceMap, Diagnostics)> {
    let (cfg, diags) = load_stack(&req.dir, &req.base.env);
    if diags.has_errors() {
        return Err((cfg.sources, diags));
    }
    let (cfg, mut diags) = if cfg.model.upstreams.is_empty() {
        (cfg, diags)
    } else {
        let mut values = ValueMap::new();
        let mut notes = Diagnostics::new();
        for (name, dir) in &cfg.model.upstreams {
            match upstream_published(req, dir) {
                Ok(v) => {
                    let unknown: Vec<String> = match &v {
                        Value::Object(m) => m
                            .iter()
                            .filter(|(_, v)| !v.is_wholly_known())
                            .map(|(k, _)| k.clone())
                            .collect(),
                        _ => Vec::new(),
                    };
                    if !unknown.is_empty() {
                        notes.push(Diagnostic::warning(
                            "Upstream stack not applied yet",
                            format!(
                                "upstream_input.{name}: the stack in {} has not published {} \
                                 yet (its deployments' outputs are not in its state): apply it \
                                 first. What uses them is deferred.",
                                dir.display(),
                                unknown.join(", ")
                            ),
                        ));
                    }
                    values.insert(name.clone(), v);
                }
                Err(d) => {
                    let d = Diagnostic::error(
                        "Cannot read upstream stack",
                        format!(
                            "upstream_input.{name}: the stack in {}: {}",
                            dir.display(),
                            d.iter()
                                .map(|d| format!("{}: {}", d.summary, d.detail))
                                .collect::<Vec<_>>()
                                .join("; ")
                        ),
                    );
                    return Err((cfg.sources, d.into()));
                }
            }
        }
        let (cfg, mut diags) =
            crate::config::stack::load_stack_with(&req.dir, &req.base.env, &values);
        diags.extend(notes);
        (cfg, diags)
    };
    if diags.has_errors() {
        return Err((cfg.sources, diags));
    }
    let warnings = std::mem::take(&mut diags);
    let mut deployments = cfg.deployments.clone();
    if let Some(d) = &req.deployment {
        if !deployments.contains(d) {
            let d = Diagnostic::error(
                "No such deployment",
                format!(
                    "The stack has no deployment named {}; its deployments are {}.",
                    quote(d),
                    deployments.join(", ")
                ),
            );
            return Err((cfg.sources, d.into()));
        }
        deployments.retain(|x| x == d);
    }
    Ok(Stack {
        sources: cfg.sources,
        model: cfg.model,
        deployments,
        warnings,
    })
}

/// What the stack in `dir` publishes: each `publish_output`'s value, evaluated with
/// `deployment.NAME` the outputs of that deployment of the upstream stack, read from its
/// states (in the backend its `cairn stack init` recorded in `DIR/.cairn`); unknown where
/// they are not in its state yet.
fn upstream_published(req: &StackRequest, dir: &Path) -> Result<Value, Diagnostics> {
    let (cfg, diags) = load_stack(dir, &req.base.env);
    if diags.has_errors() {
        return Err(diags);
    }
    let up = Stack {
        sources: cfg.sources,
        deployments: cfg.deployments,
        model: cfg.model,
        warnings: Diagnostics::new(),
    };
    let ureq = StackRequest {
        dir: dir.to_path_buf(),
        state_root: dir.join(".cairn"),
        deployment: None,
        ..req.clone()
    };
    let mut deployments = ValueMap::new();
    for d in &up.deployments {
        let outs = outputs(&up, &ureq, d)?;
        let v = Value::object(
            outs.into_iter()
                .map(|(n, (v, s))| (n, if s { v.sensitive() } else { v })),
        );
        deployments.insert(d.clone(), v);
    }
    let mut out = BTreeMap::new();
    for (name, (file, e)) in &up.model.publish {
        let scope = approval::DeployFileScope {
            file: *file,
            dir,
            locals: &up.model.deploy_locals,
            deployments: approval::Deployments::Outputs(&deployments),
            context: None,
        };
        out.insert(name.clone(), crate::eval::eval(e, &scope)?);
    }
    Ok(Value::object(out))
}

/// One component instance: its deployment, component and `for_each` key.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct InstanceId {
    pub deployment: String,
    pub component: String,
    pub key: Option<String>,
}

impl InstanceId {
    /// `component.app["eu"]`, as Terraform Stacks names it.
    pub fn address(&self) -> String {
        match &self.key {
            Some(k) => format!("component.{}[{}]", self.component, quote(k)),
            None => format!("component.{}", self.component),
        }
    }

    /// The workspace holding its state: `DEPLOYMENT.COMPONENT[.KEY]`, each part with the
    /// characters a workspace name may not hold (and `.`, the separator) written `~XX`.
    pub fn workspace(&self) -> String {
        let mut parts = vec![encode(&self.deployment), encode(&self.component)];
        if let Some(k) = &self.key {
            parts.push(encode(k));
        }
        parts.join(".")
    }

    fn parse_workspace(name: &str) -> Option<InstanceId> {
        let parts: Vec<&str> = name.split('.').collect();
        let (d, c, k) = match parts.as_slice() {
            [d, c] => (d, c, None),
            [d, c, k] => (d, c, Some(decode(k)?)),
            _ => return None,
        };
        Some(InstanceId {
            deployment: decode(d)?,
            component: decode(c)?,
            key: k,
        })
    }
}

fn encode(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b == b'-' || b == b'_' {
            out.push(b as char);
        } else {
            out.push_str(&format!("~{b:02x}"));
        }
    }
    out
}

fn decode(s: &str) -> Option<String> {
    let mut bytes = Vec::new();
    let mut it = s.bytes();
    while let Some(b) = it.next() {
        if b == b'~' {
            let hex = [it.next()?, it.next()?];
            bytes.push(u8::from_str_radix(std::str::from_utf8(&hex).ok()?, 16).ok()?);
        } else {
            bytes.push(b);
        }
    }
    String::from_utf8(bytes).ok()
}

/// What became of one component instance in a round.
pub enum Outcome {
    /// Planned (a plan, or the plan an apply is about to carry out).
    Planned(Box<Plan>),
    /// Applied (or nothing to apply).
    Applied(Box<Applied>),
    /// Not planned: its inputs, `for_each` or providers wait for an upstream apply.
    Deferred(String),
    /// The engine reported errors (in `diags`).
    Failed,
}

/// One component instance's result.
pub struct InstanceResult {
    pub id: InstanceId,
    /// It is destroyed because the configuration no longer has it (`removed`, a key gone).
    pub removed: bool,
    pub outcome: Outcome,
    pub diags: Diagnostics,
    /// The component's configuration (its sources, for the diagnostics).
    pub config: Option<Arc<Config>>,
    /// What applying its plan again needs (a plan made by `stack plan`, for `-out`).
    replay: Option<Replay>,
}

/// What a saved stack plan keeps of an instance besides its plan: where its module is, its
/// provider blocks and its dependency level.
#[derive(Clone, serde::Serialize, serde::Deserialize)]
struct Replay {
    dir: PathBuf,
    providers: Vec<(String, Option<String>, String)>,
    level: usize,
}

/// A round of a stack run: every instance's plan (or deferral), and the applies waiting for
/// approval.
pub struct Round {
    pub results: Vec<InstanceResult>,
    /// Problems of the stack itself (evaluating its expressions), in `Stack::sources`.
    pub diags: Diagnostics,
    /// Each waiting apply with its order key: its dependency level, or for a destroy the
    /// reverse of it.
    pending: Vec<(InstanceId, usize, PendingApply)>,
}

impl Round {
    /// Whether approving would apply anything.
    pub fn has_pending(&self) -> bool {
        !self.pending.is_empty()
    }

    /// How many instances were deferred.
    pub fn deferred(&self) -> usize {
        self.results
            .iter()
            .filter(|r| matches!(r.outcome, Outcome::Deferred(_)))
            .count()
    }

    /// The deployments with applies waiting.
    pub fn pending_deployments(&self) -> BTreeSet<String> {
        self.pending
            .iter()
            .map(|(id, _, _)| id.deployment.clone())
            .collect()
    }

    /// Moves the waiting applies of the deployments in `which` into a round of their own.
    pub fn split_off(&mut self, which: &BTreeSet<String>) -> Round {
        let (taken, kept) = std::mem::take(&mut self.pending)
            .into_iter()
            .partition(|(id, _, _)| which.contains(&id.deployment));
        self.pending = kept;
        Round {
            results: Vec::new(),
            diags: Diagnostics::new(),
            pending: taken,
        }
    }

    /// "No": every waiting apply is finished as interrupted.
    pub fn decline(self) {
        for (_, _, p) in self.pending {
            let _ = p.decline();
        }
    }

    /// "Yes": applies the waiting plans in dependency order (upstream first; for a destroy,
    /// downstream first), those of one level at the same time within `parallelism`. Returns
    /// each applied instance's result.
    pub async fn approve(self, parallelism: usize) -> Vec<InstanceResult> {
        let mut levels: BTreeMap<usize, Vec<(InstanceId, PendingApply)>> = BTreeMap::new();
        for (id, level, p) in self.pending {
            levels.entry(level).or_default().push((id, p));
        }
        let sem = Arc::new(tokio::sync::Semaphore::new(parallelism.max(1)));
        let mut out = Vec::new();
        for (_, group) in levels {
            let mut set = tokio::task::JoinSet::new();
            for (id, p) in group {
                let sem = sem.clone();
                set.spawn(async move {
                    let _permit = sem.acquire_owned().await;
                    let report = p.approve().await;
                    (id, report)
                });
            }
            while let Some(joined) = set.join_next().await {
                let Ok((id, report)) = joined else { continue };
                let failed = report.diags.has_errors();
                out.push(InstanceResult {
                    removed: false,
                    outcome: match report.result {
                        Some(a) if !failed => Outcome::Applied(Box::new(a)),
                        _ => Outcome::Failed,
                    },
                    id,
                    diags: report.diags,
                    config: report.config,
                    replay: None,
                });
            }
        }
        out.sort_by(|a, b| a.id.cmp(&b.id));
        out
    }
}

/// The engine call one instance makes.
struct Job {
    id: InstanceId,
    level: usize,
    removed: bool,
    dir: PathBuf,
    vars: Vec<VarArg>,
    providers: Vec<(String, Option<String>, String)>,
    mode: PlanMode,
}

enum JobDone {
    Result(Box<InstanceResult>),
    Pending(InstanceId, usize, bool, Box<PendingApply>, Box<Plan>),
}

/// What hears each instance's engine call in a round: the stack run's record
/// (`history::RoundLink`), which names each component run as it begins.
pub trait Observers: Send + Sync {
    /// The observer of instance `id`'s engine call.
    fn observer(&self, id: &InstanceId) -> Arc<dyn Observer>;
}

/// Makes instance `job`'s engine call (a plan, or with `apply` an apply that waits for
/// approval), `observer` hearing it (the stack run's record: when its run begins in the
/// instance's state).
async fn run_job_observed(
    base: Options,
    state_root: PathBuf,
    job: Job,
    apply: bool,
    observer: Arc<dyn Observer>,
) -> JobDone {
    let state_dir = match super::workspaces::ensure_dir(&state_root, &job.id.workspace()) {
        Ok(d) => d,
        Err(d) => {
            return JobDone::Result(Box::new(InstanceResult {
                id: job.id,
                removed: job.removed,
                outcome: Outcome::Failed,
                diags: d.into(),
                config: None,
                replay: None,
            }))
        }
    };
    let mut opts = base;
    opts.dir = job.dir;
    opts.state_dir = state_dir;
    opts.vars = job.vars;
    opts.test_providers = job.providers;
    opts.workspace = None;
    if !apply {
        let replay = Replay {
            dir: opts.dir.clone(),
            providers: opts.test_providers.clone(),
            level: job.level,
        };
        let report = api::plan(&opts, job.mode, observer).await;
        let failed = report.diags.has_errors();
        return JobDone::Result(Box::new(InstanceResult {
            id: job.id,
            removed: job.removed,
            outcome: match report.result {
                Some(p) if !failed => Outcome::Planned(Box::new(p)),
                _ => Outcome::Failed,
            },
            diags: report.diags,
            config: report.config,
            replay: Some(replay),
        }));
    }
    match api::apply_start(&opts, job.mode, None, observer).await {
        ApplyStart::Done(report) => {
            let failed = report.diags.has_errors();
            JobDone::Result(Box::new(InstanceResult {
                id: job.id,
                removed: job.removed,
                outcome: match report.result {
                    Some(a) if !failed => Outcome::Applied(Box::new(a)),
                    _ => Outcome::Failed,
                },
                diags: report.diags,
                config: report.config,
                replay: None,
            }))
        }
        ApplyStart::Ask(p) => {
            let plan = p.plan().clone();
            JobDone::Pending(job.id, job.level, job.removed, Box::new(p), Box::new(plan))
        }
    }
}

/// Where a component's module is: a local source under the stack's directory, else where
/// `cairn stack init` installed it.
fn module_dir(stack_dir: &Path, component: &str, source: &str) -> Result<PathBuf, Diagnostic> {
    if crate::addr::module_source::is_local(source) {
        return Ok(stack_dir.join(source));
    }
    let key = format!("component.{component}");
    crate::provider::install::modules::installed_dir(stack_dir, &key).ok_or_else(|| {
        Diagnostic::error(
            "Component module not installed",
            format!(
                "The module of component.{component} (source {}) is not installed: run `cairn \
                 stack init`.",
                quote(source)
            ),
        )
    })
}

/// The components in dependency order's levels: a component's level is one more than the
/// highest of those it depends on.
fn levels(model: &StackModel) -> BTreeMap<String, usize> {
    let mut out: BTreeMap<String, usize> = BTreeMap::new();
    fn level(
        model: &StackModel,
        n: &str,
        out: &mut BTreeMap<String, usize>,
        seen: &mut BTreeSet<String>,
    ) -> usize {
        if let Some(l) = out.get(n) {
            return *l;
        }
        if !seen.insert(n.to_string()) {
            return 0;
        }
        let l = model
            .components
            .get(n)
            .map(|c| {
                c.depends_on
                    .iter()
                    .filter(|d| model.components.contains_key(*d))
                    .map(|d| level(model, d, out, seen) + 1)
                    .max()
                    .unwrap_or(0)
            })
            .unwrap_or(0);
        out.insert(n.to_string(), l);
        l
    }
    for n in model.components.keys() {
        level(model, n, &mut out, &mut BTreeSet::new());
    }
    out
}

/// A deployment's variables: its inputs, else the declared defaults; sensitive ones marked.
fn deployment_vars(model: &StackModel, deployment: &str) -> ValueMap {
    let inputs = model
        .deployments
        .get(deployment)
        .map(|d| d.inputs.clone())
        .unwrap_or_default();
    let mut out = ValueMap::new();
    for (name, (ty, default, sensitive)) in &model.variables {
        let v = inputs
            .get(name)
            .cloned()
            .or_else(|| default.clone())
            .unwrap_or_else(|| Value::Null(ty.clone()));
        out.insert(name.clone(), if *sensitive { v.sensitive() } else { v });
    }
    out
}

/// Where a component configuration's expressions are evaluated for one deployment.
struct CompScope<'a> {
    model: &'a StackModel,
    file: FileId,
    vars: &'a ValueMap,
    locals: &'a RefCell<BTreeMap<String, Option<Value>>>,
    components: &'a ValueMap,
    each: Option<(Value, Value)>,
}

impl CompScope<'_> {
    fn with(&self, file: FileId, each: Option<(Value, Value)>) -> CompScope<'_> {
        CompScope {
            model: self.model,
            file,
            vars: self.vars,
            locals: self.locals,
            components: self.components,
            each,
        }
    }

    /// `provider.TYPE`: each configuration of that type by name — a reference (a string
    /// `provider.TYPE.NAME`), or with `for_each` a map of references by key.
    fn providers_of(&self, ty: &str) -> Value {
        let mut out = BTreeMap::new();
        for ((t, n), def) in &self.model.providers {
            if t != ty {
                continue;
            }
            let v = match &def.for_each {
                None => Value::string(format!("provider.{t}.{n}")),
                Some(e) => match for_each_items(e, &self.with(def.file, None)) {
                    Ok(Some(items)) => Value::Map(
                        items
                            .into_iter()
                            .map(|(k, _)| {
                                let r = format!("provider.{t}.{n}[{}]", quote(&k));
                                (k, Value::string(r))
                            })
                            .collect(),
                    ),
                    _ => Value::unknown(),
                },
            };
            out.insert(n.clone(), v);
        }
        Value::object(out)
    }
}

impl EvalScope for CompScope<'_> {
    fn resolve(&self, subject: &Subject) -> Result<Value, ScopeError> {
        match subject {
            Subject::Var(n) => self.vars.get(n).cloned().ok_or_else(|| {
                ScopeError::new(
                    "Reference to undeclared input variable",
                    format!("The stack declares no variable named {}.", quote(n)),
                )
            }),
            Subject::Local(n) => {
                if let Some(v) = self.locals.borrow().get(n) {
                    return v.clone().ok_or_else(|| {
                        ScopeError::new(
                            "Cycle in local values",
                            format!("The local value {} refers to itself.", quote(n)),
                        )
                    });
                }
                let Some((file, e)) = self.model.locals.get(n) else {
                    return Err(ScopeError::new(
                        "Reference to undeclared local value",
                        format!("The stack declares no local value named {}.", quote(n)),
                    ));
                };
                self.locals.borrow_mut().insert(n.clone(), None);
                let v = crate::eval::eval(e, &self.with(*file, None));
                let v = v.unwrap_or_else(|_| Value::unknown());
                self.locals.borrow_mut().insert(n.clone(), Some(v.clone()));
                Ok(v)
            }
            Subject::Resource { type_, name, .. } if type_ == "component" => Ok(self
                .components
                .get(name)
                .cloned()
                .unwrap_or_else(Value::unknown)),
            Subject::Resource { type_, name, .. } if type_ == "provider" => {
                Ok(self.providers_of(name))
            }
            Subject::EachKey => Ok(self.each.as_ref().map(|e| e.0.clone()).ok_or_else(|| {
                ScopeError::new(
                    "each.key cannot be used in this context",
                    "A reference to \"each.key\" is only allowed in a block that has for_each set.",
                )
            })?),
            Subject::EachValue => Ok(self.each.as_ref().map(|e| e.1.clone()).ok_or_else(|| {
                ScopeError::new(
                    "each.value cannot be used in this context",
                    "A reference to \"each.value\" is only allowed in a block that has for_each set.",
                )
            })?),
            Subject::Path(_) => Ok(Value::string(self.model.dir.display().to_string())),
            _ => Err(ScopeError::new(
                "Invalid reference",
                "A component configuration may refer to var, local, component, provider and each.",
            )),
        }
    }
    fn file(&self) -> FileId {
        self.file
    }
    fn module_dir(&self) -> &Path {
        &self.model.dir
    }
    fn root_dir(&self) -> &Path {
        &self.model.dir
    }
}

/// A `for_each` value's items (key, `each.value`); `None` when it is not known yet.
fn for_each_items(
    e: &Expression,
    scope: &CompScope,
) -> Result<Option<Vec<(String, Value)>>, Diagnostics> {
    let v = crate::eval::eval(e, scope)?;
    let (v, _) = v.deep_unmark();
    if !v.is_wholly_known() {
        return Ok(None);
    }
    let items = match v {
        Value::Map(m) | Value::Object(m) => m.into_iter().collect(),
        Value::Set(items) => {
            let mut out = Vec::new();
            for i in items {
                match i.as_str() {
                    Some(s) => out.push((s.to_string(), i.clone())),
                    None => return Err(for_each_error(e, scope.file)),
                }
            }
            out
        }
        _ => return Err(for_each_error(e, scope.file)),
    };
    Ok(Some(items))
}

fn for_each_error(e: &Expression, file: FileId) -> Diagnostics {
    Diagnostic::error(
        "Invalid for_each argument",
        "The given \"for_each\" argument value is unsuitable: the \"for_each\" argument must be \
         a map, or set of strings.",
    )
    .with_span(Some(crate::config::span_in(file, e)))
    .into()
}

/// A provider configuration's `config` body as a provider block's text, its expressions
/// evaluated (`None` when a value is not known yet).
fn config_text(body: &Body, scope: &CompScope) -> Result<Option<String>, Diagnostics> {
    let mut out = String::new();
    for s in body.iter() {
        match s {
            Structure::Attribute(a) => {
                let (v, _) = crate::eval::eval(&a.value, scope)?.deep_unmark();
                if !v.is_wholly_known() {
                    return Ok(None);
                }
                out.push_str(&format!(
                    "{} = {}\n",
                    a.key.as_str(),
                    crate::value::format_hcl(&v)
                ));
            }
            Structure::Block(b) => {
                let Some(inner) = config_text(&b.body, scope)? else {
                    return Ok(None);
                };
                let labels: String = b
                    .labels
                    .iter()
                    .map(|l| format!("{} ", quote(l.as_str())))
                    .collect();
                out.push_str(&format!("{} {labels}{{\n{inner}}}\n", b.ident.as_str()));
            }
        }
    }
    Ok(Some(out))
}

/// A provider reference (`provider.TYPE.NAME` or `provider.TYPE.NAME["KEY"]`) resolved to
/// its block's text, `None` when its configuration is not known yet.
fn provider_text(reference: &str, scope: &CompScope) -> Result<Option<String>, String> {
    let rest = reference
        .strip_prefix("provider.")
        .ok_or_else(|| format!("{} is not a provider configuration", quote(reference)))?;
    let (head, key) = match rest.split_once('[') {
        Some((h, k)) => {
            let k = k.strip_suffix(']').unwrap_or(k);
            let k: String = serde_json::from_str(k).map_err(|_| "a bad key".to_string())?;
            (h, Some(k))
        }
        None => (rest, None),
    };
    let (t, n) = head
        .split_once('.')
        .ok_or_else(|| format!("{} is not a provider configuration", quote(reference)))?;
    let def = scope
        .model
        .providers
        .get(&(t.to_string(), n.to_string()))
        .ok_or_else(|| format!("there is no provider configuration provider.{t}.{n}"))?;
    let each = match (&def.for_each, key) {
        (Some(e), Some(k)) => {
            let items = for_each_items(e, &scope.with(def.file, None)).map_err(|d| {
                d.iter()
                    .map(|d| d.summary.clone())
                    .collect::<Vec<_>>()
                    .join("; ")
            })?;
            let Some(items) = items else { return Ok(None) };
            let v = items
                .into_iter()
                .find(|(ik, _)| *ik == k)
                .map(|(_, v)| v)
                .ok_or_else(|| format!("provider.{t}.{n} has no instance {}", quote(&k)))?;
            Some((Value::string(k), v))
        }
        (None, None) => None,
        (Some(_), None) => {
            return Err(format!(
                "provider.{t}.{n} has for_each: choose one of its instances, provider.{t}.{n}[KEY]"
            ))
        }
        (None, Some(_)) => return Err(format!("provider.{t}.{n} has no for_each")),
    };
    match &def.config {
        None => Ok(Some(String::new())),
        Some(b) => config_text(b, &scope.with(def.file, each)).map_err(|d| {
            d.iter()
                .map(|d| d.summary.clone())
                .collect::<Vec<_>>()
                .join("; ")
        }),
    }
}

/// A top-level attribute's name in an object expression, for reasons.
fn object_items(e: &Expression) -> Vec<(String, Expression)> {
    let Expression::Object(o) = e else {
        return Vec::new();
    };
    o.iter()
        .filter_map(|(k, v)| {
            let key = match k {
                hcl_edit::expr::ObjectKey::Ident(id) => id.as_str().to_string(),
                hcl_edit::expr::ObjectKey::Expression(Expression::String(s)) => {
                    s.value().to_string()
                }
                _ => return None,
            };
            Some((key, v.expr().clone()))
        })
        .collect()
}

/// Why an expression's value is not known: the upstream components it refers to.
fn waiting_on(e: &Expression, what: &str, status: &BTreeMap<String, Status>) -> String {
    let refs = component_refs(e);
    let named: Vec<String> = refs
        .iter()
        .map(|c| match status.get(c) {
            Some(Status::Deferred) => format!("component.{c} (itself deferred)"),
            Some(Status::Failed) => format!("component.{c} (which failed)"),
            _ => format!("component.{c}"),
        })
        .collect();
    if named.is_empty() {
        format!("{what} is not known until apply")
    } else {
        format!(
            "{what} is not known until {} {} applied",
            named.join(" and "),
            if named.len() == 1 { "is" } else { "are" }
        )
    }
}

/// A component's state in a round.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Status {
    Done,
    Deferred,
    Failed,
}

/// What evaluating a component gave: the jobs of its instances, those deferred, errors.
struct Expanded {
    jobs: Vec<Job>,
    deferred: Vec<(InstanceId, String)>,
    diags: Diagnostics,
    /// Its instance keys (`None`: no for_each) when known.
    keys: Option<Vec<Option<String>>>,
}

/// Evaluates component `name` of `deployment` into its instances' jobs.
#[allow(clippy::too_many_arguments)]
fn expand(
    stack: &Stack,
    deployment: &str,
    name: &str,
    level: usize,
    vars: &ValueMap,
    components: &ValueMap,
    status: &BTreeMap<String, Status>,
    mode: PlanMode,
) -> Expanded {
    let model = &stack.model;
    let c = &model.components[name];
    let locals = RefCell::new(BTreeMap::new());
    let scope = CompScope {
        model,
        file: c.file,
        vars,
        locals: &locals,
        components,
        each: None,
    };
    let mut out = Expanded {
        jobs: Vec::new(),
        deferred: Vec::new(),
        diags: Diagnostics::new(),
        keys: None,
    };
    let id = |key: Option<String>| InstanceId {
        deployment: deployment.to_string(),
        component: name.to_string(),
        key,
    };
    let dir = match module_dir(&model.dir, name, &c.source) {
        Ok(d) => d,
        Err(d) => {
            out.diags.push(d.with_span(Some(c.span)));
            return out;
        }
    };
    type Each = Option<(Value, Value)>;
    let instances: Vec<(Option<String>, Each)> = match &c.for_each {
        None => vec![(None, None)],
        Some(e) => match for_each_items(e, &scope) {
            Ok(Some(items)) => items
                .into_iter()
                .map(|(k, v)| (Some(k.clone()), Some((Value::string(k), v))))
                .collect(),
            Ok(None) => {
                out.deferred
                    .push((id(None), waiting_on(e, "its for_each", status)));
                return out;
            }
            Err(d) => {
                out.diags.extend(d);
                return out;
            }
        },
    };
    out.keys = Some(instances.iter().map(|(k, _)| k.clone()).collect());
    for (key, each) in instances {
        let scope = scope.with(c.file, each);
        let mut vars_out = Vec::new();
        let mut waiting = Vec::new();
        if let Some(e) = &c.inputs {
            match crate::eval::eval(e, &scope) {
                Ok(v) => {
                    let items = object_items(e);
                    match v.unmarked() {
                        Value::Object(m) | Value::Map(m) => {
                            for (k, v) in m {
                                if !v.is_wholly_known() {
                                    let why = items
                                        .iter()
                                        .find(|(n, _)| n == k)
                                        .map(|(_, e)| waiting_on(e, &format!("inputs.{k}"), status))
                                        .unwrap_or_else(|| {
                                            format!("inputs.{k} is not known until apply")
                                        });
                                    waiting.push(why);
                                }
                                vars_out.push(VarArg::Value(k.clone(), v.clone()));
                            }
                        }
                        v if !v.is_wholly_known() => {
                            waiting.push(waiting_on(e, "its inputs", status));
                        }
                        _ => out.diags.push(
                            Diagnostic::error(
                                "Invalid inputs",
                                "A component's inputs must be an object: { NAME = VALUE }.",
                            )
                            .with_span(Some(crate::config::span_in(c.file, e))),
                        ),
                    }
                }
                Err(d) => {
                    out.diags.extend(d);
                    continue;
                }
            }
        }
        let mut providers = Vec::new();
        if let Some(e) = &c.providers {
            for (local, pe) in object_items(e) {
                let v = match crate::eval::eval(&pe, &scope) {
                    Ok(v) => v,
                    Err(d) => {
                        out.diags.extend(d);
                        continue;
                    }
                };
                let Some(reference) = v.unmarked().as_str().map(str::to_string) else {
                    if v.is_wholly_known() {
                        out.diags.push(
                            Diagnostic::error(
                                "Invalid provider configuration",
                                format!(
                                    "providers.{local} must be a provider configuration: provider.TYPE.NAME."
                                ),
                            )
                            .with_span(Some(crate::config::span_in(c.file, &pe))),
                        );
                    } else {
                        waiting.push(waiting_on(&pe, &format!("providers.{local}"), status));
                    }
                    continue;
                };
                match provider_text(&reference, &scope) {
                    Ok(Some(text)) => providers.push((local.clone(), None, text)),
                    Ok(None) => {
                        let deps: Vec<String> = model
                            .providers
                            .iter()
                            .filter(|((t, n), _)| {
                                reference.starts_with(&format!("provider.{t}.{n}"))
                            })
                            .flat_map(|(_, d)| d.depends_on.iter().cloned())
                            .collect();
                        waiting.push(format!(
                            "the configuration of {reference} is not known until {} applied",
                            if deps.is_empty() {
                                "an upstream component is".to_string()
                            } else {
                                deps.iter()
                                    .map(|d| format!("component.{d}"))
                                    .collect::<Vec<_>>()
                                    .join(" and ")
                                    + if deps.len() == 1 { " is" } else { " are" }
                            }
                        ));
                    }
                    Err(m) => out.diags.push(
                        Diagnostic::error(
                            "Invalid provider configuration",
                            format!("providers.{local}: {m}."),
                        )
                        .with_span(Some(crate::config::span_in(c.file, &pe))),
                    ),
                }
            }
        }
        if !waiting.is_empty() {
            out.deferred.push((id(key), waiting.join("; ")));
            continue;
        }
        out.jobs.push(Job {
            id: id(key),
            level,
            removed: false,
            dir: dir.clone(),
            vars: vars_out,
            providers,
            mode,
        });
    }
    out
}

/// A component's value from its instances' outputs (`component.NAME`): an object of
/// outputs, or with `for_each` an object of them by key; unknown until known.
fn component_value(
    keys: &Option<Vec<Option<String>>>,
    outputs: &BTreeMap<Option<String>, Value>,
) -> Value {
    match keys {
        None => Value::unknown(),
        Some(keys) if keys.first().is_some_and(Option::is_none) => {
            outputs.get(&None).cloned().unwrap_or_else(Value::unknown)
        }
        Some(keys) => Value::object(keys.iter().flatten().map(|k| {
            (
                k.clone(),
                outputs
                    .get(&Some(k.clone()))
                    .cloned()
                    .unwrap_or_else(Value::unknown),
            )
        })),
    }
}

/// The outputs a plan will leave (unknown where apply decides).
fn planned_outputs(plan: &Plan) -> Value {
    Value::object(plan.outputs.iter().filter_map(|o| {
        let v = match &o.after {
            Some(v) => v.clone(),
            None if o.action == crate::plan::Action::Delete => return None,
            None => Value::unknown(),
        };
        Some((o.name.clone(), if o.sensitive { v.sensitive() } else { v }))
    }))
}

/// The outputs an instance's state holds (`id` is one `instances_in_state` listed).
fn state_outputs(state_root: &Path, id: &InstanceId) -> Result<Option<Value>, Diagnostic> {
    let dir = super::workspaces::ensure_dir(state_root, &id.workspace())?;
    let Some((state, _)) = super::state_read::StateRead::open(&dir, "stack")? else {
        return Ok(None);
    };
    if state.head() == 0 {
        return Ok(None);
    }
    let snap = state.snapshot();
    Ok(Some(Value::object(snap.outputs.iter().map(|(n, o)| {
        let v = Value::from_stored(&o.value);
        (n.clone(), if o.sensitive { v.sensitive() } else { v })
    }))))
}

/// Every component instance that has a state, by deployment.
pub fn instances_in_state(state_root: &Path) -> Result<Vec<InstanceId>, Diagnostic> {
    instances_in_state_of(state_root, None)
}

/// [`instances_in_state`], of one deployment only (the others' states are not opened).
fn instances_in_state_of(
    state_root: &Path,
    deployment: Option<&str>,
) -> Result<Vec<InstanceId>, Diagnostic> {
    let names = super::workspaces::list(state_root)?;
    let mut out = Vec::new();
    for n in names {
        let Some(id) = InstanceId::parse_workspace(&n) else {
            continue;
        };
        if deployment.is_some_and(|d| d != id.deployment) {
            continue;
        }
        // On PostgreSQL or S3 a workspace another machine made has no local directory yet:
        // its marker tells the store where the state is.
        let dir = super::workspaces::ensure_dir(state_root, &n)?;
        let has_state = match super::state_read::StateRead::open(&dir, "stack")? {
            Some((s, _)) => {
                s.snapshot().resources.values().any(|i| i.current.is_some())
                    || !s.snapshot().outputs.is_empty()
            }
            None => false,
        };
        if has_state {
            out.push(id);
        }
    }
    out.sort();
    Ok(out)
}

/// The provider blocks an instance's own state recorded (its root module's provider
/// instances), for destroying it when the configuration no longer configures it.
fn recorded_providers(state_root: &Path, id: &InstanceId) -> Vec<(String, Option<String>, String)> {
    let Ok(dir) = super::workspaces::ensure_dir(state_root, &id.workspace()) else {
        return Vec::new();
    };
    let Ok(Some((state, _))) = super::state_read::StateRead::open(&dir, "stack") else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (addr, p) in &state.snapshot().providers {
        if !addr.module.is_root() || addr.key.is_some() {
            continue;
        }
        let v = Value::from_stored(&p.config);
        let mut text = String::new();
        if let Value::Object(m) | Value::Map(m) = &v {
            for (k, v) in m {
                if !v.is_null() {
                    text.push_str(&format!("{k} = {}\n", crate::value::format_hcl(v)));
                }
            }
        }
        out.push((addr.package.clone(), addr.alias.clone(), text));
    }
    out
}

/// Null for each variable of the module in `dir` that has no default: what a destroy of a
/// component the configuration no longer has is given for inputs it cannot evaluate.
fn null_inputs(dir: &Path) -> Vec<VarArg> {
    let (config, _) = crate::config::load(dir);
    config
        .map(|c| {
            c.root
                .variables
                .values()
                .filter(|v| v.default.is_none())
                .map(|v| VarArg::Value(v.name.clone(), Value::Null(v.ty.clone())))
                .collect()
        })
        .unwrap_or_default()
}

/// The destroy of a component instance the configuration no longer has (a `removed`
/// block's, or a key gone from a `for_each`): the module of the component (or the `removed`
/// block's `source`), null for its variables without a default, and the provider
/// configuration its own state recorded.
fn removal_job(model: &StackModel, state_root: &Path, id: &InstanceId) -> Result<Job, Diagnostic> {
    let source = match model.components.get(&id.component) {
        Some(c) => Some(c.source.clone()),
        None => model
            .removed
            .iter()
            .find(|r| r.name == id.component)
            .map(|r| r.source.clone()),
    };
    let Some(source) = source else {
        return Err(Diagnostic::error(
            "Unclaimed component instance",
            format!(
                "Deployment {}'s {} has a state with objects, and the configuration has no \
                 component block for it: to destroy its objects, add a removed block \
                 (removed {{ from = component.{} source = \"…\" }}); to keep them, restore \
                 the component block.",
                quote(&id.deployment),
                id.address(),
                id.component
            ),
        ));
    };
    let dir = module_dir(&model.dir, &id.component, &source)?;
    Ok(Job {
        id: id.clone(),
        level: 0,
        removed: true,
        vars: null_inputs(&dir),
        providers: recorded_providers(state_root, id),
        dir,
        mode: PlanMode::Destroy,
    })
}

/// Plans one round of the stack (see the module docs): with `apply`, each instance's plan is
/// made by `api::apply_start` and waits in the round for [`Round::approve`]. `destroy`
/// plans to destroy every component (reverse dependency order, inputs from the state's
/// outputs).
///
/// `link`: each component run the round begins is named in the stack run's record as it
/// begins (a `stack apply|destroy`).
pub async fn plan_round(
    stack: &Stack,
    req: &StackRequest,
    apply: bool,
    destroy: bool,
    link: Option<&dyn Observers>,
) -> Round {
    let model = &stack.model;
    let levels = levels(model);
    let mut round = Round {
        results: Vec::new(),
        diags: Diagnostics::new(),
        pending: Vec::new(),
    };
    let in_state = match instances_in_state(&req.state_root) {
        Ok(i) => i,
        Err(d) => {
            round.diags.push(d);
            return round;
        }
    };
    let sem = Arc::new(tokio::sync::Semaphore::new(req.parallelism.max(1)));
    let mut set: tokio::task::JoinSet<(String, String, Option<String>, JobDone)> =
        tokio::task::JoinSet::new();
    let spawn = |set: &mut tokio::task::JoinSet<_>, job: Job| {
        let base = req.base.clone();
        let root = req.state_root.clone();
        let sem = sem.clone();
        let (d, c, k) = (
            job.id.deployment.clone(),
            job.id.component.clone(),
            job.id.key.clone(),
        );
        let observer: Arc<dyn Observer> = match link {
            Some(l) => l.observer(&job.id),
            None => Arc::new(Silent),
        };
        set.spawn(async move {
            let _permit = sem.acquire_owned().await;
            let done = run_job_observed(base, root, job, apply, observer).await;
            (d, c, k, done)
        });
    };

    // Per deployment: the components' values, statuses, instance keys and outputs so far.
    struct Dep {
        vars: ValueMap,
        mode: PlanMode,
        values: ValueMap,
        status: BTreeMap<String, Status>,
        started: BTreeSet<String>,
        keys: BTreeMap<String, Option<Vec<Option<String>>>>,
        outputs: BTreeMap<String, BTreeMap<Option<String>, Value>>,
        running: BTreeMap<String, usize>,
        failed: BTreeSet<String>,
        /// Components with some instances deferred and others running.
        partly_deferred: BTreeSet<String>,
    }
    let mut deps: BTreeMap<String, Dep> = BTreeMap::new();
    for d in &stack.deployments {
        let destroying = destroy || model.deployments.get(d).is_some_and(|x| x.destroy);
        let mut dep = Dep {
            vars: deployment_vars(model, d),
            mode: if destroying {
                PlanMode::Destroy
            } else {
                PlanMode::Normal
            },
            values: ValueMap::new(),
            status: BTreeMap::new(),
            started: BTreeSet::new(),
            keys: BTreeMap::new(),
            outputs: BTreeMap::new(),
            running: BTreeMap::new(),
            failed: BTreeSet::new(),
            partly_deferred: BTreeSet::new(),
        };
        if destroying {
            // Inputs come from what the state holds: every upstream output is known.
            for name in model.components.keys() {
                let mut outs = BTreeMap::new();
                let mut keys = Vec::new();
                for id in in_state
                    .iter()
                    .filter(|i| i.deployment == *d && i.component == *name)
                {
                    match state_outputs(&req.state_root, id) {
                        Ok(Some(v)) => {
                            outs.insert(id.key.clone(), v);
                            keys.push(id.key.clone());
                        }
                        Ok(None) => {}
                        Err(e) => round.diags.push(e),
                    }
                }
                if keys.is_empty() {
                    // Nothing of it to destroy: unknown to those that refer to it.
                    continue;
                }
                let keys = Some(keys);
                dep.values
                    .insert(name.clone(), component_value(&keys, &outs));
            }
        }
        deps.insert(d.clone(), dep);
    }

    // A deployment gone from the configuration keeps its states: say so once.
    let gone: BTreeSet<&String> = in_state
        .iter()
        .map(|i| &i.deployment)
        .filter(|d| !model.deployments.contains_key(*d))
        .collect();
    for d in gone {
        round.diags.push(Diagnostic::warning(
            "Deployment not in the configuration",
            format!(
                "The stack's state holds component instances of deployment {}, which the \
                 deployment configuration no longer declares: they are left as they are. To \
                 destroy them, declare the deployment again with destroy = true and apply.",
                quote(d)
            ),
        ));
    }
    // Instances in the state that the configuration no longer has: destroyed.
    for id in &in_state {
        let Some(dep) = deps.get(&id.deployment) else {
            continue;
        };
        let declared = model.components.get(&id.component);
        let still = match declared {
            None => false,
            Some(c) => match (&c.for_each, &id.key) {
                (None, None) => true,
                (Some(e), Some(k)) => {
                    let locals = RefCell::new(BTreeMap::new());
                    let scope = CompScope {
                        model,
                        file: c.file,
                        vars: &dep.vars,
                        locals: &locals,
                        components: &dep.values,
                        each: None,
                    };
                    match for_each_items(e, &scope) {
                        Ok(Some(items)) => items.iter().any(|(ik, _)| ik == k),
                        // Not known yet (or an error reported with the component): kept.
                        _ => true,
                    }
                }
                _ => false,
            },
        };
        if still {
            continue;
        }
        match removal_job(model, &req.state_root, id) {
            Ok(job) => spawn(&mut set, job),
            Err(d) => round.diags.push(d),
        }
    }

    // The walk: start every component whose dependencies are settled (for a destroy, whose
    // dependents are), then wait for an instance to finish.
    let dependents = |name: &str| -> Vec<String> {
        model
            .components
            .iter()
            .filter(|(_, c)| c.depends_on.contains(name))
            .map(|(n, _)| n.clone())
            .collect()
    };
    loop {
        let mut started_any = false;
        for (dname, dep) in deps.iter_mut() {
            let destroying = dep.mode == PlanMode::Destroy;
            for (name, c) in &model.components {
                if dep.started.contains(name) {
                    continue;
                }
                let ready = if destroying {
                    dependents(name).iter().all(|x| dep.status.contains_key(x))
                } else {
                    c.depends_on
                        .iter()
                        .filter(|x| model.components.contains_key(*x))
                        .all(|x| dep.status.contains_key(x))
                };
                if !ready {
                    continue;
                }
                dep.started.insert(name.clone());
                started_any = true;
                let level = levels.get(name).copied().unwrap_or(0);
                let level = if destroying {
                    usize::MAX - level
                } else {
                    level
                };
                // A component waits for every component it depends on to be applied: one
                // deferred (or failed) upstream defers it, `depends_on` alone included.
                let waiting: Vec<String> = if destroying {
                    Vec::new()
                } else {
                    c.depends_on
                        .iter()
                        .filter_map(|x| match dep.status.get(x) {
                            Some(Status::Deferred) => {
                                Some(format!("component.{x} (itself deferred)"))
                            }
                            Some(Status::Failed) => Some(format!("component.{x} (which failed)")),
                            _ => None,
                        })
                        .collect()
                };
                let ex = if waiting.is_empty() {
                    expand(
                        stack,
                        dname,
                        name,
                        level,
                        &dep.vars,
                        &dep.values,
                        &dep.status,
                        dep.mode,
                    )
                } else {
                    Expanded {
                        jobs: Vec::new(),
                        deferred: vec![(
                            InstanceId {
                                deployment: dname.clone(),
                                component: name.clone(),
                                key: None,
                            },
                            format!("it depends on {}, not applied yet", waiting.join(" and ")),
                        )],
                        diags: Diagnostics::new(),
                        keys: None,
                    }
                };
                let mut jobs = ex.jobs;
                let mut ex_deferred = ex.deferred;
                if destroying {
                    // Only instances that have a state are destroyed; a component with none
                    // has nothing to wait for.
                    jobs.retain(|j| in_state.contains(&j.id));
                    ex_deferred.retain(|(id, _)| {
                        in_state
                            .iter()
                            .any(|i| i.deployment == id.deployment && i.component == id.component)
                    });
                }
                round.diags.extend(ex.diags.clone());
                let failed = ex.diags.has_errors();
                let deferred = !ex_deferred.is_empty();
                for (id, why) in ex_deferred {
                    round.results.push(InstanceResult {
                        id,
                        removed: false,
                        outcome: Outcome::Deferred(why),
                        diags: Diagnostics::new(),
                        config: None,
                        replay: None,
                    });
                }
                if failed {
                    dep.failed.insert(name.clone());
                }
                dep.keys.insert(name.clone(), ex.keys);
                let n = jobs.len();
                for job in jobs {
                    spawn(&mut set, job);
                }
                if n == 0 {
                    let st = if failed {
                        Status::Failed
                    } else if deferred {
                        Status::Deferred
                    } else {
                        Status::Done
                    };
                    dep.status.insert(name.clone(), st);
                    if !destroying {
                        let v = component_value(&dep.keys[name], &BTreeMap::new());
                        let v = if deferred || failed {
                            Value::unknown()
                        } else {
                            v
                        };
                        dep.values.insert(name.clone(), v);
                    }
                } else {
                    dep.running.insert(name.clone(), n);
                    if deferred {
                        dep.partly_deferred.insert(name.clone());
                    }
                }
            }
        }
        if started_any {
            continue;
        }
        let Some(joined) = set.join_next().await else {
            break;
        };
        let Ok((d, c, k, done)) = joined else {
            continue;
        };
        let (outputs, ok) = match done {
            JobDone::Result(r) => {
                let outs = match &r.outcome {
                    Outcome::Planned(p) => Some(planned_outputs(p)),
                    Outcome::Applied(a) => a.plan.as_ref().map(planned_outputs),
                    _ => None,
                };
                let ok = !matches!(r.outcome, Outcome::Failed);
                let removed = r.removed;
                round.results.push(*r);
                if removed {
                    continue;
                }
                (outs, ok)
            }
            JobDone::Pending(id, level, removed, p, plan) => {
                let outs = Some(planned_outputs(&plan));
                round.pending.push((id.clone(), level, *p));
                round.results.push(InstanceResult {
                    id,
                    removed,
                    outcome: Outcome::Planned(plan),
                    diags: Diagnostics::new(),
                    config: None,
                    replay: None,
                });
                if removed {
                    continue;
                }
                (outs, true)
            }
        };
        let Some(dep) = deps.get_mut(&d) else {
            continue;
        };
        if !model.components.contains_key(&c) || !dep.running.contains_key(&c) {
            continue;
        }
        if !ok {
            dep.failed.insert(c.clone());
        }
        if let Some(o) = outputs {
            dep.outputs.entry(c.clone()).or_default().insert(k, o);
        }
        let left = dep.running.get_mut(&c).map(|n| {
            *n -= 1;
            *n
        });
        if left == Some(0) {
            dep.running.remove(&c);
            let deferred = dep.partly_deferred.remove(&c);
            let st = if dep.failed.contains(&c) {
                Status::Failed
            } else if deferred {
                Status::Deferred
            } else {
                Status::Done
            };
            dep.status.insert(c.clone(), st);
            if dep.mode != PlanMode::Destroy {
                let outs = dep.outputs.get(&c).cloned().unwrap_or_default();
                let v = component_value(&dep.keys[&c], &outs);
                dep.values.insert(c.clone(), v);
            }
        }
    }
    // Per deployment, in dependency order (for a destroy, the order it destroys in).
    let level = |id: &InstanceId| {
        let l = levels.get(&id.component).copied().unwrap_or(0);
        match deps.get(&id.deployment) {
            Some(d) if d.mode == PlanMode::Destroy => usize::MAX - l,
            _ => l,
        }
    };
    round.results.sort_by(|a, b| {
        (&a.id.deployment, level(&a.id), &a.id).cmp(&(&b.id.deployment, level(&b.id), &b.id))
    });
    round
}

/// Evaluates deployment `deployment`'s group's auto-approve checks against its plans of
/// this round (see [`GroupRules::judge`] for the `context` they see).
pub fn auto_approval(
    stack: &Stack,
    round: &Round,
    deployment: &str,
    rounds: usize,
) -> AutoApproval {
    let mine: Vec<&InstanceResult> = round
        .results
        .iter()
        .filter(|r| r.id.deployment == deployment)
        .collect();
    let plans: Vec<(&str, &Plan)> = mine
        .iter()
        .filter_map(|r| match &r.outcome {
            Outcome::Planned(p) => Some((r.id.component.as_str(), &**p)),
            _ => None,
        })
        .collect();
    let facts = approval::PlanFacts {
        success: !mine.iter().any(|r| matches!(r.outcome, Outcome::Failed)),
        deferred: mine
            .iter()
            .filter(|r| matches!(r.outcome, Outcome::Deferred(_)))
            .count(),
        rounds,
    };
    group_rules(&stack.model, deployment).judge(&plans, &facts)
}

/// The version of the saved stack plan format.
const STACK_PLAN_FORMAT: u64 = 1;

#[derive(serde::Serialize, serde::Deserialize)]
struct SavedInstance {
    deployment: String,
    component: String,
    key: Option<String>,
    removed: bool,
    replay: Replay,
    plan: Plan,
}

/// `stack plan -out=FILE`: the round's plans that change something, each with what applying
/// it needs (a JSON document, as a saved plan is; deferred instances are not in it). Returns
/// how many instances it holds.
pub fn save_round(round: &Round, path: &Path) -> Result<usize, Diagnostic> {
    let mut instances = Vec::new();
    for r in &round.results {
        let (Outcome::Planned(p), Some(replay)) = (&r.outcome, &r.replay) else {
            continue;
        };
        if !p.applyable {
            continue;
        }
        instances.push(SavedInstance {
            deployment: r.id.deployment.clone(),
            component: r.id.component.clone(),
            key: r.id.key.clone(),
            removed: r.removed,
            replay: replay.clone(),
            plan: (**p).clone(),
        });
    }
    let n = instances.len();
    let doc = serde_json::json!({
        "cairn_stack_plan_format": STACK_PLAN_FORMAT,
        "cairn_version": env!("CARGO_PKG_VERSION"),
        "instances": instances,
    });
    let fail = |m: String| Diagnostic::error("Failed to write plan file", m);
    let text = serde_json::to_string(&doc).map_err(|e| fail(format!("Encoding the plan: {e}.")))?;
    std::fs::write(path, text).map_err(|e| fail(format!("Writing {}: {e}.", path.display())))?;
    Ok(n)
}

/// `stack apply FILE`: each saved instance's plan checked against its state (not stale, the
/// same configuration and inputs) and held for [`Round::approve`], as `apply FILE` holds one.
pub async fn apply_saved(req: &StackRequest, path: &Path, link: Option<&dyn Observers>) -> Round {
    let mut round = Round {
        results: Vec::new(),
        diags: Diagnostics::new(),
        pending: Vec::new(),
    };
    let bad = |why: String| {
        Diagnostic::error(
            "Failed to read plan file",
            format!("{} {why}", path.display()),
        )
    };
    let doc: serde_json::Value = match std::fs::read(path)
        .map_err(|e| bad(format!("cannot be read: {e}.")))
        .and_then(|b| {
            serde_json::from_slice(&b).map_err(|_| {
                bad("is not a saved stack plan. Save one with `cairn stack plan -out=FILE`.".into())
            })
        }) {
        Ok(d) => d,
        Err(d) => {
            round.diags.push(d);
            return round;
        }
    };
    if doc.get("cairn_stack_plan_format").and_then(|v| v.as_u64()) != Some(STACK_PLAN_FORMAT) {
        round.diags.push(bad(
            "is not a saved stack plan of this Cairn. Save one with `cairn stack plan -out=FILE`."
                .into(),
        ));
        return round;
    }
    let instances: Vec<SavedInstance> =
        match serde_json::from_value(doc.get("instances").cloned().unwrap_or_default()) {
            Ok(i) => i,
            Err(e) => {
                round.diags.push(bad(format!("cannot be decoded: {e}.")));
                return round;
            }
        };
    let sem = Arc::new(tokio::sync::Semaphore::new(req.parallelism.max(1)));
    let mut set = tokio::task::JoinSet::new();
    for i in instances {
        if req.deployment.as_ref().is_some_and(|d| *d != i.deployment) {
            continue;
        }
        let id = InstanceId {
            deployment: i.deployment,
            component: i.component,
            key: i.key,
        };
        let base = req.base.clone();
        let root = req.state_root.clone();
        let sem = sem.clone();
        let observer: Arc<dyn Observer> = match link {
            Some(l) => l.observer(&id),
            None => Arc::new(Silent),
        };
        set.spawn(async move {
            let _permit = sem.acquire_owned().await;
            let state_dir = super::workspaces::ensure_dir(&root, &id.workspace());
            let state_dir = match state_dir {
                Ok(d) => d,
                Err(d) => return (id, i.removed, i.replay.level, Err(Box::new(d))),
            };
            let mut opts = base;
            opts.dir = i.replay.dir;
            opts.state_dir = state_dir;
            opts.test_providers = i.replay.providers;
            opts.workspace = None;
            let mode = i.plan.mode;
            let started = api::apply_start(&opts, mode, Some(i.plan), observer).await;
            (id, i.removed, i.replay.level, Ok(started))
        });
    }
    while let Some(joined) = set.join_next().await {
        let Ok((id, removed, level, started)) = joined else {
            continue;
        };
        match started {
            Err(d) => round.results.push(InstanceResult {
                id,
                removed,
                outcome: Outcome::Failed,
                diags: (*d).into(),
                config: None,
                replay: None,
            }),
            Ok(ApplyStart::Done(report)) => round.results.push(InstanceResult {
                id,
                removed,
                outcome: match report.result {
                    Some(a) if !report.diags.has_errors() => Outcome::Applied(Box::new(a)),
                    _ => Outcome::Failed,
                },
                diags: report.diags,
                config: report.config,
                replay: None,
            }),
            Ok(ApplyStart::Ask(p)) => {
                let plan = Box::new(p.plan().clone());
                round
                    .pending
                    .push((id.clone(), if removed { 0 } else { level }, p));
                round.results.push(InstanceResult {
                    id,
                    removed,
                    outcome: Outcome::Planned(plan),
                    diags: Diagnostics::new(),
                    config: None,
                    replay: None,
                });
            }
        }
    }
    round.results.sort_by(|a, b| a.id.cmp(&b.id));
    round
}

/// The stack's outputs for one deployment (`output` blocks), from the components' states.
pub fn outputs(
    stack: &Stack,
    req: &StackRequest,
    deployment: &str,
) -> Result<BTreeMap<String, (Value, bool)>, Diagnostics> {
    let model = &stack.model;
    let in_state = instances_in_state(&req.state_root).map_err(Diagnostics::from)?;
    let vars = deployment_vars(model, deployment);
    let mut values = ValueMap::new();
    for (name, c) in &model.components {
        let mut outs = BTreeMap::new();
        let mut keys = Vec::new();
        for id in in_state
            .iter()
            .filter(|i| i.deployment == deployment && i.component == *name)
        {
            if let Some(v) = state_outputs(&req.state_root, id).map_err(Diagnostics::from)? {
                outs.insert(id.key.clone(), v);
                keys.push(id.key.clone());
            }
        }
        if c.for_each.is_none() && keys.is_empty() {
            continue;
        }
        values.insert(name.clone(), component_value(&Some(keys), &outs));
    }
    let locals = RefCell::new(BTreeMap::new());
    let mut out = BTreeMap::new();
    let mut diags = Diagnostics::new();
    for (name, o) in &model.outputs {
        let scope = CompScope {
            model,
            file: o.file,
            vars: &vars,
            locals: &locals,
            components: &values,
            each: None,
        };
        match crate::eval::eval(&o.value, &scope) {
            Ok(v) => {
                let v = match &o.ty {
                    Some(t) if v.is_wholly_known() => {
                        crate::eval::expr::convert(&v, t).unwrap_or(v)
                    }
                    _ => v,
                };
                out.insert(name.clone(), (v, o.sensitive));
            }
            Err(d) => diags.extend(d),
        }
    }
    if diags.has_errors() {
        return Err(diags);
    }
    Ok(out)
}

/// What `stack show` prints of one component instance: its resource instances and outputs.
pub struct ShownInstance {
    pub id: InstanceId,
    pub resources: Vec<String>,
    pub outputs: BTreeMap<String, (Value, bool)>,
    pub runs: usize,
}

/// Every component instance in the state (of the selected deployment), with its resources
/// and outputs.
pub fn show(req: &StackRequest) -> Result<Vec<ShownInstance>, Diagnostic> {
    let mut out = Vec::new();
    for id in instances_in_state(&req.state_root)? {
        if req.deployment.as_ref().is_some_and(|d| *d != id.deployment) {
            continue;
        }
        let dir = workspace::dir(&req.state_root, &id.workspace());
        let Some((state, _)) = super::state_read::StateRead::open(&dir, "stack show")? else {
            continue;
        };
        let snap = state.snapshot();
        out.push(ShownInstance {
            resources: snap
                .resources
                .iter()
                .filter(|(_, i)| i.current.is_some())
                .map(|(a, _)| a.to_string())
                .collect(),
            outputs: snap
                .outputs
                .iter()
                .map(|(n, o)| (n.clone(), (Value::from_stored(&o.value), o.sensitive)))
                .collect(),
            runs: snap.runs.len(),
            id,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workspace_names_round_trip() {
        for (d, c, k) in [
            ("dev", "net", None),
            ("prod.eu", "app", Some("a b/c\"é")),
            ("x", "y", Some("")),
        ] {
            let id = InstanceId {
                deployment: d.into(),
                component: c.into(),
                key: k.map(str::to_string),
            };
            let w = id.workspace();
            assert!(workspace::check_name(&w).is_ok(), "{w}");
            assert_eq!(InstanceId::parse_workspace(&w), Some(id));
        }
    }
}
