//! The dependency lock file, `.terraform.lock.hcl`, in Terraform's exact format.
//!
//! ```hcl
//! # This file is maintained automatically by "terraform init".
//! # Manual edits may be lost in future updates.
//!
//! provider "registry.terraform.io/hashicorp/aws" {
//!   version     = "5.0.0"
//!   constraints = "~> 5.0"
//!   hashes = [
//!     "h1:…",
//!     "zh:…",
//!   ]
//! }
//! ```
//!
//! Decisions: providers are written in address order, hashes sorted and deduplicated; the
//! header comment is Terraform's own, so Terraform and Cairn can share one lock file (Terraform
//! keeps files whose content does not change byte for byte). Reading accepts what Terraform
//! accepts and reports problems with `file:line:col`.

use super::cli_config::location;
use crate::addr::provider_source::SourceAddr;
use crate::addr::version::{parse_version, Constraints, Version};
use crate::diag::Diagnostic;
use hcl_edit::expr::Expression;
use hcl_edit::structure::Structure;
use hcl_edit::Span as _;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The lock file's name in the configuration directory.
pub const LOCK_FILE: &str = ".terraform.lock.hcl";

/// One locked provider.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Locked {
    pub version: Version,
    /// The constraints the configuration had when the version was selected (as text).
    pub constraints: Option<String>,
    /// Sorted, without duplicates.
    pub hashes: Vec<String>,
}

impl Locked {
    /// Whether `hash` (an `h1:` or `zh:` text) is among the locked hashes.
    pub(crate) fn has_hash(&self, hash: &str) -> bool {
        self.hashes.iter().any(|h| h == hash)
    }

    pub(crate) fn add_hashes(&mut self, more: impl IntoIterator<Item = String>) {
        self.hashes.extend(more);
        self.hashes.sort();
        self.hashes.dedup();
    }
}

/// The whole lock file.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LockFile {
    pub providers: BTreeMap<SourceAddr, Locked>,
}

impl LockFile {
    /// The lock file of a configuration directory (an empty one when there is none).
    pub fn read(config_dir: &Path) -> Result<LockFile, Diagnostic> {
        let path = config_dir.join(LOCK_FILE);
        match std::fs::read_to_string(&path) {
            Ok(text) => LockFile::parse(&path, &text),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(LockFile::default()),
            Err(e) => Err(Diagnostic::error(
                "Cannot read the dependency lock file",
                format!("{}: {e}.", path.display()),
            )),
        }
    }

    pub(crate) fn parse(path: &Path, text: &str) -> Result<LockFile, Diagnostic> {
        let err = |at: Option<std::ops::Range<usize>>, detail: &str| {
            Diagnostic::error(
                "Invalid dependency lock file",
                format!(
                    "{}: {detail}",
                    location(path, text, at.map(|r| r.start).unwrap_or(0))
                ),
            )
        };
        let body = hcl_edit::parser::parse_body(text).map_err(|e| {
            Diagnostic::error(
                "Invalid dependency lock file",
                format!(
                    "{}: {}",
                    location(path, text, e.location().offset()),
                    e.message()
                ),
            )
        })?;
        let mut out = LockFile::default();
        for s in body.iter() {
            let Structure::Block(b) = s else {
                return Err(err(s.span(), "Only provider blocks are allowed here."));
            };
            match b.ident.as_str() {
                "provider" => {}
                // Terraform reserves `module` blocks for a future use and ignores them.
                "module" => continue,
                other => {
                    return Err(err(
                        b.ident.span(),
                        &format!("Unexpected block \"{other}\": only provider blocks are allowed."),
                    ))
                }
            }
            let [label] = b.labels.as_slice() else {
                return Err(err(
                    b.ident.span(),
                    "A provider block needs one label: its source address.",
                ));
            };
            let addr = SourceAddr::parse(label.as_str()).map_err(|m| err(label.span(), &m))?;
            if addr.to_string() != label.as_str() {
                return Err(err(
                    label.span(),
                    &format!(
                        "The provider address must be written in full and in lower case: \"{addr}\"."
                    ),
                ));
            }
            if out.providers.contains_key(&addr) {
                return Err(err(
                    label.span(),
                    &format!("Provider {addr} is locked twice."),
                ));
            }
            let (mut version, mut constraints, mut hashes) = (None, None, Vec::new());
            for s in b.body.iter() {
                let Structure::Attribute(a) = s else {
                    return Err(err(s.span(), "Nested blocks are not allowed here."));
                };
                let string = |e: &Expression| match e {
                    Expression::String(s) => Ok(s.value().clone()),
                    other => Err(err(other.span(), "A string is required here.")),
                };
                match a.key.as_str() {
                    "version" => {
                        let v = string(&a.value)?;
                        version = Some(parse_version(&v).map_err(|m| err(a.value.span(), &m))?);
                    }
                    "constraints" => {
                        let c = string(&a.value)?;
                        Constraints::parse(&c).map_err(|m| err(a.value.span(), &m))?;
                        constraints = Some(c);
                    }
                    "hashes" => {
                        let Expression::Array(items) = &a.value else {
                            return Err(err(a.value.span(), "A list of strings is required here."));
                        };
                        for i in items.iter() {
                            let h = string(i)?;
                            if !h.contains(':') {
                                return Err(err(
                                    i.span(),
                                    &format!(
                                        "\"{h}\" is not a hash: it needs a scheme such as \"h1:\"."
                                    ),
                                ));
                            }
                            hashes.push(h);
                        }
                    }
                    other => {
                        return Err(err(
                            a.key.span(),
                            &format!("Unexpected argument \"{other}\"."),
                        ))
                    }
                }
            }
            let Some(version) = version else {
                return Err(err(
                    b.ident.span(),
                    &format!("Provider {addr} has no version."),
                ));
            };
            hashes.sort();
            hashes.dedup();
            out.providers.insert(
                addr,
                Locked {
                    version,
                    constraints,
                    hashes,
                },
            );
        }
        Ok(out)
    }

    /// The text Terraform writes for these providers.
    pub(crate) fn render(&self) -> String {
        let mut out = String::from(
            "# This file is maintained automatically by \"terraform init\".\n\
             # Manual edits may be lost in future updates.\n",
        );
        for (addr, l) in &self.providers {
            out.push_str(&format!("\nprovider \"{addr}\" {{\n"));
            match &l.constraints {
                Some(c) => {
                    out.push_str(&format!("  version     = \"{}\"\n", l.version));
                    out.push_str(&format!("  constraints = \"{c}\"\n"));
                }
                None => out.push_str(&format!("  version = \"{}\"\n", l.version)),
            }
            if !l.hashes.is_empty() {
                out.push_str("  hashes = [\n");
                for h in &l.hashes {
                    out.push_str(&format!("    \"{h}\",\n"));
                }
                out.push_str("  ]\n");
            }
            out.push_str("}\n");
        }
        out
    }

    /// Writes the lock file (atomically: a temporary file renamed over it) unless its text
    /// would not change. Returns whether it wrote.
    pub(crate) fn write(&self, config_dir: &Path) -> Result<bool, Diagnostic> {
        let path = config_dir.join(LOCK_FILE);
        let text = self.render();
        if std::fs::read_to_string(&path).ok().as_deref() == Some(text.as_str()) {
            return Ok(false);
        }
        let tmp: PathBuf = config_dir.join(format!("{LOCK_FILE}.tmp{}", std::process::id()));
        std::fs::write(&tmp, &text)
            .and_then(|()| std::fs::rename(&tmp, &path))
            .map_err(|e| {
                let _ = std::fs::remove_file(&tmp);
                Diagnostic::error(
                    "Cannot write the dependency lock file",
                    format!("{}: {e}.", path.display()),
                )
            })?;
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = r#"# This file is maintained automatically by "terraform init".
# Manual edits may be lost in future updates.

provider "example.com/sim/sim" {
  version = "0.1.0"
  hashes = [
    "h1:abc=",
  ]
}

provider "registry.terraform.io/hashicorp/null" {
  version     = "3.2.1"
  constraints = "~> 3.2"
  hashes = [
    "h1:ydA0/SNRVB1o95btfshvYsmxA+jZFRZRvEGHYpWyy1s=",
    "zh:58fea82bf7e6ce71ebbbac5e56d01dc9fc90d7bd58bc91dde1af0dd5df1d7a95",
  ]
}
"#;

    #[test]
    fn round_trips_terraforms_text() {
        let l = LockFile::parse(Path::new("x"), TEXT).unwrap();
        assert_eq!(l.providers.len(), 2);
        let null = &l.providers[&SourceAddr::parse("hashicorp/null").unwrap()];
        assert_eq!(null.version.to_string(), "3.2.1");
        assert_eq!(null.constraints.as_deref(), Some("~> 3.2"));
        assert_eq!(l.render(), TEXT);
    }

    #[test]
    fn errors_have_locations() {
        let bad = "provider \"hashicorp/null\" {\n  version = \"1.0.0\"\n}\n";
        let e = LockFile::parse(Path::new("l.hcl"), bad).unwrap_err();
        assert!(e.detail.starts_with("l.hcl:1:10:"), "{}", e.detail);
        let bad = "provider \"registry.terraform.io/hashicorp/null\" {\n  version = \"x\"\n}\n";
        let e = LockFile::parse(Path::new("l.hcl"), bad).unwrap_err();
        assert!(e.detail.starts_with("l.hcl:2:13:"), "{}", e.detail);
        let bad = "provider \"registry.terraform.io/hashicorp/null\" {\n}\n";
        assert!(LockFile::parse(Path::new("l.hcl"), bad).is_err());
    }
}
