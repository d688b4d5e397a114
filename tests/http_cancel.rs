//! `moat serve` when the caller of a foreground exec goes away: an HTTP client that
//! disconnects, and a CLI (speaking through the daemon's socket) ended with SIGTERM. The
//! command's whole tree is ended and the process stays listed with its outcome (docs/http-api.md).

mod common;

use std::io::{Read, Write};

use common::serve::{serve, Server};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const AGENT: &str = "agent-token-cancel-0123456";
const PREFIX: &str = "http-cancel";

async fn server() -> Option<Server> {
    serve(
        PREFIX,
        &format!(
            "[[serve.agents]]\ntoken = \"{AGENT}\"\nsession = \"{PREFIX}-agent\"\nagent = \"a1\"\n"
        ),
    )
    .await
}

fn send(addr: &str, path: &str, body: &str) -> TcpStream {
    let mut s = TcpStream::connect(addr).unwrap();
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {AGENT}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    s.write_all(head.as_bytes()).unwrap();
    s
}

fn list(addr: &str, session: &str) -> serde_json::Value {
    let mut s = send(
        addr,
        &format!("/v1/sessions/{session}/process"),
        r#"{"action":"list"}"#,
    );
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    let body = out.split_once("\r\n\r\n").map(|(_, b)| b).unwrap_or("");
    let start = body.find('{').unwrap_or(0);
    let end = body.rfind('}').map(|e| e + 1).unwrap_or(body.len());
    serde_json::from_str(&body[start..end]).unwrap_or(serde_json::Value::Null)
}

/// `ps` in the session's container (found by its name prefix).
fn ps(session: &str) -> String {
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "for c in $(docker ps -q --filter name=moat-{session}-); do docker exec $c ps -eo args; done"
        ))
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

async fn wait_running(session: &str, marker: &str) {
    let started = Instant::now();
    while !ps(session).contains(marker) {
        assert!(started.elapsed() < Duration::from_secs(60), "never started");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Waits until `marker`'s process is listed as ended; returns its row.
async fn ended_row(addr: &str, session: &str, marker: &str) -> serde_json::Value {
    let started = Instant::now();
    loop {
        let v = list(addr, session);
        let row = v["details"]["sessions"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|r| r["command"].as_str().unwrap_or("").contains(marker))
            .cloned();
        if let Some(row) = &row {
            if row["status"] != "running" {
                return row.clone();
            }
        }
        assert!(
            started.elapsed() < Duration::from_secs(15),
            "not listed as ended: {v}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test]
async fn a_caller_that_goes_away_ends_its_command_and_it_stays_listed() {
    let Some(s) = server().await else {
        return;
    };
    // An HTTP client that disconnects while its exec runs in the foreground.
    let agent = format!("{PREFIX}-agent");
    let conn = send(
        &s.addr,
        &format!("/v1/sessions/{agent}/exec"),
        r#"{"command":"sleep 300 & sleep 321","timeout":0,"yieldMs":60000}"#,
    );
    wait_running(&agent, "sleep 321").await;
    drop(conn);
    let row = ended_row(&s.addr, &agent, "sleep 321").await;
    assert_eq!(row["status"], "failed", "{row}");
    assert_eq!(row["exitSignal"], "SIGTERM", "{row}");
    let left = ps(&agent);
    assert!(!left.contains("sleep 3"), "{left}");

    // A CLI going through the daemon's socket, ended with SIGTERM during the call.
    let cli_session = format!("{PREFIX}-cli");
    let cli = Command::new(env!("CARGO_BIN_EXE_moat"))
        .args([
            "exec",
            "--session",
            &cli_session,
            "--",
            "sleep 300 & sleep 322",
        ])
        .env("MOAT_HOME", s.dir.path())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_running(&cli_session, "sleep 322").await;
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(cli.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let out = tokio::task::spawn_blocking(move || cli.wait_with_output().unwrap())
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(143), "{stderr}");
    assert!(stderr.contains("SIGTERM"), "{stderr}");
    // The CLI's session is read through the CLI (the agent token names another session).
    let started = Instant::now();
    let row = loop {
        let out = Command::new(env!("CARGO_BIN_EXE_moat"))
            .args(["process", "list", "--session", &cli_session, "--json"])
            .env("MOAT_HOME", s.dir.path())
            .output()
            .unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let row = v["details"]["sessions"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|r| r["command"].as_str().unwrap_or("").contains("sleep 322"))
            .cloned();
        if let Some(row) = row.filter(|r| r["status"] != "running") {
            break row;
        }
        assert!(started.elapsed() < Duration::from_secs(15), "{v}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(row["status"], "failed", "{row}");
    assert_eq!(row["exitSignal"], "SIGTERM", "{row}");
    let left = ps(&cli_session);
    assert!(!left.contains("sleep 3"), "{left}");
}
