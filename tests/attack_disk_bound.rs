//! Attack: a sandboxed writer fills the host disk through the workspace or the run directory
//! (both host directories; a `dd` wrote 1 GiB at 650 MB/s onto the disk holding the state
//! database). With `sandbox.workspace_max_bytes` the writer is stopped shortly past the bound
//! with a message naming it, and the session recovers once space is freed
//! (docs/security.md, "Disk bound").

mod common;

use std::os::unix::fs::MetadataExt;

use moat::config::Config;
use moat::contract::Status;

const LIMIT_MB: u64 = 256;

fn config() -> Config {
    let mut c = Config::default();
    c.sandbox.workspace_max_bytes = format!("{LIMIT_MB}m");
    c
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fast_writer_is_stopped_past_the_bound_and_rm_recovers() {
    let Some(m) = common::moat("t-disk", config()).await else {
        return;
    };
    let r = m.exec("a", "echo warm").await;
    assert_eq!(r.status(), Some(Status::Completed), "{}", r.text());
    let started = std::time::Instant::now();
    let r = m
        .exec(
            "a",
            "dd if=/dev/zero of=/workspace/big bs=1M count=4096 2>&1; echo wrote-all",
        )
        .await;
    let took = started.elapsed();
    let text = r.text();
    assert_ne!(r.status(), Some(Status::Completed), "{text}");
    assert!(!text.contains("wrote-all"), "{text}");
    assert!(
        text.contains("over sandbox.workspace_max_bytes (256.0 MiB)") && text.contains("rm"),
        "{text}"
    );
    let ws = m
        .app
        .sessions
        .workspace_dir(&m.app.sessions.names(&m.key("a")).1.slug);
    let big = std::fs::metadata(ws.join("big")).unwrap();
    let allocated = big.blocks() * 512;
    eprintln!(
        "dd stopped after {:.2} s with {} MiB allocated (bound {LIMIT_MB} MiB, {} MiB past it)",
        took.as_secs_f64(),
        allocated >> 20,
        (allocated >> 20).saturating_sub(LIMIT_MB)
    );
    assert!(allocated > LIMIT_MB << 20);
    assert!(allocated < 4096 << 20, "the writer was not stopped");

    // Over the bound but not growing: commands still run, so the agent can free space.
    let r = m
        .exec("a", "ls -s /workspace/big >/dev/null && echo listed")
        .await;
    assert_eq!(r.status(), Some(Status::Completed), "{}", r.text());
    assert!(
        r.text().contains("over sandbox.workspace_max_bytes"),
        "a warning says why: {}",
        r.text()
    );
    // Growing again while over: stopped again.
    let r = m
        .exec(
            "a",
            "dd if=/dev/zero of=/workspace/more bs=1M count=4096 2>&1; echo wrote-all",
        )
        .await;
    assert!(
        r.text().contains("sandbox.workspace_max_bytes"),
        "{}",
        r.text()
    );

    let r = m
        .exec("a", "rm -f /workspace/big /workspace/more && echo freed")
        .await;
    assert_eq!(r.status(), Some(Status::Completed), "{}", r.text());
    tokio::time::sleep(std::time::Duration::from_millis(600)).await;
    let r = m
        .exec(
            "a",
            "dd if=/dev/zero of=/workspace/small bs=1M count=32 2>/dev/null && echo small-ok",
        )
        .await;
    assert_eq!(r.status(), Some(Status::Completed), "{}", r.text());
    assert!(r.text().contains("small-ok"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writing_into_run_files_is_bounded_too() {
    let Some(m) = common::moat("t-disk-run", config()).await else {
        return;
    };
    // The run directory only takes writes into files moat made; the wrapper's status files
    // are the sandbox user's to write, and count against the same bound.
    let r = m
        .exec(
            "a",
            "for f in /run/moat/*.exit; do dd if=/dev/zero of=\"$f\" bs=1M count=4096 2>&1; done; echo wrote-all",
        )
        .await;
    let text = r.text();
    assert!(!text.contains("wrote-all"), "{text}");
    assert!(text.contains("sandbox.workspace_max_bytes"), "{text}");
    let r = m.exec("a", "touch /run/moat/new 2>&1; echo done").await;
    assert!(r.text().contains("Permission denied"), "{}", r.text());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writer_left_by_an_exited_moat_is_stopped_too() {
    let Some(m) = common::moat("t-disk-orphan", config()).await else {
        return;
    };
    // The same config for the CLI, so it uses the same container.
    std::fs::write(
        m.dir.path().join("moat.toml"),
        format!("[sandbox]\nworkspace_max_bytes = \"{LIMIT_MB}m\"\n"),
    )
    .unwrap();
    let r = m.exec("a", "echo warm").await;
    assert_eq!(r.status(), Some(Status::Completed), "{}", r.text());
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_moat"))
        .args([
            "exec",
            "--session",
            &m.key("a"),
            "--background",
            "--json",
            "--",
            // It starts writing once the daemon that started it is gone (below).
            "sleep 3; while :; do head -c 16777216 /dev/zero >> /workspace/grow; sleep 0.05; done",
        ])
        .env("MOAT_HOME", m.dir.path())
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|_| panic!("{}", String::from_utf8_lossy(&out.stderr)));
    let id = v["details"]["sessionId"].as_str().unwrap().to_string();
    // The CLI's command went through the home's daemon, which would stop the writer itself:
    // end it the hard way, so the writer is left by an exited moat.
    let daemon = moat::daemon::holder_pid(&m.dir.path().join("daemon.lock"))
        .expect("the CLI started the home's daemon");
    let killed = std::process::Command::new("kill")
        .args(["-KILL", &daemon])
        .status()
        .unwrap();
    assert!(killed.success());
    // The CLI is gone; this moat's guard finds the writer and ends it. Watch from outside
    // (looking the process up here would attach it to this moat before the guard does).
    let mut alive = true;
    for _ in 0..300 {
        let out = m.docker_exec(
            "a",
            &format!("kill -0 -$(cat /run/moat/{id}.pid) 2>/dev/null && echo alive"),
        );
        alive = out.contains("alive");
        if !alive {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    assert!(!alive, "the writer was not stopped");
    let proc = m
        .app
        .registry
        .get(&m.key("a"), &id)
        .expect("the process is known");
    // The wrapper died with its group, so no exit file: the end is found by watching the
    // group (docs/ARCHITECTURE.md, "Killing"), which takes longer than a recorded exit.
    assert!(proc.wait_exit(std::time::Duration::from_secs(40)).await);
    let text = proc.lock().output.aggregated();
    assert!(text.contains("sandbox.workspace_max_bytes"), "{text}");
}
