//! Sessions as moat remembers them, and an operator's per-session policy override
//! (`moat sessions set`).

use rusqlite::{params, OptionalExtension};

use super::error::SqlContext;
use super::{Store, StoreError};

/// A session as moat remembers it.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionRow {
    pub key: String,
    pub container: String,
    pub created_at_ms: i64,
    /// Drives the "recently used → warn instead of recreate" rule and idle pruning.
    pub last_used_ms: i64,
}

impl Store {
    pub fn touch_session(&self, key: &str, container: &str, now_ms: i64) -> Result<(), StoreError> {
        self.execute_cached(
                "INSERT INTO sessions (key, container, created_at_ms, last_used_ms) VALUES (?1, ?2, ?3, ?3)
                 ON CONFLICT(key) DO UPDATE SET container = ?2, last_used_ms = ?3",
                params![key, container, now_ms],
            )
            .ctx("record session use")?;
        Ok(())
    }

    pub fn session(&self, key: &str) -> Result<Option<SessionRow>, StoreError> {
        self.conn()
            .query_row(
                "SELECT key, container, created_at_ms, last_used_ms FROM sessions WHERE key = ?1",
                [key],
                row,
            )
            .optional()
            .ctx("read session")
    }

    /// The most recent use of any session living in `container`.
    pub fn container_last_used(&self, container: &str) -> Result<Option<i64>, StoreError> {
        self.conn()
            .query_row(
                "SELECT MAX(last_used_ms) FROM sessions WHERE container = ?1",
                [container],
                |r| r.get(0),
            )
            .ctx("read container use")
    }

    pub fn sessions(&self) -> Result<Vec<SessionRow>, StoreError> {
        let conn = self.conn();
        let mut stmt = conn
            .prepare(
                "SELECT key, container, created_at_ms, last_used_ms FROM sessions ORDER BY key",
            )
            .ctx("list sessions")?;
        let rows = stmt.query_map([], row).ctx("list sessions")?;
        rows.collect::<Result<_, _>>().ctx("list sessions")
    }

    pub fn forget_session(&self, key: &str) -> Result<(), StoreError> {
        self.conn()
            .execute("DELETE FROM sessions WHERE key = ?1", [key])
            .ctx("forget session")?;
        Ok(())
    }
}

impl Store {
    /// Records that `key`'s container is the warm pool's `slot` (docs/pool.md, "Claims").
    pub fn record_claim(&self, key: &str, slot: &str, now_ms: i64) -> Result<(), StoreError> {
        self.conn()
            .execute(
                "INSERT INTO pool_claims (key, slot, claimed_at_ms) VALUES (?1, ?2, ?3)
                 ON CONFLICT(key) DO UPDATE SET slot = ?2, claimed_at_ms = ?3",
                params![key, slot, now_ms],
            )
            .ctx("record pool claim")?;
        Ok(())
    }

    /// The pool slot `key`'s container came from, if it was claimed.
    pub fn claimed_slot(&self, key: &str) -> Result<Option<String>, StoreError> {
        self.conn()
            .query_row("SELECT slot FROM pool_claims WHERE key = ?1", [key], |r| {
                r.get(0)
            })
            .optional()
            .ctx("read pool claim")
    }

    /// The key that claimed pool `slot`, if any.
    pub fn claim_of_slot(&self, slot: &str) -> Result<Option<String>, StoreError> {
        self.conn()
            .query_row("SELECT key FROM pool_claims WHERE slot = ?1", [slot], |r| {
                r.get(0)
            })
            .optional()
            .ctx("read pool claim")
    }

    pub fn forget_claim(&self, key: &str) -> Result<(), StoreError> {
        self.conn()
            .execute("DELETE FROM pool_claims WHERE key = ?1", [key])
            .ctx("forget pool claim")?;
        Ok(())
    }
}

/// An operator's per-session policy override (`moat sessions set`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SessionPolicy {
    pub security: Option<String>,
    pub ask: Option<String>,
    /// The operator allowed the override to be looser than the config.
    pub loosen: bool,
}

impl SessionPolicy {
    /// The override as a layer of the policy in force (`policy::compose`).
    pub fn layer(&self) -> crate::policy::SessionOverride<'_> {
        crate::policy::SessionOverride {
            security: self.security.as_deref(),
            ask: self.ask.as_deref(),
            loosen: self.loosen,
        }
    }
}

impl Store {
    pub fn set_session_policy(&self, key: &str, p: &SessionPolicy) -> Result<(), StoreError> {
        self.conn()
            .execute(
                "INSERT INTO session_policy (key, security, ask, loosen) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT(key) DO UPDATE SET security = ?2, ask = ?3, loosen = ?4",
                params![key, p.security, p.ask, p.loosen],
            )
            .ctx("record session policy")?;
        Ok(())
    }

    pub fn session_policy(&self, key: &str) -> Result<Option<SessionPolicy>, StoreError> {
        self.query_row_cached(
            "SELECT security, ask, loosen FROM session_policy WHERE key = ?1",
            [key],
            |r| {
                Ok(SessionPolicy {
                    security: r.get(0)?,
                    ask: r.get(1)?,
                    loosen: r.get(2)?,
                })
            },
        )
        .optional()
        .ctx("read session policy")
    }
}

fn row(r: &rusqlite::Row<'_>) -> rusqlite::Result<SessionRow> {
    Ok(SessionRow {
        key: r.get(0)?,
        container: r.get(1)?,
        created_at_ms: r.get(2)?,
        last_used_ms: r.get(3)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn touch_inserts_then_updates() {
        let s = Store::in_memory().unwrap();
        s.touch_session("a", "moat-a", 10).unwrap();
        s.touch_session("a", "moat-a", 20).unwrap();
        let row = s.session("a").unwrap().unwrap();
        assert_eq!((row.created_at_ms, row.last_used_ms), (10, 20));
        assert_eq!(s.container_last_used("moat-a").unwrap(), Some(20));
        s.forget_session("a").unwrap();
        assert!(s.session_policy("a").unwrap().is_none());
        let p = SessionPolicy {
            security: Some("allowlist".into()),
            ask: None,
            loosen: false,
        };
        s.set_session_policy("a", &p).unwrap();
        assert_eq!(s.session_policy("a").unwrap(), Some(p));
        assert!(s.session("a").unwrap().is_none());
    }
}
