//! E2B's filesystem service (`/filesystem.Filesystem/*`, docs/e2b.md, "Files"): `Stat`,
//! `MakeDir`, `Move`, `ListDir` and `Remove` on the sandbox's home, each through moat's
//! confined file layer on the host (`home`), answered with E2B's entry info (`entry`) and
//! error codes. Watching is `watch`'s.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{header, HeaderMap};
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
use crate::files::{ConfineError, Found, ListBound};

/// The most entries one `ListDir` answers: about 300 bytes of JSON each.
const MAX_LIST_ENTRIES: usize = 50_000;
/// The most bytes one `ListDir` answers, and the most bytes of paths and link texts it holds
/// while it walks: entries are counted, and so are their sizes, which the sandbox chooses
/// (names of 255 bytes, paths of 4,096, a link's text, its metadata).
const MAX_LIST_BYTES: usize = 32 << 20;

/// What a handler's work gets: the home, opened, and the container's names.
struct Ctx {
    home: Home,
    names: Arc<Names>,
}

/// Runs one unary call: the request read, the user checked, the home opened (for writing
/// when `write`), then `act` on a blocking thread (every step is a system call on the host).
async fn unary<T, F, R>(
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
    F: FnOnce(&Ctx, T) -> Result<R, Refusal> + Send + 'static,
    T: Send + 'static,
    R: IntoResponse + Send + 'static,
{
    let req: T = match parse(body) {
        Ok(r) => r,
        Err(e) => return unary_error(e),
    };
    let user = match super::home::user_of_call(headers, &state.app.config) {
        Ok(u) => u,
        Err(e) => return unary_error(e),
    };
    let home = match homes.open(state, sandbox, user, write).await {
        Ok(h) => h,
        Err(r) => return unary_error(r.rpc()),
    };
    let names = homes.names(state, sandbox, &home).await;
    let ctx = Ctx { home, names };
    match tokio::task::spawn_blocking(move || act(&ctx, req)).await {
        Ok(Ok(v)) => v.into_response(),
        Ok(Err(r)) => unary_error(r.rpc()),
        Err(e) => unary_error(RpcError::new(
            Code::Internal,
            format!("failed to finish the call: {e}"),
        )),
    }
}

/// The entry of what `found` is, with its metadata (`user.e2b.*` attributes); `None` when its
/// path is not UTF-8 ([`entry_info`]).
fn entry(ctx: &Ctx, found: &Found) -> Option<super::entry::EntryInfo> {
    let meta = ctx.home.ws.attrs(&found.rel, super::upload::META_PREFIX);
    entry_info(found, &ctx.names, meta)
}

/// `{"entry": …}` for what `found` is; a path that is not UTF-8 (a request never names one,
/// but a link may lead to one) is refused, never shown lossily.
fn answer_entry(ctx: &Ctx, found: &Found, shown: &str) -> Result<Json<Value>, Refusal> {
    let e = entry(ctx, found).ok_or_else(|| {
        Refusal::new(
            Code::InvalidArgument,
            format!("failed to describe `{shown}`: its path is not UTF-8, which E2B's API cannot carry (docs/e2b.md, \"Files\")"),
        )
    })?;
    Ok(Json(json!({ "entry": e })))
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
            answer_entry(ctx, &found, &p.shown())
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
            answer_entry(ctx, &found, &p.shown())
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
            answer_entry(ctx, &found, &to.shown())
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
            let bound = ListBound {
                entries: MAX_LIST_ENTRIES,
                bytes: MAX_LIST_BYTES,
            };
            let found = ctx.home.ws.list(&p.rel, depth, bound)?;
            let body = listing(found.iter().filter_map(|f| entry(ctx, f)), MAX_LIST_BYTES)
                .map_err(|over| {
                    Refusal::new(
                        Code::InvalidArgument,
                        format!("failed to list `{}`: {over}", p.shown()),
                    )
                })?;
            Ok(([(header::CONTENT_TYPE, "application/json")], body))
        },
    )
    .await
}

/// `{"entries": [...]}` as bytes, at most `max` of them: past it, the sentence saying so.
fn listing(
    entries: impl Iterator<Item = super::entry::EntryInfo>,
    max: usize,
) -> Result<Vec<u8>, String> {
    let mut body = b"{\"entries\":[".to_vec();
    for (i, e) in entries.enumerate() {
        if i > 0 {
            body.push(b',');
        }
        serde_json::to_writer(&mut body, &e).map_err(|e| e.to_string())?;
        if body.len() + 2 > max {
            return Err(format!(
                "its answer comes to more than {max} bytes, more than may be listed at once (list less deep, or a directory further down)"
            ));
        }
    }
    body.extend_from_slice(b"]}");
    Ok(body)
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
            Ok(Json(json!({})))
        },
    )
    .await
}
#[cfg(test)]
mod tests {
    use super::*;
    use crate::e2b::entry::{EntryInfo, FileType};

    fn e(name: &str) -> EntryInfo {
        EntryInfo {
            name: name.into(),
            kind: FileType::File,
            path: format!("/home/user/{name}"),
            size: "0".into(),
            mode: 0o644,
            permissions: "-rw-r--r--".into(),
            owner: "user".into(),
            group: "user".into(),
            modified_time: "2024-01-02T03:04:05Z".into(),
            symlink_target: None,
            metadata: Default::default(),
            is_symlink: false,
        }
    }

    #[test]
    fn listings_answer_json_within_their_byte_bound() {
        let body = listing([e("a"), e("b")].into_iter(), 4096).unwrap();
        let v: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(v["entries"][1]["path"], "/home/user/b");
        assert_eq!(
            listing(std::iter::empty(), 64).unwrap(),
            b"{\"entries\":[]}"
        );
        let one = serde_json::to_vec(&e("a")).unwrap().len();
        let err = listing((0..100).map(|_| e("a")), 10 * one).unwrap_err();
        assert!(
            err.contains(&format!("more than {} bytes", 10 * one)),
            "{err}"
        );
    }
}
