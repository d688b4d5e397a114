//! Finding the executable a command word names, without touching the file system.
//!
//! The caller looks bare names up in PATH (see [`command_names`](super::command_names)) and
//! hands the results over through a [`Resolver`]. The engine then insists that every path is
//! absolute, normalized, and inside a trusted directory: a relative path, `./x`, a path with
//! `..`, or a file in the workspace could have been written by the agent itself.

use std::collections::HashMap;

use super::paths::{is_within, normalize_absolute};

/// Looks bare command names up the way the shell would (PATH search).
pub trait Resolver {
    /// The absolute path `name` resolves to, or `None` if it is not found.
    fn resolve(&self, name: &str) -> Option<String>;

    /// What a command word (a bare name after its PATH lookup, or a path as written) finally
    /// resolves to through symbolic links, when the caller found out; `None` when unknown.
    /// A symlink named `x` that points at `sudo` is `sudo` (docs/policy.md, "Symlinks").
    fn real(&self, _word: &str) -> Option<String> {
        None
    }
}

/// A resolver backed by ready-made maps, for tests and for callers that resolve up front:
/// names to PATH hits, and command words to their symlink targets.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MapResolver(pub HashMap<String, String>, pub HashMap<String, String>);

impl MapResolver {
    /// An empty resolver: nothing resolves.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds one mapping.
    pub fn with(mut self, name: impl Into<String>, path: impl Into<String>) -> Self {
        self.0.insert(name.into(), path.into());
        self
    }

    /// Records that the command word `word` finally resolves to `real` through symlinks.
    pub fn with_real(mut self, word: impl Into<String>, real: impl Into<String>) -> Self {
        self.1.insert(word.into(), real.into());
        self
    }
}

impl<K: Into<String>, V: Into<String>> FromIterator<(K, V)> for MapResolver {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Self {
        Self(
            iter.into_iter()
                .map(|(k, v)| (k.into(), v.into()))
                .collect(),
            HashMap::new(),
        )
    }
}

impl Resolver for MapResolver {
    fn resolve(&self, name: &str) -> Option<String> {
        self.0.get(name).cloned()
    }

    fn real(&self, word: &str) -> Option<String> {
        self.1.get(word).cloned()
    }
}

impl<R: Resolver + ?Sized> Resolver for &R {
    fn resolve(&self, name: &str) -> Option<String> {
        (**self).resolve(name)
    }

    fn real(&self, word: &str) -> Option<String> {
        (**self).real(word)
    }
}

/// A command word's executable after the trust checks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Resolved {
    /// The absolute path that will run.
    pub path: String,
    /// Whether the word was a bare name found through PATH (bare allowlist entries need this).
    pub via_path: bool,
}

/// Whether a word is a plain command name (what PATH lookup is defined for).
pub(crate) fn is_bare_name(word: &str) -> bool {
    let mut chars = word.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '+' | '-'))
}

/// Resolves a command word and checks the result against the trusted directories.
pub(crate) fn resolve_word(
    word: &str,
    resolver: &dyn Resolver,
    trusted_dirs: &[String],
) -> Result<Resolved, String> {
    if word.is_empty() {
        return Err("empty command word".to_owned());
    }
    if word.contains('/') {
        if !word.starts_with('/') {
            return Err(format!("relative path {word:?}"));
        }
        check_trusted(word, trusted_dirs)?;
        return Ok(Resolved {
            path: word.to_owned(),
            via_path: false,
        });
    }
    if !is_bare_name(word) {
        return Err(format!("unusual command name {word:?}"));
    }
    let Some(path) = resolver.resolve(word) else {
        return Err(format!("{word} not found on PATH"));
    };
    check_trusted(&path, trusted_dirs).map_err(|reason| format!("{word} resolves to {reason}"))?;
    Ok(Resolved {
        path,
        via_path: true,
    })
}

/// Checks that a path is absolute, normalized, plain, and inside a trusted directory.
pub(crate) fn check_trusted(path: &str, trusted_dirs: &[String]) -> Result<(), String> {
    if normalize_absolute(path) != Ok(path) || path == "/" {
        return Err(format!("{path:?}, not a normalized absolute path"));
    }
    let plain = path.chars().all(|c| {
        c.is_ascii_graphic() && !matches!(c, '\\' | '\'' | '"' | '`' | '$' | '*' | '?' | '[' | ']')
    });
    if !plain {
        return Err(format!("{path:?}, a path with unusual characters"));
    }
    let dir = match path.rfind('/') {
        Some(0) => "/",
        Some(at) => &path[..at],
        None => path,
    };
    let trusted = trusted_dirs
        .iter()
        .filter_map(|t| normalize_absolute(t).ok())
        .any(|t| is_within(dir, t));
    if trusted {
        Ok(())
    } else {
        Err(format!("{path}, outside the trusted directories"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::settings::DEFAULT_TRUSTED_DIRS;

    fn trusted() -> Vec<String> {
        DEFAULT_TRUSTED_DIRS
            .iter()
            .map(|s| (*s).to_owned())
            .collect()
    }

    fn resolver() -> MapResolver {
        MapResolver::new()
            .with("ls", "/usr/bin/ls")
            .with("git", "/usr/bin/git")
            .with("evil", "/workspace/bin/evil")
            .with("rel", "bin/rel")
            .with("dots", "/usr/bin/../../tmp/dots")
            .with("sub", "/usr/local/bin/sub/tool")
            .with("spaced", "/usr/bin/a b")
    }

    #[test]
    fn resolution_table() {
        type Row<'a> = (&'a str, Result<(&'a str, bool), &'a str>);
        let rows: &[Row<'_>] = &[
            ("ls", Ok(("/usr/bin/ls", true))),
            ("git", Ok(("/usr/bin/git", true))),
            ("/usr/bin/ls", Ok(("/usr/bin/ls", false))),
            ("/bin/ls", Ok(("/bin/ls", false))),
            ("/usr/local/bin/x", Ok(("/usr/local/bin/x", false))),
            ("sub", Ok(("/usr/local/bin/sub/tool", true))),
            ("missing", Err("missing not found on PATH")),
            (
                "evil",
                Err("evil resolves to /workspace/bin/evil, outside the trusted directories"),
            ),
            (
                "rel",
                Err("rel resolves to \"bin/rel\", not a normalized absolute path"),
            ),
            (
                "dots",
                Err("dots resolves to \"/usr/bin/../../tmp/dots\", not a normalized absolute path"),
            ),
            (
                "spaced",
                Err("spaced resolves to \"/usr/bin/a b\", a path with unusual characters"),
            ),
            ("./ls", Err("relative path \"./ls\"")),
            ("bin/ls", Err("relative path \"bin/ls\"")),
            ("../ls", Err("relative path \"../ls\"")),
            ("/tmp/ls", Err("/tmp/ls, outside the trusted directories")),
            (
                "/workspace/ls",
                Err("/workspace/ls, outside the trusted directories"),
            ),
            (
                "/usr/bin/../../tmp/x",
                Err("\"/usr/bin/../../tmp/x\", not a normalized absolute path"),
            ),
            (
                "/usr/bin/./ls",
                Err("\"/usr/bin/./ls\", not a normalized absolute path"),
            ),
            (
                "//usr/bin/ls",
                Err("\"//usr/bin/ls\", not a normalized absolute path"),
            ),
            (
                "/usr/bin/ls/",
                Err("\"/usr/bin/ls/\", not a normalized absolute path"),
            ),
            (
                "/usr/binx/ls",
                Err("/usr/binx/ls, outside the trusted directories"),
            ),
            ("/usr/bin", Err("/usr/bin, outside the trusted directories")),
            ("", Err("empty command word")),
            ("-ls", Err("unusual command name \"-ls\"")),
            (".hidden", Err("unusual command name \".hidden\"")),
            ("l s", Err("unusual command name \"l s\"")),
            ("l\u{0455}", Err("unusual command name \"l\u{0455}\"")),
            ("ls\u{a0}", Err("unusual command name \"ls\\u{a0}\"")),
        ];
        for (word, want) in rows {
            let got = resolve_word(word, &resolver(), &trusted());
            let got = got
                .as_ref()
                .map(|r| (r.path.as_str(), r.via_path))
                .map_err(String::as_str);
            assert_eq!(got, *want, "word {word:?}");
        }
    }

    #[test]
    fn custom_trusted_dirs() {
        let dirs = vec!["/opt/tools/".to_owned(), "not/absolute".to_owned()];
        assert!(resolve_word("/opt/tools/bin/x", &resolver(), &dirs).is_ok());
        assert!(resolve_word("/usr/bin/ls", &resolver(), &dirs).is_err());
        assert!(resolve_word("/opt/toolsx/x", &resolver(), &dirs).is_err());
    }

    #[test]
    fn bare_names() {
        for ok in [
            "ls",
            "g++",
            "python3.11",
            "x86_64-linux-gnu-gcc",
            "_tool",
            "7z",
        ] {
            assert!(is_bare_name(ok), "{ok}");
        }
        for bad in ["", "-x", ".x", "a/b", "a b", "a$b", "a*", "\u{430}"] {
            assert!(!is_bare_name(bad), "{bad}");
        }
    }
}
