//! The look: what a finished command left in the container, counted by the helper itself
//! (docs/helper.md, "What a command left").
//!
//! At the end of every foreground command moat must know whether anything of it still runs:
//! members of its process group, and processes carrying its marker (`MOAT_PROCESS=<id>`) that
//! left the group. Where the host cannot see the container's processes (gVisor shows the host
//! its own), moat used to run its sweep script to find out, two or three program starts that
//! cost more than the command itself there. The helper reads the same `/proc` files without
//! starting anything and answers with two counts; moat runs its kill and sweep helpers only
//! when one of them is not zero, or not known.
//!
//! Nothing here signals anything: it reads. A process it may not read (another user's, one
//! that made itself undumpable) makes the count it would have gone into "cannot tell", and
//! moat then sweeps, as before.

use std::fs::File;
use std::io::Read;
use std::path::Path;

/// The most of one process's environment read; a larger one is "cannot tell" (the bound
/// moat's own look from the host keeps, src/process/marked.rs).
const MAX_ENVIRON: u64 = 1 << 20;
/// The most of all environments one look reads: the sandbox chooses how many processes it
/// runs and how large their environments are.
const MAX_LOOK_BYTES: u64 = 16 << 20;
/// The most of one `/proc/<pid>/stat` read: the line is a few hundred bytes.
const MAX_STAT: u64 = 4096;
/// The variable every container command carries (`process::script::PROCESS_MARKER`).
const MARKER: &str = "MOAT_PROCESS";

/// (live members of group `pgid`, live processes marked with `process`), each `None` where
/// some process could not be read; `pgid` 0 counts no group (`None`).
pub fn look(pgid: u32, process: &str) -> (Option<u32>, Option<u32>) {
    look_in(Path::new("/proc"), std::process::id(), pgid, process)
}

/// [`look`] over the process directories under `proc`, leaving out `me` (the helper, which is
/// neither).
fn look_in(proc: &Path, me: u32, pgid: u32, process: &str) -> (Option<u32>, Option<u32>) {
    let Ok(entries) = std::fs::read_dir(proc) else {
        return (None, None);
    };
    let mark = format!("{MARKER}={process}");
    let mut group = (pgid != 0).then_some(0u32);
    let mut marked = Some(0u32);
    let mut budget = MAX_LOOK_BYTES;
    for entry in entries.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        if pid == me {
            continue;
        }
        let dir = entry.path();
        let stat = match read_bounded(&dir.join("stat"), MAX_STAT) {
            Some(s) => s,
            // Ended between the listing and the read.
            None if !dir.exists() => continue,
            None => return (None, None),
        };
        let Some((state, pgrp)) = state_and_group(&stat) else {
            return (None, None);
        };
        // A zombie runs nothing; its environment is gone.
        if matches!(state, 'Z' | 'X') {
            continue;
        }
        if pgrp == pgid {
            group = group.map(|n| n + 1);
        }
        if marked.is_none() {
            continue;
        }
        let limit = MAX_ENVIRON.min(budget);
        match read_bounded(&dir.join("environ"), limit) {
            Some(environ) => {
                budget -= environ.len() as u64;
                if environ.split(|b| *b == 0).any(|kv| kv == mark.as_bytes()) {
                    marked = marked.map(|n| n + 1);
                }
            }
            None if !dir.exists() => continue,
            None => marked = None,
        }
    }
    (group, marked)
}

/// The file's bytes if it can be read whole within `limit` bytes.
fn read_bounded(path: &Path, limit: u64) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    let n = File::open(path)
        .and_then(|f| f.take(limit + 1).read_to_end(&mut out))
        .ok()?;
    (n as u64 <= limit).then_some(out)
}

/// The state letter and the process group of a `/proc/<pid>/stat` line: the third and fifth
/// fields, counted after the command name (which may hold spaces and parentheses).
fn state_and_group(stat: &[u8]) -> Option<(char, u32)> {
    let close = stat.iter().rposition(|b| *b == b')')?;
    let rest = std::str::from_utf8(&stat[close + 1..]).ok()?;
    let mut fields = rest.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let _ppid = fields.next()?;
    let pgrp = fields.next()?.parse().ok()?;
    Some((state, pgrp))
}
