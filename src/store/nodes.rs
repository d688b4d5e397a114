//! Pairings (docs/nodes.md, "Pairing"), both sides: on a node, the tokens its operator
//! issued to gateways (their SHA-256 only); on a gateway, the nodes it paired with (URL,
//! pinned fingerprint, and the token it presents, which only this home's user can read).

use rusqlite::{params, OptionalExtension};

use super::error::SqlContext;
use super::{now_ms, Store, StoreError};

/// A token a node's operator issued to a gateway.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeTokenRow {
    /// The gateway's pairing name, which the node's audit log and session keys carry.
    pub gateway: String,
    /// When it was issued.
    pub created_at_ms: i64,
    /// When it was revoked; a revoked token is refused on its next call.
    pub revoked_at_ms: Option<i64>,
}

/// A node a gateway paired with.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeRow {
    /// The name agents give as `node`.
    pub name: String,
    /// `https://HOST:PORT`.
    pub url: String,
    /// The pinned certificate's `SHA256:…`.
    pub fingerprint: String,
    /// The pairing token the node issued to this gateway.
    pub token: String,
    /// When it was added.
    pub added_at_ms: i64,
}

impl Store {
    /// Issues (or re-issues, replacing the old one) the token of `gateway` by its hash.
    pub fn issue_node_token(&self, gateway: &str, hash: &str) -> Result<(), StoreError> {
        self.conn()
            .execute(
                "INSERT INTO node_tokens (gateway, hash, created_at_ms, revoked_at_ms)
                 VALUES (?1, ?2, ?3, NULL)
                 ON CONFLICT(gateway) DO UPDATE SET hash = ?2, created_at_ms = ?3, revoked_at_ms = NULL",
                params![gateway, hash, now_ms()],
            )
            .ctx("record node token")?;
        Ok(())
    }

    /// Revokes the token of `gateway`; `false` when there was no live one.
    pub fn revoke_node_token(&self, gateway: &str) -> Result<bool, StoreError> {
        let n = self
            .conn()
            .execute(
                "UPDATE node_tokens SET revoked_at_ms = ?2 WHERE gateway = ?1 AND revoked_at_ms IS NULL",
                params![gateway, now_ms()],
            )
            .ctx("revoke node token")?;
        Ok(n > 0)
    }

    /// The gateway a live token of this hash was issued to.
    pub fn node_token_gateway(&self, hash: &str) -> Result<Option<String>, StoreError> {
        self.conn()
            .query_row(
                "SELECT gateway FROM node_tokens WHERE hash = ?1 AND revoked_at_ms IS NULL",
                [hash],
                |r| r.get(0),
            )
            .optional()
            .ctx("look up node token")
    }

    pub fn node_tokens(&self) -> Result<Vec<NodeTokenRow>, StoreError> {
        let conn = self.conn();
        let mut st = conn
            .prepare(
                "SELECT gateway, created_at_ms, revoked_at_ms FROM node_tokens ORDER BY gateway",
            )
            .ctx("list node tokens")?;
        let rows = st
            .query_map([], |r| {
                Ok(NodeTokenRow {
                    gateway: r.get(0)?,
                    created_at_ms: r.get(1)?,
                    revoked_at_ms: r.get(2)?,
                })
            })
            .ctx("list node tokens")?;
        rows.collect::<Result<_, _>>().ctx("list node tokens")
    }

    /// Adds or replaces the pairing with node `row.name`.
    pub fn add_node(&self, row: &NodeRow) -> Result<(), StoreError> {
        self.conn()
            .execute(
                "INSERT INTO nodes (name, url, fingerprint, token, added_at_ms) VALUES (?1, ?2, ?3, ?4, ?5)
                 ON CONFLICT(name) DO UPDATE SET url = ?2, fingerprint = ?3, token = ?4, added_at_ms = ?5",
                params![row.name, row.url, row.fingerprint, row.token, row.added_at_ms],
            )
            .ctx("record node")?;
        Ok(())
    }

    /// Forgets node `name`; `false` when there was none.
    pub fn remove_node(&self, name: &str) -> Result<bool, StoreError> {
        let n = self
            .conn()
            .execute("DELETE FROM nodes WHERE name = ?1", [name])
            .ctx("remove node")?;
        Ok(n > 0)
    }

    pub fn node(&self, name: &str) -> Result<Option<NodeRow>, StoreError> {
        self.conn()
            .query_row(
                "SELECT name, url, fingerprint, token, added_at_ms FROM nodes WHERE name = ?1",
                [name],
                node_row,
            )
            .optional()
            .ctx("look up node")
    }

    /// Sets (`Some`) or clears (`None`) session `key`'s default node.
    pub fn set_session_node(&self, key: &str, node: Option<&str>) -> Result<(), StoreError> {
        let conn = self.conn();
        match node {
            Some(n) => conn.execute(
                "INSERT INTO session_node (key, node) VALUES (?1, ?2)
                 ON CONFLICT(key) DO UPDATE SET node = ?2",
                params![key, n],
            ),
            None => conn.execute("DELETE FROM session_node WHERE key = ?1", [key]),
        }
        .ctx("record a session's node")?;
        Ok(())
    }

    /// Session `key`'s default node, when its operator set one.
    pub fn session_node(&self, key: &str) -> Result<Option<String>, StoreError> {
        self.conn()
            .query_row("SELECT node FROM session_node WHERE key = ?1", [key], |r| {
                r.get(0)
            })
            .optional()
            .ctx("read a session's node")
    }

    pub fn nodes(&self) -> Result<Vec<NodeRow>, StoreError> {
        let conn = self.conn();
        let mut st = conn
            .prepare("SELECT name, url, fingerprint, token, added_at_ms FROM nodes ORDER BY name")
            .ctx("list nodes")?;
        let rows = st.query_map([], node_row).ctx("list nodes")?;
        rows.collect::<Result<_, _>>().ctx("list nodes")
    }
}

fn node_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<NodeRow> {
    Ok(NodeRow {
        name: r.get(0)?,
        url: r.get(1)?,
        fingerprint: r.get(2)?,
        token: r.get(3)?,
        added_at_ms: r.get(4)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_issue_revoke_and_reissue() {
        let s = Store::in_memory().unwrap();
        s.issue_node_token("gw", "h1").unwrap();
        assert_eq!(s.node_token_gateway("h1").unwrap().as_deref(), Some("gw"));
        assert!(s.revoke_node_token("gw").unwrap());
        assert!(!s.revoke_node_token("gw").unwrap());
        assert_eq!(s.node_token_gateway("h1").unwrap(), None);
        s.issue_node_token("gw", "h2").unwrap();
        assert_eq!(s.node_token_gateway("h1").unwrap(), None);
        assert_eq!(s.node_token_gateway("h2").unwrap().as_deref(), Some("gw"));
        assert_eq!(s.node_tokens().unwrap().len(), 1);
    }

    #[test]
    fn a_sessions_node_set_replaced_and_cleared() {
        let s = Store::in_memory().unwrap();
        assert_eq!(s.session_node("main").unwrap(), None);
        s.set_session_node("main", Some("n1")).unwrap();
        s.set_session_node("main", Some("n2")).unwrap();
        assert_eq!(s.session_node("main").unwrap().as_deref(), Some("n2"));
        assert_eq!(s.session_node("other").unwrap(), None);
        s.set_session_node("main", None).unwrap();
        assert_eq!(s.session_node("main").unwrap(), None);
    }

    #[test]
    fn nodes_add_replace_remove() {
        let s = Store::in_memory().unwrap();
        let mut row = NodeRow {
            name: "n1".into(),
            url: "https://127.0.0.1:1".into(),
            fingerprint: "SHA256:00".into(),
            token: "t".into(),
            added_at_ms: 1,
        };
        s.add_node(&row).unwrap();
        row.url = "https://127.0.0.1:2".into();
        s.add_node(&row).unwrap();
        assert_eq!(s.node("n1").unwrap().unwrap().url, "https://127.0.0.1:2");
        assert_eq!(s.nodes().unwrap().len(), 1);
        assert!(s.remove_node("n1").unwrap());
        assert!(s.node("n1").unwrap().is_none());
    }
}
