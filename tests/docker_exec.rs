//! `exec` against the real engine: output, exit codes, env, PATH, workdir, timeouts, output
//! caps and sanitizing, container reuse/recreation, hardening, isolation.

mod common;

use moat::config::Config;
use moat::contract::Status;
use moat::tools::ExecRequest;

#[tokio::test]
async fn output_and_exit_codes() {
    let Some(m) = common::moat("t-out", Config::default()).await else {
        return;
    };
    let r = m.exec("a", "echo hi; echo err >&2; exit 3").await;
    assert_eq!(r.status(), Some(Status::Failed));
    assert_eq!(r.details.to_json()["exitCode"], 3);
    assert!(r.text().contains("hi\nerr"), "{}", r.text());
    assert!(r.text().ends_with("Command exited with code 3"));
    let r = m.exec("a", "true").await;
    assert_eq!(r.status(), Some(Status::Completed));
    assert_eq!(r.text(), "(no output)");
    // Ordering of interleaved stdout/stderr is preserved.
    let r = m
        .exec("a", "for i in 1 2 3; do echo o$i; echo e$i >&2; done")
        .await;
    assert_eq!(
        r.details.to_json()["aggregated"],
        "o1\ne1\no2\ne2\no3\ne3\n"
    );
}

#[tokio::test]
async fn env_merge_and_path_prepend_survive_login_profile() {
    let mut config = Config::default();
    config.sandbox.env.insert("FROM_CONFIG".into(), "c".into());
    config
        .sandbox
        .env
        .insert("OVERRIDDEN".into(), "config".into());
    config.sandbox.path_prepend = vec!["/workspace/bin".into()];
    let Some(m) = common::moat("t-env", config).await else {
        return;
    };
    let req = ExecRequest {
        command:
            "echo $FROM_CONFIG $OVERRIDDEN $MOAT_SHELL; echo $PATH; echo ${MOAT_PATH_PREPEND-unset}"
                .into(),
        env: [("OVERRIDDEN".to_string(), "request".to_string())].into(),
        ..Default::default()
    };
    let r = m.exec_req("a", req).await;
    let lines: Vec<&str> = r.text().lines().collect();
    assert_eq!(lines[0], "c request exec");
    assert!(
        lines[1].starts_with("/workspace/bin:/usr/local/bin"),
        "{}",
        lines[1]
    );
    assert_eq!(
        lines[2], "unset",
        "the internal variable does not leak to the command"
    );
    // A tool placed in the prepended dir wins over the system one.
    m.exec(
        "a",
        "mkdir -p bin && printf '#!/bin/sh\\necho shimmed\\n' > bin/ls && chmod +x bin/ls",
    )
    .await;
    assert_eq!(m.exec("a", "ls").await.text(), "shimmed");
}

#[tokio::test]
async fn bad_env_is_refused_by_name() {
    let Some(m) = common::moat("t-badenv", Config::default()).await else {
        return;
    };
    for (key, value, needle) in [
        ("BAD-KEY", "x", "BAD-KEY"),
        ("GOOD", "a\0b", "GOOD"),
        ("1X", "x", "1X"),
    ] {
        let req = ExecRequest {
            command: "true".into(),
            env: [(key.to_string(), value.to_string())].into(),
            ..Default::default()
        };
        let err = m
            .app
            .exec
            .run(&m.key("a"), &req, true)
            .await
            .unwrap_err()
            .to_string();
        assert!(err.contains(needle), "{err}");
    }
    let err = m
        .app
        .exec
        .run(
            &m.key("a"),
            &ExecRequest {
                command: "  ".into(),
                ..Default::default()
            },
            true,
        )
        .await
        .unwrap_err();
    assert_eq!(err.to_string(), "Provide a command to start.");
}

#[tokio::test]
async fn workdir_mapping_and_refused_escapes() {
    let Some(m) = common::moat("t-wd", Config::default()).await else {
        return;
    };
    m.exec("a", "mkdir -p src/app && ln -s /etc etc-link").await;
    let host_ws = m
        .app
        .sessions
        .workspace_dir(&m.app.sessions.names(&m.key("a")).1.slug);
    let run_in = |wd: String| ExecRequest {
        command: "pwd".into(),
        workdir: Some(wd),
        ..Default::default()
    };
    assert_eq!(
        m.exec_req("a", run_in("src/app".into())).await.text(),
        "/workspace/src/app"
    );
    assert_eq!(
        m.exec_req("a", run_in("/workspace/src".into()))
            .await
            .text(),
        "/workspace/src"
    );
    let host_path = format!("{}/src/app", host_ws.display());
    assert_eq!(
        m.exec_req("a", run_in(host_path)).await.text(),
        "/workspace/src/app"
    );
    for bad in [
        "../",
        "/etc",
        "/workspace/../etc",
        "etc-link",
        "missing-dir",
    ] {
        let err = m
            .app
            .exec
            .run(&m.key("a"), &run_in(bad.into()), true)
            .await
            .unwrap_err()
            .to_string();
        assert!(err.contains("allowed root: /workspace"), "{bad}: {err}");
    }
}

#[tokio::test]
async fn timeout_kills_the_whole_group() {
    let Some(m) = common::moat("t-timeout", Config::default()).await else {
        return;
    };
    let req = ExecRequest {
        command: "sleep 1000 & sleep 1000".into(),
        timeout: Some(1.0),
        ..Default::default()
    };
    let r = m.exec_req("a", req).await;
    assert_eq!(r.status(), Some(Status::Failed));
    assert_eq!(r.details.to_json()["timedOut"], true);
    assert!(
        r.text().contains("Command timed out after 1 seconds"),
        "{}",
        r.text()
    );
    let ps = m.docker_exec("a", "ps -eo args");
    assert!(!ps.contains("sleep 1000"), "left behind:\n{ps}");
    // A command that ignores TERM is killed after the grace period.
    let req = ExecRequest {
        command: "trap '' TERM; sleep 1000".into(),
        timeout: Some(1.0),
        ..Default::default()
    };
    let r = m.exec_req("a", req).await;
    assert_eq!(r.details.to_json()["timedOut"], true);
    assert!(!m.docker_exec("a", "ps -eo args").contains("sleep 1000"));
}

#[tokio::test]
async fn large_output_is_capped_with_marker() {
    let Some(m) = common::moat("t-cap", Config::default()).await else {
        return;
    };
    let r = m
        .exec(
            "a",
            "head -c 1000000 /dev/zero | tr '\\0' x; echo; echo END",
        )
        .await;
    assert_eq!(r.details.to_json()["truncated"], true);
    let text = r.details.aggregated().unwrap();
    assert!(text.contains("chars truncated …]"));
    assert!(text.starts_with("xxxx"));
    assert!(text.ends_with("END\n"));
    assert!(text.chars().count() < 200_100);
}

#[tokio::test]
async fn binary_and_ansi_output_is_sanitized() {
    let Some(m) = common::moat("t-ansi", Config::default()).await else {
        return;
    };
    // A colour sequence split across two writes with a pause in between, a bidi override,
    // invalid UTF-8 and raw control bytes.
    let r = m
        .exec("a", "printf 'A\\033[3'; sleep 0.3; printf '1mRED\\033[0m\\n'; printf 'B\\342\\200\\256C\\n'; printf '\\377\\001\\002D\\n'")
        .await;
    assert_eq!(r.details.to_json()["aggregated"], "ARED\nBC\n\u{FFFD}D\n");
}

#[tokio::test]
async fn container_reused_then_recreated_on_config_change() {
    let Some(m) = common::moat("t-reuse", Config::default()).await else {
        return;
    };
    m.exec("a", "touch /tmp/marker").await;
    let first = m.inspect("a")["Id"].clone();
    // `test -e`, not `ls`: under Debian's runsc, GNU ls fails on every path (docs/security.md).
    assert_eq!(
        m.exec("a", "test -e /tmp/marker").await.status(),
        Some(Status::Completed)
    );
    assert_eq!(m.inspect("a")["Id"], first);
    // Same home, changed config, container idle for longer than 5 minutes: recreated.
    let mut changed = Config::default();
    changed.sandbox.pids_limit = 256;
    let name = m.container("a");
    m.app.store.touch_session(&m.key("a"), &name, 0).unwrap();
    let app2 = m.another(changed);
    let r = app2
        .exec
        .run(
            &m.key("a"),
            &ExecRequest {
                command: "test -e /tmp/marker".into(),
                ..Default::default()
            },
            true,
        )
        .await
        .unwrap();
    assert_eq!(
        r.status(),
        Some(Status::Failed),
        "a new container has a fresh /tmp"
    );
    assert_ne!(m.inspect("a")["Id"], first);
    assert_eq!(m.inspect("a")["HostConfig"]["PidsLimit"], 256);
}

#[tokio::test]
async fn hardening_defaults_are_visible_in_inspect() {
    let Some(m) = common::moat("t-hard", Config::default()).await else {
        return;
    };
    m.exec("a", "true").await;
    let i = m.inspect("a");
    let hc = &i["HostConfig"];
    assert_eq!(hc["ReadonlyRootfs"], true);
    assert_eq!(hc["NetworkMode"], "none");
    assert_eq!(hc["CapDrop"], serde_json::json!(["ALL"]));
    assert!(hc["SecurityOpt"].to_string().contains("no-new-privileges"));
    assert_eq!(hc["Init"], true);
    assert_eq!(hc["PidsLimit"], 512);
    assert_eq!(hc["Memory"], 2i64 << 30);
    for t in ["/tmp", "/var/tmp", "/run"] {
        assert!(hc["Tmpfs"].get(t).is_some(), "tmpfs {t}");
    }
    assert_eq!(i["Config"]["User"], "1000:1000");
    assert!(i["Config"]["Env"].to_string().contains("LANG=C.UTF-8"));
    assert_eq!(i["Config"]["Labels"]["dev.moat.session"], m.key("a"));
    for label in [
        "dev.moat.config-hash",
        "dev.moat.created-at",
        "dev.moat.version",
    ] {
        assert!(i["Config"]["Labels"].get(label).is_some(), "{label}");
    }
    let mounts = i["Mounts"].to_string();
    assert!(mounts.contains("\"/workspace\""));
    // And from the inside: no root, no network, read-only root.
    let r = m
        .exec(
            "a",
            "id -u; touch /usr/x 2>&1 || echo ro; cat /proc/net/dev | wc -l",
        )
        .await;
    let lines: Vec<&str> = r.text().lines().collect();
    assert_eq!(lines[0], "1000");
    assert!(
        lines[1].contains("Read-only") || lines.contains(&"ro"),
        "{lines:?}"
    );
}

#[tokio::test]
async fn sessions_cannot_see_each_other() {
    let Some(m) = common::moat("t-iso", Config::default()).await else {
        return;
    };
    m.exec("a", "echo secret-a > /workspace/a.txt; echo x > /tmp/a-tmp")
        .await;
    let r = m
        .exec("b", "ls /workspace; cat /tmp/a-tmp 2>&1; ls /run/moat")
        .await;
    assert!(!r.text().contains("a.txt"), "{}", r.text());
    assert!(r.text().contains("No such file"));
    assert_ne!(m.container("a"), m.container("b"));
}
