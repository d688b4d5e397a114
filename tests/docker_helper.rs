//! The helper transport against the real engine (docs/helper.md): commands go through it, and
//! the attacks a sandboxed command can make on it (kill it mid-command, talk garbage to its
//! socket, put its own listener in its place) cost no output, no exit status and no caller.

mod common;

use std::time::Duration;

use moat::config::Config;
use moat::config::Transport;
use moat::contract::Status;
use moat::tools::ProcessRequest;

fn helper_config() -> Config {
    let mut config = Config::default();
    config.sandbox.transport = Transport::Helper;
    config
}

fn run_dir(m: &common::TestMoat, session: &str) -> std::path::PathBuf {
    let name = m.container(session);
    m.app.home.run_dir(name.strip_prefix("moat-").unwrap())
}

/// The pid moat recorded for the helper: under runc the helper's host pid; under gVisor the
/// container's `runsc-gofer`, which makes the socket the helper binds (docs/helper.md, "Trust").
fn helper_pid(m: &common::TestMoat, session: &str) -> u32 {
    // `PID START`: the listener's pid and when it started (docs/helper.md, "Trust").
    std::fs::read_to_string(run_dir(m, session).join("helper.pid"))
        .expect("moat records the helper it started")
        .split_whitespace()
        .next()
        .expect("a pid")
        .parse()
        .unwrap()
}

/// Whether this run puts sessions under gVisor (`MOAT_TEST_RUNTIME=runsc`, the runsc pass of
/// .ci/run), where no sandbox process is a host process.
fn under_gvisor() -> bool {
    std::env::var("MOAT_TEST_RUNTIME").as_deref() == Ok("runsc")
}

/// The running helper as these tests tell one helper from the next: under runc its host pid,
/// which must be the one moat recorded; under gVisor its pid inside the container (moat's
/// record names the gofer, the same for every helper of the container).
fn helper(m: &common::TestMoat, session: &str) -> u32 {
    let recorded = helper_pid(m, session);
    if !under_gvisor() {
        return recorded;
    }
    let gofer = std::fs::read(format!("/proc/{recorded}/cmdline")).unwrap_or_default();
    assert!(
        String::from_utf8_lossy(&gofer).contains("gofer"),
        "under gVisor moat records the container's gofer, not pid {recorded}: {:?}",
        String::from_utf8_lossy(&gofer)
    );
    // The helper may still be starting: the first commands go through the engine meanwhile.
    for _ in 0..200 {
        let pids = m.docker_exec(session, HELPER_PIDS);
        let pids: Vec<&str> = pids.split_whitespace().collect();
        match pids[..] {
            [] => std::thread::sleep(Duration::from_millis(50)),
            [pid] => return pid.parse().unwrap(),
            _ => panic!("more than one helper runs in the container: {pids:?}"),
        }
    }
    panic!("no helper runs in the container");
}

/// Whether [`helper`]'s `pid` is a helper still.
fn is_helper(m: &common::TestMoat, session: &str, pid: u32) -> bool {
    if under_gvisor() {
        return m
            .docker_exec(session, HELPER_PIDS)
            .split_whitespace()
            .any(|p| p == pid.to_string());
    }
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .is_ok_and(|c| c.starts_with(b"/run/moat/moat-helper\0"))
}

/// The pids of the container's helpers, by the name the kernel shows for them (`comm`).
const HELPER_PIDS: &str = r#"for p in /proc/[0-9]*; do if [ "$(cat "$p/comm" 2>/dev/null)" = moat-helper ]; then echo "${p#/proc/}"; fi; done"#;

/// Kills every helper in the container, by the name the kernel shows for it (`comm`): the
/// wrappers it forks name themselves `moat-wrapper` (docs/helper.md).
const KILL_HELPER: &str = r#"for p in /proc/[0-9]*; do if [ "$(cat "$p/comm" 2>/dev/null)" = moat-helper ]; then kill -9 "${p#/proc/}" && echo killed; fi; done"#;

#[tokio::test]
async fn commands_run_through_the_helper_with_the_engine_paths_results() {
    let Some(m) = common::moat_as_configured("t-hlp-basic", helper_config()).await else {
        return;
    };
    let r = m
        .exec("a", "echo out; echo err >&2; pwd; id -u; exit 3")
        .await;
    assert_eq!(r.details.to_json()["exitCode"], 3, "{}", r.text());
    assert!(
        r.text().starts_with("out\nerr\n/workspace\n1000"),
        "{}",
        r.text()
    );
    let container = m.container("a");
    assert_eq!(m.app.commands.transport_of(&container), "helper");
    let pid = helper(&m, "a");
    assert!(is_helper(&m, "a", pid), "pid {pid} is the helper");
    // Many at once, each with its own output and status.
    let commands: Vec<String> = (0..24)
        .map(|i| format!("echo n{i}; exit {}", i % 5))
        .collect();
    let runs = commands.iter().map(|c| m.exec("a", c));
    for (i, r) in futures::future::join_all(runs)
        .await
        .into_iter()
        .enumerate()
    {
        assert_eq!(
            r.details.to_json()["aggregated"],
            format!("n{i}\n"),
            "{}",
            r.details
        );
        assert_eq!(r.details.to_json()["exitCode"], i % 5, "{}", r.text());
    }
    assert_eq!(helper(&m, "a"), pid, "one helper served them all");
    // `moat doctor`, another process, finds the helper answering.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_moat"))
        .arg("doctor")
        .env("MOAT_HOME", m.dir.path())
        .output()
        .unwrap();
    let doctor = String::from_utf8_lossy(&out.stdout);
    assert!(
        doctor.contains(&format!("{container}: commands go through the helper")),
        "{doctor}"
    );
    // A terminal's hangup at a PTY command's end is not the helper's.
    let req = moat::tools::ExecRequest {
        command: "echo tty; exit 2".into(),
        pty: Some(true),
        ..Default::default()
    };
    let r = m.exec_req("a", req).await;
    assert_eq!(r.details.to_json()["exitCode"], 2, "{}", r.details);
    assert!(r.text().starts_with("tty"), "{}", r.text());
    assert!(is_helper(&m, "a", pid), "the helper outlives a PTY command");
    assert_eq!(m.exec("a", "echo still").await.text(), "still");
    assert_eq!(helper(&m, "a"), pid);
}

fn preq(action: &str, id: &str) -> ProcessRequest {
    ProcessRequest {
        action: action.into(),
        process_id: Some(id.into()),
        ..Default::default()
    }
}

#[tokio::test]
async fn a_helper_killed_mid_command_loses_no_output_and_no_status() {
    let Some(m) = common::moat_as_configured("t-hlp-kill", helper_config()).await else {
        return;
    };
    let id = m
        .background("a", "echo first; sleep 2; echo second; exit 7")
        .await;
    let first = helper(&m, "a");
    // A sandboxed command kills the helper, its own parent among them.
    let r = m.exec("a", KILL_HELPER).await;
    assert!(r.text().contains("killed"), "{}", r.text());
    assert_eq!(r.details.to_json()["exitCode"], 0, "{}", r.text());
    assert!(!is_helper(&m, "a", first));
    // The background command ran on, and its output and status arrive complete.
    let p = m.app.registry.get(&m.key("a"), &id).unwrap();
    assert!(p.wait_exit(Duration::from_secs(30)).await, "it ends");
    let log = m.process("a", &preq("log", &id)).await;
    assert_eq!(log.text(), "first\nsecond", "{}", log.details);
    assert_eq!(log.details.to_json()["exitCode"], 7, "{}", log.details);
    let r = m.exec("a", "echo again").await;
    assert_eq!(r.text(), "again", "{}", r.details);
    if under_gvisor() {
        // Under gVisor the dead helper's socket keeps its path (no process of the sandbox may
        // unlink it, and moat does not, docs/helper.md, "Trust"): the engine takes the
        // container's commands from now on.
        assert_eq!(m.app.commands.transport_of(&m.container("a")), "exec");
        assert_eq!(m.docker_exec("a", HELPER_PIDS), "");
        return;
    }
    // The next command restarts the helper.
    let second = helper(&m, "a");
    assert_ne!(second, first);
    assert!(is_helper(&m, "a", second));
    assert_eq!(m.app.commands.transport_of(&m.container("a")), "helper");
}

/// Python: connect to the helper's socket and send what a hostile command would.
const GARBAGE: &str = r#"
import socket, struct
p = '/run/moat/helper/sock'
def conn():
    s = socket.socket(socket.AF_UNIX); s.connect(p); return s
def frame(kind, rid, payload):
    body = struct.pack('>BI', kind, rid) + payload
    return struct.pack('>I', len(body)) + body
hello = frame(1, 0, struct.pack('>I', 11) + b'moat-helper' + struct.pack('>I', 3))
attacks = [
    b'GET / HTTP/1.1\r\n\r\n',
    struct.pack('>I', 0xffffffff) + b'x' * 64,
    hello + struct.pack('>I', 0x7fffffff),
    hello + frame(2, 1, b'\x00\x00\x00\x00\x00' + struct.pack('>I', 0) + struct.pack('>I', 0xffffffff)),
    hello + frame(16, 1, struct.pack('>I', 1)),
    hello + frame(2, 1, b'\xff'),
]
for a in attacks:
    s = conn()
    try:
        s.sendall(a)
        s.settimeout(2)
        s.recv(100)
    except Exception:
        pass
    s.close()
held = [conn() for _ in range(50)]
print('sent')
"#;

#[tokio::test]
async fn garbage_on_the_helpers_socket_harms_no_command() {
    let Some(m) = common::moat_as_configured("t-hlp-garbage", helper_config()).await else {
        return;
    };
    let id = m.background("a", "sleep 2; echo survived; exit 6").await;
    let pid = helper(&m, "a");
    let r = m
        .exec(
            "a",
            &format!("python3 -c \"$(cat <<'EOF'\n{GARBAGE}\nEOF\n)\""),
        )
        .await;
    if under_gvisor() {
        // Under gVisor the helper's socket is a host socket the gofer made, which no process
        // in the sandbox may connect to (`--host-uds=create`, not `open`): the attack cannot
        // even start.
        assert!(
            r.text().contains("PermissionError") && r.text().contains("not permitted"),
            "{}",
            r.details
        );
    } else {
        assert_eq!(r.text(), "sent", "{}", r.details);
    }
    // The helper dropped each bad connection and serves on.
    assert_eq!(helper(&m, "a"), pid);
    assert!(is_helper(&m, "a", pid));
    let r = m.exec("a", "echo fine; exit 4").await;
    assert_eq!(r.details.to_json()["aggregated"], "fine\n", "{}", r.details);
    assert_eq!(r.details.to_json()["exitCode"], 4, "{}", r.details);
    let p = m.app.registry.get(&m.key("a"), &id).unwrap();
    assert!(p.wait_exit(Duration::from_secs(20)).await);
    let log = m.process("a", &preq("log", &id)).await;
    assert_eq!(log.text(), "survived");
    assert_eq!(log.details.to_json()["exitCode"], 6);
}

/// Python: kill the helper and listen in its place, answering as a helper would, lying.
const IMPOSTOR: &str = r#"
import os, socket, struct, time
p = '/run/moat/helper/sock'
for d in os.listdir('/proc'):
    if d.isdigit():
        try:
            if open('/proc/%s/cmdline' % d, 'rb').read().split(b'\0')[0] == b'/run/moat/moat-helper':
                os.kill(int(d), 9)
        except Exception:
            pass
# It keeps trying for 8 s: a moment when the path is free (moat making room for a new helper)
# is all it needs.
deadline = time.time() + 8
while True:
    try:
        try:
            os.unlink(p)
        except FileNotFoundError:
            pass
        s = socket.socket(socket.AF_UNIX); s.bind(p); s.listen(16)
        break
    except OSError as e:
        if time.time() > deadline:
            open('/tmp/impostor.failed', 'w').write(repr(e))
            raise
        time.sleep(0.001)
open('/tmp/impostor.ready', 'w').close()
def frame(kind, rid, payload):
    body = struct.pack('>BI', kind, rid) + payload
    return struct.pack('>I', len(body)) + body
hello = frame(1, 0, struct.pack('>I', 11) + b'moat-helper' + struct.pack('>I', 3))
while True:
    c, _ = s.accept()
    try:
        c.sendall(hello)
        data = c.recv(65536)
    except OSError:
        data = b''
    with open('/tmp/impostor.log', 'ab') as f:
        f.write(b'conn %d\n' % len(data))
    try:
        for rid in range(1, 64):
            c.sendall(frame(16, rid, struct.pack('>I', 1)) + frame(18, rid, struct.pack('>I', 0)))
    except OSError:
        pass
    c.close()
"#;

/// What the impostor made of the helper's socket: its error, or the path of its ready mark;
/// waits up to 30 s (under load it can take seconds to start).
async fn impostor_outcome(m: &common::TestMoat) -> String {
    for _ in 0..600 {
        let outcome = m.docker_exec(
            "a",
            "cat /tmp/impostor.failed 2>/dev/null || find /tmp/impostor.ready 2>/dev/null",
        );
        if !outcome.is_empty() {
            return outcome;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    String::new()
}

#[tokio::test]
async fn a_listener_in_the_helpers_place_is_never_believed() {
    let Some(m) = common::moat_as_configured("t-hlp-impostor", helper_config()).await else {
        return;
    };
    assert_eq!(m.exec("a", "true").await.status(), Some(Status::Completed));
    let first = helper(&m, "a");
    // The sandbox user, from outside moat's view, kills the helper and takes its socket.
    let container = m.container("a");
    let status = std::process::Command::new("docker")
        .args(["exec", "-d", &container, "python3", "-c", IMPOSTOR])
        .status()
        .unwrap();
    assert!(status.success());
    if under_gvisor() {
        // Under gVisor the socket is a host file the gofer made, which no process of the
        // sandbox may unlink, and moat never frees its path for a new helper (it could not
        // tell its helper from the impostor there, docs/helper.md, "Trust"). So while the
        // impostor tries, commands go through the engine with their real output and status.
        let mut last = None;
        for i in 0..6 {
            let r = m.exec("a", &format!("echo real{i}; exit 5")).await;
            assert_eq!(
                r.details.to_json()["aggregated"],
                format!("real{i}\n"),
                "{}",
                r.details
            );
            assert_eq!(r.details.to_json()["exitCode"], 5, "{}", r.details);
            last = Some(m.app.commands.transport_of(&m.container("a")));
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        assert_eq!(last, Some("exec"));
        let outcome = impostor_outcome(&m).await;
        assert!(
            outcome.contains("PermissionError") || outcome.contains("Address already in use"),
            "the impostor got the socket: {outcome:?}"
        );
        assert!(!is_helper(&m, "a", first), "the impostor killed the helper");
        assert_eq!(
            m.docker_exec("a", "cat /tmp/impostor.log 2>/dev/null"),
            "",
            "moat connected to the impostor"
        );
        return;
    }
    // Under load the impostor can take seconds to bind: the test must not go on without it
    // (moat would start a fresh helper and never meet the impostor).
    let outcome = impostor_outcome(&m).await;
    assert!(!is_helper(&m, "a", first), "the impostor killed the helper");
    assert!(
        outcome.contains("impostor.ready"),
        "the impostor never took the helper's socket: {outcome:?}"
    );
    // The impostor says every command exited 0; the real status arrives. Under load moat may
    // first see its connection to the killed helper fail and run a command through the
    // engine before it looks for a helper again, so commands run until moat met the
    // impostor (each must carry the real status).
    let mut log = String::new();
    for _ in 0..5 {
        let r = m.exec("a", "echo real; exit 5").await;
        assert_eq!(r.details.to_json()["aggregated"], "real\n", "{}", r.details);
        assert_eq!(r.details.to_json()["exitCode"], 5, "{}", r.details);
        log = m.docker_exec("a", "cat /tmp/impostor.log 2>/dev/null");
        if log.contains("conn") {
            break;
        }
    }
    // moat connected, saw a listener that is not its helper, and sent it nothing.
    assert!(
        log.contains("conn"),
        "moat tried the socket it found: {log:?}"
    );
    assert!(
        log.lines().all(|l| l == "conn 0"),
        "the impostor was sent something: {log:?}"
    );
    let second = helper(&m, "a");
    assert_ne!(second, first);
    assert!(
        is_helper(&m, "a", second),
        "a new helper took the socket back"
    );
}

#[tokio::test]
async fn a_kill_9_of_moat_loses_nothing_the_helper_runs() {
    if common::engine().await.is_none() {
        return;
    }
    let h = common::cli_home::TestHome::new("t-hlp-durable");
    let session = h.key("a");
    let out = h
        .moat()
        .env("MOAT_SANDBOX_TRANSPORT", "helper")
        .args([
            "exec",
            "--session",
            &session,
            "--background",
            "--json",
            "--",
        ])
        .arg("for i in 1 2 3; do echo line$i; sleep 1; done; exit 7")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", common::cli_home::text(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let id = v["details"]["sessionId"].as_str().unwrap().to_string();
    let daemon = h.daemon_pid().expect("a daemon serves the home");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(daemon),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    tokio::time::sleep(Duration::from_secs(4)).await;
    // A new daemon finds the process complete, and the helper still running.
    let log = h
        .moat()
        .env("MOAT_SANDBOX_TRANSPORT", "helper")
        .args([
            "process",
            "log",
            "--session",
            &session,
            "--id",
            &id,
            "--json",
        ])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&log.stdout)
        .unwrap_or_else(|_| panic!("{}", common::cli_home::text(&log)));
    assert!(v.to_string().contains("line1\\nline2\\nline3"), "{v}");
    assert_eq!(v["details"]["exitCode"], 7, "{v}");
    let r = h
        .moat()
        .env("MOAT_SANDBOX_TRANSPORT", "helper")
        .args(["exec", "--session", &session, "--", "echo after"])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&r.stdout).trim(), "after");
    assert!(
        h.ps(&session).contains("/run/moat/moat-helper"),
        "{}",
        h.ps(&session)
    );
}

/// Python: a client of the helper's own protocol, from inside: two requests in flight, a
/// captured output, a look at the first one's process group (docs/helper.md, "What a command
/// left"), and then a signal for that group.
const CLIENT: &str = r#"
import socket, struct
def frame(kind, rid, payload):
    body = struct.pack('>BI', kind, rid) + payload
    return struct.pack('>I', len(body)) + body
def s_(b): return struct.pack('>I', len(b)) + b
def lst(items): return struct.pack('>I', len(items)) + b''.join(s_(i) for i in items)
def spawn(rid, argv, flags):
    return frame(2, rid, bytes([flags]) + struct.pack('>HH', 0, 0) + s_(b'') + lst(argv) + lst([b'GREETING=hi']) + s_(b''))
c = socket.socket(socket.AF_UNIX); c.connect('/run/moat/helper/sock')
c.sendall(frame(1, 0, s_(b'moat-helper') + struct.pack('>I', 3)))
buf = b''
def read():
    global buf
    while True:
        if len(buf) >= 4:
            n = struct.unpack('>I', buf[:4])[0]
            if len(buf) >= 4 + n:
                body = buf[4:4 + n]; buf = buf[4 + n:]
                return body[0], struct.unpack('>I', body[1:5])[0], body[5:]
        buf += c.recv(65536)
assert read()[0] == 1
c.sendall(spawn(1, [b'sleep', b'100'], 0))
c.sendall(spawn(2, [b'sh', b'-c', b'echo $GREETING; exit 3'], 2))
out, done, seen = b'', {}, None
while len(done) < 2:
    kind, rid, p = read()
    if kind == 16 and rid == 1:
        c.sendall(frame(6, 3, p[:4] + s_(b'nothing-1')))
    elif kind == 20 and rid == 3:
        seen = (p[0] & 1, struct.unpack('>I', p[1:5])[0], p[0] & 2, struct.unpack('>I', p[5:9])[0])
        c.sendall(frame(5, 1, struct.pack('>I', 15)))
    elif kind == 17:
        out += p[4:]
    elif kind == 18:
        done[rid] = struct.unpack('>i', p)[0]
print(out.decode().strip(), done[1], done[2], 'group', seen[1] if seen[0] else '?', 'marked', seen[3] if seen[2] else '?')
"#;

#[tokio::test]
async fn the_protocol_runs_requests_side_by_side_and_signals_groups() {
    let Some(m) = common::moat_as_configured("t-hlp-proto", helper_config()).await else {
        return;
    };
    m.exec("a", "true").await;
    // A process the look cannot read (moat's own engine exec of the previous command, as
    // root, still ending under load) makes the marker count "cannot tell" (`?`), which is
    // the look's honest answer; the count is asked again then, up to three times.
    let mut r = None;
    for _ in 0..3 {
        let got = m
            .exec(
                "a",
                &format!("python3 -c \"$(cat <<'EOF'\n{CLIENT}\nEOF\n)\""),
            )
            .await;
        let unsure = got.text().ends_with("marked ?");
        r = Some(got);
        if !unsure {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }
    let r = r.unwrap();
    if under_gvisor() {
        // No process in a gVisor sandbox may connect to the helper's host socket: the
        // protocol is moat's alone there (its looks and signals are tested through moat in
        // docker_runsc).
        assert!(r.text().contains("PermissionError"), "{}", r.details);
        assert_eq!(m.exec("a", "echo fine").await.text(), "fine");
        return;
    }
    // `echo` saw the env laid over the helper's; the look found `sleep` alone in its group
    // and nothing marked `nothing-1`; SIGTERM ended `sleep` (128 + 15).
    assert_eq!(r.text(), "hi 143 3 group 1 marked 0", "{}", r.details);
}

/// A command that ignores TERM and stops (SIGSTOP) every helper command of moat's whose
/// command line matches `pattern` (an extended regex that does not match itself), noting each
/// in /tmp/stopped. `decoys` idle processes without the command's marker first: each costs
/// the marker sweep a look, so the sweep runs long enough to be caught.
fn stopper(pattern: &str, decoys: usize) -> String {
    format!(
        "trap '' TERM; for i in $(seq {decoys}); do env -u MOAT_PROCESS sleep 1000 & done; while :; do for p in $(pgrep -f '{pattern}'); do kill -STOP $p && echo $p >> /tmp/stopped; done; sleep 0.02; done"
    )
}

/// Attack: the sandbox stops moat's kill helper (`kill -TERM -<group>`, then a wait) while it
/// waits out the grace, so the KILL never comes. The helper command has a deadline (grace +
/// 10 s): at it moat ends the stopped helper, and the sweep by the command's marker ends the
/// command. On either transport (docs/helper.md, "Deadlines").
#[tokio::test]
async fn a_kill_helper_the_sandbox_stops_holds_the_kill_only_until_its_deadline() {
    let Some(m) = common::moat("t-hlp-stopkill", Config::default()).await else {
        return;
    };
    let id = m.background("a", &stopper("kill -TER[M] -", 0)).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let started = std::time::Instant::now();
    let kill = tokio::time::timeout(Duration::from_secs(60), m.process("a", &preq("kill", &id)))
        .await
        .expect("the kill returns");
    let took = started.elapsed();
    // Control: the kill helper was stopped, and it held the kill until its deadline.
    let stopped = m.docker_exec("a", "cat /tmp/stopped");
    assert!(!stopped.trim().is_empty(), "the stopper stopped nothing");
    assert!(took >= Duration::from_secs(13), "{took:?}: {}", kill.text());
    // Then the command ended.
    assert!(!kill.is_error(), "{}", kill.text());
    assert!(took < Duration::from_secs(40), "{took:?}");
    let p = m.app.registry.get(&m.key("a"), &id).unwrap();
    assert!(!p.is_running());
    assert!(!m.docker_exec("a", "ps -eo args").contains("trap '' TERM"));
    // Through the helper, the stopped helper command was ended too (the engine has no way
    // to end an exec: there it stays stopped until the container goes).
    if common::test_transport() != Some(Transport::Exec) {
        let states = m.docker_exec("a", "ps -eo stat=,args= | grep '^T' || true");
        assert!(states.trim().is_empty(), "stopped processes left: {states}");
    }
}

/// The same with the marker sweep stopped too: when the stopper catches both, nothing moat
/// runs in the sandbox can end the command, and the kill says so after both deadlines
/// instead of waiting for ever; the command runs on, and the next kill tries again.
#[tokio::test]
async fn a_kill_whose_helpers_are_all_stopped_fails_within_its_deadlines() {
    let Some(m) = common::moat("t-hlp-stopall", Config::default()).await else {
        return;
    };
    // Under gVisor a sandboxed process costs about 8 of the host's tasks, which the pids limit
    // counts (docs/security.md, "runc or runsc"): 100 decoys would end the sandbox there.
    let decoys = if under_gvisor() { 20 } else { 100 };
    let id = m
        .background("a", &stopper("kill -TER[M] -|MOAT_PROCES[S]=", decoys))
        .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let started = std::time::Instant::now();
    let kill = tokio::time::timeout(Duration::from_secs(90), m.process("a", &preq("kill", &id)))
        .await
        .expect("the kill returns");
    let took = started.elapsed();
    let stopped = m.docker_exec("a", "cat /tmp/stopped | wc -l");
    assert!(
        stopped.trim().parse::<u32>().unwrap() >= 2,
        "both helpers were stopped: {stopped}"
    );
    let p = m.app.registry.get(&m.key("a"), &id).unwrap();
    // The sweep is one `grep` over every environment (`script::sweep_argv`), which may find
    // and end the command before the stopper catches it: then the kill worked, and said so.
    // Otherwise it fails, within its deadlines, and says so; never a kill that waits for ever
    // or a result that lies about the command.
    if kill.is_error() {
        assert!(
            kill.text().contains(&format!("Failed to end session {id}")),
            "{}",
            kill.text()
        );
        // Kill helper (13 s), sweep (20 s), the settle (2 s).
        assert!(took >= Duration::from_secs(33), "{took:?}");
        assert!(p.is_running(), "the command runs on");
    } else {
        assert_eq!(kill.text(), format!("Killed session {id}."));
        assert!(!p.is_running(), "the kill said it ended the command");
    }
    assert!(took < Duration::from_secs(60), "{took:?}");
}

/// Under gVisor moat cannot tell its helper from another process of the sandbox by pid, so a
/// container instance's helper must start before any command of it runs (docs/helper.md,
/// "Trust"). A hostile review got its own listener trusted after a restart: the helper of the
/// container before had been killed, moat still held the retry time of that failure, so the
/// first command of the restarted container went through the engine, and it listened in the
/// helper's place before the helper started. Now the first command of a started container
/// goes through its new helper, under either runtime.
#[tokio::test]
async fn a_container_started_again_runs_its_helper_before_any_command() {
    let Some(m) = common::moat_as_configured("t-hlp-restart", helper_config()).await else {
        return;
    };
    assert_eq!(m.exec("a", "echo up").await.text(), "up");
    let r = m.exec("a", KILL_HELPER).await;
    assert!(r.text().contains("killed"), "{}", r.text());
    // Under gVisor the helper is gone for this container instance: this goes through the
    // engine, and moat notes when to try again.
    assert_eq!(m.exec("a", "echo after").await.text(), "after");
    let status = std::process::Command::new("docker")
        .args(["stop", "-t", "1", &m.container("a")])
        .output()
        .unwrap();
    assert!(status.status.success(), "{status:?}");
    let r = m.exec("a", "echo first").await;
    assert_eq!(r.text(), "first", "{}", r.details);
    assert_eq!(
        m.app.commands.transport_of(&m.container("a")),
        "helper",
        "the first command of the started container went through the engine"
    );
    helper(&m, "a");
}
