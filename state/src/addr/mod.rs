//! Addresses: real types with a parser (`FromStr`) and a printer (`Display`) that round-trip.
//!
//! ```text
//! module.net["a"].sim_thing.web[0]     ResourceInstanceAddr
//! data.sim_lookup.x                    ResourceInstanceAddr (mode Data)
//! provider["sim"].east                 ProviderAddr
//! module.net.provider["sim"]           ProviderAddr scoped to a module
//! ```
//!
//! Provider addresses name the provider's *package* (the type prefix: `sim_thing` → `sim`) in
//! quotes, as Terraform names the provider's source address there.
//!
//! The other kinds of address live beside these: `provider_source` (`hashicorp/aws`: which
//! provider a local name means), `module_source` (where a module call's code comes from) and
//! `version` (versions and Terraform's version constraints). Config, engine, state and the
//! installer all take them from here.

pub mod module_source;
pub mod provider_source;
pub mod version;

use crate::quote::quote;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// The key of one instance of something with `count` (`Int`) or `for_each` (`Str`).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum InstanceKey {
    Int(i64),
    Str(String),
}

impl fmt::Display for InstanceKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InstanceKey::Int(i) => write!(f, "[{i}]"),
            InstanceKey::Str(s) => write!(f, "[{}]", quote(s)),
        }
    }
}

/// One step of a module instance path: `module.NAME` with an optional instance key.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ModuleStep {
    pub name: String,
    pub key: Option<InstanceKey>,
}

/// The path of a module instance from the root: empty for the root module.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ModulePath(pub Vec<ModuleStep>);

impl ModulePath {
    pub fn root() -> Self {
        ModulePath(Vec::new())
    }
    pub fn is_root(&self) -> bool {
        self.0.is_empty()
    }
    pub fn child(&self, name: &str, key: Option<InstanceKey>) -> Self {
        let mut steps = self.0.clone();
        steps.push(ModuleStep {
            name: name.to_string(),
            key,
        });
        ModulePath(steps)
    }
    pub fn parent(&self) -> Option<ModulePath> {
        if self.0.is_empty() {
            None
        } else {
            Some(ModulePath(self.0[..self.0.len() - 1].to_vec()))
        }
    }
    /// The same path with every instance key removed (the *static* module path).
    pub fn without_keys(&self) -> ModulePath {
        ModulePath(
            self.0
                .iter()
                .map(|s| ModuleStep {
                    name: s.name.clone(),
                    key: None,
                })
                .collect(),
        )
    }
    /// True when `self` is `other` or inside it.
    pub fn starts_with(&self, other: &ModulePath) -> bool {
        self.0.len() >= other.0.len() && self.0[..other.0.len()] == other.0[..]
    }
}

impl fmt::Display for ModulePath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, s) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(".")?;
            }
            write!(f, "module.{}", s.name)?;
            if let Some(k) = &s.key {
                write!(f, "{k}")?;
            }
        }
        Ok(())
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Mode {
    Managed,
    Data,
    /// `ephemeral "TYPE" "NAME"`: opened each run, never stored.
    Ephemeral,
}

/// A resource (all of its instances): `module.m.sim_thing.a`, `data.sim_lookup.x`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ResourceAddr {
    pub module: ModulePath,
    pub mode: Mode,
    pub type_: String,
    pub name: String,
}

impl ResourceAddr {
    pub fn new(module: ModulePath, mode: Mode, type_: &str, name: &str) -> Self {
        ResourceAddr {
            module,
            mode,
            type_: type_.to_string(),
            name: name.to_string(),
        }
    }
    pub fn instance(&self, key: Option<InstanceKey>) -> ResourceInstanceAddr {
        ResourceInstanceAddr {
            resource: self.clone(),
            key,
        }
    }
    /// The provider package of the type: the prefix before the first `_`.
    pub fn package(&self) -> &str {
        package_of(&self.type_)
    }
}

/// The provider package of a resource type: `sim_thing` → `sim`, `terraform_data` → `terraform`.
pub fn package_of(type_: &str) -> &str {
    type_.split('_').next().unwrap_or(type_)
}

impl fmt::Display for ResourceAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if !self.module.is_root() {
            write!(f, "{}.", self.module)?;
        }
        match self.mode {
            Mode::Data => f.write_str("data.")?,
            Mode::Ephemeral => f.write_str("ephemeral.")?,
            Mode::Managed => {}
        }
        write!(f, "{}.{}", self.type_, self.name)
    }
}

/// One instance of a resource: `module.net["a"].sim_thing.web[0]`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ResourceInstanceAddr {
    pub resource: ResourceAddr,
    pub key: Option<InstanceKey>,
}

impl ResourceInstanceAddr {
    /// The resource block this instance comes from, with module instance keys dropped
    /// (Terraform's "config resource": how a state's `dependencies` name a resource).
    pub fn config_resource(&self) -> ResourceAddr {
        ResourceAddr {
            module: self.resource.module.without_keys(),
            ..self.resource.clone()
        }
    }
}

impl fmt::Display for ResourceInstanceAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.resource)?;
        if let Some(k) = &self.key {
            write!(f, "{k}")?;
        }
        Ok(())
    }
}

/// A provider instance: `provider["sim"]`, `provider["sim"].east`, `module.m.provider["sim"]`,
/// and one instance of a block with `for_each` (OpenTofu's provider iteration):
/// `provider["sim"].by_region["us"]`.
/// Provider blocks cannot live inside modules with `count`/`for_each`, so the module path here
/// is a static one (no keys).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ProviderAddr {
    pub module: ModulePath,
    pub package: String,
    pub alias: Option<String>,
    /// The instance key of an aliased block with `for_each` (absent in records written
    /// before provider iteration: `None`).
    #[serde(default)]
    pub key: Option<InstanceKey>,
}

impl ProviderAddr {
    pub fn default_for(module: ModulePath, package: &str) -> Self {
        ProviderAddr {
            module,
            package: package.to_string(),
            alias: None,
            key: None,
        }
    }

    /// The provider block this instance comes from (its key dropped).
    pub fn config_addr(&self) -> ProviderAddr {
        ProviderAddr {
            key: None,
            ..self.clone()
        }
    }

    /// The instance `key` of this block.
    pub fn instance(&self, key: Option<InstanceKey>) -> ProviderAddr {
        ProviderAddr {
            key,
            ..self.clone()
        }
    }
}

impl fmt::Display for ProviderAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if !self.module.is_root() {
            write!(f, "{}.", self.module)?;
        }
        write!(f, "provider[{}]", quote(&self.package))?;
        if let Some(a) = &self.alias {
            write!(f, ".{a}")?;
        }
        if let Some(k) = &self.key {
            write!(f, "{k}")?;
        }
        Ok(())
    }
}

/// A parse error: the input and what was wrong with it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AddrError {
    pub(crate) input: String,
    pub(crate) message: String,
}

impl fmt::Display for AddrError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid address {:?}: {}", self.input, self.message)
    }
}

impl std::error::Error for AddrError {}

/// A small tokenizer shared by every address parser: identifiers, `.`, and `[key]`.
struct Cursor<'a> {
    input: &'a str,
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn new(input: &'a str) -> Self {
        Cursor { input, pos: 0 }
    }
    fn err(&self, message: impl Into<String>) -> AddrError {
        AddrError {
            input: self.input.to_string(),
            message: message.into(),
        }
    }
    fn rest(&self) -> &'a str {
        &self.input[self.pos..]
    }
    fn at_end(&self) -> bool {
        self.pos >= self.input.len()
    }
    fn peek(&self) -> Option<char> {
        self.rest().chars().next()
    }
    fn eat(&mut self, c: char) -> bool {
        if self.peek() == Some(c) {
            self.pos += c.len_utf8();
            true
        } else {
            false
        }
    }
    fn expect(&mut self, c: char) -> Result<(), AddrError> {
        if self.eat(c) {
            Ok(())
        } else {
            Err(self.err(format!("expected '{c}' at position {}", self.pos + 1)))
        }
    }
    fn ident(&mut self) -> Result<&'a str, AddrError> {
        let rest = self.rest();
        let mut end = 0;
        for (i, c) in rest.char_indices() {
            let ok = if i == 0 {
                c.is_alphabetic() || c == '_'
            } else {
                c.is_alphanumeric() || c == '_' || c == '-'
            };
            if !ok {
                break;
            }
            end = i + c.len_utf8();
        }
        if end == 0 {
            return Err(self.err(format!("expected a name at position {}", self.pos + 1)));
        }
        self.pos += end;
        Ok(&rest[..end])
    }
    fn peek_ident(&self) -> Option<&'a str> {
        let mut c = Cursor {
            input: self.input,
            pos: self.pos,
        };
        c.ident().ok()
    }
    fn string(&mut self) -> Result<String, AddrError> {
        self.expect('"')?;
        let mut out = String::new();
        loop {
            let c = self.peek().ok_or_else(|| self.err("unterminated string"))?;
            self.pos += c.len_utf8();
            match c {
                '"' => return Ok(out),
                '\\' => {
                    let e = self.peek().ok_or_else(|| self.err("unterminated escape"))?;
                    self.pos += e.len_utf8();
                    match e {
                        'n' => out.push('\n'),
                        'r' => out.push('\r'),
                        't' => out.push('\t'),
                        '"' => out.push('"'),
                        '\\' => out.push('\\'),
                        'u' => {
                            let hex = self
                                .rest()
                                .get(..4)
                                .ok_or_else(|| self.err("bad \\u escape"))?;
                            let n = u32::from_str_radix(hex, 16)
                                .map_err(|_| self.err("bad \\u escape"))?;
                            out.push(char::from_u32(n).ok_or_else(|| self.err("bad \\u escape"))?);
                            self.pos += 4;
                        }
                        other => return Err(self.err(format!("unknown escape \\{other}"))),
                    }
                }
                c => out.push(c),
            }
        }
    }
    /// `[0]` or `["key"]`, if present.
    fn key(&mut self) -> Result<Option<InstanceKey>, AddrError> {
        if !self.eat('[') {
            return Ok(None);
        }
        let key = if self.peek() == Some('"') {
            InstanceKey::Str(self.string()?)
        } else {
            let start = self.pos;
            if self.peek() == Some('-') {
                self.pos += 1;
            }
            while self.peek().is_some_and(|c| c.is_ascii_digit()) {
                self.pos += 1;
            }
            let digits = &self.input[start..self.pos];
            InstanceKey::Int(
                digits
                    .parse()
                    .map_err(|_| self.err("an instance key is a number or a quoted string"))?,
            )
        };
        self.expect(']')?;
        Ok(Some(key))
    }
    /// Leading `module.NAME[key].` steps.
    fn module_path(&mut self) -> Result<ModulePath, AddrError> {
        let mut steps = Vec::new();
        while self.peek_ident() == Some("module") && self.rest()[6..].starts_with('.') {
            let save = self.pos;
            self.pos += "module.".len();
            let name = self.ident()?.to_string();
            let key = self.key()?;
            if !self.eat('.') {
                // `module.m` alone is a module address, not a prefix: give it back.
                self.pos = save;
                break;
            }
            steps.push(ModuleStep { name, key });
        }
        Ok(ModulePath(steps))
    }
    fn finish(&self) -> Result<(), AddrError> {
        if self.at_end() {
            Ok(())
        } else {
            Err(self.err(format!(
                "unexpected {:?} at position {}",
                self.rest(),
                self.pos + 1
            )))
        }
    }
}

impl FromStr for ModulePath {
    type Err = AddrError;
    fn from_str(s: &str) -> Result<Self, AddrError> {
        if s.is_empty() {
            return Ok(ModulePath::root());
        }
        let mut c = Cursor::new(s);
        let mut steps = Vec::new();
        loop {
            if c.ident()? != "module" {
                return Err(c.err("a module path is a sequence of module.NAME steps"));
            }
            c.expect('.')?;
            let name = c.ident()?.to_string();
            let key = c.key()?;
            steps.push(ModuleStep { name, key });
            if c.at_end() {
                return Ok(ModulePath(steps));
            }
            c.expect('.')?;
        }
    }
}

impl FromStr for ResourceAddr {
    type Err = AddrError;
    fn from_str(s: &str) -> Result<Self, AddrError> {
        let inst: ResourceInstanceAddr = s.parse()?;
        if inst.key.is_some() {
            return Err(AddrError {
                input: s.into(),
                message: "expected a resource, not an instance".into(),
            });
        }
        Ok(inst.resource)
    }
}

impl FromStr for ResourceInstanceAddr {
    type Err = AddrError;
    fn from_str(s: &str) -> Result<Self, AddrError> {
        let mut c = Cursor::new(s);
        let module = c.module_path()?;
        let mut first = c.ident()?;
        let mode = match first {
            "data" | "ephemeral" => {
                let mode = if first == "data" {
                    Mode::Data
                } else {
                    Mode::Ephemeral
                };
                c.expect('.')?;
                first = c.ident()?;
                mode
            }
            _ => Mode::Managed,
        };
        if matches!(first, "module" | "provider" | "var" | "local" | "output") {
            return Err(c.err(format!("\"{first}\" does not start a resource address")));
        }
        let type_ = first.to_string();
        c.expect('.').map_err(|_| {
            c.err("a resource address is TYPE.NAME, optionally with data. and module. prefixes")
        })?;
        let name = c.ident()?.to_string();
        let key = c.key()?;
        c.finish()?;
        Ok(ResourceInstanceAddr {
            resource: ResourceAddr {
                module,
                mode,
                type_,
                name,
            },
            key,
        })
    }
}

impl FromStr for ProviderAddr {
    type Err = AddrError;
    fn from_str(s: &str) -> Result<Self, AddrError> {
        let mut c = Cursor::new(s);
        let module = c.module_path()?;
        if c.ident()? != "provider" {
            return Err(c.err("a provider address starts with provider[\"PACKAGE\"]"));
        }
        c.expect('[')?;
        let package = c.string()?;
        c.expect(']')?;
        let alias = if c.eat('.') {
            Some(c.ident()?.to_string())
        } else {
            None
        };
        let key = if alias.is_some() { c.key()? } else { None };
        c.finish()?;
        Ok(ProviderAddr {
            module: module.without_keys(),
            package,
            alias,
            key,
        })
    }
}

/// Any address a user may name on the command line (`-target`, `state show`, `state mv`).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Target {
    Module(ModulePath),
    Resource(ResourceAddr),
    Instance(ResourceInstanceAddr),
}

impl Target {
    /// True when `addr` is this target or inside it. A target written without instance keys
    /// (`module.m`, `sim_thing.a`) covers every instance of it.
    pub fn contains(&self, addr: &ResourceInstanceAddr) -> bool {
        let module_covers = |target: &ModulePath, module: &ModulePath| {
            module.starts_with(target)
                || (target.0.iter().all(|s| s.key.is_none())
                    && module.without_keys().starts_with(target))
        };
        match self {
            Target::Module(m) => module_covers(m, &addr.resource.module),
            Target::Resource(r) => {
                let a = &addr.resource;
                a.mode == r.mode
                    && a.type_ == r.type_
                    && a.name == r.name
                    && a.module.0.len() == r.module.0.len()
                    && module_covers(&r.module, &a.module)
            }
            Target::Instance(i) => addr == i,
        }
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::Module(m) => write!(f, "{m}"),
            Target::Resource(r) => write!(f, "{r}"),
            Target::Instance(i) => write!(f, "{i}"),
        }
    }
}

impl FromStr for Target {
    type Err = AddrError;
    fn from_str(s: &str) -> Result<Self, AddrError> {
        if let Ok(i) = s.parse::<ResourceInstanceAddr>() {
            return Ok(if i.key.is_none() {
                Target::Resource(i.resource)
            } else {
                Target::Instance(i)
            });
        }
        s.parse::<ModulePath>().map(Target::Module).map_err(|_| AddrError {
            input: s.to_string(),
            message: "expected a resource address (sim_thing.a, data.x.y, module.m.sim_thing.a[0]) or a module (module.m)"
                .into(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip<T: FromStr<Err = AddrError> + fmt::Display>(s: &str) {
        let parsed: T = s.parse().unwrap_or_else(|e| panic!("{s}: {e}"));
        assert_eq!(parsed.to_string(), s);
    }

    #[test]
    fn resource_instances_round_trip() {
        for s in [
            "sim_thing.a",
            "sim_thing.a[0]",
            "data.sim_lookup.x",
            "module.a[\"x\"].sim_thing.b[0]",
            "module.net[\"a\"].module.inner[3].data.sim_lookup.x[\"k\\\"q\"]",
            "module.m.sim_thing.web[-1]",
        ] {
            round_trip::<ResourceInstanceAddr>(s);
        }
    }

    #[test]
    fn providers_round_trip() {
        for s in [
            "provider[\"sim\"]",
            "provider[\"sim\"].east",
            "provider[\"sim\"].by_region[\"us\"]",
            "module.m.provider[\"sim\"]",
        ] {
            round_trip::<ProviderAddr>(s);
        }
    }

    #[test]
    fn modules_and_targets() {
        round_trip::<ModulePath>("module.a[\"x\"].module.b");
        assert_eq!(
            "module.m".parse::<Target>().unwrap(),
            Target::Module("module.m".parse().unwrap())
        );
        assert!(matches!(
            "sim_thing.a".parse::<Target>().unwrap(),
            Target::Resource(_)
        ));
        assert!(matches!(
            "sim_thing.a[1]".parse::<Target>().unwrap(),
            Target::Instance(_)
        ));
    }

    #[test]
    fn bad_addresses_say_what_is_wrong() {
        for s in [
            "",
            "sim_thing",
            "sim_thing.a[",
            "sim_thing.a[x]",
            "var.x",
            "provider[sim]",
            "sim_thing.a.b",
        ] {
            assert!(
                s.parse::<ResourceInstanceAddr>().is_err() || s.parse::<ProviderAddr>().is_err(),
                "{s}"
            );
        }
        let e = "sim_thing.a[x]"
            .parse::<ResourceInstanceAddr>()
            .unwrap_err();
        assert!(e.to_string().contains("instance key"), "{e}");
    }

    #[test]
    fn package_is_the_type_prefix() {
        assert_eq!(package_of("sim_thing"), "sim");
        assert_eq!(package_of("terraform_data"), "terraform");
    }
}
