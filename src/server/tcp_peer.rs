//! Who is at the other end of a TCP connection from this machine (docs/security.md, "The
//! operator channel"). TCP carries no peer credentials, but a client at one of this machine's
//! own addresses (`host::local_addrs`: loopback, the host's main address, a Docker network's gateway,
//! IPv4 and IPv6) is a socket in moat's own network namespace: `/proc/net/tcp{,6}` gives its
//! inode (also when the kernel's NAT rewrote the client's address on the way, as Docker's
//! `MASQUERADE` rule does for a host process that connects to a bridge gateway address), and
//! the processes holding that inode are found under `/proc/<pid>/fd`. Those
//! processes then get the same check as a unix-socket peer, so a host command that read the
//! operator token still cannot use it from here. A local client whose end cannot be found, or
//! that no process moat can examine holds, is refused too: it closed its end after sending
//! (the request still arrives), or hides where moat cannot look, and either would otherwise
//! pass unchecked. A client at another address (another host, a container) has no such record
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
use crate::host::local_addrs::canonical;
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
    a.port() == b.port() && canonical(a.ip()) == canonical(b.ip())
}

/// What the socket tables hold for the client end of a connection.
#[derive(Debug, PartialEq, Eq)]
enum ClientEnd {
    /// No row for it.
    Missing,
    /// Rows, but no descriptor holds them any more (closed, lingering in `FIN_WAIT` or
    /// `TIME_WAIT`).
    Closed,
    /// The inodes of the live rows.
    Open(Vec<u64>),
}

/// The client end of the connection `client` → `server` in `/proc/net/tcp{,6}`.
///
/// A row whose local end is `client` is the client's. When none is, the kernel may have
/// rewritten the client's address on the way (Docker's `MASQUERADE` rule gives a host process
/// that connects from a bridge gateway address another of this machine's addresses): then the
/// rows connected to `server` from the same port count. Taking more rows can only refuse more,
/// never let a host command through.
fn client_end(proc_root: &Path, client: SocketAddr, server: SocketAddr) -> ClientEnd {
    let mut rows = Vec::new();
    for table in ["net/tcp", "net/tcp6"] {
        if let Ok(text) = std::fs::read_to_string(proc_root.join(table)) {
            rows.extend(
                parse_table(&text)
                    .into_iter()
                    .filter(|r| same(r.remote, server) && r.local.port() == client.port()),
            );
        }
    }
    let exact: Vec<&Row> = rows.iter().filter(|r| same(r.local, client)).collect();
    let chosen: Vec<&Row> = if exact.is_empty() {
        rows.iter().collect()
    } else {
        exact
    };
    if chosen.is_empty() {
        return ClientEnd::Missing;
    }
    let mut live: Vec<u64> = chosen.iter().map(|r| r.inode).filter(|i| *i != 0).collect();
    live.dedup();
    if live.is_empty() {
        ClientEnd::Closed
    } else {
        ClientEnd::Open(live)
    }
}

/// The processes holding any of the sockets `inodes` open.
fn holders(proc_root: &Path, inodes: &[u64]) -> Vec<u32> {
    let wanted: Vec<String> = inodes.iter().map(|i| format!("socket:[{i}]")).collect();
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
            std::fs::read_link(fd.path())
                .is_ok_and(|t| wanted.iter().any(|w| t.as_os_str() == w.as_str()))
        });
        if holds {
            found.push(pid);
        }
    }
    found
}

/// The processes at the client end of `client` → `server`, a connection from this machine;
/// `Err` says why none can be named, and then the client is refused (it cannot be told apart
/// from a host command).
pub fn local_clients(
    proc_root: &Path,
    client: SocketAddr,
    server: SocketAddr,
) -> Result<Vec<u32>, String> {
    let unseen = |what: &str| {
        format!(
            "the client at {client} is on this machine, but {what}; a local client must keep its \
             connection open until moat answers, from a process moat can examine (or use moat's \
             unix socket)"
        )
    };
    match client_end(proc_root, client, server) {
        ClientEnd::Missing => Err(unseen(
            "its end of the connection is not in this machine's socket tables",
        )),
        ClientEnd::Closed => Err(unseen(
            "it closed its end of the connection before moat could check it",
        )),
        ClientEnd::Open(inodes) => {
            let pids = holders(proc_root, &inodes);
            if pids.is_empty() {
                Err(unseen(
                    "no process moat can examine holds its end of the connection (another pid \
                     namespace, or a process moat may not inspect)",
                ))
            } else {
                Ok(pids)
            }
        }
    }
}

/// The verdict on a connection from `client` to moat's `server` end: judged by its token
/// alone unless `client` is one of this machine's addresses; then every process holding the
/// client end must be outside host commands.
fn judge(
    proc_root: &Path,
    client: SocketAddr,
    server: Option<SocketAddr>,
    known: &dyn Fn(u32) -> Option<String>,
) -> Result<(), Refusal> {
    if !crate::host::local_addrs::is_local(client.ip()) {
        return Ok(());
    }
    let refused = |reason: String| Refusal {
        pid: 0,
        origin: None,
        reason,
    };
    let Some(server) = server else {
        return Err(refused(format!(
            "the client at {client} is on this machine, but moat could not read its own end of \
             the connection to find it"
        )));
    };
    local_clients(proc_root, client, server)
        .map_err(refused)?
        .into_iter()
        .try_for_each(|pid| crate::host::check_pid(proc_root, pid, known))
}

/// A TCP connection's two ends, and what was found about its client.
#[derive(Debug, Clone)]
pub struct TcpPeer {
    /// The client's address, for the audit log.
    pub addr: SocketAddr,
    /// moat's end, to find the connection in `/proc/net/tcp`.
    pub server: Option<SocketAddr>,
    /// `Err` when a local process at the client end runs inside a host command, or the client
    /// is on this machine but its end could not be found or examined. Decided once per connection, at its first request (the client is then
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

    /// `registry` knows the daemon's live host commands: a PTY host command replaces its
    /// wrapper and may clear its environment, so its marker is gone and only the daemon's
    /// own list of wrapper pids recognises it — the check the socket makes too.
    async fn verdict(&self, registry: Arc<crate::process::Registry>) -> Result<(), Refusal> {
        let (client, server) = (self.addr, self.server);
        self.verdict
            .get_or_init(|| async move {
                // Reads the interface table and, for a local client, scans `/proc`: blocking.
                tokio::task::spawn_blocking(move || {
                    judge(Path::new("/proc"), client, server, &|p| {
                        registry.host_leader(p)
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

/// Refuses, with 403 and an audit record, every request on a TCP connection whose client is
/// on this machine and runs inside a host command (or cannot be examined), whatever token it
/// presents. A connection without a
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
    match peer.verdict(state.app.registry.clone()).await {
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

    /// Real connections to this machine's own addresses (loopback, and the first other one
    /// it has): the holder of the client end is this very process, which is no host command.
    #[test]
    fn finds_the_process_at_the_other_end() {
        let mut addrs = vec!["127.0.0.1".parse().unwrap()];
        addrs.extend(
            crate::host::local_addrs::interface_addrs()
                .unwrap()
                .into_iter()
                .find(|a| a.is_ipv4() && !a.is_loopback()),
        );
        for ip in addrs {
            let server = std::net::TcpListener::bind((ip, 0)).unwrap();
            let addr = server.local_addr().unwrap();
            let client = std::net::TcpStream::connect(addr).unwrap();
            let (_accepted, peer) = server.accept().unwrap();
            assert_eq!(peer, client.local_addr().unwrap());
            let pids = local_clients(Path::new("/proc"), peer, addr).unwrap();
            assert_eq!(pids, vec![std::process::id()], "{ip}");
            assert_eq!(
                judge(Path::new("/proc"), peer, Some(addr), &|_| None),
                Ok(()),
                "{ip}"
            );
            // A process the daemon knows as a live host command's leader is refused though
            // it carries no marker: a terminal command replaced its wrapper and cleared its
            // environment (the third hostile review; the TCP check did not ask the daemon).
            let me = std::process::id();
            let known = |p: u32| (p == me).then(|| "warm-river".to_string());
            let refused = judge(Path::new("/proc"), peer, Some(addr), &known).unwrap_err();
            assert!(refused.reason.contains("warm-river"), "{ip}: {refused:?}");
        }
        // Not this machine's: judged by its token, nothing is looked up.
        let far: SocketAddr = "198.51.100.1:4000".parse().unwrap();
        assert_eq!(
            judge(Path::new("/nonexistent"), far, None, &|_| None),
            Ok(())
        );
    }

    /// A client that sent its request and closed its end is no longer held by any process:
    /// it cannot be checked, so it is refused.
    #[test]
    fn a_local_client_that_closed_its_end_is_refused() {
        use std::io::Write;
        let server = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = server.local_addr().unwrap();
        let mut client = std::net::TcpStream::connect(addr).unwrap();
        let (_accepted, peer) = server.accept().unwrap();
        client.write_all(b"POST / HTTP/1.1\r\n\r\n").unwrap();
        drop(client);
        let r = judge(Path::new("/proc"), peer, Some(addr), &|_| None).unwrap_err();
        assert_eq!((r.pid, r.origin.as_ref()), (0, None));
        assert!(r
            .reason
            .starts_with(&format!("the client at {peer} is on this machine, but ")));
        assert!(
            r.reason
                .contains("a local client must keep its connection open"),
            "{}",
            r.reason
        );
        assert!(judge(Path::new("/proc"), peer, None, &|_| None).is_err());
    }

    /// Over a fake `/proc`: a listed socket nobody visible holds, and one held by a marked
    /// process.
    #[test]
    fn unseen_holders_and_marked_holders() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir(root.join("net")).unwrap();
        let le = cfg!(target_endian = "little");
        let (client, server) = if le {
            ("0100007F:9C40", "0100007F:1F90")
        } else {
            ("7F000001:9C40", "7F000001:1F90")
        };
        std::fs::write(
            root.join("net/tcp"),
            format!(
                "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n   0: {client} {server} 01 00000000:00000000 00:00000000 00000000     0        0 4242 1\n"
            ),
        )
        .unwrap();
        let (c, s) = (
            "127.0.0.1:40000".parse().unwrap(),
            "127.0.0.1:8080".parse().unwrap(),
        );
        let err = local_clients(root, c, s).unwrap_err();
        assert!(err.contains("no process moat can examine holds"), "{err}");
        // Another port to the same server: not this client's.
        let other_port = "127.0.0.1:40001".parse().unwrap();
        let err = local_clients(root, other_port, s).unwrap_err();
        assert!(err.contains("not in this machine's socket tables"), "{err}");
        // pid 77 holds it and carries a host command's marker.
        let p = root.join("77");
        std::fs::create_dir_all(p.join("fd")).unwrap();
        std::os::unix::fs::symlink("socket:[4242]", p.join("fd/3")).unwrap();
        std::fs::write(
            p.join("stat"),
            "77 (curl) S 1 77 77 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 770 1 2",
        )
        .unwrap();
        std::fs::write(p.join("environ"), "MOAT_HOST_COMMAND=warm-river\0").unwrap();
        assert_eq!(local_clients(root, c, s), Ok(vec![77]));
        // The address rewritten on the way (Docker's MASQUERADE on a bridge gateway address):
        // the row from the same port to the same server is the client's.
        let masqueraded = "192.0.2.2:40000".parse().unwrap();
        assert_eq!(local_clients(root, masqueraded, s), Ok(vec![77]));
        let r = judge(root, c, Some(s), &|_| None).unwrap_err();
        assert_eq!(r.origin.unwrap().process_id, "warm-river");
    }
}
