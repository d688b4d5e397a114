//! [`HelperExecutor`]: the [`Executor`] that starts commands in session containers through
//! their helper, and anything the helper cannot take through the engine's own exec. Container
//! lifecycle is the engine's alone: this type never sees it.
//!
//! Semantics stay the engine path's: the command given is the same wrapper argv, with the
//! same env laid over the container's, in the same workdir, as the container's user; the
//! wrapper still writes the run files, which stay the source of truth (docs/helper.md). What
//! changes is only who forks it, and how moat learns that it ended: the helper's `Exited`
//! instead of the exec stream closing.
//!
//! When the helper goes away with commands in flight, their `finished` channel is dropped
//! unsent: the registry then watches their run files as after a restart of moat. The next
//! request restarts the helper; if that fails, the container's commands go through the engine
//! for [`RETRY_AFTER`], and each switch is logged once.

use std::collections::HashMap;
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use tokio::io::AsyncReadExt;
use tokio::sync::{mpsc, oneshot};

use super::conn::{Conn, Event};
use super::frame::{Msg, Spawn, MAX_CHUNK};
use super::{binary, socket, target, HelperError};
use crate::config::Transport;
use crate::home::Home;
use crate::runtime::{ExecSpec, ExecStarted, ExecTty, Executor, LeftBehind, Runtime, RuntimeError};
use crate::wrapper::RUN_DIR;

/// How long a container whose helper could not be started uses the engine before moat tries
/// the helper again.
const RETRY_AFTER: Duration = Duration::from_secs(30);
/// How long a started helper has to show its pid and open its socket.
const START_WAIT: Duration = Duration::from_secs(5);
/// How long the helper has to say a command started.
const SPAWN_WAIT: Duration = Duration::from_secs(10);
/// How long the helper has to answer a look; past it moat runs its sweep, which has a
/// deadline of its own (docs/helper.md, "What a command left").
const LOOK_WAIT: Duration = Duration::from_secs(2);
/// The most a short helper command may print (the engine path's bound, `docker::exec`).
const MAX_CAPTURE_BYTES: usize = 1 << 20;
/// Exit codes kept for commands whose code nobody asked for yet; past it the oldest finished
/// ones are dropped (their wrapper recorded the exit in the run files anyway).
const MAX_EXITS: usize = 4096;
/// Prefix of the exec ids this transport hands out (engine ids are hex).
const ID_PREFIX: &str = "helper-";

/// One container's helper state.
#[derive(Default)]
struct Slot {
    conn: Option<Arc<Conn>>,
    /// While set, the engine takes this container's commands.
    retry_at: Option<Instant>,
    /// The transport the last command took (`moat doctor`).
    last: Option<Transport>,
}

/// A command started through a helper.
struct HelperExec {
    conn: Weak<Conn>,
    request: u32,
    /// Its status once the helper reported it.
    exit: Option<i64>,
}

pub struct HelperExecutor {
    inner: Arc<dyn Runtime>,
    home: Home,
    /// The sandbox user (uid, gid): the helper runs as it, and its socket must be its.
    owner: (u32, u32),
    slots: Mutex<HashMap<String, Arc<tokio::sync::Mutex<Slot>>>>,
    last: Mutex<HashMap<String, Transport>>,
    execs: Arc<Mutex<HashMap<String, HelperExec>>>,
    seq: AtomicU64,
    /// Whether each container runs under gVisor, as the engine said once. Under gVisor a
    /// terminal goes through the engine, since a terminal the helper opens there does not
    /// send Ctrl-C's SIGINT to the command's foreground group (seen with Debian's runsc,
    /// 2022-12-19), and the helper starts once per container start (docs/helper.md, "Trust").
    runtimes: Mutex<HashMap<String, bool>>,
}

/// Where the helper lives inside the container.
fn helper_path() -> String {
    format!("{RUN_DIR}/{}", binary::FILE_NAME)
}

fn socket_path() -> String {
    format!("{RUN_DIR}/{}/{}", socket::DIR, socket::SOCKET)
}

/// Whether a helper answers for `container` now, without starting one (`moat doctor`).
pub async fn probe(home: &Home, container: &str, owner: (u32, u32)) -> bool {
    let Some(slug) = target::slug_of(container) else {
        return false;
    };
    let Ok(dir) = crate::descriptors::open_dir(&home.run_dir(slug)) else {
        return false;
    };
    let Some(listener) = socket::read_pid(&dir) else {
        return false;
    };
    match socket::connect(&dir, owner.0, listener).await {
        Ok(stream) => Conn::open(stream).await.is_ok(),
        Err(_) => false,
    }
}

impl HelperExecutor {
    pub fn new(inner: Arc<dyn Runtime>, home: Home, owner: (u32, u32)) -> Self {
        Self {
            inner,
            home,
            owner,
            slots: Mutex::default(),
            last: Mutex::default(),
            execs: Arc::default(),
            seq: AtomicU64::new(1),
            runtimes: Mutex::default(),
        }
    }

    fn note(&self, container: &str, transport: Transport) {
        self.last
            .lock()
            .unwrap()
            .insert(container.to_string(), transport);
    }

    /// A live connection to `container`'s helper, starting the helper when there is none;
    /// `None` when the engine should take the command.
    async fn conn_for(&self, container: &str) -> Option<Arc<Conn>> {
        let slug = target::slug_of(container)?;
        let slot = self
            .slots
            .lock()
            .unwrap()
            .entry(container.to_string())
            .or_default()
            .clone();
        let mut slot = slot.lock().await;
        if let Some(conn) = &slot.conn {
            if conn.is_alive() {
                return Some(conn.clone());
            }
            tracing::warn!(%container, "the helper went away; restarting it");
            slot.conn = None;
        }
        if slot.retry_at.is_some_and(|at| Instant::now() < at) {
            // Under gVisor the one helper start of a container instance must come before any
            // command of it: a retry time left from an earlier instance (the container stopped
            // and started again since) does not hold it back (docs/helper.md, "Trust").
            if !self.is_gvisor(container).await || self.started_here(slug) {
                return None;
            }
        }
        match self.attach(container, slug).await {
            Ok(conn) => {
                if slot.retry_at.take().is_some() || slot.last == Some(Transport::Exec) {
                    tracing::info!(%container, "commands go through the helper again");
                }
                slot.last = Some(Transport::Helper);
                slot.conn = Some(conn.clone());
                Some(conn)
            }
            Err(e) => {
                tracing::warn!(
                    %container,
                    error = %crate::error_chain::error_chain(&e),
                    "failed to use the helper; commands go through docker exec for now"
                );
                slot.last = Some(Transport::Exec);
                slot.retry_at = Some(Instant::now() + RETRY_AFTER);
                None
            }
        }
    }

    /// Whether `container` runs under gVisor, asked of the engine once per container.
    async fn is_gvisor(&self, container: &str) -> bool {
        if let Some(known) = self.runtimes.lock().unwrap().get(container) {
            return *known;
        }
        let gvisor = matches!(
            self.inner.inspect_container(container).await,
            Ok(Some(c)) if c.runtime.as_deref() == Some("runsc")
        );
        self.runtimes
            .lock()
            .unwrap()
            .insert(container.to_string(), gvisor);
        gvisor
    }

    /// Whether moat made the one helper start of this container instance (its mark in the
    /// run directory; cleared when the container starts again).
    fn started_here(&self, slug: &str) -> bool {
        crate::descriptors::open_dir(&self.home.run_dir(slug)).is_ok_and(|dir| socket::tried(&dir))
    }

    /// The live connection to `container`'s helper, if there is one; never starts a helper.
    async fn live_conn(&self, container: &str) -> Option<Arc<Conn>> {
        let slot = self.slots.lock().unwrap().get(container).cloned()?;
        let slot = slot.lock().await;
        slot.conn.clone().filter(|c| c.is_alive())
    }

    /// Connects to the running helper moat recorded, or starts a new one.
    async fn attach(&self, container: &str, slug: &str) -> Result<Arc<Conn>, HelperError> {
        let run_dir = self.home.run_dir(slug);
        let dir = crate::descriptors::open_dir(&run_dir)
            .map_err(HelperError::io("open the run directory"))?;
        if let Some(listener) = socket::read_pid(&dir) {
            if let Ok(stream) = socket::connect(&dir, self.owner.0, listener).await {
                if let Ok(conn) = Conn::open(stream).await {
                    return Ok(conn);
                }
            }
        }
        // Nothing that answers is trusted from here on, whatever happens next.
        socket::forget_pid(&dir);
        let info = self
            .inner
            .inspect_container(container)
            .await
            .map_err(|e| HelperError::Start(crate::error_chain::error_chain(&e)))?;
        let gvisor_sandbox = info
            .as_ref()
            .filter(|c| c.runtime.as_deref() == Some("runsc"))
            .map(|c| c.pid);
        self.runtimes
            .lock()
            .unwrap()
            .insert(container.to_string(), gvisor_sandbox.is_some());
        if gvisor_sandbox.is_some() {
            // Under gVisor moat cannot tell its helper from another process of the sandbox
            // by pid (the gofer listens for all of them), so it starts a helper only once per
            // container start, before any command ran through it, and never frees the
            // socket's path: a process of the sandbox could listen there first. After that
            // the engine runs this container's commands until it starts again
            // (docs/helper.md, "Trust").
            if socket::socket_left(&dir, self.owner.0) || !socket::start_once(&dir)? {
                return Err(HelperError::Start(
                    "the container's helper is gone (under gVisor moat starts one once per container start, docs/helper.md, \"Trust\"): commands go through the engine until the container starts again".into(),
                ));
            }
        }
        binary::install(&dir)?;
        socket::prepare_dir(&dir, self.owner.0, self.owner.1)?;
        let exec_id = self
            .inner
            .exec_detached(container, vec![helper_path(), socket_path()])
            .await
            .map_err(|e| HelperError::Start(crate::error_chain::error_chain(&e)))?;
        let deadline = Instant::now() + START_WAIT;
        let pid = loop {
            match self.inner.exec_pid(&exec_id).await {
                Ok(Some(pid)) => break pid,
                Ok(None) if Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(5)).await
                }
                Ok(None) => {
                    return Err(HelperError::Start(
                        "it ended at once, or the engine reports no pid for it".into(),
                    ))
                }
                Err(e) => return Err(HelperError::Start(crate::error_chain::error_chain(&e))),
            }
        };
        let pid = match gvisor_sandbox {
            Some(sandbox) => Self::gofer_of(sandbox).await?,
            None => pid,
        };
        let listener = socket::Listener::of(pid).ok_or_else(|| {
            HelperError::Start("it ended at once, or the engine reports no pid for it".into())
        })?;
        socket::write_pid(&dir, listener)?;
        let started = match self.wait_for_socket(&dir, listener, deadline).await {
            Ok(stream) => Conn::open(stream).await,
            Err(e) => Err(e),
        };
        if started.is_err() {
            socket::forget_pid(&dir);
        }
        started
    }

    /// The container's gofer beside gVisor sandbox process `sandbox`: the listener the kernel
    /// records for every socket a process of that sandbox binds (`gvisor`, docs/helper.md,
    /// "Trust").
    async fn gofer_of(sandbox: u32) -> Result<u32, HelperError> {
        tokio::task::spawn_blocking(move || super::gvisor::find_gofer(sandbox))
            .await
            .ok()
            .flatten()
            .ok_or_else(|| {
                HelperError::Start(format!(
                    "no single gofer beside the gVisor sandbox process (pid {sandbox})"
                ))
            })
    }

    async fn wait_for_socket(
        &self,
        dir: &OwnedFd,
        listener: socket::Listener,
        deadline: Instant,
    ) -> Result<tokio::net::UnixStream, HelperError> {
        loop {
            match socket::connect(dir, self.owner.0, listener).await {
                Ok(stream) => return Ok(stream),
                Err(e) if Instant::now() >= deadline => return Err(e),
                Err(_) => tokio::time::sleep(Duration::from_millis(2)).await,
            }
        }
    }

    /// Sends `spawn` and waits for the helper to start it: `Ok(None)` when the request never
    /// left moat or the helper said it started nothing (so the engine may take it), `Err`
    /// when what happened to it is unknown.
    async fn spawn(
        &self,
        container: &str,
        conn: &Arc<Conn>,
        spawn: Spawn,
    ) -> Result<Option<(u32, mpsc::Receiver<Event>)>, RuntimeError> {
        let action = || format!("start a command in {container} through its helper");
        let (id, mut rx) = match conn.request(|id| Msg::Spawn(Spawn { id, ..spawn })).await {
            Ok(r) => r,
            Err(_) => return Ok(None),
        };
        match tokio::time::timeout(SPAWN_WAIT, rx.recv()).await {
            Ok(Some(Event::Started)) => Ok(Some((id, rx))),
            // The helper started nothing, so the engine may try: at the pids limit the helper
            // cannot fork, while the engine still starts an exec (it moves the new process
            // into the cgroup, which the limit does not refuse), and that is how a kill still
            // gets through a fork bomb (docs/helper.md, "Fallback").
            Ok(Some(Event::Failed(message))) => {
                tracing::debug!(%container, %message, "the helper could not start a command; the engine takes it");
                Ok(None)
            }
            Ok(Some(_)) => {
                conn.close();
                Err(RuntimeError::Other {
                    action: action(),
                    message: "the helper answered out of order".into(),
                })
            }
            Ok(None) => Err(RuntimeError::Other {
                action: action(),
                message: "the helper went away while starting it".into(),
            }),
            Err(_) => {
                conn.close();
                Err(RuntimeError::Other {
                    action: action(),
                    message: "the helper did not answer in time".into(),
                })
            }
        }
    }

    fn remember(&self, exec_id: &str, conn: &Arc<Conn>, request: u32) {
        let mut execs = self.execs.lock().unwrap();
        if execs.len() >= MAX_EXITS {
            execs.retain(|_, e| e.exit.is_none());
        }
        execs.insert(
            exec_id.to_string(),
            HelperExec {
                conn: Arc::downgrade(conn),
                request,
                exit: None,
            },
        );
    }
}

/// Carries a command's answers: terminal output to `tty`, the exit to `finished` (dropped
/// unsent when the helper goes away, see the module docs).
async fn follow(
    mut rx: mpsc::Receiver<Event>,
    tty: Option<mpsc::Sender<std::io::Result<bytes::Bytes>>>,
    finished: oneshot::Sender<()>,
    exec_id: String,
    execs: Arc<Mutex<HashMap<String, HelperExec>>>,
) {
    let mut tty = tty;
    while let Some(event) = rx.recv().await {
        match event {
            Event::Output(data) => {
                if let Some(tx) = &tty {
                    // Once nobody listens, keep reading anyway: the exit follows.
                    if tx.send(Ok(data.into())).await.is_err() {
                        tty = None;
                    }
                }
            }
            Event::Exited(status) => {
                if let Some(e) = execs.lock().unwrap().get_mut(&exec_id) {
                    e.exit = Some(i64::from(status));
                }
                drop(tty);
                let _ = finished.send(());
                return;
            }
            Event::Started | Event::Failed(_) | Event::Seen { .. } => break,
        }
    }
}

#[async_trait]
impl Executor for HelperExecutor {
    async fn exec(&self, container: &str, spec: ExecSpec) -> Result<ExecStarted, RuntimeError> {
        // The helper is the container's user: another user's command takes the engine; so
        // does a terminal under gVisor (`gvisor` above).
        // Under gVisor the container's helper starts before any command of it, whichever
        // path the command then takes (docs/helper.md, "Trust").
        let gvisor = self.is_gvisor(container).await;
        let conn = if spec.user.is_none() || gvisor {
            self.conn_for(container).await
        } else {
            None
        };
        let conn = conn.filter(|_| spec.user.is_none() && !(spec.tty && gvisor));
        let Some(conn) = conn else {
            self.note(container, Transport::Exec);
            return self.inner.exec(container, spec).await;
        };
        let (rows, cols) = spec.console_size.unwrap_or((0, 0));
        // The helper does the wrapper's work itself: one program start less per command.
        let (argv, wrap, split) = match &spec.wrapped {
            Some(w) if !spec.tty => (w.login.clone(), w.process_id.clone(), w.split_stderr),
            _ => (spec.argv.clone(), String::new(), false),
        };
        let request = Spawn {
            id: 0,
            tty: spec.tty,
            capture: false,
            rows,
            cols,
            workdir: spec.workdir.clone().unwrap_or_default(),
            argv,
            env: spec.env.clone(),
            wrap,
            split,
        };
        let Some((request, rx)) = self.spawn(container, &conn, request).await? else {
            self.note(container, Transport::Exec);
            return self.inner.exec(container, spec).await;
        };
        self.note(container, Transport::Helper);
        let exec_id = format!("{ID_PREFIX}{}", self.seq.fetch_add(1, Ordering::Relaxed));
        self.remember(&exec_id, &conn, request);
        let (done_tx, done_rx) = oneshot::channel();
        let mut tty = None;
        let mut out_tx = None;
        if spec.tty {
            let (tx, out_rx) = mpsc::channel(64);
            out_tx = Some(tx);
            let (ours, theirs) = tokio::io::duplex(MAX_CHUNK);
            tokio::spawn(forward_input(theirs, Arc::downgrade(&conn), request));
            tty = Some(ExecTty {
                output: Box::pin(tokio_stream::wrappers::ReceiverStream::new(out_rx)),
                input: Box::pin(ours),
            });
        }
        tokio::spawn(follow(
            rx,
            out_tx,
            done_tx,
            exec_id.clone(),
            self.execs.clone(),
        ));
        Ok(ExecStarted {
            id: exec_id,
            finished: done_rx,
            tty,
        })
    }

    async fn exec_exit_code(&self, exec_id: &str) -> Result<Option<i64>, RuntimeError> {
        if !exec_id.starts_with(ID_PREFIX) {
            return self.inner.exec_exit_code(exec_id).await;
        }
        let mut execs = self.execs.lock().unwrap();
        let code = execs.get(exec_id).and_then(|e| e.exit);
        if code.is_some() {
            execs.remove(exec_id);
        }
        Ok(code)
    }

    async fn resize_exec(&self, exec_id: &str, rows: u16, cols: u16) -> Result<(), RuntimeError> {
        if !exec_id.starts_with(ID_PREFIX) {
            return self.inner.resize_exec(exec_id, rows, cols).await;
        }
        let target = {
            let execs = self.execs.lock().unwrap();
            execs
                .get(exec_id)
                .and_then(|e| Some((e.conn.upgrade()?, e.request)))
        };
        if let Some((conn, id)) = target {
            let _ = conn.send(&Msg::Resize { id, rows, cols }).await;
        }
        Ok(())
    }

    async fn exec_capture_within(
        &self,
        container: &str,
        argv: Vec<String>,
        user: Option<String>,
        within: std::time::Duration,
    ) -> Result<(i64, Vec<u8>), RuntimeError> {
        let conn = match user {
            None => self.conn_for(container).await,
            Some(_) => None,
        };
        let Some(conn) = conn else {
            return self
                .inner
                .exec_capture_within(container, argv, user, within)
                .await;
        };
        let request = Spawn {
            argv: argv.clone(),
            capture: true,
            ..Default::default()
        };
        let action = || format!("run a helper command in {container}");
        let Some((id, mut rx)) = self.spawn(container, &conn, request).await? else {
            return self
                .inner
                .exec_capture_within(container, argv, user, within)
                .await;
        };
        let collect = async {
            let mut out = Vec::new();
            while let Some(event) = rx.recv().await {
                match event {
                    Event::Output(data) => {
                        if out.len() + data.len() > MAX_CAPTURE_BYTES {
                            return Some(Err(RuntimeError::Other {
                                action: action(),
                                message: format!("its output passed {MAX_CAPTURE_BYTES} bytes"),
                            }));
                        }
                        out.extend_from_slice(&data);
                    }
                    Event::Exited(status) => return Some(Ok((i64::from(status), out))),
                    Event::Started | Event::Failed(_) | Event::Seen { .. } => break,
                }
            }
            None
        };
        match tokio::time::timeout(within, collect).await {
            Ok(Some(done)) => done,
            // The helper went away mid-command. These commands are checks and signals, safe
            // to run again: the engine takes this one.
            Ok(None) => {
                self.inner
                    .exec_capture_within(container, argv, user, within)
                    .await
            }
            // Stopped from inside the sandbox, or waiting on something that never comes: the
            // command leads its own process group (helper/main.rs), which SIGKILL ends even
            // while stopped (docs/helper.md, "Deadlines").
            Err(_) => {
                let _ = conn
                    .send(&Msg::Signal {
                        id,
                        signal: libc::SIGKILL,
                    })
                    .await;
                Err(RuntimeError::Other {
                    action: action(),
                    message: format!(
                        "it did not finish within {} s; it was ended",
                        within.as_secs()
                    ),
                })
            }
        }
    }

    async fn exec_pid(&self, exec_id: &str) -> Result<Option<u32>, RuntimeError> {
        self.inner.exec_pid(exec_id).await
    }

    /// The helper's look: one request, no program started in the container. Only over a
    /// connection that is already there: a look never starts a helper, the sweep it spares is
    /// as good. Its counts are the sandbox's word, like the sweep's output (docs/helper.md,
    /// "Trust").
    async fn look_inside(&self, container: &str, pgid: u32, process: &str) -> Option<LeftBehind> {
        let conn = self.live_conn(container).await?;
        let look = |id| Msg::Look {
            id,
            pgid,
            process: process.to_string(),
        };
        let (id, mut rx) = conn.request(look).await.ok()?;
        match tokio::time::timeout(LOOK_WAIT, rx.recv()).await {
            Ok(Some(Event::Seen { group, marked })) => Some(LeftBehind {
                group: group.map(|n| n as usize),
                marked: marked.map(|n| n as usize),
            }),
            Ok(Some(Event::Failed(message))) => {
                tracing::debug!(%container, %message, "the helper could not look; sweeping instead");
                None
            }
            Ok(Some(_)) => {
                conn.close();
                None
            }
            Ok(None) => None,
            Err(_) => {
                conn.forget(id);
                None
            }
        }
    }

    fn transport_of(&self, container: &str) -> &'static str {
        self.last
            .lock()
            .unwrap()
            .get(container)
            .copied()
            .unwrap_or(Transport::Helper)
            .name()
    }

    fn release(&self, container: &str) {
        // A new container of the same name gets a new helper, and may have another runtime.
        self.runtimes.lock().unwrap().remove(container);
        if let Some(slot) = self.slots.lock().unwrap().remove(container) {
            if let Ok(slot) = slot.try_lock() {
                if let Some(c) = &slot.conn {
                    c.close();
                }
            }
        }
    }
}

/// Sends what is written to a PTY command's terminal as `Input` frames until the writer closes
/// or the helper goes away.
async fn forward_input(mut from: tokio::io::DuplexStream, conn: Weak<Conn>, id: u32) {
    let mut buf = vec![0u8; MAX_CHUNK];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        let Some(conn) = conn.upgrade() else { return };
        let msg = Msg::Input {
            id,
            data: buf[..n].to_vec(),
        };
        if conn.send(&msg).await.is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::fake::{Call, FakeRuntime};

    fn spec() -> ExecSpec {
        ExecSpec {
            argv: vec!["true".into()],
            ..Default::default()
        }
    }

    /// Whatever the helper cannot take goes to the engine, and says so: a name that is not a
    /// session container's, another user, an engine that cannot start the helper.
    #[tokio::test]
    async fn what_the_helper_cannot_take_goes_to_the_engine() {
        let dir = tempfile::tempdir().unwrap();
        let home = Home::at(dir.path());
        std::fs::create_dir_all(home.run_dir("main-1a2b3c4d")).unwrap();
        let fake = FakeRuntime::new();
        let rt = HelperExecutor::new(Arc::new(fake.clone()), home, (1000, 1000));
        rt.exec("0123abcd", spec()).await.unwrap();
        let other_user = ExecSpec {
            user: Some("0".into()),
            ..spec()
        };
        rt.exec("moat-main-1a2b3c4d", other_user).await.unwrap();
        // The fake engine starts no detached helper: the container falls back.
        rt.exec("moat-main-1a2b3c4d", spec()).await.unwrap();
        rt.exec_capture("moat-main-1a2b3c4d", vec!["true".into()], None)
            .await
            .unwrap();
        assert_eq!(rt.transport_of("moat-main-1a2b3c4d"), "exec");
        let execs = fake
            .calls()
            .iter()
            .filter(|c| matches!(c, Call::Exec { .. } | Call::Capture { .. }))
            .count();
        assert_eq!(execs, 4, "{:?}", fake.calls());
        // The helper binary was put in place before the engine refused to start it.
        assert!(dir.path().join("run/main-1a2b3c4d/moat-helper").is_file());
        // Helper exec ids are told apart from the engine's.
        assert_eq!(rt.exec_exit_code("helper-999").await.unwrap(), None);
    }
}
