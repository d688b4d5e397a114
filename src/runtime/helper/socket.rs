//! Reaching the helper's socket without trusting the sandbox's side of the run directory.
//!
//! The helper (the sandbox user) needs a directory it may create its socket in, so moat makes
//! `helper/` in the run directory and gives it to the sandbox user. Everything in it is then
//! the sandbox's: a command can unlink the socket, bind its own listener there, or put a
//! symlink in its place. So moat opens the directory and the socket with `O_PATH|O_NOFOLLOW`,
//! checks their type and owner on the descriptors, connects through `/proc/self/fd/N`, and
//! then checks the listener's pid (`SO_PEERCRED`) against the pid the engine reported for the
//! helper it started, which moat keeps in `helper.pid` in its own part of the run directory
//! with the process's start time: a pid alone outlives its helper, and a sandbox that cycles
//! through pids could get it next (docs/helper.md, "Trust").

use std::io::Write;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};

use nix::errno::Errno;
use nix::fcntl::{openat, renameat, OFlag};
use nix::sys::stat::{fchmod, fstat, mkdirat, Mode, SFlag};
use nix::unistd::{fchown, Gid, Uid};
use tokio::net::UnixStream;

use super::HelperError;

/// The sandbox-owned directory the helper listens in (`/run/moat/helper` inside).
pub const DIR: &str = "helper";
/// The socket's name in [`DIR`].
pub const SOCKET: &str = "sock";
/// moat's record of the running helper's host pid and start time, in the run directory itself.
pub const PID_FILE: &str = "helper.pid";
/// Most bytes of [`PID_FILE`] read (a pid, a start time and a newline).
const PID_FILE_MAX: usize = 64;

/// The process moat trusts as its helper's listener: a pid, and when that process started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Listener {
    pub pid: u32,
    /// `proc_start` of `pid` when moat recorded it.
    pub start: u64,
}

impl Listener {
    /// `pid` as it runs now; `None` when it is gone.
    pub fn of(pid: u32) -> Option<Listener> {
        let start = crate::proc_start::of(std::path::Path::new("/proc"), pid)?;
        Some(Listener { pid, start })
    }
}

/// What an entry must be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Dir,
    Socket,
}

/// The check on an opened entry: its type and owner. Pure, so it is table-tested.
pub fn check_entry(kind: Kind, mode: u32, uid: u32, want_uid: u32) -> Result<(), String> {
    let fmt = SFlag::from_bits_truncate(mode & SFlag::S_IFMT.bits());
    let (want, name) = match kind {
        Kind::Dir => (SFlag::S_IFDIR, "directory"),
        Kind::Socket => (SFlag::S_IFSOCK, "socket"),
    };
    if fmt != want {
        return Err(format!("the helper's {name} is another kind of file"));
    }
    if uid != want_uid {
        return Err(format!(
            "the helper's {name} belongs to uid {uid}, not the sandbox user {want_uid}"
        ));
    }
    Ok(())
}

/// Creates the helper's directory in the open run directory for the sandbox user.
pub fn prepare_dir(run_dir: &OwnedFd, uid: u32, gid: u32) -> Result<(), HelperError> {
    let err = |e: Errno| HelperError::io("prepare the helper's directory")(e.into());
    match mkdirat(run_dir, DIR, Mode::from_bits_truncate(0o700)) {
        Ok(()) | Err(Errno::EEXIST) => {}
        Err(e) => return Err(err(e)),
    }
    let fd = openat(
        run_dir,
        DIR,
        OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map_err(err)?;
    if nix::unistd::geteuid().is_root() {
        fchown(&fd, Some(Uid::from_raw(uid)), Some(Gid::from_raw(gid))).map_err(err)?;
        fchmod(&fd, Mode::from_bits_truncate(0o700)).map_err(err)?;
    } else if fstat(&fd).map_err(err)?.st_uid != uid {
        // moat cannot give it away: open it, and let the owner and pid checks do the work.
        fchmod(&fd, Mode::from_bits_truncate(0o777)).map_err(err)?;
    }
    Ok(())
}

/// moat's mark, in its own part of the run directory, that it started a helper in the running
/// container: under gVisor it starts one once per container start (see [`start_once`]).
pub const TRIED_FILE: &str = "helper.tried";

/// Under gVisor, takes the container's one helper start: `false` when a helper was started in
/// it before. moat cannot tell its helper from another process of a gVisor sandbox by pid, so
/// it starts a helper only while no process of the sandbox could be listening in its place:
/// the first time, before any command of the container ran through it (docs/helper.md,
/// "Trust"). [`reset`] gives the next container start its own.
pub fn start_once(run_dir: &OwnedFd) -> Result<bool, HelperError> {
    let flags =
        OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    match openat(run_dir, TRIED_FILE, flags, Mode::from_bits_truncate(0o644)) {
        Ok(_) => Ok(true),
        Err(Errno::EEXIST) => Ok(false),
        Err(e) => Err(HelperError::io("mark the helper's start")(e.into())),
    }
}

/// Whether moat made the helper start of the running container instance ([`start_once`]).
pub fn tried(run_dir: &OwnedFd) -> bool {
    nix::unistd::faccessat(
        run_dir,
        TRIED_FILE,
        nix::unistd::AccessFlags::F_OK,
        nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW,
    )
    .is_ok()
}

/// Clears what a container's earlier helper left in run directory `dir`: its socket, the
/// record of its listener and the mark of its start. Only for a container with no process
/// running (being created, or started again): then nothing of the sandbox can be listening.
pub fn reset(dir: &std::path::Path) -> std::io::Result<()> {
    let run = crate::descriptors::open_dir(dir)?;
    forget_pid(&run);
    let _ = nix::unistd::unlinkat(&run, TRIED_FILE, nix::unistd::UnlinkatFlags::NoRemoveDir);
    let helper = match openat(
        &run,
        DIR,
        OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::empty(),
    ) {
        Ok(fd) => fd,
        Err(Errno::ENOENT) => return Ok(()),
        Err(e) => return Err(e.into()),
    };
    match nix::unistd::unlinkat(&helper, SOCKET, nix::unistd::UnlinkatFlags::NoRemoveDir) {
        Ok(()) | Err(Errno::ENOENT) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Whether something is at the helper's socket path in the checked directory. Under gVisor
/// a helper's socket is a host file the gofer made, which no process of the sandbox may unlink
/// or rename: once its helper is gone, no new helper can listen there, and no impostor either
/// (docs/helper.md, "Trust").
pub fn socket_left(run_dir: &OwnedFd, uid: u32) -> bool {
    open_checked(run_dir, DIR, Kind::Dir, uid).is_ok_and(|dir| {
        openat(
            &dir,
            SOCKET,
            OFlag::O_PATH | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
        .is_ok()
    })
}

fn open_checked(dir: &impl AsFd, name: &str, kind: Kind, uid: u32) -> Result<OwnedFd, HelperError> {
    let mut flags = OFlag::O_PATH | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    if kind == Kind::Dir {
        flags |= OFlag::O_DIRECTORY;
    }
    let fd = openat(dir, name, flags, Mode::empty()).map_err(|e| match e {
        Errno::ELOOP | Errno::ENOTDIR => {
            HelperError::Untrusted(format!("{name} is a symbolic link or another file"))
        }
        e => HelperError::io(format!("open the helper's {name}"))(e.into()),
    })?;
    let st = fstat(&fd).map_err(|e| HelperError::io("inspect the helper's socket")(e.into()))?;
    check_entry(kind, st.st_mode, st.st_uid, uid).map_err(HelperError::Untrusted)?;
    Ok(fd)
}

/// Connects to the helper's socket in the open run directory, refusing anything but a socket
/// of the sandbox user's whose listener is the process `listener` names (its pid, started when
/// it was recorded).
pub async fn connect(
    run_dir: &OwnedFd,
    uid: u32,
    listener: Listener,
) -> Result<UnixStream, HelperError> {
    let pid = listener.pid;
    let dir = open_checked(run_dir, DIR, Kind::Dir, uid)?;
    let sock = open_checked(&dir, SOCKET, Kind::Socket, uid)?;
    // The magic link names the very inode checked above, whatever the path holds by now.
    let path = format!("/proc/self/fd/{}", sock.as_raw_fd());
    let stream = UnixStream::connect(&path)
        .await
        .map_err(HelperError::io("connect to the helper"))?;
    let cred = stream
        .peer_cred()
        .map_err(HelperError::io("read the helper's credentials"))?;
    if cred.pid() != Some(pid as i32) {
        return Err(HelperError::Untrusted(format!(
            "the socket's listener is pid {:?}, not the helper moat started (pid {pid})",
            cred.pid()
        )));
    }
    // Checked after the connect: the listener was pid `pid` then, and pid `pid` is still the
    // process moat recorded, so it was that process.
    if Listener::of(pid) != Some(listener) {
        return Err(HelperError::Untrusted(format!(
            "pid {pid} is no longer the helper moat started (it started at another time)"
        )));
    }
    Ok(stream)
}

/// The helper's listener moat recorded, if any.
pub fn read_pid(run_dir: &OwnedFd) -> Option<Listener> {
    let flags = OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC | OFlag::O_NONBLOCK;
    let fd = openat(run_dir, PID_FILE, flags, Mode::empty()).ok()?;
    let st = fstat(&fd).ok()?;
    let regular = SFlag::from_bits_truncate(st.st_mode & SFlag::S_IFMT.bits()) == SFlag::S_IFREG;
    if !regular || st.st_uid != nix::unistd::geteuid().as_raw() {
        return None;
    }
    let mut buf = [0u8; PID_FILE_MAX];
    let n = nix::unistd::read(&fd, &mut buf).ok()?;
    parse_record(std::str::from_utf8(&buf[..n]).ok()?)
}

/// `PID START`; a record without a start (an older moat's) names no process moat can pin.
fn parse_record(text: &str) -> Option<Listener> {
    let mut fields = text.split_ascii_whitespace();
    let pid = fields.next()?.parse().ok()?;
    let start = fields.next()?.parse().ok()?;
    fields.next().is_none().then_some(Listener { pid, start })
}

/// Records the helper's listener (moat's file: the sandbox cannot write it).
pub fn write_pid(run_dir: &OwnedFd, listener: Listener) -> Result<(), HelperError> {
    let err = |e: Errno| HelperError::io("record the helper's pid")(e.into());
    let tmp = ".helper.pid.new";
    let _ = nix::unistd::unlinkat(run_dir, tmp, nix::unistd::UnlinkatFlags::NoRemoveDir);
    let fd = openat(
        run_dir,
        tmp,
        OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::from_bits_truncate(0o644),
    )
    .map_err(err)?;
    std::fs::File::from(fd)
        .write_all(format!("{} {}\n", listener.pid, listener.start).as_bytes())
        .map_err(HelperError::io("record the helper's pid"))?;
    renameat(run_dir.as_fd(), tmp, run_dir.as_fd(), PID_FILE).map_err(err)
}

/// Drops the record: a helper that failed to start must leave no pid that a later process
/// could be trusted by.
pub fn forget_pid(run_dir: &OwnedFd) {
    let _ = nix::unistd::unlinkat(run_dir, PID_FILE, nix::unistd::UnlinkatFlags::NoRemoveDir);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_must_be_the_right_kind_and_the_sandbox_users() {
        let dir = SFlag::S_IFDIR.bits() | 0o700;
        let sock = SFlag::S_IFSOCK.bits() | 0o755;
        let file = SFlag::S_IFREG.bits() | 0o644;
        let link = SFlag::S_IFLNK.bits() | 0o777;
        let cases = [
            (Kind::Dir, dir, 1000, true),
            (Kind::Dir, dir, 0, false),
            (Kind::Dir, sock, 1000, false),
            (Kind::Socket, sock, 1000, true),
            (Kind::Socket, sock, 1001, false),
            (Kind::Socket, file, 1000, false),
            (Kind::Socket, link, 1000, false),
            (Kind::Socket, dir, 1000, false),
        ];
        for (kind, mode, uid, ok) in cases {
            assert_eq!(
                check_entry(kind, mode, uid, 1000).is_ok(),
                ok,
                "{kind:?} {mode:o} {uid}"
            );
        }
    }

    #[tokio::test]
    async fn a_symlinked_socket_or_a_strangers_listener_is_refused() {
        let me = nix::unistd::geteuid().as_raw();
        let root = tempfile::tempdir().unwrap();
        let run = crate::descriptors::open_dir(root.path()).unwrap();
        std::fs::create_dir(root.path().join(DIR)).unwrap();
        // A listener elsewhere, reached through a symlink in the helper's place.
        let elsewhere = root.path().join("elsewhere.sock");
        let _listener = tokio::net::UnixListener::bind(&elsewhere).unwrap();
        std::os::unix::fs::symlink(&elsewhere, root.path().join(DIR).join(SOCKET)).unwrap();
        let this = Listener::of(std::process::id()).unwrap();
        let err = connect(&run, me, this).await.unwrap_err();
        assert!(matches!(err, HelperError::Untrusted(_)), "{err}");
        // A real socket, but its listener is not the recorded helper pid.
        std::fs::remove_file(root.path().join(DIR).join(SOCKET)).unwrap();
        let _own = tokio::net::UnixListener::bind(root.path().join(DIR).join(SOCKET)).unwrap();
        let init = Listener::of(1).unwrap_or(Listener { pid: 1, start: 0 });
        let err = connect(&run, me, init).await.unwrap_err();
        assert!(matches!(err, HelperError::Untrusted(_)), "{err}");
        // The right pid, but recorded for a process that started at another time: the pid
        // was reused.
        let reused = Listener {
            start: this.start + 1,
            ..this
        };
        let err = connect(&run, me, reused).await.unwrap_err();
        assert!(err.to_string().contains("no longer the helper"), "{err}");
        // The same socket with the right pid and start connects.
        connect(&run, me, this).await.unwrap();
        // A socket directory replaced by a symlink is refused.
        std::fs::rename(root.path().join(DIR), root.path().join("moved")).unwrap();
        std::os::unix::fs::symlink(root.path().join("moved"), root.path().join(DIR)).unwrap();
        let err = connect(&run, me, this).await.unwrap_err();
        assert!(matches!(err, HelperError::Untrusted(_)), "{err}");
    }

    #[test]
    fn a_new_container_starts_clean_and_a_gvisor_helper_starts_once() {
        let root = tempfile::tempdir().unwrap();
        let run = crate::descriptors::open_dir(root.path()).unwrap();
        assert!(!tried(&run));
        assert!(start_once(&run).unwrap());
        assert!(tried(&run));
        assert!(!start_once(&run).unwrap(), "a second start is refused");
        std::fs::create_dir(root.path().join(DIR)).unwrap();
        let _old = std::os::unix::net::UnixListener::bind(root.path().join(DIR).join(SOCKET));
        let me = nix::unistd::geteuid().as_raw();
        assert!(socket_left(&run, me));
        write_pid(&run, Listener { pid: 1, start: 1 }).unwrap();
        reset(root.path()).unwrap();
        assert!(!socket_left(&run, me));
        assert_eq!(read_pid(&run), None);
        assert!(
            start_once(&run).unwrap(),
            "the next container start has its own"
        );
        // Nothing to clear is no error.
        std::fs::remove_dir(root.path().join(DIR)).unwrap();
        reset(root.path()).unwrap();
    }

    #[test]
    fn the_pid_record_is_moats_own_file() {
        let root = tempfile::tempdir().unwrap();
        let run = crate::descriptors::open_dir(root.path()).unwrap();
        assert_eq!(read_pid(&run), None);
        let l = Listener {
            pid: 4242,
            start: 77,
        };
        write_pid(&run, l).unwrap();
        assert_eq!(read_pid(&run), Some(l));
        forget_pid(&run);
        assert_eq!(read_pid(&run), None);
        // An older moat's record (a pid alone) pins no process.
        std::fs::write(root.path().join(PID_FILE), "4242\n").unwrap();
        assert_eq!(read_pid(&run), None);
        std::fs::remove_file(root.path().join(PID_FILE)).unwrap();
        std::fs::write(root.path().join("x"), "77").unwrap();
        std::os::unix::fs::symlink(root.path().join("x"), root.path().join(PID_FILE)).unwrap();
        assert_eq!(read_pid(&run), None, "a symlink is not followed");
    }
}
