//! A session's sticky state (docs/mcp.md, "Sticky cwd and env"): whether it is on for the
//! session (`None`: as `exec.sticky` says), and the directory and variables carried to its
//! next command.

use rusqlite::{params, OptionalExtension};

use super::error::SqlContext;
use super::{Store, StoreError};
use crate::contract::sticky::StickyState;

impl Store {
    /// The operator's switch for `key` (`None`: the configuration decides).
    pub fn sticky_enabled(&self, key: &str) -> Result<Option<bool>, StoreError> {
        Ok(self
            .query_row_cached(
                "SELECT enabled FROM session_sticky WHERE key = ?1",
                [key],
                |r| r.get::<_, Option<bool>>(0),
            )
            .optional()
            .ctx("read sticky switch")?
            .flatten())
    }

    pub fn set_sticky_enabled(&self, key: &str, enabled: Option<bool>) -> Result<(), StoreError> {
        self.conn()
            .execute(
                "INSERT INTO session_sticky (key, enabled) VALUES (?1, ?2)
                 ON CONFLICT(key) DO UPDATE SET enabled = ?2",
                params![key, enabled],
            )
            .ctx("record sticky switch")?;
        Ok(())
    }

    /// The state carried to `key`'s next command (empty when none).
    pub fn sticky_state(&self, key: &str) -> Result<StickyState, StoreError> {
        let row = self
            .query_row_cached(
                "SELECT cwd, env FROM session_sticky WHERE key = ?1",
                [key],
                |r| Ok((r.get::<_, Option<String>>(0)?, r.get::<_, String>(1)?)),
            )
            .optional()
            .ctx("read sticky state")?;
        Ok(match row {
            Some((cwd, env)) => StickyState {
                cwd,
                // Written by moat from a validated map; unreadable means nothing carried.
                env: serde_json::from_str(&env).unwrap_or_default(),
            },
            None => StickyState::default(),
        })
    }

    pub fn save_sticky_state(&self, key: &str, state: &StickyState) -> Result<(), StoreError> {
        let env = serde_json::to_string(&state.env).unwrap_or_else(|_| "{}".into());
        self.conn()
            .execute(
                "INSERT INTO session_sticky (key, cwd, env) VALUES (?1, ?2, ?3)
                 ON CONFLICT(key) DO UPDATE SET cwd = ?2, env = ?3",
                params![key, state.cwd, env],
            )
            .ctx("record sticky state")?;
        Ok(())
    }

    /// Forgets what `key` carries (its switch stays); `forget_switch` drops that too.
    pub fn reset_sticky_state(&self, key: &str, forget_switch: bool) -> Result<(), StoreError> {
        let sql = if forget_switch {
            "DELETE FROM session_sticky WHERE key = ?1"
        } else {
            "UPDATE session_sticky SET cwd = NULL, env = '{}' WHERE key = ?1"
        };
        self.conn().execute(sql, [key]).ctx("reset sticky state")?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_and_switch_are_kept_apart() {
        let s = Store::in_memory().unwrap();
        assert_eq!(s.sticky_enabled("k").unwrap(), None);
        assert_eq!(s.sticky_state("k").unwrap(), StickyState::default());
        let st = StickyState {
            cwd: Some("/workspace/src".into()),
            env: [("FOO".to_string(), "bar".to_string())].into(),
        };
        s.save_sticky_state("k", &st).unwrap();
        s.set_sticky_enabled("k", Some(true)).unwrap();
        assert_eq!(s.sticky_state("k").unwrap(), st);
        assert_eq!(s.sticky_enabled("k").unwrap(), Some(true));
        s.reset_sticky_state("k", false).unwrap();
        assert_eq!(s.sticky_state("k").unwrap(), StickyState::default());
        assert_eq!(s.sticky_enabled("k").unwrap(), Some(true));
        s.reset_sticky_state("k", true).unwrap();
        assert_eq!(s.sticky_enabled("k").unwrap(), None);
    }
}
