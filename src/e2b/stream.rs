//! A process's events as E2B's process service streams them (docs/e2b.md, "Processes"):
//! `start` with the pid, then the output raw — stdout and stderr apart, or the terminal's —
//! in chunks as read, keepalives while it is quiet, and `end` with its exit, then the end
//! envelope. The output is read from the run files through the descriptors moat holds, as
//! every run file is (docs/security.md, "Run directory and workspace files").
//!
//! A client that goes away ends the stream, never the process; a killed sandbox ends it
//! with an error, so the connection is cut rather than closed well.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::connect;
use super::wire::{b64, Data, End, Event, EventMessage};
use crate::contract::ExitInfo;
use crate::process::Proc;

/// How often the files are looked at when nothing announced a change (stderr is read by
/// nobody else, so nothing announces it).
const POLL: Duration = Duration::from_millis(10);
/// Most bytes one read of a file passes on before the other file has its turn, so what one
/// stream holds in memory stays bounded whatever the command writes: this much read (as
/// base64 envelopes, a third more), plus the channel's 16 messages.
const READ_PER_TURN: u64 = 512 << 10;

/// Which event a file's bytes become.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Kind {
    Stdout,
    Stderr,
    Pty,
}

impl Kind {
    /// E2B's chunk bound: 32 KiB for pipes, 16 KiB for a terminal.
    fn chunk(self) -> usize {
        match self {
            Kind::Pty => 16 << 10,
            _ => 32 << 10,
        }
    }

    fn data(self, bytes: &[u8]) -> Data {
        let text = b64(bytes);
        match self {
            Kind::Stdout => Data::Stdout(text),
            Kind::Stderr => Data::Stderr(text),
            Kind::Pty => Data::Pty(text),
        }
    }
}

/// One output file, passed on from where the last read stopped.
pub struct RawTail {
    pub kind: Kind,
    pub file: Arc<File>,
    pub offset: u64,
}

impl RawTail {
    /// A tail of `file` from `offset` (0: from its start; its length: from now on).
    pub fn new(kind: Kind, file: File, from_end: bool) -> Self {
        let offset = if from_end {
            file.metadata().map(|m| m.len()).unwrap_or(0)
        } else {
            0
        };
        Self {
            kind,
            file: Arc::new(file),
            offset,
        }
    }

    /// The envelopes for what was written since the last call, and whether a bound left more.
    fn read(&mut self) -> (Vec<Bytes>, bool) {
        let mut out = Vec::new();
        let mut buf = vec![0u8; self.kind.chunk()];
        // Bytes read this turn; a jump over a hole reads nothing and costs nothing.
        let mut read = 0u64;
        loop {
            if read >= READ_PER_TURN {
                return (out, true);
            }
            // A hole (bytes the spill bound freed, or a sparse file the command made) is
            // jumped, never read as zeros (`process::holes`).
            match crate::process::holes::next_data(&self.file, self.offset) {
                Some(data) if data > self.offset => self.offset = data,
                Some(_) => {}
                None => return (out, false),
            }
            let n = match self.file.read_at(&mut buf, self.offset) {
                Ok(0) | Err(_) => return (out, false),
                Ok(n) => n,
            };
            self.offset += n as u64;
            read += n as u64;
            out.push(connect::message(&EventMessage {
                event: Event::Data(self.kind.data(&buf[..n])),
            }));
            if n < buf.len() {
                return (out, false);
            }
        }
    }
}

/// The `end` event of an exit, worded as E2B's daemon words it.
pub fn end_of(exit: &ExitInfo) -> End {
    let signalled = |name: &str| End {
        exit_code: -1,
        exited: false,
        status: format!("signal: {name}"),
        error: None,
    };
    if exit.timed_out {
        return signalled("killed");
    }
    match (&exit.signal, exit.code) {
        (Some(sig), _) => signalled(match sig.as_str() {
            "SIGKILL" => "killed",
            "SIGTERM" => "terminated",
            "SIGINT" => "interrupt",
            "SIGHUP" => "hangup",
            other => other,
        }),
        (None, Some(code)) => End {
            exit_code: code as i32,
            exited: true,
            status: format!("exit status {code}"),
            error: None,
        },
        (None, None) => signalled("killed"),
    }
}

/// What one stream needs.
pub struct Follow {
    pub proc: Arc<Proc>,
    pub pid: u32,
    pub tails: Vec<RawTail>,
    /// Keepalive after this long without output (`Keepalive-Ping-Interval`).
    pub keepalive: Option<Duration>,
    /// The sandbox's kill.
    pub killed: CancellationToken,
    /// The connection the stream goes out on, reset when the sandbox is killed.
    pub conn: Option<super::conn::Conn>,
}

/// The response body of a started or connected process: its events until it ends.
pub fn body(f: Follow) -> Body {
    // Bounded: a slow client slows the reading of the files, not moat's memory.
    let (tx, rx) = mpsc::channel::<Result<Bytes, std::io::Error>>(16);
    tokio::spawn(drive(f, tx));
    Body::from_stream(tokio_stream::wrappers::ReceiverStream::new(rx))
}

/// Error the body with this to cut the connection.
fn cut() -> std::io::Error {
    std::io::Error::other("the sandbox was killed")
}

async fn drive(mut f: Follow, tx: mpsc::Sender<Result<Bytes, std::io::Error>>) {
    let start = connect::message(&EventMessage {
        event: Event::Start { pid: f.pid },
    });
    if tx.send(Ok(start)).await.is_err() {
        return;
    }
    let mut changed = f.proc.changed.subscribe();
    let mut quiet_since = tokio::time::Instant::now();
    loop {
        if f.killed.is_cancelled() {
            if let Some(conn) = &f.conn {
                conn.reset();
            }
            let _ = tx.send(Err(cut())).await;
            return;
        }
        // Read after seeing the end: what the command wrote last is read in this round.
        let exit = f.proc.exit();
        let mut behind = false;
        for t in f.tails.iter_mut() {
            let (messages, more) = t.read();
            behind |= more;
            if !messages.is_empty() {
                quiet_since = tokio::time::Instant::now();
            }
            for m in messages {
                if tx.send(Ok(m)).await.is_err() {
                    return;
                }
            }
        }
        if behind {
            tokio::task::yield_now().await;
            continue;
        }
        if let Some(exit) = exit {
            let end = connect::message(&EventMessage {
                event: Event::End(end_of(&exit)),
            });
            let _ = tx.send(Ok(end)).await;
            let _ = tx.send(Ok(connect::end(None))).await;
            return;
        }
        if let Some(every) = f.keepalive {
            if quiet_since.elapsed() >= every {
                let ping = connect::message(&EventMessage {
                    event: Event::Keepalive {},
                });
                if tx.send(Ok(ping)).await.is_err() {
                    return;
                }
                quiet_since = tokio::time::Instant::now();
            }
        }
        tokio::select! {
            _ = f.killed.cancelled() => {}
            _ = tx.closed() => return,
            _ = changed.changed() => {}
            _ = tokio::time::sleep(POLL) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exits_are_worded_as_e2bs_daemon_words_them() {
        let exit = |code: Option<i64>, signal: Option<&str>, timed_out| ExitInfo {
            code,
            signal: signal.map(str::to_string),
            timed_out,
            finished_at_ms: 0,
        };
        let cases = [
            (exit(Some(0), None, false), 0, true, "exit status 0"),
            (exit(Some(3), None, false), 3, true, "exit status 3"),
            (
                exit(None, Some("SIGKILL"), false),
                -1,
                false,
                "signal: killed",
            ),
            (
                exit(None, Some("SIGTERM"), false),
                -1,
                false,
                "signal: terminated",
            ),
            (exit(Some(0), None, true), -1, false, "signal: killed"),
        ];
        for (e, code, exited, status) in cases {
            let end = end_of(&e);
            assert_eq!(
                (end.exit_code, end.exited, end.status.as_str()),
                (code, exited, status),
                "{e:?}"
            );
        }
    }

    #[test]
    fn a_tail_passes_bytes_raw_in_bounded_chunks_and_jumps_holes() {
        use std::io::{Seek, Write};
        let dir = tempfile::tempdir().unwrap();
        let text = |m: &Bytes| String::from_utf8_lossy(&m[5..]).into_owned();
        // Raw bytes, not text: what is not UTF-8 stays as it is.
        let path = dir.path().join("small");
        std::fs::write(&path, b"\xffab").unwrap();
        let (msgs, _) = RawTail::new(Kind::Stderr, File::open(&path).unwrap(), false).read();
        assert_eq!(text(&msgs[0]), r#"{"event":{"data":{"stderr":"/2Fi"}}}"#);
        // A full chunk, a hole of 1 MiB, then 40 KiB: three chunks, and no zeros.
        let path = dir.path().join("sparse");
        let mut f = File::create(&path).unwrap();
        f.write_all(&[b'a'; 32 << 10]).unwrap();
        f.seek(std::io::SeekFrom::Current(1 << 20)).unwrap();
        f.write_all(&[b'x'; 40 << 10]).unwrap();
        let mut t = RawTail::new(Kind::Stdout, File::open(&path).unwrap(), false);
        let (msgs, behind) = t.read();
        assert!(!behind);
        assert_eq!(msgs.len(), 3);
        assert!(
            msgs.iter().all(|m| !text(m).contains("AAAA")),
            "the hole was read as zeros"
        );
        assert_eq!(t.offset, (32 << 10) + (1 << 20) + (40 << 10));
        let (msgs, _) = t.read();
        assert!(msgs.is_empty(), "nothing new");
        // From the end: only what comes later.
        let t = RawTail::new(Kind::Stdout, File::open(&path).unwrap(), true);
        assert_eq!(t.offset, (32 << 10) + (1 << 20) + (40 << 10));
    }
}
