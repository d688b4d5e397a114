//! moat's configuration: `$MOAT_HOME/moat.toml`, `MOAT_*` environment overrides, defaults.
//!
//! Loading is a pure function of (file text, environment) so every rule is unit-tested without
//! touching the disk; `load` is the thin I/O shell around it.

pub mod e2b;
mod egress;
mod env;
mod error;
mod file;
mod load;
mod node;
pub mod pool;
mod scope;
mod sections;
mod shell;
mod size;
mod tmpfs;
mod transport;
mod validate;

pub use e2b::E2bConfig;
pub use egress::{EgressAsk, EgressConfig};
pub use error::ConfigError;
pub use file::{
    AgentToken, Config, DiskBound, ExecConfig, PolicyConfig, ProcessConfig, SandboxConfig,
    ServeConfig, WorkspaceAccess,
};
pub use load::{load, load_from_str, ConfigSource};
pub use node::NodeConfig;
pub use pool::PoolConfig;
pub use scope::Scope;
pub use sections::{ApprovalsConfig, ElevatedConfig, ElevatedLevel, SecretConfig, SkillConfig};
pub use shell::Shell;
pub use size::parse_size;
pub use tmpfs::{plan as tmpfs_plan, TmpfsMount, TmpfsPlan};
pub use transport::Transport;
pub use validate::check_host_path;
