//! One owner per moat home (docs/ARCHITECTURE.md, "Daemon"), against the real engine: each
//! test is one of the races or failures that two owners of one home used to cause.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::cli_home::{alive, stdout, text, wait_until, TestHome};
use serde_json::{json, Value};

/// Twenty CLIs at once on a fresh home used to race for the database and the container
/// (409 Conflict, "table sessions already exists"). Now: one daemon, one container, twenty
/// answers.
#[tokio::test]
async fn twenty_first_uses_of_a_fresh_home_through_the_cli() {
    if common::engine().await.is_none() {
        return;
    }
    let home = TestHome::new("t-dm-first");
    let key = home.key("s");
    let children: Vec<_> = (0..20)
        .map(|i| {
            home.moat()
                .args(["exec", "--session", &key, "--", &format!("echo call-{i}")])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for (i, c) in children.into_iter().enumerate() {
        let out = c.wait_with_output().unwrap();
        assert!(out.status.success(), "call {i}: {}", text(&out));
        assert_eq!(String::from_utf8_lossy(&out.stdout), format!("call-{i}\n"));
    }
    assert_eq!(home.containers(&key).len(), 1);
    assert_eq!(home.daemons(), 1);
}

/// A JSON-RPC exchange with one `moat mcp`: initialize, then an exec call; the call's result.
fn mcp_exec(home: &TestHome, session: &str, command: &str) -> Value {
    let mut child = home
        .moat()
        .args(["mcp", "--session", session])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let send = |stdin: &mut std::process::ChildStdin, v: Value| {
        writeln!(stdin, "{v}").unwrap();
        stdin.flush().unwrap();
    };
    let mut read_id = |id: i64| -> Value {
        loop {
            let mut line = String::new();
            assert!(out.read_line(&mut line).unwrap() > 0, "moat mcp closed");
            let v: Value = serde_json::from_str(&line).unwrap();
            if v["id"] == id {
                return v;
            }
        }
    };
    send(
        &mut stdin,
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "t", "version": "0"}}}),
    );
    let init = read_id(1);
    assert!(init["result"].is_object(), "{init}");
    send(
        &mut stdin,
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    );
    send(
        &mut stdin,
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
               "params": {"name": "exec", "arguments": {"command": command}}}),
    );
    let result = read_id(2);
    drop(stdin);
    let _ = child.wait();
    result
}

/// The same race through `moat mcp` (stdio): twenty servers at once, one daemon behind them.
#[tokio::test]
async fn twenty_first_uses_of_a_fresh_home_through_moat_mcp() {
    if common::engine().await.is_none() {
        return;
    }
    let home = std::sync::Arc::new(TestHome::new("t-dm-mcp"));
    let key = home.key("s");
    let threads: Vec<_> = (0..20)
        .map(|i| {
            let home = home.clone();
            let key = key.clone();
            std::thread::spawn(move || mcp_exec(&home, &key, &format!("echo mcp-{i}")))
        })
        .collect();
    for (i, t) in threads.into_iter().enumerate() {
        let r = t.join().unwrap();
        assert_eq!(r["result"]["isError"], false, "call {i}: {r}");
        assert_eq!(
            r["result"]["structuredContent"]["aggregated"],
            format!("mcp-{i}\n"),
            "{r}"
        );
    }
    assert_eq!(home.containers(&key).len(), 1);
    assert_eq!(home.daemons(), 1);
}

/// A CLI killed with SIGKILL during a foreground exec used to leave its command running past
/// its timeout, unlisted. The daemon owns the command: it ends with the call and stays listed.
#[tokio::test]
async fn a_cli_killed_with_sigkill_leaves_nothing_running() {
    if common::engine().await.is_none() {
        return;
    }
    let home = TestHome::new("t-dm-kill9");
    let key = home.key("s");
    let warm = home.run(&["exec", "--session", &key, "--", "true"]);
    assert!(warm.status.success(), "{}", text(&warm));
    let mut cli = home
        .moat()
        .args([
            "exec",
            "--session",
            &key,
            "--timeout",
            "3",
            "--",
            "sleep 25",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_until("the command starts", Duration::from_secs(30), || {
        home.ps(&key).contains("sleep 25")
    });
    cli.kill().unwrap();
    let _ = cli.wait();
    wait_until("the command is ended", Duration::from_secs(8), || {
        !home.ps(&key).contains("sleep 25")
    });
    // Listed, and its end recorded within the kill grace.
    let row = || {
        let list = home.run(&["process", "list", "--session", &key, "--json"]);
        let v: Value =
            serde_json::from_slice(&list.stdout).unwrap_or_else(|_| panic!("{}", text(&list)));
        v["details"]["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["command"] == "sleep 25")
            .unwrap_or_else(|| panic!("not listed: {v}"))
            .clone()
    };
    wait_until("its end is recorded", Duration::from_secs(8), || {
        row()["status"] != "running"
    });
    assert_eq!(row()["status"], "failed", "{}", row());
}

/// The new output of a poll result ("(no new output)" is none).
fn new_output(v: &Value) -> String {
    let text = v["content"][0]["text"].as_str().unwrap_or_default();
    let body = text.rsplit_once("\n\n").map_or(text, |(b, _)| b);
    if body == "(no new output)" {
        String::new()
    } else {
        body.to_string()
    }
}

/// Polls over HTTP and through the CLI used to keep two cursors: lines came back twice. One
/// daemon keeps one cursor per process, whoever asks.
#[tokio::test]
async fn http_and_cli_polls_share_one_cursor() {
    let token = "operator-token-0123456789";
    let Some(server) = common::serve::serve(
        "t-dm-poll",
        &format!("[serve]\noperator_token = \"{token}\"\n"),
    )
    .await
    else {
        return;
    };
    let key = "t-dm-poll-s";
    let body = json!({"command": "for i in $(seq 1 60); do echo line-$i; sleep 0.05; done", "background": true});
    let (status, started) = common::serve::http(
        &server.addr,
        "POST",
        &format!("/v1/sessions/{key}/exec"),
        Some(token),
        body.to_string().as_bytes(),
    );
    assert_eq!(status, 200, "{started}");
    let id = serde_json::from_str::<Value>(&started).unwrap()["details"]["sessionId"]
        .as_str()
        .unwrap()
        .to_string();
    let mut seen = String::new();
    for round in 0..200 {
        let v: Value = if round % 2 == 0 {
            let poll = json!({"action": "poll", "sessionId": id, "timeout": 200});
            let (status, body) = common::serve::http(
                &server.addr,
                "POST",
                &format!("/v1/sessions/{key}/process"),
                Some(token),
                poll.to_string().as_bytes(),
            );
            assert_eq!(status, 200, "{body}");
            serde_json::from_str(&body).unwrap()
        } else {
            let out = Command::new(env!("CARGO_BIN_EXE_moat"))
                .args([
                    "process",
                    "poll",
                    "--session",
                    key,
                    "--id",
                    &id,
                    "--timeout",
                    "200",
                    "--json",
                ])
                .env("MOAT_HOME", server.dir.path())
                .output()
                .unwrap();
            serde_json::from_slice(&out.stdout).unwrap_or_else(|_| panic!("{}", text(&out)))
        };
        let chunk = new_output(&v);
        if !chunk.is_empty() {
            seen.push_str(&chunk);
            seen.push('\n');
        }
        if v["details"]["status"] != "running" {
            break;
        }
    }
    let lines: Vec<&str> = seen.lines().filter(|l| !l.is_empty()).collect();
    let expected: Vec<String> = (1..=60).map(|i| format!("line-{i}")).collect();
    assert_eq!(lines, expected, "every line once, in order");
}

/// A result that travelled through the daemon used to lose `timedOut`, `durationMs` and
/// `truncated` when the command outlived the yield window.
#[tokio::test]
async fn results_through_the_daemon_tell_the_truth() {
    if common::engine().await.is_none() {
        return;
    }
    let home = TestHome::new("t-dm-truth");
    let key = home.key("s");
    std::fs::write(home.path().join("moat.toml"), "[exec]\nyield_ms = 1000\n").unwrap();
    let out = home.run(&[
        "exec",
        "--session",
        &key,
        "--json",
        "--timeout",
        "3",
        "--",
        "sleep 20",
    ]);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|_| panic!("{}", text(&out)));
    assert_eq!(v["details"]["timedOut"], true, "{v}");
    assert!(v["details"]["durationMs"].as_i64().unwrap() >= 2500, "{v}");
    let out = home.run(&[
        "exec",
        "--session",
        &key,
        "--json",
        "--",
        "sleep 2; head -c 400000 /dev/zero | tr '\\0' a",
    ]);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|_| panic!("{}", text(&out)));
    assert_eq!(v["details"]["truncated"], true, "{v}");
    assert_eq!(v["details"]["status"], "completed", "{v}");
    assert!(v["details"]["durationMs"].as_i64().unwrap() >= 1500, "{v}");
}

/// `sessions list` used to show every home's containers (and `sessions rm` then refused them).
#[tokio::test]
async fn sessions_list_shows_this_homes_sessions_only() {
    if common::engine().await.is_none() {
        return;
    }
    let a = TestHome::new("t-dm-ls-a");
    let b = TestHome::new("t-dm-ls-b");
    for h in [&a, &b] {
        let out = h.run(&["exec", "--session", &h.key("s"), "--", "true"]);
        assert!(out.status.success(), "{}", text(&out));
    }
    let out = a.run(&["sessions", "list", "--json"]);
    let rows: Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|_| panic!("{}", text(&out)));
    let keys: Vec<&str> = rows
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["session"].as_str().unwrap())
        .collect();
    assert_eq!(keys, vec![a.key("s").as_str()]);
    let rm = a.run(&["sessions", "rm", &a.key("s")]);
    assert!(rm.status.success(), "{}", text(&rm));
    assert!(a.containers(&a.key("s")).is_empty());
    assert_eq!(b.containers(&b.key("s")).len(), 1);
}

/// A daemon started on demand goes away when it has nothing to own, and at once when its home
/// is deleted; a second `moat serve` on a served home is refused by name.
#[tokio::test]
async fn the_daemon_exits_when_idle_or_unreachable_and_stays_single() {
    if common::engine().await.is_none() {
        return;
    }
    let home = TestHome::new("t-dm-idle");
    let key = home.key("s");
    std::fs::write(
        home.path().join("moat.toml"),
        "[serve]\nidle_exit_secs = 2\n",
    )
    .unwrap();
    let out = home.run(&["exec", "--session", &key, "--background", "--", "sleep 4"]);
    assert!(out.status.success(), "{}", text(&out));
    let pid = home.daemon_pid().unwrap();
    let serve = home.run(&["serve"]);
    assert_eq!(serve.status.code(), Some(2), "{}", text(&serve));
    assert!(
        String::from_utf8_lossy(&serve.stderr).contains(&format!(
            "another moat (pid {pid}) already serves this home"
        )),
        "{}",
        text(&serve)
    );
    // Busy while the background command runs (4 s), then idle for 2 s.
    std::thread::sleep(Duration::from_secs(3));
    assert!(alive(pid), "stopped while it owned a running process");
    wait_until("the idle daemon exits", Duration::from_secs(15), || {
        !alive(pid)
    });
    assert!(!home.path().join("moat.sock").exists());
    // The next command starts a new one.
    let out = home.run(&["exec", "--session", &key, "--", "echo back"]);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "back\n",
        "{}",
        text(&out)
    );
    let pid = home.daemon_pid().unwrap();
    std::fs::remove_file(home.path().join("moat.sock")).unwrap();
    wait_until(
        "the unreachable daemon exits",
        Duration::from_secs(10),
        || !alive(pid),
    );
}

/// A daemon of another configuration must not run a client's commands: an idle one started
/// on demand is replaced, a busy one is reported with what to do.
#[tokio::test]
async fn a_daemon_of_another_configuration_is_replaced_or_refused() {
    if common::engine().await.is_none() {
        return;
    }
    let home = TestHome::new("t-dm-fit");
    let key = home.key("s");
    let out = home.run(&["exec", "--session", &key, "--", "echo one"]);
    assert!(out.status.success(), "{}", text(&out));
    let first = home.daemon_pid().unwrap();
    std::fs::write(home.path().join("moat.toml"), "[exec]\nyield_ms = 9000\n").unwrap();
    let out = home.run(&["exec", "--session", &key, "--", "echo two"]);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "two\n",
        "{}",
        text(&out)
    );
    let second = home.daemon_pid().unwrap();
    assert_ne!(first, second);
    wait_until("the replaced daemon exits", Duration::from_secs(10), || {
        !alive(first)
    });
    let out = home.run(&["exec", "--session", &key, "--background", "--", "sleep 30"]);
    assert!(out.status.success(), "{}", text(&out));
    std::fs::write(home.path().join("moat.toml"), "[exec]\nyield_ms = 8000\n").unwrap();
    let out = home.run(&[
        "exec",
        "--session",
        &key,
        "--",
        "touch /workspace/three-ran",
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    // Sent without a health check first, the call was refused unread: it never ran.
    let container = std::process::Command::new("docker")
        .args(["ps", "-q", "--filter", &format!("name=moat-{key}-")])
        .output()
        .unwrap();
    let container = String::from_utf8_lossy(&container.stdout)
        .trim()
        .to_string();
    let listed = std::process::Command::new("docker")
        .args(["exec", &container, "ls", "-A", "/workspace"])
        .output()
        .unwrap();
    assert!(listed.status.success(), "{listed:?}");
    assert!(
        !String::from_utf8_lossy(&listed.stdout).contains("three-ran"),
        "the refused call ran"
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("another moat build or configuration"), "{err}");
    assert!(err.contains("1 running process ("), "{err}");
    // It names what keeps the old daemon: the process, in its session.
    assert!(err.contains(&format!("in session {key}")), "{err}");
    assert!(alive(second));
}

/// With no daemon reachable and none startable, the error says why.
#[tokio::test]
async fn no_startable_daemon_is_a_clear_error() {
    let home = TestHome::new("t-dm-nostart");
    let out = home
        .moat()
        .args(["exec", "--", "true"])
        .env("MOAT_HOST_COMMAND", "x")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("runs inside a host command"),
        "{}",
        text(&out)
    );
    // A daemon that cannot serve (TCP without any token) exits: its own words reach the user.
    std::fs::write(
        home.path().join("moat.toml"),
        "[serve]\ntcp = \"127.0.0.1:0\"\n",
    )
    .unwrap();
    let out = home.run(&["exec", "--", "true"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("failed to start moat serve for"), "{err}");
    assert!(err.contains("before answering"), "{err}");
    assert!(err.contains("serve.operator_token"), "{err}");
}

/// A long-lived daemon must not hold a log open for every background process it ever ran:
/// finished ones past `process.max_finished` are evicted as new ones start, even when no
/// client ever lists them (a soak of 8700 commands used to end with 4379 open descriptors).
#[tokio::test]
async fn a_busy_daemon_keeps_its_descriptors_bounded() {
    if common::engine().await.is_none() {
        return;
    }
    let home = TestHome::new("t-dm-fds");
    let key = home.key("s");
    std::fs::write(
        home.path().join("moat.toml"),
        "[process]\nmax_finished = 3\n",
    )
    .unwrap();
    for i in 0..15 {
        let out = home.run(&[
            "exec",
            "--session",
            &key,
            "--background",
            "--",
            &format!("echo {i}"),
        ]);
        assert!(out.status.success(), "{}", text(&out));
        std::thread::sleep(Duration::from_millis(100));
    }
    let pid = home.daemon_pid().unwrap();
    let logs = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .filter(|p| p.extension().is_some_and(|e| e == "out"))
        .count();
    // The three kept, the newest (maybe still running), and one more that ended since.
    assert!(logs <= 5, "{logs} process logs held open");
}

/// A secret read from the environment takes its value from the daemon's: a client whose
/// variable holds another value gets a daemon that has it, not the old one.
#[tokio::test]
async fn a_client_with_other_secret_values_is_not_served_the_old_ones() {
    if common::engine().await.is_none() {
        return;
    }
    let home = TestHome::new("t-dm-secret");
    let key = home.key("s");
    std::fs::write(
        home.path().join("moat.toml"),
        "[secrets.API_TOKEN]\nenv = \"T_DM_SECRET_SOURCE\"\nsessions = [\"*\"]\n",
    )
    .unwrap();
    for value in ["first-value-1234", "second-value-5678"] {
        let out = home
            .moat()
            .env("T_DM_SECRET_SOURCE", value)
            .args([
                "exec",
                "--session",
                &key,
                "--",
                &format!("test \"$API_TOKEN\" = {value} && echo same"),
            ])
            .output()
            .unwrap();
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            "same\n",
            "{}",
            text(&out)
        );
    }
}

/// `sandbox.user = "1000:1000"` set explicitly equals the default value, but it changes what
/// the daemon decides (a host workspace's session no longer runs as the workspace's owner),
/// so it must replace the daemon; it used to leave the old one refusing (issue 25, item 6).
/// Control: a moat.toml that changes nothing keeps the daemon, so a new pid is the change
/// seen, not a restart every time.
#[tokio::test]
async fn an_explicit_default_sandbox_user_replaces_the_daemon() {
    if common::engine().await.is_none() {
        return;
    }
    let home = TestHome::new("t-dm-user");
    let key = home.key("s");
    let out = home.run(&["exec", "--session", &key, "--", "true"]);
    assert!(out.status.success(), "{}", text(&out));
    let first = home.daemon_pid().unwrap();
    // Control: a file with nothing in it is the same configuration.
    std::fs::write(home.path().join("moat.toml"), "# nothing\n").unwrap();
    let out = home.run(&["exec", "--session", &key, "--", "true"]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(
        home.daemon_pid(),
        Some(first),
        "an unchanged config keeps the daemon"
    );
    std::fs::write(
        home.path().join("moat.toml"),
        "[sandbox]\nuser = \"1000:1000\"\n",
    )
    .unwrap();
    let out = home.run(&["daemon", "status"]);
    assert!(
        stdout(&out).contains("not this moat's"),
        "status sees the difference: {}",
        text(&out)
    );
    let out = home.run(&["exec", "--session", &key, "--", "true"]);
    assert!(out.status.success(), "{}", text(&out));
    let second = home.daemon_pid().unwrap();
    assert_ne!(first, second, "the explicit user replaced the daemon");
}

/// `moat daemon status` says what runs (pid, build, fingerprint, whether they are this
/// moat's) and what it owns; `moat daemon stop` names what blocks it, and once nothing does,
/// waits until the daemon has let go of the home.
#[tokio::test]
async fn daemon_status_and_stop_say_what_runs_and_what_blocks() {
    if common::engine().await.is_none() {
        return;
    }
    let home = TestHome::new("t-dm-status");
    let key = home.key("s");
    let out = home.run(&["daemon", "status"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        stdout(&out).starts_with("no moat serve runs for "),
        "{}",
        text(&out)
    );
    let out = home.run(&["exec", "--session", &key, "--background", "--", "sleep 60"]);
    assert!(out.status.success(), "{}", text(&out));
    let pid = home.daemon_pid().unwrap();
    let out = home.run(&["daemon", "status", "--json"]);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|_| panic!("{}", text(&out)));
    assert_eq!(v["pid"], pid, "{v}");
    assert_eq!(v["fits"], true, "{v}");
    assert_eq!(v["sameBuild"], true, "{v}");
    assert_eq!(v["owns"]["processCount"], 1, "{v}");
    assert_eq!(v["owns"]["sessions"], json!([key]), "{v}");
    let proc_id = v["owns"]["processes"][0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let out = home.run(&["daemon", "status"]);
    let t = stdout(&out);
    assert!(t.contains(&format!("pid {pid}, started on demand")), "{t}");
    assert!(
        t.contains("(this moat's: it serves this moat's commands)"),
        "{t}"
    );
    assert!(
        t.contains(&format!(
            "owns:        1 running process ({} in session {key})",
            &proc_id[..8]
        )),
        "{t}"
    );
    // Busy: refused, and what blocks it is named with how to end it.
    let out = home.run(&["daemon", "stop"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!(
            "1 running process ({} in session {key})",
            &proc_id[..8]
        )),
        "{err}"
    );
    assert!(err.contains("moat process kill"), "{err}");
    assert!(alive(pid));
    let out = home.run(&["process", "kill", "--session", &key, "--id", &proc_id]);
    assert!(out.status.success(), "{}", text(&out));
    let out = home.run(&["daemon", "stop"]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(stdout(&out), format!("stopped moat serve (pid {pid})\n"));
    // It waited: the daemon is gone when stop returns.
    assert!(
        !alive(pid)
            || std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .is_ok_and(|s| s.contains(") Z "))
    );
    let out = home.run(&["daemon", "status"]);
    assert!(
        stdout(&out).starts_with("no moat serve runs for "),
        "{}",
        text(&out)
    );
}

/// The approval rows of `session` as `moat approvals list --all --json` shows them.
fn approvals_of(home: &TestHome, session: &str) -> Vec<Value> {
    let out = home.run(&["approvals", "list", "--all", "--json"]);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|_| panic!("{}", text(&out)));
    v.as_array()
        .unwrap()
        .iter()
        .filter(|r| r["session"] == session)
        .cloned()
        .collect()
}

/// The pending approval of `session`, once a waiting `moat exec` has filed it.
fn pending_id(home: &TestHome, session: &str) -> String {
    let mut id = String::new();
    wait_until("the approval is filed", Duration::from_secs(60), || {
        if let Some(r) = approvals_of(home, session)
            .iter()
            .find(|r| r["status"] == "pending")
        {
            id = r["id"].as_str().unwrap().to_string();
        }
        !id.is_empty()
    });
    id
}

/// A `moat exec` whose command asks (a `touch` ask pattern) and waits for the decision.
fn asking_exec(home: &TestHome, session: &str, file: &str) -> std::process::Child {
    home.moat()
        .args([
            "exec",
            "--session",
            session,
            "--",
            &format!("touch /workspace/{file} && echo ran"),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// `moat sessions rm` of a session with a pending approval ends the approval (audited), and
/// nothing re-creates the session's container when the approval would have expired (issue
/// 25, item 11: the container used to reappear when `ask_fallback` ran the expired plan).
/// Control: the same approval in a session that is not removed expires and its fallback
/// runs the plan, so the expiry is really reached within the wait.
#[tokio::test]
async fn a_removed_session_stays_removed_past_its_approvals_expiry() {
    if common::engine().await.is_none() {
        return;
    }
    let home = TestHome::configured(
        "t-dm-rm",
        "[policy.sandbox]\nask_patterns = [\"touch *\"]\n[approvals]\ntimeout_secs = 3\nask_fallback = \"full\"\n",
    );
    let gone = home.key("gone");
    let kept = home.key("kept");
    let mut gone_cli = asking_exec(&home, &gone, "g");
    let gone_id = pending_id(&home, &gone);
    let mut kept_cli = asking_exec(&home, &kept, "k");
    pending_id(&home, &kept);
    let out = home.run(&["sessions", "rm", &gone]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        stdout(&out).contains(&format!(
            "ended 1 approval and egress grant of session {gone}"
        )),
        "{}",
        text(&out)
    );
    let rows = approvals_of(&home, &gone);
    assert_eq!(rows[0]["status"], "denied", "{rows:?}");
    assert_eq!(rows[0]["decision"], "session-removed", "{rows:?}");
    // The waiting CLI is told at once, not at the expiry.
    let out = gone_cli.wait().unwrap();
    assert!(!out.success());
    // Past the expiry (3 s) with room to spare.
    std::thread::sleep(Duration::from_secs(6));
    assert!(
        home.containers(&gone).is_empty(),
        "the removed session's container came back"
    );
    let audit = stdout(&home.run(&["approvals", "audit", "--id", &gone_id]));
    assert!(audit.contains("approval-ended"), "{audit}");
    assert!(
        audit.contains("the session was removed while the approval was pending"),
        "{audit}"
    );
    // Control: the kept session's approval expired and ask_fallback ran its plan.
    let out = kept_cli.wait().unwrap();
    let rows = approvals_of(&home, &kept);
    assert_eq!(rows[0]["decision"], "fallback", "{rows:?} {out:?}");
    assert_eq!(home.containers(&kept).len(), 1);
}

/// How long from `moat approvals approve` returning to the waiting `moat exec` ending, for a
/// plan that is one `touch`: the CLI's decision wakes the daemon's waiter over the socket
/// (docs/approvals.md, "How waiters wake"). Control: the same decision written on
/// `state.db` without the wake (as the CLI used to) is found only by the shared 2 s check.
#[tokio::test]
async fn a_cli_decision_reaches_the_waiting_command_at_once() {
    if common::engine().await.is_none() {
        return;
    }
    let home = TestHome::configured(
        "t-dm-wake",
        "[policy.sandbox]\nask_patterns = [\"touch *\"]\n",
    );
    let key = home.key("s");
    let out = home.run(&["exec", "--session", &key, "--", "true"]);
    assert!(out.status.success(), "{}", text(&out));
    let time = |i: usize, by_cli: bool| -> Duration {
        let cli = asking_exec(&home, &key, &format!("f{i}"));
        let id = pending_id(&home, &key);
        let start = std::time::Instant::now();
        if by_cli {
            let out = home.run(&["approvals", "approve", &id]);
            assert!(out.status.success(), "{}", text(&out));
        } else {
            use moat::approvals::{ApprovalDecision, Approvals, Decider};
            let store = std::sync::Arc::new(
                moat::store::Store::open(&home.path().join("state.db")).unwrap(),
            );
            Approvals::new(store, vec![])
                .decide(
                    &id,
                    ApprovalDecision::AllowOnce,
                    &Decider::operator("t", "cli"),
                )
                .unwrap();
        }
        let out = cli.wait_with_output().unwrap();
        assert_eq!(
            String::from_utf8_lossy(&out.stdout).lines().next(),
            Some("ran"),
            "{out:?}"
        );
        start.elapsed()
    };
    let woken: Vec<Duration> = (0..4).map(|i| time(i, true)).collect();
    let unwoken: Vec<Duration> = (4..8).map(|i| time(i, false)).collect();
    eprintln!("approve -> command ended: woken {woken:?}, without the wake {unwoken:?}");
    let slowest_woken = *woken.iter().max().unwrap();
    let slowest_unwoken = *unwoken.iter().max().unwrap();
    // Control: without the wake the shared check's period shows.
    assert!(
        slowest_unwoken > slowest_woken + Duration::from_millis(400),
        "{unwoken:?} vs {woken:?}"
    );
    assert!(slowest_woken < Duration::from_secs(1), "{woken:?}");
}
