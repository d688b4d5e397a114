//! The MCP server: the `exec` and `process` tools for one moat session, over any rmcp
//! transport.
//!
//! One [`MoatMcp`] serves one MCP connection. Over stdio its session is fixed when the server
//! starts; over streamable HTTP it comes from each request's HTTP parts (the bearer token)
//! through a resolver that `moat serve` provides, and it is pinned by `initialize`, so a
//! connection opened with one agent's token cannot be used with another's.

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, OnceLock};

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Extensions,
    Implementation, InitializeRequestParams, InitializeResult, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
// Logging is deprecated by the newest protocol revision but is how events reach clients
// (see notify.rs).
#[allow(deprecated)]
use rmcp::model::SetLevelRequestParams;
use rmcp::service::RequestContext;
use rmcp::{ErrorData, Peer, RoleServer, ServerHandler};
use serde_json::{Map, Value};
use tokio_util::sync::{CancellationToken, DropGuard};

use super::backend::{failed, Backend, Local, Remote};
use super::notify::{self, Level};
use super::schema;
use crate::app::App;
use crate::contract::ToolResult;
use crate::daemon::DaemonClient;
use crate::session::validate_key;
use crate::tools::FileCall;
use crate::tools::ProcessRequest;
use crate::tools::{Caller, ExecRequest};

/// Maps one HTTP request to the moat session it acts in, or says why it may not act at all.
/// `moat serve` builds it from its token table; the message reaches the client.
/// The moat session a request acts in, and the identity the elevated gates see.
pub type SessionResolver =
    Arc<dyn Fn(&http::request::Parts) -> Result<(String, Caller), String> + Send + Sync>;

/// What every MCP connection shares: where its tools run (see [`Backend`]) and the two
/// switches of the exec tool's documents (docs/mcp.md).
pub struct McpContext {
    backend: Arc<dyn Backend>,
    /// `exec.process_tool` (or `moat mcp --no-process-tool`): off, `process` is not listed
    /// and exec runs every command to its end ("Without the process tool").
    process_tool: bool,
    /// `exec.notify_on_exit`: off, a background process's exit is not notified
    /// ("Notifications").
    notify_on_exit: bool,
}

impl McpContext {
    /// The tools of this process's own moat (`moat serve`), switched by its config.
    pub fn new(app: Arc<App>) -> Arc<Self> {
        let exec = &app.config.exec;
        Arc::new(Self {
            process_tool: exec.process_tool,
            notify_on_exit: exec.notify_on_exit,
            backend: Arc::new(Local { app }),
        })
    }

    /// The tools of the home's daemon (`moat mcp` over stdio). `process_tool` is this
    /// server's switch; exits are filtered by the daemon's stream already, by the same config.
    pub fn remote(client: DaemonClient, process_tool: bool) -> Arc<Self> {
        Arc::new(Self {
            backend: Arc::new(Remote { client }),
            process_tool,
            notify_on_exit: true,
        })
    }
}

#[derive(Clone)]
enum SessionSource {
    Fixed(String, Caller),
    PerRequest(SessionResolver),
}

/// See the module docs.
pub struct MoatMcp {
    ctx: Arc<McpContext>,
    source: SessionSource,
    /// The session `initialize` ran in; later calls must resolve to the same one.
    bound: OnceLock<String>,
    /// The client's `logging/setLevel`; events below it are not sent.
    min_level: Arc<AtomicU8>,
    /// Stops the event forwarder when the connection (and so this handler) goes away.
    stop: CancellationToken,
    _stop_on_drop: DropGuard,
}

impl MoatMcp {
    fn new(ctx: Arc<McpContext>, source: SessionSource) -> Self {
        let stop = CancellationToken::new();
        Self {
            ctx,
            source,
            bound: OnceLock::new(),
            min_level: Arc::new(AtomicU8::new(Level::Debug as u8)),
            _stop_on_drop: stop.clone().drop_guard(),
            stop,
        }
    }

    /// A server for one session, named when it starts (stdio).
    /// Over stdio the caller is whoever launched `moat mcp`: an agent client, never the
    /// operator's CLI. It is provider `mcp` with the session key as sender, so an operator
    /// lets it leave the sandbox only with `elevated.allow_from.mcp = ["<session>"]`.
    pub fn for_session(ctx: Arc<McpContext>, session: String) -> Self {
        let caller = Caller::mcp_stdio(&session);
        Self::new(ctx, SessionSource::Fixed(session, caller))
    }

    /// A server whose session comes from each HTTP request.
    pub fn per_request(ctx: Arc<McpContext>, resolve: SessionResolver) -> Self {
        Self::new(ctx, SessionSource::PerRequest(resolve))
    }

    /// The session this request acts in.
    fn session(&self, extensions: &Extensions) -> Result<(String, Caller), String> {
        let (session, caller) = match &self.source {
            SessionSource::Fixed(s, c) => (s.clone(), c.clone()),
            SessionSource::PerRequest(resolve) => {
                let parts = extensions
                    .get::<http::request::Parts>()
                    .ok_or("this request did not arrive over HTTP, so it names no session")?;
                resolve(parts)?
            }
        };
        validate_key(&session).map_err(|e| format!("Failed to {e}"))?;
        match self.bound.get() {
            Some(bound) if *bound != session => Err(format!(
                "This MCP connection belongs to session {bound}; the request's credentials name session {session}."
            )),
            _ => Ok((session, caller)),
        }
    }

    /// Pins the connection to `session` and starts sending its events, once.
    fn bind(&self, session: String, peer: &Peer<RoleServer>) {
        if self.bound.set(session.clone()).is_ok() {
            notify::forward(
                self.ctx.backend.events(&session),
                session,
                peer.clone(),
                self.min_level.clone(),
                self.ctx.notify_on_exit,
                self.stop.child_token(),
            );
        }
    }

    async fn exec(
        &self,
        session: &str,
        caller: &Caller,
        args: Map<String, Value>,
        cancel: &CancellationToken,
    ) -> ToolResult {
        let mut req: ExecRequest = match parse_args(args, "command") {
            Ok(r) => r,
            Err(e) => return failed(format!("Invalid exec arguments: {e}")),
        };
        // Agents get the yield window (docs/mcp.md): only the CLI waits to the end, and an
        // agent without the process tool, which could not follow a command left running
        // ("Without the process tool").
        let to_end = !self.ctx.process_tool;
        if to_end {
            req.yield_ms = None;
            req.background = None;
        }
        let run = self.ctx.backend.exec(caller, session, &req, to_end);
        // rmcp cancels the request's token on `notifications/cancelled` (and when the
        // connection closes) but keeps polling the handler: dropping `run` is what ends a
        // foreground command the client gave up on (docs/mcp.md, "Timeouts, cancellation
        // and signals").
        let outcome = tokio::select! {
            r = run => r,
            _ = cancel.cancelled() => {
                return failed("The call was cancelled; its command was ended.".into());
            }
        };
        outcome.unwrap_or_else(failed)
    }

    async fn process(&self, session: &str, args: Map<String, Value>) -> ToolResult {
        let req: ProcessRequest = match parse_args(args, "action") {
            Ok(r) => r,
            Err(e) => return failed(format!("Invalid process arguments: {e}")),
        };
        self.ctx.backend.process(session, &req).await
    }
}

impl MoatMcp {
    /// One file-tool call; its arguments are checked like exec's (unknown fields refused).
    async fn files(&self, session: &str, name: &str, args: Map<String, Value>) -> ToolResult {
        let call = match name {
            schema::READ_FILE => parse_args(args, "path").map(FileCall::Read),
            schema::WRITE_FILE => parse_args(args, "path").map(FileCall::Write),
            schema::LIST_DIR => serde_json::from_value(Value::Object(args)).map(FileCall::List),
            _ => parse_args(args, "input").map(FileCall::Patch),
        };
        match call {
            Ok(call) => self.ctx.backend.files(session, &call).await,
            Err(e) => failed(format!("Invalid {name} arguments: {e}")),
        }
    }
}

/// Deserializes tool arguments. A missing required field reads as empty, so that the tool
/// answers with its own message ("Provide a command to start.") instead of a serde one.
fn parse_args<T: serde::de::DeserializeOwned>(
    mut args: Map<String, Value>,
    required: &str,
) -> Result<T, serde_json::Error> {
    if args.get(required).is_none_or(Value::is_null) {
        args.insert(required.to_string(), Value::String(String::new()));
    }
    serde_json::from_value(Value::Object(args))
}

/// A moat tool result as an MCP result: the text as text content, `details` as structured
/// content, and `isError` when the status is `failed`.
pub fn call_result(result: ToolResult) -> CallToolResult {
    let is_error = result.is_error();
    let content = result
        .content
        .into_iter()
        .map(|c| ContentBlock::text(c.text))
        .collect();
    let mut out = if is_error {
        CallToolResult::error(content)
    } else {
        CallToolResult::success(content)
    };
    out.structured_content = Some(result.details.to_json());
    out
}

/// The name and version moat reports (rmcp's `from_build_env` would report rmcp's own).
pub fn implementation() -> Implementation {
    Implementation::new("moat", env!("CARGO_PKG_VERSION")).with_title("moat sandbox")
}

impl ServerHandler for MoatMcp {
    #[allow(deprecated)]
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_logging()
                .build(),
        )
        .with_server_info(implementation())
        .with_instructions(schema::INSTRUCTIONS)
    }

    async fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, ErrorData> {
        let (session, _) = self
            .session(&context.extensions)
            .map_err(|e| ErrorData::invalid_request(e, None))?;
        context.peer.set_peer_info(request.clone());
        let result = self.negotiate_initialize(&request)?;
        self.bind(session, &context.peer);
        Ok(result)
    }

    #[allow(deprecated)]
    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.min_level
            .store(Level::from_mcp(request.level) as u8, Ordering::Relaxed);
        Ok(())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(schema::tools_for(
            self.ctx.process_tool,
        )))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        schema::tools_for(self.ctx.process_tool)
            .into_iter()
            .find(|t| t.name == name)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let args = request.arguments.unwrap_or_default();
        let result = match self.session(&context.extensions) {
            Err(e) => failed(e),
            Ok((session, caller)) => {
                // A stdio client that skipped `initialize` (the stateless revision) still
                // hears its session's events; its connection cannot change hands.
                if matches!(self.source, SessionSource::Fixed(..)) {
                    self.bind(session.clone(), &context.peer);
                }
                match request.name.as_ref() {
                    schema::EXEC => self.exec(&session, &caller, args, &context.ct).await,
                    schema::PROCESS if self.ctx.process_tool => self.process(&session, args).await,
                    name @ (schema::READ_FILE
                    | schema::WRITE_FILE
                    | schema::LIST_DIR
                    | schema::APPLY_PATCH) => self.files(&session, name, args).await,
                    other => {
                        let names: Vec<String> = schema::tools_for(self.ctx.process_tool)
                            .into_iter()
                            .map(|t| t.name.to_string())
                            .collect();
                        return Err(ErrorData::invalid_params(
                            format!(
                                "Unknown tool {other}: this server has {}.",
                                names.join(", ")
                            ),
                            None,
                        ));
                    }
                }
            }
        };
        Ok(call_result(result).into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::Details;
    use serde_json::json;

    /// Details as they might come from any build: the mapping reads only the status.
    fn details(value: Value) -> Details {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn results_map_status_to_is_error() {
        let ok = call_result(ToolResult::new(
            "hi".into(),
            details(json!({"exitCode": 0, "status": "completed"})),
        ));
        assert_eq!(ok.is_error, Some(false));
        assert_eq!(
            ok.structured_content.as_ref().unwrap()["status"],
            "completed"
        );
        let v = serde_json::to_value(&ok).unwrap();
        assert_eq!(v["content"], json!([{"type": "text", "text": "hi"}]));

        let running = call_result(ToolResult::new(
            "Command still running".into(),
            details(json!({"sessionId": "warm-river", "status": "running"})),
        ));
        assert_eq!(running.is_error, Some(false));

        let bad = call_result(ToolResult::new(
            "x\n\nCommand exited with code 3".into(),
            details(json!({"exitCode": 3, "status": "failed"})),
        ));
        assert_eq!(bad.is_error, Some(true));
        assert_eq!(bad.structured_content.unwrap()["exitCode"], 3);
    }

    #[test]
    fn missing_required_argument_reads_as_empty() {
        let req: ExecRequest = parse_args(Map::new(), "command").unwrap();
        assert_eq!(req.command, "");
        let mut args = Map::new();
        args.insert("command".into(), Value::Null);
        let req: ExecRequest = parse_args(args, "command").unwrap();
        assert_eq!(req.command, "");
        let mut args = Map::new();
        args.insert("command".into(), json!("ls"));
        args.insert("bogus".into(), json!(1));
        let err = parse_args::<ExecRequest>(args, "command").unwrap_err();
        assert!(err.to_string().contains("bogus"), "{err}");
    }

    #[test]
    fn implementation_is_moat() {
        let i = implementation();
        assert_eq!(i.name, "moat");
        assert_eq!(i.version, env!("CARGO_PKG_VERSION"));
    }
}
