//! The `process` tool (docs/mcp.md, "Tools": `process`): follow-up on processes started by
//! `exec`.
//!
//! `request` is the call as the wire carries it and as it is parsed (the action, once, into an
//! enum with the fields it uses), `tool` runs it (one method per action), `log` pages a
//! process's whole record, `shape` holds the small texts and details both share, `forward`
//! sends a call that names a `node` to that node (docs/nodes.md).

mod forward;
mod log;
mod request;
mod shape;
mod tool;

pub use request::{CallError, ProcessAction, ProcessCall, ProcessRequest, ACTIONS};
pub use tool::ProcessTool;
