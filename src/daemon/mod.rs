//! One owner per `$MOAT_HOME`: the client side of the daemon (finding it, starting it on
//! demand, talking to it) and the locks that keep it single (docs/ARCHITECTURE.md, "Daemon").

mod client;
mod fingerprint;
mod lock;
mod owns;
mod start;

pub use client::{
    ClientError, DaemonClient, Lines, CALLER_HEADER, FINGERPRINT_HEADER, WAIT_HEADER,
};
pub use fingerprint::{build_id, fingerprint};
pub use lock::{holder_pid, serve_lock, serve_lock_held, HomeLock, LockError};
pub use owns::{busy, describe as describe_owned};
pub use start::{connect, never_ran, pool, status, unchecked, DaemonError};
