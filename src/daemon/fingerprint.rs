//! What a client checks before it lets a running daemon act for it: the same moat build and
//! the same effective configuration. A daemon started before `moat.toml` changed, with other
//! `MOAT_*` overrides, against another engine, with other values in the variables secrets are
//! read from, or by an older binary would otherwise run the client's commands under rules the
//! client did not ask for (docs/ARCHITECTURE.md, "Daemon").

use sha2::{Digest, Sha256};

use crate::config::Config;

/// Environment variables outside moat's config that still change what a daemon does.
const ENGINE_VARS: [&str; 3] = ["DOCKER_HOST", "DOCKER_CERT_PATH", "DOCKER_TLS_VERIFY"];

/// The build of this binary: its version, and the size and modification time of the
/// executable, so a rebuilt binary never talks to a daemon of the previous build.
pub fn build_id() -> String {
    let exe = std::env::current_exe()
        .and_then(std::fs::metadata)
        .map(|m| {
            use std::os::unix::fs::MetadataExt;
            format!("{}:{}.{}", m.len(), m.mtime(), m.mtime_nsec())
        })
        .unwrap_or_default();
    format!("{}+{exe}", env!("CARGO_PKG_VERSION"))
}

/// The fingerprint of `config` as this process sees it (build, config, engine variables).
pub fn fingerprint(config: &Config) -> String {
    // Secrets read from the environment take their values from the daemon's: a client whose
    // variables hold other values must not be served with the old ones. Only their digest
    // travels.
    let secret_vars = config
        .secrets
        .values()
        .filter(|s| !s.env.is_empty())
        .map(|s| s.env.as_str());
    let vars: Vec<(String, String)> = ENGINE_VARS
        .iter()
        .copied()
        .chain(secret_vars)
        .map(|k| (k.to_string(), std::env::var(k).unwrap_or_default()))
        .collect();
    compute(&build_id(), config, &vars)
}

/// Pure: the digest of the three parts, hex-encoded (16 bytes are plenty to tell them apart).
fn compute(build: &str, config: &Config, engine: &[(String, String)]) -> String {
    let mut h = Sha256::new();
    h.update(build.as_bytes());
    h.update([0]);
    // serde_json of the config is deterministic for one build: struct fields in order, maps
    // are BTreeMaps.
    h.update(serde_json::to_vec(config).unwrap_or_default());
    // What the daemon decides by but the serialization leaves out (`#[serde(skip)]` fields):
    // an explicit `sandbox.user` equal to the default still changes whose a host workspace
    // runs as (docs/security.md, "Host workspaces"), so setting it must replace the daemon.
    h.update([0, u8::from(config.sandbox.user_set)]);
    for (k, v) in engine {
        h.update([0]);
        h.update(k.as_bytes());
        h.update([b'=']);
        h.update(v.as_bytes());
    }
    hex::encode(&h.finalize()[..16])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_part_changes_the_fingerprint() {
        let base = Config::default();
        let none: Vec<(String, String)> = vec![];
        let a = compute("0.1.0+1:2.3", &base, &none);
        assert_eq!(a, compute("0.1.0+1:2.3", &base, &none));
        assert_eq!(a.len(), 32);
        assert_ne!(a, compute("0.1.0+1:2.4", &base, &none));
        let mut other = Config::default();
        other.exec.yield_ms += 1;
        assert_ne!(a, compute("0.1.0+1:2.3", &other, &none));
        let mut user_set = Config::default();
        user_set.sandbox.user_set = true;
        assert_ne!(a, compute("0.1.0+1:2.3", &user_set, &none));
        let engine = vec![("DOCKER_HOST".to_string(), "unix:///x".to_string())];
        assert_ne!(a, compute("0.1.0+1:2.3", &base, &engine));
    }

    /// Every config field the serialization skips must be hashed by hand in `compute`: a new
    /// `#[serde(skip)]` (or `skip_serializing`) field in a file that defines config sections
    /// fails here until it is (and this count raised). A field skipped only when empty
    /// (`skip_serializing_if`) is in the digest whenever it holds anything.
    #[test]
    fn every_skipped_config_field_is_covered() {
        let sources = [
            include_str!("../config/file.rs"),
            include_str!("../config/sections.rs"),
            include_str!("../config/egress.rs"),
        ];
        let skipped: usize = sources
            .iter()
            .map(|s| {
                s.matches("#[serde(skip)]").count()
                    + s.matches("skip_serializing)").count()
                    + s.matches("skip_serializing,").count()
            })
            .sum();
        assert_eq!(
            skipped, 1,
            "a skipped config field is not in the fingerprint"
        );
    }
}
