//! `moat nodes …`: the remote nodes this moat paired with (docs/nodes.md, "Pairing"). `add`
//! reaches the node through the pinned certificate with the token before it keeps anything,
//! so a wrong fingerprint or token is refused at once, by name.

use std::process::ExitCode;
use std::sync::Arc;

use moat::home::Home;
use moat::node::{Nodes, Reach};
use serde_json::json;

use super::approvals::{open, operator};
use super::args::NodesCommand;
use super::term::say;

pub async fn run(home: Home, cmd: NodesCommand) -> anyhow::Result<ExitCode> {
    let a = open(&home)?;
    let nodes = Nodes::new(Arc::new(moat::store::Store::open(&home.state_db())?), "");
    match cmd {
        NodesCommand::Add {
            name,
            url,
            fingerprint,
            token,
        } => {
            operator(&a, &format!("nodes add {name}"), None)?;
            let info = nodes.add(&name, &url, &fingerprint, &token).await?;
            say!(
                "paired with node {name}: moat {} offering {} (on its {}); it knows this gateway as {}",
                info.version,
                info.offers.join(", "),
                info.node_hosts.join(" or "),
                info.gateway
            );
        }
        NodesCommand::List { json } => {
            let rows = nodes.list().await?;
            if json {
                let v: Vec<_> = rows
                    .iter()
                    .map(|(r, reach)| {
                        let mut o =
                            json!({"name": r.name, "url": r.url, "fingerprint": r.fingerprint});
                        match reach {
                            Reach::Up(info) => {
                                o["reachable"] = true.into();
                                o["info"] = serde_json::to_value(info).unwrap_or_default();
                            }
                            Reach::Down(why) => {
                                o["reachable"] = false.into();
                                o["error"] = why.clone().into();
                            }
                        }
                        o
                    })
                    .collect();
                super::term::json_pretty(&v)?;
            } else if rows.is_empty() {
                say!("no nodes paired (moat nodes add NAME https://HOST:PORT --fingerprint … --token …)");
            } else {
                for (r, reach) in rows {
                    match reach {
                        Reach::Up(info) => say!(
                            "{:<16}  reachable    {}  moat {} ({})  offers {} on {}",
                            r.name,
                            r.url,
                            info.version,
                            moat::output::escape_display(&info.build),
                            info.offers.join(","),
                            info.node_hosts.join(",")
                        ),
                        Reach::Down(why) => say!(
                            "{:<16}  unreachable  {}  {}",
                            r.name,
                            r.url,
                            moat::output::escape_display(&why)
                        ),
                    }
                }
            }
        }
        NodesCommand::Rm { name } => {
            operator(&a, &format!("nodes rm {name}"), None)?;
            if !nodes.remove(&name)? {
                anyhow::bail!("remove node `{name}`: no such node is paired");
            }
            say!("removed node {name}");
        }
    }
    Ok(ExitCode::SUCCESS)
}
