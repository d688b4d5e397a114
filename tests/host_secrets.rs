//! Secrets and skills on the host executor (no engine needed): injected where listed,
//! redacted everywhere moat shows text; skills allowlist their binaries while enabled.

mod common;

use common::host::{config, event_with, moat, req};
use moat::config::{ElevatedLevel, SecretConfig, SkillConfig};
use moat::contract::Status;
use moat::policy::Ask;
use moat::tools::ProcessRequest;

const VALUE: &str = "hs-9f8e7d6c5b4a";

fn with_secret() -> moat::config::Config {
    std::env::set_var("HOST_SECRET_SOURCE_VAR", VALUE);
    let mut c = config(ElevatedLevel::Full);
    c.secrets.insert(
        "DEPLOY_KEY".into(),
        SecretConfig {
            env: "HOST_SECRET_SOURCE_VAR".into(),
            sessions: vec!["main".into()],
            hosts: vec!["host".into()],
            ..Default::default()
        },
    );
    c
}

#[tokio::test]
async fn a_secret_is_injected_and_redacted_from_every_output() {
    let m = moat(with_secret());
    let r = m.exec(req(r#"echo "$DEPLOY_KEY""#)).await;
    assert_eq!(
        r.details.to_json()["aggregated"],
        "[REDACTED:DEPLOY_KEY]\n",
        "{}",
        r.text()
    );
    let r = m.exec(req("printenv")).await;
    let out = r.details.aggregated().unwrap();
    assert!(out.contains("DEPLOY_KEY=[REDACTED:DEPLOY_KEY]"), "{out}");
    assert!(
        !out.contains(VALUE) && !out.contains("HOST_SECRET_SOURCE_VAR"),
        "{out}"
    );
    // Split across two writes, with time between them.
    let (a, b) = VALUE.split_at(7);
    let r = m
        .exec(req(&format!(
            "printf '%s' '{a}'; sleep 0.4; printf '%s\\n' '{b}'"
        )))
        .await;
    assert_eq!(r.details.to_json()["aggregated"], "[REDACTED:DEPLOY_KEY]\n");
    assert!(!r.text().contains(a) || !r.text().contains(b));
}

#[tokio::test]
async fn exit_events_and_logs_are_redacted() {
    let m = moat(with_secret());
    let mut events = m.events();
    let mut r = req(r#"sleep 0.3; echo "key=$DEPLOY_KEY""#);
    r.background = Some(true);
    let started = m.exec(r).await;
    let id = started.details.process_id().unwrap().to_string();
    let ev = event_with(&mut events, "Exec completed", 10).await;
    assert!(
        ev.contains("key=[REDACTED:DEPLOY_KEY]") && !ev.contains(VALUE),
        "{ev}"
    );
    let tool = &m.app.process;
    let log = tool
        .run(
            "main",
            &ProcessRequest {
                action: "log".into(),
                process_id: Some(id),
                ..Default::default()
            },
        )
        .await;
    assert!(log.text().contains("[REDACTED:DEPLOY_KEY]") && !log.text().contains(VALUE));
}

#[tokio::test]
async fn secrets_reach_only_listed_sessions() {
    let m = moat(with_secret());
    let r = m
        .app
        .exec
        .run_for(
            &moat::tools::Caller::cli(),
            "other",
            &req(r#"echo "[${DEPLOY_KEY-}]""#),
            true,
        )
        .await
        .unwrap();
    assert_eq!(r.details.to_json()["aggregated"], "[]\n");
}

#[tokio::test]
async fn approval_events_are_redacted() {
    let mut c = with_secret();
    c.elevated.default_level = ElevatedLevel::Off;
    c.approvals.running_notice_secs = 1;
    let m = moat(c);
    let mut events = m.events();
    let r = m
        .exec(req(&format!("sleep 1.5; echo {VALUE} $DEPLOY_KEY")))
        .await;
    assert_eq!(r.status(), Some(Status::ApprovalPending));
    assert!(!r.text().contains(VALUE), "{}", r.text());
    assert!(r.details.to_json()["command"]
        .as_str()
        .unwrap()
        .contains("[REDACTED:DEPLOY_KEY]"));
    let id = r.details.approval_id().unwrap();
    m.app
        .approvals
        .decide(
            id,
            moat::approvals::ApprovalDecision::AllowOnce,
            &moat::approvals::Decider::operator("op", "cli"),
        )
        .unwrap();
    let running = event_with(&mut events, "Exec running", 10).await;
    assert!(
        running.contains(">1s)") && !running.contains(VALUE),
        "{running}"
    );
    let done = event_with(&mut events, "Exec finished", 10).await;
    assert!(
        done.contains("[REDACTED:DEPLOY_KEY] [REDACTED:DEPLOY_KEY]"),
        "{done}"
    );
    assert!(!done.contains(VALUE), "{done}");
}

#[tokio::test]
async fn an_enabled_skill_allows_its_binary_by_name() {
    let mut c = config(ElevatedLevel::Off);
    c.policy.host.ask = Ask::Off;
    c.skills.insert(
        "sysinfo".into(),
        SkillConfig {
            bins: vec!["uname".into()],
            enabled: false,
        },
    );
    let m = moat(c);
    let denied = m.exec(req("uname -s")).await;
    assert!(
        denied.text().starts_with("Exec denied (host,"),
        "{}",
        denied.text()
    );
    m.app.store.set_skill("sysinfo", true, "cli:op").unwrap();
    let r = m.exec(req("uname -s")).await;
    assert_eq!(r.status(), Some(Status::Completed), "{}", r.text());
    assert_eq!(r.details.to_json()["aggregated"], "Linux\n");
    m.app.store.set_skill("sysinfo", false, "cli:op").unwrap();
    let r = m.exec(req("uname -s")).await;
    assert!(
        r.text().contains("not allowlisted") || r.text().starts_with("Exec denied"),
        "{}",
        r.text()
    );
}

#[tokio::test]
async fn auto_allow_skills_off_disables_skill_entries() {
    let mut c = config(ElevatedLevel::Off);
    c.policy.host.ask = Ask::Off;
    c.policy.auto_allow_skills = false;
    c.skills.insert(
        "sysinfo".into(),
        SkillConfig {
            bins: vec!["uname".into()],
            enabled: true,
        },
    );
    let m = moat(c);
    let r = m.exec(req("uname -s")).await;
    assert!(r.text().starts_with("Exec denied (host,"), "{}", r.text());
}
