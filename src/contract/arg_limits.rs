//! What one `execve` can carry (docs/security.md, "Bounds on what one exec carries").
//!
//! A command reaches its shell as one argument (`sh -lc <prelude + command>`), and each
//! environment variable as one `NAME=value` string. Linux refuses an exec whose single argument
//! or environment string is longer than `MAX_ARG_STRLEN` (32 pages: 128 KiB with 4 KiB pages),
//! or whose arguments and environment together pass a quarter of the stack limit, with `E2BIG`.
//! Inside a container that failure happens in the engine's exec, after moat started the
//! process, and reaches the caller as a command with no output that "exited" 126 or 1. So every
//! such string is measured before anything starts, and a request past a bound is refused with
//! the bound and the field that passed it.
//!
//! The command text itself is already held to 64 KiB by the parsing bounds; what can grow past
//! 128 KiB is what moat makes of it (the policy's rebuilt plan quotes every argument: `'` becomes
//! `'\''`) and what the configuration adds (env values, secrets read from files).

/// The longest single argument or environment string, its terminating NUL included (Linux's
/// `MAX_ARG_STRLEN` with 4 KiB pages).
pub const MAX_ARG_BYTES: usize = 128 * 1024;

/// The most arguments and environment together may hold. Linux allows a quarter of the stack
/// limit (2 MiB under the usual 8 MiB); half of that leaves room for smaller stack limits and
/// for the pointers the kernel counts too.
pub const MAX_EXEC_BYTES: usize = 1024 * 1024;

/// Room kept for the wrapper script and moat's own arguments beside the command.
const WRAPPER_BYTES: usize = 4 * 1024;

/// Why an exec would not start. Messages complete "failed to …".
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ArgLimitError {
    #[error("run the command: as it would run ({what}) it is {len} bytes, more than the {MAX_ARG_BYTES} bytes one argument may carry on Linux (MAX_ARG_STRLEN); shorten it, or write it to a script under /workspace and run that")]
    Command { what: &'static str, len: usize },
    #[error("set env var `{name}`: `{name}=value` is {len} bytes, more than the {MAX_ARG_BYTES} bytes one environment string may carry on Linux (MAX_ARG_STRLEN)")]
    EnvVar { name: String, len: usize },
    #[error("run the command: its text and environment take {len} bytes together, more than the {MAX_EXEC_BYTES} bytes moat lets one exec carry (Linux refuses past a quarter of the stack limit)")]
    Total { len: usize },
}

/// Checks the argument the login shell gets (`script`: the prelude and the command) and the
/// environment (`NAME=value` strings). `what` names the command's form for the message
/// (`the command`, `the policy's rebuilt plan`).
pub fn check_exec(script: &str, env: &[String], what: &'static str) -> Result<(), ArgLimitError> {
    let len = script.len() + 1;
    if len > MAX_ARG_BYTES {
        return Err(ArgLimitError::Command { what, len });
    }
    let mut total = len + WRAPPER_BYTES;
    for entry in env {
        let len = entry.len() + 1;
        if len > MAX_ARG_BYTES {
            let name = entry.split('=').next().unwrap_or_default();
            return Err(ArgLimitError::EnvVar {
                name: crate::output::escape_display(name),
                len,
            });
        }
        total += len;
    }
    if total > MAX_EXEC_BYTES {
        return Err(ArgLimitError::Total { len: total });
    }
    Ok(())
}

/// Whether one string of `len` bytes fits in an argument (for settings checked at load).
pub fn fits_one_argument(len: usize) -> bool {
    len < MAX_ARG_BYTES
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_and_the_fields_they_name() {
        let ok = "x".repeat(MAX_ARG_BYTES - 1);
        assert_eq!(check_exec(&ok, &[], "the command"), Ok(()));
        let long = "x".repeat(MAX_ARG_BYTES);
        let err = check_exec(&long, &[], "the policy's rebuilt plan").unwrap_err();
        let text = err.to_string();
        assert!(text.contains("the policy's rebuilt plan"), "{text}");
        assert!(
            text.contains("131072 bytes") && text.contains("MAX_ARG_STRLEN"),
            "{text}"
        );

        let value = format!("BIG={}", "v".repeat(200 * 1024));
        let err = check_exec("true", &["A=1".into(), value], "the command").unwrap_err();
        assert_eq!(
            err,
            ArgLimitError::EnvVar {
                name: "BIG".into(),
                len: 200 * 1024 + 5
            }
        );
        assert!(err.to_string().contains("`BIG`"), "{err}");
        // The value itself is never quoted: it may be a secret.
        assert!(!err.to_string().contains("vvvv"));

        let many: Vec<String> = (0..10)
            .map(|i| format!("K{i}={}", "v".repeat(120 * 1024)))
            .collect();
        assert!(matches!(
            check_exec("true", &many, "the command"),
            Err(ArgLimitError::Total { .. })
        ));
        assert!(fits_one_argument(MAX_ARG_BYTES - 1));
        assert!(!fits_one_argument(MAX_ARG_BYTES));
    }
}
