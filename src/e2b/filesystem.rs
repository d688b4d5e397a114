//! E2B's filesystem service (`/filesystem.Filesystem/*`, docs/e2b.md, "Files"): `Stat`,
//! `MakeDir`, `Move`, `ListDir` and `Remove` on the sandbox's home, each through moat's
//! confined file layer on the host (`home`), answered with E2B's entry info (`entry`) and
//! error codes. Watching is `watch`'s.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use serde::de::DeserializeOwned;
use serde_json::{json, Value};

use super::connect::{Code, RpcError};
use super::entry::{entry_info, Names};
use super::home::{Home, Homes, Refusal};
use super::process::{parse, unary_error};
use super::sandboxes::Sandbox;
use super::state::E2bState;
use super::wire::{ListDirRequest, MoveRequest, PathRequest};
use crate::files::{ConfineError, Found};

/// The most entries one `ListDir` answers: about 300 bytes of JSON each.
const MAX_LIST_ENTRIES: usize = 50_000;

/// What a handler's work gets: the home, opened, and the container's names.
struct Ctx {
    home: Home,
    names: Arc<Names>,
}

/// Runs one unary call: the request read, the user checked, the home opened (for writing
/// when `write`), then `act` on a blocking thread (every step is a system call on the host).
async fn unary<T, F>(
    state: &E2bState,
    homes: &Homes,
    sandbox: &Sandbox,
    headers: &HeaderMap,
    body: &[u8],
    write: bool,
    act: F,
) -> Response
where
    T: DeserializeOwned,
    F: FnOnce(&Ctx, T) -> Result<Value, Refusal> + Send + 'static,
    T: Send + 'static,
{
    let req: T = match parse(body) {
        Ok(r) => r,
        Err(e) => return unary_error(e),
    };
    let user = match super::auth::basic_user(headers) {
        Ok(u) => u,
        Err(m) => {
            return unary_error(RpcError::new(
                Code::InvalidArgument,
                format!("failed to read the user: {m}"),
            ))
        }
    };
    let user = match super::home::user_named(user.as_deref(), &state.app.config) {
        Ok(u) => u,
        Err(r) => return unary_error(r.rpc()),
    };
    let home = match homes.open(state, sandbox, user, write).await {
        Ok(h) => h,
        Err(r) => return unary_error(r.rpc()),
    };
    let names = homes.names(state, sandbox, &home).await;
    let ctx = Ctx { home, names };
    match tokio::task::spawn_blocking(move || act(&ctx, req)).await {
        Ok(Ok(v)) => Json(v).into_response(),
        Ok(Err(r)) => unary_error(r.rpc()),
        Err(e) => unary_error(RpcError::new(
            Code::Internal,
            format!("failed to finish the call: {e}"),
        )),
    }
}

/// The entry of what `found` is, with its metadata (`user.e2b.*` attributes).
fn info(ctx: &Ctx, found: &Found) -> Value {
    let meta = ctx.home.ws.attrs(&found.rel, super::upload::META_PREFIX);
    serde_json::to_value(entry_info(found, &ctx.names, meta)).unwrap_or_default()
}

fn kind_is_dir(found: &Found) -> bool {
    let dir = |st: &nix::sys::stat::FileStat| {
        st.st_mode & nix::sys::stat::SFlag::S_IFMT.bits() == nix::sys::stat::SFlag::S_IFDIR.bits()
    };
    match &found.link {
        Some(l) => l.target.as_ref().is_some_and(|(st, _)| dir(st)),
        None => dir(&found.st),
    }
}

/// `Stat`: the entry at a path; `not_found` when nothing is there.
pub async fn stat(
    State(state): State<Arc<E2bState>>,
    Extension(homes): Extension<Arc<Homes>>,
    Extension(sandbox): Extension<Arc<Sandbox>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    unary(
        &state,
        &homes,
        &sandbox,
        &headers,
        &body,
        false,
        |ctx, req: PathRequest| {
            let p = ctx.home.resolve(&req.path)?;
            let found = ctx.home.ws.lookup(&p.rel)?;
            Ok(json!({ "entry": info(ctx, &found) }))
        },
    )
    .await
}

/// `MakeDir`: the directory and its missing parents (0755, the sandbox user's);
/// `already_exists` when it is there, `invalid_argument` when something else is.
pub async fn make_dir(
    State(state): State<Arc<E2bState>>,
    Extension(homes): Extension<Arc<Homes>>,
    Extension(sandbox): Extension<Arc<Sandbox>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    unary(
        &state,
        &homes,
        &sandbox,
        &headers,
        &body,
        true,
        |ctx, req: PathRequest| {
            let p = ctx.home.resolve(&req.path)?;
            match ctx.home.ws.lookup(&p.rel) {
                Ok(found) if kind_is_dir(&found) => {
                    return Err(Refusal::new(
                        Code::AlreadyExists,
                        format!("failed to make directory `{}`: it exists", p.shown()),
                    ))
                }
                Ok(_) => {
                    return Err(Refusal::new(
                        Code::InvalidArgument,
                        format!(
                        "failed to make directory `{}`: something that is not a directory is there",
                        p.shown()
                    ),
                    ))
                }
                Err(ConfineError::Missing { .. }) => {}
                Err(e) => return Err(e.into()),
            }
            ctx.home.ws.make_dir(&p.rel)?;
            let found = ctx.home.ws.lookup(&p.rel)?;
            Ok(json!({ "entry": info(ctx, &found) }))
        },
    )
    .await
}

/// `Move`: `source` to `destination` (its parents made); `not_found` when there is no source.
pub async fn move_entry(
    State(state): State<Arc<E2bState>>,
    Extension(homes): Extension<Arc<Homes>>,
    Extension(sandbox): Extension<Arc<Sandbox>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    unary(
        &state,
        &homes,
        &sandbox,
        &headers,
        &body,
        true,
        |ctx, req: MoveRequest| {
            let from = ctx.home.resolve(&req.source)?;
            let to = ctx.home.resolve(&req.destination)?;
            for p in [&from, &to] {
                if p.rel == "." {
                    return Err(Refusal::new(
                        Code::InvalidArgument,
                        format!(
                            "failed to move `{}`: it is the user's home itself",
                            p.shown()
                        ),
                    ));
                }
            }
            ctx.home.ws.rename(&from.rel, &to.rel)?;
            let found = ctx.home.ws.lookup(&to.rel)?;
            Ok(json!({ "entry": info(ctx, &found) }))
        },
    )
    .await
}

/// `ListDir`: the entries below a directory to a depth (0 is 1), as a lexical pre-order walk;
/// `invalid_argument` for a path that is not a directory.
pub async fn list_dir(
    State(state): State<Arc<E2bState>>,
    Extension(homes): Extension<Arc<Homes>>,
    Extension(sandbox): Extension<Arc<Sandbox>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    unary(
        &state,
        &homes,
        &sandbox,
        &headers,
        &body,
        false,
        |ctx, req: ListDirRequest| {
            let p = ctx.home.resolve(&req.path)?;
            let depth = req.depth.unwrap_or(0).max(1) as usize;
            let found = ctx.home.ws.list(&p.rel, depth, MAX_LIST_ENTRIES)?;
            let entries: Vec<Value> = found.iter().map(|f| info(ctx, f)).collect();
            Ok(json!({ "entries": entries }))
        },
    )
    .await
}

/// `Remove`: what is at a path, a directory with everything in it (`rm -rf`, never through
/// a symbolic link); nothing there is no error. The home itself is refused.
pub async fn remove(
    State(state): State<Arc<E2bState>>,
    Extension(homes): Extension<Arc<Homes>>,
    Extension(sandbox): Extension<Arc<Sandbox>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    unary(
        &state,
        &homes,
        &sandbox,
        &headers,
        &body,
        true,
        |ctx, req: PathRequest| {
            let p = ctx.home.resolve(&req.path)?;
            if p.rel == "." {
                return Err(Refusal::new(
                    Code::InvalidArgument,
                    format!(
                        "failed to remove `{}`: it is the user's home itself",
                        p.shown()
                    ),
                ));
            }
            ctx.home.ws.remove_all(&p.rel)?;
            Ok(json!({}))
        },
    )
    .await
}
