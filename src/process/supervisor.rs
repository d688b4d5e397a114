//! The owner task of one process: it follows the log, serves stdin/kill/resize requests,
//! enforces the timeout, and records the exit. Nothing else touches the log descriptor, the
//! stdin FIFO or the terminal.

use std::fs::File;
use std::future::Future;
use std::os::unix::fs::FileExt;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use tokio::sync::{mpsc, oneshot};

use super::events::{exit_event, EventBus, EventKind, EventOutcome};
use super::executors::Executors;
use super::files::RunFiles;
use super::input::InputWriter;
use super::limit::{classify, ContainerFate, Evidence};
use super::marked;
use super::output::LineMark;
use super::proc::{Control, Proc};
use super::read_buf::ReadBuf;
use super::script::kill_group_argv;
use super::signal::signal_name;
use crate::contract::ExitInfo;
use crate::contract::LimitHit;
use crate::contract::Place;
use crate::runtime::{ExecTty, Executor, LeftBehind};
use crate::session::cgroup::{CgroupDirs, Counters};
use crate::store::{now_ms, ProcessStatus, Store};

/// SIGTERM → this long → SIGKILL.
pub const KILL_GRACE_MS: u64 = 3000;
/// How long the kill helper may run past its grace before moat ends it: it runs as the
/// sandbox user, which can stop it (docs/helper.md, "Deadlines").
const KILL_HELPER_SLACK: Duration = Duration::from_secs(10);
/// How long a command may take to end after a kill whose helper did not finish before the
/// kill is reported as failed (and may be tried again).
const KILL_SETTLE: Duration = Duration::from_secs(2);
/// How long a timeout's kill that failed waits before it is tried again.
const KILL_RETRY: Duration = Duration::from_secs(30);
const READ_CHUNK: usize = 1 << 20;
/// Log polling interval bounds: eager while somebody waits on the process, lazy otherwise.
const EAGER_INTERVAL: Duration = Duration::from_millis(10);
/// Most log bytes one read of the follow loop takes before it lets other tasks run.
const READ_PER_CALL: usize = 8 << 20;
const LAZY_INTERVAL: Duration = Duration::from_millis(200);

/// How the supervisor learns that the command ended.
pub enum ExitWatch {
    /// The exec we started: its stream closes when the wrapper exits.
    Exec {
        exec_id: String,
        finished: Pin<Box<dyn Future<Output = ()> + Send>>,
        /// When the registry began to start it: a foreground command's latency runs from
        /// here to its recorded end (docs/http-api.md, "Metrics").
        started: std::time::Instant,
    },
    /// A process found after a restart: watch for its exit file and for its group vanishing.
    Recovered,
}

pub struct Supervisor {
    pub proc: Arc<Proc>,
    pub files: RunFiles,
    pub log: File,
    pub stdin: Option<tokio::net::unix::pipe::Sender>,
    pub tty: Option<ExecTty>,
    pub watch: ExitWatch,
    /// What runs the kill and liveness helpers at the process's place.
    pub executors: Executors,
    pub store: Arc<Store>,
    pub events: EventBus,
    pub control: mpsc::UnboundedReceiver<Control>,
    /// Raw bytes kept on disk per process; older bytes are freed by punching holes.
    pub spill_max: u64,
    /// What the supervisor knows of the container's limits (empty for host processes and
    /// re-attached ones).
    pub limits: LimitWatch,
}

/// The container's cgroups as seen when a command started.
#[derive(Debug, Clone, Default)]
pub struct LimitWatch {
    /// The cgroups, when this moat can read them from the host: the evidence for which limit
    /// ended the command, and a cheap look at its leftovers.
    pub cgroup: Option<Arc<CgroupDirs>>,
    /// The cgroup's limit counters just before the command started.
    pub baseline: Option<Counters>,
}

/// A terminal's output stream (`ExecTty::output`).
type TtyOutput = Pin<Box<dyn futures::Stream<Item = std::io::Result<bytes::Bytes>> + Send>>;

/// Appends what a terminal still holds to the log, until it is quiet for 200 ms.
async fn drain_terminal(log: &File, mut out: TtyOutput) {
    while let Ok(Some(bytes)) = tokio::time::timeout(Duration::from_millis(200), out.next()).await {
        match bytes {
            Ok(b) => {
                let _ = append(log, &b);
            }
            Err(_) => break,
        }
    }
}

/// Where a kill of the process stands, as the supervisor's loop saw it.
#[derive(Default)]
struct KillState {
    /// The kill helper was started (by a kill request or the timeout); at most once.
    sent: bool,
    /// It was started by the timeout.
    timed_out: bool,
    /// The group outlived the grace and got SIGKILL.
    escalated: bool,
    /// The kill helper already reported: nothing to wait for after the loop (its channel
    /// never closes, the sender lives in the supervisor).
    reported: bool,
    /// Set when the kill helper did not finish (it was stopped from inside and ended at its
    /// deadline): if the command still runs then, the kill has failed.
    settle: Option<tokio::time::Instant>,
    /// Callers of `kill`, told once the end is recorded (`true`), or that the kill failed.
    waiters: Vec<oneshot::Sender<bool>>,
}

/// What a kill did, as its task reports it.
#[derive(Debug, Clone, Copy)]
struct KillReport {
    /// The group outlived the grace and got SIGKILL.
    escalated: bool,
    /// The kill helper ran to its end (the group is gone, or was never there).
    finished: bool,
}

/// The exit code and signal of a process that ended with `status` (the wrapper's `$?`, or the
/// engine's), given whether moat sent the kill and whether it escalated to SIGKILL. Pure.
fn exit_of(status: Option<i64>, kill_sent: bool, escalated: bool) -> (Option<i64>, Option<String>) {
    if kill_sent {
        return match status {
            Some(c) if c > 128 && !escalated => (None, Some(signal_name(c - 128))),
            _ if escalated || status.is_none() => (None, Some("SIGKILL".to_string())),
            // It exited on its own before the signal reached it.
            other => (other, None),
        };
    }
    match status {
        // Nobody signalled it, but it died of a signal all the same (`kill -9 $$`, the OOM
        // killer): say which.
        Some(c) => super::status::split_status(c),
        None => (None, None),
    }
}

/// What the supervisor's loop carries from one turn to the next, and on to the end.
struct Follow {
    /// What the log is read into (grown up to [`READ_CHUNK`] while reads fill it).
    buf: ReadBuf,
    /// Log bytes before this offset are freed already (`free_old_bytes`).
    punched_to: u64,
    kill: KillState,
    /// The kill helper's report (whether it escalated to SIGKILL); the sender is cloned into
    /// each kill.
    kill_done_tx: mpsc::UnboundedSender<KillReport>,
    kill_done_rx: mpsc::UnboundedReceiver<KillReport>,
    /// The exec moat started (`None` for a re-attached process): resize and the engine's
    /// exit code need it.
    exec_id: Option<String>,
    /// When the registry began to start it (`None` for a re-attached process).
    exec_started: Option<std::time::Instant>,
    /// A terminal's output; `None` without a PTY, and once it closed.
    tty_out: Option<TtyOutput>,
    /// The process's input (stdin FIFO or terminal), written by a task of its own.
    input: InputWriter,
    /// A stdin FIFO was handed over: a foreground command gets end-of-file on it once ready.
    fifo: bool,
}

/// Resolves when the command ended (the exec's stream closed, or its run files say so).
type Finished = Pin<Box<dyn Future<Output = ()> + Send>>;

impl Supervisor {
    /// Follows the process until it ends, then records the end.
    pub async fn run(mut self) {
        let (mut follow, mut finished) = self.begin();
        let deadline = self.proc.info.timeout_secs.filter(|t| *t > 0).map(|t| {
            let elapsed = (now_ms() - self.proc.info.started_at_ms).max(0) as u64;
            tokio::time::Instant::now() + Duration::from_millis((t * 1000).saturating_sub(elapsed))
        });
        self.follow(&mut follow, &mut finished, deadline).await;
        self.finish(follow).await;
    }

    /// The loop's state, and how the end will be seen: the exec's stream, or for a
    /// re-attached process its run files.
    fn begin(&mut self) -> (Follow, Finished) {
        let (exec_id, finished, exec_started): (Option<String>, Finished, _) =
            match std::mem::replace(&mut self.watch, ExitWatch::Recovered) {
                ExitWatch::Exec {
                    exec_id,
                    finished,
                    started,
                } => (Some(exec_id), finished, Some(started)),
                ExitWatch::Recovered => (
                    None,
                    Box::pin(recovered_exit(
                        self.executors.clone(),
                        self.proc.info.place.clone(),
                        self.files.clone(),
                        self.proc.info.started_at_ms,
                        self.proc.info.signal_as.clone(),
                    )),
                    None,
                ),
            };
        let (tty_out, tty_in) = match self.tty.take() {
            Some(t) => (Some(t.output), Some(t.input)),
            None => (None, None),
        };
        let fifo = self.stdin.is_some();
        let input = InputWriter::spawn(self.stdin.take(), tty_in);
        let (kill_done_tx, kill_done_rx) = mpsc::unbounded_channel::<KillReport>();
        let follow = Follow {
            buf: ReadBuf::new(READ_CHUNK),
            punched_to: first_data_offset(&self.log),
            kill: KillState::default(),
            kill_done_tx,
            kill_done_rx,
            exec_id,
            exec_started,
            tty_out,
            input,
            fifo,
        };
        (follow, finished)
    }

    /// Reads the log, serves requests and enforces the timeout until the command ends.
    async fn follow(
        &mut self,
        f: &mut Follow,
        finished: &mut Finished,
        mut deadline: Option<tokio::time::Instant>,
    ) {
        let mut interval = EAGER_INTERVAL;
        // Nobody can write to a foreground command's stdin (there is no `process write` for
        // it while the call waits), so it gets end-of-file as soon as its wrapper opened the
        // FIFO: `cat` and `read` return instead of waiting for the timeout. The writer must
        // stay until then, or the wrapper's open would wait for ever (docs/mcp.md,
        // "Foreground and background").
        let mut eof_when_ready = !self.proc.lock().background && f.fifo;
        loop {
            if eof_when_ready && self.files.is_ready() {
                eof_when_ready = false;
                f.input.close(None);
                self.proc.lock().stdin_open = false;
            }
            let sleep = tokio::time::sleep(interval);
            tokio::select! {
                biased;
                _ = &mut *finished => break,
                chunk = next_chunk(&mut f.tty_out) => match chunk {
                    Some(bytes) => self.terminal_output(f, &bytes).await,
                    None => f.tty_out = None,
                },
                msg = self.control.recv() => {
                    if let Some(msg) = msg {
                        self.serve(f, msg).await;
                    }
                }
                Some(report) = f.kill_done_rx.recv() => {
                    f.kill.escalated |= report.escalated;
                    f.kill.reported = true;
                    if !report.finished {
                        f.kill.settle = Some(tokio::time::Instant::now() + KILL_SETTLE);
                    }
                }
                _ = wait_deadline(f.kill.settle) => {
                    // The kill helper never finished and the command still runs: the kill
                    // failed. Its callers hear so rather than wait for ever, and the next
                    // kill (or the timeout, after a pause) tries again.
                    tracing::warn!(id = %self.proc.info.id, "failed to end the process: its kill helper did not finish");
                    for w in f.kill.waiters.drain(..) {
                        let _ = w.send(false);
                    }
                    if f.kill.timed_out {
                        deadline = Some(tokio::time::Instant::now() + KILL_RETRY);
                    }
                    f.kill = KillState::default();
                }
                _ = wait_deadline(deadline), if !f.kill.sent => {
                    f.kill.timed_out = true;
                    f.kill.sent = true;
                    self.spawn_kill(f.kill_done_tx.clone());
                }
                _ = sleep => {}
            }
            let got = self.read_available(&mut f.buf);
            f.punched_to = self.free_old_bytes(f.punched_to);
            interval = if got > 0 || self.proc.waiters.load(Ordering::Relaxed) > 0 {
                EAGER_INTERVAL
            } else {
                (interval * 2).min(LAZY_INTERVAL)
            };
        }
    }

    /// PTY output comes through the terminal stream; it is appended to the log so the same
    /// reader, paging and durability apply. A cursor-position query is answered, as a
    /// terminal would, so programs that ask do not hang.
    async fn terminal_output(&mut self, f: &mut Follow, bytes: &[u8]) {
        let _ = append(&self.log, bytes);
        let cpr = self.proc.lock().term.observe(bytes);
        if cpr > 0 {
            for _ in 0..cpr {
                f.input.write(
                    crate::terminal_keys::cursor_position_report(1, 1).to_vec(),
                    None,
                );
            }
        }
    }

    /// One request from the process's handle: write, close stdin, kill, resize.
    async fn serve(&mut self, f: &mut Follow, msg: Control) {
        match msg {
            // Handed to the input's own task: a command that does not read stalls its writer,
            // never this loop (`input`).
            Control::Write(data, reply) => f.input.write(data, Some(reply)),
            Control::CloseStdin(reply) => {
                self.proc.lock().stdin_open = false;
                f.input.close(Some(reply));
            }
            Control::Kill(reply) => {
                f.kill.waiters.push(reply);
                if !f.kill.sent {
                    f.kill.sent = true;
                    self.spawn_kill(f.kill_done_tx.clone());
                }
            }
            Control::Resize(rows, cols) => {
                if let Some(id) = &f.exec_id {
                    let _ = self.executor().resize_exec(id, rows, cols).await;
                }
            }
        }
    }

    /// After the end: the rest of the output, the kill's report, what a foreground command
    /// left behind, the exit status and the limit that cut it short, then the record.
    async fn finish(self, mut f: Follow) {
        // Drain what the terminal still holds, then the rest of the log.
        if let Some(out) = f.tty_out.take() {
            drain_terminal(&self.log, out).await;
        }
        if f.kill.sent && !f.kill.reported {
            // Let the kill helper finish so "nothing is left" holds when we report the exit.
            if let Ok(Some(k)) = tokio::time::timeout(
                Duration::from_millis(KILL_GRACE_MS + 2000),
                f.kill_done_rx.recv(),
            )
            .await
            {
                f.kill.escalated |= k.escalated;
            }
        }
        // A foreground command owns nothing after it ends: whatever it left running, in its
        // group or started out of it (`setsid`, a double fork; its marker says so), is ended
        // before its result is told (docs/mcp.md, "Foreground and background"). A command
        // moat already signalled has had both done. A background command's leftovers stay:
        // that is how a server is kept running.
        let foreground = !self.proc.lock().background;
        let ended_now = foreground && !f.kill.sent && f.exec_id.is_some();
        // What is left is counted first (from the host, or by the container's helper), so a
        // command that left nothing costs no kill or sweep helper (docs/security.md, "Ending a
        // command: what left its process group").
        let pgid = self.files.read_pgid();
        let left = if ended_now {
            marked::left_behind(
                self.executors.sandbox.as_ref(),
                &self.proc.info.place,
                &self.files,
                self.limits.cgroup.as_deref(),
                &self.proc.info.id,
                pgid,
            )
            .await
        } else {
            LeftBehind::default()
        };
        let group_ended = ended_now
            && left.group != Some(0)
            && end_leftovers(
                &self.executors,
                &self.proc.info.place,
                pgid,
                self.limits.cgroup.as_deref(),
                self.proc.info.signal_as.as_deref(),
            )
            .await;
        let marked_ended = ended_now
            && marked::end_left(
                self.executors.sandbox.as_ref(),
                &self.proc.info.place,
                left,
                &self.proc.info.id,
                self.proc.info.signal_as.as_deref(),
            )
            .await;
        let leftovers_ended = group_ended || marked_ended;
        // All of it now, a bounded read at a time, letting the daemon's other tasks run between
        // full reads only: after the last one the exit is recorded with no await in between, so
        // a poll woken by the last output sees the exit with it.
        while self.read_available(&mut f.buf) >= READ_PER_CALL {
            tokio::task::yield_now().await;
        }
        // A command that ended before the loop ever ran still keeps only its bound on disk.
        self.free_old_bytes(f.punched_to);
        let exit_file = self.files.read_exit();
        let mut status = exit_file;
        if status.is_none() {
            if let Some(id) = &f.exec_id {
                status = self.executor().exec_exit_code(id).await.ok().flatten();
            }
        }
        let (code, signal) = exit_of(status, f.kill.sent, f.kill.escalated);
        let mut exit = ExitInfo {
            code,
            signal,
            timed_out: f.kill.timed_out,
            finished_at_ms: now_ms(),
        };
        let limit = limit_hit(
            &self.executors,
            &self.proc.info.place,
            self.limits.clone(),
            // Killed by a signal from outside moat with no status recorded: its container may
            // be going away (a wrapper that failed to fork has an exit code instead).
            (
                exit.success(),
                !f.kill.sent && exit_file.is_none() && exit.code.is_none(),
                leftovers_ended,
            ),
            self.proc.info.started_at_ms,
        )
        .await;
        killed_with_container(&mut exit, limit);
        // A foreground command's latency, by the transport that ran it; a background one's
        // run time is its own business.
        if let (false, Some(begun), Some(id)) = (
            self.proc.lock().background,
            f.exec_started,
            f.exec_id.as_deref(),
        ) {
            let transport = Executors::transport_of(&self.proc.info.place, id);
            crate::metrics::metrics().exec_took(transport, begun.elapsed().as_secs_f64());
        }
        self.record(exit, limit, leftovers_ended);
        for w in f.kill.waiters {
            let _ = w.send(true);
        }
    }

    /// Records the end: the process's state, its row, and for a background process that asked
    /// for it, the event; then wakes whoever waits on the state.
    fn record(&self, exit: ExitInfo, limit: Option<LimitHit>, leftovers_ended: bool) {
        let status = if exit.success() && limit.is_none() {
            ProcessStatus::Completed
        } else {
            ProcessStatus::Failed
        };
        let (background, event) = {
            let mut st = self.proc.lock();
            st.output.finish();
            st.exit = Some(exit.clone());
            st.limit = limit;
            st.leftovers_ended = leftovers_ended;
            st.stdin_open = false;
            let event = exit_event(&self.proc.info.id, &exit, &st.output.tail(400));
            let told = (st.background && st.notify_exit, st.output.redact(&event));
            // Nobody waits for a background run's whole text: its record keeps what
            // `OutputState::shelve` leaves. A foreground one's caller takes it first.
            if st.background {
                st.shelve();
            }
            told
        };
        let outcome = {
            let kind = if exit.success() {
                EventKind::Completed
            } else {
                EventKind::Failed
            };
            EventOutcome::ended(kind, &self.proc.info.id, &exit, None)
        };
        if let Err(e) = self.store.finish_process(
            &self.proc.info.id,
            status,
            exit.code,
            exit.signal.as_deref(),
            exit.timed_out,
            exit.finished_at_ms,
        ) {
            tracing::warn!(id = %self.proc.info.id, error = %e, "failed to record process exit");
        }
        if background {
            self.events.publish(&self.proc.info.session, event, outcome);
        }
        self.proc.changed.send_modify(|v| *v += 1);
    }

    /// Reads what the log has past our offset, at most [`READ_PER_CALL`] bytes, jumping holes
    /// (`process::holes`); returns the byte count. The caller comes back for the rest, so no
    /// log however large holds a daemon thread.
    fn read_available(&self, buf: &mut ReadBuf) -> usize {
        let mut total = 0;
        while total < READ_PER_CALL {
            let mut offset = self.proc.lock().output.bytes_read;
            match super::holes::next_data(&self.log, offset) {
                Some(data) if data > offset => {
                    self.proc.lock().output.skip_hole_to(data);
                    offset = data;
                }
                Some(_) => {}
                None => break,
            }
            let n = match self.log.read_at(buf.space(), offset) {
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => 0,
            };
            if n == 0 {
                break;
            }
            total += n;
            self.proc.lock().output.ingest(buf.got(n), true);
            if !buf.filled(n) {
                break;
            }
        }
        if total > 0 {
            self.proc.changed.send_modify(|v| *v += 1);
        }
        total
    }

    /// Keeps at most `spill_max` consumed bytes on disk: older ones become a hole, so file
    /// offsets stay valid while the disk space is returned.
    fn free_old_bytes(&self, punched_to: u64) -> u64 {
        let read = {
            let st = self.proc.lock();
            let read = st.output.bytes_read;
            st.stream_hold.map_or(read, |held| held.min(read))
        };
        let slack = 4 << 20;
        if read < punched_to + self.spill_max + slack {
            return punched_to;
        }
        let to = (read - self.spill_max) & !4095;
        // The record's new start is known before the bytes go, so a concurrent `process log`
        // never reads the hole.
        let start = {
            let mut st = self.proc.lock();
            st.output.freed_to(to);
            st.output.record_start
        };
        if let Some(LineMark {
            offset,
            lines_before: Some(lines),
            at_line_start,
        }) = start
        {
            if let Err(e) =
                self.store
                    .set_record_start(&self.proc.info.id, offset, lines, at_line_start)
            {
                tracing::warn!(id = %self.proc.info.id, error = %e, "failed to record where the output record starts");
            }
        }
        punch_hole(&self.log, punched_to, to - punched_to);
        to
    }

    /// What runs commands where this process runs.
    fn executor(&self) -> Arc<dyn Executor> {
        self.executors.of(&self.proc.info.place)
    }

    fn spawn_kill(&self, done: mpsc::UnboundedSender<KillReport>) {
        let executors = self.executors.clone();
        let place = self.proc.info.place.clone();
        let files = self.files.clone();
        let cgroup = self.limits.cgroup.clone();
        let id = self.proc.info.id.clone();
        let user = self.proc.info.signal_as.clone();
        tokio::spawn(async move {
            // The wrapper writes its pid first thing; give a just-started process a moment.
            let mut pgid = files.read_pgid();
            for _ in 0..50 {
                if pgid.is_some() {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
                pgid = files.read_pgid();
            }
            let Some(pgid) = pgid else {
                let _ = done.send(KillReport {
                    escalated: false,
                    finished: false,
                });
                return;
            };
            let ended =
                end_group(&executors, &place, pgid, cgroup.as_deref(), user.as_deref()).await;
            // What left the group (`setsid`, a double fork) still carries the marker.
            if let Place::Container(container) = &place {
                marked::sweep(executors.sandbox.as_ref(), container, &id, user.as_deref()).await;
            }
            let _ = done.send(KillReport {
                escalated: ended.as_ref().is_some_and(|out| out.contains("killed")),
                finished: ended.is_some(),
            });
        });
    }
}

/// Ends what a finished foreground command left running in its process group `pgid` (TERM,
/// grace, KILL: the same helper as a kill); returns whether there was anything. The caller
/// skips it when the group is known to be empty ([`marked::left_behind`]).
async fn end_leftovers(
    executors: &Executors,
    place: &Place,
    pgid: Option<u32>,
    cgroup: Option<&CgroupDirs>,
    user: Option<&str>,
) -> bool {
    let Some(pgid) = pgid else {
        return false;
    };
    end_group(executors, place, pgid, cgroup, user)
        .await
        .is_some_and(|out| out.contains("signalled"))
}

/// Most extra process slots the kill helper is given, and how often it is tried with them.
const ROOM_PIDS: i64 = 64;
const ROOM_TRIES: usize = 5;

/// Runs the kill helper on group `pgid`; returns what it printed, `None` when it never ran.
///
/// When the container is at its pids limit the engine may fail to start the helper at all
/// (runc clones inside the container's cgroup). moat then gives the container a few more
/// slots for as long as it takes (`docker update --pids-limit`), tries again, and puts the
/// limit back (docs/security.md, "Sandbox limits").
async fn end_group(
    executors: &Executors,
    place: &Place,
    pgid: u32,
    cgroup: Option<&CgroupDirs>,
    user: Option<&str>,
) -> Option<String> {
    let runtime = executors.of(place);
    let container = place.stored();
    let run = || async {
        let within = Duration::from_millis(KILL_GRACE_MS) + KILL_HELPER_SLACK;
        match runtime
            .exec_capture_within(
                container,
                kill_group_argv(pgid, KILL_GRACE_MS),
                user.map(String::from),
                within,
            )
            .await
        {
            Ok((_, out)) => {
                let out = String::from_utf8_lossy(&out).into_owned();
                // The helper always prints one of these when it ran on a live group, and
                // nothing when the group was already gone.
                let ran = out.contains("signalled") || out.trim().is_empty();
                Some((ran, out))
            }
            Err(e) => {
                tracing::warn!(%container, error = %e, "failed to signal process group");
                None
            }
        }
    };
    let first = run().await;
    if let Some((true, out)) = &first {
        return Some(out.clone());
    }
    // Only a container has a pids limit the engine can raise.
    let container = place.container()?;
    let limit = cgroup
        .and_then(CgroupDirs::usage)
        .filter(|u| u.pids_limit.is_some_and(|l| u.pids + 2 > l))
        .and_then(|u| u.pids_limit)?;
    let limit = i64::try_from(limit).ok()?;
    tracing::info!(%container, pgid, "the pids limit is full: raising it while the group is ended");
    let mut last = first.map(|(_, out)| out);
    if executors
        .engine
        .set_pids_limit(container, limit + ROOM_PIDS)
        .await
        .is_ok()
    {
        for _ in 0..ROOM_TRIES {
            match run().await {
                Some((true, out)) => {
                    last = Some(out);
                    break;
                }
                Some((false, out)) => last = Some(out),
                None => {}
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        if let Err(e) = executors.engine.set_pids_limit(container, limit).await {
            tracing::warn!(%container, error = %e, "failed to restore the pids limit");
        }
    }
    last
}

/// Which limit, if any, cut a command short (`process::limit`), from whether it succeeded,
/// whether the wrapper never recorded an exit status, and whether moat ended its leftovers.
/// The engine is asked about the container only without an exit status (the wrapper was
/// killed with everything else in the container, or the container went away); a container
/// started after `started_at_ms`, when the command started, was restarted under it.
async fn limit_hit(
    executors: &Executors,
    place: &Place,
    limits: LimitWatch,
    (succeeded, killed_outside, leftovers_ended): (bool, bool, bool),
    started_at_ms: i64,
) -> Option<LimitHit> {
    // Limits are a container's: a host command has none moat set.
    let container = place.container()?;
    let fate = if !succeeded && killed_outside {
        container_fate(executors.engine.as_ref(), container, started_at_ms).await
    } else {
        ContainerFate::Running
    };
    let mut evidence = Evidence {
        before: limits.baseline,
        after: limits.cgroup.as_ref().and_then(|c| c.counters()),
        succeeded,
        leftovers_ended,
        container: fate,
        memory_limit: None,
        pids_limit: None,
    };
    // The limit's value is only told with a hit: it is read for the few commands that hit
    // one, not at every command's end (memory.stat, read with it, is the costliest file).
    if classify(&evidence).is_some_and(|hit| !hit.kind.ends_the_container()) {
        let usage = limits.cgroup.as_ref().and_then(|c| c.usage());
        evidence.memory_limit = usage.and_then(|u| u.memory_limit);
        evidence.pids_limit = usage.and_then(|u| u.pids_limit);
    }
    classify(&evidence)
}

/// A command whose container ended under it (removed, stopped, restarted) died of the SIGKILL
/// that took every process in it; whether the engine still had the exec's status to say so is
/// a race, so the result does not depend on it: with no code and no signal, it is SIGKILL
/// (docs/mcp.md, "Limits in results").
fn killed_with_container(exit: &mut ExitInfo, limit: Option<LimitHit>) {
    if limit.is_some_and(|l| l.kind.ends_the_container())
        && exit.code.is_none()
        && exit.signal.is_none()
    {
        exit.signal = Some("SIGKILL".into());
    }
}

/// What became of a container whose command (started at `since_ms`) was killed with
/// everything in it. `docker rm -f` kills the processes first, and the engine marks the
/// container exited and then removes it a moment later, so the container is watched for up to
/// a second: gone (or `removing`) is removed, running again but started after the command
/// did is restarted (`docker restart`, whose start may come within the second or before moat
/// looks at all), still not running at the end is stopped, running throughout is fine.
pub(super) async fn container_fate(
    runtime: &dyn crate::runtime::Engine,
    container: &str,
    since_ms: i64,
) -> ContainerFate {
    let mut fate = ContainerFate::Running;
    for _ in 0..10 {
        match runtime.inspect_container(container).await {
            Ok(None) => return ContainerFate::Removed,
            Ok(Some(c)) if c.state == "removing" => return ContainerFate::Removed,
            Ok(Some(c)) if c.running && c.started_at_ms.is_some_and(|t| t > since_ms) => {
                return ContainerFate::Restarted
            }
            Ok(Some(c)) => {
                fate = if c.running {
                    ContainerFate::Running
                } else {
                    ContainerFate::Stopped
                }
            }
            Err(_) => return fate,
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    fate
}

async fn next_chunk(
    out: &mut Option<Pin<Box<dyn futures::Stream<Item = std::io::Result<bytes::Bytes>> + Send>>>,
) -> Option<bytes::Bytes> {
    match out {
        Some(s) => match s.next().await {
            Some(Ok(b)) => Some(b),
            _ => None,
        },
        None => std::future::pending().await,
    }
}

async fn wait_deadline(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}

/// How long a process found by another moat may go without its wrapper recording a process
/// group before it is taken for one whose exec never started. Under load the engine can take
/// seconds to start an exec, and a CLI that looks meanwhile must not declare it dead.
const START_GRACE_MS: i64 = 60_000;

/// Consecutive liveness checks the engine fails to answer before the process is taken for
/// gone (its container removed); a single failure under load says nothing about the process.
const MAX_CHECK_ERRORS: u32 = 5;

/// For a process found after a restart (or by another moat), or one whose transport lost
/// sight of it (its helper went away, docs/helper.md): it ended when the wrapper wrote
/// its exit status, or when its process group is gone (killed with SIGKILL, or the container
/// went away).
pub(super) async fn recovered_exit(
    executors: Executors,
    place: Place,
    files: RunFiles,
    started_at_ms: i64,
    signal_as: Option<String>,
) {
    let runtime = executors.of(&place);
    let container = place.stored();
    let mut ticks = 0u32;
    let mut errors = 0u32;
    loop {
        if files.read_exit().is_some() {
            return;
        }
        if ticks.is_multiple_of(10) {
            let alive = match files.read_pgid() {
                Some(pgid) => {
                    let argv = vec![
                        "sh".into(),
                        "-c".into(),
                        format!("kill -0 -{pgid} 2>/dev/null && echo alive"),
                    ];
                    match runtime
                        .exec_capture(container, argv, signal_as.clone())
                        .await
                    {
                        Ok((_, out)) => {
                            errors = 0;
                            String::from_utf8_lossy(&out).contains("alive")
                        }
                        Err(_) => {
                            errors += 1;
                            errors < MAX_CHECK_ERRORS
                        }
                    }
                }
                // The wrapper has not recorded its group yet: still starting, not dead.
                None => crate::store::now_ms() - started_at_ms < START_GRACE_MS,
            };
            if !alive && files.read_exit().is_none() {
                return;
            }
        }
        ticks += 1;
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Appends at the current end (the descriptor is shared with the pread-based reader).
fn append(log: &File, bytes: &[u8]) -> std::io::Result<()> {
    log.write_all_at(bytes, log.metadata()?.len())
}

fn first_data_offset(log: &File) -> u64 {
    use std::os::fd::AsFd;
    nix::unistd::lseek(log.as_fd(), 0, nix::unistd::Whence::SeekData)
        .map(|o| o as u64)
        .unwrap_or(0)
}

fn punch_hole(log: &File, offset: u64, len: u64) {
    use nix::fcntl::{fallocate, FallocateFlags};
    if len == 0 {
        return;
    }
    let flags = FallocateFlags::FALLOC_FL_PUNCH_HOLE | FallocateFlags::FALLOC_FL_KEEP_SIZE;
    if let Err(e) = fallocate(log, flags, offset as i64, len as i64) {
        tracing::debug!(error = %e, "failed to free old log bytes (filesystem without hole punching)");
    }
}

#[cfg(test)]
mod tests {
    use super::{exit_of, killed_with_container, ExitInfo};
    use crate::contract::{LimitHit, LimitKind};

    /// A container's end reads as the SIGKILL it was, whether or not the engine kept the
    /// exec's status; a status it kept, and any other limit, are left alone.
    #[test]
    fn a_container_end_without_a_status_is_sigkill() {
        let hit = |kind| Some(LimitHit { kind, value: None });
        let end = |code: Option<i64>, signal: Option<&str>| ExitInfo {
            code,
            signal: signal.map(str::to_string),
            timed_out: false,
            finished_at_ms: 0,
        };
        // (code, signal, limit) → signal
        type Row<'a> = (
            Option<i64>,
            Option<&'a str>,
            Option<LimitHit>,
            Option<&'a str>,
        );
        let rows: &[Row] = &[
            (
                None,
                None,
                hit(LimitKind::ContainerRestarted),
                Some("SIGKILL"),
            ),
            (
                None,
                None,
                hit(LimitKind::ContainerStopped),
                Some("SIGKILL"),
            ),
            (
                None,
                None,
                hit(LimitKind::ContainerRemoved),
                Some("SIGKILL"),
            ),
            (
                None,
                Some("SIGKILL"),
                hit(LimitKind::ContainerRestarted),
                Some("SIGKILL"),
            ),
            (
                None,
                Some("SIGTERM"),
                hit(LimitKind::ContainerStopped),
                Some("SIGTERM"),
            ),
            (Some(1), None, hit(LimitKind::ContainerRestarted), None),
            (None, None, hit(LimitKind::Memory), None),
            (None, None, None, None),
        ];
        for (i, (code, signal, limit, want)) in rows.iter().enumerate() {
            let mut exit = end(*code, *signal);
            killed_with_container(&mut exit, *limit);
            assert_eq!(exit.signal.as_deref(), *want, "row {i}");
            assert_eq!(exit.code, *code, "row {i}");
        }
    }

    #[test]
    fn an_end_reads_as_a_code_or_a_signal() {
        type End = (Option<i64>, Option<String>);
        let sig = |s: &str| Some(s.to_string());
        // (status, kill sent, escalated) → (code, signal)
        let table: &[(Option<i64>, bool, bool, End)] = &[
            // Nobody signalled it.
            (Some(0), false, false, (Some(0), None)),
            (Some(3), false, false, (Some(3), None)),
            // It died of a signal all the same (`kill -9 $$`, the OOM killer).
            (Some(137), false, false, (None, sig("SIGKILL"))),
            (Some(143), false, false, (None, sig("SIGTERM"))),
            (None, false, false, (None, None)),
            // moat's TERM ended it: the wrapper recorded 128 + 15.
            (Some(143), true, false, (None, sig("SIGTERM"))),
            // It exited on its own before the signal reached it.
            (Some(0), true, false, (Some(0), None)),
            (Some(7), true, false, (Some(7), None)),
            // The group outlived the grace: SIGKILL, whatever was recorded.
            (Some(143), true, true, (None, sig("SIGKILL"))),
            (Some(0), true, true, (None, sig("SIGKILL"))),
            // Killed with no status recorded (the wrapper went with the group).
            (None, true, false, (None, sig("SIGKILL"))),
        ];
        for (status, sent, escalated, want) in table {
            assert_eq!(
                &exit_of(*status, *sent, *escalated),
                want,
                "{status:?} sent={sent} escalated={escalated}"
            );
        }
    }
}

#[cfg(test)]
mod recovery_tests {
    use super::*;
    use crate::runtime::fake::FakeRuntime;

    fn files(dir: &std::path::Path) -> RunFiles {
        let f = RunFiles::open(dir, "p", None).unwrap();
        f.create(false).unwrap();
        f
    }

    /// A process another moat started moments ago, whose wrapper has not yet recorded its
    /// group (the engine is slow to start the exec), is still running — not ended.
    #[tokio::test]
    async fn a_process_still_starting_is_not_taken_for_ended() {
        let dir = tempfile::tempdir().unwrap();
        let f = files(dir.path());
        let fake = Arc::new(FakeRuntime::default());
        let rt = Executors {
            sandbox: fake.clone(),
            host: Arc::new(crate::host::HostExecutor::new()),
            engine: fake,
        };
        let c = || Place::Container("c".into());
        let waiting = recovered_exit(rt.clone(), c(), f.clone(), crate::store::now_ms(), None);
        assert!(
            tokio::time::timeout(Duration::from_millis(500), waiting)
                .await
                .is_err(),
            "a process without a recorded group yet was taken for ended"
        );
        // Long past the start grace, a process that never recorded its group is gone.
        let old = crate::store::now_ms() - START_GRACE_MS - 1;
        tokio::time::timeout(
            Duration::from_secs(2),
            recovered_exit(rt.clone(), c(), f.clone(), old, None),
        )
        .await
        .expect("an exec that never started is taken for ended");
        // The wrapper's exit status ends the wait at once.
        std::fs::write(dir.path().join("p.exit"), "0").unwrap();
        tokio::time::timeout(
            Duration::from_secs(2),
            recovered_exit(rt, c(), f, crate::store::now_ms(), None),
        )
        .await
        .expect("a recorded exit ends the wait");
    }
}
