//! `moat mcp` over stdio against malformed input, as a hostile or broken client sends it: each
//! bad line is answered with a JSON-RPC error (id null), a huge line without a newline does not
//! grow moat's memory, and the server keeps serving the lines after them (docs/mcp.md,
//! "Malformed input").

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::{json, Value};

/// A running `moat mcp` with its own home, and its answers line by line.
struct Mcp {
    child: Child,
    stdin: Option<ChildStdin>,
    answers: mpsc::Receiver<String>,
    _home: tempfile::TempDir,
}

impl Mcp {
    fn start() -> Self {
        let home = tempfile::tempdir().unwrap();
        let mut child = Command::new(env!("CARGO_BIN_EXE_moat"))
            .args(["mcp", "--session", "framing"])
            .env("MOAT_HOME", home.path())
            .env_remove("MOAT_SESSION")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, answers) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        Self {
            stdin: child.stdin.take(),
            child,
            answers,
            _home: home,
        }
    }

    fn send(&mut self, bytes: &[u8]) {
        let stdin = self.stdin.as_mut().unwrap();
        stdin.write_all(bytes).unwrap();
        stdin.flush().unwrap();
    }

    /// The next answer that is not a notification.
    fn answer(&self) -> Value {
        loop {
            let line = self
                .answers
                .recv_timeout(Duration::from_secs(30))
                .expect("an answer from moat mcp within 30 s");
            let v: Value = serde_json::from_str(&line)
                .unwrap_or_else(|e| panic!("moat wrote a line that is not JSON ({e}): {line}"));
            if v.get("method").is_none() {
                return v;
            }
        }
    }

    fn rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap()
    }
}

impl Drop for Mcp {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn assert_error(v: &Value, code: i64, what: &str) {
    assert_eq!(v["jsonrpc"], "2.0", "{what}: {v}");
    assert_eq!(v["error"]["code"], code, "{what}: {v}");
    assert!(
        v.as_object().unwrap().get("id") == Some(&Value::Null),
        "{what}: the id must be null: {v}"
    );
}

fn line(v: Value) -> Vec<u8> {
    let mut bytes = serde_json::to_vec(&v).unwrap();
    bytes.push(b'\n');
    bytes
}

#[test]
fn malformed_lines_are_answered_and_the_server_keeps_serving() {
    let mut mcp = Mcp::start();

    // Before the handshake: garbage, a message cut short, bytes that are not UTF-8.
    mcp.send(b"this is not json\n");
    assert_error(&mcp.answer(), -32700, "garbage");
    mcp.send(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initi\n");
    assert_error(&mcp.answer(), -32700, "cut short");
    mcp.send(b"\xff\xfe\xfd\x80\n");
    assert_error(&mcp.answer(), -32700, "not UTF-8");
    mcp.send(b"{\"jsonrpc\":\"2.0\",\"method\":\"x\",\"params\":\"\xc3\x28\"}\n");
    assert_error(&mcp.answer(), -32700, "not UTF-8 inside a string");

    // A line far over the bound, with no newline for a long time: refused at once, and moat's
    // memory does not follow it.
    let before = mcp.rss_kib();
    let block = vec![b'a'; 1 << 20];
    for _ in 0..48 {
        mcp.send(&block);
    }
    let refused = mcp.answer();
    assert_error(&refused, -32600, "oversized line");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("1048576 bytes"),
        "{refused}"
    );
    let grown = mcp.rss_kib().saturating_sub(before);
    assert!(
        grown < 16 * 1024,
        "moat mcp grew by {grown} KiB on a 48 MiB line"
    );
    // The rest of that line is skipped up to its newline; the next line is read again.
    mcp.send(b"still the long line\n");

    mcp.send(&line(json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "framing-test", "version": "0"}
        }
    })));
    let init = mcp.answer();
    assert_eq!(init["id"], 1, "{init}");
    assert_eq!(init["result"]["serverInfo"]["name"], "moat", "{init}");
    mcp.send(&line(
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    ));

    // After the handshake too, and a well-formed message that is no request.
    mcp.send(b"{]\n");
    assert_error(&mcp.answer(), -32700, "garbage after initialize");
    mcp.send(b"[1,2,3]\n");
    assert_error(&mcp.answer(), -32600, "not a message");

    mcp.send(&line(
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
    ));
    let tools = mcp.answer();
    assert_eq!(tools["id"], 2, "{tools}");
    let names: Vec<&str> = tools["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(
        names.contains(&"exec") && names.contains(&"process"),
        "{names:?}"
    );

    // Input that ends in the middle of a message is answered too, then moat exits.
    mcp.send(b"{\"jsonrpc\":\"2.0\",\"id\":3,");
    drop(mcp.stdin.take());
    assert_error(&mcp.answer(), -32700, "cut off by the end of input");
    let status = mcp.child.wait().unwrap();
    assert!(status.success(), "{status:?}");
}

/// `printf 'garbage\n' | moat mcp`: a bad line and then the end of input, before any
/// handshake. The answer is written before moat exits — every time (the session ends without
/// rmcp closing the transport, so the answer once raced the exit). Repeated, with a line cut
/// short after a bad one too.
#[test]
fn a_bad_line_then_the_end_of_input_is_answered_before_moat_exits() {
    let home = tempfile::tempdir().unwrap();
    for (i, input) in ["garbage\\n", "{]\\n", "{]\\n{\\\"cut"]
        .iter()
        .cycle()
        .take(30)
        .enumerate()
    {
        let out = Command::new("sh")
            .arg("-c")
            .arg(format!(
                "printf '{input}' | \"$MOAT\" mcp --session framing"
            ))
            .env("MOAT", env!("CARGO_BIN_EXE_moat"))
            .env("MOAT_HOME", home.path())
            .env_remove("MOAT_SESSION")
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let answers: Vec<Value> = stdout
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
            .collect();
        let want = if input.ends_with("cut") { 2 } else { 1 };
        assert_eq!(answers.len(), want, "run {i} of {input:?}: {stdout}");
        for a in &answers {
            assert_error(a, -32700, input);
        }
    }
}
