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
//! The prelude prepends PATH entries *after* `/etc/profile` ran (it assigns PATH outright on
//! Debian and Alpine), reading them from `MOAT_PATH_PREPEND`: values are never pasted into
//! the script text.

/// Env var carrying the PATH entries to prepend (colon-joined); unset by the prelude.
pub const PATH_PREPEND_VAR: &str = "MOAT_PATH_PREPEND";
/// Where the run directory is mounted inside the container.
pub const RUN_DIR: &str = "/run/moat";

const WRAPPER: &str = r#"trap ':' TERM INT HUP
printf '%s' "$$" > "/run/moat/$1.pid"
exec < "/run/moat/$1.in"
printf 1 > "/run/moat/$1.ready"
sh -lc "$2" >> "/run/moat/$1.out" 2>&1
s=$?
printf '%s' "$s" > "/run/moat/$1.exit"
exit "$s""#;

/// Opening a FIFO for reading blocks until a writer exists: moat holds the writer from
/// before the exec starts, and must keep it until `.ready` shows the open happened (a
/// short-lived CLI would otherwise leave the command waiting forever).
///
/// For PTY processes the terminal must stay the command's stdio, so the wrapper only records
/// the group id and replaces itself with the login shell. There is no exit file: the exit
/// status is the exec's own (`Runtime::exec_exit_code`).
///
/// It also gives the terminal its default size when it has none yet. Engine 20.10 (API 1.41)
/// ignores the start request's `ConsoleSize`, and moat's resize after the start races with the
/// command: a `stty size` run at once would otherwise see `0 0`. A size set meanwhile (moat's
/// resize got there first) is left alone. Keep the numbers in step with [`PTY_SIZE`].
const PTY_WRAPPER: &str = r#"printf '%s' "$$" > "/run/moat/$1.pid"
[ "$(stty size 2>/dev/null)" = "0 0" ] && stty rows 30 cols 120 2>/dev/null
exec sh -lc "$2""#;

/// A PTY's initial size, rows × cols (SPEC §5: 120×30).
pub const PTY_SIZE: (u16, u16) = (30, 120);

const PRELUDE: &str = r#"if [ -n "${MOAT_PATH_PREPEND-}" ]; then PATH="$MOAT_PATH_PREPEND:$PATH"; export PATH; fi; unset MOAT_PATH_PREPEND"#;

/// The script given to `sh -lc`: the prelude, then the command on its own line.
pub fn login_script(command: &str) -> String {
    format!("{PRELUDE}\n{command}")
}

/// The full argv for process `id` running `command`.
pub fn argv(id: &str, command: &str, pty: bool) -> Vec<String> {
    let wrapper = if pty { PTY_WRAPPER } else { WRAPPER };
    vec![
        "sh".into(),
        "-c".into(),
        wrapper.into(),
        "moat".into(),
        id.into(),
        login_script(command),
    ]
}

/// The argv for a host process: the same wrappers, with the host run directory passed as `$0`
/// in place of the container's fixed mount (never pasted into the script text).
///
/// With a `run_as` prefix (`moat __run-as UID GID GROUPS --`, from `elevated.user`), the
/// wrapper stays moat's user and only the login shell starts through the prefix, which follows
/// the script as arguments `$3…`: the wrapper keeps writing the run files the command can no
/// longer reach, and the command's stdio are descriptors the wrapper opened.
pub fn host_argv(
    run_dir: &str,
    id: &str,
    command: &str,
    pty: bool,
    run_as: &[String],
) -> Vec<String> {
    let wrapper = if pty { PTY_WRAPPER } else { WRAPPER };
    let mut wrapper = wrapper.replace("\"/run/moat/", "\"$0/");
    if !run_as.is_empty() {
        wrapper = if pty {
            wrapper.replace(
                r#"exec sh -lc "$2""#,
                r#"c=$2; shift 2; exec "$@" sh -lc "$c""#,
            )
        } else {
            wrapper.replace(
                r#"sh -lc "$2" >>"#,
                r#"( c=$2; shift 2; exec "$@" sh -lc "$c" ) >>"#,
            )
        };
    }
    let mut argv = vec![
        "/bin/sh".into(),
        "-c".into(),
        wrapper,
        run_dir.into(),
        id.into(),
        login_script(command),
    ];
    argv.extend(run_as.iter().cloned());
    argv
}

/// A helper command that ends process group `pgid`: TERM, up to `grace_ms` for the group to
/// go, then KILL. Runs as one exec so the grace period costs no extra round trips.
pub fn kill_group_argv(pgid: u32, grace_ms: u64) -> Vec<String> {
    let tenths = grace_ms.div_ceil(100);
    let script = format!(
        "kill -TERM -{pgid} 2>/dev/null || exit 0; i=0; while kill -0 -{pgid} 2>/dev/null && [ $i -lt {tenths} ]; do sleep 0.1; i=$((i+1)); done; if kill -0 -{pgid} 2>/dev/null; then kill -KILL -{pgid} 2>/dev/null; echo killed; fi; exit 0"
    );
    vec!["sh".into(), "-c".into(), script]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn command_text_is_an_argument_not_wrapper_text() {
        let hostile = r#"x"; rm -rf / #"#;
        let a = argv("warm-river", hostile, false);
        assert_eq!(a[..2], ["sh", "-c"]);
        assert!(!a[2].contains(hostile));
        assert_eq!(a[4], "warm-river");
        assert!(a[5].ends_with(hostile));
        assert!(a[5].starts_with("if [ -n \"${MOAT_PATH_PREPEND-}\" ]"));
    }

    #[test]
    fn wrapper_paths_use_the_run_mount() {
        for pty in [false, true] {
            let a = argv("id", "true", pty);
            assert!(a[2].contains(RUN_DIR));
            assert!(a[2].contains(r#"sh -lc "$2""#));
        }
    }

    #[test]
    fn pty_wrapper_sets_the_default_size() {
        let a = argv("id", "true", true);
        let (rows, cols) = PTY_SIZE;
        assert!(a[2].contains(&format!("stty rows {rows} cols {cols}")));
        assert!(!argv("id", "true", false)[2].contains("stty"));
    }

    #[test]
    fn host_wrapper_takes_the_dir_as_an_argument() {
        let a = host_argv("/h o'me/run", "id", "true", false, &[]);
        assert!(!a[2].contains(RUN_DIR) && !a[2].contains("h o'me"));
        assert!(a[2].contains(r#""$0/$1.pid""#));
        assert_eq!(a[3], "/h o'me/run");
        assert_eq!(a.len(), 6);
    }

    /// Runs the host wrapper for real with a prefix that records its own argv: the login
    /// shell, and only it, starts through the prefix, and the run files are still written.
    #[test]
    fn host_wrapper_starts_only_the_command_through_run_as() {
        let dir = tempfile::tempdir().unwrap();
        let run = dir.path().display().to_string();
        std::fs::write(dir.path().join("p.in"), "").unwrap();
        // The "prefix": prints its arguments one per line into a file, then runs them.
        let prefix = vec![
            "/bin/sh".to_string(),
            "-c".to_string(),
            r#"printf '%s\n' "$@" > "$0"; exec "$@""#.to_string(),
            dir.path().join("seen").display().to_string(),
        ];
        for pty in [false, true] {
            let a = host_argv(&run, "p", "echo ran-$((1+1))", pty, &prefix);
            let out = std::process::Command::new(&a[0])
                .args(&a[1..])
                .stdin(std::process::Stdio::null())
                .output()
                .unwrap();
            let seen = std::fs::read_to_string(dir.path().join("seen")).unwrap();
            let seen: Vec<&str> = seen.lines().collect();
            assert_eq!(seen[..2], ["sh", "-lc"], "pty={pty}: {seen:?}");
            assert!(seen.last().unwrap().ends_with("echo ran-$((1+1))"));
            assert!(std::fs::read_to_string(dir.path().join("p.pid")).is_ok());
            if pty {
                assert!(String::from_utf8_lossy(&out.stdout).contains("ran-2"));
            } else {
                let log = std::fs::read_to_string(dir.path().join("p.out")).unwrap();
                assert!(log.contains("ran-2"), "{log}");
                let exit = std::fs::read_to_string(dir.path().join("p.exit")).unwrap();
                assert_eq!(exit, "0");
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
}
