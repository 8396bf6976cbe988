//! The shared vocabulary of schemas: what every layer above values says about the shape of a
//! configuration block and of a provider's functions, without knowing any provider.
//!
//! `config` (validation, spans), `eval` (bodies against a schema, provider-defined function
//! calls), `plan` (block shapes) and `provider` (the schemas providers publish) all speak these
//! types; they sit below all of them (ARCHITECTURE.md, "Layers").
//!
//! - `Block`, `Attribute`, `NestedBlock`, `Nesting`: a configuration block's schema;
//!   `ProviderSchema`: a provider package's blocks.
//! - `FunctionSig`, `FunctionParam`, `FunctionFailure`: provider-defined functions
//!   (`provider::NAME::FUNC`).
//! - `PathStep`, `path_text`: an attribute path inside a block, as Terraform prints it.

use crate::addr::Mode;
use crate::value::Type;
use std::collections::BTreeMap;

/// One attribute of a schema block.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Attribute {
    pub(crate) ty: Type,
    pub(crate) required: bool,
    pub(crate) optional: bool,
    pub(crate) computed: bool,
    /// A change to this attribute replaces the object.
    pub(crate) force_new: bool,
    pub(crate) sensitive: bool,
    /// Terraform 1.11's write-only attribute: given in the configuration (an ephemeral value
    /// may go there), sent to the provider at plan and apply, never stored (null in state
    /// and plan).
    pub(crate) write_only: bool,
    pub(crate) description: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Nesting {
    Single,
    List,
    Set,
    /// Labelled blocks (`rule "web" { … }`): a map from each block's one label to its object
    /// (plugin schemas' `MAP` nesting).
    Map,
}

/// A nested block type inside a schema block (`dynamic` blocks generate these).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct NestedBlock {
    pub(crate) nesting: Nesting,
    pub(crate) block: Block,
    pub(crate) min_items: usize,
    pub(crate) max_items: Option<usize>,
}

/// The schema of a configuration block: a provider's, a resource type's or a data source's.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Block {
    pub(crate) attributes: BTreeMap<String, Attribute>,
    pub(crate) blocks: BTreeMap<String, NestedBlock>,
    pub(crate) description: String,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct ProviderSchema {
    pub(crate) provider: Block,
    pub(crate) resources: BTreeMap<String, Block>,
    pub(crate) data_sources: BTreeMap<String, Block>,
    /// `ephemeral "TYPE" "NAME"` blocks: opened each run, never stored.
    pub(crate) ephemeral_resources: BTreeMap<String, Block>,
}

impl ProviderSchema {
    pub(crate) fn block(&self, mode: Mode, type_: &str) -> Option<&Block> {
        match mode {
            Mode::Managed => self.resources.get(type_),
            Mode::Data => self.data_sources.get(type_),
            Mode::Ephemeral => self.ephemeral_resources.get(type_),
        }
    }
}

// ------------------------------------------------------------------------------------------
// Provider-defined functions.

/// A provider-defined function's signature (`provider::NAME::FUNC`).
#[derive(Clone, Debug, PartialEq)]
pub struct FunctionSig {
    pub(crate) params: Vec<FunctionParam>,
    /// Zero or more further arguments of this parameter's type.
    pub(crate) variadic: Option<FunctionParam>,
    pub(crate) ret: Type,
    pub(crate) summary: String,
}

#[derive(Clone, Debug, PartialEq)]
pub(crate) struct FunctionParam {
    pub(crate) name: String,
    pub(crate) ty: Type,
    pub(crate) allow_null: bool,
    /// False: an unknown argument makes the result unknown without a call.
    pub(crate) allow_unknown: bool,
}

/// A provider-defined function's failure: the provider's text, and the argument it blames.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FunctionFailure {
    pub(crate) arg: Option<usize>,
    pub(crate) message: String,
}

// ------------------------------------------------------------------------------------------
// Attribute paths.

/// One step of an attribute path in a provider diagnostic.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum PathStep {
    /// An attribute or nested block type.
    Attr(String),
    /// A map key, or the label of a map block.
    Key(String),
    /// A list index.
    Index(i64),
}

/// A path as Terraform prints it: `rule[0].port`, `tags["k"]`.
pub(crate) fn path_text(path: &[PathStep]) -> String {
    let mut out = String::new();
    for s in path {
        match s {
            PathStep::Attr(n) => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(n);
            }
            PathStep::Key(k) => out.push_str(&format!("[{k:?}]")),
            PathStep::Index(i) => out.push_str(&format!("[{i}]")),
        }
    }
    out
}
