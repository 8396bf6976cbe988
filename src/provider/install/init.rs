//! `cairn init`'s provider installation: select a version of every provider the
//! configuration needs, install it into `.terraform/providers`, and update the lock file.
//!
//! Per provider, in Terraform's order:
//! 1. `dev_overrides`: used as is; not locked.
//! 2. The lock file's version, if it still meets the constraints (without `-upgrade`); a locked
//!    version the constraints now exclude is an error that names both.
//! 3. Already installed in `.terraform/providers` with a locked `h1:` hash: kept.
//! 4. The plugin cache (`plugin_cache_dir`) when its package matches a locked hash.
//! 5. The installation methods ([`CliConfig::methods`]) that serve the provider: the versions
//!    of all of them are merged, the newest allowed one (or the locked one) is taken from the
//!    first method that has it for this platform. With a plugin cache the package is unpacked
//!    there and linked from `.terraform/providers`.
//!
//! Built-in types: for a provider type Cairn has built in (`null`, `random`, …), the registry
//! (`direct`) is not asked; when no local source has a plugin, the built-in answers. So
//! configurations that use only built-in providers install nothing and need no network.
//!
//! Every installed package is checked against the lock file's hashes when the lock has the
//! provider; the lock then records the version, the constraints, and the `h1:` hash of what
//! was installed plus the `zh:` hashes a registry signed. Entries of providers the
//! configuration no longer needs are dropped.

use super::cli_config::{CliConfig, MethodKind};
use super::lock::{LockFile, Locked, LOCK_FILE};
use super::mirror::{self, Package};
use super::platform::Platform;
use super::remote::{self, Http};
use crate::addr::provider_source::SourceAddr;
use crate::addr::version::{Constraints, Version};
use crate::diag::{Diagnostic, Diagnostics};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// What `init` must install.
pub(crate) struct Request<'a> {
    pub(crate) config_dir: &'a Path,
    pub(crate) cli: &'a CliConfig,
    /// Every provider the configuration needs, with its merged constraints.
    pub(crate) requirements: BTreeMap<SourceAddr, Constraints>,
    /// The provider types Cairn has built in.
    pub(crate) builtin_types: BTreeSet<String>,
    /// `-upgrade`: ignore the lock file's versions (still within the constraints).
    pub(crate) upgrade: bool,
}

/// What runs for one provider after `init`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Selected {
    /// The built-in provider of that type (no plugin installed).
    BuiltIn,
    /// A `dev_overrides` directory.
    DevOverride(PathBuf),
    /// An installed plugin.
    Plugin {
        version: Version,
        /// Where it came from, as a phrase: "already installed", "the filesystem mirror
        /// /x", "the registry registry.terraform.io (signed by key 34365D9472D7468F)", …
        from: String,
        /// The package directory in `.terraform/providers`.
        dir: PathBuf,
    },
}

/// Installs every required provider; returns what runs for each and the problems. The lock
/// file is written when it changed and nothing failed.
pub(crate) fn install(req: &Request) -> (BTreeMap<SourceAddr, Selected>, Diagnostics) {
    let mut diags = Diagnostics::new();
    let mut out = BTreeMap::new();
    let old_lock = match LockFile::read(req.config_dir) {
        Ok(l) => l,
        Err(d) => {
            diags.push(d);
            return (out, diags);
        }
    };
    let mut lock = LockFile::default();
    let mut inst = Installer::new(
        req,
        Platform::current(),
        super::providers_dir(req.config_dir, req.cli),
    );
    for (addr, constraints) in &req.requirements {
        if addr.is_terraform_builtin() {
            out.insert(addr.clone(), Selected::BuiltIn);
            continue;
        }
        if let Some(d) = req.cli.dev_overrides.get(addr) {
            if let Some(l) = old_lock.providers.get(addr) {
                lock.providers.insert(addr.clone(), l.clone());
            }
            out.insert(addr.clone(), Selected::DevOverride(d.clone()));
            continue;
        }
        match inst.one(addr, constraints, old_lock.providers.get(addr)) {
            Ok((sel, locked)) => {
                if let Some(l) = locked {
                    lock.providers.insert(addr.clone(), l);
                }
                out.insert(addr.clone(), sel);
            }
            Err(detail) => diags.push(Diagnostic::error(
                format!("Failed to install provider {}", addr.short()),
                detail,
            )),
        }
    }
    // Like Terraform, no lock file is created for a configuration without plugins.
    let wanted = !(lock.providers.is_empty() && old_lock.providers.is_empty());
    let changed = lock != old_lock || !req.config_dir.join(LOCK_FILE).exists();
    if !diags.has_errors() && wanted && changed {
        if let Err(d) = lock.write(req.config_dir) {
            diags.push(d);
        }
    }
    (out, diags)
}

pub(super) struct Installer<'a> {
    req: &'a Request<'a>,
    platform: Platform,
    dir: PathBuf,
    http: Option<Result<Http<'a>, String>>,
    /// `providers mirror`: each fetched package is also kept here in the packed layout
    /// (`HOST/NS/TYPE/terraform-provider-TYPE_VERSION_OS_ARCH.zip`, the source's archive
    /// itself, or an unpacked source's files zipped).
    archives: Option<PathBuf>,
    /// `providers lock` and `providers mirror` (Terraform's `InstallNewProvidersForce`): a
    /// package whose hash the lock does not have yet is taken (it is another platform's),
    /// not refused.
    force: bool,
}

/// A package fetched to a temporary place, before it is installed.
struct Staged {
    pkg: Package,
    /// Hashes for the lock besides the package's own `h1:`.
    extra_hashes: Vec<String>,
    from: String,
    _tmp: Option<tempfile::TempDir>,
}

impl<'a> Installer<'a> {
    /// An installer for `platform` whose packages go under `dir` (a providers directory's
    /// layout), for `providers lock` and `providers mirror`.
    pub(super) fn new(req: &'a Request<'a>, platform: Platform, dir: PathBuf) -> Installer<'a> {
        Installer {
            req,
            platform,
            dir,
            http: None,
            archives: None,
            force: false,
        }
    }

    /// Keeps every fetched package in `dir`, packed (see `archives`).
    pub(super) fn keep_archives(mut self, dir: &Path) -> Self {
        self.archives = Some(dir.to_path_buf());
        self
    }

    /// Takes packages whose hashes the lock does not list (see `force`).
    pub(super) fn force(mut self) -> Self {
        self.force = true;
        self
    }

    fn http(&mut self) -> Result<&Http<'a>, String> {
        let cli = self.req.cli;
        self.http
            .get_or_insert_with(|| Http::new(cli))
            .as_ref()
            .map_err(Clone::clone)
    }

    fn target(&self, addr: &SourceAddr, v: &Version) -> PathBuf {
        self.dir
            .join(addr.rel_path())
            .join(v.to_string())
            .join(self.platform.to_string())
    }

    pub(super) fn one(
        &mut self,
        addr: &SourceAddr,
        constraints: &Constraints,
        locked: Option<&Locked>,
    ) -> Result<(Selected, Option<Locked>), String> {
        let constraint_text = (!constraints.is_empty()).then(|| constraints.to_string());
        let pinned = match locked {
            Some(l) if !self.req.upgrade => {
                if !constraints.allows(&l.version) {
                    return Err(format!(
                        "{LOCK_FILE} selects version {} of {}, which the configuration's \
                         constraints ({constraints}) do not allow. Run `cairn init -upgrade` to \
                         select a new version.",
                        l.version,
                        addr.short()
                    ));
                }
                Some(l)
            }
            _ => None,
        };
        // Already installed and matching the lock.
        if let Some(l) = pinned {
            let t = self.target(addr, &l.version);
            if t.is_dir() && super::hash::h1_dir(&t).is_ok_and(|h| l.has_hash(&h)) {
                return Ok((
                    Selected::Plugin {
                        version: l.version.clone(),
                        from: "already installed".into(),
                        dir: t,
                    },
                    Some(Locked {
                        constraints: constraint_text,
                        ..l.clone()
                    }),
                ));
            }
        }
        // The plugin cache, when it holds a package the lock vouches for.
        if let (Some(cache), Some(l)) = (&self.req.cli.plugin_cache_dir, pinned) {
            let version = l.version.clone();
            let c = cache
                .join(addr.rel_path())
                .join(version.to_string())
                .join(self.platform.to_string());
            if c.is_dir() && super::hash::h1_dir(&c).is_ok_and(|h| l.has_hash(&h)) {
                let t = self.target(addr, &version);
                link_or_copy(&c, &t)?;
                return Ok((
                    Selected::Plugin {
                        version,
                        from: format!("the plugin cache {}", cache.display()),
                        dir: t,
                    },
                    Some(Locked {
                        constraints: constraint_text,
                        ..l.clone()
                    }),
                ));
            }
        }
        let is_builtin = self.req.builtin_types.contains(&addr.type_);
        let methods: Vec<_> = self
            .req
            .cli
            .methods()
            .into_iter()
            .filter(|m| m.serves(addr))
            .filter(|m| !(is_builtin && m.kind == MethodKind::Direct))
            .collect();
        // The versions each method offers.
        let mut offers: Vec<(usize, Vec<Version>)> = Vec::new();
        let mut problems = Vec::new();
        for (i, m) in methods.iter().enumerate() {
            let r = match &m.kind {
                MethodKind::FilesystemMirror(root) => Ok(mirror::packages_in_dir(root, addr)
                    .into_iter()
                    .filter(|(_, p)| p.contains_key(&self.platform))
                    .map(|(v, _)| v)
                    .collect()),
                MethodKind::NetworkMirror(base) => {
                    let base = base.clone();
                    self.http()
                        .and_then(|h| remote::mirror_versions(h, &base, addr))
                }
                MethodKind::Direct => {
                    let platform = self.platform.clone();
                    self.http()
                        .and_then(|h| remote::registry_versions(h, addr, &platform))
                }
            };
            match r {
                Ok(vs) => offers.push((i, vs)),
                Err(e) => problems.push(e),
            }
        }
        let all: BTreeSet<&Version> = offers.iter().flat_map(|(_, vs)| vs.iter()).collect();
        let chosen = match pinned {
            Some(l) => all.contains(&l.version).then(|| l.version.clone()),
            None => constraints.newest(all.iter().copied()).cloned(),
        };
        let Some(version) = chosen else {
            if is_builtin && problems.is_empty() && pinned.is_none() {
                return Ok((Selected::BuiltIn, None));
            }
            let mut msg = match pinned {
                Some(l) => format!(
                    "{LOCK_FILE} selects version {} of {}, but no installation source has it \
                     for {}",
                    l.version,
                    addr.short(),
                    self.platform
                ),
                None if all.is_empty() => format!(
                    "No installation source has {} for {}",
                    addr.short(),
                    self.platform
                ),
                None => format!(
                    "No available version of {} matches the constraints ({constraints}); \
                     available: {}",
                    addr.short(),
                    all.iter()
                        .map(|v| v.to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            };
            if methods.is_empty() {
                msg.push_str(
                    ": no installation method of the CLI configuration serves it \
                     (check provider_installation's include and exclude)",
                );
            }
            if !problems.is_empty() {
                msg.push_str(&format!(" ({})", problems.join("; ")));
            }
            return Err(msg + ".");
        };
        // Fetch from the first method that has the version.
        let mut staged = None;
        for (i, vs) in &offers {
            if !vs.contains(&version) {
                continue;
            }
            match self.stage(&methods[*i].kind, addr, &version) {
                Ok(Some(s)) => {
                    staged = Some(s);
                    break;
                }
                Ok(None) => continue,
                Err(e) => return Err(e + "."),
            }
        }
        let Some(staged) = staged else {
            return Err(format!(
                "No installation source could deliver {} {version} for {}.",
                addr.short(),
                self.platform
            ));
        };
        let h1 = staged.pkg.h1()?;
        if let Some(l) = pinned {
            // The package's own h1:, or (for an archive) its zh:, must be locked.
            let zh_locked = matches!(staged.pkg, Package::Zip(_))
                && super::hash::zh_zip(staged.pkg.path()).is_ok_and(|z| l.has_hash(&z));
            let matches = l.has_hash(&h1) || zh_locked;
            if !l.hashes.is_empty() && !matches && !self.force {
                return Err(format!(
                    "The package of {} {version} from {} has the checksum {h1}, which is not \
                     among the checksums {LOCK_FILE} records for it. It may have been tampered \
                     with; if the change is intended, delete the provider's entry from \
                     {LOCK_FILE} and run `cairn init` again.",
                    addr.short(),
                    staged.from
                ));
            }
        }
        if let Some(root) = &self.archives {
            let name = format!(
                "terraform-provider-{}_{version}_{}.zip",
                addr.type_, self.platform
            );
            let path = root.join(addr.rel_path()).join(name);
            keep_archive(&staged.pkg, &path)?;
        }
        let t = self.target(addr, &version);
        match &self.req.cli.plugin_cache_dir {
            Some(cache) => {
                let c = cache
                    .join(addr.rel_path())
                    .join(version.to_string())
                    .join(self.platform.to_string());
                unpack(&staged.pkg, &c)?;
                link_or_copy(&c, &t)?;
            }
            None => unpack(&staged.pkg, &t)?,
        }
        let mut hashes: Vec<String> = match pinned {
            Some(l) if l.version == version => l.hashes.clone(),
            _ => Vec::new(),
        };
        hashes.push(h1);
        let mut new_lock = Locked {
            version: version.clone(),
            constraints: constraint_text,
            hashes: Vec::new(),
        };
        hashes.extend(staged.extra_hashes.iter().cloned());
        new_lock.add_hashes(hashes);
        Ok((
            Selected::Plugin {
                version,
                from: staged.from,
                dir: t,
            },
            Some(new_lock),
        ))
    }

    /// Fetches a package from one method into a temporary place (`Ok(None)`: not there for
    /// this platform).
    fn stage(
        &mut self,
        kind: &MethodKind,
        addr: &SourceAddr,
        version: &Version,
    ) -> Result<Option<Staged>, String> {
        let platform = self.platform.clone();
        match kind {
            MethodKind::FilesystemMirror(root) => {
                let pkg = mirror::packages_in_dir(root, addr)
                    .remove(version)
                    .and_then(|mut p| p.remove(&platform));
                Ok(pkg.map(|pkg| Staged {
                    pkg,
                    extra_hashes: Vec::new(),
                    from: format!("the filesystem mirror {}", root.display()),
                    _tmp: None,
                }))
            }
            MethodKind::NetworkMirror(base) => {
                let tmp = tempfile::tempdir().map_err(|e| e.to_string())?;
                let zip = tmp.path().join("package.zip");
                let base = base.clone();
                let h = self.http()?;
                Ok(
                    remote::mirror_fetch(h, &base, addr, version, &platform, &zip)?.map(|hashes| {
                        Staged {
                            pkg: Package::Zip(zip),
                            extra_hashes: hashes,
                            from: format!("the network mirror {base}"),
                            _tmp: Some(tmp),
                        }
                    }),
                )
            }
            MethodKind::Direct => {
                let tmp = tempfile::tempdir().map_err(|e| e.to_string())?;
                let zip = tmp.path().join("package.zip");
                let h = self.http()?;
                let f = remote::registry_fetch(h, addr, version, &platform, &zip)?;
                Ok(Some(Staged {
                    pkg: Package::Zip(zip),
                    extra_hashes: f.zh_hashes,
                    from: format!("the registry {} (signed by key {})", addr.host, f.signed_by),
                    _tmp: Some(tmp),
                }))
            }
        }
    }
}

fn io(p: &Path) -> impl Fn(std::io::Error) -> String + '_ {
    move |e| format!("{}: {e}", p.display())
}

/// Replaces `dest` (a directory or link) with the package's files: a zip unpacked (with its
/// file modes) or a directory copied.
fn unpack(pkg: &Package, dest: &Path) -> Result<(), String> {
    let parent = dest.parent().ok_or("no parent directory")?;
    std::fs::create_dir_all(parent).map_err(io(parent))?;
    let tmp = tempfile::tempdir_in(parent).map_err(io(parent))?;
    match pkg {
        Package::Zip(z) => {
            let f = std::fs::File::open(z).map_err(io(z))?;
            let mut a = zip::ZipArchive::new(f).map_err(|e| format!("{}: {e}", z.display()))?;
            a.extract(tmp.path())
                .map_err(|e| format!("{}: cannot unpack: {e}", z.display()))?;
        }
        Package::Dir(d) => copy_dir(d, tmp.path())?,
    }
    remove_any(dest)?;
    let staged = tmp.keep();
    std::fs::rename(&staged, dest).map_err(io(dest))?;
    Ok(())
}

/// Puts the package at `path` as a zip archive: an archive copied as it is (its bytes, so its
/// `zh:` hash stays the source's), a directory zipped with its files' modes.
fn keep_archive(pkg: &Package, path: &Path) -> Result<(), String> {
    let parent = path.parent().ok_or("no parent directory")?;
    std::fs::create_dir_all(parent).map_err(io(parent))?;
    let staging = parent.join(format!(
        ".{}",
        path.file_name().unwrap_or_default().to_string_lossy()
    ));
    match pkg {
        Package::Zip(z) => {
            std::fs::copy(z, &staging).map_err(io(z))?;
        }
        Package::Dir(d) => {
            let f = std::fs::File::create(&staging).map_err(io(&staging))?;
            let mut w = zip::ZipWriter::new(f);
            zip_dir(&mut w, d, "")?;
            w.finish()
                .map_err(|e| format!("{}: {e}", staging.display()))?;
        }
    }
    std::fs::rename(&staging, path).map_err(io(path))
}

fn zip_dir(w: &mut zip::ZipWriter<std::fs::File>, dir: &Path, prefix: &str) -> Result<(), String> {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .map_err(io(dir))?
        .filter_map(Result::ok)
        .collect();
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let p = e.path();
        let name = format!("{prefix}{}", e.file_name().to_string_lossy());
        if p.is_dir() {
            zip_dir(w, &p, &format!("{name}/"))?;
            continue;
        }
        let mut opts = zip::write::SimpleFileOptions::default();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = std::fs::metadata(&p).map_err(io(&p))?.permissions().mode();
            opts = opts.unix_permissions(mode & 0o777);
        }
        w.start_file(name, opts)
            .map_err(|e| format!("{}: {e}", p.display()))?;
        let bytes = std::fs::read(&p).map_err(io(&p))?;
        std::io::Write::write_all(w, &bytes).map_err(io(&p))?;
    }
    Ok(())
}

fn copy_dir(from: &Path, to: &Path) -> Result<(), String> {
    std::fs::create_dir_all(to).map_err(io(to))?;
    for e in std::fs::read_dir(from).map_err(io(from))? {
        let e = e.map_err(io(from))?;
        let p = e.path();
        let t = to.join(e.file_name());
        if p.is_dir() {
            copy_dir(&p, &t)?;
        } else {
            std::fs::copy(&p, &t).map_err(io(&p))?;
        }
    }
    Ok(())
}

fn remove_any(p: &Path) -> Result<(), String> {
    match std::fs::symlink_metadata(p) {
        Ok(m) if m.is_dir() => std::fs::remove_dir_all(p).map_err(io(p)),
        Ok(_) => std::fs::remove_file(p).map_err(io(p)),
        Err(_) => Ok(()),
    }
}

/// Makes `dest` a symbolic link to the cached package `src` (a copy where links fail).
fn link_or_copy(src: &Path, dest: &Path) -> Result<(), String> {
    let parent = dest.parent().ok_or("no parent directory")?;
    std::fs::create_dir_all(parent).map_err(io(parent))?;
    remove_any(dest)?;
    let abs = std::fs::canonicalize(src).map_err(io(src))?;
    #[cfg(unix)]
    if std::os::unix::fs::symlink(&abs, dest).is_ok() {
        return Ok(());
    }
    copy_dir(&abs, dest)
}
