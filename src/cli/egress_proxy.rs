//! `moat egress-proxy`: the proxy a session with `sandbox.network = "egress"` reaches the
//! network through, run by moat in the session's proxy container (docs/security.md,
//! "Network egress"). It needs no home, config or token: only its control socket.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;

pub async fn run(listen: &str, control: PathBuf, peers: &str) -> anyhow::Result<ExitCode> {
    let peers = moat::egress::peers::parse_list(peers)?;
    anyhow::ensure!(
        !peers.is_empty(),
        "run the egress proxy: --peers names no subnet"
    );
    moat::egress::proxy::run(listen, control, peers)
        .await
        .context("run the egress proxy")?;
    Ok(ExitCode::SUCCESS)
}
