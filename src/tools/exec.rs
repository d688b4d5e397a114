//! The `exec` tool.

use std::sync::Arc;
use std::time::Duration;

use crate::config::Config;
use crate::exec::{
    finished_result, map_workdir, merge_env, running_result, validate_env, EnvError, ExecRequest,
    HostChoice, RequestError, ToolResult, WorkdirError,
};
use crate::process::{ProcessError, Registry, RunFiles, StartSpec};
use crate::session::{SessionError, Sessions};
use crate::store::now_ms;

#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    #[error(transparent)]
    Request(#[from] RequestError),
    #[error(transparent)]
    Env(#[from] EnvError),
    #[error(transparent)]
    Workdir(#[from] WorkdirError),
    #[error(transparent)]
    Session(#[from] SessionError),
    #[error(transparent)]
    Process(#[from] ProcessError),
    #[error("run on the host: elevated execution is not enabled in this moat (failing gate: elevated.enabled)")]
    HostUnavailable,
}

/// See the module docs.
pub struct ExecTool {
    pub sessions: Arc<Sessions>,
    pub registry: Arc<Registry>,
    pub config: Arc<Config>,
}

impl ExecTool {
    /// Runs one `exec` call for `session`. `wait_to_end` makes a foreground call wait for the
    /// command however long it takes (the CLI's default), instead of yielding.
    pub async fn run(&self, session: &str, req: &ExecRequest, wait_to_end: bool) -> Result<ToolResult, ExecError> {
        req.validate()?;
        validate_env(&req.env)?;
        if req.host()? == HostChoice::Host {
            return Err(ExecError::HostUnavailable);
        }
        let container = match self.sessions.ensure(session).await {
            Ok(c) => c,
            Err(e) => return Err(e.into()),
        };
        let cwd = map_workdir(req.workdir.as_deref(), &container.workspace)?;
        let sandbox = &self.config.sandbox;
        let env = merge_env(&sandbox.env, &req.env, &sandbox.path_prepend);
        let background = req.background == Some(true);
        let timeout_secs = req.timeout_secs(self.config.exec.timeout_secs);
        let spec = StartSpec {
            session: session.to_string(),
            container: container.name.clone(),
            run_dir: container.run_dir.clone(),
            command: req.command.clone(),
            cwd: cwd.clone(),
            env,
            pty: req.pty == Some(true),
            background,
            timeout_secs,
            secrets: Vec::new(),
            owner: sandbox.uid_gid(),
        };
        let started = now_ms();
        let proc = match self.registry.start(spec.clone()).await {
            Ok(p) => p,
            // The container went away behind our back (docker rm, engine restart): forget
            // the cached one and try once more with a fresh container.
            Err(ProcessError::Runtime(e)) if e.is_gone() => {
                self.sessions.invalidate(session);
                let c = self.sessions.ensure(session).await?;
                self.registry
                    .start(StartSpec {
                        container: c.name,
                        run_dir: c.run_dir,
                        ..spec
                    })
                    .await?
            }
            Err(e) => return Err(e.into()),
        };
        let warnings: Vec<String> = container.warning.into_iter().collect();
        let ended = if background {
            false
        } else if wait_to_end && req.yield_ms.is_none() {
            proc.wait_exit(Duration::MAX / 4).await
        } else {
            let window = req.yield_window_ms(self.config.exec.yield_ms);
            proc.wait_exit(Duration::from_millis(window)).await
        };
        if !ended {
            self.registry.set_background(&proc);
            let files = RunFiles::new(&container.run_dir, &proc.info.id);
            if !proc.info.pty {
                files.wait_ready(Duration::from_secs(5)).await;
            }
            let tail = proc.lock().output.tail(2000);
            return Ok(running_result(&proc.info.id, files.read_pgid(), proc.info.started_at_ms, &cwd, tail)
                .with_warnings(&warnings));
        }
        let (exit, aggregated, truncated) = {
            let st = proc.lock();
            (st.exit.clone().expect("ended"), st.output.aggregated(), st.output.truncated())
        };
        // A foreground run's result is its whole record: nothing is kept for `process`.
        self.registry.forget(&proc);
        let duration = exit.finished_at_ms - started;
        Ok(finished_result(&exit, aggregated, truncated, duration, &cwd, timeout_secs).with_warnings(&warnings))
    }
}
