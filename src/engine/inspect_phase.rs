//! `inspect`: evaluates the configuration without providers or state, as a policy scanner
//! needs. Each resource instance is its evaluated configuration, with the computed attributes
//! the configuration leaves unset unknown (from the provider's schema, which needs no
//! configuration); data sources' results are unknown.
//!
//! The phase is lenient (`Phase::lenient`): a resource of a provider Cairn has neither built
//! in nor installed is its configuration as written (no schema: blocks are lists of objects,
//! and a reference to an attribute it does not write is unknown); an unknown or failing
//! `count`/`for_each` gives one instance of unknown expansion; a failing term is a
//! diagnostic and unknown from there on, so everything else is still evaluated.

use super::core::{
    plan_without_provider, Ctx, Instance, OrphanReason, Phase, ProviderSlot, ProviderState,
};
use crate::addr::{Mode, ProviderAddr, ResourceInstanceAddr};
use crate::diag::Diagnostics;
use crate::value::Value;
use std::collections::HashSet;
use std::sync::{Arc, Mutex};

/// One evaluated instance.
#[derive(Clone, Debug, PartialEq)]
pub struct Inspected {
    pub addr: ResourceInstanceAddr,
    pub provider: ProviderAddr,
    /// The evaluated attributes (unknown where only apply could know them). Null until
    /// `Inspection::take_instances` moves the value in from the evaluated values (one copy
    /// of every resource's value, not two).
    pub attrs: Value,
    /// Evaluated without a schema (a provider Cairn does not have).
    pub schemaless: bool,
    /// Stands for a `count`/`for_each` whose value is unknown or failed.
    pub unknown_expansion: bool,
    /// Where each argument and nested block is written, by path (`eval::Sources`). The
    /// paths are shared: every instance of a resource, and most resources of a type, write
    /// the same ones (`ingress[0].from_port`).
    pub sources: Vec<(Arc<str>, crate::diag::Span)>,
}

/// Collects the instances in the order they finish; `take_sorted` orders them by address.
#[derive(Default)]
pub(crate) struct InspectPhase {
    pub instances: Mutex<Vec<Inspected>>,
    /// One copy of each attribute source path (`Inspected::sources`).
    paths: Mutex<HashSet<Arc<str>>>,
}

impl InspectPhase {
    /// A phase expecting about `n` instances (one per resource is the common case), so the
    /// list of them is not grown by doubling far past its size.
    pub(crate) fn with_capacity(n: usize) -> Self {
        InspectPhase {
            instances: Mutex::new(Vec::with_capacity(n)),
            paths: Mutex::default(),
        }
    }

    fn intern(&self, sources: crate::eval::Sources) -> Vec<(Arc<str>, crate::diag::Span)> {
        let mut paths = self.paths.lock().expect("inspect lock");
        sources
            .into_iter()
            .map(|(path, span)| {
                let shared = match paths.get(path.as_str()) {
                    Some(p) => p.clone(),
                    None => {
                        let p: Arc<str> = Arc::from(path);
                        paths.insert(p.clone());
                        p
                    }
                };
                (shared, span)
            })
            .collect()
    }

    /// Every instance, in address order.
    pub(crate) fn take_sorted(&self) -> Vec<Inspected> {
        let mut v = std::mem::take(&mut *self.instances.lock().expect("inspect lock"));
        v.sort_unstable_by(|x, y| x.addr.cmp(&y.addr));
        v
    }
}

#[async_trait::async_trait]
impl Phase for InspectPhase {
    async fn provider(
        &self,
        ctx: &Arc<Ctx>,
        addr: &ProviderAddr,
        config: Value,
        _is_default: bool,
    ) -> Result<(), Diagnostics> {
        ctx.set_provider_slot(ProviderSlot {
            addr: addr.clone(),
            package: addr.package.clone(),
            config,
            state: ProviderState::Unavailable,
            id: None,
        });
        Ok(())
    }

    fn lenient(&self) -> bool {
        true
    }

    async fn instance(&self, _ctx: &Arc<Ctx>, mut inst: Instance) -> Result<Value, Diagnostics> {
        let value = match inst.key.mode {
            // Only what the configuration wrote is known; the rest is open (`Scope::is_open`).
            _ if inst.schemaless => std::mem::replace(&mut inst.config, Value::null()),
            Mode::Managed => plan_without_provider(&inst.schema, &inst.config),
            Mode::Data | Mode::Ephemeral => {
                let mut v = plan_without_provider(&inst.schema, &inst.config);
                // A data source's computed results are only known once it is read.
                if let (Value::Object(m), Some(_)) = (&mut v, Some(())) {
                    for (k, a) in &inst.schema.attributes {
                        if a.computed && !a.optional && !a.required {
                            m.insert(k.clone(), Value::Unknown(a.ty.clone()));
                        }
                    }
                }
                v
            }
        };
        let inspected = Inspected {
            addr: inst.addr,
            provider: inst.provider,
            attrs: Value::null(),
            schemaless: inst.schemaless,
            unknown_expansion: inst.unknown_expansion,
            sources: self.intern(inst.sources),
        };
        self.instances.lock().expect("inspect lock").push(inspected);
        Ok(value)
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

/// The provider packages some resource uses that Cairn does not have (evaluated without a
/// schema), in name order.
pub(crate) fn unchecked_providers(ctx: &Ctx) -> Vec<String> {
    let mut out: Vec<String> = ctx
        .graph
        .providers_of_resources()
        .filter(|a| ctx.registry.package(&a.package).is_none())
        .map(|a| a.package.clone())
        .collect();
    out.sort();
    out.dedup();
    out
}

/// The workspace `inspect` evaluates in: the selected one (`TF_WORKSPACE`, `cairn workspace
/// select`), else the one Terraform selected in the configuration's directory (the name in
/// `.terraform/environment`); `None` means `default`.
pub(crate) fn selected_workspace(opts: &super::request::Options) -> Option<String> {
    if let Some(w) = &opts.workspace {
        return Some(w.clone());
    }
    let text = std::fs::read_to_string(opts.dir.join(".terraform/environment")).ok()?;
    let name = text.trim();
    (!name.is_empty()).then(|| name.to_string())
}
