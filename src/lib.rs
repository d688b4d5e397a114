//! moat: a container sandbox runner for AI agents.
//!
//! Layers, top to bottom (data flows down, only results and events flow back up):
//! `cli` → `tools` (exec, process) → `policy` → `process` (registry, output) →
//! `session` (containers) → `runtime` (the engine seam). `config`, `home` and `store` are
//! shared foundations; `output`, `keys` and `names` are pure helpers.

pub mod app;
pub mod approvals;
pub mod bench;
pub mod config;
pub mod daemon;
pub mod disk_guard;
pub mod error_chain;
pub mod exec;
pub mod files;
pub mod home;
pub mod host;
pub mod image;
pub mod keys;
pub mod mcp;
pub mod names;
pub mod output;
pub mod policy;
pub mod process;
pub mod runtime;
pub mod secrets;
pub mod server;
pub mod session;
pub mod skills;
pub mod store;
pub mod tools;
