//! Shared set-up for tests against the real Docker engine.
//!
//! Each test gets its own `MOAT_HOME` and unique session keys, and removes its containers on
//! drop. Without an engine the tests skip with a message — except under `CI=true`, where a
//! missing engine or image is a failure, never a silent skip.

#![allow(dead_code)]

pub mod cli_home;
pub mod host;
pub mod node;
pub mod serve;

use std::sync::Arc;

use moat::app::App;
use moat::config::{Config, ConfigSource};
use moat::contract::{Status, ToolResult};
use moat::home::Home;
use moat::runtime::docker::DockerRuntime;
use moat::runtime::{Engine, Runtime};
use moat::tools::ExecRequest;
use moat::tools::ProcessRequest;

pub struct TestMoat {
    pub app: App,
    pub dir: tempfile::TempDir,
    prefix: String,
}

impl Drop for TestMoat {
    fn drop(&mut self) {
        clean_up(&self.prefix, self.dir.path());
    }
}

/// What a test's moat home leaves when the test ends: every container the test created (by
/// name prefix, synchronously), and the mounts of its sessions' disks (docs/security.md,
/// "Disk bound"), so the home's directory can go.
pub fn clean_up(prefix: &str, home: &std::path::Path) {
    let _ = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!(
            "docker ps -aq --filter name=moat-{prefix}- | xargs -r docker rm -f >/dev/null 2>&1"
        ))
        .status();
    // And any other container that mounts from this home (a session named without the
    // prefix, such as the default `main`).
    let _ = std::process::Command::new("sh")
        .arg("-c")
        .arg(
            "docker ps -aq --filter label=dev.moat.session | xargs -r docker inspect -f '{{.Id}} {{range .Mounts}}{{.Source}} {{end}}' 2>/dev/null | grep -F \"$1/\" | cut -d' ' -f1 | xargs -r docker rm -f >/dev/null 2>&1",
        )
        .arg("sh")
        .arg(home)
        .status();
    moat::session::disk_image::release_all_under(home);
}

/// Connects to the engine, or returns `None` (skip) when there is none and CI is not set.
pub async fn engine() -> Option<Arc<dyn Runtime>> {
    let ci = std::env::var("CI").is_ok_and(|v| v == "true");
    match DockerRuntime::connect().await {
        Ok(rt) => match rt.ping().await {
            Ok(_) => {
                let image = Config::default().sandbox.image;
                let has_image = rt.image_exists(&image).await.unwrap_or(false);
                if !has_image {
                    if ci {
                        panic!("image {image} is missing under CI=true: run scripts/setup first");
                    }
                    eprintln!("skipping: image {image} missing (run scripts/setup)");
                    return None;
                }
                Some(Arc::new(rt))
            }
            Err(e) if !ci => {
                eprintln!("skipping: no Docker engine ({e})");
                None
            }
            Err(e) => panic!("no Docker engine under CI=true: {e}"),
        },
        Err(e) if !ci => {
            eprintln!("skipping: no Docker engine ({e})");
            None
        }
        Err(e) => panic!("no Docker engine under CI=true: {e}"),
    }
}

/// A moat with its own home and `config`; `prefix` must be unique per test (it prefixes the
/// session keys, and so the container names).
pub async fn moat(prefix: &str, config: Config) -> Option<TestMoat> {
    // The Docker tests run once per transport (.ci/run): MOAT_TEST_TRANSPORT picks it.
    let mut config = config;
    if let Some(t) = test_transport() {
        config.sandbox.transport = t;
    }
    moat_as_configured(prefix, config).await
}

/// [`moat`] on `config`'s own transport, whatever MOAT_TEST_TRANSPORT says: for the tests of
/// one transport.
pub async fn moat_as_configured(prefix: &str, mut config: Config) -> Option<TestMoat> {
    let runtime = engine().await?;
    // `MOAT_TEST_RUNTIME=runsc` runs the same tests under gVisor (.ci/run does); a test that
    // names its own runtime keeps it.
    if let Ok(oci) = std::env::var("MOAT_TEST_RUNTIME") {
        if config.sandbox.runtime.is_empty() {
            config.sandbox.runtime = oci;
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let home = Home::at(dir.path());
    home.ensure_root().unwrap();
    let source = ConfigSource {
        file: None,
        overrides: vec![],
    };
    let app = App::with_engine(home, config, source, runtime).unwrap();
    Some(TestMoat {
        app,
        dir,
        prefix: prefix.replace('_', "-"),
    })
}

/// The transport MOAT_TEST_TRANSPORT names (`helper`, `exec`); unset keeps the default.
pub fn test_transport() -> Option<moat::config::Transport> {
    match std::env::var("MOAT_TEST_TRANSPORT").ok()?.as_str() {
        "helper" => Some(moat::config::Transport::Helper),
        "exec" => Some(moat::config::Transport::Exec),
        other => panic!("MOAT_TEST_TRANSPORT={other}: expected helper or exec"),
    }
}

impl TestMoat {
    pub fn key(&self, name: &str) -> String {
        format!("{}-{name}", self.prefix)
    }

    /// Another moat on the same home and engine with `config` (the daemon after a restart):
    /// it finds what this one left.
    pub fn another(&self, config: Config) -> App {
        App::with_engine(
            Home::at(self.dir.path()),
            config,
            ConfigSource {
                file: None,
                overrides: vec![],
            },
            self.app.engine.clone(),
        )
        .unwrap()
    }

    pub async fn exec(&self, session: &str, command: &str) -> ToolResult {
        self.exec_req(
            session,
            ExecRequest {
                command: command.into(),
                ..Default::default()
            },
        )
        .await
    }

    pub async fn exec_req(&self, session: &str, req: ExecRequest) -> ToolResult {
        self.app
            .exec
            .run(&self.key(session), &req, true)
            .await
            .unwrap_or_else(|e| panic!("exec {:?} failed: {e}", req.command))
    }

    /// Starts `command` in the background; returns its process id.
    pub async fn background(&self, session: &str, command: &str) -> String {
        let req = ExecRequest {
            command: command.into(),
            background: Some(true),
            ..Default::default()
        };
        let r = self.exec_req(session, req).await;
        assert_eq!(r.status(), Some(Status::Running), "{}", r.text());
        r.details.process_id().unwrap().to_string()
    }

    /// One `process` tool call in `session`.
    pub async fn process(&self, session: &str, req: &ProcessRequest) -> ToolResult {
        self.app.process.run(&self.key(session), req).await
    }

    pub fn container(&self, session: &str) -> String {
        self.app.sessions.names(&self.key(session)).1.name
    }

    /// `docker exec <container> sh -c <script>` output, for checks from outside moat.
    pub fn docker_exec(&self, session: &str, script: &str) -> String {
        let out = std::process::Command::new("docker")
            .args(["exec", &self.container(session), "sh", "-c", script])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    pub fn inspect(&self, session: &str) -> serde_json::Value {
        let out = std::process::Command::new("docker")
            .args(["inspect", &self.container(session)])
            .output()
            .unwrap();
        serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()[0].clone()
    }
}
