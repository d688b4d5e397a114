//! Processes on a node, followed through the gateway (docs/nodes.md, "Calls" and "When a node
//! goes away"): a background process polled, fed and logged with `process --node`; a node
//! killed mid-command is reported by name, and its processes are there when it returns.

mod common;

use std::time::Duration;

use common::cli_home::{stdout, text, wait_until};
use common::node::{json, pair};

/// Polls process `id` on node `n1` through the gateway until it ended (a poll answers early
/// when the process prints), within a minute.
fn poll_to_end(p: &common::node::Pair, id: &str) -> serde_json::Value {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let polled = json(&p.gw(&[
            "process",
            "poll",
            "--json",
            "--node",
            "n1",
            "--id",
            id,
            "--timeout",
            "10000",
        ]));
        if polled["details"]["status"] != "running" {
            return polled;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "still running: {polled}"
        );
    }
}

/// `exec --node --background` answers the node's process id; `process poll`, `write`, `log`
/// and `list` with `--node` reach that process on the node, stdin and exit code included.
#[tokio::test]
async fn a_background_process_is_polled_through_the_gateway() {
    let Some(p) = pair("node-bg", "").await else {
        return;
    };
    let started = json(&p.gw(&[
        "exec",
        "--json",
        "--node",
        "n1",
        "--background",
        "--",
        "read line; echo \"got:$line\"; for i in 1 2 3; do echo tick$i; sleep 0.2; done; exit 4",
    ]));
    assert_eq!(started["details"]["status"], "running", "{started}");
    let id = started["details"]["sessionId"]
        .as_str()
        .unwrap()
        .to_string();
    // The gateway has no such process: it lives on the node.
    let here = p.gateway.run(&["process", "poll", "--id", &id]);
    assert!(text(&here).contains("No process"), "{}", text(&here));

    p.gw(&[
        "process", "write", "--node", "n1", "--id", &id, "--data", "hello\n", "--eof",
    ]);
    let polled = poll_to_end(&p, &id);
    assert_eq!(polled["details"]["status"], "failed", "{polled}");
    assert_eq!(polled["details"]["exitCode"], 4, "{polled}");
    let log = p.gw(&["process", "log", "--node", "n1", "--id", &id]);
    for want in ["got:hello", "tick1", "tick3"] {
        assert!(log.contains(want), "{want}: {log}");
    }
    let list = json(&p.gw(&["process", "list", "--json", "--node", "n1"]));
    assert!(list.to_string().contains(&id), "{list}");
    // Audited on the node with the pairing's name, action by action.
    let audit = p.node.ok(&["approvals", "audit", "--json"]);
    assert!(audit.contains("process poll"), "{audit}");
    assert!(audit.contains("node:gw"), "{audit}");
}

/// The node's daemon is killed (SIGKILL) while the gateway waits on a foreground command and
/// a background one runs: the gateway's call fails naming the node, a poll while it is away
/// says so by name, and once the node is back both commands are still there and finish.
#[tokio::test]
async fn a_node_killed_and_restarted_mid_command() {
    let Some(mut p) = pair("node-kill", "").await else {
        return;
    };
    let started = json(&p.gw(&[
        "exec",
        "--json",
        "--node",
        "n1",
        "--background",
        "--",
        "sleep 4; echo survived",
    ]));
    let id = started["details"]["sessionId"]
        .as_str()
        .unwrap()
        .to_string();

    let mut fg = p.gateway.moat();
    fg.args(["exec", "--node", "n1", "--", "sleep 5; echo fg-done"]);
    let fg = std::thread::spawn(move || fg.output().unwrap());
    // The foreground command is running on the node before the node goes: its container
    // shows it.
    wait_until(
        "the foreground command runs on the node",
        Duration::from_secs(30),
        || {
            // Every container of that key: other tests' nodes name their sessions alike.
            p.node.home.containers("node.gw.main").iter().any(|c| {
                let o = std::process::Command::new("docker")
                    .args(["exec", c, "ps", "-eo", "args"])
                    .output()
                    .unwrap();
                stdout(&o).contains("sleep 5; echo fg-done")
            })
        },
    );
    p.node.kill();
    let fg = fg.join().unwrap();
    let t = text(&fg);
    assert!(!fg.status.success(), "{t}");
    assert!(t.contains("node `n1`"), "{t}");
    assert!(!stdout(&fg).contains("fg-done"), "{t}");

    let away = p
        .gateway
        .run(&["process", "poll", "--node", "n1", "--id", &id]);
    let t = text(&away);
    assert!(t.contains("reach node `n1`"), "{t}");

    p.node.restart();
    let polled = poll_to_end(&p, &id);
    assert_eq!(polled["details"]["status"], "completed", "{polled}");
    let log = p.gw(&["process", "log", "--node", "n1", "--id", &id]);
    assert!(log.contains("survived"), "{polled} {log}");
    // The foreground command the gateway lost is still the node's, and ends on its own.
    let mut fg_row = serde_json::Value::Null;
    wait_until(
        "the lost foreground command ends",
        Duration::from_secs(30),
        || {
            let list = json(&p.gw(&["process", "list", "--json", "--node", "n1"]));
            fg_row = list["details"]["sessions"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|r| r["command"].as_str().unwrap_or("").contains("fg-done"))
                .cloned()
                .unwrap_or_default();
            fg_row["status"] != "running" && !fg_row.is_null()
        },
    );
    let fg_id = fg_row["sessionId"].as_str().unwrap();
    let log = p.gw(&["process", "log", "--node", "n1", "--id", fg_id]);
    assert!(log.contains("fg-done"), "{fg_row} {log}");
}

/// A background process's end on the node reaches the gateway's own event stream, named by
/// its node, as a local one's does: one that ends a while after it started, and one that ends
/// at once (before the gateway's relay could open the node's stream, so it is caught up from
/// the node's process list).
#[tokio::test]
async fn a_nodes_exit_events_reach_the_gateways_stream() {
    let Some(p) = pair("node-events", "").await else {
        return;
    };
    // Starts the gateway's daemon (and the node's sandbox) before subscribing.
    p.gw(&["exec", "--node", "n1", "--", "true"]);
    let events = p.gateway_events();
    let id_of = |out: &str| {
        let v = json(out);
        assert_eq!(v["details"]["status"], "running", "{v}");
        v["details"]["sessionId"].as_str().unwrap().to_string()
    };
    let slow = id_of(&p.gw(&[
        "exec",
        "--json",
        "--node",
        "n1",
        "--background",
        "--",
        "sleep 1; echo slow-done; exit 3",
    ]));
    let line =
        common::node::wait_for_event(&events, &["node n1: Exec failed (", &slow[..8], "code 3"]);
    assert!(line.contains("slow-done"), "{line}");

    let quick = id_of(&p.gw(&[
        "exec",
        "--json",
        "--node",
        "n1",
        "--background",
        "--",
        "exit 0",
    ]));
    common::node::wait_for_event(
        &events,
        &["node n1: Exec completed (", &quick[..8], "code 0"],
    );
}
