//! Whether a process descends from a host command moat started (docs/security.md, "The
//! operator channel").
//!
//! Every host command moat starts carries [`HOST_MARKER`] in its environment and leads its own
//! session and process group. A process is taken for part of a host command when the marker
//! is in its own environment, in the environment of any ancestor, or in that of its session
//! leader or process-group leader. The wrapper that leads the session keeps its environment
//! for as long as the command runs, so a child that clears its own environment is still found
//! through its ancestry or its session. What this cannot see: a process that left both (a
//! double fork with `setsid`) and cleared its environment; docs/security.md says so, and why
//! `elevated.user` is the real boundary.
//!
//! Everything reads below a `/proc` root given by the caller, so the logic is tested over a
//! fake tree.

use std::io::Read;
use std::path::{Path, PathBuf};

/// Env var moat sets on every host command: the moat process id of that command.
pub const HOST_MARKER: &str = "MOAT_HOST_COMMAND";

/// Ancestors examined at most; pid chains are short, and a corrupt tree must not loop.
const MAX_DEPTH: usize = 4096;
/// Bytes of a process environment read at most (the kernel caps argv + env near this).
const MAX_ENVIRON: u64 = 4 << 20;
/// The buffer a process environment is read into first: most fit.
const ENVIRON_READ: usize = 16 << 10;
/// The buffer `/proc/<pid>/stat` is read into: its fields and a 16-byte name fit.
const STAT_READ: usize = 1024;

/// Where the marker was found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostOrigin {
    /// The moat process id of the host command (the marker's value), for the audit log.
    pub process_id: String,
    /// The pid whose environment carries the marker.
    pub marked_pid: u32,
    /// How that pid relates to the one examined: "itself", "ancestor", "session leader" or
    /// "process-group leader".
    pub relation: &'static str,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum LineageError {
    /// The process is gone or its status unreadable: its origin cannot be checked, so callers
    /// refuse (fail closed).
    #[error("read the status of pid {pid}: {reason}")]
    Unreadable { pid: u32, reason: String },
}

/// The ids of a process that matter here, from `/proc/<pid>/stat`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stat {
    ppid: u32,
    pgrp: u32,
    session: u32,
    /// Clock ticks after boot when the process started: with the pid, it names one process
    /// (a pid alone may be reused).
    start: u64,
}

/// Parses `/proc/<pid>/stat`. The command name is in parentheses and may itself contain
/// spaces and parentheses, so fields are counted from the last `)`.
fn parse_stat(text: &str) -> Option<Stat> {
    let rest = &text[text.rfind(')')? + 1..];
    let mut fields = rest.split_ascii_whitespace();
    let _state = fields.next()?;
    let ppid = fields.next()?.parse().ok()?;
    let pgrp = fields.next()?.parse().ok()?;
    let session = fields.next()?.parse().ok()?;
    // Fields 7 to 21 (tty_nr … itrealvalue), then starttime.
    let start = fields.nth(15)?.parse().ok()?;
    Some(Stat {
        ppid,
        pgrp,
        session,
        start,
    })
}

fn read_stat(root: &Path, pid: u32) -> Result<Stat, LineageError> {
    let path = root.join(pid.to_string()).join("stat");
    let unreadable = |e: std::io::Error| LineageError::Unreadable {
        pid,
        reason: e.to_string(),
    };
    // Room for the whole file up front: /proc reports a size of 0, so a growing buffer would
    // read it in several small pieces, and every socket request reads a few of these.
    let mut text = String::with_capacity(STAT_READ);
    std::fs::File::open(&path)
        .and_then(|mut f| f.read_to_string(&mut text))
        .map_err(unreadable)?;
    parse_stat(&text).ok_or_else(|| LineageError::Unreadable {
        pid,
        reason: "unexpected format".into(),
    })
}

/// When `pid` started, or `None` when it is gone (`proc_start`). A socket peer is checked
/// again on each request; comparing this with the value at `connect` shows whether the pid
/// still names the process that connected.
pub fn start_time(root: &Path, pid: u32) -> Option<u64> {
    crate::proc_start::of(root, pid)
}

/// The marker's value in a NUL-separated environment block.
fn marker_in(environ: &[u8]) -> Option<String> {
    let prefix = format!("{HOST_MARKER}=");
    environ
        .split(|b| *b == 0)
        .find_map(|kv| kv.strip_prefix(prefix.as_bytes()))
        .map(|v| String::from_utf8_lossy(v).into_owned())
}

/// The marker in `pid`'s environment. An unreadable environment (the process is gone, or
/// belongs to a user moat may not inspect) carries no marker: host commands are moat's own
/// children, so moat can always read theirs.
fn marker_of(root: &Path, pid: u32) -> Option<String> {
    let path: PathBuf = root.join(pid.to_string()).join("environ");
    // Room for a usual environment up front (see `read_stat`); a larger one grows the buffer.
    let mut buf = Vec::with_capacity(ENVIRON_READ);
    std::fs::File::open(path)
        .ok()?
        .take(MAX_ENVIRON)
        .read_to_end(&mut buf)
        .ok()?;
    marker_in(&buf)
}

/// Whether `pid` is, or descends from, a host command moat started; `Err` when `pid` cannot
/// be examined at all. `known` names pids the caller knows lead host commands (the daemon's
/// live host processes), which catches a leader whose environment was rewritten.
pub fn host_origin(
    root: &Path,
    pid: u32,
    known: &dyn Fn(u32) -> Option<String>,
) -> Result<Option<HostOrigin>, LineageError> {
    if pid == 0 {
        return Err(LineageError::Unreadable {
            pid,
            reason: "the process is outside moat's pid namespace".into(),
        });
    }
    let own = read_stat(root, pid)?;
    // The session and group leaders are usually ancestors as well: each pid is looked at
    // once (a second look at an unmarked one finds what the first found).
    let mut looked = Vec::new();
    let mut found = |p: u32, relation: &'static str| {
        if looked.contains(&p) {
            return None;
        }
        looked.push(p);
        known(p)
            .or_else(|| marker_of(root, p))
            .map(|process_id| HostOrigin {
                process_id,
                marked_pid: p,
                relation,
            })
    };
    if let Some(o) = found(pid, "itself") {
        return Ok(Some(o));
    }
    for (p, relation) in [
        (own.session, "session leader"),
        (own.pgrp, "process-group leader"),
    ] {
        if p > 1 && p != pid {
            if let Some(o) = found(p, relation) {
                return Ok(Some(o));
            }
        }
    }
    let mut next = own.ppid;
    for _ in 0..MAX_DEPTH {
        if next <= 1 {
            break;
        }
        if let Some(o) = found(next, "ancestor") {
            return Ok(Some(o));
        }
        match read_stat(root, next) {
            Ok(s) => next = s.ppid,
            // An ancestor that exited mid-walk: its children were re-parented, and the walk
            // cannot go on from a pid that no longer exists.
            Err(_) => break,
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fake `/proc`: pid → (ppid, pgrp, session, environ entries).
    fn tree(procs: &[(u32, u32, u32, u32, &[&str])]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for (pid, ppid, pgrp, sid, env) in procs {
            let d = dir.path().join(pid.to_string());
            std::fs::create_dir(&d).unwrap();
            std::fs::write(
                d.join("stat"),
                format!(
                    "{pid} (a (b) c) S {ppid} {pgrp} {sid} 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 {} 1 2",
                    pid * 10
                ),
            )
            .unwrap();
            let mut block = Vec::new();
            for kv in *env {
                block.extend_from_slice(kv.as_bytes());
                block.push(0);
            }
            std::fs::write(d.join("environ"), block).unwrap();
        }
        dir
    }

    fn none(_: u32) -> Option<String> {
        None
    }

    const MARK: &str = "MOAT_HOST_COMMAND=warm-river";

    #[test]
    fn stat_fields_count_from_the_last_parenthesis() {
        let s =
            parse_stat("42 (we)ird ) name) S 7 8 9 0 -1 4194560 1 2 3 4 5 6 7 8 20 0 1 0 777 9")
                .unwrap();
        assert_eq!(
            s,
            Stat {
                ppid: 7,
                pgrp: 8,
                session: 9,
                start: 777
            }
        );
        assert_eq!(parse_stat("42 (x) S 7 8 9 0 -1"), None, "cut short");
        assert_eq!(parse_stat("42 noparen S 1 2 3"), None);
        assert_eq!(parse_stat("42 (x) S one 2 3"), None);
    }

    #[test]
    fn marker_must_be_a_whole_name() {
        assert_eq!(marker_in(b"A=1\0MOAT_HOST_COMMAND=x\0"), Some("x".into()));
        assert_eq!(
            marker_in(b"XMOAT_HOST_COMMAND=x\0MOAT_HOST_COMMANDS=y"),
            None
        );
        assert_eq!(marker_in(b""), None);
    }

    #[test]
    fn who_descends_from_a_host_command() {
        // 100 moat (session 50) → 200 wrapper (own session, marked) → 300 sh (env cleared)
        // → 400 curl (env cleared, own process group); 500 setsid'd child of 400 with a
        // cleared env, its parent still alive; 600 an operator shell; 700 a double-forked
        // orphan (parent 1, own session, env cleared); 800 re-parented child of a gone pid.
        let t = tree(&[
            (100, 1, 50, 50, &["HOME=/root"]),
            (200, 100, 200, 200, &[MARK, "MOAT_SHELL=exec"]),
            (300, 200, 200, 200, &[]),
            (400, 300, 400, 200, &[]),
            (500, 400, 500, 500, &[]),
            (600, 1, 600, 600, &["HOME=/root"]),
            (700, 1, 700, 700, &[]),
            (800, 999, 800, 800, &[]),
        ]);
        let root = t.path();
        let at = |pid| host_origin(root, pid, &none).unwrap();
        assert_eq!(
            at(200),
            Some(HostOrigin {
                process_id: "warm-river".into(),
                marked_pid: 200,
                relation: "itself"
            })
        );
        assert_eq!(at(300).unwrap().relation, "session leader");
        assert_eq!(at(400).unwrap().relation, "session leader");
        let escaped = at(500).unwrap();
        assert_eq!((escaped.relation, escaped.marked_pid), ("ancestor", 200));
        assert_eq!(at(100), None, "moat itself is not a host command");
        assert_eq!(at(600), None, "an operator's shell");
        // The documented limit: double fork + setsid + cleared env leaves no trace.
        assert_eq!(at(700), None);
        assert_eq!(at(800), None);
    }

    #[test]
    fn known_leaders_count_without_their_environment() {
        let t = tree(&[(200, 100, 200, 200, &[]), (300, 200, 300, 300, &[])]);
        let known = |p: u32| (p == 200).then(|| "cold-lake".to_string());
        let o = host_origin(t.path(), 300, &known).unwrap().unwrap();
        assert_eq!(
            (o.process_id.as_str(), o.relation),
            ("cold-lake", "ancestor")
        );
    }

    #[test]
    fn an_unknown_or_foreign_pid_fails_closed() {
        let t = tree(&[]);
        assert!(matches!(
            host_origin(t.path(), 4242, &none),
            Err(LineageError::Unreadable { pid: 4242, .. })
        ));
        assert!(host_origin(t.path(), 0, &none).is_err());
    }

    #[test]
    fn start_times_tell_a_reused_pid() {
        let t = tree(&[(300, 1, 300, 300, &[])]);
        assert_eq!(start_time(t.path(), 300), Some(3000));
        assert_eq!(start_time(t.path(), 301), None);
        let me = std::process::id();
        let live = start_time(Path::new("/proc"), me).unwrap();
        assert_eq!(start_time(Path::new("/proc"), me), Some(live));
    }

    #[test]
    fn a_parent_loop_ends() {
        let t = tree(&[(10, 11, 10, 10, &[]), (11, 10, 11, 11, &[])]);
        assert_eq!(host_origin(t.path(), 10, &none).unwrap(), None);
    }

    #[test]
    fn the_real_proc_sees_this_test_as_not_a_host_command() {
        // Guards against a format drift in the live /proc (and against a test run from
        // inside a host command, which would make this fail loudly rather than pass).
        let me = std::process::id();
        assert_eq!(host_origin(Path::new("/proc"), me, &none).unwrap(), None);
    }
}
