//! `moat bench`: moat's exec path measured side by side with plain docker, in one run.
//!
//! - warm exec: `true` through moat's helper, through moat's per-command engine exec, and
//!   `docker exec <container> sh -lc true`, interleaved (docs/helper.md);
//! - throughput: execs per second into one session with 8 in flight, and 50 at once;
//! - new sessions and the CLI path (`new_sessions.rs`, `cli_path.rs`);
//! - flood: 1 GiB of stdout through moat, with throughput and moat's peak RSS.

use std::time::Instant;

use serde::Serialize;

use super::made::Made;
use super::quiet::docker;
use super::rss::{peak_rss_mib, reset_peak};
use super::samples::{ms, percentile, request};
use super::{BenchError, CliPath, NewSessions};
use crate::app::App;
use crate::config::Transport;
use crate::home::Home;

#[derive(Debug, Serialize)]
pub struct Report {
    pub runs: usize,
    /// Through the helper (`sandbox.transport = "helper"`).
    pub exec_p50_ms: f64,
    pub exec_p90_ms: f64,
    pub exec_p99_ms: f64,
    /// Through one engine exec per command (`sandbox.transport = "exec"`).
    pub engine_exec_p50_ms: f64,
    pub engine_exec_p90_ms: f64,
    pub engine_exec_p99_ms: f64,
    pub docker_cli_p50_ms: f64,
    pub docker_cli_p90_ms: f64,
    pub docker_cli_p99_ms: f64,
    /// The transport alone: `true` run to completion by `Executor::exec_capture`, without
    /// moat's exec tool around it (policy, run files, state database), through the helper
    /// and through the engine.
    pub raw_helper_p50_ms: f64,
    pub raw_engine_p50_ms: f64,
    /// Helper p50 / `docker exec` CLI p50.
    pub exec_ratio: f64,
    /// Engine-exec p50 / `docker exec` CLI p50.
    pub engine_exec_ratio: f64,
    /// Commands run with [`IN_FLIGHT`] in flight, and the rate they reached (helper).
    pub in_flight: usize,
    pub in_flight_runs: usize,
    pub in_flight_execs_per_s: f64,
    pub in_flight_all_ok: bool,
    /// [`BURST`] commands started at once into one session (helper): time until the last
    /// result.
    pub burst: usize,
    pub burst_ms: f64,
    pub burst_all_ok: bool,
    /// New sessions with and without the warm pool, and claims per second.
    pub new_sessions: NewSessions,
    /// `moat exec -- true` through the daemon against the `docker exec` CLI.
    pub cli: CliPath,
    pub flood_bytes: u64,
    pub flood_seconds: f64,
    pub flood_mb_per_s: f64,
    pub flood_peak_rss_mib: f64,
}

impl Report {
    pub fn render(&self) -> String {
        format!(
            "warm exec (`true`, {} runs each, interleaved)\n  moat, helper       p50 {:7.2} ms  p90 {:7.2} ms  p99 {:7.2} ms\n  moat, engine exec  p50 {:7.2} ms  p90 {:7.2} ms  p99 {:7.2} ms\n  docker exec CLI    p50 {:7.2} ms  p90 {:7.2} ms  p99 {:7.2} ms\n  ratio to the CLI (p50)  helper {:.3}  engine exec {:.2}\n  transport alone (p50)   helper {:.2} ms  engine {:.2} ms\n\
             throughput (helper)\n  {} in flight: {:.0} execs/s over {} runs, all succeeded: {}\n  {} at once: {:.0} ms until the last, all succeeded: {}\n\
             {}{}\
             flood ({} bytes of stdout)\n  {:.1} MB/s in {:.2} s, moat peak RSS {:.1} MiB\n",
            self.runs, self.exec_p50_ms, self.exec_p90_ms, self.exec_p99_ms,
            self.engine_exec_p50_ms, self.engine_exec_p90_ms, self.engine_exec_p99_ms,
            self.docker_cli_p50_ms, self.docker_cli_p90_ms, self.docker_cli_p99_ms,
            self.exec_ratio, self.engine_exec_ratio, self.raw_helper_p50_ms, self.raw_engine_p50_ms,
            self.in_flight, self.in_flight_execs_per_s, self.in_flight_runs, self.in_flight_all_ok,
            self.burst, self.burst_ms, self.burst_all_ok,
            self.new_sessions.render(), self.cli.render(),
            self.flood_bytes, self.flood_mb_per_s, self.flood_seconds, self.flood_peak_rss_mib,
        )
    }
}

/// Commands kept in flight for the execs-per-second figure.
const IN_FLIGHT: usize = 8;
/// Commands started at once for the burst figure.
const BURST: usize = 50;

/// Runs `total` numbered echoes into session `key`, `width` at a time; returns the seconds
/// until the last result and whether every one printed its own number.
async fn many(app: &App, key: &str, total: usize, width: usize) -> (f64, bool) {
    use futures::StreamExt;
    let t = Instant::now();
    let ok = futures::stream::iter(0..total)
        .map(|i| async move {
            let r = app
                .exec
                .run(key, &request(&format!("echo run-{i}")), true)
                .await;
            matches!(r, Ok(r) if r.text() == format!("run-{i}"))
        })
        .buffer_unordered(width)
        .fold(true, |all, ok| async move { all && ok })
        .await;
    (t.elapsed().as_secs_f64(), ok)
}

/// How many runs of each figure `moat bench` takes.
#[derive(Debug, Clone, Copy)]
pub struct Runs {
    /// Warm exec samples per method.
    pub warm: usize,
    /// New-session samples per method.
    pub cold: usize,
    /// New sessions the clients claim at once from a full pool.
    pub claims: usize,
    /// `moat exec` CLI samples (and as many `docker exec`).
    pub cli: usize,
    /// Bytes of output of the flood.
    pub flood_bytes: u64,
}

/// Runs every figure of `moat bench` in `home`; its warm session is removed at the end,
/// whatever the outcome.
pub async fn run(home: Home, counts: Runs, progress: impl Fn(&str)) -> Result<Report, BenchError> {
    let app = App::open_with(home.clone(), Some(Transport::Helper)).await?;
    let engine = App::open_with(home, Some(Transport::Exec)).await?;
    let made = Made::default();
    let report = measure(&app, &engine, &made, counts, &progress).await;
    made.remove_all(&app).await;
    report
}

async fn measure(
    app: &App,
    engine: &App,
    made: &Made,
    counts: Runs,
    progress: &impl Fn(&str),
) -> Result<Report, BenchError> {
    let Runs {
        warm: runs,
        cold: cold_runs,
        flood_bytes,
        ..
    } = counts;
    let warm = made.note(format!("bench-warm-{}", std::process::id()));
    for a in [app, engine] {
        let first = a.exec.run(&warm, &request("true"), true).await?;
        if first.is_error() {
            return Err(BenchError::Command(first.text().to_string()));
        }
    }
    let container = app.sessions.names(&warm).1.name;
    progress(&format!("warm exec: {runs} runs each in {container}"));
    let (mut moat_ms, mut engine_ms, mut docker_ms) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..runs {
        let t = Instant::now();
        app.exec.run(&warm, &request("true"), true).await?;
        moat_ms.push(ms(t));
        let t = Instant::now();
        engine.exec.run(&warm, &request("true"), true).await?;
        engine_ms.push(ms(t));
        let t = Instant::now();
        docker(&["exec", &container, "sh", "-lc", "true"]).await?;
        docker_ms.push(ms(t));
    }
    let (mut raw_helper, mut raw_engine) = (Vec::new(), Vec::new());
    for _ in 0..runs {
        for (a, samples) in [(app, &mut raw_helper), (engine, &mut raw_engine)] {
            let t = Instant::now();
            let (code, _) = a
                .commands
                .exec_capture(&container, vec!["true".into()], None)
                .await
                .map_err(|e| BenchError::Command(e.to_string()))?;
            samples.push(ms(t));
            if code != 0 {
                return Err(BenchError::Command(format!("`true` exited {code}")));
            }
        }
    }
    let in_flight_runs = runs.max(IN_FLIGHT * 25);
    progress(&format!(
        "throughput: {in_flight_runs} runs, {IN_FLIGHT} in flight; {BURST} at once"
    ));
    let (in_flight_secs, in_flight_all_ok) = many(app, &warm, in_flight_runs, IN_FLIGHT).await;
    let (burst_secs, burst_all_ok) = many(app, &warm, BURST, BURST).await;
    let new_sessions =
        super::new_sessions::new_sessions(app, made, cold_runs, counts.claims, progress).await?;
    let cli = super::cli_path::cli_path(&app.home, &container, counts.cli, progress).await?;
    progress(&format!("flood: {flood_bytes} bytes"));
    reset_peak();
    let flood = format!("yes 0123456789abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopqrstuvwxyz | head -c {flood_bytes}");
    let t = Instant::now();
    let r = app.exec.run(&warm, &request(&flood), true).await?;
    let secs = t.elapsed().as_secs_f64();
    let peak = peak_rss_mib();
    if r.is_error() {
        return Err(BenchError::Command(r.text().chars().take(500).collect()));
    }
    let exec_p50 = percentile(&mut moat_ms, 0.5);
    let engine_p50 = percentile(&mut engine_ms, 0.5);
    let docker_p50 = percentile(&mut docker_ms, 0.5);
    Ok(Report {
        runs,
        exec_p50_ms: exec_p50,
        exec_p90_ms: percentile(&mut moat_ms, 0.9),
        exec_p99_ms: percentile(&mut moat_ms, 0.99),
        docker_cli_p50_ms: docker_p50,
        docker_cli_p90_ms: percentile(&mut docker_ms, 0.9),
        docker_cli_p99_ms: percentile(&mut docker_ms, 0.99),
        engine_exec_p50_ms: engine_p50,
        engine_exec_p90_ms: percentile(&mut engine_ms, 0.9),
        engine_exec_p99_ms: percentile(&mut engine_ms, 0.99),
        raw_helper_p50_ms: percentile(&mut raw_helper, 0.5),
        raw_engine_p50_ms: percentile(&mut raw_engine, 0.5),
        exec_ratio: exec_p50 / docker_p50,
        engine_exec_ratio: engine_p50 / docker_p50,
        in_flight: IN_FLIGHT,
        in_flight_runs,
        in_flight_execs_per_s: in_flight_runs as f64 / in_flight_secs,
        in_flight_all_ok,
        burst: BURST,
        burst_ms: burst_secs * 1000.0,
        burst_all_ok,
        new_sessions,
        cli,
        flood_bytes,
        flood_seconds: secs,
        flood_mb_per_s: flood_bytes as f64 / 1e6 / secs,
        flood_peak_rss_mib: peak,
    })
}
