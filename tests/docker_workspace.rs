//! A host directory as a session's workspace (docs/security.md, "Host workspaces"), against
//! the real engine through the `moat` binary: a git checkout used in place, owned files, a
//! read-only mount, the refusals `sandbox.binds` get, a second workspace on an existing
//! session, and an agent's token that may not choose a host path.

mod common;

use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::Command;

use common::cli_home::{stdout, text, unix_post, TestHome};
use common::serve::{http, json, serve};

/// A directory with a git checkout in it, owned by `uid:gid` as a user's checkout would be.
fn checkout(parent: &Path, uid: u32, gid: u32) -> std::path::PathBuf {
    let dir = parent.join("repo");
    std::fs::create_dir_all(&dir).unwrap();
    let git = |args: &[&str]| {
        let out = Command::new("git")
            .args(args)
            .current_dir(&dir)
            .output()
            .expect("git is needed for this test");
        assert!(out.status.success(), "git {args:?}: {out:?}");
    };
    git(&["init", "-q"]);
    std::fs::write(dir.join("check.sh"), "echo tests pass\n").unwrap();
    git(&["add", "check.sh"]);
    let status = Command::new("chown")
        .args(["-R", &format!("{uid}:{gid}"), &dir.display().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    dir
}

#[tokio::test]
async fn a_host_checkout_is_the_workspace_and_files_made_inside_are_its_owners() {
    if common::engine().await.is_none() {
        return;
    }
    let home = TestHome::new("t-ws-own");
    let work = tempfile::tempdir().unwrap();
    let repo = checkout(work.path(), 4321, 4322);
    let key = home.key("s");
    let repo_s = repo.display().to_string();
    let o = home.run(&["sessions", "create", &key, "--workspace", &repo_s]);
    assert!(o.status.success(), "{}", text(&o));
    // Inside: the checkout itself, as its owner, with a HOME that can be written.
    let o = home.run(&[
        "exec",
        "--session",
        &key,
        "--",
        "sh check.sh && id -u && id -g && touch made-inside && mkdir -p sub && echo hi > sub/f && touch \"$HOME/.probe\" && echo home-ok",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let out = stdout(&o);
    assert!(out.contains("tests pass"), "{out}");
    assert!(out.contains("4321\n4322\n"), "{out}");
    assert!(out.contains("home-ok"), "{out}");
    for made in ["made-inside", "sub", "sub/f"] {
        let m = std::fs::metadata(repo.join(made)).unwrap();
        assert_eq!((m.uid(), m.gid()), (4321, 4322), "{made}");
    }
    // The workspace is the session's across a restart of the daemon (it is in the state
    // database): the next moat mounts the same checkout, as the same user, and re-attaches a
    // command that runs on meanwhile (its run files belong to the checkout's owner).
    let o = home.run(&[
        "exec",
        "--session",
        &key,
        "--background",
        "--json",
        "--",
        "sleep 3; echo bg-done",
    ]);
    let v: serde_json::Value =
        serde_json::from_slice(&o.stdout).unwrap_or_else(|_| panic!("{}", text(&o)));
    let bg = v["details"]["sessionId"].as_str().unwrap().to_string();
    let pid = home.daemon_pid().expect("a daemon");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    common::cli_home::wait_until(
        "the daemon stops",
        std::time::Duration::from_secs(20),
        || !common::cli_home::alive(pid),
    );
    let o = home.run(&["exec", "--session", &key, "--", "ls made-inside && id -u"]);
    assert_eq!(stdout(&o), "made-inside\n4321\n", "{}", text(&o));
    assert_ne!(home.daemon_pid(), Some(pid));
    let mut seen = String::new();
    let mut status = serde_json::Value::Null;
    for _ in 0..20 {
        let o = home.run(&[
            "process",
            "poll",
            "--session",
            &key,
            "--id",
            &bg,
            "--timeout",
            "2000",
            "--json",
        ]);
        let v: serde_json::Value =
            serde_json::from_slice(&o.stdout).unwrap_or_else(|_| panic!("{}", text(&o)));
        seen.push_str(v["details"]["aggregated"].as_str().unwrap_or_default());
        status = v["details"]["status"].clone();
        if status != "running" {
            break;
        }
    }
    assert_eq!(status, "completed", "{seen}");
    assert!(seen.contains("bg-done"), "{seen}");
    // The checkout's own owner and mode were left alone.
    let m = std::fs::metadata(&repo).unwrap();
    assert_eq!((m.uid(), m.gid()), (4321, 4322));
    // A host path inside the checkout works as the working directory.
    let sub = repo.join("sub").display().to_string();
    let o = home.run(&["exec", "--session", &key, "--workdir", &sub, "--", "pwd"]);
    assert_eq!(stdout(&o), "/workspace/sub\n", "{}", text(&o));
    // Listed with its workspace.
    let o = home.run(&["sessions", "list"]);
    assert!(stdout(&o).contains(&repo_s), "{}", text(&o));
    // `exec --workspace` with the very same directory is fine.
    let o = home.run(&[
        "exec",
        "--session",
        &key,
        "--workspace",
        &repo_s,
        "--",
        "sh check.sh",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(stdout(&o), "tests pass\n");
    // Another one is refused, naming both and how to recreate.
    let other = work.path().join("other");
    std::fs::create_dir(&other).unwrap();
    std::os::unix::fs::chown(&other, Some(4321), Some(4322)).unwrap();
    let other_s = other.display().to_string();
    for args in [
        vec!["sessions", "create", &key, "--workspace", &other_s],
        vec![
            "exec",
            "--session",
            &key,
            "--workspace",
            &other_s,
            "--",
            "true",
        ],
    ] {
        let o = home.run(&args);
        assert!(!o.status.success(), "{}", text(&o));
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains(&repo_s) && err.contains(&other_s),
            "{args:?}: {err}"
        );
        assert!(err.contains(&format!("moat sessions rm {key}")), "{err}");
    }
    // A session that already runs with its default workspace cannot take a host one either.
    let plain = home.key("plain");
    assert!(home
        .run(&["exec", "--session", &plain, "--", "true"])
        .status
        .success());
    let o = home.run(&["sessions", "create", &plain, "--workspace", &repo_s]);
    assert!(!o.status.success(), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stderr).contains("workspaces/"));
    // Removed, the session may be created again with another directory.
    assert!(home.run(&["sessions", "rm", &key]).status.success());
    let o = home.run(&["sessions", "create", &key, "--workspace", &other_s]);
    assert!(o.status.success(), "{}", text(&o));
    // The checkout stays: removing a session never deletes a host workspace.
    assert!(repo.join("made-inside").exists());
}

#[tokio::test]
async fn a_read_only_workspace_refuses_writes_from_commands_and_file_tools() {
    if common::engine().await.is_none() {
        return;
    }
    let home = TestHome::new("t-ws-ro");
    let work = tempfile::tempdir().unwrap();
    let repo = checkout(work.path(), 4321, 4321);
    let key = home.key("s");
    let repo_s = repo.display().to_string();
    let o = home.run(&[
        "sessions",
        "create",
        &key,
        "--workspace",
        &repo_s,
        "--read-only",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(stdout(&o).contains("(read-only)"), "{}", text(&o));
    let o = home.run(&["exec", "--session", &key, "--", "cat check.sh"]);
    assert!(o.status.success(), "{}", text(&o));
    let o = home.run(&["exec", "--session", &key, "--", "touch new-file"]);
    assert!(!o.status.success(), "{}", text(&o));
    assert!(stdout(&o).contains("Read-only file system"), "{}", text(&o));
    assert!(!repo.join("new-file").exists());
    // moat's own file tools must not get round the mount.
    let socket = home.path().join("moat.sock");
    let body = r#"{"path":"new-file","content":"x"}"#;
    let (status, answer) = unix_post(&socket, &format!("/v1/sessions/{key}/files/write"), body);
    assert_eq!(status, 400, "{answer}");
    assert!(answer.contains("read-only"), "{answer}");
    assert!(!repo.join("new-file").exists());
    // Another mode of the same directory is another workspace.
    let o = home.run(&["sessions", "create", &key, "--workspace", &repo_s]);
    assert!(!o.status.success(), "{}", text(&o));
}

#[tokio::test]
async fn forbidden_directories_are_refused_as_workspaces() {
    if common::engine().await.is_none() {
        return;
    }
    let home = TestHome::new("t-ws-refuse");
    let work = tempfile::tempdir().unwrap();
    // The operator's home, with the secret directories the refusals protect.
    let user_home = work.path().join("alice");
    std::fs::create_dir_all(user_home.join(".ssh")).unwrap();
    std::fs::create_dir_all(user_home.join("project")).unwrap();
    let to_etc = work.path().join("innocent");
    std::os::unix::fs::symlink("/etc", &to_etc).unwrap();
    let to_ssh = work.path().join("keys");
    std::os::unix::fs::symlink(user_home.join(".ssh"), &to_ssh).unwrap();
    let root_owned = work.path().join("rooted");
    std::fs::create_dir(&root_owned).unwrap();
    let s = |p: &Path| p.display().to_string();
    let rows: Vec<(String, &str)> = vec![
        ("/".into(), "exposes / "),
        ("/etc".into(), "exposes /etc"),
        ("/var/run".into(), "exposes /var/run"),
        ("/var/run/docker.sock".into(), "Docker engine"),
        (s(&user_home.join(".ssh")), ".ssh"),
        // A parent of a secret directory exposes it.
        (s(&user_home), ".ssh"),
        (s(&to_etc), "/etc"),
        (s(&to_ssh), ".ssh"),
        (
            s(&root_owned),
            "belongs to root (uid 0), and moat never runs a sandbox as root. Either give it",
        ),
    ];
    let key = home.key("s");
    for (path, needle) in &rows {
        let o = home
            .moat()
            .env("HOME", &user_home)
            .args(["sessions", "create", &key, "--workspace", path])
            .output()
            .unwrap();
        assert!(!o.status.success(), "{path}: {}", text(&o));
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(needle), "{path}: {err}");
        assert!(err.starts_with("moat: failed to use "), "{path}: {err}");
    }
    assert!(home.containers(&key).is_empty(), "nothing was created");
    // An allowed directory next to them works, as the directory's owner.
    let project = user_home.join("project");
    std::os::unix::fs::chown(&project, Some(1000), Some(1000)).unwrap();
    let o = home
        .moat()
        .env("HOME", &user_home)
        .args(["sessions", "create", &key, "--workspace", &s(&project)])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
}

#[tokio::test]
async fn an_agent_never_chooses_a_host_path() {
    const OPERATOR: &str = "operator-token-0123456789";
    const AGENT: &str = "agent-token-abcdefghijkl";
    let config = format!(
        "[serve]\noperator_token = \"{OPERATOR}\"\n[[serve.agents]]\ntoken = \"{AGENT}\"\nsession = \"t-ws-agent-a\"\nagent = \"a1\"\n"
    );
    let Some(server) = serve("t-ws-agent", &config).await else {
        return;
    };
    let work = tempfile::tempdir().unwrap();
    let dir = work.path().join("d");
    std::fs::create_dir(&dir).unwrap();
    std::os::unix::fs::chown(&dir, Some(1000), Some(1000)).unwrap();
    let body = serde_json::json!({"session": "t-ws-agent-a", "workspace": dir}).to_string();
    let (status, answer) = http(
        &server.addr,
        "POST",
        "/v1/sessions",
        Some(AGENT),
        body.as_bytes(),
    );
    assert_eq!(status, 403, "{answer}");
    assert!(json(&answer)["error"]
        .as_str()
        .unwrap()
        .contains("only the operator"));
    // Nothing was recorded or created for the agent's session.
    let (_, list) = http(&server.addr, "GET", "/v1/sessions", Some(OPERATOR), b"");
    assert!(!list.contains("t-ws-agent-a"), "{list}");
    // The MCP tools offer no way to name one either: no tool takes a workspace.
    for tool in moat::mcp::tools() {
        let props = serde_json::Value::Object((*tool.input_schema).clone());
        assert!(
            props["properties"].get("workspace").is_none(),
            "{}",
            tool.name
        );
    }
    // The operator may.
    let (status, answer) = http(
        &server.addr,
        "POST",
        "/v1/sessions",
        Some(OPERATOR),
        body.as_bytes(),
    );
    assert_eq!(status, 200, "{answer}");
    assert_eq!(json(&answer)["workspace"], dir.display().to_string());
}
