//! The generated configuration's dependency structure, computed independently of the engine:
//! which managed resources a data source depends on for the deferral rule, and which things
//! an object transitively depends on for ordering and failure propagation.

use crate::gen::{Cfg, Expr, Item, Module, Ref, Target};
use std::collections::{BTreeSet, VecDeque};

/// A term of the configuration. `bool` is "in the child module".
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Term {
    Thing(bool, String),
    Data(bool, String),
    Local(bool, String),
    /// `module.m`'s `var.in`
    Var,
    /// `module.m`'s `output.out`
    Out,
    /// The `module "m"` call (its `depends_on`).
    Call,
    /// `provider "sim" { alias = "dyn" }`
    Dyn,
}

impl Term {
    /// The resource address (without instance key) of a thing or data term.
    pub fn resource(&self) -> Option<String> {
        let p = |c: &bool| if *c { "module.m." } else { "" };
        match self {
            Term::Thing(c, l) => Some(format!("{}sim_thing.{l}", p(c))),
            Term::Data(c, l) => Some(format!("{}data.sim_lookup.{l}", p(c))),
            _ => None,
        }
    }
}

/// How an edge counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Edge {
    /// A reference, a module input or output, a depends_on, an enclosing call.
    Dep,
    /// A resource → its provider instance (not followed by the deferral rule).
    Provider,
}

fn module(cfg: &Cfg, child: bool) -> Option<&Module> {
    if child {
        cfg.child.as_ref()
    } else {
        Some(&cfg.root)
    }
}

fn expr_terms(e: &Expr, child: bool) -> Vec<Term> {
    match e {
        Expr::Lit(_) => Vec::new(),
        Expr::Ref(r) => vec![match r {
            Ref::Thing(l, _) => Term::Thing(child, l.clone()),
            Ref::Data(l) => Term::Data(child, l.clone()),
            Ref::Local(l) => Term::Local(child, l.clone()),
            Ref::Var => Term::Var,
            Ref::ModOut => Term::Out,
        }],
    }
}

fn target_terms(cfg: &Cfg, ts: &[Target], child: bool) -> Vec<Term> {
    let mut out = Vec::new();
    for t in ts {
        match t {
            Target::Thing(l) => out.push(Term::Thing(child, l.clone())),
            Target::Data(l) => out.push(Term::Data(child, l.clone())),
            Target::Module => {
                // The call, every resource inside, and the module's outputs.
                out.push(Term::Call);
                out.extend(cfg.things(true).map(|t| Term::Thing(true, t.label.clone())));
                out.extend(cfg.lookups(true).map(|l| Term::Data(true, l.label.clone())));
                out.push(Term::Out);
            }
        }
    }
    out
}

/// The terms `t` depends on directly.
fn edges(cfg: &Cfg, t: &Term) -> Vec<(Term, Edge)> {
    let mut out: Vec<(Term, Edge)> = Vec::new();
    let dep = |v: Vec<Term>| v.into_iter().map(|t| (t, Edge::Dep)).collect::<Vec<_>>();
    let inside = |c: bool| {
        if c {
            vec![(Term::Call, Edge::Dep)]
        } else {
            Vec::new()
        }
    };
    match t {
        Term::Thing(c, l) => {
            if let Some(th) = cfg.things(*c).find(|x| &x.label == l) {
                out.extend(dep(expr_terms(&th.value, *c)));
                out.extend(dep(target_terms(cfg, &th.depends_on, *c)));
                if th.dyn_ {
                    out.push((Term::Dyn, Edge::Provider));
                }
                out.extend(inside(*c));
            }
        }
        Term::Data(c, l) => {
            if let Some(d) = cfg.lookups(*c).find(|x| &x.label == l) {
                out.extend(dep(expr_terms(&d.key, *c)));
                out.extend(dep(target_terms(cfg, &d.depends_on, *c)));
                if d.dyn_ {
                    out.push((Term::Dyn, Edge::Provider));
                }
                out.extend(inside(*c));
            }
        }
        Term::Local(c, l) => {
            if let Some(m) = module(cfg, *c) {
                for i in &m.items {
                    if let Item::Local { label, value } = i {
                        if label == l {
                            out.extend(dep(expr_terms(value, *c)));
                        }
                    }
                }
            }
            out.extend(inside(*c));
        }
        Term::Var => {
            for i in &cfg.root.items {
                if let Item::Call { input, .. } = i {
                    out.extend(dep(expr_terms(input, false)));
                }
            }
            out.push((Term::Call, Edge::Dep));
        }
        Term::Out => {
            if let Some(o) = cfg.child.as_ref().and_then(|c| c.output.as_ref()) {
                out.extend(dep(expr_terms(o, true)));
            }
            out.push((Term::Call, Edge::Dep));
        }
        Term::Call => {
            for i in &cfg.root.items {
                if let Item::Call { depends_on, .. } = i {
                    out.extend(dep(target_terms(cfg, depends_on, false)));
                }
            }
        }
        Term::Dyn => {
            if let Some(r) = &cfg.dyn_region {
                out.push((Term::Thing(false, r.clone()), Edge::Dep));
            }
        }
    }
    out
}

/// The resources (things and lookups) a data source depends on by the engine issue's rule:
/// through locals, variables, module inputs and outputs, `depends_on` (a module standing for
/// everything in it) and the `depends_on` of the enclosing call — stopping at resources, and
/// not through provider configurations.
pub fn deferral_deps(cfg: &Cfg, data: &Term) -> BTreeSet<Term> {
    let mut found = BTreeSet::new();
    let mut seen = BTreeSet::new();
    let mut queue: VecDeque<Term> = edges(cfg, data)
        .into_iter()
        .filter(|(_, e)| *e == Edge::Dep)
        .map(|(t, _)| t)
        .collect();
    while let Some(t) = queue.pop_front() {
        if !seen.insert(t.clone()) {
            continue;
        }
        match &t {
            Term::Thing(..) | Term::Data(..) => {
                found.insert(t);
            }
            Term::Call => {
                // From a call, only its own depends_on counts.
                queue.extend(edges(cfg, &t).into_iter().map(|(t, _)| t));
            }
            _ => queue.extend(
                edges(cfg, &t)
                    .into_iter()
                    .filter(|(_, e)| *e == Edge::Dep)
                    .map(|(t, _)| t),
            ),
        }
    }
    found
}

/// Every thing `t` depends on, transitively, through anything (data sources and provider
/// configurations included): what must be created or updated before it.
pub fn thing_deps(cfg: &Cfg, t: &Term) -> BTreeSet<Term> {
    let mut found = BTreeSet::new();
    let mut seen = BTreeSet::new();
    let mut queue: VecDeque<Term> = edges(cfg, t).into_iter().map(|(t, _)| t).collect();
    while let Some(x) = queue.pop_front() {
        if !seen.insert(x.clone()) {
            continue;
        }
        if let Term::Thing(..) = x {
            found.insert(x.clone());
        }
        queue.extend(edges(cfg, &x).into_iter().map(|(t, _)| t));
    }
    found
}

/// Every thing and data term of the configuration.
pub fn resources(cfg: &Cfg) -> Vec<Term> {
    let mut out = Vec::new();
    for c in [false, true] {
        out.extend(cfg.things(c).map(|t| Term::Thing(c, t.label.clone())));
        out.extend(cfg.lookups(c).map(|l| Term::Data(c, l.label.clone())));
    }
    out
}

/// Data terms in an order where every data source comes after the data sources it depends on.
pub fn data_in_order(cfg: &Cfg) -> Vec<Term> {
    let mut all: Vec<Term> = resources(cfg)
        .into_iter()
        .filter(|t| matches!(t, Term::Data(..)))
        .collect();
    let mut out: Vec<Term> = Vec::new();
    while !all.is_empty() {
        let before = all.len();
        let mut i = 0;
        while i < all.len() {
            let deps = deferral_deps(cfg, &all[i]);
            if deps
                .iter()
                .all(|d| !matches!(d, Term::Data(..)) || out.contains(d))
            {
                out.push(all.remove(i));
            } else {
                i += 1;
            }
        }
        if all.len() == before {
            // Not reachable for generated (acyclic) configurations.
            out.append(&mut all);
        }
    }
    out
}

/// The names of every instance of the things some other thing depends on (directly or
/// through locals, data sources, modules, `depends_on` or the `sim.dyn` configuration),
/// sorted: where an injected failure has dependents to skip.
pub fn depended_on_names(cfg: &Cfg) -> Vec<String> {
    let hubs: BTreeSet<Term> = resources(cfg)
        .iter()
        .filter(|t| matches!(t, Term::Thing(..)))
        .flat_map(|t| thing_deps(cfg, t))
        .collect();
    let mut out = Vec::new();
    for c in [false, true] {
        for t in cfg.things(c) {
            if !hubs.contains(&Term::Thing(c, t.label.clone())) {
                continue;
            }
            match &t.rep {
                crate::gen::Rep::One => out.push(t.name.clone()),
                crate::gen::Rep::Count(n) => out.extend((0..*n).map(|i| format!("{}c{i}", t.name))),
                crate::gen::Rep::ForEach(keys) => {
                    out.extend(keys.iter().map(|k| format!("{}k{k}", t.name)))
                }
            }
        }
    }
    out.sort();
    out
}
