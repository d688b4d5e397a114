//! Sticky cwd and env (docs/mcp.md, "Sticky cwd and env"), against the real engine through
//! the `moat` binary: `cd` and `export` carried to the next command, also after a failure and
//! a timeout; a variable the env policy refuses never carried; nothing carried after a reset,
//! nor with the default configuration.

mod common;

use common::cli_home::{text, TestHome};

fn out(home: &TestHome, args: &[&str]) -> String {
    let o = home.run(args);
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[tokio::test]
async fn cd_and_export_are_carried_until_a_reset() {
    if common::engine().await.is_none() {
        return;
    }
    let home = TestHome::configured("t-stickyx", "[exec]\nsticky = true\n");
    let key = home.key("s");
    let exec = |cmd: &str| out(&home, &["exec", "--session", &key, "--", cmd]);
    exec("mkdir -p src/deep && cd src && export FOO=bar LD_PRELOAD=/workspace/evil.so BASH_ENV=/x");
    assert_eq!(
        exec("pwd; echo $FOO; echo ${LD_PRELOAD-unset} ${BASH_ENV-unset}"),
        "/workspace/src\nbar\nunset unset\n"
    );
    // A failed command's state is carried too.
    let o = home.run(&[
        "exec",
        "--session",
        &key,
        "--",
        "cd deep; export ERR=1; false",
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert_eq!(exec("pwd; echo $ERR $FOO"), "/workspace/src/deep\n1 bar\n");
    // So is a command the timeout ended.
    let o = home.run(&[
        "exec",
        "--session",
        &key,
        "--timeout",
        "1",
        "--",
        "cd /workspace; export K=killed; sleep 30",
    ]);
    assert!(!o.status.success(), "{}", text(&o));
    assert_eq!(exec("pwd; echo $K; unset K"), "/workspace\nkilled\n");
    assert_eq!(exec("echo ${K-unset}"), "unset\n");
    // A request's own workdir and env win over the carried ones.
    let o = out(
        &home,
        &[
            "exec",
            "--session",
            &key,
            "--workdir",
            "src",
            "--env",
            "FOO=asked",
            "--",
            "pwd; echo $FOO",
        ],
    );
    assert_eq!(o, "/workspace/src\nasked\n");
    // Visible to the operator.
    let o = home.run(&["sessions", "show", &key, "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["sticky"]["enabled"], true, "{v}");
    assert_eq!(v["sticky"]["cwd"], "/workspace/src", "{v}");
    // A carried variable is carried with the value the last command ended with.
    assert_eq!(v["sticky"]["env"]["FOO"], "asked", "{v}");
    assert_eq!(v["sticky"]["env"]["ERR"], "1", "{v}");
    assert!(v["sticky"]["env"].get("LD_PRELOAD").is_none(), "{v}");
    // Reset: the next command starts afresh.
    let o = home.run(&["sessions", "reset-state", &key]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(exec("pwd; echo ${FOO-unset}"), "/workspace\nunset\n");
}

#[tokio::test]
async fn off_by_default_and_on_per_session() {
    if common::engine().await.is_none() {
        return;
    }
    let home = TestHome::new("t-sticky-off");
    let key = home.key("s");
    let exec = |cmd: &str| out(&home, &["exec", "--session", &key, "--", cmd]);
    exec("mkdir -p src; cd src; export FOO=bar");
    assert_eq!(exec("pwd; echo ${FOO-unset}"), "/workspace\nunset\n");
    let o = home.run(&["sessions", "set", &key, "--sticky", "true"]);
    assert!(o.status.success(), "{}", text(&o));
    exec("cd src; export FOO=bar");
    assert_eq!(exec("pwd; echo ${FOO-unset}"), "/workspace/src\nbar\n");
    // Another session of the same home stays stateless.
    let other = home.key("t");
    exec("true");
    assert_eq!(
        out(
            &home,
            &["exec", "--session", &other, "--", "pwd; echo ${FOO-unset}"]
        ),
        "/workspace\nunset\n"
    );
}
