//! `credentials.tfrc.json`: the API tokens `cairn login` saves and `cairn logout` removes,
//! in Terraform's file (`$HOME/.terraform.d/credentials.tfrc.json`, as Terraform 1.11 finds
//! it), which module and provider installation read beside the CLI configuration's
//! `credentials` blocks and `TF_TOKEN_*` variables.
//!
//! Decisions:
//! - The file is Terraform's: `{"credentials": {"HOST": {"token": "…"}}}`, written as Go's
//!   `json.MarshalIndent(raw, "", "  ")` writes it (two-space indent, keys sorted, no final
//!   newline), mode 0600, through a temporary file renamed over the old one. Whatever else
//!   the file holds (other hosts, other keys) is kept.
//! - Host names are compared lower-cased, as Terraform's `svchost.ForComparison` does for
//!   the ASCII names registries use; the key written is the lower-cased display form.

use crate::diag::Diagnostic;
use serde_json::{Map, Value as J};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Where Terraform keeps the file: `$HOME/.terraform.d/credentials.tfrc.json`.
pub(crate) fn file(env: &BTreeMap<String, String>) -> Option<PathBuf> {
    let home = env.get("HOME").filter(|h| !h.is_empty())?;
    Some(
        Path::new(home)
            .join(".terraform.d")
            .join("credentials.tfrc.json"),
    )
}

/// A host name as the file keys it (lower case, without the default `:443`), or why it is
/// not one.
pub(crate) fn normalize_host(host: &str) -> Result<String, String> {
    let h = host.trim().to_ascii_lowercase();
    let h = h.strip_suffix(":443").unwrap_or(&h).to_string();
    let (name, port) = match h.rsplit_once(':') {
        Some((n, p)) => (n, Some(p)),
        None => (h.as_str(), None),
    };
    let label_ok = |l: &str| {
        !l.is_empty()
            && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
            && !l.starts_with('-')
            && !l.ends_with('-')
    };
    if name.is_empty() || !name.split('.').all(label_ok) {
        return Err(format!(
            "{host:?} is not a valid host name: use a name such as app.terraform.io"
        ));
    }
    if port.is_some_and(|p| p.parse::<u16>().is_err()) {
        return Err(format!("{host:?} has an invalid port number"));
    }
    Ok(h)
}

/// The tokens the file holds, by normalized host; an absent file holds none.
pub(crate) fn read(path: &Path) -> Result<BTreeMap<String, String>, Diagnostic> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(BTreeMap::new()),
        Err(e) => {
            return Err(Diagnostic::error(
                "Cannot read the credentials file",
                format!("{}: {e}.", path.display()),
            ))
        }
    };
    let raw = parse(path, &text)?;
    let mut out = BTreeMap::new();
    if let Some(J::Object(hosts)) = raw.get("credentials") {
        for (host, v) in hosts {
            if let (Ok(h), Some(t)) = (normalize_host(host), v.get("token").and_then(J::as_str)) {
                out.insert(h, t.to_string());
            }
        }
    }
    Ok(out)
}

fn parse(path: &Path, text: &str) -> Result<Map<String, J>, Diagnostic> {
    if text.trim().is_empty() {
        return Ok(Map::new());
    }
    match serde_json::from_str::<J>(text) {
        Ok(J::Object(m)) => Ok(m),
        Ok(_) => Err(Diagnostic::error(
            "Invalid credentials file",
            format!("{}: the file must hold a JSON object.", path.display()),
        )),
        Err(e) => Err(Diagnostic::error(
            "Invalid credentials file",
            format!("{}: {e}.", path.display()),
        )),
    }
}

/// Saves `token` for `host` (or removes the host's entry when `token` is `None`). Returns
/// whether the file held a token for the host before.
pub(crate) fn store(path: &Path, host: &str, token: Option<&str>) -> Result<bool, Diagnostic> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => {
            return Err(Diagnostic::error(
                "Cannot read the credentials file",
                format!("{}: {e}.", path.display()),
            ))
        }
    };
    let mut raw = parse(path, &text)?;
    let creds = raw
        .entry("credentials")
        .or_insert_with(|| J::Object(Map::new()));
    let J::Object(hosts) = creds else {
        return Err(Diagnostic::error(
            "Invalid credentials file",
            format!(
                "credentials file {} has invalid value for \"credentials\" property: must be \
                 a JSON object",
                path.display()
            ),
        ));
    };
    let before = hosts.len();
    hosts.retain(|k, _| normalize_host(k).map_or(true, |h| h != host));
    let had = hosts.len() != before;
    if let Some(t) = token {
        hosts.insert(host.to_string(), serde_json::json!({ "token": t }));
    }
    let text = go_indent(&J::Object(raw));
    write_private(path, &text).map_err(|e| {
        Diagnostic::error(
            "Cannot save the credentials",
            format!("{}: {e}.", path.display()),
        )
    })?;
    Ok(had)
}

/// Go's `json.MarshalIndent(v, "", "  ")`: objects' keys sorted, `<>&` escaped.
fn go_indent(v: &J) -> String {
    fn sorted(v: &J) -> J {
        match v {
            J::Object(m) => {
                let b: BTreeMap<&String, J> = m.iter().map(|(k, v)| (k, sorted(v))).collect();
                J::Object(b.into_iter().map(|(k, v)| (k.clone(), v)).collect())
            }
            J::Array(a) => J::Array(a.iter().map(sorted).collect()),
            v => v.clone(),
        }
    }
    let text = serde_json::to_string_pretty(&sorted(v)).unwrap_or_default();
    text.replace('<', "\\u003c")
        .replace('>', "\\u003e")
        .replace('&', "\\u0026")
}

/// Writes `text` to `path` readable by its owner only, through a temporary file renamed
/// over the old one.
fn write_private(path: &Path, text: &str) -> std::io::Result<()> {
    use std::io::Write as _;
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let tmp = dir.join(format!(".credentials.tfrc.json.{}.tmp", std::process::id()));
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        opts.mode(0o600);
    }
    let mut f = opts.open(&tmp)?;
    f.write_all(text.as_bytes())?;
    f.sync_all()?;
    drop(f);
    std::fs::rename(&tmp, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn store_and_remove_keep_other_hosts() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("credentials.tfrc.json");
        std::fs::write(
            &path,
            r#"{"credentials":{"Other.Example.com":{"token":"o"}},"x":1}"#,
        )
        .unwrap();
        assert!(!store(&path, "app.example.com", Some("t1")).unwrap());
        assert!(store(&path, "app.example.com", Some("t2")).unwrap());
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(
            text,
            "{\n  \"credentials\": {\n    \"Other.Example.com\": {\n      \"token\": \"o\"\n    },\n    \"app.example.com\": {\n      \"token\": \"t2\"\n    }\n  },\n  \"x\": 1\n}"
        );
        let tokens = read(&path).unwrap();
        assert_eq!(tokens["other.example.com"], "o");
        assert_eq!(tokens["app.example.com"], "t2");
        assert!(store(&path, "other.example.com", None).unwrap());
        assert!(!read(&path).unwrap().contains_key("other.example.com"));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
    }

    #[test]
    fn host_names() {
        assert_eq!(
            normalize_host("App.Terraform.IO").unwrap(),
            "app.terraform.io"
        );
        assert_eq!(normalize_host("h.example:443").unwrap(), "h.example");
        assert_eq!(normalize_host("h.example:8443").unwrap(), "h.example:8443");
        assert!(normalize_host("bad host").is_err());
        assert!(normalize_host("h:99999").is_err());
    }
}
