//! The host executor (SPEC §7): commands that leave the sandbox and run on this machine.
//!
//! `env` is the host env policy, `path` the login-shell PATH and name resolution, `runtime`
//! the [`Runtime`](crate::runtime::Runtime) seam that lets the process registry run host
//! commands through the same wrapper, log and supervisor as container ones, `pty` terminals.

mod env;
mod path;
mod pty;
mod runtime;

pub use env::{check_overrides, inherited, override_allowed, HostEnvError};
pub use path::{login_path, merge as merge_path, resolve as resolve_names, split as split_path};
pub use runtime::{HostRuntime, HOST_CONTAINER};
