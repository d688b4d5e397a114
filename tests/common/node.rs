//! Two moat homes on this machine, paired as a gateway and a node (docs/nodes.md): the node's
//! daemon is a `moat serve --node-listen 127.0.0.1:PORT` of its own (killed and restarted on
//! the same port at will), the gateway's is started on demand by its CLI. Both homes' daemons
//! are stopped and their containers removed on drop.

use std::io::{BufRead, BufReader};
use std::process::{Child, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::cli_home::{stdout, text, TestHome};

/// The node's home and its hand-started daemon.
pub struct NodeDaemon {
    pub home: TestHome,
    child: Option<Child>,
    /// `127.0.0.1:PORT` of its TLS listener.
    pub addr: String,
    /// `SHA256:…` of its certificate, as its daemon printed it.
    pub fingerprint: String,
    /// What the daemon printed on stderr, for failure messages.
    log: Arc<Mutex<String>>,
}

impl NodeDaemon {
    /// A node home with `config` as its moat.toml, its daemon started.
    pub fn start(prefix: &str, config: &str) -> Self {
        let home = TestHome::configured(prefix, config);
        let mut node = Self {
            home,
            child: None,
            addr: "127.0.0.1:0".into(),
            fingerprint: String::new(),
            log: Default::default(),
        };
        node.launch();
        node
    }

    pub fn url(&self) -> String {
        format!("https://{}", self.addr)
    }

    fn launch(&mut self) {
        let mut child = self
            .home
            .moat()
            .args(["serve", "--node-listen", &self.addr])
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stderr = child.stderr.take().unwrap();
        let log = self.log.clone();
        let (tx, rx) = std::sync::mpsc::channel::<String>();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                log.lock().unwrap().push_str(&format!("{line}\n"));
                let _ = tx.send(line);
            }
        });
        let deadline = Instant::now() + Duration::from_secs(60);
        let (mut node_line, mut serving) = (None, false);
        while node_line.is_none() || !serving {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = rx
                .recv_timeout(left)
                .unwrap_or_else(|_| panic!("node daemon did not start:\n{}", self.log()));
            if line.contains("moat node serving on https://") {
                node_line = Some(line);
            } else if line.contains(" serving on unix:") {
                serving = true;
            }
        }
        let line = node_line.unwrap();
        let rest = line.split("https://").nth(1).unwrap();
        let (addr, rest) = rest.split_once(' ').unwrap();
        self.addr = addr.to_string();
        self.fingerprint = rest
            .trim_start_matches("(certificate ")
            .trim_end_matches(')')
            .to_string();
        assert!(self.fingerprint.starts_with("SHA256:"), "{line}");
        self.child = Some(child);
    }

    /// Kills the daemon at once (SIGKILL: no graceful end), as a machine going away would.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Starts the daemon again on the same address.
    pub fn restart(&mut self) {
        self.kill();
        self.launch();
    }

    pub fn log(&self) -> String {
        self.log.lock().unwrap().clone()
    }

    /// `moat ARGS` in the node's home; panics with its output when it fails.
    pub fn ok(&self, args: &[&str]) -> String {
        let o = self.home.run(args);
        assert!(o.status.success(), "node: moat {args:?}: {}", text(&o));
        stdout(&o)
    }
}

impl Drop for NodeDaemon {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A gateway paired with a node as `n1` (the node knows it as `gw`).
pub struct Pair {
    pub node: NodeDaemon,
    pub gateway: TestHome,
    /// The token the node issued to the gateway.
    pub token: String,
}

impl Pair {
    /// The lines of the gateway's event stream for session `main` (`GET
    /// /v1/sessions/main/events` on its socket), as they arrive.
    pub fn gateway_events(&self) -> std::sync::mpsc::Receiver<String> {
        use std::io::{BufRead, BufReader, Write};
        let mut s =
            std::os::unix::net::UnixStream::connect(self.gateway.path().join("moat.sock")).unwrap();
        write!(
            s,
            "GET /v1/sessions/main/events HTTP/1.1\r\nHost: x\r\n\r\n"
        )
        .unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(s).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        rx
    }

    /// `moat ARGS` in the gateway's home; panics with its output when it fails.
    pub fn gw(&self, args: &[&str]) -> String {
        let o = self.gateway.run(args);
        assert!(
            o.status.success(),
            "gateway: moat {args:?}: {}\nnode log:\n{}",
            text(&o),
            self.node.log()
        );
        stdout(&o)
    }
}

/// A command's JSON output, parsed.
pub fn json(out: &str) -> serde_json::Value {
    serde_json::from_str(out).unwrap_or_else(|e| panic!("{e}: {out}"))
}

/// Issues a token on the node and pairs the gateway with it; `None` (skip) without an engine
/// outside CI (see [`super::engine`]).
pub async fn pair(prefix: &str, node_config: &str) -> Option<Pair> {
    super::engine().await?;
    let node = NodeDaemon::start(&format!("{prefix}-n"), node_config);
    let gateway = TestHome::new(&format!("{prefix}-g"));
    let token = node.ok(&["node", "tokens", "add", "gw"]).trim().to_string();
    let pair = Pair {
        node,
        gateway,
        token,
    };
    let url = pair.node.url();
    pair.gw(&[
        "nodes",
        "add",
        "n1",
        &url,
        "--fingerprint",
        &pair.node.fingerprint,
        "--token",
        &pair.token,
    ]);
    Some(pair)
}

/// Waits for an event line holding every one of `want`, within 30 s.
pub fn wait_for_event(rx: &std::sync::mpsc::Receiver<String>, want: &[&str]) -> String {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let mut seen = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) if want.iter().all(|w| line.contains(w)) => return line,
            Ok(line) => seen.push(line),
            Err(_) => panic!("no event with {want:?}; seen: {seen:#?}"),
        }
    }
}
