//! Ending what a container command started, by its marker: every container command carries
//! `MOAT_PROCESS=<its id>` ([`super::script::PROCESS_MARKER`]), which survives `setsid`,
//! `nohup` and double forks, so what left the command's process group is still found
//! (docs/security.md, "Ending a command").

use std::time::Duration;

use super::script::sweep_argv;
use crate::runtime::Executor;

/// How long one sweep may run before moat ends it: five passes over a container at its pids
/// limit, with room to spare (docs/helper.md, "Deadlines").
const SWEEP_DEADLINE: Duration = Duration::from_secs(20);

/// Kills every process in `container` that carries process `id`'s marker (five passes at
/// most, see `script::sweep_argv`); returns how many it killed.
pub(super) async fn sweep(runtime: &dyn Executor, container: &str, id: &str) -> usize {
    let Some(argv) = sweep_argv(id) else {
        return 0;
    };
    match runtime
        .exec_capture_within(container, argv, None, SWEEP_DEADLINE)
        .await
    {
        Ok((_, out)) => {
            let swept = String::from_utf8_lossy(&out).matches("swept").count();
            if swept > 0 {
                tracing::info!(%container, %id, swept, "ended processes that left the group");
            }
            swept
        }
        Err(e) => {
            tracing::warn!(%container, %id, error = %e, "failed to sweep for marked processes");
            0
        }
    }
}
