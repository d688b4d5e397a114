//! Secret values (`[secrets.NAME]`): read once at start from moat's environment or a private
//! file, injected as env var `NAME` into the sessions and hosts the operator listed, and
//! replaced by `[REDACTED:NAME]` wherever moat shows text.

use std::os::unix::fs::MetadataExt;
use std::sync::Arc;

use crate::config::{Config, Scope, SecretConfig};

/// Secret `(name, value)` pairs for a session, on the host (`true`) or in its sandbox.
pub type SecretSource = Arc<dyn Fn(&str, bool) -> Vec<(String, String)> + Send + Sync>;

#[derive(Debug, thiserror::Error)]
pub enum SecretsError {
    #[error("read secret {name}: moat's environment has no variable `{var}`")]
    MissingEnv { name: String, var: String },
    #[error("read secret {name} from {path}")]
    File {
        name: String,
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("read secret {name} from {path}: the file is readable by others (mode {mode:o}); chmod 600 it")]
    Exposed {
        name: String,
        path: String,
        mode: u32,
    },
    #[error("read secret {name}: the value is empty")]
    Empty { name: String },
    /// A secret reaches commands as one `NAME=value` environment string, which Linux bounds
    /// (docs/security.md, "Bounds on what one exec carries").
    #[error("read secret {name}: the value is {len} bytes; `{name}=value` must fit in the {} bytes one environment string may carry on Linux (MAX_ARG_STRLEN)", crate::contract::MAX_ARG_BYTES)]
    TooLong { name: String, len: u64 },
    /// The secret names single sessions where sessions share a container.
    #[error("give secret {name} to session {session}: {why}")]
    SharedContainer {
        name: String,
        session: String,
        why: String,
    },
}

/// The loaded secrets.
#[derive(Debug, Clone, Default)]
pub struct Secrets {
    /// `(name, config, value)` in config order.
    entries: Vec<(String, SecretConfig, String)>,
    /// `sandbox.scope`: a secret for single sessions is refused where sessions share a
    /// container (docs/security.md, "Shared containers").
    scope: Scope,
}

impl Secrets {
    /// Reads every configured secret; a missing or exposed one is an error naming it.
    pub fn load(config: &Config) -> Result<Self, SecretsError> {
        Self::load_with(config, |var| std::env::var(var).ok())
    }

    pub fn load_with(
        config: &Config,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, SecretsError> {
        let mut entries = Vec::new();
        for (name, s) in &config.secrets {
            // Config validation refuses this already; a config built another way is not trusted.
            if let Some(why) = s.splits_containers(config.sandbox.scope) {
                return Err(SecretsError::SharedContainer {
                    name: name.clone(),
                    session: s.sessions.join(", "),
                    why,
                });
            }
            let value = if !s.env.is_empty() {
                env(&s.env).ok_or_else(|| SecretsError::MissingEnv {
                    name: name.clone(),
                    var: s.env.clone(),
                })?
            } else {
                read_private(name, &s.file)?
            };
            if value.is_empty() {
                return Err(SecretsError::Empty { name: name.clone() });
            }
            if !crate::contract::fits_one_argument(name.len() + 1 + value.len()) {
                return Err(SecretsError::TooLong {
                    name: name.clone(),
                    len: value.len() as u64,
                });
            }
            entries.push((name.clone(), s.clone(), value));
        }
        Ok(Self {
            entries,
            scope: config.sandbox.scope,
        })
    }

    /// The env a command of `session` gets in its sandbox: refused when a secret it would get
    /// is meant for single sessions and the container is shared, as the other sessions there
    /// would read it too.
    pub fn for_sandbox(&self, session: &str) -> Result<Vec<(String, String)>, SecretsError> {
        for (name, s, _) in &self.entries {
            if !s.applies_to(session, false) {
                continue;
            }
            if let Some(why) = s.splits_containers(self.scope) {
                return Err(SecretsError::SharedContainer {
                    name: name.clone(),
                    session: session.to_string(),
                    why,
                });
            }
        }
        Ok(self.for_target(session, false))
    }

    /// `(name, value)` for `session` on the host (`true`) or in its sandbox.
    pub fn for_target(&self, session: &str, on_host: bool) -> Vec<(String, String)> {
        self.entries
            .iter()
            .filter(|(_, s, _)| s.applies_to(session, on_host))
            .map(|(n, _, v)| (n.clone(), v.clone()))
            .collect()
    }

    /// Every secret, for redacting displays that belong to no single session.
    pub fn all(&self) -> Vec<(String, String)> {
        self.entries
            .iter()
            .map(|(n, _, v)| (n.clone(), v.clone()))
            .collect()
    }

    /// The variables of moat's own environment secrets are read from: host commands never
    /// inherit them (a secret reaches only the sessions and hosts listed for it).
    pub fn source_vars(&self) -> Vec<String> {
        self.entries
            .iter()
            .filter(|(_, s, _)| !s.env.is_empty())
            .map(|(_, s, _)| s.env.clone())
            .collect()
    }

    /// A source the process registry uses for processes re-attached after a restart.
    pub fn source(self: &Arc<Self>) -> SecretSource {
        let me = self.clone();
        Arc::new(move |session, on_host| me.for_target(session, on_host))
    }
}

fn read_private(name: &str, path: &str) -> Result<String, SecretsError> {
    let err = |source| SecretsError::File {
        name: name.into(),
        path: path.into(),
        source,
    };
    let meta = std::fs::metadata(path).map_err(err)?;
    if meta.mode() & 0o077 != 0 {
        return Err(SecretsError::Exposed {
            name: name.into(),
            path: path.into(),
            mode: meta.mode() & 0o777,
        });
    }
    // Not read at all when it cannot fit (see `SecretsError::TooLong`); the slack is for a
    // trailing line ending.
    if meta.len() > crate::contract::MAX_ARG_BYTES as u64 + 2 {
        return Err(SecretsError::TooLong {
            name: name.into(),
            len: meta.len(),
        });
    }
    let text = std::fs::read_to_string(path).map_err(err)?;
    // A trailing newline is an editor's, not part of the value.
    Ok(text.trim_end_matches(['\n', '\r']).to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn config(env: &str, file: &str) -> Config {
        let mut c = Config::default();
        c.secrets.insert(
            "TOKEN".into(),
            SecretConfig {
                env: env.into(),
                file: file.into(),
                sessions: vec!["main".into()],
                hosts: vec![],
            },
        );
        c
    }

    #[test]
    fn from_env_and_targets() {
        let s =
            Secrets::load_with(&config("SRC", ""), |v| (v == "SRC").then(|| "val".into())).unwrap();
        assert_eq!(
            s.for_target("main", false),
            [("TOKEN".into(), "val".into())]
        );
        assert!(s.for_target("main", true).is_empty());
        assert!(s.for_target("other", false).is_empty());
        let err = Secrets::load_with(&config("NOPE", ""), |_| None).unwrap_err();
        assert!(err.to_string().contains("TOKEN") && err.to_string().contains("NOPE"));
    }

    #[test]
    fn single_session_secret_refused_in_shared_container() {
        let mut c = config("SRC", "");
        c.sandbox.scope = Scope::Agent;
        let err = Secrets::load_with(&c, |_| Some("val".into())).unwrap_err();
        assert!(err.to_string().contains("sandbox.scope"), "{err}");
        // The use-time check holds even for secrets that did not come through `load`.
        let s = Secrets {
            entries: vec![("TOKEN".into(), c.secrets["TOKEN"].clone(), "val".into())],
            scope: Scope::Agent,
        };
        let err = s.for_sandbox("main").unwrap_err();
        assert!(err.to_string().contains("TOKEN") && err.to_string().contains("environment"));
        assert!(s.for_sandbox("other").unwrap().is_empty());
        c.secrets.get_mut("TOKEN").unwrap().sessions = vec!["main*".into()];
        let s = Secrets::load_with(&c, |_| Some("val".into())).unwrap();
        assert_eq!(
            s.for_sandbox("main:x").unwrap(),
            [("TOKEN".into(), "val".into())]
        );
    }

    #[test]
    fn files_must_be_private() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("tok");
        std::fs::write(&p, "filevalue\n").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
        let c = config("", &p.display().to_string());
        let err = Secrets::load_with(&c, |_| None).unwrap_err();
        assert!(err.to_string().contains("chmod 600"), "{err}");
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
        let s = Secrets::load_with(&c, |_| None).unwrap();
        assert_eq!(s.all(), [("TOKEN".into(), "filevalue".into())]);
    }

    #[test]
    fn a_value_must_fit_in_one_environment_string() {
        let limit = crate::contract::MAX_ARG_BYTES;
        // `TOKEN=` and the terminating NUL take 7 of the bytes.
        let fits = "v".repeat(limit - 7);
        let s = Secrets::load_with(&config("SRC", ""), |_| Some(fits.clone())).unwrap();
        assert_eq!(s.all()[0].1.len(), limit - 7);
        let Err(err) = Secrets::load_with(&config("SRC", ""), |_| Some(format!("{fits}v"))) else {
            panic!("a value one byte too long was accepted");
        };
        let text = err.to_string();
        assert!(
            text.contains("TOKEN") && text.contains("131072 bytes"),
            "{text}"
        );
        assert!(!text.contains("vvvv"), "the value is never shown");
        // A huge file is refused without being read.
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("big");
        let f = std::fs::File::create(&p).unwrap();
        f.set_len(1 << 30).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
        let Err(err) = Secrets::load_with(&config("", &p.display().to_string()), |_| None) else {
            panic!("a 1 GiB secret file was accepted");
        };
        assert!(err.to_string().contains("1073741824 bytes"), "{err}");
    }
}
