//! Who calls E2B's API: the control plane names its caller with an API key (`X-API-KEY`),
//! the in-sandbox API with the sandbox's access token (`X-Access-Token`, the sandbox named by
//! `E2b-Sandbox-Id`), and a call may ask for a user with `Authorization: Basic` (docs/e2b.md,
//! "Keys and tokens"). Secrets are compared in constant time.

use axum::http::HeaderMap;
use base64::Engine as _;
use sha2::{Digest, Sha256};

use crate::server::secret_eq;

/// The configured API keys, each with the owner name its sandboxes are filed under.
pub struct Keys {
    keys: Vec<(String, String)>,
}

/// A key's owner name: a digest prefix, so the key itself is never stored or shown.
fn owner_of(key: &str) -> String {
    let digest = Sha256::digest(key.as_bytes());
    format!("key-{}", &hex::encode(digest)[..12])
}

impl Keys {
    pub fn new(keys: &[String]) -> Self {
        Self {
            keys: keys.iter().map(|k| (k.clone(), owner_of(k))).collect(),
        }
    }

    /// The owner the request's `X-API-KEY` names; `Err` says what is missing or wrong. Every
    /// configured key is compared, so the time taken says nothing about which one matched.
    pub fn owner(&self, headers: &HeaderMap) -> Result<String, &'static str> {
        let Some(given) = headers.get("x-api-key").and_then(|v| v.to_str().ok()) else {
            return Err("an API key is required (the X-API-KEY header, E2B_API_KEY to the SDK)");
        };
        let mut found = None;
        for (key, owner) in &self.keys {
            if secret_eq(given.trim(), key) {
                found = Some(owner.clone());
            }
        }
        found.ok_or("the API key is not one this moat knows (e2b.api_keys)")
    }
}

/// The sandbox id a request to the in-sandbox API names.
pub fn sandbox_id(headers: &HeaderMap) -> Option<&str> {
    headers
        .get("e2b-sandbox-id")
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
}

/// Whether the request carries `token` as its access token.
pub fn token_matches(headers: &HeaderMap, token: &str) -> bool {
    headers
        .get("x-access-token")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|t| secret_eq(t.trim(), token))
}

/// The user a call asks to run as (`Authorization: Basic base64("<user>:")`); `None` when it
/// asks for none. A header that is not Basic, or not base64 of `user:`, is an error.
pub fn basic_user(headers: &HeaderMap) -> Result<Option<String>, String> {
    let Some(v) = headers.get(axum::http::header::AUTHORIZATION) else {
        return Ok(None);
    };
    let text = v
        .to_str()
        .map_err(|_| "the Authorization header is not text".to_string())?;
    let Some(encoded) = text.strip_prefix("Basic ") else {
        return Err("the Authorization header is not Basic".into());
    };
    let raw = base64::engine::general_purpose::STANDARD
        .decode(encoded.trim())
        .map_err(|_| "the Authorization header is not base64".to_string())?;
    let raw = String::from_utf8(raw).map_err(|_| "the user name is not UTF-8".to_string())?;
    let user = raw.split(':').next().unwrap_or_default();
    if user.is_empty()
        || user.len() > 32
        || !user
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
    {
        return Err(format!(
            "user `{}` is not a user name",
            crate::output::escape_display(user)
        ));
    }
    Ok(Some(user.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, v.parse().unwrap());
        }
        h
    }

    #[test]
    fn keys_tokens_and_users() {
        let keys = Keys::new(&[
            "e2b_aaaaaaaaaaaaaaaaaaaaaaaa".into(),
            "e2b_bbbbbbbbbbbbbbbbbbbbbbbb".into(),
        ]);
        let a = keys
            .owner(&headers(&[("x-api-key", "e2b_aaaaaaaaaaaaaaaaaaaaaaaa")]))
            .unwrap();
        let b = keys
            .owner(&headers(&[("x-api-key", "e2b_bbbbbbbbbbbbbbbbbbbbbbbb")]))
            .unwrap();
        assert_ne!(a, b);
        assert!(!a.contains("aaaa"), "the owner name never shows the key");
        assert!(keys
            .owner(&headers(&[("x-api-key", "e2b_aaaaaaaaaaaaaaaaaaaaaaab")]))
            .is_err());
        assert!(keys.owner(&headers(&[])).unwrap_err().contains("X-API-KEY"));
        assert!(token_matches(&headers(&[("x-access-token", "t0k")]), "t0k"));
        assert!(!token_matches(
            &headers(&[("x-access-token", "t0K")]),
            "t0k"
        ));
        assert!(!token_matches(&headers(&[]), "t0k"));
        assert_eq!(basic_user(&headers(&[])).unwrap(), None);
        assert_eq!(
            basic_user(&headers(&[("authorization", "Basic cm9vdDo=")])).unwrap(),
            Some("root".into())
        );
        for bad in ["Bearer x", "Basic %%%", "Basic Og==", "Basic JChpZCk6"] {
            assert!(
                basic_user(&headers(&[("authorization", bad)])).is_err(),
                "{bad}"
            );
        }
    }
}
