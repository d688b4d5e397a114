//! `moat serve` as a separate process, spoken to over TCP and its unix socket: malformed
//! requests get JSON 4xx answers and the server keeps serving; tokens are enforced; the exit
//! event arrives over server-sent events.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;

use common::serve::{http, json, serve, Server};
use std::time::Duration;

const OPERATOR: &str = "operator-token-0123456789";
const AGENT: &str = "agent-token-abcdefghijkl";

async fn server(prefix: &'static str) -> Option<Server> {
    server_with(prefix, "").await
}

async fn server_with(prefix: &'static str, extra_config: &str) -> Option<Server> {
    serve(
        prefix,
        &format!("[serve]\noperator_token = \"{OPERATOR}\"\n[[serve.agents]]\ntoken = \"{AGENT}\"\nsession = \"{prefix}-agent\"\nagent = \"a1\"\n{extra_config}"),
    )
    .await
}

#[tokio::test]
async fn malformed_requests_get_json_4xx_and_the_server_keeps_serving() {
    let Some(s) = server("http-bad").await else {
        return;
    };
    let exec = "/v1/sessions/http-bad-a/exec";
    let process = "/v1/sessions/http-bad-a/process";
    let big = vec![b'a'; 2 << 20];
    let cases: Vec<(&str, &[u8], u16, &str)> = vec![
        (exec, b"{bad json", 400, "parse the request body"),
        (
            exec,
            br#"{"command":"echo","bogus":1}"#,
            400,
            "unknown field `bogus`",
        ),
        (exec, &big, 413, "length limit"),
        (exec, br#"{"command":"a\u0000b"}"#, 400, "NUL"),
        (
            exec,
            br#"{"command":""}"#,
            400,
            "failed to start the command: `command` is empty",
        ),
        (
            exec,
            br#"{"command":"true","env":{"BAD-KEY":"x"}}"#,
            400,
            "BAD-KEY",
        ),
        (
            process,
            br#"{"action":"dance"}"#,
            400,
            "`action` is dance, not one of list, poll",
        ),
        (
            process,
            br#"{"action":"poll"}"#,
            400,
            "it needs `sessionId`",
        ),
        (
            "/v1/sessions/bad%20key/exec",
            br#"{"command":"true"}"#,
            400,
            "session key",
        ),
    ];
    for (path, body, status, needle) in cases {
        let (got, text) = http(&s.addr, "POST", path, Some(OPERATOR), body);
        assert_eq!(got, status, "{path} {text}");
        let err = json(&text)["error"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        assert!(err.contains(needle), "{path}: {err}");
        // The next valid request still succeeds.
        let (ok, text) = http(
            &s.addr,
            "POST",
            exec,
            Some(OPERATOR),
            br#"{"command":"echo alive"}"#,
        );
        assert_eq!(ok, 200, "{text}");
        assert_eq!(json(&text)["content"][0]["text"], "alive");
    }
    let (got, _) = http(&s.addr, "GET", "/v1/nope", Some(OPERATOR), b"");
    assert_eq!(got, 404);
}

#[tokio::test]
async fn tokens_are_enforced() {
    let Some(s) = server("http-tok").await else {
        return;
    };
    let body = br#"{"command":"echo hi"}"#;
    assert_eq!(
        http(
            &s.addr,
            "POST",
            "/v1/sessions/http-tok-agent/exec",
            None,
            body
        )
        .0,
        401
    );
    assert_eq!(
        http(
            &s.addr,
            "POST",
            "/v1/sessions/http-tok-agent/exec",
            Some("wrong-token-000000000"),
            body
        )
        .0,
        401
    );
    assert_eq!(
        http(
            &s.addr,
            "POST",
            "/v1/sessions/http-tok-other/exec",
            Some(AGENT),
            body
        )
        .0,
        403
    );
    let (status, text) = http(
        &s.addr,
        "POST",
        "/v1/sessions/http-tok-agent/exec",
        Some(AGENT),
        body,
    );
    assert_eq!(status, 200, "{text}");
    let (_, list) = http(&s.addr, "GET", "/v1/sessions", Some(AGENT), b"");
    let sessions = json(&list)["sessions"].clone();
    assert!(
        sessions
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["session"] == "http-tok-agent"),
        "{sessions}"
    );
}

#[tokio::test]
async fn exit_event_arrives_over_sse() {
    let Some(s) = server("http-ev").await else {
        return;
    };
    let mut sse = TcpStream::connect(&s.addr).unwrap();
    sse.write_all(
        format!("GET /v1/sessions/http-ev-a/events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {OPERATOR}\r\nAccept: text/event-stream\r\n\r\n").as_bytes(),
    )
    .unwrap();
    sse.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut reader = BufReader::new(sse);
    let mut first = String::new();
    reader.read_line(&mut first).unwrap();
    assert!(first.contains("200"), "{first}");
    let (status, text) = http(
        &s.addr,
        "POST",
        "/v1/sessions/http-ev-a/exec",
        Some(OPERATOR),
        br#"{"command":"echo finished-marker; exit 2","background":true}"#,
    );
    assert_eq!(status, 200, "{text}");
    let id = json(&text)["details"]["sessionId"]
        .as_str()
        .unwrap()
        .to_string();
    let mut seen = String::new();
    for _ in 0..200 {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            break;
        }
        if line.starts_with("data:") && line.contains("Exec failed") {
            seen = line;
            break;
        }
    }
    let id8: String = id.chars().take(8).collect();
    assert!(
        seen.contains(&format!("Exec failed ({id8}, code 2) :: finished-marker")),
        "{seen:?}"
    );
}

#[tokio::test]
async fn only_the_operator_can_decide_an_approval() {
    let extra = "[policy.sandbox]\nask_patterns = [\"touch *\"]\n";
    let Some(s) = server_with("http-appr", extra).await else {
        return;
    };
    let (status, text) = http(
        &s.addr,
        "POST",
        "/v1/sessions/http-appr-agent/exec",
        Some(AGENT),
        br#"{"command":"touch /workspace/approved-marker"}"#,
    );
    assert_eq!(status, 200, "{text}");
    let pending = json(&text);
    assert_eq!(pending["details"]["status"], "approval-pending", "{text}");
    let id = pending["details"]["approvalId"]
        .as_str()
        .unwrap()
        .to_string();
    let decide = format!("/v1/approvals/{id}/decision");
    // The agent cannot approve its own request, nor list approvals.
    let (status, text) = http(
        &s.addr,
        "POST",
        &decide,
        Some(AGENT),
        br#"{"decision":"allow-once"}"#,
    );
    assert_eq!(status, 403, "{text}");
    assert_eq!(
        http(&s.addr, "GET", "/v1/approvals", Some(AGENT), b"").0,
        403
    );
    // The operator sees it pending and approves it; it runs once.
    let (status, list) = http(&s.addr, "GET", "/v1/approvals", Some(OPERATOR), b"");
    assert_eq!(status, 200);
    assert!(list.contains(&id), "{list}");
    let (status, text) = http(
        &s.addr,
        "POST",
        &decide,
        Some(OPERATOR),
        br#"{"decision":"allow-once"}"#,
    );
    assert_eq!(status, 200, "{text}");
    let (status, _) = http(
        &s.addr,
        "POST",
        &decide,
        Some(OPERATOR),
        br#"{"decision":"allow-once"}"#,
    );
    assert_eq!(status, 409, "a decided approval cannot be decided again");
    let mut ran = false;
    for _ in 0..50 {
        let (_, text) = http(
            &s.addr,
            "POST",
            "/v1/sessions/http-appr-agent/exec",
            Some(OPERATOR),
            br#"{"command":"ls /workspace"}"#,
        );
        if text.contains("approved-marker") {
            ran = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(ran, "the approved command ran");
}

/// Sends one request and returns the status and the response head, without waiting for the
/// body (an MCP `GET` is a stream that never ends on its own).
fn http_head(
    addr: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> (u16, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let extra: String = headers
        .iter()
        .map(|(k, v)| format!("{k}: {v}\r\n"))
        .collect();
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n{extra}Content-Length: {}\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes()).unwrap();
    s.write_all(body).unwrap();
    let mut reader = BufReader::new(s);
    let mut text = String::new();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
            break;
        }
        text.push_str(&line);
    }
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (status, text)
}

#[tokio::test]
async fn an_mcp_session_stays_with_the_token_that_opened_it() {
    const OTHER: &str = "other-agent-token-0123456789";
    let extra = format!(
        "[[serve.agents]]\ntoken = \"{OTHER}\"\nsession = \"http-own-other\"\nagent = \"a2\"\n"
    );
    let Some(s) = server_with("http-own", &extra).await else {
        return;
    };
    let init = br#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;
    let bearer = format!("Bearer {AGENT}");
    let json_headers = [
        ("Authorization", bearer.as_str()),
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
    ];
    let (status, head) = http_head(&s.addr, "POST", "/mcp", &json_headers, init);
    assert_eq!(status, 200, "{head}");
    let sid = head
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .starts_with("mcp-session-id:")
                .then(|| l[15..].trim().to_string())
        })
        .expect("an MCP session id");
    // Another agent's token with this session id is refused, on the stream and on delete.
    let other = format!("Bearer {OTHER}");
    for method in ["GET", "DELETE"] {
        let headers = [
            ("Authorization", other.as_str()),
            ("Mcp-Session-Id", sid.as_str()),
            ("Accept", "text/event-stream"),
        ];
        let (status, head) = http_head(&s.addr, method, "/mcp", &headers, b"");
        assert_eq!(status, 403, "{method}: {head}");
    }
    // Without a token at all: 401.
    let (status, _) = http_head(
        &s.addr,
        "GET",
        "/mcp",
        &[("Mcp-Session-Id", sid.as_str())],
        b"",
    );
    assert_eq!(status, 401);
    // The owner still reaches its stream.
    let headers = [
        ("Authorization", bearer.as_str()),
        ("Mcp-Session-Id", sid.as_str()),
        ("Accept", "text/event-stream"),
    ];
    let (status, head) = http_head(&s.addr, "GET", "/mcp", &headers, b"");
    assert_ne!(status, 403, "{head}");
}

/// `process log` over HTTP pages the whole output past the cap, and a `moat serve` that cut
/// the record by `exec.spill_max_bytes` says which lines it dropped (docs/mcp.md, `log`).
#[tokio::test]
async fn process_log_pages_the_whole_output_over_http() {
    let Some(s) = server_with("http-log", "[exec]\nspill_max_bytes = \"1m\"\n").await else {
        return;
    };
    let run = |cmd: &str| {
        let body = serde_json::json!({"command": cmd, "background": true}).to_string();
        let (status, text) = http(
            &s.addr,
            "POST",
            "/v1/sessions/http-log-a/exec",
            Some(OPERATOR),
            body.as_bytes(),
        );
        assert_eq!(status, 200, "{text}");
        json(&text)["details"]["sessionId"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let process = |body: serde_json::Value| {
        let (status, text) = http(
            &s.addr,
            "POST",
            "/v1/sessions/http-log-a/process",
            Some(OPERATOR),
            body.to_string().as_bytes(),
        );
        assert_eq!(status, 200, "{text}");
        json(&text)
    };
    let wait = |id: &str| {
        for _ in 0..60 {
            let r =
                process(serde_json::json!({"action": "poll", "sessionId": id, "timeout": 2000}));
            if r["details"]["status"] != "running" {
                return;
            }
        }
        panic!("{id} did not finish");
    };
    let id = run("seq 1 100000");
    wait(&id);
    let r =
        process(serde_json::json!({"action": "log", "sessionId": id, "offset": 4222, "limit": 5}));
    let text = r["content"][0]["text"].as_str().unwrap_or_default();
    assert!(text.starts_with("4222\n4223\n4224\n4225\n4226\n"), "{r}");
    assert_eq!(r["details"]["totalLines"], 100_000, "{r}");

    let id = run("seq 1 1500000");
    wait(&id);
    let r = process(serde_json::json!({"action": "log", "sessionId": id, "offset": 1, "limit": 2}));
    let first = r["details"]["firstLine"].as_u64().unwrap();
    assert!(first > 1_000_000, "{r}");
    assert_eq!(r["details"]["recordCut"], true, "{r}");
    assert_eq!(r["details"]["totalLines"], 1_500_000, "{r}");
    let body = r.to_string();
    assert!(
        body.contains(&format!("{first}\\n{}\\n", first + 1))
            && body.contains(&format!(
                "lines 1-{} were dropped: the record keeps the last 1 MiB",
                first - 1
            )),
        "{body}"
    );
}

/// Every refusal and error the API answers, each as its client reads it: a "failed to …"
/// fragment that completes the phrase (a verb after "failed to", never a sentence glued on:
/// "failed to Provide a command to start."), in the API's words (the body's fields), with
/// its status (docs/http-api.md, "Errors").
#[tokio::test]
async fn every_refusal_reads_failed_to() {
    let Some(s) = server("http-tx").await else {
        return;
    };
    let exec = "/v1/sessions/http-tx-agent/exec";
    let process = "/v1/sessions/http-tx-agent/process";
    let op = Some(OPERATOR);
    let agent = Some(AGENT);
    // (method, path, token, body, status, the whole text or its start)
    type Row<'a> = (&'a str, &'a str, Option<&'a str>, &'a [u8], u16, &'a str);
    let rows: Vec<Row> = vec![
        ("POST", exec, op, b"", 400, "failed to read the request body: it is empty (send a JSON object)"),
        ("POST", exec, op, b"{bad", 400, "failed to parse the request body: "),
        ("POST", exec, op, br#"{"command":""}"#, 400, "failed to start the command: `command` is empty (send the shell command to run)"),
        ("POST", exec, op, br#"{"command":"a\u0000b"}"#, 400, "failed to start the command: it contains a NUL byte"),
        ("POST", exec, op, br#"{"command":"true","host":"example.com"}"#, 400, "failed to run on host `example.com`: host accepts only"),
        ("POST", process, op, br#"{"action":"dance"}"#, 400, "failed to run the process action: `action` is dance, not one of list, poll, log, write, send-keys, submit, paste, kill, clear, remove"),
        ("POST", process, op, br#"{"action":"poll"}"#, 400, "failed to run the process action poll: it needs `sessionId`, the process id that exec returned (action list shows them)"),
        ("POST", "/v1/sessions/bad%20key/exec", op, br#"{"command":"true"}"#, 400, "failed to "),
        ("GET", "/v1/nope", op, b"", 404, "failed to find the endpoint: there is none at this path (see docs/http-api.md)"),
        ("DELETE", exec, op, b"", 405, "failed to call this endpoint with DELETE: it does not serve DELETE (the Allow header"),
        ("POST", exec, None, br#"{"command":"true"}"#, 401, "failed to identify the caller: a bearer token is required (Authorization: Bearer <token>)"),
        ("POST", exec, Some("wrong-token-000000000"), br#"{"command":"true"}"#, 401, "failed to identify the caller: unknown bearer token"),
        ("POST", "/v1/sessions/http-tx-other/exec", agent, br#"{"command":"true"}"#, 403, "failed to use session http-tx-other: this token is not allowed to (it names another session)"),
        ("GET", "/v1/approvals", agent, b"", 403, "failed to act as the operator: only the operator may do this; agent tokens cannot"),
    ];
    for (method, path, token, body, status, want) in rows {
        let (got, text) = http(&s.addr, method, path, token, body);
        assert_eq!(got, status, "{method} {path}: {text}");
        let err = json(&text)["error"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        assert!(err.starts_with(want), "{method} {path}: {err}");
        let rest = err
            .strip_prefix("failed to ")
            .unwrap_or_else(|| panic!("{err}"));
        assert!(
            rest.starts_with(|c: char| c.is_lowercase()) && !rest.starts_with("failed to"),
            "{method} {path}: {err}"
        );
    }
}
