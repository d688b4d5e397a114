//! MCP over streamable HTTP, for `moat serve` to mount (e.g. `Router::nest_service("/mcp", …)`).
//!
//! rmcp hands each JSON-RPC message's [`http::request::Parts`] (headers, and any extensions
//! that axum layers added) to the handler, so the [`SessionResolver`] sees the same bearer
//! token and identity the REST API does. A client that `initialize`s gets an MCP session
//! (`Mcp-Session-Id`) bound to the moat session its token names; background-exit events reach
//! it on the standalone `GET` stream as logging notifications.

use std::sync::Arc;

use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use tokio_util::sync::CancellationToken;

use super::server::{McpContext, MoatMcp, SessionResolver};

/// The tower service `moat serve` mounts.
pub type McpHttpService = StreamableHttpService<MoatMcp, LocalSessionManager>;

/// Transport settings: stop with `ct`, and accept only these `Host` names (rmcp's
/// DNS-rebinding guard; an entry without a port matches any port). An empty list keeps rmcp's
/// loopback default (`localhost`, `127.0.0.1`, `::1`).
pub fn http_config(ct: CancellationToken, allowed_hosts: &[String]) -> StreamableHttpServerConfig {
    let config = StreamableHttpServerConfig::default().with_cancellation_token(ct);
    if allowed_hosts.is_empty() {
        config
    } else {
        config.with_allowed_hosts(allowed_hosts.iter().cloned())
    }
}

/// rmcp's table of live MCP sessions; `moat serve` reads it to forget the owners of sessions
/// rmcp has dropped (on idle, or when their client went away).
pub type McpSessions = Arc<LocalSessionManager>;

/// The streamable HTTP service: one [`MoatMcp`] per MCP session, its moat session resolved
/// from each request by `resolve`; and its session table.
pub fn http_service(
    ctx: Arc<McpContext>,
    resolve: SessionResolver,
    config: StreamableHttpServerConfig,
) -> (McpHttpService, McpSessions) {
    let sessions: McpSessions = Arc::new(LocalSessionManager::default());
    let service = StreamableHttpService::new(
        move || Ok(MoatMcp::per_request(ctx.clone(), resolve.clone())),
        sessions.clone(),
        config,
    );
    (service, sessions)
}

/// The ids of the MCP sessions rmcp still holds.
pub async fn live_sessions(sessions: &McpSessions) -> std::collections::HashSet<String> {
    sessions
        .sessions
        .read()
        .await
        .keys()
        .map(|k| k.to_string())
        .collect()
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use bytes::Bytes;
    use http::{Request, StatusCode};
    use http_body_util::{BodyExt, Full};
    use serde_json::{json, Value};

    use super::*;
    use crate::app::App;
    use crate::tools::Caller;

    /// Tokens `agent-a` and `agent-b` name sessions `a` and `b`; anything else is refused.
    fn resolver() -> SessionResolver {
        Arc::new(|parts: &http::request::Parts| {
            let token = parts
                .headers
                .get(http::header::AUTHORIZATION)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.strip_prefix("Bearer "));
            match token {
                Some("agent-a") => Ok(("a".to_string(), Caller::anonymous())),
                Some("agent-b") => Ok(("b".to_string(), Caller::anonymous())),
                _ => Err("unknown bearer token".to_string()),
            }
        })
    }

    fn service(dir: &std::path::Path) -> McpHttpService {
        let app = App::on_fake_engine(dir);
        let (service, _) = http_service(
            McpContext::new(Arc::new(app)),
            resolver(),
            http_config(CancellationToken::new(), &[]),
        );
        service
    }

    fn post(token: Option<&str>, mcp_session: Option<&str>, body: Value) -> Request<Full<Bytes>> {
        let mut b = Request::post("http://localhost/mcp")
            .header("host", "localhost:7878")
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream");
        if let Some(t) = token {
            b = b.header("authorization", format!("Bearer {t}"));
        }
        if let Some(s) = mcp_session {
            b = b
                .header("mcp-session-id", s)
                .header("mcp-protocol-version", "2025-11-25");
        }
        b.body(Full::new(Bytes::from(body.to_string()))).unwrap()
    }

    /// Reads SSE frames until the JSON-RPC message answering `id` arrives.
    async fn answer(
        response: http::Response<
            http_body_util::combinators::BoxBody<Bytes, std::convert::Infallible>,
        >,
        id: i64,
    ) -> Value {
        let mut body = response.into_body();
        let mut text = String::new();
        let read = async {
            while let Some(frame) = body.frame().await {
                if let Ok(data) = frame.unwrap().into_data() {
                    text.push_str(&String::from_utf8_lossy(&data));
                }
                for line in text.lines() {
                    let Some(data) = line.strip_prefix("data:") else {
                        continue;
                    };
                    if let Ok(v) = serde_json::from_str::<Value>(data.trim()) {
                        if v["id"] == id {
                            return v;
                        }
                    }
                }
            }
            panic!("the stream ended without an answer to {id}: {text}");
        };
        tokio::time::timeout(Duration::from_secs(10), read)
            .await
            .expect("an answer within 10 s")
    }

    fn initialize(id: i64) -> Value {
        json!({"jsonrpc": "2.0", "id": id, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "test", "version": "0"}}})
    }

    fn call(id: i64, name: &str, arguments: Value) -> Value {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": name, "arguments": arguments}})
    }

    #[tokio::test]
    async fn sessions_come_from_the_request_and_stay_pinned() {
        let dir = tempfile::tempdir().unwrap();
        let svc = service(dir.path());

        let r = svc.handle(post(Some("agent-a"), None, initialize(1))).await;
        assert_eq!(r.status(), StatusCode::OK);
        let mcp_session = r.headers()["mcp-session-id"].to_str().unwrap().to_string();
        let init = answer(r, 1).await;
        assert_eq!(init["result"]["serverInfo"]["name"], "moat");
        assert_eq!(
            init["result"]["serverInfo"]["version"],
            env!("CARGO_PKG_VERSION")
        );
        let r = svc
            .handle(post(
                Some("agent-a"),
                Some(&mcp_session),
                json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
            ))
            .await;
        assert_eq!(r.status(), StatusCode::ACCEPTED);

        let r = svc
            .handle(post(
                Some("agent-a"),
                Some(&mcp_session),
                call(2, "process", json!({"action": "list"})),
            ))
            .await;
        let list = answer(r, 2).await;
        assert_eq!(list["result"]["isError"], false, "{list}");
        assert_eq!(
            list["result"]["content"][0]["text"],
            "No running or recent sessions."
        );
        assert_eq!(list["result"]["structuredContent"]["status"], "completed");

        // Another agent's token on this MCP session is refused, in band.
        let r = svc
            .handle(post(
                Some("agent-b"),
                Some(&mcp_session),
                call(3, "process", json!({"action": "list"})),
            ))
            .await;
        let refused = answer(r, 3).await;
        assert_eq!(refused["result"]["isError"], true, "{refused}");
        let text = refused["result"]["content"][0]["text"].as_str().unwrap();
        assert!(text.contains("belongs to session a"), "{text}");

        // Unknown arguments are the tool's error, not a protocol error.
        let r = svc
            .handle(post(
                Some("agent-a"),
                Some(&mcp_session),
                call(4, "process", json!({"action": "list", "bogus": 1})),
            ))
            .await;
        let bad = answer(r, 4).await;
        assert_eq!(bad["result"]["isError"], true, "{bad}");
    }

    #[tokio::test]
    async fn initialize_without_a_session_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let svc = service(dir.path());
        let r = svc.handle(post(Some("nobody"), None, initialize(1))).await;
        let v = answer(r, 1).await;
        assert_eq!(v["error"]["message"], "unknown bearer token", "{v}");
    }

    #[tokio::test]
    async fn tools_list_over_http() {
        let dir = tempfile::tempdir().unwrap();
        let svc = service(dir.path());
        let r = svc.handle(post(Some("agent-b"), None, initialize(1))).await;
        let mcp_session = r.headers()["mcp-session-id"].to_str().unwrap().to_string();
        answer(r, 1).await;
        let r = svc
            .handle(post(
                Some("agent-b"),
                Some(&mcp_session),
                json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
            ))
            .await;
        let v = answer(r, 2).await;
        let names: Vec<&str> = v["result"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap())
            .collect();
        assert_eq!(
            names,
            [
                "exec",
                "process",
                "read_file",
                "write_file",
                "list_dir",
                "apply_patch"
            ]
        );
        assert_eq!(
            v["result"]["tools"][0]["inputSchema"]["required"],
            json!(["command"])
        );
    }
}
