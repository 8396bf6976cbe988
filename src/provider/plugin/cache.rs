//! Provider schemas cached per plugin binary, in the state directory, so that `validate` and
//! `inspect` start no provider process when the binary has not changed (and plan and apply
//! skip `GetProviderSchema`, which is several megabytes for big providers).
//!
//! `<state_dir>/schemas/<sha256 of the binary>.p<protocol>.pb` holds the provider's
//! `GetProviderSchema` response as it came over the wire (protobuf), so a cached schema is
//! decoded by the same conversions as a live one (`rpc::decode_schemas`). `index.json`
//! remembers each binary's hash with its path, size and modification time: a binary is hashed
//! again only when one of them changed. Every file is written to a temporary name and renamed,
//! so a reader never sees half a file; a cache file that does not decode is ignored (and
//! replaced by the next live answer).

use super::rpc::{decode_schemas, Diag, Schemas};
use crate::provider::install::hash::sha256_hex;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

/// The cache under one state directory.
#[derive(Clone, Debug)]
pub(crate) struct SchemaCache {
    dir: PathBuf,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
struct Seen {
    size: u64,
    mtime_ns: u128,
    sha256: String,
}

/// A cached schema: the protocol it was answered in and the decoded schemas.
pub(crate) struct Cached {
    pub(crate) protocol: u32,
    pub(crate) schemas: Schemas,
    pub(crate) diags: Vec<Diag>,
}

impl SchemaCache {
    pub(crate) fn new(state_dir: &Path) -> SchemaCache {
        // Every workspace of a state directory shares its root's cache.
        let root = cairn_state::workspace::of_dir(state_dir)
            .map(|(root, _)| root)
            .unwrap_or_else(|| state_dir.to_path_buf());
        SchemaCache {
            dir: root.join("schemas"),
        }
    }

    fn index_path(&self) -> PathBuf {
        self.dir.join("index.json")
    }

    fn index(&self) -> BTreeMap<String, Seen> {
        std::fs::read(self.index_path())
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default()
    }

    /// The SHA-256 (hex) of the binary at `path`, from the index when its size and
    /// modification time are the ones recorded with it.
    pub(crate) fn hash(&self, path: &Path) -> Result<String, String> {
        let meta = std::fs::metadata(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let mtime_ns = meta
            .modified()
            .ok()
            .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        let key = path.display().to_string();
        let mut index = self.index();
        if let Some(seen) = index.get(&key) {
            if seen.size == meta.len() && seen.mtime_ns == mtime_ns && mtime_ns != 0 {
                return Ok(seen.sha256.clone());
            }
        }
        let file = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let sha256 = sha256_hex(std::io::BufReader::new(file))
            .map_err(|e| format!("{}: {e}", path.display()))?;
        index.insert(
            key,
            Seen {
                size: meta.len(),
                mtime_ns,
                sha256: sha256.clone(),
            },
        );
        // The index only saves hashing: failing to write it is not an error.
        if let Ok(text) = serde_json::to_vec_pretty(&index) {
            let _ = self.write(&self.index_path(), &text);
        }
        Ok(sha256)
    }

    fn file(&self, sha256: &str, protocol: u32) -> PathBuf {
        self.dir.join(format!("{sha256}.p{protocol}.pb"))
    }

    /// The cached schema of the binary with this hash, if there is a readable one.
    pub(crate) fn get(&self, sha256: &str) -> Option<Cached> {
        for protocol in [6, 5] {
            let Ok(bytes) = std::fs::read(self.file(sha256, protocol)) else {
                continue;
            };
            match decode_schemas(protocol, &bytes) {
                Ok((schemas, diags)) => {
                    return Some(Cached {
                        protocol,
                        schemas,
                        diags,
                    })
                }
                Err(e) => {
                    tracing::warn!(target: "plugin", "ignoring the cached schema {sha256}: {e}")
                }
            }
        }
        None
    }

    /// Stores a binary's `GetProviderSchema` response (protobuf bytes).
    pub(crate) fn put(&self, sha256: &str, protocol: u32, response: &[u8]) {
        if let Err(e) = self.write(&self.file(sha256, protocol), response) {
            tracing::warn!(target: "plugin", "cannot cache the schema of {sha256}: {e}");
        }
    }

    fn write(&self, path: &Path, bytes: &[u8]) -> std::io::Result<()> {
        std::fs::create_dir_all(&self.dir)?;
        let tmp = path.with_extension(format!("tmp{}", std::process::id()));
        std::fs::write(&tmp, bytes)?;
        std::fs::rename(&tmp, path)
    }
}

/// The resource and data source configurations a provider binary found valid, kept beside its
/// cached schema (`<sha256>.valid`, one hex digest a line), so that a configuration that has
/// not changed is not sent to `ValidateResourceConfig` again on the next run: Terraform asks
/// on every run, and those calls are a third of a no-op plan's. A validation is a function of
/// the binary, the type and the configuration alone (no provider configuration, no state),
/// which is what the digest covers; only answers without any diagnostic are kept, so warnings
/// are shown every time. Lines are appended (one `write` each, `O_APPEND`), so concurrent runs
/// never tear a line; a file past `MAX_BYTES` is started afresh.
pub(crate) struct Validations {
    path: PathBuf,
    known: std::sync::Mutex<std::collections::HashSet<[u8; 32]>>,
    /// The file, opened for appending at the first new record.
    file: std::sync::Mutex<Option<std::fs::File>>,
}

impl std::fmt::Debug for Validations {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Validations")
            .field("path", &self.path)
            .finish()
    }
}

impl Validations {
    const MAX_BYTES: u64 = 16 << 20;

    /// The validations recorded for the binary with this hash.
    pub(crate) fn open(cache: &SchemaCache, sha256: &str) -> Validations {
        let path = cache.dir.join(format!("{sha256}.valid"));
        let mut known = std::collections::HashSet::new();
        match std::fs::metadata(&path) {
            Ok(m) if m.len() > Self::MAX_BYTES => {
                let _ = std::fs::remove_file(&path);
            }
            Ok(_) => {
                let text = std::fs::read_to_string(&path).unwrap_or_default();
                for line in text.lines() {
                    let mut d = [0u8; 32];
                    if line.len() == 64
                        && (0..32).all(|i| {
                            u8::from_str_radix(&line[2 * i..2 * i + 2], 16)
                                .map(|b| d[i] = b)
                                .is_ok()
                        })
                    {
                        known.insert(d);
                    }
                }
            }
            Err(_) => {}
        }
        Validations {
            path,
            known: std::sync::Mutex::new(known),
            file: std::sync::Mutex::new(None),
        }
    }

    /// The digest of one validation: what is validated (`kind`, the type) and the encoded
    /// configuration.
    pub(crate) fn digest(kind: &str, type_: &str, config: &[u8]) -> [u8; 32] {
        use sha2::{Digest, Sha256};
        let mut h = Sha256::new();
        for part in [kind.as_bytes(), type_.as_bytes(), config] {
            h.update((part.len() as u64).to_le_bytes());
            h.update(part);
        }
        h.finalize().into()
    }

    /// Whether this configuration was found valid before.
    pub(crate) fn known(&self, digest: &[u8; 32]) -> bool {
        self.known.lock().expect("validations").contains(digest)
    }

    /// Records a validation that found nothing to say.
    pub(crate) fn record(&self, digest: [u8; 32]) {
        if !self.known.lock().expect("validations").insert(digest) {
            return;
        }
        let mut line: String = digest.iter().map(|b| format!("{b:02x}")).collect();
        line.push('\n');
        let mut file = self.file.lock().expect("validations file");
        if file.is_none() {
            *file = std::fs::create_dir_all(self.path.parent().unwrap_or(Path::new(".")))
                .and_then(|_| {
                    std::fs::OpenOptions::new()
                        .create(true)
                        .append(true)
                        .open(&self.path)
                })
                .ok();
        }
        let written = match file.as_mut() {
            Some(f) => std::io::Write::write_all(f, line.as_bytes()),
            None => Err(std::io::Error::other("cannot open the file")),
        };
        if let Err(e) = written {
            tracing::debug!(target: "plugin", "cannot record a validation in {}: {e}", self.path.display());
        }
    }
}
