//! `moat bench`'s CLI path: `moat exec --session S -- true` through its daemon, a process per
//! command as a user runs it, against `docker exec CONTAINER sh -lc true`, interleaved; between
//! them the very call the CLI makes, sent from this process on the daemon's socket, which tells
//! the daemon's share (and the container's) from the CLI process's.
//!
//! The CLI's daemon serves a home of its own below the bench's (`bench-cli-PID`), stopped and
//! removed at the end whatever the outcome.

use std::time::Instant;

use serde::Serialize;

use super::quiet::{docker, quiet};
use super::samples::{ms, percentile, request};
use super::side_home::{remove_home, side_home};
use super::BenchError;
use crate::home::Home;

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

impl CliPath {
    pub fn render(&self) -> String {
        format!(
            "CLI path (`true`, {} runs each, interleaved)\n  moat exec CLI (daemon)  p50 {:7.2} ms  p90 {:7.2} ms\n  same call, no process   p50 {:7.2} ms  p90 {:7.2} ms\n  docker exec CLI         p50 {:7.2} ms\n  ratio (p50)  {:.3}\n",
            self.runs, self.moat_cli_p50_ms, self.moat_cli_p90_ms, self.socket_call_p50_ms,
            self.socket_call_p90_ms, self.docker_exec_p50_ms, self.ratio,
        )
    }
}

/// The CLI row: `moat exec --session S -- true` as a user runs it, a process each, through a
/// daemon of a home of its own, interleaved with `docker exec CONTAINER sh -lc true` into
/// `container` (a warm container of the same image and limits).
pub(super) async fn cli_path(
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
            docker(&["exec", container, "sh", "-lc", "true"]).await?;
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
