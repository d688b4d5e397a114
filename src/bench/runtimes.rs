//! `moat bench --runtimes runc,runsc`: the same exec path under several OCI runtimes, side by
//! side in one run (docs/security.md, "runc or runsc"): warm `true` through moat and through
//! `docker exec … sh -lc true`, interleaved across runtimes, and a new session's cold start.

use std::time::Instant;

use serde::Serialize;

use super::made::Made;
use super::quiet::docker;
use super::samples::{ms, percentile, request};
use super::BenchError;
use crate::app::App;
use crate::config;
use crate::home::Home;

/// One runtime's figures.
#[derive(Debug, Serialize)]
pub struct RuntimeRow {
    /// The runtime's name as the engine knows it (`default`: the engine's default).
    pub runtime: String,
    /// `true` through moat, warm container.
    pub exec_p50_ms: f64,
    pub exec_p90_ms: f64,
    /// `docker exec … sh -lc true` into the same container: the engine's own floor.
    pub docker_exec_p50_ms: f64,
    /// A new session's first output (container created and started).
    pub cold_start_p50_ms: f64,
}

#[derive(Debug, Serialize)]
pub struct RuntimesReport {
    /// Warm samples per runtime.
    pub runs: usize,
    /// Cold starts per runtime.
    pub cold_runs: usize,
    /// One row per runtime, in the order asked.
    pub rows: Vec<RuntimeRow>,
}

impl RuntimesReport {
    pub fn render(&self) -> String {
        let mut out = format!(
            "runtimes side by side ({} warm runs each, interleaved; {} cold starts each)\n  runtime   moat exec p50   p90        docker exec p50   cold start p50\n",
            self.runs, self.cold_runs
        );
        for r in &self.rows {
            out.push_str(&format!(
                "  {:<9} {:8.2} ms  {:8.2} ms  {:8.2} ms       {:8.1} ms\n",
                r.runtime, r.exec_p50_ms, r.exec_p90_ms, r.docker_exec_p50_ms, r.cold_start_p50_ms
            ));
        }
        out
    }
}

/// Runs the comparison; `runtimes` are names the engine offers (`runc`, `runsc`). Every
/// session it makes is removed at the end, whatever the outcome.
pub async fn run(
    home: Home,
    runtimes: &[String],
    runs: usize,
    cold_runs: usize,
    progress: impl Fn(&str),
) -> Result<RuntimesReport, BenchError> {
    let base = App::open(home.clone()).await?;
    let made = Made::default();
    let report = measure(&base, &made, runtimes, runs, cold_runs, &progress).await;
    made.remove_all(&base).await;
    report
}

async fn measure(
    base: &App,
    made: &Made,
    runtimes: &[String],
    runs: usize,
    cold_runs: usize,
    progress: &impl Fn(&str),
) -> Result<RuntimesReport, BenchError> {
    let mut apps = Vec::new();
    for rt in runtimes {
        let mut cfg = (*base.config).clone();
        cfg.sandbox.runtime = if rt == "default" {
            String::new()
        } else {
            rt.clone()
        };
        let source = config::ConfigSource {
            file: None,
            overrides: vec![format!("sandbox.runtime={rt}")],
        };
        let app = App::with_engine(base.home.clone(), cfg, source, base.engine.clone())?;
        let key = made.note(format!("bench-rt-{rt}-{}", std::process::id()));
        let first = app.exec.run(&key, &request("true"), true).await?;
        if first.is_error() {
            return Err(BenchError::Command(first.text().to_string()));
        }
        let container = app.sessions.names(&key).1.name;
        apps.push((rt.clone(), app, key, container));
    }
    progress(&format!("warm exec: {runs} runs per runtime, interleaved"));
    let mut moat_ms = vec![Vec::new(); apps.len()];
    let mut docker_ms = vec![Vec::new(); apps.len()];
    for _ in 0..runs {
        for (i, (_, app, key, container)) in apps.iter().enumerate() {
            let t = Instant::now();
            app.exec.run(key, &request("true"), true).await?;
            moat_ms[i].push(ms(t));
            let t = Instant::now();
            docker(&["exec", container, "sh", "-lc", "true"]).await?;
            docker_ms[i].push(ms(t));
        }
    }
    progress(&format!("cold start: {cold_runs} runs per runtime"));
    let mut cold_ms = vec![Vec::new(); apps.len()];
    for n in 0..cold_runs {
        for (i, (rt, app, _, _)) in apps.iter().enumerate() {
            let key = made.note(format!("bench-rtcold-{rt}-{}-{n}", std::process::id()));
            let t = Instant::now();
            let r = app.exec.run(&key, &request("echo ready"), true).await?;
            cold_ms[i].push(ms(t));
            if app.sessions.remove_with(&key, true).await.is_ok() {
                made.forget(&key);
            }
            if !r.text().contains("ready") {
                return Err(BenchError::Command(r.text().to_string()));
            }
        }
    }
    let mut rows = Vec::new();
    for (i, (rt, _, _, _)) in apps.iter().enumerate() {
        rows.push(RuntimeRow {
            runtime: rt.clone(),
            exec_p50_ms: percentile(&mut moat_ms[i], 0.5),
            exec_p90_ms: percentile(&mut moat_ms[i], 0.9),
            docker_exec_p50_ms: percentile(&mut docker_ms[i], 0.5),
            cold_start_p50_ms: percentile(&mut cold_ms[i], 0.5),
        });
    }
    Ok(RuntimesReport {
        runs,
        cold_runs,
        rows,
    })
}
