//! The wire vocabulary every tool shares: the result envelope and its details, statuses and
//! failure kinds, exit facts, env rules, argument limits, where a command runs, the
//! workspace's container path, and a sticky session's carried state. Pure; each tool's own
//! request lives with the tool (`tools::`).

mod arg_limits;
mod details;
mod env;
mod exit;
mod failure;
mod read;
mod result;
mod status;
pub mod sticky;
mod target;
mod text_enum;
mod workspace;

#[cfg(test)]
mod wire_tests;

pub use arg_limits::{check_exec, fits_one_argument, ArgLimitError, MAX_ARG_BYTES};
pub use details::{
    Bare, BinaryFile, CappedLog, Decision, Denied, Details, DirEntry, DirListing, EmptyLog,
    EntryKind, FileBytes, FileLines, FileWritten, Finished, Killed, Log, NotStarted, Other,
    Patched, Pending, Poll, ProcessList, ProcessRow, Running, Sent,
};
pub use env::{merge_env, request_path, validate_env, with_pagers_neutered, EnvError, PAGER_ENV};
pub use exit::{ExitInfo, LimitHit, LimitKind};
pub use failure::{Edges, FailureKind};
pub use result::{
    finished_result, running_result, with_limit, with_note, with_record, Content, ToolResult,
};
pub use status::{Limit, Status};
pub use target::{ApprovalTarget, Machine, Place, Target};
pub(crate) use text_enum::text_enum;
pub use text_enum::UnknownValue;
pub use workspace::WORKSPACE_MOUNT;
