//! The exec tool's two switches and the MCP texts, through the real `moat mcp` (stdio) as a
//! client starts it (docs/mcp.md, "Without the process tool", "Notifications", "Errors in
//! the tool's words"):
//!
//! - without the process tool (`exec.process_tool = false`, or `moat mcp --no-process-tool`)
//!   `tools/list` has no `process` and exec runs a command to its end whatever
//!   `yieldMs`/`background` say; the control, a default server, backgrounds the same call;
//! - with `exec.notify_on_exit = false` a background exit sends no notification; the control,
//!   a default server, sends one for the same command;
//! - every refusal `moat mcp` answers reads as the tool's own sentence.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::cli_home::TestHome;
use serde_json::{json, Value};

/// One `moat mcp` of a home, initialized; its output line by line.
struct Mcp {
    child: Child,
    stdin: ChildStdin,
    lines: mpsc::Receiver<Value>,
    next_id: i64,
}

impl Mcp {
    fn start(home: &TestHome, session: &str, extra: &[&str]) -> Self {
        let mut child = home
            .moat()
            .args(["mcp", "--session", session])
            .args(extra)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                let v: Value = serde_json::from_str(&line).unwrap();
                if tx.send(v).is_err() {
                    return;
                }
            }
        });
        let mut mcp = Self {
            stdin: child.stdin.take().unwrap(),
            child,
            lines,
            next_id: 0,
        };
        let init = mcp.request(
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "t", "version": "0"}}),
        );
        assert!(init["result"].is_object(), "{init}");
        mcp.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        mcp
    }

    fn send(&mut self, v: Value) {
        writeln!(self.stdin, "{v}").unwrap();
        self.stdin.flush().unwrap();
    }

    /// One request and its answer (notifications on the way are dropped).
    fn request(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        loop {
            let v = self
                .lines
                .recv_timeout(Duration::from_secs(120))
                .expect("an answer from moat mcp within 120 s");
            if v["id"] == id {
                return v;
            }
        }
    }

    fn call(&mut self, name: &str, arguments: Value) -> Value {
        self.request("tools/call", json!({"name": name, "arguments": arguments}))
    }

    fn tool_names(&mut self) -> Vec<String> {
        let v = self.request("tools/list", json!({}));
        v["result"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_string())
            .collect()
    }

    /// The event notifications that arrive within `wait`.
    fn notifications(&mut self, wait: Duration) -> Vec<String> {
        let end = Instant::now() + wait;
        let mut out = Vec::new();
        while let Some(left) = end.checked_duration_since(Instant::now()) {
            match self.lines.recv_timeout(left) {
                Ok(v) if v["method"] == "notifications/message" => {
                    out.push(v["params"]["data"].as_str().unwrap_or_default().to_string())
                }
                Ok(_) => {}
                Err(_) => break,
            }
        }
        out
    }
}

impl Drop for Mcp {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn text(result: &Value) -> String {
    result["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// `background: true` with a short yield: a default server returns `running` (the control),
/// a server without the process tool waits for the end and returns the output.
#[tokio::test]
async fn without_the_process_tool_exec_runs_to_its_end() {
    if common::engine().await.is_none() {
        return;
    }
    let args = json!({"command": "sleep 1; echo done-at-end", "background": true, "yieldMs": 10});

    // Control: the process tool is there, and the call is backgrounded.
    let home = TestHome::new("t-mcp-np0");
    let mut mcp = Mcp::start(&home, &home.key("a"), &[]);
    assert!(mcp.tool_names().contains(&"process".to_string()));
    let r = mcp.call("exec", args.clone());
    assert_eq!(r["result"]["structuredContent"]["status"], "running", "{r}");
    drop(mcp);

    // The config switch, and the per-server flag on a default config.
    let by_config = TestHome::configured("t-mcp-np1", "[exec]\nprocess_tool = false\n");
    let by_flag = TestHome::new("t-mcp-np2");
    for (home, flag) in [
        (&by_config, &[][..]),
        (&by_flag, &["--no-process-tool"][..]),
    ] {
        let mut mcp = Mcp::start(home, &home.key("a"), flag);
        let names = mcp.tool_names();
        assert_eq!(
            names,
            ["exec", "read_file", "write_file", "list_dir", "apply_patch"],
            "{flag:?}"
        );
        let started = Instant::now();
        let r = mcp.call("exec", args.clone());
        assert_eq!(
            r["result"]["structuredContent"]["status"], "completed",
            "{flag:?}: {r}"
        );
        assert!(text(&r).contains("done-at-end"), "{flag:?}: {r}");
        assert!(started.elapsed() >= Duration::from_secs(1));
        // The unlisted tool is not callable either.
        let r = mcp.call("process", json!({"action": "list"}));
        let message = r["error"]["message"].as_str().unwrap_or_default();
        assert!(
            message.starts_with("Unknown tool process: this server has exec, read_file"),
            "{r}"
        );
    }
}

/// A background exit is notified by default (the control) and not with
/// `exec.notify_on_exit = false`; the process still reports its end to `poll`.
#[tokio::test]
async fn notify_on_exit_off_sends_no_exit_notification() {
    if common::engine().await.is_none() {
        return;
    }
    for (prefix, config, notified) in [
        ("t-mcp-ne0", "", true),
        ("t-mcp-ne1", "[exec]\nnotify_on_exit = false\n", false),
        ("t-mcp-ne2", "[exec]\nnotifyOnExit = false\n", false),
    ] {
        let home = TestHome::configured(prefix, config);
        let mut mcp = Mcp::start(&home, &home.key("a"), &[]);
        let r = mcp.call(
            "exec",
            json!({"command": "echo tick-tock", "background": true}),
        );
        let id = r["result"]["structuredContent"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("{r}"))
            .to_string();
        let events = mcp.notifications(Duration::from_secs(6));
        let exits: Vec<_> = events
            .iter()
            .filter(|e| e.starts_with("Exec completed") && e.contains("tick-tock"))
            .collect();
        assert_eq!(!exits.is_empty(), notified, "{config:?}: {events:?}");
        let r = mcp.call(
            "process",
            json!({"action": "poll", "sessionId": id, "timeout": 5000}),
        );
        assert_eq!(
            r["result"]["structuredContent"]["status"], "completed",
            "{r}"
        );
    }
}

/// Every refusal `moat mcp` answers, as the model reads it: the tool's own sentences, and
/// the daemon's "failed to …" fragments completed as "Failed to …", never "Failed to" before
/// a sentence ("Failed to sessionId is required …").
#[test]
fn refusals_read_as_the_tools_sentences() {
    let home = TestHome::new("t-mcp-tx");
    let mut mcp = Mcp::start(&home, &home.key("a"), &[]);
    let rows: &[(&str, Value, &str)] = &[
        (
            "process",
            json!({"action": "poll"}),
            "sessionId is required for this action.",
        ),
        (
            "process",
            json!({"action": "kill", "sessionId": "  "}),
            "sessionId is required for this action.",
        ),
        (
            "process",
            json!({"action": "dance"}),
            "Unknown action dance",
        ),
        (
            "process",
            json!({"action": "list", "bogus": 1}),
            "Invalid process arguments: unknown field `bogus`",
        ),
        (
            "exec",
            json!({"command": ""}),
            "Provide a command to start.",
        ),
        ("exec", json!({}), "Provide a command to start."),
        (
            "exec",
            json!({"command": "true", "host": "example.com"}),
            "Failed to run on host `example.com`: host accepts only auto, sandbox, gateway, host or node",
        ),
        (
            "exec",
            json!({"command": "true", "host": "node"}),
            "Failed to run on a node: name it with `node`",
        ),
        (
            "exec",
            json!({"command": "true", "host": "node", "node": "nowhere"}),
            "Failed to reach node `nowhere`: no such node is paired here",
        ),
        (
            "exec",
            json!({"command": "true", "node": "n1"}),
            "Failed to run on node `n1`: set host to `node` as well",
        ),
        (
            "exec",
            json!({"command": "a\u{0}b"}),
            "Failed to start the command: it contains a NUL byte",
        ),
        (
            "exec",
            json!({"command": "true", "bogus": 1}),
            "Invalid exec arguments: unknown field `bogus`",
        ),
        (
            "read_file",
            json!({"path": "../../etc/passwd"}),
            "Failed to use path `../../etc/passwd`",
        ),
    ];
    for (tool, args, want) in rows {
        let r = mcp.call(tool, args.clone());
        assert_eq!(r["result"]["isError"], true, "{tool} {args}: {r}");
        let got = text(&r);
        assert!(got.starts_with(want), "{tool} {args}: {got}");
        assert_reads_as_sentence(&got);
    }
    let r = mcp.call("nope", json!({}));
    let message = r["error"]["message"].as_str().unwrap_or_default();
    assert_eq!(
        message,
        "Unknown tool nope: this server has exec, process, read_file, write_file, list_dir, apply_patch."
    );
}

/// A sentence: a capital first (or the wire's field name, as in the tool's documented
/// "sessionId is required for this action."), and no "failed to" glued before a capitalised
/// word or to another "failed to".
fn assert_reads_as_sentence(text: &str) {
    assert!(
        text.starts_with(|c: char| c.is_uppercase()) || text.starts_with("sessionId "),
        "{text}"
    );
    let lower = text.to_lowercase();
    assert!(!lower.contains("failed to failed to"), "{text}");
    for (i, _) in lower.match_indices("failed to ") {
        let next = text[i + "failed to ".len()..].chars().next().unwrap_or(' ');
        assert!(
            !next.is_uppercase(),
            "`failed to` before a sentence: {text}"
        );
    }
}
