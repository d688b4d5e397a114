//! `moat sessions egress KEY`: an operator's per-session egress override, read by the
//! daemon's egress gate on each connection (docs/security.md, "Network egress"). Only the
//! operator, who owns the home and its state database, can write it.

use std::process::ExitCode;

use anyhow::Context;
use moat::config::EgressAsk;
use moat::egress::Rule;
use moat::home::Home;
use moat::store::{SessionEgress, Store};

use super::term::say;

pub fn run(
    home: &Home,
    key: &str,
    allow: Vec<String>,
    deny: Vec<String>,
    ask: Option<String>,
    clear: bool,
) -> anyhow::Result<ExitCode> {
    moat::session::validate_key(key)?;
    for entry in allow.iter().chain(&deny) {
        Rule::parse(entry)?;
    }
    if let Some(a) = &ask {
        if EgressAsk::parse(a).is_none() {
            anyhow::bail!("set --ask `{a}`: use off or on-miss");
        }
    }
    // The operator's to set (docs/security.md, "The operator channel"): refused inside a host
    // command, and audited.
    let a = super::approvals::open(home)?;
    let d = super::approvals::operator(&a, &format!("sessions egress {key}"), None)?;
    a.store().audit(
        "session-egress",
        None,
        Some(key),
        &d.label(),
        &moat::output::escape_display(&format!(
            "allow={allow:?} deny={deny:?} ask={ask:?} clear={clear}"
        )),
    )?;
    let (config, _) = moat::config::load(&home.config_file())?;
    // The proxy belongs to the container, so the override is keyed like it.
    let container = moat::session::container_key(key, config.sandbox.scope);
    let store = Store::open(&home.state_db()).context("open the state database")?;
    if clear {
        store.clear_session_egress(&container)?;
    }
    let mut o = store.session_egress(&container)?.unwrap_or_default();
    for e in allow {
        if !o.allow.contains(&e) {
            o.allow.push(e);
        }
    }
    for e in deny {
        if !o.deny.contains(&e) {
            o.deny.push(e);
        }
    }
    if ask.is_some() {
        o.ask = ask;
    }
    if o != SessionEgress::default() {
        store.set_session_egress(&container, &o)?;
    }
    let who = nix::unistd::User::from_uid(nix::unistd::geteuid())
        .ok()
        .flatten()
        .map(|u| u.name)
        .unwrap_or_else(|| "operator".into());
    let detail = format!(
        "allow {:?} deny {:?} ask {}",
        o.allow,
        o.deny,
        o.ask.as_deref().unwrap_or("(config)")
    );
    store.audit(
        "egress-override",
        None,
        Some(&container),
        &format!("cli:{who}"),
        &detail,
    )?;
    say!(
        "egress override for {container}: {}",
        moat::output::escape_terminal(&detail)
    );
    Ok(ExitCode::SUCCESS)
}
