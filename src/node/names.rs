//! Pairing names and the node's session keys for them (docs/nodes.md, "Sessions on the
//! node").

use super::NodeError;

/// The longest pairing name.
pub const MAX_NAME: usize = 32;

/// A pairing name (a node's on the gateway, a gateway's on the node): 1 to 32 of
/// `A-Z a-z 0-9 _ -`. No dot, so the node's session key below splits one way only.
pub fn check_name(name: &str) -> Result<(), NodeError> {
    let ok = !name.is_empty()
        && name.len() <= MAX_NAME
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if ok {
        Ok(())
    } else {
        Err(NodeError::BadName(crate::output::escape_display(
            &name.chars().take(64).collect::<String>(),
        )))
    }
}

/// The session on the node a gateway's session runs in: `node.GATEWAY.SESSION`, so each
/// gateway's sessions are apart from each other's and from the node's own agents. `None`
/// when the result is not a session key (too long).
pub fn node_session(gateway: &str, session: &str) -> Option<String> {
    let key = format!("node.{gateway}.{session}");
    crate::session_key::validate_key(&key).ok().map(|_| key)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        for ok in ["gw1", "build-box", "A_b-9", &"x".repeat(32)] {
            check_name(ok).unwrap();
        }
        for bad in ["", "a.b", "a b", "a/b", "é", &"x".repeat(33), "a\nb"] {
            assert!(check_name(bad).is_err(), "{bad:?}");
        }
        assert_eq!(node_session("gw", "agent1").unwrap(), "node.gw.agent1");
        assert!(node_session("gw", &"s".repeat(125)).is_none());
    }
}
