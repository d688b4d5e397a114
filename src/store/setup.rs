//! What a session was created with (`moat sessions create NAME --workspace DIR`, `moat run
//! --image … --network …`): chosen once, when the session is created, and kept until the
//! session is removed (docs/security.md, "Host workspaces").

use rusqlite::{params, OptionalExtension};

use super::error::SqlContext;
use super::{Store, StoreError};

/// The host directory a session's `/workspace` is, as recorded when the session was created.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkspaceRow {
    /// The directory, resolved (no symlink left) when it was checked, so the container
    /// mounts what was checked.
    pub path: String,
    /// Mounted read-only: the sandbox and the file tools may read but not write it.
    pub read_only: bool,
    /// `uid:gid` the container runs as: the directory's owner when it was created (or
    /// `sandbox.user` when set), so files made inside belong to whoever owns the checkout.
    pub user: String,
    /// The operator let the sandbox write the checkout's git metadata (`--git-writable`).
    /// Off, `.git` is mounted read-only, because git on the host runs hooks and config found
    /// there (docs/security.md, "Host workspaces").
    pub git_writable: bool,
}

impl WorkspaceRow {
    /// `user` as numbers (it was made from numbers, or from the validated `sandbox.user`).
    pub fn owner(&self) -> Option<(u32, u32)> {
        let (uid, gid) = self
            .user
            .split_once(':')
            .unwrap_or((&self.user, &self.user));
        Some((uid.parse().ok()?, gid.parse().ok()?))
    }
}

/// A session's own choices over the configuration; `None` fields follow `moat.toml`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SessionSetup {
    /// A host directory as `/workspace` instead of the default one under the home.
    pub workspace: Option<WorkspaceRow>,
    /// The image instead of `sandbox.image`.
    pub image: Option<String>,
    /// The network mode instead of `sandbox.network` (`none` or `bridge`).
    pub network: Option<String>,
    /// The engine runtime instead of `sandbox.runtime` (`runsc` for E2B's sandboxes when
    /// `e2b.runtime` says so, docs/e2b.md, "Sandboxes are sessions").
    pub runtime: Option<String>,
    /// The sandbox may become root (`sudo`, commands as uid 0): E2B's sandboxes, whose
    /// programs take root for granted (docs/e2b.md, "Users"; docs/security.md, "Root inside
    /// E2B's sandboxes").
    pub root: bool,
    /// A second place the workspace is mounted inside the container (E2B's `/home/user`).
    pub home: Option<String>,
}

impl SessionSetup {
    /// Nothing chosen: the session is the configuration's.
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }
}

/// A `session_setup` row read from column 0: workspace, read_only, user, image, network,
/// git_writable, runtime, root, home.
fn setup_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<SessionSetup> {
    setup_row_at(r, 0)
}

/// [`setup_row`] from column `at` on.
fn setup_row_at(r: &rusqlite::Row<'_>, at: usize) -> rusqlite::Result<SessionSetup> {
    let path: Option<String> = r.get(at)?;
    let user: Option<String> = r.get(at + 2)?;
    let workspace = match (path, user) {
        (Some(path), Some(user)) => Some(WorkspaceRow {
            path,
            read_only: r.get(at + 1)?,
            user,
            git_writable: r.get(at + 5)?,
        }),
        _ => None,
    };
    Ok(SessionSetup {
        workspace,
        image: r.get(at + 3)?,
        network: r.get(at + 4)?,
        runtime: r.get(at + 6)?,
        root: r.get(at + 7)?,
        home: r.get(at + 8)?,
    })
}

impl Store {
    /// Records `key`'s setup, unless it already has one: returns the one in force.
    pub fn claim_session_setup(
        &self,
        key: &str,
        setup: &SessionSetup,
    ) -> Result<SessionSetup, StoreError> {
        let ws = setup.workspace.as_ref();
        self.conn()
            .execute(
                "INSERT INTO session_setup (key, workspace, read_only, user, image, network,
                                            git_writable, runtime, root, home)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)
                 ON CONFLICT(key) DO NOTHING",
                params![
                    key,
                    ws.map(|w| &w.path),
                    ws.is_some_and(|w| w.read_only),
                    ws.map(|w| &w.user),
                    setup.image,
                    setup.network,
                    ws.is_some_and(|w| w.git_writable),
                    setup.runtime,
                    setup.root,
                    setup.home,
                ],
            )
            .ctx("record session setup")?;
        Ok(self.session_setup(key)?.unwrap_or_else(|| setup.clone()))
    }

    pub fn session_setup(&self, key: &str) -> Result<Option<SessionSetup>, StoreError> {
        self.query_row_cached(
            "SELECT workspace, read_only, user, image, network, git_writable, runtime, root, home
                 FROM session_setup WHERE key = ?1",
            [key],
            setup_row,
        )
        .optional()
        .ctx("read session setup")
    }

    /// Every session recorded with a host workspace, with it: running, stopped or not made
    /// yet, each will be mounted again when its container starts, so a sandbox can write
    /// every one that is not read-only (docs/security.md, "Directories a sandbox can write").
    pub fn host_workspaces(&self) -> Result<Vec<(String, WorkspaceRow)>, StoreError> {
        let conn = self.conn();
        let mut stmt = conn
            .prepare(
                "SELECT key, workspace, read_only, user, image, network, git_writable, runtime, root, home
                 FROM session_setup WHERE workspace IS NOT NULL ORDER BY key",
            )
            .ctx("list host workspaces")?;
        let rows = stmt
            .query_map([], |r| {
                let key: String = r.get(0)?;
                let setup = setup_row_at(r, 1)?;
                Ok((key, setup.workspace))
            })
            .ctx("list host workspaces")?;
        let mut out = Vec::new();
        for row in rows {
            if let (key, Some(ws)) = row.ctx("read a host workspace")? {
                out.push((key, ws));
            }
        }
        Ok(out)
    }

    /// The host workspace recorded for `key`, if any.
    pub fn session_workspace(&self, key: &str) -> Result<Option<WorkspaceRow>, StoreError> {
        Ok(self.session_setup(key)?.and_then(|s| s.workspace))
    }

    pub fn forget_session_setup(&self, key: &str) -> Result<(), StoreError> {
        self.conn()
            .execute("DELETE FROM session_setup WHERE key = ?1", [key])
            .ctx("forget session setup")?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_setup_stays() {
        let s = Store::in_memory().unwrap();
        let a = SessionSetup {
            workspace: Some(WorkspaceRow {
                path: "/srv/a".into(),
                read_only: false,
                user: "1000:1000".into(),
                git_writable: true,
            }),
            image: None,
            network: Some("bridge".into()),
            runtime: None,
            root: false,
            home: None,
        };
        let b = SessionSetup {
            workspace: None,
            image: Some("img:1".into()),
            network: None,
            runtime: Some("runsc".into()),
            root: true,
            home: Some("/home/user".into()),
        };
        assert_eq!(s.claim_session_setup("k", &a).unwrap(), a);
        assert_eq!(s.claim_session_setup("k", &b).unwrap(), a);
        assert_eq!(s.session_workspace("k").unwrap(), a.workspace);
        s.claim_session_setup("other", &b).unwrap();
        assert_eq!(
            s.host_workspaces().unwrap(),
            vec![("k".to_string(), a.workspace.clone().unwrap())]
        );
        s.forget_session_setup("k").unwrap();
        assert_eq!(s.session_setup("k").unwrap(), None);
        assert_eq!(s.claim_session_setup("k", &b).unwrap(), b);
        assert_eq!(
            s.session_setup("k").unwrap().unwrap().runtime.as_deref(),
            Some("runsc")
        );
        assert_eq!(s.session_workspace("k").unwrap(), None);
        let w = |user: &str| WorkspaceRow {
            path: "/w".into(),
            read_only: false,
            user: user.into(),
            git_writable: false,
        };
        assert_eq!(w("2000:3000").owner(), Some((2000, 3000)));
        assert_eq!(w("1234").owner(), Some((1234, 1234)));
        assert_eq!(w("x:1").owner(), None);
    }
}
