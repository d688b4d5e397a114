//! The agent plants code in the operator's checkout for the operator's own git to run later
//! on the host (docs/security.md, "Host workspaces"), against the real engine and the host's
//! real git, through the `moat` binary: a pre-commit hook and `core.fsmonitor` in `.git`, a
//! submodule swapped for a repository of the agent's, `.git` written through moat's own file
//! tools. Each attack runs for real in a session created `--git-writable` first, where the
//! host's `git status` and `git commit` do run the planted code; in a default session the
//! plant fails (`Read-only file system`) and the host's git leaves no marker.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::cli_home::{stdout, text, unix_post, TestHome};

/// The uid:gid owning the checkouts, so the sandbox runs as it (as it would as a user).
const OWNER: (u32, u32) = (4321, 4322);

/// The host's git in `dir`, as the operator: no global or system config, the checkout
/// trusted although another uid owns it (as it is for its owner).
fn host_git(dir: &Path, args: &[&str]) -> Output {
    Command::new("git")
        .args([
            "-c",
            "safe.directory=*",
            "-c",
            "user.name=op",
            "-c",
            "user.email=op@x",
        ])
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
        .expect("git is needed for this test")
}

fn ok_git(dir: &Path, args: &[&str]) {
    let o = host_git(dir, args);
    assert!(o.status.success(), "git {args:?}: {}", text(&o));
}

/// A repository with one commit, owned by the test's user.
fn repo(dir: &Path) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    ok_git(dir, &["init", "-q"]);
    std::fs::write(dir.join("README"), "hello\n").unwrap();
    ok_git(dir, &["add", "README"]);
    ok_git(dir, &["commit", "-qm", "init"]);
    std::fs::canonicalize(dir).unwrap()
}

/// A checkout with one commit, owned by [`OWNER`].
fn checkout(dir: &Path) -> PathBuf {
    let dir = repo(dir);
    chown(&dir);
    dir
}

fn chown(dir: &Path) {
    let s = Command::new("chown")
        .args(["-R", &format!("{}:{}", OWNER.0, OWNER.1)])
        .arg(dir)
        .status()
        .unwrap();
    assert!(s.success());
}

/// What the agent runs to plant both: a pre-commit hook and an fsmonitor command, each
/// leaving a marker in `markers` when the host runs it. Each step reports how it went.
fn plant(markers: &Path) -> String {
    let m = markers.display();
    format!(
        "printf '#!/bin/sh\\ntouch {m}/pre-commit\\n' > .git/hooks/pre-commit && chmod +x .git/hooks/pre-commit && echo OK-hook; \
         git config core.fsmonitor 'touch {m}/fsmonitor #' && echo OK-fsmonitor; \
         mv .git .git-moved && echo OK-moved; \
         true"
    )
}

/// The operator's next `git status` and `git commit` on the host, in `dir`.
fn operator_works(dir: &Path) {
    ok_git(dir, &["status", "--short"]);
    std::fs::write(dir.join("NOTES"), "op\n").unwrap();
    ok_git(dir, &["add", "NOTES"]);
    ok_git(dir, &["commit", "-qm", "operator's commit"]);
}

fn exec(home: &TestHome, key: &str, command: &str) -> Output {
    home.run(&["exec", "--session", key, "--", command])
}

#[tokio::test]
async fn hooks_and_config_planted_in_git_never_run_on_the_host() {
    if common::engine().await.is_none() {
        return;
    }
    let home = TestHome::new("t-gp-hook");
    let work = tempfile::tempdir().unwrap();
    let markers = work.path().join("markers");
    std::fs::create_dir_all(&markers).unwrap();

    // Control: with --git-writable the plant succeeds, and the host's git runs both.
    let open = checkout(&work.path().join("open"));
    let key = home.key("open");
    let o = home.run(&[
        "sessions",
        "create",
        &key,
        "--workspace",
        &open.display().to_string(),
        "--git-writable",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(stdout(&o).contains("(git writable)"), "{}", text(&o));
    let o = exec(&home, &key, &plant(&markers));
    let out = stdout(&o);
    assert!(
        out.contains("OK-hook") && out.contains("OK-fsmonitor"),
        "{}",
        text(&o)
    );
    // (It could even move .git away; put it back for the operator.)
    assert!(out.contains("OK-moved"), "{}", text(&o));
    assert!(exec(&home, &key, "mv .git-moved .git").status.success());
    operator_works(&open);
    assert!(
        markers.join("fsmonitor").exists(),
        "the control's fsmonitor should have run"
    );
    assert!(
        markers.join("pre-commit").exists(),
        "the control's hook should have run"
    );
    for f in ["fsmonitor", "pre-commit"] {
        std::fs::remove_file(markers.join(f)).unwrap();
    }

    // By default .git is read-only in the sandbox: every plant fails.
    let guarded = checkout(&work.path().join("guarded"));
    let key = home.key("guarded");
    let o = home.run(&[
        "sessions",
        "create",
        &key,
        "--workspace",
        &guarded.display().to_string(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(stdout(&o).contains("(git read-only)"), "{}", text(&o));
    let o = exec(&home, &key, &plant(&markers));
    let out = stdout(&o);
    assert!(!out.contains("OK-"), "{}", text(&o));
    assert!(out.contains("Read-only file system"), "{}", text(&o));
    // Nor can it be removed or replaced; the rest of the checkout stays the agent's, and
    // git itself works for reading.
    let o = exec(
        &home,
        &key,
        "rm -rf .git 2>&1; ls .git/HEAD && echo data > data.txt && git log --oneline | wc -l",
    );
    assert!(stdout(&o).ends_with(".git/HEAD\n1\n"), "{}", text(&o));
    assert!(guarded.join("data.txt").exists());
    // moat's own file tools refuse it as well: they must not get round the mount.
    let socket = home.path().join("moat.sock");
    let body = r##"{"path":".git/hooks/pre-commit","content":"#!/bin/sh\ntouch /tmp/x\n"}"##;
    let (status, answer) = unix_post(&socket, &format!("/v1/sessions/{key}/files/write"), body);
    assert_eq!(status, 400, "{answer}");
    assert!(
        answer.contains("read-only") && answer.contains("--git-writable"),
        "{answer}"
    );
    assert!(!guarded.join(".git/hooks/pre-commit").exists());
    // The operator's git on the host runs nothing of the agent's.
    operator_works(&guarded);
    assert!(
        !markers.join("fsmonitor").exists(),
        "core.fsmonitor ran on the host"
    );
    assert!(
        !markers.join("pre-commit").exists(),
        "the planted hook ran on the host"
    );
    // Listed so, in text and JSON.
    let o = home.run(&["sessions", "list"]);
    assert!(
        stdout(&o).contains(&format!("{} (git rw)", open.display())),
        "{}",
        text(&o)
    );
    let o = home.run(&["sessions", "list", "--json"]);
    let rows: Vec<serde_json::Value> = serde_json::from_slice(&o.stdout).unwrap();
    let row = |k: &str| rows.iter().find(|r| r["session"] == k).unwrap().clone();
    assert_eq!(row(&home.key("open"))["gitWritable"], true);
    assert_eq!(row(&key)["gitWritable"], false);
    assert_eq!(row(&key)["hostWorkspace"], true);
}

#[tokio::test]
async fn a_submodule_cannot_be_swapped_for_a_repository_of_the_agents() {
    if common::engine().await.is_none() {
        return;
    }
    let home = TestHome::new("t-gp-sub");
    let work = tempfile::tempdir().unwrap();
    let markers = work.path().join("markers");
    std::fs::create_dir_all(&markers).unwrap();
    let lib = repo(&work.path().join("lib"));
    let with_submodule = |name: &str| {
        let top = repo(&work.path().join(name));
        ok_git(
            &top,
            &[
                "submodule",
                "add",
                "-q",
                &lib.display().to_string(),
                "vendor/lib",
            ],
        );
        ok_git(&top, &["commit", "-qm", "submodule"]);
        chown(&top);
        top
    };
    // The agent moves the submodule's checkout aside and makes a repository of its own in
    // its place, whose config the host's `git status` in the superproject obeys (it runs
    // git in every submodule to see whether it changed).
    let swap = format!(
        "mv vendor/lib vendor/lib-moved && echo OK-swapped; \
         mv vendor vendor-moved && echo OK-moved-parent; \
         mkdir -p vendor/lib && git init -q vendor/lib && git -C vendor/lib config core.fsmonitor 'touch {}/fsmonitor #' && echo OK-planted; \
         true",
        markers.display()
    );

    // Control: writable git metadata, and the swap works.
    let open = with_submodule("open");
    let key = home.key("open");
    let args = ["sessions", "create", &key, "--workspace"];
    let o = home
        .moat()
        .args(args)
        .arg(&open)
        .arg("--git-writable")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let o = exec(&home, &key, &swap);
    assert!(stdout(&o).contains("OK-planted"), "{}", text(&o));
    ok_git(&open, &["status", "--short"]);
    assert!(
        markers.join("fsmonitor").exists(),
        "the control's swap should have run"
    );
    std::fs::remove_file(markers.join("fsmonitor")).unwrap();

    // Guarded: the submodule and its parent are mount points, its .git read-only.
    let guarded = with_submodule("guarded");
    let key = home.key("guarded");
    let o = home
        .moat()
        .args(["sessions", "create", &key, "--workspace"])
        .arg(&guarded)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let o = exec(&home, &key, &swap);
    let out = stdout(&o);
    assert!(!out.contains("OK-"), "{}", text(&o));
    assert!(out.contains("Device or resource busy"), "{}", text(&o));
    // The submodule's files are still the agent's to change.
    let o = exec(
        &home,
        &key,
        "echo change >> vendor/lib/README && echo edited",
    );
    assert!(stdout(&o).contains("edited"), "{}", text(&o));
    ok_git(&guarded, &["status", "--short"]);
    assert!(
        !markers.join("fsmonitor").exists(),
        "the agent's repository ran on the host"
    );
}

#[tokio::test]
async fn a_git_directory_moat_cannot_guard_refuses_the_session_naming_the_way_out() {
    if common::engine().await.is_none() {
        return;
    }
    let home = TestHome::new("t-gp-link");
    let work = tempfile::tempdir().unwrap();
    let real = checkout(&work.path().join("real"));
    let ws = work.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    std::os::unix::fs::symlink(real.join(".git"), ws.join(".git")).unwrap();
    chown(&ws);
    let key = home.key("s");
    let o = home
        .moat()
        .args(["sessions", "create", &key, "--workspace"])
        .arg(&ws)
        .output()
        .unwrap();
    assert!(!o.status.success(), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("symbolic link") && err.contains("--git-writable"),
        "{err}"
    );
    assert!(home.containers(&key).is_empty(), "nothing was started");
}

/// The second hostile review: `.git/config` includes a tracked `.gitconfig`, which includes
/// `.gitconfig.local` (ignored, a common local-overrides pattern). The agent writes
/// `core.fsmonitor` into the last link; the operator's `git status` ran it. Now every file of
/// the chain is read-only. Control: with --git-writable the same plant runs on the host.
#[tokio::test]
async fn a_config_included_through_another_include_is_read_only_too() {
    if common::engine().await.is_none() {
        return;
    }
    let home = TestHome::new("t-gp-incl");
    let work = tempfile::tempdir().unwrap();
    let markers = work.path().join("markers");
    std::fs::create_dir_all(&markers).unwrap();
    let m = markers.display();
    let plant = format!(
        "printf '[core]\\n\\tfsmonitor = \"touch {m}/nested #\"\\n' > .gitconfig.local && echo OK-planted"
    );
    for (name, writable) in [("open", true), ("guarded", false)] {
        let dir = work.path().join(name);
        let dir = repo(&dir);
        std::fs::write(
            dir.join(".gitconfig"),
            "[include]\n\tpath = .gitconfig.local\n",
        )
        .unwrap();
        std::fs::write(dir.join(".gitconfig.local"), "").unwrap();
        std::fs::write(dir.join(".gitignore"), ".gitconfig.local\n").unwrap();
        ok_git(&dir, &["add", ".gitconfig", ".gitignore"]);
        ok_git(&dir, &["commit", "-qm", "local config"]);
        ok_git(&dir, &["config", "include.path", "../.gitconfig"]);
        chown(&dir);
        let key = home.key(name);
        let mut args = vec!["sessions", "create", &key, "--workspace"];
        let shown = dir.display().to_string();
        args.push(&shown);
        if writable {
            args.push("--git-writable");
        }
        let o = home.run(&args);
        assert!(o.status.success(), "{}", text(&o));
        let o = exec(&home, &key, &plant);
        assert_eq!(stdout(&o).contains("OK-planted"), writable, "{}", text(&o));
        ok_git(&dir, &["status", "--short"]);
        assert_eq!(
            markers.join("nested").exists(),
            writable,
            "{name}: the host's git status"
        );
        let _ = std::fs::remove_file(markers.join("nested"));
    }
}
