//! The two locks that keep one daemon per `$MOAT_HOME` (docs/ARCHITECTURE.md, "Daemon").
//!
//! - `daemon.lock` is held by the serving daemon for its whole life, so a second `moat serve`
//!   on the same home fails at once instead of racing for the socket. The holder's pid is
//!   written into it for the error message and `moat doctor`.
//! - `daemon.start.lock` is held by a client while it checks for a daemon and starts one, so
//!   twenty clients racing on a fresh home end up with one daemon, not twenty.
//!
//! `flock(2)` locks belong to the open file description: they vanish when the holder dies,
//! even by SIGKILL, so a crashed daemon never leaves a stale lock behind.

use std::fs::File;
use std::io::{Read, Seek, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg};

#[derive(Debug, thiserror::Error)]
pub enum LockError {
    #[error("open {path}")]
    Open {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("lock {path}: {errno}")]
    Lock { path: String, errno: Errno },
    #[error("serve {home}: another moat (pid {pid}) already serves this home")]
    Held { home: String, pid: String },
    #[error("lock {path}: still held by another moat after {secs} s")]
    Timeout { path: String, secs: u64 },
}

/// An exclusive lock on a file in the home; released on drop (or when the process dies).
pub struct HomeLock {
    /// The locked file; dropping it releases the lock.
    _file: Flock<File>,
}

fn open(path: &Path) -> Result<File, LockError> {
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        // The home is the operator's; a symlink planted there must not redirect the lock.
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
        .map_err(|source| LockError::Open {
            path: path.display().to_string(),
            source,
        })
}

/// Takes the serving lock, or says which daemon holds it. Writes this process's pid into it.
pub fn serve_lock(path: &Path, home: &Path) -> Result<HomeLock, LockError> {
    let file = open(path)?;
    match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
        Ok(mut f) => {
            let _ = f.set_len(0);
            let _ = f.rewind();
            let _ = write!(f, "{}", std::process::id());
            Ok(HomeLock { _file: f })
        }
        Err((_, Errno::EWOULDBLOCK)) => Err(LockError::Held {
            home: home.display().to_string(),
            pid: holder_pid(path).unwrap_or_else(|| "unknown".into()),
        }),
        Err((_, errno)) => Err(LockError::Lock {
            path: path.display().to_string(),
            errno,
        }),
    }
}

/// Whether some process holds the serving lock right now.
pub fn serve_lock_held(path: &Path) -> bool {
    let Ok(file) = open(path) else {
        return false;
    };
    match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
        Ok(_) => false,
        Err((_, errno)) => errno == Errno::EWOULDBLOCK,
    }
}

/// The pid the serving daemon wrote into its lock file.
pub fn holder_pid(path: &Path) -> Option<String> {
    let mut s = String::new();
    File::open(path).ok()?.read_to_string(&mut s).ok()?;
    let s = s.trim();
    (!s.is_empty() && s.len() <= 10 && s.bytes().all(|b| b.is_ascii_digit())).then(|| s.into())
}

/// Takes the start lock, waiting up to `wait` for a client that is starting a daemon.
pub async fn start_lock(path: PathBuf, wait: Duration) -> Result<HomeLock, LockError> {
    let deadline = Instant::now() + wait;
    loop {
        let file = open(&path)?;
        match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
            Ok(f) => return Ok(HomeLock { _file: f }),
            Err((_, Errno::EWOULDBLOCK)) if Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(25)).await;
            }
            Err((_, Errno::EWOULDBLOCK)) => {
                return Err(LockError::Timeout {
                    path: path.display().to_string(),
                    secs: wait.as_secs(),
                })
            }
            Err((_, errno)) => {
                return Err(LockError::Lock {
                    path: path.display().to_string(),
                    errno,
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_serve_lock_names_the_holder() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("daemon.lock");
        let held = serve_lock(&path, dir.path()).unwrap();
        assert!(serve_lock_held(&path));
        let err = serve_lock(&path, dir.path()).err().unwrap().to_string();
        assert!(
            err.contains(&format!("pid {}", std::process::id())),
            "{err}"
        );
        drop(held);
        assert!(!serve_lock_held(&path));
        serve_lock(&path, dir.path()).unwrap();
    }

    #[tokio::test]
    async fn the_start_lock_waits_then_times_out() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("daemon.start.lock");
        let first = start_lock(path.clone(), Duration::from_millis(10))
            .await
            .unwrap();
        let err = start_lock(path.clone(), Duration::from_millis(100))
            .await
            .err()
            .unwrap();
        assert!(matches!(err, LockError::Timeout { .. }), "{err}");
        drop(first);
        start_lock(path, Duration::from_millis(10)).await.unwrap();
    }

    #[test]
    fn a_planted_symlink_is_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("elsewhere");
        std::fs::write(&target, "x").unwrap();
        let path = dir.path().join("daemon.lock");
        std::os::unix::fs::symlink(&target, &path).unwrap();
        assert!(matches!(
            serve_lock(&path, dir.path()),
            Err(LockError::Open { .. })
        ));
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "x");
    }
}
