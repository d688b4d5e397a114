//! Allowlist entries the operator added at run time (allow-always, `moat allowlist add`),
//! per target (`sandbox` or `host`). Configured entries stay in `moat.toml`.

use rusqlite::params;

use super::error::SqlContext;
use super::{Store, StoreError};

#[derive(Debug, Clone, PartialEq)]
pub struct AllowlistRow {
    pub id: i64,
    pub target: String,
    /// An absolute path (glob), or `=command:<sha256>` for one exact command.
    pub entry: String,
    /// For an exact-command entry, the command it stands for (shown to the operator).
    pub command: Option<String>,
    /// For an exact-command entry, the session it is valid in; `None` on entries stored before
    /// entries were scoped, which match nothing (docs/approvals.md).
    pub session: Option<String>,
    /// For an exact-command entry, the working directory it is valid in.
    pub cwd: Option<String>,
    /// `allow-always`, `cli`, `http`.
    pub source: String,
    pub approval_id: Option<String>,
    pub added_by: String,
    pub added_at_ms: i64,
}

impl Store {
    /// Adds an entry; false when the same entry already exists for the target.
    pub fn add_allowlist_entry(&self, e: &AllowlistRow) -> Result<bool, StoreError> {
        let n = self
            .conn()
            .execute(
                "INSERT OR IGNORE INTO allowlist (target, entry, command, session, cwd, source, approval_id, added_by, added_at_ms)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
                params![e.target, e.entry, e.command, e.session, e.cwd, e.source, e.approval_id, e.added_by, e.added_at_ms],
            )
            .ctx("add allowlist entry")?;
        Ok(n == 1)
    }

    /// Removes entries by id or by exact entry text; returns how many went.
    pub fn remove_allowlist_entry(&self, id_or_entry: &str) -> Result<usize, StoreError> {
        self.conn()
            .execute(
                "DELETE FROM allowlist WHERE CAST(id AS TEXT) = ?1 OR entry = ?1",
                [id_or_entry],
            )
            .ctx("remove allowlist entry")
    }

    /// Entries for `target` (all targets when `None`), oldest first.
    pub fn allowlist_entries(&self, target: Option<&str>) -> Result<Vec<AllowlistRow>, StoreError> {
        let conn = self.conn();
        let mut stmt = conn
            .prepare(
                "SELECT id, target, entry, command, source, approval_id, added_by, added_at_ms, session, cwd
                 FROM allowlist WHERE ?1 IS NULL OR target = ?1 ORDER BY id",
            )
            .ctx("list allowlist")?;
        let rows = stmt
            .query_map([target], |r| {
                Ok(AllowlistRow {
                    id: r.get(0)?,
                    target: r.get(1)?,
                    entry: r.get(2)?,
                    command: r.get(3)?,
                    source: r.get(4)?,
                    approval_id: r.get(5)?,
                    added_by: r.get(6)?,
                    added_at_ms: r.get(7)?,
                    session: r.get(8)?,
                    cwd: r.get(9)?,
                })
            })
            .ctx("list allowlist")?;
        rows.collect::<Result<_, _>>().ctx("list allowlist")
    }
}
