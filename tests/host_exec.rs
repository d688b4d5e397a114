//! The host executor: gates, env policy, process groups, PTY, the shared process pipeline.
//! No engine needed.

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::host::{config, moat, req};
use moat::config::{Config, ElevatedLevel};
use moat::contract::Status;
use moat::tools::{Caller, ExecRequest};
use moat::tools::{ExecError, ProcessRequest};

#[tokio::test]
async fn elevated_is_refused_with_every_failing_gate() {
    let m = moat(Config::default());
    let err = m
        .app
        .exec
        .run_for(&Caller::cli(), "main", &req("id"), true)
        .await
        .unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, ExecError::Elevated(_)), "{text}");
    assert!(text.contains("elevated.enabled"), "{text}");
    assert!(text.contains("elevated.allow_from.cli"), "{text}");
    // An agent without identity fails allow_from even where elevated is enabled.
    let m = moat(config(ElevatedLevel::Full));
    let err = m.app.exec.run("main", &req("id"), true).await.unwrap_err();
    assert!(err.to_string().contains("identity"), "{err}");
    assert!(!err.to_string().contains("elevated.enabled"), "{err}");
}

#[tokio::test]
async fn full_level_runs_on_the_host_in_the_host_workdir() {
    let m = moat(config(ElevatedLevel::Full));
    let r = m
        .exec(req(
            r#"printf '%s|%s|' "$MOAT_SHELL" "$(pwd)"; echo "$PATH"; exit 3"#,
        ))
        .await;
    assert_eq!(r.status(), Some(Status::Failed), "{}", r.text());
    assert_eq!(r.details.to_json()["exitCode"], 3);
    let out = r.details.aggregated().unwrap();
    let wd = m.dir.path().join("host-work");
    assert!(out.starts_with("exec|"), "{out}");
    assert!(
        out.contains(&wd.canonicalize().unwrap().display().to_string()),
        "{out}"
    );
    assert!(out.contains("/usr/bin"), "{out}");
}

#[tokio::test]
async fn path_prepend_comes_first() {
    let mut c = config(ElevatedLevel::Full);
    c.elevated.path_prepend = vec!["/opt/moat-test/bin".into()];
    let m = moat(c);
    let r = m.exec(req(r#"echo "$PATH""#)).await;
    let out = r.details.aggregated().unwrap();
    assert!(out.starts_with("/opt/moat-test/bin:"), "{out}");
}

#[tokio::test]
async fn env_names_off_the_allowlist_are_refused_by_name() {
    let m = moat(config(ElevatedLevel::Full));
    for key in ["PATH", "LD_PRELOAD", "BASH_ENV", "GIT_CONFIG_COUNT", "HOME"] {
        let mut r = req("true");
        r.env = BTreeMap::from([(key.to_string(), "x".to_string())]);
        let err = m
            .app
            .exec
            .run_for(&Caller::cli(), "main", &r, true)
            .await
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("Security Violation: "), "{key}: {err}");
        assert!(
            err.contains(&format!("`{key}` is not on the host env allowlist")),
            "{key}: {err}"
        );
    }
    let mut r = req("true");
    r.env = ["PATH", "LD_PRELOAD", "BASH_ENV", "GIT_CONFIG_COUNT", "TERM"]
        .iter()
        .map(|k| (k.to_string(), "xterm".to_string()))
        .collect();
    let err = m
        .app
        .exec
        .run_for(&Caller::cli(), "main", &r, true)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("`BASH_ENV`, `GIT_CONFIG_COUNT`, `LD_PRELOAD`, `PATH` are not"),
        "{err}"
    );
    assert!(!err.contains("`TERM`"), "{err}");
    // Built-in names pass.
    let mut r = req("printf %s \"$TERM\"");
    r.env = BTreeMap::from([("TERM".to_string(), "xterm".to_string())]);
    assert_eq!(m.exec(r).await.details.to_json()["aggregated"], "xterm");
}

#[tokio::test]
async fn moat_credentials_do_not_reach_host_commands() {
    // SAFETY of the test: no other test in this binary reads GITHUB_TOKEN.
    std::env::set_var("GITHUB_TOKEN", "ghp_moat_own_token");
    let m = moat(config(ElevatedLevel::Full));
    let r = m
        .exec(req(
            r#"printf '[%s]' "${GITHUB_TOKEN-unset}"; env | grep -c ghp_moat_own_token"#,
        ))
        .await;
    assert_eq!(
        r.details.to_json()["aggregated"],
        "[unset]0\n",
        "{}",
        r.text()
    );
}

#[tokio::test]
async fn a_timeout_leaves_no_process_of_the_group() {
    let m = moat(config(ElevatedLevel::Full));
    let mut r = req("sleep 60 & sleep 61 & sh -c 'sleep 62'; wait");
    r.background = Some(true);
    r.timeout = Some(1.0);
    let started = m.exec(r).await;
    assert_eq!(
        started.status(),
        Some(Status::Running),
        "{}",
        started.text()
    );
    let pgid = started.details.to_json()["pid"].as_i64().expect("pgid") as i32;
    let id = started.details.process_id().unwrap().to_string();
    let tool = &m.app.process;
    let polled = tool
        .run(
            "main",
            &ProcessRequest {
                action: "poll".into(),
                process_id: Some(id),
                timeout: Some(10_000),
                ..Default::default()
            },
        )
        .await;
    assert_eq!(
        polled.details.to_json()["status"],
        "failed",
        "{}",
        polled.text()
    );
    let gone = nix::sys::signal::killpg(nix::unistd::Pid::from_raw(pgid), None);
    assert_eq!(
        gone,
        Err(nix::errno::Errno::ESRCH),
        "group {pgid} still has processes"
    );
}

#[tokio::test]
async fn host_processes_take_stdin_poll_and_kill() {
    let m = moat(config(ElevatedLevel::Full));
    let mut r = req("read line; echo got:$line; sleep 60");
    r.background = Some(true);
    let started = m.exec(r).await;
    let id = started.details.process_id().unwrap().to_string();
    let pgid = started.details.to_json()["pid"].as_i64().unwrap() as i32;
    let tool = &m.app.process;
    let call = |action: &str, data: Option<&str>| ProcessRequest {
        action: action.into(),
        process_id: Some(id.clone()),
        data: data.map(str::to_string),
        timeout: Some(2000),
        ..Default::default()
    };
    tool.run("main", &call("write", Some("hello\n"))).await;
    let mut seen = String::new();
    for _ in 0..20 {
        seen.push_str(tool.run("main", &call("poll", None)).await.text());
        if seen.contains("got:hello") {
            break;
        }
    }
    assert!(seen.contains("got:hello"), "{seen}");
    let listed = tool.run("main", &call("list", None)).await;
    assert!(listed.text().contains(&id), "{}", listed.text());
    tool.run("main", &call("kill", None)).await;
    let log = tool.run("main", &call("log", None)).await;
    assert!(log.text().contains("got:hello"), "{}", log.text());
    assert_eq!(
        nix::sys::signal::killpg(nix::unistd::Pid::from_raw(pgid), None),
        Err(nix::errno::Errno::ESRCH)
    );
}

#[tokio::test]
async fn host_pty() {
    let m = moat(config(ElevatedLevel::Full));
    let mut r = req(r#"test -t 0 && test -t 1 && echo is-a-tty; printf '%s' "$MOAT_SHELL""#);
    r.pty = Some(true);
    let out = m.exec(r).await;
    let text = out.details.aggregated().unwrap();
    assert!(text.contains("is-a-tty"), "{}", out.text());
    assert!(text.contains("exec"), "{}", out.text());
}

#[tokio::test]
async fn a_missing_host_workdir_is_an_error() {
    let m = moat(config(ElevatedLevel::Full));
    let r = ExecRequest {
        workdir: Some("/nonexistent/moat".into()),
        ..req("true")
    };
    let err = m
        .app
        .exec
        .run_for(&Caller::cli(), "main", &r, true)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("/nonexistent/moat"), "{err}");
    let _ = Duration::ZERO;
}
