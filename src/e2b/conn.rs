//! An E2B connection's own handle on its socket, which the handlers of its streams hold
//! (`process`, `stream`).

use std::os::fd::OwnedFd;
use std::sync::Arc;

/// A connection's own handle on its socket: a duplicate of the descriptor, so a stream of a
/// killed sandbox can reset the connection (docs/e2b.md, "A sandbox killed mid-stream"). A
/// duplicate, not the number: the socket stays this connection's while any handler holds it,
/// so no other connection's socket can be touched.
#[derive(Clone)]
pub struct Conn {
    pub socket: Option<Arc<OwnedFd>>,
}

impl Conn {
    /// Resets the connection now: the peer reads a reset, not an end of stream. hyper shuts
    /// a connection's writing side down (a FIN) before it closes it when a body fails, so a
    /// `SO_LINGER` of 0 alone would come after the peer saw a clean end; disconnecting the
    /// socket (`connect` to `AF_UNSPEC`, which Linux's TCP answers with a reset) does not wait
    /// for hyper.
    pub fn reset(&self) {
        let Some(fd) = &self.socket else { return };
        let reset = nix::libc::linger {
            l_onoff: 1,
            l_linger: 0,
        };
        let _ =
            nix::sys::socket::setsockopt(fd.as_ref(), nix::sys::socket::sockopt::Linger, &reset);
        let unspec = nix::libc::sockaddr {
            sa_family: nix::libc::AF_UNSPEC as nix::libc::sa_family_t,
            sa_data: [0; 14],
        };
        // SAFETY: `fd` is a socket this connection owns a duplicate of, open for as long as
        // `self` lives; the address is a valid `sockaddr` of the length given.
        unsafe {
            nix::libc::connect(
                std::os::fd::AsRawFd::as_raw_fd(fd.as_ref()),
                &unspec,
                std::mem::size_of::<nix::libc::sockaddr>() as nix::libc::socklen_t,
            );
        }
    }
}
