//! The graph crate: a generic dependency DAG on petgraph and a scheduler for walking it.
//!
//! Every graph the engine builds (the term graph, refresh, plan, apply) is a [`Dag`]: node
//! weights are the engine's own types, and an edge `a -> b` means "`a` depends on `b`", so `b`
//! must finish before `a` starts. The [`Scheduler`] is the bookkeeping of a parallel walk over
//! such a graph (which nodes are ready, which are skipped after a failure) without any async
//! code, so the engine's walker stays a thin loop around it.
//!
//! # Decisions
//!
//! - **No domain types, no I/O, no tokio.** The crate knows nothing of addresses or providers;
//!   callers give labels through closures (see [`Dag::to_dot`]).
//! - **Stable ids.** The graph is a petgraph `StableGraph`, so a [`NodeId`] stays valid after
//!   [`Dag::retain`] and [`Dag::map`]: callers can keep
//!   side tables keyed by id across those steps. Like `StableGraph`, an id freed by `retain` may
//!   be handed out again by a later `add_node`.
//! - **Determinism.** Whenever the crate has to choose between nodes (topological order, ready
//!   sets, cycles, DOT output) it picks the smallest [`NodeId`] first. Ids are given out in
//!   insertion order, so ties are broken by insertion order (unless `retain` freed ids that
//!   were later reused).
//! - **Cycles are data.** [`Dag::topo_order`] fails with [`Cycles`], which lists one path per
//!   cyclic strongly connected component. A [`Scheduler`] built from a cyclic graph marks the
//!   cycles and everything depending on them as skipped up front, so a walk always terminates
//!   and the engine evaluates every term that is not caught in a cycle.

#![warn(unreachable_pub)]

mod dot;
mod scheduler;

pub use dot::DotNode;
pub use scheduler::{NodeState, Scheduler};

use petgraph::stable_graph::{NodeIndex, StableDiGraph};
use petgraph::Direction;
use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap, VecDeque};
use std::fmt;

/// The identity of a node in a [`Dag`]. Cheap to copy; ordered by insertion.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub struct NodeId(u32);

impl NodeId {
    /// The id as a dense index (smaller than the number of nodes ever added), for side tables.
    pub fn index(self) -> usize {
        self.0 as usize
    }

    fn ix(self) -> NodeIndex<u32> {
        NodeIndex::new(self.index())
    }

    fn from_ix(ix: NodeIndex<u32>) -> Self {
        // petgraph's default index type is u32, so this never truncates.
        NodeId(ix.index() as u32)
    }
}

impl fmt::Display for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "n{}", self.0)
    }
}

/// The cycles that stopped a topological sort: one path per cyclic strongly connected
/// component, each written `a -> b -> ... -> a` (first and last element are the same node).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cycles {
    /// Each cycle as a closed path, ordered by its first node; each starts at the smallest id
    /// of its component.
    pub cycles: Vec<Vec<NodeId>>,
}

impl fmt::Display for Cycles {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.cycles.len();
        write!(f, "{n} dependency cycle{}", if n == 1 { "" } else { "s" })?;
        for (i, c) in self.cycles.iter().enumerate() {
            let path: Vec<String> = c.iter().map(|id| id.to_string()).collect();
            write!(
                f,
                "{}{}",
                if i == 0 { ": " } else { "; " },
                path.join(" -> ")
            )?;
        }
        Ok(())
    }
}

impl std::error::Error for Cycles {}

/// A directed graph of dependencies: an edge `a -> b` means "`a` depends on `b`".
///
/// Despite the name it may hold cycles while being built; [`Dag::topo_order`] and
/// [`Dag::cycles`] find them.
#[derive(Clone)]
pub struct Dag<N> {
    g: StableDiGraph<N, ()>,
}

impl<N> Default for Dag<N> {
    fn default() -> Self {
        Dag {
            g: StableDiGraph::default(),
        }
    }
}

impl<N: fmt::Debug> fmt::Debug for Dag<N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut m = f.debug_map();
        for id in self.ids() {
            let deps: Vec<NodeId> = self.dependencies(id).collect();
            m.entry(&(id, self.node(id)), &deps);
        }
        m.finish()
    }
}

impl<N> Dag<N> {
    /// An empty graph.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a node and returns its id.
    pub fn add_node(&mut self, n: N) -> NodeId {
        NodeId::from_ix(self.g.add_node(n))
    }

    /// Records that `from` depends on `to`. Adding the same edge twice keeps one edge; an edge
    /// from a node to itself is a cycle.
    ///
    /// # Panics
    /// If either id is not in the graph (a bug in the caller, not bad input).
    pub fn add_edge(&mut self, from: NodeId, to: NodeId) {
        assert!(
            self.contains(from) && self.contains(to),
            "add_edge({from}, {to}): node not in graph"
        );
        if self.g.find_edge(from.ix(), to.ix()).is_none() {
            self.g.add_edge(from.ix(), to.ix(), ());
        }
    }

    /// Removes the edge `from -> to` if present; returns whether it was there.
    pub fn remove_edge(&mut self, from: NodeId, to: NodeId) -> bool {
        match self.g.find_edge(from.ix(), to.ix()) {
            Some(e) => self.g.remove_edge(e).is_some(),
            None => false,
        }
    }

    /// Whether `id` names a node of this graph.
    pub fn contains(&self, id: NodeId) -> bool {
        self.g.contains_node(id.ix())
    }

    /// Whether the edge `from -> to` exists.
    pub fn has_edge(&self, from: NodeId, to: NodeId) -> bool {
        self.g.find_edge(from.ix(), to.ix()).is_some()
    }

    /// The weight of a node.
    ///
    /// # Panics
    /// If `id` is not in the graph.
    pub fn node(&self, id: NodeId) -> &N {
        &self.g[id.ix()]
    }

    /// The weight of a node, or `None` if it is not in the graph.
    pub fn get(&self, id: NodeId) -> Option<&N> {
        self.g.node_weight(id.ix())
    }

    /// Number of nodes.
    pub fn len(&self) -> usize {
        self.g.node_count()
    }

    /// Whether the graph has no nodes.
    pub fn is_empty(&self) -> bool {
        self.g.node_count() == 0
    }

    /// Number of edges.
    pub fn edge_count(&self) -> usize {
        self.g.edge_count()
    }

    /// One past the largest id's [`NodeId::index`], for sizing side tables.
    pub fn id_bound(&self) -> usize {
        self.g
            .node_indices()
            .map(|i| i.index() + 1)
            .max()
            .unwrap_or(0)
    }

    /// Every node id, in ascending (insertion) order.
    pub fn ids(&self) -> impl Iterator<Item = NodeId> + '_ {
        // StableGraph iterates its slots in index order, skipping vacant ones.
        self.g.node_indices().map(NodeId::from_ix)
    }

    /// Every node with its weight, in ascending id order.
    pub fn nodes(&self) -> impl Iterator<Item = (NodeId, &N)> + '_ {
        self.ids().map(move |id| (id, self.node(id)))
    }

    /// Every edge `(from, to)` ("from depends on to"), sorted.
    pub fn edges(&self) -> Vec<(NodeId, NodeId)> {
        let mut v: Vec<(NodeId, NodeId)> = self
            .g
            .edge_indices()
            .filter_map(|e| self.g.edge_endpoints(e))
            .map(|(a, b)| (NodeId::from_ix(a), NodeId::from_ix(b)))
            .collect();
        v.sort_unstable();
        v
    }

    /// The direct dependencies of `id`, in ascending order.
    pub fn dependencies(&self, id: NodeId) -> impl Iterator<Item = NodeId> {
        self.neighbors(id, Direction::Outgoing).into_iter()
    }

    /// The direct dependents of `id` (nodes that depend on it), in ascending order.
    pub fn dependents(&self, id: NodeId) -> impl Iterator<Item = NodeId> {
        self.neighbors(id, Direction::Incoming).into_iter()
    }

    fn neighbors(&self, id: NodeId, dir: Direction) -> Vec<NodeId> {
        let mut v: Vec<NodeId> = self
            .g
            .neighbors_directed(id.ix(), dir)
            .map(NodeId::from_ix)
            .collect();
        v.sort_unstable();
        v
    }

    /// Everything `id` depends on, directly or not. `id` itself is included only when it lies
    /// on a cycle.
    pub fn transitive_dependencies(&self, id: NodeId) -> BTreeSet<NodeId> {
        self.reach(id, Direction::Outgoing)
    }

    /// Everything that depends on `id`, directly or not. `id` itself is included only when it
    /// lies on a cycle.
    pub fn transitive_dependents(&self, id: NodeId) -> BTreeSet<NodeId> {
        self.reach(id, Direction::Incoming)
    }

    fn reach(&self, id: NodeId, dir: Direction) -> BTreeSet<NodeId> {
        let mut seen = BTreeSet::new();
        let mut stack: Vec<NodeIndex<u32>> = self.g.neighbors_directed(id.ix(), dir).collect();
        while let Some(n) = stack.pop() {
            if seen.insert(NodeId::from_ix(n)) {
                stack.extend(self.g.neighbors_directed(n, dir));
            }
        }
        seen
    }

    /// Every node with dependencies before dependents. Among nodes that could go next, the
    /// smallest id goes first, so the order is deterministic and follows insertion order where
    /// the edges allow. Fails with every cycle when there is one.
    pub fn topo_order(&self) -> Result<Vec<NodeId>, Cycles> {
        let order = self.kahn();
        if order.len() == self.len() {
            Ok(order)
        } else {
            Err(Cycles {
                cycles: self.cycles(),
            })
        }
    }

    /// Kahn's algorithm with a min-heap; stops short of nodes on or behind cycles.
    fn kahn(&self) -> Vec<NodeId> {
        let mut remaining = vec![0usize; self.id_bound()];
        let mut heap = BinaryHeap::new();
        for id in self.ids() {
            let n = self.neighbors(id, Direction::Outgoing).len();
            remaining[id.index()] = n;
            if n == 0 {
                heap.push(Reverse(id));
            }
        }
        let mut order = Vec::with_capacity(self.len());
        while let Some(Reverse(id)) = heap.pop() {
            order.push(id);
            for d in self.g.neighbors_directed(id.ix(), Direction::Incoming) {
                let r = &mut remaining[d.index()];
                *r -= 1;
                if *r == 0 {
                    heap.push(Reverse(NodeId::from_ix(d)));
                }
            }
        }
        order
    }

    /// The cyclic strongly connected components (more than one node, or one node with an edge
    /// to itself), each sorted, ordered by their smallest id.
    pub fn cyclic_components(&self) -> Vec<BTreeSet<NodeId>> {
        let mut comps: Vec<BTreeSet<NodeId>> = petgraph::algo::tarjan_scc(&self.g)
            .into_iter()
            .filter(|c| c.len() > 1 || self.g.find_edge(c[0], c[0]).is_some())
            .map(|c| c.into_iter().map(NodeId::from_ix).collect())
            .collect();
        comps.sort_unstable();
        comps
    }

    /// One cycle per cyclic strongly connected component, as a closed path `a -> b -> ... -> a`
    /// following dependency edges. Each path starts at the smallest id of its component and is
    /// a shortest cycle through it (neighbours tried in ascending order); the list is ordered
    /// by first node. Empty when the graph is acyclic.
    pub fn cycles(&self) -> Vec<Vec<NodeId>> {
        self.cyclic_components()
            .iter()
            .map(|comp| self.shortest_cycle(comp))
            .collect()
    }

    /// Breadth-first search inside `comp` from its smallest node back to itself.
    fn shortest_cycle(&self, comp: &BTreeSet<NodeId>) -> Vec<NodeId> {
        let Some(&start) = comp.first() else {
            return Vec::new();
        };
        let mut parent: std::collections::BTreeMap<NodeId, NodeId> = Default::default();
        let mut queue = VecDeque::from([start]);
        while let Some(n) = queue.pop_front() {
            for d in self.dependencies(n) {
                if d == start {
                    let mut back = vec![start];
                    let mut cur = n;
                    while cur != start {
                        back.push(cur);
                        cur = parent[&cur];
                    }
                    back.push(start);
                    back.reverse();
                    return back;
                }
                if comp.contains(&d) && !parent.contains_key(&d) {
                    parent.insert(d, n);
                    queue.push_back(d);
                }
            }
        }
        // A strongly connected component always leads back to its start.
        unreachable!("component {comp:?} has no cycle through {start}")
    }

    /// Every node that lies on a cycle.
    pub fn nodes_on_cycles(&self) -> BTreeSet<NodeId> {
        self.cyclic_components().into_iter().flatten().collect()
    }

    /// The same shape (same ids and edges) with new weights.
    pub fn map<M>(&self, mut f: impl FnMut(NodeId, &N) -> M) -> Dag<M> {
        Dag {
            g: self.g.map(|ix, n| f(NodeId::from_ix(ix), n), |_, e| *e),
        }
    }

    /// Removes the nodes for which `keep` says no, with their edges; other ids stay valid.
    pub fn retain(&mut self, keep: impl Fn(NodeId) -> bool) {
        self.g.retain_nodes(|_, ix| keep(NodeId::from_ix(ix)));
    }

    /// The graph in Graphviz DOT. `label` describes each node (text, shape, style, colour).
    /// Nodes are written in id order, then every edge `a -> b` ("a depends on b") sorted, so
    /// equal graphs give equal text.
    pub fn to_dot(&self, label: impl Fn(&N) -> DotNode) -> String {
        dot::render(self, label)
    }
}

#[cfg(test)]
mod tests;
