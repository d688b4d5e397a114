//! `moat approvals`, `moat allowlist`, `moat skills` and skill-aware `policy explain`, as an
//! operator runs them (no engine needed).

use std::process::{Command, Output};

fn moat(home: &std::path::Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_moat"))
        .env("MOAT_HOME", home)
        .env_remove("MOAT_SESSION")
        .env_remove("MOAT_SHELL")
        .args(args)
        .output()
        .unwrap()
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Registers a pending approval the way a moat would, through the library.
fn pending(home: &std::path::Path, command: &str) -> String {
    use moat::approvals::{ApprovalDecision, Approvals, Binding, NewApproval};
    let store = std::sync::Arc::new(moat::store::Store::open(&home.join("state.db")).unwrap());
    let a = Approvals::new(store, vec![]);
    let row = a
        .create(NewApproval {
            session: "main".into(),
            requester: "cli:alice".into(),
            agent: None,
            command: command.into(),
            binding: Binding {
                target: moat::contract::ApprovalTarget::Host,
                plan: command.into(),
                argv: vec![],
                resolved: vec![],
                cwd: "/tmp".into(),
                env_hash: "0".into(),
                env: vec!["LANG=C".into()],
                files: vec![],
            },
            request: "{}".into(),
            reason: "allowlist miss".into(),
            allowed: vec![ApprovalDecision::AllowOnce, ApprovalDecision::Deny],
            persist: vec![],
            covered: false,
            timeout_ms: 60_000,
        })
        .unwrap();
    row.id
}

#[test]
fn approvals_list_show_approve_deny() {
    let dir = tempfile::tempdir().unwrap();
    let long = format!("echo \u{202e}hidden {}", "x".repeat(300));
    let id = pending(dir.path(), &long);
    let other = pending(dir.path(), "rm -rf /tmp/x");
    let out = moat(dir.path(), &["approvals", "list"]);
    let t = text(&out);
    assert!(out.status.success(), "{t}");
    assert!(t.contains(&id[..8]) && t.contains(&other[..8]), "{t}");
    assert!(
        t.contains("\\u{202e}hidden") && t.contains(&"x".repeat(300)),
        "never truncated, escaped: {t}"
    );
    let t = text(&moat(dir.path(), &["approvals", "show", &id[..8]]));
    assert!(t.contains("approval-request"), "{t}");
    // Every variable the command gets is shown, not only a hash.
    assert!(t.contains("env:       1 variables\n  LANG=C\n"), "{t}");
    let t = text(&moat(
        dir.path(),
        &["approvals", "show", "--json", &id[..8]],
    ));
    assert!(t.contains("\"LANG=C\""), "{t}");

    let out = moat(dir.path(), &["approvals", "approve", &id[..8]]);
    assert!(out.status.success(), "{}", text(&out));
    let again = moat(dir.path(), &["approvals", "approve", &id[..8]]);
    assert!(!again.status.success());
    assert!(
        text(&again).contains("approved already"),
        "{}",
        text(&again)
    );
    let out = moat(dir.path(), &["approvals", "deny", &other]);
    assert!(out.status.success(), "{}", text(&out));
    let t = text(&moat(dir.path(), &["approvals", "list", "--all", "--json"]));
    let v: serde_json::Value = serde_json::from_str(&t).unwrap();
    let statuses: Vec<&str> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["status"].as_str().unwrap())
        .collect();
    assert!(
        statuses.contains(&"approved") && statuses.contains(&"denied"),
        "{t}"
    );
    let t = text(&moat(dir.path(), &["approvals", "audit"]));
    assert!(t.contains("approval-decision"), "{t}");
}

#[test]
fn a_moat_command_cannot_decide() {
    let dir = tempfile::tempdir().unwrap();
    let id = pending(dir.path(), "true");
    let out = Command::new(env!("CARGO_BIN_EXE_moat"))
        .env("MOAT_HOME", dir.path())
        .env("MOAT_SHELL", "exec")
        .args(["approvals", "approve", &id])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(text(&out).contains("MOAT_SHELL"), "{}", text(&out));
}

#[test]
fn allowlist_add_list_rm_refuses_interpreters() {
    let dir = tempfile::tempdir().unwrap();
    let out = moat(dir.path(), &["allowlist", "add", "/usr/bin/jq"]);
    assert!(out.status.success(), "{}", text(&out));
    for blanket in ["/bin/sh", "/usr/bin/python3"] {
        let out = moat(dir.path(), &["allowlist", "add", blanket]);
        assert!(!out.status.success());
        assert!(text(&out).contains("interpreter"), "{}", text(&out));
    }
    // An exact command is scoped: it needs the session and the workdir it is valid in.
    let out = moat(
        dir.path(),
        &["allowlist", "add", "--command", "sh -c 'make test'"],
    );
    assert!(!out.status.success(), "{}", text(&out));
    let wd = dir.path().canonicalize().unwrap().display().to_string();
    let out = moat(
        dir.path(),
        &[
            "allowlist",
            "add",
            "--command",
            "--session",
            "main",
            "--workdir",
            &wd,
            "sh -c 'make test'",
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
    let t = text(&moat(dir.path(), &["allowlist", "list"]));
    assert!(
        t.contains("/usr/bin/jq")
            && t.contains(&format!(
                "exact command: sh -c 'make test' (session main, cwd {wd})"
            )),
        "{t}"
    );
    assert!(moat(dir.path(), &["allowlist", "rm", "/usr/bin/jq"])
        .status
        .success());
    assert!(!text(&moat(dir.path(), &["allowlist", "list"])).contains("/usr/bin/jq"));
}

#[test]
fn enabled_skills_are_named_by_explain() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("moat.toml"),
        "[skills.sysinfo]\nbins = [\"uname\"]\n",
    )
    .unwrap();
    let explain = |home: &std::path::Path| {
        let out = moat(
            home,
            &[
                "policy", "explain", "--host", "host", "--json", "--", "uname -a",
            ],
        );
        assert!(out.status.success(), "{}", text(&out));
        serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()
    };
    assert_ne!(explain(dir.path())["decision"], "allow");
    assert!(moat(dir.path(), &["skills", "enable", "sysinfo"])
        .status
        .success());
    let v = explain(dir.path());
    assert_eq!(v["decision"], "allow", "{v}");
    let rule = v["segments"][0]["rule"].as_str().unwrap();
    assert!(
        rule.starts_with("skill: sysinfo (") && rule.contains("/uname)"),
        "{rule}"
    );
    let t = text(&moat(dir.path(), &["skills", "list"]));
    assert!(t.contains("sysinfo") && t.contains("enabled"), "{t}");
    assert!(moat(dir.path(), &["skills", "disable", "sysinfo"])
        .status
        .success());
    assert_ne!(explain(dir.path())["decision"], "allow");
    assert!(!moat(dir.path(), &["skills", "enable", "nope"])
        .status
        .success());
}
