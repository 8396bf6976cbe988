//! The built-in provider packages, keyed by package name, and the host environment they read.
//!
//! Providers never read the process environment or working directory themselves: they get a
//! `Host` at construction. `builtin()` passes the real process's; tests pass their own, so
//! tests that exercise `SIM_STORE` or relative paths neither race each other nor `chdir`.

use super::{external, local, null, random, sim, terraform, Provider};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// What a provider may know about the process it runs in.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Host {
    /// Environment variables (`SIM_STORE`, `SIM_LATENCY_MS`, `SIM_FAIL`, ...).
    pub env: BTreeMap<String, String>,
    /// The working directory relative paths are resolved against (Terraform's habit: relative
    /// to where the command runs).
    pub cwd: PathBuf,
}

impl Host {
    /// The running process's environment and working directory.
    pub fn from_process() -> Host {
        Host {
            env: std::env::vars().collect(),
            cwd: std::env::current_dir().unwrap_or_else(|_| PathBuf::from(".")),
        }
    }

    /// A host with the given working directory and no environment.
    pub fn at(cwd: impl Into<PathBuf>) -> Host {
        Host {
            env: BTreeMap::new(),
            cwd: cwd.into(),
        }
    }

    /// Adds an environment variable.
    pub fn with_env(mut self, key: &str, value: &str) -> Host {
        self.env.insert(key.to_string(), value.to_string());
        self
    }

    /// A non-empty environment variable.
    pub fn var(&self, key: &str) -> Option<&str> {
        self.env
            .get(key)
            .map(String::as_str)
            .filter(|v| !v.is_empty())
    }

    /// The random generator for a value a provider makes at create (ids, random strings).
    ///
    /// Normally seeded from the operating system. With `CAIRN_RANDOM_SEED` set, it is derived
    /// from that seed and `salt` (the resource type and its planned configuration), so test
    /// fixtures and demos get the same "random" values on every run and at every parallelism,
    /// whatever order the creates happen in.
    pub fn rng(&self, salt: impl FnOnce() -> String) -> rand::rngs::StdRng {
        use rand::SeedableRng;
        use sha2::{Digest, Sha256};
        match self.var("CAIRN_RANDOM_SEED") {
            Some(seed) => {
                let mut h = Sha256::new();
                h.update(seed.as_bytes());
                h.update([0]);
                h.update(salt().as_bytes());
                rand::rngs::StdRng::from_seed(h.finalize().into())
            }
            // Seeded from the thread's generator (itself seeded from the OS once): no system
            // call per object.
            None => rand::rngs::StdRng::from_rng(rand::thread_rng())
                .unwrap_or_else(|_| rand::rngs::StdRng::from_entropy()),
        }
    }

    /// `path` resolved against the working directory (absolute paths unchanged).
    pub fn resolve(&self, path: &str) -> PathBuf {
        let p = Path::new(path);
        if p.is_absolute() {
            p.to_path_buf()
        } else {
            self.cwd.join(p)
        }
    }
}

/// Every built-in provider, configured from the process environment.
pub fn builtin() -> BTreeMap<String, Arc<dyn Provider>> {
    builtin_with(Host::from_process())
}

/// Every built-in provider, reading `host` instead of the process.
pub fn builtin_with(host: Host) -> BTreeMap<String, Arc<dyn Provider>> {
    let providers: Vec<Arc<dyn Provider>> = vec![
        Arc::new(sim::SimProvider::new(host.clone())),
        Arc::new(terraform::TerraformProvider::new(host.clone())),
        Arc::new(local::LocalProvider::new(host.clone())),
        Arc::new(random::RandomProvider::new(host.clone())),
        Arc::new(null::NullProvider::new(host.clone())),
        Arc::new(external::ExternalProvider::new(host)),
    ];
    providers
        .into_iter()
        .map(|p| (p.package().to_string(), p))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_package_is_registered_under_its_prefix() {
        let all = builtin_with(Host::at("/"));
        let names: Vec<&str> = all.keys().map(String::as_str).collect();
        assert_eq!(
            names,
            ["external", "local", "null", "random", "sim", "terraform"]
        );
        for (package, p) in &all {
            let s = p.schema();
            for t in s.resources.keys().chain(s.data_sources.keys()) {
                assert!(
                    t == package || t.starts_with(&format!("{package}_")),
                    "{t} is not in package {package}"
                );
            }
        }
    }
}
