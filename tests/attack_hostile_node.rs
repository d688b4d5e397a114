//! Attacks by a hostile paired node on its gateway (docs/nodes.md, "Events"; docs/security.md,
//! "What a node reaches on the gateway"): a node holds a pairing and answers however it likes.
//! The node here is a TLS server of the test's own (moat's node certificate, made in a
//! throwaway home, so the gateway pins it as it would a real one) that answers every call with
//! what an attacker would: a process id of megabytes, an event stream that ends at once, a
//! process list that never settles. The gateway is a real moat home and daemon.

mod common;

use std::convert::Infallible;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use common::cli_home::{text, TestHome};
use http_body_util::Full;
use hyper_util::rt::TokioIo;

/// What the fake node answers, and what it counts.
struct Fake {
    /// The `sessionId` its exec answers with.
    process_id: String,
    /// Calls to its event stream.
    event_calls: AtomicUsize,
}

fn running(id: &str) -> serde_json::Value {
    serde_json::json!({
        "content": [{"type": "text", "text": "Command still running"}],
        "details": {"status": "running", "sessionId": id, "pid": null, "startedAt": 0,
                    "cwd": "/workspace", "tail": ""},
    })
}

async fn answer(
    fake: Arc<Fake>,
    req: http::Request<hyper::body::Incoming>,
) -> http::Response<Full<Bytes>> {
    let json = |v: serde_json::Value| http::Response::new(Full::new(Bytes::from(v.to_string())));
    match req.uri().path() {
        "/node/v1/info" => json(serde_json::json!({
            "version": "0", "build": "fake", "offers": ["exec", "process", "events"],
            "nodeHosts": ["sandbox"], "gateway": "gw",
        })),
        "/node/v1/exec" => json(running(&fake.process_id)),
        // Every awaited process still runs, so nothing ever settles.
        "/node/v1/process" => json(serde_json::json!({
            "content": [{"type": "text", "text": "list"}],
            "details": {"status": "completed", "sessions": [{
                "command": "sleep", "cwd": "/workspace", "endedAt": null, "exitCode": null,
                "exitSignal": null, "runtimeMs": 1, "sessionId": fake.process_id,
                "startedAt": 0, "status": "running",
            }]},
        })),
        // A stream that ends as soon as it opened.
        "/node/v1/events" => {
            fake.event_calls.fetch_add(1, Ordering::SeqCst);
            http::Response::new(Full::new(Bytes::new()))
        }
        _ => {
            let mut r = http::Response::new(Full::new(Bytes::new()));
            *r.status_mut() = http::StatusCode::NOT_FOUND;
            r
        }
    }
}

/// Starts the fake node; its address and certificate fingerprint.
async fn fake_node(fake: Arc<Fake>, cert_home: &std::path::Path) -> (String, String) {
    let identity =
        moat::node::NodeIdentity::load_or_make(&moat::home::Home::at(cert_home)).unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(identity.server_config().unwrap()));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                return;
            };
            let (acceptor, fake) = (acceptor.clone(), fake.clone());
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let service = hyper::service::service_fn(move |req| {
                    let fake = fake.clone();
                    async move { Ok::<_, Infallible>(answer(fake, req).await) }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(tls), service)
                    .await;
            });
        }
    });
    (addr, identity.fingerprint())
}

/// A gateway home paired with the fake node as `evil`, its daemon started.
async fn paired(prefix: &str, fake: Arc<Fake>) -> Option<(TestHome, tempfile::TempDir)> {
    common::engine().await?;
    let cert_home = tempfile::tempdir().unwrap();
    let (addr, fp) = fake_node(fake, cert_home.path()).await;
    let gw = TestHome::new(prefix);
    let url = format!("https://{addr}");
    let o = gw.run(&[
        "nodes",
        "add",
        "evil",
        &url,
        "--fingerprint",
        &fp,
        "--token",
        "moatnode_x",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    Some((gw, cert_home))
}

/// The gateway's exec of a background command on `evil`; the CLI's JSON result.
fn background(gw: &TestHome, session: &str) -> serde_json::Value {
    let o = gw.run(&[
        "exec",
        "--json",
        "--session",
        session,
        "--node",
        "evil",
        "--background",
        "--",
        "sleep 1000",
    ]);
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&o)))
}

/// A node's answer with a process id of megabytes is not followed: the gateway keeps
/// nothing of it (it never opens the node's event stream for it).
#[tokio::test(flavor = "multi_thread")]
async fn a_huge_process_id_is_not_kept() {
    let fake = Arc::new(Fake {
        process_id: "p".repeat(3 << 20),
        event_calls: AtomicUsize::new(0),
    });
    let Some((gw, _cert)) = paired("t-hostile-id", fake.clone()).await else {
        return;
    };
    for _ in 0..3 {
        let r = background(&gw, "main");
        assert_eq!(
            r["details"]["status"], "running",
            "the call itself is answered"
        );
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(fake.event_calls.load(Ordering::SeqCst), 0);
    gw.stop_daemon();
}

/// A node whose event stream ends as soon as it opens is called again with a growing pause,
/// not in a loop: over ten seconds a handful of calls, each with one audited catch-up.
#[tokio::test(flavor = "multi_thread")]
async fn a_stream_that_ends_at_once_is_not_called_in_a_loop() {
    let fake = Arc::new(Fake {
        process_id: "warm-river".into(),
        event_calls: AtomicUsize::new(0),
    });
    let Some((gw, _cert)) = paired("t-hostile-loop", fake.clone()).await else {
        return;
    };
    let r = background(&gw, "churn");
    assert_eq!(r["details"]["status"], "running", "{r}");
    tokio::time::sleep(Duration::from_secs(10)).await;
    // 1 s, 2 s, 4 s pauses: four or five calls in ten seconds (the loop made thousands).
    let calls = fake.event_calls.load(Ordering::SeqCst);
    assert!(
        (2..=6).contains(&calls),
        "{calls} calls to the event stream"
    );
    gw.stop_daemon();
}
