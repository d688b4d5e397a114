//! The E2B sandboxes this moat serves: each is a moat session (`e2b-<id>`) with what E2B's
//! API adds to it — its owner key, access token, metadata, create-time variables, lifetime,
//! and the pids of the processes started through the process service (docs/e2b.md,
//! "Sandboxes are sessions").
//!
//! The table lives in the serving moat's memory: a sandbox's container and workspace are
//! moat's, but its E2B identity ends with the daemon that served it (docs/e2b.md, "What is
//! not served").

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex};

use rand::Rng;
use tokio_util::sync::CancellationToken;

use super::wire::ProcessConfig;

/// The session key prefix of E2B sandboxes, so `moat sessions list` and the console show
/// them for what they are.
pub const SESSION_PREFIX: &str = "e2b-";

/// One process started through the process service.
#[derive(Debug, Clone)]
pub struct E2bProcess {
    /// The pid the container sees (the wrapper's process group).
    pub pid: u32,
    /// moat's process id: the registry's, the run files', `moat process list`'s.
    pub id: String,
    pub tag: Option<String>,
    pub config: ProcessConfig,
    pub pty: bool,
}

/// One sandbox.
pub struct Sandbox {
    /// E2B's sandbox id: 20 lowercase letters and digits.
    pub id: String,
    /// The moat session it is.
    pub session: String,
    /// Which API key created it: only that key sees it (a digest prefix, never the key).
    pub owner: String,
    pub template: String,
    /// Sent back as `clientID`; moat has one client, itself.
    pub client_id: String,
    /// `envdAccessToken`: every call to the sandbox's process service carries it.
    pub access_token: String,
    pub metadata: BTreeMap<String, String>,
    /// The create-time `envVars`, below each process's own `envs`.
    pub env_vars: BTreeMap<String, String>,
    pub started_at_ms: i64,
    /// When the sandbox ends unless its lifetime is changed (ms since the epoch).
    end_at_ms: AtomicI64,
    /// Started processes, newest last.
    processes: Mutex<Vec<E2bProcess>>,
    /// Cancelled when the sandbox is killed: every stream of it ends at once.
    pub killed: CancellationToken,
    /// Its session exists: until then (and once it is dying) the API does not show it.
    ready: AtomicBool,
    /// When removing its session failed, the next try (ms since the epoch): it stays in the
    /// table, counted against its key, until the removal succeeds.
    retry_at_ms: AtomicI64,
    /// Its container is frozen (E2B's pause): its own API answers as E2B's does for a paused
    /// sandbox until `connect` or `resume` thaws it (docs/e2b.md, "Pause and resume").
    paused: AtomicBool,
    /// Held across a pause or a resume, so two of them never interleave with the engine.
    pub turning: tokio::sync::Mutex<()>,
    /// Each call into the sandbox's own API holds it shared (`gate`); a snapshot holds it
    /// alone while it copies the disk, so moat writes nothing there meanwhile.
    pub writes: tokio::sync::RwLock<()>,
    /// The samples `metrics` took, oldest first, at most [`MAX_SAMPLES`].
    samples: Mutex<std::collections::VecDeque<Sample>>,
}

/// The most metric samples one sandbox keeps (an hour at one every 5 s).
pub const MAX_SAMPLES: usize = 720;

/// One metrics sample, as E2B's `SandboxMetric` reports it.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub at_ms: i64,
    pub cpu_count: u64,
    pub cpu_used_pct: f64,
    pub mem_used: u64,
    pub mem_total: u64,
    pub mem_cache: u64,
    pub disk_used: u64,
    pub disk_total: u64,
}

impl Sandbox {
    pub fn end_at_ms(&self) -> i64 {
        self.end_at_ms.load(Ordering::SeqCst)
    }

    pub fn set_end_at_ms(&self, at: i64) {
        self.end_at_ms.store(at, Ordering::SeqCst);
    }

    /// Moves the end later only (`connect` on a running sandbox never shortens it).
    pub fn extend_to(&self, at: i64) {
        self.end_at_ms.fetch_max(at, Ordering::SeqCst);
    }

    /// Records a started process, forgetting the ones `ended` says are over: the list holds
    /// what may still be asked for, not every process the sandbox ever ran.
    pub fn add_process(&self, p: E2bProcess, ended: impl Fn(&E2bProcess) -> bool) {
        let mut procs = self.processes.lock().unwrap();
        procs.retain(|q| !ended(q));
        procs.push(p);
    }

    /// Its session exists: the API may show it.
    pub fn set_ready(&self) {
        self.ready.store(true, Ordering::SeqCst);
    }

    fn visible(&self) -> bool {
        self.ready.load(Ordering::SeqCst) && !self.killed.is_cancelled()
    }

    /// Removing its session failed: try again from `at_ms` on.
    pub fn retry_removal_at(&self, at_ms: i64) {
        self.retry_at_ms.store(at_ms, Ordering::SeqCst);
    }

    pub fn is_paused(&self) -> bool {
        self.paused.load(Ordering::SeqCst)
    }

    pub fn set_paused(&self, paused: bool) {
        self.paused.store(paused, Ordering::SeqCst);
    }

    /// The newest sample, when it was taken at or after `since_ms`.
    pub fn sample_since(&self, since_ms: i64) -> Option<Sample> {
        self.samples
            .lock()
            .unwrap()
            .back()
            .filter(|s| s.at_ms >= since_ms)
            .cloned()
    }

    /// Keeps `sample`, dropping the oldest past [`MAX_SAMPLES`].
    pub fn add_sample(&self, sample: Sample) {
        let mut samples = self.samples.lock().unwrap();
        if samples.len() >= MAX_SAMPLES {
            samples.pop_front();
        }
        samples.push_back(sample);
    }

    /// The samples taken within `[from_ms, to_ms]`, oldest first.
    pub fn samples_within(&self, from_ms: i64, to_ms: i64) -> Vec<Sample> {
        self.samples
            .lock()
            .unwrap()
            .iter()
            .filter(|s| s.at_ms >= from_ms && s.at_ms <= to_ms)
            .cloned()
            .collect()
    }

    pub fn processes(&self) -> Vec<E2bProcess> {
        self.processes.lock().unwrap().clone()
    }

    /// The process a selector means: by pid, else by tag (the newest with it).
    pub fn find(&self, pid: Option<u32>, tag: Option<&str>) -> Option<E2bProcess> {
        let procs = self.processes.lock().unwrap();
        match (pid, tag) {
            (Some(pid), _) => procs.iter().rev().find(|p| p.pid == pid).cloned(),
            (None, Some(tag)) => procs
                .iter()
                .rev()
                .find(|p| p.tag.as_deref() == Some(tag))
                .cloned(),
            (None, None) => None,
        }
    }

    /// Forgets a process that ended (its pid may be reused by the container).
    pub fn forget_process(&self, id: &str) {
        self.processes.lock().unwrap().retain(|p| p.id != id);
    }
}

/// What `create` records.
pub struct NewSandbox {
    pub owner: String,
    pub template: String,
    pub metadata: BTreeMap<String, String>,
    pub env_vars: BTreeMap<String, String>,
    pub now_ms: i64,
    pub timeout_ms: i64,
}

/// See the module docs.
#[derive(Default)]
pub struct Sandboxes {
    by_id: Mutex<HashMap<String, Arc<Sandbox>>>,
}

fn random_text(len: usize, alphabet: &[u8]) -> String {
    let mut rng = rand::rng();
    (0..len)
        .map(|_| alphabet[rng.random_range(0..alphabet.len())] as char)
        .collect()
}

impl Sandboxes {
    /// Records a new sandbox under a fresh id, unless `owner` holds `max` already.
    pub fn add(&self, new: NewSandbox, max: usize) -> Option<Arc<Sandbox>> {
        let mut map = self.by_id.lock().unwrap();
        if map.values().filter(|s| s.owner == new.owner).count() >= max {
            return None;
        }
        let id = loop {
            let id = random_text(20, b"abcdefghijklmnopqrstuvwxyz0123456789");
            if !map.contains_key(&id) {
                break id;
            }
        };
        let sandbox = Arc::new(Sandbox {
            session: format!("{SESSION_PREFIX}{id}"),
            id: id.clone(),
            owner: new.owner,
            template: new.template,
            client_id: "moat".into(),
            access_token: random_text(40, b"0123456789abcdef"),
            metadata: new.metadata,
            env_vars: new.env_vars,
            started_at_ms: new.now_ms,
            end_at_ms: AtomicI64::new(new.now_ms + new.timeout_ms),
            processes: Mutex::new(Vec::new()),
            killed: CancellationToken::new(),
            ready: AtomicBool::new(false),
            retry_at_ms: AtomicI64::new(0),
            paused: AtomicBool::new(false),
            turning: tokio::sync::Mutex::new(()),
            writes: tokio::sync::RwLock::new(()),
            samples: Mutex::new(Default::default()),
        });
        map.insert(id, sandbox.clone());
        Some(sandbox)
    }

    /// A live sandbox by id: made, and not being killed.
    pub fn get(&self, id: &str) -> Option<Arc<Sandbox>> {
        self.by_id
            .lock()
            .unwrap()
            .get(id)
            .filter(|s| s.visible())
            .cloned()
    }

    /// A sandbox by id whatever its state, for its own creation and end.
    pub fn any(&self, id: &str) -> Option<Arc<Sandbox>> {
        self.by_id.lock().unwrap().get(id).cloned()
    }

    /// Puts a sandbox (back) in the table: one whose removal failed stays until it succeeds.
    pub fn keep(&self, sandbox: Arc<Sandbox>) {
        self.by_id
            .lock()
            .unwrap()
            .insert(sandbox.id.clone(), sandbox);
    }

    /// Takes a sandbox out of the table once its session is gone.
    pub fn remove(&self, id: &str) {
        self.by_id.lock().unwrap().remove(id);
    }

    /// `owner`'s sandboxes, by id.
    pub fn of(&self, owner: &str) -> Vec<Arc<Sandbox>> {
        let mut out: Vec<_> = self
            .by_id
            .lock()
            .unwrap()
            .values()
            .filter(|s| s.owner == owner && s.visible())
            .cloned()
            .collect();
        out.sort_by(|a, b| a.id.cmp(&b.id));
        out
    }

    /// The ids of sandboxes to end by `now_ms`: made, running ones whose lifetime is over,
    /// and dying ones whose removal is due for another try.
    pub fn expired(&self, now_ms: i64) -> Vec<String> {
        self.by_id
            .lock()
            .unwrap()
            .values()
            .filter(|s| {
                if s.killed.is_cancelled() {
                    s.retry_at_ms.load(Ordering::SeqCst) <= now_ms
                } else {
                    // A paused sandbox keeps until it is resumed or killed, as E2B's do;
                    // it still counts against its key.
                    s.ready.load(Ordering::SeqCst) && !s.is_paused() && s.end_at_ms() <= now_ms
                }
            })
            .map(|s| s.id.clone())
            .collect()
    }

    /// Every sandbox's id (for the end of the serving moat).
    pub fn ids(&self) -> Vec<String> {
        self.by_id.lock().unwrap().keys().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn new(owner: &str) -> NewSandbox {
        NewSandbox {
            owner: owner.into(),
            template: "base".into(),
            metadata: BTreeMap::new(),
            env_vars: BTreeMap::new(),
            now_ms: 1_000,
            timeout_ms: 5_000,
        }
    }

    #[test]
    fn owners_are_apart_bounded_and_lifetimes_only_extend_on_connect() {
        let t = Sandboxes::default();
        let a = t.add(new("a"), 2).unwrap();
        let b = t.add(new("b"), 2).unwrap();
        // Not shown until its session exists; counted against its key already.
        assert!(t.get(&a.id).is_none());
        assert!(t.of("a").is_empty());
        assert!(
            t.expired(1_000_000).is_empty(),
            "a sandbox being made never expires"
        );
        a.set_ready();
        b.set_ready();
        t.add(new("a"), 2).unwrap().set_ready();
        assert!(
            t.add(new("a"), 2).is_none(),
            "a third for a is over the bound"
        );
        assert_eq!(t.of("a").len(), 2);
        assert_eq!(t.of("b").len(), 1);
        assert_eq!(a.id.len(), 20);
        assert_eq!(a.session, format!("e2b-{}", a.id));
        assert_ne!(a.access_token, b.access_token);
        a.extend_to(2_000);
        assert_eq!(a.end_at_ms(), 6_000);
        a.set_end_at_ms(2_000);
        a.set_paused(true);
        assert!(
            t.expired(3_000).is_empty(),
            "a paused sandbox does not expire"
        );
        a.set_paused(false);
        assert_eq!(t.expired(3_000), vec![a.id.clone()]);
        let p = |pid, id: &str| E2bProcess {
            pid,
            id: id.into(),
            tag: Some("t".into()),
            config: Default::default(),
            pty: false,
        };
        a.add_process(p(6, "p0"), |_| false);
        a.add_process(p(7, "p1"), |q| q.id == "p0");
        assert_eq!(
            a.processes().len(),
            1,
            "an ended process is forgotten when another starts"
        );
        assert_eq!(a.find(Some(7), None).unwrap().id, "p1");
        assert_eq!(a.find(None, Some("t")).unwrap().id, "p1");
        assert!(a.find(Some(8), None).is_none());
        a.forget_process("p1");
        assert!(a.find(Some(7), None).is_none());
        // Dying: hidden, still counted, and due for removal at its retry time.
        a.killed.cancel();
        assert!(t.get(&a.id).is_none());
        assert!(t.any(&a.id).is_some());
        a.retry_removal_at(5_000);
        assert!(!t.expired(4_000).contains(&a.id));
        assert!(t.expired(5_000).contains(&a.id));
        assert!(t.add(new("a"), 2).is_none(), "a dying sandbox still counts");
        t.remove(&a.id);
        assert!(t.any(&a.id).is_none());
    }

    #[test]
    fn samples_are_bounded_and_found_by_time() {
        let t = Sandboxes::default();
        let a = t.add(new("a"), 1).unwrap();
        let at = |at_ms| Sample {
            at_ms,
            cpu_count: 1,
            cpu_used_pct: 0.0,
            mem_used: 0,
            mem_total: 0,
            mem_cache: 0,
            disk_used: 0,
            disk_total: 0,
        };
        for i in 0..(MAX_SAMPLES as i64 + 10) {
            a.add_sample(at(i * 1000));
        }
        let all = a.samples_within(i64::MIN, i64::MAX);
        assert_eq!(all.len(), MAX_SAMPLES, "the oldest go first");
        assert_eq!(all[0].at_ms, 10_000);
        assert_eq!(
            a.samples_within(12_000, 13_000).len(),
            2,
            "both ends included"
        );
        assert!(a.sample_since(MAX_SAMPLES as i64 * 1000 + 9_000).is_some());
        assert!(a.sample_since(MAX_SAMPLES as i64 * 1000 + 9_001).is_none());
    }
}
