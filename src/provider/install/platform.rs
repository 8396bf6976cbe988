//! Platforms (`linux_amd64`): which operating system and architecture a provider package is
//! built for.

use std::fmt;

/// An operating system and architecture in Go's names, as provider packages are built for:
/// `linux_amd64`, `darwin_arm64`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Platform {
    pub(crate) os: String,
    pub(crate) arch: String,
}

impl Platform {
    /// The platform Cairn runs on.
    pub fn current() -> Platform {
        let arch = match std::env::consts::ARCH {
            "x86_64" => "amd64",
            "x86" => "386",
            "aarch64" => "arm64",
            "arm" => "arm",
            "powerpc64" => "ppc64le",
            "s390x" => "s390x",
            other => other,
        };
        Platform {
            os: std::env::consts::OS.into(),
            arch: arch.into(),
        }
    }

    /// Parses `OS_ARCH`.
    pub(crate) fn parse(s: &str) -> Option<Platform> {
        let (os, arch) = s.split_once('_')?;
        if os.is_empty() || arch.is_empty() || arch.contains('_') {
            return None;
        }
        Some(Platform {
            os: os.into(),
            arch: arch.into(),
        })
    }
}

impl fmt::Display for Platform {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}_{}", self.os, self.arch)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn platforms() {
        let p = Platform::parse("linux_amd64").unwrap();
        assert_eq!(p.to_string(), "linux_amd64");
        assert!(Platform::parse("linux").is_none());
        assert!(!Platform::current().os.is_empty());
    }
}
