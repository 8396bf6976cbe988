//! The lifecycle rules as checks over an [`Outcome`]: each returns `Err(explanation)` when the
//! rule is broken. The properties ([`crate::props`]) call them on every outcome; the "broken
//! rule" tests call them on what an engine with one rule broken (`cairn::engine::Sabotage`)
//! really did, and require them to fail.

use crate::gen::{Cfg, Rep};
use crate::harness::{Cloud, Outcome};
use crate::model::{data_in_order, deferral_deps, thing_deps, Term};
use cairn::plan::{Action, Reason};
use cairn::state::{EventBody, OpAction, Snapshot, StoredValue};
use cairn::value::Value;
use std::collections::{BTreeMap, BTreeSet};

pub type Check = Result<(), String>;

macro_rules! ensure {
    ($cond:expr, $($msg:tt)*) => {
        if !$cond {
            return Err(format!($($msg)*));
        }
    };
}

fn str_of(v: Option<&Value>) -> Option<String> {
    v.and_then(|v| v.as_str().map(str::to_string))
}

fn stored_str(v: &StoredValue, k: &str) -> Option<String> {
    match v.get(k) {
        Some(StoredValue::String(s)) => Some(s.clone()),
        _ => None,
    }
}

/// The region of a provider instance's recorded configuration (`local` by default).
fn region_of(s: &Snapshot, p: &cairn::state::ProviderRef) -> String {
    s.providers
        .get(&p.addr)
        .and_then(|i| stored_str(&i.config, "region"))
        .unwrap_or_else(|| "local".into())
}

/// What state holds of one object: (address, name, value, out, tainted).
pub type StateObject = (String, String, Option<String>, String, bool);

/// Every object state holds (current and deposed), by (region, id).
pub fn state_objects(s: &Snapshot) -> BTreeMap<(String, String), StateObject> {
    let mut out = BTreeMap::new();
    for (addr, inst) in &s.resources {
        for o in inst.objects() {
            let id = stored_str(&o.attrs, "id").unwrap_or_default();
            out.insert(
                (region_of(s, &o.provider), id),
                (
                    addr.to_string(),
                    stored_str(&o.attrs, "name").unwrap_or_default(),
                    stored_str(&o.attrs, "value"),
                    stored_str(&o.attrs, "out").unwrap_or_default(),
                    o.tainted,
                ),
            );
        }
    }
    out
}

/// Rule 7 (second half): state and store agree exactly.
pub fn agree(s: &Snapshot, cloud: &Cloud) -> Check {
    let state = state_objects(s);
    for (k, (addr, name, value, out, _)) in &state {
        let Some(o) = cloud.objects.get(k) else {
            return Err(format!(
                "{addr} ({}/{}) is in state but not in the store",
                k.0, k.1
            ));
        };
        ensure!(
            &o.name == name && &o.value == value && &o.out == out,
            "{addr}: state has name={name} value={value:?} out={out}, the store has {o:?}"
        );
    }
    for (k, o) in &cloud.objects {
        ensure!(
            state.contains_key(k),
            "the store holds {}/{} ({o:?}) but the state does not",
            k.0,
            k.1
        );
    }
    ensure!(
        s.pending.is_empty(),
        "{} pending operations remain",
        s.pending.len()
    );
    Ok(())
}

/// Rule 7 (first half): every object in the store is in state or is a pending create's.
pub fn nothing_lost(s: &Snapshot, cloud: &Cloud) -> Check {
    let state = state_objects(s);
    let tokens: BTreeSet<String> = s.pending.values().filter_map(|p| p.token.clone()).collect();
    for (k, o) in &cloud.objects {
        let pending_update_or_delete = s.pending.values().any(|p| {
            p.prior
                .as_ref()
                .is_some_and(|pr| stored_str(&pr.attrs, "id").as_deref() == Some(&k.1))
        });
        ensure!(
            state.contains_key(k)
                || o.token.as_ref().is_some_and(|t| tokens.contains(t))
                || pending_update_or_delete,
            "the store holds {}/{} ({o:?}), which is neither in state nor a pending operation's",
            k.0,
            k.1
        );
    }
    Ok(())
}

/// Rule 1: the plan right after a successful apply proposes nothing.
pub fn converged(o: &Outcome) -> Check {
    ensure!(
        o.ok,
        "the plan after a successful apply failed: {:?}",
        o.errors
    );
    let plan = o.plan.as_ref().ok_or("no plan")?;
    for c in &plan.changes {
        ensure!(
            c.action == Action::NoOp,
            "the plan after a successful apply proposes {:?} for {} ({:?})",
            c.action,
            c.addr,
            c.reason
        );
    }
    for c in &plan.outputs {
        ensure!(
            c.action == Action::NoOp,
            "the plan after a successful apply changes output {} ({:?} -> {:?})",
            c.name,
            c.before,
            c.after
        );
    }
    for c in &plan.provider_changes {
        ensure!(
            c.action == Action::NoOp,
            "the plan after a successful apply changes provider {} ({:?})",
            c.addr,
            c.action
        );
    }
    Ok(())
}

/// Rule 1 for data sources: the plan right after a successful apply reads every data source
/// with the result that apply used (read at its plan, or at apply when deferred). A data
/// source read too early gives a result the apply then outdated: the next read differs, even
/// when nothing consumes it.
pub fn data_settled(apply: &Outcome, next: &Outcome) -> Check {
    let Some(plan) = &next.plan else {
        return Ok(());
    };
    for d in &plan.data_reads {
        let used = apply
            .plan
            .iter()
            .flat_map(|p| &p.data_reads)
            .find(|r| r.addr == d.addr)
            .map(|r| r.result.clone())
            .or_else(|| {
                apply
                    .state_after
                    .data
                    .get(&d.addr)
                    .map(|o| Value::from_stored(&o.attrs))
            });
        let Some(used) = used else { continue };
        ensure!(
            cairn::provider::schema_util::same(&used, &d.result),
            "the plan after a successful apply reads {} as {:?}, but the apply used {:?}",
            d.addr,
            d.result,
            used
        );
    }
    Ok(())
}

/// The resource (no instance key) of an instance address, as the model names it.
fn resource_key(a: &cairn::state::ResourceInstanceAddr) -> String {
    a.resource.to_string()
}

/// Rule 2: a data source is read at plan time iff its configuration and its provider's are
/// known and nothing it depends on has a pending change; otherwise it is deferred with the
/// right reason. The expectation is computed from the generated model and the managed actions
/// of the plan.
pub fn deferral_exact(o: &Outcome) -> Check {
    let plan = o.plan.as_ref().ok_or("no plan")?;
    let cfg = &o.config;
    let mut actions: BTreeMap<String, Vec<Action>> = BTreeMap::new();
    let mut deferred_actual: BTreeMap<String, Option<Reason>> = BTreeMap::new();
    for c in &plan.changes {
        if c.action == Action::Read {
            deferred_actual.insert(resource_key(&c.addr), c.reason.as_deref().cloned());
        } else {
            actions
                .entry(resource_key(&c.addr))
                .or_default()
                .push(c.action);
        }
    }
    let read_actual: BTreeSet<String> = plan
        .data_reads
        .iter()
        .map(|d| resource_key(&d.addr))
        .collect();
    let pending = |t: &Term| {
        t.resource()
            .and_then(|r| actions.get(&r))
            .is_some_and(|a| a.iter().any(|a| *a != Action::NoOp))
    };
    let region_unknown = cfg.dyn_region.as_ref().is_some_and(|r| {
        actions
            .get(&Term::Thing(false, r.clone()).resource().unwrap_or_default())
            .is_none_or(|a| {
                a.iter().any(|a| {
                    matches!(
                        a,
                        Action::Create | Action::DeleteThenCreate | Action::CreateThenDelete
                    )
                })
            })
    });
    let mut expected: BTreeSet<String> = BTreeSet::new();
    for d in data_in_order(cfg) {
        let key = d.resource().unwrap_or_default();
        let dyn_ = match &d {
            Term::Data(c, l) => cfg.lookups(*c).any(|x| &x.label == l && x.dyn_),
            _ => false,
        };
        let deps = deferral_deps(cfg, &d);
        let pending_deps: Vec<&Term> = deps
            .iter()
            .filter(|t| match t {
                Term::Thing(..) => pending(t),
                Term::Data(..) => expected.contains(&t.resource().unwrap_or_default()),
                _ => false,
            })
            .collect();
        let provider_unknown = dyn_ && region_unknown;
        let defer = provider_unknown || !pending_deps.is_empty();
        match (defer, deferred_actual.get(&key), read_actual.contains(&key)) {
            (true, Some(reason), false) => {
                match reason {
                    Some(Reason::ReadBecauseConfigUnknown { .. }) => {}
                    Some(Reason::ReadBecauseDependencyPending { dependency, action, via }) => {
                        let dep = resource_key(dependency);
                        ensure!(
                            pending_deps.iter().any(|t| t.resource().as_deref() == Some(dep.as_str())),
                            "{key} is deferred because {dep} has a pending {action:?} (via {via:?}), but it does not depend on {dep} or {dep} has no pending change; pending dependencies: {pending_deps:?}"
                        );
                        ensure!(!pending_deps.is_empty(), "{key} is deferred for a pending dependency, but only its provider's configuration is unknown");
                    }
                    other => return Err(format!("{key} is deferred with reason {other:?}")),
                }
            }
            (false, None, true) => {}
            (true, _, _) => {
                return Err(format!(
                    "{key} must be deferred to apply (provider configuration unknown: {provider_unknown}; pending dependencies: {pending_deps:?}), but the plan {}",
                    if read_actual.contains(&key) { "read it during the plan" } else { "neither read nor deferred it" }
                ))
            }
            (false, _, _) => {
                return Err(format!(
                    "{key} must be read during the plan (its dependencies {deps:?} have no pending change), but the plan {}",
                    if deferred_actual.contains_key(&key) { format!("deferred it: {:?}", deferred_actual[&key]) } else { "did not read it".into() }
                ))
            }
        }
        if defer {
            expected.insert(key);
        }
    }
    Ok(())
}

/// Rule 3 (per run): refresh only reads managed objects in state, once each, never looks up
/// a data source, and its result is the store's content.
pub fn refresh_flat(o: &Outcome) -> Check {
    let before = state_objects(&o.state_before);
    let mut read: BTreeMap<(String, String), bool> = BTreeMap::new();
    for c in &o.calls {
        ensure!(
            c.op == "read" || c.op == "configure",
            "refresh made a {} call ({c:?})",
            c.op
        );
        if c.op == "read" {
            ensure!(c.type_ == "sim_thing", "refresh read a {}", c.type_);
            let k = (c.region.clone(), c.id.clone().unwrap_or_default());
            ensure!(
                before.contains_key(&k),
                "refresh read {}/{}, which is not in state",
                k.0,
                k.1
            );
            ensure!(
                read.insert(k.clone(), c.ok).is_none(),
                "refresh read {}/{} twice",
                k.0,
                k.1
            );
        }
    }
    for (addr, inst) in &o.state_before.resources {
        let Some(cur) = &inst.current else { continue };
        let k = (
            region_of(&o.state_before, &cur.provider),
            stored_str(&cur.attrs, "id").unwrap_or_default(),
        );
        ensure!(
            read.contains_key(&k),
            "refresh did not read {addr} ({}/{})",
            k.0,
            k.1
        );
        let after = o
            .state_after
            .resources
            .get(addr)
            .and_then(|i| i.current.as_ref());
        if read[&k] {
            match (o.cloud_before.objects.get(&k), after) {
                (Some(obj), Some(a)) => ensure!(
                    stored_str(&a.attrs, "value") == obj.value
                        && stored_str(&a.attrs, "out").as_deref() == Some(obj.out.as_str()),
                    "after refresh {addr} is {:?}, the store has {obj:?}",
                    a.attrs
                ),
                (None, None) => {}
                (Some(_), None) => {
                    return Err(format!("refresh dropped {addr}, which the store still has"))
                }
                (None, Some(_)) => {
                    return Err(format!("refresh kept {addr}, which is gone from the store"))
                }
            }
        } else {
            // Unchanged, but for dependencies that left state (a dependency the same refresh
            // found gone is pruned from every object's dependencies).
            let kept = after.is_some_and(|a| {
                a.attrs == cur.attrs
                    && a.provider == cur.provider
                    && a.tainted == cur.tainted
                    && a.create_token == cur.create_token
                    && a.deps.iter().all(|d| cur.deps.contains(d))
                    && cur.deps.iter().all(|d| {
                        a.deps.contains(d)
                            || o.state_after.resources.get(d).is_none_or(|i| i.is_empty())
                    })
            });
            ensure!(
                kept,
                "a failed read changed {addr}: {cur:?} became {after:?}"
            );
        }
    }
    ensure!(
        o.state_before.data == o.state_after.data,
        "refresh changed data source results"
    );
    ensure!(
        o.state_before.outputs == o.state_after.outputs,
        "refresh changed outputs"
    );
    Ok(())
}

/// A snapshot with what legitimately varies between runs (provider instance ids, create
/// tokens, run records) left out, as text.
pub fn normalized(s: &Snapshot) -> String {
    let mut out = String::new();
    for (a, p) in &s.providers {
        out.push_str(&format!(
            "{a} {} default={}\n",
            p.config.to_json(),
            p.is_default
        ));
    }
    for (a, i) in &s.resources {
        for (k, o) in i
            .current
            .iter()
            .map(|o| ("current".to_string(), o))
            .chain(i.deposed.iter().map(|(k, o)| (k.clone(), o)))
        {
            let deps: Vec<String> = o.deps.iter().map(|d| d.to_string()).collect();
            out.push_str(&format!(
                "{a} {k} {} deps={deps:?} via {} tainted={}\n",
                o.attrs.to_json(),
                o.provider.addr,
                o.tainted
            ));
        }
    }
    for (a, d) in &s.data {
        out.push_str(&format!("{a} {}\n", d.attrs.to_json()));
    }
    for (n, v) in &s.outputs {
        out.push_str(&format!("output {n} {}\n", v.value.to_json()));
    }
    out.push_str(&format!("pending {}\n", s.pending.len()));
    out
}

/// Rule 4: read-only operations never create, update or delete.
pub fn read_only(o: &Outcome) -> Check {
    for c in &o.calls {
        ensure!(
            !matches!(c.op.as_str(), "create" | "update" | "delete"),
            "{} made a {} call: {c:?}",
            o.op.script(),
            c.op
        );
    }
    ensure!(
        o.cloud_before.objects == o.cloud_after.objects,
        "{} changed the store's objects",
        o.op.script()
    );
    Ok(())
}

/// Rule 5: a plan only configures, reads and looks up, and appends no event.
pub fn plan_pure(o: &Outcome) -> Check {
    for c in &o.calls {
        ensure!(
            matches!(c.op.as_str(), "configure" | "read" | "lookup"),
            "{} made a {} call: {c:?}",
            o.op.script(),
            c.op
        );
    }
    ensure!(
        o.cloud_before == o.cloud_after,
        "{} changed the store",
        o.op.script()
    );
    ensure!(
        o.events.is_empty(),
        "{} appended {} events to the state log: {:?}",
        o.op.script(),
        o.events.len(),
        o.events.first().map(|e| &e.body)
    );
    ensure!(
        o.state_before == o.state_after,
        "{} changed the state",
        o.op.script()
    );
    Ok(())
}

/// Rule 6: the world-changing calls of an apply are those its plan listed (all of them when
/// it succeeded), lookups happen once per data source, and the values the plan knew are the
/// values applied. An update whose diff was unavailable at plan (its provider's configuration
/// was unknown) may turn out at apply to be nothing, the update, or — when the provider
/// instance is replaced — the replacement (issue 4): those calls are allowed, not required.
pub fn apply_as_planned(o: &Outcome) -> Check {
    let Some(plan) = &o.plan else { return Ok(()) };
    let mut expected: BTreeMap<(String, String), i32> = BTreeMap::new();
    let mut allowed: BTreeMap<(String, String), i32> = BTreeMap::new();
    let mut maybe_skipped: BTreeMap<cairn::state::ResourceInstanceAddr, (String, Option<Value>)> =
        BTreeMap::new();
    for c in plan
        .changes
        .iter()
        .filter(|c| c.diff_unavailable && c.action == Action::Update)
    {
        let name = str_of(c.after.as_ref().and_then(|a| a.get("name")));
        let id = str_of(c.before.as_ref().and_then(|b| b.get("id")));
        for (op, k) in [("update", id.clone()), ("delete", id), ("create", name)] {
            *allowed
                .entry((op.to_string(), k.unwrap_or_default()))
                .or_default() += 1;
        }
    }
    for c in &plan.changes {
        let name = str_of(c.after.as_ref().and_then(|a| a.get("name")));
        let id = str_of(c.before.as_ref().and_then(|b| b.get("id")));
        let mut add = |op: &str, k: Option<String>| {
            *expected
                .entry((op.to_string(), k.unwrap_or_default()))
                .or_default() += 1
        };
        match c.action {
            Action::Update if c.diff_unavailable => {}
            Action::Create => add("create", name),
            Action::Update => {
                if !c.after.as_ref().is_some_and(|a| a.is_wholly_known()) {
                    // Planned "known after apply": the final values may equal the prior ones,
                    // and then apply skips it (issue 11.2).
                    maybe_skipped.insert(
                        c.addr.clone(),
                        (id.clone().unwrap_or_default(), c.before.clone()),
                    );
                }
                add("update", id)
            }
            Action::Delete => add("delete", id),
            Action::DeleteThenCreate | Action::CreateThenDelete => {
                add("delete", id);
                add("create", name)
            }
            // A forgotten object is left alone: no provider call.
            Action::NoOp | Action::Read | Action::Forget => {}
        }
    }
    let mut actual: BTreeMap<(String, String), i32> = BTreeMap::new();
    for c in &o.calls {
        let k = match c.op.as_str() {
            "create" => c.name.clone(),
            "update" | "delete" => c.id.clone().unwrap_or_default(),
            _ => continue,
        };
        *actual.entry((c.op.clone(), k)).or_default() += 1;
    }
    for (k, n) in &actual {
        ensure!(
            expected.get(k).copied().unwrap_or(0) + allowed.get(k).copied().unwrap_or(0) >= *n,
            "apply made {n} {} call(s) for {} but the plan listed {}",
            k.0,
            k.1,
            expected.get(k).copied().unwrap_or(0)
        );
    }
    if o.ok {
        // An update skipped at apply left its object as refreshed before the plan.
        let skipped: BTreeSet<String> = maybe_skipped
            .iter()
            .filter(|(addr, (id, before))| {
                !actual.contains_key(&("update".to_string(), id.clone()))
                    && o.state_after
                        .current(addr)
                        .map(|c| Value::from_stored(&c.attrs))
                        == *before
            })
            .map(|(_, (id, _))| id.clone())
            .collect();
        for (k, n) in &expected {
            if k.0 == "update" && skipped.contains(&k.1) {
                continue;
            }
            ensure!(
                actual.get(k).copied().unwrap_or(0) == *n,
                "the plan listed {n} {} for {} but the successful apply made {}",
                k.0,
                k.1,
                actual.get(k).copied().unwrap_or(0)
            );
        }
        let lookups = o.calls.iter().filter(|c| c.op == "lookup").count();
        let deferred = plan
            .changes
            .iter()
            .filter(|c| c.action == Action::Read)
            .count();
        ensure!(
            lookups == plan.data_reads.len() + deferred,
            "apply made {lookups} lookups; the plan read {} data sources and deferred {deferred}",
            plan.data_reads.len()
        );
        for c in &plan.changes {
            let Some(after) = &c.after else { continue };
            if c.action == Action::NoOp || c.action == Action::Read {
                continue;
            }
            let Some(obj) = o
                .state_after
                .resources
                .get(&c.addr)
                .and_then(|i| i.current.as_ref())
            else {
                return Err(format!(
                    "{} was planned to {:?} but is not in state after a successful apply",
                    c.addr, c.action
                ));
            };
            for attr in ["name", "value", "id", "out"] {
                match after.get(attr) {
                    Some(Value::Unknown(_)) | None => {}
                    Some(v) => {
                        let planned = v.as_str().map(str::to_string);
                        ensure!(
                            planned == stored_str(&obj.attrs, attr),
                            "{}: the plan said {attr} = {planned:?}, apply recorded {:?}",
                            c.addr,
                            stored_str(&obj.attrs, attr)
                        );
                    }
                }
            }
        }
    }
    Ok(())
}

/// Which term each thing instance name belongs to.
fn names_to_terms(cfg: &Cfg) -> BTreeMap<String, Term> {
    let mut out = BTreeMap::new();
    for c in [false, true] {
        for t in cfg.things(c) {
            let names: Vec<String> = match &t.rep {
                Rep::One => vec![t.name.clone()],
                Rep::Count(n) => (0..*n).map(|i| format!("{}c{i}", t.name)).collect(),
                Rep::ForEach(keys) => keys.iter().map(|k| format!("{}k{k}", t.name)).collect(),
            };
            for n in names {
                out.insert(n, Term::Thing(c, t.label.clone()));
            }
        }
    }
    out
}

/// Rule 8: no object is created or updated before what it depends on (in the configuration);
/// no object is deleted while something that depended on it (in state) still exists.
pub fn ordered(o: &Outcome) -> Check {
    let terms = names_to_terms(&o.config);
    let mut writes: BTreeMap<Term, Vec<usize>> = BTreeMap::new();
    for (i, c) in o.calls.iter().enumerate() {
        if matches!(c.op.as_str(), "create" | "update") {
            if let Some(t) = terms.get(&c.name) {
                writes.entry(t.clone()).or_default().push(i);
            }
        }
    }
    for (t, idx) in &writes {
        for d in thing_deps(&o.config, t) {
            for j in writes.get(&d).into_iter().flatten() {
                for i in idx {
                    ensure!(j < i, "{:?} was written (call {i}: {:?}) before its dependency {:?} (call {j}: {:?})", t, o.calls[*i], d, o.calls[*j]);
                }
            }
        }
    }
    // Deletes: by the dependencies recorded in state before the apply.
    let mut delete_at: BTreeMap<String, usize> = BTreeMap::new();
    for (i, c) in o.calls.iter().enumerate() {
        if c.op == "delete" {
            delete_at.insert(c.id.clone().unwrap_or_default(), i);
        }
    }
    let id_of = |a: &cairn::state::ResourceInstanceAddr| {
        o.state_before
            .resources
            .get(a)
            .and_then(|i| i.current.as_ref())
            .and_then(|c| stored_str(&c.attrs, "id"))
    };
    for (addr, inst) in &o.state_before.resources {
        let Some(cur) = &inst.current else { continue };
        let Some(my_id) = stored_str(&cur.attrs, "id") else {
            continue;
        };
        for dep in &cur.deps {
            let Some(dep_id) = id_of(dep) else { continue };
            if let Some(j) = delete_at.get(&dep_id) {
                // The dependency was deleted: this object must have been deleted before it, or
                // be gone from the store already.
                match delete_at.get(&my_id) {
                    Some(i) => ensure!(i < j, "{dep} was deleted (call {j}) before {addr} (call {i}), which depends on it"),
                    None => {
                        // It stays: fine if it no longer exists, or was updated (to stop
                        // depending on it) before the delete, or no longer depends on it in
                        // the configuration, or the dependency is being replaced (delete,
                        // then create: the dependent can only take the new object's values
                        // after the create, as in Terraform without create_before_destroy).
                        let gone = !o.cloud_after.objects.keys().any(|k| k.1 == my_id);
                        let dep_name = o
                            .state_before
                            .resources
                            .get(dep)
                            .and_then(|i| i.current.as_ref())
                            .and_then(|c| stored_str(&c.attrs, "name"));
                        let replaced = o.calls[*j..].iter().any(|c| {
                            c.op == "create" && c.type_ == "sim_thing" && Some(&c.name) == dep_name.as_ref()
                        }) || o.plan.as_ref().is_some_and(|p| {
                            p.changes.iter().any(|c| {
                                // Or create-before-destroy: the dependent depends on the
                                // resource, whose new object exists before the old one goes.
                                &c.addr == dep
                                    && matches!(
                                        c.action,
                                        cairn::plan::Action::DeleteThenCreate
                                            | cairn::plan::Action::CreateThenDelete
                                    )
                            })
                        });
                        let updated_first = o.calls[..*j].iter().any(|c| c.op == "update" && c.id.as_deref() == Some(my_id.as_str()));
                        // Or it stays unchanged and stopped depending on that instance (an
                        // orphan of a resource it still depends on: the keyless instance of
                        // a resource that gained `for_each`, say): state records its new
                        // dependencies, as Terraform's does at every apply.
                        let rerecorded = o
                            .state_after
                            .resources
                            .get(addr)
                            .and_then(|i| i.current.as_ref())
                            .is_some_and(|c| !c.deps.contains(dep));
                        let name = stored_str(&cur.attrs, "name").unwrap_or_default();
                        let still = terms.get(&name).is_some_and(|t| thing_deps(&o.config, t).iter().any(|d| d.resource() == Some(dep.resource.to_string())));
                        ensure!(gone || updated_first || rerecorded || !still || replaced, "{dep} was deleted (call {j}) while {addr}, which depends on it, still exists");
                    }
                }
            }
        }
    }
    Ok(())
}

/// Every error of the outcome is explained by an injected fault or a lookup key that the
/// store does not have.
pub fn errors_explained(o: &Outcome) -> Check {
    for e in &o.errors {
        let fault = e.contains("injected failure");
        let missing = e.contains("no object for key");
        ensure!(
            fault || missing,
            "unexplained error in {}: {e}",
            o.op.script()
        );
        if missing && !fault {
            // A missing ext key, or an object the lookup was made before (a bad read order).
            let key = e
                .split("no object for key \"")
                .nth(1)
                .and_then(|r| r.split('"').next())
                .unwrap_or_default();
            ensure!(
                key.starts_with('k') && !o.cloud_before.ext.contains_key(key),
                "a lookup of {key:?} failed although the key was expected to exist: {e}"
            );
        }
    }
    Ok(())
}

/// Rule 9: a failed step's dependents are skipped, independent steps complete, and the failed
/// resource's state is what the provider reported.
pub fn failures_skip_dependents(o: &Outcome) -> Check {
    errors_explained(o)?;
    let Some(plan) = &o.plan else { return Ok(()) };
    if o.errors.iter().any(|e| !e.contains("injected failure")) {
        return Ok(());
    }
    let terms = names_to_terms(&o.config);
    let failed_calls: Vec<_> = o
        .calls
        .iter()
        .filter(|c| !c.ok && matches!(c.op.as_str(), "create" | "update" | "delete"))
        .collect();
    let failed: BTreeSet<Term> = failed_calls
        .iter()
        .filter_map(|c| terms.get(&c.name).cloned())
        .collect();
    let written: BTreeSet<&str> = o
        .calls
        .iter()
        .filter(|c| matches!(c.op.as_str(), "create" | "update"))
        .map(|c| c.name.as_str())
        .collect();
    let written_ok: BTreeSet<&str> = o
        .calls
        .iter()
        .filter(|c| c.ok && matches!(c.op.as_str(), "create" | "update"))
        .map(|c| c.name.as_str())
        .collect();
    // A failed delete in the old region of `sim.dyn` while it is reconfigured at apply: the
    // instance (replaced or not, known only then) waits for the deletes of its old objects, and
    // its replacement makes them itself, so a failed one fails the instance and whatever is
    // under it is skipped with it. What is under it is then not asserted done.
    let old_dyn_region = o
        .state_before
        .providers
        .iter()
        .find(|(a, _)| a.alias.as_deref() == Some("dyn"))
        .and_then(|(_, p)| stored_str(&p.config, "region"));
    let dyn_at_risk = plan
        .provider_changes
        .iter()
        .any(|pc| pc.addr.alias.as_deref() == Some("dyn") && pc.action == Action::Update)
        && failed_calls
            .iter()
            .any(|c| c.op == "delete" && old_dyn_region.as_deref() == Some(c.region.as_str()));
    let under_dyn = |t: &Term, deps: &BTreeSet<Term>| {
        std::iter::once(t).chain(deps).any(|x| {
            matches!(x, Term::Thing(c, l) if o.config.things(*c).any(|th| &th.label == l && th.dyn_))
        })
    };
    for c in &plan.changes {
        if !matches!(
            c.action,
            Action::Create | Action::Update | Action::DeleteThenCreate | Action::CreateThenDelete
        ) {
            continue;
        }
        let Some(name) = str_of(c.after.as_ref().and_then(|a| a.get("name"))) else {
            continue;
        };
        let Some(term) = terms.get(&name) else {
            continue;
        };
        let deps = thing_deps(&o.config, term);
        if dyn_at_risk && under_dyn(term, &deps) {
            continue;
        }
        let dependent = deps.iter().any(|d| failed.contains(d));
        if dependent {
            ensure!(
                !written.contains(name.as_str()),
                "{} depends on a failed step ({failed:?}) but was still written",
                c.addr
            );
        } else if !failed.contains(term) {
            let value_known = !matches!(
                c.after.as_ref().and_then(|a| a.get("value")),
                Some(Value::Unknown(_))
            );
            if c.action != Action::Update || value_known {
                ensure!(
                    written_ok.contains(name.as_str()),
                    "{} ({:?}) is independent of the failed steps ({failed:?}) but was not done",
                    c.addr,
                    c.action
                );
            }
        }
    }
    // The failed objects: state says what the store holds.
    let state = state_objects(&o.state_after);
    for c in &failed_calls {
        let in_state: Vec<_> = state.iter().filter(|(_, v)| v.1 == c.name).collect();
        let in_store: Vec<_> = o
            .cloud_after
            .objects
            .iter()
            .filter(|(_, v)| v.name == c.name)
            .collect();
        // A failed delete that answers with no object keeps the object in state, as
        // Terraform does (the provider may not have deleted it): when the store no longer
        // holds it (a delete that failed after its work), the state holds the prior object,
        // and the next refresh finds it gone (p01 checks that the next apply converges).
        // Only the object the delete was for: a replacement created in another region under
        // the same name (a resource moved off `sim.dyn`) is in state and store alike.
        let kept_by_failed_delete = |(k, _): &&(&(String, String), &StateObject)| {
            c.op == "delete"
                && k.0 == c.region
                && o.cloud_before.objects.contains_key(*k)
                && !o.cloud_after.objects.contains_key(*k)
        };
        let in_state: Vec<_> = in_state
            .iter()
            .filter(|x| !kept_by_failed_delete(x))
            .collect();
        ensure!(
            in_state.len() == in_store.len()
                && in_state.iter().all(|(k, v)| o
                    .cloud_after
                    .objects
                    .get(*k)
                    .is_some_and(|s| s.value == v.2 && s.out == v.3)),
            "after the failed {} of {}, state holds {in_state:?} but the store holds {in_store:?}",
            c.op,
            c.name
        );
        if c.op == "create" {
            for (k, v) in &in_state {
                if !o.cloud_before.objects.contains_key(*k) {
                    ensure!(
                        v.4,
                        "the partial create of {} ({}) is not tainted in state",
                        c.name,
                        k.1
                    );
                }
            }
        }
    }
    Ok(())
}

/// Rule 12: after a successful destroy nothing managed remains, in state or in the store.
pub fn destroyed(o: &Outcome) -> Check {
    ensure!(o.ok, "destroy failed: {:?}", o.errors);
    let left: Vec<String> = o
        .state_after
        .resources
        .iter()
        .filter(|(_, i)| !i.is_empty())
        .map(|(a, _)| a.to_string())
        .collect();
    ensure!(
        left.is_empty(),
        "after destroy the state still holds {left:?}"
    );
    ensure!(
        o.cloud_after.objects.is_empty(),
        "after destroy the store still holds {:?}",
        o.cloud_after.objects.keys().collect::<Vec<_>>()
    );
    ensure!(
        o.state_after.data.is_empty(),
        "after destroy the state still holds data results"
    );
    Ok(())
}

/// Rule 13 on one snapshot: every object's provider instance is in state.
pub fn providers_resolve(s: &Snapshot) -> Check {
    for (addr, inst) in &s.resources {
        for obj in inst.objects() {
            ensure!(
                s.resolve_provider(&obj.provider).is_some(),
                "{addr} uses provider {} ({}), which is not in state",
                obj.provider.addr,
                obj.provider.id
            );
        }
    }
    Ok(())
}

/// Rule 13: providers are never removed while used, deletes go to the region recorded in
/// state, and no call is made in a region that is not a real one.
pub fn providers(o: &Outcome) -> Check {
    providers_resolve(&o.state_after)?;
    let before = state_objects(&o.state_before);
    let mut known_regions: BTreeSet<String> = BTreeSet::from(["local".to_string()]);
    known_regions.extend(
        o.cloud_before
            .objects
            .keys()
            .filter(|k| k.0 == "local")
            .map(|k| k.1.clone()),
    );
    known_regions.extend(
        o.state_before
            .providers
            .values()
            .filter_map(|p| stored_str(&p.config, "region")),
    );
    let mut created: BTreeSet<(String, String)> = BTreeSet::new();
    for c in &o.calls {
        ensure!(known_regions.contains(&c.region), "a {} call was made in region {:?}, which is neither local, a thing's id, nor a region in state", c.op, c.region);
        let id = c.id.clone().unwrap_or_default();
        if c.op == "create" && c.ok && c.region == "local" {
            known_regions.insert(id.clone());
        }
        if c.op == "create" {
            created.insert((c.region.clone(), id.clone()));
        }
        if c.op == "delete" {
            let k = (c.region.clone(), id.clone());
            ensure!(
                before.contains_key(&k) || created.contains(&k),
                "delete of {id} in region {} does not match where state recorded it ({:?})",
                c.region,
                before.keys().find(|x| x.1 == id)
            );
        }
    }
    Ok(())
}

/// Rule 10 on a log: the replay from scratch is the snapshot the store holds, every prefix
/// passes the integrity check, and `snapshot_at` (checkpoints) agrees with the replay.
pub fn replay_equivalent(state_dir: &std::path::Path) -> Check {
    let o = cairn::state::OpenOptions {
        command: "proptest".into(),
        lock_timeout: crate::harness::LOCK_TIMEOUT,
        write: false,
        skip_lock: false,
        encryption: None,
    };
    let store = match cairn::state::Store::open(state_dir, &o) {
        Ok((store, _)) => store,
        Err(cairn::state::StateError::NotFound { .. }) => return Ok(()),
        Err(e) => return Err(format!("cannot open the state: {e}")),
    };
    let events = store.events(1).map_err(|e| e.to_string())?;
    replay_matches(&events, store.snapshot())?;
    let violations = store.check();
    ensure!(
        violations.is_empty(),
        "integrity check: {:?}",
        violations.iter().map(|v| v.to_string()).collect::<Vec<_>>()
    );
    let mut s = Snapshot::new();
    for e in &events {
        s.apply(e);
        let v = cairn::state::check::check_snapshot(&s);
        ensure!(
            v.is_empty(),
            "integrity check after event {} ({:?}): {:?}",
            e.seq,
            e.body,
            v.iter().map(|v| v.to_string()).collect::<Vec<_>>()
        );
        providers_resolve(&s).map_err(|m| format!("after event {}: {m}", e.seq))?;
        let at = store.snapshot_at(e.seq).map_err(|e| e.to_string())?;
        ensure!(
            at == s,
            "snapshot_at({}) (from a checkpoint) differs from the replay",
            e.seq
        );
    }
    Ok(())
}

/// Rule 10 on a list of events: replaying them from scratch gives `held`.
pub fn replay_matches(events: &[cairn::state::Event], held: &Snapshot) -> Check {
    let replayed = Snapshot::replay(events);
    ensure!(
        &replayed == held,
        "replaying the log gives a different state than the store holds:\n{}\nvs\n{}",
        normalized(&replayed),
        normalized(held)
    );
    Ok(())
}

/// The objects the world holds after a crash right after event `k` of an apply whose events
/// are `events` (its first is the run's first event), given the store before and after the
/// apply: every operation started by then is assumed to have been carried out by the provider
/// (its outcome possibly unrecorded), none after.
pub fn cloud_at_crash(
    before: &Cloud,
    after: &Cloud,
    events: &[cairn::state::Event],
    k: usize,
) -> Cloud {
    let mut cloud = before.clone();
    for e in &events[..k] {
        if let EventBody::OperationStarted {
            action,
            token,
            prior,
            ..
        } = &e.body
        {
            let prior_id = prior.as_ref().and_then(|p| stored_str(&p.attrs, "id"));
            match action {
                OpAction::Create => {
                    if let Some((key, obj)) = after
                        .objects
                        .iter()
                        .find(|(_, o)| o.token.is_some() && o.token == *token)
                    {
                        cloud.objects.insert(key.clone(), obj.clone());
                    }
                }
                OpAction::Update => {
                    if let Some((key, obj)) = after
                        .objects
                        .iter()
                        .find(|(k, _)| Some(&k.1) == prior_id.as_ref())
                    {
                        cloud.objects.insert(key.clone(), obj.clone());
                    }
                }
                OpAction::Delete => {
                    let keys: Vec<_> = cloud
                        .objects
                        .keys()
                        .filter(|k| Some(&k.1) == prior_id.as_ref())
                        .cloned()
                        .collect();
                    for key in keys {
                        if !after.objects.contains_key(&key) {
                            cloud.objects.remove(&key);
                        }
                    }
                }
            }
        }
    }
    cloud
}

/// Rule 2 for `plan -read-only`: nothing is deferred; every data source whose configuration
/// (key and provider) is known is read; one whose configuration is not known keeps its
/// previous result, with a warning. In read-only mode a managed resource is what refresh
/// found, so a value is known when the instance it comes from is in the refreshed state (or
/// from a data source that is read or has a previous result). The expectation is computed
/// from the generated model.
pub fn read_only_reads(o: &Outcome) -> Check {
    let plan = o.plan.as_ref().ok_or("no plan")?;
    let cfg = &o.config;
    for c in &plan.changes {
        ensure!(
            c.action != Action::Read,
            "plan -read-only deferred {} to apply ({:?})",
            c.addr,
            c.reason
        );
    }
    let read: BTreeSet<String> = plan
        .data_reads
        .iter()
        .map(|d| resource_key(&d.addr))
        .collect();
    // The refreshed state: objects the store still has, or whose read failed (kept).
    let failed_read = o
        .fault
        .as_deref()
        .and_then(|f| f.strip_prefix("read:"))
        .map(|n| n.trim_end_matches(":after").to_string());
    let present: BTreeSet<String> = o
        .state_before
        .resources
        .iter()
        .filter_map(|(a, i)| i.current.as_ref().map(|c| (a, c)))
        .filter(|(_, c)| {
            let k = (
                region_of(&o.state_before, &c.provider),
                stored_str(&c.attrs, "id").unwrap_or_default(),
            );
            o.cloud_before.objects.contains_key(&k)
                || failed_read.is_some() && stored_str(&c.attrs, "name") == failed_read
        })
        .map(|(a, _)| a.to_string())
        .collect();
    // Terraform's implied moves, which read-only applies too: `a` becomes `a[0]` when `count`
    // is added, and `a[0]` becomes `a` when it is dropped (if the state lacks the target).
    let in_state: BTreeSet<String> = o
        .state_before
        .resources
        .keys()
        .map(|a| a.to_string())
        .collect();
    let implied: Vec<String> = present
        .iter()
        .filter_map(|a| match a.strip_suffix("[0]") {
            Some(base) => Some(base.to_string()),
            None if !a.ends_with(']') => Some(format!("{a}[0]")),
            None => None,
        })
        .filter(|to| !in_state.contains(to))
        .collect();
    let present: BTreeSet<String> = present.into_iter().chain(implied).collect();
    let prior: BTreeSet<String> = o.state_before.data.keys().map(resource_key).collect();
    // On a state where nothing was applied, read-only has nothing to re-read.
    let never_applied = o.state_before.resources.is_empty()
        && o.state_before.data.is_empty()
        && o.state_before.outputs.is_empty();
    let provider_known = cfg.dyn_region.as_ref().is_none_or(|r| {
        cfg.things(false)
            .find(|t| &t.label == r)
            .is_some_and(|t| present.contains(&format!("sim_thing.{}{}", t.label, t.first_index())))
    });
    // Data sources whose value is known (read, or kept from before).
    let mut value_known: BTreeMap<String, bool> = BTreeMap::new();
    for d in data_in_order(cfg) {
        let Term::Data(child, label) = &d else {
            continue;
        };
        let Some(lookup) = cfg.lookups(*child).find(|l| &l.label == label) else {
            continue;
        };
        let key = d.resource().unwrap_or_default();
        let config_known = known_in_read_only(cfg, &lookup.key, *child, &present, &value_known);
        let expect_read = !never_applied && config_known && (!lookup.dyn_ || provider_known);
        if expect_read {
            ensure!(
                read.contains(&key),
                "plan -read-only did not read {key}, whose configuration is known"
            );
        } else {
            ensure!(
                !read.contains(&key),
                "plan -read-only read {key}, whose configuration (key known: {config_known}, provider known: {provider_known}) cannot be known without applying changes"
            );
            ensure!(
                !prior.contains(&key)
                    || plan.warnings.iter().any(
                        |w| w.starts_with(&format!("{key}:")) && w.contains("previous result")
                    ),
                "plan -read-only kept {key}'s previous result without a warning (warnings: {:?})",
                plan.warnings
            );
        }
        value_known.insert(key.clone(), expect_read || prior.contains(&key));
    }
    Ok(())
}

/// Whether an expression of module `child` has a known value in a read-only plan.
fn known_in_read_only(
    cfg: &Cfg,
    e: &crate::gen::Expr,
    child: bool,
    present: &BTreeSet<String>,
    data: &BTreeMap<String, bool>,
) -> bool {
    use crate::gen::{Expr, Item, Ref};
    let module = if child {
        cfg.child.as_ref()
    } else {
        Some(&cfg.root)
    };
    let Some(module) = module else { return false };
    match e {
        Expr::Lit(_) => true,
        Expr::Ref(Ref::Thing(l, _)) => cfg.things(child).find(|t| &t.label == l).is_some_and(|t| {
            let prefix = if child { "module.m." } else { "" };
            present.contains(&format!("{prefix}sim_thing.{l}{}", t.first_index()))
        }),
        Expr::Ref(Ref::Data(l)) => Term::Data(child, l.clone())
            .resource()
            .and_then(|k| data.get(&k).copied())
            .unwrap_or(false),
        Expr::Ref(Ref::Local(l)) => module.items.iter().any(|i| match i {
            Item::Local { label, value } => {
                label == l && known_in_read_only(cfg, value, child, present, data)
            }
            _ => false,
        }),
        Expr::Ref(Ref::Var) => cfg.root.items.iter().any(|i| match i {
            Item::Call { input, .. } => known_in_read_only(cfg, input, false, present, data),
            _ => false,
        }),
        Expr::Ref(Ref::ModOut) => cfg
            .child
            .as_ref()
            .and_then(|c| c.output.as_ref())
            .is_some_and(|out| known_in_read_only(cfg, out, true, present, data)),
    }
}
