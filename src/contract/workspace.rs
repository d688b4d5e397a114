//! Where a session's workspace appears inside its container: the path agents name in
//! `workdir` and in the file tools, and the one results report as `cwd`.

/// Where the session workspace appears inside the container.
pub const WORKSPACE_MOUNT: &str = "/workspace";
