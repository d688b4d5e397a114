//! The `process` tool's shapes (docs/mcp.md, "Tools": `process`): a poll, input sent, a
//! kill, the list of processes, and the three forms of `log`. The plain answers (`clear`,
//! `remove`, the errors) are [`super::Bare`].

use serde::{Deserialize, Serialize};

use crate::contract::status::{Limit, Status};

/// [`Details::Poll`](super::Details::Poll) (docs/mcp.md, `process poll`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Poll {
    /// The whole output kept in memory so far.
    pub aggregated: String,
    /// The exit status once it ended with one.
    pub exit_code: Option<i64>,
    /// The signal moat sent that ended it, if any.
    pub exit_signal: Option<String>,
    /// The sandbox limit that cut it short; absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<Limit>,
    /// While it runs: when to poll again (the back-off); absent once it ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_in_ms: Option<u64>,
    /// The process polled.
    #[serde(rename = "sessionId")]
    pub process_id: String,
    /// The process's own status: `running`, `completed` or `failed`.
    pub status: Status,
    /// Whether moat ended it at its timeout.
    pub timed_out: bool,
}

/// [`Details::Sent`](super::Details::Sent): `write`, `send-keys`, `submit` and `paste`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Sent {
    /// The process the input went to.
    #[serde(rename = "sessionId")]
    pub process_id: String,
    /// Always `running`: only a running process takes input.
    pub status: Status,
}

impl Sent {
    pub fn new(process_id: impl Into<String>) -> Self {
        Self {
            process_id: process_id.into(),
            status: Status::Running,
        }
    }
}

/// [`Details::Killed`](super::Details::Killed).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Killed {
    /// The signal that ended it, once its exit was seen; `null` before.
    pub exit_signal: Option<String>,
    /// The process ended.
    #[serde(rename = "sessionId")]
    pub process_id: String,
    /// Always `completed`: the kill is done, though the process it ended has failed (its
    /// own status says so on `poll` and `list`).
    pub status: Status,
}

/// [`Details::ProcessList`](super::Details::ProcessList).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProcessList {
    /// The session's processes, running and recent; empty when there are none.
    pub sessions: Vec<ProcessRow>,
    /// Always `completed`.
    pub status: Status,
}

/// One process in [`ProcessList`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ProcessRow {
    /// The command as the agent sent it (the text shows it escaped).
    pub command: String,
    /// Where it runs (or ran).
    pub cwd: String,
    /// When it ended, in milliseconds since the epoch; `null` while it runs.
    pub ended_at: Option<i64>,
    /// Its exit status, once it ended with one.
    pub exit_code: Option<i64>,
    /// The signal that ended it, if any.
    pub exit_signal: Option<String>,
    /// From its start to its end (or to now while it runs).
    pub runtime_ms: i64,
    /// The process id the other actions take.
    #[serde(rename = "sessionId")]
    pub process_id: String,
    /// Milliseconds since the epoch.
    pub started_at: i64,
    /// The process's own status: `running`, `completed` or `failed`.
    pub status: Status,
}

/// [`Details::Log`](super::Details::Log): a page of the process's record (docs/mcp.md,
/// `process log`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Log {
    /// Its exit status, once it ended with one.
    pub exit_code: Option<i64>,
    /// The signal that ended it, if any.
    pub exit_signal: Option<String>,
    /// The first line still recorded (older ones were dropped at `exec.spill_max_bytes`).
    pub first_line: u64,
    /// `[first, last]` of the lines shown; `null` when none are.
    pub lines: Option<[u64; 2]>,
    /// Whether output before the record's start was dropped.
    pub record_cut: bool,
    /// The process paged.
    #[serde(rename = "sessionId")]
    pub process_id: String,
    /// The process's own status.
    pub status: Status,
    /// The same as `totalLines`, under the name older clients read.
    pub total: u64,
    /// Characters of output seen so far (the capped view's count).
    pub total_chars: u64,
    /// The number of the last line recorded.
    pub total_lines: u64,
    /// Whether the page is not the whole output: the record or the page was cut.
    pub truncated: bool,
}

/// [`Details::CappedLog`](super::Details::CappedLog): the capped view by lines, for a
/// process without a record (its run directory could not be opened).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CappedLog {
    /// Its exit status, once it ended with one.
    pub exit_code: Option<i64>,
    /// The signal that ended it, if any.
    pub exit_signal: Option<String>,
    /// The process paged.
    #[serde(rename = "sessionId")]
    pub process_id: String,
    /// The process's own status.
    pub status: Status,
    /// The same as `totalLines`, under the name older clients read.
    pub total: u64,
    /// Characters of output seen so far.
    pub total_chars: u64,
    /// Lines in the capped view.
    pub total_lines: u64,
    /// Whether the cap cut the view.
    pub truncated: bool,
}

/// [`Details::EmptyLog`](super::Details::EmptyLog): a process without a record that printed
/// nothing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EmptyLog {
    /// The process's own status.
    pub status: Status,
    /// Always 0.
    pub total_chars: u64,
    /// Always 0.
    pub total_lines: u64,
}
