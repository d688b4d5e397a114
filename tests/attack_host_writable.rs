//! The agent's Makefile run on the host by an allowlisted `make` (docs/security.md, "Host
//! commands" and "Directories a sandbox can write"), against the real engine and the real
//! host: the agent writes a Makefile in a directory its sandbox can write (a host workspace,
//! a read-write bind), then asks for `make` on the host naming that directory as its workdir,
//! with `-C`, `--directory=` or `-f`. Each attack first runs for real where the defence does
//! not apply, so the marker it leaves proves the payload works; then it is refused or asked,
//! and the marker stays absent.

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use moat::app::App;
use moat::config::{Config, ConfigSource};
use moat::contract::{Status, ToolResult};
use moat::home::Home;
use moat::session::setup::{inspect, WorkspaceMode};
use moat::store::SessionSetup;
use moat::tools::{Caller, ExecRequest};

/// The real path of `make` on this host.
fn make() -> String {
    let out = std::process::Command::new("sh")
        .args(["-c", "command -v make"])
        .output()
        .unwrap();
    let p = String::from_utf8(out.stdout).unwrap().trim().to_string();
    assert!(p.starts_with('/'), "make is needed on this machine");
    std::fs::canonicalize(p).unwrap().display().to_string()
}

/// Host commands on for the CLI user, under `[policy.host] security = "allowlist"` with
/// `make` allowlisted and given an argv profile that takes the attacks' options (so the
/// allowlist alone would run them: docs/policy.md, "Argv profiles"), ask on a miss (the host
/// default), and `allowed` as the operator's extra host workdirs.
fn config(allowed: &[&Path], binds: Vec<String>) -> Config {
    let mut c = Config::default();
    c.elevated.enabled = true;
    c.elevated.allow_from.insert("cli".into(), vec!["*".into()]);
    c.elevated.allowed_workdirs = allowed.iter().map(|p| p.display().to_string()).collect();
    c.policy.host.allowlist = vec![make()];
    c.policy.host.argv_profiles.insert(
        "make".into(),
        moat::policy::BinProfile {
            value_flags: vec!["-C".into(), "--directory".into(), "-f".into()],
            max_positional: 2,
            ..Default::default()
        },
    );
    c.sandbox.binds = binds;
    c
}

/// A second moat on `m`'s home (another configuration, the same containers and store).
async fn same_home(m: &common::TestMoat, config: Config) -> App {
    let runtime = common::engine().await.unwrap();
    let source = ConfigSource {
        file: None,
        overrides: vec![],
    };
    App::with_engine(Home::at(m.dir.path()), config, source, runtime).unwrap()
}

fn host(command: &str, workdir: Option<&Path>) -> ExecRequest {
    ExecRequest {
        command: command.into(),
        elevated: Some(true),
        workdir: workdir.map(|w| w.display().to_string()),
        ..Default::default()
    }
}

async fn run(app: &App, session: &str, r: &ExecRequest) -> Result<ToolResult, String> {
    app.exec
        .run_for(&Caller::cli(), session, r, true)
        .await
        .map_err(|e| e.to_string())
}

/// The Makefile the agent writes: its default target leaves `marker` on whatever runs it.
fn makefile(marker: &Path) -> String {
    format!("all:\n\ttouch {}\n", marker.display())
}

/// A directory owned by the unprivileged `1000:1000`, as a user's checkout is.
fn user_dir(path: &Path) -> PathBuf {
    std::fs::create_dir_all(path).unwrap();
    std::os::unix::fs::chown(path, Some(1000), Some(1000)).unwrap();
    std::fs::canonicalize(path).unwrap()
}

/// The ways to point `make` at `dir` from the default host workdir (the workdir itself is
/// tried apart: it is refused, not asked).
fn attacks(dir: &Path) -> Vec<(String, ExecRequest)> {
    let d = dir.display();
    vec![
        ("-C".into(), host(&format!("make -C {d}"), None)),
        (
            "--directory=".into(),
            host(&format!("make --directory={d}"), None),
        ),
        ("-f".into(), host(&format!("make -f {d}/Makefile"), None)),
    ]
}

/// Waits a moment for anything that was started after all, then says whether `marker` is
/// there.
async fn made(marker: &Path) -> bool {
    tokio::time::sleep(Duration::from_millis(300)).await;
    marker.exists()
}

#[tokio::test]
async fn the_agents_makefile_in_its_host_workspace_never_runs_unasked() {
    let work = tempfile::tempdir().unwrap();
    let ws = user_dir(&work.path().join("checkout"));
    let listed = user_dir(&work.path().join("build"));
    let markers = work.path().join("markers");
    std::fs::create_dir_all(&markers).unwrap();
    let marker = markers.join("make-ran");
    let Some(m) = common::moat("t-hw-ws", config(&[&listed], Vec::new())).await else {
        return;
    };
    let key = m.key("s");

    // Controls: the allowlisted make runs the Makefile on the host, unasked, in a listed
    // workdir; and pointed at the checkout while no sandbox has it.
    std::fs::write(listed.join("Makefile"), makefile(&marker)).unwrap();
    let r = run(&m.app, &key, &host("make", Some(&listed)))
        .await
        .unwrap();
    assert_eq!(r.status(), Some(Status::Completed), "{}", r.text());
    assert!(
        made(&marker).await,
        "the control run should have made the marker"
    );
    std::fs::remove_file(&marker).unwrap();
    std::fs::write(ws.join("Makefile"), makefile(&marker)).unwrap();
    for (how, r) in attacks(&ws) {
        let out = run(&m.app, &key, &r).await.unwrap();
        assert_eq!(
            out.status(),
            Some(Status::Completed),
            "{how}: {}",
            out.text()
        );
        assert!(
            made(&marker).await,
            "{how}: the control should have run make"
        );
        std::fs::remove_file(&marker).unwrap();
    }
    std::fs::remove_file(ws.join("Makefile")).unwrap();

    // The checkout becomes a session's workspace; the agent writes the Makefile.
    let row = inspect(&ws, WorkspaceMode::default(), &m.app.config.sandbox, None).unwrap();
    let setup = SessionSetup {
        workspace: Some(row),
        ..Default::default()
    };
    m.app.sessions.create(&key, &setup).await.unwrap();
    let text = makefile(&marker).replace('\n', "\\n").replace('\t', "\\t");
    let w = m
        .exec("s", &format!("printf '{text}' > Makefile && cat Makefile"))
        .await;
    assert_eq!(w.status(), Some(Status::Completed), "{}", w.text());
    assert_eq!(
        std::fs::read_to_string(ws.join("Makefile")).unwrap(),
        makefile(&marker)
    );

    // As the workdir: refused, naming it and the key that would allow it.
    let err = run(&m.app, &key, &host("make", Some(&ws)))
        .await
        .unwrap_err();
    assert!(
        err.contains(&ws.display().to_string()) && err.contains("elevated.allowed_workdirs"),
        "{err}"
    );
    // Named in an operand: asked, with allow-once or deny only.
    for (how, r) in attacks(&ws) {
        let out = run(&m.app, &key, &r).await.unwrap();
        assert_eq!(
            out.status(),
            Some(Status::ApprovalPending),
            "{how}: {}",
            out.text()
        );
        let v = out.details.to_json();
        let reason = v["reason"].as_str().unwrap();
        assert!(
            reason.contains("which a sandbox can write"),
            "{how}: {reason}"
        );
        assert!(
            reason.contains(&format!("session {key}")),
            "{how}: {reason}"
        );
        assert_eq!(
            v["allowedDecisions"],
            serde_json::json!(["allow-once", "deny"])
        );
    }
    assert!(
        !made(&marker).await,
        "make ran the agent's Makefile unasked"
    );
    // The same workspace through the container's own root, `/proc/PID/root` (which resolves
    // as a link to `/`, so the path looks like a host path no sandbox writes): asked too, and
    // so is a guessed pid.
    let pid = m.inspect("s")["State"]["Pid"].as_u64().unwrap();
    for dir in [
        format!("/proc/{pid}/root/workspace"),
        "/proc/3/root/workspace".into(),
    ] {
        let dir = Path::new(&dir);
        for (how, r) in attacks(dir) {
            let out = run(&m.app, &key, &r).await.unwrap();
            assert_eq!(
                out.status(),
                Some(Status::ApprovalPending),
                "{} {how}: {}",
                dir.display(),
                out.text()
            );
        }
    }
    assert!(
        !made(&marker).await,
        "make ran the agent's Makefile through /proc unasked"
    );

    // An operator who lists the checkout's parent as a host workdir gets asked there too.
    let listing = same_home(&m, config(&[work.path()], Vec::new())).await;
    let out = run(&listing, &key, &host("make", Some(&ws))).await.unwrap();
    assert_eq!(
        out.status(),
        Some(Status::ApprovalPending),
        "{}",
        out.text()
    );
    assert!(!made(&marker).await);

    // A stopped container's checkout counts: it is mounted again when the session starts.
    let container = m.container("s");
    let stop = std::process::Command::new("docker")
        .args(["stop", "-t", "1", &container])
        .output()
        .unwrap();
    assert!(stop.status.success(), "{stop:?}");
    let out = run(&m.app, &key, &attacks(&ws)[0].1).await.unwrap();
    assert_eq!(
        out.status(),
        Some(Status::ApprovalPending),
        "{}",
        out.text()
    );
    assert!(!made(&marker).await);
}

#[tokio::test]
async fn the_agents_makefile_in_a_read_write_bind_never_runs_unasked() {
    let work = tempfile::tempdir().unwrap();
    let bind = user_dir(&work.path().join("shared"));
    let markers = work.path().join("markers");
    std::fs::create_dir_all(&markers).unwrap();
    let marker = markers.join("make-ran");
    let binds = vec![format!("{}:/shared", bind.display())];
    let Some(m) = common::moat("t-hw-bind", config(&[], binds)).await else {
        return;
    };
    let key = m.key("s");
    // The host command is asked for through a moat whose configuration no longer names the
    // bind: only the engine's account of the live container says the sandbox writes there.
    let operator = same_home(&m, config(&[], Vec::new())).await;

    // Control: nothing mounts the directory yet, so the allowlisted make runs its Makefile.
    std::fs::write(bind.join("Makefile"), makefile(&marker)).unwrap();
    for (how, r) in attacks(&bind) {
        let out = run(&operator, &key, &r).await.unwrap();
        assert_eq!(
            out.status(),
            Some(Status::Completed),
            "{how}: {}",
            out.text()
        );
        assert!(
            made(&marker).await,
            "{how}: the control should have run make"
        );
        std::fs::remove_file(&marker).unwrap();
    }
    std::fs::remove_file(bind.join("Makefile")).unwrap();

    // A session mounts it read-write and the agent writes the Makefile there.
    let text = makefile(&marker).replace('\n', "\\n").replace('\t', "\\t");
    let w = m
        .exec("s", &format!("printf '{text}' > /shared/Makefile"))
        .await;
    assert_eq!(w.status(), Some(Status::Completed), "{}", w.text());
    let err = run(&operator, &key, &host("make", Some(&bind)))
        .await
        .unwrap_err();
    assert!(err.contains("elevated.allowed_workdirs"), "{err}");
    for (how, r) in attacks(&bind) {
        let out = run(&operator, &key, &r).await.unwrap();
        assert_eq!(
            out.status(),
            Some(Status::ApprovalPending),
            "{how}: {}",
            out.text()
        );
        let reason = out.details.to_json()["reason"]
            .as_str()
            .unwrap()
            .to_string();
        assert!(
            reason.contains("the mount at /shared of session"),
            "{how}: {reason}"
        );
    }
    assert!(
        !made(&marker).await,
        "make ran the agent's Makefile unasked"
    );
    // `policy explain` judges it the same way.
    let explained = operator
        .exec
        .explain(
            &key,
            &moat::tools::ExplainRequest {
                command: format!("make -C {}", bind.display()),
                host: true,
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert!(
        matches!(explained.eval.decision, moat::policy::Decision::Ask { .. }),
        "{:?}",
        explained.eval.decision
    );
}

/// How long finding the writable directories takes on a host exec, with `n` session
/// containers: the first call (one list and one inspect per container) and later ones (one
/// list). `cargo nextest run --test attack_host_writable --run-ignored only --no-capture`.
#[tokio::test]
#[ignore]
async fn measure_the_writable_roots_per_host_exec() {
    let Some(m) = common::moat("t-hw-measure", Config::default()).await else {
        return;
    };
    let n = 10;
    for i in 0..n {
        let r = m.exec(&format!("s{i}"), "true").await;
        assert_eq!(r.status(), Some(Status::Completed), "{}", r.text());
    }
    let runs = 50;
    let mut cold = Duration::ZERO;
    for _ in 0..5 {
        let fresh = same_home(&m, Config::default()).await;
        let s = Arc::clone(&fresh.sessions);
        let t = Instant::now();
        let roots = s.writable_roots().await;
        cold += t.elapsed();
        // Each container's mounts lie in the workspaces and run directories.
        assert!(roots.reason(Path::new("/"), "true").is_none());
    }
    let t = Instant::now();
    for _ in 0..runs {
        m.app.sessions.writable_roots().await;
    }
    let warm = t.elapsed() / runs;
    eprintln!(
        "writable roots with {n} containers: first call {:?} (list + {n} inspects), later calls {:?} (list only)",
        cold / 5,
        warm
    );
}
