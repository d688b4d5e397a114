//! The operator console's rules as attacks over plain HTTP against a real `moat serve`
//! (docs/console.md): an agent's token is refused on every console route and each attempt is
//! audited; every state-changing form without the session's CSRF token is refused and changes
//! nothing; sign-in needs its own CSRF token and the operator token; a forged or signed-out
//! cookie is worth nothing; every answer carries the security headers; on the socket the
//! operator signs in without a token, over TCP never.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use common::serve::{http, json, serve, Server};

const OPERATOR: &str = "console-http-operator-0123";
const AGENT: &str = "console-http-agent-0123456";
const PREFIX: &str = "uihttp";

fn config() -> String {
    format!(
        r#"
[serve]
operator_token = "{OPERATOR}"
[[serve.agents]]
token = "{AGENT}"
session = "{PREFIX}-agent"
agent = "a9"

[elevated]
enabled = true
allow_from = {{ http = ["operator"] }}

[approvals]
timeout_secs = 600
"#
    )
}

/// One answer: status, headers (lower-case names), body.
struct Answer {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl Answer {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    fn cookies(&self) -> Vec<&str> {
        self.headers
            .iter()
            .filter(|(k, _)| k == "set-cookie")
            .map(|(_, v)| v.as_str())
            .collect()
    }
}

/// One request over TCP with `Connection: close`; `extra` are whole header lines.
fn request(addr: &str, method: &str, path: &str, extra: &[String], body: &str) -> Answer {
    let s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    exchange(s, method, path, extra, body)
}

/// The same over the daemon's unix socket.
fn request_unix(
    sock: &std::path::Path,
    method: &str,
    path: &str,
    extra: &[String],
    body: &str,
) -> Answer {
    let s = std::os::unix::net::UnixStream::connect(sock).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    exchange(s, method, path, extra, body)
}

fn exchange(
    mut s: impl Read + Write,
    method: &str,
    path: &str,
    extra: &[String],
    body: &str,
) -> Answer {
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n");
    for h in extra {
        head.push_str(h);
        head.push_str("\r\n");
    }
    if method == "POST" {
        head.push_str(&format!(
            "Content-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n",
            body.len()
        ));
    }
    head.push_str("\r\n");
    s.write_all(head.as_bytes()).unwrap();
    s.write_all(body.as_bytes()).unwrap();
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    let (head, body) = out.split_once("\r\n\r\n").unwrap_or((&out, ""));
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    Answer {
        status,
        headers,
        body: body.to_string(),
    }
}

/// The value of `name=` in a `Set-Cookie`.
fn cookie_value<'a>(set_cookie: &'a str, name: &str) -> Option<&'a str> {
    set_cookie
        .split(';')
        .next()?
        .strip_prefix(&format!("{name}="))
}

/// The first hidden `csrf` field of a page.
fn csrf_of(page: &str) -> String {
    let at = page.find("name=\"csrf\" value=\"").expect("a csrf field") + 19;
    page[at..at + 64].to_string()
}

/// Signs in as the operator; returns the session cookie header line.
fn sign_in(s: &Server) -> String {
    let form = request(&s.addr, "GET", "/ui/sign-in", &[], "");
    let pre = form
        .cookies()
        .into_iter()
        .find_map(|c| cookie_value(c, "moat_console_sign_in"))
        .unwrap()
        .to_string();
    let csrf = csrf_of(&form.body);
    let done = request(
        &s.addr,
        "POST",
        "/ui/sign-in",
        &[format!("Cookie: moat_console_sign_in={pre}")],
        &format!("csrf={csrf}&token={OPERATOR}"),
    );
    assert_eq!(done.status, 303, "{}", done.body);
    let value = done
        .cookies()
        .into_iter()
        .find_map(|c| cookie_value(c, "moat_console").filter(|v| !v.is_empty()))
        .unwrap()
        .to_string();
    format!("Cookie: moat_console={value}")
}

fn assert_headers(a: &Answer, what: &str) {
    let csp = a.header("content-security-policy").unwrap_or_default();
    assert!(
        csp.contains("script-src 'self'") && !csp.contains("unsafe-inline"),
        "{what}: {csp}"
    );
    assert!(csp.contains("frame-ancestors 'none'"), "{what}: {csp}");
    assert_eq!(a.header("x-frame-options"), Some("DENY"), "{what}");
    assert_eq!(a.header("referrer-policy"), Some("no-referrer"), "{what}");
    assert_eq!(
        a.header("x-content-type-options"),
        Some("nosniff"),
        "{what}"
    );
}

#[tokio::test]
async fn console_refuses_agents_forged_cookies_and_forms_without_csrf() {
    let Some(s) = serve(PREFIX, &config()).await else {
        return;
    };
    // A pending host approval to aim the forms at.
    let (status, out) = http(
        &s.addr,
        "POST",
        &format!("/v1/sessions/{PREFIX}-host/exec"),
        Some(OPERATOR),
        br#"{"command": "/usr/bin/printf %s console-http-marker", "elevated": true}"#,
    );
    assert_eq!(status, 200, "{out}");
    let id = json(&out)["details"]["approvalId"]
        .as_str()
        .unwrap()
        .to_string();
    let cookie = sign_in(&s);

    let gets = [
        "/ui".to_string(),
        "/ui/sign-in".into(),
        "/ui/sessions".into(),
        format!("/ui/sessions/{PREFIX}-agent"),
        format!("/ui/sessions/{PREFIX}-agent/remove"),
        "/ui/approvals".into(),
        format!("/ui/approvals/{id}/always"),
        "/ui/audit".into(),
        "/ui/events".into(),
        "/ui/assets/console.css".into(),
        "/ui/assets/console.js".into(),
        "/ui/nothing-here".into(),
    ];
    let posts = [
        "/ui/sign-in".to_string(),
        "/ui/sign-out".into(),
        format!("/ui/sessions/{PREFIX}-agent/remove"),
        format!("/ui/sessions/{PREFIX}-agent/processes/p1/kill"),
        format!("/ui/approvals/{id}/decision"),
    ];

    // An agent's token: 403 on every route, whatever else the request holds (here even the
    // operator's own console cookie), and every attempt is audited.
    let agent = format!("Authorization: Bearer {AGENT}");
    let mut attempts = 0;
    for path in &gets {
        let a = request(&s.addr, "GET", path, &[agent.clone(), cookie.clone()], "");
        assert_eq!(a.status, 403, "GET {path}: {}", a.body);
        assert!(
            a.body.contains("only the operator"),
            "GET {path}: {}",
            a.body
        );
        assert_headers(&a, path);
        attempts += 1;
    }
    for path in &posts {
        let a = request(
            &s.addr,
            "POST",
            path,
            &[agent.clone(), cookie.clone()],
            "decision=allow-once",
        );
        assert_eq!(a.status, 403, "POST {path}: {}", a.body);
        attempts += 1;
    }
    // The agent's token typed into the sign-in form is refused too.
    let form = request(&s.addr, "GET", "/ui/sign-in", &[], "");
    let pre = form
        .cookies()
        .into_iter()
        .find_map(|c| cookie_value(c, "moat_console_sign_in"))
        .unwrap()
        .to_string();
    let a = request(
        &s.addr,
        "POST",
        "/ui/sign-in",
        &[format!("Cookie: moat_console_sign_in={pre}")],
        &format!("csrf={}&token={AGENT}", csrf_of(&form.body)),
    );
    assert_eq!(a.status, 403, "{}", a.body);
    assert!(
        !a.cookies().iter().any(|c| c.starts_with("moat_console=")),
        "no session for an agent"
    );
    attempts += 1;
    let audit = request(
        &s.addr,
        "GET",
        "/ui/audit?kind=console-refused",
        std::slice::from_ref(&cookie),
        "",
    );
    assert_eq!(audit.status, 200);
    assert_eq!(
        audit.body.matches("<td>agent:a9</td>").count(),
        attempts,
        "every refused attempt is in the audit log"
    );

    // Forms without this session's CSRF token (missing, empty, another token) change
    // nothing; the approval stays pending and the session stays signed in.
    for path in &posts[1..] {
        for body in [
            "decision=allow-once".to_string(),
            "decision=allow-once&csrf=".into(),
            format!("decision=allow-once&csrf={}", "0".repeat(64)),
        ] {
            let a = request(&s.addr, "POST", path, std::slice::from_ref(&cookie), &body);
            assert_eq!(a.status, 403, "POST {path} {body}: {}", a.body);
            assert!(a.body.contains("CSRF"), "{}", a.body);
            assert_headers(&a, path);
        }
    }
    let (_, out) = http(
        &s.addr,
        "GET",
        &format!("/v1/approvals/{id}"),
        Some(OPERATOR),
        b"",
    );
    assert_eq!(json(&out)["status"], "pending", "{out}");
    let page = request(
        &s.addr,
        "GET",
        "/ui/approvals",
        std::slice::from_ref(&cookie),
        "",
    );
    assert_eq!(page.status, 200, "still signed in");
    assert!(page.body.contains("console-http-marker"));

    // Sign-in needs the token bound to its own cookie: another page's token, none, or no
    // cookie are refused, and nothing is signed in.
    let form = request(&s.addr, "GET", "/ui/sign-in", &[], "");
    let csrf = csrf_of(&form.body);
    for (extra, body) in [
        (vec![], format!("csrf={csrf}&token={OPERATOR}")),
        (
            vec![format!("Cookie: moat_console_sign_in={}", "1".repeat(64))],
            format!("csrf={csrf}&token={OPERATOR}"),
        ),
        (
            vec![format!("Cookie: moat_console_sign_in={csrf}")],
            format!("token={OPERATOR}"),
        ),
    ] {
        let a = request(&s.addr, "POST", "/ui/sign-in", &extra, &body);
        assert_eq!(a.status, 403, "{extra:?} {body}: {}", a.body);
        assert!(a.cookies().iter().all(|c| !c.starts_with("moat_console=")));
    }
    // A wrong token: 401 and the form again.
    let a = request(
        &s.addr,
        "POST",
        "/ui/sign-in",
        &[format!("Cookie: moat_console_sign_in={csrf}")],
        &format!("csrf={csrf}&token=not-the-token-at-all"),
    );
    assert_eq!(a.status, 401, "{}", a.body);
    assert!(a.body.contains("not the operator token"));

    // The session cookie is HttpOnly, SameSite=Strict, scoped to /ui and expires.
    let form = request(&s.addr, "GET", "/ui/sign-in", &[], "");
    let pre = csrf_of(&form.body);
    let done = request(
        &s.addr,
        "POST",
        "/ui/sign-in",
        &[format!("Cookie: moat_console_sign_in={pre}")],
        &format!("csrf={pre}&token={OPERATOR}"),
    );
    let set = done
        .cookies()
        .into_iter()
        .find(|c| c.starts_with("moat_console="))
        .unwrap()
        .to_string();
    for part in ["HttpOnly", "SameSite=Strict", "Path=/ui", "Max-Age=28800"] {
        assert!(set.split("; ").any(|p| p == part), "{set}: {part}");
    }

    // A forged cookie, no cookie, or a signed-out one: sent to the sign-in form, and a form
    // posted with one does nothing.
    let forged = format!("Cookie: moat_console={}", "a".repeat(64));
    for extra in [vec![forged.clone()], vec![]] {
        let a = request(&s.addr, "GET", "/ui/approvals", &extra, "");
        assert_eq!(a.status, 303);
        assert_eq!(a.header("location"), Some("/ui/sign-in"));
        let a = request(
            &s.addr,
            "POST",
            &format!("/ui/approvals/{id}/decision"),
            &extra,
            "decision=allow-once",
        );
        assert_eq!(a.status, 303);
    }
    let page = request(
        &s.addr,
        "GET",
        "/ui/sessions",
        std::slice::from_ref(&cookie),
        "",
    );
    let csrf = csrf_of(&page.body);
    let out = request(
        &s.addr,
        "POST",
        "/ui/sign-out",
        std::slice::from_ref(&cookie),
        &format!("csrf={csrf}"),
    );
    assert_eq!(out.status, 303);
    assert!(out
        .cookies()
        .iter()
        .any(|c| c.starts_with("moat_console=;") && c.contains("Max-Age=0")));
    let a = request(
        &s.addr,
        "GET",
        "/ui/sessions",
        std::slice::from_ref(&cookie),
        "",
    );
    assert_eq!(a.status, 303, "the old cookie no longer signs in");
    let (_, out) = http(
        &s.addr,
        "GET",
        &format!("/v1/approvals/{id}"),
        Some(OPERATOR),
        b"",
    );
    assert_eq!(json(&out)["status"], "pending", "{out}");

    // On the socket the operator needs no token (docs/http-api.md, "Who is calling"): an
    // empty one signs in there, and nowhere else.
    let sock = s.dir.path().join("moat.sock");
    let form = request_unix(&sock, "GET", "/ui/sign-in", &[], "");
    assert_eq!(form.status, 200);
    assert_headers(&form, "socket sign-in");
    assert!(form.body.contains("may stay empty"), "{}", form.body);
    let pre = csrf_of(&form.body);
    let done = request_unix(
        &sock,
        "POST",
        "/ui/sign-in",
        &[format!("Cookie: moat_console_sign_in={pre}")],
        &format!("csrf={pre}&token="),
    );
    assert_eq!(done.status, 303, "{}", done.body);
    let value = done
        .cookies()
        .into_iter()
        .find_map(|c| cookie_value(c, "moat_console").filter(|v| !v.is_empty()))
        .unwrap()
        .to_string();
    let page = request_unix(
        &sock,
        "GET",
        "/ui/approvals",
        &[format!("Cookie: moat_console={value}")],
        "",
    );
    assert_eq!(page.status, 200);
    assert!(page.body.contains("console-http-marker"));
    let form = request(&s.addr, "GET", "/ui/sign-in", &[], "");
    let pre = csrf_of(&form.body);
    let a = request(
        &s.addr,
        "POST",
        "/ui/sign-in",
        &[format!("Cookie: moat_console_sign_in={pre}")],
        &format!("csrf={pre}&token="),
    );
    assert_eq!(a.status, 401, "an empty token over TCP: {}", a.body);
}
