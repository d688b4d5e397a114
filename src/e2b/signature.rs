//! Signed URLs for `/files` (docs/e2b.md, "Signed URLs"): `v1_` and the unpadded base64 of
//! `sha256("{path}:{op}:{user}:{token}[:{expiry}]")`, made by the SDK from the sandbox's access
//! token. A signed URL carries no sandbox id, so the sandbox is the live one whose token makes
//! the same signature; each comparison takes constant time. Pure but for the table it is
//! handed.

use std::sync::Arc;

use base64::Engine as _;
use sha2::{Digest, Sha256};

use super::sandboxes::{Sandbox, Sandboxes};
use crate::server::secret_eq;

/// What a signed request carries in its query.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Signed<'a> {
    /// The `path` parameter exactly as sent (decoded, not resolved).
    pub path: &'a str,
    /// `username`; absent is the empty string in the signed text.
    pub user: &'a str,
    pub signature: &'a str,
    /// `signature_expiration`: Unix seconds, when the URL has an end.
    pub expiry: Option<&'a str>,
}

/// `read` for a download, `write` for an upload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Read,
    Write,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignatureError {
    /// No live sandbox's token makes this signature.
    #[error("failed to check the signature: it is not valid for any running sandbox")]
    Invalid,
    /// The signature is right and its time is over: E2B's exact message (its SDK's tests
    /// compare the whole body).
    #[error("signature is already expired")]
    Expired,
}

/// The signature of `path` for `op` as `user` with `token`, ending at `expiry` if given.
pub fn sign(path: &str, op: Op, user: &str, token: &str, expiry: Option<&str>) -> String {
    let op = match op {
        Op::Read => "read",
        Op::Write => "write",
    };
    let text = match expiry {
        Some(e) => format!("{path}:{op}:{user}:{token}:{e}"),
        None => format!("{path}:{op}:{user}:{token}"),
    };
    let digest = Sha256::digest(text.as_bytes());
    format!(
        "v1_{}",
        base64::engine::general_purpose::STANDARD_NO_PAD.encode(digest)
    )
}

/// Whether `signed` is right for `token`, and then whether its time is over at `now_secs`.
pub fn check(signed: &Signed, op: Op, token: &str, now_secs: i64) -> Result<(), SignatureError> {
    let want = sign(signed.path, op, signed.user, token, signed.expiry);
    if !secret_eq(signed.signature, &want) {
        return Err(SignatureError::Invalid);
    }
    match signed.expiry {
        None => Ok(()),
        Some(e) => match e.parse::<i64>() {
            Ok(at) if at >= now_secs => Ok(()),
            _ => Err(SignatureError::Expired),
        },
    }
}

/// The live sandbox whose token made `signed`. Every live sandbox is tried, so the time taken
/// says nothing about which matched.
pub fn find(
    sandboxes: &Sandboxes,
    signed: &Signed,
    op: Op,
    now_secs: i64,
) -> Result<Arc<Sandbox>, SignatureError> {
    let mut found = Err(SignatureError::Invalid);
    for id in sandboxes.ids() {
        let Some(s) = sandboxes.get(&id) else {
            continue;
        };
        match check(signed, op, &s.access_token, now_secs) {
            Ok(()) => found = Ok(s),
            Err(SignatureError::Expired) if found.is_err() => found = Err(SignatureError::Expired),
            Err(_) => {}
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signatures_match_the_sdks_and_expire() {
        // The SDK's get_signature("a.txt", "read", None, "tok") (e2b/sandbox/signature.py).
        let s = sign("a.txt", Op::Read, "", "tok", None);
        let digest = Sha256::digest(b"a.txt:read::tok");
        assert_eq!(
            s,
            format!(
                "v1_{}",
                base64::engine::general_purpose::STANDARD_NO_PAD.encode(digest)
            )
        );
        assert!(!s.ends_with('='));
        let signed = Signed {
            path: "a.txt",
            user: "",
            signature: &s,
            expiry: None,
        };
        assert_eq!(check(&signed, Op::Read, "tok", 0), Ok(()));
        assert_eq!(
            check(&signed, Op::Write, "tok", 0),
            Err(SignatureError::Invalid)
        );
        assert_eq!(
            check(&signed, Op::Read, "other", 0),
            Err(SignatureError::Invalid)
        );
        let other_path = Signed {
            path: "b.txt",
            ..signed.clone()
        };
        assert_eq!(
            check(&other_path, Op::Read, "tok", 0),
            Err(SignatureError::Invalid)
        );
        let timed = sign("a.txt", Op::Write, "user", "tok", Some("100"));
        let signed = Signed {
            path: "a.txt",
            user: "user",
            signature: &timed,
            expiry: Some("100"),
        };
        assert_eq!(check(&signed, Op::Write, "tok", 100), Ok(()));
        assert_eq!(
            check(&signed, Op::Write, "tok", 101),
            Err(SignatureError::Expired)
        );
        // A later expiry than the one signed is another signature.
        let moved = Signed {
            expiry: Some("999"),
            ..signed.clone()
        };
        assert_eq!(
            check(&moved, Op::Write, "tok", 101),
            Err(SignatureError::Invalid)
        );
        assert_eq!(
            SignatureError::Expired.to_string(),
            "signature is already expired"
        );
    }
}
