//! A process's input (its stdin FIFO, or its terminal), written by a task of its own.
//!
//! A write waits until the command reads, and a command may never read: written in the
//! supervisor's loop, one such write stalled everything else the loop does — the kill, the
//! timeout, reading the output — so a process outlived `process kill` and its callers hung
//! (a hostile review's finding). The supervisor hands each write to this task and goes on;
//! writes keep their order, a close comes after the writes before it, and what waits is
//! bounded ([`QUEUE`]). The task ends with the supervisor, dropping the writer, which is
//! end-of-file to the reader (docs/mcp.md, "Foreground and background").

use std::io;
use std::pin::Pin;

use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::net::unix::pipe;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

/// Writes that may wait behind one the command does not read; past it a write is refused at
/// once with a sentence that says so.
pub const QUEUE: usize = 16;

/// A terminal's input side.
pub type TtyInput = Pin<Box<dyn AsyncWrite + Send>>;

enum Input {
    Write(Vec<u8>, Option<oneshot::Sender<io::Result<()>>>),
    Close(Option<oneshot::Sender<()>>),
}

/// The handle the supervisor keeps; dropping it ends the task and the writer with it.
pub struct InputWriter {
    tx: mpsc::Sender<Input>,
    task: JoinHandle<()>,
}

impl InputWriter {
    /// Starts the task over the process's stdin FIFO and its terminal (a terminal takes the
    /// writes when there is one).
    pub fn spawn(stdin: Option<pipe::Sender>, tty: Option<TtyInput>) -> Self {
        let (tx, rx) = mpsc::channel(QUEUE);
        let task = tokio::spawn(run(rx, stdin, tty));
        Self { tx, task }
    }

    /// Queues `data`; `reply` hears how the write went (or at once, when the queue is full).
    pub fn write(&self, data: Vec<u8>, reply: Option<oneshot::Sender<io::Result<()>>>) {
        if let Err(e) = self.tx.try_send(Input::Write(data, reply)) {
            let (why, msg) = match e {
                mpsc::error::TrySendError::Full(m) => (
                    format!("{QUEUE} earlier writes are still waiting for the command to read"),
                    m,
                ),
                mpsc::error::TrySendError::Closed(m) => ("stdin is closed".to_string(), m),
            };
            if let Input::Write(_, Some(reply)) = msg {
                let _ = reply.send(Err(io::Error::other(why)));
            }
        }
    }

    /// Closes stdin after the writes queued before it (a terminal gets Ctrl-D, its
    /// end-of-file); `reply` hears when.
    pub fn close(&self, reply: Option<oneshot::Sender<()>>) {
        // A full queue holds writes that wait on a command that does not read: the close is
        // then sent once they are done, from a task of its own, so it is never lost.
        if let Err(mpsc::error::TrySendError::Full(msg)) = self.tx.try_send(Input::Close(reply)) {
            let tx = self.tx.clone();
            tokio::spawn(async move {
                let _ = tx.send(msg).await;
            });
        }
    }
}

impl Drop for InputWriter {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn run(
    mut rx: mpsc::Receiver<Input>,
    mut stdin: Option<pipe::Sender>,
    mut tty: Option<TtyInput>,
) {
    while let Some(msg) = rx.recv().await {
        match msg {
            Input::Write(data, reply) => {
                let r = match (tty.as_mut(), stdin.as_mut()) {
                    (Some(w), _) => match w.write_all(&data).await {
                        Ok(()) => w.flush().await,
                        Err(e) => Err(e),
                    },
                    (None, Some(w)) => w.write_all(&data).await,
                    (None, None) => Err(io::Error::other("stdin is closed")),
                };
                if let Some(reply) = reply {
                    let _ = reply.send(r);
                }
            }
            Input::Close(reply) => {
                if let Some(w) = tty.as_mut() {
                    // A terminal has no half-close: Ctrl-D is end-of-file to the line
                    // discipline.
                    let _ = w.write_all(&[0x04]).await;
                }
                stdin = None;
                if let Some(reply) = reply {
                    let _ = reply.send(());
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// A reader that never reads: writes queue, a full queue refuses at once, and dropping
    /// the writer ends the task (no write outlives the process's supervisor).
    #[tokio::test]
    async fn a_reader_that_never_reads_stalls_nothing() {
        let (w, r) = tokio::io::duplex(16);
        let input = InputWriter::spawn(None, Some(Box::pin(w)));
        let (tx, first) = oneshot::channel();
        input.write(vec![b'x'; 1 << 20], Some(tx));
        let mut waiting = Vec::new();
        for _ in 0..QUEUE {
            let (tx, rx) = oneshot::channel();
            input.write(b"y".to_vec(), Some(tx));
            waiting.push(rx);
        }
        let (tx, refused) = oneshot::channel();
        input.write(b"z".to_vec(), Some(tx));
        let refused = tokio::time::timeout(Duration::from_secs(1), refused)
            .await
            .expect("a full queue answers at once")
            .unwrap();
        assert!(refused.unwrap_err().to_string().contains("still waiting"));
        drop(input);
        // The pending write ends with the task instead of waiting for ever.
        assert!(tokio::time::timeout(Duration::from_secs(1), first)
            .await
            .is_ok());
        drop(r);
    }

    /// Writes arrive in order, and a close after them is end-of-file after them.
    #[tokio::test]
    async fn writes_keep_their_order_and_the_close_comes_after_them() {
        use tokio::io::AsyncReadExt;
        let (w, mut r) = tokio::io::duplex(4);
        let input = InputWriter::spawn(None, Some(Box::pin(w)));
        for part in [&b"hello "[..], b"world"] {
            input.write(part.to_vec(), None);
        }
        let (tx, closed) = oneshot::channel();
        input.close(Some(tx));
        let mut got = vec![0u8; 12];
        r.read_exact(&mut got).await.unwrap();
        assert_eq!(&got, b"hello world\x04");
        closed.await.unwrap();
    }
}
