//! The types both seams speak: container and exec specs, mounts, what the engine reports,
//! and a command before and after its place's wrapper (`Launch`, `Wrapping`).

use std::collections::BTreeMap;
use std::pin::Pin;

use futures::Stream;
use tokio::io::AsyncWrite;
use tokio::sync::oneshot;

/// The engine's identity, for `moat doctor` and the version floor.
#[derive(Debug, Clone)]
pub struct EngineInfo {
    pub version: String,
    pub api_version: String,
}

/// A bind mount from the host into a container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mount {
    pub source: String,
    pub target: String,
    pub read_only: bool,
}

/// Something the engine says a container has from the host: a bind mount, a volume, or its
/// writable root filesystem layer. What a sandbox can write on this machine is read from these
/// (docs/security.md, "Directories a sandbox can write"), never from what moat meant to mount.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostMount {
    /// The host path the container reaches: a bind's source, a volume's storage directory, or
    /// the root filesystem's upper directory.
    pub source: String,
    /// Where the container sees it (`/` for the root filesystem layer).
    pub target: String,
    /// Whether the container may write it.
    pub writable: bool,
    /// `bind`, `volume`, or `rootfs` (the container's own writable layer).
    pub kind: String,
}

/// A session's egress network as the engine has it (docs/security.md, "Network egress").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WalledNetwork {
    /// Its subnets (CIDR): the proxy serves only clients inside them.
    pub subnets: Vec<String>,
    /// Internal, without IPv6 and without a host address on the bridge. False for a network
    /// an older moat made with the same name: the caller rebuilds it.
    pub walled: bool,
    /// The gateway addresses the engine's IPAM reserved: on a walled network no one holds
    /// them, so they are where a sandbox's resolver forwards to reach nothing.
    pub gateways: Vec<String>,
}

/// Everything needed to create a session container; built from config by `session::spec`.
#[derive(Debug, Clone, PartialEq)]
pub struct ContainerSpec {
    pub name: String,
    pub image: String,
    pub labels: BTreeMap<String, String>,
    pub user: String,
    pub env: Vec<String>,
    pub mounts: Vec<Mount>,
    /// tmpfs mount point → options.
    pub tmpfs: BTreeMap<String, String>,
    pub read_only_root: bool,
    pub network: String,
    pub cap_add: Vec<String>,
    pub security_opt: Vec<String>,
    pub pids_limit: i64,
    pub memory_bytes: i64,
    /// Size of `/dev/shm` in bytes (0: the engine's default). Set with the tmpfs sizes, since
    /// it counts against the memory limit like them.
    pub shm_bytes: i64,
    pub nano_cpus: i64,
    pub runtime: Option<String>,
    pub working_dir: String,
    pub cmd: Vec<String>,
    /// Resolvers for the container's lookups (empty: the engine's). Only an egress proxy sets
    /// them (`sandbox.egress.dns`): the proxy is the one place a sandbox's names are looked
    /// up, so an operator can pin where they go.
    pub dns: Vec<String>,
}

/// A container as the engine reports it.
#[derive(Debug, Clone)]
pub struct ContainerInfo {
    pub id: String,
    pub name: String,
    pub running: bool,
    pub state: String,
    pub labels: BTreeMap<String, String>,
    /// Host pid of the container's init while it runs (0 otherwise, or from a listing): the
    /// way to its cgroups on this host (`session::cgroup`).
    pub pid: u32,
    /// The id of the image it was made from (`sha256:…`), for `moat run`'s summary.
    pub image: String,
    /// When the engine last started it (`State.StartedAt`), milliseconds since the epoch;
    /// `None` from a listing or before its first start. A container that started after a
    /// command did was restarted under it (`process::limit`, docs/mcp.md, "Limits in results").
    pub started_at_ms: Option<i64>,
    /// The OCI runtime it runs under (`runsc`), from an inspect; `None` from a listing or for
    /// the engine's default.
    pub runtime: Option<String>,
}

/// One sample of a container's use, as E2B's metrics report it (docs/e2b.md, "Metrics").
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ContainerStats {
    /// CPU use over the engine's sampling interval, percent of one CPU (two busy CPUs: 200).
    pub cpu_pct: f64,
    /// Memory in use without the page cache, bytes (what `docker stats` shows).
    pub mem_used: u64,
    /// The memory limit, bytes.
    pub mem_total: u64,
    /// The page cache the container holds, bytes.
    pub mem_cache: u64,
}

/// One command to start in a container.
#[derive(Debug, Clone, Default)]
pub struct ExecSpec {
    pub argv: Vec<String>,
    /// `KEY=VALUE` entries.
    pub env: Vec<String>,
    pub workdir: Option<String>,
    pub user: Option<String>,
    /// Run in a pseudo-terminal; the raw stream is then returned in [`ExecStarted::tty`].
    pub tty: bool,
    /// Initial terminal size (rows, cols) for `tty`. Engines before API 1.42 ignore it, so
    /// callers resize after the start as well.
    pub console_size: Option<(u16, u16)>,
    /// Set when `argv` is moat's wrapper around a login shell: what the wrapper runs, for a
    /// transport that does the wrapper's work itself (docs/helper.md, "The wrapper in the
    /// helper"). Every other transport runs `argv`.
    pub wrapped: Option<Wrapped>,
}

/// The command inside moat's wrapper (src/process/script.rs) and the run files it keeps.
#[derive(Debug, Clone)]
pub struct Wrapped {
    /// The moat process whose run files (`<id>.pid`, `.in`, `.ready`, `.out`, `.exit`) the
    /// wrapper keeps.
    pub process_id: String,
    /// The login shell's argv: `sh -lc SCRIPT` (or bash).
    pub login: Vec<String>,
    /// stderr to `<id>.err` instead of the log (`moat run`).
    pub split_stderr: bool,
}

/// A command the process registry starts, before any place's wrapper is around it: each
/// place wraps it its own way ([`Wrapping`]), so the registry never branches on where it runs.
#[derive(Debug, Clone)]
pub struct Launch {
    /// The moat process id, whose run files the wrapper keeps.
    pub id: String,
    /// The run directory on the host (a container sees it at `wrapper::RUN_DIR`).
    pub run_dir: String,
    /// The exact text to run.
    pub command: String,
    pub cwd: String,
    /// `KEY=VALUE` entries, already validated and merged.
    pub env: Vec<String>,
    pub pty: bool,
    /// The login shell (`sandbox.shell` or `elevated.shell`).
    pub shell: crate::config::Shell,
    /// Keep stderr apart in `<id>.err`, where the place can.
    pub split_stderr: bool,
    /// Record where the command's shell ended in `<id>.state`, where the place can.
    pub sticky: bool,
    /// The sandbox user (uid, gid), for run files a container's command opens.
    pub owner: (u32, u32),
    /// Another container user to run as (`"0"`: root); `None`: the container's.
    pub user: Option<String>,
}

impl Launch {
    /// The exec of `argv` for this launch: in its working directory, in a terminal of the
    /// wrapper's size when it asked for one.
    pub fn spec(&self, argv: Vec<String>, env: Vec<String>, wrapped: Option<Wrapped>) -> ExecSpec {
        ExecSpec {
            argv,
            env,
            workdir: Some(self.cwd.clone()),
            user: self.user.clone(),
            tty: self.pty,
            console_size: self.pty.then_some(crate::wrapper::PTY_SIZE),
            wrapped,
        }
    }
}

/// A [`Launch`] as its place runs it: the exec, and the run files it needs.
#[derive(Debug, Clone)]
pub struct Wrapping {
    pub spec: ExecSpec,
    /// Who owns the run files (`None`: moat's own user).
    pub owner: Option<(u32, u32)>,
    /// stderr goes to `<id>.err`: that file is made, and the stream held until it is read.
    pub split_stderr: bool,
    /// The command records its state in `<id>.state`: that file is made.
    pub sticky: bool,
}

/// The terminal side of a PTY exec.
pub struct ExecTty {
    /// Raw terminal output. Read without bollard's frame guessing (see the docker module).
    pub output: Pin<Box<dyn Stream<Item = std::io::Result<bytes::Bytes>> + Send>>,
    pub input: Pin<Box<dyn AsyncWrite + Send>>,
}

/// A started command.
pub struct ExecStarted {
    /// The engine's exec id (for resize and inspect).
    pub id: String,
    /// Resolves when the command's main process ended and its stream closed.
    pub finished: oneshot::Receiver<()>,
    /// Present for `tty: true`.
    pub tty: Option<ExecTty>,
}

/// What a finished command left in its container: the live processes of its process group and
/// those carrying its marker (`MOAT_PROCESS=<id>`), each `None` where whoever counted could not
/// tell (docs/security.md, "Ending a command: what left its process group").
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LeftBehind {
    /// Live (not zombie) members of the command's process group.
    pub group: Option<usize>,
    /// Live processes whose environment holds the command's marker.
    pub marked: Option<usize>,
}

/// Receives each line of build output. Spelled with an explicit `for<'a>` because
/// `async_trait` would otherwise tie the elided `&str` lifetime to the call.
pub type Progress = Box<dyn for<'a> Fn(&'a str) + Send + Sync>;
