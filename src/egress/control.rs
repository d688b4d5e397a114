//! The narrow channel between a session's proxy and the daemon (docs/security.md, "Network
//! egress"): one unix socket per session, in a host directory bind-mounted only into that
//! session's proxy container. One JSON line each way per question: "may I look this name
//! up?", "may I connect to host:port (which resolved to these addresses)?" and "this
//! connection happened". The proxy
//! never holds the operator socket or a token; the daemon decides and writes the audit log.

use std::net::IpAddr;
use std::path::Path;

use serde::{Deserialize, Serialize};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWriteExt, BufReader};

use super::EgressError;

/// The socket's file name inside the session's egress directory.
pub const SOCKET_NAME: &str = "control.sock";
/// The longest line either side reads: a message is a host name, a few addresses and numbers.
pub const MAX_LINE: usize = 4096;
/// Addresses a question may carry (the proxy connects only to these).
pub const MAX_ADDRS: usize = 16;

/// What the proxy sends.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "kebab-case")]
pub enum ControlRequest {
    /// May the proxy look `host` up for a connection to `host:port`? Asked before any lookup,
    /// so a name the policy refuses never reaches DNS.
    Name { host: String, port: u16 },
    /// May the sandbox connect to `host:port`, which resolved to `addrs`?
    Ask {
        host: String,
        port: u16,
        addrs: Vec<IpAddr>,
    },
    /// A connection ended (or was refused): for the audit log.
    Audit(ConnectionRecord),
}

/// One connection as the audit log keeps it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConnectionRecord {
    /// The host the sandbox asked for (re-parsed by the daemon before it is logged).
    pub host: String,
    /// The port it asked for.
    pub port: u16,
    /// `CONNECT` or the HTTP method of a plain request.
    pub method: String,
    /// `allow`, or the refusal tag (`not-allowed`, `denied`, `ip-literal`,
    /// `internal-address`, `ask`, `unresolved`, `unreachable`, `no-daemon`).
    pub decision: String,
    /// Bytes the sandbox sent upstream (on the upstream connection).
    pub bytes_up: u64,
    /// Bytes the upstream sent back.
    pub bytes_down: u64,
    /// From the request's arrival to the connection's end.
    pub duration_ms: u64,
}

/// The daemon's answer to [`ControlRequest::Ask`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "answer", rename_all = "kebab-case")]
pub enum ControlAnswer {
    Allow,
    /// The name is allowed: look it up and ask again with the addresses.
    Resolve,
    /// Refused; `tag` names why (see [`ConnectionRecord::decision`]), `approval` is the
    /// pending approval an operator can decide, when one was filed.
    Refuse {
        tag: String,
        approval: Option<String>,
    },
    /// Received (the answer to an audit record).
    Ok,
}

/// Reads one line of at most [`MAX_LINE`] bytes and parses it; a longer line is an error,
/// so a peer cannot make the reader hold more.
pub async fn read_message<T: for<'de> Deserialize<'de>>(
    reader: impl AsyncRead + Unpin,
) -> Result<T, EgressError> {
    let mut line = Vec::new();
    let mut limited = BufReader::new(reader).take(MAX_LINE as u64 + 1);
    limited
        .read_until(b'\n', &mut line)
        .await
        .map_err(|e| EgressError::Protocol(e.to_string()))?;
    if line.len() > MAX_LINE {
        return Err(EgressError::Protocol("the line is too long".into()));
    }
    serde_json::from_slice(&line).map_err(|e| EgressError::Protocol(e.to_string()))
}

use tokio::io::AsyncReadExt as _;

/// Sends one request over a fresh connection and reads the answer.
pub async fn call(socket: &Path, request: &ControlRequest) -> Result<ControlAnswer, EgressError> {
    let control = |source| EgressError::Control {
        path: socket.to_path_buf(),
        source,
    };
    let mut stream = tokio::net::UnixStream::connect(socket)
        .await
        .map_err(control)?;
    let mut line = serde_json::to_vec(request).map_err(|e| EgressError::Protocol(e.to_string()))?;
    line.push(b'\n');
    stream.write_all(&line).await.map_err(control)?;
    let (read, _write) = stream.split();
    read_message(read).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn lines_are_bounded() {
        let ok = br#"{"op":"ask","host":"pkgs.example.org","port":443,"addrs":["1.1.1.1"]}
"#;
        let got: ControlRequest = read_message(&ok[..]).await.unwrap();
        assert_eq!(
            got,
            ControlRequest::Ask {
                host: "pkgs.example.org".into(),
                port: 443,
                addrs: vec!["1.1.1.1".parse().unwrap()]
            }
        );
        let long = format!(
            r#"{{"op":"ask","host":"{}","port":1,"addrs":[]}}"#,
            "a".repeat(MAX_LINE)
        );
        let err = read_message::<ControlRequest>(long.as_bytes())
            .await
            .unwrap_err();
        assert!(err.to_string().contains("too long"), "{err}");
        assert!(read_message::<ControlRequest>(&b"{\"op\":\"rm\"}\n"[..])
            .await
            .is_err());
    }
}
