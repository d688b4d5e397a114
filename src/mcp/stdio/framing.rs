//! Newline-delimited JSON-RPC framing for `moat mcp` over stdio (docs/mcp.md, "Malformed
//! input"): a bounded, cancel-safe line reader and what to do with each line.
//!
//! rmcp's own stdio transport drops a line that is not JSON (or not UTF-8) without a word, so a
//! client that sent one waits for an answer that never comes. Here every such line gets the
//! JSON-RPC parse error, and a line longer than [`MAX_LINE_BYTES`] is refused as soon as it
//! passes the bound, then skipped up to its newline, so memory stays bounded whatever the
//! client sends.

use rmcp::service::{RoleServer, RxJsonRpcMessage};
use serde_json::{json, Value};
use tokio::io::{AsyncBufRead, AsyncBufReadExt};

/// The longest line (one message) accepted, in bytes: the same bound as an HTTP request body
/// (docs/http-api.md), which a message never needs to exceed (a command is at most 64 KiB, a
/// request's env 256 KiB).
pub const MAX_LINE_BYTES: usize = 1 << 20;

/// JSON-RPC 2.0's code for text that is not JSON.
pub const PARSE_ERROR: i64 = -32700;
/// JSON-RPC 2.0's code for JSON that is not a valid message.
pub const INVALID_REQUEST: i64 = -32600;

/// What one read from the client produced.
#[derive(Debug, PartialEq, Eq)]
pub enum LineRead {
    /// A whole line (without its `\n`) is in the reader's buffer.
    Line,
    /// The line passed [`MAX_LINE_BYTES`]; what was read of it is gone, the rest is skipped.
    TooLong,
    /// The client closed its end; `true` when an unterminated line was left behind.
    Eof { partial: bool },
    /// Reading failed (the client's end is unusable).
    Failed,
}

/// Reads newline-delimited lines of at most [`MAX_LINE_BYTES`].
///
/// Cancel-safe: rmcp polls `receive` inside a `select!`, so a read may be dropped at any await.
/// The bytes of an unfinished line and whether a refused line is still being skipped live in
/// the struct, and `fill_buf` consumes nothing until they are recorded.
pub struct LineReader<R> {
    /// The client's stream.
    input: R,
    /// The line read so far; never longer than the bound.
    line: Vec<u8>,
    /// Set after a line passed the bound, until its newline: those bytes are dropped.
    skipping: bool,
    /// The bound (a parameter so tests can use a small one).
    max: usize,
}

impl<R: AsyncBufRead + Unpin> LineReader<R> {
    pub fn new(input: R) -> Self {
        Self::with_max(input, MAX_LINE_BYTES)
    }

    pub fn with_max(input: R, max: usize) -> Self {
        Self {
            input,
            line: Vec::new(),
            skipping: false,
            max,
        }
    }

    /// The line the last [`LineRead::Line`] reported, until the next read.
    pub fn line(&self) -> &[u8] {
        &self.line
    }

    /// Reads up to the end of the next line.
    pub async fn read(&mut self) -> LineRead {
        if !self.skipping && self.line.last() == Some(&b'\n') {
            self.line.clear();
        }
        loop {
            let available = match self.input.fill_buf().await {
                Ok(a) => a,
                Err(e) => {
                    tracing::warn!(error = %e, "failed to read from the MCP client");
                    return LineRead::Failed;
                }
            };
            if available.is_empty() {
                let partial = !self.skipping && !self.line.is_empty();
                self.skipping = false;
                return LineRead::Eof { partial };
            }
            let newline = available.iter().position(|b| *b == b'\n');
            let take = newline.map_or(available.len(), |i| i + 1);
            if self.skipping {
                self.input.consume(take);
                if newline.is_some() {
                    self.skipping = false;
                    self.line.clear();
                }
                continue;
            }
            let content = self.line.len() + take - usize::from(newline.is_some());
            if content > self.max {
                // Over the bound (the newline itself does not count): refuse it now, and skip
                // the rest unless this chunk already holds its end.
                self.input.consume(take);
                self.line.clear();
                self.skipping = newline.is_none();
                return LineRead::TooLong;
            }
            self.line.extend_from_slice(&available[..take]);
            self.input.consume(take);
            if newline.is_some() {
                // The `\n` stays: it marks the line complete for the next call (see the top).
                return LineRead::Line;
            }
        }
    }
}

/// The line of a [`LineRead::Line`] without its line ending.
pub fn line_text(raw: &[u8]) -> &[u8] {
    let raw = raw.strip_suffix(b"\n").unwrap_or(raw);
    raw.strip_suffix(b"\r").unwrap_or(raw)
}

/// What to do with one line.
#[derive(Debug)]
pub enum Inbound {
    /// A message for rmcp.
    Message(Box<RxJsonRpcMessage<RoleServer>>),
    /// Answer the client with this frame (newline included) and read on.
    Reply(Vec<u8>),
    /// Nothing to do: a blank line, or a notification moat cannot read (JSON-RPC never
    /// answers a notification).
    Skip,
}

/// Decides what one line (without its line ending) is.
pub fn classify(line: &[u8]) -> Inbound {
    // RFC 8259 §8.1 lets a parser ignore a byte order mark.
    let line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
    if line.iter().all(u8::is_ascii_whitespace) {
        return Inbound::Skip;
    }
    if std::str::from_utf8(line).is_err() {
        return Inbound::Reply(error_frame(
            PARSE_ERROR,
            "Parse error: the message is not UTF-8 text".into(),
            Value::Null,
        ));
    }
    let value: Value = match serde_json::from_slice(line) {
        Ok(v) => v,
        Err(e) => {
            return Inbound::Reply(error_frame(
                PARSE_ERROR,
                format!("Parse error: the message is not JSON ({e})"),
                Value::Null,
            ))
        }
    };
    match serde_json::from_slice::<RxJsonRpcMessage<RoleServer>>(line) {
        Ok(msg) => Inbound::Message(Box::new(msg)),
        Err(e) => {
            let id = value.get("id").filter(|id| id.is_string() || id.is_i64());
            let notification = value.get("method").is_some() && value.get("id").is_none();
            if notification {
                tracing::debug!(error = %e, "ignored a notification moat cannot read");
                return Inbound::Skip;
            }
            Inbound::Reply(error_frame(
                INVALID_REQUEST,
                format!("Invalid Request: the message is not a JSON-RPC 2.0 request moat can read ({e})"),
                id.cloned().unwrap_or(Value::Null),
            ))
        }
    }
}

/// The answer to a line longer than [`MAX_LINE_BYTES`]: the request it may have held cannot
/// be read, so its id is unknown.
pub fn too_long_frame() -> Vec<u8> {
    error_frame(
        INVALID_REQUEST,
        format!(
            "Invalid Request: the message is longer than {MAX_LINE_BYTES} bytes, the most one line may hold"
        ),
        Value::Null,
    )
}

/// The answer to bytes left without a newline when the client closed its end.
pub fn cut_short_frame() -> Vec<u8> {
    error_frame(
        PARSE_ERROR,
        "Parse error: the input ended in the middle of a message".into(),
        Value::Null,
    )
}

/// A JSON-RPC error response, one line. `id` is null when the request's id could not be read
/// (JSON-RPC 2.0 §5), which rmcp's own error type would leave out.
fn error_frame(code: i64, message: String, id: Value) -> Vec<u8> {
    let mut frame = serde_json::to_vec(&json!({
        "jsonrpc": "2.0",
        "id": id,
        "error": { "code": code, "message": message },
    }))
    .unwrap_or_default();
    frame.push(b'\n');
    frame
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply(line: &[u8]) -> Value {
        match classify(line) {
            Inbound::Reply(frame) => {
                assert_eq!(frame.last(), Some(&b'\n'));
                assert_eq!(frame.iter().filter(|b| **b == b'\n').count(), 1);
                serde_json::from_slice(&frame).unwrap()
            }
            other => panic!("{:?}: {other:?}", String::from_utf8_lossy(line)),
        }
    }

    #[test]
    fn bad_lines_get_an_answer() {
        let rows: &[(&[u8], i64, Value)] = &[
            (b"not json", PARSE_ERROR, Value::Null),
            (
                b"{\"jsonrpc\":\"2.0\",\"id\":1,\"meth",
                PARSE_ERROR,
                Value::Null,
            ),
            (b"{\"jsonrpc\":\"2.0\",\"id\":1}}", PARSE_ERROR, Value::Null),
            (b"\xff\xfe{}", PARSE_ERROR, Value::Null),
            (b"{\"a\":\"\xc3\x28\"}", PARSE_ERROR, Value::Null),
            (b"[]", INVALID_REQUEST, Value::Null),
            (b"42", INVALID_REQUEST, Value::Null),
            (b"{\"jsonrpc\":\"2.0\"}", INVALID_REQUEST, Value::Null),
            (
                b"{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\",\"params\":3}",
                INVALID_REQUEST,
                json!(7),
            ),
            (
                b"{\"jsonrpc\":\"2.0\",\"id\":\"x\",\"method\":\"initialize\",\"params\":[]}",
                INVALID_REQUEST,
                json!("x"),
            ),
            (
                b"{\"jsonrpc\":\"2.0\",\"id\":{\"o\":1},\"method\":\"ping\"}",
                INVALID_REQUEST,
                Value::Null,
            ),
        ];
        for (line, code, id) in rows {
            let v = reply(line);
            let shown = String::from_utf8_lossy(line);
            assert_eq!(v["jsonrpc"], "2.0", "{shown}");
            assert_eq!(v["error"]["code"], *code, "{shown}");
            assert_eq!(v["id"], *id, "{shown}: {v}");
            assert!(v.as_object().unwrap().contains_key("id"), "{shown}");
        }
    }

    #[test]
    fn good_and_empty_lines() {
        let ping = br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;
        assert!(matches!(classify(ping), Inbound::Message(_)));
        let with_bom = [b"\xEF\xBB\xBF".as_slice(), ping].concat();
        assert!(matches!(classify(&with_bom), Inbound::Message(_)));
        assert!(matches!(classify(b""), Inbound::Skip));
        assert!(matches!(classify(b"  \t"), Inbound::Skip));
        // A notification moat cannot read is not answered.
        let bad_note = br#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":7}"#;
        assert!(matches!(classify(bad_note), Inbound::Skip));
    }

    async fn read_all(input: &[u8], max: usize) -> Vec<(LineRead, Vec<u8>)> {
        let mut r = LineReader::with_max(tokio::io::BufReader::with_capacity(4, input), max);
        let mut out = Vec::new();
        loop {
            let got = r.read().await;
            let text = line_text(r.line()).to_vec();
            let end = matches!(got, LineRead::Eof { .. } | LineRead::Failed);
            out.push((got, text));
            if end {
                return out;
            }
        }
    }

    #[tokio::test]
    async fn lines_are_bounded_and_resync() {
        let input = b"ok1\r\n0123456789abcdef\nok2\n0123456789\nxy\nlast";
        let got = read_all(input, 10).await;
        let kinds: Vec<&LineRead> = got.iter().map(|(k, _)| k).collect();
        assert_eq!(
            kinds,
            [
                &LineRead::Line,
                &LineRead::TooLong,
                &LineRead::Line,
                &LineRead::Line,
                &LineRead::Line,
                &LineRead::Eof { partial: true },
            ]
        );
        assert_eq!(got[0].1, b"ok1");
        assert_eq!(got[2].1, b"ok2");
        assert_eq!(got[3].1, b"0123456789");
        assert_eq!(got[4].1, b"xy");
    }

    #[tokio::test]
    async fn a_line_without_end_never_grows_past_the_bound() {
        let mut input = vec![b'x'; 100_000];
        input.extend_from_slice(b"\n{}\n");
        let mut r = LineReader::with_max(tokio::io::BufReader::with_capacity(64, &input[..]), 1000);
        assert_eq!(r.read().await, LineRead::TooLong);
        assert!(r.line.capacity() <= 4096, "{}", r.line.capacity());
        assert_eq!(r.read().await, LineRead::Line);
        assert_eq!(line_text(r.line()), b"{}");
        assert_eq!(r.read().await, LineRead::Eof { partial: false });
    }

    #[tokio::test]
    async fn eof_after_a_whole_line_is_clean() {
        let got = read_all(b"a\nb\n", 10).await;
        assert_eq!(got.last().unwrap().0, LineRead::Eof { partial: false });
        let got = read_all(b"", 10).await;
        assert_eq!(got[0].0, LineRead::Eof { partial: false });
    }
}
