//! The wrapper's work done by the helper itself, for a command moat runs with run files
//! (docs/helper.md, "The wrapper in the helper").
//!
//! Through the engine, every command starts as `sh -c WRAPPER` (src/process/script.rs), a
//! shell that records the process group, opens the stdin FIFO, marks `.ready`, runs
//! `sh -lc` with its output appended to the log and writes the exit status. Here the helper
//! forks a copy of itself that does exactly that with system calls, and only the login shell
//! is a new program: one program start less per command, and `Started` is sent as soon as
//! the fork returns instead of after an `exec`.
//!
//! The copy must outlive the helper (a killed helper must not cost a command its exit status),
//! so it is a process of its own, not a thread: it leads the command's process group, ignores
//! the group's TERM/INT/HUP the way the shell wrapper's `trap ':'` does (a handler, so the
//! command itself still gets the default action), and holds no descriptor of the helper's (a
//! connection it kept open would hide the helper's death from moat).
//!
//! Between `fork` and `_exit` the copy runs in a child of a threaded process: only
//! async-signal-safe calls, on memory prepared before the fork, and no allocation. It starts
//! the login shell with `posix_spawn` rather than a second `fork`: glibc's shares the
//! wrapper's memory with the child until `execve` (`CLONE_VM | CLONE_VFORK` on a stack it
//! maps), takes no lock and allocates nothing, and so copies no address space. Under gVisor a
//! copied address space is most of what a `fork` costs (docs/helper.md, "Under gVisor").

use std::ffi::{c_char, c_int, CString, OsStr};
use std::fs::File;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

extern "C" {
    fn fork() -> c_int;
    fn setpgid(pid: c_int, pgid: c_int) -> c_int;
    fn getpid() -> c_int;
    fn signal(sig: c_int, handler: usize) -> usize;
    fn sigprocmask(how: c_int, set: *const SigSet, old: *mut SigSet) -> c_int;
    fn dup2(old: c_int, new: c_int) -> c_int;
    fn close(fd: c_int) -> c_int;
    fn open(path: *const c_char, flags: c_int, mode: u32) -> c_int;
    fn write(fd: c_int, buf: *const u8, n: usize) -> isize;
    fn fchdir(fd: c_int) -> c_int;
    fn waitpid(pid: c_int, status: *mut c_int, options: c_int) -> c_int;
    fn syscall(num: i64, ...) -> i64;
    fn prctl(option: c_int, arg: usize, ...) -> c_int;
    fn _exit(code: c_int) -> !;
    fn posix_spawn(
        pid: *mut c_int,
        path: *const c_char,
        actions: *const u8,
        attr: *const SpawnAttr,
        argv: *const *const c_char,
        envp: *const *const c_char,
    ) -> c_int;
    fn posix_spawnattr_init(attr: *mut SpawnAttr) -> c_int;
    fn posix_spawnattr_setflags(attr: *mut SpawnAttr, flags: i16) -> c_int;
    fn posix_spawnattr_setsigdefault(attr: *mut SpawnAttr, set: *const SigSet) -> c_int;
    fn posix_spawnattr_setsigmask(attr: *mut SpawnAttr, set: *const SigSet) -> c_int;
}

/// glibc's `posix_spawnattr_t` (336 bytes on 64-bit Linux: flags, pgroup, two signal sets,
/// scheduling, padding), kept opaque and over-aligned.
#[repr(C, align(8))]
struct SpawnAttr([u8; 336]);

/// `posix_spawnattr_setflags` flags: reset the listed signals to their default actions, and
/// set the child's signal mask.
const POSIX_SPAWN_SETSIGDEF: i16 = 0x04;
const POSIX_SPAWN_SETSIGMASK: i16 = 0x08;
/// `posix_spawn` errors that mean no child was made (as a failed `fork`), not a failed
/// `execve`.
const EAGAIN: c_int = 11;
const ENOMEM: c_int = 12;

/// The kernel's signal set (`sigset_t`): 1024 bits.
#[repr(C)]
struct SigSet([u64; 16]);

const SIGHUP: c_int = 1;
const SIGINT: c_int = 2;
const SIGTERM: c_int = 15;
const SIG_SETMASK: c_int = 2;
const O_WRONLY: c_int = 0o1;
const O_RDONLY: c_int = 0;
const O_CREAT: c_int = 0o100;
const O_TRUNC: c_int = 0o1000;
const O_APPEND: c_int = 0o2000;
const O_DIRECTORY: i32 = 0o200000;
const O_CLOEXEC: c_int = 0o2000000;
/// `close_range(2)` (Linux 5.9); older kernels close descriptor by descriptor.
const SYS_CLOSE_RANGE: i64 = 436;
const EINTR: c_int = 4;
/// Descriptors closed one by one when `close_range` is missing.
const FALLBACK_FDS: c_int = 4096;

/// `prctl` option that names the calling thread (`/proc/PID/comm`).
const PR_SET_NAME: c_int = 15;
/// What a wrapper is called in `ps` and `/proc/PID/comm`: a fork of the helper would show the
/// helper's name and command line, and killing "the helper" by name would end the wrappers
/// (and with them the statuses they are there to write).
const WRAPPER_NAME: &[u8] = b"moat-wrapper\0";

/// Where the kernel shows this process's command line from (`arg_start`, `arg_end` of
/// /proc/self/stat), read once at start; the wrapper writes its own name there.
static ARGS: std::sync::OnceLock<(usize, usize)> = std::sync::OnceLock::new();

/// Reads where the command line lives; call once, before any fork.
pub fn note_args() {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return;
    };
    // Fields after the command name (which may hold spaces) start at field 3: `arg_start` and
    // `arg_end` are fields 48 and 49.
    let Some((_, rest)) = stat.rsplit_once(')') else {
        return;
    };
    let fields: Vec<&str> = rest.split_whitespace().collect();
    if let (Some(Ok(start)), Some(Ok(end))) = (
        fields.get(45).map(|f| f.parse::<usize>()),
        fields.get(46).map(|f| f.parse::<usize>()),
    ) {
        if end > start {
            let _ = ARGS.set((start, end));
        }
    }
}

/// Names the wrapper: its thread name, and its command line when the helper's has room.
unsafe fn rename_wrapper() {
    prctl(PR_SET_NAME, WRAPPER_NAME.as_ptr() as usize, 0usize, 0usize, 0usize);
    if let Some(&(start, end)) = ARGS.get() {
        if end - start >= WRAPPER_NAME.len() {
            let area = std::slice::from_raw_parts_mut(start as *mut u8, end - start);
            area.fill(0);
            area[..WRAPPER_NAME.len()].copy_from_slice(WRAPPER_NAME);
        }
    }
}

/// The no-op handler that stands for the shell wrapper's `trap ':' TERM INT HUP`.
extern "C" fn ignore(_: c_int) {}

/// Everything the forked wrapper needs, made before the fork.
pub struct Wrapped {
    pid: CString,
    stdin: CString,
    ready: CString,
    log: CString,
    err: Option<CString>,
    exit: CString,
    /// The login shell's path, found on the command's PATH as the shell wrapper would.
    shell: CString,
    argv: Vec<CString>,
    env: Vec<CString>,
    /// The working directory, opened now so a missing one fails the request, not the command.
    workdir: Option<OwnedFd>,
}

impl Wrapped {
    /// Prepares process `id`'s wrapper: its run files in `run_dir`, `argv` (`sh -lc SCRIPT`)
    /// with `env` laid over the helper's own environment, in `workdir`.
    pub fn prepare(
        run_dir: &Path,
        id: &str,
        split: bool,
        argv: &[String],
        env: &[String],
        workdir: &str,
    ) -> Result<Wrapped, String> {
        let file = |ext: &str| cstring(run_dir.join(format!("{id}.{ext}")).as_os_str());
        let env = merged_env(env);
        let path = env
            .iter()
            .find_map(|e| e.strip_prefix("PATH="))
            .unwrap_or("/usr/local/bin:/usr/bin:/bin")
            .to_string();
        let shell = find_program(&argv[0], &path)
            .ok_or_else(|| format!("start {}: not found on the PATH", argv[0]))?;
        let workdir = if workdir.is_empty() {
            None
        } else {
            let dir = std::fs::OpenOptions::new()
                .read(true)
                .custom_flags(O_DIRECTORY | O_CLOEXEC)
                .open(workdir)
                .map_err(|e| format!("start {}: the working directory: {e}", argv[0]))?;
            Some(OwnedFd::from(dir))
        };
        Ok(Wrapped {
            pid: file("pid")?,
            stdin: file("in")?,
            ready: file("ready")?,
            log: file("out")?,
            err: if split { Some(file("err")?) } else { None },
            exit: file("exit")?,
            shell: cstring(shell.as_os_str())?,
            argv: argv
                .iter()
                .map(|a| cstring(OsStr::new(a)))
                .collect::<Result<_, _>>()?,
            env: env
                .iter()
                .map(|e| cstring(OsStr::new(e)))
                .collect::<Result<_, _>>()?,
            workdir,
        })
    }

    /// Forks the wrapper; its pid (the command's process group) in the helper.
    pub fn spawn(self, devnull: &File) -> Result<u32, String> {
        let argv = pointers(&self.argv);
        let env = pointers(&self.env);
        let devnull = devnull.as_raw_fd();
        // SAFETY: the child runs `wrapper`, which makes only async-signal-safe calls on memory
        // prepared above, and ends in `_exit`.
        let pid = unsafe { fork() };
        if pid < 0 {
            return Err(format!("fork: {}", std::io::Error::last_os_error()));
        }
        if pid == 0 {
            unsafe { wrapper(&self, &argv, &env, devnull) }
        }
        // The child makes itself its group's leader too; whichever runs first, a signal moat
        // sends for the group right after `Started` finds it.
        unsafe { setpgid(pid, pid) };
        Ok(pid as u32)
    }
}

fn cstring(s: &OsStr) -> Result<CString, String> {
    CString::new(s.as_bytes()).map_err(|_| "an argument holds a NUL byte".to_string())
}

/// A NUL-terminated array of pointers into `items`, for `execve`.
fn pointers(items: &[CString]) -> Vec<*const c_char> {
    items
        .iter()
        .map(|c| c.as_ptr())
        .chain(std::iter::once(std::ptr::null()))
        .collect()
}

/// The helper's environment with `over` (`KEY=VALUE` entries) laid over it, later entries
/// winning, as the engine lays an exec's env over the container's.
fn merged_env(over: &[String]) -> Vec<String> {
    let mut env: Vec<String> = std::env::vars_os()
        .filter_map(|(k, v)| Some(format!("{}={}", k.to_str()?, v.to_str()?)))
        .collect();
    for entry in over {
        let key = entry.split_once('=').map_or(entry.as_str(), |(k, _)| k);
        env.retain(|e| e.split_once('=').map_or(e.as_str(), |(k, _)| k) != key);
        env.push(entry.clone());
    }
    env
}

/// `name` looked up on `path` as a shell looks up a command: a name with a slash as it is,
/// otherwise the first executable regular file among the entries (an empty entry is the
/// working directory, as in the shell).
fn find_program(name: &str, path: &str) -> Option<PathBuf> {
    if name.contains('/') {
        return Some(PathBuf::from(name));
    }
    path.split(':')
        .map(|dir| Path::new(if dir.is_empty() { "." } else { dir }).join(name))
        .find(|p| {
            std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

/// Writes `n` in decimal to the file at `path` (created or truncated), as `printf '%s' N >
/// FILE` would; a file that cannot be written is skipped, as the shell wrapper goes on too.
unsafe fn put_number(path: &CString, n: i64) {
    let mut buf = [0u8; 24];
    let mut at = buf.len();
    let negative = n < 0;
    let mut v = n.unsigned_abs();
    loop {
        at -= 1;
        buf[at] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    if negative {
        at -= 1;
        buf[at] = b'-';
    }
    let fd = open(path.as_ptr(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o666);
    if fd >= 0 {
        write(fd, buf[at..].as_ptr(), buf.len() - at);
        close(fd);
    }
}

/// The forked wrapper: the shell wrapper's steps in order, then `_exit` with the command's
/// status. Only async-signal-safe calls.
unsafe fn wrapper(w: &Wrapped, argv: &[*const c_char], env: &[*const c_char], devnull: c_int) -> ! {
    setpgid(0, 0);
    rename_wrapper();
    for sig in [SIGTERM, SIGINT, SIGHUP] {
        signal(sig, ignore as *const () as usize);
    }
    let empty = SigSet([0; 16]);
    sigprocmask(SIG_SETMASK, &empty, std::ptr::null_mut());
    if let Some(dir) = &w.workdir {
        if fchdir(dir.as_raw_fd()) != 0 {
            _exit(2);
        }
    }
    dup2(devnull, 1);
    dup2(devnull, 2);
    // Nothing of the helper's stays open here: above all no connection, whose end is how
    // moat learns that the helper is gone.
    // The upper bound is `INT_MAX`, not `~0U`: gVisor (Debian's runsc) refuses `~0U` with
    // EINVAL, and the fallback below then costs a third of a second there (4096 closes
    // through its kernel) before every command starts. Linux takes either.
    if syscall(SYS_CLOSE_RANGE, 3u32, i32::MAX as u32, 0u32) != 0 {
        for fd in 3..FALLBACK_FDS {
            close(fd);
        }
    }
    put_number(&w.pid, i64::from(getpid()));
    // `exec < FIFO`: blocks until moat's writer is there (it is, from before the start). A
    // failed redirection of `exec` ends a non-interactive shell with status 2.
    let fd = open(w.stdin.as_ptr(), O_RDONLY, 0);
    if fd < 0 {
        _exit(2);
    }
    dup2(fd, 0);
    close(fd);
    let ready = open(w.ready.as_ptr(), O_WRONLY | O_CREAT | O_TRUNC, 0o666);
    if ready >= 0 {
        write(ready, b"1".as_ptr(), 1);
        close(ready);
    }
    let status = login_shell(w, argv, env);
    put_number(&w.exit, i64::from(status));
    _exit(status)
}

/// Runs the login shell, its stdout and stderr appended to the log (stderr to `<id>.err` when
/// split), and waits for it; its status as the shell wrapper's `$?`: 2 when a file cannot be
/// opened or no child can be made (a failed redirection or `fork` in the shell), 127 when the
/// shell cannot be started.
unsafe fn login_shell(w: &Wrapped, argv: &[*const c_char], env: &[*const c_char]) -> c_int {
    // The wrapper's own stdout and stderr become the command's: it writes nothing there.
    let append = O_WRONLY | O_CREAT | O_APPEND;
    let out = open(w.log.as_ptr(), append, 0o666);
    if out < 0 {
        return 2;
    }
    dup2(out, 1);
    match &w.err {
        Some(err) => {
            let e = open(err.as_ptr(), append, 0o666);
            if e < 0 {
                return 2;
            }
            dup2(e, 2);
            close(e);
        }
        None => {
            dup2(out, 2);
        }
    }
    close(out);
    // Every signal gets its default action and none is blocked, as in an engine exec. The
    // wrapper's handlers would go with `execve` anyway; an ignored SIGPIPE (Rust's runtime
    // ignores it in the helper) would not, and glibc's `posix_spawn` leaves its two internal
    // signals (32 and 33) ignored in the child unless they are listed here.
    let mut attr = SpawnAttr([0; 336]);
    posix_spawnattr_init(&mut attr);
    posix_spawnattr_setflags(&mut attr, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
    // Signals 1 to 64: the kernel's whole range (`SIGRTMAX`).
    let defaults = SigSet([!0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
    posix_spawnattr_setsigdefault(&mut attr, &defaults);
    let empty = SigSet([0; 16]);
    posix_spawnattr_setsigmask(&mut attr, &empty);
    let mut child: c_int = 0;
    match posix_spawn(
        &mut child,
        w.shell.as_ptr(),
        std::ptr::null(),
        &attr,
        argv.as_ptr(),
        env.as_ptr(),
    ) {
        0 => {}
        EAGAIN | ENOMEM => return 2,
        // What a shell reports for a command it could not start.
        _ => return 127,
    }
    let mut raw: c_int = 0;
    loop {
        if waitpid(child, &mut raw, 0) >= 0 {
            return status_of(raw);
        }
        if *errno() != EINTR {
            return 2;
        }
    }
}

/// A wait status as the shell's `$?`: the exit code, or 128 + the signal.
fn status_of(raw: c_int) -> c_int {
    let signal = raw & 0x7f;
    if signal == 0 {
        (raw >> 8) & 0xff
    } else {
        128 + signal
    }
}

extern "C" {
    fn __errno_location() -> *mut c_int;
}

unsafe fn errno() -> *mut c_int {
    __errno_location()
}

/// Waits for the wrapper `pid` (a helper thread, not the fork); its status as the shell's `$?`,
/// -1 when it cannot be waited for.
pub fn wait(pid: u32) -> i32 {
    let mut raw: c_int = 0;
    loop {
        // SAFETY: a plain system call on a pid this helper forked.
        if unsafe { waitpid(pid as c_int, &mut raw, 0) } >= 0 {
            return status_of(raw);
        }
        if unsafe { *errno() } != EINTR {
            return -1;
        }
    }
}
