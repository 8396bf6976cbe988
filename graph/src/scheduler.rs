//! The bookkeeping of a dependency-ordered walk: which nodes may start, which are skipped.
//!
//! The engine's walker is a loop: take [`Scheduler::ready`], start those nodes (on a
//! `JoinSet`, say), and report each outcome with [`Scheduler::complete`] or
//! [`Scheduler::fail`] until [`Scheduler::is_done`]. The scheduler itself has no async code and
//! no clock, so it is deterministic and tested on its own.
//!
//! A failed node skips every node that depends on it, directly or not; everything independent
//! still runs (as Terraform does). Nodes on a dependency cycle can never start, so a scheduler
//! built from a cyclic graph marks them — and everything that depends on them — as
//! [`NodeState::Skipped`] from the start; the caller reports the cycles from
//! [`crate::Dag::cycles`].

use crate::{Dag, NodeId};
use std::collections::BTreeSet;

/// Where a node is in the walk.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum NodeState {
    /// Some dependency has not finished.
    Waiting,
    /// Every dependency finished; not yet handed out by [`Scheduler::ready`].
    Ready,
    /// Handed out by [`Scheduler::ready`]; no outcome yet.
    Running,
    /// Finished successfully.
    Completed,
    /// Finished with a failure.
    Failed,
    /// Never started: a dependency failed or lies on a cycle, or the node lies on a cycle.
    Skipped,
}

impl NodeState {
    fn finished(self) -> bool {
        matches!(
            self,
            NodeState::Completed | NodeState::Failed | NodeState::Skipped
        )
    }
}

/// The state of a walk over a [`Dag`]. Node ids are those of the graph it was built from.
#[derive(Clone, Debug)]
pub struct Scheduler {
    /// Per id index: `None` for ids not in the graph.
    state: Vec<Option<NodeState>>,
    /// Per id index: how many dependencies have not completed.
    waiting_on: Vec<usize>,
    /// Per id index: direct dependents, ascending.
    dependents: Vec<Vec<NodeId>>,
    /// Nodes in `Ready` state, kept sorted so `ready` is deterministic.
    ready: BTreeSet<NodeId>,
    running: usize,
    finished: usize,
    total: usize,
}

impl Scheduler {
    /// A walk over `dag`: every node without dependencies is ready. Nodes on cycles and their
    /// transitive dependents start out skipped.
    pub fn new<N>(dag: &Dag<N>) -> Self {
        let bound = dag.id_bound();
        let mut s = Scheduler {
            state: vec![None; bound],
            waiting_on: vec![0; bound],
            dependents: vec![Vec::new(); bound],
            ready: BTreeSet::new(),
            running: 0,
            finished: 0,
            total: dag.len(),
        };
        for id in dag.ids() {
            s.waiting_on[id.index()] = dag.dependencies(id).count();
            s.dependents[id.index()] = dag.dependents(id).collect();
            s.state[id.index()] = Some(NodeState::Waiting);
        }
        let on_cycles = dag.nodes_on_cycles();
        for &c in &on_cycles {
            s.skip(c);
            for d in dag.transitive_dependents(c) {
                s.skip(d);
            }
        }
        for id in dag.ids() {
            if s.waiting_on[id.index()] == 0 && s.state(id) == NodeState::Waiting {
                s.set(id, NodeState::Ready);
                s.ready.insert(id);
            }
        }
        s
    }

    /// The state of a node.
    ///
    /// # Panics
    /// If `id` was not in the graph.
    pub fn state(&self, id: NodeId) -> NodeState {
        self.state
            .get(id.index())
            .copied()
            .flatten()
            .unwrap_or_else(|| panic!("scheduler: {id} is not in the graph"))
    }

    fn set(&mut self, id: NodeId, st: NodeState) {
        self.state[id.index()] = Some(st);
    }

    /// Marks a not-yet-finished node skipped; returns whether it changed.
    fn skip(&mut self, id: NodeId) -> bool {
        let st = self.state(id);
        if st.finished() {
            return false;
        }
        debug_assert!(st != NodeState::Running, "a dependent of {id} ran early");
        if st == NodeState::Ready {
            self.ready.remove(&id);
        }
        self.set(id, NodeState::Skipped);
        self.finished += 1;
        true
    }

    /// Hands out every node whose dependencies have all completed and that was not handed out
    /// before, in ascending id order; they become [`NodeState::Running`].
    pub fn ready(&mut self) -> Vec<NodeId> {
        let out: Vec<NodeId> = std::mem::take(&mut self.ready).into_iter().collect();
        for &id in &out {
            self.set(id, NodeState::Running);
        }
        self.running += out.len();
        out
    }

    fn finish(&mut self, id: NodeId, st: NodeState) {
        let was = self.state(id);
        assert!(
            was == NodeState::Running,
            "scheduler: {id} finished while {was:?}; only running nodes can finish"
        );
        self.set(id, st);
        self.running -= 1;
        self.finished += 1;
    }

    /// Records that a running node succeeded; its dependents whose dependencies have now all
    /// completed become ready.
    ///
    /// # Panics
    /// If `id` is not running (the walker reported a node twice or never started it).
    pub fn complete(&mut self, id: NodeId) {
        self.finish(id, NodeState::Completed);
        for i in 0..self.dependents[id.index()].len() {
            let d = self.dependents[id.index()][i];
            let w = &mut self.waiting_on[d.index()];
            *w -= 1;
            if *w == 0 && self.state(d) == NodeState::Waiting {
                self.set(d, NodeState::Ready);
                self.ready.insert(d);
            }
        }
    }

    /// Records that a running node failed. Every node that depends on it, directly or not,
    /// and has not already been skipped is skipped now; those are returned in ascending order.
    /// Nodes that do not depend on it are unaffected.
    ///
    /// # Panics
    /// If `id` is not running.
    pub fn fail(&mut self, id: NodeId) -> Vec<NodeId> {
        self.finish(id, NodeState::Failed);
        let mut skipped = BTreeSet::new();
        let mut stack = self.dependents[id.index()].clone();
        while let Some(n) = stack.pop() {
            if self.skip(n) {
                skipped.insert(n);
                stack.extend(self.dependents[n.index()].iter().copied());
            }
        }
        skipped.into_iter().collect()
    }

    /// Whether every node has finished (completed, failed or skipped).
    pub fn is_done(&self) -> bool {
        self.finished == self.total
    }

    /// `(done, running, left)`: nodes finished in any way, nodes handed out without an
    /// outcome, and nodes not yet handed out.
    pub fn counts(&self) -> (usize, usize, usize) {
        (
            self.finished,
            self.running,
            self.total - self.finished - self.running,
        )
    }
}
