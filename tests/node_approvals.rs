//! A node's own policy, gates and approvals decide what a gateway's agent runs there
//! (docs/nodes.md, "Approvals"): the gateway's agent is just another agent to the node.

mod common;

use std::time::Duration;

use common::cli_home::{text, wait_until};
use common::node::{json, pair};

/// A command the node's policy asks about waits for the node's operator: the gateway sees it
/// pending and cannot decide it (its own approvals know nothing of it); the node's operator
/// approves it on the node, where it then runs, and the gateway follows it as a process.
#[tokio::test]
async fn only_the_nodes_operator_decides_its_approval() {
    let Some(p) = pair(
        "node-appr",
        "[policy.sandbox]\nsecurity = \"allowlist\"\nask = \"always\"\n",
    )
    .await
    else {
        return;
    };
    // The gateway's daemon runs before its event stream is read.
    p.gw(&["nodes", "list"]);
    p.gw(&["sessions", "list"]);
    let events = p.gateway_events();
    let o = p.gateway.run(&[
        "exec",
        "--json",
        "--node",
        "n1",
        "--",
        "echo approved-run-$((6*7))",
    ]);
    // Pending is not run: the CLI exits with the refusal code, as for a local approval.
    assert_eq!(o.status.code(), Some(77), "{}", text(&o));
    let pending = json(&common::cli_home::stdout(&o));
    assert_eq!(
        pending["details"]["status"], "approval-pending",
        "{pending}"
    );
    let said = pending["content"][0]["text"].as_str().unwrap();
    assert!(said.contains("node `n1`'s: its operator decides"), "{said}");
    let id = pending["details"]["approvalId"]
        .as_str()
        .unwrap()
        .to_string();

    // Not the gateway's to decide: it has no such approval.
    let gw_list = json(&p.gw(&["approvals", "list", "--json"]));
    assert_eq!(gw_list, serde_json::json!([]), "{gw_list}");
    let o = p.gateway.run(&["approvals", "approve", &id]);
    assert!(!o.status.success(), "{}", text(&o));

    // The node's operator sees who asked, and decides.
    let node_list = json(&p.node.ok(&["approvals", "list", "--json"]));
    let row = &node_list[0];
    assert_eq!(row["session"], "node.gw.main", "{node_list}");
    assert!(row.to_string().contains("node:gw"), "{node_list}");
    p.node.ok(&["approvals", "approve", &id]);
    // The outcome reaches the gateway's own event stream, named by the node.
    common::node::wait_for_event(&events, &["node n1: Exec finished (", "code 0"]);

    let mut log = String::new();
    wait_until(
        "the approved command ran on the node",
        Duration::from_secs(60),
        || {
            let list = json(&p.gw(&["process", "list", "--json", "--node", "n1"]));
            let Some(row) = list["details"]["sessions"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|r| r["command"].as_str().unwrap_or("").contains("approved-run"))
            else {
                return false;
            };
            if row["status"] == "running" {
                return false;
            }
            let id = row["sessionId"].as_str().unwrap();
            log = p.gw(&["process", "log", "--node", "n1", "--id", id]);
            true
        },
    );
    assert!(log.contains("approved-run-42"), "{log}");
}

/// `nodeHost: host` passes the node's elevated gates or nothing: a gateway whose pairing
/// name is not in the node's `elevated.allow_from.node` is refused, the gate named, and
/// nothing runs on the node's host.
#[tokio::test]
async fn the_nodes_host_is_behind_the_nodes_own_gates() {
    let Some(p) = pair(
        "node-gates",
        "[elevated]\nenabled = true\nallow_from = { node = [\"some-other-gateway\"] }\n",
    )
    .await
    else {
        return;
    };
    let marker = p.node.home.path().join("host-ran");
    let o = p.gateway.run(&[
        "exec",
        "--node",
        "n1",
        "--node-host",
        "host",
        "--",
        &format!("touch {}", marker.display()),
    ]);
    let t = text(&o);
    assert!(!o.status.success(), "{t}");
    assert!(t.contains("node `n1`"), "{t}");
    assert!(t.contains("elevated.allow_from.node"), "{t}");
    assert!(t.contains("`gw`"), "{t}");
    assert!(!marker.exists());
    // `elevated` on the gateway's call does not reach past nodeHost either.
    let o = p
        .gateway
        .run(&["exec", "--node", "n1", "--elevated", "--", "true"]);
    assert!(
        text(&o).contains("elevated.allow_from.node"),
        "{}",
        text(&o)
    );
}
