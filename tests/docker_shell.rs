//! `moat shell` (README, "moat shell") against the real engine, driven through a real
//! pseudo-terminal as an operator's terminal would: the terminal's size (and a resize), the
//! agent's user and PATH prelude, and the shell's exit code as moat's.

mod common;

use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::cli_home::{text, TestHome};

fn set_size(fd: i32, rows: u16, cols: u16) {
    let size = libc::winsize {
        ws_row: rows,
        ws_col: cols,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: TIOCSWINSZ reads one `winsize` from the pointer, which outlives the call.
    assert_eq!(unsafe { libc::ioctl(fd, libc::TIOCSWINSZ, &size) }, 0);
}

/// Reads from the terminal until `needle` shows up (or the time is out); all that was read.
fn read_until(master: &mut std::fs::File, seen: &mut String, needle: &str, limit: Duration) {
    let start = Instant::now();
    let mut buf = [0u8; 4096];
    while !seen.contains(needle) {
        assert!(start.elapsed() < limit, "no {needle:?} in: {seen}");
        match master.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => seen.push_str(&String::from_utf8_lossy(&buf[..n])),
        }
    }
}

#[tokio::test]
async fn an_interactive_shell_with_the_terminals_size_and_the_agents_prelude() {
    if common::engine().await.is_none() {
        return;
    }
    let home = TestHome::configured(
        "t-shell",
        "[sandbox]\npath_prepend = [\"/opt/moat-tools\"]\n",
    );
    let key = home.key("s");
    let o = home.run(&["shell", "--session", &key]);
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("no running container"),
        "{}",
        text(&o)
    );
    assert!(home
        .run(&["exec", "--session", &key, "--", "true"])
        .status
        .success());

    let pty = nix::pty::openpty(None, None).unwrap();
    set_size(pty.slave.as_raw_fd(), 33, 101);
    let slave = std::fs::File::from(pty.slave);
    let mut child = home
        .moat()
        .args(["shell", "--session", &key])
        .env("TERM", "xterm")
        .stdin(Stdio::from(slave.try_clone().unwrap()))
        .stdout(Stdio::from(slave.try_clone().unwrap()))
        .stderr(Stdio::from(slave))
        .spawn()
        .unwrap();
    let mut master = std::fs::File::from(pty.master);
    let mut seen = String::new();
    master
        .write_all(b"echo sum=$((6*7)); stty size; id -u; echo path=$PATH\n")
        .unwrap();
    read_until(
        &mut master,
        &mut seen,
        "path=/opt/moat-tools:",
        Duration::from_secs(30),
    );
    assert!(seen.contains("sum=42"), "{seen}");
    assert!(seen.contains("33 101"), "{seen}");
    assert!(seen.contains("\n1000"), "{seen}");
    // A resize of the operator's terminal reaches the shell's.
    set_size(master.as_raw_fd(), 40, 120);
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGWINCH,
    )
    .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    master.write_all(b"stty size; exit 3\n").unwrap();
    read_until(&mut master, &mut seen, "40 120", Duration::from_secs(30));
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "moat shell did not end: {seen}"
        );
        // Keep the terminal drained so the child never blocks writing.
        let mut buf = [0u8; 4096];
        let _ = nix::unistd::read(&master, &mut buf);
    };
    assert_eq!(status.code(), Some(3), "{seen}");
}

/// Input that is not a terminal (a pipe) is refused at once with a sentence that names
/// `moat exec`, instead of running the line and waiting at end-of-input for ever.
#[tokio::test]
async fn a_shell_without_a_terminal_is_refused_at_once() {
    if common::engine().await.is_none() {
        return;
    }
    let home = TestHome::new("t-pipeshell");
    let key = home.key("s");
    let out = home.run(&["exec", "--session", &key, "--", "true"]);
    assert!(out.status.success(), "{}", text(&out));
    let start = Instant::now();
    let mut child = home
        .moat()
        .args(["shell", "--session", &key])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"echo from-the-pipe\n")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(start.elapsed() < Duration::from_secs(30));
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("not a terminal") && err.contains("moat exec"),
        "{err}"
    );
    assert!(!String::from_utf8_lossy(&out.stdout).contains("from-the-pipe"));
}
