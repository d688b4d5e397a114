//! The gateway's side of TLS to a node (docs/nodes.md, "Trust"): a certificate verifier that
//! accepts exactly the certificate whose SHA-256 fingerprint `moat nodes add` pinned — no
//! certificate authority, no name, no expiry — and still checks that the node holds its key
//! (the handshake's signature), so a copy of the certificate alone is worth nothing.

use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, CryptoProvider};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};

use super::NodeError;

/// `SHA256:` and 64 hex digits (either case; `:` between byte pairs allowed, as some tools
/// print them), as the canonical `SHA256:` + lowercase hex.
pub fn parse_fingerprint(text: &str) -> Result<String, NodeError> {
    let bad = || NodeError::BadFingerprint(crate::output::escape_display(text));
    let t = text.trim();
    let rest = t
        .strip_prefix("SHA256:")
        .or_else(|| t.strip_prefix("sha256:"))
        .ok_or_else(bad)?;
    let hex: String = rest.chars().filter(|c| *c != ':').collect();
    if hex.len() != 64 || !hex.chars().all(|c| c.is_ascii_hexdigit()) {
        return Err(bad());
    }
    Ok(format!("SHA256:{}", hex.to_ascii_lowercase()))
}

/// Accepts the one certificate whose fingerprint is `pinned`.
#[derive(Debug)]
struct Pinned {
    /// Canonical `SHA256:…` (see [`parse_fingerprint`]).
    pinned: String,
    /// Checks the handshake's signatures with the certificate's key.
    provider: Arc<CryptoProvider>,
}

impl ServerCertVerifier for Pinned {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let seen = super::fingerprint_of(end_entity.as_ref());
        if seen == self.pinned {
            Ok(ServerCertVerified::assertion())
        } else {
            Err(rustls::Error::General(format!(
                "it presented {seen}, the pairing pinned {}",
                self.pinned
            )))
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// A TLS client that trusts only the certificate of fingerprint `pinned` (canonical).
pub fn pinned_client_config(pinned: &str) -> Result<rustls::ClientConfig, NodeError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier = Arc::new(Pinned {
        pinned: pinned.to_string(),
        provider: provider.clone(),
    });
    Ok(rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| NodeError::Tls(e.to_string()))?
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_no_client_auth())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fingerprints_parse_to_one_form() {
        let hex = "ab".repeat(32);
        let want = format!("SHA256:{hex}");
        for text in [
            format!("SHA256:{hex}"),
            format!("sha256:{}", hex.to_uppercase()),
            format!(" SHA256:{} ", hex),
            format!(
                "SHA256:{}",
                hex.as_bytes()
                    .chunks(2)
                    .map(|c| std::str::from_utf8(c).unwrap())
                    .collect::<Vec<_>>()
                    .join(":")
            ),
        ] {
            assert_eq!(parse_fingerprint(&text).unwrap(), want, "{text}");
        }
        for bad in [
            "",
            "SHA256:",
            &hex,
            &format!("SHA1:{hex}"),
            &format!("SHA256:{}", &hex[1..]),
            &format!("SHA256:{}zz", &hex[2..]),
        ] {
            assert!(parse_fingerprint(bad).is_err(), "{bad}");
        }
    }
}
