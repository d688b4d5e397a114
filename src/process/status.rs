//! How a command's exit status reads: a shell reports death by signal N as status 128+N, and
//! moat reads it back that way (docs/mcp.md, "Timeouts, cancellation and signals").

use super::signal::signal_name;

/// The highest signal number on Linux (`SIGRTMAX`).
const MAX_SIGNAL: i64 = 64;

/// Splits the status the wrapper recorded into `(exit code, signal name)`: 129–192 is the
/// shell's way of saying the command died of signal 1–64, so it becomes that signal with no
/// exit code; anything else is an exit code. A command that itself calls `exit 137` reads as
/// SIGKILL too: POSIX `sh` gives the two the same `$?`, and the shell convention is the one
/// every caller of a shell already relies on.
pub fn split_status(status: i64) -> (Option<i64>, Option<String>) {
    match status - 128 {
        n @ 1..=MAX_SIGNAL => (None, Some(signal_name(n))),
        _ => (Some(status), None),
    }
}

/// The number of a signal named as [`signal_name`] names it (`SIGKILL` → 9, `SIG40` → 40),
/// so the CLI can exit with 128 + it like a shell.
pub fn signal_number(name: &str) -> Option<i64> {
    if let Ok(sig) = name.parse::<nix::sys::signal::Signal>() {
        return Some(sig as i64);
    }
    name.strip_prefix("SIG")
        .and_then(|n| n.parse::<i64>().ok())
        .filter(|n| (1..=MAX_SIGNAL).contains(n))
}

#[cfg(test)]
mod tests {
    use super::{signal_number, split_status};

    #[test]
    fn signal_numbers() {
        assert_eq!(signal_number("SIGKILL"), Some(9));
        assert_eq!(signal_number("SIGTERM"), Some(15));
        assert_eq!(signal_number("SIG40"), Some(40));
        assert_eq!(signal_number("SIG99"), None);
        assert_eq!(signal_number("KILL"), None);
        for n in 1..=64 {
            let (_, name) = split_status(128 + n);
            assert_eq!(signal_number(&name.unwrap()), Some(n));
        }
    }

    #[test]
    fn statuses_and_signals() {
        let rows = [
            (0, Some(0), None),
            (1, Some(1), None),
            (127, Some(127), None),
            (128, Some(128), None),
            (129, None, Some("SIGHUP")),
            (130, None, Some("SIGINT")),
            (137, None, Some("SIGKILL")),
            (143, None, Some("SIGTERM")),
            (192, None, Some("SIG64")),
            (193, Some(193), None),
            (255, Some(255), None),
            (-1, Some(-1), None),
        ];
        for (status, code, signal) in rows {
            assert_eq!(
                split_status(status),
                (code, signal.map(str::to_string)),
                "{status}"
            );
        }
    }
}
