//! E2B's process service (`/process.Process/*`, docs/e2b.md, "Processes"): every command
//! is an `exec` of the sandbox's session — judged by its policy, audited, listed by `moat
//! process list` — started in the background with stderr apart, and streamed raw from its
//! run files (`stream`).

use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Extension;
use axum::Json;
use serde::de::DeserializeOwned;
use serde_json::json;
use tokio::sync::oneshot;

use super::connect::{self, Code, RpcError};
use super::sandboxes::{E2bProcess, Sandbox};
use super::state::E2bState;
use super::stream::{self, Follow, Kind, RawTail};
use super::user::User;
use super::wire::{
    ProcessConfig, ProcessInfo, ProcessRequest, SendInputRequest, SendSignalRequest, Signal,
    StartRequest, UpdateRequest,
};
use crate::config::Shell;
use crate::contract::FailureKind;
use crate::process::{Proc, RunFiles};
use crate::tools::{Caller, ExecRequest};

/// How long a started command may take to record its pid.
const READY_WITHIN: Duration = Duration::from_secs(10);
/// The longest tag a process may carry: a name to find it by, kept while it runs.
const MAX_TAG: usize = 256;
/// The most a unary request's body may hold.
const MAX_UNARY: usize = connect::MAX_MESSAGE + 1024;

/// A unary error: Connect's status for the code, `{"code", "message"}`.
pub(super) fn unary_error(e: RpcError) -> Response {
    (e.code.http(), Json(e.json())).into_response()
}

/// A stream that fails before its first event: status 200 and only the end envelope
/// (Connect's rule for server streams).
fn stream_error(e: RpcError) -> Response {
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/connect+json")],
        connect::end(Some(&e)),
    )
        .into_response()
}

/// E2B's proxy answer for a sandbox that is not there (docs/e2b.md, "Health").
pub fn sandbox_not_found(id: &str) -> Response {
    let id = crate::output::escape_display(&id.chars().take(64).collect::<String>());
    (
        StatusCode::BAD_GATEWAY,
        Json(json!({"sandboxId": id, "message": "The sandbox was not found", "code": 502})),
    )
        .into_response()
}

/// What E2B's proxy answers for a paused sandbox: its API is not reachable until `connect`
/// resumes it.
pub fn sandbox_paused(id: &str) -> Response {
    let id = crate::output::escape_display(&id.chars().take(64).collect::<String>());
    (
        StatusCode::BAD_GATEWAY,
        Json(json!({"sandboxId": id, "message": "The sandbox is paused", "code": 502})),
    )
        .into_response()
}

/// Why a call reached no sandbox.
pub(super) enum NoSandbox {
    /// None of that id: E2B's proxy answer.
    Missing(String),
    /// The access token is missing or another's.
    Token,
}

impl IntoResponse for NoSandbox {
    fn into_response(self) -> Response {
        match self {
            NoSandbox::Missing(id) => sandbox_not_found(&id),
            NoSandbox::Token => no_token(),
        }
    }
}

/// The answer to a call without the sandbox's access token.
pub fn no_token() -> Response {
    unary_error(RpcError::new(
        Code::Unauthenticated,
        "failed to identify the caller: the access token is missing or not this sandbox's (X-Access-Token)",
    ))
}

/// The sandbox a call names, with its access token checked.
pub(super) fn sandbox(state: &E2bState, headers: &HeaderMap) -> Result<Arc<Sandbox>, NoSandbox> {
    let id = super::auth::sandbox_id(headers).unwrap_or_default();
    let Some(s) = state.sandboxes.get(id) else {
        return Err(NoSandbox::Missing(id.to_string()));
    };
    if !super::auth::token_matches(headers, &s.access_token) {
        return Err(NoSandbox::Token);
    }
    Ok(s)
}

pub(super) fn parse<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, RpcError> {
    if bytes.len() > MAX_UNARY {
        return Err(RpcError::new(
            Code::ResourceExhausted,
            format!(
                "the request of {} bytes is over the {MAX_UNARY}-byte bound",
                bytes.len()
            ),
        ));
    }
    serde_json::from_slice(bytes).map_err(|e| {
        RpcError::new(
            Code::InvalidArgument,
            format!("failed to read the request: {e}"),
        )
    })
}

/// The user the call asks to run as (docs/e2b.md, "Users").
fn user_of(headers: &HeaderMap) -> Result<User, RpcError> {
    let name = super::auth::basic_user(headers).map_err(|m| {
        RpcError::new(
            Code::InvalidArgument,
            format!("failed to read the user: {m}"),
        )
    })?;
    User::named(name.as_deref()).map_err(|m| {
        RpcError::new(
            Code::Unauthenticated,
            format!("failed to run the command: {m}"),
        )
    })
}

/// The text moat runs for a process config, and the login shell it runs in. The SDK's own
/// form, `/bin/bash -l -c CMD`, is CMD in a bash login shell, so the policy judges CMD itself;
/// any other program is run by name (`exec`), quoted. A `cwd` is entered first (without one
/// the command starts in the user's home, `ExecRequest::start_in`).
pub fn command_text(cfg: &ProcessConfig) -> (String, Option<Shell>) {
    let bash = matches!(cfg.cmd.as_str(), "/bin/bash" | "bash" | "/usr/bin/bash");
    let (body, shell) = match cfg.args.as_slice() {
        [l, c, cmd] if bash && l == "-l" && c == "-c" => (cmd.clone(), Some(Shell::Bash)),
        [c, cmd] if bash && c == "-c" => (cmd.clone(), Some(Shell::Bash)),
        args => {
            let mut words = vec!["exec".to_string(), quote(&cfg.cmd)];
            words.extend(args.iter().map(|a| quote(a)));
            (words.join(" "), None)
        }
    };
    match cfg.cwd.as_deref().filter(|c| !c.is_empty()) {
        Some(cwd) => (format!("cd -- {} && {body}", quote(cwd)), shell),
        None => (body, shell),
    }
}

/// A word the shell reads back as exactly `s`.
fn quote(s: &str) -> String {
    if !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"/._-=:,+@%".contains(&b))
    {
        return s.to_string();
    }
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// Connect's code for a failed `exec`.
fn code_of(kind: FailureKind) -> Code {
    match kind {
        FailureKind::Invalid | FailureKind::Violation => Code::InvalidArgument,
        FailureKind::Refused | FailureKind::Withheld => Code::PermissionDenied,
        FailureKind::NotFound => Code::NotFound,
        FailureKind::Conflict => Code::AlreadyExists,
        FailureKind::TooMany => Code::ResourceExhausted,
        FailureKind::Unavailable => Code::Unavailable,
        FailureKind::Internal => Code::Internal,
    }
}

/// `Connect-Timeout-Ms` as `exec`'s timeout in seconds (0: none); E2B's daemon ends a started
/// process when its call's deadline passes.
fn deadline_secs(headers: &HeaderMap) -> f64 {
    headers
        .get("connect-timeout-ms")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(|ms| ms.div_ceil(1000).max(1) as f64)
        .unwrap_or(0.0)
}

fn keepalive(headers: &HeaderMap) -> Option<Duration> {
    headers
        .get("keepalive-ping-interval")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
        .filter(|s| *s > 0)
        .map(|s| Duration::from_secs(s.min(3600)))
}

/// `Start`: runs a process and streams its events.
pub async fn start(
    State(state): State<Arc<E2bState>>,
    Extension(conn): Extension<super::conn::Conn>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let sandbox = match sandbox(&state, &headers) {
        Ok(s) => s,
        Err(r) => return r.into_response(),
    };
    match started(&state, &sandbox, &headers, &body).await {
        Ok(mut follow) => {
            follow.conn = Some(conn);
            streaming(follow)
        }
        Err(e) => stream_error(e),
    }
}

fn streaming(follow: Follow) -> Response {
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/connect+json")],
        stream::body(follow),
    )
        .into_response()
}

async fn started(
    state: &E2bState,
    sandbox: &Sandbox,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<Follow, RpcError> {
    let req: StartRequest = parse(connect::single_message(body)?)?;
    let user = user_of(headers)?;
    if user == User::Root && !super::user::root_allowed(&state.app.config) {
        return Err(RpcError::new(
            Code::PermissionDenied,
            "failed to run as root: this moat runs E2B's sandboxes under gVisor (runsc), where root gets no capabilities, so it does not offer root there (docs/e2b.md, \"Users\")",
        ));
    }
    if req.tag.as_ref().is_some_and(|t| t.len() > MAX_TAG) {
        return Err(RpcError::new(
            Code::InvalidArgument,
            format!("failed to start the process: its tag is over {MAX_TAG} bytes"),
        ));
    }
    if req.process.cmd.is_empty() {
        return Err(RpcError::new(
            Code::InvalidArgument,
            "failed to start the process: `cmd` is empty",
        ));
    }
    let (command, shell) = command_text(&req.process);
    let mut env = sandbox.env_vars.clone();
    env.extend(req.process.envs.clone());
    let pty = req.pty.is_some();
    let exec = ExecRequest {
        command,
        env,
        background: Some(true),
        pty: Some(pty),
        timeout: Some(deadline_secs(headers)),
        shell,
        user: user.exec_user(),
        // E2B's daemon starts every process in its user's home.
        start_in: Some(user.home().to_string()),
        edge_env: user
            .env()
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        ..Default::default()
    };
    let caller = Caller {
        provider: Some("e2b".into()),
        sender: Some(sandbox.owner.clone()),
        agent: None,
    };
    let (id_tx, id_rx) = oneshot::channel::<String>();
    let result = state
        .app
        .exec
        .start_split(&caller, &sandbox.session, &exec, move |id| {
            let _ = id_tx.send(id.to_string());
        })
        .await
        .map_err(|e| {
            RpcError::new(
                code_of(e.kind()),
                format!("failed to {}", crate::error_chain::error_chain(&e)),
            )
        })?;
    let Ok(id) = id_rx.await else {
        // Refused, or waiting for an operator: moat's sentence says which (and names the
        // approval to decide).
        return Err(RpcError::new(Code::PermissionDenied, result.text()));
    };
    let proc = state
        .app
        .registry
        .get(&sandbox.session, &id)
        .ok_or_else(|| {
            RpcError::new(
                Code::Internal,
                format!("failed to find process {id} after its start"),
            )
        })?;
    let container = state
        .app
        .sessions
        .ensure(&sandbox.session)
        .await
        .map_err(|e| {
            RpcError::new(
                Code::Unavailable,
                format!("failed to reach the sandbox: {e}"),
            )
        })?;
    let files = RunFiles::open(&container.run_dir, &id, Some(container.owner)).map_err(|e| {
        RpcError::new(
            Code::Internal,
            format!("failed to open the run files of {id}: {e}"),
        )
    })?;
    files.wait_ready(READY_WITHIN).await;
    let Some(pid) = files.read_pgid() else {
        return Err(RpcError::new(
            Code::Internal,
            format!("failed to learn the pid of {id}: it recorded none"),
        ));
    };
    if let Some(p) = req.pty {
        proc.resize(p.size.rows.max(1), p.size.cols.max(1));
    }
    if req.stdin == Some(false) && !pty {
        // No stdin asked for: the command reads end of file, as under E2B's daemon.
        proc.close_stdin().await;
    }
    let registry = &state.app.registry;
    sandbox.add_process(
        E2bProcess {
            pid,
            id: id.clone(),
            tag: req.tag.clone(),
            config: req.process.clone(),
            pty,
        },
        |p| {
            registry
                .get(&sandbox.session, &p.id)
                .is_none_or(|proc| !proc.is_running())
        },
    );
    let tails = open_tails(&files, pty, false)?;
    Ok(Follow {
        proc,
        pid,
        tails,
        keepalive: keepalive(headers),
        killed: sandbox.killed.clone(),
        conn: None,
    })
}

fn open_tails(files: &RunFiles, pty: bool, from_end: bool) -> Result<Vec<RawTail>, RpcError> {
    let kinds: &[(&'static str, Kind)] = if pty {
        &[("out", Kind::Pty)]
    } else {
        &[("out", Kind::Stdout), ("err", Kind::Stderr)]
    };
    kinds
        .iter()
        .map(|(ext, kind)| {
            files
                .open_stream(ext)
                .map(|f| RawTail::new(*kind, f, from_end))
                .map_err(|e| {
                    RpcError::new(Code::Internal, format!("failed to open the output: {e}"))
                })
        })
        .collect()
}

/// The live process a selector names, or `not_found` worded as E2B's daemon words it.
pub(super) fn selected(
    state: &E2bState,
    sandbox: &Sandbox,
    sel: &super::wire::Selector,
) -> Result<(E2bProcess, Arc<Proc>), RpcError> {
    let missing = || match (&sel.pid, &sel.tag) {
        (Some(pid), _) => {
            RpcError::new(Code::NotFound, format!("process with pid {pid} not found"))
        }
        (None, Some(tag)) => RpcError::new(
            Code::NotFound,
            format!(
                "process with tag {} not found",
                // A selector's tag is the caller's text, not a started one's (those are at
                // most MAX_TAG bytes): only its start is said back.
                crate::output::escape_display(&tag.chars().take(MAX_TAG).collect::<String>())
            ),
        ),
        (None, None) => RpcError::new(
            Code::InvalidArgument,
            "the request names no process (pid or tag)",
        ),
    };
    let p = sandbox
        .find(sel.pid, sel.tag.as_deref())
        .ok_or_else(missing)?;
    match state.app.registry.get(&sandbox.session, &p.id) {
        Some(proc) if proc.is_running() => Ok((p, proc)),
        _ => Err(missing()),
    }
}

/// `Connect`: the events of a running process from now on.
pub async fn connect_to(
    State(state): State<Arc<E2bState>>,
    Extension(conn): Extension<super::conn::Conn>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let sandbox = match sandbox(&state, &headers) {
        Ok(s) => s,
        Err(r) => return r.into_response(),
    };
    let follow = async {
        let req: ProcessRequest = parse(connect::single_message(&body)?)?;
        let (p, proc) = selected(&state, &sandbox, &req.process)?;
        let container = state
            .app
            .sessions
            .ensure(&sandbox.session)
            .await
            .map_err(|e| {
                RpcError::new(
                    Code::Unavailable,
                    format!("failed to reach the sandbox: {e}"),
                )
            })?;
        let files =
            RunFiles::open(&container.run_dir, &p.id, Some(container.owner)).map_err(|e| {
                RpcError::new(Code::Internal, format!("failed to open the run files: {e}"))
            })?;
        Ok::<_, RpcError>(Follow {
            proc,
            pid: p.pid,
            tails: open_tails(&files, p.pty, true)?,
            keepalive: keepalive(&headers),
            killed: sandbox.killed.clone(),
            conn: Some(conn),
        })
    };
    match follow.await {
        Ok(f) => streaming(f),
        Err(e) => stream_error(e),
    }
}

/// Runs a unary call: the sandbox, the request, the answer `{}` or the error.
async fn unary<T: DeserializeOwned, F>(
    state: &E2bState,
    headers: &HeaderMap,
    body: &[u8],
    act: F,
) -> Response
where
    F: AsyncFnOnce(&Sandbox, T) -> Result<serde_json::Value, RpcError>,
{
    let sandbox = match sandbox(state, headers) {
        Ok(s) => s,
        Err(r) => return r.into_response(),
    };
    let req = match parse::<T>(body) {
        Ok(r) => r,
        Err(e) => return unary_error(e),
    };
    match act(&sandbox, req).await {
        Ok(v) => Json(v).into_response(),
        Err(e) => unary_error(e),
    }
}

/// `List`: the running processes started through this service.
pub async fn list(State(state): State<Arc<E2bState>>, headers: HeaderMap, body: Bytes) -> Response {
    unary(
        &state,
        &headers,
        &body,
        async |sandbox: &Sandbox, _: serde_json::Value| {
            let processes: Vec<ProcessInfo> = sandbox
                .processes()
                .into_iter()
                .filter(|p| {
                    state
                        .app
                        .registry
                        .get(&sandbox.session, &p.id)
                        .is_some_and(|proc| proc.is_running())
                })
                .map(|p| ProcessInfo {
                    config: p.config,
                    pid: p.pid,
                    tag: p.tag,
                })
                .collect();
            Ok(json!({ "processes": processes }))
        },
    )
    .await
}

/// `SendSignal`: SIGKILL or SIGTERM to the process's group. moat ends a group as it always
/// does (TERM, then KILL after the grace), and answers once it ended, so the pid is gone
/// when the SDK looks.
pub async fn send_signal(
    State(state): State<Arc<E2bState>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    unary(
        &state,
        &headers,
        &body,
        async |sandbox: &Sandbox, req: SendSignalRequest| {
            let (p, proc) = selected(&state, sandbox, &req.process)?;
            // Either signal ends the group the one way moat ends groups (docs/e2b.md,
            // "Processes"); the request names which only because E2B's does.
            let (Signal::Kill | Signal::Term) = req.signal;
            if !proc.kill().await {
                return Err(RpcError::new(
                    Code::Internal,
                    format!("failed to end process {}: it runs on", p.pid),
                ));
            }
            Ok(json!({}))
        },
    )
    .await
}

/// `SendInput`: bytes to the process's stdin or terminal.
pub async fn send_input(
    State(state): State<Arc<E2bState>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    unary(
        &state,
        &headers,
        &body,
        async |sandbox: &Sandbox, req: SendInputRequest| {
            let (_, proc) = selected(&state, sandbox, &req.process)?;
            let data = req.input.stdin.or(req.input.pty).unwrap_or_default();
            proc.write(data).await.map_err(|e| {
                RpcError::new(
                    Code::FailedPrecondition,
                    format!("failed to write the input: {e}"),
                )
            })?;
            Ok(json!({}))
        },
    )
    .await
}

/// `CloseStdin`.
pub async fn close_stdin(
    State(state): State<Arc<E2bState>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    unary(
        &state,
        &headers,
        &body,
        async |sandbox: &Sandbox, req: ProcessRequest| {
            let (_, proc) = selected(&state, sandbox, &req.process)?;
            proc.close_stdin().await;
            Ok(json!({}))
        },
    )
    .await
}

/// `Update`: a terminal's new size.
pub async fn update(
    State(state): State<Arc<E2bState>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    unary(
        &state,
        &headers,
        &body,
        async |sandbox: &Sandbox, req: UpdateRequest| {
            let (_, proc) = selected(&state, sandbox, &req.process)?;
            if let Some(p) = req.pty {
                proc.resize(p.size.rows.max(1), p.size.cols.max(1));
            }
            Ok(json!({}))
        },
    )
    .await
}

/// `GET /health`: 204 while the sandbox runs, E2B's 502 otherwise.
pub async fn health(State(state): State<Arc<E2bState>>, headers: HeaderMap) -> Response {
    let id = super::auth::sandbox_id(&headers).unwrap_or_default();
    match state.sandboxes.get(id) {
        Some(s) if s.is_paused() => sandbox_paused(id),
        Some(_) => StatusCode::NO_CONTENT.into_response(),
        None => sandbox_not_found(id),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_keep_their_words() {
        let cfg = |cmd: &str, args: &[&str], cwd: Option<&str>| ProcessConfig {
            cmd: cmd.into(),
            args: args.iter().map(|a| a.to_string()).collect(),
            envs: Default::default(),
            cwd: cwd.map(str::to_string),
        };
        let cases = [
            (
                cfg("/bin/bash", &["-l", "-c", "echo $HOME"], None),
                "echo $HOME",
                Some(Shell::Bash),
            ),
            (
                cfg("/bin/bash", &["-l", "-c", "pwd"], Some("/tmp/a b")),
                "cd -- '/tmp/a b' && pwd",
                Some(Shell::Bash),
            ),
            (
                cfg("/usr/bin/env", &["a'b", "", "x;y"], None),
                r#"exec /usr/bin/env 'a'\''b' '' 'x;y'"#,
                None,
            ),
            (
                cfg("/bin/bash", &["-i", "-l"], Some("/")),
                "cd -- / && exec /bin/bash -i -l",
                None,
            ),
        ];
        for (c, text, shell) in cases {
            assert_eq!(command_text(&c), (text.to_string(), shell), "{c:?}");
        }
    }
}
