//! Every series `/metrics` serves, and the registry they are encoded from
//! (docs/http-api.md, "Metrics").
//!
//! One set per process: the daemon runs one `App`, and the layers that count (the exec tool,
//! the supervisor, the session manager, the egress gate) reach it through [`metrics`] rather
//! than through every constructor between the app and them. A process that opens several apps
//! (tests, `moat bench`) adds them up. Labels come from fixed sets, never from a request, so
//! no caller can grow the series. Gauges of what is held now (pending approvals, running
//! processes, resident memory, descriptors) are read when scraped.

use std::sync::LazyLock;

use prometheus_client::encoding::prometheus_text;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::{Registry, Unit};

/// The `Content-Type` of the answer: the Prometheus text format, version 0.0.4.
pub const CONTENT_TYPE: &str = prometheus_text::CONTENT_TYPE;

/// One label and its value, both from a fixed set.
type Label = [(&'static str, &'static str); 1];

/// What a scrape reads from the app: what is held now.
#[derive(Debug, Clone, Copy, Default)]
pub struct Scrape {
    /// Approvals waiting for an operator's decision, in this home.
    pub pending_approvals: u64,
    /// Processes this daemon supervises that have not ended.
    pub running_processes: u64,
}

/// See the module docs.
pub struct Metrics {
    /// What `encode` writes; every handle below is registered in it.
    registry: Registry,
    /// Exec calls by outcome (`exec_outcome`).
    execs: Family<Label, Counter>,
    /// A foreground command's start to its recorded end, by the transport that ran it.
    exec_seconds: Family<Label, Histogram, fn() -> Histogram>,
    /// Session containers started: `created` (made and started) or `restarted` (an existing,
    /// stopped one started again).
    sandbox_starts: Family<Label, Counter>,
    /// How long a created container took to be made and started (its setup command aside).
    sandbox_start_seconds: Histogram,
    /// Connections the egress proxies reported ended, by decision (`allow` or the refusal).
    egress_connections: Family<Label, Counter>,
    /// Bytes through the egress proxies, `up` (the sandbox sent) and `down`.
    egress_bytes: Family<Label, Counter>,
    /// Warm-pool claims by result: `hit` (a pool container was handed over) or `miss` (the
    /// session's shape was not pooled, or none was ready: it started as before).
    pool_claims: Family<Label, Counter>,
    /// How long a hit took, from the ask to the container being the session's.
    pool_claim_seconds: Histogram,
    /// Warm containers ready now, by shape (its config hash: the shapes come from the
    /// configuration, so the set is bounded).
    pool_ready: Family<[(&'static str, String); 1], Gauge>,
    pending_approvals: Gauge,
    running_processes: Gauge,
    resident_bytes: Gauge,
    open_fds: Gauge,
}

/// This process's series.
pub fn metrics() -> &'static Metrics {
    static METRICS: LazyLock<Metrics> = LazyLock::new(Metrics::new);
    &METRICS
}

/// Latency buckets: 1 ms doubling to about 33 s (an in-process `true` is 5 ms, a cold start
/// 150 ms, docs/helper.md).
fn latency_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.001, 2.0, 16))
}

/// The refusal tags an egress proxy reports (`egress::control::ConnectionRecord::decision`);
/// anything else counts as `other`.
const EGRESS_DECISIONS: &[&str] = &[
    "allow",
    "not-allowed",
    "denied",
    "ip-literal",
    "internal-address",
    "ask",
    "unresolved",
    "unreachable",
    "no-daemon",
];

impl Metrics {
    fn new() -> Self {
        let m = Self {
            registry: Registry::default(),
            execs: Family::default(),
            exec_seconds: Family::new_with_constructor(latency_histogram),
            sandbox_starts: Family::default(),
            sandbox_start_seconds: latency_histogram(),
            egress_connections: Family::default(),
            egress_bytes: Family::default(),
            pool_claims: Family::default(),
            pool_claim_seconds: latency_histogram(),
            pool_ready: Family::default(),
            pending_approvals: Gauge::default(),
            running_processes: Gauge::default(),
            resident_bytes: Gauge::default(),
            open_fds: Gauge::default(),
        };
        let mut r = Registry::default();
        r.register(
            "moat_execs",
            "Exec calls by outcome: completed, failed, timed_out, limit, background, approval_pending, denied, not_started, invalid, refused, error",
            m.execs.clone(),
        );
        r.register_with_unit(
            "moat_exec_duration",
            "From a foreground command's start to its recorded end, by the transport that ran it: helper, exec (one engine exec), host",
            Unit::Seconds,
            m.exec_seconds.clone(),
        );
        r.register(
            "moat_sandbox_starts",
            "Session containers started: created, or restarted (an existing, stopped one)",
            m.sandbox_starts.clone(),
        );
        r.register_with_unit(
            "moat_sandbox_start_duration",
            "How long a created session container took to be made and started",
            Unit::Seconds,
            m.sandbox_start_seconds.clone(),
        );
        r.register(
            "moat_pool_claims",
            "Warm-pool claims by result: hit (a warm container was handed over) or miss (the session started a container)",
            m.pool_claims.clone(),
        );
        r.register_with_unit(
            "moat_pool_claim_duration",
            "How long a warm-pool hit took, from the ask to the container being the session's",
            Unit::Seconds,
            m.pool_claim_seconds.clone(),
        );
        r.register(
            "moat_pool_ready",
            "Warm containers ready now, by shape (its config hash)",
            m.pool_ready.clone(),
        );
        r.register(
            "moat_approvals_pending",
            "Approvals waiting for an operator's decision",
            m.pending_approvals.clone(),
        );
        r.register(
            "moat_processes_running",
            "Processes this daemon supervises that have not ended",
            m.running_processes.clone(),
        );
        r.register(
            "moat_egress_connections",
            "Connections the sessions' egress proxies reported, by decision: allow or the refusal",
            m.egress_connections.clone(),
        );
        r.register_with_unit(
            "moat_egress",
            "Bytes through the sessions' egress proxies: up (sent by the sandbox) and down",
            Unit::Bytes,
            m.egress_bytes.clone(),
        );
        r.register_with_unit(
            "process_resident_memory",
            "Resident memory of the daemon",
            Unit::Bytes,
            m.resident_bytes.clone(),
        );
        r.register(
            "process_open_fds",
            "Open file descriptors of the daemon",
            m.open_fds.clone(),
        );
        Self { registry: r, ..m }
    }

    /// An exec call ended with `outcome` (`exec_outcome`).
    pub fn exec_ended(&self, outcome: &'static str) {
        self.execs.get_or_create(&[("outcome", outcome)]).inc();
    }

    /// A foreground command ended `seconds` after it started, run by `transport`.
    pub fn exec_took(&self, transport: &'static str, seconds: f64) {
        self.exec_seconds
            .get_or_create(&[("transport", transport)])
            .observe(seconds);
    }

    /// A session container was made and started in `seconds`.
    pub fn sandbox_created(&self, seconds: f64) {
        self.sandbox_starts
            .get_or_create(&[("kind", "created")])
            .inc();
        self.sandbox_start_seconds.observe(seconds);
    }

    /// An existing, stopped session container was started again.
    pub fn sandbox_restarted(&self) {
        self.sandbox_starts
            .get_or_create(&[("kind", "restarted")])
            .inc();
    }

    /// A new session's container was claimed from the warm pool in `seconds`.
    pub fn pool_hit(&self, seconds: f64) {
        self.pool_claims.get_or_create(&[("result", "hit")]).inc();
        self.pool_claim_seconds.observe(seconds);
    }

    /// A new session could not claim a warm container and started one.
    pub fn pool_miss(&self) {
        self.pool_claims.get_or_create(&[("result", "miss")]).inc();
    }

    /// `ready` warm containers of `shape` are ready now.
    pub fn pool_ready(&self, shape: &str, ready: usize) {
        self.pool_ready
            .get_or_create(&[("shape", shape.to_string())])
            .set(i64::try_from(ready).unwrap_or(i64::MAX));
    }

    /// An egress proxy reported a connection: its decision and the bytes each way.
    pub fn egress_connection(&self, decision: &str, up: u64, down: u64) {
        let decision = EGRESS_DECISIONS
            .iter()
            .find(|d| **d == decision)
            .copied()
            .unwrap_or("other");
        self.egress_connections
            .get_or_create(&[("decision", decision)])
            .inc();
        self.egress_bytes
            .get_or_create(&[("direction", "up")])
            .inc_by(up);
        self.egress_bytes
            .get_or_create(&[("direction", "down")])
            .inc_by(down);
    }

    /// Every series in the Prometheus text format, with what is held now read first.
    pub fn encode(&self, now: Scrape) -> Result<String, std::fmt::Error> {
        let gauge = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
        self.pending_approvals.set(gauge(now.pending_approvals));
        self.running_processes.set(gauge(now.running_processes));
        self.resident_bytes
            .set(gauge(super::this_process::resident_bytes()));
        self.open_fds.set(gauge(super::this_process::open_fds()));
        let mut out = String::new();
        prometheus_text::encode(&mut out, &self.registry)?;
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The names and types as docs/http-api.md lists them; counts a fresh set moves.
    #[test]
    fn the_series_are_named_and_typed_as_documented() {
        let m = Metrics::new();
        m.exec_ended("completed");
        m.exec_ended("completed");
        m.exec_took("helper", 0.004);
        m.sandbox_created(0.15);
        m.sandbox_restarted();
        m.egress_connection("allow", 10, 20);
        m.egress_connection("made-up", 1, 2);
        m.pool_hit(0.02);
        m.pool_miss();
        m.pool_ready("0123abcd", 2);
        let text = m
            .encode(Scrape {
                pending_approvals: 2,
                running_processes: 1,
            })
            .unwrap();
        for line in [
            "# TYPE moat_execs_total counter",
            "moat_execs_total{outcome=\"completed\"} 2",
            "# TYPE moat_exec_duration_seconds histogram",
            "moat_exec_duration_seconds_bucket{transport=\"helper\",le=\"0.004\"} 1",
            "moat_exec_duration_seconds_count{transport=\"helper\"} 1",
            "moat_sandbox_starts_total{kind=\"created\"} 1",
            "moat_sandbox_starts_total{kind=\"restarted\"} 1",
            "moat_sandbox_start_duration_seconds_count 1",
            "moat_approvals_pending 2",
            "moat_processes_running 1",
            "moat_egress_connections_total{decision=\"allow\"} 1",
            "moat_egress_connections_total{decision=\"other\"} 1",
            "moat_egress_bytes_total{direction=\"up\"} 11",
            "moat_egress_bytes_total{direction=\"down\"} 22",
            "moat_pool_claims_total{result=\"hit\"} 1",
            "moat_pool_claims_total{result=\"miss\"} 1",
            "moat_pool_claim_duration_seconds_count 1",
            "moat_pool_ready{shape=\"0123abcd\"} 2",
            "# TYPE process_resident_memory_bytes gauge",
            "# TYPE process_open_fds gauge",
        ] {
            assert!(
                text.lines().any(|l| l == line),
                "{line} missing from:\n{text}"
            );
        }
    }
}
