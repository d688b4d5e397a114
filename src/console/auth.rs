//! Who may use the console, and the proof each form carries (docs/console.md, "Signing in").
//!
//! The operator signs in with the operator token in a form body (never in a URL, so it stays
//! out of history, logs and `Referer`). moat answers with a random session cookie
//! (`HttpOnly`, `SameSite=Strict`, `Path=/ui`, with a `Max-Age`), and keeps only its SHA-256,
//! with an expiry and the session's CSRF token. Every state-changing form carries that CSRF
//! token; the sign-in form itself carries one bound to a short-lived pre-sign-in cookie
//! (double submit), so no other site can post into the console at all.

use std::collections::HashMap;
use std::sync::Mutex;

use axum::http::HeaderMap;
use rand::RngCore;
use sha2::{Digest, Sha256};

/// The signed-in session's cookie.
pub const SESSION_COOKIE: &str = "moat_console";
/// The cookie that binds the sign-in form's CSRF token.
pub const SIGN_IN_COOKIE: &str = "moat_console_sign_in";
/// How long a console session lasts, whatever it does: the operator signs in again after.
pub const SESSION_SECS: i64 = 8 * 3600;
/// How long a sign-in form stays usable.
pub const SIGN_IN_SECS: i64 = 600;
/// Console sessions held at once; a sign-in past it ends the oldest, so repeated sign-ins
/// cannot grow moat's memory.
pub const MAX_SESSIONS: usize = 32;

/// A signed-in console session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Signed {
    /// The token every state-changing form of this session must carry.
    pub csrf: String,
    /// When the session ends (ms since the epoch).
    pub expires_at_ms: i64,
}

/// The console sessions of this daemon. In memory only: a restarted daemon asks the operator
/// to sign in again, and nothing secret is written to disk.
#[derive(Default)]
pub struct ConsoleSessions {
    /// SHA-256 of the cookie value → the session. Looked up by hash, so the comparison that
    /// finds a session leaks nothing about other cookies' values.
    sessions: Mutex<HashMap<[u8; 32], Signed>>,
}

impl ConsoleSessions {
    /// Starts a session; returns the cookie value and the session.
    pub fn sign_in(&self, now_ms: i64) -> (String, Signed) {
        let cookie = random_token();
        let signed = Signed {
            csrf: random_token(),
            expires_at_ms: now_ms + SESSION_SECS * 1000,
        };
        let mut sessions = self.sessions.lock().unwrap();
        sessions.retain(|_, s| s.expires_at_ms > now_ms);
        while sessions.len() >= MAX_SESSIONS {
            let oldest = sessions
                .iter()
                .min_by_key(|(_, s)| s.expires_at_ms)
                .map(|(k, _)| *k);
            match oldest {
                Some(k) => sessions.remove(&k),
                None => break,
            };
        }
        sessions.insert(digest(&cookie), signed.clone());
        (cookie, signed)
    }

    /// The live session the request's cookie names.
    pub fn lookup(&self, headers: &HeaderMap, now_ms: i64) -> Option<Signed> {
        let value = cookie(headers, SESSION_COOKIE)?;
        let key = digest(value);
        let mut sessions = self.sessions.lock().unwrap();
        match sessions.get(&key) {
            Some(s) if s.expires_at_ms > now_ms => Some(s.clone()),
            Some(_) => {
                sessions.remove(&key);
                None
            }
            None => None,
        }
    }

    /// Ends the session the request's cookie names.
    pub fn sign_out(&self, headers: &HeaderMap) {
        if let Some(value) = cookie(headers, SESSION_COOKIE) {
            self.sessions.lock().unwrap().remove(&digest(value));
        }
    }
}

/// 32 random bytes, hex.
pub fn random_token() -> String {
    let mut bytes = [0u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    hex::encode(bytes)
}

fn digest(value: &str) -> [u8; 32] {
    Sha256::digest(value.as_bytes()).into()
}

/// The value of cookie `name` in the request's `Cookie` headers. Bounded: a value longer than
/// a token is no console cookie.
pub fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(axum::http::header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find_map(|v| cookie_in(v, name))
}

/// The value of `name` in one `Cookie` header value (`a=1; b=2`).
pub fn cookie_in<'a>(header: &'a str, name: &str) -> Option<&'a str> {
    header
        .split(';')
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v.trim())
        .filter(|v| !v.is_empty() && v.len() <= 128)
}

/// A `Set-Cookie` value for the console: scoped to `/ui`, unreadable by scripts, never sent
/// with a request another site starts. `max_age` 0 deletes it.
pub fn set_cookie(name: &str, value: &str, max_age: i64) -> String {
    format!("{name}={value}; Path=/ui; Max-Age={max_age}; HttpOnly; SameSite=Strict")
}

/// Constant-time equality for tokens (no early exit on the first differing byte).
pub fn token_eq(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(cookie: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert("cookie", cookie.parse().unwrap());
        h
    }

    #[test]
    fn cookie_values() {
        let long = "x".repeat(129);
        let rows: &[(&str, &str, Option<&str>)] = &[
            ("moat_console=abc", "moat_console", Some("abc")),
            ("a=1; moat_console=abc; b=2", "moat_console", Some("abc")),
            ("moat_console_sign_in=zz", "moat_console", None),
            ("moat_console=", "moat_console", None),
            ("xmoat_console=abc", "moat_console", None),
            ("", "moat_console", None),
        ];
        for (header, name, want) in rows {
            assert_eq!(cookie_in(header, name), *want, "{header}");
        }
        assert_eq!(
            cookie_in(&format!("moat_console={long}"), SESSION_COOKIE),
            None
        );
    }

    #[test]
    fn set_cookie_is_http_only_strict_and_expires() {
        let c = set_cookie(SESSION_COOKIE, "v", 60);
        for part in [
            "moat_console=v",
            "Path=/ui",
            "Max-Age=60",
            "HttpOnly",
            "SameSite=Strict",
        ] {
            assert!(c.split("; ").any(|p| p == part), "{c}: {part}");
        }
    }

    #[test]
    fn sessions_expire_end_and_are_bounded() {
        let s = ConsoleSessions::default();
        let (cookie, signed) = s.sign_in(1_000);
        let h = headers(&format!("{SESSION_COOKIE}={cookie}"));
        assert_eq!(s.lookup(&h, 2_000), Some(signed.clone()));
        assert_eq!(s.lookup(&headers("moat_console=forged"), 2_000), None);
        // Past its expiry the cookie is worth nothing.
        assert_eq!(s.lookup(&h, signed.expires_at_ms), None);
        let (cookie, _) = s.sign_in(10_000);
        let h = headers(&format!("{SESSION_COOKIE}={cookie}"));
        s.sign_out(&h);
        assert_eq!(s.lookup(&h, 10_001), None);
        // Many sign-ins keep at most MAX_SESSIONS; the oldest go first.
        let (first, _) = s.sign_in(20_000);
        for i in 0..MAX_SESSIONS {
            s.sign_in(20_001 + i as i64);
        }
        assert_eq!(s.sessions.lock().unwrap().len(), MAX_SESSIONS);
        assert_eq!(
            s.lookup(&headers(&format!("{SESSION_COOKIE}={first}")), 30_000),
            None
        );
    }

    #[test]
    fn tokens_compare_whole() {
        assert!(token_eq("abc", "abc"));
        assert!(!token_eq("abc", "abd"));
        assert!(!token_eq("abc", "ab"));
        assert!(!token_eq("", "a"));
        assert_ne!(random_token(), random_token());
        assert_eq!(random_token().len(), 64);
    }
}
