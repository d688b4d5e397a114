//! The operator's policy: the dials, the lists, and their validation at configuration load.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::allowlist::Allowlist;
use super::bin_profiles::BinProfile;
use super::env;
use super::error::PolicyError;
use super::levels::{Ask, Security};
use super::paths::normalize_absolute;
use super::patterns::ArgvPattern;
use super::safe_bins;

/// Everything [`evaluate`](super::evaluate) needs to know about what the operator allows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Policy {
    /// The security level in force (after a request tightened it).
    pub security: Security,
    /// The ask level in force (after a request raised it).
    pub ask: Ask,
    /// Executables allowed in allowlist mode: absolute path globs (`/usr/bin/ls`, `/usr/bin/*`,
    /// `/opt/**`), or bare names (`git`) that match only commands found through PATH, so that
    /// `./git` or `/tmp/git` can never borrow the trust given to `git`.
    pub allowlist: Vec<String>,
    /// Stdin-only filters that pass without an allowlist entry when their argv fits the
    /// binary's profile, so pipelines such as `… | wc -l` need no approval.
    pub safe_bins: Vec<String>,
    /// Argv profiles for safe bins moat has no built-in profile for (`jq`), keyed by binary
    /// name, so an operator can add their own filters without an allowlist entry that would
    /// let every argv through (docs/policy.md, "Operator safe-bin profiles").
    pub safe_bin_profiles: BTreeMap<String, BinProfile>,
    /// Argv profiles for allowlisted programs, keyed by binary name: an allowlisted program
    /// with a profile runs unasked only with an argv that fits it. On the host an allowlisted
    /// program needs a profile (this one or a built-in) to run unasked at all, because an
    /// executable is only as safe as its most dangerous option (docs/policy.md, "Argv
    /// profiles").
    pub argv_profiles: BTreeMap<String, BinProfile>,
    /// Set for host commands by [`compose`](super::compose): an allowlist entry alone never
    /// runs a command unasked; its argv must fit a profile. Never read from configuration.
    #[serde(skip)]
    pub profiles_required: bool,
    /// Interpreter one-liners (`python -c`, `sh -c`, …) hide a program inside an argument,
    /// so allowlisting the interpreter must not be enough to run them unasked.
    pub strict_inline_eval: bool,
    /// Argv patterns (`git push *`) that need an operator even where the command would pass,
    /// including in full mode.
    pub ask_patterns: Vec<String>,
    /// Argv patterns (`sudo *`) refused in every mode, because some commands should never run
    /// from an agent whatever else the policy says.
    pub deny_patterns: Vec<String>,
    /// When non-empty, the working directory must lie inside one of these, so an agent cannot
    /// point a command at a tree the operator did not hand over.
    pub allowed_workdirs: Vec<String>,
    /// Directories an executable may resolve from; anything else (the workspace, `/tmp`, a
    /// relative path) could be a file the agent wrote itself.
    pub trusted_dirs: Vec<String>,
    /// Request env names allowed in allowlist mode on top of the built-in presentation list
    /// (locale, time zone, terminal): any other name a request sets is a miss, because the
    /// environment can make an allowlisted program run something else. Names from the
    /// code-loading families (`HOME`, `PATH`, `LD_*`, `GIT_*`, `PYTHON*`, …) are refused here.
    pub env_allow: Vec<String>,
    /// Entries added at run time rather than by configuration, each with the rule text explain
    /// reports for it: enabled skills' binaries, executables an operator approved for good.
    #[serde(skip)]
    pub labeled_allowlist: Vec<(String, String)>,
}

/// The default safe bins (docs/policy.md, "Safe bins").
pub const DEFAULT_SAFE_BINS: &[&str] = &["cut", "uniq", "head", "tail", "tr", "wc", "grep", "sort"];

/// The default trusted directories: the system's own binary directories.
pub const DEFAULT_TRUSTED_DIRS: &[&str] = &[
    "/usr/local/sbin",
    "/usr/local/bin",
    "/usr/sbin",
    "/usr/bin",
    "/sbin",
    "/bin",
];

impl Default for Policy {
    fn default() -> Self {
        Self {
            security: Security::Full,
            ask: Ask::Off,
            allowlist: Vec::new(),
            safe_bins: DEFAULT_SAFE_BINS.iter().map(|s| (*s).to_owned()).collect(),
            safe_bin_profiles: BTreeMap::new(),
            argv_profiles: BTreeMap::new(),
            profiles_required: false,
            strict_inline_eval: true,
            ask_patterns: Vec::new(),
            deny_patterns: Vec::new(),
            allowed_workdirs: Vec::new(),
            env_allow: Vec::new(),
            trusted_dirs: DEFAULT_TRUSTED_DIRS
                .iter()
                .map(|s| (*s).to_owned())
                .collect(),
            labeled_allowlist: Vec::new(),
        }
    }
}

impl Policy {
    /// The host defaults (docs/policy.md, "Settings"): allowlist mode, asking on a miss.
    pub fn host_default() -> Self {
        Self {
            security: Security::Allowlist,
            ask: Ask::OnMiss,
            ..Self::default()
        }
    }

    /// Checks every list for entries that could never work as intended.
    ///
    /// [`evaluate`](super::evaluate) tolerates bad entries (they simply never match), so
    /// configuration loading should call this to tell the operator instead.
    pub fn validate(&self) -> Result<(), PolicyError> {
        Allowlist::compile(&self.allowlist)?;
        for (bin, profile) in &self.safe_bin_profiles {
            profile.validate(bin).map_err(PolicyError::InvalidProfile)?;
            if safe_bins::profile(bin).is_some() {
                return Err(PolicyError::InvalidProfile(format!(
                    "safe_bin_profiles.{bin}: {bin} has a built-in profile, which a configured one may not replace"
                )));
            }
            if !self.safe_bins.contains(bin) {
                return Err(PolicyError::InvalidProfile(format!(
                    "safe_bin_profiles.{bin}: {bin} is not in safe_bins, so the profile would never apply"
                )));
            }
        }
        for (bin, profile) in &self.argv_profiles {
            profile
                .validate_in("argv_profiles", bin)
                .map_err(PolicyError::InvalidProfile)?;
        }
        for name in &self.safe_bins {
            if safe_bins::profile(name).is_none() && !self.safe_bin_profiles.contains_key(name) {
                return Err(PolicyError::UnknownSafeBin(name.clone()));
            }
        }
        for pattern in self.ask_patterns.iter().chain(&self.deny_patterns) {
            ArgvPattern::compile(pattern)?;
        }
        for name in &self.env_allow {
            if !env::is_valid_name(name) {
                return Err(PolicyError::InvalidEnvAllow {
                    name: name.clone(),
                    reason: "not a variable name".to_owned(),
                });
            }
            if let Some(why) = env::forbidden(name) {
                return Err(PolicyError::InvalidEnvAllow {
                    name: name.clone(),
                    reason: why.to_owned(),
                });
            }
        }
        for (key, dirs) in [
            ("allowed_workdirs", &self.allowed_workdirs),
            ("trusted_dirs", &self.trusted_dirs),
        ] {
            for dir in dirs {
                normalize_absolute(dir).map_err(|reason| PolicyError::InvalidDir {
                    key,
                    dir: dir.clone(),
                    reason: reason.to_owned(),
                })?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_follow_the_spec() {
        let policy = Policy::default();
        assert_eq!(policy.security, Security::Full);
        assert_eq!(policy.ask, Ask::Off);
        assert!(policy.strict_inline_eval);
        assert_eq!(policy.safe_bins.len(), 8);
        assert!(policy.trusted_dirs.iter().any(|d| d == "/usr/bin"));
        policy.validate().unwrap();
    }

    #[test]
    fn validate_rejects_bad_entries() {
        let rows: Vec<(Policy, &str)> = vec![
            (
                Policy {
                    allowlist: vec!["./tool".into()],
                    ..Policy::default()
                },
                "accept allowlist entry \"./tool\"",
            ),
            (
                Policy {
                    allowlist: vec!["~/bin/x".into()],
                    ..Policy::default()
                },
                "accept allowlist entry \"~/bin/x\"",
            ),
            (
                Policy {
                    allowlist: vec!["/usr/bin/[".into()],
                    ..Policy::default()
                },
                "compile allowlist glob",
            ),
            (
                Policy {
                    safe_bins: vec!["jq".into()],
                    ..Policy::default()
                },
                "enable safe bin \"jq\"",
            ),
            (
                Policy {
                    deny_patterns: vec!["".into()],
                    ..Policy::default()
                },
                "accept argv pattern \"\"",
            ),
            (
                Policy {
                    env_allow: vec!["LD_PRELOAD".into()],
                    ..Policy::default()
                },
                "allow request env \"LD_PRELOAD\" under allowlist: it changes",
            ),
            (
                Policy {
                    env_allow: vec!["GIT_CONFIG_COUNT".into()],
                    ..Policy::default()
                },
                "allow request env \"GIT_CONFIG_COUNT\"",
            ),
            (
                Policy {
                    env_allow: vec!["PATH".into()],
                    ..Policy::default()
                },
                "allow request env \"PATH\" under allowlist: PATH decides",
            ),
            (
                Policy {
                    env_allow: vec!["A-B".into()],
                    ..Policy::default()
                },
                "allow request env \"A-B\" under allowlist: not a variable name",
            ),
            (
                Policy {
                    trusted_dirs: vec!["usr/bin".into()],
                    ..Policy::default()
                },
                "accept directory \"usr/bin\" for trusted_dirs",
            ),
            (
                Policy {
                    allowed_workdirs: vec!["/work/../etc".into()],
                    ..Policy::default()
                },
                "accept directory \"/work/../etc\" for allowed_workdirs",
            ),
        ];
        for (policy, want) in rows {
            let err = policy.validate().unwrap_err().to_string();
            assert!(err.starts_with(want), "{err:?} should start with {want:?}");
        }
    }

    #[test]
    fn policy_deserializes_with_defaults_and_rejects_unknown_keys() {
        let policy: Policy =
            serde_json::from_str(r#"{"security":"allowlist","allowlist":["git"]}"#).unwrap();
        assert_eq!(policy.security, Security::Allowlist);
        assert_eq!(policy.ask, Ask::Off);
        assert_eq!(policy.allowlist, vec!["git".to_owned()]);
        assert!(serde_json::from_str::<Policy>(r#"{"secrity":"full"}"#).is_err());
    }
}
