//! Pairing a gateway with a node (docs/nodes.md), two moat homes on this machine, two
//! daemons, loopback TCP, the real engine: a pairing that works end to end, and the ways one
//! must not — a wrong fingerprint, a revoked token, a route the node does not offer.

mod common;

use common::cli_home::{stdout, text};
use common::node::{json, pair};

const NODE: &str = "";

/// Paired, the gateway's `exec --node` runs in a sandbox of the node's, in the node's session
/// for this gateway and session; only the env the call passes crosses; both sides audit the
/// call with the pairing's name; `moat nodes list` shows the node reachable with its build.
#[tokio::test]
async fn a_gateway_pairs_and_runs_in_the_nodes_sandbox() {
    let Some(p) = pair("node-pair", NODE).await else {
        return;
    };
    let list = json(&p.gw(&["nodes", "list", "--json"]));
    assert_eq!(list[0]["name"], "n1", "{list}");
    assert_eq!(list[0]["reachable"], true, "{list}");
    assert_eq!(list[0]["info"]["gateway"], "gw", "{list}");
    assert_eq!(
        list[0]["info"]["offers"],
        serde_json::json!(["exec", "process", "events"])
    );
    assert!(list[0]["info"]["build"]
        .as_str()
        .unwrap()
        .starts_with(env!("CARGO_PKG_VERSION")));

    let out = json(&p.gw(&[
        "exec",
        "--json",
        "--node",
        "n1",
        "--env",
        "FROM_CALL=crossed",
        "--",
        "echo \"call=$FROM_CALL\"; cat /proc/1/cgroup >/dev/null; test -d /workspace && echo in-sandbox",
    ]));
    let text_out = out["content"][0]["text"].as_str().unwrap();
    assert_eq!(out["details"]["status"], "completed", "{out}");
    assert!(text_out.contains("call=crossed"), "{out}");
    assert!(text_out.contains("in-sandbox"), "{out}");

    // PATH from the call goes before the node's own, never in its place.
    let out = json(&p.gw(&[
        "exec",
        "--json",
        "--node",
        "n1",
        "--env",
        "PATH=/opt/from-call",
        "--",
        "echo \"path=$PATH\"",
    ]));
    let said = out["content"][0]["text"].as_str().unwrap();
    assert!(said.contains("path=/opt/from-call:"), "{out}");
    assert!(said.contains(":/usr/bin"), "{out}");

    // The node made a session of its own for this gateway's `main`; the gateway made none.
    let node_sessions = p.node.ok(&["sessions", "list", "--json"]);
    assert!(
        node_sessions.contains("\"node.gw.main\""),
        "{node_sessions}"
    );
    let gw_sessions = p.gw(&["sessions", "list", "--json"]);
    assert!(!gw_sessions.contains("node.gw"), "{gw_sessions}");
    assert!(!gw_sessions.contains("\"main\""), "{gw_sessions}");

    // Audited on both sides, with the pairing's name.
    let node_audit = p.node.ok(&["approvals", "audit", "--json"]);
    let node_audit = json(&node_audit);
    assert!(
        node_audit
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["kind"] == "node-call"
                && e["actor"] == "node:gw"
                && e["session"] == "node.gw.main"
                && e["detail"].as_str().unwrap().contains("FROM_CALL")),
        "{node_audit}"
    );
    let gw_audit = json(&p.gw(&["approvals", "audit", "--json"]));
    assert!(
        gw_audit
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["kind"] == "node-forward"
                && e["session"] == "main"
                && e["detail"]
                    .as_str()
                    .unwrap()
                    .starts_with("node n1: exec on its sandbox")),
        "{gw_audit}"
    );
}

/// A fingerprint other than the node's certificate's is refused at `nodes add`, naming the
/// node and both fingerprints, and nothing is kept.
#[tokio::test]
async fn a_wrong_fingerprint_is_refused() {
    let Some(p) = pair("node-fp", NODE).await else {
        return;
    };
    let wrong = format!("SHA256:{}", "0".repeat(64));
    let o = p.gateway.run(&[
        "nodes",
        "add",
        "n2",
        &p.node.url(),
        "--fingerprint",
        &wrong,
        "--token",
        &p.token,
    ]);
    let t = text(&o);
    assert!(!o.status.success(), "{t}");
    assert!(t.contains("reach node `n2`"), "{t}");
    assert!(t.contains("not the one paired"), "{t}");
    assert!(t.contains(&wrong) && t.contains(&p.node.fingerprint), "{t}");
    let list = p.gw(&["nodes", "list", "--json"]);
    assert!(!list.contains("\"n2\""), "{list}");
    // A malformed one is refused before any connection.
    let o = p.gateway.run(&[
        "nodes",
        "add",
        "n3",
        &p.node.url(),
        "--fingerprint",
        "SHA256:abc",
        "--token",
        "x",
    ]);
    assert!(text(&o).contains("use fingerprint"), "{}", text(&o));
}

/// A token the node's operator revoked is refused on the gateway's next call, by name; a
/// token issued again works again.
#[tokio::test]
async fn a_revoked_token_is_refused() {
    let Some(p) = pair("node-revoke", NODE).await else {
        return;
    };
    p.gw(&["exec", "--node", "n1", "--", "true"]);
    p.node.ok(&["node", "tokens", "revoke", "gw"]);
    let o = p
        .gateway
        .run(&["exec", "--node", "n1", "--", "echo should-not-run"]);
    let t = text(&o);
    assert!(!o.status.success(), "{t}");
    assert!(!stdout(&o).contains("should-not-run"), "{t}");
    assert!(t.contains("node `n1`") && t.contains("revoked"), "{t}");
    let list = json(&p.gw(&["nodes", "list", "--json"]));
    assert_eq!(list[0]["reachable"], false, "{list}");
    // Re-pairing with a new token.
    let token = p
        .node
        .ok(&["node", "tokens", "add", "gw"])
        .trim()
        .to_string();
    p.gw(&[
        "nodes",
        "add",
        "n1",
        &p.node.url(),
        "--fingerprint",
        &p.node.fingerprint,
        "--token",
        &token,
    ]);
    assert!(p
        .gw(&["exec", "--node", "n1", "--", "echo again"])
        .contains("again"));
}

/// The node's listener offers the forwarded calls only: the daemon's operator routes
/// (approvals, sessions, health, the console, metrics) are not there for a paired gateway,
/// and nothing at all is there without a live token.
#[tokio::test]
async fn the_nodes_listener_offers_no_operator_routes() {
    let Some(p) = pair("node-routes", NODE).await else {
        return;
    };
    let url = p.node.url();
    let call = |method: http::Method, path: &'static str, token: &str| {
        let (url, fp, token) = (url.clone(), p.node.fingerprint.clone(), token.to_string());
        async move {
            moat::node::call(
                "n1",
                &url,
                &fp,
                &token,
                method,
                path,
                Some(&serde_json::json!({})),
                Some(std::time::Duration::from_secs(20)),
            )
            .await
        }
    };
    for (method, path) in [
        (http::Method::GET, "/v1/approvals"),
        (http::Method::POST, "/v1/approvals/x/decision"),
        (http::Method::GET, "/v1/sessions"),
        (http::Method::POST, "/v1/sessions/main/exec"),
        (http::Method::GET, "/v1/health"),
        (http::Method::GET, "/metrics"),
        (http::Method::GET, "/ui/approvals"),
        (http::Method::POST, "/mcp"),
    ] {
        match call(method.clone(), path, &p.token).await {
            Err(moat::node::NodeError::Refused { status: 404, .. }) => {}
            other => panic!("{method} {path}: {other:?}"),
        }
    }
    for token in ["", "moatnode_0000", &format!("{}x", p.token)] {
        match call(http::Method::GET, "/node/v1/info", token).await {
            Err(moat::node::NodeError::TokenRefused(n)) => assert_eq!(n, "n1"),
            other => panic!("token {token:?}: {other:?}"),
        }
    }
    // A body past the bound is refused before it is read on.
    let big = serde_json::json!({
        "session": "main",
        "request": {"command": "x".repeat(2 << 20)},
        "nodeHost": "sandbox",
    });
    match moat::node::call(
        "n1",
        &url,
        &p.node.fingerprint,
        &p.token,
        http::Method::POST,
        "/node/v1/exec",
        Some(&big),
        Some(std::time::Duration::from_secs(20)),
    )
    .await
    {
        Err(moat::node::NodeError::Refused { status: 413, .. }) => {}
        // The node answers 413 as soon as the body passes its bound and closes the
        // connection without reading the rest (one request per connection): a client still
        // writing then sees the connection break before it reads the answer. Either way the
        // node refused it unread; the calls below show it serves on.
        Err(moat::node::NodeError::Unreachable { why, .. })
            if why.contains("error writing a body to connection") => {}
        other => panic!("a 2 MiB body: {other:?}"),
    }
    // A forwarded exec naming another node is run where the pairing says, never forwarded on.
    let body = serde_json::json!({
        "session": "main",
        "request": {"command": "echo here", "host": "node", "node": "n1"},
        "nodeHost": "sandbox",
    });
    let answer = moat::node::call(
        "n1",
        &url,
        &p.node.fingerprint,
        &p.token,
        http::Method::POST,
        "/node/v1/exec",
        Some(&body),
        Some(std::time::Duration::from_secs(120)),
    )
    .await
    .unwrap();
    assert_eq!(
        answer.value["details"]["status"], "completed",
        "{:?}",
        answer.value
    );
}

/// One gateway's calls in flight are capped (`node.max_calls_per_gateway`): while its one
/// allowed call waits on a command, the next is refused with `429`, and once it ended the
/// gateway calls again.
#[tokio::test]
async fn one_gateways_calls_in_flight_are_capped() {
    let Some(p) = pair("node-cap", "[node]\nmax_calls_per_gateway = 1\n").await else {
        return;
    };
    let (url, fp, token) = (p.node.url(), p.node.fingerprint.clone(), p.token.clone());
    let call = move |body: serde_json::Value| {
        let (url, fp, token) = (url.clone(), fp.clone(), token.clone());
        async move {
            moat::node::call(
                "n1",
                &url,
                &fp,
                &token,
                http::Method::POST,
                "/node/v1/exec",
                Some(&body),
                Some(std::time::Duration::from_secs(60)),
            )
            .await
        }
    };
    // The long call may itself meet a quick one holding the slot: it is refused then, and
    // sent again until it holds the slot.
    let long = tokio::spawn({
        let call = call.clone();
        async move {
            loop {
                match call(serde_json::json!({
                    "session": "main",
                    "request": {"command": "sleep 4; echo long-done"},
                    "nodeHost": "sandbox",
                    "wait": true,
                }))
                .await
                {
                    Err(moat::node::NodeError::Refused { status: 429, .. }) => {
                        tokio::time::sleep(std::time::Duration::from_millis(5)).await
                    }
                    other => return other,
                }
            }
        }
    });
    let quick = serde_json::json!({
        "session": "main",
        "request": {"command": "true"},
        "nodeHost": "sandbox",
    });
    // The long call holds the gateway's one slot once the node runs it.
    let mut refused = false;
    for _ in 0..200 {
        match call(quick.clone()).await {
            Err(moat::node::NodeError::Refused {
                status: 429,
                message,
                ..
            }) => {
                assert!(message.contains("gateway `gw`"), "{message}");
                refused = true;
                break;
            }
            Ok(_) => tokio::time::sleep(std::time::Duration::from_millis(50)).await,
            Err(e) => panic!("{e}"),
        }
    }
    assert!(refused, "no call was refused while the long one ran");
    let done = long.await.unwrap().unwrap();
    assert!(
        done.value.to_string().contains("long-done"),
        "{:?}",
        done.value
    );
    call(quick).await.unwrap();
}

/// A session's default node is its operator's to set (`moat sessions set KEY --node NAME`):
/// that session's `host: "node"` calls that name no node go there, another session's are
/// refused with the ways to name one, a name that is not paired cannot be set, and clearing
/// it refuses again.
#[tokio::test]
async fn a_sessions_default_node_is_set_by_its_operator() {
    let Some(p) = pair("node-default", NODE).await else {
        return;
    };
    let o = p.gateway.run(&["sessions", "set", "s1", "--node", "nope"]);
    assert!(!o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("no paired node `nope`"), "{}", text(&o));

    p.gw(&["sessions", "set", "s1", "--node", "n1"]);
    let show = json(&p.gw(&["sessions", "show", "s1", "--json"]));
    assert_eq!(show["node"], "n1", "{show}");
    let out = json(&p.gw(&[
        "exec",
        "--json",
        "--session",
        "s1",
        "--host",
        "node",
        "--",
        "echo on-the-node",
    ]));
    assert_eq!(out["details"]["status"], "completed", "{out}");
    assert!(
        out["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("on-the-node"),
        "{out}"
    );
    let node_sessions = p.node.ok(&["sessions", "list", "--json"]);
    assert!(node_sessions.contains("node.gw.s1"), "{node_sessions}");

    let refused = |session: &str| {
        let o = p
            .gateway
            .run(&["exec", "--session", session, "--host", "node", "--", "true"]);
        assert!(!o.status.success(), "{session}: {}", text(&o));
        assert!(
            text(&o).contains("moat sessions set KEY --node NAME"),
            "{session}: {}",
            text(&o)
        );
    };
    refused("s2");
    p.gw(&["sessions", "set", "s1", "--node", ""]);
    refused("s1");
}
