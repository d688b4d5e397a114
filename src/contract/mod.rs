//! The `exec` tool's contract: request parsing and validation, env rules, workdir mapping,
//! and the result shape. Pure; `tools::exec_tool` wires it to sessions and processes.

mod arg_limits;
mod details;
mod elevated;
mod env;
mod exit;
mod failure;
mod read;
mod request;
mod result;
mod status;
pub mod sticky;
mod target;
mod text_enum;
mod workdir;

#[cfg(test)]
mod wire_tests;

pub use arg_limits::{check_exec, fits_one_argument, ArgLimitError, MAX_ARG_BYTES};
pub use details::{
    Bare, BinaryFile, CappedLog, Decision, Denied, Details, DirEntry, DirListing, EmptyLog,
    EntryKind, FileBytes, FileLines, FileWritten, Finished, Killed, Log, NotStarted, Other,
    Patched, Pending, Poll, ProcessList, ProcessRow, Running, Sent,
};
pub use elevated::{target, Caller, ElevatedError, GateError};
pub use env::{merge_env, request_path, validate_env, with_pagers_neutered, EnvError, PAGER_ENV};
pub use exit::{ExitInfo, LimitHit, LimitKind};
pub use failure::{Edges, FailureKind};
pub use request::{ExecRequest, HostChoice, RequestError};
pub use result::{
    finished_result, running_result, with_limit, with_note, with_record, Content, ToolResult,
};
pub use status::{Limit, Status};
pub use target::{ApprovalTarget, Machine, Place, Target};
pub(crate) use text_enum::text_enum;
pub use text_enum::UnknownValue;
pub use workdir::{map_workdir, WorkdirError};
