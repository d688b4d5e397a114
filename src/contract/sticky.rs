//! Sticky working directory and environment (`exec.sticky = true`, or `moat sessions set NAME
//! --sticky true`): what a command leaves behind — the directory it ended in and the variables
//! it exported — is where the next command of the session starts (docs/mcp.md, "Sticky cwd and
//! env").
//!
//! The state is written by the sandbox (a trap in the command's own shell, see
//! `process::script::sticky_command`), so it is hostile input: [`parse_state`] bounds its size,
//! validates every name and value, and carries only what a request itself could set — never a
//! name the env policy refuses (`LD_PRELOAD`, `PATH`, `HOME`, … in every mode), never a name
//! the allowlist mode would miss, never `MOAT_*`, never a value holding a secret. The same
//! filter runs again when the state is used ([`apply`]), under the policy of that moment.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The most of a state file read: a larger one is cut here (its last entry then fails to
/// parse and is dropped).
pub const STATE_MAX_BYTES: usize = 256 << 10;
/// At most this many variables are carried.
pub const MAX_VARS: usize = 128;
/// At most this many bytes of names and values are carried in all.
pub const MAX_TOTAL_BYTES: usize = 64 << 10;
/// A carried directory is at most this long (Linux's PATH_MAX).
const MAX_CWD_BYTES: usize = 4096;
/// Variables the shell maintains itself: carrying them would only echo the last command.
const SHELL_OWN: &[&str] = &["PWD", "OLDPWD", "SHLVL", "_"];

/// What a session carries from one command to the next.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StickyState {
    /// The directory the last command ended in (a container path).
    pub cwd: Option<String>,
    /// The variables it exported that differ from what it started with.
    pub env: BTreeMap<String, String>,
}

/// The filter a variable must pass to be carried, besides the fixed rules: the env policy in
/// force (a name it refuses or misses is never carried).
pub trait Carry {
    fn may_carry(&self, name: &str, value: &str) -> bool;
}

impl<F: Fn(&str, &str) -> bool> Carry for F {
    fn may_carry(&self, name: &str, value: &str) -> bool {
        self(name, value)
    }
}

/// The env policy's part of the filter, for the policy a call runs under: outside allowlist
/// mode nothing more than the fixed rules; in allowlist mode only the names a request may set
/// there (the built-in presentation settings and `env_allow`).
pub fn policy_filter(policy: crate::policy::Policy) -> impl Fn(&str, &str) -> bool {
    move |name: &str, value: &str| {
        let one = BTreeMap::from([(name.to_string(), value.to_string())]);
        crate::policy::env_findings(&one, &policy).is_empty()
    }
}

/// Whether `name=value` may be carried at all: a valid name, not moat's, not the shell's own,
/// not one the env policy refuses in any mode, no NUL, no secret value inside.
fn carriable(name: &str, value: &str, secrets: &[String], policy: &dyn Carry) -> bool {
    crate::policy::is_env_name(name)
        && !name.starts_with("MOAT_")
        && !SHELL_OWN.contains(&name)
        && crate::policy::env_forbidden(name).is_none()
        && !value.contains('\0')
        && value.len() <= super::env::MAX_VALUE_BYTES
        && !secrets
            .iter()
            .any(|s| !s.is_empty() && value.contains(s.as_str()))
        && policy.may_carry(name, value)
}

/// Reads a state file (`process::script::sticky_command`): the variables the command's shell
/// started with, an empty record, the directory it ended in, the variables it ended with; each
/// record ended by a NUL. A variable is carried when it changed, or when it was carried into
/// this command (`carried`) and is still set. `secrets` are values never stored. `None` when
/// the shell did not get to its end (the state then stays as it was).
pub fn parse_state(
    bytes: &[u8],
    carried: &BTreeMap<String, String>,
    secrets: &[String],
    policy: &dyn Carry,
) -> Option<StickyState> {
    let bytes = &bytes[..bytes.len().min(STATE_MAX_BYTES)];
    let mut records = bytes.split(|b| *b == 0);
    let mut started = BTreeMap::new();
    loop {
        let rec = records.next()?;
        if rec.is_empty() {
            break;
        }
        if let Some((name, value)) = std::str::from_utf8(rec)
            .ok()
            .and_then(|t| t.split_once('='))
        {
            started.insert(name, value);
        }
    }
    // After the start's last NUL there is always an empty piece: the end exists only if a
    // directory record follows it.
    let cwd = std::str::from_utf8(records.next()?)
        .ok()
        .filter(|c| valid_cwd(c))
        .map(str::to_string);
    let mut env = BTreeMap::new();
    let mut total = 0;
    for rec in records {
        let Ok(text) = std::str::from_utf8(rec) else {
            continue;
        };
        let Some((name, value)) = text.split_once('=') else {
            continue;
        };
        let changed = started.get(name) != Some(&value) || carried.contains_key(name);
        if !changed || !carriable(name, value, secrets, policy) {
            continue;
        }
        total += name.len() + value.len();
        if env.len() >= MAX_VARS || total > MAX_TOTAL_BYTES {
            break;
        }
        env.insert(name.to_string(), value.to_string());
    }
    Some(StickyState { cwd, env })
}

/// An absolute directory without control characters, of bounded length.
fn valid_cwd(cwd: &str) -> bool {
    cwd.starts_with('/') && cwd.len() <= MAX_CWD_BYTES && !cwd.chars().any(char::is_control)
}

/// Fills the next command's request (its `workdir` and `env`, which win): the carried
/// directory applies when it gave none (and `cwd_ok` says it still maps into the
/// workspace), the carried variables it does not set itself, each passing the filter again.
pub fn apply(
    workdir: &mut Option<String>,
    env: &mut BTreeMap<String, String>,
    state: &StickyState,
    secrets: &[String],
    policy: &dyn Carry,
    cwd_ok: impl Fn(&str) -> bool,
) {
    if workdir.as_deref().is_none_or(|w| w.trim().is_empty()) {
        if let Some(cwd) = state.cwd.as_deref().filter(|c| cwd_ok(c)) {
            *workdir = Some(cwd.to_string());
        }
    }
    for (name, value) in &state.env {
        if !env.contains_key(name) && carriable(name, value, secrets, policy) {
            env.insert(name.clone(), value.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A state file: `start` variables, then the directory and the `end` records.
    fn state(start: &[&str], end: &[&str]) -> Vec<u8> {
        let mut b = Vec::new();
        for r in start {
            b.extend_from_slice(r.as_bytes());
            b.push(0);
        }
        b.push(0);
        for r in end {
            b.extend_from_slice(r.as_bytes());
            b.push(0);
        }
        b
    }

    fn any(_: &str, _: &str) -> bool {
        true
    }

    #[test]
    fn what_a_command_leaves_is_read_and_filtered() {
        let carried = BTreeMap::from([("KEPT".to_string(), "1".to_string())]);
        let secrets = vec!["s3cr3t-value".to_string()];
        let start = ["LANG=C.UTF-8", "KEPT=1", "GONE=1", "SAME=x", "CHANGED=a"];
        let bytes = state(
            &start,
            &[
                "/workspace/src",
                "KEPT=1",
                "SAME=x",
                "CHANGED=b",
                "FOO=bar",
                "LANG=C.UTF-8",
                "MULTI=a\nb",
                "LD_PRELOAD=/workspace/evil.so",
                "PATH=/workspace/bin:/usr/bin",
                "HOME=/workspace",
                "BASH_ENV=/x",
                "MOAT_PATH_PREPEND=/x",
                "PWD=/workspace/src",
                "SHLVL=2",
                "bad name=x",
                "TOKEN=prefix-s3cr3t-value",
                "NOEQUALS",
            ],
        );
        let got = parse_state(&bytes, &carried, &secrets, &any).unwrap();
        assert_eq!(got.cwd.as_deref(), Some("/workspace/src"));
        assert_eq!(
            got.env.keys().collect::<Vec<_>>(),
            ["CHANGED", "FOO", "KEPT", "MULTI"],
            "{got:?}"
        );
    }

    #[test]
    fn allowlist_mode_carries_only_what_a_request_may_set() {
        use crate::policy::{Policy, Security};
        let allowlist = Policy {
            security: Security::Allowlist,
            env_allow: vec!["KEEPME".into()],
            ..Default::default()
        };
        let full = Policy {
            security: Security::Full,
            ..Default::default()
        };
        let bytes = state(
            &[],
            &["/workspace", "KEEPME=1", "TZ=UTC", "FOO=2", "LD_PRELOAD=/x"],
        );
        let keys = |p: Policy| {
            let got = parse_state(&bytes, &BTreeMap::new(), &[], &policy_filter(p)).unwrap();
            got.env.into_keys().collect::<Vec<_>>()
        };
        assert_eq!(keys(allowlist), ["KEEPME", "TZ"]);
        assert_eq!(keys(full), ["FOO", "KEEPME", "TZ"]);
    }

    #[test]
    fn the_policy_filter_decides_too() {
        let only_tz = |name: &str, _: &str| name == "TZ";
        let bytes = state(&[], &["/workspace", "TZ=UTC", "FOO=bar"]);
        let got = parse_state(&bytes, &BTreeMap::new(), &[], &only_tz).unwrap();
        assert_eq!(got.env.keys().collect::<Vec<_>>(), ["TZ"]);
    }

    #[test]
    fn hostile_state_files_are_bounded() {
        // Empty, or only the start: the shell never got to its end; nothing changes.
        assert_eq!(parse_state(b"", &BTreeMap::new(), &[], &any), None);
        assert_eq!(
            parse_state(b"A=1\0B=2\0", &BTreeMap::new(), &[], &any),
            None
        );
        // A directory that is relative, has control characters or is too long is dropped.
        for cwd in [
            "relative",
            "/a\nb",
            "/a\u{1b}[2J",
            &format!("/{}", "a".repeat(5000)),
        ] {
            let got = parse_state(&state(&[], &[cwd, "A=1"]), &BTreeMap::new(), &[], &any).unwrap();
            assert_eq!(got.cwd, None, "{cwd:?}");
            assert_eq!(got.env.len(), 1);
        }
        // Too many variables, too many bytes: cut.
        let many: Vec<String> = (0..1000).map(|i| format!("V{i}=x")).collect();
        let mut recs = vec!["/workspace".to_string()];
        recs.extend(many);
        let refs: Vec<&str> = recs.iter().map(String::as_str).collect();
        let got = parse_state(&state(&[], &refs), &BTreeMap::new(), &[], &any).unwrap();
        assert_eq!(got.env.len(), MAX_VARS);
        let big = "BIG=".to_string() + &"x".repeat(30 << 10);
        let recs = [
            "/w",
            big.as_str(),
            big.replace("BIG", "BIG2").as_str(),
            big.replace("BIG", "BIG3").as_str(),
        ]
        .map(str::to_string);
        let refs: Vec<&str> = recs.iter().map(String::as_str).collect();
        let got = parse_state(&state(&[], &refs), &BTreeMap::new(), &[], &any).unwrap();
        assert_eq!(got.env.len(), 2);
        // Not UTF-8: skipped, the rest still read.
        let mut bytes = state(&[], &["/workspace"]);
        bytes.extend_from_slice(b"A=\xff\0B=ok\0");
        let got = parse_state(&bytes, &BTreeMap::new(), &[], &any).unwrap();
        assert_eq!(got.env.keys().collect::<Vec<_>>(), ["B"]);
    }

    #[test]
    fn the_request_wins_and_the_filter_runs_again() {
        let st = StickyState {
            cwd: Some("/workspace/src".into()),
            env: BTreeMap::from([
                ("FOO".to_string(), "carried".to_string()),
                ("BAR".to_string(), "carried".to_string()),
                // Stored by an older rule set: dropped at use.
                ("LD_PRELOAD".to_string(), "/x.so".to_string()),
            ]),
        };
        let asked = BTreeMap::from([("FOO".to_string(), "asked".to_string())]);
        let run = |workdir: Option<&str>, cwd_ok: bool| {
            let (mut workdir, mut env) = (workdir.map(String::from), asked.clone());
            apply(&mut workdir, &mut env, &st, &[], &any, |_| cwd_ok);
            (workdir, env)
        };
        let (workdir, env) = run(None, true);
        assert_eq!(workdir.as_deref(), Some("/workspace/src"));
        assert_eq!(env["FOO"], "asked");
        assert_eq!(env["BAR"], "carried");
        assert!(!env.contains_key("LD_PRELOAD"));
        // Its own workdir wins; a carried one that no longer maps is not used.
        assert_eq!(run(Some("lib"), true).0.as_deref(), Some("lib"));
        assert_eq!(run(None, false).0, None);
    }
}
