//! `GET /v1/pool`: the warm pool as the daemon holds it, for `moat sessions list --pool` and
//! `moat doctor` (docs/pool.md, "Seeing the pool"). Operators only: the pool spans every
//! session of the home.

use std::sync::Arc;

use axum::extract::State;
use axum::Json;
use serde_json::{json, Value};

use super::Who;
use crate::server::error::ApiError;
use crate::server::ServerState;

/// Each shape (its image named even when it is the configured one), what is ready of it and
/// how its claims went, and the new sessions no shape fits.
pub async fn status(
    State(state): State<Arc<ServerState>>,
    Who(who): Who,
) -> Result<Json<Value>, ApiError> {
    who.require_operator()?;
    let app = &state.app;
    let status = app.sessions.pool_status().await;
    let shapes: Vec<Value> = status
        .shapes
        .into_iter()
        .map(|s| {
            json!({
                "shape": s.shape,
                "image": s.image.clone().unwrap_or_else(|| app.config.sandbox.image.clone()),
                "configuredImage": s.image.is_none(),
                "size": s.want,
                "ready": s.ready,
                "hits": s.hits,
                "misses": s.misses,
                "failing": s.failing,
            })
        })
        .collect();
    Ok(Json(json!({
        "shapes": shapes,
        "unkeptMisses": status.unkept_misses,
    })))
}
