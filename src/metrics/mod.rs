//! The daemon's own figures, served at `GET /metrics` in the Prometheus text format
//! (docs/http-api.md, "Metrics").
//!
//! `series` holds every series and the registry they are encoded from, one set per process
//! (the daemon is one `App`); the layers that count call it where the event happens.
//! `outcome` names how an exec call ended, `this_process` reads the daemon's resident memory
//! and open descriptors at scrape time.

mod outcome;
mod series;
mod this_process;

pub use outcome::exec_outcome;
pub use series::{metrics, Metrics, Scrape, CONTENT_TYPE};
pub use this_process::{open_fds, resident_bytes};
