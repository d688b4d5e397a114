//! `moat bench`: moat's exec path measured side by side with plain docker, in one run.
//!
//! - warm exec: `true` through moat's helper, through moat's per-command engine exec, and
//!   `docker exec <container> sh -lc true`, interleaved (docs/helper.md);
//! - throughput: execs per second into one session with 8 in flight, and 50 at once;
//! - new sessions: a new session's first command with the warm pool, without it, and
//!   `docker run --rm <image> true`; claims per second; the CLI path (`bench_pool.rs`);
//! - flood: 1 GiB of stdout through moat, with throughput and moat's peak RSS.

use std::time::Instant;

use serde::Serialize;

use crate::app::{App, AppError};
use crate::config::Transport;
use crate::home::Home;
use crate::tools::ExecError;
use crate::tools::ExecRequest;

#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    #[error(transparent)]
    App(#[from] AppError),
    #[error(transparent)]
    Exec(#[from] ExecError),
    #[error("run `{0}`")]
    Docker(String),
    #[error("benchmark command failed: {0}")]
    Command(String),
}

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
    pub new_sessions: crate::bench_pool::NewSessions,
    /// `moat exec -- true` through the daemon against the `docker exec` CLI.
    pub cli: crate::bench_pool::CliPath,
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

fn percentile(samples: &mut [f64], p: f64) -> f64 {
    samples.sort_by(|a, b| a.total_cmp(b));
    if samples.is_empty() {
        return 0.0;
    }
    let idx = ((samples.len() as f64 - 1.0) * p).round() as usize;
    samples[idx]
}

async fn docker_cli(args: &[&str]) -> Result<(), BenchError> {
    let status = tokio::process::Command::new("docker")
        .args(args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .await
        .map_err(|_| BenchError::Docker(format!("docker {}", args.join(" "))))?;
    if !status.success() {
        return Err(BenchError::Docker(format!("docker {}", args.join(" "))));
    }
    Ok(())
}

fn request(command: &str) -> ExecRequest {
    ExecRequest {
        command: command.into(),
        ..Default::default()
    }
}

/// Peak resident set size of this process since the last reset, in MiB.
fn peak_rss_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map(|kb| kb / 1024.0)
        .unwrap_or(0.0)
}

/// Resets the kernel's peak-RSS counter (Linux ≥ 4.0), so the flood's peak is its own.
fn reset_peak_rss() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
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

pub async fn run(home: Home, counts: Runs, progress: impl Fn(&str)) -> Result<Report, BenchError> {
    let Runs {
        warm: runs,
        cold: cold_runs,
        flood_bytes,
        ..
    } = counts;
    let app = App::open_with(home.clone(), Some(Transport::Helper)).await?;
    let engine = App::open_with(home, Some(Transport::Exec)).await?;
    let warm = format!("bench-warm-{}", std::process::id());
    for a in [&app, &engine] {
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
        moat_ms.push(t.elapsed().as_secs_f64() * 1000.0);
        let t = Instant::now();
        engine.exec.run(&warm, &request("true"), true).await?;
        engine_ms.push(t.elapsed().as_secs_f64() * 1000.0);
        let t = Instant::now();
        docker_cli(&["exec", &container, "sh", "-lc", "true"]).await?;
        docker_ms.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    let (mut raw_helper, mut raw_engine) = (Vec::new(), Vec::new());
    for _ in 0..runs {
        for (a, samples) in [(&app, &mut raw_helper), (&engine, &mut raw_engine)] {
            let t = Instant::now();
            let (code, _) = a
                .commands
                .exec_capture(&container, vec!["true".into()], None)
                .await
                .map_err(|e| BenchError::Command(e.to_string()))?;
            samples.push(t.elapsed().as_secs_f64() * 1000.0);
            if code != 0 {
                return Err(BenchError::Command(format!("`true` exited {code}")));
            }
        }
    }
    let in_flight_runs = runs.max(IN_FLIGHT * 25);
    progress(&format!(
        "throughput: {in_flight_runs} runs, {IN_FLIGHT} in flight; {BURST} at once"
    ));
    let (in_flight_secs, in_flight_all_ok) = many(&app, &warm, in_flight_runs, IN_FLIGHT).await;
    let (burst_secs, burst_all_ok) = many(&app, &warm, BURST, BURST).await;
    let new_sessions =
        crate::bench_pool::new_sessions(&app, cold_runs, counts.claims, &progress).await?;
    let cli = crate::bench_pool::cli_path(&app.home, &container, counts.cli, &progress).await?;
    progress(&format!("flood: {flood_bytes} bytes"));
    reset_peak_rss();
    let flood = format!("yes 0123456789abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopqrstuvwxyz | head -c {flood_bytes}");
    let t = Instant::now();
    let r = app.exec.run(&warm, &request(&flood), true).await?;
    let secs = t.elapsed().as_secs_f64();
    let peak = peak_rss_mib();
    if r.is_error() {
        return Err(BenchError::Command(r.text().chars().take(500).collect()));
    }
    app.sessions.remove_with(&warm, true).await.ok();
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

/// Figures for the process layer (`moat bench --processes`).
#[derive(Debug, Serialize)]
pub struct ProcessReport {
    pub concurrent_execs: usize,
    pub concurrent_all_ok: bool,
    pub concurrent_total_ms: f64,
    pub poll_samples: usize,
    pub poll_latency_p50_ms: f64,
    pub poll_latency_p90_ms: f64,
    pub idle_sessions: usize,
    pub rss_before_mib: f64,
    pub rss_idle_sessions_mib: f64,
    /// Foreground execs that each print [`OUTPUT_EXEC_BYTES`] (each one's record is kept: the
    /// output cap cut it), and this process's RSS before them (one session, idle) and after.
    pub output_execs: usize,
    pub output_exec_bytes: u64,
    pub rss_idle_mib: f64,
    pub rss_after_output_mib: f64,
    /// `rss_after_output_mib / rss_idle_mib`: what finished records cost (issue 29: ≤ 2).
    pub rss_output_ratio: f64,
}

impl ProcessReport {
    pub fn render(&self) -> String {
        format!(
            "{} concurrent execs into one session: {:.0} ms in total, all succeeded: {}\n\
             line written in the container → waiting poll returns it ({} samples): p50 {:.1} ms, p90 {:.1} ms\n\
             moat RSS: {:.1} MiB before, {:.1} MiB with {} idle sessions\n\
             moat RSS: {:.1} MiB idle, {:.1} MiB after {} execs printing {} bytes each (ratio {:.2})\n",
            self.concurrent_execs, self.concurrent_total_ms, self.concurrent_all_ok,
            self.poll_samples, self.poll_latency_p50_ms, self.poll_latency_p90_ms,
            self.rss_before_mib, self.rss_idle_sessions_mib, self.idle_sessions,
            self.rss_idle_mib, self.rss_after_output_mib, self.output_execs,
            self.output_exec_bytes, self.rss_output_ratio,
        )
    }
}

/// Foreground execs of the memory figure, and the bytes each prints: a finished record each.
const OUTPUT_EXECS: usize = 100;
const OUTPUT_EXEC_BYTES: u64 = 1_000_000;

/// This process's RSS with one idle session, and after [`OUTPUT_EXECS`] foreground execs that
/// each print [`OUTPUT_EXEC_BYTES`] into it: the records they leave are what it measures
/// (docs/ARCHITECTURE.md, "Process memory").
async fn output_memory(app: &App, key: &str) -> Result<(f64, f64), BenchError> {
    let idle = rss_mib();
    let flood = request(&format!(
        "yes 0123456789abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopqrstuvwxyz | head -c {OUTPUT_EXEC_BYTES}"
    ));
    for _ in 0..OUTPUT_EXECS {
        let r = app.exec.run(key, &flood, true).await?;
        if r.is_error() {
            return Err(BenchError::Command(r.text().chars().take(500).collect()));
        }
    }
    Ok((idle, rss_mib()))
}

fn rss_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map(|kb| kb / 1024.0)
        .unwrap_or(0.0)
}

pub async fn run_processes(
    home: Home,
    concurrent: usize,
    idle_sessions: usize,
    progress: impl Fn(&str),
) -> Result<ProcessReport, BenchError> {
    use std::sync::Arc;
    let app = Arc::new(App::open(home).await?);
    let rss_before = rss_mib();
    let key = format!("bench-proc-{}", std::process::id());
    app.exec.run(&key, &request("true"), true).await?;

    progress(&format!(
        "memory: {OUTPUT_EXECS} execs printing {OUTPUT_EXEC_BYTES} bytes each"
    ));
    let (rss_idle, rss_after_output) = output_memory(&app, &key).await?;

    progress(&format!("{concurrent} concurrent execs"));
    let t = Instant::now();
    let mut tasks = Vec::new();
    for i in 0..concurrent {
        let app = app.clone();
        let key = key.clone();
        tasks.push(tokio::spawn(async move {
            let r = app
                .exec
                .run(&key, &request(&format!("echo run-{i}")), true)
                .await;
            matches!(r, Ok(r) if r.text() == format!("run-{i}"))
        }));
    }
    let mut all_ok = true;
    for t in tasks {
        all_ok &= t.await.unwrap_or(false);
    }
    let concurrent_ms = t.elapsed().as_secs_f64() * 1000.0;

    progress("poll latency");
    let req = ExecRequest {
        command: "for i in $(seq 1 40); do sleep 0.2; date +%s%N; done".into(),
        background: Some(true),
        ..Default::default()
    };
    let r = app.exec.run(&key, &req, false).await?;
    let id = r.details.process_id().unwrap_or_default().to_string();
    let mut latencies = Vec::new();
    loop {
        let poll = crate::tools::ProcessRequest {
            action: "poll".into(),
            process_id: Some(id.clone()),
            timeout: Some(5000),
            ..Default::default()
        };
        let p = app.process.run(&key, &poll).await;
        let now_ns = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as i128)
            .unwrap_or(0);
        // Only the newest line of a poll measures the wake-up; older ones waited for it.
        if let Some(ns) = p
            .text()
            .lines()
            .rev()
            .find_map(|l| l.trim().parse::<i128>().ok())
        {
            latencies.push((now_ns - ns) as f64 / 1e6);
        }
        if p.status() != Some(crate::contract::Status::Running) {
            break;
        }
    }

    progress(&format!("{idle_sessions} idle sessions"));
    let mut keys = Vec::new();
    for i in 0..idle_sessions {
        let k = format!("bench-idle-{}-{i}", std::process::id());
        app.exec.run(&k, &request("true"), true).await?;
        keys.push(k);
    }
    let rss_idle_sessions = rss_mib();
    for k in keys.iter().chain(std::iter::once(&key)) {
        app.sessions.remove_with(k, true).await.ok();
    }
    let samples = latencies.len();
    Ok(ProcessReport {
        concurrent_execs: concurrent,
        concurrent_all_ok: all_ok,
        concurrent_total_ms: concurrent_ms,
        poll_samples: samples,
        poll_latency_p50_ms: percentile(&mut latencies, 0.5),
        poll_latency_p90_ms: percentile(&mut latencies, 0.9),
        idle_sessions,
        rss_before_mib: rss_before,
        rss_idle_sessions_mib: rss_idle_sessions,
        output_execs: OUTPUT_EXECS,
        output_exec_bytes: OUTPUT_EXEC_BYTES,
        rss_idle_mib: rss_idle,
        rss_after_output_mib: rss_after_output,
        rss_output_ratio: rss_after_output / rss_idle,
    })
}
