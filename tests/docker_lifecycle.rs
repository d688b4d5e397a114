//! How a command's life ends, against the real engine: the timeout applies in every mode, a
//! call that goes away ends its foreground command (which stays visible with its outcome),
//! and a command a signal ended says which signal (docs/mcp.md, "Timeouts, cancellation and
//! signals").

mod common;

use std::time::Duration;

use moat::config::Config;
use moat::contract::Status;
use moat::tools::ExecRequest;
use moat::tools::ProcessRequest;

fn preq(action: &str, id: &str) -> ProcessRequest {
    ProcessRequest {
        action: action.into(),
        process_id: Some(id.into()),
        ..Default::default()
    }
}

fn short_timeout() -> Config {
    let mut c = Config::default();
    c.exec.timeout_secs = 2;
    c
}

/// Polls `id` until it ends (at most `secs`); returns the last poll.
async fn poll_to_end(
    m: &common::TestMoat,
    session: &str,
    id: &str,
    secs: u64,
) -> moat::contract::ToolResult {
    let mut q = preq("poll", id);
    q.timeout = Some(1000);
    let deadline = std::time::Instant::now() + Duration::from_secs(secs);
    loop {
        let p = m.process(session, &q).await;
        if p.status() != Some(Status::Running) || std::time::Instant::now() > deadline {
            return p;
        }
    }
}

#[tokio::test]
async fn yielded_and_background_commands_get_the_configured_timeout() {
    let Some(m) = common::moat("t-tmo", short_timeout()).await else {
        return;
    };
    // Yielded: the case of the issue. Before, it finished with code 0 after 4 s.
    let yielded = m
        .exec_req(
            "a",
            ExecRequest {
                command: "sleep 4; echo done".into(),
                yield_ms: Some(500.0),
                ..Default::default()
            },
        )
        .await;
    assert_eq!(
        yielded.status(),
        Some(Status::Running),
        "{}",
        yielded.text()
    );
    let bg = m.background("a", "sleep 4; echo done").await;
    let y = yielded.details.process_id().unwrap().to_string();
    for id in [&y, &bg] {
        let p = poll_to_end(&m, "a", id, 15).await;
        assert_eq!(p.status(), Some(Status::Failed), "{}", p.text());
        assert_eq!(p.details.to_json()["timedOut"], true, "{}", p.text());
        assert!(
            p.text().contains("Process timed out after 2 seconds"),
            "{}",
            p.text()
        );
        assert!(!p.details.aggregated().unwrap().contains("done"));
    }
    // `timeout: 0` stays "no timeout", in the background too.
    let none = m
        .exec_req(
            "a",
            ExecRequest {
                command: "sleep 3; echo done".into(),
                background: Some(true),
                timeout: Some(0.0),
                ..Default::default()
            },
        )
        .await;
    let id = none.details.process_id().unwrap().to_string();
    let p = poll_to_end(&m, "a", &id, 15).await;
    assert_eq!(p.status(), Some(Status::Completed), "{}", p.text());
    assert!(p.details.aggregated().unwrap().contains("done"));
    // The foreground keeps its timeout, counted from the start.
    let fg = m.exec("a", "sleep 4; echo done").await;
    assert_eq!(fg.details.to_json()["timedOut"], true, "{}", fg.text());
    assert!(fg.text().contains("Command timed out after 2 seconds"));
}

#[tokio::test]
async fn a_dropped_foreground_call_ends_its_command_tree_and_shows_it() {
    let Some(m) = common::moat("t-cancel", Config::default()).await else {
        return;
    };
    // Warm the container so the call is waiting on the command when it is dropped.
    assert_eq!(m.exec("a", "true").await.status(), Some(Status::Completed));
    let req = ExecRequest {
        command: "sleep 300 & sleep 301".into(),
        timeout: Some(0.0),
        ..Default::default()
    };
    let session = m.key("a");
    // The caller goes away (an MCP cancellation, an HTTP client that disconnects, an
    // interrupted CLI all drop this future).
    let call = m.app.exec.run(&session, &req, true);
    assert!(tokio::time::timeout(Duration::from_millis(1500), call)
        .await
        .is_err());
    // Visible at once, without waiting for the kill to finish.
    let list = m
        .process(
            "a",
            &ProcessRequest {
                action: "list".into(),
                ..Default::default()
            },
        )
        .await;
    let rows = list.details.to_json()["sessions"]
        .as_array()
        .unwrap()
        .clone();
    assert_eq!(rows.len(), 1, "{}", list.text());
    let id = rows[0]["sessionId"].as_str().unwrap().to_string();
    assert!(rows[0]["command"].as_str().unwrap().contains("sleep 301"));
    let p = poll_to_end(&m, "a", &id, 10).await;
    assert_eq!(p.status(), Some(Status::Failed), "{}", p.text());
    assert_eq!(p.details.to_json()["exitSignal"], "SIGTERM", "{}", p.text());
    let all = p.details.aggregated().unwrap();
    assert!(all.contains("was cancelled"), "{all}");
    // The whole tree is gone, the background `sleep 300` too.
    let ps = m.docker_exec("a", "ps -eo args");
    assert!(!ps.contains("sleep 30"), "{ps}");
}

#[tokio::test]
async fn a_command_killed_by_a_signal_says_which() {
    let Some(m) = common::moat("t-sig", Config::default()).await else {
        return;
    };
    let r = m.exec("a", "echo before; kill -9 $$").await;
    assert_eq!(r.status(), Some(Status::Failed));
    assert!(
        r.text().ends_with("Command aborted by signal SIGKILL"),
        "{}",
        r.text()
    );
    assert!(r.details.to_json()["exitCode"].is_null(), "{}", r.details);
    assert!(r.text().starts_with("before"), "{}", r.text());
    let r = m.exec("a", "kill -TERM $$").await;
    assert!(
        r.text().ends_with("Command aborted by signal SIGTERM"),
        "{}",
        r.text()
    );
    // Ordinary exit codes stay exit codes.
    let r = m.exec("a", "exit 3").await;
    assert!(
        r.text().ends_with("Command exited with code 3"),
        "{}",
        r.text()
    );
    assert_eq!(r.details.to_json()["exitCode"], 3);
    // In the background: `poll` and `list` say the signal.
    let id = m.background("a", "sleep 1; kill -9 $$").await;
    let p = poll_to_end(&m, "a", &id, 10).await;
    assert_eq!(p.details.to_json()["exitSignal"], "SIGKILL", "{}", p.text());
    assert!(p.text().ends_with("Process exited with signal SIGKILL."));
    // A successful `process kill` is not an error; the killed process has failed.
    let id = m.background("a", "sleep 600").await;
    let k = m.process("a", &preq("kill", &id)).await;
    assert_eq!(k.text(), format!("Killed session {id}."));
    assert!(!k.is_error(), "{}", k.details);
    assert_eq!(k.details.to_json()["exitSignal"], "SIGTERM");
    let p = m.process("a", &preq("poll", &id)).await;
    assert_eq!(p.status(), Some(Status::Failed));
    // The CLI says it on stderr and exits 128 + N, as a shell would.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_moat"))
        .args(["exec", "--session", &m.key("a"), "--", "kill -9 $$"])
        .env("MOAT_HOME", m.dir.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(137), "{stderr}");
    assert!(
        stderr.contains("Command aborted by signal SIGKILL"),
        "{stderr}"
    );
}

/// The CLI interrupted with SIGINT or SIGTERM during a foreground exec: the command is
/// ended, and `moat process list` shows it as such.
#[tokio::test]
async fn an_interrupted_cli_ends_its_command_and_lists_it() {
    let Some(m) = common::moat("t-cli-int", Config::default()).await else {
        return;
    };
    assert_eq!(m.exec("a", "true").await.status(), Some(Status::Completed));
    let session = m.key("a");
    for (signal, marker, code) in [
        (nix::sys::signal::Signal::SIGINT, "sleep 311", 130),
        (nix::sys::signal::Signal::SIGTERM, "sleep 312", 143),
    ] {
        let cli = std::process::Command::new(env!("CARGO_BIN_EXE_moat"))
            .args([
                "exec",
                "--session",
                &session,
                "--",
                &format!("sleep 300 & {marker}"),
            ])
            .env("MOAT_HOME", m.dir.path())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let started = std::time::Instant::now();
        while !m.docker_exec("a", "ps -eo args").contains(marker) {
            assert!(started.elapsed() < Duration::from_secs(30), "never started");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(cli.id() as i32), signal).unwrap();
        let out = tokio::task::spawn_blocking(move || cli.wait_with_output().unwrap())
            .await
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(code), "{stderr}");
        assert!(stderr.contains("ended process"), "{stderr}");
        // Nothing of it runs on.
        let ps = m.docker_exec("a", "ps -eo args");
        assert!(!ps.contains("sleep 3"), "{ps}");
        // And the operator sees it, with its outcome.
        let list = std::process::Command::new(env!("CARGO_BIN_EXE_moat"))
            .args(["process", "list", "--session", &session, "--json"])
            .env("MOAT_HOME", m.dir.path())
            .output()
            .unwrap();
        let v: serde_json::Value = serde_json::from_slice(&list.stdout).unwrap();
        let row = v["details"]["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["command"].as_str().unwrap().contains(marker))
            .unwrap_or_else(|| panic!("not listed: {v}"))
            .clone();
        assert_eq!(row["status"], "failed", "{row}");
        assert_eq!(row["exitSignal"], "SIGTERM", "{row}");
    }
}
