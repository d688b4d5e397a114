//! The MCP server (docs/mcp.md): the `exec` and `process` tools and the file tools
//! (`read_file`, `write_file`, `list_dir`, `apply_patch`) over stdio (`moat mcp`) and over
//! streamable HTTP (mounted by `moat serve`).

mod backend;
mod http;
mod notify;
mod schema;
mod server;
mod stdio;

pub use http::{http_config, http_service, live_sessions, McpHttpService, McpSessions};
pub use notify::LOGGER;
pub use schema::{exec_input, process_input, tools, tools_for, EXEC, PROCESS};
pub use server::{call_result, implementation, McpContext, MoatMcp, SessionResolver};
pub use stdio::{serve_stdio, StdioError};
