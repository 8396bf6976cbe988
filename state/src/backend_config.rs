//! Where a state lives: the local sled log (the default), a PostgreSQL schema or an S3 key.
//!
//! `cairn init` resolves the `terraform { backend "pg" { … } }` block, `-backend-config`
//! values and the environment into a [`Backend`] and records it in `<state dir>/backend.json`
//! (mode 0600: it may hold the connection string given with `-backend-config`, as Terraform's
//! `.terraform/terraform.tfstate` does). [`crate::Store::open`] reads that file; without one,
//! the state is the sled log in the state directory. Values taken from the environment
//! (`PG_CONN_STR`, `PG_SCHEMA_NAME`, …) are not written: they are read again at each open, so
//! a password kept in the environment stays there.
//!
//! Secrets never leave this module in text meant for people: [`PgConfig::describe`] and
//! [`redact`] print a connection string without its password.

use crate::error::StateError;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

/// The file in the state directory that names the backend.
pub(crate) const BACKEND_FILE: &str = "backend.json";

/// Terraform's `pg` backend arguments, and the environment variable of each.
pub const PG_ARGUMENTS: &[(&str, &str)] = &[
    ("conn_str", "PG_CONN_STR"),
    ("schema_name", "PG_SCHEMA_NAME"),
    ("skip_schema_creation", "PG_SKIP_SCHEMA_CREATION"),
    ("skip_table_creation", "PG_SKIP_TABLE_CREATION"),
    ("skip_index_creation", "PG_SKIP_INDEX_CREATION"),
];

/// The default schema (Terraform's).
pub(crate) const DEFAULT_SCHEMA: &str = "terraform_remote_state";

/// A state's location.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum Backend {
    /// The sled log in the state directory.
    Local,
    /// A PostgreSQL schema.
    Pg(PgSettings),
    /// An S3 bucket key (`s3_store.rs`).
    S3(S3Settings),
}

/// The `pg` backend's arguments as written in configuration, `-backend-config` or
/// `backend.json`; any of them may be left to the environment.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PgSettings {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conn_str: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema_name: Option<String>,
    #[serde(default)]
    pub skip_schema_creation: bool,
    #[serde(default)]
    pub skip_table_creation: bool,
    #[serde(default)]
    pub skip_index_creation: bool,
}

/// A `pg` backend resolved against the environment: what a connection needs.
#[derive(Clone, PartialEq, Eq)]
pub struct PgConfig {
    pub(crate) conn_str: String,
    pub schema: String,
    pub(crate) skip_schema_creation: bool,
    pub(crate) skip_table_creation: bool,
}

impl std::fmt::Debug for PgConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.describe())
    }
}

impl PgConfig {
    /// The location for people: the connection string without its password, and the schema.
    pub fn describe(&self) -> String {
        format!(
            "PostgreSQL {} (schema {})",
            redact(&self.conn_str),
            self.schema
        )
    }
}

fn parse_bool(key: &str, v: &str) -> Result<bool, String> {
    match v.trim().to_ascii_lowercase().as_str() {
        "true" | "1" => Ok(true),
        "false" | "0" | "" => Ok(false),
        _ => Err(format!("{key} must be true or false, not {v:?}")),
    }
}

impl PgSettings {
    /// Sets one argument (from a `-backend-config=KEY=VALUE`, a file or the block).
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), String> {
        match key {
            "conn_str" => self.conn_str = Some(value.to_string()),
            "schema_name" => self.schema_name = Some(value.to_string()),
            "skip_schema_creation" => self.skip_schema_creation = parse_bool(key, value)?,
            "skip_table_creation" => self.skip_table_creation = parse_bool(key, value)?,
            "skip_index_creation" => self.skip_index_creation = parse_bool(key, value)?,
            _ => {
                return Err(format!(
                    "the pg backend has no argument {key:?} (it takes {})",
                    PG_ARGUMENTS
                        .iter()
                        .map(|(k, _)| *k)
                        .collect::<Vec<_>>()
                        .join(", ")
                ))
            }
        }
        Ok(())
    }

    /// Resolves missing arguments from the environment (`env` looks a variable up).
    pub fn resolve(&self, env: &dyn Fn(&str) -> Option<String>) -> Result<PgConfig, StateError> {
        let get = |arg: &str| {
            let var = PG_ARGUMENTS
                .iter()
                .find(|(k, _)| *k == arg)
                .map(|(_, v)| *v);
            var.and_then(env).filter(|v| !v.is_empty())
        };
        let conn_str = self
            .conn_str
            .clone()
            .or_else(|| get("conn_str"))
            .ok_or_else(|| StateError::Backend {
                message: "the pg backend needs conn_str (in the backend block, \
                          -backend-config=conn_str=… or PG_CONN_STR)"
                    .into(),
            })?;
        let schema = self
            .schema_name
            .clone()
            .or_else(|| get("schema_name"))
            .unwrap_or_else(|| DEFAULT_SCHEMA.to_string());
        let flag = |set: bool, arg: &str| {
            set || get(arg).is_some_and(|v| parse_bool(arg, &v).unwrap_or(false))
        };
        Ok(PgConfig {
            conn_str,
            schema,
            skip_schema_creation: flag(self.skip_schema_creation, "skip_schema_creation"),
            skip_table_creation: flag(self.skip_table_creation, "skip_table_creation"),
        })
    }
}

/// Reads `<dir>/backend.json` (none: the local sled log).
pub fn read_backend(dir: &Path) -> Result<Backend, StateError> {
    let path = dir.join(BACKEND_FILE);
    match fs::read_to_string(&path) {
        Ok(text) => serde_json::from_str(&text).map_err(|e| StateError::Backend {
            message: format!(
                "{} is not a backend record ({e}); run `cairn init` again",
                path.display()
            ),
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Backend::Local),
        Err(e) => Err(StateError::io(format!("cannot read {}", path.display()), e)),
    }
}

/// Records the backend in `<dir>/backend.json` (mode 0600); `Local` removes the file.
pub fn write_backend(dir: &Path, backend: &Backend) -> Result<(), StateError> {
    let path = dir.join(BACKEND_FILE);
    if *backend == Backend::Local {
        return match fs::remove_file(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(StateError::io(
                format!("cannot remove {}", path.display()),
                e,
            )),
            _ => Ok(()),
        };
    }
    fs::create_dir_all(dir)
        .map_err(|e| StateError::io(format!("cannot create {}", dir.display()), e))?;
    let text = serde_json::to_string_pretty(backend).unwrap_or_default();
    let tmp: PathBuf = dir.join(format!("{BACKEND_FILE}.{}", std::process::id()));
    let write = || -> std::io::Result<()> {
        use std::io::Write;
        use std::os::unix::fs::OpenOptionsExt;
        let mut f = fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)?;
        f.write_all(text.as_bytes())?;
        f.sync_all()?;
        fs::rename(&tmp, &path)
    };
    write().map_err(|e| StateError::io(format!("cannot write {}", path.display()), e))
}

/// A connection string with its password replaced by `****` (URL and `key=value` forms).
pub(crate) fn redact(conn_str: &str) -> String {
    let s = conn_str.trim();
    if let Some(rest) = s
        .strip_prefix("postgres://")
        .map(|r| ("postgres://", r))
        .or_else(|| {
            s.strip_prefix("postgresql://")
                .map(|r| ("postgresql://", r))
        })
    {
        let (scheme, rest) = rest;
        let (authority, tail) = match rest.find(['/', '?']) {
            Some(i) => rest.split_at(i),
            None => (rest, ""),
        };
        let authority = match authority.rsplit_once('@') {
            Some((userinfo, host)) => match userinfo.split_once(':') {
                Some((user, _)) => format!("{user}:****@{host}"),
                None => format!("{userinfo}@{host}"),
            },
            None => authority.to_string(),
        };
        let tail = redact_query(tail);
        return format!("{scheme}{authority}{tail}");
    }
    redact_key_values(s)
}

fn redact_query(tail: &str) -> String {
    let Some((path, query)) = tail.split_once('?') else {
        return tail.to_string();
    };
    let parts: Vec<String> = query
        .split('&')
        .map(|p| match p.split_once('=') {
            Some((k, _)) if k.eq_ignore_ascii_case("password") => format!("{k}=****"),
            _ => p.to_string(),
        })
        .collect();
    format!("{path}?{}", parts.join("&"))
}

fn redact_key_values(s: &str) -> String {
    // key = value pairs; values may be single-quoted with backslash escapes.
    let mut out = String::new();
    let mut rest = s;
    while !rest.is_empty() {
        let trimmed = rest.trim_start();
        out.push_str(&rest[..rest.len() - trimmed.len()]);
        rest = trimmed;
        let Some(eq) = rest.find('=') else {
            out.push_str(rest);
            break;
        };
        let key = rest[..eq].trim().to_string();
        out.push_str(&rest[..=eq]);
        rest = &rest[eq + 1..];
        let trimmed = rest.trim_start();
        out.push_str(&rest[..rest.len() - trimmed.len()]);
        rest = trimmed;
        let end = if rest.starts_with('\'') {
            let mut i = 1;
            let b = rest.as_bytes();
            while i < b.len() && b[i] != b'\'' {
                i += if b[i] == b'\\' { 2 } else { 1 };
            }
            (i + 1).min(rest.len())
        } else {
            rest.find(char::is_whitespace).unwrap_or(rest.len())
        };
        if key.eq_ignore_ascii_case("password") {
            out.push_str("****");
        } else {
            out.push_str(&rest[..end]);
        }
        rest = &rest[end..];
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_are_redacted_in_both_forms() {
        assert_eq!(
            redact("postgres://cairn:s3cr%40t@db.example:5432/ops?sslmode=require"),
            "postgres://cairn:****@db.example:5432/ops?sslmode=require"
        );
        assert_eq!(
            redact("postgresql://u@h/db?password=hunter2&sslmode=verify-full"),
            "postgresql://u@h/db?password=****&sslmode=verify-full"
        );
        assert_eq!(
            redact("host=h user=u password='a b\\' c' dbname=d"),
            "host=h user=u password=**** dbname=d"
        );
        assert_eq!(redact("host=h password = x"), "host=h password = ****");
    }

    #[test]
    fn environment_fills_what_the_block_leaves_out() {
        let env = |k: &str| match k {
            "PG_CONN_STR" => Some("postgres://u:pw@h/d".to_string()),
            "PG_SKIP_SCHEMA_CREATION" => Some("true".to_string()),
            _ => None,
        };
        let c = PgSettings::default().resolve(&env).unwrap();
        assert_eq!(c.schema, DEFAULT_SCHEMA);
        assert!(c.skip_schema_creation);
        assert_eq!(
            format!("{c:?}"),
            "PostgreSQL postgres://u:****@h/d (schema terraform_remote_state)"
        );
        let mut s = PgSettings::default();
        s.set("schema_name", "team").unwrap();
        assert!(s
            .set("bucket", "x")
            .unwrap_err()
            .contains("no argument \"bucket\""));
        let err = s.resolve(&|_| None).unwrap_err().to_string();
        assert!(err.contains("needs conn_str"), "{err}");
    }

    #[test]
    fn backend_records_are_private_and_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        write_backend(dir.path(), &Backend::Pg(PgSettings::default())).unwrap();
        use std::os::unix::fs::PermissionsExt;
        let mode = fs::metadata(dir.path().join(BACKEND_FILE))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        assert_eq!(
            read_backend(dir.path()).unwrap(),
            Backend::Pg(PgSettings::default())
        );
        write_backend(dir.path(), &Backend::Local).unwrap();
        assert_eq!(read_backend(dir.path()).unwrap(), Backend::Local);
    }
}

/// Terraform's `s3` backend arguments Cairn takes (`endpoints.s3` is the `s3` attribute of the
/// `endpoints` block). The environment has its say in [`S3Settings::resolve`].
pub const S3_ARGUMENTS: &[&str] = &[
    "bucket",
    "key",
    "region",
    "workspace_key_prefix",
    "endpoint",
    "endpoints.s3",
    "use_path_style",
    "force_path_style",
    "skip_credentials_validation",
    "skip_region_validation",
    "skip_requesting_account_id",
    "skip_metadata_api_check",
    "skip_s3_checksum",
    "access_key",
    "secret_key",
    "token",
    "profile",
    "shared_credentials_files",
    "shared_config_files",
    "use_lockfile",
    "encrypt",
    "kms_key_id",
    "sse_customer_key",
    "acl",
    "insecure",
    "endpoints.sts",
    "endpoints.iam",
    "endpoints.sso",
    "endpoints.dynamodb",
    "sts_endpoint",
    "assume_role.role_arn",
    "assume_role.session_name",
    "assume_role.external_id",
    "assume_role.duration",
    "assume_role.policy",
    "assume_role.policy_arns",
    "assume_role.tags",
    "assume_role.transitive_tag_keys",
    "assume_role.source_identity",
];

/// The arguments whose value is an object (`endpoints = { s3 = "…" }`, `assume_role = {
/// role_arn = "…" }`): set as JSON objects, kept as their attributes (`endpoints.s3`).
pub const S3_OBJECT_ARGUMENTS: &[&str] = &["endpoints", "assume_role"];

/// An `assume_role` object resolved: what STS AssumeRole is asked (Terraform 1.6+'s names).
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct AssumeRole {
    pub role_arn: String,
    pub session_name: String,
    pub external_id: Option<String>,
    /// `duration` in seconds (`DurationSeconds`; none: STS's default, an hour).
    pub duration_secs: Option<u64>,
    pub policy: Option<String>,
    pub policy_arns: Vec<String>,
    pub tags: BTreeMap<String, String>,
    pub transitive_tag_keys: Vec<String>,
    pub source_identity: Option<String>,
}

/// A Go duration (`1h`, `15m`, `1h30m`, `900s`) in seconds.
fn go_duration(text: &str) -> Option<u64> {
    let mut total = 0f64;
    let mut rest = text.trim();
    if rest.is_empty() {
        return None;
    }
    while !rest.is_empty() {
        let n = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let num: f64 = rest[..n].parse().ok()?;
        rest = &rest[n..];
        let u = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let scale = match &rest[..u] {
            "h" => 3600.0,
            "m" => 60.0,
            "s" => 1.0,
            "ms" => 0.001,
            _ => return None,
        };
        total += num * scale;
        rest = &rest[u..];
    }
    Some(total as u64)
}

/// A duration as Go prints it (`15m0s`, `12h0m0s`, `5s`).
fn go_duration_text(secs: u64) -> String {
    let (h, m, s) = (secs / 3600, secs % 3600 / 60, secs % 60);
    if h > 0 {
        format!("{h}h{m}m{s}s")
    } else if m > 0 {
        format!("{m}m{s}s")
    } else {
        format!("{s}s")
    }
}

/// The `s3` backend's arguments as written in configuration, `-backend-config` or
/// `backend.json` (mode 0600, as Terraform's `.terraform/terraform.tfstate`: it may hold keys
/// given with `-backend-config`); any of them may be left to the environment.
#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct S3Settings {
    /// Every argument set, by its name in [`S3_ARGUMENTS`]; lists as JSON arrays.
    pub args: BTreeMap<String, String>,
}

impl std::fmt::Debug for S3Settings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let shown: BTreeMap<&str, &str> = self
            .args
            .iter()
            .map(|(k, v)| {
                let secret = matches!(
                    k.as_str(),
                    "access_key" | "secret_key" | "token" | "sse_customer_key"
                );
                (k.as_str(), if secret { "****" } else { v.as_str() })
            })
            .collect();
        write!(f, "S3Settings {shown:?}")
    }
}

/// An `s3` backend resolved against the environment and the shared credentials files: what a
/// connection needs. `Debug` and [`S3Config::describe`] never show a credential.
#[derive(Clone, PartialEq, Eq)]
pub struct S3Config {
    pub bucket: String,
    /// The state object's key of the `default` workspace (`key`).
    pub key: String,
    pub region: String,
    /// The endpoint URL (AWS's regional one unless set).
    pub endpoint: String,
    pub path_style: bool,
    pub(crate) access_key: String,
    pub(crate) secret_key: String,
    pub(crate) token: Option<String>,
    /// `encrypt`: `x-amz-server-side-encryption` on every object written.
    pub(crate) encrypt: bool,
    pub(crate) kms_key_id: Option<String>,
    /// `sse_customer_key` (base64 of 32 bytes; with `encrypt`): SSE-C headers on every read
    /// and write of an object. Never shown.
    pub(crate) sse_customer_key: Option<String>,
    /// `acl`: the canned ACL put on every object written (`x-amz-acl`).
    pub(crate) acl: Option<String>,
    /// `insecure`: TLS certificates are not verified.
    pub(crate) insecure: bool,
    /// `assume_role`: the role whose temporary credentials every request is signed with.
    pub(crate) assume_role: Option<Box<AssumeRole>>,
    /// The STS endpoint (AssumeRole), `endpoints.sts`.
    pub(crate) sts_endpoint: String,
    pub workspace_key_prefix: String,
    /// The workspace whose state this is (`default`: `key`).
    pub workspace: String,
}

impl std::fmt::Debug for S3Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.describe())
    }
}

impl S3Config {
    /// The location for people: bucket, key and endpoint, never a credential.
    pub fn describe(&self) -> String {
        format!(
            "s3://{}/{} ({})",
            self.bucket,
            self.state_key(),
            self.endpoint
        )
    }

    /// The key of this workspace's state object as Terraform names it: `key` for `default`,
    /// else `<workspace_key_prefix>/<workspace>/<key>`.
    pub fn state_key(&self) -> String {
        if self.workspace == "default" {
            self.key.clone()
        } else {
            format!(
                "{}/{}/{}",
                self.workspace_key_prefix, self.workspace, self.key
            )
        }
    }

    /// The same bucket and key in workspace `name`.
    pub fn in_workspace(&self, name: &str) -> S3Config {
        S3Config {
            workspace: name.to_string(),
            ..self.clone()
        }
    }
}

/// `sse_customer_key` must be base64 of 32 bytes, in 44 characters (Terraform's checks).
fn check_customer_key(v: &str) -> Result<(), String> {
    use base64::Engine;
    if v.len() != 44 {
        return Err("sse_customer_key must be 44 characters in length".into());
    }
    match base64::engine::general_purpose::STANDARD.decode(v) {
        Ok(k) if k.len() == 32 => Ok(()),
        _ => Err("sse_customer_key must be base64 encoded: the key is 32 bytes (AES-256)".into()),
    }
}

/// `assume_role`'s `duration`: a Go duration between 15 minutes and 12 hours.
fn check_duration(v: &str) -> Result<u64, String> {
    let secs = go_duration(v).ok_or_else(|| {
        format!("assume_role's duration must be a duration such as \"1h\" or \"45m\", not {v:?}")
    })?;
    if !(900..=43_200).contains(&secs) {
        return Err(format!(
            "Duration must be between 15m0s and 12h0m0s, had {}",
            go_duration_text(secs)
        ));
    }
    Ok(secs)
}

/// A list argument (`["a", "b"]`, as JSON or HCL writes it) or a single value.
fn list_arg(v: &str) -> Vec<String> {
    serde_json::from_str::<Vec<String>>(v).unwrap_or_else(|_| vec![v.to_string()])
}

fn home_file(rel: &str, env: &dyn Fn(&str) -> Option<String>) -> Option<PathBuf> {
    env("HOME").map(|h| Path::new(&h).join(rel))
}

/// `(access key, secret key, session token, region)` of `profile` in the shared credentials
/// and config files (AWS's INI files; `[profile NAME]` in the config file).
fn profile_values(
    profile: &str,
    cred_files: &[PathBuf],
    config_files: &[PathBuf],
) -> Result<BTreeMap<String, String>, StateError> {
    let mut out = BTreeMap::new();
    let sections = [
        (config_files, format!("profile {profile}")),
        (config_files, profile.to_string()),
        (cred_files, profile.to_string()),
    ];
    for (files, section) in sections {
        for f in files {
            let text = match fs::read_to_string(f) {
                Ok(t) => t,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => return Err(StateError::io(format!("cannot read {}", f.display()), e)),
            };
            let ini = ini::Ini::load_from_str(&text).map_err(|e| StateError::Backend {
                message: format!(
                    "{} is not an AWS credentials or config file: {e}",
                    f.display()
                ),
            })?;
            if let Some(props) = ini.section(Some(section.as_str())) {
                for (k, v) in props.iter() {
                    out.insert(k.trim().to_string(), v.trim().to_string());
                }
            }
        }
    }
    Ok(out)
}

impl S3Settings {
    /// Sets one argument (from a `-backend-config=KEY=VALUE`, a file or the block).
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), String> {
        if S3_OBJECT_ARGUMENTS.contains(&key) {
            // `endpoints = { s3 = "…" }`, `assume_role = { role_arn = "…" }` as JSON.
            let obj: serde_json::Map<String, serde_json::Value> = serde_json::from_str(value)
                .map_err(|_| format!("{key} must be an object, as {key} = {{ … }}"))?;
            for (k, v) in obj {
                let text = match v {
                    serde_json::Value::Null => continue,
                    serde_json::Value::String(t) => t,
                    other => other.to_string(),
                };
                self.set(&format!("{key}.{k}"), &text)?;
            }
            return Ok(());
        }
        let key = match key {
            "force_path_style" => "use_path_style",
            "endpoints.s3" | "endpoint" => "endpoint",
            "sts_endpoint" => "endpoints.sts",
            k => k,
        };
        if key == "dynamodb_table" {
            return Err(
                "Cairn locks S3 state with a lock object beside the state (Terraform's \
                 use_lockfile = true), not with a DynamoDB table: remove dynamodb_table, and \
                 set use_lockfile = true in Terraform's configuration too so both see one lock"
                    .into(),
            );
        }
        if !S3_ARGUMENTS.contains(&key) {
            return Err(format!(
                "the s3 backend has no argument {key:?} Cairn takes (it takes {})",
                S3_ARGUMENTS.join(", ")
            ));
        }
        if matches!(
            key,
            "use_path_style"
                | "skip_credentials_validation"
                | "skip_region_validation"
                | "skip_requesting_account_id"
                | "skip_metadata_api_check"
                | "skip_s3_checksum"
                | "use_lockfile"
                | "encrypt"
                | "insecure"
        ) {
            parse_bool(key, value)?;
        }
        if key == "sse_customer_key" {
            check_customer_key(value)?;
        }
        if key == "assume_role.duration" {
            check_duration(value)?;
        }
        if key == "key" && (value.starts_with('/') || value.ends_with('/') || value.is_empty()) {
            return Err(format!(
                "key must not start or end with '/' and must not be empty, not {value:?}"
            ));
        }
        self.args.insert(key.to_string(), value.to_string());
        Ok(())
    }

    /// Resolves the arguments against the environment (`env` looks a variable up: `AWS_*`,
    /// `HOME`) and the shared credentials and config files, as Terraform does: arguments
    /// first, then `AWS_ACCESS_KEY_ID`/`AWS_SECRET_ACCESS_KEY`/`AWS_SESSION_TOKEN`, then the
    /// profile (`profile`, `AWS_PROFILE`, `default`) in `shared_credentials_files`
    /// (`AWS_SHARED_CREDENTIALS_FILE`, `~/.aws/credentials`) and `shared_config_files`
    /// (`AWS_CONFIG_FILE`, `~/.aws/config`). Cairn never asks an instance metadata service
    /// or STS, so the `skip_*` arguments change nothing.
    pub fn resolve(&self, env: &dyn Fn(&str) -> Option<String>) -> Result<S3Config, StateError> {
        let env = |n: &str| env(n).filter(|v| !v.is_empty());
        let arg = |k: &str| self.args.get(k).cloned().filter(|v| !v.is_empty());
        let missing = |what: &str, how: &str| StateError::Backend {
            message: format!("the s3 backend needs {what} ({how})"),
        };
        let bucket = arg("bucket")
            .ok_or_else(|| missing("bucket", "in the backend block or -backend-config=bucket=…"))?;
        let key = arg("key")
            .ok_or_else(|| missing("key", "in the backend block or -backend-config=key=…"))?;
        let files = |argname: &str, var: &str, default: &str| -> Vec<PathBuf> {
            match arg(argname) {
                Some(v) => list_arg(&v).into_iter().map(PathBuf::from).collect(),
                None => env(var)
                    .map(PathBuf::from)
                    .or_else(|| home_file(default, &env))
                    .into_iter()
                    .collect(),
            }
        };
        let cred_files = files(
            "shared_credentials_files",
            "AWS_SHARED_CREDENTIALS_FILE",
            ".aws/credentials",
        );
        let config_files = files("shared_config_files", "AWS_CONFIG_FILE", ".aws/config");
        let profile = arg("profile")
            .or_else(|| env("AWS_PROFILE"))
            .unwrap_or_else(|| "default".into());
        let from_profile = profile_values(&profile, &cred_files, &config_files)?;
        let prof = |k: &str| from_profile.get(k).cloned().filter(|v| !v.is_empty());
        let region = arg("region")
            .or_else(|| env("AWS_REGION"))
            .or_else(|| env("AWS_DEFAULT_REGION"))
            .or_else(|| prof("region"))
            .ok_or_else(|| {
                missing(
                    "region",
                    "in the backend block, -backend-config=region=…, AWS_REGION or the profile",
                )
            })?;
        let (access_key, secret_key, token) = match (arg("access_key"), arg("secret_key")) {
            (Some(a), Some(s)) => (a, s, arg("token")),
            _ => match (env("AWS_ACCESS_KEY_ID"), env("AWS_SECRET_ACCESS_KEY")) {
                (Some(a), Some(s)) => (a, s, env("AWS_SESSION_TOKEN")),
                _ => match (prof("aws_access_key_id"), prof("aws_secret_access_key")) {
                    (Some(a), Some(s)) => (a, s, prof("aws_session_token")),
                    _ => {
                        return Err(StateError::Backend {
                            message: format!(
                                "the s3 backend found no credentials: set access_key and \
                                     secret_key, AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, \
                                     or keys of the profile {profile:?} in {}",
                                cred_files
                                    .iter()
                                    .chain(&config_files)
                                    .map(|p| p.display().to_string())
                                    .collect::<Vec<_>>()
                                    .join(" or ")
                            ),
                        })
                    }
                },
            },
        };
        let endpoint = arg("endpoint")
            .or_else(|| env("AWS_ENDPOINT_URL_S3"))
            .or_else(|| env("AWS_ENDPOINT_URL"))
            .unwrap_or_else(|| format!("https://s3.{region}.amazonaws.com"));
        let flag = |k: &str| arg(k).is_some_and(|v| parse_bool(k, &v).unwrap_or(false));
        let bad = |m: String| StateError::Backend {
            message: format!("the s3 backend's {m}"),
        };
        // SSE-C: the argument or AWS_SSE_CUSTOMER_KEY, used with `encrypt` as Terraform does.
        let sse_customer_key = match arg("sse_customer_key") {
            Some(_) if !flag("encrypt") => {
                return Err(bad(
                    "sse_customer_key takes effect only with encrypt = true (as in Terraform, \
                     which otherwise ignores it): set encrypt = true, or remove sse_customer_key"
                        .into(),
                ));
            }
            Some(k) => Some(k),
            None => env("AWS_SSE_CUSTOMER_KEY").filter(|_| flag("encrypt")),
        };
        if let Some(k) = &sse_customer_key {
            check_customer_key(k).map_err(|m| bad(format!("{m} (AWS_SSE_CUSTOMER_KEY)")))?;
            if arg("kms_key_id").is_some() {
                return Err(bad(
                    "arguments conflict: only one of kms_key_id, sse_customer_key can be set"
                        .into(),
                ));
            }
        }
        let assume_role = if self.args.keys().any(|k| k.starts_with("assume_role.")) {
            let role_arn = arg("assume_role.role_arn").ok_or_else(|| {
                bad("assume_role needs role_arn (assume_role = { role_arn = \"arn:aws:iam::…:role/…\" })".into())
            })?;
            let duration_secs = match arg("assume_role.duration") {
                Some(d) => Some(check_duration(&d).map_err(bad)?),
                None => None,
            };
            let list = |k: &str| arg(k).map(|v| list_arg(&v)).unwrap_or_default();
            let tags = match arg("assume_role.tags") {
                Some(t) => serde_json::from_str::<BTreeMap<String, String>>(&t)
                    .map_err(|_| bad("assume_role's tags must be a map of strings".into()))?,
                None => BTreeMap::new(),
            };
            Some(Box::new(AssumeRole {
                role_arn,
                session_name: arg("assume_role.session_name").unwrap_or_else(|| {
                    format!(
                        "cairn-{}",
                        std::time::SystemTime::now()
                            .duration_since(std::time::UNIX_EPOCH)
                            .map(|d| d.as_millis())
                            .unwrap_or(0)
                    )
                }),
                external_id: arg("assume_role.external_id"),
                duration_secs,
                policy: arg("assume_role.policy"),
                policy_arns: list("assume_role.policy_arns"),
                tags,
                transitive_tag_keys: list("assume_role.transitive_tag_keys"),
                source_identity: arg("assume_role.source_identity"),
            }))
        } else {
            None
        };
        let sts_endpoint = arg("endpoints.sts")
            .or_else(|| env("AWS_ENDPOINT_URL_STS"))
            .or_else(|| env("AWS_ENDPOINT_URL"))
            .unwrap_or_else(|| format!("https://sts.{region}.amazonaws.com"));
        Ok(S3Config {
            bucket,
            key,
            region,
            endpoint: endpoint.trim_end_matches('/').to_string(),
            path_style: flag("use_path_style"),
            access_key,
            secret_key,
            token,
            encrypt: flag("encrypt"),
            kms_key_id: arg("kms_key_id"),
            sse_customer_key,
            acl: arg("acl"),
            insecure: flag("insecure"),
            assume_role,
            sts_endpoint: sts_endpoint.trim_end_matches('/').to_string(),
            workspace_key_prefix: arg("workspace_key_prefix").unwrap_or_else(|| "env:".into()),
            workspace: "default".into(),
        })
    }
}

#[cfg(test)]
mod s3_tests {
    use super::*;

    fn settings(pairs: &[(&str, &str)]) -> S3Settings {
        let mut s = S3Settings::default();
        for (k, v) in pairs {
            s.set(k, v).unwrap();
        }
        s
    }

    #[test]
    fn s3_credentials_come_from_arguments_then_environment_then_profile() {
        let dir = tempfile::tempdir().unwrap();
        let creds = dir.path().join("credentials");
        fs::write(
            &creds,
            "[default]\naws_access_key_id = DEF\naws_secret_access_key = defsecret\n\
             [ops]\naws_access_key_id = OPS\naws_secret_access_key = opssecret\n\
             aws_session_token = opstoken\n",
        )
        .unwrap();
        let config = dir.path().join("config");
        fs::write(&config, "[profile ops]\nregion = eu-west-3\n").unwrap();
        let base = [("bucket", "b"), ("key", "k/terraform.tfstate")];
        let files = |var: &str| match var {
            "AWS_SHARED_CREDENTIALS_FILE" => Some(creds.display().to_string()),
            "AWS_CONFIG_FILE" => Some(config.display().to_string()),
            _ => None,
        };
        // The profile: region from the config file, keys and token from the credentials.
        let c = settings(&[base[0], base[1], ("profile", "ops")])
            .resolve(&files)
            .unwrap();
        assert_eq!(
            (c.access_key.as_str(), c.region.as_str()),
            ("OPS", "eu-west-3")
        );
        assert_eq!(c.token.as_deref(), Some("opstoken"));
        assert_eq!(c.endpoint, "https://s3.eu-west-3.amazonaws.com");
        // The environment before the profile.
        let env = |var: &str| match var {
            "AWS_ACCESS_KEY_ID" => Some("ENV".to_string()),
            "AWS_SECRET_ACCESS_KEY" => Some("envsecret".to_string()),
            "AWS_REGION" => Some("us-west-2".to_string()),
            "AWS_ENDPOINT_URL_S3" => Some("http://127.0.0.1:9000/".to_string()),
            other => files(other),
        };
        let c = settings(&base).resolve(&env).unwrap();
        assert_eq!(
            (c.access_key.as_str(), c.region.as_str()),
            ("ENV", "us-west-2")
        );
        assert_eq!(c.endpoint, "http://127.0.0.1:9000");
        // Arguments before everything.
        let c = settings(&[
            base[0],
            base[1],
            ("access_key", "ARG"),
            ("secret_key", "argsecret"),
            ("region", "ap-south-1"),
        ])
        .resolve(&env)
        .unwrap();
        assert_eq!(c.access_key, "ARG");
        // Never a credential in what people see.
        let shown = format!("{c:?} {:?}", settings(&[("secret_key", "argsecret")]));
        assert!(
            !shown.contains("argsecret") && !shown.contains("ARG"),
            "{shown}"
        );
        assert_eq!(
            c.describe(),
            "s3://b/k/terraform.tfstate (http://127.0.0.1:9000)"
        );
        assert_eq!(
            c.in_workspace("dev").state_key(),
            "env:/dev/k/terraform.tfstate"
        );
    }

    #[test]
    fn s3_settings_refuse_what_they_cannot_honour() {
        let mut s = S3Settings::default();
        assert!(s
            .set("dynamodb_table", "locks")
            .unwrap_err()
            .contains("use_lockfile"));
        assert!(s.set("bucket_typo", "x").is_err());
        assert!(s.set("key", "/abs").is_err());
        assert!(s.set("encrypt", "maybe").is_err());
        let e = settings(&[("bucket", "b")]).resolve(&|_| None).unwrap_err();
        assert!(e.to_string().contains("needs key"), "{e}");
        let e = settings(&[("bucket", "b"), ("key", "k"), ("region", "r")])
            .resolve(&|_| None)
            .unwrap_err();
        assert!(e.to_string().contains("found no credentials"), "{e}");
    }

    #[test]
    fn s3_assume_role_sse_c_acl_and_insecure_as_terraform_checks_them() {
        let base = [("bucket", "b"), ("key", "k"), ("region", "us-east-1")];
        let creds = |v: &str| match v {
            "AWS_ACCESS_KEY_ID" => Some("AK".to_string()),
            "AWS_SECRET_ACCESS_KEY" => Some("sk".to_string()),
            _ => None,
        };
        let key = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=";
        // Objects as JSON, taken apart: the role, the endpoints.
        let mut s = settings(&base);
        s.set(
            "assume_role",
            r#"{"role_arn":"arn:aws:iam::1:role/r","duration":"1h30m","policy_arns":["a","b"],"tags":{"team":"ops"}}"#,
        )
        .unwrap();
        s.set("endpoints", r#"{"s3":"http://h:1","sts":"http://h:2/"}"#)
            .unwrap();
        s.set("encrypt", "true").unwrap();
        s.set("sse_customer_key", key).unwrap();
        s.set("acl", "bucket-owner-full-control").unwrap();
        s.set("insecure", "true").unwrap();
        let c = s.resolve(&creds).unwrap();
        let role = c.assume_role.as_deref().unwrap();
        assert_eq!(role.role_arn, "arn:aws:iam::1:role/r");
        assert_eq!(role.duration_secs, Some(5400));
        assert_eq!(role.policy_arns, ["a", "b"]);
        assert_eq!(role.tags["team"], "ops");
        assert!(role.session_name.starts_with("cairn-"));
        assert_eq!(
            (c.endpoint.as_str(), c.sts_endpoint.as_str()),
            ("http://h:1", "http://h:2")
        );
        assert_eq!(c.sse_customer_key.as_deref(), Some(key));
        assert!(c.insecure);
        assert!(
            !format!("{c:?} {s:?}").contains(key),
            "the key is never shown"
        );
        // Terraform's checks, in its words.
        let mut bad = settings(&base);
        assert_eq!(
            bad.set("sse_customer_key", "c2hvcnQ=").unwrap_err(),
            "sse_customer_key must be 44 characters in length"
        );
        assert_eq!(
            bad.set("assume_role.duration", "5s").unwrap_err(),
            "Duration must be between 15m0s and 12h0m0s, had 5s"
        );
        assert!(bad
            .set("assume_role", "\"x\"")
            .unwrap_err()
            .contains("object"));
        bad.set("assume_role.session_name", "x").unwrap();
        let e = bad.resolve(&creds).unwrap_err().to_string();
        assert!(e.contains("assume_role needs role_arn"), "{e}");
        let mut both = settings(&base);
        both.set("encrypt", "true").unwrap();
        both.set("sse_customer_key", key).unwrap();
        both.set("kms_key_id", "arn:aws:kms:us-east-1:1:key/x")
            .unwrap();
        let e = both.resolve(&creds).unwrap_err().to_string();
        assert!(
            e.contains("only one of kms_key_id, sse_customer_key"),
            "{e}"
        );
        // Without encrypt, a key that would silently not be used is refused.
        let mut off = settings(&base);
        off.set("sse_customer_key", key).unwrap();
        let e = off.resolve(&creds).unwrap_err().to_string();
        assert!(e.contains("encrypt = true"), "{e}");
        // From the environment, as Terraform: AWS_SSE_CUSTOMER_KEY, used with encrypt.
        let mut on = settings(&base);
        on.set("encrypt", "true").unwrap();
        let env = |v: &str| match v {
            "AWS_SSE_CUSTOMER_KEY" => Some(key.to_string()),
            other => creds(other),
        };
        assert_eq!(
            on.resolve(&env).unwrap().sse_customer_key.as_deref(),
            Some(key)
        );
        assert_eq!(
            settings(&base).resolve(&env).unwrap().sse_customer_key,
            None
        );
        assert_eq!(go_duration("12h"), Some(43_200));
        assert_eq!(go_duration("1x"), None);
    }
}
