//! The transport `moat mcp` serves rmcp over: newline-delimited JSON-RPC on a byte stream
//! (stdin/stdout), framed by [`super::framing`], with every frame written by one writer task.
//!
//! Two kinds of frames go out: rmcp's (responses and notifications, through
//! [`Transport::send`]) and moat's own answers to lines it could not pass on (a parse error,
//! an invalid or oversized message). Both are whole lines queued to the same task, which
//! writes each in one piece, so frames never interleave however many handlers answer at once.

use std::time::Duration;

use rmcp::service::{RoleServer, RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::{mpsc, oneshot};

use super::framing::{classify, cut_short_frame, line_text, too_long_frame, Inbound};
use super::framing::{LineRead, LineReader};

/// Frames waiting for the writer. A client that stops reading its end fills this, and then
/// moat stops reading new lines: the queue, not memory, absorbs a flood of bad lines.
const QUEUE_FRAMES: usize = 64;

/// How long closing waits for queued frames to be written.
const CLOSE_WAIT: Duration = Duration::from_secs(2);

/// One whole line for the writer.
struct Frame {
    /// The serialized message and its `\n`.
    bytes: Vec<u8>,
    /// Told the outcome when the frame was written (rmcp's sends wait for it).
    done: Option<oneshot::Sender<std::io::Result<()>>>,
}

/// rmcp's [`Transport`] over newline-delimited JSON, answering malformed lines itself.
pub struct LineTransport<R> {
    /// The client's messages, one per line.
    reader: LineReader<BufReader<R>>,
    /// The writer task's queue; `None` once closed.
    frames: Option<mpsc::Sender<Frame>>,
    /// The writer task, awaited on close so queued answers reach the client.
    writer: Option<tokio::task::JoinHandle<()>>,
    /// moat's answer to a bad line, kept here until the queue takes it: `receive` may be
    /// cancelled while it waits for room, and the answer must not be lost then.
    reply: Option<Vec<u8>>,
    /// The client closed its end: once `reply` is out, `receive` ends the session.
    ended: bool,
}

impl<R: AsyncRead + Unpin + Send + 'static> LineTransport<R> {
    /// Serves on `input` and `output`; spawns the writer task (needs a tokio runtime).
    pub fn new<W: AsyncWrite + Unpin + Send + 'static>(input: R, output: W) -> Self {
        let (tx, rx) = mpsc::channel(QUEUE_FRAMES);
        let writer = tokio::spawn(write_frames(output, rx));
        Self {
            reader: LineReader::new(BufReader::new(input)),
            frames: Some(tx),
            writer: Some(writer),
            reply: None,
            ended: false,
        }
    }
}

/// Writes queued frames in order, each whole, until the queue closes or the output fails.
async fn write_frames<W: AsyncWrite + Unpin>(mut output: W, mut rx: mpsc::Receiver<Frame>) {
    while let Some(frame) = rx.recv().await {
        let written = async {
            output.write_all(&frame.bytes).await?;
            output.flush().await
        }
        .await;
        let failed = written.is_err();
        if let Err(e) = &written {
            tracing::warn!(error = %e, "failed to write to the MCP client");
        }
        if let Some(done) = frame.done {
            let _ = done.send(written);
        }
        if failed {
            // The client's end is gone: later sends fail instead of queueing forever.
            return;
        }
    }
}

/// Waits until the writer behind `frames` has written every frame queued so far (at most
/// [`CLOSE_WAIT`]): frames are written in order, so an empty one's turn comes after them.
async fn written(frames: Option<mpsc::Sender<Frame>>) {
    let Some(frames) = frames else {
        return;
    };
    let (done, written) = oneshot::channel();
    let frame = Frame {
        bytes: Vec::new(),
        done: Some(done),
    };
    if frames.send(frame).await.is_ok() {
        let _ = tokio::time::timeout(CLOSE_WAIT, written).await;
    }
}

fn closed() -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::BrokenPipe,
        "the MCP client's output is closed",
    )
}

impl<R: AsyncRead + Unpin + Send + 'static> Transport<RoleServer> for LineTransport<R> {
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl std::future::Future<Output = Result<(), Self::Error>> + Send + 'static {
        let frames = self.frames.clone();
        async move {
            let frames = frames.ok_or_else(closed)?;
            let mut bytes = serde_json::to_vec(&item)?;
            bytes.push(b'\n');
            let (done, written) = oneshot::channel();
            frames
                .send(Frame {
                    bytes,
                    done: Some(done),
                })
                .await
                .map_err(|_| closed())?;
            written.await.map_err(|_| closed())?
        }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        loop {
            if self.reply.is_some() {
                let permit = self.frames.as_ref()?.reserve().await.ok()?;
                if let Some(bytes) = self.reply.take() {
                    permit.send(Frame { bytes, done: None });
                }
            }
            if self.ended {
                // The session ends with this `None`, and rmcp may end the process without
                // closing the transport (a client that never finished the handshake): every
                // answer queued so far is written first (docs/mcp.md, "Malformed input").
                written(self.frames.clone()).await;
                return None;
            }
            match self.reader.read().await {
                LineRead::Line => match classify(line_text(self.reader.line())) {
                    Inbound::Message(msg) => return Some(*msg),
                    Inbound::Reply(frame) => self.reply = Some(frame),
                    Inbound::Skip => {}
                },
                LineRead::TooLong => self.reply = Some(too_long_frame()),
                LineRead::Eof { partial } => {
                    self.ended = true;
                    if partial {
                        self.reply = Some(cut_short_frame());
                    }
                }
                LineRead::Failed => return None,
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.frames = None;
        if let Some(writer) = self.writer.take() {
            // In-flight sends hold their own queue handles; the writer ends once they are done.
            let _ = tokio::time::timeout(CLOSE_WAIT, writer).await;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt};

    /// Feeds `input` to a transport and collects what it passes on and what it answers.
    async fn run(input: Vec<u8>) -> (Vec<RxJsonRpcMessage<RoleServer>>, Vec<Value>) {
        let (mut client_in, server_in) = tokio::io::duplex(1 << 16);
        let (server_out, client_out) = tokio::io::duplex(1 << 16);
        let mut t = LineTransport::new(server_in, server_out);
        let feeder = tokio::spawn(async move {
            client_in.write_all(&input).await.unwrap();
            drop(client_in);
        });
        let mut passed = Vec::new();
        while let Some(m) = t.receive().await {
            passed.push(m);
        }
        t.close().await.unwrap();
        drop(t);
        feeder.await.unwrap();
        let mut answers = Vec::new();
        let mut lines = tokio::io::BufReader::new(client_out).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            answers.push(serde_json::from_str(&line).unwrap());
        }
        (passed, answers)
    }

    #[tokio::test]
    async fn bad_lines_are_answered_and_good_ones_pass() {
        let mut input = Vec::new();
        input.extend_from_slice(b"garbage\n");
        input.extend_from_slice(br#"{"jsonrpc":"2.0","id":1,"meth"#);
        input.extend_from_slice(b"\n\xff\xfe\x00\n");
        input.extend_from_slice(br#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#);
        input.extend_from_slice(b"\n\n");
        input.extend(std::iter::repeat_n(
            b'x',
            crate::mcp::stdio::framing::MAX_LINE_BYTES + 10,
        ));
        input.extend_from_slice(b"\n");
        input.extend_from_slice(br#"{"jsonrpc":"2.0","id":3,"method":"ping"}"#);
        input.extend_from_slice(b"\n{\"cut");
        let (passed, answers) = run(input).await;
        assert_eq!(passed.len(), 2);
        let codes: Vec<i64> = answers
            .iter()
            .map(|a| a["error"]["code"].as_i64().unwrap())
            .collect();
        assert_eq!(codes, [-32700, -32700, -32700, -32600, -32700]);
        for a in &answers {
            assert_eq!(a["id"], Value::Null);
            assert_eq!(a["jsonrpc"], "2.0");
        }
        assert!(answers[3]["error"]["message"]
            .as_str()
            .unwrap()
            .contains("1048576 bytes"));
    }

    #[tokio::test]
    async fn the_answers_are_written_before_the_session_ends() {
        use futures::FutureExt;
        // A bad line, then the end of input, and nobody closes the transport (what rmcp does
        // when the handshake never came): the answer is out by the time `receive` ends.
        for input in [&b"garbage\n"[..], b"{]\n", b"{]\n{\"cut"] {
            let (mut client_in, server_in) = tokio::io::duplex(1 << 16);
            let (server_out, client_out) = tokio::io::duplex(1 << 16);
            client_in.write_all(input).await.unwrap();
            drop(client_in);
            let mut t = LineTransport::new(server_in, server_out);
            assert!(t.receive().await.is_none());
            let mut lines = tokio::io::BufReader::new(client_out).lines();
            let first = lines.next_line().now_or_never();
            let Some(Ok(Some(line))) = first else {
                panic!("no answer written when the session ended on {input:?}");
            };
            let v: Value = serde_json::from_str(&line).unwrap();
            assert_eq!(v["error"]["code"], -32700, "{line}");
            drop(t);
        }
    }

    #[tokio::test]
    async fn concurrent_sends_are_whole_lines() {
        let (_client_in, server_in) = tokio::io::duplex(64);
        let (server_out, client_out) = tokio::io::duplex(1 << 20);
        let mut t = LineTransport::new(server_in, server_out);
        let mut joined = Vec::new();
        for i in 0..200 {
            let send = t.send(TxJsonRpcMessage::<RoleServer>::error(
                rmcp::ErrorData::internal_error("x".repeat(i * 50), None),
                Some(rmcp::model::NumberOrString::Number(i as i64)),
            ));
            joined.push(tokio::spawn(send));
        }
        for j in joined {
            j.await.unwrap().unwrap();
        }
        t.close().await.unwrap();
        drop(t);
        let mut lines = tokio::io::BufReader::new(client_out).lines();
        let mut n = 0;
        while let Ok(Some(line)) = lines.next_line().await {
            let v: Value = serde_json::from_str(&line).unwrap();
            assert!(v["id"].is_i64());
            n += 1;
        }
        assert_eq!(n, 200);
    }
}
