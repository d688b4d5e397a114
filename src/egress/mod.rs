//! Network egress under policy (docs/security.md, "Network egress").
//!
//! With `sandbox.network = "egress"` a session's only way out is a moat-run proxy: `host`
//! checks the names a sandbox asks for, `rules` and `decide` are the pure policy, `addr`
//! which resolved addresses a glob may reach, `proxy` the proxy itself, `peers` who may use a proxy, `control` the narrow
//! channel from the proxy to the daemon, `gate` the daemon's side of it, `lifecycle` the
//! per-session network and proxy container, `audit_budget` how many rows a session may write.

mod addr;
pub mod audit_budget;
pub mod container;
pub mod control;
mod decide;
mod error;
pub mod gate;
mod host;
pub mod lifecycle;
pub mod peers;
pub mod proxy;
mod rules;

pub use addr::is_public;
pub use decide::{decide, decide_name, Answers, EgressPolicy, NameVerdict, Refusal, Verdict};
pub use error::EgressError;
pub use host::{split_authority, Host};
pub use rules::{grant_entry, Rule};
