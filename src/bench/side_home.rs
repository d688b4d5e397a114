//! Homes of the bench's own below the operator's, for figures that need a daemon or a pool
//! of their own (docs/pool.md, "Bounds and ownership").

use std::path::PathBuf;

use super::BenchError;
use crate::home::Home;

/// A home of the bench's own below `home`, with the same `moat.toml` (when there is one).
pub(super) fn side_home(home: &Home, name: &str) -> Result<Home, BenchError> {
    let dir = home
        .root()
        .join(format!("bench-{name}-{}", std::process::id()));
    let err = |e: std::io::Error| BenchError::Command(format!("make {}: {e}", dir.display()));
    std::fs::create_dir_all(&dir).map_err(err)?;
    if home.config_file().is_file() {
        std::fs::copy(home.config_file(), dir.join("moat.toml")).map_err(err)?;
    }
    Ok(Home::at(&dir))
}

/// Removes a side home; a failure is logged, not returned: the figures are already taken.
pub(super) fn remove_home(dir: PathBuf) {
    if let Err(e) = std::fs::remove_dir_all(&dir) {
        tracing::warn!("failed to remove the bench's home {}: {e}", dir.display());
    }
}
