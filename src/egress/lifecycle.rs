//! The I/O shell around [`super::container`]: creates a session's internal network, the
//! proxy image and container, and the daemon's control socket; removes them with the
//! session (docs/security.md, "Network egress").

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use sha2::{Digest, Sha256};

use super::container::{proxy_spec, EgressNames, EGRESS_LABEL};
use super::gate::{self, Gate};
use crate::runtime::{Engine, RuntimeError};

/// The user the proxy runs as: moat's own (so it can use the 0600 socket moat made), or
/// `nobody` when moat runs as root (the socket is then handed to `nobody`).
pub fn proxy_user() -> (u32, u32) {
    let (uid, gid) = (
        nix::unistd::geteuid().as_raw(),
        nix::unistd::getegid().as_raw(),
    );
    if uid == 0 {
        (65534, 65534)
    } else {
        (uid, gid)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum LifecycleError {
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    #[error(transparent)]
    Egress(#[from] super::EgressError),
    #[error("prepare the egress directory {path}")]
    Dir {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("read the subnet of network {0} (the proxy serves only that subnet)")]
    Subnet(String),
    #[error("make network {0} walled (the engine kept a host address or a route on it)")]
    Unwalled(String),
    #[error("read moat's own executable for the proxy image")]
    OwnExe(#[source] std::io::Error),
    #[error("attach the proxy to sandbox.egress.outbound_network `{network}` (does that network exist?)")]
    Outbound {
        network: String,
        #[source]
        source: RuntimeError,
    },
}

/// Makes sure one session's egress parts exist and run; returns the control-socket task
/// (abort it when the session goes).
pub async fn ensure(
    runtime: &dyn Engine,
    container: &str,
    egress_dir: &Path,
    base_image: &str,
    egress: &crate::config::EgressConfig,
    gate: Arc<Gate>,
) -> Result<tokio::task::JoinHandle<()>, LifecycleError> {
    let names = EgressNames::for_container(container);
    let user = proxy_user();
    prepare_dir(egress_dir, user)?;
    let task = gate::listen(egress_dir, Some(user), gate)?;
    let result = async {
        let labels = BTreeMap::from([(EGRESS_LABEL.to_string(), container.to_string())]);
        let mut network = runtime.ensure_network(&names.network, &labels).await?;
        if !network.walled {
            network = rebuild_network(runtime, &names, container, &labels).await?;
        }
        // The host's side of the wall, raised again on every start (a rule lost to a
        // firewall reload comes back with the next command).
        if egress.host_firewall {
            runtime.shut_host_input(&names.network).await?;
        }
        let subnets = network.subnets;
        if subnets.is_empty() || super::peers::parse_list(&subnets.join(",")).is_err() {
            return Err(LifecycleError::Subnet(names.network.clone()));
        }
        match runtime.inspect_container(&names.proxy).await? {
            Some(c) if c.running => {}
            Some(c) => runtime.start_container(&c.id).await?,
            None => {
                let image = ensure_image(runtime, base_image).await?;
                let spec = proxy_spec(
                    &names,
                    container,
                    &image,
                    user,
                    &egress_dir.display().to_string(),
                    &subnets,
                    &egress.dns,
                );
                let id = runtime.create_container(&spec).await?;
                let outbound = egress.outbound_network.as_str();
                if let Err(source) = runtime.connect_network(outbound, &id).await {
                    let _ = runtime.remove_container(&id).await;
                    return Err(LifecycleError::Outbound {
                        network: outbound.to_string(),
                        source,
                    });
                }
                if let Err(e) = runtime.start_container(&id).await {
                    let _ = runtime.remove_container(&id).await;
                    return Err(e.into());
                }
            }
        }
        Ok(())
    }
    .await;
    if let Err(e) = result {
        task.abort();
        return Err(e);
    }
    Ok(task)
}

/// Replaces a session network an older moat made without the wall (the host had an address
/// on it): the proxy goes (it is made again on the new network), the sandbox container leaves
/// the old network and joins the new one, so an adopted session is walled like a new one
/// (docs/security.md, "Network egress").
async fn rebuild_network(
    runtime: &dyn Engine,
    names: &EgressNames,
    container: &str,
    labels: &BTreeMap<String, String>,
) -> Result<crate::runtime::WalledNetwork, LifecycleError> {
    tracing::warn!(network = %names.network, "rebuilding an egress network made without the wall");
    runtime.remove_container(&names.proxy).await?;
    let sandbox = runtime.inspect_container(container).await?;
    if sandbox.is_some() {
        runtime
            .disconnect_network(&names.network, container)
            .await?;
    }
    runtime.open_host_input(&names.network).await;
    runtime.remove_network(&names.network).await?;
    let network = runtime.ensure_network(&names.network, labels).await?;
    if !network.walled {
        return Err(LifecycleError::Unwalled(names.network.clone()));
    }
    if sandbox.is_some() {
        runtime.connect_network(&names.network, container).await?;
    }
    Ok(network)
}

/// Removes a session's proxy and network (missing ones are fine): after the sandbox
/// container, since a network with members cannot go.
pub async fn remove(runtime: &dyn Engine, container: &str) -> Result<(), RuntimeError> {
    let names = EgressNames::for_container(container);
    runtime.remove_container(&names.proxy).await?;
    runtime.open_host_input(&names.network).await;
    runtime.remove_network(&names.network).await
}

fn prepare_dir(dir: &Path, (uid, gid): (u32, u32)) -> Result<(), LifecycleError> {
    let err = |source| LifecycleError::Dir {
        path: dir.to_path_buf(),
        source,
    };
    std::fs::create_dir_all(dir).map_err(err)?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).map_err(err)?;
    if nix::unistd::geteuid().is_root() {
        std::os::unix::fs::chown(dir, Some(uid), Some(gid)).map_err(err)?;
    }
    Ok(())
}

/// One build at a time in this process: two sessions starting together build once.
static BUILD: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The proxy image for this very moat binary, built from `base` (the sandbox image) when
/// missing: no registry is needed, and the proxy always runs the same code as the daemon.
pub async fn ensure_image(runtime: &dyn Engine, base: &str) -> Result<String, LifecycleError> {
    let exe = std::env::current_exe().map_err(LifecycleError::OwnExe)?;
    let meta = std::fs::metadata(&exe).map_err(LifecycleError::OwnExe)?;
    let mtime = meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let id = format!(
        "{}:{}:{}:{base}",
        env!("CARGO_PKG_VERSION"),
        meta.len(),
        mtime
    );
    let tag = format!(
        "{PROXY_REPOSITORY}:{}",
        hex::encode(&Sha256::digest(id.as_bytes())[..6])
    );
    let _one = BUILD.lock().await;
    if runtime.image_exists(&tag).await? {
        return Ok(tag);
    }
    let binary = std::fs::read(&exe).map_err(LifecycleError::OwnExe)?;
    let context = context_tar(&binary).map_err(LifecycleError::OwnExe)?;
    drop(binary);
    runtime
        .build_image(
            context,
            &tag,
            vec![("BASE".into(), base.to_string())],
            Vec::new(),
            Box::new(|line: &str| tracing::debug!("proxy image: {line}")),
        )
        .await?;
    // Each moat binary gets its own image (hundreds of MB for a debug build): the older ones
    // go, except those a running proxy still uses (the engine refuses to remove them).
    for old in runtime
        .image_tags(PROXY_REPOSITORY)
        .await
        .unwrap_or_default()
    {
        if old != tag {
            let _ = runtime.remove_image(&old).await;
        }
    }
    Ok(tag)
}

/// The repository of the proxy images.
const PROXY_REPOSITORY: &str = "moat-egress-proxy";

const DOCKERFILE: &str = "ARG BASE\nFROM ${BASE}\nCOPY moat /usr/local/bin/moat\n";

fn context_tar(binary: &[u8]) -> std::io::Result<Vec<u8>> {
    let mut builder = tar::Builder::new(Vec::with_capacity(binary.len() + 4096));
    for (name, data, mode) in [
        ("Dockerfile", DOCKERFILE.as_bytes(), 0o644),
        ("moat", binary, 0o755),
    ] {
        let mut header = tar::Header::new_gnu();
        header.set_size(data.len() as u64);
        header.set_mode(mode);
        header.set_cksum();
        builder.append_data(&mut header, name, data)?;
    }
    builder.into_inner()
}
