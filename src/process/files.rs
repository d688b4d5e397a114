//! The host side of a process's files in the run directory (mounted at `/run/moat`).
//!
//! The directory is shared with the sandbox, so everything read back is opened with
//! `O_NOFOLLOW` and type-checked: a command that swaps its log for a symlink to a host file
//! gets an error, not the host file. moat creates the log and the FIFO itself before the
//! command starts and keeps the log's descriptor, so the common path never reopens by name.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// Paths of one process's files.
#[derive(Debug, Clone)]
pub struct RunFiles {
    dir: PathBuf,
    id: String,
}

impl RunFiles {
    pub fn new(dir: impl Into<PathBuf>, id: &str) -> Self {
        Self {
            dir: dir.into(),
            id: id.to_string(),
        }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn path(&self, ext: &str) -> PathBuf {
        self.dir.join(format!("{}.{ext}", self.id))
    }

    pub fn log_path(&self) -> PathBuf {
        self.path("out")
    }

    pub fn fifo_path(&self) -> PathBuf {
        self.path("in")
    }

    /// Creates the log (exclusively) and the stdin FIFO, handed to `owner` (the sandbox user)
    /// when given; without one they stay moat's own, mode 0600.
    pub fn create(&self, owner: Option<(u32, u32)>) -> io::Result<File> {
        let log = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(self.log_path())?;
        let fifo = self.fifo_path();
        let _ = std::fs::remove_file(&fifo);
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600))
            .map_err(io::Error::from)?;
        if let Some((uid, gid)) = owner {
            for p in [self.log_path(), fifo] {
                crate::session::give_file_to_sandbox_user(&p, uid, gid)?;
            }
        }
        Ok(log)
    }

    /// Reopens the log after a restart, refusing anything but a regular file.
    pub fn open_log(&self) -> io::Result<File> {
        let f = OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(self.log_path())?;
        if !f.metadata()?.file_type().is_file() {
            return Err(io::Error::other("process log is not a regular file"));
        }
        Ok(f)
    }

    /// Opens the stdin FIFO for writing without blocking (read+write open never waits for a
    /// reader). Holding it keeps the command's stdin open until `close` or moat exits.
    pub fn open_fifo(&self) -> io::Result<tokio::net::unix::pipe::Sender> {
        let path = self.fifo_path();
        let meta = std::fs::symlink_metadata(&path)?;
        if !meta.file_type().is_fifo() {
            return Err(io::Error::other("process stdin is not a FIFO"));
        }
        tokio::net::unix::pipe::OpenOptions::new()
            .read_write(true)
            .open_sender(&path)
    }

    /// The wrapper's recorded exit status, if it wrote one.
    pub fn read_exit(&self) -> Option<i64> {
        read_small(&self.path("exit")).and_then(|s| s.trim().parse().ok())
    }

    /// The process-group id the wrapper recorded.
    pub fn read_pgid(&self) -> Option<u32> {
        read_small(&self.path("pid"))
            .and_then(|s| s.trim().parse().ok())
            .filter(|p| *p > 1)
    }

    /// Whether the wrapper has opened its stdin (see `script`).
    pub fn is_ready(&self) -> bool {
        std::fs::symlink_metadata(self.path("ready")).is_ok_and(|m| m.file_type().is_file())
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

    /// Deletes every file of the process.
    pub fn remove(&self) {
        for ext in ["out", "in", "pid", "exit", "ready"] {
            let _ = std::fs::remove_file(self.path(ext));
        }
    }
}

/// Reads at most 64 bytes of a regular file without following symlinks.
fn read_small(path: &Path) -> Option<String> {
    use std::io::Read;
    let f = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK)
        .open(path)
        .ok()?;
    if !f.metadata().ok()?.file_type().is_file() {
        return None;
    }
    let mut buf = String::new();
    f.take(64).read_to_string(&mut buf).ok()?;
    Some(buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn symlinked_files_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let secret = dir.path().join("secret");
        std::fs::write(&secret, "42").unwrap();
        let files = RunFiles::new(dir.path(), "p");
        for ext in ["out", "exit", "pid"] {
            std::os::unix::fs::symlink(&secret, dir.path().join(format!("p.{ext}"))).unwrap();
        }
        assert!(files.open_log().is_err());
        assert_eq!(files.read_exit(), None);
        assert_eq!(files.read_pgid(), None);
    }

    #[tokio::test]
    async fn create_then_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let files = RunFiles::new(dir.path(), "p");
        let (uid, gid) = (
            nix::unistd::getuid().as_raw(),
            nix::unistd::getgid().as_raw(),
        );
        files.create(Some((uid, gid))).unwrap();
        assert!(
            files.create(None).is_err(),
            "the log is created exclusively"
        );
        std::fs::write(dir.path().join("p.exit"), "3").unwrap();
        std::fs::write(dir.path().join("p.pid"), "17\n").unwrap();
        assert_eq!(files.read_exit(), Some(3));
        assert_eq!(files.read_pgid(), Some(17));
        assert!(files.open_fifo().is_ok());
        files.remove();
        assert!(files.open_log().is_err());
    }
}
