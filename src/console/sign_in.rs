//! Signing in and out, and the extractor every other page starts with (docs/console.md,
//! "Signing in"). The rules themselves (cookies, CSRF, expiry) are in `auth`.

use std::sync::Arc;

use askama::Template;
use axum::extract::rejection::FormRejection;
use axum::extract::{FromRequestParts, State};
use axum::http::request::Parts;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Form};
use serde::Deserialize;

use super::auth::{
    cookie, random_token, set_cookie, token_eq, Signed, SESSION_COOKIE, SESSION_SECS,
    SIGN_IN_COOKIE, SIGN_IN_SECS,
};
use super::error::ConsoleError;
use super::guard::refused;
use super::html::html;
use super::page::form;
use crate::server::{identify, Channel, Identity, ServerState};
use crate::store::now_ms;

/// Longest token the form accepts; configured tokens are far shorter.
const MAX_TOKEN_BYTES: usize = 1024;

/// The signed-in operator of a request; a request without a live session is sent to the
/// sign-in form.
pub struct Operator {
    /// Its session, for the CSRF check of the forms it posts.
    pub signed: Signed,
}

impl Operator {
    /// Refuses a form whose CSRF token is not this session's.
    pub fn check_csrf(&self, token: &str) -> Result<(), ConsoleError> {
        if !token.is_empty() && token_eq(token, &self.signed.csrf) {
            Ok(())
        } else {
            Err(ConsoleError::Csrf)
        }
    }
}

impl FromRequestParts<Arc<ServerState>> for Operator {
    type Rejection = ConsoleError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &Arc<ServerState>,
    ) -> Result<Self, Self::Rejection> {
        signed_in(state, &parts.headers, now_ms())
            .map(|signed| Operator { signed })
            .ok_or(ConsoleError::SignIn)
    }
}

/// The live console session of a request, if any.
pub fn signed_in(state: &ServerState, headers: &HeaderMap, now_ms: i64) -> Option<Signed> {
    state.console.lookup(headers, now_ms)
}

#[derive(Template)]
#[template(path = "console/sign_in.html")]
struct SignInPage {
    /// The sign-in form's CSRF token, checked against its cookie.
    csrf: String,
    /// Why the last attempt failed, if it did.
    error: Option<String>,
    /// On the socket the operator needs no token (docs/http-api.md, "Who is calling").
    socket: bool,
}

/// `GET /ui/sign-in`: the form, with a fresh CSRF token bound to a short-lived cookie.
pub async fn page(Extension(channel): Extension<Channel>) -> Response {
    sign_in_page(channel, None, StatusCode::OK)
}

fn sign_in_page(channel: Channel, error: Option<String>, status: StatusCode) -> Response {
    let csrf = random_token();
    let page = SignInPage {
        csrf: csrf.clone(),
        error,
        socket: channel == Channel::Unix,
    };
    let mut response = html(status, page.render());
    if let Ok(v) = HeaderValue::from_str(&set_cookie(SIGN_IN_COOKIE, &csrf, SIGN_IN_SECS)) {
        response.headers_mut().append(header::SET_COOKIE, v);
    }
    response
}

#[derive(Deserialize)]
pub struct SignInForm {
    /// The operator token (empty is tried too: on the socket it is enough).
    #[serde(default)]
    token: String,
    /// The sign-in form's CSRF token, checked against its cookie.
    #[serde(default)]
    csrf: String,
}

/// `POST /ui/sign-in`: the operator token for a session cookie. An agent's token is refused
/// and audited; an unknown one shows the form again.
pub async fn submit(
    State(state): State<Arc<ServerState>>,
    Extension(channel): Extension<Channel>,
    headers: HeaderMap,
    body: Result<Form<SignInForm>, FormRejection>,
) -> Result<Response, ConsoleError> {
    let f = form(body)?;
    let bound = cookie(&headers, SIGN_IN_COOKIE).unwrap_or_default();
    if bound.is_empty() || !token_eq(bound, &f.csrf) {
        return Err(ConsoleError::Csrf);
    }
    let token = f.token.trim();
    if token.len() > MAX_TOKEN_BYTES {
        return Err(ConsoleError::BadRequest(format!(
            "sign in: the token is longer than {MAX_TOKEN_BYTES} bytes"
        )));
    }
    let mut as_bearer = HeaderMap::new();
    if !token.is_empty() {
        let value = HeaderValue::from_str(&format!("Bearer {token}")).map_err(|_| {
            ConsoleError::BadToken("the token holds characters no token has".into())
        })?;
        as_bearer.insert(header::AUTHORIZATION, value);
    }
    match identify(channel, &as_bearer, &state.app.config.serve) {
        Ok(Identity::Operator) => {}
        Ok(Identity::Agent(a)) => return Err(refused(&state, &a, "/ui/sign-in")),
        Err(_) => {
            return Ok(sign_in_page(
                channel,
                Some("That is not the operator token.".into()),
                StatusCode::UNAUTHORIZED,
            ))
        }
    }
    let (value, _) = state.console.sign_in(now_ms());
    let mut response =
        (StatusCode::SEE_OTHER, [(header::LOCATION, "/ui/sessions")]).into_response();
    for c in [
        set_cookie(SESSION_COOKIE, &value, SESSION_SECS),
        set_cookie(SIGN_IN_COOKIE, "", 0),
    ] {
        if let Ok(v) = HeaderValue::from_str(&c) {
            response.headers_mut().append(header::SET_COOKIE, v);
        }
    }
    Ok(response)
}

#[derive(Deserialize)]
pub struct CsrfForm {
    /// Missing is the same as wrong: 403, never a parse error.
    #[serde(default)]
    pub csrf: String,
}

/// `POST /ui/sign-out`: ends the session and deletes its cookie.
pub async fn sign_out(
    State(state): State<Arc<ServerState>>,
    op: Operator,
    headers: HeaderMap,
    body: Result<Form<CsrfForm>, FormRejection>,
) -> Result<Response, ConsoleError> {
    op.check_csrf(&form(body)?.csrf)?;
    state.console.sign_out(&headers);
    let mut response = (StatusCode::SEE_OTHER, [(header::LOCATION, "/ui/sign-in")]).into_response();
    if let Ok(v) = HeaderValue::from_str(&set_cookie(SESSION_COOKIE, "", 0)) {
        response.headers_mut().append(header::SET_COOKIE, v);
    }
    Ok(response)
}

/// Whether the request belongs to a signed-in console session: the connection limits count
/// it as the operator's (src/server/limits.rs).
pub fn is_console_operator(state: &ServerState, headers: &HeaderMap) -> bool {
    signed_in(state, headers, now_ms()).is_some()
}
