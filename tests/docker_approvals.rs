//! Approvals for sandbox commands: an ask pattern asks, the approved plan runs once in the
//! session's container, a denied one never runs. A file the plan runs is bound by content
//! (issue 23): swapped between ask and approve, by the write_file tool or by a command, the
//! run is refused; unswapped, the approved bytes run from moat's read-only copy, which the
//! sandbox cannot change while it runs; allow-always is neither offered nor accepted, and an
//! exact-command entry does not let such a plan pass unasked.

mod common;

use std::time::Duration;

use moat::approvals::{ApprovalDecision, ApprovalError, Binding, Decider};
use moat::config::Config;
use moat::contract::Status;
use moat::policy::{Ask, Security};
use moat::tools::{FileCall, WriteRequest};
use sha2::Digest;

async fn event(
    rx: &mut tokio::sync::broadcast::Receiver<moat::process::SessionEvent>,
    id: &str,
) -> String {
    tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            let e = rx.recv().await.unwrap();
            if e.text.contains(id) && !e.text.starts_with("Exec running") {
                return e.text;
            }
        }
    })
    .await
    .expect("approval event")
}

#[tokio::test]
async fn sandbox_asks_then_runs_or_refuses() {
    let mut config = Config::default();
    config.policy.sandbox.ask_patterns = vec!["touch *".into()];
    let Some(m) = common::moat("approvals-ask", config).await else {
        return;
    };
    let op = Decider::operator("alice", "cli");
    let mut events = m.app.registry.events().subscribe();
    let r = m.exec("s", "touch /workspace/approved && echo done").await;
    assert_eq!(r.status(), Some(Status::ApprovalPending), "{}", r.text());
    assert_eq!(r.details.to_json()["host"], "sandbox");
    let id = r.details.approval_id().unwrap().to_string();
    m.app
        .approvals
        .decide(&id, ApprovalDecision::AllowOnce, &op)
        .unwrap();
    let ev = event(&mut events, &id).await;
    assert!(
        ev.starts_with(&format!("Exec finished (sandbox id={id}, session=")),
        "{ev}"
    );
    assert!(ev.ends_with("code 0)\ndone"), "{ev}");
    assert_eq!(
        m.docker_exec("s", "ls /workspace/approved"),
        "/workspace/approved\n"
    );

    let r = m.exec("s", "touch /workspace/refused").await;
    let id = r.details.approval_id().unwrap().to_string();
    m.app
        .approvals
        .decide(&id, ApprovalDecision::Deny, &op)
        .unwrap();
    let ev = event(&mut events, &id).await;
    assert!(
        ev.starts_with(&format!("Exec denied (sandbox id={id}, user-denied)")),
        "{ev}"
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        m.docker_exec("s", "ls /workspace/refused 2>&1 >/dev/null | wc -l"),
        "1\n"
    );
}

/// `security = "allowlist"`, `ask = "on-miss"` in the sandbox, with `cp` allowlisted so the
/// agent can swap a file by a command that runs unasked.
fn allowlist() -> Config {
    let mut config = Config::default();
    config.policy.sandbox.security = Security::Allowlist;
    config.policy.sandbox.ask = Ask::OnMiss;
    config.policy.sandbox.allowlist = vec!["/usr/bin/cp".into()];
    config
}

fn sha256(bytes: &[u8]) -> String {
    hex::encode(sha2::Sha256::digest(bytes))
}

/// The agent's write_file tool call.
async fn write_file(m: &common::TestMoat, session: &str, path: &str, content: &str) {
    let c = FileCall::Write(WriteRequest {
        path: path.into(),
        content: content.into(),
        create_dirs: Some(true),
    });
    let r = m.app.files.call(&m.key(session), &c).await.unwrap();
    assert_eq!(r.status(), Some(Status::Completed), "{}", r.text());
}

/// Asks for `command`; returns the approval id after checking what it binds and offers.
async fn ask(m: &common::TestMoat, command: &str, file: &str, content: &str) -> String {
    let r = m.exec("s", command).await;
    assert_eq!(r.status(), Some(Status::ApprovalPending), "{}", r.text());
    // Allow-always is not offered for a plan that runs a file the sandbox can write.
    assert_eq!(
        r.details.to_json()["allowedDecisions"],
        serde_json::json!(["allow-once", "deny"]),
        "{}",
        r.text()
    );
    let id = r.details.approval_id().unwrap().to_string();
    let row = m.app.approvals.get(&id).unwrap();
    let b: Binding = serde_json::from_str(&row.binding).unwrap();
    assert_eq!(b.files.len(), 1, "{b:?}");
    assert_eq!(b.files[0].path, file, "{b:?}");
    assert_eq!(b.files[0].sha256, sha256(content.as_bytes()), "{b:?}");
    assert_eq!(b.files[0].size, content.len() as u64);
    // What operators see: the JSON binding (`--json`, the HTTP API) and `moat approvals show`.
    let shown = m.app.approvals.to_json(&row);
    assert_eq!(
        shown["binding"]["files"][0]["sha256"],
        sha256(content.as_bytes())
    );
    let show = std::process::Command::new(env!("CARGO_BIN_EXE_moat"))
        .args(["approvals", "show", &id[..8]])
        .env("MOAT_HOME", m.dir.path())
        .output()
        .unwrap();
    let show = String::from_utf8_lossy(&show.stdout);
    let operand = b.files[0].operand.clone();
    assert!(
        show.contains(&format!(
            "file:      {operand} ({file}, {} bytes, sha256 {})",
            content.len(),
            sha256(content.as_bytes())
        )),
        "{show}"
    );
    id
}

const GOOD: &str = "#!/bin/sh\necho approved-ran \"$0\"\n";
const EVIL: &str = "#!/bin/sh\necho swapped-ran\ntouch /workspace/swapped\n";

#[tokio::test]
async fn a_sandbox_file_swapped_between_ask_and_approve_never_runs() {
    let Some(m) = common::moat("approvals-bound", allowlist()).await else {
        return;
    };
    let op = Decider::operator("alice", "cli");
    let mut events = m.app.registry.events().subscribe();

    // Swapped by the write_file tool: a program named by its path.
    write_file(&m, "s", "/workspace/mytool", GOOD).await;
    m.docker_exec("s", "chmod +x /workspace/mytool");
    let id = ask(&m, "/workspace/mytool x", "/workspace/mytool", GOOD).await;
    let refused = m
        .app
        .approvals
        .decide(&id, ApprovalDecision::AllowAlways, &op)
        .unwrap_err();
    assert!(
        matches!(refused, ApprovalError::DecisionUnavailable { .. }),
        "{refused}"
    );
    write_file(&m, "s", "/workspace/mytool", EVIL).await;
    m.app
        .approvals
        .decide(&id, ApprovalDecision::AllowOnce, &op)
        .unwrap();
    let ev = event(&mut events, &id).await;
    assert!(
        ev.starts_with(&format!(
            "Exec denied (sandbox id={id}, plan-changed: content of /workspace/mytool)"
        )),
        "{ev}"
    );

    // Swapped by a command (an allowlisted `cp`, which runs unasked): a script operand.
    write_file(&m, "s", "/workspace/run.sh", GOOD).await;
    write_file(&m, "s", "/workspace/evil.sh", EVIL).await;
    let id = ask(&m, "sh run.sh", "/workspace/run.sh", GOOD).await;
    let r = m.exec("s", "cp evil.sh run.sh").await;
    assert_eq!(r.status(), Some(Status::Completed), "{}", r.text());
    m.app
        .approvals
        .decide(&id, ApprovalDecision::AllowOnce, &op)
        .unwrap();
    let ev = event(&mut events, &id).await;
    assert!(
        ev.starts_with(&format!(
            "Exec denied (sandbox id={id}, plan-changed: content of run.sh)"
        )),
        "{ev}"
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        m.docker_exec("s", "ls /workspace/swapped 2>&1 >/dev/null | wc -l"),
        "1\n",
        "the swapped content never ran"
    );
    assert_eq!(
        m.docker_exec("s", "ls /run/moat | grep -c approved-"),
        "0\n"
    );
}

#[tokio::test]
async fn an_unswapped_sandbox_approval_runs_moats_copy_which_the_sandbox_cannot_change() {
    let Some(m) = common::moat("approvals-copy", allowlist()).await else {
        return;
    };
    let op = Decider::operator("alice", "cli");
    let mut events = m.app.registry.events().subscribe();
    // It waits for a mark, so the test can attack the copy while it runs.
    let slow =
        "#!/bin/sh\nwhile [ ! -e /workspace/go ]; do sleep 0.1; done\necho approved-ran \"$0\"\n";
    write_file(&m, "s", "/workspace/mytool", slow).await;
    m.docker_exec("s", "chmod +x /workspace/mytool");
    let id = ask(&m, "/workspace/mytool x", "/workspace/mytool", slow).await;
    m.app
        .approvals
        .decide(&id, ApprovalDecision::AllowOnce, &op)
        .unwrap();
    let copy = format!("/run/moat/approved-{id}/0/mytool");
    let mut waited = 0;
    while m.docker_exec("s", &format!("test -f {copy} && echo y")) != "y\n" {
        waited += 1;
        assert!(waited < 100, "the copy never appeared");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The sandbox user (the container's) can neither write, replace nor remove the copy.
    let tries = m.docker_exec(
        "s",
        &format!(
            "printf 'echo evil' > {copy}; echo w=$?; rm -f {copy}; echo rm=$?; \
             cp /workspace/mytool {copy}.x; echo cp=$?; mv /workspace/mytool {copy}; echo mv=$?; \
             chmod 777 {copy}; echo chmod=$?"
        ),
    );
    for t in ["w", "rm", "cp", "mv", "chmod"] {
        assert!(tries.contains(&format!("{t}=")), "{t}: {tries}");
        assert!(!tries.contains(&format!("{t}=0")), "{t}: {tries}");
    }
    // Its own file changes too: the run goes on with the approved bytes.
    write_file(&m, "s", "/workspace/mytool", EVIL).await;
    m.docker_exec("s", "touch /workspace/go");
    let ev = event(&mut events, &id).await;
    assert!(
        ev.starts_with(&format!("Exec finished (sandbox id={id}, session=")),
        "{ev}"
    );
    assert!(
        ev.ends_with(&format!("code 0)\napproved-ran {copy}")),
        "{ev}"
    );
    assert_eq!(
        m.app.approvals.get(&id).unwrap().status,
        moat::store::ApprovalStatus::Used
    );
    // The copy is removed once the run has ended: poll for it rather than guess a delay (and
    // ride out a `docker exec` that a loaded engine answers with nothing).
    let mut left = String::new();
    for _ in 0..50 {
        left = m.docker_exec("s", "ls /run/moat | grep -c approved-");
        if left == "0\n" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(left, "0\n");
    assert_eq!(
        m.docker_exec("s", "ls /workspace/swapped 2>&1 >/dev/null | wc -l"),
        "1\n"
    );

    // An exact-command entry names the text, not the content: the plan still asks.
    m.app
        .approvals
        .allowlist_add_command(
            "sandbox",
            "/workspace/mytool x",
            &m.key("s"),
            "/workspace",
            &op,
        )
        .unwrap();
    let r = m.exec("s", "/workspace/mytool x").await;
    assert_eq!(r.status(), Some(Status::ApprovalPending), "{}", r.text());
    // A file moat cannot bind is refused at once, naming it.
    let r = m
        .app
        .exec
        .run(
            &m.key("s"),
            &moat::tools::ExecRequest {
                command: "sh missing.sh".into(),
                ..Default::default()
            },
            true,
        )
        .await
        .unwrap_err()
        .to_string();
    assert!(
        r.starts_with(
            "bind file `missing.sh` of a sandbox command: /workspace/missing.sh is not a regular file"
        ),
        "{r}"
    );
}

/// The script of `perl -l FILE` and `sed -nf FILE` is bound like any other (the second
/// hostile review: perl's `-l` was read as taking the next word, and a cluster ending in `f`
/// was not seen, so nothing was bound and allow-always was offered); an attached `-fFILE` is
/// refused rather than run unbound.
#[tokio::test]
async fn scripts_behind_clustered_or_digit_options_are_bound() {
    let Some(m) = common::moat("approvals-opts", allowlist()).await else {
        return;
    };
    let pl = "print qq(harmless\\n);\n";
    write_file(&m, "s", "/workspace/x.pl", pl).await;
    ask(&m, "perl -l ./x.pl", "/workspace/./x.pl", pl).await;
    let sed = "p\n";
    write_file(&m, "s", "/workspace/x.sed", sed).await;
    write_file(&m, "s", "/workspace/in", "a\n").await;
    ask(&m, "sed -nf ./x.sed in", "/workspace/./x.sed", sed).await;
    let err = m
        .app
        .exec
        .run(
            &m.key("s"),
            &moat::tools::ExecRequest {
                command: "sed -nf./x.sed in".into(),
                ..Default::default()
            },
            true,
        )
        .await
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(err.contains("bind file"), "{err}");
}

/// An interpreter behind another name binds the script it runs: `./py x.py`, with `./py` a
/// workspace link to python3, is judged by the policy as python (it knows a command by its
/// symlink target), and the binding now looks the interpreter up by the same names. By the
/// typed name alone it bound `./py` and not `x.py`, which could be swapped after approval.
#[tokio::test]
async fn a_script_run_by_a_linked_interpreter_is_bound() {
    let Some(m) = common::moat("linked-interp", allowlist()).await else {
        return;
    };
    let op = Decider::operator("alice", "cli");
    let mut events = m.app.registry.events().subscribe();
    let good = "print('approved-ran')\n";
    let evil = "open('/workspace/swapped', 'w')\n";
    m.exec("s", "true").await;
    m.docker_exec("s", "ln -sf /usr/bin/python3 /workspace/py");
    // Control: through the link, python runs whatever x.py holds.
    write_file(&m, "s", "/workspace/x.py", evil).await;
    m.docker_exec("s", "cd /workspace && ./py x.py");
    assert_eq!(
        m.docker_exec("s", "test -e /workspace/swapped && echo yes"),
        "yes\n",
        "the swapped script runs through the link"
    );
    m.docker_exec("s", "rm -f /workspace/swapped");

    write_file(&m, "s", "/workspace/x.py", good).await;
    let r = m.exec("s", "./py x.py").await;
    assert_eq!(r.status(), Some(Status::ApprovalPending), "{}", r.text());
    let id = r.details.approval_id().unwrap().to_string();
    let row = m.app.approvals.get(&id).unwrap();
    let b: Binding = serde_json::from_str(&row.binding).unwrap();
    let operands: Vec<&str> = b.files.iter().map(|f| f.operand.as_str()).collect();
    assert_eq!(operands, ["./py", "x.py"], "{b:?}");
    assert_eq!(b.files[1].sha256, sha256(good.as_bytes()));
    write_file(&m, "s", "/workspace/x.py", evil).await;
    m.app
        .approvals
        .decide(&id, ApprovalDecision::AllowOnce, &op)
        .unwrap();
    let ev = event(&mut events, &id).await;
    assert!(
        ev.starts_with(&format!(
            "Exec denied (sandbox id={id}, plan-changed: content of x.py)"
        )),
        "{ev}"
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        m.docker_exec("s", "ls /workspace/swapped 2>&1 >/dev/null | wc -l"),
        "1\n",
        "the swapped script never ran"
    );
}
