//! A moat home driven through the `moat` binary, as a user would: every command goes to the
//! home's daemon. On drop the daemon is stopped and the home's containers removed.

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// A home of its own; its daemon is stopped and its containers removed on drop.
pub struct TestHome {
    dir: tempfile::TempDir,
    prefix: String,
}

impl TestHome {
    pub fn new(prefix: &str) -> Self {
        Self {
            dir: tempfile::tempdir().unwrap(),
            prefix: prefix.to_string(),
        }
    }

    /// A home whose `moat.toml` is `config`.
    pub fn configured(prefix: &str, config: &str) -> Self {
        let home = Self::new(prefix);
        std::fs::write(home.path().join("moat.toml"), config).unwrap();
        home
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn key(&self, name: &str) -> String {
        format!("{}-{name}", self.prefix)
    }

    pub fn moat(&self) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_moat"));
        c.env("MOAT_HOME", self.path())
            .env_remove("MOAT_SESSION")
            .env_remove("MOAT_SHELL")
            .stdin(Stdio::null());
        // The Docker tests run once per transport (.ci/run).
        if let Ok(t) = std::env::var("MOAT_TEST_TRANSPORT") {
            c.env("MOAT_SANDBOX_TRANSPORT", t);
        }
        c
    }

    pub fn run(&self, args: &[&str]) -> Output {
        self.moat().args(args).output().unwrap()
    }

    /// The pid of the daemon serving this home, from its lock file.
    pub fn daemon_pid(&self) -> Option<i32> {
        std::fs::read_to_string(self.path().join("daemon.lock"))
            .ok()?
            .trim()
            .parse()
            .ok()
    }

    /// Ends this home's daemon (SIGTERM) and waits until it is gone: the next command starts
    /// a new one, which adopts what the old one left.
    pub fn stop_daemon(&self) {
        let pid = self.daemon_pid().expect("a daemon");
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGTERM,
        )
        .unwrap();
        wait_until("the daemon ends", Duration::from_secs(20), || !alive(pid));
    }

    /// `moat serve` processes whose environment names this home.
    pub fn daemons(&self) -> usize {
        let needle = format!("MOAT_HOME={}", self.path().display());
        std::fs::read_dir("/proc")
            .unwrap()
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
            .filter(|pid| {
                let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
                let env = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
                let cmd = String::from_utf8_lossy(&cmd);
                cmd.contains("moat\0serve")
                    && env.split(|b| *b == 0).any(|kv| kv == needle.as_bytes())
            })
            .count()
    }

    pub fn containers(&self, key: &str) -> Vec<String> {
        let out = Command::new("docker")
            .args([
                "ps",
                "-aq",
                "--filter",
                &format!("label=dev.moat.session={key}"),
            ])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::to_string)
            .collect()
    }

    /// `ps` inside the session's container.
    pub fn ps(&self, key: &str) -> String {
        let id = self.containers(key).pop().expect("a container");
        let out = Command::new("docker")
            .args(["exec", &id, "ps", "-eo", "args"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

impl Drop for TestHome {
    fn drop(&mut self) {
        if let Some(pid) = self.daemon_pid() {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGTERM,
            );
        }
        super::clean_up(&self.prefix, self.path());
    }
}

pub fn text(o: &Output) -> String {
    format!(
        "status {:?}\nstdout: {}\nstderr: {}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

pub fn wait_until(what: &str, limit: Duration, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < limit, "{what}: not within {limit:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

pub fn alive(pid: i32) -> bool {
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None).is_ok()
}

/// A command's standard output as text.
pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// One POST on a daemon's socket (as the operator, who owns the socket); (status, body).
pub fn unix_post(socket: &Path, path: &str, body: &str) -> (u16, String) {
    use std::io::{Read, Write};
    let mut s = std::os::unix::net::UnixStream::connect(socket).unwrap();
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    s.write_all(head.as_bytes()).unwrap();
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    let status = out
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (status, out)
}

/// One GET on a daemon's socket (as the operator); (status, body).
pub fn unix_get(socket: &Path, path: &str) -> (u16, String) {
    use std::io::{Read, Write};
    let mut s = std::os::unix::net::UnixStream::connect(socket).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    let status = out
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = out.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    (status, body.to_string())
}
