//! E2B's API, served by moat (docs/e2b.md): programs written for E2B's SDK create moat
//! sandboxes and run commands in them unchanged.
//!
//! `serve` owns the listener and its routes, `conn` the connections, `gate` identifies callers before their bodies are read, `control` is the control plane, `process` the in-sandbox
//! process service (`stream_input` its client stream) over `connect` (the Connect protocol's
//! JSON codec), `stream` a process's streamed events, `filesystem` the filesystem service and
//! `files` and `upload` the `/files` transfers on the sandbox's `home` (`paths` maps E2B's
//! paths onto it, `entry` is E2B's entry info, `signature` its signed URLs), `sandboxes` the
//! table of sandboxes, `auth` keys and tokens, `user` who a call runs as, `wire` the messages,
//! `state` what the handlers share.

mod auth;
mod conn;
mod connect;
mod control;
mod entry;
mod files;
mod filesystem;
mod gate;
mod home;
mod paths;
mod pause;
mod process;
mod sandboxes;
mod serve;
mod signature;
mod snapshot_table;
mod snapshots;
mod state;
mod stream;
mod stream_input;
mod upload;
mod usage;
mod user;
mod watch;
mod watch_table;
mod wire;

pub use serve::serve;
pub use state::E2bState;
