//! What the UI knows: the events of the log folded once, with the indexes its views need.
//!
//! The fold is the state crate's own ([`Snapshot::apply`]): after each event the model looks
//! up the addresses that event touched in the folded snapshot and records a new *version* of
//! each one whose object changed. So "the state at event N" is, for every address, its last
//! version at or before N (a binary search), and never a second implementation of the fold's
//! rules. Memory: the events plus one copy of each distinct object version.
//!
//! Every view is a function from the model to JSON; none can write. Values reach the pages
//! only through the plan renderer (`plan::render_change`) or [`masked_json`], so sensitive
//! values read `(sensitive value)` everywhere.

use super::plan::deferral_json;
use crate::addr::{Mode, ModulePath, ProviderAddr, ResourceInstanceAddr};
use crate::engine::api::history;
use crate::plan::{render_change, Action, Change, RenderOptions};
use crate::value::Value;
use cairn_state::{
    Event, EventBody, OpAction, OutputValue, PlanRecord, PlannedAction, PlannedChange,
    RecordedDiagnostic, ResourceObject, RunRecord, Snapshot, StoredValue,
};
use serde_json::{json, Value as J};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// One object as it was between two events (the current object of a managed instance, or a
/// data result).
#[derive(Debug, PartialEq)]
pub(crate) struct Obj {
    pub(crate) attrs: StoredValue,
    pub(crate) tainted: bool,
    /// Deposed objects the instance also had.
    pub(crate) deposed: usize,
    pub(crate) provider: ProviderAddr,
}

#[derive(Debug)]
struct Version {
    seq: u64,
    obj: Option<Arc<Obj>>,
}

/// Everything that happened to one address.
#[derive(Debug, Default)]
struct Life {
    /// The seqs of the events that touched it.
    touches: Vec<u64>,
    /// Its object after each event that changed it (`None`: absent), in order.
    versions: Vec<Version>,
}

impl Life {
    /// The version in force right after event `seq`.
    fn at(&self, seq: u64) -> Option<&Version> {
        let i = self.versions.partition_point(|v| v.seq <= seq);
        i.checked_sub(1).map(|i| &self.versions[i])
    }

    fn obj_at(&self, seq: u64) -> Option<&Arc<Obj>> {
        self.at(seq).and_then(|v| v.obj.as_ref())
    }
}

/// Every address's versions laid out flat, in address order, rebuilt after each batch of
/// events: "the state at event N" and "what changed between two events" walk these arrays
/// (one binary search in a short contiguous slice per address) instead of chasing a tree of
/// separately allocated lives, which cost a cache miss or three per address.
#[derive(Debug, Default)]
struct Flat {
    addrs: Vec<ResourceInstanceAddr>,
    texts: Vec<String>,
    /// Index into `modules` of each address's module.
    module: Vec<u32>,
    /// The distinct module paths, sorted.
    modules: Vec<ModulePath>,
    /// Address `i`'s versions are `vseq[vstart[i]..vstart[i + 1]]` (with `vlive`: whether
    /// the address had an object from that event on).
    vstart: Vec<u32>,
    vseq: Vec<u64>,
    vlive: Vec<bool>,
}

impl Flat {
    fn build(lives: &BTreeMap<ResourceInstanceAddr, Life>) -> Flat {
        let mut f = Flat::default();
        let mut modules: BTreeMap<&ModulePath, u32> = BTreeMap::new();
        for addr in lives.keys() {
            let n = modules.len() as u32;
            modules.entry(&addr.resource.module).or_insert(n);
        }
        // Number the modules in sorted order.
        for (i, (_, n)) in modules.iter_mut().enumerate() {
            *n = i as u32;
        }
        f.modules = modules.keys().map(|m| (*m).clone()).collect();
        f.vstart.push(0);
        for (addr, life) in lives {
            f.module.push(modules[&addr.resource.module]);
            f.addrs.push(addr.clone());
            f.texts.push(addr.to_string());
            for v in &life.versions {
                f.vseq.push(v.seq);
                f.vlive.push(v.obj.is_some());
            }
            f.vstart.push(f.vseq.len() as u32);
        }
        f
    }

    /// The index (into `vseq`) of address `i`'s version in force after event `seq`, if the
    /// address had an object then.
    fn live_at(&self, i: usize, seq: u64) -> Option<usize> {
        let (a, b) = (self.vstart[i] as usize, self.vstart[i + 1] as usize);
        let k = self.vseq[a..b].partition_point(|s| *s <= seq);
        let v = a + k.checked_sub(1)?;
        self.vlive[v].then_some(v)
    }

    /// The object of version `v` (an index into `vseq`) of address `i`.
    fn obj<'m>(
        &self,
        lives: &'m BTreeMap<ResourceInstanceAddr, Life>,
        i: usize,
        v: usize,
    ) -> Option<&'m Arc<Obj>> {
        let life = lives.get(&self.addrs[i])?;
        life.versions.get(v - self.vstart[i] as usize)?.obj.as_ref()
    }
}

/// An operation: where it started and how it was settled.
#[derive(Debug, Clone)]
struct Op {
    addr: ResourceInstanceAddr,
    action: OpAction,
    run: u64,
    settled: Option<Settled>,
}

#[derive(Debug, Clone)]
struct Settled {
    seq: u64,
    run: u64,
    kind: &'static str,
    how: Option<String>,
}

/// The UI's view of one state log.
pub struct Model {
    events: Vec<Event>,
    fold: Snapshot,
    lives: BTreeMap<ResourceInstanceAddr, Life>,
    flat: Flat,
    ops: HashMap<u64, Op>,
    /// The operations each run started (seqs of their starts), so a run's page or timeline
    /// row does not walk every operation of the log.
    ops_by_run: HashMap<u64, Vec<u64>>,
    outputs: Vec<(u64, Arc<BTreeMap<String, OutputValue>>)>,
    /// Each run's recorded plan (`RunPlanned`): the seq of the record.
    planned: HashMap<u64, u64>,
    /// Each run's recorded diagnostics (`RunDiagnostics`): the seq of the record.
    run_diags: HashMap<u64, u64>,
    /// Reads a run's plan deferred to apply: (run, address) → (seq of the plan record, index of
    /// the change in it).
    deferred: HashMap<(u64, ResourceInstanceAddr), (u64, usize)>,
    /// Where each resource's block is in the configuration (`main.tf:3:1`), when the
    /// configuration could be loaded.
    locations: HashMap<(ModulePath, Mode, String, String), String>,
    /// The root module's sensitive variables: their `-var` values in a recorded command line
    /// are masked when shown (runs recorded before Cairn masked them at write time included).
    sensitive_vars: std::collections::BTreeSet<String>,
    /// What each run's own events did, counted as they are folded: a run killed mid-apply
    /// or refused before it finished has no summary (or a zero one) to say it.
    counts: HashMap<u64, Counts>,
    pub(crate) warnings: Vec<String>,
    /// Whether a command holds the state now (the reader says so on each look): the log's
    /// last run without an end is `running` while one does, `unfinished` once none does (its
    /// process died: `kill -9`, a crash).
    pub(crate) writer_busy: bool,
}

/// A run's counts taken from its events.
#[derive(Debug, Default, Clone)]
struct Counts {
    added: u64,
    changed: u64,
    destroyed: u64,
    read: u64,
    /// Operations that failed, with their addresses (a recorded diagnostic about one of them
    /// is the same error, not another).
    failed: Vec<String>,
}

impl Default for Model {
    fn default() -> Self {
        Model::new()
    }
}

/// A value as JSON with every sensitive part replaced by `"(sensitive value)"`.
pub(crate) fn masked_json(v: &StoredValue) -> J {
    match v {
        StoredValue::Sensitive(_) => J::String("(sensitive value)".into()),
        StoredValue::List(x) | StoredValue::Set(x) | StoredValue::Tuple(x) => {
            J::Array(x.iter().map(masked_json).collect())
        }
        StoredValue::Map(m) | StoredValue::Object(m) => {
            J::Object(m.iter().map(|(k, v)| (k.clone(), masked_json(v))).collect())
        }
        other => other.to_json(),
    }
}

/// An object's attributes as `name = value` lines (values as JSON, sensitive ones masked),
/// names aligned as in the plan text.
pub(crate) fn attrs_text(v: &StoredValue) -> String {
    let StoredValue::Object(m) = v else {
        return masked_json(v).to_string();
    };
    let width = m.keys().map(|k| k.len()).max().unwrap_or(0);
    m.iter()
        .map(|(k, v)| {
            let text = match v {
                StoredValue::Sensitive(_) => "(sensitive value)".to_string(),
                v => serde_json::to_string_pretty(&masked_json(v)).unwrap_or_default(),
            };
            format!("{k:width$} = {text}")
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The saved plan an `apply` run applied: its one positional argument.
pub(crate) fn plan_file_of(command: &str, args: &[&String]) -> Option<String> {
    if command != "apply" {
        return None;
    }
    // Flags that take their value as the next argument.
    const WITH_VALUE: [&str; 10] = [
        "-var",
        "--var",
        "-var-file",
        "--var-file",
        "-target",
        "--target",
        "-replace",
        "--replace",
        "-parallelism",
        "--parallelism",
    ];
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if WITH_VALUE.contains(&a.as_str()) {
            it.next();
        } else if !a.starts_with('-') {
            return Some(a.to_string());
        }
    }
    None
}

fn plan_action(a: OpAction) -> Action {
    match a {
        OpAction::Create => Action::Create,
        OpAction::Update => Action::Update,
        OpAction::Delete => Action::Delete,
    }
}

/// A before/after diff drawn as the plan text draws it, without the plan's future-tense
/// header (the page says what happened).
pub(crate) fn diff_text(
    addr: &ResourceInstanceAddr,
    provider: &ProviderAddr,
    action: Action,
    before: Option<&StoredValue>,
    after: Option<&StoredValue>,
) -> String {
    let ch = Change {
        addr: addr.clone(),
        provider: crate::plan::shared_provider(provider),
        action,
        before: before.map(Value::from_stored),
        after: after.map(Value::from_stored),
        replace_paths: Vec::new(),
        reason: None,
        sensitive_attrs: Vec::new(),
        diff_unavailable: false,
        importing: None,
        deposed: None,
    };
    let text = render_change(
        &ch,
        &RenderOptions {
            color: false,
            width: 0,
        },
    );
    text.lines()
        .skip_while(|l| l.trim_start().starts_with('#'))
        .collect::<Vec<_>>()
        .join("\n")
}

fn module_name(m: &ModulePath) -> String {
    if m.is_root() {
        "(root module)".into()
    } else {
        m.to_string()
    }
}

/// Filters of the timeline.
#[derive(Debug, Default, Clone, serde::Deserialize)]
pub struct TimelineQuery {
    pub command: Option<String>,
    pub outcome: Option<String>,
    /// Only runs older than this one (the page's "older runs" cursor).
    pub before: Option<u64>,
    /// At most this many runs (default [`TIMELINE_PAGE`]).
    pub limit: Option<usize>,
}

/// How many runs a page of the timeline lists unless asked otherwise.
pub const TIMELINE_PAGE: usize = 50;

/// What the state view asks for.
#[derive(Debug, Default, Clone, serde::Deserialize)]
pub struct StateQuery {
    pub at: Option<u64>,
    /// Only addresses containing this text.
    pub q: Option<String>,
    /// At most this many instances listed (all are counted).
    pub limit: Option<usize>,
}

impl Model {
    pub fn new() -> Model {
        Model {
            events: Vec::new(),
            fold: Snapshot::new(),
            lives: BTreeMap::new(),
            flat: Flat::default(),
            ops: HashMap::new(),
            ops_by_run: HashMap::new(),
            outputs: Vec::new(),
            planned: HashMap::new(),
            run_diags: HashMap::new(),
            deferred: HashMap::new(),
            locations: HashMap::new(),
            sensitive_vars: Default::default(),
            counts: HashMap::new(),
            warnings: Vec::new(),
            writer_busy: true,
        }
    }

    /// The seq of the last event known.
    pub fn head(&self) -> u64 {
        self.fold.head
    }

    pub(crate) fn run_count(&self) -> usize {
        self.fold.runs.len()
    }

    /// What the stack view shows of a component instance's state: its resource instances,
    /// outputs and runs now, and its last run.
    pub(crate) fn state_summary(&self) -> J {
        json!({
            "head": self.head(),
            "resources": self.fold.resources.values().filter(|i| i.current.is_some()).count(),
            "outputs": self.fold.outputs.len(),
            "runs": self.fold.runs.len(),
            "last_run": self.fold.runs.last().map(|r| self.run_json(r)),
        })
    }

    /// Remembers where each resource block of the configuration is, for error locations.
    pub(crate) fn set_config(&mut self, config: &crate::config::Config) {
        self.sensitive_vars = config.sensitive_variables();
        for m in config.modules() {
            for (k, r) in &m.resources {
                self.locations.insert(
                    (m.path.clone(), k.mode, k.type_.clone(), k.name.clone()),
                    config.sources.location(r.span),
                );
            }
        }
    }

    fn location(&self, addr: &ResourceInstanceAddr) -> Option<&String> {
        let r = &addr.resource;
        self.locations.get(&(
            r.module.without_keys(),
            r.mode,
            r.type_.clone(),
            r.name.clone(),
        ))
    }

    /// Folds more events (they must follow the head).
    pub fn extend(&mut self, events: Vec<Event>) {
        let mut touched: Vec<ResourceInstanceAddr> = Vec::new();
        for e in events {
            if e.seq != self.fold.head + 1 {
                self.warnings.push(format!(
                    "event {} does not follow {}; ignored",
                    e.seq, self.fold.head
                ));
                continue;
            }
            touched.clear();
            self.touched(&e, &mut touched);
            self.fold.apply(&e);
            match &e.body {
                EventBody::OutputsSet { outputs } => {
                    self.outputs.push((e.seq, Arc::new(outputs.clone())));
                }
                EventBody::RunPlanned { plan } => {
                    self.planned.insert(e.run, e.seq);
                    for (i, c) in plan.changes.iter().enumerate() {
                        if c.action == PlannedAction::Read {
                            self.deferred.insert((e.run, c.addr.clone()), (e.seq, i));
                        }
                    }
                }
                EventBody::RunDiagnostics { .. } => {
                    self.run_diags.insert(e.run, e.seq);
                }
                EventBody::OperationSucceeded { op, .. } => {
                    if let Some(o) = self.ops.get(op) {
                        let c = self.counts.entry(e.run).or_default();
                        match o.action {
                            OpAction::Create => c.added += 1,
                            OpAction::Update => c.changed += 1,
                            OpAction::Delete => c.destroyed += 1,
                        }
                    }
                }
                EventBody::OperationFailed { op, .. } => {
                    if let Some(o) = self.ops.get(op) {
                        let addr = o.addr.to_string();
                        self.counts.entry(e.run).or_default().failed.push(addr);
                    }
                }
                EventBody::DataRead { .. } => self.counts.entry(e.run).or_default().read += 1,
                _ => {}
            }
            for addr in &touched {
                let now = self.object_now(addr);
                let life = self.lives.entry(addr.clone()).or_default();
                if life.touches.last() != Some(&e.seq) {
                    life.touches.push(e.seq);
                }
                let last = life.versions.last().and_then(|v| v.obj.as_deref());
                if last != now.as_ref() {
                    life.versions.push(Version {
                        seq: e.seq,
                        obj: now.map(Arc::new),
                    });
                }
            }
            self.events.push(e);
        }
        self.flat = Flat::build(&self.lives);
    }

    fn object_now(&self, addr: &ResourceInstanceAddr) -> Option<Obj> {
        match addr.resource.mode {
            Mode::Managed => {
                let inst = self.fold.resources.get(addr)?;
                let cur = inst.current.as_ref()?;
                Some(Obj {
                    attrs: cur.attrs.clone(),
                    tainted: cur.tainted,
                    deposed: inst.deposed.len(),
                    provider: cur.provider.addr.clone(),
                })
            }
            Mode::Ephemeral => None,
            Mode::Data => {
                let d = self.fold.data.get(addr)?;
                Some(Obj {
                    attrs: d.attrs.clone(),
                    tainted: false,
                    deposed: 0,
                    provider: d.provider.addr.clone(),
                })
            }
        }
    }

    /// The addresses an event touches (recording operations as they start and settle).
    fn touched(&mut self, e: &Event, out: &mut Vec<ResourceInstanceAddr>) {
        match &e.body {
            EventBody::ResourceRead { addr, .. }
            | EventBody::ResourceGone { addr }
            | EventBody::ObjectDeposed { addr, .. }
            | EventBody::ObjectRestored { addr, .. }
            | EventBody::DataRead { addr, .. }
            | EventBody::DataDropped { addr }
            | EventBody::ResourceForgotten { addr }
            | EventBody::ResourceRehomed { addr, .. }
            | EventBody::DependenciesUpdated { addr, .. }
            | EventBody::ResourceTainted { addr }
            | EventBody::ResourceUntainted { addr } => out.push(addr.clone()),
            EventBody::OperationStarted { addr, action, .. } => {
                self.ops.insert(
                    e.seq,
                    Op {
                        addr: addr.clone(),
                        action: *action,
                        run: e.run,
                        settled: None,
                    },
                );
                self.ops_by_run.entry(e.run).or_default().push(e.seq);
                out.push(addr.clone());
            }
            EventBody::OperationSucceeded { op, .. }
            | EventBody::OperationFailed { op, .. }
            | EventBody::PendingResolved { op, .. } => {
                let (kind, how) = match &e.body {
                    EventBody::OperationSucceeded { .. } => ("succeeded", None),
                    EventBody::OperationFailed { error, .. } => ("failed", Some(error.clone())),
                    EventBody::PendingResolved { how, .. } => ("resolved", Some(how.clone())),
                    _ => unreachable!("matched above"),
                };
                if let Some(o) = self.ops.get_mut(op) {
                    o.settled = Some(Settled {
                        seq: e.seq,
                        run: e.run,
                        kind,
                        how,
                    });
                    out.push(o.addr.clone());
                }
            }
            EventBody::ResourceMoved { from, to } => {
                out.push(from.clone());
                out.push(to.clone());
            }
            EventBody::StateImported { resources, .. } => {
                out.extend(resources.iter().map(|(a, _)| a.clone()));
            }
            EventBody::RunStarted { .. }
            | EventBody::RunFinished { .. }
            | EventBody::ProviderRegistered { .. }
            | EventBody::ProviderUpdated { .. }
            | EventBody::ProviderRemoved { .. }
            | EventBody::OutputsSet { .. }
            | EventBody::RunPlanned { .. }
            | EventBody::RunDiagnostics { .. }
            | EventBody::ProviderReplaced { .. }
            | EventBody::RunContext(_) => {}
        }
    }

    fn run_json(&self, r: &RunRecord) -> J {
        let s = &r.summary;
        // The summary a finished run wrote, or what its events show when they show more (a
        // run killed mid-apply wrote none; a refused one wrote zeros above its error).
        let (c, errors) = self.event_counts(r.id);
        // The recorded arguments start with the command's own words (`apply`, `state rm`).
        let words = r.command.split_whitespace().count();
        let masked = crate::config::mask_var_args(&r.args, &self.sensitive_vars);
        let args: Vec<&String> = if masked
            .iter()
            .take(words)
            .map(String::as_str)
            .eq(r.command.split_whitespace())
        {
            masked.iter().skip(words).collect()
        } else {
            masked.iter().collect()
        };
        json!({
            "id": r.id,
            "command": r.command,
            "args": args,
            "user": r.user,
            "pid": r.pid,
            "host": r.context.host,
            "git_commit": r.context.git_commit,
            "git_branch": r.context.git_branch,
            "ci_job": r.context.ci_job,
            "started_ms": r.started_ms,
            "finished_ms": r.finished_ms,
            "duration_ms": r.finished_ms.map(|f| f.saturating_sub(r.started_ms)),
            "outcome": self.outcome(r),
            "plan_file": plan_file_of(&r.command, &args),
            "planned": self.planned.contains_key(&r.id),
            "first_seq": r.id,
            "last_seq": r.last_seq,
            "added": c.added.max(s.added),
            "changed": c.changed.max(s.changed),
            "destroyed": c.destroyed.max(s.destroyed),
            "read": c.read.max(s.read),
            "errors": errors.max(s.errors),
        })
    }

    fn outcome(&self, r: &RunRecord) -> String {
        match r.outcome {
            Some(o) => o.to_string(),
            None if self.fold.open_run == Some(r.id) && self.writer_busy => "running".into(),
            None => "unfinished".into(),
        }
    }

    /// A run's counts from its events: what its operations did and the errors it recorded
    /// (failed operations, and recorded errors that are not about one of them), whatever way
    /// it ended. `(counts, errors)`.
    fn event_counts(&self, run: u64) -> (Counts, u64) {
        let c = self.counts.get(&run).cloned().unwrap_or_default();
        let others = self
            .recorded_diags(run)
            .iter()
            .filter(|d| d.severity == cairn_state::event::Severity::Error)
            .filter(|d| d.address.as_ref().is_none_or(|a| !c.failed.contains(a)))
            .count() as u64;
        let errors = c.failed.len() as u64 + others;
        (c, errors)
    }

    /// The operations run `run` started: (seq of the start, operation).
    fn run_ops(&self, run: u64) -> impl Iterator<Item = (&u64, &Op)> + '_ {
        self.ops_by_run
            .get(&run)
            .into_iter()
            .flatten()
            .filter_map(|s| self.ops.get_key_value(s))
    }

    /// Operations a run started and did not settle itself, with how a later run did.
    fn left_pending(&self, run: u64) -> Vec<J> {
        let mut out: Vec<(u64, J)> = self
            .run_ops(run)
            .filter(|(_, o)| o.settled.as_ref().is_none_or(|s| s.run != run))
            .map(|(seq, o)| {
                (
                    *seq,
                    json!({
                        "op": seq,
                        "addr": o.addr.to_string(),
                        "action": o.action.to_string(),
                        "resolution": o.settled.as_ref().map(|s| json!({
                            "seq": s.seq, "run": s.run, "kind": s.kind, "how": s.how,
                        })),
                    }),
                )
            })
            .collect();
        out.sort_by_key(|(s, _)| *s);
        out.into_iter().map(|(_, j)| j).collect()
    }

    /// The saved plan file a run applied, if it applied one.
    pub(crate) fn run_plan_file(&self, id: u64) -> Option<String> {
        let r = self.fold.runs.iter().find(|r| r.id == id)?;
        self.run_json(r)["plan_file"].as_str().map(str::to_string)
    }

    /// The run that applied a saved plan made at state position `base_seq` from a file named
    /// `file_name`: an apply can only take it as the next run (`apply FILE` refuses it once the
    /// state moved), and the run recorded the plan it applied.
    pub(crate) fn saved_plan_applied_by(&self, base_seq: u64, file_name: &str) -> Option<u64> {
        let id = base_seq + 1;
        let i = self.fold.runs.binary_search_by_key(&id, |r| r.id).ok()?;
        let r = &self.fold.runs[i];
        let file = self.run_plan_file(id)?;
        let same = std::path::Path::new(&file)
            .file_name()
            .is_some_and(|n| n.to_string_lossy() == file_name);
        (same && self.planned.contains_key(&r.id)).then_some(r.id)
    }

    /// The plan a run recorded, with the run's command.
    pub fn run_plan(&self, id: u64) -> Option<(&PlanRecord, String)> {
        let seq = self.planned.get(&id)?;
        let r = self.fold.runs.iter().find(|r| r.id == id)?;
        match &self.events.get(*seq as usize - 1)?.body {
            EventBody::RunPlanned { plan } => Some((plan, r.command.clone())),
            _ => None,
        }
    }

    /// The diagnostics a run recorded when it failed.
    fn recorded_diags(&self, run: u64) -> &[RecordedDiagnostic] {
        let Some(seq) = self.run_diags.get(&run) else {
            return &[];
        };
        match self.events.get(*seq as usize - 1).map(|e| &e.body) {
            Some(EventBody::RunDiagnostics { diagnostics }) => diagnostics,
            _ => &[],
        }
    }

    /// Where the run recorded its error about `addr` (`file:line:col`), if it did.
    fn recorded_location(&self, run: u64, addr: &ResourceInstanceAddr) -> Option<String> {
        let a = addr.to_string();
        let ds = self.recorded_diags(run);
        ds.iter()
            .filter(|d| d.address.as_deref() == Some(a.as_str()))
            .find_map(|d| d.location.clone())
    }

    /// A failed operation's location: as the run recorded it when it failed, else (logs
    /// from before Cairn recorded diagnostics) where the resource's block is now.
    fn failure_location(&self, run: u64, addr: &ResourceInstanceAddr) -> (Option<String>, bool) {
        match self.recorded_location(run, addr) {
            Some(l) => (Some(l), true),
            None => (self.location(addr).cloned(), false),
        }
    }

    /// A run's recorded diagnostics as JSON (`location`: `file:line:col` when they had one).
    pub(crate) fn diagnostics_json(&self, run: u64) -> Vec<J> {
        self.recorded_diags(run)
            .iter()
            .map(|d| {
                json!({
                    "severity": match d.severity {
                        cairn_state::event::Severity::Error => "error",
                        cairn_state::event::Severity::Warning => "warning",
                    },
                    "summary": d.summary,
                    "detail": d.detail,
                    "location": d.location,
                    "address": d.address,
                })
            })
            .collect()
    }

    /// The reads a run's plan deferred to apply: why, the causal chain, and the event that
    /// read each (if the run got that far).
    fn deferred_reads(&self, run: u64, last_seq: u64) -> Vec<J> {
        let Some((plan, _)) = self.run_plan(run) else {
            return Vec::new();
        };
        plan.changes
            .iter()
            .filter(|c| c.action == PlannedAction::Read)
            .map(|c| {
                let read_at = self.lives.get(&c.addr).and_then(|l| {
                    l.touches.iter().copied().find(|s| {
                        *s >= run
                            && *s <= last_seq
                            && matches!(
                                self.events[*s as usize - 1].body,
                                EventBody::DataRead { .. }
                            )
                    })
                });
                let mut j = deferral_json(c);
                j["addr"] = json!(c.addr.to_string());
                j["read_at"] = json!(read_at);
                j
            })
            .collect()
    }

    /// The operations a run started that failed, with their errors.
    fn failures(&self, run: u64) -> Vec<J> {
        let mut out: Vec<(u64, J)> = self
            .run_ops(run)
            .filter_map(|(seq, o)| {
                let s = o.settled.as_ref().filter(|s| s.kind == "failed")?;
                let (location, recorded) = self.failure_location(run, &o.addr);
                Some((
                    *seq,
                    json!({
                        "addr": o.addr.to_string(),
                        "action": o.action.to_string(),
                        "error": s.how,
                        "location": location,
                        "location_recorded": recorded,
                    }),
                ))
            })
            .collect();
        out.sort_by_key(|(s, _)| *s);
        out.into_iter().map(|(_, j)| j).collect()
    }

    /// Every run, newest first, filtered; failed and interrupted runs with what they left
    /// pending and how it was resolved.
    pub fn timeline(&self, q: &TimelineQuery) -> J {
        let want =
            |f: &Option<String>, v: &str| f.as_deref().is_none_or(|f| f.is_empty() || f == v);
        let mut commands: Vec<&str> = self.fold.runs.iter().map(|r| r.command.as_str()).collect();
        commands.sort_unstable();
        commands.dedup();
        let limit = q.limit.unwrap_or(TIMELINE_PAGE).clamp(1, 1000);
        let mut runs = Vec::new();
        let mut matched = 0usize;
        let mut next_before = None;
        for r in self.fold.runs.iter().rev() {
            if !want(&q.command, &r.command) || !want(&q.outcome, &self.outcome(r)) {
                continue;
            }
            matched += 1;
            if q.before.is_some_and(|b| r.id >= b) {
                continue;
            }
            if runs.len() == limit {
                // Only counted from here: the page shows `limit` runs at a time.
                next_before.get_or_insert(runs.last().and_then(|j: &J| j["id"].as_u64()));
                continue;
            }
            let mut j = self.run_json(r);
            if !matches!(r.outcome, Some(cairn_state::RunOutcome::Success)) {
                j["left_pending"] = J::Array(self.left_pending(r.id));
                j["failures"] = J::Array(self.failures(r.id));
                j["diagnostics"] = J::Array(self.diagnostics_json(r.id));
            }
            runs.push(j);
        }
        json!({
            "head": self.head(),
            "total": self.fold.runs.len(),
            "matched": matched,
            "commands": commands,
            "runs": runs,
            // The cursor of the next (older) page, when there is one.
            "next_before": next_before.flatten(),
        })
    }

    /// [`Model::timeline`] with the plan-only runs (`cairn plan`'s records beside the log,
    /// oldest first in `plans`) that started within the page's span of time, newest first,
    /// filtered as the runs are: `plans` in the answer, `plans_total` how many there are.
    pub fn timeline_with_plans(
        &self,
        q: &TimelineQuery,
        plans: &[cairn_state::plan_runs::PlanRun],
    ) -> J {
        let mut t = self.timeline(q);
        if plans.is_empty() {
            return t;
        }
        let want =
            |f: &Option<String>, v: &str| f.as_deref().is_none_or(|f| f.is_empty() || f == v);
        let started = |id: u64| {
            let i = self.fold.runs.partition_point(|r| r.id < id);
            self.fold
                .runs
                .get(i)
                .filter(|r| r.id == id)
                .map(|r| r.started_ms)
        };
        // Newer than the page's newest run's successor, older than the next page's runs.
        let upper = q.before.and_then(started).unwrap_or(u64::MAX);
        let lower = match t["next_before"].as_u64() {
            Some(_) => t["runs"]
                .as_array()
                .and_then(|r| r.last())
                .and_then(|r| r["started_ms"].as_u64())
                .unwrap_or(0),
            None => 0,
        };
        let shown: Vec<J> = plans
            .iter()
            .rev()
            .filter(|p| p.started_ms >= lower && p.started_ms < upper)
            .filter(|p| want(&q.command, "plan") && want(&q.outcome, &p.outcome))
            .map(|p| self.plan_run_json(p))
            .collect();
        if let Some(c) = t["commands"].as_array_mut() {
            if !c.iter().any(|x| x == "plan") {
                c.push(json!("plan"));
                c.sort_by(|a, b| a.as_str().cmp(&b.as_str()));
            }
        }
        t["plans"] = J::Array(shown);
        t["plans_total"] = json!(plans.len());
        t
    }

    /// A plan-only run as the timeline shows it.
    fn plan_run_json(&self, p: &cairn_state::plan_runs::PlanRun) -> J {
        let masked = crate::config::mask_var_args(&p.args, &self.sensitive_vars);
        let args: Vec<&String> = masked.iter().skip_while(|a| *a == "plan").collect();
        json!({
            "kind": "plan",
            "id": p.id,
            "command": "plan",
            "args": args,
            "user": p.user,
            "pid": p.pid,
            "host": p.context.host,
            "git_commit": p.context.git_commit,
            "git_branch": p.context.git_branch,
            "ci_job": p.context.ci_job,
            "started_ms": p.started_ms,
            "finished_ms": p.finished_ms,
            "duration_ms": p.finished_ms.saturating_sub(p.started_ms),
            "outcome": p.outcome,
            "mode": p.mode,
            "add": p.add,
            "change": p.change,
            "destroy": p.destroy,
            "read": p.read,
            "import": p.import,
            "forget": p.forget,
            "moved": p.moved,
            "errors": p.errors,
            "base_seq": p.base_seq,
            "saved_to": p.saved_to,
            "changes": p.changes.iter().map(|(action, addr)| json!({"action": action, "addr": addr})).collect::<Vec<_>>(),
            "changes_total": p.changes_total,
        })
    }

    /// One event as the pages show it: the description every command shares
    /// (`engine::api::history`), and what only the pages add (diffs, deferral chains,
    /// failure locations, how an operation was settled, outputs, diagnostics).
    fn event_json(&self, e: &Event) -> J {
        let mut j = json!({
            "seq": e.seq,
            "time_ms": e.time_ms,
            "run": e.run,
            "kind": e.body.kind(),
        });
        // The operation an event starts or settles, so a page can show the pair as one line.
        match &e.body {
            EventBody::OperationStarted { .. } => j["op"] = json!(e.seq),
            EventBody::OperationSucceeded { op, .. } | EventBody::OperationFailed { op, .. } => {
                j["op"] = json!(op)
            }
            _ => {}
        }
        let d = history::describe(e, self);
        let started = |op: &u64| match self.events.get((*op as usize).wrapping_sub(1)) {
            Some(Event {
                body:
                    EventBody::OperationStarted {
                        prior, provider, ..
                    },
                ..
            }) => Some((prior, provider)),
            _ => None,
        };
        // An outcome whose start is not in the model is shown without words, as before.
        let described = match &e.body {
            EventBody::OperationSucceeded { op, .. } => started(op).is_some(),
            _ => true,
        };
        if described {
            if let Some(addr) = &d.addr {
                j["addr"] = json!(addr);
            }
            if let Some(from) = &d.from {
                j["from"] = json!(from);
            }
            if let Some(label) = d.label {
                j["label"] = json!(label);
            }
            if let Some(text) = &d.text {
                j["text"] = json!(text);
            }
        }
        let prior_version = |addr: &ResourceInstanceAddr| {
            self.lives
                .get(addr)
                .and_then(|l| l.obj_at(e.seq - 1).cloned())
        };
        match &e.body {
            EventBody::ResourceRead { addr, attrs, .. } => {
                if let (Some("drifted"), Some(b)) = (d.label, prior_version(addr)) {
                    j["diff"] = json!(diff_text(
                        addr,
                        &b.provider,
                        Action::Update,
                        Some(&b.attrs),
                        Some(attrs)
                    ));
                }
            }
            EventBody::OperationStarted { .. } => {
                if let Some(o) = self.ops.get(&e.seq) {
                    if let Some(s) = &o.settled {
                        j["settled"] =
                            json!({"seq": s.seq, "run": s.run, "kind": s.kind, "how": s.how});
                    }
                }
            }
            EventBody::OperationSucceeded { op, object } => {
                if let (Some(o), Some((prior, provider))) = (self.ops.get(op), started(op)) {
                    j["diff"] = json!(diff_text(
                        &o.addr,
                        &provider.addr,
                        plan_action(o.action),
                        prior.as_ref().map(|p: &ResourceObject| &p.attrs),
                        object.as_ref().map(|p| &p.attrs),
                    ));
                }
            }
            EventBody::OperationFailed { op, error, .. } => {
                if let Some(o) = self.ops.get(op) {
                    j["error"] = json!(error);
                    let (location, recorded) = self.failure_location(e.run, &o.addr);
                    if let Some(loc) = location {
                        j["location"] = json!(loc);
                        j["location_recorded"] = json!(recorded);
                    }
                }
            }
            EventBody::DataRead { addr, object } => {
                if let Some(c) = self.deferral_of(e.run, addr) {
                    j["deferral"] = deferral_json(c);
                }
                let before = prior_version(addr);
                j["diff"] = json!(diff_text(
                    addr,
                    &object.provider.addr,
                    if before.is_some() {
                        Action::Update
                    } else {
                        Action::Create
                    },
                    before.as_ref().map(|b| &b.attrs),
                    Some(&object.attrs),
                ));
            }
            EventBody::OutputsSet { outputs } => {
                j["outputs"] = J::Object(
                    outputs
                        .iter()
                        .map(|(k, o)| {
                            let v = if o.sensitive {
                                json!("(sensitive value)")
                            } else {
                                masked_json(&o.value)
                            };
                            (k.clone(), v)
                        })
                        .collect(),
                );
            }
            EventBody::RunPlanned { .. } => j["plan_of_run"] = json!(e.run),
            EventBody::RunDiagnostics { .. } => {
                j["diagnostics"] = J::Array(self.diagnostics_json(e.run));
            }
            _ => {}
        }
        j
    }

    /// The planned change that deferred `addr`'s read in `run`, if its plan deferred it.
    fn deferral_of(&self, run: u64, addr: &ResourceInstanceAddr) -> Option<&PlannedChange> {
        let (seq, i) = self.deferred.get(&(run, addr.clone()))?;
        match &self.events.get(*seq as usize - 1)?.body {
            EventBody::RunPlanned { plan } => plan.changes.get(*i),
            _ => None,
        }
    }

    /// One run: its record and its events in order.
    pub fn run(&self, id: u64) -> Option<J> {
        let r = self.fold.runs.iter().find(|r| r.id == id)?;
        let mut j = self.run_json(r);
        j["left_pending"] = J::Array(self.left_pending(id));
        j["failures"] = J::Array(self.failures(id));
        j["diagnostics"] = J::Array(self.diagnostics_json(id));
        j["deferred"] = J::Array(self.deferred_reads(id, r.last_seq));
        let from = id as usize - 1;
        let to = (r.last_seq as usize).min(self.events.len());
        let events: Vec<J> = self.events[from.min(to)..to]
            .iter()
            .filter(|e| e.run == id)
            .map(|e| self.event_json(e))
            .collect();
        // Pending operations of this run that a later run resolved.
        j["events"] = J::Array(events);
        Some(j)
    }

    /// The resources at event `at` (default: the head), grouped by module.
    pub fn state_at(&self, q: &StateQuery) -> Result<J, String> {
        let at = q.at.unwrap_or(self.head());
        if at > self.head() {
            return Err(format!(
                "event {at} is past the end of the log ({})",
                self.head()
            ));
        }
        let limit = q.limit.unwrap_or(1000);
        let needle = q.q.as_deref().unwrap_or("");
        let f = &self.flat;
        let mut modules: Vec<(usize, Vec<J>)> = vec![(0, Vec::new()); f.modules.len()];
        let mut total = 0;
        let mut listed = 0;
        for i in 0..f.addrs.len() {
            let Some(v) = f.live_at(i, at) else { continue };
            total += 1;
            if !needle.is_empty() && !f.texts[i].contains(needle) {
                continue;
            }
            let m = &mut modules[f.module[i] as usize];
            m.0 += 1;
            if listed < limit {
                let Some(obj) = f.obj(&self.lives, i, v) else {
                    continue;
                };
                listed += 1;
                m.1.push(json!({
                    "addr": f.texts[i],
                    "mode": if f.addrs[i].resource.mode == Mode::Data { "data" } else { "managed" },
                    "since": f.vseq[v],
                    "tainted": obj.tainted,
                    "deposed": obj.deposed,
                }));
            }
        }
        let at_event = (at > 0).then(|| &self.events[at as usize - 1]);
        let outputs = self
            .outputs
            .iter()
            .take_while(|(s, _)| *s <= at)
            .last()
            .map(|(_, o)| {
                J::Object(
                    o.iter()
                        .map(|(k, v)| {
                            let v = if v.sensitive {
                                json!("(sensitive value)")
                            } else {
                                masked_json(&v.value)
                            };
                            (k.clone(), v)
                        })
                        .collect(),
                )
            })
            .unwrap_or_else(|| json!({}));
        Ok(json!({
            "at": at,
            "head": self.head(),
            "time_ms": at_event.map(|e| e.time_ms),
            "run": at_event.map(|e| e.run),
            "total": total,
            "listed": listed,
            "modules": f.modules.iter().zip(modules).filter(|(_, (count, _))| *count > 0)
                .map(|(m, (count, instances))| json!({
                    "module": module_name(m), "count": count, "instances": instances,
                })).collect::<Vec<_>>(),
            "outputs": outputs,
        }))
    }

    /// What changed between two moments: instances added, removed or changed.
    pub fn diff(&self, from: u64, to: u64, limit: usize) -> Result<J, String> {
        for s in [from, to] {
            if s > self.head() {
                return Err(format!(
                    "event {s} is past the end of the log ({})",
                    self.head()
                ));
            }
        }
        let mut counts = BTreeMap::from([("added", 0), ("removed", 0), ("changed", 0)]);
        let mut items = Vec::new();
        let f = &self.flat;
        for i in 0..f.addrs.len() {
            let (va, vb) = (f.live_at(i, from), f.live_at(i, to));
            if va == vb {
                continue;
            }
            let a = va.and_then(|v| f.obj(&self.lives, i, v));
            let b = vb.and_then(|v| f.obj(&self.lives, i, v));
            let kind = match (a, b) {
                (None, None) => continue,
                (Some(x), Some(y)) if x == y => continue,
                (None, Some(_)) => "added",
                (Some(_), None) => "removed",
                (Some(_), Some(_)) => "changed",
            };
            *counts.entry(kind).or_default() += 1;
            if items.len() < limit {
                let addr = &f.addrs[i];
                let (action, before, after) = match kind {
                    "added" => (Action::Create, None, b),
                    "removed" => (Action::Delete, a, None),
                    _ => (Action::Update, a, b),
                };
                let Some(provider) = a.or(b).map(|o| o.provider.clone()) else {
                    continue;
                };
                items.push(json!({
                    "addr": f.texts[i],
                    "kind": kind,
                    "module": module_name(&addr.resource.module),
                    "diff": diff_text(addr, &provider, action, before.map(|o| &o.attrs), after.map(|o| &o.attrs)),
                }));
            }
        }
        Ok(json!({"from": from, "to": to, "counts": counts, "items": items}))
    }

    /// One instance at a moment: its attributes (masked).
    pub(crate) fn instance(&self, addr: &ResourceInstanceAddr, at: Option<u64>) -> Option<J> {
        let at = at.unwrap_or(self.head());
        let life = self.lives.get(addr)?;
        let v = life.at(at)?;
        let obj = v.obj.as_ref()?;
        Some(json!({
            "addr": addr.to_string(),
            "at": at,
            "since": v.seq,
            "tainted": obj.tainted,
            "provider": obj.provider.to_string(),
            "attrs": masked_json(&obj.attrs),
            "text": attrs_text(&obj.attrs),
        }))
    }

    /// Every event that touched one address, across runs.
    #[cfg(test)]
    pub(crate) fn life(&self, addr: &ResourceInstanceAddr) -> Option<J> {
        self.life_page(addr, 0, usize::MAX)
    }

    /// One address's life, `limit` events from `offset` (oldest first), with how many there
    /// are in all: a long-lived resource's history is read a page at a time.
    pub(crate) fn life_page(
        &self,
        addr: &ResourceInstanceAddr,
        offset: usize,
        limit: usize,
    ) -> Option<J> {
        let life = self.lives.get(addr)?;
        let runs: HashMap<u64, &RunRecord> = self.fold.runs.iter().map(|r| (r.id, r)).collect();
        // Follow `state mv` backwards: the object's life under its earlier addresses.
        let mut seqs = life.touches.clone();
        let mut cur = addr.clone();
        let mut until = u64::MAX;
        for _ in 0..100 {
            let moved_in = self.lives.get(&cur).and_then(|l| {
                l.touches
                    .iter()
                    .rev()
                    .find_map(|s| match &self.events[*s as usize - 1].body {
                        EventBody::ResourceMoved { from, to } if to == &cur && *s < until => {
                            Some((*s, from.clone()))
                        }
                        _ => None,
                    })
            });
            let Some((seq, from)) = moved_in else { break };
            if let Some(l) = self.lives.get(&from) {
                seqs.extend(l.touches.iter().filter(|s| **s < seq));
            }
            cur = from;
            until = seq;
        }
        seqs.sort_unstable();
        seqs.dedup();
        let mut events = Vec::new();
        for seq in &seqs {
            let e = &self.events[*seq as usize - 1];
            let mut j = self.event_json(e);
            if let Some(r) = runs.get(&e.run) {
                j["command"] = json!(r.command);
            }
            events.push(j);
        }
        // A delete and a create of the same address in one run is a replacement.
        let mut by_run: HashMap<u64, Vec<usize>> = HashMap::new();
        for (i, j) in events.iter().enumerate() {
            by_run
                .entry(j["run"].as_u64().unwrap_or(0))
                .or_default()
                .push(i);
        }
        for idx in by_run.values() {
            let labels: Vec<&str> = idx
                .iter()
                .filter_map(|i| events[*i]["label"].as_str())
                .collect();
            if labels.contains(&"created") && labels.contains(&"deleted") {
                for i in idx {
                    if matches!(events[*i]["label"].as_str(), Some("created" | "deleted")) {
                        events[*i]["replaced"] = json!(true);
                    }
                }
            }
        }
        let exists = life.versions.last().is_some_and(|v| v.obj.is_some());
        let total = events.len();
        let events: Vec<J> = events.into_iter().skip(offset).take(limit).collect();
        Some(json!({
            "addr": addr.to_string(),
            "exists": exists,
            "total": total,
            "offset": offset,
            "events": events,
        }))
    }

    /// Addresses that ever existed containing `q` (for the resource search box).
    /// The addresses the log touched that contain `q` (every one is searched): the first
    /// `limit` after `offset` in address order, and how many match in all.
    pub(crate) fn addresses(&self, q: &str, offset: usize, limit: usize) -> J {
        let mut total = 0usize;
        let mut list = Vec::new();
        for a in self.flat.texts.iter().filter(|a| a.contains(q)) {
            if total >= offset && list.len() < limit {
                list.push(a.as_str());
            }
            total += 1;
        }
        json!({"addresses": list, "total": total, "offset": offset})
    }
}

/// What describing an event needs, answered from the model.
impl history::EventContext for Model {
    fn op(&self, op: u64) -> Option<history::OpRef<'_>> {
        self.ops.get(&op).map(|o| history::OpRef {
            addr: &o.addr,
            action: o.action,
            run: o.run,
        })
    }
    fn drifted(&self, seq: u64, addr: &ResourceInstanceAddr, attrs: &StoredValue) -> bool {
        let before = self
            .lives
            .get(addr)
            .and_then(|l| l.obj_at(seq - 1).cloned());
        before.as_ref().is_some_and(|b| &b.attrs != attrs)
    }
    fn deferred(&self, run: u64, addr: &ResourceInstanceAddr) -> bool {
        self.deferral_of(run, addr).is_some()
    }
    fn sensitive_vars(&self) -> Option<&std::collections::BTreeSet<String>> {
        Some(&self.sensitive_vars)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cairn_state::{ProviderRef, RunOutcome, RunSummary};

    fn ev(seq: u64, run: u64, body: EventBody) -> Event {
        Event {
            seq,
            version: 1,
            time_ms: 1_000 * seq,
            run,
            body,
        }
    }

    fn object(v: &str) -> ResourceObject {
        ResourceObject {
            attrs: StoredValue::Object(cairn_state::ValueMap::from([
                ("id".to_string(), StoredValue::String("a-1".into())),
                ("value".to_string(), StoredValue::String(v.into())),
                (
                    "secret".to_string(),
                    StoredValue::Sensitive(Box::new(StoredValue::String("pw".into()))),
                ),
            ])),
            deps: Vec::new(),
            provider: pref(),
            create_token: None,
            tainted: false,
            meta: Default::default(),
        }
    }

    fn pref() -> ProviderRef {
        ProviderRef::new("provider[\"sim\"]".parse().unwrap(), "p".into())
    }

    fn started(addr: &str, action: OpAction, prior: Option<ResourceObject>) -> EventBody {
        EventBody::OperationStarted {
            addr: addr.parse().unwrap(),
            deposed: None,
            action,
            token: None,
            provider: pref(),
            prior,
        }
    }

    fn run(command: &str) -> EventBody {
        EventBody::RunStarted {
            command: command.into(),
            args: command.split_whitespace().map(String::from).collect(),
            user: "ann".into(),
            pid: 1,
        }
    }

    fn done() -> EventBody {
        EventBody::RunFinished {
            outcome: RunOutcome::Success,
            summary: RunSummary::default(),
        }
    }

    /// create a (run 1), update a (run 4), move a → b (run 8).
    fn model() -> Model {
        let mut m = Model::new();
        m.extend(vec![
            ev(1, 1, run("apply")),
            ev(2, 1, started("sim_thing.a", OpAction::Create, None)),
            ev(
                3,
                1,
                EventBody::OperationSucceeded {
                    op: 2,
                    object: Some(object("one")),
                },
            ),
            ev(4, 4, run("apply")),
            ev(
                5,
                4,
                started("sim_thing.a", OpAction::Update, Some(object("one"))),
            ),
            ev(
                6,
                4,
                EventBody::OperationSucceeded {
                    op: 5,
                    object: Some(object("two")),
                },
            ),
            ev(7, 4, done()),
            ev(8, 8, run("state mv")),
            ev(
                9,
                8,
                EventBody::ResourceMoved {
                    from: "sim_thing.a".parse().unwrap(),
                    to: "sim_thing.b".parse().unwrap(),
                },
            ),
            ev(10, 8, done()),
        ]);
        m
    }

    /// A run's page says where it ran (its `RunContext`: host, commit, branch, CI job), with
    /// the event in its list; a run recorded without one has nulls, and the state is as
    /// without it.
    #[test]
    fn a_run_says_where_it_ran() {
        let mut m = Model::new();
        m.extend(vec![
            ev(1, 1, run("apply")),
            ev(
                2,
                1,
                EventBody::RunContext(cairn_state::RunContext {
                    host: Some("build-7".into()),
                    git_commit: Some("0123456789abcdef0123456789abcdef01234567".into()),
                    git_branch: Some("main".into()),
                    ci_job: Some("https://ci.example/job/9".into()),
                }),
            ),
            ev(3, 1, done()),
            ev(4, 4, run("apply")),
            ev(5, 4, done()),
        ]);
        let r = m.run(1).unwrap();
        assert_eq!(r["host"], "build-7");
        assert_eq!(r["git_commit"], "0123456789abcdef0123456789abcdef01234567");
        assert_eq!(r["git_branch"], "main");
        assert_eq!(r["ci_job"], "https://ci.example/job/9");
        let texts: Vec<String> = r["events"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e.to_string())
            .collect();
        assert!(
            texts
                .iter()
                .any(|t| t.contains("ran on build-7, git main@0123456, https://ci.example/job/9")),
            "{texts:?}"
        );
        let old = m.run(4).unwrap();
        for f in ["host", "git_commit", "git_branch", "ci_job"] {
            assert!(old[f].is_null(), "{f}: {old}");
        }
    }

    #[test]
    fn the_state_at_any_event_follows_the_fold() {
        let m = model();
        let at = |seq| {
            let j = m
                .state_at(&StateQuery {
                    at: Some(seq),
                    ..Default::default()
                })
                .unwrap();
            j["modules"][0]["instances"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .map(|i| i["addr"].as_str().unwrap().to_string())
                        .collect::<Vec<_>>()
                })
                .unwrap_or_default()
        };
        assert_eq!(at(0), Vec::<String>::new());
        assert_eq!(
            at(2),
            Vec::<String>::new(),
            "a started create is not an object yet"
        );
        assert_eq!(at(3), vec!["sim_thing.a"]);
        assert_eq!(at(10), vec!["sim_thing.b"]);
        let a = m
            .instance(&"sim_thing.a".parse().unwrap(), Some(3))
            .unwrap();
        assert_eq!(a["attrs"]["value"], "one");
        assert_eq!(a["attrs"]["secret"], "(sensitive value)");
        assert!(m
            .state_at(&StateQuery {
                at: Some(11),
                ..Default::default()
            })
            .is_err());
    }

    #[test]
    fn diffs_between_moments_and_runs_mask_secrets() {
        let m = model();
        let d = m.diff(3, 6, 10).unwrap();
        assert_eq!(d["counts"]["changed"], 1, "{d}");
        let text = d["items"][0]["diff"].as_str().unwrap();
        assert!(text.contains(r#"~ value  = "one" -> "two""#), "{text}");
        assert!(!text.contains("pw"), "{text}");
        let d = m.diff(6, 10, 10).unwrap();
        assert_eq!(
            (
                d["counts"]["added"].as_u64(),
                d["counts"]["removed"].as_u64()
            ),
            (Some(1), Some(1)),
            "{d}"
        );
        let r = m.run(4).unwrap();
        let labels: Vec<&str> = r["events"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|e| e["label"].as_str())
            .collect();
        assert_eq!(labels, ["started", "updated"]);
        assert!(!r.to_string().contains("\"pw\""), "{r}");
    }

    #[test]
    fn a_runs_recorded_plan_deferrals_and_diagnostics_show_in_its_view() {
        use cairn_state::event::Severity;
        use cairn_state::{Deferral, PlannedChange, RecordedDiagnostic};
        let data: ResourceInstanceAddr = "data.sim_lookup.l".parse().unwrap();
        let mut m = model();
        m.extend(vec![
            ev(11, 11, run("apply")),
            ev(
                12,
                11,
                EventBody::RunPlanned {
                    plan: PlanRecord {
                        mode: "normal".into(),
                        saved: false,
                        files_hash: String::new(),
                        changes: vec![PlannedChange {
                            addr: data.clone(),
                            action: PlannedAction::Read,
                            reason: Some("depends on sim_thing.b, which will be updated".into()),
                            deferral: Some(Deferral::DependencyPending {
                                dependency: "sim_thing.b".parse().unwrap(),
                                action: PlannedAction::Update,
                                via: vec!["local.k".into()],
                            }),
                            diff: "<= data".into(),
                        }],
                        outputs: Vec::new(),
                        graph: None,
                    },
                },
            ),
            ev(
                13,
                11,
                EventBody::DataRead {
                    addr: data.clone(),
                    object: cairn_state::DataObject {
                        attrs: StoredValue::Object(Default::default()),
                        provider: pref(),
                    },
                },
            ),
            ev(
                14,
                11,
                EventBody::RunDiagnostics {
                    diagnostics: vec![RecordedDiagnostic {
                        severity: Severity::Error,
                        summary: "Unsupported attribute".into(),
                        detail: String::new(),
                        location: Some("main.tf:7:3".into()),
                        address: None,
                    }],
                },
            ),
            ev(
                15,
                11,
                EventBody::RunFinished {
                    outcome: RunOutcome::Failed,
                    summary: RunSummary::default(),
                },
            ),
        ]);
        let r = m.run(11).unwrap();
        assert_eq!(r["planned"], true, "{r}");
        assert_eq!(r["deferred"][0]["read_at"], 13, "{r}");
        assert_eq!(
            r["deferred"][0]["chain"],
            json!(["local.k", "sim_thing.b"]),
            "{r}"
        );
        assert_eq!(r["diagnostics"][0]["location"], "main.tf:7:3", "{r}");
        let read = &r["events"][2];
        assert_eq!(read["deferral"]["cause"], "dependency-pending", "{read}");
        assert!(m.run_plan(11).is_some());
        assert!(m.run_plan(4).is_none(), "runs before plans were recorded");
        let t = m.timeline(&TimelineQuery::default());
        assert_eq!(
            t["runs"][0]["diagnostics"][0]["summary"],
            "Unsupported attribute"
        );
    }

    #[test]
    fn a_life_follows_moves_back_and_the_timeline_filters() {
        let m = model();
        let l = m.life(&"sim_thing.b".parse().unwrap()).unwrap();
        let seqs: Vec<u64> = l["events"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["seq"].as_u64().unwrap())
            .collect();
        assert_eq!(seqs, [2, 3, 5, 6, 9], "{l}");
        let t = m.timeline(&TimelineQuery {
            command: Some("state mv".into()),
            ..Default::default()
        });
        assert_eq!(t["runs"].as_array().unwrap().len(), 1);
        assert_eq!(
            t["runs"][0]["args"],
            json!([]),
            "the command's own words are not arguments"
        );
        let t = m.timeline(&TimelineQuery {
            outcome: Some("unfinished".into()),
            ..Default::default()
        });
        assert_eq!(t["runs"][0]["id"], 1, "{t}");
        // Paged: one run at a time, newest first, the cursor leading to the older ones.
        let page = |before| {
            m.timeline(&TimelineQuery {
                before,
                limit: Some(1),
                ..Default::default()
            })
        };
        let p1 = page(None);
        assert_eq!(
            (p1["runs"][0]["id"].as_u64(), p1["matched"].as_u64()),
            (Some(8), Some(3)),
            "{p1}"
        );
        let p2 = page(p1["next_before"].as_u64());
        assert_eq!(p2["runs"][0]["id"], 4, "{p2}");
        let p3 = page(p2["next_before"].as_u64());
        assert_eq!(
            (p3["runs"][0]["id"].as_u64(), &p3["next_before"]),
            (Some(1), &J::Null),
            "{p3}"
        );
    }

    /// Counts come from a run's events whatever way it ended: a killed run (no summary), a
    /// run that finished with a zero summary above what it did, a refused run whose error is
    /// only in its recorded diagnostics, and a failed operation not counted twice when its
    /// diagnostic names the same address.
    #[test]
    fn counts_come_from_the_runs_events() {
        let mut m = model();
        let diag = |addr: Option<&str>| RecordedDiagnostic {
            severity: cairn_state::event::Severity::Error,
            summary: "Saved plan is stale".into(),
            detail: String::new(),
            location: None,
            address: addr.map(String::from),
        };
        let failed = || EventBody::RunFinished {
            outcome: RunOutcome::Failed,
            summary: RunSummary::default(),
        };
        let h = m.head();
        m.extend(vec![
            ev(h + 1, h + 1, run("apply p.bin")),
            ev(
                h + 2,
                h + 1,
                EventBody::RunDiagnostics {
                    diagnostics: vec![diag(None)],
                },
            ),
            ev(h + 3, h + 1, failed()),
            ev(h + 4, h + 4, run("apply")),
            ev(h + 5, h + 4, started("sim_thing.z", OpAction::Create, None)),
            ev(
                h + 6,
                h + 4,
                EventBody::OperationFailed {
                    op: h + 5,
                    error: "boom".into(),
                    object: None,
                },
            ),
            ev(
                h + 7,
                h + 4,
                EventBody::RunDiagnostics {
                    diagnostics: vec![diag(Some("sim_thing.z"))],
                },
            ),
            ev(h + 8, h + 4, failed()),
        ]);
        let t = m.timeline(&TimelineQuery::default());
        let by_id = |id: u64| {
            t["runs"]
                .as_array()
                .unwrap()
                .iter()
                .find(|r| r["id"] == id)
                .cloned()
                .unwrap()
        };
        // Run 1 was never finished: its create is still counted.
        assert_eq!(by_id(1)["outcome"], "unfinished");
        assert_eq!(by_id(1)["added"], 1, "{t}");
        // Run 4 finished with a zero summary above its update.
        assert_eq!(by_id(4)["changed"], 1, "{t}");
        // The refused apply: one error, from its diagnostics.
        assert_eq!(by_id(h + 1)["errors"], 1, "{t}");
        // A failed create and its diagnostic are one error.
        assert_eq!(by_id(h + 4)["errors"], 1, "{t}");
        assert_eq!(by_id(h + 4)["added"], 0, "{t}");
    }
}
