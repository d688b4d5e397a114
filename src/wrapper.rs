//! The wrapper's vocabulary: the names moat's command wrapper (`process::script`), the
//! executors that run it (`host`, `runtime`) and the env rules (`contract::env`) agree on, and
//! the wrapper scripts themselves, which the container's argv (`process::script`) and the
//! host's (`host::wrap`) both start. A leaf, so the rooms below the process registry use it
//! without reaching up.
//!
//! The prelude prepends PATH entries *after* `/etc/profile` ran (it assigns PATH outright on
//! Debian and Alpine), reading them from `MOAT_PATH_PREPEND` (the operator's `path_prepend`,
//! always in front) and `MOAT_PATH_REQUEST` (a request's `env.PATH`: only the entries the PATH
//! does not hold yet, in order, after the operator's): values are never pasted into the script
//! text. The prelude is POSIX sh, so it reads the same in `sh` and `bash`.

/// Env var carrying the PATH entries to prepend (colon-joined); unset by the prelude.
pub const PATH_PREPEND_VAR: &str = "MOAT_PATH_PREPEND";
/// Env var carrying a request's PATH entries (colon-joined, validated by
/// `crate::contract::env::request_path`); unset by the prelude.
pub const PATH_REQUEST_VAR: &str = "MOAT_PATH_REQUEST";

/// Where the run directory is mounted inside the container.
pub const RUN_DIR: &str = "/run/moat";

/// Runs before the command, on the same line count: the request's entries not yet on the PATH
/// (nor in the operator's list) are picked first; then PATH becomes operator entries, those
/// request entries, the login PATH, with every repeat after its first occurrence and every
/// empty entry (which would search the working directory) removed. `case` patterns in double
/// quotes are literal: an entry is compared, never expanded.
pub const PRELUDE: &str = r#"moat_n=; moat_r=${MOAT_PATH_REQUEST-}; [ -n "$moat_r" ] && moat_r=$moat_r:; while [ -n "$moat_r" ]; do moat_d=${moat_r%%:*}; moat_r=${moat_r#*:}; case ":${MOAT_PATH_PREPEND-}:$moat_n$PATH:" in *":$moat_d:"*) ;; *) moat_n=$moat_n$moat_d: ;; esac; done; moat_r=${MOAT_PATH_PREPEND-}; [ -n "$moat_r" ] && moat_r=$moat_r:; moat_r=$moat_r$moat_n${PATH-}:; moat_n=; while [ -n "$moat_r" ]; do moat_d=${moat_r%%:*}; moat_r=${moat_r#*:}; case ":$moat_n" in *":$moat_d:"*) ;; *) [ -n "$moat_d" ] && moat_n=$moat_n$moat_d: ;; esac; done; PATH=${moat_n%:}; export PATH; unset moat_n moat_r moat_d MOAT_PATH_PREPEND MOAT_PATH_REQUEST"#;

/// moat's wrapper around the login shell (see `process::script` for why each line is there).
pub const WRAPPER: &str = r#"trap ':' TERM INT HUP
printf '%s' "$$" > "/run/moat/$1.pid"
exec < "/run/moat/$1.in"
printf 1 > "/run/moat/$1.ready"
sh -lc "$2" >> "/run/moat/$1.out" 2>&1
s=$?
printf '%s' "$s" > "/run/moat/$1.exit"
exit "$s""#;

/// [`WRAPPER`] with stderr kept apart in `<id>.err` (`moat run`, docs/ARCHITECTURE.md, "moat
/// run"): a CI log wants the command's two streams where the command put them.
pub const SPLIT_WRAPPER: &str = r#"trap ':' TERM INT HUP
printf '%s' "$$" > "/run/moat/$1.pid"
exec < "/run/moat/$1.in"
printf 1 > "/run/moat/$1.ready"
sh -lc "$2" >> "/run/moat/$1.out" 2>> "/run/moat/$1.err"
s=$?
printf '%s' "$s" > "/run/moat/$1.exit"
exit "$s""#;

/// Opening a FIFO for reading blocks until a writer exists: moat holds the writer from
/// before the exec starts, and must keep it until `.ready` shows the open happened (a
/// short-lived CLI would otherwise leave the command waiting forever).
///
/// For PTY processes the terminal must stay the command's stdio, so the wrapper only records
/// the group id and replaces itself with the login shell. There is no exit file: the exit
/// status is the exec's own (`Executor::exec_exit_code`).
///
/// It also gives the terminal its default size when it has none yet. Engine 20.10 (API 1.41)
/// ignores the start request's `ConsoleSize`, and moat's resize after the start races with the
/// command: a `stty size` run at once would otherwise see `0 0`. A size set meanwhile (moat's
/// resize got there first) is left alone. Keep the numbers in step with [`PTY_SIZE`].
pub const PTY_WRAPPER: &str = r#"printf '%s' "$$" > "/run/moat/$1.pid"
[ "$(stty size 2>/dev/null)" = "0 0" ] && stty rows 30 cols 120 2>/dev/null
exec sh -lc "$2""#;

/// A PTY's initial size, rows × cols (docs/mcp.md, "Tools": 120 × 30).
pub const PTY_SIZE: (u16, u16) = (30, 120);

/// The script given to the login shell: the prelude, then the command on its own line.
pub fn login_script(command: &str) -> String {
    format!("{PRELUDE}\n{command}")
}

/// `wrapper` with its login shell made `shell` (`config::Shell::name`). Each wrapper starts
/// the login shell once, as `sh -lc`.
pub fn with_shell(wrapper: &str, shell: &str) -> String {
    debug_assert_eq!(wrapper.matches("sh -lc").count(), 1);
    wrapper.replacen("sh -lc", &format!("{shell} -lc"), 1)
}
