//! [`HostExecutor`]: the [`Executor`] for commands that run on the host itself.
//!
//! It lets the process registry and supervisor treat a host process like a container one:
//! the same wrapper script records the group id and exit status in the host run directory,
//! output goes to the same kind of log, and kill/exit-watch helpers run as local commands.
//! The wrapper leads its own session and process group (with a PTY, the terminal is the
//! session's controlling tty), so killing the group reaches everything the command started.
//! It runs commands only: container lifecycle is not its business (docs/ARCHITECTURE.md, "Seams").

use std::collections::HashMap;
use std::os::fd::OwnedFd;
use std::process::Stdio;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use tokio::sync::oneshot;

use super::pty;
use crate::runtime::{ExecSpec, ExecStarted, ExecTty, Executor, RuntimeError};

/// PATH for moat's own helper commands (kill, liveness checks): system directories only.
const HELPER_PATH: &str = "/usr/sbin:/usr/bin:/sbin:/bin";

#[derive(Default)]
struct Started {
    exit: Option<i64>,
    master: Option<OwnedFd>,
    /// The moat process id from the command's marker, for [`HostExecutor::leader`].
    process_id: String,
}

/// The only `MOAT_*` variables a host command may see: moat's own markers. Anything else of
/// that prefix (`MOAT_HOME`, `MOAT_SERVE_OPERATOR_TOKEN`, …) would point a host command at the
/// operator channel, whatever the env policy above let through.
const MOAT_VARS_PASSED: &[&str] = &[
    "MOAT_SHELL",
    crate::wrapper::PATH_PREPEND_VAR,
    super::lineage::HOST_MARKER,
];

/// Whether `key` may reach a host command (see [`MOAT_VARS_PASSED`]).
fn passed(key: &str) -> bool {
    !key.starts_with("MOAT_") || MOAT_VARS_PASSED.contains(&key)
}

/// See the module docs.
#[derive(Default, Clone)]
pub struct HostExecutor {
    started: Arc<Mutex<HashMap<String, Started>>>,
    /// The argv prefix that starts host commands as `elevated.user` (empty: moat's own user).
    /// Set once by the app.
    run_as: Arc<Mutex<Vec<String>>>,
}

impl HostExecutor {
    pub fn new() -> Self {
        Self::default()
    }

    /// Runs host commands through `prefix` (`moat __run-as …`), set from `elevated.user`.
    pub fn set_run_as(&self, prefix: Vec<String>) {
        *self.run_as.lock().unwrap() = prefix;
    }

    /// The prefix [`HostExecutor::set_run_as`] set.
    pub(super) fn run_as(&self) -> Vec<String> {
        self.run_as.lock().unwrap().clone()
    }

    /// The moat process id of the running host command whose wrapper (the leader of its
    /// session and process group) is `pid`, if this moat started it. Its environment could be
    /// rewritten (a PTY command `exec`s in place of the wrapper); this record cannot.
    pub fn leader(&self, pid: u32) -> Option<String> {
        let started = self.started.lock().unwrap();
        started
            .get(&format!("host-{pid}"))
            .filter(|s| s.exit.is_none())
            .map(|s| s.process_id.clone())
    }
}

fn spawn_error(argv: &[String], e: std::io::Error) -> RuntimeError {
    RuntimeError::Other {
        action: format!("start `{}` on the host", argv.first().map_or("", |s| s)),
        message: e.to_string(),
    }
}

#[async_trait]
impl Executor for HostExecutor {
    async fn exec(&self, _container: &str, spec: ExecSpec) -> Result<ExecStarted, RuntimeError> {
        let argv = &spec.argv;
        let Some(program) = argv.first() else {
            return Err(spawn_error(argv, std::io::Error::other("empty argv")));
        };
        let mut cmd = tokio::process::Command::new(program);
        cmd.args(&argv[1..]).env_clear().kill_on_drop(false);
        let mut process_id = String::new();
        for kv in &spec.env {
            if let Some((k, v)) = kv.split_once('=') {
                if k == super::lineage::HOST_MARKER {
                    process_id = v.to_string();
                }
                if passed(k) {
                    cmd.env(k, v);
                }
            }
        }
        if let Some(dir) = &spec.workdir {
            cmd.current_dir(dir);
        }
        let mut master = None;
        if spec.tty {
            let (m, slave) = pty::open(30, 120).map_err(|e| spawn_error(argv, e))?;
            let io = |fd: &OwnedFd| fd.try_clone().map(Stdio::from);
            cmd.stdin(io(&slave).map_err(|e| spawn_error(argv, e))?)
                .stdout(io(&slave).map_err(|e| spawn_error(argv, e))?)
                .stderr(io(&slave).map_err(|e| spawn_error(argv, e))?);
            // SAFETY: the hook only calls async-signal-safe functions (setsid, ioctl).
            unsafe {
                cmd.pre_exec(pty::make_controlling);
            }
            master = Some(m);
        } else {
            // Its own session (and so its own process group): the session id marks everything
            // the command starts (docs/security.md, "The operator channel"), and no terminal
            // of the operator's stays reachable from it.
            // SAFETY: setsid is async-signal-safe.
            unsafe {
                cmd.pre_exec(|| {
                    nix::unistd::setsid()
                        .map(drop)
                        .map_err(std::io::Error::from)
                });
            }
            cmd.stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null());
        }
        let mut child = cmd.spawn().map_err(|e| spawn_error(argv, e))?;
        // Our copies of the slave side are gone with `cmd`: the terminal closes with the child.
        drop(cmd);
        let id = format!("host-{}", child.id().unwrap_or(0));
        let tty = match &master {
            Some(m) => {
                let (output, input) = pty::streams(m).map_err(|e| spawn_error(argv, e))?;
                Some(ExecTty { output, input })
            }
            None => None,
        };
        self.started.lock().unwrap().insert(
            id.clone(),
            Started {
                exit: None,
                master,
                process_id,
            },
        );
        let (tx, finished) = oneshot::channel();
        let started = self.started.clone();
        let key = id.clone();
        tokio::spawn(async move {
            let status = child.wait().await.ok();
            let code = status.and_then(|s| {
                use std::os::unix::process::ExitStatusExt;
                s.code()
                    .map(i64::from)
                    .or_else(|| s.signal().map(|n| 128 + i64::from(n)))
            });
            if let Some(s) = started.lock().unwrap().get_mut(&key) {
                s.exit = code;
                s.master = None;
            }
            let _ = tx.send(());
        });
        Ok(ExecStarted { id, finished, tty })
    }

    async fn exec_exit_code(&self, exec_id: &str) -> Result<Option<i64>, RuntimeError> {
        let mut started = self.started.lock().unwrap();
        // Asked once, after the end: the entry is no longer needed.
        Ok(started.remove(exec_id).and_then(|s| s.exit))
    }

    async fn resize_exec(&self, exec_id: &str, rows: u16, cols: u16) -> Result<(), RuntimeError> {
        let started = self.started.lock().unwrap();
        if let Some(master) = started.get(exec_id).and_then(|s| s.master.as_ref()) {
            pty::resize(master, rows, cols).map_err(|e| RuntimeError::Other {
                action: "resize the terminal".into(),
                message: e.to_string(),
            })?;
        }
        Ok(())
    }

    async fn exec_capture_within(
        &self,
        _container: &str,
        argv: Vec<String>,
        _user: Option<String>,
        within: std::time::Duration,
    ) -> Result<(i64, Vec<u8>), RuntimeError> {
        let Some(program) = argv.first() else {
            return Err(spawn_error(&argv, std::io::Error::other("empty argv")));
        };
        let run = tokio::process::Command::new(program)
            .args(&argv[1..])
            .env_clear()
            .env("PATH", HELPER_PATH)
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .output();
        // Past the deadline the future is dropped, and with it the child (`kill_on_drop`).
        let out = tokio::time::timeout(within, run)
            .await
            .map_err(|_| RuntimeError::Other {
                action: format!("run the helper command {}", argv[0]),
                message: format!(
                    "it did not finish within {} s; it was ended",
                    within.as_secs()
                ),
            })?
            .map_err(|e| spawn_error(&argv, e))?;
        let mut bytes = out.stdout;
        bytes.extend_from_slice(&out.stderr);
        Ok((i64::from(out.status.code().unwrap_or(-1)), bytes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_moat_markers_pass() {
        for k in [
            "MOAT_HOME",
            "MOAT_SERVE_OPERATOR_TOKEN",
            "MOAT_SESSION",
            "MOAT_",
        ] {
            assert!(!passed(k), "{k}");
        }
        for k in [
            "MOAT_SHELL",
            "MOAT_PATH_PREPEND",
            "MOAT_HOST_COMMAND",
            "PATH",
            "LANG",
        ] {
            assert!(passed(k), "{k}");
        }
    }

    /// A host command leads its own session, sees no moat setting, and is known by its
    /// wrapper pid while it runs.
    #[tokio::test]
    async fn host_commands_lead_a_session_marked_and_without_moat_settings() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out");
        let rt = HostExecutor::new();
        let started = rt
            .exec(
                "host",
                ExecSpec {
                    argv: vec![
                        "/bin/sh".into(),
                        "-c".into(),
                        r#"{ cat /proc/self/stat; echo; env; } > "$0"; sleep 0.3"#.into(),
                        out.display().to_string(),
                    ],
                    env: vec![
                        "MOAT_HOME=/secret/home".into(),
                        "MOAT_SERVE_OPERATOR_TOKEN=tok".into(),
                        "MOAT_HOST_COMMAND=warm-river".into(),
                        "LANG=C".into(),
                    ],
                    workdir: None,
                    user: None,
                    tty: false,
                    console_size: None,
                    wrapped: None,
                },
            )
            .await
            .unwrap();
        let pid: u32 = started.id.strip_prefix("host-").unwrap().parse().unwrap();
        assert_eq!(rt.leader(pid).as_deref(), Some("warm-river"));
        assert_eq!(rt.leader(pid + 100_000), None);
        started.finished.await.unwrap();
        assert_eq!(rt.leader(pid), None, "a finished command leads nothing");
        let text = std::fs::read_to_string(&out).unwrap();
        let stat = text.lines().next().unwrap();
        let fields: Vec<&str> = stat[stat.rfind(')').unwrap() + 2..].split(' ').collect();
        // state ppid pgrp session: the wrapper is its own group and session leader.
        assert_eq!(fields[2], pid.to_string(), "{stat}");
        assert_eq!(fields[3], pid.to_string(), "{stat}");
        assert!(text.contains("MOAT_HOST_COMMAND=warm-river") && text.contains("LANG=C"));
        assert!(
            !text.contains("MOAT_HOME") && !text.contains("tok\n"),
            "{text}"
        );
    }
}
