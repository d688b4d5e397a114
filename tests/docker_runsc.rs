//! gVisor: `sandbox.runtime = "runsc"` really runs sessions under it, what a foreground
//! command leaves ends with it there too, and a runtime the engine lacks is refused with the
//! fix named (docs/security.md, "runc or runsc").
//! scripts/setup-runsc makes runsc available; under CI=true its absence is a failure.

mod common;

use moat::config::Config;
use moat::contract::Status;

/// Whether the engine offers runsc; panics under CI=true when it does not.
async fn has_runsc(m: &common::TestMoat) -> bool {
    let offered = m.app.engine.runtimes().await.unwrap();
    if offered.iter().any(|r| r == "runsc") {
        return true;
    }
    let ci = std::env::var("CI").is_ok_and(|v| v == "true");
    assert!(
        !ci,
        "the engine offers no runsc under CI=true ({offered:?}): run scripts/setup-runsc"
    );
    eprintln!("skipping: the engine offers no runsc (run scripts/setup-runsc)");
    false
}

#[tokio::test]
async fn a_session_runs_under_gvisor() {
    let mut config = Config::default();
    config.sandbox.runtime = "runsc".into();
    let Some(m) = common::moat("t-runsc", config).await else {
        return;
    };
    if !has_runsc(&m).await {
        return;
    }
    let r = m.exec("a", "uname -r; echo done").await;
    assert_eq!(r.status(), Some(Status::Completed), "{}", r.text());
    assert_eq!(m.inspect("a")["HostConfig"]["Runtime"], "runsc");
    // Commands reach gVisor through the helper, whose socket's listener is the container's
    // gofer (docs/helper.md, "Trust"), not through one engine exec each; unless this run
    // takes the engine's exec on purpose.
    if std::env::var("MOAT_TEST_TRANSPORT").as_deref() != Ok("exec") {
        let r = m.exec("a", "true").await;
        assert_eq!(r.status(), Some(Status::Completed), "{}", r.text());
        assert_eq!(m.app.commands.transport_of(&m.container("a")), "helper");
    }
    // gVisor's own kernel answers, not the host's.
    let host = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
    let inside = r.details.aggregated().unwrap().to_string();
    assert!(!inside.contains(host.trim()), "{inside}");
    // A background process and the kill of its whole tree work as under runc.
    let id = m.background("a", "sleep 300 & sleep 300; echo never").await;
    let count = "ps -eo args | grep -c '^sleep 300' || true";
    let mut running = String::new();
    for _ in 0..50 {
        running = m.docker_exec("a", count);
        if running.trim() == "2" {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(running.trim(), "2", "both sleeps run before the kill");
    let kill = moat::tools::ProcessRequest {
        action: "kill".into(),
        process_id: Some(id),
        ..Default::default()
    };
    let r = m.process("a", &kill).await;
    assert!(!r.text().is_empty());
    let mut left = String::new();
    for _ in 0..50 {
        left = m.docker_exec("a", count);
        if left.trim() == "0" {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(left.trim(), "0", "the whole tree is gone");
}

/// Under gVisor the host cannot see the sandbox's processes, so what a foreground command left
/// is counted from inside (the helper's look) or found by the kill and sweep helpers: a member
/// of its group that dropped the marker, and a marked process out of the group, both end with
/// it (docs/security.md, "Ending a command: what left its process group").
#[tokio::test]
async fn what_a_foreground_command_leaves_ends_with_it_under_gvisor() {
    let mut config = Config::default();
    config.sandbox.runtime = "runsc".into();
    let Some(m) = common::moat("t-gvisor-left", config).await else {
        return;
    };
    if !has_runsc(&m).await {
        return;
    }
    let r = m
        .exec(
            "a",
            "env -i sleep 1000001 & setsid sleep 1000002 & sleep 0.3; echo started",
        )
        .await;
    assert_eq!(r.status(), Some(Status::Completed), "{}", r.text());
    assert!(
        r.text().ends_with("Processes the command left running were ended when it finished; start a command with background=true to keep it running."),
        "{}",
        r.text()
    );
    let ps = m.docker_exec("a", "ps -eo args");
    for n in ["1000001", "1000002"] {
        assert!(
            !ps.contains(&format!("sleep {n}")),
            "sleep {n} is left:\n{ps}"
        );
    }
    // A command that left nothing has no note.
    let r = m.exec("a", "echo ok").await;
    assert_eq!(r.text(), "ok", "{}", r.details);
}

#[tokio::test]
async fn a_runtime_the_engine_lacks_is_refused_naming_the_fix() {
    let mut config = Config::default();
    config.sandbox.runtime = "no-such-runtime".into();
    let Some(m) = common::moat("t-noruntime", config).await else {
        return;
    };
    let err = m
        .app
        .exec
        .run(
            &m.key("a"),
            &moat::tools::ExecRequest {
                command: "true".into(),
                ..Default::default()
            },
            true,
        )
        .await
        .expect_err("refused");
    let text = moat::error_chain::error_chain(&err);
    assert!(
        text.contains("no-such-runtime") && text.contains("scripts/setup-runsc"),
        "{text}"
    );
    assert!(m
        .app
        .engine
        .inspect_container(&m.container("a"))
        .await
        .unwrap()
        .is_none());
}

/// Under gVisor the kernel's pids limit counts the host tasks that run the sandbox (the
/// sentry, the gofer, and about 8 per sandboxed process on the ptrace platform), and the
/// sandbox ends when the sentry cannot start one. moat keeps `sandbox.pids_limit` as the
/// bound on those host tasks under every runtime, so a sandbox never holds more of the host's
/// pids than configured (docs/security.md, "runc or runsc"): past it the sandbox ends, the
/// result says so, and the next command gets a new one; a higher limit lets more processes
/// run.
#[tokio::test]
async fn under_gvisor_the_pids_limit_bounds_the_hosts_tasks() {
    let mut config = Config::default();
    config.sandbox.runtime = "runsc".into();
    config.sandbox.pids_limit = 256;
    // Through the helper whatever MOAT_TEST_TRANSPORT says: an engine exec whose gVisor
    // sandbox ends under it is not seen to end (noticed, not yet mended).
    config.sandbox.transport = moat::config::Transport::Helper;
    let Some(m) = common::moat_as_configured("t-gvisor-procs", config).await else {
        return;
    };
    if !has_runsc(&m).await {
        return;
    }
    let hundred = "for i in $(seq 100); do sleep 1000 & done; sleep 1; echo survived";
    let r = m.exec("a", hundred).await;
    assert_eq!(m.inspect("a")["HostConfig"]["PidsLimit"], 256);
    assert!(!r.text().contains("survived"), "{}", r.text());
    assert!(
        r.text()
            .contains("The session's container stopped while the command ran."),
        "{}",
        r.text()
    );
    assert_eq!(m.exec("a", "echo next").await.text(), "next");
    // The same processes fit under a limit with room for their host tasks.
    let mut config = Config::default();
    config.sandbox.runtime = "runsc".into();
    config.sandbox.pids_limit = 2048;
    config.sandbox.transport = moat::config::Transport::Helper;
    let Some(roomy) = common::moat_as_configured("t-gvisor-roomy", config).await else {
        return;
    };
    let r = roomy.exec("a", hundred).await;
    assert_eq!(r.status(), Some(Status::Completed), "{}", r.text());
    assert!(r.text().starts_with("survived"), "{}", r.text());
}
