//! The request's environment under `security = allowlist`.
//!
//! An allowlisted program is only "itself" as long as nothing in its environment tells it to
//! run something else: `GIT_CONFIG_*` defines aliases and pagers, `HOME` picks the login
//! shell's `.profile`, `PYTHONWARNINGS` + `BROWSER`, `LD_PRELOAD`, `BASH_ENV` load code. So in
//! allowlist mode a request may only set names from a short list of presentation settings
//! (locale, time zone, terminal size and colour), each with a value of its kind, plus the names
//! the operator adds in `env_allow`. Names from the code-loading families are refused outright,
//! and may not be added to `env_allow` either; any other name is a miss. The lists are the
//! host executor's too ([`super::env_names`]). See docs/policy.md ("Request env").

use std::collections::BTreeMap;

use super::env_names::{self, Judge};
use crate::output::escape_display;

/// Why `name` can never be set by a request in allowlist mode, if it is in a forbidden family.
pub(crate) fn forbidden(name: &str) -> Option<&'static str> {
    let refused = env_names::refusal(name, Judge::Policy)?;
    Some(if refused.names == env_names::Names::Exact("PATH") {
        "PATH decides which programs run"
    } else {
        "it changes what programs load or run"
    })
}

/// Whether `name` is a valid environment variable name.
pub(crate) fn is_valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// The verdict on a request's environment in allowlist mode.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct EnvVerdict {
    /// Refusals, one per name from a forbidden family, already escaped for display.
    pub refused: Vec<String>,
    /// Misses, one per name neither listed nor forbidden, already escaped for display.
    pub missed: Vec<String>,
}

/// How much of a value a miss reason shows, so an operator sees what they would approve.
const SHOWN_VALUE_CHARS: usize = 60;

/// Every refusal and miss for a request's env under `policy` (none outside allowlist mode),
/// for callers that must not let anything else override them, such as an operator's
/// exact-command entries.
pub fn findings(env: &BTreeMap<String, String>, policy: &super::Policy) -> Vec<String> {
    if policy.security != super::Security::Allowlist {
        return Vec::new();
    }
    let verdict = check(env, &policy.env_allow);
    verdict.refused.into_iter().chain(verdict.missed).collect()
}

/// Judges every name a request sets against the built-in list and the operator's `env_allow`.
pub(crate) fn check(env: &BTreeMap<String, String>, env_allow: &[String]) -> EnvVerdict {
    let mut verdict = EnvVerdict::default();
    for (name, value) in env {
        if let Some(why) = forbidden(name) {
            verdict.refused.push(format!(
                "request env {} cannot be set under security allowlist: {why}",
                escape_display(name)
            ));
            continue;
        }
        // A built-in name's value is checked whoever listed it, as on the host: `LANG=/x`
        // makes glibc read locale files from a path.
        if let Some(rule) = env_names::built_in(name) {
            if let Some(problem) = env_names::value_problem(rule, value) {
                verdict.refused.push(format!(
                    "request env {} cannot be set under security allowlist: its value {problem}",
                    escape_display(name)
                ));
            }
            continue;
        }
        let listed = env_allow.iter().any(|a| a == name);
        if !listed {
            let mut shown: String = value.chars().take(SHOWN_VALUE_CHARS).collect();
            if value.chars().count() > SHOWN_VALUE_CHARS {
                shown.push('…');
            }
            verdict.missed.push(format!(
                "request env {}={} is not on the env allowlist",
                escape_display(name),
                escape_display(&shown)
            ));
        }
    }
    verdict
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn listed_names_pass() {
        for (name, value) in [
            ("LANG", "C.UTF-8"),
            ("LC_ALL", "C"),
            ("LC_CTYPE", "en_US.UTF-8"),
            ("TZ", "Europe/Paris"),
            ("TERM", "xterm-256color"),
            ("COLUMNS", "120"),
            ("LINES", "40"),
            ("NO_COLOR", "1"),
            ("FORCE_COLOR", "x"),
            ("CLICOLOR", "1"),
        ] {
            assert_eq!(
                check(&env(&[(name, value)]), &[]),
                EnvVerdict::default(),
                "{name}"
            );
        }
        let extra = vec!["MY_FLAG".to_owned()];
        assert_eq!(
            check(&env(&[("MY_FLAG", "1")]), &extra),
            EnvVerdict::default()
        );
    }

    #[test]
    fn the_attacks_are_refused_by_name() {
        for name in [
            "GIT_CONFIG_COUNT",
            "GIT_CONFIG_KEY_0",
            "GIT_CONFIG_VALUE_0",
            "HOME",
            "PYTHONWARNINGS",
            "BROWSER",
            "LD_PRELOAD",
            "PATH",
            "ENV",
            "BASH_ENV",
            "PERL5OPT",
            "RUBYOPT",
            "NODE_OPTIONS",
            "SHELL",
            "IFS",
            "ld_preload",
            "GIT_SSH_COMMAND",
            "BASH_FUNC_ls%%",
            // Once only the host's: tar runs --checkpoint-action=exec, terminal descriptions.
            "TAR_OPTIONS",
            "TERMINFO",
            "tar_options",
            "ZIP_OPTS",
        ] {
            let v = check(&env(&[(name, "x")]), &[]);
            assert_eq!(v.refused.len(), 1, "{name}: {v:?}");
            assert!(v.refused[0].contains(&escape_display(name)), "{v:?}");
            assert!(v.missed.is_empty());
        }
    }

    #[test]
    fn other_names_are_misses_with_the_value_shown() {
        let v = check(&env(&[("FOO", "bar"), ("LC_", "x")]), &[]);
        assert!(v.refused.is_empty());
        assert_eq!(
            v.missed,
            [
                "request env FOO=bar is not on the env allowlist",
                "request env LC_=x is not on the env allowlist",
            ]
        );
        let long = "y".repeat(200);
        let v = check(&env(&[("BIG", &long)]), &[]);
        assert!(v.missed[0].contains('…'), "{v:?}");
        assert!(v.missed[0].len() < 120, "{v:?}");
        let v = check(&env(&[("ESC", "\u{1b}[2J")]), &[]);
        assert!(!v.missed[0].contains('\u{1b}'), "{v:?}");
    }

    #[test]
    fn built_in_values_are_checked() {
        for (name, value) in [
            ("LANG", "/workspace/locale"),
            ("LC_ALL", "../x"),
            ("TZ", "/etc/shadow"),
            ("TZ", ":x"),
            ("TERM", "../../workspace/t"),
            ("COLUMNS", "1e9"),
        ] {
            let v = check(&env(&[(name, value)]), &[]);
            assert_eq!(v.refused.len(), 1, "{name}={value}: {v:?}");
            assert!(v.refused[0].contains("its value is not"), "{v:?}");
            // Listing the name does not lift the check.
            let v = check(&env(&[(name, value)]), &[name.to_owned()]);
            assert_eq!(v.refused.len(), 1, "{name}={value}: {v:?}");
        }
        // A locale category glibc does not have is no built-in name: a miss.
        let v = check(&env(&[("LC_FOO", "C")]), &[]);
        assert_eq!(v.missed.len(), 1, "{v:?}");
    }

    #[test]
    fn findings_only_under_allowlist() {
        let allowlist = crate::policy::Policy {
            security: crate::policy::Security::Allowlist,
            ..crate::policy::Policy::default()
        };
        let bad = env(&[("LD_PRELOAD", "x"), ("FOO", "y"), ("LANG", "C")]);
        assert_eq!(findings(&bad, &allowlist).len(), 2);
        assert!(findings(&bad, &crate::policy::Policy::default()).is_empty());
    }

    #[test]
    fn forbidden_families() {
        for name in [
            "GIT_DIR",
            "PYTHONPATH",
            "LESSOPEN",
            "XDG_CONFIG_HOME",
            "GOFLAGS",
        ] {
            assert!(forbidden(name).is_some(), "{name}");
        }
        for name in ["LANG", "FOO", "TERM", "MY_FLAG", "CI"] {
            assert!(forbidden(name).is_none(), "{name}");
        }
    }
}
