//! An operator's per-session egress override (`moat sessions egress`): entries added to the
//! config's allow and deny lists for one session, and its ask mode (docs/security.md,
//! "Network egress").

use rusqlite::{params, OptionalExtension};

use super::error::SqlContext;
use super::{Store, StoreError};

#[derive(Debug, Clone, Default, PartialEq)]
pub struct SessionEgress {
    /// Entries allowed for this session on top of `sandbox.egress.allow`.
    pub allow: Vec<String>,
    /// Entries refused for this session on top of `sandbox.egress.deny`.
    pub deny: Vec<String>,
    /// `off` or `on-miss` in place of `sandbox.egress.ask`; `None` keeps the config's.
    pub ask: Option<String>,
}

impl Store {
    pub fn set_session_egress(&self, key: &str, e: &SessionEgress) -> Result<(), StoreError> {
        let allow = serde_json::to_string(&e.allow).unwrap_or_else(|_| "[]".into());
        let deny = serde_json::to_string(&e.deny).unwrap_or_else(|_| "[]".into());
        self.conn()
            .execute(
                "INSERT INTO session_egress (key, allow, deny, ask) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT(key) DO UPDATE SET allow = ?2, deny = ?3, ask = ?4",
                params![key, allow, deny, e.ask],
            )
            .ctx("record session egress override")?;
        Ok(())
    }

    pub fn clear_session_egress(&self, key: &str) -> Result<(), StoreError> {
        self.conn()
            .execute("DELETE FROM session_egress WHERE key = ?1", [key])
            .ctx("clear session egress override")?;
        Ok(())
    }

    pub fn session_egress(&self, key: &str) -> Result<Option<SessionEgress>, StoreError> {
        self.conn()
            .query_row(
                "SELECT allow, deny, ask FROM session_egress WHERE key = ?1",
                [key],
                |r| {
                    let allow: String = r.get(0)?;
                    let deny: String = r.get(1)?;
                    Ok(SessionEgress {
                        allow: serde_json::from_str(&allow).unwrap_or_default(),
                        deny: serde_json::from_str(&deny).unwrap_or_default(),
                        ask: r.get(2)?,
                    })
                },
            )
            .optional()
            .ctx("read session egress override")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_read_clear() {
        let s = Store::in_memory().unwrap();
        assert!(s.session_egress("a").unwrap().is_none());
        let e = SessionEgress {
            allow: vec!["pkgs.example.org".into()],
            deny: vec!["*.evil.test".into()],
            ask: Some("on-miss".into()),
        };
        s.set_session_egress("a", &e).unwrap();
        assert_eq!(s.session_egress("a").unwrap(), Some(e));
        s.clear_session_egress("a").unwrap();
        assert!(s.session_egress("a").unwrap().is_none());
    }
}
