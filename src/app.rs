//! Assembles a moat instance: config, state, engine, sessions, processes, tools.

use std::sync::Arc;

use crate::approvals::Approvals;
use crate::config::{self, Config, ConfigError, ConfigSource};
use crate::home::Home;
use crate::host::HostExecutor;
use crate::process::{EventBus, Executors, Limits, Registry};
use crate::runtime::docker::DockerRuntime;
use crate::runtime::{Engine, Executor, Runtime, RuntimeError};
use crate::secrets::Secrets;
use crate::session::Sessions;
use crate::store::{Store, StoreError};
use crate::tools::{ExecTool, ProcessTool};

#[derive(Debug, thiserror::Error)]
pub enum AppError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    #[error(transparent)]
    Secrets(#[from] crate::secrets::SecretsError),
    #[error(transparent)]
    HostUser(#[from] crate::host::RunAsError),
    #[error("find moat's own executable for elevated.user")]
    OwnExe(#[source] std::io::Error),
    #[error("create {path}")]
    Home {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

/// Everything one moat process needs, wired once.
pub struct App {
    pub home: Home,
    pub config: Arc<Config>,
    pub source: ConfigSource,
    pub store: Arc<Store>,
    /// The container engine: containers, images, networks (and its own exec, for what must
    /// not go through the helper: `moat doctor`'s comparison, `moat cp`, `moat shell`).
    pub engine: Arc<dyn Runtime>,
    /// What runs commands in session containers, as `sandbox.transport` says
    /// (docs/helper.md).
    pub commands: Arc<dyn Executor>,
    pub sessions: Arc<Sessions>,
    pub registry: Arc<Registry>,
    pub approvals: Arc<Approvals>,
    pub secrets: Arc<Secrets>,
    pub exec: ExecTool,
    /// The `process` tool, built once here so every edge (HTTP, MCP, `moat bench`) calls the
    /// same one.
    pub process: ProcessTool,
    /// The file tools (`read_file`, `write_file`, `list_dir`, `apply_patch`).
    pub files: crate::tools::FilesTool,
}

impl App {
    /// Loads config from `home`, opens the state database and connects to the engine.
    pub async fn open(home: Home) -> Result<Self, AppError> {
        Self::open_with(home, None).await
    }

    /// [`App::open`] with `sandbox.transport` set to `transport` when given (`moat bench`
    /// measures both side by side).
    pub async fn open_with(
        home: Home,
        transport: Option<crate::config::Transport>,
    ) -> Result<Self, AppError> {
        let (mut config, source) = config::load(&home.config_file())?;
        if let Some(t) = transport {
            config.sandbox.transport = t;
        }
        home.ensure_root().map_err(|source| AppError::Home {
            path: home.root().display().to_string(),
            source,
        })?;
        let engine: Arc<dyn Runtime> = Arc::new(DockerRuntime::connect().await?);
        Self::with_engine(home, config, source, engine)
    }

    /// Wires everything over `engine`; the executors are built here and handed to the
    /// registry (docs/ARCHITECTURE.md, "Seams").
    pub fn with_engine(
        home: Home,
        config: Config,
        source: ConfigSource,
        engine: Arc<dyn Runtime>,
    ) -> Result<Self, AppError> {
        let commands = with_transport(engine.clone(), &home, &config);
        let config = Arc::new(config);
        let store = Arc::new(Store::open(&home.state_db())?);
        let lifecycle: Arc<dyn Engine> = engine.clone();
        let secrets = Arc::new(Secrets::load(&config)?);
        let approvals = Arc::new(
            Approvals::new(store.clone(), secrets.all())
                .with_max_pending(config.approvals.max_pending_per_session),
        );
        // Network approvals are filed with the same service as every other kind.
        let egress_gates = crate::egress::gate::Gates::new(approvals.clone(), &config.approvals);
        let sessions = Arc::new(Sessions::new(
            lifecycle.clone(),
            commands.clone(),
            store.clone(),
            config.clone(),
            home.clone(),
            egress_gates,
        ));
        let limits = Limits {
            max_output_chars: crate::output::clamp_max_chars(Some(config.exec.max_output_chars)),
            spill_max: config.exec.spill_max(),
            ttl_ms: config.process.ttl_secs as i64 * 1000,
            max_finished: config.process.max_finished,
        };
        let host = Arc::new(HostExecutor::new());
        if let Some(user) = crate::host::RunAs::resolve(&config.elevated.user)? {
            // Host commands start through this very binary, which drops to the user.
            let exe = std::env::current_exe().map_err(AppError::OwnExe)?;
            host.set_run_as(user.helper_argv(&exe.display().to_string()));
        }
        let executors = Executors {
            sandbox: commands.clone(),
            host,
            engine: lifecycle,
        };
        let registry = Registry::new(
            executors,
            store.clone(),
            limits,
            EventBus::default(),
            config.sandbox.uid_gid(),
        );
        registry.set_secret_source(secrets.source());
        registry.set_scope(config.sandbox.scope);
        crate::disk_guard::spawn(
            &sessions,
            &registry,
            &engine,
            config.sandbox.workspace_max(),
        );
        // Both tools forward `host: "node"` calls through the one table of pairings.
        let nodes = Arc::new(crate::node::Nodes::new(store.clone(), &config.exec.node));
        let exec = ExecTool {
            sessions: sessions.clone(),
            registry: registry.clone(),
            config: config.clone(),
            approvals: approvals.clone(),
            secrets: secrets.clone(),
            home: home.clone(),
            shells_seen: Default::default(),
            nodes: nodes.clone(),
            relays: crate::node::Relays::new(nodes.clone(), registry.events().clone()),
        };
        let process = ProcessTool {
            registry: registry.clone(),
            nodes,
        };
        let files = crate::tools::FilesTool {
            sessions: sessions.clone(),
            config: config.clone(),
            secrets: secrets.clone(),
        };
        Ok(Self {
            home,
            config,
            source,
            store,
            engine,
            commands,
            sessions,
            registry,
            approvals,
            secrets,
            exec,
            process,
            files,
        })
    }
}

/// What runs commands in session containers, as `sandbox.transport` says: the in-container
/// helper (falling back to the engine's exec), or the engine's exec alone (docs/helper.md).
pub fn with_transport(engine: Arc<dyn Runtime>, home: &Home, config: &Config) -> Arc<dyn Executor> {
    match config.sandbox.transport {
        crate::config::Transport::Helper => Arc::new(crate::runtime::helper::HelperExecutor::new(
            engine,
            home.clone(),
            config.sandbox.uid_gid(),
        )),
        crate::config::Transport::Exec => engine,
    }
}

#[cfg(test)]
impl App {
    /// An app over a fresh home in `dir` with the default configuration and the fake engine,
    /// for unit tests of the layers above it.
    pub fn on_fake_engine(dir: &std::path::Path) -> Self {
        let home = Home::at(dir);
        home.ensure_root().unwrap();
        let source = ConfigSource {
            file: None,
            overrides: vec![],
        };
        let engine = Arc::new(crate::runtime::fake::FakeRuntime::new());
        Self::with_engine(home, Config::default(), source, engine).unwrap()
    }
}

/// What [`App::remove_session`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Removed {
    /// The session's container existed.
    pub existed: bool,
    /// Pending approvals (and egress grants) that ended with it.
    pub ended_approvals: usize,
    /// Background processes it stopped.
    pub ended_processes: usize,
}

impl App {
    /// Removes a session for good, whoever asks (`DELETE /v1/sessions/…`, E2B's kill): a
    /// removed session stays removed (docs/approvals.md, "Removing a session"), so its
    /// approvals and egress grants end first — no waiter runs a plan (or re-creates the
    /// container) at a decision or expiry — then its background processes, host ones
    /// included (the container's go with the container), then the container. With `purge`,
    /// the directories moat made for it go too, and its process records with them: they hold
    /// their logs open, and an open log keeps the session's run filesystem alive (and its data
    /// readable) after it was unmounted (docs/security.md, "Disk bound").
    pub async fn remove_session(
        &self,
        session: &str,
        purge: bool,
        by: &str,
    ) -> Result<Removed, String> {
        let ended = self
            .approvals
            .end_session(session, by)
            .map_err(|e| format!("end the session's approvals: {e}"))?;
        let mut stopped = 0;
        for p in self.registry.list(session) {
            if p.info.session == session && p.exit().is_none() {
                self.registry.cancel(&p, "moat: the session was removed");
                stopped += 1;
            }
        }
        let existed = self
            .sessions
            .remove_with(session, purge)
            .await
            .map_err(|e| crate::error_chain::error_chain(&e))?;
        if purge {
            // One deadline for all of them, however many there are.
            let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(5);
            for p in self.registry.list(session) {
                if p.info.session != session {
                    continue;
                }
                let left = deadline.saturating_duration_since(tokio::time::Instant::now());
                p.wait_exit(left).await;
                self.registry.forget(&p);
            }
        }
        Ok(Removed {
            existed,
            ended_approvals: ended.len(),
            ended_processes: stopped,
        })
    }
}
