//! The `local` provider: files on the machine that runs Cairn, as hashicorp/local 2.x.
//!
//! ```hcl
//! resource "local_file" "f" {
//!   filename             = "out/hello.txt"   # required; relative to the working directory
//!   content              = "hello\n"         # exactly one of content, content_base64,
//!                                            #   sensitive_content, source
//!   file_permission      = "0644"            # default "0777" (the umask applies, as in Go)
//!   directory_permission = "0755"            # default "0777", for directories it creates
//! }
//! data "local_file" "g" { filename = "in.txt" }   # content, content_base64, id, hashes
//! ```
//!
//! `local_sensitive_file` (resource and data source) is the same with `content` sensitive,
//! permissions defaulting to `"0700"` and no `sensitive_content`.
//!
//! Attributes computed from the bytes written or read: `id` and `content_sha1` (hex SHA-1),
//! `content_md5`, `content_sha256`, `content_sha512` (hex), `content_base64sha256`,
//! `content_base64sha512` (base64 of the digest). Every argument forces replacement.
//!
//! Behaviour:
//! - create writes the file (creating missing parent directories); delete removes it (a file
//!   already gone is fine);
//! - read (refresh): a missing file reports the object gone (the next plan creates it again);
//!   a file whose bytes no longer match `id` is *drift*: the state then holds the new bytes in
//!   the argument the configuration used (`content`/`sensitive_content` as text, invalid UTF-8
//!   replaced; `content_base64` as base64) with the hashes of the new bytes, so the plan shows
//!   what changed on disk and replaces the file to restore the configured content. (hashicorp/
//!   local instead drops the object from state, which plans a create with no visible cause.)
//!   A file made from `source` whose bytes changed is reported gone, as hashicorp/local does:
//!   there is no argument to show the new bytes in.
//! - `content_base64` must be valid standard base64; permissions 3 or 4 octal digits at most
//!   `0777`.
//! - relative `filename`s (and `source`s) are relative to the working directory, as in
//!   Terraform; state keeps the path as written.

use super::host::Host;
use super::schema_util::{self, exactly_one_of, get_str, need_str, TypeSchema};
use super::{
    ApplyRequest, ApplyResponse, Configured, Planned, Provider, ProviderError, ProviderResult,
};
use crate::addr::Mode;
use crate::diag::{Diagnostic, Diagnostics};
use crate::schema::ProviderSchema;
use crate::value::ValueMap;
use crate::value::{Type, Value};
use async_trait::async_trait;
use base64::Engine as _;
use md5::Md5;
use sha1::Sha1;
use sha2::{Digest, Sha256, Sha512};
use std::collections::BTreeMap;
use std::sync::Arc;

const PACKAGE: &str = "local";
const FILE: &str = "local_file";
const SENSITIVE_FILE: &str = "local_sensitive_file";
const B64: base64::engine::GeneralPurpose = base64::engine::general_purpose::STANDARD;

/// The hash attributes every file resource and data source computes.
const HASHES: [(&str, &str); 6] = [
    ("content_md5", "MD5 of the content, hex."),
    ("content_sha1", "SHA-1 of the content, hex."),
    ("content_sha256", "SHA-256 of the content, hex."),
    ("content_base64sha256", "SHA-256 of the content, base64."),
    ("content_sha512", "SHA-512 of the content, hex."),
    ("content_base64sha512", "SHA-512 of the content, base64."),
];

/// The `local` provider package (no configuration).
pub(crate) struct LocalProvider {
    host: Host,
    schema: ProviderSchema,
    types: Arc<BTreeMap<(Mode, &'static str), TypeSchema>>,
}

fn with_hashes(mut s: TypeSchema) -> TypeSchema {
    for (name, desc) in HASHES {
        s = s.computed(name, Type::String, desc);
    }
    s.computed("id", Type::String, "SHA-1 of the content, hex.")
}

fn file_schema(sensitive: bool) -> TypeSchema {
    let perm = if sensitive { "0700" } else { "0777" };
    let mut s = TypeSchema::new("A file on the local machine.")
        .required("filename", Type::String, "Path of the file to write.")
        .force_new()
        .optional("content", Type::String, "Content to write, as UTF-8 text.")
        .force_new();
    if sensitive {
        s = s.sensitive();
    } else {
        s = s
            .optional(
                "sensitive_content",
                Type::String,
                "Content to write, kept out of plan output (deprecated).",
            )
            .force_new()
            .sensitive();
    }
    s = s
        .optional("content_base64", Type::String, "Content to write, base64.")
        .force_new()
        .optional("source", Type::String, "Path of a file to copy.")
        .force_new()
        .optional("file_permission", Type::String, "Permissions of the file.")
        .force_new()
        .default(Value::string(perm))
        .optional(
            "directory_permission",
            Type::String,
            "Permissions of directories created.",
        )
        .force_new()
        .default(Value::string(perm));
    with_hashes(s)
}

fn data_schema(sensitive: bool) -> TypeSchema {
    let mut s = TypeSchema::new("Reads a file on the local machine.")
        .required("filename", Type::String, "Path of the file to read.")
        .computed("content", Type::String, "The content, as UTF-8 text.");
    if sensitive {
        s = s.sensitive();
    }
    s = s.computed("content_base64", Type::String, "The content, base64.");
    if sensitive {
        s = s.sensitive();
    }
    with_hashes(s)
}

impl LocalProvider {
    pub(crate) fn new(host: Host) -> LocalProvider {
        let types: BTreeMap<(Mode, &'static str), TypeSchema> = [
            ((Mode::Managed, FILE), file_schema(false)),
            ((Mode::Managed, SENSITIVE_FILE), file_schema(true)),
            ((Mode::Data, FILE), data_schema(false)),
            ((Mode::Data, SENSITIVE_FILE), data_schema(true)),
        ]
        .into();
        let pick = |mode: Mode| {
            types
                .iter()
                .filter(|((m, _), _)| *m == mode)
                .map(|((_, t), s)| (t.to_string(), s.block.clone()))
                .collect()
        };
        let schema = ProviderSchema {
            provider: Default::default(),
            resources: pick(Mode::Managed),
            data_sources: pick(Mode::Data),
            ephemeral_resources: Default::default(),
        };
        LocalProvider {
            host,
            schema,
            types: Arc::new(types),
        }
    }
}

fn find<'a>(
    types: &'a BTreeMap<(Mode, &'static str), TypeSchema>,
    mode: Mode,
    type_: &str,
) -> Option<&'a TypeSchema> {
    types
        .iter()
        .find(|((m, t), _)| *m == mode && *t == type_)
        .map(|(_, s)| s)
}

/// The content arguments, in the order `exactly_one_of` names them.
fn content_args(type_: &str) -> &'static [&'static str] {
    if type_ == SENSITIVE_FILE {
        &["content", "content_base64", "source"]
    } else {
        &["content", "sensitive_content", "content_base64", "source"]
    }
}

fn check_permission(c: &ValueMap, name: &str) -> Diagnostics {
    let Some(p) = get_str(c, name) else {
        return Diagnostics::new();
    };
    let ok = (3..=4).contains(&p.len())
        && p.bytes().all(|b| (b'0'..=b'7').contains(&b))
        && u32::from_str_radix(p, 8).is_ok_and(|m| m <= 0o777);
    if ok {
        return Diagnostics::new();
    }
    Diagnostic::error(
        "Invalid attribute value",
        format!(
            "Argument \"{name}\" must be 3 or 4 octal digits of at most 0777 (like \"0644\"), \
             got: {p:?}."
        ),
    )
    .into()
}

#[async_trait]
impl Provider for LocalProvider {
    fn package(&self) -> &str {
        PACKAGE
    }
    fn schema(&self) -> &ProviderSchema {
        &self.schema
    }
    fn validate(&self, mode: Mode, type_: &str, config: &Value) -> Diagnostics {
        let Some(schema) = find(&self.types, mode, type_) else {
            return schema_util::unsupported_type(PACKAGE, type_);
        };
        let mut diags = schema.check(config);
        let Ok(c) = schema.conform(config) else {
            return diags;
        };
        if mode == Mode::Managed {
            diags.extend(exactly_one_of(&c, content_args(type_)));
            diags.extend(check_permission(&c, "file_permission"));
            diags.extend(check_permission(&c, "directory_permission"));
            if let Some(b) = get_str(&c, "content_base64") {
                if let Err(e) = B64.decode(b) {
                    diags.push(Diagnostic::error(
                        "Invalid attribute value",
                        format!("Argument \"content_base64\" is not valid base64: {e}."),
                    ));
                }
            }
        }
        diags
    }
    async fn configure(&self, _config: &Value) -> ProviderResult<Arc<dyn Configured>> {
        Ok(Arc::new(LocalInstance {
            host: self.host.clone(),
            types: self.types.clone(),
        }))
    }
}

struct LocalInstance {
    host: Host,
    types: Arc<BTreeMap<(Mode, &'static str), TypeSchema>>,
}

/// The computed attributes of some bytes: `id` and the hashes.
fn hashes(bytes: &[u8]) -> ValueMap {
    fn hex(d: &[u8]) -> String {
        d.iter().map(|b| format!("{b:02x}")).collect()
    }
    let sha1 = hex(&Sha1::digest(bytes));
    let sha256 = Sha256::digest(bytes);
    let sha512 = Sha512::digest(bytes);
    [
        ("id", sha1.clone()),
        ("content_md5", hex(&Md5::digest(bytes))),
        ("content_sha1", sha1),
        ("content_sha256", hex(&sha256)),
        ("content_base64sha256", B64.encode(sha256)),
        ("content_sha512", hex(&sha512)),
        ("content_base64sha512", B64.encode(sha512)),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), Value::string(v)))
    .collect()
}

impl LocalInstance {
    fn schema(&self, mode: Mode, type_: &str) -> ProviderResult<&TypeSchema> {
        find(&self.types, mode, type_).ok_or_else(|| {
            let kind = if mode == Mode::Managed {
                "resource"
            } else {
                "data source"
            };
            schema_util::unknown_type(PACKAGE, kind, type_)
        })
    }

    /// The bytes a configuration asks for.
    async fn wanted_bytes(&self, c: &ValueMap) -> ProviderResult<Vec<u8>> {
        if let Some(s) = get_str(c, "content").or_else(|| get_str(c, "sensitive_content")) {
            return Ok(s.as_bytes().to_vec());
        }
        if let Some(b) = get_str(c, "content_base64") {
            return B64.decode(b).map_err(|e| {
                ProviderError(format!(
                    "local_file: content_base64 is not valid base64: {e}"
                ))
            });
        }
        if let Some(src) = get_str(c, "source") {
            let path = self.host.resolve(src);
            return tokio::fs::read(&path).await.map_err(|e| {
                ProviderError(format!("local_file: cannot read source file {src:?}: {e}"))
            });
        }
        Err(ProviderError(
            "local_file: one of content, sensitive_content, content_base64 or source must be set"
                .into(),
        ))
    }

    async fn write(&self, type_: &str, planned: &Value) -> ProviderResult<Value> {
        use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
        let schema = self.schema(Mode::Managed, type_)?;
        let mut c = schema.conform(planned)?;
        let filename = need_str(&c, "filename")?.to_string();
        let bytes = self.wanted_bytes(&c).await?;
        let mode = |name: &str| {
            get_str(&c, name)
                .and_then(|p| u32::from_str_radix(p, 8).ok())
                .unwrap_or(0o777)
        };
        let (file_mode, dir_mode) = (mode("file_permission"), mode("directory_permission"));
        let path = self.host.resolve(&filename);
        let ctx = |e: std::io::Error| {
            ProviderError(format!("local_file: cannot write {filename:?}: {e}"))
        };
        // Plain blocking file I/O, on the blocking pool.
        let p = path.clone();
        tokio::task::spawn_blocking(move || -> std::io::Result<()> {
            if let Some(dir) = p.parent().filter(|d| !d.as_os_str().is_empty()) {
                std::fs::DirBuilder::new()
                    .recursive(true)
                    .mode(dir_mode)
                    .create(dir)?;
            }
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .mode(file_mode)
                .open(&p)?;
            std::io::Write::write_all(&mut f, &bytes)?;
            Ok(())
        })
        .await
        .map_err(|e| ProviderError(format!("local_file: write failed: {e}")))?
        .map_err(ctx)?;
        let written = tokio::fs::read(&path).await.map_err(ctx)?;
        c.extend(hashes(&written));
        Ok(Value::Object(c))
    }

    async fn delete(&self, type_: &str, prior: &Value) -> ProviderResult<()> {
        let c = self.schema(Mode::Managed, type_)?.conform(prior)?;
        let filename = need_str(&c, "filename")?;
        match tokio::fs::remove_file(self.host.resolve(filename)).await {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(ProviderError(format!(
                "local_file: cannot delete {filename:?}: {e}"
            ))),
        }
    }
}

#[async_trait]
impl Configured for LocalInstance {
    fn plan(&self, type_: &str, prior: Option<&Value>, config: &Value) -> ProviderResult<Planned> {
        self.schema(Mode::Managed, type_)?.plan(prior, config)
    }

    async fn apply(&self, request: ApplyRequest) -> ApplyResponse {
        match request {
            ApplyRequest::Create { type_, planned, .. } => match self.write(&type_, &planned).await
            {
                Ok(v) => ApplyResponse {
                    new_state: Some(v),
                    error: None,
                },
                Err(e) => ApplyResponse {
                    new_state: None,
                    error: Some(e),
                },
            },
            // Every argument forces replacement, so an update only rewrites the same file.
            ApplyRequest::Update {
                type_,
                prior,
                planned,
            } => match self.write(&type_, &planned).await {
                Ok(v) => ApplyResponse {
                    new_state: Some(v),
                    error: None,
                },
                Err(e) => ApplyResponse {
                    new_state: Some(prior),
                    error: Some(e),
                },
            },
            ApplyRequest::Delete { type_, prior } => match self.delete(&type_, &prior).await {
                Ok(()) => ApplyResponse {
                    new_state: None,
                    error: None,
                },
                Err(e) => ApplyResponse {
                    new_state: Some(prior),
                    error: Some(e),
                },
            },
        }
    }

    async fn read(&self, type_: &str, state: &Value) -> ProviderResult<Option<Value>> {
        let mut c = self.schema(Mode::Managed, type_)?.conform(state)?;
        let filename = need_str(&c, "filename")?.to_string();
        let bytes = match tokio::fs::read(self.host.resolve(&filename)).await {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => {
                return Err(ProviderError(format!(
                    "local_file: cannot read {filename:?}: {e}"
                )))
            }
        };
        let now = hashes(&bytes);
        if get_str(&c, "id") == now["id"].as_str() {
            return Ok(Some(Value::Object(c)));
        }
        // Drift: show the new bytes in the argument the configuration used.
        let text = || Value::string(String::from_utf8_lossy(&bytes));
        if !c["content"].is_null() {
            c.insert("content".into(), text());
        } else if c.get("sensitive_content").is_some_and(|v| !v.is_null()) {
            c.insert("sensitive_content".into(), text());
        } else if !c["content_base64"].is_null() {
            c.insert("content_base64".into(), Value::string(B64.encode(&bytes)));
        } else {
            return Ok(None);
        }
        c.extend(now);
        Ok(Some(Value::Object(c)))
    }

    async fn read_data(&self, type_: &str, config: &Value) -> ProviderResult<Value> {
        let schema = self.schema(Mode::Data, type_)?;
        let c = schema.conform(config)?;
        let filename = need_str(&c, "filename")?;
        let bytes = tokio::fs::read(self.host.resolve(filename))
            .await
            .map_err(|e| ProviderError(format!("{type_}: cannot read file {filename:?}: {e}")))?;
        let mut computed = hashes(&bytes);
        computed.insert(
            "content".into(),
            Value::string(String::from_utf8_lossy(&bytes)),
        );
        computed.insert("content_base64".into(), Value::string(B64.encode(&bytes)));
        Ok(schema_util::data_result(schema, &c, computed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::testkit::{assert_agrees, attr, create, obj, s};
    use std::os::unix::fs::PermissionsExt;

    fn setup() -> (tempfile::TempDir, LocalProvider) {
        let dir = tempfile::tempdir().expect("temp dir");
        let p = LocalProvider::new(Host::at(dir.path()));
        (dir, p)
    }

    #[tokio::test]
    async fn create_writes_relative_to_the_working_directory_with_hashes() {
        let (dir, provider) = setup();
        let p = provider.configure(&obj(&[])).await.expect("configure");
        let cfg = obj(&[
            ("filename", s("sub/dir/hello.txt")),
            ("content", s("hello\n")),
            ("file_permission", s("0640")),
            ("directory_permission", s("0750")),
        ]);
        let (plan, st) = create(&*p, FILE, &cfg).await;
        assert!(plan.planned.get("id").is_some_and(Value::is_unknown));
        assert_agrees(&plan.planned, &st);
        let path = dir.path().join("sub/dir/hello.txt");
        assert_eq!(std::fs::read_to_string(&path).expect("file"), "hello\n");
        let mode = std::fs::metadata(&path).expect("meta").permissions().mode() & 0o777;
        assert_eq!(
            mode & !0o022,
            0o640 & !0o022,
            "umask applies, as in Terraform"
        );
        assert_eq!(attr(&st, "id"), "f572d396fae9206628714fb2ce00f72e94f2258f");
        assert_eq!(attr(&st, "content_sha1"), attr(&st, "id"));
        assert_eq!(attr(&st, "content_md5"), "b1946ac92492d2347c6235b4d2611184");
        assert_eq!(
            attr(&st, "content_sha256"),
            "5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03"
        );
        assert_eq!(
            attr(&st, "content_base64sha256"),
            "WJG1tSLV3whtD/CxEPvZ0hu0/HFjrzTQgoai6Eb2vgM="
        );
        assert_eq!(p.read(FILE, &st).await, Ok(Some(st.clone())));
        // An unchanged configuration plans no change; defaults fill permissions.
        assert_eq!(p.plan(FILE, Some(&st), &cfg).expect("plan").planned, st);
        let (_, d) = create(
            &*p,
            FILE,
            &obj(&[("filename", s("d.txt")), ("content", s(""))]),
        )
        .await;
        assert_eq!(attr(&d, "file_permission"), "0777");
        assert_eq!(attr(&d, "directory_permission"), "0777");
    }

    #[tokio::test]
    async fn drift_on_disk_shows_in_state_and_forces_replacement() {
        let (dir, provider) = setup();
        let p = provider.configure(&obj(&[])).await.expect("configure");
        let cfg = obj(&[("filename", s("f.txt")), ("content", s("one"))]);
        let (_, st) = create(&*p, FILE, &cfg).await;
        std::fs::write(dir.path().join("f.txt"), "two").expect("edit");
        let now = p.read(FILE, &st).await.expect("read").expect("exists");
        assert_eq!(attr(&now, "content"), "two");
        assert_eq!(attr(&now, "id"), hex_sha1(b"two"));
        let plan = p.plan(FILE, Some(&now), &cfg).expect("plan");
        assert_eq!(plan.requires_replace, ["content"]);

        let b64 = obj(&[("filename", s("g.bin")), ("content_base64", s("AAEC"))]);
        let (_, st) = create(&*p, FILE, &b64).await;
        assert_eq!(
            std::fs::read(dir.path().join("g.bin")).expect("file"),
            [0, 1, 2]
        );
        std::fs::write(dir.path().join("g.bin"), [9u8]).expect("edit");
        let now = p.read(FILE, &st).await.expect("read").expect("exists");
        assert_eq!(attr(&now, "content_base64"), "CQ==");
        assert!(now.get("content").is_some_and(Value::is_null));

        std::fs::remove_file(dir.path().join("g.bin")).expect("rm");
        assert_eq!(p.read(FILE, &st).await, Ok(None), "deleted on disk: gone");
        let r = p
            .apply(ApplyRequest::Delete {
                type_: FILE.into(),
                prior: st,
            })
            .await;
        assert_eq!(
            (r.new_state, r.error),
            (None, None),
            "deleting a gone file is fine"
        );
    }

    fn hex_sha1(b: &[u8]) -> String {
        Sha1::digest(b).iter().map(|x| format!("{x:02x}")).collect()
    }

    #[tokio::test]
    async fn source_copies_and_sensitive_file_defaults() {
        let (dir, provider) = setup();
        std::fs::write(dir.path().join("src.txt"), "copied").expect("write");
        let p = provider.configure(&obj(&[])).await.expect("configure");
        let (_, st) = create(
            &*p,
            FILE,
            &obj(&[("filename", s("dst.txt")), ("source", s("src.txt"))]),
        )
        .await;
        assert_eq!(
            std::fs::read_to_string(dir.path().join("dst.txt")).expect("f"),
            "copied"
        );
        assert_eq!(attr(&st, "id"), hex_sha1(b"copied"));
        let (_, st) = create(
            &*p,
            SENSITIVE_FILE,
            &obj(&[("filename", s("secret")), ("content", s("pw"))]),
        )
        .await;
        assert_eq!(attr(&st, "file_permission"), "0700");
        assert!(provider.schema().resources[SENSITIVE_FILE].attributes["content"].sensitive);
    }

    #[tokio::test]
    async fn data_source_reads_a_file() {
        let (dir, provider) = setup();
        std::fs::write(dir.path().join("in.txt"), "data").expect("write");
        let p = provider.configure(&obj(&[])).await.expect("configure");
        let v = p
            .read_data(FILE, &obj(&[("filename", s("in.txt"))]))
            .await
            .expect("read");
        assert_eq!(attr(&v, "content"), "data");
        assert_eq!(attr(&v, "content_base64"), "ZGF0YQ==");
        assert_eq!(attr(&v, "id"), hex_sha1(b"data"));
        assert_eq!(attr(&v, "filename"), "in.txt");
        let e = p
            .read_data(FILE, &obj(&[("filename", s("missing.txt"))]))
            .await
            .expect_err("missing");
        assert!(
            e.message
                .starts_with("local_file: cannot read file \"missing.txt\": "),
            "{e}"
        );
    }

    #[test]
    fn validation_messages() {
        let (_dir, p) = setup();
        let msgs = |c: Value| -> Vec<String> {
            p.validate(Mode::Managed, FILE, &c)
                .iter()
                .map(|d| d.detail.clone())
                .collect()
        };
        assert!(msgs(obj(&[("filename", s("f")), ("content", s("x"))])).is_empty());
        assert_eq!(
            msgs(obj(&[("filename", s("f"))])),
            [
                "Exactly one of these arguments must be set: content, sensitive_content, \
              content_base64, source. None is."
            ]
        );
        assert_eq!(
            msgs(obj(&[
                ("filename", s("f")),
                ("content", s("x")),
                ("content_base64", Value::Unknown(Type::String)),
            ])),
            [
                "Exactly one of these arguments must be set: content, sensitive_content, \
              content_base64, source. These are all set: content, content_base64."
            ]
        );
        assert_eq!(
            msgs(obj(&[
                ("filename", s("f")),
                ("content", s("x")),
                ("file_permission", s("0888")),
            ])),
            [
                "Argument \"file_permission\" must be 3 or 4 octal digits of at most 0777 (like \
              \"0644\"), got: \"0888\"."
            ]
        );
        assert_eq!(
            msgs(obj(&[("filename", s("f")), ("content_base64", s("%%"))])).len(),
            1
        );
    }
}
