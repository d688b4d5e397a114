//! One connection to a helper: the handshake, requests in flight by id, and a reader task that
//! hands each answer to its request.
//!
//! Everything the helper sends is untrusted: a frame over [`frame::MAX_FRAME`], an output
//! chunk over [`frame::MAX_CHUNK`], a message only moat may send, or anything that does not
//! decode ends the connection. Its requests then see the end of their channel, which callers
//! read as "the helper went away" (docs/helper.md, "Protocol"). Each request's channel is
//! bounded, so moat holds at most [`QUEUE`] chunks per request.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::{Buf, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::unix::OwnedWriteHalf;
use tokio::net::UnixStream;
use tokio::sync::mpsc;

use super::frame::{self, Msg};
use super::HelperError;

/// How long the helper has to answer the hello.
const HANDSHAKE: Duration = Duration::from_secs(5);
/// Answers queued per request before the reader waits for its consumer.
const QUEUE: usize = 32;

/// An answer to one request.
#[derive(Debug)]
pub enum Event {
    Started,
    Output(Vec<u8>),
    Exited(i32),
    Failed(String),
    /// A look's counts: the group's live members and the marked processes (`None`: the
    /// helper could not tell).
    Seen {
        group: Option<u32>,
        marked: Option<u32>,
    },
}

#[derive(Default)]
struct Shared {
    pending: Mutex<HashMap<u32, mpsc::Sender<Event>>>,
    dead: AtomicBool,
}

impl Shared {
    /// Marks the connection dead and closes every request's channel.
    fn die(&self) {
        self.dead.store(true, Ordering::SeqCst);
        self.pending.lock().unwrap().clear();
    }
}

pub struct Conn {
    writer: tokio::sync::Mutex<OwnedWriteHalf>,
    shared: Arc<Shared>,
    next: AtomicU32,
    reader: tokio::task::JoinHandle<()>,
}

impl Drop for Conn {
    fn drop(&mut self) {
        self.reader.abort();
        self.shared.die();
    }
}

impl Conn {
    /// Greets the helper and starts reading its answers.
    pub async fn open(stream: UnixStream) -> Result<Arc<Conn>, HelperError> {
        let (mut read, mut write) = stream.into_split();
        let hello = frame::encode(&Msg::Hello {
            version: frame::VERSION,
        });
        let mut buf = BytesMut::with_capacity(8 * 1024);
        let greeting = async {
            write
                .write_all(&hello)
                .await
                .map_err(HelperError::io("greet the helper"))?;
            loop {
                if let Some((msg, n)) = frame::decode(&buf)? {
                    buf.advance(n);
                    return Ok(msg);
                }
                if read
                    .read_buf(&mut buf)
                    .await
                    .map_err(HelperError::io("read the helper's greeting"))?
                    == 0
                {
                    return Err(HelperError::Lost);
                }
            }
        };
        match tokio::time::timeout(HANDSHAKE, greeting).await {
            Ok(Ok(Msg::Hello { version })) if version == frame::VERSION => {}
            Ok(Ok(other)) => {
                return Err(HelperError::Protocol(format!(
                    "expected a hello for version {}, got {other:?}",
                    frame::VERSION
                )))
            }
            Ok(Err(e)) => return Err(e),
            Err(_) => return Err(HelperError::Protocol("no greeting in time".into())),
        }
        let shared = Arc::new(Shared::default());
        let reader = tokio::spawn(read_loop(read, buf, shared.clone()));
        Ok(Arc::new(Conn {
            writer: tokio::sync::Mutex::new(write),
            shared,
            next: AtomicU32::new(1),
            reader,
        }))
    }

    pub fn is_alive(&self) -> bool {
        !self.shared.dead.load(Ordering::SeqCst)
    }

    /// Ends the connection (a helper that does not answer in time).
    pub fn close(&self) {
        self.reader.abort();
        self.shared.die();
    }

    /// Sends the request `build` makes for a fresh id; its answers arrive on the receiver.
    /// `Err(Lost)` means the frame never left moat, so the caller may safely try elsewhere.
    pub async fn request(
        &self,
        build: impl FnOnce(u32) -> Msg,
    ) -> Result<(u32, mpsc::Receiver<Event>), HelperError> {
        let (tx, rx) = mpsc::channel(QUEUE);
        let id = {
            let mut pending = self.shared.pending.lock().unwrap();
            if self.shared.dead.load(Ordering::SeqCst) {
                return Err(HelperError::Lost);
            }
            let mut id = self.next.fetch_add(1, Ordering::Relaxed);
            while id == 0 || pending.contains_key(&id) {
                id = self.next.fetch_add(1, Ordering::Relaxed);
            }
            pending.insert(id, tx);
            id
        };
        if let Err(e) = self.send(&build(id)).await {
            self.shared.pending.lock().unwrap().remove(&id);
            return Err(e);
        }
        Ok((id, rx))
    }

    /// Stops waiting for request `id`: a late answer is then dropped like one for an id moat
    /// never used.
    pub fn forget(&self, id: u32) {
        self.shared.pending.lock().unwrap().remove(&id);
    }

    /// Sends one frame (input, resize, signal for a request in flight).
    pub async fn send(&self, msg: &Msg) -> Result<(), HelperError> {
        if !self.is_alive() {
            return Err(HelperError::Lost);
        }
        let bytes = frame::encode(msg);
        let mut w = self.writer.lock().await;
        if w.write_all(&bytes).await.is_err() {
            self.shared.die();
            return Err(HelperError::Lost);
        }
        Ok(())
    }
}

/// Reads answers until the stream ends or breaks the protocol, then closes every request.
async fn read_loop(
    mut read: tokio::net::unix::OwnedReadHalf,
    mut buf: BytesMut,
    shared: Arc<Shared>,
) {
    'outer: loop {
        loop {
            let (msg, n) = match frame::decode(&buf) {
                Ok(Some(m)) => m,
                Ok(None) => break,
                Err(e) => {
                    tracing::warn!(error = %e, "dropping the helper connection: bad frame");
                    break 'outer;
                }
            };
            buf.advance(n);
            let (id, event, last) = match msg {
                Msg::Started { id, .. } => (id, Event::Started, false),
                Msg::Output { id, data } if data.len() <= frame::MAX_CHUNK => {
                    (id, Event::Output(data), false)
                }
                Msg::Exited { id, status } => (id, Event::Exited(status), true),
                Msg::Seen { id, group, marked } => (id, Event::Seen { group, marked }, true),
                Msg::Failed { id, message } => {
                    let message: String = message.chars().take(512).collect();
                    (id, Event::Failed(message), true)
                }
                other => {
                    tracing::warn!(
                        kind = ?std::mem::discriminant(&other),
                        "dropping the helper connection: it sent a message only moat sends"
                    );
                    break 'outer;
                }
            };
            let tx = {
                let mut pending = shared.pending.lock().unwrap();
                if last {
                    pending.remove(&id)
                } else {
                    pending.get(&id).cloned()
                }
            };
            // An id moat is not waiting on (forgotten, or made up) is ignored.
            if let Some(tx) = tx {
                let _ = tx.send(event).await;
            }
        }
        buf.reserve(64 * 1024);
        match read.read_buf(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
    }
    shared.die();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::helper::frame::Spawn;

    /// A fake helper on the other end: greets, then sends `after` raw.
    async fn pair(after: Vec<u8>) -> (Arc<Conn>, UnixStream) {
        let (ours, mut theirs) = UnixStream::pair().unwrap();
        let serve = async move {
            let mut head = [0u8; 64];
            let _ = theirs.read(&mut head).await.unwrap();
            theirs
                .write_all(&frame::encode(&Msg::Hello {
                    version: frame::VERSION,
                }))
                .await
                .unwrap();
            theirs.write_all(&after).await.unwrap();
            theirs
        };
        let (conn, theirs) = tokio::join!(Conn::open(ours), serve);
        (conn.unwrap(), theirs)
    }

    fn spawn(id: u32) -> Msg {
        Msg::Spawn(Spawn {
            id,
            argv: vec!["true".into()],
            ..Default::default()
        })
    }

    #[tokio::test]
    async fn answers_reach_their_request() {
        let mut after = frame::encode(&Msg::Started { id: 1, pid: 7 });
        after.extend(frame::encode(&Msg::Output {
            id: 1,
            data: b"hi".to_vec(),
        }));
        after.extend(frame::encode(&Msg::Exited { id: 1, status: 3 }));
        let (conn, _theirs) = pair(after).await;
        let (id, mut rx) = conn.request(spawn).await.unwrap();
        assert_eq!(id, 1);
        assert!(matches!(rx.recv().await, Some(Event::Started)));
        assert!(matches!(rx.recv().await, Some(Event::Output(d)) if d == b"hi"));
        assert!(matches!(rx.recv().await, Some(Event::Exited(3))));
        assert!(rx.recv().await.is_none(), "nothing follows an exit");
    }

    /// A look's answer reaches it and is its last; a forgotten request's late answer is
    /// dropped and leaves the connection up.
    #[tokio::test]
    async fn a_looks_answer_reaches_it_and_a_forgotten_one_is_dropped() {
        let mut after = frame::encode(&Msg::Seen {
            id: 1,
            group: Some(0),
            marked: None,
        });
        after.extend(frame::encode(&Msg::Seen {
            id: 2,
            group: Some(1),
            marked: Some(1),
        }));
        let (conn, _theirs) = pair(after).await;
        let look = |id| Msg::Look {
            id,
            pgid: 0,
            process: "a".into(),
        };
        let (_, mut rx) = conn.request(look).await.unwrap();
        let (second, mut late) = conn.request(look).await.unwrap();
        conn.forget(second);
        assert!(matches!(
            rx.recv().await,
            Some(Event::Seen {
                group: Some(0),
                marked: None
            })
        ));
        assert!(rx.recv().await.is_none(), "nothing follows an answer");
        assert!(
            late.recv().await.is_none(),
            "a forgotten request hears nothing"
        );
        assert!(conn.is_alive());
    }

    #[tokio::test]
    async fn garbage_oversize_and_forbidden_frames_drop_the_connection() {
        let mut oversize = ((frame::MAX_FRAME + 1) as u32).to_be_bytes().to_vec();
        oversize.extend([0u8; 16]);
        let forbidden = frame::encode(&spawn(1));
        let big_chunk = frame::encode(&Msg::Output {
            id: 1,
            data: vec![b'x'; frame::MAX_CHUNK + 1],
        });
        let garbage = b"\x00\x00\x00\x05\xffjunk".to_vec();
        for bytes in [oversize, forbidden, big_chunk, garbage] {
            let (conn, mut theirs) = pair(Vec::new()).await;
            let (_, mut rx) = conn.request(spawn).await.unwrap();
            theirs.write_all(&bytes).await.unwrap();
            // The request sees the end of its channel, at once, and nothing is left hanging.
            let got = tokio::time::timeout(Duration::from_secs(5), rx.recv())
                .await
                .expect("a bad frame must not leave the caller waiting");
            assert!(got.is_none());
            assert!(!conn.is_alive());
            assert!(matches!(conn.request(spawn).await, Err(HelperError::Lost)));
        }
    }

    #[tokio::test]
    async fn a_helper_that_goes_away_closes_its_requests() {
        let (conn, theirs) = pair(Vec::new()).await;
        let (_, mut rx) = conn.request(spawn).await.unwrap();
        drop(theirs);
        assert!(rx.recv().await.is_none());
        assert!(!conn.is_alive());
    }

    #[tokio::test]
    async fn a_peer_that_is_not_a_helper_is_refused() {
        for reply in [
            b"HTTP/1.1 400 Bad Request\r\n\r\n".to_vec(),
            frame::encode(&Msg::Hello { version: 99 }),
            Vec::new(),
        ] {
            let (ours, mut theirs) = UnixStream::pair().unwrap();
            let serve = async move {
                let mut head = [0u8; 64];
                let _ = theirs.read(&mut head).await;
                let _ = theirs.write_all(&reply).await;
            };
            let (conn, ()) = tokio::join!(Conn::open(ours), serve);
            assert!(conn.is_err());
        }
    }
}
