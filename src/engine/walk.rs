//! The one walker every phase uses: nodes become ready when their dependencies finish, a
//! `tokio::task::JoinSet` runs them, a failed node skips its dependents, and everything
//! independent still runs.
//!
//! Concurrency: the walker does not limit how many nodes run at once — most nodes only evaluate
//! expressions. Provider calls take a permit from the `-parallelism` semaphore, held only around
//! the call (see `Limits`). A node is first polled in place by the walker: one that does not
//! wait (evaluation only) finishes there, without a task or a thread hop — for a large
//! configuration the hops, not the evaluation, were most of the walk's time. Only a node that
//! waits becomes a task. Stopping (Ctrl-C): once `stop` is set, no new node starts; nodes
//! already running finish and their outcome is recorded; nodes never started are reported as
//! not run.

use super::sabotage::Sabotage;
use cairn_graph::{Dag, NodeId, Scheduler};
use std::collections::{BTreeSet, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::Poll;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

/// What limits the work in flight: the provider-call semaphore and the stop flag.
#[derive(Clone)]
pub(crate) struct Limits {
    /// Held only around provider calls; sized by `-parallelism`.
    pub calls: Arc<Semaphore>,
    /// Set by Ctrl-C: start nothing new.
    pub stop: Arc<AtomicBool>,
    /// A deliberately broken rule (property tests only; see `sabotage.rs`).
    pub sabotage: Option<Sabotage>,
}

impl Limits {
    /// True when the property tests broke rule `s` for this run (never otherwise).
    pub(crate) fn broken(&self, s: Sabotage) -> bool {
        self.sabotage == Some(s)
    }
    pub(crate) fn stopped(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
    }
}

/// How a walk ended, node by node.
#[derive(Debug, Default)]
pub(crate) struct WalkOutcome {
    pub failed: BTreeSet<NodeId>,
    /// Dependents of failed nodes: never run.
    pub skipped: BTreeSet<NodeId>,
    /// Not started because the walk was stopped.
    pub not_run: BTreeSet<NodeId>,
}

impl WalkOutcome {
    pub(crate) fn ok(&self) -> bool {
        self.failed.is_empty() && self.skipped.is_empty() && self.not_run.is_empty()
    }
}

pub(crate) type NodeFuture = Pin<Box<dyn Future<Output = bool> + Send>>;

/// At most this many nodes wait as tasks at once; further ready nodes wait, not started, in
/// the walk's queue. A refresh of 100,000 instances spawned a task for every read at once,
/// each then waiting for its `-parallelism` permit: 31 MB of tasks (issue 31). Far more than
/// any `-parallelism`, so that many writers still share each of the journal's group commits.
const MAX_TASKS: usize = 1024;

/// Walks `dag` in dependency order. `visit(id)` returns a future that does the node's work and
/// resolves to `true` on success; it is polled once in place and, if it has to wait, spawned
/// on the runtime, so it owns what it needs.
/// `on_counts` is told (done, running, left) as the walk moves.
pub(crate) async fn walk<N>(
    dag: &Dag<N>,
    limits: &Limits,
    mut visit: impl FnMut(NodeId) -> NodeFuture,
    mut on_counts: impl FnMut(usize, usize, usize),
) -> WalkOutcome {
    let mut scheduler = Scheduler::new(dag);
    let mut outcome = WalkOutcome::default();
    // Every spawned node is joined here before `walk` returns: no detached tasks.
    let mut running: JoinSet<(NodeId, bool)> = JoinSet::new();
    let mut completed: BTreeSet<NodeId> = BTreeSet::new();
    // Ready nodes not started yet, while `MAX_TASKS` nodes wait as tasks.
    let mut queued: VecDeque<NodeId> = VecDeque::new();
    loop {
        // Start every ready node. A node is polled once here first: one that finishes without
        // waiting on anything (most nodes only evaluate expressions) is done at once, with no
        // task spawned and no hop to a worker thread and back; its dependents may become
        // ready in turn. Only a node that waits (a provider call) becomes a task.
        while !limits.stopped() && running.len() < MAX_TASKS {
            if queued.is_empty() {
                queued.extend(scheduler.ready());
            }
            let Some(id) = queued.pop_front() else {
                break;
            };
            let mut fut = visit(id);
            let polled = std::future::poll_fn(|cx| Poll::Ready(fut.as_mut().poll(cx))).await;
            match polled {
                Poll::Ready(true) => {
                    completed.insert(id);
                    scheduler.complete(id);
                }
                Poll::Ready(false) if limits.broken(Sabotage::FailureSkipsNothing) => {
                    completed.insert(id);
                    scheduler.complete(id);
                }
                Poll::Ready(false) => {
                    outcome.failed.insert(id);
                    outcome.skipped.extend(scheduler.fail(id));
                }
                Poll::Pending => {
                    running.spawn(async move { (id, fut.await) });
                }
            }
        }
        let (done, in_flight, left) = scheduler.counts();
        on_counts(done, in_flight, left);
        match running.join_next().await {
            Some(Ok((id, true))) => {
                completed.insert(id);
                scheduler.complete(id)
            }
            Some(Ok((id, false))) if limits.broken(Sabotage::FailureSkipsNothing) => {
                completed.insert(id);
                scheduler.complete(id)
            }
            Some(Ok((id, false))) => {
                outcome.failed.insert(id);
                outcome.skipped.extend(scheduler.fail(id));
            }
            Some(Err(e)) => {
                // A node panicked: that is a bug in Cairn, not bad input. Surface it loudly.
                std::panic::resume_unwind(e.into_panic());
            }
            None => break,
        }
    }
    if !scheduler.is_done() {
        outcome.not_run = dag
            .ids()
            .filter(|id| {
                !completed.contains(id)
                    && !outcome.failed.contains(id)
                    && !outcome.skipped.contains(id)
            })
            .collect();
    }
    outcome
}
