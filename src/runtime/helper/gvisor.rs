//! Whose listener the helper's socket is under gVisor (docs/helper.md, "Trust").
//!
//! Under runc the helper is a host process, and the kernel records its pid as the socket's
//! listener (`SO_PEERCRED`), which moat compares with the pid the engine reports for the
//! helper's exec. Under runsc no sandbox process is a host process: a socket the helper binds
//! in the run directory is made on the host by the container's gofer (`runsc-gofer`, allowed by
//! `--host-uds=create`, scripts/setup-runsc), so the listener the kernel records is the gofer.
//! The listener moat expects is then the gofer of *this* container: the host process, running
//! as root, whose parent is the parent of the container's sandbox process (the engine's shim,
//! one per container) and whose program is `runsc-gofer`. No process inside a gVisor sandbox
//! is a host process, so none can be that; what moat gives up against runc is telling the
//! helper from another process inside the same sandbox, which the helper's trust never rested
//! on (the sandbox user can already trace it).

use std::path::Path;

/// A host process, as much of it as the choice needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostProcess {
    pub pid: u32,
    pub ppid: u32,
    pub uid: u32,
    /// `argv[0]` (runsc names its processes there: `runsc-gofer`, `runsc-sandbox`).
    pub argv0: String,
}

/// The gofer of the sandbox process `sandbox` among `procs`: the one root process named
/// `runsc-gofer` beside it; `None` when there is not exactly one.
pub fn gofer_of(sandbox: u32, procs: &[HostProcess]) -> Option<u32> {
    let shim = procs.iter().find(|p| p.pid == sandbox)?.ppid;
    let mut gofers = procs
        .iter()
        .filter(|p| p.ppid == shim && p.uid == 0 && p.argv0 == "runsc-gofer");
    let first = gofers.next()?;
    gofers.next().is_none().then_some(first.pid)
}

/// [`gofer_of`] over this host's `/proc` (moat and the engine share a pid namespace, as the
/// helper's pid check already needs).
pub fn find_gofer(sandbox: u32) -> Option<u32> {
    let procs: Vec<HostProcess> = std::fs::read_dir("/proc")
        .ok()?
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| read_process(Path::new("/proc"), pid))
        .collect();
    gofer_of(sandbox, &procs)
}

fn read_process(proc: &Path, pid: u32) -> Option<HostProcess> {
    let dir = proc.join(pid.to_string());
    let status = std::fs::read_to_string(dir.join("status")).ok()?;
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse::<u32>().ok())
    };
    let cmdline = std::fs::read(dir.join("cmdline")).ok()?;
    let argv0 = cmdline.split(|b| *b == 0).next().unwrap_or_default();
    Some(HostProcess {
        pid,
        ppid: field("PPid:")?,
        uid: field("Uid:")?,
        argv0: String::from_utf8_lossy(argv0).into_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(pid: u32, ppid: u32, uid: u32, argv0: &str) -> HostProcess {
        HostProcess {
            pid,
            ppid,
            uid,
            argv0: argv0.into(),
        }
    }

    #[test]
    fn only_this_containers_root_gofer_is_the_listener() {
        let host = [
            p(10, 1, 0, "containerd-shim-runc-v2"),
            p(11, 10, 0, "runsc-gofer"),
            p(12, 10, 0, "runsc-sandbox"),
            // Another container's.
            p(20, 1, 0, "containerd-shim-runc-v2"),
            p(21, 20, 0, "runsc-gofer"),
            p(22, 20, 0, "runsc-sandbox"),
        ];
        assert_eq!(gofer_of(12, &host), Some(11));
        assert_eq!(gofer_of(22, &host), Some(21));
        assert_eq!(gofer_of(99, &host), None, "no such sandbox");
        // A process that calls itself a gofer but is not root, or two gofers: none is.
        let forged = [
            p(10, 1, 0, "shim"),
            p(11, 10, 1000, "runsc-gofer"),
            p(12, 10, 0, "x"),
        ];
        assert_eq!(gofer_of(12, &forged), None);
        let two = [
            p(10, 1, 0, "shim"),
            p(11, 10, 0, "runsc-gofer"),
            p(13, 10, 0, "runsc-gofer"),
            p(12, 10, 0, "runsc-sandbox"),
        ];
        assert_eq!(gofer_of(12, &two), None);
    }

    #[test]
    fn this_hosts_processes_read() {
        let me = read_process(Path::new("/proc"), std::process::id()).unwrap();
        assert_eq!(me.uid, nix::unistd::getuid().as_raw());
        assert_eq!(me.ppid, nix::unistd::getppid().as_raw() as u32);
    }
}
