//! `moved` blocks as a property of the real engine: after any renaming of resources (chained
//! or not, written in any order, with `count` added or removed on the way), an apply changes no
//! object in the world (no create, update or delete call), every object keeps its id at its
//! new address, the log records the moves, and the next plan has nothing to do.
//!
//! `PROPTEST_CASES` sets the number of cases (default 24).

use cairn::plan::PlanMode;
use cairn_proptests::gen::Op;
use cairn_proptests::harness::World;
use proptest::prelude::*;
use std::collections::BTreeMap;

/// How a resource is declared: one instance, or `count = 1`.
#[derive(Clone, Copy, Debug)]
enum Form {
    Single,
    Count,
}

#[derive(Clone, Debug)]
struct Case {
    /// Per resource: its form before and after.
    forms: Vec<(Form, Form)>,
    /// Where resource `i` goes: `s{perm[i]}`.
    perm: Vec<usize>,
    /// Per resource: whether the move goes through an intermediate name (a chain).
    chained: Vec<bool>,
    /// The order the `moved` blocks are written in (a shuffle key per block).
    order: Vec<u32>,
    parallelism: usize,
}

fn form() -> impl Strategy<Value = Form> {
    prop_oneof![Just(Form::Single), Just(Form::Count)]
}

fn case() -> impl Strategy<Value = Case> {
    (1usize..5).prop_flat_map(|n| {
        (
            proptest::collection::vec((form(), form()), n),
            Just((0..n).collect::<Vec<usize>>()).prop_shuffle(),
            proptest::collection::vec(any::<bool>(), n),
            proptest::collection::vec(any::<u32>(), 2 * n),
            1usize..4,
        )
            .prop_map(|(forms, perm, chained, order, parallelism)| Case {
                forms,
                perm,
                chained,
                order,
                parallelism,
            })
    })
}

fn resource(name: &str, form: Form, object: &str) -> String {
    let count = match form {
        Form::Single => "",
        Form::Count => "  count = 1\n",
    };
    format!("resource \"sim_thing\" \"{name}\" {{\n{count}  name = \"{object}\"\n}}\n")
}

fn before(c: &Case) -> String {
    (0..c.forms.len())
        .map(|i| resource(&format!("r{i}"), c.forms[i].0, &format!("o{i}")))
        .collect()
}

fn after(c: &Case) -> String {
    let mut text: String = (0..c.forms.len())
        .map(|i| resource(&format!("s{}", c.perm[i]), c.forms[i].1, &format!("o{i}")))
        .collect();
    // Resource-level moves: the instance key follows, and `count` added or removed is
    // Terraform's implied move at the destination.
    let mut blocks: Vec<(u32, String)> = Vec::new();
    let moved = |from: &str, to: &str| format!("moved {{\n  from = {from}\n  to   = {to}\n}}\n");
    for i in 0..c.forms.len() {
        let (from, to) = (
            format!("sim_thing.r{i}"),
            format!("sim_thing.s{}", c.perm[i]),
        );
        if c.chained[i] {
            let via = format!("sim_thing.t{i}");
            blocks.push((c.order[2 * i], moved(&from, &via)));
            blocks.push((c.order[2 * i + 1], moved(&via, &to)));
        } else {
            blocks.push((c.order[2 * i], moved(&from, &to)));
        }
    }
    blocks.sort();
    for (_, b) in blocks {
        text.push_str(&b);
    }
    text
}

/// Object id by the `name` of each object in state.
fn ids(s: &cairn::state::Snapshot) -> BTreeMap<String, (String, String)> {
    s.resources
        .iter()
        .filter_map(|(addr, r)| {
            let o = r.current.as_ref()?;
            let v = cairn::value::Value::from_stored(&o.attrs);
            let name = v.get("name")?.as_str()?.to_string();
            let id = v.get("id")?.as_str()?.to_string();
            Some((name, (addr.to_string(), id)))
        })
        .collect()
}

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(24)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]

    #[test]
    fn moves_change_nothing_in_the_world(c in case()) {
        let mut w = World::new();
        std::fs::write(w.work.join("main.tf"), before(&c)).unwrap();
        let first = w.run(Op::Apply, c.parallelism, None);
        prop_assert!(first.ok, "{:?}", first.errors);
        let before_ids = ids(&first.state_after);

        std::fs::write(w.work.join("main.tf"), after(&c)).unwrap();
        let plan = w.run(Op::Plan, c.parallelism, None);
        prop_assert!(plan.ok, "{:?}\n{}", plan.errors, after(&c));
        let p = plan.plan.as_ref().unwrap();
        prop_assert_eq!(p.mode, PlanMode::Normal);
        prop_assert_eq!(p.counts(), (0, 0, 0), "{}", plan.plan_text.as_deref().unwrap_or(""));

        let applied = w.run(Op::Apply, c.parallelism, None);
        prop_assert!(applied.ok, "{:?}", applied.errors);
        let changing: Vec<_> = applied
            .calls
            .iter()
            .filter(|k| matches!(k.op.as_str(), "create" | "update" | "delete"))
            .collect();
        prop_assert!(changing.is_empty(), "{:?}", changing);
        // Every object keeps its id, at the address the configuration now gives it.
        let after_ids = ids(&applied.state_after);
        prop_assert_eq!(after_ids.len(), before_ids.len());
        for (i, (_, to)) in c.forms.iter().enumerate() {
            let name = format!("o{i}");
            let key = match to {
                Form::Single => String::new(),
                Form::Count => "[0]".to_string(),
            };
            let want = format!("sim_thing.s{}{key}", c.perm[i]);
            prop_assert_eq!(&after_ids[&name].0, &want);
            prop_assert_eq!(&after_ids[&name].1, &before_ids[&name].1);
        }
        let moves = applied
            .events
            .iter()
            .filter(|e| e.body.kind() == "ResourceMoved")
            .count();
        prop_assert!(moves >= c.forms.len());

        let again = w.run(Op::Plan, c.parallelism, None);
        prop_assert!(again.ok, "{:?}", again.errors);
        prop_assert!(!again.plan.as_ref().unwrap().has_changes(), "{}", again.plan_text.as_deref().unwrap_or(""));
    }
}
