//! E2B's snapshots and forks (docs/e2b.md, "Snapshots and forks"), the calls: a snapshot is the
//! sandbox's own filesystem layer committed to an image plus a copy of its workspace's disk,
//! both taken while the sandbox is frozen; a sandbox created from it (or a fork) starts from
//! that image with a disk of its own made from the copy.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use rand::Rng;
use serde::Deserialize;
use serde_json::{json, Value};

use super::control::{body, lifetime_ms, owned, owner, sandbox_json, start, ApiError, From};
use super::sandboxes::{NewSandbox, Sandbox};
use super::snapshot_table::{Snapshot, DIR, IMAGE_LABEL, IMAGE_REPO};
use super::state::E2bState;
use crate::session::disk_image::DiskImage;
use crate::store::now_ms;

/// The prefix of snapshot ids: a create's `templateID` names one.
pub const ID_PREFIX: &str = "snapshot-";
/// The most snapshots one key holds: each is an image and a disk's worth of copy.
pub const MAX_PER_KEY: usize = 16;
/// The most sandboxes one fork makes.
pub const MAX_FORKS: u32 = 16;
/// The longest snapshot name.
const MAX_NAME: usize = 128;
/// The most snapshots one page of a listing holds.
const MAX_PAGE: usize = 100;

fn new_id() -> String {
    let mut rng = rand::rng();
    let tail: String = (0..20)
        .map(|_| b"abcdefghijklmnopqrstuvwxyz0123456789"[rng.random_range(0..36)] as char)
        .collect();
    format!("{ID_PREFIX}{tail}")
}

fn fail(what: &str, e: impl std::fmt::Display) -> ApiError {
    ApiError::new(
        StatusCode::INTERNAL_SERVER_ERROR,
        format!("failed to {what}: {e}"),
    )
}

/// Takes a snapshot of `sandbox`: frozen (if it runs) while its layer is committed and its
/// disk copied, then thawed.
async fn take(
    state: &E2bState,
    sandbox: &Sandbox,
    names: Vec<String>,
    listed: bool,
) -> Result<Arc<Snapshot>, ApiError> {
    let Some(_place) = state.snapshots.reserve(&sandbox.owner, MAX_PER_KEY) else {
        return Err(ApiError::new(
            StatusCode::TOO_MANY_REQUESTS,
            format!("failed to snapshot the sandbox: this key holds {MAX_PER_KEY} snapshots already; delete one first"),
        ));
    };
    let (key, names_of) = state.app.sessions.names(&sandbox.session);
    // A session that claimed a warm container keeps its disk under the slot's name.
    let slug = state
        .app
        .sessions
        .disk_slug(&key, &names_of)
        .map_err(|e| fail("snapshot the sandbox", e))?;
    let disk = DiskImage::new(state.app.home.root(), &slug);
    if !disk.exists() {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "failed to snapshot the sandbox: its workspace is a directory of the host, not a disk of its own (sandbox.disk_bound = \"image\" gives it one), and moat copies only disks",
        ));
    }
    let id = new_id();
    let dir = state.app.home.root().join(DIR);
    std::fs::create_dir_all(&dir)
        .and_then(|()| {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700))
        })
        .map_err(|e| fail("snapshot the sandbox", e))?;
    let snapshot = Arc::new(Snapshot {
        image: format!("{IMAGE_REPO}:{}", &id[ID_PREFIX.len()..]),
        workspace: dir.join(format!("{id}.ext4")),
        id,
        owner: sandbox.owner.clone(),
        names,
        sandbox_id: sandbox.id.clone(),
        listed,
    });
    let container = names_of.name;
    let engine = &state.app.engine;
    let _turning = sandbox.turning.lock().await;
    // moat's own writes into the home (uploads, the filesystem service) wait for the copy:
    // a frozen container is not a quiet disk while moat writes to it (`gate`).
    let _quiet = sandbox.writes.write().await;
    let frozen_here = !sandbox.is_paused();
    if frozen_here {
        engine
            .pause_container(&container)
            .await
            .map_err(|e| fail("snapshot the sandbox", e))?;
    }
    let labels = BTreeMap::from([(
        IMAGE_LABEL.to_string(),
        state.app.home.root().display().to_string(),
    )]);
    let committed = engine
        .commit_container(&container, &snapshot.image, &labels)
        .await
        .map_err(|e| fail("snapshot the sandbox", e));
    let copied = match committed {
        Ok(()) => {
            let to = snapshot.workspace.clone();
            tokio::task::spawn_blocking(move || disk.copy_workspace(&to))
                .await
                .map_err(|e| fail("snapshot the sandbox", e))
                .and_then(|r| r.map_err(|e| fail("snapshot the sandbox", e)))
        }
        Err(e) => Err(e),
    };
    if frozen_here {
        if let Err(e) = engine.unpause_container(&container).await {
            tracing::warn!(sandbox = %sandbox.id, "failed to thaw the sandbox after its snapshot: {e}");
        }
    }
    if let Err(e) = copied {
        state.snapshots.remove_parts(&state.app, &snapshot).await;
        return Err(e);
    }
    state.snapshots.insert(snapshot.clone());
    Ok(snapshot)
}

/// `SnapshotInfo`.
fn snapshot_json(s: &Snapshot) -> Value {
    json!({ "snapshotID": s.id, "names": s.names })
}

/// The body of `create_snapshot`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct SnapshotRequest {
    pub name: Option<String>,
}

/// `POST /sandboxes/{id}/snapshots`: 201 with the snapshot's id and names.
pub async fn create_snapshot(
    State(state): State<Arc<E2bState>>,
    headers: HeaderMap,
    Path(id): Path<String>,
    bytes: Bytes,
) -> Result<Response, ApiError> {
    let owner = owner(&state, &headers)?;
    let sandbox = owned(&state, &owner, &id)?;
    let req: SnapshotRequest = body(&bytes)?;
    let names = match req.name {
        None => Vec::new(),
        Some(n) if n.is_empty() || n.len() > MAX_NAME || n.chars().any(char::is_control) => {
            return Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                format!("failed to snapshot the sandbox: a snapshot name is 1 to {MAX_NAME} bytes without control characters"),
            ))
        }
        Some(n) => vec![n],
    };
    // On a task of its own, as a create is: a client that hangs up mid-copy would otherwise
    // cut it short with its parts made, unrecorded, and the sandbox left frozen.
    let taken = tokio::spawn({
        let state = state.clone();
        async move { take(&state, &sandbox, names, true).await }
    });
    let snapshot = taken.await.map_err(|e| fail("snapshot the sandbox", e))??;
    Ok((StatusCode::CREATED, Json(snapshot_json(&snapshot))).into_response())
}

/// The query of `list_snapshots`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct ListQuery {
    #[serde(rename = "sandboxID")]
    pub sandbox_id: Option<String>,
    pub name: Option<String>,
    pub limit: Option<usize>,
    #[serde(rename = "nextToken")]
    pub next_token: Option<String>,
}

/// `GET /snapshots`: the caller's snapshots, by sandbox and name, a page at a time.
pub async fn list_snapshots(
    State(state): State<Arc<E2bState>>,
    headers: HeaderMap,
    Query(query): Query<ListQuery>,
) -> Result<Response, ApiError> {
    let owner = owner(&state, &headers)?;
    let limit = query.limit.unwrap_or(MAX_PAGE).clamp(1, MAX_PAGE);
    let after = query.next_token.unwrap_or_default();
    let matching: Vec<Arc<Snapshot>> = state
        .snapshots
        .listed_of(&owner)
        .into_iter()
        .filter(|s| {
            query
                .sandbox_id
                .as_ref()
                .is_none_or(|id| &s.sandbox_id == id)
        })
        .filter(|s| query.name.as_ref().is_none_or(|n| s.names.contains(n)))
        .filter(|s| s.id > after)
        .collect();
    let page: Vec<Value> = matching
        .iter()
        .take(limit)
        .map(|s| snapshot_json(s))
        .collect();
    let mut response = Json(Value::Array(page)).into_response();
    if matching.len() > limit {
        if let Ok(v) = HeaderValue::from_str(&matching[limit - 1].id) {
            response.headers_mut().insert("x-next-token", v);
        }
    }
    Ok(response)
}

/// `DELETE /templates/{id}`: a snapshot of the caller's (204); anything else is not found
/// (404), the operator's templates included.
pub async fn delete_template(
    State(state): State<Arc<E2bState>>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    let owner = owner(&state, &headers)?;
    let Some(snapshot) = state
        .snapshots
        .get(&owner, &id)
        .filter(|s| s.listed)
        .and_then(|s| state.snapshots.take(&s.id))
    else {
        return Err(ApiError::new(
            StatusCode::NOT_FOUND,
            format!(
                "template \"{}\" not found",
                crate::output::escape_display(&id.chars().take(64).collect::<String>())
            ),
        ));
    };
    state.snapshots.remove_parts(&state.app, &snapshot).await;
    Ok(StatusCode::NO_CONTENT)
}

/// The body of `fork`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct ForkRequest {
    pub timeout: Option<u64>,
    pub count: Option<u32>,
}

/// `POST /sandboxes/{id}/fork`: `count` new sandboxes from one snapshot of this one, each with
/// its own copy of the disk; 201 with a result per fork (a sandbox, or the error that kept it
/// from starting). The snapshot itself is not kept.
pub async fn fork(
    State(state): State<Arc<E2bState>>,
    headers: HeaderMap,
    Path(id): Path<String>,
    bytes: Bytes,
) -> Result<Response, ApiError> {
    let owner = owner(&state, &headers)?;
    let sandbox = owned(&state, &owner, &id)?;
    let req: ForkRequest = body(&bytes)?;
    let count = req.count.unwrap_or(1);
    if !(1..=MAX_FORKS).contains(&count) {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            format!("failed to fork the sandbox: count is 1 to {MAX_FORKS}, not {count}"),
        ));
    }
    // On a task of its own, as a create is (see `create_snapshot`).
    let forked = tokio::spawn(fork_from(state.clone(), sandbox, owner, count, req.timeout));
    let results = forked.await.map_err(|e| fail("fork the sandbox", e))??;
    Ok((StatusCode::CREATED, Json(Value::Array(results))).into_response())
}

/// `count` sandboxes from one snapshot of `sandbox`, which is then deleted.
async fn fork_from(
    state: Arc<E2bState>,
    sandbox: Arc<Sandbox>,
    owner: String,
    count: u32,
    timeout: Option<u64>,
) -> Result<Vec<Value>, ApiError> {
    let snapshot = take(&state, &sandbox, Vec::new(), false).await?;
    let mut results = Vec::new();
    for _ in 0..count {
        let new = NewSandbox {
            owner: owner.clone(),
            template: sandbox.template.clone(),
            metadata: sandbox.metadata.clone(),
            env_vars: sandbox.env_vars.clone(),
            now_ms: now_ms(),
            timeout_ms: lifetime_ms(&state, timeout),
        };
        let from = From {
            image: snapshot.image.clone(),
            seed: Some(snapshot.workspace.clone()),
        };
        results.push(match start(&state, new, from).await {
            Ok(fork) => json!({ "sandbox": sandbox_json(&fork) }),
            Err(ApiError(status, message)) => {
                json!({ "error": { "code": status.as_u16(), "message": message } })
            }
        });
    }
    if let Some(s) = state.snapshots.take(&snapshot.id) {
        state.snapshots.remove_parts(&state.app, &s).await;
    }
    Ok(results)
}
