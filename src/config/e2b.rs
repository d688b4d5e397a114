//! `[e2b]`: moat speaking E2B's API (docs/e2b.md), so programs written for E2B's SDK run
//! against a local moat with `E2B_API_URL` and `E2B_SANDBOX_URL` set to `listen`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Off unless `listen` is set. One TCP address serves both E2B's control plane and the API of
/// the daemon E2B runs in each sandbox, routed by the `E2b-Sandbox-Id` header (docs/e2b.md,
/// "One address").
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct E2bConfig {
    /// TCP listen address such as `127.0.0.1:49983`; empty = not served.
    pub listen: String,
    /// The API keys the SDK sends (`E2B_API_KEY`). Each is an agent identity of its own:
    /// it sees and acts on the sandboxes it created only, and never decides approvals.
    pub api_keys: Vec<String>,
    /// Template id → image. `base` maps to [`BASE_IMAGE`] unless set here.
    pub templates: BTreeMap<String, String>,
    /// Longest lifetime a sandbox may ask for, in seconds (E2B's `timeout`); longer asks are
    /// cut to it. 0 = 24 hours.
    pub max_timeout_secs: u64,
    /// Sandboxes one API key may hold at once; past it `create` answers 429.
    pub max_sandboxes_per_key: u32,
    /// The engine runtime E2B's sandboxes run under instead of `sandbox.runtime` (`runsc`:
    /// gVisor's user-space kernel between E2B's programs and the host's); empty = the same.
    pub runtime: String,
}

/// The image E2B's `base` template runs unless `templates` maps it: moat's sandbox image with
/// E2B's user, built by `moat image build --e2b` (docs/e2b.md, "The base template").
pub const BASE_IMAGE: &str = "moat-e2b-base:bookworm";

/// Where an E2B sandbox's user has its home, and where moat mounts the session's workspace a
/// second time (docs/e2b.md, "The base template").
pub const HOME: &str = "/home/user";

/// The shortest an API key may be: E2B's keys are `e2b_` and 40 hex digits; moat asks for no
/// less than half of that, so a key is never guessable.
pub const MIN_KEY_LEN: usize = 24;

impl E2bConfig {
    /// Whether E2B's API is served at all.
    pub fn enabled(&self) -> bool {
        !self.listen.trim().is_empty()
    }

    /// The image a template runs, `None` for a template moat does not know.
    pub fn image_of(&self, template: &str) -> Option<String> {
        match self.templates.get(template) {
            Some(image) => Some(image.clone()),
            None if template == "base" => Some(BASE_IMAGE.to_string()),
            None => None,
        }
    }

    /// The lifetime cap in seconds.
    pub fn max_timeout(&self) -> u64 {
        if self.max_timeout_secs == 0 {
            24 * 3600
        } else {
            self.max_timeout_secs
        }
    }

    /// Sandboxes per key (default 16).
    pub fn per_key(&self) -> u32 {
        if self.max_sandboxes_per_key == 0 {
            16
        } else {
            self.max_sandboxes_per_key
        }
    }

    /// The load-time checks: a listen address that parses, keys long enough, templates with
    /// image names.
    pub fn check(&self) -> Result<(), (String, String)> {
        if self.enabled() && self.listen.trim().parse::<std::net::SocketAddr>().is_err() {
            return Err((
                "e2b.listen".into(),
                format!(
                    "`{}` is not an address such as 127.0.0.1:49983",
                    self.listen
                ),
            ));
        }
        if self.enabled() && self.api_keys.is_empty() {
            return Err((
                "e2b.api_keys".into(),
                "E2B's API is served (e2b.listen is set) but no key is configured; every request would be refused".into(),
            ));
        }
        for key in &self.api_keys {
            if key.len() < MIN_KEY_LEN || !key.bytes().all(|b| b.is_ascii_graphic()) {
                return Err((
                    "e2b.api_keys".into(),
                    format!(
                        "a key must be at least {MIN_KEY_LEN} printable characters without spaces"
                    ),
                ));
            }
        }
        if !self.runtime.is_empty()
            && !self
                .runtime
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        {
            return Err((
                "e2b.runtime".into(),
                format!(
                    "`{}` is not a runtime name such as runsc",
                    crate::output::escape_display(&self.runtime)
                ),
            ));
        }
        for (template, image) in &self.templates {
            if image.trim().is_empty() {
                return Err((
                    format!("e2b.templates.{template}"),
                    "the image name is empty".into(),
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checks_name_the_key_that_is_wrong() {
        let ok = E2bConfig {
            listen: "127.0.0.1:49983".into(),
            api_keys: vec!["e2b_0123456789abcdef0123456789".into()],
            ..Default::default()
        };
        assert_eq!(ok.check(), Ok(()));
        assert_eq!(ok.image_of("base").as_deref(), Some(BASE_IMAGE));
        assert_eq!(ok.image_of("other"), None);
        let mapped = E2bConfig {
            templates: [("base".to_string(), "mine:1".to_string())].into(),
            ..ok.clone()
        };
        assert_eq!(mapped.image_of("base").as_deref(), Some("mine:1"));
        let cases: &[(E2bConfig, &str)] = &[
            (
                E2bConfig {
                    listen: "localhost".into(),
                    ..ok.clone()
                },
                "e2b.listen",
            ),
            (
                E2bConfig {
                    api_keys: vec![],
                    ..ok.clone()
                },
                "e2b.api_keys",
            ),
            (
                E2bConfig {
                    api_keys: vec!["e2b_short".into()],
                    ..ok.clone()
                },
                "e2b.api_keys",
            ),
            (
                E2bConfig {
                    api_keys: vec!["e2b_0123456789abcdef 0123456789".into()],
                    ..ok.clone()
                },
                "e2b.api_keys",
            ),
            (
                E2bConfig {
                    templates: [("py".to_string(), " ".to_string())].into(),
                    ..ok.clone()
                },
                "e2b.templates.py",
            ),
        ];
        for (c, key) in cases {
            assert_eq!(c.check().unwrap_err().0, *key, "{c:?}");
        }
        // Off: nothing else is checked but the keys' form.
        assert_eq!(E2bConfig::default().check(), Ok(()));
    }
}
