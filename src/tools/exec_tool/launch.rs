//! Starting a prepared run and shaping its result (finished, or running in the background).

use std::sync::Arc;
use std::time::Duration;

use super::request::ExecRequest;
use crate::contract::Place;
use crate::contract::{
    finished_result, running_result, with_limit, with_note, with_record, ToolResult,
};
use crate::process::limit::LEFTOVERS_NOTE;
use crate::process::{Proc, ProcessError, RunFiles, StartSpec};

use super::error::ExecError;
use super::prepare::Prepared;
use super::tool::ExecTool;

impl ExecTool {
    /// Starts `command` (the plan) as prepared. `notify` is false for approved plans, whose
    /// waiter sends its own `Exec finished` event.
    pub(super) async fn launch(
        &self,
        p: &Prepared,
        command: &str,
        req: &ExecRequest,
        notify: bool,
    ) -> Result<Arc<Proc>, ExecError> {
        // The backstop for every start (approved plans are rewritten before they run).
        p.check_exec_size(command, command != req.command)?;
        let background = req.background == Some(true);
        let spec = StartSpec {
            session: p.session.clone(),
            place: p.place.clone(),
            run_dir: p.run_dir.clone(),
            command: command.to_string(),
            cwd: p.cwd.clone(),
            env: with_terminal_type(p.env.clone(), req.pty == Some(true)),
            pty: req.pty == Some(true),
            background,
            timeout_secs: req.timeout_secs(self.config.exec.timeout_secs),
            secrets: p.secrets.clone(),
            owner: p.owner,
            notify_exit: notify,
            shell: p.shell,
            split_stderr: p.split_stderr,
            sticky: p.sticky,
            user: p.user.clone(),
        };
        let proc = match self.registry.start(spec.clone()).await {
            Ok(p) => p,
            // The container went away behind our back (docker rm, engine restart): forget
            // the cached one and try once more with a fresh container.
            Err(ProcessError::Runtime(e)) if e.is_gone() && !p.on_host() => {
                self.sessions.invalidate(&p.session);
                let c = self.sessions.ensure(&p.session).await?;
                self.registry
                    .start(StartSpec {
                        place: Place::Container(c.name),
                        run_dir: c.run_dir,
                        ..spec
                    })
                    .await?
            }
            Err(e) => return Err(e.into()),
        };
        Ok(proc)
    }

    /// Waits up to the yield window (or to the end), then returns the finished result, or a
    /// `running` result while the process continues in the background.
    pub(super) async fn outcome(
        &self,
        p: &Prepared,
        proc: Arc<Proc>,
        req: &ExecRequest,
        wait_to_end: bool,
    ) -> ToolResult {
        let background = req.background == Some(true);
        let timeout_secs = req.timeout_secs(self.config.exec.timeout_secs);
        let started = proc.info.started_at_ms;
        // Until it yields, the command belongs to this call: if the call goes away (this
        // future is dropped), the guard ends the command instead of leaving it unseen.
        let guard = CancelOnDrop {
            registry: &self.registry,
            proc: &proc,
        };
        let ended = if background {
            false
        } else if wait_to_end && req.yield_ms.is_none() {
            proc.wait_exit(Duration::MAX / 4).await
        } else {
            let window = req.yield_window_ms(self.config.exec.yield_ms);
            proc.wait_exit(Duration::from_millis(window)).await
        };
        std::mem::forget(guard);
        if !ended {
            self.registry.set_background(&proc);
            let owner = (!p.on_host()).then_some(p.owner);
            let files = RunFiles::open(&p.run_dir, &proc.info.id, owner).ok();
            if let (false, Some(files)) = (proc.info.pty, &files) {
                files.wait_ready(Duration::from_secs(5)).await;
            }
            // Through `with_output`: it may have ended (and shelved its views) meanwhile.
            let tail = proc.with_output(|st| st.output.tail(2000));
            return running_result(
                &proc.info.id,
                files.as_ref().and_then(RunFiles::read_pgid),
                proc.info.started_at_ms,
                &p.cwd,
                tail,
            )
            .with_warnings(&p.warnings);
        }
        // The result is taken once; the record keeps only what it needs after (`shelf`).
        let (exit, aggregated, truncated, limit, leftovers_ended) = proc.with_output(|st| {
            (
                st.exit.clone().expect("ended"),
                st.output.aggregated(),
                st.output.truncated(),
                st.limit,
                st.leftovers_ended,
            )
        });
        // A foreground run's result is its whole record, unless the output cap cut it: then
        // the record stays (evicted like any finished process) so `process log` can page what
        // the result left out (docs/mcp.md, `log`).
        // A sticky session keeps what the command left, before its files go.
        self.capture_sticky(p, &proc, req);
        // One a kill request ended (an interrupted CLI) stays listed with its signal, as a
        // cancelled call's does (README, "moat exec").
        let kill_requested = proc.lock().kill_requested;
        if kill_requested {
            self.registry.set_background(&proc);
        } else if !truncated {
            self.registry.forget(&proc);
        }
        let duration = exit.finished_at_ms - started;
        let mut result =
            finished_result(&exit, aggregated, truncated, duration, &p.cwd, timeout_secs);
        // What the exit status cannot say: a limit that cut it short, and processes it left
        // that moat ended (docs/mcp.md, "Limits in results").
        if let Some(hit) = &limit {
            result = with_limit(result, hit);
            if let Some(wedge) = self.wedged(&proc.info.place).await {
                result = with_note(result, &wedge.sentence(&p.session));
            }
        }
        if leftovers_ended && limit.is_none() {
            result = with_note(result, LEFTOVERS_NOTE);
        }
        let result = if truncated {
            with_record(result, &proc.info.id)
        } else {
            result
        };
        result.with_warnings(&p.warnings)
    }
}

impl ExecTool {
    /// Whether the container at `place` is so full that no new command can run (a limit left
    /// it wedged; docs/security.md, "Sandbox limits"). Never the host.
    pub(super) async fn wedged(&self, place: &Place) -> Option<crate::session::health::Wedge> {
        let usage = self.registry.cgroup(place).await?.usage()?;
        crate::session::health::wedge_of(&usage)
    }
}

/// What a foreground command's output ends with when its call went away.
pub const CANCELLED_NOTE: &str =
    "\n[moat] the call that started this command was cancelled; the command was ended.\n";

/// Ends a foreground command whose call was dropped before it finished or yielded.
struct CancelOnDrop<'a> {
    /// Where the process is recorded (and moved to the background, to stay visible).
    registry: &'a Arc<crate::process::Registry>,
    /// The command the call was waiting on.
    proc: &'a Arc<Proc>,
}

impl Drop for CancelOnDrop<'_> {
    fn drop(&mut self) {
        self.registry.cancel(self.proc, CANCELLED_NOTE);
    }
}

/// What a PTY run's terminal is, unless the request or the config named one: without `TERM`,
/// `clear`, `tput` and curses programs refuse to run ("TERM environment variable not set").
const PTY_TERM: &str = "xterm-256color";

/// `env` with `TERM` for a PTY run that has none.
fn with_terminal_type(mut env: Vec<String>, pty: bool) -> Vec<String> {
    if pty && !env.iter().any(|kv| kv.starts_with("TERM=")) {
        env.push(format!("TERM={PTY_TERM}"));
    }
    env
}

#[cfg(test)]
mod terminal_type_tests {
    use super::*;

    #[test]
    fn a_pty_run_has_a_terminal_type_unless_one_was_set() {
        assert_eq!(
            with_terminal_type(vec!["A=1".into()], true),
            ["A=1", "TERM=xterm-256color"]
        );
        assert_eq!(
            with_terminal_type(vec!["TERM=vt100".into()], true),
            ["TERM=vt100"]
        );
        assert_eq!(with_terminal_type(vec!["A=1".into()], false), ["A=1"]);
    }
}
