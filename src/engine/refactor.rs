//! `moved` and `removed` blocks: what they do to the prior state before a plan.
//!
//! A plan starts by resolving the configuration's `moved` blocks against the prior state
//! ([`resolve`]): each block (relative to its module, so once per instance of that module in
//! the state) moves what the state has at `from` to `to`, by the state's own rules
//! (`Snapshot::plan_moves`, the same as `cairn state mv`), chains in dependency order (`a → b`
//! before `b → c`). The plan is then made against the moved state, keeps the moves
//! (`Plan::moves`), and an apply records them first, as `ResourceMoved` events. As in
//! Terraform: a `from` absent from the state is ignored; a destination that already holds an
//! object blocks the move (a warning; the object at `from` is then planned like any other
//! object the configuration no longer has); a `from` that the configuration still declares is
//! an error; so are two blocks that disagree and chains that form a cycle.
//!
//! `removed` blocks with `lifecycle { destroy = false }` make the plan forget the objects at
//! `from` (`Action::Forget`, recorded as `ResourceForgotten` at apply, no provider call);
//! without it the objects are destroyed as any object without configuration is.

use crate::addr::{Mode, ModulePath, ResourceInstanceAddr, Target};
use crate::config::{Config, ResourceKey};
use crate::diag::{Diagnostic, Diagnostics, SourceMap, Span};
use cairn_state::Snapshot;
use std::collections::BTreeSet;

/// One `moved` block, with its addresses made absolute for one module instance.
#[derive(Clone, Debug)]
struct Statement {
    /// The static path of the module the block is in.
    module: ModulePath,
    from: Target,
    to: Target,
    span: Span,
    /// Terraform's implied move for `count` added to (`a` → `a[0]`) or removed from
    /// (`a[0]` → `a`) a resource: never an error, never a warning.
    implied: bool,
}

/// What the `moved` and `removed` blocks do to the prior state.
#[derive(Clone, Debug, Default)]
pub(crate) struct Refactor {
    /// `ResourceMoved` events, in the order they apply (a chain is several).
    pub moves: Vec<(ResourceInstanceAddr, ResourceInstanceAddr)>,
    /// Moves that an object already at the destination blocked.
    pub blocked: Vec<(ResourceInstanceAddr, ResourceInstanceAddr)>,
    /// Instances (after the moves) that `removed { lifecycle { destroy = false } }` forgets.
    pub forget: Vec<ResourceInstanceAddr>,
    /// Moves from a resource instance: after the plan, an error if the configuration still
    /// declares that instance (`from`, `to`, the block's header).
    pub instance_sources: Vec<(ResourceInstanceAddr, ResourceInstanceAddr, Span)>,
    pub diags: Diagnostics,
}

/// `path:line,col`, as Terraform names a statement in a message.
fn start_string(sources: &SourceMap, span: Span) -> String {
    let p = sources.pos(span.file, span.start);
    format!(
        "{}:{},{}",
        sources.path_at(span.file, span.start).display(),
        p.line,
        p.column
    )
}

/// `rel` (an address inside module `base`) as an absolute address.
fn absolute(base: &ModulePath, rel: &Target) -> Target {
    let join = |m: &ModulePath| {
        let mut steps = base.0.clone();
        steps.extend(m.0.iter().cloned());
        ModulePath(steps)
    };
    match rel {
        Target::Module(m) => Target::Module(join(m)),
        Target::Resource(r) => {
            let mut r = r.clone();
            r.module = join(&r.module);
            Target::Resource(r)
        }
        Target::Instance(i) => {
            let mut i = i.clone();
            i.resource.module = join(&i.resource.module);
            Target::Instance(i)
        }
    }
}

/// Terraform's unification of a statement's two ends: a resource beside an instance is the
/// resource's instance without a key (`a → a[0]` moves the object that had no `count`).
fn unify(from: Target, to: Target) -> (Target, Target) {
    match (from, to) {
        (Target::Resource(r), to @ Target::Instance(_)) => (Target::Instance(r.instance(None)), to),
        (from @ Target::Instance(_), Target::Resource(r)) => {
            (from, Target::Instance(r.instance(None)))
        }
        other => other,
    }
}

/// True when the two addresses name overlapping sets of objects (one contains the other).
fn overlaps(a: &Target, b: &Target) -> bool {
    fn module_of(
        t: &Target,
    ) -> (
        ModulePath,
        Option<(crate::addr::ResourceAddr, Option<&ResourceInstanceAddr>)>,
    ) {
        match t {
            Target::Module(m) => (m.clone(), None),
            Target::Resource(r) => (r.module.clone(), Some((r.clone(), None))),
            Target::Instance(i) => (
                i.resource.module.clone(),
                Some((i.resource.clone(), Some(i))),
            ),
        }
    }
    let (ma, ra) = module_of(a);
    let (mb, rb) = module_of(b);
    let covers = |outer: &ModulePath, inner: &ModulePath| {
        inner.0.len() >= outer.0.len()
            && outer.0.iter().zip(&inner.0).all(|(o, i)| {
                o.name == i.name && (o.key.is_none() || i.key.is_none() || o.key == i.key)
            })
    };
    match (ra, rb) {
        (None, _) => covers(&ma, &mb),
        (_, None) => covers(&mb, &ma),
        (Some((x, xi)), Some((y, yi))) => {
            x.mode == y.mode
                && x.type_ == y.type_
                && x.name == y.name
                && x.module.0.len() == y.module.0.len()
                && covers(&x.module, &y.module)
                && match (xi, yi) {
                    (Some(p), Some(q)) => p.key == q.key,
                    _ => true,
                }
        }
    }
}

/// The configuration's declaration of a resource or module call named by an absolute
/// address (instance keys ignored): its span.
fn declared(config: &Config, t: &Target) -> Option<Span> {
    match t {
        Target::Module(m) => {
            let (last, parent) = m.0.split_last()?;
            let parent = config.module(&ModulePath(parent.to_vec()))?;
            parent.calls.get(&last.name).map(|c| c.span)
        }
        Target::Resource(r) => {
            let key = ResourceKey {
                mode: r.mode,
                type_: r.type_.clone(),
                name: r.name.clone(),
            };
            config
                .module(&r.module.without_keys())?
                .resources
                .get(&key)
                .map(|r| r.span)
        }
        Target::Instance(_) => None,
    }
}

/// Resolves every `moved` and `removed` block of the configuration against `prior`.
pub(crate) fn resolve(config: &Config, prior: &Snapshot) -> Refactor {
    let mut out = Refactor::default();
    let sources = &config.sources;
    // The statements, per module (static, relative ends made absolute in the module's static
    // path; instance keys of the module are filled per instance when applied).
    let mut stmts = explicit_statements(config);
    check_statements(config, &stmts, &mut out.diags);
    add_implied_statements(config, prior, &mut stmts);
    removed_still_declared(config, &mut out.diags);
    if out.diags.has_errors() {
        return out;
    }
    let Some(order) = order(&stmts, sources, &mut out.diags) else {
        return out;
    };
    // Apply in order to a working copy, so that a chain sees the moves before it (copied
    // only when there is something to move: most plans have no statement).
    let mut state = std::borrow::Cow::Borrowed(prior);
    for i in order {
        let s = &stmts[i];
        // Each instance of the block's module that the state has (the root: one).
        for inst in module_instances(&state, &s.module) {
            apply_statement(config, &mut state, s, &inst, &mut out);
        }
    }
    for m in config.modules() {
        for b in m.removed.iter().filter(|b| !b.destroy) {
            let from = absolute(&m.path, &b.from);
            out.forget
                .extend(state.resources.keys().filter(|a| from.contains(a)).cloned());
        }
    }
    out.forget.sort();
    out.forget.dedup();
    out
}

/// The configuration's `moved` blocks as statements.
fn explicit_statements(config: &Config) -> Vec<Statement> {
    let mut stmts: Vec<Statement> = Vec::new();
    for m in config.modules() {
        for b in &m.moved {
            let (from, to) = unify(absolute(&m.path, &b.from), absolute(&m.path, &b.to));
            stmts.push(Statement {
                module: m.path.clone(),
                from,
                to,
                span: b.span,
                implied: false,
            });
        }
    }
    stmts
}

/// Adds Terraform's implied moves (`a` ↔ `a[0]` when `count` is added or removed) for the
/// resources no explicit statement moves from, and only where the state has an object to move
/// (found through an index: no scan of the state per resource) or an explicit statement moves
/// one there.
fn add_implied_statements(config: &Config, prior: &Snapshot, stmts: &mut Vec<Statement>) {
    type Static<'a> = (std::borrow::Cow<'a, ModulePath>, Mode, &'a str, &'a str);
    let mut keys_in_state: rustc_hash::FxHashMap<Static, Vec<&Option<crate::addr::InstanceKey>>> =
        Default::default();
    for a in prior.resources.keys() {
        let r = &a.resource;
        let module = match r.module.0.iter().any(|s| s.key.is_some()) {
            true => std::borrow::Cow::Owned(r.module.without_keys()),
            false => std::borrow::Cow::Borrowed(&r.module),
        };
        keys_in_state
            .entry((module, r.mode, &r.type_, &r.name))
            .or_default()
            .push(&a.key);
    }
    let explicit = stmts.len();
    for m in config.modules() {
        for r in m
            .resources
            .values()
            .filter(|r| r.mode == Mode::Managed && r.for_each.is_none())
        {
            let from_key = match r.count {
                Some(_) => None,
                None => Some(crate::addr::InstanceKey::Int(0)),
            };
            let key: Static = (
                std::borrow::Cow::Borrowed(&m.path),
                r.mode,
                &r.type_,
                &r.name,
            );
            let in_state = keys_in_state
                .get(&key)
                .is_some_and(|keys| keys.contains(&&from_key));
            if !in_state && explicit == 0 {
                continue;
            }
            let addr = r.key().addr(m.path.clone());
            let (from, to) = match r.count {
                Some(_) => (
                    addr.instance(None),
                    addr.instance(Some(crate::addr::InstanceKey::Int(0))),
                ),
                None => (
                    addr.instance(Some(crate::addr::InstanceKey::Int(0))),
                    addr.instance(None),
                ),
            };
            let (from, to) = (Target::Instance(from), Target::Instance(to));
            if stmts[..explicit].iter().any(|s| overlaps(&s.from, &from)) {
                continue;
            }
            // Not in the state, but perhaps where an explicit statement moves an object.
            if !in_state && !stmts[..explicit].iter().any(|s| overlaps(&s.to, &from)) {
                continue;
            }
            stmts.push(Statement {
                module: m.path.clone(),
                from,
                to,
                span: r.span,
                implied: true,
            });
        }
    }
}

/// A `removed` block whose `from` the configuration still declares: an error.
fn removed_still_declared(config: &Config, diags: &mut Diagnostics) {
    for m in config.modules() {
        for b in &m.removed {
            let from = absolute(&m.path, &b.from);
            let (summary, noun_span) = match &from {
                Target::Module(_) => ("Removed module still exists", declared(config, &from)),
                _ => ("Removed resource still exists", declared(config, &from)),
            };
            if let Some(span) = noun_span {
                diags.push(
                    Diagnostic::error(
                        summary,
                        format!("This statement declares that {from} was removed, but it is still declared in configuration."),
                    )
                    .with_span(Some(span)),
                );
            }
        }
    }
}

/// The instances of the static module `module` that the state has objects in (the root:
/// itself).
fn module_instances(state: &Snapshot, module: &ModulePath) -> BTreeSet<ModulePath> {
    let mut instances: BTreeSet<ModulePath> = BTreeSet::new();
    if module.0.is_empty() {
        instances.insert(ModulePath::root());
        return instances;
    }
    for a in state.resources.keys().chain(state.data.keys()) {
        let m = &a.resource.module;
        if m.0.len() >= module.0.len()
            && ModulePath(m.0[..module.0.len()].to_vec()).without_keys() == *module
        {
            instances.insert(ModulePath(m.0[..module.0.len()].to_vec()));
        }
    }
    instances
}

/// A statement's address in one instance of its module: the module's steps get the
/// instance's keys.
fn at_instance(t: &Target, inst: &ModulePath) -> Target {
    let fill = |m: &ModulePath| {
        let mut m = m.clone();
        for (step, k) in m.0.iter_mut().zip(&inst.0) {
            step.key = k.key.clone();
        }
        m
    };
    match t {
        Target::Module(m) => Target::Module(fill(m)),
        Target::Resource(r) => {
            let mut r = r.clone();
            r.module = fill(&r.module);
            Target::Resource(r)
        }
        Target::Instance(i) => {
            let mut i = i.clone();
            i.resource.module = fill(&i.resource.module);
            Target::Instance(i)
        }
    }
}

/// Applies one statement in one instance of its module to the working state, by the
/// state's rules (`Snapshot::plan_moves`), and records the moves (or why not) in `out`.
fn apply_statement(
    config: &Config,
    state: &mut std::borrow::Cow<'_, Snapshot>,
    s: &Statement,
    inst: &ModulePath,
    out: &mut Refactor,
) {
    let (from, to) = (at_instance(&s.from, inst), at_instance(&s.to, inst));
    if let (Target::Instance(f), Target::Instance(t), false) = (&from, &to, s.implied) {
        out.instance_sources.push((f.clone(), t.clone(), s.span));
    }
    let plan = match state.plan_moves(&from, &to).map_err(|e| *e) {
        Ok(p) => p,
        Err(cairn_state::MoveError::TypeMismatch { to: dest, .. }) => {
            out.diags.push(cross_type(config, &dest, s.span));
            return;
        }
        Err(e) => {
            out.diags.push(
                Diagnostic::error("Invalid \"moved\" addresses", e.to_string())
                    .with_span(Some(s.span)),
            );
            return;
        }
    };
    for (a, b) in &plan.moves {
        apply_event(
            state.to_mut(),
            cairn_state::EventBody::ResourceMoved {
                from: a.clone(),
                to: b.clone(),
            },
        );
    }
    out.moves.extend(plan.moves);
    if !s.implied {
        out.blocked.extend(plan.blocked);
    }
}

/// Applies one event to an in-memory snapshot, leaving its head (the log's real position).
pub(crate) fn apply_event(state: &mut Snapshot, body: cairn_state::EventBody) {
    let head = state.head;
    state.apply_owned(cairn_state::Event {
        seq: head,
        version: cairn_state::event::CURRENT_VERSION,
        time_ms: 0,
        run: 0,
        body,
    });
    state.head = head;
}

/// Terraform's error for a move between resource types: no provider Cairn runs supports
/// moving state across types.
fn cross_type(config: &Config, to: &crate::addr::ResourceAddr, span: Span) -> Diagnostic {
    let provider = config
        .module(&to.module.without_keys())
        .map(|m| {
            let key = ResourceKey {
                mode: to.mode,
                type_: to.type_.clone(),
                name: to.name.clone(),
            };
            let local = match m.resources.get(&key) {
                Some(r) => match &r.provider {
                    Some(p) => p.name.clone(),
                    None => r.provider_name().to_string(),
                },
                None => to.type_.split('_').next().unwrap_or(&to.type_).to_string(),
            };
            m.provider_source(&local).to_string()
        })
        .unwrap_or_default();
    Diagnostic::error(
        "Unsupported `moved` across resource types",
        format!("The provider {provider:?} does not support moved operations across resource types and providers."),
    )
    .with_span(Some(span))
}

/// The noun Terraform uses for what an address names, and its short form.
fn nouns(t: &Target) -> (&'static str, &'static str) {
    match t {
        Target::Module(m) if m.0.last().is_some_and(|s| s.key.is_some()) => {
            ("module instance", "instance")
        }
        Target::Module(_) => ("module call", "call"),
        Target::Resource(_) => ("resource", "resource"),
        Target::Instance(_) => ("resource instance", "instance"),
    }
}

/// Terraform's checks of statements against the configuration and against each other.
fn check_statements(config: &Config, stmts: &[Statement], diags: &mut Diagnostics) {
    let sources = &config.sources;
    let mut froms: Vec<(&Target, &Target, Span)> = Vec::new();
    let mut tos: Vec<(&Target, &Target, Span)> = Vec::new();
    for s in stmts {
        if s.from == s.to {
            diags.push(
                Diagnostic::error(
                    "Redundant move statement",
                    format!("This statement declares a move from {} to the same address, which is the same as not declaring this move at all.", s.from),
                )
                .with_span(Some(s.span)),
            );
            continue;
        }
        let (noun, short) = nouns(&s.from);
        // A module instance is declared when its call is (and has that key): checked for
        // calls and resources here; resource instances after the plan expands them.
        let still = match &s.from {
            Target::Module(m) if m.0.last().is_some_and(|s| s.key.is_none()) => {
                declared(config, &s.from)
            }
            Target::Resource(_) => declared(config, &s.from),
            _ => None,
        };
        if let Some(at) = still {
            diags.push(
                Diagnostic::error(
                    "Moved object still exists",
                    format!(
                        "This statement declares a move from {}, but that {noun} is still declared at {}.\n\nChange your configuration so that this {short} will be declared as {} instead.",
                        s.from,
                        start_string(sources, at),
                        s.to
                    ),
                )
                .with_span(Some(s.span)),
            );
        }
        match froms.iter().find(|(f, _, _)| **f == s.from) {
            Some((_, other, at)) if **other != s.to => diags.push(
                Diagnostic::error(
                    "Ambiguous move statements",
                    format!(
                        "A statement at {} declared that {} moved to {}, but this statement instead declares that it moved to {}.\n\nEach {noun} can move to only one destination {short}.",
                        start_string(sources, *at),
                        s.from,
                        other,
                        s.to
                    ),
                )
                .with_span(Some(s.span)),
            ),
            Some(_) => {}
            None => froms.push((&s.from, &s.to, s.span)),
        }
        match tos.iter().find(|(t, _, _)| **t == s.to) {
            Some((_, other, at)) if **other != s.from => diags.push(
                Diagnostic::error(
                    "Ambiguous move statements",
                    format!(
                        "A statement at {} declared that {} moved to {}, but this statement instead declares that {} moved there.\n\nEach {noun} can have moved from only one source {short}.",
                        start_string(sources, *at),
                        other,
                        s.to,
                        s.from
                    ),
                )
                .with_span(Some(s.span)),
            ),
            Some(_) => {}
            None => tos.push((&s.to, &s.from, s.span)),
        }
    }
}

/// The order statements apply in: one that moves objects to where another moves them from
/// goes first (a chain `a → b`, `b → c` moves `a` to `c`). `None` (with Terraform's error)
/// when the statements form a cycle.
fn order(stmts: &[Statement], sources: &SourceMap, diags: &mut Diagnostics) -> Option<Vec<usize>> {
    let n = stmts.len();
    // before[j] = statements that must apply before j.
    let before: Vec<Vec<usize>> = (0..n)
        .map(|j| {
            (0..n)
                .filter(|&i| i != j && overlaps(&stmts[i].to, &stmts[j].from))
                .collect()
        })
        .collect();
    let mut done = vec![false; n];
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        let next = (0..n).find(|&j| !done[j] && before[j].iter().all(|&i| done[i]));
        match next {
            Some(j) => {
                done[j] = true;
                out.push(j);
            }
            None => {
                let mut lines: Vec<String> = (0..n)
                    .filter(|&j| !done[j])
                    .map(|j| {
                        format!(
                            "\n  - {}: {} → {}",
                            start_string(sources, stmts[j].span),
                            stmts[j].from,
                            stmts[j].to
                        )
                    })
                    .collect();
                lines.sort();
                diags.push(Diagnostic::error(
                    "Cyclic dependency in move statements",
                    format!("The following chained move statements form a cycle, and so there is no final location to move objects to:{}\n\nA chain of move statements must end with an address that doesn't appear in any other statements, and which typically also refers to an object still declared in the configuration.", lines.concat()),
                ));
                return None;
            }
        }
    }
    Some(out)
}

/// After the plan: a move from a resource instance that the configuration still declares
/// (the plan has it, and not to delete or forget) is Terraform's error.
pub(crate) fn check_instance_sources(
    config: &Config,
    refactor: &Refactor,
    plan: &crate::plan::Plan,
    diags: &mut Diagnostics,
) {
    use crate::plan::Action;
    let planned: BTreeSet<&ResourceInstanceAddr> = plan
        .changes
        .iter()
        .filter(|c| !matches!(c.action, Action::Delete | Action::Forget))
        .map(|c| &c.addr)
        .collect();
    for (from, to, span) in &refactor.instance_sources {
        if from.resource.mode != Mode::Managed || !planned.contains(from) {
            continue;
        }
        // Terraform blames the expression that decides the instances, else the block.
        let key = ResourceKey {
            mode: from.resource.mode,
            type_: from.resource.type_.clone(),
            name: from.resource.name.clone(),
        };
        let at = config
            .module(&from.resource.module.without_keys())
            .and_then(|m| m.resources.get(&key))
            .map(|r| match r.for_each.as_deref().or(r.count.as_deref()) {
                Some(e) => crate::config::span_in(r.file, e),
                None => r.span,
            })
            .map(|s| format!(" at {}", start_string(&config.sources, s)))
            .unwrap_or_default();
        diags.push(
            Diagnostic::error(
                "Moved object still exists",
                format!("This statement declares a move from {from}, but that resource instance is still declared{at}.\n\nChange your configuration so that this instance will be declared as {to} instead."),
            )
            .with_span(Some(*span)),
        );
    }
}
