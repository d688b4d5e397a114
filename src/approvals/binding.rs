//! What an approval is bound to: the exact plan an operator saw. Before an approved plan runs,
//! moat prepares the run again and compares; any difference refuses the run.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::policy::Evaluation;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Binding {
    /// Where it runs: `sandbox`, `host` or `host-full`.
    pub target: String,
    /// The text that runs.
    pub plan: String,
    /// Each segment's argv after quote removal.
    pub argv: Vec<Vec<String>>,
    /// Each segment's resolved executable (after unwrapping wrappers), if any.
    pub resolved: Vec<Option<String>>,
    pub cwd: String,
    /// SHA-256 over the sorted `KEY=VALUE` entries of the command's environment.
    pub env_hash: String,
}

impl Binding {
    pub fn new(target: &str, plan: &str, eval: &Evaluation, cwd: &str, env: &[String]) -> Self {
        Self {
            target: target.to_string(),
            plan: plan.to_string(),
            argv: eval.segments.iter().map(|s| s.argv.clone()).collect(),
            resolved: eval.segments.iter().map(|s| s.resolved.clone()).collect(),
            cwd: cwd.to_string(),
            env_hash: env_hash(env),
        }
    }

    /// The first part of `self` that `other` changes, by name.
    pub fn difference(&self, other: &Binding) -> Option<&'static str> {
        if self.target != other.target {
            Some("target")
        } else if self.argv != other.argv || self.plan != other.plan {
            Some("argv")
        } else if self.resolved != other.resolved {
            Some("resolved executable")
        } else if self.cwd != other.cwd {
            Some("cwd")
        } else if self.env_hash != other.env_hash {
            Some("env")
        } else {
            None
        }
    }
}

pub fn env_hash(env: &[String]) -> String {
    let mut sorted: Vec<&String> = env.iter().collect();
    sorted.sort();
    let mut h = Sha256::new();
    for kv in sorted {
        h.update(kv.as_bytes());
        h.update([0u8]);
    }
    hex::encode(h.finalize())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(plan: &str, cwd: &str, env: &[&str], resolved: Option<&str>) -> Binding {
        let env: Vec<String> = env.iter().map(|s| s.to_string()).collect();
        Binding {
            target: "host".into(),
            plan: plan.into(),
            argv: vec![plan.split(' ').map(str::to_string).collect()],
            resolved: vec![resolved.map(str::to_string)],
            cwd: cwd.into(),
            env_hash: env_hash(&env),
        }
    }

    #[test]
    fn every_part_is_bound() {
        let base = b("ls -l", "/w", &["A=1", "B=2"], Some("/usr/bin/ls"));
        let rows = [
            (b("ls -l", "/w", &["B=2", "A=1"], Some("/usr/bin/ls")), None),
            (
                b("ls -la", "/w", &["A=1", "B=2"], Some("/usr/bin/ls")),
                Some("argv"),
            ),
            (
                b("ls -l", "/tmp", &["A=1", "B=2"], Some("/usr/bin/ls")),
                Some("cwd"),
            ),
            (
                b("ls -l", "/w", &["A=1", "B=3"], Some("/usr/bin/ls")),
                Some("env"),
            ),
            (
                b("ls -l", "/w", &["A=1", "B=2"], Some("/tmp/ls")),
                Some("resolved executable"),
            ),
        ];
        for (other, want) in rows {
            assert_eq!(base.difference(&other), want, "{other:?}");
        }
    }
}
