//! The host side of a process's files in the run directory (mounted at `/run/moat`).
//!
//! The run directory is shared with the sandbox, so nothing here is done by path (see
//! docs/security.md, "Run directory and workspace files"): the directory is opened once with
//! `O_DIRECTORY|O_NOFOLLOW`, and every file is created, opened, checked and removed relative
//! to that descriptor — `openat` with `O_NOFOLLOW` (and `O_EXCL` on create), owner and mode
//! changed on the open descriptor, type and owner checked with `fstat` before use, removal
//! with `unlinkat`. moat creates every file the wrapper writes before the command starts, so
//! the sandbox user never needs to (and, with the directory moat's own and 0755, cannot)
//! create, rename or unlink anything there.

use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{AsFd, OwnedFd};
use std::path::PathBuf;
use std::sync::Arc;

use nix::errno::Errno;
use nix::fcntl::{openat, OFlag};
use nix::sys::stat::{fchmod, fstat, FileStat, Mode, SFlag};
use nix::unistd::{fchown, mkfifoat, unlinkat, Gid, Uid, UnlinkatFlags};

pub(super) use crate::descriptors::open_run_dir;
pub(super) use crate::descriptors::refused;

/// Every file a process has, by extension: its log, stdin FIFO, the process-group id, exit
/// status and readiness mark the wrapper writes (see `script`); and the files that pass data
/// out of the container: a copy's archive (`tar`) and a bound file's bytes (`bind`).
const EXTS: [&str; 9] = [
    "out", "err", "state", "tar", "bind", "in", "pid", "exit", "ready",
];
/// The files moat pre-creates empty for the wrapper to fill in.
const WRAPPER_WRITES: [&str; 3] = ["pid", "exit", "ready"];

/// One process's files, relative to an open run directory.
#[derive(Debug, Clone)]
pub struct RunFiles {
    /// The run directory, opened once; every operation is relative to it, so a path swapped
    /// in later cannot redirect anything.
    fd: Arc<OwnedFd>,
    id: String,
    /// The sandbox user the files are handed to; `None` for host processes, whose files stay
    /// moat's own (0600). Files owned by anyone but moat or this user are refused.
    owner: Option<(u32, u32)>,
}

/// What [`RunFiles::create`] returns: the descriptors moat keeps for the whole run.
#[derive(Debug)]
pub struct Created {
    /// The log, read (and, for PTY output, appended to) through this descriptor only.
    pub log: File,
    /// The writer of the command's stdin FIFO (read+write, so the open never waits).
    pub stdin: Option<tokio::net::unix::pipe::Sender>,
}

impl RunFiles {
    /// Opens the run directory `dir` for process `id`. The directory must be a real
    /// directory owned by moat's user and writable by no one else.
    pub fn open(dir: impl Into<PathBuf>, id: &str, owner: Option<(u32, u32)>) -> io::Result<Self> {
        let dir = dir.into();
        let fd = open_run_dir(&dir)?;
        Ok(Self {
            fd: Arc::new(fd),
            id: id.to_string(),
            owner,
        })
    }

    /// The run directory's (device, inode): what a container's processes must see at
    /// `/run/moat` to be this session's (`process::marked`).
    pub fn dir_identity(&self) -> Option<(u64, u64)> {
        let st = fstat(self.fd.as_fd()).ok()?;
        Some((st.st_dev as u64, st.st_ino as u64))
    }

    fn name(&self, ext: &str) -> String {
        format!("{}.{ext}", self.id)
    }

    /// Creates the log, the wrapper's files and (with `stdin`) the stdin FIFO, all
    /// exclusively, and hands them to the sandbox user. On failure, what this call created
    /// is removed again (and nothing else).
    pub fn create(&self, stdin: bool) -> io::Result<Created> {
        let mut made = Vec::new();
        let result = self.create_all(stdin, &mut made);
        if result.is_err() {
            for ext in made {
                self.unlink(ext);
            }
        }
        result
    }

    fn create_all(&self, stdin: bool, made: &mut Vec<&'static str>) -> io::Result<Created> {
        let log = self.create_file("out")?;
        made.push("out");
        for ext in WRAPPER_WRITES {
            self.create_file(ext)?;
            made.push(ext);
        }
        let stdin = if stdin {
            Some(self.create_fifo(made)?)
        } else {
            None
        };
        Ok(Created {
            log: File::from(log),
            stdin,
        })
    }

    /// An empty regular file that did not exist, handed to the sandbox user.
    fn create_file(&self, ext: &str) -> io::Result<OwnedFd> {
        let name = self.name(ext);
        let fd = self.at(
            &name,
            OFlag::O_RDWR | OFlag::O_CREAT | OFlag::O_EXCL,
            Mode::from_bits_truncate(0o600),
        )?;
        self.hand_over(&fd)?;
        Ok(fd)
    }

    /// Makes the FIFO, opens it without blocking and checks that what was opened is the
    /// FIFO moat just made (a FIFO, owned by moat) before handing it over.
    fn create_fifo(
        &self,
        made: &mut Vec<&'static str>,
    ) -> io::Result<tokio::net::unix::pipe::Sender> {
        let name = self.name("in");
        mkfifoat(
            self.fd.as_fd(),
            name.as_str(),
            Mode::from_bits_truncate(0o600),
        )
        .map_err(|e| at_error(&name, e))?;
        made.push("in");
        let fd = self.at(&name, OFlag::O_RDWR | OFlag::O_NONBLOCK, Mode::empty())?;
        let st = fstat(&fd)?;
        if kind(&st) != SFlag::S_IFIFO {
            return Err(refused(format!("{name} is not a FIFO")));
        }
        if st.st_uid != nix::unistd::geteuid().as_raw() {
            return Err(refused(format!(
                "{name} is owned by uid {}, not by moat",
                st.st_uid
            )));
        }
        self.hand_over(&fd)?;
        tokio::net::unix::pipe::Sender::from_owned_fd(fd)
    }

    /// The sandbox user must write the file: as root we give it away (mode stays 0600);
    /// otherwise we open its mode (the run directory sits in `$MOAT_HOME`, 0700).
    fn hand_over(&self, fd: &OwnedFd) -> io::Result<()> {
        let Some((uid, gid)) = self.owner else {
            return Ok(());
        };
        if nix::unistd::geteuid().is_root() {
            fchown(fd, Some(Uid::from_raw(uid)), Some(Gid::from_raw(gid)))?;
        } else {
            fchmod(fd, Mode::from_bits_truncate(0o666))?;
        }
        Ok(())
    }

    /// `openat` relative to the run directory, never following a symlink and never
    /// blocking on a FIFO.
    fn at(&self, name: &str, flags: OFlag, mode: Mode) -> io::Result<OwnedFd> {
        let flags = flags | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC | OFlag::O_NOCTTY;
        openat(self.fd.as_fd(), name, flags, mode).map_err(|e| at_error(name, e))
    }

    /// Opens an existing file of the process and checks it is a regular file moat made.
    fn open_existing(&self, ext: &str, flags: OFlag) -> io::Result<File> {
        let name = self.name(ext);
        let fd = self.at(&name, flags | OFlag::O_NONBLOCK, Mode::empty())?;
        let st = fstat(&fd)?;
        if kind(&st) != SFlag::S_IFREG {
            return Err(refused(format!("{name} is not a regular file")));
        }
        let me = nix::unistd::geteuid().as_raw();
        if st.st_uid != me && Some(st.st_uid) != self.owner.map(|o| o.0) {
            return Err(refused(format!(
                "{name} is owned by uid {}, neither moat's nor the sandbox user's",
                st.st_uid
            )));
        }
        if st.st_nlink != 1 {
            return Err(refused(format!("{name} has {} links", st.st_nlink)));
        }
        Ok(File::from(fd))
    }

    /// Creates the separate stderr file of a split process (`moat run`), exclusively, handed
    /// to the sandbox user like the log.
    pub fn create_err(&self) -> io::Result<File> {
        Ok(File::from(self.create_file("err")?))
    }

    /// Creates the archive a `moat cp` passes through (`<id>.tar`, the id being the copy's),
    /// handed to the sandbox user, who reads or writes it from inside.
    pub fn create_transfer(&self) -> io::Result<File> {
        Ok(File::from(self.create_file("tar")?))
    }

    /// Opens a copy's archive for reading after the sandbox wrote it, checked as every run
    /// file is (regular, owned by moat or the sandbox user, one link).
    pub fn open_transfer(&self) -> io::Result<File> {
        self.open_existing("tar", OFlag::O_RDONLY)
    }

    /// Creates the file a sandbox plan's bound file is read into (`<id>.bind`), handed to the
    /// sandbox user, who fills it from inside (docs/approvals.md, "Files a plan runs").
    pub fn create_bound(&self) -> io::Result<()> {
        self.create_file("bind").map(drop)
    }

    /// What the sandbox wrote into the bound file, at most `limit` bytes, checked as every run
    /// file is (regular, owned by moat or the sandbox user, one link).
    pub fn read_bound(&self, limit: u64) -> io::Result<Vec<u8>> {
        let mut out = Vec::new();
        self.open_existing("bind", OFlag::O_RDONLY)?
            .take(limit)
            .read_to_end(&mut out)?;
        Ok(out)
    }

    /// Creates the state file of a sticky command (`<id>.state`), which its shell fills in
    /// when it exits.
    pub fn create_state(&self) -> io::Result<()> {
        self.create_file("state").map(drop)
    }

    /// What a sticky command's shell wrote in its state file, at most `limit` bytes (empty
    /// when it wrote nothing, or there is no such file).
    pub fn read_state(&self, limit: usize) -> Vec<u8> {
        let mut out = Vec::new();
        if let Ok(f) = self.open_existing("state", OFlag::O_RDONLY) {
            let _ = f.take(limit as u64).read_to_end(&mut out);
        }
        out
    }

    /// Opens the log (`out`) or the stderr file (`err`) of a split process for reading,
    /// checked as every run file is.
    pub fn open_stream(&self, ext: &'static str) -> io::Result<File> {
        debug_assert!(ext == "out" || ext == "err");
        self.open_existing(ext, OFlag::O_RDONLY)
    }

    /// Reopens the log after a restart.
    pub fn open_log(&self) -> io::Result<File> {
        self.open_existing("out", OFlag::O_RDWR)
    }

    /// The wrapper's recorded exit status, once it wrote one.
    pub fn read_exit(&self) -> Option<i64> {
        self.read_small("exit").and_then(|s| s.trim().parse().ok())
    }

    /// The process-group id the wrapper recorded.
    pub fn read_pgid(&self) -> Option<u32> {
        self.read_small("pid")
            .and_then(|s| s.trim().parse().ok())
            .filter(|p| *p > 1)
    }

    /// Whether the wrapper has opened its stdin (it writes a mark into `.ready`).
    pub fn is_ready(&self) -> bool {
        self.read_small("ready").is_some_and(|s| !s.is_empty())
    }

    /// Waits (briefly) until the wrapper opened its stdin and recorded its group id.
    pub async fn wait_ready(&self, limit: std::time::Duration) -> bool {
        let deadline = tokio::time::Instant::now() + limit;
        while !self.is_ready() {
            if tokio::time::Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(std::time::Duration::from_millis(2)).await;
        }
        true
    }

    /// Reads at most 64 bytes of one of the wrapper's files.
    fn read_small(&self, ext: &str) -> Option<String> {
        let f = self.open_existing(ext, OFlag::O_RDONLY).ok()?;
        // Room for all 64 bytes up front: one read and the one that finds the end.
        let mut buf = String::with_capacity(64);
        f.take(64).read_to_string(&mut buf).ok()?;
        Some(buf)
    }

    /// Deletes every file of the process (`unlinkat` removes a symlink, never its target).
    pub fn remove(&self) {
        for ext in EXTS {
            self.unlink(ext);
        }
    }

    fn unlink(&self, ext: &str) {
        let _ = unlinkat(
            self.fd.as_fd(),
            self.name(ext).as_str(),
            UnlinkatFlags::NoRemoveDir,
        );
    }
}

fn kind(st: &FileStat) -> SFlag {
    SFlag::from_bits_truncate(st.st_mode & SFlag::S_IFMT.bits())
}

/// Turns the errors a hostile directory provokes into messages naming the file.
pub(super) fn at_error(name: &str, e: Errno) -> io::Error {
    match e {
        Errno::ELOOP => refused(format!("{name} is a symbolic link")),
        Errno::EEXIST => refused(format!("{name} already exists")),
        Errno::ENXIO => refused(format!("{name} is a socket or device")),
        Errno::EISDIR => refused(format!("{name} is not a regular file (a directory)")),
        e => io::Error::new(io::Error::from(e).kind(), format!("{name}: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{MetadataExt, PermissionsExt};

    fn me() -> (u32, u32) {
        (
            nix::unistd::geteuid().as_raw(),
            nix::unistd::getegid().as_raw(),
        )
    }

    fn run_dir() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        dir
    }

    fn mode(p: &std::path::Path) -> (u32, u32) {
        let m = std::fs::symlink_metadata(p).unwrap();
        (m.uid(), m.mode() & 0o7777)
    }

    #[test]
    fn symlinked_files_are_refused() {
        let dir = run_dir();
        let secret = dir.path().join("secret");
        std::fs::write(&secret, "42").unwrap();
        std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).unwrap();
        let files = RunFiles::open(dir.path(), "p", Some(me())).unwrap();
        for ext in EXTS {
            std::os::unix::fs::symlink(&secret, dir.path().join(format!("p.{ext}"))).unwrap();
        }
        let err = files.open_log().unwrap_err();
        assert!(
            err.to_string().contains("p.out is a symbolic link"),
            "{err}"
        );
        assert_eq!(files.read_exit(), None);
        assert_eq!(files.read_pgid(), None);
        assert!(!files.is_ready());
        // Creating over a planted symlink fails, and leaves its target alone.
        let err = files.create(true).unwrap_err();
        assert!(err.to_string().contains("p.out already exists"), "{err}");
        assert_eq!(mode(&secret), (me().0, 0o600));
        assert_eq!(std::fs::read_to_string(&secret).unwrap(), "42");
        // What was there is left as it was: moat only removes what it made.
        assert!(std::fs::symlink_metadata(dir.path().join("p.out")).is_ok());
    }

    #[tokio::test]
    async fn a_planted_fifo_symlink_is_refused() {
        let dir = run_dir();
        let target = dir.path().join("target");
        std::fs::write(&target, "").unwrap();
        std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o600)).unwrap();
        std::os::unix::fs::symlink(&target, dir.path().join("p.in")).unwrap();
        let files = RunFiles::open(dir.path(), "p", Some(me())).unwrap();
        let err = files.create(true).unwrap_err();
        assert!(err.to_string().contains("p.in already exists"), "{err}");
        assert_eq!(mode(&target), (me().0, 0o600));
        // The files this create made are gone again; the planted link stays.
        assert!(std::fs::symlink_metadata(dir.path().join("p.out")).is_err());
        assert!(std::fs::symlink_metadata(dir.path().join("p.in")).is_ok());
    }

    #[test]
    fn wrong_types_are_refused() {
        let dir = run_dir();
        let files = RunFiles::open(dir.path(), "p", None).unwrap();
        std::fs::create_dir(dir.path().join("p.out")).unwrap();
        nix::unistd::mkfifo(&dir.path().join("p.exit"), Mode::from_bits_truncate(0o600)).unwrap();
        let err = files.open_log().unwrap_err();
        assert!(
            err.to_string().contains("p.out is not a regular file"),
            "{err}"
        );
        // A FIFO is opened without blocking, then refused.
        assert_eq!(files.read_exit(), None);
        // A hard link to a file elsewhere in the directory is refused too.
        std::fs::write(dir.path().join("other"), "7").unwrap();
        std::fs::hard_link(dir.path().join("other"), dir.path().join("p.pid")).unwrap();
        assert_eq!(files.read_pgid(), None);
    }

    #[test]
    fn foreign_owners_are_refused() {
        if !nix::unistd::geteuid().is_root() {
            eprintln!(
                "chown needs root; ownership refusal is covered by tests/attack_run_files.rs"
            );
            return;
        }
        let dir = run_dir();
        let files = RunFiles::open(dir.path(), "p", Some((1000, 1000))).unwrap();
        let pid = dir.path().join("p.pid");
        std::fs::write(&pid, "17").unwrap();
        std::os::unix::fs::chown(&pid, Some(4343), Some(4343)).unwrap();
        assert_eq!(files.read_pgid(), None, "a file of a third user is refused");
        std::os::unix::fs::chown(&pid, Some(1000), Some(1000)).unwrap();
        assert_eq!(
            files.read_pgid(),
            Some(17),
            "the sandbox user's file is read"
        );
        // A run directory that is not moat's, or that others may write, is refused.
        std::os::unix::fs::chown(dir.path(), Some(1000), Some(1000)).unwrap();
        let err = RunFiles::open(dir.path(), "p", None).unwrap_err();
        assert!(err.to_string().contains("owned by uid 1000"), "{err}");
    }

    #[test]
    fn open_run_directories_are_refused() {
        let dir = run_dir();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
        let err = RunFiles::open(dir.path(), "p", None).unwrap_err();
        assert!(err.to_string().contains("writable by other users"), "{err}");
        let link = dir.path().join("link");
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        std::os::unix::fs::symlink(dir.path(), &link).unwrap();
        let err = RunFiles::open(&link, "p", None).unwrap_err();
        assert!(err.to_string().contains("not a directory"), "{err}");
    }

    #[tokio::test]
    async fn create_then_read_back() {
        let dir = run_dir();
        let files = RunFiles::open(dir.path(), "p", Some(me())).unwrap();
        let created = files.create(true).unwrap();
        assert!(created.stdin.is_some());
        // The stderr file of a split run (`moat run`), made and checked like the others.
        files.create_err().unwrap();
        assert!(files.create_err().is_err(), "created exclusively");
        // The state file of a sticky command, likewise; read back bounded.
        files.create_state().unwrap();
        assert!(files.create_state().is_err(), "created exclusively");
        std::fs::write(dir.path().join("p.state"), "0123456789").unwrap();
        assert_eq!(files.read_state(4), b"0123");
        // The bytes of a file a sandbox plan runs, likewise; read back bounded.
        files.create_bound().unwrap();
        assert!(files.create_bound().is_err(), "created exclusively");
        std::fs::write(dir.path().join("p.bind"), "abcdef").unwrap();
        assert_eq!(files.read_bound(4).unwrap(), b"abcd");
        // The archive of a copy (`moat cp`), likewise.
        files.create_transfer().unwrap();
        assert!(files.create_transfer().is_err(), "created exclusively");
        assert!(files.open_transfer().is_ok());
        assert!(files.open_stream("err").is_ok() && files.open_stream("out").is_ok());
        assert!(
            files.create(false).is_err(),
            "files are created exclusively"
        );
        // The wrapper's files exist, empty, until it fills them in.
        assert_eq!(files.read_exit(), None);
        assert_eq!(files.read_pgid(), None);
        assert!(!files.is_ready());
        let (uid, _) = me();
        let want = if uid == 0 { 0o600 } else { 0o666 };
        for ext in EXTS {
            assert_eq!(
                mode(&dir.path().join(format!("p.{ext}"))),
                (uid, want),
                "{ext}"
            );
        }
        std::fs::write(dir.path().join("p.exit"), "3").unwrap();
        std::fs::write(dir.path().join("p.pid"), "17\n").unwrap();
        std::fs::write(dir.path().join("p.ready"), "1").unwrap();
        assert_eq!(files.read_exit(), Some(3));
        assert_eq!(files.read_pgid(), Some(17));
        assert!(files.is_ready());
        assert!(files.open_log().is_ok());
        files.remove();
        assert!(files.open_log().is_err());
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[tokio::test]
    async fn host_files_stay_private() {
        let dir = run_dir();
        let files = RunFiles::open(dir.path(), "p", None).unwrap();
        files.create(false).unwrap();
        assert_eq!(mode(&dir.path().join("p.out")), (me().0, 0o600));
        assert!(std::fs::symlink_metadata(dir.path().join("p.in")).is_err());
    }
}
