//! The approvals page: the pending queue first, each with the whole bound plan and the reason
//! it waits; decided and expired ones below, filterable; and the decisions themselves, with a
//! second confirmation for allow-always that names what it allowlists for good
//! (docs/console.md, "Pages").

use std::sync::Arc;

use askama::Template;
use axum::extract::rejection::FormRejection;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use axum::Form;
use serde::Deserialize;

use super::chrome::Chrome;
use super::error::ConsoleError;
use super::html::html;
use super::page::{command, form, plain, see_other};
use super::sign_in::Operator;
use super::text::{has_hidden, Piece};
use super::time::When;
use crate::approvals::{ApprovalDecision, Approvals, Binding, Decider, PersistEntry};
use crate::contract::ApprovalTarget;
use crate::server::ServerState;
use crate::store::{now_ms, ApprovalRow, ApprovalStatus, RecordedDecision};

/// Statuses the lower list can be narrowed to.
pub const FILTERS: &[&str] = &["all", "approved", "used", "denied", "expired"];
/// Longest approval id a path may carry (a UUID is 36).
const MAX_ID: usize = 64;

/// One segment of a bound plan.
pub struct SegmentView {
    /// Each word after quote removal, as the program receives it.
    pub argv: Vec<Vec<Piece>>,
    /// The executable that runs (after unwrapping wrappers), if the parser resolved one.
    pub resolved: Option<Vec<Piece>>,
}

/// A file the plan runs, bound by content.
pub struct FileView {
    /// The word as the command wrote it (`./run.sh`).
    pub operand: Vec<Piece>,
    /// The absolute path it was read from.
    pub path: Vec<Piece>,
    pub sha256: String,
    /// Size in bytes: a tiny or huge file is a hint worth seeing.
    pub size: u64,
}

/// One entry allow-always would add to the allowlist for good.
pub struct EntryView {
    /// `host` or `sandbox`: the machine the entry is for.
    pub target: &'static str,
    /// The executable path (or glob), or for an exact-command entry the command.
    pub entry: Vec<Piece>,
    /// For an exact-command entry, where it holds: the session and working directory.
    pub scope: Option<(Vec<Piece>, Vec<Piece>)>,
}

/// One approval as the page shows it.
pub struct ApprovalView {
    /// The full id: forms and links name it, never a prefix that could match two.
    pub id: String,
    /// The first 8 characters, as the CLI and the events name it.
    pub slug: String,
    /// Where it stands; its text is also the style.
    pub status: ApprovalStatus,
    /// The session it belongs to (a checked key).
    pub session: String,
    /// Who asked (`provider:sender`): an operator weighs a request by its source.
    pub requester: Vec<Piece>,
    /// The agent behind the request, when its token names one.
    pub agent: Option<Vec<Piece>>,
    /// `sandbox`, `host`, `host-full` or `network`: the badge and its style.
    pub target: ApprovalTarget,
    /// Whether the plan runs on moat's own machine, outside any container.
    pub on_host: bool,
    /// Why it needs a decision (the policy's verdict).
    pub reason: Vec<Piece>,
    /// The command as the agent sent it.
    pub command: Vec<Piece>,
    /// Whether that differs from the plan (then both are shown).
    pub command_differs: bool,
    /// The exact text that runs once approved.
    pub plan: Vec<Piece>,
    /// Whether the plan or its words hold a character shown as a badge: the page warns
    /// before the operator reads it.
    pub hidden: bool,
    /// Every segment of the plan, in order.
    pub segments: Vec<SegmentView>,
    /// Where it runs.
    pub cwd: Vec<Piece>,
    /// What the approval binds the environment to: a changed environment refuses the run.
    pub env_hash: String,
    /// Every environment entry the hash covers, secrets redacted.
    pub env: Vec<Vec<Piece>>,
    /// Files the plan runs, bound by content.
    pub files: Vec<FileView>,
    /// When it was asked.
    pub created: When,
    /// When it expires undecided (the page counts down to it).
    pub expires: When,
    /// Whether the approval offers allow-once (the page shows only what it offers).
    pub allow_once: bool,
    /// Whether it offers allow-always.
    pub allow_always: bool,
    /// Whether it offers deny.
    pub deny: bool,
    /// The decision once made (an operator's, or `timeout`, `fallback`, `plan-changed`).
    pub decision: Option<RecordedDecision>,
    /// Who decided (`web:operator`, `cli:…`, `http:operator`).
    pub decided_by: Option<Vec<Piece>>,
    /// When it was decided.
    pub decided: Option<When>,
    /// What allow-always adds for good: named on its confirmation page.
    pub entries: Vec<EntryView>,
}

/// The view of `r`: every agent-made text redacted of secrets, then split into pieces.
pub fn approval_view(approvals: &Approvals, r: &ApprovalRow, now: i64) -> ApprovalView {
    let red = |t: &str| approvals.redact(t);
    let binding: Option<Binding> = serde_json::from_str(&r.binding).ok();
    let segments = binding
        .as_ref()
        .map(|b| {
            b.argv
                .iter()
                .enumerate()
                .map(|(i, argv)| SegmentView {
                    argv: argv.iter().map(|w| command(&red(w))).collect(),
                    resolved: b
                        .resolved
                        .get(i)
                        .cloned()
                        .flatten()
                        .map(|p| command(&red(&p))),
                })
                .collect()
        })
        .unwrap_or_default();
    let hidden = has_hidden(&r.plan)
        || has_hidden(&r.command)
        || binding
            .as_ref()
            .is_some_and(|b| b.argv.iter().flatten().any(|w| has_hidden(w)));
    let persist: Vec<PersistEntry> = serde_json::from_str(&r.persist).unwrap_or_default();
    let allowed: Vec<&str> = r.allowed.split(',').collect();
    ApprovalView {
        id: r.id.clone(),
        slug: r.id.chars().take(8).collect(),
        status: r.status,
        session: r.session.clone(),
        requester: plain(&r.requester),
        agent: r.agent.as_deref().map(plain),
        target: r.target,
        on_host: r.target.on_host(),
        reason: plain(&red(&r.reason)),
        command: command(&red(&r.command)),
        command_differs: r.command != r.plan,
        plan: command(&red(&r.plan)),
        hidden,
        segments,
        cwd: binding
            .as_ref()
            .map(|b| command(&red(&b.cwd)))
            .unwrap_or_default(),
        env_hash: binding
            .as_ref()
            .map(|b| b.env_hash.clone())
            .unwrap_or_default(),
        env: binding
            .as_ref()
            .map(|b| b.env.iter().map(|e| command(&red(e))).collect())
            .unwrap_or_default(),
        files: binding
            .as_ref()
            .map(|b| {
                b.files
                    .iter()
                    .map(|f| FileView {
                        operand: command(&red(&f.operand)),
                        path: command(&red(&f.path)),
                        sha256: f.sha256.clone(),
                        size: f.size,
                    })
                    .collect()
            })
            .unwrap_or_default(),
        created: When::at(r.created_at_ms, now),
        expires: When::at(r.expires_at_ms, now),
        allow_once: allowed.contains(&"allow-once"),
        allow_always: allowed.contains(&"allow-always"),
        deny: allowed.contains(&"deny"),
        decision: r.decision,
        decided_by: r.decided_by.as_deref().map(plain),
        decided: r.decided_at_ms.map(|ms| When::at(ms, now)),
        entries: persist
            .iter()
            .map(|e| EntryView {
                target: r.target.machine(),
                entry: command(&red(e.command.as_deref().unwrap_or(&e.entry))),
                scope: match (&e.command, &e.session, &e.cwd) {
                    (Some(_), Some(s), Some(c)) => Some((plain(s), command(c))),
                    _ => None,
                },
            })
            .collect(),
    }
}

#[derive(Template)]
#[template(path = "console/approvals.html")]
struct ApprovalsPage {
    chrome: Chrome,
    pending: Vec<ApprovalView>,
    others: Vec<ApprovalView>,
    filter: String,
    filters: &'static [&'static str],
}

#[derive(Deserialize)]
pub struct ApprovalsQuery {
    /// Narrows the decided and expired list (one of [`FILTERS`]).
    status: Option<String>,
}

/// `GET /ui/approvals[?status=…]`: pending first (newest first), then the rest.
pub async fn list(
    State(state): State<Arc<ServerState>>,
    op: Operator,
    Query(q): Query<ApprovalsQuery>,
) -> Result<Response, ConsoleError> {
    let filter = q.status.unwrap_or_else(|| "all".into());
    if !FILTERS.contains(&filter.as_str()) {
        return Err(ConsoleError::BadRequest(format!(
            "filter approvals: status is one of {}",
            FILTERS.join(", ")
        )));
    }
    let approvals = &state.app.approvals;
    // `list` marks overdue pending approvals expired first, so none offered here is stale.
    let rows = approvals.list(None)?;
    let now = now_ms();
    let (pending, others): (Vec<&ApprovalRow>, Vec<&ApprovalRow>) = rows
        .iter()
        .partition(|r| r.status == ApprovalStatus::Pending);
    let page = ApprovalsPage {
        chrome: Chrome::new(&state, &op, "Approvals", "approvals"),
        pending: pending
            .into_iter()
            .map(|r| approval_view(approvals, r, now))
            .collect(),
        others: others
            .into_iter()
            .filter(|r| filter == "all" || r.status.as_str() == filter)
            .map(|r| approval_view(approvals, r, now))
            .collect(),
        filter,
        filters: FILTERS,
    };
    Ok(html(StatusCode::OK, page.render()))
}

fn approval_id(id: &str) -> Result<(), ConsoleError> {
    let ok = !id.is_empty()
        && id.len() <= MAX_ID
        && id.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-');
    if ok {
        Ok(())
    } else {
        Err(ConsoleError::BadRequest(
            "read the approval id: hex digits and `-` only".into(),
        ))
    }
}

#[derive(Template)]
#[template(path = "console/allow_always.html")]
struct AllowAlwaysPage {
    chrome: Chrome,
    a: ApprovalView,
}

/// `GET /ui/approvals/{id}/always`: the second confirmation, naming every entry allow-always
/// adds for good.
pub async fn confirm_always(
    State(state): State<Arc<ServerState>>,
    op: Operator,
    Path(id): Path<String>,
) -> Result<Response, ConsoleError> {
    approval_id(&id)?;
    let approvals = &state.app.approvals;
    let row = approvals.get(&id)?;
    let page = AllowAlwaysPage {
        chrome: Chrome::new(&state, &op, "Allow always?", "approvals"),
        a: approval_view(approvals, &row, now_ms()),
    };
    Ok(html(StatusCode::OK, page.render()))
}

#[derive(Deserialize)]
pub struct DecisionForm {
    /// Missing is the same as wrong: 403, never a parse error.
    #[serde(default)]
    csrf: String,
    /// `allow-once`, `allow-always` or `deny`.
    #[serde(default)]
    decision: String,
    /// `yes` from the allow-always confirmation page; without it allow-always goes there.
    #[serde(default)]
    confirm: String,
}

/// `POST /ui/approvals/{id}/decision`: allow once, allow always (confirmed) or deny, as the
/// operator on the `web` channel.
pub async fn decide(
    State(state): State<Arc<ServerState>>,
    op: Operator,
    Path(id): Path<String>,
    body: Result<Form<DecisionForm>, FormRejection>,
) -> Result<Response, ConsoleError> {
    let f = form(body)?;
    op.check_csrf(&f.csrf)?;
    approval_id(&id)?;
    let decision = ApprovalDecision::parse(&f.decision)?;
    if decision == ApprovalDecision::AllowAlways && f.confirm != "yes" {
        return Ok(see_other(&format!("/ui/approvals/{id}/always")));
    }
    state
        .app
        .approvals
        .decide(&id, decision, &Decider::operator("operator", "web"))?;
    Ok(see_other("/ui/approvals"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn approval_ids() {
        for (id, ok) in [
            ("0a1b2c3d-0000-4000-8000-123456789abc", true),
            ("0a1b2c3d", true),
            ("", false),
            ("../../v1", false),
            ("zz", false),
        ] {
            assert_eq!(approval_id(id).is_ok(), ok, "{id}");
        }
        assert!(approval_id(&"a".repeat(MAX_ID + 1)).is_err());
    }
}
