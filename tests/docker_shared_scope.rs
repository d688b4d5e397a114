//! Sessions that share a container (`sandbox.scope = "agent"`) share its environment and its
//! processes (docs/security.md, "Shared containers"). The attack: session `bot:y` reads a secret
//! meant for `bot:x` from `/proc/*/environ` and kills x's background process. A secret for
//! single sessions is therefore refused in that configuration, at config load and at use; a
//! secret for the whole container works for every session in it, and `process list/kill` show
//! the container's processes to each of them.

mod common;

use moat::config::{Config, Scope, SecretConfig};
use moat::tools::ProcessRequest;

const VALUE: &str = "shared-scope-7f3e9a1c";

fn secret_for(sessions: &[String]) -> SecretConfig {
    SecretConfig {
        env: "SHARED_SCOPE_SOURCE_VAR".into(),
        sessions: sessions.to_vec(),
        ..Default::default()
    }
}

/// Removes the agent's container, whose name starts with `moat-agent-…`, not the test prefix.
struct Cleanup(String);

impl Drop for Cleanup {
    fn drop(&mut self) {
        let _ = std::process::Command::new("docker")
            .args(["rm", "-f", &self.0])
            .output();
    }
}

#[tokio::test]
async fn a_single_session_secret_is_refused_where_sessions_share_a_container() {
    std::env::set_var("SHARED_SCOPE_SOURCE_VAR", VALUE);
    if common::engine().await.is_none() {
        return;
    }
    // At config load: the file names the key to change and why.
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("moat.toml"),
        "[sandbox]\nscope = \"agent\"\n\n[secrets.TOKEN]\nenv = \"SHARED_SCOPE_SOURCE_VAR\"\nsessions = [\"bot:x\"]\n",
    )
    .unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_moat"))
        .args(["config", "show"])
        .env("MOAT_HOME", dir.path())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("secrets.TOKEN.sessions")
            && err.contains("`bot:x`")
            && err.contains("sandbox.scope = \"agent\"")
            && err.contains("environment"),
        "{err}"
    );
    // `bot:*` misses the session `bot`, which shares the same container; `shared` takes `*`.
    for (scope, pattern) in [("agent", "bot:*"), ("agent", "main"), ("shared", "bot*")] {
        let text = format!(
            "[sandbox]\nscope = \"{scope}\"\n[secrets.TOKEN]\nenv = \"X\"\nsessions = [\"{pattern}\"]\n"
        );
        let err = moat::config::load_from_str(&text, "test", &[], None)
            .unwrap_err()
            .to_string();
        assert!(err.contains(&format!("`{pattern}`")), "{err}");
    }
    let mut config = Config::default();
    config.sandbox.scope = Scope::Agent;
    config
        .secrets
        .insert("TOKEN".into(), secret_for(&["bot:*".into()]));
    // And a moat built from such a config without validation refuses it at start.
    let home = moat::home::Home::at(dir.path());
    let runtime = common::engine().await.unwrap();
    let source = moat::config::ConfigSource {
        file: None,
        overrides: vec![],
    };
    let err = match moat::app::App::with_engine(home, config, source, runtime) {
        Ok(_) => panic!("a single-session secret was accepted under scope = agent"),
        Err(e) => format!("{e:#}"),
    };
    assert!(err.contains("sandbox.scope"), "{err}");
}

#[tokio::test]
async fn a_container_secret_and_its_processes_are_shared_by_the_sessions_in_it() {
    std::env::set_var("SHARED_SCOPE_SOURCE_VAR", VALUE);
    let agent = format!("sharedscope{}", std::process::id());
    let mut config = Config::default();
    config.sandbox.scope = Scope::Agent;
    config
        .secrets
        .insert("TOKEN".into(), secret_for(&[format!("{agent}*")]));
    let text = format!(
        "[sandbox]\nscope = \"agent\"\n[secrets.TOKEN]\nenv = \"X\"\nsessions = [\"{agent}*\"]\n"
    );
    moat::config::load_from_str(&text, "test", &[], None)
        .expect("a whole-agent secret is accepted");
    let Some(m) = common::moat("sharedscope", config).await else {
        return;
    };
    // TestMoat prefixes keys; use full keys through the tools directly.
    let (x, y) = (format!("{agent}:x"), format!("{agent}:y"));
    let _cleanup = Cleanup(m.app.sessions.names(&x).1.name);
    let run = |session: String, command: &'static str, background: bool| {
        let exec = m.app.exec.clone();
        async move {
            let req = moat::tools::ExecRequest {
                command: command.into(),
                background: background.then_some(true),
                ..Default::default()
            };
            exec.run(&session, &req, true).await.unwrap()
        }
    };
    // Both sessions get the secret (redacted in what they see) and run in one container.
    for s in [&x, &y] {
        let r = run(s.clone(), r#"echo "$TOKEN"; hostname"#, false).await;
        let out = r.details.aggregated().unwrap();
        assert!(out.starts_with("[REDACTED:TOKEN]\n"), "{out}");
    }
    assert_eq!(
        m.app.sessions.names(&x).1.name,
        m.app.sessions.names(&y).1.name
    );
    // x starts a background process; y sees it in `process list` and can stop it: processes
    // are per container, as documented, and the tool says so instead of hiding them.
    let r = run(x.clone(), "sleep 60", true).await;
    let id = r.details.process_id().unwrap().to_string();
    let tool = &m.app.process;
    let list = tool
        .run(
            &y,
            &ProcessRequest {
                action: "list".into(),
                ..Default::default()
            },
        )
        .await;
    assert!(list.text().contains(&id), "{}", list.text());
    let kill = tool
        .run(
            &y,
            &ProcessRequest {
                action: "kill".into(),
                process_id: Some(id.clone()),
                ..Default::default()
            },
        )
        .await;
    assert!(kill.text().contains("Killed"), "{}", kill.text());
    // Another agent's session sees none of it.
    let other = format!("other{}:z", std::process::id());
    let list = tool
        .run(
            &other,
            &ProcessRequest {
                action: "list".into(),
                ..Default::default()
            },
        )
        .await;
    assert!(!list.text().contains(&id), "{}", list.text());
}
