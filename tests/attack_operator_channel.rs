//! The self-approval chain (issue 9, item 3), written as the attack against a real `moat
//! serve`: an agent has a host request pending, then uses an allowlisted host command to act
//! as the operator: `curl` on moat's unix socket, and the `moat` CLI deciding straight on the
//! state database, with and without a cleared environment. Each attempt must be refused with
//! the reason, audited, and leave the approval pending and the allowlist and skills unchanged.
//! With `elevated.user`, the host command runs as that uid and cannot even open the socket.
//! Over TCP the same holds at every address of this machine (issue 23): loopback, the host's
//! main address, Docker's bridge gateway, IPv6, each reached through a dual-stack listener
//! (so IPv4 clients arrive in the IPv4-mapped form). No engine image is needed: everything
//! here runs on the host.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

const OPERATOR: &str = "operator-token-attack-0123456789";
const AGENT: &str = "agent-token-attack-abcdefghij";
const SESSION: &str = "opchan";
/// An unused uid (and gid) for `elevated.user`: no account is needed to run as it.
const NOBODY_UID: u32 = 64123;

struct Server {
    child: Child,
    /// A loopback address of the TCP listener, for the test's own calls.
    addr: String,
    /// The listener's port, whatever address it is reached at.
    port: u16,
    home: PathBuf,
    _dir: tempfile::TempDir,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn moat_exe() -> &'static str {
    env!("CARGO_BIN_EXE_moat")
}

/// `moat serve` over a fresh home, TCP on loopback; `elevated_extra` goes into `[elevated]`.
/// The operator token comes from moat's environment, so a leak of that environment into host
/// commands would show.
fn serve(elevated_extra: &str) -> Server {
    serve_on("127.0.0.1:0", elevated_extra)
}

/// [`serve`] with TCP on `bind` (`[::]:0` answers every address of this machine).
fn serve_on(bind: &str, elevated_extra: &str) -> Server {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    std::fs::create_dir(&home).unwrap();
    std::fs::set_permissions(&home, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    let moat_dir = Path::new(moat_exe())
        .parent()
        .unwrap()
        .display()
        .to_string();
    std::fs::write(
        home.join("moat.toml"),
        format!(
            r#"
[[serve.agents]]
token = "{AGENT}"
session = "{SESSION}"
agent = "a1"
provider = "slack"
sender = "U1"

[elevated]
enabled = true
allow_from = {{ slack = ["U1"] }}
{elevated_extra}

[policy.host]
security = "allowlist"
ask = "on-miss"
allowlist = ["/usr/bin/curl", "/usr/bin/sh", "/bin/sh"]
strict_inline_eval = false
trusted_dirs = ["{moat_dir}", "/usr/sbin", "/usr/bin", "/sbin", "/bin"]

# On the host an allowlisted program runs unasked only with an argv its profile lists
# (docs/policy.md, "Argv profiles"): the attacks' own.
[policy.host.argv_profiles.curl]
allowed_flags = ["-s", "-g"]
value_flags = ["-H", "-X", "-d", "--unix-socket"]
max_positional = 1

[policy.host.argv_profiles.sh]
value_flags = ["-c"]

[skills.json]
bins = ["jq"]
"#
        ),
    )
    .unwrap();
    let mut child = Command::new(moat_exe())
        .args(["serve", "--tcp", bind])
        .env("MOAT_HOME", &home)
        .env("MOAT_SERVE_OPERATOR_TOKEN", OPERATOR)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The ready line names the listeners; warnings about the configuration may come first.
    let mut line = String::new();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    while stderr.read_line(&mut line).unwrap() > 0 && !line.contains(" tcp:") {
        eprint!("moat serve: {line}");
        line.clear();
    }
    // Keep draining: the daemon logs each refusal, and a closed pipe must not fail it.
    std::thread::spawn(move || {
        let mut rest = String::new();
        while stderr.read_line(&mut rest).is_ok_and(|n| n > 0) {
            eprint!("moat serve: {rest}");
            rest.clear();
        }
    });
    let bound: SocketAddr = line
        .rsplit("tcp:")
        .next()
        .unwrap()
        .trim()
        .parse()
        .unwrap_or_else(|e| panic!("moat serve did not start ({e}): {line}"));
    Server {
        child,
        addr: format!("127.0.0.1:{}", bound.port()),
        port: bound.port(),
        home,
        _dir: dir,
    }
}

/// One HTTP/1.1 request over TCP; returns (status, JSON body).
fn http(addr: &str, method: &str, path: &str, token: &str, body: &str) -> (u16, serde_json::Value) {
    let mut s = TcpStream::connect(addr).unwrap();
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes()).unwrap();
    s.write_all(body.as_bytes()).unwrap();
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    let status = out
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = out.split_once("\r\n\r\n").map(|(_, b)| b).unwrap_or("");
    let (start, end) = (
        body.find('{').unwrap_or(0),
        body.rfind('}').map_or(body.len(), |e| e + 1),
    );
    (
        status,
        serde_json::from_str(&body[start..end]).unwrap_or_default(),
    )
}

/// The agent's elevated request, through its own token; returns the tool result.
fn agent_exec(s: &Server, command: &str) -> serde_json::Value {
    agent_exec_in(s, command, false)
}

/// The same, optionally with a terminal (`pty`): the command then runs as the session leader's
/// own child on the terminal, and the wrapper is replaced by the login shell.
fn agent_exec_in(s: &Server, command: &str, pty: bool) -> serde_json::Value {
    let body =
        serde_json::json!({"command": command, "elevated": true, "yieldMs": 60000, "pty": pty});
    let (status, v) = http(
        &s.addr,
        "POST",
        &format!("/v1/sessions/{SESSION}/exec"),
        AGENT,
        &body.to_string(),
    );
    assert_eq!(status, 200, "{v}");
    v
}

fn text(v: &serde_json::Value) -> String {
    v["content"][0]["text"].as_str().unwrap_or("").to_string()
}

/// The moat CLI as the operator (this test process is no host command).
fn cli(home: &Path, args: &[&str]) -> std::process::Output {
    Command::new(moat_exe())
        .args(args)
        .env("MOAT_HOME", home)
        .env_remove("MOAT_SHELL")
        .output()
        .unwrap()
}

fn sh_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

#[test]
fn a_host_command_cannot_act_as_the_operator() {
    let s = serve("");
    let sock = s.home.join("moat.sock").display().to_string();
    let home = s.home.display().to_string();

    // The agent's request that needs an approval: `id` is not allowlisted on the host.
    let pending = agent_exec(&s, "id");
    assert_eq!(
        pending["details"]["status"], "approval-pending",
        "{pending}"
    );
    let id = pending["details"]["approvalId"]
        .as_str()
        .unwrap()
        .to_string();
    let slug = id[..8].to_string();

    // The host environment carries neither moat's home nor the operator token.
    let env = text(&agent_exec(&s, "sh -c env"));
    assert!(env.contains("MOAT_HOST_COMMAND="), "{env}");
    assert!(!env.contains("MOAT_HOME"), "{env}");
    assert!(!env.contains(OPERATOR), "{env}");

    let decide = format!(
        "curl -s --unix-socket {sock} -X POST http://moat/v1/approvals/{id}/decision -d '{{\"decision\":\"allow-always\"}}'"
    );
    let moat = moat_exe();
    let attacks: Vec<(&str, String)> = vec![
        ("socket, curl", decide.clone()),
        (
            "socket, cleared env and a new session",
            format!("sh -c {}", sh_quote(&format!("env -i setsid -w {decide}"))),
        ),
        (
            // As if it had read the token (from moat.toml, or moat's own environment).
            "tcp, with the operator token",
            format!(
                "curl -s -H 'Authorization: Bearer {OPERATOR}' -X POST http://{}/v1/approvals/{id}/decision -d '{{\"decision\":\"allow-always\"}}'",
                s.addr
            ),
        ),
        (
            "socket, in a terminal, cleared env",
            format!("sh -c {}", sh_quote(&format!("exec env -i {decide}"))),
        ),
        (
            "cli approve",
            format!(
                "sh -c {}",
                sh_quote(&format!(
                    "MOAT_HOME={home} {moat} approvals approve --always {slug}"
                ))
            ),
        ),
        (
            "cli approve, cleared env",
            format!(
                "sh -c {}",
                sh_quote(&format!(
                    "env -i MOAT_HOME={home} {moat} approvals approve {slug}"
                ))
            ),
        ),
        (
            "cli allowlist add, cleared env",
            format!(
                "sh -c {}",
                sh_quote(&format!(
                    "env -i MOAT_HOME={home} {moat} allowlist add --host host /usr/bin/id"
                ))
            ),
        ),
        (
            "cli skills enable, cleared env",
            format!(
                "sh -c {}",
                sh_quote(&format!(
                    "env -i MOAT_HOME={home} {moat} skills enable json"
                ))
            ),
        ),
        (
            "cli sessions set, cleared env",
            format!(
                "sh -c {}",
                sh_quote(&format!(
                    "env -i MOAT_HOME={home} {moat} sessions set {SESSION} --security full --loosen"
                ))
            ),
        ),
        (
            "cli sessions egress, cleared env",
            format!(
                "sh -c {}",
                sh_quote(&format!(
                    "env -i MOAT_HOME={home} {moat} sessions egress {SESSION} --allow example.com"
                ))
            ),
        ),
    ];
    for (name, command) in &attacks {
        let r = agent_exec_in(&s, command, name.contains("terminal"));
        let out = text(&r);
        // It ran (the allowlist let it), and what it tried was refused, saying why.
        assert_ne!(
            r["details"]["status"], "approval-pending",
            "{name}: the attack itself must run: {r}"
        );
        assert!(
            out.contains("runs inside host command"),
            "{name}: no reason given: {out}"
        );
        assert!(out.contains("never act as the operator"), "{name}: {out}");
        if name.starts_with("socket") || name.starts_with("tcp") {
            assert!(out.contains("refused POST /v1/approvals/"), "{name}: {out}");
        } else {
            assert!(
                out.contains("failed to act as the operator"),
                "{name}: {out}"
            );
        }
    }

    // The goal was not reached: still pending, nothing allowlisted, no skill switched on.
    let (status, row) = http(&s.addr, "GET", &format!("/v1/approvals/{id}"), OPERATOR, "");
    assert_eq!(status, 200, "{row}");
    assert_eq!(row["status"], "pending", "{row}");
    let list = cli(&s.home, &["allowlist", "list", "--json"]);
    assert_eq!(String::from_utf8_lossy(&list.stdout).trim(), "[]");
    let skills = cli(&s.home, &["skills", "list", "--json"]);
    let skills: serde_json::Value = serde_json::from_slice(&skills.stdout).unwrap();
    assert_eq!(skills[0]["enabled"], false, "{skills}");
    let shown = cli(&s.home, &["sessions", "show", SESSION, "--json"]);
    let shown: serde_json::Value = serde_json::from_slice(&shown.stdout).unwrap();
    assert_eq!(
        shown["override"]["security"],
        serde_json::Value::Null,
        "{shown}"
    );

    // Every attempt is in the audit log: who, what, which host process.
    let audit = cli(&s.home, &["approvals", "audit", "--json", "--limit", "200"]);
    let audit: serde_json::Value = serde_json::from_slice(&audit.stdout).unwrap();
    let refused: Vec<&serde_json::Value> = audit
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "operator-refused")
        .collect();
    assert_eq!(refused.len(), attacks.len(), "{audit:#}");
    let on_socket: Vec<_> = refused
        .iter()
        .filter(|e| e["actor"].as_str().unwrap().starts_with("unix socket"))
        .collect();
    assert_eq!(on_socket.len(), 3, "{refused:#?}");
    for e in &on_socket {
        assert_eq!(e["approvalId"], id.as_str(), "{e}");
        assert_eq!(e["session"], SESSION, "{e}");
        let d = e["detail"].as_str().unwrap();
        assert!(
            d.starts_with(&format!("POST /v1/approvals/{id}/decision host-process=")),
            "{d}"
        );
    }
    let on_tcp: Vec<_> = refused
        .iter()
        .filter(|e| e["actor"].as_str().unwrap().starts_with("tcp 127.0.0.1:"))
        .collect();
    assert_eq!(on_tcp.len(), 1, "{refused:#?}");
    assert_eq!(on_tcp[0]["approvalId"], id.as_str());
    let by_cli: Vec<_> = refused
        .iter()
        .filter(|e| e["actor"].as_str().unwrap().starts_with("cli:pid"))
        .collect();
    assert_eq!(by_cli.len(), 6, "{refused:#?}");
    let approves = by_cli
        .iter()
        .filter(|e| {
            e["approvalId"] == id.as_str()
                && e["detail"]
                    .as_str()
                    .unwrap()
                    .starts_with("moat approvals approve ")
        })
        .count();
    assert_eq!(approves, 2, "{by_cli:#?}");
    assert!(by_cli.iter().any(|e| e["detail"]
        .as_str()
        .unwrap()
        .contains("allowlist add --host host /usr/bin/id")));

    // The operator's own socket still decides (the guard refuses host commands only).
    let ok = Command::new("curl")
        .args(["-s", "--unix-socket", &sock, "-X", "POST"])
        .arg(format!("http://moat/v1/approvals/{id}/decision"))
        .args(["-d", r#"{"decision":"deny"}"#])
        .output()
        .unwrap();
    let ok = String::from_utf8_lossy(&ok.stdout);
    assert!(ok.contains("denied"), "{ok}");
}

/// Root is needed to switch users. Without it the test says so, and fails under CI=true.
fn root_or_skip() -> bool {
    if nix::unistd::geteuid().is_root() {
        return true;
    }
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("elevated.user needs root, and CI=true forbids skipping");
    }
    eprintln!("skipping: elevated.user needs root");
    false
}

#[test]
fn with_elevated_user_a_host_command_cannot_reach_the_socket() {
    if !root_or_skip() {
        return;
    }
    // `full`: the probe's `$(…)` and `$?` would otherwise ask every time (an unresolved
    // expansion may name a sandbox-writable directory); this test is about the user switch.
    let s = serve(&format!(
        "user = \"{NOBODY_UID}:{NOBODY_UID}\"\ndefault_level = \"full\""
    ));
    let sock = s.home.join("moat.sock").display().to_string();
    let home = s.home.display().to_string();
    let probe = format!(
        "sh -c {}",
        sh_quote(&format!(
            "echo uid=$(id -u) gid=$(id -g) groups=$(id -G); \
             curl -s --unix-socket {sock} http://moat/v1/health; echo curl=$?; \
             curl -s --unix-socket ../../moat.sock http://moat/v1/health; echo relative=$?; \
             cat {home}/moat.toml >/dev/null 2>&1; echo cat=$?; \
             ls {home} >/dev/null 2>&1; echo ls=$?"
        ))
    );
    let r = agent_exec(&s, &probe);
    let out = text(&r);
    assert!(
        out.contains(&format!(
            "uid={NOBODY_UID} gid={NOBODY_UID} groups={NOBODY_UID}"
        )),
        "{out}"
    );
    // curl exits 7: it could not connect (the home is 0700, the socket 0600).
    assert!(out.contains("curl=7"), "{out}");
    // Nor from the working directory, which lies inside the home: `..` leads back, but no
    // name inside the 0700 home resolves for another user.
    assert!(out.contains("relative=7"), "{out}");
    assert!(!out.contains("\"status\""), "{out}");
    assert!(out.contains("cat=1") && out.contains("ls=2"), "{out}");
}

/// The addresses of this machine to attack from, read from the kernel: loopback (IPv4 and
/// IPv6), every address of the interface the default route leaves by (the host's main
/// address), the gateway of Docker's default bridge, and every other non-link-local IPv6
/// address. Bridges of other Docker networks are left out: other tests make and remove them
/// while this one runs. IPv6 link-local addresses are left out too: they need an interface
/// scope in a URL.
fn addresses_to_test() -> Vec<IpAddr> {
    let mut out: Vec<IpAddr> = vec!["127.0.0.1".parse().unwrap(), "::1".parse().unwrap()];
    let main = main_interface();
    for ifa in nix::ifaddrs::getifaddrs().unwrap() {
        let Some(a) = ifa.address else { continue };
        let mine = main.as_deref() == Some(ifa.interface_name.as_str());
        let ip = match (a.as_sockaddr_in(), a.as_sockaddr_in6()) {
            (Some(v4), _) if mine => IpAddr::V4(v4.ip()),
            (_, Some(v6))
                if (v6.ip().segments()[0] & 0xffc0) != 0xfe80
                    && (mine || !ifa.interface_name.starts_with("br-")) =>
            {
                IpAddr::V6(v6.ip())
            }
            _ => continue,
        };
        if !out.contains(&ip) {
            out.push(ip);
        }
    }
    if let Some(gw) = docker_gateway() {
        if !out.contains(&gw) {
            out.push(gw);
        }
    }
    out
}

/// The interface the default route leaves by (`/proc/net/route`).
fn main_interface() -> Option<String> {
    let routes = std::fs::read_to_string("/proc/net/route").ok()?;
    routes.lines().skip(1).find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        (f.get(1) == Some(&"00000000")).then(|| f[0].to_string())
    })
}

/// The host's main address: the IPv4 address of [`main_interface`].
fn main_address() -> Option<IpAddr> {
    let iface = main_interface()?;
    nix::ifaddrs::getifaddrs()
        .ok()?
        .filter(|i| i.interface_name == iface)
        .find_map(|i| i.address?.as_sockaddr_in().map(|v4| IpAddr::V4(v4.ip())))
}

/// The gateway address of Docker's default bridge (its interface's address on this machine),
/// when there is an engine.
fn docker_gateway() -> Option<IpAddr> {
    let out = Command::new("docker")
        .args([
            "network",
            "inspect",
            "bridge",
            "--format",
            r#"{{index .Options "com.docker.network.bridge.name"}}"#,
        ])
        .output()
        .ok()?;
    let name = String::from_utf8_lossy(&out.stdout).trim().to_string();
    if !out.status.success() || name.is_empty() {
        return None;
    }
    nix::ifaddrs::getifaddrs()
        .ok()?
        .filter(|i| i.interface_name == name)
        .find_map(|i| i.address?.as_sockaddr_in().map(|v4| IpAddr::V4(v4.ip())))
}

/// A host command holding the operator token calls the decision route at every address of
/// this machine, through a listener on all of them; each call is refused, audited, and the
/// approval stays pending. The same call from this test process (no host command) decides
/// it, so the refusals are the check's doing, not an address that does not answer.
#[test]
fn a_host_command_cannot_act_as_the_operator_at_any_local_address() {
    let s = serve_on("[::]:0", "");
    let addrs = addresses_to_test();
    if let Some(main) = main_address() {
        assert!(addrs.contains(&main), "{main} not among {addrs:?}");
    }
    match docker_gateway() {
        Some(gw) => assert!(addrs.contains(&gw), "{gw} not among {addrs:?}"),
        None if std::env::var("CI").is_ok_and(|v| v == "true") => {
            panic!("no Docker bridge gateway to test under CI=true")
        }
        None => eprintln!("no Docker bridge: its gateway address is not tested"),
    }
    assert!(addrs.len() >= 3, "only loopback to test: {addrs:?}");
    eprintln!("testing from {addrs:?}");

    let mut attacked: Vec<(IpAddr, String)> = Vec::new();
    for ip in &addrs {
        let at = SocketAddr::new(*ip, s.port);
        let pending = agent_exec(&s, "id");
        assert_eq!(
            pending["details"]["status"], "approval-pending",
            "{pending}"
        );
        let id = pending["details"]["approvalId"]
            .as_str()
            .unwrap()
            .to_string();
        let path = format!("/v1/approvals/{id}/decision");
        let body = r#"{"decision":"allow-always"}"#;
        attacked.push((*ip, id.clone()));

        // The attack: a real elevated exec (curl is allowlisted) with the operator token.
        let attack = format!(
            "curl -s -g -H 'Authorization: Bearer {OPERATOR}' -X POST 'http://{at}{path}' -d '{body}'"
        );
        let r = agent_exec(&s, &attack);
        let out = text(&r);
        assert_ne!(
            r["details"]["status"], "approval-pending",
            "{at}: the attack itself must run: {r}"
        );
        assert!(
            out.contains(&format!("refused POST {path} on moat's TCP port")),
            "{at}: {out}"
        );
        assert!(out.contains("runs inside host command"), "{at}: {out}");
        assert!(out.contains("never act as the operator"), "{at}: {out}");
        let (status, row) = http(&s.addr, "GET", &format!("/v1/approvals/{id}"), OPERATOR, "");
        assert_eq!(status, 200, "{row}");
        assert_eq!(row["status"], "pending", "{at}: {row}");

        // The control: the same call at the same address from this test process decides.
        let (status, row) = http(&at.to_string(), "POST", &path, OPERATOR, body);
        assert_eq!(status, 200, "{at}: the control call failed: {row}");
        assert_eq!(row["decision"], "allow-always", "{at}: {row}");
        assert_eq!(row["decidedBy"], "http:operator", "{at}: {row}");
        // What allow-always stored goes again, so the next address has a request to attack.
        let list = cli(&s.home, &["allowlist", "list", "--json"]);
        let list: serde_json::Value = serde_json::from_slice(&list.stdout).unwrap();
        let entries = list.as_array().unwrap();
        assert!(!entries.is_empty(), "{at}: allow-always stored nothing");
        for e in entries {
            let rm = cli(&s.home, &["allowlist", "rm", &e["id"].to_string()]);
            assert!(rm.status.success(), "{rm:?}");
        }
    }

    // One audited refusal per address, each naming the approval and the client's address as
    // moat saw it (an IPv4 client of a dual-stack listener in its mapped form; a host process
    // that connects to a bridge gateway address arrives from another of this machine's
    // addresses, rewritten by Docker's MASQUERADE rule).
    let audit = cli(&s.home, &["approvals", "audit", "--json", "--limit", "500"]);
    let audit: serde_json::Value = serde_json::from_slice(&audit.stdout).unwrap();
    let refused: Vec<&serde_json::Value> = audit
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "operator-refused")
        .collect();
    assert_eq!(refused.len(), addrs.len(), "{refused:#?}");
    for (ip, id) in &attacked {
        let e = refused
            .iter()
            .find(|e| e["approvalId"] == id.as_str())
            .unwrap_or_else(|| panic!("no refusal audited for {ip}: {refused:#?}"));
        let actor = e["actor"].as_str().unwrap();
        assert!(actor.starts_with("tcp ["), "{ip}: {e}");
        if let IpAddr::V6(v6) = ip {
            assert!(actor.starts_with(&format!("tcp [{v6}]:")), "{ip}: {e}");
        }
        let d = e["detail"].as_str().unwrap();
        assert!(d.contains("host-process="), "{ip}: {e}");
    }
}
