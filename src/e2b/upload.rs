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
use tokio_util::sync::CancellationToken;

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
/// The most parts one multipart upload may hold, whatever their names: each costs a turn of
/// the parser and its headers.
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

/// Why an upload stopped before it answered.
#[derive(Debug)]
enum Stop {
    /// The confined layer's refusal, or a broken or stalled body, as E2B's error.
    Refused(Refusal),
    /// The body is not one moat takes (400), with the sentence.
    Bad(String),
    /// The sandbox was killed meanwhile: nothing more is read or written.
    Killed,
}

impl From<Refusal> for Stop {
    fn from(r: Refusal) -> Self {
        Stop::Refused(r)
    }
}

impl Stop {
    fn answer(self, sandbox: &Sandbox) -> Response {
        match self {
            Stop::Refused(r) => refused(r),
            Stop::Bad(m) => error(StatusCode::BAD_REQUEST, m),
            Stop::Killed => super::process::sandbox_not_found(&sandbox.id),
        }
    }
}

/// `fut`, the wait for the client's next bytes, given up after [`IDLE`] with nothing (a
/// sentence saying what stalled), or at once when the sandbox is killed.
async fn wait<T>(
    killed: &CancellationToken,
    what: &str,
    fut: impl std::future::Future<Output = T>,
) -> Result<T, Stop> {
    tokio::select! {
        biased;
        _ = killed.cancelled() => Err(Stop::Killed),
        r = tokio::time::timeout(IDLE, fut) => r.map_err(|_| {
            Stop::Bad(format!(
                "failed to read {what}: it stalled, nothing came for {} s",
                IDLE.as_secs()
            ))
        }),
    }
}

/// Writes one file at `p` from what `chunks` yields (gunzipped when `gzip`), through the
/// confined layer; the body is read only as fast as the disk takes it, and not at all once
/// the sandbox is killed.
#[allow(clippy::too_many_arguments)]
async fn write_one<S, E>(
    ws: Arc<Workspace>,
    p: &HomePath,
    gzip: bool,
    max: u64,
    attrs: Arc<Vec<(String, Vec<u8>)>>,
    chunks: &mut S,
    killed: &CancellationToken,
) -> Result<serde_json::Value, Stop>
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
        entry.write_in_place_from(&mut src, max, ws.owner(), META_PREFIX, &set)
    });
    let mut was_killed = false;
    loop {
        let item = match wait(killed, "the upload", chunks.next()).await {
            Ok(None) => break,
            Ok(Some(chunk)) => {
                chunk.map_err(|e| io::Error::other(format!("the upload broke off: {e}")))
            }
            Err(Stop::Bad(_)) => Err(io::Error::other(format!(
                "the upload stalled: nothing came for {} s",
                IDLE.as_secs()
            ))),
            Err(_) => {
                was_killed = true;
                Err(io::Error::other("the sandbox was killed"))
            }
        };
        let failed = item.is_err();
        if tx.send(item).await.is_err() || failed {
            break;
        }
    }
    drop(tx);
    // The writer ends at once on the error sent it, leaving the old file whole.
    let done = writer.await;
    if was_killed {
        return Err(Stop::Killed);
    }
    match done {
        Ok(Ok(_)) => Ok(write_info(p, &attrs)),
        Ok(Err(e)) => Err(Stop::Refused(e.into())),
        Err(e) => Err(Stop::Refused(Refusal::new(
            super::connect::Code::Internal,
            format!("failed to write the file: {e}"),
        ))),
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
    match at.take(&mut body).await {
        Ok(answer) => answer,
        // A killed sandbox's upload ends here: nothing more is read, and the connection
        // closes with the answer (docs/e2b.md, "Files").
        Err(Stop::Killed) => Stop::Killed.answer(&sandbox),
        Err(stop) => {
            let answer = stop.answer(&sandbox);
            drain(&mut body, &sandbox.killed).await;
            answer
        }
    }
}

/// What an upload's refusal reads of the rest of its body before it answers, and for how
/// long: a client still sending when the connection closes reads a broken pipe, not the
/// answer (E2B's SDK raises that instead of the refusal). Past either bound the connection
/// closes anyway.
const MAX_DRAIN: usize = 8 << 20;
const DRAIN_FOR: std::time::Duration = std::time::Duration::from_secs(10);

async fn drain(body: &mut axum::body::BodyDataStream, killed: &CancellationToken) {
    let _ = tokio::time::timeout(DRAIN_FOR, async {
        let mut read = 0;
        loop {
            let chunk = tokio::select! {
                biased;
                _ = killed.cancelled() => break,
                c = body.next() => c,
            };
            let Some(Ok(chunk)) = chunk else { break };
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
    async fn take(&self, body: &mut axum::body::BodyDataStream) -> Result<Response, Stop> {
        let q = self.q;
        let user = super::home::user_named(q.username.as_deref(), &self.state.app.config)?;
        let attrs = Arc::new(metadata(self.headers).map_err(Stop::Bad)?);
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
                return Err(Stop::Bad(
                    "failed to read the upload: its Content-Encoding is not gzip".into(),
                ))
            }
        };
        // A path named in the query is checked before anything is opened or read.
        let named = q
            .path
            .as_deref()
            .map(|p| resolve_for(p, user.home()))
            .transpose()
            .map_err(Refusal::from)?;
        let multipart = content_type
            .trim()
            .to_ascii_lowercase()
            .starts_with("multipart/");
        if !multipart && named.is_none() {
            return Err(Stop::Bad(
                "failed to write the upload: an application/octet-stream upload needs ?path="
                    .into(),
            ));
        }
        let home = self
            .homes
            .open(self.state, self.sandbox, user, true)
            .await?;
        let user_home = home.user.home();
        let home = Arc::new(home.ws);
        let max = file_bound(self.state);
        let killed = &self.sandbox.killed;
        if !multipart {
            let p = named.expect("checked above");
            let v = write_one(home, &p, gzip, max, attrs, body, killed).await?;
            return Ok(Json(json!([v])).into_response());
        }
        let boundary = multer::parse_boundary(&content_type).map_err(|e| {
            Stop::Bad(format!(
                "failed to read the multipart upload: {}",
                crate::error_chain::error_chain(&e)
            ))
        })?;
        if gzip {
            return Err(Stop::Bad(
                "failed to read the upload: a multipart body is not gzip-encoded (send one file as application/octet-stream to compress it)".into(),
            ));
        }
        let to = Parts {
            ws: home,
            user_home,
            first: named,
            signed: self.signed,
            max,
            attrs,
        };
        let reader = PartReader::new(body, boundary, max, killed.clone());
        to.write(reader).await
    }
}

/// The most body bytes the multipart parser may hold that are not yet accounted for as file
/// content passed on or as boundaries and headers of parts it parsed: it buffers a part's
/// headers whole, so without this a part whose headers never end would be held in memory up
/// to the body's bound. A constant, whatever the body held before.
const MAX_PARSER_HOLD: u64 = 1 << 20;
/// What the parser holds before it is made to use some of it up: it reads every chunk the
/// connection has ready before it parses, so it is given a turn here, and fed more past this
/// only while it can do nothing with what it holds.
const PARSER_TURN: u64 = 256 << 10;
/// The longest boundary line and headers one part may have: a full path's file name, quoted
/// and escaped, and then some.
const PART_HEAD: u64 = 16 << 10;

/// The body as the multipart parser reads it: held back once the parser holds
/// [`PARSER_TURN`] it has not used up (so it parses what it has), and cut off with an error
/// once it holds more than [`MAX_PARSER_HOLD`] that it cannot use.
struct Held<S> {
    inner: S,
    /// Bytes handed to the parser.
    fed: u64,
    /// Bytes of the body the parser used up, as counted by [`PartReader`]: the content it
    /// passed on (of every part) and each part's boundary and headers, never more than it
    /// really read, so what it holds is at most `fed - accounted`.
    accounted: Arc<AtomicU64>,
    /// `accounted` when the body was last held back: the same value at the next read means
    /// the parser had its turn and used nothing up, so it needs more bytes.
    held_at: Option<u64>,
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
        let accounted = self.accounted.load(Ordering::Relaxed);
        if self.fed.saturating_sub(accounted) >= PARSER_TURN && self.held_at != Some(accounted) {
            // The parser goes on with what it holds; this task is polled again at once.
            self.held_at = Some(accounted);
            cx.waker().wake_by_ref();
            return std::task::Poll::Pending;
        }
        let item = std::task::ready!(std::pin::Pin::new(&mut self.inner).poll_next(cx));
        std::task::Poll::Ready(item.map(|r| {
            let b = r.map_err(io::Error::other)?;
            self.fed += b.len() as u64;
            if self.fed.saturating_sub(accounted) > MAX_PARSER_HOLD {
                return Err(io::Error::other(format!(
                    "more than {MAX_PARSER_HOLD} bytes of it are not file content (a part's headers that never end?)"
                )));
            }
            Ok(b)
        }))
    }
}

/// The bytes a part's boundary line and headers took at least: `\r\n` (after the first
/// part's content) and `--BOUNDARY\r\n`, each header as `name:value\r\n` (the parser trims
/// the spaces it allowed), and the blank line. Never more than the body really held, so
/// crediting it cannot let the parser hold more than [`MAX_PARSER_HOLD`].
fn head_bytes(boundary: usize, first: bool, headers: &HeaderMap) -> u64 {
    let line = boundary as u64 + if first { 4 } else { 6 };
    let fields: u64 = headers
        .iter()
        .map(|(n, v)| (n.as_str().len() + v.as_bytes().len() + 3) as u64)
        .sum();
    line + fields + 2
}

/// A part's content as it is read, each chunk counted as used up by the parser.
struct Counted<'r> {
    field: multer::Field<'r>,
    accounted: Arc<AtomicU64>,
}

impl futures::Stream for Counted<'_> {
    type Item = multer::Result<Bytes>;

    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Self::Item>> {
        let item = std::task::ready!(std::pin::Pin::new(&mut self.field).poll_next(cx));
        if let Some(Ok(b)) = &item {
            self.accounted.fetch_add(b.len() as u64, Ordering::Relaxed);
        }
        std::task::Poll::Ready(item)
    }
}

/// A multipart body's parts as they arrive: every part counts against [`MAX_PARTS`] and
/// [`PART_HEAD`], whatever its name; parts not named `file` are read through and left; the
/// parser holds at most [`MAX_PARSER_HOLD`] of what it has not used up; every wait for the
/// client ends after [`IDLE`] or when the sandbox is killed.
struct PartReader<'r> {
    parts: multer::Multipart<'r>,
    /// What the parser used up, shared with its [`Held`] input.
    accounted: Arc<AtomicU64>,
    /// The boundary's length, part of each part's boundary line.
    boundary: usize,
    /// Parts seen, of any name.
    seen: usize,
    killed: CancellationToken,
}

impl<'r> PartReader<'r> {
    /// `per_part`: the most content one part may hold.
    fn new<S>(body: S, boundary: String, per_part: u64, killed: CancellationToken) -> Self
    where
        S: futures::Stream<Item = Result<Bytes, axum::Error>> + Unpin + Send + 'r,
    {
        let limits = multer::Constraints::new().size_limit(
            multer::SizeLimit::new()
                .whole_stream(MAX_MULTIPART_BYTES)
                .per_field(per_part.saturating_add(1)),
        );
        let accounted = Arc::new(AtomicU64::new(0));
        let held = Held {
            inner: body,
            fed: 0,
            accounted: accounted.clone(),
            held_at: None,
        };
        Self {
            boundary: boundary.len(),
            parts: multer::Multipart::with_constraints(held, boundary, limits),
            accounted,
            seen: 0,
            killed,
        }
    }

    fn bad(why: impl std::fmt::Display) -> Stop {
        Stop::Bad(format!("failed to read the multipart upload: {why}"))
    }

    /// The next part named `file`: its file name and its content.
    async fn next_file(&mut self) -> Result<Option<(Option<String>, Counted<'r>)>, Stop> {
        loop {
            let field = match wait(
                &self.killed,
                "the multipart upload",
                self.parts.next_field(),
            )
            .await?
            {
                Ok(Some(f)) => f,
                Ok(None) => return Ok(None),
                Err(e) => return Err(Self::bad(crate::error_chain::error_chain(&e))),
            };
            self.seen += 1;
            if self.seen > MAX_PARTS {
                return Err(Self::bad(format_args!(
                    "it holds more than {MAX_PARTS} parts"
                )));
            }
            let head = head_bytes(self.boundary, self.seen == 1, field.headers());
            if head > PART_HEAD {
                return Err(Self::bad(format_args!(
                    "a part's boundary and headers are longer than {PART_HEAD} bytes"
                )));
            }
            self.accounted.fetch_add(head, Ordering::Relaxed);
            let mut content = Counted {
                field,
                accounted: self.accounted.clone(),
            };
            if content.field.name() == Some("file") {
                let name = content.field.file_name().map(str::to_string);
                return Ok(Some((name, content)));
            }
            // Not a file: read through, so its bytes count as used up.
            while let Some(chunk) =
                wait(&self.killed, "the multipart upload", content.next()).await?
            {
                chunk.map_err(|e| Self::bad(crate::error_chain::error_chain(&e)))?;
            }
        }
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
    async fn write(self, mut reader: PartReader<'_>) -> Result<Response, Stop> {
        let Parts {
            ws,
            user_home,
            first: first_path,
            signed,
            max,
            attrs,
        } = self;
        let mut written = Vec::new();
        while let Some((file_name, mut content)) = reader.next_file().await? {
            if signed && !written.is_empty() {
                return Err(PartReader::bad(
                    "a signed URL writes the one path it was signed for",
                ));
            }
            let p = match (&first_path, written.is_empty()) {
                (Some(p), true) => p.clone(),
                _ if signed => {
                    return Err(PartReader::bad(
                        "a signed URL writes the one path it was signed for (?path=)",
                    ))
                }
                _ => match file_name.filter(|n| !n.is_empty()) {
                    Some(n) => resolve_for(&n, user_home).map_err(Refusal::from)?,
                    None => {
                        return Err(PartReader::bad(
                            "a part names no file (its filename is the file's full path, or ?path= for one file)",
                        ))
                    }
                },
            };
            let v = write_one(
                ws.clone(),
                &p,
                false,
                max,
                attrs.clone(),
                &mut content,
                &reader.killed,
            )
            .await?;
            written.push(v);
        }
        if written.is_empty() {
            return Err(PartReader::bad("it holds no part named `file`"));
        }
        Ok(Json(written).into_response())
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
    async fn the_parser_may_hold_only_its_bound_beyond_what_it_used_up() {
        let run = |accounted: u64| async move {
            let chunks: Vec<Result<Bytes, axum::Error>> = (0..40)
                .map(|_| Ok(Bytes::from(vec![b'x'; 64 << 10])))
                .collect();
            let mut held = Held {
                inner: futures::stream::iter(chunks),
                fed: 0,
                accounted: Arc::new(AtomicU64::new(accounted)),
                held_at: None,
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
        // 1 MiB in 64 KiB chunks, and no more, when nothing was used up.
        assert_eq!(run(0).await, 16);
        assert_eq!(run(4 << 20).await, 40, "what was used up frees room");
    }

    /// A body of `pieces` as the connection would hand it over, in 64 KiB chunks, counting
    /// what the parser took of it.
    fn body(
        pieces: Vec<Vec<u8>>,
        taken: Arc<AtomicU64>,
    ) -> impl futures::Stream<Item = Result<Bytes, axum::Error>> + Unpin + Send {
        let all: Vec<u8> = pieces.concat();
        let chunks: Vec<Result<Bytes, axum::Error>> = all
            .chunks(64 << 10)
            .map(|c| Ok(Bytes::copy_from_slice(c)))
            .collect();
        futures::stream::iter(chunks).inspect(move |c| {
            if let Ok(b) = c {
                taken.fetch_add(b.len() as u64, Ordering::Relaxed);
            }
        })
    }

    /// Reads every file part of `pieces` through a [`PartReader`]: the files' (name, size),
    /// or the sentence that stopped it, and how much of the body the parser took.
    async fn parse(pieces: Vec<Vec<u8>>) -> (Result<Vec<(String, usize)>, String>, u64) {
        let taken = Arc::new(AtomicU64::new(0));
        let mut r = PartReader::new(
            body(pieces, taken.clone()),
            "B".into(),
            1 << 30,
            CancellationToken::new(),
        );
        let mut files = Vec::new();
        let got = loop {
            match r.next_file().await {
                Ok(None) => break Ok(files),
                Ok(Some((name, mut content))) => {
                    let mut n = 0;
                    while let Some(c) = content.next().await {
                        n += c.unwrap().len();
                    }
                    files.push((name.unwrap_or_default(), n));
                }
                Err(Stop::Bad(m)) => break Err(m),
                Err(other) => panic!("{other:?}"),
            }
        };
        (got, taken.load(Ordering::Relaxed))
    }

    fn part(name: &str, file: &str, content: &[u8]) -> Vec<u8> {
        let mut p = format!(
            "--B\r\nContent-Disposition: form-data; name=\"{name}\"; filename=\"{file}\"\r\nContent-Type:   application/octet-stream\r\n\r\n"
        )
        .into_bytes();
        p.extend_from_slice(content);
        p.extend_from_slice(b"\r\n");
        p
    }

    #[tokio::test]
    async fn multipart_bodies_are_parsed_within_constant_bounds() {
        // Files pass whole, however many small parts and big contents come before; a big
        // part of another name is read through and counts as used up.
        let mut pieces = vec![part("other", "", &vec![b'o'; 3 << 20])];
        for i in 0..2000 {
            pieces.push(part("file", &format!("/home/user/d/{i}"), b"tiny"));
        }
        pieces.push(part("file", "big", &vec![b'z'; 5 << 20]));
        pieces.push(b"--B--\r\n".to_vec());
        let (got, _) = parse(pieces).await;
        let got = got.unwrap();
        assert_eq!(got.len(), 2001);
        assert_eq!(got[0], ("/home/user/d/0".to_string(), 4));
        assert_eq!(got[2000], ("big".to_string(), 5 << 20));

        // Every part counts against the bound, whatever its name.
        let mut pieces = vec![b"--B\r\na:b\r\n\r\n".to_vec()];
        pieces.extend((0..MAX_PARTS + 5).map(|_| b"\r\n--B\r\na:b\r\n\r\n".to_vec()));
        let (got, _) = parse(pieces).await;
        assert!(got
            .unwrap_err()
            .contains(&format!("more than {MAX_PARTS} parts")));

        // Many tiny parts earn nothing: headers that never end are cut off at the constant
        // bound, not at one that grew with the parts before.
        let mut pieces = vec![b"--B\r\na:b\r\n\r\n".to_vec()];
        pieces.extend((0..5000).map(|_| b"\r\n--B\r\na:b\r\n\r\n".to_vec()));
        pieces.push(b"\r\n--B\r\n".to_vec());
        pieces.push(vec![b'a'; 64 << 20]);
        let (got, taken) = parse(pieces).await;
        assert!(got.unwrap_err().contains("not file content"));
        assert!(
            taken < 5000 * 14 + MAX_PARSER_HOLD + (128 << 10),
            "the parser took {taken} bytes"
        );

        // One part's headers are bounded on their own.
        let long = "x".repeat(PART_HEAD as usize);
        let (got, _) = parse(vec![part("file", &long, b"c"), b"--B--\r\n".to_vec()]).await;
        assert!(got.unwrap_err().contains("headers are longer"));
    }

    #[test]
    fn a_parts_head_is_counted_never_above_what_it_took() {
        let mut h = HeaderMap::new();
        h.insert(
            "content-disposition",
            "form-data; name=\"file\"".parse().unwrap(),
        );
        let raw = "--B\r\ncontent-disposition: form-data; name=\"file\"\r\n\r\n";
        assert_eq!(
            head_bytes(1, true, &h),
            raw.len() as u64 - 1,
            "the space is not counted"
        );
        assert_eq!(head_bytes(1, false, &h), raw.len() as u64 + 1);
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
