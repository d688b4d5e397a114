//! [`Approvals`]: create, look up, decide and consume approvals, and manage the run-time
//! allowlist. The store is the single source of truth, so a CLI writing a decision and the
//! moat waiting on it agree without talking to each other.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::binding::Binding;
use super::error::ApprovalError;
use super::persist::{is_interpreter, PersistEntry};
use super::wake::Wakeups;
use crate::output::{escape_display, Redactor};
use crate::store::{
    now_ms, AllowlistRow, ApprovalRow, ApprovalStatus, AuditRow, RecordedDecision, Store,
};

/// An operator's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ApprovalDecision {
    AllowOnce,
    AllowAlways,
    Deny,
}

impl ApprovalDecision {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::AllowOnce => "allow-once",
            Self::AllowAlways => "allow-always",
            Self::Deny => "deny",
        }
    }

    pub fn parse(s: &str) -> Result<Self, ApprovalError> {
        match s.trim().to_ascii_lowercase().as_str() {
            "allow-once" | "once" | "approve" => Ok(Self::AllowOnce),
            "allow-always" | "always" => Ok(Self::AllowAlways),
            "deny" => Ok(Self::Deny),
            _ => Err(ApprovalError::UnknownDecision(s.to_string())),
        }
    }
}

impl From<ApprovalDecision> for RecordedDecision {
    fn from(d: ApprovalDecision) -> Self {
        match d {
            ApprovalDecision::AllowOnce => Self::AllowOnce,
            ApprovalDecision::AllowAlways => Self::AllowAlways,
            ApprovalDecision::Deny => Self::Deny,
        }
    }
}

/// Who decides. Only operators may; an agent's identity is recorded and refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decider {
    pub name: String,
    /// `cli`, `http`, `web`.
    pub channel: String,
    pub operator: bool,
}

impl Decider {
    pub fn operator(name: impl Into<String>, channel: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            channel: channel.into(),
            operator: true,
        }
    }

    /// A caller authenticated as an agent (its token, its tool): never allowed to decide.
    pub fn agent(name: impl Into<String>, channel: impl Into<String>) -> Self {
        Self {
            operator: false,
            ..Self::operator(name, channel)
        }
    }

    pub fn label(&self) -> String {
        format!("{}:{}", self.channel, self.name)
    }
}

/// Everything needed to register a pending approval.
#[derive(Debug, Clone)]
pub struct NewApproval {
    pub session: String,
    pub requester: String,
    pub agent: Option<String>,
    pub command: String,
    pub binding: Binding,
    /// The `exec` request as JSON.
    pub request: String,
    pub reason: String,
    pub allowed: Vec<ApprovalDecision>,
    pub persist: Vec<PersistEntry>,
    pub covered: bool,
    pub timeout_ms: i64,
}

/// See the module docs.
pub struct Approvals {
    store: Arc<Store>,
    /// Secret values never shown in a display.
    redactor: Redactor,
    /// Wakes this process's waiters when a decision or expiry is written here.
    wakeups: Arc<Wakeups>,
    /// `approvals.max_pending_per_session`: how many pending approvals a session may hold.
    max_pending: u32,
}

/// `host` for both host targets, `sandbox` otherwise: allowlist entries are per machine. For a
/// target an operator typed; a stored approval's is `ApprovalTarget::machine`.
pub fn allowlist_target(target: &str) -> &'static str {
    if target.starts_with("host") {
        "host"
    } else {
        "sandbox"
    }
}

impl Approvals {
    pub fn new(store: Arc<Store>, secrets: Vec<(String, String)>) -> Self {
        Self {
            store,
            redactor: Redactor::new(secrets),
            wakeups: Arc::default(),
            max_pending: crate::config::ApprovalsConfig::default().max_pending_per_session,
        }
    }

    /// Sets `approvals.max_pending_per_session`.
    pub fn with_max_pending(mut self, max: u32) -> Self {
        self.max_pending = max;
        self
    }

    /// The waiters of this process (see [`Wakeups`]).
    pub fn wakeups(&self) -> &Arc<Wakeups> {
        &self.wakeups
    }

    pub fn store(&self) -> &Arc<Store> {
        &self.store
    }

    /// Registers a pending approval (random UUID id) and audits the request. Refused when the
    /// session already holds `approvals.max_pending_per_session` pending approvals.
    pub fn create(&self, n: NewApproval) -> Result<ApprovalRow, ApprovalError> {
        let now = now_ms();
        // Random (v4), not time-ordered (v7): the slug is the first 8 characters, and a v7 id's
        // first 8 are its timestamp, shared by every approval made within about a minute.
        let id = uuid::Uuid::new_v4().to_string();
        let row = ApprovalRow {
            id: id.clone(),
            session: n.session,
            requester: n.requester,
            agent: n.agent,
            target: n.binding.target,
            command: n.command,
            plan: n.binding.plan.clone(),
            binding: serde_json::to_string(&n.binding).unwrap_or_default(),
            request: n.request,
            reason: n.reason,
            allowed: n
                .allowed
                .iter()
                .map(|d| d.as_str())
                .collect::<Vec<_>>()
                .join(","),
            persist: serde_json::to_string(&n.persist).unwrap_or_default(),
            covered: n.covered,
            created_at_ms: now,
            expires_at_ms: now + n.timeout_ms,
            status: ApprovalStatus::Pending,
            decision: None,
            decided_by: None,
            decided_at_ms: None,
            used_at_ms: None,
            process_id: None,
        };
        if !self.store.insert_approval_capped(&row, self.max_pending)? {
            let _ = self.store.audit(
                "approval-refused",
                None,
                Some(&row.session),
                &row.requester,
                &format!("too many pending approvals (limit {})", self.max_pending),
            );
            return Err(ApprovalError::TooManyPending {
                session: escape_display(&row.session),
                max: self.max_pending,
            });
        }
        self.store.audit(
            "approval-request",
            Some(&id),
            Some(&row.session),
            &row.requester,
            &format!(
                "{} on {}: {}",
                row.reason,
                row.target,
                self.display(&row.command)
            ),
        )?;
        Ok(row)
    }

    /// Approvals, newest first, only those in `status` when given. Pending approvals past
    /// their expiry are marked expired first, so the list never offers one that can no longer
    /// be decided.
    pub fn list(&self, status: Option<ApprovalStatus>) -> Result<Vec<ApprovalRow>, ApprovalError> {
        let now = now_ms();
        for row in self.store.approvals(Some(ApprovalStatus::Pending), 500)? {
            if now >= row.expires_at_ms {
                self.expire(&row.id)?;
            }
        }
        Ok(self.store.approvals(status, 500)?)
    }

    /// [`Self::list`] for a status as an operator typed it (`moat approvals list --status`,
    /// `GET /v1/approvals?status=`): a text that names no status matches no approval, so the
    /// answer is an empty list, not an error.
    pub fn list_named(&self, status: Option<&str>) -> Result<Vec<ApprovalRow>, ApprovalError> {
        match status {
            None => self.list(None),
            Some(text) => match ApprovalStatus::parse(text) {
                Some(status) => self.list(Some(status)),
                None => Ok(Vec::new()),
            },
        }
    }

    /// By full id or a unique prefix (the 8-character slug).
    pub fn get(&self, id: &str) -> Result<ApprovalRow, ApprovalError> {
        let id = id.trim();
        if let Some(row) = self.store.approval(id)? {
            return Ok(row);
        }
        if id.len() < 4 {
            return Err(ApprovalError::NotFound(escape_display(id)));
        }
        let mut rows = self.store.approvals_with_prefix(id)?;
        match rows.len() {
            0 => Err(ApprovalError::NotFound(escape_display(id))),
            1 => Ok(rows.remove(0)),
            _ => Err(ApprovalError::Ambiguous(escape_display(id))),
        }
    }

    /// An operator's decision. Refused for non-operators, for an approval that is no longer
    /// pending (decided, used or expired), and for a decision the approval does not offer.
    /// Allow-always adds the approval's allowlist entries before the plan runs.
    pub fn decide(
        &self,
        id: &str,
        decision: ApprovalDecision,
        decider: &Decider,
    ) -> Result<ApprovalRow, ApprovalError> {
        if !decider.operator {
            let _ = self.store.audit(
                "approval-refused",
                Some(id),
                None,
                &decider.label(),
                "a non-operator tried to decide",
            );
            return Err(ApprovalError::Forbidden(escape_display(id)));
        }
        let row = self.get(id)?;
        let now = now_ms();
        if row.status == ApprovalStatus::Pending && now >= row.expires_at_ms {
            self.expire(&row.id)?;
            return Err(self.not_pending(&self.get(&row.id)?));
        }
        if row.status != ApprovalStatus::Pending {
            return Err(self.not_pending(&row));
        }
        if !row.allowed.split(',').any(|d| d == decision.as_str()) {
            return Err(ApprovalError::DecisionUnavailable {
                id: row.id,
                decision: decision.as_str().into(),
                allowed: row.allowed.replace(',', ", "),
            });
        }
        let to = if decision == ApprovalDecision::Deny {
            ApprovalStatus::Denied
        } else {
            ApprovalStatus::Approved
        };
        let by = decider.label();
        if !self.store.transition_approval(
            &row.id,
            ApprovalStatus::Pending,
            to,
            decision.into(),
            &by,
            now,
        )? {
            return Err(self.not_pending(&self.get(&row.id)?));
        }
        // Allow-always entries below are written before the waiter reads the row again: it
        // takes the store lock after them.
        let wake = WakeOnDrop(&self.wakeups, &row.id);
        self.store.audit(
            "approval-decision",
            Some(&row.id),
            Some(&row.session),
            &by,
            decision.as_str(),
        )?;
        if decision == ApprovalDecision::AllowAlways {
            let entries: Vec<PersistEntry> = serde_json::from_str(&row.persist)
                .map_err(|_| ApprovalError::Corrupt(row.id.clone()))?;
            for e in entries {
                self.add_entry(row.target.machine(), &e, "allow-always", Some(&row.id), &by)?;
            }
        }
        drop(wake);
        self.get(&row.id)
    }

    fn not_pending(&self, row: &ApprovalRow) -> ApprovalError {
        let detail = match (&row.decision, &row.decided_by) {
            (Some(d), Some(by)) => format!(" ({d} by {by})"),
            _ => String::new(),
        };
        ApprovalError::NotPending {
            id: row.id.clone(),
            status: row.status,
            detail,
        }
    }

    /// Marks a due pending approval expired; true when this call did it.
    pub fn expire(&self, id: &str) -> Result<bool, ApprovalError> {
        let row = self.get(id)?;
        if row.status != ApprovalStatus::Pending || now_ms() < row.expires_at_ms {
            return Ok(false);
        }
        let done = self.store.transition_approval(
            &row.id,
            ApprovalStatus::Pending,
            ApprovalStatus::Expired,
            RecordedDecision::Timeout,
            "moat",
            now_ms(),
        )?;
        if done {
            self.wakeups.wake(&row.id);
            self.store.audit(
                "approval-expired",
                Some(&row.id),
                Some(&row.session),
                "moat",
                "no decision in time",
            )?;
        }
        Ok(done)
    }

    /// Ends every approval of `session` that could still run something or let something
    /// through: pending ones (nobody will decide for a removed session), approved ones not
    /// yet run, expired ones whose `ask_fallback` has not applied, and the session's egress
    /// grants (approved network approvals). Each becomes `denied` with the decision
    /// `session-removed`, is audited as `approval-ended`, and its waiter is woken, so nothing
    /// runs, or re-creates the session's container, at a later decision or expiry
    /// (docs/approvals.md, "Removing a session"). Returns the ids ended.
    pub fn end_session(&self, session: &str, by: &str) -> Result<Vec<String>, ApprovalError> {
        let mut ended = Vec::new();
        for from in [
            ApprovalStatus::Pending,
            ApprovalStatus::Approved,
            ApprovalStatus::Expired,
        ] {
            for row in self.store.approvals_of_session(session, from)? {
                // Conditional: a decision or a claim that lands first keeps its own outcome.
                if !self.store.transition_approval(
                    &row.id,
                    from,
                    ApprovalStatus::Denied,
                    RecordedDecision::SessionRemoved,
                    by,
                    now_ms(),
                )? {
                    continue;
                }
                self.wakeups.wake(&row.id);
                self.store.audit(
                    "approval-ended",
                    Some(&row.id),
                    Some(&row.session),
                    by,
                    &format!("the session was removed while the approval was {from}"),
                )?;
                ended.push(row.id);
            }
        }
        Ok(ended)
    }

    /// Lets `ask_fallback` run an expired approval, once.
    pub fn approve_by_fallback(&self, id: &str, fallback: &str) -> Result<bool, ApprovalError> {
        let ok = self.store.transition_approval(
            id,
            ApprovalStatus::Expired,
            ApprovalStatus::Approved,
            RecordedDecision::Fallback,
            &format!("ask_fallback={fallback}"),
            now_ms(),
        )?;
        if ok {
            self.store.audit(
                "approval-decision",
                Some(id),
                None,
                &format!("ask_fallback={fallback}"),
                RecordedDecision::Fallback.as_str(),
            )?;
        }
        Ok(ok)
    }

    /// Claims an approved plan for running: `binding` (the run prepared again) must equal the
    /// approved one, and each approval runs once.
    pub fn consume(&self, id: &str, binding: &Binding) -> Result<ApprovalRow, ApprovalError> {
        let row = self.get(id)?;
        if row.status != ApprovalStatus::Approved {
            return Err(ApprovalError::NotUsable {
                id: row.id,
                status: row.status,
            });
        }
        let approved: Binding = serde_json::from_str(&row.binding)
            .map_err(|_| ApprovalError::Corrupt(row.id.clone()))?;
        if let Some(what) = approved.difference(binding) {
            let _ = self.store.transition_approval(
                &row.id,
                ApprovalStatus::Approved,
                ApprovalStatus::Denied,
                RecordedDecision::PlanChanged,
                "moat",
                now_ms(),
            );
            let _ = self.store.audit(
                "approval-refused",
                Some(&row.id),
                Some(&row.session),
                "moat",
                &format!("{what} changed"),
            );
            return Err(ApprovalError::PlanChanged { id: row.id, what });
        }
        if !self.store.use_approval(&row.id, now_ms())? {
            let row = self.get(&row.id)?;
            return Err(ApprovalError::NotUsable {
                id: row.id,
                status: row.status,
            });
        }
        self.get(&row.id)
    }

    /// Records the process an approved plan runs as, and audits the run.
    pub fn record_run(&self, row: &ApprovalRow, process: &str) -> Result<(), ApprovalError> {
        self.store.set_approval_process(&row.id, process)?;
        let kind = if row.target.on_host() {
            "elevated-run"
        } else {
            "approved-run"
        };
        self.store.audit(
            kind,
            Some(&row.id),
            Some(&row.session),
            &row.requester,
            &format!("{process}: {}", self.display(&row.plan)),
        )?;
        Ok(())
    }

    /// Adds an entry for `target` (`sandbox` or `host`). A bare shell or interpreter path is
    /// refused: it would allow any program. `=command:` entries come from `command`.
    pub fn allowlist_add(
        &self,
        target: &str,
        entry: &str,
        decider: &Decider,
    ) -> Result<bool, ApprovalError> {
        if !decider.operator {
            return Err(ApprovalError::Forbidden("allowlist".into()));
        }
        let e = PersistEntry::path(entry);
        self.add_entry(
            allowlist_target(target),
            &e,
            decider.channel.as_str(),
            None,
            &decider.label(),
        )
    }

    /// Adds an exact-command entry for `target`, valid for `session` in the working directory
    /// `cwd` only (as the run prepares it: absolute, symlinks resolved).
    pub fn allowlist_add_command(
        &self,
        target: &str,
        command: &str,
        session: &str,
        cwd: &str,
        decider: &Decider,
    ) -> Result<bool, ApprovalError> {
        if !decider.operator {
            return Err(ApprovalError::Forbidden("allowlist".into()));
        }
        let e = PersistEntry::exact(session, cwd, command);
        self.add_entry(
            allowlist_target(target),
            &e,
            decider.channel.as_str(),
            None,
            &decider.label(),
        )
    }

    fn add_entry(
        &self,
        target: &str,
        e: &PersistEntry,
        source: &str,
        approval: Option<&str>,
        by: &str,
    ) -> Result<bool, ApprovalError> {
        if e.command.is_some() && (e.session.is_none() || e.cwd.is_none()) {
            // An old pending approval's unscoped entry would match nothing; say so instead.
            return Err(ApprovalError::BadEntry {
                entry: escape_display(&e.entry),
                reason: "an exact-command entry needs a session and a working directory".into(),
            });
        }
        if e.command.is_none() {
            if is_interpreter(&e.entry) {
                return Err(ApprovalError::Interpreter(escape_display(&e.entry)));
            }
            crate::policy::Allowlist::compile(std::slice::from_ref(&e.entry)).map_err(|err| {
                ApprovalError::BadEntry {
                    entry: escape_display(&e.entry),
                    reason: err.to_string(),
                }
            })?;
        }
        let added = self.store.add_allowlist_entry(&AllowlistRow {
            id: 0,
            target: target.to_string(),
            entry: e.entry.clone(),
            command: e.command.clone(),
            session: e.session.clone(),
            cwd: e.cwd.clone(),
            source: source.to_string(),
            approval_id: approval.map(str::to_string),
            added_by: by.to_string(),
            added_at_ms: now_ms(),
        })?;
        if added {
            let shown = match (&e.command, &e.session, &e.cwd) {
                (Some(c), Some(s), Some(d)) => format!(
                    "{} (session {}, cwd {})",
                    self.display(c),
                    escape_display(s),
                    escape_display(d)
                ),
                _ => escape_display(&e.entry),
            };
            self.store.audit(
                "allowlist-add",
                approval,
                None,
                by,
                &format!("{target}: {shown}"),
            )?;
        }
        Ok(added)
    }

    pub fn allowlist_remove(
        &self,
        id_or_entry: &str,
        decider: &Decider,
    ) -> Result<usize, ApprovalError> {
        if !decider.operator {
            return Err(ApprovalError::Forbidden("allowlist".into()));
        }
        let n = self.store.remove_allowlist_entry(id_or_entry)?;
        if n > 0 {
            self.store.audit(
                "allowlist-remove",
                None,
                None,
                &decider.label(),
                &escape_display(id_or_entry),
            )?;
        }
        Ok(n)
    }

    /// Run-time entries for `target` (`sandbox`/`host`), all when `None`.
    pub fn allowlist(&self, target: Option<&str>) -> Result<Vec<AllowlistRow>, ApprovalError> {
        Ok(self.store.allowlist_entries(target.map(allowlist_target))?)
    }

    pub fn audit_log(
        &self,
        approval: Option<&str>,
        limit: usize,
    ) -> Result<Vec<AuditRow>, ApprovalError> {
        Ok(self.store.audit_log(approval, limit)?)
    }

    /// The JSON shape of an approval for operators (CLI `--json`, HTTP API): displays are
    /// escaped and redacted, never truncated.
    pub fn to_json(&self, r: &ApprovalRow) -> serde_json::Value {
        serde_json::json!({
            "id": r.id,
            "slug": r.id.chars().take(8).collect::<String>(),
            "status": r.status,
            "session": r.session,
            "requester": r.requester,
            "agent": r.agent,
            "host": r.target,
            "command": self.display(&r.command),
            "plan": self.display(&r.plan),
            "reason": self.display(&r.reason),
            "allowedDecisions": r.allowed.split(',').collect::<Vec<_>>(),
            "createdAtMs": r.created_at_ms,
            "expiresAtMs": r.expires_at_ms,
            "decision": r.decision,
            "decidedBy": r.decided_by,
            "decidedAtMs": r.decided_at_ms,
            "usedAtMs": r.used_at_ms,
            "processId": r.process_id,
            "binding": serde_json::from_str::<serde_json::Value>(&r.binding).unwrap_or_default(),
        })
    }

    /// `text` with every secret value replaced by `[REDACTED:NAME]`.
    pub fn redact(&self, text: &str) -> String {
        if self.redactor.is_empty() {
            text.to_string()
        } else {
            self.redactor.redact_all(text)
        }
    }

    /// A command as operators see it: secrets replaced, control, bidi and invisible characters
    /// escaped, never truncated.
    pub fn display(&self, text: &str) -> String {
        escape_display(&self.redactor.redact_all(text))
    }
}

/// Wakes an approval's waiter when dropped, so every way out of `decide` after the decision
/// was written (an error while auditing or adding entries included) wakes it.
struct WakeOnDrop<'a>(&'a Wakeups, &'a str);

impl Drop for WakeOnDrop<'_> {
    fn drop(&mut self) {
        self.0.wake(self.1);
    }
}
