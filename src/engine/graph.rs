//! The term graph: one node per static term of the configuration (resources, data sources,
//! locals, variables, outputs, module calls, provider instances) plus, for plan and apply, the
//! instances in state that the configuration no longer has.
//!
//! Built by an ordered list of named steps, as Terraform's transformers are (an apply adds
//! its `Destroy` nodes and their ordering by the named steps of `apply/order.rs`). Edges point
//! from a node to what it depends on and carry their kind and the span that caused them, so a
//! cycle is reported with the `file:line:col` of every step.

use crate::addr::{Mode, ModulePath, ProviderAddr, ResourceInstanceAddr};
use crate::config::{Config, DependsOn, Module, ResourceKey};
use crate::diag::{Diagnostic, Diagnostics, SourceMap, Span};
use crate::eval::refs::{body_references, references};
use crate::eval::{Reference, Subject};
use cairn_graph::{Dag, DotNode, NodeId};
use hcl_edit::expr::Expression;
use rustc_hash::FxHashMap;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

/// A static term of the configuration (module paths here have no instance keys).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum Node {
    Var {
        module: ModulePath,
        name: String,
    },
    Local {
        module: ModulePath,
        name: String,
    },
    Output {
        module: ModulePath,
        name: String,
    },
    /// A `check` block: its assertions, evaluated at plan and apply (failures are warnings).
    Check {
        module: ModulePath,
        name: String,
    },
    Resource {
        module: ModulePath,
        key: ResourceKey,
    },
    /// A module call: evaluates its `count`/`for_each` into the child's instances.
    Call {
        module: ModulePath,
        name: String,
    },
    // The addresses below are boxed: inline, the largest made every node (one per resource
    // of the configuration) 136 bytes instead of 88 (issue 31).
    Provider {
        addr: Box<ProviderAddr>,
    },
    /// An instance in state that the configuration no longer has (plan: delete / drop).
    Orphan {
        addr: Box<ResourceInstanceAddr>,
    },
    /// Apply only: delete one object (an orphan, the old half of a replacement, or a deposed
    /// object), in reverse dependency order.
    Destroy {
        addr: Box<ResourceInstanceAddr>,
        deposed: Option<String>,
    },
}

impl Node {
    /// The resource block node of an instance (module instance keys dropped).
    pub(crate) fn of_instance(addr: &ResourceInstanceAddr) -> Node {
        Node::Resource {
            module: addr.resource.module.without_keys(),
            key: ResourceKey {
                mode: addr.resource.mode,
                type_: addr.resource.type_.clone(),
                name: addr.resource.name.clone(),
            },
        }
    }

    /// The module the node lives in (for a call: the calling module).
    pub(crate) fn module(&self) -> &ModulePath {
        match self {
            Node::Var { module, .. }
            | Node::Local { module, .. }
            | Node::Output { module, .. }
            | Node::Check { module, .. }
            | Node::Resource { module, .. }
            | Node::Call { module, .. } => module,
            Node::Provider { addr } => &addr.module,
            Node::Orphan { addr } | Node::Destroy { addr, .. } => &addr.resource.module,
        }
    }
}

impl fmt::Display for Node {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let prefix = |m: &ModulePath| {
            if m.is_root() {
                String::new()
            } else {
                format!("{m}.")
            }
        };
        match self {
            Node::Var { module, name } => write!(f, "{}var.{name}", prefix(module)),
            Node::Local { module, name } => write!(f, "{}local.{name}", prefix(module)),
            Node::Output { module, name } => write!(f, "{}output.{name}", prefix(module)),
            Node::Check { module, name } => write!(f, "{}check.{name}", prefix(module)),
            Node::Resource { module, key } => write!(f, "{}", key.addr(module.clone())),
            Node::Call { module, name } => write!(f, "{}module.{name}", prefix(module)),
            Node::Provider { addr } => write!(f, "{addr}"),
            Node::Orphan { addr } => write!(f, "{addr} (orphan)"),
            Node::Destroy {
                addr,
                deposed: None,
            } => write!(f, "{addr} (destroy)"),
            Node::Destroy {
                addr,
                deposed: Some(k),
            } => write!(f, "{addr} (destroy deposed {k})"),
        }
    }
}

/// Why an edge exists.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum EdgeKind {
    /// An expression refers to the target.
    Reference,
    /// `depends_on` names the target (or a module containing it).
    DependsOn,
    /// A child module's variable takes its value from the call's argument.
    ModuleInput,
    /// Everything in a child module waits for the call to be expanded.
    Expansion,
    /// A resource needs its provider instance.
    Provider,
}

/// The term graph with what caused each edge.
///
/// The maps hash with rustc's Fx hash rather than SipHash: their keys are our own terms (no
/// untrusted input chooses them to collide), and a large configuration looks them up hundreds
/// of thousands of times while the graph is built and walked.
pub(crate) struct TermGraph {
    pub dag: Dag<Node>,
    /// Each node's id, found by the node: a table of ids hashed by the node each names in
    /// `dag`, so a node is stored once (as a map's key too it cost about 190 bytes per
    /// resource at 100,000; issue 31). See [`TermGraph::id`] and [`TermGraph::add`].
    index: hashbrown::HashTable<NodeId>,
    /// (from, to) → kind and the span of the reference that caused it.
    pub edges: FxHashMap<(NodeId, NodeId), (EdgeKind, Option<Span>)>,
    /// The provider instance each resource (static) uses; for an aliased block with
    /// `for_each`, the block (no key): `provider_key` says where its instance key comes from.
    /// (By node: a resource's node to its provider's, whose `Node::Provider` holds the
    /// address. Not keyed by module and resource key with the address beside it: that map
    /// cost about 230 bytes per resource; see `provider_of`.)
    provider_nodes: FxHashMap<NodeId, NodeId>,
    /// The instance key expression of a resource's provider, when its provider block has
    /// `for_each` (OpenTofu's provider iteration).
    pub provider_key: FxHashMap<(ModulePath, ResourceKey), ProviderKeyAt>,
}

/// Where the instance key of a provider reference is written and evaluated:
/// `provider = sim.by_region[each.key]` in the resource itself (`levels_up` 0: evaluated in the
/// resource instance, with its `count.index`/`each`), or in the `providers` map of a module
/// call `levels_up` levels above the resource's module (evaluated in the calling module
/// instance, with the `each`/`count.index` of the call instance the resource is inside).
#[derive(Clone, Debug)]
pub(crate) struct ProviderKeyAt {
    pub expr: Expression,
    pub levels_up: usize,
    pub span: Span,
}

/// A node's hash in the term graph's index.
fn node_hash(node: &Node) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = rustc_hash::FxHasher::default();
    node.hash(&mut h);
    h.finish()
}

impl TermGraph {
    /// A graph with no nodes (destroy runs add only their deletes).
    pub(crate) fn empty() -> Self {
        TermGraph::new()
    }

    fn new() -> Self {
        TermGraph {
            dag: Dag::new(),
            index: hashbrown::HashTable::new(),
            edges: FxHashMap::default(),
            provider_nodes: FxHashMap::default(),
            provider_key: FxHashMap::default(),
        }
    }

    /// The provider instance a resource (static) uses: for an aliased block with `for_each`,
    /// the block (no key), and `provider_key` says where its instance key comes from.
    pub(crate) fn provider_of(
        &self,
        module: &ModulePath,
        key: &ResourceKey,
    ) -> Option<&ProviderAddr> {
        let r = self.id(&Node::Resource {
            module: module.clone(),
            key: key.clone(),
        })?;
        self.provider_nodes.get(&r).map(|p| self.provider_addr(*p))
    }

    /// Every resource's provider address (one per resource that has one).
    pub(crate) fn providers_of_resources(&self) -> impl Iterator<Item = &ProviderAddr> {
        self.provider_nodes.values().map(|p| self.provider_addr(*p))
    }

    fn provider_addr(&self, id: NodeId) -> &ProviderAddr {
        match self.dag.node(id) {
            Node::Provider { addr } => addr,
            other => unreachable!("a resource's provider node is a provider: {other:?}"),
        }
    }

    pub(crate) fn node(&self, id: NodeId) -> &Node {
        self.dag.node(id)
    }

    pub(crate) fn id(&self, node: &Node) -> Option<NodeId> {
        self.index
            .find(node_hash(node), |&id| self.dag.node(id) == node)
            .copied()
    }

    /// The node of a provider instance: its own, or its block's when the block has
    /// `for_each` (one node configures every instance of it).
    pub(crate) fn provider_node(&self, addr: &ProviderAddr) -> Option<NodeId> {
        self.id(&Node::Provider {
            addr: Box::new(addr.clone()),
        })
        .or_else(|| {
            addr.key.as_ref()?;
            self.id(&Node::Provider {
                addr: Box::new(addr.config_addr()),
            })
        })
    }

    pub(crate) fn add(&mut self, node: Node) -> NodeId {
        let hash = node_hash(&node);
        if let Some(&id) = self.index.find(hash, |&id| self.dag.node(id) == &node) {
            return id;
        }
        let id = self.dag.add_node(node);
        let dag = &self.dag;
        self.index
            .insert_unique(hash, id, |&id| node_hash(dag.node(id)));
        id
    }

    /// Room for `n` more nodes in the index.
    fn reserve(&mut self, n: usize) {
        let dag = &self.dag;
        self.index.reserve(n, |&id| node_hash(dag.node(id)));
    }

    pub(crate) fn edge(&mut self, from: NodeId, to: NodeId, kind: EdgeKind, span: Option<Span>) {
        if from == to && kind != EdgeKind::Reference {
            return;
        }
        self.dag.add_edge(from, to);
        // Keep the most specific reason: a reference beats an expansion edge for messages.
        let entry = self.edges.entry((from, to)).or_insert((kind, span));
        if entry.0 > kind {
            *entry = (kind, span);
        }
    }

    /// The kind of the edge `from → to`.
    pub(crate) fn edge_kind(&self, from: NodeId, to: NodeId) -> Option<EdgeKind> {
        self.edges.get(&(from, to)).map(|e| e.0)
    }

    /// The graph as DOT, with resources, data sources, providers and modules distinct.
    pub(crate) fn to_dot(&self, marked: &BTreeSet<NodeId>) -> String {
        self.dag.to_dot(|n: &Node| {
            let cluster = if n.module().is_root() {
                None
            } else {
                Some(n.module().to_string())
            };
            let (shape, style, color) = match n {
                Node::Resource { key, .. } if key.mode == Mode::Data => {
                    ("note", "filled", "lightblue")
                }
                Node::Resource { .. } => ("box", "filled", "palegreen"),
                Node::Orphan { .. } | Node::Destroy { .. } => ("box", "dashed", "gray"),
                Node::Provider { .. } => ("diamond", "filled", "khaki"),
                Node::Call { .. } => ("folder", "filled", "plum"),
                Node::Output { .. } | Node::Check { .. } => ("cds", "solid", "black"),
                Node::Var { .. } | Node::Local { .. } => ("ellipse", "solid", "black"),
            };
            let mut label = n.to_string();
            if let Some(id) = self.id(n) {
                if marked.contains(&id) {
                    label.push_str("\n(read during apply)");
                }
            }
            DotNode {
                label,
                shape: Some(shape.into()),
                style: Some(style.into()),
                color: Some(color.into()),
                cluster,
            }
        })
    }

    /// The graph reduced to resources and data sources, as a plan records it
    /// ([`cairn_state::PlanGraph`]) and the UI draws it: an edge `a → b` when `a` reaches `b`
    /// through locals, variables, outputs and module calls (provider instances are not
    /// followed: they are not data flow). Orphans and deletes are not terms of the
    /// configuration and are left out.
    pub(crate) fn resource_graph(&self) -> cairn_state::PlanGraph {
        // The resource nodes in address order; each node's index in the record, by node id.
        let mut named: Vec<(String, NodeId)> = self
            .dag
            .nodes()
            .filter_map(|(id, n)| match n {
                Node::Resource { module, key } => Some((key.addr(module.clone()).to_string(), id)),
                _ => None,
            })
            .collect();
        named.sort_unstable();
        let mut index: Vec<u32> = Vec::new();
        for (i, (_, id)) in named.iter().enumerate() {
            let at = id.index();
            if index.len() <= at {
                index.resize(at + 1, u32::MAX);
            }
            index[at] = i as u32;
        }
        let mut edges = Vec::new();
        // Visited marks, by node id, stamped with the resource being followed (no clearing).
        let mut seen: Vec<u32> = Vec::new();
        let mut stack: Vec<NodeId> = Vec::new();
        for (from, (_, id)) in named.iter().enumerate() {
            let from = from as u32;
            stack.clear();
            stack.extend(self.dag.dependencies(*id));
            while let Some(n) = stack.pop() {
                let at = n.index();
                if seen.len() <= at {
                    seen.resize(at + 1, u32::MAX);
                }
                if seen[at] == from {
                    continue;
                }
                seen[at] = from;
                match self.node(n) {
                    Node::Resource { .. } => {
                        let to = index[at];
                        if to != from {
                            edges.push((from, to));
                        }
                    }
                    Node::Provider { .. } => {}
                    _ => stack.extend(self.dag.dependencies(n)),
                }
            }
        }
        edges.sort_unstable();
        edges.dedup();
        cairn_state::PlanGraph {
            nodes: named.into_iter().map(|(n, _)| n).collect(),
            edges,
        }
    }

    /// Every cycle, as diagnostics naming each step with its location.
    pub(crate) fn cycle_diagnostics(&self, sources: &SourceMap) -> Diagnostics {
        let mut diags = Diagnostics::new();
        for cycle in self.dag.cycles() {
            // A local that refers to itself gets Terraform's own words.
            if let [a, b] = cycle[..] {
                if a == b && matches!(self.node(a), Node::Local { .. }) {
                    let span = self.edges.get(&(a, a)).and_then(|e| e.1);
                    diags.push(
                        Diagnostic::error(
                            "Self-referencing local value",
                            format!(
                                "Local value {} cannot use its own result as part of its \
                                 expression.",
                                self.node(a)
                            ),
                        )
                        .with_span(span),
                    );
                    continue;
                }
            }
            let names: Vec<String> = cycle.iter().map(|id| self.node(*id).to_string()).collect();
            let mut detail = format!("The configuration has a cycle: {}.\n", names.join(" → "));
            detail.push_str("Each step of the cycle:\n");
            let mut first_span = None;
            for pair in cycle.windows(2) {
                let (from, to) = (pair[0], pair[1]);
                let (kind, span) = self
                    .edges
                    .get(&(from, to))
                    .cloned()
                    .unwrap_or((EdgeKind::Reference, None));
                let why = match kind {
                    EdgeKind::Reference => "refers to",
                    EdgeKind::DependsOn => "depends_on",
                    EdgeKind::ModuleInput => "takes its value from",
                    EdgeKind::Expansion => "is inside",
                    EdgeKind::Provider => "uses provider",
                };
                let at = span
                    .map(|s| format!(" ({})", sources.location(s)))
                    .unwrap_or_default();
                detail.push_str(&format!(
                    "  {} {why} {}{at}\n",
                    self.node(from),
                    self.node(to)
                ));
                first_span = first_span.or(span);
            }
            detail.push_str("Break the cycle by removing one of these references.");
            diags.push(
                Diagnostic::error("Cycle in the configuration", detail).with_span(first_span),
            );
        }
        diags
    }
}

/// Resolves a resource's (or data source's) provider instance, passing providers down into
/// modules as Terraform does: the module's own `provider "x"` block without alias if it has
/// one; else what the call's `providers` map gives; else (no alias) the parent's default.
/// `key` is the instance key expression of the reference (`sim.by_region[each.key]`), which
/// a block with `for_each` needs and any other block refuses; the answer says where it is
/// evaluated.
pub(crate) fn resolve_provider(
    config: &Config,
    module: &ModulePath,
    name: &str,
    alias: Option<&str>,
    package: &str,
    key: Option<(&Expression, Span)>,
) -> Result<(ProviderAddr, Option<ProviderKeyAt>), String> {
    resolve_provider_at(config, module, name, alias, package, key, 0)
}

fn resolve_provider_at(
    config: &Config,
    module: &ModulePath,
    name: &str,
    alias: Option<&str>,
    package: &str,
    key: Option<(&Expression, Span)>,
    levels_up: usize,
) -> Result<(ProviderAddr, Option<ProviderKeyAt>), String> {
    let m = config
        .module(module)
        .ok_or_else(|| format!("module {module} is not loaded"))?;
    let reference = match alias {
        Some(a) => format!("{name}.{a}"),
        None => name.to_string(),
    };
    if let Some(block) = m.provider(name, alias) {
        let key = match (&block.for_each, key) {
            (Some(_), Some((expr, span))) => Some(ProviderKeyAt {
                expr: expr.clone(),
                levels_up,
                span,
            }),
            (Some(_), None) => {
                return Err(format!(
                    "The provider configuration {reference} has for_each: it is a set of \
                     instances, and a resource or module call chooses one of them by key, as in \
                     provider = {reference}[each.key]."
                ))
            }
            (None, Some(_)) => {
                return Err(format!(
                    "The provider configuration {reference} has no for_each, so it has no \
                     instance keys: refer to it as {reference}, without an index."
                ))
            }
            (None, None) => None,
        };
        return Ok((
            ProviderAddr {
                module: module.without_keys(),
                package: package.to_string(),
                alias: alias.map(str::to_string),
                key: None,
            },
            key,
        ));
    }
    if key.is_some() {
        return Err(format!(
            "There is no provider block for {reference} with for_each in {}: an instance key \
             chooses an instance of a provider block with for_each declared in the same module.",
            if module.is_root() {
                "the root module".to_string()
            } else {
                module.to_string()
            }
        ));
    }
    let Some(parent) = module.parent() else {
        return match alias {
            None => Ok((ProviderAddr::default_for(ModulePath::root(), package), None)),
            Some(a) => Err(format!(
                "There is no provider block for {name}.{a} in the root module. Add provider \"{name}\" {{ alias = \"{a}\" }}."
            )),
        };
    };
    let call_name = &module.0.last().map(|s| s.name.clone()).unwrap_or_default();
    let parent_module = config
        .module(&parent)
        .ok_or_else(|| format!("module {parent} is not loaded"))?;
    if let Some(call) = parent_module.calls.get(call_name) {
        if let Some(pass) = call
            .providers
            .iter()
            .find(|p| p.child.name == name && p.child.alias.as_deref() == alias)
        {
            return resolve_provider_at(
                config,
                &parent,
                &pass.parent.name,
                pass.parent.alias.as_deref(),
                package,
                pass.parent.key.as_ref().map(|k| (k, pass.parent.span)),
                levels_up + 1,
            );
        }
    }
    match alias {
        None => resolve_provider_at(config, &parent, name, None, package, None, levels_up + 1),
        Some(a) => Err(format!(
            "Module {module} uses provider {name}.{a}, but its call does not pass one. Add providers = {{ {name}.{a} = ... }} to module \"{call_name}\"."
        )),
    }
}

/// The package of a provider local name in a module: the last segment of its
/// `required_providers` source, or the name itself.
pub(crate) fn package_of_local(module: &Module, local: &str) -> String {
    module
        .required_providers
        .get(local)
        .and_then(|r| r.source.as_deref())
        .and_then(|s| s.rsplit('/').next())
        .unwrap_or(local)
        .to_string()
}

/// The node a reference's subject names, seen from `module`; `None` for subjects that are not
/// terms (`count.index`, `path.module`, …).
fn subject_nodes(config: &Config, module: &ModulePath, subject: &Subject) -> Vec<Node> {
    match subject {
        Subject::Var(name) => vec![Node::Var {
            module: module.clone(),
            name: name.clone(),
        }],
        Subject::Local(name) => vec![Node::Local {
            module: module.clone(),
            name: name.clone(),
        }],
        Subject::Resource { mode, type_, name } => vec![Node::Resource {
            module: module.clone(),
            key: ResourceKey {
                mode: *mode,
                type_: type_.clone(),
                name: name.clone(),
            },
        }],
        Subject::ModuleCall { name, output } => {
            let child = module.child(name, None);
            let mut nodes = vec![Node::Call {
                module: module.clone(),
                name: name.clone(),
            }];
            match output {
                Some(o) => nodes.push(Node::Output {
                    module: child,
                    name: o.clone(),
                }),
                None => {
                    if let Some(c) = config.module(&child) {
                        nodes.extend(c.outputs.keys().map(|o| Node::Output {
                            module: child.clone(),
                            name: o.clone(),
                        }));
                    }
                }
            }
            nodes
        }
        _ => vec![],
    }
}

/// Every resource node inside a module (recursively): what `depends_on = [module.m]` means.
fn resources_in(module: &Module, out: &mut Vec<Node>) {
    for key in module.resources.keys() {
        out.push(Node::Resource {
            module: module.path.clone(),
            key: key.clone(),
        });
    }
    for child in module.children.values() {
        resources_in(child, out);
    }
}

/// One named step of graph building.
type Step<'a> = (&'static str, &'a dyn Fn(&mut TermGraph, &mut Diagnostics));

/// Builds the term graph of a configuration. Unresolvable providers are diagnostics; a cycle
/// is not an error here (callers ask `cycle_diagnostics`).
pub(crate) fn build(config: &Config) -> (TermGraph, Diagnostics) {
    let mut g = TermGraph::new();
    let mut diags = Diagnostics::new();
    let steps: [Step<'_>; 8] = [
        ("add terms", &|g, _| add_terms(config, g)),
        ("add providers", &|g, d| add_providers(config, g, d)),
        ("add references", &|g, _| add_references(config, g)),
        ("check scoped references", &|g, d| {
            check_scoped_references(config, g, d)
        }),
        ("add module boundaries", &|g, _| {
            add_module_boundaries(config, g)
        }),
        ("add depends_on", &|g, _| add_depends_on(config, g)),
        ("add provider references", &|g, _| {
            add_provider_references(config, g)
        }),
        ("add imports", &|g, _| add_imports(config, g)),
    ];
    for (_name, step) in steps {
        step(&mut g, &mut diags);
    }
    (g, diags)
}

fn add_terms(config: &Config, g: &mut TermGraph) {
    let terms: usize = config
        .modules()
        .iter()
        .map(|m| {
            m.variables.len() + m.locals.len() + m.resources.len() + m.outputs.len() + m.calls.len()
        })
        .sum();
    g.reserve(terms);
    g.edges.reserve(terms * 2);
    for m in config.modules() {
        let module = &m.path;
        for name in m.variables.keys() {
            g.add(Node::Var {
                module: module.clone(),
                name: name.clone(),
            });
        }
        for name in m.locals.keys() {
            g.add(Node::Local {
                module: module.clone(),
                name: name.clone(),
            });
        }
        for key in m.resources.keys() {
            g.add(Node::Resource {
                module: module.clone(),
                key: key.clone(),
            });
        }
        for name in m.outputs.keys() {
            g.add(Node::Output {
                module: module.clone(),
                name: name.clone(),
            });
        }
        for name in m.calls.keys() {
            g.add(Node::Call {
                module: module.clone(),
                name: name.clone(),
            });
        }
        for name in m.checks.keys() {
            g.add(Node::Check {
                module: module.clone(),
                name: name.clone(),
            });
        }
    }
}

fn add_providers(config: &Config, g: &mut TermGraph, diags: &mut Diagnostics) {
    // Declared provider blocks are nodes even when nothing uses them (they are checked).
    for m in config.modules() {
        for p in &m.providers {
            let package = package_of_local(m, &p.name);
            g.add(Node::Provider {
                addr: Box::new(ProviderAddr {
                    module: m.path.clone(),
                    package,
                    alias: p.alias.clone(),
                    key: None,
                }),
            });
        }
    }
    for m in config.modules() {
        for (key, r) in &m.resources {
            let local = r.provider_name();
            let package = package_of_local(m, local);
            let alias = r.provider.as_ref().and_then(|p| p.alias.as_deref());
            let key_expr = r
                .provider
                .as_ref()
                .and_then(|p| p.key.as_ref().map(|k| (k, p.span)));
            match resolve_provider(config, &m.path, local, alias, &package, key_expr) {
                Ok((addr, key_at)) => {
                    if let Some(k) = key_at {
                        g.provider_key.insert((m.path.clone(), key.clone()), k);
                    }
                    let p = g.add(Node::Provider {
                        addr: Box::new(addr.clone()),
                    });
                    let r_id = g.add(Node::Resource {
                        module: m.path.clone(),
                        key: key.clone(),
                    });
                    g.edge(
                        r_id,
                        p,
                        EdgeKind::Provider,
                        r.provider.as_ref().map(|p| p.span),
                    );
                    g.provider_nodes.insert(r_id, p);
                    if let Some(p) = r.provider.as_ref() {
                        if let Some(k) = &p.key {
                            let refs = expr_refs(k, p.span.file);
                            reference_edges(config, g, r_id, &m.path, refs);
                        }
                    }
                }
                Err(detail) => diags.push(
                    Diagnostic::error("Provider configuration not present", detail)
                        .with_span(Some(r.provider.as_ref().map(|p| p.span).unwrap_or(r.span))),
                ),
            }
        }
    }
}

/// Adds an edge for every reference in `exprs`, resolved in `module`.
fn reference_edges(
    config: &Config,
    g: &mut TermGraph,
    from: NodeId,
    module: &ModulePath,
    refs: Vec<(Reference, crate::diag::FileId)>,
) {
    for (r, file) in refs {
        for target in subject_nodes(config, module, &r.subject) {
            if let Some(to) = g.id(&target) {
                g.edge(
                    from,
                    to,
                    EdgeKind::Reference,
                    Some(Span {
                        file,
                        start: r.start,
                        end: r.end,
                    }),
                );
            }
        }
    }
}

fn expr_refs(
    expr: &Expression,
    file: crate::diag::FileId,
) -> Vec<(Reference, crate::diag::FileId)> {
    references(expr).into_iter().map(|r| (r, file)).collect()
}

/// A `check` block's data sources may be referred to from that block only (its assertions
/// and its other data sources), as in Terraform.
fn check_scoped_references(config: &Config, g: &mut TermGraph, diags: &mut Diagnostics) {
    let scoped = |module: &ModulePath, key: &ResourceKey| {
        config
            .module(module)
            .and_then(|m| m.resources.get(key))
            .filter(|r| r.check.is_some())
    };
    if !config
        .modules()
        .iter()
        .any(|m| m.resources.values().any(|r| r.check.is_some()))
    {
        return;
    }
    let mut found: Vec<(Span, Diagnostic)> = Vec::new();
    for (&(from, to), &(kind, span)) in &g.edges {
        let (EdgeKind::Reference, Some(span)) = (kind, span) else {
            continue;
        };
        let Node::Resource { module, key } = g.node(to) else {
            continue;
        };
        let Some(r) = scoped(module, key) else {
            continue;
        };
        let from_scope = match g.node(from) {
            Node::Check { name, .. } => Some(name.as_str()),
            Node::Resource { module, key } => config
                .module(module)
                .and_then(|m| m.resources.get(key))
                .and_then(|r| r.check.as_deref()),
            _ => None,
        };
        if let Some(d) = crate::config::scoped_reference(r, from_scope) {
            found.push((span, d.with_span(Some(span))));
        }
    }
    found.sort_by_key(|(s, _)| (s.file, s.start));
    diags.extend(found.into_iter().map(|(_, d)| d));
}

fn add_references(config: &Config, g: &mut TermGraph) {
    for m in config.modules() {
        let module = &m.path;
        for (name, check) in &m.checks {
            let from = g.add(Node::Check {
                module: module.clone(),
                name: name.clone(),
            });
            let refs = check
                .asserts
                .iter()
                .flat_map(|c| {
                    expr_refs(&c.condition, check.file)
                        .into_iter()
                        .chain(expr_refs(&c.error_message, check.file))
                })
                .collect();
            reference_edges(config, g, from, module, refs);
        }
        for (name, local) in &m.locals {
            let from = g.add(Node::Local {
                module: module.clone(),
                name: name.clone(),
            });
            reference_edges(config, g, from, module, expr_refs(&local.expr, local.file));
        }
        for (name, out) in &m.outputs {
            let from = g.add(Node::Output {
                module: module.clone(),
                name: name.clone(),
            });
            let mut refs = expr_refs(&out.value, out.file);
            for c in &out.preconditions {
                refs.extend(expr_refs(&c.condition, out.file));
                refs.extend(expr_refs(&c.error_message, out.file));
            }
            reference_edges(config, g, from, module, refs);
        }
        for (name, var) in &m.variables {
            // Validation conditions may refer to the variable itself only.
            let from = g.add(Node::Var {
                module: module.clone(),
                name: name.clone(),
            });
            for v in &var.validations {
                let refs = expr_refs(&v.condition, var.file)
                    .into_iter()
                    .chain(expr_refs(&v.error_message, var.file))
                    .filter(|(r, _)| r.subject != Subject::Var(name.clone()))
                    .collect();
                reference_edges(config, g, from, module, refs);
            }
        }
        for (key, r) in &m.resources {
            let from = g.add(Node::Resource {
                module: module.clone(),
                key: key.clone(),
            });
            let mut refs: Vec<(Reference, crate::diag::FileId)> = body_references(&r.body)
                .into_iter()
                .map(|x| (x, r.file))
                .collect();
            let conditions = r
                .lifecycle
                .preconditions
                .iter()
                .chain(r.lifecycle.postconditions.iter())
                .flat_map(|c| [&c.condition, &c.error_message]);
            for e in r
                .count
                .as_deref()
                .into_iter()
                .chain(r.for_each.as_deref())
                .chain(r.lifecycle.replace_triggered_by.iter())
                .chain(conditions)
            {
                refs.extend(expr_refs(e, r.file));
            }
            // A provisioner runs after its object is created, with what it refers to.
            for p in r.provisioners.iter().filter(|p| !p.when_destroy) {
                refs.extend(body_references(&p.body).into_iter().map(|x| (x, r.file)));
            }
            // A postcondition's `self` is the object itself, not a dependency.
            refs.retain(|(r, _)| r.subject != Subject::SelfRef);
            reference_edges(config, g, from, module, refs);
        }
        for (name, call) in &m.calls {
            let from = g.add(Node::Call {
                module: module.clone(),
                name: name.clone(),
            });
            let refs = call
                .count
                .iter()
                .chain(call.for_each.iter())
                .flat_map(|e| expr_refs(e, call.file))
                .collect();
            reference_edges(config, g, from, module, refs);
        }
    }
}

/// An `import` block is evaluated (in the root module) when the plan reaches its target
/// resource: the target depends on what its `id` and `for_each` refer to.
fn add_imports(config: &Config, g: &mut TermGraph) {
    let root = ModulePath::root();
    for b in &config.root.imports {
        let Some(from) = g.id(&Node::Resource {
            module: b.module.clone(),
            key: b.key.clone(),
        }) else {
            continue;
        };
        // `to` names the target itself; its keys use `each`, the block's own.
        let mut refs = expr_refs(&b.id, b.file);
        if let Some(e) = &b.for_each {
            refs.extend(expr_refs(e, b.file));
        }
        reference_edges(config, g, from, &root, refs);
    }
}

fn add_module_boundaries(config: &Config, g: &mut TermGraph) {
    for m in config.modules() {
        for (name, call) in &m.calls {
            let call_id = g.add(Node::Call {
                module: m.path.clone(),
                name: name.clone(),
            });
            let child_path = m.path.child(name, None);
            let Some(child) = config.module(&child_path) else {
                continue;
            };
            // Inputs: the child's variable takes the call's argument, evaluated in the parent.
            for (input, (expr, span)) in &call.inputs {
                let Some(var) = g.id(&Node::Var {
                    module: child_path.clone(),
                    name: input.clone(),
                }) else {
                    continue;
                };
                g.edge(var, call_id, EdgeKind::ModuleInput, Some(*span));
                for (r, file) in expr_refs(expr, call.file) {
                    for target in subject_nodes(config, &m.path, &r.subject) {
                        if let Some(to) = g.id(&target) {
                            g.edge(
                                var,
                                to,
                                EdgeKind::ModuleInput,
                                Some(Span {
                                    file,
                                    start: r.start,
                                    end: r.end,
                                }),
                            );
                        }
                    }
                }
            }
            // Everything directly inside the child waits for the call's expansion.
            let inside: Vec<NodeId> = g
                .dag
                .nodes()
                .filter(|(_, n)| n.module() == &child.path && !matches!(n, Node::Provider { .. }))
                .map(|(id, _)| id)
                .collect();
            for id in inside {
                g.edge(id, call_id, EdgeKind::Expansion, None);
            }
        }
    }
}

fn depends_on_targets(config: &Config, module: &ModulePath, d: &DependsOn) -> Vec<Node> {
    match &d.subject {
        Subject::ModuleCall { name, output: None } => {
            let mut out = vec![Node::Call {
                module: module.clone(),
                name: name.clone(),
            }];
            if let Some(child) = config.module(&module.child(name, None)) {
                resources_in(child, &mut out);
                out.extend(child.outputs.keys().map(|o| Node::Output {
                    module: child.path.clone(),
                    name: o.clone(),
                }));
            }
            out
        }
        s => subject_nodes(config, module, s),
    }
}

fn add_depends_on(config: &Config, g: &mut TermGraph) {
    for m in config.modules() {
        let module = &m.path;
        let mut pairs: Vec<(Node, &DependsOn)> = Vec::new();
        for (key, r) in &m.resources {
            pairs.extend(r.depends_on.iter().map(|d| {
                (
                    Node::Resource {
                        module: module.clone(),
                        key: key.clone(),
                    },
                    d,
                )
            }));
        }
        for (name, o) in &m.outputs {
            pairs.extend(o.depends_on.iter().map(|d| {
                (
                    Node::Output {
                        module: module.clone(),
                        name: name.clone(),
                    },
                    d,
                )
            }));
        }
        for (name, c) in &m.calls {
            pairs.extend(c.depends_on.iter().map(|d| {
                (
                    Node::Call {
                        module: module.clone(),
                        name: name.clone(),
                    },
                    d,
                )
            }));
        }
        for (from, d) in pairs {
            let from = g.add(from);
            for target in depends_on_targets(config, module, d) {
                if let Some(to) = g.id(&target) {
                    g.edge(from, to, EdgeKind::DependsOn, Some(d.span));
                }
            }
        }
    }
}

fn add_provider_references(config: &Config, g: &mut TermGraph) {
    // The instance keys a call's `providers` map chooses are evaluated with the call.
    for m in config.modules() {
        for (name, call) in &m.calls {
            for pass in &call.providers {
                if let Some(k) = &pass.parent.key {
                    let from = g.add(Node::Call {
                        module: m.path.clone(),
                        name: name.clone(),
                    });
                    let refs = expr_refs(k, pass.parent.span.file);
                    reference_edges(config, g, from, &m.path, refs);
                }
            }
        }
    }
    for m in config.modules() {
        for p in &m.providers {
            let package = package_of_local(m, &p.name);
            let node = Node::Provider {
                addr: Box::new(ProviderAddr {
                    module: m.path.clone(),
                    package,
                    alias: p.alias.clone(),
                    key: None,
                }),
            };
            let from = g.add(node);
            let mut refs: Vec<_> = body_references(&p.body)
                .into_iter()
                .map(|r| (r, p.file))
                .collect();
            if let Some(fe) = &p.for_each {
                refs.extend(expr_refs(fe, p.file));
            }
            reference_edges(config, g, from, &m.path, refs);
            if let Some(parent) = m.path.parent() {
                let call = m.path.0.last().map(|s| s.name.clone()).unwrap_or_default();
                if let Some(call_id) = g.id(&Node::Call {
                    module: parent,
                    name: call,
                }) {
                    g.edge(from, call_id, EdgeKind::Expansion, None);
                }
            }
        }
    }
}

/// Adds the orphans: instances in state whose resource the configuration no longer has, each
/// depending on its provider instance (from state when the configuration has no such
/// instance). Returns the orphan node ids.
pub(crate) fn add_orphans(
    g: &mut TermGraph,
    orphans: impl IntoIterator<Item = (ResourceInstanceAddr, ProviderAddr)>,
) -> BTreeMap<ResourceInstanceAddr, NodeId> {
    let mut out = BTreeMap::new();
    for (addr, provider) in orphans {
        let id = g.add(Node::Orphan {
            addr: Box::new(addr.clone()),
        });
        // An instance of a block with `for_each` is configured by the block's node.
        let p = match g.provider_node(&provider) {
            Some(p) => p,
            None => g.add(Node::Provider {
                addr: Box::new(provider),
            }),
        };
        g.edge(id, p, EdgeKind::Provider, None);
        out.insert(addr, id);
    }
    out
}
