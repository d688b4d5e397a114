//! The proxy's own answers. A refusal says in one sentence what happened and who can change
//! it, so an agent reading the 403 can tell its operator (docs/security.md, "Network egress").

use bytes::Bytes;
use http::{Response, StatusCode};
use http_body_util::{combinators::BoxBody, BodyExt, Full};

pub type Body = BoxBody<Bytes, hyper::Error>;

/// The sentence a refused request gets.
pub fn refused_text(host: &str, port: u16, approval: Option<&str>) -> String {
    match approval {
        Some(id) => format!(
            "moat's egress policy does not allow {host}:{port}; an operator can allow it by deciding approval {id} (moat approvals).\n"
        ),
        None => format!(
            "moat's egress policy does not allow {host}:{port}; an operator can allow it in sandbox.egress.allow.\n"
        ),
    }
}

/// The sentence a request gets when its name is allowed but resolved to a private, loopback or
/// link-local address that no entry names.
pub fn internal_text(host: &str, port: u16, approval: Option<&str>) -> String {
    match approval {
        Some(id) => format!(
            "moat's egress policy allows {host}:{port} but not the private address it resolved to; an operator can allow that address by deciding approval {id} (moat approvals).\n"
        ),
        None => format!(
            "moat's egress policy allows {host}:{port} but not the private address it resolved to; an operator can allow that address:port in sandbox.egress.allow.\n"
        ),
    }
}

pub fn text(status: StatusCode, body: String) -> Response<Body> {
    let mut r = Response::new(full(body));
    *r.status_mut() = status;
    r.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r
}

pub fn full(body: impl Into<Bytes>) -> Body {
    Full::new(body.into())
        .map_err(|never| match never {})
        .boxed()
}

#[cfg(test)]
mod tests {
    #[test]
    fn one_sentence() {
        for approval in [None, Some("ab12")] {
            let t = super::refused_text("evil.test", 443, approval);
            assert_eq!(t.matches(". ").count() + t.matches(".\n").count(), 1, "{t}");
            assert!(t.contains("evil.test:443") && t.contains("operator can allow it"));
            let t = super::internal_text("evil.test", 443, approval);
            assert_eq!(t.matches(". ").count() + t.matches(".\n").count(), 1, "{t}");
            assert!(t.contains("private address") && t.contains("operator can allow"));
        }
    }
}
