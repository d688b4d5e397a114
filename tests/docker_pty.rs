//! PTY processes against the real engine: keys and signals through the terminal, its size and
//! resizes, bracketed paste, raw output that starts with a byte bollard would misread as a
//! frame header, and exit codes.

mod common;

use std::time::{Duration, Instant};

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

/// Starts `command` in a PTY in the background; returns its process id.
async fn pty_background(m: &common::TestMoat, session: &str, command: &str) -> String {
    let req = ExecRequest {
        command: command.into(),
        background: Some(true),
        pty: Some(true),
        ..Default::default()
    };
    let r = m.exec_req(session, req).await;
    assert_eq!(r.status(), Some(Status::Running), "{}", r.text());
    r.details.process_id().unwrap().to_string()
}

/// Polls until the whole (sanitized) output contains `needle`; returns that output, or `None`
/// after `within`.
async fn wait_output(
    m: &common::TestMoat,
    session: &str,
    id: &str,
    needle: &str,
    within: Duration,
) -> Option<String> {
    let deadline = Instant::now() + within;
    let mut last = String::new();
    while Instant::now() < deadline {
        let mut q = preq("poll", id);
        q.timeout = Some(100);
        let p = m.process(session, &q).await;
        last = p.details.aggregated().unwrap_or("").to_string();
        if last.contains(needle) {
            return Some(last);
        }
    }
    eprintln!("output so far: {last:?}");
    None
}

/// Polls until the process ended; returns the last poll's details.
async fn wait_exit(
    m: &common::TestMoat,
    session: &str,
    id: &str,
    within: Duration,
) -> serde_json::Value {
    let deadline = Instant::now() + within;
    loop {
        let mut q = preq("poll", id);
        q.timeout = Some(1000);
        let p = m.process(session, &q).await;
        if p.status() != Some(Status::Running) || Instant::now() > deadline {
            return p.details.to_json();
        }
    }
}

async fn send(m: &common::TestMoat, session: &str, id: &str, literal: &str, keys: &[&str]) {
    let mut q = preq("send-keys", id);
    if !literal.is_empty() {
        q.literal = Some(literal.into());
    }
    if !keys.is_empty() {
        q.keys = Some(keys.iter().map(|k| k.to_string()).collect());
    }
    let r = m.process(session, &q).await;
    assert!(r.text().starts_with("Sent "), "{}", r.text());
}

/// Command lines of the container's processes.
fn processes(m: &common::TestMoat, session: &str) -> Vec<String> {
    m.docker_exec(session, "ps -eo args")
        .lines()
        .map(|l| l.trim().to_string())
        .collect()
}

#[tokio::test]
async fn ctrl_c_interrupts_the_foreground_command_and_the_shell_survives() {
    let Some(m) = common::moat("t-pty-keys", Config::default()).await else {
        return;
    };
    let id = pty_background(&m, "a", "sh").await;
    send(&m, "a", &id, "sleep 100", &["Enter"]).await;
    let mut started = false;
    for _ in 0..50 {
        if processes(&m, "a").iter().any(|p| p == "sleep 100") {
            started = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(started, "sleep never started: {:?}", processes(&m, "a"));

    send(&m, "a", &id, "", &["C-c"]).await;
    let mut gone = false;
    for _ in 0..50 {
        if !processes(&m, "a").iter().any(|p| p == "sleep 100") {
            gone = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(gone, "C-c left the sleep running: {:?}", processes(&m, "a"));

    // The shell itself is still there and still takes commands.
    let p = m.process("a", &preq("poll", &id)).await;
    assert_eq!(p.status(), Some(Status::Running), "{}", p.text());
    send(&m, "a", &id, "echo alive-$((40+2))", &["Enter"]).await;
    assert!(
        wait_output(&m, "a", &id, "alive-42", Duration::from_secs(10))
            .await
            .is_some(),
        "the shell did not answer after C-c"
    );

    send(&m, "a", &id, "exit 3", &["Enter"]).await;
    let d = wait_exit(&m, "a", &id, Duration::from_secs(10)).await;
    assert_eq!(d["status"], "failed", "{d}");
    assert_eq!(d["exitCode"], 3, "{d}");
}

#[tokio::test]
async fn the_terminal_starts_at_30x120_and_follows_a_resize() {
    let Some(m) = common::moat("t-pty-size", Config::default()).await else {
        return;
    };
    // A command that asks at once: the default size must already be in place.
    let r = m
        .exec_req(
            "a",
            ExecRequest {
                command: "stty size".into(),
                pty: Some(true),
                ..Default::default()
            },
        )
        .await;
    assert_eq!(r.status(), Some(Status::Completed), "{}", r.text());
    assert_eq!(r.text().trim(), "30 120");

    // A shell, resized while it runs.
    let id = pty_background(&m, "a", "sh").await;
    send(&m, "a", &id, "stty size", &["Enter"]).await;
    assert!(
        wait_output(&m, "a", &id, "30 120", Duration::from_secs(10))
            .await
            .is_some(),
        "no default size in the shell"
    );
    m.app
        .registry
        .get(&m.key("a"), &id)
        .unwrap()
        .resize(40, 100);
    send(&m, "a", &id, "stty size", &["Enter"]).await;
    assert!(
        wait_output(&m, "a", &id, "40 100", Duration::from_secs(10))
            .await
            .is_some(),
        "the resize did not reach the terminal"
    );
    m.process("a", &preq("remove", &id)).await;
}

#[tokio::test]
async fn a_bracketed_paste_reaches_the_program_with_its_markers() {
    let Some(m) = common::moat("t-pty-paste", Config::default()).await else {
        return;
    };
    // No echo: whatever shows up was printed by cat, so cat received the markers.
    let id = pty_background(&m, "a", r"stty -echo; printf '\033[?2004h'; exec cat -v").await;
    // Wait until cat runs (its terminal mode is set once it reads).
    let mut running = false;
    for _ in 0..50 {
        if processes(&m, "a").iter().any(|p| p == "cat -v") {
            running = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(running, "cat never started: {:?}", processes(&m, "a"));
    let mut q = preq("paste", &id);
    q.text = Some("hello".into());
    let r = m.process("a", &q).await;
    assert!(r.text().starts_with("Pasted 5 chars"), "{}", r.text());
    let r = m.process("a", &preq("submit", &id)).await;
    assert!(r.text().starts_with("Submitted"), "{}", r.text());
    let out = wait_output(&m, "a", &id, "^[[201~", Duration::from_secs(10))
        .await
        .expect("cat never printed the paste");
    assert_eq!(out.trim(), "^[[200~hello^[[201~");
    m.process("a", &preq("remove", &id)).await;
}

#[tokio::test]
async fn output_starting_with_a_low_control_byte_arrives_at_once() {
    let Some(m) = common::moat("t-pty-raw", Config::default()).await else {
        return;
    };
    // bollard's TTY decoder takes a chunk starting with 0x00-0x02 as a frame header and holds
    // the bytes until the stream ends (5 s here); the raw reader must show them at once.
    let id = pty_background(&m, "a", r"printf '\001abc'; sleep 5; echo after").await;
    let out = wait_output(&m, "a", &id, "abc", Duration::from_millis(1500))
        .await
        .expect("output starting with 0x01 stalled");
    assert_eq!(out, "abc", "\\x01 is not sanitized away");
    let out = wait_output(&m, "a", &id, "after", Duration::from_secs(15))
        .await
        .expect("later output was lost");
    assert!(out.starts_with("abc"), "{out:?}");

    // NUL and Ctrl-B mid-session as well.
    let id = pty_background(&m, "a", r"sleep 0.5; printf '\000\002xyz'; sleep 5").await;
    wait_output(&m, "a", &id, "xyz", Duration::from_millis(2000))
        .await
        .expect("output starting with 0x00 stalled");
    m.process("a", &preq("remove", &id)).await;
}

#[tokio::test]
async fn a_pty_command_reports_its_exit_code() {
    let Some(m) = common::moat("t-pty-exit", Config::default()).await else {
        return;
    };
    let run = |command: &str| ExecRequest {
        command: command.into(),
        pty: Some(true),
        ..Default::default()
    };
    let r = m.exec_req("a", run("echo out; exit 4")).await;
    assert_eq!(r.status(), Some(Status::Failed), "{}", r.text());
    assert_eq!(r.details.to_json()["exitCode"], 4, "{}", r.details);
    assert!(r.text().contains("out"), "{}", r.text());
    assert!(
        r.text().ends_with("Command exited with code 4"),
        "{}",
        r.text()
    );

    let r = m.exec_req("a", run("true")).await;
    assert_eq!(r.status(), Some(Status::Completed), "{}", r.text());
    assert_eq!(r.details.to_json()["exitCode"], 0, "{}", r.details);

    // In the background, the exit reaches poll.
    let id = pty_background(&m, "a", "sleep 1; exit 7").await;
    let d = wait_exit(&m, "a", &id, Duration::from_secs(15)).await;
    assert_eq!(d["status"], "failed", "{d}");
    assert_eq!(d["exitCode"], 7, "{d}");
}

/// A PTY run has a terminal type, so `tput` and curses programs work; a request's own `TERM`
/// wins. Control: the same command without a PTY has no `TERM` and `tput` fails.
#[tokio::test]
async fn a_pty_run_has_a_terminal_type() {
    let Some(m) = common::moat("t-pty-term", Config::default()).await else {
        return;
    };
    let id = pty_background(
        &m,
        "a",
        "echo term=$TERM; tput cols >/dev/null && echo tput-ok",
    )
    .await;
    let out = wait_output(&m, "a", &id, "tput-ok", Duration::from_secs(20)).await;
    assert!(
        out.as_deref()
            .is_some_and(|o| o.contains("term=xterm-256color")),
        "{out:?}"
    );
    let mut req = ExecRequest {
        command: "echo term=$TERM".into(),
        background: Some(true),
        pty: Some(true),
        ..Default::default()
    };
    req.env.insert("TERM".into(), "vt100".into());
    let r = m.exec_req("a", req).await;
    let id = r.details.process_id().unwrap().to_string();
    let out = wait_output(&m, "a", &id, "term=vt100", Duration::from_secs(20)).await;
    assert!(out.is_some());
    let plain = m
        .exec_req(
            "a",
            ExecRequest {
                command: "echo term=$TERM; tput cols || echo tput-failed".into(),
                ..Default::default()
            },
        )
        .await;
    let text = plain.text();
    assert!(
        text.contains("term=\n") && text.contains("tput-failed"),
        "control: {text}"
    );
}
