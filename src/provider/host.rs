//! The host environment a built-in provider reads.
//!
//! Providers never read the process environment or working directory themselves: they get a
//! `Host` at construction. `builtin()` passes the real process's; tests pass their own, so
//! tests that exercise `SIM_STORE` or relative paths neither race each other nor `chdir`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

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
    pub(crate) fn from_process() -> Host {
        Host {
            env: std::env::vars().collect(),
            cwd: std::env::current_dir().unwrap_or_else(|_| PathBuf::from(".")),
        }
    }

    /// A host with the given working directory and no environment.
    #[cfg(test)]
    pub(crate) fn at(cwd: impl Into<PathBuf>) -> Host {
        Host {
            env: BTreeMap::new(),
            cwd: cwd.into(),
        }
    }

    /// Adds an environment variable.
    #[cfg(test)]
    pub(crate) fn with_env(mut self, key: &str, value: &str) -> Host {
        self.env.insert(key.to_string(), value.to_string());
        self
    }

    /// A non-empty environment variable.
    pub(crate) fn var(&self, key: &str) -> Option<&str> {
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
    pub(crate) fn rng(&self, salt: impl FnOnce() -> String) -> rand::rngs::StdRng {
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
    pub(crate) fn resolve(&self, path: &str) -> PathBuf {
        let p = Path::new(path);
        if p.is_absolute() {
            p.to_path_buf()
        } else {
            self.cwd.join(p)
        }
    }
}
