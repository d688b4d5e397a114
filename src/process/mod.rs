//! Processes: every command moat starts, foreground or background.
//!
//! `script` builds what runs in the container, `files` owns the host side of its log, FIFO
//! and status files, `approved` the read-only copies of the files an approved sandbox plan
//! runs, `supervisor` is the owner task per process, `registry` keeps them all
//! (and re-attaches them after a restart), `output` is the in-memory view of the output and
//! `shelf` how a finished process puts its views away and gets them back from its log,
//! `read_buf` the buffer a log is read into.
//! `executors` says what runs a process at its place (`contract::Place`; handed over by the
//! app; docs/ARCHITECTURE.md, "Seams"). `marked` ends what a container command started by its
//! marker, including what left its process group.

pub mod approved;
mod events;
mod executors;
mod files;
pub mod holes;
mod input;
pub mod limit;
mod log_view;
pub mod marked;
mod output;
mod proc;
mod read_buf;
mod registry;
pub mod script;
mod shelf;
mod signal;
mod status;
mod supervisor;

#[cfg(test)]
mod tests;

pub use events::{exit_event, EventBus, EventKind, EventOutcome, SessionEvent};
pub use executors::Executors;
pub use files::{Created, RunFiles};
pub use log_view::{page as page_log, LogPage, Source as LogSource};
pub use output::LineMark;
pub use proc::{Proc, ProcInfo, ProcState};
pub use read_buf::ReadBuf;
pub use registry::{Limits, ProcessError, Registry, StartSpec};
pub use signal::signal_name;
pub use status::{signal_number, split_status};
pub use supervisor::KILL_GRACE_MS;
