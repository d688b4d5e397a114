//! The host env policy (docs/security.md, "Host commands"): an allowlist, because programs
//! read hundreds of variables that change what they execute (`TAR_OPTIONS`,
//! `GIT_TRACE2_EVENT`, `*_OPTIONS`, …) and no denylist keeps up with them.
//!
//! A host command gets the built-in names ([`BUILT_IN`]: locale, time zone, terminal type and
//! size, colour settings), each with a checked value, plus the names an operator lists in
//! `elevated.env_allow`. A request naming anything else fails, naming every refused key; nothing
//! is dropped silently. From moat's own environment it inherits the same names plus
//! [`ACCOUNT`] (HOME, USER, LOGNAME); PATH is built by moat, never inherited.

use std::collections::BTreeMap;

use super::env_names::{ValueRule, ACCOUNT, BUILT_IN, REFUSED, REFUSED_PREFIXES, REFUSED_SUFFIXES};

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct HostEnvError(pub String);

/// The built-in names as documented: `LANG, LC_*, TZ, …`.
pub fn built_in_summary() -> String {
    let mut shown: Vec<&str> = Vec::new();
    for (name, _) in BUILT_IN {
        let name = if name.starts_with("LC_") {
            "LC_*"
        } else {
            name
        };
        if !shown.contains(&name) {
            shown.push(name);
        }
    }
    shown.join(", ")
}

fn rule(name: &str) -> Option<ValueRule> {
    BUILT_IN.iter().find(|(n, _)| *n == name).map(|(_, r)| *r)
}

/// Why `value` does not fit `rule`, if it does not.
fn value_problem(rule: ValueRule, value: &str) -> Option<&'static str> {
    let only = |extra: &str, max: usize| {
        value.len() <= max
            && value
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || extra.contains(c))
    };
    let ok = match rule {
        ValueRule::Locale => only("_.@-", 64),
        ValueRule::Zone => {
            only("_+-/:.", 64)
                && !value.starts_with('/')
                && !value.starts_with(':')
                && !value.contains("..")
        }
        ValueRule::Term => only("_.+-", 64),
        ValueRule::Number => {
            !value.is_empty() && value.len() <= 5 && value.chars().all(|c| c.is_ascii_digit())
        }
        ValueRule::Flag => only("_.,:=+-", 64),
    };
    (!ok).then_some(match rule {
        ValueRule::Locale => "is not a locale name (letters, digits and `_.@-`)",
        ValueRule::Zone => "is not a zone name (no file path, no `..`)",
        ValueRule::Term => "is not a terminal type (letters, digits and `_.+-`)",
        ValueRule::Number => "is not a number below 100000",
        ValueRule::Flag => "is not a short setting (letters, digits and `_.,:=+-`)",
    })
}

/// Fails with `Security Violation: …` naming every key a request may not pass to a host
/// command, and every built-in key whose value does not fit. `extra` is
/// `elevated.env_allow`.
pub fn check_request(
    overrides: &BTreeMap<String, String>,
    extra: &[String],
) -> Result<(), HostEnvError> {
    let mut unlisted: Vec<String> = Vec::new();
    let mut bad_values: Vec<String> = Vec::new();
    for (k, v) in overrides {
        match rule(k) {
            Some(r) => {
                if let Some(why) = value_problem(r, v) {
                    bad_values.push(format!("the value of `{k}` {why}"));
                }
            }
            None if extra.iter().any(|e| e == k) => {}
            None => unlisted.push(format!("`{}`", crate::policy::escape_display(k))),
        }
    }
    let mut parts: Vec<String> = Vec::new();
    match unlisted.len() {
        0 => {}
        1 => parts.push(format!(
            "{} is not on the host env allowlist (elevated.env_allow)",
            unlisted[0]
        )),
        _ => parts.push(format!(
            "{} are not on the host env allowlist (elevated.env_allow)",
            unlisted.join(", ")
        )),
    }
    parts.extend(bad_values);
    if parts.is_empty() {
        return Ok(());
    }
    Err(HostEnvError(format!(
        "Security Violation: {}; a host command gets only {} and the names an operator adds to elevated.env_allow.",
        parts.join("; "),
        built_in_summary()
    )))
}

/// Variables every host command gets, whatever moat's environment or the request says: a
/// pager takes keys from a PTY command and runs a shell from them (`!sh` in less), so pagers
/// are `cat`, and less and systemd's pager run in their secure modes should a login profile
/// set one again (docs/security.md, "Environment: an allowlist").
pub const FIXED: &[(&str, &str)] = &[
    ("PAGER", "cat"),
    ("GIT_PAGER", "cat"),
    ("MANPAGER", "cat"),
    ("SYSTEMD_PAGER", "cat"),
    ("SYSTEMD_PAGERSECURE", "1"),
    ("LESSSECURE", "1"),
];

/// The part of moat's own environment a host command inherits: the built-in names whose
/// values fit, HOME/USER/LOGNAME, and `extra` (`elevated.env_allow`). Never PATH (moat builds
/// it), never `MOAT_*`.
pub fn inherited(
    vars: impl IntoIterator<Item = (String, String)>,
    extra: &[String],
) -> BTreeMap<String, String> {
    vars.into_iter()
        .filter(|(k, v)| {
            if k.starts_with("MOAT_") {
                return false;
            }
            match rule(k) {
                Some(r) => value_problem(r, v).is_none(),
                None => ACCOUNT.contains(&k.as_str()) || extra.iter().any(|e| e == k),
            }
        })
        .collect()
}

/// Whether an operator may add `name` to `elevated.env_allow`; the error says why not.
pub fn check_operator_name(name: &str) -> Result<(), String> {
    let mut chars = name.chars();
    let syntax = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !syntax {
        return Err(format!(
            "`{}` is not a variable name (^[A-Za-z_][A-Za-z0-9_]*$)",
            crate::policy::escape_display(name)
        ));
    }
    let upper = name.to_ascii_uppercase();
    if rule(&upper).is_some() {
        return Ok(());
    }
    if REFUSED.contains(&upper.as_str()) {
        return Err(format!(
            "`{name}` changes which code a host command runs or where it reads settings; it cannot be allowed"
        ));
    }
    if let Some((p, why)) = REFUSED_PREFIXES.iter().find(|(p, _)| upper.starts_with(p)) {
        return Err(format!(
            "`{name}` is in the `{p}*` family ({why}), which changes what a host command runs; it cannot be allowed"
        ));
    }
    if let Some((s, why)) = REFUSED_SUFFIXES.iter().find(|(s, _)| upper.ends_with(s)) {
        return Err(format!(
            "`{name}` is in the `*{s}` family ({why}), which changes what a host command runs; it cannot be allowed"
        ));
    }
    Ok(())
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
    fn requests_pass_only_listed_names_with_fitting_values() {
        let extra = vec!["MY_SETTING".to_string()];
        type Row<'a> = (&'a [(&'a str, &'a str)], Option<&'a [&'a str]>);
        let rows: &[Row] = &[
            (&[("LANG", "C.UTF-8"), ("TZ", "Europe/Paris")], None),
            (
                &[
                    ("COLUMNS", "120"),
                    ("NO_COLOR", "1"),
                    ("TERM", "xterm-256color"),
                ],
                None,
            ),
            (&[("MY_SETTING", "anything at all")], None),
            (
                &[("TAR_OPTIONS", "--checkpoint=1")],
                Some(&["`TAR_OPTIONS` is not on the host env allowlist (elevated.env_allow)"]),
            ),
            (
                &[("GIT_TRACE2_EVENT", "/etc/x")],
                Some(&["`GIT_TRACE2_EVENT` is not"]),
            ),
            (&[("PATH", "/tmp")], Some(&["`PATH` is not"])),
            (
                &[("LD_PRELOAD", "/tmp/x.so")],
                Some(&["`LD_PRELOAD` is not"]),
            ),
            (&[("HOME", "/tmp")], Some(&["`HOME` is not"])),
            (
                &[("A", "1"), ("B", "2"), ("LANG", "C")],
                Some(&["`A`, `B` are not on the host env allowlist"]),
            ),
            (
                &[("LANG", "/tmp/locale")],
                Some(&["the value of `LANG` is not a locale name"]),
            ),
            (
                &[("TZ", "/etc/shadow")],
                Some(&["the value of `TZ` is not a zone name"]),
            ),
            (&[("TZ", ":x")], Some(&["`TZ`"])),
            (&[("TZ", "a/../../b")], Some(&["`TZ`"])),
            (&[("COLUMNS", "1e9")], Some(&["`COLUMNS` is not a number"])),
            (
                &[("TERM", "../../tmp/t")],
                Some(&["`TERM` is not a terminal type"]),
            ),
            (
                &[("X", "1"), ("LINES", "-1")],
                Some(&["`X` is not", "the value of `LINES`"]),
            ),
        ];
        for (pairs, want) in rows {
            match (check_request(&env(pairs), &extra), want) {
                (Ok(()), None) => {}
                (Err(e), Some(needles)) => {
                    assert!(e.0.starts_with("Security Violation: "), "{e}");
                    for n in needles.iter() {
                        assert!(e.0.contains(n), "{pairs:?}: {e}");
                    }
                    assert!(e.0.contains("LANG, LANGUAGE, LC_*, TZ"), "{e}");
                }
                (r, w) => panic!("{pairs:?}: got {r:?}, want {w:?}"),
            }
        }
    }

    #[test]
    fn inherited_env_is_an_allowlist() {
        let vars = [
            ("PATH", "/usr/bin"),
            ("HOME", "/root"),
            ("USER", "root"),
            ("LANG", "C.UTF-8"),
            ("LC_ALL", "/tmp/evil"),
            ("GITHUB_TOKEN", "t"),
            ("TAR_OPTIONS", "x"),
            ("LD_PRELOAD", "x"),
            ("MOAT_HOME", "/m"),
            ("SSH_AUTH_SOCK", "/s"),
            ("OPERATOR_ADDED", "v"),
            ("SHELL", "/bin/bash"),
        ]
        .map(|(k, v)| (k.to_string(), v.to_string()));
        let kept: Vec<String> = inherited(vars, &["OPERATOR_ADDED".into()])
            .into_keys()
            .collect();
        assert_eq!(kept, ["HOME", "LANG", "OPERATOR_ADDED", "USER"]);
    }

    #[test]
    fn operators_cannot_add_dangerous_families() {
        let rows = [
            ("MY_APP_MODE", None),
            ("LANG", None),
            ("TAR_OPTIONS", Some("`TAR_*`")),
            ("GIT_TRACE2_EVENT", Some("`GIT_*`")),
            ("LD_PRELOAD", Some("`LD_*`")),
            ("PATH", Some("cannot be allowed")),
            ("BASH_ENV", Some("cannot be allowed")),
            ("FOO_OPTIONS", Some("`*_OPTIONS`")),
            ("ZIPOPT_OPTS", Some("`*_OPTS`")),
            ("PYTHONSTARTUP", Some("`PYTHON*`")),
            ("MOAT_X", Some("`MOAT_*`")),
            ("GITHUB_TOKEN", Some("`*_TOKEN`")),
            ("NPM_TOKEN", Some("`NPM_*`")),
            ("MY_TOKEN", Some("`*_TOKEN`")),
            ("HTTPS_PROXY", Some("`*_PROXY`")),
            ("1BAD", Some("not a variable name")),
            ("A-B", Some("not a variable name")),
        ];
        for (name, want) in rows {
            match (check_operator_name(name), want) {
                (Ok(()), None) => {}
                (Err(e), Some(w)) => assert!(e.contains(w), "{name}: {e}"),
                (r, w) => panic!("{name}: got {r:?}, want {w:?}"),
            }
        }
    }
}
