//! The Connect protocol as E2B's SDK speaks it, JSON codec only (docs/e2b.md, "Connect"):
//! unary calls answer plain JSON, server-streaming calls answer envelopes
//! (`[flags u8][length u32 BE][json]`) ending with an end envelope (flags `0x02`). Pure: the
//! handlers in `process.rs` frame what they send with it and read requests through it.

use axum::body::Bytes;
use axum::http::StatusCode;
use serde::Serialize;

/// The most a request's message may hold. Input sent to a process is the largest thing a
/// client sends; 8 MiB keeps one request's memory bounded.
pub const MAX_MESSAGE: usize = 8 << 20;

/// A message envelope's flags.
const FLAG_MESSAGE: u8 = 0x00;
const FLAG_END: u8 = 0x02;

/// The error codes moat answers with (Connect's names).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Code {
    InvalidArgument,
    NotFound,
    AlreadyExists,
    PermissionDenied,
    ResourceExhausted,
    FailedPrecondition,
    Internal,
    Unavailable,
    Unauthenticated,
}

impl Code {
    pub fn name(self) -> &'static str {
        match self {
            Code::InvalidArgument => "invalid_argument",
            Code::NotFound => "not_found",
            Code::AlreadyExists => "already_exists",
            Code::PermissionDenied => "permission_denied",
            Code::ResourceExhausted => "resource_exhausted",
            Code::FailedPrecondition => "failed_precondition",
            Code::Internal => "internal",
            Code::Unavailable => "unavailable",
            Code::Unauthenticated => "unauthenticated",
        }
    }

    /// The HTTP status of a unary error with this code (Connect's table).
    pub fn http(self) -> StatusCode {
        match self {
            Code::InvalidArgument => StatusCode::BAD_REQUEST,
            Code::NotFound => StatusCode::NOT_FOUND,
            Code::AlreadyExists => StatusCode::CONFLICT,
            Code::PermissionDenied => StatusCode::FORBIDDEN,
            Code::ResourceExhausted => StatusCode::TOO_MANY_REQUESTS,
            Code::FailedPrecondition => StatusCode::BAD_REQUEST,
            Code::Internal => StatusCode::INTERNAL_SERVER_ERROR,
            Code::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
            Code::Unauthenticated => StatusCode::UNAUTHORIZED,
        }
    }
}

/// A Connect error: its code and moat's sentence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RpcError {
    pub code: Code,
    pub message: String,
}

impl RpcError {
    pub fn new(code: Code, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }

    /// `{"code": "...", "message": "..."}`: a unary error's body, and an end envelope's
    /// `error`.
    pub fn json(&self) -> serde_json::Value {
        serde_json::json!({ "code": self.code.name(), "message": self.message })
    }
}

/// One envelope around `payload`.
fn envelope(flags: u8, payload: &[u8]) -> Bytes {
    let mut out = Vec::with_capacity(5 + payload.len());
    out.push(flags);
    out.extend_from_slice(&(payload.len() as u32).to_be_bytes());
    out.extend_from_slice(payload);
    Bytes::from(out)
}

/// A message envelope holding `msg` as JSON.
pub fn message(msg: &impl Serialize) -> Bytes {
    envelope(
        FLAG_MESSAGE,
        &serde_json::to_vec(msg).unwrap_or_else(|_| b"{}".to_vec()),
    )
}

/// The end envelope: `{}` after a stream that ended well, `{"error": …}` otherwise.
pub fn end(error: Option<&RpcError>) -> Bytes {
    let body = match error {
        None => serde_json::json!({}),
        Some(e) => serde_json::json!({ "error": e.json() }),
    };
    envelope(FLAG_END, body.to_string().as_bytes())
}

/// The one message of a server-streaming request's body (`application/connect+json`): a
/// single envelope, uncompressed, within [`MAX_MESSAGE`].
pub fn single_message(body: &[u8]) -> Result<&[u8], RpcError> {
    let mut frames = Frames::new(body);
    let first = frames
        .next()
        .ok_or_else(|| RpcError::new(Code::InvalidArgument, "the request holds no message"))??;
    if frames.next().is_some() {
        return Err(RpcError::new(
            Code::InvalidArgument,
            "the request holds more than one message",
        ));
    }
    if first.0 != FLAG_MESSAGE {
        return Err(RpcError::new(
            Code::InvalidArgument,
            format!(
                "the request's message has flags {:#04x} (compressed or not a message)",
                first.0
            ),
        ));
    }
    Ok(first.1)
}

/// The envelopes of a body, in order; an envelope cut short or over [`MAX_MESSAGE`] is an
/// error, after which iteration stops.
pub struct Frames<'a> {
    rest: &'a [u8],
    failed: bool,
}

impl<'a> Frames<'a> {
    pub fn new(body: &'a [u8]) -> Self {
        Self {
            rest: body,
            failed: false,
        }
    }
}

impl<'a> Iterator for Frames<'a> {
    type Item = Result<(u8, &'a [u8]), RpcError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.rest.is_empty() {
            return None;
        }
        let bad = |m: String| Some(Err(RpcError::new(Code::InvalidArgument, m)));
        if self.rest.len() < 5 {
            self.failed = true;
            return bad(format!(
                "an envelope's header is cut short ({} of 5 bytes)",
                self.rest.len()
            ));
        }
        let flags = self.rest[0];
        let len =
            u32::from_be_bytes([self.rest[1], self.rest[2], self.rest[3], self.rest[4]]) as usize;
        if len > MAX_MESSAGE {
            self.failed = true;
            return bad(format!(
                "a message of {len} bytes is over the {MAX_MESSAGE}-byte bound"
            ));
        }
        if self.rest.len() - 5 < len {
            self.failed = true;
            return bad(format!(
                "a message is cut short ({} of {len} bytes)",
                self.rest.len() - 5
            ));
        }
        let payload = &self.rest[5..5 + len];
        self.rest = &self.rest[5 + len..];
        Some(Ok((flags, payload)))
    }
}

/// Envelopes as a body streams in (a client stream, `StreamInput`): bytes are pushed as they
/// arrive and each whole envelope is taken out, so what is held is one unfinished envelope and
/// the last chunk; an envelope that declares more than [`MAX_MESSAGE`] fails at its header.
#[derive(Default)]
pub struct Decoder {
    buf: Vec<u8>,
}

impl Decoder {
    pub fn push(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// The next whole envelope, `None` until one has arrived whole.
    pub fn next_envelope(&mut self) -> Option<Result<(u8, Vec<u8>), RpcError>> {
        if self.buf.len() < 5 {
            return None;
        }
        let len = u32::from_be_bytes([self.buf[1], self.buf[2], self.buf[3], self.buf[4]]) as usize;
        if len > MAX_MESSAGE {
            return Some(Err(RpcError::new(
                Code::InvalidArgument,
                format!("a message of {len} bytes is over the {MAX_MESSAGE}-byte bound"),
            )));
        }
        if self.buf.len() - 5 < len {
            return None;
        }
        let flags = self.buf[0];
        let payload = self.buf[5..5 + len].to_vec();
        self.buf.drain(..5 + len);
        Some(Ok((flags, payload)))
    }

    /// At the body's end: an error when an envelope was cut short.
    pub fn finish(&self) -> Result<(), RpcError> {
        if self.buf.is_empty() {
            Ok(())
        } else {
            Err(RpcError::new(
                Code::InvalidArgument,
                format!(
                    "the stream ended inside an envelope ({} bytes left)",
                    self.buf.len()
                ),
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stream_decodes_whatever_its_chunks() {
        let mut body = message(&serde_json::json!({"a": 1})).to_vec();
        body.extend_from_slice(&message(&serde_json::json!({"b": 2})));
        for cut in 0..body.len() {
            let mut d = Decoder::default();
            let mut got = Vec::new();
            for chunk in [&body[..cut], &body[cut..]] {
                d.push(chunk);
                while let Some(e) = d.next_envelope() {
                    got.push(e.unwrap().1);
                }
            }
            d.finish().unwrap();
            assert_eq!(
                got,
                [br#"{"a":1}"#.to_vec(), br#"{"b":2}"#.to_vec()],
                "cut at {cut}"
            );
        }
        let mut d = Decoder::default();
        d.push(&[0, 0xff, 0xff, 0xff, 0xff]);
        assert!(d
            .next_envelope()
            .unwrap()
            .unwrap_err()
            .message
            .contains("bound"));
        let mut d = Decoder::default();
        d.push(&[0, 0, 0, 0, 9, b'{']);
        assert!(d.next_envelope().is_none());
        assert!(d.finish().is_err());
    }

    #[test]
    fn envelopes_round_trip_and_bad_bodies_name_what_is_wrong() {
        let m = message(&serde_json::json!({"a": 1}));
        assert_eq!(&m[..5], &[0, 0, 0, 0, 7]);
        assert_eq!(single_message(&m).unwrap(), br#"{"a":1}"#);
        let e = end(Some(&RpcError::new(
            Code::NotFound,
            "process with pid 7 not found",
        )));
        assert_eq!(e[0], 2);
        assert_eq!(
            &e[5..],
            br#"{"error":{"code":"not_found","message":"process with pid 7 not found"}}"#
        );
        assert_eq!(&end(None)[..], &[2, 0, 0, 0, 2, b'{', b'}']);
        let two = [m.to_vec(), m.to_vec()].concat();
        let mut huge = vec![0u8];
        huge.extend_from_slice(&((MAX_MESSAGE as u32) + 1).to_be_bytes());
        let compressed = [&[1u8][..], &m[1..]].concat();
        let cases: &[(&[u8], &str)] = &[
            (b"", "holds no message"),
            (&[0, 0, 0], "header is cut short"),
            (&[0, 0, 0, 0, 9, b'{'], "cut short (1 of 9 bytes)"),
            (&huge, "over the"),
            (&two, "more than one message"),
            (&compressed, "flags 0x01"),
        ];
        for (body, want) in cases {
            let err = single_message(body).unwrap_err();
            assert_eq!(err.code, Code::InvalidArgument);
            assert!(err.message.contains(want), "{body:?}: {}", err.message);
        }
    }

    #[test]
    fn codes_map_to_connects_statuses() {
        for (code, status) in [
            (Code::NotFound, 404),
            (Code::AlreadyExists, 409),
            (Code::InvalidArgument, 400),
            (Code::Unauthenticated, 401),
            (Code::Unavailable, 503),
            (Code::Internal, 500),
            (Code::PermissionDenied, 403),
        ] {
            assert_eq!(code.http().as_u16(), status, "{code:?}");
        }
    }
}
