//! The lifecycle properties of issue 6, one named test each, on the real engine, the real state
//! store in a temporary directory and the `sim` provider.
//!
//! Case counts are small by default so `cargo test` stays fast on 2 cores; set
//! `CAIRN_PROPTEST_CASES=N` to run N cases of every property (e.g. 500 for a long soak).
//! A failing case prints the scenario (configurations, cloud edits, faults, operations) and
//! the world's transcript as a fixture to paste into `fixtures/engine/<name>/`. Proptest's
//! regression files are in `proptests/proptest-regressions/`.

use cairn_proptests::check::{self, Check};
use cairn_proptests::gen::{self, Cfg, Mix, Op, Round, Scenario};
use cairn_proptests::harness::{read_state, Outcome, World};
use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;
use proptest::test_runner::TestCaseError;

/// The number of cases: `CAIRN_PROPTEST_CASES`, else the property's default.
fn config(default: u32) -> ProptestConfig {
    let cases = std::env::var("CAIRN_PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default);
    ProptestConfig {
        cases,
        max_shrink_iters: 64,
        // Relative to the package directory, where `cargo test` runs the tests.
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct(
            "proptest-regressions/properties.txt",
        ))),
        ..ProptestConfig::default()
    }
}

fn ops(list: &[(u32, Op)]) -> BoxedStrategy<Op> {
    let options: Vec<(u32, BoxedStrategy<Op>)> =
        list.iter().map(|(w, o)| (*w, Just(*o).boxed())).collect();
    proptest::strategy::Union::new_weighted(options).boxed()
}

const CALM: Mix = Mix {
    faults: 0,
    cloud: 3,
    edits: 4,
};

/// Seeds the ext table, then for each round: the configuration, the cloud edits, and the
/// fault; calls `run` for the operation and `each` on its outcome.
fn drive(
    scn: &Scenario,
    mut run: impl FnMut(&mut World, &Round, Option<String>) -> Result<Outcome, String>,
    mut each: impl FnMut(&mut World, &Round, &Outcome) -> Check,
) -> Result<(), TestCaseError> {
    let mut world = World::new();
    world.ext("k1", Some("e1"));
    world.ext("k2", Some("e2"));
    for (round, cfg) in scn.rounds.iter().zip(scn.configs()) {
        world.set_config(&cfg);
        for c in &round.cloud {
            world.cloud(c);
        }
        let fault = round.fault.as_ref().and_then(|f| world.fault_entry(f));
        let outcome = run(&mut world, round, fault).map_err(|m| fail(&world, &m))?;
        each(&mut world, round, &outcome).map_err(|m| fail(&world, &m))?;
    }
    Ok(())
}

fn fail(world: &World, message: &str) -> TestCaseError {
    TestCaseError::fail(format!("{message}\n\n{}", world.fixture()))
}

fn plain(w: &mut World, r: &Round, fault: Option<String>) -> Result<Outcome, String> {
    Ok(w.run(r.op, r.parallelism, fault.as_deref()))
}

fn is_apply(o: &Outcome) -> bool {
    matches!(o.op, Op::Apply | Op::Destroy)
}

proptest! {
    #![proptest_config(config(12))]

    /// Rule 1 — convergence, no change lag: after a successful apply, an immediate plan
    /// proposes no change, whatever the references (reads through locals, module inputs and
    /// outputs included).
    #[test]
    fn p01_convergence(scn in gen::scenario(CALM, ops(&[(6, Op::Apply), (1, Op::Plan), (1, Op::Refresh), (1, Op::Destroy)]), 1..5)) {
        drive(&scn, plain, |w, r, o| {
            if o.op == Op::Apply && o.ok && o.fault.is_none() {
                check::converged(&w.run(Op::Plan, r.parallelism, None))?;
            }
            Ok(())
        })?;
    }

    /// Rule 2 — deferral is exact: in every plan, a data source is read at plan time iff its
    /// configuration and its provider's are known and no managed resource it depends on (by
    /// reference, through locals, variables, module inputs/outputs, depends_on, or an enclosing
    /// call's depends_on) has a pending change; otherwise it is deferred with the right reason.
    /// The expected set is computed from the generated model, not by the engine.
    #[test]
    fn p02_deferral_is_exact(scn in gen::scenario(CALM, ops(&[(3, Op::Plan), (4, Op::Apply), (1, Op::Destroy)]), 1..5)) {
        drive(&scn, plain, |_, _, o| {
            if matches!(o.op, Op::Plan | Op::Apply) && o.plan.is_some() && (o.ok || o.op == Op::Apply) {
                if let Some(p) = &o.plan {
                    if !p.errored {
                        check::deferral_exact(o)?;
                    }
                }
            }
            Ok(())
        })?;
    }

    /// Rule 3 — refresh is state-only and flat: it makes only `read` calls (and provider
    /// configures), only on managed objects in state, once each, never reads a data source,
    /// records exactly what the store holds, and gives the same state at `-parallelism=1` and
    /// `-parallelism=8`.
    #[test]
    fn p03_refresh_is_state_only_and_flat(scn in gen::scenario(Mix { faults: 2, cloud: 6, edits: 4 }, ops(&[(3, Op::Apply), (3, Op::Refresh), (1, Op::Destroy)]), 1..5)) {
        drive(&scn, |w, r, fault| {
            if r.op != Op::Refresh {
                return Ok(w.run(r.op, r.parallelism, fault.as_deref()));
            }
            let mut other = w.fork();
            let a = other.run(Op::Refresh, 1, fault.as_deref());
            let b = w.run(Op::Refresh, 8, fault.as_deref());
            check::refresh_flat(&a).map_err(|m| format!("-parallelism=1: {m}"))?;
            let (na, nb) = (check::normalized(&a.state_after), check::normalized(&b.state_after));
            if na != nb {
                return Err(format!("refresh gives different states at -parallelism=1 and 8:\n{na}\nvs\n{nb}"));
            }
            Ok(b)
        }, |_, _, o| if o.op == Op::Refresh { check::refresh_flat(o) } else { Ok(()) })?;
    }

    /// Rule 4 — read-only never mutates: `plan -read-only` and `apply -read-only` never
    /// create, update or delete anything in the cloud.
    #[test]
    fn p04_read_only_never_mutates(scn in gen::scenario(Mix { faults: 2, cloud: 5, edits: 4 }, ops(&[(3, Op::Apply), (2, Op::PlanReadOnly), (3, Op::ApplyReadOnly)]), 1..6)) {
        drive(&scn, plain, |_, _, o| if matches!(o.op, Op::PlanReadOnly | Op::ApplyReadOnly) { check::read_only(o) } else { Ok(()) })?;
    }

    /// Rule 5 — plans are side-effect free: `plan` (normal, read-only, destroy) only
    /// configures, reads and looks up, changes nothing in the cloud and appends no event.
    #[test]
    fn p05_plans_are_side_effect_free(scn in gen::scenario(Mix { faults: 3, cloud: 4, edits: 4 }, ops(&[(3, Op::Apply), (2, Op::Plan), (1, Op::PlanReadOnly), (1, Op::PlanDestroy)]), 1..6)) {
        drive(&scn, plain, |_, _, o| if matches!(o.op, Op::Plan | Op::PlanReadOnly | Op::PlanDestroy) { check::plan_pure(o) } else { Ok(()) })?;
    }

    /// Rule 6 — apply does what the plan said: the create/update/delete calls of an apply are
    /// those its plan listed (all of them when it succeeds), each data source is looked up
    /// once, and every value the plan knew is the value applied.
    #[test]
    fn p06_apply_does_what_the_plan_said(scn in gen::scenario(Mix { faults: 3, cloud: 4, edits: 5 }, ops(&[(5, Op::Apply), (1, Op::Destroy)]), 1..5)) {
        drive(&scn, plain, |_, _, o| if is_apply(o) { check::apply_as_planned(o) } else { Ok(()) })?;
    }

    /// Rule 7 — nothing is lost: after any apply (successful, failed, or cut off after any of
    /// its operation events — the crash world is rebuilt from the log prefix and the store as
    /// the provider left it), every object in the store is in state or a pending operation's;
    /// the next run's recovery resolves them, and after a successful apply state and store
    /// agree exactly.
    #[test]
    fn p07_nothing_is_lost(scn in gen::scenario(Mix { faults: 4, cloud: 3, edits: 4 }, ops(&[(5, Op::Apply), (1, Op::Destroy), (1, Op::Refresh)]), 1..4), picks in prop::collection::vec(any::<u16>(), 2)) {
        drive(&scn, plain, |w, r, o| {
            if !is_apply(o) {
                return Ok(());
            }
            check::nothing_lost(&o.state_after, &o.cloud_after)?;
            if o.ok && o.fault.is_none() {
                check::agree(&o.state_after, &o.cloud_after)?;
            }
            // Crash points: right after an operation's start or outcome.
            let points: Vec<usize> = o.events.iter().enumerate().filter(|(_, e)| matches!(e.body, cairn::state::EventBody::OperationStarted { .. } | cairn::state::EventBody::OperationSucceeded { .. } | cairn::state::EventBody::OperationFailed { .. })).map(|(i, _)| i + 1).collect();
            if points.is_empty() {
                return Ok(());
            }
            let (_, all) = read_state(&w.state_dir());
            let before = all.len() - o.events.len();
            for p in &picks {
                let k = points[*p as usize % points.len()];
                let cloud = check::cloud_at_crash(&o.cloud_before, &o.cloud_after, &o.events, k);
                let mut crashed = w.fork();
                crashed.crash_to(&all[..before + k], &cloud)?;
                let (s, _) = read_state(&crashed.state_dir());
                check::nothing_lost(&s, &cloud).map_err(|m| format!("crash after event {}: {m}", all[before + k - 1].seq))?;
                let next = crashed.run(Op::Apply, r.parallelism, None);
                if std::env::var_os("CAIRN_PROPTEST_VERBOSE").is_some() {
                    eprintln!("crash after {k}: state before the next apply: {}\ncloud {:?}\nnext: ok={} errors={:?}\ncalls={:?}\nevents={:?}", check::normalized(&s), cloud.objects, next.ok, next.errors, next.calls, next.events.iter().map(|e| &e.body).collect::<Vec<_>>());
                }
                let msg = |m: String| format!("the apply after a crash after event {} of the previous apply: {m}\n{}", all[before + k - 1].seq, crashed.fixture());
                check::nothing_lost(&next.state_after, &next.cloud_after).map_err(msg)?;
                if next.ok {
                    check::agree(&next.state_after, &next.cloud_after).map_err(msg)?;
                } else {
                    check::errors_explained(&next).map_err(msg)?;
                }
                check::replay_equivalent(&crashed.state_dir()).map_err(msg)?;
            }
            Ok(())
        })?;
    }

    /// Rule 8 — order: no object is created or updated before the objects it depends on
    /// (through references, data sources, modules, depends_on and provider configurations);
    /// no object is deleted while something that depends on it still exists.
    #[test]
    fn p08_order(scn in gen::scenario(Mix { faults: 2, cloud: 3, edits: 5 }, ops(&[(5, Op::Apply), (2, Op::Destroy)]), 1..5)) {
        drive(&scn, plain, |_, _, o| if is_apply(o) { check::ordered(o) } else { Ok(()) })?;
    }

    /// Rule 9 — failures skip exactly their dependents: with an injected failure (before or
    /// after the change), every dependent of the failed step is skipped, every independent
    /// step completes, and the failed resource's state is what the provider reported (a
    /// partial create is tainted). Every error is explained by a fault or a missing key.
    #[test]
    fn p09_failures_skip_exactly_their_dependents(scn in gen::scenario(Mix { faults: 8, cloud: 2, edits: 4 }, ops(&[(6, Op::Apply), (1, Op::Destroy), (1, Op::Plan)]), 1..5)) {
        drive(&scn, plain, |_, _, o| {
            check::errors_explained(o)?;
            if o.op == Op::Apply { check::failures_skip_dependents(o) } else { Ok(()) }
        })?;
    }

    /// Rule 10 — replay equivalence: after every command, replaying the log from scratch and
    /// opening from a checkpoint both give exactly the state the run ended with, and the
    /// integrity check passes after every event.
    #[test]
    fn p10_replay_equivalence(scn in gen::scenario(Mix { faults: 4, cloud: 3, edits: 4 }, gen::op().boxed(), 1..5)) {
        drive(&scn, plain, |w, _, o| {
            check::replay_equivalent(&w.state_dir())?;
            if o.events.len() % 2 == 1 {
                w.checkpoint();
            }
            Ok(())
        })?;
    }

    /// Rule 11 — parallelism independence: the same scenario at `-parallelism=1` and
    /// `-parallelism=8` gives identical plan texts and identical states and stores.
    #[test]
    fn p11_parallelism_independence(scn in gen::scenario(Mix { faults: 3, cloud: 3, edits: 4 }, gen::op().boxed(), 1..5)) {
        let mut one = World::new();
        let mut eight = World::new();
        for w in [&mut one, &mut eight] {
            w.ext("k1", Some("e1"));
            w.ext("k2", Some("e2"));
        }
        for (round, cfg) in scn.rounds.iter().zip(scn.configs()) {
            let mut outs = Vec::new();
            for (w, p) in [(&mut one, 1), (&mut eight, 8)] {
                w.set_config(&cfg);
                for c in &round.cloud {
                    w.cloud(c);
                }
                let fault = round.fault.as_ref().and_then(|f| w.fault_entry(f));
                outs.push(w.run(round.op, p, fault.as_deref()));
            }
            let (a, b) = (&outs[0], &outs[1]);
            prop_assert_eq!(&a.plan_text, &b.plan_text, "plan text differs\n{}", one.fixture());
            prop_assert_eq!(check::normalized(&a.state_after), check::normalized(&b.state_after), "state differs\n{}", one.fixture());
            // Create tokens are random: everything else must be equal.
            let strip = |o: &Outcome| o.cloud_after.objects.iter().map(|(k, v)| (k.clone(), (v.name.clone(), v.value.clone(), v.out.clone()))).collect::<Vec<_>>();
            prop_assert_eq!(strip(a), strip(b), "store differs\n{}", one.fixture());
        }
    }

    /// Rule 12 — destroy empties: after a successful destroy, the state holds no managed
    /// resource (and no data result) and the store holds no object Cairn created.
    #[test]
    fn p12_destroy_empties(scn in gen::scenario(Mix { faults: 2, cloud: 3, edits: 4 }, ops(&[(5, Op::Apply), (2, Op::Destroy), (1, Op::Refresh)]), 1..4)) {
        let mut scn = scn;
        scn.rounds.push(Round { edits: Vec::new(), cloud: Vec::new(), fault: None, op: Op::Destroy, parallelism: 8 });
        drive(&scn, plain, |_, _, o| if o.op == Op::Destroy && o.fault.is_none() && o.errors.is_empty() { check::destroyed(o) } else { Ok(()) })?;
    }

    /// Rule 13 — providers: a provider instance is never removed while a resource in state
    /// uses it (after every command and after every event of its log); deletes go to the region
    /// recorded in state; and no call is ever made with an unknown provider configuration (every
    /// region a call names is `local`, a real thing's id, or a region state recorded).
    #[test]
    fn p13_providers(scn in gen::scenario(Mix { faults: 2, cloud: 3, edits: 6 }, ops(&[(5, Op::Apply), (1, Op::Plan), (1, Op::Refresh), (1, Op::Destroy)]), 1..5)) {
        let mut scn = scn;
        // Always declare `sim.dyn`, configured from a thing's id.
        scn.seeds.switches |= 1;
        drive(&scn, plain, |w, _, o| {
            check::providers(o)?;
            check::replay_equivalent(&w.state_dir())
        })?;
    }
}

proptest! {
    #![proptest_config(config(4))]

    /// Rule 7 with real crashes: an `apply` process is killed (SIGKILL) at a random moment
    /// while its `sim` calls take 20 ms each; every object the store then holds is in state or
    /// a pending operation's, the next apply resolves them, and state and store then agree.
    #[test]
    fn p07_nothing_is_lost_when_the_engine_is_killed(scn in gen::scenario(CALM, ops(&[(1, Op::Apply)]), 1..3), after_ms in 5u64..150) {
        let mut world = World::new();
        world.ext("k1", Some("e1"));
        world.ext("k2", Some("e2"));
        let configs = scn.configs();
        let last = scn.rounds.len() - 1;
        for (i, (round, cfg)) in scn.rounds.iter().zip(&configs).enumerate() {
            world.set_config(cfg);
            for c in &round.cloud {
                world.cloud(c);
            }
            if i < last {
                world.run(Op::Apply, round.parallelism, None);
                continue;
            }
            world.killed_apply(env!("CARGO_BIN_EXE_apply"), round.parallelism, 20, after_ms).map_err(|m| fail(&world, &m))?;
            let (state, _) = read_state(&world.state_dir());
            let cloud = cairn_proptests::harness::read_cloud(&world.store);
            check::nothing_lost(&state, &cloud).map_err(|m| fail(&world, &format!("right after the kill: {m}")))?;
            check::replay_equivalent(&world.state_dir()).map_err(|m| fail(&world, &m))?;
            let next = world.run(Op::Apply, round.parallelism, None);
            check::nothing_lost(&next.state_after, &next.cloud_after).map_err(|m| fail(&world, &m))?;
            if next.ok {
                check::agree(&next.state_after, &next.cloud_after).map_err(|m| fail(&world, &m))?;
            } else {
                check::errors_explained(&next).map_err(|m| fail(&world, &m))?;
            }
        }
    }
}

/// The generator makes what the properties need: modules, dyn providers, deferred reads.
#[test]
fn generator_covers_the_features() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let mut runner = TestRunner::deterministic();
    let (mut child, mut dyn_, mut count, mut each, mut lookups, mut depends) = (0, 0, 0, 0, 0, 0);
    for _ in 0..300 {
        let seeds = gen::seeds().new_tree(&mut runner).expect("tree").current();
        let cfg: Cfg = gen::build(&seeds);
        let text: String = cfg.files().into_iter().map(|(_, t)| t).collect();
        child += cfg.child.is_some() as u32;
        dyn_ += text.contains("provider = sim.dyn") as u32;
        count += text.contains("count =") as u32;
        each += text.contains("for_each") as u32;
        lookups += text.contains("data \"sim_lookup\"") as u32;
        depends += text.contains("depends_on") as u32;
    }
    for (what, n) in [
        ("module", child),
        ("dyn", dyn_),
        ("count", count),
        ("for_each", each),
        ("lookup", lookups),
        ("depends_on", depends),
    ] {
        assert!(n >= 15, "only {n} of 300 configurations have {what}");
    }
}
