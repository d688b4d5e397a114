//! Who is at the other end of a loopback TCP connection (docs/security.md, "The operator
//! channel"). TCP carries no peer credentials, but a connection from this machine is a socket
//! in moat's own network namespace: `/proc/net/tcp{,6}` gives its inode, and the processes
//! holding that inode are found under `/proc/<pid>/fd`. Those processes then get the same
//! check as a unix-socket peer, so a host command that read the operator token still cannot
//! use it from here. A connection from another host or network namespace has no such record
//! and is judged by its token alone.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::Path;
use std::sync::Arc;

use axum::extract::connect_info::{ConnectInfo, Connected};
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;
use axum::serve::IncomingStream;
use tokio::net::TcpListener;

use super::routes::ServerState;
use crate::host::Refusal;

/// One row of `/proc/net/tcp{,6}`: local and remote address, socket inode.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Row {
    local: SocketAddr,
    remote: SocketAddr,
    inode: u64,
}

/// Bounds the scan: a machine with more processes than this is examined only this far.
const MAX_PIDS: usize = 65_536;

/// Parses `ADDR:PORT` as the kernel prints it: the address as 32-bit words in the kernel's
/// byte order (each word `%08X`), the port in plain hex.
fn parse_addr(text: &str) -> Option<SocketAddr> {
    let (addr, port) = text.split_once(':')?;
    let port = u16::from_str_radix(port, 16).ok()?;
    let mut bytes = Vec::with_capacity(16);
    if addr.len() % 8 != 0 {
        return None;
    }
    for i in (0..addr.len()).step_by(8) {
        let word = u32::from_str_radix(addr.get(i..i + 8)?, 16).ok()?;
        bytes.extend_from_slice(&word.to_ne_bytes());
    }
    let ip = match bytes.len() {
        4 => IpAddr::V4(Ipv4Addr::new(bytes[0], bytes[1], bytes[2], bytes[3])),
        16 => IpAddr::V6(Ipv6Addr::from(<[u8; 16]>::try_from(bytes).ok()?)),
        _ => return None,
    };
    Some(SocketAddr::new(ip, port))
}

fn parse_table(text: &str) -> Vec<Row> {
    text.lines()
        .skip(1)
        .filter_map(|line| {
            let f: Vec<&str> = line.split_ascii_whitespace().collect();
            Some(Row {
                local: parse_addr(f.get(1)?)?,
                remote: parse_addr(f.get(2)?)?,
                inode: f.get(9)?.parse().ok()?,
            })
        })
        .collect()
}

/// Two addresses name the same endpoint, also across the IPv4-mapped IPv6 form a dual-stack
/// listener reports.
fn same(a: SocketAddr, b: SocketAddr) -> bool {
    let canon = |ip: IpAddr| match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
        v4 => v4,
    };
    a.port() == b.port() && canon(a.ip()) == canon(b.ip())
}

/// The socket inode of the client end of the connection `client` → `server`.
fn client_inode(proc_root: &Path, client: SocketAddr, server: SocketAddr) -> Option<u64> {
    ["net/tcp", "net/tcp6"].iter().find_map(|table| {
        let text = std::fs::read_to_string(proc_root.join(table)).ok()?;
        parse_table(&text)
            .into_iter()
            .find(|r| same(r.local, client) && same(r.remote, server) && r.inode != 0)
            .map(|r| r.inode)
    })
}

/// The processes holding socket `inode` open.
fn holders(proc_root: &Path, inode: u64) -> Vec<u32> {
    let wanted = format!("socket:[{inode}]");
    let Ok(entries) = std::fs::read_dir(proc_root) else {
        return Vec::new();
    };
    let mut found = Vec::new();
    for pid in entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .take(MAX_PIDS)
    {
        let Ok(fds) = std::fs::read_dir(proc_root.join(pid.to_string()).join("fd")) else {
            continue;
        };
        let holds = fds.filter_map(Result::ok).any(|fd| {
            std::fs::read_link(fd.path()).is_ok_and(|t| t.as_os_str() == wanted.as_str())
        });
        if holds {
            found.push(pid);
        }
    }
    found
}

/// The local processes at the client end of `client` → `server`; empty when the client is not
/// on a loopback address or its socket is not in this network namespace.
pub fn loopback_clients(proc_root: &Path, client: SocketAddr, server: SocketAddr) -> Vec<u32> {
    let loopback = match client.ip() {
        IpAddr::V4(v4) => v4.is_loopback(),
        IpAddr::V6(v6) => v6.is_loopback() || v6.to_ipv4_mapped().is_some_and(|v| v.is_loopback()),
    };
    if !loopback {
        return Vec::new();
    }
    client_inode(proc_root, client, server)
        .map(|inode| holders(proc_root, inode))
        .unwrap_or_default()
}

/// A TCP connection's two ends, and what was found about its client.
#[derive(Debug, Clone)]
pub struct TcpPeer {
    /// The client's address, for the audit log.
    pub addr: SocketAddr,
    /// moat's end, to find the connection in `/proc/net/tcp`.
    pub server: Option<SocketAddr>,
    /// `Err` when a local process at the client end runs inside a host command (or could not
    /// be examined). Decided once per connection, at its first request (the client is then
    /// waiting for the answer), off the accept loop: finding the holders scans `/proc`.
    verdict: Arc<tokio::sync::OnceCell<Result<(), Refusal>>>,
}

impl TcpPeer {
    /// Records an accepted connection. Whatever accepts TCP connections puts this in each
    /// request's extensions (as `ConnectInfo<TcpPeer>` or as a plain `TcpPeer`).
    pub fn of(stream: &tokio::net::TcpStream, client: SocketAddr) -> Self {
        TcpPeer {
            addr: client,
            server: stream.local_addr().ok(),
            verdict: Arc::default(),
        }
    }

    async fn verdict(&self) -> Result<(), Refusal> {
        let (client, server) = (self.addr, self.server);
        self.verdict
            .get_or_init(|| async move {
                let Some(server) = server else {
                    return Ok(());
                };
                tokio::task::spawn_blocking(move || {
                    loopback_clients(Path::new("/proc"), client, server)
                        .into_iter()
                        .try_for_each(|pid| {
                            crate::host::check_pid(Path::new("/proc"), pid, &|_| None)
                        })
                })
                .await
                .unwrap_or_else(|e| {
                    Err(Refusal {
                        pid: 0,
                        origin: None,
                        reason: format!("the check of the local client failed: {e}"),
                    })
                })
            })
            .await
            .clone()
    }
}

impl Connected<IncomingStream<'_, TcpListener>> for TcpPeer {
    fn connect_info(stream: IncomingStream<'_, TcpListener>) -> Self {
        TcpPeer::of(stream.io(), *stream.remote_addr())
    }
}

/// Refuses, with 403 and an audit record, every request on a TCP connection whose local
/// client runs inside a host command, whatever token it presents. A connection without a
/// record (another listener set-up) is judged by its token alone, as a remote one is.
pub async fn guard(State(state): State<Arc<ServerState>>, req: Request, next: Next) -> Response {
    let peer = req
        .extensions()
        .get::<ConnectInfo<TcpPeer>>()
        .map(|c| c.0.clone())
        .or_else(|| req.extensions().get::<TcpPeer>().cloned());
    let Some(peer) = peer else {
        return next.run(req).await;
    };
    match peer.verdict().await {
        Ok(()) => next.run(req).await,
        Err(refusal) => {
            let channel = format!("tcp {}", peer.addr);
            super::peer::refuse(&state, &req, &refusal, &channel, "TCP port")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_addresses() {
        let le = cfg!(target_endian = "little");
        let v4 = if le { "0100007F:1F90" } else { "7F000001:1F90" };
        assert_eq!(parse_addr(v4), Some("127.0.0.1:8080".parse().unwrap()));
        let v6 = if le {
            "00000000000000000000000001000000:0050"
        } else {
            "00000000000000000000000000000001:0050"
        };
        assert_eq!(parse_addr(v6), Some("[::1]:80".parse().unwrap()));
        assert_eq!(parse_addr("0100007F"), None);
        assert_eq!(parse_addr("01007F:0050"), None);
        assert!(same(
            "[::ffff:127.0.0.1]:5".parse().unwrap(),
            "127.0.0.1:5".parse().unwrap()
        ));
    }

    /// A real loopback connection: the holder of the client end is this very process.
    #[test]
    fn finds_the_process_at_the_other_end() {
        let server = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = server.local_addr().unwrap();
        let client = std::net::TcpStream::connect(addr).unwrap();
        let (_accepted, peer) = server.accept().unwrap();
        assert_eq!(peer, client.local_addr().unwrap());
        let pids = loopback_clients(Path::new("/proc"), peer, addr);
        assert_eq!(pids, vec![std::process::id()]);
        // Not loopback: nothing is looked up.
        let far: SocketAddr = "192.0.2.1:4000".parse().unwrap();
        assert!(loopback_clients(Path::new("/proc"), far, addr).is_empty());
    }
}
