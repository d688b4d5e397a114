//! `moat node …`: this moat as a remote node (docs/nodes.md, "Pairing"): the fingerprint a
//! gateway's operator pins, and the pairing tokens this node's operator issues and revokes.
//! Local: they act on this home's certificate and state database, no daemon needed, and a
//! revocation takes effect on the gateway's next call.

use std::process::ExitCode;

use anyhow::Context;
use moat::home::Home;
use serde_json::json;

use super::approvals::{open, operator};
use super::args::{NodeCommand, NodeTokensCommand};
use super::term::say;

/// `moat node serve`: `moat serve` with the node's listener on `listen` or `node.listen`.
pub async fn serve(home: Home, listen: Option<std::net::SocketAddr>) -> anyhow::Result<ExitCode> {
    let (config, _) = moat::config::load(&home.config_file())?;
    if listen.is_none() && !config.node.enabled() {
        anyhow::bail!(
            "serve as a node: give --listen ADDR or set [node] listen in moat.toml (docs/nodes.md)"
        );
    }
    let args = super::args::ServeArgs {
        tcp: None,
        idle_exit: None,
        node_listen: listen,
    };
    super::serve::run(home, args).await
}

pub fn run(home: Home, cmd: NodeCommand) -> anyhow::Result<ExitCode> {
    let a = open(&home)?;
    let store = a.store();
    match cmd {
        NodeCommand::Serve { .. } => unreachable!("served by `serve` above"),
        NodeCommand::Info { json } => {
            let (config, _) = moat::config::load(&home.config_file())?;
            let id = moat::node::NodeIdentity::load_or_make(&home)
                .context("read the node's certificate")?;
            if json {
                super::term::json_pretty(&json!({
                    "fingerprint": id.fingerprint(),
                    "listen": config.node.listen,
                }))?;
            } else {
                say!("fingerprint {}", id.fingerprint());
                if config.node.enabled() {
                    say!("listen      https://{}", config.node.listen);
                } else {
                    say!("listen      (off: set [node] listen, or moat serve --node-listen ADDR)");
                }
            }
        }
        NodeCommand::Tokens(NodeTokensCommand::Add { gateway }) => {
            moat::node::check_name(&gateway)?;
            let d = operator(&a, &format!("node tokens add {gateway}"), None)?;
            let token = moat::node::new_token();
            store.issue_node_token(&gateway, &moat::node::hash_token(&token))?;
            store.audit(
                "node-token-add",
                None,
                None,
                &d.label(),
                &format!("gateway {gateway}"),
            )?;
            say!("{token}");
            super::term::say_err!(
                "moat: token for gateway {gateway} (shown once; this node keeps only its hash). On the gateway: moat nodes add NAME https://HOST:PORT --fingerprint … --token …"
            );
        }
        NodeCommand::Tokens(NodeTokensCommand::List { json }) => {
            let rows = store.node_tokens()?;
            if json {
                let v: Vec<_> = rows
                    .iter()
                    .map(|r| json!({"gateway": r.gateway, "createdAtMs": r.created_at_ms, "revokedAtMs": r.revoked_at_ms}))
                    .collect();
                super::term::json_pretty(&v)?;
            } else if rows.is_empty() {
                say!("no tokens issued (moat node tokens add GATEWAY)");
            } else {
                for r in rows {
                    let state = if r.revoked_at_ms.is_some() {
                        "revoked"
                    } else {
                        "live"
                    };
                    say!("{:<32}  {state}", r.gateway);
                }
            }
        }
        NodeCommand::Tokens(NodeTokensCommand::Revoke { gateway }) => {
            moat::node::check_name(&gateway)?;
            let d = operator(&a, &format!("node tokens revoke {gateway}"), None)?;
            if !store.revoke_node_token(&gateway)? {
                anyhow::bail!("revoke the token of gateway `{gateway}`: it has no live token");
            }
            store.audit(
                "node-token-revoke",
                None,
                None,
                &d.label(),
                &format!("gateway {gateway}"),
            )?;
            say!("revoked the token of gateway {gateway}");
        }
    }
    Ok(ExitCode::SUCCESS)
}
