//! Refusing operator rights to host commands (docs/security.md, "The operator channel"): the
//! check both the socket and the CLI run, and the audit record of a refused attempt.

use std::path::Path;

use super::lineage::{host_origin, HostOrigin, HOST_MARKER};
use crate::store::{Store, StoreError};

/// The audit kind of a refused attempt at the operator channel.
pub const REFUSED_KIND: &str = "operator-refused";

/// Why a caller does not get operator rights.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The calling process.
    pub pid: u32,
    /// The host command it belongs to, when one was found (none when it could not be
    /// examined at all).
    pub origin: Option<HostOrigin>,
    /// What was found, in words, for the error and the audit log.
    pub reason: String,
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}; commands moat starts never act as the operator (docs/security.md, \"The operator channel\")",
            self.reason
        )
    }
}

fn describe(pid: u32, o: &HostOrigin) -> String {
    let how = match o.relation {
        "itself" => "carries its marker".to_string(),
        rel => format!("its {rel}, pid {}, carries its marker", o.marked_pid),
    };
    format!(
        "pid {pid} runs inside host command `{}` ({how})",
        crate::output::escape_display(&o.process_id)
    )
}

/// Checks the process `pid` (a socket peer). `known` names wrapper pids of live host commands
/// this moat started. Fails closed: a process that cannot be examined is refused.
pub fn check_pid(
    proc_root: &Path,
    pid: u32,
    known: &dyn Fn(u32) -> Option<String>,
) -> Result<(), Refusal> {
    match host_origin(proc_root, pid, known) {
        Ok(None) => Ok(()),
        Ok(Some(o)) => Err(Refusal {
            pid,
            reason: describe(pid, &o),
            origin: Some(o),
        }),
        Err(e) => Err(Refusal {
            pid,
            origin: None,
            reason: format!("cannot tell whether the caller runs inside a host command: {e}"),
        }),
    }
}

/// Checks this very process (the CLI): its own environment markers, then its lineage.
pub fn check_self() -> Result<(), Refusal> {
    let pid = std::process::id();
    if let Some(id) = std::env::var_os(HOST_MARKER) {
        let o = HostOrigin {
            process_id: id.to_string_lossy().into_owned(),
            marked_pid: pid,
            relation: "itself",
        };
        return Err(Refusal {
            pid,
            reason: describe(pid, &o),
            origin: Some(o),
        });
    }
    if std::env::var_os("MOAT_SHELL").is_some() {
        return Err(Refusal {
            pid,
            origin: None,
            reason: format!("pid {pid} runs inside a command moat started (MOAT_SHELL is set)"),
        });
    }
    check_pid(Path::new("/proc"), pid, &|_| None)
}

/// Records a refused attempt: `channel` is how it came (`unix socket`, `cli`), `what` the
/// endpoint or command.
pub fn audit_refusal(
    store: &Store,
    r: &Refusal,
    channel: &str,
    what: &str,
    approval_id: Option<&str>,
) -> Result<(), StoreError> {
    let session = r
        .origin
        .as_ref()
        .and_then(|o| store.process(&o.process_id).ok().flatten())
        .map(|p| p.session);
    let host_process = r
        .origin
        .as_ref()
        .map(|o| {
            format!(
                " host-process={}",
                crate::output::escape_display(&o.process_id)
            )
        })
        .unwrap_or_default();
    store.audit(
        REFUSED_KIND,
        approval_id,
        session.as_deref(),
        &format!("{channel}:pid {}", r.pid),
        &format!(
            "{}{host_process}: {}",
            crate::output::escape_display(what),
            r.reason
        ),
    )
}
