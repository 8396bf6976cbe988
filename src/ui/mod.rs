//! `cairn ui`: a read-only web server over the state log and saved plans.
//!
//! - [`model`]: the events folded once, with the indexes the views need (versions per
//!   address, operations and how they were settled); every view is a function to JSON.
//! - [`plan`]: a saved plan's changes by module and the resource dependency graph.
//! - this file: reading the log beside other commands, the HTTP server (axum) and its
//!   security checks.
//!
//! **Reading beside other commands.** The UI never holds the state's lock: a reader thread
//! follows the log with the engine's watcher (`engine::api::watch::LogWatch`: brief visits to
//! a sled log when its files changed and no command holds it, one polling connection to a
//! PostgreSQL log), so the UI never makes a command fail. While a command runs, the pages say
//! which one; its run appears when it finishes (on PostgreSQL, as it is written).
//!
//! **Security.** The server binds 127.0.0.1 only. Every request must carry the random token
//! printed with the URL (as `?token=`, the `X-Cairn-Token` header, or the cookie the first
//! page sets), and a `Host` header naming the loopback address and the port, so a page of
//! another origin that rebinds its DNS name to 127.0.0.1 is refused. Only `GET` routes exist;
//! values pass through masking, so no response holds a sensitive value.

pub mod model;
pub mod plan;
mod stack;

use crate::addr::ResourceInstanceAddr;
use crate::engine::api::plan_history;
use crate::engine::api::watch::{Holder, LogWatch};
use axum::extract::{Path as UrlPath, Query, Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use model::{Model, StateQuery, TimelineQuery};
use serde_json::{json, Value as J};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

const INDEX_HTML: &str = include_str!("assets/index.html");
const APP_JS: &str = include_str!("assets/app.js");
const APP_CSS: &str = include_str!("assets/app.css");
const DAGRE_JS: &str = include_str!("assets/dagre.min.js");

/// What `cairn ui` serves.
#[derive(Clone, Debug)]
pub(crate) struct Options {
    pub(crate) state_dir: PathBuf,
    /// The configuration directory (resource locations, the plan graph).
    pub(crate) config_dir: PathBuf,
    /// 0: the system chooses.
    pub(crate) port: u16,
    /// Saved plans to show.
    pub(crate) plans: Vec<PathBuf>,
    /// How often the reader looks at the log.
    pub(crate) poll: Duration,
    /// The stack in this directory (`*.tfcomponent.hcl`): the stack view, with each
    /// component instance's state (a workspace of `state_dir`) one click away.
    pub(crate) stack_dir: Option<PathBuf>,
}

/// What a reader sees of the log now.
#[derive(Clone, Debug, Default)]
struct Status {
    /// The command holding the state (from `lock.json`), while one does.
    busy: Option<J>,
    /// No state directory yet.
    missing: bool,
    error: Option<String>,
}

struct Shared {
    model: RwLock<Model>,
    /// The configuration (for plan graphs) or why there is none.
    config: Result<Arc<crate::config::Config>, String>,
    config_dir: PathBuf,
    /// The hash of the configuration files now (`engine::api::files_hash`), to tell whether a
    /// run's recorded plan was made from them.
    files_hash: Option<String>,
    status: Mutex<Status>,
    /// Which store the log is on: `sled` or `postgres`.
    store: Mutex<&'static str>,
    /// The saved plans shown (`-plan=FILE`), each read again when its file changes.
    plans: Vec<Mutex<SavedPlan>>,
    token: String,
    allowed_hosts: Vec<String>,
    /// The plan-only runs recorded beside the log (`cairn plan`), oldest first, as the reader
    /// last read them.
    plan_runs: RwLock<Arc<Vec<cairn_state::plan_runs::PlanRun>>>,
    /// The stack view's states, when `cairn ui` runs in a stack's directory.
    stack: Option<Arc<StackHub>>,
    /// Set once the reader has looked at the log (its first answer is in the model).
    looked: std::sync::atomic::AtomicBool,
}

/// A saved plan file as last read: its view, and the file's modification time and size then.
struct SavedPlan {
    path: PathBuf,
    name: String,
    stamp: Option<(std::time::SystemTime, u64)>,
    /// The plan's view, its state position and who made it; or why the file cannot be read now.
    view: Result<(J, u64, Option<crate::plan::saved::Made>), String>,
}

fn file_stamp(path: &Path) -> Option<(std::time::SystemTime, u64)> {
    let m = std::fs::metadata(path).ok()?;
    Some((m.modified().ok()?, m.len()))
}

impl SavedPlan {
    fn read(
        path: &Path,
        config: Option<&crate::config::Config>,
        config_error: Option<&str>,
        files_hash: &str,
    ) -> Result<SavedPlan, crate::diag::Diagnostic> {
        let stamp = file_stamp(path);
        let (plan, made) = crate::plan::saved::load_plan_made(
            path,
            crate::engine::api::encryption::plan().as_deref(),
        )?;
        let view = plan::PlanView::of_plan(path.display().to_string(), &plan, files_hash);
        Ok(SavedPlan {
            path: path.to_path_buf(),
            name: view.name.clone(),
            stamp,
            view: Ok((
                plan::plan_json(&view, config, config_error),
                plan.base_seq,
                made,
            )),
        })
    }

    /// Reads the file again if it changed since it was read.
    fn refresh(&mut self, shared: &Shared) {
        let stamp = file_stamp(&self.path);
        if stamp.is_some() && stamp == self.stamp {
            return;
        }
        let (config, error) = match &shared.config {
            Ok(c) => (Some(c.as_ref()), None),
            Err(e) => (None, Some(e.as_str())),
        };
        match SavedPlan::read(
            &self.path,
            config,
            error,
            shared.files_hash.as_deref().unwrap_or_default(),
        ) {
            Ok(p) => *self = p,
            // Caught while being written, or damaged: its last good reading is shown with
            // why (and it is read again on the next request).
            Err(d) => match &mut self.view {
                Ok((v, _, _)) => {
                    v["note"] = json!(format!(
                        "The file cannot be read now ({}: {}); this is its content as last read.",
                        d.summary, d.detail
                    ));
                    self.stamp = None;
                }
                Err(_) => {
                    self.stamp = None;
                    self.view = Err(format!("{}: {}", d.summary, d.detail));
                }
            },
        }
    }
}

/// A random token: 32 bytes from the operating system's generator, hex.
fn new_token() -> String {
    use rand::RngCore;
    let mut b = [0u8; 32];
    rand::rngs::OsRng.fill_bytes(&mut b);
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// The holder of the state as the pages show it.
fn holder_json(h: &Holder) -> J {
    match h {
        Holder::Unknown => json!({"command": "another process"}),
        Holder::Local {
            pid,
            command,
            since_ms,
        } => json!({"pid": pid, "command": command, "since_ms": since_ms}),
        Holder::Remote {
            pid,
            command,
            since_ms,
            who,
            host,
        } => json!({
            "pid": pid,
            "command": command,
            "since_ms": since_ms,
            "who": who,
            "host": host,
        }),
    }
}

/// Follows the log (`engine::api::watch`) into the model until the server is gone.
fn reader(shared: Arc<Shared>, state_dir: PathBuf, poll: Duration) {
    let mut watch =
        LogWatch::new(&state_dir).with_encryption(crate::engine::api::encryption::state());
    // Plan records: read again when their directory changes (sled), or every few seconds
    // (a shared store, where one query lists them).
    let mut plans_stamp = None;
    let mut plans_read_at: Option<std::time::Instant> = None;
    loop {
        let stamp = plan_history::local_stamp(&state_dir);
        let due = match &stamp {
            Some(_) => stamp != plans_stamp,
            None => plans_read_at.is_none_or(|t| t.elapsed() >= Duration::from_secs(2)),
        };
        if due {
            let (runs, warnings) = plan_history::list(&state_dir);
            plans_stamp = stamp;
            plans_read_at = Some(std::time::Instant::now());
            if let Ok(mut p) = shared.plan_runs.write() {
                *p = Arc::new(runs);
            }
            if !warnings.is_empty() {
                if let Ok(mut m) = shared.model.write() {
                    for w in warnings {
                        if !m.warnings.contains(&w) {
                            m.warnings.push(w);
                        }
                    }
                }
            }
        }
        let from = shared.model.read().map(|m| m.head() + 1).unwrap_or(1);
        let look = watch.look(from);
        if let Ok(mut m) = shared.store.lock() {
            *m = watch.store();
        }
        if let Some(e) = &look.open_error {
            if let Ok(mut s) = shared.status.lock() {
                s.error = Some(e.clone());
            }
        }
        if look.restarted {
            // Another store: its log is read from the start.
            let mut fresh = Model::new();
            if let Ok(c) = &shared.config {
                fresh.set_config(c);
            }
            if let Ok(mut m) = shared.model.write() {
                *m = fresh;
            }
        }
        if !look.events.is_empty() || !look.warnings.is_empty() {
            if let Ok(mut m) = shared.model.write() {
                m.extend(look.events);
                m.warnings.extend(look.warnings);
            }
        }
        let writer_busy = look.busy.is_some();
        if shared
            .model
            .read()
            .is_ok_and(|m| m.writer_busy != writer_busy)
        {
            if let Ok(mut m) = shared.model.write() {
                m.writer_busy = writer_busy;
            }
        }
        if let Ok(mut s) = shared.status.lock() {
            let busy = look.busy.as_ref().map(holder_json);
            if look.keep_status {
                s.busy = busy;
            } else {
                *s = Status {
                    busy,
                    missing: look.missing,
                    error: look.error,
                };
            }
        }
        shared
            .looked
            .store(true, std::sync::atomic::Ordering::SeqCst);
        if Arc::strong_count(&shared) == 1 {
            return;
        }
        std::thread::sleep(poll);
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn token_of(req: &Request) -> Option<String> {
    if let Some(q) = req.uri().query() {
        for pair in q.split('&') {
            if let Some(t) = pair.strip_prefix("token=") {
                return Some(t.to_string());
            }
        }
    }
    // An empty header is no token: the cookie below still counts.
    if let Some(t) = req
        .headers()
        .get("x-cairn-token")
        .and_then(|v| v.to_str().ok())
        .filter(|t| !t.is_empty())
    {
        return Some(t.to_string());
    }
    for v in req.headers().get_all(header::COOKIE) {
        let Ok(v) = v.to_str() else { continue };
        for c in v.split(';') {
            if let Some(t) = c.trim().strip_prefix("cairn_ui_token=") {
                return Some(t.to_string());
            }
        }
    }
    None
}

fn refuse(status: StatusCode, why: &str) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        format!("{why}\n"),
    )
        .into_response()
}

/// The security gate in front of every route: the Host header, then the token.
async fn guard(State(shared): State<Arc<Shared>>, req: Request, next: Next) -> Response {
    let host = req
        .headers()
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("");
    if !shared.allowed_hosts.iter().any(|h| h == host) {
        return refuse(
            StatusCode::FORBIDDEN,
            &format!(
                "Host {host:?} is not allowed: open the address `cairn ui` printed ({})",
                shared.allowed_hosts[0]
            ),
        );
    }
    let Some(token) = token_of(&req) else {
        return refuse(
            StatusCode::UNAUTHORIZED,
            "This page needs the access token: open the full address `cairn ui` printed.",
        );
    };
    if !constant_time_eq(token.as_bytes(), shared.token.as_bytes()) {
        return refuse(
            StatusCode::UNAUTHORIZED,
            "The access token is wrong: open the full address `cairn ui` printed.",
        );
    }
    let mut resp = next.run(req).await;
    let h = resp.headers_mut();
    // The API's answers change with every run: never stored (the assets say how they are).
    if !h.contains_key(header::CACHE_CONTROL) {
        h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    }
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; frame-ancestors 'none'",
        ),
    );
    if let Ok(v) = HeaderValue::from_str(&format!(
        "cairn_ui_token={}; HttpOnly; SameSite=Strict; Path=/",
        shared.token
    )) {
        h.insert(header::SET_COOKIE, v);
    }
    resp
}

/// A static asset prepared once: its gzip form and its entity tag (a hash of its bytes).
struct Asset {
    content_type: &'static str,
    body: &'static str,
    gzip: Vec<u8>,
    etag: String,
}

impl Asset {
    fn new(content_type: &'static str, body: &'static str) -> Asset {
        use sha2::Digest;
        use std::io::Write;
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        // Writing to memory cannot fail.
        let gzip = gz
            .write_all(body.as_bytes())
            .and_then(|_| gz.finish())
            .unwrap_or_default();
        let h = sha2::Sha256::digest(body.as_bytes());
        let etag = format!(
            "\"{}\"",
            h[..12]
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect::<String>()
        );
        Asset {
            content_type,
            body,
            gzip,
            etag,
        }
    }
}

/// The pages' files: compressed when the browser takes gzip, and cacheable: the browser keeps
/// them and asks again with their entity tag, which is answered "not modified" (they change
/// only with the binary).
fn assets() -> &'static [(&'static str, Asset)] {
    static ASSETS: std::sync::OnceLock<Vec<(&'static str, Asset)>> = std::sync::OnceLock::new();
    ASSETS.get_or_init(|| {
        vec![
            ("/", Asset::new("text/html; charset=utf-8", INDEX_HTML)),
            (
                "/assets/app.js",
                Asset::new("text/javascript; charset=utf-8", APP_JS),
            ),
            (
                "/assets/app.css",
                Asset::new("text/css; charset=utf-8", APP_CSS),
            ),
            (
                "/assets/dagre.min.js",
                Asset::new("text/javascript; charset=utf-8", DAGRE_JS),
            ),
        ]
    })
}

async fn asset(req: Request) -> Response {
    let Some((_, a)) = assets().iter().find(|(p, _)| *p == req.uri().path()) else {
        return not_found("no such file".into());
    };
    let h = req.headers();
    let cached = h
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|t| t.trim() == a.etag));
    let gzip = h
        .get(header::ACCEPT_ENCODING)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|e| e.trim().starts_with("gzip")));
    let mut resp = if cached {
        StatusCode::NOT_MODIFIED.into_response()
    } else if gzip && !a.gzip.is_empty() {
        (
            [
                (header::CONTENT_TYPE, a.content_type),
                (header::CONTENT_ENCODING, "gzip"),
            ],
            a.gzip.clone(),
        )
            .into_response()
    } else {
        ([(header::CONTENT_TYPE, a.content_type)], a.body).into_response()
    };
    let hs = resp.headers_mut();
    hs.insert(header::VARY, HeaderValue::from_static("Accept-Encoding"));
    if let Ok(v) = HeaderValue::from_str(&a.etag) {
        hs.insert(header::ETAG, v);
    }
    // Kept, and checked with the server (the entity tag) before each use.
    hs.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("private, no-cache"),
    );
    resp
}

/// axum's `Query`, answering a malformed parameter (`?limit=abc`) as every other bad request
/// of the API is answered — 400 with `{"error": …}` naming the parameter and what it takes —
/// where axum's own rejection is a line of plain text the page cannot show.
struct Params<T>(T);

#[axum::async_trait]
impl<T, S> axum::extract::FromRequestParts<S> for Params<T>
where
    T: serde::de::DeserializeOwned + Send,
    S: Send + Sync,
{
    type Rejection = Response;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        state: &S,
    ) -> Result<Self, Response> {
        match Query::<T>::from_request_parts(parts, state).await {
            Ok(Query(q)) => Ok(Params(q)),
            Err(r) => {
                // Which parameter: the first that fails on its own.
                let raw = parts.uri.query().unwrap_or_default();
                let culprit = raw.split('&').find(|pair| {
                    format!("/?{pair}")
                        .parse::<axum::http::Uri>()
                        .is_ok_and(|uri| Query::<T>::try_from_uri(&uri).is_err())
                });
                let why = r.body_text();
                let why = why
                    .strip_prefix("Failed to deserialize query string: ")
                    .unwrap_or(&why);
                Err(bad_request(match culprit {
                    Some(pair) => format!(
                        "Invalid value for query parameter \"{}\": {why}",
                        pair.split('=').next().unwrap_or(pair)
                    ),
                    None => format!("Invalid query parameters: {why}"),
                }))
            }
        }
    }
}

/// axum's `Path` for a numeric segment (`/api/run/:id`), with [`Params`]' answer to a
/// malformed one (`/api/run/abc`).
struct Segment<T>(T);

#[axum::async_trait]
impl<T, S> axum::extract::FromRequestParts<S> for Segment<T>
where
    T: serde::de::DeserializeOwned + Send,
    S: Send + Sync,
{
    type Rejection = Response;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        state: &S,
    ) -> Result<Self, Response> {
        match UrlPath::<T>::from_request_parts(parts, state).await {
            Ok(UrlPath(v)) => Ok(Segment(v)),
            Err(r) => {
                let segment = parts.uri.path().rsplit('/').next().unwrap_or_default();
                Err(bad_request(format!(
                    "Invalid path segment \"{segment}\": {}",
                    r.body_text()
                )))
            }
        }
    }
}

fn bad_request(why: String) -> Response {
    (StatusCode::BAD_REQUEST, Json(json!({"error": why}))).into_response()
}

fn not_found(why: String) -> Response {
    (StatusCode::NOT_FOUND, Json(json!({"error": why}))).into_response()
}

fn with_model<T>(shared: &Shared, f: impl FnOnce(&Model) -> T) -> T {
    match shared.model.read() {
        Ok(m) => f(&m),
        Err(p) => f(&p.into_inner()),
    }
}

async fn head(State(s): State<Arc<Shared>>) -> Json<J> {
    let status = s.status.lock().map(|s| s.clone()).unwrap_or_default();
    let (head, runs, warnings) = with_model(&s, |m| (m.head(), m.run_count(), m.warnings.clone()));
    let store = s.store.lock().map(|s| *s).unwrap_or("sled");
    let stack = match s.stack.clone() {
        Some(h) => tokio::task::spawn_blocking(move || h.stamp()).await.ok(),
        None => None,
    };
    Json(json!({
        // In a stack's directory: what changes when a stack run is recorded.
        "stack": stack,
        "head": head,
        "runs": runs,
        "store": store,
        "busy": status.busy,
        "missing": status.missing,
        "error": status.error,
        "warnings": warnings,
        // Changes when a plan-only run is recorded, so an open timeline shows it.
        "plan_runs": s.plan_runs.read().map(|p| format!("{}/{}", p.len(), p.last().map(|r| r.id.as_str()).unwrap_or(""))).unwrap_or_default(),
        "plans": s.plans.iter().map(|p| p.lock().map(|p| p.name.clone()).unwrap_or_default()).collect::<Vec<_>>(),
        // Changes when a plan file changes, so an open page reads it again.
        "plans_stamp": s.plans.iter().map(|p| p.lock().ok().and_then(|p| file_stamp(&p.path)).map(|(t, n)| format!("{t:?}/{n}")).unwrap_or_default()).collect::<Vec<_>>(),
    }))
}

async fn timeline(State(s): State<Arc<Shared>>, Params(q): Params<TimelineQuery>) -> Json<J> {
    let plans = s.plan_runs.read().map(|p| p.clone()).unwrap_or_default();
    Json(with_model(&s, |m| m.timeline_with_plans(&q, &plans)))
}

async fn run(State(s): State<Arc<Shared>>, Segment(id): Segment<u64>) -> Response {
    match with_model(&s, |m| m.run(id)) {
        Some(j) => Json(j).into_response(),
        None => not_found(format!("there is no run {id}")),
    }
}

async fn state(State(s): State<Arc<Shared>>, Params(q): Params<StateQuery>) -> Response {
    match with_model(&s, |m| m.state_at(&q)) {
        Ok(j) => Json(j).into_response(),
        Err(e) => bad_request(e),
    }
}

#[derive(serde::Deserialize)]
struct DiffQuery {
    from: u64,
    to: u64,
}

async fn diff(State(s): State<Arc<Shared>>, Params(q): Params<DiffQuery>) -> Response {
    match with_model(&s, |m| m.diff(q.from, q.to, 500)) {
        Ok(j) => Json(j).into_response(),
        Err(e) => bad_request(e),
    }
}

#[derive(serde::Deserialize)]
struct AddrQuery {
    addr: String,
    at: Option<u64>,
    #[serde(default)]
    offset: usize,
    limit: Option<usize>,
}

fn parse_addr(a: &str) -> Result<ResourceInstanceAddr, Box<Response>> {
    a.parse().map_err(|e| {
        Box::new(bad_request(format!(
            "{a:?} is not a resource instance address: {e}"
        )))
    })
}

async fn instance(State(s): State<Arc<Shared>>, Params(q): Params<AddrQuery>) -> Response {
    let addr = match parse_addr(&q.addr) {
        Ok(a) => a,
        Err(r) => return *r,
    };
    match with_model(&s, |m| m.instance(&addr, q.at)) {
        Some(j) => Json(j).into_response(),
        None => not_found(format!("{addr} is not in the state at that moment")),
    }
}

async fn life(State(s): State<Arc<Shared>>, Params(q): Params<AddrQuery>) -> Response {
    let addr = match parse_addr(&q.addr) {
        Ok(a) => a,
        Err(r) => return *r,
    };
    let limit = q.limit.unwrap_or(200).clamp(1, 5000);
    match with_model(&s, |m| m.life_page(&addr, q.offset, limit)) {
        Some(j) => Json(j).into_response(),
        None => not_found(format!("no event of the log touched {addr}")),
    }
}

#[derive(serde::Deserialize)]
struct SearchQuery {
    #[serde(default)]
    q: String,
    #[serde(default)]
    offset: usize,
    limit: Option<usize>,
}

async fn addresses(State(s): State<Arc<Shared>>, Params(q): Params<SearchQuery>) -> Json<J> {
    let limit = q.limit.unwrap_or(100).clamp(1, 1000);
    Json(with_model(&s, |m| m.addresses(&q.q, q.offset, limit)))
}

/// The plan of a run: the one it recorded in the log (`RunPlanned`: every `apply` and
/// `destroy` that had something to do, whether it made its plan or applied a saved one), or,
/// for a run from before Cairn recorded plans, the saved plan file it applied if that file is
/// still there.
async fn run_plan(State(s): State<Arc<Shared>>, Segment(id): Segment<u64>) -> Response {
    let (config, error) = match &s.config {
        Ok(c) => (Some(c.as_ref()), None),
        Err(e) => (None, Some(e.as_str())),
    };
    let recorded = with_model(&s, |m| {
        m.run_plan(id)
            .map(|(record, command)| (record.clone(), command))
    });
    if let Some((record, command)) = recorded {
        // A plan recorded before plans kept their graph is drawn from the configuration now.
        let note = match &s.files_hash {
            Some(h)
                if record.graph.is_none()
                    && !record.files_hash.is_empty()
                    && &record.files_hash != h =>
            {
                Some(
                    "The configuration files changed since this run: the graph is drawn from the \
                 configuration as it is now; the changes are as the run planned them."
                        .to_string(),
                )
            }
            _ => None,
        };
        let view = plan::PlanView {
            name: format!(
                "the plan of run {id} (cairn {command}{})",
                if record.saved { ", a saved plan" } else { "" }
            ),
            record,
            errored: false,
            warnings: Vec::new(),
            note,
        };
        return Json(plan::plan_json(&view, config, error)).into_response();
    }
    let Some(file) = with_model(&s, |m| m.run_plan_file(id)) else {
        return not_found(format!(
            "run {id} recorded no plan (it changed nothing, or it is not an apply or destroy)"
        ));
    };
    let path = s.config_dir.join(&file);
    let plan = match crate::plan::saved::load_plan(
        &path,
        crate::engine::api::encryption::plan().as_deref(),
    ) {
        Ok(p) => p,
        Err(d) => return not_found(format!("{}: {}", d.summary, d.detail)),
    };
    let view = plan::PlanView::of_plan(
        format!("{file} (applied by run {id})"),
        &plan,
        s.files_hash.as_deref().unwrap_or_default(),
    );
    Json(plan::plan_json(&view, config, error)).into_response()
}

/// A saved plan as its file is now: who made it, where, when and at which state position;
/// whether the state moved since (then `apply FILE` refuses it) and which run applied it.
async fn plan_at(State(s): State<Arc<Shared>>, Segment(i): Segment<usize>) -> Response {
    let Some(entry) = s.plans.get(i) else {
        return not_found(format!("there is no plan {i}"));
    };
    let mut p = match entry.lock() {
        Ok(p) => p,
        Err(e) => e.into_inner(),
    };
    p.refresh(&s);
    let (view, base_seq, made) = match &p.view {
        Ok(v) => v.clone(),
        Err(e) => {
            return not_found(format!(
                "the plan file {} cannot be read now: {e}",
                p.path.display()
            ))
        }
    };
    let file_name = p
        .path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    drop(p);
    let (head, applied_by) = with_model(&s, |m| {
        (m.head(), m.saved_plan_applied_by(base_seq, &file_name))
    });
    let mut view = view;
    view["made"] = json!(made);
    view["base_seq"] = json!(base_seq);
    view["head"] = json!(head);
    view["applied_by"] = json!(applied_by);
    view["stale"] = json!(head != base_seq);
    Json(view).into_response()
}

/// A stack's states (`cairn ui` in a stack's directory): one `Shared` per component
/// instance's state, its reader started the first time it is named.
struct StackHub {
    dir: PathBuf,
    root: PathBuf,
    token: String,
    allowed_hosts: Vec<String>,
    poll: Duration,
    subs: Mutex<std::collections::BTreeMap<String, Arc<Shared>>>,
    /// The workspaces of the state root, as last listed (listed again every few seconds).
    listed: Mutex<Option<(std::time::Instant, Vec<String>)>>,
    /// The stack runs' stamp, as last read (read again at most every second: every open
    /// page asks for it each second, and on a shared store it is a query).
    runs_stamp: Mutex<Option<(std::time::Instant, String)>>,
}

impl StackHub {
    fn new(
        dir: PathBuf,
        root: PathBuf,
        token: String,
        allowed_hosts: Vec<String>,
        poll: Duration,
    ) -> StackHub {
        StackHub {
            dir,
            root,
            token,
            allowed_hosts,
            poll,
            subs: Mutex::new(Default::default()),
            listed: Mutex::new(None),
            runs_stamp: Mutex::new(None),
        }
    }

    fn workspaces(&self) -> Vec<String> {
        let mut listed = match self.listed.lock() {
            Ok(l) => l,
            Err(e) => e.into_inner(),
        };
        if let Some((at, names)) = &*listed {
            if at.elapsed() < Duration::from_secs(2) {
                return names.clone();
            }
        }
        let names = stack::workspaces(&self.root);
        *listed = Some((std::time::Instant::now(), names.clone()));
        names
    }

    /// The views of workspace `ws`'s state (only a component instance's of this stack).
    fn sub(&self, ws: &str) -> Result<Arc<Shared>, String> {
        if let Some(s) = self.subs.lock().ok().and_then(|m| m.get(ws).cloned()) {
            return Ok(s);
        }
        if !self.workspaces().iter().any(|n| n == ws) {
            return Err(format!("the stack has no component state {ws:?}"));
        }
        let (module_dir, loaded) = match stack::module_dir(&self.dir, ws) {
            Some(d) => {
                let l = load_config(&d);
                (d, l)
            }
            None => (
                self.dir.clone(),
                (None, Some(format!("the module of {ws} is not found"))),
            ),
        };
        let files_hash = loaded.0.as_ref().map(crate::engine::api::files_hash);
        let shared = Arc::new(new_shared(
            loaded,
            files_hash,
            &module_dir,
            self.token.clone(),
            self.allowed_hosts.clone(),
        ));
        let state_dir = crate::engine::api::workspaces::ensure_dir(&self.root, ws)
            .map_err(|d| format!("{}: {}", d.summary, d.detail))?;
        let for_reader = shared.clone();
        let poll = self.poll;
        std::thread::Builder::new()
            .name("cairn-ui-stack-reader".into())
            .spawn(move || reader(for_reader, state_dir, poll))
            .map_err(|e| e.to_string())?;
        // Its first look, so the stack view counts what is there.
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while !shared.looked.load(std::sync::atomic::Ordering::SeqCst)
            && std::time::Instant::now() < deadline
        {
            std::thread::sleep(Duration::from_millis(20));
        }
        if let Ok(mut m) = self.subs.lock() {
            m.insert(ws.to_string(), shared.clone());
        }
        Ok(shared)
    }

    /// What changes when a stack run is recorded or a component's state moves.
    fn stamp(&self) -> String {
        let heads: Vec<String> = self
            .subs
            .lock()
            .map(|m| {
                m.iter()
                    .map(|(n, s)| format!("{n}@{}", with_model(s, |m| m.head())))
                    .collect()
            })
            .unwrap_or_default();
        let runs = {
            let mut cached = match self.runs_stamp.lock() {
                Ok(c) => c,
                Err(e) => e.into_inner(),
            };
            match &*cached {
                Some((at, s)) if at.elapsed() < Duration::from_millis(900) => s.clone(),
                _ => {
                    let s = stack::runs_stamp(&self.root);
                    *cached = Some((std::time::Instant::now(), s.clone()));
                    s
                }
            }
        };
        format!("{runs};{}", heads.join(","))
    }
}

fn stack_hub(s: &Shared) -> Result<Arc<StackHub>, Box<Response>> {
    s.stack.clone().ok_or_else(|| {
        Box::new(not_found(
            "`cairn ui` was not started in a stack's directory".into(),
        ))
    })
}

/// A request naming a component instance's state (`?ws=NAME`) is answered by that state's
/// own views.
async fn stack_scope(State(s): State<Arc<Shared>>, req: Request, next: Next) -> Response {
    let Some(h) = s.stack.clone() else {
        return next.run(req).await;
    };
    let path = req.uri().path();
    if !path.starts_with("/api/") || path.starts_with("/api/stack") {
        return next.run(req).await;
    }
    let Some(ws) = stack::ws_of(req.uri().query()) else {
        return next.run(req).await;
    };
    let sub = match tokio::task::spawn_blocking(move || h.sub(&ws)).await {
        Ok(Ok(sub)) => sub,
        Ok(Err(e)) => return not_found(e),
        Err(e) => return not_found(e.to_string()),
    };
    // A new request of the same method, address, headers and body: the outer router's
    // extensions (its path parameters) are not the inner one's.
    let (parts, body) = req.into_parts();
    let mut fresh = Request::new(body);
    *fresh.method_mut() = parts.method;
    *fresh.uri_mut() = parts.uri;
    *fresh.version_mut() = parts.version;
    *fresh.headers_mut() = parts.headers;
    use tower::ServiceExt;
    match router(sub).oneshot(fresh).await {
        Ok(r) => r.into_response(),
        Err(e) => match e {},
    }
}

/// `/api/stack`: the stack, its component instances' states and its runs.
async fn stack_overview(State(s): State<Arc<Shared>>) -> Response {
    let h = match stack_hub(&s) {
        Ok(h) => h,
        Err(r) => return *r,
    };
    let got = tokio::task::spawn_blocking(move || {
        let summary = |ws: &str| match h.sub(ws) {
            Ok(sub) => with_model(&sub, |m| m.state_summary()),
            Err(e) => json!({ "error": e }),
        };
        stack::overview_json(&h.dir, &h.root, &h.workspaces(), &summary)
    })
    .await;
    match got {
        Ok(j) => Json(j).into_response(),
        Err(e) => not_found(e.to_string()),
    }
}

/// `/api/stack/run/ID`: one stack run.
async fn stack_run(State(s): State<Arc<Shared>>, UrlPath(id): UrlPath<String>) -> Response {
    let h = match stack_hub(&s) {
        Ok(h) => h,
        Err(r) => return *r,
    };
    let got =
        tokio::task::spawn_blocking(move || stack::stack_run_json(&h.root, &id).map(|r| (r, id)))
            .await;
    match got {
        Ok(Ok((Some(j), _))) => Json(j).into_response(),
        Ok(Ok((None, id))) => not_found(format!("there is no stack run {id}")),
        Ok(Err(e)) => not_found(e),
        Err(e) => not_found(e.to_string()),
    }
}

fn router(shared: Arc<Shared>) -> Router {
    Router::new()
        .route("/", get(asset))
        .route("/assets/app.js", get(asset))
        .route("/assets/app.css", get(asset))
        .route("/assets/dagre.min.js", get(asset))
        .route("/api/head", get(head))
        .route("/api/timeline", get(timeline))
        .route("/api/run/:id", get(run))
        .route("/api/state", get(state))
        .route("/api/diff", get(diff))
        .route("/api/instance", get(instance))
        .route("/api/life", get(life))
        .route("/api/addresses", get(addresses))
        .route("/api/plan/:i", get(plan_at))
        .route("/api/run/:id/plan", get(run_plan))
        .route("/api/stack", get(stack_overview))
        .route("/api/stack/run/:id", get(stack_run))
        .layer(axum::middleware::from_fn_with_state(
            shared.clone(),
            stack_scope,
        ))
        .layer(axum::middleware::from_fn_with_state(shared.clone(), guard))
        .with_state(shared)
}

/// Loads the configuration in `dir` when it has one (for locations and the plan graph).
fn load_config(dir: &Path) -> (Option<crate::config::Config>, Option<String>) {
    let has_tf = std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .any(|e| e.path().extension().is_some_and(|x| x == "tf"))
        })
        .unwrap_or(false);
    if !has_tf {
        return (
            None,
            Some(format!(
                "{} has no configuration (*.tf): the graph needs it",
                dir.display()
            )),
        );
    }
    let (config, diags) = crate::config::load(dir);
    if diags.has_errors() {
        let first = diags
            .iter()
            .find(|d| d.severity == crate::diag::Severity::Error)
            .map(|d| d.summary.clone())
            .unwrap_or_default();
        return (
            config,
            Some(format!("the configuration has errors ({first})")),
        );
    }
    (config, None)
}

/// The views of one state: its configuration (`config_dir`: locations, plan graphs), an
/// empty model for the reader to fill, no saved plans.
fn new_shared(
    (config, config_error): (Option<crate::config::Config>, Option<String>),
    files_hash: Option<String>,
    config_dir: &Path,
    token: String,
    allowed_hosts: Vec<String>,
) -> Shared {
    let mut model = Model::new();
    if let Some(c) = &config {
        model.set_config(c);
    }
    let config = match (config, config_error) {
        (Some(c), None) => Ok(Arc::new(c)),
        (_, e) => Err(e.unwrap_or_else(|| "the configuration did not load".into())),
    };
    Shared {
        model: RwLock::new(model),
        config,
        config_dir: config_dir.to_path_buf(),
        files_hash,
        status: Mutex::new(Status::default()),
        store: Mutex::new("sled"),
        plans: Vec::new(),
        token,
        allowed_hosts,
        plan_runs: RwLock::new(Arc::new(Vec::new())),
        stack: None,
        looked: std::sync::atomic::AtomicBool::new(false),
    }
}

/// A server ready to run: bound, with its address and token.
pub(crate) struct Server {
    listener: std::net::TcpListener,
    shared: Arc<Shared>,
    opts: Options,
    pub(crate) url: String,
}

impl Server {
    /// Binds 127.0.0.1 and prepares the views (plans are read now: a bad plan file is an
    /// error here, not a broken page).
    pub(crate) fn bind(opts: Options) -> Result<Server, crate::diag::Diagnostic> {
        use crate::diag::Diagnostic;
        let (config, config_error) = load_config(&opts.config_dir);
        let files_hash = config.as_ref().map(crate::engine::api::files_hash);
        let mut plans = Vec::new();
        for p in &opts.plans {
            plans.push(Mutex::new(SavedPlan::read(
                p,
                config.as_ref(),
                config_error.as_deref(),
                files_hash.as_deref().unwrap_or_default(),
            )?));
        }
        let listener = std::net::TcpListener::bind(("127.0.0.1", opts.port)).map_err(|e| {
            Diagnostic::error(
                "Cannot start the UI server",
                format!("Binding 127.0.0.1:{}: {e}.", opts.port),
            )
        })?;
        let port = listener
            .local_addr()
            .map_err(|e| Diagnostic::error("Cannot start the UI server", e.to_string()))?
            .port();
        let token = new_token();
        let allowed_hosts = vec![format!("127.0.0.1:{port}"), format!("localhost:{port}")];
        let hub = opts.stack_dir.as_ref().map(|dir| {
            Arc::new(StackHub::new(
                dir.clone(),
                opts.state_dir.clone(),
                token.clone(),
                allowed_hosts.clone(),
                opts.poll,
            ))
        });
        let mut shared = new_shared(
            (config, config_error),
            files_hash,
            &opts.config_dir,
            token.clone(),
            allowed_hosts,
        );
        shared.plans = plans;
        shared.stack = hub;
        let shared = Arc::new(shared);
        Ok(Server {
            listener,
            shared,
            opts,
            url: format!("http://127.0.0.1:{port}/?token={token}"),
        })
    }

    /// Serves until `stop` resolves. Reads the log on a thread of its own.
    pub(crate) async fn serve(
        self,
        stop: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> Result<(), String> {
        let shared = self.shared.clone();
        let dir = self.opts.state_dir.clone();
        let poll = self.opts.poll;
        std::thread::Builder::new()
            .name("cairn-ui-reader".into())
            .spawn(move || reader(shared, dir, poll))
            .map_err(|e| e.to_string())?;
        self.listener
            .set_nonblocking(true)
            .map_err(|e| e.to_string())?;
        let listener =
            tokio::net::TcpListener::from_std(self.listener).map_err(|e| e.to_string())?;
        let app = router(self.shared);
        axum::serve(listener, app)
            .with_graceful_shutdown(stop)
            .await
            .map_err(|e| e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_compare_in_constant_time_and_differ() {
        let a = new_token();
        let b = new_token();
        assert_eq!(a.len(), 64);
        assert_ne!(a, b);
        assert!(constant_time_eq(a.as_bytes(), a.as_bytes()));
        assert!(!constant_time_eq(a.as_bytes(), b.as_bytes()));
        assert!(!constant_time_eq(a.as_bytes(), &a.as_bytes()[1..]));
    }
}
