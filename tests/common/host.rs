//! A moat for host-executor tests: no engine needed (container calls go to a fake runtime),
//! elevated execution enabled for the local CLI user.

use std::sync::Arc;
use std::time::Duration;

use moat::app::App;
use moat::config::{Config, ConfigSource, ElevatedLevel};
use moat::contract::ToolResult;
use moat::home::Home;
use moat::runtime::fake::FakeRuntime;
use moat::tools::{Caller, ExecRequest};
use tokio::sync::broadcast;

pub struct HostMoat {
    pub app: App,
    pub dir: tempfile::TempDir,
}

/// Elevated on for the CLI user; `level` decides whether the host policy applies.
pub fn config(level: ElevatedLevel) -> Config {
    let mut c = Config::default();
    c.elevated.enabled = true;
    c.elevated.allow_from.insert("cli".into(), vec!["*".into()]);
    c.elevated.default_level = level;
    c
}

pub fn moat(config: Config) -> HostMoat {
    moat_in(tempfile::tempdir().unwrap(), config)
}

/// `config` with the test's scratch directory (`HostMoat::scratch`) among the operator's
/// host workdirs (`elevated.allowed_workdirs`): the tests run host commands there, as an
/// operator who lists a build directory would.
fn with_scratch(mut config: Config, home: &std::path::Path) -> Config {
    config
        .elevated
        .allowed_workdirs
        .push(home.join("scratch").display().to_string());
    config
}

/// A moat over an existing home (to simulate a restart).
pub fn moat_in(dir: tempfile::TempDir, config: Config) -> HostMoat {
    let config = with_scratch(config, dir.path());
    let home = Home::at(dir.path());
    home.ensure_root().unwrap();
    let source = ConfigSource {
        file: None,
        overrides: vec![],
    };
    let app = App::with_engine(home, config, source, Arc::new(FakeRuntime::new())).unwrap();
    HostMoat { app, dir }
}

/// A moat over an existing home directory that outlives it.
pub fn moat_at(path: &std::path::Path, config: Config) -> HostMoat {
    let config = with_scratch(config, path);
    let home = Home::at(path);
    let source = ConfigSource {
        file: None,
        overrides: vec![],
    };
    let app = App::with_engine(home, config, source, Arc::new(FakeRuntime::new())).unwrap();
    HostMoat {
        app,
        dir: tempfile::tempdir().unwrap(),
    }
}

pub fn req(command: &str) -> ExecRequest {
    ExecRequest {
        command: command.into(),
        elevated: Some(true),
        ..Default::default()
    }
}

impl HostMoat {
    pub async fn exec(&self, req: ExecRequest) -> ToolResult {
        self.app
            .exec
            .run_for(&Caller::cli(), "main", &req, true)
            .await
            .unwrap_or_else(|e| panic!("exec {:?} failed: {e}", req.command))
    }

    pub fn events(&self) -> broadcast::Receiver<moat::process::SessionEvent> {
        self.app.registry.events().subscribe()
    }

    /// A directory under the test's home for marker files.
    pub fn scratch(&self) -> std::path::PathBuf {
        let d = self.dir.path().join("scratch");
        std::fs::create_dir_all(&d).unwrap();
        d
    }
}

/// The next event of `session` whose text contains `needle`, within `secs`.
pub async fn event_with(
    rx: &mut broadcast::Receiver<moat::process::SessionEvent>,
    needle: &str,
    secs: u64,
) -> String {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
    loop {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        match tokio::time::timeout(left, rx.recv()).await {
            Ok(Ok(e)) if e.text.contains(needle) => return e.text,
            Ok(Ok(_)) => {}
            Ok(Err(e)) => panic!("event stream: {e}"),
            Err(_) => panic!("no event containing {needle:?} within {secs}s"),
        }
    }
}
