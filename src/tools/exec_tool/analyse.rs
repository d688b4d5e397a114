//! The one bounded entry point that parses a command for moat's callers (docs/security.md,
//! "Command parsing bounds"): exec over HTTP, MCP and the CLI, approval waiters, and
//! `moat policy explain`.
//!
//! The parse never runs on an async worker: a parse that takes long would stall every other
//! request the worker serves (health checks included). It runs on a thread of its own with a
//! large stack, so that a nesting the pre-scan let through still cannot overflow it, and under
//! a deadline past which the command is refused. A thread cannot be cancelled: one that passes
//! the deadline keeps its slot until it ends, so the slots bound how much CPU a flood of
//! slow commands can hold, and callers waiting for a slot wait within the same deadline.

use std::sync::{Arc, LazyLock};
use std::time::Duration;

use tokio::sync::Semaphore;

use crate::policy::{self, BoundsError, Parsed};

/// How long the analysis of one command may take, waiting for a slot included. The worst case
/// within the bounds parses in milliseconds (docs/security.md); this only stops the unforeseen.
pub const ANALYSE_DEADLINE: Duration = Duration::from_secs(2);

/// Parses running at once. Beyond this, callers wait for a slot (within the deadline).
pub const MAX_CONCURRENT_PARSES: usize = 4;

/// The parse thread's stack: far more than the deepest accepted nesting needs (it fits the
/// 2 MiB of an ordinary thread even in a debug build; the fuzz target checks that), so a shape
/// the pre-scan misjudges still has room. Only touched pages cost memory.
const PARSE_STACK_BYTES: usize = 64 * 1024 * 1024;

/// The slots shared by every caller in this process.
static SLOTS: LazyLock<Arc<Semaphore>> =
    LazyLock::new(|| Arc::new(Semaphore::new(MAX_CONCURRENT_PARSES)));

/// Bounds and parses `command` off the async workers, within [`ANALYSE_DEADLINE`]. Never fails:
/// a command that cannot be analysed in time comes back refused.
pub async fn analyse(command: &str) -> Parsed {
    analyse_within(command, ANALYSE_DEADLINE).await
}

/// [`analyse`] with a chosen deadline.
pub async fn analyse_within(command: &str, deadline: Duration) -> Parsed {
    analyse_in(command, deadline, &SLOTS).await
}

/// [`analyse_within`] with the slots to wait for.
async fn analyse_in(command: &str, deadline: Duration, slots: &Arc<Semaphore>) -> Parsed {
    // The cheap pre-scan first, here: a refused command costs no thread.
    if let Err(why) = policy::check_bounds(command) {
        return Parsed::refused(command, why);
    }
    let too_long = || Parsed::refused(command, BoundsError::TookTooLong);
    let until = tokio::time::Instant::now() + deadline;
    let slot = match tokio::time::timeout_at(until, slots.clone().acquire_owned()).await {
        Ok(Ok(slot)) => slot,
        Ok(Err(_)) | Err(_) => return too_long(),
    };
    let (tx, rx) = tokio::sync::oneshot::channel();
    let text = command.to_owned();
    let spawned = std::thread::Builder::new()
        .name("moat-parse".into())
        .stack_size(PARSE_STACK_BYTES)
        .spawn(move || {
            let parsed = policy::analyse(&text);
            let _ = tx.send(parsed);
            drop(slot);
        });
    if let Err(e) = spawned {
        tracing::warn!(error = %e, "failed to start a parse thread");
        return too_long();
    }
    match tokio::time::timeout_at(until, rx).await {
        Ok(Ok(parsed)) => parsed,
        Ok(Err(_)) | Err(_) => too_long(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn refusals_name_the_bound() {
        let braces = format!("{}true; {}", "{ ".repeat(400), "}; ".repeat(400));
        let parsed = analyse(&braces).await;
        assert_eq!(
            parsed.refusal().map(ToString::to_string).as_deref(),
            Some("command nests deeper than 32 levels")
        );
        let parens = format!("{}1", "((".repeat(16));
        let parsed = analyse(&parens).await;
        assert_eq!(
            parsed.refusal().map(ToString::to_string).as_deref(),
            Some(
                "command nests substitutions, parentheses or case statements deeper than 10 levels"
            )
        );
    }

    #[tokio::test]
    async fn ordinary_commands_parse() {
        let parsed = analyse("git status && ls -la | wc -l").await;
        assert_eq!(parsed.refusal(), None);
        assert_eq!(parsed.command_names(), vec!["git", "ls", "wc"]);
    }

    #[tokio::test]
    async fn a_deadline_refuses_without_blocking_the_caller() {
        // Every slot held (as by a flood of slow parses): the caller is refused at its deadline
        // instead of queueing behind them.
        let busy = Arc::new(Semaphore::new(0));
        let started = std::time::Instant::now();
        let parsed = analyse_in("ls", Duration::from_millis(100), &busy).await;
        assert_eq!(parsed.refusal(), Some(&BoundsError::TookTooLong));
        assert_eq!(
            parsed.refusal().map(ToString::to_string).as_deref(),
            Some("command took too long to analyse")
        );
        let waited = started.elapsed();
        assert!(waited >= Duration::from_millis(100) && waited < Duration::from_secs(1));
        // A free slot: the same command parses.
        let free = Arc::new(Semaphore::new(1));
        let parsed = analyse_in("ls", Duration::from_secs(2), &free).await;
        assert_eq!(parsed.refusal(), None);
    }
}
