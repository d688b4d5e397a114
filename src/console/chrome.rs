//! The frame around every signed-in console page: navigation, the pending count, the sign-out
//! form, and when the console session ends.

use super::sign_in::Operator;
use super::time::When;
use crate::server::ServerState;
use crate::store::now_ms;

/// The frame of a signed-in page.
pub struct Chrome {
    /// The page's `<title>` and heading.
    pub title: String,
    /// Which navigation entry is the current page (`sessions`, `approvals`, `audit`).
    pub active: &'static str,
    /// The session's CSRF token, for the forms on the page (sign out included).
    pub csrf: String,
    /// Pending approvals: shown in the navigation on every page, so a waiting decision is
    /// never more than a glance away.
    pub pending: usize,
    /// When this console session ends.
    pub expires: When,
    /// When the page was rendered, so its script can keep relative times current.
    pub now_ms: i64,
}

impl Chrome {
    pub fn new(
        state: &ServerState,
        op: &Operator,
        title: impl Into<String>,
        active: &'static str,
    ) -> Self {
        let now = now_ms();
        let pending = state
            .app
            .approvals
            .list(Some(crate::store::ApprovalStatus::Pending))
            .map(|r| r.len())
            .unwrap_or(0);
        Self {
            title: title.into(),
            active,
            csrf: op.signed.csrf.clone(),
            pending,
            expires: When::at(op.signed.expires_at_ms, now),
            now_ms: now,
        }
    }
}
