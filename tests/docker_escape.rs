//! Ending a command ends everything it started, also what left its process group; and a
//! foreground command is not left waiting on a stdin nobody can write (docs/security.md,
//! "Ending a command"; docs/mcp.md, "Foreground and background"). On either transport.

mod common;

use std::time::{Duration, Instant};

use moat::config::Config;
use moat::contract::ExecRequest;
use moat::tools::ProcessRequest;

#[tokio::test]
async fn a_timeout_or_a_kill_ends_what_left_the_group() {
    let Some(m) = common::moat("t-escape", Config::default()).await else {
        return;
    };
    // setsid, nohup in a new session, and a double fork: none is in the command's group.
    let escapes = "setsid sleep 1000001 & setsid nohup sh -c 'sleep 1000002' >/dev/null 2>&1 & (setsid sleep 1000003 &) ; sleep 1000";
    let req = ExecRequest {
        command: escapes.into(),
        timeout: Some(2.0),
        ..Default::default()
    };
    let r = m.exec_req("a", req).await;
    assert_eq!(r.details.to_json()["timedOut"], true, "{}", r.details);
    let ps = m.docker_exec("a", "ps -eo args");
    for n in ["1000001", "1000002", "1000003"] {
        assert!(
            !ps.contains(&format!("sleep {n}")),
            "sleep {n} escaped:\n{ps}"
        );
    }
    // The same for `process kill` of a background command.
    let id = m.background("a", "setsid sleep 1000004 & sleep 1000").await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(m.docker_exec("a", "ps -eo args").contains("sleep 1000004"));
    let kill = ProcessRequest {
        action: "kill".into(),
        process_id: Some(id),
        ..Default::default()
    };
    m.process("a", &kill).await;
    let ps = m.docker_exec("a", "ps -eo args");
    assert!(!ps.contains("sleep 1000004"), "escaped a kill:\n{ps}");
}

#[tokio::test]
async fn a_foreground_command_reads_end_of_file() {
    let Some(m) = common::moat("t-stdin-eof", Config::default()).await else {
        return;
    };
    for (command, out) in [
        ("cat; echo after-cat", "after-cat"),
        ("read x; echo read-returned $?", "read-returned 1"),
        (
            "python3 -c 'input()' 2>/dev/null; echo input-returned $?",
            "input-returned 1",
        ),
    ] {
        let req = ExecRequest {
            command: command.into(),
            timeout: Some(20.0),
            ..Default::default()
        };
        let t = Instant::now();
        let r = m.exec_req("a", req).await;
        assert!(
            t.elapsed() < Duration::from_secs(5),
            "{command}: waited on stdin"
        );
        assert_eq!(
            r.details.to_json()["timedOut"],
            false,
            "{command}: {}",
            r.details
        );
        assert_eq!(r.text(), out, "{command}: {}", r.details);
    }
}
