//! `moat bench`'s new sessions and CLI path, side by side in one run (docs/pool.md, "What it
//! saves"):
//!
//! - a new session's first command done, claiming from a full warm pool, starting a
//!   container, and `docker run --rm IMAGE true`, interleaved;
//! - claims per second: [`CLIENTS`] clients each starting new sessions from a full pool;
//! - the CLI path: `moat exec --session S -- true` through its daemon, a process per command
//!   as a user runs it, against `docker exec CONTAINER sh -lc true`, interleaved; between them
//!   the very call the CLI makes, sent from this process on the daemon's socket, which tells
//!   the daemon's share (and the container's) from the CLI process's.
//!
//! The pool and the CLI's daemon each get a home of their own below the bench's home
//! (`bench-pool-PID`, `bench-cli-PID`, removed at the end): a pool started in the operator's
//! home would adopt, claim or remove its daemon's warm containers (docs/pool.md, "Bounds and
//! ownership").

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::app::App;
use crate::bench::BenchError;
use crate::home::Home;
use crate::tools::ExecRequest;

/// Clients claiming at once for the claims-per-second figure.
pub const CLIENTS: usize = 8;

/// How long a pool may take to fill before the bench gives up: each container is a start.
const FILL_WAIT: Duration = Duration::from_secs(300);

/// New sessions with and without the pool.
#[derive(Debug, Serialize)]
pub struct NewSessions {
    /// Samples of each row.
    pub runs: usize,
    /// A new session's first command done, its container claimed from a full pool.
    pub pool_p50_ms: f64,
    pub pool_p90_ms: f64,
    /// The same without a pool: a container created and started, its helper started.
    pub cold_p50_ms: f64,
    pub cold_p90_ms: f64,
    /// `docker run --rm IMAGE true`.
    pub docker_run_p50_ms: f64,
    /// The pool's claims during the rows above: every one should hit.
    pub pool_hits: u64,
    pub pool_misses: u64,
    /// Pool p50 / `docker run` p50, and without the pool / `docker run` p50.
    pub pool_ratio: f64,
    pub cold_ratio: f64,
    /// Clients claiming at once, the new sessions they started (first command done) and the
    /// rate, from a pool holding one for each.
    pub clients: usize,
    pub claims: usize,
    pub claims_per_s: f64,
    pub claims_hits: u64,
    pub claims_all_ok: bool,
}

/// The CLI path through the daemon.
#[derive(Debug, Serialize)]
pub struct CliPath {
    pub runs: usize,
    /// `moat exec --session S -- true`: a process per command, through the daemon.
    pub moat_cli_p50_ms: f64,
    pub moat_cli_p90_ms: f64,
    /// The same call (`X-Moat-Wait: end`, read to its end) sent on the daemon's socket from
    /// the bench's own process: the CLI minus this is what its process costs.
    pub socket_call_p50_ms: f64,
    pub socket_call_p90_ms: f64,
    /// `docker exec CONTAINER sh -lc true`.
    pub docker_exec_p50_ms: f64,
    /// moat CLI p50 / `docker exec` CLI p50.
    pub ratio: f64,
}

impl NewSessions {
    pub fn render(&self) -> String {
        format!(
            "new session → first command done ({} runs each, interleaved)\n  moat, warm pool     p50 {:7.1} ms  p90 {:7.1} ms  ({} hits, {} misses)\n  moat, no pool       p50 {:7.1} ms  p90 {:7.1} ms\n  docker run --rm     p50 {:7.1} ms\n  ratio to docker run (p50)  pool {:.3}  no pool {:.2}\n  {} clients at once: {} new sessions, {:.1} claims/s, {} hits, all succeeded: {}\n",
            self.runs, self.pool_p50_ms, self.pool_p90_ms, self.pool_hits, self.pool_misses,
            self.cold_p50_ms, self.cold_p90_ms, self.docker_run_p50_ms,
            self.pool_ratio, self.cold_ratio,
            self.clients, self.claims, self.claims_per_s, self.claims_hits, self.claims_all_ok,
        )
    }
}

impl CliPath {
    pub fn render(&self) -> String {
        format!(
            "CLI path (`true`, {} runs each, interleaved)\n  moat exec CLI (daemon)  p50 {:7.2} ms  p90 {:7.2} ms\n  same call, no process   p50 {:7.2} ms  p90 {:7.2} ms\n  docker exec CLI         p50 {:7.2} ms\n  ratio (p50)  {:.3}\n",
            self.runs, self.moat_cli_p50_ms, self.moat_cli_p90_ms, self.socket_call_p50_ms,
            self.socket_call_p90_ms, self.docker_exec_p50_ms, self.ratio,
        )
    }
}

fn request(command: &str) -> ExecRequest {
    ExecRequest {
        command: command.into(),
        ..Default::default()
    }
}

fn percentile(samples: &mut [f64], p: f64) -> f64 {
    samples.sort_by(|a, b| a.total_cmp(b));
    if samples.is_empty() {
        return 0.0;
    }
    samples[((samples.len() as f64 - 1.0) * p).round() as usize]
}

fn ms(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1000.0
}

/// Runs `program args` with no output; an error names the command.
async fn quiet(program: &Path, args: &[&str], env: Option<&Path>) -> Result<(), BenchError> {
    let mut cmd = tokio::process::Command::new(program);
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    if let Some(home) = env {
        cmd.env("MOAT_HOME", home);
    }
    let what = || format!("{} {}", program.display(), args.join(" "));
    let status = cmd.status().await.map_err(|_| BenchError::Docker(what()))?;
    if !status.success() {
        return Err(BenchError::Docker(what()));
    }
    Ok(())
}

/// A home of the bench's own below `home`, with the same `moat.toml` (when there is one).
fn side_home(home: &Home, name: &str) -> Result<Home, BenchError> {
    let dir = home
        .root()
        .join(format!("bench-{name}-{}", std::process::id()));
    let err = |e: std::io::Error| BenchError::Command(format!("make {}: {e}", dir.display()));
    std::fs::create_dir_all(&dir).map_err(err)?;
    if home.config_file().is_file() {
        std::fs::copy(home.config_file(), dir.join("moat.toml")).map_err(err)?;
    }
    Ok(Home::at(&dir))
}

fn remove_home(dir: PathBuf) {
    if let Err(e) = std::fs::remove_dir_all(&dir) {
        tracing::warn!("failed to remove the bench's home {}: {e}", dir.display());
    }
}

/// The pool's hits and misses so far, over its shapes.
async fn tally(app: &App) -> (u64, u64) {
    let s = app.sessions.pool_status().await;
    s.shapes
        .iter()
        .fold((0, 0), |(h, m), st| (h + st.hits, m + st.misses))
}

/// Waits until every shape of `app`'s pool holds its size.
async fn full(app: &App) -> Result<(), BenchError> {
    let deadline = Instant::now() + FILL_WAIT;
    loop {
        let s = app.sessions.pool_status().await;
        if s.shapes.iter().all(|st| st.ready.len() >= st.want) {
            return Ok(());
        }
        if let Some(e) = s.shapes.iter().find_map(|st| st.failing.clone()) {
            return Err(BenchError::Command(format!("fill the warm pool: {e}")));
        }
        if Instant::now() > deadline {
            return Err(BenchError::Command(format!(
                "fill the warm pool: not full within {} s",
                FILL_WAIT.as_secs()
            )));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// One new session's first command in `app`: whether it printed what it was asked to.
async fn first_command(app: &App, key: &str) -> Result<bool, BenchError> {
    let r = app.exec.run(key, &request("echo ready"), true).await?;
    Ok(r.text().contains("ready"))
}

/// The new-session rows and the claims-per-second figure. `app` starts its sessions without
/// a pool; a second app over a home of its own keeps `claims` warm (at least one).
pub async fn new_sessions(
    app: &App,
    runs: usize,
    claims: usize,
    progress: &impl Fn(&str),
) -> Result<NewSessions, BenchError> {
    let claims = claims.clamp(1, crate::config::pool::MAX_SIZE);
    let side = side_home(&app.home, "pool")?;
    let mut config = (*app.config).clone();
    config.pool = crate::config::PoolConfig {
        size: claims,
        images: Default::default(),
    };
    let pooled = App::with_engine(side.clone(), config, app.source.clone(), app.engine.clone())?;
    pooled.sessions.start_pool().await;
    let mut keys = Vec::new();
    let measured = async {
        progress(&format!(
            "new sessions: filling a warm pool of {claims} in {}",
            side.root().display()
        ));
        full(&pooled).await?;
        let image = app.config.sandbox.image.clone();
        let (mut pool_ms, mut cold_ms, mut run_ms) = (Vec::new(), Vec::new(), Vec::new());
        progress(&format!("new sessions: {runs} runs each"));
        for i in 0..runs {
            full(&pooled).await?;
            let t = Instant::now();
            quiet(Path::new("docker"), &["run", "--rm", &image, "true"], None).await?;
            run_ms.push(ms(t));
            let key = format!("bench-cold-{}-{i}", std::process::id());
            let t = Instant::now();
            let ok = first_command(app, &key).await?;
            cold_ms.push(ms(t));
            app.sessions.remove_with(&key, true).await.ok();
            let key = format!("bench-pool-{i}");
            let t = Instant::now();
            let ok = first_command(&pooled, &key).await? && ok;
            pool_ms.push(ms(t));
            keys.push(key);
            if !ok {
                return Err(BenchError::Command(
                    "a new session's `echo ready` did not print it".into(),
                ));
            }
        }
        let (hits, misses) = tally(&pooled).await;
        full(&pooled).await?;
        progress(&format!("claims: {CLIENTS} clients, {claims} new sessions"));
        let t = Instant::now();
        let next = std::sync::atomic::AtomicUsize::new(0);
        let clients = (0..CLIENTS).map(|_| async {
            let mut mine = Vec::new();
            let mut all_ok = true;
            loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if i >= claims {
                    return (mine, all_ok);
                }
                let key = format!("bench-claim-{i}");
                all_ok &= matches!(first_command(&pooled, &key).await, Ok(true));
                mine.push(key);
            }
        });
        let done = futures::future::join_all(clients).await;
        let secs = t.elapsed().as_secs_f64();
        let mut claims_all_ok = true;
        for (mine, ok) in done {
            keys.extend(mine);
            claims_all_ok &= ok;
        }
        let claims_hits = tally(&pooled).await.0 - hits;
        let (pool_p50, cold_p50, run_p50) = (
            percentile(&mut pool_ms, 0.5),
            percentile(&mut cold_ms, 0.5),
            percentile(&mut run_ms, 0.5),
        );
        Ok::<_, BenchError>(NewSessions {
            runs,
            pool_p50_ms: pool_p50,
            pool_p90_ms: percentile(&mut pool_ms, 0.9),
            cold_p50_ms: cold_p50,
            cold_p90_ms: percentile(&mut cold_ms, 0.9),
            docker_run_p50_ms: run_p50,
            pool_hits: hits,
            pool_misses: misses,
            pool_ratio: pool_p50 / run_p50,
            cold_ratio: cold_p50 / run_p50,
            clients: CLIENTS,
            claims,
            claims_per_s: claims as f64 / secs,
            claims_hits,
            claims_all_ok,
        })
    }
    .await;
    progress("new sessions: removing the bench's sessions and pool");
    for key in &keys {
        pooled.sessions.remove_with(key, true).await.ok();
    }
    pooled.sessions.drain_pool().await;
    drop(pooled);
    remove_home(side.root().to_path_buf());
    measured
}

/// The CLI row: `moat exec --session S -- true` as a user runs it, a process each, through a
/// daemon of a home of its own, interleaved with `docker exec CONTAINER sh -lc true` into
/// `container` (a warm container of the same image and limits).
pub async fn cli_path(
    home: &Home,
    container: &str,
    runs: usize,
    progress: &impl Fn(&str),
) -> Result<CliPath, BenchError> {
    let side = side_home(home, "cli")?;
    let exe = std::env::current_exe()
        .map_err(|e| BenchError::Command(format!("find this moat's binary: {e}")))?;
    let key = format!("bench-cli-{}", std::process::id());
    let root = side.root().to_path_buf();
    let exec = ["exec", "--session", key.as_str(), "--", "true"];
    let measured = async {
        progress(&format!(
            "CLI path: {runs} runs each, the daemon of {}",
            root.display()
        ));
        // The first starts the daemon and the session.
        quiet(&exe, &exec, Some(&root)).await?;
        // The client the CLI makes: this is its binary, and the side home holds its moat.toml.
        let (config, _) = crate::config::load(&side.config_file()).map_err(|e| {
            BenchError::Command(format!("load {}: {e}", side.config_file().display()))
        })?;
        let client = crate::daemon::unchecked(&side, &config);
        let (mut moat_ms, mut socket_ms, mut docker_ms) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..runs {
            let t = Instant::now();
            quiet(&exe, &exec, Some(&root)).await?;
            moat_ms.push(ms(t));
            let t = Instant::now();
            socket_call(&client, &key).await?;
            socket_ms.push(ms(t));
            let t = Instant::now();
            quiet(
                Path::new("docker"),
                &["exec", container, "sh", "-lc", "true"],
                None,
            )
            .await?;
            docker_ms.push(ms(t));
        }
        let (moat_p50, docker_p50) = (
            percentile(&mut moat_ms, 0.5),
            percentile(&mut docker_ms, 0.5),
        );
        Ok::<_, BenchError>(CliPath {
            runs,
            moat_cli_p50_ms: moat_p50,
            moat_cli_p90_ms: percentile(&mut moat_ms, 0.9),
            socket_call_p50_ms: percentile(&mut socket_ms, 0.5),
            socket_call_p90_ms: percentile(&mut socket_ms, 0.9),
            docker_exec_p50_ms: docker_p50,
            ratio: moat_p50 / docker_p50,
        })
    }
    .await;
    let _ = quiet(&exe, &["sessions", "rm", "--purge", &key], Some(&root)).await;
    let _ = quiet(&exe, &["daemon", "stop", "--force"], Some(&root)).await;
    remove_home(root);
    measured
}

/// `moat exec --session KEY -- true` as the CLI sends it, through `client`, its answer read to
/// the end; an error unless it ends with the command's result.
async fn socket_call(client: &crate::daemon::DaemonClient, key: &str) -> Result<(), BenchError> {
    let err = |e: String| BenchError::Command(format!("call moat serve on its socket: {e}"));
    let body = serde_json::to_value(request("true")).map_err(|e| err(e.to_string()))?;
    let headers = [(crate::daemon::WAIT_HEADER, "end".to_string())];
    let path = format!("/v1/sessions/{key}/exec");
    let mut lines = client
        .lines(http::Method::POST, &path, Some(&body), &headers)
        .await
        .map_err(|e| err(e.to_string()))?;
    let mut last = String::new();
    while let Some(line) = lines.next_line().await.map_err(|e| err(e.to_string()))? {
        last = line;
    }
    if !last.starts_with("{\"result\"") {
        return Err(err(format!("it ended with {last}")));
    }
    Ok(())
}
