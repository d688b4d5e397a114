//! Environment rules (docs/mcp.md, "Tools": `env`): keys `^[A-Za-z_][A-Za-z0-9_]*$`, no NUL in values, each value
//! ≤ 32 KiB, all ≤ 256 KiB. A bad entry fails the whole request, naming the key.

use std::collections::BTreeMap;

pub const MAX_VALUE_BYTES: usize = 32 * 1024;
pub const MAX_TOTAL_BYTES: usize = 256 * 1024;
/// At most this many entries in a request's `PATH` (docs/mcp.md, "env.PATH").
pub const MAX_PATH_ENTRIES: usize = 64;
/// At most this many bytes per `PATH` entry (Linux's PATH_MAX is 4096; a directory meant for
/// commands is far shorter).
pub const MAX_PATH_ENTRY_BYTES: usize = 1024;

/// Pagers as `cat`, and less and systemd's pager in their secure modes: a pager takes keys
/// from a PTY command and runs a shell from them (`!sh` in less, which `git log` starts on a
/// terminal). Every host command gets these, and every sandbox command under an allowlist,
/// whatever the request says (docs/policy.md, "Argv profiles").
pub const PAGER_ENV: &[(&str, &str)] = &[
    ("PAGER", "cat"),
    ("GIT_PAGER", "cat"),
    ("MANPAGER", "cat"),
    ("SYSTEMD_PAGER", "cat"),
    ("SYSTEMD_PAGERSECURE", "1"),
    ("LESSSECURE", "1"),
];

/// `env` (`KEY=VALUE` entries) with [`PAGER_ENV`] in force: earlier entries of those names are
/// dropped, since a lookup may take the first.
pub fn with_pagers_neutered(env: &mut Vec<String>) {
    env.retain(|entry| {
        let key = entry.split_once('=').map_or(entry.as_str(), |(k, _)| k);
        !PAGER_ENV.iter().any(|(name, _)| *name == key)
    });
    env.extend(PAGER_ENV.iter().map(|(k, v)| format!("{k}={v}")));
}

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
    #[error("set env var `PATH`: entry {index} `{entry}` {reason}")]
    BadPathEntry {
        /// 1-based position in the value, so the caller can find it.
        index: usize,
        /// The entry, escaped and cut for display.
        entry: String,
        reason: &'static str,
    },
    #[error("set env var `PATH`: {0} entries (limit {MAX_PATH_ENTRIES})")]
    TooManyPathEntries(usize),
}

/// The entries of a request's `PATH`, to put before the login PATH in the sandbox (those not
/// already there, in order, each once). Every entry must be an absolute, normalized directory
/// path: an empty entry (`a::b`, a leading or trailing `:`) or a relative one (`.`, `bin`)
/// would make the shell search the working directory, which the agent writes. `None` when the
/// request sets no PATH.
pub fn request_path(env: &BTreeMap<String, String>) -> Result<Option<Vec<String>>, EnvError> {
    let Some(value) = env.get("PATH") else {
        return Ok(None);
    };
    let parts: Vec<&str> = value.split(':').collect();
    if parts.len() > MAX_PATH_ENTRIES {
        return Err(EnvError::TooManyPathEntries(parts.len()));
    }
    let mut out: Vec<String> = Vec::new();
    for (i, entry) in parts.iter().enumerate() {
        let bad = |reason| EnvError::BadPathEntry {
            index: i + 1,
            entry: printable(entry),
            reason,
        };
        if entry.is_empty() {
            return Err(bad(
                "is empty (an empty entry searches the working directory)",
            ));
        }
        if !entry.starts_with('/') {
            return Err(bad("is not an absolute path"));
        }
        if entry.len() > MAX_PATH_ENTRY_BYTES {
            return Err(bad("is longer than 1024 bytes"));
        }
        if entry.chars().any(char::is_control) {
            return Err(bad("contains a control character"));
        }
        if entry.split('/').any(|c| c == "." || c == "..") {
            return Err(bad("has a `.` or `..` component"));
        }
        if !out.iter().any(|e| e == entry) {
            out.push((*entry).to_string());
        }
    }
    Ok(Some(out))
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
///
/// A request's `PATH` is not passed as `PATH`: the login profile would reset it, and the engine
/// would look the wrapper's own `sh` up in it. Its entries (from [`request_path`]) travel in
/// `MOAT_PATH_REQUEST` for the prelude instead (src/process/script.rs).
pub fn merge_env(
    session: &BTreeMap<String, String>,
    request: &BTreeMap<String, String>,
    path_prepend: &[String],
    request_path: &[String],
) -> Vec<String> {
    let mut merged = session.clone();
    merged.extend(
        request
            .iter()
            .filter(|(k, _)| k.as_str() != "PATH")
            .map(|(k, v)| (k.clone(), v.clone())),
    );
    let mut out: Vec<String> = merged
        .into_iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    out.push("MOAT_SHELL=exec".into());
    if !path_prepend.is_empty() {
        out.push(format!(
            "{}={}",
            crate::wrapper::PATH_PREPEND_VAR,
            path_prepend.join(":")
        ));
    }
    if !request_path.is_empty() {
        out.push(format!(
            "{}={}",
            crate::wrapper::PATH_REQUEST_VAR,
            request_path.join(":")
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
            &[],
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

    #[test]
    fn request_path_travels_apart_from_path() {
        let merged = merge_env(
            &env(&[("PATH", "/session")]),
            &env(&[("PATH", "/opt/x:/usr/bin")]),
            &[],
            &["/opt/x".into(), "/usr/bin".into()],
        );
        assert_eq!(
            merged,
            [
                "PATH=/session",
                "MOAT_SHELL=exec",
                "MOAT_PATH_REQUEST=/opt/x:/usr/bin"
            ]
        );
    }

    #[test]
    fn request_path_entries() {
        let ok = |v: &str| request_path(&env(&[("PATH", v)])).unwrap().unwrap();
        assert_eq!(ok("/opt/x:/usr/bin"), ["/opt/x", "/usr/bin"]);
        assert_eq!(ok("/a:/b:/a"), ["/a", "/b"]);
        assert_eq!(ok("/with space/bin"), ["/with space/bin"]);
        assert_eq!(request_path(&env(&[("HOME", "/x")])).unwrap(), None);
        let long = format!("/{}", "d".repeat(MAX_PATH_ENTRY_BYTES));
        let many = vec!["/x"; MAX_PATH_ENTRIES + 1].join(":");
        for (value, needle) in [
            ("/opt/x::/usr/bin", "entry 2 `` is empty"),
            (":/usr/bin", "entry 1 `` is empty"),
            ("/usr/bin:", "entry 2 `` is empty"),
            ("/opt/x:.", "entry 2 `.` is not an absolute path"),
            ("bin:/usr/bin", "entry 1 `bin` is not an absolute path"),
            ("/opt/../tmp", "`..` component"),
            ("/opt/./x", "`.` or `..` component"),
            ("/opt/x\n", "control character"),
            (long.as_str(), "longer than 1024 bytes"),
            (many.as_str(), "65 entries (limit 64)"),
        ] {
            let err = request_path(&env(&[("PATH", value)])).unwrap_err();
            assert!(err.to_string().contains(needle), "{value:?}: {err}");
            assert!(err.to_string().starts_with("set env var `PATH`"), "{err}");
        }
    }
}
