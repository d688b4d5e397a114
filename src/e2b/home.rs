//! A sandbox's home on the host, as the filesystem service and `/files` reach it (docs/e2b.md,
//! "Files"): the session's workspace opened through moat's confined file layer
//! (`files::Workspace`, never a host path by name), the container's names for owners and
//! groups, and what a refusal of the confined layer answers over E2B's API.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::http::StatusCode;
use nix::errno::Errno;

use super::connect::{Code, RpcError};
use super::entry::Names;
use super::paths::PathError;
use super::sandboxes::Sandbox;
use super::state::E2bState;
use super::user::User;
use crate::files::{ConfineError, Workspace};

/// The homes' shared parts: the container's names, asked once per sandbox.
#[derive(Default)]
pub struct Homes {
    /// Names by sandbox id; entries of sandboxes that are gone are dropped as others come.
    names: Mutex<HashMap<String, Arc<Names>>>,
}

/// A refusal, as the filesystem service (its Connect code) and `/files` (its HTTP status)
/// answer it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub code: Code,
    pub status: StatusCode,
    pub message: String,
}

impl Refusal {
    pub fn new(code: Code, message: impl Into<String>) -> Self {
        Self {
            code,
            status: code.http(),
            message: message.into(),
        }
    }

    pub fn rpc(self) -> RpcError {
        RpcError::new(self.code, self.message)
    }
}

impl Home {
    /// Where `path` is beneath the home, `~` and relative paths taken from the user's home.
    pub fn resolve(&self, path: &str) -> Result<super::paths::HomePath, Refusal> {
        Ok(super::paths::resolve_for(path, self.user.home())?)
    }
}

/// Who a files call acts as, from its `Authorization: Basic` header (docs/e2b.md, "Users"):
/// a header that cannot be read is `invalid_argument`, a user moat does not offer is refused
/// as [`user_named`] says.
pub fn user_of_call(
    headers: &axum::http::HeaderMap,
    config: &crate::config::Config,
) -> Result<User, super::connect::RpcError> {
    let name = super::auth::basic_user(headers).map_err(|m| {
        super::connect::RpcError::new(
            super::connect::Code::InvalidArgument,
            format!("failed to read the user: {m}"),
        )
    })?;
    user_named(name.as_deref(), config).map_err(Refusal::rpc)
}

/// The user a call names (`None`: none), as E2B refuses any other: `unauthenticated`,
/// `invalid username`; root only where this moat offers it (`user::root_allowed`).
pub fn user_named(name: Option<&str>, config: &crate::config::Config) -> Result<User, Refusal> {
    let user = User::named(name).map_err(|m| {
        Refusal::new(
            Code::Unauthenticated,
            format!("failed to act as the user: {m}"),
        )
    })?;
    if user == User::Root && !super::user::root_allowed(config) {
        return Err(Refusal::new(
            Code::PermissionDenied,
            "failed to act as root: this moat runs E2B's sandboxes under gVisor (runsc), where it offers no root (docs/e2b.md, \"Users\")",
        ));
    }
    Ok(user)
}

impl From<PathError> for Refusal {
    fn from(e: PathError) -> Self {
        let code = match e {
            PathError::Outside(_) => Code::PermissionDenied,
            _ => Code::InvalidArgument,
        };
        Refusal::new(code, format!("failed to {e}"))
    }
}

impl From<ConfineError> for Refusal {
    fn from(e: ConfineError) -> Self {
        let message = match &e {
            ConfineError::Escapes { path } => format!(
                "failed to use path `{path}`: it leads out of the user's home through `..` or a symbolic link; moat serves files beneath the home only (docs/e2b.md, \"Files\")"
            ),
            e => format!("failed to {}", crate::error_chain::error_chain(e)),
        };
        let (code, status) = match &e {
            ConfineError::Missing { .. } => (Code::NotFound, StatusCode::NOT_FOUND),
            ConfineError::Escapes { .. } | ConfineError::ReadOnlyPart { .. } => {
                (Code::PermissionDenied, StatusCode::FORBIDDEN)
            }
            ConfineError::TooLarge { .. } => {
                (Code::ResourceExhausted, StatusCode::PAYLOAD_TOO_LARGE)
            }
            // No errno: what was read was not what it claimed (a broken gzip stream), or the
            // upload broke off.
            ConfineError::Io { source, .. } if source.raw_os_error().is_none() => {
                (Code::InvalidArgument, StatusCode::BAD_REQUEST)
            }
            ConfineError::Io { source, .. } => match source.raw_os_error().map(Errno::from_raw) {
                Some(Errno::ENOSPC | Errno::EDQUOT) => {
                    (Code::ResourceExhausted, StatusCode::INSUFFICIENT_STORAGE)
                }
                Some(Errno::EEXIST) => (Code::AlreadyExists, StatusCode::CONFLICT),
                Some(Errno::ENOENT) => (Code::NotFound, StatusCode::NOT_FOUND),
                Some(
                    Errno::EINVAL
                    | Errno::ENOTEMPTY
                    | Errno::EISDIR
                    | Errno::ENOTDIR
                    | Errno::ENAMETOOLONG
                    | Errno::EXDEV
                    | Errno::ELOOP,
                ) => (Code::InvalidArgument, StatusCode::BAD_REQUEST),
                Some(Errno::EACCES | Errno::EPERM | Errno::EROFS) => {
                    (Code::PermissionDenied, StatusCode::FORBIDDEN)
                }
                _ => (Code::Internal, StatusCode::INTERNAL_SERVER_ERROR),
            },
            ConfineError::Root { .. } => (Code::Unavailable, StatusCode::SERVICE_UNAVAILABLE),
            _ => (Code::InvalidArgument, StatusCode::BAD_REQUEST),
        };
        Refusal {
            code,
            status,
            message,
        }
    }
}

/// A sandbox's home, opened for a user.
pub struct Home {
    /// The workspace; what it makes belongs to the user the call acts as.
    pub ws: Workspace,
    /// Who the call acts as: whose home `~` and relative paths mean.
    pub user: User,
    /// The container, for its names.
    container: String,
}

impl Homes {
    /// Opens `sandbox`'s home for `user`: what it makes is the user's (root's, or the
    /// sandbox user's). `write`: refused when the sandbox sees any of it read-only, since moat
    /// writing on the host would get round the mount.
    pub async fn open(
        &self,
        state: &E2bState,
        sandbox: &Sandbox,
        user: User,
        write: bool,
    ) -> Result<Home, Refusal> {
        let container = state
            .app
            .sessions
            .ensure(&sandbox.session)
            .await
            .map_err(|e| {
                Refusal::new(
                    Code::Unavailable,
                    format!(
                        "failed to reach the sandbox: {}",
                        crate::error_chain::error_chain(&e)
                    ),
                )
            })?;
        if write
            && (container.read_only
                || !container.read_only_parts.is_empty()
                || state.app.config.sandbox.workspace_access == crate::config::WorkspaceAccess::Ro)
        {
            return Err(Refusal::new(
                Code::PermissionDenied,
                "failed to write: the sandbox sees its workspace (or part of it) read-only",
            ));
        }
        let owner = match user {
            User::Sandbox => container.owner,
            User::Root => (0, 0),
        };
        let ws = Workspace::open(&container.workspace, owner).map_err(Refusal::from)?;
        Ok(Home {
            ws,
            user,
            container: container.name,
        })
    }

    /// The container's names for users and groups (its `/etc/passwd` and `/etc/group`, read
    /// in the container), asked once per sandbox; numbers stand in for names it cannot give.
    pub async fn names(&self, state: &E2bState, sandbox: &Sandbox, home: &Home) -> Arc<Names> {
        if let Some(n) = self.names.lock().unwrap().get(&sandbox.id) {
            return n.clone();
        }
        let commands = state.app.sessions.commands();
        let read = |table: &'static str| async move {
            let argv = vec!["cat".to_string(), format!("/etc/{table}")];
            match commands.exec_capture(&home.container, argv, None).await {
                Ok((0, text)) => String::from_utf8_lossy(&text).into_owned(),
                _ => String::new(),
            }
        };
        let names = Arc::new(Names::parse(&read("passwd").await, &read("group").await));
        let mut map = self.names.lock().unwrap();
        map.retain(|id, _| state.sandboxes.any(id).is_some());
        map.insert(sandbox.id.clone(), names.clone());
        names
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_carry_connects_code_and_the_files_status() {
        let r = Refusal::from(ConfineError::Missing { path: "a".into() });
        assert_eq!((r.code, r.status), (Code::NotFound, StatusCode::NOT_FOUND));
        let r = Refusal::from(ConfineError::Escapes { path: "l/x".into() });
        assert_eq!(r.code, Code::PermissionDenied);
        assert!(
            r.message.contains("leads out of the user's home"),
            "{}",
            r.message
        );
        let io = |e: Errno| ConfineError::Io {
            action: "write",
            path: "a".into(),
            source: std::io::Error::from(e),
        };
        assert_eq!(Refusal::from(io(Errno::ENOSPC)).status.as_u16(), 507);
        assert_eq!(
            Refusal::from(io(Errno::ENOTEMPTY)).code,
            Code::InvalidArgument
        );
        assert_eq!(Refusal::from(io(Errno::EIO)).code, Code::Internal);
        let r = Refusal::from(ConfineError::IsDir { path: "d".into() });
        assert_eq!(r.status, StatusCode::BAD_REQUEST);
        let r = Refusal::from(PathError::Outside("/etc".into()));
        assert_eq!(r.code, Code::PermissionDenied);
        assert!(
            r.message.starts_with("failed to use path `/etc`"),
            "{}",
            r.message
        );
    }
}
