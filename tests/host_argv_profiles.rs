//! On the host an allowlisted program is not an allowlisted command (docs/policy.md, "Argv
//! profiles"; docs/security.md, "Host commands"). The attacks: an allowlisted program's own
//! options run a shell as moat's user. Each is shown to work when nothing guards it (an
//! elevated run at `default_level = full`), then to ask — or be refused with `ask = off` —
//! with the marker absent. Real commands on this machine; no engine needed.

mod common;

use std::path::Path;

use common::host::{config, event_with, moat, req, HostMoat};
use moat::approvals::{ApprovalDecision, Decider};
use moat::config::{Config, ElevatedLevel};
use moat::contract::Status;
use moat::policy::{Ask, BinProfile};
use moat::tools::ExecRequest;

fn op() -> Decider {
    Decider::operator("alice", "cli")
}

fn which(name: &str) -> Option<String> {
    let out = std::process::Command::new("sh")
        .args(["-c", &format!("command -v {name}")])
        .output()
        .unwrap();
    let p = String::from_utf8(out.stdout).unwrap().trim().to_string();
    p.starts_with('/')
        .then(|| std::fs::canonicalize(p).unwrap().display().to_string())
}

/// The payloads, each writing `marker` through the named program's own options.
fn payloads(marker: &Path) -> Vec<(&'static str, String)> {
    let m = marker.display();
    vec![
        (
            "tar",
            format!(
                "tar -cf /dev/null /etc/hostname --checkpoint=1 --checkpoint-action=exec='sh -c \"id > {m}\"'"
            ),
        ),
        (
            "tar",
            format!("tar -cf /dev/null /etc/hostname --checkpoint=1 --checkpoint-act=exec='touch {m}'"),
        ),
        ("split", format!("split --filter='touch {m}' /etc/hostname")),
        ("setarch", format!("setarch -3 /bin/sh -c 'touch {m}'")),
        ("choom", format!("choom -n 0 -- /bin/sh -c 'touch {m}'")),
        ("taskset", format!("taskset 1 /bin/sh -c 'touch {m}'")),
        ("sort", format!("sort -o {m} /etc/hostname")),
        ("date", format!("date -r /etc/hostname +%s -s 2020-01-01 && touch {m}")),
        // A wrapper needs no allowlist entry, but flock creates its lock file as moat's user.
        ("flock", format!("flock {m} ls /")),
    ]
}

fn everything_allowlisted(ask: Ask) -> Config {
    let mut c = config(ElevatedLevel::Off);
    c.policy.host.ask = ask;
    c.policy.host.allowlist = [
        "tar", "split", "setarch", "choom", "taskset", "sort", "date", "ls", "touch", "cat",
    ]
    .iter()
    .filter_map(|t| which(t))
    .collect();
    c
}

fn in_dir(command: &str, dir: &Path) -> ExecRequest {
    ExecRequest {
        workdir: Some(dir.display().to_string()),
        ..req(command)
    }
}

async fn finished(m: &HostMoat, command: &str, dir: &Path) {
    let mut events = m.events();
    let r = m.exec(in_dir(command, dir)).await;
    if r.status() == Some(Status::Running) {
        event_with(&mut events, "Exec finished", 10).await;
    }
}

#[tokio::test]
async fn the_payloads_work_when_nothing_guards_them() {
    // Control: at default_level = full the same commands reach their goal, so the tests
    // below can fail.
    let m = moat(config(ElevatedLevel::Full));
    let dir = m.scratch();
    let marker = dir.join("pwned");
    for (program, command) in payloads(&marker) {
        if which(program).is_none() || program == "date" {
            // `date -s` needs root and changes the clock: never run for real.
            continue;
        }
        let _ = std::fs::remove_file(&marker);
        finished(&m, &command, &dir).await;
        assert!(
            marker.exists(),
            "control: {command:?} did not write the marker"
        );
    }
}

#[tokio::test]
async fn an_allowlisted_program_with_gadget_options_asks_on_the_host() {
    let m = moat(everything_allowlisted(Ask::OnMiss));
    let dir = m.scratch();
    let marker = dir.join("pwned");
    for (program, command) in payloads(&marker) {
        if which(program).is_none() {
            continue;
        }
        let r = m.exec(in_dir(&command, &dir)).await;
        assert_eq!(
            r.status(),
            Some(Status::ApprovalPending),
            "{command}: {}",
            r.text()
        );
        assert!(!marker.exists(), "{command} ran unasked");
    }
    // The reason names the way out: a profile, or the exact command approved for good.
    let r = m
        .exec(in_dir("tar -cf /dev/null /etc/hostname", &dir))
        .await;
    assert_eq!(r.status(), Some(Status::ApprovalPending), "{}", r.text());
    assert!(
        r.text().contains("[policy.host.argv_profiles.tar]"),
        "{}",
        r.text()
    );
}

#[tokio::test]
async fn with_ask_off_they_are_refused() {
    let m = moat(everything_allowlisted(Ask::Off));
    let dir = m.scratch();
    let marker = dir.join("pwned");
    for (program, command) in payloads(&marker) {
        if which(program).is_none() {
            continue;
        }
        let r = m.exec(in_dir(&command, &dir)).await;
        assert_eq!(r.status(), Some(Status::Failed), "{command}: {}", r.text());
        assert!(r.text().starts_with("Exec denied"), "{}", r.text());
        assert!(!marker.exists(), "{command} ran");
    }
}

#[tokio::test]
async fn built_in_profiles_run_ordinary_reads_unasked() {
    let m = moat(everything_allowlisted(Ask::OnMiss));
    let dir = m.scratch();
    std::fs::write(dir.join("f"), "b\na\n").unwrap();
    for command in ["ls -la .", "cat f", "sort -r f", "date +%s", "date -u +%F"] {
        let r = m.exec(in_dir(command, &dir)).await;
        assert_eq!(
            r.status(),
            Some(Status::Completed),
            "{command}: {}",
            r.text()
        );
    }
    let r = m.exec(in_dir("sort -r f", &dir)).await;
    assert!(r.text().starts_with("b\na"), "{}", r.text());
}

#[tokio::test]
async fn an_operator_profile_allows_exactly_its_argv() {
    let mut c = everything_allowlisted(Ask::Off);
    c.policy.host.argv_profiles.insert(
        "touch".into(),
        BinProfile {
            allowed_flags: vec!["-c".into()],
            min_positional: 1,
            max_positional: 1,
            ..BinProfile::default()
        },
    );
    let m = moat(c);
    let dir = m.scratch();
    let r = m.exec(in_dir("touch made", &dir)).await;
    assert_eq!(r.status(), Some(Status::Completed), "{}", r.text());
    assert!(dir.join("made").exists());
    // `-d` is not in the profile; neither is a second operand.
    for command in ["touch -d 2020-01-01 made", "touch a b"] {
        let r = m.exec(in_dir(command, &dir)).await;
        assert!(
            r.text().starts_with("Exec denied"),
            "{command}: {}",
            r.text()
        );
    }
}

#[tokio::test]
async fn allow_always_remembers_the_exact_command_only() {
    let m = moat(everything_allowlisted(Ask::OnMiss));
    let mut events = m.events();
    let dir = m.scratch();
    let command = "tar -cf out.tar -C /etc hostname";
    let r = m.exec(in_dir(command, &dir)).await;
    assert_eq!(r.status(), Some(Status::ApprovalPending), "{}", r.text());
    let id = r.details.approval_id().unwrap().to_string();
    m.app
        .approvals
        .decide(&id, ApprovalDecision::AllowAlways, &op())
        .unwrap();
    event_with(&mut events, &id, 10).await;
    let entries = m.app.approvals.allowlist(Some("host")).unwrap();
    assert_eq!(entries.len(), 1, "{entries:?}");
    assert_eq!(entries[0].command.as_deref(), Some(command));
    // The same command now runs unasked ...
    let r = m.exec(in_dir(command, &dir)).await;
    assert_ne!(r.status(), Some(Status::ApprovalPending), "{}", r.text());
    // ... and tar with other options still asks: the executable was not allowlisted.
    let marker = dir.join("pwned");
    let r = m
        .exec(in_dir(
            &format!("tar -cf /dev/null /etc/hostname --checkpoint=1 --checkpoint-action=exec='touch {}'", marker.display()),
            &dir,
        ))
        .await;
    assert_eq!(r.status(), Some(Status::ApprovalPending), "{}", r.text());
    assert!(!marker.exists());
}

#[test]
fn explain_on_the_host_agrees() {
    // `moat policy explain --host host`, as the operator runs it: the attack is not `allow`.
    let home = tempfile::tempdir().unwrap();
    let tar = which("tar").unwrap();
    std::fs::write(
        home.path().join("moat.toml"),
        format!("[policy.host]\nsecurity = \"allowlist\"\nallowlist = [\"{tar}\"]\n"),
    )
    .unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_moat"))
        .env("MOAT_HOME", home.path())
        .args([
            "policy",
            "explain",
            "--host",
            "host",
            "--json",
            "--",
            "tar -cf /dev/null /etc/hostname --checkpoint=1 --checkpoint-action=exec=sh",
        ])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let v: serde_json::Value = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("{e}: {text} {}", String::from_utf8_lossy(&out.stderr)));
    assert_ne!(v["decision"], "allow", "{v}");
    assert!(
        v.to_string().contains("checkpoint-action runs a program"),
        "{v}"
    );
}

#[test]
fn allowlist_add_says_what_an_entry_trusts() {
    let home = tempfile::tempdir().unwrap();
    let add = |host: &str, entry: &str| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_moat"))
            .env("MOAT_HOME", home.path())
            .args(["allowlist", "add", "--host", host, entry])
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let warned = add("host", "/usr/bin/tar");
    assert!(warned.contains("tar has no argv profile"), "{warned}");
    assert!(
        warned.contains("[policy.host.argv_profiles.tar]"),
        "{warned}"
    );
    // A program with a built-in profile needs no warning.
    assert_eq!(add("host", "/usr/bin/ls"), "");
    let warned = add("sandbox", "/usr/bin/tar");
    assert!(warned.contains("--checkpoint-action"), "{warned}");
}
