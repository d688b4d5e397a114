//! The closed sets an approval row is described by: its status and the decision recorded on
//! it (its target, a wire type, is `contract::ApprovalTarget`). Each has exactly one text form, the one the wire (docs/http-api.md,
//! docs/approvals.md) and the `approvals` table both use; the text is turned into the enum at
//! the store's edge, so a value moat does not know is an error there, never a silent default.

use crate::contract::text_enum;

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
    use crate::contract::ApprovalTarget;
    use crate::store::Store;
    use serde::{Deserialize, Serialize};

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
