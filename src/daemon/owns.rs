//! What a running daemon still owns, in words: the sessions, processes and approvals that
//! `/v1/health` lists under `owns`. The refusal of a daemon of another build or configuration,
//! `moat daemon status` and `moat daemon stop` name them so the operator knows what to end
//! (docs/ARCHITECTURE.md, "Daemon").

use serde_json::Value;

/// Whether the daemon runs processes or waits on approvals (what keeps one started on demand
/// from being replaced).
pub fn busy(owns: &Value) -> bool {
    count(owns, "processCount") > 0 || count(owns, "approvalCount") > 0
}

fn count(owns: &Value, key: &str) -> u64 {
    owns[key].as_u64().unwrap_or(0)
}

/// "2 running processes (3f2a9c01 in session main, …) and 1 pending approval (ab12cd34 in
/// session ci)", or "nothing" — escaped, since session names and ids come from the store.
pub fn describe(owns: &Value) -> String {
    let part = |count_key: &str, list_key: &str, one: &str, many: &str| -> Option<String> {
        let n = count(owns, count_key);
        if n == 0 {
            return None;
        }
        let named: Vec<String> = owns[list_key]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or_default()
            .iter()
            .map(|e| {
                let id = e["id"].as_str().unwrap_or("?");
                format!(
                    "{} in session {}",
                    crate::output::escape_display(&id[..8.min(id.len())]),
                    crate::output::escape_display(e["session"].as_str().unwrap_or("?"))
                )
            })
            .collect();
        let more = if (named.len() as u64) < n {
            ", …"
        } else {
            ""
        };
        let what = if n == 1 { one } else { many };
        Some(format!("{n} {what} ({}{more})", named.join(", ")))
    };
    let parts: Vec<String> = [
        part(
            "processCount",
            "processes",
            "running process",
            "running processes",
        ),
        part(
            "approvalCount",
            "approvals",
            "pending approval",
            "pending approvals",
        ),
    ]
    .into_iter()
    .flatten()
    .collect();
    if parts.is_empty() {
        "nothing".to_string()
    } else {
        parts.join(" and ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn names_what_keeps_the_daemon() {
        assert_eq!(describe(&json!({})), "nothing");
        assert!(!busy(&json!({"processCount": 0, "approvalCount": 0})));
        let owns = json!({
            "processCount": 3,
            "processes": [{"id": "3f2a9c01aaaa", "session": "main"}],
            "approvalCount": 1,
            "approvals": [{"id": "ab12cd34ffff", "session": "ci\u{1b}[2J"}],
        });
        assert!(busy(&owns));
        let text = describe(&owns);
        assert!(
            text.starts_with("3 running processes (3f2a9c01 in session main, …) and 1 pending approval (ab12cd34 in session ci"),
            "{text}"
        );
        assert!(!text.contains('\u{1b}'), "{text}");
    }
}
