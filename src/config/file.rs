//! The shape of `moat.toml`. Every key has a default; unknown keys are rejected by name
//! (`deny_unknown_fields`), so a typo never silently falls back to a default.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::scope::Scope;

/// The whole configuration after defaults, file and environment were merged and validated.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// How session containers are built: image, hardening, mounts, limits.
    pub sandbox: SandboxConfig,
    /// Defaults for the `exec` tool.
    pub exec: ExecConfig,
    /// Retention of background and finished processes.
    pub process: ProcessConfig,
    /// Which commands may run (see docs/policy.md).
    pub policy: PolicyConfig,
    /// `moat serve`: listeners and bearer tokens.
    pub serve: ServeConfig,
    /// Who may leave the sandbox and run commands on the host.
    pub elevated: super::ElevatedConfig,
    /// Pending approvals: expiry and what happens then.
    pub approvals: super::ApprovalsConfig,
    /// Named secret values injected into the env of listed sessions, redacted from output.
    pub secrets: BTreeMap<String, super::SecretConfig>,
    /// Named skills and the binaries they need.
    pub skills: BTreeMap<String, super::SkillConfig>,
    /// E2B's API on a TCP address of its own (docs/e2b.md).
    pub e2b: super::E2bConfig,
    /// Warm containers kept ready by the daemon, so a new session is a claim (docs/pool.md).
    pub pool: super::PoolConfig,
    /// This moat as a remote node of paired gateways (docs/nodes.md).
    pub node: super::NodeConfig,
}

/// The HTTP API. The unix socket (`$MOAT_HOME/moat.sock`, 0600) is the operator's channel
/// and needs no token; TCP is off unless `tcp` is set, and then every request needs a token.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct ServeConfig {
    /// TCP listen address such as `127.0.0.1:7878`; empty = unix socket only.
    pub tcp: String,
    /// Bearer token with operator rights over TCP (any session, approvals). Empty = none.
    pub operator_token: String,
    /// Bearer tokens for agents, each bound to one session.
    pub agents: Vec<AgentToken>,
    /// Connections all non-operator clients may hold together; past it a new one gets 503.
    /// 0 = derived from the open-file limit (docs/http-api.md, "Limits"), and a value larger
    /// than the file limit allows is lowered to fit, so moat never runs out of descriptors.
    pub max_connections: u32,
    /// Connections one identity (the operator, or one agent token) may hold; past it 429.
    pub max_connections_per_token: u32,
    /// Connections kept free for the operator on top of `max_connections`, so an agent flood
    /// never locks the operator out.
    pub operator_reserve: u32,
    /// Event streams (`/events`, `GET /mcp`) all agents may hold together; past it 503.
    /// 0 = half of `max_connections`.
    pub max_streams: u32,
    /// Event streams one identity may hold; past it 429.
    pub max_streams_per_token: u32,
    /// Seconds a daemon that a client started on demand stays up with nothing to do (no
    /// connection, no running process, no pending approval) before it exits, so a home that
    /// is no longer used holds no process (docs/ARCHITECTURE.md, "Daemon"). `moat serve` by
    /// hand never exits on its own.
    pub idle_exit_secs: u64,
}

impl Default for ServeConfig {
    fn default() -> Self {
        Self {
            tcp: String::new(),
            operator_token: String::new(),
            agents: Vec::new(),
            max_connections: 0,
            max_connections_per_token: 64,
            operator_reserve: 16,
            max_streams: 0,
            max_streams_per_token: 8,
            idle_exit_secs: 300,
        }
    }
}

/// An agent's credential: whoever holds it acts as this agent in this session only.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct AgentToken {
    pub token: String,
    /// The session key every request with this token runs in.
    pub session: String,
    /// Agent id, for audit and the `agent` scope.
    pub agent: String,
    /// Channel the agent speaks for (e.g. `slack`) and the sender id, checked by the
    /// elevated gates.
    pub provider: String,
    pub sender: String,
}

/// Policy per host.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct PolicyConfig {
    /// Policy for commands in session containers (default: security full, ask off).
    pub sandbox: crate::policy::Policy,
    /// Policy for commands on the host (default: security allowlist, ask on-miss). Keys not
    /// given keep the host defaults, not the sandbox ones.
    #[serde(deserialize_with = "host_policy")]
    pub host: crate::policy::Policy,
    /// Enabled skills allowlist their binaries (by resolved path).
    pub auto_allow_skills: bool,
}

impl Default for PolicyConfig {
    fn default() -> Self {
        Self {
            sandbox: crate::policy::Policy::default(),
            host: crate::policy::Policy::host_default(),
            auto_allow_skills: true,
        }
    }
}

/// Reads `[policy.host]` over the host defaults: a file that only sets `allowlist` must not
/// silently get the sandbox's `security = "full"`.
fn host_policy<'de, D: serde::Deserializer<'de>>(d: D) -> Result<crate::policy::Policy, D::Error> {
    use serde::de::Error;
    let overlay = toml::Table::deserialize(d)?;
    let mut base =
        toml::Table::try_from(crate::policy::Policy::host_default()).map_err(D::Error::custom)?;
    base.extend(overlay);
    toml::Value::Table(base)
        .try_into()
        .map_err(D::Error::custom)
}

/// How the session workspace is mounted at `/workspace`.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum WorkspaceAccess {
    #[default]
    Rw,
    Ro,
    /// No workspace mount; `/workspace` is then an empty directory of the image.
    None,
}

/// How `sandbox.workspace_max_bytes` is held (docs/security.md, "Disk bound").
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum DiskBound {
    /// `Image` where moat can make one (root in the host's mount namespace), `Watch`
    /// elsewhere.
    #[default]
    Auto,
    /// A filesystem of the bound's size per session: the kernel refuses writes past it.
    /// Sessions are refused where moat cannot make one.
    Image,
    /// A guard measures the session's directories and ends its processes past the bound.
    Watch,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct SandboxConfig {
    /// Image every session container starts from; `moat image build` builds the default one.
    pub image: String,
    /// Which sessions share a container (`session`, `agent`, `shared`).
    pub scope: Scope,
    /// `rw`, `ro` or `none`: what the agent may do to its host workspace.
    pub workspace_access: WorkspaceAccess,
    /// Host directory holding one workspace per session; empty means `$MOAT_HOME/workspaces`.
    pub workspace_root: String,
    /// Mount the container's root filesystem read-only (writes go to tmpfs and the workspace).
    pub read_only_root: bool,
    /// Writable tmpfs mounts inside the container (`PATH` or `PATH:SIZE`); needed because the
    /// root is read-only. Each is sized inside `tmpfs_max_bytes`, since tmpfs pages count
    /// against `memory` (docs/security.md, "Sandbox limits").
    pub tmpfs: Vec<String>,
    /// Docker network mode; `none` keeps the sandbox off every network. `host` and
    /// `container:*` are refused because they share the host's or another container's stack.
    pub network: String,
    /// `uid:gid` commands run as; never root by default.
    pub user: String,
    /// Whether `user` was set (file or `MOAT_SANDBOX_USER`) rather than defaulted: a session
    /// with a host workspace runs as the workspace's owner unless it was (docs/security.md,
    /// "Host workspaces"). Not part of the file, nor of the container hash.
    #[serde(skip)]
    pub user_set: bool,
    /// Memory limit (`2g`, `512m`); swap is set equal so the limit is real.
    pub memory: String,
    /// Upper bound on processes in the container: stops fork bombs.
    pub pids_limit: i64,
    /// CPU limit in cores (0 = unlimited).
    pub cpus: f64,
    /// Extra Linux capabilities to add back after `cap-drop ALL` (empty by default).
    pub cap_add: Vec<String>,
    /// The sandbox may become root: `no-new-privileges` off, so `sudo` works, and commands
    /// may ask for uid 0, with [`crate::session::ROOT_CAPS`] added to the bounding set. Never
    /// read from the file: a session gets it from its setup (E2B's sandboxes, docs/e2b.md,
    /// "Users"). Written into the container hash only when set, so other hashes stay.
    #[serde(skip_deserializing, skip_serializing_if = "is_false")]
    pub root: bool,
    /// A second place inside the container where the workspace is mounted (E2B's
    /// `/home/user`, docs/e2b.md, "The base template"); empty: none. Never read from the
    /// file; in the hash only when set.
    #[serde(skip_deserializing, skip_serializing_if = "String::is_empty")]
    pub home_mount: String,
    /// Extra bind mounts `host:container[:ro]`; dangerous host paths are refused at load.
    pub binds: Vec<String>,
    /// Environment every command of the session sees (overridden by a request's `env`).
    pub env: BTreeMap<String, String>,
    /// Directories put in front of PATH after the login profile ran.
    pub path_prepend: Vec<String>,
    /// Shell command run once after a container is created (e.g. installing tools).
    pub setup_command: String,
    /// OCI runtime (e.g. `runsc` for gVisor); empty uses the engine's default.
    pub runtime: String,
    /// Seccomp profile name/path; empty keeps Docker's default. `unconfined` is refused.
    pub seccomp_profile: String,
    /// AppArmor profile; empty keeps Docker's default. `unconfined` is refused.
    pub apparmor_profile: String,
    /// Remove a container idle this many hours (0 disables).
    pub prune_idle_hours: u64,
    /// Remove a container older than this many days (0 disables).
    pub prune_max_age_days: u64,
    /// Most disk a session's workspace plus run directory may hold (`10g`; `0` disables):
    /// past it moat stops the session's commands that keep writing (docs/security.md,
    /// "Disk bound").
    pub workspace_max_bytes: String,
    /// What all tmpfs mounts and `/dev/shm` may hold together (`auto`: half of `memory`; a
    /// size must leave at least a quarter of `memory` to the processes), so a full `/tmp`
    /// cannot take the memory every later command needs (docs/security.md, "Sandbox limits").
    pub tmpfs_max_bytes: String,
    /// The login shell commands run in: `sh` (the image's `/bin/sh`, dash on Debian) or
    /// `bash`, for the syntax agents often assume. Only the shell changes: wrapper, process
    /// group, run files and PATH prelude stay (README, "Configuration").
    /// Last on purpose (with `egress` and `transport`): it shapes no container, and
    /// `config_hash` leaves it out.
    pub shell: crate::config::Shell,
    /// Let sandboxes write the git metadata of every host workspace (`.git`, mounted
    /// read-only by default, because the operator's git on the host runs hooks and config
    /// found there: docs/security.md, "Host workspaces"); one session at a time with `moat
    /// sessions create --git-writable`. After `shell` so `config_hash` leaves it out: it
    /// shapes only host-workspace containers, whose hash covers it with their git mounts.
    pub git_writable: bool,
    /// `[sandbox.egress]`: the daemon decides each connection live, so changing it recreates
    /// no container and `config_hash` leaves it out (after `shell`).
    pub egress: super::EgressConfig,
    /// How commands reach the container: `helper` (moat's in-container helper, falling back
    /// to `exec` when it cannot be used) or `exec` (one engine exec per command). After
    /// `shell` and `egress` so `config_hash` leaves it out too: it shapes no container
    /// (docs/helper.md).
    pub transport: crate::config::Transport,
    /// How `workspace_max_bytes` is held: `auto`, `image` or `watch` (docs/security.md,
    /// "Disk bound"). After `shell` so `config_hash` leaves it out: what it resolves to on
    /// this host goes into the container's hash instead (`Sessions`).
    pub disk_bound: DiskBound,
}

fn is_false(b: &bool) -> bool {
    !*b
}

impl Default for SandboxConfig {
    fn default() -> Self {
        Self {
            image: "moat-sandbox:bookworm".into(),
            scope: Scope::Session,
            workspace_access: WorkspaceAccess::Rw,
            workspace_root: String::new(),
            read_only_root: true,
            tmpfs: vec!["/tmp".into(), "/var/tmp:64m".into(), "/run:64m".into()],
            network: "none".into(),
            user: "1000:1000".into(),
            user_set: false,
            memory: "2g".into(),
            pids_limit: 512,
            cpus: 0.0,
            cap_add: Vec::new(),
            root: false,
            home_mount: String::new(),
            binds: Vec::new(),
            env: BTreeMap::new(),
            path_prepend: Vec::new(),
            setup_command: String::new(),
            runtime: String::new(),
            seccomp_profile: String::new(),
            apparmor_profile: String::new(),
            prune_idle_hours: 24,
            prune_max_age_days: 7,
            workspace_max_bytes: "10g".into(),
            tmpfs_max_bytes: "auto".into(),
            shell: Default::default(),
            git_writable: false,
            egress: Default::default(),
            transport: Default::default(),
            disk_bound: Default::default(),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct ExecConfig {
    /// Milliseconds a foreground command may run before it moves to the background.
    pub yield_ms: u64,
    /// Default foreground timeout in seconds (0 = none).
    pub timeout_secs: u64,
    /// Characters of output a result carries; head 10 % + tail, clamped to [1000, 200000].
    pub max_output_chars: usize,
    /// Bytes of raw output kept on disk per process for `process log` (older bytes are freed).
    pub spill_max_bytes: String,
    /// Carry the working directory and exported variables a command leaves to the session's
    /// next command (docs/mcp.md, "Sticky cwd and env"); per session with `moat sessions set
    /// NAME --sticky`. Off: every command starts in `/workspace` with the configured env.
    pub sticky: bool,
    /// Offer agents the `process` tool (docs/mcp.md, "Without the process tool"). Off: MCP
    /// lists no `process` tool, and `exec` runs every command to its end, ignoring `yieldMs`
    /// and `background`, since nothing could follow up on a command left running. `moat mcp
    /// --no-process-tool` turns it off for one stdio server.
    pub process_tool: bool,
    /// Tell the agent when a background process ends (the documents' `notifyOnExit`): an MCP
    /// logging notification and an `exec` event on the session's event stream. Off: the exit
    /// is seen only through `process poll`/`list`; approval events still arrive
    /// (docs/mcp.md, "Notifications").
    #[serde(alias = "notifyOnExit")]
    pub notify_on_exit: bool,
    /// The paired node a `host: "node"` call without `node` runs on (docs/nodes.md,
    /// "Calls"); empty = such a call must name one.
    pub node: String,
}

impl Default for ExecConfig {
    fn default() -> Self {
        Self {
            yield_ms: 10_000,
            timeout_secs: 1800,
            max_output_chars: 200_000,
            spill_max_bytes: "64m".into(),
            sticky: false,
            process_tool: true,
            notify_on_exit: true,
            node: String::new(),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct ProcessConfig {
    /// Seconds a finished process stays visible to `process list/poll/log`, [60, 10800].
    pub ttl_secs: u64,
    /// Finished processes kept per session; the oldest are dropped first.
    pub max_finished: usize,
}

impl Default for ProcessConfig {
    fn default() -> Self {
        Self {
            ttl_secs: 1800,
            max_finished: 200,
        }
    }
}

impl ExecConfig {
    /// The spill bound in bytes (validated at load, so this cannot fail afterwards).
    pub fn spill_max(&self) -> u64 {
        super::parse_size(&self.spill_max_bytes).unwrap_or(64 << 20)
    }
}

impl SandboxConfig {
    /// Memory limit in bytes (validated at load).
    pub fn memory_bytes(&self) -> i64 {
        super::parse_size(&self.memory)
            .map(|b| b as i64)
            .unwrap_or(2 << 30)
    }

    /// Every tmpfs with its size, inside the memory limit (validated at load, so this falls
    /// back to the engine's defaults only for a config that skipped validation).
    pub fn tmpfs_plan(&self) -> super::TmpfsPlan {
        let memory = self.memory_bytes().max(0) as u64;
        super::tmpfs_plan(memory, &self.tmpfs_max_bytes, &self.tmpfs).unwrap_or_else(|_| {
            super::TmpfsPlan {
                mounts: self
                    .tmpfs
                    .iter()
                    .map(|e| super::TmpfsMount {
                        path: e.split(':').next().unwrap_or_default().to_string(),
                        size: None,
                    })
                    .collect(),
                shm: None,
                total: None,
            }
        })
    }

    /// `workspace_max_bytes` in bytes (0: no bound); validated at load.
    pub fn workspace_max(&self) -> u64 {
        super::parse_size(&self.workspace_max_bytes).unwrap_or(10 << 30)
    }

    /// The numeric uid and gid commands run as (validated at load).
    pub fn uid_gid(&self) -> (u32, u32) {
        let mut it = self.user.splitn(2, ':');
        let uid = it.next().and_then(|u| u.parse().ok()).unwrap_or(1000);
        let gid = it.next().and_then(|g| g.parse().ok()).unwrap_or(uid);
        (uid, gid)
    }
}
