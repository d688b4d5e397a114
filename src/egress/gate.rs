//! The daemon's side of a session's egress channel: answers the proxy's questions with the
//! pure decision, files pending approvals of kind network, reads operators' grants and
//! writes every connection to the audit log (docs/security.md, "Network egress").
//!
//! What the proxy sends is checked again here: the proxy runs in a container next to
//! hostile traffic, so its messages are bounded and re-parsed, never trusted as is.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::net::UnixListener;

use super::audit_budget::{AuditBudget, Spend};
use super::control::{self, ConnectionRecord, ControlAnswer, ControlRequest, MAX_ADDRS};
use super::{
    decide, decide_name, grant_entry, EgressError, EgressPolicy, Host, NameVerdict, Refusal, Rule,
    Verdict,
};
use crate::approvals::{ApprovalDecision, Approvals, Binding, NewApproval};
use crate::contract::ApprovalTarget;
use crate::store::{now_ms, ApprovalStatus, RecordedDecision, Store};

/// How long a message may take to arrive once the proxy connected.
const READ_TIMEOUT: Duration = Duration::from_secs(5);

/// One session's gate.
pub struct Gate {
    /// The container key the proxy belongs to (approvals and audit rows carry it).
    pub session: String,
    /// `[sandbox.egress]` parsed.
    pub policy: EgressPolicy,
    /// The approvals library over moat's store: network approvals are filed and read like
    /// every other kind, so `moat approvals` and the HTTP API show and decide them.
    pub approvals: Arc<Approvals>,
    /// How long an allow-once grant lasts after the operator's decision.
    pub grant_ms: i64,
    /// How long a pending network approval waits for an operator.
    pub approval_timeout_ms: i64,
    /// How many audit rows this session may still write: the log is shared, and a refused
    /// request costs the sandbox nothing.
    pub audit_budget: std::sync::Mutex<AuditBudget>,
}

/// What every session's gate shares, built once by the app and handed to the sessions: the
/// approvals service network approvals are filed with, and how long one waits.
#[derive(Clone)]
pub struct Gates {
    pub approvals: Arc<Approvals>,
    /// How long a pending network approval waits for an operator.
    pub approval_timeout_ms: i64,
}

impl Gates {
    pub fn new(approvals: Arc<Approvals>, config: &crate::config::ApprovalsConfig) -> Self {
        Self {
            approvals,
            approval_timeout_ms: config.timeout_secs as i64 * 1000,
        }
    }

    /// The gate of container key `session` under `policy`; an allow-once grant lasts
    /// `grant_ms`.
    pub fn gate(&self, session: &str, policy: EgressPolicy, grant_ms: i64) -> Arc<Gate> {
        Arc::new(Gate {
            session: session.to_string(),
            policy,
            approvals: self.approvals.clone(),
            grant_ms,
            approval_timeout_ms: self.approval_timeout_ms,
            audit_budget: std::sync::Mutex::new(AuditBudget::new(now_ms())),
        })
    }
}

#[cfg(test)]
impl Gates {
    /// Gates over `store` with the default approvals settings, for tests of the layers that
    /// are handed them.
    pub fn over(store: &Arc<Store>) -> Self {
        Self::new(
            Arc::new(Approvals::new(store.clone(), Vec::new())),
            &Default::default(),
        )
    }
}

impl Gate {
    fn store(&self) -> &Arc<Store> {
        self.approvals.store()
    }

    /// Exact entries operators granted this session that are still in force: allow-always
    /// for the session's life, allow-once for `grant_ms` after the decision.
    fn grants(&self) -> Vec<Rule> {
        let now = now_ms();
        let rows = self
            .store()
            .approvals_of(
                &self.session,
                ApprovalTarget::Network,
                ApprovalStatus::Approved,
            )
            .unwrap_or_default();
        rows.into_iter()
            .filter(|r| match r.decision {
                Some(RecordedDecision::AllowAlways) => true,
                Some(RecordedDecision::AllowOnce) => {
                    r.decided_at_ms.is_some_and(|t| now - t < self.grant_ms)
                }
                _ => false,
            })
            .filter_map(|r| Rule::parse(&r.command).ok())
            .collect()
    }

    /// Answers one question from the proxy.
    pub fn answer(&self, request: ControlRequest) -> ControlAnswer {
        match request {
            ControlRequest::Name { host, port } => self.name(&host, port),
            ControlRequest::Ask { host, port, addrs } => self.ask(&host, port, &addrs),
            ControlRequest::Audit(record) => {
                self.audit(record);
                ControlAnswer::Ok
            }
        }
    }

    /// The policy in force now: the operator's per-session override is read on each question,
    /// so `moat sessions egress` applies to the next connection without a restart.
    fn policy(&self) -> EgressPolicy {
        match self.store().session_egress(&self.session) {
            Ok(Some(o)) => self
                .policy
                .with_override(&o.allow, &o.deny, o.ask.as_deref()),
            _ => self.policy.clone(),
        }
    }

    /// Before any lookup: may the proxy resolve `host`? A refused or asked-about name is
    /// answered here, so it never reaches DNS (docs/security.md, "Network egress").
    fn name(&self, host: &str, port: u16) -> ControlAnswer {
        let Ok(host) = Host::parse(host) else {
            return refuse("bad-host", None);
        };
        if port == 0 {
            return refuse("bad-request", None);
        }
        match decide_name(&self.policy(), &self.grants(), &host, port) {
            NameVerdict::Resolve(_) => ControlAnswer::Resolve,
            NameVerdict::Refuse(r) => refuse(r.tag(), None),
            NameVerdict::Ask => refuse("ask", self.file_name_approval(&host, port)),
        }
    }

    fn ask(&self, host: &str, port: u16, addrs: &[std::net::IpAddr]) -> ControlAnswer {
        let Ok(host) = Host::parse(host) else {
            return refuse("bad-host", None);
        };
        if port == 0 || addrs.is_empty() || addrs.len() > MAX_ADDRS {
            return refuse("bad-request", None);
        }
        // Read from the kernel once per question (Docker adds an address with every
        // network); addresses that cannot be read count every answer as the host's own.
        let local = crate::host::local_addrs::interface_addrs().ok();
        let own = |ip| match &local {
            Some(list) => crate::host::local_addrs::is_own(ip, list),
            None => true,
        };
        match decide(&self.policy(), &self.grants(), &host, port, addrs, own) {
            Verdict::Allow => ControlAnswer::Allow,
            Verdict::Refuse(r) => {
                if let Refusal::Internal(ip) = r {
                    tracing::info!(session = %self.session, host = %host.text(), %ip, "egress refused: internal address");
                }
                refuse(r.tag(), None)
            }
            Verdict::Ask => refuse("ask", self.file_name_approval(&host, port)),
            Verdict::AskAddress(ip) => {
                let reason = format!(
                    "{}:{port} is allowed, but it resolved to {}, and {ip} is a private, loopback or link-local address: allowing {ip}:{port} lets the sandbox reach it",
                    host.text(),
                    addrs
                        .iter()
                        .map(|a| a.to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                );
                let approval = self.file_approval(&Host::Ip(ip), port, reason);
                refuse("internal-address", approval)
            }
        }
    }

    fn file_name_approval(&self, host: &Host, port: u16) -> Option<String> {
        let reason = match host {
            Host::Name(_) => "the sandbox asked to connect to a host sandbox.egress does not allow; the name was not looked up (moat resolves a name only once it is allowed, and checks its addresses then)",
            Host::Ip(_) => "the sandbox asked to connect to an address sandbox.egress does not allow",
        };
        self.file_approval(host, port, reason.to_string())
    }

    /// The pending approval for `host:port`: the one already waiting, or a new one.
    fn file_approval(&self, host: &Host, port: u16, reason: String) -> Option<String> {
        let entry = grant_entry(host, port);
        let pending = self
            .store()
            .approvals_of(
                &self.session,
                ApprovalTarget::Network,
                ApprovalStatus::Pending,
            )
            .unwrap_or_default();
        let now = now_ms();
        if let Some(row) = pending
            .iter()
            .find(|r| r.command == entry && r.expires_at_ms > now)
        {
            return Some(row.id.clone());
        }
        let new = NewApproval {
            session: self.session.clone(),
            requester: "egress-proxy".into(),
            agent: None,
            command: entry.clone(),
            binding: Binding {
                target: ApprovalTarget::Network,
                plan: entry,
                argv: Vec::new(),
                resolved: Vec::new(),
                cwd: String::new(),
                env_hash: String::new(),
                env: Vec::new(),
                files: Vec::new(),
            },
            request: "{}".into(),
            reason,
            allowed: vec![
                ApprovalDecision::AllowOnce,
                ApprovalDecision::AllowAlways,
                ApprovalDecision::Deny,
            ],
            persist: Vec::new(),
            covered: false,
            timeout_ms: self.approval_timeout_ms,
        };
        match self.approvals.create(new) {
            Ok(row) => Some(row.id),
            Err(e) => {
                tracing::warn!(session = %self.session, "file a network approval: {e}");
                None
            }
        }
    }

    fn audit(&self, record: ConnectionRecord) {
        // Counted before the audit log's budget: `/metrics` sees every connection
        // (docs/http-api.md, "Metrics").
        crate::metrics::metrics().egress_connection(
            &record.decision,
            record.bytes_up,
            record.bytes_down,
        );
        // Re-checked: only a host that parses and a known method reach the log.
        let Ok(host) = Host::parse(&record.host) else {
            return;
        };
        let method: String = record
            .method
            .chars()
            .filter(|c| c.is_ascii_uppercase())
            .take(16)
            .collect();
        let decision: String = record
            .decision
            .chars()
            .filter(|c| c.is_ascii_lowercase() || *c == '-')
            .take(32)
            .collect();
        let detail = serde_json::json!({
            "host": host.text(),
            "port": record.port,
            "method": method,
            "decision": decision,
            "bytes_up": record.bytes_up,
            "bytes_down": record.bytes_down,
            "duration_ms": record.duration_ms,
        });
        let spend = self
            .audit_budget
            .lock()
            .map(|mut b| b.spend(now_ms()))
            .unwrap_or(Spend::Skip);
        let Spend::Write { left_out } = spend else {
            return;
        };
        if left_out > 0 {
            let note = serde_json::json!({
                "decision": "left-out",
                "records": left_out,
                "why": "this session's connections came faster than the audit log takes them (docs/security.md, \"Network egress\")",
            });
            let _ = self.store().audit(
                "egress",
                None,
                Some(&self.session),
                "egress-proxy",
                &note.to_string(),
            );
        }
        let _ = self.store().audit(
            "egress",
            None,
            Some(&self.session),
            "egress-proxy",
            &detail.to_string(),
        );
    }
}

fn refuse(tag: &str, approval: Option<String>) -> ControlAnswer {
    ControlAnswer::Refuse {
        tag: tag.to_string(),
        approval,
    }
}

/// Binds the session's control socket in `dir` (replacing a stale one) and serves it until
/// the returned task is aborted. The socket is 0600 and owned by `owner` (the proxy
/// container's user), so only that proxy can connect.
pub fn listen(
    dir: &Path,
    owner: Option<(u32, u32)>,
    gate: Arc<Gate>,
) -> Result<tokio::task::JoinHandle<()>, EgressError> {
    let path: PathBuf = dir.join(control::SOCKET_NAME);
    let err = |source| EgressError::Listen {
        addr: path.display().to_string(),
        source,
    };
    match std::fs::remove_file(&path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(err(e)),
    }
    let listener = UnixListener::bind(&path).map_err(err)?;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).map_err(err)?;
    if let Some((uid, gid)) = owner {
        std::os::unix::fs::chown(&path, Some(uid), Some(gid)).map_err(err)?;
    }
    Ok(tokio::spawn(async move {
        loop {
            let Ok((mut stream, _)) = listener.accept().await else {
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            };
            let gate = gate.clone();
            tokio::spawn(async move {
                let (read, mut write) = stream.split();
                let msg = tokio::time::timeout(
                    READ_TIMEOUT,
                    control::read_message::<ControlRequest>(read),
                )
                .await;
                let Ok(Ok(msg)) = msg else {
                    return;
                };
                // The store is synchronous (SQLite): off the async workers.
                let answer = tokio::task::spawn_blocking(move || gate.answer(msg))
                    .await
                    .unwrap_or(ControlAnswer::Refuse {
                        tag: "no-daemon".into(),
                        approval: None,
                    });
                let mut line = serde_json::to_vec(&answer).unwrap_or_default();
                line.push(b'\n');
                let _ = write.write_all(&line).await;
            });
        }
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::approvals::Decider;
    use crate::config::EgressAsk;

    fn gate(ask: EgressAsk) -> Gate {
        let store = Arc::new(Store::in_memory().unwrap());
        let policy =
            EgressPolicy::parse(&["pkgs.example.org".into()], &["evil.test".into()], ask).unwrap();
        Gate {
            session: "s".into(),
            policy,
            approvals: Arc::new(Approvals::new(store, Vec::new())),
            grant_ms: 60_000,
            approval_timeout_ms: 60_000,
            audit_budget: std::sync::Mutex::new(AuditBudget::new(now_ms())),
        }
    }

    fn ask(g: &Gate, host: &str, port: u16) -> ControlAnswer {
        g.answer(ControlRequest::Ask {
            host: host.into(),
            port,
            addrs: vec!["151.101.0.223".parse().unwrap()],
        })
    }

    #[test]
    fn a_miss_files_one_approval_and_a_decision_becomes_a_grant() {
        let g = gate(EgressAsk::OnMiss);
        assert_eq!(ask(&g, "pkgs.example.org", 443), ControlAnswer::Allow);
        let ControlAnswer::Refuse { tag, approval } = ask(&g, "example.com", 443) else {
            panic!("refused");
        };
        assert_eq!(tag, "ask");
        let id = approval.expect("filed");
        // The same question again names the same approval.
        let ControlAnswer::Refuse {
            approval: again, ..
        } = ask(&g, "example.com", 443)
        else {
            panic!("refused");
        };
        assert_eq!(again.as_deref(), Some(id.as_str()));
        let row = g.store().approval(&id).unwrap().unwrap();
        assert_eq!(
            (row.target.as_str(), row.command.as_str()),
            ("network", "example.com:443")
        );
        // Only operators decide.
        let agent = Decider::agent("bot", "s");
        assert!(g
            .approvals
            .decide(&id, ApprovalDecision::AllowOnce, &agent)
            .is_err());
        let op = Decider::operator("alice", "cli");
        g.approvals
            .decide(&id, ApprovalDecision::AllowOnce, &op)
            .unwrap();
        assert_eq!(ask(&g, "example.com", 443), ControlAnswer::Allow);
        assert!(matches!(
            ask(&g, "example.com", 8443),
            ControlAnswer::Refuse { .. }
        ));
        // A deny entry wins over the grant.
        let ControlAnswer::Refuse { approval, .. } = ask(&g, "evil.test", 443) else {
            panic!("refused");
        };
        assert!(approval.is_none());
    }

    #[test]
    fn names_are_judged_before_lookup_and_a_grant_does_not_reach_private_answers() {
        let g = gate(EgressAsk::OnMiss);
        let name = |host: &str| {
            g.answer(ControlRequest::Name {
                host: host.into(),
                port: 443,
            })
        };
        assert_eq!(name("pkgs.example.org"), ControlAnswer::Resolve);
        // Denied and asked-about names are answered without addresses.
        assert!(matches!(
            name("evil.test"),
            ControlAnswer::Refuse { ref tag, approval: None } if tag == "denied"
        ));
        let ControlAnswer::Refuse { tag, approval } = name("leak.example") else {
            panic!("refused");
        };
        assert_eq!(tag, "ask");
        let id = approval.expect("filed");
        let row = g.store().approval(&id).unwrap().unwrap();
        assert!(row.reason.contains("not looked up"), "{}", row.reason);
        let op = Decider::operator("alice", "cli");
        g.approvals
            .decide(&id, ApprovalDecision::AllowOnce, &op)
            .unwrap();
        assert_eq!(name("leak.example"), ControlAnswer::Resolve);
        // The granted name now resolves to a private address: refused, and the operator is
        // asked about that address, shown what the name resolved to.
        let private = g.answer(ControlRequest::Ask {
            host: "leak.example".into(),
            port: 443,
            addrs: vec![
                "151.101.0.223".parse().unwrap(),
                "10.1.2.3".parse().unwrap(),
            ],
        });
        let ControlAnswer::Refuse { tag, approval } = private else {
            panic!("refused: {private:?}");
        };
        assert_eq!(tag, "internal-address");
        let id = approval.expect("filed");
        let row = g.store().approval(&id).unwrap().unwrap();
        assert_eq!(row.command, "10.1.2.3:443");
        assert!(
            row.reason.contains("leak.example:443")
                && row.reason.contains("151.101.0.223, 10.1.2.3"),
            "{}",
            row.reason
        );
        g.approvals
            .decide(&id, ApprovalDecision::AllowOnce, &op)
            .unwrap();
        let again = g.answer(ControlRequest::Ask {
            host: "leak.example".into(),
            port: 443,
            addrs: vec!["10.1.2.3".parse().unwrap()],
        });
        assert_eq!(again, ControlAnswer::Allow);
        // A question with no addresses is not a connection.
        assert!(matches!(
            g.answer(ControlRequest::Ask {
                host: "pkgs.example.org".into(),
                port: 443,
                addrs: vec![],
            }),
            ControlAnswer::Refuse { ref tag, .. } if tag == "bad-request"
        ));
    }

    #[test]
    fn a_flood_of_records_is_counted_not_written() {
        let g = gate(EgressAsk::Off);
        for _ in 0..5000 {
            g.answer(ControlRequest::Audit(ConnectionRecord {
                host: "evil.test".into(),
                port: 80,
                method: "GET".into(),
                decision: "denied".into(),
                bytes_up: 0,
                bytes_down: 0,
                duration_ms: 0,
            }));
        }
        let rows = g.store().audit_log(None, 10_000).unwrap();
        let egress = rows.iter().filter(|r| r.kind == "egress").count();
        assert!(
            egress <= crate::egress::audit_budget::BURST as usize + 10,
            "{egress} rows"
        );
    }

    #[test]
    fn allow_once_lasts_its_minutes() {
        let mut g = gate(EgressAsk::OnMiss);
        let ControlAnswer::Refuse { approval, .. } = ask(&g, "example.com", 443) else {
            panic!("refused");
        };
        let op = Decider::operator("alice", "cli");
        g.approvals
            .decide(&approval.unwrap(), ApprovalDecision::AllowOnce, &op)
            .unwrap();
        assert_eq!(ask(&g, "example.com", 443), ControlAnswer::Allow);
        g.grant_ms = 0;
        assert!(matches!(
            ask(&g, "example.com", 443),
            ControlAnswer::Refuse { .. }
        ));
    }

    #[test]
    fn hostile_questions_and_records_are_refused_or_dropped() {
        let g = gate(EgressAsk::OnMiss);
        let bad = g.answer(ControlRequest::Ask {
            host: "a b\u{1b}[31m".into(),
            port: 443,
            addrs: vec![],
        });
        assert!(
            matches!(bad, ControlAnswer::Refuse { ref tag, approval: None } if tag == "bad-host")
        );
        let many = g.answer(ControlRequest::Ask {
            host: "pkgs.example.org".into(),
            port: 443,
            addrs: vec!["1.1.1.1".parse().unwrap(); MAX_ADDRS + 1],
        });
        assert!(matches!(many, ControlAnswer::Refuse { .. }));
        let record = |host: &str, method: &str| {
            g.answer(ControlRequest::Audit(ConnectionRecord {
                host: host.into(),
                port: 80,
                method: method.into(),
                decision: "allow\u{1b}]0;x".into(),
                bytes_up: 1,
                bytes_down: 2,
                duration_ms: 3,
            }))
        };
        record("evil\u{1b}[2J", "GET");
        record("pkgs.example.org", "GET\u{7}X");
        let rows = g.store().audit_log(None, 100).unwrap();
        let egress: Vec<_> = rows.iter().filter(|r| r.kind == "egress").collect();
        assert_eq!(egress.len(), 1, "a record with a bad host is dropped");
        assert!(!egress[0].detail.contains('\u{1b}') && !egress[0].detail.contains('\u{7}'));
        assert!(
            egress[0].detail.contains("\"method\":\"GETX\""),
            "{}",
            egress[0].detail
        );
    }
}
