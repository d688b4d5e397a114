//! The E2B sandboxes this moat serves: each is a moat session (`e2b-<id>`) with what E2B's
//! API adds to it — its owner key, access token, metadata, create-time variables, lifetime,
//! and the pids of the processes started through the process service (docs/e2b.md,
//! "Sandboxes are sessions").
//!
//! The table lives in the serving moat's memory: a sandbox's container and workspace are
//! moat's, but its E2B identity ends with the daemon that served it (docs/e2b.md, "What is
//! not served").

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicI64, Ordering};
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

    pub fn add_process(&self, p: E2bProcess) {
        self.processes.lock().unwrap().push(p);
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
        });
        map.insert(id, sandbox.clone());
        Some(sandbox)
    }

    /// A live sandbox by id.
    pub fn get(&self, id: &str) -> Option<Arc<Sandbox>> {
        self.by_id.lock().unwrap().get(id).cloned()
    }

    /// Takes a sandbox out of the table (it is being killed); `None` when it is not there.
    pub fn take(&self, id: &str) -> Option<Arc<Sandbox>> {
        self.by_id.lock().unwrap().remove(id)
    }

    /// `owner`'s sandboxes, by id.
    pub fn of(&self, owner: &str) -> Vec<Arc<Sandbox>> {
        let mut out: Vec<_> = self
            .by_id
            .lock()
            .unwrap()
            .values()
            .filter(|s| s.owner == owner)
            .cloned()
            .collect();
        out.sort_by(|a, b| a.id.cmp(&b.id));
        out
    }

    /// The ids of sandboxes whose lifetime ended by `now_ms`.
    pub fn expired(&self, now_ms: i64) -> Vec<String> {
        self.by_id
            .lock()
            .unwrap()
            .values()
            .filter(|s| s.end_at_ms() <= now_ms)
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
        assert!(t.add(new("a"), 2).is_some());
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
        assert_eq!(t.expired(3_000), vec![a.id.clone()]);
        a.add_process(E2bProcess {
            pid: 7,
            id: "p1".into(),
            tag: Some("t".into()),
            config: Default::default(),
            pty: false,
        });
        assert_eq!(a.find(Some(7), None).unwrap().id, "p1");
        assert_eq!(a.find(None, Some("t")).unwrap().id, "p1");
        assert!(a.find(Some(8), None).is_none());
        a.forget_process("p1");
        assert!(a.find(Some(7), None).is_none());
        assert!(t.take(&a.id).is_some());
        assert!(t.get(&a.id).is_none());
    }
}
