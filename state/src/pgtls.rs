//! Connection strings and TLS for the PostgreSQL log, with libpq's `sslmode` meanings:
//! `disable` (no TLS), `prefer` (TLS if the server offers it; the default) and `require`
//! (TLS, certificate not checked — unless `sslrootcert` is given, which makes it
//! `verify-ca`, as in libpq), `verify-ca` (the chain must lead to a trusted root) and
//! `verify-full` (and the name must match the host). Roots: `sslrootcert` (PEM), else
//! `~/.postgresql/root.crt` when present, else the Mozilla roots (webpki-roots).
//!
//! tokio-postgres itself knows only disable/prefer/require; the verification is rustls's.

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, DigitallySignedStruct, RootCertStore, SignatureScheme};
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;
use tokio_postgres::config::SslMode;
use tokio_postgres_rustls::MakeRustlsConnect;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    Disable,
    Prefer,
    Require,
    VerifyCa,
    VerifyFull,
}

/// Splits `sslmode` and `sslrootcert` out of a connection string (URL or key=value form).
fn split(conn_str: &str) -> (String, Option<String>, Option<String>) {
    let s = conn_str.trim();
    let (mut mode, mut root) = (None, None);
    if s.starts_with("postgres://") || s.starts_with("postgresql://") {
        let Some((base, query)) = s.split_once('?') else {
            return (s.to_string(), None, None);
        };
        let mut kept = Vec::new();
        for p in query.split('&') {
            match p.split_once('=') {
                Some(("sslmode", v)) => mode = Some(v.to_string()),
                Some(("sslrootcert", v)) => root = Some(v.replace("%2F", "/").replace("%2f", "/")),
                _ => kept.push(p),
            }
        }
        let rest = if kept.is_empty() {
            base.to_string()
        } else {
            format!("{base}?{}", kept.join("&"))
        };
        return (rest, mode, root);
    }
    let mut kept = Vec::new();
    for token in s.split_whitespace() {
        match token.split_once('=') {
            Some(("sslmode", v)) => mode = Some(v.to_string()),
            Some(("sslrootcert", v)) => root = Some(v.trim_matches('\'').to_string()),
            _ => kept.push(token),
        }
    }
    (kept.join(" "), mode, root)
}

/// The client configuration, and the TLS connector when TLS may be used.
pub(crate) fn parse(
    conn_str: &str,
) -> Result<(tokio_postgres::Config, Option<MakeRustlsConnect>), String> {
    let (rest, mode, root) = split(conn_str);
    let mode = match mode.as_deref() {
        None | Some("prefer") | Some("allow") => Mode::Prefer,
        Some("disable") => Mode::Disable,
        Some("require") if root.is_some() => Mode::VerifyCa,
        Some("require") => Mode::Require,
        Some("verify-ca") => Mode::VerifyCa,
        Some("verify-full") => Mode::VerifyFull,
        Some(other) => {
            return Err(format!(
                "sslmode={other} is not one of disable, allow, prefer, require, verify-ca, \
                 verify-full"
            ))
        }
    };
    let mut config = tokio_postgres::Config::from_str(&rest)
        .map_err(|e| format!("invalid connection string: {e}"))?;
    if config.get_connect_timeout().is_none() {
        config.connect_timeout(Duration::from_secs(10));
    }
    config.keepalives(true);
    config.keepalives_idle(Duration::from_secs(30));
    if config.get_application_name().is_none() {
        config.application_name("cairn");
    }
    config.ssl_mode(match mode {
        Mode::Disable => SslMode::Disable,
        Mode::Prefer => SslMode::Prefer,
        _ => SslMode::Require,
    });
    if mode == Mode::Disable {
        return Ok((config, None));
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?;
    let tls = match mode {
        Mode::Prefer | Mode::Require => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(Unchecked(provider)))
            .with_no_client_auth(),
        Mode::VerifyCa | Mode::VerifyFull => {
            let roots = Arc::new(roots(root.as_deref())?);
            let webpki = WebPkiServerVerifier::builder_with_provider(roots, provider)
                .build()
                .map_err(|e| e.to_string())?;
            if mode == Mode::VerifyFull {
                builder.with_webpki_verifier(webpki).with_no_client_auth()
            } else {
                builder
                    .dangerous()
                    .with_custom_certificate_verifier(Arc::new(AnyName(webpki)))
                    .with_no_client_auth()
            }
        }
        Mode::Disable => unreachable!("returned above"),
    };
    Ok((config, Some(MakeRustlsConnect::new(tls))))
}

fn roots(file: Option<&str>) -> Result<RootCertStore, String> {
    let mut store = RootCertStore::empty();
    let default = std::env::var_os("HOME")
        .map(|h| std::path::PathBuf::from(h).join(".postgresql/root.crt"))
        .filter(|p| p.is_file());
    let path = file.map(std::path::PathBuf::from).or(default);
    match path {
        Some(p) => {
            let pem = std::fs::read(&p)
                .map_err(|e| format!("cannot read sslrootcert {}: {e}", p.display()))?;
            for cert in rustls_pemfile::certs(&mut pem.as_slice()) {
                let cert =
                    cert.map_err(|e| format!("sslrootcert {} is not PEM: {e}", p.display()))?;
                store
                    .add(cert)
                    .map_err(|e| format!("sslrootcert {}: {e}", p.display()))?;
            }
            if store.is_empty() {
                return Err(format!("sslrootcert {} holds no certificate", p.display()));
            }
        }
        None => store.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned()),
    }
    Ok(store)
}

/// `sslmode=require` (and `prefer`): encrypted, certificate not checked (libpq's meaning).
#[derive(Debug)]
struct Unchecked(Arc<rustls::crypto::CryptoProvider>);

impl ServerCertVerifier for Unchecked {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// `sslmode=verify-ca`: the chain is checked, the host name is not.
#[derive(Debug)]
struct AnyName(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for AnyName {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
        {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sslmode_is_taken_out_of_both_forms() {
        let (rest, mode, root) = split(
            "postgres://u:p@h:5/d?sslmode=verify-full&sslrootcert=/x/ca.pem&application_name=a",
        );
        assert_eq!(rest, "postgres://u:p@h:5/d?application_name=a");
        assert_eq!(mode.as_deref(), Some("verify-full"));
        assert_eq!(root.as_deref(), Some("/x/ca.pem"));
        let (rest, mode, _) = split("host=h sslmode=require user=u");
        assert_eq!(
            (rest.as_str(), mode.as_deref()),
            ("host=h user=u", Some("require"))
        );
        let err = parse("host=h sslmode=maybe").err().unwrap();
        assert!(err.contains("sslmode=maybe is not one of"), "{err}");
    }
}
