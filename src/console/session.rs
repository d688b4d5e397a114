//! A session's page: its processes (status, runtime, command), a live tail of one process's
//! output, and killing a process (docs/console.md, "Pages").

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
use super::page::{command, form, plain, see_other, session_key};
use super::sessions::{view, SessionView};
use super::sign_in::{CsrfForm, Operator};
use super::text::Piece;
use super::time::{span, When};
use crate::process::Proc;
use crate::server::ServerState;
use crate::store::now_ms;
use crate::tools::ProcessRequest;

/// Lines of output the tail shows (the whole record stays available to `process log`).
pub const TAIL_LINES: usize = 200;
/// Longest process id a path may carry; moat's ids are far shorter.
const MAX_PROCESS_ID: usize = 128;

/// One process's row.
pub struct ProcessView {
    /// The process id, as `process` calls name it.
    pub id: String,
    /// `running`, `completed` or `failed`: also the badge's style.
    pub status: &'static str,
    /// How long it ran (or runs so far).
    pub runtime: String,
    /// When it started.
    pub started: When,
    /// How it ended (`code 0`, `signal SIGKILL`, `timed out`), empty while it runs.
    pub exit: String,
    /// The command as the agent sent it, marked.
    pub command: Vec<Piece>,
    /// Where it runs.
    pub cwd: Vec<Piece>,
}

/// The output tail of the process the page shows.
pub struct TailView {
    /// The process id, as `process` calls name it.
    pub id: String,
    /// While it runs the page refreshes the tail every second.
    pub running: bool,
    /// The last lines, as `process log` gives them.
    pub output: Vec<Piece>,
}

#[derive(Template)]
#[template(path = "console/session.html")]
struct SessionPage {
    chrome: Chrome,
    session: SessionView,
    processes: Vec<ProcessView>,
    tail: Option<TailView>,
}

#[derive(Deserialize)]
pub struct SessionQuery {
    /// The process whose output to tail.
    process: Option<String>,
}

fn status_of(p: &Proc) -> &'static str {
    match p.exit() {
        None => "running",
        Some(_) if p.succeeded() => "completed",
        Some(_) => "failed",
    }
}

/// The row of `p` at `now`; `redact` replaces secret values (as approvals show commands).
pub fn process_view(p: &Proc, now: i64, redact: &dyn Fn(&str) -> String) -> ProcessView {
    let exit = p.exit();
    let end = exit.as_ref().map_or(now, |e| e.finished_at_ms);
    let how = match &exit {
        None => String::new(),
        Some(e) if e.timed_out => "timed out".into(),
        Some(e) => match (&e.signal, e.code) {
            (Some(s), _) => format!("signal {s}"),
            (None, Some(c)) => format!("code {c}"),
            (None, None) => "ended".into(),
        },
    };
    ProcessView {
        id: p.info.id.clone(),
        status: status_of(p),
        runtime: span(((end - p.info.started_at_ms).max(0) / 1000) as u64),
        started: When::at(p.info.started_at_ms, now),
        exit: how,
        command: command(&redact(&p.info.command)),
        cwd: plain(&redact(&p.info.cwd)),
    }
}

fn process_id(id: &str) -> Result<(), ConsoleError> {
    let ok = !id.is_empty()
        && id.len() <= MAX_PROCESS_ID
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if ok {
        Ok(())
    } else {
        Err(ConsoleError::BadRequest(
            "read the process id: only letters, digits, `-` and `_`".into(),
        ))
    }
}

/// `GET /ui/sessions/{session}[?process=ID]`.
pub async fn page(
    State(state): State<Arc<ServerState>>,
    op: Operator,
    Path(key): Path<String>,
    Query(q): Query<SessionQuery>,
) -> Result<Response, ConsoleError> {
    let (row, containers) = super::sessions::known(&state, &key).await?;
    let now = now_ms();
    let procs = state.app.registry.list(&key);
    let tail = match q.process.as_deref().filter(|p| !p.is_empty()) {
        Some(id) => {
            process_id(id)?;
            let p =
                state.app.registry.get(&key, id).ok_or_else(|| {
                    ConsoleError::NotFound(format!("process {id} in session {key}"))
                })?;
            // `log` reads the kept record without draining it: the agent's own `poll` still
            // gets everything.
            let req = ProcessRequest {
                action: "log".into(),
                process_id: Some(id.to_string()),
                limit: Some(TAIL_LINES),
                ..Default::default()
            };
            let result = state.app.process.run(&key, &req).await;
            Some(TailView {
                id: id.to_string(),
                running: p.is_running(),
                output: plain(result.text()),
            })
        }
        None => None,
    };
    let page = SessionPage {
        chrome: Chrome::new(&state, &op, format!("Session {key}"), "sessions"),
        session: view(&state, &row, &containers, now),
        processes: procs
            .iter()
            .map(|p| process_view(p, now, &|t| state.app.approvals.redact(t)))
            .collect(),
        tail,
    };
    Ok(html(StatusCode::OK, page.render()))
}

/// `POST /ui/sessions/{session}/processes/{id}/kill`: ends the process's group, as `process
/// kill` does.
pub async fn kill(
    State(state): State<Arc<ServerState>>,
    op: Operator,
    Path((key, id)): Path<(String, String)>,
    body: Result<Form<CsrfForm>, FormRejection>,
) -> Result<Response, ConsoleError> {
    op.check_csrf(&form(body)?.csrf)?;
    session_key(&key)?;
    process_id(&id)?;
    let req = ProcessRequest {
        action: "kill".into(),
        process_id: Some(id.clone()),
        ..Default::default()
    };
    state.app.process.run(&key, &req).await;
    Ok(see_other(&format!("/ui/sessions/{key}?process={id}#tail")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn process_ids() {
        for (id, ok) in [
            ("0196b7c2-aaaa-7bbb-8ccc-123456789abc", true),
            ("abc_1", true),
            ("", false),
            ("../x", false),
            ("a b", false),
            ("a%2F", false),
        ] {
            assert_eq!(process_id(id).is_ok(), ok, "{id}");
        }
        assert!(process_id(&"a".repeat(MAX_PROCESS_ID + 1)).is_err());
    }
}
