//! Background processes and the `process` tool against the real engine, including a moat
//! killed with SIGKILL while its process runs.

mod common;

use std::time::Duration;

use moat::config::Config;
use moat::contract::Status;
use moat::tools::ExecRequest;
use moat::tools::ProcessRequest;

fn preq(action: &str, id: &str) -> ProcessRequest {
    ProcessRequest {
        action: action.into(),
        process_id: Some(id.into()),
        ..Default::default()
    }
}

#[tokio::test]
async fn background_poll_sees_every_line_once_then_log_pages() {
    let Some(m) = common::moat("t-bg", Config::default()).await else {
        return;
    };
    let id = m
        .background("a", "for i in 1 2 3 4 5; do echo $i; sleep 1; done")
        .await;
    let mut seen = String::new();
    for _ in 0..30 {
        let mut q = preq("poll", &id);
        q.timeout = Some(2000);
        let p = m.process("a", &q).await;
        let body = p.text().split("\n\nProcess").next().unwrap();
        if body != "(no new output)" {
            seen.push_str(body);
            seen.push('\n');
        }
        if p.status() != Some(Status::Running) {
            assert_eq!(p.status(), Some(Status::Completed));
            assert!(p.text().ends_with("Process exited with code 0."));
            break;
        }
        assert!(p.details.to_json()["retryInMs"].as_u64().is_some());
    }
    assert_eq!(seen, "1\n2\n3\n4\n5\n");
    let mut q = preq("log", &id);
    // Line numbers are 1-based: offset 2 starts at the second line.
    q.offset = Some(2);
    q.limit = Some(2);
    assert!(m.process("a", &q).await.text().starts_with("2\n3"));
    let list = m
        .process(
            "a",
            &ProcessRequest {
                action: "list".into(),
                ..Default::default()
            },
        )
        .await;
    assert!(list.text().contains(&id));
    // Other sessions cannot see it.
    let other = m.process("b", &preq("poll", &id)).await;
    assert_eq!(other.text(), format!("No session found for {id}"));
    // clear forgets it.
    assert_eq!(
        m.process("a", &preq("clear", &id)).await.text(),
        format!("Cleared session {id}.")
    );
    assert!(m
        .process("a", &preq("poll", &id))
        .await
        .text()
        .starts_with("No session found"));
}

#[tokio::test]
async fn write_and_eof_reach_a_non_pty_cat() {
    let Some(m) = common::moat("t-stdinx", Config::default()).await else {
        return;
    };
    let id = m.background("a", "cat; echo done").await;
    let mut w = preq("write", &id);
    w.data = Some("hello\n".into());
    w.eof = Some(true);
    assert_eq!(
        m.process("a", &w).await.text(),
        format!("Wrote 6 bytes to session {id} (stdin closed).")
    );
    let mut q = preq("poll", &id);
    q.timeout = Some(5000);
    let p = m.process("a", &q).await;
    let p = if p.status() == Some(Status::Running) {
        m.process("a", &q).await
    } else {
        p
    };
    assert_eq!(p.status(), Some(Status::Completed), "{}", p.text());
    assert_eq!(p.details.to_json()["aggregated"], "hello\ndone\n");
}

/// The attack a hostile review made: a command that never reads its stdin, and more input
/// than the pipe holds. The write waits for the command; the kill must not wait behind it.
#[tokio::test]
async fn a_command_that_never_reads_its_stdin_does_not_hold_off_its_kill() {
    let Some(m) = common::moat("t-stall", Config::default()).await else {
        return;
    };
    let id = m.background("a", "sleep 100000").await;
    let p = m.app.registry.get(&m.key("a"), &id).unwrap();
    // More than a pipe holds (64 KiB), written from a task of its own: it waits for a reader.
    let writer = {
        let p = p.clone();
        tokio::spawn(async move { p.write(vec![b'x'; 1 << 20]).await })
    };
    tokio::time::sleep(Duration::from_millis(500)).await;
    let started = std::time::Instant::now();
    let k = tokio::time::timeout(Duration::from_secs(20), m.process("a", &preq("kill", &id)))
        .await
        .expect("the kill waited behind the write");
    assert_eq!(k.text(), format!("Killed session {id}."));
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    let ps = m.docker_exec("a", "ps -eo args");
    assert!(!ps.contains("sleep 100000"), "{ps}");
    // The write ends too, with an error, rather than waiting for ever.
    let written = tokio::time::timeout(Duration::from_secs(10), writer)
        .await
        .expect("the write outlived its process")
        .unwrap();
    assert!(written.is_err());
}

#[tokio::test]
async fn kill_leaves_no_process_and_remove_forgets() {
    let Some(m) = common::moat("t-kill", Config::default()).await else {
        return;
    };
    let id = m.background("a", "sleep 900 & sleep 901").await;
    let k = m.process("a", &preq("kill", &id)).await;
    assert_eq!(k.text(), format!("Killed session {id}."));
    let ps = m.docker_exec("a", "ps -eo args");
    assert!(!ps.contains("sleep 90"), "{ps}");
    let p = m.process("a", &preq("poll", &id)).await;
    assert_eq!(p.status(), Some(Status::Failed));
    assert!(p.text().contains("signal SIGTERM"), "{}", p.text());
    assert!(m
        .process("a", &preq("remove", &id))
        .await
        .text()
        .starts_with("Removed session"));
}

#[tokio::test]
async fn yield_moves_a_foreground_command_to_the_background_without_losing_output() {
    let Some(m) = common::moat("t-yield", Config::default()).await else {
        return;
    };
    let req = ExecRequest {
        command: "echo early; sleep 2; echo late".into(),
        yield_ms: Some(300.0),
        ..Default::default()
    };
    let r = m.app.exec.run(&m.key("a"), &req, false).await.unwrap();
    assert_eq!(r.status(), Some(Status::Running));
    assert!(r.details.to_json()["tail"]
        .as_str()
        .unwrap()
        .contains("early"));
    let id = r.details.process_id().unwrap().to_string();
    let mut q = preq("poll", &id);
    q.timeout = Some(5000);
    let mut all = String::new();
    for _ in 0..5 {
        let p = m.process("a", &q).await;
        all.push_str(p.text());
        if p.status() != Some(Status::Running) {
            break;
        }
    }
    assert!(all.contains("early") && all.contains("late"), "{all}");
}

#[tokio::test]
async fn output_and_exit_survive_sigkill_of_moat() {
    let Some(m) = common::moat("t-durable", Config::default()).await else {
        return;
    };
    let session = m.key("a");
    // Start a background process from a separate moat process, then SIGKILL that moat.
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_moat"))
        .args([
            "exec",
            "--session",
            &session,
            "--background",
            "--json",
            "--",
            "for i in 1 2 3; do echo line$i; sleep 1; done; exit 7",
        ])
        .env("MOAT_HOME", m.dir.path())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = String::new();
    use std::io::Read;
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    let _ = child.kill();
    let _ = child.wait();
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    let id = v["details"]["sessionId"].as_str().unwrap().to_string();
    // A long-running moat killed with -9 mid-run: the daemon-style case.
    let mut daemon = std::process::Command::new(env!("CARGO_BIN_EXE_moat"))
        .args([
            "process",
            "poll",
            "--session",
            &session,
            "--id",
            &id,
            "--timeout",
            "60000",
        ])
        .env("MOAT_HOME", m.dir.path())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    tokio::time::sleep(Duration::from_millis(800)).await;
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(daemon.id() as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    let _ = daemon.wait();
    tokio::time::sleep(Duration::from_secs(4)).await;
    // A fresh moat (this test's App never saw the process) finds everything.
    let log = m.process("a", &preq("log", &id)).await;
    assert_eq!(log.text(), "line1\nline2\nline3");
    assert_eq!(log.details.to_json()["exitCode"], 7);
    assert_eq!(log.status(), Some(Status::Failed));
}

#[tokio::test]
async fn finished_processes_are_evicted_by_ttl_and_count() {
    let mut config = Config::default();
    config.process.max_finished = 2;
    let Some(m) = common::moat("t-evict", config).await else {
        return;
    };
    let mut ids = Vec::new();
    for i in 0..3 {
        let id = m.background("a", &format!("echo {i}")).await;
        let p = m.app.registry.get(&m.key("a"), &id).unwrap();
        assert!(p.wait_exit(Duration::from_secs(10)).await);
        ids.push(id);
    }
    // Count: only the newest two finished processes remain.
    let text = list(&m).await;
    assert!(!text.contains(&ids[0]), "{text}");
    assert!(text.contains(&ids[1]) && text.contains(&ids[2]), "{text}");
    // TTL: a process that ended longer ago than the TTL is gone.
    let old = moat::store::now_ms() - 31 * 60 * 1000;
    m.app
        .store
        .finish_process(
            &ids[1],
            moat::store::ProcessStatus::Completed,
            Some(0),
            None,
            false,
            old,
        )
        .unwrap();
    let text = list(&m).await;
    assert!(!text.contains(&ids[1]), "{text}");
    assert!(text.contains(&ids[2]), "{text}");
    let p = m.process("a", &preq("poll", &ids[1])).await;
    assert!(p.text().starts_with("No session found"), "{}", p.text());
}

async fn list(m: &common::TestMoat) -> String {
    let req = ProcessRequest {
        action: "list".into(),
        ..Default::default()
    };
    m.process("a", &req).await.text().to_string()
}

fn cli_log(m: &common::TestMoat, id: &str, extra: &[&str]) -> String {
    let session = m.key("a");
    let mut args = vec!["process", "log", "--session", &session, "--id", id];
    args.extend_from_slice(extra);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_moat"))
        .args(&args)
        .env("MOAT_HOME", m.dir.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout).unwrap()
}

/// `process log` pages the whole recorded output, past the output cap, with line numbers of
/// the whole output: through the CLI (a fresh moat that re-attaches) and the tool.
#[tokio::test]
async fn log_pages_past_the_output_cap() {
    let Some(m) = common::moat("t-logpage", Config::default()).await else {
        return;
    };
    let id = m.background("a", "seq 1 100000").await;
    let p = m.app.registry.get(&m.key("a"), &id).unwrap();
    assert!(p.wait_exit(Duration::from_secs(30)).await);
    // The capped view lost the middle…
    assert!(p.lock().output.truncated());
    // …the log does not: lines 4222-4226 are the numbers 4222-4226.
    let out = cli_log(&m, &id, &["--offset", "4222", "--limit", "5"]);
    assert!(
        out.starts_with("4222\n4223\n4224\n4225\n4226\n\n[showing lines 4222-4226 of 100000;"),
        "{out}"
    );
    let mut q = preq("log", &id);
    q.offset = Some(50_000);
    q.limit = Some(3);
    let r = m.process("a", &q).await;
    assert!(
        r.text().starts_with("50000\n50001\n50002\n"),
        "{}",
        r.text()
    );
    assert_eq!(r.details.to_json()["totalLines"], 100_000);
    assert_eq!(
        r.details.to_json()["lines"],
        serde_json::json!([50_000, 50_002])
    );
    // Without offset: the last 200 lines.
    let out = cli_log(&m, &id, &[]);
    assert!(out.starts_with("99801\n"), "{out}");
    assert!(
        out.contains("100000\n\n[showing lines 99801-100000 of 100000"),
        "{out}"
    );
}

/// Past `exec.spill_max_bytes` the record itself is cut: `process log` says which lines were
/// dropped and keeps numbering the rest as lines of the whole output.
#[tokio::test]
async fn log_says_where_spill_cut_the_record() {
    let mut config = Config::default();
    config.exec.spill_max_bytes = "1m".into();
    let Some(m) = common::moat("t-logcut", config).await else {
        return;
    };
    // 1..1500000: about 10.9 MB, well past 1 MiB plus the 4 MiB slack before a punch.
    let id = m.background("a", "seq 1 1500000").await;
    let p = m.app.registry.get(&m.key("a"), &id).unwrap();
    assert!(p.wait_exit(Duration::from_secs(60)).await);
    let mut q = preq("log", &id);
    q.offset = Some(1);
    q.limit = Some(3);
    let r = m.process("a", &q).await;
    let first = r.details.to_json()["firstLine"].as_u64().unwrap();
    assert!(first > 1_000_000, "{}", r.text());
    // The first kept line is whole, and its number is its content.
    assert!(
        r.text()
            .starts_with(&format!("{first}\n{}\n{}\n", first + 1, first + 2)),
        "{}",
        r.text()
    );
    assert!(
        r.text().contains(&format!(
            "lines 1-{} were dropped: the record keeps the last 1 MiB of output (exec.spill_max_bytes)",
            first - 1
        )),
        "{}",
        r.text()
    );
    assert_eq!(r.details.to_json()["totalLines"], 1_500_000);
    // A fresh moat (the CLI) re-attaches at the recorded start: the same numbers.
    let out = cli_log(&m, &id, &["--offset", "1", "--limit", "2"]);
    assert!(
        out.starts_with(&format!(
            "{first}\n{}\n\n[lines 1-{} were dropped",
            first + 1,
            first - 1
        )),
        "{out}"
    );
    let out = cli_log(&m, &id, &["--limit", "1"]);
    assert!(out.starts_with("1500000\n"), "{out}");
}

/// A foreground run whose result the output cap cut keeps its record for `process log`, and
/// its result says under which id; one that fits is forgotten as before.
#[tokio::test]
async fn a_truncated_foreground_result_points_at_its_record() {
    let Some(m) = common::moat("t-logfg", Config::default()).await else {
        return;
    };
    let r = m.exec("a", "seq 1 100000").await;
    assert_eq!(r.details.to_json()["truncated"], true, "{}", r.details);
    let id = r.details.process_id().expect("id of the kept record");
    assert!(
        r.text().ends_with(&format!(
            "the whole record is kept as session {id}; page it with process log (offset/limit).]"
        )),
        "{}",
        r.text()
    );
    let mut q = preq("log", id);
    q.offset = Some(4222);
    q.limit = Some(2);
    assert!(m.process("a", &q).await.text().starts_with("4222\n4223\n"));
    let small = m.exec("a", "echo small").await;
    assert!(
        small.details.to_json().get("sessionId").is_none(),
        "{}",
        small.details
    );
}

/// A process whose run files were replaced (the log swapped for a symlink, as a host command
/// running as moat's user could) cannot be followed; a moat that finds it so lists it as
/// failed with the reason instead of answering "No session found".
#[tokio::test]
async fn a_process_with_tampered_files_stays_listed() {
    let Some(m) = common::moat("t-tamper", Config::default()).await else {
        return;
    };
    let id = m.background("a", "echo started; sleep 30").await;
    let log = std::fs::read_dir(m.dir.path().join("run"))
        .unwrap()
        .map(|d| d.unwrap().path().join(format!("{id}.out")))
        .find(|p| p.exists())
        .expect("the process log");
    // Tampered once the wrapper holds its log open: through the engine's exec the start
    // returns before the wrapper's shell opened it, and a symlink swapped in before that is
    // refused by the wrapper itself (its redirection fails, exit 2), a different case.
    for _ in 0..100 {
        if std::fs::read_to_string(&log).is_ok_and(|t| t.contains("started")) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    std::fs::remove_file(&log).unwrap();
    std::os::unix::fs::symlink("/etc/shadow", &log).unwrap();
    // Another moat on the same home (the daemon after a restart) finds it.
    let other = m.another((*m.app.config).clone());
    let tool = moat::tools::ProcessTool {
        registry: other.registry.clone(),
        nodes: other.process.nodes.clone(),
    };
    let poll = ProcessRequest {
        action: "poll".into(),
        process_id: Some(id.clone()),
        ..Default::default()
    };
    let r = tool.run(&m.key("a"), &poll).await;
    assert_eq!(r.status(), Some(Status::Failed), "{}", r.text());
    assert!(r.text().contains("tampered"), "{}", r.text());
    let list = ProcessRequest {
        action: "list".into(),
        ..Default::default()
    };
    let r = tool.run(&m.key("a"), &list).await;
    assert!(r.text().contains(&id), "{}", r.text());
}

/// `moat process` results as a CLI user reads them: the tool's "No session found for X"
/// (a process, in the agents' words) names the process, its `--session` and the command
/// that lists them; `clear` of a running process says how to end it. `--json` keeps the
/// tool's own text.
#[tokio::test]
async fn cli_process_results_name_the_process_and_flags() {
    if common::engine().await.is_none() {
        return;
    }
    let home = common::cli_home::TestHome::new("t-pcli");
    let key = home.key("a");
    let out = home.run(&["process", "poll", "--session", &key, "--id", "nope"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        common::cli_home::stdout(&out).trim_end(),
        format!("No process nope in session {key} (see `moat process list --session {key}`).")
    );
    let out = home.run(&[
        "process",
        "poll",
        "--session",
        &key,
        "--id",
        "nope",
        "--json",
    ]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["content"][0]["text"], "No session found for nope");

    let out = home.run(&[
        "exec",
        "--session",
        &key,
        "--background",
        "--json",
        "--",
        "sleep 30",
    ]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let id = v["details"]["sessionId"].as_str().unwrap().to_string();
    let out = home.run(&["process", "clear", "--session", &key, "--id", &id]);
    assert_eq!(
        common::cli_home::stdout(&out).trim_end(),
        format!("Process {id} in session {key} is still running: end it first with `moat process kill --session {key} --id {id}`, or use remove.")
    );
    home.run(&["process", "remove", "--session", &key, "--id", &id]);
}
