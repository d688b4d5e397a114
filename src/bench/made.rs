//! The sessions a bench run made, removed together at its end whatever its outcome: a figure
//! that fails half-way (an engine error, a refused command, a pool that would not fill) must
//! not leave its warm containers running in the operator's home.

use std::sync::Mutex;

use crate::app::App;

/// Session keys in the order they were noted. A key is noted before its first command, so a
/// command that fails while it creates the session is still covered.
#[derive(Debug, Default)]
pub(super) struct Made {
    keys: Mutex<Vec<String>>,
}

impl Made {
    /// Notes `key` (once) and returns it.
    pub(super) fn note(&self, key: String) -> String {
        let mut keys = self.keys.lock().unwrap_or_else(|p| p.into_inner());
        if !keys.contains(&key) {
            keys.push(key.clone());
        }
        key
    }

    /// Forgets `key`: the run removed it itself.
    pub(super) fn forget(&self, key: &str) {
        let mut keys = self.keys.lock().unwrap_or_else(|p| p.into_inner());
        keys.retain(|k| k != key);
    }

    /// Removes every noted session through `app` (any app over the same home can: a session is
    /// found by its key in the home's store). A session already gone is not an error.
    pub(super) async fn remove_all(&self, app: &App) {
        let keys = std::mem::take(&mut *self.keys.lock().unwrap_or_else(|p| p.into_inner()));
        for key in keys {
            if let Err(e) = app.sessions.remove_with(&key, true).await {
                tracing::warn!("failed to remove the bench's session {key}: {e}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Made;

    #[test]
    fn a_key_is_noted_once_and_forgotten_when_removed() {
        let made = Made::default();
        assert_eq!(made.note("a".into()), "a");
        made.note("b".into());
        made.note("a".into());
        made.forget("b");
        assert_eq!(*made.keys.lock().unwrap(), vec!["a".to_string()]);
    }
}
