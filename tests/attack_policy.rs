//! The second security review's policy attacks against the real engine: request env steering
//! allowlisted programs, inline eval from stdin / descriptors / REPLs, git aliases, and deny
//! patterns in full mode dodged by aliases and symlinks. Each attack aims at writing
//! `/tmp/pwned` in the sandbox; each test shows the payload works when run directly, that moat
//! refuses or asks, and that the marker never appears.

mod common;

use std::collections::BTreeMap;

use moat::approvals::{ApprovalDecision, Decider};
use moat::config::Config;
use moat::contract::{Status, ToolResult};
use moat::policy::{Ask, Security};
use moat::tools::ExecRequest;

const MARKER: &str = "/tmp/pwned";

fn allowlist_config(ask: Ask) -> Config {
    let mut config = Config::default();
    let policy = &mut config.policy.sandbox;
    policy.security = Security::Allowlist;
    policy.ask = ask;
    policy.allowlist = [
        "git", "python3", "perl", "sh", "bash", "dash", "awk", "sed", "ls", "cat", "touch",
    ]
    .iter()
    .map(|s| (*s).to_string())
    .collect();
    config
}

fn request(command: &str, env: &[(&str, &str)]) -> ExecRequest {
    ExecRequest {
        command: command.into(),
        env: env
            .iter()
            .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
            .collect::<BTreeMap<_, _>>(),
        ..Default::default()
    }
}

fn pwned(m: &common::TestMoat) -> bool {
    m.docker_exec("a", &format!("test -e {MARKER} && echo yes")) == "yes\n"
}

fn clear(m: &common::TestMoat) {
    m.docker_exec("a", &format!("rm -f {MARKER}"));
    assert!(!pwned(m));
}

fn reason(r: &ToolResult) -> String {
    r.details.to_json()["reason"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

fn assert_denied(r: &ToolResult, needle: &str) {
    assert_eq!(r.status(), Some(Status::Failed), "{}", r.text());
    assert!(r.text().starts_with("Exec denied"), "{}", r.text());
    assert!(reason(r).contains(needle), "{} lacks {needle:?}", reason(r));
}

#[tokio::test]
async fn request_env_cannot_steer_allowlisted_programs() {
    let Some(m) = common::moat("t-atk-env", allowlist_config(Ask::OnMiss)).await else {
        return;
    };
    m.exec("a", "true").await;
    m.docker_exec("a", "git init -q /workspace/repo");
    let git_alias: &[(&str, &str)] = &[
        ("GIT_CONFIG_COUNT", "1"),
        ("GIT_CONFIG_KEY_0", "alias.x"),
        ("GIT_CONFIG_VALUE_0", "!id > /tmp/pwned"),
    ];
    // The payload is real: set directly, the env makes git run `id`.
    let direct: String = git_alias
        .iter()
        .map(|(k, v)| format!("{k}='{v}' "))
        .collect();
    m.docker_exec("a", &format!("cd /workspace/repo && env {direct} git x"));
    assert!(pwned(&m), "the git alias payload works when run directly");
    clear(&m);
    let r = m
        .exec_req("a", request("git -C /workspace/repo x", git_alias))
        .await;
    assert_denied(
        &r,
        "GIT_CONFIG_COUNT cannot be set under security allowlist",
    );
    let r = m
        .exec_req("a", request("git -C /workspace/repo status", git_alias))
        .await;
    assert_denied(&r, "GIT_CONFIG_");

    // HOME pointing at a profile the agent wrote.
    m.docker_exec("a", "echo 'id > /tmp/pwned' > /workspace/.profile");
    m.docker_exec("a", "HOME=/workspace sh -lc true");
    assert!(pwned(&m), "the profile payload works when run directly");
    clear(&m);
    let r = m
        .exec_req("a", request("ls", &[("HOME", "/workspace")]))
        .await;
    assert_denied(&r, "request env HOME cannot be set");

    // PYTHONWARNINGS imports a module that opens BROWSER.
    let python: &[(&str, &str)] = &[
        ("PYTHONWARNINGS", "all:0:antigravity.x:0:0"),
        ("BROWSER", "id > /tmp/pwned #%s"),
    ];
    let r = m.exec_req("a", request("python3 /dev/null", python)).await;
    assert_denied(&r, "cannot be set under security allowlist");
    let r = m
        .exec_req("a", request("ls", &[("LD_PRELOAD", "/workspace/x.so")]))
        .await;
    assert_denied(&r, "request env LD_PRELOAD cannot be set");
    let r = m
        .exec_req("a", request("ls", &[("PATH", "/workspace")]))
        .await;
    assert_denied(&r, "PATH decides which programs run");

    // Another name is a miss: asked here (ask = on-miss), with the name in the reason.
    let r = m.exec_req("a", request("ls", &[("FOO", "bar")])).await;
    assert_eq!(r.status(), Some(Status::ApprovalPending), "{}", r.text());
    assert!(reason(&r).contains("request env FOO=bar is not on the env allowlist"));
    // Presentation settings pass and reach the command.
    let r = m
        .exec_req("a", request("ls /", &[("TZ", "UTC"), ("LANG", "C")]))
        .await;
    assert_eq!(r.status(), Some(Status::Completed), "{}", r.text());
    assert!(!pwned(&m), "no attack reached its goal");
}

/// `TAR_OPTIONS` makes an allowlisted `tar` run a shell (`--checkpoint-action=exec`). The
/// host executor always refused it; the policy's own list lacked it, so in the sandbox it was
/// a miss an operator could approve or list in `env_allow`. Both now read one table
/// (src/policy/env_names.rs): refused outright, never asked.
#[tokio::test]
async fn tar_options_is_refused_in_the_sandbox_as_on_the_host() {
    let payload: &[(&str, &str)] = &[(
        "TAR_OPTIONS",
        "--checkpoint=1 --checkpoint-action=exec=id>/tmp/pwned",
    )];
    let command = "tar -cf /dev/null f";
    // Control: through moat in full mode (the request env is not judged there), the variable
    // makes tar run `id`.
    let Some(full) = common::moat("t-atk-tarf", Config::default()).await else {
        return;
    };
    full.exec("a", "echo x > f").await;
    let r = full.exec_req("a", request(command, payload)).await;
    assert_eq!(r.status(), Some(Status::Completed), "{}", r.text());
    assert!(
        pwned(&full),
        "the TAR_OPTIONS payload runs code through tar"
    );
    drop(full);

    let mut config = allowlist_config(Ask::OnMiss);
    config.policy.sandbox.allowlist.push("tar".into());
    let Some(m) = common::moat("t-atk-tar", config.clone()).await else {
        return;
    };
    m.exec("a", "true").await;
    m.docker_exec("a", "echo x > /workspace/f");
    // The same payload under the allowlist: refused, not asked (ask = on-miss asks a miss).
    let r = m.exec_req("a", request(command, payload)).await;
    assert_denied(
        &r,
        "request env TAR_OPTIONS cannot be set under security allowlist",
    );
    assert!(r.details.approval_id().is_none(), "{}", r.text());
    // Any `*_OPTIONS` name, in any case.
    let r = m
        .exec_req("a", request(command, &[("tar_options", payload[0].1)]))
        .await;
    assert_denied(&r, "cannot be set under security allowlist");
    // Without the variable tar is allowed and runs.
    let r = m.exec_req("a", request(command, &[])).await;
    assert_eq!(r.status(), Some(Status::Completed), "{}", r.text());
    assert!(!pwned(&m), "the payload never ran");
    // An operator cannot list it either.
    config.policy.sandbox.env_allow = vec!["TAR_OPTIONS".into()];
    let err = config.policy.sandbox.validate().unwrap_err().to_string();
    assert!(err.contains("TAR_OPTIONS"), "{err}");
}

#[tokio::test]
async fn inline_eval_from_stdin_descriptors_and_repls_asks() {
    // Ask off: a miss would be refused, so an approval here can only come from inline eval.
    let Some(m) = common::moat("t-atk-eval", allowlist_config(Ask::Off)).await else {
        return;
    };
    m.exec("a", "true").await;
    let payload = "import os; os.system('id > /tmp/pwned')";
    m.docker_exec("a", &format!("python3 /dev/stdin <<'EOF'\n{payload}\nEOF"));
    assert!(pwned(&m), "the stdin payload works when run directly");
    clear(&m);
    let rows: Vec<(String, &str)> = vec![
        (
            format!("python3 /dev/stdin <<'EOF'\n{payload}\nEOF"),
            "inline-eval: python3 reading its program from /dev/stdin",
        ),
        (
            format!("python3 /proc/self/fd/0 <<'EOF'\n{payload}\nEOF"),
            "inline-eval: python3 reading its program from /proc/self/fd/0",
        ),
        (
            format!("python3 -m code <<'EOF'\n{payload}\nEOF"),
            "inline-eval: python3 -m code",
        ),
        (
            format!("python3 -i /dev/null <<'EOF'\n{payload}\nEOF"),
            "inline-eval: python3 -i",
        ),
        (
            "perl '-MPOSIX;system(q(id > /tmp/pwned))' /dev/null".into(),
            "inline-eval: perl -M",
        ),
        (
            "sh /dev/stdin <<'EOF'\nid > /tmp/pwned\nEOF".into(),
            "inline-eval: sh reading its program from /dev/stdin",
        ),
        (
            "sh -s <<'EOF'\nid > /tmp/pwned\nEOF".into(),
            "inline-eval: sh -s",
        ),
        (
            "awk -f /dev/stdin <<'EOF'\nBEGIN { system(\"id > /tmp/pwned\") }\nEOF".into(),
            "inline-eval: awk reading its program from /dev/stdin",
        ),
        (
            "sed -f /dev/stdin /etc/hostname <<'EOF'\n1e id > /tmp/pwned\nEOF".into(),
            "inline-eval: sed reading its program from /dev/stdin",
        ),
        ("perl -d /dev/null".into(), "inline-eval: perl -d"),
    ];
    for (command, needle) in &rows {
        let r = m.exec("a", command).await;
        assert_eq!(
            r.status(),
            Some(Status::ApprovalPending),
            "{command:?}: {}",
            r.text()
        );
        assert!(reason(&r).contains(needle), "{command:?}: {}", reason(&r));
        // Nothing to remember: allow-always is not offered.
        let offered = r.details.to_json()["allowedDecisions"].to_string();
        assert!(!offered.contains("allow-always"), "{command:?}: {offered}");
    }
    // A script name that links to stdin reads stdin. The approval would bind that name's file
    // by content (docs/approvals.md, "Files a plan runs"), and a link to a device is no file:
    // refused at once, before anything is asked or run.
    m.docker_exec("a", "ln -sf /dev/stdin /workspace/tool.py");
    let command = format!("python3 tool.py <<'EOF'\n{payload}\nEOF");
    let err = m
        .app
        .exec
        .run(
            &m.key("a"),
            &moat::tools::ExecRequest {
                command: command.clone(),
                ..Default::default()
            },
            true,
        )
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with(
            "bind file `tool.py` of a sandbox command: /workspace/tool.py is not a regular file"
        ),
        "{command:?}: {err}"
    );
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    assert!(!pwned(&m), "no inline eval ran unasked");

    // An operator's allow-always cannot be stored for it; allow-once runs it once, and the
    // same command asks again afterwards.
    let op = Decider::operator("alice", "cli");
    let command = "python3 -c 'open(\"/tmp/once\", \"a\").write(\"x\")'";
    let r = m.exec("a", command).await;
    assert_eq!(r.status(), Some(Status::ApprovalPending), "{}", r.text());
    let id = r.details.approval_id().unwrap().to_string();
    assert!(m
        .app
        .approvals
        .decide(&id, ApprovalDecision::AllowAlways, &op)
        .is_err());
    m.app
        .approvals
        .decide(&id, ApprovalDecision::AllowOnce, &op)
        .unwrap();
    for _ in 0..100 {
        if m.docker_exec("a", "cat /tmp/once 2>/dev/null") == "x" {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(m.docker_exec("a", "cat /tmp/once"), "x");
    let r = m.exec("a", command).await;
    assert_eq!(r.status(), Some(Status::ApprovalPending), "{}", r.text());
}

#[tokio::test]
async fn git_aliases_are_other_programs() {
    let Some(m) = common::moat("t-atk-git", allowlist_config(Ask::Off)).await else {
        return;
    };
    m.exec("a", "true").await;
    m.docker_exec("a", "git init -q /workspace/repo");
    // Defining the alias through git itself is refused…
    let r = m
        .exec(
            "a",
            "git -C /workspace/repo config alias.x '!id > /tmp/pwned'",
        )
        .await;
    assert_denied(&r, "git config alias.x");
    // …and an alias planted any other way is not git.
    m.docker_exec(
        "a",
        "git -C /workspace/repo config alias.x '!id > /tmp/pwned'",
    );
    m.docker_exec("a", "cd /workspace/repo && git x");
    assert!(pwned(&m), "the alias payload works when run directly");
    clear(&m);
    let r = m.exec("a", "git -C /workspace/repo x").await;
    assert_denied(&r, "git x is not one of git's own commands");
    for (command, needle) in [
        (
            "git -C /workspace/repo -c alias.y='!id > /tmp/pwned' y",
            "git -c alias.y",
        ),
        (
            "git -C /workspace/repo -c core.pager='id > /tmp/pwned' -p log",
            "git -c core.pager",
        ),
        (
            "git -C /workspace/repo -c core.fsmonitor='id > /tmp/pwned' status",
            "git -c core.fsmonitor",
        ),
    ] {
        let r = m.exec("a", command).await;
        assert_denied(&r, needle);
    }
    let r = m.exec("a", "git -C /workspace/repo status --short").await;
    assert_eq!(r.status(), Some(Status::Completed), "{}", r.text());
    assert!(!pwned(&m), "no alias ran");
}

#[tokio::test]
async fn deny_patterns_see_aliases_and_symlinks_in_full_mode() {
    let mut config = Config::default();
    config.policy.sandbox.deny_patterns = vec!["sudo *".into(), "touch *".into()];
    let Some(m) = common::moat("t-atk-full", config).await else {
        return;
    };
    m.exec("a", "true").await;
    // dash expands an alias defined on an earlier line: `x` would be touch.
    m.docker_exec("a", "cd /workspace && sh -c 'alias x=touch\nx /tmp/pwned'");
    assert!(pwned(&m), "the alias payload works when run directly");
    clear(&m);
    for (command, needle) in [
        (
            "alias x=sudo\nx id",
            "argv patterns cannot see into this command",
        ),
        (
            "alias x=touch\nx /tmp/pwned",
            "argv patterns cannot see into this command (alias definition",
        ),
        ("f() { touch \"$@\"; }\nf /tmp/pwned", "touch *"),
    ] {
        let r = m.exec("a", command).await;
        assert_denied(&r, needle);
    }
    // A symlink to a denied program is that program.
    m.docker_exec(
        "a",
        "ln -sf /usr/bin/touch /workspace/t && ln -sf /usr/bin/sudo /workspace/s",
    );
    for (command, needle) in [
        ("/workspace/t /tmp/pwned", "deny-pattern: touch *"),
        ("./t /tmp/pwned", "deny-pattern: touch *"),
        ("/workspace/s id", "deny-pattern: sudo *"),
        ("nice ./t /tmp/pwned", "deny-pattern: touch *"),
    ] {
        let r = m.exec("a", command).await;
        assert_denied(&r, needle);
    }
    let r = m.exec("a", "echo fine").await;
    assert_eq!(r.status(), Some(Status::Completed), "{}", r.text());
    assert!(!pwned(&m), "no denied program ran");
}

/// Writes `config`'s sandbox policy as the moat.toml `moat policy explain` reads.
fn explain_home(policy: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("moat.toml"), policy).unwrap();
    dir
}

fn explain(home: &std::path::Path, command: &str, env: &[(&str, &str)]) -> serde_json::Value {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_moat"));
    cmd.env("MOAT_HOME", home)
        .env_remove("MOAT_SESSION")
        .args(["policy", "explain", "--json"]);
    for (k, v) in env {
        cmd.arg("--env").arg(format!("{k}={v}"));
    }
    let out = cmd.arg("--").arg(command).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[tokio::test]
async fn explain_and_exec_agree_on_inline_eval_and_env() {
    let toml = "[policy.sandbox]\nsecurity = \"allowlist\"\nask = \"off\"\n\
                allowlist = [\"git\", \"python3\", \"perl\", \"sh\", \"bash\", \"dash\", \
                \"awk\", \"sed\", \"ls\", \"cat\", \"touch\"]\nenv_allow = [\"MY_FLAG\"]\n";
    let home = explain_home(toml);
    let mut config = allowlist_config(Ask::Off);
    config.policy.sandbox.env_allow = vec!["MY_FLAG".into()];
    let Some(m) = common::moat("t-atk-agree", config).await else {
        return;
    };
    type Env<'a> = &'a [(&'a str, &'a str)];
    let rows: &[(&str, Env)] = &[
        ("python3 /dev/stdin <<'EOF'\nprint(1)\nEOF", &[]),
        ("python3 /proc/self/fd/0 <<'EOF'\nprint(1)\nEOF", &[]),
        ("python3 -m code <<'EOF'\nprint(1)\nEOF", &[]),
        ("python3 -i /dev/null <<'EOF'\nprint(1)\nEOF", &[]),
        ("python3 -c 'print(1)'", &[]),
        ("perl '-MPOSIX;system(q(true))' /dev/null", &[]),
        ("perl -d /dev/null", &[]),
        ("sh /dev/stdin", &[]),
        ("sh -s", &[]),
        ("echo x | sh", &[]),
        ("awk -f /dev/stdin", &[]),
        ("sed -f /dev/stdin", &[]),
        ("awk '{print}'", &[]),
        ("git x", &[]),
        ("git -c core.pager=id log", &[]),
        ("ls", &[("GIT_CONFIG_COUNT", "1")]),
        ("ls", &[("HOME", "/workspace")]),
        ("ls", &[("LD_PRELOAD", "/x.so")]),
        ("ls", &[("PATH", "/workspace")]),
        ("ls", &[("PYTHONWARNINGS", "x"), ("BROWSER", "y")]),
        ("ls", &[("FOO", "bar")]),
        ("ls", &[("MY_FLAG", "1"), ("LANG", "C")]),
        ("ls /", &[]),
    ];
    for (command, env) in rows {
        let r = m.exec_req("a", request(command, env)).await;
        let e = explain(home.path(), command, env);
        let exec_decision = match r.status() {
            Some(Status::ApprovalPending) => "ask",
            Some(Status::Failed) if r.text().starts_with("Exec denied") => "deny",
            _ => "allow",
        };
        assert_eq!(
            e["decision"],
            exec_decision,
            "{command:?} {env:?}: explain {e} vs exec {}",
            r.text()
        );
        let explained = e["reason"].as_str().unwrap_or_default();
        assert_eq!(explained, reason(&r), "{command:?} {env:?}");
    }
}
