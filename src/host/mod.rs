//! The host executor (SPEC §7): commands that leave the sandbox and run on this machine.
//!
//! `env` is the host env allowlist (`env_names` its lists), `files` binds the files a plan
//! runs, `writable` finds where the sandbox can write, `path` the login-shell PATH and name
//! resolution, `runtime` the [`Runtime`](crate::runtime::Runtime) seam that lets the process
//! registry run host commands through the same wrapper, log and supervisor as container ones,
//! `pty` terminals.

mod bound;
mod env;
mod env_names;
mod path;
mod pty;
mod runtime;
mod writable;

pub use bound::{bind, scan, snapshot, BindError, Found, Snapshot, MAX_BOUND_BYTES};
pub use env::{built_in_summary, check_operator_name, check_request, inherited, HostEnvError};
pub use path::{login_path, merge as merge_path, resolve as resolve_names, split as split_path};
pub use runtime::{HostRuntime, HOST_CONTAINER};
pub use writable::WritableRoots;
