//! A real `moat serve` for tests that speak HTTP to it: its own home with the given
//! `moat.toml`, a TCP listener on a free loopback port, and every container it made (found by
//! the tests' session-key prefix) removed when it is dropped.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

pub struct Server {
    pub child: Child,
    /// `127.0.0.1:PORT`, read from the daemon's first log line.
    pub addr: String,
    /// The daemon's `MOAT_HOME`.
    pub dir: tempfile::TempDir,
    /// The session-key prefix of the containers to remove on drop.
    prefix: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        super::clean_up(&self.prefix, self.dir.path());
    }
}

/// Starts `moat serve --tcp 127.0.0.1:0` with `config` as its `moat.toml`; `None` (skip) when
/// there is no engine and CI is not set (see [`super::engine`]).
pub async fn serve(prefix: &str, config: &str) -> Option<Server> {
    super::engine().await?;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("moat.toml"), config).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_moat"))
        .args(["serve", "--tcp", "127.0.0.1:0"])
        .env("MOAT_HOME", dir.path())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stderr.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = line.rsplit("tcp:").next().unwrap().trim().to_string();
    assert!(addr.starts_with("127.0.0.1:"), "{line}");
    Some(Server {
        child,
        addr,
        dir,
        prefix: prefix.to_string(),
    })
}

/// One HTTP/1.1 request with `Connection: close`; returns (status, body).
pub fn http(
    addr: &str,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: &[u8],
) -> (u16, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let auth = token
        .map(|t| format!("Authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: x\r\n{auth}Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes()).unwrap();
    let _ = s.write_all(body);
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    let status = out
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = out
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    (status, body)
}

/// The JSON object of a body; bodies may be chunked, so it is the part between the first `{`
/// and the last `}`.
pub fn json(body: &str) -> serde_json::Value {
    let start = body.find('{').unwrap_or(0);
    let end = body.rfind('}').map(|e| e + 1).unwrap_or(body.len());
    serde_json::from_str(&body[start..end]).unwrap_or(serde_json::Value::Null)
}
