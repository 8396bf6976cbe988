//! The network sources: the provider registry protocol (service discovery, versions,
//! download, `SHA256SUMS` and its OpenPGP signature) and the provider network mirror protocol.
//!
//! Decisions:
//! - HTTPS only, as Terraform: a hostname's discovery document is always fetched from
//!   `https://HOST/.well-known/terraform.json`, unless a CLI configuration `host` block gives
//!   the services. Trusted roots are the system's plus `SSL_CERT_FILE`'s.
//! - A registry download is accepted only when the archive's SHA-256 is the one the download
//!   answer names and the one `SHA256SUMS` lists for its file name, and `SHA256SUMS` carries a
//!   valid detached signature by one of the registry's `signing_keys` (the primary key or a
//!   subkey). Every zip's hash in `SHA256SUMS` becomes a `zh:` lock hash.
//! - A network mirror's archive is accepted only when its `h1:` (or `zh:`) hash is among the
//!   hashes the mirror lists for it (when it lists any).

use super::cli_config::CliConfig;
use super::platform::Platform;
use crate::addr::provider_source::SourceAddr;
use crate::addr::version::{parse_version, Version};
use reqwest::Url;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

/// Plugin protocol major versions Cairn speaks.
pub(crate) const PROTOCOLS: [u64; 2] = [5, 6];

pub(crate) struct Http<'a> {
    client: reqwest::blocking::Client,
    cli: &'a CliConfig,
    discovered: std::cell::RefCell<BTreeMap<String, Url>>,
}

fn status_error(url: &Url, status: reqwest::StatusCode) -> String {
    format!("{url} answered {status}")
}

impl<'a> Http<'a> {
    pub(crate) fn new(cli: &'a CliConfig) -> Result<Http<'a>, String> {
        let mut b = reqwest::blocking::Client::builder()
            .user_agent(concat!("Cairn/", env!("CARGO_PKG_VERSION")))
            .connect_timeout(Duration::from_secs(10))
            .timeout(Duration::from_secs(600));
        if let Some(f) = &cli.ca_file {
            let pem =
                std::fs::read(f).map_err(|e| format!("SSL_CERT_FILE {}: {e}", f.display()))?;
            let certs = reqwest::Certificate::from_pem_bundle(&pem)
                .map_err(|e| format!("SSL_CERT_FILE {}: {e}", f.display()))?;
            b = b.tls_certs_merge(certs);
        }
        let client = b
            .build()
            .map_err(|e| format!("cannot start an HTTP client: {e}"))?;
        Ok(Http {
            client,
            cli,
            discovered: Default::default(),
        })
    }

    fn get(&self, url: &Url) -> Result<reqwest::blocking::Response, String> {
        let mut req = self.client.get(url.clone());
        if let Some(host) = url.host_str() {
            let key = match url.port() {
                Some(p) => format!("{host}:{p}"),
                None => host.to_string(),
            };
            if let Some(t) = self.cli.credentials.get(&key) {
                req = req.bearer_auth(t);
            }
        }
        req.send().map_err(|e| {
            let mut msg = format!("{url}: {e}");
            let mut src = std::error::Error::source(&e);
            while let Some(s) = src {
                msg.push_str(&format!(": {s}"));
                src = s.source();
            }
            msg
        })
    }

    pub(crate) fn get_response(&self, url: &Url) -> Result<reqwest::blocking::Response, String> {
        self.get(url)
    }

    pub(crate) fn json<T: for<'de> Deserialize<'de>>(
        &self,
        url: &Url,
    ) -> Result<Option<T>, String> {
        let r = self.get(url)?;
        if r.status() == reqwest::StatusCode::NOT_FOUND {
            return Ok(None);
        }
        if !r.status().is_success() {
            return Err(status_error(url, r.status()));
        }
        let text = r.text().map_err(|e| format!("{url}: {e}"))?;
        answer(url, &text).map(Some)
    }

    fn bytes(&self, url: &Url) -> Result<Vec<u8>, String> {
        let r = self.get(url)?;
        if !r.status().is_success() {
            return Err(status_error(url, r.status()));
        }
        r.bytes()
            .map(|b| b.to_vec())
            .map_err(|e| format!("{url}: {e}"))
    }

    /// Downloads `url` into the file `dest`.
    pub(crate) fn download(&self, url: &Url, dest: &Path) -> Result<(), String> {
        let mut r = self.get(url)?;
        if !r.status().is_success() {
            return Err(status_error(url, r.status()));
        }
        let mut f = std::fs::File::create(dest).map_err(|e| format!("{}: {e}", dest.display()))?;
        r.copy_to(&mut f).map_err(|e| format!("{url}: {e}"))?;
        Ok(())
    }

    /// The base URL of a host's `providers.v1` service.
    pub(crate) fn providers_service(&self, host: &str) -> Result<Url, String> {
        self.service(host, "providers.v1", "a provider registry")
    }

    /// The base URL of a host's `modules.v1` service.
    pub(crate) fn modules_service(&self, host: &str) -> Result<Url, String> {
        self.service(host, "modules.v1", "a module registry")
    }

    /// The base URL of a host's service `name` (`providers.v1`, `modules.v1`), by Terraform's
    /// service discovery (or a CLI configuration `host` block).
    fn service(&self, host: &str, name: &str, what: &str) -> Result<Url, String> {
        let cache_key = format!("{host} {name}");
        if let Some(u) = self.discovered.borrow().get(&cache_key) {
            return Ok(u.clone());
        }
        let root = Url::parse(&format!("https://{host}/"))
            .map_err(|e| format!("\"{host}\" is not a usable hostname: {e}"))?;
        let (doc_url, service) = match self.cli.hosts.get(host) {
            Some(services) => (root.clone(), services.get(name).cloned()),
            None => {
                let url = root
                    .join(".well-known/terraform.json")
                    .expect("a relative path");
                let doc: Option<BTreeMap<String, serde_json::Value>> = self.json(&url)?;
                let s = doc.and_then(|d| service_in_doc(&d, name));
                (url, s)
            }
        };
        let base = service_base(&doc_url, service.as_deref(), host, name, what)?;
        self.discovered.borrow_mut().insert(cache_key, base.clone());
        Ok(base)
    }
}

/// A registry's JSON answer from `url`, read as `T`.
fn answer<T: for<'de> Deserialize<'de>>(url: &Url, text: &str) -> Result<T, String> {
    serde_json::from_str(text).map_err(|e| format!("{url}: unexpected answer: {e}"))
}

/// The URL a service discovery document gives for service `name`.
fn service_in_doc(doc: &BTreeMap<String, serde_json::Value>, name: &str) -> Option<String> {
    doc.get(name).and_then(|v| v.as_str().map(str::to_string))
}

/// The base URL of service `name` that `host`'s discovery document (`text`) gives, as
/// [`Http::providers_service`] reads it (the fuzz targets' entry point).
pub(crate) fn service_from_doc(text: &str, host: &str, name: &str) -> Result<Url, String> {
    let url = Url::parse(&format!("https://{host}/.well-known/terraform.json"))
        .map_err(|e| format!("\"{host}\" is not a usable hostname: {e}"))?;
    let doc: BTreeMap<String, serde_json::Value> = answer(&url, text)?;
    service_base(
        &url,
        service_in_doc(&doc, name).as_deref(),
        host,
        name,
        "a registry",
    )
}

/// A provider's `versions` answer (`text`) read as [`registry_versions`] reads it (the fuzz
/// targets' entry point).
pub(crate) fn provider_versions_answer(
    text: &str,
    platform: &Platform,
) -> Result<Vec<Version>, String> {
    let url = Url::parse("https://registry.example.com/v1/providers/ns/t/versions").expect("a URL");
    Ok(provider_versions(answer(&url, text)?, platform))
}

/// A provider's `download` answer, its `SHA256SUMS` and their signature, read and checked as
/// [`registry_fetch`] does before it downloads the package (the fuzz targets' entry point):
/// the signed checksum of the package, the `zh:` hashes and the signing key.
pub(crate) fn download_answer(
    text: &str,
    sums: &[u8],
    sig: &[u8],
) -> Result<(String, Vec<String>, String), String> {
    let url =
        Url::parse("https://registry.example.com/v1/providers/ns/t/1.0.0/download/linux/amd64")
            .expect("a URL");
    let doc: DownloadDoc = answer(&url, text)?;
    let addr = SourceAddr::parse("registry.example.com/ns/t")?;
    let version = parse_version("1.0.0")?;
    check_protocols(&doc, &addr, &version)?;
    let sums_url = url.join(&doc.shasums_url).map_err(|e| e.to_string())?;
    url.join(&doc.shasums_signature_url)
        .map_err(|e| e.to_string())?;
    let signed_by = verify_signature(sums, sig, &doc.signing_keys.gpg_public_keys)?;
    let (listed, zh) = signed_sums(sums, &doc, &sums_url)?;
    url.join(&doc.download_url).map_err(|e| e.to_string())?;
    Ok((listed, zh, signed_by))
}

/// The base URL of service `name` that a host's discovery document (at `doc_url`) gives as
/// `service`, made absolute and ending in `/`.
fn service_base(
    doc_url: &Url,
    service: Option<&str>,
    host: &str,
    name: &str,
    what: &str,
) -> Result<Url, String> {
    let Some(service) = service else {
        return Err(format!(
            "{host} does not offer {what} (its service discovery document at {doc_url} has \
             no \"{name}\")"
        ));
    };
    let mut base = doc_url
        .join(service)
        .map_err(|e| format!("{host}: invalid {name} URL \"{service}\": {e}"))?;
    if !base.path().ends_with('/') {
        base.set_path(&format!("{}/", base.path()));
    }
    Ok(base)
}

#[derive(Deserialize)]
struct VersionsDoc {
    versions: Vec<VersionEntry>,
}

#[derive(Deserialize)]
struct VersionEntry {
    version: String,
    #[serde(default)]
    platforms: Vec<PlatformEntry>,
}

#[derive(Deserialize)]
struct PlatformEntry {
    os: String,
    arch: String,
}

/// The versions a registry offers for `addr` that have a package for `platform`.
pub(crate) fn registry_versions(
    http: &Http,
    addr: &SourceAddr,
    platform: &Platform,
) -> Result<Vec<Version>, String> {
    let base = http.providers_service(&addr.host)?;
    let url = base
        .join(&format!("{}/{}/versions", addr.namespace, addr.type_))
        .map_err(|e| e.to_string())?;
    let Some(doc): Option<VersionsDoc> = http.json(&url)? else {
        return Err(format!(
            "the registry at {} has no provider {}/{} ({url} answered 404 Not Found)",
            addr.host, addr.namespace, addr.type_
        ));
    };
    Ok(provider_versions(doc, platform))
}

/// The versions of a registry's `versions` answer that have a package for `platform`.
fn provider_versions(doc: VersionsDoc, platform: &Platform) -> Vec<Version> {
    let mut out = Vec::new();
    for v in doc.versions {
        let Ok(version) = parse_version(&v.version) else {
            continue;
        };
        if v.platforms.is_empty()
            || v.platforms
                .iter()
                .any(|p| p.os == platform.os && p.arch == platform.arch)
        {
            out.push(version);
        }
    }
    out
}

#[derive(Deserialize)]
struct DownloadDoc {
    #[serde(default)]
    protocols: Vec<String>,
    filename: String,
    download_url: String,
    shasums_url: String,
    shasums_signature_url: String,
    shasum: String,
    #[serde(default)]
    signing_keys: SigningKeys,
}

#[derive(Deserialize, Default)]
struct SigningKeys {
    #[serde(default)]
    gpg_public_keys: Vec<GpgKey>,
}

/// A registry's OpenPGP public key.
#[derive(Deserialize)]
pub(crate) struct GpgKey {
    #[serde(default)]
    pub(crate) key_id: String,
    pub(crate) ascii_armor: String,
}

/// A registry package, downloaded and authenticated.
pub(crate) struct Fetched {
    /// `zh:` hashes of every package `SHA256SUMS` lists.
    pub(crate) zh_hashes: Vec<String>,
    /// Who signed the checksums (key id).
    pub(crate) signed_by: String,
}

/// Downloads the registry package of `addr` `version` for `platform` into `dest` (a zip
/// file) and authenticates it (see the module docs).
pub(crate) fn registry_fetch(
    http: &Http,
    addr: &SourceAddr,
    version: &Version,
    platform: &Platform,
    dest: &Path,
) -> Result<Fetched, String> {
    let base = http.providers_service(&addr.host)?;
    let url = base
        .join(&format!(
            "{}/{}/{version}/download/{}/{}",
            addr.namespace, addr.type_, platform.os, platform.arch
        ))
        .map_err(|e| e.to_string())?;
    let Some(doc): Option<DownloadDoc> = http.json(&url)? else {
        return Err(format!(
            "the registry has no package of {} {version} for {platform}",
            addr.short()
        ));
    };
    check_protocols(&doc, addr, version)?;
    let sums_url = url.join(&doc.shasums_url).map_err(|e| e.to_string())?;
    let sig_url = url
        .join(&doc.shasums_signature_url)
        .map_err(|e| e.to_string())?;
    let sums = http.bytes(&sums_url)?;
    let sig = http.bytes(&sig_url)?;
    let signed_by = verify_signature(&sums, &sig, &doc.signing_keys.gpg_public_keys)
        .map_err(|e| format!("{} {version}: {sums_url}: {e}", addr.short()))?;
    let (listed, mut zh) = signed_sums(&sums, &doc, &sums_url)?;
    let dl = url.join(&doc.download_url).map_err(|e| e.to_string())?;
    http.download(&dl, dest)?;
    let got = super::hash::zh_zip(dest)?;
    if got != format!("zh:{listed}") {
        return Err(format!(
            "the package downloaded from {dl} has the checksum {}, not the signed {listed}",
            got.trim_start_matches("zh:")
        ));
    }
    zh.sort();
    zh.dedup();
    Ok(Fetched {
        zh_hashes: zh,
        signed_by,
    })
}

/// Whether the package a `download` answer offers speaks a plugin protocol Cairn speaks.
fn check_protocols(doc: &DownloadDoc, addr: &SourceAddr, version: &Version) -> Result<(), String> {
    let speaks = doc.protocols.is_empty()
        || doc.protocols.iter().any(|p| {
            p.split('.')
                .next()
                .and_then(|m| m.parse::<u64>().ok())
                .is_some_and(|m| PROTOCOLS.contains(&m))
        });
    if !speaks {
        return Err(format!(
            "{} {version} speaks plugin protocol {}, but Cairn speaks only 5 and 6",
            addr.short(),
            doc.protocols.join(", ")
        ));
    }
    Ok(())
}

/// The checksum `SHA256SUMS` (`sums`, signed) lists for the package `doc` offers, checked
/// against the one `doc` gives, and the `zh:` hashes of every package it lists.
fn signed_sums(
    sums: &[u8],
    doc: &DownloadDoc,
    sums_url: &Url,
) -> Result<(String, Vec<String>), String> {
    let sums_text = String::from_utf8_lossy(sums);
    let mut listed = None;
    let mut zh = Vec::new();
    for line in sums_text.lines() {
        let mut parts = line.split_whitespace();
        let (Some(sum), Some(name)) = (parts.next(), parts.next()) else {
            continue;
        };
        if sum.len() != 64 || !sum.chars().all(|c| c.is_ascii_hexdigit()) {
            continue;
        }
        if name == doc.filename {
            listed = Some(sum.to_ascii_lowercase());
        }
        if name.ends_with(".zip") {
            zh.push(format!("zh:{}", sum.to_ascii_lowercase()));
        }
    }
    let Some(listed) = listed else {
        return Err(format!(
            "{sums_url} does not list {}, the package the registry offers",
            doc.filename
        ));
    };
    if listed != doc.shasum.to_ascii_lowercase() {
        return Err(format!(
            "the registry's checksum of {} ({}) differs from the signed one in {sums_url} \
             ({listed})",
            doc.filename, doc.shasum
        ));
    }
    Ok((listed, zh))
}

/// Checks a detached OpenPGP signature of `data` against the registry's keys (primary keys
/// and their subkeys); returns the key id that made it.
pub(crate) fn verify_signature(data: &[u8], sig: &[u8], keys: &[GpgKey]) -> Result<String, String> {
    use pgp::composed::{Deserializable as _, DetachedSignature, SignedPublicKey};
    use pgp::types::KeyDetails as _;
    if keys.is_empty() {
        return Err("the registry named no signing key for it".into());
    }
    let sig = DetachedSignature::from_bytes(sig)
        .or_else(|_| DetachedSignature::from_armor_single(sig).map(|(s, _)| s))
        .map_err(|e| format!("the checksum signature cannot be read: {e}"))?;
    let mut problems = Vec::new();
    for k in keys {
        let key = match SignedPublicKey::from_string(&k.ascii_armor) {
            Ok((key, _)) => key,
            Err(e) => {
                problems.push(format!("key {}: {e}", k.key_id));
                continue;
            }
        };
        if let Err(e) = key.verify_bindings() {
            problems.push(format!("key {}: {e}", k.key_id));
            continue;
        }
        if sig.verify(&key, data).is_ok() {
            return Ok(key_id_hex(key.legacy_key_id()));
        }
        for sub in &key.public_subkeys {
            if sub.verify_bindings(&key.primary_key).is_ok() && sig.verify(sub, data).is_ok() {
                return Ok(key_id_hex(sub.legacy_key_id()));
            }
        }
        problems.push(format!("not signed by key {}", k.key_id));
    }
    Err(format!(
        "the checksums' signature is not valid ({})",
        problems.join("; ")
    ))
}

/// A key id as GnuPG prints it: 16 upper-case hex digits.
fn key_id_hex(id: pgp::types::KeyId) -> String {
    id.as_ref().iter().map(|b| format!("{b:02X}")).collect()
}

#[derive(Deserialize)]
struct MirrorIndex {
    versions: BTreeMap<String, serde_json::Value>,
}

#[derive(Deserialize)]
struct MirrorVersion {
    archives: BTreeMap<String, MirrorArchive>,
}

#[derive(Deserialize)]
struct MirrorArchive {
    url: String,
    #[serde(default)]
    hashes: Vec<String>,
}

fn mirror_dir(base: &str, addr: &SourceAddr) -> Result<Url, String> {
    Url::parse(base)
        .and_then(|u| u.join(&format!("{}/{}/{}/", addr.host, addr.namespace, addr.type_)))
        .map_err(|e| format!("network mirror {base}: {e}"))
}

/// The versions a network mirror has of `addr`.
pub(crate) fn mirror_versions(
    http: &Http,
    base: &str,
    addr: &SourceAddr,
) -> Result<Vec<Version>, String> {
    let url = mirror_dir(base, addr)?
        .join("index.json")
        .map_err(|e| e.to_string())?;
    let Some(doc): Option<MirrorIndex> = http.json(&url)? else {
        return Ok(Vec::new());
    };
    Ok(doc
        .versions
        .keys()
        .filter_map(|v| parse_version(v).ok())
        .collect())
}

/// Downloads `addr` `version` for `platform` from a network mirror into `dest`; returns the
/// hashes the mirror lists for it, after checking the download against them. `Ok(None)`: the
/// mirror has no package for this platform.
pub(crate) fn mirror_fetch(
    http: &Http,
    base: &str,
    addr: &SourceAddr,
    version: &Version,
    platform: &Platform,
    dest: &Path,
) -> Result<Option<Vec<String>>, String> {
    let url = mirror_dir(base, addr)?
        .join(&format!("{version}.json"))
        .map_err(|e| e.to_string())?;
    let Some(doc): Option<MirrorVersion> = http.json(&url)? else {
        return Ok(None);
    };
    let Some(a) = doc.archives.get(&platform.to_string()) else {
        return Ok(None);
    };
    let dl = url.join(&a.url).map_err(|e| e.to_string())?;
    http.download(&dl, dest)?;
    if !a.hashes.is_empty() {
        let h1 = super::hash::h1_zip(dest)?;
        let zh = super::hash::zh_zip(dest)?;
        if !a.hashes.iter().any(|h| *h == h1 || *h == zh) {
            return Err(format!(
                "the package downloaded from {dl} has the checksum {h1}, which is not among \
                 the ones the mirror lists for it ({})",
                a.hashes.join(", ")
            ));
        }
    }
    Ok(Some(a.hashes.clone()))
}
