//! Signal names as moat prints them (`SIGTERM`), shared by the supervisor, which names the
//! signal that ended a command, and the exit status reading (`status.rs`).

/// `SIGTERM` for 15 and so on; unknown numbers print as `SIG<n>`.
pub fn signal_name(n: i64) -> String {
    i32::try_from(n)
        .ok()
        .and_then(|n| nix::sys::signal::Signal::try_from(n).ok())
        .map(|s| s.as_str().to_string())
        .unwrap_or_else(|| format!("SIG{n}"))
}

#[cfg(test)]
mod tests {
    use super::signal_name;

    #[test]
    fn signal_names() {
        assert_eq!(signal_name(15), "SIGTERM");
        assert_eq!(signal_name(9), "SIGKILL");
        assert_eq!(signal_name(2), "SIGINT");
        assert_eq!(signal_name(99), "SIG99");
    }
}
