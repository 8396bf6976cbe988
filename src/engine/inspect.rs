//! `inspect`: evaluates the configuration without providers or state, as a policy scanner
//! needs. Each resource instance is its evaluated configuration, with the computed attributes
//! the configuration leaves unset unknown (from the provider's schema, which needs no
//! configuration); data sources' results are unknown.

use super::core::{
    plan_without_provider, Ctx, Instance, OrphanReason, Phase, ProviderSlot, ProviderState,
};
use crate::diag::Diagnostics;
use crate::value::Value;
use cairn_state::{Mode, ProviderAddr, ResourceInstanceAddr};
use std::sync::{Arc, Mutex};

/// One evaluated instance.
#[derive(Clone, Debug, PartialEq)]
pub struct Inspected {
    pub addr: ResourceInstanceAddr,
    pub provider: ProviderAddr,
    /// The evaluated attributes (unknown where only apply could know them).
    pub attrs: Value,
}

/// Collects the instances in the order they finish; `into_sorted` orders them by address.
#[derive(Default)]
pub struct InspectPhase {
    pub instances: Mutex<Vec<Inspected>>,
}

impl InspectPhase {
    /// Every instance, in address order.
    pub fn into_sorted(&self) -> Vec<Inspected> {
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
        is_default: bool,
    ) -> Result<(), Diagnostics> {
        ctx.set_provider_slot(ProviderSlot {
            addr: addr.clone(),
            package: addr.package.clone(),
            config,
            state: ProviderState::Unavailable,
            is_default,
            id: None,
        });
        Ok(())
    }

    async fn instance(&self, _ctx: &Arc<Ctx>, inst: Instance) -> Result<Value, Diagnostics> {
        let value = match inst.key.mode {
            Mode::Managed => plan_without_provider(&inst.schema, &inst.config),
            Mode::Data => {
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
            attrs: value.clone(),
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
