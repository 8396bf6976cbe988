//! The S3 store of the event log (a [`Storage`]): state kept in a bucket (`backend "s3"`),
//! beside — never in place of — Terraform's own objects. Sequence numbers, runs, the fold and
//! checkpoints are the log core's (`log.rs`); this file keeps records, the lineage and
//! checkpoints as objects, and the lock.
//!
//! Objects, for the workspace's state key `K` (`key`, or `<workspace_key_prefix>/<ws>/<key>`
//! as Terraform names it):
//!
//! ```text
//! K.tflock                        the lock, in Terraform's use_lockfile layout
//! K.cairn/lineage                 the state's lineage
//! K.cairn/events/<first seq:020>  one batch of records per durable commit (append-only)
//! K.cairn/checkpoints/<seq:020>   a derived cache (checkpoint.rs format)
//! K.cairn/head                    the log's head (chain.rs), rewritten after each batch: a
//!                                 batch object removed or replaced by hand is an error
//! ```
//!
//! **Append-only, one writer per event.** A flush writes the records appended since the last
//! one as one object named by its first sequence number, with a conditional put
//! (`If-None-Match: *`): if another writer already wrote a batch starting at that number the
//! server refuses (412) and this writer fails cleanly, naming the event; it never overwrites.
//! Batches start where the previous one ended, so a reader sees whole commits only.
//!
//! **Locking.** A writer creates `K.tflock` with a conditional put, holding JSON as Terraform's
//! S3 backend writes it (`ID`, `Operation`, `Info`, `Who`, `Version`, `Created`, `Path`), so a
//! Terraform run with `use_lockfile = true` on the same key and a Cairn run never both
//! write. The lock is deleted when the store is dropped; a lock left by a killed run is
//! removed with `cairn force-unlock ID` (or Terraform's).
//!
//! **Faults.** Requests are retried (connection errors, 5xx, 409) for about ten seconds (one
//! request may take 30); a retried conditional put that finds its own bytes already there
//! succeeded. A flush that still fails poisons the store: every later flush fails, so no new
//! operation starts, and the events not known durable — among them the outcomes of provider
//! calls that finished — go to the local journal `<state dir>/s3-journal` (`journal.rs`, as
//! PostgreSQL's), which the next writer's open writes to the bucket before anything else.
//!
//! All I/O runs on a one-thread runtime the store owns, callable from any thread.

use crate::backend_config::{AssumeRole, CredSource, S3Config, WebIdentity};
use crate::checkpoint;
use crate::error::{LockHolder, StateError};
use crate::log::{current_user, decode_record, now_ms, LogCore, OpenOptions, Peek};
use crate::snapshot::Snapshot;
use crate::storage::{Flusher, Records, Storage};
use md5::Digest;
use rusty_s3::{Bucket, Credentials, S3Action, UrlStyle};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long a signed request stays valid.
const SIGNED_FOR: Duration = Duration::from_secs(900);
/// How long requests are retried after connection errors and server faults.
const RETRY_FOR: Duration = Duration::from_secs(10);
/// How long one request may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// The first bytes of an event batch object.
const BATCH_MAGIC: &[u8; 8] = b"CAIRNEV1";

/// What one request brought back: status and body.
type Reply = (u16, Vec<u8>);
/// A record: its seq and bytes.
type Record = (u64, Vec<u8>);
/// A batch object read: its first seq and its records.
type Batch = (u64, Vec<Record>);
/// A record as `scan` hands it out: its key (a seq, or an object that is not one) and bytes.
type KeyedRecord = (crate::storage::Key, Vec<u8>);

/// A bucket, signed requests to it, and the runtime they run on.
pub(crate) struct Client {
    rt: Option<tokio::runtime::Runtime>,
    http: reqwest::Client,
    bucket: Bucket,
    /// The credentials requests are signed with, and when they expire (temporary ones).
    creds: Mutex<(Credentials, Option<jiff::Timestamp>)>,
    /// Where the credentials come from, and `assume_role` on top of them.
    source: Source,
    /// Headers put on every object written (signed): server-side encryption, SSE-C, ACL.
    put_headers: Vec<(&'static str, String)>,
    /// Headers sent with every object read (signed): SSE-C's.
    get_headers: Vec<(&'static str, String)>,
    describe: String,
}

/// What getting the credentials again (when they near their expiry) takes.
struct Source {
    base: CredSource,
    /// `assume_role`, assumed with the base credentials.
    role: Option<AssumeRole>,
    sts: url::Url,
    region: String,
}

/// Credentials and when they expire (none: they do not).
type Expiring = (Credentials, Option<jiff::Timestamp>);

/// Temporary credentials are renewed this long before they expire.
const RENEW_BEFORE: Duration = Duration::from_secs(300);

impl Drop for Client {
    fn drop(&mut self) {
        if let Some(rt) = self.rt.take() {
            rt.shutdown_background();
        }
    }
}

fn is_ip(host: &str) -> bool {
    host.parse::<std::net::IpAddr>().is_ok() || host.starts_with('[')
}

impl Client {
    pub(crate) fn new(cfg: &S3Config) -> Result<Client, StateError> {
        let fail = |m: String| StateError::Backend {
            message: format!("s3 backend: {m}"),
        };
        let endpoint: url::Url = cfg.endpoint.parse().map_err(|e| {
            fail(format!(
                "the endpoint {:?} is not a URL ({e})",
                cfg.endpoint
            ))
        })?;
        // A bucket cannot be a host name under an IP address: such servers take paths.
        let style = if cfg.path_style || endpoint.host_str().is_some_and(is_ip) {
            UrlStyle::Path
        } else {
            UrlStyle::VirtualHost
        };
        let bucket = Bucket::new(endpoint, style, cfg.bucket.clone(), cfg.region.clone())
            .map_err(|e| fail(format!("bucket {:?}: {e}", cfg.bucket)))?;
        let mut put_headers = Vec::new();
        let mut get_headers = Vec::new();
        if let Some(kms) = &cfg.kms_key_id {
            put_headers.push(("x-amz-server-side-encryption", "aws:kms".to_string()));
            put_headers.push(("x-amz-server-side-encryption-aws-kms-key-id", kms.clone()));
        } else if let Some(key) = &cfg.sse_customer_key {
            // SSE-C: the key goes with every read and write of an object, as Terraform's.
            use base64::Engine;
            let b64 = base64::engine::general_purpose::STANDARD;
            let raw = b64
                .decode(key)
                .map_err(|e| fail(format!("sse_customer_key: {e}")))?;
            let md5 = b64.encode(md5::Md5::digest(&raw));
            for h in [&mut put_headers, &mut get_headers] {
                h.push((
                    "x-amz-server-side-encryption-customer-algorithm",
                    "AES256".to_string(),
                ));
                h.push(("x-amz-server-side-encryption-customer-key", key.clone()));
                h.push(("x-amz-server-side-encryption-customer-key-md5", md5.clone()));
            }
        } else if cfg.encrypt {
            put_headers.push(("x-amz-server-side-encryption", "AES256".to_string()));
        }
        if let Some(acl) = &cfg.acl {
            put_headers.push(("x-amz-acl", acl.clone()));
        }
        let source = Source {
            base: cfg.creds.clone(),
            role: cfg.assume_role.as_deref().cloned(),
            sts: cfg.sts_endpoint.parse().map_err(|e| {
                fail(format!(
                    "the STS endpoint {:?} is not a URL ({e})",
                    cfg.sts_endpoint
                ))
            })?,
            region: cfg.region.clone(),
        };
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("cairn-s3")
            .enable_all()
            .build()
            .map_err(|e| fail(e.to_string()))?;
        let http = match reqwest::Client::builder()
            .timeout(REQUEST_TIMEOUT)
            .connect_timeout(Duration::from_secs(5))
            .tls_danger_accept_invalid_certs(cfg.insecure)
            .build()
        {
            Ok(h) => h,
            Err(e) => {
                // Never drop a runtime in place: the caller may be on one (see pg_store.rs).
                rt.shutdown_background();
                return Err(fail(e.to_string()));
            }
        };
        let client = Client {
            rt: Some(rt),
            http,
            bucket,
            creds: Mutex::new((Credentials::new("", ""), None)),
            source,
            put_headers,
            get_headers,
            describe: cfg.describe(),
        };
        // Got now (the role assumed, the process run, …), so that credentials refused
        // are the first error, not a failed read.
        client.refresh()?;
        Ok(client)
    }

    /// Gets the credentials afresh: the base ones (see [`CredSource`]), then `assume_role`
    /// with them.
    fn refresh(&self) -> Result<(), StateError> {
        let base = self.fetch(&self.source.base)?;
        let got = match &self.source.role {
            Some(role) => self.assume_role(role, &base.0)?,
            None => base,
        };
        *self.creds.lock().expect("s3 credentials") = got;
        Ok(())
    }

    /// The credentials of `src` (calling STS, the SSO portal or a process as it says).
    fn fetch(&self, src: &CredSource) -> Result<Expiring, StateError> {
        let fail = |m: String| StateError::Backend {
            message: format!(
                "s3 backend: cannot get credentials from {}: {m}",
                src.describe()
            ),
        };
        match src {
            CredSource::Static { key, secret, token } => Ok((
                match token {
                    Some(t) => Credentials::new_with_token(key, secret, t),
                    None => Credentials::new(key, secret),
                },
                None,
            )),
            CredSource::ProfileRole { role, source, .. } => {
                let base = self.fetch(source)?;
                self.assume_role(role, &base.0)
            }
            CredSource::WebIdentity(w) => self.assume_web_identity(w),
            CredSource::Process { command, .. } => run_credential_process(command).map_err(fail),
            CredSource::Sso(sso) => {
                let token = sso_cached_token(sso).map_err(fail)?;
                let mut url: url::Url = format!("{}/federation/credentials", sso.endpoint)
                    .parse()
                    .map_err(|e| fail(format!("the SSO endpoint is not a URL ({e})")))?;
                url.query_pairs_mut()
                    .append_pair("account_id", &sso.account_id)
                    .append_pair("role_name", &sso.role_name);
                let reply = self
                    .send(
                        reqwest::Method::GET,
                        url,
                        vec![("x-amz-sso_bearer_token".into(), token)],
                        None,
                    )
                    .map_err(|e| fail(format!("the SSO portal {}: {e}", sso.endpoint)))?;
                if reply.0 != 200 {
                    return Err(fail(format!(
                        "the SSO portal {} answered HTTP {}: {}{}",
                        sso.endpoint,
                        reply.0,
                        json_error(&reply.1),
                        if reply.0 == 401 {
                            format!(" (run `aws sso login --profile {}`)", sso.profile)
                        } else {
                            String::new()
                        }
                    )));
                }
                sso_credentials(&reply.1).map_err(fail)
            }
        }
    }

    /// One STS call (a form POST): signed with `signer`, or unsigned (web identity). The
    /// temporary credentials it answers with.
    fn sts(
        &self,
        what: &str,
        body: Vec<u8>,
        signer: Option<&Credentials>,
    ) -> Result<Expiring, StateError> {
        let src = &self.source;
        let headers = match signer {
            Some(c) => sigv4_post(&src.sts, &src.region, "sts", c, &body),
            None => vec![(
                "content-type".into(),
                "application/x-www-form-urlencoded; charset=utf-8".into(),
            )],
        };
        let what = format!("{what} (STS {})", src.sts);
        let fail = |m: String| StateError::Backend {
            message: format!("s3 backend: cannot {what}: {m}"),
        };
        let reply = self
            .send(reqwest::Method::POST, src.sts.clone(), headers, Some(body))
            .map_err(fail)?;
        if reply.0 != 200 {
            return Err(fail(format!("HTTP {}: {}", reply.0, s3_error(&reply.1))));
        }
        let text = String::from_utf8_lossy(&reply.1);
        let tag = |t: &str| xml_tag(&text, t);
        let (Some(key), Some(secret), Some(token)) = (
            tag("AccessKeyId"),
            tag("SecretAccessKey"),
            tag("SessionToken"),
        ) else {
            return Err(fail("STS answered without credentials".into()));
        };
        let expires = tag("Expiration").and_then(|e| e.parse::<jiff::Timestamp>().ok());
        Ok((Credentials::new_with_token(key, secret, token), expires))
    }

    /// STS AssumeRole with `base`: the role's temporary credentials.
    fn assume_role(&self, spec: &AssumeRole, base: &Credentials) -> Result<Expiring, StateError> {
        let mut form = url::form_urlencoded::Serializer::new(String::new());
        form.append_pair("Action", "AssumeRole")
            .append_pair("Version", "2011-06-15")
            .append_pair("RoleArn", &spec.role_arn)
            .append_pair("RoleSessionName", &spec.session_name);
        if let Some(d) = spec.duration_secs {
            form.append_pair("DurationSeconds", &d.to_string());
        }
        if let Some(x) = &spec.external_id {
            form.append_pair("ExternalId", x);
        }
        if let Some(p) = &spec.policy {
            form.append_pair("Policy", p);
        }
        for (i, arn) in spec.policy_arns.iter().enumerate() {
            form.append_pair(&format!("PolicyArns.member.{}.arn", i + 1), arn);
        }
        for (i, (k, v)) in spec.tags.iter().enumerate() {
            form.append_pair(&format!("Tags.member.{}.Key", i + 1), k);
            form.append_pair(&format!("Tags.member.{}.Value", i + 1), v);
        }
        for (i, k) in spec.transitive_tag_keys.iter().enumerate() {
            form.append_pair(&format!("TransitiveTagKeys.member.{}", i + 1), k);
        }
        if let Some(s) = &spec.source_identity {
            form.append_pair("SourceIdentity", s);
        }
        let what = format!("assume the role {}", spec.role_arn);
        self.sts(&what, form.finish().into_bytes(), Some(base))
    }

    /// STS AssumeRoleWithWebIdentity (unsigned: the token is the credential), its token read
    /// from its file at each call (the file is rotated by whoever issues it).
    fn assume_web_identity(&self, w: &WebIdentity) -> Result<Expiring, StateError> {
        let what = format!("assume the role {} with a web identity", w.role_arn);
        let token = match (&w.token, &w.token_file) {
            (Some(t), _) => t.clone(),
            (None, Some(f)) => std::fs::read_to_string(f)
                .map_err(|e| StateError::Backend {
                    message: format!(
                        "s3 backend: cannot {what}: cannot read the web identity token file {}: {e}",
                        f.display()
                    ),
                })?
                .trim()
                .to_string(),
            (None, None) => String::new(),
        };
        let mut form = url::form_urlencoded::Serializer::new(String::new());
        form.append_pair("Action", "AssumeRoleWithWebIdentity")
            .append_pair("Version", "2011-06-15")
            .append_pair("RoleArn", &w.role_arn)
            .append_pair("RoleSessionName", &w.session_name)
            .append_pair("WebIdentityToken", &token);
        if let Some(d) = w.duration_secs {
            form.append_pair("DurationSeconds", &d.to_string());
        }
        if let Some(p) = &w.policy {
            form.append_pair("Policy", p);
        }
        for (i, arn) in w.policy_arns.iter().enumerate() {
            form.append_pair(&format!("PolicyArns.member.{}.arn", i + 1), arn);
        }
        self.sts(&what, form.finish().into_bytes(), None)
    }

    /// The credentials to sign with now (temporary ones are got again before they expire).
    fn creds(&self) -> Result<Credentials, StateError> {
        let renew = {
            let c = self.creds.lock().expect("s3 credentials");
            c.1.is_some_and(|at| {
                let left = at.duration_since(jiff::Timestamp::now());
                left.as_secs() < RENEW_BEFORE.as_secs() as i64
            })
        };
        if renew {
            self.refresh()?;
        }
        Ok(self.creds.lock().expect("s3 credentials").0.clone())
    }

    /// Sends one request (retried on connection errors, 5xx and 409 for [`RETRY_FOR`]) and
    /// waits for its reply, from any thread.
    fn send(
        &self,
        method: reqwest::Method,
        url: url::Url,
        headers: Vec<(String, String)>,
        body: Option<Vec<u8>>,
    ) -> Result<Reply, String> {
        let http = self.http.clone();
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        let rt = self.rt.as_ref().expect("runtime until drop");
        rt.spawn(async move {
            let deadline = Instant::now() + RETRY_FOR;
            let mut wait = Duration::from_millis(50);
            let result = loop {
                let mut req = http.request(method.clone(), url.as_str());
                for (k, v) in &headers {
                    req = req.header(k, v);
                }
                if let Some(b) = &body {
                    req = req.header("content-length", b.len()).body(b.clone());
                }
                let reply = match req.send().await {
                    Ok(r) => {
                        let status = r.status().as_u16();
                        match r.bytes().await {
                            Ok(b) => Ok((status, b.to_vec())),
                            Err(e) => Err(error_chain(e)),
                        }
                    }
                    Err(e) => Err(error_chain(e)),
                };
                let again = match &reply {
                    Ok((s, _)) => *s >= 500 || *s == 409,
                    Err(_) => true,
                };
                if !again || Instant::now() + wait > deadline {
                    break reply;
                }
                tokio::time::sleep(wait).await;
                wait = (wait * 2).min(Duration::from_secs(2));
            };
            let _ = tx.send(result);
        });
        rx.recv()
            .map_err(|_| "the request task stopped".to_string())?
    }

    fn io(&self, what: &str, key: &str, message: impl std::fmt::Display) -> StateError {
        StateError::Io {
            context: format!(
                "cannot {what} s3://{}/{key} at {}",
                self.bucket.name(),
                self.bucket.base_url().origin().ascii_serialization()
            ),
            message: message.to_string(),
        }
    }

    fn refused(&self, what: &str, key: &str, (status, body): &Reply) -> StateError {
        self.io(what, key, format!("HTTP {status}: {}", s3_error(body)))
    }

    /// The object `key` (`None`: there is none).
    pub(crate) fn get(&self, key: &str) -> Result<Option<Vec<u8>>, StateError> {
        let creds = self.creds()?;
        let mut action = rusty_s3::actions::GetObject::new(&self.bucket, Some(&creds), key);
        for (k, v) in &self.get_headers {
            action.headers_mut().insert(*k, v.clone());
        }
        let url = action.sign(SIGNED_FOR);
        let headers = self
            .get_headers
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect();
        let reply = self
            .send(reqwest::Method::GET, url, headers, None)
            .map_err(|e| self.io("read", key, e))?;
        match reply.0 {
            200 => Ok(Some(reply.1)),
            404 => Ok(None),
            _ => Err(self.refused("read", key, &reply)),
        }
    }

    /// Writes object `key`; with `create_only`, only if there is none (`If-None-Match: *`):
    /// `false` when another object was there (a retry that finds its own bytes: `true`).
    pub(crate) fn put(
        &self,
        key: &str,
        body: Vec<u8>,
        create_only: bool,
    ) -> Result<bool, StateError> {
        let creds = self.creds()?;
        let mut action = rusty_s3::actions::PutObject::new(&self.bucket, Some(&creds), key);
        for (k, v) in &self.put_headers {
            action.headers_mut().insert(*k, v.clone());
        }
        let url = action.sign(SIGNED_FOR);
        let mut headers: Vec<(String, String)> = self
            .put_headers
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect();
        use base64::Engine;
        let md5 = base64::engine::general_purpose::STANDARD.encode(md5::Md5::digest(&body));
        headers.push(("content-md5".into(), md5));
        if create_only {
            headers.push(("if-none-match".into(), "*".into()));
        }
        let mine = create_only.then(|| body.clone());
        let reply = self
            .send(reqwest::Method::PUT, url, headers, Some(body))
            .map_err(|e| self.io("write", key, e))?;
        match reply.0 {
            200 | 201 | 204 => Ok(true),
            412 if create_only => {
                // A retried request whose first try succeeded finds its own bytes.
                Ok(self.get(key)?.is_some_and(|there| Some(there) == mine))
            }
            _ => Err(self.refused("write", key, &reply)),
        }
    }

    /// Deletes object `key` (none there: nothing to do).
    pub(crate) fn delete(&self, key: &str) -> Result<(), StateError> {
        let creds = self.creds()?;
        let url =
            rusty_s3::actions::DeleteObject::new(&self.bucket, Some(&creds), key).sign(SIGNED_FOR);
        let reply = self
            .send(reqwest::Method::DELETE, url, Vec::new(), None)
            .map_err(|e| self.io("delete", key, e))?;
        match reply.0 {
            200 | 204 | 404 => Ok(()),
            _ => Err(self.refused("delete", key, &reply)),
        }
    }

    /// Every key under `prefix` after `start_after`, in order.
    pub(crate) fn list(
        &self,
        prefix: &str,
        start_after: Option<&str>,
    ) -> Result<Vec<String>, StateError> {
        let mut out = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let creds = self.creds()?;
            let mut action = self.bucket.list_objects_v2(Some(&creds));
            action.with_prefix(prefix);
            if let Some(s) = start_after {
                action.with_start_after(s);
            }
            if let Some(t) = &token {
                action.with_continuation_token(t.clone());
            }
            let url = action.sign(SIGNED_FOR);
            let reply = self
                .send(reqwest::Method::GET, url, Vec::new(), None)
                .map_err(|e| self.io("list", prefix, e))?;
            if reply.0 != 200 {
                return Err(self.refused("list", prefix, &reply));
            }
            let text = String::from_utf8_lossy(&reply.1);
            let page = rusty_s3::actions::ListObjectsV2::parse_response(&text)
                .map_err(|e| self.io("list", prefix, format!("unreadable listing: {e}")))?;
            out.extend(page.contents.into_iter().map(|c| c.key));
            match page.next_continuation_token {
                Some(t) => token = Some(t),
                None => return Ok(out),
            }
        }
    }
}

/// A reqwest error and its causes, as text.
fn error_chain(e: reqwest::Error) -> String {
    // Never the URL: a presigned URL is a credential (its signature grants the request).
    let e = e.without_url();
    let mut m = e.to_string();
    let mut source = std::error::Error::source(&e);
    while let Some(s) = source {
        m.push_str(&format!(": {s}"));
        source = s.source();
    }
    m
}

/// The text of the first `<tag>…</tag>` in an XML answer (unescaped).
fn xml_tag(text: &str, tag: &str) -> Option<String> {
    let open = format!("<{tag}>");
    let start = text.find(&open)? + open.len();
    let end = text[start..].find(&format!("</{tag}>"))? + start;
    Some(
        text[start..end]
            .trim()
            .replace("&lt;", "<")
            .replace("&gt;", ">")
            .replace("&quot;", "\"")
            .replace("&apos;", "'")
            .replace("&amp;", "&"),
    )
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn hmac_sha256(key: &[u8], data: &[u8]) -> Vec<u8> {
    use hmac::Mac;
    let mut m = hmac::Hmac::<sha2::Sha256>::new_from_slice(key).expect("HMAC takes any key");
    m.update(data);
    m.finalize().into_bytes().to_vec()
}

/// The headers of a form POST to `url` signed with AWS Signature Version 4 for `service`
/// (STS: rusty-s3 signs S3's requests only).
fn sigv4_post(
    url: &url::Url,
    region: &str,
    service: &str,
    creds: &Credentials,
    body: &[u8],
) -> Vec<(String, String)> {
    let now = jiff::Timestamp::now();
    let amz_date = now.strftime("%Y%m%dT%H%M%SZ").to_string();
    let day = now.strftime("%Y%m%d").to_string();
    let host = match url.port() {
        Some(p) => format!("{}:{p}", url.host_str().unwrap_or_default()),
        None => url.host_str().unwrap_or_default().to_string(),
    };
    let mut headers: Vec<(String, String)> = vec![
        (
            "content-type".into(),
            "application/x-www-form-urlencoded; charset=utf-8".into(),
        ),
        ("host".into(), host),
        ("x-amz-date".into(), amz_date.clone()),
    ];
    if let Some(t) = creds.token() {
        headers.push(("x-amz-security-token".into(), t.to_string()));
    }
    headers.sort();
    let signed: Vec<&str> = headers.iter().map(|(k, _)| k.as_str()).collect();
    let signed = signed.join(";");
    let canonical_headers: String = headers.iter().map(|(k, v)| format!("{k}:{v}\n")).collect();
    let path = if url.path().is_empty() {
        "/"
    } else {
        url.path()
    };
    let canonical = format!(
        "POST\n{path}\n{}\n{canonical_headers}\n{signed}\n{}",
        url.query().unwrap_or(""),
        hex(&sha2::Sha256::digest(body))
    );
    let scope = format!("{day}/{region}/{service}/aws4_request");
    let to_sign = format!(
        "AWS4-HMAC-SHA256\n{amz_date}\n{scope}\n{}",
        hex(&sha2::Sha256::digest(canonical.as_bytes()))
    );
    let mut key = hmac_sha256(format!("AWS4{}", creds.secret()).as_bytes(), day.as_bytes());
    for part in [region, service, "aws4_request"] {
        key = hmac_sha256(&key, part.as_bytes());
    }
    let signature = hex(&hmac_sha256(&key, to_sign.as_bytes()));
    headers.retain(|(k, _)| k != "host");
    headers.push((
        "authorization".into(),
        format!(
            "AWS4-HMAC-SHA256 Credential={}/{scope}, SignedHeaders={signed}, Signature={signature}",
            creds.key()
        ),
    ));
    headers
}

/// The `Code` and `Message` of an S3 error body, or its text.
fn s3_error(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let tag = |t: &str| {
        let open = format!("<{t}>");
        let start = text.find(&open)? + open.len();
        let end = text[start..].find(&format!("</{t}>"))? + start;
        Some(text[start..end].to_string())
    };
    match (tag("Code"), tag("Message")) {
        (Some(c), Some(m)) => format!("{c}: {m}"),
        (Some(c), None) => c,
        _ => text.chars().take(200).collect(),
    }
}

/// The `message` of a JSON error body (the SSO portal's), or its first 200 characters.
fn json_error(body: &[u8]) -> String {
    serde_json::from_slice::<serde_json::Value>(body)
        .ok()
        .and_then(|v| {
            v.get("message")
                .or_else(|| v.get("Message"))
                .and_then(|m| m.as_str())
                .map(str::to_string)
        })
        .unwrap_or_else(|| String::from_utf8_lossy(body).chars().take(200).collect())
}

/// How long a `credential_process` may take (the AWS SDK's limit).
const PROCESS_TIMEOUT: Duration = Duration::from_secs(60);

/// Runs a profile's `credential_process` (with `sh -c`, as the AWS SDK for Go does) and
/// reads the credentials it prints: `{"Version": 1, "AccessKeyId": …, "SecretAccessKey":
/// …, "SessionToken": …, "Expiration": "RFC 3339"}`. Its standard error is the user's; its
/// output is never repeated in an error (it holds the keys).
fn run_credential_process(command: &str) -> Result<Expiring, String> {
    use std::io::Read;
    let mut child = std::process::Command::new("sh")
        .arg("-c")
        .arg(command)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit())
        .spawn()
        .map_err(|e| format!("cannot run its credential_process: {e}"))?;
    let mut stdout = child.stdout.take().expect("piped");
    let reader = std::thread::spawn(move || {
        let mut out = Vec::new();
        let _ = stdout.read_to_end(&mut out);
        out
    });
    let deadline = Instant::now() + PROCESS_TIMEOUT;
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break s,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(10)),
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "its credential_process did not finish within {} s",
                    PROCESS_TIMEOUT.as_secs()
                ));
            }
            Err(e) => return Err(format!("its credential_process: {e}")),
        }
    };
    let out = reader.join().unwrap_or_default();
    if !status.success() {
        return Err(format!("its credential_process failed ({status})"));
    }
    let shape = "its credential_process did not print the JSON it must (Version 1, \
                 AccessKeyId, SecretAccessKey, and SessionToken and Expiration if temporary)";
    let v: serde_json::Value = serde_json::from_slice(&out).map_err(|_| shape.to_string())?;
    let s = |k: &str| v.get(k).and_then(|x| x.as_str()).filter(|x| !x.is_empty());
    if v.get("Version").and_then(|x| x.as_u64()) != Some(1) {
        return Err(format!("{shape}: its Version is not 1"));
    }
    let (Some(key), Some(secret)) = (s("AccessKeyId"), s("SecretAccessKey")) else {
        return Err(shape.to_string());
    };
    let expires = match s("Expiration") {
        Some(e) => Some(
            e.parse::<jiff::Timestamp>()
                .map_err(|_| format!("{shape}: its Expiration is not an RFC 3339 time"))?,
        ),
        None => None,
    };
    let creds = match s("SessionToken") {
        Some(t) => Credentials::new_with_token(key, secret, t),
        None => Credentials::new(key, secret),
    };
    Ok((creds, expires))
}

/// The SSO access token `aws sso login` cached for `sso`, if it has not expired.
fn sso_cached_token(sso: &crate::backend_config::Sso) -> Result<String, String> {
    let login = format!("run `aws sso login --profile {}`", sso.profile);
    let text = std::fs::read_to_string(&sso.cache_file).map_err(|e| {
        format!(
            "no SSO token cached for {} ({}: {e}): {login}",
            sso.start_url,
            sso.cache_file.display()
        )
    })?;
    let v: serde_json::Value = serde_json::from_str(&text).map_err(|_| {
        format!(
            "{} is not an SSO token cache file: {login}",
            sso.cache_file.display()
        )
    })?;
    let token = v
        .get("accessToken")
        .and_then(|t| t.as_str())
        .filter(|t| !t.is_empty())
        .ok_or_else(|| format!("{} holds no accessToken: {login}", sso.cache_file.display()))?;
    let expires = v
        .get("expiresAt")
        .and_then(|t| t.as_str())
        .and_then(|t| t.parse::<jiff::Timestamp>().ok())
        .ok_or_else(|| {
            format!(
                "{} has no valid expiresAt: {login}",
                sso.cache_file.display()
            )
        })?;
    if expires <= jiff::Timestamp::now() {
        return Err(format!(
            "the SSO token cached for {} expired at {expires}: {login}",
            sso.start_url
        ));
    }
    Ok(token.to_string())
}

/// The role's credentials in the SSO portal's answer to `GetRoleCredentials`.
fn sso_credentials(body: &[u8]) -> Result<Expiring, String> {
    let shape = "the SSO portal answered without role credentials";
    let v: serde_json::Value = serde_json::from_slice(body).map_err(|_| shape.to_string())?;
    let rc = v.get("roleCredentials").ok_or(shape)?;
    let s = |k: &str| rc.get(k).and_then(|x| x.as_str()).filter(|x| !x.is_empty());
    let (Some(key), Some(secret), Some(token)) =
        (s("accessKeyId"), s("secretAccessKey"), s("sessionToken"))
    else {
        return Err(shape.into());
    };
    let expires = rc
        .get("expiration")
        .and_then(|x| x.as_i64())
        .and_then(|ms| jiff::Timestamp::from_millisecond(ms).ok());
    Ok((Credentials::new_with_token(key, secret, token), expires))
}

/// The keys of one workspace's objects.
#[derive(Clone)]
pub(crate) struct Keys {
    /// The state object's key (Terraform's).
    pub(crate) state: String,
}

impl Keys {
    pub(crate) fn of(cfg: &S3Config) -> Keys {
        Keys {
            state: cfg.state_key(),
        }
    }
    fn lock(&self) -> String {
        format!("{}.tflock", self.state)
    }
    fn prefix(&self) -> String {
        format!("{}.cairn/", self.state)
    }
    fn lineage(&self) -> String {
        format!("{}lineage", self.prefix())
    }
    fn events(&self) -> String {
        format!("{}events/", self.prefix())
    }
    fn event(&self, first: u64) -> String {
        format!("{}{first:020}", self.events())
    }
    fn checkpoints(&self) -> String {
        format!("{}checkpoints/", self.prefix())
    }
    fn checkpoint(&self, seq: u64) -> String {
        format!("{}{seq:020}", self.checkpoints())
    }
    fn head(&self) -> String {
        format!("{}head", self.prefix())
    }
    /// Where `state recover` keeps a copy of the damaged log (events, head, checkpoints).
    fn damaged(&self, ms: u64) -> String {
        format!("{}damaged-{ms}/", self.prefix())
    }
    fn plans(&self) -> String {
        format!("{}plans/", self.prefix())
    }
}

/// Copies objects (`from`, `to`), several at a time: the bytes as they are, never decoded.
/// A copy never replaces an object.
fn copy_objects(client: &Client, pairs: &[(String, String)]) -> Result<(), StateError> {
    for chunk in pairs.chunks(16) {
        let got: Vec<Result<(), StateError>> = std::thread::scope(|s| {
            let handles: Vec<_> = chunk
                .iter()
                .map(|(from, to)| {
                    s.spawn(move || {
                        let Some(bytes) = client.get(from)? else {
                            return Ok(());
                        };
                        if client.put(to, bytes, true)? {
                            Ok(())
                        } else {
                            Err(client.io("copy", to, "another object is already there"))
                        }
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("a copier does not panic"))
                .collect()
        });
        for g in got {
            g?;
        }
    }
    Ok(())
}

/// Encodes records as one batch object.
fn encode_batch(records: &[(u64, Vec<u8>)]) -> Vec<u8> {
    let mut buf = Vec::with_capacity(8 + records.iter().map(|r| r.1.len() + 16).sum::<usize>());
    buf.extend_from_slice(BATCH_MAGIC);
    for (seq, data) in records {
        buf.extend_from_slice(&seq.to_be_bytes());
        buf.extend_from_slice(&(data.len() as u32).to_be_bytes());
        buf.extend_from_slice(&record_crc(&buf[buf.len() - 12..], data).to_be_bytes());
        buf.extend_from_slice(data);
    }
    buf
}

/// The checksum of a record: its seq and length (`head`) and its bytes.
fn record_crc(head: &[u8], data: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(head);
    h.update(data);
    h.finalize()
}

/// Decodes a batch object: its records, or what is wrong with it.
fn decode_batch(bytes: &[u8]) -> Result<Vec<(u64, Vec<u8>)>, String> {
    let rest = bytes
        .strip_prefix(BATCH_MAGIC)
        .ok_or("it is not a Cairn event batch")?;
    let mut out = Vec::new();
    let mut at = 0;
    while at < rest.len() {
        let head = rest
            .get(at..at + 16)
            .ok_or("it ends inside a record header")?;
        let seq = u64::from_be_bytes(head[..8].try_into().expect("8"));
        let len = u32::from_be_bytes(head[8..12].try_into().expect("4")) as usize;
        let crc = u32::from_be_bytes(head[12..16].try_into().expect("4"));
        let data = rest
            .get(at + 16..at + 16 + len)
            .ok_or("it ends inside a record")?;
        if record_crc(&head[..12], data) != crc {
            return Err(format!("record {seq} fails its checksum"));
        }
        out.push((seq, data.to_vec()));
        at += 16 + len;
    }
    Ok(out)
}

/// The first seqs of the batches (and the keys under `events/` that are not batches).
fn batch_index(client: &Client, keys: &Keys) -> Result<(Vec<u64>, Vec<String>), StateError> {
    let prefix = keys.events();
    let mut firsts = Vec::new();
    let mut strays = Vec::new();
    for k in client.list(&prefix, None)? {
        match k[prefix.len()..].parse::<u64>() {
            Ok(n) if n > 0 => firsts.push(n),
            _ => strays.push(k),
        }
    }
    firsts.sort_unstable();
    Ok((firsts, strays))
}

/// Reads the batches starting at `firsts`, several at a time, in order.
fn read_batches(client: &Client, keys: &Keys, firsts: &[u64]) -> Result<Vec<Batch>, StateError> {
    read_each_batch(client, keys, firsts).into_iter().collect()
}

/// Reads the batches starting at `firsts`, several at a time, in order: each batch or why it
/// cannot be read (a recovery reads past an unreadable one).
fn read_each_batch(client: &Client, keys: &Keys, firsts: &[u64]) -> Vec<Result<Batch, StateError>> {
    let mut out = Vec::with_capacity(firsts.len());
    for chunk in firsts.chunks(16) {
        let got: Vec<Result<Batch, StateError>> = std::thread::scope(|s| {
            let handles: Vec<_> = chunk
                .iter()
                .map(|&first| {
                    s.spawn(move || {
                        let key = keys.event(first);
                        let bytes = client.get(&key)?.ok_or_else(|| StateError::Corrupt {
                            seq: first,
                            detail: format!("the batch {key} vanished while being read"),
                        })?;
                        let records = decode_batch(&bytes).map_err(|d| StateError::Corrupt {
                            seq: first,
                            detail: format!("the batch {key} is unreadable: {d}"),
                        })?;
                        Ok((first, records))
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("a batch reader does not panic"))
                .collect()
        });
        out.extend(got);
    }
    out
}

/// The records from `from` to `to` (inclusive), in order, an unreadable batch as an error in
/// its place; with `from` 0 every key (strays as `Err` keys, for the check).
fn read_range(
    client: &Client,
    keys: &Keys,
    from: u64,
    to: Option<u64>,
) -> Result<Vec<Result<KeyedRecord, StateError>>, StateError> {
    let (firsts, strays) = batch_index(client, keys)?;
    let to = to.unwrap_or(u64::MAX);
    // The batch holding `from` starts at or before it: the last first seq <= from.
    let start = firsts
        .partition_point(|&f| f <= from.max(1))
        .saturating_sub(1);
    let wanted: Vec<u64> = firsts[start..]
        .iter()
        .copied()
        .take_while(|&f| f <= to)
        .collect();
    let mut out = Vec::new();
    for batch in read_each_batch(client, keys, &wanted) {
        let (first, records) = match batch {
            Ok(b) => b,
            Err(e) => {
                out.push(Err(e));
                continue;
            }
        };
        if records.first().map(|r| r.0) != Some(first) {
            out.push(Ok((Err(keys.event(first)), Vec::new())));
            continue;
        }
        for (seq, data) in records {
            if seq >= from && seq <= to {
                out.push(Ok((Ok(seq), data)));
            }
        }
    }
    if from == 0 {
        out.extend(strays.into_iter().map(|k| Ok((Err(k), Vec::new()))));
    }
    Ok(out)
}

/// The holder of a lock object as Terraform writes it.
#[derive(serde::Serialize, serde::Deserialize, Default)]
#[serde(rename_all = "PascalCase")]
struct LockInfo {
    #[serde(rename = "ID")]
    id: String,
    #[serde(default)]
    operation: String,
    #[serde(default)]
    info: String,
    #[serde(default)]
    who: String,
    #[serde(default)]
    version: String,
    #[serde(default)]
    created: String,
    #[serde(default)]
    path: String,
}

impl LockInfo {
    fn holder(&self) -> LockHolder {
        let (who, host) = match self.who.rsplit_once('@') {
            Some((w, h)) => (w.to_string(), h.to_string()),
            None => (self.who.clone(), "an unknown host".into()),
        };
        // Cairn's own: Info is "cairn pid=N command=C"; Terraform's: its operation.
        let mut pid = 0;
        let mut command = format!("terraform, {}", self.operation);
        if let Some(rest) = self.info.strip_prefix("cairn ") {
            for part in rest.split(' ') {
                if let Some(p) = part.strip_prefix("pid=") {
                    pid = p.parse().unwrap_or(0);
                }
                if let Some(c) = part.strip_prefix("command=") {
                    command = c.to_string();
                }
            }
        }
        let since_ms = self
            .created
            .parse::<jiff::Timestamp>()
            .map(|t| t.as_millisecond().max(0) as u64)
            .unwrap_or(0);
        LockHolder {
            run_id: self.id.clone(),
            who,
            host,
            pid,
            command,
            since_ms,
        }
    }
}

fn read_lock(client: &Client, keys: &Keys) -> Result<Option<LockInfo>, StateError> {
    let key = keys.lock();
    Ok(client.get(&key)?.map(|bytes| {
        serde_json::from_slice(&bytes).unwrap_or_else(|_| LockInfo {
            id: "(unreadable lock object)".into(),
            ..Default::default()
        })
    }))
}

fn random_id() -> String {
    use std::io::Read;
    let mut bytes = [0u8; 16];
    if std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .is_err()
    {
        let seed = format!("{}{}{:?}", now_ms(), std::process::id(), Instant::now());
        bytes.copy_from_slice(&md5::Md5::digest(seed.as_bytes()));
    }
    let h: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &h[..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..]
    )
}

fn host_name() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is valid for its length; gethostname NUL-terminates within it or
    // truncates, and we stop at the first NUL.
    let r = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if r != 0 {
        return "unknown host".into();
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

/// The local journal of events a writer could not make durable in the bucket.
pub(crate) const JOURNAL_FILE: &str = "s3-journal";
/// The lock a run of this working copy held and could not delete when it ended.
const LEFT_LOCK_FILE: &str = "s3-lock-left";

/// What the store and its flushers share.
struct Writer {
    client: Arc<Client>,
    keys: Keys,
    /// Appended, not yet written; why the bucket cannot be written any more; how many
    /// events went to the local journal instead.
    shared: Mutex<(Vec<Record>, Option<String>, u64)>,
    /// Held for a whole flush, so that batches are written in order.
    flushing: Mutex<()>,
    journal: PathBuf,
}

impl Writer {
    fn flush(&self) -> Result<(), StateError> {
        let _order = self.flushing.lock().expect("s3 flush order");
        let (batch, failed) = {
            let mut sh = self.shared.lock().expect("s3 shared");
            (std::mem::take(&mut sh.0), sh.1.clone())
        };
        if let Some(why) = failed {
            self.keep_in_journal(&batch)?;
            return Err(self.failure(&why));
        }
        let Some(first) = batch.first().map(|r| r.0) else {
            return Ok(());
        };
        match self.write_batch(first, &batch) {
            Ok(()) => Ok(()),
            Err(e) => {
                let why = e.to_string();
                self.shared.lock().expect("s3 shared").1 = Some(why.clone());
                self.keep_in_journal(&batch)?;
                Err(self.failure(&why))
            }
        }
    }

    fn failure(&self, why: &str) -> StateError {
        let n = self.shared.lock().expect("s3 shared").2;
        StateError::Io {
            context: "the state bucket failed".into(),
            message: format!(
                "{why}. No new operation starts. The {n} event(s) not yet in the bucket (among \
                 them the outcomes of provider calls that finished) are kept in {}; the next \
                 run that writes the state writes them there before anything else",
                self.journal.display()
            ),
        }
    }

    /// Appends records to the local journal and makes them durable.
    fn keep_in_journal(&self, batch: &[Record]) -> Result<(), StateError> {
        if batch.is_empty() {
            return Ok(());
        }
        crate::journal::append(&self.journal, batch).map_err(|e| {
            StateError::io(
                format!(
                    "the state bucket failed and the local journal {} cannot be written",
                    self.journal.display()
                ),
                e,
            )
        })?;
        self.shared.lock().expect("s3 shared").2 += batch.len() as u64;
        Ok(())
    }

    /// Writes `batch` (starting at `first`) as a new object, never over another.
    fn write_batch(&self, first: u64, batch: &[(u64, Vec<u8>)]) -> Result<(), StateError> {
        let key = self.keys.event(first);
        if self.client.put(&key, encode_batch(batch), true)? {
            // The head after the batch. The batch is durable already: a head that cannot be
            // written stays at the one before, which is still true (only a log shorter than
            // its head is an error), so this write failing fails nothing.
            if let Some((seq, last)) = batch.last() {
                let head = crate::chain::Head::of(*seq, last);
                let _ = self
                    .client
                    .put(&self.keys.head(), head.encode().to_vec(), false);
            }
            return Ok(());
        }
        Err(StateError::Io {
            context: format!("cannot append event {first} to {}", self.client.describe),
            message: format!(
                "another writer already wrote event {first} ({key} exists): this run lost the \
                 race for it and wrote nothing; run again to plan from the state as it is now"
            ),
        })
    }
}

/// An open state on S3: the log core over the S3 store.
pub(crate) type S3Log = LogCore<S3Storage>;

/// One workspace's objects in a bucket (one [`Storage`]): a writer holds the lock object
/// until it is dropped.
pub(crate) struct S3Storage {
    cfg: S3Config,
    writer: Arc<Writer>,
    write: bool,
    /// The lock ID this store holds.
    lock: Option<String>,
    /// The state's encryption (checkpoints are sealed with it).
    crypt: crate::checkpoint::Crypt,
}

impl S3Log {
    /// Opens (with `write`, taking the lock) the log of `cfg`'s workspace. `dir` is the local
    /// state directory.
    pub(crate) fn open(
        cfg: &S3Config,
        dir: &Path,
        opts: &OpenOptions,
    ) -> Result<(S3Log, Vec<String>), StateError> {
        let storage = S3Storage::open(cfg, dir, opts)?;
        let (mut log, mut warnings) =
            LogCore::over(storage, dir, opts.write, None, opts.encryption.clone())?;
        if opts.write {
            if let Some(n) = crate::journal::recover(&mut log, JOURNAL_FILE, "connection")? {
                warnings.push(n.clone());
                log.notices.push(n);
            }
        } else if let Ok(records) = crate::journal::read(&dir.join(JOURNAL_FILE)) {
            if !records.is_empty() {
                warnings.push(format!(
                    "{} event(s) of a run that lost its connection to the bucket are kept in \
                     {} and not yet in the bucket; the next run that writes the state (apply, \
                     refresh, …) writes them there first",
                    records.len(),
                    dir.join(JOURNAL_FILE).display()
                ));
            }
        }
        Ok((log, warnings))
    }

    /// Opens read-only as the log was after event `upto`.
    pub(crate) fn open_upto(
        cfg: &S3Config,
        dir: &Path,
        opts: &OpenOptions,
        upto: u64,
    ) -> Result<(S3Log, Vec<String>), StateError> {
        let opts = OpenOptions {
            write: false,
            ..opts.clone()
        };
        let storage = S3Storage::open(cfg, dir, &opts)?;
        LogCore::over(storage, dir, false, Some(upto), opts.encryption.clone())
    }
}

impl S3Log {
    /// `cairn state recover` on `cfg`'s log (see [`crate::log::recover`]), holding the lock:
    /// the copy of the damaged log is kept under `<key>.cairn/damaged-<ms>/`
    /// ([`Storage::set_damage_aside`]). No log there is [`StateError::NotFound`].
    pub(crate) fn recover(
        cfg: &S3Config,
        dir: &Path,
        opts: &OpenOptions,
        args: &[String],
    ) -> Result<(S3Log, crate::log::Recovery), StateError> {
        drop(S3Storage::open(
            cfg,
            dir,
            &OpenOptions {
                write: false,
                ..opts.clone()
            },
        )?);
        let opts = OpenOptions {
            write: true,
            ..opts.clone()
        };
        let storage = S3Storage::open(cfg, dir, &opts)?;
        crate::log::recover(storage, dir, args, opts.encryption.clone())
    }
}

impl S3Storage {
    fn open(cfg: &S3Config, dir: &Path, opts: &OpenOptions) -> Result<S3Storage, StateError> {
        let client = Arc::new(Client::new(cfg)?);
        let keys = Keys::of(cfg);
        if !opts.write && client.get(&keys.lineage())?.is_none() {
            return Err(StateError::NotFound {
                dir: cfg.describe().into(),
            });
        }
        let writer = Arc::new(Writer {
            client,
            keys,
            shared: Mutex::new((Vec::new(), None, 0)),
            flushing: Mutex::new(()),
            journal: dir.join(JOURNAL_FILE),
        });
        let mut storage = S3Storage {
            cfg: cfg.clone(),
            writer,
            write: opts.write,
            lock: None,
            crypt: opts.encryption.clone(),
        };
        if opts.write {
            storage.acquire_lock(opts)?;
        }
        Ok(storage)
    }

    fn client(&self) -> &Client {
        &self.writer.client
    }

    /// `<state dir>/s3-lock-left`: the ID of the lock this working copy's last run held and
    /// could not delete.
    fn left_lock_file(&self) -> PathBuf {
        self.writer.journal.with_file_name(LEFT_LOCK_FILE)
    }

    fn keys(&self) -> &Keys {
        &self.writer.keys
    }

    fn acquire_lock(&mut self, opts: &OpenOptions) -> Result<(), StateError> {
        let id = random_id();
        let info = LockInfo {
            id: id.clone(),
            operation: format!("OperationType{}", operation_of(&opts.command)),
            info: format!(
                "cairn pid={} command={}",
                std::process::id(),
                opts.command.replace(' ', "_")
            ),
            who: format!("{}@{}", current_user(), host_name()),
            version: env!("CARGO_PKG_VERSION").to_string(),
            created: jiff::Timestamp::now().to_string(),
            path: format!("{}/{}", self.cfg.bucket, self.keys().state),
        };
        let body = serde_json::to_vec(&info).expect("lock info serializes");
        let key = self.keys().lock();
        let deadline = Instant::now() + opts.lock_timeout;
        // The lock an earlier run of this working copy could not delete (the bucket was out
        // of reach when it ended): that run is over, so its lock is released here.
        let left = self.left_lock_file();
        let left_id = std::fs::read_to_string(&left)
            .ok()
            .map(|t| t.trim().to_string());
        loop {
            if self.client().put(&key, body.clone(), true)? {
                self.lock = Some(id);
                let _ = std::fs::remove_file(&left);
                return Ok(());
            }
            if let Some(old) = &left_id {
                if read_lock(self.client(), self.keys())?.is_some_and(|l| &l.id == old) {
                    self.client().delete(&key)?;
                    let _ = std::fs::remove_file(&left);
                    continue;
                }
            }
            if Instant::now() >= deadline {
                let holder = read_lock(self.client(), self.keys())?.map(|l| Box::new(l.holder()));
                return Err(StateError::LockedRemote {
                    location: self.cfg.describe(),
                    holder,
                });
            }
            std::thread::sleep(Duration::from_millis(250));
        }
    }
}

/// Terraform's operation name for a command (its lock's `Operation`).
fn operation_of(command: &str) -> &'static str {
    match command.split(' ').next().unwrap_or("") {
        "apply" | "destroy" | "import" => "Apply",
        "plan" => "Plan",
        "refresh" => "Refresh",
        _ => "Invalid",
    }
}

impl Storage for S3Storage {
    type Bytes = Vec<u8>;

    fn location(&self) -> String {
        self.cfg.describe()
    }

    fn last_seq(&self) -> Result<u64, StateError> {
        let (firsts, _) = batch_index(self.client(), self.keys())?;
        let Some(&last) = firsts.last() else {
            return Ok(0);
        };
        let batch = read_batches(self.client(), self.keys(), &[last])?;
        Ok(batch
            .first()
            .and_then(|(_, r)| r.last())
            .map_or(last, |r| r.0))
    }

    fn scan(&self, from: u64, to: Option<u64>) -> Result<Records<'_, Vec<u8>>, StateError> {
        let records = read_range(self.client(), self.keys(), from, to)?;
        Ok(Box::new(records.into_iter()))
    }

    fn put(&mut self, seq: u64, bytes: &[u8]) -> Result<(), StateError> {
        self.writer
            .shared
            .lock()
            .expect("s3 shared")
            .0
            .push((seq, bytes.to_vec()));
        Ok(())
    }

    fn put_all(&mut self, records: &[(u64, Vec<u8>)]) -> Result<(), StateError> {
        self.writer.flush()?;
        // One object: all of them or none.
        match records.first() {
            Some((first, _)) => self.writer.write_batch(*first, records),
            None => Ok(()),
        }
    }

    fn flush(&self) -> Result<(), StateError> {
        self.writer.flush()
    }

    fn flusher(&self) -> Flusher {
        let w = self.writer.clone();
        Flusher::new(move || w.flush())
    }

    fn keeps_head(&self) -> bool {
        true
    }

    fn read_head(&self) -> Result<Option<crate::chain::Head>, StateError> {
        match self.client().get(&self.keys().head())? {
            None => Ok(None),
            Some(b) => {
                crate::chain::Head::decode(&b)
                    .map(Some)
                    .ok_or_else(|| StateError::Corrupt {
                        seq: 0,
                        detail: format!("the log head {} is damaged", self.keys().head()),
                    })
            }
        }
    }

    fn reset_head(&mut self, head: Option<crate::chain::Head>) -> Result<(), StateError> {
        match head {
            Some(h) => self
                .client()
                .put(&self.keys().head(), h.encode().to_vec(), false)
                .map(|_| ()),
            None => self.client().delete(&self.keys().head()),
        }
    }

    /// In order, so that a recovery cut short still reads as damaged: the event batches,
    /// the head and the checkpoints copied as they are to `K.cairn/damaged-<ms>/`; then the
    /// batches past `good` deleted, newest first, with the objects under `events/` that are
    /// not batches; the batch holding `good` rewritten without the records after it; the
    /// checkpoints past `good` deleted; and last the head rewritten (or deleted: nothing
    /// good is left).
    fn set_damage_aside(
        &mut self,
        good: u64,
        head: Option<crate::chain::Head>,
    ) -> Result<String, StateError> {
        let client = self.writer.client.clone();
        let keys = self.keys().clone();
        let to = keys.damaged(now_ms());
        let prefix = keys.prefix();
        let mut copies: Vec<(String, String)> = Vec::new();
        for under in [keys.events(), keys.checkpoints()] {
            for k in client.list(&under, None)? {
                let rel = k[prefix.len()..].to_string();
                copies.push((k, format!("{to}{rel}")));
            }
        }
        copies.push((keys.head(), format!("{to}head")));
        copy_objects(&client, &copies)?;
        let (firsts, strays) = batch_index(&client, &keys)?;
        for k in strays {
            client.delete(&k)?;
        }
        for &first in firsts.iter().rev().filter(|&&f| f > good) {
            client.delete(&keys.event(first))?;
        }
        if let Some(&first) = firsts.iter().rev().find(|&&f| f <= good) {
            let (_, records) = read_batches(&client, &keys, &[first])?
                .pop()
                .expect("one batch read");
            if records.last().is_some_and(|r| r.0 > good) {
                let kept: Vec<Record> = records.into_iter().filter(|r| r.0 <= good).collect();
                client.put(&keys.event(first), encode_batch(&kept), false)?;
            }
        }
        for seq in self.checkpoint_seqs()? {
            if seq > good {
                self.remove_checkpoint(seq)?;
            }
        }
        self.reset_head(head)?;
        Ok(format!(
            "s3://{}/{to} (the event batches, head and checkpoints as they were)",
            self.cfg.bucket
        ))
    }

    fn read_lineage(&self) -> Result<Option<String>, StateError> {
        Ok(self
            .client()
            .get(&self.keys().lineage())?
            .map(|b| String::from_utf8_lossy(&b).trim().to_string())
            .filter(|l| !l.is_empty()))
    }

    fn create_lineage(&mut self, lineage: &str) -> Result<(), StateError> {
        self.client()
            .put(&self.keys().lineage(), lineage.as_bytes().to_vec(), true)
            .map(|_| ())
    }

    fn replace_lineage(&mut self, lineage: &str, head: u64) -> Result<(), StateError> {
        let existing = self.read_lineage()?.unwrap_or_default();
        if !existing.is_empty() && existing != lineage && head > 0 {
            return Err(StateError::Backend {
                message: "the lineage of a state with events cannot change".into(),
            });
        }
        self.client()
            .put(&self.keys().lineage(), lineage.as_bytes().to_vec(), false)
            .map(|_| ())
    }

    fn checkpoint_seqs(&self) -> Result<Vec<u64>, StateError> {
        let prefix = self.keys().checkpoints();
        let mut seqs: Vec<u64> = self
            .client()
            .list(&prefix, None)?
            .iter()
            .filter_map(|k| k[prefix.len()..].parse().ok())
            .collect();
        seqs.sort_unstable();
        Ok(seqs)
    }

    fn read_checkpoint(&self, seq: u64) -> Result<Result<Snapshot, String>, StateError> {
        Ok(match self.client().get(&self.keys().checkpoint(seq))? {
            Some(data) => checkpoint::decode(&data, self.crypt.as_deref()),
            None => Err("it vanished".into()),
        })
    }

    fn write_checkpoint(&mut self, snapshot: &Snapshot, keep: usize) -> Result<(), StateError> {
        let data = checkpoint::encode(snapshot, self.crypt.as_deref())
            .map_err(|e| StateError::io("cannot encode a checkpoint", e))?;
        self.client()
            .put(&self.keys().checkpoint(snapshot.head), data, false)?;
        let seqs = self.checkpoint_seqs()?;
        for seq in &seqs[..seqs.len().saturating_sub(keep)] {
            self.remove_checkpoint(*seq)?;
        }
        Ok(())
    }

    fn remove_checkpoint(&mut self, seq: u64) -> Result<(), StateError> {
        self.client().delete(&self.keys().checkpoint(seq))
    }

    fn clear_checkpoints(&mut self) -> Result<(), StateError> {
        for seq in self.checkpoint_seqs()? {
            self.remove_checkpoint(seq)?;
        }
        Ok(())
    }
}

impl Drop for S3Storage {
    fn drop(&mut self) {
        if self.write {
            let _ = self.writer.flush();
        }
        if let Some(id) = self.lock.take() {
            // Only our own lock: a force-unlocked one may be another run's by now.
            let released = match read_lock(self.client(), self.keys()) {
                Ok(Some(l)) if l.id == id => self.client().delete(&self.keys().lock()).is_ok(),
                Ok(_) => true,
                Err(_) => false,
            };
            if !released {
                // The bucket is out of reach: the next run here releases it (this run is
                // over), see `acquire_lock`.
                let _ = std::fs::write(self.left_lock_file(), &id);
            }
        }
    }
}

/// The workspaces whose logs live beside `cfg`'s key: every `<prefix>/<name>/<key>.cairn/`
/// with a lineage (see `workspace.rs`).
pub(crate) fn workspaces(cfg: &S3Config) -> Result<Vec<String>, StateError> {
    let client = Client::new(cfg)?;
    let prefix = format!("{}/", cfg.workspace_key_prefix);
    let tail = format!("/{}.cairn/lineage", cfg.key);
    Ok(client
        .list(&prefix, None)?
        .iter()
        .filter_map(|k| k[prefix.len()..].strip_suffix(&tail))
        .filter(|name| !name.contains('/'))
        .map(str::to_string)
        .collect())
}

/// Deletes a workspace's log and lock (`cairn workspace delete`).
pub(crate) fn delete_workspace(cfg: &S3Config) -> Result<(), StateError> {
    let client = Client::new(cfg)?;
    let keys = Keys::of(cfg);
    for k in client.list(&keys.prefix(), None)? {
        client.delete(&k)?;
    }
    Ok(())
}

/// Records a plan-only run (`plan_runs.rs`) as an object of its own under
/// `<key>.cairn/plans/`, without the lock, keeping the newest `keep`. `Ok(false)`: no log
/// there yet.
pub(crate) fn record_plan_run(
    cfg: &S3Config,
    id: &str,
    bytes: Vec<u8>,
    keep: usize,
) -> Result<bool, StateError> {
    let client = Client::new(cfg)?;
    let keys = Keys::of(cfg);
    if client.get(&keys.lineage())?.is_none() {
        return Ok(false);
    }
    client.put(&format!("{}{id}", keys.plans()), bytes, true)?;
    let all = client.list(&keys.plans(), None)?;
    if all.len() > keep {
        for old in &all[..all.len() - keep] {
            client.delete(old)?;
        }
    }
    Ok(true)
}

/// The plan-only runs recorded beside `cfg`'s log, by id.
pub(crate) fn plan_runs(cfg: &S3Config) -> Result<Vec<(String, Vec<u8>)>, StateError> {
    let client = Client::new(cfg)?;
    let keys = Keys::of(cfg);
    let prefix = keys.plans();
    let mut out = Vec::new();
    for k in client.list(&prefix, None)? {
        if let Some(bytes) = client.get(&k)? {
            out.push((k[prefix.len()..].to_string(), bytes));
        }
    }
    Ok(out)
}

/// Reads the events from `from` on, at most `max` (see `store::peek_events`). No log there
/// is [`StateError::NotFound`].
pub fn peek_events(
    cfg: &S3Config,
    from: u64,
    max: usize,
    crypt: Option<&crate::crypt::Encryption>,
) -> Result<Peek, StateError> {
    let client = Client::new(cfg)?;
    let keys = Keys::of(cfg);
    if client.get(&keys.lineage())?.is_none() {
        return Err(StateError::NotFound {
            dir: cfg.describe().into(),
        });
    }
    read_events(&client, &keys, from, max, crypt)
}

fn read_events(
    client: &Client,
    keys: &Keys,
    from: u64,
    max: usize,
    crypt: Option<&crate::crypt::Encryption>,
) -> Result<Peek, StateError> {
    let from = from.max(1);
    let mut out = Vec::new();
    for (expected, item) in (from..).zip(read_range(client, keys, from, None)?) {
        if out.len() >= max {
            break;
        }
        let (k, data) = item?;
        match k {
            Ok(seq) if seq == expected => out.push(decode_record(crypt, seq, &data)?),
            Ok(seq) => {
                return Err(StateError::Corrupt {
                    seq: expected,
                    detail: format!("the record is missing (the next record is {seq})"),
                })
            }
            Err(k) => {
                return Err(StateError::Corrupt {
                    seq: expected,
                    detail: format!("unexpected object {k}"),
                })
            }
        }
    }
    Ok(Peek::Events(out, Vec::new()))
}

/// A reader of an S3 log beside other commands (`cairn ui`): one client kept across reads;
/// it takes no lock and writes nothing. Batches are whole commits, so a read sees whole
/// flushes only.
pub struct S3Reader {
    client: Client,
    keys: Keys,
    crypt: crate::checkpoint::Crypt,
}

impl S3Reader {
    /// A reader of `cfg`'s log, opening its records with `crypt`.
    pub fn new(cfg: &S3Config, crypt: crate::checkpoint::Crypt) -> Result<S3Reader, StateError> {
        Ok(S3Reader {
            client: Client::new(cfg)?,
            keys: Keys::of(cfg),
            crypt,
        })
    }

    /// The events from `from` (inclusive), at most `max` (see `store::peek_events`).
    pub fn read(&mut self, from: u64, max: usize) -> Result<Peek, StateError> {
        read_events(&self.client, &self.keys, from, max, self.crypt.as_deref())
    }

    /// The run holding the lock now, if one does.
    pub fn holder(&mut self) -> Result<Option<Box<LockHolder>>, StateError> {
        Ok(read_lock(&self.client, &self.keys)?.map(|l| Box::new(l.holder())))
    }
}

/// `cairn force-unlock ID`: deletes the lock object of `cfg`'s workspace if its ID is `id`
/// (a Terraform run's lock too). Returns what was done.
pub fn force_unlock(cfg: &S3Config, id: &str) -> Result<String, StateError> {
    let client = Client::new(cfg)?;
    let keys = Keys::of(cfg);
    let Some(lock) = read_lock(&client, &keys)? else {
        return Err(StateError::Backend {
            message: format!("the state in {} is not locked", cfg.describe()),
        });
    };
    let h = lock.holder();
    if lock.id != id {
        return Err(StateError::Backend {
            message: format!(
                "lock ID {id} does not hold the state in {}: it is held by {} on {} with lock \
                 ID {}",
                cfg.describe(),
                h.who,
                h.host,
                lock.id
            ),
        });
    }
    client.delete(&keys.lock())?;
    Ok(format!(
        "The lock {id} held by {} on {} ({}) was released: its lock object {} was deleted.",
        h.who,
        h.host,
        h.command,
        keys.lock()
    ))
}

/// Reads the state object Terraform keeps at `cfg`'s key (`None`: there is none), for
/// `terraform_remote_state`.
pub fn read_terraform_state(cfg: &S3Config) -> Result<Option<Vec<u8>>, StateError> {
    Client::new(cfg)?.get(&cfg.state_key())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_round_trip_and_damage_is_named() {
        let records = vec![(7, b"abc".to_vec()), (8, Vec::new()), (9, vec![0; 300])];
        let bytes = encode_batch(&records);
        assert_eq!(decode_batch(&bytes).unwrap(), records);
        assert!(decode_batch(&bytes[..bytes.len() - 1]).is_err());
        let mut bad = bytes.clone();
        bad[30] ^= 1;
        assert!(decode_batch(&bad).unwrap_err().contains("checksum"));
        assert!(decode_batch(b"nope").is_err());
    }

    #[test]
    fn lock_holders_read_terraforms_and_cairns_lock_objects() {
        let tf: LockInfo = serde_json::from_str(
            r#"{"ID":"abc","Operation":"OperationTypeApply","Info":"","Who":"ann@box","Version":"1.11.4","Created":"2026-01-02T03:04:05.123456Z","Path":"b/k"}"#,
        )
        .unwrap();
        let h = tf.holder();
        assert_eq!((h.who.as_str(), h.host.as_str()), ("ann", "box"));
        assert_eq!(h.command, "terraform, OperationTypeApply");
        assert_eq!(h.since_ms, 1_767_323_045_123);
        let mine = LockInfo {
            id: "x".into(),
            info: "cairn pid=42 command=apply".into(),
            who: "bob@h".into(),
            ..Default::default()
        };
        let h = mine.holder();
        assert_eq!((h.pid, h.command.as_str()), (42, "apply"));
    }
}
