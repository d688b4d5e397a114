//! `moat bench`: moat's exec path measured side by side with plain docker, in one run.
//!
//! - warm exec: `true` through moat vs `docker exec <container> sh -lc true`, interleaved;
//! - cold start: a new session's first output vs `docker run --rm <image> true`;
//! - flood: 1 GiB of stdout through moat, with throughput and moat's peak RSS.

use std::time::Instant;

use serde::Serialize;

use crate::app::{App, AppError};
use crate::exec::ExecRequest;
use crate::home::Home;
use crate::tools::ExecError;

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
    pub exec_p50_ms: f64,
    pub exec_p90_ms: f64,
    pub exec_p99_ms: f64,
    pub docker_cli_p50_ms: f64,
    pub docker_cli_p90_ms: f64,
    pub docker_cli_p99_ms: f64,
    pub exec_ratio: f64,
    pub cold_runs: usize,
    pub cold_start_p50_ms: f64,
    pub docker_run_p50_ms: f64,
    pub cold_ratio: f64,
    pub flood_bytes: u64,
    pub flood_seconds: f64,
    pub flood_mb_per_s: f64,
    pub flood_peak_rss_mib: f64,
}

impl Report {
    pub fn render(&self) -> String {
        format!(
            "warm exec (`true`, {} runs each, interleaved)\n  moat exec    p50 {:7.2} ms  p90 {:7.2} ms  p99 {:7.2} ms\n  docker exec  p50 {:7.2} ms  p90 {:7.2} ms  p99 {:7.2} ms\n  ratio (p50)  {:.2}\n\
             cold start ({} runs each)\n  moat new session → first output  p50 {:7.1} ms\n  docker run --rm                  p50 {:7.1} ms\n  ratio (p50)  {:.2}\n\
             flood ({} bytes of stdout)\n  {:.1} MB/s in {:.2} s, moat peak RSS {:.1} MiB\n",
            self.runs, self.exec_p50_ms, self.exec_p90_ms, self.exec_p99_ms,
            self.docker_cli_p50_ms, self.docker_cli_p90_ms, self.docker_cli_p99_ms, self.exec_ratio,
            self.cold_runs, self.cold_start_p50_ms, self.docker_run_p50_ms, self.cold_ratio,
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

pub async fn run(
    home: Home,
    runs: usize,
    cold_runs: usize,
    flood_bytes: u64,
    progress: impl Fn(&str),
) -> Result<Report, BenchError> {
    let app = App::open(home).await?;
    let image = app.config.sandbox.image.clone();
    let warm = format!("bench-warm-{}", std::process::id());
    let first = app.exec.run(&warm, &request("true"), true).await?;
    if first.is_error() {
        return Err(BenchError::Command(first.text().to_string()));
    }
    let container = app.sessions.names(&warm).1.name;
    progress(&format!("warm exec: {runs} runs each in {container}"));
    let (mut moat_ms, mut docker_ms) = (Vec::new(), Vec::new());
    for _ in 0..runs {
        let t = Instant::now();
        app.exec.run(&warm, &request("true"), true).await?;
        moat_ms.push(t.elapsed().as_secs_f64() * 1000.0);
        let t = Instant::now();
        docker_cli(&["exec", &container, "sh", "-lc", "true"]).await?;
        docker_ms.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    progress(&format!("cold start: {cold_runs} runs each"));
    let (mut cold_ms, mut run_ms) = (Vec::new(), Vec::new());
    for i in 0..cold_runs {
        let key = format!("bench-cold-{}-{i}", std::process::id());
        let t = Instant::now();
        let r = app.exec.run(&key, &request("echo ready"), true).await?;
        cold_ms.push(t.elapsed().as_secs_f64() * 1000.0);
        if !r.text().contains("ready") {
            return Err(BenchError::Command(r.text().to_string()));
        }
        app.sessions.remove(&key).await.ok();
        let t = Instant::now();
        docker_cli(&["run", "--rm", &image, "true"]).await?;
        run_ms.push(t.elapsed().as_secs_f64() * 1000.0);
    }
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
    app.sessions.remove(&warm).await.ok();
    let exec_p50 = percentile(&mut moat_ms, 0.5);
    let docker_p50 = percentile(&mut docker_ms, 0.5);
    let cold_p50 = percentile(&mut cold_ms, 0.5);
    let run_p50 = percentile(&mut run_ms, 0.5);
    Ok(Report {
        runs,
        exec_p50_ms: exec_p50,
        exec_p90_ms: percentile(&mut moat_ms, 0.9),
        exec_p99_ms: percentile(&mut moat_ms, 0.99),
        docker_cli_p50_ms: docker_p50,
        docker_cli_p90_ms: percentile(&mut docker_ms, 0.9),
        docker_cli_p99_ms: percentile(&mut docker_ms, 0.99),
        exec_ratio: exec_p50 / docker_p50,
        cold_runs,
        cold_start_p50_ms: cold_p50,
        docker_run_p50_ms: run_p50,
        cold_ratio: cold_p50 / run_p50,
        flood_bytes,
        flood_seconds: secs,
        flood_mb_per_s: flood_bytes as f64 / 1e6 / secs,
        flood_peak_rss_mib: peak,
    })
}
