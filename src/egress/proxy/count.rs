//! A stream that counts the bytes through it each way, for the audit log's byte counts.

use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// Bytes read from and written to one stream; shared with whoever audits it afterwards.
#[derive(Debug, Default)]
pub struct Counts {
    /// Bytes read from the stream (from the upstream: "down").
    pub read: AtomicU64,
    /// Bytes written to it (to the upstream: "up").
    pub written: AtomicU64,
}

impl Counts {
    pub fn get(&self) -> (u64, u64) {
        (
            self.written.load(Ordering::Relaxed),
            self.read.load(Ordering::Relaxed),
        )
    }
}

pub struct Counted<S> {
    /// The upstream connection.
    inner: S,
    /// Where the totals go.
    counts: Arc<Counts>,
}

impl<S> Counted<S> {
    pub fn new(inner: S, counts: Arc<Counts>) -> Self {
        Self { inner, counts }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Counted<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let poll = Pin::new(&mut self.inner).poll_read(cx, buf);
        let n = (buf.filled().len() - before) as u64;
        self.counts.read.fetch_add(n, Ordering::Relaxed);
        poll
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Counted<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let poll = Pin::new(&mut self.inner).poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = &poll {
            self.counts.written.fetch_add(*n as u64, Ordering::Relaxed);
        }
        poll
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test]
    async fn counts_both_ways() {
        let (a, mut b) = tokio::io::duplex(64);
        let counts = Arc::new(Counts::default());
        let mut c = Counted::new(a, counts.clone());
        c.write_all(b"hello").await.unwrap();
        b.write_all(b"0123456789").await.unwrap();
        let mut buf = [0u8; 10];
        c.read_exact(&mut buf).await.unwrap();
        assert_eq!(counts.get(), (5, 10));
    }
}
