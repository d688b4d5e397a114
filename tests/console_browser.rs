//! The operator console (docs/console.md) in a real browser against a real `moat serve` and
//! Docker engine: sign in, watch a session appear live, follow a process's output, decide
//! host approvals from the page (and see decisions made elsewhere arrive), read the audit log;
//! hostile commands and output render inert, with their bidi override visible; agent tokens
//! and forms without a CSRF token are refused. Takes the screenshots of docs/console/ (under
//! target/console-screenshots/; scripts/console-screenshots copies them into the docs).

mod common;

#[path = "console/browser.rs"]
mod browser;

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::serve::{http, json, serve, Server};
use fantoccini::Locator;

const OPERATOR: &str = "console-operator-token-0123";
const AGENT: &str = "console-agent-token-0123456";
const PREFIX: &str = "uibrowser";

fn config() -> String {
    format!(
        r#"
[serve]
operator_token = "{OPERATOR}"
[[serve.agents]]
token = "{AGENT}"
session = "{PREFIX}-agent"
agent = "a1"
provider = "slack"
sender = "U1"

[elevated]
enabled = true
allow_from = {{ http = ["operator"] }}

[approvals]
timeout_secs = 600
"#
    )
}

/// An exec through the API as the operator; returns the tool result.
fn exec(s: &Server, session: &str, body: serde_json::Value) -> serde_json::Value {
    let (status, out) = http(
        &s.addr,
        "POST",
        &format!("/v1/sessions/{session}/exec"),
        Some(OPERATOR),
        body.to_string().as_bytes(),
    );
    assert_eq!(status, 200, "{out}");
    json(&out)
}

/// A host command that waits for an approval; returns the approval's id.
fn host_exec(s: &Server, session: &str, command: &str) -> String {
    let r = exec(
        s,
        session,
        serde_json::json!({"command": command, "elevated": true}),
    );
    assert_eq!(r["details"]["status"], "approval-pending", "{r}");
    r["details"]["approvalId"].as_str().unwrap().to_string()
}

/// The `data:` lines of a session's API event stream, as they arrive.
fn subscribe(addr: &str, session: &str) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    let mut sock = TcpStream::connect(addr).unwrap();
    write!(
        sock,
        "GET /v1/sessions/{session}/events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {OPERATOR}\r\nAccept: text/event-stream\r\n\r\n"
    )
    .unwrap();
    std::thread::spawn(move || {
        let mut lines = BufReader::new(sock);
        let mut line = String::new();
        while lines.read_line(&mut line).is_ok_and(|n| n > 0) {
            if let Some(data) = line.trim_end().strip_prefix("data: ") {
                if tx.send(data.to_string()).is_err() {
                    return;
                }
            }
            line.clear();
        }
    });
    rx
}

/// Waits for an event (its first data line) that starts with `prefix`.
fn event(rx: &mpsc::Receiver<String>, prefix: &str, secs: u64) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(secs);
    let mut seen = Vec::new();
    while let Some(left) = deadline.checked_duration_since(Instant::now()) {
        match rx.recv_timeout(left) {
            Ok(line) if line.starts_with(prefix) => {
                // The rest of the event's lines follow at once.
                let mut all = vec![line];
                while let Ok(more) = rx.recv_timeout(Duration::from_millis(300)) {
                    all.push(more);
                }
                return all;
            }
            Ok(line) => seen.push(line),
            Err(_) => break,
        }
    }
    panic!("no event starting with {prefix:?} within {secs}s; saw {seen:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operator_console_in_a_browser() {
    let Some(server) = serve(PREFIX, &config()).await else {
        return;
    };
    let Some(b) = browser::start().await else {
        return;
    };
    let base = format!("http://{}", server.addr);
    let ui = |path: &str| format!("{base}{path}");

    // Signed out, every page leads to the sign-in form.
    b.goto(&ui("/ui")).await;
    b.wait_text("h1", "moat", 10).await;
    assert!(b
        .client
        .current_url()
        .await
        .unwrap()
        .path()
        .ends_with("/ui/sign-in"));
    b.screenshot("sign-in").await;

    // An agent's token in the form is refused (and audited, checked below).
    b.client
        .find(Locator::Css("#token"))
        .await
        .unwrap()
        .send_keys(AGENT)
        .await
        .unwrap();
    b.client
        .find(Locator::Css("button[type=submit]"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    b.wait_text(".error", "only the operator", 10).await;

    // Signing in with the keyboard alone: the token field has focus, Enter submits.
    b.goto(&ui("/ui/sign-in")).await;
    b.wait_text("h1", "moat", 10).await;
    let focused = b.client.active_element().await.unwrap();
    assert_eq!(focused.attr("id").await.unwrap().as_deref(), Some("token"));
    focused
        .send_keys(&format!("{OPERATOR}\u{E007}"))
        .await
        .unwrap();
    b.wait_text("h1", "Sessions", 10).await;
    b.wait_text(".empty", "moat exec", 10).await;
    let cookie = b.client.get_named_cookie("moat_console").await.unwrap();
    assert_eq!(cookie.http_only(), Some(true));
    assert_eq!(
        cookie.same_site().map(|s| s.to_string()).as_deref(),
        Some("Strict")
    );
    assert!(cookie.expires().is_some(), "the session cookie expires");
    // The token never went into an address.
    assert!(!b
        .client
        .current_url()
        .await
        .unwrap()
        .as_str()
        .contains(OPERATOR));

    // A session appears on the open page when an exec runs (no reload: the marker survives).
    b.js("window.__stayed = 1;").await;
    let s1 = format!("{PREFIX}-work");
    let r = exec(
        &server,
        &s1,
        serde_json::json!({
            "command": "for i in 1 2 3 4 5; do echo tick $i; sleep 1; done; sleep 120",
            "background": true
        }),
    );
    let proc_id = r["details"]["sessionId"].as_str().unwrap().to_string();
    b.wait_text("#sessions a.key", &s1, 30).await;
    assert_eq!(
        b.js("return window.__stayed;").await,
        1,
        "the page was not reloaded"
    );
    b.wait_text("#sessions", "running", 10).await;

    // Hostile text in a command and its output.
    let hostile = format!("{PREFIX}-hostile");
    let payload = "<script>window.__pwned=1</script><img src=x onerror=window.__pwned=2>";
    exec(
        &server,
        &hostile,
        serde_json::json!({
            "command": format!("printf '%s\\n' '{payload}' '\u{1b}[31mRED\u{1b}[0m' 'abc\u{202E}cod.exe'; sleep 120"),
            "background": true
        }),
    );
    b.wait_text("#sessions a.key", &hostile, 30).await;
    b.screenshot("sessions").await;

    // The session page: its process, the live output tail, kill.
    b.client
        .find(Locator::LinkText(&s1))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    b.wait_text("h1", &s1, 10).await;
    b.wait_text("table.list", &proc_id, 10).await;
    b.client
        .find(Locator::Css(&format!("a[href$='process={proc_id}#tail']")))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    b.wait_text("pre.output", "tick 1", 15).await;
    // The tail follows the output while the process runs.
    b.wait_text("pre.output", "tick 4", 15).await;
    b.screenshot("session").await;
    b.client
        .find(Locator::Css("form[action$='/kill'] button"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    b.wait_text("table.list .badge", "failed", 20).await;

    // The hostile session: the command shows its ESC and U+202E as marks, the output is
    // inert text, nothing ran.
    b.goto(&ui(&format!("/ui/sessions/{hostile}"))).await;
    let cmd = b.wait_text("pre.cmd", "cod.exe", 10).await;
    let marks: Vec<String> = {
        let mut v = Vec::new();
        for m in cmd.find_all(Locator::Css(".mark")).await.unwrap() {
            v.push(m.text().await.unwrap());
        }
        v
    };
    assert_eq!(marks, ["U+001B", "U+001B", "U+202E"], "{marks:?}");
    let hostile_proc = b
        .client
        .find(Locator::Css("a[href*='process=']"))
        .await
        .unwrap()
        .attr("href")
        .await
        .unwrap()
        .unwrap();
    b.goto(&ui(&hostile_proc)).await;
    let out = b.wait_text("pre.output", "onerror", 15).await;
    let text = out.text().await.unwrap();
    assert!(text.contains(payload), "{text}");
    assert!(
        !text.contains('\u{1b}') && !text.contains('\u{202E}'),
        "{text:?}"
    );
    assert_inert(&b).await;

    // Removing a session asks first; the confirmation's button has the focus, Enter removes.
    b.goto(&ui("/ui/sessions")).await;
    b.client
        .find(Locator::Css(&format!(
            "a[href='/ui/sessions/{hostile}/remove']"
        )))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    b.wait_text(".confirm", "workspace stays on disk", 10).await;
    let focused = b.client.active_element().await.unwrap();
    assert!(
        focused
            .text()
            .await
            .unwrap()
            .contains(&format!("Remove session {hostile}")),
        "the confirmation's button has the focus"
    );
    focused.send_keys("\u{E007}").await.unwrap();
    b.wait_text("h1", "Sessions", 10).await;
    b.wait_gone("#sessions a.key", &hostile, 20).await;
    b.wait_text("#sessions a.key", &s1, 10).await;
    let left = std::process::Command::new("docker")
        .args(["ps", "-aq", "--filter", &format!("name=moat-{hostile}-")])
        .output()
        .unwrap();
    assert!(left.stdout.is_empty(), "the container is removed");

    // Approvals: a host command waits; the page shows it live, with its whole plan.
    let events = subscribe(&server.addr, &format!("{PREFIX}-host"));
    b.goto(&ui("/ui/approvals")).await;
    b.wait_text(".empty", "Nothing waits", 10).await;
    b.js("window.__stayed = 2;").await;
    let host_s = format!("{PREFIX}-host");
    let approve_cmd = format!(
        "echo '{payload}' '\u{1b}[31mRED\u{1b}[0m' 'abc\u{202E}cod.exe' console-approved-marker"
    );
    let id1 = host_exec(&server, &host_s, &approve_cmd);
    let slug1 = &id1[..8];
    let item = b.wait_text(".pending-item", slug1, 20).await;
    assert_eq!(
        b.js("return window.__stayed;").await,
        2,
        "the page was not reloaded"
    );
    // The plan is complete and the override is a visible mark where it really is.
    let plan = item.find(Locator::Css(".plan pre")).await.unwrap();
    let plan_text = plan.text().await.unwrap();
    assert!(
        plan_text.contains("'abcU+202Ecod.exe' console-approved-marker"),
        "{plan_text}"
    );
    assert!(!plan_text.contains('\u{202E}'), "{plan_text:?}");
    assert!(plan_text.contains(payload), "{plan_text}");
    let warn = item
        .find(Locator::Css(".warn"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(warn.contains("invisible or direction-changing"), "{warn}");
    let argv = item
        .find(Locator::Css("ol.argv"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(argv.contains("echo"), "{argv}");
    assert!(
        item.text()
            .await
            .unwrap()
            .contains("host: runs on moat's machine"),
        "the target is named"
    );
    assert_inert(&b).await;
    b.screenshot("approvals").await;

    // Approve it from the page; the command's result event arrives.
    item.find(Locator::Css("button[value=allow-once]"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    b.wait_gone(".pending-item", slug1, 10).await;
    let done = event(&events, &format!("Exec finished (host id={id1}"), 30).join("\n");
    assert!(done.contains("console-approved-marker"), "{done}");

    // Deny another, with the keyboard.
    let id2 = host_exec(&server, &host_s, "/usr/bin/printf %s console-denied-marker");
    let item = b.wait_text(".pending-item", &id2[..8], 20).await;
    item.find(Locator::Css("button[value=deny]"))
        .await
        .unwrap()
        .send_keys("\u{E007}")
        .await
        .unwrap();
    b.wait_gone(".pending-item", &id2[..8], 10).await;
    let denied = event(&events, &format!("Exec denied (host id={id2}"), 30).join("\n");
    assert!(denied.contains("user-denied"), "{denied}");

    // A decision made elsewhere (the API, as the CLI would) shows up live.
    let id3 = host_exec(
        &server,
        &host_s,
        "/usr/bin/printf %s console-elsewhere-marker",
    );
    b.wait_text(".pending-item", &id3[..8], 20).await;
    b.js("window.__stayed = 3;").await;
    let (status, out) = http(
        &server.addr,
        "POST",
        &format!("/v1/approvals/{id3}/decision"),
        Some(OPERATOR),
        br#"{"decision":"deny"}"#,
    );
    assert_eq!(status, 200, "{out}");
    b.wait_gone(".pending-item", &id3[..8], 15).await;
    b.wait_text("article.status-denied", &id3[..8], 10).await;
    assert_eq!(
        b.js("return window.__stayed;").await,
        3,
        "the page was not reloaded"
    );

    // Allow always asks again, naming exactly what it allowlists for good.
    let id4 = host_exec(&server, &host_s, "/usr/bin/true console-always-marker");
    let item = b.wait_text(".pending-item", &id4[..8], 20).await;
    item.find(Locator::Css("button[value=allow-always]"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    b.wait_text("h1", "Allow always?", 10).await;
    let entries = b.wait_text("ul.entries", "/usr/bin/true", 10).await;
    assert_eq!(
        entries.find_all(Locator::Css("li")).await.unwrap().len(),
        1,
        "one entry: {}",
        entries.text().await.unwrap()
    );
    b.screenshot("allow-always").await;
    b.client
        .find(Locator::Css("form button.primary"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    b.wait_text(
        "article.status-used, article.status-approved",
        &id4[..8],
        20,
    )
    .await;
    event(&events, &format!("Exec finished (host id={id4}"), 30);

    // Forms without this session's CSRF token, and an agent's token, are refused.
    let post = |path: &str, body: &str| {
        format!(
            "const r = await fetch('{path}', {{method: 'POST', headers: {{'Content-Type': 'application/x-www-form-urlencoded'}}, body: '{body}'}}); return r.status;"
        )
    };
    let refused = [
        b.js_async(&post(&format!("/ui/approvals/{id1}/decision"), "decision=deny")).await,
        b.js_async(&post(
            &format!("/ui/approvals/{id1}/decision"),
            &format!("decision=deny&csrf={}", "f".repeat(64)),
        ))
        .await,
        b.js_async(&format!(
            "const r = await fetch('/ui/sessions', {{headers: {{'Authorization': 'Bearer {AGENT}'}}}}); return r.status;"
        ))
        .await,
        b.js_async(&post("/ui/sign-out", "")).await,
    ];
    let refused = serde_json::json!(refused);
    assert_eq!(
        refused,
        serde_json::json!([403, 403, 403, 403]),
        "{refused}"
    );
    // Still signed in: the refused sign-out did nothing.
    b.goto(&ui("/ui/audit")).await;
    b.wait_text("h1", "Audit", 10).await;

    // The audit page: requests, decisions (from the page: web), runs, the allowlist change
    // and the refused agent.
    let table = b.wait_text("table.audit", "console-refused", 10).await;
    let all = table.text().await.unwrap();
    for want in [
        "approval-request",
        "approval-decision",
        "elevated-run",
        "allowlist-add",
        "web:operator",
        "agent:a1",
    ] {
        assert!(
            all.contains(want),
            "{want} missing from the audit page:\n{all}"
        );
    }
    b.screenshot("audit").await;
    b.goto(&ui("/ui/audit?kind=approval-decision")).await;
    let rows = b
        .client
        .find_all(Locator::Css("table.audit tbody tr"))
        .await
        .unwrap();
    assert_eq!(rows.len(), 4, "four decisions");
    for r in rows {
        assert!(r.text().await.unwrap().contains("approval-decision"));
    }

    // Phone width: the sessions page still reads, without sideways scrolling.
    b.viewport(390, 844).await;
    b.goto(&ui("/ui/sessions")).await;
    b.wait_text("#sessions a.key", &s1, 10).await;
    let wide = b
        .js("return document.documentElement.scrollWidth > window.innerWidth + 1;")
        .await;
    assert_eq!(wide, false, "the page scrolls sideways at phone width");
    b.screenshot("sessions-phone").await;
    b.viewport(1280, 800).await;

    // Sign out: the cookie is gone and pages lead to the sign-in form again.
    b.goto(&ui("/ui/sessions")).await;
    b.client
        .find(Locator::Css("form[action='/ui/sign-out'] button"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    b.wait_text("h1", "moat", 10).await;
    b.goto(&ui("/ui/approvals")).await;
    b.wait_text("label", "Operator token", 10).await;
}

/// Nothing an agent wrote ran or became markup: no script or image element came from it, and
/// the handlers it carried never fired.
async fn assert_inert(b: &browser::Browser) {
    let pwned = b.js("return window.__pwned === undefined;").await;
    assert_eq!(pwned, true, "an agent's script ran");
    let injected = b
        .js("return document.querySelectorAll('main script, main img, [onerror]').length;")
        .await;
    assert_eq!(injected, 0, "an agent's markup became elements");
}
