//! Approvals (docs/approvals.md): a pending approval binds the exact plan an operator is asked about;
//! operators decide through the CLI or the HTTP API with the operator token; the moat that
//! registered it notices the decision and runs that plan, once.
//!
//! `binding` is what an approval is bound to, `persist` what allow-always adds, `service` the
//! operations (the library API behind the CLI and the HTTP handlers), `text` the messages,
//! `wake` how waiters learn of decisions.

mod binding;
mod error;
mod persist;
mod service;
mod text;
mod wake;

#[cfg(test)]
mod tests;

pub use binding::{env_hash, Binding, BoundFile};
pub use error::ApprovalError;
pub use persist::{command_entry, entries as persist_entries, is_interpreter, PersistEntry};
pub use service::{allowlist_target, ApprovalDecision, Approvals, Decider, NewApproval};
pub use text::{denied_event, finished_event, pending_result, running_event};
pub use wake::{Wakeups, FALLBACK as WAKE_FALLBACK};
