//! moat: a container sandbox runner for AI agents.
//!
//! Layers of the top-level modules, top to bottom: a module uses modules on its own layer or
//! below, never above (data flows down, only results and events flow back up).
//! `scripts/layers` checks it over the `crate::` paths and names the few arrows still known to
//! run up; the map with every module is docs/ARCHITECTURE.md.
//! 1. edges: `cli`, `mcp`, `server` (HTTP, with `mcp` over HTTP and the `console`), `e2b`
//!    (E2B's API), `daemon`
//!    (how the CLI reaches the daemon), `bench`;
//! 2. `app`: assembles one moat;
//! 3. `tools`: the agent's tools, each with its request and the shape of its results;
//! 4. `node`: remote nodes — the gateway's pinned client and its paired nodes (docs/nodes.md);
//! 5. `disk_guard`, the watchdog over the sessions' disks;
//! 6. `process` (registry, supervisor, run files);
//! 7. `session` (containers);
//! 8. `egress` (network egress);
//! 9. `host` (an `Executor` for this machine) and `image`;
//! 10. `runtime` (the seams: `Engine` for containers, `Executor` for commands — Docker, the
//!     in-container helper, a fake for tests);
//! 11. services over the store: `approvals`, `secrets`, `skills`;
//! 12. foundations: `config`, `store`, `home`, `metrics` (the daemon's own figures);
//! 13. `files`: confined file access beneath a root;
//! 14. the wire: `contract` (what every tool shares: results, env rules, failure kinds, where
//!     a command runs), `error_chain`;
//! 15. pure leaves, synchronous and without I/O but for `descriptors` and `proc_start`:
//!     `policy`, `output`, `terminal_keys`, `names`, `session_key`, `wrapper` (the command
//!     wrapper's vocabulary), `descriptors` (opening directories without following links),
//!     `proc_start` (when a process started, from `/proc`).

pub mod app;
pub mod approvals;
pub mod bench;
pub mod config;
pub mod console;
pub mod contract;
pub mod daemon;
pub mod descriptors;
pub mod disk_guard;
pub mod e2b;
pub mod egress;
pub mod error_chain;
pub mod files;
pub mod home;
pub mod host;
pub mod image;
pub mod mcp;
pub mod metrics;
pub mod names;
pub mod node;
pub mod output;
pub mod policy;
pub mod proc_start;
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
pub mod wrapper;
