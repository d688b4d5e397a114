//! The operator console (docs/console.md): a web page on `moat serve`, under `/ui`, for the
//! operator only: sessions and their processes, live output, approvals with their whole bound
//! plan, and the audit log.
//!
//! `auth` holds the rules of console sessions (cookie, CSRF, expiry) and `sign_in` the pages
//! and the extractor that apply them; `guard` refuses agent tokens and sets the security
//! headers on every answer; `text` turns hostile text into escaped pieces with visible marks
//! for what would hide it; `time` formats moments; `chrome` is the frame all pages share, `html` a
//! rendered template as a response, `page` the small helpers the pages share;
//! `sessions`, `session`, `approvals` and `audit` are the pages; `events` the live stream;
//! `assets` the compiled-in script and style; `routes` the paths; `error` the failure page.
//! The templates are in `templates/console/`.

mod approvals;
mod assets;
mod audit;
mod auth;
mod chrome;
mod error;
mod events;
mod guard;
mod html;
mod page;
mod routes;
mod session;
mod sessions;
mod sign_in;
mod text;
mod time;

#[cfg(test)]
mod tests;

pub use auth::ConsoleSessions;
pub use error::ConsoleError;
pub use guard::{CSP, HEADERS};
pub use routes::router;
pub use sign_in::is_console_operator;
pub use text::{pieces, Lines, Piece};
