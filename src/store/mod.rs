//! moat's durable state in SQLite (`$MOAT_HOME/state.db`): sessions, the process index,
//! approvals, the run-time allowlist, skill switches, the audit log and the pairings with
//! remote nodes.
//!
//! One connection behind a `std::sync::Mutex`: statements are short and never held across an
//! `.await`, and WAL lets a second moat (the CLI next to `moat serve`) read concurrently.

mod allowlist;
mod approval_kinds;
mod approvals;
mod audit;
mod db;
mod egress;
mod error;
mod nodes;
mod processes;
mod sessions;
mod setup;
mod sticky;

pub use allowlist::AllowlistRow;
pub use approval_kinds::{ApprovalStatus, RecordedDecision};
pub use approvals::ApprovalRow;
pub use audit::AuditRow;
pub use db::{now_ms, Store};
pub use egress::SessionEgress;
pub use error::StoreError;
pub use nodes::{NodeRow, NodeTokenRow};
pub use processes::{ProcessRow, ProcessStatus};
pub use sessions::{SessionPolicy, SessionRow};
pub use setup::{SessionSetup, WorkspaceRow};
