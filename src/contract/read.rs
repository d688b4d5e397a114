//! Reading `details` back (the CLI and `moat mcp` read the daemon's results): the status picks
//! the shapes it may be, and a shape is taken only when it holds the object exactly, so that
//! printing it again (`moat exec --json`) gives the very same text. Anything else, what a
//! different build of moat sends, stays as it came ([`Other`]).

use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

use super::details::{Details, Other};
use super::status::Status;

impl<'de> Deserialize<'de> for Details {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(read(Value::deserialize(d)?))
    }
}

/// Reads `value` as one shape, if it is that shape exactly.
type Reader = fn(&Value) -> Option<Details>;

/// The typed shape `value` is, or `Other`. The status narrows the shapes to try: each
/// builder gives its shape only the statuses listed here.
fn read(value: Value) -> Details {
    let status = value
        .get("status")
        .and_then(|s| Status::deserialize(s).ok());
    let readers: &[Reader] = match status {
        Some(Status::ApprovalPending) => &[|v| exact(v).map(Details::Pending)],
        Some(Status::Running) => &[
            |v| exact(v).map(Details::Running),
            |v| exact(v).map(Details::Poll),
            |v| exact(v).map(Details::Sent),
            |v| exact(v).map(Details::Log),
            |v| exact(v).map(Details::CappedLog),
            |v| exact(v).map(Details::EmptyLog),
        ],
        Some(Status::Completed) => &[
            |v| exact(v).map(Details::Finished),
            |v| exact(v).map(Details::Poll),
            |v| exact(v).map(Details::Bare),
            |v| exact(v).map(Details::Killed),
            |v| exact(v).map(Details::ProcessList),
            |v| exact(v).map(Details::Log),
            |v| exact(v).map(Details::CappedLog),
            |v| exact(v).map(Details::EmptyLog),
            |v| exact(v).map(Details::FileLines),
            |v| exact(v).map(Details::FileBytes),
            |v| exact(v).map(Details::BinaryFile),
            |v| exact(v).map(Details::FileWritten),
            |v| exact(v).map(Details::DirListing),
            |v| exact(v).map(Details::Patched),
        ],
        Some(Status::Failed) => &[
            |v| exact(v).map(Details::Denied),
            |v| exact(v).map(Details::Finished),
            |v| exact(v).map(Details::Poll),
            |v| exact(v).map(Details::NotStarted),
            |v| exact(v).map(Details::Bare),
            |v| exact(v).map(Details::Log),
            |v| exact(v).map(Details::CappedLog),
            |v| exact(v).map(Details::EmptyLog),
        ],
        None => &[],
    };
    readers
        .iter()
        .find_map(|reader| reader(&value))
        .unwrap_or_else(|| Details::Other(Other::read(value)))
}

/// `value` as a `T`, when `T` writes it back exactly: no field left out, none added, no
/// `null` written where the sender wrote none. Read from the borrowed value, so a shape that
/// does not fit costs no copy of a large output.
fn exact<T: Serialize + DeserializeOwned>(value: &Value) -> Option<T> {
    let typed = T::deserialize(value).ok()?;
    (serde_json::to_value(&typed).ok()? == *value).then_some(typed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Each shape is read as its own type; near misses stay as they came.
    #[test]
    fn shapes_are_told_apart() {
        let rows = [
            (
                json!({"aggregated": "", "cwd": "/w", "durationMs": 1, "exitCode": 0, "exitSignal": null, "status": "completed", "timedOut": false, "truncated": false}),
                "finished",
            ),
            (
                json!({"cwd": "/w", "pid": null, "sessionId": "a", "startedAt": 1, "status": "running", "tail": ""}),
                "running",
            ),
            (
                json!({"denied": true, "reason": "r", "status": "failed"}),
                "denied",
            ),
            (
                json!({"cwd": "/w", "limit": "pids", "status": "failed"}),
                "not started",
            ),
            (
                json!({"aggregated": "", "exitCode": null, "exitSignal": null, "retryInMs": 5000, "sessionId": "a", "status": "running", "timedOut": false}),
                "poll",
            ),
            (
                json!({"aggregated": "", "exitCode": 3, "exitSignal": null, "limit": "memory", "sessionId": "a", "status": "failed", "timedOut": false}),
                "poll",
            ),
            // A finished result without its `exitSignal: null` is not the shape moat sends.
            (
                json!({"aggregated": "", "cwd": "/w", "durationMs": 1, "exitCode": 0, "status": "completed", "timedOut": false, "truncated": false}),
                "other",
            ),
            // A status that does not go with the shape.
            (
                json!({"denied": true, "reason": "r", "status": "completed"}),
                "other",
            ),
            (json!({"sessionId": "a", "status": "running"}), "sent"),
            (json!({"status": "failed"}), "bare"),
            (json!({"status": "completed"}), "bare"),
            (json!("not an object"), "other"),
            // The process tool's shapes.
            (
                json!({"exitSignal": "SIGTERM", "sessionId": "a", "status": "completed"}),
                "killed",
            ),
            (
                json!({"exitSignal": null, "sessionId": "a", "status": "completed"}),
                "killed",
            ),
            (json!({"sessions": [], "status": "completed"}), "list"),
            (
                json!({"sessions": [{"command": "sleep 1", "cwd": "/w", "endedAt": 5, "exitCode": 0, "exitSignal": null, "runtimeMs": 4, "sessionId": "a", "startedAt": 1, "status": "completed"}], "status": "completed"}),
                "list",
            ),
            (
                json!({"exitCode": null, "exitSignal": null, "firstLine": 1, "lines": [1, 3], "recordCut": false, "sessionId": "a", "status": "running", "total": 3, "totalChars": 12, "totalLines": 3, "truncated": false}),
                "log",
            ),
            (
                json!({"exitCode": 2, "exitSignal": null, "firstLine": 40, "lines": null, "recordCut": true, "sessionId": "a", "status": "failed", "total": 90, "totalChars": 900, "totalLines": 90, "truncated": true}),
                "log",
            ),
            (
                json!({"exitCode": 0, "exitSignal": null, "sessionId": "a", "status": "completed", "total": 2, "totalChars": 8, "totalLines": 2, "truncated": false}),
                "capped log",
            ),
            (
                json!({"status": "running", "totalChars": 0, "totalLines": 0}),
                "empty log",
            ),
            // The file tools' shapes.
            (
                json!({"lines": 3, "more": false, "offset": 1, "path": "a.txt", "size": 14, "status": "completed"}),
                "file lines",
            ),
            (
                json!({"byteOffset": 4, "bytes": 3, "more": true, "path": "a.txt", "size": 14, "status": "completed"}),
                "file bytes",
            ),
            (
                json!({"binary": true, "path": "bin", "size": 3, "status": "completed"}),
                "binary file",
            ),
            (
                json!({"bytes": 8, "created": true, "path": "a.txt", "status": "completed"}),
                "file written",
            ),
            (
                json!({"entries": [{"name": "d", "size": 0, "type": "dir"}, {"name": "l", "size": 3, "type": "symlink"}], "more": true, "path": ".", "status": "completed", "total": 9}),
                "dir listing",
            ),
            (
                json!({"files": ["A b.txt", "D c.txt"], "status": "completed"}),
                "patched",
            ),
            (
                json!({"allowedDecisions": ["allow-once", "allow-always", "deny"], "approvalId": "abc", "approvalSlug": "abc", "command": "c", "cwd": "/w", "expiresAtMs": 1, "host": "host", "reason": "r", "status": "approval-pending"}),
                "pending",
            ),
            // Near misses of the new shapes: a status the builder never gives, a word this
            // build does not know, a field missing or added.
            (json!({"sessionId": "a", "status": "completed"}), "other"),
            (json!({"status": "approval-pending"}), "other"),
            (
                json!({"exitSignal": "SIGTERM", "sessionId": "a", "status": "running"}),
                "other",
            ),
            (
                json!({"exitCode": 0, "exitSignal": null, "sessionId": "a", "status": "completed", "total": 2, "totalLines": 2, "truncated": false}),
                "other",
            ),
            (
                json!({"entries": [{"name": "p", "size": 0, "type": "fifo"}], "more": false, "path": ".", "status": "completed", "total": 1}),
                "other",
            ),
            (
                json!({"allowedDecisions": ["maybe"], "approvalId": "abc", "approvalSlug": "abc", "command": "c", "cwd": "/w", "expiresAtMs": 1, "host": "sandbox", "reason": "r", "status": "approval-pending"}),
                "other",
            ),
            (
                json!({"allowedDecisions": ["deny"], "approvalId": "abc", "approvalSlug": "abc", "command": "c", "cwd": "/w", "expiresAtMs": 1, "host": "host-full", "reason": "r", "status": "approval-pending"}),
                "other",
            ),
            (
                json!({"files": [], "status": "completed", "warnings": []}),
                "other",
            ),
            (
                json!({"bytes": -1, "created": true, "path": "a", "status": "completed"}),
                "other",
            ),
            (json!({"status": "failed", "totalChars": 0}), "other"),
        ];
        for (value, want) in rows {
            let details = read(value.clone());
            assert_eq!(name(&details), want, "{value}");
            assert_eq!(details.to_json(), value, "kept as it came");
            // Byte for byte: a typed shape writes its keys in the order `json!` sorts them.
            assert_eq!(
                details.to_string(),
                serde_json::to_string(&value).unwrap(),
                "{want}: the keys in wire order"
            );
        }
    }

    /// The shape `details` was read as, for the tables.
    fn name(details: &Details) -> &'static str {
        match details {
            Details::Finished(_) => "finished",
            Details::Running(_) => "running",
            Details::Denied(_) => "denied",
            Details::Pending(_) => "pending",
            Details::NotStarted(_) => "not started",
            Details::Poll(_) => "poll",
            Details::Bare(_) => "bare",
            Details::Sent(_) => "sent",
            Details::Killed(_) => "killed",
            Details::ProcessList(_) => "list",
            Details::Log(_) => "log",
            Details::CappedLog(_) => "capped log",
            Details::EmptyLog(_) => "empty log",
            Details::FileLines(_) => "file lines",
            Details::FileBytes(_) => "file bytes",
            Details::BinaryFile(_) => "binary file",
            Details::FileWritten(_) => "file written",
            Details::DirListing(_) => "dir listing",
            Details::Patched(_) => "patched",
            Details::Other(_) => "other",
        }
    }

    /// The reads the edges make work on every shape, typed or not.
    #[test]
    fn edges_read_the_same_from_typed_and_other() {
        let finished = read(
            json!({"aggregated": "out", "cwd": "/w", "durationMs": 1, "exitCode": 3, "exitSignal": "SIGKILL", "limit": "pids", "sessionId": "p", "status": "failed", "timedOut": true, "truncated": true}),
        );
        let other = read(
            json!({"aggregated": "out", "exitCode": 3, "exitSignal": "SIGKILL", "limit": "disk", "sessionId": "p", "status": "failed", "timedOut": true, "new": 1}),
        );
        assert!(matches!(finished, Details::Finished(_)));
        assert!(matches!(other, Details::Other(_)));
        for d in [finished, other] {
            assert_eq!(d.status(), Some(Status::Failed));
            assert_eq!(d.aggregated(), Some("out"));
            assert_eq!(d.exit_code(), Some(3));
            assert_eq!(d.exit_signal(), Some("SIGKILL"));
            assert_eq!(d.process_id(), Some("p"));
            assert!(d.timed_out());
            assert!(d.has_limit());
            assert!(!d.is_denied());
        }
        let unknown = read(json!({"status": "paused"}));
        assert_eq!(unknown.status(), None);
        let pending = read(
            json!({"allowedDecisions": ["deny"], "approvalId": "abc", "approvalSlug": "abc", "command": "c", "cwd": "/w", "expiresAtMs": 1, "host": "sandbox", "reason": "r", "status": "approval-pending"}),
        );
        assert!(matches!(pending, Details::Pending(_)));
        assert_eq!(pending.approval_id(), Some("abc"));
        assert!(read(json!({"denied": true, "reason": "r", "status": "failed"})).is_denied());
    }

    /// The process tool's typed shapes answer the edges' reads as their `Other` form did:
    /// `moat process` exits 0 on an error result that names a process.
    #[test]
    fn process_shapes_keep_their_edge_reads() {
        let killed =
            read(json!({"exitSignal": "SIGTERM", "sessionId": "p", "status": "completed"}));
        assert!(matches!(killed, Details::Killed(_)));
        assert_eq!(killed.process_id(), Some("p"));
        assert_eq!(killed.exit_signal(), Some("SIGTERM"));
        let sent = read(json!({"sessionId": "p", "status": "running"}));
        assert!(matches!(sent, Details::Sent(_)));
        assert_eq!(sent.process_id(), Some("p"));
        let log = read(
            json!({"exitCode": 4, "exitSignal": null, "firstLine": 1, "lines": null, "recordCut": false, "sessionId": "p", "status": "failed", "total": 0, "totalChars": 0, "totalLines": 0, "truncated": false}),
        );
        assert!(matches!(log, Details::Log(_)));
        assert_eq!(log.process_id(), Some("p"));
        assert_eq!(log.exit_code(), Some(4));
        let bare = read(json!({"status": "failed"}));
        assert_eq!(bare, Details::bare(Status::Failed));
        assert_eq!(bare.process_id(), None);
        assert!(!bare.is_denied());
    }
}
