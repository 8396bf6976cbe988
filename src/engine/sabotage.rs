//! Deliberately broken engine rules, for the property tests only.
//!
//! Issue 6 asks that every lifecycle property be able to fail. The property tests show it by
//! running the real engine with one rule broken and watching the property's check reject the
//! run. Each variant names one rule; the engine consults it at the one place where that rule is
//! implemented (`if limits.broken(Sabotage::X)`), so turning it on makes the engine really
//! violate the rule — no outcome is edited after the fact.
//!
//! The switch is [`crate::engine::Options::sabotage`], `None` by default. Nothing sets it but
//! test code: the CLI does not read it from flags or the environment, so users can never turn
//! it on. When it is `None` every hook is a comparison that is false, and the engine behaves
//! exactly as without it.

/// One broken rule. The doc of each variant says what the engine then does wrong and which
/// property (issue 6's numbering) that breaks.
#[doc(hidden)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Sabotage {
    /// The deferral rule counts only *direct* dependencies, like Terraform: a data source that
    /// reaches a pending managed resource only through a local, a module input or output, or
    /// a module call's `depends_on` is read during the plan (p02), so its result lags one
    /// apply behind (p01). Site: `plan_phase.rs`, `plan_data`.
    DeferDirectOnly,
    /// `plan -read-only` applies the normal plan's deferral rule to data sources: one whose
    /// configuration is not known is deferred to an apply instead of keeping its previous
    /// result (p02, read-only half). Site: `plan_phase.rs`, `plan_data`.
    ReadOnlyDefers,
    /// Refresh follows the dependencies recorded in state instead of being flat: an object
    /// whose dependency's read fails is not read at all (p03). Site: `refresh.rs`.
    RefreshFollowsDependencies,
    /// `apply -read-only` ignores the read-only flag and plans and applies like `apply` (p04).
    /// Site: `api.rs`, `apply_start`.
    ReadOnlyApplies,
    /// `plan` carries out the in-place updates it plans (p05). Site: `plan_phase.rs`,
    /// `plan_managed`.
    PlanApplies,
    /// Apply also updates instances the plan left unchanged (p06). Site: `apply/steps.rs`,
    /// `Step::for_change`.
    ApplyUpdatesNoOps,
    /// A successful create is recorded without its object: the object exists in the store but
    /// not in state (p07). Site: `apply/operation.rs`, `Operation::succeeded`.
    ForgetCreates,
    /// Deletes run in dependency order instead of reverse dependency order: a dependency is
    /// deleted while its dependents still exist (p08). Site: `apply/order.rs`,
    /// `order_by_dependencies`.
    DeleteDependenciesFirst,
    /// A failed node does not skip its dependents: the walk treats it as done (p09). Site:
    /// `walk.rs`.
    FailureSkipsNothing,
    /// A successful operation's outcome is recorded twice, so the log settles an operation
    /// that is already settled and fails the integrity check (p10). Site:
    /// `apply/operation.rs`, `Operation::succeeded`.
    SettleTwice,
    /// The values of a resource's instances are stored in the order their provider calls
    /// completed instead of by instance key (last writer wins on the next free key), so what
    /// `x[0]` means depends on completion order (p11). Site: `core.rs`, `visit_resource`.
    InstancesInCompletionOrder,
    /// `destroy` plans deletes only for the root module's resources and leaves those of child
    /// modules (p12). Site: `assemble.rs`, `assemble_plan`.
    DestroySkipsChildModules,
    /// Deletes configure the provider with its default configuration instead of the one
    /// recorded in state, so an object made through a configured provider instance is
    /// "deleted" in the wrong world (p13; and it stays in the store, p12). Site: `apply/steps.rs`,
    /// `Delete::execute`.
    DeleteWithDefaultProviderConfig,
}
