//! The wrapper's vocabulary: the names moat's command wrapper (`process::script`), the
//! executors that run it (`host`, `runtime`) and the env rules (`contract::env`) agree on. A
//! leaf, so the rooms below the process registry use it without reaching up.
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
