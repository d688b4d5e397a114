//! Secrets in a session's sandbox: injected into the env, redacted from every output moat
//! returns (including output split across writes and the exit event).

mod common;

use std::time::Duration;

use moat::config::{Config, SecretConfig};
use moat::contract::Status;
use moat::tools::ExecRequest;

const VALUE: &str = "sb-51a2b3c4d5e6";

#[tokio::test]
async fn a_session_secret_is_redacted_everywhere() {
    std::env::set_var("DOCKER_SECRET_SOURCE_VAR", VALUE);
    let mut config = Config::default();
    let Some(m) = ({
        config.secrets.insert(
            "API_TOKEN".into(),
            SecretConfig {
                env: "DOCKER_SECRET_SOURCE_VAR".into(),
                sessions: vec!["*".into()],
                ..Default::default()
            },
        );
        common::moat("secrets", config).await
    }) else {
        return;
    };
    let r = m.exec("s", r#"echo "$API_TOKEN""#).await;
    assert_eq!(
        r.details.to_json()["aggregated"],
        "[REDACTED:API_TOKEN]\n",
        "{}",
        r.text()
    );
    let r = m.exec("s", "printenv").await;
    let out = r.details.aggregated().unwrap();
    assert!(
        out.contains("API_TOKEN=[REDACTED:API_TOKEN]") && !out.contains(VALUE),
        "{out}"
    );
    let (a, b) = VALUE.split_at(6);
    let r = m
        .exec(
            "s",
            &format!("printf '%s' '{a}'; sleep 0.4; printf '%s\\n' '{b}'"),
        )
        .await;
    assert_eq!(r.details.to_json()["aggregated"], "[REDACTED:API_TOKEN]\n");

    let mut events = m.app.registry.events().subscribe();
    let r = m
        .exec_req(
            "s",
            ExecRequest {
                command: r#"sleep 0.2; echo "bye $API_TOKEN"; exit 4"#.into(),
                background: Some(true),
                ..Default::default()
            },
        )
        .await;
    assert_eq!(r.status(), Some(Status::Running));
    let ev = tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            let e = events.recv().await.unwrap();
            if e.text.starts_with("Exec failed") {
                return e.text;
            }
        }
    })
    .await
    .expect("exit event");
    assert!(
        ev.contains("code 4") && ev.contains("bye [REDACTED:API_TOKEN]"),
        "{ev}"
    );
    assert!(!ev.contains(VALUE), "{ev}");
}
