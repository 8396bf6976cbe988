//! Module source addresses, as Terraform reads them: local paths, registry addresses
//! (`[HOST/]NAMESPACE/NAME/SYSTEM`), and go-getter addresses (`git::…`, `github.com/…`,
//! `git@HOST:PATH`, https archives), each with an optional `//sub/dir`. The installer
//! (the cairn crate's `provider::install::modules`) downloads them; the loader compares a
//! call's source with the one the manifest recorded, so a changed source asks for `cairn init`.

// The public registry, for sources that name no host (the providers' default too).
use super::provider_source::DEFAULT_HOST;

/// A remote module source, parsed.
#[derive(Debug, Clone, PartialEq)]
pub enum Remote {
    Registry {
        host: String,
        namespace: String,
        name: String,
        system: String,
        sub: Option<String>,
    },
    /// A go-getter address (`git::…`, `https://…`) and the directory inside it.
    Getter {
        address: String,
        sub: Option<String>,
    },
}

impl Remote {
    /// The source as the manifest records it (Terraform's normalized form).
    pub fn recorded(&self) -> String {
        match self {
            Remote::Registry {
                host,
                namespace,
                name,
                system,
                sub,
            } => {
                let mut s = format!("{host}/{namespace}/{name}/{system}");
                if let Some(d) = sub {
                    s.push_str(&format!("//{d}"));
                }
                s
            }
            Remote::Getter { address, sub } => join_sub(address, sub.as_deref()),
        }
    }
}

/// `address` with `//sub` put back before its query string.
fn join_sub(address: &str, sub: Option<&str>) -> String {
    let Some(sub) = sub else {
        return address.to_string();
    };
    match address.split_once('?') {
        Some((a, q)) => format!("{a}//{sub}?{q}"),
        None => format!("{address}//{sub}"),
    }
}

/// Whether a module source is a local path (loaded where it is, never installed).
pub fn is_local(source: &str) -> bool {
    source.starts_with("./") || source.starts_with("../") || source == "." || source == ".."
}

/// Splits go-getter's `//sub` off an address (`git::https://h/r.git//modules/x?ref=v1` →
/// (`git::https://h/r.git?ref=v1`, `modules/x`)).
pub fn split_sub(src: &str) -> (String, Option<String>) {
    let (body, query) = match src.split_once('?') {
        Some((b, q)) => (b, Some(q)),
        None => (src, None),
    };
    // Skip the getter prefix and the scheme's `://`.
    let start = body.find("://").map_or(0, |i| i + 3);
    let (base, sub) = match body[start..].find("//") {
        Some(i) => (
            &body[..start + i],
            Some(body[start + i + 2..].trim_matches('/').to_string()),
        ),
        None => (body, None),
    };
    let address = match query {
        Some(q) => format!("{base}?{q}"),
        None => base.to_string(),
    };
    (address, sub.filter(|s| !s.is_empty()))
}

fn registry_part(s: &str) -> bool {
    let mut c = s.chars();
    c.next().is_some_and(|f| f.is_ascii_alphanumeric())
        && c.all(|x| x.is_ascii_alphanumeric() || x == '-' || x == '_')
}

/// Parses a non-local module source address.
pub fn parse_source(src: &str) -> Result<Remote, String> {
    let (address, sub) = split_sub(src);
    for forced in ["s3::", "gcs::", "hg::"] {
        if address.starts_with(forced) {
            return Err(format!(
                "Cairn does not download {} module sources: they need that service's client \
                 and credentials. Download the module with `terraform init` (Cairn then reads \
                 it from .terraform/modules), or publish it in a module registry, a git \
                 repository or an https archive.",
                forced.trim_end_matches("::")
            ));
        }
    }
    if address.starts_with("git::") {
        return Ok(Remote::Getter { address, sub });
    }
    if address.starts_with("https://") || address.starts_with("http://") {
        return Ok(Remote::Getter { address, sub });
    }
    if let Some(rest) = address.strip_prefix("github.com/") {
        let (path, query) = match rest.split_once('?') {
            Some((p, q)) => (p, Some(q)),
            None => (rest, None),
        };
        let path = path.trim_end_matches(".git");
        let mut a = format!("git::https://github.com/{path}.git");
        if let Some(q) = query {
            a.push_str(&format!("?{q}"));
        }
        return Ok(Remote::Getter { address: a, sub });
    }
    if let Some(rest) = address.strip_prefix("git@") {
        // scp-like: git@github.com:owner/repo.git
        if let Some((host, path)) = rest.split_once(':') {
            return Ok(Remote::Getter {
                address: format!("git::ssh://git@{host}/{path}"),
                sub,
            });
        }
    }
    if address.starts_with("bitbucket.org/") {
        return Err(
            "Cairn does not resolve bitbucket.org shorthand sources: write the repository as \
             git::https://bitbucket.org/OWNER/REPO.git"
                .into(),
        );
    }
    let parts: Vec<&str> = address.split('/').collect();
    let (host, rest) = match parts.len() {
        3 => (DEFAULT_HOST.to_string(), &parts[..]),
        4 if parts[0].contains('.') || parts[0].contains(':') => {
            (parts[0].to_ascii_lowercase(), &parts[1..])
        }
        _ => {
            return Err(format!(
                "\"{src}\" is not a module source Cairn knows: use a local path (./dir), a \
                 registry address (NAMESPACE/NAME/SYSTEM), git::URL, github.com/OWNER/REPO or \
                 an https archive."
            ))
        }
    };
    if !rest.iter().all(|p| registry_part(p)) {
        return Err(format!(
            "\"{src}\" is not a valid registry module address: NAMESPACE/NAME/SYSTEM are \
             letters, digits, - and _."
        ));
    }
    Ok(Remote::Registry {
        host,
        namespace: rest[0].to_string(),
        name: rest[1].to_string(),
        system: rest[2].to_string(),
        sub,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sources_parse_as_terraform_reads_them() {
        let reg = |s: &str| parse_source(s).unwrap().recorded();
        assert_eq!(
            reg("terraform-aws-modules/vpc/aws"),
            "registry.terraform.io/terraform-aws-modules/vpc/aws"
        );
        assert_eq!(
            reg("app.terraform.io/acme/net/aws//modules/sub"),
            "app.terraform.io/acme/net/aws//modules/sub"
        );
        assert_eq!(
            parse_source("github.com/acme/net?ref=v1").unwrap(),
            Remote::Getter {
                address: "git::https://github.com/acme/net.git?ref=v1".into(),
                sub: None
            }
        );
        assert_eq!(
            parse_source("git::https://h.example/r.git//mods/x?ref=v2").unwrap(),
            Remote::Getter {
                address: "git::https://h.example/r.git?ref=v2".into(),
                sub: Some("mods/x".into())
            }
        );
        assert_eq!(
            parse_source("git@github.com:acme/net.git").unwrap(),
            Remote::Getter {
                address: "git::ssh://git@github.com/acme/net.git".into(),
                sub: None
            }
        );
        assert_eq!(
            parse_source("https://example.com/m.zip//inner").unwrap(),
            Remote::Getter {
                address: "https://example.com/m.zip".into(),
                sub: Some("inner".into())
            }
        );
        assert!(parse_source("s3::https://bucket/m.zip")
            .unwrap_err()
            .contains("s3"));
        assert!(parse_source("a/b").is_err());
        assert_eq!(
            join_sub("git::https://h/r.git?ref=v1", Some("x")),
            "git::https://h/r.git//x?ref=v1"
        );
    }
}
