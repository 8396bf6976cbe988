//! Terraform's CLI configuration: where providers are installed from.
//!
//! Which file: `CAIRN_CLI_CONFIG_FILE` if set, else `TF_CLI_CONFIG_FILE`, else
//! `~/.terraformrc` (none is fine: the implied defaults apply). The environment arrives as a map
//! from the CLI layer (the only reader of the process environment).
//!
//! What is read (everything else, such as `disable_checkpoint`, is accepted and ignored):
//! - `provider_installation { dev_overrides {…} filesystem_mirror {…} network_mirror {…}
//!   direct {…} }`, each method with `include` / `exclude` patterns
//!   (`HOSTNAME/NAMESPACE/TYPE`, `*` for any part). Without this block Terraform's implied
//!   setup applies: each implied local mirror directory that exists ([`implied_mirror_dirs`])
//!   is the only source of the providers found in it, and the registry (`direct`) of the rest.
//! - `plugin_cache_dir` (`TF_PLUGIN_CACHE_DIR` wins; `$VAR` references are expanded, as
//!   Terraform does).
//! - `host "NAME" { services = {…} }` (replaces service discovery for that host) and
//!   `credentials "NAME" { token = "…" }`, the tokens `cairn login` saved in
//!   `~/.terraform.d/credentials.tfrc.json` (`credentials.rs`), and `TF_TOKEN_<host>`
//!   variables, later ones winning.
//! - `SSL_CERT_FILE`: extra trusted root certificates (PEM) for registries and network
//!   mirrors, the variable Go programs such as Terraform honour on Linux.
//! - `TF_DATA_DIR`: where `.terraform` is.
//!
//! Errors name `file:line:col`.

use crate::addr::provider_source::{SourceAddr, DEFAULT_HOST};
use hcl_edit::expr::{Expression, ObjectKey};
use hcl_edit::structure::{Body, Structure};
use hcl_edit::Span as _;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::diag::Diagnostic;

/// One `include` / `exclude` pattern: each part a name or `*`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Pattern {
    pub(crate) host: String,
    pub(crate) namespace: String,
    pub(crate) type_: String,
}

impl Pattern {
    pub(crate) fn parse(s: &str) -> Result<Pattern, String> {
        let parts: Vec<&str> = s.split('/').collect();
        let (h, n, t) = match parts.as_slice() {
            [n, t] => (DEFAULT_HOST, *n, *t),
            [h, n, t] => (*h, *n, *t),
            _ => {
                return Err(format!(
                    "\"{s}\" is not a provider pattern: use HOSTNAME/NAMESPACE/TYPE, with * for \
                     any part."
                ))
            }
        };
        if n == "*" && t != "*" {
            return Err(format!(
                "\"{s}\": a wildcard namespace needs a wildcard type as well."
            ));
        }
        let check = |p: &str| -> Result<String, String> {
            if p == "*" {
                Ok(p.into())
            } else {
                // Reuse the address rules for each concrete part.
                SourceAddr::parse(&format!("example.com/{p}/x"))
                    .map(|a| a.namespace)
                    .map_err(|_| format!("\"{s}\": \"{p}\" is not a valid name."))
            }
        };
        let host = if h == "*" {
            "*".to_string()
        } else {
            SourceAddr::parse(&format!("{h}/x/y"))
                .map(|a| a.host)
                .map_err(|_| format!("\"{s}\": \"{h}\" is not a valid hostname."))?
        };
        Ok(Pattern {
            host,
            namespace: check(n)?,
            type_: check(t)?,
        })
    }

    pub(crate) fn matches(&self, a: &SourceAddr) -> bool {
        let m = |p: &str, v: &str| p == "*" || p == v;
        m(&self.host, &a.host) && m(&self.namespace, &a.namespace) && m(&self.type_, &a.type_)
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum MethodKind {
    /// A local directory in the packed (`HOST/NS/TYPE/terraform-provider-TYPE_VER_OS_ARCH.zip`)
    /// or unpacked (`HOST/NS/TYPE/VER/OS_ARCH/`) layout.
    FilesystemMirror(PathBuf),
    /// An HTTPS base URL speaking the provider network mirror protocol.
    NetworkMirror(String),
    /// The origin registry of each provider (the provider registry protocol).
    Direct,
}

/// One installation method with the providers it may serve.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Method {
    pub(crate) kind: MethodKind,
    pub(crate) include: Vec<Pattern>,
    pub(crate) exclude: Vec<Pattern>,
}

impl Method {
    /// Whether this method may serve `a`: included (or no `include`), and not excluded.
    pub(crate) fn serves(&self, a: &SourceAddr) -> bool {
        (self.include.is_empty() || self.include.iter().any(|p| p.matches(a)))
            && !self.exclude.iter().any(|p| p.matches(a))
    }
}

/// The CLI configuration, with the parts of the environment installation needs.
#[derive(Clone, Debug, Default)]
pub struct CliConfig {
    /// The file that was read, if any.
    pub(crate) file: Option<PathBuf>,
    /// `dev_overrides`: a directory holding the provider's executable, used as is (no version,
    /// no lock file check).
    pub(crate) dev_overrides: BTreeMap<SourceAddr, PathBuf>,
    /// The explicit `provider_installation` methods in order; `None` when the block is absent
    /// (then [`CliConfig::methods`] gives Terraform's implied ones).
    pub(crate) installation: Option<Vec<Method>>,
    pub(crate) plugin_cache_dir: Option<PathBuf>,
    /// `host` blocks: service discovery answers given locally.
    pub(crate) hosts: BTreeMap<String, BTreeMap<String, String>>,
    /// API tokens per registry host.
    pub(crate) credentials: BTreeMap<String, String>,
    /// The implied local mirror directories (existing or not), in Terraform's order.
    pub(crate) implied_dirs: Vec<PathBuf>,
    /// `SSL_CERT_FILE`: extra trusted roots (PEM).
    pub(crate) ca_file: Option<PathBuf>,
    /// `TF_DATA_DIR`: the working data directory instead of `.terraform`.
    pub(crate) data_dir: Option<PathBuf>,
    /// Problems that do not stop anything (a named file that does not exist).
    pub(crate) warnings: Vec<Diagnostic>,
}

/// The implied local mirror directories on Unix, in Terraform's order: `terraform.d/plugins`
/// in the working directory, `~/.terraform.d/plugins`, `$XDG_DATA_HOME/terraform/plugins`
/// (default `~/.local/share`), then `terraform/plugins` under each of `$XDG_DATA_DIRS`
/// (default `/usr/local/share:/usr/share`).
pub(crate) fn implied_mirror_dirs(env: &BTreeMap<String, String>, cwd: &Path) -> Vec<PathBuf> {
    let mut out = vec![cwd.join("terraform.d").join("plugins")];
    let home = env.get("HOME").filter(|h| !h.is_empty()).map(PathBuf::from);
    if let Some(h) = &home {
        out.push(h.join(".terraform.d").join("plugins"));
    }
    match env.get("XDG_DATA_HOME").filter(|v| !v.is_empty()) {
        Some(d) => out.push(Path::new(d).join("terraform").join("plugins")),
        None => {
            if let Some(h) = &home {
                out.push(h.join(".local/share/terraform/plugins"));
            }
        }
    }
    let dirs = env
        .get("XDG_DATA_DIRS")
        .filter(|v| !v.is_empty())
        .cloned()
        .unwrap_or_else(|| "/usr/local/share:/usr/share".into());
    for d in dirs.split(':').filter(|d| !d.is_empty()) {
        out.push(Path::new(d).join("terraform").join("plugins"));
    }
    out
}

impl CliConfig {
    /// Reads the CLI configuration the environment names (see the module docs). `cwd` is the
    /// working directory (for the implied `terraform.d/plugins`).
    pub fn from_env(env: &BTreeMap<String, String>, cwd: &Path) -> Result<CliConfig, Diagnostic> {
        let var = |k: &str| env.get(k).filter(|v| !v.is_empty());
        let (file, named) = if let Some(f) = var("CAIRN_CLI_CONFIG_FILE") {
            (Some(PathBuf::from(f)), true)
        } else if let Some(f) = var("TF_CLI_CONFIG_FILE") {
            (Some(PathBuf::from(f)), true)
        } else {
            (
                var("HOME").map(|h| Path::new(h).join(".terraformrc")),
                false,
            )
        };
        let mut cfg = match &file {
            Some(f) => match std::fs::read_to_string(f) {
                Ok(text) => CliConfig::parse(f, &text, env)?,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    // As Terraform: a named file that is missing is a warning, not an error.
                    let mut cfg = CliConfig::default();
                    if named {
                        cfg.warnings.push(Diagnostic::warning(
                            "Unable to open CLI configuration file",
                            format!(
                                "The CLI configuration file at \"{}\" does not exist.",
                                f.display()
                            ),
                        ));
                    }
                    cfg
                }
                Err(e) => {
                    return Err(Diagnostic::error(
                        "Cannot read the CLI configuration",
                        format!("{}: {e}.", f.display()),
                    ))
                }
            },
            None => CliConfig::default(),
        };
        if let Some(d) = var("TF_PLUGIN_CACHE_DIR") {
            cfg.plugin_cache_dir = Some(PathBuf::from(d));
        }
        // `cairn login`'s tokens (Terraform's `credentials.tfrc.json`), which Terraform merges
        // after the main file; `TF_TOKEN_*` variables come last.
        if let Some(path) = super::credentials::file(env) {
            cfg.credentials.extend(super::credentials::read(&path)?);
        }
        for (k, v) in env {
            if let Some(host) = k.strip_prefix("TF_TOKEN_") {
                // `TF_TOKEN_app_terraform_io`: dots are underscores, dashes double underscores.
                let host = host
                    .replace("__", "\u{0}")
                    .replace('_', ".")
                    .replace('\u{0}', "-");
                cfg.credentials.insert(host.to_lowercase(), v.clone());
            }
        }
        cfg.implied_dirs = implied_mirror_dirs(env, cwd);
        cfg.ca_file = var("SSL_CERT_FILE").map(PathBuf::from);
        cfg.data_dir = var("TF_DATA_DIR").map(PathBuf::from);
        Ok(cfg)
    }

    /// Parses one CLI configuration file. `env` expands `$VAR` in `plugin_cache_dir`.
    pub(crate) fn parse(
        path: &Path,
        text: &str,
        env: &BTreeMap<String, String>,
    ) -> Result<CliConfig, Diagnostic> {
        // Terraform reads this file as HCL 1, where attribute names may be quoted
        // (`"example.com/ns/name" = "/dir"` in `dev_overrides`): such names become placeholder
        // identifiers of the same length before hcl-edit parses the text.
        let (work, keys) = unquote_keys(text);
        let p = Parser { path, text, keys };
        let body: Body = hcl_edit::parser::parse_body(&work).map_err(|e| {
            p.error(
                e.location().offset(),
                "Invalid CLI configuration",
                e.message(),
            )
        })?;
        let mut cfg = CliConfig {
            file: Some(path.to_path_buf()),
            ..Default::default()
        };
        for s in body.iter() {
            match s {
                // Other attributes (`disable_checkpoint`, …) are accepted and mean nothing
                // to Cairn.
                Structure::Attribute(a) => {
                    if a.key.as_str() == "plugin_cache_dir" {
                        let v = p.string(&a.value)?;
                        cfg.plugin_cache_dir = Some(PathBuf::from(expand_env(&v, env)));
                    }
                }
                Structure::Block(b) => match b.ident.as_str() {
                    "provider_installation" => {
                        if cfg.installation.is_some() {
                            return Err(p.error(
                                p.start(b.ident.span()),
                                "Duplicate provider_installation block",
                                "Only one provider_installation block is allowed.",
                            ));
                        }
                        cfg.installation = Some(p.installation(&b.body, &mut cfg.dev_overrides)?);
                    }
                    "host" => {
                        let name = p.one_label(b)?;
                        let mut services = BTreeMap::new();
                        for s in b.body.iter() {
                            if let Structure::Attribute(a) = s {
                                if a.key.as_str() == "services" {
                                    for (k, v) in p.object(&a.value)? {
                                        services.insert(k, p.string(v)?);
                                    }
                                }
                            }
                        }
                        cfg.hosts.insert(name.to_lowercase(), services);
                    }
                    "credentials" => {
                        let name = p.one_label(b)?;
                        for s in b.body.iter() {
                            if let Structure::Attribute(a) = s {
                                if a.key.as_str() == "token" {
                                    cfg.credentials
                                        .insert(name.to_lowercase(), p.string(&a.value)?);
                                }
                            }
                        }
                    }
                    _ => {}
                },
            }
        }
        Ok(cfg)
    }

    /// The installation methods in force: the explicit ones, or Terraform's implied ones
    /// (each existing implied mirror directory serving exactly the providers found in it, then
    /// the registry for every other provider).
    pub(crate) fn methods(&self) -> Vec<Method> {
        if let Some(m) = &self.installation {
            return m.clone();
        }
        let mut out = Vec::new();
        let mut found: Vec<Pattern> = Vec::new();
        for dir in &self.implied_dirs {
            let here = super::mirror::providers_in_dir(dir);
            if here.is_empty() {
                continue;
            }
            let include: Vec<Pattern> = here
                .iter()
                .map(|a| Pattern {
                    host: a.host.clone(),
                    namespace: a.namespace.clone(),
                    type_: a.type_.clone(),
                })
                .collect();
            found.extend(include.iter().cloned());
            out.push(Method {
                kind: MethodKind::FilesystemMirror(dir.clone()),
                include,
                exclude: Vec::new(),
            });
        }
        out.push(Method {
            kind: MethodKind::Direct,
            include: Vec::new(),
            exclude: found,
        });
        out
    }
}

/// `$NAME` and `${NAME}` replaced by their values (unset: empty), as Go's `os.ExpandEnv`.
fn expand_env(s: &str, env: &BTreeMap<String, String>) -> String {
    let mut out = String::new();
    let mut rest = s;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        let (name, skip) = if let Some(inner) = after.strip_prefix('{') {
            match inner.find('}') {
                Some(end) => (&inner[..end], end + 2),
                None => ("", 0),
            }
        } else {
            let end = after
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(after.len());
            (&after[..end], end)
        };
        if skip == 0 {
            out.push('$');
            rest = after;
            continue;
        }
        out.push_str(env.get(name).map(String::as_str).unwrap_or(""));
        rest = &after[skip..];
    }
    out.push_str(rest);
    out
}

/// Replaces each quoted attribute name at the start of a line (`"a/b" =`) with a placeholder
/// identifier `_N` padded to the same length, so positions stay right; returns the new text and
/// the names by N.
fn unquote_keys(text: &str) -> (String, Vec<String>) {
    let mut out = String::with_capacity(text.len());
    let mut keys = Vec::new();
    for line in text.split_inclusive('\n') {
        let trimmed = line.trim_start();
        let indent = &line[..line.len() - trimmed.len()];
        let key = trimmed.strip_prefix('"').and_then(|r| {
            let end = r.find('"')?;
            let name = &r[..end];
            let after = r[end + 1..].trim_start();
            (!name.contains('\\') && after.starts_with('=') && !after.starts_with("=="))
                .then_some((name, end + 2))
        });
        match key {
            Some((name, len)) => {
                let ph = format!("_{}", keys.len());
                keys.push(name.to_string());
                out.push_str(indent);
                out.push_str(&format!("{ph:<len$}"));
                out.push_str(&trimmed[len..]);
            }
            None => out.push_str(line),
        }
    }
    (out, keys)
}

struct Parser<'a> {
    path: &'a Path,
    text: &'a str,
    keys: Vec<String>,
}

impl Parser<'_> {
    /// An attribute or object key as written (placeholders mapped back).
    fn key(&self, k: &str) -> String {
        k.strip_prefix('_')
            .and_then(|n| n.parse::<usize>().ok())
            .and_then(|n| self.keys.get(n))
            .cloned()
            .unwrap_or_else(|| k.to_string())
    }

    fn start(&self, r: Option<std::ops::Range<usize>>) -> usize {
        r.map(|r| r.start).unwrap_or(0)
    }

    fn error(&self, at: usize, summary: &str, detail: &str) -> Diagnostic {
        Diagnostic::error(
            summary,
            format!("{}: {detail}", location(self.path, self.text, at)),
        )
    }

    fn string(&self, e: &Expression) -> Result<String, Diagnostic> {
        match e {
            Expression::String(s) => Ok(s.value().clone()),
            other => Err(self.error(
                self.start(other.span()),
                "Invalid CLI configuration",
                "A string is required here.",
            )),
        }
    }

    fn strings(&self, e: &Expression) -> Result<Vec<String>, Diagnostic> {
        match e {
            Expression::Array(a) => a.iter().map(|v| self.string(v)).collect(),
            other => Err(self.error(
                self.start(other.span()),
                "Invalid CLI configuration",
                "A list of strings is required here.",
            )),
        }
    }

    fn object<'e>(&self, e: &'e Expression) -> Result<Vec<(String, &'e Expression)>, Diagnostic> {
        match e {
            Expression::Object(o) => o
                .iter()
                .map(|(k, v)| {
                    let key = match k {
                        ObjectKey::Ident(i) => self.key(i.as_str()),
                        ObjectKey::Expression(e) => self.string(e)?,
                    };
                    Ok((key, v.expr()))
                })
                .collect(),
            other => Err(self.error(
                self.start(other.span()),
                "Invalid CLI configuration",
                "An object is required here.",
            )),
        }
    }

    fn one_label(&self, b: &hcl_edit::structure::Block) -> Result<String, Diagnostic> {
        match b.labels.as_slice() {
            [l] => Ok(l.as_str().to_string()),
            _ => Err(self.error(
                self.start(b.ident.span()),
                "Invalid CLI configuration",
                &format!("A {} block needs exactly one label.", b.ident.as_str()),
            )),
        }
    }

    fn patterns(&self, e: &Expression) -> Result<Vec<Pattern>, Diagnostic> {
        let at = self.start(e.span());
        self.strings(e)?
            .iter()
            .map(|s| {
                Pattern::parse(s)
                    .map_err(|m| self.error(at, "Invalid provider_installation pattern", &m))
            })
            .collect()
    }

    fn installation(
        &self,
        body: &Body,
        overrides: &mut BTreeMap<SourceAddr, PathBuf>,
    ) -> Result<Vec<Method>, Diagnostic> {
        let mut methods = Vec::new();
        for s in body.iter() {
            let Structure::Block(b) = s else {
                return Err(self.error(
                    self.start(s.span()),
                    "Invalid provider_installation block",
                    "Only the blocks dev_overrides, filesystem_mirror, network_mirror and \
                     direct are allowed here.",
                ));
            };
            let at = self.start(b.ident.span());
            if b.ident.as_str() == "dev_overrides" {
                for s in b.body.iter() {
                    let Structure::Attribute(a) = s else {
                        return Err(self.error(
                            self.start(s.span()),
                            "Invalid dev_overrides block",
                            "Only \"SOURCE\" = \"DIRECTORY\" entries are allowed here.",
                        ));
                    };
                    let addr = SourceAddr::parse(&self.key(a.key.as_str())).map_err(|m| {
                        self.error(self.start(a.key.span()), "Invalid dev_overrides entry", &m)
                    })?;
                    overrides.insert(addr, PathBuf::from(self.string(&a.value)?));
                }
                continue;
            }
            let (mut path, mut url, mut include, mut exclude) = (None, None, vec![], vec![]);
            for s in b.body.iter() {
                let Structure::Attribute(a) = s else {
                    return Err(self.error(
                        self.start(s.span()),
                        "Invalid provider_installation block",
                        "Nested blocks are not allowed here.",
                    ));
                };
                match a.key.as_str() {
                    "path" => path = Some(self.string(&a.value)?),
                    "url" => url = Some(self.string(&a.value)?),
                    "include" => include = self.patterns(&a.value)?,
                    "exclude" => exclude = self.patterns(&a.value)?,
                    other => {
                        return Err(self.error(
                            self.start(a.key.span()),
                            "Invalid provider_installation block",
                            &format!("Unexpected argument \"{other}\"."),
                        ))
                    }
                }
            }
            let kind = match b.ident.as_str() {
                "filesystem_mirror" => {
                    MethodKind::FilesystemMirror(PathBuf::from(path.ok_or_else(|| {
                        self.error(at, "Invalid filesystem_mirror block", "A path is required.")
                    })?))
                }
                "network_mirror" => {
                    let u = url.ok_or_else(|| {
                        self.error(at, "Invalid network_mirror block", "A url is required.")
                    })?;
                    if !u.starts_with("https://") {
                        return Err(self.error(
                            at,
                            "Invalid network_mirror block",
                            &format!("The mirror URL \"{u}\" must use https."),
                        ));
                    }
                    MethodKind::NetworkMirror(if u.ends_with('/') { u } else { u + "/" })
                }
                "direct" => MethodKind::Direct,
                other => {
                    return Err(self.error(
                        at,
                        "Invalid provider_installation block",
                        &format!(
                            "Unknown installation method \"{other}\": use dev_overrides, \
                             filesystem_mirror, network_mirror or direct."
                        ),
                    ))
                }
            };
            methods.push(Method {
                kind,
                include,
                exclude,
            });
        }
        Ok(methods)
    }
}

/// `path:line:col` of a byte offset in `text` (columns count characters).
pub(crate) fn location(path: &Path, text: &str, at: usize) -> String {
    let at = at.min(text.len());
    let mut at = at;
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    let before = &text[..at];
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().unwrap_or("").chars().count() + 1;
    format!("{}:{line}:{col}", path.display())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn parses_every_method() {
        let text = r#"
disable_checkpoint = true
plugin_cache_dir = "$HOME/.terraform.d/plugin-cache"
provider_installation {
  dev_overrides {
    "example.com/sim/sim" = "/tmp/plugins"
  }
  filesystem_mirror {
    path    = "/usr/share/terraform/providers"
    include = ["example.com/*/*"]
  }
  network_mirror {
    url     = "https://mirror.example.com/providers"
    exclude = ["hashicorp/aws"]
  }
  direct {
    exclude = ["example.com/*/*"]
  }
}
host "example.com" {
  services = { "providers.v1" = "https://example.com/v1/providers/" }
}
credentials "example.com" {
  token = "abc"
}
"#;
        let cfg = CliConfig::parse(Path::new("rc"), text, &env(&[("HOME", "/h")])).unwrap();
        assert_eq!(
            cfg.plugin_cache_dir.as_deref(),
            Some(Path::new("/h/.terraform.d/plugin-cache"))
        );
        let sim = SourceAddr::parse("example.com/sim/sim").unwrap();
        assert_eq!(cfg.dev_overrides[&sim], PathBuf::from("/tmp/plugins"));
        let m = cfg.methods();
        assert_eq!(m.len(), 3);
        assert!(m[0].serves(&sim));
        assert!(!m[0].serves(&SourceAddr::parse("hashicorp/aws").unwrap()));
        assert_eq!(
            m[1].kind,
            MethodKind::NetworkMirror("https://mirror.example.com/providers/".into())
        );
        assert!(!m[1].serves(&SourceAddr::parse("hashicorp/aws").unwrap()));
        assert!(m[1].serves(&SourceAddr::parse("hashicorp/null").unwrap()));
        assert!(!m[2].serves(&sim));
        assert_eq!(
            cfg.hosts["example.com"]["providers.v1"],
            "https://example.com/v1/providers/"
        );
        assert_eq!(cfg.credentials["example.com"], "abc");
    }

    #[test]
    fn errors_have_locations() {
        let text = "provider_installation {\n  network_mirror {\n    url = \"http://x\"\n  }\n}\n";
        let e = CliConfig::parse(Path::new("rc"), text, &BTreeMap::new()).unwrap_err();
        assert!(e.detail.contains("rc:2:3"), "{}", e.detail);
        let text = "provider_installation {\n  direct {\n    include = [\"a/b/c/d\"]\n  }\n}\n";
        let e = CliConfig::parse(Path::new("rc"), text, &BTreeMap::new()).unwrap_err();
        assert!(e.detail.contains("rc:3:15"), "{}", e.detail);
        let e = CliConfig::parse(Path::new("rc"), "x = \n", &BTreeMap::new()).unwrap_err();
        assert!(e.detail.starts_with("rc:"), "{}", e.detail);
    }

    #[test]
    fn environment_choice() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a.rc");
        let b = dir.path().join("b.rc");
        std::fs::write(&a, "plugin_cache_dir = \"/a\"\n").unwrap();
        std::fs::write(&b, "plugin_cache_dir = \"/b\"\n").unwrap();
        let cwd = dir.path();
        let e = env(&[
            ("TF_CLI_CONFIG_FILE", a.to_str().unwrap()),
            ("CAIRN_CLI_CONFIG_FILE", b.to_str().unwrap()),
        ]);
        let cfg = CliConfig::from_env(&e, cwd).unwrap();
        assert_eq!(cfg.plugin_cache_dir.as_deref(), Some(Path::new("/b")));
        let e = env(&[("TF_CLI_CONFIG_FILE", a.to_str().unwrap())]);
        assert_eq!(
            CliConfig::from_env(&e, cwd)
                .unwrap()
                .plugin_cache_dir
                .as_deref(),
            Some(Path::new("/a"))
        );
        // A missing ~/.terraformrc is fine; a missing named file is a warning.
        let e = env(&[("HOME", cwd.to_str().unwrap())]);
        let cfg = CliConfig::from_env(&e, cwd).unwrap();
        assert!(cfg.installation.is_none());
        assert_eq!(cfg.methods().last().unwrap().kind, MethodKind::Direct);
        let e = env(&[("TF_CLI_CONFIG_FILE", "/nonexistent/rc")]);
        let cfg = CliConfig::from_env(&e, cwd).unwrap();
        assert_eq!(cfg.warnings.len(), 1);
        assert!(cfg.warnings[0].detail.contains("/nonexistent/rc"));
        let e = env(&[("TF_CLI_CONFIG_FILE", cwd.to_str().unwrap())]);
        assert!(
            CliConfig::from_env(&e, cwd).is_err(),
            "a directory is not readable"
        );
        let e = env(&[("TF_TOKEN_my__reg_example_com", "t")]);
        assert_eq!(
            CliConfig::from_env(&e, cwd).unwrap().credentials["my-reg.example.com"],
            "t"
        );
    }
}
