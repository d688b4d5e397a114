//! Starting a TTY exec by hijacking `POST /exec/{id}/start` ourselves.
//!
//! Why not bollard's `start_exec`: in TTY mode the engine sends the terminal's raw bytes, but
//! bollard 0.21.1's `NewlineLogOutputDecoder` (`src/read.rs`) still guesses the framing per
//! chunk — `if src[0] > 2 { console } else { 8-byte multiplex header }`. A terminal chunk that
//! starts with 0x00, 0x01 or 0x02 (NUL, Ctrl-A, Ctrl-B: a program that draws with them, or
//! simply a write that happens to begin with one) has its first 8 bytes taken as a header
//! with a huge length, and the rest of the stream stalls until EOF. A long-running PTY session
//! then shows nothing (seen on Engine 20.10 with bollard 0.21.1; `tests/docker_pty.rs` covers it).
//!
//! So for a TTY exec moat speaks HTTP/1.1 over the engine's unix socket directly: it sends the
//! start request with `Connection: Upgrade` / `Upgrade: tcp`, reads the status line and the
//! headers up to the blank line, and from then on the socket *is* the terminal — every byte
//! after the header (including any that arrived in the same read) is output, and writes go to
//! the terminal's input. No frame guessing: a TTY stream has no frames.
//!
//! Only `unix://` engines (the default `/var/run/docker.sock`) take this path; for other
//! `DOCKER_HOST` schemes (tcp, TLS, ssh) moat falls back to bollard's decoder and its quirk.

use std::path::Path;
use std::time::Duration;

use bytes::{Buf, Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::UnixStream;

/// The response head must fit in this much; the engine sends a few hundred bytes.
const MAX_HEAD: usize = 16 * 1024;
/// An error body is read up to this size (the engine sends one JSON line).
const MAX_ERROR_BODY: usize = 64 * 1024;
/// How long to wait for the response head (the engine answers before the command runs).
const HEAD_TIMEOUT: Duration = Duration::from_secs(30);

/// The terminal of a started TTY exec: raw bytes both ways.
pub(super) struct Hijacked {
    /// Bytes that arrived with the response head: the first output.
    pub first: Bytes,
    pub read: OwnedReadHalf,
    pub write: OwnedWriteHalf,
}

#[derive(Debug, thiserror::Error)]
pub(super) enum HijackError {
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// The engine answered with an ordinary HTTP response instead of upgrading.
    #[error("the engine answered {status}: {message}")]
    Status { status: u16, message: String },
    #[error("{0}")]
    Protocol(String),
}

impl From<HijackError> for bollard::errors::Error {
    fn from(e: HijackError) -> Self {
        match e {
            HijackError::Io(err) => bollard::errors::Error::IOError { err },
            HijackError::Status { status, message } => {
                bollard::errors::Error::DockerResponseServerError {
                    status_code: status,
                    message,
                }
            }
            HijackError::Protocol(message) => bollard::errors::Error::IOError {
                err: std::io::Error::new(std::io::ErrorKind::InvalidData, message),
            },
        }
    }
}

/// The socket path of a `unix://` `DOCKER_HOST` (or the default socket when it is unset);
/// `None` for other schemes, which keep bollard's start path.
pub(super) fn unix_socket(docker_host: Option<&str>) -> Option<std::path::PathBuf> {
    match docker_host {
        None | Some("") => Some("/var/run/docker.sock".into()),
        Some(h) => h.strip_prefix("unix://").map(Into::into),
    }
}

/// Starts exec `exec_id` attached with a TTY and returns its raw terminal.
///
/// `api_version` (e.g. `1.41`) prefixes the path when given. `console_size` is (rows, cols);
/// engines before API 1.42 ignore it, so callers still resize after the start.
pub(super) async fn start_tty(
    socket: &Path,
    api_version: Option<&str>,
    exec_id: &str,
    console_size: Option<(u16, u16)>,
) -> Result<Hijacked, HijackError> {
    if exec_id.is_empty() || !exec_id.bytes().all(|b| b.is_ascii_alphanumeric()) {
        return Err(HijackError::Protocol(format!(
            "unexpected exec id {exec_id:?}"
        )));
    }
    let mut stream = UnixStream::connect(socket).await?;
    let body = match console_size {
        Some((rows, cols)) => {
            format!(r#"{{"Detach":false,"Tty":true,"ConsoleSize":[{rows},{cols}]}}"#)
        }
        None => r#"{"Detach":false,"Tty":true}"#.to_string(),
    };
    let prefix = api_version.map(|v| format!("/v{v}")).unwrap_or_default();
    let request = format!(
        "POST {prefix}/exec/{exec_id}/start HTTP/1.1\r\n\
         Host: docker\r\n\
         User-Agent: moat/{}\r\n\
         Content-Type: application/json\r\n\
         Content-Length: {}\r\n\
         Connection: Upgrade\r\n\
         Upgrade: tcp\r\n\
         \r\n\
         {body}",
        env!("CARGO_PKG_VERSION"),
        body.len(),
    );
    stream.write_all(request.as_bytes()).await?;
    stream.flush().await?;

    let mut buf = BytesMut::with_capacity(4096);
    let head_len = tokio::time::timeout(HEAD_TIMEOUT, read_head(&mut stream, &mut buf))
        .await
        .map_err(|_| HijackError::Protocol("the engine sent no response to exec start".into()))??;
    let head = Head::parse(&buf[..head_len])?;
    buf.advance(head_len);
    match head.status {
        // 101 when the engine honours the upgrade; old engines answer 200 and hijack anyway.
        101 | 200 => {
            let (read, write) = stream.into_split();
            Ok(Hijacked {
                first: buf.freeze(),
                read,
                write,
            })
        }
        status => {
            let body =
                tokio::time::timeout(Duration::from_secs(5), read_body(&mut stream, buf, &head))
                    .await
                    .unwrap_or_default();
            Err(HijackError::Status {
                status,
                message: error_message(&body),
            })
        }
    }
}

/// Reads until the blank line that ends the response head; returns the head's length
/// (including the blank line). Bytes past it stay in `buf`.
async fn read_head(stream: &mut UnixStream, buf: &mut BytesMut) -> Result<usize, HijackError> {
    loop {
        if let Some(i) = find(buf, b"\r\n\r\n") {
            return Ok(i + 4);
        }
        if buf.len() > MAX_HEAD {
            return Err(HijackError::Protocol(
                "the engine's response head is too large".into(),
            ));
        }
        if stream.read_buf(buf).await? == 0 {
            return Err(HijackError::Protocol(
                "the engine closed the connection before answering exec start".into(),
            ));
        }
    }
}

/// The parts of a response head moat looks at.
#[derive(Debug, PartialEq)]
struct Head {
    status: u16,
    content_length: Option<usize>,
    chunked: bool,
}

impl Head {
    fn parse(raw: &[u8]) -> Result<Head, HijackError> {
        let text = String::from_utf8_lossy(raw);
        let mut lines = text.split("\r\n");
        let status_line = lines.next().unwrap_or_default();
        let mut parts = status_line.splitn(3, ' ');
        let (proto, code) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
        let status = match (proto.starts_with("HTTP/1."), code.parse::<u16>()) {
            (true, Ok(s)) => s,
            _ => {
                return Err(HijackError::Protocol(format!(
                    "unexpected status line from the engine: {status_line:?}"
                )))
            }
        };
        let mut head = Head {
            status,
            content_length: None,
            chunked: false,
        };
        for line in lines {
            let Some((name, value)) = line.split_once(':') else {
                continue;
            };
            let value = value.trim();
            if name.eq_ignore_ascii_case("content-length") {
                head.content_length = value.parse().ok();
            } else if name.eq_ignore_ascii_case("transfer-encoding") {
                head.chunked = value.to_ascii_lowercase().contains("chunked");
            }
        }
        Ok(head)
    }
}

/// Reads an error response's body (bounded): by Content-Length, chunked, or to EOF.
async fn read_body(stream: &mut UnixStream, mut buf: BytesMut, head: &Head) -> Bytes {
    loop {
        let complete = match (head.content_length, head.chunked) {
            (Some(n), _) => buf.len() >= n,
            (None, true) => find(&buf, b"0\r\n\r\n").is_some(),
            (None, false) => false,
        };
        if complete || buf.len() > MAX_ERROR_BODY {
            break;
        }
        match stream.read_buf(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
    }
    if let Some(n) = head.content_length {
        buf.truncate(n);
    } else if head.chunked {
        return dechunk(&buf);
    }
    buf.freeze()
}

/// Decodes a chunked body as far as it is well formed.
fn dechunk(mut raw: &[u8]) -> Bytes {
    let mut out = BytesMut::new();
    while let Some(eol) = find(raw, b"\r\n") {
        let size_text = String::from_utf8_lossy(&raw[..eol]);
        let size_text = size_text.split(';').next().unwrap_or("").trim();
        let Ok(size) = usize::from_str_radix(size_text, 16) else {
            break;
        };
        raw = &raw[eol + 2..];
        if size == 0 || raw.len() < size {
            out.extend_from_slice(&raw[..size.min(raw.len())]);
            break;
        }
        out.extend_from_slice(&raw[..size]);
        raw = raw.get(size + 2..).unwrap_or_default();
    }
    out.freeze()
}

/// The engine's `{"message": "…"}`, or the body as text.
fn error_message(body: &[u8]) -> String {
    #[derive(serde::Deserialize)]
    struct Msg {
        message: String,
    }
    match serde_json::from_slice::<Msg>(body) {
        Ok(m) => m.message,
        Err(_) => String::from_utf8_lossy(body).trim().to_string(),
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_upgrade_and_error_heads() {
        let up = b"HTTP/1.1 101 UPGRADED\r\nContent-Type: application/vnd.docker.raw-stream\r\nConnection: Upgrade\r\nUpgrade: tcp\r\n\r\n";
        let h = Head::parse(up).unwrap();
        assert_eq!(h.status, 101);
        let err = b"HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\ncontent-length: 40\r\n\r\n";
        let h = Head::parse(err).unwrap();
        assert_eq!(
            h,
            Head {
                status: 404,
                content_length: Some(40),
                chunked: false
            }
        );
        let h = Head::parse(b"HTTP/1.1 500 x\r\nTransfer-Encoding: chunked\r\n\r\n").unwrap();
        assert!(h.chunked);
        assert!(Head::parse(b"SSH-2.0 hello\r\n\r\n").is_err());
    }

    #[test]
    fn error_bodies() {
        assert_eq!(
            error_message(br#"{"message":"No such exec instance: abc"}"#),
            "No such exec instance: abc"
        );
        assert_eq!(error_message(b"plain text\n"), "plain text");
        let chunked = b"19\r\n{\"message\":\"conflict: x\"}\r\n0\r\n\r\n";
        assert_eq!(&dechunk(chunked)[..], br#"{"message":"conflict: x"}"#);
    }

    #[test]
    fn socket_from_docker_host() {
        assert_eq!(
            unix_socket(None).unwrap(),
            Path::new("/var/run/docker.sock")
        );
        assert_eq!(
            unix_socket(Some("unix:///tmp/d.sock")).unwrap(),
            Path::new("/tmp/d.sock")
        );
        assert!(unix_socket(Some("tcp://127.0.0.1:2375")).is_none());
        assert!(unix_socket(Some("ssh://host")).is_none());
    }

    /// A fake engine on a socketpair: the head, then raw bytes starting with 0x01 in the same
    /// write, must come back intact and in order.
    #[tokio::test]
    async fn bytes_after_the_head_are_output() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("d.sock");
        let listener = tokio::net::UnixListener::bind(&path).unwrap();
        let server = tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            let mut req = BytesMut::new();
            while find(&req, b"\"Tty\":true}").is_none() {
                s.read_buf(&mut req).await.unwrap();
            }
            let text = String::from_utf8_lossy(&req).to_string();
            s.write_all(b"HTTP/1.1 101 UPGRADED\r\nUpgrade: tcp\r\n\r\n\x01abc")
                .await
                .unwrap();
            let mut input = [0u8; 2];
            s.read_exact(&mut input).await.unwrap();
            s.write_all(b"\x02def").await.unwrap();
            (text, input)
        });
        let mut h = start_tty(&path, Some("1.41"), "abc123", None)
            .await
            .unwrap();
        assert_eq!(&h.first[..], b"\x01abc");
        h.write.write_all(b"hi").await.unwrap();
        let mut rest = [0u8; 4];
        h.read.read_exact(&mut rest).await.unwrap();
        assert_eq!(&rest, b"\x02def");
        let (req, input) = server.await.unwrap();
        assert!(req.starts_with("POST /v1.41/exec/abc123/start HTTP/1.1\r\n"));
        assert!(req.contains("Upgrade: tcp\r\n"));
        assert!(req.contains("Connection: Upgrade\r\n"));
        assert_eq!(&input, b"hi");
    }

    #[tokio::test]
    async fn an_error_answer_is_a_status_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("d.sock");
        let listener = tokio::net::UnixListener::bind(&path).unwrap();
        tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            let mut req = [0u8; 1024];
            let _ = s.read(&mut req).await;
            let body = r#"{"message":"No such exec instance: abc"}"#;
            let resp = format!(
                "HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            );
            s.write_all(resp.as_bytes()).await.unwrap();
            // Keep the connection open, as a keep-alive server would.
            tokio::time::sleep(Duration::from_secs(10)).await;
        });
        match start_tty(&path, None, "abc", None).await {
            Err(HijackError::Status { status, message }) => {
                assert_eq!(status, 404);
                assert_eq!(message, "No such exec instance: abc");
            }
            other => panic!("expected a status error, got {:?}", other.map(|_| ())),
        }
        assert!(start_tty(&path, None, "a/../b", None).await.is_err());
    }
}
