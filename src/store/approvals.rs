//! Pending and decided approvals, durable across restarts. Every state change is a
//! conditional `UPDATE … WHERE status = …`, so two moats (or two operators) racing on one
//! approval cannot both win.

use rusqlite::{params, OptionalExtension};

use super::approval_kinds::{ApprovalStatus, RecordedDecision};
use super::error::SqlContext;
use super::{Store, StoreError};
use crate::contract::ApprovalTarget;

/// One approval as stored. The plan binding, the request and the allow-always entries are
/// JSON documents owned by `approvals`.
#[derive(Debug, Clone, PartialEq)]
pub struct ApprovalRow {
    pub id: String,
    pub session: String,
    /// `provider:sender` and agent of the requester.
    pub requester: String,
    pub agent: Option<String>,
    /// Where the command runs (`sandbox`, `host`, `host-full`), or `network` for a
    /// connection the egress proxy asked about.
    pub target: ApprovalTarget,
    /// The command as the agent sent it.
    pub command: String,
    /// The exact text that runs once approved.
    pub plan: String,
    /// JSON: argv and resolved executable per segment, cwd, env hash and shown env, bound files.
    pub binding: String,
    /// JSON: the `exec` request, to prepare the same run again (after a restart too).
    pub request: String,
    pub reason: String,
    /// Comma-separated: `allow-once,allow-always,deny`.
    pub allowed: String,
    /// JSON: the allowlist entries allow-always adds.
    pub persist: String,
    /// Whether the allowlist alone covers the command (for `ask_fallback = allowlist`).
    pub covered: bool,
    pub created_at_ms: i64,
    pub expires_at_ms: i64,
    /// Where it stands: only a pending approval can be decided, only an approved one run.
    pub status: ApprovalStatus,
    /// The operator's answer, or what moat decided itself (timeout, fallback, plan changed).
    pub decision: Option<RecordedDecision>,
    pub decided_by: Option<String>,
    pub decided_at_ms: Option<i64>,
    pub used_at_ms: Option<i64>,
    /// The process the approved plan ran as.
    pub process_id: Option<String>,
}

const COLUMNS: &str = "id, session, requester, agent, target, command, plan, binding, request, reason, allowed, persist, covered, created_at_ms, expires_at_ms, status, decision, decided_by, decided_at_ms, used_at_ms, process_id";

fn row(r: &rusqlite::Row<'_>) -> rusqlite::Result<ApprovalRow> {
    Ok(ApprovalRow {
        id: r.get(0)?,
        session: r.get(1)?,
        requester: r.get(2)?,
        agent: r.get(3)?,
        target: r.get(4)?,
        command: r.get(5)?,
        plan: r.get(6)?,
        binding: r.get(7)?,
        request: r.get(8)?,
        reason: r.get(9)?,
        allowed: r.get(10)?,
        persist: r.get(11)?,
        covered: r.get(12)?,
        created_at_ms: r.get(13)?,
        expires_at_ms: r.get(14)?,
        status: r.get(15)?,
        decision: r.get(16)?,
        decided_by: r.get(17)?,
        decided_at_ms: r.get(18)?,
        used_at_ms: r.get(19)?,
        process_id: r.get(20)?,
    })
}

impl Store {
    /// Records `a` only while its session has fewer than `max_pending` pending approvals that
    /// have not expired; false when the session is at the cap. One statement, so two requests
    /// racing cannot both take the last place.
    pub fn insert_approval_capped(
        &self,
        a: &ApprovalRow,
        max_pending: u32,
    ) -> Result<bool, StoreError> {
        let n = self
            .conn()
            .execute(
                &format!(
                    "INSERT INTO approvals ({COLUMNS})
                     SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21
                     WHERE (SELECT COUNT(*) FROM approvals
                            WHERE session = ?2 AND status = ?23 AND expires_at_ms > ?14) < ?22"
                ),
                params![
                    a.id, a.session, a.requester, a.agent, a.target, a.command, a.plan, a.binding,
                    a.request, a.reason, a.allowed, a.persist, a.covered, a.created_at_ms,
                    a.expires_at_ms, a.status, a.decision, a.decided_by, a.decided_at_ms,
                    a.used_at_ms, a.process_id, max_pending, ApprovalStatus::Pending
                ],
            )
            .ctx("record approval")?;
        Ok(n == 1)
    }

    /// The ids of every pending approval: one query answers all waiters at once.
    pub fn pending_approval_ids(&self) -> Result<std::collections::HashSet<String>, StoreError> {
        let conn = self.conn();
        let mut stmt = conn
            .prepare_cached("SELECT id FROM approvals WHERE status = ?1")
            .ctx("list pending approvals")?;
        let rows = stmt
            .query_map([ApprovalStatus::Pending], |r| r.get(0))
            .ctx("list pending approvals")?;
        rows.collect::<Result<_, _>>().ctx("list pending approvals")
    }

    pub fn approval(&self, id: &str) -> Result<Option<ApprovalRow>, StoreError> {
        self.conn()
            .query_row(
                &format!("SELECT {COLUMNS} FROM approvals WHERE id = ?1"),
                [id],
                row,
            )
            .optional()
            .ctx("read approval")
    }

    /// Approvals whose id starts with `prefix` (case-insensitive), newest first.
    pub fn approvals_with_prefix(&self, prefix: &str) -> Result<Vec<ApprovalRow>, StoreError> {
        let conn = self.conn();
        let mut stmt = conn
            .prepare(&format!(
                "SELECT {COLUMNS} FROM approvals WHERE lower(substr(id, 1, ?2)) = lower(?1) ORDER BY created_at_ms DESC"
            ))
            .ctx("find approval")?;
        let rows = stmt
            .query_map(params![prefix, prefix.len() as i64], row)
            .ctx("find approval")?;
        rows.collect::<Result<_, _>>().ctx("find approval")
    }

    /// Approvals, newest first; only those in `status` when given.
    pub fn approvals(
        &self,
        status: Option<ApprovalStatus>,
        limit: usize,
    ) -> Result<Vec<ApprovalRow>, StoreError> {
        let conn = self.conn();
        let mut stmt = conn
            .prepare(&format!(
                "SELECT {COLUMNS} FROM approvals WHERE ?1 IS NULL OR status = ?1 ORDER BY created_at_ms DESC LIMIT ?2"
            ))
            .ctx("list approvals")?;
        let rows = stmt
            .query_map(params![status, limit as i64], row)
            .ctx("list approvals")?;
        rows.collect::<Result<_, _>>().ctx("list approvals")
    }

    /// One session's approvals of one target (kind) and status, newest first, at most 500:
    /// the egress gate reads its grants and pending questions with it.
    pub fn approvals_of(
        &self,
        session: &str,
        target: ApprovalTarget,
        status: ApprovalStatus,
    ) -> Result<Vec<ApprovalRow>, StoreError> {
        let conn = self.conn();
        let mut stmt = conn
            .prepare_cached(&format!(
                "SELECT {COLUMNS} FROM approvals WHERE session = ?1 AND target = ?2 AND status = ?3 ORDER BY created_at_ms DESC LIMIT 500"
            ))
            .ctx("list approvals")?;
        let rows = stmt
            .query_map(params![session, target, status], row)
            .ctx("list approvals")?;
        rows.collect::<Result<_, _>>().ctx("list approvals")
    }

    /// One session's approvals of every target in `status` (all of them: a removed session's
    /// approvals are ended whatever their number).
    pub fn approvals_of_session(
        &self,
        session: &str,
        status: ApprovalStatus,
    ) -> Result<Vec<ApprovalRow>, StoreError> {
        let conn = self.conn();
        let mut stmt = conn
            .prepare_cached(&format!(
                "SELECT {COLUMNS} FROM approvals WHERE session = ?1 AND status = ?2"
            ))
            .ctx("list approvals")?;
        let rows = stmt
            .query_map(params![session, status], row)
            .ctx("list approvals")?;
        rows.collect::<Result<_, _>>().ctx("list approvals")
    }

    /// Moves an approval from `from` to `to`, recording the decision; false when it was not in
    /// `from` any more (somebody else decided first).
    pub fn transition_approval(
        &self,
        id: &str,
        from: ApprovalStatus,
        to: ApprovalStatus,
        decision: RecordedDecision,
        by: &str,
        at_ms: i64,
    ) -> Result<bool, StoreError> {
        let n = self
            .conn()
            .execute(
                "UPDATE approvals SET status = ?3, decision = ?4, decided_by = ?5, decided_at_ms = ?6
                 WHERE id = ?1 AND status = ?2",
                params![id, from, to, decision, by, at_ms],
            )
            .ctx("record approval decision")?;
        Ok(n == 1)
    }

    /// Marks an approved plan as run; false when it was already used (or never approved).
    pub fn use_approval(&self, id: &str, at_ms: i64) -> Result<bool, StoreError> {
        let n = self
            .conn()
            .execute(
                "UPDATE approvals SET status = ?3, used_at_ms = ?2 WHERE id = ?1 AND status = ?4",
                params![id, at_ms, ApprovalStatus::Used, ApprovalStatus::Approved],
            )
            .ctx("record approval use")?;
        Ok(n == 1)
    }

    pub fn set_approval_process(&self, id: &str, process: &str) -> Result<(), StoreError> {
        self.conn()
            .execute(
                "UPDATE approvals SET process_id = ?2 WHERE id = ?1",
                params![id, process],
            )
            .ctx("record approval process")?;
        Ok(())
    }
}
