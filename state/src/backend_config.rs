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
    "assume_role_with_web_identity.role_arn",
    "assume_role_with_web_identity.session_name",
    "assume_role_with_web_identity.web_identity_token",
    "assume_role_with_web_identity.web_identity_token_file",
    "assume_role_with_web_identity.duration",
    "assume_role_with_web_identity.policy",
    "assume_role_with_web_identity.policy_arns",
];

/// The arguments whose value is an object (`endpoints = { s3 = "…" }`, `assume_role = {
/// role_arn = "…" }`): set as JSON objects, kept as their attributes (`endpoints.s3`).
pub const S3_OBJECT_ARGUMENTS: &[&str] =
    &["endpoints", "assume_role", "assume_role_with_web_identity"];

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

/// Where the credentials requests are signed with come from, before `assume_role` (if any)
/// is assumed with them: the sources Terraform's S3 backend takes (through the AWS SDK for Go),
/// resolved from the arguments, the environment and the shared files without a network call,
/// in the SDK's order: `access_key`/`secret_key`; `assume_role_with_web_identity`; a profile
/// named by `profile` or `AWS_PROFILE`; `AWS_ACCESS_KEY_ID`/`AWS_SECRET_ACCESS_KEY`;
/// `AWS_WEB_IDENTITY_TOKEN_FILE` with `AWS_ROLE_ARN`; the `default` profile.
/// The calls (STS, the SSO portal, a `credential_process`) are made when the store connects
/// (`s3_store.rs`), and again when temporary credentials near their expiry.
#[derive(Clone, PartialEq, Eq)]
pub(crate) enum CredSource {
    /// Keys: arguments, `AWS_ACCESS_KEY_ID`/…, or a profile's `aws_access_key_id`/….
    Static {
        key: String,
        secret: String,
        token: Option<String>,
    },
    /// A profile's `credential_process`: a command printing credentials as JSON.
    Process { profile: String, command: String },
    /// STS `AssumeRoleWithWebIdentity` (unsigned): the `assume_role_with_web_identity`
    /// argument, `AWS_WEB_IDENTITY_TOKEN_FILE` with `AWS_ROLE_ARN`, or a profile's
    /// `web_identity_token_file` with `role_arn`.
    WebIdentity(Box<WebIdentity>),
    /// A profile's `role_arn` with `source_profile` (or `credential_source = Environment`):
    /// the role assumed with the source's credentials.
    ProfileRole {
        profile: String,
        role: Box<AssumeRole>,
        source: Box<CredSource>,
    },
    /// A profile's IAM Identity Center (SSO) role: the token `aws sso login` cached, traded
    /// for the role's credentials at the SSO portal (`GetRoleCredentials`).
    Sso(Box<Sso>),
}

/// `AssumeRoleWithWebIdentity`'s request.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct WebIdentity {
    pub role_arn: String,
    pub session_name: String,
    /// The token itself (`web_identity_token`), else the file it is read from at each call.
    pub token: Option<String>,
    pub token_file: Option<PathBuf>,
    pub duration_secs: Option<u64>,
    pub policy: Option<String>,
    pub policy_arns: Vec<String>,
}

/// A profile's SSO settings (`sso_session` with its `[sso-session NAME]` section, or the
/// legacy `sso_start_url`/`sso_region` in the profile itself).
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Sso {
    pub profile: String,
    pub start_url: String,
    pub region: String,
    pub account_id: String,
    pub role_name: String,
    /// The cached token's file: `~/.aws/sso/cache/<sha1 of the session name or start URL>.json`.
    pub cache_file: PathBuf,
    /// The portal: `endpoints.sso`, `AWS_ENDPOINT_URL_SSO`, else AWS's for the region.
    pub endpoint: String,
}

impl CredSource {
    /// What these credentials are, for messages (never a secret).
    pub(crate) fn describe(&self) -> String {
        match self {
            CredSource::Static { .. } => "static keys".into(),
            CredSource::Process { profile, .. } => {
                format!("the credential_process of profile {profile:?}")
            }
            CredSource::WebIdentity(w) => format!("web identity for {}", w.role_arn),
            CredSource::ProfileRole { profile, role, .. } => {
                format!("role {} of profile {profile:?}", role.role_arn)
            }
            CredSource::Sso(s) => format!(
                "SSO role {} in account {} of profile {:?}",
                s.role_name, s.account_id, s.profile
            ),
        }
    }
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
                    "access_key"
                        | "secret_key"
                        | "token"
                        | "sse_customer_key"
                        | "assume_role_with_web_identity.web_identity_token"
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
    /// Where the credentials come from (never shown).
    pub(crate) creds: CredSource,
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
        format!("a role's duration must be a duration such as \"1h\" or \"45m\", not {v:?}")
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

/// A session name for a role nobody named one for (`cairn-<ms since the epoch>`).
fn session_name() -> String {
    format!(
        "cairn-{}",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis())
            .unwrap_or(0)
    )
}

/// The shared credentials and config files in use.
#[derive(Clone, Copy)]
struct SharedFiles<'a> {
    creds: &'a [PathBuf],
    config: &'a [PathBuf],
}

/// What resolving a profile's credentials looks at.
struct ProfileContext<'a> {
    files: SharedFiles<'a>,
    env: &'a dyn Fn(&str) -> Option<String>,
    sso_endpoint: Option<&'a str>,
    /// `~/.aws/sso/cache`.
    sso_cache: Option<&'a Path>,
}

/// How deep `source_profile` may chain (a loop is an error, not a hang).
const MAX_PROFILE_CHAIN: usize = 8;

/// The credentials of profile `name` in the shared files, as the AWS SDK for Go resolves
/// them: `role_arn` with `source_profile` (the source's credentials, recursively, assume the
/// role) or `credential_source = Environment`; the profile's keys; `role_arn` with
/// `web_identity_token_file`; SSO (`sso_session` or `sso_start_url`); `credential_process`.
fn profile_creds(
    ctx: &ProfileContext<'_>,
    name: &str,
    depth: usize,
) -> Result<CredSource, StateError> {
    let fail = |m: String| StateError::Backend {
        message: format!("the s3 backend's profile {name:?}: {m}"),
    };
    if depth > MAX_PROFILE_CHAIN {
        return Err(fail(format!(
            "source_profile chains more than {MAX_PROFILE_CHAIN} profiles deep (a loop?)"
        )));
    }
    let p = profile_values(name, ctx.files.creds, ctx.files.config)?;
    let get = |k: &str| p.get(k).cloned().filter(|v| !v.is_empty());
    let keys = match (get("aws_access_key_id"), get("aws_secret_access_key")) {
        (Some(key), Some(secret)) => Some(CredSource::Static {
            key,
            secret,
            token: get("aws_session_token"),
        }),
        _ => None,
    };
    let duration_secs = match get("duration_seconds") {
        Some(d) => match d.parse::<u64>() {
            Ok(n) if (900..=43_200).contains(&n) => Some(n),
            _ => {
                return Err(fail(format!(
                    "duration_seconds must be a number of seconds from 900 to 43200, not {d:?}"
                )))
            }
        },
        None => None,
    };
    if let Some(role_arn) = get("role_arn") {
        let source = match (get("source_profile"), get("credential_source")) {
            (Some(sp), _) if sp == name => Some(keys.clone().ok_or_else(|| {
                fail(
                    "its source_profile is itself, but it has no aws_access_key_id and \
                      aws_secret_access_key"
                        .into(),
                )
            })?),
            (Some(sp), _) => Some(profile_creds(ctx, &sp, depth + 1)?),
            (None, Some(cs)) if cs == "Environment" => {
                match (
                    (ctx.env)("AWS_ACCESS_KEY_ID"),
                    (ctx.env)("AWS_SECRET_ACCESS_KEY"),
                ) {
                    (Some(key), Some(secret)) => Some(CredSource::Static {
                        key,
                        secret,
                        token: (ctx.env)("AWS_SESSION_TOKEN"),
                    }),
                    _ => {
                        return Err(fail(
                            "credential_source = Environment, but AWS_ACCESS_KEY_ID and \
                             AWS_SECRET_ACCESS_KEY are not set"
                                .into(),
                        ))
                    }
                }
            }
            (None, Some(cs)) => {
                return Err(fail(format!(
                    "credential_source = {cs}: Cairn never asks an instance or container \
                     metadata service; use source_profile, or credential_source = Environment"
                )))
            }
            (None, None) => None,
        };
        let session = get("role_session_name").unwrap_or_else(session_name);
        if let Some(source) = source {
            if get("mfa_serial").is_some() {
                return Err(fail(
                    "its role needs an MFA code (mfa_serial), which Cairn does not ask for: \
                     use a profile whose role needs none, or temporary keys in the environment"
                        .into(),
                ));
            }
            return Ok(CredSource::ProfileRole {
                profile: name.to_string(),
                role: Box::new(AssumeRole {
                    role_arn,
                    session_name: session,
                    external_id: get("external_id"),
                    duration_secs,
                    policy: None,
                    policy_arns: Vec::new(),
                    tags: BTreeMap::new(),
                    transitive_tag_keys: Vec::new(),
                    source_identity: None,
                }),
                source: Box::new(source),
            });
        }
        if let (None, Some(file)) = (&keys, get("web_identity_token_file")) {
            return Ok(CredSource::WebIdentity(Box::new(WebIdentity {
                role_arn,
                session_name: session,
                token: None,
                token_file: Some(PathBuf::from(file)),
                duration_secs,
                policy: None,
                policy_arns: Vec::new(),
            })));
        }
    }
    if let Some(k) = keys {
        return Ok(k);
    }
    if get("sso_session").is_some() || get("sso_start_url").is_some() {
        let (start_url, region, cache_key) = match get("sso_session") {
            Some(session) => {
                let sec = ini_section(ctx.files.config, &format!("sso-session {session}"))?;
                let s = |k: &str| sec.get(k).cloned().filter(|v| !v.is_empty());
                let missing = |k: &str| {
                    fail(format!(
                        "its sso_session {session:?} has no {k} (a [sso-session {session}] \
                         section with sso_start_url and sso_region in the config file)"
                    ))
                };
                (
                    s("sso_start_url").ok_or_else(|| missing("sso_start_url"))?,
                    s("sso_region").ok_or_else(|| missing("sso_region"))?,
                    session,
                )
            }
            None => {
                let url = get("sso_start_url").unwrap_or_default();
                let region = get("sso_region")
                    .ok_or_else(|| fail("it has sso_start_url but no sso_region".into()))?;
                (url.clone(), region, url)
            }
        };
        let need = |k: &str| get(k).ok_or_else(|| fail(format!("an SSO profile needs {k}")));
        let (account_id, role_name) = (need("sso_account_id")?, need("sso_role_name")?);
        let cache = ctx.sso_cache.ok_or_else(|| {
            fail("HOME is not set, so the SSO token cache (~/.aws/sso/cache) is not found".into())
        })?;
        use sha1::Digest;
        let digest = sha1::Sha1::digest(cache_key.as_bytes());
        let hexed: String = digest.iter().map(|b| format!("{b:02x}")).collect();
        return Ok(CredSource::Sso(Box::new(Sso {
            profile: name.to_string(),
            endpoint: ctx
                .sso_endpoint
                .map(|e| e.trim_end_matches('/').to_string())
                .unwrap_or_else(|| format!("https://portal.sso.{region}.amazonaws.com")),
            start_url,
            region,
            account_id,
            role_name,
            cache_file: cache.join(format!("{hexed}.json")),
        })));
    }
    if let Some(command) = get("credential_process") {
        return Ok(CredSource::Process {
            profile: name.to_string(),
            command,
        });
    }
    let files: Vec<String> = ctx
        .files
        .creds
        .iter()
        .chain(ctx.files.config)
        .map(|p| p.display().to_string())
        .collect();
    Err(StateError::Backend {
        message: format!(
            "the s3 backend found no credentials: set access_key and secret_key, \
             AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or keys, a role (role_arn with \
             source_profile), credential_process or SSO for the profile {name:?} in {}",
            files.join(" or ")
        ),
    })
}

/// The keys of section `[section]` in the first of `files` that has it, later files' keys
/// over earlier ones'.
fn ini_section(files: &[PathBuf], section: &str) -> Result<BTreeMap<String, String>, StateError> {
    let mut out = BTreeMap::new();
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
        if let Some(props) = ini.section(Some(section)) {
            for (k, v) in props.iter() {
                out.insert(k.trim().to_string(), v.trim().to_string());
            }
        }
    }
    Ok(out)
}

/// `(access key, secret key, session token, region)` of `profile` in the shared credentials
/// and config files (AWS's INI files; `[profile NAME]` in the config file).
fn profile_values(
    profile: &str,
    cred_files: &[PathBuf],
    config_files: &[PathBuf],
) -> Result<BTreeMap<String, String>, StateError> {
    let mut out = BTreeMap::new();
    // The config file's `[profile NAME]` (`[default]` for the default), then the credentials
    // file's `[NAME]`, whose keys win.
    for (files, section) in [
        (config_files, format!("profile {profile}")),
        (config_files, profile.to_string()),
        (cred_files, profile.to_string()),
    ] {
        out.extend(ini_section(files, &section)?);
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
        if key == "assume_role.duration" || key == "assume_role_with_web_identity.duration" {
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
    /// `HOME`) and the shared credentials and config files, as Terraform does (see
    /// [`CredSource`] for the order): the profile (`profile`, `AWS_PROFILE`, `default`) is
    /// read from `shared_credentials_files` (`AWS_SHARED_CREDENTIALS_FILE`,
    /// `~/.aws/credentials`) and `shared_config_files` (`AWS_CONFIG_FILE`, `~/.aws/config`).
    /// No network call here; Cairn never asks an instance metadata service, so the `skip_*`
    /// arguments change nothing.
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
        let bad = |m: String| StateError::Backend {
            message: format!("the s3 backend's {m}"),
        };
        let profile_explicit = arg("profile").is_some() || env("AWS_PROFILE").is_some();
        let files = SharedFiles {
            creds: &cred_files,
            config: &config_files,
        };
        let sso_endpoint = arg("endpoints.sso")
            .or_else(|| env("AWS_ENDPOINT_URL_SSO"))
            .or_else(|| env("AWS_ENDPOINT_URL"));
        let cache_dir = home_file(".aws/sso/cache", &env);
        let ctx = ProfileContext {
            files,
            env: &env,
            sso_endpoint: sso_endpoint.as_deref(),
            sso_cache: cache_dir.as_deref(),
        };
        let web_block = self
            .args
            .keys()
            .any(|k| k.starts_with("assume_role_with_web_identity."));
        // The order of the AWS SDK for Go, which Terraform's backend uses: keys given as
        // arguments; `assume_role_with_web_identity`; a profile named explicitly (argument or
        // AWS_PROFILE) before the environment's keys; the environment's keys; the
        // environment's web identity; the default profile.
        let creds = match (arg("access_key"), arg("secret_key")) {
            (Some(a), Some(s)) => CredSource::Static {
                key: a,
                secret: s,
                token: arg("token"),
            },
            _ if web_block => {
                let a = |k: &str| arg(&format!("assume_role_with_web_identity.{k}"));
                let role_arn = a("role_arn")
                    .or_else(|| env("AWS_ROLE_ARN"))
                    .ok_or_else(|| {
                        bad("assume_role_with_web_identity needs role_arn (or AWS_ROLE_ARN)".into())
                    })?;
                let token = a("web_identity_token");
                let token_file = a("web_identity_token_file")
                    .or_else(|| env("AWS_WEB_IDENTITY_TOKEN_FILE"))
                    .map(PathBuf::from);
                if token.is_some() && token_file.is_some() {
                    return Err(bad(
                        "assume_role_with_web_identity: only one of \
                                    web_identity_token, web_identity_token_file can be set"
                            .into(),
                    ));
                }
                if token.is_none() && token_file.is_none() {
                    return Err(bad(
                        "assume_role_with_web_identity needs web_identity_token \
                                    or web_identity_token_file (or AWS_WEB_IDENTITY_TOKEN_FILE)"
                            .into(),
                    ));
                }
                let duration_secs = match a("duration") {
                    Some(d) => Some(check_duration(&d).map_err(bad)?),
                    None => None,
                };
                CredSource::WebIdentity(Box::new(WebIdentity {
                    role_arn,
                    session_name: a("session_name")
                        .or_else(|| env("AWS_ROLE_SESSION_NAME"))
                        .unwrap_or_else(session_name),
                    token,
                    token_file,
                    duration_secs,
                    policy: a("policy"),
                    policy_arns: a("policy_arns").map(|v| list_arg(&v)).unwrap_or_default(),
                }))
            }
            _ if profile_explicit => profile_creds(&ctx, &profile, 0)?,
            _ => match (env("AWS_ACCESS_KEY_ID"), env("AWS_SECRET_ACCESS_KEY")) {
                (Some(a), Some(s)) => CredSource::Static {
                    key: a,
                    secret: s,
                    token: env("AWS_SESSION_TOKEN"),
                },
                _ => match (env("AWS_WEB_IDENTITY_TOKEN_FILE"), env("AWS_ROLE_ARN")) {
                    (Some(file), Some(role_arn)) => {
                        CredSource::WebIdentity(Box::new(WebIdentity {
                            role_arn,
                            session_name: env("AWS_ROLE_SESSION_NAME").unwrap_or_else(session_name),
                            token: None,
                            token_file: Some(PathBuf::from(file)),
                            duration_secs: None,
                            policy: None,
                            policy_arns: Vec::new(),
                        }))
                    }
                    _ => profile_creds(&ctx, &profile, 0)?,
                },
            },
        };
        let endpoint = arg("endpoint")
            .or_else(|| env("AWS_ENDPOINT_URL_S3"))
            .or_else(|| env("AWS_ENDPOINT_URL"))
            .unwrap_or_else(|| format!("https://s3.{region}.amazonaws.com"));
        let flag = |k: &str| arg(k).is_some_and(|v| parse_bool(k, &v).unwrap_or(false));
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
                session_name: arg("assume_role.session_name").unwrap_or_else(session_name),
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
            creds,
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

    fn static_key(c: &S3Config) -> &str {
        match &c.creds {
            CredSource::Static { key, .. } => key,
            other => panic!("not static keys: {}", other.describe()),
        }
    }

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
        assert_eq!((static_key(&c), c.region.as_str()), ("OPS", "eu-west-3"));
        assert!(matches!(&c.creds, CredSource::Static { token: Some(t), .. } if t == "opstoken"));
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
        assert_eq!((static_key(&c), c.region.as_str()), ("ENV", "us-west-2"));
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
        assert_eq!(static_key(&c), "ARG");
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
    fn s3_credentials_of_roles_processes_web_identity_and_sso_as_the_sdk_orders_them() {
        let dir = tempfile::tempdir().unwrap();
        let aws = dir.path().join(".aws");
        fs::create_dir_all(&aws).unwrap();
        fs::write(
            aws.join("credentials"),
            "[base]\naws_access_key_id = BASE\naws_secret_access_key = basesecret\n",
        )
        .unwrap();
        fs::write(
            aws.join("config"),
            "[profile chained]\nrole_arn = arn:aws:iam::1:role/b\nsource_profile = deploy\n\
             [profile deploy]\nrole_arn = arn:aws:iam::1:role/a\nsource_profile = base\n\
             duration_seconds = 1800\n\
             [profile envrole]\nrole_arn = arn:aws:iam::1:role/e\ncredential_source = Environment\n\
             [profile imds]\nrole_arn = arn:aws:iam::1:role/i\ncredential_source = Ec2InstanceMetadata\n\
             [profile web]\nrole_arn = arn:aws:iam::1:role/w\nweb_identity_token_file = /t\n\
             [profile proc]\ncredential_process = get-creds --json\n\
             [profile legacy]\nsso_start_url = https://x.awsapps.com/start\nsso_region = eu-west-1\n\
             sso_account_id = 1\nsso_role_name = R\n\
             [profile nosession]\nsso_session = missing\nsso_account_id = 1\nsso_role_name = R\n",
        )
        .unwrap();
        let home = dir.path().display().to_string();
        let resolve = |pairs: &[(&str, &str)], env: &[(&str, &str)]| {
            let mut all = vec![("bucket", "b"), ("key", "k"), ("region", "us-east-1")];
            all.extend_from_slice(pairs);
            settings(&all).resolve(&|v: &str| {
                if v == "HOME" {
                    return Some(home.clone());
                }
                env.iter()
                    .find(|(k, _)| *k == v)
                    .map(|(_, x)| x.to_string())
            })
        };
        let keys = [
            ("AWS_ACCESS_KEY_ID", "ENV"),
            ("AWS_SECRET_ACCESS_KEY", "envsecret"),
        ];
        // A profile named explicitly wins over the environment's keys (as the SDK, and
        // Terraform since its AWS SDK v2 backend); the default profile does not.
        let c = resolve(&[("profile", "chained")], &keys).unwrap();
        let CredSource::ProfileRole { role, source, .. } = &c.creds else {
            panic!("{}", c.creds.describe())
        };
        assert_eq!(role.role_arn, "arn:aws:iam::1:role/b");
        let CredSource::ProfileRole { role, source, .. } = &**source else {
            panic!("a chain")
        };
        assert_eq!(
            (role.role_arn.as_str(), role.duration_secs),
            ("arn:aws:iam::1:role/a", Some(1800))
        );
        assert!(matches!(&**source, CredSource::Static { key, .. } if key == "BASE"));
        assert_eq!(static_key(&resolve(&[], &keys).unwrap()), "ENV");
        // credential_source = Environment: the environment's keys assume the role.
        let c = resolve(&[("profile", "envrole")], &keys).unwrap();
        assert!(matches!(&c.creds, CredSource::ProfileRole { source, .. }
            if matches!(&**source, CredSource::Static { key, .. } if key == "ENV")));
        let e = resolve(&[("profile", "imds")], &[])
            .unwrap_err()
            .to_string();
        assert!(e.contains("never asks an instance"), "{e}");
        assert!(matches!(
            resolve(&[("profile", "web")], &[]).unwrap().creds,
            CredSource::WebIdentity(_)
        ));
        assert!(matches!(
            &resolve(&[("profile", "proc")], &[]).unwrap().creds,
            CredSource::Process { command, .. } if command == "get-creds --json"
        ));
        // Legacy SSO: the cache file is named by the start URL's SHA-1.
        let CredSource::Sso(sso) = resolve(&[("profile", "legacy")], &[]).unwrap().creds else {
            panic!("sso")
        };
        assert_eq!(sso.endpoint, "https://portal.sso.eu-west-1.amazonaws.com");
        let name = sso
            .cache_file
            .file_name()
            .unwrap()
            .to_string_lossy()
            .to_string();
        assert_eq!(name.len(), 45, "{name}");
        let e = resolve(&[("profile", "nosession")], &[])
            .unwrap_err()
            .to_string();
        assert!(e.contains("sso_start_url"), "{e}");
        // The environment's web identity after its keys, before the default profile.
        let c = resolve(
            &[],
            &[
                ("AWS_WEB_IDENTITY_TOKEN_FILE", "/tok"),
                ("AWS_ROLE_ARN", "arn:aws:iam::1:role/ci"),
            ],
        )
        .unwrap();
        assert!(
            matches!(&c.creds, CredSource::WebIdentity(w) if w.role_arn == "arn:aws:iam::1:role/ci")
        );
        // assume_role_with_web_identity: one token source, and a role.
        let e = resolve(
            &[(
                "assume_role_with_web_identity",
                r#"{"role_arn":"arn:aws:iam::1:role/w","web_identity_token":"t","web_identity_token_file":"/t"}"#,
            )],
            &[],
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("only one of"), "{e}");
        // Never a token in what people see.
        let s = settings(&[(
            "assume_role_with_web_identity",
            r#"{"role_arn":"r","web_identity_token":"tok-secret"}"#,
        )]);
        assert!(!format!("{s:?}").contains("tok-secret"));
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
