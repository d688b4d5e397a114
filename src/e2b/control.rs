//! E2B's control plane (docs/e2b.md, "Control plane"): create, connect, kill, list, lifetime
//! and info of sandboxes, each a moat session owned by the API key that created it. Errors
//! are E2B's shape, `{"code": <status>, "message": "..."}`.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};

use super::sandboxes::{NewSandbox, Sandbox};
use super::state::E2bState;
use super::wire::{CreateRequest, TimeoutRequest};
use crate::store::{now_ms, SessionSetup};

/// The version of E2B's in-sandbox daemon moat answers as: the SDK turns features on by it
/// (docs/e2b.md, "Versions").
pub const ENVD_VERSION: &str = "0.6.4";
/// A sandbox's lifetime when `create` names none (E2B's default), seconds.
const DEFAULT_TIMEOUT_SECS: u64 = 300;
/// The most sandboxes one page of `list` holds.
const MAX_PAGE: usize = 100;

/// An error in E2B's control-plane shape.
pub struct ApiError(pub(super) StatusCode, pub(super) String);

impl ApiError {
    pub(super) fn new(status: StatusCode, message: impl Into<String>) -> Self {
        Self(status, message.into())
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = json!({ "code": self.0.as_u16(), "message": self.1 });
        (self.0, Json(body)).into_response()
    }
}

pub(super) fn owner(state: &E2bState, headers: &HeaderMap) -> Result<String, ApiError> {
    state.keys.owner(headers).map_err(|m| {
        ApiError::new(
            StatusCode::UNAUTHORIZED,
            format!("failed to identify the caller: {m}"),
        )
    })
}

/// The caller's sandbox `id`; another key's sandbox is as missing as one that never was.
pub(super) fn owned(state: &E2bState, owner: &str, id: &str) -> Result<Arc<Sandbox>, ApiError> {
    state
        .sandboxes
        .get(id)
        .filter(|s| s.owner == owner)
        .ok_or_else(|| {
            ApiError::new(
                StatusCode::NOT_FOUND,
                format!(
                    "sandbox \"{}\" not found",
                    crate::output::escape_display(&id.chars().take(64).collect::<String>())
                ),
            )
        })
}

pub(super) fn body<T: serde::de::DeserializeOwned + Default>(bytes: &Bytes) -> Result<T, ApiError> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(T::default());
    }
    serde_json::from_slice(bytes).map_err(|e| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            format!("failed to read the request body: {e}"),
        )
    })
}

pub(super) fn rfc3339(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .unwrap_or_default()
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// `Sandbox`: what create and connect answer.
pub(super) fn sandbox_json(s: &Sandbox) -> Value {
    json!({
        "templateID": s.template,
        "sandboxID": s.id,
        "clientID": s.client_id,
        "envdVersion": ENVD_VERSION,
        "envdAccessToken": s.access_token,
        "alias": s.template,
    })
}

/// `SandboxDetail` and `ListedSandbox`: `Sandbox` with its lifetime, size and state.
fn detail_json(state: &E2bState, s: &Sandbox) -> Value {
    let sandbox = &state.app.config.sandbox;
    let mut v = sandbox_json(s);
    let extra = json!({
        "startedAt": rfc3339(s.started_at_ms),
        "endAt": rfc3339(s.end_at_ms()),
        "cpuCount": sandbox.cpus.ceil().max(1.0) as u64,
        "memoryMB": sandbox.memory_bytes() / (1 << 20),
        "diskSizeMB": sandbox.workspace_max() / (1 << 20),
        "state": if s.is_paused() { "paused" } else { "running" },
        "metadata": s.metadata,
    });
    if let (Value::Object(v), Value::Object(extra)) = (&mut v, extra) {
        v.extend(extra);
    }
    v
}

/// Seconds asked for, cut to `e2b.max_timeout_secs`, as milliseconds.
pub(super) fn lifetime_ms(state: &E2bState, secs: Option<u64>) -> i64 {
    let secs = secs
        .unwrap_or(DEFAULT_TIMEOUT_SECS)
        .min(state.app.config.e2b.max_timeout());
    (secs * 1000) as i64
}

/// `POST /sandboxes`, `POST /v2/sandboxes`: a template moat maps to an image, or one of the
/// caller's snapshots (docs/e2b.md, "Snapshots and forks").
pub async fn create(
    State(state): State<Arc<E2bState>>,
    headers: HeaderMap,
    bytes: Bytes,
) -> Result<Response, ApiError> {
    let owner = owner(&state, &headers)?;
    let req: CreateRequest = body(&bytes)?;
    let config = &state.app.config;
    let template = req.template_id.unwrap_or_else(|| "base".into());
    let from = if let Some(snapshot) = state.snapshots.get(&owner, &template) {
        From {
            image: snapshot.image.clone(),
            seed: Some(snapshot.workspace.clone()),
        }
    } else if let Some(image) = config.e2b.image_of(&template) {
        From { image, seed: None }
    } else {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            format!(
                "failed to create a sandbox: template \"{}\" is not one moat knows (e2b.templates maps templates to images) nor a snapshot of this key",
                crate::output::escape_display(&template.chars().take(64).collect::<String>())
            ),
        ));
    };
    let new = NewSandbox {
        owner,
        template,
        metadata: req.metadata.unwrap_or_default(),
        env_vars: req.env_vars.unwrap_or_default(),
        now_ms: now_ms(),
        timeout_ms: lifetime_ms(&state, req.timeout),
    };
    let sandbox = start(&state, new, from).await?;
    Ok((StatusCode::CREATED, Json(sandbox_json(&sandbox))).into_response())
}

/// What a new sandbox is made from.
pub(super) struct From {
    /// Its image: a template's, or a snapshot's commit.
    pub image: String,
    /// A snapshot's copy of a workspace to start the sandbox's own disk from.
    pub seed: Option<std::path::PathBuf>,
}

/// Records and makes a sandbox (create and fork): bounded per key, refused where a secret
/// would reach it, made on a task of its own.
pub(super) async fn start(
    state: &Arc<E2bState>,
    new: NewSandbox,
    from: From,
) -> Result<Arc<Sandbox>, ApiError> {
    let config = &state.app.config;
    let max = config.e2b.per_key();
    let Some(sandbox) = state.sandboxes.add(new, max as usize) else {
        return Err(ApiError::new(
            StatusCode::TOO_MANY_REQUESTS,
            format!("failed to create a sandbox: this key holds {max} sandboxes already (e2b.max_sandboxes_per_key); kill one first"),
        ));
    };
    // E2B's output is raw bytes the SDK decodes, so moat cannot redact a secret from it: a
    // sandbox whose session a secret would reach is not made (docs/e2b.md, "Secrets").
    let secrets: Vec<String> = state
        .app
        .secrets
        .for_target(&sandbox.session, false)
        .into_iter()
        .map(|(name, _)| name)
        .collect();
    if !secrets.is_empty() {
        state.sandboxes.remove(&sandbox.id);
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            format!(
                "failed to create a sandbox: secret {} would reach it (its `sessions` pattern matches {}), and E2B's output is raw, so moat could not redact it; make the pattern leave out `e2b-*` sessions",
                secrets.join(", "),
                sandbox.session
            ),
        ));
    }
    let runtime = &config.e2b.runtime;
    let setup = SessionSetup {
        image: (from.image != config.sandbox.image).then_some(from.image),
        runtime: (!runtime.is_empty() && *runtime != config.sandbox.runtime)
            .then(|| runtime.clone()),
        // E2B's programs take root for granted (`sudo`, `user="root"`), and their files under
        // the user's home (docs/e2b.md, "Users" and "The base template").
        root: super::user::root_allowed(config),
        home: Some(crate::config::e2b::HOME.to_string()),
        ..Default::default()
    };
    // The making runs on its own task: a client that hangs up mid-create drops this handler,
    // and a making cut short would leave a container (and the key's slot) that nothing ends.
    // On its own, it either finishes (the sandbox is then listed, with its lifetime) or ends
    // what it made.
    let made = tokio::spawn(make(state.clone(), sandbox.clone(), setup, from.seed));
    match made.await {
        Ok(Ok(())) => Ok(sandbox),
        Ok(Err(e)) => Err(e),
        Err(e) => Err(ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("failed to create a sandbox: {e}"),
        )),
    }
}

/// Makes `sandbox`'s session; on failure, or when the sandbox was killed meanwhile (the
/// serving moat's end), ends what was made.
async fn make(
    state: Arc<E2bState>,
    sandbox: Arc<Sandbox>,
    setup: SessionSetup,
    seed: Option<std::path::PathBuf>,
) -> Result<(), ApiError> {
    if let Some(seed) = seed {
        if let Err(e) = super::snapshot_table::seed(&state.app, &sandbox.session, seed).await {
            state.end(&sandbox, "failed-create").await;
            return Err(ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("failed to create a sandbox from the snapshot: {e}"),
            ));
        }
    }
    if let Err(e) = state.app.sessions.create(&sandbox.session, &setup).await {
        let message = format!(
            "failed to create a sandbox: {}",
            crate::error_chain::error_chain(&e)
        );
        state.end(&sandbox, "failed-create").await;
        return Err(ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, message));
    }
    if sandbox.killed.is_cancelled() {
        // Its removal waited for the creation, but what the creation made after the removal
        // looked is removed now.
        state.end(&sandbox, "killed-during-create").await;
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "failed to create a sandbox: it was killed before it was ready",
        ));
    }
    sandbox.set_ready();
    Ok(())
}

/// `POST /sandboxes/{id}/timeout`: the lifetime from now, shorter or longer.
pub async fn set_timeout(
    State(state): State<Arc<E2bState>>,
    headers: HeaderMap,
    Path(id): Path<String>,
    bytes: Bytes,
) -> Result<StatusCode, ApiError> {
    let owner = owner(&state, &headers)?;
    let sandbox = owned(&state, &owner, &id)?;
    let req: TimeoutRequest = body(&bytes)?;
    sandbox.set_end_at_ms(now_ms() + lifetime_ms(&state, req.timeout));
    Ok(StatusCode::NO_CONTENT)
}

/// `GET /sandboxes/{id}`.
pub async fn info(
    State(state): State<Arc<E2bState>>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let owner = owner(&state, &headers)?;
    let sandbox = owned(&state, &owner, &id)?;
    Ok(Json(detail_json(&state, &sandbox)))
}

/// `DELETE /sandboxes/{id}`.
pub async fn kill(
    State(state): State<Arc<E2bState>>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    let owner = owner(&state, &headers)?;
    owned(&state, &owner, &id)?;
    // On its own task, as a create is: a client that hangs up does not cut the removal short.
    let killing = tokio::spawn({
        let (state, id) = (state.clone(), id.clone());
        async move { state.kill(&id, "kill").await }
    });
    if killing.await.unwrap_or(false) {
        Ok(StatusCode::NO_CONTENT)
    } else {
        // Killed by another call in the meantime.
        Err(ApiError::new(
            StatusCode::NOT_FOUND,
            format!("sandbox \"{id}\" not found"),
        ))
    }
}

/// `GET /v2/sandboxes` (and `GET /sandboxes`): the caller's sandboxes, filtered by metadata
/// (`metadata=k%3Dv%26k2%3Dv2`) and state, a page at a time (`limit`, `nextToken`; the next
/// page's token in `X-Next-Token`).
pub async fn list(
    State(state): State<Arc<E2bState>>,
    headers: HeaderMap,
    Query(query): Query<BTreeMap<String, String>>,
) -> Result<Response, ApiError> {
    let owner = owner(&state, &headers)?;
    let filter: Vec<(String, String)> = match query.get("metadata") {
        Some(m) => form_urlencoded::parse(m.as_bytes())
            .map(|(k, v)| (k.into_owned(), v.into_owned()))
            .collect(),
        None => Vec::new(),
    };
    // `state=running,paused`; both when none is named.
    let wants = |paused: bool| {
        let name = if paused { "paused" } else { "running" };
        query
            .get("state")
            .is_none_or(|s| s.split(',').any(|s| s.trim() == name))
    };
    let limit = match query.get("limit") {
        Some(l) => l.parse::<usize>().map_err(|_| {
            ApiError::new(
                StatusCode::BAD_REQUEST,
                format!(
                    "failed to read limit `{}`: not a number",
                    crate::output::escape_display(l)
                ),
            )
        })?,
        None => MAX_PAGE,
    }
    .clamp(1, MAX_PAGE);
    let after = query.get("nextToken").cloned().unwrap_or_default();
    let matching: Vec<Arc<Sandbox>> = state
        .sandboxes
        .of(&owner)
        .into_iter()
        .filter(|s| wants(s.is_paused()))
        .filter(|s| filter.iter().all(|(k, v)| s.metadata.get(k) == Some(v)))
        .filter(|s| s.id > after)
        .collect();
    let page: Vec<Value> = matching
        .iter()
        .take(limit)
        .map(|s| detail_json(&state, s))
        .collect();
    let mut response = Json(Value::Array(page)).into_response();
    if matching.len() > limit {
        if let Ok(v) = HeaderValue::from_str(&matching[limit - 1].id) {
            response.headers_mut().insert("x-next-token", v);
        }
    }
    Ok(response)
}
