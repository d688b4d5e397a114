//! The `exec` tool: validate, pick the target (sandbox or host, through the elevated gates),
//! prepare the run, check the policy, then run, refuse, or register an approval whose waiter
//! runs the approved plan later. `run` is one call's steps, `request` the call as agents send
//! it, `elevated` the gates that let it leave the sandbox, `workdir` maps its `workdir` into
//! the workspace, `sandbox_files` binds the files a sandbox plan runs, `forward` sends a
//! `host: "node"` call to its paired node (docs/nodes.md).

mod analyse;
mod elevated;
mod error;
mod explain;
mod forward;
mod launch;
mod prepare;
mod request;
mod run;
mod sandbox_files;
mod sticky;
mod tool;
mod waiter;
mod workdir;

#[cfg(test)]
mod tests;

pub use analyse::{analyse, analyse_within};
pub use elevated::Caller;
pub use error::ExecError;
pub use explain::{ExplainRequest, Explained};
pub use prepare::real_path;
pub use request::{ExecRequest, NodeHost, RequestError};
pub use tool::ExecTool;
