//! `POST /files`, E2B's uploads (docs/e2b.md, "Files"): one file as
//! `application/octet-stream` (gzip when so encoded, `?path=`) or many as
//! `multipart/form-data` named by full paths, each written through moat's confined file layer
//! as the sandbox's user with the upload's metadata (`X-Metadata-*`) as `user.e2b.*` extended
//! attributes. Bytes go from the connection to a blocking writer through a channel of a few
//! chunks, and the multipart parser may hold only a little beyond what it passed on, so memory
//! stays bounded whatever the size; a refused upload reads the rest of its body (bounded)
//! before it answers.

use std::io::{self, Read};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use futures::StreamExt;
use serde_json::json;
use tokio::sync::mpsc;

use super::files::{error, query, refused, Query, SignedOnly, IDLE, IN_FLIGHT};
use super::home::{Homes, Refusal};
use super::paths::{resolve_for, HomePath};
use super::sandboxes::Sandbox;
use super::state::E2bState;
use crate::files::Workspace;

/// The most one uploaded file may hold (after gzip is undone); the session's disk bound,
/// when lower, is the bound that holds.
const MAX_FILE_BYTES: u64 = 8 << 30;
/// The most a multipart body may hold in all.
const MAX_MULTIPART_BYTES: u64 = 8 << 30;
/// The most files one multipart upload may name.
const MAX_PARTS: usize = 10_000;

/// A blocking reader of the chunks a connection sends through a channel.
struct ChannelReader {
    rx: mpsc::Receiver<io::Result<Bytes>>,
    current: Bytes,
}

impl Read for ChannelReader {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        while self.current.is_empty() {
            match self.rx.blocking_recv() {
                None => return Ok(0),
                Some(Ok(b)) => self.current = b,
                Some(Err(e)) => return Err(e),
            }
        }
        let n = out.len().min(self.current.len());
        out[..n].copy_from_slice(&self.current[..n]);
        let _ = self.current.split_to(n);
        Ok(n)
    }
}

/// The prefix of the extended attributes that hold a file's E2B metadata.
pub const META_PREFIX: &str = "user.e2b.";
/// The most metadata keys one upload may set.
const MAX_META: usize = 32;
/// The longest metadata key: the attribute's whole name stays within the kernel's 255 bytes.
const MAX_META_KEY: usize = 200;

/// The upload's metadata (`X-Metadata-<key>: <value>`) as the attributes every file of it
/// gets: `user.e2b.<key, lowercased>`. Keys are HTTP tokens already (they are header names);
/// values printable ASCII, at most [`MAX_VALUE`](crate::files::xattr::MAX_VALUE) bytes.
fn metadata(headers: &HeaderMap) -> Result<Vec<(String, Vec<u8>)>, String> {
    let mut out: Vec<(String, Vec<u8>)> = Vec::new();
    for (name, value) in headers {
        let Some(key) = name.as_str().strip_prefix("x-metadata-") else {
            continue;
        };
        let bad = |why: &str| {
            format!(
                "failed to read the metadata `{}`: {why}",
                crate::output::escape_display(&key.chars().take(64).collect::<String>())
            )
        };
        if key.is_empty() || key.len() > MAX_META_KEY {
            return Err(bad(&format!("a key is 1 to {MAX_META_KEY} bytes")));
        }
        let value = value.as_bytes();
        if value.len() > crate::files::xattr::MAX_VALUE
            || !value.iter().all(|b| (0x20..0x7f).contains(b))
        {
            return Err(bad(&format!(
                "a value is printable ASCII of at most {} bytes",
                crate::files::xattr::MAX_VALUE
            )));
        }
        let attr = format!("{META_PREFIX}{}", key.to_ascii_lowercase());
        if out.iter().any(|(n, _)| *n == attr) {
            continue;
        }
        if out.len() >= MAX_META {
            return Err(bad(&format!("an upload sets at most {MAX_META} keys")));
        }
        out.push((attr, value.to_vec()));
    }
    Ok(out)
}

/// What an upload answers for one file: E2B's `WriteInfo`.
fn write_info(p: &HomePath, attrs: &[(String, Vec<u8>)]) -> serde_json::Value {
    let mut v = json!({"name": p.name(), "type": "file", "path": p.shown()});
    if !attrs.is_empty() {
        let meta: serde_json::Map<String, serde_json::Value> = attrs
            .iter()
            .map(|(n, value)| {
                let key = n.strip_prefix(META_PREFIX).unwrap_or(n).to_string();
                (key, String::from_utf8_lossy(value).into_owned().into())
            })
            .collect();
        v["metadata"] = meta.into();
    }
    v
}

/// The bound one file is written within: [`MAX_FILE_BYTES`], or the workspace's, if lower.
fn file_bound(state: &E2bState) -> u64 {
    match state.app.config.sandbox.workspace_max() {
        0 => MAX_FILE_BYTES,
        m => m.min(MAX_FILE_BYTES),
    }
}

/// Writes one file at `p` from what `chunks` yields (gunzipped when `gzip`), through the
/// confined layer; the body is read only as fast as the disk takes it.
async fn write_one<S, E>(
    ws: Arc<Workspace>,
    p: &HomePath,
    gzip: bool,
    max: u64,
    attrs: Arc<Vec<(String, Vec<u8>)>>,
    chunks: &mut S,
) -> Result<serde_json::Value, Refusal>
where
    S: futures::Stream<Item = Result<Bytes, E>> + Unpin,
    E: std::fmt::Display,
{
    let (tx, rx) = mpsc::channel::<io::Result<Bytes>>(IN_FLIGHT);
    let rel = p.rel.clone();
    let set = attrs.clone();
    let writer = tokio::task::spawn_blocking(move || {
        let entry = ws.entry(&rel, true)?;
        let reader = ChannelReader {
            rx,
            current: Bytes::new(),
        };
        let mut src: Box<dyn Read> = if gzip {
            Box::new(flate2::read::MultiGzDecoder::new(reader))
        } else {
            Box::new(reader)
        };
        entry.write_in_place_from(&mut src, max, ws.owner(), &set)
    });
    loop {
        let item = match tokio::time::timeout(IDLE, chunks.next()).await {
            Ok(None) => break,
            Ok(Some(chunk)) => {
                chunk.map_err(|e| io::Error::other(format!("the upload broke off: {e}")))
            }
            Err(_) => Err(io::Error::other(format!(
                "the upload stalled: nothing came for {} s",
                IDLE.as_secs()
            ))),
        };
        let failed = item.is_err();
        if tx.send(item).await.is_err() || failed {
            break;
        }
    }
    drop(tx);
    match writer.await {
        Ok(Ok(_)) => Ok(write_info(p, &attrs)),
        Ok(Err(e)) => Err(e.into()),
        Err(e) => Err(Refusal::new(
            super::connect::Code::Internal,
            format!("failed to write the file: {e}"),
        )),
    }
}

/// `POST /files`: one file (`application/octet-stream`, `?path=`, maybe `Content-Encoding:
/// gzip`) or many (`multipart/form-data`, parts named `file`, each file name a full path;
/// `?path=` names the first). Answers `[{"name", "type": "file", "path"}]`, one per file.
pub async fn upload(
    State(state): State<Arc<E2bState>>,
    Extension(homes): Extension<Arc<Homes>>,
    Extension(sandbox): Extension<Arc<Sandbox>>,
    signed: Option<Extension<SignedOnly>>,
    req: Request,
) -> Response {
    let q = query(req.uri().query());
    let headers = req.headers().clone();
    let mut body = req.into_body().into_data_stream();
    let at = Upload {
        state: &state,
        homes: &homes,
        sandbox: &sandbox,
        signed: signed.is_some(),
        q: &q,
        headers: &headers,
    };
    let answer = at.take(&mut body).await;
    if !answer.status().is_success() {
        drain(&mut body).await;
    }
    answer
}

/// What an upload's refusal reads of the rest of its body before it answers, and for how
/// long: a client still sending when the connection closes reads a broken pipe, not the
/// answer (E2B's SDK raises that instead of the refusal). Past either bound the connection
/// closes anyway.
const MAX_DRAIN: usize = 8 << 20;
const DRAIN_FOR: std::time::Duration = std::time::Duration::from_secs(10);

async fn drain(body: &mut axum::body::BodyDataStream) {
    let _ = tokio::time::timeout(DRAIN_FOR, async {
        let mut read = 0;
        while let Some(Ok(chunk)) = body.next().await {
            read += chunk.len();
            if read > MAX_DRAIN {
                break;
            }
        }
    })
    .await;
}

/// One upload's request, apart from its body.
struct Upload<'a> {
    state: &'a E2bState,
    homes: &'a Homes,
    sandbox: &'a Sandbox,
    /// A signed URL let the caller in ([`SignedOnly`]).
    signed: bool,
    q: &'a Query,
    headers: &'a HeaderMap,
}

impl Upload<'_> {
    /// Writes what `body` holds; what it did not read is the caller's to drain.
    async fn take(&self, body: &mut axum::body::BodyDataStream) -> Response {
        let q = self.q;
        let user = match super::home::user_named(q.username.as_deref(), &self.state.app.config) {
            Ok(u) => u,
            Err(r) => return refused(r),
        };
        let attrs = match metadata(self.headers) {
            Ok(a) => Arc::new(a),
            Err(m) => return error(StatusCode::BAD_REQUEST, m),
        };
        let content_type = self
            .headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string();
        let gzip = match self
            .headers
            .get(header::CONTENT_ENCODING)
            .map(|v| v.to_str())
        {
            None => false,
            Some(Ok(v)) if v.trim().eq_ignore_ascii_case("gzip") => true,
            Some(Ok(v)) if v.trim().eq_ignore_ascii_case("identity") => false,
            Some(_) => {
                return error(
                    StatusCode::BAD_REQUEST,
                    "failed to read the upload: its Content-Encoding is not gzip",
                )
            }
        };
        // A path named in the query is checked before anything is opened or read.
        let named = match q
            .path
            .as_deref()
            .map(|p| resolve_for(p, user.home()))
            .transpose()
        {
            Ok(p) => p,
            Err(e) => return refused(e.into()),
        };
        let multipart = content_type
            .trim()
            .to_ascii_lowercase()
            .starts_with("multipart/");
        if !multipart && named.is_none() {
            return error(
                StatusCode::BAD_REQUEST,
                "failed to write the upload: an application/octet-stream upload needs ?path=",
            );
        }
        let home = match self.homes.open(self.state, self.sandbox, user, true).await {
            Ok(h) => h,
            Err(r) => return refused(r),
        };
        let user_home = home.user.home();
        let home = Arc::new(home.ws);
        let max = file_bound(self.state);
        if !multipart {
            let p = named.expect("checked above");
            return match write_one(home, &p, gzip, max, attrs, body).await {
                Ok(v) => Json(json!([v])).into_response(),
                Err(r) => refused(r),
            };
        }
        let boundary = match multer::parse_boundary(&content_type) {
            Ok(b) => b,
            Err(e) => {
                return error(
                    StatusCode::BAD_REQUEST,
                    format!(
                        "failed to read the multipart upload: {}",
                        crate::error_chain::error_chain(&e)
                    ),
                )
            }
        };
        if gzip {
            return error(
                StatusCode::BAD_REQUEST,
                "failed to read the upload: a multipart body is not gzip-encoded (send one file as application/octet-stream to compress it)",
            );
        }
        let to = Parts {
            ws: home,
            user_home,
            first: named,
            signed: self.signed,
            max,
            attrs,
        };
        to.write(body, boundary).await
    }
}

/// The most body bytes the multipart parser may hold that it has not passed on as file
/// content, plus [`PART_HEAD`] for each part: it buffers a part's headers whole, so without
/// this a part whose headers never end would be held in memory up to the body's bound.
const MAX_PARSER_HOLD: u64 = 1 << 20;
/// What each part's headers and boundary may add to [`MAX_PARSER_HOLD`]: a full path's file
/// name and then some.
const PART_HEAD: u64 = 16 << 10;

/// The body as the multipart parser reads it, cut off with an error once the parser holds
/// more than it may ([`MAX_PARSER_HOLD`]).
struct Held<S> {
    inner: S,
    /// Bytes handed to the parser.
    fed: u64,
    /// Bytes the parser passed on as file content, and parts begun, counted by the reader.
    taken: Arc<AtomicU64>,
    parts: Arc<AtomicU64>,
}

impl<S> futures::Stream for Held<S>
where
    S: futures::Stream<Item = Result<Bytes, axum::Error>> + Unpin,
{
    type Item = io::Result<Bytes>;

    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Self::Item>> {
        let item = std::task::ready!(std::pin::Pin::new(&mut self.inner).poll_next(cx));
        std::task::Poll::Ready(item.map(|r| {
            let b = r.map_err(io::Error::other)?;
            self.fed += b.len() as u64;
            let allowed = MAX_PARSER_HOLD
                + PART_HEAD * self.parts.load(Ordering::Relaxed)
                + self.taken.load(Ordering::Relaxed);
            if self.fed > allowed {
                return Err(io::Error::other(format!(
                    "more than {MAX_PARSER_HOLD} bytes of it are not file content (a part's headers that never end?)"
                )));
            }
            Ok(b)
        }))
    }
}

/// Where a multipart upload's files go: `first` names the first (`?path=`); `signed`: a
/// signed URL let the caller in, so only that path may be written.
struct Parts {
    ws: Arc<Workspace>,
    /// The calling user's home: what `~` and relative file names mean.
    user_home: &'static str,
    first: Option<HomePath>,
    signed: bool,
    max: u64,
    attrs: Arc<Vec<(String, Vec<u8>)>>,
}

impl Parts {
    /// The files of a multipart upload, one after the other as they arrive.
    async fn write(self, body: &mut axum::body::BodyDataStream, boundary: String) -> Response {
        let Parts {
            ws,
            user_home,
            first: first_path,
            signed,
            max,
            attrs,
        } = self;
        let limits = multer::Constraints::new().size_limit(
            multer::SizeLimit::new()
                .whole_stream(MAX_MULTIPART_BYTES)
                .per_field(max.saturating_add(1)),
        );
        let taken = Arc::new(AtomicU64::new(0));
        let parts_seen = Arc::new(AtomicU64::new(0));
        let held = Held {
            inner: body,
            fed: 0,
            taken: taken.clone(),
            parts: parts_seen.clone(),
        };
        let mut parts = multer::Multipart::with_constraints(held, boundary, limits);
        let mut written = Vec::new();
        loop {
            let field = match parts.next_field().await {
                Ok(Some(f)) => f,
                Ok(None) => break,
                Err(e) => {
                    return error(
                        StatusCode::BAD_REQUEST,
                        format!(
                            "failed to read the multipart upload: {}",
                            crate::error_chain::error_chain(&e)
                        ),
                    )
                }
            };
            parts_seen.fetch_add(1, Ordering::Relaxed);
            if field.name() != Some("file") {
                continue;
            }
            if written.len() >= MAX_PARTS || (signed && !written.is_empty()) {
                let why = if signed {
                    "a signed URL writes the one path it was signed for".to_string()
                } else {
                    format!("it holds more than {MAX_PARTS} files")
                };
                return error(
                    StatusCode::BAD_REQUEST,
                    format!("failed to read the multipart upload: {why}"),
                );
            }
            let p = match (&first_path, written.is_empty()) {
            (Some(p), true) => p.clone(),
            _ if signed => {
                return error(
                    StatusCode::BAD_REQUEST,
                    "failed to read the multipart upload: a signed URL writes the one path it was signed for (?path=)",
                )
            }
            _ => match field
                .file_name()
                .filter(|n| !n.is_empty())
                .map(|n| resolve_for(n, user_home))
            {
                Some(Ok(p)) => p,
                Some(Err(e)) => return refused(e.into()),
                None => {
                    return error(
                        StatusCode::BAD_REQUEST,
                        "failed to read the multipart upload: a part names no file (its filename is the file's full path, or ?path= for one file)",
                    )
                }
            },
        };
            let counted = taken.clone();
            let mut content = field.inspect(move |c| {
                if let Ok(b) = c {
                    counted.fetch_add(b.len() as u64, Ordering::Relaxed);
                }
            });
            match write_one(ws.clone(), &p, false, max, attrs.clone(), &mut content).await {
                Ok(v) => written.push(v),
                Err(r) => return refused(r),
            }
        }
        if written.is_empty() {
            return error(
                StatusCode::BAD_REQUEST,
                "failed to read the multipart upload: it holds no part named `file`",
            );
        }
        Json(written).into_response()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_headers_become_attributes_within_bounds() {
        let h = |pairs: &[(&str, &str)]| {
            let mut m = HeaderMap::new();
            for (k, v) in pairs {
                m.append(
                    axum::http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                    v.parse().unwrap(),
                );
            }
            m
        };
        let got = metadata(&h(&[
            ("X-Metadata-Author", "mish"),
            ("x-other", "no"),
            ("X-Metadata-Tag", "a b"),
        ]))
        .unwrap();
        assert_eq!(
            got,
            vec![
                ("user.e2b.author".to_string(), b"mish".to_vec()),
                ("user.e2b.tag".to_string(), b"a b".to_vec())
            ]
        );
        let info = write_info(&super::super::paths::resolve("d/f").unwrap(), &got);
        assert_eq!(info["metadata"], json!({"author": "mish", "tag": "a b"}));
        assert!(write_info(&super::super::paths::resolve("f").unwrap(), &[])
            .get("metadata")
            .is_none());
        let long = "k".repeat(MAX_META_KEY + 1);
        assert!(metadata(&h(&[(&format!("x-metadata-{long}"), "v")])).is_err());
        let big = "v".repeat(crate::files::xattr::MAX_VALUE + 1);
        assert!(metadata(&h(&[("x-metadata-k", &big)])).is_err());
        let many: Vec<(String, &str)> = (0..=MAX_META)
            .map(|i| (format!("x-metadata-k{i}"), "v"))
            .collect();
        let many: Vec<(&str, &str)> = many.iter().map(|(k, v)| (k.as_str(), *v)).collect();
        assert!(metadata(&h(&many)).unwrap_err().contains("at most"));
    }

    #[tokio::test]
    async fn the_parser_may_hold_only_its_bound_beyond_the_content_it_passed_on() {
        let run = |taken: u64, parts: u64| async move {
            let chunks: Vec<Result<Bytes, axum::Error>> = (0..40)
                .map(|_| Ok(Bytes::from(vec![b'x'; 64 << 10])))
                .collect();
            let mut held = Held {
                inner: futures::stream::iter(chunks),
                fed: 0,
                taken: Arc::new(AtomicU64::new(taken)),
                parts: Arc::new(AtomicU64::new(parts)),
            };
            let mut passed = 0;
            while let Some(item) = held.next().await {
                match item {
                    Ok(_) => passed += 1,
                    Err(e) => {
                        assert!(e.to_string().contains("not file content"), "{e}");
                        return passed;
                    }
                }
            }
            passed
        };
        // 1 MiB in 64 KiB chunks, and no more, when nothing was passed on as content.
        assert_eq!(run(0, 0).await, 16);
        assert_eq!(run(0, 8).await, 18, "each part adds room for its headers");
        assert_eq!(run(4 << 20, 0).await, 40, "content passed on frees room");
    }

    #[test]
    fn a_channel_reads_as_a_stream_and_passes_errors_on() {
        let (tx, rx) = mpsc::channel(4);
        tx.try_send(Ok(Bytes::from_static(b"ab"))).unwrap();
        tx.try_send(Ok(Bytes::new())).unwrap();
        tx.try_send(Ok(Bytes::from_static(b"cde"))).unwrap();
        tx.try_send(Err(io::Error::other("cut"))).unwrap();
        drop(tx);
        let mut r = ChannelReader {
            rx,
            current: Bytes::new(),
        };
        let mut out = Vec::new();
        let err = r.read_to_end(&mut out).unwrap_err();
        assert_eq!(out, b"abcde");
        assert_eq!(err.to_string(), "cut");
    }
}
