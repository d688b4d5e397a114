//! The exact argv a command runs as inside the container.
//!
//! ```text
//! sh -c <WRAPPER> moat <id> <prelude + command>
//! WRAPPER: record $$ (the process-group id) → open stdin from the process's FIFO → mark
//!          `.ready` (write a byte into it) → run `sh -lc "$2"` with stdout+stderr appended to its log → record the
//!          exit status
//! ```
//!
//! Why a wrapper around the `sh -lc`:
//! - Docker has no exec-kill API and reports host PIDs (moby#9098, #43208). Every exec'd
//!   process leads its own process group, so the wrapper records `$$` and moat later kills
//!   the whole group from a second exec.
//! - The command writes to a log file on a host bind mount instead of the exec stream, so its
//!   output and exit status survive a crash of moat, and a background child holding stdio
//!   cannot keep the exec open (moby's 2 s drain, daemon/monitor.go).
//! - The wrapper traps TERM/INT/HUP with a no-op so that, when moat signals the group, it
//!   outlives the command and still writes the exit status. (An *ignored* signal would be
//!   inherited by the command and make it unkillable by TERM; a trap is reset in children.)
//!
//! The prelude, the run directory's mount and the PATH variables are the wrapper's vocabulary
//! (`crate::wrapper`), which the executors and the env rules share. The login shell is `sh`
//! unless the config says `bash` (`config::Shell`); the wrapper, the
//! process group, the run files and the prelude are the same for both.

use crate::config::Shell;
use crate::runtime::{Launch, Wrapped, Wrapping};
use crate::wrapper::{login_script, with_shell, PTY_WRAPPER, RUN_DIR, SPLIT_WRAPPER, WRAPPER};

/// The full argv for process `id` running `command` in `shell`.
pub fn argv(id: &str, command: &str, pty: bool, shell: Shell) -> Vec<String> {
    let wrapper = if pty { PTY_WRAPPER } else { WRAPPER };
    vec![
        "sh".into(),
        "-c".into(),
        with_shell(wrapper, shell.name()),
        "moat".into(),
        id.into(),
        login_script(command),
    ]
}

/// The login shell the wrapper starts for `command`: what a transport that does the wrapper's
/// work itself runs (docs/helper.md, "The wrapper in the helper").
pub fn login_argv(command: &str, shell: Shell) -> Vec<String> {
    vec![shell.name().into(), "-lc".into(), login_script(command)]
}

/// [`argv`] for a command whose stderr goes to `<id>.err` rather than into its log (never a
/// PTY: a terminal has one stream).
pub fn split_argv(id: &str, command: &str, shell: Shell) -> Vec<String> {
    vec![
        "sh".into(),
        "-c".into(),
        with_shell(SPLIT_WRAPPER, shell.name()),
        "moat".into(),
        id.into(),
        login_script(command),
    ]
}

/// How a container runs `l`: moat's wrapper at the run mount, the command marked with its id
/// (so a kill finds what leaves the process group, [`sweep_argv`]), stderr kept apart and the
/// sticky state recorded when asked, the run files the sandbox user's, and what the wrapper
/// runs for the helper to do the wrapper's work itself (a terminal's wrapper is another one).
pub fn container_wrap(l: &Launch) -> Wrapping {
    let split = l.split_stderr && !l.pty;
    let command = if l.sticky {
        sticky_command(&l.id, &l.command)
    } else {
        l.command.clone()
    };
    let mut env = l.env.clone();
    env.push(format!("{PROCESS_MARKER}={}", l.id));
    let argv = if split {
        split_argv(&l.id, &command, l.shell)
    } else {
        argv(&l.id, &command, l.pty, l.shell)
    };
    let wrapped = (!l.pty).then(|| Wrapped {
        process_id: l.id.clone(),
        login: login_argv(&command, l.shell),
        split_stderr: split,
    });
    Wrapping {
        spec: l.spec(argv, env, wrapped),
        owner: Some(l.owner),
        split_stderr: split,
        sticky: l.sticky,
    }
}

/// `command` for a sticky session (docs/mcp.md, "Sticky cwd and env"). The login shell
/// first writes its exported variables into `<id>.state` (a run file moat made), and when it
/// exits — also after `exit N`, a failure, or TERM/INT/HUP, which it turns into an exit so
/// the trap runs — appends an empty record, the directory it ends in and its variables then,
/// all NUL-terminated. `id` is moat's own process id (letters, digits and `-`), never the
/// request's text.
pub fn sticky_command(id: &str, command: &str) -> String {
    debug_assert!(id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-'));
    let state = format!("{RUN_DIR}/{id}.state");
    format!(
        "env -0 > \"{state}\" 2>/dev/null\ntrap 'moat_x=$?; {{ printf \"\\0%s\\0\" \"$PWD\"; env -0; }} >> \"{state}\" 2>/dev/null; exit $moat_x' EXIT\ntrap 'exit 143' TERM; trap 'exit 130' INT; trap 'exit 129' HUP\n{command}"
    )
}

/// A helper command that ends process group `pgid`: TERM, up to `grace_ms` for the group to
/// go, then KILL. Runs as one exec so the grace period costs no extra round trips. It prints
/// `signalled` when the group had members, and `killed` when it needed the KILL.
///
/// The KILL sits in an EXIT trap because the wait may be impossible: with the pids limit full
/// (a fork bomb) the helper cannot fork its `sleep`, and dash ends the script on a failed
/// fork, running the trap. A fork bomb under bash needs that KILL: bash blocks SIGTERM while
/// it retries a failed fork, for up to half a minute (docs/security.md, "Sandbox limits").
/// The helper itself still starts then: the engine moves an exec into the cgroup, which the
/// pids limit does not refuse; only forks are counted.
pub fn kill_group_argv(pgid: u32, grace_ms: u64) -> Vec<String> {
    let tenths = grace_ms.div_ceil(100);
    let script = format!(
        "kill -TERM -{pgid} 2>/dev/null || exit 0; echo signalled; trap 'if kill -0 -{pgid} 2>/dev/null; then kill -KILL -{pgid} 2>/dev/null; echo killed; fi' EXIT; i=0; while kill -0 -{pgid} 2>/dev/null && [ $i -lt {tenths} ]; do sleep 0.1; i=$((i+1)); done; exit 0"
    );
    vec!["sh".into(), "-c".into(), script]
}

/// Env var every container command carries, set to its process id: it survives `setsid`,
/// `nohup` and double forks, so a kill can find what left the process group.
pub const PROCESS_MARKER: &str = "MOAT_PROCESS";

/// A helper command that kills every process whose environment holds `PROCESS_MARKER=<id>`,
/// printing `swept` for each; `None` for an id that is not a plain generated name (it is
/// pasted into the script). Scans until a pass finds nothing (at most five), so a marked
/// process forking meanwhile is caught by the next pass. Processes that scrubbed their
/// environment, or made themselves unreadable (`PR_SET_DUMPABLE`), are not found
/// (docs/security.md, "Ending a command").
pub fn sweep_argv(id: &str) -> Option<Vec<String>> {
    let plain = !id.is_empty()
        && id.len() <= 64
        && id
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    if !plain {
        return None;
    }
    // One `grep -z` over every environment per pass where grep reads NUL-separated lines
    // (GNU's, busybox's): the per-process `tr | grep` below costs two program starts per
    // process, which under gVisor made every foreground command's end 80 ms slower. grep's own
    // command line (`/proc/self/cmdline`, NUL-separated words, the marker one of them) is
    // listed too: it is listed exactly when `-z` works, and otherwise each process is looked
    // at in turn.
    let script = format!(
        "m={PROCESS_MARKER}={id}; n=0; while [ $n -lt 5 ]; do f=0; l=$(grep -lzxF -- \"$m\" /proc/self/cmdline /proc/[0-9]*/environ 2>/dev/null); case \"$l\" in /proc/self/cmdline*) for e in $l; do p=${{e%/environ}}; case $p in /proc/self/cmdline|/proc/$$) continue ;; esac; kill -KILL \"${{p#/proc/}}\" 2>/dev/null && echo swept && f=1; done ;; *) for p in /proc/[0-9]*; do [ \"$p\" = /proc/$$ ] && continue; if tr '\\0' '\\n' < \"$p/environ\" 2>/dev/null | grep -qxF \"$m\"; then kill -KILL \"${{p#/proc/}}\" 2>/dev/null && echo swept && f=1; fi; done ;; esac; [ $f = 0 ] && break; n=$((n+1)); done; exit 0"
    );
    Some(vec!["sh".into(), "-c".into(), script])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wrapper::{PATH_PREPEND_VAR, PATH_REQUEST_VAR};
    use crate::wrapper::{PRELUDE, PTY_SIZE};

    #[test]
    fn the_sweep_takes_plain_ids_only() {
        for bad in ["", "a b", "x'; rm -rf /", "A", "a/b", &"a".repeat(65)] {
            assert!(sweep_argv(bad).is_none(), "{bad:?}");
        }
        assert!(sweep_argv("jolly-ridge-2").is_some());
    }

    /// Both ways the sweep looks: one `grep -z` over every environment, and, with a grep that
    /// refuses `-z` (a stand-in for one without it), a look at each process.
    #[test]
    fn the_sweep_kills_marked_processes_that_left_their_group() {
        let no_z = tempfile::tempdir().unwrap();
        let grep = no_z.path().join("grep");
        std::fs::write(
            &grep,
            "#!/bin/sh\ncase \"$1\" in *z*) exit 2;; esac\nexec /usr/bin/grep \"$@\"\n",
        )
        .unwrap();
        std::fs::set_permissions(&grep, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        let path = format!(
            "{}:{}",
            no_z.path().display(),
            std::env::var("PATH").unwrap()
        );
        for (way, path) in [("grep -z", None), ("each process", Some(path))] {
            sweeps(way, path.as_deref());
        }
    }

    fn sweeps(way: &str, path: Option<&str>) {
        // A marked process in a session of its own (what `setsid` makes), and an unmarked one.
        let spawn = |marker: &str| {
            let mut c = std::process::Command::new("setsid");
            c.args(["sleep", "1000"]).env(PROCESS_MARKER, marker);
            c.spawn().unwrap()
        };
        let mut marked = spawn("sweep-test-a");
        let mut other = spawn("sweep-test-b");
        let argv = sweep_argv("sweep-test-a").unwrap();
        let mut sweep = std::process::Command::new(&argv[0]);
        sweep.args(&argv[1..]);
        if let Some(path) = path {
            sweep.env("PATH", path);
        }
        let out = sweep.output().unwrap();
        eprintln!("{way}: {out:?}");
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("swept"),
            "{out:?}"
        );
        let status = marked.wait().unwrap();
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(status.signal(), Some(9));
        assert!(
            other.try_wait().unwrap().is_none(),
            "another marker is left alone"
        );
        other.kill().unwrap();
        other.wait().unwrap();
    }

    #[test]
    fn command_text_is_an_argument_not_wrapper_text() {
        let hostile = r#"x"; rm -rf / #"#;
        let a = argv("warm-river", hostile, false, Shell::Sh);
        assert_eq!(a[..2], ["sh", "-c"]);
        assert!(!a[2].contains(hostile));
        assert_eq!(a[4], "warm-river");
        assert!(a[5].ends_with(hostile));
        assert!(a[5].starts_with(PRELUDE));
    }

    #[test]
    fn wrapper_paths_use_the_run_mount() {
        for pty in [false, true] {
            let a = argv("id", "true", pty, Shell::Sh);
            assert!(a[2].contains(RUN_DIR));
            assert!(a[2].contains(r#"sh -lc "$2""#));
        }
    }

    #[test]
    fn pty_wrapper_sets_the_default_size() {
        let a = argv("id", "true", true, Shell::Sh);
        let (rows, cols) = PTY_SIZE;
        assert!(a[2].contains(&format!("stty rows {rows} cols {cols}")));
        assert!(!argv("id", "true", false, Shell::Sh)[2].contains("stty"));
    }

    #[test]
    fn bash_replaces_only_the_login_shell() {
        for pty in [false, true] {
            let a = argv("id", "true", pty, Shell::Bash);
            assert_eq!(a[..2], ["sh", "-c"], "the wrapper stays sh");
            assert!(a[2].contains(r#"bash -lc "$2""#), "{}", a[2]);
        }
        assert_eq!(
            serde_json::from_str::<Shell>("\"bash\"").unwrap(),
            Shell::Bash
        );
        assert!(serde_json::from_str::<Shell>("\"zsh\"").is_err());
    }

    /// Runs the prelude for real (no login profile): (login PATH, operator entries, request
    /// entries) → the PATH the command sees.
    #[test]
    fn prelude_prepends_request_entries_not_yet_present() {
        let rows: &[(&str, &str, &str, &str)] = &[
            ("/usr/bin:/bin", "", "", "/usr/bin:/bin"),
            (
                "/usr/bin:/bin",
                "",
                "/opt/x:/usr/bin",
                "/opt/x:/usr/bin:/bin",
            ),
            ("/usr/bin:/bin", "/tools", "", "/tools:/usr/bin:/bin"),
            // The host case: the operator's list holds the whole PATH, the profile adds it
            // again; each entry stays once, at its first place.
            (
                "/root/.cargo/bin:/usr/local/bin:/usr/bin:/root/.cargo/bin",
                "/root/.cargo/bin:/usr/local/bin:/usr/bin:/bin",
                "",
                "/root/.cargo/bin:/usr/local/bin:/usr/bin:/bin",
            ),
            ("/usr/bin::/bin:", "", "", "/usr/bin:/bin"),
            ("/usr/bin:/bin", "/bin", "", "/bin:/usr/bin"),
            (
                "/usr/bin:/bin",
                "/tools",
                "/opt/x:/tools:/bin:/opt/y",
                "/tools:/opt/x:/opt/y:/usr/bin:/bin",
            ),
            // Glob and shell characters are compared literally, never expanded.
            (
                "/usr/bin",
                "",
                "/o*t/$(id):/usr/*",
                "/o*t/$(id):/usr/*:/usr/bin",
            ),
            ("/usr/bin", "", "/a b/c", "/a b/c:/usr/bin"),
        ];
        for shell in ["/bin/sh", "bash"] {
            for (login, operator, request, want) in rows {
                let mut cmd = std::process::Command::new(shell);
                cmd.arg("-c")
                    .arg(login_script(
                        r#"printf '%s|%s|%s' "$PATH" "${MOAT_PATH_PREPEND-unset}" "${MOAT_PATH_REQUEST-unset}""#,
                    ))
                    .env_clear()
                    .env("PATH", login);
                if !operator.is_empty() {
                    cmd.env(PATH_PREPEND_VAR, operator);
                }
                if !request.is_empty() {
                    cmd.env(PATH_REQUEST_VAR, request);
                }
                let out = cmd.output().unwrap();
                let got = String::from_utf8_lossy(&out.stdout);
                assert_eq!(got, format!("{want}|unset|unset"), "{shell}: {request}");
            }
        }
    }

    #[test]
    fn kill_rounds_grace_up() {
        let a = kill_group_argv(42, 3000);
        assert!(a[2].contains("kill -TERM -42"));
        assert!(a[2].contains("-lt 30"));
        assert!(a[2].contains("kill -KILL -42"));
        assert!(kill_group_argv(7, 50)[2].contains("-lt 1"));
    }

    /// Runs the helper for real: (what the group does with TERM) → what the helper says.
    #[test]
    fn kill_helper_escalates_and_reports() {
        use std::os::unix::process::CommandExt;
        let rows = [
            // One process each, reaped by this test (an orphan here waits for the host's init).
            ("exec sleep 30", "signalled\n"),
            // TERM ignored (inherited across exec): the KILL after the grace ends it.
            ("trap '' TERM; exec sleep 30", "signalled\nkilled\n"),
        ];
        for (script, want) in rows {
            let mut child = std::process::Command::new("sh")
                .args(["-c", script])
                .process_group(0)
                .spawn()
                .unwrap();
            let pgid = child.id();
            // Reaped at once, as the container's init does: a zombie still counts as a member.
            let reaper = std::thread::spawn(move || child.wait());
            std::thread::sleep(std::time::Duration::from_millis(200));
            let argv = kill_group_argv(pgid, 300);
            let out = std::process::Command::new(&argv[0])
                .args(&argv[1..])
                .output()
                .unwrap();
            assert_eq!(String::from_utf8_lossy(&out.stdout), want, "{script}");
            let _ = reaper.join();
            let gone = nix::sys::signal::killpg(nix::unistd::Pid::from_raw(pgid as i32), None);
            assert!(gone.is_err(), "{script}: the group is still there");
        }
        // A group that is already gone: nothing said.
        let argv = kill_group_argv(999_999, 100);
        let out = std::process::Command::new(&argv[0])
            .args(&argv[1..])
            .output()
            .unwrap();
        assert_eq!(String::from_utf8_lossy(&out.stdout), "");
    }
}
