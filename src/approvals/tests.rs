//! The approval lifecycle against a real SQLite file.

use std::sync::Arc;

use super::*;
use crate::contract::ApprovalTarget;
use crate::store::{ApprovalStatus, RecordedDecision, Store};

fn binding(cwd: &str, env: &[&str], argv: &[&str]) -> Binding {
    let env: Vec<String> = env.iter().map(|s| s.to_string()).collect();
    Binding {
        target: ApprovalTarget::Host,
        plan: argv.join(" "),
        argv: vec![argv.iter().map(|s| s.to_string()).collect()],
        resolved: vec![Some(format!("/usr/bin/{}", argv[0]))],
        cwd: cwd.into(),
        env_hash: env_hash(&env),
        env: env.clone(),
        files: vec![],
    }
}

fn new(b: &Binding, timeout_ms: i64) -> NewApproval {
    NewApproval {
        session: "main".into(),
        requester: "cli:alice".into(),
        agent: None,
        command: b.plan.clone(),
        binding: b.clone(),
        request: "{}".into(),
        reason: "allowlist miss".into(),
        allowed: vec![
            ApprovalDecision::AllowOnce,
            ApprovalDecision::AllowAlways,
            ApprovalDecision::Deny,
        ],
        persist: vec![PersistEntry::path("/usr/bin/touch")],
        covered: false,
        timeout_ms,
    }
}

fn service() -> (Approvals, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(Store::open(&dir.path().join("state.db")).unwrap());
    (Approvals::new(store, vec![]), dir)
}

fn op() -> Decider {
    Decider::operator("alice", "cli")
}

/// Removing a session ends every approval that could still act for it (pending, approved
/// but not run, expired before its fallback, and its egress grants), audited, and leaves
/// other sessions' and settled approvals alone (docs/approvals.md, "Removing a session").
#[test]
fn ending_a_session_ends_what_could_act_for_it() {
    let (a, _d) = service();
    let b = binding("/w", &[], &["touch", "x"]);
    let pending = a.create(new(&b, 60_000)).unwrap();
    let approved = a.create(new(&b, 60_000)).unwrap();
    a.decide(&approved.id, ApprovalDecision::AllowOnce, &op())
        .unwrap();
    let expired = a.create(new(&b, 1)).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(5));
    assert!(a.expire(&expired.id).unwrap());
    let mut grant = new(&b, 60_000);
    grant.binding.target = ApprovalTarget::Network;
    grant.command = "example.org:443".into();
    let grant = a.create(grant).unwrap();
    a.decide(&grant.id, ApprovalDecision::AllowAlways, &op())
        .unwrap();
    let denied = a.create(new(&b, 60_000)).unwrap();
    a.decide(&denied.id, ApprovalDecision::Deny, &op()).unwrap();
    let mut other = new(&b, 60_000);
    other.session = "other".into();
    let other = a.create(other).unwrap();

    let mut ended = a.end_session("main", "http:operator").unwrap();
    ended.sort();
    let mut want = vec![pending.id, approved.id, expired.id, grant.id];
    want.sort();
    assert_eq!(ended, want);
    for id in &want {
        let r = a.get(id).unwrap();
        assert_eq!(r.status, ApprovalStatus::Denied, "{id}");
        assert_eq!(r.decision, Some(RecordedDecision::SessionRemoved), "{id}");
    }
    assert_eq!(
        a.get(&denied.id).unwrap().decision,
        Some(RecordedDecision::Deny)
    );
    assert_eq!(a.get(&other.id).unwrap().status, ApprovalStatus::Pending);
    let audit = a.audit_log(None, 100).unwrap();
    assert_eq!(
        audit.iter().filter(|e| e.kind == "approval-ended").count(),
        4
    );
    // Nothing left to end: a second removal is a no-op.
    assert!(a.end_session("main", "http:operator").unwrap().is_empty());
}

#[test]
fn only_operators_decide() {
    let (a, _d) = service();
    let row = a
        .create(new(&binding("/w", &[], &["touch", "x"]), 60_000))
        .unwrap();
    let err = a
        .decide(
            &row.id,
            ApprovalDecision::AllowOnce,
            &Decider::agent("bot", "http"),
        )
        .unwrap_err();
    assert_eq!(err.http_status(), 403, "{err}");
    assert_eq!(a.get(&row.id).unwrap().status, ApprovalStatus::Pending);
    assert!(a
        .audit_log(Some(&row.id), 10)
        .unwrap()
        .iter()
        .any(|e| e.kind == "approval-refused"));
}

#[test]
fn an_approval_is_decided_once_and_used_once() {
    let (a, _d) = service();
    let b = binding("/w", &["A=1"], &["touch", "x"]);
    let row = a.create(new(&b, 60_000)).unwrap();
    let slug: String = row.id.chars().take(8).collect();
    let decided = a.decide(&slug, ApprovalDecision::AllowOnce, &op()).unwrap();
    assert_eq!(decided.status, ApprovalStatus::Approved);
    assert_eq!(decided.decided_by.as_deref(), Some("cli:alice"));
    let again = a
        .decide(&row.id, ApprovalDecision::AllowOnce, &op())
        .unwrap_err();
    assert!(again.to_string().contains("approved already"), "{again}");
    assert_eq!(a.consume(&row.id, &b).unwrap().status, ApprovalStatus::Used);
    let reuse = a.consume(&row.id, &b).unwrap_err();
    assert!(matches!(reuse, ApprovalError::NotUsable { .. }), "{reuse}");
    let late = a
        .decide(&row.id, ApprovalDecision::AllowOnce, &op())
        .unwrap_err();
    assert!(late.to_string().contains("used already"), "{late}");
    assert_eq!(late.http_status(), 409);
}

#[test]
fn a_changed_plan_is_refused() {
    let base = binding("/w", &["A=1"], &["touch", "x"]);
    let changes = [
        (binding("/tmp", &["A=1"], &["touch", "x"]), "cwd"),
        (binding("/w", &["A=2"], &["touch", "x"]), "env"),
        (binding("/w", &["A=1"], &["touch", "y"]), "argv"),
    ];
    for (changed, what) in changes {
        let (a, _d) = service();
        let row = a.create(new(&base, 60_000)).unwrap();
        a.decide(&row.id, ApprovalDecision::AllowOnce, &op())
            .unwrap();
        match a.consume(&row.id, &changed) {
            Err(ApprovalError::PlanChanged { what: w, .. }) => assert_eq!(w, what),
            other => panic!("{what}: {other:?}"),
        }
        // The approval is spent: not even the original plan runs now.
        assert!(a.consume(&row.id, &base).is_err());
    }
}

#[test]
fn expired_approvals_cannot_be_decided() {
    let (a, _d) = service();
    let row = a
        .create(new(&binding("/w", &[], &["touch", "x"]), 0))
        .unwrap();
    let err = a
        .decide(&row.id, ApprovalDecision::AllowOnce, &op())
        .unwrap_err();
    assert!(err.to_string().contains("expired"), "{err}");
    assert_eq!(a.get(&row.id).unwrap().status, ApprovalStatus::Expired);
    assert!(a.approve_by_fallback(&row.id, "full").unwrap());
    assert!(!a.approve_by_fallback(&row.id, "full").unwrap());
}

#[test]
fn allow_always_persists_and_interpreters_are_refused() {
    let (a, _d) = service();
    let row = a
        .create(new(&binding("/w", &[], &["touch", "x"]), 60_000))
        .unwrap();
    a.decide(&row.id, ApprovalDecision::AllowAlways, &op())
        .unwrap();
    let entries = a.allowlist(Some("host")).unwrap();
    assert_eq!(entries.len(), 1);
    assert_eq!(entries[0].entry, "/usr/bin/touch");
    assert_eq!(entries[0].source, "allow-always");
    for blanket in ["/bin/sh", "/usr/bin/python3", "/usr/bin/bash"] {
        let err = a.allowlist_add("host", blanket, &op()).unwrap_err();
        assert!(
            matches!(err, ApprovalError::Interpreter(_)),
            "{blanket}: {err}"
        );
    }
    assert!(a
        .allowlist_add_command("host", "sh -c 'make'", "main", "/w", &op())
        .unwrap());
    assert!(a.allowlist_add("host", "/usr/bin/jq", &op()).unwrap());
    assert!(
        !a.allowlist_add("host", "/usr/bin/jq", &op()).unwrap(),
        "deduplicated"
    );
    assert!(a.allowlist_add("host", "relative/jq", &op()).is_err());
    assert_eq!(a.allowlist_remove("/usr/bin/jq", &op()).unwrap(), 1);
    assert!(a
        .allowlist_add("host", "/usr/bin/jq", &Decider::agent("bot", "http"))
        .is_err());
}

#[test]
fn pending_approvals_and_decisions_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.db");
    let (pending, decided) = {
        let a = Approvals::new(Arc::new(Store::open(&path).unwrap()), vec![]);
        let p = a
            .create(new(&binding("/w", &[], &["touch", "x"]), 60_000))
            .unwrap();
        let d = a
            .create(new(&binding("/w", &[], &["touch", "y"]), 60_000))
            .unwrap();
        a.decide(&d.id, ApprovalDecision::Deny, &op()).unwrap();
        (p.id, d.id)
    };
    let a = Approvals::new(Arc::new(Store::open(&path).unwrap()), vec![]);
    assert_eq!(a.get(&pending).unwrap().status, ApprovalStatus::Pending);
    let d = a.get(&decided).unwrap();
    assert_eq!(
        (d.status, d.decision),
        (ApprovalStatus::Denied, Some(RecordedDecision::Deny))
    );
    let kinds: Vec<String> = a
        .audit_log(None, 50)
        .unwrap()
        .into_iter()
        .map(|e| e.kind)
        .collect();
    assert_eq!(
        kinds,
        ["approval-request", "approval-request", "approval-decision"]
    );
}

#[test]
fn the_display_escapes_and_redacts_without_truncating() {
    let a = Approvals::new(
        Arc::new(Store::in_memory().unwrap()),
        vec![("TOKEN".into(), "s3cr3t".into())],
    );
    let long = "x".repeat(5000);
    let shown = a.display(&format!("echo s3cr3t \u{202e}evil\u{200b} {long}\x1b[2J"));
    assert!(shown.contains("[REDACTED:TOKEN]") && !shown.contains("s3cr3t"));
    assert!(
        shown.contains("\\u{202e}") && shown.contains("\\u{200b}") && shown.contains("\\u{001b}")
    );
    assert!(shown.ends_with(&format!("{long}\\u{{001b}}[2J")));
}

#[tokio::test]
async fn a_decision_here_wakes_its_waiter_at_once() {
    let (a, _d) = service();
    let row = a
        .create(new(&binding("/w", &[], &["touch", "x"]), 60_000))
        .unwrap();
    let wake = a.wakeups().register(&row.id, a.store());
    a.decide(&row.id, ApprovalDecision::Deny, &op()).unwrap();
    // The permit is kept although nobody was parked yet.
    tokio::time::timeout(std::time::Duration::from_millis(50), wake.notified())
        .await
        .expect("woken by the decision");
}

#[tokio::test]
async fn a_decision_written_by_another_process_is_found_by_the_shared_check() {
    let (a, d) = service();
    let row = a
        .create(new(&binding("/w", &[], &["touch", "x"]), 60_000))
        .unwrap();
    let untouched = a
        .create(new(&binding("/w", &[], &["touch", "y"]), 60_000))
        .unwrap();
    let wake = a.wakeups().register(&row.id, a.store());
    let quiet = a.wakeups().register(&untouched.id, a.store());
    // Another process: its own connection to the same database, its own service.
    let other = Approvals::new(
        Arc::new(Store::open(&d.path().join("state.db")).unwrap()),
        vec![],
    );
    other
        .decide(&row.id, ApprovalDecision::AllowOnce, &op())
        .unwrap();
    let within = crate::approvals::WAKE_FALLBACK + std::time::Duration::from_secs(1);
    tokio::time::timeout(within, wake.notified())
        .await
        .expect("found by the fallback check");
    // Only the decided one: the other stays parked.
    assert!(
        tokio::time::timeout(std::time::Duration::from_millis(100), quiet.notified())
            .await
            .is_err()
    );
    assert_eq!(a.wakeups().waiting(), 2);
}

#[test]
fn pending_approvals_per_session_are_capped() {
    let (a, _d) = service();
    let a = a.with_max_pending(2);
    let b = binding("/w", &[], &["touch", "x"]);
    let first = a.create(new(&b, 60_000)).unwrap();
    a.create(new(&b, 60_000)).unwrap();
    let err = a.create(new(&b, 60_000)).unwrap_err();
    assert_eq!(err.http_status(), 429);
    assert!(
        err.to_string()
            .contains("approvals.max_pending_per_session = 2"),
        "{err}"
    );
    // Another session has its own count; an expired approval no longer counts.
    let mut elsewhere = new(&b, 60_000);
    elsewhere.session = "other".into();
    a.create(elsewhere).unwrap();
    a.decide(&first.id, ApprovalDecision::Deny, &op()).unwrap();
    a.create(new(&b, 1)).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(5));
    a.create(new(&b, 60_000)).unwrap();
}
