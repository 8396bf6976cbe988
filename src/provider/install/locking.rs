//! `cairn providers lock`: the checksums of the selected provider versions for other
//! platforms, recorded in `.terraform.lock.hcl` as Terraform's `providers lock` records them.
//!
//! For each platform (`-platform`, default this machine's), every required provider is
//! fetched into a temporary directory by the same installer `init` uses (`init::Installer`,
//! for that platform): the locked version when the lock has one that the constraints allow,
//! else the newest allowed; from the CLI configuration's installation methods, or only from
//! `-fs-mirror` / `-net-mirror`. The lock entry of each provider then gets the union of the
//! hashes it had and the ones every platform's package gave (`h1:` of the package, and the
//! `zh:` hashes a registry signed), as Terraform merges them.
//!
//! Decisions:
//! - Providers that run built in (a type Cairn has, with no plugin from a local source) and
//!   `dev_overrides` are not locked, as `init` does not lock them.
//! - The plugin cache is not used: every package is fetched from its source, so the hashes
//!   are the source's.

use super::cli_config::{CliConfig, Method, MethodKind};
use super::init::{Installer, Request, Selected};
use super::lock::{LockFile, Locked};
use super::platform::Platform;
use crate::addr::provider_source::SourceAddr;
use crate::addr::version::{Constraints, Version};
use crate::diag::{Diagnostic, Diagnostics};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// What `providers lock` is asked to do.
pub(crate) struct LockRequest<'a> {
    pub(crate) config_dir: &'a Path,
    pub(crate) cli: &'a CliConfig,
    /// The providers to lock, with their constraints.
    pub(crate) requirements: BTreeMap<SourceAddr, Constraints>,
    pub(crate) builtin_types: BTreeSet<String>,
    pub(crate) platforms: Vec<Platform>,
    /// `-fs-mirror` / `-net-mirror`: the only source to take packages from.
    pub(crate) only: Option<MethodKind>,
}

/// Parses `-platform` values (`OS_ARCH`), or this machine's platform when there are none.
pub(crate) fn platforms(given: &[String]) -> Result<Vec<Platform>, Diagnostics> {
    if given.is_empty() {
        return Ok(vec![Platform::current()]);
    }
    let mut diags = Diagnostics::new();
    let mut out = Vec::new();
    for s in given {
        match Platform::parse(s) {
            Some(p) => out.push(p),
            None => diags.push(Diagnostic::error(
                "Invalid target platform",
                format!(
                    "The string {s:?} given in the -platform option is not a valid target \
                     platform: must be two words separated by an underscore, such as \
                     linux_amd64."
                ),
            )),
        }
    }
    if diags.has_errors() {
        Err(diags)
    } else {
        Ok(out)
    }
}

/// The CLI configuration with its installation methods replaced by `only`, and no plugin
/// cache.
pub(crate) fn with_source(cli: &CliConfig, only: Option<MethodKind>) -> CliConfig {
    let mut cli = cli.clone();
    if let Some(kind) = only {
        cli.installation = Some(vec![Method {
            kind,
            include: Vec::new(),
            exclude: Vec::new(),
        }]);
    }
    cli.plugin_cache_dir = None;
    cli
}

/// One provider fetched for one platform.
pub(crate) struct Fetched {
    pub(crate) version: Version,
    pub(crate) locked: Locked,
    pub(crate) from: String,
}

/// Fetches every provider of `requirements` for `platform` into `dir` (a providers
/// directory's layout); built-in and overridden providers are left out.
pub(crate) fn fetch_all(
    req: &Request,
    old: &LockFile,
    platform: &Platform,
    dir: &Path,
) -> Result<BTreeMap<SourceAddr, Fetched>, String> {
    let mut inst = Installer::new(req, platform.clone(), dir.to_path_buf()).force();
    let mut out = BTreeMap::new();
    for (addr, constraints) in &req.requirements {
        if addr.is_terraform_builtin() || req.cli.dev_overrides.contains_key(addr) {
            continue;
        }
        let (sel, locked) = inst.one(addr, constraints, old.providers.get(addr))?;
        if let (Selected::Plugin { version, from, .. }, Some(locked)) = (sel, locked) {
            out.insert(
                addr.clone(),
                Fetched {
                    version,
                    locked,
                    from,
                },
            );
        }
    }
    Ok(out)
}

/// How a package was authenticated, in Terraform's words: a registry's signed checksums
/// (`self-signed, key ID …`: Cairn has no registry trust signatures), or `unauthenticated`
/// (mirrors).
fn authentication(from: &str) -> String {
    match from
        .split_once("(signed by key ")
        .and_then(|(_, k)| k.strip_suffix(')'))
    {
        Some(key) => format!("self-signed, key ID {key}"),
        None => "unauthenticated".into(),
    }
}

/// Runs `providers lock`: Terraform's lines, and whether the lock file changed.
pub(crate) fn lock(req: &LockRequest) -> (Vec<String>, bool, Diagnostics) {
    let mut diags = Diagnostics::new();
    let mut lines = Vec::new();
    let old = match LockFile::read(req.config_dir) {
        Ok(l) => l,
        Err(d) => {
            diags.push(d);
            return (lines, false, diags);
        }
    };
    let cli = with_source(req.cli, req.only.clone());
    let install = Request {
        config_dir: req.config_dir,
        cli: &cli,
        requirements: req.requirements.clone(),
        builtin_types: req.builtin_types.clone(),
        upgrade: false,
    };
    let mut by_platform: BTreeMap<Platform, BTreeMap<SourceAddr, Fetched>> = BTreeMap::new();
    let mut selected: BTreeMap<SourceAddr, Version> = BTreeMap::new();
    for platform in &req.platforms {
        let tmp = match tempfile::tempdir() {
            Ok(t) => t,
            Err(e) => {
                diags.push(Diagnostic::error(
                    "Could not create temporary directory",
                    format!(
                        "Failed to create a temporary directory for staging the requested \
                         provider packages: {e}."
                    ),
                ));
                break;
            }
        };
        match fetch_all(&install, &old, platform, tmp.path()) {
            Ok(got) => {
                for (addr, f) in &got {
                    let shown = addr.short();
                    lines.push(format!(
                        "- Fetching {shown} {} for {platform}...",
                        f.version
                    ));
                    lines.push(format!(
                        "- Retrieved {shown} {} for {platform} ({})",
                        f.version,
                        authentication(&f.from)
                    ));
                    if selected
                        .insert(addr.clone(), f.version.clone())
                        .is_some_and(|v| v != f.version)
                    {
                        diags.push(Diagnostic::error(
                            "Inconsistent provider versions",
                            format!(
                                "The version constraint for {addr} selected inconsistent \
                                 versions for different platforms, which is unexpected.\n\n\
                                 The source may have changed its available versions during \
                                 Cairn's work. If so, running this command again may produce \
                                 a successful result."
                            ),
                        ));
                    }
                }
                by_platform.insert(platform.clone(), got);
            }
            Err(e) => {
                diags.push(Diagnostic::error(
                    "Could not retrieve providers for locking",
                    format!(
                        "Cairn failed to fetch the requested providers for {platform} in \
                         order to calculate their checksums: {e}"
                    ),
                ));
                break;
            }
        }
    }
    if diags.has_errors() {
        return (lines, false, diags);
    }
    let (new, changed_any) = merge(req, &old, &by_platform, &mut lines);
    if new != old {
        if let Err(d) = new.write(req.config_dir) {
            diags.push(d);
        }
    }
    (lines, changed_any, diags)
}

/// The new lock file: each provider's entry with the hashes every platform's package gave
/// added (Terraform's merge), and the "Obtained" lines; whether any hash was new.
fn merge(
    req: &LockRequest,
    old: &LockFile,
    by_platform: &BTreeMap<Platform, BTreeMap<SourceAddr, Fetched>>,
    lines: &mut Vec<String>,
) -> (LockFile, bool) {
    let mut new = old.clone();
    let mut changed_any = false;
    for addr in req.requirements.keys() {
        let before = old.providers.get(addr);
        let mut entry: Option<Locked> = before.cloned();
        for platform in &req.platforms {
            let Some(f) = by_platform.get(platform).and_then(|got| got.get(addr)) else {
                continue;
            };
            let kind = match before {
                None => {
                    "This was a new provider and the checksums for this platform are now \
                     tracked in the lock file"
                }
                Some(b) if f.locked.hashes.iter().all(|h| b.has_hash(h)) => {
                    "All checksums for this platform were already tracked in the lock file"
                }
                Some(_) => {
                    "Additional checksums for this platform are now tracked in the lock file"
                }
            };
            changed_any |= !kind.starts_with("All");
            lines.push(format!(
                "- Obtained {} checksums for {platform}; {kind}",
                addr.short()
            ));
            let e = entry.get_or_insert_with(|| Locked {
                version: f.locked.version.clone(),
                constraints: None,
                hashes: Vec::new(),
            });
            e.version = f.locked.version.clone();
            e.constraints = f.locked.constraints.clone();
            e.add_hashes(f.locked.hashes.iter().cloned());
        }
        if let Some(e) = entry {
            new.providers.insert(addr.clone(), e);
        }
    }
    (new, changed_any)
}

/// Runs `providers mirror DIR`: every required provider, for every platform, into `dir` in
/// the packed layout, with the JSON indexes of the network mirror protocol beside each
/// provider's archives (`index.json`, `VERSION.json`), as Terraform writes them; Terraform's
/// lines.
pub(crate) fn mirror(req: &LockRequest, dir: &Path) -> (Vec<String>, Diagnostics) {
    let mut diags = Diagnostics::new();
    let mut lines = Vec::new();
    let old = match LockFile::read(req.config_dir) {
        Ok(l) => l,
        Err(d) => {
            diags.push(d);
            return (lines, diags);
        }
    };
    let cli = with_source(req.cli, req.only.clone());
    let install = Request {
        config_dir: req.config_dir,
        cli: &cli,
        requirements: req.requirements.clone(),
        builtin_types: req.builtin_types.clone(),
        upgrade: false,
    };
    let tmp = match tempfile::tempdir() {
        Ok(t) => t,
        Err(e) => {
            diags.push(Diagnostic::error(
                "Could not create temporary directory",
                e.to_string(),
            ));
            return (lines, diags);
        }
    };
    let mut installers: Vec<(Platform, Installer)> = req
        .platforms
        .iter()
        .map(|p| {
            let inst = Installer::new(&install, p.clone(), tmp.path().join(p.to_string()))
                .keep_archives(dir)
                .force();
            (p.clone(), inst)
        })
        .collect();
    for (addr, constraints) in &req.requirements {
        if addr.is_terraform_builtin() {
            lines.push(format!(
                "- Skipping {} because it is built in to Cairn",
                addr.short()
            ));
            continue;
        }
        if cli.dev_overrides.contains_key(addr) {
            lines.push(format!(
                "- Skipping {} because dev_overrides names it",
                addr.short()
            ));
            continue;
        }
        lines.push(format!("- Mirroring {}...", addr.short()));
        let locked = old.providers.get(addr);
        let mut said = false;
        for (platform, inst) in installers.iter_mut() {
            match inst.one(addr, constraints, locked) {
                Ok((Selected::Plugin { version, from, .. }, _)) => {
                    if !said {
                        said = true;
                        lines.push(match (locked, constraints.is_empty()) {
                            (Some(_), _) => {
                                format!("  - Selected v{version} to match dependency lock file")
                            }
                            (None, false) => {
                                format!("  - Selected v{version} to meet constraints {constraints}")
                            }
                            (None, true) => format!("  - Selected v{version} with no constraints"),
                        });
                    }
                    lines.push(format!("  - Downloading package for {platform}..."));
                    lines.push(format!("  - Package from {from}"));
                }
                Ok(_) => {
                    lines.pop();
                    lines.push(format!(
                        "- Skipping {} because it is built in to Cairn and no installation \
                         source has a plugin for it",
                        addr.short()
                    ));
                    break;
                }
                Err(e) => diags.push(Diagnostic::error(
                    "Provider not available",
                    format!("Failed to download {addr} for {platform}: {e}"),
                )),
            }
        }
    }
    if let Err(e) = write_indexes(dir) {
        diags.push(Diagnostic::error("Failed to update indexes", e));
    }
    (lines, diags)
}

/// Writes `index.json` and one `VERSION.json` per version beside every provider's archives
/// in the mirror (what is there, old packages included, as Terraform scans the directory).
fn write_indexes(dir: &Path) -> Result<(), String> {
    use serde_json::{json, Map, Value as J};
    for addr in super::mirror::providers_in_dir(dir) {
        let mut versions = Map::new();
        let mut archives: BTreeMap<String, Map<String, J>> = BTreeMap::new();
        for (version, by_platform) in super::mirror::packages_in_dir(dir, &addr) {
            for (platform, pkg) in by_platform {
                let super::mirror::Package::Zip(path) = &pkg else {
                    continue;
                };
                let hash = pkg.h1()?;
                versions.insert(version.to_string(), json!({}));
                let file = path
                    .file_name()
                    .map(|f| f.to_string_lossy().into_owned())
                    .unwrap_or_default();
                archives
                    .entry(version.to_string())
                    .or_default()
                    .insert(platform.to_string(), json!({"hashes": [hash], "url": file}));
            }
        }
        if versions.is_empty() {
            continue;
        }
        let at = dir.join(addr.rel_path());
        let write = |name: &str, v: &J| {
            let text = serde_json::to_string_pretty(v).unwrap_or_default();
            std::fs::write(at.join(name), text)
                .map_err(|e| format!("{}: {e}", at.join(name).display()))
        };
        write("index.json", &json!({ "versions": sorted(versions) }))?;
        for (v, a) in archives {
            write(&format!("{v}.json"), &json!({ "archives": sorted(a) }))?;
        }
    }
    Ok(())
}

/// A JSON object with its keys in Go's (sorted) order.
fn sorted(m: serde_json::Map<String, serde_json::Value>) -> serde_json::Value {
    let b: BTreeMap<String, serde_json::Value> = m.into_iter().collect();
    serde_json::Value::Object(b.into_iter().collect())
}
