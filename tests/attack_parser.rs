//! The parser attacks of issue 10 against a real `moat serve` (docs/security.md, "Command
//! parsing bounds"): a 2 KB command nesting 400 braces used to overflow a tokio worker's stack
//! and abort the daemon for every user, and a 33-byte `((`×16 command made brush-parser
//! backtrack for over a minute on an async worker, stalling even `/v1/health`. Each is sent
//! several times at once, under security `full` and `allowlist`; each must get a refusal naming
//! the limit while the daemon stays alive and `/v1/health` keeps answering quickly. The CLI
//! (`moat policy explain`, `moat exec`) must give the same refusal.

mod common;

use std::process::Command;

use common::serve::{json, serve, Server};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const OPERATOR: &str = "operator-token-0123456789";

/// The brace attack: 2 KB, 400 levels.
fn braces() -> String {
    format!("{}true; {}", "{ ".repeat(400), "}; ".repeat(400))
}

/// The backtracking attack: 33 bytes.
fn parens() -> String {
    format!("{}1", "((".repeat(16))
}

const BRACES_REFUSAL: &str = "command nests deeper than 32 levels";
const PARENS_REFUSAL: &str =
    "command nests substitutions, parentheses or case statements deeper than 10 levels";

async fn server() -> Option<Server> {
    serve(
        "attack-parse",
        &format!(
            "[serve]\noperator_token = \"{OPERATOR}\"\n[policy.sandbox]\nsecurity = \"full\"\n"
        ),
    )
    .await
}

/// One request as the operator.
fn http(addr: &str, method: &str, path: &str, body: &[u8]) -> (u16, String) {
    common::serve::http(addr, method, path, Some(OPERATOR), body)
}

/// Polls `/v1/health` until stopped; returns each answer's status and latency.
fn health_poller(
    addr: String,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<Vec<(u16, Duration)>> {
    std::thread::spawn(move || {
        let mut seen = Vec::new();
        while !stop.load(Ordering::Relaxed) {
            let started = Instant::now();
            let (status, _) = http(&addr, "GET", "/v1/health", b"");
            seen.push((status, started.elapsed()));
            std::thread::sleep(Duration::from_millis(20));
        }
        seen
    })
}

#[tokio::test]
async fn parser_floods_are_refused_and_the_daemon_keeps_serving() {
    let Some(mut s) = server().await else {
        return;
    };
    let stop = Arc::new(AtomicBool::new(false));
    let poller = health_poller(s.addr.clone(), stop.clone());
    std::thread::sleep(Duration::from_millis(200));

    let refusals = Arc::new(Mutex::new(Vec::new()));
    let mut senders = Vec::new();
    for i in 0..16 {
        let addr = s.addr.clone();
        let refusals = refusals.clone();
        senders.push(std::thread::spawn(move || {
            let (command, want) = if i % 2 == 0 {
                (braces(), BRACES_REFUSAL)
            } else {
                (parens(), PARENS_REFUSAL)
            };
            // Half under the configured `full`, half tightened to `allowlist`.
            let security = if i % 4 < 2 { "full" } else { "allowlist" };
            for _ in 0..3 {
                let body = serde_json::json!({"command": command, "security": security});
                let started = Instant::now();
                let (status, text) = http(
                    &addr,
                    "POST",
                    "/v1/sessions/attack-parse/exec",
                    body.to_string().as_bytes(),
                );
                let v = json(&text);
                refusals.lock().unwrap().push((
                    status,
                    v["details"]["denied"].as_bool(),
                    v["details"]["reason"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string(),
                    want,
                    security,
                    started.elapsed(),
                ));
            }
        }));
    }
    for sender in senders {
        sender.join().unwrap();
    }
    std::thread::sleep(Duration::from_millis(200));
    stop.store(true, Ordering::Relaxed);
    let health = poller.join().unwrap();

    let refusals = refusals.lock().unwrap();
    assert_eq!(refusals.len(), 48);
    for (status, denied, reason, want, security, took) in refusals.iter() {
        assert_eq!(*status, 200, "{security}: {reason}");
        assert_eq!(*denied, Some(true), "{security}: {reason}");
        assert_eq!(reason, want, "{security}");
        assert!(
            *took < Duration::from_secs(5),
            "{security}: refusal took {took:?}"
        );
    }
    assert!(
        s.child.try_wait().unwrap().is_none(),
        "the daemon died under the flood"
    );
    assert!(health.len() >= 3, "health polled {} times", health.len());
    let mut latencies: Vec<Duration> = health.iter().map(|(_, l)| *l).collect();
    latencies.sort();
    assert!(
        health.iter().all(|(status, _)| *status == 200),
        "{health:?}"
    );
    let max = *latencies.last().unwrap();
    eprintln!(
        "health under the parser flood: {} answers, median {:?}, max {:?}; slowest refusal {:?}",
        latencies.len(),
        latencies[latencies.len() / 2],
        max,
        refusals.iter().map(|r| r.5).max().unwrap()
    );
    assert!(
        max < Duration::from_secs(1),
        "health took {max:?} under the flood"
    );

    // The next ordinary request still runs.
    let (status, text) = http(
        &s.addr,
        "POST",
        "/v1/sessions/attack-parse/exec",
        br#"{"command":"echo alive"}"#,
    );
    assert_eq!(status, 200, "{text}");
    assert_eq!(json(&text)["content"][0]["text"], "alive");
}

/// `moat policy explain` and `moat exec` (without a daemon) refuse the same commands with the
/// same words.
#[tokio::test]
async fn the_cli_gives_the_same_refusals() {
    if common::engine().await.is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    for (command, want) in [(braces(), BRACES_REFUSAL), (parens(), PARENS_REFUSAL)] {
        for security in ["full", "allowlist"] {
            let out = Command::new(env!("CARGO_BIN_EXE_moat"))
                .args(["policy", "explain", "--security", security, "--json", "--"])
                .arg(&command)
                .env("MOAT_HOME", dir.path())
                .output()
                .unwrap();
            let text = String::from_utf8_lossy(&out.stdout);
            let v: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
            assert_eq!(v["decision"], "deny", "{security}: {text}");
            assert_eq!(v["reason"], want, "{security}: {text}");
        }
        let started = Instant::now();
        let out = Command::new(env!("CARGO_BIN_EXE_moat"))
            .args(["exec", "--session", "attack-parse-cli", "--"])
            .arg(&command)
            .env("MOAT_HOME", dir.path())
            .output()
            .unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(!out.status.success(), "{text}");
        assert!(
            text.contains(&format!("Exec denied (sandbox, {want})")),
            "{text}"
        );
        assert!(started.elapsed() < Duration::from_secs(10));
    }
}
