//! `moat bench --processes`: the process layer: concurrent execs, how soon a waiting poll
//! sees a line, idle sessions' memory, and what finished records cost (docs/ARCHITECTURE.md,
//! "Process memory").

use std::sync::Arc;
use std::time::Instant;

use serde::Serialize;

use super::made::Made;
use super::rss::rss_mib;
use super::samples::{ms, percentile, request};
use super::BenchError;
use crate::app::App;
use crate::home::Home;
use crate::tools::ExecRequest;

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

/// Runs the process-layer figures in `home`; the sessions it makes are removed at the end,
/// whatever the outcome.
pub async fn run_processes(
    home: Home,
    concurrent: usize,
    idle_sessions: usize,
    progress: impl Fn(&str),
) -> Result<ProcessReport, BenchError> {
    let app = Arc::new(App::open(home).await?);
    let made = Made::default();
    let report = measure(&app, &made, concurrent, idle_sessions, &progress).await;
    made.remove_all(&app).await;
    report
}

async fn measure(
    app: &Arc<App>,
    made: &Made,
    concurrent: usize,
    idle_sessions: usize,
    progress: &impl Fn(&str),
) -> Result<ProcessReport, BenchError> {
    let rss_before = rss_mib();
    let key = made.note(format!("bench-proc-{}", std::process::id()));
    app.exec.run(&key, &request("true"), true).await?;

    progress(&format!(
        "memory: {OUTPUT_EXECS} execs printing {OUTPUT_EXEC_BYTES} bytes each"
    ));
    let (rss_idle, rss_after_output) = output_memory(app, &key).await?;

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
    let concurrent_ms = ms(t);

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
    for i in 0..idle_sessions {
        let k = made.note(format!("bench-idle-{}-{i}", std::process::id()));
        app.exec.run(&k, &request("true"), true).await?;
    }
    let rss_idle_sessions = rss_mib();
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
