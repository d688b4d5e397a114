//! The HTTP API's edges, each tried as an attack on a real `moat serve`: a session key `..`
//! however it is encoded, wrong methods, workdirs whose `..` stays inside (accepted) or leads
//! out (refused), and hostile characters echoed in error texts (docs/http-api.md, "Errors").

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use common::serve::{http, json, serve, Server};
use serde_json::Value;

const OPERATOR: &str = "operator-token-0123456789";

async fn server(prefix: &'static str) -> Option<Server> {
    serve(
        prefix,
        &format!("[serve]\noperator_token = \"{OPERATOR}\"\n"),
    )
    .await
}

/// One raw request; returns the status, the response head and the body.
fn raw(addr: &str, method: &str, path: &str) -> (u16, String, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {OPERATOR}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    );
    s.write_all(head.as_bytes()).unwrap();
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    let status = out
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let (head, body) = out.split_once("\r\n\r\n").unwrap_or((&out, ""));
    (status, head.to_string(), body.to_string())
}

/// Characters that act on a terminal or reorder what it shows.
fn acts_on_terminal(c: char) -> bool {
    c.is_control()
        || matches!(c as u32, 0x200B..=0x200F | 0x202A..=0x202E | 0x2066..=0x2069 | 0xFEFF)
}

fn error_of(body: &str) -> String {
    json(body)["error"].as_str().unwrap_or_default().to_string()
}

#[tokio::test]
async fn a_session_key_of_dots_is_refused_however_encoded() {
    let Some(s) = server("edge-key").await else {
        return;
    };
    for key in [
        "..",
        "%2E%2E",
        "%2e%2e",
        "%2e.",
        ".%2E",
        "%2E",
        ".",
        "...",
        "%252E%252E",
        "%2E%2E%2F",
        "..%2F..%2Fetc",
        "%2E%2E%5C",
        "%FF",
        "%E2%80%AE%2E%2E",
    ] {
        for (method, path) in [
            ("POST", format!("/v1/sessions/{key}/exec")),
            ("POST", format!("/v1/sessions/{key}/process")),
            ("DELETE", format!("/v1/sessions/{key}")),
            ("GET", format!("/v1/sessions/{key}/events")),
        ] {
            let body = if path.ends_with("exec") {
                br#"{"command":"echo ran"}"#.as_slice()
            } else {
                br#"{"action":"list"}"#.as_slice()
            };
            let (status, text) = http(&s.addr, method, &path, Some(OPERATOR), body);
            assert_eq!(status, 400, "{method} {path}: {text}");
            let err = error_of(&text);
            assert!(
                err.contains("session key") || err.contains("request path"),
                "{method} {path}: {err}"
            );
            assert!(!err.chars().any(acts_on_terminal), "{path}: {err:?}");
        }
    }
    // Nothing was created for any of them: no workspace, no run directory.
    for dir in ["workspaces", "run"] {
        let entries = std::fs::read_dir(s.dir.path().join(dir))
            .map(|d| d.count())
            .unwrap_or(0);
        assert_eq!(entries, 0, "{dir}");
    }
    // An ordinary key with dots still works.
    let (status, text) = http(
        &s.addr,
        "POST",
        "/v1/sessions/edge-key.v1/exec",
        Some(OPERATOR),
        br#"{"command":"echo ok"}"#,
    );
    assert_eq!(status, 200, "{text}");
}

#[tokio::test]
async fn a_wrong_method_gets_a_json_405() {
    let Some(s) = server("edge-405").await else {
        return;
    };
    for (method, path, allow) in [
        ("GET", "/v1/sessions/edge-405-a/exec", "POST"),
        ("PUT", "/v1/sessions/edge-405-a/process", "POST"),
        ("POST", "/v1/health", "GET"),
        ("PATCH", "/v1/sessions", "GET"),
        ("POST", "/v1/sessions/edge-405-a", "DELETE"),
        ("DELETE", "/v1/approvals", "GET"),
    ] {
        let (status, head, body) = raw(&s.addr, method, path);
        assert_eq!(status, 405, "{method} {path}: {head}");
        let err = error_of(&body);
        assert!(err.contains(&format!("does not serve {method}")), "{err}");
        let head = head.to_ascii_lowercase();
        assert!(head.contains("content-type: application/json"), "{head}");
        assert!(
            head.lines()
                .any(|l| l.starts_with("allow:") && l.contains(&allow.to_ascii_lowercase())),
            "{method} {path}: {head}"
        );
    }
    let (status, _, body) = raw(&s.addr, "GET", "/v1/health");
    assert_eq!(status, 200, "{body}");
}

#[tokio::test]
async fn a_workdir_that_stays_inside_is_accepted_and_every_escape_refused() {
    let Some(s) = server("edge-wd").await else {
        return;
    };
    let exec = |body: Value| {
        http(
            &s.addr,
            "POST",
            "/v1/sessions/edge-wd-a/exec",
            Some(OPERATOR),
            body.to_string().as_bytes(),
        )
    };
    let (status, text) = exec(serde_json::json!({
        "command": "mkdir -p /workspace/d/e && ln -sfn / /workspace/root && ln -sfn d/e /workspace/inner"
    }));
    assert_eq!(status, 200, "{text}");
    for (workdir, pwd) in [
        ("/workspace/d/../d", "/workspace/d"),
        ("/workspace/d/e/../..", "/workspace"),
        ("d/./e/..", "/workspace/d"),
        ("/workspace/d/../../workspace/d/e", "/workspace/d/e"),
        ("inner/../d", "/workspace/d"),
        // Resolved on the text like a shell's `cd`: the link is never followed.
        ("root/..", "/workspace"),
    ] {
        let (status, text) = exec(serde_json::json!({"command": "pwd", "workdir": workdir}));
        assert_eq!(status, 200, "{workdir}: {text}");
        let out = json(&text)["content"][0]["text"].clone();
        assert_eq!(out, pwd, "{workdir}");
    }
    for workdir in [
        "/workspace/..",
        "/workspace/d/../..",
        "/workspace/d/../../etc",
        "../../etc",
        "d/../../..",
        "/workspace/../workspace-other",
        "root",
        "/workspace/d/../root",
        "root/etc",
        "/etc",
    ] {
        let (status, text) = exec(serde_json::json!({"command": "pwd", "workdir": workdir}));
        assert_eq!(status, 400, "{workdir}: {text}");
        let err = error_of(&text);
        assert!(err.contains("leaves the workspace"), "{workdir}: {err}");
    }
}

#[tokio::test]
async fn error_texts_never_carry_raw_control_or_bidi_characters() {
    let Some(s) = server("edge-esc").await else {
        return;
    };
    let hostile = "\u{202e}evil\u{1b}]0;pwn\u{7}\u{1b}[2J\rfake\u{200b}";
    let exec = "/v1/sessions/edge-esc-a/exec";
    let process = "/v1/sessions/edge-esc-a/process";
    let cases = [
        (
            exec,
            serde_json::json!({"command": "true", "workdir": format!("/etc/{hostile}")}),
        ),
        (
            exec,
            serde_json::json!({"command": "true", "workdir": format!("/workspace/{hostile}")}),
        ),
        (
            exec,
            serde_json::json!({"command": "true", "host": hostile}),
        ),
        (
            exec,
            serde_json::json!({"command": "true", "env": {hostile: "x"}}),
        ),
        (exec, serde_json::json!({"command": "true", hostile: 1})),
        (process, serde_json::json!({"action": hostile})),
        (
            process,
            serde_json::json!({"action": "poll", "sessionId": hostile}),
        ),
    ];
    for (path, body) in cases {
        let (status, text) = http(
            &s.addr,
            "POST",
            path,
            Some(OPERATOR),
            body.to_string().as_bytes(),
        );
        let v = json(&text);
        let shown = match v["error"].as_str() {
            Some(e) => e.to_string(),
            None => v["content"][0]["text"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
        };
        assert!(!shown.is_empty(), "{body}: {status} {text}");
        assert!(
            !shown.chars().any(acts_on_terminal),
            "{body}: raw control or bidi character in {shown:?}"
        );
        assert!(shown.contains("\\u{202e}"), "{body}: {shown}");
    }
    // A key with a bidi override, percent-encoded in the path.
    let (status, text) = http(
        &s.addr,
        "POST",
        "/v1/sessions/a%E2%80%AEb%1B/exec",
        Some(OPERATOR),
        br#"{"command":"true"}"#,
    );
    assert_eq!(status, 400, "{text}");
    let err = error_of(&text);
    assert!(!err.chars().any(acts_on_terminal), "{err:?}");
    assert!(err.contains("\\u{202e}"), "{err}");
}
