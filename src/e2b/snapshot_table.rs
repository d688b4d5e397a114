//! The snapshots a moat holds for E2B (docs/e2b.md, "Snapshots and forks"): the table, the
//! images the engine could not remove yet, and the removal of a snapshot's parts; and the
//! seeding of a new sandbox's disk from a snapshot's copy.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use crate::app::App;
use crate::session::disk_image::{DiskError, DiskImage};

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

    /// Removes every snapshot (the serving moat's end, after its sandboxes).
    pub async fn remove_all(&self, app: &App) {
        for id in self.ids() {
            if let Some(s) = self.take(&id) {
                self.remove_parts(app, &s).await;
            }
        }
        self.retry_doomed(app).await;
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
