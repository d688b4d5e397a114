//! The container a session key lives in, and the names derived from it (the key's own rule
//! is `crate::session_key`).

use sha2::{Digest, Sha256};

use crate::config::Scope;

/// Which container a session lives in, by scope: the session key itself, the agent part of
/// it (before the first `:`), or one key for everybody.
pub fn container_key(session: &str, scope: Scope) -> String {
    match scope {
        Scope::Session => session.to_string(),
        Scope::Agent => format!("agent:{}", session.split(':').next().unwrap_or(session)),
        Scope::Shared => "shared".to_string(),
    }
}

/// The names derived from a container key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerName {
    /// `<slug>-<hash8>`: unique and filesystem-safe; names the workspace and run directories.
    pub slug: String,
    /// `moat-<slug>-<hash8>`, at most 63 characters (the engine's DNS-label limit).
    pub name: String,
}

impl ContainerName {
    /// Names for `key` in the moat whose home is `home`: two moats (two `MOAT_HOME`s) on one
    /// engine never share, or adopt, each other's containers.
    pub fn for_key(key: &str, home: &str) -> Self {
        let mut readable: String = key
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() {
                    c.to_ascii_lowercase()
                } else {
                    '-'
                }
            })
            .collect();
        readable.truncate(40);
        let readable = readable.trim_matches('-');
        let readable = if readable.is_empty() { "s" } else { readable };
        let mut hasher = Sha256::new();
        hasher.update(home.as_bytes());
        hasher.update([0]);
        hasher.update(key.as_bytes());
        let hash = hex::encode(hasher.finalize());
        let slug = format!("{readable}-{}", &hash[..8]);
        Self {
            name: format!("moat-{slug}"),
            slug,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_bounded_unique_and_stable() {
        let long = "Z".repeat(128);
        for key in ["main", "Main", "agent:main:1", &long, "...", "a.b"] {
            let n = ContainerName::for_key(key, "/h");
            assert!(n.name.len() <= 63, "{}", n.name);
            assert!(n.name.starts_with("moat-"));
            assert!(n
                .slug
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-'));
            assert_eq!(n, ContainerName::for_key(key, "/h"));
        }
        // Keys differing only in case or punctuation still get different names.
        assert_ne!(
            ContainerName::for_key("Main", "/h").name,
            ContainerName::for_key("main", "/h").name
        );
        assert_ne!(
            ContainerName::for_key("a.b", "/h").name,
            ContainerName::for_key("a-b", "/h").name
        );
    }

    #[test]
    fn homes_do_not_share_containers() {
        assert_ne!(
            ContainerName::for_key("main", "/h").name,
            ContainerName::for_key("main", "/g").name
        );
    }

    #[test]
    fn scopes() {
        assert_eq!(
            container_key("agent1:chat:7", Scope::Session),
            "agent1:chat:7"
        );
        assert_eq!(container_key("agent1:chat:7", Scope::Agent), "agent:agent1");
        assert_eq!(container_key("agent1:chat:7", Scope::Shared), "shared");
    }
}
