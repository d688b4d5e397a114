//! The closed sets an approval row is described by: its status, its target (kind) and the
//! decision recorded on it. Each has exactly one text form, the one the wire (docs/http-api.md,
//! docs/approvals.md) and the `approvals` table both use; the text is turned into the enum at
//! the store's edge, so a value moat does not know is an error there, never a silent default.

use rusqlite::types::{FromSql, FromSqlError, FromSqlResult, ToSql, ToSqlOutput, ValueRef};
use serde::{Deserialize, Serialize};

/// A stored text that names no value of its set (a damaged or newer database).
#[derive(Debug, thiserror::Error)]
#[error("read the approval {what}: `{value}` is not one of {expected}")]
pub struct UnknownValue {
    /// Which set was read (`status`, `target`, `decision`).
    pub what: &'static str,
    /// The text found, escaped for display: it came from a file anyone with the home could edit.
    pub value: String,
    /// The accepted texts, comma-separated, so the message says what would have been read.
    pub expected: String,
}

/// Declares a closed set with one text form per value: `as_str`, `parse`, `Display`, serde
/// (through the same texts) and the SQLite conversions.
macro_rules! text_enum {
    ($(#[$meta:meta])* $name:ident, $what:literal, { $($(#[$vmeta:meta])* $variant:ident => $text:literal),+ $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
        pub enum $name {
            $($(#[$vmeta])* #[serde(rename = $text)] $variant),+
        }

        impl $name {
            /// Every value, in declaration order (tables and tests walk it).
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            /// The one text form: on the wire and in the `approvals` table.
            pub fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $text),+
                }
            }

            /// The value `text` names exactly (case matters, as it does in SQL), if any.
            pub fn parse(text: &str) -> Option<Self> {
                match text {
                    $($text => Some($name::$variant),)+
                    _ => None,
                }
            }

            /// Like [`Self::parse`], with an error that names the set and its values.
            pub fn parse_stored(text: &str) -> Result<Self, UnknownValue> {
                Self::parse(text).ok_or_else(|| UnknownValue {
                    what: $what,
                    value: text.escape_debug().to_string(),
                    expected: Self::ALL
                        .iter()
                        .map(|v| v.as_str())
                        .collect::<Vec<_>>()
                        .join(", "),
                })
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl ToSql for $name {
            fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
                Ok(ToSqlOutput::Borrowed(ValueRef::Text(self.as_str().as_bytes())))
            }
        }

        impl FromSql for $name {
            fn column_result(value: ValueRef<'_>) -> FromSqlResult<Self> {
                Self::parse_stored(value.as_str()?).map_err(|e| FromSqlError::Other(Box::new(e)))
            }
        }
    };
}

text_enum!(
    /// Where an approval stands. Only `pending` can be decided; only `approved` can run.
    ApprovalStatus, "status", {
        /// Waiting for an operator until it expires.
        Pending => "pending",
        /// Allowed (by an operator, or by `ask_fallback` after expiry), not yet run.
        Approved => "approved",
        /// Refused by an operator, or because the plan changed before it ran.
        Denied => "denied",
        /// Nobody decided in time.
        Expired => "expired",
        /// Approved and run: an approval runs once.
        Used => "used",
    }
);

text_enum!(
    /// What an approval is for: where the command runs, or a connection out of the sandbox.
    ApprovalTarget, "target", {
        /// A command in the session's container.
        Sandbox => "sandbox",
        /// A command on moat's machine under the host policy.
        Host => "host",
        /// A command on moat's machine with `default_level = full`.
        HostFull => "host-full",
        /// A connection the egress proxy asked about (docs/security.md, "Network egress").
        Network => "network",
    }
);

impl ApprovalTarget {
    /// Whether the command runs on moat's own machine, outside any container.
    pub fn on_host(self) -> bool {
        matches!(self, Self::Host | Self::HostFull)
    }

    /// `host` for both host targets, `sandbox` otherwise: how agents and events name the
    /// machine, and which allowlist (per machine) allow-always writes to.
    pub fn machine(self) -> &'static str {
        if self.on_host() {
            "host"
        } else {
            "sandbox"
        }
    }
}

text_enum!(
    /// The decision recorded on an approval: an operator's answer, or what moat decided itself.
    RecordedDecision, "decision", {
        /// An operator allowed this run once.
        AllowOnce => "allow-once",
        /// An operator allowed it and its allowlist entries for good.
        AllowAlways => "allow-always",
        /// An operator refused it.
        Deny => "deny",
        /// Nobody decided in time (the approval expired).
        Timeout => "timeout",
        /// `ask_fallback` ran the expired approval.
        Fallback => "fallback",
        /// The run prepared again differed from the approved plan, so it was refused.
        PlanChanged => "plan-changed",
        /// Its session was removed (`moat sessions rm`): nothing may run, or re-create the
        /// session, on its behalf (docs/approvals.md, "Removing a session").
        SessionRemoved => "session-removed",
    }
);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Store;

    /// Every value's text: the wire and the table must keep exactly these.
    #[test]
    fn texts_are_the_wire_strings() {
        let statuses = [
            (ApprovalStatus::Pending, "pending"),
            (ApprovalStatus::Approved, "approved"),
            (ApprovalStatus::Denied, "denied"),
            (ApprovalStatus::Expired, "expired"),
            (ApprovalStatus::Used, "used"),
        ];
        let targets = [
            (ApprovalTarget::Sandbox, "sandbox"),
            (ApprovalTarget::Host, "host"),
            (ApprovalTarget::HostFull, "host-full"),
            (ApprovalTarget::Network, "network"),
        ];
        let decisions = [
            (RecordedDecision::AllowOnce, "allow-once"),
            (RecordedDecision::AllowAlways, "allow-always"),
            (RecordedDecision::Deny, "deny"),
            (RecordedDecision::Timeout, "timeout"),
            (RecordedDecision::Fallback, "fallback"),
            (RecordedDecision::PlanChanged, "plan-changed"),
            (RecordedDecision::SessionRemoved, "session-removed"),
        ];
        assert_eq!(statuses.len(), ApprovalStatus::ALL.len());
        assert_eq!(targets.len(), ApprovalTarget::ALL.len());
        assert_eq!(decisions.len(), RecordedDecision::ALL.len());
        fn check<T>(rows: &[(T, &str)])
        where
            T: Copy + PartialEq + std::fmt::Debug + std::fmt::Display + Serialize,
            T: for<'de> Deserialize<'de>,
        {
            for (v, text) in rows {
                assert_eq!(v.to_string(), *text);
                let json = serde_json::to_string(v).unwrap();
                assert_eq!(json, format!("\"{text}\""));
                assert_eq!(serde_json::from_str::<T>(&json).unwrap(), *v);
            }
        }
        check(&statuses);
        check(&targets);
        check(&decisions);
        for (v, text) in statuses {
            assert_eq!((v.as_str(), ApprovalStatus::parse(text)), (text, Some(v)));
        }
        for (v, text) in targets {
            assert_eq!((v.as_str(), ApprovalTarget::parse(text)), (text, Some(v)));
        }
        for (v, text) in decisions {
            assert_eq!((v.as_str(), RecordedDecision::parse(text)), (text, Some(v)));
        }
    }

    #[test]
    fn unknown_texts_are_refused_by_name() {
        for text in [
            "",
            "Pending",
            "PENDING",
            " pending",
            "host_full",
            "allow_once",
        ] {
            assert_eq!(ApprovalStatus::parse(text), None, "{text:?}");
        }
        assert_eq!(ApprovalTarget::parse("host_full"), None);
        assert_eq!(RecordedDecision::parse("allow_once"), None);
        assert!(serde_json::from_str::<ApprovalTarget>("\"hostfull\"").is_err());
        let e = ApprovalStatus::parse_stored("bogus\n").unwrap_err();
        assert_eq!(
            e.to_string(),
            "read the approval status: `bogus\\n` is not one of pending, approved, denied, expired, used"
        );
    }

    #[test]
    fn each_value_round_trips_through_sqlite() {
        let s = Store::in_memory().unwrap();
        let conn = s.conn();
        conn.execute_batch("CREATE TABLE t (status TEXT, target TEXT, decision TEXT)")
            .unwrap();
        let n = ApprovalStatus::ALL
            .len()
            .max(ApprovalTarget::ALL.len())
            .max(RecordedDecision::ALL.len());
        for i in 0..n {
            let st = ApprovalStatus::ALL[i % ApprovalStatus::ALL.len()];
            let ta = ApprovalTarget::ALL[i % ApprovalTarget::ALL.len()];
            let de = RecordedDecision::ALL[i % RecordedDecision::ALL.len()];
            conn.execute("DELETE FROM t", []).unwrap();
            conn.execute(
                "INSERT INTO t VALUES (?1, ?2, ?3)",
                rusqlite::params![st, ta, de],
            )
            .unwrap();
            // Stored as the same text the wire uses.
            let raw: (String, String, String) = conn
                .query_row("SELECT * FROM t", [], |r| {
                    Ok((r.get(0)?, r.get(1)?, r.get(2)?))
                })
                .unwrap();
            assert_eq!(
                raw,
                (st.to_string(), ta.to_string(), de.to_string()),
                "{st:?} {ta:?} {de:?}"
            );
            let back: (ApprovalStatus, ApprovalTarget, RecordedDecision) = conn
                .query_row("SELECT * FROM t", [], |r| {
                    Ok((r.get(0)?, r.get(1)?, r.get(2)?))
                })
                .unwrap();
            assert_eq!(back, (st, ta, de));
        }
        conn.execute("UPDATE t SET status = 'lost'", []).unwrap();
        let err = conn
            .query_row("SELECT status FROM t", [], |r| {
                r.get::<_, ApprovalStatus>(0)
            })
            .unwrap_err();
        assert!(
            err.to_string().contains("`lost` is not one of pending"),
            "{err}"
        );
    }
}
