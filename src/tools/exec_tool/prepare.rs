//! Everything a run needs before the policy decides: where it runs, its working directory,
//! its environment (secrets included), the policy in force and the PATH lookups.

use std::collections::BTreeMap;
use std::path::PathBuf;

use super::request::ExecRequest;
use super::workdir::map_workdir;
use crate::contract::Place;
use crate::contract::{merge_env, Target};
use crate::host;
use crate::policy::{
    compose, covered, judge, must_ask, pattern_words, reads_entries, source_words, with_entries,
    Ask, Decision, Evaluation, Layers, MapResolver, Parsed, Policy, Request as PolicyRequest,
    RequestLevels, Security, Standing,
};
use crate::store::SessionPolicy;

use super::error::ExecError;
use super::tool::ExecTool;
use crate::config::Shell;
use crate::contract::ApprovalTarget;

/// Resolves command words in the sandbox: `$1` is the working directory, then the words. A bare
/// name is looked up by walking the login PATH for an executable file; a path is taken relative
/// to the working directory. Each hit prints `word<TAB>PATH-hit<TAB>symlink target` (the PATH
/// hit is empty for a path). Functions and aliases from the image's profile are deliberately
/// not consulted (the plan runs the absolute path found here), and the helpers this script uses
/// are unset first so a planted profile cannot answer for them. `readlink -f` is not in every
/// image, so without it the links are followed by hand (`ls -ld`, at most 40 hops) and the
/// directory is made physical with `cd -P`.
///
/// Before `$1`, the script takes the PATH entries the run itself gets (`$1` the operator's
/// `path_prepend`, `$2` a request's `env.PATH`, both colon-joined, possibly empty) and applies
/// them with the run's own prelude, so the names are looked up on the PATH the command will
/// have. It must stay POSIX sh: it runs with `sh -lc` whatever `sandbox.shell` says.
const RESOLVE_SCRIPT: &str = r#"unalias -a 2>/dev/null
unset -f readlink ls cd pwd printf [ test 2>/dev/null
MOAT_PATH_PREPEND=$1 MOAT_PATH_REQUEST=$2
shift 2
@PRELUDE@
moat_real() {
  p=$1; hops=0
  r=$(readlink -f -- "$p" 2>/dev/null) && [ -n "$r" ] && { printf '%s' "$r"; return 0; }
  while [ -h "$p" ] && [ "$hops" -lt 40 ]; do
    t=$(ls -ld -- "$p" 2>/dev/null) || return 1
    t=${t#* -> }
    case $t in /*) p=$t ;; *) p=${p%/*}/$t ;; esac
    hops=$((hops+1))
  done
  rd=${p%/*}; rb=${p##*/}
  [ -n "$rd" ] || rd=/
  rd=$(cd -P -- "$rd" 2>/dev/null && pwd -P) || { case $p in /*) printf '%s' "$p"; return 0 ;; esac; return 1; }
  case $rd in /) printf '/%s' "$rb" ;; *) printf '%s/%s' "$rd" "$rb" ;; esac
}
cd -- "$1" 2>/dev/null || cd /
shift
for n in "$@"; do
  case "$n" in
    */*)
      case "$n" in /*) p=$n ;; *) p=$PWD/$n ;; esac
      if [ -e "$p" ] || [ -h "$p" ]; then r=$(moat_real "$p") && printf '%s\t\t%s\n' "$n" "$r"; fi ;;
    *)
      old_ifs=$IFS; IFS=:
      for d in $PATH; do
        if [ -n "$d" ] && [ -f "$d/$n" ] && [ -x "$d/$n" ]; then
          r=$(moat_real "$d/$n") || r=
          printf '%s\t%s\t%s\n' "$n" "$d/$n" "$r"; break
        fi
      done
      IFS=$old_ifs ;;
  esac
done"#;

/// The resolve script with the run's PATH prelude in place.
fn resolve_script() -> String {
    RESOLVE_SCRIPT.replacen("@PRELUDE@", crate::wrapper::PRELUDE, 1)
}

/// Reads the resolve script's output: only words that were asked about, only absolute paths.
fn read_resolutions(out: &str, asked: &[String]) -> MapResolver {
    let mut resolver = MapResolver::new();
    for line in out.lines() {
        let mut fields = line.split('\t');
        let (Some(word), Some(path), Some(real)) = (fields.next(), fields.next(), fields.next())
        else {
            continue;
        };
        if !asked.iter().any(|a| a == word) {
            continue;
        }
        if path.starts_with('/') && !word.contains('/') {
            resolver = resolver.with(word.to_string(), path.to_string());
        }
        if real.starts_with('/') {
            resolver = resolver.with_real(word.to_string(), real.to_string());
        }
    }
    resolver
}

/// A run, ready for the policy.
#[derive(Clone)]
pub(super) struct Prepared {
    pub session: String,
    pub target: Target,
    /// Where it runs: the session's container, or the host.
    pub place: Place,
    pub run_dir: PathBuf,
    pub cwd: String,
    /// The variables the request itself sets, which the policy judges in allowlist mode.
    pub request_env: BTreeMap<String, String>,
    /// `KEY=VALUE`, final.
    pub env: Vec<String>,
    pub secrets: Vec<(String, String)>,
    pub policy: Policy,
    pub resolver: MapResolver,
    /// Exact commands an operator allowed for good (`=command:<sha256>` entries, each scoped
    /// to one session and working directory by its hash).
    pub exact: Vec<String>,
    /// On the host under a policy (not `host-full`): where a sandbox can write. A run that
    /// touches one always asks (docs/security.md, "Host commands").
    pub writable: Option<host::WritableRoots>,
    pub warnings: Vec<String>,
    pub owner: (u32, u32),
    /// The login shell the run uses (`sandbox.shell` or `elevated.shell`), checked present.
    pub shell: Shell,
    /// Keep stderr apart from the log (`moat run`); set by the caller after preparing.
    pub split_stderr: bool,
    /// Record where the command ends (a sticky session); set by the caller after preparing.
    pub sticky: bool,
    /// The container user instead of the sandbox's ([`ExecRequest::user`]).
    pub user: Option<String>,
}

impl Prepared {
    /// `sandbox`, `host` or `host-full`: what an approval is bound to.
    pub fn approval_target(&self) -> ApprovalTarget {
        self.target.into()
    }

    pub fn on_host(&self) -> bool {
        matches!(self.target, Target::Host { .. })
    }

    /// Refuses `command` when it, with the PATH prelude, or an env string of this run would
    /// not fit in one exec (docs/security.md, "Bounds on what one exec carries"). `rebuilt`
    /// says the policy rewrote the command, so the message names that form.
    pub fn check_exec_size(
        &self,
        command: &str,
        rebuilt: bool,
    ) -> Result<(), crate::contract::ArgLimitError> {
        let what = if rebuilt {
            "the policy's rebuilt plan, with the PATH prelude"
        } else {
            "the command, with the PATH prelude"
        };
        crate::contract::check_exec(&crate::wrapper::login_script(command), &self.env, what)
    }

    /// Why this run must ask every time: it runs in, or names, a directory a sandbox can
    /// write. Checked on the plan that would run.
    pub fn writable_reason(&self, eval: &Evaluation, command: &str) -> Option<String> {
        let plan = eval.plan.as_ref().map_or(command, |p| p.command.as_str());
        self.writable
            .as_ref()
            .and_then(|w| w.reason(std::path::Path::new(&self.cwd), plan))
    }

    /// The policy's inputs for this run, as `policy::judge` takes them.
    fn request<'a>(&'a self, parsed: &'a Parsed) -> PolicyRequest<'a> {
        PolicyRequest {
            command: parsed.command(),
            cwd: &self.cwd,
            env: &self.request_env,
        }
    }

    /// What the stored entries say about this exact command (an `=command:<sha256>` entry,
    /// scoped to this session and working directory). Such an entry names the text, not the
    /// content of the files the text runs: a sandbox plan that runs a file the sandbox can
    /// write is not allowed by one (docs/approvals.md, "Files a plan runs").
    fn standing(&self, parsed: &Parsed) -> Standing {
        let entry = crate::approvals::command_entry(&self.session, &self.cwd, parsed.command());
        Standing {
            exact_allowed: self.exact.contains(&entry) && !self.runs_sandbox_files(parsed),
        }
    }

    /// The verdict (`policy::judge`), then a host run that touches a directory a sandbox can
    /// write asks however it was allowed (docs/security.md, "Host commands").
    pub fn evaluate(&self, parsed: &Parsed) -> Evaluation {
        let eval = judge(
            parsed,
            &self.request(parsed),
            &self.policy,
            &self.resolver,
            self.standing(parsed),
        );
        let why = match eval.decision {
            Decision::Allow | Decision::Ask { .. } => self.writable_reason(&eval, parsed.command()),
            Decision::Deny { .. } => None,
        };
        must_ask(eval, why, self.policy.ask)
    }

    /// Whether the allowlist alone runs it when nobody is asked (`ask_fallback = allowlist`);
    /// `eval` is this run's evaluation, whose plan says whether it must ask anyway.
    pub fn covered(&self, parsed: &Parsed, eval: &Evaluation) -> bool {
        covered(
            parsed,
            &self.request(parsed),
            &self.policy,
            &self.resolver,
            self.standing(parsed),
            self.writable_reason(eval, parsed.command()).is_some(),
        )
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
        self.prepare_with(session, req, target, parsed, &|_| {})
            .await
    }

    /// [`prepare`](Self::prepare), with `tweak` applied to the composed policy before names
    /// are resolved: `policy explain` sets the allowlist it was asked about there, so it
    /// resolves and judges exactly as an exec under that policy would.
    pub(super) async fn prepare_with(
        &self,
        session: &str,
        req: &ExecRequest,
        target: Target,
        parsed: &Parsed,
        tweak: &(dyn Fn(&mut Policy) + Sync),
    ) -> Result<Prepared, ExecError> {
        match target {
            Target::Sandbox => self.prepare_sandbox(session, req, parsed, tweak).await,
            Target::Host { full } => self.prepare_host(session, req, full, parsed, tweak).await,
        }
    }

    async fn prepare_sandbox(
        &self,
        session: &str,
        req: &ExecRequest,
        parsed: &Parsed,
        tweak: &(dyn Fn(&mut Policy) + Sync),
    ) -> Result<Prepared, ExecError> {
        let container = self.sessions.ensure(session).await?;
        let cwd = match &req.start_in {
            Some(dir) => dir.clone(),
            None => map_workdir(req.workdir.as_deref(), &container.workspace)?,
        };
        let sandbox = &self.config.sandbox;
        let secrets = self.secrets.for_sandbox(session)?;
        let mut base = sandbox.env.clone();
        base.extend(req.edge_env.clone());
        base.extend(secrets.iter().cloned());
        // A request's PATH entries go after the login profile, through the prelude
        // (docs/mcp.md, "env.PATH"). Under an allowlist the policy refuses PATH itself.
        let request_path = crate::contract::request_path(&req.env)?.unwrap_or_default();
        let mut env = merge_env(&base, &req.env, &sandbox.path_prepend, &request_path);
        let shell = req.shell.unwrap_or(sandbox.shell);
        if shell != Shell::Sh {
            self.check_sandbox_shell(&container.name, &container.id, shell)
                .await?;
        }
        // The operator's per-session override, then the request (docs/policy.md, "Settings").
        let session_override = self.sessions.store().session_policy(session).ok().flatten();
        let mut policy = compose(
            &self.config.policy.sandbox,
            Layers {
                on_host: false,
                host_full: false,
                session: session_override.as_ref().map(SessionPolicy::layer),
                request: request_levels(req),
            },
        );
        tweak(&mut policy);
        // Skills and run-time allowlist entries only matter to an allowlist; in the other
        // modes the exec hot path skips their store reads.
        let allowlist = reads_entries(&policy);
        if allowlist {
            // An allowlisted `git log` on a PTY must not start a pager that runs `!sh`.
            crate::contract::with_pagers_neutered(&mut env);
        }
        let patterns = !policy.deny_patterns.is_empty() || !policy.ask_patterns.is_empty();
        let skills = if allowlist { self.skills() } else { Vec::new() };
        let mut resolver = MapResolver::new();
        // Under an allowlist every command word is resolved; in full mode only when patterns
        // must see through names and symlinks (docs/policy.md, "Symlinks"), or when every
        // command asks: the approval binds the programs found outside the trusted directories
        // by content (docs/approvals.md, "Files a plan runs").
        let asks = policy.ask == Ask::Always && policy.security != Security::Deny;
        if allowlist || (patterns && policy.security == Security::Full) || asks {
            let mut names = if allowlist || asks {
                parsed.command_names()
            } else {
                Vec::new()
            };
            let sources = if allowlist {
                source_words(parsed)
            } else {
                Vec::new()
            };
            for word in pattern_words(parsed).into_iter().chain(sources) {
                if !names.contains(&word) {
                    names.push(word);
                }
            }
            names.extend(crate::skills::names(&skills));
            if !names.is_empty() {
                let mut argv = vec![
                    "sh".to_string(),
                    "-lc".to_string(),
                    resolve_script(),
                    "moat-resolve".to_string(),
                    sandbox.path_prepend.join(":"),
                    request_path.join(":"),
                    cwd.clone(),
                ];
                argv.extend(names.iter().cloned());
                let (_, out) = self
                    .sessions
                    .commands()
                    .exec_capture(&container.name, argv, None)
                    .await
                    .map_err(|e| ExecError::Process(e.into()))?;
                resolver = read_resolutions(&String::from_utf8_lossy(&out), &names);
            }
        }
        let mut p = Prepared {
            session: session.to_string(),
            target: Target::Sandbox,
            place: Place::Container(container.name.clone()),
            run_dir: container.run_dir.clone(),
            cwd,
            request_env: req.env.clone(),
            env,
            secrets,
            policy,
            resolver,
            exact: Vec::new(),
            writable: None,
            warnings: container
                .warning
                .into_iter()
                .chain(self.sessions.over_disk(&container.name))
                .collect(),
            owner: container.owner,
            shell,
            split_stderr: false,
            sticky: false,
            user: req.user.clone(),
        };
        self.add_runtime_entries(&mut p, &skills);
        Ok(p)
    }

    async fn prepare_host(
        &self,
        session: &str,
        req: &ExecRequest,
        full: bool,
        parsed: &Parsed,
        tweak: &(dyn Fn(&mut Policy) + Sync),
    ) -> Result<Prepared, ExecError> {
        crate::session::validate_key(session)
            .map_err(|e| ExecError::Session(crate::session::SessionError::from(e)))?;
        let elevated = &self.config.elevated;
        host::check_request(&req.env, &elevated.env_allow)?;
        let base_dir = self.host_workdir_base()?;
        let cwd = host_workdir(req.workdir.as_deref(), &base_dir)?;
        check_host_workdir(&cwd, &base_dir, &elevated.allowed_workdirs)?;
        let login = host::login_path().await.unwrap_or_default();
        let own = std::env::var("PATH").unwrap_or_else(|_| "/usr/bin:/bin".into());
        let path = host::merge_path(&host::split_path(&login), &host::split_path(&own));
        let prepend = host::merge_path(&elevated.path_prepend, &path);
        let mut base = host::inherited(std::env::vars(), &elevated.env_allow);
        for var in self.secrets.source_vars() {
            base.remove(&var);
        }
        base.insert("PATH".into(), path.join(":"));
        let secrets = self.secrets.for_target(session, true);
        base.extend(secrets.iter().cloned());
        let mut env = merge_env(&base, &req.env, &prepend, &[]);
        crate::contract::with_pagers_neutered(&mut env);
        if elevated.shell != Shell::Sh && host_program(elevated.shell.name(), &path).is_none() {
            return Err(ExecError::NoShell {
                key: "elevated.shell",
                shell: elevated.shell.name(),
                place: "this host".into(),
            });
        }
        let mut policy = compose(
            &self.config.policy.host,
            Layers {
                on_host: true,
                host_full: full,
                session: None,
                request: request_levels(req),
            },
        );
        tweak(&mut policy);
        let skills = if reads_entries(&policy) {
            self.skills()
        } else {
            Vec::new()
        };
        let mut wanted = parsed.command_names();
        wanted.extend(crate::skills::names(&skills));
        for word in pattern_words(parsed)
            .into_iter()
            .chain(source_words(parsed))
        {
            if !wanted.contains(&word) {
                wanted.push(word);
            }
        }
        let resolver = with_real_paths(host::resolve_names(&wanted, &prepend), &wanted, &cwd);
        let run_dir = self.home.host_run_dir();
        crate::home::ensure_private_dir(&run_dir).map_err(|source| ExecError::HostRunDir {
            dir: run_dir.display().to_string(),
            source,
        })?;
        let mut p = Prepared {
            session: session.to_string(),
            target: Target::Host { full },
            place: Place::Host,
            run_dir,
            cwd,
            request_env: req.env.clone(),
            env,
            secrets,
            policy,
            resolver,
            exact: Vec::new(),
            // Asked afresh for every host run (one engine list; docs/security.md,
            // "Directories a sandbox can write"); `host-full` has no approvals to ask.
            writable: if full {
                None
            } else {
                Some(self.sessions.writable_roots().await)
            },
            warnings: Vec::new(),
            owner: (
                nix::unistd::getuid().as_raw(),
                nix::unistd::getgid().as_raw(),
            ),
            shell: elevated.shell,
            split_stderr: false,
            sticky: false,
            user: None,
        };
        self.add_runtime_entries(&mut p, &skills);
        Ok(p)
    }

    /// Fails unless the container has `shell` on the PATH its login shell sets up. Checked
    /// once per container and moat process: a found shell stays found, as the image's root is
    /// read-only.
    ///
    /// Keyed by the container's id: a container recreated under the same name (another image)
    /// is checked again.
    async fn check_sandbox_shell(
        &self,
        container: &str,
        id: &str,
        shell: Shell,
    ) -> Result<(), ExecError> {
        let key = format!("{id}\t{}", shell.name());
        if self.shells_seen.lock().unwrap().contains(&key) {
            return Ok(());
        }
        let argv = vec![
            "sh".to_string(),
            "-lc".to_string(),
            r#"command -v "$1" >/dev/null 2>&1"#.to_string(),
            "moat-shell".to_string(),
            shell.name().to_string(),
        ];
        let (code, _) = self
            .sessions
            .commands()
            .exec_capture(container, argv, None)
            .await
            .map_err(|e| ExecError::Process(e.into()))?;
        if code != 0 {
            return Err(ExecError::NoShell {
                key: "sandbox.shell",
                shell: shell.name(),
                place: format!("the image {}", self.config.sandbox.image),
            });
        }
        self.shells_seen.lock().unwrap().insert(key);
        Ok(())
    }

    /// `elevated.workdir`, or `$MOAT_HOME/host-work` created private (docs/approvals.md).
    fn host_workdir_base(&self) -> Result<PathBuf, ExecError> {
        let configured = &self.config.elevated.workdir;
        if !configured.is_empty() {
            return Ok(PathBuf::from(configured));
        }
        let dir = self.home.host_work_dir();
        crate::home::ensure_private_dir(&dir).map_err(|e| ExecError::HostWorkdir {
            dir: dir.display().to_string(),
            reason: e.to_string(),
        })?;
        Ok(dir)
    }

    fn skills(&self) -> Vec<crate::skills::SkillState> {
        if !self.config.policy.auto_allow_skills {
            return Vec::new();
        }
        crate::skills::states(&self.config, self.sessions.store()).unwrap_or_default()
    }

    /// Adds enabled skills' binaries and the operator's run-time allowlist entries; they
    /// count only under an allowlist (`policy::with_entries`), so otherwise the store is not
    /// read at all.
    fn add_runtime_entries(&self, p: &mut Prepared, skills: &[crate::skills::SkillState]) {
        if !reads_entries(&p.policy) {
            return;
        }
        let mut labeled = crate::skills::entries(skills, &p.resolver);
        let target = p.target.machine();
        for e in self.approvals.allowlist(Some(target)).unwrap_or_default() {
            if e.command.is_some() {
                // Entries from before exact commands were scoped have no session: nothing.
                if e.session.is_some() {
                    p.exact.push(e.entry);
                }
            } else {
                let rule = format!("allowlist: {} ({} by {})", e.entry, e.source, e.added_by);
                labeled.push((e.entry, rule));
            }
        }
        p.policy = with_entries(std::mem::take(&mut p.policy), labeled);
    }
}

/// The first executable `name` in `dirs`.
fn host_program(name: &str, dirs: &[String]) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    dirs.iter()
        .map(|d| std::path::Path::new(d).join(name))
        .find(|p| {
            std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

/// Adds each word's symlink target on the host: a bare name through its PATH hit, a path
/// relative to `cwd`.
fn with_real_paths(mut resolver: MapResolver, words: &[String], cwd: &str) -> MapResolver {
    use crate::policy::Resolver;
    for word in words {
        let path = if word.contains('/') {
            Some(std::path::Path::new(cwd).join(word))
        } else {
            resolver.resolve(word).map(PathBuf::from)
        };
        if let Some(real) = path.and_then(|p| real_path(&p)) {
            resolver = resolver.with_real(word.clone(), real);
        }
    }
    resolver
}

/// Where `path` finally leads through symbolic links: the canonical path, or, when that cannot
/// be had (`/dev/stdin` ends in a pipe that is no file), the last path the links named.
pub fn real_path(path: &std::path::Path) -> Option<String> {
    if let Ok(real) = std::fs::canonicalize(path) {
        return Some(real.display().to_string());
    }
    let mut current = path.to_path_buf();
    let mut followed = false;
    for _ in 0..40 {
        let Ok(target) = std::fs::read_link(&current) else {
            break;
        };
        followed = true;
        current = match current.parent() {
            Some(dir) if target.is_relative() => dir.join(target),
            _ => target,
        };
    }
    followed.then(|| current.display().to_string())
}

/// The levels a request asked for (it can only tighten; `policy::compose`).
fn request_levels(req: &ExecRequest) -> RequestLevels<'_> {
    RequestLevels {
        security: req.security.as_deref(),
        ask: req.ask.as_deref(),
    }
}

/// Refuses a host working directory outside the host workdir `base` (`elevated.workdir`,
/// default `$MOAT_HOME/host-work`) and the operator's `elevated.allowed_workdirs`, in every
/// mode: otherwise an agent picks the directory the operator's tools run in, a checkout it
/// wrote a Makefile into (docs/security.md, "Host commands"). `cwd` is resolved; so is each
/// root, when it exists, so a link on either side changes nothing.
fn check_host_workdir(
    cwd: &str,
    base: &std::path::Path,
    allowed: &[String],
) -> Result<(), ExecError> {
    let cwd_path = std::path::Path::new(cwd);
    let roots = std::iter::once(base.to_path_buf()).chain(allowed.iter().map(PathBuf::from));
    let inside = roots
        .map(|r| std::fs::canonicalize(&r).unwrap_or(r))
        .any(|r| cwd_path.starts_with(r));
    if inside {
        return Ok(());
    }
    Err(ExecError::HostWorkdirRefused {
        dir: crate::output::escape_display(cwd),
        base: crate::output::escape_display(&base.display().to_string()),
    })
}

/// A host working directory: absolute, or relative to the host workdir `base`; it must exist
/// and be a directory (no silent fallback).
fn host_workdir(workdir: Option<&str>, base: &std::path::Path) -> Result<String, ExecError> {
    let wanted = match workdir.map(str::trim).filter(|w| !w.is_empty()) {
        None => base.to_path_buf(),
        Some(w) if w.starts_with('/') => PathBuf::from(w),
        Some(w) => base.join(w),
    };
    let real = std::fs::canonicalize(&wanted).map_err(|e| ExecError::HostWorkdir {
        dir: crate::output::escape_display(&wanted.display().to_string()),
        reason: e.to_string(),
    })?;
    if !real.is_dir() {
        return Err(ExecError::HostWorkdir {
            dir: crate::output::escape_display(&wanted.display().to_string()),
            reason: "not a directory".into(),
        });
    }
    Ok(real.display().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::Resolver;

    /// Runs the resolve script with `sh` (not a login shell) and the given PATH.
    fn resolve(path: &str, cwd: &std::path::Path, words: &[&str]) -> MapResolver {
        let out = std::process::Command::new("/bin/sh")
            .arg("-c")
            .arg(resolve_script())
            .arg("moat-resolve")
            .arg("")
            .arg("")
            .arg(cwd)
            .args(words)
            .env_clear()
            .env("PATH", path)
            .output()
            .unwrap();
        let asked: Vec<String> = words.iter().map(|w| (*w).to_string()).collect();
        read_resolutions(&String::from_utf8_lossy(&out.stdout), &asked)
    }

    #[test]
    fn resolve_script_follows_links_with_and_without_readlink() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let bin = root.join("bin");
        let work = root.join("work");
        std::fs::create_dir_all(&bin).unwrap();
        std::fs::create_dir_all(work.join("sub")).unwrap();
        // work/s → sub/t → /bin/sh (relative, then absolute hop).
        std::os::unix::fs::symlink("/bin/sh", work.join("sub/t")).unwrap();
        std::os::unix::fs::symlink("sub/t", work.join("s")).unwrap();
        std::os::unix::fs::symlink("/nonexistent/sudo", work.join("dangling")).unwrap();
        let sh_real = real_path(std::path::Path::new("/bin/sh")).unwrap();
        // Only `ls` on PATH: no readlink, so the script follows the links by hand.
        let ls = std::process::Command::new("sh")
            .args(["-c", "command -v ls"])
            .output()
            .unwrap();
        let ls = String::from_utf8_lossy(&ls.stdout).trim().to_string();
        std::os::unix::fs::symlink(&ls, bin.join("ls")).unwrap();
        std::os::unix::fs::symlink(work.join("s"), bin.join("mytool")).unwrap();
        let system = format!("{}:/usr/bin:/bin", bin.display());
        for path in [bin.display().to_string(), system] {
            let r = resolve(&path, &work, &["./s", "mytool", "./dangling", "./missing"]);
            assert_eq!(r.real("./s").as_deref(), Some(sh_real.as_str()), "{path}");
            assert_eq!(
                r.resolve("mytool").as_deref(),
                Some(bin.join("mytool").to_str().unwrap()),
                "{path}"
            );
            assert_eq!(
                r.real("mytool").as_deref(),
                Some(sh_real.as_str()),
                "{path}"
            );
            assert_eq!(
                r.real("./dangling").as_deref(),
                Some("/nonexistent/sudo"),
                "{path}"
            );
            assert_eq!(r.real("./missing"), None, "{path}");
        }
    }

    #[test]
    fn a_host_workdir_must_lie_in_the_host_workdir_or_a_listed_one() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let (base, listed, other) = (root.join("host-work"), root.join("build"), root.join("ws"));
        for d in [&base, &listed, &other] {
            std::fs::create_dir_all(d.join("sub")).unwrap();
        }
        // A link in the host workdir leading out resolves out.
        std::os::unix::fs::symlink(&other, base.join("to-ws")).unwrap();
        let allowed = vec![listed.display().to_string()];
        let rows: Vec<(Option<String>, bool)> = vec![
            (None, true),
            (Some("sub".into()), true),
            (Some(listed.join("sub").display().to_string()), true),
            (Some(other.display().to_string()), false),
            (Some("to-ws".into()), false),
            (Some("../ws".into()), false),
            (Some("/".into()), false),
        ];
        for (workdir, ok) in rows {
            let cwd = host_workdir(workdir.as_deref(), &base).unwrap();
            let got = check_host_workdir(&cwd, &base, &allowed);
            assert_eq!(got.is_ok(), ok, "{workdir:?}: {got:?}");
            if let Err(e) = got {
                let text = e.to_string();
                assert!(
                    text.contains(&cwd) && text.contains("elevated.allowed_workdirs"),
                    "{text}"
                );
                assert_eq!(e.kind(), crate::contract::FailureKind::Refused);
            }
        }
    }

    #[test]
    fn resolutions_are_only_what_was_asked() {
        let out = "ls\t/usr/bin/ls\t/usr/bin/ls\nevil\t/x\t/y\nls2\trelative\tnot/abs\n";
        let r = read_resolutions(out, &["ls".into(), "ls2".into()]);
        assert_eq!(r.resolve("ls").as_deref(), Some("/usr/bin/ls"));
        assert_eq!(r.resolve("evil"), None);
        assert_eq!(r.resolve("ls2"), None);
        assert_eq!(r.real("ls2"), None);
    }
}
