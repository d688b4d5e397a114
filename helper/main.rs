//! `moat-helper`: starts commands inside a session container on moat's behalf, answering on a
//! unix socket in the session's run directory (docs/helper.md).
//!
//! Built by moat's build script with `rustc` alone: `std` and the C library, linked statically,
//! so it runs in any image (Debian, a busybox from scratch) with nothing installed. It runs as
//! the sandbox user and can do nothing that user cannot do; moat treats every byte it sends as
//! untrusted.
//!
//! One thread reads each connection's frames; each command gets a waiter thread (and a reader
//! thread for its terminal or captured output), so several commands run at once and a command
//! that never ends holds nothing but its own threads.

#[path = "../src/runtime/helper/frame.rs"]
#[allow(dead_code)]
mod frame;
mod look;
mod wrap;

use std::collections::HashMap;
use std::ffi::c_int;
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use frame::{Msg, Spawn};

extern "C" {
    fn grantpt(fd: c_int) -> c_int;
    fn unlockpt(fd: c_int) -> c_int;
    fn ptsname_r(fd: c_int, buf: *mut u8, len: usize) -> c_int;
    fn ioctl(fd: c_int, request: u64, ...) -> c_int;
    fn setsid() -> c_int;
    fn kill(pid: c_int, sig: c_int) -> c_int;
}

/// `ioctl` requests (the same numbers on every Linux architecture moat builds for).
const TIOCSCTTY: u64 = 0x540E;
const TIOCSWINSZ: u64 = 0x5414;
/// `open` flag: never make the opened terminal the caller's controlling terminal.
const O_NOCTTY: i32 = 0o400;

/// How long output still in flight is awaited after a command ended: a background child that
/// keeps the terminal or the capture pipe open must not hold the exit back for ever (the
/// engine gives an exec's stream the same grace).
const DRAIN: Duration = Duration::from_secs(2);

#[repr(C)]
struct Winsize {
    rows: u16,
    cols: u16,
    xpixel: u16,
    ypixel: u16,
}

/// The write half of a connection: whole frames, one writer at a time.
#[derive(Clone)]
struct Out(Arc<Mutex<UnixStream>>);

impl Out {
    /// Sends a frame; a connection moat closed is ignored (its commands keep running).
    fn send(&self, msg: &Msg) {
        let bytes = frame::encode(msg);
        if let Ok(mut s) = self.0.lock() {
            let _ = s.write_all(&bytes);
        }
    }
}

/// What the connection keeps of a running command to serve its input, resize and signal.
struct Running {
    pid: u32,
    /// The terminal's master side (PTY commands).
    master: Option<Arc<File>>,
    /// Feeds the terminal's writer thread, so a command that does not read its input never
    /// stalls the connection.
    input: Option<mpsc::Sender<Vec<u8>>>,
}

type Table = Arc<Mutex<HashMap<u32, Running>>>;

fn main() {
    let Some(path) = std::env::args_os().nth(1) else {
        eprintln!("usage: moat-helper SOCKET");
        std::process::exit(2);
    };
    wrap::note_args();
    // A socket left by an earlier helper in this directory (the sandbox user's) is replaced.
    let _ = std::fs::remove_file(&path);
    let listener = match UnixListener::bind(&path) {
        Ok(l) => l,
        Err(e) => {
            eprintln!(
                "moat-helper: failed to listen on {}: {e}",
                path.to_string_lossy()
            );
            std::process::exit(1);
        }
    };
    // The socket is `<run dir>/helper/<socket>`: the run files are two levels up.
    let run_dir: Arc<PathBuf> = Arc::new(
        Path::new(&path)
            .parent()
            .and_then(Path::parent)
            .unwrap_or(Path::new("/run/moat"))
            .to_path_buf(),
    );
    for conn in listener.incoming() {
        let Ok(conn) = conn else { continue };
        let run_dir = Arc::clone(&run_dir);
        // No thread to be had (the pids limit is full): the connection is closed.
        let _ = thread(move || serve(conn, &run_dir));
    }
}

/// Reads whole frames; `None` at the end of the stream or on a frame that breaks the protocol.
fn read_frame(conn: &mut UnixStream, buf: &mut Vec<u8>) -> Option<Msg> {
    let mut head = [0u8; 4];
    conn.read_exact(&mut head).ok()?;
    let len = frame::frame_len(&head).ok()??;
    buf.resize(len, 0);
    conn.read_exact(buf).ok()?;
    frame::decode_body(buf).ok()
}

fn serve(mut conn: UnixStream, run_dir: &Path) {
    let Ok(writer) = conn.try_clone() else { return };
    let out = Out(Arc::new(Mutex::new(writer)));
    let mut buf = Vec::new();
    // A client that never greets does not keep its thread: moat greets at once.
    let _ = conn.set_read_timeout(Some(HELLO_WAIT));
    let hello = read_frame(&mut conn, &mut buf);
    let _ = conn.set_read_timeout(None);
    match hello {
        Some(Msg::Hello { version }) if version == frame::VERSION => {
            out.send(&Msg::Hello {
                version: frame::VERSION,
            });
        }
        _ => {
            out.send(&Msg::Failed {
                id: 0,
                message: format!("expected a hello for protocol version {}", frame::VERSION),
            });
            return;
        }
    }
    let table: Table = Arc::default();
    while let Some(msg) = read_frame(&mut conn, &mut buf) {
        match msg {
            Msg::Spawn(spawn) => {
                let id = spawn.id;
                if table.lock().unwrap().contains_key(&id) {
                    out.send(&Msg::Failed {
                        id,
                        message: "request id already in use".into(),
                    });
                    continue;
                }
                let started = if spawn.wrap.is_empty() {
                    start(spawn, &out, &table)
                } else {
                    start_wrapped(spawn, &out, &table, run_dir)
                };
                if let Err(message) = started {
                    out.send(&Msg::Failed { id, message });
                }
            }
            Msg::Input { id, data } => {
                if let Some(tx) = table.lock().unwrap().get(&id).and_then(|r| r.input.clone()) {
                    let _ = tx.send(data);
                }
            }
            Msg::Resize { id, rows, cols } => {
                if let Some(m) = table
                    .lock()
                    .unwrap()
                    .get(&id)
                    .and_then(|r| r.master.clone())
                {
                    set_size(&m, rows, cols);
                }
            }
            Msg::Signal { id, signal } => {
                if let Some(r) = table.lock().unwrap().get(&id) {
                    // The command leads its own group: the signal reaches all it started there.
                    unsafe { kill(-(r.pid as c_int), signal) };
                }
            }
            // A thread of its own: a large `/proc` must not hold up the connection's frames.
            Msg::Look { id, pgid, process } => {
                let answer = out.clone();
                let looked = thread(move || {
                    let (group, marked) = look::look(pgid, &process);
                    answer.send(&Msg::Seen { id, group, marked });
                });
                if let Err(message) = looked {
                    out.send(&Msg::Failed { id, message });
                }
            }
            // Only moat speaks first, and only these; anything else ends the connection.
            _ => break,
        }
    }
}

/// How long a new connection has to send its hello.
const HELLO_WAIT: Duration = Duration::from_secs(5);

/// Stack for the helper's threads: they read, write and wait, nothing deep.
const THREAD_STACK: usize = 128 * 1024;

/// Starts a thread, or says why not (never a panic: a panic would end every command's helper).
fn thread(f: impl FnOnce() + Send + 'static) -> Result<(), String> {
    std::thread::Builder::new()
        .stack_size(THREAD_STACK)
        .spawn(f)
        .map(drop)
        .map_err(|e| format!("start a thread: {e}"))
}

fn set_size(master: &File, rows: u16, cols: u16) {
    if rows == 0 || cols == 0 {
        return;
    }
    let ws = Winsize {
        rows,
        cols,
        xpixel: 0,
        ypixel: 0,
    };
    unsafe { ioctl(master.as_raw_fd(), TIOCSWINSZ, &ws as *const Winsize) };
}

/// A new pseudo-terminal: (master, slave).
///
/// Both are opened with `O_NOCTTY`: the engine starts the helper as a session leader, and a
/// session leader that opens a terminal without it makes that terminal its own controlling
/// one, so the terminal's hangup at the command's end would kill the helper.
fn open_pty() -> std::io::Result<(File, File)> {
    let master = OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(O_NOCTTY)
        .open("/dev/ptmx")?;
    let fd = master.as_raw_fd();
    let mut name = [0u8; 128];
    // SAFETY: plain calls on a descriptor this function owns; `name` outlives the call.
    let ok = unsafe {
        grantpt(fd) == 0 && unlockpt(fd) == 0 && ptsname_r(fd, name.as_mut_ptr(), name.len()) == 0
    };
    if !ok {
        return Err(std::io::Error::last_os_error());
    }
    let end = name.iter().position(|&b| b == 0).unwrap_or(name.len());
    let path = String::from_utf8_lossy(&name[..end]).into_owned();
    let slave = OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(O_NOCTTY)
        .open(path)?;
    Ok((master, slave))
}

fn start(spawn: Spawn, out: &Out, table: &Table) -> Result<(), String> {
    let Spawn {
        id,
        tty,
        capture,
        rows,
        cols,
        workdir,
        argv,
        env,
        ..
    } = spawn;
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..]);
    for entry in &env {
        if let Some((k, v)) = entry.split_once('=') {
            cmd.env(k, v);
        }
    }
    if !workdir.is_empty() {
        cmd.current_dir(&workdir);
    }
    let mut master = None;
    let mut reader: Option<Box<dyn Read + Send>> = None;
    if tty {
        let (m, slave) = open_pty().map_err(|e| format!("open a terminal: {e}"))?;
        set_size(&m, rows, cols);
        let dup = |f: &File| f.try_clone().map(OwnedFd::from);
        let io = |e: std::io::Error| format!("open a terminal: {e}");
        cmd.stdin(Stdio::from(dup(&slave).map_err(io)?))
            .stdout(Stdio::from(dup(&slave).map_err(io)?))
            .stderr(Stdio::from(OwnedFd::from(slave)));
        // SAFETY: only async-signal-safe calls between fork and exec.
        unsafe {
            cmd.pre_exec(|| {
                if setsid() < 0 || ioctl(0, TIOCSCTTY, 0) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        reader = Some(Box::new(m.try_clone().map_err(|e| e.to_string())?));
        master = Some(Arc::new(m));
    } else {
        cmd.stdin(Stdio::null()).process_group(0);
        if capture {
            let (r, w) = std::io::pipe().map_err(|e| format!("make a pipe: {e}"))?;
            let w2 = w.try_clone().map_err(|e| format!("make a pipe: {e}"))?;
            cmd.stdout(Stdio::from(w)).stderr(Stdio::from(w2));
            reader = Some(Box::new(r));
        } else {
            cmd.stdout(Stdio::null()).stderr(Stdio::null());
        }
    }
    // Every thread the command needs exists before it starts: at the pids limit (a fork bomb)
    // a thread cannot be had, and the request must fail rather than leave a command nobody
    // waits for. Each thread gets its work once the command runs, after `Started` is sent, so
    // no output can overtake it.
    let (child_tx, child_rx) = mpsc::sync_channel::<std::process::Child>(1);
    let (reader_tx, reader_rx) = mpsc::sync_channel::<Box<dyn Read + Send>>(1);
    let (done_tx, done_rx) = mpsc::channel::<()>();
    let has_reader = reader.is_some();
    if has_reader {
        let out = out.clone();
        thread(move || {
            let Ok(mut r) = reader_rx.recv() else { return };
            let mut chunk = vec![0u8; frame::MAX_CHUNK];
            loop {
                match r.read(&mut chunk) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => out.send(&Msg::Output {
                        id,
                        data: chunk[..n].to_vec(),
                    }),
                }
            }
            let _ = done_tx.send(());
        })?;
    }
    let input = match &master {
        Some(m) => {
            let (tx, rx) = mpsc::channel::<Vec<u8>>();
            let m = Arc::clone(m);
            thread(move || {
                for data in rx {
                    if (&*m).write_all(&data).is_err() {
                        break;
                    }
                }
            })?;
            Some(tx)
        }
        None => None,
    };
    {
        let out = out.clone();
        let table = Arc::clone(table);
        thread(move || {
            let Ok(mut child) = child_rx.recv() else {
                return;
            };
            let status = match child.wait() {
                Ok(s) => s.code().or(s.signal().map(|n| 128 + n)).unwrap_or(-1),
                Err(_) => -1,
            };
            if has_reader {
                let _ = done_rx.recv_timeout(DRAIN);
            }
            table.lock().unwrap().remove(&id);
            out.send(&Msg::Exited { id, status });
        })?;
    }
    let child = cmd.spawn().map_err(|e| format!("start {}: {e}", argv[0]))?;
    // The parent's copies of the slave or the pipe's write end went with `cmd`.
    drop(cmd);
    let pid = child.id();
    table
        .lock()
        .unwrap()
        .insert(id, Running { pid, master, input });
    out.send(&Msg::Started { id, pid });
    if let Some(r) = reader {
        let _ = reader_tx.send(r);
    }
    let _ = child_tx.send(child);
    Ok(())
}

/// Starts a command whose run files the helper keeps (`wrap`): the wrapper is a fork of the
/// helper (helper/wrap.rs), its status reported as the wrapper's exit.
fn start_wrapped(spawn: Spawn, out: &Out, table: &Table, run_dir: &Path) -> Result<(), String> {
    let id = spawn.id;
    let wrapped = wrap::Wrapped::prepare(
        run_dir,
        &spawn.wrap,
        spawn.split,
        &spawn.argv,
        &spawn.env,
        &spawn.workdir,
    )?;
    let devnull = File::open("/dev/null").map_err(|e| format!("open /dev/null: {e}"))?;
    // The waiter exists before the command, as in `start`.
    let (pid_tx, pid_rx) = mpsc::sync_channel::<u32>(1);
    {
        let out = out.clone();
        let table = Arc::clone(table);
        thread(move || {
            let Ok(pid) = pid_rx.recv() else { return };
            let status = wrap::wait(pid);
            table.lock().unwrap().remove(&id);
            out.send(&Msg::Exited { id, status });
        })?;
    }
    let pid = wrapped.spawn(&devnull)?;
    table.lock().unwrap().insert(
        id,
        Running {
            pid,
            master: None,
            input: None,
        },
    );
    out.send(&Msg::Started { id, pid });
    let _ = pid_tx.send(pid);
    Ok(())
}
