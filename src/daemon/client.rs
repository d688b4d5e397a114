//! The client side of the daemon's unix socket: what the CLI and `moat mcp` (stdio) use to
//! reach the one moat that owns the home (docs/ARCHITECTURE.md, "Daemon").
//!
//! One HTTP/1.1 connection per call (hyper's client over a `UnixStream`): a call that is
//! dropped closes its connection, and the daemon takes a closed connection as a cancelled
//! call (it ends the foreground command the call was waiting on).

use std::path::{Path, PathBuf};

use bytes::{Buf, Bytes, BytesMut};
use http::{Method, Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use serde_json::Value;

/// The header that carries the client's [`fingerprint`](super::fingerprint).
pub const FINGERPRINT_HEADER: &str = "x-moat-fingerprint";
/// Socket-only: the caller is `moat mcp` over stdio for this session, not the operator's CLI
/// (it narrows the identity the elevated gates see; it never widens it).
pub const CALLER_HEADER: &str = "x-moat-caller";
/// Socket-only: the CLI waits for the command to end and reads the answer as lines of JSON
/// (`{"started": id}`, `{"result": …}`, `{"event": text}`), see `server::handlers::exec`.
pub const WAIT_HEADER: &str = "x-moat-wait";

/// One line of an answer may be this long: a tool result is capped at 200k characters of
/// output (four bytes each at most) plus its JSON, far below it.
const MAX_LINE: usize = 16 << 20;

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("connect to moat serve on {socket}")]
    Connect {
        socket: String,
        #[source]
        source: std::io::Error,
    },
    #[error("talk to moat serve")]
    Http(#[from] hyper::Error),
    #[error("build a request for moat serve")]
    Request(#[from] http::Error),
    #[error("parse the answer of moat serve")]
    Json(#[from] serde_json::Error),
    #[error("read the answer of moat serve: a line longer than {MAX_LINE} bytes")]
    LineTooLong,
    /// The daemon answered with an error (its JSON `error` text, which completes
    /// "failed to …" or is a whole sentence).
    #[error("{message}")]
    Refused {
        status: u16,
        message: String,
        /// The failure class of an exec error (`None` for other errors and older daemons).
        kind: Option<crate::contract::FailureKind>,
    },
}

impl ClientError {
    /// Whether nothing answered on the socket (no daemon, or a stale socket file).
    pub fn is_unreachable(&self) -> bool {
        matches!(self, ClientError::Connect { .. })
    }
}

/// A handle on the daemon of one home. Cheap to clone.
#[derive(Debug, Clone)]
pub struct DaemonClient {
    /// `$MOAT_HOME/moat.sock`.
    socket: PathBuf,
    /// Sent with every request so the daemon refuses a client whose build or configuration
    /// differs from its own.
    fingerprint: String,
}

impl DaemonClient {
    pub fn new(socket: &Path, fingerprint: String) -> Self {
        Self {
            socket: socket.to_path_buf(),
            fingerprint,
        }
    }

    pub fn fingerprint(&self) -> &str {
        &self.fingerprint
    }

    /// Sends one request on a new connection and returns the answer's head and body.
    async fn send(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
        headers: &[(&'static str, String)],
    ) -> Result<hyper::Response<Incoming>, ClientError> {
        let stream = tokio::net::UnixStream::connect(&self.socket)
            .await
            .map_err(|source| ClientError::Connect {
                socket: self.socket.display().to_string(),
                source,
            })?;
        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(ClientError::Http)?;
        // The connection's driver lives as long as the answer is read; dropping the answer
        // (a cancelled call) drops the connection with it.
        tokio::spawn(async move {
            let _ = conn.await;
        });
        let payload = match body {
            Some(v) => Bytes::from(serde_json::to_vec(v)?),
            None => Bytes::new(),
        };
        let mut req = Request::builder()
            .method(method)
            .uri(path)
            .header(http::header::HOST, "moat")
            .header(FINGERPRINT_HEADER, &self.fingerprint);
        if body.is_some() {
            req = req.header(http::header::CONTENT_TYPE, "application/json");
        }
        for (k, v) in headers {
            req = req.header(*k, v);
        }
        let req = req.body(Full::new(payload))?;
        Ok(sender.send_request(req).await?)
    }

    /// One call with a JSON answer; an error status becomes [`ClientError::Refused`].
    pub async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
        headers: &[(&'static str, String)],
    ) -> Result<Value, ClientError> {
        let resp = self.send(method, path, body, headers).await?;
        let status = resp.status();
        let bytes = resp.into_body().collect().await?.to_bytes();
        let value: Value = if bytes.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&bytes)?
        };
        if status.is_success() {
            Ok(value)
        } else {
            Err(refused(status, &value))
        }
    }

    /// One call whose answer is read line by line as it arrives.
    pub async fn lines(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
        headers: &[(&'static str, String)],
    ) -> Result<Lines, ClientError> {
        let resp = self.send(method, path, body, headers).await?;
        let status = resp.status();
        if !status.is_success() {
            let bytes = resp.into_body().collect().await?.to_bytes();
            let value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
            return Err(refused(status, &value));
        }
        Ok(Lines {
            body: resp.into_body(),
            buf: BytesMut::new(),
            done: false,
        })
    }
}

fn refused(status: StatusCode, value: &Value) -> ClientError {
    let message = value["error"]
        .as_str()
        .unwrap_or("moat serve refused the request")
        .to_string();
    ClientError::Refused {
        status: status.as_u16(),
        message,
        kind: serde_json::from_value(value["kind"].clone()).ok(),
    }
}

/// An answer's body, one line at a time (without its `\n`; a final line without one counts).
pub struct Lines {
    body: Incoming,
    buf: BytesMut,
    done: bool,
}

impl Lines {
    pub async fn next_line(&mut self) -> Result<Option<String>, ClientError> {
        loop {
            if let Some(at) = self.buf.iter().position(|&b| b == b'\n') {
                let line = self.buf.split_to(at + 1);
                let text = String::from_utf8_lossy(&line[..at]);
                return Ok(Some(text.trim_end_matches('\r').to_string()));
            }
            if self.buf.len() > MAX_LINE {
                return Err(ClientError::LineTooLong);
            }
            if self.done {
                if self.buf.is_empty() {
                    return Ok(None);
                }
                let rest = self.buf.split();
                return Ok(Some(String::from_utf8_lossy(&rest).into_owned()));
            }
            match self.body.frame().await {
                Some(frame) => {
                    if let Ok(mut data) = frame?.into_data() {
                        while data.has_remaining() {
                            let chunk = data.chunk();
                            self.buf.extend_from_slice(chunk);
                            let n = chunk.len();
                            data.advance(n);
                        }
                    }
                }
                None => self.done = true,
            }
        }
    }

    /// The next server-sent event's data (its `data:` lines joined by newlines); `None` when
    /// the stream ended.
    pub async fn next_event(&mut self) -> Result<Option<String>, ClientError> {
        let mut data: Option<String> = None;
        while let Some(line) = self.next_line().await? {
            if line.is_empty() {
                if let Some(d) = data.take() {
                    return Ok(Some(d));
                }
                continue;
            }
            if let Some(rest) = line.strip_prefix("data:") {
                let rest = rest.strip_prefix(' ').unwrap_or(rest);
                match &mut data {
                    Some(d) => {
                        d.push('\n');
                        d.push_str(rest);
                    }
                    None => data = Some(rest.to_string()),
                }
            }
        }
        Ok(data)
    }
}
