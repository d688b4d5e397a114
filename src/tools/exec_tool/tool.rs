//! [`ExecTool`]: what one `exec` call runs with, and its entry points (each runs the steps in
//! `run`).

use std::sync::Arc;

use super::elevated::Caller;
use super::error::ExecError;
use super::request::ExecRequest;
use crate::approvals::Approvals;
use crate::config::Config;
use crate::contract::ToolResult;
use crate::home::Home;
use crate::process::Registry;
use crate::secrets::Secrets;
use crate::session::Sessions;

/// See the module docs. Cheap to clone: approval waiters keep a copy.
#[derive(Clone)]
pub struct ExecTool {
    pub sessions: Arc<Sessions>,
    pub registry: Arc<Registry>,
    pub config: Arc<Config>,
    pub approvals: Arc<Approvals>,
    pub secrets: Arc<Secrets>,
    pub home: Home,
    /// `container id<TAB>shell` pairs whose login shell was found (`sandbox.shell` other than
    /// `sh`), so the check costs one exec per container.
    pub shells_seen: Arc<std::sync::Mutex<std::collections::HashSet<String>>>,
    /// The nodes this moat paired with, for `host: "node"` calls (docs/nodes.md).
    pub nodes: Arc<crate::node::Nodes>,
    /// Follows what a forwarded call left waiting on its node (a background process, an
    /// approval), so its events reach this moat's own (docs/nodes.md, "Events").
    pub relays: Arc<crate::node::Relays>,
}

impl ExecTool {
    /// Runs one `exec` call for `session` with no caller identity (no elevated access). See
    /// [`run_for`](Self::run_for).
    pub async fn run(
        &self,
        session: &str,
        req: &ExecRequest,
        wait_to_end: bool,
    ) -> Result<ToolResult, ExecError> {
        self.run_for(&Caller::anonymous(), session, req, wait_to_end)
            .await
    }

    /// Runs one `exec` call for `session` on behalf of `caller` (whose identity the elevated
    /// gates check). `wait_to_end` makes a foreground call wait for the command however long
    /// it takes (the CLI's default), instead of yielding.
    pub async fn run_for(
        &self,
        caller: &Caller,
        session: &str,
        req: &ExecRequest,
        wait_to_end: bool,
    ) -> Result<ToolResult, ExecError> {
        self.run_observed(caller, session, req, wait_to_end, |_| {})
            .await
    }

    /// [`run_for`](Self::run_for), telling `started` the process id as soon as the command
    /// runs (the CLI needs it to end the command when it is interrupted).
    pub async fn run_observed(
        &self,
        caller: &Caller,
        session: &str,
        req: &ExecRequest,
        wait_to_end: bool,
        started: impl FnOnce(&str) + Send,
    ) -> Result<ToolResult, ExecError> {
        self.run_inner(caller, session, req, wait_to_end, false, started)
            .await
    }

    /// A foreground call to its end with stderr kept apart from the log in `<id>.err`, for
    /// `moat run` (`server::handlers::run` streams both files as they grow). Policy, approval
    /// and hardening are exactly those of [`run_observed`](Self::run_observed).
    pub async fn run_split(
        &self,
        caller: &Caller,
        session: &str,
        req: &ExecRequest,
        started: impl FnOnce(&str) + Send,
    ) -> Result<ToolResult, ExecError> {
        self.run_inner(caller, session, req, true, true, started)
            .await
    }

    /// A start in the background with stderr kept apart in `<id>.err`, for E2B's process
    /// service, which streams stdout and stderr apart (docs/e2b.md, "Processes"). Policy,
    /// approval and hardening are exactly those of any `exec`; `req.background` must be set.
    pub async fn start_split(
        &self,
        caller: &Caller,
        session: &str,
        req: &ExecRequest,
        started: impl FnOnce(&str) + Send,
    ) -> Result<ToolResult, ExecError> {
        debug_assert_eq!(req.background, Some(true));
        self.run_inner(caller, session, req, false, true, started)
            .await
    }
}
