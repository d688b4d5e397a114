//! When a process started, from `/proc/<pid>/stat`: with its pid, it names one process, where
//! a pid alone may name whichever process the kernel gave it to next.

use std::io::Read;
use std::path::Path;

/// Bytes read of a stat file: its fields fit with room (the command name is at most 16).
const STAT_READ: usize = 1024;

/// The `starttime` field of a `/proc/<pid>/stat` text (clock ticks after boot). The command
/// name is in parentheses and is the process's own to choose (spaces and parentheses
/// included), so fields are counted from the last `)`: `starttime` is the 20th after it.
pub fn parse(stat: &str) -> Option<u64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_ascii_whitespace().nth(19)?.parse().ok()
}

/// When process `pid` started, read under `proc_root` (`/proc`); `None` when it is gone or
/// unreadable.
pub fn of(proc_root: &Path, pid: u32) -> Option<u64> {
    let mut text = String::with_capacity(STAT_READ);
    std::fs::File::open(proc_root.join(pid.to_string()).join("stat"))
        .ok()?
        .take(STAT_READ as u64)
        .read_to_string(&mut text)
        .ok()?;
    parse(&text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_start_is_counted_from_the_last_parenthesis() {
        let line = "42 (a) b) (c) S 1 42 42 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 50";
        assert_eq!(parse(line), Some(987654));
        assert_eq!(parse("42 (x) S 1"), None);
        assert_eq!(parse("no parenthesis"), None);
    }

    #[test]
    fn this_process_has_a_start_and_a_gone_one_has_none() {
        let me = of(Path::new("/proc"), std::process::id());
        assert!(me.is_some_and(|t| t > 0));
        assert_eq!(of(Path::new("/proc"), std::process::id()), me);
        assert_eq!(of(Path::new("/proc"), u32::MAX), None);
    }
}
