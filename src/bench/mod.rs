//! `moat bench`: moat's figures measured side by side with a baseline in the same run.
//!
//! - `exec`: warm exec through the helper, the engine's exec and the `docker exec` CLI;
//!   throughput; a flood of output; with the rows of `new_sessions` and `cli_path`;
//! - `new_sessions`: a new session's first command with the warm pool, without it, and
//!   `docker run --rm`; claims per second (docs/pool.md, "What it saves");
//! - `cli_path`: `moat exec -- true` as a process per command against the `docker exec` CLI;
//! - `processes` (`--processes`): the process layer and the daemon's memory;
//! - `runtimes` (`--runtimes runc,runsc`): the exec path under several OCI runtimes.
//!
//! Every session a run makes is noted in a [`made::Made`] and removed at its end, whatever its
//! outcome: a failed figure leaves no container behind.

mod cli_path;
mod error;
mod exec;
mod made;
mod new_sessions;
mod processes;
mod quiet;
mod rss;
pub mod runtimes;
mod samples;
mod side_home;

pub use cli_path::CliPath;
pub use error::BenchError;
pub use exec::{run, Report, Runs};
pub use new_sessions::{NewSessions, CLIENTS};
pub use processes::{run_processes, ProcessReport};
pub use runtimes::{RuntimeRow, RuntimesReport};
