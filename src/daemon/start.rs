//! Finding the home's daemon, and starting one when none runs (docs/ARCHITECTURE.md,
//! "Daemon"). Every CLI command that acts on sessions and every `moat mcp` goes through here,
//! so one process owns the database, the engine calls, the supervisors and the timers.
//!
//! Start-up: a client that finds no daemon takes `daemon.start.lock`, looks again (another
//! client may have started one meanwhile), and otherwise launches `moat serve --idle-exit N`
//! in its own session with its output appended to `daemon.log`, then waits until the socket
//! answers. The daemon takes `daemon.lock` for its whole life, so even two daemons started by
//! hand cannot serve one home.

use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::time::{Duration, Instant};

use http::Method;
use serde_json::{json, Value};

use super::client::{ClientError, DaemonClient};
use super::fingerprint::fingerprint;
use super::lock::{self, LockError};
use crate::config::Config;
use crate::home::Home;

/// How long a client waits for another client that is starting the daemon.
const START_LOCK_WAIT: Duration = Duration::from_secs(60);
/// How long a started daemon may take to answer (it connects to the engine, opens the
/// database and re-attaches every running process first).
const ANSWER_WAIT: Duration = Duration::from_secs(30);
/// `daemon.log` is moved aside to `daemon.log.1` past this size when a daemon starts.
const LOG_ROTATE_BYTES: u64 = 8 << 20;
/// The marker moat puts on every host command (docs/security.md, "The operator channel").
const HOST_COMMAND_MARKER: &str = "MOAT_HOST_COMMAND";

#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    #[error(transparent)]
    Lock(#[from] LockError),
    #[error(transparent)]
    Client(#[from] ClientError),
    #[error("start moat serve for {home}: this moat runs inside a host command, which may not start the operator's daemon")]
    FromHostCommand { home: String },
    #[error("start moat serve for {home}")]
    Spawn {
        home: String,
        #[source]
        source: std::io::Error,
    },
    #[error("start moat serve for {home}: it exited ({status}) before answering; the end of {log}:\n{tail}")]
    Exited {
        home: String,
        status: String,
        log: String,
        tail: String,
    },
    #[error(
        "start moat serve for {home}: nothing answered on {socket} within {secs} s (see {log})"
    )]
    NoAnswer {
        home: String,
        socket: String,
        log: String,
        secs: u64,
    },
    #[error("use moat serve for {home}: it runs another moat build or configuration (moat.toml, MOAT_* variables or the binary changed since it started){why}")]
    Mismatch { home: String, why: String },
}

/// A client for `home`'s daemon with `config` that asks the daemon nothing first: the CLI's
/// hot path (`moat exec`) saves the health round trip of [`connect`]. It is safe to send a
/// request with it: a daemon of another build or configuration refuses it before any handler
/// reads it (`server::fit`), and no daemon is a failed connect; on either ([`never_ran`]),
/// the caller runs [`connect`] (which starts or replaces the daemon, or says why it cannot)
/// and sends the request again.
pub fn unchecked(home: &Home, config: &Config) -> DaemonClient {
    DaemonClient::new(&home.socket(), fingerprint(config))
}

/// Whether `e`, the failure of a call of a client from [`unchecked`], means the call never
/// ran: nothing answered, or the daemon refused the client's fingerprint. A `409` is only
/// that when the daemon's `/v1/health` names another fingerprint (such a daemon refuses every
/// call but the few `server::fit` lets through); from a daemon that fits it is the
/// handler's own answer, and stands.
pub async fn never_ran(client: &DaemonClient, e: &ClientError) -> bool {
    if e.is_unreachable() {
        return true;
    }
    if !matches!(e, ClientError::Refused { status: 409, .. }) {
        return false;
    }
    match client.call(Method::GET, "/v1/health", None, &[]).await {
        Ok(h) => h["fingerprint"].as_str() != Some(client.fingerprint()),
        Err(_) => false,
    }
}

/// A client for `home`'s daemon with `config`, starting the daemon when none answers.
pub async fn connect(home: &Home, config: &Config) -> Result<DaemonClient, DaemonError> {
    let client = DaemonClient::new(&home.socket(), fingerprint(config));
    if let Some(c) = fitting(home, &client).await? {
        return Ok(c);
    }
    if std::env::var_os(HOST_COMMAND_MARKER).is_some() {
        return Err(DaemonError::FromHostCommand {
            home: home.root().display().to_string(),
        });
    }
    home.ensure_root().map_err(|source| DaemonError::Spawn {
        home: home.root().display().to_string(),
        source,
    })?;
    let _start = lock::start_lock(home.daemon_start_lock(), START_LOCK_WAIT).await?;
    // Another client may have started it while this one waited for the lock.
    if let Some(c) = fitting(home, &client).await? {
        return Ok(c);
    }
    if lock::serve_lock_held(&home.daemon_lock()) {
        // A daemon holds the home but does not answer yet (it is re-attaching processes).
        return wait_for_answer(home, &client, None).await;
    }
    let child = spawn(home, config.serve.idle_exit_secs)?;
    wait_for_answer(home, &client, Some(child)).await
}

/// The running daemon, when one answers with this client's fingerprint. A daemon with
/// another fingerprint that was started on demand and is idle is asked to stop (and `None`
/// returned, so a fitting one is started); a busy or hand-started one is an error.
async fn fitting(home: &Home, client: &DaemonClient) -> Result<Option<DaemonClient>, DaemonError> {
    let health = match client.call(Method::GET, "/v1/health", None, &[]).await {
        Ok(h) => h,
        Err(e) if e.is_unreachable() => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    if health["fingerprint"].as_str() == Some(client.fingerprint()) {
        return Ok(Some(client.clone()));
    }
    let mismatch = |why: String| DaemonError::Mismatch {
        home: home.root().display().to_string(),
        why,
    };
    if health["autoStarted"] != true {
        return Err(mismatch(format!(
            "; restart `moat serve` (pid {}), which owns {}",
            health["pid"],
            super::owns::describe(&health["owns"])
        )));
    }
    match client
        .call(
            Method::POST,
            "/v1/daemon/stop",
            Some(&json!({"ifIdle": true})),
            &[],
        )
        .await
    {
        Ok(_) => {}
        Err(ClientError::Refused { message, .. }) => return Err(mismatch(format!(": {message}"))),
        Err(e) => return Err(e.into()),
    }
    // Wait for it to let go of the home before starting the new one.
    let deadline = Instant::now() + ANSWER_WAIT;
    while lock::serve_lock_held(&home.daemon_lock()) {
        if Instant::now() > deadline {
            return Err(mismatch(format!(
                ": the old daemon (pid {}) did not stop within {} s",
                health["pid"],
                ANSWER_WAIT.as_secs()
            )));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(None)
}

/// Launches `moat serve --idle-exit SECS` for `home`, detached: its own session (a Ctrl-C
/// or a closed terminal of the client never reaches it), no stdin, output to `daemon.log`.
fn spawn(home: &Home, idle_exit_secs: u64) -> Result<tokio::process::Child, DaemonError> {
    let err = |source| DaemonError::Spawn {
        home: home.root().display().to_string(),
        source,
    };
    let exe = std::env::current_exe().map_err(err)?;
    let log_path = home.daemon_log();
    if std::fs::metadata(&log_path).is_ok_and(|m| m.len() > LOG_ROTATE_BYTES) {
        let _ = std::fs::rename(&log_path, log_path.with_extension("log.1"));
    }
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&log_path)
        .map_err(err)?;
    let log2 = log.try_clone().map_err(err)?;
    let mut cmd = tokio::process::Command::new(exe);
    cmd.arg("serve")
        .arg("--idle-exit")
        .arg(idle_exit_secs.to_string())
        .env("MOAT_HOME", home.root())
        .stdin(std::process::Stdio::null())
        .stdout(log)
        .stderr(log2)
        // The daemon outlives this client; tokio reaps it if it exits first.
        .kill_on_drop(false);
    // SAFETY: setsid is async-signal-safe and touches no memory of the parent.
    unsafe {
        cmd.pre_exec(|| {
            if libc::setsid() < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    cmd.spawn().map_err(err)
}

/// Waits until the socket answers with this client's fingerprint, or says why it never will.
async fn wait_for_answer(
    home: &Home,
    client: &DaemonClient,
    mut child: Option<tokio::process::Child>,
) -> Result<DaemonClient, DaemonError> {
    let deadline = Instant::now() + ANSWER_WAIT;
    let log = home.daemon_log();
    loop {
        match client.call(Method::GET, "/v1/health", None, &[]).await {
            Ok(h) if h["fingerprint"].as_str() == Some(client.fingerprint()) => {
                return Ok(client.clone())
            }
            Ok(_) => {
                return Err(DaemonError::Mismatch {
                    home: home.root().display().to_string(),
                    why: String::new(),
                })
            }
            Err(e) if !e.is_unreachable() => return Err(e.into()),
            Err(_) => {}
        }
        if let Some(c) = child.as_mut() {
            if let Ok(Some(status)) = c.try_wait() {
                return Err(DaemonError::Exited {
                    home: home.root().display().to_string(),
                    status: status.to_string(),
                    log: log.display().to_string(),
                    tail: tail(&log),
                });
            }
        }
        if Instant::now() > deadline {
            return Err(DaemonError::NoAnswer {
                home: home.root().display().to_string(),
                socket: home.socket().display().to_string(),
                log: log.display().to_string(),
                secs: ANSWER_WAIT.as_secs(),
            });
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The last lines of the daemon's log, escaped for a terminal (it may quote anything).
fn tail(path: &Path) -> String {
    use std::io::{Read, Seek, SeekFrom};
    // Only the end is read: the log may hold megabytes of an earlier daemon's lines.
    let mut bytes = Vec::new();
    if let Ok(mut f) = std::fs::File::open(path) {
        let _ = f
            .seek(SeekFrom::End(-2000))
            .or_else(|_| f.rewind().map(|_| 0));
        let _ = f.take(2000).read_to_end(&mut bytes);
    }
    let text = String::from_utf8_lossy(&bytes);
    let lines: Vec<&str> = text.lines().rev().take(8).collect();
    let joined: Vec<&str> = lines.into_iter().rev().collect();
    crate::output::escape_terminal(&joined.join("\n"))
}

/// What `/v1/health` says about the daemon, for `moat doctor`: `None` when none answers.
pub async fn status(home: &Home) -> Option<Value> {
    let client = DaemonClient::new(&home.socket(), String::new());
    client.call(Method::GET, "/v1/health", None, &[]).await.ok()
}

/// What `/v1/pool` says about the running daemon's warm pool (docs/pool.md, "Seeing the
/// pool"): `None` when no daemon answers. It never starts one: a daemon started to be asked
/// would only be beginning to fill.
pub async fn pool(home: &Home) -> Result<Option<Value>, ClientError> {
    let client = DaemonClient::new(&home.socket(), String::new());
    match client.call(Method::GET, "/v1/pool", None, &[]).await {
        Ok(v) => Ok(Some(v)),
        Err(e) if e.is_unreachable() => Ok(None),
        Err(e) => Err(e),
    }
}
