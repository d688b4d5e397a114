//! The sandbox's limits under abuse, against the real engine: a full `/tmp` cannot wedge the
//! session, a fork bomb is ended with everything it left, and a command that a limit or a
//! removed or restarted container ended says so (docs/security.md, "Sandbox limits"; docs/mcp.md, "Limits
//! in results").

mod common;

use std::time::{Duration, Instant};

use common::cli_home::{text, wait_until, TestHome};
use moat::config::Config;
use moat::contract::{Status, ToolResult};
use moat::tools::ExecRequest;

fn with_timeout(command: &str, secs: f64) -> ExecRequest {
    ExecRequest {
        command: command.into(),
        timeout: Some(secs),
        ..Default::default()
    }
}

/// The processes in the container other than its init, `sleep infinity` and the `ps` itself.
fn leftovers(m: &common::TestMoat, session: &str) -> Vec<String> {
    m.docker_exec(session, "ps -eo pid=,args=")
        .lines()
        .map(str::trim)
        .filter(|l| {
            !l.contains("docker-init")
                && !l.ends_with("sleep infinity")
                && !l.contains("ps -eo")
                && !l.ends_with("sh -c ps -eo pid=,args=")
                // moat's helper serves the container, not a command (docs/helper.md).
                && !l.contains("/run/moat/moat-helper")
                // moat's own sweep for the command's marker, finishing after the kill
                // (docs/security.md, "Ending a command"); it names the marker in its argv.
                && !l.contains("MOAT_PROCESS=")
                // Dead, waiting for the container's init to reap it: nothing runs.
                && !l.ends_with("<defunct>")
        })
        .map(str::to_string)
        .collect()
}

/// How often forks were refused at the pids limit, read from inside the container. Right
/// after a fork bomb ends, its last processes may still wait to be reaped and hold the slots
/// `docker exec` needs, so the read is tried for up to 3 s.
fn pids_refused(m: &common::TestMoat, session: &str) -> u64 {
    let mut text = String::new();
    for _ in 0..30 {
        let out = std::process::Command::new("docker")
            .args(["exec", &m.container(session), "sh", "-c"])
            .arg(
                "cat /sys/fs/cgroup/pids/pids.events 2>/dev/null || cat /sys/fs/cgroup/pids.events",
            )
            .output()
            .unwrap();
        text = String::from_utf8_lossy(&out.stdout).into_owned()
            + &String::from_utf8_lossy(&out.stderr);
        if let Some(n) = text.split_whitespace().nth(1).and_then(|n| n.parse().ok()) {
            return n;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    panic!("no pids.events in the container: {text:?}")
}

fn assert_usable(r: &ToolResult) {
    assert_eq!(r.status(), Some(Status::Completed), "{}", r.text());
    assert_eq!(r.text(), "ok");
}

/// The attack: a 2 GB `dd` into /tmp inside the 2 GiB memory limit. Before, /tmp
/// was sized at half the host's RAM, the write filled the memory cgroup with tmpfs pages and
/// every later exec (the `rm` too) died with 137. Now /tmp is full long before memory is.
#[tokio::test]
async fn a_full_tmp_leaves_the_session_usable() {
    let Some(m) = common::moat("t-lim-tmp", Config::default()).await else {
        return;
    };
    let started = Instant::now();
    let dd = m
        .exec("a", "dd if=/dev/zero of=/tmp/fill bs=1M count=2048")
        .await;
    eprintln!(
        "dd into /tmp: {:.1} s: {}",
        started.elapsed().as_secs_f64(),
        dd.text()
    );
    assert!(
        dd.text().contains("No space left on device"),
        "{}",
        dd.text()
    );
    let df = m.exec("a", "df -k /tmp | tail -1").await;
    // 832 MiB: half of 2 GiB, less /var/tmp, /run and /dev/shm (64 MiB each).
    assert!(df.text().contains(" 851968 "), "{}", df.text());
    assert_usable(&m.exec("a", "echo ok").await);
    let rm = m.exec("a", "rm -f /tmp/fill && echo ok").await;
    assert_usable(&rm);
    assert_usable(&m.exec("a", "echo ok").await);
}

/// Every tmpfs full at once (and /dev/shm) still leaves the working reserve: commands start.
#[tokio::test]
async fn every_tmpfs_full_at_once_still_leaves_room() {
    let mut c = Config::default();
    c.sandbox.memory = "512m".into();
    let Some(m) = common::moat("t-lim-alltmp", c).await else {
        return;
    };
    let fill = m
        .exec(
            "a",
            "for d in /tmp /var/tmp /run /dev/shm; do dd if=/dev/zero of=$d/fill bs=1M count=1024 2>/dev/null; done; df -k /tmp /var/tmp /run /dev/shm | tail -4",
        )
        .await;
    eprintln!("{}", fill.text());
    assert!(fill.text().contains("100%"), "{}", fill.text());
    assert_eq!(fill.details.to_json().get("limit"), None, "{}", fill.text());
    for _ in 0..3 {
        assert_usable(&m.exec("a", "echo ok").await);
    }
    let rm = m
        .exec(
            "a",
            "rm -f /tmp/fill /var/tmp/fill /run/fill /dev/shm/fill && echo ok",
        )
        .await;
    assert_usable(&rm);
}

/// A fork bomb whose first shell returns at once (`:(){ :|:& };:`): before, the result was
/// `completed` after 0.4 s while 510 copies kept running and later commands could not fork.
/// Now its leftovers are ended before the result is told, and nothing is left.
#[tokio::test]
async fn a_fork_bomb_is_ended_with_everything_it_left() {
    let Some(m) = common::moat("t-lim-bomb", Config::default()).await else {
        return;
    };
    assert_usable(&m.exec("a", "echo ok").await);
    let before = pids_refused(&m, "a");
    let started = Instant::now();
    let r = m
        .exec_req("a", with_timeout("bash -c ':(){ :|:& };:'", 10.0))
        .await;
    let took = started.elapsed();
    let after = pids_refused(&m, "a");
    eprintln!(
        "fork bomb: {:.2} s, forks refused {before} -> {after}: {}",
        took.as_secs_f64(),
        r.text()
    );
    assert!(took < Duration::from_secs(10 + 5), "{took:?}");
    if after == before {
        // Ended before it filled the pids limit: its shell's own status stands, and the
        // result says that what it left was ended (docs/mcp.md, "Limits in results").
        assert!(
            r.text().contains(moat::process::limit::LEFTOVERS_NOTE),
            "{}",
            r.text()
        );
    } else {
        assert_ne!(r.status(), Some(Status::Completed), "{}", r.text());
    }
    if after > before {
        assert_eq!(r.details.to_json()["limit"], "pids", "{}", r.text());
        assert!(
            r.text().contains("The process limit (512) was reached"),
            "{}",
            r.text()
        );
    }
    let left = leftovers(&m, "a");
    assert!(left.is_empty(), "processes left: {left:?}");
    assert_usable(&m.exec("a", "echo ok").await);
}

/// A fork bomb under a shell that keeps running: it holds the pids limit until the timeout,
/// which ends the whole group, and the result names both.
#[tokio::test]
async fn a_fork_bomb_is_ended_at_the_timeout_and_named() {
    let Some(m) = common::moat("t-lim-bomb2", Config::default()).await else {
        return;
    };
    assert_usable(&m.exec("a", "echo ok").await);
    let started = Instant::now();
    let r = m
        // `read -t` is a bash builtin: the main shell waits without a fork it could not get.
        // It reads a FIFO opened read-write (made before the bomb): a foreground command's
        // stdin is at end-of-file (docs/mcp.md, "Foreground and background").
        .exec_req(
            "a",
            with_timeout(
                "f=/tmp/bomb-wait; rm -f $f; mkfifo $f; bash -c ':(){ :|:& };:; read -t 60 <>'$f",
                5.0,
            ),
        )
        .await;
    let took = started.elapsed();
    eprintln!(
        "fork bomb to the timeout: {:.2} s: {}",
        took.as_secs_f64(),
        r.text()
    );
    assert!(took < Duration::from_secs(5 + 6), "{took:?}");
    assert_eq!(r.status(), Some(Status::Failed), "{}", r.text());
    assert_eq!(r.details.to_json()["timedOut"], true, "{}", r.text());
    assert_eq!(r.details.to_json()["limit"], "pids", "{}", r.text());
    assert!(r.text().contains("Command timed out after 5 seconds"));
    assert!(r.text().contains("The process limit (512) was reached"));
    let left = leftovers(&m, "a");
    assert!(left.is_empty(), "processes left: {left:?}");
    assert_usable(&m.exec("a", "echo ok").await);
}

/// A command the OOM killer ended is reported as the memory limit, not a bare 137.
#[tokio::test]
async fn an_oom_kill_is_reported_as_the_memory_limit() {
    let mut c = Config::default();
    c.sandbox.memory = "256m".into();
    let Some(m) = common::moat("t-lim-oom", c).await else {
        return;
    };
    assert_usable(&m.exec("a", "echo ok").await);
    // `tail` keeps the last line in memory, and /dev/zero has no newline.
    let r = m
        .exec("a", "head -c 2G /dev/zero | tail -n 1 >/dev/null")
        .await;
    eprintln!("oom: {}", r.text());
    assert_eq!(r.status(), Some(Status::Failed), "{}", r.text());
    assert_eq!(r.details.to_json()["limit"], "memory", "{}", r.text());
    assert!(
        r.text()
            .contains("The sandbox's memory limit (256 MiB) was reached"),
        "{}",
        r.text()
    );
    // The same in the background, through poll.
    let id = m
        .background("a", "head -c 2G /dev/zero | tail -n 1 >/dev/null")
        .await;
    let mut q = moat::tools::ProcessRequest {
        action: "poll".into(),
        process_id: Some(id),
        timeout: Some(2000),
        ..Default::default()
    };
    let mut p = m.process("a", &q).await;
    for _ in 0..30 {
        if p.status() != Some(Status::Running) {
            break;
        }
        q.timeout = Some(1000);
        p = m.process("a", &q).await;
    }
    assert_eq!(p.details.to_json()["limit"], "memory", "{}", p.text());
    assert!(p.text().contains("memory limit (256 MiB)"), "{}", p.text());
    // A command that merely ran while memory was fine is not blamed.
    let fine = m.exec("a", "echo ok").await;
    assert_usable(&fine);
    assert_eq!(fine.details.to_json().get("limit"), None);
}

/// `docker rm -f` of the container while a command runs: the result says the container was
/// removed, and the next command gets a new container.
#[tokio::test]
async fn a_removed_container_is_reported() {
    let Some(m) = common::moat("t-lim-rm", Config::default()).await else {
        return;
    };
    assert_usable(&m.exec("a", "echo ok").await);
    let name = m.container("a");
    let remover = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let out = tokio::process::Command::new("docker")
            .args(["rm", "-f", &name])
            .output()
            .await
            .unwrap();
        assert!(out.status.success(), "{out:?}");
    });
    let r = m
        .exec_req("a", with_timeout("echo started; sleep 30", 60.0))
        .await;
    remover.await.unwrap();
    eprintln!("removed: {}", r.text());
    assert_eq!(r.status(), Some(Status::Failed), "{}", r.text());
    assert_eq!(
        r.details.to_json()["limit"],
        "container-removed",
        "{}",
        r.text()
    );
    assert!(
        r.text()
            .contains("The session's container was removed while the command ran"),
        "{}",
        r.text()
    );
    assert_usable(&m.exec("a", "echo ok").await);
}

/// `docker restart -t 0 NAME` of a session's container, once `what` runs in it.
fn restart_when_running(container: &str, what: &str) {
    wait_until(
        &format!("{what} runs in {container}"),
        Duration::from_secs(20),
        || {
            let out = std::process::Command::new("docker")
                .args(["exec", container, "ps", "-eo", "args"])
                .output()
                .unwrap();
            String::from_utf8_lossy(&out.stdout).contains(what)
        },
    );
    let out = std::process::Command::new("docker")
        .args(["restart", "-t", "0", container])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
}

const RESTARTED: &str = "The session's container was restarted while the command ran (docker restart), which ended every process in it, background ones included; the next command runs in the restarted container.";

/// `docker restart` of the container while a command runs, in the foreground and in the
/// background: the result says the container was restarted, ended by SIGKILL, and the next
/// command runs in the restarted container.
#[tokio::test]
async fn a_restarted_container_is_reported() {
    let Some(m) = common::moat("t-lim-restart", Config::default()).await else {
        return;
    };
    assert_usable(&m.exec("a", "echo ok").await);
    let name = m.container("a");
    let restarter = {
        let name = name.clone();
        tokio::task::spawn_blocking(move || restart_when_running(&name, "sleep 31"))
    };
    let r = m
        .exec_req("a", with_timeout("echo started; sleep 31", 60.0))
        .await;
    restarter.await.unwrap();
    eprintln!("restarted: {}", r.text());
    assert_eq!(r.status(), Some(Status::Failed), "{}", r.text());
    let d = r.details.to_json();
    assert_eq!(d["limit"], "container-restarted", "{}", r.text());
    assert_eq!(d["exitSignal"], "SIGKILL", "{}", r.text());
    assert!(r.text().ends_with(RESTARTED), "{}", r.text());
    assert_usable(&m.exec("a", "echo ok").await);
    // The same in the background, through poll.
    let id = m.background("a", "echo started; sleep 32").await;
    restart_when_running(&name, "sleep 32");
    let mut q = moat::tools::ProcessRequest {
        action: "poll".into(),
        process_id: Some(id),
        timeout: Some(2000),
        ..Default::default()
    };
    let mut p = m.process("a", &q).await;
    for _ in 0..30 {
        if p.status() != Some(Status::Running) {
            break;
        }
        q.timeout = Some(1000);
        p = m.process("a", &q).await;
    }
    eprintln!("restarted in the background: {}", p.text());
    assert_eq!(p.status(), Some(Status::Failed), "{}", p.text());
    assert_eq!(
        p.details.to_json()["limit"],
        "container-restarted",
        "{}",
        p.text()
    );
    assert!(p.text().contains(RESTARTED), "{}", p.text());
    assert_usable(&m.exec("a", "echo ok").await);
}

/// The same through the CLI, as the user who found it saw it: `moat exec` names the restart on
/// stderr and exits 137 (the SIGKILL it was), and `--json` carries `details.limit`.
#[tokio::test]
async fn a_restarted_container_is_named_by_moat_exec() {
    if common::engine().await.is_none() {
        return;
    }
    let home = TestHome::new("t-cli-restart");
    let key = home.key("s");
    let o = home.run(&["exec", "--session", &key, "--", "true"]);
    assert!(o.status.success(), "{}", text(&o));
    let container = match home.containers(&key).as_slice() {
        [one] => one.clone(),
        other => panic!("the session's containers: {other:?}"),
    };
    for json in [false, true] {
        let what = if json { "sleep 34" } else { "sleep 33" };
        let command = format!("echo started; {what}");
        let mut args = vec!["exec", "--session", &key];
        if json {
            args.push("--json");
        }
        args.extend(["--", &command]);
        let child = home
            .moat()
            .args(&args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        restart_when_running(&container, what);
        let o = child.wait_with_output().unwrap();
        eprintln!("json={json}: {}", text(&o));
        assert_eq!(o.status.code(), Some(137), "{}", text(&o));
        if json {
            let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("one JSON result");
            assert_eq!(v["details"]["limit"], "container-restarted", "{v}");
            assert_eq!(v["details"]["exitSignal"], "SIGKILL", "{v}");
            assert_eq!(v["details"]["status"], "failed", "{v}");
        } else {
            let stderr = String::from_utf8_lossy(&o.stderr);
            assert!(stderr.contains(&format!("moat: {RESTARTED}")), "{stderr}");
            assert_eq!(String::from_utf8_lossy(&o.stdout), "started\n");
        }
    }
    // The next command runs in the restarted container.
    let o = home.run(&["exec", "--session", &key, "--", "echo ok"]);
    assert!(o.status.success(), "{}", text(&o));
}

/// What a foreground command leaves running is ended when it finishes; a background command
/// is the way to keep something running.
#[tokio::test]
async fn foreground_leftovers_are_ended_and_background_ones_kept() {
    let Some(m) = common::moat("t-lim-left", Config::default()).await else {
        return;
    };
    let r = m.exec("a", "sleep 171 & echo started").await;
    assert_eq!(r.status(), Some(Status::Completed), "{}", r.text());
    assert!(
        r.text()
            .ends_with("Processes the command left running were ended when it finished; start a command with background=true to keep it running."),
        "{}",
        r.text()
    );
    assert_eq!(r.details.to_json()["aggregated"], "started\n");
    assert!(!m.docker_exec("a", "ps -eo args").contains("sleep 171"));
    // Nothing left: no note.
    let r = m.exec("a", "echo ok").await;
    assert_usable(&r);
    // In the background it keeps running after its shell ends.
    let id = m.background("a", "sleep 172 & echo started").await;
    let q = moat::tools::ProcessRequest {
        action: "poll".into(),
        process_id: Some(id),
        timeout: Some(3000),
        ..Default::default()
    };
    // A poll returns as soon as there is new output ("started"), which may come before the
    // shell's end is recorded: poll until it has ended.
    let mut p = m.process("a", &q).await;
    for _ in 0..5 {
        if p.status() != Some(Status::Running) {
            break;
        }
        p = m.process("a", &q).await;
    }
    assert_eq!(p.status(), Some(Status::Completed), "{}", p.text());
    assert!(m.docker_exec("a", "ps -eo args").contains("sleep 172"));
}

/// A fork bomb left running in the background holds every process slot: the next command
/// says the session is wedged and how to get out, `moat doctor --session` says so too, and
/// killing the bomb makes the session usable again.
#[tokio::test]
async fn a_wedged_session_is_reported_with_the_fix() {
    let Some(m) = common::moat("t-lim-wedge", Config::default()).await else {
        return;
    };
    let doctor = |m: &common::TestMoat| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_moat"))
            .args(["doctor", "--session", &m.key("a")])
            .env("MOAT_HOME", m.dir.path())
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    };
    assert_usable(&m.exec("a", "echo ok").await);
    let (code, report) = doctor(&m);
    eprintln!("{report}");
    assert_eq!(code, Some(0), "{report}");
    assert!(report.contains("not wedged"), "{report}");
    assert!(report.contains("tmpfs /tmp holds"), "{report}");
    let bomb = m
        .background("a", "bash -c ':(){ :|:& };:; read -t 40'")
        .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let r = m.exec("a", "echo ok").await;
    eprintln!("wedged: {}", r.text());
    assert_eq!(r.status(), Some(Status::Failed), "{}", r.text());
    assert_eq!(r.details.to_json()["limit"], "pids", "{}", r.text());
    assert!(
        r.text().contains("still at its process limit"),
        "{}",
        r.text()
    );
    assert!(
        r.text()
            .contains(&format!("`moat sessions rm {}`", m.key("a"))),
        "{}",
        r.text()
    );
    let (code, report) = doctor(&m);
    eprintln!("{report}");
    assert_eq!(code, Some(1), "{report}");
    assert!(report.contains("FAIL  wedged: "), "{report}");
    // The fix the result names works, even with every slot taken.
    let k = m
        .process(
            "a",
            &moat::tools::ProcessRequest {
                action: "kill".into(),
                process_id: Some(bomb),
                ..Default::default()
            },
        )
        .await;
    assert!(!k.is_error(), "{}", k.text());
    let left = leftovers(&m, "a");
    assert!(left.is_empty(), "processes left: {left:?}");
    assert_usable(&m.exec("a", "echo ok").await);
    let (code, report) = doctor(&m);
    assert_eq!(code, Some(0), "{report}");
}
