//! Attack: make a process log terabytes long without writing anything. The command's stdout
//! *is* its log file, which the sandbox user may write, so `truncate -s 4T /dev/stdout` costs
//! no disk and gives every reader of the log terabytes of zeros. Before `process::holes`,
//! the daemon's follow loop read them all on a runtime thread: two such commands and no
//! session was served (not even `/v1/health`), and a restarted daemon started reading again.
//! Now every reader jumps holes (`SEEK_DATA`) and reads in bounded slices
//! (docs/security.md, "Process output record").

mod common;

use std::time::Duration;

use moat::config::Config;
use moat::contract::Status;
use moat::tools::ProcessRequest;

/// Every check waits this long at most: the reads the attack used to cause take days.
const PATIENCE: Duration = Duration::from_secs(60);

async fn within<T>(what: &str, f: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(PATIENCE, f)
        .await
        .unwrap_or_else(|_| panic!("{what}: no answer in {PATIENCE:?}: the daemon is held"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sparse_log_holds_no_daemon_thread() {
    let Some(m) = common::moat("t-sparse", Config::default()).await else {
        return;
    };
    let r = m.exec("a", "echo warm").await;
    assert_eq!(r.status(), Some(Status::Completed), "{}", r.text());

    // Two background commands with 4 TiB holes in their logs (the review's payload), with
    // output before and after the hole.
    let mut ids = Vec::new();
    for _ in 0..2 {
        ids.push(
            m.background(
                "a",
                "echo before-hole; truncate -s 4T /dev/stdout; echo after-hole; sleep 60",
            )
            .await,
        );
    }
    tokio::time::sleep(Duration::from_secs(2)).await;

    // Another session is served.
    let r = within("another session's exec", m.exec("b", "echo other")).await;
    assert!(r.text().contains("other"), "{}", r.text());

    // The process's own output after the hole, and no zeros. (The hole counts as output for
    // the record's bound, exec.spill_max_bytes, so what came before it is dropped, and said.)
    let log = ProcessRequest {
        action: "log".into(),
        process_id: Some(ids[0].clone()),
        ..Default::default()
    };
    let r = within("process log", m.process("a", &log)).await;
    let text = r.text();
    assert!(
        text.contains("after-hole") && text.contains("dropped"),
        "{text}"
    );
    assert!(!text.contains('\0'), "zeros were passed on");

    // A foreground command with a hole ends with its output.
    let r = within(
        "a foreground command with a hole",
        m.exec("a", "truncate -s 1T /dev/stdout; echo end-of-it"),
    )
    .await;
    assert!(r.text().contains("end-of-it"), "{}", r.text());

    // Another moat on the same home (the daemon after a restart) finds the processes and
    // replays their logs without reading the holes.
    let other = m.another((*m.app.config).clone());
    let tool = moat::tools::ProcessTool {
        registry: other.registry.clone(),
        nodes: other.process.nodes.clone(),
    };
    let poll = ProcessRequest {
        action: "poll".into(),
        process_id: Some(ids[1].clone()),
        ..Default::default()
    };
    let r = within("a restarted moat's poll", tool.run(&m.key("a"), &poll)).await;
    assert!(r.text().contains("after-hole"), "{}", r.text());
    for id in &ids {
        let kill = ProcessRequest {
            action: "kill".into(),
            process_id: Some(id.clone()),
            ..Default::default()
        };
        m.process("a", &kill).await;
    }
}

/// The CLI's live stream (`moat exec`, `X-Moat-Wait`) jumps the hole too, and says so.
#[tokio::test]
async fn the_live_stream_jumps_a_hole() {
    if common::engine().await.is_none() {
        return;
    }
    let home = common::cli_home::TestHome::new("t-holes-cli");
    let key = home.key("a");
    let mut child = home
        .moat()
        .args([
            "exec",
            "--session",
            &key,
            "--",
            "echo before; truncate -s 1T /dev/stdout; echo after",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let started = std::time::Instant::now();
    loop {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        if started.elapsed() > PATIENCE {
            let _ = child.kill();
            panic!("moat exec did not end in {PATIENCE:?}: the stream read the hole");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let out = child.wait_with_output().unwrap();
    let text = common::cli_home::text(&out);
    assert!(out.status.success(), "{text}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("after"), "{text}");
    assert!(!stdout.contains('\0'), "{text}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("bytes of stdout were skipped"),
        "{text}"
    );
}
