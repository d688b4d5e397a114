//! Attacks on the host boundary through an approval or an allowlisted host tool, each written
//! as the attack and checked not to reach its goal (docs/security.md, "Host commands"). They
//! run real commands on this machine; no engine needed.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use common::host::{config, event_with, moat, req, HostMoat};
use moat::approvals::{ApprovalDecision, ApprovalError, Decider};
use moat::config::{Config, ElevatedLevel, SecretConfig};
use moat::contract::Status;
use moat::tools::{Caller, ExecRequest};
use sha2::Digest;

fn op() -> Decider {
    Decider::operator("alice", "cli")
}

fn which(name: &str) -> String {
    let out = std::process::Command::new("sh")
        .args(["-c", &format!("command -v {name}")])
        .output()
        .unwrap();
    let p = String::from_utf8(out.stdout).unwrap().trim().to_string();
    assert!(p.starts_with('/'), "{name} is needed on this machine");
    std::fs::canonicalize(p).unwrap().display().to_string()
}

/// Host policy on (level off), with `tools` allowlisted by their resolved paths and each given
/// an argv profile that takes any of `flags` and the subcommands `status`/`log`, so the
/// allowlist alone would run them unasked (docs/policy.md, "Argv profiles"): what these tests
/// show is the rule on top of it.
fn allowlisting(tools: &[&str]) -> Config {
    let mut c = config(ElevatedLevel::Off);
    c.policy.host.allowlist = tools.iter().map(|t| which(t)).collect();
    for tool in tools {
        c.policy.host.argv_profiles.insert(
            (*tool).to_string(),
            moat::policy::BinProfile {
                allowed_flags: vec!["--version".into(), "-h".into()],
                value_flags: vec!["-C".into(), "--git-dir".into()],
                max_positional: 4,
                ..Default::default()
            },
        );
    }
    c
}

async fn refused(m: &HostMoat, session: &str, r: &ExecRequest) -> String {
    m.app
        .exec
        .run_for(&Caller::cli(), session, r, true)
        .await
        .err()
        .unwrap_or_else(|| panic!("{:?} was not refused", r.command))
        .to_string()
}

fn with_env(command: &str, cwd: &Path, env: &[(&str, &str)]) -> ExecRequest {
    ExecRequest {
        workdir: Some(cwd.display().to_string()),
        env: env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect::<BTreeMap<_, _>>(),
        ..req(command)
    }
}

#[tokio::test]
async fn env_that_makes_an_allowlisted_tool_run_anything_is_refused_by_name() {
    let m = moat(allowlisting(&["tar", "git"]));
    let dir = m.scratch();
    std::fs::write(dir.join("f"), "x").unwrap();
    let marker = dir.join("tar-ran-a-shell");
    let payload = format!(
        "--checkpoint=1 --checkpoint-action=exec=touch\\ {}",
        marker.display()
    );
    // The attack is real: the same tar with this variable runs the command.
    let control = std::process::Command::new(which("tar"))
        .args(["-cf", "/dev/null", "f"])
        .current_dir(&dir)
        .env_clear()
        .env("TAR_OPTIONS", &payload)
        .output()
        .unwrap();
    assert!(control.status.success(), "{control:?}");
    assert!(
        marker.exists(),
        "the control run should have made the marker"
    );
    std::fs::remove_file(&marker).unwrap();

    let r = with_env("tar -cf /dev/null f", &dir, &[("TAR_OPTIONS", &payload)]);
    let err = refused(&m, "main", &r).await;
    assert!(
        err.starts_with(
            "Security Violation: `TAR_OPTIONS` is not on the host env allowlist (elevated.env_allow)"
        ),
        "{err}"
    );
    let trace = dir.join("root-owned-trace");
    let r = with_env(
        "git --version",
        &dir,
        &[("GIT_TRACE2_EVENT", &trace.display().to_string())],
    );
    let err = refused(&m, "main", &r).await;
    assert!(
        err.contains("`GIT_TRACE2_EVENT` is not on the host env allowlist"),
        "{err}"
    );
    let r = with_env("true", &dir, &[("FROBNICATE_LEVEL", "9"), ("LANG", "C")]);
    let err = refused(&m, "main", &r).await;
    assert!(
        err.contains("`FROBNICATE_LEVEL` is not on the host env allowlist"),
        "{err}"
    );
    assert!(!err.contains("`LANG`"), "{err}");
    // Built-in names pass with values of their kind only.
    let r = with_env("true", &dir, &[("LANG", "/tmp/locale")]);
    let err = refused(&m, "main", &r).await;
    assert!(
        err.contains("the value of `LANG` is not a locale name"),
        "{err}"
    );
    // Nothing ran, nothing was registered for approval.
    assert!(!marker.exists() && !trace.exists());
    assert!(m.app.approvals.list(None).unwrap().is_empty());
    // Set in the command text instead, the variable is in what the operator reads, and the
    // allowlisted tar alone does not run it.
    for text in [
        format!("TAR_OPTIONS='{payload}' tar -cf /dev/null f"),
        format!("env TAR_OPTIONS='{payload}' tar -cf /dev/null f"),
    ] {
        let r = m.exec(with_env(&text, &dir, &[])).await;
        assert_eq!(
            r.status(),
            Some(Status::ApprovalPending),
            "{text}: {}",
            r.text()
        );
        assert!(r.details.to_json()["command"]
            .as_str()
            .unwrap()
            .contains("TAR_OPTIONS="));
    }
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert!(!marker.exists());

    // An operator-added name passes; the dangerous family cannot be added at all.
    let mut c = config(ElevatedLevel::Full);
    c.elevated.env_allow = vec!["FROBNICATE_LEVEL".into()];
    let m = moat(c);
    let r = with_env(
        "printf %s \"$FROBNICATE_LEVEL\"",
        &m.scratch(),
        &[("FROBNICATE_LEVEL", "9")],
    );
    assert_eq!(m.exec(r).await.details.to_json()["aggregated"], "9");
    let err = moat::config::load_from_str(
        "[elevated]\nenv_allow = [\"TAR_OPTIONS\"]\n",
        "moat.toml",
        &[],
        None,
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("elevated.env_allow") && err.contains("TAR_OPTIONS"),
        "{err}"
    );
}

#[tokio::test]
async fn moats_own_environment_reaches_host_commands_only_by_allowlist() {
    let m = moat(allowlisting(&["git", "printenv"]));
    let dir = m.scratch();
    let trace = dir.join("inherited-trace");
    // SAFETY of the test: no other test in this binary reads these variables.
    std::env::set_var("GIT_TRACE2_EVENT", &trace);
    std::env::set_var("FROBNICATE_INHERITED", "x");
    let r = m.exec(with_env("git --version", &dir, &[])).await;
    assert_eq!(r.status(), Some(Status::Completed), "{}", r.text());
    assert!(!trace.exists(), "GIT_TRACE2_EVENT was inherited");
    let r = m.exec(with_env("printenv", &dir, &[])).await;
    let out = r.details.aggregated().unwrap();
    let names: Vec<&str> = out
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, _)| k)
        .collect();
    for gone in ["GIT_TRACE2_EVENT", "FROBNICATE_INHERITED", "MOAT_HOME"] {
        assert!(!names.contains(&gone), "{gone} reached the command: {out}");
    }
    assert!(names.contains(&"PATH"), "{out}");
    std::env::remove_var("GIT_TRACE2_EVENT");
    std::env::remove_var("FROBNICATE_INHERITED");
}

#[tokio::test]
async fn the_approval_shows_every_variable_it_passes_with_secrets_redacted() {
    const VALUE: &str = "bd-51c7e0a9f2";
    std::env::set_var("BOUNDARY_SECRET_SOURCE", VALUE);
    let mut c = config(ElevatedLevel::Off);
    c.secrets.insert(
        "BOUNDARY_KEY".into(),
        SecretConfig {
            env: "BOUNDARY_SECRET_SOURCE".into(),
            sessions: vec!["main".into()],
            hosts: vec!["host".into()],
            ..Default::default()
        },
    );
    let m = moat(c);
    let mut events = m.events();
    let dir = m.scratch();
    let out = dir.join("env-seen");
    let r = m
        .exec(with_env(
            &format!("env > {}", out.display()),
            &dir,
            &[("TZ", "UTC"), ("COLUMNS", "80")],
        ))
        .await;
    assert_eq!(r.status(), Some(Status::ApprovalPending), "{}", r.text());
    let id = r.details.approval_id().unwrap().to_string();
    let shown = m.app.approvals.to_json(&m.app.approvals.get(&id).unwrap());
    let env: Vec<String> = serde_json::from_value(shown["binding"]["env"].clone()).unwrap();
    assert!(
        env.contains(&"BOUNDARY_KEY=[REDACTED:BOUNDARY_KEY]".to_string()),
        "{env:?}"
    );
    assert!(env.contains(&"TZ=UTC".to_string()) && env.contains(&"COLUMNS=80".to_string()));
    assert!(!shown.to_string().contains(VALUE), "{shown}");
    m.app
        .approvals
        .decide(&id, ApprovalDecision::AllowOnce, &op())
        .unwrap();
    event_with(&mut events, "Exec finished", 10).await;
    // What the command saw is what the operator was shown. The shell adds PWD, SHLVL and _;
    // moat's wrapper consumes MOAT_PATH_PREPEND and puts it in front of PATH after the
    // operator's login profile ran, so PATH is compared by name only.
    let seen = std::fs::read_to_string(&out).unwrap();
    let not_path = |l: &String| !l.starts_with("PATH=");
    let mut seen: Vec<String> = seen
        .lines()
        .filter(|l| {
            // MOAT_HOST_COMMAND is moat's marker of host processes, added at start
            // (docs/security.md, "The operator channel"), not part of what the operator approves.
            !["PWD=", "SHLVL=", "_=", "OLDPWD=", "MOAT_HOST_COMMAND="]
                .iter()
                .any(|p| l.starts_with(p))
        })
        .map(|l| l.replace(VALUE, "[REDACTED:BOUNDARY_KEY]"))
        .collect();
    seen.sort();
    let shown: Vec<String> = env
        .iter()
        .filter(|l| !l.starts_with("MOAT_PATH_PREPEND="))
        .cloned()
        .collect();
    assert!(seen.iter().any(|l| l.starts_with("PATH=")), "{seen:?}");
    assert!(shown.iter().any(|l| l.starts_with("PATH=")), "{shown:?}");
    assert_eq!(
        seen.iter().filter(|l| not_path(l)).collect::<Vec<_>>(),
        shown.iter().filter(|l| not_path(l)).collect::<Vec<_>>()
    );
}

fn sha256(bytes: &[u8]) -> String {
    hex::encode(sha2::Sha256::digest(bytes))
}

/// A makefile named by `make -f` is make's program: the policy judged it like a script
/// operand, but the binding's own table did not know make, so an approved `make -f ci.mk` ran
/// whatever ci.mk held by then. One table now tells both (src/policy/interpreters.rs).
#[tokio::test]
async fn a_makefile_swapped_after_approval_never_runs() {
    which("make");
    let m = moat(config(ElevatedLevel::Off));
    let mut events = m.events();
    let dir = m.scratch();
    let approved = dir.join("approved-ran");
    let swapped = dir.join("swapped-ran");
    let makefile = |marker: &Path| format!("all:\n\ttouch {}\n", marker.display());
    let ci = dir.join("ci.mk");

    // Control: the swapped makefile's recipe runs when make reads it.
    std::fs::write(&ci, makefile(&swapped)).unwrap();
    let out = std::process::Command::new("make")
        .args(["-s", "-f", "ci.mk"])
        .current_dir(&dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(swapped.exists(), "the swapped recipe runs");
    std::fs::remove_file(&swapped).unwrap();

    std::fs::write(&ci, makefile(&approved)).unwrap();
    let r = m.exec(with_env("make -s -f ci.mk", &dir, &[])).await;
    assert_eq!(r.status(), Some(Status::ApprovalPending), "{}", r.text());
    let id = r.details.approval_id().unwrap().to_string();
    let row = m.app.approvals.get(&id).unwrap();
    let b: moat::approvals::Binding = serde_json::from_str(&row.binding).unwrap();
    assert_eq!(b.files.len(), 1, "the makefile is bound: {b:?}");
    assert_eq!(b.files[0].operand, "ci.mk");
    std::fs::write(&ci, makefile(&swapped)).unwrap();
    m.app
        .approvals
        .decide(&id, ApprovalDecision::AllowOnce, &op())
        .unwrap();
    let ev = event_with(&mut events, &id, 10).await;
    assert!(
        ev.starts_with(&format!(
            "Exec denied (host id={id}, plan-changed: content of ci.mk)"
        )),
        "{ev}"
    );
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert!(!swapped.exists() && !approved.exists());

    // Unchanged: make runs moat's copy of the approved makefile.
    std::fs::write(&ci, makefile(&approved)).unwrap();
    let r = m.exec(with_env("make -s -f ci.mk", &dir, &[])).await;
    let id = r.details.approval_id().unwrap().to_string();
    m.app
        .approvals
        .decide(&id, ApprovalDecision::AllowOnce, &op())
        .unwrap();
    let ev = event_with(&mut events, &id, 10).await;
    assert!(ev.starts_with("Exec finished"), "{ev}");
    assert!(approved.exists() && !swapped.exists());
}

#[tokio::test]
async fn a_script_swapped_after_approval_never_runs() {
    let m = moat(config(ElevatedLevel::Off));
    let mut events = m.events();
    let dir = m.scratch();
    let approved = dir.join("approved-ran");
    let swapped = dir.join("swapped-ran");
    let good = format!("touch {}\necho \"$0\"\n", approved.display());
    let evil = format!("touch {}\n", swapped.display());
    let script = dir.join("build.sh");

    // Swapped content: refused, nothing runs.
    std::fs::write(&script, &good).unwrap();
    let r = m.exec(with_env("sh build.sh", &dir, &[])).await;
    assert_eq!(r.status(), Some(Status::ApprovalPending), "{}", r.text());
    let id = r.details.approval_id().unwrap().to_string();
    let row = m.app.approvals.get(&id).unwrap();
    let b: moat::approvals::Binding = serde_json::from_str(&row.binding).unwrap();
    assert_eq!(b.files.len(), 1, "{b:?}");
    assert_eq!(b.files[0].operand, "build.sh");
    assert_eq!(b.files[0].sha256, sha256(good.as_bytes()));
    assert_eq!(b.files[0].size, good.len() as u64);
    std::fs::write(&script, &evil).unwrap();
    m.app
        .approvals
        .decide(&id, ApprovalDecision::AllowOnce, &op())
        .unwrap();
    let ev = event_with(&mut events, &id, 10).await;
    assert!(
        ev.starts_with(&format!(
            "Exec denied (host id={id}, plan-changed: content of build.sh)"
        )),
        "{ev}"
    );
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert!(!swapped.exists() && !approved.exists());

    // Swapped for a symlink to other content: refused too.
    std::fs::write(&script, &good).unwrap();
    let r = m.exec(with_env("sh build.sh", &dir, &[])).await;
    let id = r.details.approval_id().unwrap().to_string();
    let elsewhere = dir.join("elsewhere.sh");
    std::fs::write(&elsewhere, &evil).unwrap();
    std::fs::remove_file(&script).unwrap();
    std::os::unix::fs::symlink(&elsewhere, &script).unwrap();
    m.app
        .approvals
        .decide(&id, ApprovalDecision::AllowOnce, &op())
        .unwrap();
    let ev = event_with(&mut events, &id, 10).await;
    assert!(ev.contains("plan-changed: files"), "{ev}");
    assert!(!swapped.exists() && !approved.exists());

    // Unchanged: the approved bytes run, from moat's private copy, not from the agent's file.
    std::fs::remove_file(&script).unwrap();
    std::fs::write(&script, &good).unwrap();
    let r = m.exec(with_env("sh build.sh", &dir, &[])).await;
    let id = r.details.approval_id().unwrap().to_string();
    m.app
        .approvals
        .decide(&id, ApprovalDecision::AllowOnce, &op())
        .unwrap();
    let ev = event_with(&mut events, &id, 10).await;
    assert!(ev.starts_with("Exec finished"), "{ev}");
    let private = m.dir.path().join("host-approved").join(&id);
    assert!(ev.contains(&private.display().to_string()), "{ev}");
    assert!(approved.exists() && !swapped.exists());
    assert!(
        !private.exists(),
        "the private copy is removed after the run"
    );

    // The same for a program named by path.
    let tool = dir.join("run.sh");
    std::fs::write(&tool, format!("#!/bin/sh\n{good}")).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
    let r = m.exec(with_env("./run.sh", &dir, &[])).await;
    let id = r.details.approval_id().unwrap().to_string();
    std::fs::write(&tool, format!("#!/bin/sh\n{evil}")).unwrap();
    m.app
        .approvals
        .decide(&id, ApprovalDecision::AllowOnce, &op())
        .unwrap();
    let ev = event_with(&mut events, &id, 10).await;
    assert!(ev.contains("plan-changed: content of ./run.sh"), "{ev}");
    assert!(!swapped.exists());

    // A file moat cannot bind is refused at once, naming it and why.
    let err = refused(&m, "main", &with_env("sh missing.sh", &dir, &[])).await;
    assert!(
        err.starts_with("bind file `missing.sh` of a host command: open "),
        "{err}"
    );
    let err = refused(&m, "main", &with_env("sh build.sh > out.txt", &dir, &[])).await;
    assert!(err.starts_with("bind file `build.sh` of a host command: moat cannot make the command run an approved copy"), "{err}");
}

#[tokio::test]
async fn allow_always_stores_nothing_for_a_script_and_exact_entries_are_scoped() {
    let m = moat(config(ElevatedLevel::Off));
    let mut events = m.events();
    let dir = m.scratch();
    let marker = dir.join("run2-ran");
    std::fs::write(
        dir.join("run2.sh"),
        format!("echo run >> {}\n", marker.display()),
    )
    .unwrap();
    let r = m.exec(with_env("sh run2.sh", &dir, &[])).await;
    assert_eq!(r.status(), Some(Status::ApprovalPending), "{}", r.text());
    assert_eq!(
        r.details.to_json()["allowedDecisions"],
        serde_json::json!(["allow-once", "deny"])
    );
    let id = r.details.approval_id().unwrap().to_string();
    let err = m
        .app
        .approvals
        .decide(&id, ApprovalDecision::AllowAlways, &op())
        .unwrap_err();
    assert!(
        matches!(err, ApprovalError::DecisionUnavailable { .. }),
        "{err}"
    );
    m.app
        .approvals
        .decide(&id, ApprovalDecision::AllowOnce, &op())
        .unwrap();
    event_with(&mut events, "Exec finished", 10).await;
    assert!(m.app.approvals.allowlist(None).unwrap().is_empty());
    // The agent edits the script and asks again: it asks again.
    std::fs::write(dir.join("run2.sh"), "echo edited\n").unwrap();
    let r = m.exec(with_env("sh run2.sh", &dir, &[])).await;
    assert_eq!(r.status(), Some(Status::ApprovalPending), "{}", r.text());

    // An exact entry applies only to the session and workdir it was approved in.
    let other_dir = dir.join("other");
    std::fs::create_dir_all(&other_dir).unwrap();
    // An interpreter without inline eval (inline eval is never remembered: docs/approvals.md).
    let cmd = "python3 -V";
    let r = m.exec(with_env(cmd, &dir, &[])).await;
    let id = r.details.approval_id().unwrap().to_string();
    m.app
        .approvals
        .decide(&id, ApprovalDecision::AllowAlways, &op())
        .unwrap();
    event_with(&mut events, &id, 10).await;
    let entries = m.app.approvals.allowlist(Some("host")).unwrap();
    assert_eq!(entries.len(), 1, "{entries:?}");
    let real = dir.canonicalize().unwrap().display().to_string();
    assert_eq!(entries[0].session.as_deref(), Some("main"));
    assert_eq!(entries[0].cwd.as_deref(), Some(real.as_str()));
    assert_eq!(
        m.exec(with_env(cmd, &dir, &[])).await.status(),
        Some(Status::Completed)
    );
    assert_eq!(
        m.exec(with_env(cmd, &other_dir, &[])).await.status(),
        Some(Status::ApprovalPending)
    );
    let elsewhere = m
        .app
        .exec
        .run_for(&Caller::cli(), "other", &with_env(cmd, &dir, &[]), true)
        .await
        .unwrap();
    assert_eq!(
        elsewhere.status(),
        Some(Status::ApprovalPending),
        "{}",
        elsewhere.text()
    );

    // An entry stored before entries were scoped (hash of the command alone) matches nothing.
    let old = "sh -c 'echo old-global'";
    m.app
        .approvals
        .store()
        .add_allowlist_entry(&moat::store::AllowlistRow {
            id: 0,
            target: "host".into(),
            entry: format!("=command:{}", sha256(old.as_bytes())),
            command: Some(old.into()),
            session: None,
            cwd: None,
            source: "allow-always".into(),
            approval_id: None,
            added_by: "cli:alice".into(),
            added_at_ms: 0,
        })
        .unwrap();
    assert_eq!(
        m.exec(with_env(old, &dir, &[])).await.status(),
        Some(Status::ApprovalPending)
    );
}

fn git(dir: &Path, args: &[&str]) {
    let out = std::process::Command::new(which("git"))
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {out:?}");
}

/// A repository in a sandbox workspace whose config runs a hook that leaves a marker.
fn poisoned_repo(m: &HostMoat) -> (PathBuf, PathBuf) {
    let repo = m.dir.path().join("workspaces").join("agent-repo");
    std::fs::create_dir_all(&repo).unwrap();
    let marker = m.scratch().join("fsmonitor-ran");
    git(&repo, &["init", "-q"]);
    let hook = repo.join(".git").join("fsmon.sh");
    std::fs::write(&hook, format!("#!/bin/sh\ntouch {}\n", marker.display())).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
    git(
        &repo,
        &["config", "core.fsmonitor", &hook.display().to_string()],
    );
    (repo, marker)
}

#[tokio::test]
async fn an_allowlisted_git_in_a_sandbox_repository_asks_every_time() {
    let m = moat(allowlisting(&["git"]));
    let (repo, marker) = poisoned_repo(&m);
    // The attack is real: git status there runs the repository's hook.
    git(&repo, &["status"]);
    assert!(
        marker.exists(),
        "the control run should have made the marker"
    );
    std::fs::remove_file(&marker).unwrap();

    // Elsewhere the allowlist alone still runs git.
    let r = m.exec(req("git --version")).await;
    assert_eq!(r.status(), Some(Status::Completed), "{}", r.text());

    // Run in the repository itself: refused, the workdir is no host workdir the operator
    // listed (docs/security.md, "Host commands").
    let err = refused(&m, "main", &with_env("git status", &repo, &[])).await;
    assert!(
        err.contains(&repo.display().to_string()) && err.contains("elevated.allowed_workdirs"),
        "{err}"
    );
    for r in [
        req(&format!("git -C {} status", repo.display())),
        req(&format!("git --git-dir={}/.git status", repo.display())),
    ] {
        let out = m.exec(r.clone()).await;
        assert_eq!(
            out.status(),
            Some(Status::ApprovalPending),
            "{}: {}",
            r.command,
            out.text()
        );
        let reason = out.details.to_json()["reason"]
            .as_str()
            .unwrap()
            .to_string();
        assert!(reason.contains("which a sandbox can write"), "{reason}");
        assert!(reason.contains("core.fsmonitor"), "{reason}");
        assert_eq!(
            out.details.to_json()["allowedDecisions"],
            serde_json::json!(["allow-once", "deny"]),
            "{}",
            r.command
        );
    }
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert!(
        !marker.exists(),
        "git ran the repository's hook without an operator"
    );

    // With `ask = off` nobody is asked: the run is refused, naming why; a workdir the
    // operator listed that a sandbox can write too.
    let mut c = allowlisting(&["git"]);
    c.policy.host.ask = moat::policy::Ask::Off;
    c.sandbox.workspace_root = m.dir.path().join("workspaces").display().to_string();
    c.elevated.allowed_workdirs = vec![c.sandbox.workspace_root.clone()];
    let quiet = moat(c);
    let out = quiet.exec(with_env("git status", &repo, &[])).await;
    assert_eq!(out.details.to_json()["denied"], true, "{}", out.text());
    assert!(
        out.text().contains("which a sandbox can write"),
        "{}",
        out.text()
    );
    assert!(!marker.exists());

    // An operator-added allowlist entry for git does not change it either.
    m.app
        .approvals
        .allowlist_add("host", &which("git"), &op())
        .unwrap();
    let out = m
        .exec(req(&format!("git -C {} status", repo.display())))
        .await;
    assert_eq!(
        out.status(),
        Some(Status::ApprovalPending),
        "{}",
        out.text()
    );
    assert!(!marker.exists());
}

#[tokio::test]
async fn host_commands_run_in_a_private_directory_by_default() {
    let m = moat(config(ElevatedLevel::Full));
    let r = m.exec(req("pwd")).await;
    let want = m.dir.path().join("host-work").canonicalize().unwrap();
    assert_eq!(
        r.details.aggregated().unwrap().trim(),
        want.display().to_string()
    );
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&want).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o700);
}

#[tokio::test]
async fn every_location_a_sandbox_writes_asks() {
    let outside = tempfile::tempdir().unwrap();
    let rw = outside.path().join("rw");
    let ro = outside.path().join("ro");
    for d in [&rw, &ro] {
        std::fs::create_dir_all(d).unwrap();
    }
    let mut c = allowlisting(&["ls"]);
    c.sandbox.binds = vec![
        format!("{}:/data", rw.display()),
        format!("{}:/ref:ro", ro.display()),
    ];
    let home = tempfile::tempdir().unwrap();
    let run = home.path().join("run").join("some-container");
    std::fs::create_dir_all(&run).unwrap();
    let ws = home.path().join("workspaces").join("main");
    std::fs::create_dir_all(&ws).unwrap();
    // Not a host workdir the operator listed: refused outright, naming the key.
    let strict = common::host::moat_at(home.path(), c.clone());
    for dir in [&rw, &run, &ws, &ro] {
        let err = refused(&strict, "main", &with_env("ls", dir, &[])).await;
        assert!(err.contains("elevated.allowed_workdirs"), "{err}");
    }
    // Listed by the operator, a directory a sandbox can write still asks every time.
    c.elevated.allowed_workdirs = vec![outside.path().display().to_string()];
    c.elevated
        .allowed_workdirs
        .push(home.path().display().to_string());
    let m = common::host::moat_at(home.path(), c);
    for (dir, what) in [
        (&rw, "the sandbox bind"),
        (&run, "the sandbox run directories"),
        (&ws, "the sandbox workspaces"),
    ] {
        let r = m.exec(with_env("ls", dir, &[])).await;
        assert_eq!(
            r.status(),
            Some(Status::ApprovalPending),
            "{}: {}",
            dir.display(),
            r.text()
        );
        let reason = r.details.to_json()["reason"].as_str().unwrap().to_string();
        assert!(reason.contains(what), "{reason}");
        let r = m.exec(req(&format!("ls {}", dir.display()))).await;
        assert_eq!(r.status(), Some(Status::ApprovalPending), "{}", r.text());
    }
    // A read-only bind and the host workdir are not writable from a sandbox.
    assert_eq!(
        m.exec(with_env("ls", &ro, &[])).await.status(),
        Some(Status::Completed)
    );
    assert_eq!(m.exec(req("ls")).await.status(), Some(Status::Completed));
}
