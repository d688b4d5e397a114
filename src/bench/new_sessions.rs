//! `moat bench`'s new sessions, side by side in one run (docs/pool.md, "What it saves"):
//!
//! - a new session's first command done, claiming from a full warm pool, starting a
//!   container, and `docker run --rm IMAGE true`, interleaved;
//! - claims per second: [`CLIENTS`] clients each starting new sessions from a full pool.
//!
//! The pool gets a home of its own below the bench's home (`bench-pool-PID`, removed at the
//! end): a pool started in the operator's home would adopt, claim or remove its daemon's warm
//! containers (docs/pool.md, "Bounds and ownership").

use std::time::{Duration, Instant};

use serde::Serialize;

use super::made::Made;
use super::quiet::docker;
use super::samples::{ms, percentile, request};
use super::side_home::{remove_home, side_home};
use super::BenchError;
use crate::app::App;

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
pub(super) async fn new_sessions(
    app: &App,
    made: &Made,
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
    // The pool's sessions live in the side home: noted apart, removed through its app.
    let claimed = Made::default();
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
            docker(&["run", "--rm", &image, "true"]).await?;
            run_ms.push(ms(t));
            let key = made.note(format!("bench-cold-{}-{i}", std::process::id()));
            let t = Instant::now();
            let ok = first_command(app, &key).await?;
            cold_ms.push(ms(t));
            if app.sessions.remove_with(&key, true).await.is_ok() {
                made.forget(&key);
            }
            let key = claimed.note(format!("bench-pool-{i}"));
            let t = Instant::now();
            let ok = first_command(&pooled, &key).await? && ok;
            pool_ms.push(ms(t));
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
            let mut all_ok = true;
            loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if i >= claims {
                    return all_ok;
                }
                let key = claimed.note(format!("bench-claim-{i}"));
                all_ok &= matches!(first_command(&pooled, &key).await, Ok(true));
            }
        });
        let done = futures::future::join_all(clients).await;
        let secs = t.elapsed().as_secs_f64();
        let claims_all_ok = done.into_iter().all(|ok| ok);
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
    claimed.remove_all(&pooled).await;
    pooled.sessions.drain_pool().await;
    drop(pooled);
    remove_home(side.root().to_path_buf());
    measured
}
