//! Property tests of the DAG and the scheduler on random graphs.
//!
//! `PROPTEST_CASES` runs more cases than the default 256.

use cairn_graph::{Dag, NodeId, NodeState, Scheduler};
use proptest::prelude::*;
use std::collections::BTreeSet;

/// A random graph: `n` nodes and edges given as index pairs. With `acyclic`, every edge goes
/// from a larger to a smaller index (after a random relabelling, so insertion order and
/// dependency order disagree).
fn arb_graph(acyclic: bool) -> impl Strategy<Value = Dag<usize>> {
    (1usize..24).prop_flat_map(move |n| {
        let edges = proptest::collection::vec((0..n, 0..n), 0..(n * 3));
        let perm = Just((0..n).collect::<Vec<usize>>()).prop_shuffle();
        (Just(n), edges, perm).prop_map(move |(n, edges, perm)| {
            let mut d = Dag::new();
            let ids: Vec<NodeId> = (0..n).map(|i| d.add_node(i)).collect();
            for (a, b) in edges {
                if acyclic {
                    if a == b {
                        continue;
                    }
                    let (hi, lo) = (a.max(b), a.min(b));
                    d.add_edge(ids[perm[hi]], ids[perm[lo]]);
                } else {
                    d.add_edge(ids[a], ids[b]);
                }
            }
            d
        })
    })
}

fn any_graph() -> impl Strategy<Value = Dag<usize>> {
    prop_oneof![arb_graph(true), arb_graph(false)]
}

/// Reachability by brute force, to check the closures against.
fn reachable(d: &Dag<usize>, from: NodeId, forward: bool) -> BTreeSet<NodeId> {
    let mut seen = BTreeSet::new();
    let mut frontier: Vec<NodeId> = vec![from];
    while let Some(n) = frontier.pop() {
        let next: Vec<NodeId> = if forward {
            d.dependencies(n).collect()
        } else {
            d.dependents(n).collect()
        };
        for m in next {
            if seen.insert(m) {
                frontier.push(m);
            }
        }
    }
    seen
}

proptest! {
    #[test]
    fn topo_order_respects_every_edge(d in arb_graph(true)) {
        let order = d.topo_order().expect("generated acyclic");
        prop_assert_eq!(order.len(), d.len());
        let pos = |id: NodeId| order.iter().position(|x| *x == id).expect("in order");
        for (a, b) in d.edges() {
            prop_assert!(pos(b) < pos(a), "{b} must come before {a}");
        }
        prop_assert!(d.cycles().is_empty());
    }

    #[test]
    fn cycles_found_exactly_when_toposort_fails(d in any_graph()) {
        let cycles = d.cycles();
        match d.topo_order() {
            Ok(_) => prop_assert!(cycles.is_empty()),
            Err(e) => {
                prop_assert!(!cycles.is_empty());
                prop_assert_eq!(&e.cycles, &cycles);
            }
        }
        let mut firsts = Vec::new();
        for c in &cycles {
            prop_assert!(c.len() >= 2);
            prop_assert_eq!(c.first(), c.last());
            for w in c.windows(2) {
                prop_assert!(d.has_edge(w[0], w[1]), "{} -> {} is no edge", w[0], w[1]);
            }
            firsts.push(c[0]);
        }
        let mut sorted = firsts.clone();
        sorted.sort();
        sorted.dedup();
        prop_assert_eq!(firsts, sorted);
        // A node is on a cycle exactly when it can reach itself.
        for id in d.ids() {
            let on = reachable(&d, id, true).contains(&id);
            prop_assert_eq!(on, d.nodes_on_cycles().contains(&id));
        }
    }

    #[test]
    fn closures_match_brute_force(d in any_graph()) {
        for id in d.ids() {
            prop_assert_eq!(d.transitive_dependencies(id), reachable(&d, id, true));
            prop_assert_eq!(d.transitive_dependents(id), reachable(&d, id, false));
        }
    }

    /// Walks the graph, failing the nodes picked by `fail_mask`, handing out one node at a time
    /// in an order picked by `picks` (so finishing order varies, as in a parallel walk).
    #[test]
    fn scheduler_hands_out_every_node_once_after_its_deps(
        d in any_graph(),
        fail_mask in proptest::collection::vec(proptest::bool::weighted(0.2), 24),
        picks in proptest::collection::vec(any::<usize>(), 64),
    ) {
        let mut s = Scheduler::new(&d);
        // On a cycle, or depending on one.
        let blocked: BTreeSet<NodeId> = d
            .nodes_on_cycles()
            .into_iter()
            .flat_map(|c| d.transitive_dependents(c).into_iter().chain([c]))
            .collect();
        let mut handed: BTreeSet<NodeId> = BTreeSet::new();
        let mut running: Vec<NodeId> = Vec::new();
        let mut failed: BTreeSet<NodeId> = BTreeSet::new();
        let mut skipped: BTreeSet<NodeId> = blocked.clone();
        let mut step = 0usize;
        while !s.is_done() {
            for id in s.ready() {
                prop_assert!(handed.insert(id), "{id} handed out twice");
                for dep in d.dependencies(id) {
                    prop_assert_eq!(s.state(dep), NodeState::Completed, "{} before {}", id, dep);
                }
                running.push(id);
            }
            prop_assert!(!running.is_empty(), "walk stalled");
            let pick = picks[step % picks.len()] % running.len();
            step += 1;
            let id = running.swap_remove(pick);
            if fail_mask[*d.node(id) % fail_mask.len()] {
                failed.insert(id);
                let got: BTreeSet<NodeId> = s.fail(id).into_iter().collect();
                let expect: BTreeSet<NodeId> =
                    d.transitive_dependents(id).difference(&skipped).copied().collect();
                prop_assert_eq!(&got, &expect);
                skipped.extend(got);
            } else {
                s.complete(id);
            }
        }
        // Everything is accounted for exactly once.
        prop_assert!(handed.is_disjoint(&skipped));
        prop_assert_eq!(handed.len() + skipped.len(), d.len());
        let in_state = |st| d.ids().filter(|id| s.state(*id) == st).collect::<BTreeSet<_>>();
        prop_assert_eq!(in_state(NodeState::Failed), failed);
        prop_assert_eq!(&in_state(NodeState::Skipped), &skipped);
        prop_assert_eq!(s.counts(), (d.len(), 0, 0));
        // A node is skipped exactly when it is blocked by a cycle or depends on a failure.
        for id in d.ids() {
            let deps = d.transitive_dependencies(id);
            let expect = blocked.contains(&id)
                || deps.iter().any(|x| s.state(*x) == NodeState::Failed);
            prop_assert_eq!(s.state(id) == NodeState::Skipped, expect, "{}", id);
        }
    }
}
