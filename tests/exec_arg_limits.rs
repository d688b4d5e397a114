//! Commands and environments bigger than one `execve` argument (Linux's MAX_ARG_STRLEN,
//! 128 KiB), tried against the real engine. Before the bound, such a run started and failed
//! inside the engine: no output, exit 126 (MCP) or 1 (HTTP). Now each is refused before
//! anything starts, naming the limit and the field (docs/security.md, "Bounds on what one exec
//! carries"), and the session keeps working.

mod common;

use moat::config::{Config, SecretConfig};
use moat::contract::Status;
use moat::policy::Security;
use moat::tools::ExecError;
use moat::tools::ExecRequest;

fn req(command: String) -> ExecRequest {
    ExecRequest {
        command,
        ..Default::default()
    }
}

#[tokio::test]
async fn a_plan_that_quoting_grows_past_one_argument_is_refused_up_front() {
    let mut config = Config::default();
    config.policy.sandbox.security = Security::Allowlist;
    config.policy.sandbox.allowlist = vec!["/usr/bin/echo".into(), "/usr/bin/printf".into()];
    let Some(m) = common::moat("arglim-plan", config).await else {
        return;
    };
    let session = m.key("s");
    // 60 KB of text, within the 64 KiB parsing bound; the rebuilt plan quotes each `'` as
    // `'\''`: 240 KB, which no exec can carry.
    let command = format!("echo \"{}\"", "'".repeat(60_000));
    assert!(command.len() < 64 * 1024);
    let err = m
        .app
        .exec
        .run(&session, &req(command), true)
        .await
        .expect_err("the plan does not fit in one argument");
    assert!(matches!(err, ExecError::ArgLimit(_)), "{err:?}");
    let text = err.to_string();
    assert!(text.contains("the policy's rebuilt plan"), "{text}");
    assert!(text.contains("131072 bytes"), "{text}");
    assert!(text.contains("MAX_ARG_STRLEN"), "{text}");
    // Nothing was started: no process is listed, and the session still runs commands.
    assert!(m.app.registry.list(&session).is_empty());
    let r = m.exec("s", "echo ok").await;
    assert_eq!(r.text(), "ok", "{}", r.text());
    // A plan that fits, however large, runs and its output arrives whole.
    let fits = format!("printf %s \"{}\"", "'".repeat(20_000));
    let r = m.exec_req("s", req(fits)).await;
    assert_eq!(r.status(), Some(Status::Completed), "{}", r.text());
    assert_eq!(r.text().len(), 20_000);
}

#[tokio::test]
async fn the_command_bound_holds_below_one_argument() {
    let Some(m) = common::moat("arglim-cmd", Config::default()).await else {
        return;
    };
    // Just under the parsing bound: runs, and the whole text reached the shell.
    let body = "x".repeat(64 * 1024 - 200);
    let r = m
        .exec_req("s", req(format!("printf %s '{body}' | wc -c")))
        .await;
    assert_eq!(r.status(), Some(Status::Completed), "{}", r.text());
    assert_eq!(r.text().trim(), body.len().to_string());
    // Past it, and past one argument: refused by the bound that names its limit, in every
    // mode, before a container is touched.
    for size in [64 * 1024 + 1, 200 * 1024] {
        let r = m
            .exec_req("s", req(format!("printf %s '{}'", "y".repeat(size))))
            .await;
        assert_eq!(r.details.to_json()["denied"], true, "{}", r.text());
        assert!(
            r.text().contains("command is longer than 65536 bytes"),
            "{}",
            r.text()
        );
    }
}

#[tokio::test]
async fn env_strings_past_one_argument_are_refused_naming_the_variable() {
    let Some(runtime) = common::engine().await else {
        return;
    };
    // A secret read from moat's environment (or a file) once had no size limit of its own: a
    // 200 KiB certificate made every exec of the session fail in the engine. moat now refuses
    // it when it starts, naming the secret and the limit.
    std::env::set_var("ARGLIM_BIG_SECRET_SOURCE", "s".repeat(200 * 1024));
    let mut config = Config::default();
    config.secrets.insert(
        "BIG_CERT".into(),
        SecretConfig {
            env: "ARGLIM_BIG_SECRET_SOURCE".into(),
            sessions: vec!["*".into()],
            ..Default::default()
        },
    );
    let dir = tempfile::tempdir().unwrap();
    let home = moat::home::Home::at(dir.path());
    home.ensure_root().unwrap();
    let source = moat::config::ConfigSource {
        file: None,
        overrides: vec![],
    };
    let err = match moat::app::App::with_engine(home, config, source, runtime) {
        Ok(_) => panic!("a 200 KiB secret cannot reach a command"),
        Err(e) => e.to_string(),
    };
    // Gone before anything else starts a process: a 200 KiB variable in this test's own
    // environment makes every spawn fail with E2BIG (the clean-up's `docker rm` included).
    std::env::remove_var("ARGLIM_BIG_SECRET_SOURCE");
    assert!(
        err.contains("BIG_CERT") && err.contains("131072 bytes"),
        "{err}"
    );
    assert!(
        !err.contains("sssss"),
        "the value must not be quoted: {err}"
    );

    // Settings that each fit can still pass the total one exec may carry: refused at the
    // run, naming the bound, and nothing starts.
    let mut config = Config::default();
    for i in 0..10 {
        config
            .sandbox
            .env
            .insert(format!("CHUNK{i}"), "c".repeat(120 * 1024));
    }
    let Some(m) = common::moat("arglim-env", config).await else {
        return;
    };
    let session = m.key("s");
    let err = m
        .app
        .exec
        .run(&session, &req("echo hi".into()), true)
        .await
        .expect_err("1.2 MiB of environment cannot be passed");
    let text = err.to_string();
    assert!(text.contains("1048576 bytes"), "{text}");
    assert!(m.app.registry.list(&session).is_empty());

    // A request's own env value is held to 32 KiB, far below one argument.
    let Some(m) = common::moat("arglim-req", Config::default()).await else {
        return;
    };
    let mut big = req("echo hi".into());
    big.env.insert("HUGE".into(), "v".repeat(200 * 1024));
    let err = m.app.exec.run(&m.key("s"), &big, true).await.unwrap_err();
    assert!(err.to_string().contains("set env var `HUGE`"), "{err}");
}
