//! The file tools agents use on their session's workspace: `read_file`, `write_file`,
//! `list_dir` and `apply_patch` (docs/mcp.md, "File tools"; docs/security.md, "File tools").
//! `patch` and `read` are pure; `confine` is the only place that opens paths, through
//! `beneath`, the one routine that resolves a path beneath a root (the exec workdir uses it
//! too). `unpack` makes a tar archive out of a sandbox beneath a host directory through it
//! (`moat cp`).

pub mod beneath;
pub mod confine;
mod list;
pub mod patch;
mod read;
mod request;
mod tool;
pub mod unpack;

pub use confine::{ConfineError, Workspace};
pub use patch::PatchError;
pub use request::{FileCall, ListRequest, PatchRequest, ReadRequest, WriteRequest};
pub use tool::{FilesError, FilesTool};
