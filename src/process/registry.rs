//! All processes of this moat instance, and the durable index behind them.
//!
//! Processes live in memory while this moat runs; the SQLite index and the run directory
//! hold the rest. A process another moat started (or that outlived a crash) is re-attached
//! on first use: its log is replayed, and a supervisor takes over watching it.

use std::collections::HashMap;
use std::fs::File;
use std::path::PathBuf;
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Mutex};

use tokio::sync::{mpsc, watch};

use super::events::EventBus;
use super::executors::Executors;
use super::files::{Created, RunFiles};
use super::output::{LineMark, OutputState};
use super::proc::{Control, Proc, ProcInfo, ProcState};
use super::supervisor::{ExitWatch, LimitWatch, Supervisor};
use crate::config::Scope;
use crate::contract::ExitInfo;
use crate::contract::Place;
use crate::runtime::{Launch, RuntimeError, Wrapping};
use crate::secrets::SecretSource;
use crate::session::cgroup::CgroupDirs;
use crate::session::container_key;
use crate::store::{now_ms, ProcessRow, ProcessStatus, Store, StoreError};
use crate::wrapper::PTY_SIZE;

#[derive(Debug, thiserror::Error)]
pub enum ProcessError {
    #[error("prepare process files in {dir}")]
    Files {
        dir: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Bounds that apply to every process.
#[derive(Debug, Clone)]
pub struct Limits {
    pub max_output_chars: usize,
    pub spill_max: u64,
    /// Finished processes are forgotten this long after they end.
    pub ttl_ms: i64,
    /// At most this many finished processes per session.
    pub max_finished: usize,
}

/// What to start.
#[derive(Debug, Clone)]
pub struct StartSpec {
    pub session: String,
    /// Where it runs.
    pub place: Place,
    /// Host side of `/run/moat` for that container (for a host process, its run directory).
    pub run_dir: PathBuf,
    /// The exact text to run (for allowlisted commands, the rebuilt plan).
    pub command: String,
    pub cwd: String,
    /// `KEY=VALUE`, already validated and merged.
    pub env: Vec<String>,
    pub pty: bool,
    pub background: bool,
    pub timeout_secs: Option<u64>,
    pub secrets: Vec<(String, String)>,
    /// Owner of the log and FIFO on the host (the sandbox user).
    pub owner: (u32, u32),
    /// Publish `Exec completed|failed …` when it ends in the background. Off for approved
    /// plans, whose waiter reports `Exec finished …` itself.
    pub notify_exit: bool,
    /// The login shell (`sandbox.shell` or `elevated.shell`).
    pub shell: crate::config::Shell,
    /// Keep stderr apart in `<id>.err` (`moat run`); the log then holds stdout only. Sandbox
    /// commands without a PTY only.
    pub split_stderr: bool,
    /// The session is sticky: the command's shell records where it ended in `<id>.state`
    /// (`script::sticky_command`). Sandbox commands only.
    pub sticky: bool,
    /// The container user instead of the container's own (`"0"`: root, in a session that may
    /// become root). Such a command goes through the engine's exec: the helper can only be
    /// the container's user (docs/helper.md).
    pub user: Option<String>,
}

/// How often `start` sweeps a session's finished processes.
const SWEEP_EVERY_MS: i64 = 30_000;

pub struct Registry {
    /// What starts and watches processes at each place, handed over by the app.
    executors: Executors,
    /// Secret values per (session, target), so a process re-attached after a restart is
    /// redacted like the one that started it.
    secrets: Mutex<Option<SecretSource>>,
    store: Arc<Store>,
    limits: Limits,
    events: EventBus,
    /// Live processes by id. A std mutex: never held across `.await`.
    procs: Mutex<HashMap<String, Arc<Proc>>>,
    /// When `start` last swept each session (`list` always does). Per session, so a busy
    /// session never keeps another's finished processes (and their open logs) from eviction.
    last_sweep_ms: Mutex<HashMap<String, i64>>,
    /// How sessions map to containers: sessions that share a container share its processes
    /// (docs/security.md, "Shared containers").
    scope: Mutex<Scope>,
    /// The sandbox user (uid, gid) that container processes' files belong to, so files
    /// re-opened after a restart are checked against the right owner.
    sandbox_owner: (u32, u32),
    /// Each container's cgroups by container name (`None`: this moat cannot see them), so
    /// finding them costs one inspect per container, not one per command.
    cgroups: Mutex<HashMap<String, Option<Arc<CgroupDirs>>>>,
}

impl Registry {
    pub fn new(
        executors: Executors,
        store: Arc<Store>,
        limits: Limits,
        events: EventBus,
        sandbox_owner: (u32, u32),
    ) -> Arc<Self> {
        Arc::new(Self {
            executors,
            secrets: Mutex::new(None),
            store,
            limits,
            events,
            procs: Mutex::new(HashMap::new()),
            last_sweep_ms: Mutex::new(HashMap::new()),
            scope: Mutex::new(Scope::Session),
            sandbox_owner,
            cgroups: Mutex::new(HashMap::new()),
        })
    }

    /// Sets how sessions map to containers (`sandbox.scope`), once at start.
    pub fn set_scope(&self, scope: Scope) {
        *self.scope.lock().unwrap() = scope;
    }

    /// Whether `session` may see and act on a process `owner` started in `container`: its
    /// own, and under a shared scope every process of the container it shares. Every session
    /// in a container can already reach those with `ps` and `kill`; the tool says so instead
    /// of pretending otherwise. Host processes stay per session.
    fn visible_to(&self, owner: &str, place: &Place, session: &str) -> bool {
        if owner == session {
            return true;
        }
        let scope = *self.scope.lock().unwrap();
        scope != Scope::Session
            && !place.is_host()
            && container_key(owner, scope) == container_key(session, scope)
    }

    /// Where secrets for re-attached processes come from (set once by the app).
    pub fn set_secret_source(&self, source: SecretSource) {
        *self.secrets.lock().unwrap() = Some(source);
    }

    /// The moat process id of the live host command whose wrapper is `pid`, if this moat
    /// started it (see [`crate::host::HostExecutor::leader`]).
    pub fn host_leader(&self, pid: u32) -> Option<String> {
        self.executors.host.leader(pid)
    }

    fn secrets_for(&self, session: &str, place: &Place) -> Vec<(String, String)> {
        match &*self.secrets.lock().unwrap() {
            Some(f) => f(session, place.is_host()),
            None => Vec::new(),
        }
    }

    pub fn events(&self) -> &EventBus {
        &self.events
    }

    /// The cgroups of container `name`, when this moat can read them from the host
    /// (`session::cgroup`). A container recreated under the same name is found again: the
    /// old directories are gone.
    pub async fn cgroup(&self, place: &Place) -> Option<Arc<CgroupDirs>> {
        let name = place.container()?;
        let cached = self.cgroups.lock().unwrap().get(name).cloned();
        match cached {
            Some(None) => return None,
            Some(Some(c)) if c.counters().is_some() => return Some(c),
            _ => {}
        }
        let info = self
            .executors
            .engine
            .inspect_container(name)
            .await
            .ok()
            .flatten()?;
        // Not running yet (or any more): nothing to find, and nothing to remember.
        if info.pid == 0 {
            return None;
        }
        let found = CgroupDirs::of_pid(info.pid).map(Arc::new);
        self.cgroups
            .lock()
            .unwrap()
            .insert(name.to_string(), found.clone());
        found
    }

    /// Who signals `session`'s processes at `place` ([`ProcInfo::signal_as`]): root in a
    /// container whose session may become root, as its setup records.
    fn signal_as(&self, session: &str, place: &Place) -> Option<String> {
        let root = matches!(place, Place::Container(_))
            && self
                .store
                .session_setup(session)
                .ok()
                .flatten()
                .is_some_and(|s| s.root);
        root.then(|| "0".to_string())
    }

    /// Starts a command; returns as soon as it runs.
    pub async fn start(self: &Arc<Self>, spec: StartSpec) -> Result<Arc<Proc>, ProcessError> {
        let begun = std::time::Instant::now();
        self.sweep_if_due(&spec.session);
        let id = {
            let procs = self.procs.lock().unwrap();
            crate::names::generate(|c| procs.contains_key(c) || self.store.process_id_taken(c))
        };
        // Each place wraps the command its own way; the registry only follows what it says.
        let wrap = self.executors.wrap(&spec.place, &launch_of(&spec, &id));
        let (files, Created { log, stdin }) = run_files(&spec, &id, &wrap)?;
        let info = ProcInfo {
            id: id.clone(),
            session: spec.session.clone(),
            place: spec.place.clone(),
            command: spec.command.clone(),
            cwd: spec.cwd.clone(),
            pty: spec.pty,
            started_at_ms: now_ms(),
            timeout_secs: spec.timeout_secs,
            signal_as: self.signal_as(&spec.session, &spec.place),
        };
        self.store
            .insert_process(&row_for(&info, &spec.run_dir, spec.background))?;
        // The limit counters before the command: what it changes is what it hit.
        let cgroup = self.cgroup(&spec.place).await;
        let limits = LimitWatch {
            baseline: cgroup.as_ref().and_then(|c| c.counters()),
            cgroup,
        };
        let started = match self
            .executors
            .of(&spec.place)
            .exec(spec.place.stored(), wrap.spec)
            .await
        {
            Ok(s) => s,
            Err(e) => {
                files.remove();
                let _ = self.store.delete_process(&id);
                return Err(e.into());
            }
        };
        let (proc, control) = new_proc(
            info,
            OutputState::new(self.limits.max_output_chars, spec.secrets),
            spec.background,
            !spec.pty || started.tty.is_some(),
        );
        self.prime(&proc, (spec.notify_exit, spec.pty, wrap.split_stderr), &log);
        let watch = self.exit_watch(&proc, &files, (started.id, begun), started.finished);
        self.supervise(
            &proc,
            files,
            log,
            stdin,
            started.tty,
            (watch, limits),
            control,
        );
        self.procs.lock().unwrap().insert(id, proc.clone());
        Ok(proc)
    }

    /// Sweeps `session`'s finished processes when it is due. Sweeping reads the session's
    /// index; on the exec hot path it runs at most every 30 s, or when too many are held.
    fn sweep_if_due(&self, session: &str) {
        let now = now_ms();
        let due = {
            let mut last = self.last_sweep_ms.lock().unwrap();
            let at = last.entry(session.to_string()).or_insert(0);
            // Only a sweep moves the mark: every start moving it kept a busy daemon from ever
            // sweeping again, and its finished processes held their logs open without bound.
            let due = now - *at > SWEEP_EVERY_MS
                || self.held_finished(session) > self.limits.max_finished;
            if due {
                *at = now;
            }
            due
        };
        if due {
            self.sweep(session);
        }
    }

    /// A started process's first state: its exit notice, its terminal's size, its log, and
    /// its stream held back while stderr is kept apart.
    fn prime(&self, proc: &Arc<Proc>, (notify_exit, pty, split): (bool, bool, bool), log: &File) {
        proc.lock().notify_exit = notify_exit;
        if pty {
            // Engine 20.10 (API 1.41) ignores the start's ConsoleSize; a resize after the start
            // is what sizes its terminal (the engine holds it until the exec has started). The
            // PTY wrapper covers a command that asks before this arrives.
            proc.resize(PTY_SIZE.0, PTY_SIZE.1);
        }
        let mut st = proc.lock();
        st.log = log.try_clone().ok().map(Arc::new);
        st.output.spill_max = self.limits.spill_max;
        if split {
            st.stream_hold = Some(0);
        }
    }

    /// What tells the supervisor that `proc`'s exec ended: the transport's own word, or, when
    /// the transport lost sight of the command (its helper went away) while it runs on, its
    /// run files, as after a restart of moat.
    fn exit_watch(
        &self,
        proc: &Arc<Proc>,
        files: &RunFiles,
        (exec_id, begun): (String, std::time::Instant),
        finished: tokio::sync::oneshot::Receiver<()>,
    ) -> ExitWatch {
        let lost = (
            self.executors.clone(),
            proc.info.place.clone(),
            files.clone(),
            proc.info.started_at_ms,
            proc.info.signal_as.clone(),
        );
        ExitWatch::Exec {
            exec_id,
            started: begun,
            finished: Box::pin(async move {
                if finished.await.is_err() {
                    let (executors, place, files, started_at, signal_as) = lost;
                    super::supervisor::recovered_exit(
                        executors, place, files, started_at, signal_as,
                    )
                    .await;
                }
            }),
        }
    }

    /// A process of `session` by id, re-attaching it from the index if this moat has not
    /// seen it yet. Another container's (or another session's host) id is "not found".
    pub fn get(self: &Arc<Self>, session: &str, id: &str) -> Option<Arc<Proc>> {
        if let Some(p) = self.procs.lock().unwrap().get(id).cloned() {
            return self
                .visible_to(&p.info.session, &p.info.place, session)
                .then_some(p);
        }
        let row = self.store.process(id).ok().flatten()?;
        if !self.visible_to(&row.session, &Place::from_stored(&row.container), session) {
            return None;
        }
        self.attach(row)
    }

    /// How many processes this moat supervises that have not ended; a daemon started on
    /// demand stays up while there is one (docs/ARCHITECTURE.md, "Daemon").
    pub fn running(&self) -> usize {
        self.procs
            .lock()
            .unwrap()
            .values()
            .filter(|p| p.exit().is_none())
            .count()
    }

    /// The processes that the `process` tool shows `session` (background ones, of every session
    /// in its container under a shared scope), newest first.
    pub fn list(self: &Arc<Self>, session: &str) -> Vec<Arc<Proc>> {
        self.sweep(session);
        let rows = if *self.scope.lock().unwrap() == Scope::Session {
            self.store.processes(session).unwrap_or_default()
        } else {
            let mut rows = self.store.all_processes().unwrap_or_default();
            rows.retain(|r| {
                self.visible_to(&r.session, &Place::from_stored(&r.container), session)
            });
            rows
        };
        rows.into_iter()
            .filter(|r| r.background)
            .filter_map(|r| self.get(session, &r.id))
            .collect()
    }

    /// Marks a process as backgrounded (the yield window passed, or `background: true`).
    pub fn set_background(&self, proc: &Proc) {
        proc.lock().background = true;
        let _ = self.store.set_background(&proc.info.id);
    }

    /// The call that waited on a foreground process went away (MCP cancellation, a client
    /// that disconnected, an interrupted CLI): the process is ended (TERM, grace, KILL on its
    /// group), `why` is added to its output, and it is moved to the background, so that
    /// `process list` and `poll` show it and its outcome (docs/mcp.md, "Timeouts,
    /// cancellation and signals"). Never blocks: usable from a drop guard.
    pub fn cancel(&self, proc: &Arc<Proc>, why: &str) {
        if proc.exit().is_some() {
            // It ended before the call went away; still keep its record visible, and only
            // what a record needs of it.
            self.set_background(proc);
            proc.lock().shelve();
            return;
        }
        proc.lock().output.note(why);
        self.set_background(proc);
        let (tx, _) = tokio::sync::oneshot::channel();
        let _ = proc.control.send(Control::Kill(tx));
    }

    /// Records that a poll handed out everything up to the current read position.
    pub fn record_drain(&self, proc: &Proc, offset: u64) {
        let _ = self.store.set_read_offset(&proc.info.id, offset);
    }

    /// Adds `note` to the output of every running process of `container` and returns them:
    /// the first step of a stop that ends them some other way too (the disk bound ends every
    /// process in the container, docs/security.md, "Disk bound"), so each one's output says
    /// why before its end is recorded.
    pub fn note_running(self: &Arc<Self>, container: &str, note: &str) -> Vec<Arc<Proc>> {
        let place = Place::Container(container.to_string());
        // Processes another moat started (a CLI that has exited) are re-attached first, so
        // they are ended too.
        for row in self.store.running_processes().unwrap_or_default() {
            if row.container == container {
                self.get(&row.session, &row.id);
            }
        }
        let running: Vec<Arc<Proc>> = self
            .procs
            .lock()
            .unwrap()
            .values()
            .filter(|p| p.info.place == place && p.exit().is_none())
            .cloned()
            .collect();
        for proc in &running {
            proc.lock().output.note(note);
        }
        running
    }

    /// Ends each of `procs` that is still running (TERM, grace, KILL on its group, then the
    /// sweep for its marker), as a kill does.
    pub fn end(&self, procs: &[Arc<Proc>]) {
        for proc in procs.iter().filter(|p| p.exit().is_none()) {
            let (tx, _) = tokio::sync::oneshot::channel();
            let _ = proc.control.send(Control::Kill(tx));
        }
    }

    /// Forgets a finished process: memory, index and files.
    pub fn forget(&self, proc: &Proc) {
        self.procs.lock().unwrap().remove(&proc.info.id);
        let row = self.store.process(&proc.info.id).ok().flatten();
        let _ = self.store.delete_process(&proc.info.id);
        let Some(row) = row else { return };
        // The files go off the caller's path: a finished command's result need not wait for
        // their removal. The row went first, so nothing re-attaches the id meanwhile.
        match tokio::runtime::Handle::try_current() {
            Ok(rt) => drop(rt.spawn_blocking(move || remove_files(&row))),
            Err(_) => remove_files(&row),
        }
    }

    /// Re-attaches every process the index says is running (at `moat serve` start), so
    /// timeouts and exit events keep working for them.
    pub fn recover_all(self: &Arc<Self>) -> usize {
        let rows = self.store.running_processes().unwrap_or_default();
        let n = rows.len();
        for mut row in rows {
            // A foreground command's caller went with the moat that started it: nobody waits
            // on it any more, so `process list` shows it with the background ones and its end
            // is told like theirs (docs/nodes.md, "When a node goes away").
            if !row.background {
                row.background = true;
                let _ = self.store.set_background(&row.id);
            }
            self.attach(row);
        }
        n
    }

    fn attach(self: &Arc<Self>, row: ProcessRow) -> Option<Arc<Proc>> {
        // A session with a host workspace runs as that workspace's recorded owner.
        let place = Place::from_stored(&row.container);
        let owner = (!place.is_host()).then(|| {
            let recorded = self.store.session_workspace(&row.session).ok().flatten();
            recorded
                .and_then(|w| w.owner())
                .unwrap_or(self.sandbox_owner)
        });
        // A directory that cannot be opened safely leaves the process without files: its
        // recorded state still shows, and a running one is listed as failed with the reason
        // instead of being re-attached (docs/security.md, "Run directory and workspace files").
        let (files, mut unsafe_files) = match RunFiles::open(&row.run_dir, &row.id, owner) {
            Ok(f) => (Some(f), None),
            Err(e) => (None, Some(e.to_string())),
        };
        let signal_as = self.signal_as(&row.session, &place);
        let info = ProcInfo {
            id: row.id.clone(),
            session: row.session.clone(),
            place,
            command: row.command.clone(),
            cwd: row.cwd.clone(),
            pty: row.pty,
            started_at_ms: row.started_at_ms,
            timeout_secs: row.timeout_secs,
            signal_as,
        };
        let secrets = self.secrets_for(&row.session, &info.place);
        let mut output = OutputState::new(self.limits.max_output_chars, secrets);
        output.spill_max = self.limits.spill_max;
        let log = match files.as_ref().map(RunFiles::open_log) {
            Some(Ok(log)) => Some(log),
            Some(Err(e)) => {
                unsafe_files = Some(e.to_string());
                None
            }
            None => None,
        };
        if let Some(log) = &log {
            let recorded = self.store.record_start(&row.id).ok().flatten().map(
                |(offset, lines, at_line_start)| LineMark {
                    offset,
                    lines_before: Some(lines),
                    at_line_start,
                },
            );
            replay(log, &mut output, row.read_offset, recorded);
        }
        let mut row = row;
        if row.status == ProcessStatus::Running {
            // It ended while no moat watched it: record the exit now, so the first look after
            // a restart already shows the final state.
            if let Some(status) = files.as_ref().and_then(RunFiles::read_exit) {
                let (code, signal) = super::status::split_status(status);
                let status = if code == Some(0) {
                    ProcessStatus::Completed
                } else {
                    ProcessStatus::Failed
                };
                let finished = log
                    .as_ref()
                    .and_then(|l| l.metadata().and_then(|m| m.modified()).ok())
                    .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                    .map(|d| d.as_millis() as i64)
                    .unwrap_or_else(now_ms);
                let _ = self.store.finish_process(
                    &row.id,
                    status,
                    code,
                    signal.as_deref(),
                    false,
                    finished,
                );
                row.status = status;
                row.exit_code = code;
                row.signal = signal;
                row.finished_at_ms = Some(finished);
            }
        }
        let running = row.status == ProcessStatus::Running;
        let (proc, control) = new_proc(info, output, row.background, running && !row.pty);
        proc.lock().log = log.as_ref().and_then(|l| l.try_clone().ok()).map(Arc::new);
        if !running {
            let mut st = proc.lock();
            st.output.finish();
            st.exit = Some(ExitInfo {
                code: row.exit_code,
                signal: row.signal.clone(),
                timed_out: row.timed_out,
                finished_at_ms: row.finished_at_ms.unwrap_or(row.started_at_ms),
            });
            st.shelve();
        } else {
            // stdin cannot be re-attached: its writer closed with the moat that started it.
            proc.lock().stdin_open = false;
            match (files, log) {
                (Some(files), Some(log)) => self.supervise(
                    &proc,
                    files,
                    log,
                    None,
                    None,
                    (ExitWatch::Recovered, LimitWatch::default()),
                    control,
                ),
                _ => self.give_up(&proc, unsafe_files.as_deref().unwrap_or("no log")),
            }
        }
        let mut procs = self.procs.lock().unwrap();
        // Another caller may have attached it meanwhile; keep the first.
        Some(procs.entry(row.id).or_insert(proc).clone())
    }

    /// A running process whose run files cannot be opened safely (replaced, re-linked, of
    /// another owner): moat cannot follow it, so it is recorded as failed, saying why, and stays
    /// listed instead of vanishing as "not found".
    fn give_up(&self, proc: &Arc<Proc>, why: &str) {
        let finished = now_ms();
        let _ = self.store.finish_process(
            &proc.info.id,
            ProcessStatus::Failed,
            None,
            None,
            false,
            finished,
        );
        let mut st = proc.lock();
        st.output.note(&format!(
            "\n[moat] stopped following this process: its run files were tampered with or cannot be opened safely ({why}).\n"
        ));
        st.output.finish();
        st.exit = Some(ExitInfo {
            code: None,
            signal: None,
            timed_out: false,
            finished_at_ms: finished,
        });
    }

    /// How many ended processes of `session` this moat holds (each with its log open).
    fn held_finished(&self, session: &str) -> usize {
        self.procs
            .lock()
            .unwrap()
            .values()
            .filter(|p| p.info.session == session && p.exit().is_some())
            .count()
    }

    /// Hands a process to its owner task.
    #[expect(
        clippy::too_many_arguments,
        reason = "each argument is one resource the task takes over"
    )]
    fn supervise(
        &self,
        proc: &Arc<Proc>,
        files: RunFiles,
        log: std::fs::File,
        stdin: Option<tokio::net::unix::pipe::Sender>,
        tty: Option<crate::runtime::ExecTty>,
        (watch, limits): (ExitWatch, LimitWatch),
        control: mpsc::UnboundedReceiver<Control>,
    ) {
        let supervisor = Supervisor {
            proc: proc.clone(),
            files,
            log,
            stdin,
            tty,
            watch,
            executors: self.executors.clone(),
            store: self.store.clone(),
            events: self.events.clone(),
            control,
            spill_max: self.limits.spill_max,
            limits,
        };
        tokio::spawn(supervisor.run());
    }

    /// Drops finished processes past their TTL, and the oldest beyond the per-session count.
    pub fn sweep(&self, session: &str) {
        let now = now_ms();
        let rows = self.store.processes(session).unwrap_or_default();
        let mut finished = 0usize;
        for row in rows {
            if row.status == ProcessStatus::Running {
                continue;
            }
            finished += 1;
            let ended = row.finished_at_ms.unwrap_or(row.started_at_ms);
            if now - ended > self.limits.ttl_ms || finished > self.limits.max_finished {
                self.procs.lock().unwrap().remove(&row.id);
                remove_files(&row);
                let _ = self.store.delete_process(&row.id);
            }
        }
    }
}

/// Deletes a process's files, if its run directory can be opened safely.
fn remove_files(row: &ProcessRow) {
    if let Ok(files) = RunFiles::open(&row.run_dir, &row.id, None) {
        files.remove();
    }
}

fn new_proc(
    info: ProcInfo,
    output: OutputState,
    background: bool,
    stdin_open: bool,
) -> (Arc<Proc>, mpsc::UnboundedReceiver<Control>) {
    let (control, rx) = mpsc::unbounded_channel();
    let proc = Arc::new(Proc {
        info,
        state: Mutex::new(ProcState {
            output,
            exit: None,
            background,
            empty_polls: 0,
            term: crate::terminal_keys::TermModes::new(),
            stdin_open,
            notify_exit: true,
            log: None,
            stream_hold: None,
            kill_requested: false,
            limit: None,
            leftovers_ended: false,
        }),
        changed: watch::channel(0).0,
        control,
        waiters: AtomicUsize::new(0),
    });
    (proc, rx)
}

/// What `spec` asks to start as process `id`, before its place wraps it.
fn launch_of(spec: &StartSpec, id: &str) -> Launch {
    Launch {
        id: id.to_string(),
        run_dir: spec.run_dir.display().to_string(),
        command: spec.command.clone(),
        cwd: spec.cwd.clone(),
        env: spec.env.clone(),
        pty: spec.pty,
        shell: spec.shell,
        split_stderr: spec.split_stderr,
        sticky: spec.sticky,
        owner: spec.owner,
        user: spec.user.clone(),
    }
}

/// Process `id`'s run files, as its place's wrapper needs them; none are left behind when one
/// cannot be made.
fn run_files(
    spec: &StartSpec,
    id: &str,
    wrap: &Wrapping,
) -> Result<(RunFiles, Created), ProcessError> {
    let file_err = |source| ProcessError::Files {
        dir: spec.run_dir.clone(),
        source,
    };
    let files = RunFiles::open(&spec.run_dir, id, wrap.owner).map_err(file_err)?;
    let created = files.create(!spec.pty).map_err(file_err)?;
    let extra = (if wrap.split_stderr {
        files.create_err().map(drop)
    } else {
        Ok(())
    })
    .and_then(|()| {
        if wrap.sticky {
            files.create_state()
        } else {
            Ok(())
        }
    });
    if let Err(e) = extra {
        files.remove();
        return Err(file_err(e));
    }
    Ok((files, created))
}

fn row_for(info: &ProcInfo, run_dir: &std::path::Path, background: bool) -> ProcessRow {
    ProcessRow {
        id: info.id.clone(),
        session: info.session.clone(),
        container: info.place.stored().to_string(),
        run_dir: run_dir.display().to_string(),
        command: info.command.clone(),
        cwd: info.cwd.clone(),
        pty: info.pty,
        background,
        started_at_ms: info.started_at_ms,
        timeout_secs: info.timeout_secs,
        status: ProcessStatus::Running,
        exit_code: None,
        signal: None,
        timed_out: false,
        finished_at_ms: None,
        read_offset: 0,
    }
}

/// Feeds a log's retained bytes into `output`; bytes before `drained` were already polled.
///
/// `recorded` is where the record starts as the moat that freed the older bytes recorded it;
/// replay starts there (line numbers stay those of the whole output) when the log still holds
/// it.
fn replay(log: &std::fs::File, output: &mut OutputState, drained: u64, recorded: Option<LineMark>) {
    use std::os::fd::AsFd;
    use std::os::unix::fs::FileExt;
    let start = nix::unistd::lseek(log.as_fd(), 0, nix::unistd::Whence::SeekData)
        .map(|o| o as u64)
        .unwrap_or(0);
    let start = match recorded {
        Some(mark) if start > 0 && mark.offset >= start => {
            output.start_at(mark);
            mark.offset
        }
        _ if start > 0 => {
            // Spill freed the beginning and no start was recorded: how many lines it held is
            // unknown, and `process log` says so.
            output.start_after_freed(start);
            start
        }
        _ => start,
    };
    output.bytes_read = start;
    let mut buf = vec![0u8; 1 << 20];
    while let Some(offset) = super::holes::next_data(log, output.bytes_read) {
        output.skip_hole_to(offset);
        let n = match log.read_at(&mut buf, offset) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let split = drained.saturating_sub(offset).min(n as u64) as usize;
        if split > 0 {
            output.ingest(&buf[..split], false);
        }
        if split < n {
            output.ingest(&buf[split..n], true);
        }
    }
    output.drained_at = drained.max(start);
}
