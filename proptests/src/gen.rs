//! Generators of lifecycle scenarios: configurations, cloud edits, faults and operations.
//!
//! A configuration is not generated as text but as *seeds*: one small array of numbers per
//! block ("slot"), decoded in order by [`build`]. A slot may only refer to what the slots before
//! it declared, so every configuration is acyclic by construction, and a slot's decoding falls
//! back to a literal when it has nothing to refer to. Seeds make edits between runs natural
//! (replace one slot, push one, remove one: everything after it is rewired) and make proptest's
//! shrinking useful (fewer slots, smaller numbers, and 0 always means "the simplest choice").
//!
//! Lookups only use keys that exist when they are read: a thing's id (reached directly, through
//! a local, a module input or a module output), a thing's name (with a `depends_on` on it), or
//! an `ext` table key (`k1`, `k2`; cloud edits can remove them, and then the read error is the
//! expected outcome). Names are unique per block and per instance (`t3`, `t3c0`, `t3ka`) so ids
//! do not depend on the order of concurrent creates, and region strings are thing ids
//! (`t0-1`): safe directory names.

use proptest::prelude::*;
use std::fmt;

/// The numbers one block is decoded from.
pub type Seed = [u16; 6];

/// Configuration seeds: the root's slots, the child module's slots, and switches.
#[derive(Clone, PartialEq, Eq)]
pub struct Seeds {
    pub root: Vec<Seed>,
    pub child: Vec<Seed>,
    /// Bit 0: declare `provider "sim" { alias = "dyn" }` configured from the first root thing's
    /// id. Bits 1..: which expression the root output takes.
    pub switches: u16,
}

/// How a resource is repeated.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Rep {
    One,
    Count(u8),
    ForEach(Vec<String>),
}

/// What an expression refers to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Ref {
    /// `sim_thing.L[first].ATTR` (ATTR is `id` or `out`).
    Thing(String, &'static str),
    /// `data.sim_lookup.L.result`
    Data(String),
    Local(String),
    /// `var.in` (child module only)
    Var,
    /// `module.m.out` (root only)
    ModOut,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Expr {
    Lit(String),
    Ref(Ref),
}

/// What a `depends_on` lists.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    Thing(String),
    Data(String),
    Module,
}

/// What an expression's value is: a thing's id (usable as a lookup key in the thing's
/// region), or any other string.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Kind {
    /// The id of thing `label` (in `module`: "" root, "m" child); `dyn`: it lives in the
    /// `sim.dyn` region.
    Id {
        dyn_: bool,
    },
    Str,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Thing {
    pub label: String,
    /// The name of instance 0's base (`t3`, `t3x`): instances are `NAME`, `NAMEc<i>`, `NAMEk<key>`.
    pub name: String,
    pub value: Expr,
    pub rep: Rep,
    pub dyn_: bool,
    pub depends_on: Vec<Target>,
}

impl Thing {
    /// The name of the first instance (what `first` refers to).
    pub fn first_name(&self) -> String {
        match &self.rep {
            Rep::One => self.name.clone(),
            Rep::Count(_) => format!("{}c0", self.name),
            Rep::ForEach(keys) => format!("{}k{}", self.name, keys[0]),
        }
    }
    /// The index of the first instance in an address: ``, `[0]`, `["a"]`.
    pub fn first_index(&self) -> String {
        match &self.rep {
            Rep::One => String::new(),
            Rep::Count(_) => "[0]".into(),
            Rep::ForEach(keys) => format!("[\"{}\"]", keys[0]),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lookup {
    pub label: String,
    pub key: Expr,
    pub dyn_: bool,
    pub depends_on: Vec<Target>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Item {
    Thing(Thing),
    Lookup(Lookup),
    Local {
        label: String,
        value: Expr,
    },
    /// `module "m" { source = "./modules/m"; in = INPUT; depends_on = ... }`
    Call {
        input: Expr,
        depends_on: Vec<Target>,
    },
}

/// One module: its blocks in declaration order, and its output `out` (child) / `o` (root).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Module {
    pub items: Vec<Item>,
    pub output: Option<Expr>,
}

/// A decoded configuration.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Cfg {
    pub root: Module,
    /// Present when the root has a `module "m"` call.
    pub child: Option<Module>,
    /// `provider "sim" { alias = "dyn"; region = sim_thing.<this>.id }`
    pub dyn_region: Option<String>,
    /// What a targeted round sets beyond the seeds.
    pub tweak: Tweak,
}

/// What a targeted round (the crash property's) sets on the root module beyond what seeds
/// decode to: the lifecycle events no generated configuration brings about by itself.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Tweak {
    /// `provider "sim" { latency_ms = N }`: a changed N reconfigures the default instance in
    /// place (`ProviderUpdated`).
    pub latency_ms: Option<u8>,
    /// Every root thing has `lifecycle { create_before_destroy = true }`.
    pub cbd: bool,
    /// Root things whose name gets the suffix `r` (applied to the decoded [`Thing`]s by
    /// [`Scenario::configs`]): a replacement; with `cbd`, the old object is deposed first
    /// (`ObjectDeposed`).
    pub renamed: Vec<String>,
    /// Root things moved to `provider "sim" { alias = "same" }`, configured as the default
    /// instance is without a block: an equal configuration to the one their objects were made
    /// with, so they move without replacement (`ResourceRehomed`); each also gains a
    /// `depends_on` of the first root thing, which state records (`DependenciesUpdated`).
    pub same: Vec<String>,
    /// `sim.dyn` leaves the configuration (applied to the decoded configuration by
    /// [`Scenario::configs`]; its things and lookups move to the default instance): an
    /// instance in state that nothing uses any more (`ProviderRemoved`).
    pub drop_dyn: bool,
}

impl Cfg {
    pub fn things(&self, child: bool) -> impl Iterator<Item = &Thing> {
        let m = if child {
            self.child.as_ref()
        } else {
            Some(&self.root)
        };
        m.into_iter()
            .flat_map(|m| m.items.iter())
            .filter_map(|i| match i {
                Item::Thing(t) => Some(t),
                _ => None,
            })
    }
    pub fn lookups(&self, child: bool) -> impl Iterator<Item = &Lookup> {
        let m = if child {
            self.child.as_ref()
        } else {
            Some(&self.root)
        };
        m.into_iter()
            .flat_map(|m| m.items.iter())
            .filter_map(|i| match i {
                Item::Lookup(l) => Some(l),
                _ => None,
            })
    }
}

/// What a module's slots can refer to while being decoded.
#[derive(Default)]
struct Avail {
    /// (label, kind of its id, name of its first instance, dyn)
    things: Vec<(String, bool, String)>,
    datas: Vec<String>,
    locals: Vec<(String, Kind)>,
    var_in: Option<Kind>,
    modout: Option<Kind>,
    has_call: bool,
}

impl Avail {
    /// Every expression a value may take, with its kind.
    fn exprs(&self) -> Vec<(Expr, Kind)> {
        let mut out = Vec::new();
        for (l, dyn_, _) in &self.things {
            out.push((
                Expr::Ref(Ref::Thing(l.clone(), "id")),
                Kind::Id { dyn_: *dyn_ },
            ));
            out.push((Expr::Ref(Ref::Thing(l.clone(), "out")), Kind::Str));
        }
        for d in &self.datas {
            out.push((Expr::Ref(Ref::Data(d.clone())), Kind::Str));
        }
        for (l, k) in &self.locals {
            out.push((Expr::Ref(Ref::Local(l.clone())), k.clone()));
        }
        if let Some(k) = &self.var_in {
            out.push((Expr::Ref(Ref::Var), k.clone()));
        }
        if let Some(k) = &self.modout {
            out.push((Expr::Ref(Ref::ModOut), k.clone()));
        }
        out
    }
    /// A value: 0 is a literal, otherwise one of the expressions available.
    fn value(&self, choice: u16, lit: u16) -> (Expr, Kind) {
        let exprs = self.exprs();
        if choice.is_multiple_of(3) || exprs.is_empty() {
            return (Expr::Lit(format!("v{}", lit % 4)), Kind::Str);
        }
        exprs[(choice as usize / 3) % exprs.len()].clone()
    }
    fn target(&self, choice: u16) -> Option<Target> {
        let mut all: Vec<Target> = self
            .things
            .iter()
            .map(|t| Target::Thing(t.0.clone()))
            .collect();
        all.extend(self.datas.iter().map(|d| Target::Data(d.clone())));
        if self.has_call {
            all.push(Target::Module);
        }
        if choice % 4 != 1 || all.is_empty() {
            return None;
        }
        Some(all[(choice as usize / 4) % all.len()].clone())
    }
}

fn decode_module(
    slots: &[Seed],
    child: bool,
    var_in: Option<Kind>,
    cfg: &mut Cfg,
    child_seeds: &[Seed],
    switches: u16,
) -> Module {
    let mut avail = Avail {
        var_in,
        ..Avail::default()
    };
    let mut m = Module::default();
    let prefix = if child { "m" } else { "" };
    for (i, s) in slots.iter().enumerate() {
        let kind = s[0] % 10;
        match kind {
            // Things are the most common block.
            0..=3 => {
                let label = format!("t{i}");
                let rep = match s[1] % 6 {
                    4 => Rep::Count(1 + (s[1] / 6 % 2) as u8),
                    5 => Rep::ForEach(if s[1] / 6 % 2 == 0 {
                        vec!["a".into()]
                    } else {
                        vec!["a".into(), "b".into()]
                    }),
                    _ => Rep::One,
                };
                let suffix = ["", "x", "y"][(s[2] % 3) as usize];
                let name = format!("{prefix}{label}{suffix}");
                // The first root thing with one instance configures `sim.dyn`, when enabled.
                let region_source =
                    !child && cfg.dyn_region.is_none() && switches & 1 == 1 && rep == Rep::One;
                let dyn_ = !child && cfg.dyn_region.is_some() && s[5] % 3 != 1;
                let (value, _) = avail.value(s[3], s[4]);
                let depends_on = avail.target(s[5] / 3).into_iter().collect();
                let t = Thing {
                    label: label.clone(),
                    name,
                    value,
                    rep,
                    dyn_,
                    depends_on,
                };
                avail.things.push((label.clone(), dyn_, t.first_name()));
                m.items.push(Item::Thing(t));
                if region_source {
                    cfg.dyn_region = Some(label);
                }
            }
            4..=6 => {
                let label = format!("d{i}");
                // Key: an id, a thing's name (with depends_on), or an ext key.
                let ids: Vec<(Expr, bool)> = avail
                    .exprs()
                    .into_iter()
                    .filter_map(|(e, k)| match k {
                        Kind::Id { dyn_ } if !(child && dyn_) => Some((e, dyn_)),
                        _ => None,
                    })
                    .collect();
                let names: Vec<(String, String, bool)> = avail
                    .things
                    .iter()
                    .map(|(l, d, n)| (l.clone(), n.clone(), *d))
                    .collect();
                let mut depends_on: Vec<Target> = Vec::new();
                let (key, dyn_) = match s[1] % 4 {
                    1 if !ids.is_empty() => ids[(s[2] as usize) % ids.len()].clone(),
                    // Through a local declared for it: the lookup depends on the thing only
                    // indirectly (the case Terraform's deferral misses).
                    2 if !ids.is_empty() => {
                        let (e, dyn_) = ids[(s[2] as usize) % ids.len()].clone();
                        let local = format!("l{i}");
                        avail.locals.push((local.clone(), Kind::Id { dyn_ }));
                        m.items.push(Item::Local {
                            label: local.clone(),
                            value: e,
                        });
                        (Expr::Ref(Ref::Local(local)), dyn_)
                    }
                    3 if !names.is_empty() => {
                        let (l, n, d) = &names[(s[2] as usize) % names.len()];
                        depends_on.push(Target::Thing(l.clone()));
                        (Expr::Lit(n.clone()), *d)
                    }
                    _ => (Expr::Lit(format!("k{}", 1 + s[2] % 2)), false),
                };
                if let Some(t) = avail.target(s[3]) {
                    if !depends_on.contains(&t) {
                        depends_on.push(t);
                    }
                }
                avail.datas.push(label.clone());
                m.items.push(Item::Lookup(Lookup {
                    label,
                    key,
                    dyn_,
                    depends_on,
                }));
            }
            7 | 8 => {
                let label = format!("l{i}");
                let (value, kind) = avail.value(s[1], s[2]);
                avail.locals.push((label.clone(), kind));
                m.items.push(Item::Local { label, value });
            }
            _ if !child && !avail.has_call => {
                let (input, kind) = avail.value(s[1], s[2]);
                let depends_on: Vec<Target> = avail.target(s[3]).into_iter().collect();
                // The child sees `var.in`; a dyn id is only a string to it (it has no dyn).
                let inner_kind = match kind {
                    Kind::Id { dyn_: false } => Kind::Id { dyn_: false },
                    _ => Kind::Str,
                };
                let body = decode_module(child_seeds, true, Some(inner_kind), cfg, &[], 0);
                avail.modout = Some(match &body.output {
                    Some(Expr::Ref(Ref::Thing(_, "id"))) => Kind::Id { dyn_: false },
                    Some(Expr::Ref(Ref::Var)) => match kind {
                        Kind::Id { dyn_ } => Kind::Id { dyn_ },
                        Kind::Str => Kind::Str,
                    },
                    Some(Expr::Ref(Ref::Local(l))) => body
                        .items
                        .iter()
                        .find_map(|it| match it {
                            Item::Local {
                                label,
                                value: Expr::Ref(Ref::Thing(_, "id")),
                            } if label == l => Some(Kind::Id { dyn_: false }),
                            _ => None,
                        })
                        .unwrap_or(Kind::Str),
                    _ => Kind::Str,
                });
                cfg.child = Some(body);
                avail.has_call = true;
                m.items.push(Item::Call { input, depends_on });
            }
            _ => {
                let label = format!("l{i}");
                let (value, kind) = avail.value(s[1], s[2]);
                avail.locals.push((label.clone(), kind));
                m.items.push(Item::Local { label, value });
            }
        }
    }
    // The output: a child always has one (it may be null-free literal); the root sometimes.
    let choice = if child {
        slots.first().map(|s| s[5]).unwrap_or(0)
    } else {
        switches >> 1
    };
    if child || choice % 2 == 1 {
        let exprs = avail.exprs();
        m.output = Some(if exprs.is_empty() {
            Expr::Lit("none".into())
        } else {
            exprs[(choice as usize / 2) % exprs.len()].0.clone()
        });
    }
    m
}

/// Decodes seeds into a configuration.
pub fn build(seeds: &Seeds) -> Cfg {
    let mut cfg = Cfg::default();
    let root = decode_module(
        &seeds.root,
        false,
        None,
        &mut cfg,
        &seeds.child,
        seeds.switches,
    );
    cfg.root = root;
    // A region source renamed away leaves dyn things pointing nowhere: keep them consistent.
    cfg
}

// ---------------------------------------------------------------------------------------
// Rendering

fn render_expr(e: &Expr, m: &Module) -> String {
    match e {
        Expr::Lit(s) => format!("\"{s}\""),
        Expr::Ref(r) => render_ref(r, m),
    }
}

fn render_ref(r: &Ref, m: &Module) -> String {
    match r {
        Ref::Thing(l, attr) => {
            let idx = m
                .items
                .iter()
                .find_map(|i| match i {
                    Item::Thing(t) if &t.label == l => Some(t.first_index()),
                    _ => None,
                })
                .unwrap_or_default();
            format!("sim_thing.{l}{idx}.{attr}")
        }
        Ref::Data(l) => format!("data.sim_lookup.{l}.result"),
        Ref::Local(l) => format!("local.{l}"),
        Ref::Var => "var.in".into(),
        Ref::ModOut => "module.m.out".into(),
    }
}

fn render_targets(ts: &[Target]) -> String {
    let parts: Vec<String> = ts
        .iter()
        .map(|t| match t {
            Target::Thing(l) => format!("sim_thing.{l}"),
            Target::Data(l) => format!("data.sim_lookup.{l}"),
            Target::Module => "module.m".into(),
        })
        .collect();
    format!("[{}]", parts.join(", "))
}

/// The HCL text of one module.
pub fn render_module(m: &Module, child: bool, dyn_region: Option<&str>) -> String {
    render_module_with(m, child, dyn_region, &Tweak::default())
}

/// [`render_module`] with a targeted round's [`Tweak`].
pub fn render_module_with(
    m: &Module,
    child: bool,
    dyn_region: Option<&str>,
    tweak: &Tweak,
) -> String {
    let mut out = String::new();
    if child {
        out.push_str("variable \"in\" {\n  type = string\n}\n\n");
    }
    let latency = tweak
        .latency_ms
        .map(|n| format!("  latency_ms = {n}\n"))
        .unwrap_or_default();
    if tweak.latency_ms.is_some() {
        out.push_str(&format!("provider \"sim\" {{\n{latency}}}\n\n"));
    }
    if !tweak.same.is_empty() {
        out.push_str("provider \"sim\" {\n  alias = \"same\"\n}\n\n");
    }
    if let Some(r) = dyn_region {
        let idx = m
            .items
            .iter()
            .find_map(|i| match i {
                Item::Thing(t) if t.label == r => Some(t.first_index()),
                _ => None,
            })
            .unwrap_or_default();
        out.push_str(&format!(
            "provider \"sim\" {{\n  alias  = \"dyn\"\n  region = sim_thing.{r}{idx}.id\n}}\n\n"
        ));
    }
    for item in &m.items {
        match item {
            Item::Thing(t) => {
                out.push_str(&format!("resource \"sim_thing\" \"{}\" {{\n", t.label));
                let name = &t.name;
                match &t.rep {
                    Rep::One => out.push_str(&format!("  name  = \"{name}\"\n")),
                    Rep::Count(n) => out.push_str(&format!(
                        "  count = {n}\n  name  = \"{name}c${{count.index}}\"\n"
                    )),
                    Rep::ForEach(keys) => {
                        let ks: Vec<String> = keys.iter().map(|k| format!("\"{k}\"")).collect();
                        out.push_str(&format!(
                            "  for_each = toset([{}])\n  name  = \"{name}k${{each.key}}\"\n",
                            ks.join(", "),
                        ));
                    }
                }
                out.push_str(&format!("  value = {}\n", render_expr(&t.value, m)));
                if t.dyn_ {
                    out.push_str("  provider = sim.dyn\n");
                } else if tweak.same.contains(&t.label) {
                    out.push_str("  provider = sim.same\n");
                }
                if !t.depends_on.is_empty() {
                    out.push_str(&format!(
                        "  depends_on = {}\n",
                        render_targets(&t.depends_on)
                    ));
                }
                if tweak.cbd {
                    out.push_str("  lifecycle {\n    create_before_destroy = true\n  }\n");
                }
                out.push_str("}\n\n");
            }
            Item::Lookup(l) => {
                out.push_str(&format!(
                    "data \"sim_lookup\" \"{}\" {{\n  key = {}\n",
                    l.label,
                    render_expr(&l.key, m)
                ));
                if l.dyn_ {
                    out.push_str("  provider = sim.dyn\n");
                }
                if !l.depends_on.is_empty() {
                    out.push_str(&format!(
                        "  depends_on = {}\n",
                        render_targets(&l.depends_on)
                    ));
                }
                out.push_str("}\n\n");
            }
            Item::Local { label, value } => {
                out.push_str(&format!(
                    "locals {{\n  {label} = {}\n}}\n\n",
                    render_expr(value, m)
                ));
            }
            Item::Call { input, depends_on } => {
                out.push_str(&format!(
                    "module \"m\" {{\n  source = \"./modules/m\"\n  in     = {}\n",
                    render_expr(input, m)
                ));
                if !depends_on.is_empty() {
                    out.push_str(&format!("  depends_on = {}\n", render_targets(depends_on)));
                }
                out.push_str("}\n\n");
            }
        }
    }
    if let Some(o) = &m.output {
        let name = if child { "out" } else { "o" };
        out.push_str(&format!(
            "output \"{name}\" {{\n  value = {}\n}}\n",
            render_expr(o, m)
        ));
    }
    out
}

impl Cfg {
    /// The files of the configuration: `main.tf` and, with a module call, `modules/m/main.tf`.
    pub fn files(&self) -> Vec<(String, String)> {
        let mut files = vec![(
            "main.tf".to_string(),
            render_module_with(&self.root, false, self.dyn_region.as_deref(), &self.tweak),
        )];
        if let Some(c) = &self.child {
            files.push((
                "modules/m/main.tf".to_string(),
                render_module(c, true, None),
            ));
        }
        files
    }
}

// ---------------------------------------------------------------------------------------
// Scenarios

/// An edit made to the cloud behind Cairn's back. Objects are chosen by position among the
/// objects of region `local`, sorted by id, at the time of the edit (modulo their number).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CloudEdit {
    Delete(u16),
    SetValue(u16, u16),
    ExtSet(u8, u16),
    ExtRm(u8),
}

/// A fault injected for one operation through `SIM_FAIL`: `OP:NAME[:after]`. The name is
/// chosen among the names the configuration's things have (by position).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fault {
    pub op: &'static str,
    pub which: u16,
    pub after: bool,
    /// Aim at a thing that other things depend on (when the configuration has one): the
    /// failures whose skipped dependents rules 3 and 9 are about.
    pub hub: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    Plan,
    PlanReadOnly,
    PlanDestroy,
    Apply,
    ApplyReadOnly,
    Refresh,
    Destroy,
}

impl Op {
    pub fn script(self) -> &'static str {
        match self {
            Op::Plan => "plan",
            Op::PlanReadOnly => "plan -read-only",
            Op::PlanDestroy => "plan -destroy",
            Op::Apply => "apply",
            Op::ApplyReadOnly => "apply -read-only",
            Op::Refresh => "refresh",
            Op::Destroy => "destroy",
        }
    }
}

/// One round: maybe a configuration edit, cloud edits, maybe a fault, then an operation.
#[derive(Clone, PartialEq, Eq)]
pub struct Round {
    /// (what, seed): what % 3 == 0 replaces slot what/3, 1 pushes a slot, 2 removes slot what/3;
    /// what/3 % 2 chooses the root or the child.
    pub edits: Vec<(u16, Seed)>,
    pub cloud: Vec<CloudEdit>,
    pub fault: Option<Fault>,
    pub op: Op,
    pub parallelism: usize,
    /// Set on the round's configuration after decoding (targeted rounds only).
    pub tweak: Tweak,
}

/// A whole scenario: the first configuration, then rounds.
#[derive(Clone, PartialEq, Eq)]
pub struct Scenario {
    pub seeds: Seeds,
    pub rounds: Vec<Round>,
}

impl Seeds {
    /// The seeds after a round's edits.
    pub fn edited(&self, edits: &[(u16, Seed)]) -> Seeds {
        let mut s = self.clone();
        for (what, seed) in edits {
            let slots = if (what / 3) % 2 == 0 {
                &mut s.root
            } else {
                &mut s.child
            };
            let at = (*what as usize / 6) % slots.len().max(1);
            match what % 3 {
                0 if !slots.is_empty() => slots[at] = *seed,
                2 if slots.len() > 1 => {
                    slots.remove(at);
                }
                _ => slots.push(*seed),
            }
            slots.truncate(7);
        }
        s
    }
}

impl Scenario {
    /// The configuration of each round (round 0 uses the base seeds plus its edits).
    pub fn configs(&self) -> Vec<Cfg> {
        let mut seeds = self.seeds.clone();
        self.rounds
            .iter()
            .map(|r| {
                seeds = seeds.edited(&r.edits);
                let mut cfg = build(&seeds);
                cfg.tweak = r.tweak.clone();
                if r.tweak.drop_dyn {
                    cfg.dyn_region = None;
                }
                // A lookup by a renamed thing's name looks up its new name.
                let mut names = std::collections::BTreeMap::new();
                let first = cfg.root.items.iter().find_map(|i| match i {
                    Item::Thing(t) => Some(t.label.clone()),
                    _ => None,
                });
                for item in &mut cfg.root.items {
                    match item {
                        Item::Thing(t) => {
                            // A thing moved to `sim.same` also gains a dependency on the first
                            // thing (an earlier one: no cycle); unchanged otherwise, it is a
                            // no-op whose new dependency state records (`DependenciesUpdated`).
                            if let Some(f) = first
                                .as_ref()
                                .filter(|f| r.tweak.same.contains(&t.label) && **f != t.label)
                            {
                                let target = Target::Thing(f.clone());
                                if !t.depends_on.contains(&target) {
                                    t.depends_on.push(target);
                                }
                            }
                            if r.tweak.renamed.contains(&t.label) {
                                let old = t.first_name();
                                t.name.push('r');
                                names.insert(old, t.first_name());
                            }
                            t.dyn_ &= !r.tweak.drop_dyn;
                        }
                        Item::Lookup(l) => {
                            l.dyn_ &= !r.tweak.drop_dyn;
                            if let Expr::Lit(key) = &mut l.key {
                                if let Some(new) = names.get(key) {
                                    *key = new.clone();
                                }
                            }
                        }
                        _ => {}
                    }
                }
                cfg
            })
            .collect()
    }
}

fn seed() -> impl Strategy<Value = Seed> {
    any::<[u16; 6]>()
}

/// How a configuration's blocks are drawn. Every slot is still a [`Seed`] decoded by
/// [`build`] (so shrinking and edits work the same); a profile only steers the numbers that
/// choose a block's kind, a lookup key's form, a value's form and a resource's repetition, so
/// that a property's generator reaches the configurations its rule is about often, instead of
/// by luck. Weights are relative; index 0 of each is the simplest choice (what shrinking
/// goes to).
#[derive(Clone, Copy, Debug)]
pub struct Profile {
    /// A slot's block: thing, lookup, local, module call.
    pub blocks: [u32; 4],
    /// A lookup's key: an `ext` key, a thing's id, a thing's id through a local declared for
    /// it, a thing's name (with `depends_on`).
    pub keys: [u32; 4],
    /// A value (thing value, local, module input): a literal, a reference.
    pub values: [u32; 2],
    /// A thing's repetition: one, `count`, `for_each`.
    pub reps: [u32; 3],
    /// The root's and the child module's number of slots (half-open ranges).
    pub root: (usize, usize),
    pub child: (usize, usize),
    /// Percent of configurations declaring `sim.dyn`.
    pub dyn_: u32,
}

/// The unsteered distribution (every number uniform).
pub const PLAIN: Profile = Profile {
    blocks: [4, 3, 2, 1],
    keys: [1, 1, 1, 1],
    values: [1, 2],
    reps: [4, 1, 1],
    root: (1, 6),
    child: (0, 3),
    dyn_: 50,
};

/// Index `i` with weight `w[i]` (index 0 when every weight is 0).
pub fn weighted(w: &[u32]) -> BoxedStrategy<usize> {
    let options: Vec<(u32, BoxedStrategy<usize>)> = w
        .iter()
        .enumerate()
        .filter(|(_, w)| **w > 0)
        .map(|(i, w)| (*w, Just(i).boxed()))
        .collect();
    if options.is_empty() {
        return Just(0).boxed();
    }
    proptest::strategy::Union::new_weighted(options).boxed()
}

/// A seed whose block kind, key form, value form and repetition follow `p`.
pub fn steered_seed(p: Profile) -> impl Strategy<Value = Seed> {
    (
        weighted(&p.blocks),
        weighted(&p.keys),
        weighted(&p.values),
        weighted(&p.reps),
        any::<[u16; 6]>(),
    )
        .prop_map(|(block, key, value, rep, mut s)| {
            // Each choice is the residue the decoder reads; the quotient stays random (it
            // picks among the candidates).
            let value_choice =
                |raw: u16| (raw % 20000) * 3 + if value == 0 { 0 } else { 1 + raw % 2 };
            let kind = match block {
                0 => s[0] % 4,
                1 => 4 + s[0] % 3,
                2 => 7 + s[0] % 2,
                _ => 9,
            };
            s[0] = (s[0] % 6000) * 10 + kind;
            match block {
                0 => {
                    let code = match rep {
                        0 => s[1] % 4,
                        1 => 4,
                        _ => 5,
                    };
                    s[1] = (s[1] % 10000) * 6 + code;
                    s[3] = value_choice(s[3]);
                }
                1 => s[1] = (s[1] % 16000) * 4 + key as u16,
                _ => s[1] = value_choice(s[1]),
            }
            s
        })
}

pub fn seeds() -> impl Strategy<Value = Seeds> {
    (
        prop::collection::vec(seed(), 1..6),
        prop::collection::vec(seed(), 0..3),
        any::<u16>(),
    )
        .prop_map(|(root, child, switches)| Seeds {
            root,
            child,
            switches,
        })
}

/// Configuration seeds drawn with profile `p`.
pub fn steered_seeds(p: Profile) -> impl Strategy<Value = Seeds> {
    (
        prop::collection::vec(steered_seed(p), p.root.0..p.root.1),
        prop::collection::vec(steered_seed(p), p.child.0..p.child.1),
        any::<u16>(),
        prop::bool::weighted(p.dyn_ as f64 / 100.0),
    )
        .prop_map(|(root, child, switches, dyn_)| Seeds {
            root,
            child,
            switches: (switches & !1) | dyn_ as u16,
        })
}

fn cloud_edit() -> impl Strategy<Value = CloudEdit> {
    prop_oneof![
        (any::<u16>()).prop_map(CloudEdit::Delete),
        (any::<u16>(), any::<u16>()).prop_map(|(a, b)| CloudEdit::SetValue(a, b)),
        (1u8..3, any::<u16>()).prop_map(|(k, v)| CloudEdit::ExtSet(k, v)),
        (1u8..3).prop_map(CloudEdit::ExtRm),
    ]
}

/// The operations a fault can hit, in the order of [`Mix::fault_ops`].
pub const FAULT_OPS: [&str; 5] = ["create", "update", "delete", "read", "lookup"];

pub fn fault(ops: [u32; 5]) -> impl Strategy<Value = Fault> {
    (weighted(&ops), any::<u16>(), any::<bool>(), any::<bool>()).prop_map(
        |(op, which, after, hub)| Fault {
            op: FAULT_OPS[op],
            which,
            after,
            hub,
        },
    )
}

/// Which operations a scenario draws from.
#[derive(Clone, Copy, Debug)]
pub struct Mix {
    /// Weight of faults (out of 10 rounds).
    pub faults: u32,
    /// Weight of cloud edits.
    pub cloud: u32,
    /// Weight of configuration edits.
    pub edits: u32,
    /// Weights of the operation a fault hits, in the order of [`FAULT_OPS`].
    pub fault_ops: [u32; 5],
}

impl Mix {
    /// Faults, cloud and configuration edits with these weights; faults hit any operation.
    pub const fn new(faults: u32, cloud: u32, edits: u32) -> Mix {
        Mix {
            faults,
            cloud,
            edits,
            fault_ops: [1; 5],
        }
    }
}

pub fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        2 => Just(Op::Plan),
        1 => Just(Op::PlanReadOnly),
        1 => Just(Op::PlanDestroy),
        5 => Just(Op::Apply),
        1 => Just(Op::ApplyReadOnly),
        1 => Just(Op::Refresh),
        1 => Just(Op::Destroy),
    ]
}

pub fn round(mix: Mix, ops: BoxedStrategy<Op>) -> impl Strategy<Value = Round> {
    round_with(PLAIN, mix, ops)
}

/// A round whose configuration edits bring slots drawn with profile `p`.
pub fn round_with(p: Profile, mix: Mix, ops: BoxedStrategy<Op>) -> impl Strategy<Value = Round> {
    let edits = prop::collection::vec((any::<u16>(), steered_seed(p)), 0..3);
    let cloud = prop::collection::vec(cloud_edit(), 0..3);
    (
        prop::bool::weighted(mix.edits as f64 / 10.0),
        edits,
        prop::bool::weighted(mix.cloud as f64 / 10.0),
        cloud,
        if mix.faults == 0 {
            Just(None).boxed()
        } else {
            prop::option::weighted(mix.faults as f64 / 10.0, fault(mix.fault_ops)).boxed()
        },
        ops,
        prop::sample::select(vec![1usize, 2, 8]),
    )
        .prop_map(|(e, edits, c, cloud, fault, op, parallelism)| Round {
            edits: if e { edits } else { Vec::new() },
            cloud: if c { cloud } else { Vec::new() },
            fault,
            op,
            parallelism,
            tweak: Tweak::default(),
        })
}

/// Scenarios with `rounds` rounds drawn from `ops`.
pub fn scenario(
    mix: Mix,
    ops: BoxedStrategy<Op>,
    rounds: std::ops::Range<usize>,
) -> impl Strategy<Value = Scenario> {
    scenario_with(PLAIN, mix, ops, rounds)
}

/// Scenarios whose configurations are drawn with profile `p`.
pub fn scenario_with(
    p: Profile,
    mix: Mix,
    ops: BoxedStrategy<Op>,
    rounds: std::ops::Range<usize>,
) -> impl Strategy<Value = Scenario> {
    (
        steered_seeds(p),
        prop::collection::vec(round_with(p, mix, ops), rounds),
    )
        .prop_map(|(seeds, rounds)| Scenario { seeds, rounds })
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:<{}thing #{}>{}",
            self.op,
            if self.hub { "depended-on " } else { "" },
            self.which,
            if self.after { ":after" } else { "" }
        )
    }
}

impl fmt::Display for Scenario {
    /// The scenario as a fixture: each configuration version's files, then `script.txt`.
    /// Cloud edits name objects by position (the harness's transcript names them by id).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let configs = self.configs();
        let mut script = String::new();
        let mut last: Option<&Cfg> = None;
        let mut version = 0;
        for (round, cfg) in self.rounds.iter().zip(&configs) {
            if last != Some(cfg) {
                version += 1;
                writeln!(f, "==> v{version}/")?;
                for (path, text) in cfg.files() {
                    writeln!(f, "--- v{version}/{path}\n{text}")?;
                }
                script.push_str(&format!("use v{version}\n"));
                last = Some(cfg);
            }
            for c in &round.cloud {
                script.push_str(&match c {
                    CloudEdit::Delete(i) => format!("cloud delete <object #{i}>\n"),
                    CloudEdit::SetValue(i, v) => {
                        format!("cloud set <object #{i}> value=c{}\n", v % 4)
                    }
                    CloudEdit::ExtSet(k, v) => format!("cloud ext k{k}=e{}\n", v % 4),
                    CloudEdit::ExtRm(k) => format!("cloud ext-rm k{k}\n"),
                });
            }
            if let Some(fault) = &round.fault {
                script.push_str(&format!("env SIM_FAIL={fault}\n"));
            }
            script.push_str(&format!(
                "{}  # -parallelism={}\n",
                round.op.script(),
                round.parallelism
            ));
            if round.fault.is_some() {
                script.push_str("env SIM_FAIL=\n");
            }
        }
        writeln!(f, "--- script.txt\n{script}")
    }
}

impl fmt::Debug for Scenario {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "\n{self}")
    }
}

impl fmt::Debug for Seeds {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let cfg = build(self);
        for (path, text) in cfg.files() {
            writeln!(f, "--- {path}\n{text}")?;
        }
        Ok(())
    }
}

impl fmt::Debug for Round {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} (-parallelism={}, {} edits, cloud {:?}, fault {:?})",
            self.op.script(),
            self.parallelism,
            self.edits.len(),
            self.cloud,
            self.fault
        )
    }
}
