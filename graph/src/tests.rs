//! Unit tests of the DAG and the scheduler: small graphs written as edge lists.

use super::*;

/// Builds a graph of nodes named by the letters in `nodes`, with edges `"ab"` = a depends on b.
fn graph(nodes: &str, edges: &[&str]) -> (Dag<char>, impl Fn(char) -> NodeId) {
    let mut d = Dag::new();
    let ids: Vec<(char, NodeId)> = nodes.chars().map(|c| (c, d.add_node(c))).collect();
    let lookup = move |c: char| ids.iter().find(|(n, _)| *n == c).expect("node").1;
    for e in edges {
        let mut cs = e.chars();
        let (a, b) = (cs.next().expect("from"), cs.next().expect("to"));
        d.add_edge(lookup(a), lookup(b));
    }
    let ids2: Vec<(char, NodeId)> = d.nodes().map(|(id, c)| (*c, id)).collect();
    (d, move |c| {
        ids2.iter().find(|(n, _)| *n == c).expect("node").1
    })
}

fn names(d: &Dag<char>, ids: impl IntoIterator<Item = NodeId>) -> String {
    ids.into_iter().map(|i| *d.node(i)).collect()
}

fn check_topo(nodes: &str, edges: &[&str], expect: &str) {
    let (d, _) = graph(nodes, edges);
    let got = match d.topo_order() {
        Ok(o) => names(&d, o),
        Err(c) => {
            let paths: Vec<String> = c.cycles.iter().map(|p| names(&d, p.clone())).collect();
            format!("cycles {}", paths.join(" "))
        }
    };
    assert_eq!(got, expect, "nodes {nodes} edges {edges:?}");
}

#[test]
fn topo_order_puts_dependencies_first_and_breaks_ties_by_insertion() {
    check_topo("", &[], "");
    check_topo("abc", &[], "abc");
    check_topo("abc", &["ab", "bc"], "cba");
    check_topo("abcd", &["ac", "bc"], "cabd");
    check_topo("abcd", &["da", "ca"], "abcd");
    check_topo("abcde", &["ae", "be", "eb"], "cycles beb");
    check_topo("abc", &["aa"], "cycles aa");
    check_topo(
        "abcdef",
        &["ab", "ba", "cd", "de", "ec", "fa"],
        "cycles aba cdec",
    );
}

#[test]
fn edges_are_deduplicated() {
    let (mut d, id) = graph("ab", &["ab", "ab"]);
    d.add_edge(id('a'), id('b'));
    assert_eq!(d.edge_count(), 1);
    assert!(d.has_edge(id('a'), id('b')));
    assert!(!d.has_edge(id('b'), id('a')));
}

#[test]
fn neighbours_and_transitive_closures() {
    let (d, id) = graph("abcde", &["ab", "bc", "ac", "dc"]);
    assert_eq!(names(&d, d.dependencies(id('a'))), "bc");
    assert_eq!(names(&d, d.dependents(id('c'))), "abd");
    assert_eq!(names(&d, d.transitive_dependencies(id('a'))), "bc");
    assert_eq!(names(&d, d.transitive_dependents(id('c'))), "abd");
    assert_eq!(names(&d, d.transitive_dependents(id('e'))), "");
    let (d, id) = graph("abc", &["ab", "ba", "cb"]);
    assert_eq!(names(&d, d.transitive_dependencies(id('a'))), "ab");
    assert_eq!(names(&d, d.transitive_dependencies(id('c'))), "ab");
}

#[test]
fn cycles_are_closed_shortest_paths_from_the_smallest_node() {
    // a -> b -> c -> a and a shortcut b -> a: the shortest cycle through a is a b a.
    let (d, _) = graph("abc", &["ab", "bc", "ca", "ba"]);
    let c: Vec<String> = d.cycles().into_iter().map(|p| names(&d, p)).collect();
    assert_eq!(c, vec!["aba"]);
    let (d, _) = graph("abcd", &["ab", "bc", "ca", "dc"]);
    let c: Vec<String> = d.cycles().into_iter().map(|p| names(&d, p)).collect();
    assert_eq!(c, vec!["abca"]);
    assert_eq!(names(&d, d.nodes_on_cycles()), "abc");
}

#[test]
fn retain_and_map_keep_ids() {
    let (d, id) = graph("abcd", &["ab", "bc", "dc"]);
    let mut s = d.clone();
    s.retain(|n| n != id('b'));
    assert_eq!(s.len(), 3);
    assert_eq!(*s.node(id('d')), 'd');
    assert_eq!(names(&s, s.dependencies(id('d'))), "c");
    assert_eq!(names(&s, s.dependencies(id('a'))), "");
    assert!(!s.contains(id('b')));
    let m = d.map(|i, c| (i, c.to_ascii_uppercase()));
    assert_eq!(m.node(id('c')), &(id('c'), 'C'));
    assert_eq!(m.edges(), d.edges());
}

#[test]
fn dot_output_is_deterministic_and_escaped() {
    let (d, _) = graph("abc", &["ab", "cb"]);
    let dot = d.to_dot(|c| match c {
        'a' => DotNode::new("sim_thing.\"a\"").shape("box"),
        'b' => DotNode::new("provider[\"sim\"]")
            .shape("diamond")
            .cluster("module.m"),
        _ => DotNode::new("data.x")
            .style("dashed")
            .color("blue")
            .cluster("module.m"),
    });
    let expect = r#"digraph {
	compound = "true"
	newrank = "true"
	subgraph "cluster_module.m" {
		label = "module.m"
		"n1" [label = "provider[\"sim\"]", shape = "diamond"]
		"n2" [label = "data.x", style = "dashed", color = "blue"]
	}
	"n0" [label = "sim_thing.\"a\"", shape = "box"]
	"n0" -> "n1"
	"n2" -> "n1"
}
"#;
    assert_eq!(dot, expect);
}

/// Runs a walk: at each round, takes the ready set and finishes every node in it, failing
/// those in `failing`. Returns one line per round.
fn check_walk(nodes: &str, edges: &[&str], failing: &str, expect: &[&str]) {
    let (d, _) = graph(nodes, edges);
    let mut s = Scheduler::new(&d);
    let mut rounds = Vec::new();
    let mut guard = 0;
    while !s.is_done() {
        guard += 1;
        assert!(guard < 100, "walk does not terminate");
        let ready = s.ready();
        let mut line = format!("run {}", names(&d, ready.clone()));
        for id in ready {
            if failing.contains(*d.node(id)) {
                let skipped = s.fail(id);
                line += &format!(" ({} failed, skips {})", d.node(id), names(&d, skipped));
            } else {
                s.complete(id);
            }
        }
        rounds.push(line);
    }
    assert_eq!(rounds, expect);
    assert_eq!(s.counts(), (d.len(), 0, 0));
}

#[test]
fn scheduler_walks_in_waves() {
    check_walk(
        "abcd",
        &["ab", "ac", "bd", "cd"],
        "",
        &["run d", "run bc", "run a"],
    );
    check_walk("", &[], "", &[]);
}

#[test]
fn scheduler_failure_skips_dependents_only() {
    check_walk(
        "abcde",
        &["ab", "bc", "dc", "ec"],
        "b",
        &["run c", "run bde (b failed, skips a)"],
    );
}

#[test]
fn scheduler_skips_cycles_and_what_depends_on_them() {
    let (d, id) = graph("abcd", &["ab", "ba", "ca"]);
    let mut s = Scheduler::new(&d);
    for c in "abc".chars() {
        assert_eq!(s.state(id(c)), NodeState::Skipped);
    }
    assert_eq!(names(&d, s.ready()), "d");
    assert_eq!(s.counts(), (3, 1, 0));
    s.complete(id('d'));
    assert!(s.is_done());
}

#[test]
#[should_panic(expected = "only running nodes can finish")]
fn completing_a_node_twice_is_a_bug() {
    let (d, id) = graph("a", &[]);
    let mut s = Scheduler::new(&d);
    s.ready();
    s.complete(id('a'));
    s.complete(id('a'));
}
