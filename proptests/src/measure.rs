//! How soon each property's own generator catches its broken rule.
//!
//! For every rule there is a sabotage switch (`cairn::engine::Sabotage`) that makes the real
//! engine violate it. [`hunt`] draws cases from the property's generator, seeded with a fixed
//! seed, and runs the property on the broken engine until a case fails; that case is then run
//! again on the intact engine, where it must pass — a case that fails there too is not a
//! catch but a bug in the engine or in the check, and is reported as such ([`Hunt::BothFail`]).
//! [`measure`] does this for 20 seeds per rule and prints cases-to-first-failure as a table
//! (`tests/broken_rules.rs`, `cases_to_first_failure`, run by `.ci/run`).

use crate::props::{self, PropResult};
use cairn::engine::Sabotage;
use proptest::strategy::{Strategy, ValueTree};
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
use std::fmt::{Debug, Write as _};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// What hunting one rule with one seed found.
#[derive(Clone, Debug)]
pub enum Hunt {
    /// Case `case` (1-based) failed on the broken engine and passed on the intact one.
    Caught { case: u32, message: String },
    /// No case of the first `max` failed on the broken engine.
    Missed,
    /// Case `case` failed on the broken engine *and* on the intact one: an engine or check bug.
    BothFail {
        case: u32,
        broken: String,
        intact: String,
        scenario: String,
    },
}

/// One rule: the property that checks it and the sabotage that breaks it.
pub struct Rule {
    pub property: &'static str,
    pub sabotage: Sabotage,
    /// Hunts with `seed` for at most `max` cases.
    pub hunt: fn(u64, u32) -> Hunt,
}

/// The generator's RNG for seed `seed` (ChaCha, the seed repeated over 32 bytes).
pub fn rng(seed: u64) -> TestRng {
    let mut bytes = [0u8; 32];
    for (i, b) in bytes.iter_mut().enumerate() {
        *b = seed.to_le_bytes()[i % 8] ^ (i as u8).wrapping_mul(31);
    }
    TestRng::from_seed(RngAlgorithm::ChaCha, &bytes)
}

/// Draws up to `max` cases of `strategy` with `seed` and runs `property` on each with
/// `sabotage`; the first failing case is re-run on the intact engine.
pub fn hunt<T: Debug>(
    strategy: impl Strategy<Value = T>,
    property: fn(&T, Option<Sabotage>) -> PropResult,
    sabotage: Sabotage,
    seed: u64,
    max: u32,
) -> Hunt {
    let mut runner = TestRunner::new_with_rng(Config::default(), rng(seed));
    for case in 1..=max {
        let value = match strategy.new_tree(&mut runner) {
            Ok(tree) => tree.current(),
            Err(e) => {
                return Hunt::BothFail {
                    case,
                    broken: format!("the generator rejected the case: {e}"),
                    intact: String::new(),
                    scenario: String::new(),
                }
            }
        };
        if let Err(broken) = property(&value, Some(sabotage)) {
            return match property(&value, None) {
                Ok(()) => Hunt::Caught {
                    case,
                    message: first_line(&broken.to_string()),
                },
                Err(intact) => Hunt::BothFail {
                    case,
                    broken: broken.to_string(),
                    intact: intact.to_string(),
                    scenario: format!("{value:?}"),
                },
            };
        }
    }
    Hunt::Missed
}

fn first_line(s: &str) -> String {
    s.lines()
        .next()
        .unwrap_or_default()
        .chars()
        .take(140)
        .collect()
}

macro_rules! rule {
    ($prop:literal, $sab:ident, $scn:path, $f:path) => {
        Rule {
            property: $prop,
            sabotage: Sabotage::$sab,
            hunt: |seed, max| hunt($scn(), $f, Sabotage::$sab, seed, max),
        }
    };
}

/// Every rule, in the order of the properties (p02 twice: each of its halves has its own
/// broken rule).
pub fn rules() -> Vec<Rule> {
    vec![
        rule!(
            "p01",
            DeferDirectOnly,
            props::p01_scenarios,
            props::p01_convergence
        ),
        rule!(
            "p02",
            DeferDirectOnly,
            props::p02_scenarios,
            props::p02_deferral_is_exact
        ),
        rule!(
            "p02",
            ReadOnlyDefers,
            props::p02_scenarios,
            props::p02_deferral_is_exact
        ),
        rule!(
            "p03",
            RefreshFollowsDependencies,
            props::p03_scenarios,
            props::p03_refresh_is_state_only_and_flat
        ),
        rule!(
            "p04",
            ReadOnlyApplies,
            props::p04_scenarios,
            props::p04_read_only_never_mutates
        ),
        rule!(
            "p05",
            PlanApplies,
            props::p05_scenarios,
            props::p05_plans_are_side_effect_free
        ),
        rule!(
            "p06",
            ApplyUpdatesNoOps,
            props::p06_scenarios,
            props::p06_apply_does_what_the_plan_said
        ),
        rule!(
            "p07",
            ForgetCreates,
            props::p07_scenarios,
            props::p07_nothing_is_lost
        ),
        rule!(
            "p08",
            DeleteDependenciesFirst,
            props::p08_scenarios,
            props::p08_order
        ),
        rule!(
            "p09",
            FailureSkipsNothing,
            props::p09_scenarios,
            props::p09_failures_skip_exactly_their_dependents
        ),
        rule!(
            "p10",
            SettleTwice,
            props::p10_scenarios,
            props::p10_replay_equivalence
        ),
        rule!(
            "p11",
            InstancesInCompletionOrder,
            props::p11_scenarios,
            props::p11_parallelism_independence
        ),
        rule!(
            "p12",
            DestroySkipsChildModules,
            props::p12_scenarios,
            props::p12_destroy_empties
        ),
        rule!(
            "p13",
            DeleteWithDefaultProviderConfig,
            props::p13_scenarios,
            props::p13_providers
        ),
    ]
}

/// The measurement of one rule over several seeds.
pub struct Row {
    pub property: &'static str,
    pub sabotage: Sabotage,
    /// Per seed, in seed order.
    pub hunts: Vec<Hunt>,
}

impl Row {
    /// Cases to first failure of the seeds that caught the rule, sorted.
    pub fn cases(&self) -> Vec<u32> {
        let mut c: Vec<u32> = self
            .hunts
            .iter()
            .filter_map(|h| match h {
                Hunt::Caught { case, .. } => Some(*case),
                _ => None,
            })
            .collect();
        c.sort_unstable();
        c
    }
    /// The median over all seeds, a miss counting as more than `max` (so `None` when half
    /// or more missed).
    pub fn median(&self) -> Option<u32> {
        let c = self.cases();
        let n = self.hunts.len();
        // The lower median: the value at index (n-1)/2 of all seeds sorted, misses last.
        c.get((n.max(1) - 1) / 2).copied()
    }
    pub fn max(&self) -> Option<u32> {
        match self.cases().len() == self.hunts.len() {
            true => self.cases().last().copied(),
            false => None,
        }
    }
}

/// Hunts every rule of `rules` with seeds `0..seeds`, up to `max` cases each, on `threads`
/// threads.
pub fn measure(rules: &[Rule], seeds: u64, max: u32, threads: usize) -> Vec<Row> {
    let jobs: Vec<(usize, u64)> = (0..rules.len())
        .flat_map(|r| (0..seeds).map(move |s| (r, s)))
        .collect();
    let results: Mutex<Vec<Option<Hunt>>> = Mutex::new(vec![None; jobs.len()]);
    let next = AtomicUsize::new(0);
    std::thread::scope(|scope| {
        for _ in 0..threads.max(1) {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::SeqCst);
                let Some(&(r, seed)) = jobs.get(i) else { break };
                let h = (rules[r].hunt)(seed, max);
                results.lock().unwrap_or_else(|e| e.into_inner())[i] = Some(h);
            });
        }
    });
    let results = results.into_inner().unwrap_or_else(|e| e.into_inner());
    rules
        .iter()
        .enumerate()
        .map(|(r, rule)| Row {
            property: rule.property,
            sabotage: rule.sabotage,
            hunts: jobs
                .iter()
                .zip(&results)
                .filter(|((jr, _), _)| *jr == r)
                .map(|(_, h)| h.clone().unwrap_or(Hunt::Missed))
                .collect(),
        })
        .collect()
}

/// The table: one row per rule with the median and maximum cases to first failure and the
/// cases of every seed (`-` a miss, `!` a case that fails on the intact engine too).
pub fn table(rows: &[Row], max: u32) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "| property | broken rule | caught | median | max | cases to first failure, seeds 0.. |"
    );
    let _ = writeln!(out, "| --- | --- | --- | --- | --- | --- |");
    for row in rows {
        let per: Vec<String> = row
            .hunts
            .iter()
            .map(|h| match h {
                Hunt::Caught { case, .. } => case.to_string(),
                Hunt::Missed => "-".into(),
                Hunt::BothFail { case, .. } => format!("!{case}"),
            })
            .collect();
        let show = |v: Option<u32>| v.map(|v| v.to_string()).unwrap_or(format!(">{max}"));
        let _ = writeln!(
            out,
            "| {} | `{:?}` | {}/{} | {} | {} | {} |",
            row.property,
            row.sabotage,
            row.cases().len(),
            row.hunts.len(),
            show(row.median()),
            show(row.max()),
            per.join(" ")
        );
    }
    out
}
