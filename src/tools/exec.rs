//! The `exec` tool.

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;

use crate::config::Config;
use crate::exec::{
    finished_result, map_workdir, merge_env, running_result, validate_env, EnvError, ExecRequest,
    HostChoice, RequestError, ToolResult, WorkdirError,
};
use crate::policy::{
    command_names, escape_display, evaluate, raise_ask, tighten_security, Ask, Decision,
    MapResolver, Request as PolicyRequest, Security,
};
use crate::process::{ProcessError, Registry, RunFiles, StartSpec};
use crate::session::{SessionError, Sessions};
use crate::store::now_ms;

/// Resolves each argument name by walking the login PATH for an executable file. Functions
/// and aliases from the image's profile are deliberately not consulted: the plan runs the
/// absolute path found here.
const RESOLVE_SCRIPT: &str = r#"for n in "$@"; do
  case "$n" in */*) continue ;; esac
  old_ifs=$IFS; IFS=:
  for d in $PATH; do
    if [ -n "$d" ] && [ -f "$d/$n" ] && [ -x "$d/$n" ]; then printf '%s\t%s\n' "$n" "$d/$n"; break; fi
  done
  IFS=$old_ifs
done"#;

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

enum Verdict {
    /// Run this exact text (the rebuilt plan when the decision rested on the allowlist).
    Run(String),
    Refuse(ToolResult),
}

/// See the module docs.
pub struct ExecTool {
    pub sessions: Arc<Sessions>,
    pub registry: Arc<Registry>,
    pub config: Arc<Config>,
}

impl ExecTool {
    /// Applies the sandbox policy (SPEC §6). A request may only tighten `security` and raise
    /// `ask`. In allowlist mode names are resolved inside the container by walking PATH
    /// (never through functions or aliases), and what runs is the rebuilt plan.
    async fn check_policy(
        &self,
        session: &str,
        req: &ExecRequest,
        container: &str,
        cwd: &str,
    ) -> Result<Verdict, ExecError> {
        let mut policy = self.config.policy.sandbox.clone();
        // The operator's per-session override: it tightens the config, or replaces it when
        // the operator said `--loosen`.
        if let Ok(Some(o)) = self.sessions.store().session_policy(session) {
            let sec = o.security.as_deref().and_then(Security::parse_lenient);
            let ask = o.ask.as_deref().and_then(Ask::parse_lenient);
            if o.loosen {
                policy.security = sec.unwrap_or(policy.security);
                policy.ask = ask.unwrap_or(policy.ask);
            } else {
                policy.security = tighten_security(policy.security, sec);
                policy.ask = raise_ask(policy.ask, ask);
            }
        }
        policy.security = tighten_security(
            policy.security,
            req.security.as_deref().and_then(Security::parse_lenient),
        );
        policy.ask = raise_ask(policy.ask, req.ask.as_deref().and_then(Ask::parse_lenient));
        let mut resolver = MapResolver::new();
        if policy.security == Security::Allowlist {
            let names = command_names(&req.command);
            if !names.is_empty() {
                let mut argv = vec![
                    "sh".to_string(),
                    "-lc".to_string(),
                    RESOLVE_SCRIPT.to_string(),
                    "moat-resolve".to_string(),
                ];
                argv.extend(names);
                let (_, out) = self
                    .sessions
                    .runtime()
                    .exec_capture(container, argv, None)
                    .await
                    .map_err(|e| ExecError::Process(e.into()))?;
                for line in String::from_utf8_lossy(&out).lines() {
                    if let Some((name, path)) = line.split_once('\t') {
                        resolver = resolver.with(name.to_string(), path.to_string());
                    }
                }
            }
        }
        let eval = evaluate(
            &PolicyRequest {
                command: &req.command,
                cwd,
            },
            &policy,
            &resolver,
        );
        Ok(match eval.decision {
            Decision::Allow => Verdict::Run(eval.plan.map(|p| p.command).unwrap_or_else(|| req.command.clone())),
            Decision::Ask { reason } => Verdict::Refuse(ToolResult::new(
                format!("Approval required ({reason}), but this moat has no approval channel: the command did not run.\n{}", escape_display(&req.command)),
                json!({"status": "failed", "approvalRequired": true, "reason": reason}),
            )),
            Decision::Deny { reason } => Verdict::Refuse(ToolResult::new(
                format!("Exec denied (sandbox, {reason}): {}", escape_display(&req.command)),
                json!({"status": "failed", "denied": true, "reason": reason}),
            )),
        })
    }

    /// Runs one `exec` call for `session`. `wait_to_end` makes a foreground call wait for the
    /// command however long it takes (the CLI's default), instead of yielding.
    pub async fn run(
        &self,
        session: &str,
        req: &ExecRequest,
        wait_to_end: bool,
    ) -> Result<ToolResult, ExecError> {
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
        let command = match self
            .check_policy(session, req, &container.name, &cwd)
            .await?
        {
            Verdict::Run(command) => command,
            Verdict::Refuse(result) => return Ok(result),
        };
        let background = req.background == Some(true);
        let timeout_secs = req.timeout_secs(self.config.exec.timeout_secs);
        let spec = StartSpec {
            session: session.to_string(),
            container: container.name.clone(),
            run_dir: container.run_dir.clone(),
            command,
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
            return Ok(running_result(
                &proc.info.id,
                files.read_pgid(),
                proc.info.started_at_ms,
                &cwd,
                tail,
            )
            .with_warnings(&warnings));
        }
        let (exit, aggregated, truncated) = {
            let st = proc.lock();
            (
                st.exit.clone().expect("ended"),
                st.output.aggregated(),
                st.output.truncated(),
            )
        };
        // A foreground run's result is its whole record: nothing is kept for `process`.
        self.registry.forget(&proc);
        let duration = exit.finished_at_ms - started;
        Ok(
            finished_result(&exit, aggregated, truncated, duration, &cwd, timeout_secs)
                .with_warnings(&warnings),
        )
    }
}
