//! Network calls: the per-session internal network and the proxy's second leg
//! (docs/security.md, "Network egress").

use std::collections::{BTreeMap, HashMap};

use bollard::models::{
    EndpointSettings, NetworkConnectRequest, NetworkCreateRequest, NetworkDisconnectRequest,
};
use bollard::query_parameters::ListNetworksOptions;

use super::DockerRuntime;
use crate::runtime::{RuntimeError, WalledNetwork};

/// The bridge driver's option that leaves the host without an address on the bridge.
const INHIBIT_IPV4: &str = "com.docker.network.bridge.inhibit_ipv4";
/// The bridge driver's option that names the host interface.
const BRIDGE_NAME: &str = "com.docker.network.bridge.name";

impl DockerRuntime {
    pub(super) async fn ensure_network(
        &self,
        name: &str,
        labels: &BTreeMap<String, String>,
    ) -> Result<WalledNetwork, RuntimeError> {
        if let Some(found) = self.walled(name).await? {
            return Ok(found);
        }
        let request = NetworkCreateRequest {
            name: name.to_string(),
            driver: Some("bridge".into()),
            // No route out of the host …
            internal: Some(true),
            // … and no IPv6: the engine then turns IPv6 off inside the container's network
            // namespace, so no link-local address reaches the host's side of the bridge.
            enable_ipv6: Some(false),
            // … and no host address on the bridge: an internal network alone still gives the
            // host the gateway address, and traffic to the host itself is not forwarded
            // traffic, so the internal network's forwarding rules never see it
            // (docs/ARCHITECTURE.md, "Docker facts relied on").
            options: Some(HashMap::from([(
                INHIBIT_IPV4.to_string(),
                "true".to_string(),
            )])),
            labels: Some(labels.clone().into_iter().collect()),
            ..Default::default()
        };
        match self.docker.create_network(request).await {
            Ok(_) => {}
            // Created by a racing call in the meantime.
            Err(bollard::errors::Error::DockerResponseServerError {
                status_code: 409, ..
            }) => {}
            Err(e) => return Err(RuntimeError::engine(format!("create network {name}"), e)),
        }
        Ok(self.walled(name).await?.unwrap_or(WalledNetwork {
            subnets: Vec::new(),
            walled: false,
            gateways: Vec::new(),
        }))
    }

    /// A network's subnets and whether it is walled; `None` when it does not exist.
    async fn walled(&self, name: &str) -> Result<Option<WalledNetwork>, RuntimeError> {
        match self.docker.inspect_network(name, None).await {
            Ok(n) => Ok(Some(WalledNetwork {
                walled: n.internal == Some(true)
                    && n.enable_ipv6 != Some(true)
                    && n.options
                        .as_ref()
                        .and_then(|o| o.get(INHIBIT_IPV4))
                        .is_some_and(|v| v == "true"),
                gateways: n
                    .ipam
                    .as_ref()
                    .and_then(|i| i.config.as_ref())
                    .into_iter()
                    .flatten()
                    .filter_map(|c| c.gateway.clone())
                    .collect(),
                subnets: n
                    .ipam
                    .and_then(|i| i.config)
                    .unwrap_or_default()
                    .into_iter()
                    .filter_map(|c| c.subnet)
                    .collect(),
            })),
            Err(bollard::errors::Error::DockerResponseServerError {
                status_code: 404, ..
            }) => Ok(None),
            Err(e) => Err(RuntimeError::engine(format!("inspect network {name}"), e)),
        }
    }

    /// The host interface of a bridge network: the name its options give, or the engine's
    /// default `br-` and the first 12 characters of its id. `None` when it does not exist.
    async fn bridge(&self, name: &str) -> Result<Option<String>, RuntimeError> {
        match self.docker.inspect_network(name, None).await {
            Ok(n) => Ok(Some(
                match n.options.as_ref().and_then(|o| o.get(BRIDGE_NAME)) {
                    Some(b) => b.clone(),
                    None => format!(
                        "br-{}",
                        n.id.unwrap_or_default()
                            .chars()
                            .take(12)
                            .collect::<String>()
                    ),
                },
            )),
            Err(bollard::errors::Error::DockerResponseServerError {
                status_code: 404, ..
            }) => Ok(None),
            Err(e) => Err(RuntimeError::engine(format!("inspect network {name}"), e)),
        }
    }

    pub(super) async fn shut_input(&self, name: &str) -> Result<(), RuntimeError> {
        let bridge = self
            .bridge(name)
            .await?
            .ok_or_else(|| RuntimeError::Other {
                action: format!("wall network {name}"),
                message: "the network does not exist".into(),
            })?;
        tokio::task::spawn_blocking(move || super::host_firewall::raise(&bridge))
            .await
            .map_err(|e| RuntimeError::Other {
                action: format!("wall network {name}"),
                message: e.to_string(),
            })?
            .map_err(|e| RuntimeError::Other {
                action: format!("wall network {name}"),
                message: e.to_string(),
            })
    }

    pub(super) async fn open_input(&self, name: &str) {
        if let Ok(Some(bridge)) = self.bridge(name).await {
            let _ = tokio::task::spawn_blocking(move || super::host_firewall::lower(&bridge)).await;
        }
    }

    pub(super) async fn drop_network(&self, name: &str) -> Result<(), RuntimeError> {
        match self.docker.remove_network(name).await {
            Ok(()) => Ok(()),
            Err(bollard::errors::Error::DockerResponseServerError {
                status_code: 404, ..
            }) => Ok(()),
            Err(e) => Err(RuntimeError::engine(format!("remove network {name}"), e)),
        }
    }

    pub(super) async fn networks(&self, label: &str) -> Result<Vec<String>, RuntimeError> {
        let options = ListNetworksOptions {
            filters: Some(HashMap::from([(
                "label".to_string(),
                vec![label.to_string()],
            )])),
        };
        let list = self
            .docker
            .list_networks(Some(options))
            .await
            .map_err(|e| RuntimeError::engine("list networks", e))?;
        Ok(list.into_iter().filter_map(|n| n.name).collect())
    }

    pub(super) async fn attach(&self, network: &str, container: &str) -> Result<(), RuntimeError> {
        let request = NetworkConnectRequest {
            container: container.to_string(),
            endpoint_config: Some(EndpointSettings::default()),
        };
        self.docker
            .connect_network(network, request)
            .await
            .map_err(|e| {
                RuntimeError::engine(format!("connect {container} to network {network}"), e)
            })
    }

    pub(super) async fn detach(&self, network: &str, container: &str) -> Result<(), RuntimeError> {
        let request = NetworkDisconnectRequest {
            container: container.to_string(),
            force: Some(true),
        };
        match self.docker.disconnect_network(network, request).await {
            Ok(()) => Ok(()),
            Err(bollard::errors::Error::DockerResponseServerError {
                status_code: 404, ..
            }) => Ok(()),
            Err(e) => Err(RuntimeError::engine(
                format!("disconnect {container} from network {network}"),
                e,
            )),
        }
    }
}
