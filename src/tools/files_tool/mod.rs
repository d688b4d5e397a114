//! The file tools agents use on their session's workspace: `read_file`, `write_file`,
//! `list_dir` and `apply_patch` (docs/mcp.md, "File tools"; docs/security.md, "File tools").
//!
//! `request` is the calls as agents send them and their bounds, `tool` runs one call (through
//! `files::Workspace`, the only opener of workspace paths), `read` and `patch` are pure,
//! `list` reads one open directory.

mod list;
mod patch;
mod read;
mod request;
mod tool;

pub use request::{FileCall, ListRequest, PatchRequest, ReadRequest, WriteRequest};
pub use tool::{FilesError, FilesTool};
