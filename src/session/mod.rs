//! Session keys and their containers: naming, the container spec built from config, and the
//! manager that creates, reuses, adopts and recreates them.

pub mod cgroup;
mod container_name;
mod dirs;
pub mod disk;
pub mod disk_image;
pub mod disk_stop;
mod git_config;
pub mod git_guard;
mod git_index;
pub mod health;
mod manager;
pub mod pool;
mod pool_slot;
mod prune;
pub mod setup;
mod spec;
mod writable_roots;

pub use crate::session_key::{validate_key, KeyError};
pub use container_name::{container_key, ContainerName};
pub use manager::{SessionContainer, SessionError, Sessions};
pub use pool_slot::is_slot_key;
pub use prune::{prune_once, prune_reason};
pub use setup::SetupError;
pub use spec::{
    build_spec, config_hash, labels, GitMode, GIT_LABEL, MOAT_LABEL, POOL_LABEL, ROOT_CAPS,
    RUN_MOUNT,
};
