//! Local provider directories: filesystem mirrors (both layouts), the implied local mirror
//! directories, the plugin cache and `.terraform/providers`.
//!
//! Layouts below a mirror root (Terraform's):
//! - packed: `HOSTNAME/NAMESPACE/TYPE/terraform-provider-TYPE_VERSION_OS_ARCH.zip`
//! - unpacked: `HOSTNAME/NAMESPACE/TYPE/VERSION/OS_ARCH/` holding the package's files.
//!
//! The plugin cache and `.terraform/providers` use the unpacked layout.

use super::platform::Platform;
use crate::addr::provider_source::SourceAddr;
use crate::addr::version::{parse_version, Version};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Where one package is on disk.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Package {
    Zip(PathBuf),
    Dir(PathBuf),
}

impl Package {
    pub(crate) fn path(&self) -> &Path {
        match self {
            Package::Zip(p) | Package::Dir(p) => p,
        }
    }

    /// Its `h1:` hash.
    pub(crate) fn h1(&self) -> Result<String, String> {
        match self {
            Package::Zip(p) => super::hash::h1_zip(p),
            Package::Dir(p) => super::hash::h1_dir(p),
        }
    }
}

fn dir_names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .filter_map(|e| e.file_name().into_string().ok())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// Every provider that has at least one package below a mirror root.
pub(crate) fn providers_in_dir(root: &Path) -> Vec<SourceAddr> {
    let mut out = Vec::new();
    for host in dir_names(root) {
        for ns in dir_names(&root.join(&host)) {
            for ty in dir_names(&root.join(&host).join(&ns)) {
                let Ok(addr) = SourceAddr::parse(&format!("{host}/{ns}/{ty}")) else {
                    continue;
                };
                if !packages_in_dir(root, &addr).is_empty() {
                    out.push(addr);
                }
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

/// The packages of one provider below a mirror root, by version and platform. Names that do
/// not fit the layouts are skipped.
pub(crate) fn packages_in_dir(
    root: &Path,
    addr: &SourceAddr,
) -> BTreeMap<Version, BTreeMap<Platform, Package>> {
    let mut out: BTreeMap<Version, BTreeMap<Platform, Package>> = BTreeMap::new();
    // Hostnames may be written in their original case or in Unicode: Terraform looks the
    // directory up by the normalized name; so do we.
    let dir = root.join(addr.rel_path());
    let prefix = format!("terraform-provider-{}_", addr.type_);
    for name in dir_names(&dir) {
        let path = dir.join(&name);
        if let Some(rest) = name
            .strip_prefix(&prefix)
            .and_then(|r| r.strip_suffix(".zip"))
        {
            // VERSION_OS_ARCH; the version itself has no underscore.
            let mut parts = rest.splitn(2, '_');
            let (Some(v), Some(p)) = (parts.next(), parts.next()) else {
                continue;
            };
            let (Ok(v), Some(p)) = (parse_version(v), Platform::parse(p)) else {
                continue;
            };
            if path.is_file() {
                out.entry(v).or_default().insert(p, Package::Zip(path));
            }
            continue;
        }
        let Ok(v) = parse_version(&name) else {
            continue;
        };
        for plat in dir_names(&path) {
            let Some(p) = Platform::parse(&plat) else {
                continue;
            };
            let pdir = path.join(&plat);
            if pdir.is_dir() {
                out.entry(v.clone())
                    .or_default()
                    .insert(p, Package::Dir(pdir));
            }
        }
    }
    out
}

/// The provider's executable inside an unpacked package directory: a regular file whose name
/// starts with `terraform-provider-TYPE` (`terraform-provider-aws_v5.0.0_x5`).
pub(crate) fn executable_in(dir: &Path, type_: &str) -> Option<PathBuf> {
    let prefix = format!("terraform-provider-{type_}");
    dir_names(dir)
        .into_iter()
        .filter(|n| n.starts_with(&prefix))
        .map(|n| dir.join(n))
        .find(|p| is_executable(p))
}

#[cfg(unix)]
fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::metadata(p)
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

#[cfg(not(unix))]
fn is_executable(p: &Path) -> bool {
    p.is_file()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_layouts() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path();
        let t = root.join("example.com/ns/thing");
        std::fs::create_dir_all(t.join("1.0.0/linux_amd64")).unwrap();
        std::fs::write(
            t.join("terraform-provider-thing_2.0.0_linux_arm64.zip"),
            b"z",
        )
        .unwrap();
        std::fs::write(t.join("terraform-provider-thing_x_linux_arm64.zip"), b"z").unwrap();
        std::fs::create_dir_all(t.join("README")).unwrap();
        let a = SourceAddr::parse("example.com/ns/thing").unwrap();
        let p = packages_in_dir(root, &a);
        assert_eq!(p.len(), 2);
        let v1 = parse_version("1.0.0").unwrap();
        assert!(matches!(
            p[&v1][&Platform::parse("linux_amd64").unwrap()],
            Package::Dir(_)
        ));
        assert_eq!(providers_in_dir(root), vec![a]);
        assert!(providers_in_dir(&root.join("nope")).is_empty());
    }
}
