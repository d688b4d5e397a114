//! A session's own filesystem, the size of `sandbox.workspace_max_bytes`, so the kernel bounds
//! what the session keeps on the host (docs/security.md, "Disk bound").
//!
//! A bind mount of a host directory has no size, and a watchdog that measures it can only
//! react: a fast writer gets an interval's worth past the bound, a tree too large to walk in
//! time is measured short, and each stop starts again from the level it stopped at. A
//! filesystem of the bound's size has none of these gaps: a write past it fails with
//! `ENOSPC`, whatever wrote it, however fast, in however many files.
//!
//! Each container (by slug) gets two sparse files, `$MOAT_HOME/disks/SLUG.ext4` and
//! `SLUG.run.ext4`, formatted ext4 and loop-mounted at `$MOAT_HOME/disks/SLUG` and `SLUG.run`
//! (`nosuid,nodev`, and `discard`, so space freed inside is given back to the host). Their
//! directories `workspace` and `run` become the container's `/workspace` and `/run/moat`
//! (apart, see [`DiskImage`]): the container's mounts name them directly, so an
//! engine that does not see this mount (moat in another mount namespace) finds no such
//! directory and refuses the container rather than mounting an unbounded one. For moat's own
//! host-side work the two are bind-mounted onto the usual places
//! (`sandbox.workspace_root/SLUG`, `$MOAT_HOME/run/SLUG`), so every path moat and the operator
//! know stays what it was.
//!
//! Making loop devices and mounts takes root in the host's mount namespace; `sandbox.disk_bound`
//! says whether moat uses this ("auto": where it can), and [`Availability::probe`] says whether
//! it can.

use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use nix::mount::{mount, umount2, MntFlags, MsFlags};

use crate::config::DiskBound;

/// The helper's directory under the run directory (`runtime::helper::socket::DIR`).
const HELPER_DIR: &str = crate::runtime::helper::socket::DIR;

/// The directory of the disks in a moat home.
pub const DISKS_DIR: &str = "disks";

/// Why a disk could not be made, mounted or removed.
#[derive(Debug, thiserror::Error)]
pub enum DiskError {
    #[error("make the session's disk {path}")]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("make the session's disk: `{program}` failed ({status}): {output}")]
    Tool {
        program: String,
        status: String,
        output: String,
    },
    #[error("make the session's disk: {0} (sandbox.disk_bound = \"image\" needs moat to run as root in the host's mount namespace, with loop devices, mkfs.ext4 and mount; set sandbox.disk_bound = \"watch\" to bound the session by measuring it instead)")]
    Unavailable(String),
}

/// Whether this moat can make disks, decided once at start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Availability {
    Yes,
    /// Why not, as a fragment completing "sized disks are not available: …".
    No(String),
}

impl Availability {
    /// Root, in the engine's mount namespace, with loop devices and the two programs.
    pub fn probe() -> Self {
        if !nix::unistd::geteuid().is_root() {
            return Self::No("moat is not root".into());
        }
        // The engine resolves a bind's source in its own mount namespace: moat's mount must be
        // there. Found by the engine's process; a moat in a container, or beside a rootless
        // or remote engine, sees none in its namespace.
        match engine_shares_mounts() {
            Some(true) => {}
            Some(false) => {
                return Self::No("the engine (dockerd) runs in another mount namespace".into())
            }
            None => return Self::No("no engine process (dockerd) runs beside moat".into()),
        }
        if !Path::new("/dev/loop-control").exists() {
            return Self::No("the host has no loop devices (/dev/loop-control)".into());
        }
        for program in ["mkfs.ext4", "tune2fs", "mount"] {
            if which(program).is_none() {
                return Self::No(format!("`{program}` is not on PATH"));
            }
        }
        Self::Yes
    }
}

/// How this moat holds `sandbox.workspace_max_bytes`, decided once from `sandbox.disk_bound`
/// and what the host allows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DiskPlan {
    /// A [`DiskImage`] per session with a workspace of moat's (a host workspace is the
    /// operator's directory: the guard watches it).
    Images,
    /// The guard only (`crate::disk_guard`).
    Watch,
    /// `sandbox.disk_bound = "image"` where moat cannot make one: sessions are refused, why.
    Refused(String),
}

impl DiskPlan {
    /// `limit` 0 is no bound: nothing to hold.
    pub fn decide(bound: DiskBound, limit: u64) -> Self {
        if limit == 0 || bound == DiskBound::Watch {
            return Self::Watch;
        }
        match (Availability::probe(), bound) {
            (Availability::Yes, _) => Self::Images,
            (Availability::No(why), DiskBound::Image) => Self::Refused(why),
            (Availability::No(_), _) => Self::Watch,
        }
    }
}

/// Whether a `dockerd` process is in moat's mount namespace (`None`: no `dockerd` seen).
fn engine_shares_mounts() -> Option<bool> {
    let mine = std::fs::read_link("/proc/self/ns/mnt").ok()?;
    let mut seen = None;
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let pid = entry.file_name();
        if !pid.to_string_lossy().bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let comm = std::fs::read_to_string(entry.path().join("comm")).unwrap_or_default();
        if comm.trim_end() != "dockerd" {
            continue;
        }
        let Ok(ns) = std::fs::read_link(entry.path().join("ns/mnt")) else {
            continue;
        };
        if ns == mine {
            return Some(true);
        }
        seen = Some(false);
    }
    seen
}

fn which(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/sbin:/usr/bin:/sbin:/bin".into());
    std::env::split_paths(&path)
        .chain(["/usr/sbin".into(), "/sbin".into()])
        .map(|d| d.join(program))
        .find(|p| p.is_file())
}

/// One sized filesystem: a sparse image file and where it is mounted.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Fs {
    image: PathBuf,
    mount: PathBuf,
    /// The one directory inside that the container gets.
    inner: &'static str,
}

/// Blocks of the run filesystem kept back for moat, in percent: the sandbox can fill the files
/// moat made for it there (logs, status files), never the room moat needs to make the next
/// command's (docs/security.md, "Disk bound").
const RUN_RESERVE_PERCENT: &str = "5";
/// Who may use the reserved blocks besides holders of `CAP_SYS_RESOURCE` (moat, as root): an
/// id no sandbox runs as (ext4 keeps it in 16 bits).
const RESERVE_OWNER: &str = "65533";

impl Fs {
    fn is_mounted(&self) -> bool {
        is_mount_point(&self.mount).unwrap_or(false)
    }

    fn dir(&self) -> PathBuf {
        self.mount.join(self.inner)
    }

    /// Makes the image (`bytes`, ext4; `reserve`: blocks kept for moat) if missing, mounts it
    /// if not mounted, and makes its directory.
    fn ensure(&self, bytes: u64, reserve: bool) -> Result<(), DiskError> {
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| DiskError::Io { path, source }
        };
        if !self.image.is_file() {
            // Made under another name and renamed: a half-made image is never taken for one.
            let partial = self.image.with_extension("partial");
            let _ = std::fs::remove_file(&partial);
            let file = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&partial)
                .map_err(io(&partial))?;
            file.set_len(bytes).map_err(io(&partial))?;
            set_mode(&partial, 0o600).map_err(io(&partial))?;
            drop(file);
            // Lazy tables and journal: the file is sparse, so they read as zeros already and
            // cost nothing until used.
            let reserved = if reserve { RUN_RESERVE_PERCENT } else { "0" };
            run(Command::new("mkfs.ext4")
                .args(["-q", "-F", "-m", reserved, "-E"])
                .arg("lazy_itable_init=1,lazy_journal_init=1")
                .arg(&partial))?;
            if reserve {
                run(Command::new("tune2fs")
                    .args(["-u", RESERVE_OWNER, "-g", RESERVE_OWNER])
                    .arg(&partial))?;
            }
            std::fs::rename(&partial, &self.image).map_err(io(&self.image))?;
        }
        std::fs::create_dir_all(&self.mount).map_err(io(&self.mount))?;
        if !is_mount_point(&self.mount).map_err(io(&self.mount))? {
            run(Command::new("mount")
                .args(["-t", "ext4", "-o"])
                .arg("loop,nosuid,nodev,discard,noinit_itable")
                .arg(&self.image)
                .arg(&self.mount))?;
            // The filesystem's root is moat's; nothing of the sandbox is at its top.
            set_mode(&self.mount, 0o700).map_err(io(&self.mount))?;
        }
        let dir = self.dir();
        match std::fs::create_dir(&dir) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(()),
            Err(e) => Err(DiskError::Io {
                path: dir,
                source: e,
            }),
        }
    }

    /// Unmounts it (detached: a mount still in use goes once it is not) and deletes the image
    /// and the mount point.
    fn remove(&self) -> Result<(), DiskError> {
        if self.is_mounted() {
            detach(&self.mount)?;
        }
        for path in [&self.image, &self.mount] {
            let gone = if path.is_dir() {
                std::fs::remove_dir(path)
            } else {
                std::fs::remove_file(path)
            };
            match gone {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(source) => {
                    return Err(DiskError::Io {
                        path: path.clone(),
                        source,
                    })
                }
            }
        }
        Ok(())
    }

    fn usage(&self) -> Option<DiskUsage> {
        if !self.is_mounted() {
            return None;
        }
        let st = nix::sys::statvfs::statvfs(&self.mount).ok()?;
        let block = st.fragment_size();
        Some(DiskUsage {
            used: (st.blocks() - st.blocks_free()) * block,
            size: st.blocks() * block,
            available: st.blocks_available() * block,
        })
    }
}

/// One container's disk: two filesystems, each of the bound's size. The workspace's holds
/// what the agent keeps. The run directory's is apart because the sandbox cannot make entries
/// there, only write into files moat made: so however full the agent makes its workspace (in
/// bytes or in files), moat can still make the files of the next command, the `rm` that
/// frees space included; and moat keeps blocks back there for itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiskImage {
    workspace: Fs,
    run: Fs,
}

/// What [`DiskImage::usage`] measured: the kernel's own account, exact and instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DiskUsage {
    /// Bytes in use (data and metadata).
    pub used: u64,
    /// The filesystem's size: what the session can ever hold.
    pub size: u64,
    /// Bytes a write can still take (ext4 keeps a little back for its own allocations).
    pub available: u64,
}

impl DiskImage {
    /// The disk of the container `slug` in the moat home `home_root`.
    pub fn new(home_root: &Path, slug: &str) -> Self {
        let dir = home_root.join(DISKS_DIR);
        Self {
            workspace: Fs {
                image: dir.join(format!("{slug}.ext4")),
                mount: dir.join(slug),
                inner: "workspace",
            },
            run: Fs {
                image: dir.join(format!("{slug}.run.ext4")),
                mount: dir.join(format!("{slug}.run")),
                inner: "run",
            },
        }
    }

    /// Whether the session has a disk (made earlier, mounted or not).
    pub fn exists(&self) -> bool {
        self.workspace.image.is_file()
    }

    /// The container's `/workspace`, inside the disk.
    pub fn workspace(&self) -> PathBuf {
        self.workspace.dir()
    }

    /// The container's `/run/moat`, inside the disk.
    pub fn run(&self) -> PathBuf {
        self.run.dir()
    }

    /// The helper's directory (`/run/moat/helper`), the one place under `/run/moat` where the
    /// sandbox may make entries (its socket): on the workspace's filesystem, so that however
    /// many files the sandbox makes there, the run filesystem keeps its inodes for moat. A full
    /// workspace then only keeps the helper from starting, and commands go through the
    /// engine's exec instead (docs/helper.md, "Fallback").
    pub fn helper(&self) -> PathBuf {
        self.workspace.mount.join(HELPER_DIR)
    }

    /// Makes the disk (each filesystem `bytes` large) if there is none, and mounts it if it is
    /// not; then its two directories exist. Blocking: runs `mkfs.ext4`, `tune2fs` and `mount`.
    pub fn ensure(&self, bytes: u64) -> Result<(), DiskError> {
        let dir = self
            .workspace
            .mount
            .parent()
            .expect("a disk has a parent directory");
        std::fs::create_dir_all(dir).map_err(|source| DiskError::Io {
            path: dir.to_path_buf(),
            source,
        })?;
        set_mode(dir, 0o700).map_err(|source| DiskError::Io {
            path: dir.to_path_buf(),
            source,
        })?;
        // The run filesystem first: the workspace's image is what says a disk exists.
        self.run.ensure(bytes, true)?;
        self.workspace.ensure(bytes, false)?;
        let helper = self.helper();
        match std::fs::create_dir(&helper) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(()),
            Err(source) => Err(DiskError::Io {
                path: helper,
                source,
            }),
        }
    }

    /// Bind-mounts the disk's directories onto `workspace` and `run_dir` (made if missing)
    /// unless they already are. A directory there that holds anything is left alone and the
    /// call fails: it is a session's data from before it had a disk.
    pub fn bind(&self, workspace: &Path, run_dir: &Path) -> Result<(), DiskError> {
        let helper = run_dir.join(HELPER_DIR);
        for (inner, outer) in [
            (self.workspace(), workspace),
            (self.run(), run_dir),
            (self.helper(), helper.as_path()),
        ] {
            let io = |source| DiskError::Io {
                path: outer.to_path_buf(),
                source,
            };
            std::fs::create_dir_all(outer).map_err(io)?;
            if same_dir(&inner, outer).map_err(io)? {
                continue;
            }
            if std::fs::read_dir(outer).map_err(io)?.next().is_some() {
                return Err(io(io::Error::other(
                    "it already holds files, from before the session had its own disk",
                )));
            }
            mount(
                Some(&inner),
                outer,
                None::<&str>,
                MsFlags::MS_BIND,
                None::<&str>,
            )
            .map_err(|e| io(e.into()))?;
        }
        Ok(())
    }

    /// Unmounts the binds on `workspace` and `run_dir` and both filesystems, and deletes the
    /// images: everything the session kept is gone.
    pub fn remove(&self, workspace: &Path, run_dir: &Path) -> Result<(), DiskError> {
        self.unbind(workspace, run_dir)?;
        self.workspace.remove()?;
        self.run.remove()
    }

    /// Lets go of the binds [`bind`](Self::bind) made on `workspace` and `run_dir` (detached);
    /// the disk stays mounted where it is. What a warm container's claim does at its old
    /// places (docs/pool.md, "Claims").
    pub fn unbind(&self, workspace: &Path, run_dir: &Path) -> Result<(), DiskError> {
        let helper = run_dir.join(HELPER_DIR);
        for (inner, outer) in [
            (self.helper(), helper.as_path()),
            (self.workspace(), workspace),
            (self.run(), run_dir),
        ] {
            if same_dir(&inner, outer).unwrap_or(false) {
                detach(outer)?;
            }
        }
        Ok(())
    }

    /// Copies the workspace's filesystem image to `to` (sparse: only what it holds), after
    /// flushing the mounted filesystem to it. The copy is whole while nothing writes to the
    /// workspace meanwhile: the caller has frozen the sandbox (E2B's snapshots, docs/e2b.md,
    /// "Snapshots and forks"); its journal is replayed when the copy is first mounted.
    /// Blocking.
    pub fn copy_workspace(&self, to: &Path) -> Result<(), DiskError> {
        if !self.workspace.is_mounted() {
            return Err(DiskError::Io {
                path: self.workspace.mount.clone(),
                source: io::Error::other("the session's disk is not mounted"),
            });
        }
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| DiskError::Io { path, source }
        };
        let root = crate::descriptors::open_dir(&self.workspace.mount)
            .map_err(io(&self.workspace.mount))?;
        nix::unistd::syncfs(&root).map_err(|e| io(&self.workspace.mount)(e.into()))?;
        copy_sparse(&self.workspace.image, to)
    }

    /// Makes `from` (a copy [`copy_workspace`](Self::copy_workspace) made) this session's
    /// workspace image before the session first mounts one: the session starts with what the
    /// copied one held. Refused when the session has a disk already. Blocking.
    pub fn seed_workspace(&self, from: &Path) -> Result<(), DiskError> {
        if self.exists() {
            return Err(DiskError::Io {
                path: self.workspace.image.clone(),
                source: io::Error::other("the session has a disk already"),
            });
        }
        let dir = self
            .workspace
            .image
            .parent()
            .expect("a disk has a parent directory");
        std::fs::create_dir_all(dir).map_err(|source| DiskError::Io {
            path: dir.to_path_buf(),
            source,
        })?;
        set_mode(dir, 0o700).map_err(|source| DiskError::Io {
            path: dir.to_path_buf(),
            source,
        })?;
        copy_sparse(from, &self.workspace.image)
    }

    /// What the workspace's filesystem holds and its size, from the kernel (`statvfs`);
    /// `None` when it is not mounted.
    pub fn usage(&self) -> Option<DiskUsage> {
        self.workspace.usage()
    }
}

/// The loop devices (`/dev/loopN`) whose backing file is under `disks`: each is the block
/// device of a session's filesystem, so its bytes are the sandbox's to choose, as much as the
/// files it holds (docs/security.md, "Directories a sandbox can write"). Read from
/// `/sys/block/loopN/loop/backing_file`.
pub fn loop_devices_under(disks: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir("/sys/block") else {
        return Vec::new();
    };
    let mut out: Vec<PathBuf> = entries
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            if !name.starts_with("loop") {
                return None;
            }
            let backing = std::fs::read_to_string(e.path().join("loop/backing_file")).ok()?;
            Path::new(backing.trim_end())
                .starts_with(disks)
                .then(|| PathBuf::from("/dev").join(name))
        })
        .collect();
    out.sort();
    out
}

/// Unmounts every mount at or under `root` (deepest first, detached): what a moat home whose
/// sessions were never purged leaves when the home itself goes (the test suite's homes).
/// Mounts are read from `/proc/self/mountinfo`.
pub fn release_all_under(root: &Path) {
    let Ok(info) = std::fs::read_to_string("/proc/self/mountinfo") else {
        return;
    };
    let mut points: Vec<PathBuf> = info
        .lines()
        .filter_map(|l| l.split(' ').nth(4))
        .map(unescape_mountinfo)
        .filter(|p| p.starts_with(root))
        .collect();
    points.sort_by_key(|p| std::cmp::Reverse(p.components().count()));
    for p in points {
        let _ = umount2(&p, MntFlags::MNT_DETACH);
    }
}

/// mountinfo escapes space, tab, newline and backslash as octal (`\040`).
fn unescape_mountinfo(field: &str) -> PathBuf {
    let b = field.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 3 < b.len() && b[i + 1..i + 4].iter().all(u8::is_ascii_digit) {
            let v = (b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0');
            out.push(v);
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    PathBuf::from(<std::ffi::OsString as std::os::unix::ffi::OsStringExt>::from_vec(out))
}

fn detach(path: &Path) -> Result<(), DiskError> {
    umount2(path, MntFlags::MNT_DETACH).map_err(|e| DiskError::Io {
        path: path.to_path_buf(),
        source: e.into(),
    })
}

/// A directory on another filesystem than its parent's is a mount point (a bind of a
/// directory of the same filesystem would not be told apart, but moat binds across).
fn is_mount_point(dir: &Path) -> io::Result<bool> {
    let Some(parent) = dir.parent() else {
        return Ok(true);
    };
    Ok(std::fs::symlink_metadata(dir)?.dev() != std::fs::symlink_metadata(parent)?.dev())
}

/// Whether `a` and `b` are one directory (device and inode).
fn same_dir(a: &Path, b: &Path) -> io::Result<bool> {
    let (a, b) = (std::fs::symlink_metadata(a)?, std::fs::symlink_metadata(b)?);
    Ok(a.dev() == b.dev() && a.ino() == b.ino())
}

fn set_mode(path: &Path, mode: u32) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
}

/// Copies the image `from` to `to`, holes kept (a sparse image costs what it holds), through
/// a partial name so a half-made copy is never taken for one.
fn copy_sparse(from: &Path, to: &Path) -> Result<(), DiskError> {
    let partial = to.with_extension("partial");
    let _ = std::fs::remove_file(&partial);
    run(Command::new("cp")
        .args(["--sparse=always", "--reflink=auto", "--"])
        .arg(from)
        .arg(&partial))?;
    set_mode(&partial, 0o600).map_err(|source| DiskError::Io {
        path: partial.clone(),
        source,
    })?;
    std::fs::rename(&partial, to).map_err(|source| DiskError::Io {
        path: to.to_path_buf(),
        source,
    })
}

fn run(cmd: &mut Command) -> Result<(), DiskError> {
    let program = cmd.get_program().to_string_lossy().to_string();
    let out = cmd.output().map_err(|e| DiskError::Tool {
        program: program.clone(),
        status: "did not start".into(),
        output: e.to_string(),
    })?;
    if out.status.success() {
        return Ok(());
    }
    let text = String::from_utf8_lossy(&out.stderr).trim().to_string();
    Err(DiskError::Tool {
        program,
        status: out.status.to_string(),
        output: text.chars().take(500).collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_paths_are_unescaped() {
        assert_eq!(
            unescape_mountinfo(r"/tmp/a\040b\134c"),
            PathBuf::from("/tmp/a b\\c")
        );
        assert_eq!(unescape_mountinfo(r"/x\04"), PathBuf::from(r"/x\04"));
    }

    #[test]
    fn paths_of_a_disk() {
        let d = DiskImage::new(Path::new("/h"), "s-1a2b");
        assert_eq!(d.workspace.image, PathBuf::from("/h/disks/s-1a2b.ext4"));
        assert_eq!(d.run.image, PathBuf::from("/h/disks/s-1a2b.run.ext4"));
        assert_eq!(d.workspace(), PathBuf::from("/h/disks/s-1a2b/workspace"));
        assert_eq!(d.run(), PathBuf::from("/h/disks/s-1a2b.run/run"));
    }
}
