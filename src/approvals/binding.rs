//! What an approval is bound to: the exact plan an operator saw. Before an approved plan runs,
//! moat prepares the run again and compares; any difference refuses the run.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::contract::ApprovalTarget;
use crate::policy::Evaluation;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Binding {
    /// Where it runs (`sandbox`, `host` or `host-full`; `network` for a connection).
    pub target: ApprovalTarget,
    /// The text that runs.
    pub plan: String,
    /// Each segment's argv after quote removal.
    pub argv: Vec<Vec<String>>,
    /// Each segment's resolved executable (after unwrapping wrappers), if any.
    pub resolved: Vec<Option<String>>,
    pub cwd: String,
    /// SHA-256 over the sorted `KEY=VALUE` entries of the command's environment.
    pub env_hash: String,
    /// The same sorted entries as shown to operators, secret values replaced by
    /// `[REDACTED:NAME]`: built in the same pass as `env_hash`, so nothing the hash covers is
    /// left out of what the operator reads. Empty in approvals stored before it existed.
    #[serde(default)]
    pub env: Vec<String>,
    /// Files the plan runs (a script operand, a program named by path), bound by content:
    /// what runs is a private copy whose hash must equal the approved one.
    #[serde(default)]
    pub files: Vec<BoundFile>,
}

/// One file an approval binds by content.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BoundFile {
    /// The word as written in the command (`build.sh`, `./run.sh`).
    pub operand: String,
    /// The absolute path it was read from.
    pub path: String,
    /// SHA-256 of the content, hex.
    pub sha256: String,
    /// Size in bytes.
    pub size: u64,
}

impl Binding {
    /// `redact` turns a value into what operators may see (secrets replaced).
    pub fn new(
        target: ApprovalTarget,
        plan: &str,
        eval: &Evaluation,
        cwd: &str,
        env: &[String],
        redact: &dyn Fn(&str) -> String,
        files: Vec<BoundFile>,
    ) -> Self {
        let (env_hash, env) = hash_and_show(env, redact);
        Self {
            target,
            plan: plan.to_string(),
            argv: eval.segments.iter().map(|s| s.argv.clone()).collect(),
            resolved: eval.segments.iter().map(|s| s.resolved.clone()).collect(),
            cwd: cwd.to_string(),
            env_hash,
            env,
            files,
        }
    }

    /// The first part of `self` that `other` changes, by name.
    pub fn difference(&self, other: &Binding) -> Option<String> {
        if self.target != other.target {
            Some("target".into())
        } else if self.argv != other.argv || self.plan != other.plan {
            Some("argv".into())
        } else if self.resolved != other.resolved {
            Some("resolved executable".into())
        } else if self.cwd != other.cwd {
            Some("cwd".into())
        } else if self.env_hash != other.env_hash || self.env != other.env {
            Some("env".into())
        } else if self.files.len() != other.files.len() {
            Some("files".into())
        } else {
            self.files
                .iter()
                .zip(&other.files)
                .find(|(a, b)| a != b)
                .map(|(a, _)| format!("content of {}", crate::output::escape_display(&a.operand)))
        }
    }
}

/// The hash and the shown list, from one sorted pass over `env`.
fn hash_and_show(env: &[String], redact: &dyn Fn(&str) -> String) -> (String, Vec<String>) {
    let mut sorted: Vec<&String> = env.iter().collect();
    sorted.sort();
    let mut h = Sha256::new();
    let mut shown = Vec::with_capacity(sorted.len());
    for kv in sorted {
        h.update(kv.as_bytes());
        h.update([0u8]);
        shown.push(match kv.split_once('=') {
            Some((k, v)) => format!("{k}={}", redact(v)),
            None => redact(kv),
        });
    }
    (hex::encode(h.finalize()), shown)
}

/// SHA-256 over the sorted `KEY=VALUE` entries.
pub fn env_hash(env: &[String]) -> String {
    hash_and_show(env, &|v| v.to_string()).0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(plan: &str, cwd: &str, env: &[&str], resolved: Option<&str>) -> Binding {
        let env: Vec<String> = env.iter().map(|s| s.to_string()).collect();
        let (env_hash, env) = hash_and_show(&env, &|v| v.replace("s3cr3t", "[REDACTED:T]"));
        Binding {
            target: ApprovalTarget::Host,
            plan: plan.into(),
            argv: vec![plan.split(' ').map(str::to_string).collect()],
            resolved: vec![resolved.map(str::to_string)],
            cwd: cwd.into(),
            env_hash,
            env,
            files: vec![],
        }
    }

    fn file(sha: &str) -> BoundFile {
        BoundFile {
            operand: "build.sh".into(),
            path: "/w/build.sh".into(),
            sha256: sha.into(),
            size: 3,
        }
    }

    #[test]
    fn every_part_is_bound() {
        let base = b("ls -l", "/w", &["A=1", "B=2"], Some("/usr/bin/ls"));
        let with = |f: Vec<BoundFile>| Binding {
            files: f,
            ..base.clone()
        };
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
            (with(vec![file("aa")]), Some("files")),
        ];
        for (other, want) in rows {
            assert_eq!(base.difference(&other).as_deref(), want, "{other:?}");
        }
        let approved = with(vec![file("aa")]);
        assert_eq!(
            approved.difference(&with(vec![file("bb")])).as_deref(),
            Some("content of build.sh")
        );
        assert_eq!(approved.difference(&with(vec![file("aa")])), None);
    }

    #[test]
    fn the_shown_env_is_what_the_hash_covers_with_secrets_redacted() {
        let a = b(
            "x",
            "/w",
            &["TOKEN=s3cr3t", "LANG=C", "PATH=/usr/bin"],
            None,
        );
        assert_eq!(a.env, ["LANG=C", "PATH=/usr/bin", "TOKEN=[REDACTED:T]"]);
        assert_eq!(
            a.env_hash,
            env_hash(&[
                "PATH=/usr/bin".into(),
                "TOKEN=s3cr3t".into(),
                "LANG=C".into()
            ])
        );
        // A different secret value changes the hash.
        let other = b(
            "x",
            "/w",
            &["TOKEN=s3cr3tX", "LANG=C", "PATH=/usr/bin"],
            None,
        );
        assert_ne!(a.env_hash, other.env_hash);
    }
}
