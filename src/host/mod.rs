//! The host executor (docs/approvals.md, "The host executor"): commands that leave the sandbox and run on this machine.
//!
//! `env` is the host env allowlist (its names are the policy's table, `policy::env_names`),
//! `bound` binds the files a plan runs (its detection and rewrite serve sandbox plans too; which
//! file an interpreter runs is the policy's table, `policy::interpreters`), `writable` finds
//! where the sandbox can write, `path` the login-shell PATH and name resolution, `executor` the
//! [`Executor`](crate::runtime::Executor) that lets the process registry run host commands
//! through the same wrapper, log and supervisor as container ones, `wrap` the host's own
//! wrapper argv around a command, `pty` terminals, `lineage`
//! tells whether a process descends from a host command, `operator` refuses such a process
//! operator rights and audits the attempt, `run_as` is `elevated.user` (docs/security.md,
//! "The operator channel"), and `local_addrs` this machine's own addresses (the server's
//! TCP peer check and the egress gate both ask it).

mod bound;
mod env;
mod executor;
mod lineage;
pub(crate) mod local_addrs;
mod operator;
mod path;
mod pty;
mod run_as;
mod wrap;
mod writable;

pub use bound::{
    bind, copy_name, describe as describe_bound, lexical as lexical_path, rewrite as rewrite_plan,
    scan, scan_script, scan_with, snapshot, BindError, Found, Snapshot, MAX_BOUND_BYTES,
};
pub use env::{built_in_summary, check_operator_name, check_request, inherited, HostEnvError};
pub use executor::HostExecutor;
pub use lineage::{host_origin, start_time, HostOrigin, LineageError, HOST_MARKER};
pub use operator::{audit_refusal, check_pid, check_self, Refusal, REFUSED_KIND};
pub use path::{login_path, merge as merge_path, resolve as resolve_names, split as split_path};
pub use run_as::{exec_as, parse_groups, RunAs, RunAsError, RUN_AS_SUBCOMMAND};
pub use writable::WritableRoots;
