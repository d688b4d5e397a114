//! Where a sandbox can write, seen from the host (docs/security.md, "Directories a sandbox can
//! write").
//!
//! A host command that runs in such a directory, or names one in an operand (`git -C`,
//! `--git-dir=`, `make -f`, `tar -C`, …), reads content the agent controls: git hooks and
//! `core.*` settings (`core.fsmonitor`, `core.pager`, …), Makefiles, npm scripts and their kin
//! execute it. Such a command is never allowed by the allowlist alone nor by an allow-always
//! entry: it asks every time, with the reason this module gives.
//!
//! Which directories those are is not decided here: `session::Sessions::writable_roots` reads
//! them from what the engine says is mounted into the sandboxes, plus what moat hands in.

use std::path::{Path, PathBuf};

use crate::policy::parse_script;

use super::bound::lexical;

/// See the module docs.
#[derive(Debug, Clone, Default)]
pub struct WritableRoots {
    /// What each root is (for the reason) and the root, symlinks resolved when it exists.
    roots: Vec<(String, PathBuf)>,
    /// Set when moat could not learn every root (the engine did not answer): then any path
    /// may be one, so every run asks, saying why. Failing closed here costs an approval;
    /// failing open would run the agent's Makefile.
    unknown: Option<String>,
}

fn real(p: &Path) -> PathBuf {
    std::fs::canonicalize(p).unwrap_or_else(|_| lexical(Path::new("/"), p))
}

/// The magic directory `path` goes through, if any: `/proc/PID/root` reads as a link to `/`,
/// so resolving a path through it names a host path while the program opens the container's
/// file. A path under `/proc` or `/dev/fd` (as written, or through a symlink on the way) is
/// therefore never judged by where it seems to resolve.
fn through_magic(path: &Path) -> Option<PathBuf> {
    const MAGIC: &[&str] = &[
        "/proc",
        "/dev/fd",
        "/dev/stdin",
        "/dev/stdout",
        "/dev/stderr",
    ];
    let under = |p: &Path| {
        MAGIC
            .iter()
            .find(|m| p.starts_with(m))
            .map(|m| PathBuf::from(*m))
    };
    let written = lexical(Path::new("/"), path);
    if let Some(m) = under(&written) {
        return Some(m);
    }
    // A symlink on the way whose target is under one of them (at most 40 hops, as the
    // kernel follows).
    let mut hops = 0;
    let mut pending = vec![written];
    while let Some(p) = pending.pop() {
        for ancestor in p.ancestors() {
            let Ok(target) = std::fs::read_link(ancestor) else {
                continue;
            };
            hops += 1;
            if hops > 40 {
                return Some(PathBuf::from("/proc"));
            }
            let parent = ancestor.parent().unwrap_or(Path::new("/"));
            let target = lexical(parent, &target);
            if let Some(m) = under(&target) {
                return Some(m);
            }
            pending.push(target);
        }
    }
    None
}

impl WritableRoots {
    /// `roots`: (what it is, where it is). A root inside another is dropped (the outer one
    /// names it), as is a second entry for the same directory: the first description wins.
    pub fn new(roots: Vec<(String, PathBuf)>) -> Self {
        let resolved: Vec<(String, PathBuf)> = roots
            .into_iter()
            .map(|(what, p)| (what, real(&p)))
            .collect();
        let mut kept: Vec<(String, PathBuf)> = Vec::new();
        for (i, (what, root)) in resolved.iter().enumerate() {
            let covered = resolved
                .iter()
                .enumerate()
                .any(|(j, (_, other))| root.starts_with(other) && (root != other || j < i));
            if !covered {
                kept.push((what.clone(), root.clone()));
            }
        }
        Self {
            roots: kept,
            unknown: None,
        }
    }

    /// `roots`, and `why` moat could not learn the others: every run asks.
    pub fn incomplete(roots: Vec<(String, PathBuf)>, why: String) -> Self {
        Self {
            unknown: Some(why),
            ..Self::new(roots)
        }
    }

    /// The roots, outermost only, each with what it is.
    pub fn roots(&self) -> &[(String, PathBuf)] {
        &self.roots
    }

    /// Whether `path` lies in a directory a sandbox can write (for tests; the gate calls
    /// [`Self::reason`]).
    #[cfg(test)]
    pub(crate) fn contains(&self, path: &Path) -> bool {
        self.containing(path).is_some()
    }

    fn containing(&self, path: &Path) -> Option<(String, PathBuf)> {
        if let Some(magic) = through_magic(path) {
            return Some((
                "/proc or /dev/fd, through whose links every container's files are reachable \
                 (/proc/PID/root, /proc/PID/cwd)"
                    .to_owned(),
                magic,
            ));
        }
        let path = real(path);
        self.roots
            .iter()
            .find(|(_, root)| path.starts_with(root))
            .cloned()
    }

    /// Why running `plan` in `cwd` touches a directory a sandbox can write, if it does.
    pub fn reason(&self, cwd: &Path, plan: &str) -> Option<String> {
        let why = "programs run content found there (git hooks and core.* settings such as \
                   core.fsmonitor, Makefiles, npm scripts), so every run needs an operator";
        if let Some(unknown) = &self.unknown {
            return Some(format!(
                "moat could not learn every directory a sandbox can write ({}), so any directory may be one: {why}",
                crate::output::escape_display(unknown)
            ));
        }
        if let Some((what, root)) = self.containing(cwd) {
            return Some(format!(
                "the workdir {} is inside {what} ({}), which a sandbox can write: {why}",
                crate::output::escape_display(&cwd.display().to_string()),
                crate::output::escape_display(&root.display().to_string())
            ));
        }
        for word in words(plan) {
            if word.contains('$') || word.contains('`') {
                return Some(format!(
                    "`{}` has an expansion moat cannot resolve, so it may name a directory a sandbox can write: {why}",
                    crate::output::escape_display(&word)
                ));
            }
            for candidate in candidates(&word) {
                let path = Path::new(candidate);
                let hit = if path.is_absolute() || candidate.contains('/') {
                    true
                } else {
                    cwd.join(path).symlink_metadata().is_ok()
                };
                if !hit {
                    continue;
                }
                let full = lexical(cwd, path);
                if let Some((what, root)) = self.containing(&full) {
                    return Some(format!(
                        "`{}` names {}, inside {what} ({}), which a sandbox can write: {why}",
                        crate::output::escape_display(&word),
                        crate::output::escape_display(&full.display().to_string()),
                        crate::output::escape_display(&root.display().to_string())
                    ));
                }
            }
        }
        None
    }
}

/// The words of `plan` after quote removal, and the pieces of each word split at blanks and
/// shell operators (inline code such as `sh -c 'git -C /x status'` is one word); for parts the
/// parser does not model, the raw text split the same way, so nothing is skipped.
fn words(plan: &str) -> Vec<String> {
    let script = parse_script(plan);
    let mut whole: Vec<String> = Vec::new();
    for s in &script.segments {
        if s.miss.is_some() {
            whole.push(s.raw.clone());
        } else {
            whole.extend(s.argv.iter().cloned());
        }
    }
    if script.miss.is_some() {
        whole.push(plan.to_string());
    }
    let mut out = Vec::new();
    for w in whole {
        let pieces: Vec<String> = w
            .split(|c: char| c.is_whitespace() || ";|&()<>".contains(c))
            .map(|p| p.replace(['\'', '"'], ""))
            .filter(|p| !p.is_empty())
            .collect();
        if pieces.len() != 1 || pieces[0] != w {
            out.push(w);
        }
        out.extend(pieces);
    }
    out
}

/// The paths a word may name: itself, the value of `--opt=value`, and the attached value of a
/// short option (`-C/x`, `-f./Makefile`).
fn candidates(word: &str) -> Vec<&str> {
    let mut out = Vec::new();
    if !word.starts_with('-') {
        if !word.is_empty() {
            out.push(word);
        }
        return out;
    }
    if let Some((_, v)) = word.split_once('=') {
        if !v.is_empty() {
            out.push(v);
        }
    }
    if !word.starts_with("--") && word.len() > 2 && word.is_char_boundary(2) {
        let rest = &word[2..];
        if rest.starts_with('/') || rest.starts_with('.') || rest.starts_with('~') {
            out.push(rest);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nested_and_repeated_roots_keep_the_outer_first_one_and_unknown_asks() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        std::fs::create_dir_all(ws.join("vendor")).unwrap();
        let roots = WritableRoots::new(vec![
            ("the pin".into(), ws.join("vendor")),
            ("the workspace".into(), ws.clone()),
            ("the bind".into(), ws.clone()),
        ]);
        let real_ws = std::fs::canonicalize(&ws).unwrap();
        assert_eq!(roots.roots(), &[("the workspace".to_string(), real_ws)]);
        assert!(roots.contains(&ws.join("vendor/x")));
        assert!(!roots.contains(dir.path()));
        let unknown = WritableRoots::incomplete(Vec::new(), "the engine is down".into());
        let r = unknown.reason(dir.path(), "ls").unwrap();
        assert!(
            r.contains("the engine is down") && r.contains("core.fsmonitor"),
            "{r}"
        );
    }

    #[test]
    fn workdirs_and_operands_inside_writable_roots_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("workspaces");
        let safe = dir.path().join("host-work");
        std::fs::create_dir_all(ws.join("main/.git")).unwrap();
        std::fs::create_dir_all(&safe).unwrap();
        std::os::unix::fs::symlink(ws.join("main"), safe.join("link")).unwrap();
        let roots = WritableRoots::new(vec![("the sandbox workspaces".into(), ws.clone())]);
        let main = ws.join("main");
        let m = main.display().to_string();
        let rows: Vec<(PathBuf, String, Option<&str>)> = vec![
            (safe.clone(), "git status".into(), None),
            (safe.clone(), "ls /tmp".into(), None),
            (main.clone(), "git status".into(), Some("the workdir")),
            (ws.join("main/.git"), "true".into(), Some("the workdir")),
            (safe.clone(), format!("git -C {m} status"), Some("names")),
            (
                safe.clone(),
                format!("git --git-dir={m}/.git status"),
                Some("names"),
            ),
            (
                safe.clone(),
                format!("tar -C{m} -cf /tmp/x ."),
                Some("names"),
            ),
            (safe.clone(), format!("make -f {m}/Makefile"), Some("names")),
            (safe.clone(), "git -C link status".into(), Some("names")),
            (
                safe.clone(),
                format!("git -C {m}/../main/x status"),
                Some("names"),
            ),
            (safe.clone(), "git -C $WS status".into(), Some("expansion")),
            (safe.clone(), format!("ls {m} && echo $(id)"), Some("names")),
            (
                safe.clone(),
                format!("sh -c 'git -C {m} status'"),
                Some("names"),
            ),
            (safe.clone(), format!("sh -c 'cd {m};make'"), Some("names")),
        ];
        for (cwd, plan, want) in rows {
            match (roots.reason(&cwd, &plan), want) {
                (None, None) => {}
                (Some(r), Some(w)) => {
                    assert!(r.contains(w), "{plan}: {r}");
                    assert!(r.contains("a sandbox can write"), "{r}");
                    assert!(r.contains("core.fsmonitor"), "{r}");
                }
                (got, w) => panic!("{plan} in {}: got {got:?}, want {w:?}", cwd.display()),
            }
        }
    }
}
