//! Operator-facing text as an attack: an agent's command and output carry a clear-screen
//! sequence, a window-title OSC, a bare CR and a right-to-left override. Whatever the CLI prints
//! to the operator's terminal must show them escaped, never raw (docs/security.md,
//! "Operator-facing text").

mod common;

use std::time::Duration;

use moat::config::Config;
use moat::contract::Status;
use moat::tools::ExecRequest;

/// Clear screen, set the window title, overwrite the line, reverse what follows.
const HOSTILE: &str = "\u{1b}[2J\u{1b}]0;pwn\u{7}fake\rreal \u{202e}txt.exe";

/// Bytes a terminal acts on: C0 controls other than `\n` and `\t` (so ESC, BEL, CR), DEL, C1
/// controls, and bidi overrides/isolates.
fn raw_control(text: &str) -> Option<char> {
    text.chars().find(|&c| {
        (c.is_control() && c != '\n' && c != '\t')
            || matches!(c as u32, 0x200e | 0x200f | 0x202a..=0x202e | 0x2066..=0x2069)
    })
}

fn cli(m: &common::TestMoat, args: &[&str]) -> String {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_moat"))
        .args(args)
        .env("MOAT_HOME", m.dir.path())
        .env_remove("MOAT_SHELL")
        .output()
        .unwrap();
    let stdout = String::from_utf8(out.stdout).expect("utf-8 stdout");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "moat {args:?} failed: {stdout} {stderr}"
    );
    assert_eq!(
        raw_control(&stderr),
        None,
        "raw control in stderr of {args:?}"
    );
    stdout
}

fn assert_escaped(what: &str, out: &str) {
    if let Some(c) = raw_control(out) {
        panic!("{what}: raw {c:?} reached the terminal: {out:?}");
    }
}

#[tokio::test]
async fn hostile_command_and_output_reach_the_terminal_escaped() {
    let Some(m) = common::moat("termesc", Config::default()).await else {
        return;
    };
    let session = m.key("a");
    // The command's text holds the sequences (in a comment), and so does its output.
    let command = format!(
        "printf '\\033[2J\\033]0;pwn\\007fake\\rreal \\342\\200\\256txt.exe\\n'; sleep 30 # {HOSTILE}"
    );
    let id = m.background("a", &command).await;
    tokio::time::sleep(Duration::from_millis(500)).await;

    let list = cli(&m, &["process", "list", "--session", &session]);
    assert_escaped("process list", &list);
    assert!(list.contains(&id), "{list}");
    assert!(
        list.contains("\\u{001b}[2J")
            && list.contains("\\u{001b}]0;pwn\\u{0007}")
            && list.contains("fake\\rreal")
            && list.contains("\\u{202e}txt.exe"),
        "escaped forms shown: {list}"
    );

    // JSON stays valid and decodes to the real command, but is terminal-safe as printed.
    let json = cli(&m, &["process", "list", "--session", &session, "--json"]);
    assert_escaped("process list --json", &json);
    let v: serde_json::Value = serde_json::from_str(json.trim()).unwrap();
    assert_eq!(v["details"]["sessions"][0]["command"], command.as_str());

    let poll = cli(&m, &["process", "poll", "--session", &session, "--id", &id]);
    assert_escaped("process poll", &poll);
    // A bare CR in the output is a line break by the time moat keeps it: nothing to act on.
    assert!(
        poll.contains("fake\nreal"),
        "bare CR made a line break: {poll}"
    );

    let log = cli(&m, &["process", "log", "--session", &session, "--id", &id]);
    assert_escaped("process log", &log);

    let sessions = cli(&m, &["sessions", "list"]);
    assert_escaped("sessions list", &sessions);
    assert!(sessions.contains(&session), "{sessions}");

    // A pending approval for the same hostile command.
    let r = m
        .exec_req(
            "a",
            ExecRequest {
                command: format!("echo hi # {HOSTILE}"),
                ask: Some("always".into()),
                ..Default::default()
            },
        )
        .await;
    assert_eq!(r.status(), Some(Status::ApprovalPending), "{}", r.text());
    let approvals = cli(&m, &["approvals", "list"]);
    assert_escaped("approvals list", &approvals);
    assert!(approvals.contains("\\u{202e}txt.exe"), "{approvals}");

    let kill = cli(&m, &["process", "kill", "--session", &session, "--id", &id]);
    assert_escaped("process kill", &kill);
}

#[test]
fn foreground_exec_output_reaches_the_terminal_escaped() {
    // `moat exec` prints the command's own (sanitized) output; a bare CR in it has become a
    // line break, so the terminal has nothing to act on.
    let rt = tokio::runtime::Runtime::new().unwrap();
    let Some(m) = rt.block_on(common::moat("termexec", Config::default())) else {
        return;
    };
    let session = m.key("a");
    let out = cli(
        &m,
        &[
            "exec",
            "--session",
            &session,
            "--",
            "printf 'ok \\033]0;pwn\\007 fake\\rreal\\r\\n\\342\\200\\256x\\n'",
        ],
    );
    assert_escaped("exec", &out);
    assert_eq!(out, "ok  fake\nreal\nx\n");
}

/// The class, not the payload: no file in src/cli prints except through `term.rs`.
#[test]
fn cli_prints_only_through_the_escaper() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/cli");
    let mut offenders = Vec::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.file_name().is_some_and(|n| n == "term.rs") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        for (i, line) in text.lines().enumerate() {
            let direct = [
                "println!",
                "eprintln!",
                "print!",
                "eprint!",
                "std::io::stdout",
                "std::io::stderr",
                "write!(std",
            ]
            .iter()
            .any(|m| {
                line.match_indices(m).any(|(at, _)| {
                    // `say_err!` etc. contain no match; `eprintln!` inside `say_…` cannot.
                    at == 0
                        || !line.as_bytes()[at - 1].is_ascii_alphanumeric()
                            && line.as_bytes()[at - 1] != b'_'
                })
            });
            if direct {
                offenders.push(format!("{}:{}: {line}", path.display(), i + 1));
            }
        }
    }
    assert!(
        offenders.is_empty(),
        "print through cli::term: {offenders:#?}"
    );
}
