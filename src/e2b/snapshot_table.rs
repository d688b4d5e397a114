//! The snapshots a moat holds for E2B (docs/e2b.md, "Snapshots and forks"): the table, the
//! images the engine could not remove yet, and the removal of a snapshot's parts; and the
//! seeding of a new sandbox's disk from a snapshot's copy.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use crate::app::App;
use crate::session::disk_image::{DiskError, DiskImage};

/// The repository of snapshot images.
pub const IMAGE_REPO: &str = "moat-e2b-snapshot";
/// The label on snapshot images: the moat home that made them.
pub const IMAGE_LABEL: &str = "dev.moat.e2b-snapshot";
/// The directory of workspace copies in the moat home (0700).
pub const DIR: &str = "e2b-snapshots";

/// One snapshot.
#[derive(Debug)]
pub struct Snapshot {
    pub id: String,
    /// The key that took it: only that key lists, uses or deletes it.
    pub owner: String,
    /// The names it was given (`create_snapshot(name=…)`).
    pub names: Vec<String>,
    /// The sandbox it was taken of.
    pub sandbox_id: String,
    /// The committed image, `moat-e2b-snapshot:<id>`.
    pub image: String,
    /// The copy of the workspace's disk.
    pub workspace: PathBuf,
    /// False for a fork's own snapshot, which no listing shows.
    pub listed: bool,
}

/// The snapshots this moat holds, and the images of deleted ones that containers still use.
#[derive(Default)]
pub struct Snapshots {
    by_id: Mutex<BTreeMap<String, Arc<Snapshot>>>,
    /// Snapshots being taken, per key: they count against the bound from before their commit,
    /// so requests at once cannot pass it.
    pending: Mutex<BTreeMap<String, usize>>,
    /// Images the engine refused to remove while a container used them: tried again when a
    /// sandbox ends and at the serving moat's end.
    doomed: Mutex<Vec<String>>,
}

impl Snapshots {
    /// `owner`'s snapshot `id`.
    pub fn get(&self, owner: &str, id: &str) -> Option<Arc<Snapshot>> {
        self.by_id
            .lock()
            .unwrap()
            .get(id)
            .filter(|s| s.owner == owner)
            .cloned()
    }

    /// Holds one of `owner`'s `max` places for a snapshot being taken, unless all are taken
    /// (listed, hidden or being taken); the place is given back when the reservation drops.
    pub fn reserve(self: &Arc<Self>, owner: &str, max: usize) -> Option<Reservation> {
        let by_id = self.by_id.lock().unwrap();
        let mut pending = self.pending.lock().unwrap();
        let held = by_id.values().filter(|s| s.owner == owner).count()
            + pending.get(owner).copied().unwrap_or(0);
        if held >= max {
            return None;
        }
        *pending.entry(owner.to_string()).or_default() += 1;
        Some(Reservation {
            table: self.clone(),
            owner: owner.to_string(),
        })
    }

    pub fn count_of(&self, owner: &str) -> usize {
        self.by_id
            .lock()
            .unwrap()
            .values()
            .filter(|s| s.owner == owner)
            .count()
    }

    pub fn insert(&self, s: Arc<Snapshot>) {
        self.by_id.lock().unwrap().insert(s.id.clone(), s);
    }

    pub fn take(&self, id: &str) -> Option<Arc<Snapshot>> {
        self.by_id.lock().unwrap().remove(id)
    }

    pub fn listed_of(&self, owner: &str) -> Vec<Arc<Snapshot>> {
        self.by_id
            .lock()
            .unwrap()
            .values()
            .filter(|s| s.owner == owner && s.listed)
            .cloned()
            .collect()
    }

    pub fn ids(&self) -> Vec<String> {
        self.by_id.lock().unwrap().keys().cloned().collect()
    }
}

/// A place held for a snapshot being taken.
pub struct Reservation {
    table: Arc<Snapshots>,
    owner: String,
}

impl Drop for Reservation {
    fn drop(&mut self) {
        let mut pending = self.table.pending.lock().unwrap();
        if let Some(n) = pending.get_mut(&self.owner) {
            *n -= 1;
            if *n == 0 {
                pending.remove(&self.owner);
            }
        }
    }
}

impl Snapshots {
    /// Removes a snapshot's copy and image; an image a container still uses is removed later.
    pub async fn remove_parts(&self, app: &App, snapshot: &Snapshot) {
        let _ = std::fs::remove_file(&snapshot.workspace);
        let _ = std::fs::remove_file(snapshot.workspace.with_extension("partial"));
        if app
            .engine
            .image_exists(&snapshot.image)
            .await
            .unwrap_or(false)
            && app.engine.remove_image(&snapshot.image).await.is_err()
        {
            self.doomed.lock().unwrap().push(snapshot.image.clone());
        }
    }

    /// Tries again to remove the images of deleted snapshots (a sandbox that used one ended).
    pub async fn retry_doomed(&self, app: &App) {
        let doomed = std::mem::take(&mut *self.doomed.lock().unwrap());
        for image in doomed {
            if app.engine.image_exists(&image).await.unwrap_or(false)
                && app.engine.remove_image(&image).await.is_err()
            {
                self.doomed.lock().unwrap().push(image);
            }
        }
    }

    /// Removes every snapshot (the serving moat's end, after its sandboxes), and what no
    /// snapshot of the table owns.
    pub async fn remove_all(&self, app: &App) {
        for id in self.ids() {
            if let Some(s) = self.take(&id) {
                self.remove_parts(app, &s).await;
            }
        }
        self.retry_doomed(app).await;
        self.sweep(app).await;
    }

    /// Removes the copies and images of this home that no snapshot of the table owns: what
    /// an earlier daemon left when it was killed, or a snapshot cut short left. Run at the
    /// serving moat's start and end.
    pub async fn sweep(&self, app: &App) {
        let known: Vec<(PathBuf, String)> = self
            .by_id
            .lock()
            .unwrap()
            .values()
            .map(|s| (s.workspace.clone(), s.image.clone()))
            .collect();
        let dir = app.home.root().join(DIR);
        if let Ok(entries) = std::fs::read_dir(&dir) {
            for e in entries.flatten() {
                let path = e.path();
                if !known.iter().any(|(w, _)| *w == path) {
                    let _ = std::fs::remove_file(&path);
                }
            }
        }
        let label = format!("{IMAGE_LABEL}={}", app.home.root().display());
        for image in app.engine.images_labelled(&label).await.unwrap_or_default() {
            if !known.iter().any(|(_, i)| *i == image)
                && app.engine.remove_image(&image).await.is_err()
            {
                self.doomed.lock().unwrap().push(image);
            }
        }
    }
}

/// Makes `seed` (a snapshot's copy) the workspace disk of `session`, before its session is
/// made.
pub async fn seed(app: &App, session: &str, seed: PathBuf) -> Result<(), DiskError> {
    let (_, names) = app.sessions.names(session);
    let disk = DiskImage::new(app.home.root(), &names.slug);
    tokio::task::spawn_blocking(move || disk.seed_workspace(&seed))
        .await
        .map_err(|e| DiskError::Io {
            path: PathBuf::from(session),
            source: std::io::Error::other(e),
        })?
}
