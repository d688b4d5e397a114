//! The registry and the supervisor over the fake engine (no Docker): the fake plays moat's
//! wrapper (`runtime::fake_wrapper`), so the run files, the kill helper's answers and the
//! exits are what a container would leave.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use super::script::kill_group_argv;
use super::{EventBus, Executors, Limits, Proc, Registry, StartSpec, KILL_GRACE_MS};
use crate::config::Shell;
use crate::contract::Place;
use crate::host::HostExecutor;
use crate::runtime::fake::{Call, FakeRuntime};
use crate::runtime::fake_wrapper::{Play, Wrapper};
use crate::store::{ProcessStatus, Store};

const SESSION: &str = "main";
const CONTAINER: &str = "moat-main";

/// One moat over a fresh index and run directory, its engine playing `script`.
struct Moat {
    _dir: tempfile::TempDir,
    run_dir: PathBuf,
    store: Arc<Store>,
    wrapper: Arc<Wrapper>,
    fake: FakeRuntime,
    registry: Arc<Registry>,
}

impl Moat {
    fn new(script: impl Fn(&str) -> Play + Send + Sync + 'static) -> Self {
        Self::with_cap(script, 10_000)
    }

    /// [`Moat::new`] with `max_output_chars` = `cap`.
    fn with_cap(script: impl Fn(&str) -> Play + Send + Sync + 'static, cap: usize) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let run_dir = dir.path().join("run");
        std::fs::create_dir(&run_dir).unwrap();
        std::fs::set_permissions(&run_dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        let store = Arc::new(Store::in_memory().unwrap());
        let wrapper = Wrapper::new(&run_dir, script);
        let fake = wrapper.engine();
        let registry = registry_capped(&fake, &store, cap);
        Self {
            _dir: dir,
            run_dir,
            store,
            wrapper,
            fake,
            registry,
        }
    }

    async fn start(&self, command: &str, background: bool) -> Arc<Proc> {
        self.registry
            .start(spec(&self.run_dir, command, background))
            .await
            .unwrap()
    }

    fn file(&self, proc: &Proc, ext: &str) -> PathBuf {
        self.run_dir.join(format!("{}.{ext}", proc.info.id))
    }
}

/// A registry over `store`: another moat over the same index (as after a restart) when the
/// store already has rows.
fn registry_on(fake: &FakeRuntime, store: &Arc<Store>) -> Arc<Registry> {
    registry_capped(fake, store, 10_000)
}

/// [`registry_on`] with `max_output_chars` = `cap`.
fn registry_capped(fake: &FakeRuntime, store: &Arc<Store>, cap: usize) -> Arc<Registry> {
    let limits = Limits {
        max_output_chars: cap,
        spill_max: 1 << 20,
        ttl_ms: 3_600_000,
        max_finished: 50,
    };
    let executors = Executors {
        sandbox: Arc::new(fake.clone()),
        host: Arc::new(HostExecutor::new()),
        engine: Arc::new(fake.clone()),
    };
    Registry::new(executors, store.clone(), limits, EventBus::default(), me())
}

fn me() -> (u32, u32) {
    (
        nix::unistd::geteuid().as_raw(),
        nix::unistd::getegid().as_raw(),
    )
}

fn spec(run_dir: &Path, command: &str, background: bool) -> StartSpec {
    StartSpec {
        session: SESSION.into(),
        place: Place::Container(CONTAINER.into()),
        run_dir: run_dir.to_path_buf(),
        command: command.into(),
        cwd: "/workspace".into(),
        env: Vec::new(),
        pty: false,
        background,
        timeout_secs: None,
        secrets: Vec::new(),
        owner: me(),
        notify_exit: true,
        shell: Shell::Sh,
        split_stderr: false,
        sticky: false,
        user: None,
    }
}

/// `echo …` prints and exits with the number after `exit`; `sleep …` runs until killed,
/// and `trap '' TERM; sleep …` only until SIGKILL.
fn script(command: &str) -> Play {
    if command.starts_with("trap '' TERM") {
        Play::UntilKilled {
            out: "stubborn\n".into(),
            ignores_term: true,
        }
    } else if command.starts_with("sleep") {
        Play::UntilKilled {
            out: "sleeping\n".into(),
            ignores_term: false,
        }
    } else {
        let code = command
            .rsplit_once("exit ")
            .and_then(|(_, c)| c.trim().parse().ok())
            .unwrap_or(0);
        let out = command
            .strip_prefix("echo ")
            .and_then(|s| s.split(';').next())
            .map(|s| format!("{}\n", s.trim()))
            .unwrap_or_default();
        Play::Exit { out, code }
    }
}

async fn ended(proc: &Proc) -> crate::contract::ExitInfo {
    assert!(
        proc.wait_exit(Duration::from_secs(10)).await,
        "{} did not end",
        proc.info.command
    );
    proc.exit().unwrap()
}

/// Waits until the played wrapper recorded the process's group.
async fn group_of(moat: &Moat, proc: &Proc) -> u32 {
    for _ in 0..500 {
        if let Some(pgid) = std::fs::read_to_string(moat.file(proc, "pid"))
            .ok()
            .and_then(|s| s.parse().ok())
        {
            return pgid;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("{} never recorded its group", proc.info.id);
}

#[tokio::test]
async fn a_started_process_is_listed_found_and_forgotten() {
    let moat = Moat::new(script);
    let bg = moat.start("echo hi; exit 3", true).await;
    let fg = moat.start("echo there", false).await;
    for (proc, code, out) in [(&bg, 3, "hi"), (&fg, 0, "there")] {
        let exit = ended(proc).await;
        assert_eq!((exit.code, exit.signal.as_deref()), (Some(code), None));
        assert_eq!(
            proc.with_output(|st| st.output.aggregated()),
            format!("{out}\n")
        );
    }
    let row = moat.store.process(&bg.info.id).unwrap().unwrap();
    assert_eq!(
        (row.status, row.exit_code),
        (ProcessStatus::Failed, Some(3))
    );
    // The list is the background processes; a foreground one is still found by id.
    let listed: Vec<String> = moat
        .registry
        .list(SESSION)
        .iter()
        .map(|p| p.info.id.clone())
        .collect();
    assert_eq!(listed, [bg.info.id.as_str()]);
    let found = moat.registry.get(SESSION, &fg.info.id).unwrap();
    assert!(Arc::ptr_eq(&found, &fg));
    assert!(
        moat.registry.get("other", &bg.info.id).is_none(),
        "another session's process is not found"
    );
    // Forgetting drops memory, index and run files.
    moat.registry.forget(&bg);
    assert!(moat.registry.get(SESSION, &bg.info.id).is_none());
    assert!(moat.registry.list(SESSION).is_empty());
    assert!(moat.store.process(&bg.info.id).unwrap().is_none());
    // The files go on a blocking task, one after another: wait for the last of them.
    let exts = ["out", "in", "pid", "exit", "ready"];
    for _ in 0..200 {
        if exts.iter().all(|ext| !moat.file(&bg, ext).exists()) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    for ext in exts {
        assert!(!moat.file(&bg, ext).exists(), "{ext} left behind");
    }
    assert!(
        moat.file(&fg, "out").exists(),
        "only the forgotten one's files go"
    );
}

/// A process that runs on while moat restarts is re-attached by the next moat, which follows
/// it through its run files and can still end it.
#[tokio::test]
async fn a_running_process_is_reattached_and_ended_by_the_next_moat() {
    let moat = Moat::new(script);
    let first = moat.start("sleep 600", true).await;
    let pgid = group_of(&moat, &first).await;
    let next = registry_on(&moat.fake, &moat.store);
    let listed = next.list(SESSION);
    assert_eq!(listed.len(), 1);
    let proc = &listed[0];
    assert_eq!(proc.info.id, first.info.id);
    assert!(!Arc::ptr_eq(proc, &first), "the next moat has its own");
    assert!(proc.exit().is_none(), "still running: {:?}", proc.exit());
    assert!(proc
        .with_output(|st| st.output.aggregated())
        .contains("sleeping"));
    let asked = std::time::Instant::now();
    proc.kill().await;
    // The helper reports before the exit file is seen: its report is not waited for again.
    assert!(
        asked.elapsed() < Duration::from_secs(2),
        "the kill took {:?}",
        asked.elapsed()
    );
    let exit = ended(proc).await;
    assert_eq!(exit.signal.as_deref(), Some("SIGTERM"));
    assert_eq!(moat.wrapper.signalled(), [pgid]);
}

/// A running process whose run files were removed or replaced cannot be followed: the next
/// moat lists it as failed, saying why, instead of losing it (docs/security.md, "Run directory
/// and workspace files").
#[tokio::test]
async fn a_process_whose_run_files_were_tampered_with_is_listed_as_failed() {
    type Tamper = fn(&Path, &str);
    let cases: [(&str, Tamper, &str); 4] = [
        (
            "log removed",
            |dir, id| std::fs::remove_file(dir.join(format!("{id}.out"))).unwrap(),
            "No such file",
        ),
        (
            "log replaced by a symlink",
            |dir, id| {
                let log = dir.join(format!("{id}.out"));
                std::fs::remove_file(&log).unwrap();
                std::os::unix::fs::symlink("/etc/passwd", &log).unwrap();
            },
            "is a symbolic link",
        ),
        (
            "log hard-linked elsewhere",
            |dir, id| {
                std::fs::hard_link(dir.join(format!("{id}.out")), dir.join("copy")).unwrap();
            },
            "has 2 links",
        ),
        (
            "run directory gone",
            |dir, _| std::fs::remove_dir_all(dir).unwrap(),
            "No such file",
        ),
    ];
    for (name, tamper, why) in cases {
        let moat = Moat::new(script);
        let first = moat.start("sleep 600", true).await;
        group_of(&moat, &first).await;
        tamper(&moat.run_dir, &first.info.id);
        let next = registry_on(&moat.fake, &moat.store);
        let listed = next.list(SESSION);
        assert_eq!(listed.len(), 1, "{name}");
        let proc = &listed[0];
        let exit = proc.exit().unwrap_or_else(|| panic!("{name}: not ended"));
        assert_eq!((exit.code, exit.signal), (None, None), "{name}");
        let text = proc.with_output(|st| st.output.aggregated());
        assert!(
            text.contains("stopped following this process") && text.contains(why),
            "{name}: {text}"
        );
        let row = moat.store.process(&first.info.id).unwrap().unwrap();
        assert_eq!(row.status, ProcessStatus::Failed, "{name}");
    }
}

/// The supervisor's kill: the helper's `signalled` alone means the TERM ended the group;
/// `killed` means it had to escalate (docs/security.md, "Ending a command").
#[tokio::test]
async fn a_kill_reports_sigterm_or_the_escalation_to_sigkill() {
    let cases = [
        ("sleep 600", "SIGTERM", Some("143")),
        ("trap '' TERM; sleep 600", "SIGKILL", None),
    ];
    for (command, signal, exit_file) in cases {
        let moat = Moat::new(script);
        let proc = moat.start(command, true).await;
        let pgid = group_of(&moat, &proc).await;
        proc.kill().await;
        let exit = ended(&proc).await;
        assert_eq!(
            (exit.code, exit.signal.as_deref(), exit.timed_out),
            (None, Some(signal), false),
            "{command}"
        );
        // The helper reached the engine once, for this group.
        let kill = kill_group_argv(pgid, KILL_GRACE_MS);
        let kills = moat
            .fake
            .calls()
            .into_iter()
            .filter(|c| matches!(c, Call::Capture { argv, .. } if *argv == kill))
            .count();
        assert_eq!(kills, 1, "{command}");
        assert_eq!(moat.wrapper.signalled(), [pgid], "{command}");
        assert_eq!(
            std::fs::read_to_string(moat.file(&proc, "exit"))
                .ok()
                .filter(|s| !s.is_empty())
                .as_deref(),
            exit_file,
            "{command}"
        );
        let row = moat.store.process(&proc.info.id).unwrap().unwrap();
        assert_eq!(
            (row.status, row.signal.as_deref()),
            (ProcessStatus::Failed, Some(signal)),
            "{command}"
        );
    }
}

/// In a session that may become root (E2B's), a command may have become root, which the
/// sandbox's user cannot signal: the kill helper runs as root there, and only there.
#[tokio::test]
async fn a_root_sessions_kill_runs_as_root() {
    for root in [false, true] {
        let moat = Moat::new(script);
        let setup = crate::store::SessionSetup {
            root,
            ..Default::default()
        };
        moat.store.claim_session_setup(SESSION, &setup).unwrap();
        let proc = moat.start("sleep 600", true).await;
        let pgid = group_of(&moat, &proc).await;
        proc.kill().await;
        ended(&proc).await;
        let kill = kill_group_argv(pgid, KILL_GRACE_MS);
        let users: Vec<Option<String>> = moat
            .fake
            .calls()
            .into_iter()
            .filter_map(|c| match c {
                Call::Capture { argv, user, .. } if argv == kill => Some(user),
                _ => None,
            })
            .collect();
        let want = root.then(|| "0".to_string());
        assert_eq!(users, [want], "root = {root}");
        assert_eq!(proc.info.signal_as, root.then(|| "0".to_string()));
    }
}

/// A timeout is a kill the supervisor sends itself, and the exit says so.
#[tokio::test]
async fn a_timeout_kills_the_group_and_is_recorded() {
    let moat = Moat::new(script);
    let mut spec = spec(&moat.run_dir, "sleep 600", false);
    spec.timeout_secs = Some(1);
    let proc = moat.registry.start(spec).await.unwrap();
    let exit = ended(&proc).await;
    assert_eq!(
        (exit.signal.as_deref(), exit.timed_out),
        (Some("SIGTERM"), true)
    );
    assert_eq!(moat.wrapper.signalled().len(), 1);
    assert!(
        moat.store
            .process(&proc.info.id)
            .unwrap()
            .unwrap()
            .timed_out
    );
}

/// A process placed on the host runs through the host executor on this machine, and the
/// engine never hears of it: the registry picks the executor by [`Place`], not by a name.
#[tokio::test]
async fn a_host_process_never_reaches_the_engine() {
    let moat = Moat::new(script);
    let mut host = spec(&moat.run_dir, "echo on-the-host", false);
    host.place = Place::Host;
    host.cwd = moat.run_dir.display().to_string();
    let proc = moat.registry.start(host).await.unwrap();
    let exit = ended(&proc).await;
    assert_eq!(exit.code, Some(0));
    assert_eq!(
        proc.with_output(|st| st.output.aggregated()),
        "on-the-host\n"
    );
    assert!(
        moat.fake.calls().is_empty(),
        "the engine saw {:?}",
        moat.fake.calls()
    );
    let row = moat.store.process(&proc.info.id).unwrap().unwrap();
    assert_eq!(row.container, "host");
    // And a container's process does reach it.
    let boxed = moat.start("echo in-the-box", false).await;
    ended(&boxed).await;
    assert!(moat
        .fake
        .calls()
        .iter()
        .any(|c| matches!(c, Call::Exec { container, .. } if container == CONTAINER)));
}

/// What the engine says about a container whose command was killed with everything in it,
/// against when the command started: `docker rm -f`, `docker stop`, `docker restart` (before
/// moat looks, or within the second it watches) and nothing at all.
#[tokio::test]
async fn a_container_that_ended_under_a_command_is_told_apart() {
    use super::limit::ContainerFate::{self, *};
    use super::supervisor::container_fate;
    use crate::runtime::Engine;

    /// What happens to the container after the command started.
    #[derive(Debug, Clone, Copy)]
    enum Then {
        Nothing,
        Stop,
        Remove,
        Restart,
        /// Stopped, and running again 300 ms after moat began to watch.
        StopThenRestart,
    }
    let rows: &[(Then, ContainerFate)] = &[
        (Then::Nothing, Running),
        (Then::Stop, Stopped),
        (Then::Remove, Removed),
        (Then::Restart, Restarted),
        (Then::StopThenRestart, Restarted),
    ];
    let cases = rows.iter().map(|(then, want)| async move {
        let fake = FakeRuntime::new();
        let spec = crate::session::build_spec(
            &crate::config::SandboxConfig::default(),
            CONTAINER,
            SESSION,
            Path::new("/w"),
            Path::new("/r"),
            crate::store::now_ms(),
        );
        let id = fake.create_container(&spec).await.unwrap();
        fake.start_container(&id).await.unwrap();
        // The command starts in the running container, a moment after it started.
        tokio::time::sleep(Duration::from_millis(5)).await;
        let since = crate::store::now_ms();
        tokio::time::sleep(Duration::from_millis(5)).await;
        match then {
            Then::Nothing => {}
            Then::Stop => fake.stop(CONTAINER),
            Then::Remove => fake.remove_container(&id).await.unwrap(),
            Then::Restart => fake.restart(CONTAINER),
            Then::StopThenRestart => {
                fake.stop(CONTAINER);
                let later = fake.clone();
                tokio::spawn(async move {
                    tokio::time::sleep(Duration::from_millis(300)).await;
                    later.restart(CONTAINER);
                });
            }
        }
        let got = container_fate(&fake, CONTAINER, since).await;
        assert_eq!(got, *want, "{then:?}");
    });
    futures::future::join_all(cases).await;
}

/// A finished process's record holds no output buffer beyond a small bound, foreground or
/// background: once its result is taken, its views are shelved and the reused buffers gone
/// (a megabyte of output kept 1.4 MB per record, 200 records 330 MiB: issue 29). A later
/// reader gets the same text back from the log, redacted and sanitized as before.
#[tokio::test]
async fn a_finished_record_holds_no_output_buffers() {
    const CAP: usize = 200_000;
    let secrets = vec![("TOKEN".to_string(), "hunter2hunter2".to_string())];
    let flood: String = (0..16_000)
        .map(|i| {
            format!(
                "line {i:06} \x1b[31mred\x1b[0m hunter2hunter2 {}\n",
                "x".repeat(30)
            )
        })
        .collect();
    assert!(flood.len() > 1 << 20);
    // What a live run shows: the same bytes through a fresh pipeline.
    let mut want = super::output::OutputState::new(CAP, secrets.clone());
    want.ingest(flood.as_bytes(), true);
    want.finish();
    let want = want.aggregated();
    assert!(
        want.contains("[REDACTED:TOKEN]") && !want.contains("hunter2") && !want.contains('\x1b')
    );
    let out = flood.clone();
    let moat = Moat::with_cap(
        move |c| match c {
            "flood" => Play::Exit {
                out: out.clone(),
                code: 0,
            },
            other => script(other),
        },
        CAP,
    );
    for background in [false, true] {
        let mut spec = spec(&moat.run_dir, "flood", background);
        spec.secrets = secrets.clone();
        let proc = moat.registry.start(spec).await.unwrap();
        ended(&proc).await;
        // The exec's result (foreground), a poll (background): taken once, in full.
        let (text, drained) = proc.with_output(|st| (st.output.aggregated(), st.output.drain()));
        assert_eq!(text, want, "background: {background}");
        assert_eq!(drained, want, "background: {background}");
        let held = proc.lock().output.held_bytes();
        assert!(
            held <= 4 << 10,
            "a finished record holds {held} bytes of output buffers (background: {background})"
        );
        assert!(proc.lock().output.is_shelved());
        // Read again: the same text, nothing pending, and shelved again after.
        let (again, pending) = proc.with_output(|st| (st.output.aggregated(), st.output.drain()));
        assert_eq!((again.as_str(), pending.as_str()), (want.as_str(), ""));
        let st = proc.lock();
        assert!(st.output.is_shelved() && st.output.truncated() && !st.output.has_pending());
    }
}

/// A running process keeps no buffer the size of its largest read: text is sanitized and
/// redacted a slice at a time.
#[tokio::test]
async fn a_running_record_holds_bounded_buffers() {
    let mut o = super::output::OutputState::new(
        200_000,
        vec![("TOKEN".to_string(), "hunter2hunter2".to_string())],
    );
    let chunk = "0123456789abcdef hunter2hunter2\n".repeat(40_000);
    o.ingest(chunk.as_bytes(), true);
    let held = o.held_bytes();
    // One capped view while nothing was drained (its tail drops its dead prefix lazily, so up
    // to about twice the cap) and slice-sized buffers: not three copies of the 1.3 MB read.
    assert!(chunk.len() > 1 << 20);
    assert!(held < 1 << 20, "a running record holds {held} bytes");
}
