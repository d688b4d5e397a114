//! Talks to a running `moat serve` over its unix socket, so CLI calls share the daemon's
//! processes, timeouts and events instead of starting a second owner for them.
//!
//! A minimal HTTP/1.1 exchange (`Connection: close`, JSON in and out) is all this needs; the
//! server side is axum.

use anyhow::{bail, Context};
use moat::exec::ToolResult;
use moat::home::Home;
use serde_json::Value;
use std::process::ExitCode;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};

/// `None` when no daemon listens on `$MOAT_HOME/moat.sock`.
pub async fn post(home: &Home, path: &str, body: &Value) -> anyhow::Result<Option<ToolResult>> {
    let socket = home.socket();
    let Ok(mut stream) = tokio::net::UnixStream::connect(&socket).await else {
        return Ok(None);
    };
    let body = serde_json::to_vec(body)?;
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: moat\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream
        .write_all(head.as_bytes())
        .await
        .context("send a request to moat serve")?;
    stream
        .write_all(&body)
        .await
        .context("send a request to moat serve")?;
    let mut raw = Vec::new();
    stream
        .read_to_end(&mut raw)
        .await
        .context("read the answer of moat serve")?;
    let text = String::from_utf8_lossy(&raw);
    let Some((head, body)) = text.split_once("\r\n\r\n") else {
        bail!("read the answer of moat serve: no HTTP header");
    };
    let status: u16 = head
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        dechunk(body)
    } else {
        body.to_string()
    };
    let value: Value = serde_json::from_str(&body).context("parse the answer of moat serve")?;
    if status != 200 {
        bail!(
            "{}",
            value["error"]
                .as_str()
                .unwrap_or("moat serve refused the request")
                .trim_start_matches("failed to ")
        );
    }
    Ok(Some(
        serde_json::from_value(value).context("parse the tool result of moat serve")?,
    ))
}

fn dechunk(body: &str) -> String {
    let mut out = String::new();
    let mut rest = body;
    while let Some((size, after)) = rest.split_once("\r\n") {
        let Ok(n) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        if n == 0 || after.len() < n {
            break;
        }
        out.push_str(&after[..n]);
        rest = after[n..].trim_start_matches("\r\n");
    }
    out
}

/// Prints a session's events as they arrive; events only exist inside a running daemon.
pub async fn follow_events(home: &Home, session: &str) -> anyhow::Result<ExitCode> {
    moat::session::validate_key(session)?;
    let socket = home.socket();
    let Ok(mut stream) = tokio::net::UnixStream::connect(&socket).await else {
        bail!(
            "follow events: moat serve is not running on {} (start it with `moat serve`)",
            socket.display()
        );
    };
    let head = format!("GET /v1/sessions/{session}/events HTTP/1.1\r\nHost: moat\r\nAccept: text/event-stream\r\n\r\n");
    stream
        .write_all(head.as_bytes())
        .await
        .context("subscribe to events")?;
    let mut lines = BufReader::new(stream).lines();
    while let Some(line) = lines.next_line().await.context("read events")? {
        if let Some(data) = line.strip_prefix("data:") {
            super::term::json_text(data.trim_start());
        }
    }
    Ok(ExitCode::SUCCESS)
}
