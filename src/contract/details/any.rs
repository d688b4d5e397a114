//! [`Details`]: the one shape a result holds, and the reads the edges make on any of them.
//!
//! The wire form is fixed: every shape writes its keys sorted (the order `json!` gave them,
//! which the fields of each struct follow) and writes absent values as `null` where it always
//! has (`"exitCode": null`).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::exec::{Denied, Finished, NotStarted, Pending, Running};
use super::files::{BinaryFile, DirListing, FileBytes, FileLines, FileWritten, Patched};
use super::process::{CappedLog, EmptyLog, Killed, Log, Poll, ProcessList, Sent};
use crate::contract::status::Status;

/// See the module docs. Serialized as the object of the shape it holds.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Details {
    /// A command that ended within the call.
    Finished(Finished),
    /// A command that moved to the background.
    Running(Running),
    /// A command (or a file write) the policy refused; nothing ran.
    Denied(Denied),
    /// A command that waits for an operator's decision.
    Pending(Pending),
    /// A command the engine could not start in a container at a limit.
    NotStarted(NotStarted),
    /// `process poll`: the output since the last poll and how the process stands.
    Poll(Poll),
    /// A plain answer: `clear`, `remove`, and every error a tool answers with its text alone.
    Bare(Bare),
    /// `process write`, `send-keys`, `submit`, `paste`: input went to the process.
    Sent(Sent),
    /// `process kill`.
    Killed(Killed),
    /// `process list`.
    ProcessList(ProcessList),
    /// `process log`, paged from the process's record.
    Log(Log),
    /// `process log` of a process without a record: the capped view.
    CappedLog(CappedLog),
    /// `process log` of a process without a record that printed nothing.
    EmptyLog(EmptyLog),
    /// `read_file` by lines.
    FileLines(FileLines),
    /// `read_file` by bytes.
    FileBytes(FileBytes),
    /// `read_file` of a binary file.
    BinaryFile(BinaryFile),
    /// `write_file`.
    FileWritten(FileWritten),
    /// `list_dir`.
    DirListing(DirListing),
    /// `apply_patch`.
    Patched(Patched),
    /// What a different build of moat sent that this one does not know, kept as it came.
    Other(Other),
}

/// [`Details::Bare`]: `{"status": …}` and nothing else.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Bare {
    /// Whether the call did what it was asked; the text says the rest.
    pub status: Status,
}

/// [`Details::Other`]: the object as it came, `status` among its keys (or not).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(transparent)]
pub struct Other(Value);

impl Other {
    /// What was read, kept whatever it is.
    pub(in crate::contract) fn read(value: Value) -> Self {
        Self(value)
    }

    /// Its status; `None` for one this build does not know (or none at all).
    pub fn status(&self) -> Option<Status> {
        Status::deserialize(self.0.get("status")?).ok()
    }

    /// One field by its wire name.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.0.get(key)
    }

    fn str_field(&self, key: &str) -> Option<&str> {
        self.get(key).and_then(Value::as_str)
    }
}

impl Details {
    /// The shape of the tools' plain answers: `{"status": …}` and nothing else.
    pub fn bare(status: Status) -> Self {
        Details::Bare(Bare { status })
    }

    /// `details.status`; `None` only for a shape from a build with statuses this one does
    /// not know.
    pub fn status(&self) -> Option<Status> {
        Some(match self {
            Details::Finished(d) => d.status,
            Details::Running(d) => d.status,
            Details::Denied(d) => d.status,
            Details::Pending(d) => d.status,
            Details::NotStarted(d) => d.status,
            Details::Poll(d) => d.status,
            Details::Bare(d) => d.status,
            Details::Sent(d) => d.status,
            Details::Killed(d) => d.status,
            Details::ProcessList(d) => d.status,
            Details::Log(d) => d.status,
            Details::CappedLog(d) => d.status,
            Details::EmptyLog(d) => d.status,
            Details::FileLines(d) => d.status,
            Details::FileBytes(d) => d.status,
            Details::BinaryFile(d) => d.status,
            Details::FileWritten(d) => d.status,
            Details::DirListing(d) => d.status,
            Details::Patched(d) => d.status,
            Details::Other(d) => return d.status(),
        })
    }

    /// Whether the policy refused it (`details.denied`).
    pub fn is_denied(&self) -> bool {
        match self {
            Details::Denied(d) => d.denied,
            Details::Other(d) => d.get("denied") == Some(&Value::Bool(true)),
            _ => false,
        }
    }

    /// The approval a pending command waits on.
    pub fn approval_id(&self) -> Option<&str> {
        match self {
            Details::Pending(d) => Some(&d.approval_id),
            Details::Other(d) => d.str_field("approvalId"),
            _ => None,
        }
    }

    /// The process the result is about (`details.sessionId` on the wire), if it names one.
    pub fn process_id(&self) -> Option<&str> {
        match self {
            Details::Finished(d) => d.process_id.as_deref(),
            Details::Running(d) => Some(&d.process_id),
            Details::Poll(d) => Some(&d.process_id),
            Details::Sent(d) => Some(&d.process_id),
            Details::Killed(d) => Some(&d.process_id),
            Details::Log(d) => Some(&d.process_id),
            Details::CappedLog(d) => Some(&d.process_id),
            Details::Other(d) => d.str_field("sessionId"),
            _ => None,
        }
    }

    /// The output a finished command (or a poll) holds.
    pub fn aggregated(&self) -> Option<&str> {
        match self {
            Details::Finished(d) => Some(&d.aggregated),
            Details::Poll(d) => Some(&d.aggregated),
            Details::Other(d) => d.str_field("aggregated"),
            _ => None,
        }
    }

    /// The exit code of a command that ended with one.
    pub fn exit_code(&self) -> Option<i64> {
        match self {
            Details::Finished(d) => d.exit_code,
            Details::Poll(d) => d.exit_code,
            Details::Log(d) => d.exit_code,
            Details::CappedLog(d) => d.exit_code,
            Details::Other(d) => d.get("exitCode").and_then(Value::as_i64),
            _ => None,
        }
    }

    /// The signal moat sent that ended the command.
    pub fn exit_signal(&self) -> Option<&str> {
        match self {
            Details::Finished(d) => d.exit_signal.as_deref(),
            Details::Poll(d) => d.exit_signal.as_deref(),
            Details::Killed(d) => d.exit_signal.as_deref(),
            Details::Log(d) => d.exit_signal.as_deref(),
            Details::CappedLog(d) => d.exit_signal.as_deref(),
            Details::Other(d) => d.str_field("exitSignal"),
            _ => None,
        }
    }

    /// Whether moat ended the command at its timeout.
    pub fn timed_out(&self) -> bool {
        match self {
            Details::Finished(d) => d.timed_out,
            Details::Poll(d) => d.timed_out,
            Details::Other(d) => d.get("timedOut") == Some(&Value::Bool(true)),
            _ => false,
        }
    }

    /// Whether a sandbox limit cut the command short (or keeps it from starting).
    pub fn has_limit(&self) -> bool {
        match self {
            Details::Finished(d) => d.limit.is_some(),
            Details::Poll(d) => d.limit.is_some(),
            Details::NotStarted(_) => true,
            Details::Other(d) => d.get("limit").is_some_and(|l| !l.is_null()),
            _ => false,
        }
    }

    /// The wire object, for MCP's `structuredContent` and for tests that read fields by
    /// their wire names.
    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

/// The wire JSON text.
impl std::fmt::Display for Details {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let text = serde_json::to_string(self).map_err(|_| std::fmt::Error)?;
        f.write_str(&text)
    }
}
