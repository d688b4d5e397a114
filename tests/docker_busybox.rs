//! The core exec path in a minimal image that is not Debian: a static busybox in an image
//! built from scratch, with no shell profile, no python, no libc. The helper needs nothing
//! from the image (docs/helper.md), so these pass on both transports.

mod common;

use std::time::Duration;

use moat::config::Config;
use moat::tools::ExecRequest;
use moat::tools::ProcessRequest;

const IMAGE: &str = "moat-test-busybox:latest";

/// Builds [`IMAGE`] from the host's static busybox (Debian's `busybox-static`) unless it is
/// there; `None` (skip) without one, a failure under `CI=true`.
fn busybox_image() -> Option<()> {
    let have = std::process::Command::new("docker")
        .args(["image", "inspect", IMAGE])
        .output()
        .is_ok_and(|o| o.status.success());
    if have {
        return Some(());
    }
    let ci = std::env::var("CI").is_ok_and(|v| v == "true");
    let busybox = std::path::Path::new("/bin/busybox");
    let is_static = std::process::Command::new("sh")
        .args(["-c", "! ldd /bin/busybox >/dev/null 2>&1"])
        .status()
        .is_ok_and(|s| s.success());
    if !busybox.exists() || !is_static {
        assert!(
            !ci,
            "a static /bin/busybox is needed under CI=true (apt-get install busybox-static)"
        );
        eprintln!("skipping: no static /bin/busybox (apt-get install busybox-static)");
        return None;
    }
    let ctx = tempfile::tempdir().unwrap();
    std::fs::copy(busybox, ctx.path().join("busybox")).unwrap();
    std::fs::write(
        ctx.path().join("Dockerfile"),
        "FROM scratch\nCOPY busybox /bin/busybox\nRUN [\"/bin/busybox\", \"--install\", \"-s\", \"/bin\"]\n",
    )
    .unwrap();
    let out = std::process::Command::new("docker")
        .args(["build", "-q", "-t", IMAGE])
        .arg(ctx.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "failed to build {IMAGE}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(())
}

async fn busybox_moat(prefix: &str) -> Option<common::TestMoat> {
    busybox_image()?;
    let mut config = Config::default();
    config.sandbox.image = IMAGE.into();
    common::moat(prefix, config).await
}

#[tokio::test]
async fn output_exit_codes_env_and_workdir() {
    let Some(m) = busybox_moat("t-bb-exec").await else {
        return;
    };
    let r = m.exec("a", "echo hi; echo err >&2; exit 3").await;
    assert_eq!(r.details.to_json()["exitCode"], 3, "{}", r.details);
    assert_eq!(r.details.to_json()["aggregated"], "hi\nerr\n");
    assert!(m
        .docker_exec("a", "ls /etc/debian_version 2>&1")
        .contains("No such file"));
    let req = ExecRequest {
        command: "echo $GREETING; pwd; id -u".into(),
        env: [("GREETING".to_string(), "hello".to_string())].into(),
        ..Default::default()
    };
    let r = m.exec_req("a", req).await;
    assert_eq!(
        r.details.to_json()["aggregated"],
        "hello\n/workspace\n1000\n",
        "{}",
        r.details
    );
    let expected = match common::test_transport().unwrap_or_default() {
        moat::config::Transport::Helper => "helper",
        moat::config::Transport::Exec => "exec",
    };
    assert_eq!(m.app.commands.transport_of(&m.container("a")), expected);
}

#[tokio::test]
async fn a_timeout_ends_the_whole_group() {
    let Some(m) = busybox_moat("t-bb-timeout").await else {
        return;
    };
    let req = ExecRequest {
        command: "sleep 1000 & sleep 1000".into(),
        timeout: Some(1.0),
        ..Default::default()
    };
    let r = m.exec_req("a", req).await;
    assert_eq!(r.details.to_json()["timedOut"], true, "{}", r.details);
    let ps = m.docker_exec("a", "ps -o args");
    assert!(!ps.contains("sleep 1000"), "left behind:\n{ps}");
}

#[tokio::test]
async fn background_stdin_and_pty() {
    let Some(m) = busybox_moat("t-bb-bg").await else {
        return;
    };
    let id = m.background("a", "cat; echo done").await;
    let w = ProcessRequest {
        action: "write".into(),
        process_id: Some(id.clone()),
        data: Some("hello\n".into()),
        eof: Some(true),
        ..Default::default()
    };
    m.process("a", &w).await;
    let p = m.app.registry.get(&m.key("a"), &id).unwrap();
    assert!(p.wait_exit(Duration::from_secs(10)).await);
    let log = m
        .process(
            "a",
            &ProcessRequest {
                action: "log".into(),
                process_id: Some(id),
                ..Default::default()
            },
        )
        .await;
    assert_eq!(log.text(), "hello\ndone");
    let req = ExecRequest {
        command: "[ -t 0 ] && [ -t 1 ] && echo on a terminal; exit 5".into(),
        pty: Some(true),
        ..Default::default()
    };
    let r = m.exec_req("a", req).await;
    assert_eq!(r.details.to_json()["exitCode"], 5, "{}", r.details);
    assert!(r.text().starts_with("on a terminal"), "{}", r.text());
}
