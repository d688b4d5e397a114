//! The console's script and style sheet, compiled into the binary: nothing is fetched from
//! anywhere at run time, so the console works air-gapped, and the Content-Security-Policy can
//! allow scripts and styles from moat itself only (docs/console.md, "Security headers").

use axum::http::{header, HeaderValue};
use axum::response::{IntoResponse, Response};

const CSS: &str = include_str!("assets/console.css");
const JS: &str = include_str!("assets/console.js");

fn asset(body: &'static str, kind: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, HeaderValue::from_static(kind)),
            // Revalidated on each load: a new moat build serves its own copy at once.
            (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
        ],
        body,
    )
        .into_response()
}

/// `GET /ui/assets/console.css`.
pub async fn css() -> Response {
    asset(CSS, "text/css; charset=utf-8")
}

/// `GET /ui/assets/console.js`.
pub async fn js() -> Response {
    asset(JS, "text/javascript; charset=utf-8")
}
