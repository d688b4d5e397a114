//! What allow-always writes to the allowlist: the resolved executable of each segment, except
//! for shells and interpreters, which would then run anything; for those (and for commands
//! the parser could not resolve) an entry for the exact command instead, valid only in the
//! session and working directory it was approved for (docs/approvals.md).

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::policy::Evaluation;

/// Programs that run code they are handed, besides the interpreters of the policy's table
/// (`policy::interpreters`, which the inline-eval check and the binding read too): shells of
/// multi-call binaries, REPLs, wrappers and debuggers. Allowlisting one by path allows
/// everything.
const RUNS_ANYTHING: &[&str] = &[
    "busybox", "toybox", "irb", "r", "xargs", "env", "sudo", "doas", "su", "pkexec", "runuser",
    "gdb",
];

/// Whether the executable at `path` is a shell or interpreter (version suffixes ignored:
/// `python3.11` counts as `python`).
pub fn is_interpreter(path: &str) -> bool {
    let base = path.rsplit('/').next().unwrap_or(path).to_ascii_lowercase();
    let stem = base.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.' || c == '-');
    crate::policy::interpreters::is_interpreter(path)
        || RUNS_ANYTHING.contains(&stem)
        || RUNS_ANYTHING.contains(&base.as_str())
}

/// The allowlist entry that stands for exactly `command`, run by `session` in `cwd`. The scope
/// is part of the hash, so an entry never matches in another session or directory; entries
/// stored before the scope existed hashed the command alone and match nothing now.
pub fn command_entry(session: &str, cwd: &str, command: &str) -> String {
    let mut h = Sha256::new();
    h.update(b"moat-exact-command-v2\0");
    h.update(session.as_bytes());
    h.update([0u8]);
    h.update(cwd.as_bytes());
    h.update([0u8]);
    h.update(command.trim().as_bytes());
    format!("=command:{}", hex::encode(h.finalize()))
}

/// One entry allow-always adds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PersistEntry {
    pub entry: String,
    /// For an exact-command entry, the command it stands for.
    pub command: Option<String>,
    /// For an exact-command entry, the session it is valid in.
    #[serde(default)]
    pub session: Option<String>,
    /// For an exact-command entry, the working directory it is valid in.
    #[serde(default)]
    pub cwd: Option<String>,
}

impl PersistEntry {
    /// An executable path (glob) entry.
    pub fn path(entry: impl Into<String>) -> Self {
        Self {
            entry: entry.into(),
            command: None,
            session: None,
            cwd: None,
        }
    }

    /// An exact-command entry for `session` in `cwd`.
    pub fn exact(session: &str, cwd: &str, command: &str) -> Self {
        Self {
            entry: command_entry(session, cwd, command),
            command: Some(command.to_string()),
            session: Some(session.to_string()),
            cwd: Some(cwd.to_string()),
        }
    }
}

/// The entries allow-always adds for `command` as evaluated, run by `session` in `cwd`.
///
/// With `exact_only` (host commands) the only entry is the exact command: on the host an
/// executable entry alone never runs anything unasked (docs/policy.md, "Argv profiles"), so
/// what the operator saw is what is remembered, scoped as every exact entry is.
pub fn entries(
    eval: &Evaluation,
    command: &str,
    session: &str,
    cwd: &str,
    exact_only: bool,
) -> Vec<PersistEntry> {
    let mut out: Vec<PersistEntry> = Vec::new();
    let mut needs_exact = eval.segments.is_empty() || exact_only;
    for segment in eval.segments.iter().filter(|_| !exact_only) {
        match &segment.resolved {
            Some(path) if !is_interpreter(path) => {
                if !out.iter().any(|e| &e.entry == path) {
                    out.push(PersistEntry::path(path.clone()));
                }
            }
            _ => needs_exact = true,
        }
    }
    // Inline eval asks every time: an exact-command entry would let the same code run unasked
    // (docs/approvals.md). The other segments' executables are still remembered.
    if needs_exact && eval.inline_eval.is_empty() {
        out.push(PersistEntry::exact(session, cwd, command));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::{evaluate, MapResolver, Policy, Request, Security};

    fn eval(command: &str) -> Evaluation {
        let policy = Policy {
            security: Security::Allowlist,
            ask: crate::policy::Ask::OnMiss,
            ..Policy::default()
        };
        let resolver = MapResolver::new()
            .with("jq", "/usr/bin/jq")
            .with("sh", "/bin/sh")
            .with("python3", "/usr/bin/python3")
            .with("git", "/usr/bin/git");
        evaluate(&Request::new(command, "/w"), &policy, &resolver)
    }

    #[test]
    fn interpreters() {
        for (path, want) in [
            ("/bin/sh", true),
            ("/usr/bin/python3", true),
            ("/usr/bin/python3.11", true),
            ("/usr/bin/bash", true),
            ("/usr/bin/jq", false),
            ("/usr/bin/git", false),
            ("/usr/bin/shred", false),
        ] {
            assert_eq!(is_interpreter(path), want, "{path}");
        }
    }

    #[test]
    fn allow_always_entries() {
        let e = entries(
            &eval("jq . | git status"),
            "jq . | git status",
            "main",
            "/w",
            false,
        );
        // A host command remembers only the exact command.
        let host = entries(
            &eval("jq . | git status"),
            "jq . | git status",
            "main",
            "/w",
            true,
        );
        assert_eq!(host.len(), 1, "{host:?}");
        assert_eq!(
            host[0].entry,
            command_entry("main", "/w", "jq . | git status")
        );
        let names: Vec<&str> = e.iter().map(|e| e.entry.as_str()).collect();
        assert_eq!(names, ["/usr/bin/jq", "/usr/bin/git"]);
        for cmd in ["sh ./build.sh", "python3 tool.py"] {
            let e = entries(&eval(cmd), cmd, "main", "/w", false);
            assert_eq!(e.len(), 1, "{e:?}");
            assert!(e[0].entry.starts_with("=command:"), "{e:?}");
            assert_eq!(e[0].command.as_deref(), Some(cmd));
            assert_eq!(e[0].entry, command_entry("main", "/w", cmd));
            // Scoped: another session or directory is another entry.
            assert_ne!(e[0].entry, command_entry("other", "/w", cmd));
            assert_ne!(e[0].entry, command_entry("main", "/w2", cmd));
        }
        // Inline eval is never remembered, whether it missed or passed the allowlist.
        for cmd in [
            "sh -c 'echo hi'",
            "python3 -c 'print(1)'",
            "python3 /dev/stdin",
            "sh -s",
        ] {
            assert_eq!(entries(&eval(cmd), cmd, "main", "/w", false), [], "{cmd}");
        }
        let e = entries(
            &eval("jq . && python3 -c x"),
            "jq . && python3 -c x",
            "main",
            "/w",
            false,
        );
        let names: Vec<&str> = e.iter().map(|e| e.entry.as_str()).collect();
        assert_eq!(names, ["/usr/bin/jq"]);
        let e = entries(&eval("jq . $(id)"), "jq . $(id)", "main", "/w", false);
        assert!(e.iter().any(|e| e.entry.starts_with("=command:")), "{e:?}");
    }
}
