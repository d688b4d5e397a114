//! [`ExecTool`]: one `exec` call from request to result.

use std::sync::Arc;

use super::elevated::Caller;
use super::error::ExecError;
use super::request::ExecRequest;
use crate::approvals::{
    pending_result, persist_entries, ApprovalDecision, Approvals, Binding, NewApproval,
};
use crate::config::Config;
use crate::contract::{validate_env, Denied, Details, Limit, NotStarted, Status, ToolResult};
use crate::home::Home;
use crate::policy::{Ask, Decision};
use crate::process::Registry;
use crate::secrets::Secrets;
use crate::session::Sessions;

/// See the module docs. Cheap to clone: approval waiters keep a copy.
#[derive(Clone)]
pub struct ExecTool {
    pub sessions: Arc<Sessions>,
    pub registry: Arc<Registry>,
    pub config: Arc<Config>,
    pub approvals: Arc<Approvals>,
    pub secrets: Arc<Secrets>,
    pub home: Home,
    /// `container id<TAB>shell` pairs whose login shell was found (`sandbox.shell` other than
    /// `sh`), so the check costs one exec per container.
    pub shells_seen: Arc<std::sync::Mutex<std::collections::HashSet<String>>>,
}

impl ExecTool {
    /// Runs one `exec` call for `session` with no caller identity (no elevated access). See
    /// [`run_for`](Self::run_for).
    pub async fn run(
        &self,
        session: &str,
        req: &ExecRequest,
        wait_to_end: bool,
    ) -> Result<ToolResult, ExecError> {
        self.run_for(&Caller::anonymous(), session, req, wait_to_end)
            .await
    }

    /// Runs one `exec` call for `session` on behalf of `caller` (whose identity the elevated
    /// gates check). `wait_to_end` makes a foreground call wait for the command however long
    /// it takes (the CLI's default), instead of yielding.
    pub async fn run_for(
        &self,
        caller: &Caller,
        session: &str,
        req: &ExecRequest,
        wait_to_end: bool,
    ) -> Result<ToolResult, ExecError> {
        self.run_observed(caller, session, req, wait_to_end, |_| {})
            .await
    }

    /// [`run_for`](Self::run_for), telling `started` the process id as soon as the command
    /// runs (the CLI needs it to end the command when it is interrupted).
    pub async fn run_observed(
        &self,
        caller: &Caller,
        session: &str,
        req: &ExecRequest,
        wait_to_end: bool,
        started: impl FnOnce(&str) + Send,
    ) -> Result<ToolResult, ExecError> {
        self.run_inner(caller, session, req, wait_to_end, false, started)
            .await
    }

    /// A foreground call to its end with stderr kept apart from the log in `<id>.err`, for
    /// `moat run` (`server::handlers::run` streams both files as they grow). Policy, approval
    /// and hardening are exactly those of [`run_observed`](Self::run_observed).
    pub async fn run_split(
        &self,
        caller: &Caller,
        session: &str,
        req: &ExecRequest,
        started: impl FnOnce(&str) + Send,
    ) -> Result<ToolResult, ExecError> {
        self.run_inner(caller, session, req, true, true, started)
            .await
    }

    /// A start in the background with stderr kept apart in `<id>.err`, for E2B's process
    /// service, which streams stdout and stderr apart (docs/e2b.md, "Processes"). Policy,
    /// approval and hardening are exactly those of any `exec`; `req.background` must be set.
    pub async fn start_split(
        &self,
        caller: &Caller,
        session: &str,
        req: &ExecRequest,
        started: impl FnOnce(&str) + Send,
    ) -> Result<ToolResult, ExecError> {
        debug_assert_eq!(req.background, Some(true));
        self.run_inner(caller, session, req, false, true, started)
            .await
    }

    async fn run_inner(
        &self,
        caller: &Caller,
        session: &str,
        req: &ExecRequest,
        wait_to_end: bool,
        split_stderr: bool,
        started: impl FnOnce(&str) + Send,
    ) -> Result<ToolResult, ExecError> {
        req.validate()?;
        validate_env(&req.env)?;
        let target = super::elevated::target(req, &self.config.elevated, caller, session)?;
        // A sticky session's carried directory and variables are the request's defaults.
        let sticky = self.sticky(session, &target);
        let with_state;
        let req = if sticky {
            with_state = self.with_sticky(session, req).await;
            &with_state
        } else {
            req
        };
        // Parsed once, bounded and off the async workers; a command past the bounds is
        // refused before any container or host state is touched.
        let parsed = super::analyse(&req.command).await;
        if let Some(why) = parsed.refusal() {
            return Ok(refusal_result(&target, &why.to_string(), &req.command));
        }
        let mut prepared = self.prepare(session, req, target, &parsed).await?;
        prepared.split_stderr = split_stderr && !prepared.on_host() && req.pty != Some(true);
        prepared.sticky = sticky && !prepared.on_host();
        let eval = prepared.evaluate(&parsed);
        // What would run must fit in one exec; refused here, before an approval is asked for
        // something that could never start.
        if !matches!(eval.decision, Decision::Deny { .. }) {
            match &eval.plan {
                Some(plan) => prepared.check_exec_size(&plan.command, plan.rebuilt)?,
                None => prepared.check_exec_size(&req.command, false)?,
            }
        }
        // Reasons quote the command: no secret value may leave through them.
        let decision = match eval.decision.clone() {
            Decision::Deny { reason } => Decision::Deny {
                reason: self.approvals.redact(&reason),
            },
            Decision::Ask { reason } => Decision::Ask {
                reason: self.approvals.redact(&reason),
            },
            d => d,
        };
        match decision {
            Decision::Allow => {
                let plan = eval
                    .plan
                    .map(|p| p.command)
                    .unwrap_or_else(|| req.command.clone());
                if prepared.on_host() {
                    let _ = self.approvals.store().audit(
                        "elevated-run",
                        None,
                        Some(session),
                        &caller.label(),
                        &self.approvals.display(&plan),
                    );
                }
                let proc = match self.launch(&prepared, &plan, req, true).await {
                    Ok(proc) => proc,
                    // The engine could not start it: a container at a limit says why and how
                    // to get out, instead of an engine error.
                    Err(e) => match self.wedged(&prepared.place).await {
                        Some(wedge) if !prepared.on_host() => {
                            return Ok(ToolResult::new(
                                format!(
                                    "Command could not start (failed to {e}).\n\n{}",
                                    wedge.sentence(session)
                                ),
                                Details::NotStarted(NotStarted {
                                    cwd: prepared.cwd.clone(),
                                    limit: wedge_limit(&wedge),
                                    status: Status::Failed,
                                }),
                            )
                            .with_warnings(&prepared.warnings))
                        }
                        _ => return Err(e),
                    },
                };
                started(&proc.info.id);
                Ok(self.outcome(&prepared, proc, req, wait_to_end).await)
            }
            Decision::Deny { reason } => Ok(ToolResult::new(
                format!(
                    "Exec denied ({}, {}): {}",
                    prepared.target.machine(),
                    crate::output::escape_display(&reason),
                    self.approvals.display(&req.command)
                ),
                Details::Denied(Denied::new(reason)),
            )
            .with_warnings(&prepared.warnings)),
            Decision::Ask { reason } => {
                let plan = eval
                    .plan
                    .as_ref()
                    .map(|p| p.command.clone())
                    .unwrap_or_else(|| req.command.clone());
                // Files the plan runs, bound by content: read on the host, or inside the
                // container for a sandbox plan (docs/approvals.md, "Files a plan runs").
                let files = if prepared.on_host() {
                    crate::host::bind(&crate::host::scan(
                        &plan,
                        std::path::Path::new(&prepared.cwd),
                        &prepared.policy.trusted_dirs,
                        &prepared.resolver,
                    )?)?
                } else {
                    self.bind_sandbox(&prepared, &parsed, &plan).await?
                };
                let redact = |v: &str| self.approvals.redact(v);
                let binding = Binding::new(
                    prepared.approval_target(),
                    &plan,
                    &eval,
                    &prepared.cwd,
                    &prepared.env,
                    &redact,
                    files,
                );
                // Whether the allowlist alone covers it, for `ask_fallback = allowlist`.
                let covered = prepared.covered(&parsed, &eval);
                // Nothing reusable for a plan that runs a file (it could change; in the sandbox
                // every bound file is the sandbox's to write) or touches a directory a sandbox
                // writes (it asks every time anyway); and nothing to remember for inline eval
                // alone: allow-always would be a lie.
                let persist = if prepared.policy.ask != Ask::Always
                    && binding.files.is_empty()
                    && prepared.writable_reason(&eval, &req.command).is_none()
                {
                    persist_entries(
                        &eval,
                        &req.command,
                        session,
                        &prepared.cwd,
                        prepared.on_host(),
                    )
                } else {
                    Vec::new()
                };
                let mut allowed = vec![ApprovalDecision::AllowOnce];
                if !persist.is_empty() {
                    allowed.push(ApprovalDecision::AllowAlways);
                }
                allowed.push(ApprovalDecision::Deny);
                let row = self.approvals.create(NewApproval {
                    session: session.to_string(),
                    requester: caller.label(),
                    agent: caller.agent.clone(),
                    command: req.command.clone(),
                    binding,
                    request: serde_json::to_string(req).unwrap_or_default(),
                    reason,
                    allowed,
                    persist,
                    covered,
                    timeout_ms: self.config.approvals.timeout_secs as i64 * 1000,
                })?;
                self.spawn_waiter(row.id.clone());
                let display = self.approvals.display(&req.command);
                Ok(pending_result(&row, &display, &prepared.cwd).with_warnings(&prepared.warnings))
            }
        }
    }
}

/// The result for a command refused by the parsing bounds: the same shape as a policy denial.
/// The command is not echoed (it is what could not be analysed), only its size.
fn refusal_result(target: &crate::contract::Target, reason: &str, command: &str) -> ToolResult {
    let place = target.machine();
    ToolResult::new(
        format!(
            "Exec denied ({place}, {reason}): a command of {} bytes",
            command.len()
        ),
        Details::Denied(Denied::new(reason)),
    )
}

/// The limit a wedged container is stuck at, as `details.limit` names it.
fn wedge_limit(wedge: &crate::session::health::Wedge) -> Limit {
    match wedge {
        crate::session::health::Wedge::Memory { .. } => Limit::Memory,
        crate::session::health::Wedge::Pids { .. } => Limit::Pids,
    }
}
