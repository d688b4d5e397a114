//! A sticky session's state around one call (docs/mcp.md, "Sticky cwd and env"): before it,
//! the carried directory and variables become the request's defaults; after a command that
//! ended within the call, what its shell recorded becomes the state. The rules are pure in
//! `contract::sticky`; this is the I/O around them.

use super::request::ExecRequest;
use super::workdir::map_workdir;
use crate::contract::sticky::{apply, parse_state, policy_filter, StickyState, STATE_MAX_BYTES};
use crate::contract::Target;
use crate::policy::{compose, Layers, RequestLevels};
use crate::process::{Proc, RunFiles};

use super::prepare::Prepared;
use super::tool::ExecTool;

impl ExecTool {
    /// Whether `session` carries state: the operator's switch for it, else `exec.sticky`.
    pub(super) fn sticky(&self, session: &str, target: &Target) -> bool {
        matches!(target, Target::Sandbox)
            && self
                .sessions
                .store()
                .sticky_enabled(session)
                .ok()
                .flatten()
                .unwrap_or(self.config.exec.sticky)
    }

    /// Whether `name=value` passes the env policy this call runs under: in allowlist mode a
    /// request may set only listed names, so only those are carried.
    fn policy_carries(&self, session: &str, req: &ExecRequest) -> impl Fn(&str, &str) -> bool {
        let base = &self.config.policy.sandbox;
        let o = self.sessions.store().session_policy(session).ok().flatten();
        // The env filter follows the security level in force; a request's ask changes nothing
        // here.
        let policy = compose(
            base,
            Layers {
                on_host: false,
                host_full: false,
                session: o.as_ref().map(crate::store::SessionPolicy::layer),
                request: RequestLevels {
                    security: req.security.as_deref(),
                    ask: None,
                },
            },
        );
        policy_filter(policy)
    }

    /// `req` with the session's carried state as its defaults.
    pub(super) async fn with_sticky(&self, session: &str, req: &ExecRequest) -> ExecRequest {
        let state = self
            .sessions
            .store()
            .sticky_state(session)
            .unwrap_or_default();
        if state == StickyState::default() {
            return req.clone();
        }
        let secrets = self.secret_values(session);
        let carries = self.policy_carries(session, req);
        let workspace = self
            .sessions
            .ensure(session)
            .await
            .ok()
            .map(|c| c.workspace);
        let cwd_ok = |cwd: &str| {
            workspace
                .as_deref()
                .is_some_and(|w| map_workdir(Some(cwd), w).is_ok())
        };
        let mut out = req.clone();
        apply(
            &mut out.workdir,
            &mut out.env,
            &state,
            &secrets,
            &carries,
            cwd_ok,
        );
        out
    }

    /// Records what a command that ended during the call left behind (a command that moved
    /// to the background, or whose shell wrote nothing, leaves the state as it was).
    pub(super) fn capture_sticky(&self, p: &Prepared, proc: &Proc, req: &ExecRequest) {
        if !p.sticky || proc.is_running() {
            return;
        }
        let Ok(files) = RunFiles::open(&p.run_dir, &proc.info.id, Some(p.owner)) else {
            return;
        };
        let bytes = files.read_state(STATE_MAX_BYTES);
        // A carried variable the command left as it was stays carried.
        let carried = self
            .sessions
            .store()
            .sticky_state(&p.session)
            .unwrap_or_default()
            .env;
        let secrets = self.secret_values(&p.session);
        let carries = self.policy_carries(&p.session, req);
        if let Some(state) = parse_state(&bytes, &carried, &secrets, &carries) {
            if let Err(e) = self.sessions.store().save_sticky_state(&p.session, &state) {
                tracing::warn!(session = %p.session, "failed to record sticky state: {e}");
            }
        }
    }

    fn secret_values(&self, session: &str) -> Vec<String> {
        self.secrets
            .for_target(session, false)
            .into_iter()
            .map(|(_, v)| v)
            .collect()
    }
}
