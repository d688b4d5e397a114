//! The warm pool's owner task (docs/pool.md): it alone holds the ready containers of each
//! shape, hands one over per claim, and fills back up in the background, one container at a
//! time. Callers talk to it through a channel ([`PoolHandle`]); how a container is made and
//! thrown away is the [`Filler`]'s (`pool_slot.rs`, over the session manager).

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::{mpsc, oneshot};

/// How long the pool waits after a fill failed before it tries that again: a missing image or
/// a full disk is not fixed by retrying at once, and each try costs a container start.
pub const RETRY_AFTER: Duration = Duration::from_secs(10);

/// One kind of container the pool keeps warm.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shape {
    /// The container's config hash (`spec::config_hash` of its sandbox): a claim asks for it.
    pub hash: String,
    /// The image, when not the configured one (`[pool.images]`).
    pub image: Option<String>,
    /// How many to keep ready.
    pub want: usize,
}

/// A warm container, ready to be claimed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Slot {
    /// The slot's own key: what the container's labels carry for ever, and what its
    /// directories and disk are named by.
    pub key: String,
    /// The container's name while it waits.
    pub name: String,
    /// The container's id (a claim renames it; the id stays).
    pub id: String,
    /// Its shape's hash.
    pub shape: String,
    /// Its `/workspace` and `/run/moat` are its own filesystem (`disk_image`).
    pub disk: bool,
}

/// What the pool shows of one shape (`moat sessions list --pool`, `moat doctor`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ShapeStatus {
    /// The shape's config hash, as `dev.moat.pool` labels its containers.
    pub shape: String,
    /// The image, when not the configured one.
    pub image: Option<String>,
    /// How many it keeps ready (its `[pool]` size).
    pub want: usize,
    /// The ready containers' names.
    pub ready: Vec<String>,
    /// The last fill's failure, while the pool waits to try again.
    pub failing: Option<String>,
    /// New sessions of this shape that were handed a warm container.
    pub hits: u64,
    /// New sessions of this shape that started a container instead: none was ready, the
    /// key's earlier life left something, or the handover failed (docs/pool.md, "Shapes").
    pub misses: u64,
}

/// What the pool shows as a whole: each shape, and the new sessions no shape fits.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct PoolStatus {
    /// Each kept shape, in the order of `[pool]`.
    pub shapes: Vec<ShapeStatus>,
    /// New sessions whose settings hash to no kept shape (another image, network or
    /// runtime): they always start a container, and this says how often.
    pub unkept_misses: u64,
}

/// Claims counted by shape; kept beside the owner task so counting never waits on it.
#[derive(Debug, Default)]
struct Tally {
    /// Hits and misses by shape hash.
    by_shape: HashMap<String, (u64, u64)>,
    /// Misses of shapes the pool does not keep.
    unkept: u64,
}

/// Makes and throws away pool containers.
#[async_trait]
pub trait Filler: Send + Sync + 'static {
    /// Makes one ready container of `shape`: created, started, hardened, helper running.
    async fn fill(&self, shape: &Shape) -> Result<Slot, String>;
    /// Removes a container that will never be claimed, with its directories.
    async fn discard(&self, slot: Slot);
}

enum Cmd {
    Claim {
        shape: String,
        reply: oneshot::Sender<Option<Slot>>,
    },
    Status {
        reply: oneshot::Sender<Vec<ShapeStatus>>,
    },
    Drain {
        reply: oneshot::Sender<()>,
    },
}

/// The way to the owner task.
pub struct PoolHandle {
    /// Requests to the owner task.
    tx: mpsc::Sender<Cmd>,
    /// The shapes it keeps, by hash: a claim for another shape misses without asking.
    shapes: Vec<String>,
    /// Hits and misses so far (a std mutex: never held across `.await`).
    tally: std::sync::Mutex<Tally>,
}

impl PoolHandle {
    /// Starts the owner task over `shapes`, with `adopted` containers already ready.
    pub fn start(shapes: Vec<Shape>, adopted: Vec<Slot>, filler: Arc<dyn Filler>) -> Self {
        let (tx, rx) = mpsc::channel(64);
        let hashes = shapes.iter().map(|s| s.hash.clone()).collect();
        let mut owner = Owner {
            shapes,
            ready: HashMap::new(),
            failing: HashMap::new(),
            filler,
        };
        for slot in adopted {
            owner
                .ready
                .entry(slot.shape.clone())
                .or_default()
                .push_back(slot);
        }
        tokio::spawn(owner.run(rx));
        Self {
            tx,
            shapes: hashes,
            tally: Default::default(),
        }
    }

    /// Counts a new session's claim of `shape`: `hit` when it was handed a warm container.
    /// A shape the pool does not keep counts as an unkept miss.
    pub fn count(&self, shape: &str, hit: bool) {
        let mut tally = self.tally.lock().unwrap_or_else(|e| e.into_inner());
        if !self.keeps(shape) {
            tally.unkept += 1;
            return;
        }
        let (hits, misses) = tally.by_shape.entry(shape.to_string()).or_default();
        if hit {
            *hits += 1;
        } else {
            *misses += 1;
        }
    }

    /// Whether the pool keeps containers of `shape` at all.
    pub fn keeps(&self, shape: &str) -> bool {
        self.shapes.iter().any(|s| s == shape)
    }

    /// A ready container of `shape`, taken out of the pool for good; `None` when none is
    /// ready (or the pool has stopped).
    pub async fn claim(&self, shape: &str) -> Option<Slot> {
        if !self.keeps(shape) {
            return None;
        }
        let (reply, rx) = oneshot::channel();
        let cmd = Cmd::Claim {
            shape: shape.to_string(),
            reply,
        };
        self.tx.send(cmd).await.ok()?;
        rx.await.ok().flatten()
    }

    /// Each shape, what is ready of it and how its claims went.
    pub async fn status(&self) -> PoolStatus {
        let (reply, rx) = oneshot::channel();
        let mut shapes = if self.tx.send(Cmd::Status { reply }).await.is_ok() {
            rx.await.unwrap_or_default()
        } else {
            Vec::new()
        };
        let tally = self.tally.lock().unwrap_or_else(|e| e.into_inner());
        for s in &mut shapes {
            (s.hits, s.misses) = tally.by_shape.get(&s.shape).copied().unwrap_or_default();
        }
        PoolStatus {
            shapes,
            unkept_misses: tally.unkept,
        }
    }

    /// Removes every ready container (waiting for a fill under way) and stops the task: the
    /// daemon's last act, so nothing of the pool outlives it.
    pub async fn drain(&self) {
        let (reply, rx) = oneshot::channel();
        if self.tx.send(Cmd::Drain { reply }).await.is_ok() {
            let _ = rx.await;
        }
    }
}

/// The owner task's state; only [`Owner::run`] touches it.
struct Owner {
    shapes: Vec<Shape>,
    /// Ready containers by shape hash, oldest first.
    ready: HashMap<String, VecDeque<Slot>>,
    /// Shapes whose last fill failed: the failure, and when to try again.
    failing: HashMap<String, (String, tokio::time::Instant)>,
    filler: Arc<dyn Filler>,
}

impl Owner {
    async fn run(mut self, mut rx: mpsc::Receiver<Cmd>) {
        let (done_tx, mut done_rx) = mpsc::channel::<(String, Result<Slot, String>)>(1);
        let mut filling = false;
        self.publish();
        loop {
            if !filling {
                if let Some(shape) = self.next_to_fill() {
                    filling = true;
                    let (filler, done) = (self.filler.clone(), done_tx.clone());
                    tokio::spawn(async move {
                        let made = filler.fill(&shape).await;
                        let _ = done.send((shape.hash, made)).await;
                    });
                }
            }
            let wake = self.next_retry();
            tokio::select! {
                cmd = rx.recv() => match cmd {
                    Some(Cmd::Claim { shape, reply }) => {
                        let slot = self.ready.get_mut(&shape).and_then(VecDeque::pop_front);
                        let _ = reply.send(slot);
                        self.publish();
                    }
                    Some(Cmd::Status { reply }) => {
                        let _ = reply.send(self.status());
                    }
                    Some(Cmd::Drain { reply }) => {
                        if filling {
                            if let Some((_, Ok(slot))) = done_rx.recv().await {
                                self.filler.discard(slot).await;
                            }
                        }
                        self.discard_all().await;
                        let _ = reply.send(());
                        return;
                    }
                    None => {
                        // Every handle is gone: the same as a drain nobody waits for.
                        if filling {
                            if let Some((_, Ok(slot))) = done_rx.recv().await {
                                self.filler.discard(slot).await;
                            }
                        }
                        self.discard_all().await;
                        return;
                    }
                },
                Some((shape, made)) = done_rx.recv() => {
                    filling = false;
                    match made {
                        Ok(slot) => {
                            self.failing.remove(&shape);
                            self.ready.entry(shape).or_default().push_back(slot);
                            self.publish();
                        }
                        Err(e) => {
                            tracing::warn!(%shape, "failed to fill the warm pool: {e}");
                            let at = tokio::time::Instant::now() + RETRY_AFTER;
                            self.failing.insert(shape, (e, at));
                        }
                    }
                }
                _ = sleep_until(wake) => {}
            }
        }
    }

    /// The first shape short of its want and not waiting after a failure.
    fn next_to_fill(&self) -> Option<Shape> {
        let now = tokio::time::Instant::now();
        self.shapes
            .iter()
            .find(|s| {
                let have = self.ready.get(&s.hash).map_or(0, VecDeque::len);
                let waiting = self.failing.get(&s.hash).is_some_and(|(_, at)| *at > now);
                have < s.want && !waiting
            })
            .cloned()
    }

    /// When the earliest failed shape may be tried again.
    fn next_retry(&self) -> Option<tokio::time::Instant> {
        let now = tokio::time::Instant::now();
        self.failing
            .values()
            .map(|(_, at)| *at)
            .filter(|at| *at > now)
            .min()
    }

    fn status(&self) -> Vec<ShapeStatus> {
        self.shapes
            .iter()
            .map(|s| ShapeStatus {
                shape: s.hash.clone(),
                image: s.image.clone(),
                want: s.want,
                ready: self
                    .ready
                    .get(&s.hash)
                    .map(|q| q.iter().map(|slot| slot.name.clone()).collect())
                    .unwrap_or_default(),
                failing: self.failing.get(&s.hash).map(|(e, _)| e.clone()),
                hits: 0,
                misses: 0,
            })
            .collect()
    }

    /// The ready counts into `/metrics`.
    fn publish(&self) {
        for s in &self.shapes {
            let n = self.ready.get(&s.hash).map_or(0, VecDeque::len);
            crate::metrics::metrics().pool_ready(&s.hash, n);
        }
    }

    async fn discard_all(&mut self) {
        for (_, queue) in self.ready.drain() {
            for slot in queue {
                self.filler.discard(slot).await;
            }
        }
        self.publish();
    }
}

async fn sleep_until(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
