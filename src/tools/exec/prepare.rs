//! Everything a run needs before the policy decides: where it runs, its working directory,
//! its environment (secrets included), the policy in force and the PATH lookups.

use std::path::PathBuf;

use crate::exec::{map_workdir, merge_env, ExecRequest, Target};
use crate::host::{self, HOST_CONTAINER};
use crate::policy::{
    evaluate_parsed, raise_ask, tighten_security, Ask, Decision, Evaluation, MapResolver, Parsed,
    Policy, Security,
};

use super::tool::{ExecError, ExecTool};

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

/// A run, ready for the policy.
#[derive(Clone)]
pub(super) struct Prepared {
    pub session: String,
    pub target: Target,
    /// The container name, or [`HOST_CONTAINER`].
    pub container: String,
    pub run_dir: PathBuf,
    pub cwd: String,
    /// `KEY=VALUE`, final.
    pub env: Vec<String>,
    pub secrets: Vec<(String, String)>,
    pub policy: Policy,
    pub resolver: MapResolver,
    /// Exact commands an operator allowed for good (`=command:<sha256>` entries).
    pub exact: Vec<String>,
    pub warnings: Vec<String>,
    pub owner: (u32, u32),
}

impl Prepared {
    /// `sandbox`, `host` or `host-full`: what an approval is bound to.
    pub fn label(&self) -> &'static str {
        match self.target {
            Target::Sandbox => "sandbox",
            Target::Host { full: false } => "host",
            Target::Host { full: true } => "host-full",
        }
    }

    pub fn on_host(&self) -> bool {
        matches!(self.target, Target::Host { .. })
    }

    /// Evaluates a parsed command. An exact command an operator allowed for good passes where
    /// the allowlist alone would miss (never past a denied segment, a parsing bound or
    /// `ask = always`).
    pub fn evaluate(&self, parsed: &Parsed) -> Evaluation {
        let command = parsed.command();
        let mut eval = evaluate_parsed(parsed, &self.cwd, &self.policy, &self.resolver);
        let refused_outright = match &eval.decision {
            Decision::Allow => false,
            Decision::Ask { .. } => false,
            Decision::Deny { .. } => {
                eval.segments.is_empty()
                    || eval
                        .segments
                        .iter()
                        .any(|s| s.outcome == crate::policy::SegmentOutcome::Denied)
            }
        };
        let durable = self
            .exact
            .contains(&crate::approvals::command_entry(command));
        if durable
            && parsed.refusal().is_none()
            && !refused_outright
            && eval.decision != Decision::Allow
            && self.policy.ask != Ask::Always
        {
            eval.decision = Decision::Allow;
            if eval.plan.is_none() {
                eval.plan = Some(crate::policy::Plan {
                    command: command.to_string(),
                    rebuilt: false,
                    segments: Vec::new(),
                });
            }
        }
        eval
    }
}

impl ExecTool {
    pub(super) async fn prepare(
        &self,
        session: &str,
        req: &ExecRequest,
        target: Target,
        parsed: &Parsed,
    ) -> Result<Prepared, ExecError> {
        match target {
            Target::Sandbox => self.prepare_sandbox(session, req, parsed).await,
            Target::Host { full } => self.prepare_host(session, req, full, parsed).await,
        }
    }

    async fn prepare_sandbox(
        &self,
        session: &str,
        req: &ExecRequest,
        parsed: &Parsed,
    ) -> Result<Prepared, ExecError> {
        let container = self.sessions.ensure(session).await?;
        let cwd = map_workdir(req.workdir.as_deref(), &container.workspace)?;
        let sandbox = &self.config.sandbox;
        let secrets = self.secrets.for_target(session, false);
        let mut base = sandbox.env.clone();
        base.extend(secrets.iter().cloned());
        let env = merge_env(&base, &req.env, &sandbox.path_prepend);
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
        apply_request(&mut policy, req);
        // Skills and run-time allowlist entries only matter to an allowlist; in the other
        // modes the exec hot path skips their store reads.
        let allowlist = policy.security == Security::Allowlist;
        let skills = if allowlist { self.skills() } else { Vec::new() };
        let mut resolver = MapResolver::new();
        if allowlist {
            let mut names = parsed.command_names();
            names.extend(crate::skills::names(&skills));
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
                    .exec_capture(&container.name, argv, None)
                    .await
                    .map_err(|e| ExecError::Process(e.into()))?;
                for line in String::from_utf8_lossy(&out).lines() {
                    if let Some((name, path)) = line.split_once('\t') {
                        resolver = resolver.with(name.to_string(), path.to_string());
                    }
                }
            }
        }
        let mut p = Prepared {
            session: session.to_string(),
            target: Target::Sandbox,
            container: container.name.clone(),
            run_dir: container.run_dir.clone(),
            cwd,
            env,
            secrets,
            policy,
            resolver,
            exact: Vec::new(),
            warnings: container.warning.into_iter().collect(),
            owner: sandbox.uid_gid(),
        };
        if allowlist {
            self.add_runtime_entries(&mut p, &skills);
        }
        Ok(p)
    }

    async fn prepare_host(
        &self,
        session: &str,
        req: &ExecRequest,
        full: bool,
        parsed: &Parsed,
    ) -> Result<Prepared, ExecError> {
        crate::session::validate_key(session)
            .map_err(|e| ExecError::Session(crate::session::SessionError::from(e)))?;
        host::check_overrides(&req.env)?;
        let (_, names) = self.sessions.names(session);
        let workspace = self.sessions.workspace_dir(&names.slug);
        let cwd = host_workdir(req.workdir.as_deref(), &workspace)?;
        let login = host::login_path().await.unwrap_or_default();
        let own = std::env::var("PATH").unwrap_or_else(|_| "/usr/bin:/bin".into());
        let path = host::merge_path(&host::split_path(&login), &host::split_path(&own));
        let prepend = host::merge_path(&self.config.elevated.path_prepend, &path);
        let mut base = host::inherited(std::env::vars());
        for var in self.secrets.source_vars() {
            base.remove(&var);
        }
        base.insert("PATH".into(), path.join(":"));
        let secrets = self.secrets.for_target(session, true);
        base.extend(secrets.iter().cloned());
        let env = merge_env(&base, &req.env, &prepend);
        let mut policy = self.config.policy.host.clone();
        if full {
            policy.security = Security::Full;
            policy.ask = Ask::Off;
        }
        apply_request(&mut policy, req);
        let skills = self.skills();
        let mut wanted = parsed.command_names();
        wanted.extend(crate::skills::names(&skills));
        let resolver = host::resolve_names(&wanted, &prepend);
        let run_dir = self.home.host_run_dir();
        crate::home::ensure_private_dir(&run_dir).map_err(|source| ExecError::HostRunDir {
            dir: run_dir.display().to_string(),
            source,
        })?;
        let mut p = Prepared {
            session: session.to_string(),
            target: Target::Host { full },
            container: HOST_CONTAINER.to_string(),
            run_dir,
            cwd,
            env,
            secrets,
            policy,
            resolver,
            exact: Vec::new(),
            warnings: Vec::new(),
            owner: (
                nix::unistd::getuid().as_raw(),
                nix::unistd::getgid().as_raw(),
            ),
        };
        self.add_runtime_entries(&mut p, &skills);
        Ok(p)
    }

    fn skills(&self) -> Vec<crate::skills::SkillState> {
        if !self.config.policy.auto_allow_skills {
            return Vec::new();
        }
        crate::skills::states(&self.config, self.sessions.store()).unwrap_or_default()
    }

    /// Adds enabled skills' binaries and the operator's run-time allowlist entries.
    fn add_runtime_entries(&self, p: &mut Prepared, skills: &[crate::skills::SkillState]) {
        let mut labeled = crate::skills::entries(skills, &p.resolver);
        let target = if p.on_host() { "host" } else { "sandbox" };
        for e in self.approvals.allowlist(Some(target)).unwrap_or_default() {
            if e.command.is_some() {
                p.exact.push(e.entry);
            } else {
                let rule = format!("allowlist: {} ({} by {})", e.entry, e.source, e.added_by);
                labeled.push((e.entry, rule));
            }
        }
        p.policy.labeled_allowlist.extend(labeled);
    }
}

/// A request may only tighten `security` and raise `ask`.
fn apply_request(policy: &mut Policy, req: &ExecRequest) {
    policy.security = tighten_security(
        policy.security,
        req.security.as_deref().and_then(Security::parse_lenient),
    );
    policy.ask = raise_ask(policy.ask, req.ask.as_deref().and_then(Ask::parse_lenient));
}

/// A host working directory: absolute, or relative to the session's host workspace; it must
/// exist and be a directory (no silent fallback).
fn host_workdir(workdir: Option<&str>, workspace: &std::path::Path) -> Result<String, ExecError> {
    let wanted = match workdir.map(str::trim).filter(|w| !w.is_empty()) {
        None => {
            std::fs::create_dir_all(workspace).map_err(|e| ExecError::HostWorkdir {
                dir: workspace.display().to_string(),
                reason: e.to_string(),
            })?;
            workspace.to_path_buf()
        }
        Some(w) if w.starts_with('/') => PathBuf::from(w),
        Some(w) => workspace.join(w),
    };
    let real = std::fs::canonicalize(&wanted).map_err(|e| ExecError::HostWorkdir {
        dir: crate::policy::escape_display(&wanted.display().to_string()),
        reason: e.to_string(),
    })?;
    if !real.is_dir() {
        return Err(ExecError::HostWorkdir {
            dir: crate::policy::escape_display(&wanted.display().to_string()),
            reason: "not a directory".into(),
        });
    }
    Ok(real.display().to_string())
}
