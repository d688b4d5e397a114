//! PATH on the host: the operator's login-shell PATH (probed once per moat process) merged in
//! front of moat's own, and name resolution over it for the policy engine.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

use tokio::sync::OnceCell;

use crate::policy::MapResolver;

/// The login PATH, or `None` when the probe failed; cached, failures included, so a broken
/// profile costs one timeout per moat process and not one per command.
static LOGIN_PATH: OnceCell<Option<String>> = OnceCell::const_new();
const PROBE_TIMEOUT: Duration = Duration::from_secs(15);

/// The login shell's PATH: `$SHELL -l -c 'env -0'` when `$SHELL` is an absolute path listed in
/// /etc/shells, else `/bin/sh`. The probe itself runs with the inherited allowlist (no operator
/// additions) and moat's own PATH, so a profile can extend it.
pub async fn login_path() -> Option<String> {
    LOGIN_PATH
        .get_or_init(|| async { probe().await })
        .await
        .clone()
}

async fn probe() -> Option<String> {
    let shell = std::env::var("SHELL")
        .ok()
        .filter(|s| listed_shell(s))
        .unwrap_or_else(|| "/bin/sh".into());
    let env = super::env::inherited(std::env::vars(), &[]);
    let own = std::env::var("PATH").unwrap_or_else(|_| "/usr/bin:/bin".into());
    let child = tokio::process::Command::new(&shell)
        .args(["-l", "-c", "env -0"])
        .env_clear()
        .envs(env.iter())
        .env("PATH", own)
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(PROBE_TIMEOUT, child)
        .await
        .ok()?
        .ok()?;
    out.stdout
        .split(|b| *b == 0)
        .filter_map(|kv| std::str::from_utf8(kv).ok())
        .find_map(|kv| kv.strip_prefix("PATH=").map(str::to_string))
        .filter(|p| !p.is_empty())
}

fn listed_shell(shell: &str) -> bool {
    if !shell.starts_with('/') || shell.contains("/./") || shell.contains("/../") {
        return false;
    }
    std::fs::read_to_string("/etc/shells")
        .map(|list| list.lines().any(|l| l.trim() == shell))
        .unwrap_or(false)
}

/// `first` entries, then those of `rest` not already present; empty entries dropped.
pub fn merge(first: &[String], rest: &[String]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for d in first.iter().chain(rest) {
        if !d.is_empty() && !out.contains(d) {
            out.push(d.clone());
        }
    }
    out
}

pub fn split(path: &str) -> Vec<String> {
    path.split(':').map(str::to_string).collect()
}

/// Resolves bare names by walking `dirs` for an executable regular file, as `execvp` would.
pub fn resolve(names: &[String], dirs: &[String]) -> MapResolver {
    let mut resolver = MapResolver::new();
    for name in names {
        if name.contains('/') {
            continue;
        }
        let hit = dirs.iter().filter(|d| d.starts_with('/')).find_map(|d| {
            let p = Path::new(d).join(name);
            let meta = std::fs::metadata(&p).ok()?;
            (meta.is_file() && meta.permissions().mode() & 0o111 != 0)
                .then(|| p.display().to_string())
        });
        if let Some(path) = hit {
            resolver = resolver.with(name.clone(), path);
        }
    }
    resolver
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::Resolver;

    #[test]
    fn merge_keeps_order_and_drops_duplicates() {
        let login = split("/custom/bin:/opt/bin");
        let own = split("/usr/bin:/custom/bin::");
        assert_eq!(merge(&login, &own), ["/custom/bin", "/opt/bin", "/usr/bin"]);
    }

    #[test]
    fn resolve_walks_dirs_in_order() {
        let a = tempfile::tempdir().unwrap();
        let b = tempfile::tempdir().unwrap();
        for (dir, mode) in [(&a, 0o644), (&b, 0o755)] {
            let p = dir.path().join("tool");
            std::fs::write(&p, "").unwrap();
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
        }
        let dirs = vec![
            "relative".to_string(),
            a.path().display().to_string(),
            b.path().display().to_string(),
        ];
        let r = resolve(&["tool".into(), "missing".into()], &dirs);
        let want = b.path().join("tool").display().to_string();
        assert_eq!(r.resolve("tool").as_deref(), Some(want.as_str()));
        assert_eq!(r.resolve("missing"), None);
    }

    #[tokio::test]
    async fn login_path_is_probed() {
        let p = login_path().await;
        assert!(p.is_some_and(|p| p.contains("/bin")));
    }
}
