//! The two policy dials, `security` and `ask`, and how a request may move them.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use super::error::PolicyError;

/// How much a command may do without an operator.
///
/// The order matters: a request may only move towards `Deny` (see [`tighten_security`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Security {
    /// Nothing runs.
    Deny,
    /// Only commands whose every segment is allowlisted or a safe-bin use run.
    Allowlist,
    /// Everything runs, except what the operator's deny patterns refuse.
    Full,
}

/// When the operator is asked.
///
/// The order matters: a request may only move towards `Always` (see [`raise_ask`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Ask {
    /// Never ask: a miss is refused.
    Off,
    /// Ask when the allowlist does not cover a command.
    OnMiss,
    /// Ask for every command.
    Always,
}

impl Security {
    /// The level's name as written in configuration and requests.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Deny => "deny",
            Self::Allowlist => "allowlist",
            Self::Full => "full",
        }
    }

    /// Parses a request value; an unknown value counts as "not given" (docs/mcp.md, "Tools").
    pub fn parse_lenient(value: &str) -> Option<Self> {
        value.parse().ok()
    }
}

impl Ask {
    /// The level's name as written in configuration and requests.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Off => "off",
            Self::OnMiss => "on-miss",
            Self::Always => "always",
        }
    }

    /// Parses a request value; an unknown value counts as "not given" (docs/mcp.md, "Tools").
    pub fn parse_lenient(value: &str) -> Option<Self> {
        value.parse().ok()
    }
}

impl FromStr for Security {
    type Err = PolicyError;

    fn from_str(value: &str) -> Result<Self, Self::Err> {
        match value.trim().to_ascii_lowercase().as_str() {
            "deny" => Ok(Self::Deny),
            "allowlist" => Ok(Self::Allowlist),
            "full" => Ok(Self::Full),
            _ => Err(PolicyError::UnknownSecurity(value.to_owned())),
        }
    }
}

impl FromStr for Ask {
    type Err = PolicyError;

    fn from_str(value: &str) -> Result<Self, Self::Err> {
        match value.trim().to_ascii_lowercase().as_str() {
            "off" => Ok(Self::Off),
            "on-miss" => Ok(Self::OnMiss),
            "always" => Ok(Self::Always),
            _ => Err(PolicyError::UnknownAsk(value.to_owned())),
        }
    }
}

impl fmt::Display for Security {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Display for Ask {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The security level in force: a request may only tighten the configured one.
pub fn tighten_security(configured: Security, requested: Option<Security>) -> Security {
    requested.map_or(configured, |requested| configured.min(requested))
}

/// The ask level in force: a request may only raise the configured one.
pub fn raise_ask(configured: Ask, requested: Option<Ask>) -> Ask {
    requested.map_or(configured, |requested| configured.max(requested))
}

/// The levels in force after an operator's per-session override (`moat sessions set`): it
/// tightens the configured ones, or replaces them with `--loosen` (docs/policy.md). Values it
/// does not know count as not given, like a request's.
pub fn with_override(
    configured: (Security, Ask),
    security: Option<&str>,
    ask: Option<&str>,
    loosen: bool,
) -> (Security, Ask) {
    let security = security.and_then(Security::parse_lenient);
    let ask = ask.and_then(Ask::parse_lenient);
    if loosen {
        (
            security.unwrap_or(configured.0),
            ask.unwrap_or(configured.1),
        )
    } else {
        (
            tighten_security(configured.0, security),
            raise_ask(configured.1, ask),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_operator_override_tightens_unless_it_loosens() {
        let full_off = (Security::Full, Ask::Off);
        type Row<'a> = (
            (Security, Ask),
            Option<&'a str>,
            Option<&'a str>,
            bool,
            (Security, Ask),
        );
        let rows: &[Row] = &[
            (full_off, None, None, false, full_off),
            (
                full_off,
                Some("deny"),
                None,
                false,
                (Security::Deny, Ask::Off),
            ),
            (
                full_off,
                None,
                Some("always"),
                false,
                (Security::Full, Ask::Always),
            ),
            (
                (Security::Deny, Ask::Always),
                Some("full"),
                Some("off"),
                false,
                (Security::Deny, Ask::Always),
            ),
            (
                (Security::Deny, Ask::Always),
                Some("full"),
                Some("off"),
                true,
                full_off,
            ),
            (
                (Security::Deny, Ask::Always),
                None,
                None,
                true,
                (Security::Deny, Ask::Always),
            ),
            (full_off, Some("bogus"), Some("bogus"), false, full_off),
        ];
        for (configured, security, ask, loosen, want) in rows {
            assert_eq!(
                with_override(*configured, *security, *ask, *loosen),
                *want,
                "{configured:?} {security:?} {ask:?} loosen={loosen}"
            );
        }
    }

    #[test]
    fn security_parses_trimmed_and_case_insensitive() {
        let rows: &[(&str, Option<Security>)] = &[
            ("deny", Some(Security::Deny)),
            ("DENY", Some(Security::Deny)),
            ("  Allowlist ", Some(Security::Allowlist)),
            ("full", Some(Security::Full)),
            ("\tFULL\n", Some(Security::Full)),
            ("", None),
            ("none", None),
            ("allow-list", None),
            ("fullest", None),
        ];
        for (input, want) in rows {
            assert_eq!(Security::parse_lenient(input), *want, "input {input:?}");
        }
    }

    #[test]
    fn ask_parses_trimmed_and_case_insensitive() {
        let rows: &[(&str, Option<Ask>)] = &[
            ("off", Some(Ask::Off)),
            ("On-Miss", Some(Ask::OnMiss)),
            (" always ", Some(Ask::Always)),
            ("ALWAYS", Some(Ask::Always)),
            ("never", None),
            ("on_miss", None),
            ("onmiss", None),
            ("", None),
        ];
        for (input, want) in rows {
            assert_eq!(Ask::parse_lenient(input), *want, "input {input:?}");
        }
    }

    #[test]
    fn unknown_value_error_reads_as_failed_to() {
        let err = "nope".parse::<Security>().unwrap_err();
        assert_eq!(
            err.to_string(),
            "parse security level \"nope\" (expected deny, allowlist or full)"
        );
    }

    #[test]
    fn requests_only_tighten_security() {
        use Security::*;
        let rows = [
            (Full, None, Full),
            (Full, Some(Allowlist), Allowlist),
            (Full, Some(Deny), Deny),
            (Allowlist, Some(Full), Allowlist),
            (Allowlist, Some(Deny), Deny),
            (Deny, Some(Full), Deny),
            (Deny, None, Deny),
        ];
        for (configured, requested, want) in rows {
            assert_eq!(tighten_security(configured, requested), want);
        }
    }

    #[test]
    fn requests_only_raise_ask() {
        use Ask::*;
        let rows = [
            (Off, None, Off),
            (Off, Some(OnMiss), OnMiss),
            (Off, Some(Always), Always),
            (OnMiss, Some(Off), OnMiss),
            (Always, Some(Off), Always),
            (OnMiss, Some(Always), Always),
        ];
        for (configured, requested, want) in rows {
            assert_eq!(raise_ask(configured, requested), want);
        }
    }

    #[test]
    fn serde_names_match_the_request_strings() {
        assert_eq!(serde_json::to_string(&Ask::OnMiss).unwrap(), "\"on-miss\"");
        assert_eq!(
            serde_json::to_string(&Security::Allowlist).unwrap(),
            "\"allowlist\""
        );
        let ask: Ask = serde_json::from_str("\"always\"").unwrap();
        assert_eq!(ask, Ask::Always);
        assert!(serde_json::from_str::<Ask>("\"sometimes\"").is_err());
    }
}
