//! Attacks on a node's listener before any token is shown (docs/nodes.md, "Bounds"): a peer
//! without a pairing token opens connections and says nothing, from one address and from
//! many, and the paired gateway must still be served. Two moat homes, two daemons, loopback
//! TCP; the attacker binds its sockets to other loopback addresses (127.0.0.2 and up), as
//! another machine would arrive from another address.

mod common;

use std::io::{ErrorKind, Read};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use common::node::pair;
use socket2::{Domain, Socket, Type};

/// A silent TCP connection to `node` from `from` (a loopback address of the attacker's).
fn silent(from: [u8; 4], node: &str) -> TcpStream {
    let node: SocketAddr = node.parse().unwrap();
    let s = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
    s.bind(&SocketAddr::from((from, 0)).into()).unwrap();
    s.connect(&node.into()).unwrap();
    let s: TcpStream = s.into();
    s.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
    s
}

/// Whether the node closed `s`: a read gives its end or a reset rather than timing out.
fn closed(s: &mut TcpStream) -> bool {
    let mut b = [0u8; 64];
    match s.read(&mut b) {
        Ok(0) => true,
        Ok(_) => false,
        Err(e) => !matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut),
    }
}

/// The gateway's call: `GET /node/v1/info` with its token, over a new TLS connection.
async fn gateway_is_served(p: &common::node::Pair) -> Result<(), String> {
    moat::node::call(
        "n1",
        &p.node.url(),
        &p.node.fingerprint,
        &p.token,
        http::Method::GET,
        "/node/v1/info",
        None,
        Some(Duration::from_secs(5)),
    )
    .await
    .map(|_| ())
    .map_err(|e| e.to_string())
}

/// Waits until `pred` holds of the connections, or panics with `what` after 20 s.
fn settle(conns: &mut [TcpStream], what: &str, pred: impl Fn(&[bool]) -> bool) -> Vec<bool> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let state: Vec<bool> = conns.iter_mut().map(closed).collect();
        if pred(&state) {
            return state;
        }
        assert!(Instant::now() < deadline, "{what}: closed = {state:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// One address keeps at most 16 silent connections: each one past them closes that
/// address's own oldest, never another address's; the 16 left are the newest; and they are
/// closed once their ten seconds to show a token are up.
#[tokio::test]
async fn one_address_holds_sixteen_silent_connections_for_ten_seconds() {
    let Some(p) = pair("node-silent-one", "[node]\nmax_connections = 64\n").await else {
        return;
    };
    let node = p.node.addr.clone();
    let mut other = silent([127, 0, 0, 3], &node);
    let opened = std::time::Instant::now();
    let mut conns: Vec<TcpStream> = (0..40).map(|_| silent([127, 0, 0, 2], &node)).collect();
    let state = settle(&mut conns, "the share", |s| {
        s.iter().filter(|c| **c).count() >= 24
    });
    assert_eq!(state.iter().filter(|c| !**c).count(), 16, "{state:?}");
    assert!(
        state[24..].iter().all(|c| !c),
        "the newest 16 stay: {state:?}"
    );
    assert!(!closed(&mut other), "another address's connection stays");
    gateway_is_served(&p).await.unwrap();
    // The 16 silent ones go when their deadline passes, not before.
    let mut last16: Vec<TcpStream> = conns.drain(24..).collect();
    settle(&mut last16, "the deadline", |s| s.iter().all(|c| *c));
    let took = opened.elapsed();
    assert!(
        took >= Duration::from_secs(9) && took < Duration::from_secs(20),
        "closed after {took:?}"
    );
}

/// A peer without a token at the gateway's own address (the same machine, or behind the same
/// NAT) keeps 16 silent connections open and opens a new one each time one is closed: the
/// gateway's calls from that address are still served.
#[tokio::test]
async fn silent_connections_at_the_gateways_own_address_do_not_keep_it_out() {
    let Some(p) = pair("node-silent-same", "").await else {
        return;
    };
    let node = p.node.addr.clone();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flood = {
        let (node, stop) = (node.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut held: Vec<TcpStream> = (0..16).map(|_| silent([127, 0, 0, 1], &node)).collect();
            let mut opened = 16;
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                for c in held.iter_mut() {
                    if closed(c) {
                        *c = silent([127, 0, 0, 1], &node);
                        opened += 1;
                    }
                }
            }
            opened
        })
    };
    std::thread::sleep(Duration::from_millis(500));
    for i in 0..5 {
        gateway_is_served(&p)
            .await
            .unwrap_or_else(|e| panic!("call {i}: {e}"));
        std::thread::sleep(Duration::from_millis(300));
    }
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let opened = flood.join().unwrap();
    assert!(opened > 16, "the flood re-opened what was closed: {opened}");
}

/// A revoked gateway's open event stream ends: revoking takes all of its places, not only
/// its next calls.
#[tokio::test]
async fn revoking_a_token_ends_its_open_event_streams() {
    let Some(p) = pair("node-revoke-stream", "").await else {
        return;
    };
    let mut stream = moat::node::open_stream(
        "n1",
        &p.node.url(),
        &p.node.fingerprint,
        &p.token,
        moat::node::EVENTS_PATH,
        &serde_json::json!({"session": "main"}),
    )
    .await
    .unwrap();
    p.node.ok(&["node", "tokens", "revoke", "gw"]);
    let ended = tokio::time::timeout(Duration::from_secs(25), async {
        use http_body_util::BodyExt;
        while let Some(frame) = stream.frame().await {
            if frame.is_err() {
                break;
            }
        }
    })
    .await;
    assert!(ended.is_ok(), "the stream outlived its token by 25 s");
}

/// Silent connections from many addresses fill the listener: the oldest of them are closed
/// to make room, and the gateway's call gets a place and is served.
#[tokio::test]
async fn many_addresses_filling_the_listener_do_not_keep_the_gateway_out() {
    let Some(p) = pair("node-silent-many", "[node]\nmax_connections = 32\n").await else {
        return;
    };
    let node = p.node.addr.clone();
    let mut conns = Vec::new();
    for host in 3..=10u8 {
        for _ in 0..16 {
            conns.push(silent([127, 0, 0, host], &node));
        }
    }
    // 128 silent connections for 32 places: the listener holds at most 32 of them.
    let state = settle(&mut conns, "the fill", |s| {
        s.iter().filter(|c| !**c).count() <= 32
    });
    let open = state.iter().filter(|c| !**c).count();
    assert!(open > 0, "{state:?}");
    for _ in 0..3 {
        gateway_is_served(&p).await.unwrap();
    }
}
