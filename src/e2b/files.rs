//! E2B's `/files` (docs/e2b.md, "Files"): who calls it, and `GET`, which downloads a file of
//! the sandbox's home through moat's confined file layer (gzip when the client accepts it),
//! streamed from a blocking reader through a channel of a few chunks, so memory stays bounded
//! whatever the size; `POST` is `upload`. The caller is a sandbox's access token or a signed
//! URL (`signature`), checked by [`caller`] in the gate before any body is read.

use std::io::{self, Read, Write};
use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use serde_json::json;
use tokio::sync::mpsc;

use super::home::{Homes, Refusal};
use super::sandboxes::Sandbox;
use super::signature::{self, Op, SignatureError, Signed};
use super::state::E2bState;

/// How much a download reads at a time.
const CHUNK: usize = 256 << 10;
/// Chunks in flight between the connection and the disk, each way.
pub(super) const IN_FLIGHT: usize = 4;
/// How long a transfer may stall (a client that neither sends nor reads) before moat gives
/// it up: E2B's daemon bounds each read the same way.
pub(super) const IDLE: std::time::Duration = std::time::Duration::from_secs(60);

/// E2B's `/files` error: `{"code": <status>, "message": "…"}`.
pub(super) fn error(status: StatusCode, message: impl Into<String>) -> Response {
    let message = message.into();
    (
        status,
        Json(json!({"code": status.as_u16(), "message": message})),
    )
        .into_response()
}

pub(super) fn refused(r: Refusal) -> Response {
    error(r.status, r.message)
}

/// The query `/files` reads: `path`, `username`, and a signed URL's `signature` and
/// `signature_expiration`.
#[derive(Debug, Default)]
pub(super) struct Query {
    pub path: Option<String>,
    pub username: Option<String>,
    pub signature: Option<String>,
    pub expiry: Option<String>,
}

pub(super) fn query(q: Option<&str>) -> Query {
    let mut out = Query::default();
    for (k, v) in form_urlencoded::parse(q.unwrap_or_default().as_bytes()) {
        let slot = match k.as_ref() {
            "path" => &mut out.path,
            "username" => &mut out.username,
            "signature" => &mut out.signature,
            "signature_expiration" => &mut out.expiry,
            _ => continue,
        };
        slot.get_or_insert_with(|| v.into_owned());
    }
    out
}

/// Who calls `/files`: the sandbox named by `E2b-Sandbox-Id` with its access token, or else
/// the live sandbox whose token made the URL's signature (docs/e2b.md, "Signed URLs"). The
/// answers for the rest are E2B's: 401 for a wrong or expired signature or a missing token,
/// 502 for a sandbox that is not there. The sandbox found goes into the request's
/// extensions for the handlers, with [`SignedOnly`] when a signature let the caller in; the
/// answer is its owner.
pub fn caller(state: &E2bState, req: &mut Request) -> Result<String, Denied> {
    let found = identify(state, req)?;
    let owner = found.0.owner.clone();
    req.extensions_mut().insert(found.0);
    if found.1 {
        req.extensions_mut().insert(SignedOnly);
    }
    Ok(owner)
}

/// A signed URL let this caller in: it may write the path it was signed for, nothing else.
#[derive(Clone, Copy)]
pub struct SignedOnly;

/// The sandbox [`caller`] finds, and whether by a signature.
fn identify(state: &E2bState, req: &Request) -> Result<(Arc<Sandbox>, bool), Denied> {
    let headers = req.headers();
    let id = super::auth::sandbox_id(headers).unwrap_or_default();
    if headers.contains_key("x-access-token") || !id.is_empty() {
        if let Some(s) = state.sandboxes.get(id) {
            if super::auth::token_matches(headers, &s.access_token) {
                return Ok((s, false));
            }
        }
    }
    let q = query(req.uri().query());
    if let Some(sig) = q.signature.as_deref() {
        let signed = Signed {
            path: q.path.as_deref().unwrap_or_default(),
            user: q.username.as_deref().unwrap_or_default(),
            signature: sig,
            expiry: q.expiry.as_deref(),
        };
        let op = if req.method() == Method::POST {
            Op::Write
        } else {
            Op::Read
        };
        let now = crate::store::now_ms() / 1000;
        return signature::find(&state.sandboxes, &signed, op, now)
            .map(|s| (s, true))
            .map_err(|e: SignatureError| Denied::Unauthorized(e.to_string()));
    }
    match state.sandboxes.get(id) {
        None => Err(Denied::NoSandbox(id.to_string())),
        Some(_) => Err(Denied::Unauthorized(
            "failed to identify the caller: the access token is missing or not this sandbox's (X-Access-Token), and the URL is not signed".into(),
        )),
    }
}

/// Why [`caller`] found no sandbox.
pub enum Denied {
    /// No live sandbox of the id named: E2B's proxy answer (502).
    NoSandbox(String),
    /// A token or signature that is wrong, missing or expired (401), with the message.
    Unauthorized(String),
}

impl IntoResponse for Denied {
    fn into_response(self) -> Response {
        match self {
            Denied::NoSandbox(id) => super::process::sandbox_not_found(&id),
            Denied::Unauthorized(m) => error(StatusCode::UNAUTHORIZED, m),
        }
    }
}

/// Whether `Accept-Encoding` takes gzip (and does not give it `q=0`).
fn accepts_gzip(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT_ENCODING)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|item| {
            let mut parts = item.split(';').map(str::trim);
            let name = parts.next().unwrap_or_default();
            let zero = parts.any(|p| {
                p.strip_prefix("q=")
                    .and_then(|q| q.parse::<f32>().ok())
                    .is_some_and(|q| q == 0.0)
            });
            name.eq_ignore_ascii_case("gzip") && !zero
        })
}

/// `GET /files`: the file's bytes, at most the size it had when opened (a file the sandbox
/// keeps growing still ends), gzip-encoded when accepted. It ends when the sandbox does: the
/// file is closed and the connection reset at once, so nothing of a killed sandbox's disk is
/// held by a client that reads slowly, or not at all.
pub async fn download(
    State(state): State<Arc<E2bState>>,
    Extension(homes): Extension<Arc<Homes>>,
    Extension(sandbox): Extension<Arc<Sandbox>>,
    Extension(conn): Extension<super::conn::Conn>,
    req: Request,
) -> Response {
    let q = query(req.uri().query());
    let user = match super::home::user_named(q.username.as_deref(), &state.app.config) {
        Ok(u) => u,
        Err(r) => return refused(r),
    };
    let home = match homes.open(&state, &sandbox, user, false).await {
        Ok(h) => h,
        Err(r) => return refused(r),
    };
    let p = match home.resolve(q.path.as_deref().unwrap_or_default()) {
        Ok(p) => p,
        Err(r) => return refused(r),
    };
    let gzip = accepts_gzip(req.headers());
    let opened = tokio::task::spawn_blocking(move || home.ws.open_file(&p.rel)).await;
    let (file, st) = match opened {
        Ok(Ok(f)) => f,
        Ok(Err(e)) => return refused(e.into()),
        Err(e) => {
            return error(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("failed to open the file: {e}"),
            )
        }
    };
    let size = st.st_size.max(0) as u64;
    let (tx, rx) = mpsc::channel::<io::Result<Bytes>>(IN_FLIGHT);
    let runtime = tokio::runtime::Handle::current();
    let killed = sandbox.killed.clone();
    tokio::task::spawn_blocking(move || {
        send_file(file, size, gzip, |item| {
            runtime.block_on(async {
                tokio::select! {
                    biased;
                    _ = killed.cancelled() => {
                        // hyper writes nothing more once the client stops reading, so only
                        // a reset ends the connection of a client that stalled.
                        conn.reset();
                        false
                    }
                    sent = tx.send_timeout(item, IDLE) => sent.is_ok(),
                }
            })
        })
    });
    let body = Body::from_stream(until_killed(rx, sandbox.killed.clone()));
    let mut resp = (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/octet-stream")],
        body,
    )
        .into_response();
    let h = resp.headers_mut();
    if gzip {
        h.insert(
            header::CONTENT_ENCODING,
            header::HeaderValue::from_static("gzip"),
        );
    } else {
        // The exact length: a file that shrinks as it is read, or a client that stalls past
        // [`IDLE`], ends the body short, which the client sees as an error, never as the
        // whole file (a gzip stream cut short fails its own check).
        h.insert(header::CONTENT_LENGTH, header::HeaderValue::from(size));
    }
    resp
}

/// The chunks `rx` yields, ended by an error (never a clean end, which a client could take
/// for the whole file) when the sandbox is killed.
fn until_killed(
    rx: mpsc::Receiver<io::Result<Bytes>>,
    killed: tokio_util::sync::CancellationToken,
) -> impl futures::Stream<Item = io::Result<Bytes>> {
    futures::stream::unfold(Some((rx, killed)), |state| async move {
        let (mut rx, killed) = state?;
        tokio::select! {
            biased;
            _ = killed.cancelled() => Some((Err(io::Error::other("the sandbox was killed")), None)),
            item = rx.recv() => item.map(|i| (i, Some((rx, killed)))),
        }
    })
}

/// Reads at most `size` bytes of `file` into `send`, gzip-encoded if asked; stops when
/// `send` says the client is gone (or stalled).
fn send_file(
    file: std::fs::File,
    size: u64,
    gzip: bool,
    mut send: impl FnMut(io::Result<Bytes>) -> bool,
) {
    let mut src = file.take(size);
    let mut buf = vec![0u8; CHUNK];
    let mut enc =
        gzip.then(|| flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast()));
    loop {
        let n = match src.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => {
                send(Err(e));
                return;
            }
        };
        let chunk = match enc.as_mut() {
            None => Bytes::copy_from_slice(&buf[..n]),
            Some(enc) => {
                if let Err(e) = enc.write_all(&buf[..n]) {
                    send(Err(e));
                    return;
                }
                Bytes::from(std::mem::take(enc.get_mut()))
            }
        };
        if !chunk.is_empty() && !send(Ok(chunk)) {
            return;
        }
    }
    if let Some(enc) = enc {
        send(enc.finish().map(Bytes::from));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_and_encodings_read_as_e2b_sends_them() {
        let q = query(Some("path=%2Fhome%2Fuser%2Fa%20b.txt&username=user&signature=v1_x&signature_expiration=12&path=second"));
        assert_eq!(q.path.as_deref(), Some("/home/user/a b.txt"));
        assert_eq!(q.username.as_deref(), Some("user"));
        assert_eq!(q.signature.as_deref(), Some("v1_x"));
        assert_eq!(q.expiry.as_deref(), Some("12"));
        let h = |v: &str| {
            let mut m = HeaderMap::new();
            m.insert(header::ACCEPT_ENCODING, v.parse().unwrap());
            m
        };
        assert!(accepts_gzip(&h("gzip")));
        assert!(accepts_gzip(&h("deflate, GZIP;q=0.5")));
        assert!(!accepts_gzip(&h("gzip;q=0")));
        assert!(!accepts_gzip(&h("identity")));
        assert!(!accepts_gzip(&HeaderMap::new()));
    }

    #[tokio::test]
    async fn a_download_ends_with_an_error_when_its_sandbox_is_killed() {
        use futures::StreamExt;
        let (tx, rx) = mpsc::channel(IN_FLIGHT);
        let killed = tokio_util::sync::CancellationToken::new();
        let mut body = Box::pin(until_killed(rx, killed.clone()));
        tx.send(Ok(Bytes::from_static(b"a"))).await.unwrap();
        assert_eq!(body.next().await.unwrap().unwrap(), "a");
        tx.send(Ok(Bytes::from_static(b"b"))).await.unwrap();
        killed.cancel();
        let err = body.next().await.unwrap().unwrap_err();
        assert_eq!(err.to_string(), "the sandbox was killed");
        assert!(body.next().await.is_none());
        drop(body);
        assert!(tx.is_closed(), "the reader of the file is told to stop");
    }

    #[test]
    fn downloads_stream_within_the_size_at_open_and_gzip_round_trips() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let data: Vec<u8> = (0..(CHUNK * 3 + 17)).map(|i| (i % 251) as u8).collect();
        std::fs::write(&path, &data).unwrap();
        for gzip in [false, true] {
            let (tx, mut rx) = mpsc::channel(IN_FLIGHT);
            let file = std::fs::File::open(&path).unwrap();
            // Only the first 1000 bytes: the size when it was opened.
            let t = std::thread::spawn(move || {
                send_file(file, 1000, gzip, |item| tx.blocking_send(item).is_ok())
            });
            let mut got = Vec::new();
            while let Some(chunk) = rx.blocking_recv() {
                got.extend_from_slice(&chunk.unwrap());
            }
            t.join().unwrap();
            if gzip {
                let mut plain = Vec::new();
                flate2::read::GzDecoder::new(&got[..])
                    .read_to_end(&mut plain)
                    .unwrap();
                got = plain;
            }
            assert_eq!(got, &data[..1000], "gzip {gzip}");
        }
    }
}
