//! Ending what a container command started, by its marker: every container command carries
//! `MOAT_PROCESS=<its id>` ([`super::script::PROCESS_MARKER`]), which survives `setsid`,
//! `nohup` and double forks, so what left the command's process group is still found
//! (docs/security.md, "Ending a command").
//!
//! [`sweep`] kills the marked processes from inside the container (a short helper command);
//! [`left_behind`] counts them, and the command's process group, without an exec, so the end
//! of a foreground command that left nothing costs nothing. It asks the host first ([`look`]),
//! whose view is used only when it is the container's: every process in the container's
//! cgroup must be one whose root holds this session's run directory (a runtime like gVisor
//! shows the host its own processes instead), and must be readable. Where the host cannot
//! tell, the container's helper counts from inside (`Executor::look_inside`). Anything else is
//! "cannot tell", and the kill and the sweep run.

use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::Duration;

use super::files::RunFiles;
use super::script::{sweep_argv, PROCESS_MARKER};
use crate::contract::Place;
use crate::runtime::{Executor, LeftBehind};
use crate::session::cgroup::{container_pgid, CgroupDirs};

/// How long one sweep may run before moat ends it: five passes over a container at its pids
/// limit, with room to spare (docs/helper.md, "Deadlines").
const SWEEP_DEADLINE: Duration = Duration::from_secs(20);
/// The most of one process's environment read from the host; a larger one is "cannot tell".
const MAX_ENVIRON: u64 = 1 << 20;
/// The buffers `/proc/<pid>/status` and a process environment are read into first: most fit.
const STATUS_READ: usize = 4096;
const ENVIRON_READ: usize = 16 << 10;
/// The most of all environments one look reads: the sandbox chooses how many processes it
/// runs and how large their environments are, and past this the sweep (the sandbox's own
/// time) is cheaper than moat's reading.
const MAX_LOOK_BYTES: u64 = 16 << 20;
/// Where a container's processes see the run directory, relative to their root
/// (`process::crate::wrapper::RUN_DIR`).
const RUN_MOUNT: &str = "run/moat";

/// Kills every process in `container` that carries process `id`'s marker (five passes at
/// most, see `script::sweep_argv`); returns how many it killed.
pub(super) async fn sweep(
    runtime: &dyn Executor,
    container: &str,
    id: &str,
    user: Option<&str>,
) -> usize {
    let Some(argv) = sweep_argv(id) else {
        return 0;
    };
    match runtime
        .exec_capture_within(container, argv, user.map(String::from), SWEEP_DEADLINE)
        .await
    {
        Ok((_, out)) => {
            let swept = String::from_utf8_lossy(&out).matches("swept").count();
            if swept > 0 {
                tracing::info!(%container, %id, swept, "ended processes that left the group");
            }
            swept
        }
        Err(e) => {
            tracing::warn!(%container, %id, error = %e, "failed to sweep for marked processes");
            0
        }
    }
}

/// Kills what carries process `id`'s marker in its container unless `left` says nothing does
/// (then no exec runs); returns whether anything was killed. Host commands have no marker
/// sweep.
pub(super) async fn end_left(
    runtime: &dyn Executor,
    place: &Place,
    left: LeftBehind,
    id: &str,
    user: Option<&str>,
) -> bool {
    let Place::Container(container) = place else {
        return false;
    };
    if left.marked == Some(0) {
        return false;
    }
    sweep(runtime, container, id, user).await > 0
}

/// What foreground command `id` (process group `pgid`, as the container numbers it) left in
/// its container: the host's count when the host can tell, else the container helper's, else
/// nothing known (see the module docs). A host command's is never known here.
pub(super) async fn left_behind(
    runtime: &dyn Executor,
    place: &Place,
    files: &RunFiles,
    cgroup: Option<&CgroupDirs>,
    id: &str,
    pgid: Option<u32>,
) -> LeftBehind {
    let Place::Container(container) = place else {
        return LeftBehind::default();
    };
    let host = match (cgroup, files.dir_identity()) {
        (Some(cg), Some(run_dir)) => look(cg, run_dir, id, pgid),
        _ => None,
    };
    if let Some(seen) = host {
        return seen;
    }
    runtime
        .look_inside(container, pgid.unwrap_or(0), id)
        .await
        .unwrap_or_default()
}

/// How many live processes in the container carry process `id`'s marker, and how many are in
/// process group `pgid` (when one is given), as the host sees them in the container's cgroup;
/// `None` when the host cannot tell (see the module docs). `run_dir` is the (device, inode) of
/// the session's run directory on the host.
pub fn look(
    cgroup: &CgroupDirs,
    run_dir: (u64, u64),
    id: &str,
    pgid: Option<u32>,
) -> Option<LeftBehind> {
    look_in(
        Path::new("/proc"),
        &cgroup.procs()?,
        RUN_MOUNT,
        run_dir,
        (id, pgid),
    )
}

/// [`look`] over `pids` under `proc`, each checked for `mount` beneath its root being
/// `run_dir`.
fn look_in(
    proc: &Path,
    pids: &[u32],
    mount: &str,
    run_dir: (u64, u64),
    (id, pgid): (&str, Option<u32>),
) -> Option<LeftBehind> {
    let mark = format!("{PROCESS_MARKER}={id}");
    let mut marked = 0;
    let mut group = 0;
    let mut budget = MAX_LOOK_BYTES;
    for pid in pids {
        let dir = proc.join(pid.to_string());
        // Room for the whole file up front (/proc reports a size of 0, so an empty buffer
        // reads it in small pieces): a command's end looks at every process of its container.
        let mut status = String::with_capacity(STATUS_READ);
        let read =
            std::fs::File::open(dir.join("status")).and_then(|mut f| f.read_to_string(&mut status));
        if read.is_err() {
            // Gone meanwhile, or hidden from moat (`hidepid`): only the first is nothing.
            if gone(*pid) {
                continue;
            }
            return None;
        }
        // A zombie runs nothing, and its root and environment are gone.
        if matches!(state(&status), Some('Z' | 'X')) {
            continue;
        }
        if pgid.is_some() && container_pgid(&status) == pgid {
            group += 1;
        }
        match std::fs::metadata(dir.join("root").join(mount)) {
            Ok(m) if (m.dev(), m.ino()) == run_dir => {}
            // Ended between the two reads.
            Err(_) if gone(*pid) => continue,
            _ => return None,
        }
        let mut environ = Vec::with_capacity(ENVIRON_READ);
        let limit = MAX_ENVIRON.min(budget);
        match std::fs::File::open(dir.join("environ"))
            .and_then(|f| f.take(limit + 1).read_to_end(&mut environ))
        {
            Ok(n) if n as u64 <= limit => budget -= n as u64,
            Err(_) if gone(*pid) => continue,
            _ => return None,
        }
        if environ.split(|b| *b == 0).any(|kv| kv == mark.as_bytes()) {
            marked += 1;
        }
    }
    Some(LeftBehind {
        group: pgid.map(|_| group),
        marked: Some(marked),
    })
}

/// Whether no process `pid` exists (a signal 0 finds none); one moat may not signal exists.
fn gone(pid: u32) -> bool {
    let Ok(pid) = i32::try_from(pid) else {
        return true;
    };
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None) == Err(nix::errno::Errno::ESRCH)
}

/// The state letter of `/proc/<pid>/status` (`State:\tS (sleeping)`).
fn state(status: &str) -> Option<char> {
    status
        .lines()
        .find_map(|l| l.strip_prefix("State:"))?
        .trim_start()
        .chars()
        .next()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;
    use std::process::{Command, Stdio};

    /// Host processes, with a directory of the test's as their "run directory": the scan
    /// counts exactly the marked ones and the members of the group asked about, and says it
    /// cannot tell when a process is not one of the container's (its root does not hold that
    /// directory).
    #[test]
    fn the_host_counts_marked_processes_and_a_group_only_when_they_are_the_containers() {
        let run = tempfile::tempdir().unwrap();
        let meta = std::fs::metadata(run.path()).unwrap();
        let identity = (meta.dev(), meta.ino());
        let mount = run.path().strip_prefix("/").unwrap().to_str().unwrap();
        let spawn = |marker: &str| {
            Command::new("setsid")
                .args(["sleep", "1000"])
                .env(PROCESS_MARKER, marker)
                .stdin(Stdio::null())
                .spawn()
                .unwrap()
        };
        let mut marked = spawn("look-test-a");
        let mut other = spawn("look-test-b");
        let mut near = spawn("look-test-a-2");
        let pids = [marked.id(), other.id(), near.id(), 999_999_999];
        let proc = Path::new("/proc");
        let seen = |id: &str, pgid: Option<u32>| look_in(proc, &pids, mount, identity, (id, pgid));
        let counts = |group, marked| {
            Some(LeftBehind {
                group,
                marked: Some(marked),
            })
        };
        // `setsid` made each one the leader of a group of its own.
        assert_eq!(seen("look-test-a", Some(other.id())), counts(Some(1), 1));
        assert_eq!(seen("look-test-c", None), counts(None, 0));
        assert_eq!(seen("look-test-c", Some(1)), counts(Some(0), 0));
        // Another directory in their place: these are not the container's processes.
        let elsewhere = tempfile::tempdir().unwrap();
        let m = std::fs::metadata(elsewhere.path()).unwrap();
        assert_eq!(
            look_in(
                proc,
                &pids,
                mount,
                (m.dev(), m.ino()),
                ("look-test-a", Some(other.id()))
            ),
            None
        );
        for c in [&mut marked, &mut other, &mut near] {
            c.kill().unwrap();
            c.wait().unwrap();
        }
        // Ended (and reaped) processes are not counted.
        assert_eq!(seen("look-test-a", Some(other.id())), counts(Some(0), 0));
    }

    #[test]
    fn states_are_read_from_status() {
        assert_eq!(state("Name:\tsh\nState:\tZ (zombie)\n"), Some('Z'));
        assert_eq!(state("State:\tS (sleeping)\n"), Some('S'));
        assert_eq!(state("Name:\tsh\n"), None);
    }
}
