//! The policy in force for one exec, composed from its layers (docs/policy.md, "The policy in
//! force").
//! Pure: the tools layer reads the layers (configuration, the store, skills) and hands them
//! here; nothing else decides how they combine.
//!
//! In order: the configured policy for the target; `host-full` (an elevated run under
//! `default_level = full`) sets security full and ask off; the operator's session override
//! tightens (or with `--loosen` replaces); the request can only tighten security and raise
//! ask. Entries from outside the configuration (enabled skills' binaries, the operator's
//! run-time allowlist) count only under an allowlist.

use super::levels::{raise_ask, tighten_security, with_override, Ask, Security};
use super::settings::Policy;

/// An operator's per-session override (`moat sessions set NAME --security … --ask …`).
#[derive(Debug, Clone, Copy, Default)]
pub struct SessionOverride<'a> {
    pub security: Option<&'a str>,
    pub ask: Option<&'a str>,
    /// Replace the configured levels instead of tightening them.
    pub loosen: bool,
}

/// What a request asked for; values it spells wrong count as not given.
#[derive(Debug, Clone, Copy, Default)]
pub struct RequestLevels<'a> {
    pub security: Option<&'a str>,
    pub ask: Option<&'a str>,
}

/// The layers above the configured policy.
#[derive(Debug, Clone, Copy, Default)]
pub struct Layers<'a> {
    /// A host command: an allowlist entry alone never runs it unasked; every segment's argv
    /// must fit a profile (docs/policy.md, "Argv profiles").
    pub on_host: bool,
    /// An elevated run under `default_level = full` (docs/approvals.md): no allowlist, no
    /// approvals, whatever the host policy says.
    pub host_full: bool,
    /// The operator's override for the session (sandbox commands).
    pub session: Option<SessionOverride<'a>>,
    pub request: RequestLevels<'a>,
}

/// The configured policy with `layers` applied.
pub fn compose(configured: &Policy, layers: Layers) -> Policy {
    let mut policy = configured.clone();
    policy.profiles_required = layers.on_host;
    if layers.host_full {
        policy.security = Security::Full;
        policy.ask = Ask::Off;
    }
    if let Some(o) = layers.session {
        (policy.security, policy.ask) =
            with_override((policy.security, policy.ask), o.security, o.ask, o.loosen);
    }
    policy.security = tighten_security(
        policy.security,
        layers.request.security.and_then(Security::parse_lenient),
    );
    policy.ask = raise_ask(policy.ask, layers.request.ask.and_then(Ask::parse_lenient));
    policy
}

/// Whether entries from outside the configuration matter, so the caller can skip reading
/// them (store reads on the exec path) when they do not.
pub fn reads_entries(policy: &Policy) -> bool {
    policy.security == Security::Allowlist
}

/// Adds `(path glob, rule)` entries from skills and the run-time allowlist: only under an
/// allowlist; in every other mode they would allow nothing and are left out.
pub fn with_entries(mut policy: Policy, entries: Vec<(String, String)>) -> Policy {
    if reads_entries(&policy) {
        policy.labeled_allowlist.extend(entries);
    }
    policy
}

#[cfg(test)]
mod tests {
    use super::*;
    use Ask::{Always, Off, OnMiss};
    use Security::{Allowlist, Deny, Full};

    fn configured(security: Security, ask: Ask) -> Policy {
        Policy {
            security,
            ask,
            ..Policy::default()
        }
    }

    fn over(
        security: Option<&'static str>,
        ask: Option<&'static str>,
        loosen: bool,
    ) -> Option<SessionOverride<'static>> {
        Some(SessionOverride {
            security,
            ask,
            loosen,
        })
    }

    fn req(security: Option<&'static str>, ask: Option<&'static str>) -> RequestLevels<'static> {
        RequestLevels { security, ask }
    }

    /// (name, configured, host-full, session override, request, levels in force)
    type Row = (
        &'static str,
        (Security, Ask),
        bool,
        Option<SessionOverride<'static>>,
        RequestLevels<'static>,
        (Security, Ask),
    );

    /// Each layer alone and together: a request only tightens; an override tightens unless it
    /// loosens; host-full opens the host before the others narrow it again.
    #[test]
    fn layers_compose_in_order() {
        #[rustfmt::skip]
        let rows: &[Row] = &[
            ("nothing above the config", (Allowlist, OnMiss), false, None, req(None, None), (Allowlist, OnMiss)),
            ("a request tightens security", (Full, Off), false, None, req(Some("allowlist"), None), (Allowlist, Off)),
            ("a request cannot loosen security", (Deny, Off), false, None, req(Some("full"), None), (Deny, Off)),
            ("a request raises ask", (Full, Off), false, None, req(None, Some("always")), (Full, Always)),
            ("a request cannot lower ask", (Full, Always), false, None, req(None, Some("off")), (Full, Always)),
            ("a misspelled request level is not given", (Full, Off), false, None, req(Some("nope"), Some("x")), (Full, Off)),
            ("an override tightens", (Full, Off), false, over(Some("deny"), None, false), req(None, None), (Deny, Off)),
            ("an override does not loosen by itself", (Allowlist, OnMiss), false, over(Some("full"), Some("off"), false), req(None, None), (Allowlist, OnMiss)),
            ("an override with --loosen replaces", (Allowlist, OnMiss), false, over(Some("full"), Some("off"), true), req(None, None), (Full, Off)),
            ("a request tightens past a loosened override", (Allowlist, OnMiss), false, over(Some("full"), None, true), req(Some("deny"), None), (Deny, OnMiss)),
            ("host-full opens the host", (Allowlist, Always), true, None, req(None, None), (Full, Off)),
            ("a request still tightens host-full", (Allowlist, Always), true, None, req(Some("allowlist"), Some("on-miss")), (Allowlist, OnMiss)),
        ];
        for (name, (security, ask), host_full, session, request, want) in rows {
            let layers = Layers {
                on_host: false,
                host_full: *host_full,
                session: *session,
                request: *request,
            };
            let got = compose(&configured(*security, *ask), layers);
            assert_eq!((got.security, got.ask), *want, "{name}");
        }
    }

    /// Skills and run-time entries add to an allowlist, and to nothing else.
    #[test]
    fn entries_count_only_under_an_allowlist() {
        let entry = || {
            vec![(
                "/usr/bin/jq".to_string(),
                "skill: jq (/usr/bin/jq)".to_string(),
            )]
        };
        for (security, added) in [(Allowlist, true), (Full, false), (Deny, false)] {
            let policy = with_entries(configured(security, Off), entry());
            assert_eq!(!policy.labeled_allowlist.is_empty(), added, "{security:?}");
            assert_eq!(reads_entries(&policy), added, "{security:?}");
        }
    }
}
