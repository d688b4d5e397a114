//! Attack: a sandboxed writer fills the host disk through the workspace or the run directory
//! (both host directories; a `dd` wrote 1 GiB at 650 MB/s onto the disk holding the state
//! database). With `sandbox.workspace_max_bytes` the writer is stopped shortly past the bound
//! with a message naming it, and the session recovers once space is freed
//! (docs/security.md, "Disk bound").
//!
//! The writers that left their command (a `setsid` writer, a double-forked one, one a
//! background command started; each with its `MOAT_PROCESS` marker scrubbed, so no kill or
//! sweep of moat's finds it) are stopped too: over the bound, every process in the container
//! ends. Each has a control: the same payload in a moat without the bound, after the stop
//! the guard used to make (every command moat follows ended, with its sweep), writes it all.
//! Run one at a time (`.config/nextest.toml`); the figures print with `--nocapture`.
//!
//! These are the watchdog's attacks (`sandbox.disk_bound = "watch"`, what a moat that cannot
//! give each session its own filesystem falls back to); tests/attack_disk_image.rs attacks the
//! kernel's bound.

mod common;

use std::os::unix::fs::MetadataExt;

use moat::config::Config;
use moat::contract::Status;

const LIMIT_MB: u64 = 256;

fn config() -> Config {
    let mut c = Config::default();
    c.sandbox.workspace_max_bytes = format!("{LIMIT_MB}m");
    c.sandbox.disk_bound = moat::config::DiskBound::Watch;
    c
}

/// One step of a test, given a minute: under gVisor this test has hung after its first
/// writer, once in several full runs, and a step that fails by name says where.
async fn step<T>(name: &str, f: impl std::future::Future<Output = T>) -> T {
    match tokio::time::timeout(std::time::Duration::from_secs(60), f).await {
        Ok(v) => v,
        Err(_) => panic!("{name} did not finish within 60 s"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fast_writer_is_stopped_past_the_bound_and_rm_recovers() {
    let Some(m) = common::moat("t-diskx", config()).await else {
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
    let r = step(
        "the look while over",
        m.exec("a", "test -s /workspace/big && echo listed"),
    )
    .await;
    assert_eq!(r.status(), Some(Status::Completed), "{}", r.text());
    assert!(
        r.text().contains("over sandbox.workspace_max_bytes"),
        "a warning says why: {}",
        r.text()
    );
    // Growing again while over: stopped again.
    let r = step(
        "the second writer",
        m.exec(
            "a",
            "dd if=/dev/zero of=/workspace/more bs=1M count=4096 2>&1; echo wrote-all",
        ),
    )
    .await;
    assert!(
        r.text().contains("sandbox.workspace_max_bytes"),
        "{}",
        r.text()
    );

    let r = step(
        "the rm",
        m.exec("a", "rm -f /workspace/big /workspace/more && echo freed"),
    )
    .await;
    assert_eq!(r.status(), Some(Status::Completed), "{}", r.text());
    tokio::time::sleep(std::time::Duration::from_millis(600)).await;
    let r = step(
        "the small write after",
        m.exec(
            "a",
            "dd if=/dev/zero of=/workspace/small bs=1M count=32 2>/dev/null && echo small-ok",
        ),
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
        format!("[sandbox]\nworkspace_max_bytes = \"{LIMIT_MB}m\"\ndisk_bound = \"watch\"\n"),
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
    let text = proc.with_output(|st| st.output.aggregated());
    assert!(text.contains("sandbox.workspace_max_bytes"), "{text}");
}

// ---------------------------------------------------------------------------------------
// Writers that left their command.

/// The bound.
const SMALL_MB: u64 = 64;
/// What each writer tries to write.
const PAYLOAD_MB: u64 = 2048;
/// How long a control's writer may pause before it counts as stopped: the page cache of the
/// container's memory cgroup can hold a writer for seconds while the disk catches up.
const CONTROL_QUIET: std::time::Duration = std::time::Duration::from_secs(10);
/// The writer: 2 GiB of zeros into /workspace/f, started a second after its parent command
/// returned (so that command is over, and moat follows nothing that writes). Zeros into the
/// page cache go at 1–5 GB/s here, so the stop is timed against about the fastest writer
/// there is.
const DD: &str = "sleep 1; exec dd if=/dev/zero of=/workspace/f bs=1M count=2048";

fn small(user: Option<&str>) -> Config {
    let mut c = Config::default();
    c.sandbox.workspace_max_bytes = format!("{SMALL_MB}m");
    c.sandbox.disk_bound = moat::config::DiskBound::Watch;
    if let Some(u) = user {
        c.sandbox.user = u.into();
    }
    c
}

fn unbounded(user: Option<&str>) -> Config {
    let mut c = small(user);
    c.sandbox.workspace_max_bytes = "0".into();
    c
}

/// How a writer is left behind.
#[derive(Clone, Copy, Debug)]
enum Leave {
    /// `setsid` in the background of a foreground command: a session of its own.
    Setsid,
    /// Fork, new process group, fork again (perl): the writer's parent is gone, it belongs to
    /// init, in no group moat knows.
    DoubleFork,
    /// A background command (`moat exec --background`, the process tool) starts it with
    /// `setsid` and keeps running itself.
    Background,
}

impl Leave {
    fn command(self) -> String {
        let setsid = format!(
            "env -u MOAT_PROCESS setsid sh -c '{DD}' >/dev/null 2>&1 & sleep 0.3; echo started"
        );
        match self {
            Leave::Setsid => setsid,
            Leave::DoubleFork => {
                let argv = DD.split_once("exec ").unwrap().1.replace(' ', "\", \"");
                format!(
                    "env -u MOAT_PROCESS perl -e 'fork and exit; setpgrp(0, 0); fork and exit; sleep 1; exec \"{argv}\"' >/dev/null 2>&1; sleep 0.3; echo started"
                )
            }
            Leave::Background => format!("{setsid}; exec sleep 300"),
        }
    }

    /// Starts the writer in session `a`; returns the background process's id, if any.
    async fn start(self, m: &common::TestMoat) -> Option<String> {
        let r = m.exec("a", "echo warm").await;
        assert_eq!(r.status(), Some(Status::Completed), "{}", r.text());
        match self {
            Leave::Background => Some(m.background("a", &self.command()).await),
            _ => {
                let r = m.exec("a", &self.command()).await;
                assert_eq!(r.status(), Some(Status::Completed), "{}", r.text());
                assert!(r.text().contains("started"), "{}", r.text());
                None
            }
        }
    }
}

/// How `/workspace/f` grew, watched from the host.
#[derive(Debug)]
struct Growth {
    /// Allocated bytes at the end.
    bytes: u64,
    /// When it first held more than the bound (since the watch began).
    over_at: Option<std::time::Duration>,
    /// When it last grew.
    last_growth_at: std::time::Duration,
}

impl Growth {
    fn mib(&self) -> u64 {
        self.bytes >> 20
    }

    /// From crossing the bound to the last byte written.
    fn time_to_stop(&self) -> std::time::Duration {
        self.last_growth_at
            .saturating_sub(self.over_at.unwrap_or(self.last_growth_at))
    }
}

/// Polls `file`'s allocated size every 2 ms until it holds the whole payload or has not grown
/// for `quiet` (at most 60 s).
async fn watch(file: std::path::PathBuf, bound_mb: u64, quiet: std::time::Duration) -> Growth {
    tokio::task::spawn_blocking(move || {
        let began = std::time::Instant::now();
        let (mut last, mut over_at, mut last_growth_at) = (0u64, None, began.elapsed());
        loop {
            let now = began.elapsed();
            let bytes = std::fs::metadata(&file).map_or(0, |m| m.blocks() * 512);
            if bytes != last {
                last = bytes;
                last_growth_at = now;
            }
            if over_at.is_none() && bytes > bound_mb << 20 {
                over_at = Some(now);
            }
            let done = bytes >= PAYLOAD_MB << 20;
            if done || now - last_growth_at > quiet || now > std::time::Duration::from_secs(60) {
                return Growth {
                    bytes,
                    over_at,
                    last_growth_at,
                };
            }
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
    })
    .await
    .unwrap()
}

/// `moat doctor --session a` on the test's home, configured as the test's moat is.
fn doctor(m: &common::TestMoat, user: Option<&str>) -> String {
    let mut toml =
        format!("[sandbox]\nworkspace_max_bytes = \"{SMALL_MB}m\"\ndisk_bound = \"watch\"\n");
    if let Some(u) = user {
        toml.push_str(&format!("user = \"{u}\"\n"));
    }
    std::fs::write(m.dir.path().join("moat.toml"), toml).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_moat"))
        .args(["doctor", "--session", &m.key("a")])
        .env("MOAT_HOME", m.dir.path())
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn workspace_file(m: &common::TestMoat) -> std::path::PathBuf {
    let slug = m.app.sessions.names(&m.key("a")).1.slug;
    m.app.sessions.workspace_dir(&slug).join("f")
}

/// The control: no bound, and the stop the guard used to make (every command moat follows
/// in the container ended, with its sweep for the marker) made once the writer writes: the
/// whole payload is written.
async fn control(prefix: &str, leave: Leave, user: Option<&str>) {
    let Some(m) = common::moat(prefix, unbounded(user)).await else {
        return;
    };
    leave.start(&m).await;
    let file = workspace_file(&m);
    for _ in 0..500 {
        if std::fs::metadata(&file).is_ok_and(|md| md.blocks() > 0) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    let container = m.container("a");
    let procs = m
        .app
        .registry
        .note_running(&container, "\n[control] ended\n");
    m.app.registry.end(&procs);
    let g = watch(file, SMALL_MB, CONTROL_QUIET).await;
    eprintln!(
        "control ({leave:?}): {} MiB written (ended {} of moat's commands)",
        g.mib(),
        procs.len()
    );
    assert!(
        g.bytes >= PAYLOAD_MB << 20,
        "the control writer did not write it all: {g:?}"
    );
    // Its dirty pages go with it, rather than slow the next test's writer and guard.
    let _ = std::fs::remove_file(workspace_file(&m));
}

/// The attack: with the bound, the writer stops near it; nothing of it runs any more; the
/// next command's result says why; `rm` frees the session and a write works again.
async fn attack(prefix: &str, leave: Leave, user: Option<&str>) {
    // The guard's own account of each stop (how long it took) shows with --nocapture.
    let _ = tracing_subscriber::fmt()
        .with_env_filter("moat::disk_guard=info")
        .with_test_writer()
        .try_init();
    let Some(m) = common::moat(prefix, small(user)).await else {
        return;
    };
    let background = leave.start(&m).await;
    let g = watch(
        workspace_file(&m),
        SMALL_MB,
        std::time::Duration::from_secs(2),
    )
    .await;
    eprintln!(
        "{leave:?} (user {}): stopped at {} MiB, {} MiB past the {SMALL_MB} MiB bound, {} ms after it crossed it",
        user.unwrap_or("default"),
        g.mib(),
        g.mib().saturating_sub(SMALL_MB),
        g.time_to_stop().as_millis()
    );
    assert!(
        g.over_at.is_some(),
        "the writer never passed the bound: {g:?}"
    );
    // Past the bound by what the fastest writer manages in one measuring interval and the
    // time to stop (docs/security.md, "Disk bound": up to about 1 GiB under runsc on a loaded
    // machine), short of the payload the control writes; and stopped, not paused (no dd, below).
    assert!(
        g.bytes < (PAYLOAD_MB << 20) * 3 / 4,
        "the writer was not stopped near the bound: {g:?}"
    );
    // Nothing of it is left: no dd, and the background command ended with the reason.
    let ps = m.docker_exec("a", "ps -eo args | grep -c '^dd ' || true");
    assert_eq!(ps.trim(), "0", "a dd still runs");
    if let Some(id) = background {
        let proc = m.app.registry.get(&m.key("a"), &id).expect("known");
        assert!(proc.wait_exit(std::time::Duration::from_secs(30)).await);
        let text = proc.with_output(|st| st.output.aggregated());
        assert!(
            text.contains("every process in the session's container was ended"),
            "{text}"
        );
    }
    // The next command runs, and says what happened and how to recover. (Not `ls`: gVisor's
    // runsc of Debian answers coreutils' statx with EINVAL.)
    let r = m
        .exec("a", "test -s /workspace/f && echo still-there")
        .await;
    assert_eq!(r.status(), Some(Status::Completed), "{}", r.text());
    assert!(
        r.text().contains(&format!(
            "over sandbox.workspace_max_bytes ({SMALL_MB}.0 MiB)"
        )) && r
            .text()
            .contains("ended every process in the session's container")
            && r.text().contains("rm"),
        "{}",
        r.text()
    );
    // The audit log has the stop, and `moat doctor --session` names it and the way out.
    let rows = m
        .app
        .store
        .audit_filtered(Some(&m.key("a")), Some(moat::disk_guard::AUDIT_KIND), 5)
        .unwrap();
    assert!(!rows.is_empty(), "no audit row of the stop");
    let report = doctor(&m, user);
    assert!(
        report.contains("disk bound: stopped the session")
            && report.contains(&format!(
                "over sandbox.workspace_max_bytes ({SMALL_MB}.0 MiB)"
            ))
            && report.contains(&format!("moat exec --session {} -- rm", m.key("a"))),
        "{report}"
    );
    // `rm` recovers the session.
    let r = m.exec("a", "rm -f /workspace/f && echo freed").await;
    assert!(r.text().contains("freed"), "{}", r.text());
    tokio::time::sleep(std::time::Duration::from_millis(600)).await;
    let report = doctor(&m, user);
    assert!(
        report.contains(&format!(
            "of sandbox.workspace_max_bytes ({SMALL_MB}.0 MiB)"
        )) && !report.contains("FAIL  disk"),
        "{report}"
    );
    let r = m
        .exec(
            "a",
            "dd if=/dev/zero of=/workspace/small bs=1M count=32 2>/dev/null && echo small-ok",
        )
        .await;
    assert_eq!(r.status(), Some(Status::Completed), "{}", r.text());
    assert!(r.text().contains("small-ok"));
    assert!(
        !r.text().contains("sandbox.workspace_max_bytes"),
        "no warning once under the bound: {}",
        r.text()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_setsid_writer_is_stopped_near_the_bound() {
    attack("t-disk-setsid", Leave::Setsid, None).await;
    control("t-disk-setsid-ctl", Leave::Setsid, None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_double_forked_writer_is_stopped_near_the_bound() {
    attack("t-disk-fork", Leave::DoubleFork, None).await;
    control("t-disk-fork-ctl", Leave::DoubleFork, None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writer_a_background_command_started_is_stopped_near_the_bound() {
    attack("t-disk-bg", Leave::Background, None).await;
    control("t-disk-bg-ctl", Leave::Background, None).await;
}

/// Root inside the container (`sandbox.user = "0:0"`, every capability still dropped): the
/// same stop, as root.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writer_of_root_inside_the_container_is_stopped_near_the_bound() {
    attack("t-disk-root", Leave::Setsid, Some("0:0")).await;
    control("t-disk-root-ctl", Leave::Setsid, Some("0:0")).await;
}

/// A writer the sandbox's user may not signal (another uid in the container: here started by
/// `docker exec -u`, as an operator's `cap_add` of SETUID would let the sandbox do): the stop
/// from inside finds it and says so, and the engine kills the container. Control: the stop
/// from inside alone (no bound) leaves it writing the whole payload.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writer_of_another_user_is_stopped_by_the_engine() {
    let start = |m: &common::TestMoat| {
        let out = std::process::Command::new("docker")
            .args([
                "exec",
                "-d",
                "-u",
                "4242:4242",
                &m.container("a"),
                "sh",
                "-c",
                &DD.replace("/workspace/f", "/workspace/shared/f"),
            ])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    let shared = |m: &common::TestMoat| workspace_file(m).with_file_name("shared").join("f");

    // Control.
    if let Some(m) = common::moat("t-disk-uid-ctl", unbounded(None)).await {
        let r = m
            .exec("a", "mkdir -m 777 /workspace/shared && echo made")
            .await;
        assert!(r.text().contains("made"), "{}", r.text());
        start(&m);
        tokio::time::sleep(std::time::Duration::from_millis(1200)).await;
        let argv = moat::session::disk_stop::stop_argv();
        let (_, out) = m
            .app
            .engine
            .exec_capture(&m.container("a"), argv, None)
            .await
            .unwrap();
        let report = moat::session::disk_stop::parse_report(&String::from_utf8_lossy(&out));
        assert!(report.is_some_and(|r| r.refused >= 1), "{report:?}");
        let g = watch(shared(&m), SMALL_MB, std::time::Duration::from_secs(3)).await;
        eprintln!(
            "control (another uid): {} MiB written after the stop from inside",
            g.mib()
        );
        assert!(g.bytes >= PAYLOAD_MB << 20, "{g:?}");
        let _ = std::fs::remove_file(shared(&m));
    }

    let _ = tracing_subscriber::fmt()
        .with_env_filter("moat::disk_guard=info")
        .with_test_writer()
        .try_init();
    let Some(m) = common::moat("t-diskuid", small(None)).await else {
        return;
    };
    let r = m
        .exec("a", "mkdir -m 777 /workspace/shared && echo made")
        .await;
    assert!(r.text().contains("made"), "{}", r.text());
    start(&m);
    let g = watch(shared(&m), SMALL_MB, std::time::Duration::from_secs(2)).await;
    eprintln!(
        "another uid: stopped at {} MiB, {} MiB past the {SMALL_MB} MiB bound, {} ms after it crossed it",
        g.mib(),
        g.mib().saturating_sub(SMALL_MB),
        g.time_to_stop().as_millis()
    );
    assert!(
        g.over_at.is_some() && g.bytes < (PAYLOAD_MB << 20) * 3 / 4,
        "{g:?}"
    );
    // The next command starts the container again and says what happened.
    let r = m
        .exec("a", "test -s /workspace/shared/f && echo still-there")
        .await;
    assert_eq!(r.status(), Some(Status::Completed), "{}", r.text());
    assert!(
        r.text()
            .contains("the engine killed the session's container")
            && r.text().contains("another user"),
        "{}",
        r.text()
    );
    let r = m.exec("a", "rm -rf /workspace/shared && echo freed").await;
    assert!(r.text().contains("freed"), "{}", r.text());
    tokio::time::sleep(std::time::Duration::from_millis(600)).await;
    let r = m.exec("a", "echo fine").await;
    assert!(
        !r.text().contains("sandbox.workspace_max_bytes"),
        "{}",
        r.text()
    );
}
