//! `GET /v1/sessions/{session}/events`: a session's events as server-sent events.

use std::convert::Infallible;
use std::sync::Arc;

use axum::extract::State;
use axum::response::sse::{Event, KeepAlive, Sse};
use futures::{Stream, StreamExt};
use tokio_stream::wrappers::BroadcastStream;

use super::InSession;
use crate::server::error::ApiError;
use crate::server::ServerState;

/// `GET /v1/sessions/{session}/events`: server-sent events for the session (`event: exec`,
/// `data: Exec completed (…) :: …`). A subscriber that falls behind skips old events.
pub async fn events(
    State(state): State<Arc<ServerState>>,
    InSession { session, .. }: InSession,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, ApiError> {
    let rx = state.app.registry.events().subscribe();
    // `exec.notify_on_exit = false`: a background exit is seen through `process` only
    // (docs/mcp.md, "Notifications"); approval events still flow.
    let exits = state.app.config.exec.notify_on_exit;
    let stream = BroadcastStream::new(rx).filter_map(move |ev| {
        let session = session.clone();
        async move {
            match ev {
                Ok(ev) if ev.session == session && (exits || !ev.is_background_exit()) => {
                    Some(Ok(Event::default().event("exec").data(ev.text)))
                }
                _ => None,
            }
        }
    });
    let stream = stream.take_until(state.shutdown.clone().cancelled_owned());
    Ok(Sse::new(stream).keep_alive(KeepAlive::default()))
}
