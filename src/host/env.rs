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

use crate::policy::env_names::{built_in as rule, value_problem, Judge, Names, ACCOUNT, BUILT_IN};

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
            None => unlisted.push(format!("`{}`", crate::output::escape_display(k))),
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
            crate::output::escape_display(name)
        ));
    }
    if rule(&name.to_ascii_uppercase()).is_some() {
        return Ok(());
    }
    let Some(refused) = crate::policy::env_names::refusal(name, Judge::Host) else {
        return Ok(());
    };
    let why = refused.why;
    Err(match refused.names {
        Names::Exact(_) => format!(
            "`{name}` changes which code a host command runs or where it reads settings ({why}); it cannot be allowed"
        ),
        Names::Prefix(p) => format!(
            "`{name}` is in the `{p}*` family ({why}), which changes what a host command runs; it cannot be allowed"
        ),
        Names::Suffix(s) => format!(
            "`{name}` is in the `*{s}` family ({why}), which changes what a host command runs; it cannot be allowed"
        ),
    })
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

    /// How one judge treats a name: as an operator's addition, and in a request.
    #[derive(Debug, PartialEq, Eq)]
    struct Verdict {
        /// Whether an operator may add the name to the judge's `env_allow`.
        operator_may_add: bool,
        /// What a request setting it to `value` gets when no `env_allow` lists it.
        request: &'static str,
    }

    fn host_verdict(name: &str, value: &str) -> Verdict {
        Verdict {
            operator_may_add: check_operator_name(name).is_ok(),
            request: match check_request(&env(&[(name, value)]), &[]) {
                Ok(()) => "passes",
                Err(e) if e.0.contains("the value of") => "value refused",
                Err(e) if e.0.contains("is not on the host env allowlist") => "refused",
                Err(e) => panic!("{name}: {e}"),
            },
        }
    }

    fn policy_verdict(name: &str, value: &str) -> Verdict {
        let policy = |env_allow: Vec<String>| crate::policy::Policy {
            security: crate::policy::Security::Allowlist,
            env_allow,
            ..crate::policy::Policy::default()
        };
        let findings = crate::policy::env_findings(&env(&[(name, value)]), &policy(Vec::new()));
        Verdict {
            operator_may_add: policy(vec![name.to_string()]).validate().is_ok(),
            request: match findings.as_slice() {
                [] => "passes",
                [f] if f.contains("cannot be set") && f.contains("its value") => "value refused",
                [f] if f.contains("cannot be set") => "refused",
                // A miss: the operator may approve it, or list it in env_allow.
                [f] if f.contains("is not on the env allowlist") => "asked",
                other => panic!("{name}: {other:?}"),
            },
        }
    }

    /// Every name of the shared table is judged alike by the host executor and by the policy,
    /// but for the entries that say why not (`host_only`), where exactly that difference shows.
    #[test]
    fn host_and_policy_judge_every_listed_name_alike() {
        use crate::policy::env_names::{ValueRule, REFUSED};
        let refused = Verdict {
            operator_may_add: false,
            request: "refused",
        };
        for entry in REFUSED {
            let samples = match entry.names {
                Names::Exact(n) => vec![n.to_string(), n.to_ascii_lowercase()],
                Names::Prefix(p) => vec![
                    p.to_string(),
                    format!("{p}SAMPLE"),
                    format!("{p}x").to_ascii_lowercase(),
                ],
                Names::Suffix(s) => vec![
                    format!("SAMPLE{s}"),
                    format!("sample{s}").to_ascii_lowercase(),
                ],
            };
            for name in samples {
                if !crate::policy::is_env_name(&name) {
                    continue;
                }
                let host = host_verdict(&name, "1");
                let policy = policy_verdict(&name, "1");
                // A request on the host names only what it may; the policy refuses outright.
                assert_eq!(host, refused, "host on {name}");
                match entry.host_only {
                    None => assert_eq!(policy, refused, "policy on {name}"),
                    Some(why) => {
                        assert!(!why.is_empty());
                        assert_eq!(
                            policy,
                            Verdict {
                                operator_may_add: true,
                                request: "asked"
                            },
                            "policy on host-only {name}"
                        );
                    }
                }
            }
        }
        for (name, rule) in BUILT_IN {
            let (good, bad) = match rule {
                ValueRule::Locale => ("C.UTF-8", "/tmp/locale"),
                ValueRule::Zone => ("Europe/Paris", "/etc/localtime"),
                ValueRule::Term => ("xterm-256color", "../../tmp/t"),
                ValueRule::Number => ("120", "1e9"),
                ValueRule::Flag => ("1", "$(id)"),
            };
            for (value, want) in [(good, "passes"), (bad, "value refused")] {
                let want = Verdict {
                    operator_may_add: true,
                    request: want,
                };
                assert_eq!(host_verdict(name, value), want, "host on {name}={value}");
                assert_eq!(
                    policy_verdict(name, value),
                    want,
                    "policy on {name}={value}"
                );
            }
        }
        // Names in no family: both let an operator add them; unlisted, the host refuses the
        // request and the policy asks (its misses go to the operator, the host has no misses).
        for name in ["MY_FLAG", "CI", "LC_FOO", "DEBUG"] {
            assert_eq!(
                host_verdict(name, "1"),
                Verdict {
                    operator_may_add: true,
                    request: "refused"
                },
                "{name}"
            );
            assert_eq!(
                policy_verdict(name, "1"),
                Verdict {
                    operator_may_add: true,
                    request: "asked"
                },
                "{name}"
            );
        }
    }
}
