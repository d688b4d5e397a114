//! The gateway's one call to a node (docs/nodes.md, "Trust"): TCP, TLS that accepts only the
//! pinned certificate, one HTTP/1.1 request with the pairing token, an answer read up to
//! [`MAX_ANSWER_BYTES`]. A new connection per call: a call that is dropped closes it, and the
//! node takes that as a cancelled call, as moat's own socket does.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request};
use http_body_util::{BodyExt, Full, Limited};
use hyper_util::rt::TokioIo;
use serde_json::Value;

use super::wire::MAX_ANSWER_BYTES;
use super::NodeError;

/// How long TCP and TLS may take to connect before the node counts as unreachable.
const CONNECT_SECS: u64 = 10;

/// Where a paired node is and how the gateway proves itself to it.
#[derive(Debug, Clone)]
pub struct Answer {
    /// The node's JSON answer to a successful call.
    pub value: Value,
}

/// One call to node `node` at `url` (`https://HOST:PORT`) pinned to `fingerprint`, with the
/// pairing `token`. `within` bounds the whole call (`None`: as long as the command runs).
#[allow(clippy::too_many_arguments)]
pub async fn call(
    node: &str,
    url: &str,
    fingerprint: &str,
    token: &str,
    method: Method,
    path: &str,
    body: Option<&Value>,
    within: Option<Duration>,
) -> Result<Answer, NodeError> {
    let fut = call_inner(node, url, fingerprint, token, method, path, body);
    match within {
        Some(d) => tokio::time::timeout(d, fut)
            .await
            .map_err(|_| NodeError::TimedOut {
                node: node.to_string(),
                secs: d.as_secs(),
            })?,
        None => fut.await,
    }
}

/// `HOST:PORT` of an `https://HOST:PORT` URL (a trailing `/` allowed, nothing else after).
pub fn authority(url: &str) -> Result<&str, NodeError> {
    let bad = || NodeError::BadUrl(crate::output::escape_display(url));
    let rest = url.strip_prefix("https://").ok_or_else(bad)?;
    let rest = rest.strip_suffix('/').unwrap_or(rest);
    let (host, port) = rest.rsplit_once(':').ok_or_else(bad)?;
    let host_ok = !host.is_empty()
        && host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-._[]:".contains(&b));
    if !host_ok || port.parse::<u16>().map_or(true, |p| p == 0) {
        return Err(bad());
    }
    Ok(rest)
}

/// One event stream of node `node` (`POST` `path` with `body`): the answer's body once the
/// node answered with success, to be read line by line; the node's refusal otherwise. No
/// bound on its time: the reader bounds each line's wait (docs/nodes.md, "Events").
pub async fn open_stream(
    node: &str,
    url: &str,
    fingerprint: &str,
    token: &str,
    path: &str,
    body: &Value,
) -> Result<hyper::body::Incoming, NodeError> {
    let resp = tokio::time::timeout(
        Duration::from_secs(2 * CONNECT_SECS),
        send(
            node,
            url,
            fingerprint,
            token,
            Method::POST,
            path,
            Some(body),
        ),
    )
    .await
    .map_err(|_| NodeError::TimedOut {
        node: node.to_string(),
        secs: 2 * CONNECT_SECS,
    })??;
    if resp.status().is_success() {
        return Ok(resp.into_body());
    }
    Err(answer_of(node, url, resp)
        .await
        .err()
        .unwrap_or_else(|| NodeError::BadAnswer {
            node: node.to_string(),
            why: "a refusal that read as success".into(),
        }))
}

async fn call_inner(
    node: &str,
    url: &str,
    fingerprint: &str,
    token: &str,
    method: Method,
    path: &str,
    body: Option<&Value>,
) -> Result<Answer, NodeError> {
    let resp = send(node, url, fingerprint, token, method, path, body).await?;
    answer_of(node, url, resp).await
}

/// Connects to the node, pinned, and sends one request; the node's answer, unread.
async fn send(
    node: &str,
    url: &str,
    fingerprint: &str,
    token: &str,
    method: Method,
    path: &str,
    body: Option<&Value>,
) -> Result<http::Response<hyper::body::Incoming>, NodeError> {
    let addr = authority(url)?;
    let away = |why: String| NodeError::Unreachable {
        node: node.to_string(),
        url: url.to_string(),
        why,
    };
    let tcp = tokio::time::timeout(
        Duration::from_secs(CONNECT_SECS),
        tokio::net::TcpStream::connect(addr),
    )
    .await
    .map_err(|_| away(format!("no connection within {CONNECT_SECS} s")))?
    .map_err(|e| away(e.to_string()))?;
    let _ = tcp.set_nodelay(true);
    let tls = tokio_rustls::TlsConnector::from(Arc::new(super::pinned_client_config(fingerprint)?));
    let name = rustls::pki_types::ServerName::try_from(super::cert::CERT_NAME)
        .map_err(|e| NodeError::Tls(e.to_string()))?;
    let stream = tokio::time::timeout(
        Duration::from_secs(CONNECT_SECS),
        tls.connect(name.to_owned(), tcp),
    )
    .await
    .map_err(|_| away(format!("no TLS handshake within {CONNECT_SECS} s")))?
    .map_err(|e| {
        // The verifier's refusal comes back as an I/O error around rustls' own.
        let why = e.to_string();
        if e.get_ref()
            .and_then(|inner| inner.downcast_ref::<rustls::Error>())
            .is_some()
        {
            NodeError::Certificate {
                node: node.to_string(),
                url: url.to_string(),
                why,
            }
        } else {
            away(why)
        }
    })?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| away(e.to_string()))?;
    // The connection's driver lives as long as the answer is read; dropping the call drops
    // the connection with it.
    tokio::spawn(async move {
        let _ = conn.await;
    });
    let payload = match body {
        Some(v) => Bytes::from(serde_json::to_vec(v).map_err(|e| NodeError::BadAnswer {
            node: node.to_string(),
            why: e.to_string(),
        })?),
        None => Bytes::new(),
    };
    let req = Request::builder()
        .method(method)
        .uri(path)
        .header(http::header::HOST, "moat-node")
        .header(http::header::AUTHORIZATION, format!("Bearer {token}"))
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(Full::new(payload))
        .map_err(|e| NodeError::Tls(e.to_string()))?;
    sender
        .send_request(req)
        .await
        .map_err(|e| away(format!("the connection broke before the answer ({e})")))
}

/// The node's answer read up to [`MAX_ANSWER_BYTES`]: its JSON on success, its refusal
/// (escaped and cut) otherwise.
async fn answer_of(
    node: &str,
    url: &str,
    resp: http::Response<hyper::body::Incoming>,
) -> Result<Answer, NodeError> {
    let away = |why: String| NodeError::Unreachable {
        node: node.to_string(),
        url: url.to_string(),
        why,
    };
    let status = resp.status();
    let bytes = Limited::new(resp.into_body(), MAX_ANSWER_BYTES)
        .collect()
        .await
        .map_err(|e| {
            if e.is::<http_body_util::LengthLimitError>() {
                NodeError::TooLarge {
                    node: node.to_string(),
                    max: MAX_ANSWER_BYTES,
                }
            } else {
                away(format!("the connection broke during the answer ({e})"))
            }
        })?
        .to_bytes();
    let value: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    if status.is_success() {
        if value.is_null() {
            return Err(NodeError::BadAnswer {
                node: node.to_string(),
                why: "it is not JSON".into(),
            });
        }
        return Ok(Answer { value });
    }
    if status == http::StatusCode::UNAUTHORIZED {
        return Err(NodeError::TokenRefused(node.to_string()));
    }
    // The node's text is hostile input like anything from another machine: shown escaped.
    let message = value["error"]
        .as_str()
        .map(|m| crate::output::escape_display(&m.chars().take(2000).collect::<String>()))
        .unwrap_or_else(|| format!("it answered HTTP {}", status.as_u16()));
    Err(NodeError::Refused {
        node: node.to_string(),
        status: status.as_u16(),
        message,
        kind: serde_json::from_value(value["kind"].clone()).ok(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        assert_eq!(
            authority("https://127.0.0.1:7000").unwrap(),
            "127.0.0.1:7000"
        );
        assert_eq!(authority("https://box.lan:7000/").unwrap(), "box.lan:7000");
        assert_eq!(authority("https://[::1]:7000").unwrap(), "[::1]:7000");
        for bad in [
            "http://127.0.0.1:7000",
            "https://127.0.0.1",
            "https://127.0.0.1:0",
            "https://127.0.0.1:7000/x",
            "https://a b:7000",
            "https://:7000",
        ] {
            assert!(authority(bad).is_err(), "{bad}");
        }
    }
}
