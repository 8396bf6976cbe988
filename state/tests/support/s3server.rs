//! A real S3-compatible server for tests: moto's server (PyPI `moto[s3]` with `flask` and
//! `flask-cors`; `.ci/run` installs it in the virtualenv `/tmp/cairn-moto`), on 127.0.0.1 at
//! a free port. It answers a conditional put (`If-None-Match: *`) on an existing key with
//! 412, as S3 does. The server stops when the `S3Server` is dropped, and also when the test
//! process ends in any way: it runs under a shell that kills it once the test's pipe to it
//! closes, and removes its directory in /tmp (the shared server's too).
//!
//! Binary: `CAIRN_MOTO_SERVER`, else `/tmp/cairn-moto/bin/moto_server`, else `moto_server` on
//! `PATH`. When no server can start, [`shared`] panics under `CI=true` and otherwise returns
//! `None` after printing why (the test then skips).
#![allow(dead_code)]

use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The credentials tests use (moto takes any; the secret must never be printed).
pub const ACCESS_KEY: &str = "AKIACAIRNTEST0000001";
pub const SECRET_KEY: &str = "s3-test-s3cret-key-never-printed";
pub const REGION: &str = "us-east-1";

pub struct S3Server {
    pub port: u16,
    root: PathBuf,
    child: Option<(Child, ChildStdin)>,
    options: Options,
}

/// How a server of a test's own runs.
#[derive(Clone, Copy, Default)]
pub struct Options {
    /// Every request is recorded (moto's recorder, `MOTO_ENABLE_RECORDING`) in a file: what
    /// was sent can be checked ([`S3Server::recording`]), and a restarted server replays it
    /// to come back with the data it had ([`S3Server::restart`]).
    pub recording: bool,
    /// HTTPS with a self-signed certificate (moto's `--ssl`).
    pub tls: bool,
}

fn moto_bin() -> Result<PathBuf, String> {
    if let Some(p) = std::env::var_os("CAIRN_MOTO_SERVER") {
        return Ok(PathBuf::from(p));
    }
    let venv = PathBuf::from("/tmp/cairn-moto/bin/moto_server");
    if venv.exists() {
        return Ok(venv);
    }
    let out = Command::new("sh")
        .args(["-c", "command -v moto_server"])
        .output()
        .map_err(|e| e.to_string())?;
    let p = String::from_utf8_lossy(&out.stdout).trim().to_string();
    if p.is_empty() {
        return Err("no moto_server: python3 -m venv /tmp/cairn-moto && \
                    /tmp/cairn-moto/bin/pip install 'moto[s3]' flask flask-cors (as .ci/run \
                    does), or set CAIRN_MOTO_SERVER"
            .into());
    }
    Ok(PathBuf::from(p))
}

fn free_port() -> Result<u16, String> {
    let l = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    Ok(l.local_addr().map_err(|e| e.to_string())?.port())
}

impl S3Server {
    pub fn start() -> Result<S3Server, String> {
        S3Server::start_with(Options::default())
    }

    pub fn start_with(options: Options) -> Result<S3Server, String> {
        let port = free_port()?;
        let root = std::env::temp_dir().join(format!("cairn-s3-{}-{port}", std::process::id()));
        std::fs::create_dir_all(&root).map_err(|e| e.to_string())?;
        let mut s = S3Server {
            port,
            root,
            child: None,
            options,
        };
        s.launch()?;
        Ok(s)
    }

    /// Starts moto on `self.port` and waits until it answers.
    fn launch(&mut self) -> Result<(), String> {
        let bin = moto_bin()?;
        let root = &self.root;
        let mut env = String::new();
        if self.options.recording {
            env = format!(
                "MOTO_ENABLE_RECORDING=True MOTO_RECORDER_FILEPATH='{}' ",
                root.join("recording.jsonl").display()
            );
        }
        let ssl = if self.options.tls { " --ssl" } else { "" };
        let script = format!(
            "{env}'{}' -H 127.0.0.1 -p {}{ssl} >>'{}' 2>&1 & pid=$!; echo $pid >'{}'; read _; \
             kill -CONT $pid; kill $pid; wait $pid; [ -e '{root}/keep' ] || rm -rf '{root}'",
            bin.display(),
            self.port,
            root.join("log").display(),
            root.join("pid").display(),
            root = root.display()
        );
        let _ = std::fs::remove_file(root.join("pid"));
        let mut child = Command::new("/bin/sh")
            .args(["-c", &script])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot start moto_server: {e}"))?;
        let stdin = child.stdin.take().expect("piped");
        self.child = Some((child, stdin));
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let up = if self.options.tls {
                std::net::TcpStream::connect(("127.0.0.1", self.port)).is_ok()
            } else {
                self.request("GET", "/", &[]).is_ok()
            };
            if up {
                return Ok(());
            }
            if Instant::now() > deadline {
                let log = std::fs::read_to_string(self.root.join("log")).unwrap_or_default();
                return Err(format!("moto_server did not answer in 60 s:\n{log}"));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Kills the server (SIGKILL: no goodbye to its clients); its recording stays.
    pub fn stop(&mut self) {
        let pid = std::fs::read_to_string(self.root.join("pid")).expect("pid file");
        let ok = Command::new("kill")
            .args(["-KILL", pid.trim()])
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "kill -KILL moto_server");
        // Its directory (the recording) outlives this server, for `restart`.
        std::fs::write(self.root.join("keep"), b"").expect("keep");
        if let Some((mut child, stdin)) = self.child.take() {
            drop(stdin);
            let _ = child.wait();
        }
    }

    /// Starts the server again on the same port and replays its recording, so it has the
    /// buckets and objects it had when it stopped, as a server with a disk would.
    pub fn restart(&mut self) {
        assert!(self.options.recording, "only a recording server restarts");
        let _ = std::fs::remove_file(self.root.join("keep"));
        self.launch().expect("moto_server starts again");
        let (status, body) = self
            .request("POST", "/moto-api/recorder/replay-recording", &[])
            .expect("moto answers");
        assert_eq!(status, 200, "replay: {}", String::from_utf8_lossy(&body));
    }

    /// Every request the server recorded (see [`Options::recording`]), as moto writes them:
    /// `method`, `url`, `headers`.
    pub fn recording(&self) -> Vec<serde_json::Value> {
        std::fs::read_to_string(self.root.join("recording.jsonl"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    pub fn endpoint(&self) -> String {
        let scheme = if self.options.tls { "https" } else { "http" };
        format!("{scheme}://127.0.0.1:{}", self.port)
    }

    /// One plain HTTP/1.1 request (moto does not check signatures; a header says who asks):
    /// the status and the body.
    pub fn request(&self, method: &str, path: &str, body: &[u8]) -> Result<(u16, Vec<u8>), String> {
        let mut c =
            std::net::TcpStream::connect(("127.0.0.1", self.port)).map_err(|e| e.to_string())?;
        c.set_read_timeout(Some(Duration::from_secs(30))).ok();
        let head = format!(
            "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Length: {}\r\n\
             Authorization: AWS4-HMAC-SHA256 Credential={ACCESS_KEY}/20260101/{REGION}/s3/aws4_request, \
             SignedHeaders=host, Signature=0\r\nConnection: close\r\n\r\n",
            self.port,
            body.len()
        );
        c.write_all(head.as_bytes()).map_err(|e| e.to_string())?;
        c.write_all(body).map_err(|e| e.to_string())?;
        let mut reply = Vec::new();
        c.read_to_end(&mut reply).map_err(|e| e.to_string())?;
        let text_end = reply
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .ok_or("no reply head")?;
        let head = String::from_utf8_lossy(&reply[..text_end]);
        let status = head
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .ok_or("no status")?;
        Ok((status, reply[text_end + 4..].to_vec()))
    }

    /// Creates bucket `name`.
    pub fn bucket(&self, name: &str) {
        let (status, body) = self
            .request("PUT", &format!("/{name}"), &[])
            .expect("moto answers");
        assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    }

    /// The keys in bucket `name` (a listing of up to 1,000).
    pub fn keys(&self, name: &str) -> Vec<String> {
        let (_, body) = self
            .request("GET", &format!("/{name}?list-type=2"), &[])
            .expect("moto answers");
        let text = String::from_utf8_lossy(&body);
        text.split("<Key>")
            .skip(1)
            .filter_map(|k| k.split("</Key>").next())
            .map(str::to_string)
            .collect()
    }

    /// Object `key` of bucket `name`, if there is one.
    pub fn object(&self, name: &str, key: &str) -> Option<Vec<u8>> {
        let (status, body) = self.request("GET", &format!("/{name}/{key}"), &[]).ok()?;
        (status == 200).then_some(body)
    }

    /// Stops the server answering (SIGSTOP) or lets it go on (SIGCONT), keeping its data.
    pub fn pause(&self, paused: bool) {
        let pid = std::fs::read_to_string(self.root.join("pid")).expect("pid file");
        let sig = if paused { "-STOP" } else { "-CONT" };
        let ok = Command::new("kill")
            .args([sig, pid.trim()])
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "kill {sig} moto_server");
    }
}

impl Drop for S3Server {
    fn drop(&mut self) {
        if let Some((mut child, stdin)) = self.child.take() {
            drop(stdin);
            let _ = child.wait();
        }
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

static SHARED: OnceLock<Result<S3Server, String>> = OnceLock::new();

/// One server for the whole test process (each test uses its own bucket). `None` (printed)
/// when none can start outside CI; a panic under `CI=true`.
pub fn shared() -> Option<&'static S3Server> {
    match SHARED.get_or_init(S3Server::start) {
        Ok(s) => Some(s),
        Err(e) if std::env::var("CI").is_ok_and(|v| v == "true") => {
            panic!("CI needs an S3 server for this test: {e}")
        }
        Err(e) => {
            eprintln!("skipped: no S3 server ({e})");
            None
        }
    }
}

/// A bucket name of its own for a test.
pub fn bucket_name(test: &str) -> String {
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!(
        "cairn-{}-{}-{n}",
        test.replace('_', "-"),
        std::process::id()
    )
}
