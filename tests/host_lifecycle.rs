//! Host commands end like sandbox ones (docs/mcp.md, "Timeouts, cancellation and signals"): a
//! dropped foreground call ends the command's whole process group and lists it, and a command
//! a signal ended says which. No engine needed.

mod common;

use std::time::{Duration, Instant};

use common::host::{config, moat, req};
use moat::config::ElevatedLevel;
use moat::contract::Status;
use moat::tools::Caller;
use moat::tools::ProcessRequest;

/// Whether a process whose command line contains `needle` runs on this machine.
fn running(needle: &str) -> bool {
    std::process::Command::new("pgrep")
        .args(["-f", needle])
        .stdout(std::process::Stdio::null())
        .status()
        .unwrap()
        .success()
}

#[tokio::test]
async fn a_dropped_host_call_ends_its_process_group_and_lists_it() {
    let m = moat(config(ElevatedLevel::Full));
    // Unique per test run: other tests' (and containers') sleeps are visible to pgrep too.
    let tag = std::process::id() % 10_000;
    let (child, marker) = (format!("sleep 4{tag:04}"), format!("sleep 5{tag:04}"));
    let mut r = req(&format!("{child} & {marker}"));
    r.timeout = Some(0.0);
    let caller = Caller::cli();
    let call = m.app.exec.run_for(&caller, "main", &r, true);
    let waited = async {
        let started = Instant::now();
        while !running(&marker) {
            assert!(started.elapsed() < Duration::from_secs(20), "never started");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    tokio::select! {
        r = call => panic!("the call ended on its own: {r:?}"),
        _ = waited => {}
    }
    // The call is dropped here, as an MCP cancellation or a disconnect drops it.
    let tool = &m.app.process;
    let list = tool
        .run(
            "main",
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
    let poll = ProcessRequest {
        action: "poll".into(),
        process_id: Some(id),
        timeout: Some(10_000),
        ..Default::default()
    };
    // The first poll may return at once with the cancellation note; poll to the end.
    let mut p = tool.run("main", &poll).await;
    for _ in 0..5 {
        if p.status() != Some(Status::Running) {
            break;
        }
        p = tool.run("main", &poll).await;
    }
    assert_eq!(p.status(), Some(Status::Failed), "{}", p.text());
    assert_eq!(p.details.to_json()["exitSignal"], "SIGTERM", "{}", p.text());
    // The whole group: the backgrounded child too.
    assert!(!running(&marker), "{marker} still runs");
    assert!(!running(&child), "{child} still runs");
}

#[tokio::test]
async fn a_host_command_killed_by_a_signal_says_which() {
    let m = moat(config(ElevatedLevel::Full));
    let r = m.exec(req("kill -9 $$")).await;
    assert_eq!(r.status(), Some(Status::Failed));
    assert!(
        r.text().ends_with("Command aborted by signal SIGKILL"),
        "{}",
        r.text()
    );
    assert_eq!(r.details.to_json()["exitSignal"], "SIGKILL");
}
