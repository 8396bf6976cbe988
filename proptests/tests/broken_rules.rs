//! Every property can fail: each test runs a small scenario on the real engine, then changes
//! its outcome the way an engine with that rule broken would have produced it, and shows that
//! the property's check rejects it (and accepts the real outcome).

use cairn::plan::{Action, DataRead};
use cairn::value::Value;
use cairn_proptests::check;
use cairn_proptests::gen::{Cfg, Expr, Item, Lookup, Module, Op, Ref, Rep, Target, Thing};
use cairn_proptests::harness::{read_state, Call, Outcome, World};

fn thing(label: &str, value: Expr) -> Item {
    Item::Thing(Thing {
        label: label.into(),
        name: label.into(),
        value,
        rep: Rep::One,
        dyn_: false,
        depends_on: Vec::new(),
    })
}

/// `t0`; `local.l1 = t0.id`; `d2` looks `local.l1` up; `t3.value = d2.result`; a dyn provider
/// configured from `t0.id` with `t4` in it; a module whose `t0` depends on nothing.
fn config() -> Cfg {
    let root = Module {
        items: vec![
            thing("t0", Expr::Lit("v1".into())),
            Item::Local {
                label: "l1".into(),
                value: Expr::Ref(Ref::Thing("t0".into(), "id")),
            },
            Item::Lookup(Lookup {
                label: "d2".into(),
                key: Expr::Ref(Ref::Local("l1".into())),
                dyn_: false,
                depends_on: Vec::new(),
            }),
            thing("t3", Expr::Ref(Ref::Data("d2".into()))),
            Item::Thing(Thing {
                label: "t4".into(),
                name: "t4".into(),
                value: Expr::Lit("v2".into()),
                rep: Rep::One,
                dyn_: true,
                depends_on: vec![Target::Thing("t3".into())],
            }),
        ],
        output: Some(Expr::Ref(Ref::Thing("t3".into(), "out"))),
    };
    Cfg {
        root,
        child: None,
        dyn_region: Some("t0".into()),
    }
}

struct Run {
    world: World,
    plan1: Outcome,
    apply: Outcome,
    plan2: Outcome,
}

fn run() -> Run {
    let mut world = World::new();
    world.set_config(&config());
    let plan1 = world.run(Op::Plan, 4, None);
    let apply = world.run(Op::Apply, 4, None);
    let plan2 = world.run(Op::Plan, 4, None);
    assert!(apply.ok, "{:?}\n{}", apply.errors, world.fixture());
    Run {
        world,
        plan1,
        apply,
        plan2,
    }
}

fn call(op: &str, name: &str, id: Option<&str>) -> Call {
    Call {
        op: op.into(),
        type_: "sim_thing".into(),
        name: name.into(),
        id: id.map(str::to_string),
        region: "local".into(),
        ok: true,
    }
}

#[test]
fn p01_convergence_fails_on_a_change_lag() {
    let r = run();
    check::converged(&r.plan2).unwrap();
    // An engine with change lag: the plan after the apply still updates t3.
    let mut lag = r.plan2.clone();
    let c = lag
        .plan
        .as_mut()
        .unwrap()
        .changes
        .iter_mut()
        .find(|c| c.addr.to_string() == "sim_thing.t3")
        .unwrap();
    c.action = Action::Update;
    assert!(check::converged(&lag).is_err());
}

#[test]
fn p02_deferral_fails_on_early_and_late_reads() {
    let r = run();
    check::deferral_exact(&r.plan1).unwrap();
    check::deferral_exact(&r.plan2).unwrap();
    // Terraform's flaw: the read through `local.l1` happens at plan time although t0 is
    // pending.
    let mut early = r.plan1.clone();
    let p = early.plan.as_mut().unwrap();
    let i = p
        .changes
        .iter()
        .position(|c| c.action == Action::Read)
        .expect("d2 deferred on the first plan");
    let c = p.changes.remove(i);
    p.data_reads.push(DataRead {
        addr: c.addr,
        provider: c.provider,
        config: Value::null(),
        result: Value::string("x"),
        before: None,
    });
    let e = check::deferral_exact(&early).unwrap_err();
    assert!(e.contains("must be deferred"), "{e}");
    // A needless deferral once nothing is pending.
    let mut late = r.plan2.clone();
    let p = late.plan.as_mut().unwrap();
    let d = p.data_reads.remove(0);
    let mut c = p.changes[0].clone();
    c.addr = d.addr;
    c.action = Action::Read;
    p.changes.push(c);
    let e = check::deferral_exact(&late).unwrap_err();
    assert!(e.contains("must be read during the plan"), "{e}");
}

#[test]
fn p03_refresh_fails_on_lookups_and_missed_reads() {
    let mut r = run();
    let o = r.world.run(Op::Refresh, 2, None);
    check::refresh_flat(&o).unwrap();
    let mut lookup = o.clone();
    lookup.calls.push(Call {
        op: "lookup".into(),
        type_: "sim_lookup".into(),
        name: "k1".into(),
        id: None,
        region: "local".into(),
        ok: true,
    });
    assert!(check::refresh_flat(&lookup).is_err());
    let mut missed = o.clone();
    let i = missed.calls.iter().position(|c| c.op == "read").unwrap();
    missed.calls.remove(i);
    assert!(check::refresh_flat(&missed).is_err());
    let mut stale = o.clone();
    stale.state_after.resources.clear();
    assert!(check::refresh_flat(&stale).is_err());
}

#[test]
fn p04_read_only_fails_on_a_create() {
    let mut r = run();
    let o = r.world.run(Op::ApplyReadOnly, 2, None);
    check::read_only(&o).unwrap();
    let mut broken = o.clone();
    broken.calls.push(call("create", "t9", Some("t9-1")));
    assert!(check::read_only(&broken).is_err());
}

#[test]
fn p05_plan_fails_on_an_event() {
    let r = run();
    check::plan_pure(&r.plan2).unwrap();
    let mut broken = r.plan2.clone();
    broken.events.push(r.apply.events[0].clone());
    assert!(check::plan_pure(&broken).is_err());
    let mut broken = r.plan2.clone();
    broken.calls.push(call("update", "t0", Some("t0-1")));
    assert!(check::plan_pure(&broken).is_err());
}

#[test]
fn p06_apply_fails_on_unplanned_calls_and_other_values() {
    let r = run();
    check::apply_as_planned(&r.apply).unwrap();
    let mut extra = r.apply.clone();
    extra.calls.push(call("delete", "t0", Some("t0-1")));
    assert!(check::apply_as_planned(&extra).is_err());
    let mut missing = r.apply.clone();
    let i = missing.calls.iter().position(|c| c.op == "create").unwrap();
    missing.calls.remove(i);
    assert!(check::apply_as_planned(&missing).is_err());
    let mut other_value = r.apply.clone();
    let c = other_value
        .plan
        .as_mut()
        .unwrap()
        .changes
        .iter_mut()
        .find(|c| c.addr.to_string() == "sim_thing.t0")
        .unwrap();
    if let Some(Value::Object(m)) = c.after.as_mut() {
        m.insert("value".into(), Value::string("planned"));
    }
    assert!(check::apply_as_planned(&other_value).is_err());
}

#[test]
fn p07_nothing_lost_fails_on_a_forgotten_object() {
    let r = run();
    check::nothing_lost(&r.apply.state_after, &r.apply.cloud_after).unwrap();
    check::agree(&r.apply.state_after, &r.apply.cloud_after).unwrap();
    let mut forgot = r.apply.state_after.clone();
    let k = forgot.resources.keys().next().unwrap().clone();
    forgot.resources.remove(&k);
    assert!(check::nothing_lost(&forgot, &r.apply.cloud_after).is_err());
    assert!(check::agree(&forgot, &r.apply.cloud_after).is_err());
}

#[test]
fn p08_order_fails_when_a_dependent_is_created_first() {
    let r = run();
    check::ordered(&r.apply).unwrap();
    let mut broken = r.apply.clone();
    let i0 = broken
        .calls
        .iter()
        .position(|c| c.op == "create" && c.name == "t0")
        .unwrap();
    let i3 = broken
        .calls
        .iter()
        .position(|c| c.op == "create" && c.name == "t3")
        .unwrap();
    broken.calls.swap(i0, i3);
    assert!(check::ordered(&broken).is_err());
}

#[test]
fn p09_failures_fail_when_a_dependent_still_runs() {
    let mut world = World::new();
    world.set_config(&config());
    let o = world.run(Op::Apply, 4, Some("create:t0"));
    assert!(!o.ok);
    check::failures_skip_dependents(&o).unwrap();
    let mut broken = o.clone();
    broken.calls.push(call("create", "t3", Some("t3-1")));
    assert!(check::failures_skip_dependents(&broken).is_err());
    // And a partial create that state does not record as the provider reported it.
    let o = world.run(Op::Apply, 4, Some("create:t0:after"));
    check::failures_skip_dependents(&o).unwrap();
    let mut broken = o.clone();
    broken.state_after.resources.clear();
    assert!(check::failures_skip_dependents(&broken).is_err());
}

#[test]
fn p10_replay_fails_on_a_missing_event() {
    let r = run();
    check::replay_equivalent(&r.world.state_dir()).unwrap();
    let (held, events) = read_state(&r.world.state_dir());
    check::replay_matches(&events, &held).unwrap();
    let mut lost = events.clone();
    let i = lost
        .iter()
        .position(|e| matches!(e.body, cairn::state::EventBody::OperationSucceeded { .. }))
        .unwrap();
    lost.remove(i);
    assert!(check::replay_matches(&lost, &held).is_err());
}

#[test]
fn p11_parallelism_fails_on_different_states() {
    let r = run();
    assert_ne!(
        check::normalized(&r.plan1.state_after),
        check::normalized(&r.apply.state_after)
    );
    assert_ne!(r.plan1.plan_text, r.plan2.plan_text);
}

#[test]
fn p12_destroy_fails_when_something_remains() {
    let mut r = run();
    let o = r.world.run(Op::Destroy, 4, None);
    check::destroyed(&o).unwrap();
    let mut broken = o.clone();
    broken.cloud_after = r.apply.cloud_after.clone();
    assert!(check::destroyed(&broken).is_err());
    let mut broken = o.clone();
    broken.state_after = r.apply.state_after.clone();
    assert!(check::destroyed(&broken).is_err());
}

#[test]
fn p13_providers_fail_on_removed_provider_and_wrong_region() {
    let mut r = run();
    check::providers(&r.apply).unwrap();
    let mut removed = r.apply.clone();
    removed.state_after.providers.clear();
    assert!(check::providers(&removed).is_err());
    let mut unknown = r.apply.clone();
    unknown.calls[0].region = "(known after apply)".into();
    assert!(check::providers(&unknown).is_err());
    // Deleting the dyn thing in the wrong region.
    let mut cfg = config();
    cfg.root.items.pop();
    r.world.set_config(&cfg);
    let o = r.world.run(Op::Apply, 4, None);
    check::providers(&o).unwrap();
    let mut wrong = o.clone();
    for c in wrong.calls.iter_mut().filter(|c| c.op == "delete") {
        c.region = "local".into();
    }
    assert!(check::providers(&wrong).is_err(), "{:?}", o.calls);
}
