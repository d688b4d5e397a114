//! The `moat` binary's own contract: config errors and `policy explain` (no engine needed).

use std::process::Command;

fn moat(home: &std::path::Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_moat"));
    c.env("MOAT_HOME", home).env_remove("MOAT_SESSION");
    c
}

#[test]
fn unknown_config_key_is_named() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("moat.toml"), "[sandbox]\nimagee = \"x\"\n").unwrap();
    let out = moat(dir.path()).args(["config", "show"]).output().unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("imagee"), "{err}");
}

#[test]
fn dangerous_bind_is_refused_at_load() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("moat.toml"),
        "[sandbox]\nbinds = [\"/var/run/docker.sock:/var/run/docker.sock\"]\n",
    )
    .unwrap();
    let out = moat(dir.path()).args(["config", "show"]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("sandbox.binds") && err.contains("Docker engine"),
        "{err}"
    );
}

#[test]
fn explain_json_shows_allowed_and_missed_segments() {
    let dir = tempfile::tempdir().unwrap();
    let out = moat(dir.path())
        .args([
            "policy",
            "explain",
            "--security",
            "allowlist",
            "--allow",
            "/usr/bin/ls",
            "--json",
            "--",
            "ls && rm -rf /",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_ne!(v["decision"], "allow");
    assert_eq!(v["segments"][0]["outcome"], "allowed");
    assert_eq!(v["segments"][1]["outcome"], "missed");
}

#[test]
fn explain_judges_request_env_under_allowlist() {
    let dir = tempfile::tempdir().unwrap();
    let run = |env: &str| {
        let out = moat(dir.path())
            .args([
                "policy",
                "explain",
                "--security",
                "allowlist",
                "--allow",
                "ls",
                "--ask",
                "on-miss",
                "--env",
                env,
                "--json",
                "--",
                "ls",
            ])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()
    };
    let v = run("LD_PRELOAD=/workspace/x.so");
    assert_eq!(v["decision"], "deny");
    assert!(v["reason"]
        .as_str()
        .unwrap()
        .contains("request env LD_PRELOAD cannot be set"));
    let v = run("FOO=bar");
    assert_eq!(v["decision"], "ask");
    assert!(v["reason"].as_str().unwrap().contains("FOO=bar"));
    assert_eq!(run("LANG=C")["decision"], "allow");
    let out = moat(dir.path())
        .args(["policy", "explain", "--env", "NOEQUALS", "--", "ls"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("NOEQUALS"));
}

/// `moat doctor` says whether the config file exists: "ok config PATH" only for a file that
/// is there, and the defaults in so many words when it is not.
#[test]
fn doctor_says_when_there_is_no_config_file() {
    let dir = tempfile::tempdir().unwrap();
    let out = moat(dir.path()).args(["doctor"]).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let file = dir.path().join("moat.toml");
    assert!(
        stdout.contains(&format!("ok    config: no file at {}", file.display())),
        "{stdout}"
    );
    std::fs::write(&file, "[sandbox]\n").unwrap();
    let out = moat(dir.path()).args(["doctor"]).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains(&format!("ok    config {}\n", file.display())),
        "{stdout}"
    );
}

/// `moat process` refusals in the CLI's words: they name `--id` and the CLI's commands, never
/// the MCP wire's `sessionId`, and exit 2 before any daemon is asked (issue texts: "sessionId
/// is required" for a CLI user who has `--id`).
#[test]
fn process_refusals_name_the_cli_flags() {
    let dir = tempfile::tempdir().unwrap();
    let actions = "list, poll, log, write, send-keys, submit, paste, kill, clear, remove";
    let rows: Vec<(Vec<&str>, String)> = vec![
        (
            vec!["process", "poll", "--session", "s"],
            "moat: failed to run the process action: give the process with --id ID (the id `moat exec` printed, or see `moat process list --session S`).".into(),
        ),
        (
            vec!["process", "kill", "--session", "s", "--id", "  "],
            "moat: failed to run the process action: give the process with --id ID (the id `moat exec` printed, or see `moat process list --session S`).".into(),
        ),
        (
            vec!["process", "dance", "--session", "s", "--id", "x"],
            format!("moat: failed to run `moat process dance`: there is no such action; use one of {actions}."),
        ),
    ];
    for (args, want) in rows {
        let out = moat(dir.path()).args(&args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.trim_end(), want, "{args:?}");
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(!err.contains("sessionId"), "{err}");
    }
    // No daemon was started for them.
    assert!(!dir.path().join("daemon.lock").exists());
}

/// A reader that goes away (`moat … | head`) ends the CLI as SIGPIPE ends other programs:
/// quietly, with 141, never a panic.
#[test]
fn a_closed_pipe_ends_the_cli_quietly() {
    use std::io::Read;
    let home = tempfile::tempdir().unwrap();
    let long = vec!["echo x"; 2000].join("; ");
    let mut child = moat(home.path())
        .args(["policy", "explain", "--", &long])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = [0u8; 16];
    child.stdout.take().unwrap().read_exact(&mut first).unwrap();
    // The read end is closed here, with most of the output unwritten.
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(141), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    // The throwaway sandbox the verdict was judged in went before the verdict was printed,
    // so the closed pipe left nothing running.
    let list = moat(home.path())
        .args(["sessions", "list", "--json"])
        .output()
        .unwrap();
    let list = String::from_utf8_lossy(&list.stdout);
    assert!(!list.contains("explain-"), "{list}");
    let _ = moat(home.path()).args(["daemon", "stop"]).output();
}
