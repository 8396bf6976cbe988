//! Provider installation: which plugin binary runs for a provider source address, and
//! `cairn init`'s resolving and installing of providers the way Terraform does it.
//!
//! Parts:
//! - `platform`: platforms (`linux_amd64`); source addresses (`hashicorp/aws`) and versions
//!   with Terraform's constraints are addresses (`crate::addr::provider_source`,
//!   `crate::addr::version`); `cli_config`: the CLI configuration (`provider_installation`,
//!   `plugin_cache_dir`, …); `lock`: `.terraform.lock.hcl`; `hash`: `h1:` / `zh:` hashes;
//!   `mirror`: local directory layouts.
//! - [`locate`]: what plan and apply use. `dev_overrides` first (no lock check, a warning is
//!   the caller's to print), then the package the lock file selects in
//!   `.terraform/providers/HOST/NS/TYPE/VERSION/OS_ARCH/`, refused when its `h1:` hash is not
//!   in the lock file. `Ok(None)` means "no plugin installed": a built-in provider of that type
//!   may answer.
//!
//! Invariants: nothing here reads the process environment (the CLI hands it over as a map to
//! [`CliConfig::from_env`]); nothing prints.

pub(crate) mod cli_config;
pub(crate) mod credentials;
pub mod hash;
pub(crate) mod init;
pub(crate) mod lock;
pub(crate) mod locking;
pub(crate) mod mirror;
pub(crate) mod modules;
pub mod platform;
pub(crate) mod remote;

pub use cli_config::CliConfig;
pub use lock::{LockFile, Locked, LOCK_FILE};

use crate::addr::provider_source::SourceAddr;
use crate::addr::version::Version;
use crate::diag::Diagnostic;
use platform::Platform;
use std::fmt;
use std::path::{Path, PathBuf};

/// Where a located plugin came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Origin {
    /// A `dev_overrides` directory of the CLI configuration.
    DevOverride(PathBuf),
    /// The package directory `cairn init` (or `terraform init`) installed, checked against the
    /// lock file.
    Installed(PathBuf),
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::DevOverride(d) => write!(f, "dev_overrides ({})", d.display()),
            Origin::Installed(d) => write!(f, "installed ({})", d.display()),
        }
    }
}

/// A plugin binary to run for a provider.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Located {
    /// The executable.
    pub path: PathBuf,
    /// `None` for a development override.
    pub(crate) version: Option<Version>,
    pub(crate) origin: Origin,
    /// The package's `h1:` hash (checked against the lock); `None` for an override.
    pub(crate) hash: Option<String>,
}

/// The directory where `init` installs providers: `.terraform/providers` (or
/// `$TF_DATA_DIR/providers`) below the configuration directory.
pub(crate) fn providers_dir(config_dir: &Path, cli: &CliConfig) -> PathBuf {
    config_dir
        .join(cli.data_dir.as_deref().unwrap_or(Path::new(".terraform")))
        .join("providers")
}

/// The plugin that runs for `addr` at plan and apply time, if one is installed (see the module
/// docs). Reads the lock file; for repeated calls use [`Installed`].
pub fn locate(
    config_dir: &Path,
    addr: &SourceAddr,
    cli: &CliConfig,
) -> Result<Option<Located>, Diagnostic> {
    Installed::load(config_dir, cli)?.locate(addr)
}

/// The lock file and install directory of a configuration, read once.
pub(crate) struct Installed<'a> {
    pub(crate) lock: LockFile,
    pub(crate) dir: PathBuf,
    pub(crate) cli: &'a CliConfig,
    pub(crate) platform: Platform,
}

impl<'a> Installed<'a> {
    pub(crate) fn load(config_dir: &Path, cli: &'a CliConfig) -> Result<Installed<'a>, Diagnostic> {
        Ok(Installed {
            lock: LockFile::read(config_dir)?,
            dir: providers_dir(config_dir, cli),
            cli,
            platform: Platform::current(),
        })
    }

    /// See [`locate`].
    pub(crate) fn locate(&self, addr: &SourceAddr) -> Result<Option<Located>, Diagnostic> {
        if addr.is_terraform_builtin() {
            return Ok(None);
        }
        if let Some(dir) = self.cli.dev_overrides.get(addr) {
            let path = if dir.is_file() {
                Some(dir.clone())
            } else {
                mirror::executable_in(dir, &addr.type_)
            };
            let Some(path) = path else {
                return Err(Diagnostic::error(
                    "Development override has no provider",
                    format!(
                        "The CLI configuration{} overrides {} with the directory {}, but it \
                         holds no executable named terraform-provider-{}….",
                        self.cli
                            .file
                            .as_ref()
                            .map(|f| format!(" ({})", f.display()))
                            .unwrap_or_default(),
                        addr.short(),
                        dir.display(),
                        addr.type_
                    ),
                ));
            };
            return Ok(Some(Located {
                path,
                version: None,
                origin: Origin::DevOverride(dir.clone()),
                hash: None,
            }));
        }
        let base = self.dir.join(addr.rel_path());
        let Some(locked) = self.lock.providers.get(addr) else {
            if mirror::packages_in_dir(&self.dir, addr).is_empty() {
                return Ok(None);
            }
            return Err(Diagnostic::error(
                "Inconsistent dependency lock file",
                format!(
                    "Provider {} is installed in {}, but {LOCK_FILE} does not select a version \
                     of it. Run `cairn init` to update the lock file.",
                    addr.short(),
                    base.display()
                ),
            ));
        };
        let pkg = base
            .join(locked.version.to_string())
            .join(self.platform.to_string());
        if !pkg.is_dir() {
            return Err(Diagnostic::error(
                "Required provider is not installed",
                format!(
                    "{LOCK_FILE} selects {} {}, but it is not installed in {} for {}. Run \
                     `cairn init` to install it.",
                    addr.short(),
                    locked.version,
                    pkg.display(),
                    self.platform
                ),
            ));
        }
        let h1 = hash::h1_dir(&pkg).map_err(|e| {
            Diagnostic::error("Cannot read the installed provider", format!("{e}."))
        })?;
        if !locked.has_hash(&h1) {
            let known: Vec<&str> = locked
                .hashes
                .iter()
                .filter(|h| h.starts_with("h1:"))
                .map(String::as_str)
                .collect();
            return Err(Diagnostic::error(
                "Provider package does not match the lock file",
                format!(
                    "The installed package of {} {} in {} has the checksum {h1}, which is not \
                     among the checksums {LOCK_FILE} records for it ({}). The package may have \
                     been changed or replaced: run `cairn init` to install the locked one again, \
                     or, if the change is intended, delete the provider's entry in {LOCK_FILE} \
                     and run `cairn init`.",
                    addr.short(),
                    locked.version,
                    pkg.display(),
                    if known.is_empty() {
                        "none in h1: form".to_string()
                    } else {
                        known.join(", ")
                    }
                ),
            ));
        }
        let Some(path) = mirror::executable_in(&pkg, &addr.type_) else {
            return Err(Diagnostic::error(
                "Provider package has no executable",
                format!(
                    "The package of {} {} in {} holds no executable named \
                     terraform-provider-{}….",
                    addr.short(),
                    locked.version,
                    pkg.display(),
                    addr.type_
                ),
            ));
        };
        Ok(Some(Located {
            path,
            version: Some(locked.version.clone()),
            origin: Origin::Installed(pkg),
            hash: Some(h1),
        }))
    }
}

#[cfg(test)]
mod tests;
