//! Approvals end to end on the host executor: pending at once, operator decisions, expiry,
//! allow-always, use-once, restart. No engine needed.

mod common;

use common::host::{config, event_with, moat, moat_in, req};
use moat::approvals::{ApprovalDecision, ApprovalError, Decider};
use moat::config::ElevatedLevel;
use moat::contract::Status;
use moat::store::{ApprovalStatus, RecordedDecision};

fn op() -> Decider {
    Decider::operator("alice", "cli")
}

fn touch(dir: &std::path::Path, name: &str) -> (String, std::path::PathBuf) {
    let marker = dir.join(name);
    (
        format!("touch {} && echo made-{name}", marker.display()),
        marker,
    )
}

#[tokio::test]
async fn approve_runs_exactly_the_plan_once() {
    let m = moat(config(ElevatedLevel::Off));
    let mut events = m.events();
    let (cmd, marker) = touch(&m.scratch(), "once");
    let r = m.exec(req(&cmd)).await;
    assert_eq!(r.status(), Some(Status::ApprovalPending), "{}", r.text());
    let id = r.details.approval_id().unwrap().to_string();
    let details = r.details.to_json();
    let slug = details["approvalSlug"].as_str().unwrap();
    assert_eq!(slug, &id[..8]);
    assert!(
        r.text()
            .starts_with(&format!("Approval required (id {slug}).")),
        "{}",
        r.text()
    );
    assert_eq!(r.details.to_json()["host"], "host");
    assert_eq!(
        r.details.to_json()["allowedDecisions"],
        serde_json::json!(["allow-once", "allow-always", "deny"])
    );
    assert!(r.details.to_json()["expiresAtMs"].as_i64().unwrap() > 0);
    assert!(!marker.exists(), "nothing runs before a decision");

    m.app
        .approvals
        .decide(slug, ApprovalDecision::AllowOnce, &op())
        .unwrap();
    let done = event_with(&mut events, "Exec finished", 10).await;
    assert!(
        done.starts_with(&format!("Exec finished (host id={id}, session=")),
        "{done}"
    );
    assert!(done.contains("code 0)\nmade-once"), "{done}");
    assert!(marker.exists());
    let row = m.app.approvals.get(&id).unwrap();
    assert_eq!(row.status, ApprovalStatus::Used);
    assert!(row.process_id.is_some());
    let again = m
        .app
        .approvals
        .decide(&id, ApprovalDecision::AllowOnce, &op())
        .unwrap_err();
    assert!(matches!(again, ApprovalError::NotPending { .. }), "{again}");
    let kinds: Vec<String> = m
        .app
        .approvals
        .audit_log(Some(&id), 20)
        .unwrap()
        .into_iter()
        .map(|e| e.kind)
        .collect();
    assert_eq!(
        kinds,
        ["approval-request", "approval-decision", "elevated-run"]
    );
}

#[tokio::test]
async fn deny_reports_and_nothing_runs() {
    let m = moat(config(ElevatedLevel::Off));
    let mut events = m.events();
    let (cmd, marker) = touch(&m.scratch(), "denied");
    let r = m.exec(req(&cmd)).await;
    let id = r.details.approval_id().unwrap().to_string();
    m.app
        .approvals
        .decide(&id, ApprovalDecision::Deny, &op())
        .unwrap();
    let ev = event_with(&mut events, "Exec denied", 10).await;
    assert!(
        ev.starts_with(&format!("Exec denied (host id={id}, user-denied): touch ")),
        "{ev}"
    );
    tokio::time::sleep(std::time::Duration::from_millis(600)).await;
    assert!(!marker.exists());
}

#[tokio::test]
async fn expiry_applies_ask_fallback_deny() {
    let mut c = config(ElevatedLevel::Off);
    c.approvals.timeout_secs = 1;
    let m = moat(c);
    let mut events = m.events();
    let (cmd, marker) = touch(&m.scratch(), "late");
    let r = m.exec(req(&cmd)).await;
    let id = r.details.approval_id().unwrap().to_string();
    let ev = event_with(&mut events, "Exec denied", 10).await;
    assert_eq!(
        ev.split(": ").next().unwrap(),
        format!("Exec denied (host id={id}, approval-timeout)")
    );
    assert_eq!(
        m.app.approvals.get(&id).unwrap().status,
        ApprovalStatus::Expired
    );
    let late = m
        .app
        .approvals
        .decide(&id, ApprovalDecision::AllowOnce, &op())
        .unwrap_err();
    assert!(late.to_string().contains("expired"), "{late}");
    assert!(!marker.exists());
}

#[tokio::test]
async fn allow_always_on_the_host_remembers_the_exact_command_not_a_shell() {
    let m = moat(config(ElevatedLevel::Off));
    let mut events = m.events();
    let (cmd, _) = touch(&m.scratch(), "always");
    let r = m.exec(req(&cmd)).await;
    let id = r.details.approval_id().unwrap().to_string();
    m.app
        .approvals
        .decide(&id, ApprovalDecision::AllowAlways, &op())
        .unwrap();
    event_with(&mut events, "Exec finished", 10).await;
    // On the host an executable entry alone never runs anything unasked (docs/policy.md,
    // "Argv profiles"), so allow-always remembers exactly what the operator saw.
    let entries = m.app.approvals.allowlist(Some("host")).unwrap();
    assert_eq!(entries.len(), 1, "{entries:?}");
    assert!(entries[0].entry.starts_with("=command:"), "{entries:?}");
    assert_eq!(entries[0].command.as_deref(), Some(cmd.as_str()));
    // The same command runs without asking ...
    std::fs::remove_file(m.scratch().join("always")).unwrap();
    let r = m.exec(req(&cmd)).await;
    assert_eq!(r.status(), Some(Status::Completed), "{}", r.text());
    assert!(m.scratch().join("always").exists());
    // ... and the same executables with other arguments ask again.
    let (again, marker) = touch(&m.scratch(), "direct");
    let r = m.exec(req(&again)).await;
    assert_eq!(r.status(), Some(Status::ApprovalPending), "{}", r.text());
    assert!(!marker.exists());

    // A shell is never allowlisted as a whole; inline eval is never remembered at all: it asks
    // every time (docs/approvals.md).
    let r = m.exec(req("sh -c 'echo inline'")).await;
    assert_eq!(r.status(), Some(Status::ApprovalPending), "{}", r.text());
    assert_eq!(
        r.details.to_json()["allowedDecisions"],
        serde_json::json!(["allow-once", "deny"])
    );
    let id = r.details.approval_id().unwrap().to_string();
    assert!(m
        .app
        .approvals
        .decide(&id, ApprovalDecision::AllowAlways, &op())
        .is_err());
    m.app
        .approvals
        .decide(&id, ApprovalDecision::AllowOnce, &op())
        .unwrap();
    event_with(&mut events, "Exec finished", 10).await;
    // Nothing new: the one entry is still the exact touch command from above.
    let entries = m.app.approvals.allowlist(Some("host")).unwrap();
    assert!(
        !entries.iter().any(|e| e.entry.ends_with("/sh")
            || e.command.as_deref().is_some_and(|c| c.contains("inline"))),
        "{entries:?}"
    );
    assert_eq!(entries.len(), 1, "{entries:?}");
    assert_eq!(
        m.exec(req("sh -c 'echo inline'")).await.status(),
        Some(Status::ApprovalPending)
    );
    for blanket in ["/bin/sh", "/usr/bin/python3"] {
        assert!(matches!(
            m.app.approvals.allowlist_add("host", blanket, &op()),
            Err(ApprovalError::Interpreter(_))
        ));
    }
}

#[tokio::test]
async fn ask_always_offers_no_allow_always() {
    let mut c = config(ElevatedLevel::Off);
    c.policy.host.ask = moat::policy::Ask::Always;
    let m = moat(c);
    let r = m.exec(req("true")).await;
    assert_eq!(
        r.details.to_json()["allowedDecisions"],
        serde_json::json!(["allow-once", "deny"])
    );
    let id = r.details.approval_id().unwrap();
    let err = m
        .app
        .approvals
        .decide(id, ApprovalDecision::AllowAlways, &op())
        .unwrap_err();
    assert!(
        matches!(err, ApprovalError::DecisionUnavailable { .. }),
        "{err}"
    );
}

#[tokio::test]
async fn an_agent_cannot_decide() {
    let m = moat(config(ElevatedLevel::Off));
    let r = m.exec(req("true")).await;
    let id = r.details.approval_id().unwrap();
    let err = m
        .app
        .approvals
        .decide(
            id,
            ApprovalDecision::AllowOnce,
            &Decider::agent("bot", "http"),
        )
        .unwrap_err();
    // Over HTTP this is a 403: tests/http_api.rs `only_the_operator_can_decide_an_approval`.
    assert_eq!(err.http_status(), 403);
    assert_eq!(
        m.app.approvals.get(id).unwrap().status,
        ApprovalStatus::Pending
    );
}

/// A restart: the first moat runs on its own async runtime, which is dropped with every
/// task (waiters included) before a second moat opens the same home.
#[test]
fn pending_approvals_survive_a_restart_and_run_after_it() {
    let home = tempfile::tempdir().unwrap();
    let marker = home.path().join("after-restart");
    let cmd = format!("touch {}", marker.display());
    let first = tokio::runtime::Runtime::new().unwrap();
    let (id, denied) = first.block_on(async {
        let m = moat_in(
            tempfile::TempDir::new_in(home.path()).unwrap(),
            config(ElevatedLevel::Off),
        );
        let r = m.exec(req(&cmd)).await;
        let d = m.exec(req("true")).await;
        let denied = d.details.approval_id().unwrap().to_string();
        m.app
            .approvals
            .decide(&denied, ApprovalDecision::Deny, &op())
            .unwrap();
        let _ = m.dir.keep();
        (r.details.approval_id().unwrap().to_string(), denied)
    });
    drop(first);
    let state = std::fs::read_dir(home.path())
        .unwrap()
        .filter_map(|e| e.ok())
        .find(|e| e.path().is_dir())
        .unwrap()
        .path();
    let second = tokio::runtime::Runtime::new().unwrap();
    second.block_on(async {
        let m = moat_in(
            tempfile::TempDir::new_in(home.path()).unwrap(),
            config(ElevatedLevel::Off),
        );
        drop(m);
        let m = common::host::moat_at(&state, config(ElevatedLevel::Off));
        assert_eq!(
            m.app.approvals.get(&id).unwrap().status,
            ApprovalStatus::Pending
        );
        assert_eq!(
            m.app.approvals.get(&denied).unwrap().decision,
            Some(RecordedDecision::Deny)
        );
        assert!(!marker.exists());
        let mut events = m.events();
        assert_eq!(m.app.exec.recover_approvals(), 1);
        m.app
            .approvals
            .decide(&id, ApprovalDecision::AllowOnce, &op())
            .unwrap();
        let ev = event_with(&mut events, "Exec finished", 10).await;
        assert!(ev.contains(&id), "{ev}");
        assert!(marker.exists());
    });
}

#[tokio::test]
async fn a_plan_that_changed_after_approval_is_refused() {
    let m = moat(config(ElevatedLevel::Off));
    let mut events = m.events();
    let wd = m.scratch().join("wd");
    std::fs::create_dir_all(&wd).unwrap();
    let r = moat::tools::ExecRequest {
        workdir: Some(wd.display().to_string()),
        ..req("touch swapped-marker")
    };
    let r = m.exec(r).await;
    let id = r.details.approval_id().unwrap().to_string();
    // The directory the operator saw is swapped for a link elsewhere before the run.
    let elsewhere = m.scratch().join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    std::fs::rename(&wd, m.scratch().join("wd-old")).unwrap();
    std::os::unix::fs::symlink(&elsewhere, &wd).unwrap();
    m.app
        .approvals
        .decide(&id, ApprovalDecision::AllowOnce, &op())
        .unwrap();
    let ev = event_with(&mut events, "Exec denied", 10).await;
    assert!(
        ev.starts_with(&format!("Exec denied (host id={id}, plan-changed: cwd)")),
        "{ev}"
    );
    assert!(!elsewhere.join("swapped-marker").exists());
    assert!(m
        .app
        .approvals
        .consume(
            &id,
            &serde_json::from_str(&m.app.approvals.get(&id).unwrap().binding).unwrap()
        )
        .is_err());
}

#[tokio::test]
async fn expiry_with_fallback_full_or_allowlist() {
    // full: the plan runs when nobody decides; never looser than the security in force, so
    // it takes a full-security policy that asks every time.
    let mut c = config(ElevatedLevel::Off);
    c.approvals.timeout_secs = 1;
    c.approvals.ask_fallback = moat::policy::Security::Full;
    c.policy.host.security = moat::policy::Security::Full;
    c.policy.host.ask = moat::policy::Ask::Always;
    let m = moat(c);
    let mut events = m.events();
    let (cmd, marker) = touch(&m.scratch(), "fallback-full");
    let r = m.exec(req(&cmd)).await;
    let id = r.details.approval_id().unwrap().to_string();
    let ev = event_with(&mut events, &id, 10).await;
    assert!(ev.starts_with("Exec finished"), "{ev}");
    assert!(marker.exists());
    assert_eq!(
        m.app.approvals.get(&id).unwrap().decision,
        Some(RecordedDecision::Fallback)
    );

    // allowlist (and full clamped to the allowlist mode in force): only what the allowlist
    // covers would run; this is a miss.
    let mut c = config(ElevatedLevel::Off);
    c.approvals.timeout_secs = 1;
    c.approvals.ask_fallback = moat::policy::Security::Full;
    let m = moat(c);
    let mut events = m.events();
    let (cmd, marker) = touch(&m.scratch(), "fallback-allowlist");
    let r = m.exec(req(&cmd)).await;
    let id = r.details.approval_id().unwrap().to_string();
    let ev = event_with(&mut events, &id, 10).await;
    assert!(ev.contains("approval-timeout (allowlist-miss)"), "{ev}");
    assert!(!marker.exists());
}
