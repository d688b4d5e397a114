//! moat: a container sandbox runner for AI agents.
//!
//! Layers, top to bottom (data flows down, only results and events flow back up; the map
//! with every module is docs/ARCHITECTURE.md):
//! - edges: `cli` and `mcp` (stdio) reach the daemon through `daemon`; `server` (HTTP, with
//!   `mcp` over HTTP and the `console`) serves one `app`;
//! - orchestration: `tools` (exec, process), `files`, `approvals`, checking requests against
//!   `contract` (what an exec call is: request, result, env rules, failure kinds) and `policy`;
//! - `process` (registry, supervisor, run files) → `session` (containers) and `egress` →
//!   `runtime` (the seams: `Engine` for containers, `Executor` for commands — Docker, the
//!   in-container helper, a fake for tests) or `host` (an `Executor` for this machine).
//!
//! `config`, `home`, `store`, `secrets` and `skills` are shared foundations; `policy`,
//! `output`, `terminal_keys`, `names` and `session_key` are pure and synchronous.

pub mod app;
pub mod approvals;
pub mod bench;
pub mod bench_runtimes;
pub mod config;
pub mod console;
pub mod contract;
pub mod daemon;
pub mod disk_guard;
pub mod egress;
pub mod error_chain;
pub mod files;
pub mod home;
pub mod host;
pub mod image;
pub mod mcp;
pub mod names;
pub mod output;
pub mod policy;
pub mod process;
pub mod runtime;
pub mod secrets;
pub mod server;
pub mod session;
pub mod session_key;
pub mod skills;
pub mod store;
pub mod terminal_keys;
pub mod tools;
