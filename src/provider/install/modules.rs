//! Module installation, as `terraform init` does it: every module call whose source is not a
//! local path is downloaded into `.terraform/modules/KEY` (`KEY` is the call's path, `vpc` or
//! `vpc.subnets`), and `.terraform/modules/modules.json` records each one in Terraform's
//! format — the file the loader reads (`config::load`), so a tree Terraform downloaded is used
//! as it is and one Cairn downloaded works for Terraform.
//!
//! Sources (Terraform's module source addresses):
//! - registry: `NAMESPACE/NAME/SYSTEM` or `HOST/NAMESPACE/NAME/SYSTEM` with `version`
//!   constraints, through the module registry protocol (service discovery `modules.v1`,
//!   `versions`, `download` answering `X-Terraform-Get` or a JSON `location`);
//! - git: `git::URL` (https, ssh, git, file) with `?ref=` and `?depth=`, `github.com/O/R`,
//!   `git@HOST:PATH`; cloned with the `git` program (as Terraform does);
//! - archives: `https://…` ending in `.zip`, `.tar.gz`, `.tgz` (or `?archive=zip|tar.gz`), or
//!   any https URL that answers with an `X-Terraform-Get` header;
//! - `//sub/dir` after any of them selects a directory inside the download.
//!
//! Decisions:
//! - Installation repeats until no call is left without its module: a downloaded module's own
//!   calls are found by loading the configuration again (a local call inside a downloaded
//!   module needs nothing: it is a directory of the download).
//! - A call already in the manifest with the same source (and a version its constraints
//!   allow) is kept unless `-upgrade`.
//! - `s3::`, `gcs::`, `hg::` and other getters are refused with what to do: they need cloud
//!   credentials and clients Cairn does not carry.

use super::cli_config::CliConfig;
use super::remote::Http;
use crate::addr::module_source::{is_local, parse_source, split_sub, Remote};
use crate::addr::version::{parse_version, Constraints, Version};
use crate::diag::{Diagnostic, Diagnostics};
use reqwest::Url;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Where Terraform keeps downloaded modules, under the root module's directory.
pub(crate) const MODULES_DIR: &str = ".terraform/modules";
/// The manifest of downloaded modules.
pub(crate) const MANIFEST: &str = ".terraform/modules/modules.json";

#[derive(Serialize, Deserialize, Default)]
struct Manifest {
    #[serde(rename = "Modules", default)]
    modules: Vec<Entry>,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
struct Entry {
    #[serde(rename = "Key")]
    key: String,
    #[serde(rename = "Source")]
    source: String,
    #[serde(rename = "Version", default, skip_serializing_if = "Option::is_none")]
    version: Option<String>,
    #[serde(rename = "Dir")]
    dir: String,
}

/// One module call to install.
struct Wanted {
    key: String,
    source: String,
    version: Option<String>,
}

/// What `init` prints about modules (Terraform's lines), and the problems.
pub(crate) struct Outcome {
    pub(crate) lines: Vec<String>,
    /// Every module call by its key (`vpc`, `vpc.subnets`) with its lines, local calls
    /// included (`- net in modules/net`), for `cairn get`, which shows both as Terraform's
    /// `get` does.
    pub(crate) keyed: Vec<(String, Vec<String>)>,
    pub(crate) diags: Diagnostics,
}

/// Installs every remote module the configuration in `root` calls (see the module docs).
pub(crate) fn install(
    root: &Path,
    cli: &CliConfig,
    upgrade: bool,
    inputs: &crate::config::EarlyInputs,
) -> Outcome {
    install_with(root, cli, upgrade, inputs, &[])
}

/// [`install`], with more calls than the configuration's own: `extra` holds (key, source,
/// version) of calls made from elsewhere — a stack's components (`cairn stack init`), keyed
/// `component.NAME` — installed into the same `.terraform/modules` and manifest.
pub(crate) fn install_with(
    root: &Path,
    cli: &CliConfig,
    upgrade: bool,
    inputs: &crate::config::EarlyInputs,
    extra: &[(String, String, Option<String>)],
) -> Outcome {
    let mut out = Outcome {
        lines: Vec::new(),
        keyed: Vec::new(),
        diags: Diagnostics::new(),
    };
    let mut manifest = read_manifest(root);
    let mut done: BTreeSet<String> = BTreeSet::new();
    let http = match Http::new(cli) {
        Ok(h) => h,
        Err(e) => {
            out.diags
                .push(Diagnostic::error("Failed to install modules", e));
            return out;
        }
    };
    // Each round loads the tree as installed so far: a downloaded module's calls appear.
    for _ in 0..32 {
        let (config, _) = match extra.is_empty() {
            true => crate::config::load_with(root, inputs),
            false => (None, crate::diag::Diagnostics::new()),
        };
        let mut wanted = Vec::new();
        for (key, source, version) in extra {
            if is_local(source) || !done.insert(key.clone()) {
                continue;
            }
            wanted.push(Wanted {
                key: key.clone(),
                source: source.clone(),
                version: version.clone(),
            });
        }
        if extra.is_empty() && config.is_none() {
            break;
        }
        for m in config.iter().flat_map(|c| c.modules()) {
            let prefix: Vec<&str> = m.path.0.iter().map(|s| s.name.as_str()).collect();
            // A source that early evaluation could not give is the loader's error.
            for call in m.calls.values().filter(|c| !c.source.is_empty()) {
                let key = prefix
                    .iter()
                    .copied()
                    .chain([call.name.as_str()])
                    .collect::<Vec<_>>()
                    .join(".");
                if is_local(&call.source) {
                    // A directory of its parent (or of the parent's download).
                    if done.insert(key.clone()) {
                        let dir = local_dir(root, &m.dir, &call.source);
                        let line = format!("- {key} in {dir}");
                        out.keyed.push((key, vec![line]));
                    }
                    continue;
                }
                if done.contains(&key) {
                    continue;
                }
                wanted.push(Wanted {
                    key,
                    source: call.source.clone(),
                    version: call.version.clone(),
                });
            }
        }
        if wanted.is_empty() {
            break;
        }
        for w in wanted {
            done.insert(w.key.clone());
            match install_one(root, &http, &manifest, &w, upgrade) {
                Ok((entry, lines)) => {
                    out.keyed.push((w.key.clone(), lines.clone()));
                    out.lines.extend(lines);
                    manifest.retain(|e| e.key != entry.key);
                    manifest.push(entry);
                    if let Err(e) = write_manifest(root, &manifest) {
                        out.diags
                            .push(Diagnostic::error("Failed to install modules", e));
                        return out;
                    }
                }
                Err(e) => out.diags.push(Diagnostic::error(
                    "Failed to download module",
                    format!("Module {:?} (source {:?}): {e}", w.key, w.source),
                )),
            }
        }
    }
    out
}

/// A local module's directory relative to the root, cleaned as Terraform shows it (`mod`,
/// `.terraform/modules/vpc/sub`).
fn local_dir(root: &Path, parent: &Path, source: &str) -> String {
    let joined = parent.join(source);
    let rel = joined.strip_prefix(root).unwrap_or(&joined);
    let mut parts: Vec<String> = Vec::new();
    for c in rel.components() {
        match c {
            std::path::Component::CurDir => {}
            std::path::Component::ParentDir => {
                if parts.last().is_some_and(|p| p != "..") {
                    parts.pop();
                } else {
                    parts.push("..".into());
                }
            }
            c => parts.push(c.as_os_str().to_string_lossy().into_owned()),
        }
    }
    if parts.is_empty() {
        ".".into()
    } else {
        parts.join("/")
    }
}

/// The version each installed module call got, by key (`vpc`, `vpc.subnets`): what
/// `.terraform/modules/modules.json` records (registry modules only have one).
pub(crate) fn installed_versions(root: &Path) -> BTreeMap<String, String> {
    read_manifest(root)
        .into_iter()
        .filter_map(|e| Some((e.key, e.version?)))
        .collect()
}

/// Where the call `key` was installed (`root`-relative in the manifest), if it was.
pub(crate) fn installed_dir(root: &Path, key: &str) -> Option<std::path::PathBuf> {
    read_manifest(root)
        .into_iter()
        .find(|e| e.key == key)
        .map(|e| root.join(e.dir))
}

fn read_manifest(root: &Path) -> Vec<Entry> {
    std::fs::read_to_string(root.join(MANIFEST))
        .ok()
        .and_then(|t| serde_json::from_str::<Manifest>(&t).ok())
        .map(|m| m.modules)
        .unwrap_or_default()
}

fn write_manifest(root: &Path, entries: &[Entry]) -> Result<(), String> {
    let mut modules: Vec<Entry> = entries
        .iter()
        .filter(|e| !e.key.is_empty())
        .cloned()
        .collect();
    modules.sort_by(|a, b| a.key.cmp(&b.key));
    modules.insert(
        0,
        Entry {
            key: String::new(),
            source: String::new(),
            version: None,
            dir: ".".into(),
        },
    );
    let text = serde_json::to_string(&Manifest { modules }).unwrap_or_default();
    let path = root.join(MANIFEST);
    std::fs::create_dir_all(root.join(MODULES_DIR))
        .and_then(|_| std::fs::write(&path, text))
        .map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// Installs one call (or keeps what is installed); its manifest entry and `init`'s lines.
fn install_one(
    root: &Path,
    http: &Http,
    manifest: &[Entry],
    w: &Wanted,
    upgrade: bool,
) -> Result<(Entry, Vec<String>), String> {
    let remote = parse_source(&w.source)?;
    let constraints = match &w.version {
        Some(v) => Some(Constraints::parse(v)?),
        None => None,
    };
    if constraints.is_some() && !matches!(remote, Remote::Registry { .. }) {
        return Err(
            "a version constraint applies to registry modules only: pin a git module with \
             ?ref=TAG in its source"
                .into(),
        );
    }
    let recorded = remote.recorded();
    let existing = manifest.iter().find(|e| e.key == w.key);
    if let Some(e) = existing.filter(|_| !upgrade) {
        let version_ok = match (&constraints, &e.version) {
            (Some(c), Some(v)) => parse_version(v).is_ok_and(|v| c.allows(&v)),
            (Some(_), None) => false,
            (None, _) => true,
        };
        if e.source == recorded && version_ok && root.join(&e.dir).is_dir() {
            return Ok((e.clone(), vec![format!("- {} in {}", w.key, e.dir)]));
        }
    }
    let rel = format!("{MODULES_DIR}/{}", w.key);
    let dest = root.join(&rel);
    if dest.exists() {
        std::fs::remove_dir_all(&dest).map_err(|e| format!("{}: {e}", dest.display()))?;
    }
    std::fs::create_dir_all(&dest).map_err(|e| format!("{}: {e}", dest.display()))?;
    let mut lines = Vec::new();
    let (version, sub) = match &remote {
        Remote::Registry {
            host,
            namespace,
            name,
            system,
            sub,
        } => {
            let base = http.modules_service(host)?;
            let module = format!("{namespace}/{name}/{system}");
            let versions = registry_versions(http, &base, &module, host)?;
            let c = constraints.clone().unwrap_or(Constraints(Vec::new()));
            let Some(v) = c.newest(versions.iter()) else {
                return Err(format!(
                    "no available version of {host}/{module} matches the constraints {:?} \
                     (available: {})",
                    w.version.as_deref().unwrap_or(""),
                    versions
                        .iter()
                        .map(Version::to_string)
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            };
            lines.push(format!("Downloading {recorded} {v} for {}...", w.key));
            let download = base
                .join(&format!("{module}/{v}/download"))
                .map_err(|e| e.to_string())?;
            let location = registry_location(http, &download)?;
            let (address, inner) = split_sub(&location);
            fetch(http, &address, &dest, 0)?;
            let sub = [inner, sub.clone()]
                .into_iter()
                .flatten()
                .collect::<Vec<_>>()
                .join("/");
            (Some(v.to_string()), (!sub.is_empty()).then_some(sub))
        }
        Remote::Getter { address, sub } => {
            lines.push(format!("Downloading {recorded} for {}...", w.key));
            fetch(http, address, &dest, 0)?;
            (None, sub.clone())
        }
    };
    let dir = match &sub {
        Some(s) => format!("{rel}/{s}"),
        None => rel,
    };
    if !root.join(&dir).is_dir() {
        return Err(format!(
            "the download has no directory {:?}",
            sub.unwrap_or_default()
        ));
    }
    lines.push(format!("- {} in {dir}", w.key));
    Ok((
        Entry {
            key: w.key.clone(),
            source: recorded,
            version,
            dir,
        },
        lines,
    ))
}

#[derive(Deserialize)]
struct ModuleVersions {
    modules: Vec<ModuleVersionList>,
}

#[derive(Deserialize)]
struct ModuleVersionList {
    versions: Vec<ModuleVersion>,
}

#[derive(Deserialize)]
struct ModuleVersion {
    version: String,
}

fn registry_versions(
    http: &Http,
    base: &Url,
    module: &str,
    host: &str,
) -> Result<Vec<Version>, String> {
    let url = base
        .join(&format!("{module}/versions"))
        .map_err(|e| e.to_string())?;
    let Some(doc): Option<ModuleVersions> = http.json(&url)? else {
        return Err(format!(
            "the registry at {host} has no module {module} ({url} answered 404 Not Found)"
        ));
    };
    Ok(module_versions(&doc))
}

/// A module's `versions` answer (`text`) read as `registry_versions` reads it (the fuzz
/// targets' entry point).
pub(crate) fn module_versions_answer(text: &str) -> Result<Vec<Version>, String> {
    let doc: ModuleVersions =
        serde_json::from_str(text).map_err(|e| format!("unexpected answer: {e}"))?;
    Ok(module_versions(&doc))
}

/// A module download answer's body read as `registry_location` reads it, the location made
/// absolute (the fuzz targets' entry point).
pub(crate) fn location_answer(text: &str) -> Option<String> {
    let download =
        Url::parse("https://registry.example.com/v1/modules/ns/name/system/1.0.0/download")
            .expect("a URL");
    location_in_body(text).map(|l| resolve(&download, &l))
}

/// The versions a module registry's `versions` answer lists (those that parse).
fn module_versions(doc: &ModuleVersions) -> Vec<Version> {
    doc.modules
        .iter()
        .flat_map(|m| &m.versions)
        .filter_map(|v| parse_version(&v.version).ok())
        .collect()
}

/// The download location a registry gives for a module version: the `X-Terraform-Get`
/// header, or a JSON body's `location`; relative to the download URL.
fn registry_location(http: &Http, download: &Url) -> Result<String, String> {
    let r = http.get_response(download)?;
    if !r.status().is_success() {
        return Err(format!("{download} answered {}", r.status()));
    }
    let header = r
        .headers()
        .get("X-Terraform-Get")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let location = match header {
        Some(h) => h,
        None => {
            let text = r.text().map_err(|e| format!("{download}: {e}"))?;
            location_in_body(&text).ok_or_else(|| {
                format!("{download} gave no X-Terraform-Get header and no location")
            })?
        }
    };
    Ok(resolve(download, &location))
}

/// The `location` of a module download answer's JSON body.
fn location_in_body(text: &str) -> Option<String> {
    serde_json::from_str::<serde_json::Value>(text)
        .ok()
        .and_then(|j| j.get("location")?.as_str().map(str::to_string))
}

/// A location relative to `base` made absolute (getter prefixes kept).
fn resolve(base: &Url, location: &str) -> String {
    let is_absolute =
        location.contains("://") || location.contains("::") || location.starts_with("git@");
    if is_absolute {
        return location.to_string();
    }
    base.join(location)
        .map(|u| u.to_string())
        .unwrap_or_else(|_| location.to_string())
}

/// Downloads a go-getter address (no `//sub`) into the empty directory `dest`.
fn fetch(http: &Http, address: &str, dest: &Path, depth: usize) -> Result<(), String> {
    if depth > 4 {
        return Err(format!("{address}: too many X-Terraform-Get redirections"));
    }
    if let Some(git) = address.strip_prefix("git::") {
        return git_clone(git, dest);
    }
    let mut url = Url::parse(address).map_err(|e| format!("{address:?} is not a URL: {e}"))?;
    let mut archive = None;
    let pairs: Vec<(String, String)> = url
        .query_pairs()
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect();
    if let Some((_, a)) = pairs.iter().find(|(k, _)| k == "archive") {
        archive = Some(a.clone());
        let rest: Vec<&(String, String)> = pairs.iter().filter(|(k, _)| k != "archive").collect();
        if rest.is_empty() {
            url.set_query(None);
        } else {
            let q: Vec<String> = rest.iter().map(|(k, v)| format!("{k}={v}")).collect();
            url.set_query(Some(&q.join("&")));
        }
    }
    let path = url.path().to_ascii_lowercase();
    let kind = archive.or_else(|| {
        [".zip", ".tar.gz", ".tgz"]
            .iter()
            .find(|x| path.ends_with(*x))
            .map(|x| x.trim_start_matches('.').to_string())
    });
    let Some(kind) = kind else {
        // Not an archive: the server says where the module is.
        let r = http.get_response(&url)?;
        let Some(next) = r
            .headers()
            .get("X-Terraform-Get")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
        else {
            return Err(format!(
                "{url} is neither an archive (.zip, .tar.gz, .tgz, ?archive=…) nor answered \
                 with an X-Terraform-Get header"
            ));
        };
        let next = resolve(&url, &next);
        let (address, sub) = split_sub(&next);
        if sub.is_some() {
            return Err(format!("{url}: a //subdirectory in X-Terraform-Get is not supported here; put it in the module source"));
        }
        return fetch(http, &address, dest, depth + 1);
    };
    let file = dest.join(".cairn-download");
    http.download(&url, &file)?;
    let unpacked = unpack(&file, &kind, dest);
    let _ = std::fs::remove_file(&file);
    unpacked
}

pub(crate) fn unpack(file: &Path, kind: &str, dest: &Path) -> Result<(), String> {
    let f = std::fs::File::open(file).map_err(|e| format!("{}: {e}", file.display()))?;
    match kind {
        "zip" => {
            let mut z = zip::ZipArchive::new(f).map_err(|e| format!("not a zip archive: {e}"))?;
            z.extract(dest)
                .map_err(|e| format!("cannot unpack the zip archive: {e}"))
        }
        "tar.gz" | "tgz" => {
            let mut t = tar::Archive::new(flate2::read::GzDecoder::new(f));
            // `unpack` refuses entries that would land outside `dest`.
            t.unpack(dest)
                .map_err(|e| format!("cannot unpack the tar.gz archive: {e}"))
        }
        other => Err(format!(
            "archives of type {other:?} are not supported: use zip, tar.gz or tgz"
        )),
    }
}

/// `git clone` of `spec` (`URL[?ref=R&depth=N]`) into `dest`, checking out `ref`.
fn git_clone(spec: &str, dest: &Path) -> Result<(), String> {
    let (url, query) = match spec.split_once('?') {
        Some((u, q)) => (u, q),
        None => (spec, ""),
    };
    let params: BTreeMap<&str, &str> = query
        .split('&')
        .filter_map(|kv| kv.split_once('='))
        .collect();
    let reference = params.get("ref").copied();
    let mut clone = std::process::Command::new("git");
    clone.arg("clone").arg("--quiet");
    if let Some(d) = params.get("depth") {
        clone.arg(format!("--depth={d}"));
        if let Some(r) = reference {
            clone.arg(format!("--branch={r}"));
        }
    }
    clone.arg("--").arg(url).arg(dest);
    run_git(&mut clone, url)?;
    if let (Some(r), None) = (reference, params.get("depth")) {
        let mut checkout = std::process::Command::new("git");
        checkout
            .arg("-C")
            .arg(dest)
            .args(["checkout", "--quiet"])
            .arg(r);
        run_git(&mut checkout, url)?;
    }
    Ok(())
}

fn run_git(cmd: &mut std::process::Command, url: &str) -> Result<(), String> {
    let out = cmd
        .env("GIT_TERMINAL_PROMPT", "0")
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| format!("cannot run git (is it installed?): {e}"))?;
    if out.status.success() {
        return Ok(());
    }
    Err(format!(
        "git failed for {url}: {}",
        String::from_utf8_lossy(&out.stderr).trim()
    ))
}
