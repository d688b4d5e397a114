//! `policy explain` as `exec` would judge it (docs/policy.md, "Explain"): the same bounded
//! parse, the same policy composition (configuration, the session's operator override, the
//! request's tightening, skills and run-time entries), and names resolved where the command
//! would run: in the session's container for the sandbox, on this machine for the host. Only
//! the allowlist and safe bins under test can be replaced, as the operator asked.

use std::collections::BTreeMap;

use serde::Deserialize;

use super::error::ExecError;
use super::prepare::Prepared;
use super::request::ExecRequest;
use super::tool::ExecTool;
use crate::contract::{validate_env, Target};
use crate::policy::{Evaluation, Policy, Security};

/// What the operator asks about.
#[derive(Debug, Clone, Default, Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ExplainRequest {
    pub command: String,
    #[serde(default)]
    pub workdir: Option<String>,
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// `deny`, `allowlist` or `full`; `allowlist` here sets the mode even where the
    /// configuration is stricter, so an allowlist can be tried before it is configured.
    #[serde(default)]
    pub security: Option<String>,
    #[serde(default)]
    pub ask: Option<String>,
    /// Replaces the configured allowlist when not empty.
    #[serde(default)]
    pub allow: Vec<String>,
    /// Replaces the configured safe bins when not empty.
    #[serde(default)]
    pub safe_bins: Vec<String>,
    /// Judge it as a host command (`elevated`) instead of a sandbox one.
    #[serde(default)]
    pub host: bool,
}

/// The verdict, and where its names were resolved.
pub struct Explained {
    pub eval: Evaluation,
    /// `the sandbox of session s (container moat-s-…)` or `this host`.
    pub resolved_in: String,
}

impl ExplainRequest {
    /// The operator's replacements, applied to the composed policy.
    fn tweak(&self, policy: &mut Policy) {
        let security = self.security.as_deref().and_then(Security::parse_lenient);
        if security == Some(Security::Allowlist) {
            policy.security = Security::Allowlist;
        }
        if !self.allow.is_empty() {
            policy.allowlist = self.allow.clone();
        }
        if !self.safe_bins.is_empty() {
            policy.safe_bins = self.safe_bins.clone();
        }
    }
}

impl ExecTool {
    /// Judges `req.command` for `session` as an exec would, without running it.
    pub async fn explain(
        &self,
        session: &str,
        req: &ExplainRequest,
    ) -> Result<Explained, ExecError> {
        let exec_req = ExecRequest {
            command: req.command.clone(),
            workdir: req.workdir.clone(),
            env: req.env.clone(),
            security: req.security.clone(),
            ask: req.ask.clone(),
            ..Default::default()
        };
        exec_req.validate()?;
        validate_env(&exec_req.env)?;
        let mut probe = if req.host {
            self.config.policy.host.clone()
        } else {
            self.config.policy.sandbox.clone()
        };
        req.tweak(&mut probe);
        probe.validate()?;
        let target = if req.host {
            Target::Host { full: false }
        } else {
            Target::Sandbox
        };
        let parsed = super::analyse(&req.command).await;
        let prepared: Prepared = self
            .prepare_with(session, &exec_req, target, &parsed, &|p| req.tweak(p))
            .await?;
        let eval = prepared.evaluate(&parsed);
        let resolved_in = if req.host {
            "this host".to_string()
        } else {
            format!(
                "the sandbox of session {session} (container {})",
                prepared.place
            )
        };
        Ok(Explained { eval, resolved_in })
    }
}
