//! Allowlist entries and how a resolved executable matches them.
//!
//! An entry is either an absolute path glob, matched against the resolved path with `*` and
//! `?` staying inside one path component and `**` crossing components, or a bare command name,
//! matched only when the command was typed as a bare name and found through PATH. A bare
//! entry `git` therefore never covers `./git` or `/tmp/git`.

use globset::{GlobBuilder, GlobMatcher};

use super::error::PolicyError;

/// How the executable of a segment was named and found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Candidate<'a> {
    /// The word as typed (after quote removal).
    pub typed: &'a str,
    /// The absolute path it resolved to, already checked against the trusted directories.
    pub resolved: &'a str,
    /// Whether the typed word was a bare name looked up through PATH.
    pub via_path: bool,
}

/// One compiled entry.
#[derive(Debug, Clone)]
struct Entry {
    /// The entry as configured.
    text: String,
    /// How explain names the rule that matched (`allowlist: <entry>`, `skill: <name> …`).
    rule: String,
    /// Whether the entry is a bare name (matched against the typed name) or a path glob.
    bare: bool,
    /// The compiled glob.
    matcher: GlobMatcher,
}

/// The compiled allowlist of a policy.
#[derive(Debug, Clone, Default)]
pub struct Allowlist {
    /// Entries in configuration order; the first match is reported.
    entries: Vec<Entry>,
}

impl Allowlist {
    /// Compiles every entry, failing on the first unusable one.
    pub fn compile(entries: &[String]) -> Result<Self, PolicyError> {
        let mut compiled = Vec::with_capacity(entries.len());
        for entry in entries {
            compiled.push(compile_entry(entry)?);
        }
        Ok(Self { entries: compiled })
    }

    /// Compiles the usable entries and silently drops the rest, which can never match;
    /// configuration loading reports them through [`Policy::validate`](super::Policy::validate).
    pub fn compile_lenient(entries: &[String]) -> Self {
        Self {
            entries: entries
                .iter()
                .filter_map(|e| compile_entry(e).ok())
                .collect(),
        }
    }

    /// Adds entries that explain reports under their own rule text, e.g. the skill or the
    /// approval that put them there. Unusable entries are dropped, as in `compile_lenient`.
    pub fn with_labeled(mut self, entries: &[(String, String)]) -> Self {
        for (entry, rule) in entries {
            if let Ok(mut e) = compile_entry(entry) {
                e.rule = rule.clone();
                self.entries.push(e);
            }
        }
        self
    }

    /// The rule text of the first entry that covers the candidate.
    pub fn rule(&self, candidate: &Candidate<'_>) -> Option<&str> {
        self.first(candidate).map(|e| e.rule.as_str())
    }

    /// The first entry that covers the candidate.
    pub fn find(&self, candidate: &Candidate<'_>) -> Option<&str> {
        self.first(candidate).map(|entry| entry.text.as_str())
    }

    fn first(&self, candidate: &Candidate<'_>) -> Option<&Entry> {
        self.entries.iter().find(|entry| {
            if entry.bare {
                candidate.via_path && entry.matcher.is_match(candidate.typed)
            } else {
                entry.matcher.is_match(candidate.resolved)
            }
        })
    }
}

/// Compiles one entry.
fn compile_entry(entry: &str) -> Result<Entry, PolicyError> {
    let invalid = |reason: &str| PolicyError::InvalidAllowlistEntry {
        entry: entry.to_owned(),
        reason: reason.to_owned(),
    };
    if entry.trim().is_empty() {
        return Err(invalid("empty entry"));
    }
    if entry.chars().any(|c| c.is_control() || c.is_whitespace()) {
        return Err(invalid("contains whitespace or a control character"));
    }
    let bare = !entry.contains('/');
    if bare {
        if entry.starts_with('~') || entry.starts_with('.') || entry.starts_with('-') {
            return Err(invalid("a bare name must be a plain command name"));
        }
    } else {
        if !entry.starts_with('/') {
            return Err(invalid("a path entry must be absolute"));
        }
        if entry.split('/').any(|c| c == "." || c == "..") || entry.contains("//") {
            return Err(invalid(
                "a path entry must not contain ., .. or empty components",
            ));
        }
    }
    let glob = GlobBuilder::new(entry)
        .literal_separator(true)
        .backslash_escape(true)
        .build()
        .map_err(|source| PolicyError::InvalidGlob {
            entry: entry.to_owned(),
            source,
        })?;
    Ok(Entry {
        text: entry.to_owned(),
        rule: format!("allowlist: {entry}"),
        bare,
        matcher: glob.compile_matcher(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(entries: &[&str]) -> Allowlist {
        let owned: Vec<String> = entries.iter().map(|s| (*s).to_owned()).collect();
        Allowlist::compile(&owned).unwrap()
    }

    fn via_path<'a>(typed: &'a str, resolved: &'a str) -> Candidate<'a> {
        Candidate {
            typed,
            resolved,
            via_path: true,
        }
    }

    fn typed_path(resolved: &str) -> Candidate<'_> {
        Candidate {
            typed: resolved,
            resolved,
            via_path: false,
        }
    }

    #[test]
    fn matching_table() {
        let rows: Vec<(&[&str], Candidate<'_>, Option<&str>)> = vec![
            (
                &["/usr/bin/ls"],
                via_path("ls", "/usr/bin/ls"),
                Some("/usr/bin/ls"),
            ),
            (
                &["/usr/bin/ls"],
                typed_path("/usr/bin/ls"),
                Some("/usr/bin/ls"),
            ),
            (&["/usr/bin/ls"], via_path("ls", "/bin/ls"), None),
            (
                &["/usr/bin/*"],
                via_path("git", "/usr/bin/git"),
                Some("/usr/bin/*"),
            ),
            (&["/usr/bin/*"], typed_path("/usr/bin/sub/git"), None),
            (
                &["/usr/**"],
                typed_path("/usr/bin/sub/git"),
                Some("/usr/**"),
            ),
            (
                &["/usr/**"],
                typed_path("/usr/local/bin/x"),
                Some("/usr/**"),
            ),
            (&["/opt/**"], typed_path("/usr/bin/x"), None),
            (
                &["/usr/bin/g?t"],
                via_path("git", "/usr/bin/git"),
                Some("/usr/bin/g?t"),
            ),
            (&["/usr/bin/g?t"], typed_path("/usr/bin/g/t"), None),
            (
                &["/usr/bin/py*"],
                via_path("python3", "/usr/bin/python3"),
                Some("/usr/bin/py*"),
            ),
            (&["/USR/BIN/LS"], via_path("ls", "/usr/bin/ls"), None),
            (&["git"], via_path("git", "/usr/bin/git"), Some("git")),
            (&["git"], typed_path("/usr/bin/git"), None),
            (&["git"], via_path("gitk", "/usr/bin/gitk"), None),
            (&["GIT"], via_path("git", "/usr/bin/git"), None),
            (&["g*"], via_path("grep", "/usr/bin/grep"), Some("g*")),
            (
                &["/usr/bin/g++"],
                via_path("g++", "/usr/bin/g++"),
                Some("/usr/bin/g++"),
            ),
            (
                &["ls", "/usr/bin/git"],
                via_path("git", "/usr/bin/git"),
                Some("/usr/bin/git"),
            ),
            (
                &["/usr/bin/*", "ls"],
                via_path("ls", "/usr/bin/ls"),
                Some("/usr/bin/*"),
            ),
            (&[], via_path("ls", "/usr/bin/ls"), None),
        ];
        for (entries, candidate, want) in rows {
            assert_eq!(
                list(entries).find(&candidate),
                want,
                "{entries:?} vs {candidate:?}"
            );
        }
    }

    #[test]
    fn invalid_entries() {
        for entry in [
            "",
            " ",
            "./x",
            "bin/x",
            "~/bin/x",
            "/usr/../x",
            "/usr//x",
            "a b",
            ".x",
        ] {
            assert!(
                Allowlist::compile(&[entry.to_owned()]).is_err(),
                "entry {entry:?} should be rejected"
            );
        }
        let lenient = Allowlist::compile_lenient(&["./x".to_owned(), "/usr/bin/ls".to_owned()]);
        assert_eq!(
            lenient.find(&via_path("ls", "/usr/bin/ls")),
            Some("/usr/bin/ls")
        );
    }
}
