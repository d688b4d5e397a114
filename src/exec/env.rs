//! Environment rules (SPEC §3): keys `^[A-Za-z_][A-Za-z0-9_]*$`, no NUL in values, each value
//! ≤ 32 KiB, all ≤ 256 KiB. A bad entry fails the whole request, naming the key.

use std::collections::BTreeMap;

pub const MAX_VALUE_BYTES: usize = 32 * 1024;
pub const MAX_TOTAL_BYTES: usize = 256 * 1024;

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum EnvError {
    #[error("set env var `{0}`: names must match ^[A-Za-z_][A-Za-z0-9_]*$")]
    BadKey(String),
    #[error("set env var `{0}`: its value contains a NUL byte")]
    Nul(String),
    #[error("set env var `{key}`: its value is {len} bytes (limit {MAX_VALUE_BYTES})")]
    TooLong { key: String, len: usize },
    #[error("set the environment: {0} bytes in total (limit {MAX_TOTAL_BYTES})")]
    TooLarge(usize),
    #[error("set env var `{0}`: the MOAT_ prefix is reserved for moat itself")]
    Reserved(String),
}

pub fn validate_env(env: &BTreeMap<String, String>) -> Result<(), EnvError> {
    let mut total = 0;
    for (k, v) in env {
        let mut chars = k.chars();
        let first_ok = chars
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
        if !first_ok || !chars.all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(EnvError::BadKey(printable(k)));
        }
        if k.starts_with("MOAT_") {
            return Err(EnvError::Reserved(k.clone()));
        }
        if v.contains('\0') {
            return Err(EnvError::Nul(k.clone()));
        }
        if v.len() > MAX_VALUE_BYTES {
            return Err(EnvError::TooLong {
                key: k.clone(),
                len: v.len(),
            });
        }
        total += k.len() + v.len() + 1;
    }
    if total > MAX_TOTAL_BYTES {
        return Err(EnvError::TooLarge(total));
    }
    Ok(())
}

/// Session config env < request env, then moat's own variables on top. Returns `K=V` entries.
pub fn merge_env(
    session: &BTreeMap<String, String>,
    request: &BTreeMap<String, String>,
    path_prepend: &[String],
) -> Vec<String> {
    let mut merged = session.clone();
    merged.extend(request.iter().map(|(k, v)| (k.clone(), v.clone())));
    let mut out: Vec<String> = merged
        .into_iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    out.push("MOAT_SHELL=exec".into());
    if !path_prepend.is_empty() {
        out.push(format!(
            "{}={}",
            crate::process::script::PATH_PREPEND_VAR,
            path_prepend.join(":")
        ));
    }
    out
}

/// Shows control characters in an error message instead of printing them.
fn printable(s: &str) -> String {
    s.chars().take(64).flat_map(char::escape_debug).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn keys_and_values() {
        let big = "x".repeat(MAX_VALUE_BYTES + 1);
        let rows: Vec<(BTreeMap<String, String>, Option<&str>)> = vec![
            (env(&[("FOO", "bar"), ("_x1", "")]), None),
            (env(&[("1BAD", "x")]), Some("1BAD")),
            (env(&[("BAD-KEY", "x")]), Some("BAD-KEY")),
            (env(&[("", "x")]), Some("set env var ``")),
            (env(&[("A B", "x")]), Some("A B")),
            (env(&[("NUL", "a\0b")]), Some("NUL")),
            (env(&[("LONG", &big)]), Some("LONG")),
            (env(&[("MOAT_SHELL", "x")]), Some("MOAT_SHELL")),
        ];
        for (e, want) in rows {
            match (validate_env(&e), want) {
                (Ok(()), None) => {}
                (Err(err), Some(name)) => assert!(err.to_string().contains(name), "{err}"),
                (r, w) => panic!("{e:?}: got {r:?}, want {w:?}"),
            }
        }
        let many: BTreeMap<String, String> = (0..10)
            .map(|i| (format!("K{i}"), "y".repeat(30_000)))
            .collect();
        assert!(matches!(validate_env(&many), Err(EnvError::TooLarge(_))));
    }

    #[test]
    fn request_wins_and_moat_vars_are_last() {
        let merged = merge_env(
            &env(&[("A", "session"), ("B", "keep")]),
            &env(&[("A", "request")]),
            &["/opt/tools/bin".into()],
        );
        assert_eq!(
            merged,
            [
                "A=request",
                "B=keep",
                "MOAT_SHELL=exec",
                "MOAT_PATH_PREPEND=/opt/tools/bin"
            ]
        );
    }
}
