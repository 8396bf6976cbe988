//! The lifecycle properties of issue 6, one named test each, on the real engine, the real state
//! store in a temporary directory and the `sim` provider.
//!
//! Each property runs `props::CI_CASES` cases by default; `PROPTEST_CASES=N` runs N cases of
//! every property (a long soak: `PROPTEST_CASES=2000 cargo test -p cairn-proptests --release
//! --test properties`; each property prints its cases/s). Each also prints how many cases ran
//! each of its checks and fails when one ran below its stated minimum.
//! A failing case prints the scenario (configurations, cloud edits, faults, operations) and
//! the world's transcript as a fixture to paste into `fixtures/engine/<name>/`. Proptest's
//! regression files are in `proptests/proptest-regressions/`.

use cairn_proptests::check;
use cairn_proptests::cover;
use cairn_proptests::gen::{self, Cfg, Op};
use cairn_proptests::harness::{read_state, World};
use cairn_proptests::props::{self, fail, ops, CALM};
use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;

/// The number of cases: `PROPTEST_CASES` (or the older `CAIRN_PROPTEST_CASES`), else the
/// property's default.
fn cases(default: u32) -> u32 {
    ["PROPTEST_CASES", "CAIRN_PROPTEST_CASES"]
        .iter()
        .find_map(|k| std::env::var(k).ok().and_then(|v| v.parse().ok()))
        .unwrap_or(default)
}

fn config(default: u32) -> ProptestConfig {
    ProptestConfig {
        cases: cases(default),
        max_shrink_iters: 256,
        // Relative to the package directory, where `cargo test` runs the tests.
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct(
            "proptest-regressions/properties.txt",
        ))),
        ..ProptestConfig::default()
    }
}

/// Runs `property` on [`props::CI_CASES`] generated cases (or `PROPTEST_CASES`) on the intact
/// engine, after the seeds saved in `proptest-regressions/properties.txt`. A failure shrinks
/// to a minimal scenario, printed as HCL with the operations applied (and the world's
/// transcript as an engine fixture), and its seed is saved there. Then the coverage: how many
/// cases ran each check (printed), and a failure when a check ran in fewer than its stated
/// minimum percentage of the cases — a property whose checks were skipped has not passed.
/// (Minimums sit at about two thirds of the share measured over several runs, so a run fails
/// on a generator that stopped reaching a check, not on chance.)
fn run_property<T: std::fmt::Debug>(
    name: &str,
    strategy: impl Strategy<Value = T>,
    property: fn(&T, Option<cairn::engine::Sabotage>) -> props::PropResult,
    minimums: &[(&'static str, u32)],
) {
    use std::cell::{Cell, RefCell};
    use std::collections::BTreeMap;
    let mut runner = proptest::test_runner::TestRunner::new(config(props::CI_CASES));
    let counts: RefCell<BTreeMap<&'static str, u32>> = RefCell::new(BTreeMap::new());
    let (ran, failed) = (Cell::new(0u32), Cell::new(false));
    let start = std::time::Instant::now();
    let result = runner.run(&strategy, |v| {
        cover::take();
        let r = property(&v, None);
        let hits = cover::take();
        if r.is_err() {
            failed.set(true);
        } else if !failed.get() {
            ran.set(ran.get() + 1);
            // A soak's progress, so a run cut short still tells its rate.
            if ran.get() % 250 == 0 {
                eprintln!(
                    "{name}: {} cases passed so far, {:.1} s",
                    ran.get(),
                    start.elapsed().as_secs_f64()
                );
            }
            for h in hits {
                *counts.borrow_mut().entry(h).or_default() += 1;
            }
        }
        r
    });
    if let Err(e) = result {
        panic!(
            "{name}: failed after {} passing cases ({:.1} s): {e}",
            ran.get(),
            start.elapsed().as_secs_f64()
        );
    }
    let (ran, counts) = (ran.get(), counts.into_inner());
    let secs = start.elapsed().as_secs_f64();
    let mut report = format!(
        "{name}: {ran} cases in {secs:.1} s ({:.1} cases/s)",
        ran as f64 / secs.max(1e-9)
    );
    let mut low = Vec::new();
    for (check, percent) in minimums {
        let n = counts.get(check).copied().unwrap_or(0);
        let min = ran * percent / 100;
        report.push_str(&format!(
            "\n  {check}: {n} cases (minimum {min}, {percent}%)"
        ));
        if n < min {
            low.push(format!(
                "{check} ran in {n} of {ran} cases, below its minimum {min}"
            ));
        }
    }
    for (check, n) in &counts {
        if !minimums.iter().any(|(c, _)| c == check) {
            report.push_str(&format!("\n  {check}: {n} cases (no minimum)"));
        }
    }
    println!("{report}");
    assert!(
        low.is_empty(),
        "{name}: checks skipped too often:\n{}",
        low.join("\n")
    );
}

/// Rule 1 — convergence, no change lag: after a successful apply, an immediate plan
/// proposes no change, whatever the references (reads through locals, module inputs and
/// outputs included).
#[test]
fn p01_convergence() {
    run_property(
        "p01",
        props::p01_scenarios(),
        props::p01_convergence,
        &[
            ("converged after an apply", 50),
            ("converged after every value changed", 60),
        ],
    );
}

/// Rule 2 — deferral is exact: in every plan, a data source is read at plan time iff its
/// configuration and its provider's are known and no managed resource it depends on (by
/// reference, through locals, variables, module inputs/outputs, depends_on, or an enclosing
/// call's depends_on) has a pending change; otherwise it is deferred with the right reason.
/// The expected set is computed from the generated model, not by the engine. After every
/// plan, a `plan -read-only` of the same world reads every data source whose configuration
/// is known (read-only defers nothing) and keeps the previous result, with a warning, of
/// each whose configuration is not known (it references an object not in state).
#[test]
fn p02_deferral_is_exact() {
    run_property(
        "p02",
        props::p02_scenarios(),
        props::p02_deferral_is_exact,
        &[
            ("deferral exact in a plan", 60),
            ("plan -read-only reads what is known", 60),
            ("deferral exact in an apply's plan", 25),
        ],
    );
}

/// Rule 3 — refresh is state-only and flat: it makes only `read` calls (and provider
/// configures), only on managed objects in state, once each, never reads a data source,
/// records exactly what the store holds, and gives the same state at `-parallelism=1` and
/// `-parallelism=8`.
#[test]
fn p03_refresh_is_state_only_and_flat() {
    run_property(
        "p03",
        props::p03_scenarios(),
        props::p03_refresh_is_state_only_and_flat,
        &[
            ("refresh flat", 35),
            ("refresh the same at -parallelism=1 and 8", 35),
            ("refresh flat with a failed read", 15),
        ],
    );
}

/// Rule 4 — read-only never mutates: `plan -read-only` and `apply -read-only` never
/// create, update or delete anything in the cloud.
#[test]
fn p04_read_only_never_mutates() {
    run_property(
        "p04",
        props::p04_scenarios(),
        props::p04_read_only_never_mutates,
        &[
            ("plan -read-only mutates nothing", 25),
            ("apply -read-only mutates nothing", 35),
        ],
    );
}

/// Rule 5 — plans are side-effect free: `plan` (normal, read-only, destroy) only
/// configures, reads and looks up, changes nothing in the cloud and appends no event.
#[test]
fn p05_plans_are_side_effect_free() {
    run_property(
        "p05",
        props::p05_scenarios(),
        props::p05_plans_are_side_effect_free,
        &[("plan pure", 50), ("plan pure with in-place updates", 25)],
    );
}

/// Rule 6 — apply does what the plan said: the create/update/delete calls of an apply are
/// those its plan listed (all of them when it succeeds), each data source is looked up
/// once, and every value the plan knew is the value applied.
#[test]
fn p06_apply_does_what_the_plan_said() {
    run_property(
        "p06",
        props::p06_scenarios(),
        props::p06_apply_does_what_the_plan_said,
        &[
            ("apply as planned", 90),
            ("apply as planned with updates beside no-ops", 35),
        ],
    );
}

/// Rule 7 — nothing is lost: after any apply (successful, failed, or cut off after any of
/// its events — the crash world is rebuilt from the log prefix and the store as the
/// provider left it), every object in the store is in state or a pending operation's; the
/// next run's recovery resolves them, and after a successful apply state and store agree
/// exactly. Every kind of event an apply appends is a kill point at least once per run
/// (printed with how often).
#[test]
fn p07_nothing_is_lost() {
    run_property(
        "p07",
        props::p07_scenarios(),
        props::p07_nothing_is_lost,
        &[
            ("nothing lost after an apply", 80),
            ("state and store agree after a successful apply", 40),
            ("recovered after a crash", 80),
            ("recovered after a crash with an operation pending", 20),
        ],
    );
    let killed = cover::kill_points();
    let appended = cover::appended_kinds();
    println!("p07: kill points by the kind of the last event kept (appended by applies):");
    for (kind, n) in &appended {
        println!(
            "  {kind}: {} kill points ({n} appended)",
            killed.get(kind).copied().unwrap_or(0)
        );
    }
    let missed: Vec<&str> = props::APPLY_EVENT_KINDS
        .iter()
        .copied()
        .filter(|k| !killed.contains_key(*k))
        .collect();
    assert!(
        missed.is_empty(),
        "p07: these kinds of event were never a kill point: {missed:?}"
    );
}

/// Rule 8 — order: no object is created or updated before the objects it depends on
/// (through references, data sources, modules, depends_on and provider configurations);
/// no object is deleted while something that depends on it still exists.
#[test]
fn p08_order() {
    run_property(
        "p08",
        props::p08_scenarios(),
        props::p08_order,
        &[
            ("creates and updates in order", 70),
            ("deletes in reverse order", 90),
        ],
    );
}

/// Rule 9 — failures skip exactly their dependents: with an injected failure (before or
/// after the change), every dependent of the failed step is skipped, every independent
/// step completes, and the failed resource's state is what the provider reported (a
/// partial create is tainted). Every error is explained by a fault or a missing key.
#[test]
fn p09_failures_skip_exactly_their_dependents() {
    run_property(
        "p09",
        props::p09_scenarios(),
        props::p09_failures_skip_exactly_their_dependents,
        &[
            ("errors explained", 100),
            ("failures skip their dependents", 25),
        ],
    );
}

/// Rule 10 — replay equivalence: after every command, replaying the log from scratch and
/// opening from a checkpoint both give exactly the state the run ended with, and the
/// integrity check passes after every event.
#[test]
fn p10_replay_equivalence() {
    run_property(
        "p10",
        props::p10_scenarios(),
        props::p10_replay_equivalence,
        &[("replay equivalent after a command that appended", 65)],
    );
}

/// Rule 11 — parallelism independence: the same scenario at `-parallelism=1` and
/// `-parallelism=8` gives identical plan texts and identical states and stores.
#[test]
fn p11_parallelism_independence() {
    run_property(
        "p11",
        props::p11_scenarios(),
        props::p11_parallelism_independence,
        &[
            ("same at -parallelism=1 and 8", 100),
            ("same at -parallelism=1 and 8 after creates", 45),
        ],
    );
}

/// Rule 12 — destroy empties: after a successful destroy, the state holds no managed
/// resource (and no data result) and the store holds no object Cairn created.
#[test]
fn p12_destroy_empties() {
    run_property(
        "p12",
        props::p12_scenarios(),
        props::p12_destroy_empties,
        &[
            ("destroy empties", 90),
            ("destroy empties nested modules", 15),
        ],
    );
}

/// Rule 13 — providers: a provider instance is never removed while a resource in state
/// uses it (after every command and after every event of its log); deletes go to the region
/// recorded in state; and no call is ever made with an unknown provider configuration (every
/// region a call names is `local`, a real thing's id, or a region state recorded).
#[test]
fn p13_providers() {
    run_property(
        "p13",
        props::p13_scenarios(),
        props::p13_providers,
        &[
            ("providers", 100),
            ("providers with a delete through sim.dyn", 20),
        ],
    );
}

proptest! {
    // Real processes killed after real milliseconds: its own count (`CAIRN_PROPTEST_KILLS`),
    // not `PROPTEST_CASES` — a soak of it is minutes of sleeps. Every event kind as a kill
    // point is `p07_nothing_is_lost`'s job (it cuts the log after any event).
    #![proptest_config(ProptestConfig {
        cases: std::env::var("CAIRN_PROPTEST_KILLS").ok().and_then(|v| v.parse().ok()).unwrap_or(4),
        ..config(4)
    })]

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
