//! `sandbox.network = "egress"` against the real engine, with no traffic leaving the machine:
//! stand-in upstreams (busybox httpd in a scratch image built here) run on an internal
//! network that only the sessions' proxies join (docs/security.md, "Network egress").
//! Driven through the `moat` binary, since the proxy image packs that binary.

mod common;

use std::process::Command;
use std::time::Duration;

use common::cli_home::{text, unix_get, wait_until, TestHome};

const UPSTREAM_IMAGE: &str = "moat-test-upstream:busybox";
const BODY: &str = "hello from upstream";

fn ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true")
}

fn docker(args: &[&str]) -> (bool, String) {
    let out = Command::new("docker").args(args).output().unwrap();
    let mut s = String::from_utf8_lossy(&out.stdout).into_owned();
    s.push_str(&String::from_utf8_lossy(&out.stderr));
    (out.status.success(), s)
}

/// The upstream image: a static busybox and one page, from scratch (no registry).
fn upstream_image() -> bool {
    if docker(&["image", "inspect", UPSTREAM_IMAGE]).0 {
        return true;
    }
    let busybox = std::path::Path::new("/bin/busybox");
    let is_static = Command::new("sh")
        .arg("-c")
        .arg("file -L /bin/busybox 2>/dev/null | grep -q 'statically linked' || ldd /bin/busybox 2>&1 | grep -q 'not a dynamic'")
        .status()
        .is_ok_and(|s| s.success());
    if !busybox.exists() || !is_static {
        assert!(
            !ci(),
            "a static /bin/busybox is missing under CI=true: apt-get install busybox-static"
        );
        eprintln!("skipping: no static /bin/busybox (apt-get install busybox-static)");
        return false;
    }
    let ctx = tempfile::tempdir().unwrap();
    std::fs::copy(busybox, ctx.path().join("busybox")).unwrap();
    std::fs::create_dir(ctx.path().join("www")).unwrap();
    std::fs::write(ctx.path().join("www/index.html"), format!("{BODY}\n")).unwrap();
    std::fs::write(
        ctx.path().join("Dockerfile"),
        "FROM scratch\nCOPY busybox /bin/busybox\nCOPY www /www\nENTRYPOINT [\"/bin/busybox\"]\n",
    )
    .unwrap();
    let (ok, out) = docker(&[
        "build",
        "-q",
        "-t",
        UPSTREAM_IMAGE,
        &ctx.path().display().to_string(),
    ]);
    assert!(ok, "build the upstream image: {out}");
    true
}

/// An internal network with two upstreams; removed (with this test's moat networks) on drop.
struct Upstreams {
    prefix: String,
    net: String,
    /// Allowed by exact entry.
    allowed: String,
    /// Allowed by nobody.
    other: String,
}

impl Upstreams {
    async fn start(prefix: &str) -> Option<Self> {
        common::engine().await?;
        if !upstream_image() {
            return None;
        }
        let u = Self {
            prefix: prefix.to_string(),
            net: format!("{prefix}-out"),
            allowed: format!("{prefix}-allowed"),
            other: format!("{prefix}-other"),
        };
        // What a killed earlier run of this test left behind would make every create fail.
        docker(&["rm", "-f", &u.allowed, &u.other]);
        docker(&["network", "rm", &u.net]);
        let (ok, out) = docker(&["network", "create", "--internal", &u.net]);
        assert!(ok, "{out}");
        // `other` also answers to a name under a glob of the config: it resolves to a private
        // address, so the glob must not reach it.
        let rebind = format!("evil.{prefix}.rebind.test");
        for (name, alias) in [(&u.allowed, None), (&u.other, Some(rebind.as_str()))] {
            let mut args = vec!["run", "-d", "--name", name, "--network", &u.net];
            if let Some(a) = alias {
                args.extend(["--network-alias", a]);
            }
            args.extend([UPSTREAM_IMAGE, "httpd", "-f", "-p", "80", "-h", "/www"]);
            let (ok, out) = docker(&args);
            assert!(ok, "{out}");
        }
        Some(u)
    }

    fn ip(&self, container: &str) -> String {
        let (ok, out) = docker(&[
            "inspect",
            "-f",
            "{{range .NetworkSettings.Networks}}{{.IPAddress}} {{end}}",
            container,
        ]);
        assert!(ok, "{out}");
        out.split_whitespace().next().unwrap().to_string()
    }

    fn config(&self, ask: &str) -> String {
        format!(
            "[sandbox]\nnetwork = \"egress\"\n[sandbox.egress]\nallow = [\"{}\", \"*.rebind.test\"]\nask = \"{ask}\"\noutbound_network = \"{}\"\n",
            self.allowed, self.net
        )
    }
}

impl Drop for Upstreams {
    fn drop(&mut self) {
        let _ = docker(&["rm", "-f", &self.allowed, &self.other]);
        let _ = Command::new("sh")
            .arg("-c")
            .arg(format!(
                "docker ps -aq --filter name=moat-{p}- | xargs -r docker rm -f >/dev/null 2>&1; \
                 docker network ls -q --filter name=moat-{p}- | xargs -r docker network rm >/dev/null 2>&1",
                p = self.prefix
            ))
            .status();
        let _ = docker(&["network", "rm", &self.net]);
    }
}

/// Runs `script` in `session`'s sandbox through moat; returns stdout and stderr.
fn sh(home: &TestHome, session: &str, script: &str) -> String {
    let out = home.run(&["exec", "--session", &home.key(session), "--", script]);
    text(&out)
}

fn audit(home: &TestHome) -> Vec<serde_json::Value> {
    let out = home.run(&["approvals", "audit", "--json", "--limit", "500"]);
    assert!(out.status.success(), "{}", text(&out));
    let rows: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).unwrap();
    rows.into_iter()
        .filter(|r| r["kind"] == "egress")
        .map(|r| serde_json::from_str(r["detail"].as_str().unwrap()).unwrap())
        .collect()
}

fn networks(prefix: &str) -> String {
    docker(&[
        "network",
        "ls",
        "--format",
        "{{.Name}}",
        "--filter",
        &format!("name=moat-{prefix}-"),
    ])
    .1
}

#[tokio::test]
async fn allowed_hosts_work_others_are_refused_and_every_connection_is_audited() {
    let Some(up) = Upstreams::start("egress-a").await else {
        return;
    };
    let home = TestHome::configured("egress-a", &up.config("off"));

    // Plain HTTP proxying and a CONNECT tunnel (`-p`) to the allowed host.
    let t = sh(
        &home,
        "s",
        &format!("curl -sS -m 20 http://{}/", up.allowed),
    );
    assert!(t.contains(BODY), "{t}");
    let t = sh(
        &home,
        "s",
        &format!("curl -sS -p -m 20 http://{}/", up.allowed),
    );
    assert!(t.contains(BODY), "through CONNECT: {t}");

    // The other host: a 403 whose body is the one sentence, over both kinds.
    let t = sh(
        &home,
        "s",
        &format!(
            "curl -sS -m 20 -w ' code=%{{http_code}}' http://{}/",
            up.other
        ),
    );
    assert!(
        t.contains(&format!(
            "moat's egress policy does not allow {}:80; an operator can allow it",
            up.other
        )) && t.contains("code=403")
            && !t.contains(BODY),
        "{t}"
    );
    let t = sh(
        &home,
        "s",
        &format!("curl -sS -p -m 20 http://{}/; echo rc=$?", up.other),
    );
    assert!(
        t.contains("403") && !t.contains(BODY) && !t.contains("rc=0"),
        "{t}"
    );

    // A name the glob `*.rebind.test` covers, resolving to a private address: refused.
    let rebind = format!("evil.{}.rebind.test", up.prefix);
    let t = sh(
        &home,
        "s",
        &format!("curl -sS -m 20 -w ' code=%{{http_code}}' http://{rebind}/"),
    );
    assert!(t.contains("code=403") && !t.contains(BODY), "{t}");
    // And an IP literal no exact entry names, although `*.rebind.test` is allowed.
    let ip = up.ip(&up.allowed);
    let t = sh(
        &home,
        "s",
        &format!("curl -sS -m 20 -w ' code=%{{http_code}}' http://{ip}/"),
    );
    assert!(t.contains("code=403") && !t.contains(BODY), "{t}");

    // Around the proxy there is no route: not by name, not by address, not raw TCP.
    let t = sh(
        &home,
        "s",
        &format!(
            "curl -sS -m 5 --noproxy '*' http://{a}/; echo rc=$?; \
             curl -sS -m 5 --noproxy '*' http://{ip}/; echo rc=$?; \
             timeout 5 bash -c 'echo > /dev/tcp/{ip}/80' && echo raw-connected",
            a = up.allowed
        ),
    );
    assert!(
        !t.contains(BODY) && !t.contains("rc=0") && !t.contains("raw-connected"),
        "{t}"
    );

    // A container on the outbound network cannot use the session's proxy: the proxy serves
    // only the session's internal subnet.
    let (_, proxy) = docker(&[
        "ps",
        "-q",
        "--filter",
        "label=dev.moat.egress-for",
        "--filter",
        &format!("name=moat-{}-", up.prefix),
    ]);
    let proxy = proxy.trim();
    assert!(!proxy.is_empty(), "the proxy runs");
    let (_, proxy_ip) = docker(&[
        "inspect",
        "-f",
        &format!(
            "{{{{(index .NetworkSettings.Networks \"{}\").IPAddress}}}}",
            up.net
        ),
        proxy,
    ]);
    assert!(
        proxy_ip.trim().parse::<std::net::IpAddr>().is_ok(),
        "{proxy_ip}"
    );
    // busybox's static wget crashes here, so the request is written by hand; stdin stays
    // open long enough for an answer to come back.
    let stranger = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "(printf 'GET http://{}/ HTTP/1.0\\r\\n\\r\\n'; sleep 2) | docker exec -i {} busybox nc -w 5 {} 3128",
            up.allowed,
            up.other,
            proxy_ip.trim()
        ))
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&stranger.stdout);
    assert!(!out.contains(BODY), "a stranger used the proxy: {out}");

    // Every connection is in the audit log, with its bytes.
    let rows = audit(&home);
    let allowed: Vec<_> = rows
        .iter()
        .filter(|r| r["host"] == up.allowed.as_str() && r["decision"] == "allow")
        .collect();
    assert_eq!(allowed.len(), 2, "{rows:#?}");
    for r in &allowed {
        assert!(r["bytes_down"].as_u64().unwrap() > BODY.len() as u64, "{r}");
        assert!(r["bytes_up"].as_u64().unwrap() > 0, "{r}");
    }
    assert!(
        allowed.iter().any(|r| r["method"] == "CONNECT"),
        "{rows:#?}"
    );
    let refused = |host: &str, decision: &str| {
        rows.iter()
            .filter(|r| r["host"] == host && r["decision"] == decision)
            .count()
    };
    assert_eq!(refused(&up.other, "not-allowed"), 2, "{rows:#?}");
    assert_eq!(refused(&rebind, "internal-address"), 1, "{rows:#?}");
    assert_eq!(refused(&ip, "ip-literal"), 1, "{rows:#?}");

    // The daemon's `/metrics` counted the same connections and bytes (docs/http-api.md,
    // "Metrics").
    let (status, text) = unix_get(&home.path().join("moat.sock"), "/metrics");
    assert_eq!(status, 200, "{text}");
    let value = |series: &str| -> u64 {
        text.lines()
            .find_map(|l| l.strip_prefix(series)?.trim().parse::<u64>().ok())
            .unwrap_or(0)
    };
    let sum = |key: &str| rows.iter().filter_map(|r| r[key].as_u64()).sum::<u64>();
    assert_eq!(
        value("moat_egress_connections_total{decision=\"allow\"}"),
        2,
        "{text}"
    );
    assert_eq!(
        value("moat_egress_connections_total{decision=\"not-allowed\"}"),
        2,
        "{text}"
    );
    assert_eq!(
        value("moat_egress_bytes_total{direction=\"up\"}"),
        sum("bytes_up"),
        "{text}"
    );
    assert_eq!(
        value("moat_egress_bytes_total{direction=\"down\"}"),
        sum("bytes_down"),
        "{text}"
    );
}

#[tokio::test]
async fn a_refused_host_becomes_a_network_approval_an_operator_allows() {
    let Some(up) = Upstreams::start("egress-b").await else {
        return;
    };
    let home = TestHome::configured("egress-b", &up.config("on-miss"));
    let url = format!("http://{}/", up.other);
    let t = sh(&home, "s", &format!("curl -sS -m 20 {url}"));
    assert!(
        t.contains("an operator can allow it by deciding approval"),
        "{t}"
    );

    let out = home.run(&["approvals", "list", "--json"]);
    let list: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let pending: Vec<_> = list
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["host"] == "network")
        .collect();
    assert_eq!(pending.len(), 1, "{list:#}");
    let row = pending[0];
    assert_eq!(row["command"], format!("{}:80", up.other));
    assert_eq!(row["session"], home.key("s"));
    assert_eq!(row["status"], "pending");
    let id = row["slug"].as_str().unwrap().to_string();
    assert!(t.contains(&id), "the 403 names the approval: {t}");

    // Asking again files no second approval.
    sh(&home, "s", &format!("curl -sS -m 20 {url}"));
    let out = home.run(&["approvals", "list", "--json"]);
    let list: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(list.as_array().unwrap().len(), 1, "{list:#}");

    let out = home.run(&["approvals", "approve", &id]);
    assert!(out.status.success(), "{}", text(&out));
    // The grant allows the name; its answer is a private address (another container), which
    // the operator allows on its own.
    let t = sh(&home, "s", &format!("curl -sS -m 20 {url}"));
    assert!(t.contains("private address"), "after allow-once: {t}");
    let out = home.run(&["approvals", "list", "--json"]);
    let list: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let address = list
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["status"] == "pending")
        .expect("an approval of the address");
    assert_eq!(address["command"], format!("{}:80", up.ip(&up.other)));
    let out = home.run(&["approvals", "approve", address["slug"].as_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out));
    let t = sh(&home, "s", &format!("curl -sS -m 20 {url}"));
    assert!(t.contains(BODY), "after allowing the address too: {t}");
    // The grant is for that host and port only.
    let t = sh(
        &home,
        "s",
        &format!("curl -sS -m 20 http://{}:8080/", up.other),
    );
    assert!(!t.contains(BODY), "{t}");

    // The operator's per-session override: a deny there wins over the grant, at once; an
    // allow there lets a host through without asking.
    let out = home.run(&["sessions", "egress", &home.key("s"), "--deny", &up.other]);
    assert!(out.status.success(), "{}", text(&out));
    let t = sh(
        &home,
        "s",
        &format!("curl -sS -m 20 -w ' code=%{{http_code}}' {url}"),
    );
    assert!(t.contains("code=403") && !t.contains(BODY), "{t}");
    let out = home.run(&[
        "sessions",
        "egress",
        &home.key("s"),
        "--clear",
        "--allow",
        &format!("{}:8080", up.other),
    ]);
    assert!(out.status.success(), "{}", text(&out));
    let t = sh(&home, "s", &format!("curl -sS -m 20 {url}"));
    assert!(t.contains(BODY), "the grant holds again after --clear: {t}");
    let bad = home.run(&["sessions", "egress", &home.key("s"), "--allow", "py*.org"]);
    assert!(!bad.status.success(), "{}", text(&bad));
}

#[tokio::test]
async fn sessions_cannot_reach_each_other_and_nothing_outlives_them() {
    let Some(up) = Upstreams::start("egress-c").await else {
        return;
    };
    let home = TestHome::configured("egress-c", &up.config("off"));
    let t = sh(
        &home,
        "b",
        "nohup python3 -m http.server 8000 >/dev/null 2>&1 & sleep 1; echo started",
    );
    assert!(t.contains("started"), "{t}");
    let b = home
        .containers(&home.key("b"))
        .pop()
        .expect("b's container");
    let b_ip = up.ip(&b);
    let t = sh(
        &home,
        "a",
        &format!(
            "curl -sS -m 5 --noproxy '*' http://{b_ip}:8000/; echo rc=$?; \
             curl -sS -m 10 -w ' code=%{{http_code}}' http://{b_ip}:8000/; echo; \
             timeout 5 bash -c 'echo > /dev/tcp/{b_ip}/8000' && echo raw-connected"
        ),
    );
    assert!(
        t.contains("rc=")
            && !t.contains("rc=0")
            && t.contains("code=403")
            && !t.contains("raw-connected"),
        "{t}"
    );

    // A new daemon adopts the running proxy and serves its control socket again.
    home.stop_daemon();
    // The new daemon starts for session b; a's proxy is answered without a command in a
    // (curl through plain `docker exec`, past moat).
    let t = sh(&home, "b", "echo b-again");
    assert!(t.contains("b-again"), "{t}");
    let a = home
        .containers(&home.key("a"))
        .pop()
        .expect("a's container");
    let url = format!("http://{}/", up.allowed);
    let mut last = String::new();
    wait_until(
        "a's proxy answered after a daemon restart",
        Duration::from_secs(20),
        || {
            last = docker(&["exec", &a, "curl", "-sS", "-m", "5", &url]).1;
            last.contains(BODY)
        },
    );
    let t = sh(
        &home,
        "a",
        &format!("curl -sS -m 20 http://{}/", up.allowed),
    );
    assert!(t.contains(BODY), "after a daemon restart: {t}");

    assert!(
        networks("egress-c").lines().count() == 2,
        "{}",
        networks("egress-c")
    );
    for s in ["a", "b"] {
        let out = home.run(&["sessions", "rm", &home.key(s)]);
        assert!(out.status.success(), "{}", text(&out));
    }
    let (_, left) = docker(&[
        "ps",
        "-a",
        "--format",
        "{{.Names}}",
        "--filter",
        "name=moat-egress-c-",
    ]);
    assert!(left.trim().is_empty(), "containers left: {left}");
    assert!(
        networks("egress-c").trim().is_empty(),
        "networks left: {}",
        networks("egress-c")
    );
}

#[tokio::test]
async fn egress_works_with_the_sandbox_under_runsc() {
    let Some(up) = Upstreams::start("egress-d").await else {
        return;
    };
    let (_, runtimes) = docker(&["info", "--format", "{{json .Runtimes}}"]);
    if !runtimes.contains("\"runsc\"") {
        assert!(
            !ci(),
            "the engine offers no runsc under CI=true: run scripts/setup-runsc"
        );
        eprintln!("skipping: no runsc (run scripts/setup-runsc)");
        return;
    }
    let config = up
        .config("off")
        .replace("[sandbox]\n", "[sandbox]\nruntime = \"runsc\"\n");
    let home = TestHome::configured("egress-d", &config);
    let t = sh(
        &home,
        "s",
        &format!(
            "curl -sS -m 20 http://{}/; curl -sS -p -m 20 http://{}/",
            up.allowed, up.allowed
        ),
    );
    assert_eq!(t.matches(BODY).count(), 2, "{t}");
    let t = sh(
        &home,
        "s",
        &format!(
            "curl -sS -m 20 -w ' code=%{{http_code}}' http://{}/",
            up.other
        ),
    );
    assert!(t.contains("code=403") && !t.contains(BODY), "{t}");
    let ip = up.ip(&up.allowed);
    let t = sh(
        &home,
        "s",
        &format!("curl -sS -m 5 --noproxy '*' http://{ip}/; echo rc=$?"),
    );
    assert!(!t.contains(BODY) && !t.contains("rc=0"), "{t}");
    let id = home.containers(&home.key("s")).pop().unwrap();
    let (_, rt) = docker(&["inspect", "-f", "{{.HostConfig.Runtime}}", &id]);
    assert_eq!(rt.trim(), "runsc");
}

#[tokio::test]
async fn a_session_that_fails_to_start_leaves_no_proxy_or_network() {
    let Some(up) = Upstreams::start("egress-e").await else {
        return;
    };
    let config = up
        .config("off")
        .replace("[sandbox]\n", "[sandbox]\nsetup_command = \"exit 3\"\n");
    let home = TestHome::configured("egress-e", &config);
    let t = sh(&home, "s", "echo never");
    assert!(t.contains("setup_command") && !t.contains("never\n"), "{t}");
    let (_, left) = docker(&[
        "ps",
        "-a",
        "--format",
        "{{.Names}}",
        "--filter",
        "name=moat-egress-e-",
    ]);
    assert!(left.trim().is_empty(), "containers left: {left}");
    assert!(
        networks("egress-e").trim().is_empty(),
        "networks left: {}",
        networks("egress-e")
    );
}

/// Listens on every host address at one port, TCP and UDP, IPv4 (`0.0.0.0`) and IPv6 (`::`),
/// and records who reached it.
struct HostListener {
    port: u16,
    hits: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

impl HostListener {
    fn start() -> Self {
        use std::net::{TcpListener, UdpSocket};
        let hits = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        // One port free on every family and protocol.
        let (v4, v6, u4, u6) = loop {
            let v4 = TcpListener::bind("0.0.0.0:0").unwrap();
            let port = v4.local_addr().unwrap().port();
            let v6 = v6_only_listener(port);
            let u4 = UdpSocket::bind(("0.0.0.0", port));
            let u6 = v6_only_udp(port);
            if let (Some(v6), Ok(u4), Some(u6)) = (v6, u4, u6) {
                break (v4, v6, u4, u6);
            }
        };
        let port = v4.local_addr().unwrap().port();
        for l in [v4, v6] {
            let hits = hits.clone();
            std::thread::spawn(move || {
                for mut c in l.incoming().flatten() {
                    use std::io::Write;
                    let peer = c.peer_addr().map(|a| a.to_string()).unwrap_or_default();
                    hits.lock().unwrap().push(format!("tcp from {peer}"));
                    let _ = c.write_all(b"HOSTHIT\n");
                }
            });
        }
        for u in [u4, u6] {
            let hits = hits.clone();
            std::thread::spawn(move || {
                let mut buf = [0u8; 64];
                while let Ok((_, peer)) = u.recv_from(&mut buf) {
                    hits.lock().unwrap().push(format!("udp from {peer}"));
                }
            });
        }
        Self { port, hits }
    }

    fn hits(&self) -> Vec<String> {
        self.hits.lock().unwrap().clone()
    }
}

fn v6_only_listener(port: u16) -> Option<std::net::TcpListener> {
    let s = socket2::Socket::new(socket2::Domain::IPV6, socket2::Type::STREAM, None).ok()?;
    s.set_only_v6(true).ok()?;
    s.set_reuse_address(true).ok()?;
    let addr: std::net::SocketAddr = format!("[::]:{port}").parse().unwrap();
    s.bind(&addr.into()).ok()?;
    s.listen(16).ok()?;
    Some(s.into())
}

fn v6_only_udp(port: u16) -> Option<std::net::UdpSocket> {
    let s = socket2::Socket::new(socket2::Domain::IPV6, socket2::Type::DGRAM, None).ok()?;
    s.set_only_v6(true).ok()?;
    let addr: std::net::SocketAddr = format!("[::]:{port}").parse().unwrap();
    s.bind(&addr.into()).ok()?;
    Some(s.into())
}

/// Every address of every interface of this host but loopback (which inside a container is
/// the container's own), IPv6 link-local ones with a `%` to mark them.
fn host_addresses() -> Vec<String> {
    let mut out = Vec::new();
    for ifa in nix::ifaddrs::getifaddrs().unwrap() {
        let Some(addr) = ifa.address else { continue };
        if let Some(v4) = addr.as_sockaddr_in() {
            let ip = v4.ip();
            if !ip.is_loopback() {
                out.push(ip.to_string());
            }
        } else if let Some(v6) = addr.as_sockaddr_in6() {
            let ip = v6.ip();
            if ip.is_loopback() {
                continue;
            }
            if ip.segments()[0] & 0xffc0 == 0xfe80 {
                out.push(format!("{ip}%"));
            } else {
                out.push(ip.to_string());
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

/// Tries every target at `port`, TCP (a refusal counts: something answered) and UDP (allowed
/// to broadcast), all at once; prints one `reached <target> <how>` line per target that
/// answered. A `%` target is link-local: tried on every interface of the container.
const WALL_PROBE: &str = r#"
import socket, sys, threading
port = int(sys.argv[1])
lock = threading.Lock()
def log(line):
    with lock:
        print(line, flush=True)
def scopes():
    try:
        return [i for i, _ in socket.if_nameindex()]
    except OSError:
        return [0]
def one(target):
    ip = target.rstrip('%')
    v6 = ':' in ip
    fam = socket.AF_INET6 if v6 else socket.AF_INET
    for scope in (scopes() if target.endswith('%') else [0]):
        addr = (ip, port, 0, scope) if v6 else (ip, port)
        try:
            u = socket.socket(fam, socket.SOCK_DGRAM)
            u.setsockopt(socket.SOL_SOCKET, socket.SO_BROADCAST, 1)
            u.sendto(b'moat-wall-probe', addr)
        except OSError:
            pass
        s = socket.socket(fam, socket.SOCK_STREAM)
        s.settimeout(4)
        try:
            s.connect(addr)
            log('reached %s open %r' % (target, s.recv(16)))
        except ConnectionRefusedError:
            log('reached %s refused' % target)
        except OSError:
            pass
threads = [threading.Thread(target=one, args=(t,)) for t in sys.argv[2:]]
for t in threads: t.start()
for t in threads: t.join()
print('probe-done', flush=True)
"#;

fn probe_command(port: u16, targets: &[String]) -> String {
    format!(
        "cat > /tmp/wall_probe.py <<'MOAT_EOF'\n{WALL_PROBE}\nMOAT_EOF\npython3 /tmp/wall_probe.py {port} {}",
        targets.join(" ")
    )
}

/// The directed broadcast address of an IPv4 subnet (`10.1.0.0/16` → `10.1.255.255`).
fn subnet_broadcast(cidr: &str) -> String {
    let (ip, bits) = cidr.split_once('/').unwrap();
    let ip: std::net::Ipv4Addr = ip.parse().unwrap();
    let bits: u32 = bits.parse().unwrap();
    let host = if bits >= 32 { 0 } else { u32::MAX >> bits };
    std::net::Ipv4Addr::from(u32::from(ip) | host).to_string()
}

/// A container's name (the engine's listing gives ids).
fn container_name(id: &str) -> String {
    let (ok, out) = docker(&["inspect", "-f", "{{.Name}}", id]);
    assert!(ok, "{out}");
    out.trim().trim_start_matches('/').to_string()
}

fn network_field(network: &str, template: &str) -> String {
    let (ok, out) = docker(&["network", "inspect", "-f", template, network]);
    assert!(ok, "{out}");
    out.trim().to_string()
}

/// The sandbox of an egress session reaches its proxy and nothing else: no host address (any
/// interface, IPv4 or IPv6, TCP or UDP), not its network's gateway, not the default bridge,
/// not another session — also after a new daemon adopts the session, and when the session's
/// network was made by an older moat without the wall. Control: the same probe from a
/// container on an ordinary internal network reaches the host.
#[tokio::test]
async fn the_sandbox_reaches_its_proxy_and_nothing_else() {
    let Some(up) = Upstreams::start("egress-w").await else {
        return;
    };
    let listener = HostListener::start();
    let mut targets = host_addresses();

    // Control: an ordinary internal network, as the engine makes it.
    let control_net = "moat-egress-w-control";
    docker(&["rm", "-f", "moat-egress-w-probe"]);
    docker(&["network", "rm", control_net]);
    let (ok, out) = docker(&["network", "create", "--internal", control_net]);
    assert!(ok, "{out}");
    let control_gw = network_field(control_net, "{{range .IPAM.Config}}{{.Gateway}}{{end}}");
    let mut control_targets = targets.clone();
    control_targets.push(control_gw.clone());
    let mut args = vec![
        "run".to_string(),
        "--rm".into(),
        "--name".into(),
        "moat-egress-w-probe".into(),
        "--network".into(),
        control_net.into(),
        "--cap-drop".into(),
        "ALL".into(),
    ];
    if let Ok(rt) = std::env::var("MOAT_TEST_RUNTIME") {
        args.extend(["--runtime".into(), rt]);
    }
    args.extend([
        "moat-sandbox:bookworm".to_string(),
        "sh".into(),
        "-c".into(),
        probe_command(listener.port, &control_targets),
    ]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (_, control) = docker(&args);
    docker(&["network", "rm", control_net]);
    assert!(control.contains("probe-done"), "{control}");
    assert!(
        control.contains(&format!("reached {control_gw} open")),
        "control: an ordinary internal network reaches the host at its gateway: {control}"
    );
    wait_until("the control's hits arrive", Duration::from_secs(5), || {
        listener.hits().iter().any(|h| h.starts_with("udp"))
    });
    // Control: a network without a host address, as moat makes it, but without the host's
    // rule: a limited broadcast needs no address and reaches the host's listener.
    let before = listener.hits().len();
    let bare_net = "moat-egress-w-bare";
    docker(&["network", "rm", bare_net]);
    let (ok, out) = docker(&[
        "network",
        "create",
        "--internal",
        "-o",
        "com.docker.network.bridge.inhibit_ipv4=true",
        bare_net,
    ]);
    assert!(ok, "{out}");
    let broadcast = vec!["255.255.255.255".to_string()];
    let mut bare = args.clone();
    let at = bare.iter().position(|a| *a == control_net).unwrap();
    bare[at] = bare_net;
    let probe = probe_command(listener.port, &broadcast);
    *bare.last_mut().unwrap() = &probe;
    let (_, out) = docker(&bare);
    docker(&["network", "rm", bare_net]);
    assert!(out.contains("probe-done"), "{out}");
    wait_until(
        "control: a broadcast reaches the host past a bridge without an address",
        Duration::from_secs(5),
        || listener.hits().len() > before,
    );
    let control_hits = listener.hits().len();
    assert!(control_hits > 0);

    let home = TestHome::configured("egress-w", &up.config("off"));
    // Another session, whose sandbox and proxy the probe tries too.
    assert!(sh(&home, "b", "echo b-up").contains("b-up"));
    let b = home
        .containers(&home.key("b"))
        .pop()
        .expect("b's container");
    let b_ip = up.ip(&b);
    let b_net = format!("{}-net", container_name(&b));
    let b_gw = network_field(&b_net, "{{range .IPAM.Config}}{{.Gateway}}{{end}}");
    assert!(sh(&home, "a", "echo a-up").contains("a-up"));
    let a = home
        .containers(&home.key("a"))
        .pop()
        .expect("a's container");
    let a = container_name(&a);
    let a_net = format!("{a}-net");
    let a_gw = network_field(&a_net, "{{range .IPAM.Config}}{{.Gateway}}{{end}}");
    // The sandbox's resolver forwards what it cannot answer to its network's gateway, which no
    // one holds: whatever the host's resolvers, a name the sandbox looks up itself goes nowhere.
    let (_, dns) = docker(&["inspect", "-f", "{{json .HostConfig.Dns}}", &a]);
    assert_eq!(dns.trim(), format!("[\"{a_gw}\"]"));
    let t = sh(
        &home,
        "a",
        "getent hosts leak.example.org || echo unresolved; getent hosts $(hostname) >/dev/null && echo own-name",
    );
    assert!(t.contains("unresolved"), "{t}");
    let a_broadcast = network_field(&a_net, "{{range .IPAM.Config}}{{.Subnet}}{{end}}");
    targets.extend([
        a_gw.clone(),
        b_gw,
        b_ip.clone(),
        "172.17.0.1".into(),
        "255.255.255.255".into(),
        subnet_broadcast(&a_broadcast),
    ]);
    targets.sort();
    targets.dedup();

    let walled = |when: &str, targets: &[String]| {
        let before = listener.hits();
        let t = sh(&home, "a", &probe_command(listener.port, targets));
        assert!(t.contains("probe-done"), "{when}: {t}");
        assert!(!t.contains("reached"), "{when}: the sandbox reached: {t}");
        // Datagrams have no answer: give them the time the control's took.
        std::thread::sleep(Duration::from_secs(1));
        assert_eq!(
            listener.hits(),
            before,
            "{when}: the host heard the sandbox"
        );
        // Its proxy is still its way out.
        let t = sh(
            &home,
            "a",
            &format!("curl -sS -m 20 http://{}/", up.allowed),
        );
        assert!(t.contains(BODY), "{when}: through the proxy: {t}");
    };
    walled("a new session", &targets);
    // A new daemon adopts the session.
    home.stop_daemon();
    walled("after a daemon restart", &targets);

    // The session's network as an older moat made it (the host has an address on it); the next
    // daemon adopts the session and must wall it again.
    home.stop_daemon();
    let labels = network_field(&a_net, "{{range $k, $v := .Labels}}{{$k}}={{$v}} {{end}}");
    let proxy = format!("{a}-proxy");
    docker(&["network", "disconnect", "-f", &a_net, &a]);
    docker(&["rm", "-f", &proxy]);
    let (ok, out) = docker(&["network", "rm", &a_net]);
    assert!(ok, "{out}");
    let mut create = vec!["network", "create", "--internal"];
    for l in labels.split_whitespace() {
        create.extend(["--label", l]);
    }
    create.push(&a_net);
    let (ok, out) = docker(&create);
    assert!(ok, "{out}");
    let (ok, out) = docker(&["network", "connect", &a_net, &a]);
    assert!(ok, "{out}");
    let old_gw = network_field(&a_net, "{{range .IPAM.Config}}{{.Gateway}}{{end}}");
    // Control: on the old network the sandbox reaches the host (probed past moat).
    let (_, t) = docker(&[
        "exec",
        &a,
        "sh",
        "-c",
        &probe_command(listener.port, std::slice::from_ref(&old_gw)),
    ]);
    assert!(
        t.contains(&format!("reached {old_gw} open")),
        "control: the old network is open: {t}"
    );
    wait_until(
        "the old network's datagram arrives",
        Duration::from_secs(5),
        || listener.hits().len() >= control_hits + 2,
    );
    targets.push(old_gw);
    walled("after adopting a network made without the wall", &targets);
    let inhibit = network_field(
        &a_net,
        "{{index .Options \"com.docker.network.bridge.inhibit_ipv4\"}}",
    );
    assert_eq!(inhibit, "true");
}

/// A DNS server of the test's own: answers every `A` question with `ANSWER` (the allowed
/// upstream) and prints each name it is asked, so the test sees every lookup.
const DNS_SERVER: &str = r#"
import os, socket, struct
answer = socket.inet_aton(os.environ['ANSWER'])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(('0.0.0.0', 53))
while True:
    q, peer = s.recvfrom(512)
    i, labels = 12, []
    while i < len(q) and q[i]:
        labels.append(q[i + 1:i + 1 + q[i]].decode('ascii', 'replace'))
        i += 1 + q[i]
    qtype = struct.unpack('>H', q[i + 1:i + 3])[0]
    print('asked %s %d' % ('.'.join(labels).lower(), qtype), flush=True)
    question = q[12:i + 5]
    if qtype == 1:
        head = q[:2] + b'\x81\x80' + b'\x00\x01\x00\x01\x00\x00\x00\x00'
        rr = b'\xc0\x0c' + struct.pack('>HHIH', 1, 1, 5, 4) + answer
        s.sendto(head + question + rr, peer)
    else:
        s.sendto(q[:2] + b'\x81\x80' + b'\x00\x01\x00\x00\x00\x00\x00\x00' + question, peer)
"#;

/// A name the policy refuses, or asks an operator about, is never looked up; an allowed one
/// is, and an operator's grant of a name reaches its private answer only once the operator
/// allowed that address too, shown what the name resolved to.
#[tokio::test]
async fn names_are_decided_before_any_lookup() {
    let Some(up) = Upstreams::start("egress-n").await else {
        return;
    };
    let dns = "moat-egress-n-dns";
    docker(&["rm", "-f", dns]);
    let upstream_ip = up.ip(&up.allowed);
    let (ok, out) = docker(&[
        "run",
        "-d",
        "--name",
        dns,
        "--network",
        &up.net,
        "-e",
        &format!("ANSWER={upstream_ip}"),
        "moat-sandbox:bookworm",
        "python3",
        "-c",
        DNS_SERVER,
    ]);
    assert!(ok, "{out}");
    struct Gone(&'static str);
    impl Drop for Gone {
        fn drop(&mut self) {
            docker(&["rm", "-f", self.0]);
        }
    }
    let _gone = Gone(dns);
    let dns_ip = up.ip(dns);
    let asked = || docker(&["logs", dns]).1;
    let config = format!(
        "[sandbox]\nnetwork = \"egress\"\n[sandbox.egress]\nallow = [\"ok.dns.test\"]\ndeny = [\"denied.dns.test\", \"*.blocked.dns.test\"]\nask = \"on-miss\"\noutbound_network = \"{}\"\ndns = [\"{dns_ip}\"]\n",
        up.net
    );
    let home = TestHome::configured("egress-n", &config);

    // Control: an allowed name is looked up through this server and reached.
    let t = sh(&home, "s", "curl -sS -m 20 http://ok.dns.test/");
    assert!(t.contains(BODY), "{t}");
    assert!(asked().contains("asked ok.dns.test 1"), "{}", asked());

    // Refused and asked-about names: the 403 sentence at once, and no lookup at all.
    let t = sh(
        &home,
        "s",
        "for h in denied.dns.test c2VjcmV0.blocked.dns.test c2VjcmV0.leak.dns.test; do \
         curl -sS -m 20 -w \" code=%{http_code}\\n\" http://$h/; done",
    );
    assert_eq!(t.matches("code=403").count(), 3, "{t}");
    assert!(
        t.contains("deciding approval"),
        "the miss is asked about: {t}"
    );
    let log = asked();
    for name in ["denied", "blocked", "leak", "c2vjcmv0"] {
        assert!(!log.contains(name), "{name} was looked up: {log}");
    }
    let rows = audit(&home);
    for (host, tag) in [
        ("denied.dns.test", "denied"),
        ("c2vjcmv0.leak.dns.test", "ask"),
    ] {
        assert!(
            rows.iter()
                .any(|r| r["host"] == host && r["decision"] == tag),
            "{host} {tag}: {rows:?}"
        );
    }

    // The operator allows the asked-about name. It is looked up now; its answer is private
    // (the upstream's address), which the grant does not reach: a second approval asks
    // about that address and shows what the name resolved to.
    let pending = |home: &TestHome| -> Vec<serde_json::Value> {
        let out = home.run(&["approvals", "list", "--json"]);
        let list: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        list.as_array()
            .unwrap()
            .iter()
            .filter(|r| r["host"] == "network" && r["status"] == "pending")
            .cloned()
            .collect()
    };
    let first = pending(&home);
    assert_eq!(first.len(), 1, "{first:?}");
    assert_eq!(first[0]["command"], "c2vjcmv0.leak.dns.test:80");
    let out = home.run(&["approvals", "approve", first[0]["slug"].as_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out));
    let t = sh(
        &home,
        "s",
        "curl -sS -m 20 -w ' code=%{http_code}' http://c2VjcmV0.leak.dns.test/",
    );
    assert!(
        t.contains("code=403") && t.contains("private address"),
        "{t}"
    );
    assert!(
        asked().contains("asked c2vjcmv0.leak.dns.test 1"),
        "{}",
        asked()
    );
    let second = pending(&home);
    assert_eq!(second.len(), 1, "{second:?}");
    assert_eq!(second[0]["command"], format!("{upstream_ip}:80"));
    let slug = second[0]["slug"].as_str().unwrap();
    let shown = text(&home.run(&["approvals", "show", slug]));
    assert!(
        shown.contains(&format!("resolved to {upstream_ip}")),
        "the approval shows the answers: {shown}"
    );
    assert!(
        second[0]["reason"]
            .as_str()
            .is_some_and(|r| r.contains(&format!("resolved to {upstream_ip}"))),
        "{second:?}"
    );
    let out = home.run(&["approvals", "approve", second[0]["slug"].as_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out));
    let t = sh(&home, "s", "curl -sS -m 20 http://c2VjcmV0.leak.dns.test/");
    assert!(t.contains(BODY), "both allowed: {t}");
}

/// A name under an allowed glob that the agent points at one of the host's own addresses does
/// not lead the proxy into the host, even when that address is in a public range: the host's
/// addresses are never "public". Control: an exact config entry for a name with that answer
/// (the operator's choice) reaches the host's listener, so the path is real.
#[tokio::test]
async fn the_hosts_own_addresses_are_not_public() {
    if common::engine().await.is_none() {
        return;
    }
    let listener = HostListener::start();
    let port = listener.port;
    // A network the host holds an address of in a public range (nothing runs on it).
    let public_net = "moat-egress-h-pub";
    let dns = "moat-egress-h-dns";
    docker(&["rm", "-f", dns]);
    docker(&["network", "rm", public_net]);
    let (ok, out) = docker(&[
        "network",
        "create",
        "--subnet",
        "100.128.77.0/24",
        "--gateway",
        "100.128.77.1",
        public_net,
    ]);
    assert!(ok, "{out}");
    struct Gone;
    impl Drop for Gone {
        fn drop(&mut self) {
            docker(&["rm", "-f", "moat-egress-h-dns"]);
            docker(&["network", "rm", "moat-egress-h-pub"]);
        }
    }
    let _gone = Gone;
    let host_pub = network_field(public_net, "{{range .IPAM.Config}}{{.Gateway}}{{end}}");
    let (ok, out) = docker(&[
        "run",
        "-d",
        "--name",
        dns,
        "--network",
        "bridge",
        "-e",
        &format!("ANSWER={host_pub}"),
        "moat-sandbox:bookworm",
        "python3",
        "-c",
        DNS_SERVER,
    ]);
    assert!(ok, "{out}");
    let (ok, dns_ip) = docker(&["inspect", "-f", "{{.NetworkSettings.IPAddress}}", dns]);
    assert!(ok, "{dns_ip}");
    let config = format!(
        "[sandbox]\nnetwork = \"egress\"\n[sandbox.egress]\nallow = [\"*.glob.test:*\", \"exact.test:{port}\"]\noutbound_network = \"bridge\"\ndns = [\"{}\"]\n",
        dns_ip.trim()
    );
    let home = TestHome::configured("egress-h", &config);
    // The DNS server may still be starting: a name it has not answered yet is "could not
    // resolve", not a decision.
    let mut t = String::new();
    wait_until("the DNS server answers", Duration::from_secs(30), || {
        t = sh(
            &home,
            "s",
            &format!("curl -sS -m 10 -w ' code=%{{http_code}}' http://anything.glob.test:{port}/"),
        );
        !t.contains("could not resolve")
    });
    assert!(
        t.contains("code=403") && t.contains("private address"),
        "{t}"
    );
    assert!(listener.hits().is_empty(), "{:?}", listener.hits());
    // Control: the operator named this host exactly; the proxy reaches the listener.
    let t = sh(
        &home,
        "s",
        &format!("curl -sS -m 10 -w ' code=%{{http_code}}' http://exact.test:{port}/"),
    );
    wait_until(
        "control: the host's listener is reached",
        Duration::from_secs(5),
        || !listener.hits().is_empty(),
    );
    assert!(!t.contains("code=403"), "{t}");
}
