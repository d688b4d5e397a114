//! Confined file access beneath a root: `beneath` is the one routine that resolves a path
//! beneath a root (the file tools and the exec workdir use it), `confine` opens the session's
//! workspace paths through it (docs/security.md, "File tools"), and `unpack` makes a tar
//! archive out of a sandbox beneath a host directory through it (`moat cp`), and `xattr`
//! reads and sets extended attributes by descriptor. The file tools
//! themselves are `tools::files_tool`.

pub mod beneath;
pub mod confine;
pub mod unpack;
pub mod watcher;
pub mod xattr;

pub use confine::{ConfineError, Found, Link, ListBound, Workspace};
