//! Provider source addresses (`[HOSTNAME/]NAMESPACE/TYPE`).
//!
//! Decisions (Terraform's rules, from its provider requirements documentation):
//! - The hostname defaults to `registry.terraform.io`; a source with only a type (`aws`) means
//!   `hashicorp/aws` there, as does a provider used without any `required_providers` entry.
//! - Every part is case-insensitive and kept in lower case, so `HashiCorp/AWS` and
//!   `hashicorp/aws` are the same provider.
//! - Namespaces and types are letters, digits and dashes (types may not start with
//!   `terraform-provider-`); hostnames are DNS names with an optional `:PORT`.
//! - `terraform.io/builtin/terraform` is the built-in `terraform` provider: it is never
//!   installed.

use std::fmt;

/// The default provider registry.
pub const DEFAULT_HOST: &str = "registry.terraform.io";
/// The namespace of a provider named without one.
const DEFAULT_NAMESPACE: &str = "hashicorp";
/// The hostname of Terraform's built-in providers (`terraform.io/builtin/terraform`).
const BUILTIN_HOST: &str = "terraform.io";

/// A provider's source address, normalized to lower case.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SourceAddr {
    pub host: String,
    pub namespace: String,
    pub type_: String,
}

impl SourceAddr {
    /// `registry.terraform.io/hashicorp/TYPE` (or the built-in `terraform` provider): what a
    /// provider local name means without a `required_providers` entry.
    pub fn implied(type_: &str) -> SourceAddr {
        if type_ == "terraform" {
            return SourceAddr {
                host: BUILTIN_HOST.into(),
                namespace: "builtin".into(),
                type_: "terraform".into(),
            };
        }
        SourceAddr {
            host: DEFAULT_HOST.into(),
            namespace: DEFAULT_NAMESPACE.into(),
            type_: type_.to_ascii_lowercase(),
        }
    }

    /// Parses `TYPE`, `NAMESPACE/TYPE` or `HOSTNAME/NAMESPACE/TYPE`. The error says what is
    /// wrong, as a sentence.
    pub fn parse(s: &str) -> Result<SourceAddr, String> {
        let parts: Vec<&str> = s.split('/').collect();
        let (host, ns, ty) = match parts.as_slice() {
            [ty] => (DEFAULT_HOST, DEFAULT_NAMESPACE, *ty),
            [ns, ty] => (DEFAULT_HOST, *ns, *ty),
            [host, ns, ty] => (*host, *ns, *ty),
            _ => {
                return Err(format!(
                    "The source address \"{s}\" must be of the form \
                     \"[HOSTNAME/]NAMESPACE/TYPE\" (at most three parts separated by \"/\")."
                ))
            }
        };
        let host = parse_host(host).map_err(|e| format!("Invalid source \"{s}\": {e}"))?;
        let namespace =
            parse_part(ns, "namespace").map_err(|e| format!("Invalid source \"{s}\": {e}"))?;
        let type_ = parse_part(ty, "type").map_err(|e| format!("Invalid source \"{s}\": {e}"))?;
        if type_.starts_with("terraform-provider-") {
            return Err(format!(
                "Invalid source \"{s}\": the type must not start with \"terraform-provider-\"; \
                 did you mean \"{}\"?",
                s.trim_end_matches(ty).to_string() + &ty["terraform-provider-".len()..]
            ));
        }
        if namespace == "-" {
            return Err(format!(
                "Invalid source \"{s}\": \"-\" is a legacy namespace that cannot be installed."
            ));
        }
        Ok(SourceAddr {
            host,
            namespace,
            type_,
        })
    }

    /// Whether this is a built-in provider of Terraform's (`terraform.io/builtin/...`).
    pub fn is_terraform_builtin(&self) -> bool {
        self.host == BUILTIN_HOST && self.namespace == "builtin"
    }

    /// The short form: without the hostname when it is the default registry, as Terraform
    /// shows `hashicorp/aws`.
    pub fn short(&self) -> String {
        if self.host == DEFAULT_HOST {
            format!("{}/{}", self.namespace, self.type_)
        } else {
            self.to_string()
        }
    }

    /// The path of this provider below a mirror or `.terraform/providers`:
    /// `HOSTNAME/NAMESPACE/TYPE`.
    pub fn rel_path(&self) -> std::path::PathBuf {
        [&self.host, &self.namespace, &self.type_].iter().collect()
    }
}

impl fmt::Display for SourceAddr {
    /// The fully-qualified form, `registry.terraform.io/hashicorp/aws`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}/{}", self.host, self.namespace, self.type_)
    }
}

fn parse_part(s: &str, what: &str) -> Result<String, String> {
    if s.is_empty() {
        return Err(format!("the {what} is empty."));
    }
    if s == "-" && what == "namespace" {
        return Ok(s.into());
    }
    let ok = s
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        && !s.starts_with('-')
        && !s.ends_with('-');
    if !ok {
        return Err(format!(
            "the {what} \"{s}\" may contain only letters, digits, dashes and underscores, and \
             must begin and end with a letter or digit."
        ));
    }
    Ok(s.to_ascii_lowercase())
}

fn parse_host(s: &str) -> Result<String, String> {
    let (name, port) = match s.rsplit_once(':') {
        Some((n, p)) => (n, Some(p)),
        None => (s, None),
    };
    if let Some(p) = port {
        if p.parse::<u16>().map_or(true, |p| p == 0) {
            return Err(format!("the hostname \"{s}\" has an invalid port."));
        }
    }
    let ok = !name.is_empty()
        && name.split('.').all(|label| {
            !label.is_empty()
                && label.chars().all(|c| c.is_alphanumeric() || c == '-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        });
    if !ok {
        return Err(format!("\"{s}\" is not a valid hostname."));
    }
    let name = name.to_lowercase();
    Ok(match port {
        // Port 443 is the default for HTTPS: Terraform normalizes it away.
        Some("443") | None => name,
        Some(p) => format!("{name}:{p}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_three_forms() {
        let a = SourceAddr::parse("hashicorp/aws").unwrap();
        assert_eq!(a.to_string(), "registry.terraform.io/hashicorp/aws");
        assert_eq!(a.short(), "hashicorp/aws");
        let b = SourceAddr::parse("registry.terraform.io/HashiCorp/AWS").unwrap();
        assert_eq!(a, b);
        let c = SourceAddr::parse("example.com/ns/name").unwrap();
        assert_eq!(c.host, "example.com");
        assert_eq!(c.short(), "example.com/ns/name");
        assert_eq!(SourceAddr::parse("aws").unwrap(), a);
        assert_eq!(
            SourceAddr::parse("localhost:8443/ns/t").unwrap().host,
            "localhost:8443"
        );
        assert_eq!(
            SourceAddr::parse("example.com:443/ns/t").unwrap().host,
            "example.com"
        );
        assert_eq!(SourceAddr::implied("aws"), a);
        assert!(SourceAddr::implied("terraform").is_terraform_builtin());
    }

    #[test]
    fn rejects_bad_sources() {
        for bad in [
            "a/b/c/d",
            "",
            "hashicorp/",
            "/aws",
            "hashicorp/terraform-provider-aws",
            "ex ample.com/a/b",
            "example.com:0/a/b",
            "-/aws",
            "hashi.corp/aws",
        ] {
            assert!(SourceAddr::parse(bad).is_err(), "{bad}");
        }
    }
}
