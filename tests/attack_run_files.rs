//! Attack: a sandboxed program races symlinks into the run directory (`/run/moat`, a host bind
//! mount) so that moat, handing a new process's files to the sandbox user, changes the owner
//! or mode of a host file instead (docs/security.md, "Run directory and workspace files").
//!
//! A background process in the sandbox replaces every entry of `/run/moat` with a symlink to
//! a host canary, in a tight loop, while the test runs 200 commands through moat — once with
//! moat as root (in-process) and once with the moat CLI running as an unprivileged uid. The
//! canaries (root's, 0600; the unprivileged uid's, 0600) must keep owner, mode and content,
//! every command must succeed or fail with a clear error, and the racer must have tried.

mod common;

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use moat::config::Config;
use moat::contract::Status;
use moat::tools::ExecRequest;

const EXECS: usize = 200;
/// The unprivileged uid moat runs as in the second test (no account needed).
const MOAT_UID: u32 = 4242;
/// What a refused run-file operation says; anything else is not a clear error.
const CLEAR: &[&str] = &[
    "run directory",
    "symbolic link",
    "already exists",
    "not a regular file",
    "not a FIFO",
];

/// The script goes inside single quotes: it must hold none.
///
/// The racer: a tight loop (perl, so no fork per attempt) that replaces every entry of
/// `/run/moat` that is not yet a symlink (nor a directory, which `unlink` never removes) with a symlink to one of the canaries. It counts its
/// attempts (so the test knows it ran), keeps its last refusal and logs every replacement that
/// worked; the files it reports through are renamed into place, so a reader never sees one
/// half-written.
fn racer(root_canary: &Path, user_canary: &Path) -> String {
    let script = r#"
my @t = @ARGV; my $n = 0;
sub put { my ($name, $text) = @_; open(my $w, ">", "/tmp/racer.tmp") or return; print $w $text; close $w; rename("/tmp/racer.tmp", "/tmp/racer.$name"); }
while (1) {
  opendir(my $d, "/run/moat") or next;
  for my $e (readdir $d) {
    next if $e eq "." || $e eq "..";
    my $f = "/run/moat/$e";
    # Directories (the helper socket dir) cannot be unlinked at all: no race to win there.
    next if -l $f || -d $f;
    $n++;
    if (unlink($f) && symlink($t[$n % 2], $f)) {
      open(my $w, ">>", "/tmp/racer.won"); print $w "$f
"; close $w;
    } elsif ($n % 500 == 1) {
      put("err", "$f: $!");
    }
    put("count", $n) if $n % 500 == 0;
  }
  closedir $d;
}"#;
    assert!(
        !script.contains('\''),
        "the racer script must hold no single quote"
    );
    format!(
        "exec perl -e '{script}' '{}' '{}'",
        root_canary.display(),
        user_canary.display()
    )
}

struct Canaries {
    /// World-traversable, so the unprivileged moat could reach them if it were fooled.
    _dir: tempfile::TempDir,
    root: PathBuf,
    user: PathBuf,
}

fn canaries() -> Canaries {
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let root = dir.path().join("root-canary");
    let user = dir.path().join("user-canary");
    for (p, uid) in [(&root, 0), (&user, MOAT_UID)] {
        std::fs::write(p, "canary").unwrap();
        std::os::unix::fs::chown(p, Some(uid), Some(uid)).unwrap();
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    Canaries {
        _dir: dir,
        root,
        user,
    }
}

fn assert_untouched(c: &Canaries) {
    for (p, uid) in [(&c.root, 0), (&c.user, MOAT_UID)] {
        let m = std::fs::metadata(p).unwrap();
        assert_eq!(
            (m.uid(), m.gid(), m.mode() & 0o7777),
            (uid, uid, 0o600),
            "{} changed owner or mode",
            p.display()
        );
        assert_eq!(std::fs::read_to_string(p).unwrap(), "canary");
    }
}

/// The racer tried (its counter moved, `ln` was refused) and never replaced anything.
fn assert_racer_lost(container: &str) {
    let out = |script: &str| {
        let o = Command::new("docker")
            .args(["exec", container, "sh", "-c", script])
            .output()
            .unwrap();
        String::from_utf8_lossy(&o.stdout).trim().to_string()
    };
    let count: u64 = out("cat /tmp/racer.count 2>/dev/null").parse().unwrap_or(0);
    eprintln!("the racer made {count} attempts");
    assert!(count >= 500, "the racer did not run (count {count})");
    let err = out("cat /tmp/racer.err 2>/dev/null");
    assert!(err.contains("Permission denied"), "racer error: {err:?}");
    let won = out("cat /tmp/racer.won 2>/dev/null");
    assert!(won.is_empty(), "the racer replaced run files: {won}");
    let links = out("find /run/moat -type l");
    assert!(links.is_empty(), "symlinks in /run/moat: {links}");
}

fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn symlink_race_on_run_files_as_root() {
    if !is_root() {
        eprintln!("skipping: the root variant needs moat to run as root");
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "CI runs the attack tests as root"
        );
        return;
    }
    let Some(m) = common::moat("t-race-root", Config::default()).await else {
        return;
    };
    let c = canaries();
    m.background("a", &racer(&c.root, &c.user)).await;
    let mut failures = Vec::new();
    for i in 0..EXECS {
        let req = ExecRequest {
            command: format!("echo ok-{i}"),
            ..Default::default()
        };
        let r = tokio::time::timeout(
            Duration::from_secs(60),
            m.app.exec.run(&m.key("a"), &req, true),
        )
        .await
        .unwrap_or_else(|_| panic!("exec {i} hung"));
        match r {
            Ok(r) if r.status() == Some(Status::Completed) => {
                assert_eq!(r.details.aggregated().unwrap().trim(), format!("ok-{i}"));
            }
            Ok(r) => panic!("exec {i}: {}", r.text()),
            Err(e) => {
                let msg = format!("{e:#}");
                assert!(CLEAR.iter().any(|w| msg.contains(w)), "exec {i}: {msg}");
                failures.push(msg);
            }
        }
    }
    eprintln!("{EXECS} execs, {} refused", failures.len());
    assert_untouched(&c);
    assert_racer_lost(&m.container("a"));
    let run_dir = m.dir.path().join("run");
    for e in std::fs::read_dir(run_dir).unwrap() {
        let meta = std::fs::symlink_metadata(e.unwrap().path()).unwrap();
        assert!(meta.is_dir() && meta.uid() == 0 && meta.mode() & 0o022 == 0);
    }
}

/// Removes the unprivileged moat's container when the test ends, however it ends.
struct Container(String);

impl Drop for Container {
    fn drop(&mut self) {
        let _ = Command::new("docker")
            .args(["rm", "-f", &self.0])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

/// The moat CLI as uid 4242, with the docker socket's group so it can reach the engine.
fn moat_as_user(home: &Path, args: &[&str]) -> std::process::Output {
    use std::os::unix::process::CommandExt;
    let sock_gid = std::fs::metadata("/var/run/docker.sock").unwrap().gid();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_moat"));
    cmd.args(args)
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("HOME", home)
        .env("MOAT_HOME", home.join("moat"))
        .current_dir(home)
        .stdin(Stdio::null());
    // SAFETY: only async-signal-safe calls between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            let gid = nix::unistd::Gid::from_raw(sock_gid);
            nix::unistd::setgroups(&[gid])?;
            nix::unistd::setgid(nix::unistd::Gid::from_raw(MOAT_UID))?;
            nix::unistd::setuid(nix::unistd::Uid::from_raw(MOAT_UID))?;
            Ok(())
        });
    }
    cmd.output().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn symlink_race_on_run_files_as_a_normal_user() {
    if !is_root() {
        eprintln!("skipping: switching to uid {MOAT_UID} needs root");
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "CI runs the attack tests as root"
        );
        return;
    }
    if common::engine().await.is_none() {
        return;
    }
    let home = tempfile::tempdir().unwrap();
    std::os::unix::fs::chown(home.path(), Some(MOAT_UID), Some(MOAT_UID)).unwrap();
    let c = canaries();
    let session = "t-race-user-a";
    let moat_home = moat::home::Home::at(home.path().join("moat"));
    let name =
        moat::session::ContainerName::for_key(session, &moat_home.root().display().to_string());
    let container = Container(name.name.clone());
    let started = moat_as_user(
        home.path(),
        &[
            "exec",
            "--session",
            session,
            "--background",
            "--",
            &racer(&c.root, &c.user),
        ],
    );
    assert!(
        started.status.success(),
        "start racer: {}{}",
        String::from_utf8_lossy(&started.stdout),
        String::from_utf8_lossy(&started.stderr)
    );
    let mut refused = 0;
    for i in 0..EXECS {
        let home = home.path().to_path_buf();
        let out = tokio::time::timeout(
            Duration::from_secs(60),
            tokio::task::spawn_blocking(move || {
                moat_as_user(
                    &home,
                    &["exec", "--session", session, "--", &format!("echo ok-{i}")],
                )
            }),
        )
        .await
        .unwrap_or_else(|_| panic!("exec {i} hung"))
        .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        if out.status.success() {
            assert_eq!(stdout.trim(), format!("ok-{i}"), "{stderr}");
        } else {
            assert!(!stderr.contains("panicked"), "exec {i}: {stderr}");
            assert!(
                CLEAR.iter().any(|w| stderr.contains(w)),
                "exec {i}: {stderr}"
            );
            refused += 1;
        }
    }
    eprintln!("{EXECS} execs as uid {MOAT_UID}, {refused} refused");
    assert_untouched(&c);
    assert_racer_lost(&container.0);
    let run_dir = moat_home.run_dir(&name.slug);
    let m = std::fs::symlink_metadata(&run_dir).unwrap();
    assert_eq!((m.uid(), m.mode() & 0o7777), (MOAT_UID, 0o755));
}
