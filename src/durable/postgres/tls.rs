//! TLS for a `postgres://` `--db`, as libpq reads `sslmode`: `disable` (plain), `prefer`
//! (the default: TLS when the server offers it, the certificate not checked), `require` (TLS
//! or no connection, the certificate not checked), `verify-ca` (the chain checked against the
//! roots), `verify-full` (the chain and the host name). The roots are `sslrootcert=PATH` (PEM)
//! when given, else the platform's (`SSL_CERT_FILE` / `SSL_CERT_DIR` honoured). tokio-postgres
//! knows only the first three modes, so these parameters are taken off the URL here and the
//! rustls connector is built to match; the same rustls (ring) as `rediss://`.

use std::path::PathBuf;
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, CryptoProvider};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{
    CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme,
};
use tokio_postgres::config::SslMode as WireMode;
use tokio_postgres_rustls::MakeRustlsConnect;

use crate::error::{Error, Result};

/// libpq's `sslmode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SslMode {
    Disable,
    Prefer,
    Require,
    VerifyCa,
    VerifyFull,
}

impl SslMode {
    /// What tokio-postgres is asked for on the wire.
    pub(crate) fn wire(self) -> WireMode {
        match self {
            SslMode::Disable => WireMode::Disable,
            SslMode::Prefer => WireMode::Prefer,
            _ => WireMode::Require,
        }
    }
}

/// `url` without `sslmode` / `sslrootcert`, and what they said (`prefer` and no root file
/// when absent). `redacted` names the URL in errors.
pub(crate) fn split(url: &str, redacted: &str) -> Result<(String, SslMode, Option<PathBuf>)> {
    let (base, query) = match url.split_once('?') {
        Some((base, query)) => (base, query),
        None => return Ok((url.to_string(), SslMode::Prefer, None)),
    };
    let (mut mode, mut root, mut kept) = (SslMode::Prefer, None, Vec::new());
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        match pair.split_once('=') {
            Some(("sslmode", value)) => {
                mode = match value {
                    "disable" => SslMode::Disable,
                    "prefer" | "allow" => SslMode::Prefer,
                    "require" => SslMode::Require,
                    "verify-ca" => SslMode::VerifyCa,
                    "verify-full" => SslMode::VerifyFull,
                    other => {
                        return Err(Error::postgres(format!(
                            "{redacted}: sslmode={other} is not one of disable, prefer, require, verify-ca, verify-full"
                        )))
                    }
                }
            }
            Some(("sslrootcert", value)) => root = Some(PathBuf::from(value)),
            _ => kept.push(pair),
        }
    }
    let rest = if kept.is_empty() {
        base.to_string()
    } else {
        format!("{base}?{}", kept.join("&"))
    };
    Ok((rest, mode, root))
}

/// The connector for `mode` (unused on the wire for `disable`).
pub(crate) fn connector(mode: SslMode, root: Option<&PathBuf>) -> Result<MakeRustlsConnect> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier: Arc<dyn ServerCertVerifier> = match mode {
        SslMode::Disable | SslMode::Prefer | SslMode::Require => {
            Arc::new(Unverified(provider.clone()))
        }
        SslMode::VerifyCa | SslMode::VerifyFull => {
            let roots = Arc::new(roots(root)?);
            let webpki = WebPkiServerVerifier::builder_with_provider(roots, provider.clone())
                .build()
                .map_err(|e| Error::postgres(format!("TLS roots: {e}")))?;
            if mode == SslMode::VerifyCa {
                Arc::new(AnyHostName(webpki))
            } else {
                webpki
            }
        }
    };
    let config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| Error::postgres(format!("TLS: {e}")))?
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_no_client_auth();
    Ok(MakeRustlsConnect::new(config))
}

/// The trusted roots: the PEM file `root`, else the platform's.
fn roots(root: Option<&PathBuf>) -> Result<RootCertStore> {
    let mut store = RootCertStore::empty();
    match root {
        Some(path) => {
            let certs = CertificateDer::pem_file_iter(path)
                .and_then(|it| it.collect::<std::result::Result<Vec<_>, _>>())
                .map_err(|e| Error::postgres(format!("sslrootcert {}: {e}", path.display())))?;
            let (added, _) = store.add_parsable_certificates(certs);
            if added == 0 {
                return Err(Error::postgres(format!(
                    "sslrootcert {}: no certificate in it",
                    path.display()
                )));
            }
        }
        None => {
            let found = rustls_native_certs::load_native_certs();
            store.add_parsable_certificates(found.certs);
        }
    }
    Ok(store)
}

/// `prefer` / `require`: encrypted, the certificate taken as it comes (libpq's meaning);
/// the handshake's signatures are still checked.
#[derive(Debug)]
struct Unverified(Arc<CryptoProvider>);

impl ServerCertVerifier for Unverified {
    fn verify_server_cert(
        &self,
        _: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> std::result::Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }
    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(
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
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(
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

/// `verify-ca`: the chain checked against the roots, any host name accepted.
#[derive(Debug)]
struct AnyHostName(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for AnyHostName {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> std::result::Result<ServerCertVerified, rustls::Error> {
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp, now)
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
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }
    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
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
    fn tls_parameters_are_taken_off_the_url() {
        let (rest, mode, root) = split(
            "postgres://u@h/db?sslmode=verify-full&application_name=x&sslrootcert=/ca.pem",
            "",
        )
        .unwrap();
        assert_eq!(rest, "postgres://u@h/db?application_name=x");
        assert_eq!(mode, SslMode::VerifyFull);
        assert_eq!(root, Some(PathBuf::from("/ca.pem")));
        let (rest, mode, _) = split("postgres://u@h/db", "").unwrap();
        assert_eq!(
            (rest.as_str(), mode),
            ("postgres://u@h/db", SslMode::Prefer)
        );
        assert!(split("postgres://u@h/db?sslmode=maybe", "").is_err());
    }
}
