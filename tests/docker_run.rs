//! `moat run` for CI (README, "moat run"), against the real engine through the binary: output
//! streamed live and apart, whole, the command's exit code (124 on timeout), nothing left
//! behind, and Ctrl-C ending the command and removing its session.

mod common;

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::cli_home::{text, wait_until, TestHome};

/// The session keys of containers a `moat run` with process id `pid` made.
fn run_containers(pid: u32) -> Vec<String> {
    let out = Command::new("docker")
        .args([
            "ps",
            "-a",
            "--filter",
            "label=dev.moat.session",
            "--format",
            "{{.Label \"dev.moat.session\"}}",
        ])
        .output()
        .unwrap();
    let prefix = format!("run-{pid}-");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|k| k.starts_with(&prefix))
        .map(str::to_string)
        .collect()
}

/// Entries left in the home's per-session directories.
fn leftovers(home: &TestHome) -> Vec<String> {
    ["workspaces", "run"]
        .iter()
        .flat_map(|d| std::fs::read_dir(home.path().join(d)).into_iter().flatten())
        .filter_map(|e| Some(e.ok()?.path().display().to_string()))
        .collect()
}

fn spawn(home: &TestHome, args: &[&str]) -> Child {
    home.moat()
        .arg("run")
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

#[tokio::test]
async fn lines_arrive_while_the_command_runs_and_the_streams_stay_apart() {
    if common::engine().await.is_none() {
        return;
    }
    let home = TestHome::new("t-run-live");
    let mut child = spawn(
        &home,
        &[
            "--",
            "for i in 1 2 3 4 5; do echo out-$i; echo err-$i >&2; sleep 1; done; exit 7",
        ],
    );
    let pid = child.id();
    let start = Instant::now();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut first = String::new();
    out.read_line(&mut first).unwrap();
    let first_at = start.elapsed();
    assert_eq!(first, "out-1\n");
    // The command takes five seconds; its first line came long before its end.
    assert!(first_at < Duration::from_millis(3500), "{first_at:?}");
    let mut rest = String::new();
    out.read_to_string(&mut rest).unwrap();
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    let status = child.wait().unwrap();
    assert!(start.elapsed() >= Duration::from_secs(5));
    assert_eq!(first + &rest, "out-1\nout-2\nout-3\nout-4\nout-5\n");
    assert!(
        err.starts_with("err-1\nerr-2\nerr-3\nerr-4\nerr-5\n"),
        "{err}"
    );
    // The exit code is the command's; the summary names the image and the timings.
    assert_eq!(status.code(), Some(7), "{err}");
    let summary = err.lines().last().unwrap();
    assert!(
        summary.starts_with("moat run: exit 7, session run-"),
        "{summary}"
    );
    assert!(
        summary.contains("image sha256:") && summary.contains("total "),
        "{summary}"
    );
    // Nothing left behind.
    assert!(run_containers(pid).is_empty());
    assert!(leftovers(&home).is_empty(), "{:?}", leftovers(&home));
}

#[tokio::test]
async fn exit_codes_timeouts_and_whole_output() {
    if common::engine().await.is_none() {
        return;
    }
    let home = TestHome::new("t-run-codes");
    let o = home.run(&["run", "--", "true"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let o = home.run(&["run", "--", "exit 3"]);
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    // Killed by a signal: 128 + N, as in a shell.
    let o = home.run(&["run", "--", "kill -KILL $$"]);
    assert_eq!(o.status.code(), Some(137), "{}", text(&o));
    // Out of time: 124, as timeout(1).
    let start = Instant::now();
    let o = home.run(&["run", "--timeout", "1", "--", "sleep 60"]);
    assert_eq!(o.status.code(), Some(124), "{}", text(&o));
    assert!(start.elapsed() < Duration::from_secs(30));
    assert!(String::from_utf8_lossy(&o.stderr).contains("timed out"));
    // The whole output, past the 200k characters a model's result holds.
    let o = home.run(&[
        "run",
        "--",
        "i=0; while [ $i -lt 30000 ]; do echo 0123456789abcdefghijklmnopqrst; i=$((i+1)); done",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(o.stdout.len(), 31 * 30000);
    assert!(o.stdout.ends_with(b"0123456789abcdefghijklmnopqrst\n"));
    // Environment from --env-file, overridden by --env.
    let env_file = home.path().join("ci.env");
    std::fs::write(&env_file, "# ci\nA=from-file\nB=kept\n").unwrap();
    let o = home.run(&[
        "run",
        "--env-file",
        &env_file.display().to_string(),
        "--env",
        "A=from-flag",
        "--",
        "echo $A $B",
    ]);
    assert_eq!(
        String::from_utf8_lossy(&o.stdout),
        "from-flag kept\n",
        "{}",
        text(&o)
    );
    // The rules of exec: a variable they refuse is refused here too.
    let o = home.run(&["run", "--env", "MOAT_X=1", "--", "true"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("MOAT_ prefix is reserved"), "{err}");
    assert!(leftovers(&home).is_empty(), "{:?}", leftovers(&home));
}

/// `moat exec` ends a timeout as `moat run` does (124), and its advice names the CLI's flags
/// and commands, not a model's tool parameters; so does a command moved to the background.
#[tokio::test]
async fn exec_timeouts_exit_124_in_the_clis_words() {
    if common::engine().await.is_none() {
        return;
    }
    let home = TestHome::new("t-exec-words");
    let o = home.run(&["exec", "--timeout", "1", "--", "sleep 60"]);
    assert_eq!(o.status.code(), Some(124), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("--timeout")
            && err.contains("--background")
            && err.contains("moat process poll --session"),
        "{err}"
    );
    assert!(
        !err.contains("timeout=") && !err.contains("background=true"),
        "{err}"
    );
    let o = home.run(&["exec", "--background", "--", "sleep 2"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("moat process poll --session"), "{out}");
}

#[tokio::test]
async fn keep_leaves_the_session_and_a_host_workspace_is_used_in_place() {
    if common::engine().await.is_none() {
        return;
    }
    let home = TestHome::new("t-run-keep");
    let work = tempfile::tempdir().unwrap();
    let repo = work.path().join("repo");
    std::fs::create_dir(&repo).unwrap();
    std::fs::write(
        repo.join("check.sh"),
        "echo checked > result.txt; echo ok\n",
    )
    .unwrap();
    Command::new("chown")
        .args(["-R", "1000:1000", &repo.display().to_string()])
        .status()
        .unwrap();
    let child = spawn(
        &home,
        &[
            "--keep",
            "--workspace",
            &repo.display().to_string(),
            "--",
            "sh check.sh",
        ],
    );
    let pid = child.id();
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(String::from_utf8_lossy(&o.stdout), "ok\n");
    assert_eq!(
        std::fs::read_to_string(repo.join("result.txt")).unwrap(),
        "checked\n"
    );
    let kept = run_containers(pid);
    assert_eq!(kept.len(), 1, "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stderr).contains(&format!("moat sessions rm {}", kept[0])));
    assert!(home.run(&["sessions", "rm", &kept[0]]).status.success());
    assert!(run_containers(pid).is_empty());
    // The host workspace is never deleted.
    assert!(repo.join("check.sh").exists());
}

#[tokio::test]
async fn ctrl_c_ends_the_whole_tree_and_removes_the_session() {
    if common::engine().await.is_none() {
        return;
    }
    let home = TestHome::new("t-run-int");
    let mut child = spawn(
        &home,
        &["--keep", "--", "sleep 300 & sleep 300 & echo started; wait"],
    );
    let pid = child.id();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert_eq!(line, "started\n");
    assert_eq!(run_containers(pid).len(), 1);
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    let start = Instant::now();
    let status = child.wait().unwrap();
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert_eq!(status.code(), Some(130), "{err}");
    assert!(start.elapsed() < Duration::from_secs(20), "{err}");
    // Even with --keep: an interrupted run leaves no container (and so no process) behind.
    wait_until("the session is removed", Duration::from_secs(10), || {
        run_containers(pid).is_empty()
    });
    assert!(leftovers(&home).is_empty(), "{:?}", leftovers(&home));
}

#[tokio::test]
async fn the_policy_applies_as_for_exec() {
    if common::engine().await.is_none() {
        return;
    }
    let home = TestHome::configured("t-run-policy", "[policy.sandbox]\nsecurity = \"deny\"\n");
    let o = home.run(&["run", "--", "echo should-not-run"]);
    assert_eq!(o.status.code(), Some(77), "{}", text(&o));
    assert!(o.stdout.is_empty(), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("Exec denied"),
        "{}",
        text(&o)
    );
    assert!(leftovers(&home).is_empty(), "{:?}", leftovers(&home));
}

#[tokio::test]
async fn image_and_network_are_the_runs_own() {
    if common::engine().await.is_none() {
        return;
    }
    let home = TestHome::new("t-run-img");
    // A local image with a marker, built from the sandbox image (no registry needed).
    let mut build = Command::new("docker")
        .args(["build", "-q", "-t", "moat-test-run-img:1", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    use std::io::Write;
    build
        .stdin
        .take()
        .unwrap()
        .write_all(
            b"FROM moat-sandbox:bookworm\nUSER 0\nRUN echo marker > /marker\nUSER 1000:1000\n",
        )
        .unwrap();
    assert!(build.wait().unwrap().success());
    let o = home.run(&[
        "run",
        "--image",
        "moat-test-run-img:1",
        "--network",
        "bridge",
        "--",
        "cat /marker; ls /sys/class/net",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.starts_with("marker\n") && out.contains("eth0"), "{out}");
    // The configuration's network otherwise: none, only the loopback.
    let o = home.run(&["run", "--", "ls /sys/class/net"]);
    assert_eq!(String::from_utf8_lossy(&o.stdout), "lo\n", "{}", text(&o));
    // Only none or bridge: the host's stack is never a run's choice.
    let o = home.run(&["run", "--network", "host", "--", "true"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stderr).contains("`none` or `bridge`"));
    let o = home.run(&["run", "--image", "x;y", "--", "true"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(leftovers(&home).is_empty(), "{:?}", leftovers(&home));
    let _ = Command::new("docker")
        .args(["rmi", "-f", "moat-test-run-img:1"])
        .output();
}

/// The stream is whole even when the command writes far faster than the stream is read and
/// far past `exec.spill_max_bytes`, which frees old log bytes for `process log`: the bytes not
/// yet passed on are held (docs/ARCHITECTURE.md, "moat run").
#[tokio::test]
async fn a_fast_writer_past_the_spill_bound_is_streamed_whole() {
    if common::engine().await.is_none() {
        return;
    }
    let home = TestHome::configured("t-run-spill", "[exec]\nspill_max_bytes = \"1m\"\n");
    // 40 MB in a burst: 40 times the spill bound.
    let o = home.run(&[
        "run",
        "--",
        "yes 0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ | head -c 40000000",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(
        !String::from_utf8_lossy(&o.stderr).contains("freed"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(o.stdout.len(), 40_000_000);
    let line = b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ\n";
    assert!(o.stdout.chunks(line.len()).all(|c| line.starts_with(c)));
}
