//! Tests of `locate` over real directories.

use super::*;
use crate::addr::version;
use std::collections::BTreeMap;

fn exe(path: &Path, body: &[u8]) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, body).unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
}

fn cli() -> CliConfig {
    CliConfig::from_env(&BTreeMap::new(), Path::new("/nonexistent")).unwrap()
}

#[test]
fn nothing_installed_is_none() {
    let d = tempfile::tempdir().unwrap();
    let a = SourceAddr::parse("hashicorp/null").unwrap();
    assert_eq!(locate(d.path(), &a, &cli()).unwrap(), None);
    let t = SourceAddr::implied("terraform");
    assert_eq!(locate(d.path(), &t, &cli()).unwrap(), None);
}

#[test]
fn installed_package_is_checked_against_the_lock() {
    let d = tempfile::tempdir().unwrap();
    let a = SourceAddr::parse("example.com/ns/thing").unwrap();
    let plat = Platform::current().to_string();
    let pkg = d
        .path()
        .join(".terraform/providers/example.com/ns/thing/1.2.0")
        .join(&plat);
    exe(&pkg.join("terraform-provider-thing_v1.2.0"), b"#!/bin/sh\n");
    // Installed but not locked.
    let e = locate(d.path(), &a, &cli()).unwrap_err();
    assert!(e.summary.contains("Inconsistent"), "{e:?}");

    let good = hash::h1_dir(&pkg).unwrap();
    let mut lock = LockFile::default();
    lock.providers.insert(
        a.clone(),
        Locked {
            version: version::parse_version("1.2.0").unwrap(),
            constraints: Some("~> 1.0".into()),
            hashes: vec![good.clone()],
        },
    );
    lock.write(d.path()).unwrap();
    let l = locate(d.path(), &a, &cli()).unwrap().unwrap();
    assert_eq!(l.path, pkg.join("terraform-provider-thing_v1.2.0"));
    assert_eq!(l.version.unwrap().to_string(), "1.2.0");
    assert_eq!(l.hash.as_deref(), Some(good.as_str()));
    assert_eq!(l.origin, Origin::Installed(pkg.clone()));

    // The binary changes: refused, naming both checksums.
    exe(
        &pkg.join("terraform-provider-thing_v1.2.0"),
        b"#!/bin/sh\necho evil\n",
    );
    let e = locate(d.path(), &a, &cli()).unwrap_err();
    assert_eq!(e.summary, "Provider package does not match the lock file");
    assert!(e.detail.contains(&good), "{}", e.detail);

    // Locked version missing.
    std::fs::remove_dir_all(d.path().join(".terraform")).unwrap();
    let e = locate(d.path(), &a, &cli()).unwrap_err();
    assert_eq!(e.summary, "Required provider is not installed");
}

#[test]
fn dev_overrides_come_first() {
    let d = tempfile::tempdir().unwrap();
    let bin = d.path().join("plugins/terraform-provider-sim");
    exe(&bin, b"#!/bin/sh\n");
    let rc = d.path().join("rc");
    std::fs::write(
        &rc,
        format!(
            "provider_installation {{\n  dev_overrides {{\n    \"example.com/sim/sim\" = \"{}\"\n  }}\n  direct {{}}\n}}\n",
            d.path().join("plugins").display()
        ),
    )
    .unwrap();
    let env: BTreeMap<String, String> =
        [("TF_CLI_CONFIG_FILE".to_string(), rc.display().to_string())].into();
    let cli = CliConfig::from_env(&env, d.path()).unwrap();
    let a = SourceAddr::parse("example.com/sim/sim").unwrap();
    let l = locate(d.path(), &a, &cli).unwrap().unwrap();
    assert_eq!(l.path, bin);
    assert_eq!(l.version, None);
    assert!(matches!(l.origin, Origin::DevOverride(_)));
    // An override directory without the binary is an error.
    let b = SourceAddr::parse("example.com/sim/other").unwrap();
    let mut cli2 = cli.clone();
    cli2.dev_overrides
        .insert(b.clone(), d.path().join("plugins"));
    assert!(locate(d.path(), &b, &cli2).is_err());
}
