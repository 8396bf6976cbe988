//! Every property can fail, because a broken engine makes it fail.
//!
//! Each test runs the real engine twice on the same small scenario: once as it is, where the
//! property's check must pass, and once with one rule deliberately broken inside the engine
//! (`cairn::engine::Sabotage`, a test-only switch consulted where the rule is implemented),
//! where the same check must fail for the expected reason. Nothing is edited after the fact:
//! the failing outcome is what the broken engine really did.
//!
//! The `*_proptest_finds_*` tests go further: they run the property's own proptest generator
//! (fixed seed, after the seeds saved in `proptest-regressions/broken_rules/`) against the
//! broken engine for at most `props::CI_CASES` cases and require a failing case; it is shrunk,
//! printed as HCL with the operations applied, saved as a regression seed, and the minimal case
//! must pass on the intact engine.
//!
//! `cases_to_first_failure` (ignored by default; `.ci/run` runs it) measures how soon: for
//! every rule, 20 seeds, each hunting with the generator alone (no saved seed, no hand-picked
//! case) for at most `props::CI_CASES` (32) cases; every catch is re-run on the intact engine.
//! Measured (debug build, 2 cores):
//!
//! | property | broken rule (`Sabotage::…`) | hand-picked | caught | median | max |
//! | --- | --- | --- | --- | --- | --- |
//! | p01 convergence | `DeferDirectOnly` | yes | 20/20 | 4 | 18 |
//! | p02 deferral exact | `DeferDirectOnly` | yes | 20/20 | 4 | 26 |
//! | p02 deferral exact (read-only half) | `ReadOnlyDefers` | yes | 20/20 | 3 | 15 |
//! | p03 refresh flat | `RefreshFollowsDependencies` | yes | 20/20 | 3 | 13 |
//! | p04 read-only | `ReadOnlyApplies` | yes | 20/20 | 2 | 12 |
//! | p05 plan pure | `PlanApplies` | yes | 20/20 | 1 | 5 |
//! | p06 apply as planned | `ApplyUpdatesNoOps` | yes | 20/20 | 2 | 5 |
//! | p07 nothing lost | `ForgetCreates` | yes | 20/20 | 1 | 2 |
//! | p08 order | `DeleteDependenciesFirst` | yes | 20/20 | 1 | 4 |
//! | p09 failures skip dependents | `FailureSkipsNothing` | yes | 20/20 | 3 | 22 |
//! | p10 replay | `SettleTwice` | yes | 20/20 | 1 | 4 |
//! | p11 parallelism | `InstancesInCompletionOrder` | yes (retried: a race) | 20/20 | 3 | 14 |
//! | p12 destroy empties | `DestroySkipsChildModules` | yes | 20/20 | 2 | 10 |
//! | p13 providers | `DeleteWithDefaultProviderConfig` | yes | 20/20 | 2 | 5 |
//!
//! The generators are steered (`gen::Profile`, `props::DEFERRING`, `CHAINS`, `INSTANCES`,
//! `MODULES`, `DYN`; faults aimed at depended-on things; a final bump-and-plan, bump-and-apply
//! or destroy round) rather than run longer. Unsteered (6 seeds, at most 48 cases), p03 was
//! caught by no seed, p05 by 3 of 6, and p01, p02, p08, p11 and p13 needed up to 43–48 cases.

use cairn::engine::Sabotage;
use cairn_proptests::check::{self, Check};
use cairn_proptests::gen::{Cfg, Expr, Item, Lookup, Module, Op, Ref, Rep, Target, Thing};
use cairn_proptests::harness::{Outcome, World};
use cairn_proptests::props::{self, PropResult};
use proptest::strategy::Strategy;
use proptest::test_runner::{Config, FileFailurePersistence, TestError, TestRng, TestRunner};
use std::fmt::Debug;

fn thing(label: &str, value: Expr) -> Thing {
    Thing {
        label: label.into(),
        name: label.into(),
        value,
        rep: Rep::One,
        dyn_: false,
        depends_on: Vec::new(),
    }
}

/// `t0`; `local.l1 = t0.id`; `d2` looks `local.l1` up (so it depends on `t0` only through
/// the local); `t3.value = d2.result`; a dyn provider configured from `t0.id` with `t4` in it,
/// `t4` depending on `t3`; the output is `t3.out`. `t0`'s value is `value`.
fn config(value: &str) -> Cfg {
    let root = Module {
        items: vec![
            Item::Thing(thing("t0", Expr::Lit(value.into()))),
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
            Item::Thing(thing("t3", Expr::Ref(Ref::Data("d2".into())))),
            Item::Thing(Thing {
                dyn_: true,
                depends_on: vec![Target::Thing("t3".into())],
                ..thing("t4", Expr::Lit("v2".into()))
            }),
        ],
        output: Some(Expr::Ref(Ref::Thing("t3".into(), "out"))),
    };
    Cfg {
        root,
        child: None,
        dyn_region: Some("t0".into()),
        tweak: Default::default(),
    }
}

/// A world with `config("v1")` applied.
fn applied(w: &mut World) -> Result<Outcome, String> {
    w.set_config(&config("v1"));
    let o = w.run(Op::Apply, 4, None);
    ensure_ok(&o)?;
    Ok(o)
}

fn ensure_ok(o: &Outcome) -> Check {
    match o.ok {
        true => Ok(()),
        false => Err(format!("{} failed: {:?}", o.op.script(), o.errors)),
    }
}

/// Runs `scenario` (which returns the check's verdict) with a correct engine, where it must
/// pass, and with `sabotage`, where it must fail with a message containing `expect`.
fn breaks(sabotage: Sabotage, expect: &str, scenario: impl Fn(&mut World) -> Check) {
    let mut good = World::new();
    if let Err(e) = scenario(&mut good) {
        panic!(
            "with a correct engine the check fails: {e}\n{}",
            good.fixture()
        );
    }
    let mut bad = World::with_sabotage(Some(sabotage));
    match scenario(&mut bad) {
        Ok(()) => panic!(
            "with {sabotage:?} the check still passes\n{}",
            bad.fixture()
        ),
        Err(e) => assert!(
            e.contains(expect),
            "with {sabotage:?} the check fails, but not with {expect:?}: {e}\n{}",
            bad.fixture()
        ),
    }
}

/// Runs a property's generator (fixed seed, after the seeds saved in `regressions`) against
/// an engine with `sabotage` for at most [`props::CI_CASES`] cases, and requires a failing
/// case whose message contains one of `expect`. The failure is shrunk, its seed saved in
/// `regressions` (committed: later runs start with it), and the minimal scenario — HCL and
/// the operations applied — printed; that minimal case must pass on the intact engine (both
/// sides: otherwise it is a bug in the engine or the check, not a catch).
fn proptest_finds<T: Debug>(
    strategy: impl Strategy<Value = T>,
    regressions: &'static str,
    sabotage: Sabotage,
    property: fn(&T, Option<Sabotage>) -> PropResult,
    expect: &[&str],
) {
    let config = Config {
        cases: props::CI_CASES,
        max_shrink_iters: 48,
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct(regressions))),
        ..Config::default()
    };
    let rng = TestRng::deterministic_rng(config.rng_algorithm);
    let mut runner = TestRunner::new_with_rng(config, rng);
    let ran = std::cell::Cell::new(0);
    let result = runner.run(&strategy, |v| {
        ran.set(ran.get() + 1);
        property(&v, Some(sabotage))
    });
    match result {
        Ok(()) => panic!(
            "{} generated cases did not catch {sabotage:?}",
            props::CI_CASES
        ),
        Err(TestError::Fail(why, minimal)) => {
            assert!(
                expect.iter().any(|e| why.message().contains(e)),
                "the generated case that caught {sabotage:?} failed, but not with {expect:?}: {}",
                why.message()
            );
            if let Err(e) = property(&minimal, None) {
                panic!("the minimal case that caught {sabotage:?} fails on the intact engine too — an engine or check bug: {e}\n{minimal:?}");
            }
            eprintln!(
                "{sabotage:?} caught ({} runs with shrinking); minimal case:\n{}\n{minimal:?}",
                ran.get(),
                why.message().lines().next().unwrap_or_default()
            );
        }
        Err(e) => panic!("proptest stopped: {e}"),
    }
}

// ---------------------------------------------------------------------------------------
// p01, p02: deferral that counts only direct references

/// `t0`'s value changes; `d2` reaches `t0` only through `local.l1`, so it must wait for the
/// update. Read during the plan, it returns `t0`'s old `out`, and the plan after the apply
/// still has to change `t3`.
#[test]
fn p01_convergence_fails_when_deferral_counts_only_direct_references() {
    breaks(Sabotage::DeferDirectOnly, "proposes Update", |w| {
        applied(w)?;
        w.set_config(&config("v2"));
        ensure_ok(&w.run(Op::Apply, 4, None))?;
        check::converged(&w.run(Op::Plan, 4, None))
    });
}

#[test]
fn p02_deferral_fails_when_deferral_counts_only_direct_references() {
    breaks(Sabotage::DeferDirectOnly, "must be deferred", |w| {
        w.set_config(&config("v1"));
        check::deferral_exact(&w.run(Op::Plan, 4, None))?;
        applied(w)?;
        w.set_config(&config("v2"));
        check::deferral_exact(&w.run(Op::Plan, 4, None))
    });
}

/// Read-only: with `t0` deleted from the cloud, `d2`'s key is unknown; it keeps its previous
/// result with a warning, and the other data sources are read.
#[test]
fn p02_read_only_reads_fail_when_read_only_defers() {
    breaks(Sabotage::ReadOnlyDefers, "deferred", |w| {
        applied(w)?;
        let o = w.run(Op::PlanReadOnly, 4, None);
        check::read_only_reads(&o)?;
        let read: Vec<String> = o
            .plan
            .iter()
            .flat_map(|p| &p.data_reads)
            .map(|d| d.addr.to_string())
            .collect();
        if read != ["data.sim_lookup.d2"] {
            return Err(format!("read-only with everything in state read {read:?}"));
        }
        w.cloud(&cairn_proptests::gen::CloudEdit::Delete(0));
        let o = w.run(Op::PlanReadOnly, 4, None);
        ensure_ok(&o)?;
        check::read_only_reads(&o)
    });
}

#[test]
fn p01_proptest_finds_deferral_that_counts_only_direct_references() {
    proptest_finds(
        props::p01_scenarios(),
        "proptest-regressions/broken_rules/p01-DeferDirectOnly.txt",
        Sabotage::DeferDirectOnly,
        props::p01_convergence,
        &["proposes Update", "changes output", "but the apply used"],
    );
}

#[test]
fn p02_proptest_finds_deferral_that_counts_only_direct_references() {
    proptest_finds(
        props::p02_scenarios(),
        "proptest-regressions/broken_rules/p02-DeferDirectOnly.txt",
        Sabotage::DeferDirectOnly,
        props::p02_deferral_is_exact,
        &["must be deferred"],
    );
}

#[test]
fn p02_proptest_finds_read_only_plans_that_defer() {
    proptest_finds(
        props::p02_scenarios(),
        "proptest-regressions/broken_rules/p02-ReadOnlyDefers.txt",
        Sabotage::ReadOnlyDefers,
        props::p02_deferral_is_exact,
        &["deferred", "cannot be known without applying changes"],
    );
}

// ---------------------------------------------------------------------------------------
// p03: refresh that follows dependencies

/// `t0`'s read fails: a flat refresh still reads `t3` and `t4`; one that follows the
/// recorded dependencies skips them.
#[test]
fn p03_refresh_fails_when_it_follows_dependencies() {
    breaks(
        Sabotage::RefreshFollowsDependencies,
        "refresh did not read",
        |w| {
            applied(w)?;
            check::refresh_flat(&w.run(Op::Refresh, 4, Some("read:t0")))
        },
    );
}

#[test]
fn p03_proptest_finds_refresh_that_follows_dependencies() {
    proptest_finds(
        props::p03_scenarios(),
        "proptest-regressions/broken_rules/p03-RefreshFollowsDependencies.txt",
        Sabotage::RefreshFollowsDependencies,
        props::p03_refresh_is_state_only_and_flat,
        &["refresh did not read", "different states"],
    );
}

// ---------------------------------------------------------------------------------------
// p04 – p06

#[test]
fn p04_read_only_fails_when_apply_read_only_applies() {
    breaks(Sabotage::ReadOnlyApplies, "made a update call", |w| {
        applied(w)?;
        w.set_config(&config("v2"));
        check::read_only(&w.run(Op::PlanReadOnly, 4, None))?;
        check::read_only(&w.run(Op::ApplyReadOnly, 4, None))
    });
}

#[test]
fn p05_plan_fails_when_the_plan_applies_updates() {
    breaks(Sabotage::PlanApplies, "made a update call", |w| {
        applied(w)?;
        w.set_config(&config("v2"));
        check::plan_pure(&w.run(Op::Plan, 4, None))
    });
}

/// `t0`'s value changes; `t4` is unchanged, and a correct apply leaves it alone.
#[test]
fn p06_apply_fails_when_it_updates_what_the_plan_left_alone() {
    breaks(Sabotage::ApplyUpdatesNoOps, "but the plan listed 0", |w| {
        check::apply_as_planned(&applied(w)?)?;
        w.set_config(&config("v2"));
        check::apply_as_planned(&w.run(Op::Apply, 4, None))
    });
}

#[test]
fn p04_proptest_finds_apply_read_only_applying() {
    proptest_finds(
        props::p04_scenarios(),
        "proptest-regressions/broken_rules/p04-ReadOnlyApplies.txt",
        Sabotage::ReadOnlyApplies,
        props::p04_read_only_never_mutates,
        &["apply -read-only made a", "apply -read-only changed"],
    );
}

#[test]
fn p05_proptest_finds_plans_that_apply() {
    proptest_finds(
        props::p05_scenarios(),
        "proptest-regressions/broken_rules/p05-PlanApplies.txt",
        Sabotage::PlanApplies,
        props::p05_plans_are_side_effect_free,
        &["made a update call"],
    );
}

#[test]
fn p06_proptest_finds_updates_the_plan_did_not_list() {
    proptest_finds(
        props::p06_scenarios(),
        "proptest-regressions/broken_rules/p06-ApplyUpdatesNoOps.txt",
        Sabotage::ApplyUpdatesNoOps,
        props::p06_apply_does_what_the_plan_said,
        &["but the plan listed 0"],
    );
}

// ---------------------------------------------------------------------------------------
// p07: a create recorded without its object

#[test]
fn p07_nothing_lost_fails_when_creates_are_forgotten() {
    breaks(Sabotage::ForgetCreates, "neither in state nor", |w| {
        let o = applied(w)?;
        check::nothing_lost(&o.state_after, &o.cloud_after)?;
        check::agree(&o.state_after, &o.cloud_after)
    });
}

#[test]
fn p07_proptest_finds_forgotten_creates() {
    proptest_finds(
        props::p07_scenarios(),
        "proptest-regressions/broken_rules/p07-ForgetCreates.txt",
        Sabotage::ForgetCreates,
        props::p07_nothing_is_lost,
        &["neither in state nor"],
    );
}

// ---------------------------------------------------------------------------------------
// p08: deletes in dependency order

/// Destroy: `t3` depends on `t0` (through `d2`), `t4` on `t3`; the broken engine deletes
/// `t0` first.
#[test]
fn p08_order_fails_when_dependencies_are_deleted_first() {
    breaks(
        Sabotage::DeleteDependenciesFirst,
        "was deleted (call",
        |w| {
            check::ordered(&applied(w)?)?;
            check::ordered(&w.run(Op::Destroy, 4, None))
        },
    );
}

#[test]
fn p08_proptest_finds_dependencies_deleted_first() {
    proptest_finds(
        props::p08_scenarios(),
        "proptest-regressions/broken_rules/p08-DeleteDependenciesFirst.txt",
        Sabotage::DeleteDependenciesFirst,
        props::p08_order,
        &["was deleted (call"],
    );
}

// ---------------------------------------------------------------------------------------
// p09: a failure that skips nothing

/// `t1` depends on `t0` only through `depends_on`; `t0`'s create fails.
#[test]
fn p09_failures_fail_when_a_failure_skips_nothing() {
    breaks(
        Sabotage::FailureSkipsNothing,
        "depends on a failed step",
        |w| {
            let t1 = Thing {
                depends_on: vec![Target::Thing("t0".into())],
                ..thing("t1", Expr::Lit("v1".into()))
            };
            let root = Module {
                items: vec![
                    Item::Thing(thing("t0", Expr::Lit("v1".into()))),
                    Item::Thing(t1),
                    Item::Thing(thing("t2", Expr::Lit("v1".into()))),
                ],
                output: None,
            };
            w.set_config(&Cfg {
                root,
                child: None,
                dyn_region: None,
                tweak: Default::default(),
            });
            check::failures_skip_dependents(&w.run(Op::Apply, 4, Some("create:t0")))
        },
    );
}

#[test]
fn p09_proptest_finds_a_failure_that_skips_nothing() {
    proptest_finds(
        props::p09_scenarios(),
        "proptest-regressions/broken_rules/p09-FailureSkipsNothing.txt",
        Sabotage::FailureSkipsNothing,
        props::p09_failures_skip_exactly_their_dependents,
        // A dependent written, or one whose evaluation failed on the failed step's missing
        // value (an error no fault explains): both are p09's property failing.
        &["depends on a failed step", "unexplained error"],
    );
}

// ---------------------------------------------------------------------------------------
// p10: an outcome recorded twice

#[test]
fn p10_replay_fails_when_an_outcome_is_recorded_twice() {
    breaks(Sabotage::SettleTwice, "already settled", |w| {
        applied(w)?;
        check::replay_equivalent(&w.state_dir())
    });
}

#[test]
fn p10_proptest_finds_outcomes_recorded_twice() {
    proptest_finds(
        props::p10_scenarios(),
        "proptest-regressions/broken_rules/p10-SettleTwice.txt",
        Sabotage::SettleTwice,
        props::p10_replay_equivalence,
        &["already settled"],
    );
}

// ---------------------------------------------------------------------------------------
// p11: instance values in completion order

/// Three resources with two instances each, and three things that take the id of instance
/// `[0]` of one of them. Whether the two instances complete in key order is up to the
/// scheduler (at any `-parallelism`), so the broken engine's `[0]` is sometimes the other
/// instance: over a few attempts, the runs at `-parallelism=1` and `8` differ.
#[test]
fn p11_parallelism_fails_when_instances_are_stored_in_completion_order() {
    let mut items = Vec::new();
    for i in 0..3 {
        let label = format!("t{i}");
        items.push(Item::Thing(Thing {
            rep: Rep::Count(2),
            ..thing(&label, Expr::Lit("v1".into()))
        }));
        items.push(Item::Thing(thing(
            &format!("t{}", i + 3),
            Expr::Ref(Ref::Thing(label, "id")),
        )));
    }
    let cfg = Cfg {
        root: Module {
            items,
            output: None,
        },
        child: None,
        dyn_region: None,
        tweak: Default::default(),
    };
    let attempt = |sabotage: Option<Sabotage>| -> Check {
        let mut one = World::with_sabotage(sabotage);
        let mut eight = World::with_sabotage(sabotage);
        one.set_config(&cfg);
        eight.set_config(&cfg);
        let (a, b) = (one.run(Op::Apply, 1, None), eight.run(Op::Apply, 8, None));
        ensure_ok(&a)?;
        ensure_ok(&b)?;
        props::same_at_1_and_8(&a, &b)
    };
    for _ in 0..3 {
        attempt(None).unwrap();
    }
    let caught = (0..32).find_map(|_| attempt(Some(Sabotage::InstancesInCompletionOrder)).err());
    let e = caught.expect("32 attempts with instances stored in completion order all agreed");
    assert!(e.contains("state differs"), "{e}");
}

#[test]
fn p11_proptest_finds_instances_in_completion_order() {
    proptest_finds(
        props::p11_scenarios(),
        "proptest-regressions/broken_rules/p11-InstancesInCompletionOrder.txt",
        Sabotage::InstancesInCompletionOrder,
        props::p11_parallelism_independence,
        &["differs"],
    );
}

// ---------------------------------------------------------------------------------------
// p12: destroy that skips child modules

#[test]
fn p12_destroy_fails_when_child_modules_are_skipped() {
    breaks(Sabotage::DestroySkipsChildModules, "still holds", |w| {
        let child = Module {
            items: vec![Item::Thing(Thing {
                name: "mt0".into(),
                ..thing("t0", Expr::Ref(Ref::Var))
            })],
            output: Some(Expr::Ref(Ref::Thing("t0".into(), "id"))),
        };
        let root = Module {
            items: vec![
                Item::Thing(thing("t0", Expr::Lit("v1".into()))),
                Item::Call {
                    input: Expr::Ref(Ref::Thing("t0".into(), "id")),
                    depends_on: Vec::new(),
                },
            ],
            output: Some(Expr::Ref(Ref::ModOut)),
        };
        w.set_config(&Cfg {
            root,
            child: Some(child),
            dyn_region: None,
            tweak: Default::default(),
        });
        ensure_ok(&w.run(Op::Apply, 4, None))?;
        check::destroyed(&w.run(Op::Destroy, 4, None))
    });
}

#[test]
fn p12_proptest_finds_child_modules_left_by_destroy() {
    proptest_finds(
        props::p12_scenarios(),
        "proptest-regressions/broken_rules/p12-DestroySkipsChildModules.txt",
        Sabotage::DestroySkipsChildModules,
        props::p12_destroy_empties,
        &["still holds"],
    );
}

// ---------------------------------------------------------------------------------------
// p13: deletes through the default provider configuration

/// `t4` lives in region `t0-1` (the dyn provider); destroy must delete it there.
#[test]
fn p13_providers_fail_when_deletes_use_the_default_configuration() {
    breaks(
        Sabotage::DeleteWithDefaultProviderConfig,
        "does not match where state recorded it",
        |w| {
            check::providers(&applied(w)?)?;
            check::providers(&w.run(Op::Destroy, 4, None))
        },
    );
}

// ---------------------------------------------------------------------------------------
// Every rule, caught by its property's own generator within CI's case count

/// For each of the rules, 20 seeds (`CAIRN_MEASURE_SEEDS`), each hunting with the property's
/// generator on the broken engine for at most [`props::CI_CASES`] cases; a case that catches
/// the rule is re-run on the intact engine, where it must pass. Prints cases to first failure
/// as a table and fails when a seed misses, when a caught case fails on the intact engine too,
/// or when a rule's median is above 16. `CAIRN_MEASURE_RULE=p03` measures one property.
/// Ignored by default (about a minute on 2 cores); `.ci/run` runs it.
#[test]
#[ignore]
fn cases_to_first_failure() {
    use cairn_proptests::measure::{self, Hunt};
    let seeds = std::env::var("CAIRN_MEASURE_SEEDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20);
    let max = std::env::var("CAIRN_MEASURE_MAX")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(props::CI_CASES);
    let only = std::env::var("CAIRN_MEASURE_RULE").ok();
    let rules: Vec<_> = measure::rules()
        .into_iter()
        .filter(|r| only.as_deref().is_none_or(|o| r.property == o))
        .collect();
    let start = std::time::Instant::now();
    let threads = std::env::var("CAIRN_MEASURE_THREADS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(4);
    let rows = measure::measure(&rules, seeds, max, threads);
    println!(
        "cases to first failure, {seeds} seeds, at most {max} cases ({:.1} s):\n{}",
        start.elapsed().as_secs_f64(),
        measure::table(&rows, max)
    );
    let mut problems = Vec::new();
    for row in &rows {
        for (seed, h) in row.hunts.iter().enumerate() {
            match h {
                Hunt::Caught { .. } => {}
                Hunt::Missed => problems.push(format!(
                    "{} with {:?}: seed {seed} found nothing in {max} cases",
                    row.property, row.sabotage
                )),
                Hunt::BothFail {
                    case,
                    broken,
                    intact,
                    scenario,
                } => problems.push(format!(
                    "{} with {:?}: seed {seed}, case {case} fails on the intact engine too — an engine or check bug:\nintact: {intact}\nbroken: {broken}\n{scenario}",
                    row.property, row.sabotage
                )),
            }
        }
        if row.median().is_none_or(|m| m > 16) {
            problems.push(format!(
                "{} with {:?}: median cases to first failure {:?} is above 16",
                row.property,
                row.sabotage,
                row.median()
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn p13_proptest_finds_deletes_through_the_default_configuration() {
    proptest_finds(
        props::p13_scenarios(),
        "proptest-regressions/broken_rules/p13-DeleteWithDefaultProviderConfig.txt",
        Sabotage::DeleteWithDefaultProviderConfig,
        props::p13_providers,
        &[
            "does not match where state recorded it",
            "still holds",
            "not in state",
        ],
    );
}
