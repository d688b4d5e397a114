//! `GET /metrics` of a real `moat serve` over TCP: it parses as the Prometheus text format,
//! its counters move as execs run, and only the operator reads it (docs/http-api.md,
//! "Metrics").

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use common::serve::{http, serve};
use prometheus_parse::{Sample, Scrape, Value};

const OPERATOR: &str = "operator-token-0123456789";
const AGENT: &str = "agent-token-abcdefghijkl";
const PREFIX: &str = "t-metrics";

/// `GET /metrics` with `token`: (status, content type, body).
fn get_metrics(addr: &str, token: Option<&str>) -> (u16, String, String) {
    get(addr, "/metrics", token)
}

/// `GET path` with `token`: (status, content type, body).
fn get(addr: &str, path: &str, token: Option<&str>) -> (u16, String, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let auth = token
        .map(|t| format!("Authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: x\r\n{auth}Connection: close\r\n\r\n"
    )
    .unwrap();
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    let (head, body) = out.split_once("\r\n\r\n").unwrap_or((&out, ""));
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let content_type = head
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("content-type")
                .then(|| v.trim().to_string())
        })
        .unwrap_or_default();
    (status, content_type, body.to_string())
}

/// The operator's scrape, parsed.
fn scrape(addr: &str) -> Scrape {
    let (status, content_type, body) = get_metrics(addr, Some(OPERATOR));
    assert_eq!(status, 200, "{body}");
    assert_eq!(content_type, "text/plain; version=0.0.4; charset=utf-8");
    Scrape::parse(body.lines().map(|l| Ok(l.to_string()))).expect("the text format parses")
}

/// The samples of `metric` whose labels include `labels`.
fn samples<'a>(s: &'a Scrape, metric: &str, labels: &[(&str, &str)]) -> Vec<&'a Sample> {
    s.samples
        .iter()
        .filter(|x| x.metric == metric && labels.iter().all(|(k, v)| x.labels.get(k) == Some(v)))
        .collect()
}

/// A counter's value (0 while the series has not appeared yet).
fn counter(s: &Scrape, metric: &str, labels: &[(&str, &str)]) -> f64 {
    samples(s, metric, labels)
        .iter()
        .map(|x| match x.value {
            Value::Counter(v) => v,
            ref other => panic!("{metric} is not a counter: {other:?}"),
        })
        .sum()
}

/// A gauge's value.
fn gauge(s: &Scrape, metric: &str) -> f64 {
    match samples(s, metric, &[]).first().map(|x| &x.value) {
        Some(Value::Gauge(v)) => *v,
        other => panic!("{metric} is not a gauge: {other:?}"),
    }
}

/// Observations in a histogram, over all its label sets: its `+Inf` buckets.
fn observed(s: &Scrape, metric: &str) -> f64 {
    samples(s, metric, &[])
        .iter()
        .map(|x| match &x.value {
            Value::Histogram(buckets) => buckets
                .iter()
                .find(|b| b.less_than.is_infinite())
                .map_or(0.0, |b| b.count),
            other => panic!("{metric} is not a histogram: {other:?}"),
        })
        .sum()
}

fn exec(addr: &str, command: &str) -> String {
    let body = serde_json::json!({ "command": command }).to_string();
    let (status, text) = http(
        addr,
        "POST",
        &format!("/v1/sessions/{PREFIX}-a/exec"),
        Some(OPERATOR),
        body.as_bytes(),
    );
    assert_eq!(status, 200, "{text}");
    text
}

#[tokio::test]
async fn metrics_parse_move_with_execs_and_are_the_operators() {
    let config = format!(
        "[serve]\noperator_token = \"{OPERATOR}\"\n[[serve.agents]]\ntoken = \"{AGENT}\"\nsession = \"{PREFIX}-agent\"\nagent = \"a1\"\n"
    );
    let Some(s) = serve(PREFIX, &config).await else {
        return;
    };
    // Only the operator: an agent's token is refused, no token is not identified.
    let (status, _, body) = get_metrics(&s.addr, Some(AGENT));
    assert_eq!(status, 403, "{body}");
    assert!(body.contains("only the operator"), "{body}");
    assert_eq!(get_metrics(&s.addr, None).0, 401);
    // The pool's view spans every session too (docs/pool.md, "Seeing the pool").
    let (status, _, body) = get(&s.addr, "/v1/pool", Some(AGENT));
    assert_eq!(status, 403, "{body}");
    let (status, _, body) = get(&s.addr, "/v1/pool", Some(OPERATOR));
    assert_eq!(status, 200, "{body}");
    let pool: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(pool, serde_json::json!({"shapes": [], "unkeptMisses": 0}));

    let before = scrape(&s.addr);
    assert!(gauge(&before, "process_resident_memory_bytes") > 1e6);
    assert!(gauge(&before, "process_open_fds") >= 3.0);
    assert_eq!(gauge(&before, "moat_approvals_pending"), 0.0);
    assert!(exec(&s.addr, "echo one").contains("one"));
    assert!(exec(&s.addr, "echo two").contains("two"));
    assert!(exec(&s.addr, "exit 3").contains("code 3"));
    let after = scrape(&s.addr);
    let moved = |metric: &str, labels: &[(&str, &str)]| {
        counter(&after, metric, labels) - counter(&before, metric, labels)
    };
    assert_eq!(moved("moat_execs_total", &[("outcome", "completed")]), 2.0);
    assert_eq!(moved("moat_execs_total", &[("outcome", "failed")]), 1.0);
    // The first exec made the session's container; all three ran in the foreground.
    assert_eq!(
        moved("moat_sandbox_starts_total", &[("kind", "created")]),
        1.0
    );
    assert_eq!(observed(&after, "moat_sandbox_start_duration_seconds"), 1.0);
    assert!(
        observed(&after, "moat_exec_duration_seconds")
            - observed(&before, "moat_exec_duration_seconds")
            >= 3.0
    );
    assert_eq!(gauge(&after, "moat_processes_running"), 0.0);
}
