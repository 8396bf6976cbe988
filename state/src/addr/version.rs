//! Provider versions and version constraints, with Terraform's meaning.
//!
//! Decisions (Terraform's "Ruby-style" constraints):
//! - A constraint string is a comma-separated list, all of which must hold:
//!   `= 1.2.3` (or bare `1.2.3`), `!= 1.2.3`, `>`, `>=`, `<`, `<=`, and `~> 1.2` (the
//!   rightmost given part may grow: `~> 1.2` is `>= 1.2.0, < 2.0.0`, `~> 1.2.3` is
//!   `>= 1.2.3, < 1.3.0`).
//! - A partial version is filled with zeros (`> 1.1` is `> 1.1.0`, `= 1.1` is `= 1.1.0`), except
//!   after `~>`, where the number of parts given is the meaning. (Checked against Terraform
//!   1.11, which writes `> 1.1` as `> 1.1.0` in the lock file.)
//! - A pre-release (`2.0.0-beta1`) is selected only when some constraint names it exactly
//!   (`= 2.0.0-beta1`); otherwise pre-releases never match, as in Terraform.
//! - Versions themselves are semantic versions (the `semver` crate orders them).

use std::fmt;

pub use semver::Version;

/// Parses a provider version (`1.2.3`, `2.0.0-beta1`; a leading `v` is accepted).
pub fn parse_version(s: &str) -> Result<Version, String> {
    let t = s.trim();
    let t = t.strip_prefix('v').unwrap_or(t);
    Version::parse(t).map_err(|e| format!("\"{s}\" is not a valid version: {e}."))
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum Op {
    Eq,
    Ne,
    Gt,
    Ge,
    Lt,
    Le,
    Pessimistic,
}

impl Op {
    fn text(self) -> &'static str {
        match self {
            Op::Eq => "",
            Op::Ne => "!= ",
            Op::Gt => "> ",
            Op::Ge => ">= ",
            Op::Lt => "< ",
            Op::Le => "<= ",
            Op::Pessimistic => "~> ",
        }
    }
}

/// One constraint: an operator and a possibly partial version.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Constraint {
    op: Op,
    major: u64,
    minor: Option<u64>,
    patch: Option<u64>,
    pre: String,
}

impl Constraint {
    fn lower(&self) -> Version {
        let mut v = Version::new(self.major, self.minor.unwrap_or(0), self.patch.unwrap_or(0));
        if !self.pre.is_empty() {
            v.pre = semver::Prerelease::new(&self.pre).unwrap_or(semver::Prerelease::EMPTY);
        }
        v
    }

    pub fn allows(&self, v: &Version) -> bool {
        let bound = self.lower();
        match self.op {
            Op::Eq => *v == bound,
            Op::Ne => *v != bound,
            Op::Ge => *v >= bound,
            Op::Gt => *v > bound,
            Op::Lt => *v < bound,
            Op::Le => *v <= bound,
            Op::Pessimistic => {
                let upper = match (self.minor, self.patch) {
                    (None, _) | (Some(_), None) => Version::new(self.major + 1, 0, 0),
                    (Some(m), Some(_)) => Version::new(self.major, m + 1, 0),
                };
                *v >= bound && Version::new(v.major, v.minor, v.patch) < upper
            }
        }
    }

    /// Terraform's order of constraints in normalized text: by version, then by operator.
    fn sort_key(&self) -> (Version, &'static str) {
        (self.lower(), self.op.text())
    }
}

impl fmt::Display for Constraint {
    /// Terraform's normalized form: the full version (`>= 1.2.0`), except that `~>` keeps the
    /// precision it was written with (`~> 1.2`), which is its meaning.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.op != Op::Pessimistic {
            return write!(f, "{}{}", self.op.text(), self.lower());
        }
        write!(f, "{}{}", self.op.text(), self.major)?;
        if let Some(m) = self.minor {
            write!(f, ".{m}")?;
        }
        if let Some(p) = self.patch {
            write!(f, ".{p}")?;
        }
        if !self.pre.is_empty() {
            write!(f, "-{}", self.pre)?;
        }
        Ok(())
    }
}

/// A set of constraints that must all hold; empty allows every release.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Constraints(pub Vec<Constraint>);

impl Constraints {
    /// Parses `"~> 5.0"`, `">= 1.2, < 2"`. The error is a sentence.
    pub fn parse(s: &str) -> Result<Constraints, String> {
        let mut out = Vec::new();
        if s.trim().is_empty() {
            return Ok(Constraints(out));
        }
        for part in s.split(',') {
            out.push(parse_one(part.trim()).map_err(|e| {
                if part.trim() == s.trim() {
                    format!("\"{}\" is not a version constraint: {e}", s.trim())
                } else {
                    format!(
                        "\"{}\" in \"{s}\" is not a version constraint: {e}",
                        part.trim()
                    )
                }
            })?);
        }
        Ok(Constraints(out))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Adds another module's constraints (duplicates are kept once).
    pub fn merge(&mut self, other: &Constraints) {
        for c in &other.0 {
            if !self.0.contains(c) {
                self.0.push(c.clone());
            }
        }
    }

    pub fn allows(&self, v: &Version) -> bool {
        if !v.pre.is_empty() {
            // A pre-release must be asked for by name.
            let named = self
                .0
                .iter()
                .any(|c| c.op == Op::Eq && c.patch.is_some() && c.lower() == *v);
            if !named {
                return false;
            }
        }
        self.0.iter().all(|c| c.allows(v))
    }

    /// The newest version in `versions` that the constraints allow.
    pub fn newest<'a>(
        &self,
        versions: impl IntoIterator<Item = &'a Version>,
    ) -> Option<&'a Version> {
        versions.into_iter().filter(|v| self.allows(v)).max()
    }
}

impl fmt::Display for Constraints {
    /// Terraform's normalized text, as the lock file records it: each constraint once, sorted
    /// by version and then operator, `~> 1.0, >= 1.2.0, < 2.0.0`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut sorted: Vec<&Constraint> = self.0.iter().collect();
        sorted.sort_by(|a, b| a.sort_key().cmp(&b.sort_key()));
        sorted.dedup_by(|a, b| a.to_string() == b.to_string());
        for (i, c) in sorted.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{c}")?;
        }
        Ok(())
    }
}

fn parse_one(s: &str) -> Result<Constraint, String> {
    let ops = [
        ("~>", Op::Pessimistic),
        (">=", Op::Ge),
        ("<=", Op::Le),
        ("!=", Op::Ne),
        (">", Op::Gt),
        ("<", Op::Lt),
        ("=", Op::Eq),
    ];
    let (op, rest) = ops
        .iter()
        .find_map(|(t, op)| s.strip_prefix(t).map(|r| (*op, r)))
        .unwrap_or((Op::Eq, s));
    let rest = rest.trim();
    let rest = rest.strip_prefix('v').unwrap_or(rest);
    if rest.is_empty() {
        return Err("a version is missing.".into());
    }
    let (nums, pre) = match rest.split_once('-') {
        Some((n, p)) => (n, p),
        None => (rest, ""),
    };
    if let Some((_, meta)) = nums.split_once('+') {
        return Err(format!("build metadata (\"+{meta}\") is not allowed."));
    }
    let parts: Vec<&str> = nums.split('.').collect();
    if parts.len() > 3 {
        return Err("a version has at most three parts.".into());
    }
    let num = |p: &str| -> Result<u64, String> {
        if p.is_empty() || !p.chars().all(|c| c.is_ascii_digit()) {
            return Err(format!("\"{p}\" is not a number."));
        }
        p.parse::<u64>().map_err(|e| format!("\"{p}\": {e}."))
    };
    let major = num(parts[0])?;
    let minor = parts.get(1).map(|p| num(p)).transpose()?;
    let patch = parts.get(2).map(|p| num(p)).transpose()?;
    if !pre.is_empty() {
        if patch.is_none() {
            return Err("a pre-release needs a full version (MAJOR.MINOR.PATCH-PRE).".into());
        }
        semver::Prerelease::new(pre).map_err(|e| format!("\"{pre}\": {e}."))?;
    }
    Ok(Constraint {
        op,
        major,
        minor,
        patch,
        pre: pre.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn allows(c: &str, v: &str) -> bool {
        Constraints::parse(c)
            .unwrap()
            .allows(&parse_version(v).unwrap())
    }

    #[test]
    fn pessimistic() {
        assert!(allows("~> 5.0", "5.0.0"));
        assert!(allows("~> 5.0", "5.99.1"));
        assert!(!allows("~> 5.0", "6.0.0"));
        assert!(!allows("~> 5.0", "4.9.9"));
        assert!(allows("~> 1.2.3", "1.2.9"));
        assert!(!allows("~> 1.2.3", "1.3.0"));
        assert!(!allows("~> 1.2.3", "1.2.2"));
        assert!(allows("~> 1", "1.9.0"));
        assert!(!allows("~> 1", "2.0.0"));
    }

    #[test]
    fn ranges_and_exact() {
        assert!(allows(">= 1.2, < 2", "1.2.0"));
        assert!(allows(">= 1.2, < 2", "1.9.9"));
        assert!(!allows(">= 1.2, < 2", "2.0.0"));
        assert!(!allows(">= 1.2, < 2", "1.1.9"));
        assert!(allows("1.2.3", "1.2.3"));
        assert!(!allows("1.2.3", "1.2.4"));
        assert!(!allows("= 1.2", "1.2.7"));
        assert!(allows("= 1.2", "1.2.0"));
        assert!(allows("> 1.1", "1.1.5"));
        assert!(!allows("<= 1.1", "1.1.5"));
        assert!(!allows("!= 1.2.3", "1.2.3"));
        assert!(allows("", "0.0.1"));
        assert!(allows(">=1.0,<=1.0.5", "1.0.5"));
    }

    #[test]
    fn prereleases_only_by_name() {
        assert!(!allows(">= 1.0", "2.0.0-beta1"));
        assert!(allows("2.0.0-beta1", "2.0.0-beta1"));
        assert!(!allows("", "2.0.0-beta1"));
    }

    #[test]
    fn errors_and_display() {
        for bad in ["~>", "1.2.3.4", "abc", ">= 1.x", "1.2-beta", "1.2.3+meta"] {
            assert!(Constraints::parse(bad).is_err(), "{bad}");
        }
        let c = Constraints::parse(">=1.2,  < 2, ~>3.0.1").unwrap();
        assert_eq!(c.to_string(), ">= 1.2.0, < 2.0.0, ~> 3.0.1");
        // What Terraform 1.11 wrote for the same constraints.
        let c = Constraints::parse(
            "<= 1.9, != 1.3.0, > 1.1, >= 1.2.0, ~> 1.0, 1.5.0, ~> 1.5.0, >= 1, ~> 1.0",
        )
        .unwrap();
        assert_eq!(
            c.to_string(),
            ">= 1.0.0, ~> 1.0, > 1.1.0, >= 1.2.0, != 1.3.0, 1.5.0, ~> 1.5.0, <= 1.9.0"
        );
        let vs: Vec<Version> = ["1.0.0", "1.5.0", "2.0.0"]
            .iter()
            .map(|v| parse_version(v).unwrap())
            .collect();
        let c = Constraints::parse("< 2").unwrap();
        assert_eq!(c.newest(&vs).unwrap().to_string(), "1.5.0");
    }
}
