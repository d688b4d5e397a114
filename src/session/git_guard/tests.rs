//! The guard of real checkouts made by the host's git.

use std::path::{Path, PathBuf};

use super::*;

/// Runs git in `dir` with no user or system config, failing the test on an error.
fn git(dir: &Path, args: &[&str]) {
    let out = std::process::Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@t"])
        .args([
            "-c",
            "protocol.file.allow=always",
            "-c",
            "init.defaultBranch=main",
        ])
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .output()
        .expect("git is needed for this test");
    assert!(
        out.status.success(),
        "git {args:?} in {}: {out:?}",
        dir.display()
    );
}

/// A repository at `dir` with one commit.
fn repo(dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    git(dir, &["init", "-q"]);
    std::fs::write(dir.join("README"), "x").unwrap();
    git(dir, &["add", "README"]);
    git(dir, &["commit", "-qm", "init"]);
}

fn paths(list: &[&str]) -> Vec<PathBuf> {
    list.iter().map(PathBuf::from).collect()
}

fn real(p: &Path) -> PathBuf {
    std::fs::canonicalize(p).unwrap()
}

#[test]
fn no_repository_means_nothing_to_guard_and_a_plain_one_its_git_directory() {
    let dir = tempfile::tempdir().unwrap();
    let ws = real(dir.path());
    assert!(scan(&ws).unwrap().is_empty());
    repo(&ws);
    let g = scan(&ws).unwrap();
    assert_eq!(g.read_only, paths(&[".git"]));
    assert!(g.pins.is_empty());
    let m = g.mounts(&ws);
    assert_eq!(m.len(), 1);
    assert_eq!(m[0].source, ws.join(".git").display().to_string());
    assert_eq!(m[0].target, "/workspace/.git");
    assert!(m[0].read_only);
    assert_eq!(g.read_only_paths(&ws), vec![ws.join(".git")]);
    assert_eq!(g.fingerprint(), "ro .git\n");
}

#[test]
fn submodules_are_pinned_and_their_git_read_only_checked_out_or_not() {
    let dir = tempfile::tempdir().unwrap();
    let root = real(dir.path());
    let (lib, ext, ws) = (root.join("lib"), root.join("ext"), root.join("ws"));
    repo(&lib);
    repo(&ext);
    repo(&ws);
    git(&ws, &["submodule", "add", "-q", "../lib", "vendor/lib"]);
    git(&ws, &["submodule", "add", "-q", "../ext", "ext"]);
    git(&ws, &["commit", "-qm", "subs"]);
    // `ext` not checked out: its directory stays, empty.
    git(&ws, &["submodule", "deinit", "-q", "ext"]);
    // An embedded repository added as a gitlink, its `.git` a directory in the work tree.
    repo(&ws.join("tools/own"));
    git(&ws, &["add", "tools/own"]);
    let g = scan(&ws).unwrap();
    assert_eq!(
        g.read_only,
        paths(&[".git", "ext", "tools/own/.git", "vendor/lib/.git"])
    );
    assert_eq!(
        g.pins,
        paths(&["tools", "vendor", "tools/own", "vendor/lib"])
    );
}

#[test]
fn a_linked_worktree_guards_its_git_file_and_what_the_config_names() {
    let dir = tempfile::tempdir().unwrap();
    let root = real(dir.path());
    let main = root.join("main");
    repo(&main);
    git(&main, &["worktree", "add", "-q", "../wt"]);
    let wt = root.join("wt");
    // The git directory is the main checkout's, out of the workspace: only the file.
    let g = scan(&wt).unwrap();
    assert_eq!(g.read_only, paths(&[".git"]));
    // A hooks path in the shared config points into each work tree: guarded there too.
    git(&main, &["config", "core.hooksPath", ".husky/_"]);
    let e = scan(&wt).unwrap_err().to_string();
    assert!(
        e.contains("core.hooksPath") && e.contains(".husky/_"),
        "{e}"
    );
    assert!(e.contains("--git-writable"), "{e}");
    std::fs::create_dir_all(wt.join(".husky/_")).unwrap();
    let g = scan(&wt).unwrap();
    assert_eq!(g.read_only, paths(&[".git", ".husky/_"]));
    assert_eq!(g.pins, paths(&[".husky"]));
    // A linked worktree kept inside the main checkout has its `.git` file guarded there.
    git(&main, &["worktree", "add", "-q", "inner"]);
    std::fs::create_dir_all(main.join(".husky/_")).unwrap();
    let g = scan(&main).unwrap();
    assert_eq!(g.read_only, paths(&[".git", ".husky/_", "inner/.git"]));
    assert_eq!(g.pins, paths(&[".husky", "inner"]));
}

#[test]
fn includes_inside_are_guarded_and_outside_ones_left() {
    let dir = tempfile::tempdir().unwrap();
    let ws = real(dir.path()).join("ws");
    repo(&ws);
    git(&ws, &["config", "include.path", "../../shared.inc"]);
    assert_eq!(scan(&ws).unwrap().read_only, paths(&[".git"]));
    git(
        &ws,
        &["config", "--add", "include.path", "../conf/repo.inc"],
    );
    let e = scan(&ws).unwrap_err().to_string();
    assert!(
        e.contains("include.path") && e.contains("conf/repo.inc"),
        "{e}"
    );
    std::fs::create_dir_all(ws.join("conf")).unwrap();
    std::fs::write(ws.join("conf/repo.inc"), "").unwrap();
    let g = scan(&ws).unwrap();
    assert_eq!(g.read_only, paths(&[".git", "conf/repo.inc"]));
    assert_eq!(g.pins, paths(&["conf"]));
}

#[test]
fn symbolic_links_are_refused_wherever_git_would_follow_them() {
    let dir = tempfile::tempdir().unwrap();
    let root = real(dir.path());
    let elsewhere = root.join("secret");
    std::fs::create_dir_all(&elsewhere).unwrap();
    // `.git` itself a link (to a directory moat must not mount into the sandbox).
    let ws = root.join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    std::os::unix::fs::symlink(&elsewhere, ws.join(".git")).unwrap();
    let e = scan(&ws).unwrap_err();
    assert!(matches!(e, GuardError::Symlink { .. }), "{e}");
    assert!(e.to_string().contains("ws/.git"), "{e}");
    // A hooks path through a link inside the workspace.
    let ws = root.join("ws2");
    repo(&ws);
    std::os::unix::fs::symlink(&elsewhere, ws.join(".husky")).unwrap();
    git(&ws, &["config", "core.hooksPath", ".husky/_"]);
    let e = scan(&ws).unwrap_err();
    assert!(matches!(e, GuardError::Symlink { .. }), "{e}");
    // A submodule directory swapped for a link.
    let ws = root.join("ws3");
    repo(&root.join("lib"));
    repo(&ws);
    git(&ws, &["submodule", "add", "-q", "../lib", "lib"]);
    std::fs::rename(ws.join("lib"), root.join("lib-moved")).unwrap();
    std::os::unix::fs::symlink(&elsewhere, ws.join("lib")).unwrap();
    assert!(matches!(scan(&ws).unwrap_err(), GuardError::Symlink { .. }));
    // Gone altogether: the sandbox could make a repository of its own there.
    std::fs::remove_file(ws.join("lib")).unwrap();
    let e = scan(&ws).unwrap_err().to_string();
    assert!(
        e.contains("submodule") && e.contains("does not exist"),
        "{e}"
    );
}

#[test]
fn a_gitdir_file_pointing_into_the_workspace_guards_that_directory() {
    let dir = tempfile::tempdir().unwrap();
    let ws = real(dir.path()).join("ws");
    repo(&ws);
    std::fs::rename(ws.join(".git"), ws.join("meta")).unwrap();
    std::fs::create_dir_all(ws.join("store")).unwrap();
    std::fs::rename(ws.join("meta"), ws.join("store/repo.git")).unwrap();
    std::fs::write(ws.join(".git"), "gitdir: store/repo.git\n").unwrap();
    let g = scan(&ws).unwrap();
    assert_eq!(g.read_only, paths(&[".git", "store/repo.git"]));
    assert_eq!(g.pins, paths(&["store"]));
    // Pointing at a directory that does not exist: refused, the sandbox could make it.
    std::fs::write(ws.join(".git"), "gitdir: store/other.git\n").unwrap();
    let e = scan(&ws).unwrap_err().to_string();
    assert!(
        e.contains("store/other.git") && e.contains("does not exist"),
        "{e}"
    );
    // `..` through a link is refused too.
    std::os::unix::fs::symlink("/tmp", ws.join("up")).unwrap();
    std::fs::write(ws.join(".git"), "gitdir: up/../store/repo.git\n").unwrap();
    assert!(matches!(scan(&ws).unwrap_err(), GuardError::Symlink { .. }));
}

/// The second hostile review: a tracked `.gitconfig` that `.git/config` includes, which in
/// turn includes an ignored `.gitconfig.local`: every file of the chain is read-only, and a
/// link of the chain that does not exist yet (the agent could create it) refuses the start.
#[test]
fn includes_are_followed_through_every_file_they_name() {
    let dir = tempfile::tempdir().unwrap();
    let ws = real(dir.path());
    repo(&ws);
    std::fs::write(
        ws.join(".gitconfig"),
        "[include]\n\tpath = .gitconfig.local\n",
    )
    .unwrap();
    let mut config = std::fs::read_to_string(ws.join(".git/config")).unwrap();
    config.push_str("[include]\n\tpath = ../.gitconfig\n");
    std::fs::write(ws.join(".git/config"), config).unwrap();
    let err = scan(&ws).unwrap_err().to_string();
    assert!(err.contains(".gitconfig.local"), "{err}");
    std::fs::write(ws.join(".gitconfig.local"), "[user]\n\tname = x\n").unwrap();
    let g = scan(&ws).unwrap();
    for want in [".git", ".gitconfig", ".gitconfig.local"] {
        assert!(g.read_only.contains(&PathBuf::from(want)), "{want}: {g:?}");
    }
    // config.worktree is read as well.
    std::fs::write(
        ws.join(".git/config.worktree"),
        "[core]\n\thooksPath = hooks\n",
    )
    .unwrap();
    let err = scan(&ws).unwrap_err().to_string();
    assert!(err.contains("hooks"), "{err}");
}

/// A gitlink whose path holds a file: git does not enter it, until the sandbox replaces it
/// with a repository of its own; so the file is read-only.
#[test]
fn a_gitlink_where_a_file_is_stays_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let ws = real(dir.path());
    repo(&ws);
    let head = std::process::Command::new("git")
        .args(["rev-parse", "HEAD"])
        .current_dir(&ws)
        .output()
        .unwrap();
    let sha = String::from_utf8(head.stdout).unwrap().trim().to_string();
    git(
        &ws,
        &[
            "update-index",
            "--add",
            "--cacheinfo",
            &format!("160000,{sha},sub"),
        ],
    );
    git(&ws, &["commit", "-qm", "gitlink"]);
    std::fs::write(ws.join("sub"), "not a dir\n").unwrap();
    let g = scan(&ws).unwrap();
    assert!(g.read_only.contains(&PathBuf::from("sub")), "{g:?}");
}
