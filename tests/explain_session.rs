//! `moat policy explain --session` gives the verdict `moat exec` gives, because it resolves
//! names where the command would run: in the session's sandbox, through the daemon. Without
//! `--session`, a throwaway sandbox of the image stands in for it (resolving on this machine
//! would differ: here git lives in /usr/local/bin on the host and in /usr/bin in the image).

mod common;

use common::cli_home::{text, TestHome};
use serde_json::Value;

fn json(out: &std::process::Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|_| panic!("{}", text(out)))
}

#[tokio::test]
async fn explain_in_a_session_agrees_with_exec() {
    if common::engine().await.is_none() {
        return;
    }
    let home = TestHome::configured(
        "t-explain",
        "[policy.sandbox]\nsecurity = \"allowlist\"\nask = \"off\"\n\
         allowlist = [\"/usr/bin/git\", \"/usr/bin/ls\", \"/usr/bin/cat\"]\n",
    );
    let key = home.key("s");
    for command in [
        "git --version",
        "ls /",
        "cat /etc/hostname | cat",
        "rm -rf /tmp/x",
        "ls / && touch /tmp/x",
        "env -- ls /",
        "python3 -c 1",
        "cat <<EOF\n\\$(id)\nEOF",
    ] {
        let exec = home.run(&["exec", "--session", &key, "--json", "--", command]);
        let r = json(&exec);
        let exec_decision = if r["details"]["denied"] == true {
            "deny"
        } else {
            "allow"
        };
        let explained = home.run(&[
            "policy",
            "explain",
            "--session",
            &key,
            "--json",
            "--",
            command,
        ]);
        let e = json(&explained);
        assert_eq!(
            e["decision"], exec_decision,
            "{command:?}: explain {e} vs exec {r}"
        );
        if exec_decision == "deny" {
            assert_eq!(e["reason"], r["details"]["reason"], "{command:?}");
        }
        assert!(
            e["resolvedIn"]
                .as_str()
                .unwrap()
                .contains(&format!("session {key}")),
            "{e}"
        );
    }
    // The escaped here-document ran and printed its literal text.
    let out = home.run(&["exec", "--session", &key, "--", "cat <<EOF\n\\$(id)\nEOF"]);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "$(id)\n",
        "{}",
        text(&out)
    );
    // Without a session, a throwaway sandbox of the image judges it, and is removed again:
    // the same verdicts as exec (here git is /usr/local/bin/git on the host, /usr/bin/git in
    // the image, so resolving on this machine would deny what exec allows).
    for (command, decision) in [
        ("git --version", "allow"),
        ("ls / | cat", "allow"),
        ("python3 -c 1", "deny"),
    ] {
        let out = home.run(&["policy", "explain", "--json", "--", command]);
        let e = json(&out);
        assert_eq!(e["decision"], decision, "{command:?}: {e}");
        assert!(
            e["resolvedIn"]
                .as_str()
                .unwrap()
                .contains("throwaway sandbox"),
            "{e}"
        );
    }
    let out = home.run(&["policy", "explain", "--", "git --version"]);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("names resolved in: a throwaway sandbox"),
        "{}",
        text(&out)
    );
    let left = json(&home.run(&["sessions", "list", "--json"]));
    let sessions: Vec<&str> = left
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["session"].as_str().unwrap())
        .collect();
    assert!(
        sessions.iter().all(|s| !s.starts_with("explain-")),
        "a throwaway session was left: {sessions:?}"
    );
    // A host command still resolves on this host, as the host executor does.
    let host = home.run(&["policy", "explain", "--host", "host", "--", "git --version"]);
    assert!(
        String::from_utf8_lossy(&host.stdout).contains("names resolved in: this host"),
        "{}",
        text(&host)
    );
}

/// A Ctrl-C while `policy explain` starts its throwaway sandbox ends the CLI (130) and leaves
/// no session and no container behind. The signal is sent earlier and earlier until one lands
/// before the verdict, so the test cannot pass on runs that finished first.
#[tokio::test]
async fn an_interrupted_explain_leaves_nothing() {
    if common::engine().await.is_none() {
        return;
    }
    let home = TestHome::new("t-explainint");
    // The daemon is up before the timed runs, so the signal lands in the explain itself.
    assert!(home.run(&["sessions", "list"]).status.success());
    let mut interrupted = false;
    for delay_ms in [400u64, 200, 100, 50, 25] {
        let child = home
            .moat()
            .args(["policy", "explain", "--", "ls /"])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(delay_ms));
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(child.id() as i32),
            nix::sys::signal::Signal::SIGINT,
        );
        let out = child.wait_with_output().unwrap();
        if out.status.code() == Some(130) {
            interrupted = true;
            assert!(
                String::from_utf8_lossy(&out.stderr).contains("throwaway sandbox was removed"),
                "{}",
                text(&out)
            );
        }
        let left = json(&home.run(&["sessions", "list", "--json"]));
        let explains: Vec<String> = left
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|s| s["session"].as_str())
            .filter(|s| s.starts_with("explain-"))
            .map(str::to_string)
            .collect();
        assert!(
            explains.is_empty(),
            "after {delay_ms} ms: {explains:?} left"
        );
        let containers = containers_of(home.path());
        assert!(
            containers.is_empty(),
            "after {delay_ms} ms: containers {containers:?} left"
        );
        if interrupted {
            break;
        }
    }
    assert!(interrupted, "no run was interrupted before its verdict");
}

/// Containers (running or not) with a mount from beneath `home`: this home's sandboxes, and no
/// other test's.
fn containers_of(home: &std::path::Path) -> Vec<String> {
    let ids = std::process::Command::new("docker")
        .args(["ps", "-aq", "--filter", "label=dev.moat.session"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&ids.stdout)
        .lines()
        .filter(|id| {
            let mounts = std::process::Command::new("docker")
                .args(["inspect", "-f", "{{range .Mounts}}{{.Source}} {{end}}", id])
                .output()
                .unwrap();
            String::from_utf8_lossy(&mounts.stdout).contains(&*home.to_string_lossy())
        })
        .map(str::to_string)
        .collect()
}
