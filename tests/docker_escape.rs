//! Ending a command ends everything it started, also what left its process group; and a
//! foreground command is not left waiting on a stdin nobody can write (docs/security.md,
//! "Ending a command"; docs/mcp.md, "Foreground and background"). On either transport.

mod common;

use std::time::{Duration, Instant};

use moat::config::Config;
use moat::runtime::LeftBehind;
use moat::tools::ExecRequest;
use moat::tools::ProcessRequest;

#[tokio::test]
async fn a_timeout_or_a_kill_ends_what_left_the_group() {
    let Some(m) = common::moat("t-escapex", Config::default()).await else {
        return;
    };
    // setsid, nohup in a new session, and a double fork: none is in the command's group.
    let escapes = "setsid sleep 1000001 & setsid nohup sh -c 'sleep 1000002' >/dev/null 2>&1 & (setsid sleep 1000003 &) ; sleep 1000";
    let req = ExecRequest {
        command: escapes.into(),
        timeout: Some(2.0),
        ..Default::default()
    };
    let r = m.exec_req("a", req).await;
    assert_eq!(r.details.to_json()["timedOut"], true, "{}", r.details);
    let ps = m.docker_exec("a", "ps -eo args");
    for n in ["1000001", "1000002", "1000003"] {
        assert!(
            !ps.contains(&format!("sleep {n}")),
            "sleep {n} escaped:\n{ps}"
        );
    }
    // The same for `process kill` of a background command.
    let id = m.background("a", "setsid sleep 1000004 & sleep 1000").await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(m.docker_exec("a", "ps -eo args").contains("sleep 1000004"));
    let kill = ProcessRequest {
        action: "kill".into(),
        process_id: Some(id),
        ..Default::default()
    };
    m.process("a", &kill).await;
    let ps = m.docker_exec("a", "ps -eo args");
    assert!(!ps.contains("sleep 1000004"), "escaped a kill:\n{ps}");
}

#[tokio::test]
async fn a_foreground_command_reads_end_of_file() {
    let Some(m) = common::moat("t-stdin-eof", Config::default()).await else {
        return;
    };
    for (command, out) in [
        ("cat; echo after-cat", "after-cat"),
        ("read x; echo read-returned $?", "read-returned 1"),
        (
            "python3 -c 'input()' 2>/dev/null; echo input-returned $?",
            "input-returned 1",
        ),
    ] {
        let req = ExecRequest {
            command: command.into(),
            timeout: Some(20.0),
            ..Default::default()
        };
        let t = Instant::now();
        let r = m.exec_req("a", req).await;
        assert!(
            t.elapsed() < Duration::from_secs(5),
            "{command}: waited on stdin"
        );
        assert_eq!(
            r.details.to_json()["timedOut"],
            false,
            "{command}: {}",
            r.details
        );
        assert_eq!(r.text(), out, "{command}: {}", r.details);
    }
}

/// What a foreground command started out of its group (`setsid`, `nohup` in a new session, a
/// double fork) ends when the command ends by itself, and the result says so; a background
/// command's stays (that is how a server is kept running). The host sees whether anything
/// carries the marker, so a command that left nothing costs no sweep.
#[tokio::test]
async fn a_foreground_commands_escapes_end_with_it_and_a_background_commands_stay() {
    let Some(m) = common::moat("t-escape-end", Config::default()).await else {
        return;
    };
    // The pause lets each one leave the group before the command ends (else the group's
    // end takes them).
    let escapes = |n: u32| {
        format!(
            "setsid sleep {n}1 & setsid nohup sh -c 'sleep {n}2' >/dev/null 2>&1 & (setsid sleep {n}3 &) ; sleep 0.5; echo started"
        )
    };
    let running = |n: u32| {
        let ps = m.docker_exec("a", "ps -eo args");
        (1..=3)
            .filter(|k| ps.lines().any(|l| l == format!("sleep {n}{k}")))
            .count()
    };
    // Control: in the background the same command leaves three sleeps running after it
    // ended, and `ps` sees them.
    let id = m.background("a", &escapes(200000)).await;
    let p = m.app.registry.get(&m.key("a"), &id).unwrap();
    assert!(p.wait_exit(Duration::from_secs(20)).await, "it ends");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(running(200000), 3, "{}", m.docker_exec("a", "ps -eo args"));
    // The host's own look finds them by their marker, with no exec (moat runs as root here,
    // so it can read them; another uid may not, and then the sweep runs instead).
    let cgroup = cgroup_of(&m, "a");
    let run_path = m
        .app
        .home
        .run_dir(m.container("a").strip_prefix("moat-").unwrap());
    let run_dir = {
        use std::os::unix::fs::MetadataExt;
        let meta = std::fs::metadata(&run_path).unwrap();
        (meta.dev(), meta.ino())
    };
    // The command's own process group, as its wrapper recorded it: everything in it left.
    let pgid: u32 = std::fs::read_to_string(run_path.join(format!("{id}.pid")))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    if nix::unistd::geteuid().is_root() && under_gvisor() {
        // gVisor shows the host its own processes, not the sandbox's: the host cannot tell.
        assert_eq!(
            moat::process::marked::look(&cgroup, run_dir, &id, None),
            None
        );
    } else if nix::unistd::geteuid().is_root() {
        // The three sleeps, and the shell `nohup` runs one of them in.
        let seen = moat::process::marked::look(&cgroup, run_dir, &id, None);
        assert!(
            matches!(seen, Some(LeftBehind { group: None, marked: Some(n) }) if n >= 3),
            "{seen:?}"
        );
        let nothing = moat::process::marked::look(&cgroup, run_dir, "nothing-1", Some(pgid));
        assert_eq!(
            nothing,
            Some(LeftBehind {
                group: Some(0),
                marked: Some(0)
            })
        );
    }
    // The container's helper counts the same from inside, with no program started: what
    // moat asks where the host cannot look (docs/helper.md, "What a command left"). Only
    // the helper transport has one.
    let inside = m.app.commands.look_inside(&m.container("a"), 0, &id).await;
    if std::env::var("MOAT_TEST_TRANSPORT").as_deref() == Ok("exec") {
        assert_eq!(inside, None);
    } else {
        assert!(
            matches!(inside, Some(LeftBehind { group: None, marked: Some(n) }) if n >= 3),
            "{inside:?}"
        );
        let nothing = m
            .app
            .commands
            .look_inside(&m.container("a"), pgid, "nothing-1")
            .await;
        assert_eq!(
            nothing,
            Some(LeftBehind {
                group: Some(0),
                marked: Some(0)
            })
        );
    }

    // In the foreground they end with it, and the result says why.
    let r = m.exec("a", &escapes(300000)).await;
    assert_eq!(
        r.status(),
        Some(moat::contract::Status::Completed),
        "{}",
        r.text()
    );
    assert!(
        r.text().ends_with("Processes the command left running were ended when it finished; start a command with background=true to keep it running."),
        "{}",
        r.text()
    );
    assert_eq!(running(300000), 0, "{}", m.docker_exec("a", "ps -eo args"));
    // The background command's are still there.
    assert_eq!(running(200000), 3);
    // A command that left nothing has no note.
    let r = m.exec("a", "echo ok").await;
    assert_eq!(r.text(), "ok", "{}", r.details);
}

/// Whether this run puts sessions under gVisor (`.ci/run`), whose processes the host cannot
/// see (its look says "cannot tell").
fn under_gvisor() -> bool {
    std::env::var("MOAT_TEST_RUNTIME").as_deref() == Ok("runsc")
}

/// The container's cgroups as the host sees them.
fn cgroup_of(m: &common::TestMoat, session: &str) -> moat::session::cgroup::CgroupDirs {
    let pid = m.inspect(session)["State"]["Pid"].as_u64().unwrap() as u32;
    moat::session::cgroup::CgroupDirs::of_pid(pid).expect("the host sees the container's cgroups")
}
