//! A real PostgreSQL server for tests: `initdb` into a temporary directory and `postgres` on
//! 127.0.0.1 at a free port, run as a non-root user (`CAIRN_PG_USER`, default `cairnpg`,
//! created with `useradd` when the tests run as root and it is missing). The superuser
//! `postgres` logs in over TCP with a password (scram), so connection strings carry a real
//! secret. The server stops when the `PgServer` is dropped, and also when the test process
//! ends in any way: it runs under a shell that kills it once the test's pipe to it closes.
//!
//! Binaries: `CAIRN_PG_BIN`, else the newest `/usr/lib/postgresql/*/bin`, else `PATH`.
//! When no server can start, [`shared`] panics under `CI=true` and otherwise returns `None`
//! after printing why (the test then skips).
#![allow(dead_code)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

pub const PASSWORD: &str = "pg-test-s3cret";

pub struct PgServer {
    pub port: u16,
    pub data: PathBuf,
    root: PathBuf,
    bin: PathBuf,
    user: Option<String>,
    child: Option<(Child, ChildStdin)>,
}

fn bin_dir() -> Result<PathBuf, String> {
    if let Some(d) = std::env::var_os("CAIRN_PG_BIN") {
        return Ok(PathBuf::from(d));
    }
    let mut found: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let v = e.file_name().to_str()?.parse().ok()?;
            let bin = e.path().join("bin");
            bin.join("postgres").exists().then_some((v, bin))
        })
        .collect();
    found.sort();
    if let Some((_, b)) = found.pop() {
        return Ok(b);
    }
    let out = Command::new("sh")
        .args(["-c", "command -v postgres"])
        .output()
        .map_err(|e| e.to_string())?;
    let p = String::from_utf8_lossy(&out.stdout).trim().to_string();
    match Path::new(&p).parent() {
        Some(d) if !p.is_empty() => Ok(d.to_path_buf()),
        _ => Err(
            "no PostgreSQL binaries (initdb, postgres): install postgresql (apt-get install \
                  postgresql) or set CAIRN_PG_BIN"
                .into(),
        ),
    }
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

fn ensure_user(name: &str) -> Result<(), String> {
    let exists = Command::new("id")
        .arg("-u")
        .arg(name)
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if exists {
        return Ok(());
    }
    let out = Command::new("useradd")
        .args(["--system", "--no-create-home", "--shell", "/bin/sh", name])
        .output()
        .map_err(|e| format!("useradd {name}: {e}"))?;
    // Another test process may have created it meanwhile.
    if out.status.success() || String::from_utf8_lossy(&out.stderr).contains("already exists") {
        Ok(())
    } else {
        Err(format!(
            "useradd {name}: {}",
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

/// A CA and a server certificate for localhost and 127.0.0.1, signed by it (openssl); false
/// when openssl is missing or fails.
fn make_certificates(root: &Path) -> bool {
    let ext = root.join("server.ext");
    if std::fs::write(
        &ext,
        "subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\n\
         keyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n",
    )
    .is_err()
    {
        return false;
    }
    let steps: [&[&str]; 3] = [
        &[
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            "ca.key",
            "-out",
            "ca.crt",
            "-days",
            "2",
            "-subj",
            "/CN=cairn-test-ca",
        ],
        &[
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            "server.key",
            "-out",
            "server.csr",
            "-subj",
            "/CN=localhost",
        ],
        &[
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            "server.crt",
            "-days",
            "2",
            "-extfile",
            "server.ext",
        ],
    ];
    for args in steps {
        let ok = Command::new("openssl")
            .args(args)
            .current_dir(root)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            return false;
        }
    }
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(
        root.join("server.key"),
        std::fs::Permissions::from_mode(0o600),
    )
    .is_ok()
}

fn free_port() -> Result<u16, String> {
    let l = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    Ok(l.local_addr().map_err(|e| e.to_string())?.port())
}

impl PgServer {
    /// Starts a fresh server. `fast`: fsync off (tests); benchmarks keep PostgreSQL's
    /// durable defaults.
    pub fn start(fast: bool) -> Result<PgServer, String> {
        let bin = bin_dir()?;
        let user = if is_root() {
            let u = std::env::var("CAIRN_PG_USER").unwrap_or_else(|_| "cairnpg".into());
            ensure_user(&u)?;
            Some(u)
        } else {
            None
        };
        let root =
            std::env::temp_dir().join(format!("cairn-pg-{}-{}", std::process::id(), free_port()?));
        std::fs::create_dir_all(&root).map_err(|e| e.to_string())?;
        let pwfile = root.join("pw");
        std::fs::write(&pwfile, PASSWORD).map_err(|e| e.to_string())?;
        let tls = make_certificates(&root);
        if let Some(u) = &user {
            let out = Command::new("chown")
                .args(["-R", u])
                .arg(&root)
                .output()
                .map_err(|e| e.to_string())?;
            if !out.status.success() {
                return Err(format!("chown: {}", String::from_utf8_lossy(&out.stderr)));
            }
        }
        let data = root.join("data");
        let mut s = PgServer {
            port: 0,
            data,
            root,
            bin,
            user,
            child: None,
        };
        let initdb = s.bin.join("initdb");
        let out = s
            .as_user(&initdb)
            .arg("-D")
            .arg(&s.data)
            .args([
                "-U",
                "postgres",
                "--auth-local=trust",
                "--auth-host=scram-sha-256",
                "-E",
                "UTF8",
                "--no-sync",
            ])
            .arg(format!("--pwfile={}", pwfile.display()))
            .output()
            .map_err(|e| format!("{}: {e}", initdb.display()))?;
        if !out.status.success() {
            return Err(format!(
                "initdb failed: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        let mut conf = format!(
            "listen_addresses = '127.0.0.1'\nunix_socket_directories = '{}'\nmax_connections = 200\n",
            s.root.display()
        );
        if fast {
            conf.push_str("fsync = off\nsynchronous_commit = off\nfull_page_writes = off\n");
        }
        if tls {
            conf.push_str(&format!(
                "ssl = on\nssl_cert_file = '{}'\nssl_key_file = '{}'\n",
                s.root.join("server.crt").display(),
                s.root.join("server.key").display()
            ));
        }
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(s.data.join("postgresql.conf"))
            .map_err(|e| e.to_string())?;
        f.write_all(conf.as_bytes()).map_err(|e| e.to_string())?;
        s.port = free_port()?;
        s.launch()?;
        Ok(s)
    }

    fn as_user(&self, program: &Path) -> Command {
        match &self.user {
            Some(u) => {
                let mut c = Command::new("runuser");
                c.args(["-u", u, "--"]).arg(program);
                c
            }
            None => Command::new(program),
        }
    }

    /// Starts `postgres` (again) and waits until it accepts connections.
    pub fn launch(&mut self) -> Result<(), String> {
        let postgres = self.bin.join("postgres");
        let script = format!(
            "'{}' -D '{}' -p {} >>'{}' 2>&1 & pid=$!; read _; kill -INT $pid; wait $pid",
            postgres.display(),
            self.data.display(),
            self.port,
            self.root.join("log").display()
        );
        let sh = PathBuf::from("/bin/sh");
        let mut child = self
            .as_user(&sh)
            .args(["-c", &script])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot start postgres: {e}"))?;
        let stdin = child.stdin.take().expect("piped");
        self.child = Some((child, stdin));
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let ok = Command::new(self.bin.join("pg_isready"))
                .args(["-h", "127.0.0.1", "-p", &self.port.to_string(), "-q"])
                .status()
                .map(|s| s.success())
                .unwrap_or(false);
            if ok {
                return Ok(());
            }
            if Instant::now() > deadline {
                let log = std::fs::read_to_string(self.root.join("log")).unwrap_or_default();
                return Err(format!("postgres did not become ready in 60 s:\n{log}"));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// `pg_ctl stop -m MODE` (`immediate`: a crash, as if the server machine died).
    pub fn pg_ctl_stop(&mut self, mode: &str) {
        let out = self
            .as_user(&self.bin.join("pg_ctl"))
            .arg("-D")
            .arg(&self.data)
            .args(["stop", "-m", mode, "-w"])
            .output()
            .expect("pg_ctl runs");
        assert!(
            out.status.success(),
            "pg_ctl stop: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        if let Some((mut child, stdin)) = self.child.take() {
            drop(stdin);
            let _ = child.wait();
        }
    }

    /// The CA that signed the server's certificate (for `sslrootcert`), when the server has
    /// TLS (openssl was there to make the certificates).
    pub fn ca_file(&self) -> Option<PathBuf> {
        let ca = self.root.join("ca.crt");
        ca.exists().then_some(ca)
    }

    /// A connection string for `user` (the superuser: `postgres` with [`PASSWORD`]).
    pub fn conn_str(&self) -> String {
        format!(
            "postgres://postgres:{PASSWORD}@127.0.0.1:{}/postgres?sslmode=disable",
            self.port
        )
    }

    /// The connection string of another role.
    pub fn conn_str_as(&self, user: &str, password: &str) -> String {
        format!(
            "postgres://{user}:{password}@127.0.0.1:{}/postgres?sslmode=disable",
            self.port
        )
    }

    /// Runs SQL as the superuser; the output of `psql -At`, or its error text.
    pub fn psql(&self, sql: &str) -> Result<String, String> {
        let out = Command::new(self.bin.join("psql"))
            .args([
                "-h",
                "127.0.0.1",
                "-p",
                &self.port.to_string(),
                "-U",
                "postgres",
                "-d",
                "postgres",
                "-v",
                "ON_ERROR_STOP=1",
                "-At",
                "-c",
                sql,
            ])
            .env("PGPASSWORD", PASSWORD)
            .output()
            .map_err(|e| e.to_string())?;
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
        } else {
            Err(String::from_utf8_lossy(&out.stderr).trim().to_string())
        }
    }
}

impl Drop for PgServer {
    fn drop(&mut self) {
        if let Some((mut child, stdin)) = self.child.take() {
            drop(stdin);
            let _ = child.wait();
        }
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

/// Starts a server or says why not: a panic under `CI=true`, else `None` and a skip message.
pub fn start_or_skip(fast: bool) -> Option<PgServer> {
    match PgServer::start(fast) {
        Ok(s) => Some(s),
        Err(e) if std::env::var("CI").is_ok_and(|v| v == "true") => {
            panic!("CI=true and no PostgreSQL server could be started: {e}")
        }
        Err(e) => {
            eprintln!("SKIPPED: no PostgreSQL server could be started: {e}");
            None
        }
    }
}

/// One server shared by the tests of this process (each test uses its own schema).
pub fn shared() -> Option<&'static PgServer> {
    static SERVER: OnceLock<Option<PgServer>> = OnceLock::new();
    SERVER.get_or_init(|| start_or_skip(true)).as_ref()
}

/// A schema name unique to this test process and `tag`.
pub fn schema(tag: &str) -> String {
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(0);
    format!(
        "t{}_{}_{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed),
        tag
    )
}
