//! What the exec tool's documents promise (issue 13, items 3, 4, 8, 9), against the real
//! engine: the CLI's refusal output and exit code, a request's PATH after the login profile,
//! `sandbox.shell`/`elevated.shell`, the host PATH without repeats, and `host` values.

mod common;

use std::collections::BTreeMap;
use std::process::Command;

use moat::config::Shell;
use moat::config::{Config, ElevatedLevel};
use moat::contract::Status;
use moat::tools::ExecRequest;

fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn req(command: &str) -> ExecRequest {
    ExecRequest {
        command: command.into(),
        ..Default::default()
    }
}

/// `moat exec` against the test's home, for session `session`.
fn cli(m: &common::TestMoat, session: &str, args: &[&str]) -> std::process::Output {
    let key = m.key(session);
    let mut a = vec!["exec", "--session", key.as_str()];
    a.extend_from_slice(args);
    Command::new(env!("CARGO_BIN_EXE_moat"))
        .args(&a)
        .env("MOAT_HOME", m.dir.path())
        .env_remove("MOAT_SESSION")
        .output()
        .unwrap()
}

fn aggregated(r: &moat::contract::ToolResult) -> String {
    r.details.aggregated().unwrap_or_default().to_string()
}

// ---- item 3: the CLI says why it refused, with its own exit code -------------------------

#[tokio::test]
async fn cli_refusal_prints_the_sentence_on_stderr_and_exits_77() {
    let Some(m) = common::moat("i13b-refuse", Config::default()).await else {
        return;
    };
    // The sentence the tool result carries, from the library itself.
    let expected = m
        .exec_req(
            "s",
            ExecRequest {
                security: Some("deny".into()),
                ..req("touch /workspace/ran")
            },
        )
        .await;
    assert_eq!(
        expected.details.to_json()["denied"],
        true,
        "{}",
        expected.text()
    );

    let out = cli(
        &m,
        "s",
        &["--security", "deny", "--", "touch", "/workspace/ran"],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(77), "stderr: {stderr}");
    assert_eq!(stderr.trim_end(), expected.text(), "{stderr}");
    assert!(stderr.starts_with("Exec denied (sandbox, "), "{stderr}");
    assert!(out.stdout.is_empty(), "{:?}", out.stdout);
    let listing = m.docker_exec("s", "ls /workspace");
    assert!(!listing.contains("ran"), "{listing}");

    // --json: the exact result on stdout, the same code.
    let out = cli(&m, "s", &["--json", "--security", "deny", "--", "ls"]);
    assert_eq!(out.status.code(), Some(77));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["details"]["denied"], true);

    // A request env the allowlist refuses (PATH) is a refusal too.
    let out = cli(
        &m,
        "s",
        &[
            "--security",
            "allowlist",
            "--env",
            "PATH=/opt/x",
            "--",
            "ls",
        ],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(77), "{stderr}");
    assert!(stderr.contains("PATH"), "{stderr}");

    // A command's own codes still pass through: 3 is 3, and refusal is not 1 or 2.
    let out = cli(&m, "s", &["--", "exit 3"]);
    assert_eq!(out.status.code(), Some(3));
    let out = cli(&m, "s", &["--", "exit 77"]);
    assert_eq!(
        out.status.code(),
        Some(77),
        "a command's 77 is passed through"
    );
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

// ---- the default image's login profile -------------------------------------------------

/// The image reads the uid with builtins instead of `id -u` (images/sandbox/Dockerfile,
/// docs/helper.md "What an exec costs"): the PATH must still be Debian's for each uid, and
/// none of the profile's own variables may reach the command.
#[tokio::test]
async fn the_images_login_profile_sets_the_path_by_uid_and_leaves_nothing_behind() {
    let Some(m) = common::moat("i13b-profile", Config::default()).await else {
        return;
    };
    let user = aggregated(
        &m.exec(
            "s",
            r#"printf '%s|%s|' "$PATH" "$(id -u)"; set | grep -c '^moat_' || true"#,
        )
        .await,
    );
    assert_eq!(
        user.trim(),
        "/usr/local/bin:/usr/bin:/bin:/usr/local/games:/usr/games|1000|0"
    );
    let root = std::process::Command::new("docker")
        .args(["exec", "-u", "0", &m.container("s"), "sh", "-lc"])
        .arg(r#"printf '%s|' "$PATH"; set | grep -c '^moat_' || true"#)
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&root.stdout).trim(),
        "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin|0"
    );
    // The rewrite is there: the profile asks `id` only when /proc/self/status cannot say.
    let profile = m.docker_exec("s", "grep -c 'moat_euid:-' /etc/profile");
    assert_eq!(profile.trim(), "2", "{profile}");
}

// ---- item 4: a request's PATH, after the login profile ----------------------------------

#[tokio::test]
async fn request_path_is_prepended_after_the_login_profile() {
    let Some(m) = common::moat("i13b-path", Config::default()).await else {
        return;
    };
    let login = aggregated(&m.exec("s", r#"printf '%s' "$PATH""#).await);
    assert!(!login.contains("/opt/x"), "{login}");
    assert!(login.contains("/usr/bin"), "{login}");
    // The login profile really runs and sets PATH (Debian's /etc/profile assigns it).
    let profile = m.docker_exec("s", "grep -c 'PATH=' /etc/profile");
    assert!(profile.trim() != "0", "{profile}");

    let r = m
        .exec_req(
            "s",
            ExecRequest {
                env: env(&[("PATH", "/opt/x:/usr/bin")]),
                ..req(r#"printf '%s' "$PATH""#)
            },
        )
        .await;
    let path = aggregated(&r);
    // /opt/x in front; /usr/bin was there already and stays where the profile put it.
    assert_eq!(path, format!("/opt/x:{login}"));
    assert_eq!(path.split(':').filter(|d| *d == "/usr/bin").count(), 1);

    // A tool in a workspace directory is found through the request's PATH.
    m.exec("s", "mkdir -p /workspace/tools && printf '#!/bin/sh\\necho hello-from-tool\\n' > /workspace/tools/mytool && chmod +x /workspace/tools/mytool")
        .await;
    let r = m
        .exec_req(
            "s",
            ExecRequest {
                env: env(&[("PATH", "/workspace/tools")]),
                ..req("mytool")
            },
        )
        .await;
    assert_eq!(aggregated(&r).trim(), "hello-from-tool", "{}", r.text());
}

#[tokio::test]
async fn bad_request_path_entries_are_refused_before_anything_runs() {
    let Some(m) = common::moat("i13b-badpath", Config::default()).await else {
        return;
    };
    m.exec("s", "true").await;
    for (value, needle) in [
        ("/opt/x::/usr/bin", "entry 2 `` is empty"),
        ("/usr/bin:", "is empty"),
        (".:/usr/bin", "entry 1 `.` is not an absolute path"),
        ("bin", "not an absolute path"),
        ("/opt/../workspace", "`..` component"),
    ] {
        let err = m
            .app
            .exec
            .run(
                &m.key("s"),
                &ExecRequest {
                    env: env(&[("PATH", value)]),
                    ..req("touch /workspace/ran")
                },
                true,
            )
            .await
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("set env var `PATH`"), "{value}: {err}");
        assert!(err.contains(needle), "{value}: {err}");
    }
    let listing = m.docker_exec("s", "ls /workspace");
    assert!(!listing.contains("ran"), "{listing}");
}

/// The attack: a request PATH naming a directory with its own `sh` must not replace the
/// wrapper that records the process group and the exit status.
#[tokio::test]
async fn request_path_cannot_replace_the_wrapper_shell() {
    let Some(m) = common::moat("i13b-wrapsh", Config::default()).await else {
        return;
    };
    m.exec("s", "mkdir -p /workspace/evil && printf '#!/bin/sh\\ntouch /workspace/hijacked\\nexec /bin/sh \"$@\"\\n' > /workspace/evil/sh && chmod +x /workspace/evil/sh")
        .await;
    let r = m
        .exec_req(
            "s",
            ExecRequest {
                env: env(&[("PATH", "/workspace/evil:/usr/bin:/bin")]),
                ..req("echo ok; exit 4")
            },
        )
        .await;
    assert_eq!(r.details.to_json()["exitCode"], 4, "{}", r.text());
    let listing = m.docker_exec("s", "ls /workspace");
    assert!(!listing.contains("hijacked"), "{listing}");
}

#[tokio::test]
async fn allowlist_still_refuses_a_request_path() {
    let Some(m) = common::moat("i13b-allowpath", Config::default()).await else {
        return;
    };
    let r = m
        .exec_req(
            "s",
            ExecRequest {
                security: Some("allowlist".into()),
                env: env(&[("PATH", "/usr/bin")]),
                ..req("ls")
            },
        )
        .await;
    assert_eq!(r.details.to_json()["denied"], true, "{}", r.text());
    assert!(r.text().contains("PATH"), "{}", r.text());
}

// ---- item 8: bash when configured --------------------------------------------------------

const ARRAY: &str = "arr=(a b); echo ${arr[1]}";

#[tokio::test]
async fn sandbox_shell_bash_runs_bash_syntax_and_sh_does_not() {
    let Some(m) = common::moat("i13b-sh", Config::default()).await else {
        return;
    };
    let r = m.exec("s", ARRAY).await;
    assert_eq!(r.status(), Some(Status::Failed), "{}", r.text());
    assert!(aggregated(&r).contains("Syntax error"), "{}", r.text());

    let mut c = Config::default();
    c.sandbox.shell = Shell::Bash;
    let Some(m) = common::moat("i13b-bash", c).await else {
        return;
    };
    let r = m.exec("s", ARRAY).await;
    assert_eq!(r.status(), Some(Status::Completed), "{}", r.text());
    assert_eq!(aggregated(&r).trim(), "b");
    // The prelude still runs in bash: a request's PATH comes first.
    let r = m
        .exec_req(
            "s",
            ExecRequest {
                env: env(&[("PATH", "/opt/x")]),
                ..req(r#"echo "$BASH_VERSION|$PATH""#)
            },
        )
        .await;
    let out = aggregated(&r);
    let (version, path) = out.trim().split_once('|').unwrap();
    assert!(!version.is_empty(), "{out}");
    assert!(path.starts_with("/opt/x:"), "{out}");
    // The wrapper and its process group: a timeout ends the command and its children.
    let r = m
        .exec_req(
            "s",
            ExecRequest {
                timeout: Some(2.0),
                ..req("sleep 301 & sleep 302; wait")
            },
        )
        .await;
    assert_eq!(r.details.to_json()["timedOut"], true, "{}", r.text());
    let left = m.docker_exec(
        "s",
        r#"for p in /proc/[0-9]*; do tr '\0' ' ' < $p/cmdline 2>/dev/null; echo; done | grep -c '^sleep 30[12]'"#,
    );
    assert_eq!(left.trim(), "0", "sleeps left behind");
    // Background processes keep their run files: poll sees the exit code.
    let id = m.background("s", "sleep 1; exit 5").await;
    let p = m
        .process(
            "s",
            &serde_json::from_value(serde_json::json!({
                "action": "poll", "sessionId": id, "timeout": 10000
            }))
            .unwrap(),
        )
        .await;
    assert_eq!(p.details.to_json()["exitCode"], 5, "{}", p.text());
}

#[tokio::test]
async fn sandbox_shell_bash_without_bash_is_a_clear_error() {
    if common::engine().await.is_none() {
        return;
    }
    let tag = format!("moat-test-nobash:{}", std::process::id());
    let mut build = Command::new("docker")
        .args(["build", "-q", "-t", &tag, "-"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        let mut stdin = build.stdin.take().unwrap();
        let from = Config::default().sandbox.image;
        writeln!(
            stdin,
            "FROM {from}\nUSER root\nRUN rm -f /bin/bash /usr/bin/bash"
        )
        .unwrap();
    }
    assert!(build.wait().unwrap().success(), "docker build {tag}");
    struct Rmi(String);
    impl Drop for Rmi {
        fn drop(&mut self) {
            let _ = Command::new("docker").args(["rmi", "-f", &self.0]).output();
        }
    }
    let _rmi = Rmi(tag.clone());
    let mut c = Config::default();
    c.sandbox.shell = Shell::Bash;
    c.sandbox.image = tag.clone();
    let Some(m) = common::moat("i13b-nobash", c).await else {
        return;
    };
    let err = m
        .app
        .exec
        .run(&m.key("s"), &req("touch /workspace/ran"), true)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("sandbox.shell = \"bash\"") && err.contains(&tag) && err.contains("`bash`"),
        "{err}"
    );
    let listing = m.docker_exec("s", "ls /workspace");
    assert!(!listing.contains("ran"), "{listing}");
    drop(m);
}

#[tokio::test]
async fn elevated_shell_bash_on_the_host() {
    let mut c = common::host::config(ElevatedLevel::Full);
    c.elevated.shell = Shell::Bash;
    let m = common::host::moat(c);
    let r = m.exec(common::host::req(ARRAY)).await;
    assert_eq!(r.status(), Some(Status::Completed), "{}", r.text());
    assert_eq!(aggregated(&r).trim(), "b");
    let m = common::host::moat(common::host::config(ElevatedLevel::Full));
    let r = m.exec(common::host::req(ARRAY)).await;
    assert_eq!(r.status(), Some(Status::Failed), "{}", r.text());
}

// ---- item 9: the host PATH without repeats; `host` is not a hostname ---------------------

#[tokio::test]
async fn host_path_has_each_entry_once_in_first_place() {
    let mut c = common::host::config(ElevatedLevel::Full);
    // A directory the login PATH holds already: it moves to the front, and only appears there.
    c.elevated.path_prepend = vec!["/usr/bin".into(), "/opt/moat-test/bin".into()];
    let m = common::host::moat(c);
    let r = m.exec(common::host::req(r#"printf '%s' "$PATH""#)).await;
    let path = aggregated(&r);
    let entries: Vec<&str> = path.split(':').collect();
    assert_eq!(entries[..2], ["/usr/bin", "/opt/moat-test/bin"], "{path}");
    let mut seen = std::collections::HashSet::new();
    for e in &entries {
        assert!(!e.is_empty(), "empty entry in {path}");
        assert!(seen.insert(*e), "{e} twice in {path}");
    }
}

#[tokio::test]
async fn hostname_like_host_values_are_refused_by_name() {
    let Some(m) = common::moat("i13b-host", Config::default()).await else {
        return;
    };
    m.exec("s", "true").await;
    for host in ["example.com", "localhost", "node1"] {
        let err = m
            .app
            .exec
            .run(
                &m.key("s"),
                &ExecRequest {
                    host: Some(host.into()),
                    ..req("touch /workspace/ran")
                },
                true,
            )
            .await
            .unwrap_err()
            .to_string();
        assert!(err.contains(&format!("`{host}`")), "{err}");
        assert!(
            err.contains("auto, sandbox, gateway, host or node"),
            "{err}"
        );
    }
    // The documented values still work.
    for host in ["auto", "sandbox", " Sandbox "] {
        let r = m
            .exec_req(
                "s",
                ExecRequest {
                    host: Some(host.into()),
                    ..req("echo ok")
                },
            )
            .await;
        assert_eq!(aggregated(&r).trim(), "ok", "{host}");
    }
    let listing = m.docker_exec("s", "ls /workspace");
    assert!(!listing.contains("ran"), "{listing}");
    // The CLI says the same and fails as moat's own error (2).
    let out = cli(&m, "s", &["--host", "example.com", "--", "true"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("`example.com`"), "{stderr}");
}

#[tokio::test]
async fn doctor_reports_which_shell_the_image_gives_sh() {
    if common::engine().await.is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let doctor = || {
        Command::new(env!("CARGO_BIN_EXE_moat"))
            .arg("doctor")
            .env("MOAT_HOME", dir.path())
            .output()
            .unwrap()
    };
    let out = doctor();
    let stdout = String::from_utf8_lossy(&out.stdout);
    // What the image's /bin/sh really is, asked from outside moat.
    let image = Config::default().sandbox.image;
    let real = Command::new("docker")
        .args([
            "run",
            "--rm",
            "--network",
            "none",
            &image,
            "readlink",
            "-f",
            "/bin/sh",
        ])
        .output()
        .unwrap();
    let real = String::from_utf8_lossy(&real.stdout).trim().to_string();
    assert!(real.starts_with('/'), "{real}");
    assert!(
        stdout.contains(&format!("ok    image shells: sh is {real}, bash is /")),
        "{stdout}"
    );
    assert!(stdout.contains("`sh -lc`"), "{stdout}");
    std::fs::write(
        dir.path().join("moat.toml"),
        "[sandbox]\nshell = \"bash\"\n",
    )
    .unwrap();
    let stdout = String::from_utf8_lossy(&doctor().stdout).into_owned();
    assert!(stdout.contains("`bash -lc`"), "{stdout}");
    // The throwaway container is gone.
    let left = Command::new("docker")
        .args(["ps", "-aq", "--filter", "name=moat-doctor-"])
        .output()
        .unwrap();
    assert!(
        left.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&left.stdout)
    );
}

/// The id of the first pending approval of the home at `dir`, as `moat approvals list` shows
/// it, waiting up to 30 s for one to appear.
fn pending_approval(dir: &std::path::Path) -> String {
    for _ in 0..300 {
        let list = Command::new(env!("CARGO_BIN_EXE_moat"))
            .args(["approvals", "list", "--json"])
            .env("MOAT_HOME", dir)
            .output()
            .unwrap();
        let v: serde_json::Value = serde_json::from_slice(&list.stdout).unwrap_or_default();
        if let Some(id) = v
            .as_array()
            .and_then(|a| a.first())
            .and_then(|first| first["id"].as_str())
        {
            return id.to_string();
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    panic!("no approval became pending");
}

/// A waiting `moat exec` whose approval is granted exits with the command's own status, read
/// from the approval event's data: its code, or 128 + N when a signal ended it.
#[tokio::test]
async fn cli_approved_command_exits_with_its_own_status() {
    let Some(m) = common::moat("i12-approved", Config::default()).await else {
        return;
    };
    for (command, want) in [
        ("echo one; seq 1 300; exit 0", 0),
        ("exit 5", 5),
        ("kill -TERM $$", 128 + 15),
    ] {
        let out = asked_then_decided(&m, command, "approve");
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(want), "{command}: {stdout}{stderr}");
        assert!(
            stderr.lines().any(|l| l.starts_with("Exec finished")),
            "{stderr}"
        );
        if want == 0 {
            // The command's own output, whole and with its lines, as for any other run.
            let mut lines = vec!["one".to_string()];
            lines.extend((1..=300).map(|n| n.to_string()));
            assert_eq!(stdout, format!("{}\n", lines.join("\n")), "{command}");
        }
    }
}

/// `moat exec --ask always -- command` in session `s`, its approval decided by the operator's
/// `moat approvals <decision>`, and what the waiting CLI printed and exited with.
fn asked_then_decided(m: &common::TestMoat, command: &str, decision: &str) -> std::process::Output {
    let key = m.key("s");
    let child = Command::new(env!("CARGO_BIN_EXE_moat"))
        .args(["exec", "--session", &key, "--ask", "always", "--", command])
        .env("MOAT_HOME", m.dir.path())
        .env_remove("MOAT_SESSION")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The pending approval, as the operator sees it.
    let id = pending_approval(m.dir.path());
    let decided = Command::new(env!("CARGO_BIN_EXE_moat"))
        .args(["approvals", decision, &id])
        .env("MOAT_HOME", m.dir.path())
        .output()
        .unwrap();
    assert!(
        decided.status.success(),
        "{}",
        String::from_utf8_lossy(&decided.stderr)
    );
    child.wait_with_output().unwrap()
}

/// An operator's denial is a refusal too: the waiting `moat exec` prints the sentence on
/// stderr and exits 77.
#[tokio::test]
async fn cli_operator_denial_exits_77_with_the_sentence() {
    let Some(m) = common::moat("i13b-opdeny", Config::default()).await else {
        return;
    };
    let out = asked_then_decided(&m, "touch /workspace/ran", "deny");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(77), "{stderr}");
    assert!(
        stderr.lines().any(|l| l.starts_with("Exec denied")),
        "{stderr}"
    );
    let listing = m.docker_exec("s", "ls /workspace");
    assert!(!listing.contains("ran"), "{listing}");
}

/// With deny patterns, names are resolved on the PATH the run will have, request entries
/// included: a link in a request PATH directory to a denied program is caught by what it is,
/// and a harmless tool there is found (not refused as unresolvable).
#[tokio::test]
async fn patterns_see_through_the_request_path() {
    let mut c = Config::default();
    c.policy.sandbox.deny_patterns = vec!["id *".into()];
    let Some(m) = common::moat("i13b-patpath", c).await else {
        return;
    };
    m.exec(
        "s",
        "mkdir -p /workspace/tools && ln -sf /usr/bin/id /workspace/tools/myid && printf '#!/bin/sh\\necho hello-from-tool\\n' > /workspace/tools/hello && chmod +x /workspace/tools/hello",
    )
    .await;
    let with_path = |command: &str| ExecRequest {
        env: env(&[("PATH", "/workspace/tools")]),
        ..req(command)
    };
    let r = m.exec_req("s", with_path("myid -u")).await;
    assert_eq!(r.details.to_json()["denied"], true, "{}", r.text());
    assert!(r.text().contains("id *"), "{}", r.text());
    let r = m.exec_req("s", with_path("hello")).await;
    assert_eq!(aggregated(&r).trim(), "hello-from-tool", "{}", r.text());
}

/// Refusals that come as errors (failing elevated gates, a `Security Violation`) also end
/// `moat exec` with 77, their sentence on stderr; moat's own failures stay 2.
#[test]
fn cli_gate_and_security_violation_refusals_exit_77() {
    let dir = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_moat"))
            .args(args)
            .env("MOAT_HOME", dir.path())
            .env_remove("MOAT_SESSION")
            .output()
            .unwrap()
    };
    let out = run(&["exec", "--elevated", "--", "touch", "/tmp/never"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(77), "{stderr}");
    assert!(stderr.contains("elevated execution is refused"), "{stderr}");
    assert!(stderr.contains("elevated.enabled"), "{stderr}");

    std::fs::write(
        dir.path().join("moat.toml"),
        "[elevated]\nenabled = true\nallow_from = { cli = [\"*\"] }\n",
    )
    .unwrap();
    let marker = dir.path().join("ran");
    let touch = format!("touch {}", marker.display());
    let out = run(&[
        "exec",
        "--elevated",
        "--env",
        "LD_PRELOAD=/x.so",
        "--",
        &touch,
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(77), "{stderr}");
    assert!(stderr.starts_with("moat: Security Violation"), "{stderr}");
    assert!(!marker.exists());

    // A bad request is moat's failure, not a refusal.
    let out = run(&["exec", "--env", "1BAD=x", "--", "true"]);
    assert_eq!(out.status.code(), Some(2));
}
