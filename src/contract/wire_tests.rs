//! The wire form of every result shape the contract builds, pinned byte for byte
//! (docs/mcp.md, "Results" and "Limits in results"; docs/http-api.md). The strings were taken
//! from the results as they were built with `json!` (keys sorted, absent values as `null`);
//! the typed results must serialize to exactly these, and read back from them unchanged (the
//! CLI and `moat mcp` read the daemon's results). The tools' own shapes are pinned over the
//! fake engine in `tools/wire_tests.rs`.

use super::*;
use crate::contract::ApprovalTarget;
use crate::contract::{ExitInfo, LimitHit, LimitKind};
use crate::store::{ApprovalRow, ApprovalStatus};

fn exit(code: Option<i64>, signal: Option<&str>, timed_out: bool) -> ExitInfo {
    ExitInfo {
        code,
        signal: signal.map(str::to_string),
        timed_out,
        finished_at_ms: 0,
    }
}

fn finished(code: Option<i64>, signal: Option<&str>, timed_out: bool, out: &str) -> ToolResult {
    finished_result(
        &exit(code, signal, timed_out),
        out.into(),
        false,
        5,
        "/workspace",
        Some(10),
    )
}

fn row(target: ApprovalTarget) -> ApprovalRow {
    ApprovalRow {
        id: "0123456789abcdef".into(),
        session: "main".into(),
        requester: "mcp:agent".into(),
        agent: None,
        target,
        command: "make deploy".into(),
        plan: "make deploy".into(),
        binding: "{}".into(),
        request: "{}".into(),
        reason: "ask pattern `make *`".into(),
        allowed: "allow-once,allow-always,deny".into(),
        persist: "[]".into(),
        covered: false,
        created_at_ms: 1000,
        expires_at_ms: 121000,
        status: ApprovalStatus::Pending,
        decision: None,
        decided_by: None,
        decided_at_ms: None,
        used_at_ms: None,
        process_id: None,
    }
}

/// Every shape the contract builds, by name, with its exact wire string.
fn pinned() -> Vec<(&'static str, ToolResult, &'static str)> {
    let memory = LimitHit {
        kind: LimitKind::Memory,
        value: Some(2 << 30),
    };
    let pids = LimitHit {
        kind: LimitKind::Pids,
        value: Some(512),
    };
    vec![
        (
            "finished ok",
            finished(Some(0), None, false, "hi\n"),
            r#"{"content":[{"type":"text","text":"hi"}],"details":{"aggregated":"hi\n","cwd":"/workspace","durationMs":5,"exitCode":0,"exitSignal":null,"status":"completed","timedOut":false,"truncated":false}}"#,
        ),
        (
            "finished with no output",
            finished(Some(0), None, false, ""),
            r#"{"content":[{"type":"text","text":"(no output)"}],"details":{"aggregated":"","cwd":"/workspace","durationMs":5,"exitCode":0,"exitSignal":null,"status":"completed","timedOut":false,"truncated":false}}"#,
        ),
        (
            "finished failed",
            finished(Some(3), None, false, "hi\n"),
            r#"{"content":[{"type":"text","text":"hi\n\nCommand exited with code 3"}],"details":{"aggregated":"hi\n","cwd":"/workspace","durationMs":5,"exitCode":3,"exitSignal":null,"status":"failed","timedOut":false,"truncated":false}}"#,
        ),
        (
            "finished timed out",
            finished(None, Some("SIGTERM"), true, ""),
            r#"{"content":[{"type":"text","text":"(no output)\n\nCommand timed out after 10 seconds. If it needs longer, re-run with a higher timeout (e.g. timeout=60), or start it with background=true and follow it with the process tool."}],"details":{"aggregated":"","cwd":"/workspace","durationMs":5,"exitCode":null,"exitSignal":"SIGTERM","status":"failed","timedOut":true,"truncated":false}}"#,
        ),
        (
            "finished by a signal",
            finished(None, Some("SIGKILL"), false, "x"),
            r#"{"content":[{"type":"text","text":"x\n\nCommand aborted by signal SIGKILL"}],"details":{"aggregated":"x","cwd":"/workspace","durationMs":5,"exitCode":null,"exitSignal":"SIGKILL","status":"failed","timedOut":false,"truncated":false}}"#,
        ),
        (
            "finished with no status",
            finished(None, None, false, "x"),
            r#"{"content":[{"type":"text","text":"x\n\nCommand aborted before exit code was captured"}],"details":{"aggregated":"x","cwd":"/workspace","durationMs":5,"exitCode":null,"exitSignal":null,"status":"failed","timedOut":false,"truncated":false}}"#,
        ),
        (
            "finished at the memory limit",
            with_limit(finished(None, Some("SIGKILL"), false, "x\n"), &memory),
            r#"{"content":[{"type":"text","text":"x\n\nCommand aborted by signal SIGKILL\n\nThe sandbox's memory limit (2 GiB) was reached: the kernel killed a process of this command to stay under it (sandbox.memory)."}],"details":{"aggregated":"x\n","cwd":"/workspace","durationMs":5,"exitCode":null,"exitSignal":"SIGKILL","limit":"memory","status":"failed","timedOut":false,"truncated":false}}"#,
        ),
        (
            "exit 0 at the pids limit",
            with_limit(finished(Some(0), None, false, ""), &pids),
            r#"{"content":[{"type":"text","text":"(no output)\n\nThe process limit (512) was reached: the sandbox refused to start more processes while this command ran (sandbox.pids_limit)."}],"details":{"aggregated":"","cwd":"/workspace","durationMs":5,"exitCode":0,"exitSignal":null,"limit":"pids","status":"failed","timedOut":false,"truncated":false}}"#,
        ),
        (
            "container removed",
            with_limit(
                finished(None, Some("SIGKILL"), false, ""),
                &LimitHit {
                    kind: LimitKind::ContainerRemoved,
                    value: None,
                },
            ),
            r#"{"content":[{"type":"text","text":"(no output)\n\nCommand aborted by signal SIGKILL\n\nThe session's container was removed while the command ran; the next command starts a new one (the workspace stays)."}],"details":{"aggregated":"","cwd":"/workspace","durationMs":5,"exitCode":null,"exitSignal":"SIGKILL","limit":"container-removed","status":"failed","timedOut":false,"truncated":false}}"#,
        ),
        (
            "finished, record kept for the log",
            with_record(
                finished_result(
                    &exit(Some(0), None, false),
                    "a\n".into(),
                    true,
                    5,
                    "/workspace",
                    None,
                ),
                "warm-river",
            ),
            r#"{"content":[{"type":"text","text":"a\n\n[Output truncated: the whole record is kept as session warm-river; page it with process log (offset/limit).]"}],"details":{"aggregated":"a\n","cwd":"/workspace","durationMs":5,"exitCode":0,"exitSignal":null,"sessionId":"warm-river","status":"completed","timedOut":false,"truncated":true}}"#,
        ),
        (
            "finished with a note and a warning",
            with_note(finished(Some(0), None, false, "ok\n"), "A note.")
                .with_warnings(&["config changed".into()]),
            r#"{"content":[{"type":"text","text":"Warning: config changed\nok\n\nA note."}],"details":{"aggregated":"ok\n","cwd":"/workspace","durationMs":5,"exitCode":0,"exitSignal":null,"status":"completed","timedOut":false,"truncated":false}}"#,
        ),
        (
            "running",
            running_result("warm-river", Some(7), 123, "/workspace", "tail".into()),
            r#"{"content":[{"type":"text","text":"Command still running (session warm-river, pid 7). Use process (list/poll/log/write/kill/clear/remove) for follow-up."}],"details":{"cwd":"/workspace","pid":7,"sessionId":"warm-river","startedAt":123,"status":"running","tail":"tail"}}"#,
        ),
        (
            "running, pid unknown",
            running_result("warm-river", None, 123, "/workspace", String::new()),
            r#"{"content":[{"type":"text","text":"Command still running (session warm-river, pid ?). Use process (list/poll/log/write/kill/clear/remove) for follow-up."}],"details":{"cwd":"/workspace","pid":null,"sessionId":"warm-river","startedAt":123,"status":"running","tail":""}}"#,
        ),
        (
            "not started in a container at its limit",
            ToolResult::new(
                "Command could not start (failed to exec).\n\nFull.".into(),
                Details::NotStarted(NotStarted {
                    cwd: "/workspace".into(),
                    limit: Limit::Pids,
                    status: Status::Failed,
                }),
            ),
            r#"{"content":[{"type":"text","text":"Command could not start (failed to exec).\n\nFull."}],"details":{"cwd":"/workspace","limit":"pids","status":"failed"}}"#,
        ),
        (
            "approval pending",
            crate::approvals::pending_result(
                &row(ApprovalTarget::Sandbox),
                "make deploy",
                "/workspace",
            ),
            r#"{"content":[{"type":"text","text":"Approval required (id 01234567). Approve to run; updates will arrive after completion.\nHost: sandbox\nCWD: /workspace\nCommand: make deploy\nReason: ask pattern `make *`\nAn operator decides with `moat approvals approve 01234567` (or `deny`); this tool cannot."}],"details":{"allowedDecisions":["allow-once","allow-always","deny"],"approvalId":"0123456789abcdef","approvalSlug":"01234567","command":"make deploy","cwd":"/workspace","expiresAtMs":121000,"host":"sandbox","reason":"ask pattern `make *`","status":"approval-pending"}}"#,
        ),
        (
            "approval pending on the host",
            crate::approvals::pending_result(
                &row(ApprovalTarget::HostFull),
                "make deploy",
                "/home/a",
            ),
            r#"{"content":[{"type":"text","text":"Approval required (id 01234567). Approve to run; updates will arrive after completion.\nHost: host\nCWD: /home/a\nCommand: make deploy\nReason: ask pattern `make *`\nAn operator decides with `moat approvals approve 01234567` (or `deny`); this tool cannot."}],"details":{"allowedDecisions":["allow-once","allow-always","deny"],"approvalId":"0123456789abcdef","approvalSlug":"01234567","command":"make deploy","cwd":"/home/a","expiresAtMs":121000,"host":"host","reason":"ask pattern `make *`","status":"approval-pending"}}"#,
        ),
    ]
}

#[test]
fn every_shape_serializes_as_pinned() {
    for (name, result, wire) in pinned() {
        assert_eq!(serde_json::to_string(&result).unwrap(), wire, "{name}");
    }
}

/// What the daemon sends, the CLI reads and prints again (`--json`) unchanged, and reads the
/// same status from.
#[test]
fn every_shape_reads_back_unchanged() {
    for (name, result, wire) in pinned() {
        let read: ToolResult = serde_json::from_str(wire).unwrap();
        assert_eq!(serde_json::to_string(&read).unwrap(), wire, "{name}");
        assert_eq!(read.status(), result.status(), "{name}");
        assert_eq!(read.is_error(), result.is_error(), "{name}");
        assert_eq!(read, result, "{name}");
    }
}

/// The other tools' shapes and shapes this build does not know are read and printed again
/// unchanged, never refused.
#[test]
fn other_shapes_read_back_unchanged() {
    let wires = [
        // `process` results, a file tool's, a refusal, a container too full to start in.
        r#"{"content":[{"type":"text","text":"Cleared session warm-river."}],"details":{"status":"completed"}}"#,
        r#"{"content":[{"type":"text","text":"No session found for x"}],"details":{"status":"failed"}}"#,
        r#"{"content":[{"type":"text","text":"Wrote 3 bytes to session warm-river."}],"details":{"sessionId":"warm-river","status":"running"}}"#,
        r#"{"content":[{"type":"text","text":"Created `a` (3 bytes)."}],"details":{"bytes":3,"created":true,"path":"a","status":"completed"}}"#,
        r#"{"content":[{"type":"text","text":"Exec denied (sandbox, security is deny): rm -rf /"}],"details":{"denied":true,"reason":"security is deny","status":"failed"}}"#,
        r#"{"content":[{"type":"text","text":"Command could not start (failed to x).\n\nFull."}],"details":{"cwd":"/workspace","limit":"pids","status":"failed"}}"#,
        // A finished result with a field this build does not know, a status it does not
        // know, no status at all, and a limit it does not know.
        r#"{"content":[{"type":"text","text":"hi"}],"details":{"aggregated":"hi\n","cwd":"/workspace","durationMs":5,"exitCode":0,"exitSignal":null,"newField":1,"status":"completed","timedOut":false,"truncated":false}}"#,
        r#"{"content":[{"type":"text","text":"hi"}],"details":{"status":"paused","x":[1,2]}}"#,
        r#"{"content":[{"type":"text","text":"hi"}],"details":{"x":true}}"#,
        r#"{"content":[{"type":"text","text":"hi"}],"details":{"aggregated":"","cwd":"/w","durationMs":5,"exitCode":null,"exitSignal":"SIGKILL","limit":"disk","status":"failed","timedOut":false,"truncated":false}}"#,
    ];
    for wire in wires {
        let read: ToolResult = serde_json::from_str(wire).unwrap();
        assert_eq!(serde_json::to_string(&read).unwrap(), wire);
    }
}
