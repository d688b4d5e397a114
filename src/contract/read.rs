//! Reading `details` back (the CLI and `moat mcp` read the daemon's results): the status picks
//! the shapes it may be, and a shape is taken only when it holds the object exactly, so that
//! printing it again (`moat exec --json`) gives the very same text. Anything else, the other
//! tools' fields or what a different build of moat sends, stays as it came ([`Other`]).

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

/// The typed shape `value` is, or `Other`.
fn read(value: Value) -> Details {
    let status = value
        .get("status")
        .and_then(|s| Status::deserialize(s).ok());
    let typed = match status {
        Some(Status::ApprovalPending) => exact(&value).map(Details::Pending),
        Some(Status::Running) => exact(&value)
            .map(Details::Running)
            .or_else(|| exact(&value).map(Details::Poll)),
        Some(Status::Completed) => exact(&value)
            .map(Details::Finished)
            .or_else(|| exact(&value).map(Details::Poll)),
        Some(Status::Failed) => exact(&value)
            .map(Details::Denied)
            .or_else(|| exact(&value).map(Details::Finished))
            .or_else(|| exact(&value).map(Details::Poll))
            .or_else(|| exact(&value).map(Details::NotStarted)),
        None => None,
    };
    typed.unwrap_or_else(|| Details::Other(Other::read(value)))
}

/// `value` as a `T`, when `T` writes it back exactly: no field left out, none added, no
/// `null` written where the sender wrote none.
fn exact<T: Serialize + DeserializeOwned>(value: &Value) -> Option<T> {
    let typed: T = serde_json::from_value(value.clone()).ok()?;
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
            (json!({"sessionId": "a", "status": "running"}), "other"),
            (json!({"status": "failed"}), "other"),
            (json!("not an object"), "other"),
        ];
        for (value, want) in rows {
            let details = read(value.clone());
            let got = match &details {
                Details::Finished(_) => "finished",
                Details::Running(_) => "running",
                Details::Denied(_) => "denied",
                Details::Pending(_) => "pending",
                Details::NotStarted(_) => "not started",
                Details::Poll(_) => "poll",
                Details::Other(_) => "other",
            };
            assert_eq!(got, want, "{value}");
            assert_eq!(details.to_json(), value, "kept as it came");
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
}
