//! One `exec` call's steps, in the order of docs/ARCHITECTURE.md, "The data flow of one
//! exec": validate and choose the target, take a sticky session's state, parse once, prepare,
//! evaluate, then run, refuse, or ask the operator.

use super::elevated::Caller;
use super::error::ExecError;
use super::prepare::Prepared;
use super::request::ExecRequest;
use super::tool::ExecTool;
use crate::approvals::{
    pending_result, persist_entries, ApprovalDecision, Binding, BoundFile, NewApproval,
    PersistEntry,
};
use crate::contract::{validate_env, Denied, Details, Limit, NotStarted, Status, ToolResult};
use crate::policy::{Ask, Decision, Evaluation, Parsed};

impl ExecTool {
    /// One call (see the module docs), counted by its outcome (docs/http-api.md, "Metrics").
    pub(super) async fn run_inner(
        &self,
        caller: &Caller,
        session: &str,
        req: &ExecRequest,
        wait_to_end: bool,
        split_stderr: bool,
        started: impl FnOnce(&str) + Send,
    ) -> Result<ToolResult, ExecError> {
        let result = self
            .run_steps(caller, session, req, wait_to_end, split_stderr, started)
            .await;
        let outcome = crate::metrics::exec_outcome(result.as_ref().map_err(ExecError::kind));
        crate::metrics::metrics().exec_ended(outcome);
        result
    }

    /// The steps of one call.
    async fn run_steps(
        &self,
        caller: &Caller,
        session: &str,
        req: &ExecRequest,
        wait_to_end: bool,
        split_stderr: bool,
        started: impl FnOnce(&str) + Send,
    ) -> Result<ToolResult, ExecError> {
        req.validate()?;
        if req.host()? == super::request::HostChoice::Node {
            return self.forward(caller, session, req, wait_to_end).await;
        }
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
        fits_one_exec(&prepared, &eval, req)?;
        let call = Call {
            caller,
            session,
            req,
            prepared: &prepared,
        };
        match self.redacted(eval.decision.clone()) {
            Decision::Allow => self.allow(&call, &eval, wait_to_end, started).await,
            Decision::Deny { reason } => Ok(self.denied(&call, &reason)),
            Decision::Ask { reason } => self.ask(&call, &parsed, &eval, reason).await,
        }
    }

    /// The decision with its reasons redacted: they quote the command, and no secret value
    /// may leave through them.
    fn redacted(&self, decision: Decision) -> Decision {
        match decision {
            Decision::Deny { reason } => Decision::Deny {
                reason: self.approvals.redact(&reason),
            },
            Decision::Ask { reason } => Decision::Ask {
                reason: self.approvals.redact(&reason),
            },
            d => d,
        }
    }

    /// Runs what the policy allowed (the rebuilt plan, when there is one); a host command is
    /// audited first.
    async fn allow(
        &self,
        call: &Call<'_>,
        eval: &Evaluation,
        wait_to_end: bool,
        started: impl FnOnce(&str) + Send,
    ) -> Result<ToolResult, ExecError> {
        let (prepared, req) = (call.prepared, call.req);
        let plan = plan_of(eval, req);
        if prepared.on_host() {
            let _ = self.approvals.store().audit(
                "elevated-run",
                None,
                Some(call.session),
                &call.caller.label(),
                &self.approvals.display(&plan),
            );
        }
        let proc = match self.launch(prepared, &plan, req, true).await {
            Ok(proc) => proc,
            Err(e) => return self.not_started(call, e).await,
        };
        started(&proc.info.id);
        Ok(self.outcome(prepared, proc, req, wait_to_end).await)
    }

    /// The engine could not start the command: a container at a limit says why and how to
    /// get out, instead of an engine error.
    async fn not_started(&self, call: &Call<'_>, e: ExecError) -> Result<ToolResult, ExecError> {
        let prepared = call.prepared;
        match self.wedged(&prepared.place).await {
            Some(wedge) if !prepared.on_host() => Ok(ToolResult::new(
                format!(
                    "Command could not start (failed to {e}).\n\n{}",
                    wedge.sentence(call.session)
                ),
                Details::NotStarted(NotStarted {
                    cwd: prepared.cwd.clone(),
                    limit: wedge_limit(&wedge),
                    status: Status::Failed,
                }),
            )
            .with_warnings(&prepared.warnings)),
            _ => Err(e),
        }
    }

    /// The policy's refusal, in the tool's words.
    fn denied(&self, call: &Call<'_>, reason: &str) -> ToolResult {
        ToolResult::new(
            format!(
                "Exec denied ({}, {}): {}",
                call.prepared.target.machine(),
                crate::output::escape_display(reason),
                self.approvals.display(&call.req.command)
            ),
            Details::Denied(Denied::new(reason.to_string())),
        )
        .with_warnings(&call.prepared.warnings)
    }

    /// Asks the operator: binds the plan and the files it runs, registers the approval and
    /// its waiter, and answers that it is pending.
    async fn ask(
        &self,
        call: &Call<'_>,
        parsed: &Parsed,
        eval: &Evaluation,
        reason: String,
    ) -> Result<ToolResult, ExecError> {
        let (prepared, req, session) = (call.prepared, call.req, call.session);
        let plan = plan_of(eval, req);
        let files = self.plan_files(prepared, parsed, &plan).await?;
        let redact = |v: &str| self.approvals.redact(v);
        let binding = Binding::new(
            prepared.approval_target(),
            &plan,
            eval,
            &prepared.cwd,
            &prepared.env,
            &redact,
            files,
        );
        // Whether the allowlist alone covers it, for `ask_fallback = allowlist`.
        let covered = prepared.covered(parsed, eval);
        let persist = persistable(call, eval, &binding);
        let mut allowed = vec![ApprovalDecision::AllowOnce];
        if !persist.is_empty() {
            allowed.push(ApprovalDecision::AllowAlways);
        }
        allowed.push(ApprovalDecision::Deny);
        let row = self.approvals.create(NewApproval {
            session: session.to_string(),
            requester: call.caller.label(),
            agent: call.caller.agent.clone(),
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

    /// Files the plan runs, bound by content: read on the host, or inside the container for a
    /// sandbox plan (docs/approvals.md, "Files a plan runs").
    async fn plan_files(
        &self,
        prepared: &Prepared,
        parsed: &Parsed,
        plan: &str,
    ) -> Result<Vec<BoundFile>, ExecError> {
        if prepared.on_host() {
            Ok(crate::host::bind(&crate::host::scan(
                plan,
                std::path::Path::new(&prepared.cwd),
                &prepared.policy.trusted_dirs,
                &prepared.resolver,
            )?)?)
        } else {
            Ok(self.bind_sandbox(prepared, parsed, plan).await?)
        }
    }
}

/// One call as its steps share it.
struct Call<'a> {
    caller: &'a Caller,
    session: &'a str,
    req: &'a ExecRequest,
    prepared: &'a Prepared,
}

/// What would run: the rebuilt plan, or the command as sent.
fn plan_of(eval: &Evaluation, req: &ExecRequest) -> String {
    eval.plan
        .as_ref()
        .map(|p| p.command.clone())
        .unwrap_or_else(|| req.command.clone())
}

/// What would run must fit in one exec; refused here, before an approval is asked for
/// something that could never start.
fn fits_one_exec(
    prepared: &Prepared,
    eval: &Evaluation,
    req: &ExecRequest,
) -> Result<(), ExecError> {
    if matches!(eval.decision, Decision::Deny { .. }) {
        return Ok(());
    }
    match &eval.plan {
        Some(plan) => prepared.check_exec_size(&plan.command, plan.rebuilt)?,
        None => prepared.check_exec_size(&req.command, false)?,
    }
    Ok(())
}

/// The allow-always entries an approval may offer. Nothing reusable for a plan that runs a
/// file (it could change; in the sandbox every bound file is the sandbox's to write) or
/// touches a directory a sandbox writes (it asks every time anyway); and nothing to remember
/// for inline eval alone: allow-always would be a lie.
fn persistable(call: &Call<'_>, eval: &Evaluation, binding: &Binding) -> Vec<PersistEntry> {
    let (prepared, req) = (call.prepared, call.req);
    if prepared.policy.ask != Ask::Always
        && binding.files.is_empty()
        && prepared.writable_reason(eval, &req.command).is_none()
    {
        persist_entries(
            eval,
            &req.command,
            call.session,
            &prepared.cwd,
            prepared.on_host(),
        )
    } else {
        Vec::new()
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
