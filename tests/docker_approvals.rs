//! Approvals for sandbox commands: an ask pattern asks, the approved plan runs once in the
//! session's container, a denied one never runs.

mod common;

use std::time::Duration;

use moat::approvals::{ApprovalDecision, Decider};
use moat::config::Config;
use moat::contract::Status;

async fn event(
    rx: &mut tokio::sync::broadcast::Receiver<moat::process::SessionEvent>,
    id: &str,
) -> String {
    tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            let e = rx.recv().await.unwrap();
            if e.text.contains(id) && !e.text.starts_with("Exec running") {
                return e.text;
            }
        }
    })
    .await
    .expect("approval event")
}

#[tokio::test]
async fn sandbox_asks_then_runs_or_refuses() {
    let mut config = Config::default();
    config.policy.sandbox.ask_patterns = vec!["touch *".into()];
    let Some(m) = common::moat("approvals", config).await else {
        return;
    };
    let op = Decider::operator("alice", "cli");
    let mut events = m.app.registry.events().subscribe();
    let r = m.exec("s", "touch /workspace/approved && echo done").await;
    assert_eq!(r.status(), Some(Status::ApprovalPending), "{}", r.text());
    assert_eq!(r.details.to_json()["host"], "sandbox");
    let id = r.details.approval_id().unwrap().to_string();
    m.app
        .approvals
        .decide(&id, ApprovalDecision::AllowOnce, &op)
        .unwrap();
    let ev = event(&mut events, &id).await;
    assert!(
        ev.starts_with(&format!("Exec finished (sandbox id={id}, session=")),
        "{ev}"
    );
    assert!(ev.ends_with("code 0)\ndone"), "{ev}");
    assert_eq!(
        m.docker_exec("s", "ls /workspace/approved"),
        "/workspace/approved\n"
    );

    let r = m.exec("s", "touch /workspace/refused").await;
    let id = r.details.approval_id().unwrap().to_string();
    m.app
        .approvals
        .decide(&id, ApprovalDecision::Deny, &op)
        .unwrap();
    let ev = event(&mut events, &id).await;
    assert!(
        ev.starts_with(&format!("Exec denied (sandbox id={id}, user-denied)")),
        "{ev}"
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        m.docker_exec("s", "ls /workspace/refused 2>&1 >/dev/null | wc -l"),
        "1\n"
    );
}
