//! Provider arguments set from ephemeral values, for the passes that configure providers
//! from state (refresh, and the deletes of a `destroy`).
//!
//! Such an argument is recorded as null with its provider instance (`Ctx::
//! recordable_provider_config`): a token from `ephemeral "aws_eks_cluster_auth"` or an
//! `ephemeral = true` variable must never be written down. A pass that configures the
//! instance from what is recorded would then configure it without its credentials. So, as
//! Terraform evaluates a provider block again in every walk, before such a pass a short walk
//! evaluates those arguments again: only the provider blocks that have some, and what they
//! depend on (variables, locals, ephemeral resources, which it opens; a managed resource or
//! data source is its value in state). The pass then configures each instance with the
//! configuration recorded in state, those arguments filled in: every other argument still
//! comes from state, so the objects are still read in the world they were created in.
//! [`ProviderInputs::close`] closes what the walk opened, once the pass is done.

use super::core::ProviderState;
use super::core::{run as walk_phase, Ctx, Instance, OrphanReason, Phase, ProviderSlot};
use super::ephemeral::{mark_sensitive, not_known_yet, Ephemerals};
use super::graph::{package_of_local, Node};
use super::observer::Observer;
use super::request::Options;
use super::source::{new_ctx_only, term_graph, Loaded};
use crate::addr::{Mode, ProviderAddr, ResourceInstanceAddr};
use crate::diag::Diagnostics;
use crate::value::Value;
use crate::value::ValueMap;
use cairn_state::Snapshot;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

/// The ephemeral-fed arguments of the provider instances in state, evaluated again, and the
/// ephemeral resources opened to evaluate them.
#[derive(Default)]
pub(crate) struct ProviderInputs {
    pub args: ProviderArgs,
    walk: Option<(Arc<Ctx>, Arc<InputsPhase>)>,
}

/// By provider instance: its arguments set from ephemeral values (the wholly known ones).
#[derive(Clone, Default)]
pub(crate) struct ProviderArgs(Arc<BTreeMap<ProviderAddr, ValueMap>>);

impl ProviderArgs {
    /// The configuration to configure `addr` with: `recorded` (from state) with its
    /// ephemeral-fed arguments filled in.
    pub(crate) fn config(&self, addr: &ProviderAddr, recorded: Value) -> Value {
        match (self.0.get(addr), recorded) {
            (Some(args), Value::Object(mut m)) => {
                for (k, v) in args {
                    m.insert(k.clone(), v.clone());
                }
                Value::Object(m)
            }
            (_, v) => v,
        }
    }
}

impl ProviderInputs {
    /// Closes the ephemeral resources the walk opened.
    pub(crate) async fn close(self) {
        if let Some((ctx, phase)) = self.walk {
            phase.ephemerals.close_all(&ctx).await;
        }
    }
}

/// Evaluates the ephemeral-fed arguments of the provider blocks whose instances are in
/// `prior`. Nothing to do (no walk, no cost) when no such block has objects in state.
pub(crate) async fn provider_inputs(
    loaded: &Loaded,
    opts: &Options,
    prior: &Arc<Snapshot>,
    observer: &Arc<dyn Observer>,
    diags: &mut Diagnostics,
) -> ProviderInputs {
    // The provider blocks (module, package, alias) with an ephemeral-fed argument.
    let mut blocks = BTreeSet::new();
    for m in loaded.config.modules() {
        for b in &m.providers {
            if !crate::config::ephemeral_arguments(m, &b.body).is_empty() {
                blocks.insert((
                    m.path.clone(),
                    package_of_local(m, &b.name),
                    b.alias.clone(),
                ));
            }
        }
    }
    let in_state =
        |a: &ProviderAddr| blocks.contains(&(a.module.clone(), a.package.clone(), a.alias.clone()));
    if !prior.providers.keys().any(in_state) {
        return ProviderInputs::default();
    }
    let (graph, graph_diags) = term_graph(&loaded.config);
    if graph_diags.has_errors() {
        // The plan walk reports them.
        return ProviderInputs::default();
    }
    let mut only = BTreeSet::new();
    for id in graph.dag.ids() {
        if let Node::Provider { addr } = graph.node(id) {
            if in_state(addr) {
                only.insert(id);
                only.extend(graph.dag.transitive_dependencies(id));
            }
        }
    }
    let ctx = new_ctx_only(
        loaded,
        graph,
        prior,
        opts,
        observer.clone(),
        Some(only),
        BTreeMap::new(),
    );
    let phase = Arc::new(InputsPhase {
        prior: prior.clone(),
        ephemerals: Ephemerals::default(),
        found: Mutex::default(),
    });
    walk_phase(ctx.clone(), phase.clone()).await;
    diags.extend(std::mem::take(&mut *ctx.diags.lock().expect("diags")));
    let found = std::mem::take(&mut *phase.found.lock().expect("found"));
    let mut args = BTreeMap::new();
    for (addr, config) in found {
        if !in_state(&addr) || !prior.providers.contains_key(&addr) {
            continue;
        }
        let names = ephemeral_names(&ctx, &addr);
        let Value::Object(m) = config else { continue };
        let known: ValueMap = m
            .into_iter()
            .filter(|(k, v)| names.contains(k) && v.is_wholly_known())
            .collect();
        if !known.is_empty() {
            args.insert(addr, known);
        }
    }
    ProviderInputs {
        args: ProviderArgs(Arc::new(args)),
        walk: Some((ctx, phase)),
    }
}

/// The names of the arguments of `addr`'s block set from ephemeral values.
fn ephemeral_names(ctx: &Ctx, addr: &ProviderAddr) -> BTreeSet<String> {
    let Some(m) = ctx.config.module(&addr.module) else {
        return BTreeSet::new();
    };
    m.providers
        .iter()
        .find(|p| package_of_local(m, &p.name) == addr.package && p.alias == addr.alias)
        .map(|b| crate::config::ephemeral_arguments(m, &b.body))
        .unwrap_or_default()
}

/// The walk: providers configured as the plan walk configures them (so that ephemeral
/// resources can be opened), ephemeral resources opened, managed resources and data sources
/// their values in state (unknown when they have none).
struct InputsPhase {
    prior: Arc<Snapshot>,
    ephemerals: Ephemerals,
    found: Mutex<BTreeMap<ProviderAddr, Value>>,
}

#[async_trait::async_trait]
impl Phase for InputsPhase {
    async fn provider(
        &self,
        ctx: &Arc<Ctx>,
        addr: &ProviderAddr,
        config: Value,
        _is_default: bool,
    ) -> Result<(), Diagnostics> {
        let unknown = config.unknown_paths();
        let state = if unknown.is_empty() {
            ProviderState::Configured(ctx.configure_provider(addr, &config).await?)
        } else {
            let paths = unknown.iter().map(|p| format!("{addr}.{p}")).collect();
            ProviderState::Unknown { paths }
        };
        ctx.set_provider_slot(ProviderSlot {
            addr: addr.clone(),
            package: addr.package.clone(),
            config: config.clone(),
            state,
            id: None,
        });
        self.found
            .lock()
            .expect("found")
            .insert(addr.clone(), config);
        Ok(())
    }

    async fn instance(&self, ctx: &Arc<Ctx>, inst: Instance) -> Result<Value, Diagnostics> {
        let stored = match inst.key.mode {
            Mode::Ephemeral => return self.ephemerals.open(ctx, inst).await,
            Mode::Managed => self.prior.current(&inst.addr).map(|o| &o.attrs),
            Mode::Data => self.prior.data.get(&inst.addr).map(|d| &d.attrs),
        };
        Ok(match stored {
            Some(attrs) => mark_sensitive(Value::from_stored(attrs), &inst.schema),
            None => not_known_yet(&inst),
        })
    }

    async fn orphans(
        &self,
        _ctx: &Arc<Ctx>,
        _orphans: Vec<(ResourceInstanceAddr, OrphanReason)>,
    ) -> Result<(), Diagnostics> {
        Ok(())
    }

    fn output(&self, _ctx: &Arc<Ctx>, _name: &str, _value: &Value, _sensitive: bool) {}
}
