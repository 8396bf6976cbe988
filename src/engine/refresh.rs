//! Refresh: a state-only pass over a flat graph.
//!
//! The graph has the provider instances in state and one node per managed instance in state,
//! each depending **only on its provider** — never on other resources, whatever the
//! configuration says — so every read runs at once, bounded by `-parallelism`. Providers are
//! configured with the configuration recorded in state: refresh reads each object in the world
//! it was created in, and evaluates nothing of the configuration. Data sources are not read.
//! A read that fails keeps the old state of its object; the other reads still land.

use super::observer::{Observer, Progress};
use super::provider_inputs::ProviderArgs;
use super::providers::Registry;
use super::sabotage::Sabotage;
use super::walk::{walk, Limits, NodeFuture};
use crate::addr::{ProviderAddr, ResourceInstanceAddr};
use crate::diag::{Diagnostic, Diagnostics};
use crate::plan::Drift;
use crate::value::Value;
use cairn_graph::Dag;
use cairn_state::{EventBody, Snapshot};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// What refresh found.
pub(crate) struct Refreshed {
    /// The prior state with every successful read applied (the prior state itself, shared,
    /// when no read changed anything).
    pub snapshot: Arc<Snapshot>,
    /// Objects whose state changed outside Cairn, in address order.
    pub drift: Vec<Drift>,
    /// Objects whose provider meta changed (drifted or not), in address order.
    pub metas: Vec<(ResourceInstanceAddr, cairn_state::ObjectMeta)>,
    /// The events that record the result (`ResourceRead` / `ResourceGone`), in address order.
    pub events: Vec<EventBody>,
    pub diags: Diagnostics,
}

#[derive(Clone)]
enum RNode {
    Provider(ProviderAddr),
    Instance(ResourceInstanceAddr),
}

/// Reads every managed instance in `prior` through its provider instance from state (with
/// its arguments set from ephemeral values from `args`: `provider_inputs`).
pub(crate) async fn refresh(
    prior: &Arc<Snapshot>,
    registry: &Arc<Registry>,
    args: &ProviderArgs,
    limits: &Limits,
    observer: &Arc<dyn Observer>,
) -> Refreshed {
    let dag = refresh_graph(prior, limits);
    let pass = Arc::new(Pass {
        prior: prior.clone(),
        registry: registry.clone(),
        args: args.clone(),
        configured: Mutex::default(),
        results: Mutex::default(),
        diags: Mutex::default(),
        observer: observer.clone(),
        limits: limits.clone(),
    });
    let nodes: Vec<RNode> = dag.ids().map(|id| dag.node(id).clone()).collect();
    let index: BTreeMap<_, _> = dag.ids().zip(nodes).collect();
    walk(
        &dag,
        limits,
        |id| -> NodeFuture {
            let node = index[&id].clone();
            let pass = pass.clone();
            Box::pin(async move {
                match node {
                    RNode::Provider(addr) => pass.configure(addr).await,
                    RNode::Instance(addr) => pass.read(addr).await,
                }
            })
        },
        |done, running, left| {
            observer.event(Progress::Counts {
                done,
                running,
                left,
            })
        },
    )
    .await;
    let results = std::mem::take(&mut *pass.results.lock().expect("results"));
    let mut out = fold_results(&pass.prior, results, &pass.diags);
    out.diags = std::mem::take(&mut *pass.diags.lock().expect("diags"));
    out
}

/// The refresh graph: the provider instances of the objects in state, and one node per
/// managed instance depending on its provider only.
fn refresh_graph(prior: &Snapshot, limits: &Limits) -> Dag<RNode> {
    let mut dag: Dag<RNode> = Dag::new();
    let mut provider_ids = BTreeMap::new();
    for (addr, inst) in &prior.resources {
        let Some(obj) = &inst.current else { continue };
        let p = obj.provider.addr.clone();
        let pid = *provider_ids
            .entry(p.clone())
            .or_insert_with(|| dag.add_node(RNode::Provider(p)));
        let id = dag.add_node(RNode::Instance(addr.clone()));
        dag.add_edge(id, pid);
    }
    if limits.broken(Sabotage::RefreshFollowsDependencies) {
        follow_dependencies(&mut dag, prior);
    }
    dag
}

/// What a read found: the object and its meta, or `None` when it is gone.
type Found = Option<(Value, cairn_state::ObjectMeta)>;

/// One refresh pass, shared by the walk's nodes.
struct Pass {
    prior: Arc<Snapshot>,
    registry: Arc<Registry>,
    args: ProviderArgs,
    /// The provider instances configured so far.
    configured: Mutex<BTreeMap<ProviderAddr, Arc<dyn crate::provider::Configured>>>,
    /// What each read found.
    results: Mutex<BTreeMap<ResourceInstanceAddr, Found>>,
    diags: Mutex<Diagnostics>,
    observer: Arc<dyn Observer>,
    limits: Limits,
}

impl Pass {
    /// A provider node: configures the instance with the configuration recorded in state.
    async fn configure(&self, addr: ProviderAddr) -> bool {
        let Some(inst) = self.prior.providers.get(&addr) else {
            self.diags.lock().expect("diags").push(
                Diagnostic::error("Provider instance missing from state", format!("Objects in state refer to {addr}, which the state does not hold. Run `cairn state check`."))
                    .with_address(&addr),
            );
            return false;
        };
        match self
            .registry
            .configure(
                &addr.package,
                &self.args.config(&addr, Value::from_stored(&inst.config)),
            )
            .await
        {
            Ok(c) => {
                self.configured.lock().expect("configured").insert(addr, c);
                true
            }
            Err(e) => {
                self.diags.lock().expect("diags").push(
                    Diagnostic::error(
                        "Failed to configure provider",
                        format!("Configuring {addr} to refresh its objects: {e}"),
                    )
                    .with_address(&addr),
                );
                false
            }
        }
    }

    /// An instance node: reads the object through its provider instance.
    async fn read(&self, addr: ResourceInstanceAddr) -> bool {
        let obj = self
            .prior
            .current(&addr)
            .expect("graph built from current objects")
            .clone();
        let c = self
            .configured
            .lock()
            .expect("configured")
            .get(&obj.provider.addr)
            .cloned()
            .expect("provider node ran first");
        self.observer
            .event(Progress::RefreshStart { addr: addr.clone() });
        let started = Instant::now();
        let read = {
            let _permit = self.limits.calls.acquire().await.expect("semaphore open");
            c.read_object(
                &addr.resource.type_,
                &Value::from_stored(&obj.attrs),
                &obj.meta,
            )
            .await
        };
        match read {
            Ok(v) => {
                let id = v
                    .as_ref()
                    .and_then(|(v, _)| v.get("id"))
                    .and_then(|i| i.as_str())
                    .map(str::to_string);
                self.observer.event(Progress::RefreshDone {
                    addr: addr.clone(),
                    id,
                    elapsed: started.elapsed(),
                });
                self.results.lock().expect("results").insert(addr, v);
                true
            }
            Err(e) => {
                self.diags.lock().expect("diags").push(
                    Diagnostic::error(
                        "Error refreshing state",
                        format!("{addr}: {e}. Its previous state is kept."),
                    )
                    .with_address(&addr),
                );
                false
            }
        }
    }
}

/// Folds what the reads found into the prior state: the new snapshot, the drift, the changed
/// metas and the events that record them (`diags` gets a value state cannot hold).
fn fold_results(
    prior: &Arc<Snapshot>,
    results: BTreeMap<ResourceInstanceAddr, Found>,
    diags: &Mutex<Diagnostics>,
) -> Refreshed {
    // Copied on the first change only (`Arc::make_mut`): a refresh that finds nothing new
    // (the common no-op plan) shares the prior state.
    let mut snapshot = prior.clone();
    let mut drift = Vec::new();
    let mut metas = Vec::new();
    let mut events = Vec::new();
    for (addr, new) in results {
        let Some(old) = snapshot.current(&addr) else {
            continue;
        };
        let before = Value::from_stored(&old.attrs);
        match new {
            Some((v, meta)) => {
                // The provider's meta (schema version, private bytes) is kept even when the
                // attributes did not drift.
                let meta_changed = meta != old.meta;
                // The new attributes, when they differ from state's.
                let changed = if crate::provider::schema_util::same(&before, &v) {
                    None
                } else {
                    let v = crate::value::carry_marks(&before, v);
                    let Ok(stored) = v.to_stored() else {
                        snapshot_diag(diags, &addr);
                        continue;
                    };
                    if stored == old.attrs {
                        None
                    } else {
                        drift.push(Drift {
                            addr: addr.clone(),
                            before: before.clone(),
                            after: Some(v),
                        });
                        Some(stored)
                    }
                };
                if meta_changed {
                    metas.push((addr.clone(), meta.clone()));
                }
                if changed.is_some() || meta_changed {
                    let stored = changed.unwrap_or_else(|| old.attrs.clone());
                    events.push(EventBody::ResourceRead {
                        addr: addr.clone(),
                        attrs: stored.clone(),
                        meta: meta_changed.then(|| meta.clone()),
                    });
                    let s = Arc::make_mut(&mut snapshot);
                    if let Some(inst) = s.resources.get_mut(&addr) {
                        if let Some(cur) = inst.current.as_mut() {
                            cur.attrs = stored;
                            cur.meta = meta;
                        }
                    }
                }
            }
            None => {
                drift.push(Drift {
                    addr: addr.clone(),
                    before,
                    after: None,
                });
                events.push(EventBody::ResourceGone { addr: addr.clone() });
                let s = Arc::make_mut(&mut snapshot);
                if let Some(inst) = s.resources.get_mut(&addr) {
                    inst.current = None;
                    if inst.deposed.is_empty() {
                        s.resources.remove(&addr);
                    }
                }
            }
        }
    }
    Refreshed {
        snapshot,
        drift,
        metas,
        events,
        diags: Diagnostics::new(),
    }
}

/// Only with `Sabotage::RefreshFollowsDependencies`: each instance's read waits for the reads
/// of the objects state says it depends on (what refresh must not do).
fn follow_dependencies(dag: &mut Dag<RNode>, prior: &Snapshot) {
    let ids: BTreeMap<ResourceInstanceAddr, _> = dag
        .ids()
        .filter_map(|id| match dag.node(id) {
            RNode::Instance(a) => Some((a.clone(), id)),
            RNode::Provider(_) => None,
        })
        .collect();
    for (addr, id) in &ids {
        for dep in prior
            .current(addr)
            .map(|o| o.deps.as_slice())
            .unwrap_or(&[])
        {
            if let Some(dep_id) = ids.get(dep) {
                dag.add_edge(*id, *dep_id);
            }
        }
    }
}

fn snapshot_diag(diags: &Mutex<Diagnostics>, addr: &ResourceInstanceAddr) {
    diags.lock().expect("diags").push(
        Diagnostic::error(
            "Provider returned an unknown value on refresh",
            format!("The provider's read of {addr} returned values that are not known. This is a bug in the provider: a read returns a wholly known state."),
        )
        .with_address(addr),
    );
}
