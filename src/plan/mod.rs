//! `Plan`, `Change`, `Action`: what a plan proposes, and the reasons. `render` is the only way a
//! plan becomes human text; `json` gives the `terraform show -json` view; `saved` is the saved
//! plan file (`plan -out=FILE`).

pub(crate) mod json;
pub(crate) mod record;
pub mod render;
pub mod saved;

pub(crate) use render::{render_change, render_change_in, RenderOptions};

#[cfg(test)]
mod tests;

use crate::addr::{ProviderAddr, ResourceInstanceAddr, Target};
use crate::value::Value;
use crate::value::ValueMap;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Action {
    NoOp,
    Create,
    /// A data source read deferred to apply.
    Read,
    Update,
    /// Replace: delete the old object, then create the new one.
    DeleteThenCreate,
    /// Replace with `create_before_destroy`: create first, then delete the old one.
    CreateThenDelete,
    Delete,
    /// `removed { lifecycle { destroy = false } }`: the object leaves the state, the world
    /// keeps it (no provider call).
    Forget,
}

impl Action {
    pub(crate) fn is_replace(self) -> bool {
        matches!(self, Action::DeleteThenCreate | Action::CreateThenDelete)
    }
    /// The words Terraform uses in "will be …" sentences.
    pub(crate) fn verb(self) -> &'static str {
        match self {
            Action::NoOp => "left unchanged",
            Action::Create => "created",
            Action::Read => "read during apply",
            Action::Update => "updated in-place",
            Action::DeleteThenCreate | Action::CreateThenDelete => "replaced",
            Action::Delete => "destroyed",
            Action::Forget => "forgotten",
        }
    }
    /// Terraform's `change.actions` array.
    pub(crate) fn json_actions(self) -> &'static [&'static str] {
        match self {
            Action::NoOp => &["no-op"],
            Action::Create => &["create"],
            Action::Read => &["read"],
            Action::Update => &["update"],
            Action::DeleteThenCreate => &["delete", "create"],
            Action::CreateThenDelete => &["create", "delete"],
            Action::Delete => &["delete"],
            Action::Forget => &["forget"],
        }
    }
}

/// Why an action was chosen, when it needs saying.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Reason {
    ReplaceBecauseCannotUpdate,
    ReplaceBecauseTainted,
    ReplaceByRequest,
    ReplaceByTriggers,
    /// The provider instance's `diff_config` said replace (e.g. `sim`'s region changed), or the
    /// resource moved to a provider instance with a different configuration.
    ReplaceBecauseProviderChanged {
        provider: ProviderAddr,
        /// The instance the object moves from, when it moves (else `provider` is replaced).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        from: Option<ProviderAddr>,
    },
    DeleteBecauseNoResourceConfig,
    DeleteBecauseCountIndex,
    DeleteBecauseEachKey,
    DeleteBecauseNoModule,
    /// The provider's configuration is not known until apply: planned without calling it.
    ProviderConfigUnknown {
        provider: ProviderAddr,
    },
    /// `read_because_config_unknown`: `value` (a path in the data source's configuration, or in
    /// its provider's) is unknown; `chain` is where the unknown comes from, nearest first, e.g.
    /// `["local.k", "sim_thing.a.id"]`.
    ReadBecauseConfigUnknown {
        value: String,
        chain: Vec<String>,
    },
    /// `read_because_dependency_pending`: `dependency` has a planned `action`; `via` is the
    /// chain of references from the data source to it (locals, variables, module outputs).
    ReadBecauseDependencyPending {
        dependency: ResourceInstanceAddr,
        action: Action,
        via: Vec<String>,
    },
    /// `read_because_check_nested`: a `check` block's data source that could not be read
    /// during the plan is read again during apply, to verify the check.
    ReadBecauseCheckNested,
}

impl Reason {
    /// Terraform's `action_reason` string.
    pub(crate) fn json_name(&self) -> &'static str {
        match self {
            Reason::ReplaceBecauseCannotUpdate => "replace_because_cannot_update",
            Reason::ReplaceBecauseTainted => "replace_because_tainted",
            Reason::ReplaceByRequest => "replace_by_request",
            Reason::ReplaceByTriggers => "replace_by_triggers",
            Reason::ReplaceBecauseProviderChanged { .. } => "replace_because_provider_changed",
            Reason::DeleteBecauseNoResourceConfig => "delete_because_no_resource_config",
            Reason::DeleteBecauseCountIndex => "delete_because_count_index",
            Reason::DeleteBecauseEachKey => "delete_because_each_key",
            Reason::DeleteBecauseNoModule => "delete_because_no_module",
            Reason::ProviderConfigUnknown { .. } => "provider_config_unknown",
            Reason::ReadBecauseConfigUnknown { .. } => "read_because_config_unknown",
            Reason::ReadBecauseCheckNested => "read_because_check_nested",
            Reason::ReadBecauseDependencyPending { .. } => "read_because_dependency_pending",
        }
    }
}

/// The planned change of one resource instance (managed, or a data read deferred to apply).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Change {
    pub addr: ResourceInstanceAddr,
    /// Shared by every change of the same provider ([`shared_provider`]): inline, the
    /// address was 96 bytes and a string in each of 100,000 changes (issue 31).
    #[serde(with = "shared_provider_serde")]
    pub provider: std::sync::Arc<ProviderAddr>,
    pub action: Action,
    /// The prior state (refreshed), `None` for a create or read.
    pub before: Option<Value>,
    /// The planned state, with unknowns; `None` for a delete.
    pub after: Option<Value>,
    /// Attributes whose change forces the replacement.
    pub replace_paths: Vec<String>,
    /// Boxed: most changes have none, and a reason is 192 bytes (issue 31).
    pub reason: Option<Box<Reason>>,
    /// Attribute names the schema marks sensitive.
    pub sensitive_attrs: Vec<String>,
    /// The provider's diff was not available (its configuration is unknown until apply).
    pub diff_unavailable: bool,
    /// The object is imported by this plan (an `import` block): `before` is what the
    /// provider's import and read found, which apply adopts into state before it acts.
    /// Boxed: absent from nearly every change, 88 bytes inline in each (issue 31).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub importing: Option<Box<Importing>>,
    /// The deposed object this change deletes (left over from a create-before-destroy whose
    /// create failed part-way); `None`: the current object. Such a change is a `Delete`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deposed: Option<String>,
}

/// The one shared copy of provider address `p` in this process: a plan's changes name a
/// handful of providers, and each change holds the copy instead of its own.
pub(crate) fn shared_provider(p: &ProviderAddr) -> std::sync::Arc<ProviderAddr> {
    use std::sync::{Arc, Mutex, OnceLock};
    static SHARED: OnceLock<Mutex<rustc_hash::FxHashSet<Arc<ProviderAddr>>>> = OnceLock::new();
    let mut shared = SHARED
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    if let Some(a) = shared.get(p) {
        return a.clone();
    }
    let a = Arc::new(p.clone());
    shared.insert(a.clone());
    a
}

/// A change's provider written as the address it is, read back as the shared copy.
mod shared_provider_serde {
    use super::ProviderAddr;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};
    use std::sync::Arc;

    pub(super) fn serialize<S: Serializer>(p: &Arc<ProviderAddr>, s: S) -> Result<S::Ok, S::Error> {
        p.as_ref().serialize(s)
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Arc<ProviderAddr>, D::Error> {
        ProviderAddr::deserialize(d).map(|p| super::shared_provider(&p))
    }
}

/// How a planned change imports its object (`import` blocks; Terraform's `importing`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Importing {
    /// The id given to the provider's import.
    pub(crate) id: String,
    /// What the provider keeps beside the imported object (schema version, private bytes),
    /// kept in state with it.
    #[serde(default)]
    pub(crate) meta: cairn_state::ObjectMeta,
    /// The resource block was generated by `plan -generate-config-out` (no block in the
    /// configuration yet).
    #[serde(default)]
    pub(crate) generated: bool,
    /// The generated block's HCL (`-generate-config-out` writes it; JSON `generated_config`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) generated_config: Option<String>,
}

/// A change of a provider instance (providers are resources too).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ProviderChange {
    pub addr: ProviderAddr,
    pub action: Action,
    pub(crate) before: Option<Value>,
    pub(crate) after: Option<Value>,
    pub(crate) is_default: bool,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OutputChange {
    pub name: String,
    pub action: Action,
    pub before: Option<Value>,
    pub after: Option<Value>,
    pub sensitive: bool,
}

/// A change refresh found that was made outside Cairn.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Drift {
    pub(crate) addr: ResourceInstanceAddr,
    pub(crate) before: Value,
    /// `None` when the object is gone.
    pub(crate) after: Option<Value>,
}

/// A data source read during the plan, with its result.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DataRead {
    pub addr: ResourceInstanceAddr,
    pub(crate) provider: ProviderAddr,
    pub(crate) config: Value,
    pub result: Value,
    /// The previous result in state, if any (read-only mode shows what changed).
    pub(crate) before: Option<Value>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum PlanMode {
    Normal,
    Destroy,
    ReadOnly,
    RefreshOnly,
}

/// The choices a plan was made with besides its mode and variables: `-target`, `-replace`,
/// `-refresh`. A saved plan carries them so that `apply FILE` walks exactly what was planned.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PlanRequest {
    pub(crate) targets: Vec<Target>,
    /// `-exclude` (OpenTofu's): absent in plan files from before it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) excludes: Vec<Target>,
    pub(crate) replace: Vec<ResourceInstanceAddr>,
    pub(crate) refresh: bool,
}

impl Default for PlanRequest {
    fn default() -> Self {
        PlanRequest {
            targets: Vec::new(),
            excludes: Vec::new(),
            replace: Vec::new(),
            refresh: true,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    pub mode: PlanMode,
    /// The log position (sequence number of the last event) the plan was computed against.
    pub base_seq: u64,
    /// A hash of the configuration files and variable values the plan was made from.
    pub config_hash: String,
    pub changes: Vec<Change>,
    pub provider_changes: Vec<ProviderChange>,
    pub outputs: Vec<OutputChange>,
    pub drift: Vec<Drift>,
    /// Objects whose provider meta (schema version, private bytes) refresh changed, drifted
    /// or not: recorded with the drift when the plan is applied.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub refreshed_meta: Vec<(ResourceInstanceAddr, cairn_state::ObjectMeta)>,
    pub data_reads: Vec<DataRead>,
    /// Data sources in state that the configuration no longer has: dropped at apply, with no
    /// provider call.
    pub dropped_data: Vec<ResourceInstanceAddr>,
    /// Variable values, so a saved plan applies with the values it was made with.
    pub variables: ValueMap,
    /// The rest of what the plan was asked (with `mode` and `variables`, the whole request):
    /// `apply FILE` rebuilds the engine's request from this alone.
    #[serde(default)]
    pub request: PlanRequest,
    /// Warnings found while planning (rendered with the plan).
    pub warnings: Vec<String>,
    /// True when applying would change anything (managed changes, deferred reads, outputs, or
    /// in read-only mode new data results).
    pub applyable: bool,
    pub errored: bool,
    /// The configuration's dependency graph (resources and data sources) when the plan was
    /// made: what `cairn ui` draws for the plan, whatever the files say later. `None` in plan
    /// files from before Cairn saved it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub graph: Option<cairn_state::PlanGraph>,
    /// What the configuration's `moved` blocks do to the prior state, in order (a chain is
    /// several): the changes are planned at the destinations, and an apply records these as
    /// `ResourceMoved` events before anything else.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub moves: Vec<(ResourceInstanceAddr, ResourceInstanceAddr)>,
    /// The workspace whose state the plan was made against (`None`: `default`): a saved
    /// plan applies to that workspace only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace: Option<String>,
    /// What `check` blocks found while planning (warnings): an apply evaluates every check
    /// again with final values and reports its own findings instead. Not saved.
    #[serde(skip)]
    pub check_findings: Vec<crate::diag::Diagnostic>,
    /// The nested blocks of the resource types in the plan (`BlockShape::key`), so that the
    /// plan text draws them as blocks (`rule { … }`), as Terraform does; only types whose
    /// schema has nested blocks are here.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub shapes: BTreeMap<String, BlockShape>,
    /// The source address of each provider package the configuration declares
    /// (`required_providers`), for `provider_name` in the JSON view; a package not here is
    /// Terraform's implied `registry.terraform.io/hashicorp/NAME`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub sources: BTreeMap<String, String>,
}

/// The nested block types of a schema block, recursively: what the plan text needs of a
/// schema to draw `rule { port = 80 }` as a block rather than as a list of objects.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct BlockShape {
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub(crate) blocks: BTreeMap<String, NestedShape>,
    /// The write-only attributes (Terraform 1.11): drawn as `(write-only attribute)`, their
    /// values being never planned nor stored.
    #[serde(default, skip_serializing_if = "std::collections::BTreeSet::is_empty")]
    pub(crate) write_only: std::collections::BTreeSet<String>,
}

/// One nested block type: how its blocks nest, and their own nested blocks.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct NestedShape {
    pub(crate) nesting: crate::schema::Nesting,
    #[serde(default)]
    pub(crate) shape: BlockShape,
}

impl BlockShape {
    pub(crate) fn of(block: &crate::schema::Block) -> BlockShape {
        BlockShape {
            blocks: block
                .blocks
                .iter()
                .map(|(name, nb)| {
                    let shape = BlockShape::of(&nb.block);
                    (
                        name.clone(),
                        NestedShape {
                            nesting: nb.nesting,
                            shape,
                        },
                    )
                })
                .collect(),
            write_only: block
                .attributes
                .iter()
                .filter(|(_, a)| a.write_only)
                .map(|(k, _)| k.clone())
                .collect(),
        }
    }

    /// The shapes of `types` that have nested blocks, by `key`, from `schema` (the schema block
    /// of a resource type, when it is at hand).
    pub(crate) fn of_types<'a>(
        types: impl IntoIterator<Item = (crate::addr::Mode, &'a str)>,
        schema: impl Fn(crate::addr::Mode, &str) -> Option<BlockShape>,
    ) -> BTreeMap<String, BlockShape> {
        types
            .into_iter()
            .filter_map(|(mode, type_)| {
                let shape = schema(mode, type_)
                    .filter(|s| !s.blocks.is_empty() || !s.write_only.is_empty())?;
                Some((BlockShape::key(mode, type_), shape))
            })
            .collect()
    }

    /// The key of a resource type in `Plan::shapes`: `TYPE`, or `data.TYPE` for a data
    /// source.
    pub(crate) fn key(mode: crate::addr::Mode, type_: &str) -> String {
        match mode {
            crate::addr::Mode::Managed => type_.to_string(),
            crate::addr::Mode::Data => format!("data.{type_}"),
            crate::addr::Mode::Ephemeral => format!("ephemeral.{type_}"),
        }
    }
}

impl Plan {
    /// How many objects the plan imports (the summary's "N to import").
    pub(crate) fn imports(&self) -> usize {
        self.changes
            .iter()
            .filter(|c| c.importing.is_some())
            .count()
    }
    /// Counts for the summary line: (add, change, destroy).
    pub fn counts(&self) -> (usize, usize, usize) {
        let mut c = (0, 0, 0);
        for ch in &self.changes {
            match ch.action {
                Action::Create => c.0 += 1,
                Action::Update => c.1 += 1,
                Action::Delete => c.2 += 1,
                Action::DeleteThenCreate | Action::CreateThenDelete => {
                    c.0 += 1;
                    c.2 += 1
                }
                Action::NoOp | Action::Read | Action::Forget => {}
            }
        }
        c
    }
    /// Where each moved object was in the prior state (the start of its chain), by where it
    /// ends up. A destroy plan says none (it destroys the objects where they end up), as
    /// Terraform's does.
    pub(crate) fn moved_from(&self) -> BTreeMap<&ResourceInstanceAddr, &ResourceInstanceAddr> {
        let mut out: BTreeMap<&ResourceInstanceAddr, &ResourceInstanceAddr> = BTreeMap::new();
        if self.mode == PlanMode::Destroy {
            return out;
        }
        for (from, to) in &self.moves {
            // A chain: the object at `from` came from further back.
            let origin = out.remove(from).unwrap_or(from);
            out.insert(to, origin);
        }
        out
    }
    /// True when the plan proposes any managed change or output change.
    pub fn has_changes(&self) -> bool {
        !self.moves.is_empty()
            || self
                .changes
                .iter()
                .any(|c| c.action != Action::NoOp || c.importing.is_some())
            || self.outputs.iter().any(|o| o.action != Action::NoOp)
            || self
                .provider_changes
                .iter()
                .any(|p| p.action != Action::NoOp)
    }
}
