//! Exhaustion attacks on a real `moat serve` (docs/http-api.md "Limits", docs/approvals.md):
//! one agent opening more event streams than it may, many agents opening more connections than
//! the descriptors allow, silent sockets squatting the operator's reserve, and approvals piling
//! up. Each must leave the operator, the other agents and `/v1/health` served, and the
//! daemon's descriptors back near where they started.
//!
//! The daemon needs a reachable Docker engine to start (it connects at start-up) but no image:
//! nothing here creates a container.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const OPERATOR: &str = "operator-token-0123456789";

fn agent_token(i: usize) -> String {
    format!("agent-token-{i:06}-abcdefgh")
}

struct Daemon {
    child: Child,
    addr: String,
    home: tempfile::TempDir,
    /// What the daemon wrote to stderr, collected by a thread.
    log: std::sync::Arc<std::sync::Mutex<String>>,
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Daemon {
    /// `moat serve` on an ephemeral TCP port with `agents` agent tokens (agent i in session
    /// `s{i}`), `serve` keys and other `sections` in the config, and the open-file hard limit
    /// set to `nofile` when given (the limit the original attack met).
    fn start(agents: usize, serve: &str, sections: &str, nofile: Option<u64>) -> Daemon {
        let home = tempfile::tempdir().unwrap();
        let mut config = format!("[serve]\noperator_token = \"{OPERATOR}\"\n{serve}\n{sections}\n");
        for i in 0..agents {
            config.push_str(&format!(
                "[[serve.agents]]\ntoken = \"{}\"\nsession = \"s{i}\"\nagent = \"a{i}\"\n",
                agent_token(i)
            ));
        }
        std::fs::write(home.path().join("moat.toml"), config).unwrap();
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_moat"));
        cmd.args(["serve", "--tcp", "127.0.0.1:0"])
            .env("MOAT_HOME", home.path())
            .env("RUST_LOG", "info")
            .stderr(Stdio::piped());
        if let Some(n) = nofile {
            // SAFETY: setrlimit is async-signal-safe; nothing else runs between fork and exec.
            unsafe {
                cmd.pre_exec(move || {
                    let lim = libc::rlimit {
                        rlim_cur: n,
                        rlim_max: n,
                    };
                    if libc::setrlimit(libc::RLIMIT_NOFILE, &lim) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
        }
        let mut child = cmd.spawn().unwrap();
        let mut err = BufReader::new(child.stderr.take().unwrap());
        let log = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        let addr = loop {
            let mut line = String::new();
            assert!(err.read_line(&mut line).unwrap() > 0, "moat serve exited");
            log.lock().unwrap().push_str(&line);
            if let Some(a) = line.split("tcp:").nth(1) {
                break a.trim().to_string();
            }
        };
        let sink = log.clone();
        std::thread::spawn(move || {
            let mut line = String::new();
            while err.read_line(&mut line).unwrap_or(0) > 0 {
                sink.lock().unwrap().push_str(&line);
                line.clear();
            }
        });
        Daemon {
            child,
            addr,
            home,
            log,
        }
    }

    fn socket(&self) -> PathBuf {
        self.home.path().join("moat.sock")
    }

    fn fds(&self) -> usize {
        std::fs::read_dir(format!("/proc/{}/fd", self.child.id()))
            .unwrap()
            .count()
    }

    fn log(&self) -> String {
        self.log.lock().unwrap().clone()
    }

    /// A request on a fresh TCP connection that closes after it.
    fn once(&self, method: &str, path: &str, token: Option<&str>, body: &str) -> (u16, String) {
        let mut s = TcpStream::connect(&self.addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        send(&mut s, method, path, token, body, true);
        read_response(&mut s)
    }

    /// A request over the unix socket (the operator).
    fn unix(&self, method: &str, path: &str, body: &str) -> (u16, String) {
        let mut s = UnixStream::connect(self.socket()).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        send(&mut s, method, path, None, body, true);
        read_response(&mut s)
    }
}

fn send(
    s: &mut impl Write,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: &str,
    close: bool,
) {
    let auth = token
        .map(|t| format!("Authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    let conn = if close { "close" } else { "keep-alive" };
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: x\r\n{auth}Content-Type: application/json\r\nContent-Length: {}\r\nConnection: {conn}\r\n\r\n{body}",
        body.len()
    );
    s.write_all(head.as_bytes()).unwrap();
}

/// Reads one response's status and body (by Content-Length; an event stream's body is left
/// unread and "" returned).
fn read_response(s: &mut impl Read) -> (u16, String) {
    let mut head = Vec::new();
    let mut byte = [0u8];
    while !head.ends_with(b"\r\n\r\n") {
        match s.read(&mut byte) {
            Ok(1) => head.push(byte[0]),
            _ => return (0, String::from_utf8_lossy(&head).into_owned()),
        }
    }
    let head = String::from_utf8_lossy(&head).to_ascii_lowercase();
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let len = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse::<usize>().ok());
    let mut body = vec![0u8; len.unwrap_or(0)];
    if len.is_some() {
        let _ = s.read_exact(&mut body);
    }
    (status, String::from_utf8_lossy(&body).into_owned())
}

/// Opens a connection and sends one keep-alive request on it; the connection stays open.
fn hold(addr: &str, path: &str, token: Option<&str>) -> (TcpStream, u16, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    send(&mut s, "GET", path, token, "", false);
    let (status, body) = read_response(&mut s);
    (s, status, body)
}

fn health_ok(d: &Daemon) {
    let (status, body) = d.once("GET", "/v1/health", None, "");
    assert_eq!(status, 200, "health: {body}");
}

fn near(start: usize, now: usize) -> bool {
    now <= start + 8
}

/// Polls the daemon's descriptor count until it is back near `start` (connections close
/// asynchronously).
fn settles(d: &Daemon, start: usize) -> usize {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let now = d.fds();
        if near(start, now) || Instant::now() > deadline {
            return now;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn one_agent_flooding_event_streams_gets_429_and_nobody_else_notices() {
    let d = Daemon::start(2, "max_streams_per_token = 4", "", None);
    health_ok(&d);
    let start = d.fds();
    let mine = agent_token(0);
    let mut open = Vec::new();
    let mut refused = Vec::new();
    for _ in 0..40 {
        let (s, status, body) = hold(&d.addr, "/v1/sessions/s0/events", Some(&mine));
        match status {
            200 => open.push(s),
            _ => refused.push((status, body)),
        }
        // Answers for everyone else, throughout the flood.
        health_ok(&d);
    }
    assert_eq!(open.len(), 4, "refused: {refused:?}");
    assert_eq!(refused.len(), 36);
    for (status, body) in &refused {
        assert_eq!(*status, 429, "{body}");
        let v: serde_json::Value = serde_json::from_str(body).unwrap();
        assert_eq!(v["limit"], "serve.max_streams_per_token", "{body}");
        assert_eq!(v["value"], 4, "{body}");
        assert!(
            v["error"]
                .as_str()
                .unwrap()
                .contains("serve.max_streams_per_token = 4"),
            "{body}"
        );
    }
    // Another agent and the operator still get their streams and answers.
    let (_other, status, body) = hold(&d.addr, "/v1/sessions/s1/events", Some(&agent_token(1)));
    assert_eq!(status, 200, "{body}");
    let (_op, status, body) = hold(&d.addr, "/v1/sessions/s0/events", Some(OPERATOR));
    assert_eq!(status, 200, "{body}");
    let (status, body) = d.unix("GET", "/v1/sessions", "");
    assert_eq!(status, 200, "{body}");
    // Closing a stream gives its place back.
    drop(open.pop());
    std::thread::sleep(Duration::from_millis(300));
    let (_again, status, body) = hold(&d.addr, "/v1/sessions/s0/events", Some(&mine));
    assert_eq!(status, 200, "{body}");
    drop((open, _again, _other, _op));
    let end = settles(&d, start);
    assert!(
        near(start, end),
        "descriptors: {start} at start, {end} after"
    );
    assert!(!d.log().contains("Too many open files"), "{}", d.log());
}

/// The original attack: 1100 connections against a daemon whose open-file limit is 1024.
#[test]
fn a_connection_flood_past_the_descriptor_limit_gets_503_and_the_operator_is_served() {
    let agents = 140;
    let d = Daemon::start(agents, "", "", Some(1024));
    health_ok(&d);
    let start = d.fds();
    let mut open = Vec::new();
    let mut refused = Vec::new();
    for n in 0..1100 {
        let token = agent_token(n % agents);
        let (s, status, body) = hold(&d.addr, "/v1/health", Some(&token));
        match status {
            200 => open.push(s),
            _ => refused.push((status, body)),
        }
        if n % 100 == 0 {
            assert_eq!(d.unix("GET", "/v1/health", "").0, 200);
        }
    }
    // 1024 descriptors: a quarter (256) for moat's files, 64 for refusing and evicting, 16
    // for the operator: 688 for everyone else.
    assert_eq!(open.len(), 688, "refused: {:?}", refused.first());
    assert_eq!(refused.len(), 1100 - 688);
    for (status, body) in &refused {
        assert_eq!(*status, 503, "{body}");
        assert!(body.contains("serve.max_connections = 688"), "{body}");
    }
    // The operator over TCP gets its reserve, the socket still answers.
    let (_op, status, body) = hold(&d.addr, "/v1/approvals", Some(OPERATOR));
    assert_eq!(status, 200, "{body}");
    assert_eq!(d.unix("GET", "/v1/sessions", "").0, 200);

    // Silent sockets that never send a request fill the reserve; the operator's next
    // connection displaces the oldest of them.
    let silent: Vec<TcpStream> = (0..40)
        .map(|_| TcpStream::connect(&d.addr).unwrap())
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    let (_op2, status, body) = hold(&d.addr, "/v1/sessions", Some(OPERATOR));
    assert_eq!(status, 200, "{body}");

    drop((open, silent, _op, _op2));
    let end = settles(&d, start);
    assert!(
        near(start, end),
        "descriptors: {start} at start, {end} after"
    );
    let log = d.log();
    assert!(!log.contains("Too many open files"), "{log}");
    assert!(!log.contains("failed to accept"), "{log}");
    health_ok(&d);
}

/// Elevated runs for the socket's operator (the host policy asks on a miss), and `approvals`
/// keys.
fn host_config(approvals: &str) -> String {
    format!(
        "[elevated]\nenabled = true\nallow_from = {{ cli = [\"*\"] }}\n[approvals]\ntimeout_secs = 600\n{approvals}\n"
    )
}

/// A pending host approval for `command` in `session`, created over the socket: its id.
fn pending(d: &Daemon, session: &str, command: &str) -> Result<String, (u16, String)> {
    let body = serde_json::json!({"command": command, "elevated": true}).to_string();
    let (status, out) = d.unix("POST", &format!("/v1/sessions/{session}/exec"), &body);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap_or_default();
    match v["details"]["approvalId"].as_str() {
        Some(id) if status == 200 => Ok(id.to_string()),
        _ => Err((status, out)),
    }
}

fn wait_for(path: &Path, within: Duration) -> Option<Duration> {
    let t = Instant::now();
    while t.elapsed() < within {
        if path.exists() {
            return Some(t.elapsed());
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    None
}

#[test]
fn a_decision_over_http_wakes_its_waiter_at_once() {
    let d = Daemon::start(0, "", &host_config(""), None);
    let scratch = tempfile::tempdir().unwrap();
    for n in 0..3 {
        let marker = scratch.path().join(format!("ran-{n}"));
        let id = pending(&d, "main", &format!("touch {}", marker.display())).unwrap();
        // Longer than the shared fallback check (2 s) would take if the wake were lost: the
        // waiter must already be parked when the decision comes.
        std::thread::sleep(Duration::from_millis(300));
        assert!(!marker.exists(), "nothing runs before a decision");
        let t = Instant::now();
        let (status, body) = d.unix(
            "POST",
            &format!("/v1/approvals/{id}/decision"),
            r#"{"decision":"allow-once"}"#,
        );
        assert_eq!(status, 200, "{body}");
        let took = wait_for(&marker, Duration::from_secs(5)).map(|_| t.elapsed());
        assert!(
            took.is_some_and(|t| t < Duration::from_secs(1)),
            "the approved plan ran after {took:?}"
        );
    }
}

#[test]
fn pending_approvals_past_the_session_cap_are_refused_with_the_cap() {
    let d = Daemon::start(0, "", &host_config("max_pending_per_session = 3"), None);
    let mut ids = Vec::new();
    for n in 0..3 {
        ids.push(pending(&d, "capped", &format!("touch /nonexistent/{n}")).unwrap());
    }
    let (status, body) = pending(&d, "capped", "touch /nonexistent/4").unwrap_err();
    assert_eq!(status, 429, "{body}");
    assert!(
        body.contains("approvals.max_pending_per_session = 3"),
        "{body}"
    );
    assert!(body.contains("session capped"), "{body}");
    // Other sessions are not held back, and deciding one frees a place.
    pending(&d, "other", "touch /nonexistent/5").unwrap();
    let (status, body) = d.unix(
        "POST",
        &format!("/v1/approvals/{}/decision", ids[0]),
        r#"{"decision":"deny"}"#,
    );
    assert_eq!(status, 200, "{body}");
    pending(&d, "capped", "touch /nonexistent/6").unwrap();
}
