//! The wire form of the results the tools build themselves (exec's refusals, every `process`
//! action, the file tools), pinned byte for byte over the fake engine (docs/mcp.md, "Tools"
//! and "Results"). The strings were taken from the results as they were built with `json!`;
//! the typed results must serialize to exactly these. What differs from run to run (process
//! ids, clock readings) is replaced before comparing, nothing else.

use std::sync::Arc;

use serde_json::json;

use crate::app::App;
use crate::config::{Config, ConfigSource};
use crate::contract::{Details, ToolResult};
use crate::home::Home;
use crate::runtime::fake_wrapper::{Play, Wrapper};
use crate::tools::ExecRequest;
use crate::tools::ProcessRequest;
use crate::tools::{FileCall, ListRequest, PatchRequest, ReadRequest, WriteRequest};

const SESSION: &str = "main";

/// An app over the fake engine: `sleep …` prints `tick` (`sleep quietly` nothing) and runs
/// until killed, anything else prints `built` and exits 0.
struct Moat {
    _dir: tempfile::TempDir,
    app: App,
}

impl Moat {
    fn new(config: Config) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let home = Home::at(dir.path());
        home.ensure_root().unwrap();
        let wrapper = Wrapper::new(dir.path().join("run"), |command: &str| {
            if command.starts_with("sleep") {
                let out = if command == "sleep quietly" {
                    ""
                } else {
                    "tick\n"
                };
                Play::UntilKilled {
                    out: out.into(),
                    ignores_term: false,
                }
            } else {
                Play::Exit {
                    out: "built\n".into(),
                    code: 0,
                }
            }
        });
        let source = ConfigSource {
            file: None,
            overrides: vec![],
        };
        let app = App::with_engine(home, config, source, Arc::new(wrapper.engine())).unwrap();
        Self { _dir: dir, app }
    }

    async fn exec(&self, req: ExecRequest) -> ToolResult {
        self.app.exec.run(SESSION, &req, true).await.unwrap()
    }

    async fn process(&self, req: serde_json::Value) -> ToolResult {
        let req: ProcessRequest = serde_json::from_value(req).unwrap();
        self.app.process.run(SESSION, &req).await
    }

    async fn files(&self, call: FileCall) -> ToolResult {
        self.app.files.call(SESSION, &call).await.unwrap()
    }
}

/// The wire string of `r` with the process ids `ids` read as `<id>`, `<id2>`, … and the
/// clock readings as 0.
fn wire(r: &ToolResult, ids: &[&str]) -> String {
    let mut s = serde_json::to_string(r).unwrap();
    for (n, id) in ids.iter().enumerate() {
        let name = if n == 0 {
            "<id>".to_string()
        } else {
            format!("<id{}>", n + 1)
        };
        s = s.replace(id, &name);
    }
    for key in ["startedAt", "endedAt", "runtimeMs", "durationMs"] {
        s = zero_numbers_after(&s, &format!("\"{key}\":"));
    }
    // The runtime `list` writes (`3s :: sleep 600`).
    s.split(" :: ")
        .map(|part| {
            let Some(head) = part.strip_suffix('s') else {
                return part.to_string();
            };
            let digits = head.trim_end_matches(|c: char| c.is_ascii_digit());
            if digits.len() == head.len() {
                part.to_string()
            } else {
                format!("{digits}0s")
            }
        })
        .collect::<Vec<_>>()
        .join(" :: ")
}

/// `s` with the number after each `prefix` replaced by 0.
fn zero_numbers_after(s: &str, prefix: &str) -> String {
    let mut out = String::new();
    let mut rest = s;
    while let Some(i) = rest.find(prefix) {
        let (head, tail) = rest.split_at(i + prefix.len());
        out.push_str(head);
        let digits = tail.len() - tail.trim_start_matches(|c: char| c.is_ascii_digit()).len();
        if digits > 0 {
            out.push('0');
        }
        rest = &tail[digits..];
    }
    out.push_str(rest);
    out
}

/// The process id a `running` result names.
fn process_id(r: &ToolResult) -> String {
    serde_json::to_value(r).unwrap()["details"]["sessionId"]
        .as_str()
        .unwrap()
        .to_string()
}

fn request(command: &str) -> ExecRequest {
    ExecRequest {
        command: command.into(),
        ..Default::default()
    }
}

/// Compares every `(name, actual, expected)`, reporting all mismatches at once; then reads
/// each back as the CLI does and checks that it is read as a typed shape (`Other` is only
/// for what another build sends) and prints again unchanged.
fn check(rows: &[(&str, String, &str)]) {
    let wrong: Vec<String> = rows
        .iter()
        .filter(|(_, actual, expected)| actual != expected)
        .map(|(name, actual, expected)| format!("{name}:\n  got  {actual}\n  want {expected}"))
        .collect();
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    for (name, actual, _) in rows {
        let read: ToolResult = serde_json::from_str(actual).unwrap();
        assert!(
            !matches!(read.details, Details::Other(_)),
            "{name}: read back untyped"
        );
        assert_eq!(&serde_json::to_string(&read).unwrap(), actual, "{name}");
    }
}

#[tokio::test]
async fn exec_refusals_are_pinned() {
    let mut config = Config::default();
    config.policy.sandbox.deny_patterns = vec!["rm *".into()];
    let moat = Moat::new(config);
    let denied = moat.exec(request("rm -rf /tmp/x")).await;
    let nested = format!("{}true; {}", "{ ".repeat(400), "}; ".repeat(400));
    let refused = moat.exec(request(&nested)).await;
    check(&[
        (
            "policy denial",
            wire(&denied, &[]),
            r#"{"content":[{"type":"text","text":"Exec denied (sandbox, segment 1 `rm -rf /tmp/x`: deny-pattern: rm *): rm -rf /tmp/x"}],"details":{"denied":true,"reason":"segment 1 `rm -rf /tmp/x`: deny-pattern: rm *","status":"failed"}}"#,
        ),
        (
            "parse bound refusal",
            wire(&refused, &[]),
            r#"{"content":[{"type":"text","text":"Exec denied (sandbox, command nests deeper than 32 levels): a command of 2006 bytes"}],"details":{"denied":true,"reason":"command nests deeper than 32 levels","status":"failed"}}"#,
        ),
    ]);
}

#[tokio::test]
async fn process_results_are_pinned() {
    let moat = Moat::new(Config::default());
    let quiet = moat
        .exec(ExecRequest {
            background: Some(true),
            ..request("sleep quietly")
        })
        .await;
    let quiet_id = process_id(&quiet);
    // `list` shows the newest first, by the millisecond.
    tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    let started = moat
        .exec(ExecRequest {
            background: Some(true),
            ..request("sleep 600")
        })
        .await;
    let id = process_id(&started);
    // Returns once the fake's command printed its line.
    let poll = moat
        .process(json!({"action": "poll", "sessionId": id, "timeout": 10000}))
        .await;
    let empty_poll = moat
        .process(json!({"action": "poll", "sessionId": id}))
        .await;
    let list = moat.process(json!({"action": "list"})).await;
    let log = moat
        .process(json!({"action": "log", "sessionId": id}))
        .await;
    let write = moat
        .process(json!({"action": "write", "sessionId": id, "data": "abc"}))
        .await;
    let keys = moat
        .process(json!({"action": "send-keys", "sessionId": id, "keys": ["Enter"]}))
        .await;
    let no_keys = moat
        .process(json!({"action": "send-keys", "sessionId": id}))
        .await;
    let kill = moat
        .process(json!({"action": "kill", "sessionId": id}))
        .await;
    let ended_poll = moat
        .process(json!({"action": "poll", "sessionId": id}))
        .await;
    let ended_list = moat.process(json!({"action": "list"})).await;
    let ended_log = moat
        .process(json!({"action": "log", "sessionId": id}))
        .await;
    let kill_again = moat
        .process(json!({"action": "kill", "sessionId": id}))
        .await;
    let clear = moat
        .process(json!({"action": "clear", "sessionId": id}))
        .await;
    let unknown = moat
        .process(json!({"action": "poll", "sessionId": "nope"}))
        .await;
    let bad = moat.process(json!({"action": "dance"})).await;
    let remove = moat
        .process(json!({"action": "remove", "sessionId": quiet_id}))
        .await;
    let empty_list = moat.process(json!({"action": "list"})).await;
    check(&[
        (
            "running",
            wire(&quiet, &[&quiet_id]),
            r#"{"content":[{"type":"text","text":"Command still running (session <id>, pid 100). Use process (list/poll/log/write/kill/clear/remove) for follow-up."}],"details":{"cwd":"/workspace","pid":100,"sessionId":"<id>","startedAt":0,"status":"running","tail":""}}"#,
        ),
        (
            "poll",
            wire(&poll, &[&id, &quiet_id]),
            r#"{"content":[{"type":"text","text":"tick\n\nProcess still running."}],"details":{"aggregated":"tick\n","exitCode":null,"exitSignal":null,"retryInMs":5000,"sessionId":"<id>","status":"running","timedOut":false}}"#,
        ),
        (
            "empty poll",
            wire(&empty_poll, &[&id, &quiet_id]),
            r#"{"content":[{"type":"text","text":"(no new output)\n\nProcess still running."}],"details":{"aggregated":"tick\n","exitCode":null,"exitSignal":null,"retryInMs":5000,"sessionId":"<id>","status":"running","timedOut":false}}"#,
        ),
        (
            "list",
            wire(&list, &[&id, &quiet_id]),
            r#"{"content":[{"type":"text","text":"<id> running   0s :: sleep 600\n<id2> running   0s :: sleep quietly"}],"details":{"sessions":[{"command":"sleep 600","cwd":"/workspace","endedAt":null,"exitCode":null,"exitSignal":null,"runtimeMs":0,"sessionId":"<id>","startedAt":0,"status":"running"},{"command":"sleep quietly","cwd":"/workspace","endedAt":null,"exitCode":null,"exitSignal":null,"runtimeMs":0,"sessionId":"<id2>","startedAt":0,"status":"running"}],"status":"completed"}}"#,
        ),
        (
            "log",
            wire(&log, &[&id, &quiet_id]),
            r#"{"content":[{"type":"text","text":"tick"}],"details":{"exitCode":null,"exitSignal":null,"firstLine":1,"lines":[1,1],"recordCut":false,"sessionId":"<id>","status":"running","total":1,"totalChars":5,"totalLines":1,"truncated":false}}"#,
        ),
        (
            "write",
            wire(&write, &[&id, &quiet_id]),
            r#"{"content":[{"type":"text","text":"Wrote 3 bytes to session <id>."}],"details":{"sessionId":"<id>","status":"running"}}"#,
        ),
        (
            "send-keys",
            wire(&keys, &[&id, &quiet_id]),
            r#"{"content":[{"type":"text","text":"Sent 1 bytes to session <id>."}],"details":{"sessionId":"<id>","status":"running"}}"#,
        ),
        (
            "send-keys with nothing",
            wire(&no_keys, &[&id, &quiet_id]),
            r#"{"content":[{"type":"text","text":"No key data provided."}],"details":{"status":"failed"}}"#,
        ),
        (
            "kill",
            wire(&kill, &[&id, &quiet_id]),
            r#"{"content":[{"type":"text","text":"Killed session <id>."}],"details":{"exitSignal":"SIGTERM","sessionId":"<id>","status":"completed"}}"#,
        ),
        (
            "poll after the kill",
            wire(&ended_poll, &[&id, &quiet_id]),
            r#"{"content":[{"type":"text","text":"(no new output)\n\nProcess exited with signal SIGTERM."}],"details":{"aggregated":"tick\n","exitCode":null,"exitSignal":"SIGTERM","sessionId":"<id>","status":"failed","timedOut":false}}"#,
        ),
        (
            "list after the kill",
            wire(&ended_list, &[&id, &quiet_id]),
            r#"{"content":[{"type":"text","text":"<id> failed    0s :: sleep 600\n<id2> running   0s :: sleep quietly"}],"details":{"sessions":[{"command":"sleep 600","cwd":"/workspace","endedAt":0,"exitCode":null,"exitSignal":"SIGTERM","runtimeMs":0,"sessionId":"<id>","startedAt":0,"status":"failed"},{"command":"sleep quietly","cwd":"/workspace","endedAt":null,"exitCode":null,"exitSignal":null,"runtimeMs":0,"sessionId":"<id2>","startedAt":0,"status":"running"}],"status":"completed"}}"#,
        ),
        (
            "log after the kill",
            wire(&ended_log, &[&id, &quiet_id]),
            r#"{"content":[{"type":"text","text":"tick"}],"details":{"exitCode":null,"exitSignal":"SIGTERM","firstLine":1,"lines":[1,1],"recordCut":false,"sessionId":"<id>","status":"failed","total":1,"totalChars":5,"totalLines":1,"truncated":false}}"#,
        ),
        (
            "kill again",
            wire(&kill_again, &[&id, &quiet_id]),
            r#"{"content":[{"type":"text","text":"No active session found for <id>"}],"details":{"status":"failed"}}"#,
        ),
        (
            "clear",
            wire(&clear, &[&id, &quiet_id]),
            r#"{"content":[{"type":"text","text":"Cleared session <id>."}],"details":{"status":"completed"}}"#,
        ),
        (
            "unknown id",
            wire(&unknown, &[&id, &quiet_id]),
            r#"{"content":[{"type":"text","text":"No session found for nope"}],"details":{"status":"failed"}}"#,
        ),
        (
            "empty list",
            wire(&empty_list, &[&id, &quiet_id]),
            r#"{"content":[{"type":"text","text":"No running or recent sessions."}],"details":{"sessions":[],"status":"completed"}}"#,
        ),
        (
            "unknown action",
            wire(&bad, &[&id, &quiet_id]),
            r#"{"content":[{"type":"text","text":"Unknown action dance"}],"details":{"status":"failed"}}"#,
        ),
        (
            "remove",
            wire(&remove, &[&quiet_id]),
            r#"{"content":[{"type":"text","text":"Removed session <id> (terminated)."}],"details":{"status":"completed"}}"#,
        ),
    ]);
}

#[tokio::test]
async fn file_results_are_pinned() {
    let moat = Moat::new(Config::default());
    let write = moat
        .files(FileCall::Write(WriteRequest {
            path: "a.txt".into(),
            content: "one\ntwo\n".into(),
            create_dirs: None,
        }))
        .await;
    let replace = moat
        .files(FileCall::Write(WriteRequest {
            path: "a.txt".into(),
            content: "one\ntwo\nthree\n".into(),
            create_dirs: None,
        }))
        .await;
    let read = moat
        .files(FileCall::Read(ReadRequest {
            path: "a.txt".into(),
            ..Default::default()
        }))
        .await;
    let read_bytes = moat
        .files(FileCall::Read(ReadRequest {
            path: "a.txt".into(),
            byte_offset: Some(4),
            byte_limit: Some(3),
            ..Default::default()
        }))
        .await;
    moat.files(FileCall::Write(WriteRequest {
        path: "bin".into(),
        content: "a\0b".into(),
        create_dirs: None,
    }))
    .await;
    let binary = moat
        .files(FileCall::Read(ReadRequest {
            path: "bin".into(),
            ..Default::default()
        }))
        .await;
    let list = moat
        .files(FileCall::List(ListRequest {
            path: None,
            limit: None,
        }))
        .await;
    let patch = moat
        .files(FileCall::Patch(PatchRequest {
            input: "*** Begin Patch\n*** Add File: b.txt\n+hi\n*** End Patch\n".into(),
        }))
        .await;
    let mut deny = Config::default();
    deny.policy.sandbox.security = crate::policy::Security::Deny;
    let denied = Moat::new(deny)
        .files(FileCall::Write(WriteRequest {
            path: "a.txt".into(),
            content: "x".into(),
            create_dirs: None,
        }))
        .await;
    check(&[
        (
            "write",
            wire(&write, &[]),
            r#"{"content":[{"type":"text","text":"Created `a.txt` (8 bytes)."}],"details":{"bytes":8,"created":true,"path":"a.txt","status":"completed"}}"#,
        ),
        (
            "replace",
            wire(&replace, &[]),
            r#"{"content":[{"type":"text","text":"Replaced `a.txt` (14 bytes)."}],"details":{"bytes":14,"created":false,"path":"a.txt","status":"completed"}}"#,
        ),
        (
            "read",
            wire(&read, &[]),
            r#"{"content":[{"type":"text","text":"one\ntwo\nthree\n"}],"details":{"lines":3,"more":false,"offset":1,"path":"a.txt","size":14,"status":"completed"}}"#,
        ),
        (
            "read by bytes",
            wire(&read_bytes, &[]),
            r#"{"content":[{"type":"text","text":"two\n\n[Bytes 4-7 of 14; pass byteOffset=7 to read on.]"}],"details":{"byteOffset":4,"bytes":3,"more":true,"path":"a.txt","size":14,"status":"completed"}}"#,
        ),
        (
            "binary",
            wire(&binary, &[]),
            r#"{"content":[{"type":"text","text":"`bin` is a binary file (3 bytes); its content is not shown."}],"details":{"binary":true,"path":"bin","size":3,"status":"completed"}}"#,
        ),
        (
            "list",
            wire(&list, &[]),
            r#"{"content":[{"type":"text","text":"a.txt  14 bytes\nbin  3 bytes\n"}],"details":{"entries":[{"name":"a.txt","size":14,"type":"file"},{"name":"bin","size":3,"type":"file"}],"more":false,"path":".","status":"completed","total":2}}"#,
        ),
        (
            "patch",
            wire(&patch, &[]),
            r#"{"content":[{"type":"text","text":"The patch applied:\nA b.txt"}],"details":{"files":["A b.txt"],"status":"completed"}}"#,
        ),
        (
            "denied",
            wire(&denied, &[]),
            r#"{"content":[{"type":"text","text":"Write denied (sandbox, security is deny): write_file `a.txt`. Only read_file and list_dir work in this session."}],"details":{"denied":true,"reason":"security is deny","status":"failed"}}"#,
        ),
    ]);
}
