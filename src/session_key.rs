//! Session keys: `[A-Za-z0-9._:-]{1,128}`, never only dots (docs/http-api.md, "Errors").
//! A leaf: configuration, the edges and the session manager all check keys with it.

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum KeyError {
    #[error(
        "use session key `{0}`: it must be 1–128 characters of A–Z a–z 0–9 . _ : -, not only dots"
    )]
    Invalid(String),
}

/// A key made only of dots (`.`, `..`) reads as "here" or "the parent" wherever a key becomes
/// a path segment (the HTTP API's `/v1/sessions/{session}`, however it was percent-encoded):
/// refused, so no key can ever name a directory above itself (docs/http-api.md).
pub fn validate_key(key: &str) -> Result<(), KeyError> {
    let ok = !key.is_empty()
        && key.len() <= 128
        && !key.bytes().all(|b| b == b'.')
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b':' | b'-'));
    if ok {
        Ok(())
    } else {
        Err(KeyError::Invalid(crate::output::escape_display(
            &key.chars().take(160).collect::<String>(),
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys() {
        let ok = ["main", "a", "agent:main:42", "x.y_z-1", &"k".repeat(128)];
        for k in ok {
            assert!(validate_key(k).is_ok(), "{k}");
        }
        let bad = [
            "",
            "a b",
            "a/b",
            "ä",
            "a\0b",
            "a;rm",
            &"k".repeat(129),
            "$(id)",
            ".",
            "..",
            "...",
        ];
        for k in bad {
            assert!(validate_key(k).is_err(), "{k:?}");
        }
    }
}
