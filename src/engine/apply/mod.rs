//! The apply phase: the same walk as the plan, with final values, carrying out the plan as
//! steps.
//!
//! Each planned instance is planned again by its provider with its configuration evaluated from
//! the *applied* values upstream; the result must agree with every value the saved plan knew,
//! else the run stops with "inconsistent final plan". Deferred data reads happen once their
//! dependencies are applied; reads done at plan time are not repeated (their results are
//! recorded). Deletes are separate `Destroy` nodes in reverse dependency order.
//!
//! The walker schedules steps and does not know what they do: this file turns each node it
//! reaches into a step and executes it. The files, each importing only the ones below it:
//! - `order.rs`: the graph-building steps that add and order the `Destroy` nodes;
//! - `steps.rs`: one step type per kind of change (the step generator and executor);
//! - `operation.rs`: one provider call that changes the world, between its operation
//!   records (durability), and the `Recorder` every step writes through.
//!
//! A failed step records what the provider reports (a partial create is kept, tainted), fails
//! its node so its dependents are skipped, and lets everything independent finish.

pub(crate) mod operation;
pub(crate) mod order;
pub(crate) mod steps;

use super::core::{Ctx, Instance, OrphanReason, Phase};
use super::graph::Node;
use crate::addr::{Mode, ProviderAddr, ResourceInstanceAddr};
use crate::diag::Diagnostics;
use crate::value::Value;
use cairn_state::EventBody;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use steps::{Executor, ProviderStep, Step};

pub(crate) struct ApplyPhase {
    pub steps: Executor,
    pub outputs: Mutex<BTreeMap<String, (Value, bool)>>,
    /// The ephemeral resources this walk opened, closed after it.
    pub ephemerals: crate::engine::ephemeral::Ephemerals,
}

#[async_trait::async_trait]
impl Phase for ApplyPhase {
    fn final_values(&self) -> bool {
        true
    }

    async fn provider(
        &self,
        ctx: &Arc<Ctx>,
        addr: &ProviderAddr,
        config: Value,
        is_default: bool,
    ) -> Result<(), Diagnostics> {
        let step = ProviderStep {
            addr,
            config,
            is_default,
        };
        step.execute(&self.steps, ctx).await
    }

    async fn instance(&self, ctx: &Arc<Ctx>, inst: Instance) -> Result<Value, Diagnostics> {
        if inst.key.mode == Mode::Ephemeral {
            return self.ephemerals.open(ctx, inst).await;
        }
        let step = Step::for_change(&self.steps, ctx, inst);
        step.execute(&self.steps, ctx).await
    }

    async fn orphans(
        &self,
        _ctx: &Arc<Ctx>,
        orphans: Vec<(ResourceInstanceAddr, OrphanReason)>,
    ) -> Result<(), Diagnostics> {
        // Managed orphans are deleted by their `Destroy` nodes; data orphans leave state.
        let rec = &self.steps.rec;
        for (addr, _) in orphans {
            if addr.resource.mode == Mode::Data
                && rec.journal.with_snapshot(|s| s.data.contains_key(&addr))
            {
                rec.append(EventBody::DataDropped { addr })?;
            }
        }
        Ok(())
    }

    fn output(&self, _ctx: &Arc<Ctx>, name: &str, value: &Value, sensitive: bool) {
        self.outputs
            .lock()
            .expect("outputs lock")
            .insert(name.to_string(), (value.clone(), sensitive));
    }

    async fn extra(&self, ctx: &Arc<Ctx>, node: &Node) -> Result<(), Diagnostics> {
        match node {
            Node::Destroy { addr, deposed } => {
                let step = Step::for_destroy(&self.steps, addr, deposed);
                step.execute(&self.steps, ctx).await.map(drop)
            }
            _ => Ok(()),
        }
    }
}
