//! The node's TLS identity (docs/nodes.md, "Pairing"): a self-signed certificate and its key,
//! made at the first start of a node and kept in `$MOAT_HOME/node/` (0700, the key 0600),
//! since every gateway that paired pins the certificate's SHA-256 fingerprint.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use sha2::{Digest, Sha256};

use super::NodeError;
use crate::home::Home;

/// The name in the certificate. Gateways never check a name (they pin the certificate
/// itself), so one constant name serves every node.
pub const CERT_NAME: &str = "moat-node";

/// A node's certificate and private key, both DER.
pub struct NodeIdentity {
    /// The self-signed certificate gateways pin.
    pub cert_der: Vec<u8>,
    /// Its PKCS#8 private key; never leaves the node's home.
    pub key_der: Vec<u8>,
}

/// `SHA256:` and the certificate's digest in lowercase hex, as `moat node info` prints it and
/// `moat nodes add --fingerprint` takes it.
pub fn fingerprint_of(cert_der: &[u8]) -> String {
    format!("SHA256:{}", hex::encode(Sha256::digest(cert_der)))
}

impl NodeIdentity {
    /// The home's identity, made now if it has none. Two makers racing (the daemon and
    /// `moat node info`) both end with the one that was written first.
    pub fn load_or_make(home: &Home) -> Result<Self, NodeError> {
        let dir = home.node_dir();
        crate::home::ensure_private_dir(&dir).map_err(|source| NodeError::Io {
            what: "create",
            path: dir.display().to_string(),
            source,
        })?;
        let (cert, key) = (dir.join("cert.der"), dir.join("key.der"));
        if !cert.exists() {
            let made = make()?;
            // The key first: a certificate on disk always has its key beside it.
            let key_new = write_new(&key, &made.key_der)?;
            if key_new {
                write_new(&cert, &made.cert_der)?;
            }
        }
        // A maker that lost the race may find the key written but the certificate not yet.
        for _ in 0..50 {
            if cert.exists() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        Ok(Self {
            cert_der: read(&cert)?,
            key_der: read(&key)?,
        })
    }

    /// What gateways pin.
    pub fn fingerprint(&self) -> String {
        fingerprint_of(&self.cert_der)
    }

    /// The rustls server side of the node's listener.
    pub fn server_config(&self) -> Result<rustls::ServerConfig, NodeError> {
        use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
        let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
        rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .and_then(|b| {
                b.with_no_client_auth().with_single_cert(
                    vec![CertificateDer::from(self.cert_der.clone())],
                    PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(self.key_der.clone())),
                )
            })
            .map_err(|e| NodeError::Tls(e.to_string()))
    }
}

/// A new ECDSA P-256 key and a certificate it signed.
fn make() -> Result<NodeIdentity, NodeError> {
    let key = rcgen::KeyPair::generate().map_err(|e| NodeError::MakeCert(e.to_string()))?;
    let params = rcgen::CertificateParams::new(vec![CERT_NAME.to_string()])
        .map_err(|e| NodeError::MakeCert(e.to_string()))?;
    let cert = params
        .self_signed(&key)
        .map_err(|e| NodeError::MakeCert(e.to_string()))?;
    Ok(NodeIdentity {
        cert_der: cert.der().to_vec(),
        key_der: key.serialize_der(),
    })
}

/// Writes `bytes` to a new file of mode 0600; `false` when the file already existed.
fn write_new(path: &Path, bytes: &[u8]) -> Result<bool, NodeError> {
    let io = |source| NodeError::Io {
        what: "write",
        path: path.display().to_string(),
        source,
    };
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
    {
        Ok(mut f) => {
            f.write_all(bytes).map_err(io)?;
            f.sync_all().map_err(io)?;
            Ok(true)
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
        Err(e) => Err(io(e)),
    }
}

fn read(path: &Path) -> Result<Vec<u8>, NodeError> {
    std::fs::read(path).map_err(|source| NodeError::Io {
        what: "read",
        path: path.display().to_string(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn made_once_and_kept() {
        let dir = tempfile::tempdir().unwrap();
        let home = Home::at(dir.path());
        let a = NodeIdentity::load_or_make(&home).unwrap();
        let b = NodeIdentity::load_or_make(&home).unwrap();
        assert_eq!(a.fingerprint(), b.fingerprint());
        assert!(a.fingerprint().starts_with("SHA256:"));
        assert_eq!(a.fingerprint().len(), 7 + 64);
        use std::os::unix::fs::PermissionsExt;
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&home.node_dir().join("key.der")), 0o600);
        assert_eq!(mode(&home.node_dir()), 0o700);
        a.server_config().unwrap();
    }
}
