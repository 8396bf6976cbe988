//! The values of evaluated terms, per module *instance*, and the `Scope` that expressions are
//! evaluated in.
//!
//! Graph nodes are static terms (a module path without keys); a node is evaluated once for each
//! instance of its module, and a resource node once for each of its own instances. This store
//! holds the results so that later nodes can refer to them. It is shared by the walk's tasks
//! behind a `RwLock`: readers build a scope and evaluate, writers store one term's result.

use crate::addr::{InstanceKey, Mode, ModulePath};
use crate::diag::FileId;
use crate::eval::{Scope, ScopeError, Subject};
use crate::value::ValueMap;
use crate::value::{Type, Value};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// How a resource or module call expands into instances.
#[derive(Clone, Debug, PartialEq)]
pub enum Expansion {
    /// No `count` or `for_each`: one instance, no key.
    Single,
    /// `count = N`: keys 0..N.
    Count(usize),
    /// `for_each`: keys and their `each.value`.
    ForEach(ValueMap),
    /// `for_each` over open values (`inspect`, e.g. `for_each = aws_subnet.private`):
    /// as `ForEach`, and `each.value` is open (`Scope::is_open`).
    ForEachOpen(ValueMap),
    /// `count` or `for_each` not known (or failed) in `inspect`: one instance, without a key,
    /// whose `count.index` / `each.*` are unknown; references to the whole are unknown.
    Unknown,
}

impl Expansion {
    /// The instance keys, in order.
    pub fn keys(&self) -> Vec<Option<InstanceKey>> {
        match self {
            Expansion::Single | Expansion::Unknown => vec![None],
            Expansion::Count(n) => (0..*n as i64).map(|i| Some(InstanceKey::Int(i))).collect(),
            Expansion::ForEach(m) | Expansion::ForEachOpen(m) => m
                .keys()
                .map(|k| Some(InstanceKey::Str(k.clone())))
                .collect(),
        }
    }
    /// The `count.index` / `each.*` context of one instance.
    pub fn repetition(&self, key: &Option<InstanceKey>) -> Repetition {
        match (self, key) {
            (Expansion::Count(_), Some(InstanceKey::Int(i))) => Repetition::Count(*i),
            (Expansion::ForEach(m), Some(InstanceKey::Str(k))) => {
                Repetition::Each(k.clone(), m.get(k).cloned().unwrap_or_else(Value::null))
            }
            (Expansion::ForEachOpen(m), Some(InstanceKey::Str(k))) => {
                Repetition::EachOpen(k.clone(), m.get(k).cloned().unwrap_or_else(Value::null))
            }
            (Expansion::Unknown, _) => Repetition::Unknown,
            _ => Repetition::None,
        }
    }
}

/// The `count.index` or `each.key`/`each.value` in force while evaluating one instance.
#[derive(Clone, Debug, PartialEq)]
pub enum Repetition {
    None,
    Count(i64),
    Each(String, Value),
    /// An instance of unknown expansion: `count.index`, `each.key` and `each.value` unknown.
    Unknown,
    /// `Each` whose `each.value` is open (`Expansion::ForEachOpen`).
    EachOpen(String, Value),
}

/// A resource's (or data source's) instances and their values.
#[derive(Clone, Debug)]
pub struct ResourceValues {
    pub expansion: Expansion,
    pub instances: InstanceValues,
    /// Evaluated without a schema (`inspect` of a provider Cairn does not have): its values
    /// hold only what the configuration wrote, so they are open (`Scope::is_open`).
    pub schemaless: bool,
}

impl ResourceValues {
    /// The value a reference to the whole resource sees: an object, or a tuple (count) / object
    /// (for_each) of instance objects.
    pub fn value(&self) -> Value {
        match &self.expansion {
            Expansion::Single => self
                .instances
                .get(&None)
                .cloned()
                .unwrap_or_else(Value::unknown),
            Expansion::Unknown => Value::unknown(),
            Expansion::Count(_) => Value::Tuple(self.instances.values().cloned().collect()),
            Expansion::ForEach(_) | Expansion::ForEachOpen(_) => Value::Object(
                self.instances
                    .iter()
                    .filter_map(|(k, v)| match k {
                        Some(InstanceKey::Str(s)) => Some((s.clone(), v.clone())),
                        _ => None,
                    })
                    .collect(),
            ),
        }
    }
}

/// A resource's instance values in key order. A sorted vector, not a `BTreeMap`: nearly every
/// resource has one instance, and a map's node holds room for eleven (about 1 KiB per resource,
/// 10 MiB of `inspect`'s 10,000).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct InstanceValues(Vec<(Option<InstanceKey>, Value)>);

impl InstanceValues {
    pub fn new() -> Self {
        Self(Vec::new())
    }
    /// From pairs in any order; of two with one key, the later is kept (as a map's insert).
    pub fn from_pairs(mut pairs: Vec<(Option<InstanceKey>, Value)>) -> Self {
        pairs.reverse();
        // Stable: of equal keys the later pair (first after the reversal) comes first.
        pairs.sort_by(|a, b| a.0.cmp(&b.0));
        pairs.dedup_by(|later, earlier| later.0 == earlier.0);
        pairs.shrink_to_fit();
        Self(pairs)
    }
    pub fn len(&self) -> usize {
        self.0.len()
    }
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
    fn find(&self, key: &Option<InstanceKey>) -> Result<usize, usize> {
        self.0.binary_search_by(|(k, _)| k.cmp(key))
    }
    /// Sets an instance's value, replacing the one it had.
    pub fn insert(&mut self, key: Option<InstanceKey>, value: Value) {
        match self.find(&key) {
            Ok(i) => self.0[i].1 = value,
            Err(i) => self.0.insert(i, (key, value)),
        }
    }
    pub fn get(&self, key: &Option<InstanceKey>) -> Option<&Value> {
        self.find(key).ok().map(|i| &self.0[i].1)
    }
    pub fn get_mut(&mut self, key: &Option<InstanceKey>) -> Option<&mut Value> {
        self.find(key).ok().map(|i| &mut self.0[i].1)
    }
    pub fn iter(&self) -> impl Iterator<Item = (&Option<InstanceKey>, &Value)> {
        self.0.iter().map(|(k, v)| (k, v))
    }
    pub fn keys(&self) -> impl Iterator<Item = &Option<InstanceKey>> {
        self.0.iter().map(|(k, _)| k)
    }
    pub fn values(&self) -> impl Iterator<Item = &Value> {
        self.0.iter().map(|(_, v)| v)
    }
}

/// Key of a resource inside one module instance.
pub(crate) type ResourceKey = (Mode, String, String);

/// Every evaluated value, by module instance.
#[derive(Debug, Default)]
pub struct Values {
    pub vars: HashMap<ModulePath, ValueMap>,
    pub locals: HashMap<ModulePath, ValueMap>,
    pub outputs: HashMap<ModulePath, ValueMap>,
    pub resources: HashMap<ModulePath, HashMap<ResourceKey, ResourceValues>>,
    /// Module call expansions: (parent instance, call name) → expansion.
    pub calls: HashMap<(ModulePath, String), Expansion>,
    /// Static module path → its instances.
    pub module_instances: HashMap<ModulePath, Vec<ModulePath>>,
    /// Static paths of child modules whose source could not be loaded (`inspect` goes on
    /// without them): their calls' outputs are unknown.
    pub unavailable: std::collections::HashSet<ModulePath>,
    /// Terms whose values derive from open values (`Scope::is_open`), by module instance:
    /// `local.NAME`, `var.NAME` and `module.NAME` (`inspect` only). A traversal from one of
    /// them treats a missing attribute as unknown, as it would on the resource itself.
    pub open: std::collections::HashSet<(ModulePath, String)>,
    /// `terraform.workspace` when one is selected (`inspect`: `TF_WORKSPACE` or
    /// `.terraform/environment`, as Terraform); `default` otherwise.
    pub workspace: Option<String>,
    /// The providers' functions (`provider::NAME::FUNC`): the run's registry.
    pub functions: Option<Functions>,
    /// Ephemeral terms by static module: `var.NAME`, `local.NAME`, `module.CALL.OUTPUT`
    /// (`config::ephemeral_terms`); with ephemeral resources, what `ephemeralasnull` nulls.
    pub ephemeral: std::collections::HashSet<(ModulePath, String)>,
}

/// The providers' functions, as `Values` holds them.
#[derive(Clone)]
pub struct Functions(pub std::sync::Arc<dyn crate::eval::ProviderFunctions>);

impl std::fmt::Debug for Functions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Functions")
    }
}

impl Values {
    pub fn new() -> Self {
        let mut v = Values::default();
        v.module_instances
            .insert(ModulePath::root(), vec![ModulePath::root()]);
        v
    }

    /// The instances of a static module path (empty until its call is expanded).
    pub fn instances_of(&self, module: &ModulePath) -> Vec<ModulePath> {
        self.module_instances
            .get(module)
            .cloned()
            .unwrap_or_default()
    }

    pub fn set_var(&mut self, module: &ModulePath, name: &str, v: Value) {
        self.vars
            .entry(module.clone())
            .or_default()
            .insert(name.to_string(), v);
    }
    pub fn set_local(&mut self, module: &ModulePath, name: &str, v: Value) {
        self.locals
            .entry(module.clone())
            .or_default()
            .insert(name.to_string(), v);
    }
    pub fn set_output(&mut self, module: &ModulePath, name: &str, v: Value) {
        self.outputs
            .entry(module.clone())
            .or_default()
            .insert(name.to_string(), v);
    }
    pub fn set_resource(&mut self, module: &ModulePath, key: ResourceKey, values: ResourceValues) {
        self.resources
            .entry(module.clone())
            .or_default()
            .insert(key, values);
    }
    pub fn resource(&self, module: &ModulePath, key: &ResourceKey) -> Option<&ResourceValues> {
        self.resources.get(module).and_then(|m| m.get(key))
    }

    /// Records a module call's expansion and the child instances it creates.
    pub fn set_call(&mut self, parent: &ModulePath, name: &str, expansion: Expansion) {
        let static_child = parent.without_keys().child(name, None);
        let children = self.module_instances.entry(static_child).or_default();
        for key in expansion.keys() {
            let child = parent.child(name, key);
            if !children.contains(&child) {
                children.push(child);
            }
        }
        children.sort();
        self.calls
            .insert((parent.clone(), name.to_string()), expansion);
    }

    /// The value of `module.NAME` seen from `parent`.
    fn call_value(&self, parent: &ModulePath, name: &str) -> Option<Value> {
        let expansion = self.calls.get(&(parent.clone(), name.to_string()))?;
        if self
            .unavailable
            .contains(&parent.without_keys().child(name, None))
        {
            return Some(Value::unknown());
        }
        let outputs_of = |key: Option<InstanceKey>| {
            let child = parent.child(name, key);
            Value::Object(self.outputs.get(&child).cloned().unwrap_or_default())
        };
        Some(match expansion {
            Expansion::Single => outputs_of(None),
            Expansion::Unknown => Value::unknown(),
            Expansion::Count(_) => {
                Value::Tuple(expansion.keys().into_iter().map(outputs_of).collect())
            }
            Expansion::ForEach(m) | Expansion::ForEachOpen(m) => Value::Object(
                m.keys()
                    .map(|k| (k.clone(), outputs_of(Some(InstanceKey::Str(k.clone())))))
                    .collect(),
            ),
        })
    }
}

/// Where a module instance's files live, for `path.*` and the filesystem functions.
#[derive(Clone, Debug)]
pub(crate) struct Paths {
    /// `path.module` as Terraform shows it: relative to the working directory (`.` for root).
    pub module_rel: String,
    pub module_dir: PathBuf,
    pub root_dir: PathBuf,
    pub cwd: PathBuf,
}

/// The scope of one evaluation: a module instance, its repetition, and the values so far.
pub(crate) struct InstanceScope<'a> {
    pub values: &'a Values,
    pub module: &'a ModulePath,
    pub repetition: &'a Repetition,
    pub file: FileId,
    pub paths: &'a Paths,
}

impl Scope for InstanceScope<'_> {
    fn provider_functions(&self) -> Option<&dyn crate::eval::ProviderFunctions> {
        self.values.functions.as_ref().map(|f| &*f.0)
    }

    fn resolve(&self, subject: &Subject) -> Result<Value, ScopeError> {
        let v = self.values;
        match subject {
            Subject::Var(name) => v.vars.get(self.module).and_then(|m| m.get(name)).cloned().ok_or_else(|| {
                ScopeError::new(
                    "Reference to undeclared input variable",
                    format!("An input variable with the name {name:?} has not been declared."),
                )
            }),
            Subject::Local(name) => {
                v.locals.get(self.module).and_then(|m| m.get(name)).cloned().ok_or_else(|| {
                    ScopeError::new(
                        "Reference to undeclared local value",
                        format!("A local value with the name {name:?} has not been declared."),
                    )
                })
            }
            Subject::ModuleCall { name, .. } => v.call_value(self.module, name).ok_or_else(|| {
                ScopeError::new(
                    "Reference to undeclared module",
                    format!("No module call named {name:?} is declared in this module."),
                )
            }),
            Subject::Resource { mode, type_, name } => v
                .resource(self.module, &(*mode, type_.clone(), name.clone()))
                .map(ResourceValues::value)
                .ok_or_else(|| {
                    let what = if *mode == Mode::Data { "data resource" } else { "resource" };
                    let prefix = if *mode == Mode::Data { "data." } else { "" };
                    ScopeError::new(
                        format!("Reference to undeclared {what}"),
                        format!("A {what} \"{type_}\" \"{name}\" has not been declared in this module (referenced as {prefix}{type_}.{name})."),
                    )
                }),
            Subject::CountIndex => match self.repetition {
                Repetition::Count(i) => Ok(Value::int(*i)),
                Repetition::Unknown => Ok(Value::Unknown(Type::Number)),
                _ => Err(ScopeError::new(
                    "Reference to \"count\" in non-counted context",
                    "The \"count\" object can only be used in \"module\", \"resource\", and \"data\" blocks, and only when the \"count\" argument is set.",
                )),
            },
            Subject::EachKey | Subject::EachValue => match self.repetition {
                Repetition::Each(k, val) | Repetition::EachOpen(k, val) => {
                    Ok(if *subject == Subject::EachKey { Value::string(k.clone()) } else { val.clone() })
                }
                Repetition::Unknown => Ok(if *subject == Subject::EachKey { Value::Unknown(Type::String) } else { Value::unknown() }),
                _ => Err(ScopeError::new(
                    "Reference to \"each\" in context without for_each",
                    "The \"each\" object can be used only in \"module\" or \"resource\" blocks, and only when the \"for_each\" argument is set.",
                )),
            },
            Subject::SelfRef => Err(ScopeError::new(
                "Invalid \"self\" reference",
                "The \"self\" object is not available in this context.",
            )),
            Subject::Path(which) => match which.as_str() {
                "module" => Ok(Value::string(self.paths.module_rel.clone())),
                "root" => Ok(Value::string(".")),
                "cwd" => Ok(Value::string(self.paths.cwd.display().to_string())),
                other => Err(ScopeError::new(
                    "Invalid \"path\" attribute",
                    format!("The \"path\" object has no attribute named {other:?}. Use path.module, path.root or path.cwd."),
                )),
            },
            Subject::Terraform(which) => match which.as_str() {
                "workspace" => Ok(Value::string(v.workspace.as_deref().unwrap_or("default"))),
                other => Err(ScopeError::new(
                    "Invalid \"terraform\" attribute",
                    format!("The \"terraform\" object has no attribute named {other:?}. The only supported attribute is terraform.workspace."),
                )),
            },
        }
    }

    fn file(&self) -> FileId {
        self.file
    }
    fn module_dir(&self) -> &Path {
        &self.paths.module_dir
    }
    fn root_dir(&self) -> &Path {
        &self.paths.root_dir
    }
    fn is_ephemeral(&self, subject: &Subject) -> bool {
        let term = match subject {
            Subject::Resource { mode, .. } => return *mode == crate::addr::Mode::Ephemeral,
            _ if self.values.ephemeral.is_empty() => return false,
            Subject::Var(n) => format!("var.{n}"),
            Subject::Local(n) => format!("local.{n}"),
            Subject::ModuleCall {
                name,
                output: Some(o),
            } => format!("module.{name}.{o}"),
            Subject::ModuleCall { name, output: None } => {
                let prefix = format!("module.{name}.");
                let m = self.module.without_keys();
                return self
                    .values
                    .ephemeral
                    .iter()
                    .any(|(p, t)| *p == m && t.starts_with(&prefix));
            }
            _ => return false,
        };
        self.values
            .ephemeral
            .contains(&(self.module.without_keys(), term))
    }
    fn is_open(&self, subject: &Subject) -> bool {
        // Most configurations have no open terms at all: then no key is built.
        let derived = |term: String| self.values.open.contains(&(self.module.clone(), term));
        match subject {
            Subject::Resource { mode, type_, name } => self
                .values
                .resource(self.module, &(*mode, type_.clone(), name.clone()))
                .is_some_and(|r| r.schemaless),
            Subject::EachValue => matches!(self.repetition, Repetition::EachOpen(..)),
            Subject::Local(n) => !self.values.open.is_empty() && derived(format!("local.{n}")),
            Subject::Var(n) => !self.values.open.is_empty() && derived(format!("var.{n}")),
            Subject::ModuleCall { name, .. } => {
                !self.values.open.is_empty() && derived(format!("module.{name}"))
            }
            _ => false,
        }
    }
}
