//! Pseudo-terminals for host commands: the child gets the slave side as its controlling
//! terminal in a session of its own; moat keeps the master for output, input and resizes.

use std::os::fd::{AsRawFd, OwnedFd};
use std::pin::Pin;

use futures::Stream;
use tokio::io::{AsyncReadExt, AsyncWrite};

/// Both sides of a fresh terminal of `rows`×`cols`.
pub fn open(rows: u16, cols: u16) -> std::io::Result<(OwnedFd, OwnedFd)> {
    let size = nix::pty::Winsize {
        ws_row: rows,
        ws_col: cols,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    let pair = nix::pty::openpty(Some(&size), None).map_err(std::io::Error::from)?;
    for fd in [&pair.master, &pair.slave] {
        nix::fcntl::fcntl(
            fd,
            nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::FD_CLOEXEC),
        )
        .map_err(std::io::Error::from)?;
    }
    Ok((pair.master, pair.slave))
}

/// Sets the terminal size on the master side.
pub fn resize(master: &OwnedFd, rows: u16, cols: u16) -> std::io::Result<()> {
    let size = libc::winsize {
        ws_row: rows,
        ws_col: cols,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: TIOCSWINSZ reads one `winsize` from the pointer, which outlives the call.
    let r = unsafe { libc::ioctl(master.as_raw_fd(), libc::TIOCSWINSZ, &size) };
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Runs in the child between fork and exec: a new session, with the slave (already on fd 0)
/// as its controlling terminal.
pub fn make_controlling() -> std::io::Result<()> {
    nix::unistd::setsid().map_err(std::io::Error::from)?;
    // SAFETY: TIOCSCTTY takes an integer argument; fd 0 is the terminal's slave side.
    if unsafe { libc::ioctl(0, libc::TIOCSCTTY as _, 0) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

type ByteStream = Pin<Box<dyn Stream<Item = std::io::Result<bytes::Bytes>> + Send>>;

/// The master as an output stream and an input writer. Two descriptors, so a blocked read
/// never holds up a write. The stream ends when the last slave descriptor closes (EIO).
pub fn streams(master: &OwnedFd) -> std::io::Result<(ByteStream, Pin<Box<dyn AsyncWrite + Send>>)> {
    let reader = tokio::fs::File::from_std(std::fs::File::from(master.try_clone()?));
    let writer = tokio::fs::File::from_std(std::fs::File::from(master.try_clone()?));
    let stream = futures::stream::unfold(reader, |mut r| async move {
        let mut buf = vec![0u8; 64 * 1024];
        match r.read(&mut buf).await {
            Ok(0) => None,
            Ok(n) => {
                buf.truncate(n);
                Some((Ok(bytes::Bytes::from(buf)), r))
            }
            // EIO: every slave descriptor is closed, the terminal is gone.
            Err(e) if e.raw_os_error() == Some(libc::EIO) => None,
            Err(e) => Some((Err(e), r)),
        }
    });
    Ok((Box::pin(stream), Box::pin(writer)))
}
