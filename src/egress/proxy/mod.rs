//! The egress proxy a session's sandbox reaches the network through (`moat egress-proxy`,
//! run in its own container): `target` reads where a request goes, `serve` is the I/O
//! shell, `count` counts bytes for the audit log, `reply` holds the proxy's own answers.

mod count;
mod reply;
mod serve;
mod target;

pub use reply::refused_text;
pub use serve::run;
