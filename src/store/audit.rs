//! The audit log: approval requests and decisions, elevated runs, allowlist and skill
//! changes, each with the time and who acted. Append-only.

use rusqlite::params;

use super::error::SqlContext;
use super::{now_ms, Store, StoreError};

#[derive(Debug, Clone, PartialEq)]
pub struct AuditRow {
    pub id: i64,
    pub at_ms: i64,
    /// `approval-request`, `approval-decision`, `approval-expired`, `elevated-run`,
    /// `allowlist-add`, `allowlist-remove`, `skill`, `disk-stop` (the disk bound ended a
    /// session's processes; `crate::disk_guard`), among others.
    pub kind: String,
    pub approval_id: Option<String>,
    pub session: Option<String>,
    pub actor: String,
    pub detail: String,
}

impl Store {
    pub fn audit(
        &self,
        kind: &str,
        approval_id: Option<&str>,
        session: Option<&str>,
        actor: &str,
        detail: &str,
    ) -> Result<(), StoreError> {
        self.conn()
            .execute(
                "INSERT INTO audit (at_ms, kind, approval_id, session, actor, detail) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                params![now_ms(), kind, approval_id, session, actor, detail],
            )
            .ctx("write audit log")?;
        Ok(())
    }

    /// The newest `limit` entries, oldest first; only those of one approval when given.
    pub fn audit_log(
        &self,
        approval_id: Option<&str>,
        limit: usize,
    ) -> Result<Vec<AuditRow>, StoreError> {
        let conn = self.conn();
        let mut stmt = conn
            .prepare(
                "SELECT id, at_ms, kind, approval_id, session, actor, detail FROM (
                   SELECT * FROM audit WHERE ?1 IS NULL OR approval_id = ?1 ORDER BY id DESC LIMIT ?2
                 ) ORDER BY id",
            )
            .ctx("read audit log")?;
        let rows = stmt
            .query_map(params![approval_id, limit as i64], |r| {
                Ok(AuditRow {
                    id: r.get(0)?,
                    at_ms: r.get(1)?,
                    kind: r.get(2)?,
                    approval_id: r.get(3)?,
                    session: r.get(4)?,
                    actor: r.get(5)?,
                    detail: r.get(6)?,
                })
            })
            .ctx("read audit log")?;
        rows.collect::<Result<_, _>>().ctx("read audit log")
    }
}

/// The audit log as the operator console filters it (docs/console.md, "Pages").
impl Store {
    /// The newest `limit` entries, newest first, of one session and one kind when given.
    pub fn audit_filtered(
        &self,
        session: Option<&str>,
        kind: Option<&str>,
        limit: usize,
    ) -> Result<Vec<AuditRow>, StoreError> {
        let conn = self.conn();
        let mut stmt = conn
            .prepare(
                "SELECT id, at_ms, kind, approval_id, session, actor, detail FROM audit
                 WHERE (?1 IS NULL OR session = ?1) AND (?2 IS NULL OR kind = ?2)
                 ORDER BY id DESC LIMIT ?3",
            )
            .ctx("read audit log")?;
        let rows = stmt
            .query_map(params![session, kind, limit as i64], |r| {
                Ok(AuditRow {
                    id: r.get(0)?,
                    at_ms: r.get(1)?,
                    kind: r.get(2)?,
                    approval_id: r.get(3)?,
                    session: r.get(4)?,
                    actor: r.get(5)?,
                    detail: r.get(6)?,
                })
            })
            .ctx("read audit log")?;
        rows.collect::<Result<_, _>>().ctx("read audit log")
    }

    /// Every kind and every session the log holds, sorted: the console's filter choices.
    pub fn audit_facets(&self) -> Result<(Vec<String>, Vec<String>), StoreError> {
        let conn = self.conn();
        let mut kinds = conn
            .prepare("SELECT DISTINCT kind FROM audit ORDER BY kind LIMIT 200")
            .ctx("read audit kinds")?;
        let kinds = kinds
            .query_map([], |r| r.get(0))
            .ctx("read audit kinds")?
            .collect::<Result<Vec<String>, _>>()
            .ctx("read audit kinds")?;
        let mut sessions = conn
            .prepare(
                "SELECT DISTINCT session FROM audit WHERE session IS NOT NULL ORDER BY session LIMIT 500",
            )
            .ctx("read audit sessions")?;
        let sessions = sessions
            .query_map([], |r| r.get(0))
            .ctx("read audit sessions")?
            .collect::<Result<Vec<String>, _>>()
            .ctx("read audit sessions")?;
        Ok((kinds, sessions))
    }

    /// The id of the newest entry (0 when empty): the console's live view notices any new
    /// request, decision, expiry or allowlist change by it.
    pub fn audit_head(&self) -> Result<i64, StoreError> {
        self.conn()
            .query_row("SELECT COALESCE(MAX(id), 0) FROM audit", [], |r| r.get(0))
            .ctx("read audit log")
    }
}

/// Skills switched on or off by the operator (overriding `skills.NAME.enabled`).
impl Store {
    pub fn set_skill(&self, name: &str, enabled: bool, by: &str) -> Result<(), StoreError> {
        self.conn()
            .execute(
                "INSERT INTO skill_state (name, enabled, changed_by, changed_at_ms) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT(name) DO UPDATE SET enabled = ?2, changed_by = ?3, changed_at_ms = ?4",
                params![name, enabled, by, now_ms()],
            )
            .ctx("record skill state")?;
        Ok(())
    }

    /// `(name, enabled)` for every skill the operator switched.
    pub fn skill_states(&self) -> Result<Vec<(String, bool)>, StoreError> {
        let conn = self.conn();
        let mut stmt = conn
            .prepare("SELECT name, enabled FROM skill_state ORDER BY name")
            .ctx("read skill states")?;
        let rows = stmt
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .ctx("read skill states")?;
        rows.collect::<Result<_, _>>().ctx("read skill states")
    }
}
