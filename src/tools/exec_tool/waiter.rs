//! The owner task of one approval: it waits until an operator decides (or the approval
//! expires), then runs exactly the approved plan once and reports to the session:
//! `Exec running …` once after the notice delay, `Exec finished …` with the output tail, or
//! `Exec denied …` with the reason.
//!
//! Waiting costs nothing while nothing happens (docs/approvals.md, "How waiters wake"): the
//! waiter parks on its wake-up handle and a timer for the expiry. A decision written through
//! this process's approvals service wakes it at once; one written by another process is found
//! by the shared check every two seconds.

use std::time::Duration;

use super::request::ExecRequest;
use crate::approvals::{denied_event, finished_event, running_event, Binding};
use crate::contract::Target;
use crate::policy::Security;
use crate::process::{EventKind, EventOutcome};
use crate::store::{now_ms, ApprovalRow, ApprovalStatus, RecordedDecision};

use super::tool::ExecTool;

impl ExecTool {
    pub(super) fn spawn_waiter(&self, id: String) {
        let tool = self.clone();
        tokio::spawn(async move { tool.wait_for_decision(id).await });
    }

    /// Resumes a waiter for every approval not yet settled (pending, approved but not run,
    /// expired without its fallback applied), e.g. when `moat serve` starts. Each plan still
    /// runs at most once: claiming it is atomic in the store.
    pub fn recover_approvals(&self) -> usize {
        let mut n = 0;
        for status in [
            ApprovalStatus::Pending,
            ApprovalStatus::Approved,
            ApprovalStatus::Expired,
        ] {
            for row in self.approvals.list(Some(status)).unwrap_or_default() {
                self.spawn_waiter(row.id);
                n += 1;
            }
        }
        n
    }

    async fn wait_for_decision(&self, id: String) {
        let wakeups = self.approvals.wakeups().clone();
        // Registered before the first read, so a decision landing in between leaves a permit.
        let wake = wakeups.register(&id, self.approvals.store());
        let row = loop {
            let row = match self.approvals.get(&id) {
                Ok(r) => r,
                Err(e) => {
                    tracing::warn!(%id, error = %e, "failed to read approval; its waiter stops");
                    wakeups.unregister(&id);
                    return;
                }
            };
            if row.status != ApprovalStatus::Pending {
                break row;
            }
            let left = row.expires_at_ms.saturating_sub(now_ms());
            if left <= 0 {
                let _ = self.approvals.expire(&row.id);
                continue;
            }
            tokio::select! {
                _ = wake.notified() => {}
                _ = tokio::time::sleep(Duration::from_millis(left as u64)) => {}
            }
        };
        wakeups.unregister(&id);
        match row.status {
            ApprovalStatus::Approved => self.run_approved(row).await,
            ApprovalStatus::Denied => {
                let reason = match row.decision {
                    Some(RecordedDecision::PlanChanged) => "plan-changed",
                    Some(RecordedDecision::SessionRemoved) => "session-removed",
                    _ => "user-denied",
                };
                self.deny(&row, reason)
            }
            ApprovalStatus::Expired => self.apply_fallback(row).await,
            ApprovalStatus::Pending | ApprovalStatus::Used => {}
        }
    }

    fn deny(&self, row: &ApprovalRow, reason: &str) {
        let display = self.approvals.display(&row.command);
        self.registry.events().publish(
            &row.session,
            denied_event(row, reason, &display),
            EventOutcome::approval(EventKind::Denied, &row.id, None),
        );
    }

    /// `ask_fallback`, never looser than the security level in force: `full` runs the plan,
    /// `allowlist` runs it only when the allowlist covers it, `deny` refuses. An inline-eval
    /// ask is refused whatever the fallback: nobody looked at the code it runs.
    async fn apply_fallback(&self, row: ApprovalRow) {
        let in_force = match self.prepare_row(&row).await {
            Some((_, p, _)) => p.policy.security,
            None => Security::Deny,
        };
        let fallback = self.config.approvals.ask_fallback.min(in_force);
        let inline = row.reason.contains("inline-eval");
        let runs = match fallback {
            Security::Full => !inline,
            Security::Allowlist => row.covered && !inline,
            Security::Deny => false,
        };
        if !runs {
            let reason = if fallback == Security::Allowlist {
                "approval-timeout (allowlist-miss)"
            } else {
                "approval-timeout"
            };
            return self.deny(&row, reason);
        }
        if let Ok(true) = self
            .approvals
            .approve_by_fallback(&row.id, fallback.as_str())
        {
            if let Ok(row) = self.approvals.get(&row.id) {
                self.run_approved(row).await;
            }
        }
    }

    /// The request and its run, prepared again from the stored record.
    async fn prepare_row(
        &self,
        row: &ApprovalRow,
    ) -> Option<(ExecRequest, super::prepare::Prepared, crate::policy::Parsed)> {
        let req: ExecRequest = serde_json::from_str(&row.request).ok()?;
        let parsed = super::analyse(&req.command).await;
        let target = Target::of_approval(row.target);
        self.prepare(&row.session, &req, target, &parsed)
            .await
            .ok()
            .map(|p| (req, p, parsed))
    }

    /// Copies of the files `plan` runs, where the agent cannot change them, and the plan
    /// rewritten to run them: on the host a private directory, in the sandbox read-only files
    /// of moat's in the run directory (docs/security.md, "Files a plan runs: bound by content").
    async fn snapshot_files(
        &self,
        prepared: &super::prepare::Prepared,
        plan: &str,
        id: &str,
    ) -> Result<crate::host::Snapshot, crate::host::BindError> {
        if !prepared.on_host() {
            return self.snapshot_sandbox(prepared, plan, id).await;
        }
        let cwd = std::path::Path::new(&prepared.cwd);
        let found =
            crate::host::scan(plan, cwd, &prepared.policy.trusted_dirs, &prepared.resolver)?;
        if found.is_empty() {
            return Ok(crate::host::Snapshot {
                plan: plan.to_string(),
                files: Vec::new(),
            });
        }
        let private = self.home.host_approved_dir().join(id);
        let _ = std::fs::remove_dir_all(&private);
        crate::host::snapshot(plan, &found, &private)
    }

    /// Removes the copies [`snapshot_files`](Self::snapshot_files) made for approval `id`.
    fn drop_copies(&self, prepared: &super::prepare::Prepared, id: &str) {
        if prepared.on_host() {
            let _ = std::fs::remove_dir_all(self.home.host_approved_dir().join(id));
        } else {
            Self::drop_sandbox_copies(prepared, id);
        }
    }

    async fn run_approved(&self, row: ApprovalRow) {
        let Some((req, prepared, parsed)) = self.prepare_row(&row).await else {
            return self.deny(&row, "spawn-failed");
        };
        let eval = prepared.evaluate(&parsed);
        // The files the plan runs are copied now and the plan runs the copies: what runs is
        // what these hashes say, and they must equal the approved ones.
        let (plan, files, file_error) =
            match self.snapshot_files(&prepared, &row.plan, &row.id).await {
                Ok(s) => (s.plan, s.files, None),
                Err(e) => (row.plan.clone(), Vec::new(), Some(e.to_string())),
            };
        let redact = |v: &str| self.approvals.redact(v);
        let binding = Binding::new(
            prepared.approval_target(),
            &row.plan,
            &eval,
            &prepared.cwd,
            &prepared.env,
            &redact,
            files,
        );
        let row = match self.approvals.consume(&row.id, &binding) {
            Ok(r) => r,
            Err(crate::approvals::ApprovalError::PlanChanged { what, .. }) => {
                self.drop_copies(&prepared, &row.id);
                let detail = file_error.map(|e| format!(" ({e})")).unwrap_or_default();
                return self.deny(&row, &format!("plan-changed: {what}{detail}"));
            }
            // Another moat claimed it first, or it is spent: nothing to report from here (the
            // copies are the claimer's now).
            Err(_) => return,
        };
        let proc = match self.launch(&prepared, &plan, &req, false).await {
            Ok(p) => p,
            Err(e) => {
                self.drop_copies(&prepared, &row.id);
                tracing::warn!(id = %row.id, error = %e, "failed to start an approved plan");
                return self.deny(&row, "spawn-failed");
            }
        };
        self.registry.set_background(&proc);
        let _ = self.approvals.record_run(&row, &proc.info.id);
        let notice = self.config.approvals.running_notice_secs;
        let display = self.approvals.display(&row.command);
        let mut ended = if notice > 0 {
            proc.wait_exit(Duration::from_secs(notice)).await
        } else {
            false
        };
        if !ended && notice > 0 {
            let text = running_event(&row, &proc.info.id, notice, &display);
            let text = proc.lock().output.redact(&text);
            let outcome = EventOutcome::approval(EventKind::Running, &row.id, Some(&proc.info.id));
            self.registry.events().publish(&row.session, text, outcome);
        }
        while !ended {
            ended = proc.wait_exit(Duration::from_secs(3600)).await;
        }
        self.drop_copies(&prepared, &row.id);
        let (text, outcome) = proc.with_output(|st| {
            let exit = st.exit.clone().expect("ended");
            let text = st.output.redact(&finished_event(
                &row,
                &proc.info.id,
                &exit,
                &st.output.tail(400),
            ));
            let outcome =
                EventOutcome::ended(EventKind::Finished, &proc.info.id, &exit, Some(&row.id));
            (text, outcome)
        });
        self.registry.events().publish(&row.session, text, outcome);
    }
}
