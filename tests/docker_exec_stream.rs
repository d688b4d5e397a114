//! `moat exec` in the foreground, run as a user runs it (the binary, its output on a real
//! terminal): the command's output appears as it is produced, as `moat run`'s does; ended by
//! SIGINT, what the command printed until it ended comes before the sentence that says what
//! the signal ended (README, "moat exec").

mod common;

use std::io::Read;
use std::os::fd::OwnedFd;
use std::process::{Child, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use moat::config::Config;
use moat::contract::Status;

/// What arrived on the terminal, with when each piece arrived.
type Arrivals = Arc<Mutex<Vec<(Instant, Vec<u8>)>>>;

/// Starts `moat exec` with stdout and stderr on the slave of a fresh pseudo-terminal; a
/// thread records what arrives on the master, and when.
fn exec_on_terminal(m: &common::TestMoat, args: &[&str]) -> (Child, Arrivals) {
    let pty = nix::pty::openpty(None, None).unwrap();
    let out: OwnedFd = pty.slave.try_clone().unwrap();
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_moat"))
        .args(args)
        .env("MOAT_HOME", m.dir.path())
        .stdin(Stdio::null())
        .stdout(Stdio::from(out))
        .stderr(Stdio::from(pty.slave))
        .spawn()
        .unwrap();
    let arrivals: Arrivals = Arc::default();
    let seen = arrivals.clone();
    let mut master = std::fs::File::from(pty.master);
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        // EIO once the last holder of the slave (the CLI) is gone.
        while let Ok(n) = master.read(&mut buf) {
            if n == 0 {
                break;
            }
            seen.lock()
                .unwrap()
                .push((Instant::now(), buf[..n].to_vec()));
        }
    });
    (child, arrivals)
}

/// The terminal's text so far, and when the first byte of `needle` had arrived (`None`: not
/// yet).
fn arrived(arrivals: &Arrivals, needle: &str) -> (String, Option<Instant>) {
    let mut text = Vec::new();
    let mut at = None;
    for (t, bytes) in arrivals.lock().unwrap().iter() {
        text.extend_from_slice(bytes);
        if at.is_none() && String::from_utf8_lossy(&text).contains(needle) {
            at = Some(*t);
        }
    }
    (String::from_utf8_lossy(&text).into_owned(), at)
}

fn wait(mut child: Child) -> (Option<i32>, Instant) {
    let status = child.wait().unwrap();
    (status.code(), Instant::now())
}

/// `for i in 1 2 3; do echo $i; sleep 1; done` shows a line a second: each line is on the
/// terminal about a second before the next, and the first long before the command ends.
/// The control is `--json`, which prints the one final result: there the first line arrives
/// only at the end, so the measurement tells the two apart.
#[tokio::test]
async fn exec_shows_each_line_as_it_is_produced() {
    let Some(m) = common::moat("t-streamx", Config::default()).await else {
        return;
    };
    assert_eq!(m.exec("a", "true").await.status(), Some(Status::Completed));
    let session = m.key("a");
    let command = "for i in 1 2 3; do echo line-$i; sleep 1; done";
    let (child, arrivals) = exec_on_terminal(&m, &["exec", "--session", &session, "--", command]);
    let (code, end) = tokio::task::spawn_blocking(move || wait(child))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let (text, _) = arrived(&arrivals, "");
    assert_eq!(code, Some(0), "{text}");
    let at = |n: u32| {
        arrived(&arrivals, &format!("line-{n}"))
            .1
            .unwrap_or_else(|| panic!("line-{n} never shown: {text:?}"))
    };
    let (one, two, three) = (at(1), at(2), at(3));
    let gaps = [
        two.duration_since(one).as_secs_f64(),
        three.duration_since(two).as_secs_f64(),
        end.duration_since(one).as_secs_f64(),
    ];
    eprintln!(
        "line 1→2 {:.2}s, 2→3 {:.2}s, 1→exit {:.2}s",
        gaps[0], gaps[1], gaps[2]
    );
    assert!(
        (0.6..1.6).contains(&gaps[0]) && (0.6..1.6).contains(&gaps[1]),
        "a line a second: {gaps:?}"
    );
    assert!(
        gaps[2] > 1.8,
        "the first line long before the end: {gaps:?}"
    );
    // Each line once: the result's copy of the output is not printed again.
    assert_eq!(text.matches("line-1").count(), 1, "{text:?}");

    // Control: --json prints one result at the end, so its output arrives with the exit.
    let (child, arrivals) = exec_on_terminal(
        &m,
        &["exec", "--session", &session, "--json", "--", command],
    );
    let (code, end) = tokio::task::spawn_blocking(move || wait(child))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let (text, first) = arrived(&arrivals, "line-1");
    assert_eq!(code, Some(0), "{text}");
    let first = first.unwrap_or_else(|| panic!("no output: {text:?}"));
    assert!(
        end.duration_since(first) < Duration::from_millis(800),
        "--json prints only at the end: {text:?}"
    );
    let v: serde_json::Value = serde_json::from_str(text.trim()).expect("one JSON result");
    assert_eq!(v["details"]["status"], "completed", "{text}");
}

/// SIGINT mid-run: the lines printed so far, and what the command prints as it is ended (its
/// TERM trap), reach the terminal before moat's sentence naming the process it ended; exit
/// 130. The control: the trap's line arrives after the signal was sent, so a CLI that stopped
/// reading at the signal would not have shown it.
#[tokio::test]
async fn an_interrupted_exec_shows_its_output_before_what_it_ended() {
    let Some(m) = common::moat("t-stream-int", Config::default()).await else {
        return;
    };
    assert_eq!(m.exec("a", "true").await.status(), Some(Status::Completed));
    let session = m.key("a");
    let command = "trap 'echo trapped-term; exit 1' TERM; echo first-line; sleep 1; echo second-line; while :; do sleep 0.2; done";
    let (child, arrivals) = exec_on_terminal(&m, &["exec", "--session", &session, "--", command]);
    let started = Instant::now();
    while arrived(&arrivals, "second-line").1.is_none() {
        assert!(started.elapsed() < Duration::from_secs(30), "never printed");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    let signalled = Instant::now();
    let (code, _) = tokio::task::spawn_blocking(move || wait(child))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let (text, _) = arrived(&arrivals, "");
    assert_eq!(code, Some(130), "{text}");
    let pos = |needle: &str| {
        text.find(needle)
            .unwrap_or_else(|| panic!("{needle} not shown: {text:?}"))
    };
    let ended = pos("moat: SIGINT: ended process");
    assert!(
        pos("first-line") < pos("second-line") && pos("second-line") < ended,
        "{text:?}"
    );
    assert!(pos("trapped-term") < ended, "{text:?}");
    // Control: the trap's line arrived after the signal was sent, so a CLI that stopped
    // reading at the signal would not have shown it.
    let trapped = arrived(&arrivals, "trapped-term").1.unwrap();
    assert!(trapped > signalled, "the trap's line came after the signal");
}
