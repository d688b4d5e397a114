//! `moat approvals …`: the operator's channel for decisions. It writes to the state database
//! in `$MOAT_HOME` (mode 0700, the operator's), then wakes the daemon's waiter over the socket
//! (docs/approvals.md, "How waiters wake"), so the plan runs within milliseconds.

use super::term::say;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{bail, Context};
use moat::approvals::{ApprovalDecision, Approvals, Decider};
use moat::home::Home;
use moat::store::Store;
use serde_json::json;

use super::args::ApprovalsCommand;

/// The approvals service over `home`'s state, without an engine connection.
pub fn open(home: &Home) -> anyhow::Result<Approvals> {
    let (config, _) = moat::config::load(&home.config_file())?;
    let secrets = moat::secrets::Secrets::load(&config).context("load secrets")?;
    home.ensure_root().context("create moat home")?;
    let store = Arc::new(Store::open(&home.state_db())?);
    Ok(Approvals::new(store, secrets.all()))
}

/// The local operator, about to do `what` (on `approval`). Refused, and the attempt audited,
/// when this moat runs inside a command moat started (its marker is in this process's
/// environment, or in that of an ancestor, its session leader or its process-group leader):
/// an agent's host command must not act as the operator (docs/security.md, "The operator
/// channel").
pub fn operator(a: &Approvals, what: &str, approval: Option<&str>) -> anyhow::Result<Decider> {
    if let Err(refusal) = moat::host::check_self() {
        let approval = approval.and_then(|id| a.get(id).ok()).map(|r| r.id);
        let audited = moat::host::audit_refusal(
            a.store(),
            &refusal,
            "cli",
            &format!("moat {what}"),
            approval.as_deref(),
        );
        if let Err(e) = audited {
            bail!("act as the operator for `moat {what}`: {refusal} (and the attempt could not be audited: {e})");
        }
        bail!("act as the operator for `moat {what}`: {refusal}");
    }
    let caller = moat::tools::Caller::cli();
    Ok(Decider::operator(caller.sender.unwrap_or_default(), "cli"))
}

fn when(ms: Option<i64>) -> String {
    match ms {
        Some(ms) => {
            let secs = (moat::store::now_ms() - ms) / 1000;
            if secs >= 0 {
                format!("{secs}s ago")
            } else {
                format!("in {}s", -secs)
            }
        }
        None => "-".into(),
    }
}

pub fn run(home: Home, cmd: ApprovalsCommand) -> anyhow::Result<ExitCode> {
    let a = open(&home)?;
    match cmd {
        ApprovalsCommand::List { status, all, json } => {
            let filter = match (status.as_deref(), all) {
                (Some(s), _) => Some(s),
                (None, true) => None,
                (None, false) => Some("pending"),
            };
            let rows = a.list_named(filter)?;
            if json {
                let v: Vec<_> = rows.iter().map(|r| a.to_json(r)).collect();
                super::term::json_pretty(&v)?;
            } else if rows.is_empty() {
                say!(
                    "no approvals{}",
                    filter.map(|f| format!(" ({f})")).unwrap_or_default()
                );
            } else {
                for r in &rows {
                    // Never truncated: the operator decides on what is really there.
                    say!(
                        "{}  {:<8}  {:<9}  {:<12}  expires {}  {}",
                        &r.id[..8],
                        r.status,
                        r.target,
                        r.session,
                        when(Some(r.expires_at_ms)),
                        a.display(&r.command)
                    );
                }
            }
        }
        ApprovalsCommand::Show { id, json } => {
            let r = a.get(&id)?;
            let audit = a.audit_log(Some(&r.id), 100)?;
            if json {
                let mut v = a.to_json(&r);
                v["audit"] = audit
                    .iter()
                    .map(|e| json!({"atMs": e.at_ms, "kind": e.kind, "actor": e.actor, "detail": e.detail}))
                    .collect();
                super::term::json_pretty(&v)?;
            } else {
                say!("id:        {}", r.id);
                say!("status:    {}", r.status);
                say!("host:      {}", r.target);
                say!("session:   {}", r.session);
                say!(
                    "requester: {}{}",
                    r.requester,
                    r.agent
                        .as_deref()
                        .map(|g| format!(" (agent {g})"))
                        .unwrap_or_default()
                );
                say!("reason:    {}", moat::output::escape_display(&r.reason));
                say!("command:   {}", a.display(&r.command));
                say!("plan:      {}", a.display(&r.plan));
                if let Ok(b) = serde_json::from_str::<moat::approvals::Binding>(&r.binding) {
                    say!("cwd:       {}", moat::output::escape_display(&b.cwd));
                    say!("env hash:  {}", b.env_hash);
                    // Every variable the command gets, as bound (secret values redacted).
                    say!("env:       {} variables", b.env.len());
                    for kv in &b.env {
                        say!("  {}", a.display(kv));
                    }
                    for f in &b.files {
                        say!(
                            "file:      {} ({}, {} bytes, sha256 {})",
                            moat::output::escape_display(&f.operand),
                            moat::output::escape_display(&f.path),
                            f.size,
                            f.sha256
                        );
                    }
                    for (i, (argv, res)) in b.argv.iter().zip(&b.resolved).enumerate() {
                        say!(
                            "segment {}: {} → {}",
                            i + 1,
                            moat::output::display_argv(argv),
                            res.as_deref().unwrap_or("(unresolved)")
                        );
                    }
                }
                say!("created:   {}", when(Some(r.created_at_ms)));
                say!("expires:   {}", when(Some(r.expires_at_ms)));
                say!("offers:    {}", r.allowed.replace(',', ", "));
                if let Some(d) = &r.decision {
                    say!(
                        "decision:  {d} by {} {}",
                        r.decided_by.as_deref().unwrap_or("?"),
                        when(r.decided_at_ms)
                    );
                }
                if let Some(p) = &r.process_id {
                    say!("process:   {p}");
                }
                say!("audit:");
                for e in audit {
                    say!(
                        "  {}  {}  {}  {}",
                        when(Some(e.at_ms)),
                        e.kind,
                        e.actor,
                        e.detail
                    );
                }
            }
        }
        ApprovalsCommand::Approve { id, always } => {
            let d = if always {
                ApprovalDecision::AllowAlways
            } else {
                ApprovalDecision::AllowOnce
            };
            let r = a.decide(
                &id,
                d,
                &operator(&a, &format!("approvals approve {id}"), Some(&id))?,
            )?;
            super::daemon::wake_waiter(&home, &r.id);
            say!(
                "approved {} ({}): {}",
                &r.id[..8],
                d.as_str(),
                a.display(&r.command)
            );
        }
        ApprovalsCommand::Deny { id } => {
            let d = operator(&a, &format!("approvals deny {id}"), Some(&id))?;
            let r = a.decide(&id, ApprovalDecision::Deny, &d)?;
            super::daemon::wake_waiter(&home, &r.id);
            say!("denied {}: {}", &r.id[..8], a.display(&r.command));
        }
        ApprovalsCommand::Audit { id, limit, json } => {
            let id = match id {
                Some(i) => Some(a.get(&i)?.id),
                None => None,
            };
            let rows = a.audit_log(id.as_deref(), limit)?;
            if json {
                let v: Vec<_> = rows
                    .iter()
                    .map(|e| json!({"atMs": e.at_ms, "kind": e.kind, "approvalId": e.approval_id, "session": e.session, "actor": e.actor, "detail": e.detail}))
                    .collect();
                super::term::json_pretty(&v)?;
            } else {
                for e in rows {
                    say!(
                        "{}  {:<17}  {:<8}  {:<12}  {}  {}",
                        e.at_ms,
                        e.kind,
                        e.approval_id
                            .as_deref()
                            .map(|i| &i[..8.min(i.len())])
                            .unwrap_or("-"),
                        e.session.as_deref().unwrap_or("-"),
                        e.actor,
                        e.detail
                    );
                }
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
