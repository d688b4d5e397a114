//! A TCP listener that sets `TCP_NODELAY` on every connection it accepts, for the listeners
//! whose answers are many small writes (E2B's streams, docs/e2b.md; a node's calls,
//! docs/nodes.md).

use std::net::IpAddr;

use super::limits::{Peer, RawAccept};

/// TCP with `TCP_NODELAY` on every connection. A stream's events are small writes; with
/// Nagle's algorithm each one after the first waits for the client's delayed
/// acknowledgement (40 ms on Linux), which would be most of a short command's time.
pub struct NoDelay(pub tokio::net::TcpListener);

impl RawAccept for NoDelay {
    type Io = tokio::net::TcpStream;
    type Addr = std::net::SocketAddr;

    async fn accept_raw(&self) -> std::io::Result<(Self::Io, Self::Addr)> {
        let (tcp, addr) = self.0.accept().await?;
        let _ = tcp.set_nodelay(true);
        Ok((tcp, addr))
    }

    fn addr(&self) -> std::io::Result<Self::Addr> {
        self.0.local_addr()
    }

    fn peer(io: &Self::Io, addr: &Self::Addr) -> Peer {
        <tokio::net::TcpListener as RawAccept>::peer(io, addr)
    }

    fn peer_ip(addr: &Self::Addr) -> Option<IpAddr> {
        Some(addr.ip())
    }
}
