//! The audit page: requests, decisions, elevated runs, allowlist changes and refusals, newest
//! first, filterable by session and kind (docs/console.md, "Pages").

use std::sync::Arc;

use askama::Template;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use serde::Deserialize;

use super::chrome::Chrome;
use super::error::ConsoleError;
use super::html::html;
use super::page::plain;
use super::sign_in::Operator;
use super::text::Piece;
use super::time::When;
use crate::server::ServerState;
use crate::store::{now_ms, AuditRow};

/// Entries one page shows.
pub const PAGE_ENTRIES: usize = 500;
/// Longest filter value the page accepts (a session key is at most 128).
const MAX_FILTER: usize = 128;

pub struct AuditView {
    /// When it happened.
    pub at: When,
    /// `approval-request`, `approval-decision`, `elevated-run`, `allowlist-add`, `console-refused`, …
    pub kind: String,
    /// The session it concerns, when there is one (links to that filter).
    pub session: Option<String>,
    /// The approval's 8-character slug, linking to the approvals page.
    pub approval: Option<String>,
    /// Who acted (`web:operator`, `agent:a1`, `moat`).
    pub actor: Vec<Piece>,
    /// What happened, as the audit log recorded it (agent text inside is marked).
    pub detail: Vec<Piece>,
}

#[derive(Template)]
#[template(path = "console/audit.html")]
struct AuditPage {
    chrome: Chrome,
    entries: Vec<AuditView>,
    kinds: Vec<String>,
    sessions: Vec<String>,
    /// Only entries of this kind (empty: all).
    kind: String,
    /// Only entries of this session (empty: all).
    session: String,
}

#[derive(Deserialize)]
pub struct AuditQuery {
    /// Only entries of this session (empty: all).
    #[serde(default)]
    session: String,
    /// Only entries of this kind (empty: all).
    #[serde(default)]
    kind: String,
}

pub fn audit_view(r: &AuditRow, now: i64) -> AuditView {
    AuditView {
        at: When::at(r.at_ms, now),
        kind: r.kind.clone(),
        session: r.session.clone(),
        approval: r.approval_id.as_ref().map(|a| a.chars().take(8).collect()),
        actor: plain(&r.actor),
        detail: plain(&r.detail),
    }
}

/// `GET /ui/audit[?session=…&kind=…]`.
pub async fn page(
    State(state): State<Arc<ServerState>>,
    op: Operator,
    Query(q): Query<AuditQuery>,
) -> Result<Response, ConsoleError> {
    if q.session.len() > MAX_FILTER || q.kind.len() > MAX_FILTER {
        return Err(ConsoleError::BadRequest(format!(
            "filter the audit log: a filter is at most {MAX_FILTER} bytes"
        )));
    }
    let store = &state.app.store;
    let some = |s: &str| (!s.is_empty()).then(|| s.to_string());
    let rows = store
        .audit_filtered(
            some(&q.session).as_deref(),
            some(&q.kind).as_deref(),
            PAGE_ENTRIES,
        )
        .map_err(ConsoleError::internal)?;
    let (kinds, sessions) = store.audit_facets().map_err(ConsoleError::internal)?;
    let now = now_ms();
    let page = AuditPage {
        chrome: Chrome::new(&state, &op, "Audit", "audit"),
        entries: rows.iter().map(|r| audit_view(r, now)).collect(),
        kinds,
        sessions,
        kind: q.kind,
        session: q.session,
    };
    Ok(html(StatusCode::OK, page.render()))
}
