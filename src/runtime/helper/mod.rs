//! The helper transport: commands start through `moat-helper`, a static program moat puts in
//! each session's run directory and starts once per container, instead of one engine exec
//! each (docs/helper.md).
//!
//! - `frame`: the wire format, shared with the helper's source.
//! - `binary`: the embedded helper and its installation into a run directory.
//! - `target`: which containers have a run directory, and where.
//! - `socket`: reaching the helper's socket without following anything the sandbox controls.
//! - `gvisor`: whose listener that socket is under runsc (the container's gofer).
//! - `conn`: one connection: handshake, requests in flight, bounded reads.
//! - `executor`: [`HelperExecutor`], the [`crate::runtime::Executor`] that routes through it
//!   and falls back to the engine's exec.

mod binary;
mod conn;
mod error;
mod executor;
pub mod frame;
mod gvisor;
pub mod socket;
mod target;

#[cfg(test)]
mod frame_tests;

pub use error::HelperError;
pub use executor::{probe, HelperExecutor};
