//! A process as the rest of moat sees it: identity, live state, and a control channel to its
//! owner task (the supervisor). State sits behind a std mutex that is never held across an
//! `.await`; changes are announced on a `watch` channel so waiters wake without polling.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use tokio::sync::{mpsc, oneshot, watch};

use super::output::OutputState;
use crate::contract::{ExitInfo, LimitHit};

/// Fixed facts about a process.
#[derive(Debug, Clone)]
pub struct ProcInfo {
    pub id: String,
    pub session: String,
    /// Where it runs: a container by name (stable across its recreation, unlike ids), or
    /// the host.
    pub place: crate::contract::Place,
    pub command: String,
    /// Container path the command runs in.
    pub cwd: String,
    pub pty: bool,
    pub started_at_ms: i64,
    pub timeout_secs: Option<u64>,
    /// The user moat's kill, liveness and sweep helpers run as in its container: root
    /// (`"0"`) in a session that may become root, whose commands may have become root and
    /// could not be signalled by the sandbox's user; `None`: the container's user, through
    /// the helper (docs/e2b.md, "Users").
    pub signal_as: Option<String>,
}

pub struct ProcState {
    /// Its text. Read a finished process's through [`Proc::with_output`]: its views may be
    /// shelved (`process::shelf`).
    pub output: OutputState,
    pub exit: Option<ExitInfo>,
    /// Moved to the background (by `background: true` or the yield window).
    pub background: bool,
    /// Consecutive empty polls, for the `retryInMs` back-off.
    pub empty_polls: usize,
    /// The sandbox limit that cut the command short, when the moat that watched it end could
    /// tell (docs/mcp.md, "Limits in results").
    pub limit: Option<LimitHit>,
    /// moat ended processes this foreground command left running in its group.
    pub leftovers_ended: bool,
    /// Terminal modes seen in a PTY's output (application cursor keys).
    pub term: crate::terminal_keys::TermModes,
    pub stdin_open: bool,
    /// Whether the supervisor publishes the exit event of a background run.
    pub notify_exit: bool,
    /// A duplicate of the log descriptor, read with `pread` by `process log` (never reopened
    /// by path: docs/security.md, "Run directory and workspace files").
    pub log: Option<std::sync::Arc<std::fs::File>>,
    /// How far a live reader of the log (`moat run`'s stream) has passed it on: bytes after
    /// this are not freed by the spill bound, so the stream stays whole however fast the
    /// command writes (the disk bound still applies). `None`: no live reader.
    pub stream_hold: Option<u64>,
    /// A `process kill` asked for its end (an interrupted CLI's, an agent's): a foreground
    /// command ended so keeps its record, so `moat process list` shows it with its signal
    /// (README, "moat exec").
    pub kill_requested: bool,
}

impl ProcState {
    /// Once the process ended, puts away what its record no longer needs
    /// (`OutputState::shelve`); a running process's state is left alone.
    pub fn shelve(&mut self) {
        if self.exit.is_some() {
            self.output.shelve(self.log.as_ref());
        }
    }
}

/// Requests to the owner task.
pub enum Control {
    Write(Vec<u8>, oneshot::Sender<std::io::Result<()>>),
    CloseStdin(oneshot::Sender<()>),
    /// Told `true` once the process ended, `false` when the kill failed.
    Kill(oneshot::Sender<bool>),
    Resize(u16, u16),
}

pub struct Proc {
    pub info: ProcInfo,
    pub state: Mutex<ProcState>,
    /// Bumped on new output and on exit.
    pub(crate) changed: watch::Sender<u64>,
    pub(crate) control: mpsc::UnboundedSender<Control>,
    /// Pollers currently waiting: the supervisor reads the log more eagerly while > 0.
    pub(crate) waiters: AtomicUsize,
}

impl Proc {
    pub fn lock(&self) -> std::sync::MutexGuard<'_, ProcState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Runs `f` on the state with the output views in memory, replaying them from the log
    /// first (without the lock) when they were shelved, and shelving them again after when the
    /// process has ended. A replay reads at most `REPLAY_MAX_BYTES` of log: async callers that
    /// may meet one run this on a blocking thread.
    pub fn with_output<R>(&self, f: impl FnOnce(&mut ProcState) -> R) -> R {
        loop {
            let replay = {
                let mut st = self.lock();
                match st.output.replay() {
                    None => {
                        let r = f(&mut st);
                        st.shelve();
                        return r;
                    }
                    Some(replay) => replay,
                }
            };
            let views = replay.run();
            self.lock().output.unshelve(views);
        }
    }

    pub fn exit(&self) -> Option<ExitInfo> {
        self.lock().exit.clone()
    }

    /// The limit that cut the command short, if any.
    pub fn limit(&self) -> Option<LimitHit> {
        self.lock().limit
    }

    /// Ended, and neither its exit status nor a limit says it failed.
    pub fn succeeded(&self) -> bool {
        let st = self.lock();
        st.exit.as_ref().is_some_and(ExitInfo::success) && st.limit.is_none()
    }

    pub fn is_running(&self) -> bool {
        self.lock().exit.is_none()
    }

    /// Waits until the process ends or `timeout` passes; returns whether it ended.
    pub async fn wait_exit(&self, timeout: std::time::Duration) -> bool {
        self.wait_for(timeout, |s| s.exit.is_some()).await
    }

    /// Waits until `ready` holds for the state, or `timeout` passes.
    pub async fn wait_for(
        &self,
        timeout: std::time::Duration,
        ready: impl Fn(&ProcState) -> bool,
    ) -> bool {
        let mut rx = self.changed.subscribe();
        self.waiters.fetch_add(1, Ordering::SeqCst);
        let deadline = tokio::time::Instant::now() + timeout;
        let done = loop {
            if ready(&self.lock()) {
                break true;
            }
            match tokio::time::timeout_at(deadline, rx.changed()).await {
                Ok(Ok(())) => continue,
                // The supervisor is gone: the state is final.
                Ok(Err(_)) => break ready(&self.lock()),
                Err(_) => break false,
            }
        };
        self.waiters.fetch_sub(1, Ordering::SeqCst);
        done
    }

    /// Asks the owner task to end the process group (TERM, then KILL after the grace);
    /// returns whether the process ended. A kill fails when moat's kill helper cannot finish
    /// (the sandbox stopped it): it is ended at its deadline, and the process runs on
    /// (docs/helper.md, "Deadlines").
    pub async fn kill(&self) -> bool {
        self.lock().kill_requested = true;
        let (tx, rx) = oneshot::channel();
        if self.control.send(Control::Kill(tx)).is_ok() {
            // The owner task went away: the process's end is recorded.
            rx.await.unwrap_or(true)
        } else {
            true
        }
    }

    pub async fn write(&self, data: Vec<u8>) -> std::io::Result<()> {
        let (tx, rx) = oneshot::channel();
        self.control
            .send(Control::Write(data, tx))
            .map_err(|_| std::io::Error::other("the process has exited"))?;
        rx.await
            .unwrap_or_else(|_| Err(std::io::Error::other("the process has exited")))
    }

    pub async fn close_stdin(&self) {
        let (tx, rx) = oneshot::channel();
        if self.control.send(Control::CloseStdin(tx)).is_ok() {
            let _ = rx.await;
        }
    }

    pub fn resize(&self, rows: u16, cols: u16) {
        let _ = self.control.send(Control::Resize(rows, cols));
    }
}
