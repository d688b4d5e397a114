//! The `exec` tool: validate, pick the target (sandbox or host, through the elevated gates),
//! prepare the run, check the policy, then run, refuse, or register an approval whose waiter
//! runs the approved plan later. `sandbox_files` binds the files a sandbox plan runs.

mod analyse;
mod error;
mod explain;
mod launch;
mod prepare;
mod sandbox_files;
mod sticky;
mod tool;
mod waiter;

#[cfg(test)]
mod tests;

pub use analyse::{analyse, analyse_within};
pub use error::ExecError;
pub use explain::{ExplainRequest, Explained};
pub use prepare::real_path;
pub use tool::ExecTool;
