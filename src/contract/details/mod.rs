//! A tool result's `details` (docs/mcp.md, "Results"): one type per shape, by the tool that
//! sends it, and [`Details`], the one of them a result holds. Reading back is in `read.rs`.

mod any;
mod exec;
mod files;
mod process;

pub use any::{Bare, Details, Other};
pub use exec::{Decision, Denied, Finished, NotStarted, Pending, Running};
pub use files::{
    BinaryFile, DirEntry, DirListing, EntryKind, FileBytes, FileLines, FileWritten, Patched,
};
pub use process::{CappedLog, EmptyLog, Killed, Log, Poll, ProcessList, ProcessRow, Sent};
