//! Reads `moat.toml`, applies `MOAT_*` overrides, deserializes and validates.

use std::path::{Path, PathBuf};

use toml::Table;

use super::{env, validate::validate, Config, ConfigError};

/// Where a configuration came from, for `moat config show` and error messages.
#[derive(Debug, Clone)]
pub struct ConfigSource {
    /// The file that was read, if it existed.
    pub file: Option<PathBuf>,
    /// The `MOAT_*` variables that changed a key.
    pub overrides: Vec<String>,
}

/// Loads `path` (absent = all defaults) with the process environment's overrides.
pub fn load(path: &Path) -> Result<(Config, ConfigSource), ConfigError> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => Some(t),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(source) => {
            return Err(ConfigError::Read {
                path: path.to_path_buf(),
                source,
            })
        }
    };
    let vars: Vec<(String, String)> = std::env::vars()
        .filter(|(k, _)| k.starts_with("MOAT_"))
        .collect();
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let config = load_from_str(
        text.as_deref().unwrap_or(""),
        &path.display().to_string(),
        &vars,
        home.as_deref(),
    )?;
    let overrides = vars
        .iter()
        .filter(|(k, _)| k.starts_with("MOAT_") && k != "MOAT_HOME")
        .map(|(k, _)| k.clone())
        .collect();
    Ok((
        config,
        ConfigSource {
            file: text.map(|_| path.to_path_buf()),
            overrides,
        },
    ))
}

/// The pure core of [`load`].
pub fn load_from_str(
    text: &str,
    origin: &str,
    vars: &[(String, String)],
    home: Option<&Path>,
) -> Result<Config, ConfigError> {
    let mut doc: Table = text
        .parse()
        .map_err(|e: toml::de::Error| ConfigError::Parse {
            origin: origin.to_string(),
            message: e.message().to_string() + &span_hint(text, e.span()),
        })?;
    env::apply(&mut doc, vars)?;
    let user_set = doc.get("sandbox").and_then(|s| s.get("user")).is_some();
    let mut config: Config =
        Config::deserialize_table(doc).map_err(|message| ConfigError::Parse {
            origin: format!("{origin} (with MOAT_* overrides)"),
            message,
        })?;
    config.sandbox.user_set = user_set;
    validate(&config, home)?;
    Ok(config)
}

impl Config {
    /// Deserializes the merged document. It is re-rendered to text first so a type error can
    /// quote the offending `key = value` line (a bare table carries no positions).
    fn deserialize_table(doc: Table) -> Result<Config, String> {
        let text = toml::to_string(&doc).map_err(|e| e.to_string())?;
        toml::from_str::<Config>(&text).map_err(|e| {
            let line = e
                .span()
                .and_then(|r| {
                    text[..r.start.min(text.len())]
                        .lines()
                        .last()
                        .map(str::to_string)
                })
                .filter(|l| !l.trim().is_empty())
                .or_else(|| {
                    e.span().and_then(|r| {
                        text[r.start.min(text.len())..]
                            .lines()
                            .next()
                            .map(str::to_string)
                    })
                });
            match line {
                Some(l) => format!("{} (at `{}`)", e.message(), l.trim()),
                None => e.message().to_string(),
            }
        })
    }
}

fn span_hint(text: &str, span: Option<std::ops::Range<usize>>) -> String {
    match span {
        Some(r) => {
            let line = text[..r.start.min(text.len())].matches('\n').count() + 1;
            format!(" (line {line})")
        }
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(text: &str, vars: &[(&str, &str)]) -> Result<Config, ConfigError> {
        let vars: Vec<(String, String)> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        load_from_str(text, "moat.toml", &vars, None)
    }

    #[test]
    fn empty_is_defaults() {
        assert_eq!(load("", &[]).unwrap(), Config::default());
    }

    #[test]
    fn an_explicit_sandbox_user_is_told_from_the_default() {
        type Vars<'a> = &'a [(&'a str, &'a str)];
        let rows: &[(&str, Vars, bool)] = &[
            ("", &[], false),
            ("[sandbox]\nimage = \"x\"\n", &[], false),
            ("[sandbox]\nuser = \"1000:1000\"\n", &[], true),
            ("", &[("MOAT_SANDBOX_USER", "2000:2000")], true),
        ];
        for (text, vars, set) in rows {
            assert_eq!(
                load(text, vars).unwrap().sandbox.user_set,
                *set,
                "{text:?} {vars:?}"
            );
        }
    }

    #[test]
    fn unknown_keys_are_named() {
        let rows = [
            ("[sandbox]\nimagee = \"x\"\n", "imagee"),
            ("[sandbx]\n", "sandbx"),
            ("[exec]\nyield = 5\n", "yield"),
            ("toplevel = 1\n", "toplevel"),
        ];
        for (text, key) in rows {
            let err = load(text, &[]).unwrap_err().to_string();
            assert!(err.contains(key), "{text:?}: {err}");
        }
    }

    #[test]
    fn unknown_env_override_is_named() {
        let err = load("", &[("MOAT_SANDBOX_IMAGEZ", "x")])
            .unwrap_err()
            .to_string();
        assert!(err.contains("imagez"), "{err}");
    }

    #[test]
    fn env_overrides_file() {
        let c = load(
            "[sandbox]\nimage = \"a\"\n[exec]\nyield_ms = 5\n",
            &[("MOAT_SANDBOX_IMAGE", "b")],
        )
        .unwrap();
        assert_eq!(c.sandbox.image, "b");
        assert_eq!(c.exec.yield_ms, 5);
    }

    #[test]
    fn env_allow_refuses_code_loading_names() {
        for name in [
            "LD_PRELOAD",
            "GIT_CONFIG_COUNT",
            "HOME",
            "PATH",
            "PYTHONPATH",
        ] {
            let err = load(
                &format!("[policy.sandbox]\nenv_allow = [\"{name}\"]\n"),
                &[],
            )
            .unwrap_err()
            .to_string();
            assert!(
                err.contains("policy.sandbox") && err.contains(name),
                "{name}: {err}"
            );
        }
        let c = load("[policy.host]\nenv_allow = [\"MY_FLAG\"]\n", &[]).unwrap();
        assert_eq!(c.policy.host.env_allow, ["MY_FLAG"]);
    }

    #[test]
    fn safe_bin_profiles_load_and_bad_ones_name_the_key() {
        const JQ: &str = "[policy.sandbox]\nsafe_bins = [\"jq\", \"wc\"]\n[policy.sandbox.safe_bin_profiles.jq]\nallowed_flags = [\"-r\", \"-c\"]\nvalue_flags = [\"--indent\"]\nmin_positional = 1\nmax_positional = 1\n";
        let host = load(&JQ.replace("policy.sandbox", "policy.host"), &[]).unwrap();
        assert_eq!(host.policy.host.safe_bin_profiles["jq"].max_positional, 1);
        assert_eq!(host.policy.host.ask, crate::policy::Ask::OnMiss);
        let c = load(JQ, &[]).unwrap();
        let jq = &c.policy.sandbox.safe_bin_profiles["jq"];
        assert_eq!(jq.allowed_flags, ["-r", "-c"]);
        assert_eq!(jq.max_positional, 1);
        let rows = [
            // A safe bin without any profile.
            ("[policy.sandbox]\nsafe_bins = [\"jq\"]\n", "accept `policy.sandbox`: enable safe bin \"jq\" (no argv profile exists for it; give one under safe_bin_profiles.jq)"),
            (
                &JQ.replace("\"-c\"]", "\"-rc\"]"),
                "accept `policy.sandbox`: accept safe_bin_profiles.jq.allowed_flags: \"-rc\" is several short options",
            ),
            (
                &JQ.replace("[\"jq\", \"wc\"]", "[\"wc\"]"),
                "accept `policy.sandbox`: accept safe_bin_profiles.jq: jq is not in safe_bins",
            ),
            (
                &format!("{JQ}[policy.sandbox.safe_bin_profiles.wc]\n"),
                "accept `policy.sandbox`: accept safe_bin_profiles.wc: wc has a built-in profile",
            ),
            (&JQ.replace("min_positional = 1", "min_positional = 2"), "accept `policy.sandbox`: accept safe_bin_profiles.jq.min_positional"),
            (&JQ.replace("value_flags", "value_flag"), "unknown field `value_flag`"),
            (&JQ.replace("max_positional = 1", "max_positional = \"x\""), "max_positional"),
        ];
        for (text, want) in rows {
            let err = format!("{:#}", load(text, &[]).unwrap_err());
            assert!(err.contains(want), "{err:?} should contain {want:?}");
        }
    }

    #[test]
    fn host_policy_keeps_host_defaults() {
        let c = load("[policy.host]\nallowlist = [\"git\"]\n", &[]).unwrap();
        assert_eq!(c.policy.host.security, crate::policy::Security::Allowlist);
        assert_eq!(c.policy.host.ask, crate::policy::Ask::OnMiss);
        assert_eq!(c.policy.host.allowlist, ["git"]);
        assert_eq!(c.policy.sandbox.security, crate::policy::Security::Full);
        let err = load("[policy.host]\nsecrity = \"full\"\n", &[])
            .unwrap_err()
            .to_string();
        assert!(err.contains("secrity"), "{err}");
    }

    #[test]
    fn new_sections_parse() {
        let text = r#"
[elevated]
enabled = true
default_level = "full"
allow_from = { cli = ["alice"] }
[approvals]
ask_fallback = "allowlist"
[secrets.GH]
env = "MOAT_TEST_GH"
sessions = ["main"]
[skills.json]
bins = ["jq"]
enabled = true
"#;
        let c = load(text, &[("MOAT_APPROVALS_TIMEOUT_SECS", "5")]).unwrap();
        assert!(c.elevated.enabled);
        assert_eq!(c.elevated.allow_from["cli"], ["alice"]);
        assert_eq!(c.approvals.timeout_secs, 5);
        assert_eq!(c.approvals.ask_fallback, crate::policy::Security::Allowlist);
        assert_eq!(c.secrets["GH"].sessions, ["main"]);
        assert!(c.skills["json"].enabled);
    }

    #[test]
    fn wrong_type_is_reported() {
        let err = load("[sandbox]\npids_limit = \"many\"\n", &[])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("pids_limit") || err.contains("integer"),
            "{err}"
        );
    }

    #[test]
    fn shells_are_sh_or_bash() {
        use crate::config::Shell;
        let c = load(
            "[sandbox]\nshell = \"bash\"\n[elevated]\nshell = \"sh\"\n",
            &[],
        )
        .unwrap();
        assert_eq!(
            (c.sandbox.shell, c.elevated.shell),
            (Shell::Bash, Shell::Sh)
        );
        let c = load("", &[("MOAT_ELEVATED_SHELL", "bash")]).unwrap();
        assert_eq!(c.elevated.shell, Shell::Bash);
        for text in [
            "[sandbox]\nshell = \"zsh\"\n",
            "[sandbox]\nshell = \"/bin/bash\"\n",
            "[elevated]\nshell = \"fish\"\n",
        ] {
            let err = load(text, &[]).unwrap_err().to_string();
            assert!(
                err.contains("shell") && err.contains("`sh` or `bash`"),
                "{text:?}: {err}"
            );
        }
    }
}
