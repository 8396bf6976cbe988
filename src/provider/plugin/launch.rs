//! Starting a plugin process and connecting to it: go-plugin's handshake (magic cookie,
//! `PLUGIN_PROTOCOL_VERSIONS=5,6`, one stdout line read with a timeout), automatic mutual TLS
//! (each side makes a self-signed certificate and pins the other's exact DER; plaintext when
//! `TF_DISABLE_PLUGIN_TLS` is set), the provider's stderr forwarded to Cairn's log, and the end
//! of a process: `GRPCController.Shutdown`, then kill.
//!
//! No process is left behind: every process is registered in [`LIVE`] until it ends,
//! [`shutdown_all`] ends them at the end of a command, the child is killed when its handle is
//! dropped (`kill_on_drop`), and on Linux the kernel kills it if Cairn dies
//! (`PR_SET_PDEATHSIG`). Children run in their own process group, so a Ctrl-C reaches Cairn
//! only, which then asks them to stop (`StopProvider`) and ends them itself.

use super::proto::controller::{grpc_controller_client::GrpcControllerClient, Empty};
use base64::Engine as _;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use tonic::transport::{Channel, Endpoint, Uri};

/// go-plugin's handshake for Terraform providers.
pub const MAGIC_COOKIE_KEY: &str = "TF_PLUGIN_MAGIC_COOKIE";
pub const MAGIC_COOKIE_VALUE: &str =
    "d602bf8f470bc67ca7faa0386276bbdd4330efaf76d1a219cb4d6991ca9872b2";

/// How long a plugin may take to print its handshake line (go-plugin waits a minute).
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(60);
/// How long `GRPCController.Shutdown` and the exit after it may take before the kill.
const SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(2);

/// The runtime every plugin process and connection lives on: independent of the engine's, so
/// a plugin can be used from synchronous code (validation, schemas) and outlives any one phase.
pub(crate) fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("cairn-plugin")
            .enable_all()
            .build()
            .expect("the plugin runtime starts")
    })
}

/// Runs `fut` on the plugin runtime and waits for it from synchronous code, without stalling
/// an engine runtime's other tasks.
pub(crate) fn run_sync<T: Send + 'static>(
    fut: impl std::future::Future<Output = T> + Send + 'static,
) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    runtime().spawn(async move {
        let _ = tx.send(fut.await);
    });
    let wait = move || rx.recv().expect("a plugin task finishes");
    match tokio::runtime::Handle::try_current() {
        Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(wait)
        }
        _ => wait(),
    }
}

/// Runs `fut` on the plugin runtime from async code.
pub(crate) async fn run<T: Send + 'static>(
    fut: impl std::future::Future<Output = T> + Send + 'static,
) -> T {
    runtime()
        .spawn(fut)
        .await
        .expect("a plugin task does not panic")
}

/// Every plugin process not yet ended, so [`shutdown_all`] can end them.
static LIVE: Mutex<Vec<Weak<PluginProcess>>> = Mutex::new(Vec::new());

/// A running plugin process and the gRPC channel to it.
pub(crate) struct PluginProcess {
    pub(crate) path: PathBuf,
    /// The negotiated protocol: 5 or 6.
    pub(crate) protocol: u32,
    pub(crate) channel: Channel,
    child: Mutex<Option<Child>>,
    pid: Option<u32>,
}

impl std::fmt::Debug for PluginProcess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PluginProcess")
            .field("path", &self.path)
            .field("protocol", &self.protocol)
            .field("pid", &self.pid)
            .finish()
    }
}

/// What the provider printed on stdout.
#[derive(Debug, PartialEq)]
struct Handshake {
    protocol: u32,
    network: String,
    addr: String,
    server_cert: Option<Vec<u8>>,
}

fn parse_handshake(line: &str) -> Result<Handshake, String> {
    let parts: Vec<&str> = line.trim().split('|').collect();
    if parts.len() < 5 {
        return Err(format!(
            "it printed {line:?} instead of a go-plugin handshake line (CORE|APP|NETWORK|ADDR|PROTOCOL)"
        ));
    }
    if parts[0] != "1" {
        return Err(format!(
            "it speaks go-plugin core protocol {}, Cairn speaks 1",
            parts[0]
        ));
    }
    let protocol: u32 = parts[1]
        .parse()
        .map_err(|_| format!("bad protocol version {:?} in its handshake", parts[1]))?;
    if protocol != 5 && protocol != 6 {
        return Err(format!(
            "it speaks plugin protocol {protocol}; Cairn speaks 5 and 6"
        ));
    }
    if parts[4] != "grpc" {
        return Err(format!(
            "it speaks {:?}, not grpc (net/rpc plugins are from Terraform 0.11 and older)",
            parts[4]
        ));
    }
    let server_cert = match parts.get(5).map(|s| s.trim()).filter(|s| !s.is_empty()) {
        None => None,
        Some(b64) => Some(
            base64::engine::general_purpose::STANDARD_NO_PAD
                .decode(b64.trim_end_matches('='))
                .map_err(|e| format!("its server certificate is not base64: {e}"))?,
        ),
    };
    Ok(Handshake {
        protocol,
        network: parts[2].to_string(),
        addr: parts[3].to_string(),
        server_cert,
    })
}

/// The client side of automatic mutual TLS: a fresh self-signed certificate as go-plugin makes
/// it (ECDSA P-521, CA, SAN `localhost`, client and server auth).
struct ClientCert {
    pem: String,
    der: rustls::pki_types::CertificateDer<'static>,
    key: rustls::pki_types::PrivateKeyDer<'static>,
}

fn client_cert() -> Result<ClientCert, String> {
    use rcgen::{
        BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
        KeyUsagePurpose,
    };
    let key = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P521_SHA512)
        .map_err(|e| format!("making a TLS key: {e}"))?;
    let mut params = CertificateParams::new(vec!["localhost".to_string()])
        .map_err(|e| format!("making a TLS certificate: {e}"))?;
    params
        .distinguished_name
        .push(DnType::OrganizationName, "HashiCorp");
    params
        .distinguished_name
        .push(DnType::CommonName, "localhost");
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
        KeyUsagePurpose::KeyAgreement,
        KeyUsagePurpose::KeyCertSign,
    ];
    params.extended_key_usages = vec![
        ExtendedKeyUsagePurpose::ClientAuth,
        ExtendedKeyUsagePurpose::ServerAuth,
    ];
    let now = std::time::SystemTime::now();
    params.not_before = (now - Duration::from_secs(30)).into();
    params.not_after = (now + Duration::from_secs(262_980 * 3600)).into();
    let cert = params
        .self_signed(&key)
        .map_err(|e| format!("signing the TLS certificate: {e}"))?;
    Ok(ClientCert {
        pem: cert.pem(),
        der: cert.der().clone(),
        key: rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into()),
    })
}

/// Accepts exactly one certificate (the one the peer announced out of band) and checks only
/// the handshake signatures made with it: the certificates are self-signed CAs used as end
/// entities, which stock WebPKI verification refuses.
#[derive(Debug)]
pub struct Pinned {
    pub der: Vec<u8>,
    pub provider: Arc<rustls::crypto::CryptoProvider>,
    /// Offer only RSA PKCS#1 signature schemes (a short RSA key cannot make PSS signatures
    /// that aws-lc-rs checks).
    pub rsa_pkcs1_only: bool,
}

impl Pinned {
    fn check(&self, cert: &rustls::pki_types::CertificateDer<'_>) -> Result<(), rustls::Error> {
        if cert.as_ref() == self.der.as_slice() {
            Ok(())
        } else {
            Err(rustls::Error::InvalidCertificate(
                rustls::CertificateError::ApplicationVerificationFailure,
            ))
        }
    }
}

/// The handshake signature checks, the same for the server's certificate (Cairn's client) and
/// the client's (the test servers): with the crypto provider's algorithms.
macro_rules! verify_signatures {
    () => {
        fn verify_tls12_signature(
            &self,
            message: &[u8],
            cert: &rustls::pki_types::CertificateDer<'_>,
            dss: &rustls::DigitallySignedStruct,
        ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
            rustls::crypto::verify_tls12_signature(
                message,
                cert,
                dss,
                &self.provider.signature_verification_algorithms,
            )
        }
        fn verify_tls13_signature(
            &self,
            message: &[u8],
            cert: &rustls::pki_types::CertificateDer<'_>,
            dss: &rustls::DigitallySignedStruct,
        ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
            rustls::crypto::verify_tls13_signature(
                message,
                cert,
                dss,
                &self.provider.signature_verification_algorithms,
            )
        }
    };
}

impl rustls::client::danger::ServerCertVerifier for Pinned {
    fn verify_server_cert(
        &self,
        end_entity: &rustls::pki_types::CertificateDer<'_>,
        _intermediates: &[rustls::pki_types::CertificateDer<'_>],
        _server_name: &rustls::pki_types::ServerName<'_>,
        _ocsp_response: &[u8],
        _now: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        self.check(end_entity)?;
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }
    verify_signatures!();
    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        if self.rsa_pkcs1_only {
            return vec![
                rustls::SignatureScheme::RSA_PKCS1_SHA256,
                rustls::SignatureScheme::RSA_PKCS1_SHA512,
            ];
        }
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

impl rustls::server::danger::ClientCertVerifier for Pinned {
    fn root_hint_subjects(&self) -> &[rustls::DistinguishedName] {
        &[]
    }
    fn verify_client_cert(
        &self,
        end_entity: &rustls::pki_types::CertificateDer<'_>,
        _intermediates: &[rustls::pki_types::CertificateDer<'_>],
        _now: rustls::pki_types::UnixTime,
    ) -> Result<rustls::server::danger::ClientCertVerified, rustls::Error> {
        self.check(end_entity)?;
        Ok(rustls::server::danger::ClientCertVerified::assertion())
    }
    verify_signatures!();
    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// The crypto provider of every plugin TLS connection (aws-lc-rs: it has P-521), which also
/// accepts RSA keys of 1024 bits and more in TLS 1.2 handshake signatures: some plugin
/// frameworks (PyPI `tf`) make such certificates, and Go's TLS stack accepts them.
pub fn crypto() -> Arc<rustls::crypto::CryptoProvider> {
    let mut p = rustls::crypto::aws_lc_rs::default_provider();
    p.signature_verification_algorithms = algorithms();
    Arc::new(p)
}

/// An RSA PKCS#1 signature check that accepts 1024-bit keys.
#[derive(Debug)]
struct LegacyRsa {
    params: &'static aws_lc_rs::signature::RsaParameters,
    alg: rustls::pki_types::AlgorithmIdentifier,
}

impl rustls::pki_types::SignatureVerificationAlgorithm for LegacyRsa {
    fn verify_signature(
        &self,
        public_key: &[u8],
        message: &[u8],
        signature: &[u8],
    ) -> Result<(), rustls::pki_types::InvalidSignature> {
        aws_lc_rs::signature::UnparsedPublicKey::new(self.params, public_key)
            .verify(message, signature)
            .map_err(|_| rustls::pki_types::InvalidSignature)
    }
    fn public_key_alg_id(&self) -> rustls::pki_types::AlgorithmIdentifier {
        rustls::pki_types::alg_id::RSA_ENCRYPTION
    }
    fn signature_alg_id(&self) -> rustls::pki_types::AlgorithmIdentifier {
        self.alg
    }
}

static RSA_SHA256: LegacyRsa = LegacyRsa {
    params: &aws_lc_rs::signature::RSA_PKCS1_1024_8192_SHA256_FOR_LEGACY_USE_ONLY,
    alg: rustls::pki_types::alg_id::RSA_PKCS1_SHA256,
};
static RSA_SHA512: LegacyRsa = LegacyRsa {
    params: &aws_lc_rs::signature::RSA_PKCS1_1024_8192_SHA512_FOR_LEGACY_USE_ONLY,
    alg: rustls::pki_types::alg_id::RSA_PKCS1_SHA512,
};

type Algorithm = &'static dyn rustls::pki_types::SignatureVerificationAlgorithm;
static LEGACY_SHA256: &[Algorithm] = &[&RSA_SHA256];
static LEGACY_SHA512: &[Algorithm] = &[&RSA_SHA512];

/// aws-lc-rs's algorithms (as rustls lists them), with RSA PKCS#1 SHA-256 and SHA-512
/// accepting 1024-bit keys. Made once.
fn algorithms() -> rustls::crypto::WebPkiSupportedAlgorithms {
    static ALGS: OnceLock<rustls::crypto::WebPkiSupportedAlgorithms> = OnceLock::new();
    *ALGS.get_or_init(|| {
        let base = rustls::crypto::aws_lc_rs::default_provider().signature_verification_algorithms;
        let legacy: [Algorithm; 2] = [&RSA_SHA256, &RSA_SHA512];
        let all: Vec<Algorithm> = legacy
            .iter()
            .copied()
            .chain(base.all.iter().copied())
            .collect();
        let mapping: Vec<(rustls::SignatureScheme, &'static [Algorithm])> = base
            .mapping
            .iter()
            .map(|(scheme, algs)| match scheme {
                rustls::SignatureScheme::RSA_PKCS1_SHA256 => (*scheme, LEGACY_SHA256),
                rustls::SignatureScheme::RSA_PKCS1_SHA512 => (*scheme, LEGACY_SHA512),
                _ => (*scheme, *algs),
            })
            .collect();
        rustls::crypto::WebPkiSupportedAlgorithms {
            all: Vec::leak(all),
            mapping: Vec::leak(mapping),
        }
    })
}

/// The TLS client configuration for one plugin: the server's certificate pinned, Cairn's client
/// certificate (if any) presented, ALPN `h2`. A server with an RSA key is spoken to in TLS 1.2,
/// where its PKCS#1 signatures are allowed for keys shorter than TLS 1.3's PSS needs.
fn client_tls(
    server: &[u8],
    cert: Option<&ClientCert>,
) -> Result<Arc<rustls::ClientConfig>, String> {
    let provider = crypto();
    const RSA_OID: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x01];
    let is_rsa = server.windows(RSA_OID.len()).any(|w| w == RSA_OID);
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone());
    let builder = if is_rsa {
        builder.with_protocol_versions(&[&rustls::version::TLS12])
    } else {
        builder.with_safe_default_protocol_versions()
    }
    .map_err(|e| format!("TLS: {e}"))?
    .dangerous()
    .with_custom_certificate_verifier(Arc::new(Pinned {
        der: server.to_vec(),
        provider,
        rsa_pkcs1_only: is_rsa,
    }));
    let mut cfg = match cert {
        Some(c) => builder
            .with_client_auth_cert(vec![c.der.clone()], c.key.clone_key())
            .map_err(|e| format!("TLS: {e}"))?,
        None => builder.with_no_client_auth(),
    };
    cfg.alpn_protocols = vec![b"h2".to_vec()];
    Ok(Arc::new(cfg))
}

/// Forwards the provider's stderr to Cairn's log: go-plugin providers write JSON lines
/// (`@level`, `@message`, `@module`); anything else is logged as it is, at debug level.
async fn forward_stderr(name: String, stderr: tokio::process::ChildStderr) {
    let mut lines = BufReader::new(stderr).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        match serde_json::from_str::<serde_json::Value>(&line) {
            Ok(j) if j.get("@message").is_some() => {
                let msg = j["@message"].as_str().unwrap_or_default();
                let module = j.get("@module").and_then(|m| m.as_str()).unwrap_or("");
                match j.get("@level").and_then(|l| l.as_str()).unwrap_or("") {
                    "error" => tracing::error!(target: "plugin", plugin = %name, module, "{msg}"),
                    "warn" => tracing::warn!(target: "plugin", plugin = %name, module, "{msg}"),
                    "info" => tracing::info!(target: "plugin", plugin = %name, module, "{msg}"),
                    "trace" => tracing::trace!(target: "plugin", plugin = %name, module, "{msg}"),
                    _ => tracing::debug!(target: "plugin", plugin = %name, module, "{msg}"),
                }
            }
            _ => tracing::debug!(target: "plugin", plugin = %name, "{line}"),
        }
    }
}

impl PluginProcess {
    /// Starts the provider at `path` and connects to it. `env` is the environment Cairn was
    /// started with (the plugin inherits it; `TF_DISABLE_PLUGIN_TLS` is read from it).
    pub(crate) async fn start(
        path: &Path,
        env: &BTreeMap<String, String>,
    ) -> Result<Arc<PluginProcess>, String> {
        let path_owned = path.to_path_buf();
        let env = env.clone();
        run(async move { Self::start_here(&path_owned, &env).await }).await
    }

    async fn start_here(
        path: &Path,
        env: &BTreeMap<String, String>,
    ) -> Result<Arc<PluginProcess>, String> {
        let shown = path.display().to_string();
        let fail = |what: String| format!("Plugin {shown}: {what}.");
        let tls = env
            .get("TF_DISABLE_PLUGIN_TLS")
            .is_none_or(|v| v.is_empty());
        let cert = if tls {
            Some(client_cert().map_err(fail)?)
        } else {
            None
        };
        let mut cmd = Command::new(path);
        cmd.env_clear()
            .envs(env)
            .env(MAGIC_COOKIE_KEY, MAGIC_COOKIE_VALUE)
            .env("PLUGIN_PROTOCOL_VERSIONS", "5,6")
            .env_remove("PLUGIN_CLIENT_CERT")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true)
            .process_group(0);
        if let Some(c) = &cert {
            cmd.env("PLUGIN_CLIENT_CERT", &c.pem);
        }
        #[cfg(target_os = "linux")]
        // SAFETY: prctl is async-signal-safe; nothing else runs between fork and exec.
        unsafe {
            cmd.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        let mut child = cmd
            .spawn()
            .map_err(|e| fail(format!("cannot start it: {e}")))?;
        let pid = child.id();
        if let Some(stderr) = child.stderr.take() {
            tokio::spawn(forward_stderr(shown.clone(), stderr));
        }
        let stdout = child.stdout.take().expect("stdout is piped");
        let mut lines = BufReader::new(stdout).lines();
        let line = match tokio::time::timeout(HANDSHAKE_TIMEOUT, lines.next_line()).await {
            Err(_) => {
                let _ = child.start_kill();
                return Err(fail(format!(
                    "it printed no handshake line within {} s",
                    HANDSHAKE_TIMEOUT.as_secs()
                )));
            }
            Ok(Err(e)) => return Err(fail(format!("reading its handshake: {e}"))),
            Ok(Ok(None)) => {
                let status = child.wait().await.ok();
                return Err(fail(format!(
                    "it exited before its handshake ({}); is it a Terraform provider plugin? Its messages are in the log (CAIRN_LOG=debug)",
                    status.map(|s| s.to_string()).unwrap_or_default()
                )));
            }
            Ok(Ok(Some(line))) => line,
        };
        // Keep draining stdout: a plugin that writes to it must never block.
        {
            let shown = shown.clone();
            tokio::spawn(async move {
                while let Ok(Some(l)) = lines.next_line().await {
                    tracing::debug!(target: "plugin", plugin = %shown, "stdout: {l}");
                }
            });
        }
        let hs = parse_handshake(&line).map_err(fail)?;
        // As go-plugin does: a server that sends a certificate is spoken to over TLS (with
        // Cairn's client certificate when it made one), whatever Cairn asked for.
        let tls_config = match (&cert, &hs.server_cert) {
            (_, Some(server)) => Some(client_tls(server, cert.as_ref()).map_err(fail)?),
            (Some(_), None) => {
                return Err(fail(
                    "it sent no server certificate although Cairn asked for mutual TLS".into(),
                ))
            }
            (None, None) => None,
        };
        let channel = connect(&hs, tls_config)
            .await
            .map_err(|e| fail(format!("cannot connect to {}: {e}", hs.addr)))?;
        tracing::debug!(target: "plugin", plugin = %shown, protocol = hs.protocol, tls, "plugin started");
        let process = Arc::new(PluginProcess {
            path: path.to_path_buf(),
            protocol: hs.protocol,
            channel,
            child: Mutex::new(Some(child)),
            pid,
        });
        let mut live = LIVE.lock().expect("plugin list");
        live.retain(|w| w.strong_count() > 0);
        live.push(Arc::downgrade(&process));
        Ok(process)
    }

    async fn shutdown_here(&self) {
        let child = self.child.lock().expect("plugin child").take();
        if let Some(child) = child {
            end(self.channel.clone(), child, self.path.clone()).await;
        }
    }
}

/// Ends a plugin process: `GRPCController.Shutdown`, then SIGTERM, then SIGKILL, each after a
/// short wait for the exit.
///
/// As go-plugin does for Terraform, the exit is awaited after `Shutdown` whatever the call
/// answered: a server that stops at once may cancel the call itself (the Python `tf`
/// framework does), and is then already on its way out; a SIGTERM would cut its exit short.
/// Only a server without the controller (`Unimplemented`) or a call that timed out goes
/// straight to SIGTERM.
async fn end(channel: Channel, mut child: Child, path: PathBuf) {
    let exited = |c: &mut Child| matches!(c.try_wait(), Ok(Some(_)));
    let mut controller = GrpcControllerClient::new(channel);
    let wait = match tokio::time::timeout(SHUTDOWN_TIMEOUT, controller.shutdown(Empty {})).await {
        Ok(Ok(_)) => true,
        Ok(Err(status)) => status.code() != tonic::Code::Unimplemented,
        Err(_) => false,
    };
    if wait {
        let _ = tokio::time::timeout(SHUTDOWN_TIMEOUT, child.wait()).await;
    }
    if !exited(&mut child) {
        if let Some(pid) = child.id() {
            // SAFETY: signalling our own child, which has not been reaped.
            unsafe {
                libc::kill(pid as libc::pid_t, libc::SIGTERM);
            }
            let _ = tokio::time::timeout(SHUTDOWN_TIMEOUT, child.wait()).await;
        }
    }
    if !exited(&mut child) {
        let _ = child.kill().await;
    }
    tracing::debug!(target: "plugin", plugin = %path.display(), "plugin ended");
}

/// Ends that are under way (started by dropping a process), for [`shutdown_all`] to wait for.
static ENDING: Mutex<Vec<tokio::task::JoinHandle<()>>> = Mutex::new(Vec::new());

impl Drop for PluginProcess {
    /// A process nobody uses any more is ended in the background (at the end of a command,
    /// [`shutdown_all`] waits for it).
    fn drop(&mut self) {
        let child = self.child.get_mut().ok().and_then(Option::take);
        if let Some(child) = child {
            let h = runtime().spawn(end(self.channel.clone(), child, self.path.clone()));
            if let Ok(mut e) = ENDING.lock() {
                e.retain(|h| !h.is_finished());
                e.push(h);
            }
        }
    }
}

/// Ends every plugin process still running and waits for those being ended (at the end of
/// every command, also after errors).
pub fn shutdown_all() {
    let live: Vec<Arc<PluginProcess>> = LIVE
        .lock()
        .map(|mut l| l.drain(..).filter_map(|w| w.upgrade()).collect())
        .unwrap_or_default();
    let ending: Vec<tokio::task::JoinHandle<()>> = ENDING
        .lock()
        .map(|mut e| e.drain(..).collect())
        .unwrap_or_default();
    if live.is_empty() && ending.is_empty() {
        return;
    }
    run_sync(async move {
        let mut set = tokio::task::JoinSet::new();
        for p in live {
            set.spawn(async move { p.shutdown_here().await });
        }
        for h in ending {
            let _ = h.await;
        }
        while set.join_next().await.is_some() {}
    });
}

async fn connect(
    hs: &Handshake,
    tls: Option<Arc<rustls::ClientConfig>>,
) -> Result<Channel, String> {
    let network = hs.network.clone();
    let addr = hs.addr.clone();
    let endpoint = Endpoint::from_static("http://localhost")
        .connect_timeout(Duration::from_secs(10))
        .tcp_nodelay(true);
    if network != "unix" && network != "tcp" {
        return Err(format!("unsupported network {network:?}"));
    }
    let connector = tower::service_fn(move |_: Uri| {
        let network = network.clone();
        let addr = addr.clone();
        let tls = tls.clone();
        async move { dial(&network, &addr, tls).await }
    });
    endpoint
        .connect_with_connector(connector)
        .await
        .map_err(|e| {
            let mut msg = e.to_string();
            let mut src = std::error::Error::source(&e);
            while let Some(s) = src {
                msg.push_str(&format!(": {s}"));
                src = s.source();
            }
            msg
        })
}

/// A stream to the plugin: Unix socket or TCP, wrapped in TLS when automatic mutual TLS is on.
type Io = hyper_util::rt::TokioIo<Box<dyn AsyncStream>>;

pub trait AsyncStream: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin {}
impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin> AsyncStream for T {}

/// A TCP stream that acknowledges what it reads at once (Linux `TCP_QUICKACK`, which the
/// kernel turns off again after a while, so it is set after every read).
///
/// gRPC is request/response: with delayed ACKs on our side, a plugin server that leaves
/// Nagle's algorithm on (the `tf-provider` crate's server does; Go's servers do not) holds the
/// last piece of each answer until our ACK comes, up to 40 ms later, which made a plan of
/// 1,000 resources take 17 s of waiting. Acknowledging at once costs a few loopback packets.
struct QuickAck(tokio::net::TcpStream);

impl QuickAck {
    fn ack_now(&self) {
        #[cfg(target_os = "linux")]
        {
            use std::os::fd::AsRawFd;
            let on: libc::c_int = 1;
            // SAFETY: a valid socket descriptor and a c_int option value of the right size;
            // a failure only leaves delayed ACKs on.
            unsafe {
                libc::setsockopt(
                    self.0.as_raw_fd(),
                    libc::IPPROTO_TCP,
                    libc::TCP_QUICKACK,
                    &on as *const libc::c_int as *const libc::c_void,
                    std::mem::size_of::<libc::c_int>() as libc::socklen_t,
                );
            }
        }
    }
}

impl tokio::io::AsyncRead for QuickAck {
    fn poll_read(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        let this = self.get_mut();
        let r = std::pin::Pin::new(&mut this.0).poll_read(cx, buf);
        if let std::task::Poll::Ready(Ok(())) = &r {
            this.ack_now();
        }
        r
    }
}

impl tokio::io::AsyncWrite for QuickAck {
    fn poll_write(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        std::pin::Pin::new(&mut self.get_mut().0).poll_write(cx, buf)
    }
    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.get_mut().0).poll_flush(cx)
    }
    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.get_mut().0).poll_shutdown(cx)
    }
}

async fn dial(
    network: &str,
    addr: &str,
    tls: Option<Arc<rustls::ClientConfig>>,
) -> std::io::Result<Io> {
    let raw: Box<dyn AsyncStream> = if network == "unix" {
        Box::new(tokio::net::UnixStream::connect(addr).await?)
    } else {
        let s = tokio::net::TcpStream::connect(addr).await?;
        s.set_nodelay(true)?;
        Box::new(QuickAck(s))
    };
    let stream: Box<dyn AsyncStream> = match tls {
        None => raw,
        Some(cfg) => {
            let name = rustls::pki_types::ServerName::try_from("localhost")
                .expect("localhost is a server name");
            Box::new(
                tokio_rustls::TlsConnector::from(cfg)
                    .connect(name, raw)
                    .await?,
            )
        }
    };
    Ok(hyper_util::rt::TokioIo::new(stream))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handshake_lines() {
        let h = parse_handshake("1|6|unix|/tmp/plugin123|grpc|\n").unwrap();
        assert_eq!(h.protocol, 6);
        assert_eq!(h.network, "unix");
        assert_eq!(h.addr, "/tmp/plugin123");
        assert_eq!(h.server_cert, None);
        let h = parse_handshake("1|5|tcp|127.0.0.1:1234|grpc|AQID").unwrap();
        assert_eq!(h.server_cert, Some(vec![1, 2, 3]));
        assert!(parse_handshake("This binary is a plugin.")
            .unwrap_err()
            .contains("instead of a go-plugin handshake"));
        assert!(parse_handshake("1|4|unix|/x|grpc|")
            .unwrap_err()
            .contains("protocol 4"));
        assert!(parse_handshake("1|5|unix|/x|netrpc|")
            .unwrap_err()
            .contains("not grpc"));
    }

    #[test]
    fn client_certificate_is_made() {
        let c = client_cert().unwrap();
        assert!(c.pem.starts_with("-----BEGIN CERTIFICATE-----"));
        assert!(!c.der.is_empty());
    }
}
