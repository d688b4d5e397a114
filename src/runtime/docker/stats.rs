//! One sample of a container's CPU and memory use from the engine's stats, for E2B's metrics
//! (docs/e2b.md, "Metrics").

use bollard::models::ContainerStatsResponse;
use bollard::query_parameters::StatsOptions;
use futures::StreamExt;

use super::DockerRuntime;
use crate::runtime::{ContainerStats, RuntimeError};

impl DockerRuntime {
    /// One sample; not `one_shot`, so the engine fills in the previous CPU reading (it waits
    /// a second for it) and the CPU figure is a rate, not a total.
    pub(super) async fn stats(&self, name: &str) -> Result<ContainerStats, RuntimeError> {
        let options = StatsOptions {
            stream: false,
            one_shot: false,
        };
        let mut samples = self.docker.stats(name, Some(options));
        match samples.next().await {
            Some(Ok(s)) => Ok(sample(&s)),
            Some(Err(e)) => Err(RuntimeError::engine(format!("read the stats of {name}"), e)),
            None => Err(RuntimeError::Other {
                action: format!("read the stats of {name}"),
                message: "the engine answered no sample".into(),
            }),
        }
    }
}

/// The engine's sample in E2B's terms: memory without the page cache (cgroup v2 reports it
/// as `inactive_file`, v1 as `total_inactive_file`, as `docker stats` subtracts it), CPU as
/// the CLI computes it.
fn sample(s: &ContainerStatsResponse) -> ContainerStats {
    let cpu = s.cpu_stats.as_ref();
    let pre = s.precpu_stats.as_ref();
    let total = |c: Option<&bollard::models::ContainerCpuStats>| {
        c.and_then(|c| c.cpu_usage.as_ref())
            .and_then(|u| u.total_usage)
            .unwrap_or(0)
    };
    let system = |c: Option<&bollard::models::ContainerCpuStats>| {
        c.and_then(|c| c.system_cpu_usage).unwrap_or(0)
    };
    let cpu_delta = total(cpu).saturating_sub(total(pre)) as f64;
    let system_delta = system(cpu).saturating_sub(system(pre)) as f64;
    let online = cpu.and_then(|c| c.online_cpus).unwrap_or(1).max(1) as f64;
    let cpu_pct = if system_delta > 0.0 {
        cpu_delta / system_delta * online * 100.0
    } else {
        0.0
    };
    let memory = s.memory_stats.as_ref();
    let stat = |key: &str| {
        memory
            .and_then(|m| m.stats.as_ref())
            .and_then(|m| m.get(key).copied())
    };
    let usage = memory.and_then(|m| m.usage).unwrap_or(0);
    let cache = stat("inactive_file")
        .or_else(|| stat("total_inactive_file"))
        .unwrap_or(0);
    ContainerStats {
        cpu_pct,
        mem_used: usage.saturating_sub(cache),
        mem_total: memory.and_then(|m| m.limit).unwrap_or(0),
        mem_cache: stat("file").or_else(|| stat("cache")).unwrap_or(cache),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bollard::models::{ContainerCpuStats, ContainerCpuUsage, ContainerMemoryStats};

    fn cpu(total: u64, system: u64) -> ContainerCpuStats {
        ContainerCpuStats {
            cpu_usage: Some(ContainerCpuUsage {
                total_usage: Some(total),
                ..Default::default()
            }),
            system_cpu_usage: Some(system),
            online_cpus: Some(2),
            ..Default::default()
        }
    }

    #[test]
    fn cpu_is_a_rate_and_memory_leaves_out_the_cache() {
        let s = ContainerStatsResponse {
            cpu_stats: Some(cpu(1_500, 10_000)),
            precpu_stats: Some(cpu(1_000, 9_000)),
            memory_stats: Some(ContainerMemoryStats {
                usage: Some(100),
                limit: Some(1000),
                stats: Some([("inactive_file".to_string(), 30), ("file".to_string(), 40)].into()),
                ..Default::default()
            }),
            ..Default::default()
        };
        let got = sample(&s);
        // 500 of 1000 system ticks over 2 CPUs: one CPU's worth.
        assert_eq!(got.cpu_pct, 100.0);
        assert_eq!((got.mem_used, got.mem_total, got.mem_cache), (70, 1000, 40));
    }

    #[test]
    fn a_first_sample_without_a_previous_reading_is_idle_not_a_division_by_zero() {
        let s = ContainerStatsResponse {
            cpu_stats: Some(cpu(1_500, 10_000)),
            precpu_stats: None,
            ..Default::default()
        };
        // The whole total over the whole system time: a number, not NaN or infinity.
        assert!(sample(&s).cpu_pct.is_finite());
    }
}
